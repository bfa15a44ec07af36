//! Journal errors: cheap `Copy` values on the append path, structured values at open.

use std::fmt;

use storage::IoError;

use crate::recovery::BeyondCut;

/// Why an append was refused. Cheap to return on the hot path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendError {
    /// Every group buffer is in use (or the next segment is not ready yet): call `tick`/`wait`
    /// and try again. This is the journal's backpressure.
    Backpressure,
    /// The payload is larger than `max_record_bytes`.
    TooLarge { len: usize, max: usize },
    /// A write or sync failed earlier; the journal accepts nothing more. The bookie goes
    /// read-only or exits; it never retries.
    Stopped(IoError),
}

impl fmt::Display for AppendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AppendError::Backpressure => write!(f, "journal is full, try again"),
            AppendError::TooLarge { len, max } => {
                write!(f, "record of {len} bytes exceeds the limit of {max}")
            }
            AppendError::Stopped(e) => write!(f, "journal stopped after an I/O failure: {e}"),
        }
    }
}

impl std::error::Error for AppendError {}

/// What is wrong at a corrupt position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CorruptionKind {
    /// A record fails its checks and more valid groups follow than can have been in flight,
    /// or valid records follow beyond the in-flight window.
    BadRecordBeforeValidData,
    /// A segment that is not the last one ends without its end record.
    UnsealedSegmentBeforeLaterData,
    /// A segment's header is unreadable and later segments hold records.
    BadSegmentHeader,
    /// The sequence of LSNs jumps between segments.
    SequenceGap,
}

/// Errors of opening, recovering and driving the journal.
#[derive(Debug)]
pub enum JournalError {
    /// An I/O call failed while opening, recovering or preparing.
    Io {
        what: &'static str,
        file: String,
        error: IoError,
    },
    /// Recovery found corruption it must not repair on its own.
    Corruption {
        file: String,
        offset: u64,
        kind: CorruptionKind,
        /// The valid records after the corrupt position: what cutting the log there loses.
        lost: BeyondCut,
    },
    /// A write or sync failed; the journal stopped (see [`AppendError::Stopped`]).
    Stopped(IoError),
    /// The configuration is invalid.
    Config(String),
}

impl fmt::Display for JournalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JournalError::Io { what, file, error } => {
                write!(f, "journal I/O error during {what} on {file}: {error}")
            }
            JournalError::Corruption {
                file,
                offset,
                kind,
                lost,
            } => write!(
                f,
                "journal corruption in {file} at offset {offset}: {kind:?}; {lost}; refusing \
                 to open (the tolerant recovery mode would cut the log here and lose them)"
            ),
            JournalError::Stopped(e) => write!(f, "journal stopped after an I/O failure: {e}"),
            JournalError::Config(msg) => write!(f, "invalid journal configuration: {msg}"),
        }
    }
}

impl std::error::Error for JournalError {}
