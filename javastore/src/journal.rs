//! Java journal files, `<hex>.txn`, and `lastMark` (docs/java-formats.md §7). A file starts with
//! `BKLG` + a format version (V2–V4: 8 bytes, V5–V6: a 512-byte block; V1 has no header), then
//! records `int32 length | int64 ledger | int64 entry | rest`. Negative entry ids are metadata:
//! the master key (−0x1000), a fence (−0x2000), an explicit LAC (−0x8000). From V5 a length of
//! −0x100 starts a padding record. There is no checksum: the written data ends at a zero length
//! or a short read (pre-allocated zeros, or the record a crash tore).

use std::fs::File;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::file::{read_exact_at, Cursor};
use crate::{be_i32, be_i64, be_u32, JavaError};

pub const JOURNAL_MAGIC: [u8; 4] = *b"BKLG";
pub const METAENTRY_MASTER_KEY: i64 = -0x1000;
pub const METAENTRY_FENCE: i64 = -0x2000;
pub const METAENTRY_FORCE_LEDGER: i64 = -0x4000;
pub const METAENTRY_EXPLICIT_LAC: i64 = -0x8000;
/// The length word of a padding record (V5+).
pub const PADDING_MASK: i32 = -0x100;
/// A bound on one record: 20 times Java's default frame limit (nettyMaxFrameSizeBytes, 5 MiB);
/// a larger length is corruption, not a record to allocate for, and refuses the start.
pub const MAX_RECORD_BYTES: i32 = 100 << 20;

/// One journal record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// An entry; `body` is the whole record payload, which is the client's entry (its first 16
    /// bytes are the ledger and entry ids).
    Entry {
        ledger: i64,
        entry: i64,
        body: Bytes,
    },
    MasterKey {
        ledger: i64,
        key: Bytes,
    },
    Fence {
        ledger: i64,
    },
    /// The explicit LAC buffer (ledger id, LAC, digest).
    ExplicitLac {
        ledger: i64,
        body: Bytes,
    },
    /// A negative entry id this reader does not know: Java logs and skips it.
    Other {
        ledger: i64,
        entry: i64,
    },
}

impl Record {
    pub fn ledger(&self) -> i64 {
        match self {
            Record::Entry { ledger, .. }
            | Record::MasterKey { ledger, .. }
            | Record::Fence { ledger }
            | Record::ExplicitLac { ledger, .. }
            | Record::Other { ledger, .. } => *ledger,
        }
    }

    /// Decodes a record's payload (the bytes after its length).
    pub fn decode(p: &[u8]) -> Result<Record, String> {
        if p.len() < 16 {
            return Err(format!("record of {} bytes, shorter than its ids", p.len()));
        }
        let ledger = be_i64(p, 0);
        let entry = be_i64(p, 8);
        let sized = |what: &str| -> Result<Bytes, String> {
            if p.len() < 20 {
                return Err(format!("{what} record without its length"));
            }
            let n = be_i32(p, 16);
            if n < 0 || 20 + n as usize > p.len() {
                return Err(format!(
                    "{what} length {n} in a record of {} bytes",
                    p.len()
                ));
            }
            Ok(Bytes::copy_from_slice(&p[20..20 + n as usize]))
        };
        Ok(match entry {
            e if e >= 0 => Record::Entry {
                ledger,
                entry,
                body: Bytes::copy_from_slice(p),
            },
            METAENTRY_MASTER_KEY => Record::MasterKey {
                ledger,
                key: sized("master key")?,
            },
            METAENTRY_FENCE => Record::Fence { ledger },
            METAENTRY_EXPLICIT_LAC => Record::ExplicitLac {
                ledger,
                body: sized("explicit LAC")?,
            },
            _ => Record::Other { ledger, entry },
        })
    }
}

/// Why a scan of one file stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanEnd {
    /// The file ended at a record boundary.
    EndOfFile,
    /// A zero length: pre-allocated space after the written data.
    ZeroLength,
    /// A record (or padding) cut short by the end of the file: a torn last write.
    TornRecord,
    /// An invalid negative length, skipped because `skipReplayJournalInvalidRecord` is set:
    /// the rest of the file is abandoned, as Java does.
    InvalidSkipped,
}

/// An open journal file.
pub struct JournalFile {
    pub id: u64,
    pub version: u32,
    path: PathBuf,
    file: File,
    len: u64,
}

impl JournalFile {
    pub fn open(path: &Path, id: u64) -> Result<JournalFile, JavaError> {
        let file = File::open(path).map_err(|e| JavaError::io(path, "open journal", e))?;
        let len = file
            .metadata()
            .map_err(|e| JavaError::io(path, "stat journal", e))?
            .len();
        let version = match read_exact_at(&file, 0, 8)
            .map_err(|e| JavaError::io(path, "read journal header", e))?
        {
            Some(h) if h[0..4] == JOURNAL_MAGIC => {
                let v = be_u32(&h, 4);
                if !(1..=6).contains(&v) {
                    return Err(JavaError::at(
                        path,
                        4,
                        format!("unknown journal format version {v}"),
                    ));
                }
                v
            }
            _ => 1,
        };
        Ok(JournalFile {
            id,
            version,
            path: path.to_path_buf(),
            file,
            len,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where records start.
    pub fn data_start(&self) -> u64 {
        match self.version {
            1 => 0,
            2..=4 => 8,
            _ => 512,
        }
    }

    /// Calls `f(offset, record)` for each record from `from` (a record boundary; 0 means the
    /// first record) with Java's rules (§7.5). Returns the offset after the last whole record
    /// and why the scan stopped. A negative length that is not padding is an error naming the
    /// file and offset, unless `skip_invalid` (`skipReplayJournalInvalidRecord`).
    pub fn scan(
        &self,
        from: u64,
        skip_invalid: bool,
        mut f: impl FnMut(u64, Record),
    ) -> Result<(u64, ScanEnd), JavaError> {
        let io = |e| JavaError::io(&self.path, "scan journal", e);
        let mut c = Cursor::new(&self.file, self.len, 1 << 20);
        let mut pos = from.max(self.data_start());
        loop {
            let Some(b) = c.bytes(pos, 4).map_err(io)? else {
                let end = if pos == self.len {
                    ScanEnd::EndOfFile
                } else {
                    ScanEnd::TornRecord
                };
                return Ok((pos, end));
            };
            let len = be_i32(b, 0);
            if len == 0 {
                return Ok((pos, ScanEnd::ZeroLength));
            }
            if len == PADDING_MASK && self.version >= 5 {
                let Some(b) = c.bytes(pos + 4, 4).map_err(io)? else {
                    return Ok((pos, ScanEnd::TornRecord));
                };
                let pad = be_i32(b, 0);
                if pad < 0 {
                    return Err(JavaError::at(
                        &self.path,
                        pos,
                        format!("padding record of negative length {pad}"),
                    ));
                }
                let next = pos + 8 + pad as u64;
                if next > self.len {
                    return Ok((pos, ScanEnd::TornRecord));
                }
                pos = next;
                continue;
            }
            if !(0..=MAX_RECORD_BYTES).contains(&len) {
                if skip_invalid && len < 0 {
                    return Ok((pos, ScanEnd::InvalidSkipped));
                }
                return Err(JavaError::at(
                    &self.path,
                    pos,
                    format!(
                        "invalid record length {len} (Java refuses to start too, unless \
                         skipReplayJournalInvalidRecord=true)"
                    ),
                ));
            }
            let Some(p) = c.bytes(pos + 4, len as usize).map_err(io)? else {
                return Ok((pos, ScanEnd::TornRecord));
            };
            let rec = Record::decode(p).map_err(|w| JavaError::at(&self.path, pos, w))?;
            f(pos, rec);
            pos += 4 + len as u64;
        }
    }
}

/// A journal checkpoint: every record of the journal before (`file_id`, `offset`) is in ledger
/// storage. Ordered by file, then offset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct LastMark {
    pub file_id: u64,
    pub offset: u64,
}

/// Reads a `lastMark` file; `None` when it is missing, short or unreadable (Java ignores
/// those and takes the others' maximum).
pub fn read_last_mark(path: &Path) -> Option<LastMark> {
    let b = std::fs::read(path).ok()?;
    if b.len() < 16 {
        return None;
    }
    let (id, off) = (be_i64(&b, 0), be_i64(&b, 8));
    (id >= 0 && off >= 0).then_some(LastMark {
        file_id: id as u64,
        offset: off as u64,
    })
}

/// Test helpers that write journals the way Java does (§7).
pub mod write {
    use super::*;

    pub fn header(version: u32) -> Vec<u8> {
        let mut b = Vec::new();
        if version >= 2 {
            b.extend_from_slice(&JOURNAL_MAGIC);
            b.extend_from_slice(&version.to_be_bytes());
        }
        if version >= 5 {
            b.resize(512, 0);
        }
        b
    }

    pub fn record(out: &mut Vec<u8>, r: &Record) {
        let mut p = Vec::new();
        match r {
            Record::Entry { body, .. } => p.extend_from_slice(body),
            Record::MasterKey { ledger, key } => {
                p.extend_from_slice(&ledger.to_be_bytes());
                p.extend_from_slice(&METAENTRY_MASTER_KEY.to_be_bytes());
                p.extend_from_slice(&(key.len() as u32).to_be_bytes());
                p.extend_from_slice(key);
            }
            Record::Fence { ledger } => {
                p.extend_from_slice(&ledger.to_be_bytes());
                p.extend_from_slice(&METAENTRY_FENCE.to_be_bytes());
            }
            Record::ExplicitLac { ledger, body } => {
                p.extend_from_slice(&ledger.to_be_bytes());
                p.extend_from_slice(&METAENTRY_EXPLICIT_LAC.to_be_bytes());
                p.extend_from_slice(&(body.len() as u32).to_be_bytes());
                p.extend_from_slice(body);
            }
            Record::Other { ledger, entry } => {
                p.extend_from_slice(&ledger.to_be_bytes());
                p.extend_from_slice(&entry.to_be_bytes());
            }
        }
        out.extend_from_slice(&(p.len() as u32).to_be_bytes());
        out.extend_from_slice(&p);
    }

    /// Pads to the next multiple of `align` as a V5+ writer does before each flush (§7.4).
    pub fn pad(out: &mut Vec<u8>, align: usize) {
        let pos = out.len();
        if pos.is_multiple_of(align) {
            return;
        }
        let remaining = align - pos % align;
        let p = if remaining >= 8 {
            remaining - 8
        } else {
            align - (8 - remaining)
        };
        out.extend_from_slice(&PADDING_MASK.to_be_bytes());
        out.extend_from_slice(&(p as u32).to_be_bytes());
        out.resize(out.len() + p, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::write;
    use super::*;
    use crate::entrylog::write::body;

    fn records() -> Vec<Record> {
        vec![
            Record::MasterKey {
                ledger: 7,
                key: Bytes::from_static(&[3u8; 20]),
            },
            Record::Entry {
                ledger: 7,
                entry: 0,
                body: Bytes::from(body(7, 0, -1, b"first")),
            },
            Record::Fence { ledger: 7 },
            Record::ExplicitLac {
                ledger: 7,
                body: Bytes::from(vec![9u8; 20]),
            },
            Record::Other {
                ledger: 7,
                entry: METAENTRY_FORCE_LEDGER,
            },
            Record::Entry {
                ledger: 8,
                entry: 3,
                body: Bytes::from(body(8, 3, 2, &[5u8; 3000])),
            },
        ]
    }

    fn scan_all(f: &JournalFile, from: u64) -> (Vec<(u64, Record)>, u64, ScanEnd) {
        let mut out = Vec::new();
        let (end, why) = f.scan(from, false, |o, r| out.push((o, r))).unwrap();
        (out, end, why)
    }

    #[test]
    fn reference_examples_decode() {
        // docs/java-formats.md §7.3: master key and fence of ledger 7.
        let mut mk = vec![
            0, 0, 0, 0, 0, 0, 0, 7, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xf0, 0,
        ];
        mk.extend_from_slice(&[0, 0, 0, 20]);
        mk.extend_from_slice(&[1u8; 20]);
        assert_eq!(
            Record::decode(&mk).unwrap(),
            Record::MasterKey {
                ledger: 7,
                key: Bytes::from(vec![1u8; 20])
            }
        );
        let fence = [
            0, 0, 0, 0, 0, 0, 0, 7, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xe0, 0,
        ];
        assert_eq!(Record::decode(&fence).unwrap(), Record::Fence { ledger: 7 });
        assert!(Record::decode(&fence[..10]).is_err());
        let mut bad = mk.clone();
        bad[19] = 200;
        assert!(Record::decode(&bad)
            .unwrap_err()
            .contains("master key length"));
    }

    #[test]
    fn every_version_round_trips_with_padding() {
        let dir = tempfile::tempdir().unwrap();
        for version in 1..=6u32 {
            let mut b = write::header(version);
            let mut offsets = Vec::new();
            for (i, r) in records().iter().enumerate() {
                offsets.push(b.len() as u64);
                write::record(&mut b, r);
                if version >= 5 && i % 2 == 1 {
                    write::pad(&mut b, if i == 1 { 512 } else { 4096 });
                }
            }
            let end_of_data = b.len() as u64;
            b.resize(b.len() + 1000, 0); // pre-allocated zeros
            let p = dir.path().join(format!("{version}.txn"));
            std::fs::write(&p, &b).unwrap();
            let f = JournalFile::open(&p, 1).unwrap();
            assert_eq!(f.version, version);
            let (got, end, why) = scan_all(&f, 0);
            let want: Vec<(u64, Record)> = offsets.iter().copied().zip(records()).collect();
            assert_eq!(got, want, "version {version}");
            assert_eq!((why, end >= end_of_data), (ScanEnd::ZeroLength, true));
            // From a mark in the middle (a record boundary).
            let (got, _, _) = scan_all(&f, offsets[3]);
            assert_eq!(got.len(), 3);
        }
    }

    #[test]
    fn pad_shapes_as_java() {
        // §7.4: position 720, alignment 512 -> ff ff ff 00 | 00 00 01 28 | 296 zeros.
        let mut b = vec![1u8; 720];
        write::pad(&mut b, 512);
        assert_eq!(b.len(), 1024);
        assert_eq!(&b[720..728], &[0xff, 0xff, 0xff, 0, 0, 0, 1, 0x28]);
        // Fewer than 8 bytes left: the pad runs into the next block.
        let mut b = vec![1u8; 508];
        write::pad(&mut b, 512);
        assert_eq!(b.len(), 1024);
    }

    #[test]
    fn torn_tails_and_bad_lengths() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = write::header(6);
        for r in records() {
            write::record(&mut b, &r);
        }
        let p = dir.path().join("a.txn");
        // Every cut of the file gives a prefix of the records, never an error or a panic.
        let full = records();
        for cut in (512..b.len()).step_by(7) {
            std::fs::write(&p, &b[..cut]).unwrap();
            let f = JournalFile::open(&p, 10).unwrap();
            let (got, _, why) = scan_all(&f, 0);
            assert!(got.len() < full.len(), "cut {cut}");
            for (i, (_, r)) in got.iter().enumerate() {
                assert_eq!(r, &full[i]);
            }
            assert_ne!(why, ScanEnd::ZeroLength);
        }
        // A negative length is refused, or ends the file with skipReplayJournalInvalidRecord.
        let mut bad = write::header(6);
        write::record(&mut bad, &records()[0]);
        let at = bad.len();
        bad.extend_from_slice(&(-5i32).to_be_bytes());
        bad.extend_from_slice(&[0u8; 64]);
        std::fs::write(&p, &bad).unwrap();
        let f = JournalFile::open(&p, 10).unwrap();
        let err = f.scan(0, false, |_, _| {}).unwrap_err();
        assert!(
            err.to_string().contains(&format!("a.txn at offset {at}")),
            "{err}"
        );
        let (end, why) = f.scan(0, true, |_, _| {}).unwrap();
        assert_eq!((end, why), (at as u64, ScanEnd::InvalidSkipped));
        // An unknown version.
        let mut v9 = write::header(6);
        v9[7] = 9;
        std::fs::write(&p, &v9).unwrap();
        assert!(JournalFile::open(&p, 10).is_err());
    }

    #[test]
    fn last_marks() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("lastMark");
        let mut b = 0x18c_5f2a_3b4cu64.to_be_bytes().to_vec();
        b.extend_from_slice(&0x10200u64.to_be_bytes());
        std::fs::write(&p, &b).unwrap();
        assert_eq!(
            read_last_mark(&p),
            Some(LastMark {
                file_id: 0x18c_5f2a_3b4c,
                offset: 0x10200
            })
        );
        std::fs::write(&p, &b[..10]).unwrap();
        assert_eq!(read_last_mark(&p), None);
        assert_eq!(read_last_mark(&dir.path().join("none")), None);
    }
}
