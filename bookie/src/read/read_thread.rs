//! The reader threads' loop (started by `ledger_storage`): cache-miss reads from the shard's
//! bounded queue, served against the view each read carries. What waits in the queue is taken
//! as one batch: its single-entry reads go to `Reader::read_each`, which puts their device
//! reads in flight together on the reader's ring (random reads at the disk's depth from one
//! thread), within the journal-first share (`disk_share`); sequential reads read ahead a run
//! at a time. Replies go straight to the shard holding the connection, in the batch's order.
//! Then the runs due for sequential readers (`DiskRead::Prefetch` from the shards, and the
//! triggers this reader took itself) are read into the read-ahead cache: a catch-up reader
//! finds its next batch there instead of waiting on the device.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use entrylog::{ReadView, Reader};
use net::{availability, Response, ResponseFrame, ResponseHeader, StatusCode};
use storage::RealStorage;

use crate::admin::metrics::Metrics;
use crate::read::disk_share::Shared;
use crate::shard::mailbox::{ReadJob, RemoteReply, RunLanded, ShardHandle};
use crate::store::ledger::{DiskRead, LedgerTable};

/// A reader thread's storage port: its own ring, taking turns in the bookie's disk share.
pub type ReaderStorage = Shared<RealStorage>;

/// A reader thread's loop: cache-miss reads in arrival order, gathered into batches of up
/// to `max_batch` whose device reads go in flight together (`serve_batch`). Among the reads
/// this reader took from the shared queue: readers run side by side, so replies of one
/// connection may overtake each other, as with a Java bookie's read thread pool. A read for a
/// connection over its reply budget waits (deferred, without blocking the others) until the
/// connection drains, and a read for a closed connection is skipped.
pub fn serve_reads(
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
            // With reads deferred, look at them again every millisecond; meanwhile keep taking
            // the other connections' reads (a full set of deferred reads must not stop them).
            let next = if deferred.is_empty() {
                jobs.recv().map_err(|_| true)
            } else {
                jobs.recv_timeout(Duration::from_millis(1))
                    .map_err(|e| e == crossbeam_channel::RecvTimeoutError::Disconnected)
            };
            match next {
                Ok(job) => take_job(job, &mut deferred, &mut batch, max_deferred, peers),
                Err(true) => return,
                Err(false) => continue,
            }
        }
        // Whatever else waits joins the batch: its reads go in flight together.
        while batch.len() < max_batch {
            match jobs.try_recv() {
                Ok(job) => take_job(job, &mut deferred, &mut batch, max_deferred, peers),
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
/// closed. With `max_deferred` reads deferred already, a read that would wait too is answered
/// ETOOMANYREQUESTS at once (as a Java bookie answers a read its full read pool cannot
/// queue): clients that stop reading their replies cannot make the reader ignore the others.
fn take_job(
    job: ReadJob,
    deferred: &mut VecDeque<ReadJob>,
    batch: &mut Vec<ReadJob>,
    max_deferred: usize,
    peers: &[ShardHandle],
) {
    if matches!(job.read, DiskRead::Prefetch { .. }) {
        // No reply to send: neither the connection's room nor its end matter, and a run the
        // shard parked reads on must always be reported (`run_waits`).
        batch.push(job);
        return;
    }
    if job.conn.is_gone() {
        return;
    }
    let behind = deferred.iter().any(|d| Arc::ptr_eq(&d.conn, &job.conn));
    if !behind && job.conn.has_room() {
        batch.push(job);
    } else if deferred.len() < max_deferred {
        deferred.push_back(job);
    } else {
        answer(
            peers,
            &job,
            error_reply(&job.read, StatusCode::ETOOMANYREQUESTS),
        );
    }
}

/// Serves a batch: single-entry reads through `Reader::read_each` (their device reads in
/// flight together), the others (batch reads, entry lists, LAC reads) one by one; the replies
/// go out in the batch's order once all are done. Prefetches come last, after the replies.
fn serve_batch(
    reader: &mut Reader<ReaderStorage>,
    batch: &mut Vec<ReadJob>,
    peers: &[ShardHandle],
) {
    // Per run: its view, ledger, first entry, and the shard to report it to.
    let mut prefetches: Vec<(Arc<ReadView>, u64, u64, Option<usize>)> = Vec::new();
    batch.retain(|job| match job.read {
        DiskRead::Prefetch {
            ledger,
            entry,
            report,
        } => {
            let report = report.then_some(job.origin);
            prefetches.push((job.view.clone(), ledger as u64, entry as u64, report));
            false
        }
        _ => true,
    });
    let last_view = batch.last().map(|job| job.view.clone());
    let mut responses: Vec<Option<Response>> = Vec::with_capacity(batch.len());
    // The single-entry reads: where each answers in the batch and its reply's fields, and
    // what it asks.
    let mut singles: Vec<(usize, i64, i64, Option<i64>)> = Vec::new();
    let mut asked: Vec<(&ReadView, u64, u64)> = Vec::new();
    for (at, job) in batch.iter().enumerate() {
        if let DiskRead::Entry {
            ledger,
            entry,
            reply_entry_id,
            max_lac,
        } = job.read
        {
            singles.push((at, ledger, reply_entry_id, max_lac));
            asked.push((&*job.view, ledger as u64, entry as u64));
            responses.push(None);
        } else {
            responses.push(Some(execute(reader, &job.view, &job.read)));
        }
    }
    if !asked.is_empty() {
        let bodies = reader.read_each(&asked);
        for ((at, ledger, reply_entry_id, max_lac), body) in singles.into_iter().zip(bodies) {
            let read = &batch[at].read;
            responses[at] = Some(match body {
                Ok(body) => entry_reply(ledger, reply_entry_id, max_lac, body),
                Err(e) => {
                    log::error!("cache-miss read {read:?} failed: {e}");
                    error_reply(read, StatusCode::EIO)
                }
            });
        }
    }
    for (job, response) in batch.drain(..).zip(responses) {
        answer(
            peers,
            &job,
            response.expect("every read of the batch answered"),
        );
    }
    let due = reader.take_due();
    if let Some(view) = last_view {
        prefetches.extend(due.into_iter().map(|(l, e)| (view.clone(), l, e, None)));
    }
    for (view, ledger, entry, report) in prefetches {
        // A run a shard asked for has reads waiting on it: the run after it is read along,
        // so the device reads it while this thread checks and caches the first. Not while a
        // journal waits for the disk: then a read more in flight is a commit's wait.
        let runs = if report.is_some() && !reader.storage().share().journal_waits() {
            RUNS_PER_ASK
        } else {
            1
        };
        let landed = |start: u64, entries: usize| {
            if let Some(shard) = report {
                // The shard only stops at process exit.
                let _ = peers[shard].landed.send(RunLanded {
                    ledger: ledger as i64,
                    start: start as i64,
                    entries,
                });
            }
        };
        if let Err(e) = reader.prefetch_runs(&view, ledger, entry, runs, landed) {
            // Only a read ahead: the entries are read again, and reported, when asked for.
            log::warn!("read-ahead of ledger {ledger} from entry {entry} failed: {e}");
        }
    }
}

/// Runs read for one run a shard asks for (`DiskRead::Prefetch` with a report) while no journal
/// waits: the asked run and the one after it, their device reads in flight together. The
/// trigger is the first run's first entry, set once both are cached, so the shard asks for the
/// next pair as soon as its client takes more: a catch-up reader finds one to two runs ready.
/// Measured on one core, interleaved: 325k/s median against 255k/s with one run per ask.
const RUNS_PER_ASK: usize = 2;

/// What a reader adds to its shard's read-ahead metrics.
pub struct ReadStats {
    metrics: Arc<Metrics>,
    shard: usize,
    /// The reader's own counts already added.
    runs: u64,
    entries: u64,
}

impl ReadStats {
    pub fn new(metrics: Arc<Metrics>, shard: usize) -> ReadStats {
        ReadStats {
            metrics,
            shard,
            runs: 0,
            entries: 0,
        }
    }

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

/// Sends `response` to the shard holding `job`'s connection.
fn answer(peers: &[ShardHandle], job: &ReadJob, response: Response) {
    reply(
        peers,
        job.origin,
        job.conn_id,
        job.header,
        response,
        job.timing,
    );
}

pub fn reply(
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
        // Never sent: a prefetch has no request to answer.
        DiskRead::Prefetch { ledger, entry, .. } => Response::ReadEntry {
            status,
            ledger_id: ledger,
            entry_id: entry,
            body: None,
            max_lac: None,
            lac_update_timestamp: None,
        },
    }
}

fn execute(reader: &mut Reader<ReaderStorage>, view: &ReadView, read: &DiskRead) -> Response {
    let fail = |read: &DiskRead, e: entrylog::StoreError| {
        log::error!("cache-miss read {read:?} failed: {e}");
        error_reply(read, StatusCode::EIO)
    };
    match *read {
        DiskRead::Entry {
            ledger,
            entry,
            reply_entry_id,
            max_lac,
        } => match reader.read(view, ledger as u64, entry as u64) {
            Ok(body) => entry_reply(ledger, reply_entry_id, max_lac, body),
            Err(e) => fail(read, e),
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
                    Err(e) => return fail(read, e),
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
            Err(e) => fail(read, e),
        },
        DiskRead::ReadLac {
            ledger,
            entry,
            ref lac_body,
        } => match reader.read(view, ledger as u64, entry as u64) {
            Ok(body) => LedgerTable::read_lac_reply(ledger, lac_body.clone(), body),
            Err(e) => fail(read, e),
        },
        // `serve_batch` takes prefetches out of the batch before executing it; had one come
        // here, its reply would never be sent.
        DiskRead::Prefetch { .. } => error_reply(read, StatusCode::EIO),
    }
}
