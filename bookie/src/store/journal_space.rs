//! How much disk the journals may take before their first add: never so much that the journal
//! disk crosses the read-only threshold (`diskUsageThreshold`), whatever the shard count.
//!
//! Each shard's journal needs two segment files at once (the one it writes and the next,
//! prepared ahead) and zero-fills `preallocate_segments` more at start so that a busy journal
//! recycles files instead of zero-filling new ones beside its own writes. On a large disk that
//! costs a few hundred MiB per shard; on a small one (a 250 MiB volume, a 32-core host with a
//! small journal disk) it used to fill the disk before the first add. So, before the shards
//! open, the journals' share of the room left under the threshold — half of it, the other half
//! being for entry logs — decides how many files are preallocated, and, if even two files per
//! shard do not fit, how large a segment is.

use std::path::Path;

use journal::JournalConfig;

use crate::admin::readonly::DiskUsage;

/// All shards together zero-fill at most this much at start beyond their two files each, so
/// a many-core host does not prepare gigabytes before its first add.
pub const PREALLOCATE_TOTAL_MAX_BYTES: u64 = 1 << 30;

/// Smallest segment we shrink to: a few groups of the largest record.
fn min_segment_bytes(config: &JournalConfig) -> u64 {
    let group = config.group_buffer_bytes() as u64;
    (2 * storage::ALIGN as u64 + group).next_power_of_two()
}

/// Bytes of journal files (`*.jrnl`, `*.free`) already under `dir`'s shard directories: they
/// are reused, so they count as room for the journal.
pub fn existing_journal_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let Ok(shards) = std::fs::read_dir(dir) else {
        return 0;
    };
    for shard in shards.flatten() {
        let Ok(files) = std::fs::read_dir(shard.path()) else {
            continue;
        };
        for f in files.flatten() {
            let name = f.file_name();
            let name = name.to_string_lossy();
            if name.ends_with(".jrnl") || name.ends_with(".free") {
                total += f.metadata().map(|m| m.len()).unwrap_or(0);
            }
        }
    }
    total
}

/// Fits `config` to the disk: returns a log line when it changed anything.
pub fn fit(
    config: &mut JournalConfig,
    usage: DiskUsage,
    existing_bytes: u64,
    threshold: f64,
    shards: usize,
) -> Result<Option<String>, String> {
    let used = usage.total_bytes.saturating_sub(usage.usable_bytes);
    let limit = (usage.total_bytes as f64 * threshold) as u64;
    let room = limit.saturating_sub(used) + existing_bytes;
    let per_shard = room / 2 / shards.max(1) as u64;
    let mut note = None;
    let cap = (PREALLOCATE_TOTAL_MAX_BYTES
        / shards.max(1) as u64
        / config.segment_size_bytes.max(1)) as usize;
    if config.preallocate_segments > cap {
        note = Some(format!(
            "{} shards: {cap} free journal segments preallocated per shard (of {}), {} MiB in all",
            shards,
            config.preallocate_segments,
            (PREALLOCATE_TOTAL_MAX_BYTES >> 20)
        ));
        config.preallocate_segments = cap;
    }
    let wanted = config.segment_size_bytes * (2 + config.preallocate_segments as u64);
    if wanted <= per_shard {
        return Ok(note);
    }
    let before = (config.segment_size_bytes, config.preallocate_segments);
    let files = per_shard / config.segment_size_bytes.max(1);
    if files >= 2 {
        config.preallocate_segments = (files - 2) as usize;
    } else {
        config.preallocate_segments = 0;
        let min = min_segment_bytes(config);
        let mut size = config.segment_size_bytes;
        while size > min && 2 * size > per_shard {
            size /= 2;
        }
        let size = size.max(min);
        if 2 * size > per_shard {
            // Over the threshold already: start with the smallest journal; the disk checker
            // turns the bookie read-only (or stops it, as `readOnlyModeEnabled` says), and a
            // start that cannot create its files fails and removes them.
            config.segment_size_bytes = size;
            return Ok(Some(format!(
                "the journal disk has {} MiB below diskUsageThreshold={threshold} for {shards} \
                 shard(s), less than two segments of {} MiB each: journal segments of {} MiB, \
                 none preallocated; the disk is (nearly) full",
                room / (1 << 20),
                size / (1 << 20),
                size / (1 << 20)
            )));
        }
        config.segment_size_bytes = size;
    }
    Ok(Some(format!(
        "journal sized to the disk ({} MiB below the read-only threshold, {shards} shard(s)): \
         segments of {} MiB (was {}), {} preallocated per shard (was {})",
        room / (1 << 20),
        config.segment_size_bytes / (1 << 20),
        before.0 / (1 << 20),
        config.preallocate_segments,
        before.1
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

    fn config(prealloc: usize) -> JournalConfig {
        JournalConfig {
            segment_size_bytes: 64 * MIB,
            preallocate_segments: prealloc,
            ..JournalConfig::default()
        }
    }

    fn disk(total: u64, free: u64) -> DiskUsage {
        DiskUsage {
            total_bytes: total,
            usable_bytes: free,
        }
    }

    #[test]
    fn a_large_disk_keeps_the_configuration() {
        let mut c = config(2);
        assert_eq!(fit(&mut c, disk(100 * GIB, 80 * GIB), 0, 0.95, 2), Ok(None));
        assert_eq!(
            (c.segment_size_bytes, c.preallocate_segments),
            (64 * MIB, 2)
        );
    }

    #[test]
    fn a_small_disk_prepares_fewer_files_then_smaller_segments() {
        // 1 GiB free under the threshold, 2 shards: 256 MiB each, four 64 MiB files.
        let mut c = config(6);
        let total = 20 * GIB;
        let free = total - (total as f64 * 0.95) as u64 + GIB;
        fit(&mut c, disk(total, free), 0, 0.95, 2).unwrap().unwrap();
        assert_eq!(
            (c.segment_size_bytes, c.preallocate_segments),
            (64 * MIB, 2)
        );
        // The 250 MiB volume, 2 shards: segments shrink, nothing is preallocated,
        // and the journals stay within half the room under the threshold.
        let mut c = config(6);
        fit(&mut c, disk(250 * MIB, 240 * MIB), 0, 0.95, 2)
            .unwrap()
            .unwrap();
        assert_eq!(c.preallocate_segments, 0);
        assert!(c.segment_size_bytes < 64 * MIB);
        let room = (250.0 * 0.95) as u64 * MIB - 10 * MIB;
        assert!(2 * 2 * c.segment_size_bytes <= room / 2, "{c:?}");
        c.validate().unwrap();
    }

    #[test]
    fn many_shards_share_a_preallocation_cap() {
        let mut c = config(6);
        assert_eq!(fit(&mut c, disk(1 << 50, 1 << 49), 0, 0.95, 2), Ok(None));
        assert_eq!(c.preallocate_segments, 6);
        let mut c = config(6);
        let line = fit(&mut c, disk(1 << 50, 1 << 49), 0, 0.95, 32).unwrap();
        assert!(line.is_some());
        assert_eq!(c.preallocate_segments, 0);
        let mut c = config(6);
        fit(&mut c, disk(1 << 50, 1 << 49), 0, 0.95, 4).unwrap();
        assert_eq!(c.preallocate_segments, 4);
    }

    #[test]
    fn existing_journal_files_count_as_room() {
        // A restart: the disk looks full, but the journal's own files are reused.
        let mut c = config(2);
        let total = 10 * GIB;
        let free = total / 20;
        assert_eq!(fit(&mut c, disk(total, free), 2 * GIB, 0.95, 2), Ok(None));
    }

    #[test]
    fn a_full_disk_gets_the_smallest_journal_and_a_warning() {
        let mut c = config(2);
        let line = fit(&mut c, disk(64 * MIB, MIB), 0, 0.95, 4)
            .unwrap()
            .unwrap();
        assert!(
            line.contains("diskUsageThreshold") && line.contains("full"),
            "{line}"
        );
        assert_eq!(c.preallocate_segments, 0);
        assert_eq!(c.segment_size_bytes, min_segment_bytes(&c));
        c.validate().unwrap();
    }
}
