//! The autorecovery daemon: what `autoRecoveryDaemonEnabled=true` runs inside a bookie (and
//! `bookie autorecovery` alone), on a thread of its own with its own ZooKeeper session — never
//! on a shard. It stands for auditor (Java's election: one auditor among all of ours and
//! Java's), runs the auditor while elected, and runs a replication worker all along. A lost
//! session starts it over (new session, new vote); the locks and vote of the old one went with
//! it.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use metadata::underreplication::election::Elector;
use metadata::underreplication::manager::CheckKind;
use metadata::MetadataConfig;
use tokio::sync::watch;

use super::cluster::LiveCluster;
use crate::auditor::{audit, check_all, Act, AuditorState};
use crate::port::Cluster;
use crate::settings::Settings;
use crate::worker::Outcome;
use crate::worker_loop::{Step, WorkerLoop};

/// Which parts run (Java always runs both; the interop tier runs one to pair it with Java's
/// other part).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Both,
    AuditorOnly,
    WorkerOnly,
}

#[derive(Clone, Debug)]
pub struct DaemonConfig {
    pub metadata: MetadataConfig,
    /// The id this candidate votes with (the bookie's).
    pub bookie_id: String,
    /// The host name the worker's locks carry.
    pub lock_host: String,
    pub settings: Settings,
    pub role: Role,
}

/// What the daemon has done, for /metrics and the admin routes.
#[derive(Clone, Debug, Default)]
pub struct Status {
    pub running: bool,
    pub is_auditor: bool,
    pub audits: u64,
    pub lost_bookies: Vec<String>,
    pub ledgers_marked: u64,
    pub ledgers_replicated: u64,
    pub ledgers_recovered: u64,
    pub entries_copied: u64,
    pub bytes_copied: u64,
    pub failures: u64,
    pub last_error: Option<String>,
}

pub struct Daemon {
    stop: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
    pub status: Arc<Mutex<Status>>,
}

impl Daemon {
    /// Starts the daemon's thread.
    pub fn start(cfg: DaemonConfig) -> Result<Daemon, String> {
        let (stop, stopped) = watch::channel(false);
        let status = Arc::new(Mutex::new(Status {
            running: true,
            ..Status::default()
        }));
        let st = status.clone();
        let thread = std::thread::Builder::new()
            .name("autorecovery".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        log::error!("autorecovery: tokio runtime: {e}");
                        return;
                    }
                };
                rt.block_on(run(cfg, stopped, st.clone()));
                if let Ok(mut s) = st.lock() {
                    s.running = false;
                    s.is_auditor = false;
                }
            })
            .map_err(|e| format!("cannot start the autorecovery thread: {e}"))?;
        Ok(Daemon {
            stop,
            thread: Some(thread),
            status,
        })
    }

    pub fn status(&self) -> Status {
        self.status.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Stops it: the vote is withdrawn and the locks given back.
    pub fn stop(mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn run(cfg: DaemonConfig, mut stopped: watch::Receiver<bool>, status: Arc<Mutex<Status>>) {
    let mut backoff = Duration::from_millis(500);
    loop {
        tokio::select! {
            r = session(&cfg, &status) => {
                if let Err(e) = r {
                    log::warn!("autorecovery: {e}; starting over in {} ms", backoff.as_millis());
                    set(&status, |s| s.last_error = Some(e));
                }
            }
            _ = stopped.changed() => return,
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stopped.changed() => return,
        }
        backoff = (backoff * 2).min(Duration::from_secs(30));
    }
}

fn set(status: &Arc<Mutex<Status>>, f: impl FnOnce(&mut Status)) {
    if let Ok(mut s) = status.lock() {
        f(&mut s);
    }
}

/// One ZooKeeper session's run; returns when the session fails.
async fn session(cfg: &DaemonConfig, status: &Arc<Mutex<Status>>) -> Result<(), String> {
    let zk = metadata::zk::connect(&cfg.metadata)
        .await
        .map_err(|e| e.to_string())?;
    let cluster = LiveCluster::open(zk.clone(), cfg.metadata.clone(), &cfg.lock_host).await?;
    log::info!(
        "autorecovery: running as {} ({:?}), ledgers root {}",
        cfg.bookie_id,
        cfg.role,
        cfg.metadata.ledgers_root
    );
    let auditor = async {
        if cfg.role == Role::WorkerOnly {
            return std::future::pending::<Result<(), String>>().await;
        }
        let mut elector = Elector::new(zk.clone(), &cfg.metadata, &cfg.bookie_id);
        elector
            .wait_until_elected()
            .await
            .map_err(|e| e.to_string())?;
        log::info!("autorecovery: elected auditor");
        set(status, |s| s.is_auditor = true);
        let r = run_auditor(&cluster, &cfg.settings, status).await;
        set(status, |s| s.is_auditor = false);
        elector.resign().await;
        r
    };
    let worker = async {
        if cfg.role == Role::AuditorOnly {
            return std::future::pending::<Result<(), String>>().await;
        }
        run_worker(&cluster, &cfg.settings, status).await
    };
    tokio::select! {
        r = auditor => r,
        r = worker => r,
    }
}

async fn run_auditor(
    c: &LiveCluster,
    settings: &Settings,
    status: &Arc<Mutex<Status>>,
) -> Result<(), String> {
    c.ur.init_lost_bookie_recovery_delay(settings.lost_bookie_recovery_delay_s)
        .await
        .map_err(|e| e.to_string())?;
    let (mut delay, mut delay_version) =
        c.ur.lost_bookie_recovery_delay_versioned()
            .await
            .map_err(|e| e.to_string())?
            .unwrap_or((settings.lost_bookie_recovery_delay_s, -1));
    // 4.16+: every bookie with a cookie is known, so one down at the start is noticed.
    let mut known: BTreeSet<String> = metadata::cluster::list_all_bookies(&c.zk, &c.cfg)
        .await
        .map_err(|e| e.to_string())?
        .into_iter()
        .collect();
    known.extend(c.registered().await?.available());
    let mut state = AuditorState::new(known, delay);
    let now = c.now_ms();
    let mut next_bookie_check = now;
    let mut next_check_all = match (
        settings.check_all_interval_s,
        c.ur.check_time(CheckKind::AllLedgers).await,
    ) {
        (0, _) => i64::MAX,
        (i, Ok(Some(last))) => last + i as i64 * 1000,
        (_, _) => now,
    };
    loop {
        let now = c.now_ms();
        let mut run_audit = false;
        if let Some((d, v)) =
            c.ur.lost_bookie_recovery_delay_versioned()
                .await
                .map_err(|e| e.to_string())?
        {
            if v != delay_version {
                delay_version = v;
                delay = d;
                run_audit |= state.on_delay_changed(d, now) == Act::AuditNow;
            }
        }
        if c.ur.is_enabled().await.map_err(|e| e.to_string())? {
            let available = c.registered().await?.available();
            run_audit |= state.on_bookies(&available, delay, now) == Act::AuditNow;
            run_audit |= state.take_due(now);
            if now >= next_bookie_check && state.pending_at().is_none() {
                run_audit = true;
                next_bookie_check = now + settings.bookie_check_interval_s.max(1) as i64 * 1000;
            }
            if run_audit {
                let report = audit(c, c, settings.store_mark_time).await?;
                set(status, |s| {
                    s.audits += 1;
                    s.lost_bookies = report.lost.clone();
                    s.ledgers_marked += report.marked as u64;
                });
            }
            if now >= next_check_all {
                let marked = check_all(
                    c,
                    c,
                    settings.verification_percentage,
                    settings.store_mark_time,
                )
                .await?;
                c.ur.set_check_time(CheckKind::AllLedgers, c.now_ms())
                    .await
                    .map_err(|e| e.to_string())?;
                log::info!("autorecovery: checked every ledger; {marked} marked");
                next_check_all = c.now_ms() + settings.check_all_interval_s as i64 * 1000;
            }
        }
        c.sleep_ms(1000).await;
    }
}

async fn run_worker(
    c: &LiveCluster,
    settings: &Settings,
    status: &Arc<Mutex<Status>>,
) -> Result<(), String> {
    let mut w = WorkerLoop::new(settings.clone(), c.now_ms() as u64);
    let result = loop {
        match w.step(c, c).await {
            Step::Worked(ledger, outcome) => set(status, |s| match &outcome {
                Outcome::Replicated(st) => {
                    s.ledgers_replicated += 1;
                    s.entries_copied += st.entries;
                    s.bytes_copied += st.bytes;
                    log::info!(
                        "autorecovery: ledger {ledger} fully replicated ({} entries copied)",
                        st.entries
                    );
                }
                Outcome::OpenLedger(st) => {
                    s.entries_copied += st.entries;
                    s.bytes_copied += st.bytes;
                    log::info!(
                        "autorecovery: ledger {ledger} is open with a lost bookie: recovering it in {} ms unless its writer does",
                        settings.open_ledger_grace_ms
                    );
                }
                Outcome::Deleted => {}
                Outcome::Failed(e) => {
                    s.failures += 1;
                    s.last_error = Some(e.clone());
                    log::warn!("autorecovery: ledger {ledger}: {e}");
                }
            }),
            Step::Recovered(ledger, r) => set(status, |s| match r {
                Ok(()) => s.ledgers_recovered += 1,
                Err(e) => {
                    s.failures += 1;
                    log::warn!("autorecovery: recovering ledger {ledger}: {e}");
                    s.last_error = Some(e);
                }
            }),
            Step::Idle | Step::Disabled => c.sleep_ms(1000).await,
            Step::Error(e) if e.contains("SessionExpired") || e.contains("session") => {
                break Err(e)
            }
            Step::Error(e) => {
                log::warn!("autorecovery: {e}");
                c.sleep_ms(settings.backoff_ms).await;
            }
        }
    };
    w.release_all(c).await;
    result
}
