//! The crate's one error type. Corruption is structured (file, offset, kind) so the bookie can
//! report it and tests can match on it; I/O errors carry the raw errno.

use std::fmt;

use storage::IoError;

/// What is wrong at a corrupt position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CorruptionKind {
    /// A magic number does not match.
    BadMagic,
    /// A format version this code does not read.
    UnsupportedVersion,
    /// A CRC32C does not match.
    BadChecksum,
    /// A length, count or offset is out of range or inconsistent.
    BadLength,
    /// A field that must be zero, or must equal a known value (segment id, run id, block
    /// number), does not.
    BadField,
    /// An entry's header names another (ledger, entry) than the index said.
    WrongEntry,
    /// The file ends before the data the manifest or the index points to.
    Truncated,
    /// Records of an index run are not in strictly increasing key order.
    Unsorted,
    /// Data files exist but the MANIFEST does not: refusing to treat them as garbage.
    MissingManifest,
    /// A file the MANIFEST references does not exist.
    MissingFile,
}

/// Errors of the ledger store.
#[derive(Debug)]
pub enum StoreError {
    /// An I/O call failed.
    Io {
        what: &'static str,
        file: String,
        error: IoError,
    },
    /// Bytes on disk fail their checks. Never repaired silently, never served.
    Corruption {
        file: String,
        offset: u64,
        kind: CorruptionKind,
    },
    /// The configuration is invalid.
    Config(&'static str),
    /// A limit of the format was reached (e.g. more than 2^32 files, an entry over 4 GiB).
    Limit(&'static str),
    /// An earlier flush failed at or after its commit point (the manifest rename), so what is
    /// durable is uncertain: the store accepts no more flushes. Reopen it (recovery decides).
    Stopped,
}

impl StoreError {
    pub(crate) fn io(what: &'static str, file: &str, error: IoError) -> StoreError {
        StoreError::Io {
            what,
            file: file.to_string(),
            error,
        }
    }

    pub(crate) fn corrupt(file: &str, offset: u64, kind: CorruptionKind) -> StoreError {
        StoreError::Corruption {
            file: file.to_string(),
            offset,
            kind,
        }
    }

    /// True for ENOSPC/EDQUOT: the bookie may go read-only instead of failing hard.
    pub fn is_no_space(&self) -> bool {
        matches!(self, StoreError::Io { error, .. } if error.is_no_space())
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Io { what, file, error } => {
                write!(
                    f,
                    "ledger storage I/O error during {what} on {file}: {error}"
                )
            }
            StoreError::Corruption { file, offset, kind } => write!(
                f,
                "ledger storage corruption in {file} at offset {offset}: {kind:?}"
            ),
            StoreError::Config(why) => write!(f, "invalid ledger storage configuration: {why}"),
            StoreError::Limit(why) => write!(f, "ledger storage limit reached: {why}"),
            StoreError::Stopped => write!(
                f,
                "ledger storage stopped after a failed commit; reopen it to recover"
            ),
        }
    }
}

impl std::error::Error for StoreError {}
