//! [`Reader`]: cache-miss reads for a reader thread, with its own `Storage` (io_uring rings
//! are per thread), its own open-file handles and its own LRU cache of index blocks. Every
//! call takes the [`ReadView`] to read from, so a reader never sees a half-published flush.
//!
//! A read looks the key up in the runs newest first, then reads the entry from its segment and
//! verifies its header (magic, version, ledger, entry, length) and CRC: corruption is an
//! error, never silently wrong data.
//!
//! Read-ahead ([`ReadAhead`]): a catch-up reader asks for a ledger's entries in order, and a
//! flush stores them contiguously, so when a read follows the previous read of its ledger (right
//! after it or a few entries on, `read_cache::MAX_STRIDE`: a client reading across an ensemble
//! asks each bookie for every E-th entry), or starts a batch read, the reader looks up the next
//! entries in the index too, and as long as
//! each lies right after the one before in the same segment, reads the whole run in one aligned
//! read (within `max_bytes`, `max_entries`). Every entry of the run is verified like a single
//! read; the ones beyond the asked entry go to the shared [`ReadCache`]. The index decides what
//! is read, never the bytes on disk alone, so a stale copy left by compaction is never served.
//!
//! A sequential reader is then kept a run ahead: the run read for it carries a trigger in the
//! cache (`read_cache` module docs), and whoever takes the trigger entry (a shard serving a
//! hit, or this reader) has the next run read by [`Reader::prefetch`] before it is asked for.
//! [`Reader::prefetch_runs`] reads a run and the runs after it with their device reads in
//! flight together, so the device reads the next while this thread verifies the one before.
//!
//! A run's lookups cost one search, not one per entry: the lookup of its first entry leaves a
//! cursor on the record found, bounded by the lowest key any newer index run holds above it,
//! and the next keys are taken from the records after it while they stay below that bound (a
//! re-added entry in a newer run is still found there). An index block a run misses is read
//! with the blocks after it (`INDEX_READ_AHEAD_BLOCKS`), so a catch-up does not wait on a 4 KiB
//! index read in front of every few runs.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use storage::{Completion, FileId, Storage, Wait};

use crate::error::{CorruptionKind, StoreError};
use crate::format::*;
use crate::index::{self, Block, BlockCache, IndexRecord, Key, RunInfo};
use crate::read_cache::ReadCache;
use crate::segment::{self, Location};
use crate::store::{LedgerStoreConfig, ReadView};

/// Read-ahead settings and the cache shared by the readers of one shard (Java's
/// `dbStorage_readAheadCacheMaxSizeMb`, `dbStorage_readAheadCacheBatchSize`,
/// `dbStorage_readAheadCacheBatchBytesSize`).
#[derive(Clone, Debug)]
pub struct ReadAhead {
    pub cache: Arc<Mutex<ReadCache>>,
    /// Entries per read-ahead, the asked one included.
    pub max_entries: usize,
    /// Bytes per read-ahead (one read of the device).
    pub max_bytes: usize,
}

impl ReadAhead {
    /// Whether a read-ahead would ever bring more than the asked entry.
    pub fn is_on(&self) -> bool {
        self.max_entries > 1 && self.max_bytes > 0
    }
}

/// Index blocks read in one device read when a run read ahead misses one: the blocks after
/// it hold the keys the sequential reader asks next (64 KiB, ~2,000 entries, ~20 runs), so
/// the index costs a catch-up one device read per 20 runs rather than one per run.
const INDEX_READ_AHEAD_BLOCKS: u32 = 16;

/// Ledgers whose last asked entry a reader remembers, to tell sequential reads.
const SEQUENTIAL_LEDGERS: usize = 4096;

/// A reader thread's handle on one shard's ledger storage.
pub struct Reader<S: Storage> {
    storage: S,
    cache: BlockCache,
    files: HashMap<(FileKind, u64), FileId>,
    /// Generation of the view the file handles were last pruned against.
    pruned_for: u64,
    ahead: Option<ReadAhead>,
    /// The last entry asked of each recently read ledger.
    last_asked: HashMap<u64, u64>,
    /// Runs due to be read ahead (ledger, first entry): triggers this reader took itself.
    due: Vec<(u64, u64)>,
    /// Device reads of more than one entry, and the entries they brought beyond the asked one.
    pub runs_read: u64,
    pub entries_ahead: u64,
}

impl<S: Storage> Reader<S> {
    pub fn new(storage: S, config: &LedgerStoreConfig) -> Reader<S> {
        Reader {
            storage,
            cache: BlockCache::new(config.index_block_cache_bytes),
            files: HashMap::new(),
            pruned_for: 0,
            ahead: None,
            last_asked: HashMap::new(),
            due: Vec::new(),
            runs_read: 0,
            entries_ahead: 0,
        }
    }

    /// The storage port this reader reads through.
    pub fn storage(&self) -> &S {
        &self.storage
    }

    /// Turns read-ahead on (module docs), unless `ahead` reads no more than one entry.
    pub fn with_read_ahead(mut self, ahead: ReadAhead) -> Reader<S> {
        if ahead.is_on() {
            self.ahead = Some(ahead);
        }
        self
    }

    /// The entry's body, `None` if the store does not have it (or its ledger is deleted).
    /// With read-ahead on, a read that follows the previous read of its ledger reads the
    /// run after it too.
    pub fn read(
        &mut self,
        view: &ReadView,
        ledger: u64,
        entry: u64,
    ) -> Result<Option<Bytes>, StoreError> {
        let sequential = self.is_sequential(ledger, entry);
        self.read_ahead_of(view, ledger, entry, if sequential { usize::MAX } else { 1 })
    }

    /// The first entry of a batch read of up to `count` entries: the run after it is read
    /// ahead (up to `count` entries in all) whatever came before.
    pub fn read_batch_start(
        &mut self,
        view: &ReadView,
        ledger: u64,
        entry: u64,
        count: usize,
    ) -> Result<Option<Bytes>, StoreError> {
        self.note_asked(ledger, entry);
        self.read_ahead_of(view, ledger, entry, count)
    }

    /// Reads several entries, with the device reads of those that are not sequential all in
    /// flight at once on this reader's ring: random reads at the device's depth from one
    /// thread, one `io_uring_enter` for the lot. Entries in the read-ahead cache are taken
    /// from it, and a read that follows the previous read of its ledger goes through
    /// [`read`](Self::read) (with its read-ahead) before the others are submitted. One result
    /// per asked `(view, ledger, entry)`, in order; each entry is verified as a single read is.
    pub fn read_each(
        &mut self,
        asked: &[(&ReadView, u64, u64)],
    ) -> Vec<Result<Option<Bytes>, StoreError>> {
        let mut results: Vec<Option<Result<Option<Bytes>, StoreError>>> =
            (0..asked.len()).map(|_| None).collect();
        let mut pending: Vec<PendingRead> = Vec::new();
        for (at, &(view, ledger, entry)) in asked.iter().enumerate() {
            if self.is_sequential(ledger, entry) {
                results[at] = Some(self.read_ahead_of(view, ledger, entry, usize::MAX));
                continue;
            }
            match self.single_read_of(view, ledger, entry) {
                Ok(Single::Done(body)) => results[at] = Some(Ok(body)),
                Ok(Single::Device(loc, file)) => pending.push(PendingRead {
                    at,
                    loc,
                    file,
                    ledger,
                    entry,
                }),
                Err(e) => results[at] = Some(Err(e)),
            }
        }
        for (at, r) in self.read_all(&pending) {
            results[at] = Some(r);
        }
        results
            .into_iter()
            .map(|r| r.expect("every asked entry answered"))
            .collect()
    }

    /// Whether a read of `entry` would read ahead (it follows the previous read of its
    /// ledger, or the end of a run read ahead); notes it as asked.
    fn is_sequential(&mut self, ledger: u64, entry: u64) -> bool {
        let in_order = self.note_asked(ledger, entry);
        in_order
            || self.ahead.as_ref().is_some_and(|a| {
                a.cache
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .follows_run(ledger, entry)
            })
    }

    /// A single read without read-ahead, up to the device: answered already (deleted ledger,
    /// read-ahead cache, not in the index) or where to read it.
    fn single_read_of(
        &mut self,
        view: &ReadView,
        ledger: u64,
        entry: u64,
    ) -> Result<Single, StoreError> {
        self.prune(view);
        if view.is_deleted(ledger) {
            return Ok(Single::Done(None));
        }
        if let Some(body) = self.take_read_ahead(ledger, entry) {
            return Ok(Single::Done(Some(body)));
        }
        let Some(loc) = self.locate(view, ledger, entry)? else {
            return Ok(Single::Done(None));
        };
        let file = self.file(FileKind::Segment, loc.segment as u64)?;
        Ok(Single::Device(loc, file))
    }

    /// Submits every read of `pending` (the storage port queues them; the first wait enters
    /// the kernel once for all), then reaps them as they complete. A short read (a fault, or
    /// a file shorter than the index says) is read again alone, once the ring is drained.
    fn read_all(
        &mut self,
        pending: &[PendingRead],
    ) -> Vec<(usize, Result<Option<Bytes>, StoreError>)> {
        let mut done = Vec::with_capacity(pending.len());
        // Per pending read: answered, or to read again alone.
        let mut answered = vec![false; pending.len()];
        let mut waiting = 0usize;
        // Per pending read: where its record starts in the buffer its read fills.
        let mut skips = vec![0; pending.len()];
        for (k, p) in pending.iter().enumerate() {
            let want = ENTRY_HEADER_BYTES + p.loc.length as usize;
            let (op, skip) = crate::io::aligned_read(p.file, p.loc.offset, want);
            skips[k] = skip;
            match self.storage.submit(k as u64, op) {
                Ok(()) => waiting += 1,
                Err((e, _)) => {
                    answered[k] = true;
                    done.push((p.at, Err(p.io_error(e))));
                }
            }
        }
        let mut out: Vec<Completion> = Vec::with_capacity(waiting);
        while waiting > 0 {
            if let Err(e) = self
                .storage
                .poll(&mut out, Wait::AtLeastOne { timeout_us: None })
            {
                // The ring itself failed: nothing more will complete here.
                for (k, p) in pending.iter().enumerate() {
                    if !answered[k] {
                        done.push((p.at, Err(p.io_error(e))));
                    }
                }
                return done;
            }
            if out.is_empty() && self.storage.in_flight() == 0 {
                break;
            }
            for c in out.drain(..) {
                let k = c.token as usize;
                let Some(p) = pending.get(k) else {
                    continue;
                };
                waiting -= 1;
                let skip = skips[k];
                let total = ENTRY_HEADER_BYTES + p.loc.length as usize;
                match (c.result, c.buf) {
                    (Ok(n), Some(buf)) if n >= skip + total => {
                        answered[k] = true;
                        let body = &buf[skip..skip + total];
                        let r = segment::decode_entry(body, p.loc, p.ledger, p.entry);
                        done.push((p.at, r.map(Some)));
                    }
                    (Ok(_), _) => {} // short: read again below
                    (Err(e), _) => {
                        answered[k] = true;
                        done.push((p.at, Err(p.io_error(e))));
                    }
                }
            }
        }
        for (k, p) in pending.iter().enumerate() {
            if !answered[k] {
                let r = segment::read_entry(&mut self.storage, p.file, p.loc, p.ledger, p.entry);
                done.push((p.at, r.map(Some)));
            }
        }
        done
    }

    /// The entry from the read-ahead cache, taken out of it (read-ahead off: `None`). When
    /// it was its ledger's trigger, the next run is due ([`take_due`](Self::take_due)).
    fn take_read_ahead(&mut self, ledger: u64, entry: u64) -> Option<Bytes> {
        let ahead = self.ahead.as_ref()?;
        let (body, next) = ahead
            .cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take_and_trigger(ledger, entry);
        if let Some(next) = next {
            self.due.push((ledger, next));
        }
        body
    }

    /// The runs this reader found due while reading (it took their triggers): the caller
    /// reads them with [`prefetch`](Self::prefetch) once its replies are out.
    pub fn take_due(&mut self) -> Vec<(u64, u64)> {
        std::mem::take(&mut self.due)
    }

    /// Reads the run of `ledger` from `start` into the read-ahead cache, unasked: a sequential
    /// reader has started on the run before it (module docs). Its first entry becomes the
    /// trigger of the run after. Does nothing when read-ahead is off, the entry is cached
    /// already, or the store does not have it (the reader caught up with the write cache).
    /// Returns the entries read.
    pub fn prefetch(
        &mut self,
        view: &ReadView,
        ledger: u64,
        start: u64,
    ) -> Result<usize, StoreError> {
        let mut entries = 0;
        self.prefetch_runs(view, ledger, start, 1, |_, n| entries = n)?;
        Ok(entries)
    }

    /// Records that `entry` of `ledger` was asked; true if it follows the previous one asked
    /// (right after it, or up to `MAX_STRIDE` further: a reader across an ensemble).
    fn note_asked(&mut self, ledger: u64, entry: u64) -> bool {
        if self.ahead.is_none() {
            return false;
        }
        if self.last_asked.len() >= SEQUENTIAL_LEDGERS && !self.last_asked.contains_key(&ledger) {
            self.last_asked.clear();
        }
        let before = self.last_asked.insert(ledger, entry);
        before.is_some_and(|b| entry > b && entry - b <= crate::read_cache::MAX_STRIDE)
    }

    /// Reads `entry`, from the read-ahead cache if there, else from disk with up to
    /// `want - 1` entries after it when they are contiguous.
    fn read_ahead_of(
        &mut self,
        view: &ReadView,
        ledger: u64,
        entry: u64,
        want: usize,
    ) -> Result<Option<Bytes>, StoreError> {
        self.prune(view);
        if view.is_deleted(ledger) {
            return Ok(None);
        }
        if let Some(body) = self.take_read_ahead(ledger, entry) {
            return Ok(Some(body));
        }
        let max_entries = match &self.ahead {
            Some(a) if want > 1 => a.max_entries.min(want),
            _ => 1,
        };
        let Some(bodies) = self.read_run(view, ledger, entry, max_entries)? else {
            return Ok(None);
        };
        if bodies.len() > 1 {
            self.runs_read += 1;
            self.entries_ahead += bodies.len() as u64 - 1;
        }
        let ahead_of = bodies.len() > 1;
        let mut bodies = bodies.into_iter();
        let asked = bodies.next();
        if let (Some(ahead), true) = (&self.ahead, ahead_of) {
            let mut cache = ahead.cache.lock().unwrap_or_else(|p| p.into_inner());
            let mut next = entry + 1;
            for body in bodies {
                cache.insert(ledger, next, body);
                next += 1;
            }
            cache.note_run_end(ledger, next);
            if want == usize::MAX {
                // A sequential reader: the first entry it has yet to take starts the next run.
                cache.set_trigger(ledger, entry + 1);
            }
        }
        Ok(asked)
    }

    /// Reads `entry` and up to `max_entries - 1` entries after it as one device read, as long
    /// as their index locations follow one another in one segment (within the read-ahead's
    /// byte limit), each verified. `None` when the store does not have `entry`; a bad entry
    /// after the first ends the run (it is reported when asked for by itself).
    fn read_run(
        &mut self,
        view: &ReadView,
        ledger: u64,
        entry: u64,
        max_entries: usize,
    ) -> Result<Option<Vec<Bytes>>, StoreError> {
        let Some(plan) = self.plan_run(view, ledger, entry, max_entries)? else {
            return Ok(None);
        };
        if plan.locs.len() == 1 {
            let body =
                segment::read_entry(&mut self.storage, plan.file, plan.locs[0], ledger, entry)?;
            return Ok(Some(vec![body]));
        }
        self.read_plan(&plan).map(Some)
    }

    /// Reads a planned run with one blocking device read and verifies its entries.
    fn read_plan(&mut self, plan: &RunPlan) -> Result<Vec<Bytes>, StoreError> {
        let (offset, span) = plan.range();
        let (buf, skip) = crate::io::read_range(&mut self.storage, plan.file, offset, span)
            .map_err(|e| StoreError::io("read entries", &plan.name(), e))?
            .ok_or_else(|| StoreError::corrupt(&plan.name(), offset, CorruptionKind::Truncated))?;
        plan.decode(&buf[skip..])
    }

    /// The run [`read_run`](Self::read_run) would read: where its entries are, from the index.
    fn plan_run(
        &mut self,
        view: &ReadView,
        ledger: u64,
        entry: u64,
        max_entries: usize,
    ) -> Result<Option<RunPlan>, StoreError> {
        let ahead_blocks = if max_entries > 1 {
            INDEX_READ_AHEAD_BLOCKS
        } else {
            1
        };
        let Some((first, mut cursor)) = self.locate_cursor(view, ledger, entry, ahead_blocks)?
        else {
            return Ok(None);
        };
        let file = self.file(FileKind::Segment, first.segment as u64)?;
        let max_bytes = match &self.ahead {
            Some(a) if max_entries > 1 => a.max_bytes as u64,
            _ => 0,
        };
        // The run: entries whose index locations follow one another in the same segment.
        let mut locs = vec![first];
        let mut end = first.offset + first.stored_bytes();
        while locs.len() < max_entries {
            let Some(next) = entry.checked_add(locs.len() as u64) else {
                break;
            };
            let loc = match self.cursor_next(view, &mut cursor, (ledger, next), ahead_blocks)? {
                Some(loc) => Some(loc),
                // Not in the cursor's run, or a newer run may hold it: a full lookup.
                None => match self.locate_cursor(view, ledger, next, ahead_blocks)? {
                    Some((loc, c)) => {
                        cursor = c;
                        Some(loc)
                    }
                    None => None,
                },
            };
            let Some(loc) = loc else {
                break;
            };
            if loc.segment != first.segment
                || loc.offset != end
                || end + loc.stored_bytes() - first.offset > max_bytes
            {
                break;
            }
            end += loc.stored_bytes();
            locs.push(loc);
        }
        Ok(Some(RunPlan {
            ledger,
            entry,
            file,
            locs,
        }))
    }

    /// Reads `ledger`'s run from `start` and up to `runs - 1` runs after it into the read-ahead
    /// cache, unasked, with their device reads in flight together: the device reads the next
    /// run while this thread verifies and caches the one before. Runs are cached in order, and
    /// `landed(start, entries)` is told of each as soon as it is (0 entries: nothing to read,
    /// the first run is cached or read already, or the store does not have it; an error
    /// leaves the run to be read when asked). Once the last run is cached, the first run's
    /// first entry becomes the trigger of the run after the group ([`prefetch`](Self::prefetch)).
    pub fn prefetch_runs(
        &mut self,
        view: &ReadView,
        ledger: u64,
        start: u64,
        runs: usize,
        mut landed: impl FnMut(u64, usize),
    ) -> Result<(), StoreError> {
        let Some(ahead) = self.ahead.clone() else {
            landed(start, 0);
            return Ok(());
        };
        self.prune(view);
        let mut plans: Vec<RunPlan> = Vec::new();
        let mut next = start;
        while plans.len() < runs.max(1) && !view.is_deleted(ledger) {
            {
                // Read already: cached, or a miss of the sequential reader read the run
                // holding `next` while this prefetch waited (its entries may be taken since).
                let cache = ahead.cache.lock().unwrap_or_else(|p| p.into_inner());
                if cache.contains(ledger, next)
                    || cache.read_past(ledger, next, ahead.max_entries as u64)
                {
                    break;
                }
            }
            let plan = match self.plan_run(view, ledger, next, ahead.max_entries) {
                Ok(Some(plan)) => plan,
                Ok(None) => break,
                Err(e) if plans.is_empty() => {
                    landed(start, 0);
                    return Err(e);
                }
                Err(_) => break,
            };
            next += plan.locs.len() as u64;
            plans.push(plan);
        }
        if plans.is_empty() {
            landed(start, 0);
            return Ok(());
        }
        // Every device read goes in flight before the first is waited for. A read the ring
        // does not take is read alone when its turn comes.
        let mut submitted = vec![false; plans.len()];
        let mut skips = vec![0; plans.len()];
        for (k, plan) in plans.iter().enumerate() {
            let (offset, span) = plan.range();
            let (op, skip) = crate::io::aligned_read(plan.file, offset, span);
            skips[k] = skip;
            submitted[k] = self.storage.submit(RUN_TOKEN + k as u64, op).is_ok();
        }
        let mut done: Vec<Option<Completion>> = (0..plans.len()).map(|_| None).collect();
        let mut out: Vec<Completion> = Vec::new();
        let mut first_error = None;
        for (k, plan) in plans.iter().enumerate() {
            let (skip, span) = (skips[k], plan.range().1);
            while submitted[k] && done[k].is_none() {
                let polled = self
                    .storage
                    .poll(&mut out, Wait::AtLeastOne { timeout_us: None });
                for c in out.drain(..) {
                    if let Some(slot) = c
                        .token
                        .checked_sub(RUN_TOKEN)
                        .and_then(|i| done.get_mut(i as usize))
                    {
                        *slot = Some(c);
                    }
                }
                if polled.is_err() || (done[k].is_none() && self.storage.in_flight() == 0) {
                    // The ring failed: what is still in flight is read alone below.
                    submitted.iter_mut().for_each(|s| *s = false);
                }
            }
            let bodies = match done[k].take() {
                Some(Completion {
                    result: Ok(n),
                    buf: Some(buf),
                    ..
                }) if n >= skip + span => plan.decode(&buf[skip..]),
                // Short, failed or not submitted: read alone.
                _ => self.read_plan(plan),
            };
            let n = match bodies {
                Ok(bodies) => {
                    let n = bodies.len();
                    self.runs_read += 1;
                    self.entries_ahead += n as u64;
                    let mut cache = ahead.cache.lock().unwrap_or_else(|p| p.into_inner());
                    for (i, body) in bodies.into_iter().enumerate() {
                        cache.insert(ledger, plan.entry + i as u64, body);
                    }
                    cache.note_run_end(ledger, plan.entry + n as u64);
                    if k + 1 == plans.len() {
                        // The group's first entry: the next take at or past it (at once,
                        // when the reader is on the first run already) asks for the next group.
                        cache.set_trigger(ledger, start);
                    }
                    n
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                    0
                }
            };
            landed(plan.entry, n);
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Where the entry is, after checking the location lies inside a live segment's committed
    /// part.
    pub fn locate(
        &mut self,
        view: &ReadView,
        ledger: u64,
        entry: u64,
    ) -> Result<Option<Location>, StoreError> {
        Ok(self
            .locate_cursor(view, ledger, entry, 1)?
            .map(|(loc, _)| loc))
    }

    /// [`locate`](Self::locate), and a [`Cursor`] on the record found, so that the keys after
    /// it are found without searching every run again. A block the lookup reads from disk
    /// brings up to `ahead_blocks - 1` blocks after it into the block cache too.
    fn locate_cursor(
        &mut self,
        view: &ReadView,
        ledger: u64,
        entry: u64,
        ahead_blocks: u32,
    ) -> Result<Option<(Location, Cursor)>, StoreError> {
        self.prune(view);
        if view.is_deleted(ledger) {
            return Ok(None);
        }
        let key = (ledger, entry);
        // The lowest key above `key` held by a run newer than the one `key` is found in.
        let mut bound: Option<Key> = None;
        let lower = |bound: Option<Key>, k: Key| Some(bound.map_or(k, |b| b.min(k)));
        for run in view.runs().iter().rev() {
            let Some(b) = run.block_for(key) else {
                if let Some(&first) = run.sparse.first().filter(|&&first| key < first) {
                    bound = lower(bound, first);
                }
                continue;
            };
            let block = self.block_ahead(run, b, ahead_blocks)?;
            let at = block.partition_point(|r| r.key() < key);
            if block.get(at).is_some_and(|r| r.key() == key) {
                let loc = checked(view, run, b, block[at].location)?;
                let cursor = Cursor {
                    run: run.clone(),
                    number: b,
                    block,
                    at,
                    bound,
                };
                return Ok(Some((loc, cursor)));
            }
            let above = match block.get(at) {
                Some(r) => Some(r.key()),
                None => run.sparse.get(b as usize + 1).copied(),
            };
            if let Some(k) = above {
                bound = lower(bound, k);
            }
        }
        Ok(None)
    }

    /// The location of `key` when it is the record right after the cursor's in the cursor's
    /// run and no newer run can hold it (then the cursor moves to it); `None` otherwise (the
    /// caller looks it up in full).
    fn cursor_next(
        &mut self,
        view: &ReadView,
        cursor: &mut Cursor,
        key: Key,
        ahead_blocks: u32,
    ) -> Result<Option<Location>, StoreError> {
        if cursor.bound.is_some_and(|b| key >= b) {
            return Ok(None);
        }
        if cursor.at + 1 >= cursor.block.len() {
            let number = cursor.number + 1;
            if number as usize >= cursor.run.blocks() {
                return Ok(None);
            }
            let run = cursor.run.clone();
            cursor.block = self.block_ahead(&run, number, ahead_blocks)?;
            cursor.number = number;
            cursor.at = 0;
        } else {
            cursor.at += 1;
        }
        let record = &cursor.block[cursor.at];
        if record.key() != key {
            return Ok(None);
        }
        checked(view, &cursor.run, cursor.number, record.location).map(Some)
    }

    /// The highest entry id of `ledger` in the index.
    pub fn last_entry(&mut self, view: &ReadView, ledger: u64) -> Result<Option<u64>, StoreError> {
        self.prune(view);
        if view.is_deleted(ledger) {
            return Ok(None);
        }
        let mut best: Option<u64> = None;
        for run in view.runs().iter().rev() {
            let Some(b) = run.block_for((ledger, u64::MAX)) else {
                // Past the run's last key: the last block may still hold the ledger.
                if run.last_key.0 == ledger {
                    best = best.max(Some(run.last_key.1));
                }
                continue;
            };
            let block = self.block(run, b)?;
            if let Some(r) = block.iter().rev().find(|r| r.ledger == ledger) {
                best = best.max(Some(r.entry));
            }
        }
        Ok(best)
    }

    /// Every entry id of `ledger` in the index, ascending.
    pub fn entries_of(&mut self, view: &ReadView, ledger: u64) -> Result<Vec<u64>, StoreError> {
        self.prune(view);
        if view.is_deleted(ledger) {
            return Ok(Vec::new());
        }
        let mut ids = BTreeSet::new();
        for run in view.runs() {
            for b in run.blocks_of(ledger) {
                let block = self.block(run, b)?;
                ids.extend(block.iter().filter(|r| r.ledger == ledger).map(|r| r.entry));
            }
        }
        Ok(ids.into_iter().collect())
    }

    /// The shared read-ahead cache's bytes, entries and hits so far (`None`: read-ahead off).
    pub fn read_cache_stats(&self) -> Option<(usize, usize, u64)> {
        let a = self.ahead.as_ref()?;
        let c = a.cache.lock().unwrap_or_else(|p| p.into_inner());
        Some((c.bytes(), c.len(), c.hits))
    }

    /// Index-block cache hits and misses so far.
    pub fn cache_stats(&self) -> (u64, u64) {
        (self.cache.hits, self.cache.misses)
    }

    /// Block `number` of `run`; on a miss, read with up to `ahead - 1` blocks after it (those
    /// not cached yet go to the cache as well, at most a quarter of it).
    fn block_ahead(
        &mut self,
        run: &Arc<RunInfo>,
        number: u32,
        ahead: u32,
    ) -> Result<Block, StoreError> {
        let ahead = ahead
            .min((self.cache.capacity_blocks() / 4) as u32)
            .min((run.blocks() as u32).saturating_sub(number));
        if ahead <= 1 || self.cache.contains((run.id, number)) {
            return self.block(run, number);
        }
        let file = self.file(FileKind::Run, run.id)?;
        let blocks = index::read_blocks(&mut self.storage, file, run.id, number, ahead)?;
        let mut asked = None;
        for (i, records) in blocks.into_iter().enumerate() {
            let n = number + i as u32;
            if records.first().map(|r| r.key()) != run.sparse.get(n as usize).copied() {
                if i == 0 {
                    let name = file_name(FileKind::Run, run.id);
                    return Err(StoreError::corrupt(
                        &name,
                        n as u64 * BLOCK as u64,
                        CorruptionKind::BadField,
                    ));
                }
                break;
            }
            let block: Block = Arc::new(records);
            if i == 0 {
                asked = Some(block.clone());
            }
            if !self.cache.contains((run.id, n)) {
                self.cache.insert((run.id, n), block);
            }
        }
        Ok(asked.expect("read_blocks returns the asked block or an error"))
    }

    fn block(&mut self, run: &Arc<RunInfo>, number: u32) -> Result<Block, StoreError> {
        if let Some(b) = self.cache.get((run.id, number)) {
            return Ok(b);
        }
        let file = self.file(FileKind::Run, run.id)?;
        let records: Vec<IndexRecord> = index::read_block(&mut self.storage, file, run.id, number)?;
        if records.first().map(|r| r.key()) != run.sparse.get(number as usize).copied() {
            let name = file_name(FileKind::Run, run.id);
            return Err(StoreError::corrupt(
                &name,
                number as u64 * BLOCK as u64,
                CorruptionKind::BadField,
            ));
        }
        let block: Block = Arc::new(records);
        self.cache.insert((run.id, number), block.clone());
        Ok(block)
    }

    fn file(&mut self, kind: FileKind, id: u64) -> Result<FileId, StoreError> {
        if let Some(f) = self.files.get(&(kind, id)) {
            return Ok(*f);
        }
        let name = file_name(kind, id);
        let f = self.storage.open(&name, false).map_err(|e| {
            if e.is_not_found() {
                StoreError::corrupt(&name, 0, CorruptionKind::MissingFile)
            } else {
                StoreError::io("open", &name, e)
            }
        })?;
        self.files.insert((kind, id), f);
        Ok(f)
    }

    /// On a new view, closes handles and drops cached blocks of files it no longer has.
    fn prune(&mut self, view: &ReadView) {
        if view.generation() == self.pruned_for {
            return;
        }
        self.pruned_for = view.generation();
        let runs: Vec<u64> = view.runs().iter().map(|r| r.id).collect();
        let live = |kind: FileKind, id: u64| match kind {
            FileKind::Run => runs.contains(&id),
            FileKind::Segment => view.segment_len(id).is_some(),
            FileKind::Meta => false,
        };
        let storage = &mut self.storage;
        self.files.retain(|(kind, id), f| {
            let keep = live(*kind, *id);
            if !keep {
                storage.close(*f);
            }
            keep
        });
        self.cache.retain_runs(&|id| runs.contains(&id));
    }

    /// Closes every open file and gives the storage back.
    pub fn into_storage(mut self) -> S {
        for (_, f) in self.files.drain() {
            self.storage.close(f);
        }
        self.storage
    }
}

/// Tokens of the device reads of [`Reader::prefetch_runs`] (the first run's; the others
/// follow), apart from [`Reader::read_each`]'s.
const RUN_TOKEN: u64 = 1 << 40;

/// A run to read ahead: `locs` are the locations of `ledger`'s entries from `entry` on, each
/// right after the one before in one segment file.
struct RunPlan {
    ledger: u64,
    entry: u64,
    file: FileId,
    locs: Vec<Location>,
}

impl RunPlan {
    /// The byte range to read: offset of the first entry, and length up to the last's end.
    fn range(&self) -> (u64, usize) {
        let first = self.locs[0];
        let last = self.locs[self.locs.len() - 1];
        let span =
            (last.offset - first.offset) as usize + ENTRY_HEADER_BYTES + last.length as usize;
        (first.offset, span)
    }

    fn name(&self) -> String {
        file_name(FileKind::Segment, self.locs[0].segment as u64)
    }

    /// Verifies and takes each entry's body from `bytes` (the run's range); a bad entry
    /// after the first ends the run (it is reported when asked for by itself).
    fn decode(&self, bytes: &[u8]) -> Result<Vec<Bytes>, StoreError> {
        let first = self.locs[0];
        let mut bodies = Vec::with_capacity(self.locs.len());
        for (k, loc) in self.locs.iter().enumerate() {
            let at = (loc.offset - first.offset) as usize;
            let entry = &bytes[at..at + ENTRY_HEADER_BYTES + loc.length as usize];
            match segment::decode_entry(entry, *loc, self.ledger, self.entry + k as u64) {
                Ok(body) => bodies.push(body),
                Err(e) if k == 0 => return Err(e),
                Err(_) => break,
            }
        }
        Ok(bodies)
    }
}

/// Where a lookup of consecutive keys stands ([`Reader::locate_cursor`]): the run, block and
/// record the last key was found at, and the lowest key a newer run holds above it (`None`:
/// none). Keys below `bound` are read on from this record without searching again.
struct Cursor {
    run: Arc<RunInfo>,
    number: u32,
    block: Block,
    at: usize,
    bound: Option<Key>,
}

/// `loc`, found in block `number` of `run`, after checking it lies inside a live segment's
/// committed part (else the run is corrupt).
fn checked(
    view: &ReadView,
    run: &RunInfo,
    number: u32,
    loc: Location,
) -> Result<Location, StoreError> {
    let ok = view.segment_len(loc.segment as u64).is_some_and(|len| {
        loc.offset >= SEGMENT_HEADER_BYTES && loc.offset + loc.stored_bytes() <= len
    });
    if !ok {
        let name = file_name(FileKind::Run, run.id);
        return Err(StoreError::corrupt(
            &name,
            number as u64 * BLOCK as u64,
            CorruptionKind::BadField,
        ));
    }
    Ok(loc)
}

/// Looks `key` up in a set of runs, newest first, reading blocks through `fetch` (for tests
/// and tools that hold blocks otherwise).
pub fn lookup_in(
    runs: &[Arc<RunInfo>],
    key: Key,
    mut fetch: impl FnMut(&RunInfo, u32) -> Option<Block>,
) -> Option<Location> {
    for run in runs.iter().rev() {
        let b = run.block_for(key)?;
        let block = fetch(run, b)?;
        if let Ok(i) = block.binary_search_by_key(&key, |r| r.key()) {
            return Some(block[i].location);
        }
    }
    None
}

/// Where a single read stands before the device.
enum Single {
    Done(Option<Bytes>),
    Device(Location, FileId),
}

/// A device read of [`Reader::read_all`]: the entry asked at position `at`.
struct PendingRead {
    at: usize,
    loc: Location,
    file: FileId,
    ledger: u64,
    entry: u64,
}

impl PendingRead {
    fn io_error(&self, e: storage::IoError) -> StoreError {
        StoreError::io(
            "read entry",
            &file_name(FileKind::Segment, self.loc.segment as u64),
            e,
        )
    }
}
