//! The reader threads' loop (started by `ledger_storage`): cache-miss reads from the shard's
//! bounded queue, served against the view each read carries. What waits in the queue is taken
//! as one batch: its single-entry reads go to `Reader::read_each`, which puts their device
//! reads in flight together on the reader's ring (random reads at the disk's depth from one
//! thread), within the journal-first share (`disk_share`); a run read (the shard's read-ahead
//! saw a sequential reader, `read::ahead`) reads the entries after the asked one in the same
//! device read. Replies go straight to the shard holding the connection, in the batch's order.
//! Then the runs the shard asked for (`DiskRead::Prefetch`) are read. Every run read goes back
//! to the ledger's shard (`RunLanded`, with its bodies): the reader keeps no read-ahead state.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use entrylog::{ReadView, Reader};

use crate::read::disk_reader::DiskReader;
use net::{availability, Response, ResponseFrame, ResponseHeader, StatusCode};
use storage::RealStorage;

use crate::admin::metrics::{now_us, unpack_timing, Metrics, ShardMetrics};
use crate::read::ahead::RUNS_PER_ASK;
use crate::read::disk_share::Shared;
use crate::shard::mailbox::{ReadJob, RemoteReply, RunLanded, ShardHandle};
use crate::store::ledger::{DiskRead, LedgerTable};
use bytes::Bytes;

/// A reader thread's storage port: its own ring, taking turns in the bookie's disk share.
pub type ReaderStorage = Shared<RealStorage>;

/// A reader thread's loop: cache-miss reads in arrival order, gathered into batches of up
/// to `max_batch` whose device reads go in flight together (`serve_batch`). Among the reads
/// this reader took from the shared queue: readers run side by side, so replies of one
/// connection may overtake each other, as with a Java bookie's read thread pool. A read for a
/// connection over its reply budget waits (deferred, without blocking the others) until the
/// connection drains, and a read for a closed connection is skipped.
pub fn serve_reads(
    reader: &mut DiskReader,
    jobs: &crossbeam_channel::Receiver<ReadJob>,
    peers: &[ShardHandle],
    (max_deferred, max_batch, run_entries): (usize, usize, usize),
    mut stats: ReadStats,
) {
    let mut deferred: VecDeque<ReadJob> = VecDeque::new();
    let mut batch: Vec<ReadJob> = Vec::with_capacity(max_batch);
    loop {
        for _ in 0..deferred.len() {
            let job = deferred.pop_front().expect("counted");
            if job.conn.is_gone() {
                release_run(peers, &job);
                continue;
            }
            if batch.len() >= max_batch || !job.conn.has_room() {
                deferred.push_back(job);
                continue;
            }
            batch.push(job);
        }
        stats.held_back(deferred.len());
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
        stats.held_back(deferred.len());
        if !batch.is_empty() {
            serve_batch(reader, &mut batch, peers, run_entries, stats.shard());
            stats.update(&reader.ours);
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
        // shard parked reads on must always be reported (`read::ahead`).
        batch.push(job);
        return;
    }
    if job.conn.is_gone() {
        release_run(peers, &job);
        return;
    }
    let behind = deferred.iter().any(|d| Arc::ptr_eq(&d.conn, &job.conn));
    if !behind && job.conn.has_room() {
        batch.push(job);
    } else if deferred.len() < max_deferred {
        deferred.push_back(job);
    } else {
        release_run(peers, &job);
        answer(
            peers,
            &job,
            error_reply(&job.read, StatusCode::ETOOMANYREQUESTS),
        );
    }
}

/// A run read that will not be done (its connection closed, or it has no room to wait): the
/// reads its shard parked behind it go on without it, instead of waiting for the deadline.
fn release_run(peers: &[ShardHandle], job: &ReadJob) {
    if let (DiskRead::Entry { ledger, entry, .. }, true) = (&job.read, job.run > 1) {
        // The shard only stops at process exit.
        let _ = peers[job.shard].landed.send(RunLanded {
            ledger: *ledger as u64,
            start: *entry as u64 + 1,
            bodies: Vec::new(),
            trigger: None,
            more: None,
        });
    }
}

/// Serves a batch: single-entry reads through `Reader::read_each` (their device reads in
/// flight together), the others (run reads, batch reads, entry lists, LAC reads) one by one;
/// the replies go out in the batch's order once all are done, and a run read's entries after
/// the asked one go to the ledger's shard. Prefetches come last, after the replies.
fn serve_batch(
    reader: &mut DiskReader,
    batch: &mut Vec<ReadJob>,
    peers: &[ShardHandle],
    run_entries: usize,
    metrics: &ShardMetrics,
) {
    // Per run asked: its view, ledger, first entry, and the shard to send it to.
    let mut prefetches: Vec<(Arc<ReadView>, u64, u64, usize)> = Vec::new();
    batch.retain(|job| match job.read {
        DiskRead::Prefetch { ledger, entry } => {
            prefetches.push((job.view.clone(), ledger as u64, entry as u64, job.shard));
            false
        }
        _ => true,
    });
    let mut responses: Vec<Option<Response>> = Vec::with_capacity(batch.len());
    // The entries run reads brought after their asked ones, for the ledgers' shard.
    let mut runs: Vec<(usize, RunLanded)> = Vec::new();
    // The single-entry reads: where each answers in the batch and its reply's fields, and
    // what it asks.
    let mut singles: Vec<(usize, i64, i64, Option<i64>)> = Vec::new();
    let mut asked: Vec<(&ReadView, u64, u64)> = Vec::new();
    for (at, job) in batch.iter().enumerate() {
        match job.read {
            DiskRead::Entry {
                ledger,
                entry,
                reply_entry_id,
                max_lac,
            } if job.run <= 1 => {
                singles.push((at, ledger, reply_entry_id, max_lac));
                asked.push((&*job.view, ledger as u64, entry as u64));
                responses.push(None);
            }
            DiskRead::Entry { ledger, entry, .. } => {
                let (reply, rest) = run_read(reader, &job.view, &job.read, job.run);
                if !rest.is_empty() {
                    metrics.read_ahead_run(rest.len());
                }
                responses.push(Some(reply));
                // Always sent, even empty: the shard parked the reads behind it on it. Its
                // first entry is the trigger of the run after it.
                let next = entry as u64 + 1;
                let run = RunLanded {
                    ledger: ledger as u64,
                    start: next,
                    bodies: rest,
                    trigger: Some(next),
                    more: None,
                };
                runs.push((job.shard, run));
            }
            _ => responses.push(Some(execute(reader, &job.view, &job.read, run_entries))),
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
    // Every entry read of the batch is in hand: from its request's decoding to now.
    let now = now_us();
    for (job, response) in batch.drain(..).zip(responses) {
        if let (DiskRead::Entry { .. }, Some(Response::ReadEntry { status, .. }), true) =
            (&job.read, &response, job.timing != 0)
        {
            let (_, since) = unpack_timing(job.timing);
            metrics.read_entry_between(since, now, *status == StatusCode::EOK);
        }
        answer(
            peers,
            &job,
            response.expect("every read of the batch answered"),
        );
    }
    for (shard, run) in runs {
        // The shard only stops at process exit.
        let _ = peers[shard].landed.send(run);
    }
    for (view, ledger, entry, shard) in prefetches {
        // A run a shard asked for has reads waiting on it: the run after it is read along,
        // so the device reads it while this thread checks the first. Not while a journal
        // waits for the disk: then a read more in flight is a commit's wait.
        let runs = if reader.storage().share().journal_waits() {
            1
        } else {
            RUNS_PER_ASK
        };
        let landed = |start: u64, bodies: Vec<Bytes>, more: Option<(u64, u64)>| {
            if !bodies.is_empty() {
                metrics.read_ahead_run(bodies.len());
            }
            // The ask's first entry, on its first run: the next take at or past it (at once,
            // when the client is on that run already) asks for the runs after the ask's
            // last, while the rest of this ask is still in flight.
            let _ = peers[shard].landed.send(RunLanded {
                ledger,
                start,
                trigger: (start == entry).then_some(entry),
                more,
                bodies,
            });
        };
        if let Err(e) = reader.read_runs(&view, ledger, entry, (runs, run_entries), landed) {
            // Only a read ahead: the entries are read again when asked for.
            log::warn!("read-ahead of ledger {ledger} from entry {entry} failed: {e}");
        }
    }
}

/// What a reader adds to its shard's read-ahead metrics.
pub struct ReadStats {
    metrics: Arc<Metrics>,
    shard: usize,
    /// The reader's own counts already added.
    runs: u64,
    entries: u64,
    /// The reads this reader holds back, as last added to the shard's `reads_blocked`.
    held: usize,
}

impl ReadStats {
    pub fn new(metrics: Arc<Metrics>, shard: usize) -> ReadStats {
        ReadStats {
            metrics,
            shard,
            runs: 0,
            entries: 0,
            held: 0,
        }
    }

    /// The shard's metrics block, for what a batch records.
    fn shard(&self) -> &ShardMetrics {
        &self.metrics.shards[self.shard]
    }

    /// This reader holds back `held` reads now (their connections over the reply budget): its
    /// change goes to the shard's `READ_ENTRY_BLOCKED`, only when it changed.
    fn held_back(&mut self, held: usize) {
        if held != self.held {
            let delta = held as i64 - self.held as i64;
            self.shard()
                .reads_blocked
                .fetch_add(delta, Ordering::Relaxed);
            self.held = held;
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
        // Planted bug (`bookie::sim`): the reply names the entry after the one read.
        entry_id: reply_entry_id + i64::from(mutation::on(mutation::Mutation::ReplyWrongEntry)),
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
        } => LedgerTable::read_status(ledger, reply_entry_id, status),
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
        DiskRead::Prefetch { ledger, entry } => LedgerTable::read_status(ledger, entry, status),
    }
}

/// A run read of an entry (`run` entries from it in one device read): the entry's reply, and
/// the entries after it.
pub(crate) fn run_read<S: storage::Storage>(
    reader: &mut DiskReader<S>,
    view: &ReadView,
    read: &DiskRead,
    run: usize,
) -> (Response, Vec<Bytes>) {
    let DiskRead::Entry {
        ledger,
        entry,
        reply_entry_id,
        max_lac,
    } = *read
    else {
        return (execute(reader, view, read, 1), Vec::new());
    };
    match reader.read_run(view, ledger as u64, entry as u64, run) {
        Ok(Some(mut bodies)) => {
            let rest = bodies.split_off(1);
            let reply = entry_reply(ledger, reply_entry_id, max_lac, bodies.pop());
            (reply, rest)
        }
        Ok(None) => (
            entry_reply(ledger, reply_entry_id, max_lac, None),
            Vec::new(),
        ),
        Err(e) => {
            log::error!("cache-miss read {read:?} failed: {e}");
            (error_reply(read, StatusCode::EIO), Vec::new())
        }
    }
}

/// A read other than a run read; `run_entries`: the most entries one device read of a batch
/// read brings.
pub(crate) fn execute<S: storage::Storage>(
    reader: &mut DiskReader<S>,
    view: &ReadView,
    read: &DiskRead,
    run_entries: usize,
) -> Response {
    let fail = |read: &DiskRead, e: crate::read::disk_reader::DiskError| {
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
            let mut size = crate::store::ledger_read::BATCH_REPLY_FIXED_BYTES;
            let mut id = start;
            'batch: while (entries.len() as i64) < limit {
                // Each device read brings a run of the batch (up to its count).
                let left = usize::try_from(limit - entries.len() as i64).unwrap_or(usize::MAX);
                let run =
                    match reader.read_run(view, ledger as u64, id as u64, left.min(run_entries)) {
                        Ok(Some(run)) => run,
                        Ok(None) => break,
                        Err(e) if entries.is_empty() => return fail(read, e),
                        // A bad entry after the first: the batch ends before it.
                        Err(_) => break,
                    };
                for body in run {
                    size += body.len() as i64 + 4;
                    if !entries.is_empty() && size > max_size {
                        break 'batch;
                    }
                    entries.push(body);
                    id += 1;
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
