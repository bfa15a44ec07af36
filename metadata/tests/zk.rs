//! Tests against a real ZooKeeper 3.8 (Debian package), started per test with `scripts/zk` on a
//! free loopback port and stopped on drop. Without ZooKeeper installed each test prints
//! `SKIPPED(zookeeper not installed)` and passes, unless `BOOKIE_REQUIRE_ZK=1`, which makes it
//! fail. `ZK_JAR_DIR` (default `/usr/share/java`) is where `scripts/zk` looks for the jars.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{cfg, until, Zk};

use metadata::cluster::{self, LedgerLayout};
use metadata::cookie::{self, Cookie, CookieDirs, CookieOptions, CookieOutcome};
use metadata::ledgers;
use metadata::zookeeper::{Acls, Client, CreateMode};
use metadata::{zk, BookieServiceInfo, MetaError, RegState, Registration};

async fn owner(c: &Client, path: &str) -> Option<i64> {
    c.check_stat(path).await.unwrap().map(|s| s.ephemeral_owner)
}

#[tokio::test]
async fn init_cluster_and_metaformat() {
    let Some(z) = Zk::start("init_cluster_and_metaformat") else {
        return;
    };
    let c = cfg(&z, "/ledgers", "", 6000);
    let client = zk::connect(&c).await.unwrap();
    assert!(matches!(
        cluster::read_instance_id(&client, &c).await,
        Err(MetaError::ClusterNotInitialized(_))
    ));
    let id = cluster::init_new_cluster(&client, &c).await.unwrap();
    assert_eq!(id.len(), 36);
    for p in [
        "/ledgers",
        "/ledgers/available",
        "/ledgers/available/readonly",
    ] {
        assert_eq!(client.get_data(p).await.unwrap().0, b"", "{p}");
    }
    assert_eq!(
        client.get_data("/ledgers/INSTANCEID").await.unwrap().0,
        id.as_bytes()
    );
    let layout = client.get_data("/ledgers/LAYOUT").await.unwrap().0;
    assert_eq!(
        layout,
        b"2\norg.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory:1"
    );
    assert_eq!(
        cluster::read_instance_id(&client, &c)
            .await
            .unwrap()
            .as_deref(),
        Some(id.as_str())
    );
    assert!(matches!(
        cluster::init_new_cluster(&client, &c).await,
        Err(MetaError::ClusterExists(_))
    ));

    // metaformat wipes ledgers and cookies and makes a new instance id
    client
        .mkdir(
            "/ledgers/00/0000",
            &CreateMode::Persistent.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap();
    client
        .create(
            "/ledgers/00/0000/L0001",
            b"x",
            &CreateMode::Persistent.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap();
    client
        .mkdir(
            "/ledgers/cookies/h:1",
            &CreateMode::Persistent.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap();
    let id2 = cluster::metaformat(&client, &c).await.unwrap();
    assert_ne!(id, id2);
    assert!(client.check_stat("/ledgers/00").await.unwrap().is_none());
    assert!(client
        .check_stat("/ledgers/cookies")
        .await
        .unwrap()
        .is_none());
    assert!(client
        .check_stat("/ledgers/available/readonly")
        .await
        .unwrap()
        .is_some());
    assert_eq!(
        cluster::read_instance_id(&client, &c).await.unwrap(),
        Some(id2)
    );

    // the CLI
    let code = metadata::cli::run_async(&[
        "--zk".into(),
        z.servers(),
        "--root".into(),
        "/other".into(),
        "initnewcluster".into(),
    ])
    .await;
    assert_eq!(code, 0);
    assert!(client
        .check_stat("/other/INSTANCEID")
        .await
        .unwrap()
        .is_some());
}

#[tokio::test]
async fn register_readonly_move_and_unregister() {
    let Some(z) = Zk::start("register_readonly_move_and_unregister") else {
        return;
    };
    let c = cfg(&z, "/ledgers", "127.0.0.1:3181", 6000);
    let client = zk::connect(&c).await.unwrap();
    // not initialised → refused
    assert!(matches!(
        Registration::start(c.clone(), false).await,
        Err(MetaError::ClusterNotInitialized(_))
    ));
    cluster::init_new_cluster(&client, &c).await.unwrap();

    let reg = Registration::start(c.clone(), false).await.unwrap();
    assert_eq!(reg.state(), RegState::Writable);
    let rw = "/ledgers/available/127.0.0.1:3181";
    let ro = "/ledgers/available/readonly/127.0.0.1:3181";
    let (data, stat) = client.get_data(rw).await.unwrap();
    assert_eq!(data, c.service_info.encode());
    assert_eq!(stat.ephemeral_owner, reg.session().id().0);
    let info = BookieServiceInfo::decode(&data).unwrap();
    let ep = info.rpc_endpoint().unwrap();
    assert_eq!(
        (ep.host.as_str(), ep.port, ep.id.as_str()),
        ("127.0.0.1", 3181, "bookie")
    );
    let l = cluster::list_bookies(&client, &c).await.unwrap();
    assert_eq!(
        (l.writable, l.read_only),
        (vec!["127.0.0.1:3181".to_string()], vec![])
    );

    reg.set_read_only(true).await.unwrap();
    assert_eq!(reg.state(), RegState::ReadOnly);
    assert!(owner(&client, rw).await.is_none());
    assert_eq!(owner(&client, ro).await, Some(reg.session().id().0));
    assert_eq!(
        client.get_data(ro).await.unwrap().0,
        c.service_info.encode()
    );
    let l = cluster::list_bookies(&client, &c).await.unwrap();
    assert_eq!(
        (l.writable, l.read_only),
        (vec![], vec!["127.0.0.1:3181".to_string()])
    );
    let info = cluster::read_bookie_service_info(&client, &c, "127.0.0.1:3181")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(info, c.service_info);

    reg.set_read_only(false).await.unwrap();
    assert!(owner(&client, rw).await.is_some());
    assert!(owner(&client, ro).await.is_none());

    reg.shutdown().await.unwrap();
    assert!(owner(&client, rw).await.is_none());
    assert!(owner(&client, ro).await.is_none());

    // starting read-only registers only in the RO list
    let reg = Registration::start(c.clone(), true).await.unwrap();
    assert!(owner(&client, ro).await.is_some());
    assert!(owner(&client, rw).await.is_none());
    drop(reg); // dropping closes the session: the ephemeral node goes away
    until("node gone after drop", Duration::from_secs(10), || async {
        owner(&client, ro).await.is_none()
    })
    .await;
}

#[tokio::test]
async fn stale_registration_is_waited_out() {
    let Some(z) = Zk::start("stale_registration_is_waited_out") else {
        return;
    };
    let c = cfg(&z, "/ledgers", "127.0.0.1:3182", 6000);
    let client = zk::connect(&c).await.unwrap();
    cluster::init_new_cluster(&client, &c).await.unwrap();
    let rw = "/ledgers/available/127.0.0.1:3182";

    // A previous incarnation that crashed: its session stays open until the server expires it.
    let old = Client::connector()
        .with_session_timeout(Duration::from_millis(2000))
        .with_detached()
        .connect(&z.servers())
        .await
        .unwrap();
    let old_session = old.session_id().0;
    old.create(
        rw,
        b"",
        &CreateMode::Ephemeral.with_acls(Acls::anyone_all()),
    )
    .await
    .unwrap();
    drop(old); // no close, no pings: expires after ~2 s

    let t = Instant::now();
    let reg = Registration::start(c.clone(), false).await.unwrap();
    assert!(
        t.elapsed() >= Duration::from_millis(500),
        "did not wait for the stale node: {:?}",
        t.elapsed()
    );
    let own = owner(&client, rw).await.unwrap();
    assert_ne!(own, old_session);
    assert_eq!(own, reg.session().id().0);
    reg.shutdown().await.unwrap();

    // A live other owner: registration gives up after the session timeout.
    let other = zk::connect(&c).await.unwrap();
    other
        .create(
            rw,
            b"",
            &CreateMode::Ephemeral.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap();
    let short = cfg(&z, "/ledgers", "127.0.0.1:3182", 1500);
    match Registration::start(short, false).await {
        Err(e @ MetaError::StaleRegistration { .. }) => assert_eq!(e.exit_code(), 4),
        Err(e) => panic!("wrong error {e}"),
        Ok(_) => panic!("registered over a live node"),
    }
}

/// A TCP proxy in front of ZooKeeper that can cut the bookie off: `block()` closes its
/// connections and refuses new ones, so the server expires the session while the client cannot
/// reach it; `unblock()` lets it reconnect and learn about the expiry.
struct Proxy {
    port: u16,
    blocked: std::sync::Arc<std::sync::atomic::AtomicBool>,
    conns: std::sync::Arc<std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Proxy {
    async fn start(upstream: u16) -> Proxy {
        use std::sync::atomic::Ordering;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let blocked = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let conns = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (b, cs) = (blocked.clone(), conns.clone());
        let accept = tokio::spawn(async move {
            while let Ok((mut down, _)) = listener.accept().await {
                if b.load(Ordering::SeqCst) {
                    continue; // dropped: connection refused in effect
                }
                let h = tokio::spawn(async move {
                    if let Ok(mut up) =
                        tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await
                    {
                        let _ = tokio::io::copy_bidirectional(&mut down, &mut up).await;
                    }
                });
                cs.lock().unwrap().push(h);
            }
        });
        Proxy {
            port,
            blocked,
            conns,
            accept,
        }
    }
    fn block(&self) {
        self.blocked
            .store(true, std::sync::atomic::Ordering::SeqCst);
        for h in self.conns.lock().unwrap().drain(..) {
            h.abort();
        }
    }
    fn unblock(&self) {
        self.blocked
            .store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.block();
        self.accept.abort();
    }
}

#[tokio::test]
async fn session_expiry_reregisters() {
    let Some(z) = Zk::start("session_expiry_reregisters") else {
        return;
    };
    let direct = cfg(&z, "/ledgers", "127.0.0.1:3183", 3000);
    let client = zk::connect(&direct).await.unwrap();
    cluster::init_new_cluster(&client, &direct).await.unwrap();
    let proxy = Proxy::start(z.port).await;
    let mut c = direct.clone();
    c.zk_servers = format!("127.0.0.1:{}", proxy.port);
    let reg = Registration::start(c.clone(), true).await.unwrap();
    let ro = "/ledgers/available/readonly/127.0.0.1:3183";
    let first = reg.session().id().0;
    assert_eq!(owner(&client, ro).await, Some(first));

    // Cut the bookie off until the server has expired its session and removed the node.
    proxy.block();
    until("old node expired", Duration::from_secs(20), || async {
        owner(&client, ro).await.is_none()
    })
    .await;
    assert_eq!(
        reg.state(),
        RegState::ReadOnly,
        "a mere disconnection must not change the state"
    );
    proxy.unblock();
    let st = reg.watch_state();
    until(
        "re-registered with a new session",
        Duration::from_secs(20),
        || async {
            owner(&client, ro).await.is_some_and(|o| o != first)
                && *st.borrow() == RegState::ReadOnly
        },
    )
    .await;
    assert_ne!(reg.session().id().0, first);
    assert_eq!(owner(&client, ro).await, Some(reg.session().id().0));
    assert!(owner(&client, "/ledgers/available/127.0.0.1:3183")
        .await
        .is_none());
    reg.shutdown().await.unwrap();
}

#[tokio::test]
async fn reregistration_failure_is_reported() {
    let Some(z) = Zk::start("reregistration_failure_is_reported") else {
        return;
    };
    let direct = cfg(&z, "/ledgers", "127.0.0.1:3186", 2000);
    let client = zk::connect(&direct).await.unwrap();
    cluster::init_new_cluster(&client, &direct).await.unwrap();
    let proxy = Proxy::start(z.port).await;
    let mut c = direct.clone();
    c.zk_servers = format!("127.0.0.1:{}", proxy.port);
    let reg = Registration::start(c, false).await.unwrap();
    let rw = "/ledgers/available/127.0.0.1:3186";
    proxy.block();
    until("old node expired", Duration::from_secs(20), || async {
        owner(&client, rw).await.is_none()
    })
    .await;
    // someone else holds the id when the session comes back: re-registration must fail
    let squatter = zk::connect(&direct).await.unwrap();
    squatter
        .create(
            rw,
            b"",
            &CreateMode::Ephemeral.with_acls(Acls::anyone_all()),
        )
        .await
        .unwrap();
    proxy.unblock();
    let st = reg.watch_state();
    until("Failed state", Duration::from_secs(30), || async {
        matches!(*st.borrow(), RegState::Failed(_))
    })
    .await;
    assert_eq!(metadata::EXIT_ZK_REG_FAIL, 4);
}

#[tokio::test]
async fn zookeeper_restart_keeps_registration() {
    let Some(z) = Zk::start("zookeeper_restart_keeps_registration") else {
        return;
    };
    let c = cfg(&z, "/ledgers", "127.0.0.1:3184", 4000);
    let client = zk::connect(&c).await.unwrap();
    cluster::init_new_cluster(&client, &c).await.unwrap();
    drop(client);
    let reg = Registration::start(c.clone(), false).await.unwrap();
    let rw = "/ledgers/available/127.0.0.1:3184";
    z.restart();
    let client = zk::connect(&c).await.unwrap();
    until(
        "registered after restart",
        Duration::from_secs(20),
        || async { owner(&client, rw).await.is_some() && reg.state() == RegState::Writable },
    )
    .await;
    assert_eq!(owner(&client, rw).await, Some(reg.session().id().0));
    // and it is still a working registration
    reg.set_read_only(true).await.unwrap();
    assert!(owner(&client, "/ledgers/available/readonly/127.0.0.1:3184")
        .await
        .is_some());
    reg.shutdown().await.unwrap();
}

/// A ZooKeeper outage longer than the session timeout does not cost the registration: the
/// client gives the session up after 1.4 session timeouts without a server, but the bookie
/// waits for a server's verdict, and a restarted server still knows the session (it restarts
/// its session timers). The registration keeps its session and its node throughout, never
/// unregistered, never failed (which used to happen 3.4 session timeouts into the outage).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_outage_keeps_the_session_until_the_server_says_otherwise() {
    let Some(z) = Zk::start("zookeeper_outage_keeps_the_session_until_the_server_says_otherwise")
    else {
        return;
    };
    let c = cfg(&z, "/ledgers", "127.0.0.1:3187", 3000);
    let client = zk::connect(&c).await.unwrap();
    cluster::init_new_cluster(&client, &c).await.unwrap();
    drop(client);
    let reg = Registration::start(c.clone(), false).await.unwrap();
    let rw = "/ledgers/available/127.0.0.1:3187";
    let first = reg.session().id().0;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut st = reg.watch_state();
    let log = seen.clone();
    let watcher = tokio::spawn(async move {
        while st.changed().await.is_ok() {
            log.lock().unwrap().push(st.borrow_and_update().clone());
        }
    });

    let zk = &z;
    tokio::task::block_in_place(|| zk.outage(Duration::from_secs(11)));
    let client = zk::connect(&c).await.unwrap();
    until("the registration back", Duration::from_secs(30), || async {
        owner(&client, rw).await.is_some()
    })
    .await;
    // Give a wrong re-registration time to show.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        owner(&client, rw).await,
        Some(first),
        "the node changed session"
    );
    assert_eq!(reg.session().id().0, first);
    assert_eq!(reg.state(), RegState::Writable);
    let seen = seen.lock().unwrap().clone();
    assert!(
        seen.iter().all(|s| *s == RegState::Writable),
        "states during the outage: {seen:?}"
    );
    reg.shutdown().await.unwrap();
    watcher.abort();
}

fn dirs_in(base: &Path, ledgers: &[&str]) -> CookieDirs {
    CookieDirs {
        journal_dirs: vec![base.join("journal").display().to_string()],
        ledger_dirs: ledgers
            .iter()
            .map(|l| base.join(l).display().to_string())
            .collect(),
        index_dirs: None,
    }
}

#[tokio::test]
async fn cookies_written_validated_and_mismatches_refused() {
    let Some(z) = Zk::start("cookies_written_validated_and_mismatches_refused") else {
        return;
    };
    let c = cfg(&z, "/ledgers", "127.0.0.1:3185", 6000);
    let client = zk::connect(&c).await.unwrap();
    let iid = cluster::init_new_cluster(&client, &c).await.unwrap();
    let base = tempfile::tempdir().unwrap();
    let dirs = dirs_in(base.path(), &["l1", "l2"]);
    let opts = CookieOptions::default();
    let inst = Some(iid.clone());

    assert_eq!(
        cookie::validate_and_stamp(&client, &c, &dirs, inst.clone(), &opts)
            .await
            .unwrap(),
        CookieOutcome::NewBookie
    );
    let zk_bytes = client
        .get_data("/ledgers/cookies/127.0.0.1:3185")
        .await
        .unwrap()
        .0;
    for d in dirs.all() {
        assert_eq!(std::fs::read(Cookie::path_in(&d)).unwrap(), zk_bytes, "{d}");
    }
    let text = String::from_utf8(zk_bytes.clone()).unwrap();
    assert!(
        text.starts_with("5\nbookieHost: \"127.0.0.1:3185\"\n"),
        "{text}"
    );
    assert!(text.contains(&format!("instanceId: \"{iid}\"")));
    assert_eq!(
        cookie::validate_and_stamp(&client, &c, &dirs, inst.clone(), &opts)
            .await
            .unwrap(),
        CookieOutcome::Verified
    );

    let refuse = |r: Result<CookieOutcome, MetaError>, want: &str| match r {
        Err(e @ MetaError::InvalidCookie(_)) => {
            assert!(e.to_string().contains(want), "message {e} lacks {want:?}");
            assert_eq!(e.exit_code(), 1);
        }
        other => panic!("expected refusal ({want}), got {other:?}"),
    };
    // changed ledger dirs
    refuse(
        cookie::validate_and_stamp(
            &client,
            &c,
            &dirs_in(base.path(), &["l1"]),
            inst.clone(),
            &opts,
        )
        .await,
        "ledger dirs",
    );
    // changed journal dir
    let mut d2 = dirs.clone();
    d2.journal_dirs = vec![base.path().join("j2").display().to_string()];
    refuse(
        cookie::validate_and_stamp(&client, &c, &d2, inst.clone(), &opts).await,
        "journal dirs",
    );
    // another instance id (cluster re-formatted)
    refuse(
        cookie::validate_and_stamp(&client, &c, &dirs, Some("other".into()), &opts).await,
        "instance id",
    );
    refuse(
        cookie::validate_and_stamp(&client, &c, &dirs, None, &opts).await,
        "instance id",
    );
    // changed bookie id (e.g. useHostNameAsBookieID flipped): the old id's cookie is found
    let mut c2 = c.clone();
    c2.bookie_id = "myhost:3185".into();
    let o2 = CookieOptions {
        other_bookie_ids: vec!["127.0.0.1:3185".into()],
        ..Default::default()
    };
    refuse(
        cookie::validate_and_stamp(&client, &c2, &dirs, inst.clone(), &o2).await,
        "bookie id",
    );
    // a dir's cookie edited on disk
    let l2 = &dirs.ledger_dirs[1];
    let good = std::fs::read(Cookie::path_in(l2)).unwrap();
    let mut bad = Cookie::parse(&good).unwrap();
    bad.bookie_id = "x:1".into();
    bad.write_to_dir(l2).unwrap();
    refuse(
        cookie::validate_and_stamp(&client, &c, &dirs, inst.clone(), &opts).await,
        "bookie id",
    );
    std::fs::write(Cookie::path_in(l2), b"garbage").unwrap();
    refuse(
        cookie::validate_and_stamp(&client, &c, &dirs, inst.clone(), &opts).await,
        "cannot parse",
    );
    // a wiped disk: the dir lost its cookie
    std::fs::remove_file(Cookie::path_in(l2)).unwrap();
    refuse(
        cookie::validate_and_stamp(&client, &c, &dirs, inst.clone(), &opts).await,
        "cookie missing",
    );
    std::fs::write(Cookie::path_in(l2), &good).unwrap();
    assert_eq!(
        cookie::validate_and_stamp(&client, &c, &dirs, inst.clone(), &opts)
            .await
            .unwrap(),
        CookieOutcome::Verified
    );
    // storage expansion: a new empty ledger dir is accepted only when allowed
    let d3 = dirs_in(base.path(), &["l1", "l2", "l3"]);
    refuse(
        cookie::validate_and_stamp(&client, &c, &d3, inst.clone(), &opts).await,
        "ledger dirs",
    );
    let exp = CookieOptions {
        allow_storage_expansion: true,
        ..Default::default()
    };
    assert_eq!(
        cookie::validate_and_stamp(&client, &c, &d3, inst.clone(), &exp)
            .await
            .unwrap(),
        CookieOutcome::Expanded
    );
    assert_eq!(
        cookie::validate_and_stamp(&client, &c, &d3, inst.clone(), &opts)
            .await
            .unwrap(),
        CookieOutcome::Verified
    );
    // cookie deleted in ZooKeeper while the dirs keep theirs
    cookie::delete_zk_cookie(&client, &c, "127.0.0.1:3185")
        .await
        .unwrap();
    refuse(
        cookie::validate_and_stamp(&client, &c, &d3, inst.clone(), &opts).await,
        "ZooKeeper has none",
    );
    // a new bookie over a non-empty dir
    cookie::remove_cookies(&client, &c, &d3, true)
        .await
        .unwrap();
    std::fs::write(base.path().join("l1/data.log"), b"x").unwrap();
    refuse(
        cookie::validate_and_stamp(&client, &c, &d3, inst.clone(), &opts).await,
        "not empty",
    );
}

async fn put_ledger(client: &Client, root: &str, layout: LedgerLayout, id: u64) {
    let path = format!("{root}{}", ledgers::ledger_path(layout, id));
    let parent = &path[..path.rfind('/').unwrap()];
    let opts = CreateMode::Persistent.with_acls(Acls::anyone_all());
    client.mkdir(parent, &opts).await.unwrap();
    client
        .create(&path, b"BookieMetadataFormatVersion\t3\n", &opts)
        .await
        .unwrap();
}

#[tokio::test]
async fn ledger_listing_and_gc_decision() {
    let Some(z) = Zk::start("ledger_listing_and_gc_decision") else {
        return;
    };
    let c = cfg(&z, "/ledgers", "", 6000);
    let client = zk::connect(&c).await.unwrap();
    // no cluster → refused
    assert!(ledgers::live_ledgers(&client, &c, None).await.is_err());
    cluster::init_new_cluster(&client, &c).await.unwrap();
    assert!(ledgers::live_ledgers(&client, &c, None)
        .await
        .unwrap()
        .is_empty());

    let ids: BTreeSet<u64> = [
        1,
        12_345,
        9_999_999_999 % 2_147_483_647,
        2_147_483_646,
        2_147_483_647,
        1 << 40,
        i64::MAX as u64,
    ]
    .into();
    for &id in &ids {
        put_ledger(&client, "/ledgers", LedgerLayout::Hierarchical, id).await;
    }
    assert!(client
        .check_stat("/ledgers/00/0000/L0001")
        .await
        .unwrap()
        .is_some());
    // things that are not ledgers
    let p = CreateMode::Persistent.with_acls(Acls::anyone_all());
    for junk in [
        "/ledgers/idgen/ID-0000000001",
        "/ledgers/idgen-long/0000000001",
        "/ledgers/underreplication/ledgers/0000/0000/0000/0001/urL0000000001",
        "/ledgers/cookies/h:1",
        "/ledgers/00/0000/notaledger",
        "/ledgers/00/abcd/L0002",
        "/ledgers/abc/0000/0000/0000/L0003",
        "/ledgers/0000/0000/L0004",
    ] {
        client.mkdir(junk, &p).await.unwrap();
    }
    client
        .create("/ledgers/ID-0000000007", b"", &p)
        .await
        .unwrap();
    assert_eq!(ledgers::live_ledgers(&client, &c, None).await.unwrap(), ids);
    assert_eq!(
        ledgers::live_ledgers(&client, &c, Some(2..=2_147_483_647))
            .await
            .unwrap(),
        [
            12_345,
            2_147_483_646,
            2_147_483_647,
            9_999_999_999 % 2_147_483_647
        ]
        .into()
    );

    // GC: local 1..=5 plus a big one; ZK has 1 and 1<<40
    let local: BTreeSet<u64> = [1, 2, 3, 1 << 40, 1 << 41].into();
    let listing = ledgers::live_ledgers(&client, &c, None).await;
    let del = ledgers::gc_decision(&local, listing.as_ref(), false).unwrap();
    assert_eq!(del, [2, 3, 1 << 41].into());
    // a deleted ledger disappears from the listing
    client.delete("/ledgers/00/0000/L0001", None).await.unwrap();
    let listing = ledgers::live_ledgers(&client, &c, None).await.unwrap();
    assert!(!listing.contains(&1));

    // long hierarchical layout
    let lc = cfg(&z, "/long", "", 6000);
    client.mkdir("/long", &p).await.unwrap();
    client
        .create(
            "/long/LAYOUT",
            &LedgerLayout::LongHierarchical.serialize(),
            &p,
        )
        .await
        .unwrap();
    let long_ids: BTreeSet<u64> = [1, 77, 2_147_483_648, 123_456_789_012_345].into();
    for &id in &long_ids {
        put_ledger(&client, "/long", LedgerLayout::LongHierarchical, id).await;
    }
    assert!(client
        .check_stat("/long/000/0000/0000/0000/L0001")
        .await
        .unwrap()
        .is_some());
    assert_eq!(
        ledgers::live_ledgers(&client, &lc, None).await.unwrap(),
        long_ids
    );

    // unknown or missing LAYOUT → refused, and GC deletes nothing
    let uc = cfg(&z, "/unknown", "", 6000);
    client.mkdir("/unknown/00/0000", &p).await.unwrap();
    let missing = ledgers::live_ledgers(&client, &uc, None).await;
    assert!(matches!(missing, Err(MetaError::Layout(_))));
    assert!(ledgers::gc_decision(&local, missing.as_ref(), true).is_err());
    client
        .create(
            "/unknown/LAYOUT",
            b"2\norg.example.MyLedgerManagerFactory:1",
            &p,
        )
        .await
        .unwrap();
    assert!(matches!(
        ledgers::live_ledgers(&client, &uc, None).await,
        Err(MetaError::Layout(_))
    ));
    // empty listing with local ledgers → refused unless overridden
    let ec = cfg(&z, "/empty", "", 6000);
    cluster::init_new_cluster(&client, &ec).await.unwrap();
    let empty = ledgers::live_ledgers(&client, &ec, None).await;
    assert!(matches!(
        ledgers::gc_decision(&local, empty.as_ref(), false),
        Err(MetaError::GcRefused(_))
    ));
    assert_eq!(
        ledgers::gc_decision(&local, empty.as_ref(), true).unwrap(),
        local
    );
}

/// Ledger metadata read from its znode (version 3, hand-encoded as Java writes it; a missing
/// node is `None`, junk an error), and the under-replication lock: taken with its parents
/// created, refused while held, seen by `is_locked`, released.
#[tokio::test]
async fn ledger_metadata_and_underreplication_lock() {
    use metadata::ledger_metadata::{read_ledger_metadata, LedgerState};
    use metadata::underreplication::{self, LockError};
    let Some(z) = Zk::start("ledger_metadata_and_underreplication_lock") else {
        return;
    };
    let c = cfg(&z, "/ledgers", "", 6000);
    let client = zk::connect(&c).await.unwrap();
    cluster::init_new_cluster(&client, &c).await.unwrap();
    let layout = LedgerLayout::Hierarchical;
    let opts = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let text = "BookieMetadataFormatVersion\t2\nquorumSize: 2\nensembleSize: 2\nlength: 10\n\
                lastEntryId: 4\nstate: CLOSED\nsegment {\n  ensembleMember: \"a:3181\"\n  \
                ensembleMember: \"b:3181\"\n  firstEntryId: 0\n}\n";
    let path = format!("/ledgers{}", ledgers::ledger_path(layout, 42));
    client
        .mkdir(&path[..path.rfind('/').unwrap()], &opts)
        .await
        .unwrap();
    client.create(&path, text.as_bytes(), &opts).await.unwrap();
    let md = read_ledger_metadata(&client, &c, layout, 42)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(md.state, LedgerState::Closed);
    assert!(md.has_bookie("b:3181") && !md.has_bookie("c:3181"));
    assert!(read_ledger_metadata(&client, &c, layout, 43)
        .await
        .unwrap()
        .is_none());
    put_ledger(&client, "/ledgers", layout, 44).await; // a header and nothing else
    assert!(read_ledger_metadata(&client, &c, layout, 44).await.is_err());

    assert!(!underreplication::is_locked(&client, &c, 42).await.unwrap());
    let lock = underreplication::acquire(&client, &c, 42, "gc-host")
        .await
        .unwrap();
    let (data, stat) = client
        .get_data("/ledgers/underreplication/locks/urL0000000042")
        .await
        .unwrap();
    assert_eq!(data, b"bookieId: \"gc-host\"\n");
    assert_ne!(stat.ephemeral_owner, 0, "ephemeral");
    assert!(underreplication::is_locked(&client, &c, 42).await.unwrap());
    let other = zk::connect(&c).await.unwrap();
    assert!(matches!(
        underreplication::acquire(&other, &c, 42, "x").await,
        Err(LockError::Held)
    ));
    underreplication::release(&client, lock).await.unwrap();
    assert!(!underreplication::is_locked(&client, &c, 42).await.unwrap());
    let again = underreplication::acquire(&other, &c, 42, "x")
        .await
        .unwrap();
    underreplication::release(&other, again).await.unwrap();
}
