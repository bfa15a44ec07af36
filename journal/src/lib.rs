//! The bookie's write-ahead journal.
//!
//! Opaque payloads become LSN-ordered, checksummed, durable records. The journal knows nothing
//! of ledgers; it reaches the disk only through the `storage` port, so the same code runs on
//! io_uring, on psync, and on the simulated disk of the crash tests.
//!
//! - [`format`]: segment and record layout (spec: `docs/format/journal.md`).
//! - [`policy`]: group commit as a pure function.
//! - [`journal`]: the writer (groups, syncs, durable LSN, rotation, recycling, trim).
//! - [`recovery`]: scan, replay, torn-tail versus corruption.
//! - [`config`], [`error`].

#![forbid(unsafe_code)]

pub mod config;
pub mod error;
pub mod format;
mod io;
pub mod journal;
pub mod policy;
pub mod recovery;
pub mod stopmark;

pub use config::{JournalConfig, RecoveryMode};
pub use error::{AppendError, CorruptionKind, JournalError};
pub use format::{Lsn, SegmentId};
pub use journal::{Journal, JournalStats, SyncTiming};
pub use recovery::{scan, BeyondCut, RecoveryReport, Scan};
