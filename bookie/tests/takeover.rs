//! Taking over a stopped Java bookie's directories (issue 32) with directories built byte for
//! byte as a Java SortedLedgerStorage bookie leaves them (`javastore`'s writers; the interop
//! tier checks the same against real Java bookies): entries checkpointed into an entry log and
//! an index file, newer ones only in the journal after `lastMark`, a fence in the journal. The
//! bookie serves all of them, keeps the fence, changes none of the Java files; and a damaged
//! Java file (an entry log of an unknown header version, a journal record of negative length)
//! stops the start naming the file, unless `skipReplayJournalInvalidRecord` says to go on.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use javastore::entrylog::write::{body, legacy_log};
use javastore::index::write as idx;
use javastore::journal::{write as jw, Record};
use net::{Request, StatusCode};

mod common;
use common::bookie::BookieBuilder;
use common::{free_port, read, tempdir};

const LEDGER: i64 = 5;
const KEY: [u8; 20] = [0x4b; 20];

struct JavaDirs {
    journal: PathBuf,
    ledgers: PathBuf,
    /// Byte offset of the journal record after the mark (the first not checkpointed).
    bad_at: u64,
}

/// A Java bookie's directories: entries 0-2 of ledger 5 in entry log 0 and its index file;
/// entries 3-4 and a fence only in journal 0x10, after `lastMark`; `bad_record` appends a
/// record of negative length after them.
fn java_dirs(root: &Path, bad_record: bool) -> JavaDirs {
    let journal = root.join("journal");
    let ledgers = root.join("ledgers");
    let (jc, lc) = (journal.join("current"), ledgers.join("current"));
    std::fs::create_dir_all(&jc).unwrap();
    std::fs::create_dir_all(lc.join("0/5")).unwrap();
    let bodies: Vec<Vec<u8>> = (0..5)
        .map(|e| body(LEDGER, e, e - 1, &vec![e as u8 + 1; 300 * (e as usize + 1)]))
        .collect();
    let refs: Vec<&[u8]> = bodies[..3].iter().map(|b| b.as_slice()).collect();
    let (log, offsets) = legacy_log(&refs, false);
    std::fs::write(lc.join("0.log"), log).unwrap();
    let slots: Vec<(u64, u64)> = offsets
        .iter()
        .enumerate()
        .map(|(e, o)| (e as u64, *o))
        .collect();
    std::fs::write(
        lc.join("0/5/5.idx"),
        idx::file(idx::header(1, &KEY, false, None), &slots),
    )
    .unwrap();
    let mut j = jw::header(6);
    jw::record(
        &mut j,
        &Record::MasterKey {
            ledger: LEDGER,
            key: Bytes::from_static(&KEY),
        },
    );
    // Entries 0-2 checkpointed (before the mark), 3-4 after it.
    let mut mark = 0;
    for (e, b) in bodies.iter().enumerate() {
        if e == 3 {
            mark = j.len() as u64;
        }
        jw::record(
            &mut j,
            &Record::Entry {
                ledger: LEDGER,
                entry: e as i64,
                body: Bytes::from(b.clone()),
            },
        );
    }
    jw::record(&mut j, &Record::Fence { ledger: LEDGER });
    let bad_at = j.len() as u64;
    if bad_record {
        j.extend_from_slice(&(-7i32).to_be_bytes());
        j.extend_from_slice(&[0u8; 64]);
    }
    jw::pad(&mut j, 4096);
    std::fs::write(jc.join("10.txn"), &j).unwrap();
    std::fs::write(
        lc.join("lastMark"),
        [0x10u64.to_be_bytes(), mark.to_be_bytes()].concat(),
    )
    .unwrap();
    JavaDirs {
        journal,
        ledgers,
        bad_at,
    }
}

fn conf(root: &Path, port: u16, d: &JavaDirs, extra: &str) -> PathBuf {
    let p = root.join("bk_server.conf");
    std::fs::write(
        &p,
        format!(
            "bookiePort={port}\njournalDirectories={}\nledgerDirectories={}\n\
             ledgerStorageClass=org.apache.bookkeeper.bookie.SortedLedgerStorage\n\
             httpServerEnabled=false\n{extra}",
            d.journal.display(),
            d.ledgers.display()
        ),
    )
    .unwrap();
    p
}

/// Path below `dir` -> bytes, of every file in the Java `current/` directories.
fn java_files(d: &JavaDirs) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.insert(p.clone(), std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(&d.journal.join("current"), &mut out);
    walk(&d.ledgers.join("current"), &mut out);
    out
}

fn expect_refusal(b: &BookieBuilder, log: &Path, want: &[&str]) {
    let mut p = b.spawn();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = p.exited() {
            break s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the bookie did not exit"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = std::fs::read_to_string(log).unwrap();
    assert_eq!(status.code(), Some(1), "{text}");
    for w in want {
        assert!(text.contains(w), "missing {w:?} in:\n{text}");
    }
    assert!(!text.contains("panicked"), "{text}");
}

#[test]
fn takes_over_java_files_and_refuses_a_damaged_entry_log() {
    let root = tempdir("takeover");
    let d = java_dirs(root.path(), false);
    let before = java_files(&d);
    let port = free_port();
    let log = root.path().join("bookie.log");
    let b = BookieBuilder::serve_conf(&conf(root.path(), port, &d, ""), port).log_to(&log);
    for start in 0..2 {
        let mut p = b.start();
        let mut c = p.client();
        for e in 0..5i64 {
            let r = c.call_v3(read(LEDGER, e), None).expect("read").response;
            assert_eq!(r.status(), StatusCode::EOK, "entry {e}, start {start}");
        }
        // The fence journaled after the mark holds, with the right key.
        let add = Request::AddEntry {
            ledger_id: LEDGER,
            entry_id: 5,
            master_key: Bytes::from_static(&KEY),
            body: Bytes::from(body(LEDGER, 5, 4, b"late")),
            recovery: false,
            write_flags: None,
        };
        let st = c.call_v3(add, None).expect("add").response.status();
        assert_eq!(st, StatusCode::EFENCED, "start {start}");
        p.stop();
    }
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("takeover:"), "{text}");
    assert_eq!(java_files(&d), before, "the Java files after two starts");

    // An entry log of a header version no Java release writes: refused at start, named.
    let log0 = d.ledgers.join("current/0.log");
    let mut bytes = std::fs::read(&log0).unwrap();
    bytes[7] = 7;
    std::fs::write(&log0, &bytes).unwrap();
    expect_refusal(&b, &log, &["0.log", "unknown entry log header version 7"]);
}

#[test]
fn a_bad_journal_record_refuses_the_start_unless_skipped() {
    let root = tempdir("takeover-bad-journal");
    let d = java_dirs(root.path(), true);
    let port = free_port();
    let log = root.path().join("bookie.log");
    let b = BookieBuilder::serve_conf(&conf(root.path(), port, &d, ""), port).log_to(&log);
    let at = format!("10.txn at offset {}", d.bad_at);
    expect_refusal(&b, &log, &[&at, "invalid record length -7"]);
    // As Java: skipReplayJournalInvalidRecord abandons the rest of that file and starts.
    let b = BookieBuilder::serve_conf(
        &conf(
            root.path(),
            port,
            &d,
            "skipReplayJournalInvalidRecord=true\n",
        ),
        port,
    )
    .log_to(&log);
    let mut p = b.start();
    let mut c = p.client();
    for e in 0..5i64 {
        let r = c.call_v3(read(LEDGER, e), None).expect("read").response;
        assert_eq!(r.status(), StatusCode::EOK, "entry {e}");
    }
    p.stop();
}
