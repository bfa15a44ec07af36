//! What a shard tells the metrics: per-request latencies and the shard's gauges.

use super::*;

impl Shard {
    /// Counters, with the current ledger count and write-cache size.
    pub fn stats(&self) -> ShardStats {
        ShardStats {
            ledgers: self.core.table.len(),
            write_cache_bytes: self.core.table.cached_bytes() + self.core.table.frozen_bytes(),
            ..self.stats.clone()
        }
    }

    /// This shard's metrics block.
    #[inline]
    pub(super) fn m(&self) -> &ShardMetrics {
        &self.metrics.shards[self.id]
    }

    /// Records an answered request (latency by kind and outcome, bytes read).
    /// Counts a reply to a request that started at `since`; returns now (the time it read).
    pub(super) fn record(&self, op: Op, since: u64, reply: &Response) -> u64 {
        let status = reply.status();
        let m = self.m();
        let now = m.finished(
            op,
            since,
            status == StatusCode::EOK,
            status == StatusCode::ETOOMANYREQUESTS,
        );
        if let Response::ReadEntry {
            body: Some(body), ..
        } = reply
        {
            m.read_bytes
                .fetch_add(body.len() as u64, std::sync::atomic::Ordering::Relaxed);
        }
        now
    }

    /// Gauges and journal counters for the metrics (plain stores, no lock).
    pub(super) fn publish_gauges(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        self.store
            .cache_pressure
            .store(self.core.table.under_pressure(), Relaxed);
        let m = self.m();
        let j = self.core.journal.stats();
        m.journal_queue.store(
            (self.core.pending.len() + self.core.blocked.len()) as i64,
            Relaxed,
        );
        m.adds_blocked
            .store(self.core.blocked.len() as i64, Relaxed);
        m.journal_force_write_queue
            .store(self.core.journal.groups_awaiting_sync() as i64, Relaxed);
        m.write_cache_bytes.store(
            (self.core.table.cached_bytes() + self.core.table.frozen_bytes()) as i64,
            Relaxed,
        );
        m.ledgers.store(self.core.table.len() as i64, Relaxed);
        m.read_ahead_parked
            .store(self.read_ahead.parked() as i64, Relaxed);
        let (bytes, count, hits) = self.read_ahead.cache_stats();
        m.read_cache_bytes.store(bytes as i64, Relaxed);
        m.read_cache_count.store(count as i64, Relaxed);
        m.read_cache_hits.store(hits, Relaxed);
        m.journal_records.store(j.records, Relaxed);
        m.journal_groups.store(j.groups, Relaxed);
        m.journal_syncs.store(j.syncs, Relaxed);
        m.journal_bytes.store(j.bytes_written, Relaxed);
        m.journal_flush_max_wait.store(j.flushes_max_wait, Relaxed);
        m.journal_refused_no_buffer
            .store(j.refused_no_buffer, Relaxed);
        m.journal_refused_no_segment
            .store(j.refused_no_segment, Relaxed);
        m.journal_flush_bytes.store(j.flushes_bytes, Relaxed);
        m.journal_flush_entries.store(j.flushes_records, Relaxed);
        m.journal_flush_queue_empty
            .store(j.flushes_queue_empty, Relaxed);
    }

    /// What the ledger storage's latest view holds, for the metrics: its index records
    /// (`bookie_entries_count`) and live entry-log segments (`bookie_ACTIVE_ENTRY_LOG_TOTAL`).
    /// At open and whenever a flush or a collection publishes a new view.
    pub(super) fn publish_view(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        let (m, view) = (self.m(), &self.store.view);
        m.entries.store(view.index_records() as i64, Relaxed);
        m.entry_logs.store(view.segments().len() as i64, Relaxed);
    }
}
