//! The shard's side of group commit: appending records to its journal, arming the journal
//! driver's timer, and holding requests back (blocked records, admission pauses) while every
//! journal buffer or the write cache is in use.

use super::*;

/// The journal ring's eventfd, for `AsyncFd`: a duplicate of the ring's descriptor, owned, so
/// the driver's `AsyncFd` never outlives the descriptor it watches.
pub struct EventFd(OwnedFd);

impl AsRawFd for EventFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

impl EventFd {
    /// Reads (resets) the counter; EAGAIN when nothing was signalled.
    pub fn drain(&self) {
        let mut value = [0u8; 8];
        let _ = nix::unistd::read(&self.0, &mut value);
    }
}

impl Shard {
    /// The journal ring's eventfd (io_uring), duplicated for the journal driver to own, or
    /// `None` (psync completes inside `submit`).
    pub fn journal_eventfd(&self) -> Option<std::io::Result<EventFd>> {
        let fd = self.core.journal.storage().eventfd()?;
        Some(fd.try_clone_to_owned().map(EventFd))
    }

    /// For the journal driver: how long to sleep, at most `idle`, before the open group's
    /// deadline; remembered so that `drive` wakes the driver when a group needs it sooner.
    pub fn arm_journal_timer(&mut self, idle: Duration) -> Duration {
        let now = self.now_us();
        let at = self
            .core
            .journal
            .next_deadline_us()
            .unwrap_or(u64::MAX)
            .min(now.saturating_add(idle.as_micros() as u64));
        self.journal_timer_at_us = at;
        Duration::from_micros(at.saturating_sub(now))
    }

    /// What wakes the journal driver before its timer (`arm_journal_timer`).
    pub fn journal_timer(&self) -> Rc<tokio::sync::Notify> {
        self.journal_timer.clone()
    }

    /// An add's journal time split into its group's steps: waiting for the group's write, the
    /// write, the sync.
    pub(super) fn record_journal_steps(&mut self, appended_at: u64, lsn: journal::Lsn) {
        let Some(t) = self.core.journal.group_timing(lsn) else {
            return;
        };
        let m = &self.metrics.shards[self.id];
        let submitted = t.submitted_us.max(appended_at);
        m.stage_between(Stage::JournalGroupWait, appended_at, submitted);
        m.stage_between(Stage::JournalWrite, submitted, t.written_us);
        m.stage_between(Stage::JournalFsync, t.written_us, t.synced_us);
    }

    /// Each fdatasync the journal completed since the last call, one observation each
    /// (`bookie_journal_JOURNAL_SYNC`: a group commit's sync, submitted → completed).
    pub(super) fn record_journal_syncs(&mut self) {
        while let Some(t) = self.core.journal.take_sync_timing() {
            self.metrics.shards[self.id].journal_sync(t.submitted_us, t.completed_us, t.ok);
        }
    }

    /// Appends the records that waited for a journal buffer, in order, as far as buffers allow.
    pub(super) fn append_blocked(&mut self) {
        let (metrics, id) = (self.metrics.clone(), self.id);
        let (failures, unblocked) = self.core.append_blocked(now_us(), |at| {
            metrics.shards[id].stage(Stage::JournalBlocked, at);
        });
        if self.core.take_stopped() {
            self.set_failed("journal stopped");
        }
        for (to, reply) in failures {
            self.respond(to, reply);
        }
        if unblocked {
            self.unblocked.notify_waiters();
        }
    }

    /// Whether the shard should stop reading new requests: journal buffers all busy, or the
    /// write cache at its limit.
    pub fn is_blocked(&self) -> bool {
        !self.core.blocked.is_empty() || self.core.table.is_full()
    }

    /// Past three quarters of any shard's write cache, each connection pauses 1 ms before its
    /// next read: the intake slows while the flush (a thread at a lower priority, which a busy
    /// shard starves of CPU) catches up, instead of running into a full cache that stops every
    /// connection until a whole flush completes (0.1-1 s in a closed loop, `write_cache_full`).
    /// Any shard's: a connection's adds go to every shard's ledgers.
    pub fn admission_delay(&self) -> Option<Duration> {
        let fullest = self
            .peers
            .iter()
            .map(|p| p.cache_fill_permille.load(Ordering::Relaxed))
            .max()
            .unwrap_or(0);
        (fullest >= 750).then_some(Duration::from_millis(1))
    }

    /// Woken when [`Shard::is_blocked`] may have turned false.
    pub fn unblocked(&self) -> Rc<tokio::sync::Notify> {
        self.unblocked.clone()
    }

    /// Records each episode of a full write cache (`Stage::WriteCacheFull`): its adds wait
    /// in the sockets, before any per-add stage.
    pub(super) fn note_cache_full(&mut self) {
        // A read-only shard flushes nothing more: it must not pace anyone's reads.
        let permille = if self.read_only {
            0
        } else {
            (self.core.table.fill() * 1000.0).min(u32::MAX as f64) as u32
        };
        self.peers[self.id]
            .cache_fill_permille
            .store(permille, Ordering::Relaxed);
        match (self.core.table.is_full(), self.cache_full_since_us) {
            (true, 0) => self.cache_full_since_us = now_us().max(1),
            (false, since) if since != 0 => {
                self.m().stage(Stage::WriteCacheFull, since);
                self.cache_full_since_us = 0;
            }
            _ => {}
        }
    }
}
