//! A shard's ledgers and the storage semantics of every request, as pure decisions.
//!
//! `LedgerTable` knows each ledger the shard owns (master key, fenced flag, LAC, explicit LAC)
//! and holds its entries in the write cache. Each request method returns a [`Decision`]: reply
//! now, append journal records and reply once they are durable, reply once everything so far is
//! durable (FORCE_LEDGER), or wait for the LAC (long poll). No I/O and no clock here, so the
//! rules (docs/semantics.md §4, docs/protocol.md §3.5) are unit-tested directly; `shard` carries
//! the decisions out.
//!
//! Rules worth stating:
//! - The first request that touches a ledger (an add, a fence read, a WRITE_LAC) creates it
//!   with the request's master key and journals that key; later requests with another key get
//!   EUA.
//! - An add to a fenced ledger gets EFENCED unless it is a recovery add. Re-adding an entry
//!   overwrites it (clients re-send identical entries during ensemble changes and recovery).
//! - The LAC is the highest writer LAC carried by stored entries (body bytes 16..24, big
//!   endian), or set by WRITE_LAC (blob bytes 8..16); it never moves back.
//! - Absent data is ENOLEDGER (unknown ledger) or ENOENTRY (known ledger), never EIO; READ_LAC
//!   answers ENOENTRY for an unknown ledger too, as Java does.
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
use net::{availability, ReadFlag, Response, StatusCode};

use crate::store::record::JournalRecord;

/// Entry id meaning "the last stored entry" (BookKeeper's `LAST_ADD_CONFIRMED`).
pub const LAST_ENTRY: i64 = -1;

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

    fn last_cached(&self) -> Option<i64> {
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
        for (&ledger, map) in self.entries.iter() {
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
    ledgers: HashMap<i64, Ledger>,
    /// Entries being flushed to ledger storage (readable until the flush completes).
    frozen: Option<FrozenEntries>,
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

    /// The entry from the write cache or the frozen set.
    fn cached(&self, ledger: i64, entry: i64) -> Option<&Bytes> {
        self.ledgers
            .get(&ledger)
            .and_then(|l| l.entries.get(&entry))
            .or_else(|| {
                self.frozen
                    .as_ref()
                    .and_then(|f| f.get(&ledger))
                    .and_then(|f| f.get(&entry))
            })
    }

    /// The highest entry id this bookie has for the ledger, in memory or on disk.
    fn last_entry_id(&self, ledger: i64, l: &Ledger) -> Option<i64> {
        let frozen = self
            .frozen
            .as_ref()
            .and_then(|f| f.get(&ledger))
            .and_then(|f| f.keys().next_back().copied());
        l.last_cached().max(frozen).max(l.persisted_last)
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
        if let Some(lac) = entry_lac(&body) {
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
    fn open_with_key<'a>(
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

    /// READ_ENTRY, including fence reads, "last entry" (-1) and long polls (`previous_lac`).
    #[allow(clippy::too_many_arguments)]
    pub fn read(
        &mut self,
        ledger: i64,
        entry: i64,
        flag: Option<ReadFlag>,
        master_key: Option<&Bytes>,
        previous_lac: Option<i64>,
        timeout_ms: Option<i64>,
        v3: bool,
    ) -> Decision {
        if flag == Some(ReadFlag::FenceLedger) {
            return self.fence_read(ledger, entry, master_key, v3);
        }
        if let (Some(previous_lac), true) = (previous_lac, v3) {
            let Some(l) = self.ledgers.get(&ledger) else {
                return self.entry_answer(ledger, entry, v3, false).into();
            };
            if flag == Some(ReadFlag::EntryPiggyback) && entry != LAST_ENTRY {
                return Decision::Reply(Response::ReadEntry {
                    status: StatusCode::EBADREQ,
                    ledger_id: ledger,
                    entry_id: entry,
                    body: None,
                    max_lac: None,
                    lac_update_timestamp: None,
                });
            }
            if l.lac > previous_lac || l.fenced {
                return Decision::Reply(self.long_poll_reply(ledger, entry, previous_lac, flag));
            }
            return Decision::WaitLac {
                ledger,
                previous_lac,
                timeout_ms: timeout_ms.unwrap_or(0).max(0) as u64,
            };
        }
        self.entry_answer(ledger, entry, v3, true).into()
    }

    fn fence_read(
        &mut self,
        ledger: i64,
        entry: i64,
        master_key: Option<&Bytes>,
        v3: bool,
    ) -> Decision {
        let eua = Response::ReadEntry {
            status: StatusCode::EUA,
            ledger_id: ledger,
            entry_id: entry,
            body: None,
            max_lac: None,
            lac_update_timestamp: None,
        };
        let Some(key) = master_key else {
            return Decision::Reply(eua);
        };
        let (l, created) = match Self::open_with_key(&mut self.ledgers, ledger, key) {
            Ok(v) => v,
            Err(()) => return Decision::Reply(eua),
        };
        let newly_fenced = !l.fenced;
        l.fenced = true;
        let key_record = created.then(|| JournalRecord::MasterKey {
            ledger,
            key: key.clone(),
        });
        // Fence reads carry no LAC in their reply (docs/protocol.md §3.5).
        let reply = self.entry_answer(ledger, entry, v3, false);
        Decision::Journal {
            master_key: key_record,
            record: newly_fenced.then_some(JournalRecord::Fence { ledger }),
            reply,
        }
    }

    /// The answer to a plain read of `entry` (or the last entry for -1): from the caches, or a
    /// disk read when ledger storage may have it.
    pub fn entry_answer(&self, ledger: i64, entry: i64, v3: bool, with_lac: bool) -> Answer {
        let Some(l) = self.ledgers.get(&ledger) else {
            return Answer::Now(Self::read_status(ledger, entry, StatusCode::ENOLEDGER));
        };
        let max_lac = (v3 && with_lac).then_some(l.lac);
        let wanted = if entry == LAST_ENTRY {
            match self.last_entry_id(ledger, l) {
                Some(id) => id,
                None => return Answer::Now(Self::read_status(ledger, entry, StatusCode::ENOENTRY)),
            }
        } else {
            entry
        };
        if let Some(body) = self.cached(ledger, wanted) {
            return Answer::Now(Response::ReadEntry {
                status: StatusCode::EOK,
                ledger_id: ledger,
                entry_id: entry,
                body: Some(body.clone()),
                max_lac,
                lac_update_timestamp: None,
            });
        }
        if l.persisted_last.is_some() {
            return Answer::Disk(DiskRead::Entry {
                ledger,
                entry: wanted,
                reply_entry_id: entry,
                max_lac,
            });
        }
        let mut reply = Self::read_status(ledger, entry, StatusCode::ENOENTRY);
        if let Response::ReadEntry { max_lac: m, .. } = &mut reply {
            *m = max_lac;
        }
        Answer::Now(reply)
    }

    fn read_status(ledger: i64, entry: i64, status: StatusCode) -> Response {
        Response::ReadEntry {
            status,
            ledger_id: ledger,
            entry_id: entry,
            body: None,
            max_lac: None,
            lac_update_timestamp: None,
        }
    }

    /// The reply to a long poll once the LAC moved (or the wait timed out): the bookie's LAC
    /// and, with ENTRY_PIGGYBACK, entry `previous_lac + 1` when it is in memory (a missing
    /// piggyback entry is not an error: with striping it may live on another bookie).
    pub fn long_poll_reply(
        &self,
        ledger: i64,
        entry: i64,
        previous_lac: i64,
        flag: Option<ReadFlag>,
    ) -> Response {
        let Some(l) = self.ledgers.get(&ledger) else {
            return Self::read_status(ledger, entry, StatusCode::ENOLEDGER);
        };
        let (entry_id, body) = if flag == Some(ReadFlag::EntryPiggyback) {
            let next = previous_lac.saturating_add(1);
            match self.cached(ledger, next) {
                Some(body) if l.lac >= next => (next, Some(body.clone())),
                _ => (entry, None),
            }
        } else {
            (entry, None)
        };
        Response::ReadEntry {
            status: StatusCode::EOK,
            ledger_id: ledger,
            entry_id,
            body,
            max_lac: Some(l.lac),
            lac_update_timestamp: Some(l.lac_updated_ms),
        }
    }

    /// v2 BATCH_READ_ENTRY: entries from `start` while present, at most `max_count` (≤ 0: no
    /// limit) and about `max_size` bytes; the first entry is always sent when present.
    #[allow(clippy::too_many_arguments)]
    pub fn batch_read(
        &mut self,
        ledger: i64,
        start: i64,
        request_id: i64,
        max_count: i32,
        max_size: i64,
        fence: bool,
        master_key: Option<&Bytes>,
    ) -> Decision {
        let mut fence_records = None;
        if fence {
            let eua = Self::batch_status(ledger, start, request_id, StatusCode::EUA);
            let Some(key) = master_key else {
                return Decision::Reply(eua);
            };
            match Self::open_with_key(&mut self.ledgers, ledger, key) {
                Err(()) => return Decision::Reply(eua),
                Ok((l, created)) => {
                    let newly = !l.fenced;
                    l.fenced = true;
                    fence_records = Some((
                        created.then(|| JournalRecord::MasterKey {
                            ledger,
                            key: key.clone(),
                        }),
                        newly.then_some(JournalRecord::Fence { ledger }),
                    ));
                }
            }
        }
        let reply = match self.ledgers.get(&ledger) {
            None => Answer::Now(Self::batch_status(
                ledger,
                start,
                request_id,
                StatusCode::ENOLEDGER,
            )),
            Some(l) => {
                let mut entries = Vec::new();
                let mut size = 0i64;
                let limit = if max_count <= 0 {
                    i64::MAX
                } else {
                    max_count as i64
                };
                let mut id = start;
                while (entries.len() as i64) < limit {
                    let Some(body) = self.cached(ledger, id) else {
                        break;
                    };
                    size += body.len() as i64 + 4;
                    if !entries.is_empty() && size > max_size {
                        break;
                    }
                    entries.push(body.clone());
                    id += 1;
                }
                if !entries.is_empty() {
                    Answer::Now(Response::BatchReadEntry {
                        status: StatusCode::EOK,
                        ledger_id: ledger,
                        start_entry_id: start,
                        request_id,
                        entries,
                    })
                } else if l.persisted_last.is_some() {
                    Answer::Disk(DiskRead::Batch {
                        ledger,
                        start,
                        request_id,
                        max_count,
                        max_size,
                    })
                } else {
                    Answer::Now(Self::batch_status(
                        ledger,
                        start,
                        request_id,
                        StatusCode::ENOENTRY,
                    ))
                }
            }
        };
        match fence_records {
            Some((master_key, record)) => Decision::Journal {
                master_key,
                record,
                reply,
            },
            None => reply.into(),
        }
    }

    pub fn batch_status(ledger: i64, start: i64, request_id: i64, status: StatusCode) -> Response {
        Response::BatchReadEntry {
            status,
            ledger_id: ledger,
            start_entry_id: start,
            request_id,
            entries: Vec::new(),
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

    /// READ_LAC: the explicit-LAC blob and the last entry, whichever exist.
    ///
    /// An unknown ledger gets ENOENTRY, not ENOLEDGER: Java's `ReadLacProcessorV3` notes
    /// ENOLEDGER from both look-ups and then overrides it with ENOENTRY because it found
    /// neither a blob nor an entry (the same on DbLedgerStorage and the interleaved
    /// storage, which both throw `NoLedgerException` from the read-only handle).
    pub fn read_lac(&self, ledger: i64) -> Decision {
        let Some(l) = self.ledgers.get(&ledger) else {
            return Decision::Reply(Self::read_lac_reply(ledger, None, None));
        };
        let lac_body = l.explicit_lac.clone();
        let last = self.last_entry_id(ledger, l);
        let last_entry_body = match last {
            Some(id) => match self.cached(ledger, id) {
                Some(b) => Some(b.clone()),
                None => {
                    return Decision::ReadDisk(DiskRead::ReadLac {
                        ledger,
                        entry: id,
                        lac_body,
                    })
                }
            },
            None => None,
        };
        Decision::Reply(Self::read_lac_reply(ledger, lac_body, last_entry_body))
    }

    pub fn read_lac_reply(
        ledger: i64,
        lac_body: Option<Bytes>,
        last_entry_body: Option<Bytes>,
    ) -> Response {
        let status = if lac_body.is_none() && last_entry_body.is_none() {
            StatusCode::ENOENTRY
        } else {
            StatusCode::EOK
        };
        Response::ReadLac {
            status,
            ledger_id: ledger,
            lac_body,
            last_entry_body,
        }
    }

    /// FORCE_LEDGER: answered when everything journaled so far is durable.
    pub fn force_ledger(&self, ledger: i64) -> Decision {
        Decision::AfterDurable(Response::ForceLedger {
            status: StatusCode::EOK,
            ledger_id: ledger,
        })
    }

    /// GET_LIST_OF_ENTRIES_OF_LEDGER.
    pub fn list_entries(&self, ledger: i64) -> Decision {
        let Some(l) = self.ledgers.get(&ledger) else {
            return Decision::Reply(Response::GetListOfEntriesOfLedger {
                status: StatusCode::ENOLEDGER,
                ledger_id: ledger,
                availability: None,
            });
        };
        let mut cached: Vec<i64> = l.entries.keys().copied().collect();
        if let Some(f) = self.frozen.as_ref().and_then(|f| f.get(&ledger)) {
            cached.extend(f.keys().copied());
            cached.sort_unstable();
            cached.dedup();
        }
        if l.persisted_last.is_some() {
            return Decision::ReadDisk(DiskRead::List { ledger, cached });
        }
        Decision::Reply(Response::GetListOfEntriesOfLedger {
            status: StatusCode::EOK,
            ledger_id: ledger,
            availability: Some(availability::encode_entries(cached)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(b: u8) -> Bytes {
        Bytes::from(vec![b; 20])
    }

    /// An entry body as a BookKeeper client builds it: ledger, entry, writer LAC, then data.
    fn body(ledger: i64, entry: i64, lac: i64) -> Bytes {
        let mut v = Vec::new();
        v.extend_from_slice(&ledger.to_be_bytes());
        v.extend_from_slice(&entry.to_be_bytes());
        v.extend_from_slice(&lac.to_be_bytes());
        v.extend_from_slice(b"payload");
        Bytes::from(v)
    }

    fn status(d: &Decision) -> StatusCode {
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

    /// Reads: unknown ledger ENOLEDGER, missing entry ENOENTRY, -1 the last entry, duplicates
    /// overwrite, and the LAC comes from the entries' own bytes.
    #[test]
    fn reads_and_error_codes() {
        let mut t = LedgerTable::new(1 << 30);
        assert_eq!(
            status(&t.read(9, 0, None, None, None, None, true)),
            StatusCode::ENOLEDGER
        );
        t.add(9, 0, &key(1), body(9, 0, -1), false, 0);
        t.add(9, 1, &key(1), body(9, 1, 0), false, 0);
        assert_eq!(
            status(&t.read(9, 5, None, None, None, None, true)),
            StatusCode::ENOENTRY
        );
        match t.read(9, LAST_ENTRY, None, None, None, None, true) {
            Decision::Reply(Response::ReadEntry {
                body: Some(b),
                max_lac,
                entry_id,
                ..
            }) => {
                assert_eq!(b, body(9, 1, 0));
                assert_eq!(max_lac, Some(0));
                assert_eq!(entry_id, LAST_ENTRY);
            }
            other => panic!("unexpected {other:?}"),
        }
        // Re-sent entry 1, other bytes, an older writer LAC.
        let mut again = body(9, 1, -1).to_vec();
        again.extend_from_slice(b" (re-sent)");
        let again = Bytes::from(again);
        t.add(9, 1, &key(1), again.clone(), false, 0);
        match t.read(9, 1, None, None, None, None, false) {
            Decision::Reply(Response::ReadEntry {
                body: Some(b),
                max_lac: None,
                ..
            }) => {
                assert_eq!(b, again)
            }
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(t.get(9).unwrap().lac, 0, "the LAC never moves back");
    }

    /// Fencing needs the key, is journaled once, blocks normal adds and lets recovery adds in.
    #[test]
    fn fencing() {
        let mut t = LedgerTable::new(1 << 30);
        t.add(3, 0, &key(1), body(3, 0, -1), false, 0);
        let fence = Some(ReadFlag::FenceLedger);
        assert_eq!(
            status(&t.read(3, 0, fence, None, None, None, true)),
            StatusCode::EUA
        );
        assert_eq!(
            status(&t.read(3, 0, fence, Some(&key(2)), None, None, true)),
            StatusCode::EUA
        );
        match t.read(3, 0, fence, Some(&key(1)), None, None, true) {
            Decision::Journal {
                record: Some(JournalRecord::Fence { ledger: 3 }),
                reply:
                    Answer::Now(Response::ReadEntry {
                        status, max_lac, ..
                    }),
                ..
            } => {
                assert_eq!(status, StatusCode::EOK);
                assert_eq!(max_lac, None);
            }
            other => panic!("unexpected {other:?}"),
        }
        match t.read(3, 0, fence, Some(&key(1)), None, None, true) {
            Decision::Journal { record: None, .. } => {}
            other => panic!("fencing twice journals nothing: {other:?}"),
        }
        assert_eq!(
            status(&t.add(3, 1, &key(1), body(3, 1, 0), false, 0)),
            StatusCode::EFENCED
        );
        assert_eq!(
            status(&t.add(3, 1, &key(1), body(3, 1, 0), true, 0)),
            StatusCode::EOK
        );
        // Fencing an unknown ledger creates it (and journals its key).
        match t.read(4, 0, fence, Some(&key(7)), None, None, true) {
            Decision::Journal {
                master_key: Some(_),
                record: Some(_),
                reply: Answer::Now(reply),
                ..
            } => {
                assert_eq!(reply.status(), StatusCode::ENOENTRY)
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    /// A long poll answers at once when the LAC is already past `previous_lac` (piggybacking
    /// the next entry), and waits otherwise.
    #[test]
    fn long_poll() {
        let mut t = LedgerTable::new(1 << 30);
        t.add(5, 0, &key(1), body(5, 0, -1), false, 0);
        t.add(5, 1, &key(1), body(5, 1, 0), false, 7);
        let piggy = Some(ReadFlag::EntryPiggyback);
        match t.read(5, LAST_ENTRY, piggy, None, Some(-1), Some(100), true) {
            Decision::Reply(Response::ReadEntry {
                entry_id: 0,
                body: Some(_),
                max_lac: Some(0),
                lac_update_timestamp: Some(7),
                ..
            }) => {}
            other => panic!("unexpected {other:?}"),
        }
        match t.read(5, LAST_ENTRY, piggy, None, Some(0), Some(100), true) {
            Decision::WaitLac {
                ledger: 5,
                previous_lac: 0,
                timeout_ms: 100,
            } => {}
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(
            status(&t.read(5, 3, piggy, None, Some(0), Some(100), true)),
            StatusCode::EBADREQ
        );
        assert_eq!(
            status(&t.read(6, LAST_ENTRY, piggy, None, Some(0), Some(100), true)),
            StatusCode::ENOLEDGER
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

    /// READ_LAC answers as Java's ReadLacProcessorV3 does: ENOENTRY, never ENOLEDGER, when it
    /// finds neither an explicit LAC nor an entry, whether the ledger is unknown, known
    /// without data (created by a fence read), or deleted.
    #[test]
    fn read_lac_without_lac_or_entry_is_enoentry() {
        let mut t = LedgerTable::new(1 << 30);
        let unknown = match t.read_lac(8) {
            Decision::Reply(reply) => reply,
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(
            unknown,
            Response::ReadLac {
                status: StatusCode::ENOENTRY,
                ledger_id: 8,
                lac_body: None,
                last_entry_body: None,
            }
        );
        let fence = Some(ReadFlag::FenceLedger);
        t.read(9, LAST_ENTRY, fence, Some(&key(1)), None, None, true);
        assert!(t.get(9).is_some());
        assert_eq!(status(&t.read_lac(9)), StatusCode::ENOENTRY);
        t.add(10, 0, &key(1), body(10, 0, -1), false, 0);
        assert_eq!(status(&t.read_lac(10)), StatusCode::EOK);
        t.delete(10);
        assert_eq!(status(&t.read_lac(10)), StatusCode::ENOENTRY);
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

    /// Batch reads stop at the count, the size, or the first missing entry; a full write cache
    /// still takes adds into its overshoot, and turns them away with ETOOMANYREQUESTS beyond.
    #[test]
    fn batch_read_and_cache_limit() {
        let mut t = LedgerTable::with_overshoot(100, 100);
        for e in 0..4 {
            assert_eq!(
                status(&t.add(2, e, &key(1), body(2, e, e - 1), false, 0)),
                StatusCode::EOK
            );
        }
        assert!(t.is_full(), "{} bytes cached", t.cached_bytes());
        assert_eq!(
            status(&t.add(2, 9, &key(1), Bytes::from(vec![0u8; 200]), false, 0)),
            StatusCode::ETOOMANYREQUESTS
        );
        let count = |d: Decision| match d {
            Decision::Reply(Response::BatchReadEntry { entries, .. }) => entries.len(),
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(count(t.batch_read(2, 0, 1, 10, 1 << 20, false, None)), 4);
        assert_eq!(count(t.batch_read(2, 1, 1, 2, 1 << 20, false, None)), 2);
        assert_eq!(count(t.batch_read(2, 0, 1, 0, 80, false, None)), 2);
        assert_eq!(
            status(&t.batch_read(2, 7, 1, 10, 1 << 20, false, None)),
            StatusCode::ENOENTRY
        );
        assert_eq!(
            status(&t.batch_read(1, 0, 1, 10, 1 << 20, false, None)),
            StatusCode::ENOLEDGER
        );
    }
}
