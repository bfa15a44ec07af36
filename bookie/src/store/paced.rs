//! A pacing wrapper around a storage port, for the flush thread: it spaces out writes so that
//! flushing the write cache takes a bounded share of the disk the journal shares.
//!
//! A journal sync submitted behind a burst of large writes waits for all of them
//! (docs/machine.md §1.8: 1 MiB writes at queue depth 4 cut journal commits by 93 %, with fsync
//! p99.9 up to 0.46 s). So the flusher writes in small chunks, one at a time, and no faster than
//! `bytes_per_sec`: a token bucket, where a write that overdraws it sleeps the flush thread
//! (only that thread: it does nothing else). Reads and namespace operations pass through.
//!
//! The rate is shared with the shard, which sets it at each freeze to twice the rate at which
//! the frozen bytes came in (within the configured ceiling and a floor): a flush then takes
//! about half the time its cache took to fill, instead of going out at the ceiling in a burst
//! that every journal sync meanwhile pays for (measured on the main job: 138 MB per shard at
//! 384 MB/s held the adds' p50 at 11–20 ms for a second or two, every five seconds).
//!
//! Pacing yields when the write cache is under pressure (the shard sets `urgent` when its cache
//! is more than half full): adds then wait for this flush to free the cache, and a journal
//! sync queued behind a few flush writes costs them far less than a stalled cache does.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use storage::{AlignedBuf, Completion, IoError, Op, Storage, Wait};

use crate::store::storage_wrap::forward_storage;

pub struct Paced<S> {
    inner: S,
    /// Bytes per second, set by the shard; 0 turns pacing off.
    rate: Arc<AtomicU64>,
    urgent: Arc<AtomicBool>,
    /// Bytes allowed before the next write must wait, refilled over time.
    tokens: f64,
    last: Instant,
}

/// The bucket holds 20 ms of the rate, and never less than 1 MiB.
fn burst(bytes_per_sec: u64) -> f64 {
    (bytes_per_sec as f64 / 50.0).max((1 << 20) as f64)
}

impl<S: Storage> Paced<S> {
    pub fn new(inner: S, rate: Arc<AtomicU64>, urgent: Arc<AtomicBool>) -> Paced<S> {
        let tokens = burst(rate.load(Ordering::Relaxed));
        Paced {
            inner,
            rate,
            urgent,
            tokens,
            last: Instant::now(),
        }
    }

    fn pace(&mut self, bytes: usize) {
        let bytes_per_sec = self.rate.load(Ordering::Relaxed);
        if bytes_per_sec == 0 {
            return;
        }
        let burst = burst(bytes_per_sec);
        if self.urgent.load(Ordering::Relaxed) {
            self.tokens = burst;
            self.last = Instant::now();
            return;
        }
        let now = Instant::now();
        let elapsed = now.duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + elapsed * bytes_per_sec as f64).min(burst);
        self.tokens -= bytes as f64;
        if self.tokens < 0.0 {
            let wait = -self.tokens / bytes_per_sec as f64;
            std::thread::sleep(Duration::from_secs_f64(wait));
            self.last = Instant::now();
            self.tokens = 0.0;
        }
    }
}

impl<S: Storage> Storage for Paced<S> {
    forward_storage!();
    fn in_flight(&self) -> usize {
        self.inner.in_flight()
    }
    fn submit(&mut self, token: u64, op: Op) -> Result<(), (IoError, Option<AlignedBuf>)> {
        if let Op::Write { buf, .. } = &op {
            self.pace(buf.len());
        }
        self.inner.submit(token, op)
    }
    fn poll(&mut self, out: &mut Vec<Completion>, wait: Wait) -> Result<(), IoError> {
        self.inner.poll(out, wait)
    }
}
