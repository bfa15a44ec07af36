//! The garbage-collection driver: every `gcWaitTime` (or at once when forced over HTTP) it
//! finds the ledgers deleted from the cluster and has the shards drop them, then asks every
//! shard to collect garbage (`compaction.rs`, on its flush thread).
//!
//! Deleted ledgers (bookie-semantics.md §4.7, Java's `ScanAndCompareGarbageCollector`): the
//! local ledger ids are snapshotted from the shards *before* ZooKeeper is listed, so a ledger
//! created meanwhile is never a candidate; `metadata::ledgers::gc_decision` refuses a failed
//! listing and an empty listing while local ledgers exist. Without a metadata store
//! (standalone) nothing is ever deleted, and only compaction runs.
//!
//! Its own thread with a current-thread runtime and its own ZooKeeper session per cycle: a slow
//! listing of a large cluster never holds up registration or the admin server.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use metadata::MetadataConfig;
use tokio::sync::{oneshot, Notify};

use crate::mailbox::{AdminQuery, GcRequest, ShardHandle};

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

/// Starts the driver. `metadata`: the cluster to list ledgers from (None: standalone).
pub fn start(
    wait: Duration,
    metadata: Option<MetadataConfig>,
    shards: Arc<Vec<ShardHandle>>,
) -> Result<(GcDriver, GcTrigger), String> {
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
            rt.block_on(async {
                loop {
                    tokio::select! {
                        _ = &mut stop_rx => break,
                        _ = tokio::time::sleep(wait) => {}
                        _ = shared.wake.notified() => {}
                    }
                    // Requests that came in meanwhile are one (or none: the periodic run).
                    let req = shared
                        .pending
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .take()
                        .unwrap_or_default();
                    if let Some(cfg) = &metadata {
                        if let Err(e) = delete_deleted_ledgers(cfg, &shards).await {
                            log::warn!("gc: deleted-ledger scan skipped: {e}");
                        }
                    }
                    for shard in shards.iter() {
                        let _ = shard.admin.send(AdminQuery::Gc(req));
                    }
                    shared.forcing.store(false, Ordering::Release);
                }
            });
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

/// One scan: local ids, then the cluster's, then the difference dropped from the shards.
async fn delete_deleted_ledgers(
    cfg: &MetadataConfig,
    shards: &[ShardHandle],
) -> Result<(), String> {
    // 1. The local snapshot first (module docs).
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
    if local.is_empty() {
        return Ok(());
    }
    // 2. The cluster's ledgers.
    let zk = metadata::zk::connect(cfg)
        .await
        .map_err(|e| format!("cannot connect to ZooKeeper: {e}"))?;
    let listing = metadata::ledgers::live_ledgers(&zk, cfg, None).await;
    let deleted = metadata::ledgers::gc_decision(&local, listing.as_ref(), false)
        .map_err(|e| e.to_string())?;
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
    // 3. Each shard drops the ones it holds.
    let ids: Vec<i64> = deleted.into_iter().map(|id| id as i64).collect();
    for shard in shards {
        let (tx, rx) = oneshot::channel();
        if shard
            .admin
            .send(AdminQuery::DeleteLedgers(ids.clone(), tx))
            .is_ok()
        {
            let _ = tokio::time::timeout(Duration::from_secs(30), rx).await;
        }
    }
    Ok(())
}
