//! The knobs of autorecovery, with Java's names and defaults (bk_server.conf keys; the bookie's
//! configuration maps them, docs/config-keys.md).

use crate::placement::Policy;

/// Our own bound on re-replication's reads and writes when `replicationRateByBytes` is unset:
/// enough to heal a lost bookie's gigabytes in minutes, low enough that the bookies serving
/// adds keep their latency (docs/autorecovery.md §5 measures it).
pub const DEFAULT_RATE_BYTES_PER_SEC: u64 = 64 << 20;

#[derive(Clone, Debug)]
pub struct Settings {
    /// `lostBookieRecoveryDelay` (s, 0): how long a lost bookie may come back before its
    /// ledgers are marked (the ZooKeeper node, once it exists, wins).
    pub lost_bookie_recovery_delay_s: i32,
    /// `auditorPeriodicCheckInterval` (s, 604800; 0: never): every ledger checked entry-wise.
    pub check_all_interval_s: u64,
    /// `auditorPeriodicBookieCheckInterval` (s, 86400): the lost-bookie audit run again.
    pub bookie_check_interval_s: u64,
    /// `auditorLedgerVerificationPercentage` (0): entries read per checked fragment beyond the
    /// first and last.
    pub verification_percentage: u32,
    /// `openLedgerRereplicationGracePeriod` (ms, 30000): an open ledger's writer may still
    /// replace the lost bookie itself before the worker fences and recovers the ledger.
    pub open_ledger_grace_ms: u64,
    /// `rereplicationEntryBatchSize` (10; Pulsar's file: 100): entries a copy keeps in flight.
    pub batch_entries: usize,
    /// `replicationRateByBytes` (bytes/s; -1 in Java: unlimited) or ours.
    pub rate_bytes_per_sec: u64,
    /// `rwRereplicateBackoffMs` (5000): the worker's pause after a failed round.
    pub backoff_ms: u64,
    /// `lockReleaseOfFailedLedgerGracePeriod` (ms, 300000): the longest a failed ledger's lock
    /// is kept (1/32 of it after the first failure, doubling).
    pub failed_lock_grace_ms: u64,
    /// `storeSystemTimeAsLedgerUnderreplicatedMarkTime` (true): records carry a ctime.
    pub store_mark_time: bool,
    /// `ensemblePlacementPolicy` (and `enforceMinNumRacksPerWriteQuorum`).
    pub placement: Policy,
    /// `reppDnsResolverClass` is Pulsar's rack mapping: racks from the `/bookies` znode.
    pub pulsar_racks: bool,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            lost_bookie_recovery_delay_s: 0,
            check_all_interval_s: 604_800,
            bookie_check_interval_s: 86_400,
            verification_percentage: 0,
            open_ledger_grace_ms: 30_000,
            batch_entries: 10,
            rate_bytes_per_sec: DEFAULT_RATE_BYTES_PER_SEC,
            backoff_ms: 5_000,
            failed_lock_grace_ms: 300_000,
            store_mark_time: true,
            placement: Policy::RackAware {
                enforce_min_racks: false,
            },
            pulsar_racks: false,
        }
    }
}

impl Settings {
    /// How long a failed ledger's lock is kept after its `failures`-th failure (Java:
    /// grace/32 · 2^n, then grace from the fifth on).
    pub fn failed_lock_hold_ms(&self, failures: u32) -> u64 {
        if failures >= 5 {
            self.failed_lock_grace_ms
        } else {
            (self.failed_lock_grace_ms / 32) << failures
        }
    }
}
