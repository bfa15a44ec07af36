//! The torn-write checklist (every shape a crash can leave a journal in: empty or header-only
//! segments, a record torn in its header or body, a truncated file, junk or zeros after the last
//! record, a torn block before later data) as explicit, named recovery cases.
//!
//! Each case builds a journal directory on the simulated disk: records go through the real
//! [`Journal`], the disk may crash (`SimDisk::crash`) at a chosen point (a [`Tripwire`] storage
//! pulls the plug in the middle of a chosen call), and durable bytes may then be edited
//! surgically (a 4 KiB block rewritten and synced through a fresh `SimStorage`). The journal is
//! then reopened with [`Journal::open`] and the case checks what was replayed, the
//! [`RecoveryReport`](journal::RecoveryReport), or the `JournalError::Corruption` it refused
//! with.
//!
//! Record offsets are never guessed: [`walk`] decodes a segment file with the public format
//! code (`journal::format`) and every case asserts the layout it relies on before editing it.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;

use journal::format::{
    decode_record, encode_record, free_file_name, segment_file_name, RecordKind, SegmentHeader,
    SegmentId,
};
use journal::{
    AppendError, CorruptionKind, Journal, JournalConfig, JournalError, Lsn, RecoveryMode,
};
use storage::sim::{FaultConfig, SimConfig, SimDisk, SimRng, SimStorage};
use storage::{AlignedBuf, Completion, DriverKind, FileId, IoError, Op, Storage, Wait, ALIGN};

const DIR: &str = "journal";

// ---- set-up ---------------------------------------------------------------------------------

/// Small settings: 4 KiB records at most, 8 KiB groups, two groups in flight, 256 KiB
/// segments. The in-flight window is 3 × 24 KiB = 72 KiB (18 blocks).
fn config() -> JournalConfig {
    let c = JournalConfig {
        segment_size_bytes: 256 << 10,
        max_record_bytes: 4096,
        buffered_writes_threshold_bytes: 8192,
        max_group_wait_us: 500,
        max_groups_in_flight: 2,
        zero_fill_chunk_bytes: 64 << 10,
        max_free_segments: 2,
        ..JournalConfig::default()
    };
    c.validate().expect("valid test config");
    c
}

/// The same, with 48 KiB segments, so a few dozen records rotate.
fn small_segments() -> JournalConfig {
    let c = JournalConfig {
        segment_size_bytes: 48 << 10,
        ..config()
    };
    c.validate().expect("valid test config");
    c
}

fn sim(seed: u64) -> SimDisk {
    SimDisk::new(SimConfig::new(seed).with_latency_us(5, 200))
}

fn seg(n: u64) -> String {
    segment_file_name(SegmentId(n))
}

type Replay = Vec<(u64, Vec<u8>)>;

fn try_open<S: Storage>(
    storage: S,
    config: &JournalConfig,
    replay_from: u64,
) -> Result<(Journal<S>, Replay), JournalError> {
    let mut replay = Vec::new();
    let j = Journal::open(storage, config.clone(), Lsn(replay_from), &mut |lsn, p| {
        replay.push((lsn.0, p.to_vec()))
    })?;
    Ok((j, replay))
}

fn open(disk: &SimDisk, config: &JournalConfig, replay_from: u64) -> (Journal<SimStorage>, Replay) {
    try_open(disk.storage(DIR), config, replay_from).unwrap_or_else(|e| panic!("open failed: {e}"))
}

/// Power loss, then recovery.
fn crash_and_open(
    disk: &SimDisk,
    j: Journal<SimStorage>,
    config: &JournalConfig,
    replay_from: u64,
) -> (Journal<SimStorage>, Replay) {
    drop(j);
    disk.crash();
    open(disk, config, replay_from)
}

/// A payload that names its LSN (first 8 bytes) and is otherwise a pattern of it.
fn payload(lsn: u64, len: usize) -> Vec<u8> {
    let mut p: Vec<u8> = (0..len)
        .map(|i| (lsn as u8).wrapping_mul(37).wrapping_add(i as u8) ^ (i >> 8) as u8)
        .collect();
    for (i, b) in lsn.to_le_bytes().iter().enumerate().take(len) {
        p[i] = *b;
    }
    p
}

/// Appends, driving the journal through backpressure.
fn append_one<S: Storage>(j: &mut Journal<S>, disk: &SimDisk, p: &[u8]) -> Lsn {
    loop {
        match j.append(p, disk.now_us()) {
            Ok(lsn) => return lsn,
            Err(AppendError::Backpressure) => {
                j.tick(disk.now_us(), false).expect("tick");
                j.wait(Some(1_000)).expect("wait");
            }
            Err(e) => panic!("append failed: {e}"),
        }
    }
}

/// What was appended, by LSN.
#[derive(Default)]
struct Model {
    records: BTreeMap<u64, Vec<u8>>,
}

impl Model {
    fn append<S: Storage>(&mut self, j: &mut Journal<S>, disk: &SimDisk, len: usize) -> u64 {
        let lsn = j.next_lsn().0;
        let p = payload(lsn, len);
        assert_eq!(
            append_one(j, disk, &p).0,
            lsn,
            "LSNs are handed out in order"
        );
        self.records.insert(lsn, p);
        lsn
    }

    /// Appends one record per size, then flushes: all durable.
    fn append_flushed<S: Storage>(&mut self, j: &mut Journal<S>, disk: &SimDisk, sizes: &[usize]) {
        for &len in sizes {
            self.append(j, disk, len);
        }
        j.flush().expect("flush");
        assert_eq!(
            j.durable_lsn(),
            Lsn(j.next_lsn().0 - 1),
            "flush makes all durable"
        );
    }

    /// Fills several segments and trims them into the free pool (ten 1500-byte records a flush,
    /// all but the last 20 durable ones trimmed) until a free file has been reused twice, then
    /// appends three 300-byte records, not flushed, into the current (recycled) segment.
    /// Returns the trim mark.
    fn append_until_recycled<S: Storage>(&mut self, j: &mut Journal<S>, disk: &SimDisk) -> u64 {
        let mut mark = 0;
        while j.stats().segments_recycled < 2 {
            for _ in 0..10 {
                self.append(j, disk, 1500);
            }
            j.flush().expect("flush");
            mark = j.durable_lsn().0.saturating_sub(20).max(mark);
            j.trim(Lsn(mark)).expect("trim");
            assert!(self.records.len() < 5000, "no recycling happened");
        }
        for _ in 0..3 {
            self.append(j, disk, 300);
        }
        mark
    }

    /// Appends `n` records, each flushed alone: one record per 4 KiB group.
    fn append_one_per_block<S: Storage>(&mut self, j: &mut Journal<S>, disk: &SimDisk, n: usize) {
        for i in 0..n {
            self.append_flushed(j, disk, &[100 + i % 50]);
        }
    }

    /// The replay is exactly the records `lsns`, byte for byte.
    fn assert_replay(&self, replay: &Replay, lsns: std::ops::RangeInclusive<u64>) {
        let got: Vec<u64> = replay.iter().map(|(l, _)| *l).collect();
        let want: Vec<u64> = lsns.collect();
        assert_eq!(got, want, "replayed LSNs");
        for (lsn, p) in replay {
            assert_eq!(
                Some(p),
                self.records.get(lsn),
                "record {lsn} differs from what was appended"
            );
        }
    }

    /// After a crash: the replay starts at 1, is contiguous, holds every acknowledged record
    /// byte for byte and nothing that was never appended; the model forgets the lost suffix.
    fn assert_recovered(&mut self, replay: &Replay, acked: u64, next_lsn: Lsn) {
        for (i, (lsn, p)) in replay.iter().enumerate() {
            assert_eq!(*lsn, i as u64 + 1, "replay is contiguous from 1");
            assert_eq!(
                Some(p),
                self.records.get(lsn),
                "record {lsn} was never appended with these bytes"
            );
        }
        let end = replay.len() as u64;
        assert!(
            end >= acked,
            "acknowledged up to {acked}, but the log ends at {end}"
        );
        assert_eq!(next_lsn, Lsn(end + 1), "next LSN follows the replay");
        self.records.retain(|lsn, _| *lsn <= end);
    }
}

// ---- surgery on durable bytes ----------------------------------------------------------------

fn durable(disk: &SimDisk, name: &str) -> Vec<u8> {
    disk.durable_file(DIR, name)
        .unwrap_or_else(|| panic!("{name} is not durable"))
}

fn run_op(s: &mut SimStorage, op: Op, want: usize) {
    s.submit(7, op).map_err(|(e, _)| e).expect("submit");
    let mut out: Vec<Completion> = Vec::new();
    while out.is_empty() {
        s.poll(&mut out, Wait::AtLeastOne { timeout_us: None })
            .expect("poll");
    }
    assert_eq!(out[0].result, Ok(want), "surgical I/O");
}

/// Writes `data` at `offset` of `name` (created if missing) and makes it durable. No journal
/// may be live on the disk (crash first).
fn overwrite(disk: &SimDisk, name: &str, offset: u64, data: &[u8]) {
    assert!(offset.is_multiple_of(ALIGN as u64) && data.len().is_multiple_of(ALIGN));
    let mut s = disk.storage(DIR);
    let f: FileId = s.open(name, true).expect("open");
    let mut buf = AlignedBuf::zeroed(data.len());
    buf.copy_from_slice(data);
    run_op(
        &mut s,
        Op::Write {
            file: f,
            offset,
            buf,
        },
        data.len(),
    );
    run_op(&mut s, Op::SyncData { file: f }, 0);
    s.close(f);
    s.sync_dir().expect("sync dir");
}

/// Edits the durable image of `name` in place and writes back every 4 KiB block that changed.
fn edit(disk: &SimDisk, name: &str, change: impl FnOnce(&mut [u8])) {
    let before = durable(disk, name);
    let mut after = before.clone();
    change(&mut after);
    let mut changed = 0;
    for (i, (a, b)) in before.chunks(ALIGN).zip(after.chunks(ALIGN)).enumerate() {
        if a != b {
            overwrite(disk, name, (i * ALIGN) as u64, b);
            changed += 1;
        }
    }
    assert!(changed > 0, "the edit changed nothing");
    assert_eq!(durable(disk, name), after, "the edit is durable");
}

/// One record of a segment file, as the format code decodes it.
#[derive(Clone, Copy, Debug)]
struct Rec {
    offset: u64,
    kind: RecordKind,
    lsn: u64,
    total: usize,
}

/// Decodes a segment file from its header to its end record or first invalid record.
fn walk(bytes: &[u8], max_payload: usize) -> (SegmentHeader, Vec<Rec>) {
    let header = SegmentHeader::decode(&bytes[..ALIGN]).expect("valid segment header");
    let seed = header.crc_seed();
    let mut pos = ALIGN;
    let mut out = Vec::new();
    while pos < bytes.len() {
        let Ok(r) = decode_record(&bytes[pos..], &header, seed, max_payload) else {
            break;
        };
        out.push(Rec {
            offset: pos as u64,
            kind: r.kind,
            lsn: r.lsn.0,
            total: r.total,
        });
        pos += r.total;
        if r.kind == RecordKind::SegmentEnd {
            break;
        }
    }
    (header, out)
}

fn data_rec(recs: &[Rec], lsn: u64) -> Rec {
    *recs
        .iter()
        .find(|r| r.kind == RecordKind::Data && r.lsn == lsn)
        .unwrap_or_else(|| panic!("record {lsn} not in the segment"))
}

/// Where the valid records of a segment end (a group boundary).
fn valid_end(recs: &[Rec]) -> u64 {
    recs.last()
        .map_or(ALIGN as u64, |r| r.offset + r.total as u64)
}

fn torn_tail(j: &Journal<SimStorage>) -> Option<(String, u64)> {
    j.recovery_report()
        .torn_tail
        .as_ref()
        .map(|(f, o, _)| (f.clone(), *o))
}

fn random_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    SimRng::new(seed).fill(&mut v);
    v
}

// ---- empty, header only, junk ------------------------------------------------------------------

/// Empty directory: opening gives an empty journal whose next LSN is 1, with nothing replayed
/// and nothing reported; the first segment file is created durably.
#[test]
fn empty_directory_is_an_empty_journal() {
    let disk = sim(1);
    let (j, replay) = open(&disk, &config(), 0);
    assert!(replay.is_empty());
    assert_eq!(j.next_lsn(), Lsn(1));
    assert_eq!(j.durable_lsn(), Lsn(0));
    let r = j.recovery_report();
    assert_eq!(r.segments_scanned, 0);
    assert_eq!(r.records_seen, 0);
    assert!(r.torn_tail.is_none() && r.tolerated_corruption.is_none());
    assert!(disk.durable_names(DIR).contains(&seg(1)));
}

/// Header only (a segment with a valid header and no records): recovery finds an empty log,
/// next LSN 1, no corruption; an end of the log, if reported, is at the first record (4096).
#[test]
fn header_only_segment_is_an_empty_log() {
    let disk = sim(2);
    let (j, _) = open(&disk, &config(), 0);
    drop(j);
    disk.crash();
    let bytes = durable(&disk, &seg(1));
    let (header, recs) = walk(&bytes, 4096);
    assert_eq!(header.id, SegmentId(1));
    assert!(recs.is_empty(), "premise: no records");
    let (j, replay) = open(&disk, &config(), 0);
    assert!(replay.is_empty());
    assert_eq!(j.next_lsn(), Lsn(1));
    assert_eq!(j.recovery_report().records_seen, 0);
    // Zeros where the first record would be are the normal end: if the report names an end
    // at all, it is there.
    assert!(
        torn_tail(&j).is_none_or(|t| t == (seg(1), 4096)),
        "{:?}",
        j.recovery_report()
    );
    assert!(j.recovery_report().tolerated_corruption.is_none());
}

/// All junk (a lone `*.jrnl` file of random bytes, no valid header): segments are renamed into
/// the log only after their header is durable, so this is media damage, not a crash artefact
/// (docs/format/journal.md §5, since 3fec900): Strict mode refuses with `BadSegmentHeader` at
/// offset 0; TolerateCorruption opens an empty log, sets the file aside as `*.jrnl.corrupt`,
/// and records appended afterwards recover byte for byte.
#[test]
fn all_junk_segment_alone_is_corruption() {
    let disk = sim(3);
    overwrite(&disk, &seg(1), 0, &random_bytes(3, 64 << 10));
    let cfg = config();
    match try_open(disk.storage(DIR), &cfg, 0) {
        Err(JournalError::Corruption {
            file, offset, kind, ..
        }) => assert_eq!(
            (file, offset, kind),
            (seg(1), 0, CorruptionKind::BadSegmentHeader)
        ),
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("strict mode opened over a segment with an unreadable header"),
    }
    let tolerant = JournalConfig {
        recovery_mode: RecoveryMode::TolerateCorruption,
        ..cfg.clone()
    };
    let (mut j, replay) = open(&disk, &tolerant, 0);
    assert!(replay.is_empty());
    assert_eq!(j.next_lsn(), Lsn(1));
    assert_eq!(j.recovery_report().tolerated_corruption, Some((seg(1), 0)));
    let names = disk.durable_names(DIR);
    assert!(
        names.contains(&format!("{}.corrupt", seg(1))),
        "junk set aside: {names:?}"
    );
    let mut m = Model::default();
    m.append_flushed(&mut j, &disk, &[10, 200, 3000, 0, 77]);
    let (j, replay) = crash_and_open(&disk, j, &cfg, 0);
    m.assert_replay(&replay, 1..=5);
    assert_eq!(j.next_lsn(), Lsn(6));
}

/// All junk in a `*.free` file (a preparation interrupted before its header was durable):
/// treated as unused, no error: the log is empty, the file is recycled as the first segment,
/// and records appended after it recover byte for byte (its junk never parses).
#[test]
fn all_junk_free_file_is_unused() {
    let disk = sim(23);
    overwrite(
        &disk,
        &free_file_name(SegmentId(1)),
        0,
        &random_bytes(23, 64 << 10),
    );
    let cfg = config();
    let (mut j, replay) = open(&disk, &cfg, 0);
    assert!(replay.is_empty());
    assert_eq!(j.next_lsn(), Lsn(1));
    assert!(j.recovery_report().tolerated_corruption.is_none());
    assert_eq!(j.stats().segments_recycled, 1, "the junk file was recycled");
    let names = disk.durable_names(DIR);
    assert!(
        !names.contains(&free_file_name(SegmentId(1))),
        "junk file reused: {names:?}"
    );
    let mut m = Model::default();
    m.append_flushed(&mut j, &disk, &[10, 200, 3000, 0, 77]);
    let (j, replay) = crash_and_open(&disk, j, &cfg, 0);
    m.assert_replay(&replay, 1..=5);
    assert_eq!(j.next_lsn(), Lsn(6));
}

// ---- torn tails ------------------------------------------------------------------------------

/// Two durable groups: LSN 1..=3 in the first, 4..=6 (the 5th spanning a block boundary) in
/// the second. Returns the disk (crashed, so durable = what reads see) and the model.
fn two_groups(seed: u64) -> (SimDisk, Model, Vec<Rec>) {
    let disk = sim(seed);
    let cfg = config();
    let (mut j, _) = open(&disk, &cfg, 0);
    let mut m = Model::default();
    m.append_flushed(&mut j, &disk, &[100, 200, 300]);
    m.append_flushed(&mut j, &disk, &[2000, 3000, 50]);
    drop(j);
    disk.crash();
    let (_, recs) = walk(&durable(&disk, &seg(1)), cfg.max_record_bytes);
    let five = data_rec(&recs, 5);
    assert!(
        five.offset / ALIGN as u64 != (five.offset + five.total as u64 - 1) / ALIGN as u64,
        "premise: record 5 spans a block boundary: {recs:?}"
    );
    (disk, m, recs)
}

/// Truncated inside a record header at the tail (record 5's length field half-written, the
/// rest of its group lost): the torn tail is cut at record 5, records 1..=4 are intact, the
/// report names the segment and the offset of record 5, and new records continue at LSN 5.
#[test]
fn torn_inside_record_header_at_tail_is_cut() {
    let (disk, mut m, recs) = two_groups(4);
    let at = data_rec(&recs, 5).offset;
    let group_end = valid_end(&recs);
    edit(&disk, &seg(1), |b| {
        b[at as usize + 10..group_end as usize].fill(0)
    });
    let cfg = config();
    let (mut j, replay) = open(&disk, &cfg, 0);
    m.assert_replay(&replay, 1..=4);
    assert_eq!(torn_tail(&j), Some((seg(1), at)));
    assert_eq!(j.next_lsn(), Lsn(5));

    m.records.retain(|l, _| *l <= 4);
    m.append_flushed(&mut j, &disk, &[42]);
    let (_, replay) = crash_and_open(&disk, j, &cfg, 0);
    m.assert_replay(&replay, 1..=5);
}

/// Truncated inside a record body at the tail (the second block of record 5 never reached
/// the disk): the torn tail is cut at record 5, records 1..=4 are intact, `torn_tail` names
/// the segment and record 5's offset.
#[test]
fn torn_inside_record_body_at_tail_is_cut() {
    let (disk, m, recs) = two_groups(5);
    let at = data_rec(&recs, 5).offset;
    let next_block = storage::align_up(at as usize + 1);
    let group_end = valid_end(&recs) as usize;
    edit(&disk, &seg(1), |b| b[next_block..group_end].fill(0));
    let (j, replay) = open(&disk, &config(), 0);
    m.assert_replay(&replay, 1..=4);
    assert_eq!(torn_tail(&j), Some((seg(1), at)));
    assert_eq!(j.next_lsn(), Lsn(5));
}

/// A segment file cut short (its length ends inside record 5's body): the log ends at record
/// 5 (a `Truncated` fault), records 1..=4 are intact, and a second recovery, after the tail
/// was sealed, agrees.
#[test]
fn file_truncated_inside_a_record_is_a_torn_tail() {
    let (disk, m, recs) = two_groups(6);
    let at = data_rec(&recs, 5).offset;
    {
        let mut s = disk.storage(DIR);
        let f = s.open(&seg(1), false).expect("open");
        s.truncate(f, at + 100).expect("truncate");
        run_op(&mut s, Op::SyncData { file: f }, 0);
        s.close(f);
    }
    assert_eq!(durable(&disk, &seg(1)).len() as u64, at + 100);
    let cfg = config();
    let (j, replay) = open(&disk, &cfg, 0);
    m.assert_replay(&replay, 1..=4);
    let (file, off, fault) = j.recovery_report().torn_tail.clone().expect("torn tail");
    assert_eq!((file, off, fault.as_str()), (seg(1), at, "Truncated"));
    let (j, replay) = crash_and_open(&disk, j, &cfg, 0);
    m.assert_replay(&replay, 1..=4);
    assert_eq!(j.next_lsn(), Lsn(5));
}

/// Junk after valid records at the tail (three blocks of random bytes where the next group
/// would go): a torn tail at the end of the valid records; all records intact.
#[test]
fn junk_after_valid_records_is_a_torn_tail() {
    let (disk, m, recs) = two_groups(7);
    let end = valid_end(&recs);
    overwrite(&disk, &seg(1), end, &random_bytes(7, 3 * ALIGN));
    let cfg = config();
    let (j, replay) = open(&disk, &cfg, 0);
    m.assert_replay(&replay, 1..=6);
    assert_eq!(torn_tail(&j), Some((seg(1), end)));
    assert!(j.recovery_report().tolerated_corruption.is_none());
    let (j, replay) = crash_and_open(&disk, j, &cfg, 0);
    m.assert_replay(&replay, 1..=6);
    assert_eq!(j.next_lsn(), Lsn(7));
}

/// Zeros after valid records (the preallocated remainder of the segment): the normal end of
/// the log; every record comes back, nothing is corruption, the next LSN follows, and once
/// recovery has sealed the segment a second recovery no longer reports an end inside it.
#[test]
fn zeros_after_valid_records_are_the_normal_end() {
    let (disk, m, recs) = two_groups(8);
    let end = valid_end(&recs);
    let bytes = durable(&disk, &seg(1));
    assert!(
        bytes[end as usize..].iter().all(|&b| b == 0),
        "premise: zeros after the records"
    );
    let cfg = config();
    let (j, replay) = open(&disk, &cfg, 0);
    m.assert_replay(&replay, 1..=6);
    assert_eq!(j.next_lsn(), Lsn(7));
    assert!(j.recovery_report().tolerated_corruption.is_none());
    // If the report names an end of the log at all, it is where the zeros start.
    assert!(
        torn_tail(&j).is_none_or(|t| t == (seg(1), end)),
        "{:?}",
        j.recovery_report()
    );
    let (j, replay) = crash_and_open(&disk, j, &cfg, 0);
    m.assert_replay(&replay, 1..=6);
    assert_ne!(
        torn_tail(&j).map(|t| t.0),
        Some(seg(1)),
        "segment 1 is sealed"
    );
    let (_, recs) = walk(&durable(&disk, &seg(1)), cfg.max_record_bytes);
    let last = recs.last().expect("records");
    assert_eq!(
        (last.kind, last.offset, last.lsn),
        (RecordKind::SegmentEnd, end, 7)
    );
}

// ---- corruption before valid data --------------------------------------------------------------

/// `n` one-record groups, one per 4 KiB block (LSN k at offset 4096·k), crashed.
fn one_record_per_block(seed: u64, n: usize) -> (SimDisk, Model) {
    let disk = sim(seed);
    let cfg = config();
    let (mut j, _) = open(&disk, &cfg, 0);
    let mut m = Model::default();
    m.append_one_per_block(&mut j, &disk, n);
    drop(j);
    disk.crash();
    let (_, recs) = walk(&durable(&disk, &seg(1)), cfg.max_record_bytes);
    for r in recs.iter().filter(|r| r.kind == RecordKind::Data) {
        assert_eq!(
            r.offset,
            r.lsn * ALIGN as u64,
            "premise: one record per block"
        );
    }
    (disk, m)
}

/// Valid records, then one torn 4 KiB block (record 5), then valid records more than the
/// in-flight window later: Strict mode refuses to open with `Corruption` naming the segment
/// and the offset of the bad block, kind `BadRecordBeforeValidData`.
#[test]
fn torn_block_before_data_beyond_window_is_corruption_in_strict_mode() {
    let cfg = config();
    let window_blocks = (cfg.in_flight_window_bytes() / ALIGN as u64) as usize;
    let (disk, _) = one_record_per_block(9, window_blocks + 12);
    let bad = 5 * ALIGN as u64;
    overwrite(&disk, &seg(1), bad, &random_bytes(9, ALIGN));
    match try_open(disk.storage(DIR), &cfg, 0) {
        Err(JournalError::Corruption {
            file, offset, kind, ..
        }) => {
            assert_eq!(
                (file, offset, kind),
                (seg(1), bad, CorruptionKind::BadRecordBeforeValidData)
            );
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("strict mode opened a journal with mid-log corruption"),
    }
    // Refusing changed nothing: the file is as it was and a second attempt refuses again.
    assert!(matches!(
        try_open(disk.storage(DIR), &cfg, 0),
        Err(JournalError::Corruption { .. })
    ));
}

/// The same damage in TolerateCorruption mode: the journal opens, keeps records 1..=4,
/// reports `tolerated_corruption` at the bad block, continues at LSN 5, and the cut holds: a
/// later Strict recovery sees 1..=4 plus the new record and never the old 6.. records.
#[test]
fn torn_block_before_data_beyond_window_is_cut_in_tolerant_mode() {
    let cfg = config();
    let window_blocks = (cfg.in_flight_window_bytes() / ALIGN as u64) as usize;
    let (disk, mut m) = one_record_per_block(10, window_blocks + 12);
    let bad = 5 * ALIGN as u64;
    overwrite(&disk, &seg(1), bad, &random_bytes(10, ALIGN));
    let tolerant = JournalConfig {
        recovery_mode: RecoveryMode::TolerateCorruption,
        ..cfg.clone()
    };
    let (mut j, replay) = open(&disk, &tolerant, 0);
    m.assert_replay(&replay, 1..=4);
    assert_eq!(
        j.recovery_report().tolerated_corruption,
        Some((seg(1), bad))
    );
    assert_eq!(j.next_lsn(), Lsn(5));
    m.records.retain(|l, _| *l <= 4);
    m.append_flushed(&mut j, &disk, &[33]);
    let (_, replay) = crash_and_open(&disk, j, &cfg, 0);
    m.assert_replay(&replay, 1..=5);
}

/// A torn block followed by exactly `max_groups_in_flight` valid groups (what a crash with
/// every in-flight write landing but the first torn can leave): a torn tail, not corruption;
/// the log ends before it and the report counts the groups and records cut off.
#[test]
fn torn_block_followed_by_at_most_the_in_flight_groups_is_a_torn_tail() {
    let cfg = config();
    let in_flight = cfg.max_groups_in_flight;
    let (disk, m) = one_record_per_block(11, 5 + in_flight);
    let bad = 5 * ALIGN as u64;
    overwrite(&disk, &seg(1), bad, &random_bytes(11, ALIGN));
    let (j, replay) = open(&disk, &cfg, 0);
    m.assert_replay(&replay, 1..=4);
    assert_eq!(torn_tail(&j), Some((seg(1), bad)));
    let r = j.recovery_report();
    assert!(r.tolerated_corruption.is_none());
    assert_eq!(
        (r.beyond_cut.groups, r.beyond_cut.records),
        (in_flight as u64, in_flight as u64),
        "{:?}",
        r.beyond_cut
    );
}

/// Opens like [`try_open`], also collecting the records recovery reports lost.
fn try_open_observing(
    disk: &SimDisk,
    config: &JournalConfig,
) -> (Result<Journal<SimStorage>, JournalError>, Replay) {
    let mut lost = Vec::new();
    let result = Journal::open_observing(
        disk.storage(DIR),
        config.clone(),
        Lsn(0),
        &mut |_, _| {},
        &mut |lsn, p| lost.push((lsn.0, p.to_vec())),
    );
    (result, lost)
}

/// Issue 11 §2: 16 bytes flipped inside record 5, followed by one more valid group than can
/// have been in flight, all of it well inside the in-flight window in *bytes* (one small group
/// per block). A crash cannot leave that, so Strict mode refuses, naming the file, the offset
/// of record 5 and what lies after it, and hands every lost record to the caller byte for
/// byte (the bookie names their ledgers). Counting bytes, as before, called it a torn tail and
/// dropped acknowledged records 6.. silently.
#[test]
fn bad_record_followed_by_more_groups_than_in_flight_is_corruption_in_strict_mode() {
    let cfg = config();
    let after = cfg.max_groups_in_flight as u64 + 1;
    let n = 5 + after as usize;
    assert!(
        ((n + 1) * ALIGN) as u64 <= 5 * (ALIGN as u64) + cfg.in_flight_window_bytes(),
        "premise: everything lies inside the byte window"
    );
    let (disk, m) = one_record_per_block(14, n);
    let bad = 5 * ALIGN as u64;
    edit(&disk, &seg(1), |b| {
        for x in &mut b[bad as usize + 40..bad as usize + 56] {
            *x ^= 0xff;
        }
    });
    let (result, lost) = try_open_observing(&disk, &cfg);
    match result {
        Err(JournalError::Corruption {
            file,
            offset,
            kind,
            lost: beyond,
        }) => {
            assert_eq!(
                (file, offset, kind),
                (seg(1), bad, CorruptionKind::BadRecordBeforeValidData)
            );
            assert_eq!(
                (beyond.groups, beyond.records, beyond.lsns),
                (after, after, Some((Lsn(6), Lsn(5 + after))))
            );
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("strict mode cut acknowledged records as a torn tail"),
    }
    m.assert_replay(&lost, 6..=5 + after);
    // The message names file, offset and what follows.
    let (result, _) = try_open_observing(&disk, &cfg);
    let text = result.err().expect("refused again").to_string();
    assert!(
        text.contains(&seg(1)) && text.contains(&format!("offset {bad}")),
        "{text}"
    );
    assert!(text.contains(&format!("LSN 6..={}", 5 + after)), "{text}");
}

/// The same damage in TolerateCorruption mode: the journal opens with records 1..=4, reports
/// the cut and the records it lost, and new records continue at LSN 5 across a later Strict
/// recovery.
#[test]
fn bad_record_followed_by_more_groups_than_in_flight_is_cut_in_tolerant_mode() {
    let cfg = config();
    let after = cfg.max_groups_in_flight as u64 + 1;
    let (disk, mut m) = one_record_per_block(15, 5 + after as usize);
    let bad = 5 * ALIGN as u64;
    edit(&disk, &seg(1), |b| {
        for x in &mut b[bad as usize + 40..bad as usize + 56] {
            *x ^= 0xff;
        }
    });
    let tolerant = JournalConfig {
        recovery_mode: RecoveryMode::TolerateCorruption,
        ..cfg.clone()
    };
    let (result, lost) = try_open_observing(&disk, &tolerant);
    let mut j = result.expect("tolerant open");
    m.assert_replay(&lost, 6..=5 + after);
    let r = j.recovery_report();
    assert_eq!(r.tolerated_corruption, Some((seg(1), bad)));
    assert_eq!(r.beyond_cut.records, after);
    assert_eq!(j.next_lsn(), Lsn(5));
    m.records.retain(|l, _| *l <= 4);
    m.append_flushed(&mut j, &disk, &[33]);
    let (j, replay) = crash_and_open(&disk, j, &cfg, 0);
    m.assert_replay(&replay, 1..=5);
    assert!(j.recovery_report().tolerated_corruption.is_none());
}

/// Damage to the very last group (a flipped byte in the newest record, nothing after it) stays
/// a torn tail in Strict mode: it is indistinguishable from a crash tearing the last write.
#[test]
fn damage_to_the_last_group_is_a_torn_tail() {
    let cfg = config();
    let (disk, m) = one_record_per_block(16, 30);
    let last = 30 * ALIGN as u64;
    edit(&disk, &seg(1), |b| b[last as usize + 40] ^= 1);
    let (j, replay) = open(&disk, &cfg, 0);
    m.assert_replay(&replay, 1..=29);
    assert_eq!(torn_tail(&j), Some((seg(1), last)));
    assert_eq!(
        j.recovery_report().beyond_cut,
        journal::BeyondCut::default()
    );
}

/// Records whose size fills a block exactly (payload 4064 → 4096 bytes) still end their group
/// with a padding record (a whole block), so every group is counted: a bad record followed by
/// more such groups than can be in flight is corruption, not a torn tail.
#[test]
fn groups_of_whole_blocks_end_with_padding_and_are_counted() {
    let disk = sim(17);
    let cfg = config();
    let (mut j, _) = open(&disk, &cfg, 0);
    let mut m = Model::default();
    for _ in 0..8 {
        m.append_flushed(&mut j, &disk, &[4064]);
    }
    drop(j);
    disk.crash();
    let (_, recs) = walk(&durable(&disk, &seg(1)), cfg.max_record_bytes);
    let kinds: Vec<RecordKind> = recs.iter().take(4).map(|r| r.kind).collect();
    assert_eq!(
        kinds,
        [
            RecordKind::Data,
            RecordKind::Padding,
            RecordKind::Data,
            RecordKind::Padding
        ],
        "every group ends with padding: {recs:?}"
    );
    let bad = data_rec(&recs, 3).offset;
    edit(&disk, &seg(1), |b| b[bad as usize + 100] ^= 1);
    match try_open(disk.storage(DIR), &cfg, 0) {
        Err(JournalError::Corruption {
            offset, kind, lost, ..
        }) => {
            assert_eq!(
                (offset, kind),
                (bad, CorruptionKind::BadRecordBeforeValidData)
            );
            // The damaged group's own padding ends validly too: six group ends, five records.
            assert_eq!((lost.groups, lost.records), (6, 5));
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("whole-block groups were not counted"),
    }
}

// ---- stale records -------------------------------------------------------------------------

/// A stale record at the tail that carries the *current* segment id and the next LSN but was
/// sealed under an older generation, and a record of another segment id (a block copied from
/// another file), both also placed beyond the in-flight window: neither parses as current, so
/// nothing extra is replayed and Strict mode sees a plain torn tail, not corruption.
#[test]
fn stale_records_of_another_generation_or_segment_never_parse_as_current() {
    let (disk, m, recs) = two_groups(12);
    let cfg = config();
    let bytes = durable(&disk, &seg(1));
    let (header, _) = walk(&bytes, cfg.max_record_bytes);
    let end = valid_end(&recs);
    let stale = |h: SegmentHeader| {
        let mut block = vec![0u8; ALIGN];
        encode_record(
            &mut block,
            RecordKind::Data,
            Lsn(7),
            &h,
            h.crc_seed(),
            &payload(7, 64),
        );
        block
    };
    let old_generation = stale(SegmentHeader {
        generation: header.generation.wrapping_sub(1),
        ..header
    });
    let other_segment = stale(SegmentHeader {
        id: SegmentId(header.id.0 + 1),
        ..header
    });
    // Sanity: each block is a valid record under its own header, so only the binding rejects it.
    let beyond = storage::align_up((end + cfg.in_flight_window_bytes()) as usize) as u64;
    overwrite(&disk, &seg(1), end, &old_generation);
    overwrite(&disk, &seg(1), end + ALIGN as u64, &other_segment);
    overwrite(&disk, &seg(1), beyond, &old_generation);
    overwrite(&disk, &seg(1), beyond + ALIGN as u64, &other_segment);
    let (j, replay) = open(&disk, &cfg, 0);
    m.assert_replay(&replay, 1..=6);
    assert_eq!(j.next_lsn(), Lsn(7));
    assert_eq!(torn_tail(&j), Some((seg(1), end)));
    assert!(j.recovery_report().tolerated_corruption.is_none());
}

/// A recycled segment file (trimmed, then reused under a new id and generation) still holds
/// the old life's records after the new tail: they never parse as current, recovery ends at
/// the new tail, and every record replayed is one appended in this life.
#[test]
fn stale_records_in_a_recycled_segment_are_not_replayed() {
    let disk = sim(13);
    let cfg = small_segments();
    let (mut j, _) = open(&disk, &cfg, 0);
    let mut m = Model::default();
    let mark = m.append_until_recycled(&mut j, &disk);
    // Flushed, then a crash.
    j.flush().expect("flush");
    let acked = j.durable_lsn().0;
    drop(j);
    disk.crash();
    // Premise: some live segment is a recycled file with foreign records after its valid end.
    let mut stale_seen = false;
    for name in disk.durable_names(DIR) {
        if !name.ends_with(".jrnl") {
            continue;
        }
        let bytes = durable(&disk, &name);
        let (header, recs) = walk(&bytes, cfg.max_record_bytes);
        if recs
            .last()
            .is_some_and(|r| r.kind == RecordKind::SegmentEnd)
        {
            continue;
        }
        let end = valid_end(&recs) as usize;
        let segment_field = u64::from_le_bytes(bytes[end + 24..end + 32].try_into().unwrap());
        if segment_field != 0 && segment_field != header.id.0 {
            stale_seen = true;
        }
    }
    assert!(stale_seen, "premise: an old life's records follow the tail");
    let (j, replay) = open(&disk, &cfg, mark);
    let first = replay.first().expect("records").0;
    assert!(first <= mark.max(1));
    for (i, (lsn, p)) in replay.iter().enumerate() {
        assert_eq!(*lsn, first + i as u64, "contiguous");
        assert_eq!(
            Some(p),
            m.records.get(lsn),
            "record {lsn} is from this life"
        );
    }
    assert_eq!(
        replay.last().unwrap().0,
        acked,
        "ends at the acknowledged end"
    );
    assert_eq!(j.next_lsn(), Lsn(acked + 1));
}

/// Issue 11 §5: a clean stop (`Journal::close`) over a recycled segment, whose earlier life's
/// records follow the last group, seals that segment: the next open finds a complete log,
/// reports no torn tail and replays everything. Before, the stop only flushed, and the next
/// start warned of a torn tail (`WrongSegment`) at the earlier life's first record.
#[test]
fn clean_close_leaves_nothing_to_repair() {
    let disk = sim(18);
    let cfg = small_segments();
    let (mut j, _) = open(&disk, &cfg, 0);
    let mut m = Model::default();
    let mark = m.append_until_recycled(&mut j, &disk);
    j.close().expect("close");
    let end = j.durable_lsn().0;
    assert_eq!(end, j.next_lsn().0 - 1, "close makes everything durable");
    // Every segment holding records ends with its SegmentEnd.
    for name in disk.durable_names(DIR) {
        if !name.ends_with(".jrnl") {
            continue;
        }
        let (_, recs) = walk(&durable(&disk, &name), cfg.max_record_bytes);
        if recs.iter().any(|r| r.kind == RecordKind::Data) {
            assert_eq!(
                recs.last().map(|r| r.kind),
                Some(RecordKind::SegmentEnd),
                "{name} is sealed"
            );
        }
    }
    let (j, replay) = crash_and_open(&disk, j, &cfg, mark);
    let r = j.recovery_report();
    assert!(
        r.torn_tail.is_none() && r.tolerated_corruption.is_none(),
        "{r:?}"
    );
    assert_eq!(replay.last().map(|(l, _)| *l), Some(end));
    for (lsn, p) in &replay {
        assert_eq!(Some(p), m.records.get(lsn), "record {lsn}");
    }
    assert_eq!(j.next_lsn(), Lsn(end + 1));
}

// ---- segments ------------------------------------------------------------------------------

/// Records that spill into a second segment; returns the disk (crashed) and the model, and
/// the LSN of the first record of segment 2.
fn two_segments(seed: u64) -> (SimDisk, Model, u64) {
    let disk = sim(seed);
    let cfg = small_segments();
    let (mut j, _) = open(&disk, &cfg, 0);
    let mut m = Model::default();
    while !disk.volatile_names(DIR).contains(&seg(2))
        || walk(&durable(&disk, &seg(2)), cfg.max_record_bytes)
            .1
            .is_empty()
    {
        m.append_flushed(&mut j, &disk, &[2500, 100]);
    }
    drop(j);
    disk.crash();
    let (_, recs2) = walk(&durable(&disk, &seg(2)), cfg.max_record_bytes);
    let first2 = recs2
        .iter()
        .find(|r| r.kind == RecordKind::Data)
        .expect("data in segment 2")
        .lsn;
    (disk, m, first2)
}

/// An unsealed segment followed by a later segment with records (segment 1's end record
/// wiped): Strict mode refuses with `UnsealedSegmentBeforeLaterData` at the offset of the
/// missing end record; TolerateCorruption keeps segment 1's records and sets segment 2 aside
/// as `*.corrupt`.
#[test]
fn unsealed_segment_before_later_data_is_corruption() {
    let (disk, m, first2) = two_segments(14);
    let cfg = small_segments();
    let (_, recs) = walk(&durable(&disk, &seg(1)), cfg.max_record_bytes);
    let seal = *recs.last().expect("records");
    assert_eq!(
        seal.kind,
        RecordKind::SegmentEnd,
        "premise: segment 1 is sealed"
    );
    assert_eq!(seal.offset % ALIGN as u64, 0);
    overwrite(&disk, &seg(1), seal.offset, &[0u8; ALIGN]);
    match try_open(disk.storage(DIR), &cfg, 0) {
        Err(JournalError::Corruption {
            file, offset, kind, ..
        }) => assert_eq!(
            (file, offset, kind),
            (
                seg(1),
                seal.offset,
                CorruptionKind::UnsealedSegmentBeforeLaterData
            )
        ),
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("opened with an unsealed segment before later data"),
    }
    let tolerant = JournalConfig {
        recovery_mode: RecoveryMode::TolerateCorruption,
        ..cfg
    };
    let (j, replay) = open(&disk, &tolerant, 0);
    m.assert_replay(&replay, 1..=first2 - 1);
    assert_eq!(
        j.recovery_report().tolerated_corruption,
        Some((seg(1), seal.offset))
    );
    assert_eq!(j.next_lsn(), Lsn(first2));
    let names = disk.durable_names(DIR);
    assert!(
        names.contains(&format!("{}.corrupt", seg(2))),
        "segment 2 set aside: {names:?}"
    );
}

/// Recovery twice in a row (no crash, then after a crash) gives the same replay and the same
/// next LSN; appending after recovery continues the LSN sequence, and those records survive
/// another crash together with the recovered ones.
#[test]
fn recovery_is_idempotent_and_appending_after_it_continues_the_sequence() {
    let (disk, mut m, _) = two_segments(15);
    let cfg = small_segments();
    let (j, first) = open(&disk, &cfg, 0);
    let next = j.next_lsn();
    assert_eq!(next, Lsn(first.len() as u64 + 1));
    m.assert_replay(&first, 1..=first.len() as u64);
    drop(j);
    let (j, second) = open(&disk, &cfg, 0);
    assert_eq!(second, first, "second recovery, no crash in between");
    assert_eq!(j.next_lsn(), next);
    let (mut j, third) = crash_and_open(&disk, j, &cfg, 0);
    assert_eq!(third, first, "third recovery, after a crash");
    assert_eq!(j.next_lsn(), next);

    let new: Vec<u64> = (0..5).map(|i| m.append(&mut j, &disk, 700 * i)).collect();
    assert_eq!(new, (next.0..next.0 + 5).collect::<Vec<_>>());
    j.flush().expect("flush");
    let (j, replay) = crash_and_open(&disk, j, &cfg, 0);
    m.assert_replay(&replay, 1..=next.0 + 4);
    assert_eq!(j.next_lsn(), Lsn(next.0 + 5));
}

/// `replay_from` (the checkpoint mark) skips older records: only records at or after the mark
/// are visited, all are still scanned, and the next LSN is unchanged.
#[test]
fn replay_from_skips_records_before_the_mark() {
    let (disk, m, _) = two_segments(16);
    let cfg = small_segments();
    let total = m.records.len() as u64;
    let (j, replay) = open(&disk, &cfg, 11);
    m.assert_replay(&replay, 11..=total);
    assert_eq!(j.recovery_report().records_seen, total);
    assert_eq!(j.recovery_report().records_replayed, total - 10);
    assert_eq!(j.next_lsn(), Lsn(total + 1));
}

/// A checkpoint mark beyond the end of the log (e.g. after TolerateCorruption cut records that
/// the entry log already holds): new records continue at the mark, so their LSNs are never
/// reused, and the journal still opens after the next restart with those records in it.
#[test]
fn mark_beyond_the_log_end_continues_at_the_mark_across_restarts() {
    let (disk, mut m, _) = two_segments(17);
    let cfg = small_segments();
    let total = m.records.len() as u64;
    let mark = total + 10;
    let (mut j, replay) = open(&disk, &cfg, mark);
    assert!(replay.is_empty());
    assert_eq!(
        j.next_lsn(),
        Lsn(mark),
        "LSNs below the mark are never reused"
    );
    let lsn = m.append(&mut j, &disk, 99);
    assert_eq!(lsn, mark);
    j.flush().expect("flush");
    drop(j);
    disk.crash();
    let (j, replay) = try_open(disk.storage(DIR), &cfg, mark)
        .unwrap_or_else(|e| panic!("reopen after a mark beyond the log end failed: {e}"));
    m.assert_replay(&replay, mark..=mark);
    assert_eq!(j.next_lsn(), Lsn(mark + 1));
}

/// Idle restarts after a checkpoint that trimmed everything (restart; checkpoint at the next
/// LSN and trim every segment; restart with no new record; append; restart): the sequence
/// continues at the mark and every restart opens with every record after the mark.
#[test]
fn idle_restart_after_trimming_everything_keeps_the_sequence() {
    let (disk, mut m, _) = two_segments(22);
    let cfg = small_segments();
    let (mut j, _) = open(&disk, &cfg, 0);
    let mark = j.next_lsn().0;
    assert!(
        j.trim(Lsn(mark)).expect("trim") >= 2,
        "every sealed segment trimmed"
    );
    // Restart with no record appended: only the empty active segment is left.
    let (j, replay) = crash_and_open(&disk, j, &cfg, mark);
    assert!(replay.is_empty());
    assert_eq!(j.next_lsn(), Lsn(mark));
    let (mut j, _) = crash_and_open(&disk, j, &cfg, mark);
    assert_eq!(j.next_lsn(), Lsn(mark));
    m.append_flushed(&mut j, &disk, &[10, 20, 30]);
    drop(j);
    disk.crash();
    let (j, replay) = try_open(disk.storage(DIR), &cfg, mark)
        .unwrap_or_else(|e| panic!("restart after an idle restart and a trim failed: {e}"));
    m.assert_replay(&replay, mark..=mark + 2);
    assert_eq!(j.next_lsn(), Lsn(mark + 3));
}

/// `trim(mark)` removes or recycles the segments whose records all precede the mark (at most
/// `max_free_segments` kept as `*.free`), durably; after more appends (which reuse the free
/// files) and a crash, a replay from LSN 1 never shows a trimmed record, and a replay from
/// the mark is exactly the records from the mark on.
#[test]
fn trim_removes_old_segments_and_they_never_reappear() {
    let disk = sim(18);
    let cfg = small_segments();
    let (mut j, _) = open(&disk, &cfg, 0);
    let mut m = Model::default();
    for _ in 0..120 {
        m.append(&mut j, &disk, 1200);
    }
    j.flush().expect("flush");
    // Which segment holds which LSNs, before trimming.
    let mut last_of: Vec<(String, u64, bool)> = Vec::new();
    for name in disk.volatile_names(DIR) {
        if let Some(bytes) = name
            .ends_with(".jrnl")
            .then(|| disk.volatile_file(DIR, &name))
            .flatten()
        {
            let (_, recs) = walk(&bytes, cfg.max_record_bytes);
            let sealed = recs
                .last()
                .is_some_and(|r| r.kind == RecordKind::SegmentEnd);
            let last = recs
                .iter()
                .filter(|r| r.kind == RecordKind::Data)
                .map(|r| r.lsn)
                .max();
            if let Some(last) = last {
                last_of.push((name, last, sealed));
            }
        }
    }
    assert!(last_of.len() >= 4, "premise: several segments: {last_of:?}");
    let mark = 80;
    let trimmed: Vec<&(String, u64, bool)> =
        last_of.iter().filter(|(_, l, s)| *l < mark && *s).collect();
    let newest_trimmed = trimmed
        .iter()
        .map(|t| t.1)
        .max()
        .expect("something to trim");
    let n = j.trim(Lsn(mark)).expect("trim");
    assert_eq!(n, trimmed.len());
    // A trim does not sync the directory (the next segment preparation does): the trimmed
    // names are gone from the directory at once, durably later.
    let names = disk.volatile_names(DIR);
    for (name, _, _) in &trimmed {
        assert!(
            !names.contains(name),
            "{name} still live after trim: {names:?}"
        );
    }
    let free = names.iter().filter(|n| n.ends_with(".free")).count();
    assert!(
        free <= cfg.max_free_segments,
        "free pool bounded: {names:?}"
    );

    // More records: the free files are reused.
    let recycled_before = j.stats().segments_recycled;
    for _ in 0..80 {
        m.append(&mut j, &disk, 1200);
    }
    j.flush().expect("flush");
    assert!(
        j.stats().segments_recycled > recycled_before,
        "free files reused"
    );
    let end = j.durable_lsn().0;
    let (j, replay) = crash_and_open(&disk, j, &cfg, 1);
    let first = replay.first().expect("records").0;
    assert!(
        first > newest_trimmed && first <= mark,
        "replay from 1 starts at {first}: trimmed records (up to {newest_trimmed}) are gone"
    );
    m.assert_replay(&replay, first..=end);
    drop(j);
    let (_, replay) = open(&disk, &cfg, mark);
    m.assert_replay(&replay, mark..=end);
}

// ---- I/O failures ----------------------------------------------------------------------------

/// Runs appends, ticks and waits until the journal stops (at most `steps`), asserting that the
/// durable LSN never moves past `acked`. Returns the error the journal stopped with.
fn drive_until_stopped(
    j: &mut Journal<SimStorage>,
    disk: &SimDisk,
    m: &mut Model,
    acked: u64,
    steps: usize,
) -> Option<IoError> {
    for step in 0..steps {
        let lsn = j.next_lsn().0;
        let p = payload(lsn, 100 + step % 900);
        match j.append(&p, disk.now_us()) {
            Ok(got) => {
                assert_eq!(got.0, lsn);
                m.records.insert(lsn, p);
            }
            Err(AppendError::Backpressure) => {}
            Err(AppendError::Stopped(e)) => return Some(e),
            Err(e) => panic!("unexpected append error {e}"),
        }
        let _ = j.tick(disk.now_us(), step % 3 == 0);
        let _ = j.wait(Some(300));
        assert_eq!(j.durable_lsn().0, acked, "nothing becomes durable");
    }
    None
}

/// fsync failure (every sync fails, fsyncgate on: the failed sync drops the writes it covered
/// and later syncs lie): after the first failed sync, `append` returns `Stopped(EIO)`, the
/// durable LSN never moves again (also when syncs "succeed" afterwards), and after a crash
/// every record acknowledged before the failure is recovered.
#[test]
fn failed_fsync_stops_the_journal_and_acknowledged_records_survive() {
    let disk = sim(19);
    let cfg = config();
    let (mut j, _) = open(&disk, &cfg, 0);
    let mut m = Model::default();
    m.append_flushed(&mut j, &disk, &[100; 20]);
    let acked = j.durable_lsn().0;
    assert_eq!(acked, 20);
    disk.set_faults(FaultConfig::none().with_sync_eio(1.0).with_fsyncgate(true));
    let err = drive_until_stopped(&mut j, &disk, &mut m, acked, 2_000);
    assert_eq!(
        err,
        Some(IoError::EIO),
        "the journal stopped on the failed sync"
    );
    assert_eq!(j.stopped(), Some(IoError::EIO));
    assert!(disk.stats().sync_eio > 0);

    // Syncs now claim success (fsyncgate): the journal must not resume.
    disk.set_faults(FaultConfig::none().with_fsyncgate(true));
    for _ in 0..50 {
        assert_eq!(
            j.append(b"after", disk.now_us()),
            Err(AppendError::Stopped(IoError::EIO))
        );
        assert!(matches!(
            j.tick(disk.now_us(), true),
            Err(JournalError::Stopped(_))
        ));
        let _ = j.wait(Some(500));
        assert_eq!(j.durable_lsn().0, acked, "durable LSN frozen");
    }
    assert!(j.flush().is_err());
    drop(j);
    disk.crash();
    disk.set_faults(FaultConfig::none());
    let (j, replay) = open(&disk, &cfg, 0);
    m.assert_recovered(&replay, acked, j.next_lsn());
}

/// A failed write (EIO at a low rate, other operations in flight, syncs succeeding): from
/// the moment the journal reports itself stopped, the durable LSN never moves, even when a
/// sync that was in flight completes successfully; after a crash every acknowledged record is
/// recovered.
#[test]
fn failed_write_freezes_the_durable_lsn_even_with_a_sync_in_flight() {
    let mut stops = 0;
    for seed in 0..24 {
        let disk = sim(100 + seed);
        let cfg = config();
        let (mut j, _) = open(&disk, &cfg, 0);
        let mut m = Model::default();
        m.append_flushed(&mut j, &disk, &[100; 5]);
        disk.set_faults(FaultConfig::none().with_write_eio(0.05));
        let mut rng = SimRng::new(seed);
        let mut frozen: Option<u64> = None;
        for step in 0..3_000 {
            let lsn = j.next_lsn().0;
            let p = payload(lsn, rng.below(3000) as usize);
            if let Ok(got) = j.append(&p, disk.now_us()) {
                m.records.insert(got.0, p);
            }
            let _ = j.tick(disk.now_us(), rng.chance(0.5));
            if rng.chance(0.5) {
                let _ = j.wait(Some(rng.range(10, 300)));
            }
            match (frozen, j.stopped()) {
                (None, Some(_)) => frozen = Some(j.durable_lsn().0),
                (Some(d), _) => assert_eq!(j.durable_lsn().0, d, "seed {seed}: moved after stop"),
                (None, None) => {}
            }
            if frozen.is_some() && step > 0 && j.storage().in_flight() == 0 {
                break;
            }
        }
        let Some(acked) = frozen else { continue };
        stops += 1;
        disk.set_faults(FaultConfig::none());
        // Drain whatever was in flight at the stop: completions arrive, nothing is acknowledged.
        for _ in 0..20 {
            let _ = j.wait(Some(1_000));
            assert_eq!(j.durable_lsn().0, acked, "seed {seed}: moved after stop");
        }
        drop(j);
        disk.crash();
        let (j, replay) = open(&disk, &cfg, 0);
        m.assert_recovered(&replay, acked, j.next_lsn());
    }
    assert!(stops >= 20, "only {stops} of 24 runs hit a write failure");
}

/// ENOSPC on every write: the journal stops with `Stopped(ENOSPC)` (never panics), nothing
/// more becomes durable, acknowledged records survive a crash; and a journal that cannot even
/// prepare its first segment fails to open with an I/O error naming ENOSPC.
#[test]
fn enospc_stops_the_journal_without_panicking() {
    let disk = sim(20);
    let cfg = config();
    let (mut j, _) = open(&disk, &cfg, 0);
    let mut m = Model::default();
    m.append_flushed(&mut j, &disk, &[500; 10]);
    let acked = j.durable_lsn().0;
    disk.set_faults(FaultConfig::none().with_enospc(1.0));
    let err = drive_until_stopped(&mut j, &disk, &mut m, acked, 2_000);
    assert_eq!(err, Some(IoError::ENOSPC));
    assert!(err.is_some_and(|e| e.is_no_space()));
    assert_eq!(
        j.append(b"x", disk.now_us()),
        Err(AppendError::Stopped(IoError::ENOSPC))
    );
    assert!(matches!(j.flush(), Err(JournalError::Stopped(e)) if e == IoError::ENOSPC));
    drop(j);
    disk.crash();
    disk.set_faults(FaultConfig::none());
    let (j, replay) = open(&disk, &cfg, 0);
    m.assert_recovered(&replay, acked, j.next_lsn());

    let fresh = sim(21);
    fresh.set_faults(FaultConfig::none().with_enospc(1.0));
    match try_open(fresh.storage(DIR), &cfg, 0) {
        Err(JournalError::Io { error, .. }) => assert_eq!(error, IoError::ENOSPC),
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("opened without space for a segment"),
    }
}

// ---- crashes at chosen points ------------------------------------------------------------------

/// A storage call, as the tripwire sees it before it happens.
#[derive(Debug)]
enum Call<'a> {
    Open {
        name: &'a str,
        create: bool,
    },
    Rename {
        from: &'a str,
        to: &'a str,
    },
    SyncDir,
    /// A data write; `seal` when the block starts with a `SegmentEnd` record.
    Write {
        file: FileId,
        offset: u64,
        seal: bool,
    },
    Sync {
        file: FileId,
    },
}

/// When the power fails, relative to the call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum When {
    No,
    /// The call never happens.
    Before,
    /// The call happens (a submitted op is in flight), then the power fails.
    After,
}

type Trip = Box<dyn FnMut(&Call) -> When>;

/// A `SimStorage` that crashes the disk at the first call `trip` picks. After the crash every
/// call fails (the handle is dead), as a real power loss would leave the process.
struct Tripwire {
    inner: SimStorage,
    trip: Trip,
    tripped: Rc<Cell<bool>>,
}

impl Tripwire {
    fn around<T>(&mut self, call: Call, f: impl FnOnce(&mut SimStorage) -> T) -> T {
        let when = if self.tripped.get() {
            When::No
        } else {
            (self.trip)(&call)
        };
        if when == When::Before {
            self.pull_plug();
        }
        let result = f(&mut self.inner);
        if when == When::After {
            self.pull_plug();
        }
        result
    }

    fn pull_plug(&mut self) {
        self.tripped.set(true);
        self.inner.disk().crash();
    }
}

impl Storage for Tripwire {
    fn kind(&self) -> DriverKind {
        self.inner.kind()
    }
    fn list(&mut self) -> Result<Vec<String>, IoError> {
        self.inner.list()
    }
    fn open(&mut self, name: &str, create: bool) -> Result<FileId, IoError> {
        self.around(Call::Open { name, create }, |s| s.open(name, create))
    }
    fn close(&mut self, file: FileId) {
        self.inner.close(file)
    }
    fn file_len(&mut self, file: FileId) -> Result<u64, IoError> {
        self.inner.file_len(file)
    }
    fn allocate(&mut self, file: FileId, offset: u64, len: u64) -> Result<(), IoError> {
        self.inner.allocate(file, offset, len)
    }
    fn truncate(&mut self, file: FileId, len: u64) -> Result<(), IoError> {
        self.inner.truncate(file, len)
    }
    fn rename(&mut self, from: &str, to: &str) -> Result<(), IoError> {
        self.around(Call::Rename { from, to }, |s| s.rename(from, to))
    }
    fn remove(&mut self, name: &str) -> Result<(), IoError> {
        self.inner.remove(name)
    }
    fn sync_dir(&mut self) -> Result<(), IoError> {
        self.around(Call::SyncDir, |s| s.sync_dir())
    }
    fn submit(&mut self, token: u64, op: Op) -> Result<(), (IoError, Option<AlignedBuf>)> {
        let call = match &op {
            Op::Write { file, offset, buf } => Call::Write {
                file: *file,
                offset: *offset,
                seal: buf.len() == ALIGN && buf[6] == RecordKind::SegmentEnd as u8,
            },
            Op::SyncData { file } => Call::Sync { file: *file },
            Op::SyncDir => Call::SyncDir,
            Op::Read { .. } => return self.inner.submit(token, op),
        };
        self.around(call, |s| s.submit(token, op))
    }
    fn poll(&mut self, out: &mut Vec<Completion>, wait: Wait) -> Result<(), IoError> {
        self.inner.poll(out, wait)
    }
    fn in_flight(&self) -> usize {
        self.inner.in_flight()
    }
}

/// Runs a workload (mixed sizes, ticks, waits, and trims when `trim` is set) on a fresh disk
/// with 512-byte sectors until `trip` pulls the plug, then recovers and checks that every
/// acknowledged record is back byte for byte, nothing foreign appears, and a second recovery
/// after another crash agrees.
fn crash_at(name: &str, seed: u64, trim: bool, trip: Trip) {
    let disk = SimDisk::new(
        SimConfig::new(seed)
            .with_sector_size(512)
            .with_latency_us(5, 300),
    );
    let cfg = JournalConfig {
        max_free_segments: 1,
        ..small_segments()
    };
    let tripped = Rc::new(Cell::new(false));
    let storage = Tripwire {
        inner: disk.storage(DIR),
        trip,
        tripped: tripped.clone(),
    };
    let (mut j, _) = try_open(storage, &cfg, 0).expect("open");
    assert!(!tripped.get(), "{name}: tripped during open");
    let mut rng = SimRng::new(seed).fork("workload");
    let mut m = Model::default();
    let mut acked = 0;
    for _ in 0..5_000 {
        if tripped.get() {
            break;
        }
        let now = disk.now_us();
        match rng.below(10) {
            0..=6 => {
                let lsn = j.next_lsn().0;
                let p = payload(lsn, rng.below(3000) as usize);
                match j.append(&p, now) {
                    Ok(got) => {
                        assert_eq!(got.0, lsn);
                        m.records.insert(lsn, p);
                    }
                    Err(AppendError::Backpressure) | Err(AppendError::Stopped(_)) => {}
                    Err(e) => panic!("{name}: {e}"),
                }
                let _ = j.tick(now, rng.chance(0.5));
            }
            7 | 8 => {
                let _ = j.wait(Some(rng.range(10, 500)));
                let _ = j.tick(disk.now_us(), true);
            }
            _ => {
                if trim && acked > 10 {
                    let _ = j.trim(Lsn(acked - 10));
                }
            }
        }
        acked = j.durable_lsn().0;
    }
    assert!(
        tripped.get(),
        "{name} (seed {seed}): the crash point was never reached"
    );
    // After the power failed nothing can become durable.
    let _ = j.wait(Some(1_000));
    assert_eq!(j.durable_lsn().0, acked);
    drop(j);
    let from = if trim { acked.saturating_sub(10) } else { 0 };
    let (j, replay) = open(&disk, &cfg, from);
    let first = replay.first().map_or(j.next_lsn().0, |r| r.0);
    assert!(
        first <= from.max(1),
        "{name} (seed {seed}): replay starts late at {first}"
    );
    for (i, (lsn, p)) in replay.iter().enumerate() {
        assert_eq!(*lsn, first + i as u64, "{name} (seed {seed}): contiguous");
        assert_eq!(
            Some(p),
            m.records.get(lsn),
            "{name} (seed {seed}): record {lsn} differs"
        );
    }
    let end = j.next_lsn().0 - 1;
    assert!(
        end >= acked,
        "{name} (seed {seed}): acknowledged {acked}, recovered up to {end}"
    );
    let (_, again) = crash_and_open(&disk, j, &cfg, from);
    assert_eq!(
        again, replay,
        "{name} (seed {seed}): second recovery differs"
    );
}

const SEEDS: std::ops::Range<u64> = 0..8;

/// Crash during rotation, with the seal block's write in flight (lost, applied or torn at the
/// crash): all acknowledged records are recovered.
#[test]
fn crash_during_rotation_with_the_seal_in_flight() {
    for seed in SEEDS {
        let mut seals = 0;
        crash_at(
            "seal in flight",
            seed,
            false,
            Box::new(move |c| match c {
                Call::Write { seal: true, .. } => {
                    seals += 1;
                    if seals == 2 {
                        When::After
                    } else {
                        When::No
                    }
                }
                _ => When::No,
            }),
        );
    }
}

/// Crash during rotation, the seal written but not synced (the crash comes as the sync of the
/// sealed segment is about to be submitted; the next segment is already prepared): all
/// acknowledged records are recovered.
#[test]
fn crash_during_rotation_with_the_seal_written_but_not_synced() {
    for seed in SEEDS {
        let mut seal_file = None;
        crash_at(
            "seal not synced",
            seed,
            false,
            Box::new(move |c| match *c {
                Call::Write {
                    seal: true, file, ..
                } => {
                    seal_file = Some(file);
                    When::No
                }
                Call::Sync { file } if seal_file == Some(file) => When::Before,
                _ => When::No,
            }),
        );
    }
}

/// Crash during rotation, right after the first write into the next segment was submitted:
/// all acknowledged records are recovered.
#[test]
fn crash_during_rotation_at_the_first_write_of_the_next_segment() {
    for seed in SEEDS {
        let mut sealed = false;
        crash_at(
            "first write of the next segment",
            seed,
            false,
            Box::new(move |c| match *c {
                Call::Write { seal: true, .. } => {
                    sealed = true;
                    When::No
                }
                Call::Write { offset, .. } if sealed && offset == ALIGN as u64 => When::After,
                _ => When::No,
            }),
        );
    }
}

/// Crash between a segment file's creation and the directory sync (the third segment file is
/// created while records are acknowledged in the first two): the creation may vanish; all
/// acknowledged records are recovered.
#[test]
fn crash_between_segment_create_and_directory_sync() {
    for seed in SEEDS {
        let mut creates = 0;
        crash_at(
            "after create",
            seed,
            false,
            Box::new(move |c| match c {
                Call::Open { create: true, .. } => {
                    creates += 1;
                    if creates == 3 {
                        When::After
                    } else {
                        When::No
                    }
                }
                _ => When::No,
            }),
        );
    }
}

/// Crash between the rename that puts a prepared segment into the log and the directory sync
/// (the rename may vanish): all acknowledged records are recovered.
#[test]
fn crash_between_segment_rename_and_directory_sync() {
    for seed in SEEDS {
        let mut renames = 0;
        crash_at(
            "after rename",
            seed,
            false,
            Box::new(move |c| match c {
                Call::Rename { from, to } if from.ends_with(".free") && to.ends_with(".jrnl") => {
                    renames += 1;
                    if renames == 3 {
                        When::After
                    } else {
                        When::No
                    }
                }
                _ => When::No,
            }),
        );
    }
}

/// Crash while a trimmed file is recycled into a new segment (its new header write in
/// flight), with trims running: all acknowledged records from the mark on are recovered.
#[test]
fn crash_while_recycling_a_free_segment() {
    for seed in SEEDS {
        let mut recycled_file = None;
        crash_at(
            "recycling",
            seed,
            true,
            Box::new(move |c| match *c {
                Call::Open {
                    create: false,
                    name,
                } if name.ends_with(".free") => {
                    recycled_file = Some(());
                    When::No
                }
                Call::Write { offset: 0, .. } if recycled_file.is_some() => When::After,
                _ => When::No,
            }),
        );
    }
}

/// Issue 11 §4: an open that fails for lack of space (every write gets ENOSPC) while
/// preallocating free segments, or while preparing its first segment, removes the files it
/// created: a full disk is not left full of a failed start's `.free` files.
#[test]
fn failed_open_removes_the_files_it_created() {
    for preallocate_segments in [0, 2] {
        let disk = sim(19);
        disk.set_faults(FaultConfig::none().with_enospc(1.0));
        let cfg = JournalConfig {
            preallocate_segments,
            ..config()
        };
        match try_open(disk.storage(DIR), &cfg, 0) {
            Err(JournalError::Io { error, .. }) => assert!(error.is_no_space(), "{error}"),
            Err(e) => panic!("wrong error: {e}"),
            Ok(_) => panic!("opened on a disk without space"),
        }
        assert_eq!(
            disk.volatile_names(DIR),
            Vec::<String>::new(),
            "files left behind (preallocate_segments {preallocate_segments})"
        );
    }
}

/// Backpressure says why: appends without letting the journal write (no tick, no wait) fill
/// every group buffer, and the refusals are counted as such, not as a missing segment.
#[test]
fn refused_appends_are_counted_by_cause() {
    let disk = sim(23);
    let cfg = config();
    let (mut j, _) = open(&disk, &cfg, 0);
    let mut refused = 0;
    for step in 0..10_000u64 {
        match j.append(&payload(step, 1000), disk.now_us()) {
            Ok(_) => {}
            Err(AppendError::Backpressure) => {
                refused += 1;
                break;
            }
            Err(e) => panic!("unexpected append error {e}"),
        }
    }
    assert_eq!(refused, 1, "the buffers filled up");
    let stats = j.stats();
    assert_eq!(stats.refused_no_buffer, 1);
    assert_eq!(stats.refused_no_segment, 0);
}
