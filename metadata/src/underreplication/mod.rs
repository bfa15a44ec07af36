//! Java's ZooKeeper under-replication manager: the records of under-replicated ledgers, the
//! locks of the workers replicating them, the auditor's election and settings ([`manager`],
//! [`election`], [`records`]), and here the per-ledger lock as garbage collection takes it.
//!
//! The per-ledger lock of Java's ZooKeeper under-replication manager
//! (`ZkLedgerUnderreplicationManager`): `<ledgersRoot>/underreplication/locks/urL%010d`, an
//! ephemeral node. A replication worker holds it while it re-replicates a ledger; the
//! over-replicated-ledger GC of a bookie (`ScanAndCompareGarbageCollector`) takes it too while
//! it checks and deletes its local copy, so autorecovery cannot put this bookie back into the
//! ledger's ensemble meanwhile.
//!
//! As Java: a lock node that exists means "being replicated" (skip the ledger); taking the lock
//! creates the node with the missing parents (persistent, empty, `createFullPathOptimistic`);
//! an existing node is a failure (someone else holds it); releasing deletes it, a missing node
//! being fine. The lock's data is `LockDataFormat` in text format with this host's name, as
//! Java writes it (`bookieId: "<host>"`). The node is ephemeral: a bookie that dies while
//! holding it releases it with its session.

pub mod election;
pub mod manager;
pub mod records;

use zookeeper_client::{Client, Error as ZkError};

use crate::config::MetadataConfig;
use crate::error::{MetaError, Result};
use crate::zk::{self, EPHEMERAL};

/// `<ledgersRoot>/underreplication/locks`.
pub fn locks_path(cfg: &MetadataConfig) -> String {
    format!("{}/underreplication/locks", cfg.ledgers_root)
}

/// The lock node of ledger `id`.
pub fn lock_path(cfg: &MetadataConfig, id: u64) -> String {
    format!("{}/urL{id:010}", locks_path(cfg))
}

/// `LockDataFormat` text (`bookieId: "<host>"`), the host name escaped as text format wants.
pub fn lock_data(host: &str) -> Vec<u8> {
    let mut s = String::from("bookieId: \"");
    for c in host.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            c if c.is_ascii_graphic() || c == ' ' => s.push(c),
            c => {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    s.push_str(&format!("\\{b:03o}"));
                }
            }
        }
    }
    s.push_str("\"\n");
    s.into_bytes()
}

/// This machine's host name (what Java's `DNS.getDefaultHost` gives without a DNS server).
pub fn host_name() -> String {
    nix::unistd::gethostname()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Whether a replication worker (or another bookie's GC) holds ledger `id`'s lock
/// (`isLedgerBeingReplicated`).
pub async fn is_locked(zk: &Client, cfg: &MetadataConfig, id: u64) -> Result<bool> {
    let path = lock_path(cfg, id);
    zk.check_stat(&path)
        .await
        .map(|s| s.is_some())
        .map_err(|e| MetaError::zk(format!("check {path}"), e))
}

/// A held ledger lock; give it back with [`release`] (the session's end releases it too).
#[derive(Debug)]
pub struct LedgerLock {
    pub ledger: u64,
    path: String,
}

/// Why a lock was not taken.
#[derive(Debug)]
pub enum LockError {
    /// Someone holds it.
    Held,
    Failed(MetaError),
}

impl std::fmt::Display for LockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LockError::Held => write!(f, "the ledger's under-replication lock is held"),
            LockError::Failed(e) => write!(f, "{e}"),
        }
    }
}

/// Takes ledger `id`'s lock (`acquireUnderreplicatedLedger`).
pub async fn acquire(
    zk: &Client,
    cfg: &MetadataConfig,
    id: u64,
    host: &str,
) -> std::result::Result<LedgerLock, LockError> {
    let path = lock_path(cfg, id);
    let data = lock_data(host);
    for attempt in 0..2 {
        match zk.create(&path, &data, &EPHEMERAL).await {
            Ok(_) => return Ok(LedgerLock { ledger: id, path }),
            Err(ZkError::NodeExists) => return Err(LockError::Held),
            Err(ZkError::NoNode) if attempt == 0 => {
                // The parents, as `createFullPathOptimistic` makes them.
                let under = format!("{}/underreplication", cfg.ledgers_root);
                for p in [under, locks_path(cfg)] {
                    zk::ensure_node(zk, &p, &[])
                        .await
                        .map_err(LockError::Failed)?;
                }
            }
            Err(e) => {
                return Err(LockError::Failed(MetaError::zk(
                    format!("create {path}"),
                    e,
                )))
            }
        }
    }
    Err(LockError::Failed(MetaError::BadData(format!(
        "cannot create {path}: its parent keeps vanishing"
    ))))
}

/// Gives a lock back (`releaseUnderreplicatedLedger`); a node already gone is fine.
pub async fn release(zk: &Client, lock: LedgerLock) -> Result<()> {
    match zk.delete(&lock.path, None).await {
        Ok(()) | Err(ZkError::NoNode) => Ok(()),
        Err(e) => Err(MetaError::zk(format!("delete {}", lock.path), e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's host name (gethostname), as /proc shows it.
    #[test]
    fn host_name_is_the_kernels() {
        let proc = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
        assert_eq!(host_name(), proc.trim_end_matches('\n'));
    }

    #[test]
    fn paths_and_data_match_java() {
        let cfg = MetadataConfig::for_cluster("127.0.0.1:2181", "/ledgers");
        assert_eq!(
            lock_path(&cfg, 7),
            "/ledgers/underreplication/locks/urL0000000007"
        );
        assert_eq!(
            lock_path(&cfg, 12345678901),
            "/ledgers/underreplication/locks/urL12345678901"
        );
        assert_eq!(lock_data("bk-1"), b"bookieId: \"bk-1\"\n");
        assert_eq!(lock_data("a\"b"), b"bookieId: \"a\\\"b\"\n");
        assert_eq!(lock_data("é"), b"bookieId: \"\\303\\251\"\n");
    }
}
