//! The bookie's journal records: what an add, a new ledger's master key, a fence and an
//! explicit LAC look like inside the journal's opaque payloads.
//!
//! Layout (little-endian), version 1:
//! ```text
//! 0  1  type: 1 add entry, 2 master key, 3 fence, 4 explicit LAC
//! 1  8  ledger id
//! 9  8  entry id (add entry only; absent otherwise)
//! .. .. add: the entry body as the client sent it; master key: the key; explicit LAC: the
//!       client's LAC blob; fence: nothing
//! ```
//! The journal record's own header carries the checksum, length and LSN, so nothing else is
//! needed here. An add record is appended as two parts (this header and the body), so the body
//! is copied once, into the journal's group buffer.

use bytes::Bytes;

const TYPE_ADD: u8 = 1;
const TYPE_MASTER_KEY: u8 = 2;
const TYPE_FENCE: u8 = 3;
const TYPE_EXPLICIT_LAC: u8 = 4;

/// Room for the longest fixed header (an add's).
pub const HEADER_MAX: usize = 17;

/// One journal record of the bookie.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JournalRecord {
    Add {
        ledger: i64,
        entry: i64,
        body: Bytes,
    },
    MasterKey {
        ledger: i64,
        key: Bytes,
    },
    Fence {
        ledger: i64,
    },
    ExplicitLac {
        ledger: i64,
        body: Bytes,
    },
}

impl JournalRecord {
    /// Writes the fixed header into `header` and returns (header length, variable part).
    pub fn encode<'a>(&'a self, header: &mut [u8; HEADER_MAX]) -> (usize, &'a [u8]) {
        let (kind, ledger, entry, rest): (u8, i64, Option<i64>, &[u8]) = match self {
            JournalRecord::Add {
                ledger,
                entry,
                body,
            } => (TYPE_ADD, *ledger, Some(*entry), body),
            JournalRecord::MasterKey { ledger, key } => (TYPE_MASTER_KEY, *ledger, None, key),
            JournalRecord::Fence { ledger } => (TYPE_FENCE, *ledger, None, &[]),
            JournalRecord::ExplicitLac { ledger, body } => (TYPE_EXPLICIT_LAC, *ledger, None, body),
        };
        header[0] = kind;
        header[1..9].copy_from_slice(&ledger.to_le_bytes());
        let n = match entry {
            Some(entry) => {
                header[9..17].copy_from_slice(&entry.to_le_bytes());
                17
            }
            None => 9,
        };
        (n, rest)
    }

    /// Decodes a replayed payload, copying the variable part. `None` for bytes this version
    /// does not understand (the caller stops: replaying half a log is worse than refusing).
    pub fn decode(payload: &[u8]) -> Option<JournalRecord> {
        let kind = *payload.first()?;
        let ledger = i64::from_le_bytes(payload.get(1..9)?.try_into().ok()?);
        Some(match kind {
            TYPE_ADD => JournalRecord::Add {
                ledger,
                entry: i64::from_le_bytes(payload.get(9..17)?.try_into().ok()?),
                body: Bytes::copy_from_slice(&payload[17..]),
            },
            TYPE_MASTER_KEY => JournalRecord::MasterKey {
                ledger,
                key: Bytes::copy_from_slice(&payload[9..]),
            },
            TYPE_FENCE if payload.len() == 9 => JournalRecord::Fence { ledger },
            TYPE_EXPLICIT_LAC => JournalRecord::ExplicitLac {
                ledger,
                body: Bytes::copy_from_slice(&payload[9..]),
            },
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(record: JournalRecord) {
        let mut header = [0u8; HEADER_MAX];
        let (n, rest) = record.encode(&mut header);
        let mut payload = header[..n].to_vec();
        payload.extend_from_slice(rest);
        assert_eq!(JournalRecord::decode(&payload), Some(record));
    }

    /// Every record type survives encode → decode.
    #[test]
    fn records_round_trip() {
        round_trip(JournalRecord::Add {
            ledger: 7,
            entry: 42,
            body: Bytes::from_static(b"entry body"),
        });
        round_trip(JournalRecord::MasterKey {
            ledger: -1,
            key: Bytes::from_static(&[9; 20]),
        });
        round_trip(JournalRecord::Fence { ledger: 1 << 40 });
        round_trip(JournalRecord::ExplicitLac {
            ledger: 3,
            body: Bytes::from_static(b"lac"),
        });
    }

    /// Unknown types and short payloads are refused, never a panic.
    #[test]
    fn bad_payloads_are_refused() {
        assert_eq!(JournalRecord::decode(&[]), None);
        assert_eq!(JournalRecord::decode(&[1, 2, 3]), None);
        assert_eq!(JournalRecord::decode(&[9; 20]), None);
        assert_eq!(JournalRecord::decode(&[TYPE_ADD; 12]), None);
        assert_eq!(JournalRecord::decode(&[TYPE_FENCE; 10]), None);
    }
}
