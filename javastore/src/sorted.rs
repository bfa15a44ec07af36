//! A ledger-level view of an Interleaved/SortedLedgerStorage bookie's directories: which
//! ledgers exist (those with an index file), each one's master key, fenced bit, explicit LAC
//! and last entry, and any entry's body. Opening lists directories only; index headers, slots
//! and entry logs are read when asked, so the view is ready in the time of a directory walk
//! whatever the size of the data.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use bytes::Bytes;

use crate::entrylog::EntryLog;
use crate::index::IdxFile;
use crate::{JavaDirs, JavaError, Location};

/// What the index file says of a ledger.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LedgerState {
    pub master_key: Bytes,
    pub fenced: bool,
    pub explicit_lac: Option<Bytes>,
    /// The highest entry id in the index (entries written after the last checkpoint are in
    /// the journal only).
    pub last_entry: Option<u64>,
}

pub struct SortedStore {
    pub dirs: JavaDirs,
    index: BTreeMap<u64, PathBuf>,
    logs: BTreeMap<u64, PathBuf>,
    open_logs: HashMap<u64, EntryLog>,
}

/// A copy shares the listing, not the open entry logs: one per reader thread.
impl Clone for SortedStore {
    fn clone(&self) -> SortedStore {
        SortedStore {
            dirs: self.dirs.clone(),
            index: self.index.clone(),
            logs: self.logs.clone(),
            open_logs: HashMap::new(),
        }
    }
}

impl SortedStore {
    pub fn open(dirs: JavaDirs) -> Result<SortedStore, JavaError> {
        let index = dirs.index_files()?;
        let logs = dirs.entry_logs()?;
        Ok(SortedStore {
            dirs,
            index,
            logs,
            open_logs: HashMap::new(),
        })
    }

    /// Ledgers with an index file, ascending.
    pub fn ledgers(&self) -> impl Iterator<Item = u64> + '_ {
        self.index.keys().copied()
    }

    pub fn entry_logs(&self) -> &BTreeMap<u64, PathBuf> {
        &self.logs
    }

    /// Whether the ledger had an index file when the store was opened.
    pub fn has_ledger(&self, ledger: u64) -> bool {
        self.index.contains_key(&ledger)
    }

    /// The path of a ledger's index file, as listed at open.
    pub fn index_path(&self, ledger: u64) -> Option<&PathBuf> {
        self.index.get(&ledger)
    }

    /// The ledger's index file; `None` when it has none, or when it was removed since the
    /// listing (a deleted ledger's, by garbage collection).
    pub fn index_file(&self, ledger: u64) -> Result<Option<IdxFile>, JavaError> {
        let Some(p) = self.index.get(&ledger) else {
            return Ok(None);
        };
        if !p.exists() {
            return Ok(None);
        }
        IdxFile::open(p, ledger).map(Some)
    }

    pub fn state(&self, ledger: u64) -> Result<Option<LedgerState>, JavaError> {
        let Some(f) = self.index_file(ledger)? else {
            return Ok(None);
        };
        Ok(Some(LedgerState {
            last_entry: f.last_entry()?,
            master_key: f.header.master_key,
            fenced: f.header.fenced,
            explicit_lac: f.header.explicit_lac,
        }))
    }

    /// The body at `loc`, checked to be (`ledger`, `entry`).
    pub fn read_at(&mut self, loc: Location, ledger: u64, entry: u64) -> Result<Bytes, JavaError> {
        self.log(loc, ledger, entry)?
            .read_entry(loc.offset, ledger as i64, entry as i64)
    }

    /// The open entry log `loc` points into (opened on first use).
    pub fn log(&mut self, loc: Location, ledger: u64, entry: u64) -> Result<&EntryLog, JavaError> {
        if !self.open_logs.contains_key(&loc.log_id) {
            let Some(path) = self.logs.get(&loc.log_id) else {
                let where_ = self
                    .index
                    .get(&ledger)
                    .cloned()
                    .unwrap_or_else(|| PathBuf::from("index"));
                return Err(JavaError::new(
                    &where_,
                    format!(
                        "entry {entry} points into entry log {:x}.log, which no ledger \
                         directory holds",
                        loc.log_id
                    ),
                ));
            };
            let log = EntryLog::open(path, loc.log_id)?;
            if self.open_logs.len() >= crate::MAX_OPEN_LOGS {
                // A bookie of thousands of logs: keep the descriptors bounded.
                self.open_logs.clear();
            }
            self.open_logs.insert(loc.log_id, log);
        }
        Ok(&self.open_logs[&loc.log_id])
    }

    /// The body of an entry the index holds; `None` when the ledger or the slot is absent.
    pub fn read(&mut self, ledger: u64, entry: u64) -> Result<Option<Bytes>, JavaError> {
        let Some(f) = self.index_file(ledger)? else {
            return Ok(None);
        };
        let Some(loc) = f.location(entry)? else {
            return Ok(None);
        };
        self.read_at(loc, ledger, entry).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entrylog::write::{body, legacy_log};
    use crate::index::write as idx;
    use crate::layout::current;

    #[test]
    fn reads_entries_through_the_index() {
        let t = tempfile::tempdir().unwrap();
        let l = t.path().join("ledgers");
        let dirs = JavaDirs::new(vec![t.path().join("journal")], vec![l.clone()], None);
        let bodies: Vec<Vec<u8>> = (0..4).map(|e| body(5, e, e - 1, &[e as u8; 40])).collect();
        let refs: Vec<&[u8]> = bodies.iter().map(|b| b.as_slice()).collect();
        let (log, offsets) = legacy_log(&refs, true);
        std::fs::create_dir_all(current(&l).join("0/5")).unwrap();
        std::fs::write(current(&l).join("2.log"), log).unwrap();
        // Entry 2 only in the journal (not yet checkpointed); entry 3 indexed.
        let slots: Vec<(u64, u64)> = [0usize, 1, 3]
            .iter()
            .map(|&e| (e as u64, (2 << 32) | offsets[e]))
            .collect();
        let key = [4u8; 20];
        std::fs::write(
            current(&l).join("0/5/5.idx"),
            idx::file(idx::header(1, &key, true, None), &slots),
        )
        .unwrap();
        let mut s = SortedStore::open(dirs).unwrap();
        assert_eq!(s.ledgers().collect::<Vec<_>>(), vec![5]);
        let st = s.state(5).unwrap().unwrap();
        assert_eq!((st.fenced, st.last_entry), (true, Some(3)));
        assert_eq!(st.master_key.as_ref(), &key);
        for e in [0u64, 1, 3] {
            assert_eq!(
                s.read(5, e).unwrap().unwrap().as_ref(),
                bodies[e as usize].as_slice()
            );
        }
        assert_eq!(s.read(5, 2).unwrap(), None);
        assert_eq!(s.read(6, 0).unwrap(), None);
        // A run stops at the first absent entry (2 is only in the journal).
        let mut js = crate::JavaStore::Sorted(s.clone());
        let run = js.run(5, 0, 10).unwrap();
        assert_eq!(run.len(), 2);
        assert_eq!(run[1].as_ref(), bodies[1].as_slice());
        assert_eq!(js.run(5, 3, 10).unwrap()[0].as_ref(), bodies[3].as_slice());
        assert_eq!(s.state(6).unwrap(), None);
        // A slot pointing at another entry's bytes, or into a missing log, is an error.
        let bad = [(0u64, (2u64 << 32) | offsets[1]), (1, (9u64 << 32) | 1028)];
        std::fs::write(
            current(&l).join("0/5/5.idx"),
            idx::file(idx::header(1, &key, false, None), &bad),
        )
        .unwrap();
        assert!(s
            .read(5, 0)
            .unwrap_err()
            .to_string()
            .contains("not ledger 5 entry 0"));
        assert!(s.read(5, 1).unwrap_err().to_string().contains("9.log"));
    }
}
