//! What a reader thread reads from: this bookie's ledger storage (`entrylog::Reader`) and,
//! behind it, for the ledgers taken over from a Java bookie (`store::takeover`), the Java
//! files the ledger's index file points into. Ours is asked first: it holds everything written
//! since the takeover and Java's journal tail; an entry it does not have, of a taken-over ledger
//! it has not deleted, is read from Java's entry log (`javastore::sorted`). Everything else
//! passes straight through, so a bookie that took nothing over reads exactly as before.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use entrylog::{ReadView, Reader, StoreError};
use javastore::{JavaError, JavaStore};
use storage::Storage;

use crate::read::read_thread::ReaderStorage;
use crate::store::takeover::Legacy;

/// A failed read, from our storage or from a Java file; both name the file.
#[derive(Debug)]
pub enum DiskError {
    Ours(StoreError),
    Java(JavaError),
}

impl fmt::Display for DiskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DiskError::Ours(e) => write!(f, "{e}"),
            DiskError::Java(e) => write!(f, "taken-over Java data: {e}"),
        }
    }
}

impl From<StoreError> for DiskError {
    fn from(e: StoreError) -> DiskError {
        DiskError::Ours(e)
    }
}

impl From<JavaError> for DiskError {
    fn from(e: JavaError) -> DiskError {
        DiskError::Java(e)
    }
}

/// `S`: the reader threads' storage port; the simulator (`crate::sim`) reads a simulated disk.
pub struct DiskReader<S: Storage = ReaderStorage> {
    pub ours: Reader<S>,
    /// This reader's own copy of the Java listing (it keeps its own open entry logs).
    java: Option<JavaStore>,
}

impl<S: Storage> DiskReader<S> {
    pub fn new(ours: Reader<S>, legacy: Option<&Arc<Legacy>>) -> DiskReader<S> {
        DiskReader {
            ours,
            java: legacy.map(|l| l.store.clone()),
        }
    }

    pub fn storage(&self) -> &S {
        self.ours.storage()
    }

    /// The Java files, when `ledger` is a taken-over ledger this bookie has not deleted.
    fn java_for(&mut self, view: &ReadView, ledger: u64) -> Option<&mut JavaStore> {
        self.java
            .as_mut()
            .filter(|j| j.has_ledger(ledger) && !view.is_deleted(ledger))
    }

    pub fn read(
        &mut self,
        view: &ReadView,
        ledger: u64,
        entry: u64,
    ) -> Result<Option<Bytes>, DiskError> {
        match self.ours.read(view, ledger, entry)? {
            Some(body) => Ok(Some(body)),
            None => match self.java_for(view, ledger) {
                Some(j) => Ok(j.read(ledger, entry)?),
                None => Ok(None),
            },
        }
    }

    /// Single-entry reads, their device reads in flight together (ours); the misses of
    /// taken-over ledgers are read from Java's files one by one.
    pub fn read_each(
        &mut self,
        asked: &[(&ReadView, u64, u64)],
    ) -> Vec<Result<Option<Bytes>, DiskError>> {
        let ours = self.ours.read_each(asked);
        ours.into_iter()
            .zip(asked)
            .map(|(r, &(view, ledger, entry))| match r {
                Ok(None) => match self.java_for(view, ledger) {
                    Some(j) => j.read(ledger, entry).map_err(DiskError::from),
                    None => Ok(None),
                },
                other => other.map_err(DiskError::from),
            })
            .collect()
    }

    /// Up to `max_entries` consecutive entries from `entry` (`None`: not even the first).
    pub fn read_run(
        &mut self,
        view: &ReadView,
        ledger: u64,
        entry: u64,
        max_entries: usize,
    ) -> Result<Option<Vec<Bytes>>, DiskError> {
        match self.ours.read_run(view, ledger, entry, max_entries)? {
            Some(run) => Ok(Some(run)),
            None => match self.java_for(view, ledger) {
                Some(j) => {
                    let run = j.run(ledger, entry, max_entries)?;
                    Ok((!run.is_empty()).then_some(run))
                }
                None => Ok(None),
            },
        }
    }

    /// The read-ahead's runs (`Reader::read_runs`); when ours has nothing at `start` of a
    /// taken-over ledger, one run from Java's files instead.
    pub fn read_runs(
        &mut self,
        view: &ReadView,
        ledger: u64,
        start: u64,
        (runs, max_entries): (usize, usize),
        mut landed: impl FnMut(u64, Vec<Bytes>, Option<(u64, u64)>),
    ) -> Result<(), DiskError> {
        let java = self.java_for(view, ledger).is_some();
        let mut missed = false;
        let r = self.ours.read_runs(
            view,
            ledger,
            start,
            (runs, max_entries),
            |s, bodies, more| {
                if java && s == start && bodies.is_empty() {
                    missed = true;
                } else {
                    landed(s, bodies, more)
                }
            },
        );
        if !missed {
            return r.map_err(DiskError::from);
        }
        if let Err(e) = r {
            landed(start, Vec::new(), None);
            return Err(e.into());
        }
        let j = self.java_for(view, ledger).expect("checked above");
        match j.run(ledger, start, max_entries) {
            Ok(bodies) => {
                landed(start, bodies, None);
                Ok(())
            }
            Err(e) => {
                landed(start, Vec::new(), None);
                Err(e.into())
            }
        }
    }

    /// Every entry id stored of the ledger: ours and, for a taken-over ledger, Java's index.
    pub fn entries_of(&mut self, view: &ReadView, ledger: u64) -> Result<Vec<u64>, DiskError> {
        let mut ids = self.ours.entries_of(view, ledger)?;
        if let Some(j) = self.java_for(view, ledger) {
            ids.extend(j.entries(ledger)?.into_iter().map(|(e, _)| e));
            ids.sort_unstable();
            ids.dedup();
        }
        Ok(ids)
    }
}
