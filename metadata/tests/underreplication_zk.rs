//! The under-replication manager and the auditor election against a real ZooKeeper: the
//! znodes Java's `ZkLedgerUnderreplicationManager` and `ZkLedgerAuditorManager` read and write
//! (their data byte for byte), marking and merging, claiming with locks, the versioned
//! "replicated", the switches, and an election with a vote that dies with its session.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{cfg, until, Zk};
use metadata::underreplication::election::{current_auditor, Elector};
use metadata::underreplication::manager::{CheckKind, ToggleError, UrManager};
use metadata::underreplication::records::UrRecord;
use metadata::zk;

#[tokio::test]
async fn marking_claiming_and_replicated_as_java_lays_them_out() {
    let Some(z) = Zk::start("marking_claiming_and_replicated") else {
        return;
    };
    let c = cfg(&z, "/ledgers", "", 6000);
    let client = zk::connect(&c).await.unwrap();
    let m = UrManager::open(client.clone(), &c, "worker-host")
        .await
        .unwrap();
    assert_eq!(
        client
            .get_data("/ledgers/underreplication/LAYOUT")
            .await
            .unwrap()
            .0,
        b"type: \"BASIC\"\nversion: 1\n"
    );
    assert!(!m.any().await.unwrap(), "nothing marked yet");
    // Mark, then mark again with another bookie: merged, ctime moved; a repeat changes nothing.
    m.mark(1234567, &["a:3181".into()], Some(10)).await.unwrap();
    assert!(m.any().await.unwrap(), "one ledger marked");
    let path = "/ledgers/underreplication/ledgers/0000/0000/0012/d687/urL0001234567";
    assert_eq!(
        client.get_data(path).await.unwrap().0,
        b"replica: \"a:3181\"\nctime: 10\n"
    );
    m.mark(1234567, &["b:3181".into(), "a:3181".into()], Some(20))
        .await
        .unwrap();
    let (data, stat) = client.get_data(path).await.unwrap();
    assert_eq!(
        data,
        b"replica: \"a:3181\"\nreplica: \"b:3181\"\nctime: 20\n"
    );
    m.mark(1234567, &["a:3181".into()], Some(30)).await.unwrap();
    assert_eq!(
        client.get_data(path).await.unwrap().1.version,
        stat.version,
        "nothing new: no write"
    );
    m.mark(7, &["c:3181".into()], None).await.unwrap();
    let listed = m.list().await.unwrap();
    assert_eq!(listed.len(), 2);
    // in ZooKeeper's order (Java's), not sorted
    assert_eq!(
        listed.iter().find(|(id, _)| *id == 7).cloned().unwrap(),
        (
            7,
            UrRecord {
                replicas: vec!["c:3181".into()],
                ctime: None
            }
        )
    );

    // Claims: a second manager (another session) cannot take what the first holds.
    let other_session = zk::connect(&c).await.unwrap();
    let other = UrManager::open(other_session.clone(), &c, "other-host")
        .await
        .unwrap();
    let first = m
        .claim(&BTreeSet::new(), 1)
        .await
        .unwrap()
        .expect("a ledger to claim");
    assert_eq!(
        m.lock_holder(first.ledger).await.unwrap().as_deref(),
        Some("worker-host")
    );
    let second = other
        .claim(&BTreeSet::new(), 2)
        .await
        .unwrap()
        .expect("the other ledger");
    assert_ne!(first.ledger, second.ledger);
    assert_eq!(
        other.claim(&BTreeSet::new(), 3).await.unwrap(),
        None,
        "both held"
    );

    // Replicated at the claimed version: the record and its empty levels go, the lock too.
    m.mark_replicated(&first).await.unwrap();
    assert!(client
        .check_stat(&m.ur_path(first.ledger))
        .await
        .unwrap()
        .is_none());
    let leaf_dir = m
        .ur_path(first.ledger)
        .rsplit_once('/')
        .unwrap()
        .0
        .to_string();
    assert!(
        client.check_stat(&leaf_dir).await.unwrap().is_none(),
        "empty levels removed"
    );
    assert!(client
        .check_stat("/ledgers/underreplication/ledgers")
        .await
        .unwrap()
        .is_some());
    assert_eq!(m.lock_holder(first.ledger).await.unwrap(), None);
    // Re-marked after the claim: the record stays for another pass, the lock goes.
    m.mark(second.ledger, &["z:3181".into()], Some(40))
        .await
        .unwrap();
    other.mark_replicated(&second).await.unwrap();
    assert!(
        client
            .check_stat(&m.ur_path(second.ledger))
            .await
            .unwrap()
            .is_some(),
        "kept"
    );
    assert_eq!(m.lock_holder(second.ledger).await.unwrap(), None);
    // A lock dies with its session.
    let again = other.claim(&BTreeSet::new(), 4).await.unwrap().unwrap();
    assert_eq!(again.ledger, second.ledger);
    drop(other);
    drop(other_session);
    until(
        "the dead session's lock to go",
        Duration::from_secs(20),
        || async { m.lock_holder(second.ledger).await.unwrap().is_none() },
    )
    .await;
}

#[tokio::test]
async fn switches_delay_and_check_times() {
    let Some(z) = Zk::start("switches_delay_and_check_times") else {
        return;
    };
    let c = cfg(&z, "/ledgers", "", 6000);
    let client = zk::connect(&c).await.unwrap();
    let m = UrManager::open(client.clone(), &c, "h").await.unwrap();
    assert!(m.is_enabled().await.unwrap());
    m.disable().await.unwrap();
    assert_eq!(
        client
            .get_data("/ledgers/underreplication/disable")
            .await
            .unwrap()
            .0,
        b""
    );
    assert!(matches!(m.disable().await, Err(ToggleError::Already)));
    assert!(!m.is_enabled().await.unwrap());
    let (enabled, watcher) = m.watch_enabled().await.unwrap();
    assert!(!enabled);
    m.enable().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), watcher.changed())
        .await
        .unwrap();
    assert!(matches!(m.enable().await, Err(ToggleError::Already)));

    assert_eq!(m.lost_bookie_recovery_delay().await.unwrap(), None);
    assert!(m.init_lost_bookie_recovery_delay(30).await.unwrap());
    assert!(
        !m.init_lost_bookie_recovery_delay(5).await.unwrap(),
        "an existing value wins"
    );
    assert_eq!(
        client
            .get_data("/ledgers/underreplication/lostBookieRecoveryDelay")
            .await
            .unwrap()
            .0,
        b"30"
    );
    let (v, watcher) = m.watch_lost_bookie_recovery_delay().await.unwrap();
    assert_eq!(v, Some(30));
    m.set_lost_bookie_recovery_delay(30).await.unwrap(); // same value: still an event
    tokio::time::timeout(Duration::from_secs(10), watcher.changed())
        .await
        .unwrap();

    assert_eq!(m.check_time(CheckKind::AllLedgers).await.unwrap(), None);
    m.set_check_time(CheckKind::AllLedgers, 1700000000123)
        .await
        .unwrap();
    assert_eq!(
        client
            .get_data("/ledgers/underreplication/checkallledgersctime")
            .await
            .unwrap()
            .0,
        [0x08, 0xfb, 0xd0, 0x95, 0xff, 0xbc, 0x31]
    );
    assert_eq!(
        m.check_time(CheckKind::AllLedgers).await.unwrap(),
        Some(1700000000123)
    );
}

#[tokio::test]
async fn one_auditor_and_the_next_one_when_it_dies() {
    let Some(z) = Zk::start("one_auditor_and_the_next_one") else {
        return;
    };
    let c = cfg(&z, "/ledgers", "", 4000);
    let first_session = zk::connect(&c).await.unwrap();
    let second_session = zk::connect(&c).await.unwrap();
    let observer = zk::connect(&c).await.unwrap();
    metadata::cluster::init_new_cluster(&observer, &c)
        .await
        .unwrap();
    assert_eq!(current_auditor(&observer, &c).await.unwrap(), None);
    let mut a = Elector::new(first_session.clone(), &c, "10.0.0.1:3181");
    tokio::time::timeout(Duration::from_secs(10), a.wait_until_elected())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        current_auditor(&observer, &c).await.unwrap().as_deref(),
        Some("10.0.0.1:3181")
    );
    assert_eq!(
        observer
            .get_data("/ledgers/underreplication/auditorelection")
            .await
            .unwrap()
            .0,
        b"bookieId: \"10.0.0.1:3181\"\n"
    );
    let votes = observer
        .list_children("/ledgers/underreplication/auditorelection")
        .await
        .unwrap();
    assert_eq!(votes.len(), 1);
    assert!(
        votes[0].starts_with("V_") && votes[0].len() == 12,
        "{votes:?}"
    );
    // A second candidate waits while the first leads, and leads once its session is gone.
    let c2 = c.clone();
    let waiting = tokio::spawn(async move {
        let mut b = Elector::new(second_session, &c2, "10.0.0.2:3181");
        b.wait_until_elected().await.unwrap();
        b
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !waiting.is_finished(),
        "the second candidate does not lead while the first does"
    );
    drop(a);
    drop(first_session);
    let _b = tokio::time::timeout(Duration::from_secs(20), waiting)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        current_auditor(&observer, &c).await.unwrap().as_deref(),
        Some("10.0.0.2:3181")
    );
}
