//! The replication worker's loop (Java's `ReplicationWorker.run`), one step at a time so that a
//! simulation can interleave it with other actors: timers due are served first (an open
//! ledger's grace period ends with its recovery; a failed ledger's lock is given back after
//! its hold), then, if replication is enabled, one under-replicated ledger is claimed and
//! worked on. The lock of a ledger in grace or hold stays taken, so no other worker takes it
//! meanwhile.

use std::collections::{BTreeMap, BTreeSet};

use metadata::underreplication::manager::Claim;

use crate::placement::Rng;
use crate::port::{Cluster, UnderReplication};
use crate::recover::recover;
use crate::settings::Settings;
use crate::worker::{replicate, Outcome};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Then {
    /// The grace period of an open ledger is over: fence, recover and close it.
    Recover,
    /// A failed ledger's hold is over.
    Release,
}

/// What one step did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Worked(u64, Outcome),
    /// A grace period ended: the ledger was recovered (or could not be, said in the text).
    Recovered(u64, Result<(), String>),
    /// Nothing to claim.
    Idle,
    /// Replication is disabled.
    Disabled,
    /// The store failed (retry after the backoff).
    Error(String),
}

pub struct WorkerLoop {
    pub settings: Settings,
    rng: Rng,
    failures: BTreeMap<u64, u32>,
    held: BTreeMap<u64, (i64, Then, Claim)>,
}

impl WorkerLoop {
    pub fn new(settings: Settings, seed: u64) -> WorkerLoop {
        WorkerLoop {
            settings,
            rng: Rng::new(seed),
            failures: BTreeMap::new(),
            held: BTreeMap::new(),
        }
    }

    /// The ledgers whose locks this worker keeps through a grace period or a hold.
    pub fn held(&self) -> BTreeSet<u64> {
        self.held.keys().copied().collect()
    }

    /// The earliest time a held lock needs attention.
    pub fn next_timer(&self) -> Option<i64> {
        self.held.values().map(|(at, _, _)| *at).min()
    }

    pub async fn step<C: Cluster, U: UnderReplication>(&mut self, c: &C, u: &U) -> Step {
        let now = c.now_ms();
        let due: Option<(u64, Then)> = self
            .held
            .iter()
            .find(|(_, (at, _, _))| *at <= now)
            .map(|(l, (_, then, _))| (*l, *then));
        if let Some((ledger, then)) = due {
            self.held.remove(&ledger);
            let result = match then {
                Then::Recover => recover(c, ledger, &self.settings, &mut self.rng)
                    .await
                    .map(drop),
                Then::Release => Ok(()),
            };
            if let Err(e) = u.release(ledger).await {
                return Step::Error(e);
            }
            return match then {
                Then::Recover => Step::Recovered(ledger, result),
                Then::Release => Step::Idle,
            };
        }
        match u.is_enabled().await {
            Ok(true) => {}
            Ok(false) => return Step::Disabled,
            Err(e) => return Step::Error(e),
        }
        let claim = match u.claim(&self.held(), self.rng.next_u64()).await {
            Ok(Some(c)) => c,
            Ok(None) => return Step::Idle,
            Err(e) => return Step::Error(e),
        };
        let ledger = claim.ledger;
        let outcome = replicate(c, ledger, &self.settings, &mut self.rng).await;
        let now = c.now_ms();
        match &outcome {
            Outcome::Replicated(_) | Outcome::Deleted => {
                self.failures.remove(&ledger);
                if let Err(e) = u.mark_replicated(&claim).await {
                    return Step::Error(e);
                }
            }
            Outcome::OpenLedger(_) => {
                let at = now + self.settings.open_ledger_grace_ms as i64;
                self.held.insert(ledger, (at, Then::Recover, claim));
            }
            Outcome::Failed(_) => {
                let n = self.failures.entry(ledger).or_insert(0);
                let hold = self.settings.failed_lock_hold_ms(*n);
                *n += 1;
                self.held
                    .insert(ledger, (now + hold as i64, Then::Release, claim));
            }
        }
        Step::Worked(ledger, outcome)
    }

    /// Gives back every lock this worker holds (at shutdown).
    pub async fn release_all<U: UnderReplication>(&mut self, u: &U) {
        for ledger in std::mem::take(&mut self.held).into_keys() {
            let _ = u.release(ledger).await;
        }
    }
}
