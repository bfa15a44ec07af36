//! When the write cache goes to ledger storage: the flush trigger and its pace, deletions and
//! garbage-collection requests passed to the flush thread, and what the flush thread reports.

use super::*;

/// The slowest pace a paced flush is given, bytes per second.
pub(super) const FLUSH_RATE_FLOOR: u64 = 16 << 20;

/// The pace for a flush of `bytes` that came in over `filled_in`: twice their arrival rate, so
/// the flush takes about half as long as the filling did, never below [`FLUSH_RATE_FLOOR`] or
/// above `ceiling` (0: unpaced).
pub(super) fn flush_rate(bytes: usize, filled_in: Duration, ceiling: u64) -> u64 {
    if ceiling == 0 {
        return 0;
    }
    let secs = filled_in.as_secs_f64().max(1e-3);
    let wanted = (2.0 * bytes as f64 / secs) as u64;
    wanted.clamp(FLUSH_RATE_FLOOR.min(ceiling), ceiling)
}

impl Shard {
    /// Starts a flush of the write cache when it is half full or old enough.
    pub(super) fn maybe_flush(&mut self) {
        if self.flushing || self.read_only {
            return;
        }
        let cached = self.core.table.cached_bytes();
        let due = cached >= self.flush_threshold_bytes
            || (cached > 0 && self.last_flush.elapsed() >= self.flush_interval)
            || self.core.table.has_pending_deletes()
            || self.gc_request.is_some()
            || (self.flush_requested && cached > 0);
        if cached == 0 {
            self.flush_requested = false;
        }
        if !due {
            return;
        }
        let filled_in = self.last_flush.elapsed();
        if let Some(batch) = self.core.freeze() {
            self.flushing = true;
            self.flush_requested = false;
            self.last_flush = Instant::now();
            self.store.flush_rate.store(
                flush_rate(cached, filled_in, self.flush_rate_ceiling),
                std::sync::atomic::Ordering::Relaxed,
            );
            let mut sent = self.store.flush_jobs.send(FlushJob::Flush(batch)).is_ok();
            if let Some(req) = self.gc_request.take() {
                sent &= self.store.flush_jobs.send(FlushJob::Gc(req)).is_ok();
            }
            if !sent {
                log::error!("shard {}: the flush thread is gone; read-only", self.id);
                self.set_failed("the flush thread is gone");
            }
        }
    }

    /// Garbage collection found these ledgers deleted from the cluster: drop them here (the
    /// next flush persists the tombstones). Returns how many this shard held.
    pub fn delete_ledgers(&mut self, ids: &[i64]) -> usize {
        let Some(deleted) =
            self.core
                .delete_ledgers(ids, !self.read_only, crate::admin::metrics::now_ms())
        else {
            log::warn!(
                "shard {}: gc: {} deleted ledgers kept until a restart: this shard is read-only \
                 and cannot persist their deletion",
                self.id,
                ids.len()
            );
            return 0;
        };
        if deleted > 0 {
            log::info!(
                "shard {}: gc: {deleted} deleted ledgers dropped ({} remembered for 7 days: \
                 adds that would recreate them are refused)",
                self.id,
                self.core.fenced_deleted.len()
            );
            self.metrics.shards[self.id]
                .gc
                .deleted_ledgers
                .fetch_add(deleted as u64, std::sync::atomic::Ordering::Relaxed);
        }
        self.maybe_flush();
        deleted
    }

    /// Asks for a garbage collection after the next flush.
    /// Flushes the write cache as soon as no flush is running.
    pub fn request_flush(&mut self) {
        self.flush_requested = true;
        self.maybe_flush();
    }

    pub fn request_gc(&mut self, req: GcRequest) {
        self.gc_request = Some(self.gc_request.unwrap_or_default().merge(req));
        self.maybe_flush();
    }

    /// A flush finished: its entries are served from ledger storage now, and the journal up to
    /// its mark is no longer needed (checkpoint order: entry log, index, metadata, manifest with
    /// the mark, all durable — then the journal is trimmed).
    pub fn flush_done(&mut self, event: StoreEvent) {
        match event {
            StoreEvent::View(view) => {
                self.store.view = view;
                self.publish_view();
            }
            StoreEvent::Flushed { mark, view, stats } => {
                self.flushing = false;
                log::debug!("shard {}: flushed {stats:?}, mark {mark}", self.id);
                self.store.view = view;
                self.publish_view();
                let (entries, trimmed) = self.core.flushed(mark);
                if let Some(entries) = entries {
                    let _ = self.store.flush_jobs.send(FlushJob::Dispose(entries));
                }
                self.unblocked.notify_waiters();
                match trimmed {
                    Ok(trash) => self
                        .store
                        .reclaim
                        .delete(trash.iter().map(|n| self.journal_dir.join(n))),
                    Err(err) => {
                        log::error!("shard {}: journal trim failed: {err}; read-only", self.id);
                        self.set_failed("journal trim failed");
                    }
                }
            }
            StoreEvent::Failed(err) => {
                self.flushing = false;
                log::error!("shard {}: {err}; the shard is read-only now", self.id);
                self.set_failed("ledger storage failed");
            }
        }
    }

    /// Closes the open group, waits until everything appended is durable and seals the
    /// journal's active segment (shutdown: the next start has nothing to repair).
    pub fn flush(&mut self) {
        if let Err(err) = self.core.journal.close() {
            log::error!("shard {}: final journal flush failed: {err}", self.id);
        }
        self.drive();
    }
}

#[cfg(test)]
mod flush_rate_tests {
    use super::*;

    #[test]
    pub(super) fn twice_the_arrival_rate_within_bounds() {
        let mib = 1u64 << 20;
        // 128 MiB in 5.5 s: ~46.5 MiB/s.
        let r = flush_rate(128 << 20, Duration::from_millis(5500), 384 * mib);
        assert!((46 * mib..48 * mib).contains(&r), "{}", r / mib);
        // A trickle flushed by the interval: the floor.
        assert_eq!(
            flush_rate(1 << 20, Duration::from_secs(60), 384 * mib),
            16 * mib
        );
        // A burst filled in 100 ms: the ceiling.
        assert_eq!(
            flush_rate(128 << 20, Duration::from_millis(100), 384 * mib),
            384 * mib
        );
        // A ceiling below the floor wins; 0 stays unpaced.
        assert_eq!(
            flush_rate(1 << 20, Duration::from_secs(60), 8 * mib),
            8 * mib
        );
        assert_eq!(flush_rate(128 << 20, Duration::from_secs(1), 0), 0);
    }
}
