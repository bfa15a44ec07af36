//! Counters and latency histograms, updated by the shards without locks or allocation, and
//! rendered as Prometheus text (format 0.0.4) for `GET /metrics`.
//!
//! Why this shape: each shard owns a [`ShardMetrics`] block of atomics that only it (and its
//! reader and flush threads) writes — relaxed `fetch_add`s and stores on cache lines no other
//! shard writes — and the HTTP thread sums the blocks at scrape time. A latency histogram
//! ([`histogram`]) is a fixed array of log-linear buckets in microseconds, so recording is an
//! index computation and two atomic adds. Queue depths are read at scrape time through probes
//! registered at start ([`QueueProbes`]): the request paths pay nothing for them.
//!
//! The families, one module each:
//! - [`java`]: the series a Java 4.14–4.18 DbLedgerStorage bookie exports, with its names,
//!   types and labels (docs/semantics.md §6.2), each holding the figure that is true for our
//!   design: request latencies as *summaries* in milliseconds with `success="true|false"` and
//!   Java's quantile labels, journal series per `journalIndex` (one journal per shard here).
//! - [`procfs`]: the `process_*` family (what a Java bookie exports for its JVM) and per-thread
//!   scheduler counters, from `/proc` at scrape time.
//! - [`ours`]: our own series, `bookie_rs_*`, among them the per-stage latency histograms.
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

mod histogram;
mod java;
mod ours;
mod procfs;
#[cfg(test)]
mod tests;

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::admin::readonly::BookieState;
pub use histogram::Histogram;
use histogram::Merged;

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

/// Microseconds since the process's metrics epoch: a clock all shards share.
#[inline]
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

/// One shard's metrics.
#[derive(Default)]
pub struct ShardMetrics {
    /// Per op: [failed, succeeded].
    requests: [[Histogram; 2]; OPS],
    stages: [Histogram; STAGES],
    /// `bookie_journal_JOURNAL_ADD_ENTRY`: journal append → durable, per add.
    journal_add: Histogram,
    /// `bookie_journal_JOURNAL_SYNC`: one per fdatasync of a group commit, submitted →
    /// completed; [failed, succeeded].
    journal_sync: [Histogram; 2],
    /// `bookie_read_entry`: an entry read from ledger storage (write cache, read-ahead cache
    /// or disk), from the request's decoding to the entry in hand; [failed, succeeded].
    read_entry: [Histogram; 2],
    /// `bookie_readahead_batch_count`: per read-ahead run, the entries it brought beyond the
    /// asked one (raw values, not µs).
    read_ahead_batch: Histogram,
    started: [AtomicU64; 2],
    finished: [AtomicU64; 2],
    rejected: [AtomicU64; 2],
    pub write_bytes: AtomicU64,
    pub read_bytes: AtomicU64,
    // Gauges and journal counters, stored (not added) by the shard in `drive`.
    pub journal_queue: AtomicI64,
    /// Journal groups written whose sync has not completed (`JOURNAL_FORCE_WRITE_QUEUE_SIZE`).
    pub journal_force_write_queue: AtomicI64,
    /// Adds waiting for a free journal buffer now (`ADD_ENTRY_BLOCKED`).
    pub adds_blocked: AtomicI64,
    /// Reads a reader holds back now because their connection is over its reply budget
    /// (`READ_ENTRY_BLOCKED`; each reader adds its changes).
    pub reads_blocked: AtomicI64,
    pub write_cache_bytes: AtomicI64,
    /// The read-ahead cache (its readers store them after each read).
    pub read_cache_bytes: AtomicI64,
    pub read_cache_count: AtomicI64,
    pub read_cache_hits: AtomicU64,
    /// Single-entry reads that missed the write cache and the read-ahead cache and went to a
    /// reader thread (the disk).
    pub read_cache_misses: AtomicU64,
    /// Read-ahead device reads, and the entries they brought beyond the asked one.
    pub read_ahead_runs: AtomicU64,
    pub read_ahead_entries: AtomicU64,
    /// Reads the shard parked on a read-ahead run in flight (`run_waits`) instead of sending
    /// each to a reader.
    pub read_ahead_waits: AtomicU64,
    /// Reads parked on runs in flight now.
    pub read_ahead_parked: AtomicI64,
    pub ledgers: AtomicI64,
    /// Index records of the shard's ledger storage (its latest view): entries flushed there.
    pub entries: AtomicI64,
    /// Live entry-log segments of the shard's ledger storage (its latest view).
    pub entry_logs: AtomicI64,
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
    /// The shard's queues, read at scrape time.
    pub queues: QueueProbes,
}

/// A queue's depth, asked at scrape time (registered once at start; never on a request path).
pub type QueueProbe = Box<dyn Fn() -> usize + Send + Sync>;

/// Where a shard's queued work can be counted: `bookkeeper_server_thread_executor_queue`.
#[derive(Default)]
pub struct QueueProbes {
    /// Requests other shards decoded for this shard's ledgers, waiting for it to take them.
    pub requests: OnceLock<QueueProbe>,
    /// Reads that missed the caches, waiting for one of the shard's reader threads.
    pub reads: OnceLock<QueueProbe>,
}

impl QueueProbes {
    fn depth(probe: &OnceLock<QueueProbe>) -> usize {
        probe.get().map_or(0, |p| p())
    }
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

    /// One fdatasync of the journal, from its submission to its completion.
    #[inline]
    pub fn journal_sync(&self, submitted_us: u64, completed_us: u64, ok: bool) {
        self.journal_sync[ok as usize].record(completed_us.saturating_sub(submitted_us));
    }

    /// An entry read from ledger storage, from the request's decoding at `since_us` to now;
    /// returns now.
    #[inline]
    pub fn read_entry(&self, since_us: u64, ok: bool) -> u64 {
        let now = now_us();
        self.read_entry_between(since_us, now, ok);
        now
    }

    /// An entry read from ledger storage between `from_us` and `to_us`.
    #[inline]
    pub fn read_entry_between(&self, from_us: u64, to_us: u64, ok: bool) {
        self.read_entry[ok as usize].record(to_us.saturating_sub(from_us));
    }

    /// A read-ahead run that brought `entries` entries beyond the asked one.
    #[inline]
    pub fn read_ahead_run(&self, entries: usize) {
        self.read_ahead_batch.record(entries as u64);
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

    /// A histogram summed over the shards.
    fn merged(&self, pick: impl Fn(&ShardMetrics) -> &Histogram) -> Merged {
        let mut m = Merged::new();
        for s in &self.shards {
            pick(s).merge_into(&mut m);
        }
        m
    }

    /// A [failed, succeeded] pair of histograms summed over the shards.
    fn merged_pair(&self, pick: impl Fn(&ShardMetrics) -> &[Histogram; 2]) -> [Merged; 2] {
        [0, 1].map(|ok| self.merged(|s| &pick(s)[ok]))
    }

    fn sum(&self, pick: impl Fn(&ShardMetrics) -> u64) -> u64 {
        self.shards.iter().map(pick).sum()
    }

    fn sum_i64(&self, pick: impl Fn(&ShardMetrics) -> i64) -> i64 {
        self.shards.iter().map(pick).sum()
    }

    /// The Prometheus text exposition: Java's families, the process family, ours, and the
    /// autorecovery daemon's when it runs in this process.
    pub fn render(&self, state: &BookieState) -> String {
        let mut out = String::with_capacity(64 << 10);
        java::render(self, state, &mut out);
        procfs::render_process(&mut out, &procstat::process::process());
        ours::render(self, state, &mut out);
        procfs::render_thread_schedstats(&mut out, &procstat::threads());
        if let Some(status) = self.autorecovery.get() {
            if let Ok(status) = status.lock() {
                crate::autorecovery::metrics::render(&mut out, &status, "replication_");
            }
        }
        out
    }
}
