//! A shard's ledgers and the storage semantics of every request, as pure decisions: the table,
//! its state and the write side.
//!
//! `LedgerTable` knows each ledger the shard owns (master key, fenced flag, LAC, explicit LAC)
//! and holds its entries in the write cache. Each request method returns a [`Decision`]: reply
//! now, append journal records and reply once they are durable, reply once everything so far is
//! durable (FORCE_LEDGER), or wait for the LAC (long poll). No I/O and no clock here, so the
//! rules (docs/semantics.md §4, docs/protocol.md §3.5) are unit-tested directly; `shard` carries
//! the decisions out.
//!
//! This file holds the table, the decision types and what changes the table: adds, WRITE_LAC,
//! FORCE_LEDGER, the journal replay, freezing and flushing the write cache, deletions and the
//! cache accounting. The read-side decisions (READ_ENTRY with fence reads and long polls, batch
//! reads, READ_LAC, the entry list) are a second `impl LedgerTable` in `ledger_read`, so that
//! each file holds one side and stays small.
//!
//! Rules worth stating:
//! - The first request that touches a ledger (an add, a fence read, a WRITE_LAC) creates it
//!   with the request's master key and journals that key; later requests with another key get
//!   EUA.
//! - An add to a fenced ledger gets EFENCED unless it is a recovery add. Re-adding an entry
//!   overwrites it (clients re-send identical entries during ensemble changes and recovery).
//! - The LAC is the highest writer LAC carried by stored entries (body bytes 16..24, big
//!   endian), or set by WRITE_LAC (blob bytes 8..16); it never moves back.
//! - A full write cache holds adds back instead of refusing them, as Java's DbLedgerStorage
//!   does (it waits up to `dbStorage_maxThrottleTimeMs` for a flush): at the cache's size the
//!   shard stops reading sockets, and the adds it had already read still go in, into an
//!   overshoot of a quarter of the cache (at least 64 MiB). Only beyond that, which takes
//!   frames in flight from very many connections, an add gets ETOOMANYREQUESTS. A refusal
//!   would be worse than the wait: the Java client takes it for a failed bookie and changes
//!   the ensemble, or fails the ledger when no bookie is spare.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use net::{Response, StatusCode};

use crate::store::record::JournalRecord;

/// One ledger's state on this bookie.
#[derive(Debug)]
pub struct Ledger {
    pub master_key: Bytes,
    pub fenced: bool,
    /// Highest LAC seen, -1 when none.
    pub lac: i64,
    /// When `lac` last moved, ms since the epoch (long-poll replies carry it).
    pub lac_updated_ms: i64,
    pub explicit_lac: Option<Bytes>,
    /// The write cache: entries not yet in ledger storage.
    pub entries: BTreeMap<i64, Bytes>,
    /// Highest entry id handed to ledger storage (flushing or flushed), if any: entries not in
    /// the caches may be on disk only when this is set.
    pub persisted_last: Option<i64>,
}

impl Ledger {
    fn new(master_key: Bytes) -> Ledger {
        Ledger {
            master_key,
            fenced: false,
            lac: -1,
            lac_updated_ms: 0,
            explicit_lac: None,
            entries: BTreeMap::new(),
            persisted_last: None,
        }
    }

    pub(super) fn last_cached(&self) -> Option<i64> {
        self.entries.last_key_value().map(|(k, _)| *k)
    }
}

/// A read the caches cannot answer: a reader thread asks ledger storage.
#[derive(Debug, Clone)]
pub enum DiskRead {
    /// One entry; the reply says `reply_entry_id` (-1 stays -1 for "last entry").
    Entry {
        ledger: i64,
        entry: i64,
        reply_entry_id: i64,
        max_lac: Option<i64>,
    },
    /// v2 batch read from `start`.
    Batch {
        ledger: i64,
        start: i64,
        request_id: i64,
        max_count: i32,
        max_size: i64,
    },
    /// The entry ids of a ledger: those on disk plus `cached`.
    List { ledger: i64, cached: Vec<i64> },
    /// READ_LAC whose last entry is on disk.
    ReadLac {
        ledger: i64,
        entry: i64,
        lac_body: Option<Bytes>,
    },
    /// No request's: the run of a sequential reader from `entry`, read before it is asked for
    /// (`read::ahead`). Nothing is replied; the reader sends the run to the ledger's shard
    /// (`mailbox::RunLanded`), for its read-ahead cache and the reads parked on it.
    Prefetch { ledger: i64, entry: i64 },
}

/// A reply, or the disk read that will produce it.
#[derive(Debug)]
pub enum Answer {
    Now(Response),
    Disk(DiskRead),
}

impl From<Answer> for Decision {
    fn from(a: Answer) -> Decision {
        match a {
            Answer::Now(r) => Decision::Reply(r),
            Answer::Disk(d) => Decision::ReadDisk(d),
        }
    }
}

impl From<Response> for Answer {
    fn from(r: Response) -> Answer {
        Answer::Now(r)
    }
}

/// The entries of a frozen write cache, by ledger: shared by the shard (which keeps serving
/// reads from them) and the flush thread.
pub type FrozenEntries = Arc<HashMap<i64, BTreeMap<i64, Bytes>>>;

/// What a freeze hands to the flush thread.
pub struct FrozenBatch {
    pub entries: FrozenEntries,
    pub ledgers: Vec<entrylog::LedgerMeta>,
    pub journal_mark: u64,
}

impl FrozenBatch {
    /// The flush's input (built on the flush thread).
    pub fn to_flush_batch(&self) -> entrylog::FlushBatch {
        let count = self.entries.values().map(|m| m.len()).sum();
        let mut entries = Vec::with_capacity(count);
        // In key order (ledgers sorted, each ledger's entries already are), so the flush's
        // sort finds one run.
        let mut ledgers: Vec<(&i64, &BTreeMap<i64, Bytes>)> = self.entries.iter().collect();
        ledgers.sort_unstable_by_key(|(l, _)| **l as u64);
        for (&ledger, map) in ledgers {
            entries.extend(
                map.iter()
                    .map(|(e, b)| (ledger as u64, *e as u64, b.clone())),
            );
        }
        entrylog::FlushBatch {
            entries,
            ledgers: self.ledgers.clone(),
            journal_mark: self.journal_mark,
        }
    }
}

/// What the shard must do for a request.
#[derive(Debug)]
pub enum Decision {
    /// Send this reply now.
    Reply(Response),
    /// Hand this read to a reader thread.
    ReadDisk(DiskRead),
    /// Append the records (a new ledger's master key first, when present) and answer once the
    /// last one is durable.
    Journal {
        master_key: Option<JournalRecord>,
        record: Option<JournalRecord>,
        reply: Answer,
    },
    /// Send the reply once every record appended so far is durable.
    AfterDurable(Response),
    /// Long poll: wait until the ledger's LAC passes `previous_lac` (or it is fenced), or the
    /// timeout, then answer with [`LedgerTable::long_poll_reply`].
    WaitLac {
        ledger: i64,
        previous_lac: i64,
        timeout_ms: u64,
    },
}

/// The ledgers a shard owns.
pub struct LedgerTable {
    pub(super) ledgers: HashMap<i64, Ledger>,
    /// Entries being flushed to ledger storage (readable until the flush completes).
    pub(super) frozen: Option<FrozenEntries>,
    cached_bytes: usize,
    frozen_bytes: usize,
    /// The write cache's size: at it the shard stops reading sockets ([`Self::is_full`]).
    cache_limit_bytes: usize,
    /// Adds already read when the cache filled still go in, up to this much more; beyond it
    /// they get ETOOMANYREQUESTS (module docs).
    overshoot_bytes: usize,
    /// Ledgers deleted since the last freeze: the next flush persists them as tombstones.
    deleted: Vec<i64>,
}

fn entry_lac(body: &[u8]) -> Option<i64> {
    body.get(16..24)
        .map(|b| i64::from_be_bytes(b.try_into().expect("8 bytes")))
}

impl LedgerTable {
    /// A table whose write cache holds `cache_limit_bytes`, with the default overshoot for
    /// adds already read when it fills: a quarter of the cache, at least 64 MiB.
    pub fn new(cache_limit_bytes: usize) -> LedgerTable {
        Self::with_overshoot(cache_limit_bytes, (cache_limit_bytes / 4).max(64 << 20))
    }

    pub fn with_overshoot(cache_limit_bytes: usize, overshoot_bytes: usize) -> LedgerTable {
        LedgerTable {
            ledgers: HashMap::new(),
            frozen: None,
            cached_bytes: 0,
            frozen_bytes: 0,
            cache_limit_bytes,
            overshoot_bytes,
            deleted: Vec::new(),
        }
    }

    /// Loads the ledgers ledger storage recovered (before the journal replay).
    pub fn load(&mut self, metas: Vec<entrylog::LedgerMeta>) {
        for m in metas.into_iter().filter(|m| !m.deleted) {
            let mut l = Ledger::new(m.master_key);
            l.fenced = m.fenced;
            l.lac = m.lac.map(|v| v as i64).unwrap_or(-1);
            l.explicit_lac = m.explicit_lac;
            l.persisted_last = m.last_entry.map(|v| v as i64);
            self.ledgers.insert(m.ledger as i64, l);
        }
    }

    /// Adopts a ledger taken over from a Java bookie (`store::takeover`): a ledger this table
    /// does not know comes in as Java left it; one it knows (from an earlier start, or from
    /// Java's journal tail) keeps its own state, takes Java's key if it has none, stays fenced
    /// if either is, and reads from disk up to the later of the two last entries.
    pub fn adopt(&mut self, ledger: i64, java: &crate::store::takeover::LegacyLedger) {
        let l = self
            .ledgers
            .entry(ledger)
            .or_insert_with(|| Ledger::new(java.master_key.clone()));
        if l.master_key.is_empty() {
            l.master_key = java.master_key.clone();
        }
        l.fenced |= java.fenced;
        l.lac = l.lac.max(java.lac);
        if let (None, Some(body)) = (&l.explicit_lac, &java.explicit_lac) {
            Self::set_explicit_lac(l, body.clone(), 0);
        }
        l.persisted_last = l.persisted_last.max(java.last_entry.map(|e| e as i64));
    }

    /// Moves the write cache into the frozen set and returns what to flush, unless a flush is
    /// still in progress. `journal_mark`: every journal record below it is in the batch.
    /// O(ledgers): the entries move as whole maps, shared with the flush thread, which builds
    /// the flush's list itself, so a freeze never stalls the shard for the size of the cache.
    pub fn freeze(&mut self, journal_mark: u64) -> Option<FrozenBatch> {
        if self.frozen.is_some() {
            return None;
        }
        let mut frozen = HashMap::new();
        let mut ledgers = Vec::with_capacity(self.ledgers.len());
        for (&id, l) in self.ledgers.iter_mut() {
            let cached = std::mem::take(&mut l.entries);
            if let Some(last) = cached.keys().next_back() {
                l.persisted_last = l.persisted_last.max(Some(*last));
            }
            if !cached.is_empty() {
                frozen.insert(id, cached);
            }
            ledgers.push(entrylog::LedgerMeta {
                ledger: id as u64,
                master_key: l.master_key.clone(),
                fenced: l.fenced,
                deleted: false,
                explicit_lac: l.explicit_lac.clone(),
                last_entry: l.persisted_last.map(|v| v as u64),
                lac: (l.lac >= 0).then_some(l.lac as u64),
            });
        }
        for id in self.deleted.drain(..) {
            ledgers.push(entrylog::LedgerMeta {
                ledger: id as u64,
                deleted: true,
                ..entrylog::LedgerMeta::default()
            });
        }
        let entries = Arc::new(frozen);
        self.frozen = Some(entries.clone());
        self.frozen_bytes = self.cached_bytes;
        self.cached_bytes = 0;
        Some(FrozenBatch {
            entries,
            ledgers,
            journal_mark,
        })
    }

    /// The flush of the frozen set completed: ledger storage serves those entries now. Returns
    /// the frozen entries so the caller can have them freed off the shard's thread.
    pub fn flush_done(&mut self) -> Option<FrozenEntries> {
        self.frozen_bytes = 0;
        self.frozen.take()
    }

    /// Bytes waiting in the frozen set.
    pub fn frozen_bytes(&self) -> usize {
        self.frozen_bytes
    }
    pub fn get(&self, ledger: i64) -> Option<&Ledger> {
        self.ledgers.get(&ledger)
    }

    /// Drops a ledger whose metadata is gone from the cluster (garbage collection): its cached
    /// entries go now, and the next freeze carries a tombstone so ledger storage drops the
    /// rest. Returns whether the ledger was here.
    pub fn delete(&mut self, ledger: i64) -> bool {
        let Some(l) = self.ledgers.remove(&ledger) else {
            return false;
        };
        let bytes: usize = l.entries.values().map(|b| b.len()).sum();
        self.cached_bytes = self.cached_bytes.saturating_sub(bytes);
        self.deleted.push(ledger);
        true
    }

    /// Deletions not yet handed to a flush.
    pub fn has_pending_deletes(&self) -> bool {
        !self.deleted.is_empty()
    }

    /// The ids of the ledgers in the table.
    pub fn ids(&self) -> impl Iterator<Item = i64> + '_ {
        self.ledgers.keys().copied()
    }

    pub fn len(&self) -> usize {
        self.ledgers.len()
    }

    /// Bytes of entry bodies in the write cache.
    pub fn cached_bytes(&self) -> usize {
        self.cached_bytes
    }

    /// More than half the write cache is in use: the flush should hurry.
    pub fn under_pressure(&self) -> bool {
        (self.cached_bytes + self.frozen_bytes) * 2 >= self.cache_limit_bytes
    }

    /// The share of the write cache in use (with what is being flushed), 0.0 to 1.0 and more.
    pub fn fill(&self) -> f64 {
        (self.cached_bytes + self.frozen_bytes) as f64 / self.cache_limit_bytes.max(1) as f64
    }

    /// The write cache (with what is being flushed) is at its limit: stop taking adds.
    pub fn is_full(&self) -> bool {
        self.cached_bytes + self.frozen_bytes >= self.cache_limit_bytes
    }

    /// Applies a replayed journal record (recovery): the same state changes as the original
    /// request, without any check (they were checked when the record was written).
    pub fn replay(&mut self, record: JournalRecord, now_ms: i64) {
        match record {
            JournalRecord::Add {
                ledger,
                entry,
                body,
            } => {
                let l = self
                    .ledgers
                    .entry(ledger)
                    .or_insert_with(|| Ledger::new(Bytes::new()));
                Self::store(l, &mut self.cached_bytes, entry, body, now_ms);
            }
            JournalRecord::MasterKey { ledger, key } => {
                self.ledgers
                    .entry(ledger)
                    .or_insert_with(|| Ledger::new(Bytes::new()))
                    .master_key = key;
            }
            JournalRecord::Fence { ledger } => {
                self.ledgers
                    .entry(ledger)
                    .or_insert_with(|| Ledger::new(Bytes::new()))
                    .fenced = true;
            }
            JournalRecord::ExplicitLac { ledger, body } => {
                let l = self
                    .ledgers
                    .entry(ledger)
                    .or_insert_with(|| Ledger::new(Bytes::new()));
                Self::set_explicit_lac(l, body, now_ms);
            }
        }
    }

    fn store(l: &mut Ledger, cached: &mut usize, entry: i64, body: Bytes, now_ms: i64) {
        // Planted bug (`bookie::sim`): the LAC follows the entry ids, not the writer's word.
        let planted = mutation::on(mutation::Mutation::LacEarly).then_some(entry);
        if let Some(lac) = planted.or_else(|| entry_lac(&body)) {
            if lac > l.lac {
                l.lac = lac;
                l.lac_updated_ms = now_ms;
            }
        }
        *cached += body.len();
        if let Some(old) = l.entries.insert(entry, body) {
            *cached -= old.len();
        }
    }

    fn set_explicit_lac(l: &mut Ledger, body: Bytes, now_ms: i64) {
        if let Some(lac) = body
            .get(8..16)
            .map(|b| i64::from_be_bytes(b.try_into().expect("8 bytes")))
        {
            if lac > l.lac {
                l.lac = lac;
                l.lac_updated_ms = now_ms;
            }
        }
        l.explicit_lac = Some(body);
    }

    /// Finds the ledger, creating it with `key` when unknown. `Err` is the EUA reply case.
    pub(super) fn open_with_key<'a>(
        ledgers: &'a mut HashMap<i64, Ledger>,
        ledger: i64,
        key: &Bytes,
    ) -> Result<(&'a mut Ledger, bool), ()> {
        let mut created = false;
        let l = ledgers.entry(ledger).or_insert_with(|| {
            created = true;
            Ledger::new(key.clone())
        });
        if !created && l.master_key != *key {
            // A ledger created by replay of entries only (no key record) takes the first key.
            if l.master_key.is_empty() || l.master_key.iter().all(|&b| b == 0) {
                l.master_key = key.clone();
                return Ok((l, true));
            }
            return Err(());
        }
        Ok((l, created))
    }

    /// ADD_ENTRY. `Err(ledger)` never; the decision carries the status.
    pub fn add(
        &mut self,
        ledger: i64,
        entry: i64,
        master_key: &Bytes,
        body: Bytes,
        recovery: bool,
        now_ms: i64,
    ) -> Decision {
        let reply = |status| {
            Decision::Reply(Response::AddEntry {
                status,
                ledger_id: ledger,
                entry_id: entry,
            })
        };
        if entry < 0 {
            return reply(StatusCode::EBADREQ);
        }
        let cached = self.cached_bytes + self.frozen_bytes;
        let limit = self.cache_limit_bytes + self.overshoot_bytes;
        let (l, created) = match Self::open_with_key(&mut self.ledgers, ledger, master_key) {
            Ok(v) => v,
            Err(()) => return reply(StatusCode::EUA),
        };
        if l.fenced && !recovery {
            return reply(StatusCode::EFENCED);
        }
        if cached + body.len() > limit {
            return reply(StatusCode::ETOOMANYREQUESTS);
        }
        let key_record = created.then(|| JournalRecord::MasterKey {
            ledger,
            key: master_key.clone(),
        });
        Self::store(l, &mut self.cached_bytes, entry, body.clone(), now_ms);
        Decision::Journal {
            master_key: key_record,
            record: Some(JournalRecord::Add {
                ledger,
                entry,
                body,
            }),
            reply: Answer::Now(Response::AddEntry {
                status: StatusCode::EOK,
                ledger_id: ledger,
                entry_id: entry,
            }),
        }
    }

    /// WRITE_LAC: stores the blob and moves the LAC; journaled.
    pub fn write_lac(
        &mut self,
        ledger: i64,
        master_key: &Bytes,
        body: Bytes,
        now_ms: i64,
    ) -> Decision {
        let (l, created) = match Self::open_with_key(&mut self.ledgers, ledger, master_key) {
            Ok(v) => v,
            Err(()) => {
                return Decision::Reply(Response::WriteLac {
                    status: StatusCode::EUA,
                    ledger_id: ledger,
                })
            }
        };
        Self::set_explicit_lac(l, body.clone(), now_ms);
        Decision::Journal {
            master_key: created.then(|| JournalRecord::MasterKey {
                ledger,
                key: master_key.clone(),
            }),
            record: Some(JournalRecord::ExplicitLac { ledger, body }),
            reply: Answer::Now(Response::WriteLac {
                status: StatusCode::EOK,
                ledger_id: ledger,
            }),
        }
    }

    /// FORCE_LEDGER: answered when everything journaled so far is durable.
    pub fn force_ledger(&self, ledger: i64) -> Decision {
        Decision::AfterDurable(Response::ForceLedger {
            status: StatusCode::EOK,
            ledger_id: ledger,
        })
    }
}

/// Test helpers shared by the tests of `ledger` and `ledger_read`.
#[cfg(test)]
pub(crate) mod test_support {
    use bytes::Bytes;
    use net::StatusCode;

    use super::{Answer, Decision};

    pub fn key(b: u8) -> Bytes {
        Bytes::from(vec![b; 20])
    }

    /// An entry body as a BookKeeper client builds it: ledger, entry, writer LAC, then data.
    pub fn body(ledger: i64, entry: i64, lac: i64) -> Bytes {
        let mut v = Vec::new();
        v.extend_from_slice(&ledger.to_be_bytes());
        v.extend_from_slice(&entry.to_be_bytes());
        v.extend_from_slice(&lac.to_be_bytes());
        v.extend_from_slice(b"payload");
        Bytes::from(v)
    }

    pub fn status(d: &Decision) -> StatusCode {
        match d {
            Decision::Reply(r) | Decision::AfterDurable(r) => r.status(),
            Decision::Journal {
                reply: Answer::Now(reply),
                ..
            } => reply.status(),
            Decision::Journal { .. } | Decision::ReadDisk(_) => panic!("needs the disk"),
            Decision::WaitLac { .. } => StatusCode::EOK,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::{body, key, status};
    use super::*;
    use crate::store::ledger_read::LAST_ENTRY;

    /// The first add creates the ledger and journals its key; a wrong key later is EUA.
    #[test]
    fn first_add_records_the_master_key_and_a_wrong_key_is_eua() {
        let mut t = LedgerTable::new(1 << 30);
        match t.add(1, 0, &key(1), body(1, 0, -1), false, 0) {
            Decision::Journal {
                master_key: Some(JournalRecord::MasterKey { .. }),
                record: Some(JournalRecord::Add { .. }),
                ..
            } => {}
            other => panic!("unexpected {other:?}"),
        }
        match t.add(1, 1, &key(1), body(1, 1, 0), false, 0) {
            Decision::Journal {
                master_key: None, ..
            } => {}
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(
            status(&t.add(1, 2, &key(2), body(1, 2, 1), false, 0)),
            StatusCode::EUA
        );
    }

    /// Explicit LAC: WRITE_LAC moves the LAC from the blob, READ_LAC returns blob and last entry.
    #[test]
    fn explicit_lac() {
        let mut t = LedgerTable::new(1 << 30);
        let mut blob = Vec::new();
        blob.extend_from_slice(&8i64.to_be_bytes());
        blob.extend_from_slice(&41i64.to_be_bytes());
        let d = t.write_lac(8, &key(1), Bytes::from(blob.clone()), 0);
        assert_eq!(status(&d), StatusCode::EOK);
        assert_eq!(t.get(8).unwrap().lac, 41);
        match t.read_lac(8) {
            Decision::Reply(Response::ReadLac {
                status: StatusCode::EOK,
                lac_body: Some(b),
                last_entry_body: None,
                ..
            }) => assert_eq!(&b[..], &blob[..]),
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(
            status(&t.write_lac(8, &key(2), Bytes::from(blob), 0)),
            StatusCode::EUA
        );
    }

    /// Freezing hands every cached entry and every ledger's metadata to a flush; the frozen
    /// entries stay readable until the flush is done, and afterwards reads go to the disk.
    /// A deleted ledger is gone at once (ENOLEDGER, cache bytes freed), and the next freeze
    /// carries its tombstone; deleting an unknown ledger does nothing.
    #[test]
    fn delete_frees_the_cache_and_freezes_a_tombstone() {
        let mut t = LedgerTable::new(1 << 20);
        for e in 0..3 {
            t.add(5, e, &key(1), body(5, e, e - 1), false, 0);
            t.add(6, e, &key(1), body(6, e, e - 1), false, 0);
        }
        let before = t.cached_bytes();
        assert!(t.delete(5));
        assert!(!t.delete(5));
        assert!(!t.delete(77));
        assert!(t.has_pending_deletes());
        assert_eq!(t.cached_bytes(), before / 2);
        assert_eq!(
            status(&t.read(5, 0, None, None, None, None, true)),
            StatusCode::ENOLEDGER
        );
        let batch = t.freeze(10).expect("a batch");
        assert!(!t.has_pending_deletes());
        let tomb: Vec<_> = batch.ledgers.iter().filter(|m| m.deleted).collect();
        assert_eq!(tomb.len(), 1);
        assert_eq!(tomb[0].ledger, 5);
        assert!(!batch.entries.contains_key(&5));
        assert_eq!(batch.entries[&6].len(), 3);
    }

    #[test]
    fn freeze_then_disk_reads() {
        let mut t = LedgerTable::new(1 << 30);
        for e in 0..3 {
            t.add(6, e, &key(1), body(6, e, e - 1), false, 0);
        }
        let batch = t.freeze(17).expect("a batch").to_flush_batch();
        assert_eq!(batch.entries.len(), 3);
        assert_eq!(batch.journal_mark, 17);
        assert_eq!(batch.ledgers.len(), 1);
        assert_eq!(batch.ledgers[0].last_entry, Some(2));
        assert_eq!(batch.ledgers[0].lac, Some(1));
        assert!(t.freeze(18).is_none(), "one flush at a time");
        assert_eq!(
            status(&t.read(6, 1, None, None, None, None, true)),
            StatusCode::EOK
        );
        assert!(t.flush_done().is_some());
        match t.read(6, 1, None, None, None, None, true) {
            Decision::ReadDisk(DiskRead::Entry {
                ledger: 6,
                entry: 1,
                reply_entry_id: 1,
                max_lac: Some(1),
            }) => {}
            other => panic!("unexpected {other:?}"),
        }
        match t.read(6, LAST_ENTRY, None, None, None, None, false) {
            Decision::ReadDisk(DiskRead::Entry {
                entry: 2,
                reply_entry_id: LAST_ENTRY,
                max_lac: None,
                ..
            }) => {}
            other => panic!("unexpected {other:?}"),
        }
        t.add(6, 3, &key(1), body(6, 3, 2), false, 0);
        assert_eq!(
            status(&t.read(6, LAST_ENTRY, None, None, None, None, true)),
            StatusCode::EOK
        );
        match t.list_entries(6) {
            Decision::ReadDisk(DiskRead::List { ledger: 6, cached }) => assert_eq!(cached, vec![3]),
            other => panic!("unexpected {other:?}"),
        }
    }
}
