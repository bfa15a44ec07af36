//! The dashboards against a real Prometheus scraping a real bookie under load: every panel
//! query of our own dashboard (deploy/grafana/bookie.json) and of the Pulsar Helm chart's
//! BookKeeper dashboards (lhotari/pulsar-grafana-dashboards `pulsar/bookkeeper.json`,
//! `bookkeeper-compaction.json` and the CPU panel of `jvm.json`, whose queries are written
//! below as data) must return data — a result with at least one finite value — through
//! Prometheus' `/api/v1/query`. The Pulsar panels that need a JVM are listed as expected
//! empty, with the reason, and must be empty.
//!
//! Method: a standalone bookie (two shards, free ports, its own temp dir) and a Prometheus
//! (free port, its own temp dir) scraping its `/metrics` every second, with the static labels
//! a Kubernetes pod scrape would add (`cluster`, `kubernetes_pod_name`; `job` from the job
//! name, `instance` from the target). About 15 s of load — adds on four ledgers with periodic
//! flushes, sequential reads of a flushed ledger (read-ahead runs, hits and misses), reads from
//! the write cache, a forced compaction — then, with the load still running, every query. The
//! panel counting read-only bookies is asked after an operator switched the bookie read-only.
//!
//! Needs the `prometheus` binary (Debian package `prometheus`, installed by scripts/setup).
//! Without it the test says SKIPPED and passes, unless `BOOKIE_REQUIRE_PROMETHEUS` is set (as
//! scripts/test sets it): then it fails.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

mod common;

use bytes::Bytes;
use common::bookie::{BookieBuilder, BookieProcess};
use common::{entry, free_port, read};
use net::client::blocking::BlockingClient;
use net::{Request, StatusCode};

/// What a panel's query must give.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// Data, while the bookie is writable and under load.
    Data,
    /// Data once the bookie is read-only (it counts read-only bookies: none before, as on a
    /// Java bookie).
    DataWhenReadOnly,
    /// Nothing: the series exist only in a JVM (docs/semantics.md §6.2).
    NeedsJvm(&'static str),
}

impl Expect {
    fn of(word: &str) -> Expect {
        match word {
            "data" => Expect::Data,
            "read-only" => Expect::DataWhenReadOnly,
            "jvm-heap" => Expect::NeedsJvm(
                "a JVM's heap (jvm_memory_bytes_*): there is no JVM; the process's memory is \
                 process_resident_memory_bytes, on our dashboard",
            ),
            "jvm-direct" => Expect::NeedsJvm(
                "Netty's direct memory (jvm_memory_direct_bytes_*): there is no JVM",
            ),
            "jvm-gc" => Expect::NeedsJvm(
                "the JVM collector's pauses (jvm_gc_collection_seconds): no JVM, no collector",
            ),
            other => panic!("unknown expectation {other}"),
        }
    }
}

/// The panel queries of lhotari/pulsar-grafana-dashboards at 75a9067 (the dashboards the
/// Pulsar Helm chart installs): `pulsar/bookkeeper.json` (every target),
/// `pulsar/bookkeeper-compaction.json` and `pulsar/jvm.json` (their distinct targets), one a
/// line: dashboard | panel title | refId | what it must give (`Expect::of`) | PromQL. `$job`
/// and `$instance` are the dashboards' variables (a job name, a pod name).
const PULSAR_PANELS: &str = r#"
bookkeeper | Writable Bookies | A | data | count(bookie_SERVER_STATUS{job=~"$job"} == 1)
bookkeeper | ReadOnly Bookies | A | read-only | count(bookie_SERVER_STATUS{job=~"$job", kubernetes_pod_name=~"$instance"} == 0)
bookkeeper | Write Rates | A | data | sum(irate(bookkeeper_server_ADD_ENTRY_count{job=~"$job", kubernetes_pod_name=~"$instance"}[1m]))
bookkeeper | Write Rates | B | data | sum(irate(bookkeeper_server_ADD_ENTRY_count{success="false"}[1m]))
bookkeeper | Write Rates | C | data | sum(irate(bookkeeper_server_ADD_ENTRY_count{success="true"}[1m]))
bookkeeper | Read Rates | A | data | sum(irate(bookkeeper_server_READ_ENTRY_count{job=~"$job", kubernetes_pod_name=~"$instance"}[1m]))
bookkeeper | Read Rates | B | data | sum(irate(bookkeeper_server_READ_ENTRY_count{success="false"}[1m]))
bookkeeper | Read Rates | C | data | sum(irate(bookkeeper_server_READ_ENTRY_count{success="true"}[1m]))
bookkeeper | writable bookies (percentage) | A | data | 100 * count(bookie_SERVER_STATUS{job=~"$job", kubernetes_pod_name=~"$instance"} == 1) / count(bookie_SERVER_STATUS{job=~"$job", kubernetes_pod_name=~"$instance"})
bookkeeper | Throughput (MB / s) | A | data | sum(rate(bookie_WRITE_BYTES{job=~"$job"}[60s]))
bookkeeper | Throughput (MB / s) | B | data | sum(rate(bookie_READ_BYTES{job=~"$job"}[60s]))
bookkeeper | Latency | A | data | avg(bookkeeper_server_ADD_ENTRY{job=~"$job", kubernetes_pod_name=~"$instance", success="true", quantile="0.99"})
bookkeeper | Latency | B | data | avg(bookkeeper_server_ADD_ENTRY{job=~"$job", kubernetes_pod_name=~"$instance", success="true", quantile="0.999"})
bookkeeper | Latency | C | data | avg(bookkeeper_server_ADD_ENTRY{job=~"$job", kubernetes_pod_name=~"$instance", success="true", quantile="0.5"})
bookkeeper | Latency | D | data | avg(bookkeeper_server_READ_ENTRY{job=~"$job", kubernetes_pod_name=~"$instance", success="true", quantile="0.99"})
bookkeeper | Latency | E | data | avg(bookkeeper_server_READ_ENTRY{job=~"$job", kubernetes_pod_name=~"$instance", success="true", quantile="0.999"})
bookkeeper | Latency | F | data | avg(bookkeeper_server_READ_ENTRY{job=~"$job", kubernetes_pod_name=~"$instance", success="true", quantile="0.5"})
bookkeeper | Success Rate By Bookie | A | data | sum(irate(bookkeeper_server_READ_ENTRY_count{job=~"$job", kubernetes_pod_name=~"$instance", success="true"}[1m])) by (kubernetes_pod_name)
bookkeeper | Success Rate By Bookie | B | data | sum(irate(bookkeeper_server_ADD_ENTRY_count{job=~"$job", kubernetes_pod_name=~"$instance", success="true"}[1m])) by (kubernetes_pod_name)
bookkeeper | Failure Rate by Bookie | B | data | sum(irate(bookkeeper_server_ADD_ENTRY_count{job=~"$job", kubernetes_pod_name=~"$instance", success="false"}[1m])) by (kubernetes_pod_name)
bookkeeper | Failure Rate by Bookie | A | data | sum(irate(bookkeeper_server_READ_ENTRY_count{job=~"$job", kubernetes_pod_name=~"$instance", success="false"}[1m])) by (kubernetes_pod_name)
bookkeeper | Write Bytes | A | data | sum(irate(bookie_WRITE_BYTES{job=~"$job", kubernetes_pod_name=~"$instance"}[60s])) by (kubernetes_pod_name)
bookkeeper | Read Bytes (bytes/s) | A | data | sum(irate(bookie_READ_BYTES{job=~"$job", kubernetes_pod_name=~"$instance"}[60s])) by (kubernetes_pod_name)
bookkeeper | Add Entry Rate | A | data | sum(irate(bookkeeper_server_ADD_ENTRY_count{job=~"$job", kubernetes_pod_name=~"$instance"}[60s])) by (kubernetes_pod_name)
bookkeeper | Read Entry Rate | A | data | sum(irate(bookkeeper_server_READ_ENTRY_count{job=~"$job", kubernetes_pod_name=~"$instance"}[60s])) by (kubernetes_pod_name)
bookkeeper | Add entry latency (p50) | A | data | sum(bookkeeper_server_ADD_ENTRY{job=~"$job", kubernetes_pod_name=~"$instance", success="true", quantile="0.5"}) by (kubernetes_pod_name)
bookkeeper | Add entry latency (99pct) | A | data | sum(bookkeeper_server_ADD_ENTRY{job=~"$job", kubernetes_pod_name=~"$instance", success="true", quantile="0.99"}) by (kubernetes_pod_name)
bookkeeper | Add entry latency (p999) | A | data | sum(bookkeeper_server_ADD_ENTRY{job=~"$job", kubernetes_pod_name=~"$instance", success="true", quantile="0.999"}) by (kubernetes_pod_name)
bookkeeper | Read entry latency (p50) | A | data | sum(bookkeeper_server_READ_ENTRY{job=~"$job", kubernetes_pod_name=~"$instance", success="true", quantile="0.5"}) by (kubernetes_pod_name)
bookkeeper | Read entry latency (p99) | A | data | sum(bookkeeper_server_READ_ENTRY{job=~"$job", kubernetes_pod_name=~"$instance", success="true", quantile="0.99"}) by (kubernetes_pod_name)
bookkeeper | Read entry latency (p999) | A | data | sum(bookkeeper_server_READ_ENTRY{job=~"$job", kubernetes_pod_name=~"$instance", success="true", quantile="0.999"}) by (kubernetes_pod_name)
bookkeeper | Journal Sync Rate | A | data | sum(irate(bookie_journal_JOURNAL_SYNC_count{job=~"$job", kubernetes_pod_name=~"$instance", success="true"}[60s])) by (kubernetes_pod_name)
bookkeeper | Journal Add Rate | A | data | sum(irate(bookie_journal_JOURNAL_ADD_ENTRY_count{job=~"$job", kubernetes_pod_name=~"$instance", success="true"}[60s])) by (kubernetes_pod_name)
bookkeeper | Journal Queue length | A | data | sum(bookie_journal_JOURNAL_QUEUE_SIZE{job=~"$job", kubernetes_pod_name=~"$instance"}) by (kubernetes_pod_name)
bookkeeper | Journal Force Write Queue length | A | data | sum(bookie_journal_JOURNAL_FORCE_WRITE_QUEUE_SIZE{job=~"$job", kubernetes_pod_name=~"$instance"}) by (kubernetes_pod_name)
bookkeeper | Journal Add latency (p50) | A | data | sum(bookie_journal_JOURNAL_ADD_ENTRY{job=~"$job", kubernetes_pod_name=~"$instance", success="true", quantile="0.5"}) by (kubernetes_pod_name)
bookkeeper | Journal Add latency (p99) | A | data | sum(bookie_journal_JOURNAL_ADD_ENTRY{job=~"$job", kubernetes_pod_name=~"$instance", success="true", quantile="0.99"}) by (kubernetes_pod_name)
bookkeeper | Journal Add latency (Max) | A | data | sum(bookie_journal_JOURNAL_ADD_ENTRY{job=~"$job", kubernetes_pod_name=~"$instance", success="true", quantile="1.0"}) by (kubernetes_pod_name)
bookkeeper | Journal Sync Latency (p50) | A | data | sum(bookie_journal_JOURNAL_SYNC{job=~"$job", kubernetes_pod_name=~"$instance", success="true", quantile="0.5"}) by (kubernetes_pod_name)
bookkeeper | Journal Sync Latency (p99) | A | data | sum(bookie_journal_JOURNAL_SYNC{job=~"$job", kubernetes_pod_name=~"$instance", success="true", quantile="0.99"}) by (kubernetes_pod_name)
bookkeeper | Journal Sync Latency (Max) | A | data | sum(bookie_journal_JOURNAL_SYNC{job=~"$job", kubernetes_pod_name=~"$instance", success="true", quantile="1.0"}) by (kubernetes_pod_name)
bookkeeper | Ledgers count | A | data | sum(bookie_ledgers_count{job=~"$job", kubernetes_pod_name=~"$instance"}) by (kubernetes_pod_name)
bookkeeper | Entries count | A | data | sum(bookie_entries_count{job=~"$job", kubernetes_pod_name=~"$instance"}) by (kubernetes_pod_name)
bookkeeper | Write Cache Size | A | data | sum(bookie_write_cache_size{job=~"$job", kubernetes_pod_name=~"$instance"}) by (kubernetes_pod_name)
bookkeeper | Read Cache Size | A | data | sum(bookie_read_cache_size{job=~"$job", kubernetes_pod_name=~"$instance"}) by (kubernetes_pod_name)
bookkeeper | Read Cache Miss-to-Hit Ratio | B | data | sum(irate(bookie_read_cache_misses{job=~"$job", kubernetes_pod_name=~"$instance"}[1m])) by (kubernetes_pod_name) / sum(irate(bookie_read_cache_hits{job=~"$job", kubernetes_pod_name=~"$instance"}[1m])) by (kubernetes_pod_name)
bookkeeper | Entries Read from Disk per Read Op | B | data | (sum(rate(bookie_readahead_batch_count_count[1m])) by (kubernetes_pod_name) + sum(rate(bookie_readahead_batch_count_sum[1m])) by (kubernetes_pod_name)) / sum(rate(bookie_read_entry_count[1m])) by (kubernetes_pod_name)
bookkeeper | Deleted Ledger Count | A | data | sum(bookie_DELETED_LEDGER_TOTAL{job=~"$job", kubernetes_pod_name=~"$instance"}) by (kubernetes_pod_name)
bookkeeper | Writable Ledger Directory Count | A | data | sum(bookie_ledger_writable_dirs{job=~"$job", kubernetes_pod_name=~"$instance"}) by (kubernetes_pod_name)
bookkeeper | Write Thread Pool Queue by Thread | A | data | sum by(kubernetes_pod_name, thread) (bookkeeper_server_thread_executor_queue{job=~"$job", kubernetes_pod_name=~"$instance", thread=~"BookieHighPriorityThread-.*"})
bookkeeper | Read Thread Pool Queue by Thread | A | data | sum by(kubernetes_pod_name, thread) (bookkeeper_server_thread_executor_queue{job=~"$job", kubernetes_pod_name=~"$instance", thread=~"BookieReadThreadPool-.*"})
bookkeeper-compaction | Bookie Reclaim Compaction Space (Rate) | A | data | rate(bookie_RECLAIMED_COMPACTION_SPACE_BYTES[5m])
bookkeeper-compaction | Bookie Reclaim Deletion Space  (Rate) | A | data | rate(bookie_RECLAIMED_DELETION_SPACE_BYTES[5m])
bookkeeper-compaction | Major Compaction (Rate) | A | data | rate(bookie_MAJOR_COMPACTION_TOTAL[5m])
bookkeeper-compaction | Active Entry Logs | B | data | bookie_ACTIVE_ENTRY_LOG_TOTAL
bookkeeper-compaction | Active Ledger Count | B | data | bookie_ACTIVE_LEDGER_TOTAL
bookkeeper-compaction | Deleted Ledger Count | B | data | bookie_DELETED_LEDGER_TOTAL
jvm | CPU | A | data | irate(process_cpu_seconds_total{kubernetes_pod_name=~"$instance"}[60s]) * 100
jvm | Heap Memory | A | jvm-heap | sum(jvm_memory_bytes_committed{kubernetes_pod_name=~"$instance", area="heap"})
jvm | Heap Memory | B | jvm-heap | sum(jvm_memory_bytes_used{kubernetes_pod_name=~"$instance"})
jvm | Heap Memory | C | jvm-heap | sum(jvm_memory_bytes_max{kubernetes_pod_name=~"$instance"})
jvm | Direct Memory | A | jvm-direct | jvm_memory_direct_bytes_used{kubernetes_pod_name=~"$instance"}
jvm | Direct Memory | B | jvm-direct | jvm_memory_direct_bytes_max{kubernetes_pod_name=~"$instance"}
jvm | GC Time | B | jvm-gc | sum(increase(jvm_gc_collection_seconds_sum{kubernetes_pod_name=~"$instance"}[60s]))
"#;

/// A panel query of [`PULSAR_PANELS`]: dashboard, panel title, refId, PromQL, what it gives.
fn pulsar_panels() -> Vec<(
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    Expect,
)> {
    PULSAR_PANELS
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.splitn(5, " | ").collect();
            assert_eq!(f.len(), 5, "{l}");
            (f[0], f[1], f[2], f[4], Expect::of(f[3]))
        })
        .collect()
}

/// The static labels the scrape adds, as a Kubernetes pod scrape of the Pulsar chart would.
const POD: &str = "bookie-0";
const JOB: &str = "bookie";
/// The load before the queries (they run while it goes on).
const LOAD: Duration = Duration::from_secs(15);

/// The prometheus binary, if installed.
fn prometheus_binary() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("prometheus"))
        .find(|p| p.is_file())
}

/// A Prometheus of the test's own, killed (it is our child) when dropped.
struct Prometheus {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Prometheus {
    fn start(binary: &Path, dir: &Path, target_port: u16) -> Prometheus {
        let port = free_port();
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: {JOB}\n    scrape_interval: 1s\n    \
                 scrape_timeout: 1s\n    static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n        \
                 labels:\n          cluster: test\n          kubernetes_pod_name: {POD}\n"
            ),
        )
        .expect("write prometheus.yml");
        let log = dir.join("prometheus.log");
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("prometheus log"))
            .spawn()
            .expect("start prometheus");
        let mut p = Prometheus { child, port, log };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Some(status)) = p.child.try_wait() {
                panic!("prometheus exited with {status}:\n{}", p.log_text());
            }
            if get(port, "/-/ready").is_some_and(|(code, _)| code == 200) {
                return p;
            }
            assert!(
                Instant::now() < deadline,
                "prometheus not ready:\n{}",
                p.log_text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// An instant query: the values of its result (NaN and ±Inf included), or an error.
    fn query(&self, expr: &str) -> Result<Vec<f64>, String> {
        let (code, body) = get(self.port, &format!("/api/v1/query?query={}", encode(expr)))
            .ok_or("no answer from prometheus")?;
        let v: serde_json::Value =
            serde_json::from_str(&body).map_err(|e| format!("{code}: {e}: {body}"))?;
        if v["status"] != "success" {
            return Err(format!("{code}: {body}"));
        }
        let value = |pair: &serde_json::Value| -> f64 {
            match pair[1].as_str() {
                Some("NaN") | None => f64::NAN,
                Some(s) => s.parse().unwrap_or(f64::NAN),
            }
        };
        Ok(match v["data"]["resultType"].as_str() {
            Some("vector") => v["data"]["result"]
                .as_array()
                .map(|r| r.iter().map(|s| value(&s["value"])).collect())
                .unwrap_or_default(),
            Some("scalar") => vec![value(&v["data"]["result"])],
            other => return Err(format!("result type {other:?}")),
        })
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.0 GET on loopback (the server closes the connection, no chunking): (status,
/// body), `None` if nothing answers.
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let code = out.split(' ').nth(1)?.parse().ok()?;
    Some((code, out.split_once("\r\n\r\n")?.1.to_string()))
}

/// Percent-encoding of a query parameter.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn add(ledger: i64, e: i64) -> Request {
    Request::AddEntry {
        ledger_id: ledger,
        entry_id: e,
        master_key: Bytes::from(vec![5u8; 20]),
        body: entry(ledger, e, e - 1, &[e as u8; 256]),
        recovery: false,
        write_flags: None,
    }
}

fn call(c: &mut BlockingClient, r: Request) -> StatusCode {
    c.call_v3(r, None).expect("call").response.status()
}

/// A ledger read sequentially from ledger storage, again and again.
const CATCH_UP_LEDGER: i64 = 40;
const CATCH_UP_ENTRIES: i64 = 2_000;

/// Adds on four ledgers (their last entry read back from the write cache now and then), a
/// flush every 2 s and one forced compaction, beside a reader going through a flushed ledger
/// from its start, over and over, until `stop`.
fn load(b: &BookieProcess, stop: &AtomicBool) {
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut c = b.client();
            let (mut e, mut last_flush) = (0i64, Instant::now());
            let mut compacted = false;
            while !stop.load(Ordering::Relaxed) {
                for ledger in 31..=34 {
                    assert_eq!(call(&mut c, add(ledger, e)), StatusCode::EOK);
                }
                if e % 16 == 0 {
                    assert_eq!(call(&mut c, read(31, e)), StatusCode::EOK);
                }
                e += 1;
                if last_flush.elapsed() >= Duration::from_secs(2) {
                    assert_eq!(b.http("PUT", "/api/v1/bookie/flush", "").0, 200);
                    if !compacted {
                        let body = "{\"forceMajor\":\"true\",\"forceMinor\":\"true\"}";
                        assert_eq!(b.http("PUT", "/api/v1/bookie/gc", body).0, 200);
                        compacted = true;
                    }
                    last_flush = Instant::now();
                }
            }
        });
        s.spawn(|| {
            let mut c = b.client();
            while !stop.load(Ordering::Relaxed) {
                for e in 0..CATCH_UP_ENTRIES {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    assert_eq!(call(&mut c, read(CATCH_UP_LEDGER, e)), StatusCode::EOK);
                }
            }
        });
    });
}

/// Whether a query's values count as a panel with data: at least one finite value.
fn has_data(values: &[f64]) -> bool {
    values.iter().any(|v| v.is_finite())
}

/// Every target's expression of a Grafana dashboard (rows' nested panels included):
/// (panel title, refId, expr).
fn dashboard_targets(json: &serde_json::Value) -> Vec<(String, String, String)> {
    fn walk(panels: &serde_json::Value, out: &mut Vec<(String, String, String)>) {
        for p in panels.as_array().into_iter().flatten() {
            walk(&p["panels"], out);
            for t in p["targets"].as_array().into_iter().flatten() {
                if let Some(expr) = t["expr"].as_str() {
                    out.push((
                        p["title"].as_str().unwrap_or("").to_string(),
                        t["refId"].as_str().unwrap_or("").to_string(),
                        expr.to_string(),
                    ));
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(&json["panels"], &mut out);
    out
}

/// A dashboard expression with its variables given values.
fn substitute(expr: &str, vars: &[(&str, &str)]) -> String {
    let mut e = expr.to_string();
    for (name, value) in vars {
        e = e
            .replace(&format!("${{{name}}}"), value)
            .replace(&format!("${name}"), value);
    }
    e
}

#[test]
fn dashboards_have_data_from_a_real_prometheus() {
    let Some(binary) = prometheus_binary() else {
        let required = std::env::var("BOOKIE_REQUIRE_PROMETHEUS").is_ok_and(|v| v != "0");
        assert!(
            !required,
            "BOOKIE_REQUIRE_PROMETHEUS is set and no prometheus binary is on PATH \
             (scripts/setup installs the Debian package prometheus)"
        );
        eprintln!(
            "SKIPPED(prometheus not installed): apt-get install prometheus, or set \
             BOOKIE_REQUIRE_PROMETHEUS=1 to make its absence a failure"
        );
        return;
    };
    let started = Instant::now();
    let dir = common::tempdir("bookie-prometheus-");
    let http = free_port();
    let mut b = BookieBuilder::serve(free_port())
        .args(["--shards", "2", "--no-pin"])
        .http_port(http)
        .data_dir(&dir.path().join("bookie"))
        .start();
    {
        let mut c = b.client();
        for e in 0..CATCH_UP_ENTRIES {
            assert_eq!(call(&mut c, add(CATCH_UP_LEDGER, e)), StatusCode::EOK);
        }
    }
    b.flush_write_cache();
    let prometheus_dir = dir.path().join("prometheus");
    std::fs::create_dir_all(&prometheus_dir).expect("prometheus dir");
    let prom = Prometheus::start(&binary, &prometheus_dir, http);
    let instance = format!("127.0.0.1:{http}");

    let stop = AtomicBool::new(false);
    let mut failures = Vec::new();
    let mut report = Vec::new();
    std::thread::scope(|s| {
        let loaded = s.spawn(|| load(&b, &stop));
        std::thread::sleep(LOAD);
        // The target is scraped, with the labels the panels select on.
        match prom.query(&format!(
            "up{{job=\"{JOB}\", instance=\"{instance}\", cluster=\"test\", kubernetes_pod_name=\"{POD}\"}} == 1"
        )) {
            Ok(v) if has_data(&v) => {}
            other => failures.push(format!("the bookie is not scraped: {other:?}")),
        }
        // Our dashboard: every target, its variables as Grafana would fill them.
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/grafana/bookie.json");
        let json: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(&path).expect("deploy/grafana/bookie.json"),
        )
        .expect("the dashboard is JSON");
        assert_eq!(json["__inputs"][0]["name"], "DS_PROMETHEUS");
        let ours = dashboard_targets(&json);
        assert!(ours.len() >= 30, "{} targets", ours.len());
        let vars = [
            ("__rate_interval", "10s"),
            ("__interval", "5s"),
            ("job", JOB),
            ("instance", instance.as_str()),
        ];
        for (title, ref_id, expr) in &ours {
            let expr = substitute(expr, &vars);
            match prom.query(&expr) {
                Ok(v) if has_data(&v) => {}
                other => {
                    failures.push(format!("bookie-rs / {title} / {ref_id}: {expr}: {other:?}"))
                }
            }
        }
        // The dashboard's variables find this bookie.
        match prom.query(&format!("count by (job, instance) (bookie_SERVER_STATUS{{job=~\"{JOB}\", instance=~\"{instance}\"}})")) {
            Ok(v) if has_data(&v) => {}
            other => failures.push(format!("bookie-rs variables: {other:?}")),
        }
        report.push(format!("bookie-rs: {} targets checked", ours.len()));
        // The Pulsar chart's dashboards, as written in them.
        let vars = [("job", JOB), ("instance", POD)];
        let (mut checked, mut jvm) = (0, Vec::new());
        for (dashboard, title, ref_id, expr, expect) in pulsar_panels() {
            let expr = substitute(expr, &vars);
            let got = prom.query(&expr);
            match (expect, &got) {
                (Expect::Data, Ok(v)) if has_data(v) => checked += 1,
                (Expect::DataWhenReadOnly, _) => checked += 1,
                (Expect::NeedsJvm(why), Ok(v)) if v.is_empty() => {
                    jvm.push(format!("{dashboard} / {title} / {ref_id}: {why}"))
                }
                _ => failures.push(format!(
                    "pulsar {dashboard} / {title} / {ref_id} ({expect:?}): {expr}: {got:?}"
                )),
            }
        }
        report.push(format!(
            "pulsar: {checked} targets checked for data (one once read-only), {} empty as \
             they need a JVM:\n  {}",
            jvm.len(),
            jvm.join("\n  ")
        ));
        stop.store(true, Ordering::Relaxed);
        loaded
            .join()
            .expect("the load ran without a failed request");
    });

    // The scrapes themselves were clean: the target healthy, no sample Prometheus dropped.
    let (_, targets) = get(prom.port, "/api/v1/targets").expect("targets");
    let targets: serde_json::Value = serde_json::from_str(&targets).expect("targets JSON");
    let target = &targets["data"]["activeTargets"][0];
    if target["health"] != "up" || target["lastError"] != "" {
        failures.push(format!("scrape: {target}"));
    }
    let (_, own) = get(prom.port, "/metrics").expect("prometheus' own metrics");
    for dropped in [
        "prometheus_target_scrapes_sample_duplicate_timestamp_total",
        "prometheus_target_scrapes_sample_out_of_order_total",
        "prometheus_target_scrapes_sample_out_of_bounds_total",
    ] {
        let value = own
            .lines()
            .find_map(|l| l.strip_prefix(dropped)?.trim().parse::<f64>().ok());
        if value != Some(0.0) {
            failures.push(format!("{dropped}: {value:?}"));
        }
    }

    // Read-only by an operator: the panel counting read-only bookies has its bookie.
    let (code, body) = b.http(
        "PUT",
        "/api/v1/bookie/state/readonly",
        "{\"readOnly\":true}",
    );
    assert_eq!(code, 200, "{body}");
    let deadline = Instant::now() + Duration::from_secs(10);
    for (dashboard, title, ref_id, expr, expect) in pulsar_panels() {
        if expect != Expect::DataWhenReadOnly {
            continue;
        }
        let expr = substitute(expr, &[("job", JOB), ("instance", POD)]);
        loop {
            match prom.query(&expr) {
                Ok(v) if v == [1.0] => break,
                got if Instant::now() > deadline => {
                    failures.push(format!(
                        "pulsar {dashboard} / {title} / {ref_id} read-only: {expr}: {got:?}"
                    ));
                    break;
                }
                _ => std::thread::sleep(Duration::from_millis(200)),
            }
        }
    }
    eprintln!(
        "{}\n({:.1} s)",
        report.join("\n"),
        started.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} panel queries without data:\n{}\nprometheus log:\n{}",
        failures.len(),
        failures.join("\n"),
        prom.log_text()
    );
    b.stop();
}
