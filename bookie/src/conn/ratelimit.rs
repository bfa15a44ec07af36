//! Rate-limited log lines for events a client can cause at will (bad frames, refused
//! connections): the first few of each window are logged, the rest are counted and the count
//! is reported with the next line that gets through. A hostile client cannot fill the disk with
//! the bookie's log or slow it down by making it write one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A log limiter: at most `burst` lines per window.
pub struct LogLimiter {
    window_ms: u64,
    burst: u64,
    /// Start of the current window (ms since the process's first limited line), plus one
    /// (0: no window yet).
    window_start: AtomicU64,
    in_window: AtomicU64,
    suppressed: AtomicU64,
}

fn now_ms() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64
}

impl LogLimiter {
    pub const fn new(window: Duration, burst: u64) -> LogLimiter {
        LogLimiter {
            window_ms: window.as_millis() as u64,
            burst,
            window_start: AtomicU64::new(0),
            in_window: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    /// Decides whether a line may be logged now. `Some(n)`: log it, and say that `n` lines
    /// were suppressed before it; `None`: suppressed (counted).
    pub fn admit(&self) -> Option<u64> {
        let now = now_ms() + 1;
        let start = self.window_start.load(Ordering::Relaxed);
        let expired = start == 0 || now.saturating_sub(start) >= self.window_ms;
        if expired
            && self
                .window_start
                .compare_exchange(start, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.in_window.store(0, Ordering::Relaxed);
        }
        if self.in_window.fetch_add(1, Ordering::Relaxed) < self.burst {
            Some(self.suppressed.swap(0, Ordering::Relaxed))
        } else {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            None
        }
    }

    /// Logs a warning built by `line` (given a suffix that reports suppressed lines), unless
    /// the window's quota is used up.
    pub fn warn(&self, line: impl FnOnce(String) -> String) {
        if let Some(suppressed) = self.admit() {
            let suffix = if suppressed > 0 {
                format!(" ({suppressed} similar messages suppressed)")
            } else {
                String::new()
            };
            log::warn!("{}", line(suffix));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_a_burst_per_window_and_counts_the_rest() {
        let limiter = LogLimiter::new(Duration::from_secs(3600), 3);
        let admitted: Vec<Option<u64>> = (0..10).map(|_| limiter.admit()).collect();
        assert_eq!(&admitted[..3], &[Some(0), Some(0), Some(0)]);
        assert!(admitted[3..].iter().all(Option::is_none));
        assert_eq!(limiter.suppressed.load(Ordering::Relaxed), 7);
    }

    #[test]
    fn a_new_window_reports_what_was_suppressed() {
        let limiter = LogLimiter::new(Duration::from_millis(20), 1);
        assert_eq!(limiter.admit(), Some(0));
        assert_eq!(limiter.admit(), None);
        assert_eq!(limiter.admit(), None);
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(limiter.admit(), Some(2));
    }
}
