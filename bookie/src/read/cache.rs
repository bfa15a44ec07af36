//! The read-ahead cache: entries read from ledger storage ahead of the reader that will ask
//! for them (Java's `ReadCache` of `DbLedgerStorage`, sized by
//! `dbStorage_readAheadCacheMaxSizeMb`).
//!
//! A catch-up reader asks for entry e, then e+1, e+2, ...; flushes store a ledger's entries
//! contiguously (sorted by ledger and entry), so one large read at e's location brings the next
//! entries too (`entrylog::Reader::read_run` does that read and verifies every entry it brings). They wait
//! here, keyed by (ledger, entry), until asked for. Eviction is first-in first-out within a
//! byte budget, like Java's ring of segments: a run read ahead is consumed in order or not at
//! all. Owned by one shard's read-ahead (`ahead`): the reader threads never touch it, they
//! send what they read to the shard.
//!
//! A sequential reader is kept one run ahead: the run read for it carries a *trigger*, its
//! first entry; taking that entry (the reader has started on the run) hands back where the
//! next run starts ([`ReadCache::take_and_trigger`]), and the shard asks a reader thread to
//! read that run before it is asked for (`DiskRead::Prefetch`). A broker reading batches of 100
//! then finds each batch in the cache while the next one is read, instead of waiting on one
//! device read per batch. At most one run per ledger is read unasked: a reader that stops
//! leaves one run to age out.
//!
//! Entries are immutable once written (a ledger's entry id is assigned once by its single
//! writer; recovery rewrites the same bytes), so a cached entry never goes stale; entries of a
//! deleted ledger are never served: the shard's ledger table answers a read of a ledger it no
//! longer has before the cache is looked at, and they age out.

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;

/// How far ahead of the previous read of its ledger a read still counts as sequential. A
/// client reading a ledger written across an ensemble asks each bookie for every E-th entry
/// (the Java client without sticky reads, E3 W3: entries e, e+3, e+6, ...); Java's
/// DbLedgerStorage reads ahead on every miss, so such a reader must get runs here too. The
/// entries in between that the reader does not ask for age out of the cache.
pub const MAX_STRIDE: u64 = 8;

/// Entries read ahead, within a byte budget.
#[derive(Debug)]
pub struct ReadCache {
    map: HashMap<(u64, u64), Bytes>,
    /// Per ledger, the entry right after the last run read ahead: a miss there continues a
    /// sequential reader whose hits never reached the reader thread (the shard serves them).
    run_ends: HashMap<u64, u64>,
    /// Per ledger, the first entry of the last run read for a sequential reader: taking it
    /// starts the read of the run after it.
    triggers: HashMap<u64, u64>,
    /// Insertion order, for eviction; a key may be stale (already taken out).
    order: VecDeque<(u64, u64)>,
    bytes: usize,
    max_bytes: usize,
    /// Entries served from the cache, and entries inserted and evicted unread.
    pub hits: u64,
    pub inserted: u64,
    pub evicted_unread: u64,
}

impl ReadCache {
    pub fn new(max_bytes: usize) -> ReadCache {
        ReadCache {
            map: HashMap::new(),
            run_ends: HashMap::new(),
            triggers: HashMap::new(),
            order: VecDeque::new(),
            bytes: 0,
            max_bytes,
            hits: 0,
            inserted: 0,
            evicted_unread: 0,
        }
    }

    /// Takes the entry out: a catch-up reader reads each entry once, and another reader of the
    /// same entry finds it in the write cache or on disk.
    pub fn take(&mut self, ledger: u64, entry: u64) -> Option<Bytes> {
        let b = self.map.remove(&(ledger, entry))?;
        self.bytes -= b.len();
        self.hits += 1;
        Some(b)
    }

    /// As [`take`](Self::take), and when the entry is at or past its ledger's trigger, also
    /// where the next run starts: the caller has it read ahead (module docs).
    pub fn take_and_trigger(&mut self, ledger: u64, entry: u64) -> (Option<Bytes>, Option<u64>) {
        let body = self.take(ledger, entry);
        // At or past the trigger: a reader across an ensemble may skip the trigger entry.
        let fired = body.is_some() && self.triggers.get(&ledger).is_some_and(|&t| entry >= t);
        if !fired {
            return (body, None);
        }
        self.triggers.remove(&ledger);
        (body, self.run_ends.get(&ledger).copied())
    }

    /// Marks `entry` (the first of a run just read for a sequential reader) as the trigger
    /// of `ledger`'s next run.
    pub fn set_trigger(&mut self, ledger: u64, entry: u64) {
        if self.triggers.len() >= 4096 && !self.triggers.contains_key(&ledger) {
            self.triggers.clear();
        }
        self.triggers.insert(ledger, entry);
    }

    /// Records that a run of `ledger` read ahead ended before `next`.
    pub fn note_run_end(&mut self, ledger: u64, next: u64) {
        if self.run_ends.len() >= 4096 && !self.run_ends.contains_key(&ledger) {
            self.run_ends.clear();
        }
        self.run_ends.insert(ledger, next);
    }

    /// True when `entry` continues the last run read ahead for `ledger`: the one right after
    /// it, or a few further on (`MAX_STRIDE`: a client reading across an ensemble).
    pub fn follows_run(&self, ledger: u64, entry: u64) -> bool {
        self.run_ends
            .get(&ledger)
            .is_some_and(|&next| entry >= next && entry - next < MAX_STRIDE)
    }

    /// True when the last run read ahead for `ledger` started at or before `entry` and ended
    /// after it, within `window` entries: a run holding `entry` was read already (its
    /// entries may have been taken since), so a prefetch from `entry` would read it again.
    pub fn read_past(&self, ledger: u64, entry: u64, window: u64) -> bool {
        self.run_ends
            .get(&ledger)
            .is_some_and(|&next| next > entry && next - entry <= window)
    }

    /// True when the cache holds the entry.
    pub fn contains(&self, ledger: u64, entry: u64) -> bool {
        self.map.contains_key(&(ledger, entry))
    }

    /// Adds an entry, evicting the oldest to stay within the budget. An entry larger than
    /// the whole budget is not kept.
    pub fn insert(&mut self, ledger: u64, entry: u64, body: Bytes) {
        if body.len() > self.max_bytes {
            return;
        }
        while self.bytes + body.len() > self.max_bytes {
            let Some(k) = self.order.pop_front() else {
                break;
            };
            if let Some(old) = self.map.remove(&k) {
                self.bytes -= old.len();
                self.evicted_unread += 1;
            }
        }
        self.bytes += body.len();
        self.inserted += 1;
        if let Some(old) = self.map.insert((ledger, entry), body) {
            self.bytes -= old.len();
        } else {
            self.order.push_back((ledger, entry));
        }
        // Keys taken out leave stale slots in `order`; compact when they dominate.
        if self.order.len() > 2 * self.map.len() + 1024 {
            let map = &self.map;
            self.order.retain(|k| map.contains_key(k));
        }
    }

    /// Bytes of entry bodies held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Entries held.
    pub fn entries(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(n: usize, fill: u8) -> Bytes {
        Bytes::from(vec![fill; n])
    }

    #[test]
    fn take_once_and_evict_oldest_within_the_budget() {
        let mut c = ReadCache::new(300);
        c.insert(1, 0, body(100, 0));
        c.insert(1, 1, body(100, 1));
        c.insert(1, 2, body(100, 2));
        assert_eq!(c.bytes(), 300);
        assert_eq!(c.take(1, 1).unwrap(), body(100, 1));
        assert!(c.take(1, 1).is_none(), "taken once");
        assert_eq!(c.bytes(), 200);
        c.insert(2, 0, body(150, 9));
        // 200 + 150 > 300: the oldest (1:0) goes, 1:2 stays.
        assert!(!c.contains(1, 0));
        assert!(c.contains(1, 2));
        assert_eq!(c.bytes(), 250);
        assert_eq!(c.evicted_unread, 1);
        c.insert(3, 0, body(301, 1));
        assert!(!c.contains(3, 0), "larger than the budget: not kept");
        assert_eq!(c.hits, 1);
    }

    #[test]
    fn taking_the_trigger_gives_the_next_run_once() {
        let mut c = ReadCache::new(1 << 20);
        for e in 10..20 {
            c.insert(4, e, body(8, 0));
        }
        c.note_run_end(4, 20);
        c.set_trigger(4, 10);
        c.set_trigger(4, 12);
        assert_eq!(c.take_and_trigger(4, 11).1, None, "before the trigger");
        assert_eq!(
            c.take_and_trigger(4, 13).1,
            Some(20),
            "past it (a strided reader)"
        );
        c.set_trigger(4, 10);
        let (b, next) = c.take_and_trigger(4, 10);
        assert!(b.is_some());
        assert_eq!(next, Some(20));
        c.insert(4, 10, body(8, 0));
        assert_eq!(c.take_and_trigger(4, 10).1, None, "a trigger fires once");
        assert_eq!(
            c.take_and_trigger(5, 0),
            (None, None),
            "a miss never triggers"
        );
    }

    #[test]
    fn a_run_read_past_an_entry_is_not_read_again() {
        let mut c = ReadCache::new(1 << 20);
        c.note_run_end(3, 40);
        assert!(
            c.read_past(3, 37, 100),
            "37 lies in the run that ended before 40"
        );
        assert!(!c.read_past(3, 40, 100), "40 is the next run's first entry");
        assert!(
            !c.read_past(3, 5, 10),
            "far behind the last run: another reader of the ledger"
        );
        assert!(!c.read_past(4, 37, 100), "another ledger");
    }

    #[test]
    fn reinsert_replaces_and_stale_slots_are_compacted() {
        let mut c = ReadCache::new(1 << 20);
        c.insert(1, 0, body(10, 0));
        c.insert(1, 0, body(20, 1));
        assert_eq!(c.bytes(), 20);
        assert_eq!(c.entries(), 1);
        for e in 0..5000u64 {
            c.insert(7, e, body(8, 0));
            assert!(c.take(7, e).is_some());
        }
        assert!(c.order.len() <= 2 * c.map.len() + 1025);
        assert_eq!(c.bytes(), 20);
    }
}
