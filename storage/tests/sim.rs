//! Tests of the simulated disk (`storage::sim`): the model documented in its module docs.

use storage::sim::{FaultConfig, SimConfig, SimDisk, SimRng, SimStorage};
use storage::{AlignedBuf, Completion, FileId, IoError, Op, Storage, Wait, ALIGN};

/// A buffer of `blocks` blocks filled with `byte`.
fn block(byte: u8, blocks: usize) -> AlignedBuf {
    let mut buf = AlignedBuf::zeroed(blocks * ALIGN);
    buf.fill(byte);
    buf
}

/// Waits for every op of `s` to complete.
fn drain(s: &mut SimStorage) -> Vec<Completion> {
    let mut out = Vec::new();
    while s.in_flight() > 0 {
        s.poll(&mut out, Wait::AtLeastOne { timeout_us: None })
            .unwrap();
    }
    out
}

/// Submits one op and waits for it.
fn run(s: &mut SimStorage, op: Op) -> Completion {
    assert_eq!(s.in_flight(), 0);
    s.submit(99, op).unwrap();
    let mut out = drain(s);
    assert_eq!(out.len(), 1);
    out.pop().unwrap()
}

fn write(s: &mut SimStorage, file: FileId, offset: u64, buf: AlignedBuf) -> Result<usize, IoError> {
    run(s, Op::Write { file, offset, buf }).result
}

fn sync(s: &mut SimStorage, file: FileId) -> Result<usize, IoError> {
    run(s, Op::SyncData { file }).result
}

fn read(
    s: &mut SimStorage,
    file: FileId,
    offset: u64,
    len: usize,
) -> (Result<usize, IoError>, Vec<u8>) {
    let c = run(
        s,
        Op::Read {
            file,
            offset,
            buf: AlignedBuf::zeroed(len),
        },
    );
    (c.result, c.buf.unwrap().to_vec())
}

/// The basic path: create, write, read back, sync, sync_dir, crash: all of it survives.
#[test]
fn synced_data_survives_crash_byte_for_byte() {
    for seed in 0..50 {
        let disk = SimDisk::new(SimConfig::new(seed).with_sector_size(512));
        let mut s = disk.storage("journal");
        let f = s.open("a.log", true).unwrap();
        assert_eq!(write(&mut s, f, 0, block(1, 2)), Ok(2 * ALIGN));
        assert_eq!(write(&mut s, f, 2 * ALIGN as u64, block(2, 1)), Ok(ALIGN));
        let (r, data) = read(&mut s, f, 0, 4 * ALIGN);
        assert_eq!(r, Ok(3 * ALIGN));
        assert_eq!(&data[..2 * ALIGN], &[1u8; 2 * ALIGN][..]);
        assert_eq!(sync(&mut s, f), Ok(0));
        s.sync_dir().unwrap();
        let synced = disk.volatile_file("journal", "a.log").unwrap();
        assert_eq!(disk.durable_file("journal", "a.log").unwrap(), synced);
        // Unsynced tail and overwrite, then crash.
        assert_eq!(
            write(&mut s, f, 3 * ALIGN as u64, block(3, 2)),
            Ok(2 * ALIGN)
        );
        disk.crash();
        let after = disk.durable_file("journal", "a.log").unwrap();
        assert!(after.len() >= synced.len());
        assert_eq!(&after[..synced.len()], &synced[..], "seed {seed}");
        let mut s2 = disk.storage("journal");
        let f2 = s2.open("a.log", false).unwrap();
        assert_eq!(s2.file_len(f2).unwrap(), after.len() as u64);
    }
}
