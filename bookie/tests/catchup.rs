//! Catch-up reads from ledger storage, as a Pulsar broker drains a backlog: a window of v2
//! reads in flight per ledger over entries that are on disk, not in the write cache, on a real
//! `bookie` process with two shards (so that some ledgers answer through the other shard).
//!
//! The shard reads a sequential reader's entries ahead in runs, and a read that arrives while
//! the run holding it is on its way waits in the shard for that run (`run_waits`) instead of
//! going to a reader thread. These tests check what a client sees: every entry byte for byte,
//! ENOENTRY past the end (a run that brings nothing must not leave its reads waiting), and
//! the metrics that say the reads did wait on runs and that none is left waiting.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;

mod common;

use common::bookie::{BookieBuilder, BookieProcess};
use common::{entry, free_port, read};
use net::client::blocking::BlockingClient;
use net::{Request, Response, StatusCode};

const ENTRIES: i64 = 1_500;
const WINDOW: i64 = 100;

fn start(dir: &Path) -> BookieProcess {
    BookieBuilder::serve(free_port())
        .args(["--shards", "2", "--no-pin", "--write-cache-mb", "64"])
        .http_port(free_port())
        .data_dir(&dir.join("data"))
        .log_to(&dir.join("bookie.log"))
        .start()
}

fn payload(ledger: i64, e: i64) -> Vec<u8> {
    (0..1024)
        .map(|i| (ledger as usize * 31 + e as usize + i) as u8)
        .collect()
}

fn add(ledger: i64, e: i64) -> Request {
    Request::AddEntry {
        ledger_id: ledger,
        entry_id: e,
        master_key: Bytes::from_static(&[3; 20]),
        body: entry(ledger, e, e - 1, &payload(ledger, e)),
        recovery: false,
        write_flags: None,
    }
}

/// Adds entries 0..ENTRIES to each ledger, up to 500 in flight.
fn write(c: &mut BlockingClient, ledgers: &[i64]) {
    for &ledger in ledgers {
        for chunk in (0..ENTRIES).collect::<Vec<_>>().chunks(500) {
            for &e in chunk {
                c.send_v2(add(ledger, e), false).unwrap();
            }
            for _ in chunk {
                let (_, frame) = c.receive().unwrap();
                assert_eq!(frame.response.status(), StatusCode::EOK, "add to {ledger}");
            }
        }
    }
}

#[test]
fn a_catch_up_window_reads_every_entry_from_runs_read_ahead() {
    let dir = common::tempdir("bookie-catchup-");
    let mut bookie = start(dir.path());
    let ledgers = [41, 42, 43, 44];
    write(&mut bookie.client(), &ledgers);
    bookie.flush_write_cache();

    let mut c = bookie.client_with_timeout(Duration::from_secs(20));
    // Per ledger, the next entry to ask for and the entries answered.
    let mut next: HashMap<i64, i64> = ledgers.iter().map(|&l| (l, 0)).collect();
    let mut answered: HashMap<i64, i64> = ledgers.iter().map(|&l| (l, 0)).collect();
    for &ledger in &ledgers {
        for e in 0..WINDOW {
            c.send_v2(read(ledger, e), false).unwrap();
        }
        next.insert(ledger, WINDOW);
    }
    let mut outstanding = ledgers.len() as i64 * WINDOW;
    while outstanding > 0 {
        let (_, frame) = c.receive().expect("every read is answered");
        outstanding -= 1;
        let Response::ReadEntry {
            status,
            ledger_id,
            entry_id,
            body,
            ..
        } = frame.response
        else {
            panic!("not a read reply: {:?}", frame.response);
        };
        assert_eq!(status, StatusCode::EOK, "{ledger_id}/{entry_id}");
        assert_eq!(
            body,
            Some(entry(
                ledger_id,
                entry_id,
                entry_id - 1,
                &payload(ledger_id, entry_id)
            )),
            "{ledger_id}/{entry_id} byte for byte"
        );
        *answered.get_mut(&ledger_id).unwrap() += 1;
        let n = next.get_mut(&ledger_id).unwrap();
        if *n < ENTRIES {
            c.send_v2(read(ledger_id, *n), false).unwrap();
            *n += 1;
            outstanding += 1;
        }
    }
    assert!(answered.values().all(|&n| n == ENTRIES), "{answered:?}");

    // Past the end, right after the last run: the shard asks for a run that brings nothing;
    // the reads waiting on it must still be answered, and with ENOENTRY.
    for &ledger in &ledgers {
        for e in ENTRIES..ENTRIES + 5 {
            c.send_v2(read(ledger, e), false).unwrap();
        }
    }
    for _ in 0..ledgers.len() * 5 {
        let (_, frame) = c.receive().expect("a read past the end is answered");
        assert_eq!(frame.response.status(), StatusCode::ENOENTRY);
    }

    let runs = bookie.metric("bookie_rs_read_ahead_runs_total");
    let waits = bookie.metric("bookie_rs_read_ahead_waits_total");
    assert!(
        runs >= (ledgers.len() as i64 * ENTRIES / 100) as f64,
        "runs read ahead: {runs}"
    );
    assert!(waits > 0.0, "no read waited in a shard for its run");
    // The gauge is sampled as the shard goes; give it a moment.
    let deadline = Instant::now() + Duration::from_secs(5);
    while bookie.metric("bookie_rs_read_ahead_parked") != 0.0 {
        assert!(Instant::now() < deadline, "reads left waiting on runs");
        std::thread::sleep(Duration::from_millis(50));
    }
    bookie.stop();
}
