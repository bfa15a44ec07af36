//! A ledger's birth and death in ZooKeeper as the Java client performs them, for the admin
//! routes that act as a client (`/api/v1/bookie/sanity` creates and deletes a ledger,
//! `/api/v1/ledger/delete` deletes one):
//!
//! - a new id from Java's `ZkLedgerIdGenerator`: an ephemeral sequential `<root>/idgen/ID-`
//!   node (its parents made as needed), whose sequence number is the id, deleted at once. Java's
//!   `LongZkLedgerIdGenerator` takes over once `<root>/idgen-long` exists (ids past 2^31); we
//!   refuse there rather than guess its scheme;
//! - the metadata node created with its parents, as `ZkUtils.asyncCreateFullPathOptimistic`;
//! - deletion as `AbstractZkLedgerManager.removeLedgerMetadata` on the hierarchical layouts:
//!   the node (any version; a missing node is success), then each parent left empty
//!   (`ZkUtils.asyncDeleteFullPathOptimistic`), stopping at the first that is not.

use zookeeper_client::{Client, CreateMode, Error as ZkError};

use super::{path_of, LedgerMetadata};
use crate::cluster::LedgerLayout;
use crate::config::MetadataConfig;
use crate::error::{MetaError, Result};
use crate::zk::PERSISTENT;

/// Allocates a ledger id as Java's 31-bit generator does.
pub async fn allocate_ledger_id(zk: &Client, cfg: &MetadataConfig) -> Result<u64> {
    let root = &cfg.ledgers_root;
    if zk
        .check_stat(&format!("{root}/idgen-long"))
        .await
        .map_err(|e| MetaError::zk(format!("read {root}/idgen-long"), e))?
        .is_some()
    {
        return Err(MetaError::BadData(format!(
            "{root}/idgen-long exists: this cluster allocates 64-bit ledger ids, which only \
             Java's LongZkLedgerIdGenerator does"
        )));
    }
    let prefix = format!("{root}/idgen/ID-");
    let options = CreateMode::EphemeralSequential.with_acls(zookeeper_client::Acls::anyone_all());
    let created = match zk.create(&prefix, &[], &options).await {
        Err(ZkError::NoNode) => {
            create_parents(zk, &prefix).await?;
            zk.create(&prefix, &[], &options).await
        }
        other => other,
    };
    let (_, seq) = created.map_err(|e| MetaError::zk(format!("create {prefix}"), e))?;
    let id = seq.into_i64();
    let node = format!("{prefix}{seq}");
    if let Err(e) = zk.delete(&node, None).await {
        log::warn!("ledger id generation: cannot delete {node}: {e}");
    }
    if !(0..i64::from(i32::MAX)).contains(&id) {
        return Err(MetaError::BadData(format!("ledger id {id} overflows")));
    }
    Ok(id as u64)
}

/// Creates ledger `id`'s metadata node (and its parents): `Err` if it exists.
pub async fn create_ledger(
    zk: &Client,
    cfg: &MetadataConfig,
    layout: LedgerLayout,
    id: u64,
    metadata: &LedgerMetadata,
) -> Result<i32> {
    metadata.validate()?;
    let path = path_of(cfg, layout, id);
    let data = metadata.encode()?;
    let created = match zk.create(&path, &data, &PERSISTENT).await {
        Err(ZkError::NoNode) => {
            create_parents(zk, &path).await?;
            zk.create(&path, &data, &PERSISTENT).await
        }
        other => other,
    };
    created
        .map(|(stat, _)| stat.version)
        .map_err(|e| MetaError::zk(format!("create {path}"), e))
}

/// Deletes ledger `id`'s metadata as Java's client does; `Ok(false)`: there was none.
pub async fn delete_ledger(
    zk: &Client,
    cfg: &MetadataConfig,
    layout: LedgerLayout,
    id: u64,
) -> Result<bool> {
    let path = path_of(cfg, layout, id);
    match zk.delete(&path, None).await {
        Ok(()) => {}
        Err(ZkError::NoNode) => return Ok(false),
        Err(e) => return Err(MetaError::zk(format!("delete {path}"), e)),
    }
    if layout == LedgerLayout::Flat {
        return Ok(true);
    }
    // Parents left empty go too, up to the first that is not (the ledgers root never is).
    let mut node = path;
    while let Some((parent, _)) = node.rsplit_once('/') {
        if parent.len() <= cfg.ledgers_root.len() {
            break;
        }
        match zk.check_stat(parent).await {
            Ok(Some(stat)) if stat.num_children == 0 => {}
            _ => break,
        }
        if zk.delete(parent, None).await.is_err() {
            break;
        }
        node = parent.to_string();
    }
    Ok(true)
}

/// Creates every missing ancestor of `path` (not `path` itself).
async fn create_parents(zk: &Client, path: &str) -> Result<()> {
    let mut at = 0;
    while let Some(i) = path[at + 1..].find('/') {
        let parent = &path[..at + 1 + i];
        at += 1 + i;
        match zk.create(parent, &[], &PERSISTENT).await {
            Ok(_) | Err(ZkError::NodeExists) => {}
            Err(e) => return Err(MetaError::zk(format!("create {parent}"), e)),
        }
    }
    Ok(())
}
