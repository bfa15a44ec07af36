//! How the shards map to the journal, ledger and index directories (`journalDirectories`,
//! `ledgerDirectories`, `indexDirectories`, each a list as in Java).
//!
//! - **Journal:** shard n journals in `<journal dir n mod J>/shard-n`. A journal is a shard's
//!   own (one group commit per shard), so a journal directory is a shard's, and the bookie runs
//!   at least one shard per journal directory (the default shard count is the larger of the
//!   cores and J; fewer shards than journal directories is refused, since a directory would go
//!   unused). With J disks, J shards commit in parallel, one per disk.
//! - **Ledgers:** every shard has `shard-n` below each ledger directory, one directory set
//!   (`storage::dirset`) holding its ledger storage. Its entry-log segments rotate over the
//!   ledger directories the shard owns (directory d belongs to shard d mod N when there are at
//!   least as many directories as shards, else shard n owns directory n mod L), skipping the
//!   ones the disk checker marked full, and fall back to any other writable one: a full
//!   directory goes read-only alone, and the bookie only when all are full. Index runs and
//!   metadata snapshots go to the index directories when `indexDirectories` is set. The
//!   store's MANIFEST stays in its home: the member that already holds it, or else the first
//!   directory the shard owns (so adding a directory later, with `allowStorageExpansion`, moves
//!   nothing).
//!
//! Why not Java's one-ledger-storage-per-directory with ledgers hashed to directories: here a
//! ledger belongs to a shard, and a shard's flush is one sorted write stream; spreading that
//! stream's segments over the shard's disks keeps a ledger's run contiguous within a segment
//! (the read-ahead needs that) while filling every disk.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use storage::dirset::Placement;

use crate::admin::readonly::{BookieState, DirKind};
use crate::config::BookieConfig;

/// A shard's directories.
pub struct ShardDirs {
    pub journal: PathBuf,
    /// The ledger storage's directory set (member 0 is its home).
    pub ledgers: Arc<Placement>,
}

/// Refuses a configuration that would leave a journal directory without a shard.
pub fn check(config: &BookieConfig, shards: usize) -> Result<(), String> {
    let journals = config.journal_dirs.len();
    if shards < journals {
        return Err(format!(
            "{journals} journal directories but {shards} shards: each journal directory is \
             written by its own shard; run at least {journals} shards (--shards) or list fewer \
             journalDirectories"
        ));
    }
    Ok(())
}

/// Whether shard `shard` of `shards` owns ledger directory `dir` of `dirs`.
fn owns(shard: usize, shards: usize, dir: usize, dirs: usize) -> bool {
    if dirs >= shards {
        dir % shards == shard
    } else {
        dir == shard % dirs
    }
}

/// The directories of shard `shard` of `shards`; `state` gives each directory's writable flag.
pub fn for_shard(
    config: &BookieConfig,
    shard: usize,
    shards: usize,
    state: &BookieState,
) -> Result<ShardDirs, String> {
    let sub = format!("shard-{shard}");
    let journal = config.journal_dirs[shard % config.journal_dirs.len()].join(&sub);
    let flag = |path: &Path, kind: DirKind| -> Arc<AtomicBool> {
        state
            .dirs
            .iter()
            .find(|d| d.kind == kind && d.path == path)
            .map(|d| d.writable_flag())
            .unwrap_or_else(|| Arc::new(AtomicBool::new(true)))
    };
    let ledgers = &config.ledger_dirs;
    let indexes = config.index_dirs.as_deref().unwrap_or(&[]);
    // Home: the ledger member holding the MANIFEST, else the first owned directory.
    let with_manifest: Vec<usize> = (0..ledgers.len())
        .filter(|&k| {
            ledgers[k]
                .join(&sub)
                .join(entrylog::format::MANIFEST_NAME)
                .exists()
        })
        .collect();
    let home = match with_manifest.as_slice() {
        [] => (0..ledgers.len())
            .find(|&k| owns(shard, shards, k, ledgers.len()))
            .unwrap_or(0),
        [one] => *one,
        several => {
            return Err(format!(
                "shard {shard} has a MANIFEST in several ledger directories ({}): one of them \
                 is not this bookie's; remove it",
                several
                    .iter()
                    .map(|&k| ledgers[k].join(&sub).display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        }
    };
    // Members: the home first, then the other ledger directories, then the index ones.
    let mut order: Vec<usize> = vec![home];
    order.extend((0..ledgers.len()).filter(|&k| k != home));
    let mut members: Vec<PathBuf> = order.iter().map(|&k| ledgers[k].join(&sub)).collect();
    let mut writable: Vec<Arc<AtomicBool>> = order
        .iter()
        .map(|&k| flag(&ledgers[k], DirKind::Ledger))
        .collect();
    let preferred: Vec<usize> = (0..order.len())
        .filter(|&m| owns(shard, shards, order[m], ledgers.len()))
        .collect();
    let mut index_members = Vec::new();
    for k in 0..indexes.len() {
        // The shard's own index directory first.
        let k = (k + shard) % indexes.len();
        index_members.push(members.len());
        members.push(indexes[k].join(&sub));
        writable.push(flag(&indexes[k], DirKind::Index));
    }
    Ok(ShardDirs {
        journal,
        ledgers: Arc::new(Placement::new(
            members,
            writable,
            preferred,
            index_members,
            entrylog::format::placement_class,
        )),
    })
}

/// Every checked directory, with its kind (ledger directories first: the metrics name the
/// first as Java's `bookie_ledger_*`).
pub fn checked(config: &BookieConfig) -> Vec<(&Path, DirKind)> {
    let mut v: Vec<(&Path, DirKind)> = Vec::new();
    v.extend(
        config
            .ledger_dirs
            .iter()
            .map(|d| (d.as_path(), DirKind::Ledger)),
    );
    for d in config.index_dirs.iter().flatten() {
        v.push((d.as_path(), DirKind::Index));
    }
    v.extend(
        config
            .journal_dirs
            .iter()
            .map(|d| (d.as_path(), DirKind::Journal)),
    );
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DiskConfig;

    fn config(journals: usize, ledgers: usize, root: &Path) -> BookieConfig {
        BookieConfig {
            journal_dirs: (0..journals).map(|k| root.join(format!("j{k}"))).collect(),
            ledger_dirs: (0..ledgers).map(|k| root.join(format!("l{k}"))).collect(),
            ..BookieConfig::default()
        }
    }

    #[test]
    fn shards_own_journals_and_ledger_directories() {
        let tmp = tempfile::tempdir().unwrap();
        let c = config(2, 3, tmp.path());
        let state = BookieState::new(&DiskConfig::default(), &checked(&c));
        assert!(check(&c, 1).is_err(), "a journal directory without a shard");
        check(&c, 2).unwrap();
        let d0 = for_shard(&c, 0, 2, &state).unwrap();
        let d1 = for_shard(&c, 1, 2, &state).unwrap();
        assert_eq!(d0.journal, tmp.path().join("j0/shard-0"));
        assert_eq!(d1.journal, tmp.path().join("j1/shard-1"));
        // 3 ledger directories, 2 shards: shard 0 owns l0 and l2, shard 1 owns l1.
        assert_eq!(d0.ledgers.members[0], tmp.path().join("l0/shard-0"));
        assert_eq!(d1.ledgers.members[0], tmp.path().join("l1/shard-1"));
        let picks: Vec<usize> = (0..4)
            .map(|_| d0.ledgers.member_for("0000000000000001.log"))
            .collect();
        let paths: Vec<&Path> = picks
            .iter()
            .map(|&m| d0.ledgers.members[m].as_path())
            .collect();
        assert!(paths.contains(&tmp.path().join("l0/shard-0").as_path()));
        assert!(paths.contains(&tmp.path().join("l2/shard-0").as_path()));
        assert_eq!(d0.ledgers.member_for("MANIFEST"), 0);
        // l0 full: shard 0 writes to l2 only; the bookie stays writable.
        state.dirs[0]
            .writable_flag()
            .store(false, std::sync::atomic::Ordering::Relaxed);
        assert!((0..4).all(
            |_| d0.ledgers.members[d0.ledgers.member_for("0000000000000002.log")]
                == tmp.path().join("l2/shard-0")
        ));
    }

    #[test]
    fn the_home_is_where_the_manifest_is() {
        let tmp = tempfile::tempdir().unwrap();
        let c = config(1, 2, tmp.path());
        let state = BookieState::new(&DiskConfig::default(), &checked(&c));
        // Written when the bookie had only l1 (say): found there after l0 was added.
        std::fs::create_dir_all(tmp.path().join("l1/shard-0")).unwrap();
        std::fs::write(tmp.path().join("l1/shard-0/MANIFEST"), b"m").unwrap();
        let d = for_shard(&c, 0, 1, &state).unwrap();
        assert_eq!(d.ledgers.members[0], tmp.path().join("l1/shard-0"));
        std::fs::create_dir_all(tmp.path().join("l0/shard-0")).unwrap();
        std::fs::write(tmp.path().join("l0/shard-0/MANIFEST"), b"m").unwrap();
        let err = for_shard(&c, 0, 1, &state).err().unwrap();
        assert!(err.contains("several ledger directories"), "{err}");
    }
}
