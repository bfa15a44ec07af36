//! The threads beside each shard that own its ledger storage (crate `entrylog`): a flusher
//! and a reader, each with its own ring on the shard's ledger directory.
//!
//! Why threads: a flush writes hundreds of MiB and a catch-up read waits on the device; neither
//! may stall the shard's loop, which must keep answering adds within a millisecond. The
//! flusher turns a frozen write cache into entry logs + index + metadata (the checkpoint order
//! lives in `entrylog::LedgerStore::flush`) and reports back; the shard then trims its journal.
//! The readers serve cache misses from a bounded queue (full: ETOOMANYREQUESTS instead of
//! queuing without end); their loop is `read_thread`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::Duration;

use crate::read::disk_reader::DiskReader;
use entrylog::{LedgerStore, LedgerStoreConfig, ReadView, Reader, Recovered};
use net::StatusCode;
use storage::dirset::Placement;
use tokio::sync::mpsc;

use crate::admin::metrics::Metrics;
use crate::config::{BookieConfig, GcConfig};
use crate::gc::compaction::{GcRunner, STEP_PAUSE};
use crate::gc::reclaim::Reclaimer;
use crate::read::disk_share::{DiskShare, Shared};
use crate::read::read_thread::{error_reply, reply, serve_reads, ReadStats};
use crate::shard::mailbox::{FlushJob, ReadJob, ShardHandle, StoreEvent};
use crate::store::paced::Paced;

/// A shard's handles on its ledger-storage threads.
pub struct LedgerStorageLink {
    pub flush_jobs: std_mpsc::Sender<FlushJob>,
    pub read_jobs: crossbeam_channel::Sender<ReadJob>,
    pub view: Arc<ReadView>,
    /// Set by the shard while its write cache is more than half full: the flush runs unpaced.
    pub cache_pressure: Arc<std::sync::atomic::AtomicBool>,
    /// Set by the shard at each freeze: the pace of that flush's writes, bytes per second
    /// (`paced`: twice the rate the frozen bytes came in, within the configured ceiling).
    pub flush_rate: Arc<AtomicU64>,
    /// Deletes trash (retired segments, trimmed journal files) gradually.
    pub reclaim: Reclaimer,
    /// The journal-first share of the disk: readers take turns in it, the shard reports its
    /// journal to it.
    pub disk_share: Arc<DiskShare>,
}

/// Starts the flusher (which opens the store) and the reader for one shard. Returns the link,
/// what the store recovered (replay the journal from its mark), and where flushes report.
pub fn start(
    shard: usize,
    dirs: Arc<Placement>,
    bookie: &BookieConfig,
    peers: Arc<Vec<ShardHandle>>,
    (metrics, reclaim, disk_share): (Arc<Metrics>, Reclaimer, Arc<DiskShare>),
    legacy: Option<Arc<crate::store::takeover::Legacy>>,
) -> Result<
    (
        LedgerStorageLink,
        Recovered,
        mpsc::UnboundedReceiver<StoreEvent>,
    ),
    String,
> {
    let config: LedgerStoreConfig = bookie.ledger_store.clone();
    let ceiling = bookie.flush_rate_bytes_per_sec;
    let flush_rate = Arc::new(AtomicU64::new(ceiling));
    let wanted_rate = flush_rate.clone();
    // What the pacing wrapper applies: the shard's rate during a flush, the ceiling for
    // compaction (which keeps its own, Java-configured limit).
    let paced_rate = Arc::new(AtomicU64::new(ceiling));
    let applied_rate = paced_rate.clone();
    let force_psync = bookie.force_psync;
    let read_queue = bookie.read_queue;
    let read_metrics = metrics.clone();
    let gc: (GcConfig, Arc<Metrics>) = (bookie.gc.clone(), metrics);
    let cache_pressure = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let urgent = cache_pressure.clone();
    let (opened_tx, opened_rx) = std_mpsc::channel();
    let (jobs_tx, jobs_rx) = std_mpsc::channel::<FlushJob>();
    let (done_tx, done_rx) = mpsc::unbounded_channel();
    let flush_dirs = dirs.clone();
    let flush_dir = dirs.members[0].clone();
    let thread_reclaim = reclaim.clone();
    let flush_config = config.clone();
    std::thread::Builder::new()
        .name(format!("flush-{shard}"))
        .spawn(move || {
            // Below the shards: sorting and checksumming a flush must not take a core away
            // from a shard that is answering adds.
            lower_priority(FLUSH_NICE);
            let opened = storage::open_dir_set(flush_dirs.clone(), 64, force_psync)
                .map_err(|e| format!("{}: {e}", flush_dir.display()))
                .map(|s| Paced::new(s, applied_rate, urgent))
                .and_then(|s| {
                    LedgerStore::open(s, flush_config)
                        .map_err(|e| format!("ledger storage {}: {e}", flush_dir.display()))
                });
            let mut store = match opened {
                Ok((store, recovered)) => {
                    let _ = opened_tx.send(Ok((recovered, store.snapshot())));
                    store
                }
                Err(e) => {
                    let _ = opened_tx.send(Err(e));
                    return;
                }
            };
            let mut gc = GcRunner::new(shard, gc.0, gc.1);
            loop {
                let trash = store.take_trash();
                if !trash.is_empty() {
                    thread_reclaim.delete(trash.iter().map(|n| member_path(&flush_dirs, n)));
                }
                // Flush jobs first; a compaction in progress steps when none waits.
                // Files retired by GC go once no reader's view holds them: look again soon.
                let wait = if gc.active() {
                    Some(STEP_PAUSE)
                } else if store.retired_files() > 0 {
                    Some(Duration::from_secs(1))
                } else {
                    None
                };
                let job = if let Some(wait) = wait {
                    match jobs_rx.recv_timeout(wait) {
                        Ok(job) => Some(job),
                        Err(std_mpsc::RecvTimeoutError::Timeout) => None,
                        Err(std_mpsc::RecvTimeoutError::Disconnected) => break,
                    }
                } else {
                    match jobs_rx.recv() {
                        Ok(job) => Some(job),
                        Err(_) => break,
                    }
                };
                let frozen = match job {
                    None => {
                        if gc.active() {
                            paced_rate.store(ceiling, Ordering::Relaxed);
                            gc.step(&mut store, &done_tx);
                        }
                        store.collect_garbage();
                        continue;
                    }
                    Some(FlushJob::Flush(frozen)) => frozen,
                    // Freed here: dropping a flushed cache's entries is work for this thread.
                    Some(FlushJob::Dispose(entries)) => {
                        drop(entries);
                        continue;
                    }
                    Some(FlushJob::Gc(req)) => {
                        paced_rate.store(ceiling, Ordering::Relaxed);
                        gc.request(req, &mut store, &done_tx);
                        continue;
                    }
                };
                let batch = frozen.to_flush_batch();
                drop(frozen);
                paced_rate.store(wanted_rate.load(Ordering::Relaxed), Ordering::Relaxed);
                let event = match store.flush(&batch) {
                    Ok(stats) => StoreEvent::Flushed {
                        mark: batch.journal_mark,
                        view: store.snapshot(),
                        stats,
                    },
                    Err(e) => StoreEvent::Failed(format!("flush of {}: {e}", flush_dir.display())),
                };
                if done_tx.send(event).is_err() {
                    break;
                }
            }
            gc.abort(&mut store);
        })
        .map_err(|e| format!("cannot start the flush thread: {e}"))?;
    let (recovered, view) = opened_rx
        .recv()
        .map_err(|_| "the flush thread died while opening the store".to_string())??;

    // Several readers share the shard's queue, each with its own ring and blocking reads, so
    // that many cache-miss reads are in flight at once; each keeps its share of the index
    // block cache.
    let readers = bookie.read_threads_per_shard.max(1);
    let (read_tx, read_rx) = crossbeam_channel::bounded::<ReadJob>(read_queue);
    // Its depth at scrape time (`bookkeeper_server_thread_executor_queue`, the read pool's);
    // a receiver keeps no sender alive, so the readers still end when the shard does.
    let queued = read_rx.clone();
    let _ = read_metrics.shards[shard]
        .queues
        .reads
        .set(Box::new(move || queued.len()));
    let mut reader_config = config.clone();
    reader_config.index_block_cache_bytes = (config.index_block_cache_bytes / readers).max(1 << 20);
    // Runs (read-ahead and batch reads) of up to this many entries and bytes; the shard
    // decides which reads are runs (`read::ahead`) and keeps what they bring.
    let run = (
        bookie.read_ahead.run_entries(),
        bookie.read_ahead.batch_bytes,
    );
    for r in 0..readers {
        let read_metrics = read_metrics.clone();
        let share = disk_share.clone();
        let dirs = dirs.clone();
        let peers = peers.clone();
        let read_rx = read_rx.clone();
        let reader_config = reader_config.clone();
        let legacy = legacy.clone();
        let deferred_max = read_queue.div_ceil(readers);
        // This reader's part of the disk's depth (within its ring's 64 slots).
        let max_batch = bookie
            .read_depth
            .div_ceil(readers * bookie.shard_count().max(1))
            .clamp(1, 32);
        std::thread::Builder::new()
            .name(format!("read-{shard}-{r}"))
            .spawn(move || {
                lower_priority(READ_NICE);
                let storage = match storage::open_dir_set(dirs.clone(), 64, force_psync) {
                    Ok(s) => s,
                    Err(e) => {
                        log::error!(
                            "reader of {}: {e}; cache-miss reads will fail",
                            dirs.members[0].display()
                        );
                        for job in read_rx {
                            reply(
                                &peers,
                                job.origin,
                                job.conn_id,
                                job.header,
                                error_reply(&job.read, StatusCode::EIO),
                                job.timing,
                            );
                        }
                        return;
                    }
                };
                let storage = Shared::new(storage, share);
                let reader = Reader::new(storage, &reader_config).with_run_bytes(run.1);
                let mut reader = DiskReader::new(reader, legacy.as_ref());
                let stats = ReadStats::new(read_metrics, shard);
                serve_reads(
                    &mut reader,
                    &read_rx,
                    &peers,
                    (deferred_max, max_batch, run.0),
                    stats,
                );
            })
            .map_err(|e| format!("cannot start a reader thread: {e}"))?;
    }
    Ok((
        LedgerStorageLink {
            flush_jobs: jobs_tx,
            read_jobs: read_tx,
            view,
            cache_pressure,
            flush_rate,
            reclaim,
            disk_share,
        },
        recovered,
        done_rx,
    ))
}

/// Nice values of the flush and reader threads (shard threads run at 0). The flush at 2 (CFS
/// weight 820 against the shard's 1024): on a core its shard keeps busy it must get the ~20 %
/// a closed loop's flushing needs (0.5 µs per 1 KiB add), or the write cache passes 3/4 and the
/// admission pause cuts the intake. Measured on one pinned core, 1 KiB closed loop, ABBA rounds
/// of 2 s + 10 s (docs/performance.md): nice 10 → 5 gave 1.124x throughput, p99 36 → 6.5 ms
/// (short runs); 5 → 2 gave 1.079x throughput, p99 36.7 → 7.3 ms, CPU per add 0.971 (long
/// runs, where 5 fell behind too); 2 → 0 gave 0.979x throughput and 1.024x CPU per add. The
/// open loop at 100k adds/s on two shards: 5 → 2 neutral (p99.9 0.83x, CPU 0.98x).
const FLUSH_NICE: i32 = 2;
const READ_NICE: i32 = 5;

/// Lowers the calling thread's CPU priority (Linux: nice is per thread).
fn lower_priority(nice: i32) {
    if storage::thread::set_nice(nice).is_err() {
        log::debug!(
            "cannot lower the priority of thread {}",
            nix::unistd::gettid()
        );
    }
}

/// The path of a store file in the member of the directory set that holds it (the home when
/// none does: the deletion then finds nothing, as it would in one directory).
fn member_path(dirs: &Placement, name: &str) -> PathBuf {
    dirs.members
        .iter()
        .map(|m| m.join(name))
        .find(|p| p.exists())
        .unwrap_or_else(|| dirs.members[0].join(name))
}
