//! The simulated bookie: the shards' commit cores (`shard::core`), ledger storage, readers and
//! garbage collection of the real bookie, on one simulated disk, driven by the simulator's
//! scheduler instead of tokio and threads.
//!
//! What is the real code here: the ledger rules (`store::ledger`, `ledger_read`), the commit
//! core (journal appends, group commit, durable replies, blocked appends, the flush's freeze
//! and the journal trim), the journal itself, ledger storage (`entrylog`: flush, index,
//! manifest, recovery), the readers' read execution (`read_thread::execute`), compaction
//! (`gc::compaction::GcRunner`) and ZooKeeper's GC decision (`metadata::ledgers::gc_decision`).
//! What is the simulator's, in place of a thread or a socket: when the flush runs and when it
//! reports, when a read is executed, when a cross-shard hand-off arrives, the long-poll
//! watchers' list and timer (the shard's are tokio tasks), and the connections.

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;

use entrylog::{LedgerStore, LedgerStoreConfig, ReadView, Reader};
use journal::JournalConfig;
use net::{Request, RequestFrame, Response, ResponseHeader, StatusCode};
use storage::sim::{SimDisk, SimRng, SimStorage};
use storage::Storage;
use tokio::sync::mpsc;

use crate::admin::metrics::Metrics;
use crate::config::GcConfig;
use crate::gc::compaction::GcRunner;
use crate::read::ahead::{ReadAhead, Step, Via, RUNS_PER_ASK};
use crate::read::disk_reader::DiskReader;
use crate::read::read_thread;
use crate::shard::core::{Committed, LongPoll, ShardCore};
use crate::shard::mailbox::{GcRequest, RunLanded, StoreEvent};
use crate::shard::shard_of;
use crate::store::ledger::{Answer, Decision, DiskRead, LedgerTable};

/// Where a reply goes: a connection of one incarnation of the bookie.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token {
    pub conn: u64,
    pub header: ResponseHeader,
}

/// The simulated bookie's settings (drawn from the seed by `sim::run`).
#[derive(Clone, Debug)]
pub struct BookieSettings {
    pub shards: usize,
    pub journal: JournalConfig,
    pub store: LedgerStoreConfig,
    pub write_cache_bytes: usize,
    pub flush_threshold_bytes: usize,
    pub flush_interval_us: u64,
    /// How long the flush "thread" takes to report a finished flush.
    pub flush_report_us: (u64, u64),
    /// How long a read waits for a reader.
    pub read_delay_us: (u64, u64),
    /// How long a request for another shard's ledger takes to cross.
    pub hop_us: (u64, u64),
    pub max_batch_read_bytes: i64,
    /// The read-ahead cache per shard, bytes (0: off) and entries per run.
    pub read_ahead: (usize, usize),
}

struct Watcher {
    poll: LongPoll,
    deadline_us: u64,
    to: Token,
}

struct SimShard {
    core: ShardCore<SimStorage, Token>,
    store: LedgerStore<SimStorage>,
    reader: DiskReader<SimStorage>,
    view: Arc<ReadView>,
    gc: GcRunner,
    events_tx: mpsc::UnboundedSender<StoreEvent>,
    events_rx: mpsc::UnboundedReceiver<StoreEvent>,
    /// A flush written to ledger storage whose report has not reached the shard yet: its
    /// mark and when it arrives.
    flushing: Option<(u64, u64)>,
    last_flush_us: u64,
    gc_requested: bool,
    /// Reads handed to the reader: when it gets to each, the view it was given, the read,
    /// and how many entries to read from it (a run read of the read-ahead).
    reads: VecDeque<(u64, Arc<ReadView>, DiskRead, Token, usize)>,
    /// Runs the read-ahead asked for (`DiskRead::Prefetch`): when the reader gets to them.
    asks: VecDeque<(u64, Arc<ReadView>, u64, u64)>,
    /// Runs read, on their way back to the shard: when they arrive.
    landed: VecDeque<(u64, RunLanded)>,
    /// The shard's read-ahead policy (`read::ahead`), the real one.
    read_ahead: ReadAhead<(DiskRead, Token)>,
    watchers: Vec<Watcher>,
    read_only: bool,
    journal_dir: String,
    ledger_dir: String,
}

/// What the simulator is told of the bookie's state after each step (memory budgets).
#[derive(Clone, Copy, Debug, Default)]
pub struct Footprint {
    pub cached_bytes: usize,
    pub pending: usize,
    /// The fullest read-ahead cache, bytes.
    pub read_ahead_bytes: usize,
}

pub struct SimBookie {
    disk: SimDisk,
    settings: BookieSettings,
    shards: Vec<SimShard>,
    /// Requests crossing to another shard: when they arrive, the owner, the frame, the reply's way.
    hops: VecDeque<(u64, usize, RequestFrame, Token)>,
    /// Replies ready for the connections.
    pub out: Vec<(Token, Response)>,
    /// The scheduler's draws for the bookie's own timings (reader, hand-off, flush report).
    rng: SimRng,
    /// Ledgers whose tombstones a flush made durable since the simulator last asked.
    durable_deletions: BTreeSet<u64>,
}

/// The bookie's wall clock (ms) at virtual time zero: LAC timestamps look like real ones.
const EPOCH_MS: i64 = 1_700_000_000_000;

impl SimBookie {
    /// Opens every shard on the disk as a start would: ledger storage recovered, the journal
    /// replayed from its mark. An error is a refusal to start.
    pub fn open(
        disk: &SimDisk,
        settings: &BookieSettings,
        rng: SimRng,
    ) -> Result<SimBookie, String> {
        let metrics = Arc::new(Metrics::new(settings.shards));
        let mut shards = Vec::with_capacity(settings.shards);
        let now_ms = EPOCH_MS + (disk.now_us() / 1000) as i64;
        for id in 0..settings.shards {
            let journal_dir = format!("journal/shard-{id}");
            let ledger_dir = format!("ledgers/shard-{id}");
            let (store, recovered) =
                LedgerStore::open(disk.storage(&ledger_dir), settings.store.clone())
                    .map_err(|e| format!("shard {id}: ledger storage: {e}"))?;
            let mark = recovered.journal_mark;
            let limit = settings.write_cache_bytes;
            let mut table = LedgerTable::with_overshoot(limit, limit / 4);
            table.load(recovered.ledgers);
            let core = ShardCore::open(
                id,
                table,
                disk.storage(&journal_dir),
                settings.journal.clone(),
                mark,
                std::path::Path::new(&journal_dir),
                now_ms,
            )?;
            log::debug!(
                "sim shard {id}: opened at mark {mark}: {} ledgers, journal replayed {} records: {:?}",
                core.table.len(),
                core.journal.recovery_report().records_replayed,
                core.journal.recovery_report()
            );
            // Runs of up to 256 KiB (`dbStorage_readAheadCacheBatchBytesSize`'s default).
            let reader =
                Reader::new(disk.storage(&ledger_dir), &settings.store).with_run_bytes(256 << 10);
            let (events_tx, events_rx) = mpsc::unbounded_channel();
            shards.push(SimShard {
                core,
                view: store.snapshot(),
                store,
                reader: DiskReader::new(reader, None),
                gc: GcRunner::new(id, GcConfig::default(), metrics.clone()),
                events_tx,
                events_rx,
                flushing: None,
                last_flush_us: disk.now_us(),
                gc_requested: false,
                reads: VecDeque::new(),
                asks: VecDeque::new(),
                landed: VecDeque::new(),
                read_ahead: ReadAhead::new(settings.read_ahead.0, settings.read_ahead.1),
                watchers: Vec::new(),
                read_only: false,
                journal_dir,
                ledger_dir,
            });
        }
        Ok(SimBookie {
            disk: disk.clone(),
            settings: settings.clone(),
            shards,
            hops: VecDeque::new(),
            out: Vec::new(),
            rng,
            durable_deletions: BTreeSet::new(),
        })
    }

    fn now_us(&self) -> u64 {
        self.disk.now_us()
    }

    /// A frame read from connection `conn`, whose shard is `conn % shards`: handled there, or
    /// handed to the ledger's shard.
    pub fn dispatch(&mut self, frame: RequestFrame, conn: u64) {
        let to = Token {
            conn,
            header: frame.reply_header(),
        };
        let ledger = match &frame.request {
            Request::AddEntry { ledger_id, .. }
            | Request::ReadEntry { ledger_id, .. }
            | Request::BatchReadEntry { ledger_id, .. }
            | Request::WriteLac { ledger_id, .. }
            | Request::ReadLac { ledger_id }
            | Request::ForceLedger { ledger_id }
            | Request::GetListOfEntriesOfLedger { ledger_id } => *ledger_id,
            _ => {
                let reply = frame.request.error_response(StatusCode::EBADREQ);
                self.out.push((to, reply));
                return;
            }
        };
        let shards = self.shards.len();
        let (origin, owner) = ((conn as usize) % shards, shard_of(ledger, shards));
        if origin == owner {
            self.handle(owner, frame, to);
        } else {
            let (lo, hi) = self.settings.hop_us;
            let at = self.now_us() + self.rng.range(lo, hi);
            self.hops.push_back((at, owner, frame, to));
        }
    }

    /// `Shard::handle` without the metrics: the ledger rules, long polls, then the decision
    /// carried out.
    fn handle(&mut self, s: usize, frame: RequestFrame, to: Token) {
        let now_us = self.now_us();
        let now_ms = EPOCH_MS + (now_us / 1000) as i64;
        let v3 = !frame.header.is_v2();
        let request = &frame.request;
        let shard = &mut self.shards[s];
        let writable = !shard.read_only;
        let decision = shard.core.decide(
            request,
            v3,
            now_ms,
            writable,
            self.settings.max_batch_read_bytes,
        );
        if let Some(ledger) = ShardCore::<SimStorage, Token>::woken_ledger(request, writable) {
            self.wake_watchers(s, ledger);
        }
        if let Some(poll) = LongPoll::of(&decision, request) {
            self.shards[s].watchers.push(Watcher {
                deadline_us: now_us + poll.timeout_ms * 1000,
                poll,
                to,
            });
            return;
        }
        self.carry_out(s, decision, request, to);
    }

    fn carry_out(&mut self, s: usize, decision: Decision, request: &Request, to: Token) {
        let now = self.now_us();
        match decision {
            Decision::Reply(reply) => self.out.push((to, reply)),
            Decision::ReadDisk(read) => self.read_disk(s, read, to),
            Decision::Journal {
                master_key,
                record,
                reply,
            } => {
                let shard = &mut self.shards[s];
                let committed = shard.core.commit(master_key, record, reply, to, now);
                if shard.core.take_stopped() {
                    shard.read_only = true;
                }
                match committed {
                    Committed::Waiting => {}
                    Committed::Now(to, answer) => self.answer(s, to, answer),
                    Committed::Failed(to, status) => {
                        self.out.push((to, request.error_response(status)))
                    }
                }
            }
            Decision::AfterDurable(reply) => {
                if let Some((to, reply)) = self.shards[s].core.after_durable(reply, to, now) {
                    self.out.push((to, reply));
                }
            }
            Decision::WaitLac { .. } => unreachable!("long polls are registered by handle"),
        }
    }

    fn answer(&mut self, s: usize, to: Token, answer: Answer) {
        match answer {
            Answer::Now(reply) => self.out.push((to, reply)),
            Answer::Disk(read) => self.read_disk(s, read, to),
        }
    }

    fn read_disk(&mut self, s: usize, read: DiskRead, to: Token) {
        self.read_disk_via(s, read, to, Via::Request);
    }

    /// `Shard::read_disk_via` (`shard/cold_read.rs`): the read-ahead policy decides — a hit
    /// answered here, a read parked on a run in flight, or a read (single or run) for the
    /// reader; runs it asks for go to the reader as prefetches.
    fn read_disk_via(&mut self, s: usize, read: DiskRead, to: Token, via: Via) {
        let now = self.now_us();
        let (lo, hi) = self.settings.read_delay_us;
        let (ledger, entry) = match read {
            DiskRead::Entry { ledger, entry, .. } => (ledger, u64::try_from(entry).ok()),
            _ => (0, None),
        };
        let shard = &mut self.shards[s];
        let mut asked = Vec::new();
        let mut ask = |ledger: u64, start: u64| {
            asked.push((ledger, start));
            true
        };
        let step = shard
            .read_ahead
            .miss(ledger as u64, entry, (read, to), via, now, &mut ask);
        for (ledger, start) in asked {
            let at = now + self.rng.range(lo, hi);
            shard
                .asks
                .push_back((at, shard.view.clone(), ledger, start));
        }
        let (read, to, run) = match step {
            Step::Parked => return,
            Step::Hit {
                read:
                    (
                        DiskRead::Entry {
                            ledger,
                            reply_entry_id,
                            max_lac,
                            ..
                        },
                        to,
                    ),
                body,
            } => {
                let reply = read_thread::entry_reply(ledger, reply_entry_id, max_lac, Some(body));
                self.out.push((to, reply));
                return;
            }
            Step::Hit {
                read: (read, to), ..
            } => (read, to, 1),
            Step::Read {
                read: (read, to),
                run,
            } => (read, to, run),
        };
        let at = now + self.rng.range(lo, hi);
        shard
            .reads
            .push_back((at, shard.view.clone(), read, to, run));
    }

    /// The reader's work that is due: reads (a run read reports the entries after its own
    /// as a run landed), and the runs the read-ahead asked for.
    fn serve_reads(&mut self, s: usize, now: u64) {
        let (lo, hi) = self.settings.read_delay_us;
        let run_entries = self.settings.read_ahead.1.max(1);
        let shard = &mut self.shards[s];
        while shard.reads.front().is_some_and(|r| r.0 <= now) {
            let (_, view, read, to, run) = shard.reads.pop_front().expect("front");
            match read {
                DiskRead::Entry { ledger, entry, .. } if run > 1 => {
                    let (reply, rest) = read_thread::run_read(&mut shard.reader, &view, &read, run);
                    self.out.push((to, reply));
                    let next = entry as u64 + 1;
                    let at = now + self.rng.range(lo, hi);
                    shard.landed.push_back((
                        at,
                        RunLanded {
                            ledger: ledger as u64,
                            start: next,
                            bodies: rest,
                            trigger: Some(next),
                            more: None,
                        },
                    ));
                }
                _ => {
                    let reply = read_thread::execute(&mut shard.reader, &view, &read, 16);
                    self.out.push((to, reply));
                }
            }
        }
        while shard.asks.front().is_some_and(|a| a.0 <= now) {
            let (_, view, ledger, entry) = shard.asks.pop_front().expect("front");
            let mut runs = Vec::new();
            let landed = |start: u64, bodies: Vec<bytes::Bytes>, more: Option<(u64, u64)>| {
                runs.push(RunLanded {
                    ledger,
                    start,
                    trigger: (start == entry).then_some(entry),
                    more,
                    bodies,
                });
            };
            // Only a read ahead: a failure leaves the entries to be read when asked for.
            let _ =
                shard
                    .reader
                    .read_runs(&view, ledger, entry, (RUNS_PER_ASK, run_entries), landed);
            for run in runs {
                let at = now + self.rng.range(lo, hi);
                shard.landed.push_back((at, run));
            }
        }
        // Runs back at the shard: into the cache, and the reads parked on them answered.
        while self.shards[s].landed.front().is_some_and(|l| l.0 <= now) {
            let (_, run) = self.shards[s].landed.pop_front().expect("front");
            let (reads, via) = self.shards[s].read_ahead.landed(run, now);
            for (read, to) in reads {
                self.read_disk_via(s, read, to, via);
            }
        }
        // Reads parked on a run that never came go to the reader alone.
        let deadline = now.saturating_sub(2_000_000);
        for (read, to) in self.shards[s].read_ahead.expired(deadline) {
            self.read_disk_via(s, read, to, Via::Late);
        }
    }

    fn wake_watchers(&mut self, s: usize, ledger: i64) {
        let Some(l) = self.shards[s].core.table.get(ledger) else {
            return;
        };
        let (lac, fenced) = (l.lac, l.fenced);
        self.answer_watchers(s, |w| {
            w.poll.ledger == ledger && (lac > w.poll.previous_lac || fenced)
        });
    }

    /// Answers the long polls `done` picks (`Shard::wake_watchers`, `expire_watcher`).
    fn answer_watchers(&mut self, s: usize, done: impl Fn(&Watcher) -> bool) {
        let shard = &mut self.shards[s];
        let mut i = 0;
        while i < shard.watchers.len() {
            if !done(&shard.watchers[i]) {
                i += 1;
                continue;
            }
            let Watcher { poll, to, .. } = shard.watchers.remove(i);
            let reply = shard.core.table.long_poll_reply(
                poll.ledger,
                poll.entry,
                poll.previous_lac,
                poll.flag,
            );
            self.out.push((to, reply));
        }
    }

    /// One turn of every shard's loop: cross-shard arrivals, journal progress and durable
    /// replies, long-poll timeouts, flush reports, reads the readers got to, compaction steps.
    pub fn drive(&mut self) {
        let now = self.now_us();
        while self.hops.front().is_some_and(|h| h.0 <= now) {
            let (_, owner, frame, to) = self.hops.pop_front().expect("front");
            self.handle(owner, frame, to);
        }
        for s in 0..self.shards.len() {
            self.drive_shard(s, now);
        }
    }

    fn drive_shard(&mut self, s: usize, now: u64) {
        let shard = &mut self.shards[s];
        if shard.core.journal.tick(now, true).is_err() {
            shard.read_only = true;
        }
        let (failures, _) = shard.core.append_blocked(now, |_| {});
        if shard.core.take_stopped() {
            shard.read_only = true;
        }
        self.out.extend(failures);
        while let Some(p) = self.shards[s].core.take_durable() {
            self.answer(s, p.to, p.reply);
        }
        let shard = &mut self.shards[s];
        if shard.core.needs_stop_mark() {
            let mut dir = self.disk.storage(&shard.journal_dir);
            let _ = shard.core.write_stop_mark(&mut dir);
        }
        if shard.read_only && shard.core.journal.stopped().is_some() {
            while let Some(reply) = shard.core.fail_pending() {
                self.out.push(reply);
            }
        }
        // Long polls whose time is up.
        self.answer_watchers(s, |w| w.deadline_us <= now);
        self.flush_report(s, now);
        self.maybe_flush(s, now);
        self.store_events(s);
        // The reader: reads it got to, each through the view it was handed.
        self.serve_reads(s, now);
        let shard = &mut self.shards[s];
        if shard.gc.active() && shard.flushing.is_none() {
            shard.gc.step(&mut shard.store, &shard.events_tx);
            self.store_events(s);
            self.collect_trash(s);
        }
    }

    /// `Shard::maybe_flush`, with the flush thread's work done at once and its report
    /// delivered later.
    fn maybe_flush(&mut self, s: usize, now: u64) {
        let settings = &self.settings;
        let shard = &mut self.shards[s];
        if shard.flushing.is_some() || shard.read_only || shard.gc.active() {
            return;
        }
        let cached = shard.core.table.cached_bytes();
        let due = cached >= settings.flush_threshold_bytes
            || (cached > 0
                && now.saturating_sub(shard.last_flush_us) >= settings.flush_interval_us)
            || shard.core.table.has_pending_deletes()
            || shard.gc_requested;
        if !due {
            return;
        }
        let Some(batch) = shard.core.freeze() else {
            return;
        };
        shard.last_flush_us = now;
        let flush = batch.to_flush_batch();
        drop(batch);
        let tombstones: Vec<u64> = flush
            .ledgers
            .iter()
            .filter(|m| m.deleted)
            .map(|m| m.ledger)
            .collect();
        match shard.store.flush(&flush) {
            Ok(stats) => {
                self.durable_deletions.extend(tombstones.iter().copied());
                log::debug!(
                    "sim shard {s}: flushed mark {} tombstones {tombstones:?}: {stats:?}",
                    flush.journal_mark
                );
                shard.view = shard.store.snapshot();
                let (lo, hi) = settings.flush_report_us;
                let at = self.disk.now_us() + self.rng.range(lo, hi);
                shard.flushing = Some((flush.journal_mark, at));
                if std::mem::take(&mut shard.gc_requested) {
                    let req = GcRequest {
                        force: true,
                        force_major: true,
                        force_minor: false,
                    };
                    shard.gc.request(req, &mut shard.store, &shard.events_tx);
                }
            }
            Err(_) => shard.read_only = true,
        }
    }

    /// The flush's report reaches the shard: the journal below the mark goes.
    fn flush_report(&mut self, s: usize, now: u64) {
        let shard = &mut self.shards[s];
        let Some((mark, at)) = shard.flushing else {
            return;
        };
        if at > now {
            return;
        }
        shard.flushing = None;
        let (_entries, trimmed) = shard.core.flushed(mark);
        match trimmed {
            Ok(trash) => {
                let mut dir = self.disk.storage(&shard.journal_dir);
                for name in trash {
                    let _ = dir.remove(&name);
                }
            }
            Err(_) => shard.read_only = true,
        }
    }

    fn store_events(&mut self, s: usize) {
        let shard = &mut self.shards[s];
        while let Ok(event) = shard.events_rx.try_recv() {
            match event {
                StoreEvent::View(view) => shard.view = view,
                StoreEvent::Flushed { view, .. } => shard.view = view,
                StoreEvent::Failed(_) => shard.read_only = true,
            }
        }
    }

    /// Retired ledger-storage files no view holds any more: deleted (the reclaim thread's
    /// work, at once).
    fn collect_trash(&mut self, s: usize) {
        let shard = &mut self.shards[s];
        shard.store.collect_garbage();
        let trash = shard.store.take_trash();
        if !trash.is_empty() {
            let mut dir = self.disk.storage(&shard.ledger_dir);
            for name in trash {
                let _ = dir.remove(&name);
            }
        }
    }

    /// The GC thread's pass: ZooKeeper's listing `live` against every shard's ledgers; the
    /// deleted ones dropped and a compaction asked for after the flush that persists them.
    /// Returns the ledgers dropped (a read-only shard keeps its own). A deletion is durable
    /// with that flush ([`Self::take_durable_deletions`]); a crash before it brings the
    /// ledger back until the next pass, as on a Java bookie (its index keeps the deletion
    /// in memory until the next checkpoint).
    pub fn garbage_collect(&mut self, live: &BTreeSet<u64>) -> BTreeSet<u64> {
        let local: BTreeSet<u64> = self
            .shards
            .iter()
            .flat_map(|s| s.core.table.ids().map(|id| id as u64))
            .collect();
        let Ok(deleted) = metadata::ledgers::gc_decision(&local, Ok(live), false) else {
            return BTreeSet::new();
        };
        let ids: Vec<i64> = deleted.iter().map(|&id| id as i64).collect();
        let mut dropped = BTreeSet::new();
        let now_ms = EPOCH_MS + (self.now_us() / 1000) as i64;
        for shard in &mut self.shards {
            let mine: Vec<i64> = ids
                .iter()
                .copied()
                .filter(|&id| shard.core.table.get(id).is_some())
                .collect();
            if shard
                .core
                .delete_ledgers(&mine, !shard.read_only, now_ms)
                .is_some()
            {
                dropped.extend(mine.iter().map(|&id| id as u64));
                shard.gc_requested = true;
            }
        }
        dropped
    }

    /// The ledgers whose deletion became durable since the last call.
    pub fn take_durable_deletions(&mut self) -> BTreeSet<u64> {
        std::mem::take(&mut self.durable_deletions)
    }

    /// A clean stop: every journal closed (what was appended made durable, the segment
    /// sealed), as `Shard::flush` does at shutdown.
    pub fn stop(mut self) {
        for s in 0..self.shards.len() {
            let _ = self.shards[s].core.journal.close();
            let now = self.now_us();
            self.drive_shard(s, now);
        }
    }

    /// What the write caches and pending queues hold (memory budgets).
    pub fn footprint(&self) -> Footprint {
        let mut f = Footprint::default();
        for s in &self.shards {
            f.cached_bytes = f
                .cached_bytes
                .max(s.core.table.cached_bytes() + s.core.table.frozen_bytes());
            f.pending += s.core.pending.len() + s.core.blocked.len();
            f.read_ahead_bytes = f.read_ahead_bytes.max(s.read_ahead.cache_stats().0);
        }
        f
    }

    /// Reads answered from the read-ahead cache, over every shard.
    pub fn read_ahead_hits(&self) -> u64 {
        self.shards
            .iter()
            .map(|s| s.read_ahead.cache_stats().2)
            .sum()
    }

    /// Whether the shard of connection `conn` stops reading sockets (`Shard::is_blocked`):
    /// every journal buffer busy, or the write cache full.
    pub fn is_blocked(&self, conn: u64) -> bool {
        let s = &self.shards[(conn as usize) % self.shards.len()];
        !s.core.blocked.is_empty() || s.core.table.is_full()
    }
}
