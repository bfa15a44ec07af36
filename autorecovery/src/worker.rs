//! The replication worker's work on one claimed ledger (Java's `ReplicationWorker.rereplicate`):
//!
//! 1. Read the metadata (deleted: done) and the LAC an open ledger has now.
//! 2. Find the fragments that lack a copy ([`crate::fragments::check`]; the auditor's list of
//!    missing bookies is not trusted, as in Java).
//! 3. For each closed one: choose a writable bookie for each bad index (placement), copy the
//!    entries that index holds ([`crate::copy`]), then replace the bad bookies in that
//!    fragment's ensemble with a versioned write — re-read and re-applied on a conflict, and
//!    not written when someone else replaced them already.
//! 4. Open fragments, or an open ledger whose last ensemble has a bookie that is not writable,
//!    are left to [`crate::recover`] after the grace period.
//! 5. Checked again: nothing lacking is [`Outcome::Replicated`].

use std::collections::{BTreeMap, BTreeSet};

use metadata::ledger_metadata::{LedgerMetadata, WriteOutcome};

use crate::copy::{copy_fragment, CopyStats, Plan, Throttle};
use crate::entry::master_key;
use crate::fragments::{check_forcing, read_lac, Fragment};
use crate::placement::{Placement, Rng};
use crate::port::{Cluster, Registered};
use crate::settings::Settings;

/// What became of a claimed ledger.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing lacks a copy any more: the record can go.
    Replicated(CopyStats),
    /// The ledger is gone: the record can go.
    Deleted,
    /// Open fragments remain: keep the lock through the grace period, then recover the ledger.
    OpenLedger(CopyStats),
    /// Something could not be done now: keep the lock a while, then let it be tried again.
    Failed(String),
}

/// The master key a ledger's adds carry (a ledger without a stored password — written by a
/// 4.1 or older client — has the empty one, as Java's admin open assumes).
pub fn ledger_key(md: &LedgerMetadata) -> [u8; 20] {
    master_key(md.password.as_deref().unwrap_or_default())
}

/// Java's `isLastSegmentOpenAndMissingBookies`: an open ledger whose last ensemble has a bookie
/// that is not writable (read-only counts as missing here).
pub fn last_segment_open_and_missing(md: &LedgerMetadata, registered: &Registered) -> bool {
    !md.is_closed()
        && md
            .ensembles
            .last()
            .is_some_and(|(_, e)| e.iter().any(|b| !registered.writable.contains(b)))
}

/// Replicates what ledger `ledger` lacks.
pub async fn replicate<C: Cluster>(
    c: &C,
    ledger: u64,
    settings: &Settings,
    rng: &mut Rng,
) -> Outcome {
    replicate_forcing(c, ledger, settings, rng, &BTreeSet::new()).await
}

/// [`replicate`], moving the copies of the bookies of `forced` as if they were lost.
pub async fn replicate_forcing<C: Cluster>(
    c: &C,
    ledger: u64,
    settings: &Settings,
    rng: &mut Rng,
    forced: &BTreeSet<String>,
) -> Outcome {
    let v = match c.read_ledger(ledger).await {
        Ok(Some(v)) => v,
        Ok(None) => return Outcome::Deleted,
        Err(e) => return Outcome::Failed(e),
    };
    let md = v.metadata;
    let registered = match c.registered().await {
        Ok(r) => r,
        Err(e) => return Outcome::Failed(e),
    };
    let lac = read_lac(c, ledger, &md).await;
    let frags = check_forcing(
        c,
        ledger,
        &md,
        lac,
        &registered,
        settings.verification_percentage,
        forced,
    )
    .await;
    let racks = if settings.pulsar_racks {
        c.racks().await
    } else {
        Vec::new()
    };
    let placement = Placement::new(settings.placement.clone(), racks);
    let throttle = Throttle::new(settings.rate_bytes_per_sec);
    let mut stats = CopyStats::default();
    let mut open_found = false;
    for f in &frags {
        if !f.closed {
            open_found = true;
            continue;
        }
        match replicate_fragment(
            c,
            ledger,
            &md,
            f,
            &registered,
            &placement,
            settings,
            rng,
            &throttle,
        )
        .await
        {
            Ok(Some(s)) => {
                stats.entries += s.entries;
                stats.bytes += s.bytes;
            }
            Ok(None) => return Outcome::Deleted,
            Err(e) => {
                log::warn!("ledger {ledger}: fragment at entry {}: {e}", f.first);
                return Outcome::Failed(e);
            }
        }
    }
    if open_found || last_segment_open_and_missing(&md, &registered) {
        return Outcome::OpenLedger(stats);
    }
    // Again, against the metadata as it is now.
    let v = match c.read_ledger(ledger).await {
        Ok(Some(v)) => v,
        Ok(None) => return Outcome::Deleted,
        Err(e) => return Outcome::Failed(e),
    };
    let lac = read_lac(c, ledger, &v.metadata).await;
    let left = check_forcing(
        c,
        ledger,
        &v.metadata,
        lac,
        &registered,
        settings.verification_percentage,
        forced,
    )
    .await;
    if left.is_empty() {
        Outcome::Replicated(stats)
    } else {
        Outcome::Failed(format!(
            "ledger {ledger}: {} fragment(s) still lack a copy",
            left.len()
        ))
    }
}

/// Copies one closed fragment and records the new bookies; `Ok(None)`: the ledger was deleted.
#[allow(clippy::too_many_arguments)]
async fn replicate_fragment<C: Cluster>(
    c: &C,
    ledger: u64,
    md: &LedgerMetadata,
    f: &Fragment,
    registered: &Registered,
    placement: &Placement,
    settings: &Settings,
    rng: &mut Rng,
    throttle: &Throttle,
) -> Result<Option<CopyStats>, String> {
    let mut excluded: BTreeSet<String> = f.bad_bookies().into_iter().collect();
    let mut targets = BTreeMap::new();
    for &i in &f.bad {
        let t = placement
            .replace(&f.ensemble, i, &excluded, &registered.writable, rng)
            .ok_or_else(|| format!("not enough writable bookies to replace {}", f.ensemble[i]))?;
        excluded.insert(t.clone());
        targets.insert(i, t);
    }
    let plan = Plan {
        ledger,
        master_key: ledger_key(md),
        fragment: f,
        targets: &targets,
        write_quorum: md.write_quorum_size as usize,
    };
    let stats = copy_fragment(c, &plan, registered, settings.batch_entries, throttle).await?;
    let replace: BTreeMap<String, String> = targets
        .iter()
        .map(|(&i, t)| (f.ensemble[i].clone(), t.clone()))
        .collect();
    if !update_ensemble(c, ledger, f.key, &replace).await? {
        return Ok(None);
    }
    log::info!(
        "ledger {ledger}: entries {}..={} copied ({} entries, {} bytes); ensemble at {} now has {:?} for {:?}",
        f.first,
        f.last,
        stats.entries,
        stats.bytes,
        f.key,
        replace.values().collect::<Vec<_>>(),
        replace.keys().collect::<Vec<_>>()
    );
    Ok(Some(stats))
}

/// Java's `MetadataUpdateLoop` for a replication: while the ensemble at `key` still holds a
/// bookie being replaced, rewrite it with a versioned write. `Ok(false)`: the ledger is gone.
pub async fn update_ensemble<C: Cluster>(
    c: &C,
    ledger: u64,
    key: i64,
    replace: &BTreeMap<String, String>,
) -> Result<bool, String> {
    for _ in 0..100 {
        let Some(v) = c.read_ledger(ledger).await? else {
            return Ok(false);
        };
        let current = v
            .metadata
            .ensembles
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, e)| e.clone())
            .ok_or_else(|| format!("ledger {ledger}: no ensemble starts at {key} any more"))?;
        if !current.iter().any(|b| replace.contains_key(b)) {
            return Ok(true); // someone replaced them already
        }
        if let Some(t) = replace.values().find(|t| current.contains(t)) {
            // Another writer put our target in this ensemble meanwhile: the copy stays where it
            // is (harmless), and the next round chooses again.
            return Err(format!(
                "ledger {ledger}: {t} joined the ensemble at {key} meanwhile"
            ));
        }
        let mut md = v.metadata.for_rewrite();
        md.replace_in_ensemble(key, &|b| replace.get(b).cloned());
        match c.write_ledger(ledger, &md, v.version).await? {
            WriteOutcome::Written(_) => return Ok(true),
            WriteOutcome::Conflict => continue,
            WriteOutcome::Deleted => return Ok(false),
        }
    }
    Err(format!(
        "ledger {ledger}: the metadata keeps changing under the rewrite"
    ))
}
