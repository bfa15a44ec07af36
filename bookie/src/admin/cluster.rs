//! Cluster mode: the bookie in ZooKeeper (the `metadata` crate), on a small control-plane thread
//! with its own tokio runtime, never on a shard thread.
//!
//! Start-up, like Java's bookie: before the shards open the directories, the cookies are checked
//! (and stamped for a new bookie) against ZooKeeper's and the cluster's instance id — a mismatch
//! refuses the start with exit code 1 (`INVALID_CONF`). After every shard has replayed its
//! journal and listens, the bookie registers under `<root>/available[/readonly]/<id>`, follows
//! the read-only flag of [`BookieState`], and stops the bookie with exit code 4 (`ZK_REG_FAIL`)
//! when the registration is lost for good: ZooKeeper answered and refused it (cluster metadata
//! gone, the id held by a live session). A ZooKeeper outage, however long, does not stop the
//! bookie: the registration follows the server's verdict on the session (`metadata::registration`).
//! On shutdown it unregisters before the shards stop.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{mpsc as std_mpsc, Arc};
use std::time::Duration;

use metadata::cookie::{self, CookieDirs, CookieOptions};
use metadata::{
    cluster, derive_bookie_address, zk, BookieIdConfig, BookieServiceInfo, MetaError,
    MetadataConfig, RegState, Registration, EXIT_ZK_REG_FAIL,
};
use tokio::sync::oneshot;

use crate::admin::readonly::BookieState;
use crate::config::{BookieConfig, ClusterConfig};

/// A start-up failure with the exit code Java would use.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    fn meta(what: &str, e: MetaError) -> Failure {
        Failure {
            code: u8::try_from(e.exit_code()).unwrap_or(1),
            message: format!("{what}: {e}"),
        }
    }
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure { code: 1, message }
    }
}

/// The value of a bk_server.conf metadata key, as `MetadataConfig::from_keys` reads it.
pub fn conf_key(c: &ClusterConfig, key: &str) -> Option<String> {
    match key {
        "metadataServiceUri" => c.metadata_service_uri.clone(),
        "zkServers" => c.zk_servers.clone(),
        "zkLedgersRootPath" => Some(c.zk_ledgers_root_path.clone()),
        "zkTimeout" => Some(c.zk_timeout.as_millis().to_string()),
        "ledgerManagerType" => c.ledger_manager_type.clone(),
        _ => None,
    }
}

/// The metadata configuration of this bookie: where ZooKeeper is, and its id.
pub fn metadata_config(config: &BookieConfig) -> Result<MetadataConfig, Failure> {
    let c = &config.cluster;
    let addr = derive_bookie_address(&BookieIdConfig {
        bookie_id: c.bookie_id.clone(),
        advertised_address: c.advertised_address.clone(),
        use_host_name_as_bookie_id: c.use_host_name_as_bookie_id,
        use_short_host_name: c.use_short_host_name,
        listening_interface: c.listening_interface.clone(),
        bookie_port: config.port,
        allow_loopback: c.allow_loopback,
        allow_ephemeral_ports: c.allow_ephemeral_ports,
    })
    .map_err(|e| Failure::meta("bookie id", e))?;
    let http_host = if config.http.host == "0.0.0.0" {
        addr.host.clone()
    } else {
        config.http.host.clone()
    };
    let http = config
        .http
        .enabled
        .then_some((http_host.as_str(), config.http.port));
    // Java's BookieService.publishInfo: the `tls` extension when tlsProviderFactoryClass is set.
    let info = BookieServiceInfo::for_bookie(&addr.host, addr.port, config.tls.enabled(), http);
    MetadataConfig::from_keys(|k| conf_key(c, k), addr.id, info)
        .map_err(|e| Failure::meta("metadata configuration", e))
}

enum Report {
    /// Cookies verified or stamped.
    Checked,
    /// Registered, in the given mode.
    Registered,
    Failed(Failure),
}

/// The running control-plane thread.
pub struct ControlPlane {
    reports: std_mpsc::Receiver<Report>,
    register: Option<oneshot::Sender<Arc<BookieState>>>,
    shutdown: Option<oneshot::Sender<()>>,
    exit_code: Arc<AtomicU8>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Directories as the cookie names them: as configured.
fn display_all(dirs: &[std::path::PathBuf]) -> Vec<String> {
    dirs.iter().map(|d| d.display().to_string()).collect()
}

/// The directories the cookies must name and how strictly (`allowStorageExpansion`): the
/// start-up check and the admin server's `expand_storage` make the same one.
pub fn cookie_check(config: &BookieConfig) -> (CookieDirs, CookieOptions) {
    let dirs = CookieDirs {
        journal_dirs: display_all(&config.journal_dirs),
        ledger_dirs: display_all(&config.ledger_dirs),
        index_dirs: config.index_dirs.as_deref().map(display_all),
    };
    let options = CookieOptions {
        allow_storage_expansion: config.cluster.allow_storage_expansion,
        ..CookieOptions::default()
    };
    (dirs, options)
}

impl ControlPlane {
    /// Starts the thread and checks the cookies; returns once they are verified (or stamped).
    /// To be called before the shards open the directories.
    pub fn start(config: &BookieConfig) -> Result<ControlPlane, Failure> {
        let cfg = metadata_config(config)?;
        log::info!(
            "cluster mode: bookie id {} in ZooKeeper {}{}",
            cfg.bookie_id,
            cfg.zk_servers,
            cfg.ledgers_root
        );
        let (dirs, cookie_options) = cookie_check(config);
        let (report_tx, reports) = std_mpsc::channel();
        let (register, register_rx) = oneshot::channel();
        let (shutdown, shutdown_rx) = oneshot::channel();
        let exit_code = Arc::new(AtomicU8::new(0));
        let code = exit_code.clone();
        let thread = std::thread::Builder::new()
            .name("control-plane".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = report_tx.send(Report::Failed(Failure {
                            code: 1,
                            message: format!("cannot build the control-plane runtime: {e}"),
                        }));
                        return;
                    }
                };
                rt.block_on(control_main(
                    cfg,
                    dirs,
                    cookie_options,
                    report_tx,
                    register_rx,
                    shutdown_rx,
                    code,
                ));
            })
            .map_err(|e| Failure {
                code: 1,
                message: format!("cannot start the control-plane thread: {e}"),
            })?;
        let mut cp = ControlPlane {
            reports,
            register: Some(register),
            shutdown: Some(shutdown),
            exit_code,
            thread: Some(thread),
        };
        match cp.next_report() {
            Report::Checked => Ok(cp),
            Report::Failed(f) => Err(f),
            Report::Registered => unreachable!("registered before the cookie check"),
        }
    }

    fn next_report(&mut self) -> Report {
        self.reports.recv().unwrap_or_else(|_| {
            Report::Failed(Failure {
                code: EXIT_ZK_REG_FAIL as u8,
                message: "the control-plane thread died".into(),
            })
        })
    }

    /// Registers the bookie (read-only if `state` is) and follows its read-only flag; returns
    /// once registered.
    pub fn register(&mut self, state: Arc<BookieState>) -> Result<(), Failure> {
        if let Some(tx) = self.register.take() {
            let _ = tx.send(state);
        }
        match self.next_report() {
            Report::Registered => Ok(()),
            Report::Failed(f) => Err(f),
            Report::Checked => unreachable!("a second cookie report"),
        }
    }

    /// The exit code the control plane asked for when it stopped the bookie (0: none).
    pub fn exit_code(&self) -> u8 {
        self.exit_code.load(Ordering::Acquire)
    }

    /// Unregisters (deletes the registration node) and joins the thread.
    pub fn stop(mut self) {
        self.stop_inner();
    }

    fn stop_inner(&mut self) {
        self.register.take();
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop_inner();
    }
}

async fn control_main(
    cfg: MetadataConfig,
    dirs: CookieDirs,
    cookie_options: CookieOptions,
    reports: std_mpsc::Sender<Report>,
    register: oneshot::Receiver<Arc<BookieState>>,
    mut shutdown: oneshot::Receiver<()>,
    exit_code: Arc<AtomicU8>,
) {
    // Cookies: against the cluster's instance id and ZooKeeper's copy.
    let checked = async {
        let client = zk::connect(&cfg)
            .await
            .map_err(|e| Failure::meta("cannot connect to ZooKeeper", e))?;
        let instance_id = cluster::read_instance_id(&client, &cfg)
            .await
            .map_err(|e| Failure::meta("cannot read the cluster instance id", e))?;
        // Pulsar's cluster setup writes no `<root>/LAYOUT`; a Java bookie writes it when it
        // builds its ledger manager (tools and old clients look for it). So do we; a layout
        // that contradicts the configured ledger manager stops the start.
        cluster::ensure_layout(&client, &cfg)
            .await
            .map_err(|e| Failure::meta("cannot check the cluster's ledger layout", e))?;
        let outcome =
            cookie::validate_and_stamp(&client, &cfg, &dirs, instance_id, &cookie_options)
                .await
                .map_err(|e| Failure::meta("cookie check failed", e))?;
        log::info!("cookies: {outcome:?}");
        Ok::<(), Failure>(())
    }
    .await;
    if let Err(f) = checked {
        let _ = reports.send(Report::Failed(f));
        return;
    }
    let _ = reports.send(Report::Checked);
    // Registration, once the shards serve.
    let state = tokio::select! {
        s = register => match s {
            Ok(s) => s,
            Err(_) => return,
        },
        _ = &mut shutdown => return,
    };
    let mut read_only = state.subscribe();
    let ro = *read_only.borrow_and_update();
    let reg = match Registration::start(cfg.clone(), ro).await {
        Ok(r) => r,
        Err(e) => {
            let _ = reports.send(Report::Failed(Failure::meta(
                "cannot register in ZooKeeper",
                e,
            )));
            return;
        }
    };
    log::info!(
        "registered as {} in {}",
        reg.bookie_id(),
        cfg.registration_path(ro)
    );
    let _ = reports.send(Report::Registered);
    let mut reg_state = reg.watch_state();
    let mut follow_read_only = true;
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            changed = read_only.changed(), if follow_read_only => {
                if changed.is_err() {
                    follow_read_only = false;
                    continue;
                }
                let ro = *read_only.borrow_and_update();
                match reg.set_read_only(ro).await {
                    Ok(()) => log::info!(
                        "registration moved to {}",
                        cfg.registration_path(ro)
                    ),
                    Err(e) => log::error!("cannot move the registration (read-only {ro}): {e}"),
                }
            }
            changed = reg_state.changed() => {
                if changed.is_err() {
                    break;
                }
                let now = reg_state.borrow_and_update().clone();
                if let RegState::Failed(why) = now {
                    log::error!("ZooKeeper registration failed: {why}");
                    exit_code.store(EXIT_ZK_REG_FAIL as u8, Ordering::Release);
                    state.request_stop(format!("ZooKeeper registration lost: {why}"));
                    // Keep the handle until the main thread stops us.
                    let _ = (&mut shutdown).await;
                    return;
                }
            }
        }
    }
    match tokio::time::timeout(Duration::from_secs(10), reg.shutdown()).await {
        Ok(Ok(())) => log::info!("unregistered from ZooKeeper"),
        Ok(Err(e)) => log::warn!("unregistering from ZooKeeper: {e}"),
        Err(_) => log::warn!("unregistering from ZooKeeper timed out"),
    }
}
