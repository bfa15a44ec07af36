//! Interleaved/SortedLedgerStorage index files, `<xx>/<yy>/<hex ledger>.idx`
//! (docs/java-formats.md §5): a 1024-byte header (`BKLE`, version 0 or 1, the master key, state
//! bits with the fenced bit, and in version 1 the explicit LAC), then one 8-byte big-endian
//! location per entry id, slot `e` at `1024 + 8·e`, 0 meaning absent. A ledger exists on a
//! Java bookie exactly when its index file does.

use std::fs::File;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::file::read_exact_at;
use crate::{be_i32, be_u32, be_u64, JavaError, Location};

pub const IDX_MAGIC: [u8; 4] = *b"BKLE";
pub const IDX_HEADER_BYTES: u64 = 1024;
pub const STATE_FENCED: u32 = 1;
/// The longest master key a header can hold (Java's keys are 20-byte SHA-1 digests).
const MAX_KEY_BYTES: i32 = 1024 - 20;

/// The path of a ledger's index file, relative to an index directory's `current/`.
pub fn relative_path(ledger: u64) -> PathBuf {
    PathBuf::from(format!("{:x}", (ledger >> 8) & 0xff))
        .join(format!("{:x}", ledger & 0xff))
        .join(format!("{ledger:x}.idx"))
}

/// What an index file's header holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdxHeader {
    pub version: u32,
    /// Empty when the ledger was created without one (Java's "unset" key).
    pub master_key: Bytes,
    pub fenced: bool,
    /// The explicit LAC buffer (ledger id, LAC, digest), version 1 only.
    pub explicit_lac: Option<Bytes>,
}

/// Parses the first 1024 bytes of an index file.
pub fn parse_header(b: &[u8]) -> Result<IdxHeader, String> {
    if b.len() < IDX_HEADER_BYTES as usize {
        return Err(format!(
            "partial index header ({} bytes of 1024): Java rewrites it only if it knows the key",
            b.len()
        ));
    }
    if b[0..4] != IDX_MAGIC {
        return Err(format!("bad magic {:02x?}, want BKLE", &b[0..4]));
    }
    let version = be_u32(b, 4);
    if version > 1 {
        return Err(format!("unknown index header version {version}"));
    }
    let key_len = be_i32(b, 8);
    if !(0..=MAX_KEY_BYTES).contains(&key_len) {
        return Err(format!("bad master key length {key_len}"));
    }
    let k = key_len as usize;
    let master_key = Bytes::copy_from_slice(&b[12..12 + k]);
    let state = be_u32(b, 12 + k);
    let explicit_lac = if version >= 1 {
        let n = be_i32(b, 16 + k);
        if n == 0 {
            None
        } else if n < 16 || 20 + k + n as usize > IDX_HEADER_BYTES as usize {
            return Err(format!("bad explicit LAC length {n}"));
        } else {
            Some(Bytes::copy_from_slice(&b[20 + k..20 + k + n as usize]))
        }
    } else {
        None
    };
    Ok(IdxHeader {
        version,
        master_key,
        fenced: state & STATE_FENCED != 0,
        explicit_lac,
    })
}

/// An open index file.
pub struct IdxFile {
    pub ledger: u64,
    pub header: IdxHeader,
    path: PathBuf,
    file: File,
    len: u64,
}

impl IdxFile {
    pub fn open(path: &Path, ledger: u64) -> Result<IdxFile, JavaError> {
        let file = File::open(path).map_err(|e| JavaError::io(path, "open index file", e))?;
        let len = file
            .metadata()
            .map_err(|e| JavaError::io(path, "stat index file", e))?
            .len();
        let b = read_exact_at(&file, 0, (len.min(IDX_HEADER_BYTES)) as usize)
            .map_err(|e| JavaError::io(path, "read index header", e))?
            .unwrap_or_default();
        let header = parse_header(&b).map_err(|w| JavaError::at(path, 0, w))?;
        Ok(IdxFile {
            ledger,
            header,
            path: path.to_path_buf(),
            file,
            len,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Slots the file holds (entry ids 0..slots).
    pub fn slots(&self) -> u64 {
        self.len.saturating_sub(IDX_HEADER_BYTES) / 8
    }

    /// Where entry `entry` is, if the index has it.
    pub fn location(&self, entry: u64) -> Result<Option<Location>, JavaError> {
        if entry >= self.slots() {
            return Ok(None);
        }
        let at = IDX_HEADER_BYTES + 8 * entry;
        let b = read_exact_at(&self.file, at, 8)
            .map_err(|e| JavaError::io(&self.path, "read index slot", e))?
            .ok_or_else(|| JavaError::at(&self.path, at, "index slot past the end"))?;
        Ok(Location::from_packed(be_u64(&b, 0)))
    }

    /// The locations of consecutive entries from `entry`, up to `max`, stopping at the first
    /// absent one: one positioned read.
    pub fn run_locations(&self, entry: u64, max: usize) -> Result<Vec<Location>, JavaError> {
        let end = (entry + max as u64).min(self.slots());
        if entry >= end {
            return Ok(Vec::new());
        }
        let b = self.read_slots(entry, end)?;
        Ok((0..(end - entry) as usize)
            .map_while(|i| Location::from_packed(be_u64(&b, i * 8)))
            .collect())
    }

    /// Every (entry id, location) the index holds, in entry order. Reads the slots in 1 MiB
    /// chunks (128k entries each).
    pub fn entries(&self) -> Result<Vec<(u64, Location)>, JavaError> {
        let mut out = Vec::new();
        self.for_each_slot(|e, loc| {
            out.push((e, loc));
            true
        })?;
        Ok(out)
    }

    /// The highest entry id the index holds.
    pub fn last_entry(&self) -> Result<Option<u64>, JavaError> {
        const CHUNK: u64 = 1 << 17;
        let mut end = self.slots();
        while end > 0 {
            let start = end.saturating_sub(CHUNK);
            let b = self.read_slots(start, end)?;
            for i in (0..(end - start) as usize).rev() {
                if be_u64(&b, i * 8) != 0 {
                    return Ok(Some(start + i as u64));
                }
            }
            end = start;
        }
        Ok(None)
    }

    /// Calls `f` for each present slot in entry order until it returns false.
    pub fn for_each_slot(&self, mut f: impl FnMut(u64, Location) -> bool) -> Result<(), JavaError> {
        const CHUNK: u64 = 1 << 17;
        let slots = self.slots();
        let mut start = 0;
        while start < slots {
            let end = (start + CHUNK).min(slots);
            let b = self.read_slots(start, end)?;
            for i in 0..(end - start) as usize {
                if let Some(loc) = Location::from_packed(be_u64(&b, i * 8)) {
                    if !f(start + i as u64, loc) {
                        return Ok(());
                    }
                }
            }
            start = end;
        }
        Ok(())
    }

    fn read_slots(&self, start: u64, end: u64) -> Result<Vec<u8>, JavaError> {
        let at = IDX_HEADER_BYTES + 8 * start;
        read_exact_at(&self.file, at, (8 * (end - start)) as usize)
            .map_err(|e| JavaError::io(&self.path, "read index slots", e))?
            .ok_or_else(|| JavaError::at(&self.path, at, "index slots past the end"))
    }
}

/// Test helpers that write index files the way Java does (§5).
pub mod write {
    use super::*;

    pub fn header(version: u32, key: &[u8], fenced: bool, explicit_lac: Option<&[u8]>) -> Vec<u8> {
        let mut b = Vec::with_capacity(IDX_HEADER_BYTES as usize);
        b.extend_from_slice(&IDX_MAGIC);
        b.extend_from_slice(&version.to_be_bytes());
        b.extend_from_slice(&(key.len() as u32).to_be_bytes());
        b.extend_from_slice(key);
        b.extend_from_slice(&(if fenced { STATE_FENCED } else { 0 }).to_be_bytes());
        if version >= 1 {
            let lac = explicit_lac.unwrap_or(&[]);
            b.extend_from_slice(&(lac.len() as u32).to_be_bytes());
            b.extend_from_slice(lac);
        }
        b.resize(IDX_HEADER_BYTES as usize, 0);
        b
    }

    /// A whole index file: the header, then `slots` (entry id → packed location).
    pub fn file(header: Vec<u8>, slots: &[(u64, u64)]) -> Vec<u8> {
        let mut b = header;
        for (e, packed) in slots {
            let at = (IDX_HEADER_BYTES + 8 * e) as usize;
            if b.len() < at + 8 {
                b.resize(at + 8, 0);
            }
            b[at..at + 8].copy_from_slice(&packed.to_be_bytes());
        }
        b
    }
}

#[cfg(test)]
mod tests {
    use super::write;
    use super::*;

    #[test]
    fn paths_as_java() {
        assert_eq!(relative_path(0x1a2b3c), PathBuf::from("2b/3c/1a2b3c.idx"));
        assert_eq!(relative_path(5), PathBuf::from("0/5/5.idx"));
    }

    #[test]
    fn headers_of_both_versions() {
        let key = [7u8; 20];
        let lac = [1u8; 24];
        let h = parse_header(&write::header(1, &key, true, Some(&lac))).unwrap();
        assert_eq!(h.master_key.as_ref(), &key);
        assert!(h.fenced);
        assert_eq!(h.explicit_lac.as_deref(), Some(&lac[..]));
        let h = parse_header(&write::header(0, &key, false, None)).unwrap();
        assert_eq!((h.version, h.fenced, h.explicit_lac), (0, false, None));
        let h = parse_header(&write::header(1, &[], false, None)).unwrap();
        assert!(h.master_key.is_empty());
        let mut b = write::header(1, &key, false, None);
        b[7] = 2;
        assert!(parse_header(&b).unwrap_err().contains("version 2"));
        let mut b = write::header(1, &key, false, None);
        b[8..12].copy_from_slice(&5000u32.to_be_bytes());
        assert!(parse_header(&b).unwrap_err().contains("key length"));
        let mut b = write::header(1, &key, false, None);
        b[36..40].copy_from_slice(&3u32.to_be_bytes());
        assert!(parse_header(&b).unwrap_err().contains("explicit LAC"));
        assert!(parse_header(&b[..500]).unwrap_err().contains("partial"));
    }

    #[test]
    fn slots_and_last_entry() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("5.idx");
        let slots = [(0, 0x1_0000_0404), (1, 0x1_0000_0500), (3, 0x2_0000_0404)];
        std::fs::write(&p, write::file(write::header(1, b"k", false, None), &slots)).unwrap();
        let f = IdxFile::open(&p, 5).unwrap();
        assert_eq!(f.slots(), 4);
        assert_eq!(
            f.location(3).unwrap(),
            Some(Location {
                log_id: 2,
                offset: 0x404
            })
        );
        assert_eq!(f.location(2).unwrap(), None);
        assert_eq!(f.location(99).unwrap(), None);
        assert_eq!(f.last_entry().unwrap(), Some(3));
        let ids: Vec<u64> = f.entries().unwrap().into_iter().map(|(e, _)| e).collect();
        assert_eq!(ids, vec![0, 1, 3]);
        // A ledger created (key written) with no entry flushed yet.
        std::fs::write(&p, write::header(1, b"k", true, None)).unwrap();
        let f = IdxFile::open(&p, 5).unwrap();
        assert_eq!((f.last_entry().unwrap(), f.header.fenced), (None, true));
        // A file cut inside its header is refused, naming it.
        std::fs::write(&p, &write::header(1, b"k", true, None)[..100]).unwrap();
        let err = IdxFile::open(&p, 5).err().unwrap();
        assert!(err.to_string().contains("5.idx"), "{err}");
    }
}
