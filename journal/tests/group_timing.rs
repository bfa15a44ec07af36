//! The per-group timing the journal keeps for latency attribution (`Journal::group_timing`):
//! every durable record is found in exactly one group, the steps of a group are stamped in
//! order with the owner's clock (append ≤ submitted ≤ written ≤ synced ≤ seen durable), and
//! callers asking in LSN order get every group once. Each sync of a group commit is reported
//! once (`Journal::take_sync_timing`, the metrics' JOURNAL_SYNC), and the groups waiting for a
//! sync are counted (`Journal::groups_awaiting_sync`, JOURNAL_FORCE_WRITE_QUEUE_SIZE).

use journal::{Journal, JournalConfig, Lsn};
use storage::sim::{SimConfig, SimDisk};

/// 2,000 records appended over simulated time with device latency: each has a group timing
/// whose steps are ordered and fall between its append and the tick that saw it durable.
#[test]
fn every_durable_record_has_its_group_timing_in_order() {
    let disk = SimDisk::new(SimConfig::new(7).with_latency_us(20, 300));
    let config = JournalConfig {
        max_group_wait_us: 200,
        max_groups_in_flight: 2,
        ..JournalConfig::default()
    };
    let mut j =
        Journal::open(disk.storage("journal"), config, Lsn(0), &mut |_, _| {}).expect("open");
    let mut appended_at = Vec::new();
    let mut seen_durable_at = Vec::new();
    let mut checked = 0usize;
    let mut groups = 0usize;
    let mut last_group: Option<(Lsn, Lsn)> = None;
    let payload = [5u8; 300];
    let mut step = 0u64;
    while checked < 2_000 {
        if appended_at.len() < 2_000 {
            let now = disk.now_us();
            if let Ok(lsn) = j.append(&payload, now) {
                assert_eq!(lsn.0 as usize, appended_at.len() + 1, "dense LSNs from 1");
                appended_at.push(now);
            }
        }
        j.tick(disk.now_us(), step.is_multiple_of(3)).expect("tick");
        let durable = j.durable_lsn().0 as usize;
        while seen_durable_at.len() < durable {
            seen_durable_at.push(disk.now_us());
        }
        while checked < durable {
            let lsn = Lsn(checked as u64 + 1);
            let t = j
                .group_timing(lsn)
                .expect("a durable record's group is kept");
            assert!(t.first_lsn <= lsn && lsn <= t.last_lsn, "{lsn:?} in {t:?}");
            if last_group != Some((t.first_lsn, t.last_lsn)) {
                if let Some((_, prev_last)) = last_group {
                    assert_eq!(t.first_lsn.0, prev_last.0 + 1, "groups are consecutive");
                }
                last_group = Some((t.first_lsn, t.last_lsn));
                groups += 1;
            }
            let appended = appended_at[checked];
            assert!(appended <= t.submitted_us, "{appended} {t:?}");
            assert!(t.submitted_us <= t.written_us, "{t:?}");
            assert!(t.written_us <= t.synced_us, "{t:?}");
            assert!(t.synced_us <= seen_durable_at[checked], "{t:?}");
            checked += 1;
        }
        disk.advance(10);
        step += 1;
        assert!(step < 1_000_000, "the journal made no progress");
    }
    assert!(
        groups > 1 && groups < 2_000,
        "records were grouped: {groups} groups"
    );
    // A record whose group was dropped long ago (asked out of order) has no timing.
    assert_eq!(j.group_timing(Lsn(1)), None);
}

/// Records appended over simulated time with device latency, the sync timings taken after
/// every tick: one per sync the journal counted, each successful, submitted before it
/// completed and within the simulated run; at most `max_groups_in_flight` groups ever wait for
/// a sync, and none once everything is durable.
#[test]
fn every_sync_is_timed_once() {
    let disk = SimDisk::new(SimConfig::new(11).with_latency_us(20, 300));
    let config = JournalConfig {
        max_group_wait_us: 200,
        max_groups_in_flight: 2,
        ..JournalConfig::default()
    };
    let mut j =
        Journal::open(disk.storage("journal"), config, Lsn(0), &mut |_, _| {}).expect("open");
    let syncs_at_open = j.stats().syncs;
    while j.take_sync_timing().is_some() {}
    let (start, payload) = (disk.now_us(), [9u8; 500]);
    let (mut appended, mut timed, mut step) = (0u64, 0u64, 0u64);
    while appended < 1_000 || j.has_pending() {
        if appended < 1_000 && j.append(&payload, disk.now_us()).is_ok() {
            appended += 1;
        }
        j.tick(disk.now_us(), step.is_multiple_of(4)).expect("tick");
        assert!(
            j.groups_awaiting_sync() <= 2,
            "{}",
            j.groups_awaiting_sync()
        );
        while let Some(t) = j.take_sync_timing() {
            assert!(t.ok, "{t:?}");
            assert!(
                start <= t.submitted_us && t.submitted_us <= t.completed_us,
                "{t:?}"
            );
            assert!(t.completed_us <= disk.now_us(), "{t:?}");
            timed += 1;
        }
        disk.advance(10);
        step += 1;
        assert!(step < 1_000_000, "the journal made no progress");
    }
    assert_eq!(j.groups_awaiting_sync(), 0);
    let syncs = j.stats().syncs - syncs_at_open;
    assert!(syncs > 1, "{syncs}");
    assert_eq!(timed, syncs, "one timing per sync");
}
