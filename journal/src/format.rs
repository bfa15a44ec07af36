//! The journal's on-disk format: segment header and record header, their constants, encoders
//! and decoders. `docs/format/journal.md` is the prose spec; this file is the code of it, and a
//! test (`format_doc_matches_constants`) keeps the two in step.
//!
//! All integers are little-endian. A segment file is a 4 KiB header block followed by records.
//! Records are packed at 8-byte alignment; every write (a *group*) starts on a 4 KiB boundary
//! and ends with a padding record up to the next one, so O_DIRECT writes never rewrite a block
//! that holds synced data.

use storage::ALIGN;

/// Magic at the start of every segment file.
pub const SEGMENT_MAGIC: [u8; 8] = *b"BKRSJRNL";
/// Version of the segment header layout written by this code.
pub const SEGMENT_VERSION: u16 = 1;
/// Size of the segment header block; records start here.
pub const SEGMENT_HEADER_BYTES: u64 = ALIGN as u64;
/// Offset of the header block's CRC32C, which covers bytes `[0, 4092)`.
const SEGMENT_HEADER_CRC_AT: usize = ALIGN - 4;

/// Version of the record header layout written by this code.
pub const RECORD_VERSION: u16 = 1;
/// Size of a record header.
pub const RECORD_HEADER_BYTES: usize = 32;
/// Records start at multiples of this within a group.
pub const RECORD_ALIGN: usize = 8;

/// Largest data payload the format allows (and recovery reads); `max_record_bytes` may only
/// be set below it.
pub const MAX_RECORD_PAYLOAD: usize = 64 << 20;

/// Largest payload of a padding record: padding never spans more than two blocks.
pub const MAX_PADDING_PAYLOAD: usize = 2 * ALIGN;

/// Flag of a `SegmentEnd` record (byte 7): written by recovery to cut a torn tail, at the
/// first 4 KiB boundary at or after the break. It may move the LSN sequence forward (to a
/// checkpoint mark beyond the log's end); a rotation's end record (flags 0) may not.
pub const FLAG_RECOVERY_SEAL: u8 = 1;

/// Kind of a record (byte 6 of its header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordKind {
    /// A caller's payload; consumes one LSN.
    Data = 1,
    /// Zeros up to the next 4 KiB boundary; consumes no LSN.
    Padding = 2,
    /// The segment is complete: nothing after this record belongs to the log, and the next
    /// segment continues the LSN sequence. Consumes no LSN.
    SegmentEnd = 3,
}

impl RecordKind {
    fn from_u8(byte: u8) -> Option<RecordKind> {
        match byte {
            1 => Some(RecordKind::Data),
            2 => Some(RecordKind::Padding),
            3 => Some(RecordKind::SegmentEnd),
            _ => None,
        }
    }
}

/// Log sequence number: the position of a data record in the whole journal, from 1, with no
/// gaps. `Lsn(0)` means "nothing".
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Lsn(pub u64);

/// Identity of a segment: its number, which orders segments and names their files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SegmentId(pub u64);

/// File name of a live segment: 16 hex digits, so lexical order is log order.
pub fn segment_file_name(id: SegmentId) -> String {
    format!("{:016x}.jrnl", id.0)
}

/// File name of a trimmed segment kept for recycling.
pub fn free_file_name(id: SegmentId) -> String {
    format!("{:016x}.free", id.0)
}

/// File name of a trimmed segment set aside for deletion: the owner deletes it off its own
/// thread (unlinking a 64 MiB file takes 60-70 ms on ext4 with `discard`), or the next open does.
pub fn trash_file_name(id: SegmentId) -> String {
    format!("{:016x}.trash", id.0)
}

/// Parses a file name made by [`segment_file_name`] or [`free_file_name`].
pub fn parse_file_name(name: &str) -> Option<(SegmentId, bool)> {
    let (stem, free) = if let Some(stem) = name.strip_suffix(".jrnl") {
        (stem, false)
    } else if let Some(stem) = name.strip_suffix(".free") {
        (stem, true)
    } else {
        return None;
    };
    if stem.len() != 16 {
        return None;
    }
    u64::from_str_radix(stem, 16)
        .ok()
        .map(|id| (SegmentId(id), free))
}

/// The contents of a segment header block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentHeader {
    pub id: SegmentId,
    /// Bumped each time the journal prepares a file (new or recycled), so records left in a
    /// recycled file by an earlier life can never verify under the new header.
    pub generation: u64,
}

impl SegmentHeader {
    /// Writes the header into a 4 KiB block.
    pub fn encode(&self, block: &mut [u8]) {
        assert_eq!(block.len(), ALIGN);
        block.fill(0);
        block[0..8].copy_from_slice(&SEGMENT_MAGIC);
        block[8..10].copy_from_slice(&SEGMENT_VERSION.to_le_bytes());
        block[12..16].copy_from_slice(&(ALIGN as u32).to_le_bytes());
        block[16..24].copy_from_slice(&self.id.0.to_le_bytes());
        block[24..32].copy_from_slice(&self.generation.to_le_bytes());
        let crc = crc32c::crc32c(&block[..SEGMENT_HEADER_CRC_AT]);
        block[SEGMENT_HEADER_CRC_AT..].copy_from_slice(&crc.to_le_bytes());
    }

    /// Reads a header block; `None` when the magic, version, alignment or CRC is wrong.
    pub fn decode(block: &[u8]) -> Option<SegmentHeader> {
        if block.len() < ALIGN || block[0..8] != SEGMENT_MAGIC {
            return None;
        }
        let crc = u32::from_le_bytes(block[SEGMENT_HEADER_CRC_AT..ALIGN].try_into().ok()?);
        if crc != crc32c::crc32c(&block[..SEGMENT_HEADER_CRC_AT]) {
            return None;
        }
        let version = u16::from_le_bytes(block[8..10].try_into().ok()?);
        let align = u32::from_le_bytes(block[12..16].try_into().ok()?);
        if version != SEGMENT_VERSION || align as usize != ALIGN {
            return None;
        }
        Some(SegmentHeader {
            id: SegmentId(u64::from_le_bytes(block[16..24].try_into().ok()?)),
            generation: u64::from_le_bytes(block[24..32].try_into().ok()?),
        })
    }

    /// The CRC32C seed that binds every record of this segment to its id and generation.
    pub fn crc_seed(&self) -> u32 {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&self.id.0.to_le_bytes());
        bytes[8..].copy_from_slice(&self.generation.to_le_bytes());
        crc32c::crc32c(&bytes)
    }
}

/// Bytes a record with `payload_len` bytes of payload takes in a group.
pub const fn record_bytes(payload_len: usize) -> usize {
    (RECORD_HEADER_BYTES + payload_len + RECORD_ALIGN - 1) & !(RECORD_ALIGN - 1)
}

/// Encodes a record at `out[0..record_bytes(payload.len())]`.
pub fn encode_record(
    out: &mut [u8],
    kind: RecordKind,
    lsn: Lsn,
    header: &SegmentHeader,
    seed: u32,
    payload: &[u8],
) -> usize {
    encode_record_parts(out, kind, lsn, header, seed, &[payload])
}

/// Encodes a record whose payload is the concatenation of `parts` (a caller's own header and
/// an entry body, say), without gathering them first.
pub fn encode_record_parts(
    out: &mut [u8],
    kind: RecordKind,
    lsn: Lsn,
    header: &SegmentHeader,
    seed: u32,
    parts: &[&[u8]],
) -> usize {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    let total = record_bytes(len);
    let h = &mut out[..RECORD_HEADER_BYTES];
    h[4..6].copy_from_slice(&RECORD_VERSION.to_le_bytes());
    h[6] = kind as u8;
    h[7] = 0;
    h[8..12].copy_from_slice(&(len as u32).to_le_bytes());
    h[12..16].fill(0);
    h[16..24].copy_from_slice(&lsn.0.to_le_bytes());
    h[24..32].copy_from_slice(&header.id.0.to_le_bytes());
    let mut at = RECORD_HEADER_BYTES;
    for part in parts {
        out[at..at + part.len()].copy_from_slice(part);
        at += part.len();
    }
    out[at..total].fill(0);
    let crc = record_crc(
        seed,
        &out[4..RECORD_HEADER_BYTES],
        &out[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + len],
    );
    out[0..4].copy_from_slice(&crc.to_le_bytes());
    total
}

/// Encodes a padding record of `total` bytes (at least a header) whose payload is zeros.
pub fn encode_padding(out: &mut [u8], total: usize, next: Lsn, header: &SegmentHeader, seed: u32) {
    assert!(total >= RECORD_HEADER_BYTES && total.is_multiple_of(RECORD_ALIGN));
    let payload_len = total - RECORD_HEADER_BYTES;
    out[RECORD_HEADER_BYTES..total].fill(0);
    let h = &mut out[..RECORD_HEADER_BYTES];
    h[4..6].copy_from_slice(&RECORD_VERSION.to_le_bytes());
    h[6] = RecordKind::Padding as u8;
    h[7] = 0;
    h[8..12].copy_from_slice(&(payload_len as u32).to_le_bytes());
    h[12..16].fill(0);
    h[16..24].copy_from_slice(&next.0.to_le_bytes());
    h[24..32].copy_from_slice(&header.id.0.to_le_bytes());
    let crc = record_crc(
        seed,
        &out[4..RECORD_HEADER_BYTES],
        &out[RECORD_HEADER_BYTES..total],
    );
    out[0..4].copy_from_slice(&crc.to_le_bytes());
}

/// Encodes a `SegmentEnd` record with `flags` (0 or [`FLAG_RECOVERY_SEAL`]); returns its size.
pub fn encode_segment_end(
    out: &mut [u8],
    next: Lsn,
    header: &SegmentHeader,
    seed: u32,
    flags: u8,
) -> usize {
    let n = encode_record(out, RecordKind::SegmentEnd, next, header, seed, &[]);
    out[7] = flags;
    let crc = record_crc(seed, &out[4..RECORD_HEADER_BYTES], &[]);
    out[0..4].copy_from_slice(&crc.to_le_bytes());
    n
}

fn record_crc(seed: u32, header_tail: &[u8], payload: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c_append(seed, header_tail), payload)
}

/// A record as read back, borrowing its payload.
#[derive(Debug, PartialEq, Eq)]
pub struct Record<'a> {
    pub kind: RecordKind,
    /// Byte 7: zero except [`FLAG_RECOVERY_SEAL`] on a `SegmentEnd`.
    pub flags: u8,
    pub lsn: Lsn,
    pub payload: &'a [u8],
    /// Bytes the record occupies, padding to 8 included.
    pub total: usize,
}

/// Why bytes at a position are not a valid record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordFault {
    /// Not enough bytes for the header or the payload it declares (end of the data read).
    Truncated,
    /// Version, kind, reserved bits or length out of range.
    BadHeader,
    /// The record names another segment (stale bytes of a recycled file).
    WrongSegment,
    /// The CRC does not match: torn, stale from another generation, or corrupt.
    BadChecksum,
}

/// Decodes the record at the start of `bytes`, verifying it against the segment's header.
pub fn decode_record<'a>(
    bytes: &'a [u8],
    header: &SegmentHeader,
    seed: u32,
    max_payload: usize,
) -> Result<Record<'a>, RecordFault> {
    if bytes.len() < RECORD_HEADER_BYTES {
        return Err(RecordFault::Truncated);
    }
    let h = &bytes[..RECORD_HEADER_BYTES];
    let version = u16::from_le_bytes([h[4], h[5]]);
    let kind = RecordKind::from_u8(h[6]);
    let len = u32::from_le_bytes([h[8], h[9], h[10], h[11]]) as usize;
    let reserved = u32::from_le_bytes([h[12], h[13], h[14], h[15]]);
    let Some(kind) = kind else {
        return Err(RecordFault::BadHeader);
    };
    let limit = match kind {
        RecordKind::Data => max_payload,
        RecordKind::Padding => MAX_PADDING_PAYLOAD,
        RecordKind::SegmentEnd => 0,
    };
    let flags_allowed = match kind {
        RecordKind::SegmentEnd => FLAG_RECOVERY_SEAL,
        _ => 0,
    };
    if version != RECORD_VERSION || h[7] & !flags_allowed != 0 || reserved != 0 || len > limit {
        return Err(RecordFault::BadHeader);
    }
    let segment = u64::from_le_bytes(h[24..32].try_into().expect("8 bytes"));
    if segment != header.id.0 {
        return Err(RecordFault::WrongSegment);
    }
    let total = record_bytes(len);
    if bytes.len() < RECORD_HEADER_BYTES + len {
        return Err(RecordFault::Truncated);
    }
    let payload = &bytes[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + len];
    let crc = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
    if crc != record_crc(seed, &h[4..], payload) {
        return Err(RecordFault::BadChecksum);
    }
    Ok(Record {
        kind,
        flags: h[7],
        lsn: Lsn(u64::from_le_bytes(h[16..24].try_into().expect("8 bytes"))),
        payload,
        total,
    })
}

/// Where a group that ends at `pos` (relative to a 4 KiB-aligned start) must end after its
/// padding record: the first 4 KiB boundary after `pos` that leaves room for a padding header
/// (a whole block when `pos` is itself a boundary), or 0 for an empty group.
pub const fn padded_end(pos: usize) -> usize {
    if pos == 0 {
        0
    } else if pos.is_multiple_of(ALIGN) {
        // Records that end on a boundary still get a padding record (a whole block): every
        // group then ends with one, and recovery counts groups by their padding.
        pos + ALIGN
    } else {
        (pos + RECORD_HEADER_BYTES + ALIGN - 1) & !(ALIGN - 1)
    }
}

const _: () = assert!(RECORD_HEADER_BYTES.is_multiple_of(RECORD_ALIGN));
const _: () = assert!(ALIGN.is_multiple_of(RECORD_ALIGN));
const _: () = assert!(SEGMENT_HEADER_BYTES as usize == ALIGN);

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> SegmentHeader {
        SegmentHeader {
            id: SegmentId(7),
            generation: 3,
        }
    }

    /// A record encodes and decodes to the same kind, LSN and payload, and occupies an 8-byte
    /// multiple.
    #[test]
    fn record_round_trip() {
        let h = header();
        let seed = h.crc_seed();
        let mut buf = vec![0u8; 128];
        let n = encode_record(
            &mut buf,
            RecordKind::Data,
            Lsn(42),
            &h,
            seed,
            b"entry-bytes",
        );
        assert_eq!(n, record_bytes(11));
        assert_eq!(n % 8, 0);
        let rec = decode_record(&buf, &h, seed, 1 << 20).unwrap();
        assert_eq!(rec.kind, RecordKind::Data);
        assert_eq!(rec.lsn, Lsn(42));
        assert_eq!(rec.payload, b"entry-bytes");
        assert_eq!(rec.total, n);
    }

    /// A record is bound to its segment: the same bytes under another segment id or another
    /// generation do not verify, so stale records of a recycled file never parse as current.
    #[test]
    fn records_are_bound_to_segment_and_generation() {
        let h = header();
        let mut buf = vec![0u8; 64];
        encode_record(&mut buf, RecordKind::Data, Lsn(1), &h, h.crc_seed(), b"x");
        let other_id = SegmentHeader {
            id: SegmentId(8),
            generation: 3,
        };
        assert_eq!(
            decode_record(&buf, &other_id, other_id.crc_seed(), 1 << 20),
            Err(RecordFault::WrongSegment)
        );
        let other_gen = SegmentHeader {
            id: SegmentId(7),
            generation: 4,
        };
        assert_eq!(
            decode_record(&buf, &other_gen, other_gen.crc_seed(), 1 << 20),
            Err(RecordFault::BadChecksum)
        );
    }

    /// Every single-bit flip in a record is detected.
    #[test]
    fn every_bit_flip_is_detected() {
        let h = header();
        let seed = h.crc_seed();
        let mut buf = vec![0u8; 48];
        let n = encode_record(&mut buf, RecordKind::Data, Lsn(9), &h, seed, b"0123456789");
        for bit in 0..(RECORD_HEADER_BYTES + 10) * 8 {
            let mut copy = buf.clone();
            copy[bit / 8] ^= 1 << (bit % 8);
            assert!(
                decode_record(&copy[..n], &h, seed, 1 << 20).is_err(),
                "flip of bit {bit} went unnoticed"
            );
        }
    }

    /// Truncated bytes, zeros and lengths beyond the limit are faults, never panics.
    #[test]
    fn short_and_zero_input_are_faults() {
        let h = header();
        let seed = h.crc_seed();
        assert_eq!(
            decode_record(&[0u8; 10], &h, seed, 100),
            Err(RecordFault::Truncated)
        );
        assert_eq!(
            decode_record(&[0u8; 64], &h, seed, 100),
            Err(RecordFault::BadHeader)
        );
        let mut buf = vec![0u8; 256];
        encode_record(&mut buf, RecordKind::Data, Lsn(1), &h, seed, &[5u8; 200]);
        assert_eq!(
            decode_record(&buf, &h, seed, 100),
            Err(RecordFault::BadHeader)
        );
        assert_eq!(
            decode_record(&buf[..100], &h, seed, 1000),
            Err(RecordFault::Truncated)
        );
    }

    /// A padding record is valid whatever the data-record limit: its own limit is two blocks.
    #[test]
    fn padding_is_not_bound_by_the_record_limit() {
        let h = header();
        let seed = h.crc_seed();
        let mut buf = vec![0u8; 8192];
        encode_padding(&mut buf, 4000, Lsn(5), &h, seed);
        let rec = decode_record(&buf, &h, seed, 100).unwrap();
        assert_eq!(rec.kind, RecordKind::Padding);
    }

    /// The segment header round-trips and rejects a flipped byte.
    #[test]
    fn segment_header_round_trip() {
        let mut block = vec![0u8; ALIGN];
        header().encode(&mut block);
        assert_eq!(SegmentHeader::decode(&block), Some(header()));
        block[20] ^= 1;
        assert_eq!(SegmentHeader::decode(&block), None);
        assert_eq!(SegmentHeader::decode(&[0u8; ALIGN]), None);
    }

    /// Padding always lands on a 4 KiB boundary with room for its header.
    #[test]
    fn padded_end_rules() {
        assert_eq!(padded_end(0), 0);
        assert_eq!(padded_end(4096), 8192);
        assert_eq!(padded_end(8), 4096);
        assert_eq!(padded_end(4096 - 32), 4096);
        assert_eq!(padded_end(4096 - 24), 8192);
        let mut buf = vec![0u8; 8192];
        let h = header();
        encode_padding(&mut buf, 4096 - 8, Lsn(3), &h, h.crc_seed());
        let rec = decode_record(&buf, &h, h.crc_seed(), 1 << 20).unwrap();
        assert_eq!(rec.kind, RecordKind::Padding);
        assert_eq!(rec.total, 4096 - 8);
    }

    /// File names sort in log order and parse back.
    #[test]
    fn file_names() {
        assert_eq!(segment_file_name(SegmentId(255)), "00000000000000ff.jrnl");
        assert_eq!(
            parse_file_name("00000000000000ff.jrnl"),
            Some((SegmentId(255), false))
        );
        assert_eq!(
            parse_file_name(&free_file_name(SegmentId(3))),
            Some((SegmentId(3), true))
        );
        assert_eq!(parse_file_name("ff.jrnl"), None);
        assert_eq!(parse_file_name("00000000000000ff.txt"), None);
    }
}
