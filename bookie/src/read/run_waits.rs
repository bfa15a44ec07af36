//! Reads that wait in the shard for a read-ahead run already on its way, instead of each
//! crossing to a reader thread.
//!
//! A catch-up client keeps a window of reads outstanding (a Pulsar broker: 100). When its
//! next batch arrives before the run that holds it has landed in the read-ahead cache, every
//! read of the batch used to go to the reader thread, which found most of them in the cache
//! the moment the run landed and sent each reply back: two thread hand-offs per entry, on a
//! core the shard and the reader share. Now the shard parks such a read here, keyed by the run
//! in flight that covers it (`ledger`, first entry, `span` entries), and when the reader says
//! the run landed (`mailbox::RunLanded`) the shard answers every parked read from the cache
//! itself: one hand-off each way per run, not per entry.
//!
//! A parked read never waits on nothing: the reader reports every run it was asked for, read
//! or not (0 entries: cached already, not in the store, or failed), and the shard sends what a
//! run with no entries leaves, and what waited longer than its deadline, to a reader as an
//! ordinary miss, which is not parked again. Nor is a read of an entry a landed run held that
//! still misses (a second read of an entry the first took): only a read past the run may wait
//! for the next one, so a client repeating its reads cannot keep the others waiting.

use std::collections::HashMap;

/// A run in flight and the reads waiting for it.
struct Waiting<T> {
    start: u64,
    /// Entries it may bring from `start`.
    span: u64,
    /// When the run was asked for (µs, the shard's clock).
    since_us: u64,
    reads: Vec<T>,
}

/// Per ledger, the runs in flight for its sequential reader and the reads parked on them.
pub struct RunWaits<T> {
    runs: HashMap<u64, Vec<Waiting<T>>>,
    /// Reads parked on one run at most; more go to a reader.
    max_reads: usize,
    parked: usize,
}

impl<T> RunWaits<T> {
    pub fn new(max_reads: usize) -> RunWaits<T> {
        RunWaits {
            runs: HashMap::new(),
            max_reads,
            parked: 0,
        }
    }

    /// Whether a run of `ledger` from `start` is in flight.
    pub fn in_flight(&self, ledger: u64, start: u64) -> bool {
        self.runs
            .get(&ledger)
            .is_some_and(|runs| runs.iter().any(|w| w.start == start))
    }

    /// Records a run of `ledger` from `start`, of up to `span` entries, asked of a reader (a
    /// reader will report it with [`landed`](Self::landed)).
    pub fn asked(&mut self, ledger: u64, start: u64, span: u64, now_us: u64) {
        if self.in_flight(ledger, start) {
            return;
        }
        self.runs.entry(ledger).or_default().push(Waiting {
            start,
            span: span.max(1),
            since_us: now_us,
            reads: Vec::new(),
        });
    }

    /// Parks `read` of `entry` on the run in flight that covers it; gives it back when none
    /// does or that run has its fill of reads.
    pub fn park(&mut self, ledger: u64, entry: u64, read: T) -> Result<(), T> {
        let Some(run) = self.runs.get_mut(&ledger).and_then(|runs| {
            runs.iter_mut()
                .find(|w| entry >= w.start && entry - w.start < w.span)
        }) else {
            return Err(read);
        };
        if run.reads.len() >= self.max_reads {
            return Err(read);
        }
        run.reads.push(read);
        self.parked += 1;
        Ok(())
    }

    /// The run of `ledger` from `start` landed (or will not): the reads parked on it, in the
    /// order they came.
    pub fn landed(&mut self, ledger: u64, start: u64) -> Vec<T> {
        let Some(runs) = self.runs.get_mut(&ledger) else {
            return Vec::new();
        };
        let Some(at) = runs.iter().position(|w| w.start == start) else {
            return Vec::new();
        };
        let run = runs.swap_remove(at);
        if runs.is_empty() {
            self.runs.remove(&ledger);
        }
        self.parked -= run.reads.len();
        run.reads
    }

    /// The reads of every run asked for before `deadline_us` (a run that never lands: its
    /// reads go to a reader instead). The runs are forgotten.
    pub fn expired(&mut self, deadline_us: u64) -> Vec<T> {
        let mut out = Vec::new();
        if self.runs.is_empty() {
            return out;
        }
        self.runs.retain(|_, runs| {
            runs.retain_mut(|w| {
                if w.since_us >= deadline_us {
                    return true;
                }
                out.append(&mut w.reads);
                false
            });
            !runs.is_empty()
        });
        self.parked -= out.len();
        out
    }

    /// Reads parked now.
    pub fn parked(&self) -> usize {
        self.parked
    }

    /// Whether no run is in flight.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_parks_on_the_run_that_covers_it_and_leaves_when_it_lands() {
        let mut w: RunWaits<u64> = RunWaits::new(1000);
        assert_eq!(w.park(7, 5, 5), Err(5), "no run in flight");
        w.asked(7, 100, 100, 0);
        assert!(w.in_flight(7, 100));
        assert_eq!(w.park(7, 99, 99), Err(99), "before the run");
        assert_eq!(w.park(7, 200, 200), Err(200), "past its span");
        assert_eq!(w.park(8, 150, 150), Err(150), "another ledger");
        for e in [100, 150, 199] {
            assert_eq!(w.park(7, e, e), Ok(()));
        }
        assert_eq!(w.parked(), 3);
        assert!(w.landed(7, 101).is_empty(), "not the run in flight");
        assert_eq!(w.landed(7, 100), vec![100, 150, 199], "in arrival order");
        assert_eq!(w.parked(), 0);
        assert!(w.is_empty());
        assert!(w.landed(7, 100).is_empty(), "a run lands once");
    }

    #[test]
    fn a_run_holds_at_most_its_fill_and_is_asked_once() {
        let mut w: RunWaits<u64> = RunWaits::new(2);
        w.asked(1, 0, 100, 0);
        w.asked(1, 0, 100, 5);
        assert_eq!(w.park(1, 0, 0), Ok(()));
        assert_eq!(w.park(1, 1, 1), Ok(()));
        assert_eq!(w.park(1, 2, 2), Err(2), "full");
        assert_eq!(w.landed(1, 0), vec![0, 1]);
        assert!(w.is_empty(), "asked twice, one run");
    }

    #[test]
    fn runs_that_never_land_give_their_reads_back_at_the_deadline() {
        let mut w: RunWaits<u64> = RunWaits::new(100);
        w.asked(1, 0, 10, 1_000);
        w.asked(1, 10, 10, 3_000);
        w.asked(2, 0, 10, 5_000);
        w.park(1, 3, 3).unwrap();
        w.park(1, 12, 12).unwrap();
        w.park(2, 4, 4).unwrap();
        let mut late = w.expired(4_000);
        late.sort();
        assert_eq!(late, vec![3, 12]);
        assert_eq!(w.parked(), 1);
        assert!(!w.in_flight(1, 0) && !w.in_flight(1, 10));
        assert!(w.in_flight(2, 0));
        assert!(w.expired(4_000).is_empty());
    }
}
