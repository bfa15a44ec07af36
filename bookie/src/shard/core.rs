//! The shard's commit core: the ledger table and the journal, and the rule that joins them —
//! a reply that needs its record durable waits in `pending` until the journal's durable LSN
//! passes it. No sockets, threads, clocks or metrics: the caller passes the time and carries
//! out what comes back.
//!
//! Why apart from the shard: the real shard (`shard/mod.rs`, tokio and io_uring) and the
//! whole-bookie simulator (`crate::sim`, one seed, a simulated disk) drive this same code, so
//! what the simulator proves about acknowledgements, fencing, the LAC and the checkpoint is
//! proved of the code that serves clients. `T` is where a reply goes: the shard's `Responder`,
//! the simulator's request token.

use std::collections::VecDeque;
use std::path::Path;

use journal::{AppendError, Journal, JournalConfig, JournalError, Lsn};
use net::{ReadFlag, Request, Response, StatusCode};
use storage::Storage;

use crate::read::read_thread;
use crate::shard::fenced_deleted::FencedDeleted;
use crate::store::journal_recovery::LostRecords;
use crate::store::ledger::{Answer, Decision, FrozenBatch, FrozenEntries, LedgerTable};
use crate::store::record::{JournalRecord, HEADER_MAX};

/// A reply waiting for its journal record to be durable.
pub struct Pending<T> {
    /// When its record was appended (the caller's clock, µs).
    pub at: u64,
    pub lsn: Lsn,
    pub to: T,
    pub reply: Answer,
}

/// Records that found every journal buffer busy: appended, in order, as buffers free up.
pub struct Blocked<T> {
    pub at: u64,
    pub records: Vec<JournalRecord>,
    pub to: T,
    pub reply: Answer,
}

/// A long poll to park: what `LedgerTable::long_poll_reply` answers it with, and its timeout.
pub struct LongPoll {
    pub ledger: i64,
    pub entry: i64,
    pub previous_lac: i64,
    pub flag: Option<ReadFlag>,
    pub timeout_ms: u64,
}

impl LongPoll {
    /// The long poll `decision` asks to park for `request`, if it is one.
    pub fn of(decision: &Decision, request: &Request) -> Option<LongPoll> {
        match (decision, request) {
            (
                Decision::WaitLac {
                    ledger,
                    previous_lac,
                    timeout_ms,
                },
                Request::ReadEntry { entry_id, flag, .. },
            ) => Some(LongPoll {
                ledger: *ledger,
                entry: *entry_id,
                previous_lac: *previous_lac,
                flag: *flag,
                timeout_ms: *timeout_ms,
            }),
            _ => None,
        }
    }
}

/// What became of a decision's journal records.
pub enum Committed<T> {
    /// Appended (its reply is pending until durable) or blocked behind busy buffers.
    Waiting,
    /// Nothing to make durable: answer now.
    Now(T, Answer),
    /// The journal refused: answer the request with this status.
    Failed(T, StatusCode),
}

pub struct ShardCore<S: Storage, T> {
    pub table: LedgerTable,
    /// Ledgers garbage collection dropped: requests that would recreate them are refused
    /// (`fenced_deleted.rs`).
    pub fenced_deleted: FencedDeleted,
    pub journal: Journal<S>,
    pub pending: VecDeque<Pending<T>>,
    pub blocked: VecDeque<Blocked<T>>,
    /// The clock reading of the last append, reused as the pending reply's start.
    pub appended_at_us: u64,
    /// The journal stopped (a failed write or sync) since the owner last asked.
    stopped: bool,
    /// The stopped journal's stop mark was written (or tried).
    stop_marked: bool,
}

impl<S: Storage, T> ShardCore<S, T> {
    /// Opens the journal in `storage`, replaying every record from `mark` into `table` (which
    /// holds what ledger storage recovered), and recycles the segments below the mark.
    pub fn open(
        shard: usize,
        mut table: LedgerTable,
        storage: S,
        config: JournalConfig,
        mark: u64,
        journal_dir: &Path,
        now_ms: i64,
    ) -> Result<ShardCore<S, T>, String> {
        let mut unreadable = 0u64;
        let mut lost = LostRecords::default();
        let mut journal = Journal::open_observing(
            storage,
            config,
            Lsn(mark),
            &mut |_, payload| match JournalRecord::decode(payload) {
                Some(record) => table.replay(record, now_ms),
                None => unreadable += 1,
            },
            &mut |_, payload| lost.record(payload),
        )
        .map_err(|e| lost.refusal(journal_dir, &e))?;
        lost.log_cut(shard, journal.recovery_report());
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
        Ok(ShardCore {
            table,
            fenced_deleted: FencedDeleted::default(),
            journal,
            pending: VecDeque::with_capacity(4096),
            blocked: VecDeque::new(),
            appended_at_us: 0,
            stopped: false,
            stop_marked: false,
        })
    }

    /// The ledger rules' decision for a request this shard owns. `writable`: the shard takes
    /// adds and explicit LACs now (it is not read-only).
    pub fn decide(
        &mut self,
        request: &Request,
        v3: bool,
        now_ms: i64,
        writable: bool,
        max_batch_read_bytes: i64,
    ) -> Decision {
        match request {
            Request::AddEntry {
                ledger_id,
                entry_id,
                master_key,
                body,
                recovery,
                ..
            } => {
                if !writable {
                    return Decision::Reply(request.error_response(StatusCode::EREADONLY));
                }
                if self.dropped_after_fencing(*ledger_id, now_ms) {
                    return Decision::Reply(request.error_response(StatusCode::EFENCED));
                }
                self.table.add(
                    *ledger_id,
                    *entry_id,
                    master_key,
                    body.clone(),
                    *recovery,
                    now_ms,
                )
            }
            Request::ReadEntry {
                ledger_id,
                flag: Some(ReadFlag::FenceLedger),
                ..
            } if self.dropped_after_fencing(*ledger_id, now_ms) => {
                Decision::Reply(request.error_response(StatusCode::ENOLEDGER))
            }
            Request::ReadEntry {
                ledger_id,
                entry_id,
                master_key,
                flag,
                previous_lac,
                time_out,
            } => self.table.read(
                *ledger_id,
                *entry_id,
                *flag,
                master_key.as_ref(),
                *previous_lac,
                *time_out,
                v3,
            ),
            Request::BatchReadEntry {
                ledger_id,
                fence: true,
                ..
            } if self.dropped_after_fencing(*ledger_id, now_ms) => {
                Decision::Reply(request.error_response(StatusCode::ENOLEDGER))
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
                (*max_size).min(max_batch_read_bytes),
                *fence,
                master_key.as_ref(),
            ),
            Request::WriteLac {
                ledger_id,
                master_key,
                body,
                ..
            } => {
                if !writable {
                    return Decision::Reply(request.error_response(StatusCode::EREADONLY));
                }
                if self.dropped_after_fencing(*ledger_id, now_ms) {
                    return Decision::Reply(request.error_response(StatusCode::ENOLEDGER));
                }
                self.table
                    .write_lac(*ledger_id, master_key, body.clone(), now_ms)
            }
            Request::ReadLac { ledger_id } => self.table.read_lac(*ledger_id),
            Request::ForceLedger { ledger_id } => self.table.force_ledger(*ledger_id),
            Request::GetListOfEntriesOfLedger { ledger_id } => self.table.list_entries(*ledger_id),
            // Answered on the connection's shard before routing.
            Request::Auth(_)
            | Request::StartTls
            | Request::GetBookieInfo { .. }
            | Request::Unsupported { .. } => {
                Decision::Reply(request.error_response(StatusCode::EBADREQ))
            }
        }
    }

    /// The ledger whose long polls should look again once `request` was decided: an add or
    /// an explicit LAC the shard took (`writable`) may have moved its LAC, and a fence read
    /// fences it (even on a read-only shard).
    pub fn woken_ledger(request: &Request, writable: bool) -> Option<i64> {
        match request {
            Request::AddEntry { ledger_id, .. } | Request::WriteLac { ledger_id, .. }
                if writable =>
            {
                Some(*ledger_id)
            }
            Request::ReadEntry {
                ledger_id,
                flag: Some(ReadFlag::FenceLedger),
                ..
            } => Some(*ledger_id),
            _ => None,
        }
    }

    /// Appends one record; ETOOMANYREQUESTS: every buffer is busy.
    pub fn append(&mut self, record: &JournalRecord, now_us: u64) -> Result<Lsn, StatusCode> {
        let mut header = [0u8; HEADER_MAX];
        let (n, rest) = record.encode(&mut header);
        self.appended_at_us = now_us;
        match self.journal.append_parts(&[&header[..n], rest], now_us) {
            Ok(lsn) => Ok(lsn),
            Err(AppendError::Backpressure) => Err(StatusCode::ETOOMANYREQUESTS),
            Err(AppendError::TooLarge { .. }) => Err(StatusCode::EBADREQ),
            Err(AppendError::Stopped(_)) => {
                self.stopped = true;
                Err(StatusCode::EIO)
            }
        }
    }

    /// Whether the journal stopped and its stop mark is still to be written.
    pub fn needs_stop_mark(&self) -> bool {
        !self.stop_marked && self.journal.stopped().is_some()
    }

    /// Writes the stopped journal's stop mark (`journal::stopmark`) through `storage`, a handle
    /// of its own on the journal directory: the next start cuts the log where it was durable,
    /// whatever the page cache still holds after the failed sync. Once; a failure is the
    /// caller's to log (the next start then trusts what it reads, as before).
    pub fn write_stop_mark<U: Storage>(&mut self, storage: &mut U) -> Result<(), storage::IoError> {
        self.stop_marked = true;
        self.journal.write_stop_mark(storage).unwrap_or(Ok(()))
    }

    /// Whether the journal was found stopped since the last call.
    pub fn take_stopped(&mut self) -> bool {
        std::mem::take(&mut self.stopped)
    }

    /// Appends a decision's records (a new ledger's master key first); the reply waits for
    /// the last one to be durable (with none, for everything appended so far).
    pub fn commit(
        &mut self,
        master_key: Option<JournalRecord>,
        record: Option<JournalRecord>,
        reply: Answer,
        to: T,
        now_us: u64,
    ) -> Committed<T> {
        let mut records: Vec<JournalRecord> = Vec::new();
        let mut last = None;
        for r in [master_key, record].into_iter().flatten() {
            if !records.is_empty() || !self.blocked.is_empty() {
                records.push(r);
                continue;
            }
            match self.append(&r, now_us) {
                Ok(lsn) => last = Some(lsn),
                Err(StatusCode::ETOOMANYREQUESTS) => records.push(r),
                Err(status) => return Committed::Failed(to, status),
            }
        }
        if !records.is_empty() {
            // Every journal buffer is busy: keep the order; the owner stops reading sockets.
            self.blocked.push_back(Blocked {
                at: now_us,
                records,
                to,
                reply,
            });
            return Committed::Waiting;
        }
        let (lsn, at) = match last {
            Some(lsn) => (lsn, self.appended_at_us),
            // Nothing to append (a fence of a ledger already fenced): the reply still waits
            // for everything appended so far, the first fence's record among them. Answered
            // at once, a second fence read acknowledged a fence a crash could still undo (the
            // simulator's seed 35 found it; Java returns the first fence's pending result).
            None => {
                if self.journal.stopped().is_some() {
                    // The first fence's record may never have reached the journal (its append
                    // failed, the fence stayed in memory): nothing says it is durable (seed 347).
                    return Committed::Failed(to, StatusCode::EIO);
                }
                let lsn = Lsn(self.journal.next_lsn().0 - 1);
                if lsn <= self.journal.durable_lsn() {
                    return Committed::Now(to, reply);
                }
                (lsn, now_us)
            }
        };
        self.pending.push_back(Pending { at, lsn, to, reply });
        Committed::Waiting
    }

    /// A reply due once everything appended so far is durable: now, or it waits.
    pub fn after_durable(&mut self, reply: Response, to: T, now_us: u64) -> Option<(T, Response)> {
        let lsn = Lsn(self.journal.next_lsn().0 - 1);
        if lsn <= self.journal.durable_lsn() {
            return Some((to, reply));
        }
        self.pending.push_back(Pending {
            at: now_us,
            lsn,
            to,
            reply: Answer::Now(reply),
        });
        None
    }

    /// Appends the records that waited for a journal buffer, in order, as far as buffers
    /// allow. Returns the replies of those the journal refused, and whether the blocked list
    /// emptied (the owner takes input again); `appended(at)` is told of each record set that
    /// went in, with when it blocked.
    pub fn append_blocked(
        &mut self,
        now_us: u64,
        mut appended: impl FnMut(u64),
    ) -> (Vec<(T, Response)>, bool) {
        let mut failures = Vec::new();
        if self.blocked.is_empty() {
            return (failures, false);
        }
        while let Some(mut b) = self.blocked.pop_front() {
            let mut failed = None;
            let mut last = None;
            while !b.records.is_empty() {
                match self.append(&b.records[0], now_us) {
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
                    Answer::Now(r) => r.failed(status),
                };
                failures.push((b.to, reply));
                continue;
            }
            if !b.records.is_empty() {
                // Still no buffer: the rest (and everything behind it) waits.
                self.blocked.push_front(b);
                break;
            }
            let lsn = last.unwrap_or(Lsn(self.journal.next_lsn().0 - 1));
            appended(b.at);
            self.pending.push_back(Pending {
                at: now_us,
                lsn,
                to: b.to,
                reply: b.reply,
            });
        }
        let unblocked = self.blocked.is_empty();
        (failures, unblocked)
    }

    /// The oldest pending reply, once its record is durable. **Ack ⇒ durable**
    /// (ARCHITECTURE.md §5): nothing else hands out a pending reply.
    pub fn take_durable(&mut self) -> Option<Pending<T>> {
        let durable = self.journal.durable_lsn();
        // Planted bug (`crate::sim`): replies leave before their records are durable.
        let early = mutation::on(mutation::Mutation::AckBeforeSync);
        if self
            .pending
            .front()
            .is_some_and(|p| p.lsn <= durable || early)
        {
            self.pending.pop_front()
        } else {
            None
        }
    }

    /// The journal stopped: nothing pending will ever be durable. The next reply to fail
    /// with EIO rather than hang its client.
    pub fn fail_pending(&mut self) -> Option<(T, Response)> {
        let p = self.pending.pop_front()?;
        let status = StatusCode::EIO;
        // The same kind of reply with its ids, so that a v2 client can match it: a bare
        // `Response::Error` cannot be encoded in v2, and a v2 fence read pending when the
        // journal failed was never answered (the simulator's seed 42 found it).
        let reply = match p.reply {
            Answer::Disk(read) => read_thread::error_reply(&read, status),
            Answer::Now(r) => r.failed(status),
        };
        Some((p.to, reply))
    }

    /// Garbage collection found these ledgers deleted from the cluster: they leave the table
    /// now, and the next freeze carries their tombstones. Not on a shard that can no longer
    /// flush (`writable` false: its journal or ledger storage failed): a deletion it cannot
    /// persist would be undone by the next start, and the ledger would be served again (the
    /// simulator's seed 29 found it); the first GC after a restart deletes them. Returns how
    /// many this shard held, or `None` when it kept them.
    pub fn delete_ledgers(&mut self, ids: &[i64], writable: bool, now_ms: i64) -> Option<usize> {
        if !writable {
            return None;
        }
        let mut dropped = 0;
        for &id in ids {
            if self.table.delete(id) {
                dropped += 1;
                self.fenced_deleted.remember(id, now_ms);
            }
        }
        Some(dropped)
    }

    /// A request for a ledger this shard does not hold, which garbage collection dropped
    /// (Java's `LedgerFencedAndDeletedException`).
    fn dropped_after_fencing(&mut self, ledger: i64, now_ms: i64) -> bool {
        // Nothing remembered (the usual case): no lookup on the add path.
        !self.fenced_deleted.is_empty()
            && self.table.get(ledger).is_none()
            && self.fenced_deleted.refuses(ledger, now_ms)
    }

    /// Freezes the write cache for a flush, its journal mark the next LSN: every record
    /// below it is in the frozen batch or the ledgers' metadata.
    pub fn freeze(&mut self) -> Option<FrozenBatch> {
        let mark = self.journal.next_lsn().0;
        self.table.freeze(mark)
    }

    /// A flush with journal mark `mark` is durable in ledger storage: its entries are served
    /// from there now, and the journal below the mark goes. Returns the flushed entries (to
    /// drop off the shard's thread) and the journal files to delete.
    pub fn flushed(
        &mut self,
        mark: u64,
    ) -> (Option<FrozenEntries>, Result<Vec<String>, JournalError>) {
        let entries = self.table.flush_done();
        let trimmed = self
            .journal
            .trim(Lsn(mark))
            .map(|_| self.journal.take_trash());
        (entries, trimmed)
    }
}

#[cfg(test)]
mod tests {
    //! The commit core on a simulated disk: the fixes the whole-bookie simulator's seeds led
    //! to, each pinned down without the simulator.

    use super::*;
    use crate::store::ledger::test_support::key;
    use storage::sim::{FaultConfig, SimConfig, SimDisk, SimStorage};

    type Core = ShardCore<SimStorage, u32>;

    fn open(disk: &SimDisk) -> Core {
        let config = JournalConfig {
            segment_size_bytes: 1 << 20,
            max_record_bytes: 64 << 10,
            buffered_writes_threshold_bytes: 16 << 10,
            zero_fill_chunk_bytes: 16 << 10,
            ..JournalConfig::default()
        };
        let table = LedgerTable::new(1 << 20);
        ShardCore::open(0, table, disk.storage("j"), config, 0, Path::new("j"), 0).expect("opens")
    }

    fn fence(ledger: i64) -> Request {
        Request::ReadEntry {
            ledger_id: ledger,
            entry_id: 0,
            master_key: Some(key(1)),
            flag: Some(ReadFlag::FenceLedger),
            previous_lac: None,
            time_out: None,
        }
    }

    /// Decides and commits `request` for token `to`; whether it was answered at once.
    fn submit(core: &mut Core, request: &Request, to: u32, now: u64) -> Option<StatusCode> {
        match core.decide(request, false, 0, true, 1 << 20) {
            Decision::Journal {
                master_key,
                record,
                reply,
            } => match core.commit(master_key, record, reply, to, now) {
                Committed::Waiting => None,
                Committed::Now(_, Answer::Now(r)) => Some(r.status()),
                Committed::Now(_, Answer::Disk(_)) => panic!("no disk read expected"),
                Committed::Failed(_, status) => Some(status),
            },
            other => panic!("unexpected {other:?}"),
        }
    }

    /// A second fence read of a ledger whose first fence is not durable yet waits for it
    /// (seed 35: it was answered at once, and a crash could undo the fence it acknowledged).
    #[test]
    fn a_second_fence_waits_for_the_first_to_be_durable() {
        let disk = SimDisk::new(SimConfig::new(1).with_latency_us(100, 100));
        let mut core = open(&disk);
        assert_eq!(submit(&mut core, &fence(7), 1, 0), None);
        assert_eq!(
            submit(&mut core, &fence(7), 2, 0),
            None,
            "answered before durable"
        );
        assert!(core.take_durable().is_none());
        let mut now = 0;
        let mut answered = Vec::new();
        while answered.len() < 2 && now < 1_000_000 {
            now += 500;
            disk.advance(500);
            core.journal.tick(now, true).unwrap();
            while let Some(p) = core.take_durable() {
                assert!(p.lsn <= core.journal.durable_lsn());
                answered.push(p.to);
            }
        }
        assert_eq!(answered, vec![1, 2]);
        // Once durable, a third is answered at once.
        assert_eq!(
            submit(&mut core, &fence(7), 3, now),
            Some(StatusCode::ENOENTRY)
        );
    }

    /// A fence read on a shard whose journal stopped fails with EIO, even when the ledger is
    /// fenced in memory (seed 347: the first fence's append failed, the second was acked).
    #[test]
    fn a_fence_after_the_journal_stopped_fails() {
        let disk = SimDisk::new(SimConfig::new(2).with_latency_us(10, 10));
        let mut core = open(&disk);
        disk.set_faults(FaultConfig::none().with_write_eio(1.0));
        // An add makes the journal write (and fail).
        let add = Request::AddEntry {
            ledger_id: 7,
            entry_id: 0,
            master_key: key(1),
            body: crate::store::ledger::test_support::body(7, 0, -1),
            recovery: false,
            write_flags: None,
        };
        assert_eq!(submit(&mut core, &add, 1, 0), None);
        let mut now = 0;
        while core.journal.stopped().is_none() && now < 1_000_000 {
            now += 500;
            disk.advance(500);
            let _ = core.journal.tick(now, true);
        }
        assert!(core.journal.stopped().is_some());
        let first = submit(&mut core, &fence(7), 2, now);
        assert_eq!(first, Some(StatusCode::EIO));
        assert!(core.take_stopped());
        assert_eq!(submit(&mut core, &fence(7), 3, now), Some(StatusCode::EIO));
        // The add pending when the journal stopped fails as an add reply.
        let (to, reply) = core.fail_pending().expect("the add");
        assert_eq!((to, reply.status()), (1, StatusCode::EIO));
        assert!(matches!(reply, Response::AddEntry { .. }));
    }

    /// A reply that fails because the journal stopped keeps its kind and ids: a v2 client
    /// matches a read reply by ledger and entry (seed 42: a fence read got a bare
    /// `Response::Error`, which v2 cannot encode, and its client was never answered).
    #[test]
    fn failed_pending_replies_keep_their_kind() {
        let disk = SimDisk::new(SimConfig::new(3).with_latency_us(10, 10));
        let mut core = open(&disk);
        assert_eq!(submit(&mut core, &fence(9), 4, 0), None);
        let (to, reply) = core.fail_pending().expect("the fence");
        assert_eq!(to, 4);
        let frame = net::ResponseFrame {
            header: net::ResponseHeader::V2 { version: 2 },
            response: reply,
        };
        let mut out = bytes::BytesMut::new();
        net::codec::encode_response(&frame, &mut out).expect("encodable in v2");
        assert!(matches!(
            frame.response,
            Response::ReadEntry {
                status: StatusCode::EIO,
                ledger_id: 9,
                ..
            }
        ));
    }

    /// A shard that cannot flush keeps the ledgers GC would delete (seed 29: the deletion was
    /// never persisted, and the next start served the ledger again).
    #[test]
    fn a_read_only_shard_keeps_deleted_ledgers() {
        let disk = SimDisk::new(SimConfig::new(4));
        let mut core = open(&disk);
        assert_eq!(submit(&mut core, &fence(5), 1, 0), None);
        assert_eq!(core.delete_ledgers(&[5], false, 0), None);
        assert!(core.table.get(5).is_some());
        assert_eq!(core.delete_ledgers(&[5, 6], true, 0), Some(1));
        assert!(core.table.get(5).is_none());
        assert!(core.table.has_pending_deletes());
    }

    /// Java's `LedgerFencedAndDeletedException`: a ledger garbage collection dropped (fenced
    /// or not, as a 4.18 Java bookie in effect does) is not recreated by a zombie writer (an add
    /// gets EFENCED; an explicit LAC and a fence read ENOLEDGER), for 7 days after the last
    /// such request; a read-only shard, which keeps the ledger, remembers nothing.
    #[test]
    fn a_ledger_dropped_by_gc_is_not_recreated() {
        let disk = SimDisk::new(SimConfig::new(5));
        let mut core = open(&disk);
        assert_eq!(submit(&mut core, &fence(5), 1, 0), None);
        let add = |ledger: i64| Request::AddEntry {
            ledger_id: ledger,
            entry_id: 0,
            master_key: key(1),
            body: bytes::Bytes::from_static(&[0; 40]),
            recovery: false,
            write_flags: None,
        };
        assert!(matches!(
            core.decide(&add(6), false, 0, true, 1 << 20),
            Decision::Journal { .. }
        ));
        let now = 1_000_000;
        assert_eq!(core.delete_ledgers(&[5, 6], true, now), Some(2));
        let status = |core: &mut Core, request: &Request, at: i64| match core.decide(
            request,
            true,
            at,
            true,
            1 << 20,
        ) {
            Decision::Reply(r) => Some(r.status()),
            _ => None,
        };
        assert_eq!(status(&mut core, &add(5), now), Some(StatusCode::EFENCED));
        let write_lac = Request::WriteLac {
            ledger_id: 5,
            lac: 0,
            master_key: key(1),
            body: bytes::Bytes::from_static(&[0; 40]),
        };
        assert_eq!(
            status(&mut core, &write_lac, now),
            Some(StatusCode::ENOLEDGER)
        );
        assert_eq!(
            status(&mut core, &fence(5), now),
            Some(StatusCode::ENOLEDGER)
        );
        assert_eq!(
            status(&mut core, &add(6), now),
            Some(StatusCode::EFENCED),
            "a ledger dropped unfenced too"
        );
        assert_eq!(status(&mut core, &add(7), now), None, "another ledger");
        let week = crate::shard::fenced_deleted::REMEMBER_MS;
        assert_eq!(
            status(&mut core, &add(5), now + week - 1),
            Some(StatusCode::EFENCED)
        );
        assert_eq!(
            status(&mut core, &add(5), now + 3 * week),
            None,
            "forgotten 7 days after the last request"
        );
    }
}
