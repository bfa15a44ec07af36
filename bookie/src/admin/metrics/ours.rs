//! Our own series, `bookie_rs_*`: what the Java names cannot say about this design — the
//! latency of each stage of an add (Prometheus histograms in milliseconds, `stage` label; see
//! the parent module's doc), the journal's group commit, the read-ahead, the journal-first
//! disk share, the taken-over Java files, the disks as the checker sees them.
//!
//! Why apart from [`super::java`]: those names are a compatibility contract with dashboards
//! we do not own; these are ours to change, and `bkperf` reads them (`perf/src/stages.rs`).

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use super::histogram::{counter, escape_label, gauge, histogram_lines};
use super::{Metrics, ShardMetrics, STAGES};
use crate::admin::readonly::BookieState;

/// `bookie_rs_stage_latency_ms{stage}`, in [`super::Stage`]'s order.
const STAGE_NAMES: [&str; STAGES] = [
    "cross_shard_queue",
    "journal_blocked",
    "journal",
    "cache_miss_read",
    "decode",
    "write_cache",
    "journal_group_wait",
    "journal_write",
    "journal_fsync",
    "reply",
    "write_cache_full",
];

type Pick = fn(&ShardMetrics) -> u64;

pub(super) fn render(m: &Metrics, state: &BookieState, o: &mut String) {
    let journal: [(&str, Pick); 6] = [
        ("bookie_rs_journal_refused_no_buffer_total", |s| {
            s.journal_refused_no_buffer.load(Ordering::Relaxed)
        }),
        ("bookie_rs_journal_refused_no_segment_total", |s| {
            s.journal_refused_no_segment.load(Ordering::Relaxed)
        }),
        ("bookie_rs_journal_records_total", |s| {
            s.journal_records.load(Ordering::Relaxed)
        }),
        ("bookie_rs_journal_groups_total", |s| {
            s.journal_groups.load(Ordering::Relaxed)
        }),
        ("bookie_rs_journal_syncs_total", |s| {
            s.journal_syncs.load(Ordering::Relaxed)
        }),
        ("bookie_rs_journal_flush_entries_threshold_total", |s| {
            s.journal_flush_entries.load(Ordering::Relaxed)
        }),
    ];
    for (name, pick) in journal {
        let _ = writeln!(o, "# TYPE {name} counter");
        for (j, s) in m.shards.iter().enumerate() {
            let _ = writeln!(o, "{name}{{journalIndex=\"{j}\"}} {}", pick(s));
        }
    }
    gauge(
        o,
        "bookie_rs_read_ahead_parked",
        "",
        m.sum_i64(|s| s.read_ahead_parked.load(Ordering::Relaxed)) as f64,
    );
    let read_ahead: [(&str, Pick); 4] = [
        ("bookie_rs_read_cache_hits_total", |s| {
            s.read_cache_hits.load(Ordering::Relaxed)
        }),
        ("bookie_rs_read_ahead_runs_total", |s| {
            s.read_ahead_runs.load(Ordering::Relaxed)
        }),
        ("bookie_rs_read_ahead_entries_total", |s| {
            s.read_ahead_entries.load(Ordering::Relaxed)
        }),
        ("bookie_rs_read_ahead_waits_total", |s| {
            s.read_ahead_waits.load(Ordering::Relaxed)
        }),
    ];
    for (name, pick) in read_ahead {
        counter(o, name, "", m.sum(pick));
    }
    for (name, v) in [
        ("bookie_rs_disk_share_reads_waited_total", &m.reads_waited),
        ("bookie_rs_disk_share_reads_overdue_total", &m.reads_overdue),
    ] {
        counter(o, name, "", v.load(Ordering::Relaxed));
    }
    counter(
        o,
        "bookie_rs_gc_compacted_entries",
        "",
        m.sum(|s| s.gc.compacted_entries.load(Ordering::Relaxed)),
    );
    counter(
        o,
        "bookie_rs_takeover_java_entry_logs_removed",
        "",
        m.java_logs_retired.load(Ordering::Relaxed),
    );
    counter(
        o,
        "bookie_rs_takeover_java_entry_log_bytes_removed",
        "",
        m.java_log_bytes_retired.load(Ordering::Relaxed),
    );
    let _ = writeln!(o, "# TYPE bookie_rs_dir_usage gauge");
    for d in &state.dirs {
        let _ = writeln!(
            o,
            "bookie_rs_dir_usage{{dir=\"{}\"}} {}",
            escape_label(&d.path.display().to_string()),
            d.usage()
        );
    }
    gauge(o, "bookie_rs_read_only_reasons", "", state.reasons() as f64);
    let name = "bookie_rs_stage_latency_ms";
    let _ = writeln!(o, "# TYPE {name} histogram");
    for (i, stage) in STAGE_NAMES.iter().enumerate() {
        let merged = m.merged(|s| &s.stages[i]);
        histogram_lines(o, name, &format!("stage=\"{stage}\""), &merged);
    }
}
