//! A known, deliberate cost per add and per read, for measuring the regression gate's
//! sensitivity (`scripts/gate-sensitivity`): a bookie built with the `bench-slowdown` feature
//! spins on the shard thread for `BOOKIE_BENCH_SLOWDOWN_ADD_NS` per add and
//! `BOOKIE_BENCH_SLOWDOWN_READ_NS` per read (both read once, 0 when unset), as a change that made
//! each operation that much dearer would. Without the feature both calls compile to nothing:
//! no release build's default path carries it.

#[cfg(feature = "bench-slowdown")]
mod on {
    use std::sync::OnceLock;
    use std::time::{Duration, Instant};

    fn nanos(var: &str) -> Duration {
        Duration::from_nanos(
            std::env::var(var)
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0),
        )
    }

    fn spin(d: Duration) {
        if d.is_zero() {
            return;
        }
        let start = Instant::now();
        while start.elapsed() < d {
            std::hint::spin_loop();
        }
    }

    pub fn add() {
        static ADD: OnceLock<Duration> = OnceLock::new();
        spin(*ADD.get_or_init(|| nanos("BOOKIE_BENCH_SLOWDOWN_ADD_NS")));
    }

    pub fn read() {
        static READ: OnceLock<Duration> = OnceLock::new();
        spin(*READ.get_or_init(|| nanos("BOOKIE_BENCH_SLOWDOWN_READ_NS")));
    }
}

/// Spends the configured extra CPU of one add (nothing without the feature).
#[inline(always)]
pub fn add() {
    #[cfg(feature = "bench-slowdown")]
    on::add();
}

/// Spends the configured extra CPU of one read (nothing without the feature).
#[inline(always)]
pub fn read() {
    #[cfg(feature = "bench-slowdown")]
    on::read();
}
