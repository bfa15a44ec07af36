//! Counters and latency histograms, updated by the shards without locks or allocation, and
//! rendered as Prometheus text (format 0.0.4) for `GET /metrics`.
//!
//! Why this shape: each shard owns a [`ShardMetrics`] block of atomics that only it (and its
//! reader thread) writes — relaxed `fetch_add`s on cache lines no other core writes — and the
//! HTTP thread sums the blocks at scrape time. A latency histogram is a fixed array of
//! log-linear buckets in microseconds (4 per power of two, ≤ 19 % wide, up to ~19 h), so
//! recording is an index computation and two atomic adds.
//!
//! Names follow the Java bookie (docs/semantics.md §6.2) where we measure the same thing:
//! request latencies are Prometheus *summaries* in milliseconds with the label
//! `success="true|false"` and quantiles 0.5 … 1.0 (estimated from the buckets: the upper bound
//! of the bucket holding the quantile), `bookkeeper_server_<OP>_REQUEST`; journal series carry
//! `journalIndex` (one journal per shard here). Our own series start with `bookie_rs_` and are
//! Prometheus histograms (per-stage latency, in milliseconds).
//!
//! **Stages of an add** (`bookie_rs_stage_latency_ms{stage=...}`), recorded once per add so
//! each stage's count is the number of adds that went through it, and their sum is the add's
//! latency inside the bookie: `decode` (the socket read that brought the frame → its dispatch),
//! `cross_shard_queue` (only adds for another shard's ledger), `write_cache` (the ledger
//! table's add), `journal_blocked` (only adds that found every journal buffer busy),
//! `journal_group_wait` (appended → its group's write submitted: the group-commit wait and the
//! in-flight window), `journal_write` (submitted → write completed), `journal_fsync` (written
//! → the sync covering it completed, including a sync already in flight), `journal` (appended
//! → durable, the three above), and `reply` (durable → the reply's bytes written to the
//! socket, including the hop back to the connection's shard). Completions are stamped when the
//! shard reaps them, so a shard busy elsewhere shows up in the stage it delays.
//!
//! **Scheduling**: at scrape time, `/proc/self/task/*/schedstat` gives each thread's time on a
//! CPU and time runnable but waiting on a run queue, exported per thread name as counters
//! (`bookie_rs_thread_cpu_seconds_total`, `bookie_rs_thread_runqueue_wait_seconds_total`):
//! nothing is recorded on the threads themselves.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::admin::readonly::BookieState;

/// Microseconds since the process's metrics epoch: a clock all shards share.
#[inline]
/// Milliseconds since the Unix epoch, derived from [`now_us`] (one clock read, not two): the
/// wall clock at the first call plus the monotonic time since.
pub fn now_ms() -> i64 {
    ms_at(now_us())
}

/// The wall-clock milliseconds of a [`now_us`] reading.
pub fn ms_at(us: u64) -> i64 {
    static BASE_MS: OnceLock<i64> = OnceLock::new();
    let base = *BASE_MS.get_or_init(|| {
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        wall - (now_us() / 1000) as i64
    });
    base + (us / 1000) as i64
}

pub fn now_us() -> u64 {
    crate::admin::clock::now_us()
}

/// A request's kind and start time in one word (for replies the reader thread sends):
/// op in the top byte, microseconds below; never 0.
#[inline]
pub fn pack_timing(op: Op, since_us: u64) -> u64 {
    ((op as u64 + 1) << 56) | (since_us & ((1 << 56) - 1))
}

/// The inverse of [`pack_timing`].
#[inline]
pub fn unpack_timing(t: u64) -> (Op, u64) {
    (
        Op::from_u8(((t >> 56) as u8).wrapping_sub(1)),
        t & ((1 << 56) - 1),
    )
}

const BUCKETS: usize = 144;

#[inline]
fn bucket_of(us: u64) -> usize {
    if us < 4 {
        return us as usize;
    }
    let exp = 63 - us.leading_zeros() as usize;
    let sub = ((us >> (exp - 2)) & 3) as usize;
    (4 * (exp - 1) + sub).min(BUCKETS - 1)
}

/// The largest value (µs) bucket `i` holds.
fn bucket_upper(i: usize) -> u64 {
    if i < 4 {
        return i as u64;
    }
    let exp = i / 4 + 1;
    let sub = (i % 4) as u64;
    ((4 + sub) << (exp - 2)) + (1u64 << (exp - 2)) - 1
}

/// A latency histogram in microseconds.
pub struct Histogram {
    counts: [AtomicU64; BUCKETS],
    sum_us: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram {
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_us: AtomicU64::new(0),
        }
    }
}

impl Histogram {
    #[inline]
    pub fn record(&self, us: u64) {
        self.counts[bucket_of(us)].fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
    }

    fn merge_into(&self, into: &mut Merged) {
        for (m, c) in into.counts.iter_mut().zip(&self.counts) {
            *m += c.load(Ordering::Relaxed);
        }
        into.sum_us += self.sum_us.load(Ordering::Relaxed);
    }
}

/// Histograms summed over shards, at scrape time.
struct Merged {
    counts: [u64; BUCKETS],
    sum_us: u64,
}

impl Merged {
    fn new() -> Merged {
        Merged {
            counts: [0; BUCKETS],
            sum_us: 0,
        }
    }

    fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The quantile in milliseconds (NaN when empty, as the Java exporter prints).
    fn quantile_ms(&self, q: f64) -> f64 {
        let count = self.count();
        if count == 0 {
            return f64::NAN;
        }
        let rank = ((q * count as f64).ceil() as u64).clamp(1, count);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return bucket_upper(i) as f64 / 1000.0;
            }
        }
        bucket_upper(BUCKETS - 1) as f64 / 1000.0
    }
}

/// Request kinds, each a `bookkeeper_server_<name>` summary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Op {
    AddEntry = 0,
    ReadEntry,
    ReadEntryFence,
    ReadEntryLongPoll,
    BatchReadEntry,
    WriteLac,
    ReadLac,
    ForceLedger,
    GetBookieInfo,
    GetListOfEntries,
    Other,
}

const OPS: usize = 11;
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

impl Op {
    pub fn from_u8(v: u8) -> Op {
        const ALL: [Op; OPS] = [
            Op::AddEntry,
            Op::ReadEntry,
            Op::ReadEntryFence,
            Op::ReadEntryLongPoll,
            Op::BatchReadEntry,
            Op::WriteLac,
            Op::ReadLac,
            Op::ForceLedger,
            Op::GetBookieInfo,
            Op::GetListOfEntries,
            Op::Other,
        ];
        ALL.get(v as usize).copied().unwrap_or(Op::Other)
    }
}

/// Our own request stages, `bookie_rs_stage_latency_ms{stage=...}` (see the module doc).
#[derive(Clone, Copy, Debug)]
#[repr(u8)]
pub enum Stage {
    /// A request for another shard's ledger: from decoding to the owner taking it.
    CrossShardQueue = 0,
    /// Records waiting for a free journal buffer (backpressure) before being appended.
    JournalBlocked,
    /// From the journal append to the record being durable (group write + fsync).
    Journal,
    /// A read the write cache could not answer: from decoding to the reply from disk.
    CacheMissRead,
    /// An add: from the socket read that brought its frame to its dispatch.
    Decode,
    /// An add: the ledger table's add (rules, write cache).
    WriteCache,
    /// An add: from its journal append to its group's write being submitted.
    JournalGroupWait,
    /// An add: its group's write, submitted → completed.
    JournalWrite,
    /// An add: its group written → the sync covering it completed.
    JournalFsync,
    /// An add: from its reply being ready (durable) to its bytes written to the socket.
    Reply,
    /// The write cache at its limit: every connection of the shard stops reading until a
    /// flush frees it. One observation per episode, its length (the adds it held wait before
    /// `decode`, where no per-add stage sees them).
    WriteCacheFull,
}

const STAGES: usize = 11;
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

/// One shard's metrics.
#[derive(Default)]
pub struct ShardMetrics {
    /// Per op: [failed, succeeded].
    requests: [[Histogram; 2]; OPS],
    stages: [Histogram; STAGES],
    /// `bookie_journal_JOURNAL_ADD_ENTRY`: journal append → durable, per add.
    journal_add: Histogram,
    started: [AtomicU64; 2],
    finished: [AtomicU64; 2],
    rejected: [AtomicU64; 2],
    pub write_bytes: AtomicU64,
    pub read_bytes: AtomicU64,
    // Gauges and journal counters, stored (not added) by the shard in `drive`.
    pub journal_queue: AtomicI64,
    pub write_cache_bytes: AtomicI64,
    /// The read-ahead cache (its readers store them after each read).
    pub read_cache_bytes: AtomicI64,
    pub read_cache_count: AtomicI64,
    pub read_cache_hits: AtomicU64,
    /// Read-ahead device reads, and the entries they brought beyond the asked one.
    pub read_ahead_runs: AtomicU64,
    pub read_ahead_entries: AtomicU64,
    /// Reads the shard parked on a read-ahead run in flight (`run_waits`) instead of sending
    /// each to a reader.
    pub read_ahead_waits: AtomicU64,
    /// Reads parked on runs in flight now.
    pub read_ahead_parked: AtomicI64,
    pub ledgers: AtomicI64,
    pub journal_records: AtomicU64,
    pub journal_groups: AtomicU64,
    pub journal_syncs: AtomicU64,
    pub journal_bytes: AtomicU64,
    pub journal_flush_max_wait: AtomicU64,
    /// Appends the journal refused (backpressure): no free group buffer, no next segment.
    pub journal_refused_no_buffer: AtomicU64,
    pub journal_refused_no_segment: AtomicU64,
    pub journal_flush_bytes: AtomicU64,
    pub journal_flush_entries: AtomicU64,
    pub journal_flush_queue_empty: AtomicU64,
    /// Garbage collection of this shard's ledger storage (its flush thread writes it).
    pub gc: GcStatus,
}

/// One shard's garbage collection, for `/api/v1/bookie/gc_details` and the GC metrics.
#[derive(Default)]
pub struct GcStatus {
    pub force_compacting: AtomicBool,
    pub major_compacting: AtomicBool,
    pub minor_compacting: AtomicBool,
    /// ms since the epoch (0: never).
    pub last_major_ms: AtomicU64,
    pub last_minor_ms: AtomicU64,
    pub major_count: AtomicU64,
    pub minor_count: AtomicU64,
    /// Ledgers dropped because their metadata is gone from the cluster.
    pub deleted_ledgers: AtomicU64,
    /// Bytes of segments dropped whole (nothing live left in them).
    pub reclaimed_deletion_bytes: AtomicU64,
    /// Bytes given back by compaction.
    pub reclaimed_compaction_bytes: AtomicU64,
    pub compacted_entries: AtomicU64,
    /// Live fraction of the shard's segments at the last collection, in parts per million.
    pub usage_ppm: AtomicU64,
}

/// Operator switches of garbage collection (`/api/v1/bookie/gc/suspend_compaction`, ...),
/// read by every shard's flush thread.
#[derive(Default)]
pub struct GcControl {
    pub suspend_major: AtomicBool,
    pub suspend_minor: AtomicBool,
    /// Set by the GC driver from the disk checker's level when `isForceGCAllowWhenNoSpace` is
    /// false (Java suspends major compaction above the warn threshold, both above the full
    /// one); apart from the operator's switches so neither clears the other's.
    pub disk_suspend_major: AtomicBool,
    pub disk_suspend_minor: AtomicBool,
}

impl ShardMetrics {
    /// A request of kind `op` began (adds and reads feed the `_IN_PROGRESS` gauges).
    #[inline]
    pub fn started(&self, op: Op) {
        if let Some(i) = add_or_read(op) {
            self.started[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A request of kind `op` that started at `since_us` was answered. Returns the time it
    /// read (the caller's "now", one clock read fewer).
    #[inline]
    pub fn finished(&self, op: Op, since_us: u64, success: bool, rejected: bool) -> u64 {
        let now = now_us();
        let us = now.saturating_sub(since_us);
        let ok = success as usize;
        if op != Op::Other {
            self.requests[op as usize][ok].record(us);
        }
        if matches!(op, Op::ReadEntryFence | Op::ReadEntryLongPoll) {
            self.requests[Op::ReadEntry as usize][ok].record(us);
        }
        if let Some(i) = add_or_read(op) {
            self.finished[i].fetch_add(1, Ordering::Relaxed);
            if rejected {
                self.rejected[i].fetch_add(1, Ordering::Relaxed);
            }
        }
        now
    }

    /// Records a stage that started at `since_us` and ends now; returns now.
    #[inline]
    pub fn stage(&self, stage: Stage, since_us: u64) -> u64 {
        let now = now_us();
        self.stages[stage as usize].record(now.saturating_sub(since_us));
        now
    }

    /// Records a stage that lasted from `from_us` to `to_us` (0 if the clock went backwards).
    #[inline]
    pub fn stage_between(&self, stage: Stage, from_us: u64, to_us: u64) {
        self.stages[stage as usize].record(to_us.saturating_sub(from_us));
    }

    #[inline]
    pub fn journal_add(&self, since_us: u64) {
        self.journal_add.record(now_us().saturating_sub(since_us));
    }
}

fn add_or_read(op: Op) -> Option<usize> {
    match op {
        Op::AddEntry => Some(0),
        Op::ReadEntry | Op::ReadEntryFence | Op::ReadEntryLongPoll | Op::BatchReadEntry => Some(1),
        _ => None,
    }
}

/// All shards' metrics.
pub struct Metrics {
    pub shards: Vec<ShardMetrics>,
    pub gc_control: GcControl,
    /// Reads that waited for their turn in the journal-first disk share (`read/disk_share.rs`),
    /// and those that went ahead after its longest wait.
    pub reads_waited: AtomicU64,
    pub reads_overdue: AtomicU64,
    /// Taken-over Java entry logs removed once no ledger the shards hold had an entry in them
    /// (`store::takeover_retire`), and their bytes.
    pub java_logs_retired: AtomicU64,
    pub java_log_bytes_retired: AtomicU64,
    /// The autorecovery daemon's status, once it runs (`autoRecoveryDaemonEnabled`).
    pub autorecovery: OnceLock<Arc<Mutex<autorecovery::live::daemon::Status>>>,
}

const QUANTILES: [f64; 7] = [0.5, 0.75, 0.95, 0.99, 0.999, 0.9999, 1.0];
/// The quantile labels as Java's exporter prints them (`Double.toString`): `1.0`, not `1`, which
/// the dashboards' "(Max)" panels select.
const QUANTILE_LABELS: [&str; 7] = ["0.5", "0.75", "0.95", "0.99", "0.999", "0.9999", "1.0"];

impl Metrics {
    pub fn new(shards: usize) -> Metrics {
        Metrics {
            shards: (0..shards).map(|_| ShardMetrics::default()).collect(),
            gc_control: GcControl::default(),
            reads_waited: AtomicU64::new(0),
            reads_overdue: AtomicU64::new(0),
            java_logs_retired: AtomicU64::new(0),
            java_log_bytes_retired: AtomicU64::new(0),
            autorecovery: OnceLock::new(),
        }
    }

    fn merged(&self, pick: impl Fn(&ShardMetrics) -> &Histogram) -> Merged {
        let mut m = Merged::new();
        for s in &self.shards {
            pick(s).merge_into(&mut m);
        }
        m
    }

    fn sum(&self, pick: impl Fn(&ShardMetrics) -> u64) -> u64 {
        self.shards.iter().map(pick).sum()
    }

    /// The Prometheus text exposition.
    pub fn render(&self, state: &BookieState) -> String {
        let mut out = String::with_capacity(64 << 10);
        let o = &mut out;
        let status = if state.is_read_only() { 0 } else { 1 };
        gauge(o, "bookie_SERVER_STATUS", "", status as f64);
        // Java's processed-request OpStats, `bookkeeper_server_ADD_ENTRY` and `READ_ENTRY` (what
        // the dashboards' rate and latency panels query): Java times them from the request's
        // processing start to its completion, without the thread pool's queue; we have no such
        // pool (a request is processed on the shard that decoded it, or queued to its ledger's
        // shard as part of the add), so they are the `_REQUEST` figures, merged once for both.
        let mut processed = Vec::with_capacity(2);
        for (i, name) in OP_NAMES.iter().enumerate() {
            let merged = [0, 1].map(|ok| self.merged(|s| &s.requests[i][ok]));
            request_summary(o, &format!("bookkeeper_server_{name}"), &merged);
            if i < 2 {
                processed.push(merged);
            }
        }
        for (merged, kind) in processed.iter().zip(["ADD_ENTRY", "READ_ENTRY"]) {
            request_summary(o, &format!("bookkeeper_server_{kind}"), merged);
        }
        for (i, kind) in ["ADD_ENTRY", "READ_ENTRY"].iter().enumerate() {
            let started = self.sum(|s| s.started[i].load(Ordering::Relaxed));
            let finished = self.sum(|s| s.finished[i].load(Ordering::Relaxed));
            let in_progress = started.saturating_sub(finished);
            gauge(
                o,
                &format!("bookkeeper_server_{kind}_IN_PROGRESS"),
                "",
                in_progress as f64,
            );
            let rejected = self.sum(|s| s.rejected[i].load(Ordering::Relaxed));
            counter(
                o,
                &format!("bookkeeper_server_{kind}_REJECTED"),
                "",
                rejected,
            );
        }
        counter(
            o,
            "bookie_WRITE_BYTES",
            "",
            self.sum(|s| s.write_bytes.load(Ordering::Relaxed)),
        );
        counter(
            o,
            "bookie_READ_BYTES",
            "",
            self.sum(|s| s.read_bytes.load(Ordering::Relaxed)),
        );
        // Garbage collection, in InterleavedLedgerStorage's `bookie_gc_*` names and
        // DbLedgerStorage's `bookie_*` ones.
        type GcPick = fn(&GcStatus) -> &AtomicU64;
        let gc_series: [(&str, GcPick); 6] = [
            ("bookie_gc_MAJOR_COMPACTION_TOTAL", |g| &g.major_count),
            ("bookie_gc_MINOR_COMPACTION_TOTAL", |g| &g.minor_count),
            ("bookie_gc_DELETED_LEDGER_TOTAL", |g| &g.deleted_ledgers),
            ("bookie_gc_RECLAIMED_COMPACTION_SPACE_BYTES", |g| {
                &g.reclaimed_compaction_bytes
            }),
            ("bookie_gc_RECLAIMED_DELETION_SPACE_BYTES", |g| {
                &g.reclaimed_deletion_bytes
            }),
            ("bookie_rs_gc_compacted_entries", |g| &g.compacted_entries),
        ];
        let java_bytes = self.java_log_bytes_retired.load(Ordering::Relaxed);
        for (name, pick) in gc_series {
            // Java's deletion figure counts the entry logs removed whole: a taken-over Java
            // log removed once none of its ledgers was held any more is one.
            let java = if name == "bookie_gc_RECLAIMED_DELETION_SPACE_BYTES" {
                java_bytes
            } else {
                0
            };
            let value = self.sum(|s| pick(&s.gc).load(Ordering::Relaxed)) + java;
            counter(o, name, "", value);
            // A DbLedgerStorage bookie (Pulsar's) names them without `gc_`, and the dashboards
            // query those names: both are exported.
            if let Some(db) = name.strip_prefix("bookie_gc_") {
                counter(o, &format!("bookie_{db}"), "", value);
            }
        }
        counter(
            o,
            "bookie_rs_takeover_java_entry_logs_removed",
            "",
            self.java_logs_retired.load(Ordering::Relaxed),
        );
        counter(
            o,
            "bookie_rs_takeover_java_entry_log_bytes_removed",
            "",
            java_bytes,
        );
        let _ = writeln!(o, "# TYPE bookie_journal_JOURNAL_ADD_ENTRY summary");
        for (j, s) in self.shards.iter().enumerate() {
            let mut m = Merged::new();
            s.journal_add.merge_into(&mut m);
            let labels = format!("journalIndex=\"{j}\",success=\"true\"");
            summary_lines(o, "bookie_journal_JOURNAL_ADD_ENTRY", &labels, &m);
        }
        type Pick = fn(&ShardMetrics) -> i64;
        let journal_series: [(&str, &str, Pick); 5] = [
            ("bookie_journal_JOURNAL_QUEUE_SIZE", "gauge", |s| {
                s.journal_queue.load(Ordering::Relaxed)
            }),
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
        for (name, kind, pick) in journal_series {
            let _ = writeln!(o, "# TYPE {name} {kind}");
            for (j, s) in self.shards.iter().enumerate() {
                let _ = writeln!(o, "{name}{{journalIndex=\"{j}\"}} {}", pick(s));
            }
        }
        let ours: [(&str, Pick); 6] = [
            ("bookie_rs_journal_refused_no_buffer_total", |s| {
                s.journal_refused_no_buffer.load(Ordering::Relaxed) as i64
            }),
            ("bookie_rs_journal_refused_no_segment_total", |s| {
                s.journal_refused_no_segment.load(Ordering::Relaxed) as i64
            }),
            ("bookie_rs_journal_records_total", |s| {
                s.journal_records.load(Ordering::Relaxed) as i64
            }),
            ("bookie_rs_journal_groups_total", |s| {
                s.journal_groups.load(Ordering::Relaxed) as i64
            }),
            ("bookie_rs_journal_syncs_total", |s| {
                s.journal_syncs.load(Ordering::Relaxed) as i64
            }),
            ("bookie_rs_journal_flush_entries_threshold_total", |s| {
                s.journal_flush_entries.load(Ordering::Relaxed) as i64
            }),
        ];
        for (name, pick) in ours {
            let _ = writeln!(o, "# TYPE {name} counter");
            for (j, s) in self.shards.iter().enumerate() {
                let _ = writeln!(o, "{name}{{journalIndex=\"{j}\"}} {}", pick(s));
            }
        }
        let cache: i64 = self
            .shards
            .iter()
            .map(|s| s.write_cache_bytes.load(Ordering::Relaxed))
            .sum();
        gauge(o, "bookie_write_cache_size", "", cache as f64);
        let sum = |pick: fn(&ShardMetrics) -> i64| self.shards.iter().map(pick).sum::<i64>();
        gauge(
            o,
            "bookie_read_cache_size",
            "",
            sum(|s| s.read_cache_bytes.load(Ordering::Relaxed)) as f64,
        );
        gauge(
            o,
            "bookie_read_cache_count",
            "",
            sum(|s| s.read_cache_count.load(Ordering::Relaxed)) as f64,
        );
        gauge(
            o,
            "bookie_rs_read_ahead_parked",
            "",
            sum(|s| s.read_ahead_parked.load(Ordering::Relaxed)) as f64,
        );
        let read_ahead: [(&str, Pick); 4] = [
            ("bookie_rs_read_cache_hits_total", |s| {
                s.read_cache_hits.load(Ordering::Relaxed) as i64
            }),
            ("bookie_rs_read_ahead_runs_total", |s| {
                s.read_ahead_runs.load(Ordering::Relaxed) as i64
            }),
            ("bookie_rs_read_ahead_entries_total", |s| {
                s.read_ahead_entries.load(Ordering::Relaxed) as i64
            }),
            ("bookie_rs_read_ahead_waits_total", |s| {
                s.read_ahead_waits.load(Ordering::Relaxed) as i64
            }),
        ];
        for (name, pick) in read_ahead {
            let _ = writeln!(o, "# TYPE {name} counter");
            let _ = writeln!(o, "{name} {}", sum(pick));
        }
        for (name, v) in [
            (
                "bookie_rs_disk_share_reads_waited_total",
                &self.reads_waited,
            ),
            (
                "bookie_rs_disk_share_reads_overdue_total",
                &self.reads_overdue,
            ),
        ] {
            let _ = writeln!(o, "# TYPE {name} counter");
            let _ = writeln!(o, "{name} {}", v.load(Ordering::Relaxed));
        }
        let ledgers: i64 = self
            .shards
            .iter()
            .map(|s| s.ledgers.load(Ordering::Relaxed))
            .sum();
        gauge(o, "bookie_ledgers_count", "", ledgers as f64);
        // Disks: the ledger directories in Java's names, every checked directory in ours.
        let ledger_dirs: Vec<_> = state
            .dirs
            .iter()
            .filter(|d| d.kind == crate::admin::readonly::DirKind::Ledger)
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
        render_thread_schedstats(o, &procstat::threads());
        render_process(o, &procstat::process::process());
        let name = "bookie_rs_stage_latency_ms";
        let _ = writeln!(o, "# TYPE {name} histogram");
        for (i, stage) in STAGE_NAMES.iter().enumerate() {
            let m = self.merged(|s| &s.stages[i]);
            let mut cumulative = 0;
            // Bucket bounds every power of two (every 4th fine bucket) from 4 µs, and the
            // bound of every fine bucket (≤ 19 % wide) that holds something: quantiles of a
            // difference of two scrapes stay that precise, and a bound absent from a scrape
            // has the count of the next lower one.
            for (b, c) in m.counts.iter().enumerate() {
                cumulative += c;
                if b < BUCKETS - 1 && ((b >= 3 && b % 4 == 3) || *c > 0) {
                    let le = (bucket_upper(b) + 1) as f64 / 1000.0;
                    let _ = writeln!(
                        o,
                        "{name}_bucket{{stage=\"{stage}\",le=\"{le}\"}} {cumulative}"
                    );
                }
            }
            let _ = writeln!(
                o,
                "{name}_bucket{{stage=\"{stage}\",le=\"+Inf\"}} {cumulative}"
            );
            let _ = writeln!(o, "{name}_count{{stage=\"{stage}\"}} {cumulative}");
            let _ = writeln!(
                o,
                "{name}_sum{{stage=\"{stage}\"}} {}",
                m.sum_us as f64 / 1000.0
            );
        }
        if let Some(status) = self.autorecovery.get() {
            if let Ok(status) = status.lock() {
                crate::autorecovery::metrics::render(o, &status, "replication_");
            }
        }
        out
    }
}

fn render_thread_schedstats(o: &mut String, threads: &[procstat::ThreadSched]) {
    type Pick = fn(&procstat::ThreadSched) -> u64;
    let series: [(&str, Pick); 2] = [
        ("bookie_rs_thread_cpu_seconds_total", |t| t.cpu_ns),
        ("bookie_rs_thread_runqueue_wait_seconds_total", |t| {
            t.wait_ns
        }),
    ];
    for (name, pick) in series {
        let _ = writeln!(o, "# TYPE {name} counter");
        for t in threads {
            let _ = writeln!(
                o,
                "{name}{{thread=\"{}\"}} {}",
                escape_label(&t.name),
                pick(t) as f64 / 1e9
            );
        }
    }
}

/// The Prometheus client's `process_*` family, as a Java bookie exports it (its JVM's figures
/// there, this process's here); a figure /proc did not give is left out.
fn render_process(o: &mut String, p: &procstat::process::ProcessStat) {
    let floats = [
        ("process_cpu_seconds_total", "counter", p.cpu_seconds),
        ("process_start_time_seconds", "gauge", p.start_time_seconds),
    ];
    for (name, kind, v) in floats {
        if let Some(v) = v {
            let _ = writeln!(o, "# TYPE {name} {kind}");
            let _ = writeln!(o, "{name} {}", fmt_f64(v));
        }
    }
    let ints = [
        ("process_open_fds", p.open_fds),
        ("process_max_fds", p.max_fds),
        ("process_virtual_memory_bytes", p.virtual_memory_bytes),
        ("process_resident_memory_bytes", p.resident_memory_bytes),
    ];
    for (name, v) in ints {
        if let Some(v) = v {
            let _ = writeln!(o, "# TYPE {name} gauge");
            let _ = writeln!(o, "{name} {v}");
        }
    }
}

/// A request summary as Java writes it: the failed block, then the successful one.
fn request_summary(o: &mut String, name: &str, merged: &[Merged; 2]) {
    let _ = writeln!(o, "# TYPE {name} summary");
    for (m, label) in merged.iter().zip(["false", "true"]) {
        summary_lines(o, name, &format!("success=\"{label}\""), m);
    }
}

fn summary_lines(o: &mut String, name: &str, labels: &str, m: &Merged) {
    for (q, label) in QUANTILES.iter().zip(QUANTILE_LABELS) {
        let _ = writeln!(
            o,
            "{name}{{{labels},quantile=\"{label}\"}} {}",
            fmt_f64(m.quantile_ms(*q))
        );
    }
    let _ = writeln!(o, "{name}_count{{{labels}}} {}", m.count());
    let _ = writeln!(o, "{name}_sum{{{labels}}} {}", m.sum_us as f64 / 1000.0);
}

fn fmt_f64(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else {
        format!("{v}")
    }
}

fn gauge(o: &mut String, name: &str, labels: &str, v: f64) {
    let _ = writeln!(o, "# TYPE {name} gauge");
    let _ = writeln!(o, "{name}{labels} {}", fmt_f64(v));
}

fn counter(o: &mut String, name: &str, labels: &str, v: u64) {
    let _ = writeln!(o, "# TYPE {name} counter");
    let _ = writeln!(o, "{name}{labels} {v}");
}

/// A metric-name fragment from a path: Java replaces `/` with `_`; anything else outside
/// `[a-zA-Z0-9_]` becomes `_` too.
fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

fn escape_label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_their_values() {
        let mut last = 0;
        for us in [
            0u64,
            1,
            3,
            4,
            5,
            7,
            8,
            9,
            15,
            16,
            100,
            1000,
            12345,
            1 << 30,
            1 << 40,
        ] {
            let b = bucket_of(us);
            assert!(b >= last, "monotonic at {us}");
            last = b;
            if us < (1 << 36) {
                assert!(bucket_upper(b) >= us, "{us} in bucket {b}");
                assert!(
                    b == 0 || bucket_upper(b - 1) < us,
                    "{us} not in bucket {}",
                    b - 1
                );
            }
        }
        for i in 1..BUCKETS {
            assert!(bucket_upper(i) > bucket_upper(i - 1));
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn own_threads_rendered() {
        let named = std::thread::Builder::new()
            .name("sched-probe".into())
            .spawn(procstat::threads)
            .expect("spawn")
            .join()
            .expect("join");
        assert!(named.iter().any(|t| t.name == "sched-probe"), "{named:?}");
        let mut text = String::new();
        render_thread_schedstats(
            &mut text,
            &[procstat::ThreadSched {
                name: "shard-0".into(),
                cpu_ns: 1_500_000_000,
                wait_ns: 250_000_000,
            }],
        );
        assert!(text.contains("bookie_rs_thread_cpu_seconds_total{thread=\"shard-0\"} 1.5\n"));
        assert!(text
            .contains("bookie_rs_thread_runqueue_wait_seconds_total{thread=\"shard-0\"} 0.25\n"));
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
        let state = BookieState::new(
            &crate::config::DiskConfig::default(),
            &[(
                std::path::Path::new("/data/ledgers"),
                crate::admin::readonly::DirKind::Ledger,
            )],
        );
        let text = m.render(&state);
        assert!(text.contains("bookkeeper_server_ADD_ENTRY_REQUEST_count{success=\"true\"} 100"));
        assert!(text.contains(
            "bookkeeper_server_ADD_ENTRY_REQUEST{success=\"false\",quantile=\"0.5\"} NaN"
        ));
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
}
