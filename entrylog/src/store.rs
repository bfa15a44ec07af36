//! [`LedgerStore`]: one shard's ledger storage, owned by its flush thread. It turns a frozen
//! write-cache snapshot ([`FlushBatch`]) into entry log + index run + metadata snapshot and
//! commits them with a new manifest, then publishes an immutable [`ReadView`] that reader
//! threads use with their own [`Reader`](crate::Reader).
//!
//! # Checkpoint order (the invariant; ARCHITECTURE.md §5 item 6)
//! 1. entries appended to entry log segments, every segment written synced;
//! 2. the index run written and synced;
//! 3. the metadata snapshot written and synced (only when a ledger changed);
//! 4. `MANIFEST.tmp` written and synced, renamed over `MANIFEST`, directory synced.
//!
//! Step 4's rename is the commit point. A crash before it leaves the previous manifest, whose
//! files were all durable before it was written; the new files are unreferenced garbage that
//! [`LedgerStore::open`] removes, and the active segment's bytes beyond its committed length
//! are overwritten by the next flush. Only after `flush` returns may the bookie trim its
//! journal up to the batch's mark. A failure before the rename leaves the store usable (the
//! next flush retries with fresh files); a failure at or after it stops the store
//! ([`StoreError::Stopped`]) because the on-disk state is then uncertain until reopened.
//!
//! Files retired by a merge are removed only when no published view references them, so a
//! reader never finds a file gone under its view.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Weak};

use bytes::Bytes;
use storage::Storage;

use crate::error::{CorruptionKind, StoreError};
use crate::format::*;
use crate::index::{self, IndexRecord, RunInfo, RunWriter};
use crate::io::{self, ChunkWriter};
use crate::manifest::{Manifest, RunRef, SegmentRef};
use crate::meta::{self, LedgerMeta};
use crate::segment::{self, Location, ScannedEntry, SegmentAppender};

/// How many entries ahead of the one being written a flush prefetches a body
/// ([`crate::prefetch`]): far enough for the loads to land, near enough to stay in cache.
const PREFETCH_DISTANCE: usize = 4;

/// Tunables of one shard's ledger storage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LedgerStoreConfig {
    /// A segment is rotated before it would grow past this (Java `logSizeLimit`). An entry
    /// larger than this gets a segment of its own.
    pub entry_log_size_bytes: u64,
    /// Size of each O_DIRECT write of a flush (multiple of 4 KiB).
    pub write_chunk_bytes: usize,
    /// Writes a flush keeps in flight: 1 or 2, so it cannot flood the queue the journal shares.
    pub max_writes_in_flight: usize,
    /// Bytes of verified index blocks each [`Reader`](crate::Reader) caches.
    pub index_block_cache_bytes: usize,
    /// How many adjacent runs of about the same size a merge takes at once
    /// ([`index::pick_merge`]): a record is rewritten about log_width(flushes) times.
    pub index_merge_width: usize,
    /// The most runs kept: beyond it, the adjacent pair with the fewest records is merged
    /// whatever the sizes (a bound on a lookup's run probes).
    pub max_index_runs: usize,
}

impl Default for LedgerStoreConfig {
    fn default() -> Self {
        LedgerStoreConfig {
            entry_log_size_bytes: 1 << 30,
            write_chunk_bytes: 1 << 20,
            max_writes_in_flight: 2,
            index_block_cache_bytes: 16 << 20,
            index_merge_width: 4,
            max_index_runs: 32,
        }
    }
}

impl LedgerStoreConfig {
    fn validate(&self) -> Result<(), StoreError> {
        if self.write_chunk_bytes == 0 || !self.write_chunk_bytes.is_multiple_of(BLOCK) {
            return Err(StoreError::Config(
                "write_chunk_bytes must be a positive multiple of 4096",
            ));
        }
        if self.max_writes_in_flight == 0 {
            return Err(StoreError::Config(
                "max_writes_in_flight must be at least 1",
            ));
        }
        if self.entry_log_size_bytes < 2 * BLOCK as u64 {
            return Err(StoreError::Config(
                "entry_log_size_bytes must be at least 8192",
            ));
        }
        if self.max_index_runs < 2 {
            return Err(StoreError::Config("max_index_runs must be at least 2"));
        }
        if self.index_merge_width < 2 {
            return Err(StoreError::Config("index_merge_width must be at least 2"));
        }
        Ok(())
    }
}

/// A frozen write-cache snapshot to persist.
#[derive(Clone, Debug, Default)]
pub struct FlushBatch {
    /// (ledger, entry, body), any order. For the same (ledger, entry) the later one in the
    /// vector wins, and it also wins over anything flushed before.
    pub entries: Vec<(u64, u64, Bytes)>,
    /// The full current metadata of every ledger changed since the last flush (or of all).
    /// A ledger with entries here but no metadata gets a default one (empty master key).
    /// `deleted: true` makes it a tombstone: its entries vanish from reads and merges.
    pub ledgers: Vec<LedgerMeta>,
    /// Every journal record below this mark is contained in this and earlier batches. The
    /// stored mark never moves backwards.
    pub journal_mark: u64,
}

/// What a flush did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlushStats {
    /// Entries written (after dropping in-batch duplicates and deleted ledgers).
    pub entries: u64,
    /// Bytes written to entry log segments (headers, padding included).
    pub entry_log_bytes: u64,
    pub segments_rotated: u32,
    pub index_bytes: u64,
    pub meta_bytes: u64,
    /// Merges done after the flush, and records they wrote.
    pub merges: u32,
    pub merged_records: u64,
    /// Merges that failed (logged; the data is safe, the next flush retries).
    pub merge_failures: u32,
}

/// What [`LedgerStore::open`] recovered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovered {
    /// Every journal record below it is persisted here: replay the journal from it.
    pub journal_mark: u64,
    /// The metadata of every ledger, tombstones (`deleted`) included.
    pub ledgers: Vec<LedgerMeta>,
}

/// An immutable description of the store (segments, index runs with their sparse indexes,
/// tombstones), published after each flush. Readers keep an `Arc` for as long as they use it.
#[derive(Debug)]
pub struct ReadView {
    generation: u64,
    journal_mark: u64,
    segments: Vec<SegmentRef>,
    runs: Vec<Arc<RunInfo>>,
    deleted: Arc<HashSet<u64>>,
}

impl ReadView {
    /// The manifest generation this view describes.
    pub fn generation(&self) -> u64 {
        self.generation
    }
    pub fn journal_mark(&self) -> u64 {
        self.journal_mark
    }
    /// Live segments, oldest first, with committed lengths.
    pub fn segments(&self) -> &[SegmentRef] {
        &self.segments
    }
    /// Index runs, oldest first.
    pub fn runs(&self) -> &[Arc<RunInfo>] {
        &self.runs
    }
    pub fn is_deleted(&self, ledger: u64) -> bool {
        self.deleted.contains(&ledger)
    }
    /// Committed length of segment `id`, if live.
    pub fn segment_len(&self, id: u64) -> Option<u64> {
        self.segments
            .binary_search_by_key(&id, |s| s.id)
            .ok()
            .map(|i| self.segments[i].len)
    }
    /// Memory of the sparse indexes and per-run overhead.
    pub fn index_memory_bytes(&self) -> usize {
        self.runs.iter().map(|r| r.memory_bytes()).sum()
    }
    /// Index records over all runs (duplicates across runs counted once per run).
    pub fn index_records(&self) -> u64 {
        self.runs.iter().map(|r| r.records).sum()
    }
}

/// One shard's ledger storage; owned by the flush thread.
pub struct LedgerStore<S: Storage> {
    pub(crate) storage: S,
    pub(crate) config: LedgerStoreConfig,
    pub(crate) manifest: Manifest,
    ledgers: BTreeMap<u64, LedgerMeta>,
    pub(crate) view: Arc<ReadView>,
    /// Runs merged away, removed once no view holds them.
    pub(crate) retired: Vec<Arc<RunInfo>>,
    /// Every view published and maybe still held by a reader.
    published: Vec<Weak<ReadView>>,
    /// Segments dropped by garbage collection, removed once none of these views is alive.
    retired_segments: Vec<(u64, Vec<Weak<ReadView>>)>,
    /// Retired segments renamed to `*.trash`, not yet taken by the owner.
    trash: Vec<String>,
    /// A compaction is in progress (`compact.rs`): index merges wait, so the compaction's run
    /// can be slotted in right after the run it was planned from.
    pub(crate) compacting: bool,
    pub(crate) stopped: bool,
    /// The ledgers each segment created since open holds entries of (shadowed copies
    /// included): a deleted ledger's tombstone can go once no segment left may hold its
    /// entries. A segment missing here was there at open (what it holds is not recorded on
    /// disk): it may hold any ledger of `ledgers_at_open`.
    segment_ledgers: HashMap<u64, HashSet<u64>>,
    /// The ledgers the segments that were there at open may hold: those the metadata listed
    /// at open (a flush writes a record for each ledger it stores entries of), and those
    /// appended since to the segment that was active at open.
    ledgers_at_open: HashSet<u64>,
}

fn io_err<'a>(what: &'static str, name: &'a str) -> impl Fn(storage::IoError) -> StoreError + 'a {
    move |e| StoreError::io(what, name, e)
}

/// Reads a whole small file's first `len` bytes.
fn read_small<S: Storage>(
    storage: &mut S,
    name: &str,
    len: Option<u64>,
) -> Result<Vec<u8>, StoreError> {
    let file = storage.open(name, false).map_err(|e| {
        if e.is_not_found() {
            StoreError::corrupt(name, 0, CorruptionKind::MissingFile)
        } else {
            StoreError::io("open", name, e)
        }
    })?;
    let r = (|| {
        let len = match len {
            Some(l) => l,
            None => storage.file_len(file).map_err(io_err("stat", name))?,
        };
        if len == 0 {
            return Err(StoreError::corrupt(name, 0, CorruptionKind::Truncated));
        }
        let (buf, skip) = io::read_range(storage, file, 0, len as usize)
            .map_err(io_err("read", name))?
            .ok_or_else(|| StoreError::corrupt(name, 0, CorruptionKind::Truncated))?;
        Ok(buf[skip..skip + len as usize].to_vec())
    })();
    storage.close(file);
    r
}

/// Creates `name`, writes `bytes` padded to a block, syncs, closes. Returns the logical length.
fn write_small<S: Storage>(
    storage: &mut S,
    name: &str,
    bytes: &[u8],
    config: &LedgerStoreConfig,
) -> Result<u64, StoreError> {
    let file = storage.open(name, true).map_err(io_err("create", name))?;
    let r = (|| {
        storage
            .truncate(file, 0)
            .map_err(io_err("truncate", name))?;
        let mut w = ChunkWriter::new(
            file,
            0,
            config.write_chunk_bytes,
            config.max_writes_in_flight,
        );
        if let Err(e) = w
            .write(storage, bytes)
            .and_then(|_| w.finish(storage).map(|_| ()))
        {
            w.drain(storage);
            return Err(StoreError::io("write", name, e));
        }
        io::sync_data(storage, file).map_err(io_err("sync", name))?;
        Ok(bytes.len() as u64)
    })();
    storage.close(file);
    r
}

impl<S: Storage> LedgerStore<S> {
    /// Opens (or creates, in an empty directory) the store: reads the manifest, the metadata
    /// snapshot and every run's sparse index, checks every segment's header, and removes files
    /// the manifest does not reference (garbage of an interrupted flush).
    pub fn open(
        mut storage: S,
        config: LedgerStoreConfig,
    ) -> Result<(LedgerStore<S>, Recovered), StoreError> {
        config.validate()?;
        let names = storage.list().map_err(io_err("list", "."))?;
        let has_manifest = names.iter().any(|n| n == MANIFEST_NAME);
        let mut max_seen = 0u64;
        for n in &names {
            if let Some((_, id)) = parse_file_name(n) {
                max_seen = max_seen.max(id);
            }
        }
        let manifest = if has_manifest {
            let b = read_small(&mut storage, MANIFEST_NAME, None)?;
            Manifest::decode(&b).map_err(|(at, k)| StoreError::corrupt(MANIFEST_NAME, at, k))?
        } else if let Some(n) = names.iter().find(|n| parse_file_name(n).is_some()) {
            // Data without a manifest: never treat it as garbage on our own.
            return Err(StoreError::corrupt(n, 0, CorruptionKind::MissingManifest));
        } else {
            Manifest {
                generation: 0,
                next_file_id: 1,
                ..Manifest::default()
            }
        };
        // Metadata.
        let mut ledgers = BTreeMap::new();
        if let Some((id, len)) = manifest.meta {
            let name = file_name(FileKind::Meta, id);
            let b = read_small(&mut storage, &name, Some(len))?;
            for m in
                meta::decode_snapshot(&b).map_err(|(at, k)| StoreError::corrupt(&name, at, k))?
            {
                ledgers.insert(m.ledger, m);
            }
        }
        // Runs.
        let mut runs = Vec::with_capacity(manifest.runs.len());
        for r in &manifest.runs {
            let info = index::open_run(&mut storage, r.id, r.file_len)
                .map_err(|e| missing(e, r.id, FileKind::Run))?;
            if info.records != r.records {
                return Err(StoreError::corrupt(
                    &file_name(FileKind::Run, r.id),
                    0,
                    CorruptionKind::BadLength,
                ));
            }
            runs.push(Arc::new(info));
        }
        // Segments: present, long enough, with a valid header.
        for s in &manifest.segments {
            check_segment(&mut storage, s)?;
        }
        let mut store = LedgerStore {
            storage,
            config,
            manifest,
            ledgers,
            view: Arc::new(ReadView {
                generation: 0,
                journal_mark: 0,
                segments: Vec::new(),
                runs: Vec::new(),
                deleted: Arc::new(HashSet::new()),
            }),
            retired: Vec::new(),
            published: Vec::new(),
            retired_segments: Vec::new(),
            trash: Vec::new(),
            compacting: false,
            stopped: false,
            segment_ledgers: HashMap::new(),
            ledgers_at_open: HashSet::new(),
        };
        store.ledgers_at_open = store.ledgers.keys().copied().collect();
        store.manifest.next_file_id = store.manifest.next_file_id.max(max_seen + 1);
        // Garbage.
        let mut live: HashSet<String> = HashSet::new();
        live.insert(MANIFEST_NAME.to_string());
        for s in &store.manifest.segments {
            live.insert(file_name(FileKind::Segment, s.id));
        }
        for r in &store.manifest.runs {
            live.insert(file_name(FileKind::Run, r.id));
        }
        if let Some((id, _)) = store.manifest.meta {
            live.insert(file_name(FileKind::Meta, id));
        }
        let mut removed = 0;
        for n in &names {
            if live.contains(n) {
                continue;
            }
            if is_trash_name(n) {
                store.trash.push(n.clone());
                continue;
            }
            if n == MANIFEST_TMP_NAME || parse_file_name(n).is_some() {
                log::info!("ledger storage: removing {n}, not referenced by the manifest");
                store
                    .storage
                    .remove(n)
                    .map_err(io_err("remove garbage", n))?;
                removed += 1;
            } else {
                log::warn!("ledger storage: ignoring foreign file {n}");
            }
        }
        if removed > 0 {
            store
                .storage
                .sync_dir()
                .map_err(io_err("sync directory", "."))?;
        }
        if !has_manifest {
            let m = Manifest {
                generation: 1,
                ..store.manifest.clone()
            };
            store.commit_manifest(&m)?;
            store.manifest = m;
        }
        store.publish(runs);
        let recovered = Recovered {
            journal_mark: store.manifest.journal_mark,
            ledgers: store.ledgers.values().cloned().collect(),
        };
        Ok((store, recovered))
    }

    /// The current read view.
    pub fn snapshot(&self) -> Arc<ReadView> {
        self.view.clone()
    }

    /// The configuration in use.
    pub fn config(&self) -> &LedgerStoreConfig {
        &self.config
    }

    /// The journal mark of the last committed flush.
    pub fn journal_mark(&self) -> u64 {
        self.manifest.journal_mark
    }

    /// The persisted metadata of every ledger (as of the last flush).
    pub fn ledgers(&self) -> &BTreeMap<u64, LedgerMeta> {
        &self.ledgers
    }

    /// The store stopped after a failure at or after a commit point: reopen it.
    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// The current manifest (for tools and tests).
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    pub(crate) fn publish(&mut self, runs: Vec<Arc<RunInfo>>) {
        let deleted: HashSet<u64> = self
            .ledgers
            .values()
            .filter(|m| m.deleted)
            .map(|m| m.ledger)
            .collect();
        let deleted = if deleted == *self.view.deleted {
            self.view.deleted.clone()
        } else {
            Arc::new(deleted)
        };
        self.view = Arc::new(ReadView {
            generation: self.manifest.generation,
            journal_mark: self.manifest.journal_mark,
            segments: self.manifest.segments.clone(),
            runs,
            deleted,
        });
        self.published.retain(|w| w.strong_count() > 0);
        self.published.push(Arc::downgrade(&self.view));
    }

    /// Segment `id` left the manifest: its file goes once no view that listed it is alive.
    pub(crate) fn retire_segment(&mut self, id: u64) {
        self.segment_ledgers.remove(&id);
        // Every view but the current one (published without the segment) may still list it.
        let current = Arc::downgrade(&self.view);
        let holders = self
            .published
            .iter()
            .filter(|w| !w.ptr_eq(&current))
            .cloned()
            .collect();
        self.retired_segments.push((id, holders));
    }

    /// The metadata of every ledger deleted so far (for garbage collection).
    pub(crate) fn deleted_ledgers(&self) -> Arc<HashSet<u64>> {
        self.view.deleted.clone()
    }

    /// Segment `id` is new (its contents are known from now on).
    pub(crate) fn note_new_segment(&mut self, id: u64) {
        self.segment_ledgers.insert(id, HashSet::new());
    }

    /// An entry of `ledger` was appended to segment `id`.
    pub(crate) fn note_entry(&mut self, id: u64, ledger: u64) {
        match self.segment_ledgers.get_mut(&id) {
            Some(set) => set.insert(ledger),
            // The segment that was active at open.
            None => self.ledgers_at_open.insert(ledger),
        };
    }

    /// Tombstones kept for nothing: to be called right after a merge of *every* run (so no
    /// run holds a record of a deleted ledger); those no segment left may hold an entry of
    /// (`segment_ledgers`). Their ledgers are forgotten (a new metadata snapshot, committed
    /// with its own manifest after the one that dropped the segments), so tombstones do not
    /// pile up. Returns how many.
    pub(crate) fn purge_tombstones(&mut self) -> Result<usize, StoreError> {
        if self
            .manifest
            .segments
            .iter()
            .all(|s| self.segment_ledgers.contains_key(&s.id))
        {
            // Every segment that was there at open is gone.
            self.ledgers_at_open = HashSet::new();
        }
        let present: Vec<&HashSet<u64>> = self
            .manifest
            .segments
            .iter()
            .map(|s| {
                self.segment_ledgers
                    .get(&s.id)
                    .unwrap_or(&self.ledgers_at_open)
            })
            .collect();
        let purge: Vec<u64> = self
            .ledgers
            .values()
            .filter(|m| m.deleted)
            .map(|m| m.ledger)
            .filter(|l| present.iter().all(|set| !set.contains(l)))
            .collect();
        if purge.is_empty() {
            return Ok(0);
        }
        let purged: HashSet<u64> = purge.iter().copied().collect();
        let bytes = meta::encode_snapshot(
            self.ledgers
                .values()
                .filter(|m| !purged.contains(&m.ledger))
                .collect::<Vec<_>>()
                .into_iter(),
        )
        .map_err(StoreError::Limit)?;
        let mut next = self.manifest.clone();
        next.generation += 1;
        let id = self.alloc_id();
        next.next_file_id = self.manifest.next_file_id;
        let name = file_name(FileKind::Meta, id);
        let len = match write_small(&mut self.storage, &name, &bytes, &self.config) {
            Ok(len) => len,
            Err(e) => {
                let _ = self.storage.remove(&name);
                return Err(e);
            }
        };
        next.meta = Some((id, len));
        let old_meta = self.manifest.meta;
        if let Err(e) = self.commit_manifest(&next) {
            if !self.stopped {
                let _ = self.storage.remove(&name);
            }
            return Err(e);
        }
        self.manifest = next;
        for l in &purge {
            self.ledgers.remove(l);
        }
        let runs = self.view.runs.clone();
        self.publish(runs);
        if let Some((old, _)) = old_meta {
            let _ = self.storage.remove(&file_name(FileKind::Meta, old));
        }
        Ok(purge.len())
    }

    pub(crate) fn alloc_id(&mut self) -> u64 {
        let id = self.manifest.next_file_id;
        self.manifest.next_file_id += 1;
        id
    }

    /// Writes `m` as the new manifest: tmp, sync, rename, directory sync. Any error here
    /// stops the store (the rename may or may not be durable).
    pub(crate) fn commit_manifest(&mut self, m: &Manifest) -> Result<(), StoreError> {
        let bytes = m.encode();
        if let Err(e) = write_small(&mut self.storage, MANIFEST_TMP_NAME, &bytes, &self.config) {
            // Nothing is committed yet: the tmp file is garbage, the old manifest stands.
            let _ = self.storage.remove(MANIFEST_TMP_NAME);
            return Err(e);
        }
        let r = self
            .storage
            .rename(MANIFEST_TMP_NAME, MANIFEST_NAME)
            .map_err(io_err("rename", MANIFEST_TMP_NAME))
            .and_then(|_| {
                self.storage
                    .sync_dir()
                    .map_err(io_err("sync directory", "."))
            });
        if r.is_err() {
            self.stopped = true;
        }
        r
    }

    /// Removes retired run files that no published view references any more. Called at the
    /// start of each flush; the bookie may also call it when idle.
    pub fn collect_garbage(&mut self) {
        let mut keep = Vec::new();
        for run in std::mem::take(&mut self.retired) {
            if Arc::strong_count(&run) == 1 {
                let name = file_name(FileKind::Run, run.id);
                if let Err(e) = self.storage.remove(&name) {
                    if !e.is_not_found() {
                        log::warn!("ledger storage: cannot remove retired {name}: {e}");
                        keep.push(run);
                    }
                }
            } else {
                keep.push(run);
            }
        }
        self.retired = keep;
        let mut keep = Vec::new();
        for (id, holders) in std::mem::take(&mut self.retired_segments) {
            if holders.iter().any(|w| w.strong_count() > 0) {
                keep.push((id, holders));
                continue;
            }
            // Renamed, not removed: unlinking tens of MiB at once stalls the device for
            // every journal commit behind it (the owner deletes trash gradually).
            let name = file_name(FileKind::Segment, id);
            let to = trash_name(&name);
            match self.storage.rename(&name, &to) {
                Ok(()) => self.trash.push(to),
                Err(e) if e.is_not_found() => {}
                Err(e) => {
                    log::warn!("ledger storage: cannot retire {name}: {e}");
                    keep.push((id, holders));
                }
            }
        }
        self.retired_segments = keep;
    }

    /// Retired segments renamed `*.trash` (and trash left by a previous run), for the owner to
    /// delete at its own pace (the bookie truncates them step by step). Taken once.
    pub fn take_trash(&mut self) -> Vec<String> {
        std::mem::take(&mut self.trash)
    }

    /// Deletes the trash at once (for owners without a gradual deleter: tools, tests).
    pub fn remove_trash(&mut self) {
        for name in self.take_trash() {
            if let Err(e) = self.storage.remove(&name) {
                if !e.is_not_found() {
                    log::warn!("ledger storage: cannot remove {name}: {e}");
                }
            }
        }
    }

    /// Retired files (index runs and segments) still waiting for readers to let go of them.
    pub fn retired_files(&self) -> usize {
        self.retired.len() + self.retired_segments.len()
    }

    /// Persists `batch` in the checkpoint order (module docs) and publishes a new view. Blocks
    /// the calling (flush) thread. After `Ok`, the journal may be trimmed up to the mark.
    pub fn flush(&mut self, batch: &FlushBatch) -> Result<FlushStats, StoreError> {
        if self.stopped {
            return Err(StoreError::Stopped);
        }
        self.collect_garbage();
        let mut stats = FlushStats::default();
        // Metadata changes, applied to the in-memory map only after the commit.
        let mut changed: BTreeMap<u64, LedgerMeta> = BTreeMap::new();
        for m in &batch.ledgers {
            changed.insert(m.ledger, m.clone());
        }
        let is_deleted =
            |l: u64, changed: &BTreeMap<u64, LedgerMeta>, all: &BTreeMap<u64, LedgerMeta>| {
                changed
                    .get(&l)
                    .or_else(|| all.get(&l))
                    .is_some_and(|m| m.deleted)
            };
        // Sort by key, later duplicates win, deleted ledgers dropped. (A batch already in key
        // order, as the shard's write cache hands it over, sorts in one pass.) The per-ledger
        // work is done once per ledger: the entries of one ledger are adjacent now.
        let mut order: Vec<usize> = (0..batch.entries.len()).collect();
        order.sort_by_key(|&i| (batch.entries[i].0, batch.entries[i].1, i));
        let mut picked: Vec<usize> = Vec::with_capacity(order.len());
        let mut ledger_deleted: Option<(u64, bool)> = None;
        for (k, &i) in order.iter().enumerate() {
            let key = (batch.entries[i].0, batch.entries[i].1);
            let last_of_key = order
                .get(k + 1)
                .is_none_or(|&j| (batch.entries[j].0, batch.entries[j].1) != key);
            if !last_of_key {
                continue;
            }
            let deleted = match ledger_deleted {
                Some((l, deleted)) if l == key.0 => deleted,
                _ => {
                    let deleted = is_deleted(key.0, &changed, &self.ledgers);
                    ledger_deleted = Some((key.0, deleted));
                    deleted
                }
            };
            if !deleted {
                picked.push(i);
            }
        }
        // Raise last_entry from each ledger's last entry (a ledger without metadata gets a
        // default one).
        for (k, &i) in picked.iter().enumerate() {
            let (l, e, _) = &batch.entries[i];
            if picked.get(k + 1).is_some_and(|&j| batch.entries[j].0 == *l) {
                continue;
            }
            let m = changed.entry(*l).or_insert_with(|| {
                self.ledgers.get(l).cloned().unwrap_or(LedgerMeta {
                    ledger: *l,
                    ..LedgerMeta::default()
                })
            });
            m.last_entry = Some(m.last_entry.map_or(*e, |x| x.max(*e)));
        }
        for (l, m) in changed.iter_mut() {
            if let Some(old) = self.ledgers.get(l).and_then(|o| o.last_entry) {
                m.last_entry = Some(m.last_entry.map_or(old, |x| x.max(old)));
            }
        }
        let mut created: Vec<String> = Vec::new();
        let r = self.flush_files(batch, &picked, &changed, &mut created, &mut stats);
        let (next, new_run) = match r {
            Ok(x) => x,
            Err(e) => {
                for n in &created {
                    let _ = self.storage.remove(n);
                }
                return Err(e);
            }
        };
        // 4. Commit.
        let old_meta = self.manifest.meta;
        self.commit_manifest(&next)?;
        self.manifest = next;
        for (l, m) in changed {
            self.ledgers.insert(l, m);
        }
        let mut runs = self.view.runs.clone();
        if let Some(info) = new_run {
            runs.push(Arc::new(info));
        }
        self.publish(runs);
        if let Some((id, _)) = old_meta {
            if self.manifest.meta.map(|m| m.0) != Some(id) {
                let _ = self.storage.remove(&file_name(FileKind::Meta, id));
            }
        }
        // Merges, each its own commit.
        while !self.compacting {
            let records: Vec<u64> = self.view.runs.iter().map(|r| r.records).collect();
            let Some(window) = index::pick_merge(
                &records,
                self.config.index_merge_width,
                self.config.max_index_runs,
            ) else {
                break;
            };
            match self.merge_once(window) {
                Ok(records) => {
                    stats.merges += 1;
                    stats.merged_records += records;
                }
                Err(e) => {
                    if self.stopped {
                        return Err(e);
                    }
                    log::warn!("ledger storage: index merge failed, will retry: {e}");
                    stats.merge_failures += 1;
                    break;
                }
            }
        }
        Ok(stats)
    }

    /// Steps 1-3 of a flush; returns the manifest to commit and the new run.
    fn flush_files(
        &mut self,
        batch: &FlushBatch,
        picked: &[usize],
        changed: &BTreeMap<u64, LedgerMeta>,
        created: &mut Vec<String>,
        stats: &mut FlushStats,
    ) -> Result<(Manifest, Option<RunInfo>), StoreError> {
        let mut next = self.manifest.clone();
        next.generation += 1;
        next.journal_mark = next.journal_mark.max(batch.journal_mark);
        // 1. Entry log.
        let mut records: Vec<IndexRecord> = Vec::with_capacity(picked.len());
        if !picked.is_empty() {
            let chunk = self.config.write_chunk_bytes;
            let inflight = self.config.max_writes_in_flight;
            let limit = self.config.entry_log_size_bytes;
            let mut seg = match next.segments.last() {
                Some(s) if s.len < limit => {
                    SegmentAppender::reopen(&mut self.storage, s.id, s.len, chunk, inflight)?
                }
                _ => self.new_segment(&mut next, created)?,
            };
            let mut noted: Option<(u32, u64)> = None;
            for (k, &i) in picked.iter().enumerate() {
                if let Some(&ahead) = picked.get(k + PREFETCH_DISTANCE) {
                    crate::prefetch::body(&batch.entries[ahead].2);
                }
                let (l, e, body) = &batch.entries[i];
                let need = round_up(
                    ENTRY_HEADER_BYTES as u64 + body.len() as u64,
                    ENTRY_ALIGN as u64,
                );
                if !seg.is_empty() && seg.pos() + need > limit {
                    stats.entry_log_bytes += seg.bytes_written();
                    let id = seg.id;
                    let end = seg.finish(&mut self.storage)?;
                    set_segment(&mut next, id, end);
                    stats.segments_rotated += 1;
                    seg = self.new_segment(&mut next, created)?;
                }
                let loc: Location = seg.append(&mut self.storage, *l, *e, body)?;
                // Once per ledger and segment: entries come in ledger order.
                if noted != Some((loc.segment, *l)) {
                    self.note_entry(loc.segment as u64, *l);
                    noted = Some((loc.segment, *l));
                }
                records.push(IndexRecord {
                    ledger: *l,
                    entry: *e,
                    location: loc,
                });
            }
            stats.entry_log_bytes += seg.bytes_written();
            let id = seg.id;
            let end = seg.finish(&mut self.storage)?;
            set_segment(&mut next, id, end);
            stats.entries = records.len() as u64;
        }
        // 2. Index run.
        let mut new_run = None;
        if !records.is_empty() {
            let id = self.alloc_id();
            next.next_file_id = self.manifest.next_file_id;
            created.push(file_name(FileKind::Run, id));
            let mut w = RunWriter::create(
                &mut self.storage,
                id,
                self.config.write_chunk_bytes,
                self.config.max_writes_in_flight,
            )?;
            for r in records {
                if let Err(e) = w.push(&mut self.storage, r) {
                    w.abort(&mut self.storage);
                    return Err(e);
                }
            }
            let info = w.finish(&mut self.storage)?;
            stats.index_bytes = info.file_len;
            next.runs.push(RunRef {
                id,
                file_len: info.file_len,
                records: info.records,
            });
            new_run = Some(info);
        }
        // 3. Metadata snapshot.
        if !changed.is_empty() {
            let all = merged_meta(&self.ledgers, changed);
            let bytes = meta::encode_snapshot(all.iter().copied()).map_err(StoreError::Limit)?;
            let id = self.alloc_id();
            next.next_file_id = self.manifest.next_file_id;
            let name = file_name(FileKind::Meta, id);
            created.push(name.clone());
            let len = write_small(&mut self.storage, &name, &bytes, &self.config)?;
            stats.meta_bytes = len;
            next.meta = Some((id, len));
        }
        next.next_file_id = self.manifest.next_file_id;
        Ok((next, new_run))
    }

    fn new_segment(
        &mut self,
        next: &mut Manifest,
        created: &mut Vec<String>,
    ) -> Result<SegmentAppender, StoreError> {
        let id = self.alloc_id();
        self.note_new_segment(id);
        next.next_file_id = self.manifest.next_file_id;
        created.push(file_name(FileKind::Segment, id));
        next.segments.push(SegmentRef {
            id,
            len: SEGMENT_HEADER_BYTES,
        });
        SegmentAppender::create(
            &mut self.storage,
            id,
            self.config.write_chunk_bytes,
            self.config.max_writes_in_flight,
        )
    }

    /// Merges the adjacent runs `window` (age order) into one; commits; retires them.
    fn merge_once(&mut self, window: std::ops::Range<usize>) -> Result<u64, StoreError> {
        let runs = self.view.runs.clone();
        let merging: Vec<Arc<RunInfo>> = runs[window.clone()].to_vec();
        let id = self.alloc_id();
        let deleted = self.view.deleted.clone();
        let merged = index::merge(
            &mut self.storage,
            &merging,
            id,
            self.config.write_chunk_bytes,
            self.config.max_writes_in_flight,
            &|l| deleted.contains(&l),
        );
        let merged = match merged {
            Ok(m) => m,
            Err(e) => {
                let _ = self.storage.remove(&file_name(FileKind::Run, id));
                return Err(e);
            }
        };
        let mut next = self.manifest.clone();
        next.generation += 1;
        let mut new_runs: Vec<Arc<RunInfo>> = runs[..window.start].to_vec();
        let written = merged.as_ref().map_or(0, |m| m.records);
        if let Some(m) = merged {
            new_runs.push(Arc::new(m));
        }
        new_runs.extend_from_slice(&runs[window.end..]);
        next.runs = new_runs
            .iter()
            .map(|r| RunRef {
                id: r.id,
                file_len: r.file_len,
                records: r.records,
            })
            .collect();
        // Runs are listed in age order, which is no longer id order after a merge; the
        // manifest keeps age order and ids only need to be unique.
        next.next_file_id = self.manifest.next_file_id;
        if let Err(e) = self.commit_manifest(&next) {
            if !self.stopped {
                let _ = self.storage.remove(&file_name(FileKind::Run, id));
            }
            return Err(e);
        }
        self.manifest = next;
        self.publish(new_runs);
        self.retired.extend(merging);
        Ok(written)
    }

    /// Verifies every entry of every live segment (up to its committed length) and calls `f`
    /// for each, oldest first: `check`, and the source for rebuilding the index.
    pub fn scan_all(&mut self, mut f: impl FnMut(ScannedEntry)) -> Result<u64, StoreError> {
        let mut n = 0;
        for s in self.manifest.segments.clone() {
            n += segment::scan(&mut self.storage, s.id, s.len, &mut f)?;
        }
        Ok(n)
    }

    /// Gives back the storage (closing nothing is needed: no file stays open between calls).
    pub fn into_storage(self) -> S {
        self.storage
    }
}

fn missing(e: StoreError, id: u64, kind: FileKind) -> StoreError {
    match e {
        StoreError::Io { error, .. } if error.is_not_found() => {
            StoreError::corrupt(&file_name(kind, id), 0, CorruptionKind::MissingFile)
        }
        e => e,
    }
}

fn check_segment<S: Storage>(storage: &mut S, s: &SegmentRef) -> Result<(), StoreError> {
    let name = file_name(FileKind::Segment, s.id);
    let file = storage.open(&name, false).map_err(|e| {
        if e.is_not_found() {
            StoreError::corrupt(&name, 0, CorruptionKind::MissingFile)
        } else {
            StoreError::io("open segment", &name, e)
        }
    })?;
    let r = (|| {
        let len = storage
            .file_len(file)
            .map_err(io_err("stat segment", &name))?;
        if len < s.len || s.len < SEGMENT_HEADER_BYTES {
            return Err(StoreError::corrupt(&name, len, CorruptionKind::Truncated));
        }
        let (buf, skip) = io::read_range(storage, file, 0, BLOCK)
            .map_err(io_err("read segment header", &name))?
            .ok_or_else(|| StoreError::corrupt(&name, 0, CorruptionKind::Truncated))?;
        segment::decode_header(&buf[skip..skip + BLOCK], s.id)
            .map_err(|k| StoreError::corrupt(&name, 0, k))
    })();
    storage.close(file);
    r
}

fn set_segment(m: &mut Manifest, id: u64, len: u64) {
    if let Some(s) = m.segments.iter_mut().find(|s| s.id == id) {
        s.len = len;
    }
}

/// The full metadata after applying `changed` to `all`, in ledger order.
fn merged_meta<'a>(
    all: &'a BTreeMap<u64, LedgerMeta>,
    changed: &'a BTreeMap<u64, LedgerMeta>,
) -> Vec<&'a LedgerMeta> {
    let mut out = Vec::with_capacity(all.len() + changed.len());
    for (l, m) in all {
        if !changed.contains_key(l) {
            out.push(m);
        }
    }
    out.extend(changed.values());
    out.sort_by_key(|m| m.ledger);
    out
}
