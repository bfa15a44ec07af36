//! Cluster-level metadata: `initnewcluster` and `metaformat` (what `ZKRegistrationManager`
//! `initNewCluster`/`format` do), `<root>/INSTANCEID`, `<root>/LAYOUT`, and `listbookies`.
//! Used by the bookie at start (instance id, layout) and by tests/CLI to set up a cluster.

use zookeeper_client::{Client, Error as ZkError};

use crate::config::{MetadataConfig, UriLayout};
use crate::error::{MetaError, Result};
use crate::service_info::BookieServiceInfo;
use crate::zk::{self, PERSISTENT};

/// Java's `LedgerLayout` format version written in line 1 of `<root>/LAYOUT`.
pub const LAYOUT_FORMAT_VERSION: u32 = 2;
/// Factory classes of the ZooKeeper ledger managers (`LedgerManagerFactory` implementations).
pub const HIERARCHICAL_FACTORY: &str =
    "org.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory";
pub const LONG_HIERARCHICAL_FACTORY: &str =
    "org.apache.bookkeeper.meta.LongHierarchicalLedgerManagerFactory";
pub const LEGACY_HIERARCHICAL_FACTORY: &str =
    "org.apache.bookkeeper.meta.LegacyHierarchicalLedgerManagerFactory";
pub const FLAT_FACTORY: &str = "org.apache.bookkeeper.meta.FlatLedgerManagerFactory";

/// The ledger-manager layout recorded in `<root>/LAYOUT`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LedgerLayout {
    /// Hybrid: ids < 2^31-1 as 2-4-4 (`DD/DDDD/LDDDD`), larger ones as 3-4-4-4-4.
    Hierarchical,
    /// Only the 2-4-4 form (legacy factory).
    LegacyHierarchical,
    /// Always 3-4-4-4-4 (`DDD/DDDD/DDDD/DDDD/LDDDD`).
    LongHierarchical,
    /// `<root>/L%010d` (legacy flat).
    Flat,
}

impl LedgerLayout {
    /// Factory class name as Java writes it.
    pub fn factory_class(self) -> &'static str {
        match self {
            LedgerLayout::Hierarchical => HIERARCHICAL_FACTORY,
            LedgerLayout::LegacyHierarchical => LEGACY_HIERARCHICAL_FACTORY,
            LedgerLayout::LongHierarchical => LONG_HIERARCHICAL_FACTORY,
            LedgerLayout::Flat => FLAT_FACTORY,
        }
    }

    /// The exact `<root>/LAYOUT` bytes (`LedgerLayout.serialize`): `2\n<class>:1`, no newline.
    pub fn serialize(self) -> Vec<u8> {
        format!("{LAYOUT_FORMAT_VERSION}\n{}:1", self.factory_class()).into_bytes()
    }

    /// Parses `<root>/LAYOUT`; an unknown factory or format is an error (never guessed).
    pub fn parse(data: &[u8]) -> Result<Self> {
        let text = std::str::from_utf8(data)
            .map_err(|_| MetaError::Layout("LAYOUT is not UTF-8".into()))?;
        let mut lines = text.lines();
        let version: u32 = lines
            .next()
            .and_then(|l| l.trim().parse().ok())
            .ok_or_else(|| {
                MetaError::Layout(format!("LAYOUT {text:?}: bad format version line"))
            })?;
        if version != 1 && version != 2 {
            return Err(MetaError::Layout(format!(
                "LAYOUT format version {version} is not supported"
            )));
        }
        let line = lines.next().map(str::trim).unwrap_or("");
        let class = line.split(':').next().unwrap_or("");
        match class {
            HIERARCHICAL_FACTORY => Ok(LedgerLayout::Hierarchical),
            LONG_HIERARCHICAL_FACTORY => Ok(LedgerLayout::LongHierarchical),
            LEGACY_HIERARCHICAL_FACTORY => Ok(LedgerLayout::LegacyHierarchical),
            FLAT_FACTORY => Ok(LedgerLayout::Flat),
            other => Err(MetaError::Layout(format!(
                "unknown ledger manager factory {other:?} in LAYOUT"
            ))),
        }
    }

    /// The layout a URI asks for when LAYOUT is missing (Java's default: hierarchical).
    pub fn from_uri(u: UriLayout) -> Self {
        match u {
            UriLayout::FromZk | UriLayout::Hierarchical => LedgerLayout::Hierarchical,
            UriLayout::LongHierarchical => LedgerLayout::LongHierarchical,
            UriLayout::Flat => LedgerLayout::Flat,
        }
    }
}

/// Fails with [`MetaError::ClusterNotInitialized`] unless `<root>` exists.
pub async fn check_cluster_exists(zk: &Client, cfg: &MetadataConfig) -> Result<()> {
    match zk.check_stat(&cfg.ledgers_root).await {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err(MetaError::ClusterNotInitialized(cfg.ledgers_root.clone())),
        Err(e) => Err(MetaError::zk(format!("stat {}", cfg.ledgers_root), e)),
    }
}

/// `<root>/INSTANCEID` (`getClusterInstanceId`): fails if `<root>` is missing, `None` if only the
/// instance id is missing.
pub async fn read_instance_id(zk: &Client, cfg: &MetadataConfig) -> Result<Option<String>> {
    check_cluster_exists(zk, cfg).await?;
    match zk::get_opt(zk, &cfg.path("INSTANCEID")).await? {
        None => Ok(None),
        Some((data, _)) => String::from_utf8(data)
            .map(Some)
            .map_err(|_| MetaError::BadData("INSTANCEID is not UTF-8".into())),
    }
}

/// Reads `<root>/LAYOUT`; `None` when missing.
pub async fn read_layout(zk: &Client, cfg: &MetadataConfig) -> Result<Option<LedgerLayout>> {
    match zk::get_opt(zk, &cfg.path("LAYOUT")).await? {
        None => Ok(None),
        Some((data, _)) => LedgerLayout::parse(&data).map(Some),
    }
}

/// Reads `<root>/LAYOUT`, writing the configured layout if it is missing (as the first Java
/// process to build a ledger manager factory does). Refuses a URI layout that contradicts it.
pub async fn ensure_layout(zk: &Client, cfg: &MetadataConfig) -> Result<LedgerLayout> {
    let wanted = LedgerLayout::from_uri(cfg.layout);
    let layout = match read_layout(zk, cfg).await? {
        Some(l) => l,
        None => match zk
            .create(&cfg.path("LAYOUT"), &wanted.serialize(), &PERSISTENT)
            .await
        {
            Ok(_) => wanted,
            Err(ZkError::NodeExists) => read_layout(zk, cfg)
                .await?
                .ok_or_else(|| MetaError::Layout("LAYOUT vanished while creating it".into()))?,
            Err(e) => return Err(MetaError::zk("create LAYOUT", e)),
        },
    };
    if cfg.layout != crate::config::UriLayout::FromZk && layout != wanted {
        return Err(MetaError::Layout(format!(
            "configured ledger manager {:?} does not match {:?} recorded in {}/LAYOUT",
            wanted, layout, cfg.ledgers_root
        )));
    }
    Ok(layout)
}

fn new_uuid() -> Result<String> {
    // The kernel's random UUID (v4): no extra dependency; this crate is Linux-only like the bookie.
    std::fs::read_to_string("/proc/sys/kernel/random/uuid")
        .map(|s| s.trim().to_string())
        .map_err(|e| MetaError::io("/proc/sys/kernel/random/uuid", e))
}

/// `initnewcluster`: fails if `<root>` exists; otherwise creates `<root>`, `available`,
/// `available/readonly` and `INSTANCEID` (random UUID) in one multi-op, then `LAYOUT`.
/// Returns the instance id.
pub async fn init_new_cluster(zk: &Client, cfg: &MetadataConfig) -> Result<String> {
    let root = &cfg.ledgers_root;
    if zk
        .check_stat(root)
        .await
        .map_err(|e| MetaError::zk(format!("stat {root}"), e))?
        .is_some()
    {
        return Err(MetaError::ClusterExists(root.clone()));
    }
    // Parents of the root (e.g. a Pulsar-style /a/b/ledgers) are created as plain nodes first.
    let mut parent = String::new();
    for part in root
        .trim_start_matches('/')
        .split('/')
        .collect::<Vec<_>>()
        .split_last()
        .map(|(_, p)| p.to_vec())
        .unwrap_or_default()
    {
        parent.push('/');
        parent.push_str(part);
        zk::ensure_node(zk, &parent, &[]).await?;
    }
    let instance_id = new_uuid()?;
    let mut multi = zk.new_multi_writer();
    let add = |m: &mut zookeeper_client::MultiWriter<'_>, p: &str, d: &[u8]| {
        m.add_create(p, d, &PERSISTENT)
            .map_err(|e| MetaError::zk(format!("multi create {p}"), e))
    };
    add(&mut multi, root, &[])?;
    add(&mut multi, &cfg.available_path(), &[])?;
    add(&mut multi, &cfg.readonly_path(), &[])?;
    add(&mut multi, &cfg.path("INSTANCEID"), instance_id.as_bytes())?;
    match multi.commit().await {
        Ok(_) => {}
        Err(zookeeper_client::MultiWriteError::OperationFailed {
            source: ZkError::NodeExists,
            ..
        }) => return Err(MetaError::ClusterExists(root.clone())),
        Err(e) => {
            return Err(MetaError::BadData(format!(
                "initnewcluster multi-op failed: {e}"
            )))
        }
    }
    ensure_layout(zk, cfg).await?;
    Ok(instance_id)
}

/// Top-level children of `<root>` that are not ledger metadata (`isSpecialZnode` and the
/// id-generator nodes), kept by [`metaformat`] and skipped by the ledger listing.
pub fn is_special_znode(name: &str) -> bool {
    matches!(
        name,
        "available"
            | "cookies"
            | "LAYOUT"
            | "INSTANCEID"
            | "underreplication"
            | "idgen"
            | "idgen-long"
            | "disableHealthCheck"
    ) || name.starts_with("ID-")
}

/// `metaformat` (`BookKeeperAdmin.format` with force): ensures root/available/readonly exist,
/// deletes ledger metadata, id generators, `underreplication`, `cookies` and `INSTANCEID`, and
/// writes a new `INSTANCEID` (returned). Existing bookies then fail cookie validation.
pub async fn metaformat(zk: &Client, cfg: &MetadataConfig) -> Result<String> {
    zk::ensure_node(zk, &cfg.ledgers_root, &[]).await?;
    zk::ensure_node(zk, &cfg.available_path(), &[]).await?;
    zk::ensure_node(zk, &cfg.readonly_path(), &[]).await?;
    let kids = zk::children_opt(zk, &cfg.ledgers_root)
        .await?
        .unwrap_or_default();
    for k in kids {
        if matches!(k.as_str(), "available" | "LAYOUT" | "disableHealthCheck") {
            continue;
        }
        zk::delete_recursive(zk, &cfg.path(&k)).await?;
    }
    let id = new_uuid()?;
    zk.create(&cfg.path("INSTANCEID"), id.as_bytes(), &PERSISTENT)
        .await
        .map_err(|e| MetaError::zk("create INSTANCEID", e))?;
    ensure_layout(zk, cfg).await?;
    Ok(id)
}

/// The bookies registered in ZooKeeper (`listbookies -rw` / `-ro`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BookieList {
    /// Children of `<root>/available` minus `readonly`, sorted.
    pub writable: Vec<String>,
    /// Children of `<root>/available/readonly`, sorted.
    pub read_only: Vec<String>,
}

/// Lists writable and read-only bookies.
pub async fn list_bookies(zk: &Client, cfg: &MetadataConfig) -> Result<BookieList> {
    check_cluster_exists(zk, cfg).await?;
    let mut writable: Vec<String> = zk::children_opt(zk, &cfg.available_path())
        .await?
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c != "readonly")
        .collect();
    let mut read_only = zk::children_opt(zk, &cfg.readonly_path())
        .await?
        .unwrap_or_default();
    writable.sort();
    read_only.sort();
    Ok(BookieList {
        writable,
        read_only,
    })
}

/// Reads a bookie's published service info (RW path first, then RO), `None` if not registered.
pub async fn read_bookie_service_info(
    zk: &Client,
    cfg: &MetadataConfig,
    id: &str,
) -> Result<Option<BookieServiceInfo>> {
    for p in [
        format!("{}/{id}", cfg.available_path()),
        format!("{}/{id}", cfg.readonly_path()),
    ] {
        if let Some((data, _)) = zk::get_opt(zk, &p).await? {
            return BookieServiceInfo::decode(&data).map(Some);
        }
    }
    Ok(None)
}

/// All known bookies: children of `<root>/cookies` (what tools use while a bookie is down).
pub async fn list_all_bookies(zk: &Client, cfg: &MetadataConfig) -> Result<Vec<String>> {
    let mut v = zk::children_opt(zk, &cfg.cookies_path())
        .await?
        .unwrap_or_default();
    v.sort();
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_bytes_and_parse() {
        let b = LedgerLayout::Hierarchical.serialize();
        assert_eq!(
            b,
            b"2\norg.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory:1"
        );
        assert_eq!(b.len(), 63);
        for l in [
            LedgerLayout::Hierarchical,
            LedgerLayout::LongHierarchical,
            LedgerLayout::LegacyHierarchical,
            LedgerLayout::Flat,
        ] {
            assert_eq!(LedgerLayout::parse(&l.serialize()).unwrap(), l);
        }
        assert!(LedgerLayout::parse(b"2\norg.example.Other:1").is_err());
        assert!(LedgerLayout::parse(b"x").is_err());
        assert!(LedgerLayout::parse(b"").is_err());
        assert!(LedgerLayout::parse(&[0xff, 0xfe]).is_err());
    }

    #[test]
    fn special_nodes() {
        for s in [
            "available",
            "cookies",
            "LAYOUT",
            "INSTANCEID",
            "underreplication",
            "idgen",
            "idgen-long",
            "ID-0000000001",
        ] {
            assert!(is_special_znode(s), "{s}");
        }
        assert!(!is_special_znode("00"));
        assert!(!is_special_znode("000"));
    }
}
