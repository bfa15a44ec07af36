//! A shard: one thread, pinned to a core, owning a share of the ledgers (by hash of the ledger
//! id), its own journal and io_uring, and the connections the kernel hands its listener.
//!
//! Everything a shard does runs on its thread, in a tokio current-thread runtime: decoding a
//! frame, applying the ledger rules, appending to the journal, noticing the sync's completion
//! (through the ring's eventfd) and encoding the reply. The only hand-offs are for requests about
//! another shard's ledgers: they cross a bounded queue to the owner, and the reply comes back
//! through the origin shard's reply queue (unbounded, but it only carries replies to requests
//! the bounded queue admitted). A full queue is answered with ETOOMANYREQUESTS.

pub mod mailbox;

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsRawFd, RawFd};
use std::path::PathBuf;
use std::rc::{Rc, Weak};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use journal::{AppendError, Journal, Lsn};
use net::{
    AuthMessage, OperationType, ReadFlag, Request, RequestFrame, Response, ResponseFrame,
    ResponseHeader, StatusCode,
};
use storage::{DriverKind, RealStorage, Storage};
use tokio::sync::mpsc;

use crate::admin::metrics::{now_us, Metrics, Op, ShardMetrics, Stage};
use crate::admin::readonly::BookieState;
use crate::config::BookieConfig;
use crate::conn::{Conn, ConnShared, RequestSink};
use crate::gc::reclaim::Reclaimer;
use crate::read::disk_share::DiskShare;
use crate::read::read_thread;
use crate::read::run_waits::RunWaits;
use crate::shard::mailbox::{
    FlushJob, GcRequest, ReadJob, RemoteReply, RemoteRequest, RunLanded, ShardHandle, StoreEvent,
};
use crate::store::ledger::{Answer, Decision, DiskRead, LedgerTable};
use crate::store::ledger_storage::{self, LedgerStorageLink};
use crate::store::record::{JournalRecord, HEADER_MAX};

/// Which shard owns `ledger`.
pub fn shard_of(ledger: i64, shards: usize) -> usize {
    let h = (ledger as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    ((h >> 32) % shards as u64) as usize
}

/// Where a reply goes.
enum Responder {
    Local {
        conn: Rc<Conn>,
        header: ResponseHeader,
        op: Op,
        since: u64,
    },
    Remote {
        origin: usize,
        conn_id: u64,
        shared: Arc<ConnShared>,
        header: ResponseHeader,
        op: Op,
        since: u64,
    },
}

impl Responder {
    fn op(&self) -> Op {
        match self {
            Responder::Local { op, .. } | Responder::Remote { op, .. } => *op,
        }
    }

    /// Whether the connection the reply is for has closed.
    fn is_gone(&self) -> bool {
        match self {
            Responder::Local { conn, .. } => conn.is_closed(),
            Responder::Remote { shared, .. } => shared.is_gone(),
        }
    }

    /// When the request was decoded (`metrics::now_us`).
    fn since(&self) -> u64 {
        match self {
            Responder::Local { since, .. } | Responder::Remote { since, .. } => *since,
        }
    }
}

/// How a disk read reaches [`Shard::read_disk_via`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Via {
    /// From a request.
    Request,
    /// Parked on a run that landed, which ended before `end` (`None`: it brought nothing). A
    /// read of an entry the run held that still misses (a second read of an entry taken by
    /// the first, or one evicted since) goes to a reader: parking it again on a new run of the
    /// same entries would let a client that repeats its reads starve the others. Only a read
    /// past the run may wait for the next one.
    Run { end: Option<u64> },
    /// Parked on a run that did not land in time.
    Late,
}

/// How long a read waits in the shard for a read-ahead run (`run_waits`) before it goes to a
/// reader by itself. A run is one device read; this only bounds a reader that never reports.
const RUN_WAIT_DEADLINE: Duration = Duration::from_secs(2);

/// Whether a request only reads (nothing changes if it is dropped unanswered).
fn read_only_request(request: &Request) -> bool {
    match request {
        Request::ReadEntry { flag, .. } => *flag != Some(ReadFlag::FenceLedger),
        Request::BatchReadEntry { fence, .. } => !*fence,
        Request::ReadLac { .. } | Request::GetListOfEntriesOfLedger { .. } => true,
        _ => false,
    }
}

/// The metrics kind of a request.
fn op_of(request: &Request) -> Op {
    match request {
        Request::AddEntry { .. } => Op::AddEntry,
        Request::ReadEntry {
            flag: Some(ReadFlag::FenceLedger),
            ..
        } => Op::ReadEntryFence,
        Request::ReadEntry {
            previous_lac: Some(_),
            ..
        } => Op::ReadEntryLongPoll,
        Request::ReadEntry { .. } => Op::ReadEntry,
        Request::BatchReadEntry { .. } => Op::BatchReadEntry,
        Request::WriteLac { .. } => Op::WriteLac,
        Request::ReadLac { .. } => Op::ReadLac,
        Request::ForceLedger { .. } => Op::ForceLedger,
        Request::GetBookieInfo { .. } => Op::GetBookieInfo,
        Request::GetListOfEntriesOfLedger { .. } => Op::GetListOfEntries,
        _ => Op::Other,
    }
}

/// Whether the request asks for high priority (v2 flag, v3 priority > 0).
fn high_priority(frame: &RequestFrame) -> bool {
    match frame.header {
        net::RequestHeader::V2 { high_priority, .. } => high_priority,
        net::RequestHeader::V3 { priority, .. } => priority.is_some_and(|p| p > 0),
    }
}

struct Pending {
    /// When its record was appended (`metrics::now_us`).
    at: u64,
    lsn: Lsn,
    to: Responder,
    reply: Answer,
}

/// Records that found every journal buffer busy: appended, in order, as buffers free up.
struct Blocked {
    at: u64,
    records: Vec<JournalRecord>,
    to: Responder,
    reply: Answer,
}

struct Watcher {
    id: u64,
    entry: i64,
    previous_lac: i64,
    flag: Option<ReadFlag>,
    to: Responder,
}

/// Counters for logs and (later) metrics; read through `Debug` in the shutdown log.
#[allow(dead_code)]
#[derive(Default, Debug, Clone)]
pub struct ShardStats {
    pub ledgers: usize,
    pub write_cache_bytes: usize,
    pub requests: u64,
    pub remote_requests: u64,
    pub rejected_busy: u64,
}

/// A shard's state. Lives in an `Rc<RefCell<_>>` on the shard's thread.
pub struct Shard {
    pub id: usize,
    shards: usize,
    peers: Arc<Vec<ShardHandle>>,
    table: LedgerTable,
    journal: Journal<RealStorage>,
    driver: DriverKind,
    pending: VecDeque<Pending>,
    blocked: VecDeque<Blocked>,
    /// Woken when the shard takes input again (journal buffers or write cache freed).
    unblocked: Rc<tokio::sync::Notify>,
    /// Wakes the journal driver (`server::drive_journal`) when the open group's deadline comes
    /// before the one its timer is set for: an add that opens a group on an idle journal must
    /// not wait for the driver's idle timer (it did: one add at a time took ~100 ms).
    journal_timer: Rc<tokio::sync::Notify>,
    /// The deadline (µs, the shard's clock) the journal driver's timer is set for.
    journal_timer_at_us: u64,
    /// Since when (`metrics::now_us`) the write cache has been full; 0: it is not.
    cache_full_since_us: u64,
    watchers: HashMap<i64, Vec<Watcher>>,
    next_watch: u64,
    conns: HashMap<u64, Weak<Conn>>,
    /// Every ledger directory (GET_BOOKIE_INFO's space).
    ledger_dirs: Vec<PathBuf>,
    /// This shard's journal or ledger storage failed: it takes no more writes (and the
    /// bookie-wide state is read-only for good, see `readonly.rs`).
    read_only: bool,
    /// The process-wide state (read-only mode) the shards share.
    state: Arc<BookieState>,
    metrics: Arc<Metrics>,
    store: LedgerStorageLink,
    flushing: bool,
    /// Garbage collection asked for, sent to the flush thread after the next flush (which
    /// carries the latest deletions).
    gc_request: Option<GcRequest>,
    /// An operator asked for a flush (`PUT /api/v1/bookie/flush`): at the next chance.
    flush_requested: bool,
    last_flush: Instant,
    flush_threshold_bytes: usize,
    flush_interval: Duration,
    /// This shard's journal directory (trimmed files are deleted by path, off this thread).
    journal_dir: PathBuf,
    /// The fastest a flush may write (`flush_rate_bytes_per_sec`; 0: unpaced).
    flush_rate_ceiling: u64,
    /// Cache-miss reads waiting for a read-ahead run in flight, with where they answer.
    run_waits: RunWaits<(DiskRead, Responder)>,
    /// The connection state of read-ahead runs, which reply to nobody.
    no_conn: Arc<ConnShared>,
    pub stats: ShardStats,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl Shard {
    /// Opens the shard's journal (replaying it into the ledger table).
    pub fn open(
        id: usize,
        config: &BookieConfig,
        peers: Arc<Vec<ShardHandle>>,
        state: Arc<BookieState>,
        (metrics, reclaim, disk): (Arc<Metrics>, Reclaimer, Arc<DiskShare>),
    ) -> Result<(Shard, mpsc::UnboundedReceiver<StoreEvent>), String> {
        let dirs = crate::store::ledger_dirs::for_shard(config, id, config.shard_count(), &state)?;
        let journal_dir = dirs.journal;
        for member in &dirs.ledgers.members {
            std::fs::create_dir_all(member)
                .map_err(|e| format!("cannot create {}: {e}", member.display()))?;
        }
        let storage = storage::open_dir_with(
            &journal_dir,
            1024,
            config.force_psync,
            storage::uring::UringWake::EventFd,
        )
        .map_err(|e| {
            format!(
                "cannot open journal directory {}: {e}",
                journal_dir.display()
            )
        })?;
        let driver = storage.kind();
        let started = Instant::now();
        let (store, recovered, flush_done) = ledger_storage::start(
            id,
            dirs.ledgers.clone(),
            config,
            peers.clone(),
            (metrics.clone(), reclaim, disk),
        )?;
        let mark = recovered.journal_mark;
        let mut table = LedgerTable::new(config.write_cache_bytes);
        table.load(recovered.ledgers);
        let mut unreadable = 0u64;
        let now = now_ms();
        let mut lost = crate::store::journal_recovery::LostRecords::default();
        let mut journal = Journal::open_observing(
            storage,
            config.journal.clone(),
            Lsn(mark),
            &mut |_, payload| match JournalRecord::decode(payload) {
                Some(record) => table.replay(record, now),
                None => unreadable += 1,
            },
            &mut |_, payload| lost.record(payload),
        )
        .map_err(|e| lost.refusal(&journal_dir, &e))?;
        lost.log_cut(id, journal.recovery_report());
        if unreadable > 0 {
            return Err(format!(
                "journal {}: {unreadable} records of an unknown type; refusing to start",
                journal_dir.display()
            ));
        }
        // Segments wholly below the checkpoint mark (a clean stop flushed everything and sealed
        // its segment) are persisted in ledger storage: recycle them now, not at the first flush.
        journal
            .trim(Lsn(mark))
            .and_then(|_| journal.remove_trash())
            .map_err(|e| format!("journal {}: {e}", journal_dir.display()))?;
        let report = journal.recovery_report();
        log::info!(
            "shard {id}: journal {} ({}) replayed {} records from mark {mark}; {} ledgers; {:.0} ms{}",
            journal_dir.display(),
            driver.name(),
            report.records_replayed,
            table.len(),
            started.elapsed().as_secs_f64() * 1e3,
            report
                .torn_tail
                .as_ref()
                .map(|(f, o, k)| format!("; torn tail cut in {f} at {o} ({k})"))
                .unwrap_or_default()
        );
        let no_conn = Arc::new(ConnShared::detached(peers[id].reply_budget.clone()));
        let shard = Shard {
            id,
            shards: peers.len(),
            peers,
            table,
            journal,
            driver,
            pending: VecDeque::with_capacity(4096),
            blocked: VecDeque::new(),
            unblocked: Rc::new(tokio::sync::Notify::new()),
            journal_timer: Rc::new(tokio::sync::Notify::new()),
            journal_timer_at_us: u64::MAX,
            cache_full_since_us: 0,
            watchers: HashMap::new(),
            next_watch: 0,
            conns: HashMap::new(),
            ledger_dirs: config.ledger_dirs.clone(),
            read_only: false,
            state,
            metrics,
            store,
            flushing: false,
            gc_request: None,
            flush_requested: false,
            last_flush: Instant::now(),
            flush_threshold_bytes: config
                .flush_threshold_bytes
                .min(config.write_cache_bytes / 2),
            flush_interval: config.flush_interval,
            flush_rate_ceiling: config.flush_rate_bytes_per_sec,
            journal_dir: journal_dir.clone(),
            run_waits: RunWaits::new(
                config.read_ahead.batch_entries as u64,
                2 * config.read_ahead.batch_entries.max(1),
            ),
            no_conn,
            stats: ShardStats::default(),
        };
        Ok((shard, flush_done))
    }

    /// The journal ring's eventfd (io_uring), or `None` (psync completes inside `submit`).
    pub fn journal_eventfd(&self) -> Option<RawFd> {
        self.journal.storage().eventfd()
    }

    /// For the journal driver: how long to sleep, at most `idle`, before the open group's
    /// deadline; remembered so that `drive` wakes the driver when a group needs it sooner.
    pub fn arm_journal_timer(&mut self, idle: Duration) -> Duration {
        let now = self.now_us();
        let at = self
            .journal
            .next_deadline_us()
            .unwrap_or(u64::MAX)
            .min(now.saturating_add(idle.as_micros() as u64));
        self.journal_timer_at_us = at;
        Duration::from_micros(at.saturating_sub(now))
    }

    /// What wakes the journal driver before its timer (`arm_journal_timer`).
    pub fn journal_timer(&self) -> Rc<tokio::sync::Notify> {
        self.journal_timer.clone()
    }

    /// The shard's clock, shared with the journal (its group timings) and the metrics.
    fn now_us(&self) -> u64 {
        now_us()
    }

    pub fn register_connection(&mut self, conn: &Rc<Conn>) {
        self.conns.insert(conn.id, Rc::downgrade(conn));
    }

    pub fn forget_connection(&mut self, id: u64) {
        self.conns.remove(&id);
    }

    /// Entry point for a frame read from one of this shard's connections.
    pub fn dispatch(&mut self, frame: RequestFrame, conn: &Rc<Conn>) {
        self.stats.requests += 1;
        let header = frame.reply_header();
        let (op, since) = (op_of(&frame.request), now_us());
        self.m().started(op);
        if op == Op::AddEntry {
            self.m().stage_between(Stage::Decode, conn.read_at(), since);
        }
        let local = |conn: &Rc<Conn>| Responder::Local {
            conn: conn.clone(),
            header,
            op,
            since,
        };
        let supported = frame.header.is_version_supported();
        let ledger = match &frame.request {
            Request::Auth(_) => {
                let reply = Response::Auth {
                    status: StatusCode::EOK,
                    message: AuthMessage::auth_disabled(),
                };
                return self.respond(local(conn), reply);
            }
            Request::StartTls => {
                // TLS is not configured: the Java bookie refuses with EBADREQ.
                let reply = Response::Error {
                    operation: OperationType::StartTls,
                    status: StatusCode::EBADREQ,
                };
                return self.respond(local(conn), reply);
            }
            _ if !supported => {
                let reply = frame.request.error_response(StatusCode::EBADVERSION);
                return self.respond(local(conn), reply);
            }
            Request::Unsupported { .. } => {
                let reply = frame.request.error_response(StatusCode::EBADREQ);
                return self.respond(local(conn), reply);
            }
            Request::GetBookieInfo { requested } => {
                let reply = bookie_info(&self.ledger_dirs, requested.unwrap_or(0));
                return self.respond(local(conn), reply);
            }
            Request::AddEntry { ledger_id, .. }
            | Request::ReadEntry { ledger_id, .. }
            | Request::BatchReadEntry { ledger_id, .. }
            | Request::WriteLac { ledger_id, .. }
            | Request::ReadLac { ledger_id, .. }
            | Request::ForceLedger { ledger_id }
            | Request::GetListOfEntriesOfLedger { ledger_id } => *ledger_id,
        };
        let owner = shard_of(ledger, self.shards);
        if owner == self.id {
            return self.handle(frame, local(conn));
        }
        self.stats.remote_requests += 1;
        let remote = RemoteRequest {
            origin: self.id,
            conn_id: conn.id,
            frame,
            since,
            conn: conn.shared().clone(),
        };
        if let Err(err) = self.peers[owner].requests.try_send(remote) {
            self.stats.rejected_busy += 1;
            let frame = match err {
                mpsc::error::TrySendError::Full(r) | mpsc::error::TrySendError::Closed(r) => {
                    r.frame
                }
            };
            let reply = frame.request.error_response(StatusCode::ETOOMANYREQUESTS);
            self.respond(local(conn), reply);
        }
    }

    /// A request from another shard about one of ours.
    pub fn handle_remote(&mut self, request: RemoteRequest) {
        self.m().stage(Stage::CrossShardQueue, request.since);
        let to = Responder::Remote {
            origin: request.origin,
            conn_id: request.conn_id,
            shared: request.conn,
            header: request.frame.reply_header(),
            op: op_of(&request.frame.request),
            since: request.since,
        };
        self.handle(request.frame, to);
    }

    /// A reply from another shard for one of our connections.
    pub fn deliver_remote_reply(&mut self, reply: RemoteReply) {
        if reply.timing != 0 {
            let (op, since) = crate::admin::metrics::unpack_timing(reply.timing);
            self.record(op, since, &reply.frame.response);
            self.m().stage(Stage::CacheMissRead, since);
        }
        if let Some(conn) = self.conns.get(&reply.conn_id).and_then(Weak::upgrade) {
            conn.send_timed(reply.frame, reply.ready_at);
        }
    }

    /// Applies the ledger rules to a request this shard owns.
    fn handle(&mut self, frame: RequestFrame, to: Responder) {
        if to.is_gone() && read_only_request(&frame.request) {
            // Nobody will read the answer: drop the work at once.
            return;
        }
        let v3 = !frame.header.is_v2();
        let now = now_ms();
        let decision = match &frame.request {
            Request::AddEntry {
                ledger_id,
                entry_id,
                master_key,
                body,
                recovery,
                ..
            } => {
                if self.read_only || !self.state.accepts_add(high_priority(&frame)) {
                    Decision::Reply(frame.request.error_response(StatusCode::EREADONLY))
                } else {
                    self.m()
                        .write_bytes
                        .fetch_add(body.len() as u64, std::sync::atomic::Ordering::Relaxed);
                    let started = now_us();
                    let d = self.table.add(
                        *ledger_id,
                        *entry_id,
                        master_key,
                        body.clone(),
                        *recovery,
                        now,
                    );
                    self.m().stage(Stage::WriteCache, started);
                    self.wake_watchers(*ledger_id);
                    d
                }
            }
            Request::ReadEntry {
                ledger_id,
                entry_id,
                master_key,
                flag,
                previous_lac,
                time_out,
            } => {
                let d = self.table.read(
                    *ledger_id,
                    *entry_id,
                    *flag,
                    master_key.as_ref(),
                    *previous_lac,
                    *time_out,
                    v3,
                );
                if *flag == Some(ReadFlag::FenceLedger) {
                    self.wake_watchers(*ledger_id);
                }
                if let Decision::WaitLac {
                    ledger,
                    previous_lac,
                    timeout_ms,
                } = d
                {
                    return self.watch(ledger, *entry_id, previous_lac, *flag, timeout_ms, to);
                }
                d
            }
            Request::BatchReadEntry {
                ledger_id,
                start_entry_id,
                request_id,
                max_count,
                max_size,
                fence,
                master_key,
            } => self.table.batch_read(
                *ledger_id,
                *start_entry_id,
                *request_id,
                *max_count,
                *max_size,
                *fence,
                master_key.as_ref(),
            ),
            Request::WriteLac {
                ledger_id,
                master_key,
                body,
                ..
            } => {
                if self.read_only || !self.state.accepts_write_lac() {
                    Decision::Reply(frame.request.error_response(StatusCode::EREADONLY))
                } else {
                    let d = self
                        .table
                        .write_lac(*ledger_id, master_key, body.clone(), now);
                    self.wake_watchers(*ledger_id);
                    d
                }
            }
            Request::ReadLac { ledger_id } => self.table.read_lac(*ledger_id),
            Request::ForceLedger { ledger_id } => self.table.force_ledger(*ledger_id),
            Request::GetListOfEntriesOfLedger { ledger_id } => self.table.list_entries(*ledger_id),
            // Answered by `dispatch` on the connection's shard.
            Request::Auth(_)
            | Request::StartTls
            | Request::GetBookieInfo { .. }
            | Request::Unsupported { .. } => {
                Decision::Reply(frame.request.error_response(StatusCode::EBADREQ))
            }
        };
        self.carry_out(decision, &frame.request, to);
    }

    fn carry_out(&mut self, decision: Decision, request: &Request, to: Responder) {
        match decision {
            Decision::Reply(reply) => self.respond(to, reply),
            Decision::ReadDisk(read) => self.read_disk(read, to),
            Decision::Journal {
                master_key,
                record,
                reply,
            } => {
                let mut records: Vec<JournalRecord> = Vec::new();
                let mut last = None;
                for r in [master_key, record].into_iter().flatten() {
                    if !records.is_empty() || !self.blocked.is_empty() {
                        records.push(r);
                        continue;
                    }
                    match self.append(&r) {
                        Ok(lsn) => last = Some(lsn),
                        Err(StatusCode::ETOOMANYREQUESTS) => records.push(r),
                        Err(status) => {
                            return self.respond(to, request.error_response(status));
                        }
                    }
                }
                if !records.is_empty() {
                    // Every journal buffer is busy: keep the order, stop reading sockets.
                    self.blocked.push_back(Blocked {
                        at: now_us(),
                        records,
                        to,
                        reply,
                    });
                    return;
                }
                match last {
                    Some(lsn) => self.pending.push_back(Pending {
                        at: now_us(),
                        lsn,
                        to,
                        reply,
                    }),
                    None => self.answer(to, reply),
                }
            }
            Decision::AfterDurable(reply) => {
                let lsn = Lsn(self.journal.next_lsn().0 - 1);
                if lsn <= self.journal.durable_lsn() {
                    self.respond(to, reply);
                } else {
                    self.pending.push_back(Pending {
                        at: now_us(),
                        lsn,
                        to,
                        reply: Answer::Now(reply),
                    });
                }
            }
            Decision::WaitLac { .. } => {
                unreachable!("long polls are registered by handle")
            }
        }
    }

    fn answer(&mut self, to: Responder, answer: Answer) {
        match answer {
            Answer::Now(reply) => self.respond(to, reply),
            Answer::Disk(read) => self.read_disk(read, to),
        }
    }

    /// Hands a cache miss to the shard's reader thread (bounded queue: full means busy).
    fn read_disk(&mut self, read: DiskRead, to: Responder) {
        self.read_disk_via(read, to, Via::Request);
    }

    /// As [`read_disk`](Self::read_disk), for a read that comes `via` a request, a run it was
    /// parked on, or a run that never landed.
    fn read_disk_via(&mut self, read: DiskRead, to: Responder, via: Via) {
        // An entry read ahead by a reader: answered here, no hop to a reader thread. When it
        // starts a sequential reader's run, the run after it is read ahead meanwhile. A miss
        // that a run in flight will bring, or that continues the last run, waits here for
        // the run (`run_waits`) instead of crossing to a reader.
        if let (
            &DiskRead::Entry {
                ledger,
                entry,
                reply_entry_id,
                max_lac,
            },
            Some(cache),
        ) = (&read, &self.store.read_cache)
        {
            let (hit, next, follows) = {
                let mut cache = cache.lock().unwrap_or_else(|p| p.into_inner());
                let (hit, next) = cache.take_and_trigger(ledger as u64, entry as u64);
                let follows = hit.is_none() && cache.follows_run(ledger as u64, entry as u64);
                (hit, next, follows)
            };
            if let Some(body) = hit {
                if let Some(next) = next {
                    self.ask_run(ledger, next);
                }
                if via != Via::Request {
                    // It waited for the device: a cache-miss read as far as its latency goes.
                    self.m().stage(Stage::CacheMissRead, to.since());
                }
                let reply = read_thread::entry_reply(ledger, reply_entry_id, max_lac, Some(body));
                self.respond(to, reply);
                return;
            }
            let may_park = entry >= 0
                && match via {
                    Via::Request => true,
                    Via::Run { end } => end.is_some_and(|end| entry as u64 >= end),
                    Via::Late => false,
                };
            if may_park {
                let (l, e) = (ledger as u64, entry as u64);
                let parked = match self.run_waits.park(l, e, (read, to)) {
                    Ok(()) => Ok(()),
                    Err(back) if follows && self.ask_run(ledger, e) => {
                        self.run_waits.park(l, e, back)
                    }
                    Err(back) => Err(back),
                };
                match parked {
                    Ok(()) => {
                        self.m().read_ahead_waits.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                    Err((read, to)) => return self.send_to_reader(read, to),
                }
            }
        }
        self.send_to_reader(read, to);
    }

    /// Queues `read` for the shard's readers (full: ETOOMANYREQUESTS).
    fn send_to_reader(&mut self, read: DiskRead, to: Responder) {
        let job = self.read_job(read, &to);
        if let Err(err) = self.store.read_jobs.try_send(job) {
            self.stats.rejected_busy += 1;
            let job = match err {
                crossbeam_channel::TrySendError::Full(j)
                | crossbeam_channel::TrySendError::Disconnected(j) => j,
            };
            let reply = read_thread::error_reply(&job.read, StatusCode::ETOOMANYREQUESTS);
            self.respond(to, reply);
        }
    }

    /// Asks a reader for the run of `ledger` from `start` (into the read-ahead cache), unless
    /// it is in flight already; true when it is in flight now. Best effort: a full queue means
    /// the readers have real reads to do.
    fn ask_run(&mut self, ledger: i64, start: u64) -> bool {
        if self.run_waits.in_flight(ledger as u64, start) {
            return true;
        }
        let job = ReadJob {
            timing: 0,
            view: self.store.view.clone(),
            read: DiskRead::Prefetch {
                ledger,
                entry: start as i64,
                report: true,
            },
            // The report goes to this shard, which parks the reads, whoever holds their
            // connections; the run itself is for no connection.
            origin: self.id,
            conn_id: 0,
            conn: self.no_conn.clone(),
            header: ResponseHeader::V2 { version: 2 },
        };
        if self.store.read_jobs.try_send(job).is_err() {
            return false;
        }
        self.run_waits.asked(ledger as u64, start, now_us());
        true
    }

    /// A reader's report of a run asked by [`ask_run`](Self::ask_run): the reads parked on it
    /// are answered from the read-ahead cache, or go on to a reader ([`Via::Run`]: only a read
    /// past the run may wait again, for the next run).
    pub fn run_landed(&mut self, landed: RunLanded) {
        let reads = self
            .run_waits
            .landed(landed.ledger as u64, landed.start as u64);
        let via = Via::Run {
            end: (landed.entries > 0).then_some(landed.start as u64 + landed.entries as u64),
        };
        for (read, to) in reads {
            self.read_disk_via(read, to, via);
        }
    }

    /// Reads parked on a run that has not landed in `RUN_WAIT_DEADLINE` go to a reader.
    fn expire_run_waits(&mut self) {
        if self.run_waits.is_empty() {
            return;
        }
        let deadline = now_us().saturating_sub(RUN_WAIT_DEADLINE.as_micros() as u64);
        for (read, to) in self.run_waits.expired(deadline) {
            self.read_disk_via(read, to, Via::Late);
        }
    }

    /// A reader thread's job for `read`, replying to `to`'s connection.
    fn read_job(&self, read: DiskRead, to: &Responder) -> ReadJob {
        let (origin, conn_id, conn_state, header, timing) = match to {
            Responder::Local {
                conn,
                header,
                op,
                since,
            } => (
                self.id,
                conn.id,
                conn.shared().clone(),
                *header,
                crate::admin::metrics::pack_timing(*op, *since),
            ),
            Responder::Remote {
                origin,
                conn_id,
                shared,
                header,
                op,
                since,
            } => (
                *origin,
                *conn_id,
                shared.clone(),
                *header,
                crate::admin::metrics::pack_timing(*op, *since),
            ),
        };
        ReadJob {
            timing,
            view: self.store.view.clone(),
            read,
            origin,
            conn_id,
            conn: conn_state,
            header,
        }
    }

    /// Starts a flush of the write cache when it is half full or old enough.
    fn maybe_flush(&mut self) {
        if self.flushing || self.read_only {
            return;
        }
        let cached = self.table.cached_bytes();
        let due = cached >= self.flush_threshold_bytes
            || (cached > 0 && self.last_flush.elapsed() >= self.flush_interval)
            || self.table.has_pending_deletes()
            || self.gc_request.is_some()
            || (self.flush_requested && cached > 0);
        if cached == 0 {
            self.flush_requested = false;
        }
        if !due {
            return;
        }
        let mark = self.journal.next_lsn().0;
        let filled_in = self.last_flush.elapsed();
        if let Some(batch) = self.table.freeze(mark) {
            self.flushing = true;
            self.flush_requested = false;
            self.last_flush = Instant::now();
            self.store.flush_rate.store(
                flush_rate(cached, filled_in, self.flush_rate_ceiling),
                std::sync::atomic::Ordering::Relaxed,
            );
            let mut sent = self.store.flush_jobs.send(FlushJob::Flush(batch)).is_ok();
            if let Some(req) = self.gc_request.take() {
                sent &= self.store.flush_jobs.send(FlushJob::Gc(req)).is_ok();
            }
            if !sent {
                log::error!("shard {}: the flush thread is gone; read-only", self.id);
                self.set_failed("the flush thread is gone");
            }
        }
    }

    /// Garbage collection found these ledgers deleted from the cluster: drop them here (the
    /// next flush persists the tombstones). Returns how many this shard held.
    pub fn delete_ledgers(&mut self, ids: &[i64]) -> usize {
        let deleted = ids.iter().filter(|&&id| self.table.delete(id)).count();
        if deleted > 0 {
            log::info!("shard {}: gc: {deleted} deleted ledgers dropped", self.id);
            self.metrics.shards[self.id]
                .gc
                .deleted_ledgers
                .fetch_add(deleted as u64, std::sync::atomic::Ordering::Relaxed);
        }
        self.maybe_flush();
        deleted
    }

    /// Asks for a garbage collection after the next flush.
    /// Flushes the write cache as soon as no flush is running.
    pub fn request_flush(&mut self) {
        self.flush_requested = true;
        self.maybe_flush();
    }

    pub fn request_gc(&mut self, req: GcRequest) {
        self.gc_request = Some(self.gc_request.unwrap_or_default().merge(req));
        self.maybe_flush();
    }

    /// A flush finished: its entries are served from ledger storage now, and the journal up to
    /// its mark is no longer needed (checkpoint order: entry log, index, metadata, manifest with
    /// the mark, all durable — then the journal is trimmed).
    pub fn flush_done(&mut self, event: StoreEvent) {
        match event {
            StoreEvent::View(view) => self.store.view = view,
            StoreEvent::Flushed { mark, view, stats } => {
                self.flushing = false;
                log::debug!("shard {}: flushed {stats:?}, mark {mark}", self.id);
                self.store.view = view;
                if let Some(entries) = self.table.flush_done() {
                    let _ = self.store.flush_jobs.send(FlushJob::Dispose(entries));
                }
                self.unblocked.notify_waiters();
                if let Err(err) = self.journal.trim(Lsn(mark)) {
                    log::error!("shard {}: journal trim failed: {err}; read-only", self.id);
                    self.set_failed("journal trim failed");
                }
                let trash = self.journal.take_trash();
                self.store
                    .reclaim
                    .delete(trash.iter().map(|n| self.journal_dir.join(n)));
            }
            StoreEvent::Failed(err) => {
                self.flushing = false;
                log::error!("shard {}: {err}; the shard is read-only now", self.id);
                self.set_failed("ledger storage failed");
            }
        }
    }

    fn append(&mut self, record: &JournalRecord) -> Result<Lsn, StatusCode> {
        let mut header = [0u8; HEADER_MAX];
        let (n, rest) = record.encode(&mut header);
        let now = self.now_us();
        match self.journal.append_parts(&[&header[..n], rest], now) {
            Ok(lsn) => Ok(lsn),
            Err(AppendError::Backpressure) => Err(StatusCode::ETOOMANYREQUESTS),
            Err(AppendError::TooLarge { .. }) => Err(StatusCode::EBADREQ),
            Err(AppendError::Stopped(_)) => {
                self.set_failed("journal stopped");
                Err(StatusCode::EIO)
            }
        }
    }

    fn respond(&mut self, to: Responder, reply: Response) {
        match to {
            Responder::Local {
                conn,
                header,
                op,
                since,
            } => {
                self.record(op, since, &reply);
                let ready_at = if op == Op::AddEntry { now_us() } else { 0 };
                conn.send_timed(
                    ResponseFrame {
                        header,
                        response: reply,
                    },
                    ready_at,
                )
            }
            Responder::Remote {
                origin,
                conn_id,
                header,
                op,
                since,
                ..
            } => {
                self.record(op, since, &reply);
                let frame = ResponseFrame {
                    header,
                    response: reply,
                };
                let ready_at = if op == Op::AddEntry { now_us() } else { 0 };
                // The origin shard only stops at process exit.
                let _ = self.peers[origin].replies.send(RemoteReply {
                    conn_id,
                    frame,
                    timing: 0,
                    ready_at,
                });
            }
        }
    }

    /// Registers a long poll; the shard's timer task expires it.
    fn watch(
        &mut self,
        ledger: i64,
        entry: i64,
        previous_lac: i64,
        flag: Option<ReadFlag>,
        timeout_ms: u64,
        to: Responder,
    ) {
        let id = self.next_watch;
        self.next_watch += 1;
        self.watchers.entry(ledger).or_default().push(Watcher {
            id,
            entry,
            previous_lac,
            flag,
            to,
        });
        let timeout = Duration::from_millis(timeout_ms);
        let shard = SHARD.with(|s| s.borrow().clone());
        if let Some(shard) = shard.and_then(|w| w.upgrade()) {
            tokio::task::spawn_local(async move {
                tokio::time::sleep(timeout).await;
                shard.borrow_mut().expire_watcher(ledger, id);
            });
        }
    }

    fn expire_watcher(&mut self, ledger: i64, id: u64) {
        let Some(list) = self.watchers.get_mut(&ledger) else {
            return;
        };
        if let Some(i) = list.iter().position(|w| w.id == id) {
            let w = list.swap_remove(i);
            if list.is_empty() {
                self.watchers.remove(&ledger);
            }
            let reply = self
                .table
                .long_poll_reply(ledger, w.entry, w.previous_lac, w.flag);
            self.respond(w.to, reply);
        }
    }

    /// Answers the long polls whose wait is over (the LAC passed, or the ledger was fenced).
    fn wake_watchers(&mut self, ledger: i64) {
        let Some(l) = self.table.get(ledger) else {
            return;
        };
        let (lac, fenced) = (l.lac, l.fenced);
        let Some(list) = self.watchers.remove(&ledger) else {
            return;
        };
        let (ready, waiting): (Vec<Watcher>, Vec<Watcher>) = list
            .into_iter()
            .partition(|w| lac > w.previous_lac || fenced);
        if !waiting.is_empty() {
            self.watchers.insert(ledger, waiting);
        }
        for w in ready {
            let reply = self
                .table
                .long_poll_reply(ledger, w.entry, w.previous_lac, w.flag);
            self.respond(w.to, reply);
        }
    }

    /// Makes journal progress and sends the replies that became durable.
    pub fn drive(&mut self) {
        let passes = if self.driver == DriverKind::Psync {
            4
        } else {
            1
        };
        for _ in 0..passes {
            let now = self.now_us();
            if let Err(err) = self.journal.tick(now, true) {
                if !self.read_only {
                    log::error!("shard {}: {err}; the shard is read-only now", self.id);
                }
                self.set_failed("journal write failed");
                break;
            }
            if !self.journal.has_pending() {
                break;
            }
        }
        self.append_blocked();
        self.expire_run_waits();
        if let Some(at) = self.journal.next_deadline_us() {
            if at < self.journal_timer_at_us {
                self.journal_timer_at_us = at;
                self.journal_timer.notify_one();
            }
        }
        // Readers hold back while this journal has records to make durable (disk_share.rs).
        self.store
            .disk_share
            .journal_waiting(self.id, self.journal.has_pending());
        let durable = self.journal.durable_lsn();
        while self.pending.front().is_some_and(|p| p.lsn <= durable) {
            let p = self.pending.pop_front().expect("front");
            self.m().journal_add(p.at);
            self.m().stage(Stage::Journal, p.at);
            if p.to.op() == Op::AddEntry {
                self.record_journal_steps(p.at, p.lsn);
            }
            self.answer(p.to, p.reply);
        }
        self.maybe_flush();
        self.note_cache_full();
        self.publish_gauges();
        if self.read_only && self.journal.stopped().is_some() {
            // Nothing pending will ever be durable: fail it rather than hang the clients.
            while let Some(p) = self.pending.pop_front() {
                let status = StatusCode::EIO;
                let reply = match p.reply {
                    Answer::Disk(read) => read_thread::error_reply(&read, status),
                    Answer::Now(Response::AddEntry {
                        ledger_id,
                        entry_id,
                        ..
                    }) => Response::AddEntry {
                        status,
                        ledger_id,
                        entry_id,
                    },
                    Answer::Now(other) => Response::Error {
                        operation: other.operation(),
                        status,
                    },
                };
                self.respond(p.to, reply);
            }
        }
    }

    /// Records each episode of a full write cache (`Stage::WriteCacheFull`): its adds wait
    /// in the sockets, before any per-add stage.
    fn note_cache_full(&mut self) {
        // A read-only shard flushes nothing more: it must not pace anyone's reads.
        let permille = if self.read_only {
            0
        } else {
            (self.table.fill() * 1000.0).min(u32::MAX as f64) as u32
        };
        self.peers[self.id]
            .cache_fill_permille
            .store(permille, Ordering::Relaxed);
        match (self.table.is_full(), self.cache_full_since_us) {
            (true, 0) => self.cache_full_since_us = now_us().max(1),
            (false, since) if since != 0 => {
                self.m().stage(Stage::WriteCacheFull, since);
                self.cache_full_since_us = 0;
            }
            _ => {}
        }
    }

    /// An add's journal time split into its group's steps: waiting for the group's write, the
    /// write, the sync.
    fn record_journal_steps(&mut self, appended_at: u64, lsn: Lsn) {
        let Some(t) = self.journal.group_timing(lsn) else {
            return;
        };
        let m = &self.metrics.shards[self.id];
        let submitted = t.submitted_us.max(appended_at);
        m.stage_between(Stage::JournalGroupWait, appended_at, submitted);
        m.stage_between(Stage::JournalWrite, submitted, t.written_us);
        m.stage_between(Stage::JournalFsync, t.written_us, t.synced_us);
    }

    /// Appends the records that waited for a journal buffer, in order, as far as buffers allow.
    fn append_blocked(&mut self) {
        let was_blocked = !self.blocked.is_empty();
        while let Some(mut b) = self.blocked.pop_front() {
            let mut failed = None;
            let mut last = None;
            while !b.records.is_empty() {
                match self.append(&b.records[0]) {
                    Ok(lsn) => {
                        b.records.remove(0);
                        last = Some(lsn);
                    }
                    Err(StatusCode::ETOOMANYREQUESTS) => break,
                    Err(status) => {
                        failed = Some(status);
                        break;
                    }
                }
            }
            if let Some(status) = failed {
                let reply = match b.reply {
                    Answer::Disk(read) => read_thread::error_reply(&read, status),
                    Answer::Now(r) => error_like(&r, status),
                };
                self.respond(b.to, reply);
                continue;
            }
            if !b.records.is_empty() {
                // Still no buffer: the rest (and everything behind it) waits.
                self.blocked.push_front(b);
                break;
            }
            let lsn = last.unwrap_or(Lsn(self.journal.next_lsn().0 - 1));
            self.m().stage(Stage::JournalBlocked, b.at);
            self.pending.push_back(Pending {
                at: now_us(),
                lsn,
                to: b.to,
                reply: b.reply,
            });
        }
        if was_blocked && self.blocked.is_empty() {
            self.unblocked.notify_waiters();
        }
    }

    /// Whether the shard should stop reading new requests: journal buffers all busy, or the
    /// write cache at its limit.
    pub fn is_blocked(&self) -> bool {
        !self.blocked.is_empty() || self.table.is_full()
    }

    /// Past three quarters of any shard's write cache, each connection pauses 1 ms before its
    /// next read: the intake slows while the flush (a thread at a lower priority, which a busy
    /// shard starves of CPU) catches up, instead of running into a full cache that stops every
    /// connection until a whole flush completes (0.1-1 s in a closed loop, `write_cache_full`).
    /// Any shard's: a connection's adds go to every shard's ledgers.
    pub fn admission_delay(&self) -> Option<Duration> {
        let fullest = self
            .peers
            .iter()
            .map(|p| p.cache_fill_permille.load(Ordering::Relaxed))
            .max()
            .unwrap_or(0);
        (fullest >= 750).then_some(Duration::from_millis(1))
    }

    /// Woken when [`Shard::is_blocked`] may have turned false.
    pub fn unblocked(&self) -> Rc<tokio::sync::Notify> {
        self.unblocked.clone()
    }

    /// Counters, with the current ledger count and write-cache size.
    pub fn stats(&self) -> ShardStats {
        ShardStats {
            ledgers: self.table.len(),
            write_cache_bytes: self.table.cached_bytes() + self.table.frozen_bytes(),
            ..self.stats.clone()
        }
    }

    /// This shard's metrics block.
    #[inline]
    fn m(&self) -> &ShardMetrics {
        &self.metrics.shards[self.id]
    }

    /// Records an answered request (latency by kind and outcome, bytes read).
    fn record(&self, op: Op, since: u64, reply: &Response) {
        let status = reply.status();
        let m = self.m();
        m.finished(
            op,
            since,
            status == StatusCode::EOK,
            status == StatusCode::ETOOMANYREQUESTS,
        );
        if let Response::ReadEntry {
            body: Some(body), ..
        } = reply
        {
            m.read_bytes
                .fetch_add(body.len() as u64, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Gauges and journal counters for the metrics (plain stores, no lock).
    fn publish_gauges(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        self.store
            .cache_pressure
            .store(self.table.under_pressure(), Relaxed);
        let m = self.m();
        let j = self.journal.stats();
        m.journal_queue
            .store((self.pending.len() + self.blocked.len()) as i64, Relaxed);
        m.write_cache_bytes.store(
            (self.table.cached_bytes() + self.table.frozen_bytes()) as i64,
            Relaxed,
        );
        m.ledgers.store(self.table.len() as i64, Relaxed);
        m.read_ahead_parked
            .store(self.run_waits.parked() as i64, Relaxed);
        m.journal_records.store(j.records, Relaxed);
        m.journal_groups.store(j.groups, Relaxed);
        m.journal_syncs.store(j.syncs, Relaxed);
        m.journal_bytes.store(j.bytes_written, Relaxed);
        m.journal_flush_max_wait.store(j.flushes_max_wait, Relaxed);
        m.journal_refused_no_buffer
            .store(j.refused_no_buffer, Relaxed);
        m.journal_refused_no_segment
            .store(j.refused_no_segment, Relaxed);
        m.journal_flush_bytes.store(j.flushes_bytes, Relaxed);
        m.journal_flush_entries.store(j.flushes_records, Relaxed);
        m.journal_flush_queue_empty
            .store(j.flushes_queue_empty, Relaxed);
    }

    /// The shard's journal or ledger storage failed: no more writes here, and the bookie is
    /// read-only until restarted.
    fn set_failed(&mut self, why: &str) {
        self.read_only = true;
        self.state
            .set_io_failure(&format!("shard {}: {why}", self.id));
    }

    /// The ids of the ledgers this shard holds (HTTP list_ledgers).
    pub fn ledger_ids(&self) -> Vec<i64> {
        self.table.ids().collect()
    }

    /// Closes the open group, waits until everything appended is durable and seals the
    /// journal's active segment (shutdown: the next start has nothing to repair).
    pub fn flush(&mut self) {
        if let Err(err) = self.journal.close() {
            log::error!("shard {}: final journal flush failed: {err}", self.id);
        }
        self.drive();
    }
}

/// How a connection reaches its shard (`conn` does not know the shard).
impl RequestSink for Shard {
    fn dispatch(&mut self, frame: RequestFrame, conn: &Rc<Conn>) {
        Shard::dispatch(self, frame, conn)
    }

    fn drive(&mut self) {
        Shard::drive(self)
    }

    fn is_blocked(&self) -> bool {
        Shard::is_blocked(self)
    }

    fn unblocked(&self) -> Rc<tokio::sync::Notify> {
        Shard::unblocked(self)
    }

    fn admission_delay(&self) -> Option<Duration> {
        Shard::admission_delay(self)
    }

    fn forget_connection(&mut self, id: u64) {
        Shard::forget_connection(self, id)
    }

    fn replies_written(&self, ready_at_us: &[u64]) {
        let (m, now) = (self.m(), now_us());
        for &ready in ready_at_us {
            m.stage_between(Stage::Reply, ready, now);
        }
    }
}

thread_local! {
    /// The shard of this thread, for tasks spawned from inside a borrow of it.
    pub static SHARD: RefCell<Option<Weak<RefCell<Shard>>>> = const { RefCell::new(None) };
}

/// GET_BOOKIE_INFO: capacity and free space of the ledger directory's file system.
fn bookie_info(dirs: &[PathBuf], requested: i64) -> Response {
    const TOTAL_DISK_CAPACITY: i64 = 0x01;
    const FREE_DISK_SPACE: i64 = 0x02;
    // Over every ledger directory, each file system once (Java's `getTotalFreeSpace`).
    let Ok(space) = crate::admin::readonly::ledger_space(dirs) else {
        return Response::GetBookieInfo {
            status: StatusCode::EIO,
            total_disk_capacity: None,
            free_disk_space: None,
        };
    };
    let total = i64::try_from(space.total_bytes).unwrap_or(i64::MAX);
    let free = i64::try_from(space.usable_bytes).unwrap_or(i64::MAX);
    Response::GetBookieInfo {
        status: StatusCode::EOK,
        total_disk_capacity: (requested & TOTAL_DISK_CAPACITY != 0).then_some(total),
        free_disk_space: (requested & FREE_DISK_SPACE != 0).then_some(free),
    }
}

/// The journal ring's eventfd, for `AsyncFd`.
pub struct EventFd(pub RawFd);

impl AsRawFd for EventFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

impl EventFd {
    /// Reads (resets) the counter; EAGAIN when nothing was signalled.
    pub fn drain(&self) {
        let mut value = 0u64;
        // SAFETY: reads 8 bytes into a u64 from a non-blocking eventfd.
        unsafe {
            libc::read(self.0, (&mut value as *mut u64).cast(), 8);
        }
    }
}

/// `reply` turned into the same kind of reply with `status` (and no data).
fn error_like(reply: &Response, status: StatusCode) -> Response {
    match *reply {
        Response::AddEntry {
            ledger_id,
            entry_id,
            ..
        } => Response::AddEntry {
            status,
            ledger_id,
            entry_id,
        },
        Response::ReadEntry {
            ledger_id,
            entry_id,
            ..
        } => Response::ReadEntry {
            status,
            ledger_id,
            entry_id,
            body: None,
            max_lac: None,
            lac_update_timestamp: None,
        },
        Response::WriteLac { ledger_id, .. } => Response::WriteLac { status, ledger_id },
        ref other => Response::Error {
            operation: other.operation(),
            status,
        },
    }
}

/// The slowest pace a paced flush is given, bytes per second.
const FLUSH_RATE_FLOOR: u64 = 16 << 20;

/// The pace for a flush of `bytes` that came in over `filled_in`: twice their arrival rate, so
/// the flush takes about half as long as the filling did, never below [`FLUSH_RATE_FLOOR`] or
/// above `ceiling` (0: unpaced).
fn flush_rate(bytes: usize, filled_in: Duration, ceiling: u64) -> u64 {
    if ceiling == 0 {
        return 0;
    }
    let secs = filled_in.as_secs_f64().max(1e-3);
    let wanted = (2.0 * bytes as f64 / secs) as u64;
    wanted.clamp(FLUSH_RATE_FLOOR.min(ceiling), ceiling)
}

#[cfg(test)]
mod flush_rate_tests {
    use super::*;

    #[test]
    fn twice_the_arrival_rate_within_bounds() {
        let mib = 1u64 << 20;
        // 128 MiB in 5.5 s: ~46.5 MiB/s.
        let r = flush_rate(128 << 20, Duration::from_millis(5500), 384 * mib);
        assert!((46 * mib..48 * mib).contains(&r), "{}", r / mib);
        // A trickle flushed by the interval: the floor.
        assert_eq!(
            flush_rate(1 << 20, Duration::from_secs(60), 384 * mib),
            16 * mib
        );
        // A burst filled in 100 ms: the ceiling.
        assert_eq!(
            flush_rate(128 << 20, Duration::from_millis(100), 384 * mib),
            384 * mib
        );
        // A ceiling below the floor wins; 0 stays unpaced.
        assert_eq!(
            flush_rate(1 << 20, Duration::from_secs(60), 8 * mib),
            8 * mib
        );
        assert_eq!(flush_rate(128 << 20, Duration::from_secs(1), 0), 0);
    }
}
