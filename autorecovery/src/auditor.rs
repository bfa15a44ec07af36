//! The auditor (Java's `Auditor`): it notices a bookie that is gone, waits
//! `lostBookieRecoveryDelay` for it to come back, then marks every ledger whose metadata names
//! a bookie that is not registered (writable or read-only: a read-only bookie is never lost)
//! as under-replicated for it. It also checks every ledger entry-wise every
//! `auditorPeriodicCheckInterval`.
//!
//! [`AuditorState`] is the decision part (pure, tested by itself): which list changes start an
//! audit now, which schedule one, and when a changed delay (or the same delay written again:
//! Java's "trigger audit") runs it at once.

use std::collections::{BTreeMap, BTreeSet};

use crate::fragments::{check, read_lac};
use crate::port::{Cluster, UnderReplication};

/// What to do after an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Act {
    Nothing,
    /// Audit now (any pending audit is cancelled).
    AuditNow,
    /// An audit is scheduled for this time (ms).
    AuditAt(i64),
    /// The pending audit is cancelled (the lost bookie came back).
    Cancelled,
}

#[derive(Clone, Debug)]
pub struct AuditorState {
    known: BTreeSet<String>,
    to_audit: BTreeSet<String>,
    pending_at: Option<i64>,
    delay_before: i32,
}

impl AuditorState {
    /// `known`: the bookies to watch from the start (4.16+: those with a cookie, so one that is
    /// down when the auditor starts is noticed at once).
    pub fn new(known: BTreeSet<String>, delay_s: i32) -> AuditorState {
        AuditorState {
            known,
            to_audit: BTreeSet::new(),
            pending_at: None,
            delay_before: delay_s,
        }
    }

    pub fn pending_at(&self) -> Option<i64> {
        self.pending_at
    }

    /// The registered bookies changed (Java's `submitAuditTask`).
    pub fn on_bookies(&mut self, available: &BTreeSet<String>, delay_s: i32, now_ms: i64) -> Act {
        for b in available {
            self.known.insert(b.clone());
        }
        let mut cancelled = false;
        if !self.to_audit.is_empty() && self.to_audit.is_subset(&self.known) {
            // The lost bookie came back before its audit.
            cancelled = self.pending_at.take().is_some();
            self.to_audit.clear();
        }
        let lost: Vec<String> = self.known.difference(available).cloned().collect();
        self.to_audit.extend(lost);
        if self.to_audit.is_empty() {
            return if cancelled {
                Act::Cancelled
            } else {
                Act::Nothing
            };
        }
        for b in &self.to_audit {
            self.known.remove(b);
        }
        if delay_s <= 0 || self.to_audit.len() > 1 {
            self.pending_at = None;
            self.to_audit.clear();
            return Act::AuditNow;
        }
        match self.pending_at {
            Some(_) => Act::Nothing,
            None => {
                let at = now_ms + i64::from(delay_s) * 1000;
                self.pending_at = Some(at);
                Act::AuditAt(at)
            }
        }
    }

    /// `lostBookieRecoveryDelay` was written (Java's `submitLostBookieRecoveryDelayChangedEvent`):
    /// 0 or the same value again audits now; another value moves a pending audit.
    pub fn on_delay_changed(&mut self, delay_s: i32, now_ms: i64) -> Act {
        let was_pending = self.pending_at.take().is_some();
        let before = std::mem::replace(&mut self.delay_before, delay_s);
        if delay_s <= 0 || delay_s == before {
            self.to_audit.clear();
            return Act::AuditNow;
        }
        if was_pending {
            let at = now_ms + i64::from(delay_s) * 1000;
            self.pending_at = Some(at);
            return Act::AuditAt(at);
        }
        Act::Nothing
    }

    /// Whether the pending audit is due; it is taken if so.
    pub fn take_due(&mut self, now_ms: i64) -> bool {
        if self.pending_at.is_some_and(|at| at <= now_ms) {
            self.pending_at = None;
            self.to_audit.clear();
            true
        } else {
            false
        }
    }
}

/// What an audit found and marked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuditReport {
    pub lost: Vec<String>,
    pub marked: usize,
}

/// The audit (Java's `auditBookies`): every ledger's bookies indexed; each bookie that is not
/// registered is lost, and each of its ledgers is marked for it.
pub async fn audit<C: Cluster, U: UnderReplication>(
    c: &C,
    u: &U,
    store_mark_time: bool,
) -> Result<AuditReport, String> {
    let mut index: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for id in c.ledger_ids().await? {
        let Some(v) = c.read_ledger(id).await? else {
            continue; // deleted meanwhile
        };
        let members: BTreeSet<&String> = v.metadata.ensembles.iter().flat_map(|(_, e)| e).collect();
        for b in members {
            index.entry(b.clone()).or_default().push(id);
        }
    }
    let available = c.registered().await?.available();
    let mut report = AuditReport::default();
    for (bookie, ledgers) in index {
        if available.contains(&bookie) {
            continue;
        }
        let now = store_mark_time.then(|| c.now_ms());
        for id in ledgers {
            u.mark(id, std::slice::from_ref(&bookie), now).await?;
            report.marked += 1;
        }
        report.lost.push(bookie);
    }
    if !report.lost.is_empty() {
        log::info!(
            "audit: bookies {:?} are lost; {} ledger marks",
            report.lost,
            report.marked
        );
    }
    Ok(report)
}

/// Every ledger checked entry-wise (Java's `checkAllLedgers`): the bookies of each fragment that
/// lacks a copy are marked. Returns the ledgers marked.
pub async fn check_all<C: Cluster, U: UnderReplication>(
    c: &C,
    u: &U,
    percentage: u32,
    store_mark_time: bool,
) -> Result<usize, String> {
    let registered = c.registered().await?;
    let mut marked = 0;
    for id in c.ledger_ids().await? {
        if !u.is_enabled().await? {
            break; // disabled meanwhile: the pass ends, as Java's
        }
        let Some(v) = c.read_ledger(id).await? else {
            continue;
        };
        let lac = read_lac(c, id, &v.metadata).await;
        let bad: BTreeSet<String> = check(c, id, &v.metadata, lac, &registered, percentage)
            .await
            .iter()
            .flat_map(|f| f.bad_bookies())
            .collect();
        if !bad.is_empty() {
            let bad: Vec<String> = bad.into_iter().collect();
            u.mark(id, &bad, store_mark_time.then(|| c.now_ms()))
                .await?;
            marked += 1;
        }
    }
    Ok(marked)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: &[&str]) -> BTreeSet<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_lost_bookie_is_audited_after_the_delay_unless_it_returns() {
        let mut s = AuditorState::new(set(&["a", "b", "c"]), 10);
        assert_eq!(s.on_bookies(&set(&["a", "b", "c"]), 10, 0), Act::Nothing);
        assert_eq!(
            s.on_bookies(&set(&["a", "b"]), 10, 1_000),
            Act::AuditAt(11_000)
        );
        assert!(!s.take_due(10_999));
        // c comes back: cancelled.
        assert_eq!(
            s.on_bookies(&set(&["a", "b", "c"]), 10, 5_000),
            Act::Cancelled
        );
        assert!(!s.take_due(20_000));
        // Lost again, and stays lost: due after the delay.
        assert_eq!(
            s.on_bookies(&set(&["a", "b"]), 10, 30_000),
            Act::AuditAt(40_000)
        );
        assert!(s.take_due(40_000));
    }

    #[test]
    fn no_delay_or_two_lost_bookies_audit_at_once() {
        let mut s = AuditorState::new(set(&["a", "b", "c"]), 0);
        assert_eq!(s.on_bookies(&set(&["a", "b"]), 0, 0), Act::AuditNow);
        let mut s = AuditorState::new(set(&["a", "b", "c", "d"]), 60);
        assert_eq!(s.on_bookies(&set(&["a", "b"]), 60, 0), Act::AuditNow);
        // a known bookie that is down at the start is lost at once
        let mut s = AuditorState::new(set(&["a", "b", "c"]), 60);
        assert_eq!(s.on_bookies(&set(&["a", "b"]), 60, 0), Act::AuditAt(60_000));
    }

    #[test]
    fn the_delay_written_again_triggers_an_audit() {
        let mut s = AuditorState::new(set(&["a", "b", "c"]), 30);
        assert_eq!(s.on_bookies(&set(&["a", "b"]), 30, 0), Act::AuditAt(30_000));
        assert_eq!(
            s.on_delay_changed(30, 1_000),
            Act::AuditNow,
            "same value: now"
        );
        assert_eq!(s.pending_at(), None);
        assert_eq!(s.on_bookies(&set(&["a"]), 30, 2_000), Act::AuditAt(32_000));
        assert_eq!(s.on_delay_changed(60, 3_000), Act::AuditAt(63_000), "moved");
        assert_eq!(s.on_delay_changed(0, 4_000), Act::AuditNow);
        assert_eq!(
            s.on_delay_changed(5, 5_000),
            Act::Nothing,
            "nothing pending"
        );
    }
}
