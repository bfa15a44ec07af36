//! The rendered page: quantiles from the merged shards, Java's names and label shapes, the
//! new DbLedgerStorage and executor series, and every sample line parseable.

use std::sync::atomic::Ordering;

use super::*;

fn state() -> BookieState {
    BookieState::new(
        &crate::config::DiskConfig::default(),
        &[(
            std::path::Path::new("/data/ledgers"),
            crate::admin::readonly::DirKind::Ledger,
        )],
    )
}

#[test]
fn quantiles_and_render() {
    let m = Metrics::new(2);
    for i in 0..100u64 {
        m.shards[(i % 2) as usize].requests[Op::AddEntry as usize][1].record(1000 + i);
    }
    let merged = m.merged(|s| &s.requests[0][1]);
    assert_eq!(merged.count(), 100);
    let p50 = merged.quantile_ms(0.5);
    assert!((1.0..=1.3).contains(&p50), "{p50}");
    assert!(merged.quantile_ms(1.0) >= 1.099);
    let text = m.render(&state());
    assert!(text.contains("bookkeeper_server_ADD_ENTRY_REQUEST_count{success=\"true\"} 100"));
    assert!(text
        .contains("bookkeeper_server_ADD_ENTRY_REQUEST{success=\"false\",quantile=\"0.5\"} NaN"));
    assert!(text.contains("bookie_SERVER_STATUS 1"));
    // Java's processed-request OpStats (the dashboards' rate panels), the top quantile
    // as Java prints it, both GC namings, the process family.
    assert!(text.contains("bookkeeper_server_ADD_ENTRY_count{success=\"true\"} 100"));
    assert!(text.contains("bookkeeper_server_READ_ENTRY_count{success=\"false\"} 0"));
    assert!(text.contains("bookkeeper_server_ADD_ENTRY{success=\"true\",quantile=\"1.0\"} "));
    assert!(!text.contains("quantile=\"1\""));
    assert!(text.contains("bookie_gc_MAJOR_COMPACTION_TOTAL 0"));
    assert!(text.contains("bookie_MAJOR_COMPACTION_TOTAL 0"));
    assert!(text.contains("bookie_RECLAIMED_DELETION_SPACE_BYTES 0"));
    assert!(
        !text.contains("bookie_rs_gc_compacted_entries_")
            && !text.contains("bookie_compacted_entries")
    );
    for name in [
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
    ] {
        assert!(text.contains(&format!("# TYPE {name} ")), "{name}");
    }
    assert!(text.contains("bookie_ledger_dir__data_ledgers_usage"));
    assert!(text.contains("bookie_journal_JOURNAL_QUEUE_SIZE{journalIndex=\"1\"} 0"));
    // Every sample line is `name{labels} value` or `name value`.
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (_, value) = line.rsplit_once(' ').expect(line);
        assert!(value == "NaN" || value.parse::<f64>().is_ok(), "{line}");
    }
}

/// The series added for the dashboards, from what the shards, readers and journals record:
/// JOURNAL_SYNC per journal with both `success` blocks, the read-ahead batch summary in raw
/// entries, reads from storage, the cache hit and miss counters, the gauges summed over the
/// shards, and one executor queue per shard and pool, read through its probe.
#[test]
fn dashboard_series_from_the_shards() {
    let m = Metrics::new(2);
    m.shards[1].journal_sync(1_000, 1_250, true);
    m.shards[1].journal_sync(2_000, 2_400, false);
    m.shards[0].read_ahead_run(3);
    m.shards[1].read_ahead_run(2);
    m.shards[0].read_entry_between(10, 60, true);
    m.shards[0].read_cache_misses.store(4, Ordering::Relaxed);
    m.shards[1].read_cache_hits.store(7, Ordering::Relaxed);
    m.shards[0].entries.store(10, Ordering::Relaxed);
    m.shards[1].entries.store(5, Ordering::Relaxed);
    m.shards[1].entry_logs.store(2, Ordering::Relaxed);
    m.shards[0].ledgers.store(3, Ordering::Relaxed);
    m.shards[1].adds_blocked.store(6, Ordering::Relaxed);
    m.shards[0].reads_blocked.store(1, Ordering::Relaxed);
    m.shards[1]
        .journal_force_write_queue
        .store(1, Ordering::Relaxed);
    let _ = m.shards[1].queues.reads.set(Box::new(|| 9));
    let _ = m.shards[0].queues.requests.set(Box::new(|| 2));
    let text = m.render(&state());
    for line in [
        "# TYPE bookie_journal_JOURNAL_SYNC summary",
        "bookie_journal_JOURNAL_SYNC_count{journalIndex=\"1\",success=\"true\"} 1",
        "bookie_journal_JOURNAL_SYNC_count{journalIndex=\"1\",success=\"false\"} 1",
        "bookie_journal_JOURNAL_SYNC_sum{journalIndex=\"1\",success=\"true\"} 0.25",
        "bookie_journal_JOURNAL_SYNC_count{journalIndex=\"0\",success=\"true\"} 0",
        "bookie_journal_JOURNAL_FORCE_WRITE_QUEUE_SIZE{journalIndex=\"1\"} 1",
        "bookie_readahead_batch_count_count{success=\"true\"} 2",
        "bookie_readahead_batch_count_sum{success=\"true\"} 5",
        "bookie_readahead_batch_count{success=\"true\",quantile=\"1.0\"} 3",
        "bookie_read_entry_count{success=\"true\"} 1",
        "bookie_read_entry_sum{success=\"true\"} 0.05",
        "# TYPE bookie_read_cache_misses counter\nbookie_read_cache_misses 4",
        "# TYPE bookie_read_cache_hits counter\nbookie_read_cache_hits 7",
        "# TYPE bookie_entries_count gauge\nbookie_entries_count 15",
        "# TYPE bookie_ACTIVE_ENTRY_LOG_TOTAL gauge\nbookie_ACTIVE_ENTRY_LOG_TOTAL 2",
        "# TYPE bookie_ACTIVE_LEDGER_TOTAL gauge\nbookie_ACTIVE_LEDGER_TOTAL 3",
        "bookkeeper_server_ADD_ENTRY_BLOCKED 6",
        "bookkeeper_server_READ_ENTRY_BLOCKED 1",
        "# TYPE bookkeeper_server_thread_executor_queue gauge",
        "bookkeeper_server_thread_executor_queue{thread=\"BookieReadThreadPool-OrderedExecutor-1-0\"} 9",
        "bookkeeper_server_thread_executor_queue{thread=\"BookieReadThreadPool-OrderedExecutor-0-0\"} 0",
        "bookkeeper_server_thread_executor_queue{thread=\"BookieHighPriorityThread-OrderedExecutor-0-0\"} 2",
        "bookkeeper_server_thread_executor_queue{thread=\"BookieWriteThreadPool-OrderedExecutor-0-0\"} 2",
    ] {
        assert!(text.contains(&format!("{line}\n")), "{line} in\n{text}");
    }
    // One TYPE line per name: a scraper refuses a name typed twice.
    let mut typed: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .collect();
    let all = typed.len();
    typed.sort_unstable();
    typed.dedup();
    assert_eq!(typed.len(), all, "a name typed twice");
}
