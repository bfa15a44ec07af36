//! The garbage-collection driver: every `gcWaitTime` (or at once when forced over HTTP) it
//! finds the ledgers this bookie need not keep and has the shards drop them, then asks every
//! shard to collect garbage (`gc/compaction.rs`, on its flush thread).
//!
//! What it drops, as Java's `ScanAndCompareGarbageCollector` (docs/semantics.md §4.7):
//! - over-replicated ledgers, every `gcOverreplicatedLedgerWaitTime` (0 disables): a local
//!   ledger whose metadata says *closed* and none of whose ensembles holds this bookie's id
//!   (after a decommission or autorecovery moved it). Checked once, then again while holding
//!   the ledger's under-replication lock (`metadata::underreplication`), which is held until
//!   the shards have dropped it, so a replication worker cannot put us back in meanwhile; a
//!   ledger whose lock is taken is skipped. A ledger whose metadata cannot be read is kept.
//! - deleted ledgers: the local ledger ids are snapshotted from the shards *before* ZooKeeper
//!   is listed, so a ledger created meanwhile is never a candidate;
//!   `metadata::ledgers::gc_decision` refuses a failed listing and an empty listing while
//!   local ledgers exist. With `verifyMetadataOnGC` each candidate's znode is read again
//!   first: "no node" deletes it; metadata that lists this bookie keeps it; metadata that does
//!   not list it deletes it (Java does the same); any other failure keeps it.
//!
//! Without a metadata store (standalone) nothing is ever dropped, and only compaction runs.
//!
//! Full disks (`isForceGCAllowWhenNoSpace`, Java's ledger-dirs listener): at each disk check
//! (`diskCheckInterval`) the driver reads the fullest directory's level. With the key false,
//! major compaction is suspended above `diskUsageWarnThreshold` and minor too above
//! `diskUsageThreshold`; with it true, a forced collection runs at each check instead while a
//! directory is above the warn threshold, so a read-only bookie still reclaims space.
//!
//! Its own thread with a current-thread runtime and its own ZooKeeper session per cycle: a slow
//! listing of a large cluster never holds up registration or the admin server.

pub mod compaction;
pub mod reclaim;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use std::time::Instant;

use metadata::ledger_metadata::{read_ledger_metadata, LedgerMetadata};
use metadata::underreplication::{self, LockError};
use metadata::{LedgerLayout, MetaError, MetadataConfig};
use tokio::sync::{oneshot, Notify};

use crate::admin::metrics::Metrics;
use crate::admin::readonly::{BookieState, DISK_ALMOST_FULL, DISK_FULL_LEVEL};
use crate::shard::mailbox::{AdminQuery, GcRequest, ShardHandle};

/// What the HTTP server and the driver share: at most one pending request (later ones merge
/// into it, so a flood of PUTs costs nothing), and a wake-up.
#[derive(Default)]
struct Shared {
    pending: Mutex<Option<GcRequest>>,
    wake: Notify,
    /// A forced run was asked for and has not been handed to the shards yet.
    forcing: AtomicBool,
    /// The driver thread has ended: triggers go nowhere.
    stopped: AtomicBool,
}

/// How the HTTP server reaches the driver.
#[derive(Clone)]
pub struct GcTrigger {
    shared: Arc<Shared>,
}

impl GcTrigger {
    /// Starts a garbage collection now; false when the driver is gone.
    pub fn trigger(&self, req: GcRequest) -> bool {
        if self.shared.stopped.load(Ordering::Acquire) {
            return false;
        }
        {
            let mut p = self
                .shared
                .pending
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            *p = Some(p.unwrap_or_default().merge(req));
        }
        if req.force {
            self.shared.forcing.store(true, Ordering::Release);
        }
        self.shared.wake.notify_one();
        true
    }

    pub fn force_pending(&self) -> bool {
        self.shared.forcing.load(Ordering::Acquire)
    }
}

/// The running driver; stops when dropped.
pub struct GcDriver {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for GcDriver {
    fn drop(&mut self) {
        self.stop.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What the driver is configured with (bk_server.conf keys).
#[derive(Clone, Debug)]
pub struct GcSettings {
    /// `gcWaitTime`.
    pub wait: Duration,
    /// `gcOverreplicatedLedgerWaitTime`; zero disables.
    pub overreplicated_wait: Duration,
    /// `verifyMetadataOnGC`.
    pub verify_metadata: bool,
    /// `gcMetadataOpRateLimit`: ledger-metadata reads per second.
    pub metadata_op_rate: u32,
    /// `isForceGCAllowWhenNoSpace`.
    pub force_when_no_space: bool,
    /// `diskCheckInterval`: how often the disk level is looked at.
    pub disk_check_interval: Duration,
}

/// What the driver reaches: the cluster to read (None: standalone), the shards, the disk
/// checker's level and the compaction switches.
pub struct GcLinks {
    pub metadata: Option<MetadataConfig>,
    pub shards: Arc<Vec<ShardHandle>>,
    pub state: Arc<BookieState>,
    pub metrics: Arc<Metrics>,
    /// The Java bookie's files taken over, if any: a deleted ledger of theirs is recorded as
    /// deleted (durably) before the shards drop it.
    pub legacy: Option<Arc<crate::store::takeover::Legacy>>,
}

/// Starts the driver.
pub fn start(settings: GcSettings, links: GcLinks) -> Result<(GcDriver, GcTrigger), String> {
    let (stop_tx, mut stop_rx) = oneshot::channel::<()>();
    let shared = Arc::new(Shared::default());
    let trigger = GcTrigger {
        shared: shared.clone(),
    };
    let thread = std::thread::Builder::new()
        .name("gc".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    log::error!("gc: cannot build its runtime: {e}; no garbage collection");
                    shared.stopped.store(true, Ordering::Release);
                    return;
                }
            };
            rt.block_on(run(settings, links, &shared, &mut stop_rx));
            shared.stopped.store(true, Ordering::Release);
        })
        .map_err(|e| format!("cannot start the gc thread: {e}"))?;
    Ok((
        GcDriver {
            stop: Some(stop_tx),
            thread: Some(thread),
        },
        trigger,
    ))
}

async fn run(
    settings: GcSettings,
    links: GcLinks,
    shared: &Shared,
    stop_rx: &mut oneshot::Receiver<()>,
) {
    let tick = settings
        .disk_check_interval
        .max(Duration::from_millis(100))
        .min(settings.wait);
    let mut next_gc = Instant::now() + settings.wait;
    // Like Java, the first over-replication check comes one interval after the start.
    let mut last_overreplicated = Instant::now();
    let mut java_logs = crate::store::takeover_retire::JavaLogRetirer::default();
    loop {
        let sleep = next_gc.saturating_duration_since(Instant::now()).min(tick);
        let woken = tokio::select! {
            _ = &mut *stop_rx => break,
            _ = tokio::time::sleep(sleep) => false,
            _ = shared.wake.notified() => true,
        };
        let pressure = disk_gate(&settings, &links);
        let due = Instant::now() >= next_gc;
        if !woken && !due && pressure.is_none() {
            continue;
        }
        // Requests that came in meanwhile are one (or none: the periodic run).
        let mut req = shared
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .unwrap_or_default();
        if let Some(forced) = pressure {
            req = req.merge(forced);
        }
        if let Some(cfg) = &links.metadata {
            let overreplicated = !settings.overreplicated_wait.is_zero()
                && last_overreplicated.elapsed() > settings.overreplicated_wait;
            let mut pass = Pass {
                cfg,
                shards: &links.shards,
                legacy: links.legacy.as_deref(),
                overreplicated,
                verify_metadata: settings.verify_metadata,
                pace: Pace::new(settings.metadata_op_rate),
            };
            if let Err(e) = pass.run().await {
                log::warn!("gc: ledger scan skipped: {e}");
            }
            if overreplicated {
                last_overreplicated = Instant::now();
            }
        }
        if let Some(legacy) = &links.legacy {
            retire_java_logs(&mut java_logs, legacy, &links).await;
        }
        for shard in links.shards.iter() {
            let _ = shard.admin.send(AdminQuery::Gc(req));
        }
        shared.forcing.store(false, Ordering::Release);
        next_gc = Instant::now() + settings.wait;
    }
}

/// Removes the taken-over Java entry logs in which no ledger the shards hold has an entry
/// (`store::takeover_retire`), counting them in the metrics. The shards are listed after the
/// collection dropped what it dropped.
async fn retire_java_logs(
    retirer: &mut crate::store::takeover_retire::JavaLogRetirer,
    legacy: &crate::store::takeover::Legacy,
    links: &GcLinks,
) {
    let started = Instant::now();
    let held = match local_ledgers(&links.shards).await {
        Ok(held) => held,
        Err(e) => {
            log::warn!("gc: Java entry logs not looked at this time: {e}");
            return;
        }
    };
    match retirer.pass(&legacy.store, &held) {
        Ok(r) => {
            if r.logs_read > 0 {
                log::info!(
                    "gc: read which ledgers {} Java entry log(s) hold, in {} ms",
                    r.logs_read,
                    started.elapsed().as_millis()
                );
            }
            if r.logs > 0 {
                log::info!(
                    "gc: {} Java entry log(s) removed, {} bytes reclaimed: no ledger this \
                     bookie stores has an entry in them",
                    r.logs,
                    r.bytes
                );
            }
            let m = &links.metrics;
            m.java_logs_retired
                .fetch_add(r.logs as u64, Ordering::Relaxed);
            m.java_log_bytes_retired
                .fetch_add(r.bytes, Ordering::Relaxed);
        }
        Err(e) => log::warn!("gc: Java entry logs kept this time: {e}"),
    }
}

/// Applies the disk level to compaction (module docs); returns a forced request when a
/// collection must run now because a directory is filling up and the key allows forcing.
fn disk_gate(settings: &GcSettings, links: &GcLinks) -> Option<GcRequest> {
    let level = links.state.disk_pressure();
    let ctl = &links.metrics.gc_control;
    if settings.force_when_no_space {
        ctl.disk_suspend_major.store(false, Ordering::Relaxed);
        ctl.disk_suspend_minor.store(false, Ordering::Relaxed);
        return (level >= DISK_ALMOST_FULL).then_some(GcRequest {
            force: true,
            ..GcRequest::default()
        });
    }
    let major = level >= DISK_ALMOST_FULL;
    let minor = level >= DISK_FULL_LEVEL;
    let major_changed = ctl.disk_suspend_major.swap(major, Ordering::Relaxed) != major;
    let minor_changed = ctl.disk_suspend_minor.swap(minor, Ordering::Relaxed) != minor;
    if major_changed || minor_changed {
        log::info!(
            "gc: disks {}: major compaction {}, minor compaction {}",
            ["below the warn threshold", "almost full", "full"][usize::from(level.min(2))],
            if major { "suspended" } else { "on" },
            if minor { "suspended" } else { "on" }
        );
    }
    None
}

/// Java's `gcMetadataOpRateLimit`: at most `rate` ledger-metadata reads a second, so a
/// bookie with many ledgers does not flood ZooKeeper.
struct Pace {
    interval: Duration,
    next: tokio::time::Instant,
}

impl Pace {
    fn new(rate: u32) -> Pace {
        Pace {
            interval: Duration::from_secs(1) / rate.max(1),
            next: tokio::time::Instant::now(),
        }
    }

    async fn acquire(&mut self) {
        let now = tokio::time::Instant::now();
        if self.next > now {
            tokio::time::sleep_until(self.next).await;
        }
        self.next = self.next.max(now) + self.interval;
    }
}

/// The ids of the ledgers the shards hold.
async fn local_ledgers(shards: &[ShardHandle]) -> Result<BTreeSet<u64>, String> {
    let mut local = BTreeSet::new();
    for shard in shards {
        let (tx, rx) = oneshot::channel();
        shard
            .admin
            .send(AdminQuery::ListLedgers(tx))
            .map_err(|_| "a shard is not running".to_string())?;
        let ids = tokio::time::timeout(Duration::from_secs(30), rx)
            .await
            .map_err(|_| "a shard did not list its ledgers".to_string())?
            .map_err(|_| "a shard stopped".to_string())?;
        local.extend(ids.into_iter().map(|id| id as u64));
    }
    Ok(local)
}

/// One scan of the cluster's metadata against the local ledgers.
struct Pass<'a> {
    cfg: &'a MetadataConfig,
    shards: &'a [ShardHandle],
    legacy: Option<&'a crate::store::takeover::Legacy>,
    overreplicated: bool,
    verify_metadata: bool,
    pace: Pace,
}

impl Pass<'_> {
    async fn run(&mut self) -> Result<(), String> {
        // 1. The local snapshot first (module docs).
        let mut local = self.local_ledgers().await?;
        if local.is_empty() {
            return Ok(());
        }
        let zk = metadata::zk::connect(self.cfg)
            .await
            .map_err(|e| format!("cannot connect to ZooKeeper: {e}"))?;
        let layout = metadata::cluster::read_layout(&zk, self.cfg)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("{}/LAYOUT is missing", self.cfg.ledgers_root))?;
        // 2. Over-replicated ledgers.
        if self.overreplicated {
            let dropped = self.drop_overreplicated(&zk, layout, &local).await;
            if dropped.is_empty() {
                log::info!("gc: no over-replicated ledgers among {}", local.len());
            } else {
                log::info!(
                    "gc: dropped {} over-replicated ledgers (closed, this bookie in none of their ensembles): {:?}",
                    dropped.len(),
                    dropped
                );
            }
            local.retain(|id| !dropped.contains(id));
        }
        // 3. Deleted ledgers.
        let listing = metadata::ledgers::live_ledgers(&zk, self.cfg, None).await;
        let mut deleted = metadata::ledgers::gc_decision(&local, listing.as_ref(), false)
            .map_err(|e| e.to_string())?;
        if self.verify_metadata && !deleted.is_empty() {
            let mut kept = Vec::new();
            for &id in &deleted {
                self.pace.acquire().await;
                let read = read_ledger_metadata(&zk, self.cfg, layout, id).await;
                if !verified_deleted(id, &read, &self.cfg.bookie_id) {
                    kept.push(id);
                }
            }
            for id in kept {
                deleted.remove(&id);
            }
        }
        drop(zk);
        if deleted.is_empty() {
            return Ok(());
        }
        log::info!(
            "gc: {} of {} local ledgers are deleted from the cluster: {:?}{}",
            deleted.len(),
            local.len(),
            deleted.iter().take(10).collect::<Vec<_>>(),
            if deleted.len() > 10 { " ..." } else { "" }
        );
        // 4. Each shard drops the ones it holds.
        self.drop_ledgers(deleted.into_iter().map(|id| id as i64).collect())
            .await;
        Ok(())
    }

    async fn local_ledgers(&self) -> Result<BTreeSet<u64>, String> {
        local_ledgers(self.shards).await
    }

    /// Has every shard drop `ids` (the one that holds each does); returns how many were held.
    async fn drop_ledgers(&self, ids: Vec<i64>) -> usize {
        if let Some(legacy) = self.legacy {
            // Java's files are never written: that a taken-over ledger is deleted is kept in
            // this bookie's own file, before any shard forgets the ledger.
            if let Err(e) = legacy.record_deleted(&ids) {
                log::error!("gc: {e}; the deleted ledgers are kept until the next collection");
                return 0;
            }
        }
        let mut held = 0;
        for shard in self.shards {
            let (tx, rx) = oneshot::channel();
            if shard
                .admin
                .send(AdminQuery::DeleteLedgers(ids.clone(), tx))
                .is_ok()
            {
                if let Ok(Ok(n)) = tokio::time::timeout(Duration::from_secs(30), rx).await {
                    held += n;
                }
            }
        }
        held
    }

    /// Java's `removeOverReplicatedledgers`: returns the ledgers dropped.
    async fn drop_overreplicated(
        &mut self,
        zk: &metadata::zookeeper::Client,
        layout: LedgerLayout,
        local: &BTreeSet<u64>,
    ) -> BTreeSet<u64> {
        let me = self.cfg.bookie_id.as_str();
        let host = underreplication::host_name();
        let mut dropped = BTreeSet::new();
        for &id in local {
            // A first look without the lock, to spare ZooKeeper a lock per ledger.
            self.pace.acquire().await;
            let read = read_ledger_metadata(zk, self.cfg, layout, id).await;
            if !overreplicated(id, &read, me) {
                continue;
            }
            match underreplication::is_locked(zk, self.cfg, id).await {
                Ok(false) => {}
                Ok(true) => {
                    log::info!("gc: ledger {id} is being re-replicated; not checked");
                    continue;
                }
                Err(e) => {
                    log::warn!("gc: ledger {id}: cannot check its replication lock: {e}");
                    continue;
                }
            }
            let lock = match underreplication::acquire(zk, self.cfg, id, &host).await {
                Ok(lock) => lock,
                Err(LockError::Held) => continue,
                Err(e) => {
                    log::warn!("gc: ledger {id}: cannot take its replication lock: {e}");
                    continue;
                }
            };
            // Again under the lock: autorecovery may have changed the ensembles meanwhile.
            self.pace.acquire().await;
            let read = read_ledger_metadata(zk, self.cfg, layout, id).await;
            if overreplicated(id, &read, me) && self.drop_ledgers(vec![id as i64]).await > 0 {
                dropped.insert(id);
            }
            if let Err(e) = underreplication::release(zk, lock).await {
                log::error!("gc: ledger {id}: cannot release its replication lock: {e}");
            }
        }
        dropped
    }
}

/// Whether a ledger's metadata makes its local copy over-replicated: closed (an open ledger's
/// ensemble may change again) and this bookie in none of its ensembles.
fn overreplicated(id: u64, read: &Result<Option<LedgerMetadata>, MetaError>, me: &str) -> bool {
    match read {
        Ok(Some(md)) => md.is_closed() && !md.has_bookie(me),
        // Deleted: the deleted-ledger scan takes it.
        Ok(None) => false,
        Err(e) => {
            log::warn!("gc: ledger {id}: cannot read its metadata: {e}");
            false
        }
    }
}

/// `verifyMetadataOnGC`: whether a ledger missing from the listing may go, by its znode read
/// again (Java: gone, or there without this bookie in any ensemble).
fn verified_deleted(id: u64, read: &Result<Option<LedgerMetadata>, MetaError>, me: &str) -> bool {
    match read {
        Ok(None) => true,
        Ok(Some(md)) => !md.has_bookie(me),
        Err(e) => {
            log::warn!("gc: ledger {id} is missing from the listing, but reading its metadata failed ({e}); kept");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metadata::ledger_metadata::LedgerState;

    fn md(state: LedgerState, ensembles: &[&[&str]]) -> Result<Option<LedgerMetadata>, MetaError> {
        let text = format!(
            "BookieMetadataFormatVersion\t2\nquorumSize: 2\nensembleSize: 2\nlength: 0\n\
             lastEntryId: 3\nstate: {}\n{}",
            match state {
                LedgerState::Open => "OPEN",
                LedgerState::InRecovery => "IN_RECOVERY",
                LedgerState::Closed => "CLOSED",
            },
            ensembles
                .iter()
                .enumerate()
                .map(|(i, e)| format!(
                    "segment {{ {} firstEntryId: {} }}\n",
                    e.iter()
                        .map(|b| format!("ensembleMember: \"{b}\" "))
                        .collect::<String>(),
                    i * 10
                ))
                .collect::<String>()
        );
        LedgerMetadata::parse(text.as_bytes()).map(Some)
    }

    #[test]
    fn overreplicated_rules() {
        let me = "me:3181";
        // Closed and moved off us in every ensemble: over-replicated.
        assert!(overreplicated(
            1,
            &md(LedgerState::Closed, &[&["a:1", "b:1"]]),
            me
        ));
        assert!(overreplicated(
            1,
            &md(LedgerState::Closed, &[&["a:1", "b:1"], &["a:1", "c:1"]]),
            me
        ));
        // We are in one ensemble (an earlier one still counts): keep.
        assert!(!overreplicated(
            1,
            &md(LedgerState::Closed, &[&[me, "b:1"], &["a:1", "b:1"]]),
            me
        ));
        // Not closed: the ensemble may change again, keep.
        assert!(!overreplicated(
            1,
            &md(LedgerState::Open, &[&["a:1", "b:1"]]),
            me
        ));
        assert!(!overreplicated(
            1,
            &md(LedgerState::InRecovery, &[&["a:1", "b:1"]]),
            me
        ));
        // Gone, or unreadable: not this pass's business.
        assert!(!overreplicated(1, &Ok(None), me));
        assert!(!overreplicated(1, &Err(MetaError::BadData("x".into())), me));
    }

    /// `isForceGCAllowWhenNoSpace` false: major compaction suspended above the warn
    /// threshold, minor too above the full one, both back below; true: nothing suspended, a
    /// forced collection asked for while a directory is above the warn threshold.
    #[test]
    fn disk_level_gates_compaction() {
        use crate::admin::readonly::DiskUsage;
        use crate::config::DiskConfig;
        use std::path::Path;
        let disk = DiskConfig::default();
        let links = GcLinks {
            metadata: None,
            shards: Arc::new(Vec::new()),
            state: Arc::new(BookieState::new(
                &disk,
                &[(Path::new("/d"), crate::admin::readonly::DirKind::Ledger)],
            )),
            metrics: Arc::new(Metrics::new(1)),
            legacy: None,
        };
        let set_usage = |used: f64| {
            let mut warned = false;
            links.state.check_disks(&disk, &mut warned, &mut |_| {
                Ok(DiskUsage {
                    total_bytes: 1000,
                    usable_bytes: ((1.0 - used) * 1000.0) as u64,
                })
            });
        };
        let mut settings = GcSettings {
            wait: Duration::from_secs(600),
            overreplicated_wait: Duration::ZERO,
            verify_metadata: false,
            metadata_op_rate: 1000,
            force_when_no_space: false,
            disk_check_interval: Duration::from_secs(10),
        };
        let ctl = &links.metrics.gc_control;
        let suspended = || {
            (
                ctl.disk_suspend_major.load(Ordering::Relaxed),
                ctl.disk_suspend_minor.load(Ordering::Relaxed),
            )
        };
        for (used, want) in [
            (0.5, (false, false)),
            (0.97, (true, true)),
            (0.5, (false, false)),
            (0.92, (true, false)),
            (0.97, (true, true)),
            (0.93, (true, false)),
            (0.2, (false, false)),
        ] {
            set_usage(used);
            assert_eq!(disk_gate(&settings, &links), None, "{used}");
            assert_eq!(suspended(), want, "{used}");
        }
        settings.force_when_no_space = true;
        set_usage(0.97);
        assert!(links.state.is_read_only());
        let forced = disk_gate(&settings, &links).expect("a forced collection");
        assert!(forced.force);
        assert_eq!(suspended(), (false, false));
        set_usage(0.92);
        assert!(disk_gate(&settings, &links).is_some());
        set_usage(0.5);
        assert_eq!(disk_gate(&settings, &links), None);
    }

    /// `gcMetadataOpRateLimit`: 20 reads at 100/s take about 0.2 s, the first at once.
    #[tokio::test]
    async fn metadata_reads_are_paced() {
        let mut pace = Pace::new(100);
        let start = tokio::time::Instant::now();
        pace.acquire().await;
        assert!(start.elapsed() < Duration::from_millis(5));
        for _ in 0..20 {
            pace.acquire().await;
        }
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(190), "{took:?}");
    }

    #[test]
    fn verify_metadata_rules() {
        let me = "me:3181";
        assert!(verified_deleted(1, &Ok(None), me), "no node: deleted");
        assert!(!verified_deleted(
            1,
            &md(LedgerState::Open, &[&[me, "b:1"]]),
            me
        ));
        assert!(verified_deleted(
            1,
            &md(LedgerState::Open, &[&["a:1", "b:1"]]),
            me
        ));
        assert!(!verified_deleted(
            1,
            &Err(MetaError::BadData("x".into())),
            me
        ));
        assert!(!verified_deleted(1, &Err(MetaError::Closed), me));
    }
}
