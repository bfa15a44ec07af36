//! Recovery: scan the segments in order, replay records from the checkpoint mark, and decide
//! where the log ends.
//!
//! Rules (the argument is in ARCHITECTURE.md, "Why an acknowledged entry survives a crash"):
//! - A segment that is not the last one in the log ends with a `SegmentEnd` record: the writer
//!   never puts a record in segment k+1 before segment k's end record is durable.
//! - In the last segment the first record that fails its checks at offset P ends the log, if
//!   no valid record of that segment lies further than the in-flight window beyond P (a crash
//!   tears only writes that were not yet durable, and at most a window's worth of them is in
//!   flight). The tail is then sealed by writing a `SegmentEnd` at the first 4 KiB boundary at
//!   or after P, so no block holding synced data is rewritten; a later scan that breaks at P
//!   finds that end record at the boundary and accepts it.
//! - Anything else (a bad record with valid data beyond the window, an unsealed segment before
//!   later data, an unreadable header before later data, a jump in the LSN sequence) is
//!   corruption: open fails naming file and offset, unless the operator chose
//!   `RecoveryMode::TolerateCorruption`.

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
}

pub(crate) struct Recovered {
    pub live: Vec<LiveSegment>,
    pub seal: Option<PendingSeal>,
    /// Files to recycle (free pool), in id order.
    pub free: Vec<String>,
    /// Files to set aside as `*.corrupt` (tolerant mode).
    pub corrupt: Vec<String>,
    pub next_lsn: Lsn,
    pub next_segment_id: u64,
    pub next_generation: u64,
    pub report: RecoveryReport,
}

enum ScanEnd {
    Sealed,
    Break { at: u64, fault: RecordFault },
    SequenceJump { at: u64 },
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
) -> Result<Recovered, JournalError> {
    let names = storage
        .list()
        .map_err(io_err("list", "journal directory"))?;
    let mut live_ids = Vec::new();
    let mut free = Vec::new();
    let mut max_id = 0u64;
    for name in names {
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
            tolerate_or_fail(
                config,
                &name,
                0,
                CorruptionKind::BadSegmentHeader,
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
            let (kind, flags, lsn, payload_total) = match rec {
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
            ScanEnd::SequenceJump { at } => {
                storage.close(file);
                tolerate_or_fail(config, &name, at, CorruptionKind::SequenceGap, &mut report)?;
                // Tolerant: cut here, as for a torn tail.
                seal = Some(PendingSeal {
                    id,
                    header,
                    offset: align_up(at as usize) as u64,
                    next_lsn: expected.unwrap_or(Lsn(1)),
                });
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
                let beyond = if later {
                    None
                } else {
                    valid_record_beyond(
                        storage,
                        &mut reader,
                        &header,
                        seed,
                        max_payload,
                        boundary.max(at + ALIGN as u64),
                        at + window,
                    )
                    .map_err(io_err("read", &name))?
                };
                // Zeros where the next record would start: the ordinary end of a
                // pre-written segment, not damage.
                let clean_end = fault == RecordFault::BadHeader
                    && reader
                        .bytes(storage, at, RECORD_HEADER_BYTES)
                        .map_err(io_err("read", &name))?
                        .iter()
                        .all(|&b| b == 0);
                storage.close(file);
                if later || beyond.is_some() {
                    let kind = if later {
                        CorruptionKind::UnsealedSegmentBeforeLaterData
                    } else {
                        CorruptionKind::BadRecordBeforeValidData
                    };
                    tolerate_or_fail(config, &name, at, kind, &mut report)?;
                    corrupt.extend(live_ids[i + 1..].iter().map(|id| segment_file_name(*id)));
                } else {
                    if !clean_end {
                        log::warn!(
                            "journal: torn tail in {name} at offset {at} ({fault:?}); \
                             the log ends there (records after it were never acknowledged)"
                        );
                        report.torn_tail = Some((name.clone(), at, format!("{fault:?}")));
                    }
                    free.extend(live_ids[i + 1..].iter().map(|id| segment_file_name(*id)));
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
        next_lsn,
        next_segment_id: max_id + 1,
        next_generation: max_generation + 1,
        report,
    })
}

fn tolerate_or_fail(
    config: &JournalConfig,
    file: &str,
    offset: u64,
    kind: CorruptionKind,
    report: &mut RecoveryReport,
) -> Result<(), JournalError> {
    if config.recovery_mode == RecoveryMode::TolerateCorruption {
        log::error!(
            "journal: corruption in {file} at offset {offset} ({kind:?}); TolerateCorruption \
             is set, so the log is cut here and what follows is set aside as *.corrupt"
        );
        report.tolerated_corruption = Some((file.to_string(), offset));
        return Ok(());
    }
    Err(JournalError::Corruption {
        file: file.to_string(),
        offset,
        kind,
    })
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
    if len > max_payload.max(crate::format::MAX_PADDING_PAYLOAD) {
        return Ok(Err(RecordFault::BadHeader));
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

/// The first 4 KiB boundary at or after `from` and at or beyond `limit` that starts a valid
/// record of this segment. Groups start on boundaries, so durable data beyond a break shows up
/// there.
fn valid_record_beyond<S: Storage>(
    storage: &mut S,
    reader: &mut FileReader,
    header: &SegmentHeader,
    seed: u32,
    max_payload: usize,
    from: u64,
    limit: u64,
) -> Result<Option<u64>, IoError> {
    let mut b = align_up(from.max(limit) as usize) as u64;
    while b + RECORD_HEADER_BYTES as u64 <= reader.len() {
        if read_record(storage, reader, b, header, seed, max_payload)?.is_ok() {
            return Ok(Some(b));
        }
        b += ALIGN as u64;
    }
    Ok(None)
}
