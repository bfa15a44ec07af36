//! Where a Java bookie's files live (docs/java-formats.md §1): every configured directory works
//! in its `current/` subdirectory; journals hold `<hex>.txn`, ledger directories hold entry logs
//! `<hex>.log`, `lastId` and `lastMark[.<j>]`, and index directories (the ledger directories
//! unless `indexDirectories` is set) hold `<xx>/<yy>/<hex>.idx` (Interleaved/Sorted) or the
//! RocksDB directories `ledgers/` and `locations/` (DbLedgerStorage). The order of the configured
//! directories matters: it numbers journals (ledger L is journaled in journal L mod J).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::index;
use crate::journal::{read_last_mark, LastMark};
use crate::{parse_hex_id, JavaError};

/// The directories of one Java bookie, as its `bk_server.conf` lists them.
#[derive(Clone, Debug)]
pub struct JavaDirs {
    pub journal_dirs: Vec<PathBuf>,
    pub ledger_dirs: Vec<PathBuf>,
    /// `indexDirectories`, or the ledger directories when it is not set.
    pub index_dirs: Vec<PathBuf>,
}

/// Which ledger storage wrote the directories, judged by what is in them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StorageKind {
    /// Interleaved or SortedLedgerStorage: per-ledger index files.
    Sorted,
    /// DbLedgerStorage: RocksDB `ledgers/` and `locations/`.
    Db,
    /// Neither index files nor RocksDB directories (entry logs or journals may still be
    /// there: a bookie that never checkpointed).
    NoIndex,
}

pub fn current(dir: &Path) -> PathBuf {
    dir.join("current")
}

fn read_dir(dir: &Path) -> Result<Vec<(String, PathBuf)>, JavaError> {
    let mut out = Vec::new();
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(JavaError::io(dir, "list directory", e)),
    };
    for e in rd {
        let e = e.map_err(|e| JavaError::io(dir, "list directory", e))?;
        out.push((e.file_name().to_string_lossy().into_owned(), e.path()));
    }
    out.sort();
    Ok(out)
}

impl JavaDirs {
    pub fn new(
        journal_dirs: Vec<PathBuf>,
        ledger_dirs: Vec<PathBuf>,
        index_dirs: Option<Vec<PathBuf>>,
    ) -> JavaDirs {
        let index_dirs = index_dirs.unwrap_or_else(|| ledger_dirs.clone());
        JavaDirs {
            journal_dirs,
            ledger_dirs,
            index_dirs,
        }
    }

    /// The storage kind the directories hold; both kinds at once is refused.
    pub fn storage_kind(&self) -> Result<StorageKind, JavaError> {
        let mut db = None;
        for d in self.index_dirs.iter().chain(&self.ledger_dirs) {
            let c = current(d);
            if c.join("ledgers").is_dir() || c.join("locations").is_dir() {
                db = Some(c);
                break;
            }
        }
        let idx = self.index_files()?;
        match (db, idx.is_empty()) {
            (Some(c), false) => Err(JavaError::new(
                &c,
                "holds DbLedgerStorage's RocksDB directories, and other directories hold \
                 Interleaved/Sorted index files: which storage wrote this bookie is unclear",
            )),
            (Some(_), true) => Ok(StorageKind::Db),
            (None, false) => Ok(StorageKind::Sorted),
            (None, true) => Ok(StorageKind::NoIndex),
        }
    }

    /// Every entry log of the ledger directories, by id. Interleaved/Sorted allocate ids across
    /// all directories, so one id in two directories is refused.
    pub fn entry_logs(&self) -> Result<BTreeMap<u64, PathBuf>, JavaError> {
        let mut out: BTreeMap<u64, PathBuf> = BTreeMap::new();
        for d in &self.ledger_dirs {
            for (name, path) in read_dir(&current(d))? {
                let Some(id) = name.strip_suffix(".log").and_then(parse_hex_id) else {
                    continue;
                };
                if let Some(other) = out.insert(id, path.clone()) {
                    return Err(JavaError::new(
                        &path,
                        format!("entry log id {id:x} also in {}", other.display()),
                    ));
                }
            }
        }
        Ok(out)
    }

    /// Every ledger's index file, by ledger id, from the `<xx>/<yy>/` trees of the index
    /// directories. A relocation copy (`.idx.rloc`) stands in for a missing `.idx`, as Java
    /// renames it at start; a ledger indexed in two directories, or a file in the wrong
    /// subdirectory, is refused.
    pub fn index_files(&self) -> Result<BTreeMap<u64, PathBuf>, JavaError> {
        let mut out: BTreeMap<u64, PathBuf> = BTreeMap::new();
        let mut rloc: BTreeMap<u64, PathBuf> = BTreeMap::new();
        for d in &self.index_dirs {
            for (xx, px) in read_dir(&current(d))? {
                if parse_hex_id(&xx).is_none_or(|v| v > 0xff) || !px.is_dir() {
                    continue;
                }
                for (yy, py) in read_dir(&px)? {
                    if parse_hex_id(&yy).is_none_or(|v| v > 0xff) || !py.is_dir() {
                        continue;
                    }
                    for (name, path) in read_dir(&py)? {
                        let (stem, is_rloc) = if let Some(s) = name.strip_suffix(".idx") {
                            (s, false)
                        } else if let Some(s) = name.strip_suffix(".idx.rloc") {
                            (s, true)
                        } else {
                            continue;
                        };
                        let Some(ledger) = parse_hex_id(stem) else {
                            continue;
                        };
                        if !path.ends_with(index::relative_path(ledger)) && !is_rloc {
                            return Err(JavaError::new(
                                &path,
                                format!(
                                    "index file of ledger {ledger} outside its place {}",
                                    index::relative_path(ledger).display()
                                ),
                            ));
                        }
                        let map = if is_rloc { &mut rloc } else { &mut out };
                        if let Some(other) = map.insert(ledger, path.clone()) {
                            return Err(JavaError::new(
                                &path,
                                format!("ledger {ledger} is also indexed in {}", other.display()),
                            ));
                        }
                    }
                }
            }
        }
        for (ledger, path) in rloc {
            out.entry(ledger).or_insert(path);
        }
        Ok(out)
    }

    /// The index file of one ledger, searched in every index directory.
    pub fn index_file(&self, ledger: u64) -> Option<PathBuf> {
        let rel = index::relative_path(ledger);
        let mut rloc = None;
        for d in &self.index_dirs {
            let p = current(d).join(&rel);
            if p.is_file() {
                return Some(p);
            }
            let r = p.with_extension("idx.rloc");
            if rloc.is_none() && r.is_file() {
                rloc = Some(r);
            }
        }
        rloc
    }

    /// Journal `j`'s files, by id, oldest first.
    pub fn journal_files(&self, j: usize) -> Result<Vec<(u64, PathBuf)>, JavaError> {
        let mut out = Vec::new();
        for (name, path) in read_dir(&current(&self.journal_dirs[j]))? {
            if let Some(id) = name.strip_suffix(".txn").and_then(parse_hex_id) {
                out.push((id, path));
            }
        }
        out.sort();
        Ok(out)
    }

    /// Journal `j`'s checkpoint: the largest `lastMark` (or `lastMark.<j>` with several
    /// journals) over the ledger directories; (0, 0) when none is readable.
    pub fn last_mark(&self, j: usize) -> LastMark {
        let name = if self.journal_dirs.len() > 1 {
            format!("lastMark.{j}")
        } else {
            "lastMark".to_string()
        };
        self.ledger_dirs
            .iter()
            .filter_map(|d| read_last_mark(&current(d).join(&name)))
            .max()
            .unwrap_or_default()
    }

    /// The journal a ledger's records go to.
    pub fn journal_of(&self, ledger: i64) -> usize {
        ledger.rem_euclid(self.journal_dirs.len().max(1) as i64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::write;

    fn touch(p: &Path, bytes: &[u8]) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }

    #[test]
    fn finds_what_java_wrote_where() {
        let t = tempfile::tempdir().unwrap();
        let (j, l1, l2) = (t.path().join("j"), t.path().join("l1"), t.path().join("l2"));
        let dirs = JavaDirs::new(vec![j.clone()], vec![l1.clone(), l2.clone()], None);
        assert_eq!(dirs.storage_kind().unwrap(), StorageKind::NoIndex);
        let h = write::header(1, b"k", false, None);
        touch(&current(&l1).join("0/5/5.idx"), &h);
        touch(&current(&l2).join("2b/3c/1a2b3c.idx"), &h);
        touch(&current(&l2).join("0/6/6.idx.rloc"), &h);
        touch(&current(&l1).join("0.log"), b"");
        touch(&current(&l2).join("1a.log"), b"");
        touch(&current(&l1).join("lastId"), b"1a\n");
        touch(&current(&j).join("18c5f2a3b4c.txn"), b"");
        touch(&current(&j).join("18c5f2a3b4b.txn"), b"");
        assert_eq!(dirs.storage_kind().unwrap(), StorageKind::Sorted);
        let idx: Vec<u64> = dirs.index_files().unwrap().into_keys().collect();
        assert_eq!(idx, vec![5, 6, 0x1a2b3c]);
        assert!(dirs.index_file(0x1a2b3c).unwrap().starts_with(&l2));
        assert!(dirs.index_file(6).unwrap().ends_with("6.idx.rloc"));
        assert_eq!(dirs.index_file(7), None);
        let logs: Vec<u64> = dirs.entry_logs().unwrap().into_keys().collect();
        assert_eq!(logs, vec![0, 0x1a]);
        let txn: Vec<u64> = dirs
            .journal_files(0)
            .unwrap()
            .into_iter()
            .map(|x| x.0)
            .collect();
        assert_eq!(txn, vec![0x18c5f2a3b4b, 0x18c5f2a3b4c]);
        // The largest mark of all ledger directories.
        let mark = |id: u64, off: u64| [id.to_be_bytes(), off.to_be_bytes()].concat();
        touch(&current(&l1).join("lastMark"), &mark(0x18c5f2a3b4b, 900));
        touch(&current(&l2).join("lastMark"), &mark(0x18c5f2a3b4c, 512));
        assert_eq!(
            dirs.last_mark(0),
            LastMark {
                file_id: 0x18c5f2a3b4c,
                offset: 512
            }
        );
        // One log id in two directories, and both storages at once, are refused.
        touch(&current(&l2).join("0.log"), b"");
        assert!(dirs.entry_logs().unwrap_err().to_string().contains("0.log"));
        std::fs::create_dir_all(current(&l1).join("ledgers")).unwrap();
        assert!(dirs.storage_kind().is_err());
    }

    #[test]
    fn refuses_misplaced_and_duplicate_index_files() {
        let t = tempfile::tempdir().unwrap();
        let (l1, l2) = (t.path().join("l1"), t.path().join("l2"));
        let dirs = JavaDirs::new(vec![], vec![l1.clone(), l2.clone()], None);
        let h = write::header(1, b"k", false, None);
        touch(&current(&l1).join("0/5/5.idx"), &h);
        touch(&current(&l2).join("0/5/5.idx"), &h);
        assert!(dirs
            .index_files()
            .unwrap_err()
            .to_string()
            .contains("also indexed"));
        std::fs::remove_file(current(&l2).join("0/5/5.idx")).unwrap();
        touch(&current(&l2).join("0/7/5.idx"), &h);
        assert!(dirs
            .index_files()
            .unwrap_err()
            .to_string()
            .contains("outside its place"));
    }
}
