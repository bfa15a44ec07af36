//! The bookie's registration: an ephemeral `<root>/available/<id>` (writable) or
//! `<root>/available/readonly/<id>` (read-only) carrying the `BookieServiceInfoFormat` payload,
//! kept alive by a task on the control-plane tokio runtime.
//!
//! Follows `ZKRegistrationManager` / `BookieStateManager`:
//! - a node of the same path owned by *another* session (a previous incarnation that crashed
//!   less than a session timeout ago) is watched and waited for up to the session timeout; if
//!   it does not go away registration fails ([`MetaError::StaleRegistration`]); a node owned by
//!   our own session counts as registered;
//! - RW → RO creates the RO node, then deletes the RW node; RO → RW creates the RW node, then
//!   deletes the RO node: briefly in both lists, never in neither;
//! - on session expiry a new session is opened and the node re-created in the current mode
//!   (waiting out the old node as above); if that does not succeed within twice the session
//!   timeout the state becomes [`RegState::Failed`] and the bookie should exit with
//!   [`crate::EXIT_ZK_REG_FAIL`] (4), as Java does;
//! - after a reconnect within the same session (e.g. ZooKeeper restarted) the node is checked
//!   and re-created if it is gone;
//! - [`Registration::shutdown`] deletes the node before closing the session (Java only closes
//!   the session; deleting first is what the spec allows as "better").

use std::sync::{Arc, Mutex};
use std::time::Duration;

use log::{info, warn};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::{timeout_at, Instant};
use zookeeper_client::{Client, Error as ZkError, SessionInfo, SessionState};

use crate::cluster;
use crate::config::MetadataConfig;
use crate::error::{MetaError, Result};
use crate::zk::{self, EPHEMERAL};

/// Registration state as seen by the bookie (Java's `bookie_SERVER_STATUS`: 1 / 0 / -1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegState {
    /// Not (or no longer) registered; re-registration may be in progress.
    Unregistered,
    /// Registered under `<root>/available/<id>`.
    Writable,
    /// Registered under `<root>/available/readonly/<id>`.
    ReadOnly,
    /// Re-registration after session expiry failed: exit with code 4.
    Failed(String),
    /// [`Registration::shutdown`] ran.
    Stopped,
}

enum Cmd {
    SetReadOnly(bool, oneshot::Sender<Result<()>>),
    Shutdown(oneshot::Sender<Result<()>>),
}

/// Handle of a running registration. Dropping it closes the session (the node disappears).
pub struct Registration {
    cmd: mpsc::UnboundedSender<Cmd>,
    state: watch::Receiver<RegState>,
    task: Option<JoinHandle<()>>,
    bookie_id: String,
    session: Arc<Mutex<SessionInfo>>,
}

impl Registration {
    /// Connects, checks that `<root>` exists, ensures `<root>/available/readonly`, registers in
    /// the given mode (waiting out a stale node) and starts the keeper task. Returns once
    /// registered; errors map to exit code 4 ([`MetaError::exit_code`]).
    pub async fn start(cfg: MetadataConfig, read_only: bool) -> Result<Registration> {
        if cfg.bookie_id.is_empty() {
            return Err(MetaError::Config("no bookie id to register".into()));
        }
        let zk = zk::connect(&cfg).await?;
        cluster::check_cluster_exists(&zk, &cfg).await?;
        register(&zk, &cfg, read_only).await?;
        let initial = if read_only {
            RegState::ReadOnly
        } else {
            RegState::Writable
        };
        let (state_tx, state_rx) = watch::channel(initial);
        let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
        let bookie_id = cfg.bookie_id.clone();
        let session = Arc::new(Mutex::new(zk.session().clone()));
        let keeper = Keeper {
            cfg,
            zk,
            read_only,
            state: state_tx,
            session: session.clone(),
        };
        let task = tokio::spawn(keeper.run(cmd_rx));
        Ok(Registration {
            cmd: cmd_tx,
            state: state_rx,
            task: Some(task),
            bookie_id,
            session,
        })
    }

    /// The registered bookie id.
    pub fn bookie_id(&self) -> &str {
        &self.bookie_id
    }

    /// The ZooKeeper session currently holding the registration (id and password); tests use
    /// it to expire the session on purpose.
    pub fn session(&self) -> SessionInfo {
        match self.session.lock() {
            Ok(s) => s.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Current state.
    pub fn state(&self) -> RegState {
        self.state.borrow().clone()
    }

    /// A receiver to watch state changes (e.g. exit on [`RegState::Failed`]).
    pub fn watch_state(&self) -> watch::Receiver<RegState> {
        self.state.clone()
    }

    /// Moves the registration between the writable and the read-only list. If creating the
    /// target node fails the error is returned and the old node is left in place.
    pub async fn set_read_only(&self, read_only: bool) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        self.cmd
            .send(Cmd::SetReadOnly(read_only, tx))
            .map_err(|_| MetaError::Closed)?;
        rx.await.map_err(|_| MetaError::Closed)?
    }

    /// Deletes the registration node and closes the session.
    pub async fn shutdown(mut self) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        self.cmd
            .send(Cmd::Shutdown(tx))
            .map_err(|_| MetaError::Closed)?;
        let r = rx.await.map_err(|_| MetaError::Closed)?;
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
        r
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

/// Registers `cfg.bookie_id` in the requested list and removes it from the other one (only
/// if the other node is ours).
pub(crate) async fn register(zk: &Client, cfg: &MetadataConfig, read_only: bool) -> Result<()> {
    let data = cfg.service_info.encode();
    if read_only {
        zk::ensure_node(zk, &cfg.readonly_path(), &[]).await?;
    }
    create_ephemeral_waiting(
        zk,
        &cfg.registration_path(read_only),
        &data,
        cfg.session_timeout,
    )
    .await?;
    delete_if_ours(zk, &cfg.registration_path(!read_only)).await
}

async fn delete_if_ours(zk: &Client, path: &str) -> Result<()> {
    match zk.check_stat(path).await {
        Ok(Some(stat)) if stat.ephemeral_owner == zk.session_id().0 => {
            match zk.delete(path, None).await {
                Ok(()) | Err(ZkError::NoNode) => Ok(()),
                Err(e) => Err(MetaError::zk(format!("delete {path}"), e)),
            }
        }
        Ok(_) => Ok(()),
        Err(e) => Err(MetaError::zk(format!("stat {path}"), e)),
    }
}

/// `checkRegNodeAndWaitExpired` + create: waits up to `wait` for a node owned by another
/// session to disappear, then creates our ephemeral node.
async fn create_ephemeral_waiting(
    zk: &Client,
    path: &str,
    data: &[u8],
    wait: Duration,
) -> Result<()> {
    let deadline = Instant::now() + wait;
    loop {
        let (stat, watcher) = zk
            .check_and_watch_stat(path)
            .await
            .map_err(|e| MetaError::zk(format!("stat {path}"), e))?;
        match stat {
            Some(s) if s.ephemeral_owner == zk.session_id().0 => return Ok(()),
            Some(s) => {
                info!(
                    "registration node {path} exists (owner session {:#x}); waiting up to {} ms for it to expire",
                    s.ephemeral_owner,
                    wait.as_millis()
                );
                if timeout_at(deadline, watcher.changed()).await.is_err() {
                    return Err(MetaError::StaleRegistration {
                        path: path.to_string(),
                        waited_ms: wait.as_millis() as u64,
                    });
                }
            }
            None => match zk.create(path, data, &EPHEMERAL).await {
                Ok(_) => return Ok(()),
                Err(ZkError::NodeExists) if Instant::now() < deadline => continue,
                Err(ZkError::NodeExists) => {
                    return Err(MetaError::StaleRegistration {
                        path: path.to_string(),
                        waited_ms: wait.as_millis() as u64,
                    })
                }
                Err(ZkError::NoNode) => {
                    return Err(MetaError::ClusterNotInitialized(format!(
                        "{path} (parent missing)"
                    )))
                }
                Err(e) => return Err(MetaError::zk(format!("create {path}"), e)),
            },
        }
    }
}

struct Keeper {
    cfg: MetadataConfig,
    zk: Client,
    read_only: bool,
    state: watch::Sender<RegState>,
    session: Arc<Mutex<SessionInfo>>,
}

impl Keeper {
    fn registered_state(&self) -> RegState {
        if self.read_only {
            RegState::ReadOnly
        } else {
            RegState::Writable
        }
    }

    async fn run(mut self, mut cmds: mpsc::UnboundedReceiver<Cmd>) {
        let mut session = self.zk.state_watcher();
        loop {
            tokio::select! {
                cmd = cmds.recv() => match cmd {
                    None => return, // handle dropped: dropping the client closes the session
                    Some(Cmd::SetReadOnly(ro, reply)) => {
                        let r = if ro == self.read_only { Ok(()) } else { register(&self.zk, &self.cfg, ro).await };
                        if r.is_ok() {
                            self.read_only = ro;
                            let _ = self.state.send(self.registered_state());
                        }
                        let _ = reply.send(r);
                    }
                    Some(Cmd::Shutdown(reply)) => {
                        let path = self.cfg.registration_path(self.read_only);
                        let r = delete_if_ours(&self.zk, &path).await;
                        let _ = self.state.send(RegState::Stopped);
                        let _ = reply.send(r);
                        return;
                    }
                },
                st = session.changed() => match st {
                    SessionState::SyncConnected => {
                        // Same session after a reconnect: make sure our node survived.
                        if let Err(e) = register(&self.zk, &self.cfg, self.read_only).await {
                            warn!("re-checking registration after reconnect failed: {e}");
                        }
                    }
                    SessionState::Disconnected | SessionState::ConnectedReadOnly => {
                        info!("ZooKeeper connection lost; session {} kept, still serving", self.zk.session_id());
                    }
                    SessionState::Expired | SessionState::Closed | SessionState::AuthFailed => {
                        warn!("ZooKeeper session {} ended ({st:?}); re-registering", self.zk.session_id());
                        let _ = self.state.send(RegState::Unregistered);
                        match self.reestablish().await {
                            Ok(()) => {
                                session = self.zk.state_watcher();
                                let _ = self.state.send(self.registered_state());
                                info!("re-registered {} with session {}", self.cfg.bookie_id, self.zk.session_id());
                            }
                            Err(e) => {
                                warn!("re-registration failed: {e}");
                                let _ = self.state.send(RegState::Failed(e.to_string()));
                                return;
                            }
                        }
                    }
                },
            }
        }
    }

    /// New session + registration within twice the session timeout.
    async fn reestablish(&mut self) -> Result<()> {
        let deadline = Instant::now() + self.cfg.session_timeout * 2;
        let mut last = None;
        while Instant::now() < deadline {
            let attempt = async {
                let zk = zk::connect(&self.cfg).await?;
                register(&zk, &self.cfg, self.read_only).await?;
                Ok::<Client, MetaError>(zk)
            };
            match timeout_at(deadline, attempt).await {
                Ok(Ok(zk)) => {
                    match self.session.lock() {
                        Ok(mut s) => *s = zk.session().clone(),
                        Err(p) => *p.into_inner() = zk.session().clone(),
                    }
                    self.zk = zk;
                    return Ok(());
                }
                Ok(Err(e)) => {
                    last = Some(e.to_string());
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(_) => break,
            }
        }
        Err(MetaError::RegistrationLost(format!(
            "could not re-register within {} ms: {}",
            (self.cfg.session_timeout * 2).as_millis(),
            last.unwrap_or_else(|| "timed out".into())
        )))
    }
}
