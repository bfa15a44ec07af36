//! [`Reader`]: cache-miss reads for a reader thread, with its own `Storage` (io_uring rings
//! are per thread), its own open-file handles and its own LRU cache of index blocks. Every
//! call takes the [`ReadView`] to read from, so a reader never sees a half-published flush.
//!
//! A read looks the key up in the runs newest first, then reads the entry from its segment and
//! verifies its header (magic, version, ledger, entry, length) and CRC: corruption is an
//! error, never silently wrong data.
//!
//! Runs: a flush stores a ledger's entries contiguously, so the entries after an asked one
//! usually lie right after it in the same segment. [`Reader::read_run`] looks up the next
//! entries in the index too and, as long as each lies right after the one before, reads them
//! all in one aligned device read (within `max_entries` and the reader's byte limit); every
//! entry of the run is verified like a single read. [`Reader::read_runs`] reads a run and the
//! runs after it with their device reads in flight together, so the device reads the next
//! while this thread verifies the one before. The index decides what is read, never the bytes
//! on disk alone, so a stale copy left by compaction is never served. *Whether* to read a run
//! (a sequential reader, a read-ahead ask) is not decided here: the caller's read-ahead
//! policy decides, and keeps what a run brings.
//!
//! A run's lookups cost one search, not one per entry: the lookup of its first entry leaves a
//! cursor on the record found, bounded by the lowest key any newer index run holds above it,
//! and the next keys are taken from the records after it while they stay below that bound (a
//! re-added entry in a newer run is still found there). An index block a run misses is read
//! with the blocks after it (`INDEX_READ_AHEAD_BLOCKS`), so a catch-up does not wait on a 4 KiB
//! index read in front of every few runs.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use storage::{Completion, FileId, Storage, Wait};

use crate::error::{CorruptionKind, StoreError};
use crate::format::*;
use crate::index::{self, Block, BlockCache, IndexRecord, Key, RunInfo};
use crate::segment::{self, Location};
use crate::store::{LedgerStoreConfig, ReadView};

/// Index blocks read in one device read when a run misses one: the blocks after it hold the
/// keys the sequential reader asks next (64 KiB, ~2,000 entries, ~20 runs), so the index
/// costs a catch-up one device read per 20 runs rather than one per run.
const INDEX_READ_AHEAD_BLOCKS: u32 = 16;

/// A reader thread's handle on one shard's ledger storage.
pub struct Reader<S: Storage> {
    storage: S,
    cache: BlockCache,
    files: HashMap<(FileKind, u64), FileId>,
    /// Generation of the view the file handles were last pruned against.
    pruned_for: u64,
    /// Bytes one run may span (one device read; Java's
    /// `dbStorage_readAheadCacheBatchBytesSize`).
    run_bytes: usize,
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
            run_bytes: 0,
            runs_read: 0,
            entries_ahead: 0,
        }
    }

    /// The storage port this reader reads through.
    pub fn storage(&self) -> &S {
        &self.storage
    }

    /// Lets runs span up to `bytes` (0, the default: every read is of one entry).
    pub fn with_run_bytes(mut self, bytes: usize) -> Reader<S> {
        self.run_bytes = bytes;
        self
    }

    /// The entry's body, `None` if the store does not have it (or its ledger is deleted).
    pub fn read(
        &mut self,
        view: &ReadView,
        ledger: u64,
        entry: u64,
    ) -> Result<Option<Bytes>, StoreError> {
        Ok(self
            .read_run(view, ledger, entry, 1)?
            .and_then(|bodies| bodies.into_iter().next()))
    }

    /// Reads several single entries, with their device reads all in flight at once on this
    /// reader's ring: random reads at the device's depth from one thread, one
    /// `io_uring_enter` for the lot. One result per asked `(view, ledger, entry)`, in order;
    /// each entry is verified as [`read`](Self::read) verifies it.
    pub fn read_each(
        &mut self,
        asked: &[(&ReadView, u64, u64)],
    ) -> Vec<Result<Option<Bytes>, StoreError>> {
        let mut results: Vec<Option<Result<Option<Bytes>, StoreError>>> =
            (0..asked.len()).map(|_| None).collect();
        let mut pending: Vec<PendingRead> = Vec::new();
        for (at, &(view, ledger, entry)) in asked.iter().enumerate() {
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

    /// A single read, up to the device: answered already (deleted ledger, not in the index)
    /// or where to read it.
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

    /// Reads `entry` and up to `max_entries - 1` entries after it as one device read, as long
    /// as their index locations follow one another in one segment (within the reader's run
    /// byte limit), each verified: the asked entry first. `None` when the store does not have
    /// `entry` (or its ledger is deleted); a bad entry after the first ends the run (it is
    /// reported when asked for by itself).
    pub fn read_run(
        &mut self,
        view: &ReadView,
        ledger: u64,
        entry: u64,
        max_entries: usize,
    ) -> Result<Option<Vec<Bytes>>, StoreError> {
        self.prune(view);
        if view.is_deleted(ledger) {
            return Ok(None);
        }
        let Some(plan) = self.plan_run(view, ledger, entry, max_entries)? else {
            return Ok(None);
        };
        if plan.locs.len() == 1 {
            let body =
                segment::read_entry(&mut self.storage, plan.file, plan.locs[0], ledger, entry)?;
            return Ok(Some(vec![body]));
        }
        let bodies = self.read_plan(&plan)?;
        if bodies.len() > 1 {
            self.runs_read += 1;
            self.entries_ahead += bodies.len() as u64 - 1;
        }
        Ok(Some(bodies))
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
        let max_bytes = if max_entries > 1 {
            self.run_bytes as u64
        } else {
            0
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

    /// Reads `ledger`'s run from `start` and up to `runs - 1` runs after it, with their device
    /// reads in flight together: the device reads the next run while this thread verifies the
    /// one before. `landed(first entry, bodies, more)` is told of each run in order as soon as
    /// it is read, with `more` = (first entry of the next run, end of the last run) while runs
    /// of the group follow (no bodies: the store does not have `start`, or its ledger is
    /// deleted; an error ends the group, and is returned once what was read is told).
    pub fn read_runs(
        &mut self,
        view: &ReadView,
        ledger: u64,
        start: u64,
        (runs, max_entries): (usize, usize),
        mut landed: impl FnMut(u64, Vec<Bytes>, Option<(u64, u64)>),
    ) -> Result<(), StoreError> {
        self.prune(view);
        let mut plans: Vec<RunPlan> = Vec::new();
        let mut next = start;
        while plans.len() < runs.max(1) && !view.is_deleted(ledger) {
            let plan = match self.plan_run(view, ledger, next, max_entries.max(1)) {
                Ok(Some(plan)) => plan,
                Ok(None) => break,
                Err(e) if plans.is_empty() => {
                    landed(start, Vec::new(), None);
                    return Err(e);
                }
                Err(_) => break,
            };
            next += plan.locs.len() as u64;
            plans.push(plan);
        }
        if plans.is_empty() {
            landed(start, Vec::new(), None);
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
            if first_error.is_some() {
                continue; // reap the rest, tell nothing more
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
            let more = plans.get(k + 1).map(|next| {
                let last = &plans[plans.len() - 1];
                (next.entry, last.entry + last.locs.len() as u64)
            });
            match bodies {
                Ok(bodies) => {
                    self.runs_read += 1;
                    self.entries_ahead += bodies.len() as u64;
                    landed(plan.entry, bodies, more);
                }
                Err(e) => {
                    landed(plan.entry, Vec::new(), None);
                    first_error = Some(e);
                }
            }
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

/// Tokens of the device reads of [`Reader::read_runs`] (the first run's; the others
/// follow), apart from [`Reader::read_each`]'s.
const RUN_TOKEN: u64 = 1 << 40;

/// A run to read: `locs` are the locations of `ledger`'s entries from `entry` on, each
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
