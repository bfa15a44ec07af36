//! Garbage collection of one shard's ledger storage: dropping deleted ledgers from the index
//! and reclaiming entry-log space by compaction (Java's `GarbageCollectorThread` with its
//! minor/major compaction, docs/semantics.md §4.7-4.8).
//!
//! Two phases, both run by the flush thread between flushes:
//!
//! 1. [`LedgerStore::collect_index`] merges every index run into one, leaving out the records
//!    of deleted ledgers and records shadowed by newer ones. While merging it adds up the live
//!    bytes of each entry-log segment. Segments with nothing live (other than the active one)
//!    leave the manifest in the same commit: that alone reclaims the space of ledgers whose
//!    entries shared no segment with live ones.
//! 2. [`LedgerStore::begin_compaction`] picks segments whose live fraction is under a threshold
//!    (lowest first), and [`LedgerStore::compact_step`] copies their live entries, a bounded
//!    amount per call, into new segments. The caller paces the steps (rate limit) and runs
//!    flushes between them. The last step writes a relocation run and commits a manifest
//!    without the old segments.
//!
//! Why the relocation run is correct although flushes run between steps: index merges are
//! suspended while a compaction is in progress, and the relocation run is inserted right
//! after the run the compaction was planned from, so every run a flush wrote meanwhile stays
//! newer and still wins for the keys it overwrote. A crash before the final commit leaves the
//! new segments unreferenced (removed at open) and the old ones in place; old segments are
//! removed only once no published view lists them.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use bytes::Bytes;
use storage::{FileId, Storage};

use crate::error::StoreError;
use crate::format::*;
use crate::index::{self, IndexRecord, RunInfo, RunWriter};
use crate::manifest::{RunRef, SegmentRef};
use crate::segment::{self, SegmentAppender};
use crate::store::LedgerStore;

/// Live bytes of one segment, as counted by [`LedgerStore::collect_index`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentUsage {
    pub id: u64,
    /// Committed length (header included).
    pub len: u64,
    /// Bytes (entry headers and padding included) of the entries the index still points to.
    pub live_bytes: u64,
}

impl SegmentUsage {
    /// Live fraction, 0.0 to 1.0 (Java's `EntryLogMetadata.getUsage`).
    pub fn usage(&self) -> f64 {
        let total = self.len.saturating_sub(SEGMENT_HEADER_BYTES);
        if total == 0 {
            return 1.0;
        }
        (self.live_bytes as f64 / total as f64).min(1.0)
    }
}

/// What [`LedgerStore::collect_index`] did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IndexGcStats {
    pub records_before: u64,
    pub records_after: u64,
    pub runs_before: usize,
    /// Segments removed because nothing in them is live any more.
    pub segments_dropped: u32,
    pub bytes_dropped: u64,
    /// Every segment still live after the collection, in manifest order.
    pub usage: Vec<SegmentUsage>,
    /// Tombstones forgotten: no record and no segment of their ledgers is left.
    pub tombstones_purged: usize,
    /// Tombstones still kept (a segment that may hold their entries is still there).
    pub tombstones_kept: usize,
}

/// What a finished compaction did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompactionStats {
    /// Segments compacted away.
    pub segments: u32,
    /// Their committed lengths, summed.
    pub bytes_before: u64,
    pub entries_copied: u64,
    /// Bytes written to the new segments (headers and padding included).
    pub bytes_written: u64,
}

impl CompactionStats {
    /// Disk space given back.
    pub fn bytes_reclaimed(&self) -> u64 {
        self.bytes_before.saturating_sub(self.bytes_written)
    }
}

/// A compaction in progress; see [`LedgerStore::compact_step`].
#[derive(Debug)]
pub struct Compaction {
    base_run: u64,
    victims: Vec<u64>,
    /// Live records of the victims, in (segment, offset) order.
    records: Vec<IndexRecord>,
    next: usize,
    /// New segments, written up to their lengths (synced by the commit).
    outputs: Vec<SegmentRef>,
    relocated: Vec<IndexRecord>,
    stats: CompactionStats,
}

impl Compaction {
    /// Live entries still to copy.
    pub fn remaining(&self) -> usize {
        self.records.len() - self.next
    }
    /// The segments being compacted.
    pub fn victims(&self) -> &[u64] {
        &self.victims
    }
}

/// The outcome of one [`LedgerStore::compact_step`].
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// More to copy; call again. Carries the bytes copied by this step.
    More(u64),
    /// Committed.
    Done(CompactionStats),
}

impl<S: Storage> LedgerStore<S> {
    /// Phase 1 (module docs): one index run without deleted or shadowed records, segments with
    /// nothing live dropped, and the live bytes of the rest. Refused during a compaction.
    pub fn collect_index(&mut self) -> Result<IndexGcStats, StoreError> {
        if self.stopped {
            return Err(StoreError::Stopped);
        }
        if self.compacting {
            return Err(StoreError::Config("a compaction is in progress"));
        }
        self.collect_garbage();
        let runs = self.view.runs().to_vec();
        let mut stats = IndexGcStats {
            records_before: runs.iter().map(|r| r.records).sum(),
            runs_before: runs.len(),
            ..IndexGcStats::default()
        };
        let deleted = self.deleted_ledgers();
        let mut live: HashMap<u64, u64> = HashMap::new();
        let merged = if runs.is_empty() {
            None
        } else {
            let id = self.alloc_id();
            let chunk = self.config.write_chunk_bytes;
            let inflight = self.config.max_writes_in_flight;
            let r = index::merge_observed(
                &mut self.storage,
                &runs,
                id,
                chunk,
                inflight,
                // Planted bug (`bookie::sim`): an off-by-one that drops the ledger after a
                // deleted one too.
                &|l| {
                    deleted.contains(&l)
                        || (mutation::on(mutation::Mutation::GcDropsLiveLedger)
                            && deleted.contains(&l.wrapping_sub(1)))
                },
                &mut |r| {
                    *live.entry(r.location.segment as u64).or_default() += r.location.stored_bytes()
                },
            );
            match r {
                Ok(m) => m,
                Err(e) => {
                    let _ = self.storage.remove(&file_name(FileKind::Run, id));
                    return Err(e);
                }
            }
        };
        let active = self.manifest.segments.last().map(|s| s.id);
        let mut next = self.manifest.clone();
        next.generation += 1;
        let mut dropped = Vec::new();
        next.segments.retain(|s| {
            let keep = Some(s.id) == active || live.get(&s.id).is_some_and(|&b| b > 0);
            if !keep {
                dropped.push(*s);
            }
            keep
        });
        let new_runs: Vec<Arc<RunInfo>> = merged.into_iter().map(Arc::new).collect();
        stats.records_after = new_runs.iter().map(|r| r.records).sum();
        next.runs = new_runs.iter().map(|r| run_ref(r)).collect();
        next.next_file_id = self.manifest.next_file_id;
        if !runs.is_empty() || !dropped.is_empty() {
            if let Err(e) = self.commit_manifest(&next) {
                if !self.stopped {
                    for r in &new_runs {
                        let _ = self.storage.remove(&file_name(FileKind::Run, r.id));
                    }
                }
                return Err(e);
            }
            self.manifest = next;
            self.publish(new_runs);
            self.retired.extend(runs);
            for s in &dropped {
                self.retire_segment(s.id);
                stats.segments_dropped += 1;
                stats.bytes_dropped += s.len;
            }
            self.collect_garbage();
        }
        // Every run was merged into one without deleted records: tombstones whose segments
        // are gone too can go.
        match self.purge_tombstones() {
            Ok(n) => stats.tombstones_purged = n,
            Err(e) if self.stopped => return Err(e),
            Err(e) => log::warn!("ledger storage: purging tombstones failed, will retry: {e}"),
        }
        stats.tombstones_kept = self.ledgers().values().filter(|m| m.deleted).count();
        stats.usage = self
            .manifest
            .segments
            .iter()
            .map(|s| SegmentUsage {
                id: s.id,
                len: s.len,
                live_bytes: live.get(&s.id).copied().unwrap_or(0),
            })
            .collect();
        Ok(stats)
    }

    /// Phase 2 (module docs): plans a compaction of the segments in `usage` (from the
    /// [`collect_index`](Self::collect_index) just before) whose live fraction is below
    /// `threshold`, lowest first, up to `max_live_bytes` of entries to copy (at least one
    /// segment). The active segment is never a victim. `None`: nothing to compact.
    pub fn begin_compaction(
        &mut self,
        usage: &[SegmentUsage],
        threshold: f64,
        max_live_bytes: u64,
    ) -> Result<Option<Compaction>, StoreError> {
        if self.stopped {
            return Err(StoreError::Stopped);
        }
        if self.compacting {
            return Err(StoreError::Config("a compaction is in progress"));
        }
        // The plan needs the single run `collect_index` left; a flush since then means the
        // usage is stale: skip this round.
        let base = match self.view.runs() {
            [one] => one.clone(),
            _ => return Ok(None),
        };
        let active = self.manifest.segments.last().map(|s| s.id);
        let mut candidates: Vec<&SegmentUsage> = usage
            .iter()
            .filter(|u| {
                Some(u.id) != active
                    && u.live_bytes > 0
                    && u.usage() < threshold
                    && self.view.segment_len(u.id) == Some(u.len)
            })
            .collect();
        candidates.sort_by(|a, b| a.usage().total_cmp(&b.usage()).then(a.id.cmp(&b.id)));
        let mut victims = Vec::new();
        let mut planned = 0u64;
        let mut bytes_before = 0u64;
        for u in candidates {
            if !victims.is_empty() && planned + u.live_bytes > max_live_bytes {
                break;
            }
            planned += u.live_bytes;
            bytes_before += u.len;
            victims.push(u.id);
        }
        if victims.is_empty() {
            return Ok(None);
        }
        let set: HashSet<u32> = victims.iter().map(|&v| v as u32).collect();
        let deleted = self.deleted_ledgers();
        let mut records = Vec::new();
        index::scan_run(
            &mut self.storage,
            &base,
            self.config.write_chunk_bytes,
            &mut |r| {
                if set.contains(&r.location.segment) && !deleted.contains(&r.ledger) {
                    records.push(r);
                }
            },
        )?;
        records.sort_by_key(|r| (r.location.segment, r.location.offset));
        self.compacting = true;
        Ok(Some(Compaction {
            base_run: base.id,
            victims: victims.clone(),
            records,
            next: 0,
            outputs: Vec::new(),
            relocated: Vec::new(),
            stats: CompactionStats {
                segments: victims.len() as u32,
                bytes_before,
                ..CompactionStats::default()
            },
        }))
    }

    /// Copies live entries of `c` (at least one, then until `budget_bytes` of entry bodies),
    /// unsynced, and commits once everything is copied (syncing the copies first). On an error, call
    /// [`abort_compaction`](Self::abort_compaction) (the store stays usable unless it stopped).
    pub fn compact_step(
        &mut self,
        c: &mut Compaction,
        budget_bytes: u64,
    ) -> Result<Step, StoreError> {
        self.compact_step_limited(c, budget_bytes, usize::MAX)
    }

    /// [`compact_step`](Self::compact_step) that also stops after `max_entries` entries (the
    /// bookie's `compactionRateByEntries`).
    pub fn compact_step_limited(
        &mut self,
        c: &mut Compaction,
        budget_bytes: u64,
        max_entries: usize,
    ) -> Result<Step, StoreError> {
        if self.stopped {
            return Err(StoreError::Stopped);
        }
        // Read first, then write: a blocking read must not run while writes are in flight.
        let deleted = self.deleted_ledgers();
        let mut batch: Vec<(IndexRecord, Bytes)> = Vec::new();
        let mut files: HashMap<u32, FileId> = HashMap::new();
        let mut copied = 0u64;
        let read = (|| {
            while c.next < c.records.len()
                && (batch.is_empty() || (copied < budget_bytes && batch.len() < max_entries))
            {
                let r = c.records[c.next];
                c.next += 1;
                if deleted.contains(&r.ledger) {
                    continue;
                }
                let file = match files.get(&r.location.segment) {
                    Some(f) => *f,
                    None => {
                        let name = file_name(FileKind::Segment, r.location.segment as u64);
                        let f = self
                            .storage
                            .open(&name, false)
                            .map_err(|e| StoreError::io("open segment", &name, e))?;
                        files.insert(r.location.segment, f);
                        f
                    }
                };
                let body =
                    segment::read_entry(&mut self.storage, file, r.location, r.ledger, r.entry)?;
                copied += body.len() as u64;
                batch.push((r, body));
            }
            Ok::<(), StoreError>(())
        })();
        for (_, f) in files {
            self.storage.close(f);
        }
        read?;
        if !batch.is_empty() {
            self.append_copies(c, &batch)?;
        }
        if c.next < c.records.len() {
            return Ok(Step::More(copied));
        }
        self.commit_compaction(c)?;
        Ok(Step::Done(c.stats.clone()))
    }

    fn append_copies(
        &mut self,
        c: &mut Compaction,
        batch: &[(IndexRecord, Bytes)],
    ) -> Result<(), StoreError> {
        let chunk = self.config.write_chunk_bytes;
        let inflight = self.config.max_writes_in_flight;
        let limit = self.config.entry_log_size_bytes;
        let mut seg = match c.outputs.last() {
            Some(s) if s.len < limit => {
                SegmentAppender::reopen(&mut self.storage, s.id, s.len, chunk, inflight)?
            }
            _ => self.new_output(c)?,
        };
        for (r, body) in batch {
            let need = round_up(
                ENTRY_HEADER_BYTES as u64 + body.len() as u64,
                ENTRY_ALIGN as u64,
            );
            if !seg.is_empty() && seg.pos() + need > limit {
                c.stats.bytes_written += seg.bytes_written();
                let id = seg.id;
                let end = seg.finish_unsynced(&mut self.storage)?;
                set_len(&mut c.outputs, id, end);
                seg = self.new_output(c)?;
            }
            let location = seg.append(&mut self.storage, r.ledger, r.entry, body)?;
            self.note_entry(location.segment as u64, r.ledger);
            c.relocated.push(IndexRecord {
                ledger: r.ledger,
                entry: r.entry,
                location,
            });
            c.stats.entries_copied += 1;
        }
        c.stats.bytes_written += seg.bytes_written();
        let id = seg.id;
        let end = seg.finish_unsynced(&mut self.storage)?;
        set_len(&mut c.outputs, id, end);
        Ok(())
    }

    fn new_output(&mut self, c: &mut Compaction) -> Result<SegmentAppender, StoreError> {
        let id = self.alloc_id();
        self.note_new_segment(id);
        c.outputs.push(SegmentRef {
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

    fn commit_compaction(&mut self, c: &mut Compaction) -> Result<(), StoreError> {
        // The copies become durable here, once per output segment, before anything refers
        // to them (the steps wrote them unsynced).
        for s in &c.outputs {
            segment::sync_segment(&mut self.storage, s.id)?;
        }
        let runs = self.view.runs().to_vec();
        let Some(pos) = runs.iter().position(|r| r.id == c.base_run) else {
            return Err(StoreError::Config(
                "the compaction's base index run vanished (merged during a compaction)",
            ));
        };
        let mut relocated = std::mem::take(&mut c.relocated);
        relocated.sort_by_key(|r| r.key());
        let mut new_runs: Vec<Arc<RunInfo>> = runs[..=pos].to_vec();
        let mut created_run = None;
        if !relocated.is_empty() {
            let id = self.alloc_id();
            created_run = Some(id);
            let mut w = RunWriter::create(
                &mut self.storage,
                id,
                self.config.write_chunk_bytes,
                self.config.max_writes_in_flight,
            )?;
            for r in relocated {
                if let Err(e) = w.push(&mut self.storage, r) {
                    w.abort(&mut self.storage);
                    let _ = self.storage.remove(&file_name(FileKind::Run, id));
                    return Err(e);
                }
            }
            match w.finish(&mut self.storage) {
                Ok(info) => new_runs.push(Arc::new(info)),
                Err(e) => {
                    let _ = self.storage.remove(&file_name(FileKind::Run, id));
                    return Err(e);
                }
            }
        }
        new_runs.extend_from_slice(&runs[pos + 1..]);
        let mut next = self.manifest.clone();
        next.generation += 1;
        next.runs = new_runs.iter().map(|r| run_ref(r)).collect();
        next.segments.retain(|s| !c.victims.contains(&s.id));
        next.segments.extend(c.outputs.iter().copied());
        next.segments.sort_by_key(|s| s.id);
        next.next_file_id = self.manifest.next_file_id;
        if let Err(e) = self.commit_manifest(&next) {
            if !self.stopped {
                if let Some(id) = created_run {
                    let _ = self.storage.remove(&file_name(FileKind::Run, id));
                }
            }
            return Err(e);
        }
        self.manifest = next;
        self.publish(new_runs);
        for v in std::mem::take(&mut c.victims) {
            self.retire_segment(v);
        }
        c.outputs.clear();
        self.compacting = false;
        self.collect_garbage();
        Ok(())
    }

    /// Gives up on `c`: its new segments are removed, the old ones stay, merges resume.
    pub fn abort_compaction(&mut self, c: Compaction) {
        self.compacting = false;
        if self.stopped {
            return;
        }
        let referenced: HashSet<u64> = self.manifest.segments.iter().map(|s| s.id).collect();
        for s in c.outputs {
            if !referenced.contains(&s.id) {
                let _ = self.storage.remove(&file_name(FileKind::Segment, s.id));
            }
        }
    }
}

fn run_ref(r: &RunInfo) -> RunRef {
    RunRef {
        id: r.id,
        file_len: r.file_len,
        records: r.records,
    }
}

fn set_len(outputs: &mut [SegmentRef], id: u64, len: u64) {
    if let Some(s) = outputs.iter_mut().find(|s| s.id == id) {
        s.len = len;
    }
}
