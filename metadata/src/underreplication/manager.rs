//! Java's `ZkLedgerUnderreplicationManager`, znode for znode, so that a Java auditor can hand
//! work to our replication workers and ours to Java's (docs/autorecovery.md §2):
//!
//! - `<root>/underreplication/LAYOUT` (`type: "BASIC" version: 1`), `ledgers`, `locks`: made
//!   on first use; another layout is refused, as Java refuses it.
//! - An under-replicated ledger is `ledgers/%04x/%04x/%04x/%04x/urL%010d` (the id's four 16-bit
//!   groups in lowercase hex, then the decimal id), holding a [`UrRecord`]. Marking a ledger
//!   that is marked already adds the missing bookies it does not list yet (compare-and-set on
//!   the node's version; the ctime moves only then).
//! - A worker claims a ledger by creating the ephemeral `locks/urL%010d` (holding its host's
//!   name), remembering the record's version: the ledger is done when the record is deleted
//!   *at that version* — an auditor that re-marked it meanwhile keeps it (Java swallows the
//!   BADVERSION the same way) — then empty hex levels are removed bottom-up. The lock goes
//!   whatever happens, and with the session if the worker dies.
//! - `disable` (present: no claims, no audits), `lostBookieRecoveryDelay` (decimal text, open
//!   ACL always, as Java), and the auditor's three binary check times.

use std::collections::BTreeSet;

use zookeeper_client::{Client, Error as ZkError, OneshotWatcher};

use super::records::{self, UrRecord};
use crate::config::MetadataConfig;
use crate::error::{MetaError, Result};
use crate::zk::{EPHEMERAL, PERSISTENT};

/// The auditor's periodic checks whose last run is kept in ZooKeeper.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckKind {
    AllLedgers,
    PlacementPolicy,
    Replicas,
}

impl CheckKind {
    fn node(self) -> &'static str {
        match self {
            CheckKind::AllLedgers => "checkallledgersctime",
            CheckKind::PlacementPolicy => "placementpolicycheckctime",
            CheckKind::Replicas => "replicascheckctime",
        }
    }
}

/// A ledger a worker holds the lock of, with the version its record had then.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    pub ledger: u64,
    pub version: i32,
}

/// Why enabling or disabling did nothing.
#[derive(Debug)]
pub enum ToggleError {
    /// Already in the state asked for (Java: "AutoRecovery is already enabled/disabled!").
    Already,
    Failed(MetaError),
}

/// The manager of one ZooKeeper session.
#[derive(Clone, Debug)]
pub struct UrManager {
    zk: Client,
    base: String,
    lock_data: Vec<u8>,
}

fn zk_err(op: &str, path: &str, e: ZkError) -> MetaError {
    MetaError::zk(format!("{op} {path}"), e)
}

/// `<base>/ledgers/hhhh/hhhh/hhhh/hhhh` of `ledger`.
pub fn parent_path(base_ledgers: &str, ledger: u64) -> String {
    format!(
        "{base_ledgers}/{:04x}/{:04x}/{:04x}/{:04x}",
        (ledger >> 48) & 0xffff,
        (ledger >> 32) & 0xffff,
        (ledger >> 16) & 0xffff,
        ledger & 0xffff
    )
}

/// The ledger id of a record's or lock's name (`urL(\d+)$`).
pub fn ledger_of(name: &str) -> Option<u64> {
    let digits = name.rsplit_once("urL")?.1;
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

impl UrManager {
    /// Opens the manager: the layout is made or checked. `host` goes into the locks this
    /// manager takes (Java: the host's canonical name).
    pub async fn open(zk: Client, cfg: &MetadataConfig, host: &str) -> Result<UrManager> {
        let m = UrManager {
            zk,
            base: format!("{}/underreplication", cfg.ledgers_root),
            lock_data: records::bookie_id_record(host),
        };
        m.check_layout().await?;
        Ok(m)
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    fn ledgers(&self) -> String {
        format!("{}/ledgers", self.base)
    }

    fn locks(&self) -> String {
        format!("{}/locks", self.base)
    }

    pub fn ur_path(&self, ledger: u64) -> String {
        format!("{}/urL{ledger:010}", parent_path(&self.ledgers(), ledger))
    }

    pub fn lock_path(&self, ledger: u64) -> String {
        format!("{}/urL{ledger:010}", self.locks())
    }

    async fn create_if_missing(&self, path: &str, data: &[u8]) -> Result<bool> {
        match self.zk.create(path, data, &PERSISTENT).await {
            Ok(_) => Ok(true),
            Err(ZkError::NodeExists) => Ok(false),
            Err(e) => Err(zk_err("create", path, e)),
        }
    }

    async fn check_layout(&self) -> Result<()> {
        if let Some(parent) = self
            .base
            .rsplit_once('/')
            .map(|(p, _)| p)
            .filter(|p| !p.is_empty())
        {
            self.create_if_missing(parent, b"").await?;
        }
        self.create_if_missing(&self.base, b"").await?;
        let layout = format!("{}/LAYOUT", self.base);
        if !self.create_if_missing(&layout, records::LAYOUT).await? {
            let (data, _) = self
                .zk
                .get_data(&layout)
                .await
                .map_err(|e| zk_err("read", &layout, e))?;
            if !records::layout_is_basic_v1(&data)? {
                return Err(MetaError::BadData(format!(
                    "{layout}: an under-replication layout other than BASIC version 1: {:?}",
                    String::from_utf8_lossy(&data)
                )));
            }
        }
        self.create_if_missing(&self.ledgers(), b"").await?;
        self.create_if_missing(&self.locks(), b"").await?;
        Ok(())
    }

    /// Creates `path` with `data`, making the missing parents (empty, persistent) as Java's
    /// `createFullPathOptimistic` does. `Ok(false)`: it exists.
    async fn create_with_parents(&self, path: &str, data: &[u8]) -> Result<bool> {
        for _ in 0..8 {
            match self.zk.create(path, data, &PERSISTENT).await {
                Ok(_) => return Ok(true),
                Err(ZkError::NodeExists) => return Ok(false),
                Err(ZkError::NoNode) => {
                    let mut at = self.base.len();
                    while let Some(i) = path[at + 1..].find('/') {
                        at += 1 + i;
                        self.create_if_missing(&path[..at], b"").await?;
                    }
                }
                Err(e) => return Err(zk_err("create", path, e)),
            }
        }
        Err(MetaError::BadData(format!(
            "cannot create {path}: its parents keep vanishing"
        )))
    }

    /// Marks `ledger` under-replicated for the `missing` bookies
    /// (`markLedgerUnderreplicatedAsync`); `now_ms` is the record's ctime.
    pub async fn mark(&self, ledger: u64, missing: &[String], now_ms: Option<i64>) -> Result<()> {
        let path = self.ur_path(ledger);
        let fresh = UrRecord {
            replicas: missing.to_vec(),
            ctime: now_ms,
        };
        for _ in 0..64 {
            if self.create_with_parents(&path, &fresh.encode()).await? {
                return Ok(());
            }
            let (data, stat) = match self.zk.get_data(&path).await {
                Ok(v) => v,
                Err(ZkError::NoNode) => continue,
                Err(e) => return Err(zk_err("read", &path, e)),
            };
            let mut rec = UrRecord::parse(&data)?;
            let mut added = false;
            for m in missing {
                if !rec.replicas.contains(m) {
                    rec.replicas.push(m.clone());
                    added = true;
                }
            }
            if !added {
                return Ok(());
            }
            if now_ms.is_some() {
                rec.ctime = now_ms;
            }
            match self
                .zk
                .set_data(&path, &rec.encode(), Some(stat.version))
                .await
            {
                Ok(_) => return Ok(()),
                Err(ZkError::NoNode | ZkError::BadVersion) => continue,
                Err(e) => return Err(zk_err("write", &path, e)),
            }
        }
        Err(MetaError::BadData(format!(
            "{path}: marking keeps racing other writers"
        )))
    }

    async fn children(&self, path: &str) -> Result<Vec<String>> {
        match self.zk.list_children(path).await {
            Ok(c) => Ok(c),
            Err(ZkError::NoNode) => Ok(Vec::new()),
            Err(e) => Err(zk_err("list", path, e)),
        }
    }

    /// Every record's path, in the order Java lists them.
    async fn record_paths(&self) -> Result<Vec<(u64, String)>> {
        // Breadth first, each level in the order ZooKeeper lists it, as Java's
        // listLedgersToRereplicate walks: the route and the shell list in the same order.
        let mut out = Vec::new();
        let mut queue = std::collections::VecDeque::from([(self.ledgers(), 0usize)]);
        while let Some((p, depth)) = queue.pop_front() {
            for c in self.children(&p).await? {
                let child = format!("{p}/{c}");
                if c.starts_with("urL") {
                    if let Some(id) = ledger_of(&c) {
                        out.push((id, child));
                    }
                } else if depth < 4 {
                    queue.push_back((child, depth + 1));
                }
            }
        }
        Ok(out)
    }

    /// Whether any ledger is marked under-replicated (`listLedgersToRereplicate().hasNext()`):
    /// the walk stops at the first record, reading no record's data.
    pub async fn any(&self) -> Result<bool> {
        let mut stack = vec![(self.ledgers(), 0usize)];
        while let Some((p, depth)) = stack.pop() {
            for c in self.children(&p).await? {
                if c.starts_with("urL") {
                    if ledger_of(&c).is_some() {
                        return Ok(true);
                    }
                } else if depth < 4 {
                    stack.push((format!("{p}/{c}"), depth + 1));
                }
            }
        }
        Ok(false)
    }

    /// The under-replicated ledgers and their records (`listLedgersToRereplicate`).
    pub async fn list(&self) -> Result<Vec<(u64, UrRecord)>> {
        let mut out = Vec::new();
        for (id, path) in self.record_paths().await? {
            match self.zk.get_data(&path).await {
                Ok((data, _)) => out.push((id, UrRecord::parse(&data)?)),
                Err(ZkError::NoNode) => {}
                Err(e) => return Err(zk_err("read", &path, e)),
            }
        }
        Ok(out)
    }

    /// Claims one under-replicated ledger nobody holds (skipping `skip`): Java's
    /// `getLedgerToRereplicateFromHierarchy`, a depth-first descent through the four hex levels
    /// with each level's children shuffled (by `shuffle_seed`), so that a claim costs a few
    /// listings however many ledgers are marked and workers spread over them. `None` when
    /// there is none (`pollLedgerToRereplicate`).
    pub async fn claim(&self, skip: &BTreeSet<u64>, shuffle_seed: u64) -> Result<Option<Claim>> {
        let locked: BTreeSet<String> = self.children(&self.locks()).await?.into_iter().collect();
        let mut seed = shuffle_seed;
        let mut stack = vec![self.ledgers()];
        while let Some(parent) = stack.pop() {
            let mut children = self.children(&parent).await?;
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            shuffle(&mut children, seed);
            let mut deeper = Vec::new();
            for c in children {
                let path = format!("{parent}/{c}");
                if !c.starts_with("urL") {
                    deeper.push(path);
                    continue;
                }
                let Some(id) = ledger_of(&c) else { continue };
                if skip.contains(&id) || locked.contains(&format!("urL{id:010}")) {
                    continue;
                }
                let stat = match self.zk.check_stat(&path).await {
                    Ok(Some(s)) => s,
                    Ok(None) => continue,
                    Err(e) => return Err(zk_err("check", &path, e)),
                };
                let lock = self.lock_path(id);
                match self.zk.create(&lock, &self.lock_data, &EPHEMERAL).await {
                    Ok(_) => {
                        return Ok(Some(Claim {
                            ledger: id,
                            version: stat.version,
                        }))
                    }
                    Err(ZkError::NodeExists) => continue,
                    Err(e) => return Err(zk_err("create", &lock, e)),
                }
            }
            // the first shuffled child is descended first
            stack.extend(deeper.into_iter().rev());
        }
        Ok(None)
    }

    /// The ledger is fully replicated: its record goes if it is still at the claimed version,
    /// then the empty hex levels above it; the lock is released in every case.
    pub async fn mark_replicated(&self, claim: &Claim) -> Result<()> {
        let path = self.ur_path(claim.ledger);
        let outcome = match self.zk.delete(&path, Some(claim.version)).await {
            Ok(()) | Err(ZkError::NoNode) => Ok(true),
            // re-marked since the claim: keep it for another pass, as Java does
            Err(ZkError::BadVersion) => Ok(false),
            Err(e) => Err(zk_err("delete", &path, e)),
        };
        if matches!(outcome, Ok(true)) {
            let mut parent = parent_path(&self.ledgers(), claim.ledger);
            for _ in 0..4 {
                let stat = match self.zk.check_stat(&parent).await {
                    Ok(Some(s)) => s,
                    _ => break,
                };
                if self.zk.delete(&parent, Some(stat.version)).await.is_err() {
                    break; // not empty, changed, or gone: leave it
                }
                parent.truncate(parent.rfind('/').unwrap_or(0));
            }
        }
        let released = self.release(claim.ledger).await;
        outcome.and(released)
    }

    /// Gives the lock back (`releaseUnderreplicatedLedger`).
    pub async fn release(&self, ledger: u64) -> Result<()> {
        let lock = self.lock_path(ledger);
        match self.zk.delete(&lock, None).await {
            Ok(()) | Err(ZkError::NoNode) => Ok(()),
            Err(e) => Err(zk_err("delete", &lock, e)),
        }
    }

    /// Who holds `ledger`'s lock (the host a lock names), if anyone.
    pub async fn lock_holder(&self, ledger: u64) -> Result<Option<String>> {
        let lock = self.lock_path(ledger);
        match self.zk.get_data(&lock).await {
            Ok((data, _)) => Ok(records::parse_bookie_id_record(&data)?.or(Some(String::new()))),
            Err(ZkError::NoNode) => Ok(None),
            Err(e) => Err(zk_err("read", &lock, e)),
        }
    }

    fn disable_path(&self) -> String {
        format!("{}/disable", self.base)
    }

    /// Whether replication is enabled (no `disable` node).
    pub async fn is_enabled(&self) -> Result<bool> {
        let p = self.disable_path();
        self.zk
            .check_stat(&p)
            .await
            .map(|s| s.is_none())
            .map_err(|e| zk_err("check", &p, e))
    }

    /// The `disable` node's state and a watch that fires when it changes.
    pub async fn watch_enabled(&self) -> Result<(bool, OneshotWatcher)> {
        let p = self.disable_path();
        self.zk
            .check_and_watch_stat(&p)
            .await
            .map(|(s, w)| (s.is_none(), w))
            .map_err(|e| zk_err("watch", &p, e))
    }

    pub async fn disable(&self) -> std::result::Result<(), ToggleError> {
        let p = self.disable_path();
        match self.zk.create(&p, b"", &PERSISTENT).await {
            Ok(_) => Ok(()),
            Err(ZkError::NodeExists) => Err(ToggleError::Already),
            Err(e) => Err(ToggleError::Failed(zk_err("create", &p, e))),
        }
    }

    pub async fn enable(&self) -> std::result::Result<(), ToggleError> {
        let p = self.disable_path();
        match self.zk.delete(&p, None).await {
            Ok(()) => Ok(()),
            Err(ZkError::NoNode) => Err(ToggleError::Already),
            Err(e) => Err(ToggleError::Failed(zk_err("delete", &p, e))),
        }
    }

    fn delay_path(&self) -> String {
        format!("{}/lostBookieRecoveryDelay", self.base)
    }

    /// Creates `lostBookieRecoveryDelay` with `seconds` unless it exists (an existing value
    /// overrides the configuration, as in Java). `Ok(true)`: created.
    pub async fn init_lost_bookie_recovery_delay(&self, seconds: i32) -> Result<bool> {
        self.create_if_missing(&self.delay_path(), seconds.to_string().as_bytes())
            .await
    }

    /// The delay in seconds; `None` when the node is missing.
    pub async fn lost_bookie_recovery_delay(&self) -> Result<Option<i32>> {
        let p = self.delay_path();
        match self.zk.get_data(&p).await {
            Ok((data, _)) => parse_delay(&p, &data).map(Some),
            Err(ZkError::NoNode) => Ok(None),
            Err(e) => Err(zk_err("read", &p, e)),
        }
    }

    /// The delay and the node's version (a same-value write moves the version: Java's auditor
    /// sees the write as "audit now").
    pub async fn lost_bookie_recovery_delay_versioned(&self) -> Result<Option<(i32, i32)>> {
        let p = self.delay_path();
        match self.zk.get_data(&p).await {
            Ok((data, stat)) => Ok(Some((parse_delay(&p, &data)?, stat.version))),
            Err(ZkError::NoNode) => Ok(None),
            Err(e) => Err(zk_err("read", &p, e)),
        }
    }

    /// Sets the delay (a same-value write still fires a watch: Java's "trigger audit").
    pub async fn set_lost_bookie_recovery_delay(&self, seconds: i32) -> Result<()> {
        let p = self.delay_path();
        let data = seconds.to_string();
        match self.zk.set_data(&p, data.as_bytes(), None).await {
            Ok(_) => Ok(()),
            Err(ZkError::NoNode) => self.create_if_missing(&p, data.as_bytes()).await.map(drop),
            Err(e) => Err(zk_err("write", &p, e)),
        }
    }

    /// The delay and a watch that fires on its next change (or creation/deletion).
    pub async fn watch_lost_bookie_recovery_delay(&self) -> Result<(Option<i32>, OneshotWatcher)> {
        let p = self.delay_path();
        match self.zk.get_and_watch_data(&p).await {
            Ok((data, _, w)) => Ok((Some(parse_delay(&p, &data)?), w)),
            Err(ZkError::NoNode) => {
                let (_, w) = self
                    .zk
                    .check_and_watch_stat(&p)
                    .await
                    .map_err(|e| zk_err("watch", &p, e))?;
                Ok((None, w))
            }
            Err(e) => Err(zk_err("watch", &p, e)),
        }
    }

    /// When `kind` last completed (ms); `None` if never.
    pub async fn check_time(&self, kind: CheckKind) -> Result<Option<i64>> {
        let p = format!("{}/{}", self.base, kind.node());
        match self.zk.get_data(&p).await {
            Ok((data, _)) => records::parse_ctime(&data),
            Err(ZkError::NoNode) => Ok(None),
            Err(e) => Err(zk_err("read", &p, e)),
        }
    }

    pub async fn set_check_time(&self, kind: CheckKind, ms: i64) -> Result<()> {
        let p = format!("{}/{}", self.base, kind.node());
        let data = records::encode_ctime(ms);
        match self.zk.set_data(&p, &data, None).await {
            Ok(_) => Ok(()),
            Err(ZkError::NoNode) => self.create_if_missing(&p, &data).await.map(drop),
            Err(e) => Err(zk_err("write", &p, e)),
        }
    }
}

fn parse_delay(path: &str, data: &[u8]) -> Result<i32> {
    std::str::from_utf8(data)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| {
            MetaError::BadData(format!(
                "{path}: not a number: {:?}",
                String::from_utf8_lossy(data)
            ))
        })
}

/// A deterministic shuffle (xorshift), so that workers do not all pick the same ledger.
fn shuffle<T>(v: &mut [T], seed: u64) {
    let mut x = seed | 1;
    for i in (1..v.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.swap(i, (x % (i as u64 + 1)) as usize);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_as_java_derives_them() {
        let base = "/ledgers/underreplication/ledgers";
        assert_eq!(
            format!("{}/urL{:010}", parent_path(base, 1234567), 1234567),
            "/ledgers/underreplication/ledgers/0000/0000/0012/d687/urL0001234567"
        );
        assert_eq!(
            format!(
                "{}/urL{:010}",
                parent_path(base, 223192575923832),
                223192575923832u64
            ),
            "/ledgers/underreplication/ledgers/0000/cafe/1234/5678/urL223192575923832"
        );
        assert_eq!(ledger_of("urL0001234567"), Some(1234567));
        assert_eq!(ledger_of("urL"), None);
        assert_eq!(ledger_of("xyz"), None);
    }

    #[test]
    fn shuffle_is_a_permutation() {
        let mut v: Vec<u32> = (0..50).collect();
        shuffle(&mut v, 7);
        let mut sorted = v.clone();
        sorted.sort();
        assert_eq!(sorted, (0..50).collect::<Vec<_>>());
        assert_ne!(v, sorted);
    }
}
