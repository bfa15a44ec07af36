//! The availability encoding carried by GET_LIST_OF_ENTRIES_OF_LEDGER replies
//! (`AvailabilityOfEntriesOfLedger` in Java, docs/protocol.md §3.5.8).
//!
//! ```text
//! header (64 bytes): i32 formatVersion (0) | i32 groupCount | 56 zero bytes
//! groupCount × 24 bytes, sorted by firstSequenceStart:
//!     i64 firstSequenceStart | i64 lastSequenceStart | i32 sequenceSize | i32 sequencePeriod
//! ```
//! A group stands for runs of `sequenceSize` consecutive ids starting at
//! `firstSequenceStart`, then every `sequencePeriod` ids, up to the run starting at
//! `lastSequenceStart` (period 0: a single run). The writer here emits one group
//! per maximal run of consecutive ids, which the Java reader accepts.

use bytes::{BufMut, Bytes, BytesMut};

/// Size of the header.
pub const HEADER_SIZE: usize = 64;
/// Size of one group.
pub const GROUP_SIZE: usize = 24;
/// The only format version.
pub const FORMAT_VERSION: i32 = 0;

/// One group of runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SequenceGroup {
    /// Start of the first run.
    pub first_sequence_start: i64,
    /// Start of the last run.
    pub last_sequence_start: i64,
    /// Length of each run.
    pub sequence_size: i32,
    /// Distance between run starts (0 when there is one run).
    pub sequence_period: i32,
}

impl SequenceGroup {
    /// True if `entry_id` is in one of the group's runs.
    pub fn contains(&self, entry_id: i64) -> bool {
        if entry_id < self.first_sequence_start || self.sequence_size <= 0 {
            return false;
        }
        let offset = entry_id - self.first_sequence_start;
        let (run_start, within) = if self.sequence_period > 0 {
            let period = i64::from(self.sequence_period);
            (
                self.first_sequence_start + offset / period * period,
                offset % period,
            )
        } else {
            (self.first_sequence_start, offset)
        };
        run_start <= self.last_sequence_start && within < i64::from(self.sequence_size)
    }
}

/// Why an availability blob could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AvailabilityError {
    /// Shorter than its header or its groups.
    Truncated,
    /// A format version other than 0.
    UnknownFormatVersion(i32),
}

/// Encodes a strictly increasing sequence of entry ids. Ids that are not above
/// the previous one are skipped, so the output is always well-formed.
pub fn encode_entries(entry_ids: impl IntoIterator<Item = i64>) -> Bytes {
    let mut groups = BytesMut::new();
    let mut count: i32 = 0;
    let mut run: Option<(i64, i64)> = None; // (start, last)
    let mut flush = |groups: &mut BytesMut, start: i64, last: i64| {
        // A run longer than i32::MAX is split into several groups.
        let mut start = start;
        while start <= last {
            let size = (last - start).saturating_add(1).min(i64::from(i32::MAX));
            groups.put_i64(start);
            groups.put_i64(start);
            groups.put_i32(size as i32);
            groups.put_i32(0);
            count += 1;
            start = match start.checked_add(size) {
                Some(next) => next,
                None => break,
            };
        }
    };
    for id in entry_ids {
        run = match run {
            None => Some((id, id)),
            Some((start, last)) if last.checked_add(1) == Some(id) => Some((start, id)),
            Some((start, last)) if id > last => {
                flush(&mut groups, start, last);
                Some((id, id))
            }
            unchanged => unchanged,
        };
    }
    if let Some((start, last)) = run {
        flush(&mut groups, start, last);
    }
    let mut out = BytesMut::with_capacity(HEADER_SIZE + groups.len());
    out.put_i32(FORMAT_VERSION);
    out.put_i32(count);
    out.put_bytes(0, HEADER_SIZE - 8);
    out.put_slice(&groups);
    out.freeze()
}

/// Parses the groups of an availability blob.
pub fn decode_groups(blob: &[u8]) -> Result<Vec<SequenceGroup>, AvailabilityError> {
    if blob.len() < HEADER_SIZE {
        return Err(AvailabilityError::Truncated);
    }
    let version = i32::from_be_bytes(blob[0..4].try_into().expect("4 bytes"));
    if version != FORMAT_VERSION {
        return Err(AvailabilityError::UnknownFormatVersion(version));
    }
    let count = i32::from_be_bytes(blob[4..8].try_into().expect("4 bytes"));
    let count = usize::try_from(count).map_err(|_| AvailabilityError::Truncated)?;
    let body = &blob[HEADER_SIZE..];
    // Checked before allocating, so a hostile count cannot reserve memory.
    if body.len() / GROUP_SIZE < count {
        return Err(AvailabilityError::Truncated);
    }
    let mut groups = Vec::with_capacity(count);
    for chunk in body.chunks_exact(GROUP_SIZE).take(count) {
        groups.push(SequenceGroup {
            first_sequence_start: i64::from_be_bytes(chunk[0..8].try_into().expect("8 bytes")),
            last_sequence_start: i64::from_be_bytes(chunk[8..16].try_into().expect("8 bytes")),
            sequence_size: i32::from_be_bytes(chunk[16..20].try_into().expect("4 bytes")),
            sequence_period: i32::from_be_bytes(chunk[20..24].try_into().expect("4 bytes")),
        });
    }
    Ok(groups)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: the spec's example ({0,1,2,3}: one group 0/0/4/0) encodes byte-exact,
    /// and membership of a multi-run encoding matches the input set.
    #[test]
    fn encodes_runs() {
        let blob = encode_entries([0, 1, 2, 3]);
        let mut expected = vec![0, 0, 0, 0, 0, 0, 0, 1];
        expected.extend_from_slice(&[0; 56]);
        expected.extend_from_slice(&[0; 16]);
        expected.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0]);
        assert_eq!(&blob[..], &expected[..]);

        let ids = [1i64, 2, 3, 7, 9, 10, 100];
        let groups = decode_groups(&encode_entries(ids)).unwrap();
        assert_eq!(groups.len(), 4);
        for id in -1..=101 {
            let present = groups.iter().any(|g| g.contains(id));
            assert_eq!(present, ids.contains(&id), "id {id}");
        }
        assert_eq!(encode_entries([]).len(), HEADER_SIZE);
    }

    /// Goal: Java-style packed groups (with a period) are understood.
    #[test]
    fn periodic_group_membership() {
        let group = SequenceGroup {
            first_sequence_start: 10,
            last_sequence_start: 30,
            sequence_size: 2,
            sequence_period: 10,
        };
        let members: Vec<i64> = (0..40).filter(|&id| group.contains(id)).collect();
        assert_eq!(members, vec![10, 11, 20, 21, 30, 31]);
    }

    /// Goal: short blobs, bad versions and hostile counts are errors, not panics
    /// or huge allocations.
    #[test]
    fn rejects_bad_blobs() {
        assert_eq!(decode_groups(&[0; 10]), Err(AvailabilityError::Truncated));
        let mut blob = vec![0u8; HEADER_SIZE];
        blob[3] = 1;
        assert_eq!(
            decode_groups(&blob),
            Err(AvailabilityError::UnknownFormatVersion(1))
        );
        let mut blob = vec![0u8; HEADER_SIZE];
        blob[4..8].copy_from_slice(&i32::MAX.to_be_bytes());
        assert_eq!(decode_groups(&blob), Err(AvailabilityError::Truncated));
    }
}
