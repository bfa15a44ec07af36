//! Removing a taken-over Java bookie's entry logs once no ledger this bookie stores has an
//! entry in them: the space Java's own collector would have reclaimed.
//!
//! After a takeover (`store::takeover`) Java's entry logs are only read, and new writes go to
//! this bookie's own files, so its compaction never frees them. Java's collector removes an entry
//! log once none of the ledgers in it exists in its ledger storage any more
//! (`GarbageCollectorThread.doGcEntryLogs`); this does the same with the ledgers this bookie's
//! shards hold (Java's taken over, those its journal replay brought, new ones), listed after the
//! collection dropped the deleted ones. A ledger no shard holds was deleted since the takeover
//! (recorded in `java-deleted` before the shards dropped it), dropped as over-replicated, or
//! deleted by Java before it (its collector had not come round). A log that still holds one
//! entry of a ledger the shards hold stays whole: Java's logs are not compacted.
//!
//! Which ledgers a log holds comes from the log, as Java's collector reads it: the ledgers map
//! a rotated log ends with, or a scan of its records (the log active when Java stopped has no
//! map), once per log: Java's files do not change after the takeover. A log that cannot be read
//! stops the pass before anything is removed; a scanned log whose records the scan could not all
//! account for (a hole a crash left mid-file: the scanner may have stepped over real records)
//! is kept for good, where Java's collector would trust its scan; a log of its header alone
//! (allocated ahead by Java) holds nothing and is left. `bookie_gc_RECLAIMED_DELETION_SPACE_BYTES` counts the bytes,
//! as Java's does.
//!
//! Rollback (README): a Java bookie started on the directories again finds those logs gone, as
//! after its own collection; they held only ledgers this bookie no longer stores, and entries
//! Java's journal replay writes again.

use std::collections::BTreeSet;
use std::fs;
use std::path::PathBuf;

use javastore::entrylog::{EntryLog, LOG_HEADER_BYTES};
use javastore::JavaStore;

/// What one pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Retired {
    /// Entry logs removed, and their bytes.
    pub logs: usize,
    pub bytes: u64,
    /// Logs whose ledgers were read in this pass (the first pass reads them all).
    pub logs_read: usize,
}

/// The GC thread's memory of Java's entry logs between passes.
#[derive(Default)]
pub struct JavaLogRetirer {
    /// Java's entry logs as listed at the start (read at the first pass).
    files: Option<Vec<(u64, PathBuf)>>,
    /// By place in `files`: the ledgers with an entry in the log, once read.
    ledgers_in: Vec<Option<Box<[u64]>>>,
    /// By place in `files`: removed, found gone, or kept for good (its ledgers unknown).
    retired: Vec<bool>,
}

impl JavaLogRetirer {
    /// Removes the Java entry logs in which none of `held` (the ledgers the shards hold) has
    /// an entry. An error names the file; what was removed before it stays removed (it was
    /// dead) and the next pass tries again.
    pub fn pass(&mut self, store: &JavaStore, held: &BTreeSet<u64>) -> Result<Retired, String> {
        let files = self.files.get_or_insert_with(|| store.entry_log_files());
        self.ledgers_in.resize(files.len(), None);
        self.retired.resize(files.len(), false);
        let mut out = Retired::default();
        let mut dead = Vec::new();
        for (place, (id, path)) in files.iter().enumerate() {
            if self.retired[place] {
                continue;
            }
            let ledgers = match &self.ledgers_in[place] {
                Some(l) => l,
                None => {
                    let ids = match EntryLog::open(path, *id) {
                        Ok(log) => log.ledger_ids().map_err(|e| e.to_string())?,
                        Err(_) if !path.exists() => {
                            self.retired[place] = true;
                            continue;
                        }
                        Err(e) => return Err(e.to_string()),
                    };
                    out.logs_read += 1;
                    let Some(ids) = ids else {
                        // Records the scan could not account for: it may hold any ledger.
                        log::warn!(
                            "takeover: Java entry log {} is kept for good: a scan of it could \
                             not account for every record",
                            path.display()
                        );
                        self.retired[place] = true;
                        continue;
                    };
                    self.ledgers_in[place].insert(ids.into_iter().collect())
                }
            };
            if !ledgers.iter().any(|l| held.contains(l)) {
                dead.push(place);
            }
        }
        for place in dead {
            let path = &files[place].1;
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
                        "takeover: removed Java entry log {} ({} bytes): no ledger this bookie \
                         stores has an entry in it",
                        path.display(),
                        m.len()
                    );
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(format!("cannot stat {}: {e}", path.display())),
            }
            self.retired[place] = true;
            self.ledgers_in[place] = None;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::path::Path;

    use javastore::entrylog::write::{body, legacy_log};
    use javastore::index::{relative_path, write as idx};
    use javastore::{JavaDirs, StorageKind};

    use super::*;

    /// Entry logs as a Java SortedLedgerStorage bookie leaves them. Rotated (with a ledgers
    /// map): log 0 holds ledgers 1 and 2, log 1 ledgers 2 and 3, log 2 ledger 4, log 3 ledger 9
    /// (deleted by Java, not yet collected: no index file). Log 4 is its header alone (allocated
    /// ahead); log 5 was active when Java stopped (no map): ledger 3, and ledger 10, created
    /// after the last checkpoint (no index file: its entries came back from Java's journal).
    fn java_ledger_dir(root: &Path) -> PathBuf {
        let cur = root.join("current");
        fs::create_dir_all(&cur).unwrap();
        let logs: [(&[i64], bool); 6] = [
            (&[1, 2], true),
            (&[2, 3], true),
            (&[4], true),
            (&[9], true),
            (&[], false),
            (&[3, 10], false),
        ];
        let mut slots: HashMap<i64, Vec<(u64, u64)>> = HashMap::new();
        for (id, (ledgers, map)) in logs.iter().enumerate() {
            let bodies: Vec<(i64, i64, Vec<u8>)> = ledgers
                .iter()
                .flat_map(|&l| {
                    let first = slots.get(&l).map_or(0, |s| s.len() as i64);
                    (first..first + 3).map(move |e| (l, e, body(l, e, e - 1, &[l as u8; 100])))
                })
                .collect();
            let refs: Vec<&[u8]> = bodies.iter().map(|(_, _, b)| b.as_slice()).collect();
            let (log, offsets) = legacy_log(&refs, *map);
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
        for (l, s) in &slots {
            if *l == 9 || *l == 10 {
                continue;
            }
            let p = cur.join(relative_path(*l as u64));
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(&p, idx::file(idx::header(1, &[7; 20], false, None), s)).unwrap();
        }
        cur
    }

    fn store(root: &Path) -> JavaStore {
        let dirs = JavaDirs::new(vec![root.join("journal")], vec![root.to_path_buf()], None);
        JavaStore::open(dirs, StorageKind::Sorted).unwrap()
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
    fn removes_a_java_entry_log_once_no_ledger_in_it_is_held() {
        let root = tempfile::tempdir().unwrap();
        let cur = java_ledger_dir(root.path());
        let store = store(root.path());
        let size = |n: &str| fs::metadata(cur.join(n)).unwrap().len();
        let mut held = BTreeSet::from([1, 2, 3, 4, 10]);
        let mut r = JavaLogRetirer::default();
        // The first pass reads every log; Java's own uncollected garbage (ledger 9) goes.
        let log3 = size("3.log");
        assert_eq!(
            r.pass(&store, &held).unwrap(),
            Retired {
                logs: 1,
                bytes: log3,
                logs_read: 6
            }
        );
        let all = ["0.log", "1.log", "2.log", "4.log", "5.log"];
        assert_eq!(logs_left(&cur), all);
        // Ledger 1 dropped: log 0 still holds ledger 2. Nothing is read again.
        held.remove(&1);
        assert_eq!(r.pass(&store, &held).unwrap(), Retired::default());
        assert_eq!(logs_left(&cur), all);
        // Ledger 2 too: log 0 goes; log 1 still holds ledger 3.
        let log0 = size("0.log");
        held.remove(&2);
        assert_eq!(
            r.pass(&store, &held).unwrap(),
            Retired {
                logs: 1,
                bytes: log0,
                logs_read: 0
            }
        );
        assert_eq!(logs_left(&cur), ["1.log", "2.log", "4.log", "5.log"]);
        // Ledger 3: log 1 goes (2 and 3 dropped), log 5 stays for ledger 10, which no index
        // knows; ledger 4's own log stays.
        held.remove(&3);
        assert_eq!(r.pass(&store, &held).unwrap().logs, 1);
        assert_eq!(logs_left(&cur), ["2.log", "4.log", "5.log"]);
        let mut reader = store.clone();
        for e in 0..3 {
            let b = reader.read(4, e).unwrap().expect("ledger 4's entry");
            assert_eq!(b, body(4, e as i64, e as i64 - 1, &[4; 100]));
        }
        // Ledgers 4 and 10: their logs go; the log of a header alone stays as Java made it.
        held.clear();
        assert_eq!(r.pass(&store, &held).unwrap().logs, 2);
        assert_eq!(logs_left(&cur), ["4.log"]);
        assert_eq!(r.pass(&store, &held).unwrap(), Retired::default());
    }

    #[test]
    fn an_unreadable_log_removes_nothing() {
        let root = tempfile::tempdir().unwrap();
        let cur = java_ledger_dir(root.path());
        let store = store(root.path());
        let held = BTreeSet::from([3, 4]);
        // Log 5's header is damaged after the start: which ledgers it holds is unknown, so no
        // log goes, not even the dead ones, and the error names the file.
        let log5 = cur.join("5.log");
        let good = fs::read(&log5).unwrap();
        let mut bad = good.clone();
        bad[0] = b'X';
        fs::write(&log5, &bad).unwrap();
        let mut r = JavaLogRetirer::default();
        let e = r.pass(&store, &held).unwrap_err();
        assert!(e.contains("5.log"), "{e}");
        assert_eq!(
            logs_left(&cur),
            ["0.log", "1.log", "2.log", "3.log", "4.log", "5.log"]
        );
        // Mended, the next pass goes ahead: log 0 (ledgers 1 and 2) and log 3 (ledger 9) go;
        // logs 1 and 5 hold ledger 3, log 2 ledger 4.
        fs::write(&log5, good).unwrap();
        let held = BTreeSet::from([3, 4]);
        assert_eq!(r.pass(&store, &held).unwrap().logs, 2);
        assert_eq!(logs_left(&cur), ["1.log", "2.log", "4.log", "5.log"]);
    }

    #[test]
    fn a_log_the_scan_cannot_vouch_for_is_kept() {
        let root = tempfile::tempdir().unwrap();
        let cur = java_ledger_dir(root.path());
        // Log 5 (no map) with a hole of zeros after its first record, records after it.
        let log5 = cur.join("5.log");
        let mut b = fs::read(&log5).unwrap();
        let first = u32::from_be_bytes(b[1024..1028].try_into().unwrap()) as usize;
        let second = 1024 + 4 + first;
        b[second..second + 64].fill(0);
        fs::write(&log5, &b).unwrap();
        let store = store(root.path());
        let mut r = JavaLogRetirer::default();
        // Nothing is held: every log with entries goes but log 5.
        let done = r.pass(&store, &BTreeSet::new()).unwrap();
        assert_eq!(done.logs, 4);
        assert_eq!(logs_left(&cur), ["4.log", "5.log"]);
        assert_eq!(
            r.pass(&store, &BTreeSet::new()).unwrap(),
            Retired::default()
        );
    }
}
