//! Garbage collection on a shard's flush thread: when asked (every `gcWaitTime`, or forced
//! over HTTP), drop deleted ledgers from the index and the segments nothing live is left in,
//! then — when a minor or major compaction is due — copy the live entries out of segments
//! whose live fraction is under the threshold, a few at a time.
//!
//! Why on the flush thread: the store has one owner, so a compaction never races a flush.
//! Why in steps: a compaction of a large, mostly dead entry log at Java's default rate (1000
//! entries/s) takes minutes; the flush thread copies one pause's worth of entries, then looks
//! for flush jobs first, so the write cache keeps draining and adds never wait on compaction.
//! The rate limit is Java's: `compactionRateByEntries`, or `compactionRateByBytes` with
//! `isThrottleByBytes`. Minor/major choice follows Java's `GarbageCollectorThread`: a forced
//! run is major unless major compaction is disabled or only a minor one was asked for.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use entrylog::{Compaction, LedgerStore, Step};
use storage::Storage;
use tokio::sync::mpsc;

use crate::admin::metrics::Metrics;
use crate::config::GcConfig;
use crate::shard::mailbox::{GcRequest, StoreEvent};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Major,
    Minor,
}

/// How long the flush thread waits for a flush job between two compaction steps.
pub const STEP_PAUSE: Duration = Duration::from_millis(50);

/// The flush thread's garbage collector.
pub struct GcRunner {
    shard: usize,
    config: GcConfig,
    metrics: Arc<Metrics>,
    current: Option<(Compaction, Kind, bool, Instant)>,
    last_major: Instant,
    last_minor: Instant,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl GcRunner {
    pub fn new(shard: usize, config: GcConfig, metrics: Arc<Metrics>) -> GcRunner {
        // Like Java, the intervals count from the start.
        GcRunner {
            shard,
            config,
            metrics,
            current: None,
            last_major: Instant::now(),
            last_minor: Instant::now(),
        }
    }

    /// A compaction is in progress: call [`step`](Self::step) when no job is waiting.
    pub fn active(&self) -> bool {
        self.current.is_some()
    }

    fn which(&self, req: GcRequest) -> Option<Kind> {
        let ctl = &self.metrics.gc_control;
        let major_on = self.config.major_threshold > 0.0;
        let minor_on = self.config.minor_threshold > 0.0;
        let major_ok =
            major_on && !ctl.suspend_major.load(Relaxed) && !ctl.disk_suspend_major.load(Relaxed);
        let minor_ok =
            minor_on && !ctl.suspend_minor.load(Relaxed) && !ctl.disk_suspend_minor.load(Relaxed);
        let due = |on: bool, interval: Duration, last: Instant| {
            on && !interval.is_zero() && last.elapsed() >= interval
        };
        let forced_major = req.force && (req.force_major || !req.force_minor);
        if major_ok && (forced_major || due(major_on, self.config.major_interval, self.last_major))
        {
            return Some(Kind::Major);
        }
        if minor_ok
            && ((req.force && (req.force_minor || !major_ok))
                || due(minor_on, self.config.minor_interval, self.last_minor))
        {
            return Some(Kind::Minor);
        }
        None
    }

    /// Runs a garbage collection: index collection now, a compaction (stepwise) when due.
    pub fn request<S: Storage>(
        &mut self,
        req: GcRequest,
        store: &mut LedgerStore<S>,
        events: &mpsc::UnboundedSender<StoreEvent>,
    ) {
        if self.current.is_some() {
            return;
        }
        let status = &self.metrics.shards[self.shard].gc;
        let started = Instant::now();
        let collected = match store.collect_index() {
            Ok(c) => c,
            Err(e) => return self.failed(store, events, &format!("index collection: {e}")),
        };
        status
            .reclaimed_deletion_bytes
            .fetch_add(collected.bytes_dropped, Relaxed);
        let (live, total) = collected.usage.iter().fold((0u64, 0u64), |(l, t), u| {
            (
                l + u.live_bytes,
                t + u.len.saturating_sub(entrylog::format::SEGMENT_HEADER_BYTES),
            )
        });
        let ppm = live
            .saturating_mul(1_000_000)
            .checked_div(total)
            .unwrap_or(1_000_000);
        status.usage_ppm.store(ppm, Relaxed);
        let _ = events.send(StoreEvent::View(store.snapshot()));
        log::info!(
            "shard {}: gc: index {} -> {} records, {} segments dropped ({} bytes), tombstones {} purged {} kept, {} segments {:.1}% live, {:.0} ms",
            self.shard,
            collected.records_before,
            collected.records_after,
            collected.segments_dropped,
            collected.bytes_dropped,
            collected.tombstones_purged,
            collected.tombstones_kept,
            collected.usage.len(),
            ppm as f64 / 1e4,
            started.elapsed().as_secs_f64() * 1e3
        );
        let Some(kind) = self.which(req) else {
            return;
        };
        let threshold = match kind {
            Kind::Major => self.config.major_threshold,
            Kind::Minor => self.config.minor_threshold,
        };
        // Planned even when nothing qualifies: the interval restarts as in Java.
        match kind {
            Kind::Major => {
                self.last_major = Instant::now();
                self.last_minor = Instant::now();
            }
            Kind::Minor => self.last_minor = Instant::now(),
        }
        match store.begin_compaction(
            &collected.usage,
            threshold,
            self.config.max_compaction_bytes,
        ) {
            Ok(Some(c)) => {
                log::info!(
                    "shard {}: {kind:?} compaction (threshold {threshold}) of segments {:?}: {} live entries",
                    self.shard,
                    c.victims(),
                    c.remaining()
                );
                status.force_compacting.store(req.force, Relaxed);
                match kind {
                    Kind::Major => status.major_compacting.store(true, Relaxed),
                    Kind::Minor => status.minor_compacting.store(true, Relaxed),
                }
                self.current = Some((c, kind, req.force, Instant::now()));
            }
            Ok(None) => {
                log::debug!(
                    "shard {}: {kind:?} compaction: nothing under {threshold}",
                    self.shard
                );
                self.finish(kind);
            }
            Err(e) => self.failed(store, events, &format!("compaction plan: {e}")),
        }
    }

    fn finish(&mut self, kind: Kind) {
        let status = &self.metrics.shards[self.shard].gc;
        match kind {
            Kind::Major => {
                status.major_count.fetch_add(1, Relaxed);
                status.last_major_ms.store(now_ms(), Relaxed);
            }
            Kind::Minor => {
                status.minor_count.fetch_add(1, Relaxed);
                status.last_minor_ms.store(now_ms(), Relaxed);
            }
        }
        status.force_compacting.store(false, Relaxed);
        status.major_compacting.store(false, Relaxed);
        status.minor_compacting.store(false, Relaxed);
    }

    /// One step of the compaction in progress: one [`STEP_PAUSE`] worth of the rate limit.
    pub fn step<S: Storage>(
        &mut self,
        store: &mut LedgerStore<S>,
        events: &mpsc::UnboundedSender<StoreEvent>,
    ) {
        let Some((mut c, kind, force, started)) = self.current.take() else {
            return;
        };
        let ctl = &self.metrics.gc_control;
        let suspended = match kind {
            Kind::Major => ctl.suspend_major.load(Relaxed) || ctl.disk_suspend_major.load(Relaxed),
            Kind::Minor => ctl.suspend_minor.load(Relaxed) || ctl.disk_suspend_minor.load(Relaxed),
        };
        if suspended && !force {
            // Java stops a compaction at the next log when suspended; we keep what is copied
            // out of the manifest and start over next time.
            log::info!("shard {}: {kind:?} compaction suspended", self.shard);
            store.abort_compaction(c);
            self.finish(kind);
            return;
        }
        let secs = STEP_PAUSE.as_secs_f64();
        let (bytes, entries) = if self.config.throttle_by_bytes {
            (
                ((self.config.rate_by_bytes as f64 * secs) as u64).max(1),
                usize::MAX,
            )
        } else {
            (
                u64::MAX,
                ((self.config.rate_by_entries as f64 * secs) as usize).max(1),
            )
        };
        match store.compact_step_limited(&mut c, bytes, entries) {
            Ok(Step::More(_)) => self.current = Some((c, kind, force, started)),
            Ok(Step::Done(stats)) => {
                let status = &self.metrics.shards[self.shard].gc;
                status
                    .reclaimed_compaction_bytes
                    .fetch_add(stats.bytes_reclaimed(), Relaxed);
                status
                    .compacted_entries
                    .fetch_add(stats.entries_copied, Relaxed);
                log::info!(
                    "shard {}: {kind:?} compaction done: {} segments, {} entries copied, {} bytes reclaimed, {:.1} s",
                    self.shard,
                    stats.segments,
                    stats.entries_copied,
                    stats.bytes_reclaimed(),
                    started.elapsed().as_secs_f64()
                );
                let _ = events.send(StoreEvent::View(store.snapshot()));
                self.finish(kind);
            }
            Err(e) => {
                store.abort_compaction(c);
                self.finish(kind);
                self.failed(store, events, &format!("{kind:?} compaction: {e}"));
            }
        }
    }

    /// Abandons a compaction in progress (shutdown).
    pub fn abort<S: Storage>(&mut self, store: &mut LedgerStore<S>) {
        if let Some((c, kind, _, _)) = self.current.take() {
            store.abort_compaction(c);
            self.finish(kind);
        }
    }

    fn failed<S: Storage>(
        &mut self,
        store: &LedgerStore<S>,
        events: &mpsc::UnboundedSender<StoreEvent>,
        what: &str,
    ) {
        if store.is_stopped() {
            // The on-disk state is uncertain until reopened: the shard goes read-only.
            let _ = events.send(StoreEvent::Failed(format!("gc: {what}")));
        } else {
            log::warn!("shard {}: gc: {what}; will retry next time", self.shard);
        }
    }
}
