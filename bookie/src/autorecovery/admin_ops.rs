//! The two admin operations the autorecovery routes start and leave running, each on a thread
//! of its own with its own ZooKeeper session (Java runs them asynchronously too, and answers
//! the request at once):
//!
//! - recovering a bookie's data (`PUT /api/v1/autorecovery/bookie`, Java's
//!   `BookKeeperAdmin.recoverBookieData`): every ledger whose ensembles name the bookie gets its
//!   copies moved elsewhere, even if the bookie is alive; an open one is recovered (fenced and
//!   closed) first, as Java's admin does;
//! - decommissioning a bookie (`PUT /api/v1/autorecovery/decommission`, Java's
//!   `decommissionBookie`): refused while the bookie is registered; otherwise an audit is
//!   triggered, then it waits until no ledger names the bookie and no under-replication record
//!   lists it, and removes its cookie when asked.

use std::collections::BTreeSet;
use std::time::Duration;

use autorecovery::live::cluster::LiveCluster;
use autorecovery::placement::Rng;
use autorecovery::port::{Cluster, UnderReplication};
use autorecovery::recover::recover;
use autorecovery::settings::Settings;
use autorecovery::worker::{replicate_forcing, Outcome};
use metadata::MetadataConfig;

fn on_thread<F>(name: &str, f: F)
where
    F: FnOnce() -> Result<(), String> + Send + 'static,
{
    let name = name.to_string();
    let spawned = std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            if let Err(e) = f() {
                log::error!("{name}: {e}");
            }
        });
    if let Err(e) = spawned {
        log::error!("cannot start {}: {e}", "an admin operation");
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))
}

async fn open(cfg: &MetadataConfig) -> Result<LiveCluster, String> {
    let zk = metadata::zk::connect(cfg)
        .await
        .map_err(|e| e.to_string())?;
    LiveCluster::open(
        zk,
        cfg.clone(),
        &metadata::config::java_canonical_host_name(),
    )
    .await
}

/// Runs `work` on a cluster session of its own, on a thread of its own (the live cluster's
/// connections are not `Send`, the admin server's futures must be), and gives its result; a
/// request that outlives `deadline` is answered with an error while the thread finishes.
pub async fn on_cluster<T, F, Fut>(
    cfg: &MetadataConfig,
    deadline: Duration,
    work: F,
) -> Result<T, String>
where
    T: Send + 'static,
    F: FnOnce(LiveCluster) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let (tx, rx) = tokio::sync::oneshot::channel();
    let cfg = cfg.clone();
    std::thread::Builder::new()
        .name("admin-client".into())
        .spawn(move || {
            let result = runtime().and_then(|rt| {
                rt.block_on(async move {
                    let c = open(&cfg).await?;
                    work(c).await
                })
            });
            let _ = tx.send(result);
        })
        .map_err(|e| format!("cannot start an admin client thread: {e}"))?;
    match tokio::time::timeout(deadline, rx).await {
        Ok(Ok(result)) => result,
        Ok(Err(_)) => Err("the admin client thread ended without an answer".into()),
        Err(_) => Err(format!("no answer within {} s", deadline.as_secs())),
    }
}

/// Starts moving `bookie`'s copies of every ledger elsewhere.
pub fn recover_bookie_data(cfg: MetadataConfig, settings: Settings, bookie: String) {
    on_thread("recover-bookie-data", move || {
        runtime()?.block_on(async move {
            let c = open(&cfg).await?;
            let forced: BTreeSet<String> = [bookie.clone()].into_iter().collect();
            let mut rng = Rng::new(c.now_ms() as u64);
            let (mut moved, mut failed) = (0, 0);
            for id in c.ledger_ids().await? {
                let Some(v) = c.read_ledger(id).await? else {
                    continue;
                };
                if !v.metadata.has_bookie(&bookie) {
                    continue;
                }
                if !v.metadata.is_closed() {
                    recover(&c, id, &settings, &mut rng).await?;
                }
                match replicate_forcing(&c, id, &settings, &mut rng, &forced).await {
                    Outcome::Replicated(_) | Outcome::Deleted => moved += 1,
                    other => {
                        failed += 1;
                        log::warn!("recovering {bookie}'s data: ledger {id}: {other:?}");
                    }
                }
            }
            log::info!("recovered {bookie}'s data: {moved} ledgers moved, {failed} failed");
            Ok(())
        })
    });
}

/// Starts decommissioning `bookie` (it must be stopped).
pub fn decommission(cfg: MetadataConfig, bookie: String, delete_cookie: bool) {
    on_thread("decommission", move || {
        runtime()?.block_on(async move {
            let c = open(&cfg).await?;
            if c.registered().await?.is_available(&bookie) {
                return Err(format!(
                    "decommissioning {bookie}: it is still registered; stop it first"
                ));
            }
            // Java's triggerAudit: the delay written again with its own value.
            let delay = c.ur.lost_bookie_recovery_delay().await.map_err(|e| e.to_string())?.unwrap_or(0);
            c.ur.set_lost_bookie_recovery_delay(delay).await.map_err(|e| e.to_string())?;
            tokio::time::sleep(Duration::from_secs(30)).await;
            loop {
                let mut named = 0;
                for id in c.ledger_ids().await? {
                    if let Some(v) = c.read_ledger(id).await? {
                        if v.metadata.has_bookie(&bookie) {
                            named += 1;
                        }
                    }
                }
                let listed = c
                    .list()
                    .await?
                    .iter()
                    .filter(|(_, r)| r.replicas.contains(&bookie))
                    .count();
                if named == 0 && listed == 0 {
                    break;
                }
                log::info!("decommissioning {bookie}: {named} ledgers still name it, {listed} records list it");
                tokio::time::sleep(Duration::from_secs(3)).await;
            }
            log::info!("The ledgers stored in the given decommissioning bookie: {bookie} are properly replicated");
            if delete_cookie {
                metadata::cookie::delete_zk_cookie(&c.zk, &cfg, &bookie)
                    .await
                    .map_err(|e| e.to_string())?;
                log::info!("Cookie of the decommissioned bookie: {bookie} is deleted successfully");
            }
            Ok(())
        })
    });
}
