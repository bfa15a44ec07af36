//! Ledgers garbage collection dropped, remembered so that a zombie writer cannot bring them back
//! (Java's `HandleFactoryImpl.recentlyFencedAndDeletedLedgers`, BookKeeper 4.18).
//!
//! A ledger is fenced when a second client recovers it; its first writer may still be alive and
//! still sending adds. Once the recovered ledger is deleted and garbage collection drops it
//! here, such an add would create it again, an orphan that holds space until the next
//! collection. Java remembers the ledgers its collector drops, in memory, for 7 days after the
//! last request that touched them, and refuses requests that would recreate one: an add gets
//! EFENCED, an explicit LAC and a fence read ENOLEDGER. A restart forgets, as Java's does.
//!
//! Which ledgers: Java means to remember the fenced ones, but its storage calls the deletion
//! listener after its index has forgotten the ledger, so the fence check throws and the ledger
//! is remembered anyway (the "limbo" branch): in effect every dropped ledger the bookie had
//! opened since it started (interop F04 shows a never-fenced one refused by a 4.18.2 bookie).
//! Ours remembers every ledger garbage collection drops. Ledger ids are never reused (ZooKeeper
//! hands them out), so no legitimate add is refused.
//!
//! Bounded: at most [`MAX_REMEMBERED`] ledgers per shard; past it the least recently touched
//! are forgotten first (their adds are then taken as before the memory existed).

use std::collections::HashMap;

/// How long a dropped fenced ledger is remembered after the last request that touched it.
pub const REMEMBER_MS: i64 = 7 * 24 * 3600 * 1000;

/// Most ledgers remembered per shard (about 40 bytes each).
pub const MAX_REMEMBERED: usize = 1 << 20;

#[derive(Default)]
pub struct FencedDeleted {
    /// Ledger id → the last time (ms) it was dropped or a request touched it.
    touched: HashMap<i64, i64>,
}

impl FencedDeleted {
    /// A ledger was dropped by garbage collection at `now_ms`.
    pub fn remember(&mut self, ledger: i64, now_ms: i64) {
        self.touched.insert(ledger, now_ms);
        if self.touched.len() > MAX_REMEMBERED {
            self.forget_expired(now_ms);
        }
        if self.touched.len() > MAX_REMEMBERED {
            // Forget the least recently touched tenth in one pass.
            let mut times: Vec<i64> = self.touched.values().copied().collect();
            let cut_at = times.len() / 10;
            let (_, cut, _) = times.select_nth_unstable(cut_at);
            let cut = *cut;
            self.touched.retain(|_, t| *t > cut);
        }
    }

    /// Whether a request for `ledger` at `now_ms` must be refused; a refusal counts as a touch
    /// (Java's cache expires after access).
    pub fn refuses(&mut self, ledger: i64, now_ms: i64) -> bool {
        match self.touched.get_mut(&ledger) {
            Some(t) if now_ms - *t < REMEMBER_MS => {
                *t = now_ms;
                true
            }
            Some(_) => {
                self.touched.remove(&ledger);
                false
            }
            None => false,
        }
    }

    pub fn len(&self) -> usize {
        self.touched.len()
    }

    pub fn is_empty(&self) -> bool {
        self.touched.is_empty()
    }

    fn forget_expired(&mut self, now_ms: i64) {
        self.touched.retain(|_, t| now_ms - *t < REMEMBER_MS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembered_for_seven_days_after_the_last_touch() {
        let mut f = FencedDeleted::default();
        assert!(!f.refuses(7, 0));
        f.remember(7, 1_000);
        assert!(f.refuses(7, 1_000 + REMEMBER_MS - 1));
        // The refusal touched it: seven more days from there.
        assert!(f.refuses(7, 1_000 + 2 * REMEMBER_MS - 10));
        assert!(!f.refuses(7, 1_000 + 4 * REMEMBER_MS));
        assert_eq!(f.len(), 0, "an expired ledger is forgotten");
        assert!(!f.refuses(8, 1_000), "another ledger");
    }

    #[test]
    fn bounded_forgetting_the_least_recently_touched() {
        let mut f = FencedDeleted::default();
        for id in 0..=MAX_REMEMBERED as i64 {
            f.remember(id, id);
        }
        assert!(f.len() <= MAX_REMEMBERED, "{}", f.len());
        assert!(f.len() >= MAX_REMEMBERED * 8 / 10, "{}", f.len());
        let now = MAX_REMEMBERED as i64 + 1;
        assert!(!f.refuses(0, now), "the oldest went first");
        assert!(f.refuses(MAX_REMEMBERED as i64, now), "the newest stays");
    }
}
