//! Java's journal replay (docs/java-formats.md §7.7), read-only: for each journal in order,
//! from its `lastMark`, every file in id order, every record with Java's rules. The records
//! after the mark are what a Java bookie acknowledged but had not yet checkpointed into its
//! ledger storage: after a SIGKILL, the only copy of the newest entries.
//!
//! [`replay`] hands the records over as they come; [`Replayed`] applies them as Java does:
//! a master key creates the ledger, entries and fences and explicit LACs of a ledger that
//! neither storage nor an earlier master key record knows are skipped (the ledger was deleted).

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::journal::{JournalFile, LastMark, Record, ScanEnd};
use crate::{JavaDirs, JavaError};

/// Where one journal's replay started and ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JournalReplay {
    pub journal: usize,
    pub mark: LastMark,
    /// (file id, offset after its last whole record, why the scan stopped) per file scanned.
    pub files: Vec<(u64, u64, ScanEnd)>,
    pub records: u64,
}

/// Calls `f(journal, file id, offset, record)` for every record after the marks, journal by
/// journal. A missing mark file (the mark names a file that is gone) is refused as Java does.
pub fn replay(
    dirs: &JavaDirs,
    skip_invalid: bool,
    f: impl FnMut(usize, u64, u64, Record),
) -> Result<Vec<JournalReplay>, JavaError> {
    let marks: Vec<LastMark> = (0..dirs.journal_dirs.len())
        .map(|j| dirs.last_mark(j))
        .collect();
    replay_from(dirs, &marks, skip_invalid, f)
}

/// [`replay`] from the given marks (one per journal) instead of the `lastMark` files: from
/// where an earlier takeover's replay ended.
pub fn replay_from(
    dirs: &JavaDirs,
    marks: &[LastMark],
    skip_invalid: bool,
    mut f: impl FnMut(usize, u64, u64, Record),
) -> Result<Vec<JournalReplay>, JavaError> {
    let mut out = Vec::new();
    for j in 0..dirs.journal_dirs.len() {
        let mark = marks.get(j).copied().unwrap_or_default();
        let files: Vec<(u64, std::path::PathBuf)> = dirs
            .journal_files(j)?
            .into_iter()
            .filter(|(id, _)| *id >= mark.file_id)
            .collect();
        if mark.file_id > 0 && files.first().is_none_or(|(id, _)| *id != mark.file_id) {
            return Err(JavaError::new(
                &crate::layout::current(&dirs.journal_dirs[j]),
                format!(
                    "the journal file of the last mark, {:x}.txn, is missing (Java refuses to \
                     start too: \"Recovery log {} is missing\")",
                    mark.file_id, mark.file_id
                ),
            ));
        }
        let mut r = JournalReplay {
            journal: j,
            mark,
            files: Vec::new(),
            records: 0,
        };
        for (id, path) in files {
            let jf = JournalFile::open(&path, id)?;
            let from = if id == mark.file_id { mark.offset } else { 0 };
            let (end, why) = jf.scan(from, skip_invalid, |off, rec| {
                r.records += 1;
                f(j, id, off, rec)
            })?;
            r.files.push((id, end, why));
        }
        out.push(r);
    }
    Ok(out)
}

impl JournalReplay {
    /// Where this replay ended: a later replay from here reads nothing it read.
    pub fn end(&self) -> LastMark {
        self.files
            .last()
            .map(|(id, end, _)| LastMark {
                file_id: *id,
                offset: *end,
            })
            .unwrap_or(self.mark)
    }
}

/// One ledger as the replay leaves it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplayedLedger {
    /// The key of a master key record, if the replay met one.
    pub master_key: Option<Bytes>,
    pub fenced: bool,
    pub explicit_lac: Option<Bytes>,
    /// Entry bodies by entry id (a later record of the same entry wins).
    pub entries: BTreeMap<i64, Bytes>,
}

/// The replay applied with Java's rules.
#[derive(Clone, Debug, Default)]
pub struct Replayed {
    pub ledgers: BTreeMap<i64, ReplayedLedger>,
    /// Records skipped because their ledger was unknown (deleted) and had no master key.
    pub skipped_unknown: u64,
    /// Records with a negative entry id this reader does not know (Java skips them too).
    pub skipped_other: u64,
}

impl Replayed {
    /// Applies one record; `known(ledger)` says whether ledger storage holds the ledger.
    pub fn apply(&mut self, rec: Record, known: impl Fn(i64) -> bool) {
        let ledger = rec.ledger();
        if let Record::MasterKey { key, .. } = &rec {
            self.ledgers.entry(ledger).or_default().master_key = Some(key.clone());
            return;
        }
        if let Record::Other { .. } = rec {
            self.skipped_other += 1;
            return;
        }
        if !self.ledgers.contains_key(&ledger) && !known(ledger) {
            self.skipped_unknown += 1;
            return;
        }
        let l = self.ledgers.entry(ledger).or_default();
        match rec {
            Record::Entry { entry, body, .. } => {
                l.entries.insert(entry, body);
            }
            Record::Fence { .. } => l.fenced = true,
            Record::ExplicitLac { body, .. } => l.explicit_lac = Some(body),
            Record::MasterKey { .. } | Record::Other { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entrylog::write::body;
    use crate::journal::write;
    use crate::layout::current;

    fn entry(l: i64, e: i64) -> Record {
        Record::Entry {
            ledger: l,
            entry: e,
            body: Bytes::from(body(l, e, e - 1, b"x")),
        }
    }

    #[test]
    fn from_the_mark_across_files_with_java_rules() {
        let t = tempfile::tempdir().unwrap();
        let (j, l) = (t.path().join("j"), t.path().join("l"));
        std::fs::create_dir_all(current(&j)).unwrap();
        std::fs::create_dir_all(current(&l)).unwrap();
        let dirs = JavaDirs::new(vec![j.clone()], vec![l.clone()], None);
        // File 0x10: ledger 1's key and entries 0-1 (checkpointed), then entry 2 after the mark.
        let mut a = write::header(6);
        let key = Record::MasterKey {
            ledger: 1,
            key: Bytes::from_static(b"key-1"),
        };
        write::record(&mut a, &key);
        write::record(&mut a, &entry(1, 0));
        write::record(&mut a, &entry(1, 1));
        let mark = a.len() as u64;
        write::record(&mut a, &entry(1, 2));
        write::pad(&mut a, 512);
        std::fs::write(current(&j).join("10.txn"), &a).unwrap();
        // File 0x11: ledger 9 (deleted: unknown, no key), ledger 2 with its key and a fence,
        // and ledger 3's fence (known to storage), an explicit LAC of ledger 1.
        let mut b = write::header(6);
        write::record(&mut b, &entry(9, 0));
        write::record(
            &mut b,
            &Record::MasterKey {
                ledger: 2,
                key: Bytes::from_static(b"key-2"),
            },
        );
        write::record(&mut b, &entry(2, 0));
        write::record(&mut b, &Record::Fence { ledger: 2 });
        write::record(&mut b, &Record::Fence { ledger: 3 });
        write::record(
            &mut b,
            &Record::ExplicitLac {
                ledger: 1,
                body: Bytes::from_static(&[7u8; 20]),
            },
        );
        std::fs::write(current(&j).join("11.txn"), &b).unwrap();
        let m = [0x10u64.to_be_bytes(), mark.to_be_bytes()].concat();
        std::fs::write(current(&l).join("lastMark"), m).unwrap();

        let mut replayed = Replayed::default();
        let summary = replay(&dirs, false, |_, _, _, r| {
            replayed.apply(r, |ledger| ledger == 1 || ledger == 3)
        })
        .unwrap();
        assert_eq!(summary.len(), 1);
        assert_eq!(summary[0].records, 7);
        assert_eq!(summary[0].files.len(), 2);
        let l1 = &replayed.ledgers[&1];
        assert_eq!(l1.entries.keys().copied().collect::<Vec<_>>(), vec![2]);
        assert_eq!(l1.master_key, None);
        assert!(l1.explicit_lac.is_some());
        let l2 = &replayed.ledgers[&2];
        assert_eq!(l2.master_key.as_deref(), Some(&b"key-2"[..]));
        assert!(l2.fenced);
        assert!(replayed.ledgers[&3].fenced);
        assert!(!replayed.ledgers.contains_key(&9));
        assert_eq!(replayed.skipped_unknown, 1);

        // The mark's file gone: refused, as Java does.
        std::fs::remove_file(current(&j).join("10.txn")).unwrap();
        let err = replay(&dirs, false, |_, _, _, _| {}).unwrap_err();
        assert!(err.to_string().contains("10.txn, is missing"), "{err}");
    }
}
