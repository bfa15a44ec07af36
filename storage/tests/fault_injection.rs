//! The debug-only fault switch of the real-disk drivers (`storage::fault`, feature
//! `fault-injection`): while a rule names a directory, writes and/or syncs of its files fail
//! with EIO through the ordinary completion path, other directories are untouched, and once
//! cleared the same files work again. Both drivers, one test (the rules are process-wide).
//!
//! Run with `cargo test -p storage --features fault-injection --test fault_injection`.
#![cfg(feature = "fault-injection")]

use std::path::Path;
use std::sync::Arc;

use storage::dirset::{FileClass, Placement};
use storage::fault::{self, FaultRule};
use storage::psync::PsyncStorage;
use storage::uring::UringStorage;
use storage::{AlignedBuf, Completion, IoError, Op, Storage, Wait, ALIGN};

mod common;
use common::base_dir;

/// Submits one op and waits for its completion.
fn run(s: &mut dyn Storage, op: Op) -> Completion {
    s.submit(7, op).map_err(|(e, _)| e).expect("submit");
    let mut out = Vec::new();
    while out.is_empty() {
        s.poll(
            &mut out,
            Wait::AtLeastOne {
                timeout_us: Some(1_000_000),
            },
        )
        .expect("poll");
    }
    assert_eq!(out.len(), 1);
    out.pop().expect("one completion")
}

fn write(s: &mut dyn Storage, file: u32, offset: u64, byte: u8) -> Completion {
    let mut buf = AlignedBuf::new(ALIGN);
    buf.as_mut_capacity().fill(byte);
    buf.set_len(ALIGN);
    run(s, Op::Write { file, offset, buf })
}

fn read_byte(s: &mut dyn Storage, file: u32, offset: u64) -> u8 {
    let mut buf = AlignedBuf::new(ALIGN);
    buf.set_len(ALIGN);
    let c = run(s, Op::Read { file, offset, buf });
    assert_eq!(c.result, Ok(ALIGN));
    c.buf.expect("buffer")[0]
}

fn rule(dir: &Path, writes: bool, syncs: bool) -> FaultRule {
    FaultRule {
        dir: dir.to_path_buf(),
        writes,
        syncs,
    }
}

/// The whole switch on one driver: `faulty` is the storage under the rules' directory,
/// `healthy` one beside it.
fn exercise(faulty: &mut dyn Storage, healthy: &mut dyn Storage, dir: &Path) {
    let f = faulty.open("seg", true).expect("open");
    let h = healthy.open("seg", true).expect("open");
    assert_eq!(write(faulty, f, 0, 1).result, Ok(ALIGN));

    // fsync fails, writes go on; the healthy directory syncs.
    fault::set(vec![rule(dir, false, true)]);
    assert_eq!(write(faulty, f, ALIGN as u64, 2).result, Ok(ALIGN));
    assert_eq!(
        run(faulty, Op::SyncData { file: f }).result,
        Err(IoError::EIO)
    );
    assert_eq!(run(faulty, Op::SyncDir).result, Err(IoError::EIO));
    assert_eq!(faulty.sync_dir(), Err(IoError::EIO));
    assert_eq!(run(healthy, Op::SyncData { file: h }).result, Ok(0));

    // writes fail (not performed: the old bytes stay), the buffer comes back.
    fault::set(vec![rule(dir, true, false)]);
    let c = write(faulty, f, 0, 9);
    assert_eq!(c.result, Err(IoError::EIO));
    assert_eq!(c.buf.expect("buffer back").len(), ALIGN);
    assert_eq!(read_byte(faulty, f, 0), 1, "a failed write wrote nothing");
    assert_eq!(run(faulty, Op::SyncData { file: f }).result, Ok(0));
    assert_eq!(write(healthy, h, 0, 3).result, Ok(ALIGN));

    // cleared: everything works again.
    fault::clear();
    assert_eq!(write(faulty, f, 0, 4).result, Ok(ALIGN));
    assert_eq!(run(faulty, Op::SyncData { file: f }).result, Ok(0));
    assert_eq!(read_byte(faulty, f, 0), 4);
    faulty.close(f);
    healthy.close(h);
}

#[test]
fn rules_fail_writes_and_syncs_under_their_directory_only() {
    let base = tempfile::tempdir_in(base_dir()).expect("temp dir");
    let (bad, good) = (base.path().join("bad"), base.path().join("good"));

    let mut p_bad = PsyncStorage::open_dir(&bad).expect("psync");
    let mut p_good = PsyncStorage::open_dir(&good).expect("psync");
    exercise(&mut p_bad, &mut p_good, &bad);

    match (
        UringStorage::open_dir(&bad.join("u"), 16),
        UringStorage::open_dir(&good.join("u"), 16),
    ) {
        (Ok(mut u_bad), Ok(mut u_good)) => exercise(&mut u_bad, &mut u_good, &bad),
        (Err(err), _) | (_, Err(err)) => {
            eprintln!("\n!!!!!! SKIPPED(uring unavailable): {err} !!!!!!\n");
            assert!(
                std::env::var_os("BOOKIE_REQUIRE_URING").is_none(),
                "io_uring required but unavailable: {err}"
            );
        }
    }

    // A directory set: only the member named by the rule fails.
    let members = vec![base.path().join("m0"), base.path().join("m1")];
    let placement = Arc::new(Placement::new(
        members.clone(),
        Vec::new(),
        vec![0, 1],
        Vec::new(),
        |_| FileClass::Data,
    ));
    let mut set = PsyncStorage::open_set(placement).expect("set");
    let mut in_member = std::collections::HashMap::new();
    for i in 0..16 {
        let name = format!("f{i}");
        let id = set.open(&name, true).expect("open");
        let m = members
            .iter()
            .position(|m| m.join(&name).exists())
            .expect("in a member");
        in_member.insert(id, m);
    }
    fault::set(vec![rule(&members[1], true, true)]);
    for (&id, &m) in &in_member {
        let want = if m == 1 { Err(IoError::EIO) } else { Ok(0) };
        assert_eq!(run(&mut set, Op::SyncData { file: id }).result, want);
    }
    fault::clear();
}
