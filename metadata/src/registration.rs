//! The bookie's registration: an ephemeral `<root>/available/<id>` (writable) or
//! `<root>/available/readonly/<id>` (read-only) carrying the `BookieServiceInfoFormat` payload,
//! kept alive by a task on the control-plane tokio runtime.
//!
//! Follows `ZKRegistrationManager` / `BookieStateManager`:
//! - a node of the same path owned by *another* session (a previous incarnation that crashed
//!   less than a session timeout ago) is watched and waited for up to [`stale_node_wait`]
//!   (twice the session timeout plus 5 s; Java waits one session timeout, which a bookie
//!   restarted at once after a SIGKILL often does not outlast); a node still there then belongs
//!   to a live session, another bookie with our id, and registration fails
//!   ([`MetaError::StaleRegistration`]); a node owned by our own session counts as registered;
//! - RW → RO creates the RO node, then deletes the RW node; RO → RW creates the RW node, then
//!   deletes the RO node: briefly in both lists, never in neither;
//! - the session is expired by the server, never by us: `zookeeper-client` gives a session up
//!   on its own after 1.4 session timeouts without a server, where Java's client keeps trying
//!   until a server answers. When it does, the keeper reconnects to the same session; if a
//!   server says it is still alive nothing changed (the node is ours), if a server says it
//!   expired a new session is opened and the node re-created in the current mode (waiting out
//!   a node of another session as above). While no server answers the registration stays as
//!   it was and the bookie keeps serving, however long that lasts. Only a refusal from
//!   ZooKeeper (cluster metadata gone, the id held by a live session) makes the state
//!   [`RegState::Failed`], on which the bookie exits with [`crate::EXIT_ZK_REG_FAIL`] (4), as
//!   Java does;
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
        stale_wait_for(zk, cfg),
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

/// How much longer than twice the session timeout a node owned by another session is waited for.
const STALE_NODE_MARGIN: Duration = Duration::from_secs(5);

/// How often a node owned by another session is looked at again while waiting, besides the
/// deletion watch.
const STALE_NODE_RECHECK: Duration = Duration::from_secs(1);

/// Pause between two attempts to reach ZooKeeper while it is unreachable.
const RETRY_EVERY: Duration = Duration::from_millis(500);

/// How often a ZooKeeper outage is logged again while it lasts.
const OUTAGE_LOG_EVERY: Duration = Duration::from_secs(30);

/// How long a registration node owned by another session is waited for before that session is
/// taken for a live bookie with the same id: twice the session timeout plus 5 s.
///
/// A session whose client died (SIGKILL, power loss) is expired by the server one session
/// timeout after its last heartbeat, rounded up to the server's tick, and its ephemeral nodes go
/// with it; the previous incarnation of this bookie asked for the same timeout as we do, so its
/// node is gone well within this bound. A node still there afterwards belongs to a session that
/// keeps heartbeating: another bookie running with our id.
pub fn stale_node_wait(session_timeout: Duration) -> Duration {
    session_timeout * 2 + STALE_NODE_MARGIN
}

/// The wait of [`stale_node_wait`] for this session: the timeout asked for, or the one the
/// server granted when that is longer.
fn stale_wait_for(zk: &Client, cfg: &MetadataConfig) -> Duration {
    stale_node_wait(cfg.session_timeout.max(zk.session_timeout()))
}

/// `checkRegNodeAndWaitExpired` + create: waits up to `wait` for a node owned by another
/// session to disappear, then creates our ephemeral node.
async fn create_ephemeral_waiting(
    zk: &Client,
    path: &str,
    data: &[u8],
    wait: Duration,
) -> Result<()> {
    let started = Instant::now();
    let deadline = started + wait;
    let mut waited_for = None;
    loop {
        let (stat, watcher) = zk
            .check_and_watch_stat(path)
            .await
            .map_err(|e| MetaError::zk(format!("stat {path}"), e))?;
        match stat {
            Some(s) if s.ephemeral_owner == zk.session_id().0 => return Ok(()),
            Some(s) => {
                if Instant::now() >= deadline {
                    return Err(MetaError::StaleRegistration {
                        path: path.to_string(),
                        owner: s.ephemeral_owner,
                        waited_ms: wait.as_millis() as u64,
                    });
                }
                if waited_for != Some(s.ephemeral_owner) {
                    info!(
                        "registration node {path} is held by ZooKeeper session {:#x} (a previous \
                         run of this bookie?); waiting up to {} ms for ZooKeeper to expire that \
                         session",
                        s.ephemeral_owner,
                        wait.as_millis()
                    );
                    waited_for = Some(s.ephemeral_owner);
                }
                let recheck = deadline.min(Instant::now() + STALE_NODE_RECHECK);
                let _ = timeout_at(recheck, watcher.changed()).await;
            }
            None => match zk.create(path, data, &EPHEMERAL).await {
                Ok(_) => {
                    if let Some(old) = waited_for {
                        info!(
                            "the node of session {old:#x} went away after {} ms; registered {path}",
                            started.elapsed().as_millis()
                        );
                    }
                    return Ok(());
                }
                // Created by someone else meanwhile: look at its owner again.
                Err(ZkError::NodeExists) => continue,
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

/// Errors that say ZooKeeper could not be asked, as opposed to an answer that refuses.
fn is_unreachable(e: &MetaError) -> bool {
    matches!(
        e,
        MetaError::Zk {
            err: ZkError::ConnectionLoss
                | ZkError::Timeout
                | ZkError::NoHosts
                | ZkError::SessionExpired
                | ZkError::ClientClosed
                | ZkError::Custom(_),
            ..
        }
    )
}

/// How the wait for a lost session's fate ended.
enum Recovery {
    /// Registered again (same session, or a new one); keep going.
    Registered,
    /// Shutdown was asked meanwhile.
    Stopped,
    /// ZooKeeper answered and refused the registration.
    Failed(MetaError),
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
        loop {
            let ended = match self.serve(&mut cmds).await {
                Some(st) => st,
                None => return,
            };
            warn!(
                "ZooKeeper client gave up session {} ({ended:?}); asking the server whether it \
                 still exists, serving meanwhile",
                self.zk.session_id()
            );
            match self.recover(&mut cmds).await {
                Recovery::Registered => {
                    let _ = self.state.send(self.registered_state());
                }
                Recovery::Stopped => return,
                Recovery::Failed(e) => {
                    warn!("re-registration failed: {e}");
                    let _ = self.state.send(RegState::Failed(e.to_string()));
                    return;
                }
            }
        }
    }

    /// Serves commands while the session lives; returns the state that ended it, or `None`
    /// when the keeper is to stop.
    async fn serve(&mut self, cmds: &mut mpsc::UnboundedReceiver<Cmd>) -> Option<SessionState> {
        let mut session = self.zk.state_watcher();
        loop {
            tokio::select! {
                cmd = cmds.recv() => match cmd {
                    None => return None, // handle dropped: dropping the client closes the session
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
                        return None;
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
                    SessionState::Expired | SessionState::Closed | SessionState::AuthFailed => return Some(st),
                },
            }
        }
    }

    /// After the client gave the session up: follows the server's verdict, like Java's client,
    /// which never expires a session on its own. While no server answers the registration is
    /// left as it is and the bookie keeps serving. A server that still knows the session
    /// resumes it (the node is still ours); a server that expired it gets a new session and a
    /// new node. Only a refusal from ZooKeeper ends in [`Recovery::Failed`].
    async fn recover(&mut self, cmds: &mut mpsc::UnboundedReceiver<Cmd>) -> Recovery {
        let outage = Instant::now();
        let mut logged = outage;
        let mut expired = false;
        loop {
            let resume = (!expired).then(|| self.zk.session().clone());
            let attempt = attempt_registration(self.cfg.clone(), resume, self.read_only);
            tokio::pin!(attempt);
            let outcome = loop {
                tokio::select! {
                    r = &mut attempt => break r,
                    cmd = cmds.recv() => match cmd {
                        None => return Recovery::Stopped,
                        Some(Cmd::Shutdown(reply)) => {
                            // Nothing to delete without ZooKeeper: the server expires the node.
                            let _ = self.state.send(RegState::Stopped);
                            let _ = reply.send(Ok(()));
                            return Recovery::Stopped;
                        }
                        Some(Cmd::SetReadOnly(ro, reply)) => {
                            // Applied once a server answers (below).
                            self.read_only = ro;
                            let _ = reply.send(Err(MetaError::zk(
                                "move the registration (deferred until ZooKeeper answers)",
                                ZkError::ConnectionLoss,
                            )));
                        }
                    },
                }
            };
            match outcome {
                Ok((zk, registered_ro)) => {
                    self.adopt(zk);
                    if registered_ro != self.read_only {
                        if let Err(e) = register(&self.zk, &self.cfg, self.read_only).await {
                            warn!("moving the registration after recovery failed: {e}");
                            self.read_only = registered_ro;
                        }
                    }
                    info!(
                        "{} {} with session {} after {} ms",
                        if expired {
                            "re-registered"
                        } else {
                            "resumed the registration of"
                        },
                        self.cfg.bookie_id,
                        self.zk.session_id(),
                        outage.elapsed().as_millis()
                    );
                    return Recovery::Registered;
                }
                Err(MetaError::Zk {
                    err: ZkError::SessionExpired,
                    ..
                }) if !expired => {
                    warn!(
                        "ZooKeeper expired session {}; registering with a new session",
                        self.zk.session_id()
                    );
                    expired = true;
                    let _ = self.state.send(RegState::Unregistered);
                    continue;
                }
                Err(e) if is_unreachable(&e) => {
                    if logged.elapsed() >= OUTAGE_LOG_EVERY || logged == outage {
                        warn!(
                            "ZooKeeper unreachable for {} s ({e}); still serving, registration \
                             kept as it was",
                            outage.elapsed().as_secs()
                        );
                        logged = Instant::now();
                    }
                    tokio::time::sleep(RETRY_EVERY).await;
                }
                Err(e) => return Recovery::Failed(e),
            }
        }
    }

    fn adopt(&mut self, zk: Client) {
        match self.session.lock() {
            Ok(mut s) => *s = zk.session().clone(),
            Err(p) => *p.into_inner() = zk.session().clone(),
        }
        self.zk = zk;
    }
}

/// Registers in `resume`, the session the client gave up (`SessionExpired`: the server's verdict
/// that it is gone), or in a new session when `None`. Returns the client and the mode.
async fn attempt_registration(
    cfg: MetadataConfig,
    resume: Option<SessionInfo>,
    read_only: bool,
) -> Result<(Client, bool)> {
    let zk = match resume {
        Some(session) => Client::connector()
            .with_session_timeout(cfg.session_timeout)
            .with_session(session)
            .connect(&cfg.zk_servers)
            .await
            .map_err(|e| MetaError::zk(format!("resume the session at {}", cfg.zk_servers), e))?,
        None => zk::connect(&cfg).await?,
    };
    register(&zk, &cfg, read_only).await?;
    Ok((zk, read_only))
}
