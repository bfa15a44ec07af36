//! The shard's read-ahead policy, and the one owner of its state: the read-ahead cache, the
//! runs in flight and the reads parked on them, and which reads are sequential.
//!
//! A catch-up reader asks for a ledger's entries in order, and a flush stores them
//! contiguously, so one device read at a miss brings the next entries too. The policy, all of
//! it here:
//! - **A hit** is taken out of the cache (`cache`) and answered by the shard itself, with no
//!   hop to a reader thread. When it is its ledger's *trigger* (the first entry of the last
//!   run read for the sequential reader), the run after the last one is asked for: the reader
//!   is kept a run ahead.
//! - **A miss a run in flight will bring** parks on that run (`run_waits`); so does a miss
//!   right after the last run, once the run from there is asked for.
//! - **A sequential miss** (right after the previous miss of its ledger, or a few entries on:
//!   a client reading across an ensemble asks each bookie for every E-th entry) goes to a
//!   reader as a *run read*: the reader answers the entry and reports the entries after it,
//!   which the reads behind it park on meanwhile.
//! - **Anything else** is a single read.
//!
//! Reader threads own no read-ahead state: they read what they are told (`Step::Read` with a
//! run length, `DiskRead::Prefetch`) and send every run they read back to this shard
//! (`mailbox::RunLanded`, with its bodies), which puts it in the cache and answers what
//! parked on it ([`ReadAhead::landed`]). One thread owns the cache: no lock, and no race
//! between a reader filling it and the shard reading it.
//!
//! Generic over the parked read `T`, so that the policy is tested without a shard.

use std::collections::HashMap;

use bytes::Bytes;

use super::cache::{ReadCache, MAX_STRIDE};
use super::run_waits::RunWaits;
use crate::shard::mailbox::RunLanded;

/// Ledgers whose last missed entry the shard remembers, to tell sequential reads.
const SEQUENTIAL_LEDGERS: usize = 4096;

/// Runs read for one run the shard asks for (`DiskRead::Prefetch`) while no journal waits:
/// the asked run and the one after it, their device reads in flight together. The trigger is
/// the first run's first entry, set once both landed, so the shard asks for the next pair as
/// soon as its client takes more: a catch-up reader finds one to two runs ready. Measured on
/// one core, interleaved: 325k/s median against 255k/s with one run per ask.
pub const RUNS_PER_ASK: usize = 2;

/// How a missed read reaches [`ReadAhead::miss`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// From a request.
    Request,
    /// Parked on a run that landed, which ended before `end` (`None`: it brought nothing). A
    /// read of an entry the run held that still misses (a second read of an entry taken by
    /// the first, or one evicted since) goes to a reader: parking it again on a new run of the
    /// same entries would let a client that repeats its reads starve the others. Only a read
    /// past the run may wait for the next one.
    Run { end: Option<u64> },
    /// Parked on a run that did not land in time.
    Late,
}

/// What the shard does with a read that missed the write cache.
#[derive(Debug)]
pub enum Step<T> {
    /// Answer it with `body`, from the read-ahead cache.
    Hit { read: T, body: Bytes },
    /// It waits for a run in flight; [`ReadAhead::landed`] gives it back.
    Parked,
    /// Send it to a reader, which reads `run` entries from it in one device read (1: the
    /// entry alone). With `run > 1` the reader reports the entries after it as a run landed
    /// from the next entry, which the reads behind it park on.
    Read { read: T, run: usize },
}

/// One shard's read-ahead: its cache, its runs in flight, its sequential readers.
pub struct ReadAhead<T> {
    cache: ReadCache,
    waits: RunWaits<T>,
    /// The last missed entry of each recently read ledger.
    last_missed: HashMap<u64, u64>,
    /// Entries per run (`dbStorage_readAheadCacheBatchSize`); 1: read-ahead off.
    run_entries: usize,
}

impl<T> ReadAhead<T> {
    /// A read-ahead of runs of up to `run_entries` entries into a cache of `cache_bytes`
    /// (`run_entries <= 1` or no cache: off, every miss a single read).
    pub fn new(cache_bytes: usize, run_entries: usize) -> ReadAhead<T> {
        let run_entries = if cache_bytes == 0 {
            1
        } else {
            run_entries.max(1)
        };
        ReadAhead {
            cache: ReadCache::new(cache_bytes),
            waits: RunWaits::new(2 * RUNS_PER_ASK * run_entries),
            last_missed: HashMap::new(),
            run_entries,
        }
    }

    /// Whether a run ever brings more than the asked entry.
    pub fn is_on(&self) -> bool {
        self.run_entries > 1
    }

    /// A read of `entry` (`None`: not one entry, e.g. the last entry of a ledger, a batch
    /// read, a LAC read) that missed the write cache, come `via` a request or a run. `ask`
    /// sends a reader the ask for a run (ledger, first entry) and says whether it was queued.
    pub fn miss(
        &mut self,
        ledger: u64,
        entry: Option<u64>,
        read: T,
        via: Via,
        now_us: u64,
        ask: &mut impl FnMut(u64, u64) -> bool,
    ) -> Step<T> {
        let Some(entry) = entry.filter(|_| self.is_on()) else {
            return Step::Read { read, run: 1 };
        };
        let (hit, next) = self.cache.take_and_trigger(ledger, entry);
        if let Some(body) = hit {
            if let Some(next) = next {
                self.ask_run(ledger, next, now_us, ask);
            }
            return Step::Hit { read, body };
        }
        let follows = self.cache.follows_run(ledger, entry);
        let may_park = match via {
            Via::Request => true,
            Via::Run { end } => end.is_some_and(|end| entry >= end),
            Via::Late => false,
        };
        let read = if may_park {
            match self.waits.park(ledger, entry, read) {
                Ok(()) => return Step::Parked,
                Err(back) if follows && self.ask_run(ledger, entry, now_us, ask) => {
                    match self.waits.park(ledger, entry, back) {
                        Ok(()) => return Step::Parked,
                        Err(back) => back,
                    }
                }
                Err(back) => back,
            }
        } else {
            read
        };
        let sequential = self.note_missed(ledger, entry) || follows;
        let next = entry + 1;
        if sequential && via == Via::Request && !self.waits.in_flight(ledger, next) {
            let span = self.run_entries as u64 - 1;
            self.waits.asked(ledger, next, span, now_us);
            return Step::Read {
                read,
                run: self.run_entries,
            };
        }
        Step::Read { read, run: 1 }
    }

    /// Asks a reader for the run of `ledger` from `start`, unless it is in flight already
    /// (true) or was read already (a run holding `start` landed; its entries may be taken
    /// since: false, as when the ask cannot be queued).
    fn ask_run(
        &mut self,
        ledger: u64,
        start: u64,
        now_us: u64,
        ask: &mut impl FnMut(u64, u64) -> bool,
    ) -> bool {
        if self.waits.in_flight(ledger, start) {
            return true;
        }
        if self.cache.contains(ledger, start)
            || self.cache.read_past(ledger, start, self.run_entries as u64)
        {
            return false;
        }
        if !ask(ledger, start) {
            return false;
        }
        // The reads of the whole ask wait for it: a reader reads up to RUNS_PER_ASK runs.
        let span = (RUNS_PER_ASK * self.run_entries) as u64;
        self.waits.asked(ledger, start, span, now_us);
        true
    }

    /// Records that `entry` of `ledger` missed; true if it follows the previous miss (right
    /// after it, or up to `MAX_STRIDE` further: a reader across an ensemble).
    fn note_missed(&mut self, ledger: u64, entry: u64) -> bool {
        if self.last_missed.len() >= SEQUENTIAL_LEDGERS && !self.last_missed.contains_key(&ledger) {
            self.last_missed.clear();
        }
        let before = self.last_missed.insert(ledger, entry);
        before.is_some_and(|b| entry > b && entry - b <= MAX_STRIDE)
    }

    /// A run a reader read (or found nothing for): into the cache, and the reads parked on it
    /// back, with how they come now ([`Via::Run`]). When another run of the same ask follows,
    /// it is in flight from where this one ended: the reads past this one park on it again.
    pub fn landed(&mut self, run: RunLanded, now_us: u64) -> (Vec<T>, Via) {
        let n = run.bodies.len() as u64;
        for (i, body) in run.bodies.into_iter().enumerate() {
            self.cache.insert(run.ledger, run.start + i as u64, body);
        }
        if n > 0 {
            // With runs of the ask still in flight, the ask's end: a take of the trigger asks
            // for what comes after them, so a sequential reader has the next ask on its way
            // while it reads this one.
            let end = run.more.map_or(run.start + n, |(_, end)| end);
            self.cache.note_run_end(run.ledger, end);
            if let Some(trigger) = run.trigger {
                self.cache.set_trigger(run.ledger, trigger);
            }
        }
        let reads = self.waits.landed(run.ledger, run.start);
        if let Some((next, _)) = run.more.filter(|_| n > 0) {
            let span = self.run_entries as u64;
            self.waits.asked(run.ledger, next, span, now_us);
        }
        (
            reads,
            Via::Run {
                end: (n > 0).then_some(run.start + n),
            },
        )
    }

    /// The reads parked on runs asked for before `deadline_us` that never landed.
    pub fn expired(&mut self, deadline_us: u64) -> Vec<T> {
        if self.waits.is_empty() {
            return Vec::new();
        }
        self.waits.expired(deadline_us)
    }

    /// Reads parked now.
    pub fn parked(&self) -> usize {
        self.waits.parked()
    }

    /// The cache's bytes, entries, and hits so far.
    pub fn cache_stats(&self) -> (usize, usize, u64) {
        (self.cache.bytes(), self.cache.entries(), self.cache.hits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    fn body(ledger: u64, entry: u64) -> Bytes {
        Bytes::from(format!("{ledger}:{entry}"))
    }

    /// A shard and one reader thread over a ledger of `len` entries, run by hand: reads go in,
    /// the policy decides, the reader does what it is told (runs of `run_entries`, prefetch
    /// groups of two runs), and what it reads comes back as runs landed.
    struct Bench {
        ahead: ReadAhead<u64>,
        len: u64,
        /// Reads the reader has to do: (entry, run) — answered with the entry.
        to_read: VecDeque<(u64, usize)>,
        /// Runs asked for, by first entry.
        asks: Vec<u64>,
        answered: Vec<(u64, Bytes)>,
        device_reads: u64,
        now: u64,
    }

    impl Bench {
        fn new(len: u64, run_entries: usize) -> Bench {
            Bench {
                ahead: ReadAhead::new(1 << 20, run_entries),
                len,
                to_read: VecDeque::new(),
                asks: Vec::new(),
                answered: Vec::new(),
                device_reads: 0,
                now: 0,
            }
        }

        fn request(&mut self, entry: u64) {
            self.dispatch(entry, Via::Request);
        }

        fn dispatch(&mut self, entry: u64, via: Via) {
            let asks = &mut self.asks;
            let mut ask = |_l: u64, s: u64| {
                asks.push(s);
                true
            };
            match self
                .ahead
                .miss(7, Some(entry), entry, via, self.now, &mut ask)
            {
                Step::Hit { read, body } => self.answered.push((read, body)),
                Step::Parked => {}
                Step::Read { read, run } => self.to_read.push_back((read, run)),
            }
        }

        fn run_of(&self, start: u64, n: usize) -> Vec<Bytes> {
            (start..(start + n as u64).min(self.len))
                .map(|e| body(7, e))
                .collect()
        }

        /// The reader thread: its queued reads, then the runs asked for (two per ask, the
        /// trigger on the last); every landed run goes back through the policy.
        fn reader(&mut self) {
            while let Some((entry, run)) = self.to_read.pop_front() {
                self.device_reads += 1;
                let bodies = self.run_of(entry, run);
                if let Some(first) = bodies.first() {
                    self.answered.push((entry, first.clone()));
                }
                if run > 1 {
                    // Always reported, even empty: reads may be parked on it.
                    let rest = bodies.get(1..).unwrap_or_default().to_vec();
                    self.land(entry + 1, rest, Some(entry + 1), None);
                }
            }
            for start in std::mem::take(&mut self.asks) {
                let n = self.ahead.run_entries;
                let first = self.run_of(start, n);
                let second_start = start + first.len() as u64;
                let second = self.run_of(second_start, n);
                self.device_reads += 2;
                let has_second = !second.is_empty();
                let end = second_start + second.len() as u64;
                let more = has_second.then_some((second_start, end));
                self.land(start, first, Some(start), more);
                if has_second {
                    self.land(second_start, second, None, None);
                }
            }
        }

        fn land(
            &mut self,
            start: u64,
            bodies: Vec<Bytes>,
            trigger: Option<u64>,
            more: Option<(u64, u64)>,
        ) {
            let (reads, via) = self.ahead.landed(
                RunLanded {
                    ledger: 7,
                    start,
                    bodies,
                    trigger,
                    more,
                },
                self.now,
            );
            for e in reads {
                self.dispatch(e, via);
            }
        }
    }

    /// A broker-like catch-up reader (windows of 100 in order) is kept a run ahead: after the
    /// first window almost no read waits on a device read of its own, every entry is answered
    /// once with its own bytes, and the chain stops at the ledger's end.
    #[test]
    fn a_sequential_reader_is_kept_a_run_ahead() {
        let mut b = Bench::new(1000, 100);
        for window in 0..10u64 {
            for e in window * 100..(window + 1) * 100 {
                b.request(e);
            }
            b.reader();
            b.reader();
        }
        let mut got: Vec<u64> = b.answered.iter().map(|(e, _)| *e).collect();
        got.sort_unstable();
        assert_eq!(
            got,
            (0..1000).collect::<Vec<_>>(),
            "each entry answered once"
        );
        for (e, body_) in &b.answered {
            assert_eq!(body_, &body(7, *e));
        }
        // 10 windows of 100 in runs of 100: about one device read per run, not per entry.
        assert!(
            b.device_reads <= 16,
            "device reads for 1,000 entries: {}",
            b.device_reads
        );
        assert_eq!(b.ahead.parked(), 0);
        let (_, cached, _) = b.ahead.cache_stats();
        assert!(cached <= 200, "at most a group left unread: {cached}");
    }

    /// A reader across an ensemble (every third entry) still reads ahead: runs bring the
    /// entries it asks for, and most of its reads are cache hits.
    #[test]
    fn strided_reads_read_ahead() {
        let mut b = Bench::new(300, 50);
        for e in (1..300).step_by(3) {
            b.request(e);
            b.reader();
        }
        let mut got: Vec<u64> = b.answered.iter().map(|(e, _)| *e).collect();
        got.sort_unstable();
        assert_eq!(got, (1..300).step_by(3).collect::<Vec<_>>());
        assert!(b.device_reads <= 14, "device reads: {}", b.device_reads);
        let (_, _, hits) = b.ahead.cache_stats();
        assert!(hits >= 80, "hits of 100 reads: {hits}");
    }

    /// Random reads are single reads; nothing is cached; read-ahead off makes every miss a
    /// single read.
    #[test]
    fn random_reads_and_read_ahead_off_read_one_entry() {
        let mut b = Bench::new(1000, 50);
        for e in [500u64, 7, 250, 40, 900, 12] {
            b.request(e);
        }
        assert!(b.to_read.iter().all(|&(_, run)| run == 1));
        let mut off = ReadAhead::<u64>::new(0, 50);
        assert!(!off.is_on());
        for e in 0..10 {
            let step = off.miss(1, Some(e), e, Via::Request, 0, &mut |_, _| true);
            assert!(matches!(step, Step::Read { run: 1, .. }));
        }
    }

    /// Reads behind a run read park on it and are answered when it lands; a run that never
    /// lands gives its reads back at the deadline; a run that brought nothing sends them to a
    /// reader, never to wait again.
    #[test]
    fn reads_park_on_a_run_in_flight() {
        let mut a = ReadAhead::<u64>::new(1 << 20, 10);
        let mut no_ask = |_: u64, _: u64| false;
        assert!(matches!(
            a.miss(3, Some(0), 0, Via::Request, 0, &mut no_ask),
            Step::Read { run: 1, .. }
        ));
        assert!(matches!(
            a.miss(3, Some(1), 1, Via::Request, 0, &mut no_ask),
            Step::Read { run: 10, .. }
        ));
        for e in 2..6 {
            assert!(matches!(
                a.miss(3, Some(e), e, Via::Request, 0, &mut no_ask),
                Step::Parked
            ));
        }
        assert_eq!(a.parked(), 4);
        // Nothing came of the run: its reads go to a reader as single reads.
        let (reads, via) = a.landed(
            RunLanded {
                ledger: 3,
                start: 2,
                bodies: Vec::new(),
                trigger: Some(2),
                more: None,
            },
            1,
        );
        assert_eq!(reads, vec![2, 3, 4, 5]);
        assert_eq!(via, Via::Run { end: None });
        for e in reads {
            assert!(matches!(
                a.miss(3, Some(e), e, via, 1, &mut no_ask),
                Step::Read { run: 1, .. }
            ));
        }
        // A run that never lands: its reads come back at the deadline.
        let mut b = ReadAhead::<u64>::new(1 << 20, 10);
        b.miss(4, Some(0), 0, Via::Request, 0, &mut no_ask);
        b.miss(4, Some(1), 1, Via::Request, 0, &mut no_ask);
        assert!(matches!(
            b.miss(4, Some(2), 2, Via::Request, 10, &mut no_ask),
            Step::Parked
        ));
        assert_eq!(b.expired(5), vec![2], "asked at 0, before the deadline 5");
        assert_eq!(b.parked(), 0);
    }
}
