//! Which fragments of a ledger lack a copy: Java's `LedgerChecker`, rule for rule.
//!
//! A fragment is the part of one ensemble's entries: `[start, next start − 1]` for every
//! ensemble but the last, and for the last `[start, LAC]` (the LAC of an open ledger is at
//! least the last ensemble's start). When the last ensemble holds at most its first entry, the
//! checker first asks that entry's write set whether it exists: only if some bookie answers
//! other than "no such entry/ledger" is that one-entry fragment checked.
//!
//! A bookie of a fragment is *bad* when it is not registered (writable or read-only) and the
//! fragment gives it entries or not; or when it is registered but a read of the first or last
//! entry it should store (and, with `auditorLedgerVerificationPercentage`, a sample of the rest)
//! fails in any way, "no such entry" included. A fragment is *closed* when the ledger is, or
//! when it is not the last one and the LAC has reached its end (4.18's rule): only closed
//! fragments are copied; an open one waits for the ledger's recovery.

use std::collections::BTreeSet;

use metadata::ledger_metadata::LedgerMetadata;

use crate::port::{Cluster, Registered};
use crate::schedule;

/// A fragment, and the indexes of its ensemble that lack a copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fragment {
    /// The first entry of its ensemble (the ensemble's key in the metadata).
    pub key: i64,
    pub first: i64,
    /// Inclusive; below `first` when the fragment holds no entry.
    pub last: i64,
    pub ensemble: Vec<String>,
    pub closed: bool,
    pub bad: BTreeSet<usize>,
}

impl Fragment {
    pub fn bad_bookies(&self) -> Vec<String> {
        self.bad.iter().map(|&i| self.ensemble[i].clone()).collect()
    }
}

/// The fragments of `md` read at `lac`, before any bookie is asked. The last may need the
/// entry-exists probe (`probe_last`).
pub fn spans(md: &LedgerMetadata, lac: i64) -> (Vec<Fragment>, bool) {
    let closed_ledger = md.is_closed();
    let n = md.ensembles.len();
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let (key, ref ensemble) = md.ensembles[i];
        let last_ensemble = i + 1 == n;
        let (last, closed) = if last_ensemble {
            let mut last = lac;
            if !closed_ledger && last < key {
                last = key;
            }
            (last, closed_ledger)
        } else {
            let next = md.ensembles[i + 1].0;
            (next - 1, closed_ledger || lac >= next - 1)
        };
        out.push(Fragment {
            key,
            first: key,
            last,
            ensemble: ensemble.clone(),
            closed,
            bad: BTreeSet::new(),
        });
    }
    let probe_last = out.last().is_some_and(|f| f.first == f.last);
    (out, probe_last)
}

/// The entries index `index` should store in `first..=last` that the checker reads: the first
/// and the last, and with `percentage` > 0 a spread of the others (all at 100).
pub fn probes(
    index: usize,
    first: i64,
    last: i64,
    ensemble: usize,
    write_quorum: usize,
    percentage: u32,
) -> Vec<i64> {
    let Some((lo, hi)) = schedule::stored_bounds(index, first, last, ensemble, write_quorum) else {
        return Vec::new();
    };
    if lo == hi {
        return vec![lo];
    }
    if percentage == 0 {
        return vec![lo, hi];
    }
    let all = schedule::stored(index, lo, hi, ensemble, write_quorum);
    let want = (all.len() as u64 * u64::from(percentage.min(100)) / 100) as usize;
    if want >= all.len() {
        return all;
    }
    let mut out = vec![lo, hi];
    if let Some(step) = all.len().checked_div(want) {
        out.extend(all.iter().step_by(step.max(1)).copied());
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The fragments of ledger `ledger` (metadata `md`, read at `lac`) that lack a copy, asking the
/// bookies as Java's checker does.
pub async fn check<C: Cluster>(
    cluster: &C,
    ledger: u64,
    md: &LedgerMetadata,
    lac: i64,
    registered: &Registered,
    percentage: u32,
) -> Vec<Fragment> {
    check_forcing(
        cluster,
        ledger,
        md,
        lac,
        registered,
        percentage,
        &BTreeSet::new(),
    )
    .await
}

/// [`check`], with the bookies of `forced` counted bad wherever they are (an operator's
/// recovery of a bookie's data, as `BookKeeperAdmin.recoverBookieData` moves it off a live
/// bookie too).
pub async fn check_forcing<C: Cluster>(
    cluster: &C,
    ledger: u64,
    md: &LedgerMetadata,
    lac: i64,
    registered: &Registered,
    percentage: u32,
    forced: &BTreeSet<String>,
) -> Vec<Fragment> {
    let e = md.ensemble_size as usize;
    let w = md.write_quorum_size as usize;
    let (mut frags, probe_last) = spans(md, lac);
    if probe_last {
        let last = frags.last().expect("a ledger has an ensemble");
        let mut exists = false;
        for idx in schedule::write_set(last.first, e, w) {
            let answer = cluster
                .read_entries(&last.ensemble[idx], ledger, &[last.first])
                .await;
            if !answer
                .first()
                .is_some_and(|r| matches!(r, Err(err) if err.is_absent()))
            {
                exists = true;
            }
        }
        if !exists {
            frags.pop();
        }
    }
    let mut out = Vec::new();
    for mut f in frags {
        for idx in 0..e {
            let bookie = &f.ensemble[idx];
            let entries = probes(idx, f.first, f.last, e, w, percentage);
            if forced.contains(bookie) || !registered.is_available(bookie) {
                f.bad.insert(idx);
                continue;
            }
            if entries.is_empty() {
                continue;
            }
            let results = cluster.read_entries(bookie, ledger, &entries).await;
            if results.len() != entries.len() || results.iter().any(|r| r.is_err()) {
                f.bad.insert(idx);
            }
        }
        if !f.bad.is_empty() {
            out.push(f);
        }
    }
    out
}

/// The LAC an admin open without recovery reads: the highest LAC any bookie of the last
/// ensemble's last entry carries (the ledger's last entry id when closed; -1 when nothing
/// answers).
pub async fn read_lac<C: Cluster>(cluster: &C, ledger: u64, md: &LedgerMetadata) -> i64 {
    if md.is_closed() {
        return md.last_entry_id.unwrap_or(-1);
    }
    let Some((_, last)) = md.ensembles.last() else {
        return -1;
    };
    let mut lac = -1;
    for b in last {
        if let Ok(Some(body)) = cluster.read_last(b, ledger, None).await {
            lac = lac.max(crate::entry::lac(&body).unwrap_or(-1));
        }
    }
    lac
}

#[cfg(test)]
mod tests {
    use super::*;
    use metadata::ledger_metadata::LedgerState;

    fn md(state: LedgerState, last: Option<i64>, ensembles: &[(i64, &[&str])]) -> LedgerMetadata {
        LedgerMetadata {
            format_version: 3,
            ensemble_size: 3,
            write_quorum_size: 2,
            ack_quorum_size: 2,
            state,
            last_entry_id: last,
            length: 0,
            ensembles: ensembles
                .iter()
                .map(|(k, b)| (*k, b.iter().map(|s| s.to_string()).collect()))
                .collect(),
            digest_type: None,
            password: Some(b"p".to_vec()),
            ctime: None,
            custom_metadata: Vec::new(),
            ctoken: None,
        }
    }

    #[test]
    fn fragments_as_javas_checker_cuts_them() {
        let m = md(
            LedgerState::Closed,
            Some(99),
            &[(0, &["a", "b", "c"]), (50, &["a", "d", "c"])],
        );
        let (f, probe) = spans(&m, 99);
        assert_eq!((f[0].first, f[0].last, f[0].closed), (0, 49, true));
        assert_eq!((f[1].first, f[1].last, f[1].closed), (50, 99, true));
        assert!(!probe);
        // Open: the last fragment runs to the LAC and is not closed; an earlier one is once
        // the LAC has reached its end.
        let m = md(
            LedgerState::Open,
            None,
            &[(0, &["a", "b", "c"]), (50, &["a", "d", "c"])],
        );
        let (f, _) = spans(&m, 70);
        assert!(f[0].closed && !f[1].closed);
        assert_eq!(f[1].last, 70);
        let (f, probe) = spans(&m, 30);
        assert!(
            !f[0].closed,
            "LAC 30 < 49: an entry of the first ensemble may still come"
        );
        assert_eq!((f[1].first, f[1].last), (50, 50));
        assert!(
            probe,
            "the last ensemble holds at most its first entry: probe it"
        );
        // Closed and empty: a fragment with no entries.
        let m = md(LedgerState::Closed, Some(-1), &[(0, &["a", "b", "c"])]);
        let (f, probe) = spans(&m, -1);
        assert_eq!((f[0].first, f[0].last, probe), (0, -1, false));
    }

    #[test]
    fn probes_first_last_and_samples() {
        assert_eq!(probes(1, 0, 8, 3, 2, 0), vec![0, 7]);
        assert_eq!(probes(2, 0, 0, 3, 2, 0), Vec::<i64>::new());
        assert_eq!(probes(0, 0, 0, 3, 2, 0), vec![0]);
        assert_eq!(probes(1, 0, 8, 3, 2, 100), vec![0, 1, 3, 4, 6, 7]);
        let half = probes(1, 0, 98, 3, 2, 50);
        assert!(
            half.len() >= 30 && half.contains(&0) && half.contains(&97),
            "{half:?}"
        );
    }
}
