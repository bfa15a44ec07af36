//! A directory set on a real disk (both drivers): files found in whichever member holds
//! them, new ones placed as the placement says, a full member skipped, one name in two
//! members refused.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use storage::dirset::{FileClass, Placement};
use storage::{AlignedBuf, Op, Storage, Wait};

fn class(name: &str) -> FileClass {
    if name.starts_with("MANIFEST") {
        FileClass::Pinned
    } else {
        FileClass::Data
    }
}

fn write_block<S: Storage>(s: &mut S, name: &str, fill: u8) {
    let f = s.open(name, true).unwrap();
    let mut buf = AlignedBuf::zeroed(4096);
    buf.fill(fill);
    s.submit(
        1,
        Op::Write {
            file: f,
            offset: 0,
            buf,
        },
    )
    .unwrap();
    let mut out = Vec::new();
    while out.is_empty() {
        s.poll(&mut out, Wait::AtLeastOne { timeout_us: None })
            .unwrap();
    }
    assert_eq!(out[0].result.unwrap(), 4096);
    s.close(f);
}

fn check(force_psync: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let members: Vec<PathBuf> = (0..3)
        .map(|i| tmp.path().join(format!("d{i}/shard-0")))
        .collect();
    let flags: Vec<Arc<AtomicBool>> = (0..3).map(|_| Arc::new(AtomicBool::new(true))).collect();
    let placement = Arc::new(Placement::new(
        members.clone(),
        flags.clone(),
        vec![0, 1],
        vec![],
        class,
    ));
    let mut s = storage::open_dir_set(placement.clone(), 8, force_psync).unwrap();
    write_block(&mut s, "a.log", 1);
    write_block(&mut s, "b.log", 2);
    flags[0].store(false, Ordering::Relaxed);
    write_block(&mut s, "c.log", 3);
    flags[1].store(false, Ordering::Relaxed);
    write_block(&mut s, "d.log", 4);
    write_block(&mut s, "MANIFEST.tmp", 5);
    s.rename("MANIFEST.tmp", "MANIFEST").unwrap();
    s.sync_dir().unwrap();
    let at =
        |name: &str| -> Vec<usize> { (0..3).filter(|&m| members[m].join(name).exists()).collect() };
    assert_eq!(at("a.log"), vec![0]);
    assert_eq!(at("b.log"), vec![1]);
    assert_eq!(at("c.log"), vec![1], "the full member is skipped");
    assert_eq!(at("d.log"), vec![2], "then the member not preferred");
    assert_eq!(
        at("MANIFEST"),
        vec![0],
        "pinned to the home even when it is full"
    );
    let mut names = s.list().unwrap();
    names.sort();
    assert_eq!(names, vec!["MANIFEST", "a.log", "b.log", "c.log", "d.log"]);
    // Found wherever it is: reopen and read back; remove from its member.
    drop(s);
    let mut s = storage::open_dir_set(placement.clone(), 8, force_psync).unwrap();
    let f = s.open("d.log", false).unwrap();
    assert_eq!(s.file_len(f).unwrap(), 4096);
    s.submit(
        2,
        Op::Read {
            file: f,
            offset: 0,
            buf: AlignedBuf::zeroed(4096),
        },
    )
    .unwrap();
    let mut out = Vec::new();
    while out.is_empty() {
        s.poll(&mut out, Wait::AtLeastOne { timeout_us: None })
            .unwrap();
    }
    assert!(out[0].buf.as_ref().unwrap().iter().all(|&b| b == 4));
    s.close(f);
    s.remove("b.log").unwrap();
    assert!(at("b.log").is_empty());
    assert_eq!(
        s.open("b.log", false).err().map(|e| e.errno),
        Some(libc::ENOENT)
    );
    // One name in two members: refused, not guessed.
    std::fs::write(members[2].join("a.log"), b"x").unwrap();
    assert_eq!(s.list().err().map(|e| e.errno), Some(libc::EEXIST));
}

#[test]
fn a_directory_set_with_io_uring() {
    check(false);
}

#[test]
fn a_directory_set_with_psync() {
    check(true);
}
