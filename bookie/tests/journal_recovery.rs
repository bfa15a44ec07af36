//! Journal recovery against a real `bookie` process (issue 11 §2 and §5): corruption in the
//! middle of the newest journal segment refuses the start with a message naming the file, the
//! offset and the ledgers affected; the operator's switch (`--journal-recovery-mode
//! tolerate`) starts it, cutting the journal there; and a clean SIGTERM stop leaves nothing
//! that the next start reports as a torn tail. Each test runs its own bookie (one shard, free
//! port, temporary directory) and reads its log from a file.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use journal::format::{decode_record, RecordKind, SegmentHeader};
use net::{Request, StatusCode};

mod common;

use common::bookie::{BookieBuilder, BookieProcess};
use common::{entry, free_port, read};
use net::client::blocking::BlockingClient;

const LEDGER: i64 = 7;

/// One bookie process (one unpinned shard, no admin server, a 256 MiB write cache, data in
/// `<dir>/data`) with its log in `<dir>/bookie-<n>.log`; `start` waits up to 60 s for it to
/// listen and panics with its log if it exits first.
fn launch(dir: &Path, run: usize, extra: &[&str]) -> BookieBuilder {
    BookieBuilder::serve(free_port())
        .args([
            "--shards",
            "1",
            "--no-pin",
            "--no-http",
            "--write-cache-mb",
            "256",
        ])
        .data_dir(&dir.join("data"))
        .args(extra)
        .log_to(&dir.join(format!("bookie-{run}.log")))
        .listen_timeout(Duration::from_secs(60))
}

/// Waits until it exits (it must refuse to start); returns its log.
fn refused(mut b: BookieProcess) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = b.exited() {
            assert!(
                !status.success(),
                "bookie exited cleanly instead of refusing"
            );
            return b.log_text();
        }
        assert!(
            !b.accepts(),
            "bookie started over a corrupt journal:\n{}",
            b.log_text()
        );
        assert!(
            Instant::now() < deadline,
            "bookie neither started nor exited"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGTERM and wait for a clean exit; returns its log.
fn stop(mut b: BookieProcess) -> String {
    b.stop();
    b.log_text()
}

fn add(e: i64, body: Bytes) -> Request {
    Request::AddEntry {
        ledger_id: LEDGER,
        entry_id: e,
        master_key: Bytes::from(vec![1; 20]),
        body,
        recovery: false,
        write_flags: None,
    }
}

/// Adds entries `range` of [`LEDGER`] one at a time, each acknowledged before the next (one
/// journal group each).
fn add_one_by_one(bookie: &BookieProcess, range: std::ops::Range<i64>) {
    let mut c = bookie.client();
    for e in range {
        let body = entry(LEDGER, e, e - 1, &[e as u8; 1024]);
        let r = c.call_v3(add(e, body), None).expect("add");
        assert_eq!(r.response.status(), StatusCode::EOK, "add {e}");
    }
}

fn read_status(c: &mut BlockingClient, e: i64) -> StatusCode {
    c.call_v3(read(LEDGER, e), None)
        .expect("read")
        .response
        .status()
}

/// The shard's journal segment holding entry `e` of [`LEDGER`], and that record's offset.
fn find_add_record(journal_dir: &Path, e: i64) -> (PathBuf, u64) {
    for item in std::fs::read_dir(journal_dir).expect("journal dir") {
        let path = item.expect("entry").path();
        if path.extension().is_none_or(|x| x != "jrnl") {
            continue;
        }
        let bytes = std::fs::read(&path).expect("read segment");
        let Some(header) = SegmentHeader::decode(&bytes[..4096]) else {
            continue;
        };
        let mut pos = 4096usize;
        while pos < bytes.len() {
            let Ok(r) = decode_record(&bytes[pos..], &header, header.crc_seed(), 8 << 20) else {
                break;
            };
            let p = r.payload;
            if r.kind == RecordKind::Data
                && p.len() > 17
                && p[0] == 1
                && p[1..9] == LEDGER.to_le_bytes()
                && p[9..17] == e.to_le_bytes()
            {
                return (path, pos as u64);
            }
            pos += r.total;
        }
    }
    panic!("entry {e} is in no journal segment");
}

/// Issue 11 §2: 3,000 acknowledged adds, one group each, only in the journal; SIGKILL; 16
/// bytes flipped in the record of entry 1,500. The restart refuses, naming the segment, the
/// record's offset, the ledger and entries after it, and the exact switch; with the switch the
/// bookie starts, says what it cut, serves entries before the cut and none after it; a later
/// strict start accepts the cut journal.
#[test]
fn corrupt_journal_refuses_to_start_and_the_tolerant_switch_cuts_it() {
    let dir = common::tempdir("bookie-journal-recovery-");
    // The adds must stay only in the journal: no time-based flush, however slow a loaded
    // test machine makes 3,000 one-by-one adds.
    let mut bookie = launch(dir.path(), 1, &["--flush-interval-ms", "3600000"]).start();
    add_one_by_one(&bookie, 0..3000);
    bookie.kill();

    let journal_dir = dir.path().join("data/journal/shard-0");
    let (segment, offset) = find_add_record(&journal_dir, 1500);
    let mut bytes = std::fs::read(&segment).expect("read segment");
    for b in &mut bytes[offset as usize + 100..offset as usize + 116] {
        *b ^= 0xa5;
    }
    std::fs::write(&segment, &bytes).expect("write segment");
    let name = segment.file_name().unwrap().to_string_lossy().into_owned();

    let log = refused(launch(dir.path(), 2, &[]).spawn());
    for part in [
        format!("{name} at offset {offset}"),
        "BadRecordBeforeValidData".into(),
        format!("{LEDGER} (entries 1501..=2999, 1499 records)"),
        "journalRecoveryMode=tolerate".into(),
        "--journal-recovery-mode tolerate".into(),
    ] {
        assert!(log.contains(&part), "{part:?} not in the log:\n{log}");
    }
    assert!(!log.contains("torn tail"), "{log}");

    let bookie = launch(dir.path(), 3, &["--journal-recovery-mode", "tolerate"]).start();
    let mut c = bookie.client();
    assert_eq!(read_status(&mut c, 0), StatusCode::EOK);
    assert_eq!(read_status(&mut c, 1499), StatusCode::EOK);
    assert_eq!(read_status(&mut c, 1500), StatusCode::ENOENTRY);
    assert_eq!(read_status(&mut c, 2999), StatusCode::ENOENTRY);
    drop(c);
    let log = stop(bookie);
    assert!(
        log.contains("the journal was cut") && log.contains("1499 records"),
        "{log}"
    );

    let bookie = launch(dir.path(), 4, &[]).start();
    let mut c = bookie.client();
    assert_eq!(read_status(&mut c, 1499), StatusCode::EOK);
    assert_eq!(read_status(&mut c, 1500), StatusCode::ENOENTRY);
    drop(c);
    stop(bookie);
}

/// Issue 11 §5: clean SIGTERM stops, each after adds and a checkpoint that trims the journal
/// (so later segments are recycled files full of an earlier life's records), are followed by
/// starts that report no torn tail, and every entry reads back.
#[test]
fn clean_stops_leave_nothing_to_repair() {
    let dir = common::tempdir("bookie-journal-recovery-");
    let mut next = 0;
    for run in 1..=4 {
        let bookie = launch(dir.path(), run, &["--flush-interval-ms", "100"]).start();
        add_one_by_one(&bookie, next..next + 300);
        next += 300;
        // Let a checkpoint run and trim the journal.
        std::thread::sleep(Duration::from_millis(600));
        let mut c = bookie.client();
        for e in [0, next - 1] {
            assert_eq!(read_status(&mut c, e), StatusCode::EOK, "entry {e}");
        }
        drop(c);
        let log = stop(bookie);
        assert!(!log.contains("torn tail"), "run {run}:\n{log}");
    }
    let bookie = launch(dir.path(), 5, &[]).start();
    let mut c = bookie.client();
    for e in (0..next).step_by(97) {
        assert_eq!(read_status(&mut c, e), StatusCode::EOK, "entry {e}");
    }
    drop(c);
    let log = stop(bookie);
    assert!(!log.contains("torn tail"), "{log}");
}

/// Name, length, modification time and contents of every file in `dir`.
fn snapshot(dir: &Path) -> Vec<(String, u64, std::time::SystemTime, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|item| {
            let path = item.expect("entry").path();
            let meta = std::fs::metadata(&path).expect("metadata");
            (
                path.file_name().unwrap().to_string_lossy().into_owned(),
                meta.len(),
                meta.modified().expect("mtime"),
                std::fs::read(&path).expect("read"),
            )
        })
        .collect();
    files.sort();
    files
}

/// Issue 11 §5: `bookie inspect journal DIR` on a crashed bookie's journal (a tail that a start
/// would seal, segments it would recycle) prints every record and changes nothing: the same
/// files with the same lengths, modification times and contents before and after.
#[test]
fn inspect_journal_is_read_only() {
    let dir = common::tempdir("bookie-journal-recovery-");
    let mut bookie = launch(dir.path(), 1, &[]).start();
    add_one_by_one(&bookie, 0..50);
    bookie.kill();
    let journal_dir = dir.path().join("data/journal/shard-0");
    let before = snapshot(&journal_dir);
    let out = Command::new(env!("CARGO_BIN_EXE_bookie"))
        .args(["inspect", "journal"])
        .arg(&journal_dir)
        .output()
        .expect("run inspect");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("51 records: 50 adds, 1 master keys"),
        "{stdout}"
    );
    assert!(stdout.contains("add ledger 7 entry 49 ("), "{stdout}");
    let after = snapshot(&journal_dir);
    let names = |s: &[(String, u64, std::time::SystemTime, Vec<u8>)]| {
        s.iter().map(|f| f.0.clone()).collect::<Vec<_>>()
    };
    assert_eq!(names(&before), names(&after), "the listing changed");
    assert!(
        before == after,
        "a file's length, mtime or contents changed"
    );
}
