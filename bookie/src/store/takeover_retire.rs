//! Retiring a taken-over Java bookie's entry logs once nothing in them can be read any more:
//! the space Java's own collector would have reclaimed.
//!
//! After a takeover (`store::takeover`) Java's entry logs are only read, and new writes go to
//! this bookie's own files, so its compaction never frees them. An entry log none of whose
//! entries belongs to a live Java ledger holds nothing a client can read: every ledger in it
//! was deleted since the takeover (recorded in `java-deleted` before the shards dropped it), or
//! had left Java's index before it (Java deleted it and its collector had not come round). Such
//! a log is removed, as Java's `GarbageCollectorThread` removes an entry log whose ledgers are
//! all gone (`bookie_gc_RECLAIMED_DELETION_SPACE_BYTES` counts it, as Java's does). A log that
//! still holds one entry of a live ledger stays whole: copying live entries out of Java's logs
//! (compaction) is not done. A log of its header alone (one Java allocated ahead of need) is
//! left: there is nothing in it to reclaim.
//!
//! Which logs a ledger's entries lie in comes from Java's index (one pass over its slots or its
//! RocksDB keys), read once per ledger and kept: Java's files do not change after the takeover.
//! The rule errs on keeping: an index that cannot be read stops the pass before anything is
//! removed. A pass runs when the set of deleted ledgers has grown (and once at the first
//! collection after a start), on the GC thread.
//!
//! Rollback (README): a Java bookie started on the directories again finds those logs gone, as
//! after its own collection; they held only ledgers this bookie no longer stores.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::fs;
use std::path::PathBuf;

use javastore::entrylog::LOG_HEADER_BYTES;
use javastore::JavaStore;

use crate::store::takeover::Legacy;

/// What one pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Retired {
    /// Entry logs removed, and their bytes.
    pub logs: usize,
    pub bytes: u64,
    /// Live ledgers whose entry logs were read from Java's index in this pass (the first pass
    /// reads them all; later ones none).
    pub ledgers_read: usize,
}

/// The GC thread's memory of Java's entry logs between passes.
#[derive(Default)]
pub struct JavaLogRetirer {
    /// Java's entry logs as listed at the start (empty until the first pass).
    files: Vec<PathBuf>,
    /// Each live Java ledger's entry logs, as places in `files`, by its index.
    logs_of: HashMap<u64, Box<[u32]>>,
    /// By place in `files`: removed, or found gone, already.
    retired: Vec<bool>,
    /// How many ledgers were deleted at the last pass: none since, nothing to do.
    deleted_seen: Option<usize>,
}

impl JavaLogRetirer {
    /// Removes the Java entry logs no live ledger points into, when ledgers were deleted since
    /// the last pass. An error names the file or ledger; what was removed before it stays
    /// removed (it was dead) and the next pass tries again.
    pub fn pass(&mut self, legacy: &Legacy) -> Result<Retired, String> {
        let deleted = legacy.deleted_ids();
        if self.deleted_seen == Some(deleted.len()) {
            return Ok(Retired::default());
        }
        if self.deleted_seen.is_none() && self.files.is_empty() {
            self.files = legacy.store.entry_log_files();
            self.retired = vec![false; self.files.len()];
        }
        let live = legacy
            .ledgers
            .keys()
            .copied()
            .filter(|l| !deleted.contains(l));
        let mut out = Retired::default();
        let kept = self.kept_logs(&legacy.store, live, &mut out)?;
        for (place, path) in self.files.iter().enumerate() {
            if kept[place] || self.retired[place] {
                continue;
            }
            match fs::metadata(path) {
                // A log of its header alone (Java allocates the next log ahead of need): nothing
                // to reclaim, and left as Java made it.
                Ok(m) if m.len() <= LOG_HEADER_BYTES => continue,
                Ok(m) => {
                    fs::remove_file(path)
                        .map_err(|e| format!("cannot remove {}: {e}", path.display()))?;
                    out.logs += 1;
                    out.bytes += m.len();
                    log::info!(
                        "takeover: removed Java entry log {} ({} bytes): no live ledger has an \
                         entry in it",
                        path.display(),
                        m.len()
                    );
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(format!("cannot stat {}: {e}", path.display())),
            }
            self.retired[place] = true;
        }
        self.logs_of.retain(|l, _| !deleted.contains(l));
        self.deleted_seen = Some(deleted.len());
        Ok(out)
    }

    /// By place in `files`: whether one of `live` has an entry in that log. A ledger's logs are
    /// read from Java's index the first time it is asked about.
    fn kept_logs(
        &mut self,
        store: &JavaStore,
        live: impl Iterator<Item = u64>,
        out: &mut Retired,
    ) -> Result<Vec<bool>, String> {
        let place: HashMap<&PathBuf, u32> = self
            .files
            .iter()
            .enumerate()
            .map(|(i, p)| (p, i as u32))
            .collect();
        let mut kept = vec![false; self.files.len()];
        for ledger in live {
            let places = match self.logs_of.entry(ledger) {
                Entry::Occupied(o) => o.into_mut(),
                Entry::Vacant(v) => {
                    let logs = store
                        .log_files_of(ledger)
                        .map_err(|e| format!("Java ledger {ledger}'s entry logs: {e}"))?;
                    out.ledgers_read += 1;
                    v.insert(logs.iter().filter_map(|p| place.get(p).copied()).collect())
                }
            };
            for &p in places.iter() {
                kept[p as usize] = true;
            }
        }
        Ok(kept)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use javastore::entrylog::write::{body, legacy_log};
    use javastore::index::{relative_path, write as idx};
    use javastore::{JavaDirs, StorageKind};

    use super::*;

    /// Entry logs as a Java SortedLedgerStorage bookie leaves them: log 0 holds ledgers 1 and
    /// 2, log 1 ledgers 2 and 3, log 2 ledger 4 alone, log 3 ledger 9, which has no index file
    /// (deleted by Java, not yet collected); log 4 is its header alone (allocated ahead). Each
    /// ledger has an index file but ledger 9.
    fn java_ledger_dir(root: &Path) -> PathBuf {
        let cur = root.join("current");
        fs::create_dir_all(&cur).unwrap();
        let logs: [&[i64]; 4] = [&[1, 2], &[2, 3], &[4], &[9]];
        let mut slots: HashMap<i64, Vec<(u64, u64)>> = HashMap::new();
        for (id, ledgers) in logs.iter().enumerate() {
            let bodies: Vec<(i64, i64, Vec<u8>)> = ledgers
                .iter()
                .flat_map(|&l| {
                    let first = slots.get(&l).map_or(0, |s| s.len() as i64);
                    (first..first + 3).map(move |e| (l, e, body(l, e, e - 1, &[l as u8; 100])))
                })
                .collect();
            let refs: Vec<&[u8]> = bodies.iter().map(|(_, _, b)| b.as_slice()).collect();
            let (log, offsets) = legacy_log(&refs, true);
            fs::write(cur.join(format!("{id:x}.log")), log).unwrap();
            for ((l, e, _), off) in bodies.iter().zip(offsets) {
                let packed = javastore::Location {
                    log_id: id as u64,
                    offset: off,
                }
                .packed();
                slots.entry(*l).or_default().push((*e as u64, packed));
            }
        }
        // The next log, allocated ahead by Java: its header only.
        let (header_only, _) = legacy_log(&[], false);
        fs::write(cur.join("4.log"), header_only).unwrap();
        for (l, s) in &slots {
            if *l == 9 {
                continue;
            }
            let p = cur.join(relative_path(*l as u64));
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(&p, idx::file(idx::header(1, &[7; 20], false, None), s)).unwrap();
        }
        cur
    }

    fn legacy(root: &Path) -> Legacy {
        let dirs = JavaDirs::new(vec![root.join("journal")], vec![root.to_path_buf()], None);
        let store = JavaStore::open(dirs, StorageKind::Sorted).unwrap();
        Legacy::for_tests(store, &root.join(crate::store::takeover::DELETED_FILE))
    }

    fn logs_left(cur: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(cur)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".log"))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn removes_a_java_entry_log_once_every_ledger_in_it_is_deleted() {
        let root = tempfile::tempdir().unwrap();
        let cur = java_ledger_dir(root.path());
        let legacy = legacy(root.path());
        assert_eq!(
            legacy.ledgers.keys().copied().collect::<Vec<_>>(),
            [1, 2, 3, 4]
        );
        let size = |n: &str| fs::metadata(cur.join(n)).unwrap().len();
        let mut r = JavaLogRetirer::default();
        // The first pass: Java's own uncollected garbage (ledger 9, in no index) goes.
        let log3 = size("3.log");
        assert_eq!(
            r.pass(&legacy).unwrap(),
            Retired {
                logs: 1,
                bytes: log3,
                ledgers_read: 4
            }
        );
        assert_eq!(logs_left(&cur), ["0.log", "1.log", "2.log", "4.log"]);
        // Nothing deleted since: nothing to do.
        assert_eq!(r.pass(&legacy).unwrap(), Retired::default());
        // Ledger 1 deleted: log 0 still holds ledger 2.
        legacy.record_deleted(&[1]).unwrap();
        assert_eq!(r.pass(&legacy).unwrap(), Retired::default());
        assert_eq!(logs_left(&cur), ["0.log", "1.log", "2.log", "4.log"]);
        // Ledger 2 too: log 0 is dead; log 1 still holds ledger 3.
        let log0 = size("0.log");
        legacy.record_deleted(&[2]).unwrap();
        assert_eq!(
            r.pass(&legacy).unwrap(),
            Retired {
                logs: 1,
                bytes: log0,
                ledgers_read: 0
            }
        );
        assert_eq!(logs_left(&cur), ["1.log", "2.log", "4.log"]);
        // A ledger that is not Java's changes nothing.
        legacy.record_deleted(&[77]).unwrap();
        assert_eq!(r.pass(&legacy).unwrap(), Retired::default());
        // Ledger 4: its own log goes. Ledger 3 is still read from log 1.
        legacy.record_deleted(&[4]).unwrap();
        assert_eq!(r.pass(&legacy).unwrap().logs, 1);
        assert_eq!(logs_left(&cur), ["1.log", "4.log"]);
        let mut store = legacy.store.clone();
        for e in 0..3 {
            let b = store.read(3, e).unwrap().expect("ledger 3's entry");
            assert_eq!(&b[..16], &body(3, e as i64, e as i64 - 1, &[3; 100])[..16]);
        }
    }

    #[test]
    fn an_unreadable_index_removes_nothing() {
        let root = tempfile::tempdir().unwrap();
        let cur = java_ledger_dir(root.path());
        let legacy = legacy(root.path());
        legacy.record_deleted(&[1, 2]).unwrap();
        // Ledger 3's index file is damaged after the start: which logs it needs is unknown, so
        // no log goes, not even the dead ones, and the error names the ledger.
        let index3 = cur.join(relative_path(3));
        let good = fs::read(&index3).unwrap();
        fs::write(&index3, b"not an index").unwrap();
        let mut r = JavaLogRetirer::default();
        let e = r.pass(&legacy).unwrap_err();
        assert!(e.contains("ledger 3"), "{e}");
        assert_eq!(
            logs_left(&cur),
            ["0.log", "1.log", "2.log", "3.log", "4.log"]
        );
        // Mended, the next pass goes ahead: log 0 (ledgers 1 and 2) and log 3 (ledger 9).
        fs::write(&index3, good).unwrap();
        assert_eq!(r.pass(&legacy).unwrap().logs, 2);
        assert_eq!(logs_left(&cur), ["1.log", "2.log", "4.log"]);
    }
}
