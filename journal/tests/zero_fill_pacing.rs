//! A new segment file is zero-filled beside the journal's own writes at a bounded share of
//! them, not at device speed: a sync queued behind a burst of zeros waits for all of them.

use journal::{Journal, JournalConfig, Lsn};
use storage::sim::{SimConfig, SimDisk};

const CHUNK: u64 = 64 << 10;
const SEGMENT: u64 = 4 << 20;

/// 1 KiB records appended steadily (the journal never idle): from the first tick on, the
/// zeros written never exceed twice the journal's own bytes plus the saved-up credit (two
/// chunks) and the chunk in flight, and every record still becomes durable across segments.
#[test]
fn zero_fill_keeps_pace_with_the_journal() {
    let disk = SimDisk::new(SimConfig::new(11).with_latency_us(50, 150));
    let config = JournalConfig {
        segment_size_bytes: SEGMENT,
        zero_fill_chunk_bytes: CHUNK as usize,
        max_group_wait_us: 300,
        max_free_segments: 0,
        preallocate_segments: 0,
        max_record_bytes: 64 << 10,
        ..JournalConfig::default()
    };
    let mut j =
        Journal::open(disk.storage("journal"), config, Lsn(0), &mut |_, _| {}).expect("open");
    // The first segment is prepared before open returns, at full speed: nothing waits on it.
    let at_open = j.stats().zero_fill_bytes;
    let payload = [3u8; 1024];
    let mut appended = 0u64;
    let mut worst_share = 0.0f64;
    for step in 0..60_000u64 {
        let now = disk.now_us();
        if j.append(&payload, now).is_ok() {
            appended += 1;
        }
        j.tick(now, false).expect("tick");
        let s = j.stats();
        let fill = s.zero_fill_bytes - at_open;
        assert!(
            fill <= 2 * s.bytes_written + 3 * CHUNK,
            "step {step}: {fill} bytes of zeros for {} bytes of journal",
            s.bytes_written
        );
        if s.bytes_written > SEGMENT {
            worst_share = worst_share.max(fill as f64 / s.bytes_written as f64);
        }
        disk.advance(10);
    }
    let s = j.stats().clone();
    assert!(
        s.segments_prepared >= 3,
        "the run crossed segments: {} prepared",
        s.segments_prepared
    );
    assert!(
        worst_share <= 2.1,
        "zeros per journal byte: {worst_share:.2}"
    );
    j.flush().expect("flush");
    assert_eq!(j.durable_lsn().0, appended, "every record durable");
}
