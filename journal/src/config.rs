//! Journal settings, each named after the bk_server.conf key an operator already knows, with its
//! default and unit.

use crate::policy::Triggers;

/// What recovery does when it finds a bad record with valid records after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoveryMode {
    /// A torn tail (nothing valid beyond the in-flight window) is cut off and logged; anything
    /// else refuses to open, naming the file and offset. The default.
    Strict,
    /// Corruption is logged as an error and the log is cut at the first bad record: everything
    /// after it is set aside (renamed `*.corrupt`). Acknowledged entries may be lost; only for an
    /// operator who chose availability over those entries.
    TolerateCorruption,
}

/// Journal settings.
#[derive(Clone, Debug)]
pub struct JournalConfig {
    /// Size of a segment file (`journalMaxSizeMB`; default 256 MiB here, 2 GiB in Java: our
    /// segments are fully pre-written before use and recycled, so a smaller file keeps the
    /// one-time zero fill short).
    pub segment_size_bytes: u64,
    /// `journalMaxGroupWaitMSec`, in microseconds (default 2 ms, Java's default).
    pub max_group_wait_us: u64,
    /// `journalBufferedWritesThreshold` (default 512 KiB).
    pub buffered_writes_threshold_bytes: usize,
    /// `journalBufferedEntriesThreshold` (default 0 = off).
    pub buffered_entries_threshold: usize,
    /// `journalFlushWhenQueueEmpty` (default false, as in Java).
    pub flush_when_queue_empty: bool,
    /// Close the open group when callers have nothing more and no group is in flight (ours,
    /// default true; see `policy`).
    pub flush_when_idle: bool,
    /// An idle flush waits until this long after the previous group was closed (default 0:
    /// at once; see `policy`).
    pub idle_commit_gap_us: u64,
    /// Closed groups written but not yet durable at once: the in-flight window (default 2).
    pub max_groups_in_flight: usize,
    /// Largest payload accepted (default 5 MiB + 64 KiB: the default frame limit plus room).
    pub max_record_bytes: usize,
    /// Zero-fill write size when preparing a new segment file (default 1 MiB).
    pub zero_fill_chunk_bytes: usize,
    /// Trimmed segment files kept for recycling (default 2; `journalMaxBackups` is not the
    /// same thing: trimmed files are never read again).
    pub max_free_segments: usize,
    /// Free segment files zero-filled at open, up to this count (default 0), so that a busy
    /// journal recycles files instead of zero-filling new ones beside its own writes.
    pub preallocate_segments: usize,
    pub recovery_mode: RecoveryMode,
}

impl Default for JournalConfig {
    fn default() -> JournalConfig {
        JournalConfig {
            segment_size_bytes: 256 << 20,
            max_group_wait_us: 2_000,
            buffered_writes_threshold_bytes: 512 << 10,
            buffered_entries_threshold: 0,
            flush_when_queue_empty: false,
            flush_when_idle: true,
            idle_commit_gap_us: 0,
            max_groups_in_flight: 2,
            max_record_bytes: (5 << 20) + (64 << 10),
            zero_fill_chunk_bytes: 1 << 20,
            max_free_segments: 2,
            preallocate_segments: 0,
            recovery_mode: RecoveryMode::Strict,
        }
    }
}

impl JournalConfig {
    /// Capacity of one group buffer: a whole threshold's worth plus the largest record and its
    /// padding, so a record always fits an empty group.
    pub fn group_buffer_bytes(&self) -> usize {
        storage::align_up(
            self.buffered_writes_threshold_bytes.max(1)
                + crate::format::record_bytes(self.max_record_bytes)
                + 2 * storage::ALIGN,
        )
    }

    /// Bytes that may be written but not durable at once: what a crash can tear.
    pub fn in_flight_window_bytes(&self) -> u64 {
        (self.max_groups_in_flight as u64 + 1) * self.group_buffer_bytes() as u64
    }

    pub(crate) fn triggers(&self) -> Triggers {
        Triggers {
            max_group_wait_us: self.max_group_wait_us,
            buffered_bytes_threshold: self.buffered_writes_threshold_bytes,
            buffered_records_threshold: self.buffered_entries_threshold,
            flush_when_queue_empty: self.flush_when_queue_empty,
            flush_when_idle: self.flush_when_idle,
            idle_commit_gap_us: self.idle_commit_gap_us,
        }
    }

    /// Checks the settings; the message names the offending key.
    pub fn validate(&self) -> Result<(), String> {
        let align = storage::ALIGN as u64;
        if !self.segment_size_bytes.is_multiple_of(align) {
            return Err(format!(
                "journalMaxSizeMB: segment size {} is not a multiple of {align}",
                self.segment_size_bytes
            ));
        }
        // A segment holds its header, at least one largest group, and the seal block.
        let min = 2 * align + self.group_buffer_bytes() as u64;
        if self.segment_size_bytes < min {
            return Err(format!(
                "journalMaxSizeMB: segment size {} is below the minimum {min} for records of {} bytes",
                self.segment_size_bytes, self.max_record_bytes
            ));
        }
        if self.max_groups_in_flight == 0 {
            return Err("max_groups_in_flight must be at least 1".into());
        }
        if self.zero_fill_chunk_bytes == 0
            || !self.zero_fill_chunk_bytes.is_multiple_of(storage::ALIGN)
        {
            return Err(format!(
                "zero_fill_chunk_bytes {} must be a positive multiple of {align}",
                self.zero_fill_chunk_bytes
            ));
        }
        if self.max_record_bytes > crate::format::MAX_RECORD_PAYLOAD {
            return Err(format!(
                "max_record_bytes {} exceeds the format's limit {}",
                self.max_record_bytes,
                crate::format::MAX_RECORD_PAYLOAD
            ));
        }
        Ok(())
    }
}
