//! [`Reader`]: cache-miss reads for a reader thread, with its own `Storage` (io_uring rings
//! are per thread), its own open-file handles and its own LRU cache of index blocks. Every
//! call takes the [`ReadView`] to read from, so a reader never sees a half-published flush.
//!
//! A read looks the key up in the runs newest first, then reads the entry from its segment and
//! verifies its header (magic, version, ledger, entry, length) and CRC: corruption is an
//! error, never silently wrong data.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use storage::{FileId, Storage};

use crate::error::{CorruptionKind, StoreError};
use crate::format::*;
use crate::index::{self, Block, BlockCache, IndexRecord, Key, RunInfo};
use crate::segment::{self, Location};
use crate::store::{LedgerStoreConfig, ReadView};

/// A reader thread's handle on one shard's ledger storage.
pub struct Reader<S: Storage> {
    storage: S,
    cache: BlockCache,
    files: HashMap<(FileKind, u64), FileId>,
    /// Generation of the view the file handles were last pruned against.
    pruned_for: u64,
}

impl<S: Storage> Reader<S> {
    pub fn new(storage: S, config: &LedgerStoreConfig) -> Reader<S> {
        Reader {
            storage,
            cache: BlockCache::new(config.index_block_cache_bytes),
            files: HashMap::new(),
            pruned_for: 0,
        }
    }

    /// The entry's body, `None` if the store does not have it (or its ledger is deleted).
    pub fn read(
        &mut self,
        view: &ReadView,
        ledger: u64,
        entry: u64,
    ) -> Result<Option<Bytes>, StoreError> {
        let Some(loc) = self.locate(view, ledger, entry)? else {
            return Ok(None);
        };
        let file = self.file(FileKind::Segment, loc.segment as u64)?;
        segment::read_entry(&mut self.storage, file, loc, ledger, entry).map(Some)
    }

    /// Where the entry is, after checking the location lies inside a live segment's committed
    /// part.
    pub fn locate(
        &mut self,
        view: &ReadView,
        ledger: u64,
        entry: u64,
    ) -> Result<Option<Location>, StoreError> {
        self.prune(view);
        if view.is_deleted(ledger) {
            return Ok(None);
        }
        let key = (ledger, entry);
        for run in view.runs().iter().rev() {
            let Some(b) = run.block_for(key) else {
                continue;
            };
            let block = self.block(run, b)?;
            if let Ok(i) = block.binary_search_by_key(&key, |r| r.key()) {
                let loc = block[i].location;
                let ok = view.segment_len(loc.segment as u64).is_some_and(|len| {
                    loc.offset >= SEGMENT_HEADER_BYTES && loc.offset + loc.stored_bytes() <= len
                });
                if !ok {
                    let name = file_name(FileKind::Run, run.id);
                    return Err(StoreError::corrupt(
                        &name,
                        b as u64 * BLOCK as u64,
                        CorruptionKind::BadField,
                    ));
                }
                return Ok(Some(loc));
            }
        }
        Ok(None)
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
