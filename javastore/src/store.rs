//! One interface over the two kinds of Java ledger storage a takeover reads: which ledgers
//! exist, each one's state, where an entry is and its body. Cloning shares the listing (and
//! DbLedgerStorage's open databases); each clone opens its own entry logs, so each reader
//! thread keeps one.

use bytes::Bytes;

use crate::db::DbStore;
use crate::sorted::{LedgerState, SortedStore};
use crate::{JavaDirs, JavaError, Location, StorageKind};

#[derive(Clone)]
pub enum JavaStore {
    Sorted(SortedStore),
    Db(DbStore),
}

impl JavaStore {
    /// Opens the kind of storage the directories hold (`NoIndex`: a bookie that never
    /// checkpointed; only its journal holds data).
    pub fn open(dirs: JavaDirs, kind: StorageKind) -> Result<JavaStore, JavaError> {
        match kind {
            StorageKind::Db => DbStore::open(dirs).map(JavaStore::Db),
            StorageKind::Sorted | StorageKind::NoIndex => {
                SortedStore::open(dirs).map(JavaStore::Sorted)
            }
        }
    }

    pub fn kind_name(&self) -> &'static str {
        match self {
            JavaStore::Sorted(_) => "Interleaved/SortedLedgerStorage",
            JavaStore::Db(_) => "DbLedgerStorage",
        }
    }

    pub fn dirs(&self) -> &JavaDirs {
        match self {
            JavaStore::Sorted(s) => &s.dirs,
            JavaStore::Db(s) => &s.dirs,
        }
    }

    pub fn ledgers(&self) -> Vec<u64> {
        match self {
            JavaStore::Sorted(s) => s.ledgers().collect(),
            JavaStore::Db(s) => s.ledgers().collect(),
        }
    }

    pub fn has_ledger(&self, ledger: u64) -> bool {
        match self {
            JavaStore::Sorted(s) => s.has_ledger(ledger),
            JavaStore::Db(s) => s.has_ledger(ledger),
        }
    }

    pub fn state(&self, ledger: u64) -> Result<Option<LedgerState>, JavaError> {
        match self {
            JavaStore::Sorted(s) => s.state(ledger),
            JavaStore::Db(s) => s.state(ledger),
        }
    }

    pub fn location(&self, ledger: u64, entry: u64) -> Result<Option<Location>, JavaError> {
        match self {
            JavaStore::Sorted(s) => match s.index_file(ledger)? {
                Some(f) => f.location(entry),
                None => Ok(None),
            },
            JavaStore::Db(s) => s.location(ledger, entry),
        }
    }

    /// Every (entry id, location) of the ledger, in entry order.
    pub fn entries(&self, ledger: u64) -> Result<Vec<(u64, Location)>, JavaError> {
        match self {
            JavaStore::Sorted(s) => match s.index_file(ledger)? {
                Some(f) => f.entries(),
                None => Ok(Vec::new()),
            },
            JavaStore::Db(s) => s.entries(ledger),
        }
    }

    pub fn read_at(&mut self, loc: Location, ledger: u64, entry: u64) -> Result<Bytes, JavaError> {
        match self {
            JavaStore::Sorted(s) => s.read_at(loc, ledger, entry),
            JavaStore::Db(s) => s.read_at(loc, ledger, entry),
        }
    }

    pub fn read(&mut self, ledger: u64, entry: u64) -> Result<Option<Bytes>, JavaError> {
        match self {
            JavaStore::Sorted(s) => s.read(ledger, entry),
            JavaStore::Db(s) => s.read(ledger, entry),
        }
    }

    /// Consecutive entries from `entry`, up to `max` (stops at the first absent one; a bad
    /// entry after the first ends the run, the first's error is returned). The locations come
    /// from one index read (Sorted: one slot range; Db: one iterator), and entries that lie
    /// close together in one entry log from one positioned read.
    pub fn run(&mut self, ledger: u64, entry: u64, max: usize) -> Result<Vec<Bytes>, JavaError> {
        let locs = self.locations(ledger, entry, max.max(1))?;
        let mut out: Vec<Bytes> = Vec::with_capacity(locs.len());
        let mut i = 0;
        while i < locs.len() {
            // The group: same log, increasing offsets, within one read's span.
            let mut j = i + 1;
            while j < locs.len()
                && locs[j].log_id == locs[i].log_id
                && locs[j].offset > locs[j - 1].offset
                && locs[j].offset - locs[i].offset <= crate::entrylog::MAX_SPAN_BYTES
            {
                j += 1;
            }
            let at: Vec<(u64, i64, i64)> = (i..j)
                .map(|k| (locs[k].offset, ledger as i64, (entry + k as u64) as i64))
                .collect();
            let first = entry + i as u64;
            let read = self
                .log(ledger, locs[i], first)
                .and_then(|log| log.read_entries(&at));
            match read {
                Ok(bodies) => out.extend(bodies),
                // One by one: the group's first bad entry ends the run there.
                Err(_) => {
                    for (k, loc) in locs.iter().enumerate().take(j).skip(i) {
                        match self.read_at(*loc, ledger, entry + k as u64) {
                            Ok(b) => out.push(b),
                            Err(_) if !out.is_empty() => return Ok(out),
                            Err(err) => return Err(err),
                        }
                    }
                }
            }
            i = j;
        }
        Ok(out)
    }

    /// The locations of consecutive entries from `entry`, up to `max`, stopping at the first
    /// absent one.
    fn locations(&self, ledger: u64, entry: u64, max: usize) -> Result<Vec<Location>, JavaError> {
        match self {
            JavaStore::Sorted(s) => match s.index_file(ledger)? {
                Some(f) => f.run_locations(entry, max),
                None => Ok(Vec::new()),
            },
            JavaStore::Db(s) => s.run_locations(ledger, entry, max),
        }
    }

    /// The open entry log a location of `ledger` points into.
    fn log(
        &mut self,
        ledger: u64,
        loc: Location,
        entry: u64,
    ) -> Result<&crate::entrylog::EntryLog, JavaError> {
        match self {
            JavaStore::Sorted(s) => s.log(loc, ledger, entry),
            JavaStore::Db(s) => s.log(loc, ledger, entry),
        }
    }

    /// The file a ledger's state lives in, for Interleaved/Sorted (its index file, which
    /// garbage collection removes with the ledger); DbLedgerStorage keeps it in RocksDB, which
    /// a takeover never writes.
    pub fn index_path(&self, ledger: u64) -> Option<std::path::PathBuf> {
        match self {
            JavaStore::Sorted(s) => s.index_path(ledger).cloned(),
            JavaStore::Db(_) => None,
        }
    }

    /// Every entry log listed when the store was opened, over the directories: its id and path
    /// (DbLedgerStorage numbers each directory's logs on their own, so an id may repeat).
    pub fn entry_log_files(&self) -> Vec<(u64, std::path::PathBuf)> {
        match self {
            JavaStore::Sorted(s) => s
                .entry_logs()
                .iter()
                .map(|(k, v)| (*k, v.clone()))
                .collect(),
            JavaStore::Db(s) => s.entry_log_paths(),
        }
    }

    /// Opens every entry log and checks its header (a log shorter than its header is an
    /// allocated, never-flushed one: fine). Returns how many.
    pub fn check_entry_logs(&self) -> Result<usize, JavaError> {
        let logs = self.entry_log_files();
        for (id, path) in &logs {
            crate::entrylog::EntryLog::open(path, *id)?;
        }
        Ok(logs.len())
    }

    pub fn entry_log_count(&self) -> usize {
        match self {
            JavaStore::Sorted(s) => s.entry_logs().len(),
            JavaStore::Db(s) => s.entry_log_count(),
        }
    }
}
