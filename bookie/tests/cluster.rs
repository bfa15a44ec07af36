//! End to end, cluster mode: a real ZooKeeper 3.8 (`scripts/zk`, Debian package) and a real
//! `bookie serve --conf` with `zkServers` set. The bookie checks and stamps its cookies,
//! registers under `/ledgers/available/<id>`, follows the read-only flag (switched over HTTP)
//! into `/ledgers/available/readonly/<id>`, serves adds and reads, unregisters on SIGTERM (exit
//! 0), and a restart with a changed ledger directory is refused (cookie mismatch, exit 1).
//!
//! Without ZooKeeper installed the test prints `SKIPPED(zookeeper not installed)` and passes,
//! unless `BOOKIE_REQUIRE_ZK=1` (CI), which makes it fail.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use metadata::{cluster, zk, BookieList, MetadataConfig};
mod common;

use common::bookie::{connect, BookieBuilder, BookieProcess};
use common::{entry, free_port, http, read};
use net::client::blocking::BlockingClient;
use net::{Request, Response, StatusCode};

/// A throw-away ZooKeeper, stopped on drop (also when the test fails).
struct Zk {
    dir: tempfile::TempDir,
    port: u16,
    /// The data of a server replaced by [`Zk::swap`].
    other: Option<tempfile::TempDir>,
}

fn zk_script(cmd: &str, dir: &Path) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/zk");
    let out = Command::new("bash")
        .arg(script)
        .arg(cmd)
        .arg(dir)
        .output()
        .expect("run scripts/zk");
    assert!(
        out.status.success(),
        "scripts/zk {cmd} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

impl Zk {
    fn start(test: &str) -> Option<Zk> {
        let jars = std::env::var("ZK_JAR_DIR").unwrap_or_else(|_| "/usr/share/java".into());
        let installed = Path::new(&jars).join("zookeeper.jar").exists()
            && Command::new("java")
                .arg("-version")
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false);
        if !installed {
            eprintln!(
                "\n*** SKIPPED(zookeeper not installed): {test} — apt-get install -y zookeeper ***\n"
            );
            assert!(
                std::env::var("BOOKIE_REQUIRE_ZK").as_deref() != Ok("1"),
                "BOOKIE_REQUIRE_ZK=1 but ZooKeeper is not installed"
            );
            return None;
        }
        let dir = common::tempdir("bookie-cluster-");
        let port = zk_script("start", dir.path())
            .parse()
            .expect("scripts/zk prints the port");
        Some(Zk {
            dir,
            port,
            other: None,
        })
    }

    fn servers(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Stops this server and starts another on the same port: an empty one the first time
    /// (the metadata wiped), the original one again the next time.
    fn swap(&mut self) {
        zk_script("stop", self.dir.path());
        let next = self
            .other
            .take()
            .unwrap_or_else(|| common::tempdir("bookie-cluster-"));
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/zk");
        let out = Command::new("bash")
            .arg(script)
            .arg("start")
            .arg(next.path())
            .arg(self.port.to_string())
            .output()
            .expect("run scripts/zk");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.other = Some(std::mem::replace(&mut self.dir, next));
    }
}

impl Zk {
    /// Stops this server for `down`, then starts it again with its data on the same port.
    fn outage(&self, down: Duration) {
        zk_script("stop", self.dir.path());
        std::thread::sleep(down);
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/zk");
        let out = Command::new("bash")
            .arg(script)
            .arg("start")
            .arg(self.dir.path())
            .arg(self.port.to_string())
            .output()
            .expect("run scripts/zk");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Zk {
    fn drop(&mut self) {
        zk_script("stop", self.dir.path());
    }
}

/// A runtime whose worker keeps driving the ZooKeeper session (pings) between the test's
/// `block_on` calls: on a current-thread runtime a long wait lets the session time out.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime")
}

fn list_bookies(zk: &Zk) -> BookieList {
    let cfg = MetadataConfig::for_cluster(&zk.servers(), "/ledgers");
    runtime().block_on(async {
        let client = zk::connect(&cfg).await.expect("connect to ZooKeeper");
        cluster::list_bookies(&client, &cfg)
            .await
            .expect("list bookies")
    })
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn write_conf(path: &Path, zk: &Zk, port: u16, http: u16, journal: &Path, ledgers: &Path) {
    let text = format!(
        "zkServers=127.0.0.1:{}\nzkLedgersRootPath=/ledgers\nzkTimeout=6000\nbookiePort={port}\n\
         journalDirectories={}\nledgerDirectories={}\nhttpServerEnabled=true\n\
         httpServerPort={http}\nhttpServerHost=127.0.0.1\nallowLoopback=true\n\
         advertisedAddress=127.0.0.1\n",
        zk.port,
        journal.display(),
        ledgers.display()
    );
    std::fs::write(path, text).expect("write bk_server.conf");
}

/// `bookie serve --conf conf` (whose bookie port is `port`) with two unpinned shards and a
/// 64 MiB write cache.
fn bookie(conf: &Path, port: u16) -> BookieBuilder {
    BookieBuilder::serve_conf(conf, port).args([
        "--shards",
        "2",
        "--no-pin",
        "--write-cache-mb",
        "64",
    ])
}

/// A test's cluster: its ZooKeeper, temporary directory, free ports and the bk_server.conf
/// written for them.
struct Cluster {
    zk: Zk,
    dir: tempfile::TempDir,
    conf: PathBuf,
    port: u16,
    http_port: u16,
    journal: PathBuf,
    ledgers: PathBuf,
}

impl Cluster {
    /// `None` when ZooKeeper is not installed (and not required).
    fn new(test: &str, dir_prefix: &str) -> Option<Cluster> {
        let zk = Zk::start(test)?;
        let dir = common::tempdir(dir_prefix);
        let conf = dir.path().join("bk_server.conf");
        let (port, http_port) = (free_port(), free_port());
        let journal = dir.path().join("journal");
        let ledgers = dir.path().join("ledgers");
        write_conf(&conf, &zk, port, http_port, &journal, &ledgers);
        Some(Cluster {
            zk,
            dir,
            conf,
            port,
            http_port,
            journal,
            ledgers,
        })
    }
}

/// `bookie initnewcluster --conf conf`, which must succeed.
fn init_cluster(conf: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_bookie"))
        .args(["initnewcluster", "--conf"])
        .arg(conf)
        .output()
        .expect("bookie initnewcluster");
    assert!(
        out.status.success(),
        "initnewcluster: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Starts `bookie serve --conf conf` (whose bookie port is `port`), killed when dropped.
fn start(conf: &Path, port: u16) -> BookieProcess {
    bookie(conf, port).spawn()
}

/// Starts the bookie of `conf` on `port` and waits until it is the one writable bookie listed.
fn start_registered(zk: &Zk, conf: &Path, port: u16) -> BookieProcess {
    let b = start(conf, port);
    let id = format!("127.0.0.1:{port}");
    wait_for("the registration", || {
        list_bookies(zk).writable == [id.clone()]
    });
    b
}

/// `PUT /api/v1/bookie/state/readonly`, which must succeed.
fn set_read_only(http_port: u16, read_only: bool) {
    let body = format!("{{\"readOnly\":{read_only}}}");
    let (code, answer) = http(http_port, "PUT", "/api/v1/bookie/state/readonly", &body);
    assert_eq!(code, 200, "{answer}");
}

fn add(ledger: i64, e: i64) -> Request {
    Request::AddEntry {
        ledger_id: ledger,
        entry_id: e,
        master_key: Bytes::from(vec![7u8; 20]),
        body: entry(ledger, e, e - 1, b"cluster test"),
        recovery: false,
        write_flags: None,
    }
}

#[test]
fn registers_serves_unregisters_and_refuses_a_cookie_mismatch() {
    let Some(Cluster {
        zk,
        dir,
        conf,
        port,
        http_port,
        journal,
        ledgers,
    }) = Cluster::new(
        "registers_serves_unregisters_and_refuses_a_cookie_mismatch",
        "bookie-cluster-",
    )
    else {
        return;
    };
    let id = format!("127.0.0.1:{port}");

    // A bookie of a cluster that was never initialised does not start.
    let out = bookie(&conf, port)
        .command()
        .output()
        .expect("run the bookie");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("/ledgers"), "{stderr}");
    assert!(!journal.join("current").exists(), "stamped a cookie");

    init_cluster(&conf);
    assert!(list_bookies(&zk).writable.is_empty());
    // As after Pulsar's cluster setup, which writes no LAYOUT: the bookie writes it at start,
    // as a Java bookie does.
    let cfg = MetadataConfig::for_cluster(&zk.servers(), "/ledgers");
    let layout = || {
        runtime().block_on(async {
            let client = zk::connect(&cfg).await.expect("connect to ZooKeeper");
            cluster::read_layout(&client, &cfg)
                .await
                .expect("read LAYOUT")
        })
    };
    runtime().block_on(async {
        let client = zk::connect(&cfg).await.expect("connect to ZooKeeper");
        client
            .delete("/ledgers/LAYOUT", None)
            .await
            .expect("delete LAYOUT");
    });
    assert_eq!(layout(), None);

    let mut b = start_registered(&zk, &conf, port);
    assert_eq!(
        layout(),
        Some(cluster::LedgerLayout::Hierarchical),
        "the bookie wrote the missing LAYOUT"
    );
    let listed = Command::new(env!("CARGO_BIN_EXE_bookie"))
        .args(["listbookies", "--conf"])
        .arg(&conf)
        .output()
        .expect("bookie listbookies");
    assert!(listed.status.success());
    assert!(String::from_utf8_lossy(&listed.stdout).contains(&id));
    for d in [&journal, &ledgers] {
        assert!(
            d.join("current/VERSION").exists(),
            "no cookie in {}",
            d.display()
        );
    }

    let mut c = connect(port);
    for e in 0..5 {
        let r = c.call_v3(add(3, e), None).expect("add").response;
        assert_eq!(r.status(), StatusCode::EOK);
    }
    let r = c.call_v3(read(3, 4), None).expect("read").response;
    assert_eq!(r.status(), StatusCode::EOK);
    assert!(matches!(r, Response::ReadEntry { .. }));

    // Read-only moves the registration, writable moves it back.
    set_read_only(http_port, true);
    wait_for("the read-only registration", || {
        let l = list_bookies(&zk);
        l.read_only == [id.clone()] && l.writable.is_empty()
    });
    set_read_only(http_port, false);
    wait_for("the writable registration", || {
        let l = list_bookies(&zk);
        l.writable == [id.clone()] && l.read_only.is_empty()
    });

    // SIGTERM: unregistered, exit 0.
    b.stop();
    let l = list_bookies(&zk);
    assert!(l.writable.is_empty() && l.read_only.is_empty(), "{l:?}");

    // Same id, another ledger directory: the cookie does not match, exit 1.
    let moved: PathBuf = dir.path().join("ledgers-elsewhere");
    write_conf(&conf, &zk, port, http_port, &journal, &moved);
    let out = bookie(&conf, port)
        .command()
        .output()
        .expect("run the bookie");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("ledger dirs"), "{stderr}");
    assert!(stderr.contains("ledgers-elsewhere"), "{stderr}");
    eprintln!("refused as expected: {}", stderr.trim());
    assert!(list_bookies(&zk).writable.is_empty());

    // The original configuration still starts.
    write_conf(&conf, &zk, port, http_port, &journal, &ledgers);
    let mut b = start(&conf, port);
    wait_for("the registration after a restart", || {
        list_bookies(&zk).writable == [id.clone()]
    });
    let mut c = connect(port);
    let r = c.call_v3(read(3, 2), None).expect("read").response;
    assert_eq!(r.status(), StatusCode::EOK);
    b.stop();
}

/// Sum of the sizes of the entry-log segment files under `dir` (all shards).
fn entry_log_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    for shard in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        for f in std::fs::read_dir(shard.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if f.path().extension().is_some_and(|e| e == "log") {
                total += f.metadata().map(|m| m.len()).unwrap_or(0);
            }
        }
    }
    total
}

fn ledger_znode(id: u64) -> String {
    let s = format!("{id:010}");
    format!("/ledgers/{}/{}/L{}", &s[0..2], &s[2..6], &s[6..10])
}

/// Deleted-ledger GC against a real ZooKeeper: ledgers whose metadata znodes are deleted are
/// dropped by a forced GC (PUT /api/v1/bookie/gc), their entries vanish (ENOLEDGER), entry-log
/// space is reclaimed by compaction, the survivors read back byte for byte before and after a
/// restart, and /api/v1/bookie/gc/details (ours) and /metrics show it.
#[test]
fn gc_drops_ledgers_deleted_in_zookeeper_and_reclaims_space() {
    let Some(Cluster {
        zk,
        dir: _dir,
        conf,
        port,
        http_port,
        journal: _,
        ledgers,
    }) = Cluster::new(
        "gc_drops_ledgers_deleted_in_zookeeper_and_reclaims_space",
        "bookie-gc-",
    )
    else {
        return;
    };
    // Small entry logs, a quick flush, compaction not throttled, no GC of its own.
    let mut text = std::fs::read_to_string(&conf).unwrap();
    text.push_str(
        "logSizeLimit=1048576\nflushInterval=200\ngcWaitTime=3600000\n\
         isThrottleByBytes=true\ncompactionRateByBytes=500000000\n",
    );
    std::fs::write(&conf, text).unwrap();
    init_cluster(&conf);
    // Ledgers 1..=6 exist in the cluster's metadata (hierarchical layout).
    let cfg = MetadataConfig::for_cluster(&zk.servers(), "/ledgers");
    let rt = runtime();
    let client = rt
        .block_on(zk::connect(&cfg))
        .expect("connect to ZooKeeper");
    let mode = metadata::zookeeper::CreateMode::Persistent
        .with_acls(metadata::zookeeper::Acls::anyone_all());
    rt.block_on(async {
        client.mkdir("/ledgers/00/0000", &mode).await.unwrap();
        for l in 1..=6u64 {
            client
                .create(&ledger_znode(l), b"meta", &mode)
                .await
                .unwrap();
        }
    });

    let id = format!("127.0.0.1:{port}");
    let mut b = start_registered(&zk, &conf, port);
    let mut c = connect(port);
    // Interleaved, so every entry-log segment holds all six ledgers: 6 × 400 × 2 KiB ≈ 5 MiB.
    let payload = vec![0xabu8; 2048];
    let body = |l: i64, e: i64| entry(l, e, e - 1, &payload);
    for e in 0..400i64 {
        for l in 1..=6i64 {
            let r = c
                .call_v3(
                    Request::AddEntry {
                        ledger_id: l,
                        entry_id: e,
                        master_key: Bytes::from(vec![7u8; 20]),
                        body: body(l, e),
                        recovery: false,
                        write_flags: None,
                    },
                    None,
                )
                .expect("add")
                .response;
            assert_eq!(r.status(), StatusCode::EOK);
        }
    }
    // Everything flushed: the entry logs stop growing.
    let mut last = 0;
    wait_for("the flush to entry logs", || {
        std::thread::sleep(Duration::from_millis(700));
        let now = entry_log_bytes(&ledgers);
        let stable = now == last && now > 4 << 20;
        last = now;
        stable
    });
    let before = last;

    // Ledgers 1..=5 are deleted by a client: only their znodes go. A new session: the first
    // one is only driven inside `block_on`, and the adds above can outlast its timeout.
    rt.block_on(async {
        let client = zk::connect(&cfg).await.expect("connect to ZooKeeper");
        for l in 1..=5u64 {
            client.delete(&ledger_znode(l), None).await.unwrap();
        }
    });
    let (code, body_text) = http(
        http_port,
        "PUT",
        "/api/v1/bookie/gc",
        "{\"forceMajor\":true}",
    );
    assert_eq!(code, 200, "{body_text}");
    assert!(body_text.contains("Triggered GC"), "{body_text}");
    let details = || {
        let (code, text) = http(http_port, "GET", "/api/v1/bookie/gc/details", "");
        assert_eq!(code, 200, "{text}");
        serde_json::from_str::<serde_json::Value>(&text).expect("gc_details is JSON")
    };
    let sum = |v: &serde_json::Value, k: &str| -> u64 {
        v.as_array()
            .expect("a list per shard")
            .iter()
            .map(|s| s[k].as_u64().unwrap_or(0))
            .sum()
    };
    wait_for("the forced major compaction", || {
        let d = details();
        sum(&d, "deletedLedgers") == 5 && sum(&d, "majorCompactionCounter") >= 2
    });
    let d = details();
    let reclaimed = sum(&d, "reclaimedCompactionBytes") + sum(&d, "reclaimedDeletionBytes");
    // Ledger 6 is a sixth of the data: the files of the old segments go once no reader holds
    // them (within a second or so).
    // What may stay: ledger 6's sixth of the data, copied out of the compacted segments, and
    // each shard's active segment (never compacted, up to logSizeLimit = 1 MiB, however full
    // it happened to be when the adds stopped), plus a little index and padding. Before the
    // old segments go, the total is above `before`.
    let may_stay = before / 6 + 2 * (1 << 20) + (256 << 10);
    wait_for("the old entry logs to be removed", || {
        entry_log_bytes(&ledgers) < may_stay
    });
    let after = entry_log_bytes(&ledgers);
    eprintln!("gc: entry logs {before} -> {after} bytes, reclaimed {reclaimed}; {d}");
    assert!(reclaimed > before / 2, "{reclaimed} of {before}");
    let (_, metrics) = http(http_port, "GET", "/metrics", "");
    assert!(
        metrics.contains("bookie_gc_DELETED_LEDGER_TOTAL 5"),
        "no GC metrics"
    );
    let (_, gc_state) = http(http_port, "GET", "/api/v1/bookie/gc", "");
    assert!(gc_state.contains("is_in_force_gc"), "{gc_state}");

    let check = |c: &mut BlockingClient| {
        for l in 1..=5i64 {
            let r = c.call_v3(read(l, 7), None).expect("read").response;
            assert_eq!(r.status(), StatusCode::ENOLEDGER, "ledger {l}");
        }
        for e in 0..400i64 {
            let r = c.call_v3(read(6, e), None).expect("read").response;
            match r {
                Response::ReadEntry { status, body, .. } => {
                    assert_eq!(status, StatusCode::EOK, "entry 6:{e}");
                    assert_eq!(body.as_deref(), Some(&body_of(6, e, &payload)[..]));
                }
                other => panic!("unexpected {other:?}"),
            }
        }
    };
    check(&mut c);
    b.stop();
    let _b = start(&conf, port);
    wait_for("the registration after a restart", || {
        list_bookies(&zk).writable == [id.clone()]
    });
    let mut c = connect(port);
    check(&mut c);
}

/// Ledger metadata in format version 3 (binary protobuf `LedgerMetadataFormat`, as Java 4.9+
/// writes it): closed or open, with the given ensembles.
fn metadata_v3(closed: bool, ensembles: &[&[&str]]) -> Vec<u8> {
    fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    fn num(out: &mut Vec<u8>, field: u64, v: u64) {
        varint(out, field << 3);
        varint(out, v);
    }
    fn bytes(out: &mut Vec<u8>, field: u64, b: &[u8]) {
        varint(out, (field << 3) | 2);
        varint(out, b.len() as u64);
        out.extend_from_slice(b);
    }
    let mut m = Vec::new();
    num(&mut m, 1, 2); // quorumSize
    num(&mut m, 2, 2); // ensembleSize
    num(&mut m, 3, if closed { 1000 } else { 0 }); // length
    num(&mut m, 4, if closed { 9 } else { u64::MAX }); // lastEntryId
    num(&mut m, 5, if closed { 3 } else { 1 }); // state CLOSED / OPEN
    for (i, e) in ensembles.iter().enumerate() {
        let mut seg = Vec::new();
        for b in *e {
            bytes(&mut seg, 1, b.as_bytes());
        }
        num(&mut seg, 2, i as u64 * 5);
        bytes(&mut m, 6, &seg);
    }
    num(&mut m, 7, 3); // CRC32C
    bytes(&mut m, 8, b"pw");
    num(&mut m, 9, 2); // ackQuorumSize
    let mut out = b"BookieMetadataFormatVersion\t3\n".to_vec();
    varint(&mut out, m.len() as u64);
    out.extend_from_slice(&m);
    out
}

/// Over-replicated-ledger GC against a real ZooKeeper: of four local ledgers, the closed one
/// whose ensembles no longer list this bookie is dropped (its entries ENOLEDGER, its
/// under-replication lock released); the one that lists us in an earlier ensemble, the open
/// one and the one whose under-replication lock is held stay; once the lock is gone, the last
/// one is dropped too. `verifyMetadataOnGC` is on and changes nothing for them.
#[test]
fn gc_drops_overreplicated_ledgers_under_the_replication_lock() {
    let Some(Cluster {
        zk,
        dir: _dir,
        conf,
        port,
        http_port,
        journal: _,
        ledgers: _,
    }) = Cluster::new(
        "gc_drops_overreplicated_ledgers_under_the_replication_lock",
        "bookie-gc-over-",
    )
    else {
        return;
    };
    let mut text = std::fs::read_to_string(&conf).unwrap();
    text.push_str(
        "flushInterval=200\ngcWaitTime=3600000\ngcOverreplicatedLedgerWaitTime=1\n\
         verifyMetadataOnGC=true\n",
    );
    std::fs::write(&conf, text).unwrap();
    init_cluster(&conf);
    let me = format!("127.0.0.1:{port}");
    let cfg = MetadataConfig::for_cluster(&zk.servers(), "/ledgers");
    let rt = runtime();
    let mode = metadata::zookeeper::CreateMode::Persistent
        .with_acls(metadata::zookeeper::Acls::anyone_all());
    let lock4 = "/ledgers/underreplication/locks/urL0000000004";
    rt.block_on(async {
        let client = zk::connect(&cfg).await.expect("connect to ZooKeeper");
        client.mkdir("/ledgers/00/0000", &mode).await.unwrap();
        let moved: &[&str] = &["127.0.0.2:3181", "127.0.0.3:3181"];
        let with_me: &[&str] = &[&me, "127.0.0.3:3181"];
        let ledgers: [(u64, Vec<u8>); 4] = [
            (1, metadata_v3(true, &[moved])),
            (2, metadata_v3(true, &[with_me, moved])),
            (3, metadata_v3(false, &[moved])),
            (4, metadata_v3(true, &[moved])),
        ];
        for (l, data) in ledgers {
            client.create(&ledger_znode(l), &data, &mode).await.unwrap();
        }
        // Ledger 4 is being re-replicated by someone else.
        client
            .mkdir("/ledgers/underreplication/locks", &mode)
            .await
            .unwrap();
        client.create(lock4, b"", &mode).await.unwrap();
    });
    let _b = start_registered(&zk, &conf, port);
    let mut c = connect(port);
    for l in 1..=4i64 {
        for e in 0..10i64 {
            let r = c.call_v3(add(l, e), None).expect("add").response;
            assert_eq!(r.status(), StatusCode::EOK);
        }
    }
    let deleted = || {
        let (code, text) = http(http_port, "GET", "/api/v1/bookie/gc/details", "");
        assert_eq!(code, 200, "{text}");
        let v: serde_json::Value = serde_json::from_str(&text).expect("gc_details is JSON");
        v.as_array()
            .expect("a list per shard")
            .iter()
            .map(|s| s["deletedLedgers"].as_u64().unwrap_or(0))
            .sum::<u64>()
    };
    let status = |c: &mut BlockingClient, l: i64| {
        c.call_v3(read(l, 3), None).expect("read").response.status()
    };
    let (code, body) = http(http_port, "PUT", "/api/v1/bookie/gc", "");
    assert_eq!(code, 200, "{body}");
    wait_for("ledger 1 to be dropped", || deleted() == 1);
    assert_eq!(status(&mut c, 1), StatusCode::ENOLEDGER);
    for l in 2..=4 {
        assert_eq!(status(&mut c, l), StatusCode::EOK, "ledger {l}");
    }
    let lock_of = |l: u64| format!("/ledgers/underreplication/locks/urL{l:010}");
    rt.block_on(async {
        let client = zk::connect(&cfg).await.expect("connect to ZooKeeper");
        assert!(
            client.check_stat(&lock_of(1)).await.unwrap().is_none(),
            "the GC released ledger 1's lock"
        );
        assert!(client.check_stat(lock4).await.unwrap().is_some());
        client.delete(lock4, None).await.unwrap();
    });
    let (code, body) = http(http_port, "PUT", "/api/v1/bookie/gc", "");
    assert_eq!(code, 200, "{body}");
    wait_for("ledger 4 to be dropped once its lock is gone", || {
        deleted() == 2
    });
    assert_eq!(status(&mut c, 4), StatusCode::ENOLEDGER);
    assert_eq!(status(&mut c, 2), StatusCode::EOK);
    assert_eq!(status(&mut c, 3), StatusCode::EOK);
}

fn body_of(l: i64, e: i64, payload: &[u8]) -> Bytes {
    entry(l, e, e - 1, payload)
}

/// A registration that cannot be restored ends the bookie with exit code 4: ZooKeeper is
/// replaced by an empty server on the same address (the metadata wiped), so the old session is
/// expired and re-registering fails for want of the cluster's znodes. When the real server is
/// back, the bookie starts again and the adds acknowledged before read back.
#[test]
fn lost_registration_exits_with_code_4() {
    let Some(Cluster {
        mut zk,
        dir: _dir,
        conf,
        port,
        http_port: _,
        journal: _,
        ledgers: _,
    }) = Cluster::new("lost_registration_exits_with_code_4", "bookie-expiry-")
    else {
        return;
    };
    let mut text = std::fs::read_to_string(&conf).unwrap();
    text = text.replace("zkTimeout=6000", "zkTimeout=4000");
    std::fs::write(&conf, text).unwrap();
    init_cluster(&conf);
    let id = format!("127.0.0.1:{port}");
    let mut b = start_registered(&zk, &conf, port);
    let mut c = connect(port);
    for e in 0..5 {
        let r = c.call_v3(add(11, e), None).expect("add").response;
        assert_eq!(r.status(), StatusCode::EOK);
    }
    zk.swap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = b.exited() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the bookie did not exit after losing its registration"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status.code(), Some(4), "exit status {status}");

    // The cluster's ZooKeeper comes back: the bookie starts again with its data.
    zk.swap();
    let b = start(&conf, port);
    // The old session's node may still be listed until the server expires it: wait for the
    // new bookie to answer instead.
    wait_for("the bookie to serve again", || b.accepts());
    let mut c = b.client();
    for e in 0..5 {
        let r = c.call_v3(read(11, e), None).expect("read").response;
        assert_eq!(r.status(), StatusCode::EOK, "entry {e}");
    }
    wait_for("the registration after ZooKeeper came back", || {
        list_bookies(&zk).writable == [id.clone()]
    });
}

/// The ZooKeeper session owning `path`, if the node exists.
fn node_owner(zk: &Zk, path: &str) -> Option<i64> {
    let cfg = MetadataConfig::for_cluster(&zk.servers(), "/ledgers");
    runtime().block_on(async {
        let client = zk::connect(&cfg).await.expect("connect to ZooKeeper");
        client
            .check_stat(path)
            .await
            .expect("stat")
            .map(|s| s.ephemeral_owner)
    })
}

/// A supervisor's restart: SIGKILL, and a new bookie at once on the same directories, while
/// the killed bookie's registration node still belongs to its session (ZooKeeper expires it
/// only a session timeout after the last heartbeat). The new bookie waits for that node to go
/// (up to 2 × zkTimeout + 5 s) and registers with its own session, where it used to wait one
/// zkTimeout and exit 4. Here the new bookie's zkTimeout (4 s) is shorter than the killed one's
/// (10 s), so the dead node outlives a one-zkTimeout wait every time instead of about half the
/// time. The id comes from `listeningInterface=127.0.0.1` (an address, which used to be refused).
#[test]
fn a_bookie_restarted_right_after_sigkill_registers_again() {
    let Some(Cluster {
        zk,
        dir: _dir,
        conf,
        port,
        http_port,
        journal,
        ledgers,
    }) = Cluster::new(
        "a_bookie_restarted_right_after_sigkill_registers_again",
        "bookie-sigkill-",
    )
    else {
        return;
    };
    let write = |timeout_ms: u32| {
        write_conf(&conf, &zk, port, http_port, &journal, &ledgers);
        let text = std::fs::read_to_string(&conf)
            .unwrap()
            .replace("zkTimeout=6000", &format!("zkTimeout={timeout_ms}"))
            .replace(
                "advertisedAddress=127.0.0.1",
                "listeningInterface=127.0.0.1",
            );
        std::fs::write(&conf, text).unwrap();
    };
    write(10_000);
    init_cluster(&conf);
    let id = format!("127.0.0.1:{port}");
    let node = format!("/ledgers/available/{id}");
    let mut b = start_registered(&zk, &conf, port);
    let old = node_owner(&zk, &node).expect("registered");
    let mut c = connect(port);
    for e in 0..5 {
        let r = c.call_v3(add(21, e), None).expect("add").response;
        assert_eq!(r.status(), StatusCode::EOK);
    }
    drop(c);

    // SIGKILL and restart at once, without waiting for the old process to be reaped.
    write(4_000);
    b.signal(nix::sys::signal::Signal::SIGKILL);
    let mut again = start(&conf, port);
    b.kill();
    wait_for("the registration of the restarted bookie", || {
        if let Some(status) = again.exited() {
            panic!("the restarted bookie exited with {status}");
        }
        node_owner(&zk, &node).is_some_and(|owner| owner != old)
    });
    assert_eq!(list_bookies(&zk).writable, std::slice::from_ref(&id));
    let mut c = connect(port);
    for e in 0..5 {
        let r = c.call_v3(read(21, e), None).expect("read").response;
        assert_eq!(r.status(), StatusCode::EOK, "entry {e}");
    }
    again.stop();
}

/// A ZooKeeper outage of 4 × zkTimeout: the bookie keeps serving adds and reads throughout and
/// does not exit (it used to exit 4 some 3.4 × zkTimeout into the outage, its client having
/// declared the session expired on its own); when ZooKeeper is back its registration is still
/// the one of the same session, which the restarted server kept.
#[test]
fn a_long_zookeeper_outage_neither_stops_the_bookie_nor_its_registration() {
    let Some(Cluster {
        zk,
        dir: _dir,
        conf,
        port,
        http_port: _,
        journal: _,
        ledgers: _,
    }) = Cluster::new(
        "a_long_zookeeper_outage_neither_stops_the_bookie_nor_its_registration",
        "bookie-outage-",
    )
    else {
        return;
    };
    let text = std::fs::read_to_string(&conf)
        .unwrap()
        .replace("zkTimeout=6000", "zkTimeout=3000");
    std::fs::write(&conf, text).unwrap();
    init_cluster(&conf);
    let id = format!("127.0.0.1:{port}");
    let node = format!("/ledgers/available/{id}");
    let mut b = start_registered(&zk, &conf, port);
    let session = node_owner(&zk, &node).expect("registered");

    // Adds during the outage, from another thread, while ZooKeeper is down for 12 s.
    let writer = std::thread::spawn(move || {
        let mut c = connect(port);
        let end = Instant::now() + Duration::from_secs(14);
        let mut e = 0;
        while Instant::now() < end {
            let r = c.call_v3(add(31, e), None).expect("add").response;
            assert_eq!(r.status(), StatusCode::EOK, "entry {e}");
            e += 1;
            std::thread::sleep(Duration::from_millis(100));
        }
        e
    });
    zk.outage(Duration::from_secs(12));
    let added = writer.join().expect("the writer");
    assert!(b.exited().is_none(), "the bookie exited during the outage");
    wait_for("the registration after the outage", || {
        node_owner(&zk, &node).is_some()
    });
    // Time for a wrong re-registration (or exit) to show.
    std::thread::sleep(Duration::from_secs(2));
    assert!(b.exited().is_none(), "exited");
    assert_eq!(node_owner(&zk, &node), Some(session), "a new session");
    let mut c = connect(port);
    for e in 0..added {
        let r = c.call_v3(read(31, e), None).expect("read").response;
        assert_eq!(r.status(), StatusCode::EOK, "entry {e}");
    }
    eprintln!("{added} adds during a 12 s ZooKeeper outage, session {session:#x} kept");
    b.stop();
}

/// `persistBookieStatusEnabled=true`: a read-only set by an operator survives a restart (the
/// bookie registers read-only at once, and adds are refused), in Java's `BOOKIE_STATUS`
/// format; set writable again, the next start is writable. Without the key the file is not
/// read: the bookie starts writable.
#[test]
fn a_manual_read_only_survives_a_restart_with_persisted_status() {
    let Some(c) = Cluster::new(
        "a_manual_read_only_survives_a_restart_with_persisted_status",
        "bookie-status-",
    ) else {
        return;
    };
    let (zk, conf, port, http_port, ledgers) = (&c.zk, &c.conf, c.port, c.http_port, &c.ledgers);
    let plain = std::fs::read_to_string(conf).unwrap();
    std::fs::write(conf, format!("{plain}persistBookieStatusEnabled=true\n")).unwrap();
    init_cluster(conf);
    let id = format!("127.0.0.1:{port}");
    let mut b = start_registered(zk, conf, port);
    let status = ledgers.join("current/BOOKIE_STATUS");
    assert!(!status.exists(), "no change of mode yet");
    set_read_only(http_port, true);
    let line = std::fs::read_to_string(&status).expect("BOOKIE_STATUS written");
    let fields: Vec<&str> = line.trim_end().split(',').collect();
    assert_eq!(
        (fields.len(), fields[0], fields[1], fields[3]),
        (4, "1", "READ_ONLY", "true"),
        "{line:?}"
    );
    assert!(fields[2]
        .parse::<i64>()
        .is_ok_and(|ms| ms > 1_700_000_000_000));
    b.stop();

    // Restarted: read-only from the start, registered so, adds refused.
    let mut b = start(conf, port);
    wait_for("the read-only registration after the restart", || {
        let l = list_bookies(zk);
        l.read_only == [id.clone()] && l.writable.is_empty()
    });
    let r = b.client().call_v3(add(21, 0), None).expect("add").response;
    assert_eq!(r.status(), StatusCode::EREADONLY);
    let (_, body) = http(http_port, "GET", "/api/v1/bookie/state/readonly", "");
    assert!(body.contains("true"), "{body}");
    // Writable by hand, kept too.
    set_read_only(http_port, false);
    let line = std::fs::read_to_string(&status).unwrap();
    assert!(
        line.starts_with("1,READ_WRITE,") && line.ends_with(",false\n"),
        "Java writes manual=false once writable: {line:?}"
    );
    b.stop();
    let mut b = start_registered(zk, conf, port);
    let r = b.client().call_v3(add(21, 0), None).expect("add").response;
    assert_eq!(r.status(), StatusCode::EOK);

    // A read-only file, but the key off: not read, the bookie starts writable.
    std::fs::write(&status, "1,READ_ONLY,9999999999999,true\n").unwrap();
    b.stop();
    std::fs::write(conf, plain).unwrap();
    let _b = start_registered(zk, conf, port);
}
