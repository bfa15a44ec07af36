//! Ledger ids that exist in ZooKeeper, for garbage collection of deleted ledgers
//! (`ScanAndCompareGarbageCollector` over the ledger manager's ranges).
//!
//! Path ↔ id (`util/StringUtils.java`, `HierarchicalLedgerManager`,
//! `LegacyHierarchicalLedgerManager`, `LongHierarchicalLedgerManager`):
//! - legacy hierarchical: `%010d` split 2-4-4 → `<root>/DD/DDDD/LDDDD` (id 1 → `/00/0000/L0001`);
//! - long hierarchical: `%019d` split 3-4-4-4-4 → `<root>/DDD/DDDD/DDDD/DDDD/LDDDD`;
//! - hierarchical (the default) is the hybrid: ids < 2^31-1 legacy form, others long form; the
//!   listing walks both the 2-digit and the 3-digit top-level nodes;
//! - flat: `<root>/L%010d`.
//!
//! The id is the concatenation of the digit groups. Top-level children that are not ledger
//! parents (`available`, `cookies`, `LAYOUT`, `INSTANCEID`, `underreplication`, `idgen`,
//! `idgen-long`, `ID-*`, anything not all digits of the right width) are skipped.
//!
//! Safety (spec §4.7): the listing refuses a missing `<root>` and a missing or unknown `LAYOUT`
//! (misreading the tree would delete everything); any ZooKeeper error fails the whole listing,
//! and [`gc_decision`] deletes nothing for a failed listing and refuses an empty listing while
//! local ledgers exist unless explicitly overridden. Take the snapshot of local ledger ids
//! *before* listing (as Java does), so a ledger created meanwhile is never a candidate.

use std::collections::BTreeSet;

use log::debug;
use zookeeper_client::Client;

use crate::cluster::{self, is_special_znode, LedgerLayout};
use crate::config::MetadataConfig;
use crate::error::{MetaError, Result};
use crate::zk;

/// Largest id stored in the legacy 2-4-4 form by the hybrid layout (`id < Integer.MAX_VALUE`).
const HYBRID_LIMIT: u64 = i32::MAX as u64;

/// Path of ledger `id` relative to the ledgers root (starts with `/`).
pub fn ledger_path(layout: LedgerLayout, id: u64) -> String {
    let short = |id: u64| {
        let s = format!("{id:010}");
        format!("/{}/{}/L{}", &s[0..2], &s[2..6], &s[6..10])
    };
    let long = |id: u64| {
        let s = format!("{id:019}");
        format!(
            "/{}/{}/{}/{}/L{}",
            &s[0..3],
            &s[3..7],
            &s[7..11],
            &s[11..15],
            &s[15..19]
        )
    };
    match layout {
        LedgerLayout::Hierarchical if id < HYBRID_LIMIT => short(id),
        LedgerLayout::Hierarchical | LedgerLayout::LongHierarchical => long(id),
        LedgerLayout::LegacyHierarchical => short(id),
        LedgerLayout::Flat => format!("/L{id:010}"),
    }
}

fn digits(s: &str, n: usize) -> bool {
    s.len() == n && s.bytes().all(|b| b.is_ascii_digit())
}

/// Parses a leaf `L` + `n` digits.
fn leaf(s: &str, n: usize) -> Option<&str> {
    s.strip_prefix('L').filter(|d| digits(d, n))
}

fn parse_id(parts: &[&str]) -> Option<u64> {
    parts
        .concat()
        .parse::<u64>()
        .ok()
        .filter(|&id| id <= i64::MAX as u64)
}

async fn children(zk: &Client, path: &str) -> Result<Vec<String>> {
    // A node vanishing between listing its parent and listing it is fine (deleted ledger tree).
    Ok(zk::children_opt(zk, path).await?.unwrap_or_default())
}

/// Walks `<root>/<l1>/...` below a top-level node of the legacy form (2-4-L4).
async fn walk_short(zk: &Client, root: &str, l1: &str, out: &mut BTreeSet<u64>) -> Result<()> {
    for l2 in children(zk, &format!("{root}/{l1}")).await? {
        if !digits(&l2, 4) {
            continue;
        }
        for l in children(zk, &format!("{root}/{l1}/{l2}")).await? {
            match leaf(&l, 4).and_then(|d| parse_id(&[l1, &l2, d])) {
                Some(id) => {
                    out.insert(id);
                }
                None => debug!("skipping non-ledger znode {root}/{l1}/{l2}/{l}"),
            }
        }
    }
    Ok(())
}

/// Walks `<root>/<l1>/...` below a top-level node of the long form (3-4-4-4-L4).
async fn walk_long(zk: &Client, root: &str, l1: &str, out: &mut BTreeSet<u64>) -> Result<()> {
    for l2 in children(zk, &format!("{root}/{l1}")).await? {
        if !digits(&l2, 4) {
            continue;
        }
        for l3 in children(zk, &format!("{root}/{l1}/{l2}")).await? {
            if !digits(&l3, 4) {
                continue;
            }
            for l4 in children(zk, &format!("{root}/{l1}/{l2}/{l3}")).await? {
                if !digits(&l4, 4) {
                    continue;
                }
                for l in children(zk, &format!("{root}/{l1}/{l2}/{l3}/{l4}")).await? {
                    match leaf(&l, 4).and_then(|d| parse_id(&[l1, &l2, &l3, &l4, d])) {
                        Some(id) => {
                            out.insert(id);
                        }
                        None => debug!("skipping non-ledger znode {root}/{l1}/{l2}/{l3}/{l4}/{l}"),
                    }
                }
            }
        }
    }
    Ok(())
}

/// Lists the ids of all ledgers whose metadata znode exists, in the layout recorded in
/// `<root>/LAYOUT`. With `range`, only ids inside it are returned (top-level buckets that
/// cannot contain such ids are still listed; filtering is exact).
pub async fn live_ledgers(
    zk: &Client,
    cfg: &MetadataConfig,
    range: Option<std::ops::RangeInclusive<u64>>,
) -> Result<BTreeSet<u64>> {
    cluster::check_cluster_exists(zk, cfg).await?;
    let layout = cluster::read_layout(zk, cfg).await?.ok_or_else(|| {
        MetaError::Layout(format!(
            "{}/LAYOUT is missing; refusing to list ledgers",
            cfg.ledgers_root
        ))
    })?;
    let root = cfg.ledgers_root.as_str();
    let mut out = BTreeSet::new();
    let top = zk::children_opt(zk, root).await?.unwrap_or_default();
    for name in top {
        if is_special_znode(&name) {
            continue;
        }
        match layout {
            LedgerLayout::Hierarchical | LedgerLayout::LegacyHierarchical if digits(&name, 2) => {
                walk_short(zk, root, &name, &mut out).await?
            }
            LedgerLayout::Hierarchical | LedgerLayout::LongHierarchical if digits(&name, 3) => {
                walk_long(zk, root, &name, &mut out).await?
            }
            LedgerLayout::Flat => {
                if let Some(id) = leaf(&name, 10).and_then(|d| parse_id(&[d])) {
                    out.insert(id);
                }
            }
            _ => debug!("skipping top-level znode {root}/{name}"),
        }
    }
    if let Some(r) = range {
        out.retain(|id| r.contains(id));
    }
    Ok(out)
}

/// Which local ledgers to delete: those absent from the ZooKeeper listing.
///
/// - `listing` failed → error, nothing deleted (never treat a failed listing as "deleted");
/// - listing empty while local ledgers exist → [`MetaError::GcRefused`] unless
///   `allow_empty_listing` (a wrong root or wiped metadata would otherwise delete everything).
pub fn gc_decision(
    local: &BTreeSet<u64>,
    listing: std::result::Result<&BTreeSet<u64>, &MetaError>,
    allow_empty_listing: bool,
) -> Result<BTreeSet<u64>> {
    let live = match listing {
        Ok(l) => l,
        Err(e) => {
            return Err(MetaError::GcRefused(format!(
                "ledger listing failed, deleting nothing: {e}"
            )))
        }
    };
    if live.is_empty() && !local.is_empty() && !allow_empty_listing {
        return Err(MetaError::GcRefused(format!(
            "ZooKeeper lists no ledgers but {} exist locally; refusing to delete them all \
             (wrong ledgers root?); override explicitly if intended",
            local.len()
        )));
    }
    Ok(local.difference(live).copied().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_match_java() {
        assert_eq!(ledger_path(LedgerLayout::Hierarchical, 1), "/00/0000/L0001");
        assert_eq!(
            ledger_path(LedgerLayout::Hierarchical, 12345),
            "/00/0001/L2345"
        );
        assert_eq!(
            ledger_path(LedgerLayout::Hierarchical, 2147483646),
            "/21/4748/L3646"
        );
        assert_eq!(
            ledger_path(LedgerLayout::Hierarchical, 2147483647),
            "/000/0000/0021/4748/L3647"
        );
        assert_eq!(
            ledger_path(LedgerLayout::Hierarchical, 2147483648),
            "/000/0000/0021/4748/L3648"
        );
        assert_eq!(
            ledger_path(LedgerLayout::LongHierarchical, 1),
            "/000/0000/0000/0000/L0001"
        );
        assert_eq!(
            ledger_path(LedgerLayout::Hierarchical, i64::MAX as u64),
            "/922/3372/0368/5477/L5807"
        );
        assert_eq!(ledger_path(LedgerLayout::Flat, 7), "/L0000000007");
    }

    #[test]
    fn leaf_parsing() {
        assert_eq!(leaf("L0001", 4), Some("0001"));
        assert_eq!(leaf("L001", 4), None);
        assert_eq!(leaf("X0001", 4), None);
        assert_eq!(leaf("L00a1", 4), None);
        assert_eq!(parse_id(&["00", "0001", "2345"]), Some(12345));
        assert_eq!(parse_id(&["999", "9999", "9999", "9999", "9999"]), None); // > i64::MAX
    }

    #[test]
    fn gc_rules() {
        let local: BTreeSet<u64> = [1, 2, 3].into();
        let live: BTreeSet<u64> = [2, 9].into();
        assert_eq!(
            gc_decision(&local, Ok(&live), false).unwrap(),
            [1, 3].into()
        );
        let err = MetaError::Layout("x".into());
        assert!(gc_decision(&local, Err(&err), true).is_err());
        let empty = BTreeSet::new();
        assert!(matches!(
            gc_decision(&local, Ok(&empty), false),
            Err(MetaError::GcRefused(_))
        ));
        assert_eq!(gc_decision(&local, Ok(&empty), true).unwrap(), local);
        assert!(gc_decision(&empty, Ok(&empty), false).unwrap().is_empty());
    }
}
