//! `bkperf journal`: closed-loop writers appending to the real journal on the real disk.
//!
//! Each of `--writers` logical writers keeps one record outstanding: it appends, waits until the
//! journal's durable LSN passes its record, records the append-to-durable latency, and appends
//! again at once. The writers share one thread with the journal, as connections share a shard in
//! the bookie: there is no thread hand-off per record, only the journal's own group commit.
//! Checkpoints are simulated by trimming everything durable, so segment files are recycled as
//! they would be in a bookie whose checkpoints keep up.
//!
//! Latency is measured from the append call to the moment the loop sees the record durable, in
//! microseconds in an HDR histogram; the warm-up (which also prepares the first segments) is
//! excluded. This is a closed loop, so throughput and latency are two views of one equilibrium;
//! the report says so (`mode: closed_loop`).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use journal::{AppendError, Journal, JournalConfig, Lsn};
use storage::Storage;

use crate::report::{
    new_histogram, parse_duration, write_json, GitInfo, IntervalStat, LatencySummary, MachineInfo,
    ReportBuilder, Results, Table,
};

/// Arguments of `bkperf journal`.
#[derive(clap::Args, Debug, Clone)]
pub struct JournalArgs {
    /// Directory for the journal segments (a temporary directory when absent).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Payload bytes per record.
    #[arg(long, default_value_t = 1024)]
    pub entry_size: usize,
    /// Closed-loop writers, each with one record outstanding.
    #[arg(long, default_value_t = 64)]
    pub writers: usize,
    /// Measured duration, e.g. 10s, 500ms.
    #[arg(long, default_value = "10s")]
    pub duration: String,
    /// Warm-up excluded from the results.
    #[arg(long, default_value = "2s")]
    pub warmup: String,
    /// Write a bookie-bench/1 JSON report here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Segment size in MiB (journalMaxSizeMB).
    #[arg(long, default_value_t = 256)]
    pub segment_mb: u64,
    /// journalMaxGroupWaitMSec, in microseconds.
    #[arg(long, default_value_t = 2000)]
    pub group_wait_us: u64,
    /// journalBufferedWritesThreshold, in KiB.
    #[arg(long, default_value_t = 512)]
    pub threshold_kb: usize,
    /// Groups written but not yet durable at once.
    #[arg(long, default_value_t = 2)]
    pub in_flight: usize,
    /// Close a group only on the timer and thresholds, as a Java bookie with default settings
    /// does (turns off flushing when the device is idle).
    #[arg(long)]
    pub no_idle_flush: bool,
    /// Use the pread/pwrite fallback driver instead of io_uring.
    #[arg(long)]
    pub psync: bool,
}

/// Runs the benchmark.
pub fn run(args: &JournalArgs) -> Result<(), Box<dyn std::error::Error>> {
    let duration = parse_duration(&args.duration)?;
    let warmup = parse_duration(&args.warmup)?;
    if args.writers == 0 {
        return Err("--writers must be at least 1".into());
    }
    let (dir, temporary) = match &args.dir {
        Some(dir) => (dir.clone(), false),
        None => (
            PathBuf::from(format!("./bkperf-journal-{}", std::process::id())),
            true,
        ),
    };
    std::fs::create_dir_all(&dir)?;
    let result = run_in(args, &dir, duration, warmup);
    if temporary {
        if let Err(err) = std::fs::remove_dir_all(&dir) {
            log::warn!("cannot remove {}: {err}", dir.display());
        }
    }
    result
}

struct Outcome {
    hist: hdrhistogram::Histogram<u64>,
    intervals: Vec<IntervalStat>,
    records: u64,
    elapsed: Duration,
    device_bytes: u64,
    syncs: u64,
    groups: u64,
}

fn run_in(
    args: &JournalArgs,
    dir: &Path,
    duration: Duration,
    warmup: Duration,
) -> Result<(), Box<dyn std::error::Error>> {
    let storage = storage::open_dir(dir, 256, args.psync)?;
    let driver = storage.kind().name();
    let config = JournalConfig {
        segment_size_bytes: args.segment_mb << 20,
        max_group_wait_us: args.group_wait_us,
        buffered_writes_threshold_bytes: args.threshold_kb << 10,
        max_groups_in_flight: args.in_flight,
        flush_when_idle: !args.no_idle_flush,
        max_record_bytes: args
            .entry_size
            .max(JournalConfig::default().max_record_bytes),
        ..JournalConfig::default()
    };
    let opened = Instant::now();
    let mut journal = Journal::open(storage, config.clone(), Lsn(0), &mut |_, _| {})?;
    log::info!(
        "journal open in {} ({driver}, first {} MiB segment prepared) in {:.0} ms",
        dir.display(),
        args.segment_mb,
        opened.elapsed().as_secs_f64() * 1e3
    );
    // Trimmed files are deleted on a thread of their own, as the bookie does: an unlink of a
    // large file must not sit in the writers' loop.
    let (trash_tx, trash_rx) = std::sync::mpsc::channel::<String>();
    let trash_dir = dir.to_path_buf();
    let deleter = std::thread::spawn(move || {
        for name in trash_rx {
            let _ = std::fs::remove_file(trash_dir.join(name));
        }
    });
    let outcome = drive(&mut journal, args, duration, &trash_tx, warmup)?;
    journal.flush()?;
    drop(trash_tx);
    let _ = deleter.join();
    print_and_report(args, dir, driver, &config, &outcome)
}

/// The writers' loop: append for every idle writer, let the journal decide, reap durable
/// records, block only when every writer waits.
fn drive<S: Storage>(
    journal: &mut Journal<S>,
    args: &JournalArgs,
    duration: Duration,
    trash: &std::sync::mpsc::Sender<String>,
    warmup: Duration,
) -> Result<Outcome, Box<dyn std::error::Error>> {
    let mut payload = vec![0u8; args.entry_size];
    for (i, b) in payload.iter_mut().enumerate() {
        *b = (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[3];
    }
    let start = Instant::now();
    let now_us = || start.elapsed().as_micros() as u64;
    let measure_from = warmup.as_micros() as u64;
    let end = measure_from + duration.as_micros() as u64;
    let mut outstanding: VecDeque<(Lsn, u64)> = VecDeque::with_capacity(args.writers);
    let mut hist = new_histogram();
    let mut interval = new_histogram();
    let mut intervals = Vec::new();
    let mut next_interval = measure_from + 1_000_000;
    let mut records = 0u64;
    let mut last_trim_us = 0;
    let mut stats_at_start = None;
    loop {
        let now = now_us();
        if now >= end {
            break;
        }
        if stats_at_start.is_none() && now >= measure_from {
            stats_at_start = Some(journal.stats().clone());
        }
        let mut backpressured = false;
        while outstanding.len() < args.writers {
            match journal.append(&payload, now) {
                Ok(lsn) => outstanding.push_back((lsn, now)),
                Err(AppendError::Backpressure) => {
                    backpressured = true;
                    break;
                }
                Err(e) => return Err(e.into()),
            }
        }
        journal.tick(now, true)?;
        if outstanding.len() == args.writers || backpressured {
            let timeout = journal
                .next_deadline_us()
                .map(|d| d.saturating_sub(now).max(1));
            journal.wait(timeout)?;
            journal.tick(now_us(), true)?;
        }
        let durable = journal.durable_lsn();
        let done = now_us();
        while let Some(&(lsn, appended)) = outstanding.front() {
            if lsn > durable {
                break;
            }
            outstanding.pop_front();
            if appended >= measure_from {
                let latency = done.saturating_sub(appended).max(1);
                hist.saturating_record(latency);
                interval.saturating_record(latency);
                records += 1;
            }
        }
        if done >= next_interval {
            let t_s = (next_interval - measure_from) as f64 / 1e6;
            intervals.push(IntervalStat::from_histogram(t_s, &interval));
            interval.reset();
            next_interval += 1_000_000;
        }
        // Checkpoints that keep up: everything durable is persisted elsewhere.
        if done.saturating_sub(last_trim_us) >= 20_000 {
            last_trim_us = done;
            journal.trim(Lsn(durable.0 + 1))?;
            for name in journal.take_trash() {
                let _ = trash.send(name);
            }
        }
    }
    let elapsed = Duration::from_micros(now_us().saturating_sub(measure_from));
    let before = stats_at_start.unwrap_or_default();
    let after = journal.stats();
    Ok(Outcome {
        hist,
        intervals,
        records,
        elapsed,
        device_bytes: after.bytes_written - before.bytes_written,
        syncs: after.syncs - before.syncs,
        groups: after.groups - before.groups,
    })
}

fn print_and_report(
    args: &JournalArgs,
    dir: &Path,
    driver: &str,
    config: &JournalConfig,
    o: &Outcome,
) -> Result<(), Box<dyn std::error::Error>> {
    let secs = o.elapsed.as_secs_f64().max(1e-9);
    let rate = o.records as f64 / secs;
    let payload_mb_s = rate * args.entry_size as f64 / 1e6;
    let device_mb_s = o.device_bytes as f64 / secs / 1e6;
    let summary = LatencySummary::from_histogram(&o.hist);
    println!(
        "bkperf journal: {} writers x {} B records, closed loop, {:.1} s measured after {} warm-up, driver {driver}",
        args.writers, args.entry_size, secs, args.warmup
    );
    let mut headers = vec![
        "records/s",
        "payload MB/s",
        "device MB/s",
        "syncs/s",
        "rec/sync",
    ];
    headers.extend(LatencySummary::HEADERS);
    let mut table = Table::new(&headers);
    let mut row = vec![
        format!("{rate:.0}"),
        format!("{payload_mb_s:.1}"),
        format!("{device_mb_s:.1}"),
        format!("{:.0}", o.syncs as f64 / secs),
        format!("{:.1}", o.records as f64 / o.syncs.max(1) as f64),
    ];
    row.extend(summary.cells());
    table.row(row);
    println!("{}", table.render());
    println!(
        "append-to-durable latency in microseconds; {} groups written",
        o.groups
    );
    let mut per_second = Table::new(&["t_s", "records", "p50", "p99", "max"]);
    for i in &o.intervals {
        per_second.row(vec![
            format!("{:.0}", i.t_s),
            i.ops.to_string(),
            i.p50.to_string(),
            i.p99.to_string(),
            i.max.to_string(),
        ]);
    }
    println!("{}", per_second.render());

    if let Some(path) = &args.json {
        let git = GitInfo::gather();
        let machine = MachineInfo::gather(Some(dir));
        let report = ReportBuilder::new("bkperf-journal", "candidate")
            .target(serde_json::json!({
                "impl": "rust",
                "version": git.commit,
                "bookies": 0,
                "storage": "rust-v1-journal",
                "journal_sync": true,
                "driver": driver,
                "config": {
                    "segment_size_bytes": config.segment_size_bytes,
                    "max_group_wait_us": config.max_group_wait_us,
                    "buffered_writes_threshold_bytes": config.buffered_writes_threshold_bytes,
                    "max_groups_in_flight": config.max_groups_in_flight,
                    "flush_when_idle": config.flush_when_idle,
                },
            }))
            .workload(serde_json::json!({
                "id": format!("journal-{}B-{}w", args.entry_size, args.writers),
                "mode": "closed_loop",
                "max_outstanding": args.writers,
                "entry_bytes": args.entry_size,
                "warmup_s": parse_duration(&args.warmup)?.as_secs_f64(),
                "duration_s": secs,
            }))
            .results(&Results {
                ops_ok: o.records,
                ops_failed: 0,
                elapsed: o.elapsed,
                bytes: o.records * args.entry_size as u64,
                latency: &o.hist,
                corrected: false,
                intervals: o.intervals.clone(),
                uncorrected: None,
                timeouts: 0,
            })
            .section(
                "journal",
                serde_json::json!({
                    "device_bytes": o.device_bytes,
                    "syncs": o.syncs,
                    "groups": o.groups,
                }),
            )
            .machine(&machine, None)
            .build();
        write_json(path, &report)?;
        println!("report written to {}", path.display());
    }
    Ok(())
}
