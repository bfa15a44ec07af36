//! The series the public BookKeeper dashboards query (Pulsar's Helm chart dashboards,
//! lhotari/pulsar-grafana-dashboards `pulsar/bookkeeper.json`, `bookkeeper-compaction.json`,
//! `jvm.json`; StreamNative's apache-pulsar-grafana-dashboard; docs/research/issue-46-metrics.md
//! §2), written here as data — name, Prometheus type, the labels the panels select on — and
//! checked against a real bookie's `/metrics` after adds and reads through it: each listed
//! series is there, with its `# TYPE`, its labels, and for a summary its quantiles, `_count`
//! and `_sum`. The series only a JVM (or an older Java release, or another process) has are
//! listed too, with the reason, and must stay absent: the `process_*` family stands in for the
//! JVM's CPU and memory.

use std::collections::BTreeMap;

mod common;

use bytes::Bytes;
use common::bookie::BookieBuilder;
use common::{entry, free_port, read};
use net::client::blocking::BlockingClient;
use net::{Request, StatusCode};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
    Summary,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Summary => "summary",
        }
    }
}

/// A series the dashboards query, the type we export it as, and the labels their selectors
/// need on it (a summary's `quantile` is checked apart).
const QUERIED: &[(&str, Kind, &[&str])] = &[
    ("bookie_SERVER_STATUS", Kind::Gauge, &[]),
    ("bookie_WRITE_BYTES", Kind::Counter, &[]),
    ("bookie_READ_BYTES", Kind::Counter, &[]),
    ("bookkeeper_server_ADD_ENTRY", Kind::Summary, &["success"]),
    ("bookkeeper_server_READ_ENTRY", Kind::Summary, &["success"]),
    (
        "bookkeeper_server_ADD_ENTRY_REQUEST",
        Kind::Summary,
        &["success"],
    ),
    (
        "bookkeeper_server_READ_ENTRY_REQUEST",
        Kind::Summary,
        &["success"],
    ),
    ("bookkeeper_server_ADD_ENTRY_IN_PROGRESS", Kind::Gauge, &[]),
    ("bookkeeper_server_READ_ENTRY_IN_PROGRESS", Kind::Gauge, &[]),
    ("bookkeeper_server_ADD_ENTRY_BLOCKED", Kind::Gauge, &[]),
    ("bookkeeper_server_READ_ENTRY_BLOCKED", Kind::Gauge, &[]),
    (
        "bookkeeper_server_thread_executor_queue",
        Kind::Gauge,
        &["thread"],
    ),
    (
        "bookie_journal_JOURNAL_ADD_ENTRY",
        Kind::Summary,
        &["journalIndex", "success"],
    ),
    (
        "bookie_journal_JOURNAL_SYNC",
        Kind::Summary,
        &["journalIndex", "success"],
    ),
    // Java declares the two queue sizes counters (it increments and decrements them); they
    // are gauges here, which is what they are: PromQL reads both the same.
    (
        "bookie_journal_JOURNAL_QUEUE_SIZE",
        Kind::Gauge,
        &["journalIndex"],
    ),
    (
        "bookie_journal_JOURNAL_FORCE_WRITE_QUEUE_SIZE",
        Kind::Gauge,
        &["journalIndex"],
    ),
    ("bookie_ledgers_count", Kind::Gauge, &[]),
    ("bookie_entries_count", Kind::Gauge, &[]),
    ("bookie_write_cache_size", Kind::Gauge, &[]),
    ("bookie_read_cache_size", Kind::Gauge, &[]),
    ("bookie_read_cache_hits", Kind::Counter, &[]),
    ("bookie_read_cache_misses", Kind::Counter, &[]),
    ("bookie_readahead_batch_count", Kind::Summary, &["success"]),
    ("bookie_read_entry", Kind::Summary, &["success"]),
    ("bookie_DELETED_LEDGER_TOTAL", Kind::Counter, &[]),
    ("bookie_MAJOR_COMPACTION_TOTAL", Kind::Counter, &[]),
    ("bookie_MINOR_COMPACTION_TOTAL", Kind::Counter, &[]),
    (
        "bookie_RECLAIMED_COMPACTION_SPACE_BYTES",
        Kind::Counter,
        &[],
    ),
    ("bookie_RECLAIMED_DELETION_SPACE_BYTES", Kind::Counter, &[]),
    ("bookie_ACTIVE_ENTRY_LOG_TOTAL", Kind::Gauge, &[]),
    ("bookie_ACTIVE_LEDGER_TOTAL", Kind::Gauge, &[]),
    ("bookie_ledger_writable_dirs", Kind::Gauge, &[]),
    ("process_cpu_seconds_total", Kind::Counter, &[]),
    ("process_resident_memory_bytes", Kind::Gauge, &[]),
    ("process_virtual_memory_bytes", Kind::Gauge, &[]),
    ("process_open_fds", Kind::Gauge, &[]),
    ("process_start_time_seconds", Kind::Gauge, &[]),
];

/// Series the dashboards query that a bookie of ours does not export, and why.
const NOT_EXPORTED: &[(&str, &str)] = &[
    (
        "jvm_memory_bytes_used",
        "a JVM's heap and non-heap (Pulsar's jvm.json Heap Memory, and its variables): there is \
         no JVM; process_resident_memory_bytes is the process's memory",
    ),
    (
        "jvm_memory_bytes_committed",
        "a JVM's heap: no JVM (process_* instead)",
    ),
    (
        "jvm_memory_bytes_max",
        "a JVM's heap limit: no JVM (process_* instead)",
    ),
    (
        "jvm_memory_direct_bytes_used",
        "Netty's direct memory: no JVM; buffers are in process_resident_memory_bytes",
    ),
    (
        "jvm_memory_direct_bytes_max",
        "Netty's direct memory limit: no JVM",
    ),
    (
        "jvm_gc_collection_seconds",
        "the JVM's collector pauses: no JVM, no collector (process_cpu_seconds_total for CPU)",
    ),
    (
        "bookie_journal_JOURNAL_CB_QUEUE_SIZE",
        "removed in BookKeeper 4.16 (no 4.18 bookie exports it); StreamNative's dashboards \
         still query it",
    ),
    (
        "bookie_DELETED_LEDGER_COUNT",
        "the name before 4.16; bookie_DELETED_LEDGER_TOTAL is 4.16+'s",
    ),
    (
        "bookie_MINOR_COMPACTION_COUNT",
        "the name before 4.16; bookie_MINOR_COMPACTION_TOTAL is 4.16+'s",
    ),
    (
        "bookie_storage_entries_count",
        "a pre-Apache DbLedgerStorage name (apache/pulsar's legacy dashboard); no Apache \
         release exports bookie_storage_*",
    ),
    (
        "bookie_journal_JOURNAL_QUEUE_LATENCY",
        "Java's wait in the journal thread's queue; records are copied into the open group at \
         once here (their wait for the group's write is bookie_rs_stage_latency_ms{stage=\
         \"journal_group_wait\"}); only apache/pulsar's legacy dashboard queries it, with \
         quantile=\"1\", which no Java bookie writes either",
    ),
    (
        "auditor_NUM_UNDER_REPLICATED_LEDGERS",
        "the autorecovery auditor's, in the autorecovery pods' /metrics, not a bookie's",
    ),
];

/// One sample of the page: name, labels, value.
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// The text exposition: `# TYPE` per name, and every sample.
fn parse(page: &str) -> (BTreeMap<String, String>, Vec<Sample>) {
    let mut types = BTreeMap::new();
    let mut samples = Vec::new();
    for line in page.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect(line);
            assert!(
                types.insert(name.to_string(), kind.to_string()).is_none(),
                "{name} typed twice"
            );
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect(line);
        let value = match value {
            "NaN" => f64::NAN,
            v => v.parse().unwrap_or_else(|_| panic!("value of {line}")),
        };
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => (name, rest.strip_suffix('}').expect(line)),
            None => (series, ""),
        };
        let mut parsed = BTreeMap::new();
        for pair in labels.split("\",").filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once("=\"").expect(line);
            parsed.insert(k.trim().to_string(), v.trim_end_matches('"').to_string());
        }
        samples.push(Sample {
            name: name.to_string(),
            labels: parsed,
            value,
        });
    }
    (types, samples)
}

/// The sum of `name`'s samples whose labels include `labels`.
fn total(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|s| s.name == name)
        .filter(|s| {
            labels
                .iter()
                .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(v))
        })
        .map(|s| s.value)
        .sum()
}

fn add(ledger: i64, e: i64) -> Request {
    Request::AddEntry {
        ledger_id: ledger,
        entry_id: e,
        master_key: Bytes::from(vec![3u8; 20]),
        body: entry(ledger, e, e - 1, &[e as u8; 512]),
        recovery: false,
        write_flags: None,
    }
}

fn call(c: &mut BlockingClient, r: Request) -> StatusCode {
    c.call_v3(r, None).expect("call").response.status()
}

/// A bookie with two shards takes adds on two ledgers (one likely crossing shards), serves
/// reads from its write cache, flushes, then serves a sequential read of a ledger from disk
/// (a miss, then read-ahead runs and hits): every series the dashboards query is on its page
/// with its type and labels, the new ones hold what was done (syncs, entries, misses, hits,
/// read-ahead runs, reads from storage, segments, ledgers, a queue per shard and pool), and
/// the JVM-only ones are absent.
#[test]
fn every_series_the_dashboards_query_is_exported() {
    let dir = common::tempdir("bookie-series-");
    let mut b = BookieBuilder::serve(free_port())
        .args(["--shards", "2", "--no-pin"])
        .http_port(free_port())
        .data_dir(dir.path())
        .start();
    let mut c = b.client();
    for e in 0..200 {
        assert_eq!(call(&mut c, add(21, e)), StatusCode::EOK);
        assert_eq!(call(&mut c, add(22, e)), StatusCode::EOK);
    }
    for e in 0..20 {
        assert_eq!(call(&mut c, read(22, e)), StatusCode::EOK, "write cache");
    }
    b.flush_write_cache();
    for e in 0..200 {
        assert_eq!(call(&mut c, read(21, e)), StatusCode::EOK, "from disk");
    }
    let (code, page) = b.http("GET", "/metrics", "");
    assert_eq!(code, 200);
    let (types, samples) = parse(&page);

    let mut missing = Vec::new();
    for &(name, kind, labels) in QUERIED {
        if types.get(name).map(String::as_str) != Some(kind.name()) {
            missing.push(format!(
                "{name}: TYPE {:?}, want {}",
                types.get(name),
                kind.name()
            ));
            continue;
        }
        let has = |series: &str, extra: &[&str]| {
            samples.iter().any(|s| {
                s.name == series
                    && labels
                        .iter()
                        .chain(extra)
                        .all(|l| s.labels.contains_key(*l))
            })
        };
        let ok = match kind {
            Kind::Summary => {
                has(name, &["quantile"])
                    && has(&format!("{name}_count"), &[])
                    && has(&format!("{name}_sum"), &[])
                    && samples.iter().any(|s| {
                        s.name == name
                            && s.labels.get("quantile").map(String::as_str) == Some("1.0")
                            && s.labels.get("success").map(String::as_str) == Some("true")
                    })
            }
            Kind::Counter | Kind::Gauge => has(name, &[]),
        };
        if !ok {
            missing.push(format!("{name}: no sample with labels {labels:?}"));
        }
    }
    // `bookie_ledger_dir_<path>_usage`: one gauge per ledger directory, named after its path.
    if !types
        .iter()
        .any(|(n, k)| n.starts_with("bookie_ledger_dir_") && n.ends_with("_usage") && k == "gauge")
    {
        missing.push("bookie_ledger_dir_<path>_usage".into());
    }
    assert!(
        missing.is_empty(),
        "missing or mistyped:\n{}",
        missing.join("\n")
    );
    for (name, why) in NOT_EXPORTED {
        assert!(
            !samples.iter().any(|s| s.name.starts_with(name)),
            "{name} is exported, but listed as not ({why})"
        );
    }

    // The panels' thread selectors find a queue per shard and pool.
    for pool in ["BookieHighPriorityThread", "BookieReadThreadPool"] {
        for shard in 0..2 {
            let thread = format!("{pool}-OrderedExecutor-{shard}-0");
            assert!(
                samples.iter().any(|s| {
                    s.name == "bookkeeper_server_thread_executor_queue"
                        && s.labels.get("thread") == Some(&thread)
                }),
                "{thread}"
            );
        }
    }
    // The new series hold what was done.
    let ok = [("success", "true")];
    let positive = [
        ("bookie_journal_JOURNAL_SYNC_count", &ok[..]),
        ("bookie_entries_count", &[]),
        ("bookie_read_cache_misses", &[]),
        ("bookie_read_cache_hits", &[]),
        ("bookie_readahead_batch_count_count", &ok[..]),
        ("bookie_readahead_batch_count_sum", &ok[..]),
        ("bookie_ACTIVE_ENTRY_LOG_TOTAL", &[]),
        ("process_cpu_seconds_total", &[]),
    ];
    for (name, labels) in positive {
        assert!(total(&samples, name, labels) > 0.0, "{name} is 0");
    }
    assert!(total(&samples, "bookie_entries_count", &[]) >= 400.0);
    assert_eq!(total(&samples, "bookie_ACTIVE_LEDGER_TOTAL", &[]), 2.0);
    let syncs = total(&samples, "bookie_journal_JOURNAL_SYNC_count", &ok);
    let journal_syncs = total(&samples, "bookie_rs_journal_syncs_total", &[]);
    assert!(
        syncs <= journal_syncs && syncs > 0.0,
        "{syncs} of {journal_syncs}"
    );
    // Every read of an entry is a read of ledger storage: 220, plus none failed.
    assert!(total(&samples, "bookie_read_entry_count", &ok) >= 220.0);
    assert_eq!(
        total(&samples, "bookie_read_entry_count", &[("success", "false")]),
        0.0
    );
    // Of the 200 reads from disk, the misses and the read-ahead's hits make up the whole.
    let (hits, misses) = (
        total(&samples, "bookie_read_cache_hits", &[]),
        total(&samples, "bookie_read_cache_misses", &[]),
    );
    assert_eq!(hits + misses, 200.0, "hits {hits} misses {misses}");
    b.stop();
}
