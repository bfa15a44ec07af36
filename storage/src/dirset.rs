//! A directory that spans several: the ledger storage of one shard over several ledger
//! directories (`ledgerDirectories=/d1,/d2,/d3`, `indexDirectories`), each possibly another
//! disk.
//!
//! Why at the port: the entry log names its files and never their directories, so spreading
//! them over disks is a placement decision the store need not know about. A file is found by
//! name in whichever member holds it (names are never reused, so at most one does); a new file
//! goes where its [`Placement`] says: the store's `MANIFEST` stays in the home member (it is
//! renamed over, and a rename cannot cross file systems), index files go to the index members
//! when there are any, and data files (entry-log segments) rotate over the shard's own ledger
//! directories, skipping those the disk checker marked full, and fall back to any other
//! writable member. A full directory so goes read-only alone: its files are still read and
//! deleted, no new ones are created there.
//!
//! A directory sync syncs every member (new and removed names must be durable wherever they
//! are).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// What a file is, for placement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileClass {
    /// Stays in the home member (renamed over: the commit point of a store).
    Pinned,
    /// An index file: the index members first, when there are any.
    Index,
    /// A data file: rotates over the preferred members.
    Data,
}

/// The members of a directory set and where new files go. Member 0 is the home.
pub struct Placement {
    pub members: Vec<PathBuf>,
    /// Per member: may new files go there (cleared by a disk checker when it fills).
    writable: Vec<Arc<AtomicBool>>,
    /// Members data files rotate over, then the others in `fallback` order.
    preferred: Vec<usize>,
    fallback: Vec<usize>,
    /// Members for index files (empty: as data files).
    index: Vec<usize>,
    classify: fn(&str) -> FileClass,
    next: AtomicUsize,
}

impl std::fmt::Debug for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Placement")
            .field("members", &self.members)
            .field("preferred", &self.preferred)
            .field("fallback", &self.fallback)
            .field("index", &self.index)
            .finish()
    }
}

impl Placement {
    /// `members[0]` is the home; `writable[i]` is member i's flag; data files rotate over
    /// `preferred`, then go to the other members in order; index files go to `index` first.
    /// Indices out of range are ignored.
    pub fn new(
        members: Vec<PathBuf>,
        writable: Vec<Arc<AtomicBool>>,
        preferred: Vec<usize>,
        index: Vec<usize>,
        classify: fn(&str) -> FileClass,
    ) -> Placement {
        let n = members.len();
        let preferred: Vec<usize> = preferred.into_iter().filter(|&i| i < n).collect();
        let index: Vec<usize> = index.into_iter().filter(|&i| i < n).collect();
        let fallback = (0..n)
            .filter(|i| !preferred.contains(i) && !index.contains(i))
            .collect();
        let mut writable = writable;
        writable.resize_with(n, || Arc::new(AtomicBool::new(true)));
        Placement {
            members,
            writable,
            preferred,
            fallback,
            index,
            classify,
            next: AtomicUsize::new(0),
        }
    }

    fn is_writable(&self, member: usize) -> bool {
        self.writable[member].load(Ordering::Relaxed)
    }

    /// The member a new file called `name` is created in.
    pub fn member_for(&self, name: &str) -> usize {
        let class = (self.classify)(name);
        if class == FileClass::Pinned || self.members.len() <= 1 {
            return 0;
        }
        if class == FileClass::Index {
            if let Some(&m) = self.index.iter().find(|&&m| self.is_writable(m)) {
                return m;
            }
        }
        let n = self.preferred.len();
        if n > 0 {
            let start = self.next.fetch_add(1, Ordering::Relaxed);
            for k in 0..n {
                let m = self.preferred[(start + k) % n];
                if self.is_writable(m) {
                    return m;
                }
            }
        }
        if let Some(&m) = self.fallback.iter().find(|&&m| self.is_writable(m)) {
            return m;
        }
        if let Some(&m) = self.index.iter().find(|&&m| self.is_writable(m)) {
            return m;
        }
        // Every member full: the home, where the write fails and the store reports it.
        self.preferred.first().copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str) -> FileClass {
        if name.starts_with("MANIFEST") {
            FileClass::Pinned
        } else if name.ends_with(".idx") {
            FileClass::Index
        } else {
            FileClass::Data
        }
    }

    #[test]
    fn data_rotates_over_preferred_and_skips_full_members() {
        let flags: Vec<Arc<AtomicBool>> = (0..4).map(|_| Arc::new(AtomicBool::new(true))).collect();
        let members = (0..4).map(|i| PathBuf::from(format!("/d{i}"))).collect();
        let p = Placement::new(members, flags.clone(), vec![0, 2], vec![3], class);
        let picks: Vec<usize> = (0..4).map(|_| p.member_for("a.log")).collect();
        assert_eq!(picks, vec![0, 2, 0, 2]);
        assert_eq!(p.member_for("MANIFEST.tmp"), 0);
        assert_eq!(p.member_for("x.idx"), 3);
        flags[0].store(false, Ordering::Relaxed);
        assert_eq!(p.member_for("MANIFEST"), 0, "pinned even when full");
        assert!(
            (0..4).all(|_| p.member_for("b.log") == 2),
            "a full member is skipped"
        );
        flags[2].store(false, Ordering::Relaxed);
        assert_eq!(
            p.member_for("c.log"),
            1,
            "then the other ledger directories"
        );
        flags[1].store(false, Ordering::Relaxed);
        flags[3].store(false, Ordering::Relaxed);
        assert_eq!(
            p.member_for("d.log"),
            0,
            "all full: the home (the write fails there)"
        );
        assert_eq!(p.member_for("y.idx"), 0);
    }
}
