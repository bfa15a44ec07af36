//! The lock-free histogram the shards record into, and its Prometheus text: a Java-style
//! *summary* (quantiles estimated from the buckets, `_count`, `_sum`) or a Prometheus
//! *histogram* (`_bucket{le}`), plus the small text helpers every family uses.
//!
//! Why one histogram for everything: recording must cost an index computation and two relaxed
//! atomic adds on the shard's own cache line (no lock, no allocation), and the HTTP thread
//! merges the shards' copies at scrape time. The buckets are log-linear (4 per power of two,
//! ≤ 19 % wide, up to ~19 h in microseconds), so one shape serves latencies (µs, printed in
//! ms) and raw counts (entries per read-ahead run, printed as they are).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

pub(super) const BUCKETS: usize = 144;

#[inline]
pub(super) fn bucket_of(v: u64) -> usize {
    if v < 4 {
        return v as usize;
    }
    let exp = 63 - v.leading_zeros() as usize;
    let sub = ((v >> (exp - 2)) & 3) as usize;
    (4 * (exp - 1) + sub).min(BUCKETS - 1)
}

/// The largest value bucket `i` holds.
pub(super) fn bucket_upper(i: usize) -> u64 {
    if i < 4 {
        return i as u64;
    }
    let exp = i / 4 + 1;
    let sub = (i % 4) as u64;
    ((4 + sub) << (exp - 2)) + (1u64 << (exp - 2)) - 1
}

/// A histogram of latencies in microseconds (or of raw values, for the few summaries Java
/// records with `registerSuccessfulValue`).
pub struct Histogram {
    counts: [AtomicU64; BUCKETS],
    sum: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram {
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            sum: AtomicU64::new(0),
        }
    }
}

impl Histogram {
    #[inline]
    pub fn record(&self, v: u64) {
        self.counts[bucket_of(v)].fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(v, Ordering::Relaxed);
    }

    pub(super) fn merge_into(&self, into: &mut Merged) {
        for (m, c) in into.counts.iter_mut().zip(&self.counts) {
            *m += c.load(Ordering::Relaxed);
        }
        into.sum += self.sum.load(Ordering::Relaxed);
    }
}

/// Histograms summed over shards, at scrape time.
pub(super) struct Merged {
    pub(super) counts: [u64; BUCKETS],
    pub(super) sum: u64,
}

impl Merged {
    pub(super) fn new() -> Merged {
        Merged {
            counts: [0; BUCKETS],
            sum: 0,
        }
    }

    pub(super) fn of(h: &Histogram) -> Merged {
        let mut m = Merged::new();
        h.merge_into(&mut m);
        m
    }

    pub(super) fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The quantile as recorded: the upper bound of the bucket holding it (NaN when empty, as
    /// the Java exporter prints an empty window).
    pub(super) fn quantile(&self, q: f64) -> f64 {
        let count = self.count();
        if count == 0 {
            return f64::NAN;
        }
        let rank = ((q * count as f64).ceil() as u64).clamp(1, count);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return bucket_upper(i) as f64;
            }
        }
        bucket_upper(BUCKETS - 1) as f64
    }

    /// The quantile of a latency histogram, in milliseconds.
    #[cfg(test)]
    pub(super) fn quantile_ms(&self, q: f64) -> f64 {
        self.quantile(q) / 1000.0
    }
}

/// What a summary's values are: latencies recorded in µs and printed in ms (Java's OpStats),
/// or raw values printed as they are (Java's `registerSuccessfulValue`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Unit {
    Ms,
    Raw,
}

const QUANTILES: [f64; 7] = [0.5, 0.75, 0.95, 0.99, 0.999, 0.9999, 1.0];
/// The quantile labels as Java's exporter prints them (`Double.toString`): `1.0`, not `1`,
/// which the dashboards' "(Max)" panels select.
const QUANTILE_LABELS: [&str; 7] = ["0.5", "0.75", "0.95", "0.99", "0.999", "0.9999", "1.0"];

/// A summary as Java writes an OpStats: the failed block, then the successful one, each with
/// `extra` labels (e.g. `journalIndex="0"`) before `success`.
pub(super) fn summary(o: &mut String, name: &str, extra: &str, merged: &[Merged; 2], unit: Unit) {
    let _ = writeln!(o, "# TYPE {name} summary");
    summary_blocks(o, name, extra, merged, unit);
}

/// The two `success` blocks of a summary whose `# TYPE` line is written already.
pub(super) fn summary_blocks(
    o: &mut String,
    name: &str,
    extra: &str,
    merged: &[Merged; 2],
    unit: Unit,
) {
    for (m, ok) in merged.iter().zip(["false", "true"]) {
        summary_lines(o, name, &format!("{extra}success=\"{ok}\""), m, unit);
    }
}

/// One label set's quantiles, `_count` and `_sum`.
pub(super) fn summary_lines(o: &mut String, name: &str, labels: &str, m: &Merged, unit: Unit) {
    let scale = match unit {
        Unit::Ms => 1000.0,
        Unit::Raw => 1.0,
    };
    for (q, label) in QUANTILES.iter().zip(QUANTILE_LABELS) {
        let _ = writeln!(
            o,
            "{name}{{{labels},quantile=\"{label}\"}} {}",
            fmt_f64(m.quantile(*q) / scale)
        );
    }
    let _ = writeln!(o, "{name}_count{{{labels}}} {}", m.count());
    let _ = writeln!(o, "{name}_sum{{{labels}}} {}", m.sum as f64 / scale);
}

/// One label set of a Prometheus histogram in milliseconds (`# TYPE` written by the caller).
/// Bucket bounds every power of two (every 4th fine bucket) from 4 µs, and the bound of every
/// fine bucket (≤ 19 % wide) that holds something: quantiles of a difference of two scrapes
/// stay that precise, and a bound absent from a scrape has the count of the next lower one.
pub(super) fn histogram_lines(o: &mut String, name: &str, labels: &str, m: &Merged) {
    let mut cumulative = 0;
    for (b, c) in m.counts.iter().enumerate() {
        cumulative += c;
        if b < BUCKETS - 1 && ((b >= 3 && b % 4 == 3) || *c > 0) {
            let le = (bucket_upper(b) + 1) as f64 / 1000.0;
            let _ = writeln!(o, "{name}_bucket{{{labels},le=\"{le}\"}} {cumulative}");
        }
    }
    let _ = writeln!(o, "{name}_bucket{{{labels},le=\"+Inf\"}} {cumulative}");
    let _ = writeln!(o, "{name}_count{{{labels}}} {cumulative}");
    let _ = writeln!(o, "{name}_sum{{{labels}}} {}", m.sum as f64 / 1000.0);
}

pub(super) fn fmt_f64(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else {
        format!("{v}")
    }
}

pub(super) fn gauge(o: &mut String, name: &str, labels: &str, v: f64) {
    let _ = writeln!(o, "# TYPE {name} gauge");
    let _ = writeln!(o, "{name}{labels} {}", fmt_f64(v));
}

pub(super) fn counter(o: &mut String, name: &str, labels: &str, v: u64) {
    let _ = writeln!(o, "# TYPE {name} counter");
    let _ = writeln!(o, "{name}{labels} {v}");
}

/// A metric-name fragment from a path: Java replaces `/` with `_`; anything else outside
/// `[a-zA-Z0-9_]` becomes `_` too.
pub(super) fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

pub(super) fn escape_label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_their_values() {
        let mut last = 0;
        for us in [
            0u64,
            1,
            3,
            4,
            5,
            7,
            8,
            9,
            15,
            16,
            100,
            1000,
            12345,
            1 << 30,
            1 << 40,
        ] {
            let b = bucket_of(us);
            assert!(b >= last, "monotonic at {us}");
            last = b;
            if us < (1 << 36) {
                assert!(bucket_upper(b) >= us, "{us} in bucket {b}");
                assert!(
                    b == 0 || bucket_upper(b - 1) < us,
                    "{us} not in bucket {}",
                    b - 1
                );
            }
        }
        for i in 1..BUCKETS {
            assert!(bucket_upper(i) > bucket_upper(i - 1));
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }

    /// A raw-value summary prints its values as recorded (small ones exactly), a latency one
    /// in milliseconds; both with Java's quantile labels.
    #[test]
    fn raw_and_latency_summaries() {
        let h = Histogram::default();
        for v in [1, 2, 2, 3] {
            h.record(v);
        }
        let m = [Merged::new(), Merged::of(&h)];
        let mut raw = String::new();
        summary(&mut raw, "runs", "", &m, Unit::Raw);
        assert!(
            raw.contains("runs{success=\"true\",quantile=\"0.5\"} 2\n"),
            "{raw}"
        );
        assert!(
            raw.contains("runs{success=\"true\",quantile=\"1.0\"} 3\n"),
            "{raw}"
        );
        assert!(raw.contains("runs_count{success=\"true\"} 4\nruns_sum{success=\"true\"} 8\n"));
        assert!(raw.contains("runs{success=\"false\",quantile=\"0.99\"} NaN\n"));
        let mut ms = String::new();
        summary(&mut ms, "lat", "journalIndex=\"1\",", &m, Unit::Ms);
        assert!(ms.contains("lat{journalIndex=\"1\",success=\"true\",quantile=\"1.0\"} 0.003\n"));
        assert!(
            ms.contains("lat_sum{journalIndex=\"1\",success=\"true\"} 0.008\n"),
            "{ms}"
        );
    }
}
