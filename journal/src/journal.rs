//! The journal writer: appends records into groups, writes each group with one O_DIRECT write,
//! syncs, and reports a durable LSN; rotates, prepares and recycles segment files.
//!
//! Life of a record: `append` copies the payload into the open group's aligned buffer behind a
//! checksummed header and returns its LSN. `tick` asks the group-commit policy whether to close
//! the group; a closed group is padded to 4 KiB and written at its reserved offset, at most
//! `max_groups_in_flight` at a time. When a write completes, a `SyncData` of the segment file is
//! issued (one at a time; it covers every write that completed before it). When the sync
//! completes, the groups it covered are durable, and `durable_lsn` advances over the in-order
//! prefix of durable groups. Callers acknowledge everything up to `durable_lsn`.
//!
//! After any failed write or sync the journal stops: appends return `Stopped`, nothing more is
//! submitted, and `durable_lsn` never moves again. It never retries a sync (fsyncgate).

use std::collections::VecDeque;

use storage::{AlignedBuf, Completion, FileId, IoError, Op, Storage, Wait, ALIGN};

use crate::config::JournalConfig;
use crate::error::{AppendError, JournalError};
use crate::format::{
    encode_padding, encode_record_parts, encode_segment_end, free_file_name, padded_end,
    record_bytes, segment_file_name, trash_file_name, Lsn, RecordKind, SegmentHeader, SegmentId,
    FLAG_RECOVERY_SEAL, SEGMENT_HEADER_BYTES,
};
use crate::io;
use crate::policy::{decide, Decision, FlushReason, OpenGroup, Triggers};
use crate::recovery::{self, LiveSegment, RecoveryReport};

const TOKEN_WRITE: u64 = 1 << 56;
const TOKEN_SYNC: u64 = 2 << 56;
const TOKEN_PREP: u64 = 3 << 56;
const TOKEN_KIND: u64 = 0xff << 56;

/// Counters, for metrics and benchmarks.
#[derive(Clone, Debug, Default)]
pub struct JournalStats {
    pub records: u64,
    pub groups: u64,
    pub bytes_written: u64,
    pub syncs: u64,
    pub segments_prepared: u64,
    pub segments_recycled: u64,
    /// Zeros written to prepare new segment files (recycled files need none).
    pub zero_fill_bytes: u64,
    /// Groups closed per reason: max wait, bytes, records, queue empty, idle, full/rotation.
    pub flushes_max_wait: u64,
    pub flushes_bytes: u64,
    pub flushes_records: u64,
    pub flushes_queue_empty: u64,
    pub flushes_idle: u64,
    pub flushes_full: u64,
    /// Appends refused with backpressure: every group buffer in use, or the next segment not
    /// prepared yet when the active one is full.
    pub refused_no_buffer: u64,
    pub refused_no_segment: u64,
}

/// When a durable group of records went through the journal's steps, in the owner's clock (the
/// `now_us` it passes to [`Journal::append`] and [`Journal::tick`]; the journal has none): for
/// attributing a record's latency to waiting for its group, the write and the sync. A step
/// completed is stamped when the journal reaps it (in `tick`), so the time includes the delay
/// until the owner looked; completions reaped by [`Journal::wait`] carry the last clock reading.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupTiming {
    pub first_lsn: Lsn,
    pub last_lsn: Lsn,
    /// The group's write was submitted (it was closed and the in-flight window had room).
    pub submitted_us: u64,
    /// The write completed.
    pub written_us: u64,
    /// The sync that made it durable completed.
    pub synced_us: u64,
}

/// One `SyncData` of the active segment (a group commit's fdatasync), in the owner's clock as
/// [`GroupTiming`]: submitted → completion reaped, and whether it succeeded (a failed one stops
/// the journal). The owner takes them with [`Journal::take_sync_timing`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyncTiming {
    pub submitted_us: u64,
    pub completed_us: u64,
    pub ok: bool,
}

/// Timings of durable groups kept until the owner asks (older ones are dropped).
const TIMINGS_KEPT: usize = 256;
/// Sync timings kept until the owner takes them (older ones are dropped): more than the syncs
/// of one pass of the owner's loop.
const SYNC_TIMINGS_KEPT: usize = 64;
/// Zero-fill bytes earned per byte of group written: the next segment is filled by the time
/// the active one is half used.
const ZERO_CREDIT_PER_BYTE: u64 = 2;
/// Credit saved up while no fill is running is capped at this many chunks, so a fill that
/// starts after a busy spell does not go out in one burst.
const ZERO_CREDIT_CHUNKS: u64 = 2;

/// A segment the writer places groups in.
struct Segment {
    header: SegmentHeader,
    seed: u32,
    file: FileId,
    /// Offset of the next group.
    write_pos: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GroupState {
    Closed,
    Writing,
    Written,
    Syncing(u64),
    Synced,
}

struct Group {
    seq: u64,
    buf: Option<AlignedBuf>,
    segment: SegmentId,
    header: SegmentHeader,
    seed: u32,
    file: FileId,
    offset: u64,
    fill: usize,
    records: usize,
    /// LSN of the last data record in the group or, for a group without one, before it.
    last_lsn: Lsn,
    opened_at_us: u64,
    submitted_us: u64,
    written_us: u64,
    state: GroupState,
    /// This group is a segment's end block: when durable, the segment is complete.
    seal: bool,
}

/// Preparation of the next segment file, one operation at a time, in the background.
enum Prep {
    Idle,
    /// A recycled file whose trim (rename to `*.free`) may not be durable yet: sync the
    /// directory before its header is rewritten, or a crash could leave the old `*.jrnl`
    /// name on a file that already carries another segment's header.
    FreeSyncing {
        seg: Segment,
        free_name: String,
        zero_from: u64,
    },
    Header {
        seg: Segment,
        free_name: String,
        zero_from: u64,
    },
    Zeroing {
        seg: Segment,
        free_name: String,
        next: u64,
    },
    /// The next zero chunk waits for credit ([`Journal::zero_credit`]): zero-filling runs
    /// beside the journal's own writes at a bounded share of them, not at device speed.
    ZeroPaused {
        seg: Segment,
        free_name: String,
        next: u64,
    },
    Syncing {
        seg: Segment,
        free_name: String,
    },
    /// Renamed into the log; the directory sync (an operation, so the owner's loop never
    /// blocks on a file-system journal commit) makes the name durable.
    DirSyncing {
        seg: Segment,
    },
}

/// The journal over a storage port `S`.
pub struct Journal<S: Storage> {
    storage: S,
    config: JournalConfig,
    triggers: Triggers,
    stopped: Option<IoError>,
    next_lsn: Lsn,
    durable_lsn: Lsn,
    next_segment_id: u64,
    next_generation: u64,
    active: Option<Segment>,
    ready: Option<Segment>,
    prep: Prep,
    /// Complete segments, oldest first, for trimming.
    live: VecDeque<LiveSegment>,
    /// Files to recycle as new segments.
    free: Vec<String>,
    /// Trimmed files beyond the free pool, renamed `*.trash`, for the owner to delete.
    trash: Vec<String>,
    /// A trim renamed or removed files since the last directory sync.
    trim_unsynced: bool,
    /// [`Journal::close`] ran: no further segment is prepared.
    closing: bool,
    open: Option<Group>,
    /// Closed groups not yet durable, in log order.
    queue: VecDeque<Group>,
    next_group_seq: u64,
    spare: Vec<AlignedBuf>,
    seal_buf: Option<AlignedBuf>,
    zero_buf: Option<AlignedBuf>,
    /// Bytes of zero-fill the next segment's preparation may write now: each group written
    /// adds [`ZERO_CREDIT_PER_BYTE`] times its size. A sync that follows a burst of zero-fill
    /// waits for the device to take all of it (docs/machine.md §1.8: 64 MiB of zeros at device
    /// speed held adds' p50 at 15 ms), so the fill keeps pace with the journal instead.
    zero_credit: u64,
    sync_in_flight: Option<u64>,
    /// When the sync in flight was submitted (the owner's clock).
    sync_submitted_us: u64,
    /// Completed syncs not yet taken by the owner ([`Journal::take_sync_timing`]).
    sync_timings: VecDeque<SyncTiming>,
    next_sync_seq: u64,
    completions: Vec<Completion>,
    stats: JournalStats,
    report: RecoveryReport,
    /// The owner's clock as last passed in (`append`, `tick`).
    clock_us: u64,
    /// When the last group was closed (the owner's clock): the idle commit gap counts from it.
    last_close_us: u64,
    /// Durable groups' timings, oldest first ([`Journal::group_timing`]).
    timings: VecDeque<GroupTiming>,
}

impl<S: Storage> Journal<S> {
    /// Opens the journal in `storage`: recovers, calls `visit` for every record with an LSN at
    /// or after `replay_from` (the checkpoint mark) in order, seals the recovered tail, and
    /// prepares a fresh segment for new records.
    pub fn open(
        storage: S,
        config: JournalConfig,
        replay_from: Lsn,
        visit: &mut dyn FnMut(Lsn, &[u8]),
    ) -> Result<Journal<S>, JournalError> {
        Journal::open_observing(storage, config, replay_from, visit, &mut |_, _| {})
    }

    /// As [`Journal::open`]; when recovery finds corruption, `visit_lost` also sees every valid
    /// data record after the corrupt position (before open fails in Strict mode, or before the
    /// tolerant mode cuts them off), so the caller can say what they held.
    pub fn open_observing(
        mut storage: S,
        config: JournalConfig,
        replay_from: Lsn,
        visit: &mut dyn FnMut(Lsn, &[u8]),
        visit_lost: &mut dyn FnMut(Lsn, &[u8]),
    ) -> Result<Journal<S>, JournalError> {
        config.validate().map_err(JournalError::Config)?;
        let rec = recovery::recover(&mut storage, &config, replay_from, visit, visit_lost)?;
        if let Some(seal) = &rec.seal {
            let name = segment_file_name(seal.id);
            let io = |error| JournalError::Io {
                what: "seal",
                file: name.clone(),
                error,
            };
            let file = storage.open(&name, false).map_err(io)?;
            let mut block = AlignedBuf::new(ALIGN);
            encode_seal(&mut block, seal.next_lsn, &seal.header, FLAG_RECOVERY_SEAL);
            let result = io::write_all(&mut storage, file, seal.offset, block)
                .and_then(|_| io::sync_data(&mut storage, file));
            storage.close(file);
            result.map_err(io)?;
        }
        let dir_io = |what, file: &str| {
            let file = file.to_string();
            move |error| JournalError::Io { what, file, error }
        };
        for name in &rec.corrupt {
            storage
                .rename(name, &format!("{name}.corrupt"))
                .map_err(dir_io("rename", name))?;
        }
        for name in &rec.trash {
            storage.remove(name).map_err(dir_io("remove", name))?;
        }
        // Unused segments left after the log become free files (their ids stay unique).
        let mut free = Vec::with_capacity(rec.free.len());
        for name in rec.free {
            match crate::format::parse_file_name(&name) {
                Some((id, false)) => {
                    let to = free_file_name(id);
                    storage
                        .rename(&name, &to)
                        .map_err(dir_io("rename", &name))?;
                    free.push(to);
                }
                _ => free.push(name),
            }
        }
        while free.len() > config.max_free_segments.max(config.preallocate_segments) {
            let name = free.remove(0);
            storage.remove(&name).map_err(dir_io("remove", &name))?;
        }
        let mut next_segment_id = rec.next_segment_id;
        // Files this open creates: removed again if the open fails (a full disk must not be
        // left full of files a failed start made).
        let mut created = Vec::new();
        while free.len() < config.preallocate_segments {
            let name = free_file_name(SegmentId(next_segment_id));
            next_segment_id += 1;
            created.push(name.clone());
            if let Err(error) = preallocate(&mut storage, &name, &config) {
                remove_created(&mut storage, &created);
                return Err(dir_io("preallocate", &name)(error));
            }
            free.push(name);
        }
        storage
            .sync_dir()
            .map_err(dir_io("sync", "journal directory"))?;
        // The log is cut after the stop mark (the seal durable, the segments after it freed
        // durably): the mark has done its work.
        if rec.stop_mark_file {
            crate::stopmark::remove(&mut storage)?;
        }

        let free_before_prep = free.len();
        let buffers = config.max_groups_in_flight + 2;
        let group_bytes = config.group_buffer_bytes();
        let mut journal = Journal {
            storage,
            triggers: config.triggers(),
            stopped: None,
            next_lsn: rec.next_lsn,
            durable_lsn: Lsn(rec.next_lsn.0 - 1),
            next_segment_id,
            next_generation: rec.next_generation,
            active: None,
            ready: None,
            prep: Prep::Idle,
            live: rec.live.into(),
            free,
            trash: Vec::new(),
            trim_unsynced: false,
            closing: false,
            open: None,
            queue: VecDeque::with_capacity(buffers + 2),
            next_group_seq: 0,
            spare: (0..buffers).map(|_| AlignedBuf::new(group_bytes)).collect(),
            seal_buf: Some(AlignedBuf::new(ALIGN)),
            zero_buf: Some(AlignedBuf::zeroed(config.zero_fill_chunk_bytes)),
            zero_credit: 0,
            sync_in_flight: None,
            sync_submitted_us: 0,
            sync_timings: VecDeque::with_capacity(SYNC_TIMINGS_KEPT),
            next_sync_seq: 0,
            completions: Vec::with_capacity(64),
            stats: JournalStats::default(),
            report: rec.report,
            clock_us: 0,
            last_close_us: 0,
            timings: VecDeque::with_capacity(TIMINGS_KEPT),
            config,
        };
        if let Err(e) = journal.prepare_blocking() {
            // The segment being prepared, when it was a new file, is this open's too.
            if journal.free.len() == free_before_prep {
                created.push(free_file_name(SegmentId(journal.next_segment_id - 1)));
            }
            remove_created(&mut journal.storage, &created);
            return Err(e);
        }
        journal.active = journal.ready.take();
        journal.pump();
        Ok(journal)
    }

    /// Appends one record and returns its LSN. The record is durable once
    /// [`Journal::durable_lsn`] reaches that LSN.
    pub fn append(&mut self, payload: &[u8], now_us: u64) -> Result<Lsn, AppendError> {
        self.append_parts(&[payload], now_us)
    }

    /// Appends one record whose payload is the concatenation of `parts`.
    pub fn append_parts(&mut self, parts: &[&[u8]], now_us: u64) -> Result<Lsn, AppendError> {
        if let Some(e) = self.stopped {
            return Err(AppendError::Stopped(e));
        }
        self.clock_us = now_us;
        let payload_len: usize = parts.iter().map(|p| p.len()).sum();
        if payload_len > self.config.max_record_bytes {
            return Err(AppendError::TooLarge {
                len: payload_len,
                max: self.config.max_record_bytes,
            });
        }
        let rec = record_bytes(payload_len);
        let segment_limit = self.config.segment_size_bytes - ALIGN as u64;
        loop {
            if self.open.is_none() {
                self.open_group(now_us)?;
            }
            let g = self.open.as_mut().expect("open group");
            let end = padded_end(g.fill + rec);
            let buf = g.buf.as_mut().expect("open group buffer");
            if end <= buf.capacity() && g.offset + end as u64 <= segment_limit {
                let lsn = self.next_lsn;
                encode_record_parts(
                    &mut buf.as_mut_capacity()[g.fill..],
                    RecordKind::Data,
                    lsn,
                    &g.header,
                    g.seed,
                    parts,
                );
                g.fill += rec;
                g.records += 1;
                g.last_lsn = lsn;
                self.next_lsn = Lsn(lsn.0 + 1);
                self.stats.records += 1;
                return Ok(lsn);
            }
            if g.records == 0 {
                // Not even an empty group here can take it: the segment is full.
                let g = self.open.take().expect("open group");
                self.spare.push(g.buf.expect("open group buffer"));
                self.rotate()?;
            } else {
                self.stats.flushes_full += 1;
                self.close_open_group();
            }
        }
    }

    /// Non-blocking progress: reaps completions, applies the group-commit policy (`queue_empty`:
    /// callers have nothing more to append right now) and submits what may go.
    pub fn tick(&mut self, now_us: u64, queue_empty: bool) -> Result<(), JournalError> {
        self.clock_us = now_us;
        self.reap(Wait::No)?;
        if let Some(g) = &self.open {
            let in_flight = self.queue.len();
            let group = OpenGroup {
                records: g.records,
                bytes: g.fill,
                opened_at_us: g.opened_at_us,
            };
            if let Decision::Flush(reason) = decide(
                &group,
                now_us,
                queue_empty,
                in_flight,
                self.last_close_us,
                &self.triggers,
            ) {
                match reason {
                    FlushReason::MaxWait => self.stats.flushes_max_wait += 1,
                    FlushReason::Bytes => self.stats.flushes_bytes += 1,
                    FlushReason::Records => self.stats.flushes_records += 1,
                    FlushReason::QueueEmpty => self.stats.flushes_queue_empty += 1,
                    FlushReason::Idle => self.stats.flushes_idle += 1,
                }
                self.close_open_group();
            }
        }
        self.pump();
        self.submit_pending();
        self.check_stopped()
    }

    /// Blocks until at least one operation completes or `timeout_us` passes, then makes
    /// progress as [`Journal::tick`] does (without closing the open group).
    pub fn wait(&mut self, timeout_us: Option<u64>) -> Result<(), JournalError> {
        self.reap(Wait::AtLeastOne { timeout_us })?;
        self.pump();
        self.submit_pending();
        self.check_stopped()
    }

    /// When the open group must be closed at the latest (the group-wait timer), if one is open.
    pub fn next_deadline_us(&self) -> Option<u64> {
        let g = self.open.as_ref().filter(|g| g.records > 0)?;
        let timer = g.opened_at_us.saturating_add(self.config.max_group_wait_us);
        let idle = self.config.flush_when_idle && self.queue.is_empty();
        Some(if idle {
            timer.min(
                self.last_close_us
                    .saturating_add(self.config.idle_commit_gap_us),
            )
        } else {
            timer
        })
    }

    /// Every record with an LSN up to this one is durable.
    pub fn durable_lsn(&self) -> Lsn {
        self.durable_lsn
    }

    /// The LSN the next append gets.
    pub fn next_lsn(&self) -> Lsn {
        self.next_lsn
    }

    /// The I/O error that stopped the journal, if it stopped.
    pub fn stopped(&self) -> Option<IoError> {
        self.stopped
    }

    pub fn stats(&self) -> &JournalStats {
        &self.stats
    }

    /// The timing of the durable group that holds `lsn`, if still kept. Callers ask in LSN
    /// order: the timings of groups that end before `lsn` are dropped.
    pub fn group_timing(&mut self, lsn: Lsn) -> Option<GroupTiming> {
        while self.timings.front().is_some_and(|t| t.last_lsn < lsn) {
            self.timings.pop_front();
        }
        self.timings.front().filter(|t| t.first_lsn <= lsn).copied()
    }

    /// The oldest completed sync not taken yet (at most the last [`SYNC_TIMINGS_KEPT`]).
    pub fn take_sync_timing(&mut self) -> Option<SyncTiming> {
        self.sync_timings.pop_front()
    }

    /// Groups written whose sync has not completed yet: waiting for the sync in flight to
    /// finish, or covered by it.
    pub fn groups_awaiting_sync(&self) -> usize {
        self.queue
            .iter()
            .filter(|g| matches!(g.state, GroupState::Written | GroupState::Syncing(_)))
            .count()
    }

    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.report
    }

    /// Whether anything appended is not yet durable.
    pub fn has_pending(&self) -> bool {
        self.open.as_ref().is_some_and(|g| g.records > 0) || !self.queue.is_empty()
    }

    /// Closes the open group and waits until everything appended is durable.
    pub fn flush(&mut self) -> Result<(), JournalError> {
        if self.open.as_ref().is_some_and(|g| g.records > 0) {
            self.close_open_group();
        }
        self.pump();
        while !self.queue.is_empty() {
            self.check_stopped()?;
            self.wait(None)?;
        }
        self.check_stopped()
    }

    /// Clean shutdown: makes everything appended durable and seals the active segment, so the
    /// next open finds a complete log and has nothing to repair. No further segment is
    /// prepared; appends still work until the new, empty active segment is full.
    pub fn close(&mut self) -> Result<(), JournalError> {
        self.flush()?;
        self.closing = true;
        let written = self
            .active
            .as_ref()
            .is_some_and(|s| s.write_pos > SEGMENT_HEADER_BYTES);
        if !written {
            return Ok(());
        }
        loop {
            match self.rotate() {
                Ok(()) => break,
                Err(AppendError::Stopped(e)) => return Err(JournalError::Stopped(e)),
                Err(_) if self.ready.is_none() && matches!(self.prep, Prep::Idle) => {
                    // Nothing is being prepared (it cannot be while the journal runs, but a
                    // clean stop must not hang on it): prepare the segment the seal needs.
                    if let Err(e) = self.start_prep() {
                        self.stop(e);
                    }
                    self.check_stopped()?;
                }
                Err(_) => self.wait(None)?,
            }
        }
        self.flush()
    }

    /// Drops complete segments whose records all precede `mark` (they are persisted elsewhere):
    /// recycles them (renamed `*.free`) up to `max_free_segments`, sets the rest aside as
    /// `*.trash` for [`Journal::take_trash`]. Returns how many segments were trimmed.
    pub fn trim(&mut self, mark: Lsn) -> Result<usize, JournalError> {
        let mut trimmed = 0;
        while let Some(seg) = self.live.front() {
            if seg.last_lsn >= mark {
                break;
            }
            let name = segment_file_name(seg.id);
            let keep = self
                .config
                .max_free_segments
                .max(self.config.preallocate_segments);
            // Never unlinked here: the owner's thread is an event loop, and unlinking a large
            // file can take tens of milliseconds. Renaming is cheap; the owner deletes the
            // trash elsewhere ([`Journal::take_trash`]).
            let recycle = self.free.len() < keep;
            let to = if recycle {
                free_file_name(seg.id)
            } else {
                trash_file_name(seg.id)
            };
            let result = self.storage.rename(&name, &to).map(|_| to);
            self.trim_unsynced = true;
            match result {
                Ok(to) if recycle => self.free.push(to),
                Ok(to) => self.trash.push(to),
                Err(error) => {
                    return Err(JournalError::Io {
                        what: "trim",
                        file: name,
                        error,
                    })
                }
            }
            self.live.pop_front();
            trimmed += 1;
        }
        // No directory sync here: a trimmed segment that reappears after a crash holds only
        // records below the mark (replay skips them) and still ends with its seal, so the log
        // stays continuous; the next segment preparation's directory sync makes the renames
        // durable anyway. Trimming thus never blocks the owner's loop.
        Ok(trimmed)
    }

    /// A one-line description of the segments, for logs and test diagnostics.
    /// Names (in the journal's directory) of trimmed files to delete: the owner deletes them
    /// off its latency-critical thread. Files never taken are deleted at the next open.
    pub fn take_trash(&mut self) -> Vec<String> {
        std::mem::take(&mut self.trash)
    }

    /// Deletes the trimmed files through the storage port, on the calling thread (for owners
    /// without a better place to do it).
    pub fn remove_trash(&mut self) -> Result<(), JournalError> {
        for name in self.take_trash() {
            self.storage
                .remove(&name)
                .map_err(|error| JournalError::Io {
                    what: "remove",
                    file: name,
                    error,
                })?;
        }
        Ok(())
    }

    pub fn describe_segments(&self) -> String {
        format!(
            "live {:?} active {:?} ready {:?} free {:?} durable {} next {}",
            self.live
                .iter()
                .map(|s| (s.id.0, s.last_lsn.0))
                .collect::<Vec<_>>(),
            self.active.as_ref().map(|s| (s.header.id.0, s.write_pos)),
            self.ready.as_ref().map(|s| s.header.id.0),
            self.free,
            self.durable_lsn.0,
            self.next_lsn.0
        )
    }

    /// The storage port, for callers that share it (tests, diagnostics).
    pub fn storage(&self) -> &S {
        &self.storage
    }

    /// Hands what `pump` queued to the device: an owner may sleep on an event loop next.
    fn submit_pending(&mut self) {
        if let Err(e) = self.storage.submit_pending() {
            self.stop(e);
        }
    }

    /// Writes the stop mark (`crate::stopmark`) of a stopped journal through `storage`, a
    /// handle of its own on the journal's directory: its durable LSN, after which the next open
    /// cuts the log. `None` when the journal has not stopped.
    pub fn write_stop_mark<T: Storage>(&self, storage: &mut T) -> Option<Result<(), IoError>> {
        self.stopped?;
        Some(crate::stopmark::write(storage, self.durable_lsn))
    }

    fn check_stopped(&self) -> Result<(), JournalError> {
        match self.stopped {
            Some(e) => Err(JournalError::Stopped(e)),
            None => Ok(()),
        }
    }

    fn stop(&mut self, error: IoError) {
        if self.stopped.is_none() {
            log::error!(
                "journal: I/O failure ({error}); the journal stops accepting records and \
                 will not retry (durable up to lsn {})",
                self.durable_lsn.0
            );
            self.stopped = Some(error);
        }
    }

    fn open_group(&mut self, now_us: u64) -> Result<(), AppendError> {
        let Some(seg) = self.active.as_ref() else {
            self.stats.refused_no_segment += 1;
            return Err(AppendError::Backpressure);
        };
        let Some(buf) = self.spare.pop() else {
            self.stats.refused_no_buffer += 1;
            return Err(AppendError::Backpressure);
        };
        self.open = Some(Group {
            // Numbered when closed, so the queue's numbers have no gaps.
            seq: 0,
            buf: Some(buf),
            segment: seg.header.id,
            header: seg.header,
            seed: seg.seed,
            file: seg.file,
            offset: seg.write_pos,
            fill: 0,
            records: 0,
            last_lsn: Lsn(self.next_lsn.0 - 1),
            opened_at_us: now_us,
            submitted_us: 0,
            written_us: 0,
            state: GroupState::Closed,
            seal: false,
        });
        Ok(())
    }

    /// Pads the open group to 4 KiB and queues it for writing.
    fn close_open_group(&mut self) {
        let Some(mut g) = self.open.take() else {
            return;
        };
        let end = padded_end(g.fill);
        let buf = g.buf.as_mut().expect("open group buffer");
        if end > g.fill {
            encode_padding(
                &mut buf.as_mut_capacity()[g.fill..],
                end - g.fill,
                self.next_lsn,
                &g.header,
                g.seed,
            );
        }
        buf.set_len(end);
        g.seq = self.next_group_seq;
        self.next_group_seq += 1;
        self.last_close_us = self.clock_us;
        let seg = self.active.as_mut().expect("active segment");
        debug_assert_eq!(seg.header.id, g.segment);
        seg.write_pos = g.offset + end as u64;
        g.state = GroupState::Closed;
        self.stats.groups += 1;
        self.queue.push_back(g);
    }

    /// Ends the active segment with a seal block and moves to the prepared one.
    fn rotate(&mut self) -> Result<(), AppendError> {
        if self.ready.is_none() || self.seal_buf.is_none() {
            self.stats.refused_no_segment += 1;
            self.pump();
            return Err(AppendError::Backpressure);
        }
        let old = self.active.take().expect("active segment");
        let mut block = self.seal_buf.take().expect("seal buffer");
        encode_seal(&mut block, self.next_lsn, &old.header, 0);
        let seq = self.next_group_seq;
        self.next_group_seq += 1;
        self.queue.push_back(Group {
            seq,
            buf: Some(block),
            segment: old.header.id,
            header: old.header,
            seed: old.seed,
            file: old.file,
            offset: old.write_pos,
            fill: ALIGN,
            records: 0,
            last_lsn: Lsn(self.next_lsn.0 - 1),
            opened_at_us: 0,
            submitted_us: 0,
            written_us: 0,
            state: GroupState::Closed,
            seal: true,
        });
        self.active = self.ready.take();
        self.pump();
        Ok(())
    }

    fn reap(&mut self, wait: Wait) -> Result<(), JournalError> {
        let mut completions = std::mem::take(&mut self.completions);
        let result = self.storage.poll(&mut completions, wait);
        for c in completions.drain(..) {
            self.handle(c);
        }
        self.completions = completions;
        if let Err(e) = result {
            self.stop(e);
        }
        Ok(())
    }

    fn handle(&mut self, c: Completion) {
        match c.token & TOKEN_KIND {
            TOKEN_WRITE => self.on_group_written(c),
            TOKEN_SYNC => self.on_synced(c),
            TOKEN_PREP => self.on_prep(c),
            _ => log::error!("journal: completion with unknown token {:#x}", c.token),
        }
    }

    fn on_group_written(&mut self, c: Completion) {
        let seq = c.token & !TOKEN_KIND;
        let front = self.queue.front().map(|g| g.seq).unwrap_or(u64::MAX);
        let Some(g) = seq
            .checked_sub(front)
            .and_then(|i| self.queue.get_mut(i as usize))
        else {
            log::error!("journal: write completion for unknown group {seq}");
            return;
        };
        debug_assert_eq!(g.seq, seq);
        let expected = c.buf.as_ref().map(|b| b.len()).unwrap_or(0);
        g.buf = c.buf;
        match c.result {
            Ok(n) if n == expected && n > 0 => {
                g.state = GroupState::Written;
                g.written_us = self.clock_us;
                self.stats.bytes_written += n as u64;
                self.zero_credit = self
                    .zero_credit
                    .saturating_add(n as u64 * ZERO_CREDIT_PER_BYTE)
                    .min(ZERO_CREDIT_CHUNKS * self.config.zero_fill_chunk_bytes as u64);
            }
            Ok(_) => self.stop(IoError::EIO),
            Err(e) => self.stop(e),
        }
    }

    fn on_synced(&mut self, c: Completion) {
        let sync_seq = c.token & !TOKEN_KIND;
        self.sync_in_flight = None;
        if self.sync_timings.len() == SYNC_TIMINGS_KEPT {
            self.sync_timings.pop_front();
        }
        self.sync_timings.push_back(SyncTiming {
            submitted_us: self.sync_submitted_us,
            completed_us: self.clock_us,
            ok: c.result.is_ok(),
        });
        if let Err(e) = c.result {
            self.stop(e);
            return;
        }
        if self.stopped.is_some() {
            // Nothing acknowledged after a failure, even if this sync claims success.
            return;
        }
        self.stats.syncs += 1;
        for g in self.queue.iter_mut() {
            if g.state == GroupState::Syncing(sync_seq) {
                g.state = GroupState::Synced;
            }
        }
        while self
            .queue
            .front()
            .is_some_and(|g| g.state == GroupState::Synced)
        {
            let g = self.queue.pop_front().expect("front");
            self.durable_lsn = self.durable_lsn.max(g.last_lsn);
            if g.records > 0 {
                if self.timings.len() == TIMINGS_KEPT {
                    self.timings.pop_front();
                }
                self.timings.push_back(GroupTiming {
                    first_lsn: Lsn(g.last_lsn.0 + 1 - g.records as u64),
                    last_lsn: g.last_lsn,
                    submitted_us: g.submitted_us,
                    written_us: g.written_us,
                    synced_us: self.clock_us,
                });
            }
            let buf = g.buf.expect("synced group buffer");
            if g.seal {
                self.storage.close(g.file);
                self.live.push_back(LiveSegment {
                    id: g.segment,
                    last_lsn: g.last_lsn,
                });
                self.seal_buf = Some(buf);
            } else {
                self.spare.push(buf);
            }
        }
    }

    /// Submits what may go: a sync for written groups, closed groups within the in-flight
    /// window, and the next segment's preparation.
    fn pump(&mut self) {
        if self.stopped.is_some() {
            return;
        }
        if self.sync_in_flight.is_none() {
            let file = self
                .queue
                .iter()
                .find(|g| g.state == GroupState::Written)
                .map(|g| g.file);
            if let Some(file) = file {
                let seq = self.next_sync_seq;
                self.next_sync_seq += 1;
                match self.storage.submit(TOKEN_SYNC | seq, Op::SyncData { file }) {
                    Ok(()) => {
                        self.sync_in_flight = Some(seq);
                        self.sync_submitted_us = self.clock_us;
                        for g in self.queue.iter_mut() {
                            if g.state == GroupState::Written {
                                g.state = GroupState::Syncing(seq);
                            }
                        }
                    }
                    Err((e, _)) if e == IoError::EAGAIN => {}
                    Err((e, _)) => return self.stop(e),
                }
            }
        }
        let first_segment = self.queue.front().map(|g| g.segment);
        let mut in_flight = self
            .queue
            .iter()
            .filter(|g| g.state != GroupState::Closed)
            .count();
        for i in 0..self.queue.len() {
            if in_flight >= self.config.max_groups_in_flight {
                break;
            }
            let g = &mut self.queue[i];
            if g.state != GroupState::Closed {
                continue;
            }
            // A segment's records go to disk only after the previous segment is complete.
            if Some(g.segment) != first_segment {
                break;
            }
            let buf = g.buf.take().expect("closed group buffer");
            let op = Op::Write {
                file: g.file,
                offset: g.offset,
                buf,
            };
            match self.storage.submit(TOKEN_WRITE | g.seq, op) {
                Ok(()) => {
                    g.state = GroupState::Writing;
                    g.submitted_us = self.clock_us;
                    in_flight += 1;
                }
                Err((e, buf)) => {
                    g.buf = buf;
                    if e != IoError::EAGAIN {
                        self.stop(e);
                    }
                    return;
                }
            }
        }
        if !self.closing && self.ready.is_none() && matches!(self.prep, Prep::Idle) {
            if let Err(e) = self.start_prep() {
                self.stop(e);
            }
        }
        self.resume_zero_fill();
    }

    /// Starts preparing the next segment: a recycled file if one is free, else a new one. The
    /// file is prepared under a `*.free` name and renamed into the log only when its header and
    /// contents are durable, so a crash part-way leaves a free file, never a broken segment.
    fn start_prep(&mut self) -> Result<(), IoError> {
        let id = SegmentId(self.next_segment_id);
        self.next_segment_id += 1;
        let header = SegmentHeader {
            id,
            generation: self.next_generation,
        };
        self.next_generation += 1;
        let (free_name, file, zero_from, recycled) = match self.free.pop() {
            Some(free) => {
                let file = self.storage.open(&free, false)?;
                let len = self.storage.file_len(file)?;
                self.stats.segments_recycled += 1;
                (free, file, storage::align_down(len as usize) as u64, true)
            }
            None => {
                let free = free_file_name(id);
                (free.clone(), self.storage.open(&free, true)?, 0, false)
            }
        };
        let seg = Segment {
            header,
            seed: header.crc_seed(),
            file,
            write_pos: SEGMENT_HEADER_BYTES,
        };
        if recycled && self.trim_unsynced {
            self.trim_unsynced = false;
            self.storage
                .submit(TOKEN_PREP, Op::SyncDir)
                .map_err(|(e, _)| e)?;
            self.prep = Prep::FreeSyncing {
                seg,
                free_name,
                zero_from,
            };
            return Ok(());
        }
        self.write_prep_header(seg, free_name, zero_from)
    }

    /// Writes a prepared segment's header block (the first step for a file known free).
    fn write_prep_header(
        &mut self,
        seg: Segment,
        free_name: String,
        zero_from: u64,
    ) -> Result<(), IoError> {
        let file = seg.file;
        let mut block = AlignedBuf::zeroed(ALIGN);
        seg.header.encode(&mut block);
        self.storage
            .submit(
                TOKEN_PREP,
                Op::Write {
                    file,
                    offset: 0,
                    buf: block,
                },
            )
            .map_err(|(e, _)| e)?;
        self.prep = Prep::Header {
            seg,
            free_name,
            zero_from: zero_from.max(SEGMENT_HEADER_BYTES),
        };
        Ok(())
    }

    fn on_prep(&mut self, c: Completion) {
        let prep = std::mem::replace(&mut self.prep, Prep::Idle);
        let ok = match (&c.result, &c.buf) {
            (Ok(n), Some(buf)) => *n == buf.len(),
            (Ok(_), None) => true,
            (Err(_), _) => false,
        };
        if !ok {
            self.stop(c.result.err().unwrap_or(IoError::EIO));
            return;
        }
        let next = match prep {
            Prep::FreeSyncing {
                seg,
                free_name,
                zero_from,
            } => {
                if let Err(e) = self.write_prep_header(seg, free_name, zero_from) {
                    self.stop(e);
                }
                None
            }
            Prep::Header {
                seg,
                free_name,
                zero_from,
            } => Some((seg, free_name, zero_from)),
            Prep::Zeroing {
                seg,
                free_name,
                next,
            } => {
                if let Some(buf) = &c.buf {
                    self.stats.zero_fill_bytes += buf.len() as u64;
                }
                self.zero_buf = c.buf;
                self.prep = Prep::ZeroPaused {
                    seg,
                    free_name,
                    next,
                };
                self.resume_zero_fill();
                None
            }
            Prep::ZeroPaused { .. } => {
                log::error!("journal: preparation completion while no operation was in flight");
                None
            }
            Prep::Syncing { seg, free_name } => {
                let name = segment_file_name(seg.header.id);
                if let Err(e) = self.storage.rename(&free_name, &name) {
                    return self.stop(e);
                }
                if let Err((e, _)) = self.storage.submit(TOKEN_PREP, Op::SyncDir) {
                    return self.stop(e);
                }
                self.prep = Prep::DirSyncing { seg };
                None
            }
            Prep::DirSyncing { seg } => {
                self.stats.segments_prepared += 1;
                self.ready = Some(seg);
                None
            }
            Prep::Idle => None,
        };
        let Some((seg, free_name, from)) = next else {
            return;
        };
        self.prep = Prep::ZeroPaused {
            seg,
            free_name,
            next: from,
        };
        self.resume_zero_fill();
    }

    /// Submits the next step of a paused zero fill when it may go: with credit from the
    /// journal's own writes, at once when the journal is idle or about to run out of room, and
    /// the final sync as soon as the file is filled.
    fn resume_zero_fill(&mut self) {
        let Prep::ZeroPaused { next: from, .. } = self.prep else {
            return;
        };
        let size = self.config.segment_size_bytes;
        let chunk = (size.saturating_sub(from)).min(self.config.zero_fill_chunk_bytes as u64);
        if from < size {
            let idle = self.queue.is_empty() && self.open.as_ref().is_none_or(|g| g.records == 0);
            let urgent = self
                .active
                .as_ref()
                .is_none_or(|seg| size.saturating_sub(seg.write_pos) < size / 8);
            if !(idle || urgent || self.zero_credit >= chunk) {
                return;
            }
            self.zero_credit = self.zero_credit.saturating_sub(chunk);
        }
        let Prep::ZeroPaused { seg, free_name, .. } = std::mem::replace(&mut self.prep, Prep::Idle)
        else {
            return;
        };
        let result = if from < size {
            let mut buf = self.zero_buf.take().expect("zero buffer");
            buf.set_len(chunk as usize);
            let file = seg.file;
            self.prep = Prep::Zeroing {
                seg,
                free_name,
                next: from + chunk,
            };
            self.storage.submit(
                TOKEN_PREP,
                Op::Write {
                    file,
                    offset: from,
                    buf,
                },
            )
        } else {
            let file = seg.file;
            self.prep = Prep::Syncing { seg, free_name };
            self.storage.submit(TOKEN_PREP, Op::SyncData { file })
        };
        if let Err((e, buf)) = result {
            if buf.is_some() {
                self.zero_buf = buf;
            }
            self.stop(e);
        }
    }

    /// Prepares the next segment and waits for it (used at open).
    fn prepare_blocking(&mut self) -> Result<(), JournalError> {
        if let Err(e) = self.start_prep() {
            self.stop(e);
        }
        while self.ready.is_none() && self.stopped.is_none() {
            if self.storage.in_flight() == 0 {
                self.stop(IoError::EIO);
                break;
            }
            self.reap(Wait::AtLeastOne { timeout_us: None })?;
        }
        self.check_stopped().map_err(|e| match e {
            JournalError::Stopped(error) => JournalError::Io {
                what: "prepare segment",
                file: segment_file_name(SegmentId(self.next_segment_id - 1)),
                error,
            },
            other => other,
        })
    }
}

/// Removes files a failed open created (best effort: the open already failed; what cannot be
/// removed is only a free file, never part of the log).
fn remove_created<S: Storage>(storage: &mut S, names: &[String]) {
    for name in names {
        if let Err(e) = storage.remove(name) {
            if !e.is_not_found() {
                log::warn!("journal: cannot remove {name} after a failed open: {e}");
            }
        }
    }
    if let Err(e) = storage.sync_dir() {
        log::warn!("journal: directory sync after a failed open: {e}");
    }
}

/// Creates a free segment file of the configured size, zero-filled and synced (blocking: used
/// at open only).
fn preallocate<S: Storage>(
    storage: &mut S,
    name: &str,
    config: &JournalConfig,
) -> Result<(), IoError> {
    let file = storage.open(name, true)?;
    let result = (|| {
        let mut buf = AlignedBuf::zeroed(config.zero_fill_chunk_bytes.max(1 << 20));
        let mut offset = 0u64;
        while offset < config.segment_size_bytes {
            let len = (config.segment_size_bytes - offset).min(buf.capacity() as u64) as usize;
            buf.set_len(len);
            buf = io::write_all(storage, file, offset, buf)?;
            offset += len as u64;
        }
        io::sync_data(storage, file)
    })();
    storage.close(file);
    result
}

/// Fills a 4 KiB block with a `SegmentEnd` record (`flags`: 0 for a rotation,
/// `FLAG_RECOVERY_SEAL` for a recovery's cut) and padding.
fn encode_seal(block: &mut AlignedBuf, next_lsn: Lsn, header: &SegmentHeader, flags: u8) {
    let seed = header.crc_seed();
    let bytes = block.as_mut_capacity();
    let n = encode_segment_end(bytes, next_lsn, header, seed, flags);
    encode_padding(&mut bytes[n..ALIGN], ALIGN - n, next_lsn, header, seed);
    block.set_len(ALIGN);
}
