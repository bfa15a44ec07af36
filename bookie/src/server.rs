//! Starting and stopping the shards.
//!
//! `run` creates one queue pair per shard, starts each shard on its own thread (pinned to a
//! core when configured), waits until every shard has recovered its journal, and only then has
//! every shard bind its listener (SO_REUSEPORT: the kernel spreads connections over the shards'
//! listeners) — as Java binds once the bookie has started: a port that accepted while one shard
//! still replayed would take connections whose adds hang until that shard is ready. Then it
//! waits for SIGINT/SIGTERM, tells the shards to stop, and joins them. A shard stops by no
//! longer accepting, flushing its journal and answering what became durable.
//!
//! Beside the shards: the process-wide [`BookieState`] (read-only mode) with its disk-checker
//! thread, the [`Metrics`] blocks the shards write, and the HTTP admin server on its own
//! thread. A fatal condition (a full disk with read-only mode disabled) stops the bookie like
//! a signal, with an error. In cluster mode the control plane (`admin/cluster.rs`) checks the
//! cookies before the shards start, registers after they are ready, stops the bookie the same
//! way (exit code 4) when the registration is lost, and unregisters before the shards stop.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc as std_mpsc, Arc};
use std::time::Duration;

use nix::sched::{sched_setaffinity, CpuSet};
use nix::unistd::Pid;
use tokio::io::unix::AsyncFd;
use tokio::net::TcpSocket;
use tokio::sync::{mpsc, watch};

use crate::admin::cluster::{ControlPlane, Failure};
use crate::admin::endpoints::{HttpEndpoints, Sources};
use crate::admin::metrics::Metrics;
use crate::admin::readonly::{spawn_disk_checker, BookieState};
use crate::config::BookieConfig;
use crate::conn::ratelimit::LogLimiter;
use crate::conn::{self, Conn, ReplyBudget};
use crate::gc::reclaim::Reclaimer;
use crate::read::disk_share::DiskShare;
use crate::security::tls::Security;
use crate::shard::mailbox::{AdminQuery, ShardHandle, ShardInbox};
use crate::shard::{EventFd, Shard, SHARD};
use crate::store::lock::DirLock;

/// Runs the bookie until a signal stops it. The error carries the process exit code (1, or 4
/// when the ZooKeeper registration failed).
pub fn run(config: BookieConfig) -> Result<(), Failure> {
    // State this bookie does not own (a Java bookie's files) stops the start before anything
    // is locked, stamped, registered or listened on.
    let take_over = crate::store::dir_audit::check(&config)?;
    let signals = Signals::install()?;
    // TLS key material and the auth provider: a bad file or key stops the start here.
    let security = Arc::new(Security::from_config(&config.tls, &config.auth)?);
    // Cluster mode: the cookie check comes before anything touches the directories.
    let mut control = if config.cluster.has_metadata_store() {
        Some(ControlPlane::start(&config)?)
    } else {
        None
    };
    let mut _dir_locks = Vec::new();
    for (dir, _) in crate::store::ledger_dirs::checked(&config) {
        _dir_locks.push(DirLock::acquire(dir)?);
    }
    let shards = config.shard_count();
    crate::store::ledger_dirs::check(&config, shards)?;
    let mut config = config;
    // Fixed here, on the main thread: `shard_count` derives the default from the cores this
    // thread may run on, and a pinned shard thread may run on one (each shard then took every
    // ledger directory's placement and the whole read-ahead cache as if it were alone).
    config.shards = shards;
    // Each journal directory's room, for the shards that journal there.
    for (k, dir) in config.journal_dirs.clone().iter().enumerate() {
        let usage = crate::admin::readonly::disk_usage(dir)
            .map_err(|e| format!("cannot stat {}: {e}", dir.display()))?;
        let existing = crate::store::journal_space::existing_journal_bytes(dir);
        let on_dir = (0..shards)
            .filter(|s| s % config.journal_dirs.len() == k)
            .count();
        if let Some(line) = crate::store::journal_space::fit(
            &mut config.journal,
            usage,
            existing,
            config.disk.usage_threshold,
            on_dir,
        )? {
            log::warn!("{}: {line}", dir.display());
        }
    }
    let addr: SocketAddr = format!("{}:{}", config.bind_address, config.port)
        .parse()
        .map_err(|e| {
            format!(
                "bad listen address {}:{}: {e}",
                config.bind_address, config.port
            )
        })?;
    let mut handles = Vec::with_capacity(shards);
    let mut inboxes = Vec::with_capacity(shards);
    for _ in 0..shards {
        let (rq_tx, rq_rx) = mpsc::channel(config.cross_shard_queue);
        let (rp_tx, rp_rx) = mpsc::unbounded_channel();
        let (cn_tx, cn_rx) = mpsc::unbounded_channel();
        let (ad_tx, ad_rx) = mpsc::unbounded_channel();
        let (ld_tx, ld_rx) = mpsc::unbounded_channel();
        handles.push(ShardHandle {
            requests: rq_tx,
            replies: rp_tx,
            connections: cn_tx,
            admin: ad_tx,
            landed: ld_tx,
            cache_fill_permille: Arc::new(std::sync::atomic::AtomicU32::new(0)),
            reply_budget: Arc::new(
                ReplyBudget::new(
                    config.reply_bytes_per_connection,
                    config.reply_bytes_per_shard,
                )
                .with_stuck_timeout(
                    config.response_backpressure_timeout,
                    config.close_on_response_timeout,
                ),
            ),
        });
        inboxes.push(ShardInbox {
            requests: rq_rx,
            replies: rp_rx,
            connections: cn_rx,
            admin: ad_rx,
            landed: ld_rx,
        });
    }
    let peers = Arc::new(handles);
    let config = Arc::new(config);
    let state = Arc::new(BookieState::new(
        &config.disk,
        &crate::store::ledger_dirs::checked(&config),
    ));
    if config.disk.persist_status {
        state.persist_status(crate::admin::bookie_status::paths(&config.ledger_dirs));
    }
    // A stopped Java bookie's directories: its journal tail becomes ours, its index files
    // are listed (`store::takeover`), before any shard opens its storage.
    let legacy = if take_over {
        Some(crate::store::takeover::start(&config, shards, &state)?)
    } else {
        None
    };
    let metrics = Arc::new(Metrics::new(shards));
    // Each shard's queue of requests other shards decoded for it, its depth at scrape time
    // (`bookkeeper_server_thread_executor_queue`); weak, so it keeps no channel open.
    for (queues, peer) in metrics.shards.iter().map(|s| &s.queues).zip(peers.iter()) {
        let queue = peer.requests.downgrade();
        let _ = queues.requests.set(Box::new(move || {
            queue
                .upgrade()
                .map_or(0, |q| q.max_capacity() - q.capacity())
        }));
    }
    let reclaim =
        Reclaimer::start().map_err(|e| format!("cannot start the reclaim thread: {e}"))?;
    // The disk's depth while no journal waits; one read per shard beside a journal.
    let disk_share = DiskShare::new(
        config
            .read_depth
            .max(config.read_threads_per_shard.max(1) * shards),
        config.reads_beside_journal.unwrap_or(shards),
        Duration::from_millis(2),
        metrics.clone(),
    );
    let (stop_tx, stop_rx) = watch::channel(false);
    let (ready_tx, ready_rx) = std_mpsc::channel::<Result<usize, String>>();
    let (listen_tx, listen_rx) = watch::channel(false);
    let accepted = Arc::new(AtomicUsize::new(0));
    let mut threads = Vec::new();
    for (id, inbox) in inboxes.into_iter().enumerate() {
        let (config, peers, stop, ready, accepted) = (
            config.clone(),
            peers.clone(),
            (stop_rx.clone(), listen_rx.clone()),
            ready_tx.clone(),
            accepted.clone(),
        );
        let shared = (
            state.clone(),
            metrics.clone(),
            reclaim.clone(),
            disk_share.clone(),
            security.clone(),
            legacy.clone(),
        );
        let thread = std::thread::Builder::new()
            .name(format!("shard-{id}"))
            .spawn(move || {
                shard_main(
                    id, config, peers, inbox, addr, stop, ready, accepted, shared,
                )
            })
            .map_err(|e| format!("cannot start shard thread {id}: {e}"))?;
        threads.push(thread);
    }
    drop(ready_tx);
    let mut exit_code = 1;
    let mut autorecovery: Option<autorecovery::live::daemon::Daemon> = None;
    // Twice from each shard: journal replayed, then listening.
    let mut failure = wait_for_shards(&ready_rx, shards).err();
    if failure.is_none() {
        failure = port_in_use(addr);
    }
    if failure.is_none() {
        log::info!("every shard has replayed its journal; listening on {addr}");
        let _ = listen_tx.send(true);
        failure = wait_for_shards(&ready_rx, shards).err();
    }
    let (disk_stop, disk_stop_rx) = std_mpsc::channel::<()>();
    let mut disk_checker = None;
    let mut http = HttpEndpoints::default();
    if failure.is_none() {
        match spawn_disk_checker(state.clone(), config.disk.clone(), disk_stop_rx) {
            Ok(t) => disk_checker = Some(t),
            Err(e) => failure = Some(format!("cannot start the disk checker: {e}")),
        }
    }
    let mut gc = None;
    let mut gc_trigger = None;
    if failure.is_none() {
        let metadata = if config.cluster.has_metadata_store() {
            match crate::admin::cluster::metadata_config(&config) {
                Ok(m) => Some(m),
                Err(f) => {
                    failure = Some(f.message);
                    None
                }
            }
        } else {
            None
        };
        if failure.is_none() {
            let settings = crate::gc::GcSettings {
                wait: config.cluster.gc_wait_time,
                overreplicated_wait: config.cluster.gc_overreplicated_ledger_wait_time,
                verify_metadata: config.cluster.verify_metadata_on_gc,
                metadata_op_rate: config.cluster.gc_metadata_op_rate,
                force_when_no_space: config.gc.force_gc_allow_when_no_space,
                disk_check_interval: config.disk.check_interval,
            };
            let links = crate::gc::GcLinks {
                metadata,
                shards: peers.clone(),
                state: state.clone(),
                metrics: metrics.clone(),
                legacy: legacy.clone(),
            };
            match crate::gc::start(settings, links) {
                Ok((driver, trigger)) => {
                    gc = Some(driver);
                    gc_trigger = Some(trigger);
                }
                Err(e) => failure = Some(e),
            }
        }
    }
    if failure.is_none() {
        match HttpEndpoints::start(Sources {
            config: config.clone(),
            state: state.clone(),
            metrics: metrics.clone(),
            shards: peers.clone(),
            gc: gc_trigger.clone(),
            autorecovery: autorecovery_routes(&config),
        }) {
            Ok(endpoints) => http = endpoints,
            Err(e) => failure = Some(e),
        }
    }
    if failure.is_none() {
        state.set_running(true);
        log::info!(
            "bookie serving on {addr} with {shards} shards (journal {}, ledgers {}){}",
            list(&config.journal_dirs),
            list(&config.ledger_dirs),
            if state.is_read_only() {
                ", read-only"
            } else {
                ""
            }
        );
        let registered = match control.as_mut() {
            None => {
                log::info!("no metadataServiceUri or zkServers: standalone, not registered");
                Ok(())
            }
            // Registers, then follows `state.subscribe()`.
            Some(cp) => cp.register(state.clone()),
        };
        match registered.and_then(|()| crate::autorecovery::start(&config)) {
            Ok(daemon) => {
                if let Some(d) = &daemon {
                    let _ = metrics.autorecovery.set(d.status.clone());
                }
                autorecovery = daemon;
                if let Some(why) = signals.wait(&state) {
                    failure = Some(why);
                }
            }
            Err(f) => {
                exit_code = f.code;
                failure = Some(f.message);
            }
        }
        log::info!("stopping: flushing journals");
    }
    state.set_shutting_down();
    if let Some(d) = autorecovery.take() {
        d.stop();
    }
    // Unregister before the shards stop serving.
    if let Some(cp) = control.take() {
        if cp.exit_code() != 0 {
            exit_code = cp.exit_code();
        }
        cp.stop();
    }
    http.stop();
    drop(gc_trigger);
    drop(gc.take());
    let _ = stop_tx.send(true);
    for t in threads {
        let _ = t.join();
    }
    state.set_running(false);
    drop(disk_stop);
    if let Some(t) = disk_checker {
        let _ = t.join();
    }
    match failure {
        Some(message) => Err(Failure {
            code: exit_code,
            message,
        }),
        None => {
            log::info!("bookie stopped");
            Ok(())
        }
    }
}

/// The autorecovery admin routes (cluster mode only).
fn autorecovery_routes(
    config: &BookieConfig,
) -> Option<Arc<crate::autorecovery::routes::AutorecoveryRoutes>> {
    if !config.cluster.has_metadata_store() {
        return None;
    }
    let daemon =
        crate::autorecovery::daemon_config(config, autorecovery::live::daemon::Role::Both).ok()?;
    Some(Arc::new(
        crate::autorecovery::routes::AutorecoveryRoutes::new(daemon.metadata, daemon.settings),
    ))
}

/// One report from each of `shards` shards; the first error if any failed.
fn wait_for_shards(
    reports: &std_mpsc::Receiver<Result<usize, String>>,
    shards: usize,
) -> Result<(), String> {
    let mut failure = None;
    for _ in 0..shards {
        match reports.recv() {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                failure.get_or_insert(e);
            }
            Err(_) => {
                failure.get_or_insert("a shard thread died while starting".into());
            }
        }
    }
    failure.map_or(Ok(()), Err)
}

/// SIGINT/SIGTERM handlers, installed before anything starts so an early signal is never the
/// default (abrupt) termination.
struct Signals {
    rt: tokio::runtime::Runtime,
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> Result<Signals, String> {
        use tokio::signal::unix::{signal, SignalKind};
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot build the signal runtime: {e}"))?;
        let _guard = rt.enter();
        let term = signal(SignalKind::terminate()).map_err(|e| format!("SIGTERM handler: {e}"))?;
        let int = signal(SignalKind::interrupt()).map_err(|e| format!("SIGINT handler: {e}"))?;
        drop(_guard);
        Ok(Signals { rt, term, int })
    }

    /// Until a signal (`None`) or a fatal condition the state reports (`Some(why)`).
    fn wait(mut self, state: &BookieState) -> Option<String> {
        self.rt.block_on(async {
            tokio::select! {
                _ = self.term.recv() => { log::info!("SIGTERM received"); None }
                _ = self.int.recv() => { log::info!("SIGINT received"); None }
                why = state.stop_requested() => Some(why),
            }
        })
    }
}

fn pin_to_core(core: usize) {
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let mut set = CpuSet::new();
    let pinned = set
        .set(core % cpus)
        .and_then(|()| sched_setaffinity(Pid::from_raw(0), &set));
    if pinned.is_err() {
        log::warn!("cannot pin shard to core {core}");
    }
}

/// What every shard thread shares: the bookie's state, metrics, the reclaim thread, the disk
/// share, TLS and auth, and the Java files taken over, if any.
type ShardShared = (
    Arc<BookieState>,
    Arc<Metrics>,
    Reclaimer,
    Arc<DiskShare>,
    Arc<Security>,
    Option<Arc<crate::store::takeover::Legacy>>,
);

#[allow(clippy::too_many_arguments)]
fn shard_main(
    id: usize,
    config: Arc<BookieConfig>,
    peers: Arc<Vec<ShardHandle>>,
    inbox: ShardInbox,
    addr: SocketAddr,
    (mut stop, mut listen): (watch::Receiver<bool>, watch::Receiver<bool>),
    ready: std_mpsc::Sender<Result<usize, String>>,
    accepted: Arc<AtomicUsize>,
    (state, metrics, reclaim, disk_share, security, legacy): ShardShared,
) {
    if config.pin_threads {
        pin_to_core(id);
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = ready.send(Err(format!("shard {id}: runtime: {e}")));
            return;
        }
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let (shard, mut flush_done) = match Shard::open(
            id,
            &config,
            peers.clone(),
            state,
            (metrics, reclaim, disk_share),
            legacy,
        )
        {
            Ok((s, done)) => (Rc::new(RefCell::new(s)), done),
            Err(e) => {
                let _ = ready.send(Err(format!("shard {id}: {e}")));
                return;
            }
        };
        SHARD.with(|s| *s.borrow_mut() = Some(Rc::downgrade(&shard)));
        let eventfd = shard.borrow().journal_eventfd();
        let journal_task = tokio::task::spawn_local(drive_journal(shard.clone(), eventfd));
        let ShardInbox {
            mut requests,
            replies,
            mut connections,
            mut admin,
            landed,
        } = inbox;
        let s = shard.clone();
        let admin_task = tokio::task::spawn_local(async move {
            while let Some(query) = admin.recv().await {
                match query {
                    AdminQuery::ListLedgers(answer) => {
                        let _ = answer.send(s.borrow().ledger_ids());
                    }
                    AdminQuery::DeleteLedgers(ids, answer) => {
                        let _ = answer.send(s.borrow_mut().delete_ledgers(&ids));
                    }
                    AdminQuery::Gc(req) => s.borrow_mut().request_gc(req),
                    AdminQuery::Flush => s.borrow_mut().request_flush(),
                }
            }
        });
        let s = shard.clone();
        let requests_task = tokio::task::spawn_local(async move {
            loop {
                // Like a connection, stop taking requests while the shard is blocked: the
                // bounded queue then fills and the sending shard answers ETOOMANYREQUESTS.
                loop {
                    let (blocked, notify) = {
                        let shard = s.borrow();
                        (shard.is_blocked(), shard.unblocked())
                    };
                    if !blocked {
                        break;
                    }
                    let _ = tokio::time::timeout(Duration::from_millis(5), notify.notified()).await;
                }
                let Some(first) = requests.recv().await else {
                    break;
                };
                let mut shard = s.borrow_mut();
                shard.handle_remote(first);
                while let Ok(more) = requests.try_recv() {
                    shard.handle_remote(more);
                }
                shard.drive();
            }
        });
        let replies_task = tokio::task::spawn_local(serve_inbox(
            shard.clone(),
            replies,
            Shard::deliver_remote_reply,
            false,
        ));
        // A run landing answers reads: let the shard write and flush after them.
        let landed_task =
            tokio::task::spawn_local(serve_inbox(shard.clone(), landed, Shard::run_landed, true));
        let s = shard.clone();
        let flush_task = tokio::task::spawn_local(async move {
            while let Some(done) = flush_done.recv().await {
                let mut shard = s.borrow_mut();
                shard.flush_done(done);
                shard.drive();
            }
        });
        let _ = ready.send(Ok(id));
        // Listen once every shard is ready (the main thread says so), or never when stopped.
        let listener = tokio::select! {
            go = listen.wait_for(|go| *go) => match go.map(|_| bind(addr)) {
                Ok(Ok(l)) => {
                    let _ = ready.send(Ok(id));
                    Some(l)
                }
                Ok(Err(e)) => {
                    let _ = ready.send(Err(format!("shard {id}: cannot listen on {addr}: {e}")));
                    None
                }
                Err(_) => None,
            },
            _ = stop.changed() => None,
        };
        let mut next_conn = (id as u64) << 48;
        let live = Rc::new(std::cell::Cell::new(0usize));
        let shards = peers.len();
        // No listener: stopped before every shard was ready.
        while let Some(listener) = listener.as_ref() {
            let stream = tokio::select! {
                _ = stop.changed() => break,
                handed = connections.recv() => {
                    let Some(std_stream) = handed else { continue };
                    match std_stream
                        .set_nonblocking(true)
                        .and_then(|_| tokio::net::TcpStream::from_std(std_stream))
                    {
                        Ok(s) => s,
                        Err(e) => {
                            log::warn!("shard {id}: cannot adopt a connection: {e}");
                            continue;
                        }
                    }
                }
                accepted_conn = listener.accept() => {
                    let (stream, _peer) = match accepted_conn {
                        Ok(a) => a,
                        Err(e) => {
                            ACCEPT_FAILED.warn(|more| format!("shard {id}: accept failed: {e}{more}"));
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            continue;
                        }
                    };
                    // The kernel spreads accepts over the shards' listeners by a hash of the
                    // addresses, which can leave a shard with most connections: deal them
                    // round robin instead.
                    let target = accepted.fetch_add(1, Ordering::Relaxed) % shards;
                    if target != id {
                        match stream.into_std() {
                            Ok(s) => {
                                let _ = peers[target].connections.send(s);
                            }
                            Err(e) => log::warn!("shard {id}: cannot hand over a connection: {e}"),
                        }
                        continue;
                    }
                    stream
                }
            };
            if live.get() >= config.max_connections_per_shard {
                REFUSED.warn(|more| {
                    format!("shard {id}: connection limit reached; refusing a connection{more}")
                });
                drop(stream);
                continue;
            }
            next_conn += 1;
            let conn = Rc::new(Conn::new(
                next_conn,
                config.max_pending_per_connection,
                peers[id].reply_budget.clone(),
            ));
            shard.borrow_mut().register_connection(&conn);
            live.set(live.get() + 1);
            let (s, live, max_frame) = (shard.clone(), live.clone(), config.max_frame_bytes);
            let security = security.clone();
            tokio::task::spawn_local(async move {
                conn::serve(s, stream, conn, max_frame, security).await;
                live.set(live.get() - 1);
            });
        }
        requests_task.abort();
        replies_task.abort();
        landed_task.abort();
        journal_task.abort();
        flush_task.abort();
        admin_task.abort();
        shard.borrow_mut().flush();
        // Give the connections' writers a moment to send the last replies.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let stats = shard.borrow().stats();
        log::info!("shard {id} stopped: {stats:?}");
    });
}

/// Refused and failed accepts come at a client's pace: logged in summary.
static REFUSED: LogLimiter = LogLimiter::new(Duration::from_secs(10), 5);
static ACCEPT_FAILED: LogLimiter = LogLimiter::new(Duration::from_secs(10), 5);

/// Every shard binds the bookie port with SO_REUSEPORT, which would also let this bookie share
/// a port another process listens on (splitting its connections) without a word. So a port
/// that a plain bind cannot take is refused first, as a Java bookie refuses it.
fn port_in_use(addr: SocketAddr) -> Option<String> {
    if addr.port() == 0 {
        return None;
    }
    let probe = std::net::TcpListener::bind(addr);
    probe.err().map(|e| {
        format!("cannot listen on {addr}: {e} (another process, another bookie?, holds the port)")
    })
}

fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.set_reuseport(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

/// Handles whatever waits in `inbox` each time it wakes, one message at a time on the shard,
/// then lets the shard make progress (`drive`) when `drive` says so.
async fn serve_inbox<T>(
    shard: Rc<RefCell<Shard>>,
    mut inbox: mpsc::UnboundedReceiver<T>,
    handle: fn(&mut Shard, T),
    drive: bool,
) {
    while let Some(first) = inbox.recv().await {
        let mut shard = shard.borrow_mut();
        handle(&mut shard, first);
        while let Ok(more) = inbox.try_recv() {
            handle(&mut shard, more);
        }
        if drive {
            shard.drive();
        }
    }
}

/// Wakes on the journal ring's completions (eventfd) or the group timer, and makes progress.
async fn drive_journal(shard: Rc<RefCell<Shard>>, eventfd: Option<std::io::Result<EventFd>>) {
    let fd = match eventfd.map(|fd| fd.and_then(watch)) {
        Some(Ok(fd)) => Some(fd),
        Some(Err(e)) => {
            log::error!("cannot watch the journal eventfd: {e}; polling instead");
            None
        }
        None => None,
    };
    let timer = shard.borrow().journal_timer();
    loop {
        let sleep = shard
            .borrow_mut()
            .arm_journal_timer(Duration::from_millis(100));
        match &fd {
            Some(fd) => {
                tokio::select! {
                    guard = fd.readable() => {
                        if let Ok(mut guard) = guard {
                            guard.get_inner().drain();
                            guard.clear_ready();
                        }
                    }
                    _ = tokio::time::sleep(sleep) => {}
                    // A group opened that must close before the timer set above.
                    _ = timer.notified() => {}
                }
            }
            None => tokio::time::sleep(sleep.min(Duration::from_millis(1))).await,
        }
        shard.borrow_mut().drive();
    }
}

/// Registers the journal's eventfd with the shard's reactor. tokio's `AsyncFd::register` is
/// `unsafe` whatever the descriptor's type (tokio#8587), so this is the crate's one `unsafe`.
#[allow(unsafe_code)]
fn watch(fd: EventFd) -> std::io::Result<AsyncFd<EventFd>> {
    // SAFETY: `EventFd` owns its descriptor (a duplicate of the ring's eventfd) and always
    // returns it from `as_raw_fd`, so it stays open and the same while the `AsyncFd` holds it.
    unsafe { AsyncFd::register(fd) }.map_err(std::io::Error::from)
}

/// Directories for a log line: `/a, /b`.
fn list(dirs: &[std::path::PathBuf]) -> String {
    dirs.iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
