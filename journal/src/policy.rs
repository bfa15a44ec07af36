//! Group commit as a pure policy: given the open group, the time and whether callers have more
//! to give, decide whether to close the group now or when to look again.
//!
//! The triggers are BookKeeper's (`Journal.java`), each under the key an operator already sets:
//! - the oldest record has waited `journalMaxGroupWaitMSec`;
//! - buffered bytes reach `journalBufferedWritesThreshold`;
//! - buffered records reach `journalBufferedEntriesThreshold` (0 = off);
//! - callers have nothing more to give right now and `journalFlushWhenQueueEmpty` is set.
//!
//! and one of ours, on by default: callers have nothing more to give *and no group is in
//! flight* (`flush_when_idle`). With it, a lone add on an idle bookie is written at once instead
//! of waiting out the group timer (a Java bookie with default settings waits 2 ms), while under
//! load groups grow by themselves for as long as the previous group is syncing.
//!
//! An idle flush waits until `idle_commit_gap_us` has passed since the previous group was
//! closed. Each commit costs a write, a cache flush and several thread wake-ups whatever its
//! size; without the gap, a journal at a few thousand adds a second commits nearly every add
//! on its own, and on a virtual machine that many commits cost enough host CPU to get the
//! whole guest descheduled for ~10 ms at a time (ARCHITECTURE.md §12). The gap bounds the
//! commit rate at load and adds nothing to a lone add on a quiet bookie.
//!
//! No clock is read here: time comes in as an argument, so a table of cases tests the policy.

/// The open group, as the policy sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenGroup {
    pub records: usize,
    pub bytes: usize,
    /// When the group's first record was appended (microseconds, caller's clock).
    pub opened_at_us: u64,
}

/// The configured triggers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Triggers {
    pub max_group_wait_us: u64,
    pub buffered_bytes_threshold: usize,
    /// 0 disables the trigger, as in BookKeeper.
    pub buffered_records_threshold: usize,
    pub flush_when_queue_empty: bool,
    pub flush_when_idle: bool,
    /// An idle flush only this long after the previous group was closed (0: at once).
    pub idle_commit_gap_us: u64,
}

/// Why a group was closed (counted in metrics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushReason {
    MaxWait,
    Bytes,
    Records,
    QueueEmpty,
    Idle,
}

/// What to do with the open group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// No open group: nothing to decide.
    Nothing,
    /// Close the group now.
    Flush(FlushReason),
    /// Keep filling; decide again at this time at the latest.
    WaitUntil(u64),
}

/// Decides about the open group. `queue_empty` says callers have nothing more to append right
/// now; `groups_in_flight` counts closed groups not yet durable; `last_close_us` is when the
/// previous group was closed.
pub fn decide(
    group: &OpenGroup,
    now_us: u64,
    queue_empty: bool,
    groups_in_flight: usize,
    last_close_us: u64,
    t: &Triggers,
) -> Decision {
    if group.records == 0 {
        return Decision::Nothing;
    }
    if group.bytes >= t.buffered_bytes_threshold {
        return Decision::Flush(FlushReason::Bytes);
    }
    if t.buffered_records_threshold > 0 && group.records >= t.buffered_records_threshold {
        return Decision::Flush(FlushReason::Records);
    }
    let deadline = group.opened_at_us.saturating_add(t.max_group_wait_us);
    if now_us >= deadline {
        return Decision::Flush(FlushReason::MaxWait);
    }
    if queue_empty && t.flush_when_queue_empty {
        return Decision::Flush(FlushReason::QueueEmpty);
    }
    if queue_empty && t.flush_when_idle && groups_in_flight == 0 {
        let gap_over = last_close_us.saturating_add(t.idle_commit_gap_us);
        if now_us >= gap_over {
            return Decision::Flush(FlushReason::Idle);
        }
        return Decision::WaitUntil(gap_over.min(deadline));
    }
    Decision::WaitUntil(deadline)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Triggers = Triggers {
        max_group_wait_us: 1000,
        buffered_bytes_threshold: 512 * 1024,
        buffered_records_threshold: 0,
        flush_when_queue_empty: false,
        flush_when_idle: true,
        idle_commit_gap_us: 0,
    };

    fn group(records: usize, bytes: usize, opened_at_us: u64) -> OpenGroup {
        OpenGroup {
            records,
            bytes,
            opened_at_us,
        }
    }

    /// The policy, case by case: (name, group, now, queue empty, in flight, triggers, expected).
    #[test]
    fn decision_table() {
        let records_on = Triggers {
            buffered_records_threshold: 100,
            ..T
        };
        let java_like = Triggers {
            flush_when_idle: false,
            ..T
        };
        let queue_empty_on = Triggers {
            flush_when_queue_empty: true,
            flush_when_idle: false,
            ..T
        };
        // The previous group closed at 100 in every case.
        let gap = Triggers {
            idle_commit_gap_us: 500,
            ..T
        };
        let long_gap = Triggers {
            idle_commit_gap_us: 5000,
            ..T
        };
        #[rustfmt::skip]
        let cases: &[(&str, OpenGroup, u64, bool, usize, Triggers, Decision)] = &[
            ("empty group", group(0, 0, 0), 5000, true, 0, T, Decision::Nothing),
            ("bytes threshold", group(3, 512 * 1024, 100), 100, false, 2, T, Decision::Flush(FlushReason::Bytes)),
            ("bytes just below", group(3, 512 * 1024 - 1, 100), 100, false, 2, T, Decision::WaitUntil(1100)),
            ("records threshold on", group(100, 4096, 100), 100, false, 1, records_on, Decision::Flush(FlushReason::Records)),
            ("records threshold off (0)", group(100_000, 4096, 100), 100, false, 1, T, Decision::WaitUntil(1100)),
            ("max wait reached", group(1, 10, 100), 1100, false, 2, T, Decision::Flush(FlushReason::MaxWait)),
            ("max wait not yet", group(1, 10, 100), 1099, false, 2, T, Decision::WaitUntil(1100)),
            ("idle device, queue empty", group(1, 10, 100), 150, true, 0, T, Decision::Flush(FlushReason::Idle)),
            ("busy device, queue empty: keep filling", group(1, 10, 100), 150, true, 1, T, Decision::WaitUntil(1100)),
            ("idle device, more coming: keep filling", group(1, 10, 100), 150, false, 0, T, Decision::WaitUntil(1100)),
            ("java defaults wait out the timer", group(1, 10, 100), 150, true, 0, java_like, Decision::WaitUntil(1100)),
            ("flushWhenQueueEmpty even when busy", group(1, 10, 100), 150, true, 2, queue_empty_on, Decision::Flush(FlushReason::QueueEmpty)),
            ("bytes beat the timer", group(1, 600 * 1024, 100), 5000, false, 0, T, Decision::Flush(FlushReason::Bytes)),
            ("timer with huge wait saturates", group(1, 10, u64::MAX - 5), u64::MAX - 1, false, 0, T, Decision::WaitUntil(u64::MAX)),
            ("idle, but the last commit was just now: wait out the gap", group(1, 10, 120), 150, true, 0, gap, Decision::WaitUntil(600)),
            ("idle and the gap is over", group(1, 10, 120), 600, true, 0, gap, Decision::Flush(FlushReason::Idle)),
            ("a gap beyond the timer: the timer wins", group(1, 10, 120), 150, true, 0, long_gap, Decision::WaitUntil(1120)),
            ("the gap does not delay the bytes threshold", group(9, 512 * 1024, 120), 150, true, 0, gap, Decision::Flush(FlushReason::Bytes)),
        ];
        for (name, g, now, empty, in_flight, t, want) in cases {
            assert_eq!(
                decide(g, *now, *empty, *in_flight, 100, t),
                *want,
                "case: {name}"
            );
        }
    }
}
