//! Thin helpers over `zookeeper-client`: connecting with the configured session timeout,
//! open ACLs (what Java uses unless `zkEnableSecurity`), "create if missing", recursive delete.

use std::time::Duration;

use zookeeper_client::{Acls, Client, CreateMode, CreateOptions, Error as ZkError, Stat};

use crate::config::MetadataConfig;
use crate::error::{MetaError, Result};

pub(crate) const PERSISTENT: CreateOptions<'static> =
    CreateMode::Persistent.with_acls(Acls::anyone_all());
pub(crate) const EPHEMERAL: CreateOptions<'static> =
    CreateMode::Ephemeral.with_acls(Acls::anyone_all());

/// Opens a ZooKeeper session (waits up to about the session timeout for a server).
pub async fn connect(cfg: &MetadataConfig) -> Result<Client> {
    connect_with(&cfg.zk_servers, cfg.session_timeout).await
}

/// Opens a session to `servers` with `timeout`.
pub async fn connect_with(servers: &str, timeout: Duration) -> Result<Client> {
    Client::connector()
        .with_session_timeout(timeout)
        .connect(servers)
        .await
        .map_err(|e| MetaError::zk(format!("connect to {servers}"), e))
}

/// Creates a persistent node; an existing node is fine.
pub(crate) async fn ensure_node(zk: &Client, path: &str, data: &[u8]) -> Result<()> {
    match zk.create(path, data, &PERSISTENT).await {
        Ok(_) | Err(ZkError::NodeExists) => Ok(()),
        Err(e) => Err(MetaError::zk(format!("create {path}"), e)),
    }
}

/// Reads a node, `None` if it does not exist.
pub(crate) async fn get_opt(zk: &Client, path: &str) -> Result<Option<(Vec<u8>, Stat)>> {
    match zk.get_data(path).await {
        Ok(v) => Ok(Some(v)),
        Err(ZkError::NoNode) => Ok(None),
        Err(e) => Err(MetaError::zk(format!("read {path}"), e)),
    }
}

/// Children of a node, `None` if it does not exist.
pub(crate) async fn children_opt(zk: &Client, path: &str) -> Result<Option<Vec<String>>> {
    match zk.list_children(path).await {
        Ok(v) => Ok(Some(v)),
        Err(ZkError::NoNode) => Ok(None),
        Err(e) => Err(MetaError::zk(format!("list {path}"), e)),
    }
}

/// Deletes `path` and everything below it (depth first); a missing node is fine.
pub(crate) async fn delete_recursive(zk: &Client, path: &str) -> Result<()> {
    let mut stack = vec![(path.to_string(), false)];
    while let Some((p, expanded)) = stack.pop() {
        if !expanded {
            stack.push((p.clone(), true));
            if let Some(kids) = children_opt(zk, &p).await? {
                for k in kids {
                    stack.push((format!("{p}/{k}"), false));
                }
            }
        } else {
            match zk.delete(&p, None).await {
                Ok(()) | Err(ZkError::NoNode) => {}
                Err(e) => return Err(MetaError::zk(format!("delete {p}"), e)),
            }
        }
    }
    Ok(())
}
