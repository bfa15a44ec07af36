//! Load models and the pieces of a BookKeeper client's write path that shape the load, kept
//! free of I/O so they can be tested exactly:
//! - [`Schedule`]: the open-loop arrival schedule (uniform or Poisson). Every operation gets
//!   an *intended* send time fixed in advance, independent of how the bookie responds, so a
//!   stall cannot slow the arrivals down (no coordinated omission);
//! - [`Latency`]: the corrected (from the intended time) and uncorrected (from the actual send)
//!   latencies of one operation, and the `saturated` rule of docs/interop.md §5.1;
//! - [`write_set`] / [`AckSet`]: the Java client's round-robin placement
//!   (`RoundRobinDistributionSchedule`): entry e goes to ensemble members (e + i) mod E for
//!   i < W, and completes at the A-th distinct acknowledgement, or fails once more than W − A
//!   members failed;
//! - [`SizeDist`]: the entry-size distribution (`1024`, `100-4096`, `1024:9,65536:1`);
//! - [`Rng`]: a small seeded generator (SplitMix64), so a seed reproduces a run's choices.

/// SplitMix64: tiny, fast, statistically fine for load shaping.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, n); 0 when n is 0.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in (0, 1].
    pub fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }
}

/// Arrival process of the open loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Arrival {
    /// Exactly 1/rate apart.
    Uniform,
    /// Exponential gaps with mean 1/rate (a Poisson process).
    Poisson,
}

/// Intended send times of an open loop, in nanoseconds from the start of the run.
#[derive(Clone, Debug)]
pub struct Schedule {
    interval_ns: f64,
    arrival: Arrival,
    rng: Rng,
    /// Operations handed out so far.
    issued: u64,
    next_ns: f64,
}

impl Schedule {
    /// `rate` operations per second (> 0), first one at time 0.
    pub fn new(rate: f64, arrival: Arrival, seed: u64) -> Schedule {
        let interval_ns = 1e9 / rate;
        let mut s = Schedule {
            interval_ns,
            arrival,
            rng: Rng::new(seed),
            issued: 0,
            next_ns: 0.0,
        };
        if arrival == Arrival::Poisson {
            s.next_ns = s.gap();
        }
        s
    }

    fn gap(&mut self) -> f64 {
        match self.arrival {
            Arrival::Uniform => self.interval_ns,
            Arrival::Poisson => -self.rng.unit().ln() * self.interval_ns,
        }
    }

    /// The intended time of the next operation.
    pub fn peek_ns(&self) -> u64 {
        self.next_ns as u64
    }

    /// Takes the next operation's intended time and advances. Uniform times are computed as
    /// `k × interval` (no accumulated rounding drift).
    pub fn take(&mut self) -> u64 {
        let t = self.peek_ns();
        self.issued += 1;
        self.next_ns = match self.arrival {
            Arrival::Uniform => self.issued as f64 * self.interval_ns,
            Arrival::Poisson => self.next_ns + self.gap(),
        };
        t
    }

    #[cfg(test)]
    pub fn issued(&self) -> u64 {
        self.issued
    }
}

/// The two latencies of one operation, in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Latency {
    /// Completion − intended start (open loop) or − send (closed loop).
    pub corrected_ns: u64,
    /// Completion − actual send.
    pub uncorrected_ns: u64,
}

impl Latency {
    /// `intended ≤ sent ≤ done` in any clock; out-of-order values saturate to 0.
    pub fn of(intended_ns: u64, sent_ns: u64, done_ns: u64) -> Latency {
        Latency {
            corrected_ns: done_ns.saturating_sub(intended_ns.min(sent_ns)),
            uncorrected_ns: done_ns.saturating_sub(sent_ns),
        }
    }
}

/// docs/interop.md §5.1: an open-loop run is saturated when it achieved < 99 % of its target rate
/// or its corrected p99 is more than 10× the uncorrected p99.
pub fn is_saturated(
    target_rate: f64,
    achieved_rate: f64,
    corrected_p99: u64,
    uncorrected_p99: u64,
) -> bool {
    achieved_rate < 0.99 * target_rate || corrected_p99 > 10 * uncorrected_p99.max(1)
}

/// The ensemble positions entry `entry_id` is written to: `(entry_id + i) mod E`, i < W
/// (Java's `RoundRobinDistributionSchedule.getWriteSet`).
pub fn write_set(
    entry_id: i64,
    ensemble: usize,
    write_quorum: usize,
) -> impl Iterator<Item = usize> {
    let e = ensemble.max(1) as i64;
    (0..write_quorum as i64).map(move |i| (entry_id + i).rem_euclid(e) as usize)
}

/// Acknowledgement bookkeeping of one add (Java's `AckSetImpl`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AckSet {
    acked: u64,
    failed: u64,
}

/// What one reply did to an add.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckOutcome {
    /// Not decided yet.
    Pending,
    /// The A-th distinct acknowledgement: the add completed now.
    Completed,
    /// More than W − A members failed: the add failed now.
    Failed,
}

impl AckSet {
    /// Records a reply from ensemble position `member` (< 64).
    pub fn reply(
        &mut self,
        member: usize,
        ok: bool,
        write_quorum: usize,
        ack_quorum: usize,
    ) -> AckOutcome {
        let bit = 1u64 << (member & 63);
        let before = self.state(write_quorum, ack_quorum);
        if ok {
            self.acked |= bit;
            self.failed &= !bit;
        } else {
            self.acked &= !bit;
            self.failed |= bit;
        }
        match (before, self.state(write_quorum, ack_quorum)) {
            (AckOutcome::Pending, now) => now,
            _ => AckOutcome::Pending, // already decided: later replies change nothing
        }
    }

    fn state(&self, write_quorum: usize, ack_quorum: usize) -> AckOutcome {
        if self.acked.count_ones() as usize >= ack_quorum {
            AckOutcome::Completed
        } else if self.failed.count_ones() as usize > write_quorum.saturating_sub(ack_quorum) {
            AckOutcome::Failed
        } else {
            AckOutcome::Pending
        }
    }
}

/// Entry payload sizes.
#[derive(Clone, Debug, PartialEq)]
pub enum SizeDist {
    Fixed(usize),
    /// Uniform in [lo, hi].
    Uniform(usize, usize),
    /// (size, weight) pairs.
    Weighted(Vec<(usize, u64)>),
}

impl SizeDist {
    /// `1024`, `1k`, `100-4096`, `1024:9,65536:1` (sizes accept k/m suffixes = KiB/MiB).
    pub fn parse(text: &str) -> Result<SizeDist, String> {
        let size = |s: &str| -> Result<usize, String> {
            let s = s.trim();
            let (num, scale) = match s.chars().last() {
                Some('k' | 'K') => (&s[..s.len() - 1], 1024),
                Some('m' | 'M') => (&s[..s.len() - 1], 1024 * 1024),
                _ => (s, 1),
            };
            num.parse::<usize>()
                .map(|n| n * scale)
                .map_err(|_| format!("bad size {s:?} in {text:?}"))
        };
        let dist = if text.contains(':') {
            let mut pairs = Vec::new();
            for part in text.split(',') {
                let (s, w) = part
                    .split_once(':')
                    .ok_or_else(|| format!("bad weighted size {part:?}: use SIZE:WEIGHT"))?;
                let w: u64 = w
                    .trim()
                    .parse()
                    .map_err(|_| format!("bad weight {w:?} in {text:?}"))?;
                pairs.push((size(s)?, w));
            }
            if pairs.iter().map(|p| p.1).sum::<u64>() == 0 {
                return Err(format!("weights in {text:?} sum to zero"));
            }
            SizeDist::Weighted(pairs)
        } else if let Some((lo, hi)) = text.split_once('-') {
            let (lo, hi) = (size(lo)?, size(hi)?);
            if lo > hi {
                return Err(format!("empty size range {text:?}"));
            }
            SizeDist::Uniform(lo, hi)
        } else {
            SizeDist::Fixed(size(text)?)
        };
        if dist.max() > 64 << 20 {
            return Err(format!("entry size {text:?} is over 64 MiB"));
        }
        Ok(dist)
    }

    pub fn max(&self) -> usize {
        match self {
            SizeDist::Fixed(n) => *n,
            SizeDist::Uniform(_, hi) => *hi,
            SizeDist::Weighted(p) => p.iter().map(|x| x.0).max().unwrap_or(0),
        }
    }

    pub fn mean(&self) -> f64 {
        match self {
            SizeDist::Fixed(n) => *n as f64,
            SizeDist::Uniform(lo, hi) => (*lo + *hi) as f64 / 2.0,
            SizeDist::Weighted(p) => {
                let total: u64 = p.iter().map(|x| x.1).sum();
                p.iter().map(|x| x.0 as f64 * x.1 as f64).sum::<f64>() / total.max(1) as f64
            }
        }
    }

    pub fn sample(&self, rng: &mut Rng) -> usize {
        match self {
            SizeDist::Fixed(n) => *n,
            SizeDist::Uniform(lo, hi) => lo + rng.below((hi - lo + 1) as u64) as usize,
            SizeDist::Weighted(p) => {
                let total: u64 = p.iter().map(|x| x.1).sum();
                let mut pick = rng.below(total);
                for &(s, w) in p {
                    if pick < w {
                        return s;
                    }
                    pick -= w;
                }
                p.last().map(|x| x.0).unwrap_or(0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_schedule_is_exact_and_independent_of_completions() {
        let mut s = Schedule::new(1000.0, Arrival::Uniform, 1);
        let times: Vec<u64> = (0..5).map(|_| s.take()).collect();
        assert_eq!(times, vec![0, 1_000_000, 2_000_000, 3_000_000, 4_000_000]);
        // 3 per second: no drift after a million operations.
        let mut s = Schedule::new(3.0, Arrival::Uniform, 1);
        for _ in 0..1_000_000 {
            s.take();
        }
        assert_eq!(s.peek_ns(), 333_333_333_333_333);
        assert_eq!(s.issued(), 1_000_000);
    }

    #[test]
    fn poisson_schedule_has_the_right_mean_rate() {
        let mut s = Schedule::new(10_000.0, Arrival::Poisson, 42);
        let n = 200_000;
        let mut last = 0;
        for _ in 0..n {
            let t = s.take();
            assert!(t >= last, "times never go back");
            last = t;
        }
        let rate = n as f64 / (last as f64 / 1e9);
        assert!((rate - 10_000.0).abs() < 100.0, "rate {rate}");
        // Seeded: the same seed gives the same times.
        let a: Vec<u64> = {
            let mut s = Schedule::new(100.0, Arrival::Poisson, 7);
            (0..10).map(|_| s.take()).collect()
        };
        let b: Vec<u64> = {
            let mut s = Schedule::new(100.0, Arrival::Poisson, 7);
            (0..10).map(|_| s.take()).collect()
        };
        assert_eq!(a, b);
    }

    /// A 1 s stall: with 1000 ops/s scheduled, the op intended at t=0 but sent at 1 s and done
    /// at 1.001 s has a corrected latency of 1.001 s and an uncorrected one of 1 ms.
    #[test]
    fn corrected_latency_counts_the_wait_for_the_send() {
        let l = Latency::of(0, 1_000_000_000, 1_001_000_000);
        assert_eq!(l.corrected_ns, 1_001_000_000);
        assert_eq!(l.uncorrected_ns, 1_000_000);
        // Closed loop: intended == sent.
        assert_eq!(
            Latency::of(5, 5, 10),
            Latency {
                corrected_ns: 5,
                uncorrected_ns: 5
            }
        );
        // Never negative.
        assert_eq!(Latency::of(10, 20, 15).uncorrected_ns, 0);
    }

    #[test]
    fn saturation_rule() {
        assert!(!is_saturated(1000.0, 995.0, 900, 800));
        assert!(
            is_saturated(1000.0, 980.0, 900, 800),
            "under 99 % of target"
        );
        assert!(
            is_saturated(1000.0, 1000.0, 8001, 800),
            "corrected p99 > 10x"
        );
        assert!(!is_saturated(1000.0, 1000.0, 8000, 800));
    }

    /// Java's RoundRobinDistributionSchedule: E=3, W=2: entry 0 → {0,1}, 1 → {1,2}, 2 → {2,0}.
    #[test]
    fn write_sets_match_the_java_client() {
        let sets: Vec<Vec<usize>> = (0..4).map(|e| write_set(e, 3, 2).collect()).collect();
        assert_eq!(sets, vec![vec![0, 1], vec![1, 2], vec![2, 0], vec![0, 1]]);
        let sets: Vec<Vec<usize>> = (0..5).map(|e| write_set(e, 5, 3).collect()).collect();
        assert_eq!(sets[3], vec![3, 4, 0]);
        assert_eq!(sets[4], vec![4, 0, 1]);
        assert_eq!(write_set(7, 1, 1).collect::<Vec<_>>(), vec![0]);
        // Striping: with E=4, W=2 every member gets half of the entries.
        let mut per = [0; 4];
        for e in 0..1000 {
            for m in write_set(e, 4, 2) {
                per[m] += 1;
            }
        }
        assert_eq!(per, [500; 4]);
    }

    #[test]
    fn ack_quorum_completes_at_the_a_th_distinct_ack() {
        // E3 W3 A2
        let mut a = AckSet::default();
        assert_eq!(a.reply(0, true, 3, 2), AckOutcome::Pending);
        assert_eq!(a.reply(0, true, 3, 2), AckOutcome::Pending, "duplicate ack");
        assert_eq!(a.reply(2, true, 3, 2), AckOutcome::Completed);
        assert_eq!(a.reply(1, true, 3, 2), AckOutcome::Pending, "decided once");
        // One failure is tolerated with W − A = 1; two fail the add.
        let mut a = AckSet::default();
        assert_eq!(a.reply(1, false, 3, 2), AckOutcome::Pending);
        assert_eq!(a.reply(0, true, 3, 2), AckOutcome::Pending);
        assert_eq!(a.reply(2, true, 3, 2), AckOutcome::Completed);
        let mut a = AckSet::default();
        assert_eq!(a.reply(1, false, 3, 2), AckOutcome::Pending);
        assert_eq!(a.reply(2, false, 3, 2), AckOutcome::Failed);
        // E1 W1 A1
        let mut a = AckSet::default();
        assert_eq!(a.reply(0, false, 1, 1), AckOutcome::Failed);
    }

    #[test]
    fn size_distributions() {
        assert_eq!(SizeDist::parse("1024"), Ok(SizeDist::Fixed(1024)));
        assert_eq!(SizeDist::parse("64k"), Ok(SizeDist::Fixed(65536)));
        assert_eq!(SizeDist::parse("100-200"), Ok(SizeDist::Uniform(100, 200)));
        let w = SizeDist::parse("1k:9,64k:1").expect("parses");
        assert_eq!(w.max(), 65536);
        assert!((w.mean() - (9.0 * 1024.0 + 65536.0) / 10.0).abs() < 1e-9);
        let mut rng = Rng::new(3);
        let big = (0..10_000).filter(|_| w.sample(&mut rng) == 65536).count();
        assert!((800..1200).contains(&big), "{big}");
        let u = SizeDist::Uniform(100, 200);
        for _ in 0..1000 {
            assert!((100..=200).contains(&u.sample(&mut rng)));
        }
        for bad in ["", "x", "200-100", "1k:0", "1k:x", "128m"] {
            assert!(SizeDist::parse(bad).is_err(), "{bad}");
        }
    }
}
