//! Every on-disk constant of the crate in one place, plus file naming and the little-endian
//! helpers the format modules share. The byte tables live in `FORMAT.md`; a test there checks
//! the constants against them.

/// Block size: every file is written in whole blocks at block-aligned offsets (O_DIRECT).
pub const BLOCK: usize = storage::ALIGN;

/// Entry log segment header block magic.
pub const SEGMENT_MAGIC: [u8; 8] = *b"BKRSELOG";
pub const SEGMENT_VERSION: u16 = 1;
/// The header block's size: entries start at this offset.
pub const SEGMENT_HEADER_BYTES: u64 = BLOCK as u64;

/// Entry header magic ("BKEN"); also what tells an entry from zero padding.
pub const ENTRY_MAGIC: [u8; 4] = *b"BKEN";
pub const ENTRY_VERSION: u16 = 1;
pub const ENTRY_HEADER_BYTES: usize = 32;
/// Entries start at multiples of this within a segment.
pub const ENTRY_ALIGN: usize = 8;

/// Index run footer magic.
pub const RUN_MAGIC: [u8; 8] = *b"BKRSIRUN";
pub const RUN_VERSION: u16 = 1;
pub const INDEX_RECORD_BYTES: usize = 32;
/// Records per 4 KiB data block; the last 32 bytes are the block trailer.
pub const RECORDS_PER_BLOCK: usize = (BLOCK - BLOCK_TRAILER_BYTES) / INDEX_RECORD_BYTES;
pub const BLOCK_TRAILER_BYTES: usize = 32;
/// Bytes per sparse-index key (ledger, entry).
pub const SPARSE_KEY_BYTES: usize = 16;

/// Metadata snapshot magic.
pub const META_MAGIC: [u8; 8] = *b"BKRSMETA";
pub const META_VERSION: u16 = 1;
pub const META_HEADER_BYTES: usize = 32;
pub const META_RECORD_FIXED_BYTES: usize = 32;

/// Manifest magic.
pub const MANIFEST_MAGIC: [u8; 8] = *b"BKRSMANI";
pub const MANIFEST_VERSION: u16 = 1;
pub const MANIFEST_HEADER_BYTES: usize = 64;
pub const MANIFEST_NAME: &str = "MANIFEST";
pub const MANIFEST_TMP_NAME: &str = "MANIFEST.tmp";

const _: () = assert!(RECORDS_PER_BLOCK == 127);
const _: () = assert!(RECORDS_PER_BLOCK * INDEX_RECORD_BYTES + BLOCK_TRAILER_BYTES == BLOCK);
const _: () = assert!(ENTRY_HEADER_BYTES.is_multiple_of(ENTRY_ALIGN));

/// The kinds of numbered files. All share one id sequence (`next_file_id` in the manifest),
/// so a name is never reused, not even after a crash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileKind {
    Segment,
    Run,
    Meta,
}

impl FileKind {
    pub fn ext(self) -> &'static str {
        match self {
            FileKind::Segment => "log",
            FileKind::Run => "idx",
            FileKind::Meta => "meta",
        }
    }
}

/// `NNNNNNNNNNNNNNNN.<ext>`, 16 lower-case hex digits: lexical order is id order.
pub fn file_name(kind: FileKind, id: u64) -> String {
    format!("{id:016x}.{}", kind.ext())
}

/// Where a store's file may go when its directory spans several (`storage::dirset`): the
/// manifest stays home (renamed over), index runs and metadata snapshots are index files,
/// entry-log segments (and anything else) are data.
pub fn placement_class(name: &str) -> storage::dirset::FileClass {
    use storage::dirset::FileClass;
    if name == MANIFEST_NAME || name == MANIFEST_TMP_NAME {
        return FileClass::Pinned;
    }
    match parse_file_name(name) {
        Some((FileKind::Run | FileKind::Meta, _)) => FileClass::Index,
        Some((FileKind::Segment, _)) => FileClass::Data,
        // Unknown names are never created by the store; keep them home if they were.
        None => FileClass::Pinned,
    }
}

/// Parses a numbered file name; `None` for anything else.
pub fn parse_file_name(name: &str) -> Option<(FileKind, u64)> {
    let (stem, ext) = name.split_once('.')?;
    if stem.len() != 16 || !stem.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let kind = match ext {
        "log" => FileKind::Segment,
        "idx" => FileKind::Run,
        "meta" => FileKind::Meta,
        _ => return None,
    };
    Some((kind, u64::from_str_radix(stem, 16).ok()?))
}

/// The name a retired file takes until it is deleted: `<name>.trash`.
pub fn trash_name(name: &str) -> String {
    format!("{name}.trash")
}

/// A retired file's trash name (of a segment, the only kind retired this way).
pub fn is_trash_name(name: &str) -> bool {
    name.strip_suffix(".trash")
        .and_then(parse_file_name)
        .is_some_and(|(kind, _)| kind == FileKind::Segment)
}

/// Rounds up to a multiple of `to` (a power of two).
pub const fn round_up(n: u64, to: u64) -> u64 {
    (n + to - 1) & !(to - 1)
}

pub fn put_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}
pub fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
pub fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// Reads a little-endian u16; the caller has checked the length.
pub fn get_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
pub fn get_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}
pub fn get_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// File names round-trip and foreign names are ignored.
    #[test]
    fn file_names() {
        for kind in [FileKind::Segment, FileKind::Run, FileKind::Meta] {
            let n = file_name(kind, 0xabc);
            assert_eq!(n.len(), 16 + 1 + kind.ext().len());
            assert_eq!(parse_file_name(&n), Some((kind, 0xabc)));
        }
        for bad in [
            "MANIFEST",
            "MANIFEST.tmp",
            "0001.log",
            "000000000000000g.log",
            "x.idx",
        ] {
            assert_eq!(parse_file_name(bad), None, "{bad}");
        }
        assert_eq!(parse_file_name("00000000000000ff.jrnl"), None);
    }

    /// FORMAT.md states the same magics, versions and sizes as the code.
    #[test]
    fn format_doc_matches_constants() {
        let doc = include_str!("../FORMAT.md");
        for magic in [
            &SEGMENT_MAGIC[..],
            &RUN_MAGIC,
            &META_MAGIC,
            &MANIFEST_MAGIC,
            &ENTRY_MAGIC,
        ] {
            let m = std::str::from_utf8(magic).unwrap();
            assert!(doc.contains(&format!("magic `{m}`")), "{m}");
        }
        let rows = [
            "| 4092 | 4 | CRC32C of bytes 0..4092 |".to_string(),
            "| 8 | 4 | body length L |".to_string(),
            format!("up to {RECORDS_PER_BLOCK} records at offsets `{INDEX_RECORD_BYTES} * i`"),
            format!("| 12 | 4 | records per block ({RECORDS_PER_BLOCK}) |"),
            format!(
                "| {} | 4 | trailer: record count (1..={RECORDS_PER_BLOCK}) |",
                BLOCK - BLOCK_TRAILER_BYTES
            ),
            format!("Entry (header {ENTRY_HEADER_BYTES} B"),
            format!("Header ({META_HEADER_BYTES} B)"),
            format!("Record ({META_RECORD_FIXED_BYTES} B fixed"),
            format!("| {MANIFEST_HEADER_BYTES} | 16 S |"),
            format!("Header block ({BLOCK} B)"),
        ];
        for row in rows {
            assert!(doc.contains(&row), "FORMAT.md lacks: {row}");
        }
        assert_eq!(
            (
                SEGMENT_VERSION,
                ENTRY_VERSION,
                RUN_VERSION,
                META_VERSION,
                MANIFEST_VERSION
            ),
            (1, 1, 1, 1, 1)
        );
        assert!(doc.contains("version 1"));
    }
}
