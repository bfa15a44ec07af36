//! Java entry logs, `<hex>.log` (docs/java-formats.md §3): a 1024-byte header (`BKLO`, version,
//! ledgers-map offset and count), then records `int32 length | body`, back to back, with no
//! checksum of their own; the body is the client's entry as sent (ledger id, entry id, LAC,
//! length, digest, payload). DirectEntryLogger files (4.16+) have a 4 KiB header block and pad
//! each flushed buffer with 0xF0 bytes to a 4 KiB boundary (§3.6).
//!
//! An entry is read at its location (the offset of its body) and accepted only if the length
//! before it is sane and the body names the ledger and entry asked for: Java's own check, and
//! ours against an index slot that points at bytes a crash never wrote.

use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::file::{read_exact_at, Cursor};
use crate::{be_i32, be_i64, be_u32, be_u64, JavaError};

pub const LOG_MAGIC: [u8; 4] = *b"BKLO";
pub const LOG_HEADER_BYTES: u64 = 1024;
/// DirectEntryLogger's header block; entries start after it.
pub const DIRECT_HEADER_BYTES: u64 = 4096;
/// The dummy record DirectEntryLogger writes at 1024 so that a legacy scanner jumps to 4096.
const DIRECT_DUMMY_LENGTH: i32 = 3068;
/// Java's smallest sane entry: the ledger id and entry id.
pub const MIN_ENTRY_BYTES: u32 = 16;
/// The ledger id of ledgers-map records (and of Direct's dummy record).
pub const INVALID_LEDGER: i64 = -1;
/// The entry id of ledgers-map records.
pub const LEDGERS_MAP_ENTRY: i64 = -2;
/// The most ledgers Java writes in one ledgers-map batch: a larger count is not a map.
const LEDGERS_MAP_MAX_BATCH: i32 = 10_000;
/// A bound on one entry's length: 20 times Java's default frame limit (nettyMaxFrameSizeBytes,
/// 5 MiB); a larger "length" is corruption, not an entry to allocate for.
pub const MAX_ENTRY_BYTES: u32 = 100 << 20;
/// The most bytes [`EntryLog::read_entries`] reads at once.
pub const MAX_SPAN_BYTES: u64 = 4 << 20;

/// An entry log's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogHeader {
    /// 0: no ledgers map; 1: the map fields are meaningful (every 4.14–4.18 writer).
    pub version: u32,
    /// Offset of the ledgers map, 0 when none was written (the log active at shutdown).
    pub ledgers_map_offset: u64,
    pub ledgers_map_count: u32,
    /// Written by DirectEntryLogger: entries start at 4096.
    pub direct: bool,
}

impl LogHeader {
    /// Where the first entry record starts.
    pub fn data_start(&self) -> u64 {
        if self.direct {
            DIRECT_HEADER_BYTES
        } else {
            LOG_HEADER_BYTES
        }
    }
}

/// Parses the first 1024 (or, to recognise a Direct log, 1036) bytes of a log.
pub fn parse_header(b: &[u8]) -> Result<LogHeader, String> {
    if b.len() < LOG_HEADER_BYTES as usize {
        return Err(format!("header of {} bytes, want 1024", b.len()));
    }
    if b[0..4] != LOG_MAGIC {
        return Err(format!("bad magic {:02x?}, want BKLO", &b[0..4]));
    }
    let version = be_u32(b, 4);
    if version > 1 {
        return Err(format!("unknown entry log header version {version}"));
    }
    let (ledgers_map_offset, ledgers_map_count) = if version >= 1 {
        (be_u64(b, 8), be_u32(b, 16))
    } else {
        (0, 0)
    };
    let direct = b.len() >= 1036
        && be_i32(b, 1024) == DIRECT_DUMMY_LENGTH
        && be_i64(b, 1028) == INVALID_LEDGER;
    Ok(LogHeader {
        version,
        ledgers_map_offset,
        ledgers_map_count,
        direct,
    })
}

/// One record found by [`EntryLog::scan`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScannedEntry {
    pub ledger: i64,
    pub entry: i64,
    /// Offset of the body (the entry's location).
    pub offset: u64,
    pub length: u32,
}

/// An open entry log.
pub struct EntryLog {
    pub id: u64,
    path: PathBuf,
    file: File,
    len: u64,
    /// `None` for a log shorter than its header: Java creates a log with its header only in
    /// the write buffer, so a just-allocated log may be empty on disk (§3.5).
    pub header: Option<LogHeader>,
}

impl EntryLog {
    pub fn open(path: &Path, id: u64) -> Result<EntryLog, JavaError> {
        let file = File::open(path).map_err(|e| JavaError::io(path, "open entry log", e))?;
        let len = file
            .metadata()
            .map_err(|e| JavaError::io(path, "stat entry log", e))?
            .len();
        let header = if len < LOG_HEADER_BYTES {
            None
        } else {
            let want = if len >= 1036 { 1036 } else { 1024 };
            let b = read_exact_at(&file, 0, want)
                .map_err(|e| JavaError::io(path, "read entry log header", e))?
                .ok_or_else(|| JavaError::at(path, 0, "entry log header truncated"))?;
            Some(parse_header(&b).map_err(|w| JavaError::at(path, 0, w))?)
        };
        Ok(EntryLog {
            id,
            path: path.to_path_buf(),
            file,
            len,
            header,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.header.is_none()
    }

    /// The body of (`ledger`, `entry`) at `offset` (its location's offset). Errors name the
    /// file and offset: a location that does not hold that entry is corruption of the index or
    /// of the log, never a silent miss.
    pub fn read_entry(&self, offset: u64, ledger: i64, entry: i64) -> Result<Bytes, JavaError> {
        let data_start = match self.header {
            Some(h) => h.data_start(),
            None => return Err(JavaError::at(&self.path, offset, "entry log is empty")),
        };
        if offset < data_start + 4 || offset > self.len {
            return Err(JavaError::at(
                &self.path,
                offset,
                format!("location outside the log ({} bytes)", self.len),
            ));
        }
        let head = read_exact_at(&self.file, offset - 4, 20)
            .map_err(|e| JavaError::io(&self.path, "read entry", e))?
            .ok_or_else(|| JavaError::at(&self.path, offset, "entry header past the end"))?;
        let length = be_i32(&head, 0);
        if length < MIN_ENTRY_BYTES as i32 || length as u32 > MAX_ENTRY_BYTES {
            return Err(JavaError::at(
                &self.path,
                offset,
                format!("bad entry length {length}"),
            ));
        }
        let (l, e) = (be_i64(&head, 4), be_i64(&head, 12));
        if (l, e) != (ledger, entry) {
            return Err(JavaError::at(
                &self.path,
                offset,
                format!("holds ledger {l} entry {e}, not ledger {ledger} entry {entry}"),
            ));
        }
        let body = read_exact_at(&self.file, offset, length as usize)
            .map_err(|e| JavaError::io(&self.path, "read entry", e))?
            .ok_or_else(|| JavaError::at(&self.path, offset, "entry body past the end"))?;
        Ok(Bytes::from(body))
    }

    /// Several entries of this log in one positioned read: `at` lists (body offset, ledger,
    /// entry) in increasing offset order, close together (a catch-up's run, written back to
    /// back). Every entry gets the checks of [`read_entry`](Self::read_entry); the last is read
    /// on its own (its length is only known from its prefix).
    pub fn read_entries(&self, at: &[(u64, i64, i64)]) -> Result<Vec<Bytes>, JavaError> {
        let Some((&(last_off, last_l, last_e), rest)) = at.split_last() else {
            return Ok(Vec::new());
        };
        let mut out = Vec::with_capacity(at.len());
        if let Some(&(first, _, _)) = rest.first() {
            if first < 4 || last_off < first || last_off - first > MAX_SPAN_BYTES {
                return Err(JavaError::at(
                    &self.path,
                    first,
                    "entries too far apart for one read",
                ));
            }
            let start = first - 4;
            let span = read_exact_at(&self.file, start, (last_off - 4 - start) as usize)
                .map_err(|e| JavaError::io(&self.path, "read entries", e))?
                .ok_or_else(|| JavaError::at(&self.path, start, "entries past the end"))?;
            for (i, &(off, ledger, entry)) in rest.iter().enumerate() {
                let next = at[i + 1].0;
                let pos = (off - 4 - start) as usize;
                let bad = |what: String| JavaError::at(&self.path, off, what);
                let length = span
                    .get(pos..pos + 4)
                    .map(|b| be_i32(b, 0))
                    .ok_or_else(|| bad("entry header outside the read".into()))?;
                if length < MIN_ENTRY_BYTES as i32 || off + length as u64 + 4 > next {
                    return Err(bad(format!("bad entry length {length}")));
                }
                let body = &span[pos + 4..pos + 4 + length as usize];
                let (l, e) = (be_i64(body, 0), be_i64(body, 8));
                if (l, e) != (ledger, entry) {
                    return Err(bad(format!(
                        "holds ledger {l} entry {e}, not ledger {ledger} entry {entry}"
                    )));
                }
                out.push(Bytes::copy_from_slice(body));
            }
        }
        out.push(self.read_entry(last_off, last_l, last_e)?);
        Ok(out)
    }

    /// Calls `f` for every entry record in file order, as Java's scanner finds them: a length
    /// that is not positive is padding (legacy logs: advance one byte; Direct logs: 0xF0
    /// padding, skip to the next 4 KiB boundary, and zeros end the data), records of ledger −1
    /// (the ledgers map, Direct's dummy) are skipped, a short read ends the scan. Returns the
    /// offset where the scan ended.
    pub fn scan(&self, f: impl FnMut(ScannedEntry)) -> Result<u64, JavaError> {
        self.scan_checked(f).map(|(end, _)| end)
    }

    /// [`EntryLog::scan`], and whether the records could not all be accounted for: a legacy
    /// log's padding with records after it (Java's writer leaves no gaps, so the scanner may
    /// have resynchronised inside a record and skipped real ones), a record too short for an
    /// entry, or a negative ledger id other than the map's. A torn last record is not doubtful.
    fn scan_checked(&self, mut f: impl FnMut(ScannedEntry)) -> Result<(u64, bool), JavaError> {
        let Some(h) = self.header else {
            return Ok((0, false));
        };
        let io = |e| JavaError::io(&self.path, "scan entry log", e);
        let mut c = Cursor::new(&self.file, self.len, 1 << 20);
        let mut pos = h.data_start();
        let (mut gap, mut doubtful) = (false, false);
        while let Some(b) = c.bytes(pos, 12).map_err(io)? {
            let length = be_i32(b, 0);
            let ledger = be_i64(b, 4);
            if length <= 0 {
                if h.direct {
                    if length == 0 {
                        break;
                    }
                    pos = (pos / DIRECT_HEADER_BYTES + 1) * DIRECT_HEADER_BYTES;
                } else {
                    gap = true;
                    pos += 1;
                }
                continue;
            }
            let length = length as u32;
            if pos + 4 + length as u64 > self.len {
                break;
            }
            doubtful |= gap || (ledger < 0 && ledger != INVALID_LEDGER);
            if ledger != INVALID_LEDGER {
                if length < MIN_ENTRY_BYTES {
                    doubtful = true;
                } else {
                    let Some(b) = c.bytes(pos + 12, 8).map_err(io)? else {
                        break;
                    };
                    f(ScannedEntry {
                        ledger,
                        entry: be_i64(b, 0),
                        offset: pos + 4,
                        length,
                    });
                }
            }
            pos += 4 + length as u64;
        }
        Ok((pos, doubtful))
    }
}

impl EntryLog {
    /// The ledgers with an entry in this log, as Java's collector finds them
    /// (`extractEntryLogMetadataFromIndex`, then `...ByScanning`): from the ledgers map a rotated
    /// log ends with (§3.3), its batches walked from the header's offset and their total checked
    /// against the header's count; a log without a map (the one active when Java stopped), or
    /// whose map does not add up, is scanned record by record. `None` when a scan could not
    /// account for every record (`scan_checked`'s doubts): the ledgers it found may not be all.
    pub fn ledger_ids(&self) -> Result<Option<BTreeSet<u64>>, JavaError> {
        if let Some(ids) = self.ledgers_map()? {
            return Ok(Some(ids));
        }
        let mut ids = BTreeSet::new();
        let (_, doubtful) = self.scan_checked(|e| {
            if e.ledger >= 0 {
                ids.insert(e.ledger as u64);
            }
        })?;
        Ok((!doubtful).then_some(ids))
    }

    /// The ledgers map, `None` when there is none or it does not add up.
    fn ledgers_map(&self) -> Result<Option<BTreeSet<u64>>, JavaError> {
        let Some(h) = self.header else {
            return Ok(None);
        };
        if h.version < 1 || h.ledgers_map_offset == 0 || h.ledgers_map_count == 0 {
            return Ok(None);
        }
        let io = |e| JavaError::io(&self.path, "read the ledgers map of", e);
        let mut ids = BTreeSet::new();
        let mut total = 0u64;
        let mut pos = h.ledgers_map_offset;
        while pos + 24 <= self.len {
            let Some(b) = read_exact_at(&self.file, pos, 24).map_err(io)? else {
                break;
            };
            let length = be_i32(&b, 0);
            if length <= 0 {
                break;
            }
            let k = be_i32(&b, 20);
            if be_i64(&b, 4) != INVALID_LEDGER
                || be_i64(&b, 12) != LEDGERS_MAP_ENTRY
                || !(0..=LEDGERS_MAP_MAX_BATCH).contains(&k)
                || length as u64 != 20 + 16 * k as u64
                || pos + 4 + length as u64 > self.len
            {
                return Ok(None);
            }
            let Some(pairs) = read_exact_at(&self.file, pos + 24, 16 * k as usize).map_err(io)?
            else {
                return Ok(None);
            };
            for i in 0..k as usize {
                let ledger = be_i64(&pairs, 16 * i);
                if ledger >= 0 {
                    ids.insert(ledger as u64);
                }
            }
            total += k as u64;
            pos += 4 + length as u64;
        }
        Ok((total == h.ledgers_map_count as u64).then_some(ids))
    }
}

/// Test helpers that write logs the way Java does (§3), for this crate's tests and the
/// bookie's.
pub mod write {
    use super::*;

    /// A Default-logger log: header version 1, entries packed from 1024. Returns the bytes and
    /// each entry's body offset.
    pub fn legacy_log(entries: &[&[u8]], with_map: bool) -> (Vec<u8>, Vec<u64>) {
        let mut b = vec![0u8; LOG_HEADER_BYTES as usize];
        b[0..4].copy_from_slice(&LOG_MAGIC);
        b[4..8].copy_from_slice(&1u32.to_be_bytes());
        let mut offsets = Vec::new();
        let mut per_ledger: Vec<(i64, u64)> = Vec::new();
        for body in entries {
            b.extend_from_slice(&(body.len() as u32).to_be_bytes());
            offsets.push(b.len() as u64);
            b.extend_from_slice(body);
            let l = i64::from_be_bytes(body[0..8].try_into().expect("8"));
            match per_ledger.iter_mut().find(|(x, _)| *x == l) {
                Some(s) => s.1 += body.len() as u64 + 4,
                None => per_ledger.push((l, body.len() as u64 + 4)),
            }
        }
        if with_map {
            let at = b.len() as u64;
            b.extend_from_slice(&((20 + 16 * per_ledger.len()) as u32).to_be_bytes());
            b.extend_from_slice(&(-1i64).to_be_bytes());
            b.extend_from_slice(&(-2i64).to_be_bytes());
            b.extend_from_slice(&(per_ledger.len() as u32).to_be_bytes());
            for (l, n) in &per_ledger {
                b.extend_from_slice(&l.to_be_bytes());
                b.extend_from_slice(&n.to_be_bytes());
            }
            b[8..16].copy_from_slice(&at.to_be_bytes());
            b[16..20].copy_from_slice(&(per_ledger.len() as u32).to_be_bytes());
        }
        (b, offsets)
    }

    /// A client entry body (§4) with a 4-byte digest field (not a real digest: the bookie
    /// never checks it).
    pub fn body(ledger: i64, entry: i64, lac: i64, payload: &[u8]) -> Vec<u8> {
        let mut b = Vec::with_capacity(36 + payload.len());
        b.extend_from_slice(&ledger.to_be_bytes());
        b.extend_from_slice(&entry.to_be_bytes());
        b.extend_from_slice(&lac.to_be_bytes());
        b.extend_from_slice(&(payload.len() as i64).to_be_bytes());
        b.extend_from_slice(&[0xd1, 0x6e, 0x57, 0x00]);
        b.extend_from_slice(payload);
        b
    }
}

#[cfg(test)]
mod tests {
    use super::write::*;
    use super::*;

    fn log_file(dir: &Path, bytes: &[u8]) -> PathBuf {
        let p = dir.join("3.log");
        std::fs::write(&p, bytes).unwrap();
        p
    }

    #[test]
    fn header_as_in_the_reference_example() {
        // docs/java-formats.md §3.1: map at 0x3fffe010, 5 ledgers.
        let mut b = vec![0u8; 1024];
        b[0..16].copy_from_slice(&[
            0x42, 0x4b, 0x4c, 0x4f, 0, 0, 0, 1, 0, 0, 0, 0, 0x3f, 0xff, 0xe0, 0x10,
        ]);
        b[16..20].copy_from_slice(&[0, 0, 0, 5]);
        let h = parse_header(&b).unwrap();
        assert_eq!(
            h,
            LogHeader {
                version: 1,
                ledgers_map_offset: 0x3fff_e010,
                ledgers_map_count: 5,
                direct: false
            }
        );
        b[7] = 2;
        assert!(parse_header(&b).unwrap_err().contains("version 2"));
        b[0] = b'X';
        assert!(parse_header(&b).unwrap_err().contains("magic"));
        assert!(parse_header(&b[..100]).is_err());
    }

    #[test]
    fn read_and_scan_entries() {
        let dir = tempfile::tempdir().unwrap();
        let bodies: Vec<Vec<u8>> = (0..5)
            .map(|e| body(7, e, e - 1, &vec![e as u8; 13 + e as usize * 100]))
            .collect();
        let refs: Vec<&[u8]> = bodies.iter().map(|b| b.as_slice()).collect();
        for with_map in [false, true] {
            let (bytes, offsets) = legacy_log(&refs, with_map);
            let log = EntryLog::open(&log_file(dir.path(), &bytes), 3).unwrap();
            assert_eq!(offsets[0], 1028);
            for (e, off) in offsets.iter().enumerate() {
                let got = log.read_entry(*off, 7, e as i64).unwrap();
                assert_eq!(got.as_ref(), bodies[e].as_slice());
            }
            // The wrong ids at a location are refused, naming the file and offset.
            let err = log.read_entry(offsets[1], 7, 2).unwrap_err();
            assert!(err.to_string().contains("3.log at offset"), "{err}");
            assert!(log.read_entry(offsets[1], 8, 1).is_err());
            assert!(log.read_entry(3, 7, 0).is_err());
            assert!(log.read_entry(bytes.len() as u64 + 100, 7, 0).is_err());
            let mut seen = Vec::new();
            log.scan(|s| seen.push((s.ledger, s.entry, s.offset)))
                .unwrap();
            let want: Vec<_> = offsets
                .iter()
                .enumerate()
                .map(|(e, o)| (7, e as i64, *o))
                .collect();
            assert_eq!(seen, want, "with_map {with_map}");
        }
    }

    #[test]
    fn entries_read_together_are_checked_like_one() {
        let dir = tempfile::tempdir().unwrap();
        let bodies: Vec<Vec<u8>> = (0..6)
            .map(|e| body(9, e, e - 1, &vec![e as u8; 50 * e as usize]))
            .collect();
        let refs: Vec<&[u8]> = bodies.iter().map(|b| b.as_slice()).collect();
        let (bytes, offsets) = legacy_log(&refs, false);
        let log = EntryLog::open(&log_file(dir.path(), &bytes), 3).unwrap();
        let at: Vec<(u64, i64, i64)> = offsets
            .iter()
            .enumerate()
            .map(|(e, o)| (*o, 9, e as i64))
            .collect();
        let got = log.read_entries(&at).unwrap();
        assert_eq!(got.len(), 6);
        for (g, b) in got.iter().zip(&bodies) {
            assert_eq!(g.as_ref(), b.as_slice());
        }
        assert_eq!(
            log.read_entries(&at[4..5]).unwrap()[0].as_ref(),
            bodies[4].as_slice()
        );
        // A wrong id in the middle, or offsets that are not the entries': errors, not bodies.
        let mut wrong = at.clone();
        wrong[2].2 = 7;
        assert!(log
            .read_entries(&wrong)
            .unwrap_err()
            .to_string()
            .contains("not ledger 9 entry 7"));
        let mut skewed = at.clone();
        skewed[1].0 += 1;
        assert!(log.read_entries(&skewed).is_err());
    }

    #[test]
    fn ledgers_from_the_map_or_a_scan() {
        let dir = tempfile::tempdir().unwrap();
        let bodies: Vec<Vec<u8>> = [(3, 0), (8, 0), (3, 1), (5, 0), (8, 1)]
            .iter()
            .map(|&(l, e)| body(l, e, e - 1, &[1; 40]))
            .collect();
        let refs: Vec<&[u8]> = bodies.iter().map(|b| b.as_slice()).collect();
        let want = BTreeSet::from([3, 5, 8]);
        // A rotated log: its map.
        let (with_map, _) = legacy_log(&refs, true);
        let p = dir.path().join("1.log");
        std::fs::write(&p, &with_map).unwrap();
        let log = EntryLog::open(&p, 1).unwrap();
        assert_eq!(log.ledgers_map().unwrap(), Some(want.clone()));
        assert_eq!(log.ledger_ids().unwrap(), Some(want.clone()));
        // The map names a ledger the records do not hold (Java counts what it wrote; the map
        // is what its collector trusts): the map wins over a scan.
        let mut other = with_map.clone();
        let at = other.len() - 16 * 3 + 16; // the second pair's ledger id
        other[at..at + 8].copy_from_slice(&11i64.to_be_bytes());
        std::fs::write(&p, &other).unwrap();
        let log = EntryLog::open(&p, 1).unwrap();
        assert_eq!(log.ledger_ids().unwrap(), Some(BTreeSet::from([3, 5, 11])));
        // A map whose total is not the header's count: scanned instead.
        let mut bad = with_map.clone();
        bad[16..20].copy_from_slice(&4u32.to_be_bytes());
        std::fs::write(&p, &bad).unwrap();
        let log = EntryLog::open(&p, 1).unwrap();
        assert_eq!(log.ledgers_map().unwrap(), None);
        assert_eq!(log.ledger_ids().unwrap(), Some(want.clone()));
        // The log active when Java stopped: no map, scanned.
        let (no_map, _) = legacy_log(&refs, false);
        std::fs::write(&p, &no_map).unwrap();
        let log = EntryLog::open(&p, 1).unwrap();
        assert_eq!(log.ledgers_map().unwrap(), None);
        assert_eq!(log.ledger_ids().unwrap(), Some(want.clone()));
        // Cut in its last record (a crash): what is whole is all there is.
        std::fs::write(&p, &no_map[..no_map.len() - 10]).unwrap();
        let log = EntryLog::open(&p, 1).unwrap();
        assert_eq!(log.ledger_ids().unwrap(), Some(BTreeSet::from([3, 5, 8])));
        // Zeros in the middle, records after them (a hole a crash left): the scan cannot vouch
        // for what it stepped over.
        let mut holed = no_map.clone();
        let second = LOG_HEADER_BYTES as usize + 4 + bodies[0].len();
        holed[second..second + 20].fill(0);
        std::fs::write(&p, &holed).unwrap();
        assert_eq!(EntryLog::open(&p, 1).unwrap().ledger_ids().unwrap(), None);
        // A record whose ledger id is negative (not the map's -1): garbage, doubtful.
        let mut neg = no_map.clone();
        let at = LOG_HEADER_BYTES as usize + 4;
        neg[at..at + 8].copy_from_slice(&(-7i64).to_be_bytes());
        std::fs::write(&p, &neg).unwrap();
        assert_eq!(EntryLog::open(&p, 1).unwrap().ledger_ids().unwrap(), None);
        // Allocated ahead, its header only: no ledgers.
        std::fs::write(&p, &no_map[..LOG_HEADER_BYTES as usize]).unwrap();
        let ids = EntryLog::open(&p, 1).unwrap().ledger_ids().unwrap();
        assert_eq!(ids, Some(BTreeSet::new()));
    }

    #[test]
    fn torn_tail_and_empty_logs() {
        let dir = tempfile::tempdir().unwrap();
        let bodies: Vec<Vec<u8>> = (0..3).map(|e| body(1, e, -1, b"payload")).collect();
        let refs: Vec<&[u8]> = bodies.iter().map(|b| b.as_slice()).collect();
        let (bytes, offsets) = legacy_log(&refs, false);
        // A crash cut the last record short: the scan ends before it, reads of it fail.
        let cut = &bytes[..bytes.len() - 5];
        let log = EntryLog::open(&log_file(dir.path(), cut), 3).unwrap();
        let mut n = 0;
        log.scan(|_| n += 1).unwrap();
        assert_eq!(n, 2);
        assert!(log.read_entry(offsets[2], 1, 2).is_err());
        // A log allocated but never flushed.
        let log = EntryLog::open(&log_file(dir.path(), &[]), 3).unwrap();
        assert!(log.is_empty());
        assert_eq!(log.scan(|_| n += 1).unwrap(), 0);
        assert!(log.read_entry(1028, 1, 0).is_err());
    }

    #[test]
    fn direct_logs_skip_padding() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = vec![0u8; 4096];
        b[0..4].copy_from_slice(&LOG_MAGIC);
        b[4..8].copy_from_slice(&1u32.to_be_bytes());
        b[1024..1028].copy_from_slice(&3068i32.to_be_bytes());
        b[1028..1036].copy_from_slice(&(-1i64).to_be_bytes());
        let e0 = body(4, 0, -1, &[9u8; 100]);
        b.extend_from_slice(&(e0.len() as u32).to_be_bytes());
        b.extend_from_slice(&e0);
        b.resize(8192, 0xF0);
        let e1 = body(4, 1, 0, &[8u8; 50]);
        b.extend_from_slice(&(e1.len() as u32).to_be_bytes());
        b.extend_from_slice(&e1);
        b.resize(16384, 0);
        let log = EntryLog::open(&log_file(dir.path(), &b), 3).unwrap();
        assert!(log.header.unwrap().direct);
        let mut seen = Vec::new();
        log.scan(|s| seen.push((s.entry, s.offset))).unwrap();
        assert_eq!(seen, vec![(0, 4100), (1, 8196)]);
        assert_eq!(log.read_entry(8196, 4, 1).unwrap().as_ref(), e1.as_slice());
    }
}
