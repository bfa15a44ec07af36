//! DbLedgerStorage's directories (docs/java-formats.md §6): per ledger directory, two RocksDB
//! databases, `ledgers` (ledger id → `LedgerData`: exists, fenced, master key, explicit LAC,
//! limbo) and `locations` ((ledger id, entry id) → entry log location), and that directory's own
//! entry logs. Ledger L is in the directory whose `ledgers` database holds it (normally
//! `L mod N`). The databases are opened read-only (`rocksread`): their write-ahead logs are
//! replayed in memory and nothing is written.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use bytes::Bytes;

use crate::entrylog::EntryLog;
use crate::layout::current;
use crate::sorted::LedgerState;
use crate::{parse_hex_id, JavaDirs, JavaError, Location};

/// The key of DbLedgerStorage's storage-state flags in the `ledgers` database (4.15+).
pub const STORAGE_FLAGS_KEY: i64 = -0xeefd;
/// Its bit saying a data-integrity check has to run before the data can be trusted.
pub const NEEDS_INTEGRITY_CHECK: u64 = 1;

/// A `LedgerData` record (protobuf 2; fields 1–5).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LedgerData {
    pub exists: bool,
    pub fenced: bool,
    pub master_key: Bytes,
    pub explicit_lac: Option<Bytes>,
    pub limbo: bool,
}

fn varint(b: &[u8], at: &mut usize) -> Result<u64, String> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let x = *b.get(*at).ok_or("truncated varint")?;
        *at += 1;
        v |= ((x & 0x7f) as u64) << shift;
        if x & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err("varint longer than 10 bytes".into())
}

/// Decodes a `LedgerData` value.
pub fn parse_ledger_data(b: &[u8]) -> Result<LedgerData, String> {
    let mut d = LedgerData::default();
    let mut at = 0;
    while at < b.len() {
        let tag = varint(b, &mut at)?;
        let (field, wire) = (tag >> 3, tag & 7);
        match wire {
            0 => {
                let v = varint(b, &mut at)? != 0;
                match field {
                    1 => d.exists = v,
                    2 => d.fenced = v,
                    5 => d.limbo = v,
                    _ => {}
                }
            }
            2 => {
                let n = varint(b, &mut at)? as usize;
                let end = at.checked_add(n).filter(|&e| e <= b.len());
                let end = end.ok_or_else(|| format!("field {field} of {n} bytes past the end"))?;
                let v = Bytes::copy_from_slice(&b[at..end]);
                at = end;
                match field {
                    3 => d.master_key = v,
                    4 => d.explicit_lac = Some(v),
                    _ => {}
                }
            }
            1 => at += 8,
            5 => at += 4,
            w => return Err(format!("field {field} of unknown wire type {w}")),
        }
    }
    if at > b.len() {
        return Err("a fixed-size field past the end".into());
    }
    Ok(d)
}

/// One ledger directory's storage.
struct Part {
    ledger_dir: PathBuf,
    locations: rocksread::Db,
    logs: BTreeMap<u64, PathBuf>,
}

/// A DbLedgerStorage bookie's directories, read lazily except for the ledger records (all are
/// read at open, as Java does).
pub struct DbStore {
    pub dirs: JavaDirs,
    parts: Vec<Part>,
    /// Ledger → (its directory's index, its record).
    ledgers: BTreeMap<u64, (usize, LedgerData)>,
    /// The storage flags of directory 0 (4.15+), if written.
    pub flags: Option<u64>,
    /// Ledgers present in more than one directory's `ledgers` database (Java itself would look
    /// in one): the takeover refuses them.
    pub duplicates: Vec<u64>,
    open_logs: HashMap<(usize, u64), EntryLog>,
}

impl Clone for DbStore {
    /// Shares the open databases; the copy opens its own entry logs.
    fn clone(&self) -> DbStore {
        DbStore {
            dirs: self.dirs.clone(),
            parts: self
                .parts
                .iter()
                .map(|p| Part {
                    ledger_dir: p.ledger_dir.clone(),
                    locations: p.locations.clone(),
                    logs: p.logs.clone(),
                })
                .collect(),
            ledgers: self.ledgers.clone(),
            flags: self.flags,
            duplicates: self.duplicates.clone(),
            open_logs: HashMap::new(),
        }
    }
}

fn be_u64(b: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(b.get(0..8)?.try_into().ok()?))
}

fn location_key(ledger: u64, entry: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[0..8].copy_from_slice(&ledger.to_be_bytes());
    k[8..16].copy_from_slice(&entry.to_be_bytes());
    k
}

impl DbStore {
    pub fn open(dirs: JavaDirs) -> Result<DbStore, JavaError> {
        let mut parts = Vec::new();
        let mut ledgers: BTreeMap<u64, (usize, LedgerData)> = BTreeMap::new();
        let mut duplicates = Vec::new();
        let mut flags = None;
        for (i, ledger_dir) in dirs.ledger_dirs.iter().enumerate() {
            // 4.16+ with indexDirectories: the databases are in the index directory.
            let base = dirs
                .index_dirs
                .get(i)
                .map(|d| current(d))
                .filter(|c| c.join("ledgers").is_dir())
                .unwrap_or_else(|| current(ledger_dir));
            let open = |name: &str| {
                let p = base.join(name);
                rocksread::Db::open_read_only(&p).map_err(|e| JavaError::new(&p, e))
            };
            let ledgers_db = open("ledgers")?;
            let locations = open("locations")?;
            let mut it = ledgers_db.iter();
            it.seek_to_first();
            let ledgers_path = base.join("ledgers");
            while let Some((k, v)) = it.entry().map_err(|e| JavaError::new(&ledgers_path, e))? {
                let Some(id) = be_u64(&k) else {
                    return Err(JavaError::new(
                        &ledgers_path,
                        format!("a key of {} bytes", k.len()),
                    ));
                };
                if (id as i64) == STORAGE_FLAGS_KEY {
                    flags = be_u64(&v);
                } else if (id as i64) >= 0 {
                    let d = parse_ledger_data(&v)
                        .map_err(|w| JavaError::new(&ledgers_path, format!("ledger {id}: {w}")))?;
                    if ledgers.insert(id, (i, d)).is_some() {
                        duplicates.push(id);
                    }
                }
                it.next();
            }
            let mut logs = BTreeMap::new();
            let cur = current(ledger_dir);
            let rd = std::fs::read_dir(&cur).map_err(|e| JavaError::io(&cur, "list", e))?;
            for e in rd {
                let e = e.map_err(|e| JavaError::io(&cur, "list", e))?;
                let name = e.file_name().to_string_lossy().into_owned();
                if let Some(id) = name.strip_suffix(".log").and_then(parse_hex_id) {
                    logs.insert(id, e.path());
                }
            }
            parts.push(Part {
                ledger_dir: cur,
                locations,
                logs,
            });
        }
        Ok(DbStore {
            dirs,
            parts,
            ledgers,
            flags,
            duplicates,
            open_logs: HashMap::new(),
        })
    }

    pub fn ledgers(&self) -> impl Iterator<Item = u64> + '_ {
        self.ledgers.keys().copied()
    }

    pub fn has_ledger(&self, ledger: u64) -> bool {
        self.ledgers.contains_key(&ledger)
    }

    pub fn ledger_data(&self, ledger: u64) -> Option<&LedgerData> {
        self.ledgers.get(&ledger).map(|(_, d)| d)
    }

    /// Ledgers in limbo (a data-integrity check pending).
    pub fn limbo(&self) -> Vec<u64> {
        self.ledgers
            .iter()
            .filter(|(_, (_, d))| d.limbo)
            .map(|(l, _)| *l)
            .collect()
    }

    /// Every entry log's id and path, over the directories.
    pub fn entry_log_paths(&self) -> Vec<(u64, PathBuf)> {
        self.parts
            .iter()
            .flat_map(|p| p.logs.iter().map(|(k, v)| (*k, v.clone())))
            .collect()
    }

    /// Every entry log, by directory.
    pub fn entry_log_count(&self) -> usize {
        self.parts.iter().map(|p| p.logs.len()).sum()
    }

    fn part(&self, ledger: u64) -> Option<&Part> {
        self.ledgers.get(&ledger).map(|(i, _)| &self.parts[*i])
    }

    pub fn location(&self, ledger: u64, entry: u64) -> Result<Option<Location>, JavaError> {
        let Some(p) = self.part(ledger) else {
            return Ok(None);
        };
        let v = p
            .locations
            .get(&location_key(ledger, entry))
            .map_err(|e| JavaError::new(&p.ledger_dir, e))?;
        Ok(v.as_deref()
            .and_then(be_u64)
            .and_then(Location::from_packed))
    }

    /// The highest entry id `locations` holds of the ledger.
    pub fn last_entry(&self, ledger: u64) -> Result<Option<u64>, JavaError> {
        let Some(p) = self.part(ledger) else {
            return Ok(None);
        };
        let mut it = p.locations.iter();
        it.seek_for_prev(&location_key(ledger, i64::MAX as u64));
        match it.entry().map_err(|e| JavaError::new(&p.ledger_dir, e))? {
            Some((k, _)) if be_u64(&k) == Some(ledger) && k.len() == 16 => Ok(be_u64(&k[8..])),
            _ => Ok(None),
        }
    }

    /// Every (entry id, location) of the ledger, in entry order.
    pub fn entries(&self, ledger: u64) -> Result<Vec<(u64, Location)>, JavaError> {
        let Some(p) = self.part(ledger) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        let mut it = p.locations.iter();
        it.seek(&location_key(ledger, 0));
        while let Some((k, v)) = it.entry().map_err(|e| JavaError::new(&p.ledger_dir, e))? {
            if k.len() != 16 || be_u64(&k) != Some(ledger) {
                break;
            }
            if let (Some(e), Some(loc)) =
                (be_u64(&k[8..]), be_u64(&v).and_then(Location::from_packed))
            {
                out.push((e, loc));
            }
            it.next();
        }
        Ok(out)
    }

    pub fn state(&self, ledger: u64) -> Result<Option<LedgerState>, JavaError> {
        let Some(d) = self.ledger_data(ledger) else {
            return Ok(None);
        };
        // An all-zero key is Java's "not set yet".
        let master_key = if d.master_key.iter().all(|&b| b == 0) {
            Bytes::new()
        } else {
            d.master_key.clone()
        };
        Ok(Some(LedgerState {
            master_key,
            fenced: d.fenced,
            explicit_lac: d.explicit_lac.clone(),
            last_entry: self.last_entry(ledger)?,
        }))
    }

    /// The locations of consecutive entries from `entry`, up to `max`, stopping at the first
    /// absent one: one iterator.
    pub fn run_locations(
        &self,
        ledger: u64,
        entry: u64,
        max: usize,
    ) -> Result<Vec<Location>, JavaError> {
        let Some(p) = self.part(ledger) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        let mut it = p.locations.iter();
        it.seek(&location_key(ledger, entry));
        while out.len() < max {
            let Some((k, v)) = it.entry().map_err(|e| JavaError::new(&p.ledger_dir, e))? else {
                break;
            };
            let want = location_key(ledger, entry + out.len() as u64);
            match be_u64(&v).and_then(Location::from_packed) {
                Some(loc) if k == want => out.push(loc),
                _ => break,
            }
            it.next();
        }
        Ok(out)
    }

    /// The body at `loc` in the ledger's directory, checked to be (`ledger`, `entry`).
    pub fn read_at(&mut self, loc: Location, ledger: u64, entry: u64) -> Result<Bytes, JavaError> {
        self.log(loc, ledger, entry)?
            .read_entry(loc.offset, ledger as i64, entry as i64)
    }

    /// The open entry log of the ledger's directory that `loc` points into.
    pub fn log(&mut self, loc: Location, ledger: u64, entry: u64) -> Result<&EntryLog, JavaError> {
        let Some(&(i, _)) = self.ledgers.get(&ledger) else {
            return Err(JavaError::new(
                &self.dirs.ledger_dirs[0],
                format!("ledger {ledger} has no record"),
            ));
        };
        if !self.open_logs.contains_key(&(i, loc.log_id)) {
            let part = &self.parts[i];
            let Some(path) = part.logs.get(&loc.log_id) else {
                return Err(JavaError::new(
                    &part.ledger_dir,
                    format!(
                        "ledger {ledger} entry {entry} points into entry log {:x}.log, which is \
                         not there",
                        loc.log_id
                    ),
                ));
            };
            let log = EntryLog::open(path, loc.log_id)?;
            if self.open_logs.len() >= crate::MAX_OPEN_LOGS {
                // A bookie of thousands of logs: keep the descriptors bounded.
                self.open_logs.clear();
            }
            self.open_logs.insert((i, loc.log_id), log);
        }
        Ok(&self.open_logs[&(i, loc.log_id)])
    }

    pub fn read(&mut self, ledger: u64, entry: u64) -> Result<Option<Bytes>, JavaError> {
        match self.location(ledger, entry)? {
            Some(loc) => self.read_at(loc, ledger, entry).map(Some),
            None => Ok(None),
        }
    }
}

/// Writing DbLedgerStorage's records as Java does (tests and fixtures).
pub mod write {
    /// A `LedgerData` value.
    pub fn ledger_data(fenced: bool, key: &[u8], explicit_lac: Option<&[u8]>) -> Vec<u8> {
        let mut b = vec![0x08, 1, 0x10, fenced as u8, 0x1a, key.len() as u8];
        b.extend_from_slice(key);
        if let Some(lac) = explicit_lac {
            b.push(0x22);
            b.push(lac.len() as u8);
            b.extend_from_slice(lac);
        }
        b
    }

    pub fn location_key(ledger: u64, entry: u64) -> Vec<u8> {
        super::location_key(ledger, entry).to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entrylog::write::{body, legacy_log};
    use rocksread::writer::{write as rwrite, Op};

    #[test]
    fn ledger_data_as_java_writes_it() {
        // docs/java-formats.md §6.3: fenced ledger with a 20-byte key.
        let key = [7u8; 20];
        let d = parse_ledger_data(&write::ledger_data(true, &key, None)).unwrap();
        assert!(d.exists && d.fenced && !d.limbo);
        assert_eq!(d.master_key.as_ref(), &key);
        let mut with = write::ledger_data(false, &key, Some(&[1u8; 24]));
        with.extend_from_slice(&[0x28, 1]); // limbo
        let d = parse_ledger_data(&with).unwrap();
        assert_eq!(d.explicit_lac.as_deref(), Some(&[1u8; 24][..]));
        assert!(d.limbo && !d.fenced);
        assert!(parse_ledger_data(&[0x1a, 50, 1, 2]).is_err());
        assert!(parse_ledger_data(&[0x08]).is_err());
    }

    #[test]
    fn reads_ledgers_locations_and_entries() {
        let t = tempfile::tempdir().unwrap();
        let l = t.path().join("ledgers");
        let cur = current(&l);
        std::fs::create_dir_all(&cur).unwrap();
        let bodies: Vec<Vec<u8>> = (0..5).map(|e| body(6, e, e - 1, &[e as u8; 70])).collect();
        let refs: Vec<&[u8]> = bodies.iter().map(|b| b.as_slice()).collect();
        let (log, offsets) = legacy_log(&refs, false);
        std::fs::write(cur.join("3.log"), log).unwrap();
        let key = [9u8; 20];
        let data6 = write::ledger_data(true, &key, None);
        let data8 = write::ledger_data(false, &[0u8; 20], None);
        let flags = 0u64.to_be_bytes();
        let flags_key = (STORAGE_FLAGS_KEY as u64).to_be_bytes();
        let k6 = 6u64.to_be_bytes();
        let k8 = 8u64.to_be_bytes();
        rwrite(
            &cur.join("ledgers"),
            &[vec![
                Op::Put(&k6, &data6),
                Op::Put(&k8, &data8),
                Op::Put(&flags_key, &flags),
            ]],
            false,
            true,
        )
        .unwrap();
        let keys: Vec<Vec<u8>> = (0..5).map(|e| write::location_key(6, e)).collect();
        let vals: Vec<Vec<u8>> = offsets
            .iter()
            .map(|o| ((3u64 << 32) | o).to_be_bytes().to_vec())
            .collect();
        // Entries 0-3 flushed to an SST, entry 4 only in the WAL (a killed bookie's).
        let first: Vec<Op> = (0..4).map(|i| Op::Put(&keys[i], &vals[i])).collect();
        rwrite(&cur.join("locations"), &[first], true, true).unwrap();
        rwrite(
            &cur.join("locations"),
            &[vec![Op::Put(&keys[4], &vals[4])]],
            true,
            false,
        )
        .unwrap();

        let dirs = JavaDirs::new(vec![t.path().join("journal")], vec![l.clone()], None);
        let mut s = DbStore::open(dirs).unwrap();
        assert_eq!(s.ledgers().collect::<Vec<_>>(), vec![6, 8]);
        assert_eq!(s.flags, Some(0));
        let st = s.state(6).unwrap().unwrap();
        assert_eq!((st.fenced, st.last_entry), (true, Some(4)));
        assert_eq!(st.master_key.as_ref(), &key);
        let st8 = s.state(8).unwrap().unwrap();
        assert!(st8.master_key.is_empty(), "an all-zero key is unset");
        assert_eq!(st8.last_entry, None);
        for e in 0..5u64 {
            assert_eq!(
                s.read(6, e).unwrap().unwrap().as_ref(),
                bodies[e as usize].as_slice()
            );
        }
        assert_eq!(s.read(6, 5).unwrap(), None);
        assert_eq!(s.read(7, 0).unwrap(), None);
        let ids: Vec<u64> = s.entries(6).unwrap().into_iter().map(|x| x.0).collect();
        assert_eq!(ids, vec![0, 1, 2, 3, 4]);
        // A run: locations from one iterator (SST and WAL alike), bodies from one read.
        let mut js = crate::JavaStore::Db(s.clone());
        let run = js.run(6, 1, 10).unwrap();
        assert_eq!(run.len(), 4);
        for (k, b) in run.iter().enumerate() {
            assert_eq!(b.as_ref(), bodies[k + 1].as_slice());
        }
        assert!(js.run(6, 5, 10).unwrap().is_empty());
        // Nothing was written into the databases' directories.
        let names = |d: &str| -> Vec<String> {
            let mut v: Vec<String> = std::fs::read_dir(cur.join(d))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        let before = (names("ledgers"), names("locations"));
        drop(s);
        let dirs = JavaDirs::new(vec![t.path().join("journal")], vec![l], None);
        let _again = DbStore::open(dirs).unwrap();
        assert_eq!((names("ledgers"), names("locations")), before);
    }
}
