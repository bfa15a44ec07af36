//! The series a Java 4.14–4.18 DbLedgerStorage bookie exports and the public dashboards query
//! (Pulsar's Helm chart dashboards, StreamNative's; docs/research/issue-46-metrics.md), with
//! Java's names, types and labels, each holding the figure that is true for our design
//! (docs/semantics.md §6.2 says what each means here).
//!
//! Why keep Java's names: operators point dashboards they did not write at a bookie; a series
//! renamed or missing is a blank panel and an alert that never fires. Where our design has no
//! such queue or pool, the series is still exported with the value that is true for us (a
//! queue we do not have holds nothing; a thread pool's queue is the shard queue it stands for).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use super::histogram::{counter, gauge, sanitize, summary, summary_blocks, summary_lines, Unit};
use super::{GcStatus, Merged, Metrics, QueueProbes, ShardMetrics, OPS};
use crate::admin::readonly::{BookieState, DirKind};

/// `bookkeeper_server_<name>`, per [`super::Op`] (all but `Other`).
const OP_NAMES: [&str; OPS - 1] = [
    "ADD_ENTRY_REQUEST",
    "READ_ENTRY_REQUEST",
    "READ_ENTRY_FENCE_REQUEST",
    "READ_ENTRY_LONG_POLL_REQUEST",
    "BATCH_READ_ENTRY_REQUEST",
    "WRITE_LAC_REQUEST",
    "READ_LAC_REQUEST",
    "FORCE_LEDGER_REQUEST",
    "GET_BOOKIE_INFO_REQUEST",
    "GET_LIST_OF_ENTRIES_OF_LEDGER_REQUEST",
];

/// The `thread` label of `bookkeeper_server_thread_executor_queue`, as Java's ordered
/// executors name their threads (`<pool>-OrderedExecutor-<i>-0`), for shard `i`: the pool
/// whose queue the shard's queue stands for. Adds (and every request) decoded on another shard
/// wait in the shard's request queue, where Java's write pool and its high-priority pool
/// queue them; reads that missed the caches wait in the shard's read queue for its readers.
const WRITE_POOL: &str = "BookieWriteThreadPool";
const HIGH_PRIORITY_POOL: &str = "BookieHighPriorityThread";
const READ_POOL: &str = "BookieReadThreadPool";

type Pick = fn(&ShardMetrics) -> i64;

pub(super) fn render(m: &Metrics, state: &BookieState, o: &mut String) {
    let status = if state.is_read_only() { 0 } else { 1 };
    gauge(o, "bookie_SERVER_STATUS", "", status as f64);
    requests(m, o);
    journal(m, o);
    storage(m, o);
    gc(m, o);
    disks(state, o);
}

/// The `bookkeeper_server` scope: request summaries, requests in progress, refused and held
/// back, the executor queues.
fn requests(m: &Metrics, o: &mut String) {
    // Java's processed-request OpStats, `bookkeeper_server_ADD_ENTRY` and `READ_ENTRY` (what
    // the dashboards' rate and latency panels query): Java times them from the request's
    // processing start to its completion, without the thread pool's queue; we have no such
    // pool (a request is processed on the shard that decoded it, or queued to its ledger's
    // shard as part of the add), so they are the `_REQUEST` figures, merged once for both.
    let mut processed = Vec::with_capacity(2);
    for (i, name) in OP_NAMES.iter().enumerate() {
        let merged = m.merged_pair(|s| &s.requests[i]);
        summary(
            o,
            &format!("bookkeeper_server_{name}"),
            "",
            &merged,
            Unit::Ms,
        );
        if i < 2 {
            processed.push(merged);
        }
    }
    for (merged, kind) in processed.iter().zip(["ADD_ENTRY", "READ_ENTRY"]) {
        summary(
            o,
            &format!("bookkeeper_server_{kind}"),
            "",
            merged,
            Unit::Ms,
        );
    }
    let blocked: [Pick; 2] = [
        |s| s.adds_blocked.load(Ordering::Relaxed),
        |s| s.reads_blocked.load(Ordering::Relaxed),
    ];
    for (i, kind) in ["ADD_ENTRY", "READ_ENTRY"].iter().enumerate() {
        let started = m.sum(|s| s.started[i].load(Ordering::Relaxed));
        let finished = m.sum(|s| s.finished[i].load(Ordering::Relaxed));
        let in_progress = started.saturating_sub(finished);
        gauge(
            o,
            &format!("bookkeeper_server_{kind}_IN_PROGRESS"),
            "",
            in_progress as f64,
        );
        let rejected = m.sum(|s| s.rejected[i].load(Ordering::Relaxed));
        counter(
            o,
            &format!("bookkeeper_server_{kind}_REJECTED"),
            "",
            rejected,
        );
        // Requests held back by a limit now: adds waiting for a journal buffer, reads a
        // reader defers while their connection is over its reply budget.
        let held = m.sum_i64(blocked[i]).max(0);
        gauge(
            o,
            &format!("bookkeeper_server_{kind}_BLOCKED"),
            "",
            held as f64,
        );
    }
    let name = "bookkeeper_server_thread_executor_queue";
    let _ = writeln!(o, "# TYPE {name} gauge");
    for (i, s) in m.shards.iter().enumerate() {
        let requests = QueueProbes::depth(&s.queues.requests);
        let reads = QueueProbes::depth(&s.queues.reads);
        for (pool, depth) in [
            (WRITE_POOL, requests),
            (HIGH_PRIORITY_POOL, requests),
            (READ_POOL, reads),
        ] {
            let _ = writeln!(
                o,
                "{name}{{thread=\"{pool}-OrderedExecutor-{i}-0\"}} {depth}"
            );
        }
    }
    counter(
        o,
        "bookie_WRITE_BYTES",
        "",
        m.sum(|s| s.write_bytes.load(Ordering::Relaxed)),
    );
    counter(
        o,
        "bookie_READ_BYTES",
        "",
        m.sum(|s| s.read_bytes.load(Ordering::Relaxed)),
    );
}

/// The `bookie_journal` scope, one `journalIndex` per shard's journal.
fn journal(m: &Metrics, o: &mut String) {
    let name = "bookie_journal_JOURNAL_ADD_ENTRY";
    let _ = writeln!(o, "# TYPE {name} summary");
    for (j, s) in m.shards.iter().enumerate() {
        let labels = format!("journalIndex=\"{j}\",success=\"true\"");
        summary_lines(o, name, &labels, &Merged::of(&s.journal_add), Unit::Ms);
    }
    let name = "bookie_journal_JOURNAL_SYNC";
    let _ = writeln!(o, "# TYPE {name} summary");
    for (j, s) in m.shards.iter().enumerate() {
        let merged = [
            Merged::of(&s.journal_sync[0]),
            Merged::of(&s.journal_sync[1]),
        ];
        summary_blocks(
            o,
            name,
            &format!("journalIndex=\"{j}\","),
            &merged,
            Unit::Ms,
        );
    }
    let series: [(&str, &str, Pick); 6] = [
        ("bookie_journal_JOURNAL_QUEUE_SIZE", "gauge", |s| {
            s.journal_queue.load(Ordering::Relaxed)
        }),
        (
            "bookie_journal_JOURNAL_FORCE_WRITE_QUEUE_SIZE",
            "gauge",
            |s| s.journal_force_write_queue.load(Ordering::Relaxed),
        ),
        ("bookie_journal_JOURNAL_WRITE_BYTES", "counter", |s| {
            s.journal_bytes.load(Ordering::Relaxed) as i64
        }),
        (
            "bookie_journal_JOURNAL_NUM_FLUSH_MAX_WAIT",
            "counter",
            |s| s.journal_flush_max_wait.load(Ordering::Relaxed) as i64,
        ),
        (
            "bookie_journal_JOURNAL_NUM_FLUSH_MAX_OUTSTANDING_BYTES",
            "counter",
            |s| s.journal_flush_bytes.load(Ordering::Relaxed) as i64,
        ),
        (
            "bookie_journal_JOURNAL_NUM_FLUSH_EMPTY_QUEUE",
            "counter",
            |s| s.journal_flush_queue_empty.load(Ordering::Relaxed) as i64,
        ),
    ];
    for (name, kind, pick) in series {
        let _ = writeln!(o, "# TYPE {name} {kind}");
        for (j, s) in m.shards.iter().enumerate() {
            let _ = writeln!(o, "{name}{{journalIndex=\"{j}\"}} {}", pick(s));
        }
    }
}

/// DbLedgerStorage's series (Java labels them per ledger directory; the dashboards sum them,
/// and so do we, over the shards).
fn storage(m: &Metrics, o: &mut String) {
    let gauges: [(&str, Pick); 5] = [
        ("bookie_write_cache_size", |s| {
            s.write_cache_bytes.load(Ordering::Relaxed)
        }),
        ("bookie_read_cache_size", |s| {
            s.read_cache_bytes.load(Ordering::Relaxed)
        }),
        ("bookie_read_cache_count", |s| {
            s.read_cache_count.load(Ordering::Relaxed)
        }),
        ("bookie_ledgers_count", |s| {
            s.ledgers.load(Ordering::Relaxed)
        }),
        ("bookie_entries_count", |s| {
            s.entries.load(Ordering::Relaxed)
        }),
    ];
    for (name, pick) in gauges {
        gauge(o, name, "", m.sum_i64(pick) as f64);
    }
    counter(
        o,
        "bookie_read_cache_hits",
        "",
        m.sum(|s| s.read_cache_hits.load(Ordering::Relaxed)),
    );
    counter(
        o,
        "bookie_read_cache_misses",
        "",
        m.sum(|s| s.read_cache_misses.load(Ordering::Relaxed)),
    );
    // Raw values, as Java's `registerSuccessfulValue`: `_count` runs, `_sum` entries.
    let batches = [Merged::new(), m.merged(|s| &s.read_ahead_batch)];
    summary(o, "bookie_readahead_batch_count", "", &batches, Unit::Raw);
    let reads = m.merged_pair(|s| &s.read_entry);
    summary(o, "bookie_read_entry", "", &reads, Unit::Ms);
}

/// Garbage collection: InterleavedLedgerStorage's `bookie_gc_*` names and DbLedgerStorage's
/// `bookie_*` ones (Pulsar's bookies, the dashboards), and what its GC thread knows.
fn gc(m: &Metrics, o: &mut String) {
    type GcPick = fn(&GcStatus) -> &AtomicU64;
    let series: [(&str, GcPick); 5] = [
        ("MAJOR_COMPACTION_TOTAL", |g| &g.major_count),
        ("MINOR_COMPACTION_TOTAL", |g| &g.minor_count),
        ("DELETED_LEDGER_TOTAL", |g| &g.deleted_ledgers),
        ("RECLAIMED_COMPACTION_SPACE_BYTES", |g| {
            &g.reclaimed_compaction_bytes
        }),
        ("RECLAIMED_DELETION_SPACE_BYTES", |g| {
            &g.reclaimed_deletion_bytes
        }),
    ];
    for (name, pick) in series {
        // Java's deletion figure counts the entry logs removed whole: a taken-over Java log
        // removed once none of its ledgers was held any more is one.
        let java = if name == "RECLAIMED_DELETION_SPACE_BYTES" {
            m.java_log_bytes_retired.load(Ordering::Relaxed)
        } else {
            0
        };
        let value = m.sum(|s| pick(&s.gc).load(Ordering::Relaxed)) + java;
        counter(o, &format!("bookie_gc_{name}"), "", value);
        counter(o, &format!("bookie_{name}"), "", value);
    }
    // Gauges despite the `_TOTAL` (as Java's): the entry logs and ledgers GC looks after.
    let live: [(&str, Pick); 2] = [
        ("bookie_ACTIVE_ENTRY_LOG_TOTAL", |s| {
            s.entry_logs.load(Ordering::Relaxed)
        }),
        ("bookie_ACTIVE_LEDGER_TOTAL", |s| {
            s.ledgers.load(Ordering::Relaxed)
        }),
    ];
    for (name, pick) in live {
        gauge(o, name, "", m.sum_i64(pick) as f64);
    }
}

/// The ledger directories, in Java's names (`LedgerDirsManager`).
fn disks(state: &BookieState, o: &mut String) {
    let ledger_dirs: Vec<_> = state
        .dirs
        .iter()
        .filter(|d| d.kind == DirKind::Ledger)
        .collect();
    gauge(o, "bookie_ledger_num_dirs", "", ledger_dirs.len() as f64);
    let writable = ledger_dirs.iter().filter(|d| d.writable()).count();
    gauge(o, "bookie_ledger_writable_dirs", "", writable as f64);
    for ledger_dir in ledger_dirs {
        let name = format!(
            "bookie_ledger_dir_{}_usage",
            sanitize(&ledger_dir.path.display().to_string())
        );
        gauge(o, &name, "", ledger_dir.usage() * 100.0);
    }
}
