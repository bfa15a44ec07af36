//! Fencing and recovering an open ledger whose writer is gone, as a Java client's recovery open
//! does, so that its last fragment can be replicated (Java's worker runs
//! `BookKeeperAdmin.openLedger` after `openLedgerRereplicationGracePeriod`):
//!
//! 1. The metadata goes to IN_RECOVERY (versioned; a ledger closed meanwhile is done).
//! 2. Fence: every bookie of the last ensemble gets a fencing read of its last entry (with the
//!    master key). Once enough have answered that no write quorum can still reach an ack quorum
//!    (Java's quorum coverage: in every write set, an answer with an entry, or fewer than ack
//!    quorum bookies silent), the writer can acknowledge nothing more. The highest LAC the
//!    answered entries carry is where recovery starts.
//! 3. A bookie of the last ensemble that is not writable is replaced first, in a new ensemble
//!    from the first entry to recover (or in the last one, if it starts there) — a Java client
//!    does the same when a recovery add to it fails. The new ensemble is kept in memory and
//!    written only with the close, in one versioned write, as Java's `ReadOnlyLedgerHandle`
//!    defers it: persisted early, a recovery that died before its adds would leave a bookie
//!    that never had the entries in the last ensemble, and the next recovery would count its
//!    "no such entry" against an acknowledged entry and close the ledger short.
//! 4. Recover: entry after entry from there, read from the old last ensemble's write set; an
//!    entry is re-added (recovery add, as stored) to its write set in the current last ensemble
//!    and must reach the ack quorum; it stops at the first entry that `W − A + 1` bookies of its
//!    write set do not have.
//! 5. Close: CLOSED with the last entry recovered and the ledger length it carries.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use metadata::ledger_metadata::{LedgerMetadata, LedgerState, WriteOutcome};

use crate::entry;
use crate::placement::{Placement, Rng};
use crate::port::{Cluster, ReadError, Registered};
use crate::schedule;
use crate::settings::Settings;
use crate::worker::ledger_key;

/// What recovering a ledger did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recovered {
    /// Closed by us at this last entry.
    Closed { last_entry: i64, length: i64 },
    /// Closed already (by its writer or another recovery), or deleted.
    AlreadyClosed,
}

/// Java's quorum coverage (`RRQuorumCoverageSet.checkCovered`): in every write set, fewer than
/// `ack` bookies are unknown (neither answered with an entry nor that they have none) — so no
/// write set could have acknowledged an entry the answers do not show. `answered`: the ensemble
/// indexes that answered.
pub fn fence_covered(
    ensemble: usize,
    write: usize,
    ack: usize,
    answered: &BTreeSet<usize>,
) -> bool {
    (0..ensemble).all(|start| {
        let unknown = (0..write)
            .map(|j| (start + j) % ensemble)
            .filter(|i| !answered.contains(i))
            .count();
        unknown < ack
    })
}

/// Recovers and closes open ledger `ledger`.
pub async fn recover<C: Cluster>(
    c: &C,
    ledger: u64,
    settings: &Settings,
    rng: &mut Rng,
) -> Result<Recovered, String> {
    // 1. IN_RECOVERY.
    let (md, mut version) = loop {
        let Some(v) = c.read_ledger(ledger).await? else {
            return Ok(Recovered::AlreadyClosed);
        };
        if v.metadata.is_closed() {
            return Ok(Recovered::AlreadyClosed);
        }
        if v.metadata.state == LedgerState::InRecovery {
            break (v.metadata, v.version);
        }
        let mut m = v.metadata.for_rewrite();
        m.state = LedgerState::InRecovery;
        match c.write_ledger(ledger, &m, v.version).await? {
            WriteOutcome::Written(nv) => break (m, nv),
            WriteOutcome::Conflict => continue,
            WriteOutcome::Deleted => return Ok(Recovered::AlreadyClosed),
        }
    };
    let key = ledger_key(&md);
    let e = md.ensemble_size as usize;
    let w = md.write_quorum_size as usize;
    let a = md.ack_quorum_size as usize;
    let (last_key, old_last) = md.ensembles.last().cloned().ok_or("no ensemble")?;

    // 2. Fence.
    let mut answered = BTreeSet::new();
    let mut max_lac = -1i64;
    for (i, b) in old_last.iter().enumerate() {
        match c.read_last(b, ledger, Some(&key)).await {
            Ok(Some(body)) => {
                answered.insert(i);
                max_lac = max_lac.max(entry::lac(&body).unwrap_or(-1));
            }
            Ok(None) | Err(ReadError::NoEntry | ReadError::NoLedger) => {
                answered.insert(i);
            }
            Err(ReadError::Failed(why)) => {
                log::debug!("ledger {ledger}: fence of {b}: {why}");
            }
        }
    }
    if !fence_covered(e, w, a, &answered) {
        return Err(format!(
            "ledger {ledger}: too few bookies of the last ensemble answered the fence ({} of {e})",
            answered.len()
        ));
    }

    // 3. Lost bookies of the last ensemble replaced from the first entry to recover (in
    //    memory: written with the close).
    let registered = c.registered().await?;
    let from = (max_lac + 1).max(last_key);
    let read_ensembles = md.ensembles.clone();
    let mut current = md;
    if current
        .ensembles
        .last()
        .is_some_and(|(_, ens)| ens.iter().any(|b| !registered.writable.contains(b)))
    {
        current = replace_lost(c, ledger, &current, from, &registered, settings, rng).await?;
    }
    let recovered_ensembles = current.ensembles.clone();

    // 4. Recover entries after the LAC.
    let mut next = max_lac + 1;
    let mut last_body: Option<Bytes> = None;
    while let Some(body) = read_for_recovery(c, ledger, next, &old_last, w, a, &registered).await? {
        let (_, ens) = current
            .ensembles
            .iter()
            .rev()
            .find(|(k, _)| *k <= next)
            .cloned()
            .ok_or("no ensemble holds the entry")?;
        let mut acked = 0;
        for i in schedule::write_set(next, e, w) {
            let r = c
                .recovery_add(&ens[i], ledger, &key, vec![(next, body.clone())])
                .await;
            if r.first().is_some_and(|r| r.is_ok()) {
                acked += 1;
            }
        }
        if acked < a {
            return Err(format!(
                "ledger {ledger}: entry {next} reached {acked} of {a} acknowledgements"
            ));
        }
        last_body = Some(body);
        next += 1;
    }
    let last_entry = next - 1;
    let length = match (&last_body, last_entry) {
        (_, -1) => 0,
        (Some(b), _) => entry::length(b).unwrap_or(0),
        (None, _) => {
            // Nothing past the LAC: the length is the one the LAC entry carries.
            let body = read_any(c, ledger, last_entry, &current, &registered).await?;
            entry::length(&body).unwrap_or(0)
        }
    };

    // 5. Close.
    loop {
        let mut m = current.for_rewrite();
        m.state = LedgerState::Closed;
        m.last_entry_id = Some(last_entry);
        m.length = length;
        match c.write_ledger(ledger, &m, version).await? {
            WriteOutcome::Written(_) => {
                log::info!(
                    "ledger {ledger}: recovered and closed at entry {last_entry} ({length} bytes)"
                );
                return Ok(Recovered::Closed { last_entry, length });
            }
            WriteOutcome::Deleted => return Ok(Recovered::AlreadyClosed),
            WriteOutcome::Conflict => {
                let Some(v) = c.read_ledger(ledger).await? else {
                    return Ok(Recovered::AlreadyClosed);
                };
                if v.metadata.is_closed() {
                    return Ok(Recovered::AlreadyClosed);
                }
                // Java's closeRecovered: once in recovery nobody adds ensembles without closing
                if v.metadata.ensembles != read_ensembles {
                    return Err(format!(
                        "ledger {ledger}: its ensembles changed during recovery"
                    ));
                }
                current = v.metadata;
                current.ensembles = recovered_ensembles.clone();
                version = v.version;
            }
        }
    }
}

/// `md` with the last ensemble's bookies that are not writable replaced, in an ensemble
/// starting at `from` (replacing the last one in place when it starts there). Nothing is
/// written: the close writes it.
async fn replace_lost<C: Cluster>(
    c: &C,
    ledger: u64,
    md: &LedgerMetadata,
    from: i64,
    registered: &Registered,
    settings: &Settings,
    rng: &mut Rng,
) -> Result<LedgerMetadata, String> {
    let racks = if settings.pulsar_racks {
        c.racks().await
    } else {
        Vec::new()
    };
    let placement = Placement::new(settings.placement.clone(), racks);
    let (last_key, last) = md.ensembles.last().cloned().ok_or("no ensemble")?;
    let mut excluded: BTreeSet<String> = last
        .iter()
        .filter(|b| !registered.writable.contains(*b))
        .cloned()
        .collect();
    let mut next = last.clone();
    for (i, b) in last.iter().enumerate() {
        if registered.writable.contains(b) {
            continue;
        }
        let t = placement
            .replace(&last, i, &excluded, &registered.writable, rng)
            .ok_or_else(|| {
                format!("ledger {ledger}: not enough writable bookies to replace {b}")
            })?;
        excluded.insert(t.clone());
        next[i] = t;
    }
    let mut m = md.clone();
    if from <= last_key {
        let map: BTreeMap<String, String> =
            last.iter().cloned().zip(next.iter().cloned()).collect();
        m.replace_in_ensemble(last_key, &|b| map.get(b).cloned());
    } else {
        m.ensembles.push((from, next));
    }
    Ok(m)
}

/// Entry `entry` from the old last ensemble's write set; `Ok(None)` when `W − A + 1` of its
/// bookies say they do not have it (the writer cannot have had it acknowledged).
#[allow(clippy::too_many_arguments)]
async fn read_for_recovery<C: Cluster>(
    c: &C,
    ledger: u64,
    entry: i64,
    ensemble: &[String],
    w: usize,
    a: usize,
    registered: &Registered,
) -> Result<Option<Bytes>, String> {
    let mut absent = 0;
    for i in schedule::write_set(entry, ensemble.len(), w) {
        let b = &ensemble[i];
        if !registered.is_available(b) {
            continue;
        }
        match c.read_entries(b, ledger, &[entry]).await.into_iter().next() {
            Some(Ok(body)) => return Ok(Some(body)),
            Some(Err(err)) if err.is_absent() => absent += 1,
            _ => {}
        }
    }
    if absent > w - a {
        Ok(None)
    } else {
        Err(format!(
            "ledger {ledger}: entry {entry}: too few bookies answered to tell whether it exists"
        ))
    }
}

/// Entry `entry` from any bookie of the ensemble that holds it.
async fn read_any<C: Cluster>(
    c: &C,
    ledger: u64,
    entry: i64,
    md: &LedgerMetadata,
    registered: &Registered,
) -> Result<Bytes, String> {
    let (_, ens) = md
        .ensembles
        .iter()
        .rev()
        .find(|(k, _)| *k <= entry)
        .ok_or("no ensemble holds the entry")?;
    for i in schedule::write_set(entry, ens.len(), md.write_quorum_size as usize) {
        if !registered.is_available(&ens[i]) {
            continue;
        }
        if let Some(Ok(body)) = c
            .read_entries(&ens[i], ledger, &[entry])
            .await
            .into_iter()
            .next()
        {
            return Ok(body);
        }
    }
    Err(format!("ledger {ledger}: entry {entry} cannot be read"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: &[usize]) -> BTreeSet<usize> {
        v.iter().copied().collect()
    }

    #[test]
    fn fence_coverage_as_quorum_coverage() {
        // E3 W2 A2: any two answers cover (each write set has at most one unknown).
        assert!(fence_covered(3, 2, 2, &set(&[0, 1])));
        assert!(!fence_covered(3, 2, 2, &set(&[0])));
        // E3 W3 A2: one unknown bookie is fewer than the ack quorum.
        assert!(fence_covered(3, 3, 2, &set(&[0, 1])));
        assert!(!fence_covered(3, 3, 2, &set(&[0])));
        // A1: a silent bookie could have acknowledged alone: never covered without it.
        assert!(!fence_covered(3, 2, 1, &set(&[0, 1])));
        assert!(fence_covered(3, 2, 1, &set(&[0, 1, 2])));
    }
}
