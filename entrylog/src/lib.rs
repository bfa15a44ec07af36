//! Ledger storage for one bookie shard: entry log segments, the entry location index, ledger
//! metadata, and the manifest that ties them to a journal mark (the checkpoint).
//!
//! The design follows Java's DbLedgerStorage (docs/semantics.md §5.6) without RocksDB:
//! - [`segment`]: append-only entry log files; every entry has its own checksummed header.
//! - [`index`]: (ledger, entry) → [`Location`] in immutable sorted run files with a sparse
//!   in-memory index, merged when there are too many.
//! - [`meta`]: per-ledger metadata, persisted as a snapshot per flush.
//! - [`manifest`]: the atomically replaced MANIFEST listing the live files and the mark.
//! - [`store`]: [`LedgerStore`], owned by the flush thread: `open` (recovery) and `flush`
//!   (the checkpoint order), publishing an immutable [`ReadView`].
//! - [`reader`]: [`Reader`], owned by a reader thread, serving cache-miss reads: single
//!   entries, and runs of contiguous entries in one device read (whether to read a run, and
//!   what to do with it, is the caller's read-ahead policy).
//! - [`compact`]: garbage collection — deleted ledgers out of the index, segments with little
//!   live data compacted (minor/major), run by the flush thread between flushes.
//!
//! Everything reaches the disk through the `storage` port with blocking submit-and-wait
//! helpers, so the same code runs on io_uring and on the simulated disk. On-disk formats:
//! `entrylog/FORMAT.md`.

#![deny(unsafe_code)]

pub mod compact;
pub mod error;
pub mod format;
pub mod index;
mod io;
pub mod manifest;
pub mod meta;
mod prefetch;
pub mod reader;
pub mod segment;
pub mod store;

pub use compact::{Compaction, CompactionStats, IndexGcStats, SegmentUsage, Step};
pub use error::{CorruptionKind, StoreError};
pub use meta::LedgerMeta;
pub use reader::Reader;
pub use segment::{Location, ScannedEntry};
pub use store::{FlushBatch, FlushStats, LedgerStore, LedgerStoreConfig, ReadView, Recovered};
