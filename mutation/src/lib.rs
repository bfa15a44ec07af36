//! Planted bugs: the mistakes the whole-bookie simulator (`bookie::sim`, issue 33) must catch.
//!
//! Each [`Mutation`] names one deliberate bug at one place in the real code (the shard's commit
//! core, the ledger rules, the read replies, garbage collection). The code asks
//! [`on`]`(Mutation::X)` there and does the wrong thing when it says yes. A simulator run plants
//! one with [`plant`] for the calling thread only (the simulator runs a whole bookie on one
//! thread, and other tests of the same process run beside it), and shows that some seed's
//! invariants fail: a check that cannot catch a planted bug is not a check.
//!
//! Without the feature `planted` (every build the bookie ships from), [`on`] is a constant
//! `false` and the wrong branches are compiled out; [`plant`] then refuses.

#![forbid(unsafe_code)]

/// The planted bugs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mutation {
    /// An add is acknowledged when its journal record is appended, before its sync.
    AckBeforeSync,
    /// A fence is kept in memory but never written to the journal: a restart forgets it.
    FenceNotPersisted,
    /// A read from ledger storage answers with the body of the entry after the one asked.
    ReplyWrongEntry,
    /// The LAC follows the entry ids added, not the LAC their writers piggybacked.
    LacEarly,
    /// Garbage collection drops the index records of a live ledger, as if it were deleted.
    GcDropsLiveLedger,
}

impl Mutation {
    pub const ALL: [Mutation; 5] = [
        Mutation::AckBeforeSync,
        Mutation::FenceNotPersisted,
        Mutation::ReplyWrongEntry,
        Mutation::LacEarly,
        Mutation::GcDropsLiveLedger,
    ];

    /// The name `scripts/vopr --mutate` takes.
    pub fn name(self) -> &'static str {
        match self {
            Mutation::AckBeforeSync => "ack-before-sync",
            Mutation::FenceNotPersisted => "fence-not-persisted",
            Mutation::ReplyWrongEntry => "reply-wrong-entry",
            Mutation::LacEarly => "lac-early",
            Mutation::GcDropsLiveLedger => "gc-drops-live-ledger",
        }
    }

    pub fn from_name(name: &str) -> Option<Mutation> {
        Mutation::ALL.into_iter().find(|m| m.name() == name)
    }
}

#[cfg(feature = "planted")]
mod active {
    use super::Mutation;
    use std::cell::Cell;

    thread_local! {
        static PLANTED: Cell<Option<Mutation>> = const { Cell::new(None) };
    }

    pub fn plant(m: Option<Mutation>) -> Result<(), &'static str> {
        PLANTED.with(|p| p.set(m));
        Ok(())
    }

    #[inline]
    pub fn on(m: Mutation) -> bool {
        PLANTED.with(|p| p.get() == Some(m))
    }
}

#[cfg(not(feature = "planted"))]
mod active {
    use super::Mutation;

    pub fn plant(m: Option<Mutation>) -> Result<(), &'static str> {
        match m {
            None => Ok(()),
            Some(_) => Err("built without planted bugs (the `mutation/planted` feature)"),
        }
    }

    #[inline(always)]
    pub fn on(_: Mutation) -> bool {
        false
    }
}

/// Plants `m` (or none) for the calling thread.
pub fn plant(m: Option<Mutation>) -> Result<(), &'static str> {
    active::plant(m)
}

/// Whether the bug `m` is planted on this thread.
#[inline(always)]
pub fn on(m: Mutation) -> bool {
    active::on(m)
}

/// Whether this build can plant bugs at all.
pub const fn available() -> bool {
    cfg!(feature = "planted")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for m in Mutation::ALL {
            assert_eq!(Mutation::from_name(m.name()), Some(m));
        }
        assert_eq!(Mutation::from_name("nothing"), None);
    }

    #[test]
    fn planted_only_on_this_thread() {
        if !available() {
            assert!(plant(Some(Mutation::LacEarly)).is_err());
            assert!(!on(Mutation::LacEarly));
            return;
        }
        plant(Some(Mutation::LacEarly)).unwrap();
        assert!(on(Mutation::LacEarly));
        assert!(!on(Mutation::AckBeforeSync));
        std::thread::spawn(|| assert!(!on(Mutation::LacEarly)))
            .join()
            .unwrap();
        plant(None).unwrap();
        assert!(!on(Mutation::LacEarly));
    }
}
