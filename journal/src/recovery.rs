//! Recovery: scan the segments in order, replay records from the checkpoint mark, and decide
//! where the log ends.
//!
//! Rules (the argument is in ARCHITECTURE.md, "Why an acknowledged entry survives a crash"):
//! - A segment that is not the last one in the log ends with a `SegmentEnd` record: the writer
//!   never puts a record in segment k+1 before segment k's end record is durable.
//! - In the last segment the first record that fails its checks at offset P ends the log (a
//!   torn tail) if what follows could be the rest of the writes that were in flight: at most
//!   `max_groups_in_flight` groups after P end validly (every group ends with a padding record
//!   on a block boundary, so groups are counted by their ends), and no valid record lies beyond
//!   the in-flight window in bytes. A crash tears only writes that were not yet durable, and at
//!   most `max_groups_in_flight` groups are written and not durable at once. The tail is then
//!   sealed by writing a `SegmentEnd` at the first 4 KiB boundary at or after P, so no block
//!   holding synced data is rewritten; a later scan that breaks at P finds that end record at
//!   the boundary and accepts it.
//! - Anything else (a bad record followed by more valid groups than can have been in flight,
//!   or by valid data beyond the window, an unsealed segment before later data, an unreadable
//!   header before later data, a jump in the LSN sequence) is corruption: open fails naming
//!   file, offset and what lies after it ([`BeyondCut`]; the caller may also see each such
//!   record), unless the operator chose `RecoveryMode::TolerateCorruption`.

use storage::{align_up, FileId, IoError, Storage, ALIGN};

use crate::config::{JournalConfig, RecoveryMode};
use crate::error::{CorruptionKind, JournalError};
use crate::format::{
    decode_record, parse_file_name, segment_file_name, Lsn, RecordFault, RecordKind, SegmentHeader,
    SegmentId, FLAG_RECOVERY_SEAL, RECORD_HEADER_BYTES, SEGMENT_HEADER_BYTES,
};
use crate::io::FileReader;

/// A segment of the log as recovery leaves it: complete and sealed (or about to be sealed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveSegment {
    pub id: SegmentId,
    /// LSN of the last data record in the segment, or of the last record before it.
    pub last_lsn: Lsn,
}

/// The tail segment's seal that open must write.
#[derive(Clone, Debug)]
pub(crate) struct PendingSeal {
    pub id: SegmentId,
    pub header: SegmentHeader,
    pub offset: u64,
    pub next_lsn: Lsn,
}

impl PendingSeal {
    /// The seal that cuts segment `id` at `at` (rounded up to a block), the log continuing at
    /// `expected` (the next LSN the scan wanted).
    fn cut(id: SegmentId, header: SegmentHeader, at: u64, expected: Option<Lsn>) -> PendingSeal {
        PendingSeal {
            id,
            header,
            offset: align_up(at as usize) as u64,
            next_lsn: expected.unwrap_or(Lsn(1)),
        }
    }
}

/// What a recovery found, for logs and tests.
#[derive(Clone, Debug, Default)]
pub struct RecoveryReport {
    pub segments_scanned: usize,
    pub records_seen: u64,
    pub records_replayed: u64,
    /// (file, offset, fault) of a torn tail that was cut off.
    pub torn_tail: Option<(String, u64, String)>,
    /// (file, offset) of corruption that TolerateCorruption cut off.
    pub tolerated_corruption: Option<(String, u64)>,
    /// The valid records found after the cut (torn tail or tolerated corruption): never
    /// acknowledged for a torn tail, lost for tolerated corruption.
    pub beyond_cut: BeyondCut,
}

/// The valid records that lie after the point where the log breaks: in the rest of that
/// segment and, when later segments hold log, in those too.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BeyondCut {
    /// Groups whose end (a padding record ending on a block boundary) is valid.
    pub groups: u64,
    /// Valid data records.
    pub records: u64,
    /// Lowest and highest LSN among those records.
    pub lsns: Option<(Lsn, Lsn)>,
    /// Offset of the last valid record found in the broken segment.
    pub last_offset: Option<u64>,
}

impl BeyondCut {
    fn add_record(&mut self, lsn: Lsn) {
        self.records += 1;
        self.lsns = Some(match self.lsns {
            None => (lsn, lsn),
            Some((lo, hi)) => (lo.min(lsn), hi.max(lsn)),
        });
    }

    fn merge(&mut self, other: &BeyondCut) {
        self.groups += other.groups;
        self.records += other.records;
        self.lsns = match (self.lsns, other.lsns) {
            (Some((a, b)), Some((c, d))) => Some((a.min(c), b.max(d))),
            (mine, theirs) => mine.or(theirs),
        };
    }
}

impl std::fmt::Display for BeyondCut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.lsns {
            None => write!(f, "no valid record follows"),
            Some((lo, hi)) => write!(
                f,
                "{} valid records (LSN {}..={}) in {} complete groups follow",
                self.records, lo.0, hi.0, self.groups
            ),
        }
    }
}

pub(crate) struct Recovered {
    pub live: Vec<LiveSegment>,
    pub seal: Option<PendingSeal>,
    /// Files to recycle (free pool), in id order.
    pub free: Vec<String>,
    /// Files to set aside as `*.corrupt` (tolerant mode).
    pub corrupt: Vec<String>,
    /// Trimmed segments set aside for deletion (`*.trash`) that were not deleted yet.
    pub trash: Vec<String>,
    pub next_lsn: Lsn,
    pub next_segment_id: u64,
    pub next_generation: u64,
    pub report: RecoveryReport,
    /// A stop mark file is there (valid or not): removed once the cut is durable.
    pub stop_mark_file: bool,
}

enum ScanEnd {
    Sealed,
    Break {
        at: u64,
        fault: RecordFault,
    },
    SequenceJump {
        at: u64,
    },
    /// A record after the stop mark's durable LSN: never durable, never acknowledged.
    Untrusted {
        at: u64,
        durable: Lsn,
    },
}

fn io_err(what: &'static str, file: &str) -> impl Fn(IoError) -> JournalError {
    let file = file.to_string();
    move |error| JournalError::Io {
        what,
        file: file.clone(),
        error,
    }
}

/// Scans and replays the journal in `storage`.
pub(crate) fn recover<S: Storage>(
    storage: &mut S,
    config: &JournalConfig,
    replay_from: Lsn,
    visit: &mut dyn FnMut(Lsn, &[u8]),
    visit_lost: &mut dyn FnMut(Lsn, &[u8]),
) -> Result<Recovered, JournalError> {
    // A journal that stopped after a failed write or sync left where its durable log ended:
    // nothing after it is trusted, whatever the page cache still shows.
    let found = crate::stopmark::read(storage)?;
    let stop_mark = match found {
        crate::stopmark::Found::Mark(lsn) => Some(lsn),
        _ => None,
    };
    let names = storage
        .list()
        .map_err(io_err("list", "journal directory"))?;
    let mut live_ids = Vec::new();
    let mut free = Vec::new();
    let mut trash = Vec::new();
    let mut max_id = 0u64;
    for name in names {
        if let Some(stem) = name.strip_suffix(".trash") {
            // Its id stays taken: a new segment must not reuse it while the file exists.
            if let Ok(id) = u64::from_str_radix(stem, 16) {
                max_id = max_id.max(id);
            }
            trash.push(name);
            continue;
        }
        match parse_file_name(&name) {
            Some((id, false)) => {
                live_ids.push(id);
                max_id = max_id.max(id.0);
            }
            Some((id, true)) => {
                free.push((id, name));
                max_id = max_id.max(id.0);
            }
            None => {}
        }
    }
    live_ids.sort();
    free.sort();
    let mut free: Vec<String> = free.into_iter().map(|(_, n)| n).collect();

    let mut report = RecoveryReport::default();
    let mut live = Vec::new();
    let mut seal = None;
    let mut corrupt = Vec::new();
    let mut expected: Option<Lsn> = None;
    let mut max_generation = 0u64;
    let window = config.in_flight_window_bytes();
    // Read with the format's limit, not the configured one: lowering `max_record_bytes` across
    // a restart must not turn valid records into "corruption".
    let max_payload = crate::format::MAX_RECORD_PAYLOAD;

    let mut i = 0;
    while i < live_ids.len() {
        let id = live_ids[i];
        let name = segment_file_name(id);
        let (file, len) = open_segment(storage, &name)?;
        let mut reader = FileReader::new(file, len);
        let header = read_header(storage, &mut reader, id).map_err(io_err("read", &name))?;
        report.segments_scanned += 1;
        let Some(header) = header else {
            // Segments are renamed into the log only after their header is durable, so an
            // unreadable header on a `*.jrnl` is media damage or a format this binary does not
            // know: never recycle it silently, it may hold acknowledged records.
            storage.close(file);
            let lost = lost_in_segments(storage, &live_ids[i + 1..], max_payload, visit_lost)?;
            tolerate_or_fail(
                config,
                &name,
                0,
                CorruptionKind::BadSegmentHeader,
                lost,
                &mut report,
            )?;
            corrupt.extend(live_ids[i..].iter().map(|id| segment_file_name(*id)));
            break;
        };
        max_generation = max_generation.max(header.generation);
        let seed = header.crc_seed();
        let mut pos = SEGMENT_HEADER_BYTES;
        let mut last_lsn = expected
            .map(|l| Lsn(l.0.saturating_sub(1)))
            .unwrap_or_default();
        let end = loop {
            let rec = read_record(storage, &mut reader, pos, &header, seed, max_payload)
                .map_err(io_err("read", &name))?;
            // With a stop mark, once every record up to its durable LSN is read, whatever
            // follows was written by the stopped journal after its last good sync (records,
            // padding, its own segment end, or bytes the page cache lost), and only a seal a
            // recovery wrote since is trusted.
            let past_mark = match (stop_mark, expected) {
                (Some(d), Some(e)) => e.0 > d.0,
                (Some(d), None) => d.0 == 0,
                (None, _) => false,
            };
            let (kind, flags, lsn, payload_total) = match rec {
                Ok((RecordKind::SegmentEnd, FLAG_RECOVERY_SEAL, lsn, total)) => {
                    (RecordKind::SegmentEnd, FLAG_RECOVERY_SEAL, lsn, total)
                }
                Ok(_) | Err(_) if past_mark => {
                    break ScanEnd::Untrusted {
                        at: pos,
                        durable: stop_mark.expect("past the mark"),
                    }
                }
                Ok(r) => r,
                Err(fault) => break ScanEnd::Break { at: pos, fault },
            };
            // Records continue the sequence exactly; only a recovery's end record may move it
            // forward (to a checkpoint mark beyond the log's last record).
            let in_sequence = match expected {
                None => true,
                Some(e) if kind == RecordKind::SegmentEnd && flags == FLAG_RECOVERY_SEAL => {
                    lsn >= e
                }
                Some(e) => lsn == e,
            };
            if !in_sequence {
                break ScanEnd::SequenceJump { at: pos };
            }
            match kind {
                RecordKind::Data if stop_mark.is_some_and(|d| lsn > d) => {
                    break ScanEnd::Untrusted {
                        at: pos,
                        durable: stop_mark.expect("checked"),
                    };
                }
                RecordKind::Data => {
                    report.records_seen += 1;
                    if lsn >= replay_from {
                        let bytes = reader
                            .bytes(storage, pos, payload_total)
                            .map_err(io_err("read", &name))?;
                        let payload_len = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
                        visit(
                            lsn,
                            &bytes[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + payload_len as usize],
                        );
                        report.records_replayed += 1;
                    }
                    last_lsn = lsn;
                    expected = Some(Lsn(lsn.0 + 1));
                }
                RecordKind::Padding => expected = Some(lsn),
                RecordKind::SegmentEnd => {
                    expected = Some(lsn);
                    break ScanEnd::Sealed;
                }
            }
            pos += payload_total as u64;
        };
        match end {
            ScanEnd::Sealed => {
                storage.close(file);
                live.push(LiveSegment { id, last_lsn });
                i += 1;
                continue;
            }
            ScanEnd::Untrusted { at, durable } => {
                let beyond = scan_beyond(storage, &mut reader, &header, max_payload, at, None)
                    .map_err(io_err("read", &name))?;
                storage.close(file);
                log::warn!(
                    "journal: the last run stopped after a failed write or sync, its log durable \
                     up to lsn {}; what follows in {name} from offset {at} ({beyond}) was never \
                     durable nor acknowledged: the log is cut there",
                    durable.0
                );
                report.torn_tail =
                    Some((name.clone(), at, format!("stopped at lsn {}", durable.0)));
                report.beyond_cut = beyond;
                free.extend(live_ids[i + 1..].iter().map(|id| segment_file_name(*id)));
                seal = Some(PendingSeal::cut(id, header, at, expected));
                live.push(LiveSegment { id, last_lsn });
                break;
            }
            ScanEnd::SequenceJump { at } => {
                let scan = scan_beyond(
                    storage,
                    &mut reader,
                    &header,
                    max_payload,
                    at,
                    Some(&mut *visit_lost),
                )
                .map_err(io_err("read", &name))?;
                storage.close(file);
                let mut lost = scan;
                let later = lost_in_segments(storage, &live_ids[i + 1..], max_payload, visit_lost)?;
                lost.merge(&later);
                tolerate_or_fail(
                    config,
                    &name,
                    at,
                    CorruptionKind::SequenceGap,
                    lost,
                    &mut report,
                )?;
                // Tolerant: cut here, as for a torn tail.
                seal = Some(PendingSeal::cut(id, header, at, expected));
                live.push(LiveSegment { id, last_lsn });
                corrupt.extend(live_ids[i + 1..].iter().map(|id| segment_file_name(*id)));
                break;
            }
            ScanEnd::Break { at, fault } => {
                // An earlier recovery may already have sealed the segment at the next boundary.
                let boundary = align_up(at as usize) as u64;
                if boundary != at {
                    if let Ok((RecordKind::SegmentEnd, FLAG_RECOVERY_SEAL, lsn, _)) =
                        read_record(storage, &mut reader, boundary, &header, seed, max_payload)
                            .map_err(io_err("read", &name))?
                    {
                        if expected.is_none_or(|e| lsn >= e) {
                            expected = Some(lsn);
                            storage.close(file);
                            live.push(LiveSegment { id, last_lsn });
                            i += 1;
                            continue;
                        }
                    }
                }
                let later = later_has_log(storage, &live_ids[i + 1..], max_payload)?;
                // Count what follows the break: a crash leaves at most the groups that were in
                // flight, all of them within the in-flight window.
                let from = align_up(at as usize + 1) as u64;
                let beyond = scan_beyond(storage, &mut reader, &header, max_payload, from, None)
                    .map_err(io_err("read", &name))?;
                let torn = !later
                    && beyond.groups <= config.max_groups_in_flight as u64
                    && beyond.last_offset.is_none_or(|o| o < at + window);
                // Zeros where the next record would start (a pre-written segment) or a record
                // of the file's earlier life (a recycled one), with nothing valid after it: the
                // ordinary end of the log, not damage.
                let clean_end = beyond.lsns.is_none()
                    && beyond.groups == 0
                    && ordinary_end(storage, &mut reader, at, fault, &header)
                        .map_err(io_err("read", &name))?;
                if torn {
                    storage.close(file);
                    if !clean_end {
                        log::warn!(
                            "journal: torn tail in {name} at offset {at} ({fault:?}); {beyond}, \
                             no more than the {} groups that may have been in flight: the log \
                             ends there (records after it were never acknowledged)",
                            config.max_groups_in_flight
                        );
                        report.torn_tail = Some((name.clone(), at, format!("{fault:?}")));
                    }
                    report.beyond_cut = beyond;
                    free.extend(live_ids[i + 1..].iter().map(|id| segment_file_name(*id)));
                } else {
                    let kind = if later {
                        CorruptionKind::UnsealedSegmentBeforeLaterData
                    } else {
                        CorruptionKind::BadRecordBeforeValidData
                    };
                    // Second pass: hand each lost record to the caller (it names the ledgers).
                    let mut lost = scan_beyond(
                        storage,
                        &mut reader,
                        &header,
                        max_payload,
                        from,
                        Some(&mut *visit_lost),
                    )
                    .map_err(io_err("read", &name))?;
                    storage.close(file);
                    let after =
                        lost_in_segments(storage, &live_ids[i + 1..], max_payload, visit_lost)?;
                    lost.merge(&after);
                    tolerate_or_fail(config, &name, at, kind, lost, &mut report)?;
                    corrupt.extend(live_ids[i + 1..].iter().map(|id| segment_file_name(*id)));
                }
                seal = Some(PendingSeal {
                    id,
                    header,
                    offset: boundary,
                    next_lsn: expected.unwrap_or(Lsn(1)),
                });
                live.push(LiveSegment { id, last_lsn });
                break;
            }
        }
    }
    let next_lsn = expected.unwrap_or(Lsn(1)).max(replay_from).max(Lsn(1));
    if next_lsn > expected.unwrap_or(Lsn(1)) {
        log::warn!(
            "journal: the checkpoint mark {} lies beyond the journal's end {}; continuing at the mark",
            replay_from.0,
            expected.unwrap_or(Lsn(1)).0
        );
    }
    // The seal carries the LSN the next segment starts at.
    if let Some(seal) = seal.as_mut() {
        seal.next_lsn = next_lsn;
    }
    Ok(Recovered {
        live,
        seal,
        free,
        corrupt,
        trash,
        next_lsn,
        next_segment_id: max_id + 1,
        next_generation: max_generation + 1,
        report,
        stop_mark_file: found != crate::stopmark::Found::None,
    })
}

/// What a read-only scan of a journal found.
#[derive(Clone, Debug)]
pub struct Scan {
    pub report: RecoveryReport,
    /// The LSN the next record would get.
    pub next_lsn: Lsn,
    /// Segments that hold the log.
    pub live_segments: usize,
}

/// Scans the journal in `storage` exactly as recovery does, calling `visit` for each data
/// record from `replay_from` on and `visit_lost` for the records after a corruption, but
/// changes nothing: no seal, no rename, no removal, no new segment (`bookie inspect journal`
/// on a stopped bookie's directory). Corruption is an error as at open, in the config's mode.
pub fn scan<S: Storage>(
    storage: &mut S,
    config: &JournalConfig,
    replay_from: Lsn,
    visit: &mut dyn FnMut(Lsn, &[u8]),
    visit_lost: &mut dyn FnMut(Lsn, &[u8]),
) -> Result<Scan, JournalError> {
    config.validate().map_err(JournalError::Config)?;
    let rec = recover(storage, config, replay_from, visit, visit_lost)?;
    Ok(Scan {
        report: rec.report,
        next_lsn: rec.next_lsn,
        live_segments: rec.live.len(),
    })
}

fn tolerate_or_fail(
    config: &JournalConfig,
    file: &str,
    offset: u64,
    kind: CorruptionKind,
    lost: BeyondCut,
    report: &mut RecoveryReport,
) -> Result<(), JournalError> {
    if config.recovery_mode == RecoveryMode::TolerateCorruption {
        log::error!(
            "journal: corruption in {file} at offset {offset} ({kind:?}); {lost}; the \
             tolerant recovery mode is set, so the log is cut here: those records are lost \
             and later segments are set aside as *.corrupt"
        );
        report.tolerated_corruption = Some((file.to_string(), offset));
        report.beyond_cut = lost;
        return Ok(());
    }
    Err(JournalError::Corruption {
        file: file.to_string(),
        offset,
        kind,
        lost,
    })
}

/// Whether the invalid record at `at` is what an unwritten part of a segment holds: zeros (a
/// new, zero-filled file) or a record of an earlier segment (a recycled file keeps its earlier
/// life, and every earlier life had a lower segment id). A torn header is neither: it keeps
/// part of a current record's bytes, and its segment id is this one's or garbage.
fn ordinary_end<S: Storage>(
    storage: &mut S,
    reader: &mut FileReader,
    at: u64,
    fault: RecordFault,
    header: &SegmentHeader,
) -> Result<bool, IoError> {
    let head = reader.bytes(storage, at, RECORD_HEADER_BYTES)?;
    if head.len() < RECORD_HEADER_BYTES {
        return Ok(head.iter().all(|&b| b == 0));
    }
    Ok(match fault {
        RecordFault::BadHeader => head.iter().all(|&b| b == 0),
        RecordFault::WrongSegment => {
            let id = u64::from_le_bytes(head[24..32].try_into().expect("8 bytes"));
            id != 0 && id < header.id.0
        }
        _ => false,
    })
}

/// Walks a segment from `from` and counts the valid records after it: contiguous records are
/// followed record by record; after an invalid one the walk goes on at the next block
/// boundary, where the next group would start. `visit` sees every valid data record.
fn scan_beyond<S: Storage>(
    storage: &mut S,
    reader: &mut FileReader,
    header: &SegmentHeader,
    max_payload: usize,
    from: u64,
    mut visit: Option<&mut RecordVisitor<'_>>,
) -> Result<BeyondCut, IoError> {
    let seed = header.crc_seed();
    let mut beyond = BeyondCut::default();
    let mut pos = from;
    while pos + RECORD_HEADER_BYTES as u64 <= reader.len() {
        let Ok((kind, _, lsn, total)) =
            read_record(storage, reader, pos, header, seed, max_payload)?
        else {
            pos = align_up(pos as usize + 1) as u64;
            continue;
        };
        beyond.last_offset = Some(pos);
        match kind {
            RecordKind::Data => {
                beyond.add_record(lsn);
                if let Some(visit) = visit.as_mut() {
                    let bytes = reader.bytes(storage, pos, total)?;
                    let len = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
                    visit(
                        lsn,
                        &bytes[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + len as usize],
                    );
                }
            }
            RecordKind::Padding if (pos + total as u64).is_multiple_of(ALIGN as u64) => {
                beyond.groups += 1
            }
            RecordKind::Padding | RecordKind::SegmentEnd => {}
        }
        pos += total as u64;
    }
    Ok(beyond)
}

/// The valid records of the segments `ids` (later segments that a cut would drop), each read
/// from its header on; a file whose header is unreadable contributes nothing.
fn lost_in_segments<S: Storage>(
    storage: &mut S,
    ids: &[SegmentId],
    max_payload: usize,
    visit: &mut dyn FnMut(Lsn, &[u8]),
) -> Result<BeyondCut, JournalError> {
    let mut lost = BeyondCut::default();
    for &id in ids {
        let name = segment_file_name(id);
        let (file, len) = open_segment(storage, &name)?;
        let mut reader = FileReader::new(file, len);
        let scan = (|| -> Result<BeyondCut, IoError> {
            let Some(header) = read_header(storage, &mut reader, id)? else {
                return Ok(BeyondCut::default());
            };
            scan_beyond(
                storage,
                &mut reader,
                &header,
                max_payload,
                SEGMENT_HEADER_BYTES,
                Some(&mut *visit),
            )
        })();
        storage.close(file);
        let mut scan = scan.map_err(io_err("read", &name))?;
        scan.last_offset = None;
        lost.merge(&scan);
    }
    Ok(lost)
}

fn open_segment<S: Storage>(storage: &mut S, name: &str) -> Result<(FileId, u64), JournalError> {
    let file = storage.open(name, false).map_err(io_err("open", name))?;
    match storage.file_len(file) {
        Ok(len) => Ok((file, len)),
        Err(e) => {
            storage.close(file);
            Err(io_err("stat", name)(e))
        }
    }
}

fn read_header<S: Storage>(
    storage: &mut S,
    reader: &mut FileReader,
    id: SegmentId,
) -> Result<Option<SegmentHeader>, IoError> {
    let block = reader.bytes(storage, 0, ALIGN)?;
    Ok(SegmentHeader::decode(block).filter(|h| h.id == id))
}

/// What sees the records of a scan: their LSN and payload.
type RecordVisitor<'a> = dyn FnMut(Lsn, &[u8]) + 'a;

/// A verified record's kind, flags, LSN and size in the segment.
type RecordInfo = (RecordKind, u8, Lsn, usize);

/// Reads and verifies the record at `pos`: its kind, LSN and total size, or why it is invalid.
fn read_record<S: Storage>(
    storage: &mut S,
    reader: &mut FileReader,
    pos: u64,
    header: &SegmentHeader,
    seed: u32,
    max_payload: usize,
) -> Result<Result<RecordInfo, RecordFault>, IoError> {
    let head = reader.bytes(storage, pos, RECORD_HEADER_BYTES)?;
    if head.len() < RECORD_HEADER_BYTES {
        return Ok(Err(RecordFault::Truncated));
    }
    let len = u32::from_le_bytes(head[8..12].try_into().unwrap()) as usize;
    // The header alone decides most faults; read a payload only behind a plausible header
    // (a garbage length would otherwise pull megabytes into the window).
    match decode_record(head, header, seed, max_payload) {
        Err(RecordFault::Truncated) if len > 0 => {}
        other => return Ok(other.map(|r| (r.kind, r.flags, r.lsn, r.total))),
    }
    let bytes = reader.bytes(storage, pos, RECORD_HEADER_BYTES + len)?;
    Ok(decode_record(bytes, header, seed, max_payload).map(|r| (r.kind, r.flags, r.lsn, r.total)))
}

/// Whether any of `ids` holds part of the log: a valid header and a valid first record.
fn later_has_log<S: Storage>(
    storage: &mut S,
    ids: &[SegmentId],
    max_payload: usize,
) -> Result<bool, JournalError> {
    for &id in ids {
        let name = segment_file_name(id);
        let (file, len) = open_segment(storage, &name)?;
        let mut reader = FileReader::new(file, len);
        let found = (|| -> Result<bool, IoError> {
            let Some(header) = read_header(storage, &mut reader, id)? else {
                return Ok(false);
            };
            let seed = header.crc_seed();
            Ok(read_record(
                storage,
                &mut reader,
                SEGMENT_HEADER_BYTES,
                &header,
                seed,
                max_payload,
            )?
            .is_ok())
        })();
        storage.close(file);
        if found.map_err(io_err("read", &name))? {
            return Ok(true);
        }
    }
    Ok(false)
}
