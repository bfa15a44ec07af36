//! Read-only access to what a stopped Java bookie (Apache BookKeeper 4.14–4.18) left in its
//! journal, ledger and index directories, so that our bookie can take those directories over in
//! place (issue 32) and `bookie inspect java` can say what is there.
//!
//! The formats are described in `docs/java-formats.md` (the section numbers below are its own);
//! this crate is written from that description, not from Java's code. Everything Java writes is
//! big-endian, unlike our own formats. Nothing here writes, renames or locks a file: Java's
//! files stay as Java left them, which is what keeps a rollback to Java possible.
//!
//! - [`entrylog`]: entry logs `<hex>.log` (§3): header, one entry at a location, a scan.
//! - [`index`]: Interleaved/SortedLedgerStorage index files `<xx>/<yy>/<hex>.idx` (§5): master
//!   key, fenced bit, explicit LAC and the entry → location slots.
//! - [`journal`]: journal files `<hex>.txn` (§7) and `lastMark` (§7.6).
//! - [`layout`]: where each of those lives under the configured directories (§1).
//! - [`sorted`]: a ledger-level view of an Interleaved/Sorted bookie's directories: which
//!   ledgers exist, their state, and any entry's body, read lazily (nothing is scanned at open).
//! - [`db`]: the same of a DbLedgerStorage bookie's, whose index is in RocksDB (`rocksread`).
//! - [`store`]: either of the two behind one interface ([`JavaStore`]).
//! - [`replay`]: the journal records after the mark, in Java's replay order (§7.7).
//!
//! Reads are plain positioned reads (`pread`): this runs at startup and on reader threads, never
//! on the add path.

#![forbid(unsafe_code)]

pub mod db;
pub mod entrylog;
mod error;
mod file;
pub mod index;
pub mod journal;
pub mod layout;
pub mod replay;
pub mod sorted;
pub mod store;

pub use error::JavaError;
pub use layout::{JavaDirs, StorageKind};
pub use store::JavaStore;

/// The most entry logs one reader keeps open (each view's copy its own).
pub(crate) const MAX_OPEN_LOGS: usize = 64;

/// A Java entry location: the entry log id in the high 32 bits, the offset of the entry's body
/// (just after its 4-byte length) in the low 32 (§3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Location {
    pub log_id: u64,
    pub offset: u64,
}

impl Location {
    /// Splits Java's packed location; 0 is Java's "absent".
    pub fn from_packed(packed: u64) -> Option<Location> {
        (packed != 0).then_some(Location {
            log_id: packed >> 32,
            offset: packed & 0xffff_ffff,
        })
    }

    pub fn packed(self) -> u64 {
        (self.log_id << 32) | self.offset
    }
}

pub(crate) fn be_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

pub(crate) fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

pub(crate) fn be_u64(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

pub(crate) fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Parses a Java hex file name stem (`Long.toHexString`: lower case, no padding).
pub(crate) fn parse_hex_id(stem: &str) -> Option<u64> {
    if stem.is_empty() || stem.len() > 16 || !stem.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(stem, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_pack_as_java() {
        let l = Location::from_packed(0x0000_0003_0000_0404).unwrap();
        assert_eq!((l.log_id, l.offset), (3, 0x404));
        assert_eq!(l.packed(), 0x0000_0003_0000_0404);
        assert_eq!(Location::from_packed(0), None);
    }

    #[test]
    fn hex_ids() {
        assert_eq!(parse_hex_id("1a"), Some(26));
        assert_eq!(parse_hex_id("18c5f2a3b4c"), Some(0x18c5f2a3b4c));
        assert_eq!(parse_hex_id(""), None);
        assert_eq!(parse_hex_id("lastMark"), None);
        assert_eq!(parse_hex_id("12345678901234567"), None);
    }
}
