//! The journal-first share of the disk: how many cache-miss reads may be in flight on the
//! device the journals use, depending on whether a journal is waiting for it.
//!
//! Why: on one device queue a journal commit waits behind every read submitted before it
//! (docs/machine.md §1.8: random 4 KiB reads at depth 32 cut journal commits by 79 % and put the
//! fdatasync p99 at 1.1 ms; at depth 1 by 19 %), and kernel I/O priorities barely help because
//! the queueing happens below the guest's scheduler. So the bookie orders them itself:
//! - while any shard's journal holds records not yet durable (it will write and sync within a
//!   group wait), at most `beside_journal` reads are in flight across the bookie — by default
//!   one per shard, what a shard's single reader always had;
//! - when no journal waits, up to `depth` (every reader thread), so catch-up on a quiet bookie
//!   reads at the device's depth.
//!
//! A read never waits longer than `max_wait` for its turn: that is the readers' guaranteed
//! share, so a bookie under constant writes still serves catch-up reads (with read-ahead, one
//! read in flight moves a 256 KiB run). Readers take their turn in [`Shared`], a wrapper around
//! their storage port; shards report their journal in `drive`.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use storage::{AlignedBuf, Completion, IoError, Op, Storage, Wait};

use crate::admin::metrics::Metrics;
use crate::store::storage_wrap::forward_storage;

/// The bookie's share of one disk between journals and readers.
pub struct DiskShare {
    /// Bit `shard % 64`: that shard's journal holds records not yet durable.
    journals_waiting: AtomicU64,
    reads_in_flight: AtomicUsize,
    /// Reads allowed in flight when no journal waits, and when one does (0 = no limit).
    depth: usize,
    beside_journal: usize,
    max_wait: Duration,
    /// Counts reads that waited for their turn, and those that went ahead after `max_wait`.
    metrics: Arc<Metrics>,
}

impl DiskShare {
    pub fn new(
        depth: usize,
        beside_journal: usize,
        max_wait: Duration,
        metrics: Arc<Metrics>,
    ) -> Arc<DiskShare> {
        Arc::new(DiskShare {
            journals_waiting: AtomicU64::new(0),
            reads_in_flight: AtomicUsize::new(0),
            depth,
            beside_journal,
            max_wait,
            metrics,
        })
    }

    /// A shard says whether its journal has records waiting to be durable.
    pub fn journal_waiting(&self, shard: usize, waiting: bool) {
        let bit = 1u64 << (shard % 64);
        let now = self.journals_waiting.load(Ordering::Relaxed) & bit != 0;
        if now != waiting {
            if waiting {
                self.journals_waiting.fetch_or(bit, Ordering::Relaxed);
            } else {
                self.journals_waiting.fetch_and(!bit, Ordering::Relaxed);
            }
        }
    }

    /// Whether any shard's journal holds records not yet durable.
    pub fn journal_waits(&self) -> bool {
        self.journals_waiting.load(Ordering::Relaxed) != 0
    }

    fn limit(&self) -> usize {
        let l = if self.journal_waits() {
            self.beside_journal
        } else {
            self.depth
        };
        if l == 0 {
            usize::MAX
        } else {
            l
        }
    }

    /// Waits for a read's turn (at most `max_wait`) and counts it in flight.
    #[cfg(test)]
    pub fn begin_read(&self) {
        let mut turn = self.turn();
        while !turn.try_take(self) {
            // A journal commit takes ~0.1–0.3 ms here: look again well within one.
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    /// A read asking for its turn: [`Turn::try_take`] until it has it.
    pub fn turn(&self) -> Turn {
        Turn { started: None }
    }

    /// A read counted by [`begin_read`](Self::begin_read) completed.
    pub fn end_read(&self) {
        let _ = self
            .reads_in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    #[cfg(test)]
    pub fn reads_in_flight(&self) -> usize {
        self.reads_in_flight.load(Ordering::Relaxed)
    }
}

/// One read's wait for its turn in a [`DiskShare`].
pub struct Turn {
    started: Option<Instant>,
}

impl Turn {
    /// Takes the turn if the share has room, or if this read has waited `max_wait`; counts
    /// the read in flight then. False: look again a little later.
    pub fn try_take(&mut self, share: &DiskShare) -> bool {
        loop {
            let n = share.reads_in_flight.load(Ordering::Relaxed);
            if n >= share.limit() {
                break;
            }
            if share
                .reads_in_flight
                .compare_exchange_weak(n, n + 1, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                return true;
            }
        }
        let t0 = *self.started.get_or_insert_with(|| {
            share.metrics.reads_waited.fetch_add(1, Ordering::Relaxed);
            Instant::now()
        });
        if t0.elapsed() >= share.max_wait {
            share.metrics.reads_overdue.fetch_add(1, Ordering::Relaxed);
            share.reads_in_flight.fetch_add(1, Ordering::AcqRel);
            return true;
        }
        false
    }
}

/// A reader's storage port that takes its turn in the [`DiskShare`] for every read. A reader
/// with reads of its own in flight waits for its next turn by reaping them (kept for its next
/// `poll`), so one thread can keep many reads in flight within the share.
pub struct Shared<S> {
    inner: S,
    share: Arc<DiskShare>,
    /// Tokens of this port's reads in flight.
    reads: Vec<u64>,
    /// Completions reaped while waiting for a turn, not yet handed out by `poll`.
    reaped: Vec<Completion>,
}

impl<S: Storage> Shared<S> {
    /// Reaps completions into `reaped` (waiting at most `timeout_us`), ending their reads.
    fn reap(&mut self, wait: Wait) -> Result<(), IoError> {
        let before = self.reaped.len();
        let r = self.inner.poll(&mut self.reaped, wait);
        for c in &self.reaped[before..] {
            if let Some(i) = self.reads.iter().position(|t| *t == c.token) {
                self.reads.swap_remove(i);
                self.share.end_read();
            }
        }
        r
    }
}

impl<S: Storage> Shared<S> {
    /// The share this port takes its turns in.
    pub fn share(&self) -> &DiskShare {
        &self.share
    }

    pub fn new(inner: S, share: Arc<DiskShare>) -> Shared<S> {
        Shared {
            inner,
            share,
            reads: Vec::new(),
            reaped: Vec::new(),
        }
    }
}

impl<S> Drop for Shared<S> {
    fn drop(&mut self) {
        for _ in self.reads.drain(..) {
            self.share.end_read();
        }
    }
}

impl<S: Storage> Storage for Shared<S> {
    forward_storage!();
    fn submit(&mut self, token: u64, op: Op) -> Result<(), (IoError, Option<AlignedBuf>)> {
        if !matches!(op, Op::Read { .. }) {
            return self.inner.submit(token, op);
        }
        let mut turn = self.share.turn();
        while !turn.try_take(&self.share) {
            if self.reads.is_empty() {
                std::thread::sleep(Duration::from_micros(50));
            } else if let Err(e) = self.reap(Wait::AtLeastOne {
                timeout_us: Some(50),
            }) {
                return Err((e, None));
            }
        }
        match self.inner.submit(token, op) {
            Ok(()) => {
                self.reads.push(token);
                Ok(())
            }
            Err(e) => {
                self.share.end_read();
                Err(e)
            }
        }
    }
    fn poll(&mut self, out: &mut Vec<Completion>, wait: Wait) -> Result<(), IoError> {
        // What was reaped while waiting for a turn satisfies any wait.
        let wait = if self.reaped.is_empty() {
            wait
        } else {
            Wait::No
        };
        let r = self.reap(wait);
        out.append(&mut self.reaped);
        r
    }
    fn in_flight(&self) -> usize {
        // Reaped but not yet handed out counts as in flight for the caller.
        self.inner.in_flight() + self.reaped.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_follows_the_journal_and_a_read_never_waits_past_max_wait() {
        let share = DiskShare::new(4, 1, Duration::from_millis(5), Arc::new(Metrics::new(1)));
        for _ in 0..4 {
            share.begin_read();
        }
        assert_eq!(
            share.reads_in_flight(),
            4,
            "full depth while no journal waits"
        );
        assert_eq!(share.metrics.reads_waited.load(Ordering::Relaxed), 0);
        share.journal_waiting(3, true);
        let t = Instant::now();
        share.begin_read();
        assert!(
            t.elapsed() >= Duration::from_millis(5),
            "waited for its turn"
        );
        assert_eq!(
            share.metrics.reads_overdue.load(Ordering::Relaxed),
            1,
            "then went ahead anyway"
        );
        for _ in 0..5 {
            share.end_read();
        }
        share.begin_read();
        assert_eq!(
            share.metrics.reads_overdue.load(Ordering::Relaxed),
            1,
            "one beside the journal"
        );
        share.journal_waiting(3, false);
        share.begin_read();
        share.begin_read();
        assert_eq!(share.reads_in_flight(), 3);
        assert_eq!(share.metrics.reads_overdue.load(Ordering::Relaxed), 1);
        for _ in 0..10 {
            share.end_read();
        }
        assert_eq!(share.reads_in_flight(), 0, "never below zero");
    }

    #[test]
    fn zero_means_no_limit() {
        let share = DiskShare::new(0, 0, Duration::from_millis(1), Arc::new(Metrics::new(1)));
        share.journal_waiting(0, true);
        for _ in 0..100 {
            share.begin_read();
        }
        assert_eq!(share.metrics.reads_waited.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_reader_with_reads_in_flight_waits_for_its_turn_by_reaping_them() {
        use storage::sim::{SimConfig, SimDisk};
        let disk = SimDisk::new(SimConfig::new(3).with_latency_us(100, 300));
        let share = DiskShare::new(2, 1, Duration::from_secs(5), Arc::new(Metrics::new(1)));
        let mut port = Shared::new(disk.storage("d"), share.clone());
        let file = port.open("f", true).unwrap();
        for token in 0..8u64 {
            let op = Op::Read {
                file,
                offset: token * 4096,
                buf: AlignedBuf::zeroed(4096),
            };
            port.submit(token, op).unwrap();
            assert!(share.reads_in_flight() <= 2, "within the share's depth");
        }
        let mut out = Vec::new();
        while out.len() < 8 {
            port.poll(&mut out, Wait::AtLeastOne { timeout_us: None })
                .unwrap();
        }
        let mut tokens: Vec<u64> = out.iter().map(|c| c.token).collect();
        tokens.sort_unstable();
        assert_eq!(
            tokens,
            (0..8).collect::<Vec<_>>(),
            "every completion handed out once"
        );
        assert_eq!(share.reads_in_flight(), 0);
        assert_eq!(port.in_flight(), 0);
        assert_eq!(
            share.metrics.reads_overdue.load(Ordering::Relaxed),
            0,
            "no read waited out max_wait: it reaped its own"
        );
        assert!(share.metrics.reads_waited.load(Ordering::Relaxed) >= 6);
    }
}
