//! Autorecovery in our bookie: Java's auditor and replication worker, interoperating with
//! theirs through the same znodes (`metadata::underreplication`), docs/autorecovery.md.
//!
//! - [`auditor`]: lost bookies noticed, `lostBookieRecoveryDelay`, ledgers marked;
//! - [`fragments`]: which fragments of a ledger lack a copy (Java's `LedgerChecker`);
//! - [`worker`] and [`copy`]: a claimed ledger's lost copies made on writable bookies chosen
//!   by [`placement`], its metadata rewritten;
//! - [`recover`]: an open ledger fenced, recovered and closed after the grace period;
//! - [`port`]: what these need from ZooKeeper and the bookies, as traits: the live
//!   implementation and the daemon that runs it all are in [`live`], a simulated cluster that
//!   drives every decision with a seed in `sim` (tests).

pub mod auditor;
pub mod copy;
pub mod digest;
pub mod entry;
pub mod fragments;
pub mod live;
pub mod placement;
pub mod port;
pub mod recover;
pub mod schedule;
pub mod settings;
pub mod worker;
pub mod worker_loop;

#[cfg(test)]
mod sim;
