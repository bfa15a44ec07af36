//! The threads beside each shard that own its ledger storage (crate `entrylog`): a flusher
//! and a reader, each with its own ring on the shard's ledger directory.
//!
//! Why threads: a flush writes hundreds of MiB and a catch-up read waits on the device; neither
//! may stall the shard's loop, which must keep answering adds within a millisecond. The
//! flusher turns a frozen write cache into entry logs + index + metadata (the checkpoint order
//! lives in `entrylog::LedgerStore::flush`) and reports back; the shard then trims its journal.
//! The reader serves cache misses from a bounded queue (full: ETOOMANYREQUESTS instead of
//! queuing without end), taking what waits there as one batch whose random reads go in flight
//! together on its ring (`Reader::read_each`): the disk's depth from one thread, within the
//! journal-first share (`disk_share`). Sequential reads are served by read-ahead (one read per
//! run of a ledger into the shard's read-ahead cache, `entrylog::reader`), so a catch-up read
//! in flight moves a run at a time. Replies go straight to the shard holding the connection.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use entrylog::{LedgerStore, LedgerStoreConfig, ReadAhead, ReadCache, ReadView, Reader, Recovered};
use net::{availability, Response, ResponseFrame, ResponseHeader, StatusCode};
use storage::RealStorage;
use tokio::sync::mpsc;

use crate::compaction::{GcRunner, STEP_PAUSE};
use crate::config::{BookieConfig, GcConfig};
use crate::disk_share::{DiskShare, Shared};
use crate::ledger::{DiskRead, LedgerTable};
use crate::mailbox::{FlushJob, ReadJob, RemoteReply, ShardHandle, StoreEvent};
use crate::metrics::Metrics;
use crate::paced::Paced;
use crate::reclaim::Reclaimer;

/// A reader thread's storage port: its own ring, taking turns in the bookie's disk share.
type ReaderStorage = Shared<RealStorage>;

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
    /// The shard's read-ahead cache (`None`: read-ahead off): the shard serves hits itself,
    /// without the hop to a reader thread.
    pub read_cache: Option<Arc<Mutex<ReadCache>>>,
}

/// Starts the flusher (which opens the store) and the reader for one shard. Returns the link,
/// what the store recovered (replay the journal from its mark), and where flushes report.
pub fn start(
    shard: usize,
    dir: PathBuf,
    bookie: &BookieConfig,
    peers: Arc<Vec<ShardHandle>>,
    (metrics, reclaim, disk_share): (Arc<Metrics>, Reclaimer, Arc<DiskShare>),
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
    let flush_dir = dir.clone();
    let thread_reclaim = reclaim.clone();
    let flush_config = config.clone();
    std::thread::Builder::new()
        .name(format!("flush-{shard}"))
        .spawn(move || {
            // Below the shards: sorting and checksumming a flush must not take a core away
            // from a shard that is answering adds.
            lower_priority(FLUSH_NICE);
            let opened = storage::open_dir(&flush_dir, 64, force_psync)
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
                    thread_reclaim.delete(trash.iter().map(|n| flush_dir.join(n)));
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
    let mut reader_config = config.clone();
    reader_config.index_block_cache_bytes = (config.index_block_cache_bytes / readers).max(1 << 20);
    // One read-ahead cache per shard, shared by its readers.
    let ra = &bookie.read_ahead;
    let read_ahead = ReadAhead {
        cache: Arc::new(Mutex::new(ReadCache::new(
            ra.cache_bytes / bookie.shard_count().max(1),
        ))),
        max_entries: if ra.cache_bytes == 0 {
            1
        } else {
            ra.batch_entries
        },
        max_bytes: ra.batch_bytes,
    };
    for r in 0..readers {
        let read_ahead = read_ahead.clone();
        let read_metrics = read_metrics.clone();
        let share = disk_share.clone();
        let dir = dir.clone();
        let peers = peers.clone();
        let read_rx = read_rx.clone();
        let reader_config = reader_config.clone();
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
                let storage = match storage::open_dir(&dir, 64, force_psync) {
                    Ok(s) => s,
                    Err(e) => {
                        log::error!(
                            "reader of {}: {e}; cache-miss reads will fail",
                            dir.display()
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
                let mut reader = Reader::new(storage, &reader_config).with_read_ahead(read_ahead);
                let stats = ReadStats {
                    metrics: read_metrics,
                    shard,
                    runs: 0,
                    entries: 0,
                };
                serve_reads(
                    &mut reader,
                    &read_rx,
                    &peers,
                    (deferred_max, max_batch),
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
            // The one condition the readers (`with_read_ahead`) and the shard's hits share.
            read_cache: read_ahead.is_on().then(|| read_ahead.cache.clone()),
        },
        recovered,
        done_rx,
    ))
}

/// A reader thread's loop: cache-miss reads in arrival order, gathered into batches of up
/// to `max_batch` whose device reads go in flight together (`serve_batch`). Among the reads
/// this reader took from the shared queue: readers run side by side, so replies of one
/// connection may overtake each other, as with a Java bookie's read thread pool. A read for a
/// connection over its reply budget waits (deferred, without blocking the others) until the
/// connection drains, and a read for a closed connection is skipped.
fn serve_reads(
    reader: &mut Reader<ReaderStorage>,
    jobs: &crossbeam_channel::Receiver<ReadJob>,
    peers: &[ShardHandle],
    (max_deferred, max_batch): (usize, usize),
    mut stats: ReadStats,
) {
    let mut deferred: VecDeque<ReadJob> = VecDeque::new();
    let mut batch: Vec<ReadJob> = Vec::with_capacity(max_batch);
    loop {
        for _ in 0..deferred.len() {
            let job = deferred.pop_front().expect("counted");
            if job.conn.is_gone() {
                continue;
            }
            if batch.len() >= max_batch || !job.conn.has_room() {
                deferred.push_back(job);
                continue;
            }
            batch.push(job);
        }
        if batch.is_empty() {
            let next = if deferred.is_empty() {
                jobs.recv().map_err(|_| true)
            } else if deferred.len() >= max_deferred {
                std::thread::sleep(Duration::from_millis(1));
                continue;
            } else {
                jobs.recv_timeout(Duration::from_millis(1))
                    .map_err(|e| e == crossbeam_channel::RecvTimeoutError::Disconnected)
            };
            match next {
                Ok(job) => take_job(job, &mut deferred, &mut batch),
                Err(true) => return,
                Err(false) => continue,
            }
        }
        // Whatever else waits joins the batch: its reads go in flight together.
        while batch.len() < max_batch && deferred.len() < max_deferred {
            match jobs.try_recv() {
                Ok(job) => take_job(job, &mut deferred, &mut batch),
                Err(_) => break,
            }
        }
        if !batch.is_empty() {
            serve_batch(reader, &mut batch, peers);
            stats.update(reader);
        }
    }
}

/// Puts a job in the batch, or among the deferred when its connection is over its reply
/// budget or has an earlier read deferred (keep their order); drops it if the connection
/// closed.
fn take_job(job: ReadJob, deferred: &mut VecDeque<ReadJob>, batch: &mut Vec<ReadJob>) {
    if job.conn.is_gone() {
        return;
    }
    let behind = deferred.iter().any(|d| Arc::ptr_eq(&d.conn, &job.conn));
    if behind || !job.conn.has_room() {
        deferred.push_back(job);
    } else {
        batch.push(job);
    }
}

/// Serves a batch: single-entry reads through `Reader::read_each` (their device reads in
/// flight together), the others (batch reads, entry lists, LAC reads) one by one; the replies
/// go out in the batch's order once all are done.
fn serve_batch(
    reader: &mut Reader<ReaderStorage>,
    batch: &mut Vec<ReadJob>,
    peers: &[ShardHandle],
) {
    let mut responses: Vec<Option<Response>> = Vec::with_capacity(batch.len());
    let mut singles: Vec<(usize, i64, i64, Option<i64>)> = Vec::new();
    for (at, job) in batch.iter().enumerate() {
        match job.read {
            DiskRead::Entry {
                ledger,
                reply_entry_id,
                max_lac,
                ..
            } => {
                singles.push((at, ledger, reply_entry_id, max_lac));
                responses.push(None);
            }
            _ => responses.push(Some(execute(reader, &job.view, job.read.clone()))),
        }
    }
    if !singles.is_empty() {
        let asked: Vec<(&ReadView, u64, u64)> = singles
            .iter()
            .map(|&(at, ..)| {
                let DiskRead::Entry { ledger, entry, .. } = batch[at].read else {
                    unreachable!("only entry reads are singles")
                };
                (&*batch[at].view, ledger as u64, entry as u64)
            })
            .collect();
        let bodies = reader.read_each(&asked);
        for (&(at, ledger, reply_entry_id, max_lac), body) in singles.iter().zip(bodies) {
            responses[at] = Some(match body {
                Ok(body) => entry_reply(ledger, reply_entry_id, max_lac, body),
                Err(e) => {
                    log::error!("cache-miss read {:?} failed: {e}", batch[at].read);
                    error_reply(&batch[at].read, StatusCode::EIO)
                }
            });
        }
    }
    for (job, response) in batch.drain(..).zip(responses) {
        let response = response.expect("every read of the batch answered");
        reply(
            peers,
            job.origin,
            job.conn_id,
            job.header,
            response,
            job.timing,
        );
    }
}

/// What a reader adds to its shard's read-ahead metrics.
struct ReadStats {
    metrics: Arc<Metrics>,
    shard: usize,
    /// The reader's own counts already added.
    runs: u64,
    entries: u64,
}

impl ReadStats {
    fn update(&mut self, reader: &Reader<ReaderStorage>) {
        let m = &self.metrics.shards[self.shard];
        m.read_ahead_runs
            .fetch_add(reader.runs_read - self.runs, Ordering::Relaxed);
        m.read_ahead_entries
            .fetch_add(reader.entries_ahead - self.entries, Ordering::Relaxed);
        self.runs = reader.runs_read;
        self.entries = reader.entries_ahead;
        if let Some((bytes, count, hits)) = reader.read_cache_stats() {
            m.read_cache_bytes.store(bytes as i64, Ordering::Relaxed);
            m.read_cache_count.store(count as i64, Ordering::Relaxed);
            // The cache is shared: its hit count is the shard's, not this reader's.
            m.read_cache_hits.fetch_max(hits, Ordering::Relaxed);
        }
    }
}

/// Nice values of the flush and reader threads (shard threads run at 0).
const FLUSH_NICE: i32 = 10;
const READ_NICE: i32 = 5;

/// Lowers the calling thread's CPU priority (Linux: nice is per thread).
fn lower_priority(nice: i32) {
    // SAFETY: plain syscalls on the calling thread.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        if libc::setpriority(libc::PRIO_PROCESS, tid, nice) != 0 {
            log::debug!("cannot lower the priority of thread {tid}");
        }
    }
}

fn reply(
    peers: &[ShardHandle],
    origin: usize,
    conn_id: u64,
    header: ResponseHeader,
    response: Response,
    timing: u64,
) {
    let _ = peers[origin].replies.send(RemoteReply {
        conn_id,
        frame: ResponseFrame { header, response },
        timing,
        ready_at: 0,
    });
}

/// The reply to a single-entry read from ledger storage (a reader's, or the shard's from the
/// read-ahead cache): the body, or ENOENTRY when the store does not have it.
pub fn entry_reply(
    ledger: i64,
    reply_entry_id: i64,
    max_lac: Option<i64>,
    body: Option<bytes::Bytes>,
) -> Response {
    Response::ReadEntry {
        status: if body.is_some() {
            StatusCode::EOK
        } else {
            StatusCode::ENOENTRY
        },
        ledger_id: ledger,
        entry_id: reply_entry_id,
        body,
        max_lac,
        lac_update_timestamp: None,
    }
}

/// The reply a disk read gets when it cannot be done (`status`: EIO, ETOOMANYREQUESTS).
pub fn error_reply(read: &DiskRead, status: StatusCode) -> Response {
    match *read {
        DiskRead::Entry {
            ledger,
            reply_entry_id,
            ..
        } => Response::ReadEntry {
            status,
            ledger_id: ledger,
            entry_id: reply_entry_id,
            body: None,
            max_lac: None,
            lac_update_timestamp: None,
        },
        DiskRead::Batch {
            ledger,
            start,
            request_id,
            ..
        } => LedgerTable::batch_status(ledger, start, request_id, status),
        DiskRead::List { ledger, .. } => Response::GetListOfEntriesOfLedger {
            status,
            ledger_id: ledger,
            availability: None,
        },
        DiskRead::ReadLac { ledger, .. } => Response::ReadLac {
            status,
            ledger_id: ledger,
            lac_body: None,
            last_entry_body: None,
        },
    }
}

fn execute(reader: &mut Reader<ReaderStorage>, view: &ReadView, read: DiskRead) -> Response {
    let fail = |read: &DiskRead, e: entrylog::StoreError| {
        log::error!("cache-miss read {read:?} failed: {e}");
        error_reply(read, StatusCode::EIO)
    };
    match read {
        DiskRead::Entry {
            ledger,
            entry,
            reply_entry_id,
            max_lac,
        } => match reader.read(view, ledger as u64, entry as u64) {
            Ok(body) => entry_reply(ledger, reply_entry_id, max_lac, body),
            Err(e) => fail(&read, e),
        },
        DiskRead::Batch {
            ledger,
            start,
            request_id,
            max_count,
            max_size,
        } => {
            let limit = if max_count <= 0 {
                i64::MAX
            } else {
                max_count as i64
            };
            let mut entries = Vec::new();
            let mut size = 0i64;
            let mut id = start;
            while (entries.len() as i64) < limit {
                // The first entry reads the batch's run ahead in one read (up to the count).
                let got = if entries.is_empty() {
                    let want = usize::try_from(limit).unwrap_or(usize::MAX);
                    reader.read_batch_start(view, ledger as u64, id as u64, want)
                } else {
                    reader.read(view, ledger as u64, id as u64)
                };
                match got {
                    Ok(Some(body)) => {
                        size += body.len() as i64 + 4;
                        if !entries.is_empty() && size > max_size {
                            break;
                        }
                        entries.push(body);
                        id += 1;
                    }
                    Ok(None) => break,
                    Err(e) => return fail(&read, e),
                }
            }
            if entries.is_empty() {
                LedgerTable::batch_status(ledger, start, request_id, StatusCode::ENOENTRY)
            } else {
                Response::BatchReadEntry {
                    status: StatusCode::EOK,
                    ledger_id: ledger,
                    start_entry_id: start,
                    request_id,
                    entries,
                }
            }
        }
        DiskRead::List { ledger, ref cached } => match reader.entries_of(view, ledger as u64) {
            Ok(on_disk) => {
                let mut all: Vec<i64> = on_disk.into_iter().map(|e| e as i64).collect();
                all.extend(cached.iter().copied());
                all.sort_unstable();
                all.dedup();
                Response::GetListOfEntriesOfLedger {
                    status: StatusCode::EOK,
                    ledger_id: ledger,
                    availability: Some(availability::encode_entries(all)),
                }
            }
            Err(e) => fail(&read, e),
        },
        DiskRead::ReadLac {
            ledger,
            entry,
            ref lac_body,
        } => match reader.read(view, ledger as u64, entry as u64) {
            Ok(body) => LedgerTable::read_lac_reply(ledger, lac_body.clone(), body),
            Err(e) => fail(&read, e),
        },
    }
}
