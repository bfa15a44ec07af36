//! A shard: one thread, pinned to a core, owning a share of the ledgers (by hash of the ledger
//! id), its own journal and io_uring, and the connections the kernel hands its listener.
//!
//! Everything a shard does runs on its thread, in a tokio current-thread runtime: decoding a
//! frame, applying the ledger rules, appending to the journal, noticing the sync's completion
//! (through the ring's eventfd) and encoding the reply. The only hand-offs are for requests about
//! another shard's ledgers: they cross a bounded queue to the owner, and the reply comes back
//! through the origin shard's reply queue (unbounded, but it only carries replies to requests
//! the bounded queue admitted). A full queue is answered with ETOOMANYREQUESTS.

mod cold_read;
mod commit;
pub mod core;
pub mod fenced_deleted;
mod flush;
mod gauges;
mod long_poll;
pub mod mailbox;
mod remote;
mod slowdown;

pub use commit::EventFd;
use long_poll::Watcher;

use std::cell::RefCell;
use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::rc::{Rc, Weak};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use net::{
    AuthMessage, OperationType, ReadFlag, Request, RequestFrame, Response, ResponseFrame,
    ResponseHeader, StatusCode,
};
use storage::{DriverKind, RealStorage, Storage};
use tokio::sync::mpsc;

use crate::admin::metrics::{ms_at, now_ms, now_us, Metrics, Op, ShardMetrics, Stage};
use crate::admin::readonly::BookieState;
use crate::config::BookieConfig;
use crate::conn::{Conn, ConnShared, RequestSink};
use crate::gc::reclaim::Reclaimer;
use crate::read::ahead::ReadAhead;
use crate::read::disk_share::DiskShare;
use crate::read::read_thread;
use crate::shard::mailbox::{
    FlushJob, GcRequest, ReadJob, RemoteReply, RemoteRequest, RunLanded, ShardHandle, StoreEvent,
};
use crate::store::ledger::{Answer, Decision, DiskRead, LedgerTable};
use crate::store::ledger_storage::{self, LedgerStorageLink};
use core::{Committed, LongPoll, ShardCore};

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
    /// The ledger table, the journal and the replies waiting for durability (`core`).
    core: ShardCore<RealStorage, Responder>,
    driver: DriverKind,
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
    /// bookie-wide state is read-only for good, see `admin/readonly.rs`).
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
    /// `maxBatchReadSize`: the cap on a batch read's `maxSize`.
    max_batch_read_bytes: i64,
    /// This shard's journal directory (trimmed files are deleted by path, off this thread).
    journal_dir: PathBuf,
    /// The fastest a flush may write (`flush_rate_bytes_per_sec`; 0: unpaced).
    flush_rate_ceiling: u64,
    /// The read-ahead: its cache, the runs in flight and the reads parked on them, with
    /// where they answer (`crate::read::ahead`).
    read_ahead: ReadAhead<(DiskRead, Responder)>,
    /// The connection state of read-ahead runs, which reply to nobody.
    no_conn: Arc<ConnShared>,
    pub stats: ShardStats,
}

impl Shard {
    /// Opens the shard's journal (replaying it into the ledger table).
    pub fn open(
        id: usize,
        config: &BookieConfig,
        peers: Arc<Vec<ShardHandle>>,
        state: Arc<BookieState>,
        (metrics, reclaim, disk): (Arc<Metrics>, Reclaimer, Arc<DiskShare>),
        legacy: Option<Arc<crate::store::takeover::Legacy>>,
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
            legacy.clone(),
        )?;
        let mark = recovered.journal_mark;
        let mut table = LedgerTable::new(config.write_cache_bytes);
        let deleted: std::collections::BTreeSet<u64> = recovered
            .ledgers
            .iter()
            .filter(|m| m.deleted)
            .map(|m| m.ledger)
            .collect();
        table.load(recovered.ledgers);
        if let Some(legacy) = &legacy {
            // Ledgers taken over from a Java bookie: what its index files say, under what this
            // shard's own storage says of them.
            let mut adopted = 0usize;
            for (ledger, java) in crate::store::takeover::owned(legacy, id, peers.len(), &deleted) {
                table.adopt(ledger as i64, java);
                adopted += 1;
            }
            log::info!("shard {id}: {adopted} ledgers taken over from the Java bookie's files");
        }
        let core = ShardCore::open(
            id,
            table,
            storage,
            config.journal.clone(),
            mark,
            &journal_dir,
            now_ms(),
        )?;
        let report = core.journal.recovery_report();
        log::info!(
            "shard {id}: journal {} ({}) replayed {} records from mark {mark}; {} ledgers; {:.0} ms{}",
            journal_dir.display(),
            driver.name(),
            report.records_replayed,
            core.table.len(),
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
            core,
            driver,
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
            max_batch_read_bytes: config.max_batch_read_bytes,
            flush_rate_ceiling: config.flush_rate_bytes_per_sec,
            journal_dir: journal_dir.clone(),
            // One read-ahead cache per shard (`dbStorage_readAheadCacheMaxSizeMb` shared out).
            read_ahead: ReadAhead::new(
                config.read_ahead.cache_bytes / config.shard_count().max(1),
                config.read_ahead.run_entries(),
            ),
            no_conn,
            stats: ShardStats::default(),
        };
        shard.publish_view();
        Ok((shard, flush_done))
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

    /// Applies the ledger rules to a request this shard owns.
    fn handle(&mut self, frame: RequestFrame, to: Responder) {
        if to.is_gone() && read_only_request(&frame.request) {
            // Nobody will read the answer: drop the work at once.
            return;
        }
        let v3 = !frame.header.is_v2();
        // One clock read for the LAC's wall-clock time and the write cache's stage.
        let handled_at = now_us();
        let now = ms_at(handled_at);
        let request = &frame.request;
        let writable = !self.read_only
            && match request {
                Request::AddEntry { .. } => self.state.accepts_add(high_priority(&frame)),
                Request::WriteLac { .. } => self.state.accepts_write_lac(),
                _ => true,
            };
        match request {
            Request::AddEntry { body, .. } if writable => {
                self.m()
                    .write_bytes
                    .fetch_add(body.len() as u64, std::sync::atomic::Ordering::Relaxed);
                slowdown::add();
            }
            Request::ReadEntry { .. } => slowdown::read(),
            _ => {}
        }
        let decision = self
            .core
            .decide(request, v3, now, writable, self.max_batch_read_bytes);
        if writable && matches!(request, Request::AddEntry { .. }) {
            self.m().stage(Stage::WriteCache, handled_at);
        }
        if let (Request::ReadEntry { .. }, Decision::Reply(Response::ReadEntry { status, .. })) =
            (request, &decision)
        {
            // Answered from the write cache (or refused by the ledger's rules): a read of
            // ledger storage as Java's `bookie_read_entry` counts it.
            self.m().read_entry(to.since(), *status == StatusCode::EOK);
        }
        if let Some(ledger) = ShardCore::<RealStorage, Responder>::woken_ledger(request, writable) {
            self.wake_watchers(ledger);
        }
        if let Some(poll) = LongPoll::of(&decision, request) {
            return self.watch(poll, to);
        }
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
                let committed = self.core.commit(master_key, record, reply, to, now_us());
                if self.core.take_stopped() {
                    self.set_failed("journal stopped");
                }
                match committed {
                    Committed::Waiting => {}
                    Committed::Now(to, reply) => self.answer(to, reply),
                    Committed::Failed(to, status) => {
                        self.respond(to, request.error_response(status))
                    }
                }
            }
            Decision::AfterDurable(reply) => {
                if let Some((to, reply)) = self.core.after_durable(reply, to, now_us()) {
                    self.respond(to, reply);
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

    fn respond(&mut self, to: Responder, reply: Response) {
        match to {
            Responder::Local {
                conn,
                header,
                op,
                since,
            } => {
                let now = self.record(op, since, &reply);
                let ready_at = if op == Op::AddEntry { now } else { 0 };
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
                let now = self.record(op, since, &reply);
                let frame = ResponseFrame {
                    header,
                    response: reply,
                };
                let ready_at = if op == Op::AddEntry { now } else { 0 };
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

    /// Makes journal progress and sends the replies that became durable.
    pub fn drive(&mut self) {
        let passes = if self.driver == DriverKind::Psync {
            4
        } else {
            1
        };
        for _ in 0..passes {
            let now = self.now_us();
            if let Err(err) = self.core.journal.tick(now, true) {
                if !self.read_only {
                    log::error!("shard {}: {err}; the shard is read-only now", self.id);
                }
                self.set_failed("journal write failed");
                break;
            }
            if !self.core.journal.has_pending() {
                break;
            }
        }
        self.record_journal_syncs();
        self.append_blocked();
        self.expire_run_waits();
        if let Some(at) = self.core.journal.next_deadline_us() {
            if at < self.journal_timer_at_us {
                self.journal_timer_at_us = at;
                self.journal_timer.notify_one();
            }
        }
        // Readers hold back while this journal has records to make durable (disk_share.rs).
        self.store
            .disk_share
            .journal_waiting(self.id, self.core.journal.has_pending());
        while let Some(p) = self.core.take_durable() {
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
        if self.core.needs_stop_mark() {
            self.write_stop_mark();
        }
        if self.read_only && self.core.journal.stopped().is_some() {
            // Nothing pending will ever be durable: fail it rather than hang the clients.
            while let Some((to, reply)) = self.core.fail_pending() {
                self.respond(to, reply);
            }
        }
    }

    /// The journal stopped: where its durable log ends goes to its directory's stop mark
    /// (`journal::stopmark`), through a psync handle of its own, so that a restart does not
    /// adopt records the page cache kept but the disk never had.
    fn write_stop_mark(&mut self) {
        let written = storage::open_dir_with(
            &self.journal_dir,
            4,
            true,
            storage::uring::UringWake::EventFd,
        )
        .map_err(|e| e.to_string())
        .and_then(|mut dir| {
            self.core
                .write_stop_mark(&mut dir)
                .map_err(|e| e.to_string())
        });
        match written {
            Ok(()) => log::warn!(
                "shard {}: journal {}: stop mark written (durable up to lsn {})",
                self.id,
                self.journal_dir.display(),
                self.core.journal.durable_lsn().0
            ),
            Err(e) => log::error!(
                "shard {}: journal {}: cannot write the stop mark: {e}",
                self.id,
                self.journal_dir.display()
            ),
        }
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
        self.core.table.ids().collect()
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
