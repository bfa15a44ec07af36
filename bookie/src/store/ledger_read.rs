//! The read side of the ledger table (`ledger`): READ_ENTRY (with fence reads, "last entry"
//! and long polls), v2 BATCH_READ_ENTRY, READ_LAC and GET_LIST_OF_ENTRIES_OF_LEDGER, as pure
//! decisions in a second `impl LedgerTable` block.
//!
//! Apart from the table and its write side so that each file holds one side and stays small.
//! A read is answered from the write cache or the frozen set being flushed, or, when ledger
//! storage may hold the entry, handed to a reader thread as a [`DiskRead`]. A fence read also
//! changes the table: it fences the ledger (creating it with the request's key) and is
//! journaled, like a write.
//!
//! Rules worth stating:
//! - Absent data is ENOLEDGER (unknown ledger) or ENOENTRY (known ledger), never EIO; READ_LAC
//!   answers ENOENTRY for an unknown ledger too, as Java does.

use bytes::Bytes;
use net::{availability, ReadFlag, Response, StatusCode};

use crate::store::ledger::{Answer, Decision, DiskRead, Ledger, LedgerTable};
use crate::store::record::JournalRecord;

/// Entry id meaning "the last stored entry" (BookKeeper's `LAST_ADD_CONFIRMED`).
pub const LAST_ENTRY: i64 = -1;

/// Bytes of a v2 batch-read reply besides its entries, counted against its size limit with
/// each entry's 4-byte length, as a Java bookie counts them (`BatchedReadEntryProcessor`: the
/// response header, the request id and the count's slot): a reply never passes the limit,
/// but for its first entry, which is always sent.
pub const BATCH_REPLY_FIXED_BYTES: i64 = 24 + 8 + 4;

impl LedgerTable {
    /// READ_ENTRY, including fence reads, "last entry" (-1) and long polls (`previous_lac`).
    #[allow(clippy::too_many_arguments)]
    pub fn read(
        &mut self,
        ledger: i64,
        entry: i64,
        flag: Option<ReadFlag>,
        master_key: Option<&Bytes>,
        previous_lac: Option<i64>,
        timeout_ms: Option<i64>,
        v3: bool,
    ) -> Decision {
        if flag == Some(ReadFlag::FenceLedger) {
            return self.fence_read(ledger, entry, master_key, v3);
        }
        if let (Some(previous_lac), true) = (previous_lac, v3) {
            let Some(l) = self.ledgers.get(&ledger) else {
                return self.entry_answer(ledger, entry, v3, false).into();
            };
            if flag == Some(ReadFlag::EntryPiggyback) && entry != LAST_ENTRY {
                return Decision::Reply(Response::ReadEntry {
                    status: StatusCode::EBADREQ,
                    ledger_id: ledger,
                    entry_id: entry,
                    body: None,
                    max_lac: None,
                    lac_update_timestamp: None,
                });
            }
            if l.lac > previous_lac || l.fenced {
                return Decision::Reply(self.long_poll_reply(ledger, entry, previous_lac, flag));
            }
            return Decision::WaitLac {
                ledger,
                previous_lac,
                timeout_ms: timeout_ms.unwrap_or(0).max(0) as u64,
            };
        }
        self.entry_answer(ledger, entry, v3, true).into()
    }

    fn fence_read(
        &mut self,
        ledger: i64,
        entry: i64,
        master_key: Option<&Bytes>,
        v3: bool,
    ) -> Decision {
        let eua = Response::ReadEntry {
            status: StatusCode::EUA,
            ledger_id: ledger,
            entry_id: entry,
            body: None,
            max_lac: None,
            lac_update_timestamp: None,
        };
        let Some(key) = master_key else {
            return Decision::Reply(eua);
        };
        let (l, created) = match Self::open_with_key(&mut self.ledgers, ledger, key) {
            Ok(v) => v,
            Err(()) => return Decision::Reply(eua),
        };
        let newly_fenced = !l.fenced;
        l.fenced = true;
        let key_record = created.then(|| JournalRecord::MasterKey {
            ledger,
            key: key.clone(),
        });
        // Fence reads carry no LAC in their reply (docs/protocol.md §3.5).
        let reply = self.entry_answer(ledger, entry, v3, false);
        Decision::Journal {
            master_key: key_record,
            // Planted bug (`bookie::sim`): the fence is not journaled, so a restart forgets it.
            record: (newly_fenced && !mutation::on(mutation::Mutation::FenceNotPersisted))
                .then_some(JournalRecord::Fence { ledger }),
            reply,
        }
    }

    /// The answer to a plain read of `entry` (or the last entry for -1): from the caches, or a
    /// disk read when ledger storage may have it.
    pub fn entry_answer(&self, ledger: i64, entry: i64, v3: bool, with_lac: bool) -> Answer {
        let Some(l) = self.ledgers.get(&ledger) else {
            return Answer::Now(Self::read_status(ledger, entry, StatusCode::ENOLEDGER));
        };
        let max_lac = (v3 && with_lac).then_some(l.lac);
        let wanted = if entry == LAST_ENTRY {
            match self.last_entry_id(ledger, l) {
                Some(id) => id,
                None => return Answer::Now(Self::read_status(ledger, entry, StatusCode::ENOENTRY)),
            }
        } else {
            entry
        };
        if let Some(body) = self.cached(ledger, wanted) {
            return Answer::Now(Response::ReadEntry {
                status: StatusCode::EOK,
                ledger_id: ledger,
                entry_id: entry,
                body: Some(body.clone()),
                max_lac,
                lac_update_timestamp: None,
            });
        }
        if l.persisted_last.is_some() {
            return Answer::Disk(DiskRead::Entry {
                ledger,
                entry: wanted,
                reply_entry_id: entry,
                max_lac,
            });
        }
        let mut reply = Self::read_status(ledger, entry, StatusCode::ENOENTRY);
        if let Response::ReadEntry { max_lac: m, .. } = &mut reply {
            *m = max_lac;
        }
        Answer::Now(reply)
    }

    /// A READ_ENTRY reply with `status` and no body.
    pub fn read_status(ledger: i64, entry: i64, status: StatusCode) -> Response {
        Response::ReadEntry {
            status,
            ledger_id: ledger,
            entry_id: entry,
            body: None,
            max_lac: None,
            lac_update_timestamp: None,
        }
    }

    /// The reply to a long poll once the LAC moved (or the wait timed out): the bookie's LAC
    /// and, with ENTRY_PIGGYBACK, entry `previous_lac + 1` when it is in memory (a missing
    /// piggyback entry is not an error: with striping it may live on another bookie).
    pub fn long_poll_reply(
        &self,
        ledger: i64,
        entry: i64,
        previous_lac: i64,
        flag: Option<ReadFlag>,
    ) -> Response {
        let Some(l) = self.ledgers.get(&ledger) else {
            return Self::read_status(ledger, entry, StatusCode::ENOLEDGER);
        };
        let (entry_id, body) = if flag == Some(ReadFlag::EntryPiggyback) {
            let next = previous_lac.saturating_add(1);
            match self.cached(ledger, next) {
                Some(body) if l.lac >= next => (next, Some(body.clone())),
                _ => (entry, None),
            }
        } else {
            (entry, None)
        };
        Response::ReadEntry {
            status: StatusCode::EOK,
            ledger_id: ledger,
            entry_id,
            body,
            max_lac: Some(l.lac),
            lac_update_timestamp: Some(l.lac_updated_ms),
        }
    }

    /// v2 BATCH_READ_ENTRY: entries from `start` while present, at most `max_count` (≤ 0: no
    /// limit) and about `max_size` bytes; the first entry is always sent when present.
    #[allow(clippy::too_many_arguments)]
    pub fn batch_read(
        &mut self,
        ledger: i64,
        start: i64,
        request_id: i64,
        max_count: i32,
        max_size: i64,
        fence: bool,
        master_key: Option<&Bytes>,
    ) -> Decision {
        let mut fence_records = None;
        if fence {
            let eua = Self::batch_status(ledger, start, request_id, StatusCode::EUA);
            let Some(key) = master_key else {
                return Decision::Reply(eua);
            };
            match Self::open_with_key(&mut self.ledgers, ledger, key) {
                Err(()) => return Decision::Reply(eua),
                Ok((l, created)) => {
                    let newly = !l.fenced;
                    l.fenced = true;
                    fence_records = Some((
                        created.then(|| JournalRecord::MasterKey {
                            ledger,
                            key: key.clone(),
                        }),
                        newly.then_some(JournalRecord::Fence { ledger }),
                    ));
                }
            }
        }
        let reply = match self.ledgers.get(&ledger) {
            None => Answer::Now(Self::batch_status(
                ledger,
                start,
                request_id,
                StatusCode::ENOLEDGER,
            )),
            Some(l) => {
                let mut entries = Vec::new();
                let mut size = BATCH_REPLY_FIXED_BYTES;
                let limit = if max_count <= 0 {
                    i64::MAX
                } else {
                    max_count as i64
                };
                let mut id = start;
                while (entries.len() as i64) < limit {
                    let Some(body) = self.cached(ledger, id) else {
                        break;
                    };
                    size += body.len() as i64 + 4;
                    if !entries.is_empty() && size > max_size {
                        break;
                    }
                    entries.push(body.clone());
                    id += 1;
                }
                if !entries.is_empty() {
                    Answer::Now(Response::BatchReadEntry {
                        status: StatusCode::EOK,
                        ledger_id: ledger,
                        start_entry_id: start,
                        request_id,
                        entries,
                    })
                } else if l.persisted_last.is_some() {
                    Answer::Disk(DiskRead::Batch {
                        ledger,
                        start,
                        request_id,
                        max_count,
                        max_size,
                    })
                } else {
                    Answer::Now(Self::batch_status(
                        ledger,
                        start,
                        request_id,
                        StatusCode::ENOENTRY,
                    ))
                }
            }
        };
        match fence_records {
            Some((master_key, record)) => Decision::Journal {
                master_key,
                record,
                reply,
            },
            None => reply.into(),
        }
    }

    pub fn batch_status(ledger: i64, start: i64, request_id: i64, status: StatusCode) -> Response {
        Response::BatchReadEntry {
            status,
            ledger_id: ledger,
            start_entry_id: start,
            request_id,
            entries: Vec::new(),
        }
    }

    /// READ_LAC: the explicit-LAC blob and the last entry, whichever exist.
    ///
    /// An unknown ledger gets ENOENTRY, not ENOLEDGER: Java's `ReadLacProcessorV3` notes
    /// ENOLEDGER from both look-ups and then overrides it with ENOENTRY because it found
    /// neither a blob nor an entry (the same on DbLedgerStorage and the interleaved
    /// storage, which both throw `NoLedgerException` from the read-only handle).
    pub fn read_lac(&self, ledger: i64) -> Decision {
        let Some(l) = self.ledgers.get(&ledger) else {
            return Decision::Reply(Self::read_lac_reply(ledger, None, None));
        };
        let lac_body = l.explicit_lac.clone();
        let last = self.last_entry_id(ledger, l);
        let last_entry_body = match last {
            Some(id) => match self.cached(ledger, id) {
                Some(b) => Some(b.clone()),
                None => {
                    return Decision::ReadDisk(DiskRead::ReadLac {
                        ledger,
                        entry: id,
                        lac_body,
                    })
                }
            },
            None => None,
        };
        Decision::Reply(Self::read_lac_reply(ledger, lac_body, last_entry_body))
    }

    pub fn read_lac_reply(
        ledger: i64,
        lac_body: Option<Bytes>,
        last_entry_body: Option<Bytes>,
    ) -> Response {
        let status = if lac_body.is_none() && last_entry_body.is_none() {
            StatusCode::ENOENTRY
        } else {
            StatusCode::EOK
        };
        Response::ReadLac {
            status,
            ledger_id: ledger,
            lac_body,
            last_entry_body,
        }
    }

    /// GET_LIST_OF_ENTRIES_OF_LEDGER.
    pub fn list_entries(&self, ledger: i64) -> Decision {
        let Some(l) = self.ledgers.get(&ledger) else {
            return Decision::Reply(Response::GetListOfEntriesOfLedger {
                status: StatusCode::ENOLEDGER,
                ledger_id: ledger,
                availability: None,
            });
        };
        let mut cached: Vec<i64> = l.entries.keys().copied().collect();
        if let Some(f) = self.frozen.as_ref().and_then(|f| f.get(&ledger)) {
            cached.extend(f.keys().copied());
            cached.sort_unstable();
            cached.dedup();
        }
        if l.persisted_last.is_some() {
            return Decision::ReadDisk(DiskRead::List { ledger, cached });
        }
        Decision::Reply(Response::GetListOfEntriesOfLedger {
            status: StatusCode::EOK,
            ledger_id: ledger,
            availability: Some(availability::encode_entries(cached)),
        })
    }

    /// The entry from the write cache or the frozen set.
    fn cached(&self, ledger: i64, entry: i64) -> Option<&Bytes> {
        self.ledgers
            .get(&ledger)
            .and_then(|l| l.entries.get(&entry))
            .or_else(|| {
                self.frozen
                    .as_ref()
                    .and_then(|f| f.get(&ledger))
                    .and_then(|f| f.get(&entry))
            })
    }

    /// The highest entry id this bookie has for the ledger, in memory or on disk.
    fn last_entry_id(&self, ledger: i64, l: &Ledger) -> Option<i64> {
        let frozen = self
            .frozen
            .as_ref()
            .and_then(|f| f.get(&ledger))
            .and_then(|f| f.keys().next_back().copied());
        l.last_cached().max(frozen).max(l.persisted_last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::ledger::test_support::{body, key, status};

    /// Reads: unknown ledger ENOLEDGER, missing entry ENOENTRY, -1 the last entry, duplicates
    /// overwrite, and the LAC comes from the entries' own bytes.
    #[test]
    fn reads_and_error_codes() {
        let mut t = LedgerTable::new(1 << 30);
        assert_eq!(
            status(&t.read(9, 0, None, None, None, None, true)),
            StatusCode::ENOLEDGER
        );
        t.add(9, 0, &key(1), body(9, 0, -1), false, 0);
        t.add(9, 1, &key(1), body(9, 1, 0), false, 0);
        assert_eq!(
            status(&t.read(9, 5, None, None, None, None, true)),
            StatusCode::ENOENTRY
        );
        match t.read(9, LAST_ENTRY, None, None, None, None, true) {
            Decision::Reply(Response::ReadEntry {
                body: Some(b),
                max_lac,
                entry_id,
                ..
            }) => {
                assert_eq!(b, body(9, 1, 0));
                assert_eq!(max_lac, Some(0));
                assert_eq!(entry_id, LAST_ENTRY);
            }
            other => panic!("unexpected {other:?}"),
        }
        // Re-sent entry 1, other bytes, an older writer LAC.
        let mut again = body(9, 1, -1).to_vec();
        again.extend_from_slice(b" (re-sent)");
        let again = Bytes::from(again);
        t.add(9, 1, &key(1), again.clone(), false, 0);
        match t.read(9, 1, None, None, None, None, false) {
            Decision::Reply(Response::ReadEntry {
                body: Some(b),
                max_lac: None,
                ..
            }) => {
                assert_eq!(b, again)
            }
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(t.get(9).unwrap().lac, 0, "the LAC never moves back");
    }

    /// Fencing needs the key, is journaled once, blocks normal adds and lets recovery adds in.
    #[test]
    fn fencing() {
        let mut t = LedgerTable::new(1 << 30);
        t.add(3, 0, &key(1), body(3, 0, -1), false, 0);
        let fence = Some(ReadFlag::FenceLedger);
        assert_eq!(
            status(&t.read(3, 0, fence, None, None, None, true)),
            StatusCode::EUA
        );
        assert_eq!(
            status(&t.read(3, 0, fence, Some(&key(2)), None, None, true)),
            StatusCode::EUA
        );
        match t.read(3, 0, fence, Some(&key(1)), None, None, true) {
            Decision::Journal {
                record: Some(JournalRecord::Fence { ledger: 3 }),
                reply:
                    Answer::Now(Response::ReadEntry {
                        status, max_lac, ..
                    }),
                ..
            } => {
                assert_eq!(status, StatusCode::EOK);
                assert_eq!(max_lac, None);
            }
            other => panic!("unexpected {other:?}"),
        }
        match t.read(3, 0, fence, Some(&key(1)), None, None, true) {
            Decision::Journal { record: None, .. } => {}
            other => panic!("fencing twice journals nothing: {other:?}"),
        }
        assert_eq!(
            status(&t.add(3, 1, &key(1), body(3, 1, 0), false, 0)),
            StatusCode::EFENCED
        );
        assert_eq!(
            status(&t.add(3, 1, &key(1), body(3, 1, 0), true, 0)),
            StatusCode::EOK
        );
        // Fencing an unknown ledger creates it (and journals its key).
        match t.read(4, 0, fence, Some(&key(7)), None, None, true) {
            Decision::Journal {
                master_key: Some(_),
                record: Some(_),
                reply: Answer::Now(reply),
                ..
            } => {
                assert_eq!(reply.status(), StatusCode::ENOENTRY)
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    /// A long poll answers at once when the LAC is already past `previous_lac` (piggybacking
    /// the next entry), and waits otherwise.
    #[test]
    fn long_poll() {
        let mut t = LedgerTable::new(1 << 30);
        t.add(5, 0, &key(1), body(5, 0, -1), false, 0);
        t.add(5, 1, &key(1), body(5, 1, 0), false, 7);
        let piggy = Some(ReadFlag::EntryPiggyback);
        match t.read(5, LAST_ENTRY, piggy, None, Some(-1), Some(100), true) {
            Decision::Reply(Response::ReadEntry {
                entry_id: 0,
                body: Some(_),
                max_lac: Some(0),
                lac_update_timestamp: Some(7),
                ..
            }) => {}
            other => panic!("unexpected {other:?}"),
        }
        match t.read(5, LAST_ENTRY, piggy, None, Some(0), Some(100), true) {
            Decision::WaitLac {
                ledger: 5,
                previous_lac: 0,
                timeout_ms: 100,
            } => {}
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(
            status(&t.read(5, 3, piggy, None, Some(0), Some(100), true)),
            StatusCode::EBADREQ
        );
        assert_eq!(
            status(&t.read(6, LAST_ENTRY, piggy, None, Some(0), Some(100), true)),
            StatusCode::ENOLEDGER
        );
    }

    /// READ_LAC answers as Java's ReadLacProcessorV3 does: ENOENTRY, never ENOLEDGER, when it
    /// finds neither an explicit LAC nor an entry, whether the ledger is unknown, known
    /// without data (created by a fence read), or deleted.
    #[test]
    fn read_lac_without_lac_or_entry_is_enoentry() {
        let mut t = LedgerTable::new(1 << 30);
        let unknown = match t.read_lac(8) {
            Decision::Reply(reply) => reply,
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(
            unknown,
            Response::ReadLac {
                status: StatusCode::ENOENTRY,
                ledger_id: 8,
                lac_body: None,
                last_entry_body: None,
            }
        );
        let fence = Some(ReadFlag::FenceLedger);
        t.read(9, LAST_ENTRY, fence, Some(&key(1)), None, None, true);
        assert!(t.get(9).is_some());
        assert_eq!(status(&t.read_lac(9)), StatusCode::ENOENTRY);
        t.add(10, 0, &key(1), body(10, 0, -1), false, 0);
        assert_eq!(status(&t.read_lac(10)), StatusCode::EOK);
        t.delete(10);
        assert_eq!(status(&t.read_lac(10)), StatusCode::ENOENTRY);
    }

    /// Batch reads stop at the count, the size, or the first missing entry; a full write cache
    /// still takes adds into its overshoot, and turns them away with ETOOMANYREQUESTS beyond.
    #[test]
    fn batch_read_and_cache_limit() {
        let mut t = LedgerTable::with_overshoot(100, 100);
        for e in 0..4 {
            assert_eq!(
                status(&t.add(2, e, &key(1), body(2, e, e - 1), false, 0)),
                StatusCode::EOK
            );
        }
        assert!(t.is_full(), "{} bytes cached", t.cached_bytes());
        assert_eq!(
            status(&t.add(2, 9, &key(1), Bytes::from(vec![0u8; 200]), false, 0)),
            StatusCode::ETOOMANYREQUESTS
        );
        let count = |d: Decision| match d {
            Decision::Reply(Response::BatchReadEntry { entries, .. }) => entries.len(),
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(count(t.batch_read(2, 0, 1, 10, 1 << 20, false, None)), 4);
        assert_eq!(count(t.batch_read(2, 1, 1, 2, 1 << 20, false, None)), 2);
        // The size limit counts the reply's fixed bytes and each entry with its 4-byte
        // length, as Java does: exactly two entries' worth holds two, a byte less one; the
        // first entry goes even past the limit.
        let len = |e: i64| t.cached(2, e).map_or(0, |b| b.len() as i64 + 4);
        let two = BATCH_REPLY_FIXED_BYTES + len(0) + len(1);
        assert_eq!(count(t.batch_read(2, 0, 1, 0, two, false, None)), 2);
        assert_eq!(count(t.batch_read(2, 0, 1, 0, two - 1, false, None)), 1);
        assert_eq!(count(t.batch_read(2, 0, 1, 0, 1, false, None)), 1);
        assert_eq!(
            status(&t.batch_read(2, 7, 1, 10, 1 << 20, false, None)),
            StatusCode::ENOENTRY
        );
        assert_eq!(
            status(&t.batch_read(1, 0, 1, 10, 1 << 20, false, None)),
            StatusCode::ENOLEDGER
        );
    }
}
