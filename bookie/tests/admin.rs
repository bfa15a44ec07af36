//! End to end, operator side: a real `bookie` process with its HTTP admin server on a free
//! port. Scrapes /metrics after adds, calls every admin endpoint, switches read-only over HTTP
//! (adds get EREADONLY, reads go on, recovery adds go on) and back, and turns read-only by
//! itself when a tiny diskUsageThreshold (from a bk_server.conf) is exceeded.

use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
mod common;

use common::bookie::{BookieBuilder, BookieProcess};
use common::{entry, free_port, read};
use net::client::blocking::BlockingClient;
use net::{Request, Response, StatusCode};

/// A listening bookie with two unpinned shards, an admin server, data in `dir` and `extra`
/// arguments, on free ports.
fn start(dir: &Path, extra: &[&str]) -> BookieProcess {
    BookieBuilder::serve(free_port())
        .args(["--shards", "2", "--no-pin"])
        .http_port(free_port())
        .args(["--write-cache-mb", "64"])
        .data_dir(dir)
        .args(extra)
        .start()
}

fn add(ledger: i64, e: i64, recovery: bool) -> Request {
    Request::AddEntry {
        ledger_id: ledger,
        entry_id: e,
        master_key: Bytes::from(vec![7u8; 20]),
        body: entry(ledger, e, e - 1, b"admin test"),
        recovery,
        write_flags: None,
    }
}

fn status_of(c: &mut BlockingClient, r: Request) -> StatusCode {
    c.call_v3(r, None).expect("call").response.status()
}

/// `name{labels} value` → value, for the first line starting with `prefix`.
fn sample(metrics: &str, prefix: &str) -> Option<f64> {
    metrics
        .lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit_once(' '))
        .and_then(|(_, v)| v.parse().ok())
}

#[test]
fn endpoints_metrics_and_manual_read_only() {
    let dir = common::tempdir("bookie-admin-");
    let mut b = start(dir.path(), &[]);
    let mut c = b.client();

    let (code, body) = b.http("GET", "/heartbeat", "");
    assert_eq!((code, body.as_str()), (200, "OK\n"));
    let (code, before) = b.http("GET", "/metrics", "");
    assert_eq!(code, 200);
    let adds_before = sample(
        &before,
        "bookkeeper_server_ADD_ENTRY_REQUEST_count{success=\"true\"}",
    )
    .unwrap();
    for e in 0..20 {
        assert_eq!(status_of(&mut c, add(5, e, false)), StatusCode::EOK);
        // A second ledger, likely on the other shard (cross-shard path).
        assert_eq!(status_of(&mut c, add(6, e, false)), StatusCode::EOK);
    }
    assert_eq!(status_of(&mut c, read(5, 3)), StatusCode::EOK);
    let (_, after) = b.http("GET", "/metrics", "");
    let adds_after = sample(
        &after,
        "bookkeeper_server_ADD_ENTRY_REQUEST_count{success=\"true\"}",
    )
    .unwrap();
    assert_eq!(adds_after - adds_before, 40.0, "{after}");
    assert!(
        sample(
            &after,
            "bookkeeper_server_READ_ENTRY_REQUEST_count{success=\"true\"}"
        )
        .unwrap()
            >= 1.0
    );
    assert!(sample(&after, "bookie_WRITE_BYTES").unwrap() > 0.0);
    assert!(after
        .contains("bookie_journal_JOURNAL_ADD_ENTRY_count{journalIndex=\"0\",success=\"true\"}"));
    assert!(after.contains("bookie_rs_stage_latency_ms_count{stage=\"journal\"}"));
    assert_eq!(sample(&after, "bookie_SERVER_STATUS"), Some(1.0));
    assert_eq!(b.http("PUT", "/metrics", "").0, 403);

    let (code, info) = b.http("GET", "/api/v1/bookie/info", "");
    assert_eq!(code, 200);
    let info: serde_json::Value = serde_json::from_str(&info).unwrap();
    assert!(info["totalSpace"].as_u64().unwrap() >= info["freeSpace"].as_u64().unwrap());
    let (code, state) = b.http("GET", "/api/v1/bookie/state", "");
    assert_eq!(code, 200);
    let state: serde_json::Value = serde_json::from_str(&state).unwrap();
    assert_eq!(state["running"], true);
    assert_eq!(state["readOnly"], false);
    assert_eq!(state["shuttingDown"], false);
    assert_eq!(state["availableForHighPriorityWrites"], true);
    assert_eq!(b.http("GET", "/api/v1/bookie/is_ready", "").0, 200);
    let (code, ledgers) = b.http("GET", "/api/v1/bookie/list_ledgers", "");
    assert_eq!(code, 200);
    let ledgers: serde_json::Value = serde_json::from_str(&ledgers).unwrap();
    assert_eq!(ledgers["ledgers"], serde_json::json!([5, 6]));
    // GC: standalone there is no ledger listing, but compaction can be forced and watched.
    let (code, text) = b.http("PUT", "/api/v1/bookie/gc", "{\"forceMinor\":\"true\"}");
    assert_eq!(code, 200, "{text}");
    assert!(text.starts_with("\"Triggered GC on BookieServer"), "{text}");
    let (code, text) = b.http("GET", "/api/v1/bookie/gc", "");
    assert_eq!(code, 200);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(v["is_in_force_gc"].is_string(), "{text}");
    for path in ["/api/v1/bookie/gc_details", "/api/v1/bookie/gc/details"] {
        let (code, text) = b.http("GET", path, "");
        assert_eq!(code, 200);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let shards = v.as_array().expect("one entry per shard");
        assert!(!shards.is_empty());
        for key in [
            "forceCompacting",
            "majorCompacting",
            "minorCompacting",
            "lastMajorCompactionTime",
            "lastMinorCompactionTime",
            "majorCompactionCounter",
            "minorCompactionCounter",
        ] {
            assert!(shards[0].get(key).is_some(), "{key} missing in {text}");
        }
    }
    let (code, text) = b.http(
        "PUT",
        "/api/v1/bookie/gc/suspend_compaction",
        "{\"suspendMajor\":true}",
    );
    // Java's answer names what was suspended; GET gives the state.
    assert_eq!(code, 200);
    assert!(
        text.starts_with("\"Suspend majorGC on BookieServer: "),
        "{text}"
    );
    let (_, text) = b.http("GET", "/api/v1/bookie/gc/suspend_compaction", "");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["isMajorGcSuspended"], "true");
    assert_eq!(v["isMinorGcSuspended"], "false");
    let (_, text) = b.http(
        "PUT",
        "/api/v1/bookie/gc/resume_compaction",
        "{\"resumeMajor\":true}",
    );
    assert!(
        text.starts_with("\"Resume majorGC on BookieServer: "),
        "{text}"
    );
    let (_, text) = b.http("GET", "/api/v1/bookie/gc/suspend_compaction", "");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["isMajorGcSuspended"], "false");
    // Vert.x's page for a path that is no route; Java's 500 for a body it cannot read.
    let (code, text) = b.http("GET", "/no/such/route", "");
    assert_eq!(
        (code, text.as_str()),
        (404, "<html><body><h1>Resource not found</h1></body></html>")
    );
    assert_eq!(
        b.http("PUT", "/api/v1/bookie/state/readonly", "nonsense").0,
        500
    );
    assert_eq!(b.http("BREW", "coffee", "").0, 400);

    // Read-only over HTTP: adds refused, reads and recovery adds go on.
    let (code, body) = b.http(
        "PUT",
        "/api/v1/bookie/state/readonly",
        "{\"readOnly\":true}",
    );
    assert_eq!(
        (code, body.contains("\"readOnly\" : true")),
        (200, true),
        "{body}"
    );
    let (_, body) = b.http("GET", "/api/v1/bookie/state/readonly", "");
    assert!(body.contains("\"readOnly\" : true"), "{body}");
    assert_eq!(status_of(&mut c, add(5, 20, false)), StatusCode::EREADONLY);
    assert_eq!(status_of(&mut c, add(6, 20, false)), StatusCode::EREADONLY);
    assert_eq!(status_of(&mut c, read(5, 19)), StatusCode::EOK);
    assert_eq!(status_of(&mut c, read(6, 0)), StatusCode::EOK);
    // A recovery add at high priority (as the Java client sends it) is still taken.
    let r = c
        .call_v2(add(5, 20, true), true)
        .expect("call")
        .response
        .status();
    assert_eq!(r, StatusCode::EOK);
    let (_, m) = b.http("GET", "/metrics", "");
    assert_eq!(sample(&m, "bookie_SERVER_STATUS"), Some(0.0));

    let (code, _) = b.http(
        "PUT",
        "/api/v1/bookie/state/readonly",
        "{\"readOnly\":false}",
    );
    assert_eq!(code, 200);
    assert_eq!(status_of(&mut c, add(5, 21, false)), StatusCode::EOK);
    b.stop();
}

#[test]
fn read_only_when_the_disk_threshold_is_exceeded() {
    let dir = common::tempdir("bookie-admin-");
    let conf = dir.path().join("bk_server.conf");
    std::fs::write(
        &conf,
        "diskUsageThreshold=0.0001\ndiskUsageWarnThreshold=0.0001\ndiskCheckInterval=100\n\
         minUsableSizeForHighPriorityWrites=0\nsomeJavaOnlyKey=1\n\
         httpServerKeyStorePassword=secret\n",
    )
    .unwrap();
    let data = dir.path().join("data");
    let mut b = start(
        &data,
        &["--conf", conf.to_str().unwrap(), "--bind", "127.0.0.1"],
    );
    let mut c = b.client();
    // Java's server_config: the keys as given (a password is not shown); no change at run time.
    let (code, body) = b.http("GET", "/api/v1/config/server_config", "");
    assert_eq!(code, 200, "{body}");
    let given: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(given["someJavaOnlyKey"], "1", "{body}");
    assert_eq!(given["diskCheckInterval"], "100", "{body}");
    assert_eq!(given["httpServerKeyStorePassword"], "(not shown)", "{body}");
    let (code, _) = b.http(
        "PUT",
        "/api/v1/config/server_config",
        "{\"gcWaitTime\":\"1\"}",
    );
    assert_eq!(code, 200);
    // As Java: kept in memory and shown, not applied.
    let (_, body) = b.http("GET", "/api/v1/config/server_config", "");
    let shown: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(shown["gcWaitTime"], "1", "{body}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, body) = b.http("GET", "/api/v1/bookie/state", "");
        if body.contains("\"readOnly\" : true") {
            break;
        }
        assert!(Instant::now() < deadline, "never turned read-only: {body}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(status_of(&mut c, add(9, 0, false)), StatusCode::EREADONLY);
    assert_eq!(status_of(&mut c, read(9, 0)), StatusCode::ENOLEDGER);
    // Manual writable does not override a full disk: the checker keeps it read-only.
    let (code, body) = b.http(
        "PUT",
        "/api/v1/bookie/state/readonly",
        "{\"readOnly\":false}",
    );
    assert_eq!(code, 200);
    assert!(body.contains("\"readOnly\" : true"), "{body}");
    match c.call_v3(add(9, 0, false), None).unwrap().response {
        Response::AddEntry { status, .. } => assert_eq!(status, StatusCode::EREADONLY),
        other => panic!("unexpected {other:?}"),
    }
    b.stop();
}

/// Full disks and compaction (`isForceGCAllowWhenNoSpace`, Java's ledger-dirs listener): with
/// every directory over a tiny `diskUsageThreshold`, the default suspends both compactions, so
/// even a forced major GC compacts nothing; with the key true, collections are forced at the
/// disk checks, without any request, although the bookie is read-only.
#[test]
fn full_disks_suspend_or_force_compaction() {
    let compactions = |b: &BookieProcess| -> (u64, u64) {
        let (code, text) = b.http("GET", "/api/v1/bookie/gc_details", "");
        assert_eq!(code, 200, "{text}");
        let v: serde_json::Value = serde_json::from_str(&text).expect("gc_details is JSON");
        let sum = |k: &str| {
            v.as_array()
                .expect("a list per shard")
                .iter()
                .map(|s| s[k].as_u64().unwrap_or(0))
                .sum::<u64>()
        };
        (sum("majorCompactionCounter"), sum("minorCompactionCounter"))
    };
    let read_only = |b: &BookieProcess| {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let (_, body) = b.http("GET", "/api/v1/bookie/state", "");
            if body.contains("\"readOnly\" : true") {
                return;
            }
            assert!(Instant::now() < deadline, "never turned read-only: {body}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    for force_allowed in [false, true] {
        let dir = common::tempdir("bookie-gc-full-");
        let conf = dir.path().join("bk_server.conf");
        std::fs::write(
            &conf,
            format!(
                "diskUsageThreshold=0.0001\ndiskUsageWarnThreshold=0.0001\ndiskCheckInterval=100\n\
                 gcWaitTime=3600000\nisForceGCAllowWhenNoSpace={force_allowed}\n"
            ),
        )
        .unwrap();
        let data = dir.path().join("data");
        let mut b = start(
            &data,
            &["--conf", conf.to_str().unwrap(), "--bind", "127.0.0.1"],
        );
        read_only(&b);
        if force_allowed {
            let deadline = Instant::now() + Duration::from_secs(10);
            while compactions(&b).0 < 2 {
                assert!(
                    Instant::now() < deadline,
                    "no forced collection while the disks are full"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        } else {
            let (code, text) = b.http("PUT", "/api/v1/bookie/gc", "{\"forceMajor\":true}");
            assert_eq!(code, 200, "{text}");
            std::thread::sleep(Duration::from_secs(2));
            let (_, state) = b.http("GET", "/api/v1/bookie/gc", "");
            assert!(state.contains("is_in_force_gc"), "{state}");
            assert_eq!(
                compactions(&b),
                (0, 0),
                "compaction is suspended on full disks"
            );
        }
        b.stop();
    }
}

/// Every add passes through each stage of the add path once: after 40 adds on two shards
/// (half of them likely crossing to the other shard), the `decode`, `write_cache`,
/// `journal_group_wait`, `journal_write`, `journal_fsync`, `journal` and `reply` histograms
/// each count 40, the cross-shard queue at most 40; the shard threads' scheduler counters are
/// exported.
#[test]
fn every_add_is_counted_in_every_stage() {
    let dir = common::tempdir("bookie-stages-");
    let mut b = start(dir.path(), &[]);
    let mut c = b.client();
    for e in 0..20 {
        assert_eq!(status_of(&mut c, add(11, e, false)), StatusCode::EOK);
        assert_eq!(status_of(&mut c, add(12, e, false)), StatusCode::EOK);
    }
    let count = |metrics: &str, stage: &str| {
        sample(
            metrics,
            &format!("bookie_rs_stage_latency_ms_count{{stage=\"{stage}\"}}"),
        )
        .unwrap_or_else(|| panic!("no {stage} stage in\n{metrics}"))
    };
    let stages = [
        "decode",
        "write_cache",
        "journal_group_wait",
        "journal_write",
        "journal_fsync",
        "journal",
        "reply",
    ];
    // A reply's stage is recorded just after its bytes are written: the client may see the
    // reply first, so wait (briefly) for the last one.
    let deadline = Instant::now() + Duration::from_secs(10);
    let metrics = loop {
        let (code, metrics) = b.http("GET", "/metrics", "");
        assert_eq!(code, 200);
        if count(&metrics, "reply") >= 40.0 || Instant::now() > deadline {
            break metrics;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    for stage in stages {
        assert_eq!(count(&metrics, stage), 40.0, "stage {stage}");
    }
    assert!(count(&metrics, "cross_shard_queue") <= 40.0);
    for thread in ["shard-0", "shard-1", "flush-0", "read-1-0"] {
        for series in [
            "bookie_rs_thread_cpu_seconds_total",
            "bookie_rs_thread_runqueue_wait_seconds_total",
        ] {
            let value = sample(&metrics, &format!("{series}{{thread=\"{thread}\"}}"));
            assert!(value.is_some_and(|v| v >= 0.0), "{series} of {thread}");
        }
    }
    b.stop();
}

/// Container-style configuration: with no conf file, `BK_<key>` variables are the whole
/// configuration (port, directories, admin server, listening interface); `--print-config` says
/// where each value came from; a bad value is an error naming the variable.
#[test]
fn configured_by_bk_environment_variables() {
    let dir = common::tempdir("bookie-env-");
    let (port, http) = (free_port(), free_port());
    let (journal, ledgers) = (dir.path().join("j"), dir.path().join("l"));
    let builder = BookieBuilder::serve_env(port)
        .env("BK_bookiePort", &port.to_string())
        .env("BK_listeningInterface", "lo")
        .env("BK_journalDirectories", journal.to_str().unwrap())
        .env("BK_ledgerDirectories", ledgers.to_str().unwrap())
        .env("BK_httpServerEnabled", "true")
        .env("BK_httpServerPort", &http.to_string())
        .env("BK_DATA_DIR", "/not/used/by/the/bookie")
        .args(["--shards", "1", "--no-pin"])
        .http_port(http);
    let out = builder.command().arg("--print-config").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!(
            "bookiePort={port}    # environment variable BK_bookiePort"
        )),
        "{text}"
    );
    assert!(
        !text.contains("DATA_DIR"),
        "an image helper, not a key: {text}"
    );
    let mut b = builder.start();
    let mut c = b.client();
    assert_eq!(status_of(&mut c, add(3, 0, false)), StatusCode::EOK);
    assert_eq!(status_of(&mut c, read(3, 0)), StatusCode::EOK);
    let (code, _) = b.http("GET", "/api/v1/bookie/state", "");
    assert_eq!(code, 200);
    assert!(
        journal.read_dir().unwrap().next().is_some(),
        "journal in BK_journalDirectories"
    );
    assert!(
        ledgers.read_dir().unwrap().next().is_some(),
        "ledgers in BK_ledgerDirectories"
    );
    b.stop();

    let bad = BookieBuilder::serve_env(port)
        .env("BK_bookiePort", "notaport")
        .command()
        .output()
        .unwrap();
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("environment variable BK_bookiePort"), "{err}");
}

/// One add at a time (a client waiting for each ack, or a quiet topic): the journal closes the
/// group an add opens within `journalMaxGroupWaitMSec` (2 ms), however idle the journal was.
/// Regression: the journal's driver slept on its idle timer (100 ms) through such a group, so
/// every lone add waited ~100 ms. Judged on the median group wait against 16 ms, eight times
/// the bound, so a noisy machine's stalls cannot fail it while the bug cannot pass.
#[test]
fn a_lone_add_is_committed_within_the_group_wait() {
    let dir = common::tempdir("bookie-lone-add-");
    let mut b = start(&dir.path().join("data"), &[]);
    let mut c = b.client();
    for e in 0..40 {
        assert_eq!(status_of(&mut c, add(11, e, false)), StatusCode::EOK);
    }
    let (_, m) = b.http("GET", "/metrics", "");
    let value = |name: &str| -> f64 {
        m.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} not in /metrics"))
    };
    let count = value("bookie_rs_stage_latency_ms_count{stage=\"journal_group_wait\"}");
    let within =
        value("bookie_rs_stage_latency_ms_bucket{stage=\"journal_group_wait\",le=\"16.384\"}");
    assert!(count >= 40.0, "{count}");
    assert!(
        within >= count / 2.0,
        "median group wait above 16 ms: {within} of {count} groups within it"
    );
    b.stop();
}

/// A second bookie on a port another bookie listens on is refused with a clear error, as a
/// Java bookie is; without the check both bound it (SO_REUSEPORT) and split its connections.
#[test]
fn a_port_in_use_is_refused() {
    let dir = common::tempdir("bookie-port-");
    let port = free_port();
    let mut first = BookieBuilder::serve(port)
        .args(["--shards", "1", "--no-pin"])
        .data_dir(&dir.path().join("a"))
        .start();
    let mut second = BookieBuilder::serve(port)
        .args(["--shards", "1", "--no-pin"])
        .data_dir(&dir.path().join("b"))
        .log_to(&dir.path().join("b.log"))
        .spawn();
    let status = second.exit_within(Duration::from_secs(30));
    assert!(!status.success());
    let log = second.log_text();
    assert!(log.contains("cannot listen on"), "{log}");
    assert!(first.alive(), "the first bookie is untouched");
    let mut c = first.client();
    assert_eq!(status_of(&mut c, add(5, 0, false)), StatusCode::EOK);
    first.stop();
}

/// Java's stock bk_server.conf (Apache's and Pulsar's): the admin server off and
/// `statsProviderClass` naming the Prometheus provider, whose own endpoint serves `/metrics` on
/// `prometheusStatsHttpAddress:prometheusStatsHttpPort`. A scrape set up for the Java bookie finds
/// ours there; other paths are not served on it; a port already taken stops the start, as in Java.
#[test]
fn prometheus_provider_serves_metrics_on_its_own_port() {
    let dir = common::tempdir("bookie-prometheus-");
    let metrics_port = free_port();
    let conf = dir.path().join("bk_server.conf");
    std::fs::write(
        &conf,
        format!(
            "httpServerEnabled=false\n\
             statsProviderClass=org.apache.bookkeeper.stats.prometheus.PrometheusMetricsProvider\n\
             prometheusStatsHttpAddress=127.0.0.1\nprometheusStatsHttpPort={metrics_port}\n"
        ),
    )
    .unwrap();
    let port = free_port();
    let mut b = BookieBuilder::serve(port)
        .args(["--shards", "1", "--no-pin", "--write-cache-mb", "16"])
        .args(["--conf", conf.to_str().unwrap(), "--bind", "127.0.0.1"])
        .data_dir(&dir.path().join("data"))
        .start();
    let mut c = b.client();
    assert_eq!(status_of(&mut c, add(3, 0, false)), StatusCode::EOK);
    let (code, body) = common::http(metrics_port, "GET", "/metrics", "");
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        sample(&body, "bookie_SERVER_STATUS"),
        Some(1.0),
        "the bookie's series on the provider's port"
    );
    assert!(
        sample(
            &body,
            "bookkeeper_server_ADD_ENTRY_REQUEST_count{success=\"true\"}"
        )
        .is_some_and(|n| n >= 1.0),
        "the add is counted"
    );
    let (code, _) = common::http(metrics_port, "GET", "/api/v1/bookie/state", "");
    assert_eq!(code, 404, "only /metrics on the provider's endpoint");
    let (code, _) = common::http(metrics_port, "PUT", "/api/v1/bookie/gc", "{}");
    assert_eq!(code, 404, "no admin route on the provider's endpoint");

    // A second bookie with the same conf: the metrics port is taken, and it does not start.
    let mut second = BookieBuilder::serve(free_port())
        .args(["--shards", "1", "--no-pin"])
        .args(["--conf", conf.to_str().unwrap(), "--bind", "127.0.0.1"])
        .data_dir(&dir.path().join("data-2"))
        .log_to(&dir.path().join("second.log"))
        .spawn();
    let status = second.exit_within(Duration::from_secs(30));
    assert!(!status.success());
    let log = second.log_text();
    assert!(log.contains("prometheusStatsHttpPort"), "{log}");
    assert!(b.alive());
    b.stop();
}

/// The admin server serves at most 64 connections at once (`admin::http::MAX_CONNECTIONS`):
/// idle clients holding that many get one more connection closed unanswered, and once they go
/// the server answers again. Without the limit every connection held a task for 10 s.
#[test]
fn the_admin_server_holds_a_bounded_number_of_connections() {
    use std::io::{Read, Write};
    let dir = common::tempdir("bookie-admin-conns-");
    let mut b = start(dir.path(), &[]);
    let port = b.http_port().expect("an admin port");
    let get = || -> String {
        let mut out = String::new();
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let _ = s.write_all(b"GET /heartbeat HTTP/1.1\r\nHost: x\r\n\r\n");
            let _ = s.read_to_string(&mut out);
        }
        out
    };
    assert!(get().starts_with("HTTP/1.1 200"));
    let idle: Vec<std::net::TcpStream> = (0..64)
        .map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).unwrap())
        .collect();
    // Every idle connection accepted and holding its slot (the server reads their heads).
    std::thread::sleep(Duration::from_millis(300));
    let answer = get();
    assert!(
        answer.is_empty(),
        "a 65th connection is closed unanswered: {answer:?}"
    );
    drop(idle);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let answer = get();
        if answer.starts_with("HTTP/1.1 200") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never answered again: {answer:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    b.stop();
}
