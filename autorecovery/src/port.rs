//! What autorecovery needs from the world, as two traits: [`Cluster`] (the ledger metadata and
//! the bookies: registration, entry reads and recovery adds) and [`UnderReplication`] (Java's
//! under-replication manager). The live implementation is ZooKeeper and the wire protocol
//! (`live/`); the simulator's is in memory with faults (`sim/`), so every decision of the
//! auditor and the worker runs without a kernel.
//!
//! Calls are async and run on one thread (no `Send` bound). Reads and adds take batches so a
//! live implementation can pipeline them on one connection.

use std::collections::BTreeSet;

use bytes::Bytes;
use metadata::ledger_metadata::{LedgerMetadata, Versioned, WriteOutcome};
use metadata::underreplication::manager::Claim;
use metadata::underreplication::records::UrRecord;

/// Why a read of one entry from one bookie gave nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadError {
    /// The bookie answered: no such entry.
    NoEntry,
    /// The bookie answered: no such ledger.
    NoLedger,
    /// Anything else: an error code, a timeout, no connection.
    Failed(String),
}

impl ReadError {
    /// Java's "the bookie does not have it" (`NoSuchEntry`, `NoSuchLedgerExists`).
    pub fn is_absent(&self) -> bool {
        matches!(self, ReadError::NoEntry | ReadError::NoLedger)
    }
}

/// Why a recovery add was not acknowledged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddError(pub String);

/// The registered bookies.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Registered {
    pub writable: BTreeSet<String>,
    pub read_only: BTreeSet<String>,
}

impl Registered {
    /// Writable or read-only: what Java counts as available (never "lost").
    pub fn available(&self) -> BTreeSet<String> {
        self.writable.union(&self.read_only).cloned().collect()
    }

    pub fn is_available(&self, b: &str) -> bool {
        self.writable.contains(b) || self.read_only.contains(b)
    }
}

/// An error of the metadata store or of the network, in words.
pub type PortResult<T> = Result<T, String>;

#[allow(async_fn_in_trait)]
pub trait Cluster {
    /// Every ledger id that has metadata.
    async fn ledger_ids(&self) -> PortResult<Vec<u64>>;
    /// A ledger's metadata and znode version; `None`: deleted.
    async fn read_ledger(&self, ledger: u64) -> PortResult<Option<Versioned>>;
    /// A compare-and-set write of a ledger's metadata.
    async fn write_ledger(
        &self,
        ledger: u64,
        metadata: &LedgerMetadata,
        version: i32,
    ) -> PortResult<WriteOutcome>;
    /// The bookies registered now.
    async fn registered(&self) -> PortResult<Registered>;
    /// Each bookie's rack (`/rack`); bookies not named are in `/default-rack`.
    async fn racks(&self) -> Vec<(String, String)>;
    /// Reads `entries` of `ledger` from `bookie` (plain reads, no fencing), in order.
    async fn read_entries(
        &self,
        bookie: &str,
        ledger: u64,
        entries: &[i64],
    ) -> Vec<Result<Bytes, ReadError>>;
    /// The last entry `bookie` stores of `ledger` (entry -1), with fencing when `fence` (the
    /// master key then proves the right to fence). `Ok(None)`: it stores none.
    async fn read_last(
        &self,
        bookie: &str,
        ledger: u64,
        fence: Option<&[u8; 20]>,
    ) -> Result<Option<Bytes>, ReadError>;
    /// Recovery adds (`RECOVERY_ADD`: accepted on a fenced ledger) of `(entry, packaged body)`
    /// to `bookie`, in order.
    async fn recovery_add(
        &self,
        bookie: &str,
        ledger: u64,
        master_key: &[u8; 20],
        entries: Vec<(i64, Bytes)>,
    ) -> Vec<Result<(), AddError>>;
    /// Milliseconds since the epoch (the simulator's clock there).
    fn now_ms(&self) -> i64;
    async fn sleep_ms(&self, ms: u64);
}

/// Java's under-replication manager (metadata::underreplication::manager over ZooKeeper).
#[allow(async_fn_in_trait)]
pub trait UnderReplication {
    async fn mark(&self, ledger: u64, missing: &[String], now_ms: Option<i64>) -> PortResult<()>;
    async fn list(&self) -> PortResult<Vec<(u64, UrRecord)>>;
    async fn claim(&self, skip: &BTreeSet<u64>, seed: u64) -> PortResult<Option<Claim>>;
    async fn mark_replicated(&self, claim: &Claim) -> PortResult<()>;
    async fn release(&self, ledger: u64) -> PortResult<()>;
    async fn is_enabled(&self) -> PortResult<bool>;
    async fn lost_bookie_recovery_delay(&self) -> PortResult<Option<i32>>;
}
