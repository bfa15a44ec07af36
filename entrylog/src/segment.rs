//! Entry log segments: append-only files `NNNNNNNNNNNNNNNN.log` holding entry bodies, each
//! behind its own checksummed header, so a segment can be verified and the index rebuilt
//! without any other file (style guide §B5; Java's entry log has no checksum).
//!
//! A segment starts with a 4 KiB header block, then entries packed at 8-byte alignment. Each
//! flush appends at the segment's committed length (a 4 KiB boundary) and zero-pads its tail
//! to the next boundary, so a flush never rewrites a block holding synced entries. The
//! manifest records each segment's committed length; bytes beyond it are garbage of an
//! interrupted flush and are overwritten by the next one. Layouts: `FORMAT.md` §2.

use bytes::Bytes;
use storage::{FileId, Storage};

use crate::error::{CorruptionKind, StoreError};
use crate::format::*;
use crate::io::{self, ChunkWriter, SeqReader};

/// Where an entry lives: segment id, offset of its header, and its body length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Location {
    pub segment: u32,
    /// Offset of the entry header in the segment file.
    pub offset: u64,
    /// Body length in bytes.
    pub length: u32,
}

impl Location {
    /// Bytes the entry occupies in the segment, header and padding included.
    pub fn stored_bytes(&self) -> u64 {
        round_up(
            ENTRY_HEADER_BYTES as u64 + self.length as u64,
            ENTRY_ALIGN as u64,
        )
    }
}

/// Encodes a segment header block.
pub fn encode_header(segment: u64) -> [u8; BLOCK] {
    let mut b = [0u8; BLOCK];
    b[0..8].copy_from_slice(&SEGMENT_MAGIC);
    put_u16(&mut b, 8, SEGMENT_VERSION);
    put_u32(&mut b, 12, BLOCK as u32);
    put_u64(&mut b, 16, segment);
    let crc = crc32c::crc32c(&b[..BLOCK - 4]);
    put_u32(&mut b, BLOCK - 4, crc);
    b
}

/// Checks a segment header block; returns the corruption kind on failure.
pub fn decode_header(b: &[u8], segment: u64) -> Result<(), CorruptionKind> {
    if b.len() < BLOCK {
        return Err(CorruptionKind::Truncated);
    }
    if b[0..8] != SEGMENT_MAGIC {
        return Err(CorruptionKind::BadMagic);
    }
    if crc32c::crc32c(&b[..BLOCK - 4]) != get_u32(b, BLOCK - 4) {
        return Err(CorruptionKind::BadChecksum);
    }
    if get_u16(b, 8) != SEGMENT_VERSION {
        return Err(CorruptionKind::UnsupportedVersion);
    }
    if get_u16(b, 10) != 0 || get_u32(b, 12) != BLOCK as u32 || get_u64(b, 16) != segment {
        return Err(CorruptionKind::BadField);
    }
    Ok(())
}

fn entry_crc(segment: u64, header: &[u8], body: &[u8]) -> u32 {
    let seed = crc32c::crc32c(&segment.to_le_bytes());
    let c = crc32c::crc32c_append(seed, &header[0..12]);
    let c = crc32c::crc32c_append(c, &header[16..32]);
    crc32c::crc32c_append(c, body)
}

/// Encodes an entry header for `body`.
pub fn encode_entry_header(
    segment: u64,
    ledger: u64,
    entry: u64,
    body: &[u8],
) -> [u8; ENTRY_HEADER_BYTES] {
    let mut h = [0u8; ENTRY_HEADER_BYTES];
    h[0..4].copy_from_slice(&ENTRY_MAGIC);
    put_u16(&mut h, 4, ENTRY_VERSION);
    put_u32(&mut h, 8, body.len() as u32);
    put_u64(&mut h, 16, ledger);
    put_u64(&mut h, 24, entry);
    let crc = entry_crc(segment, &h, body);
    put_u32(&mut h, 12, crc);
    h
}

/// The fields of an entry header that passed its structural checks (not yet the CRC).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryHeader {
    pub ledger: u64,
    pub entry: u64,
    pub length: u32,
    crc: u32,
}

/// Checks an entry header's magic, version and reserved bytes.
pub fn decode_entry_header(h: &[u8]) -> Result<EntryHeader, CorruptionKind> {
    if h.len() < ENTRY_HEADER_BYTES {
        return Err(CorruptionKind::Truncated);
    }
    if h[0..4] != ENTRY_MAGIC {
        return Err(CorruptionKind::BadMagic);
    }
    if get_u16(h, 4) != ENTRY_VERSION {
        return Err(CorruptionKind::UnsupportedVersion);
    }
    if get_u16(h, 6) != 0 {
        return Err(CorruptionKind::BadField);
    }
    Ok(EntryHeader {
        length: get_u32(h, 8),
        crc: get_u32(h, 12),
        ledger: get_u64(h, 16),
        entry: get_u64(h, 24),
    })
}

/// Verifies an entry's CRC over its header and body.
pub fn verify_entry(
    segment: u64,
    h: &[u8],
    eh: &EntryHeader,
    body: &[u8],
) -> Result<(), CorruptionKind> {
    if body.len() != eh.length as usize {
        return Err(CorruptionKind::BadLength);
    }
    if entry_crc(segment, h, body) != eh.crc {
        return Err(CorruptionKind::BadChecksum);
    }
    Ok(())
}

/// A segment being appended to during one flush.
pub(crate) struct SegmentAppender {
    pub(crate) id: u64,
    pub(crate) name: String,
    file: FileId,
    writer: ChunkWriter,
}

impl SegmentAppender {
    /// Creates segment `id` and queues its header block.
    pub(crate) fn create<S: Storage>(
        storage: &mut S,
        id: u64,
        chunk: usize,
        max_in_flight: usize,
    ) -> Result<SegmentAppender, StoreError> {
        if id > u32::MAX as u64 {
            return Err(StoreError::Limit("segment ids above 2^32"));
        }
        let name = file_name(FileKind::Segment, id);
        let file = storage
            .open(&name, true)
            .map_err(|e| StoreError::io("create segment", &name, e))?;
        let mut writer = ChunkWriter::new(file, 0, chunk, max_in_flight);
        let r = writer.write(storage, &encode_header(id));
        let mut s = SegmentAppender {
            id,
            name,
            file,
            writer,
        };
        if let Err(e) = r {
            s.abort(storage);
            return Err(StoreError::io("write segment header", &s.name, e));
        }
        Ok(s)
    }

    /// Reopens segment `id` to append at `committed` (a block boundary).
    pub(crate) fn reopen<S: Storage>(
        storage: &mut S,
        id: u64,
        committed: u64,
        chunk: usize,
        max_in_flight: usize,
    ) -> Result<SegmentAppender, StoreError> {
        let name = file_name(FileKind::Segment, id);
        let file = storage
            .open(&name, false)
            .map_err(|e| StoreError::io("open segment", &name, e))?;
        Ok(SegmentAppender {
            id,
            name,
            file,
            writer: ChunkWriter::new(file, committed, chunk, max_in_flight),
        })
    }

    /// The offset the next entry goes to.
    pub(crate) fn pos(&self) -> u64 {
        self.writer.pos()
    }

    /// True when nothing but the header has been appended to this segment, ever.
    pub(crate) fn is_empty(&self) -> bool {
        self.writer.pos() <= SEGMENT_HEADER_BYTES
    }

    /// Appends one entry; returns its location.
    pub(crate) fn append<S: Storage>(
        &mut self,
        storage: &mut S,
        ledger: u64,
        entry: u64,
        body: &[u8],
    ) -> Result<Location, StoreError> {
        let length =
            u32::try_from(body.len()).map_err(|_| StoreError::Limit("entry over 4 GiB"))?;
        let offset = self.writer.pos();
        let h = encode_entry_header(self.id, ledger, entry, body);
        let r = self
            .writer
            .write(storage, &h)
            .and_then(|_| self.writer.write(storage, body))
            .and_then(|_| self.writer.pad_to(storage, ENTRY_ALIGN as u64));
        if let Err(e) = r {
            self.abort(storage);
            return Err(StoreError::io("write entry log", &self.name, e));
        }
        Ok(Location {
            segment: self.id as u32,
            offset,
            length,
        })
    }

    /// Pads to a block boundary, waits for every write, syncs, closes. Returns the new
    /// committed length.
    pub(crate) fn finish<S: Storage>(mut self, storage: &mut S) -> Result<u64, StoreError> {
        let end = match self.writer.finish(storage) {
            Ok(end) => end,
            Err(e) => {
                storage.close(self.file);
                return Err(StoreError::io("write entry log", &self.name, e));
            }
        };
        let r = io::sync_data(storage, self.file);
        storage.close(self.file);
        r.map_err(|e| StoreError::io("sync entry log", &self.name, e))?;
        Ok(end)
    }

    /// Like [`finish`](Self::finish) but without the sync: for a compaction step, whose
    /// output segments are synced once, before the commit that makes them reachable
    /// ([`sync_segment`]). Each sync of a growing file costs an ext4 journal commit and a
    /// device cache flush that every journal commit meanwhile queues behind.
    pub(crate) fn finish_unsynced<S: Storage>(
        mut self,
        storage: &mut S,
    ) -> Result<u64, StoreError> {
        let r = self.writer.finish(storage);
        storage.close(self.file);
        r.map_err(|e| StoreError::io("write entry log", &self.name, e))
    }

    /// Waits for writes in flight and closes, after an error.
    pub(crate) fn abort<S: Storage>(&mut self, storage: &mut S) {
        self.writer.drain(storage);
        storage.close(self.file);
    }

    pub(crate) fn bytes_written(&self) -> u64 {
        self.writer.bytes_written
    }
}

/// Syncs segment `id`'s data (written by [`SegmentAppender::finish_unsynced`]).
pub(crate) fn sync_segment<S: Storage>(storage: &mut S, id: u64) -> Result<(), StoreError> {
    let name = file_name(FileKind::Segment, id);
    let file = storage
        .open(&name, false)
        .map_err(|e| StoreError::io("open segment", &name, e))?;
    let r = io::sync_data(storage, file);
    storage.close(file);
    r.map_err(|e| StoreError::io("sync entry log", &name, e))
}

/// Reads and verifies one entry at `loc` of an open segment file. The entry's header must name
/// (`ledger`, `entry`) and its length and CRC must match: anything else is corruption.
pub(crate) fn read_entry<S: Storage>(
    storage: &mut S,
    file: FileId,
    loc: Location,
    ledger: u64,
    entry: u64,
) -> Result<Bytes, StoreError> {
    let name = || file_name(FileKind::Segment, loc.segment as u64);
    let total = ENTRY_HEADER_BYTES + loc.length as usize;
    let (buf, skip) = io::read_range(storage, file, loc.offset, total)
        .map_err(|e| StoreError::io("read entry", &name(), e))?
        .ok_or_else(|| StoreError::corrupt(&name(), loc.offset, CorruptionKind::Truncated))?;
    decode_entry(&buf[skip..skip + total], loc, ledger, entry)
}

/// Verifies one stored entry (`bytes`: its header and body, as read from `loc`) and returns
/// its body: the header must name (`ledger`, `entry`), and its length and CRC must match.
pub(crate) fn decode_entry(
    bytes: &[u8],
    loc: Location,
    ledger: u64,
    entry: u64,
) -> Result<Bytes, StoreError> {
    let name = || file_name(FileKind::Segment, loc.segment as u64);
    if bytes.len() != ENTRY_HEADER_BYTES + loc.length as usize {
        return Err(StoreError::corrupt(
            &name(),
            loc.offset,
            CorruptionKind::Truncated,
        ));
    }
    let (h, body) = bytes.split_at(ENTRY_HEADER_BYTES);
    let corrupt = |k| StoreError::corrupt(&name(), loc.offset, k);
    let eh = decode_entry_header(h).map_err(corrupt)?;
    if eh.length != loc.length {
        return Err(corrupt(CorruptionKind::BadLength));
    }
    verify_entry(loc.segment as u64, h, &eh, body).map_err(corrupt)?;
    if eh.ledger != ledger || eh.entry != entry {
        return Err(corrupt(CorruptionKind::WrongEntry));
    }
    Ok(Bytes::copy_from_slice(body))
}

/// One verified entry found by [`scan`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScannedEntry {
    pub ledger: u64,
    pub entry: u64,
    pub location: Location,
}

/// Verifies every entry of segment `id` up to its committed length `len` and calls `f` for
/// each, in file order. Zero bytes where a header would start are flush-tail padding: the scan
/// skips to the next 4 KiB boundary. Any other failed check is an error naming the offset.
/// Used by `check` and to rebuild the index.
pub fn scan<S: Storage>(
    storage: &mut S,
    id: u64,
    len: u64,
    mut f: impl FnMut(ScannedEntry),
) -> Result<u64, StoreError> {
    let name = file_name(FileKind::Segment, id);
    let file = storage
        .open(&name, false)
        .map_err(|e| StoreError::io("open segment", &name, e))?;
    let r = scan_file(storage, file, &name, id, len, &mut f);
    storage.close(file);
    r
}

fn scan_file<S: Storage>(
    storage: &mut S,
    file: FileId,
    name: &str,
    id: u64,
    len: u64,
    f: &mut impl FnMut(ScannedEntry),
) -> Result<u64, StoreError> {
    let io_err = |e| StoreError::io("scan segment", name, e);
    let corrupt = |at, k| StoreError::corrupt(name, at, k);
    let mut r = SeqReader::new(file, len, 1 << 20);
    let header = r
        .bytes(storage, 0, BLOCK)
        .map_err(io_err)?
        .ok_or(corrupt(0, CorruptionKind::Truncated))?;
    decode_header(header, id).map_err(|k| corrupt(0, k))?;
    let mut pos = SEGMENT_HEADER_BYTES;
    let mut count = 0;
    while pos < len {
        let h = r
            .bytes(storage, pos, ENTRY_HEADER_BYTES)
            .map_err(io_err)?
            .ok_or(corrupt(pos, CorruptionKind::Truncated))?;
        if h.len() >= 4 && h[0..4] == [0, 0, 0, 0] {
            pos = round_up(pos + 1, BLOCK as u64);
            continue;
        }
        if h.len() < ENTRY_HEADER_BYTES {
            return Err(corrupt(pos, CorruptionKind::Truncated));
        }
        let h: [u8; ENTRY_HEADER_BYTES] = h
            .try_into()
            .map_err(|_| corrupt(pos, CorruptionKind::Truncated))?;
        let eh = decode_entry_header(&h).map_err(|k| corrupt(pos, k))?;
        let end = pos + ENTRY_HEADER_BYTES as u64 + eh.length as u64;
        if end > len {
            return Err(corrupt(pos, CorruptionKind::BadLength));
        }
        let body = r
            .bytes(storage, pos + ENTRY_HEADER_BYTES as u64, eh.length as usize)
            .map_err(io_err)?
            .ok_or(corrupt(pos, CorruptionKind::Truncated))?;
        verify_entry(id, &h, &eh, body).map_err(|k| corrupt(pos, k))?;
        f(ScannedEntry {
            ledger: eh.ledger,
            entry: eh.entry,
            location: Location {
                segment: id as u32,
                offset: pos,
                length: eh.length,
            },
        });
        count += 1;
        pos = round_up(end, ENTRY_ALIGN as u64);
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Segment headers round-trip; every single bit flip is detected.
    #[test]
    fn header_round_trip_and_bit_flips() {
        let b = encode_header(42);
        assert_eq!(decode_header(&b, 42), Ok(()));
        assert_eq!(decode_header(&b, 43), Err(CorruptionKind::BadField));
        assert_eq!(decode_header(&b[..100], 42), Err(CorruptionKind::Truncated));
        for bit in 0..BLOCK * 8 {
            let mut c = b;
            c[bit / 8] ^= 1 << (bit % 8);
            assert!(decode_header(&c, 42).is_err(), "bit {bit}");
        }
    }

    /// Entry headers and bodies round-trip; every bit flip in header or body is detected, and
    /// an entry copied into another segment does not verify.
    #[test]
    fn entry_round_trip_and_bit_flips() {
        let body = b"hello entry log, some body bytes".to_vec();
        let h = encode_entry_header(9, 1234, 56, &body);
        let eh = decode_entry_header(&h).unwrap();
        assert_eq!(
            (eh.ledger, eh.entry, eh.length),
            (1234, 56, body.len() as u32)
        );
        assert_eq!(verify_entry(9, &h, &eh, &body), Ok(()));
        assert_eq!(
            verify_entry(10, &h, &eh, &body),
            Err(CorruptionKind::BadChecksum)
        );
        let mut all: Vec<u8> = h.to_vec();
        all.extend_from_slice(&body);
        for bit in 0..all.len() * 8 {
            let mut c = all.clone();
            c[bit / 8] ^= 1 << (bit % 8);
            let (h2, b2) = c.split_at(ENTRY_HEADER_BYTES);
            let ok =
                decode_entry_header(h2).and_then(|eh| verify_entry(9, h2, &eh, b2).map(|_| eh));
            // A flip in the length field makes the body length disagree, also an error.
            assert!(ok.is_err(), "bit {bit} not detected");
        }
        assert!(decode_entry_header(&h[..31]).is_err());
        assert_eq!(
            decode_entry_header(&[0u8; 32]),
            Err(CorruptionKind::BadMagic)
        );
    }

    /// Stored size is header plus body, rounded to 8.
    #[test]
    fn stored_bytes() {
        let l = Location {
            segment: 1,
            offset: 4096,
            length: 1,
        };
        assert_eq!(l.stored_bytes(), 40);
        let l = Location {
            segment: 1,
            offset: 4096,
            length: 0,
        };
        assert_eq!(l.stored_bytes(), 32);
    }
}
