//! The stop mark: where the journal's durable log ended when it stopped after a failed write
//! or sync, kept in the file `STOPPED` beside the segments.
//!
//! Why: after a failed sync the kernel may keep the unsynced writes in its page cache
//! (fsyncgate) while never making them durable. A restart without a reboot then reads records
//! that were never durable, and never acknowledged, as if they were: recovery adopted them and
//! sealed the log after them, a power loss later took them away, and the next start found a
//! hole before the newer records and refused to open (the whole-bookie simulator found it,
//! `bookie::sim`). The stopped journal knows exactly where its durable log ends; its owner
//! writes that here ([`write`]), and the next open cuts the log right after it, sealing over
//! the first record that was never durable, before anything new is written. Nothing
//! acknowledged is beyond the mark: acknowledgements follow the durable LSN in order.
//!
//! One 4 KiB block, little-endian: magic `BKJSTOP1` (8), version (u32, 1), reserved (u32),
//! durable LSN (u64), CRC32C of the 24 bytes before it (u32), zeros. A file that does not
//! check is a mark whose write never became durable (a crash while the failing disk wrote it):
//! ignored, as if there were none.

use storage::{AlignedBuf, IoError, Storage, ALIGN};

use crate::error::JournalError;
use crate::format::Lsn;
use crate::io;

/// The stop mark's file name in the journal directory.
pub const STOP_MARK_NAME: &str = "STOPPED";

const MAGIC: &[u8; 8] = b"BKJSTOP1";
const VERSION: u32 = 1;

fn encode(durable: Lsn) -> AlignedBuf {
    let mut buf = AlignedBuf::zeroed(ALIGN);
    let b = buf.as_mut_capacity();
    b[..8].copy_from_slice(MAGIC);
    b[8..12].copy_from_slice(&VERSION.to_le_bytes());
    b[16..24].copy_from_slice(&durable.0.to_le_bytes());
    let crc = crc32c::crc32c(&b[..24]);
    b[24..28].copy_from_slice(&crc.to_le_bytes());
    buf
}

fn decode(b: &[u8]) -> Option<Lsn> {
    if b.len() < 28 || &b[..8] != MAGIC {
        return None;
    }
    let version = u32::from_le_bytes(b[8..12].try_into().ok()?);
    let crc = u32::from_le_bytes(b[24..28].try_into().ok()?);
    if version != VERSION || crc != crc32c::crc32c(&b[..24]) {
        return None;
    }
    Some(Lsn(u64::from_le_bytes(b[16..24].try_into().ok()?)))
}

/// Writes the stop mark (`durable`: the stopped journal's durable LSN) and makes it and its
/// name durable. `storage` is a handle of its own on the journal directory: the stopped
/// journal's may still have operations in flight.
pub fn write<S: Storage>(storage: &mut S, durable: Lsn) -> Result<(), IoError> {
    let file = storage.open(STOP_MARK_NAME, true)?;
    let result =
        io::write_all(storage, file, 0, encode(durable)).and_then(|_| io::sync_data(storage, file));
    storage.close(file);
    result?;
    storage.sync_dir()
}

/// What the directory holds: no mark; a mark; or a file that is not one (empty, short,
/// zeros, a bad checksum). The mark's block is written and synced before anything relies on
/// it, so a bad one is a mark whose write never became durable: it is ignored (the open trusts
/// what it reads, as without a mark) and removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Found {
    None,
    Mark(Lsn),
    Unreadable,
}

/// The stop mark, if the directory holds one.
pub(crate) fn read<S: Storage>(storage: &mut S) -> Result<Found, JournalError> {
    let names = storage.list().map_err(|error| JournalError::Io {
        what: "list",
        file: "journal directory".into(),
        error,
    })?;
    if !names.iter().any(|n| n == STOP_MARK_NAME) {
        return Ok(Found::None);
    }
    let err = |what| {
        move |error| JournalError::Io {
            what,
            file: STOP_MARK_NAME.into(),
            error,
        }
    };
    let file = storage.open(STOP_MARK_NAME, false).map_err(err("open"))?;
    let len = storage.file_len(file);
    let read = match len {
        Ok(len) if len >= ALIGN as u64 => io::exec(
            storage,
            storage::Op::Read {
                file,
                offset: 0,
                buf: AlignedBuf::zeroed(ALIGN),
            },
        )
        .map(|(n, buf)| (n, buf.map(|b| b[..n.min(b.len())].to_vec())))
        .map_err(|(e, _)| e),
        Ok(_) => Ok((0, None)),
        Err(e) => Err(e),
    };
    storage.close(file);
    let bytes = read.map_err(err("read"))?.1.unwrap_or_default();
    Ok(match decode(&bytes) {
        Some(lsn) => Found::Mark(lsn),
        None => {
            log::warn!(
                "journal: {STOP_MARK_NAME} is not a whole stop mark (its write never became \
                 durable); ignored"
            );
            Found::Unreadable
        }
    })
}

/// Removes the stop mark once the log is cut after it (the cut's seal is durable).
pub(crate) fn remove<S: Storage>(storage: &mut S) -> Result<(), JournalError> {
    let err = |what| {
        move |error| JournalError::Io {
            what,
            file: STOP_MARK_NAME.into(),
            error,
        }
    };
    storage.remove(STOP_MARK_NAME).map_err(err("remove"))?;
    storage.sync_dir().map_err(err("sync directory of"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_damage() {
        let buf = encode(Lsn(77));
        assert_eq!(decode(&buf), Some(Lsn(77)));
        let mut bad = buf.to_vec();
        bad[17] ^= 1;
        assert_eq!(decode(&bad), None);
        assert_eq!(decode(&[0u8; 4096]), None);
    }
}
