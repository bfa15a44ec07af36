//! End to end: a real `bookie` process on loopback, spoken to with `net`'s client over TCP, in
//! both protocol versions. Each test starts its own bookie (free port, temporary data dir) and
//! stops it; the crash tests kill it with SIGKILL and check that every acknowledged entry comes
//! back after a restart.

use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
mod common;

use common::bookie::{BookieBuilder, BookieProcess};
use common::{entry, free_port, read};
use net::client::blocking::BlockingClient;
use net::client::ClientConfig;
use net::{ReadFlag, Request, Response, StatusCode};

/// A bookie with two unpinned shards, data in `dir`, and `extra` arguments, on a free port.
fn launch(dir: &Path, extra: &[&str]) -> BookieBuilder {
    BookieBuilder::serve(free_port())
        .args(["--shards", "2", "--no-pin"])
        .data_dir(dir)
        .args(extra)
}

/// A listening bookie with a 256 MiB write cache.
fn start(dir: &Path) -> BookieProcess {
    launch(dir, &["--write-cache-mb", "256"]).start()
}

fn key(b: u8) -> Bytes {
    Bytes::from(vec![b; 20])
}

fn add(ledger: i64, e: i64, key_byte: u8, body: Bytes, recovery: bool) -> Request {
    Request::AddEntry {
        ledger_id: ledger,
        entry_id: e,
        master_key: key(key_byte),
        body,
        recovery,
        write_flags: None,
    }
}

fn read_body(r: &Response) -> Option<Bytes> {
    match r {
        Response::ReadEntry { body, .. } => body.clone(),
        _ => None,
    }
}

/// Adds and reads over v3 and v2, including entry -1 (last entry), ENOLEDGER and ENOENTRY.
#[test]
fn add_and_read_over_v3_and_v2() {
    let dir = common::tempdir("bookie-e2e-");
    let bookie = start(dir.path());
    let mut c = bookie.client();
    for e in 0..10 {
        let r = c
            .call_v3(add(1, e, 1, entry(1, e, e - 1, b"v3 payload"), false), None)
            .unwrap();
        assert_eq!(r.response.status(), StatusCode::EOK, "v3 add {e}");
        let r = c
            .call_v2(
                add(2, e, 2, entry(2, e, e - 1, b"v2 payload"), false),
                false,
            )
            .unwrap();
        assert_eq!(r.response.status(), StatusCode::EOK, "v2 add {e}");
    }
    let r = c.call_v3(read(1, 4), None).unwrap();
    assert_eq!(read_body(&r.response), Some(entry(1, 4, 3, b"v3 payload")));
    match r.response {
        Response::ReadEntry { max_lac, .. } => assert_eq!(max_lac, Some(8)),
        other => panic!("unexpected {other:?}"),
    }
    let r = c.call_v2(read(2, 7), false).unwrap();
    assert_eq!(read_body(&r.response), Some(entry(2, 7, 6, b"v2 payload")));
    let r = c.call_v3(read(1, -1), None).unwrap();
    assert_eq!(read_body(&r.response), Some(entry(1, 9, 8, b"v3 payload")));
    assert_eq!(
        c.call_v3(read(1, 99), None).unwrap().response.status(),
        StatusCode::ENOENTRY
    );
    assert_eq!(
        c.call_v3(read(77, 0), None).unwrap().response.status(),
        StatusCode::ENOLEDGER
    );
    assert_eq!(
        c.call_v2(read(77, 0), false).unwrap().response.status(),
        StatusCode::ENOLEDGER
    );
}

/// A wrong master key is EUA; fencing needs the key, then normal adds get EFENCED and
/// recovery adds still go in; the fence survives a restart.
#[test]
fn master_key_fencing_and_recovery_adds() {
    let dir = common::tempdir("bookie-e2e-");
    let mut bookie = start(dir.path());
    let mut c = bookie.client();
    assert_eq!(
        c.call_v3(add(5, 0, 1, entry(5, 0, -1, b"x"), false), None)
            .unwrap()
            .response
            .status(),
        StatusCode::EOK
    );
    assert_eq!(
        c.call_v3(add(5, 1, 9, entry(5, 1, 0, b"x"), false), None)
            .unwrap()
            .response
            .status(),
        StatusCode::EUA
    );
    let fence = |k: Option<Bytes>| Request::ReadEntry {
        ledger_id: 5,
        entry_id: 0,
        master_key: k,
        flag: Some(ReadFlag::FenceLedger),
        previous_lac: None,
        time_out: None,
    };
    assert_eq!(
        c.call_v3(fence(None), None).unwrap().response.status(),
        StatusCode::EUA
    );
    assert_eq!(
        c.call_v3(fence(Some(key(9))), None)
            .unwrap()
            .response
            .status(),
        StatusCode::EUA
    );
    let r = c.call_v3(fence(Some(key(1))), None).unwrap();
    assert_eq!(read_body(&r.response), Some(entry(5, 0, -1, b"x")));
    assert_eq!(
        c.call_v3(add(5, 1, 1, entry(5, 1, 0, b"x"), false), None)
            .unwrap()
            .response
            .status(),
        StatusCode::EFENCED
    );
    assert_eq!(
        c.call_v3(add(5, 1, 1, entry(5, 1, 0, b"r"), true), None)
            .unwrap()
            .response
            .status(),
        StatusCode::EOK
    );
    drop(c);
    bookie.stop();
    bookie.restart();
    let mut c = bookie.client();
    assert_eq!(
        c.call_v2(add(5, 2, 1, entry(5, 2, 1, b"x"), false), false)
            .unwrap()
            .response
            .status(),
        StatusCode::EFENCED,
        "fencing survives a restart"
    );
    let r = c.call_v3(read(5, 1), None).unwrap();
    assert_eq!(read_body(&r.response), Some(entry(5, 1, 0, b"r")));
}

/// A long poll waits for the LAC to pass previousLAC and piggybacks the next entry; another
/// one times out and answers with the current LAC; explicit LAC is written and read back.
#[test]
fn long_poll_and_explicit_lac() {
    let dir = common::tempdir("bookie-e2e-");
    let bookie = start(dir.path());
    let mut writer = bookie.client();
    let mut reader = bookie.client();
    writer
        .call_v3(add(8, 0, 1, entry(8, 0, -1, b"e0"), false), None)
        .unwrap();
    let poll = |prev: i64, timeout: i64| Request::ReadEntry {
        ledger_id: 8,
        entry_id: -1,
        master_key: None,
        flag: Some(ReadFlag::EntryPiggyback),
        previous_lac: Some(prev),
        time_out: Some(timeout),
    };
    // Times out: LAC is -1, nothing moves.
    let started = Instant::now();
    let r = reader.call_v3(poll(-1, 300), None).unwrap();
    assert!(started.elapsed() >= Duration::from_millis(250));
    match r.response {
        Response::ReadEntry {
            status, max_lac, ..
        } => {
            assert_eq!(status, StatusCode::EOK);
            assert_eq!(max_lac, Some(-1));
        }
        other => panic!("unexpected {other:?}"),
    }
    // Wakes when entry 1 carries LAC 0.
    let id = reader.send_v3(poll(-1, 10_000), None).unwrap();
    reader.flush().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    writer
        .call_v3(add(8, 1, 1, entry(8, 1, 0, b"e1"), false), None)
        .unwrap();
    let (got, r) = reader.receive().unwrap();
    assert_eq!(got, id);
    match r.response {
        Response::ReadEntry {
            status,
            entry_id,
            body,
            max_lac,
            ..
        } => {
            assert_eq!(status, StatusCode::EOK);
            assert_eq!(max_lac, Some(0));
            assert_eq!(entry_id, 0);
            assert_eq!(body, Some(entry(8, 0, -1, b"e0")));
        }
        other => panic!("unexpected {other:?}"),
    }
    let mut blob = Vec::new();
    blob.extend_from_slice(&8i64.to_be_bytes());
    blob.extend_from_slice(&5i64.to_be_bytes());
    let wl = Request::WriteLac {
        ledger_id: 8,
        lac: 5,
        master_key: key(1),
        body: Bytes::from(blob.clone()),
    };
    assert_eq!(
        writer.call_v3(wl, None).unwrap().response.status(),
        StatusCode::EOK
    );
    match writer
        .call_v3(Request::ReadLac { ledger_id: 8 }, None)
        .unwrap()
        .response
    {
        Response::ReadLac {
            status,
            lac_body,
            last_entry_body,
            ..
        } => {
            assert_eq!(status, StatusCode::EOK);
            assert_eq!(lac_body.as_deref(), Some(&blob[..]));
            assert_eq!(last_entry_body, Some(entry(8, 1, 0, b"e1")));
        }
        other => panic!("unexpected {other:?}"),
    }
}

/// v2 batch read, GET_LIST_OF_ENTRIES_OF_LEDGER, FORCE_LEDGER and GET_BOOKIE_INFO.
#[test]
fn batch_read_list_force_and_info() {
    let dir = common::tempdir("bookie-e2e-");
    let bookie = start(dir.path());
    let mut c = bookie.client();
    for e in 0..5 {
        c.call_v2(
            add(3, e, 1, entry(3, e, e - 1, &[e as u8; 100]), false),
            false,
        )
        .unwrap();
    }
    let batch = Request::BatchReadEntry {
        ledger_id: 3,
        start_entry_id: 1,
        request_id: 42,
        max_count: 3,
        max_size: 1 << 20,
        fence: false,
        master_key: None,
    };
    match c.call_v2(batch, false).unwrap().response {
        Response::BatchReadEntry {
            status,
            entries,
            request_id,
            ..
        } => {
            assert_eq!(status, StatusCode::EOK);
            assert_eq!(request_id, 42);
            assert_eq!(
                entries,
                (1..4)
                    .map(|e| entry(3, e, e - 1, &[e as u8; 100]))
                    .collect::<Vec<_>>()
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    match c
        .call_v3(Request::GetListOfEntriesOfLedger { ledger_id: 3 }, None)
        .unwrap()
        .response
    {
        Response::GetListOfEntriesOfLedger {
            status,
            availability,
            ..
        } => {
            assert_eq!(status, StatusCode::EOK);
            assert_eq!(availability, Some(net::availability::encode_entries(0..5)));
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(
        c.call_v3(Request::ForceLedger { ledger_id: 3 }, None)
            .unwrap()
            .response
            .status(),
        StatusCode::EOK
    );
    match c
        .call_v3(Request::GetBookieInfo { requested: Some(3) }, None)
        .unwrap()
        .response
    {
        Response::GetBookieInfo {
            status,
            total_disk_capacity,
            free_disk_space,
        } => {
            assert_eq!(status, StatusCode::EOK);
            assert!(total_disk_capacity.unwrap() > 0);
            assert!(free_disk_space.unwrap() > 0);
            assert!(free_disk_space <= total_disk_capacity);
        }
        other => panic!("unexpected {other:?}"),
    }
}

/// A malformed frame closes only its own connection; the bookie keeps serving others.
#[test]
fn bad_frame_closes_only_that_connection() {
    use std::io::{Read, Write};
    let dir = common::tempdir("bookie-e2e-");
    let bookie = start(dir.path());
    let mut raw = std::net::TcpStream::connect(("127.0.0.1", bookie.port())).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // A frame claiming 1 GiB: over the limit, the connection is closed without a reply.
    raw.write_all(&[0x40, 0, 0, 0, 1, 2, 3, 4]).unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(raw.read(&mut buf).unwrap_or(0), 0, "closed without a reply");
    let mut c = bookie.client();
    assert_eq!(
        c.call_v3(add(4, 0, 1, entry(4, 0, -1, b"ok"), false), None)
            .unwrap()
            .response
            .status(),
        StatusCode::EOK
    );
}

/// Crash durability: adds pipelined from several connections, the bookie killed with SIGKILL
/// at several points under load, restarted; every acknowledged entry reads back byte for byte.
#[test]
fn acknowledged_entries_survive_sigkill() {
    let dir = common::tempdir("bookie-e2e-");
    let mut bookie = start(dir.path());
    let mut acked: Vec<(i64, i64, Bytes)> = Vec::new();
    for round in 0..3i64 {
        let port = bookie.port();
        // Every writer is connected before the clock to the kill starts: on a loaded machine a
        // thread may otherwise only connect after the kill.
        let connected = std::sync::Arc::new(std::sync::Barrier::new(5));
        let writers: Vec<_> = (0..4i64)
            .map(|w| {
                let connected = connected.clone();
                std::thread::spawn(move || {
                    let c = BlockingClient::connect(("127.0.0.1", port), ClientConfig::default());
                    connected.wait();
                    let mut c = c.unwrap();
                    c.stream()
                        .set_read_timeout(Some(Duration::from_secs(5)))
                        .unwrap();
                    let ledger = 1000 + round * 10 + w;
                    let mut acked = Vec::new();
                    let mut sent = std::collections::HashMap::new();
                    let mut next = 0i64;
                    'outer: loop {
                        for _ in 0..32 {
                            let body = entry(
                                ledger,
                                next,
                                next - 1,
                                format!("r{round} w{w} e{next}").as_bytes(),
                            );
                            match c.send_v3(add(ledger, next, 1, body.clone(), false), None) {
                                Ok(id) => {
                                    sent.insert(id, (next, body));
                                }
                                Err(_) => break 'outer,
                            }
                            next += 1;
                        }
                        if c.flush().is_err() {
                            break;
                        }
                        while !sent.is_empty() {
                            match c.receive() {
                                Ok((id, r)) => {
                                    if let Some((e, body)) = sent.remove(&id) {
                                        if r.response.status() == StatusCode::EOK {
                                            acked.push((ledger, e, body));
                                        }
                                    }
                                }
                                Err(_) => break 'outer,
                            }
                        }
                    }
                    acked
                })
            })
            .collect();
        connected.wait();
        std::thread::sleep(Duration::from_millis(300 + 200 * round as u64));
        bookie.kill();
        for w in writers {
            acked.extend(w.join().unwrap());
        }
        bookie.restart();
    }
    assert!(
        acked.len() > 100,
        "the load acknowledged only {} adds",
        acked.len()
    );
    let mut c = bookie.client();
    for (ledger, e, body) in &acked {
        let r = c.call_v3(read(*ledger, *e), None).unwrap();
        assert_eq!(
            read_body(&r.response).as_ref(),
            Some(body),
            "acknowledged entry {ledger}/{e} lost"
        );
    }
    bookie.stop();
}

/// Entries flushed to ledger storage (a 1 MiB write cache flushes every ~512 KiB, and at least
/// every 200 ms) are read back from disk, by entry, as "last entry", in batches and in the
/// list of entries, before and after a restart and after a SIGKILL.
#[test]
fn flushed_entries_are_served_from_ledger_storage() {
    let dir = common::tempdir("bookie-e2e-");
    let mut bookie = launch(
        dir.path(),
        &["--write-cache-mb", "1", "--flush-interval-ms", "200"],
    )
    .start();
    let mut c = bookie.client();
    let payload = vec![7u8; 3000];
    for e in 0..600 {
        let r = c
            .call_v2(add(11, e, 1, entry(11, e, e - 1, &payload), false), false)
            .unwrap();
        assert_eq!(r.response.status(), StatusCode::EOK, "add {e}");
    }
    std::thread::sleep(Duration::from_millis(600));
    let check = |c: &mut BlockingClient| {
        for e in [0, 1, 250, 599] {
            let r = c.call_v3(read(11, e), None).unwrap();
            assert_eq!(
                read_body(&r.response),
                Some(entry(11, e, e - 1, &payload)),
                "entry {e}"
            );
        }
        let r = c.call_v3(read(11, -1), None).unwrap();
        assert_eq!(read_body(&r.response), Some(entry(11, 599, 598, &payload)));
        assert_eq!(
            c.call_v3(read(11, 600), None).unwrap().response.status(),
            StatusCode::ENOENTRY
        );
        let batch = Request::BatchReadEntry {
            ledger_id: 11,
            start_entry_id: 10,
            request_id: 1,
            max_count: 5,
            max_size: 1 << 20,
            fence: false,
            master_key: None,
        };
        match c.call_v2(batch, false).unwrap().response {
            Response::BatchReadEntry {
                status, entries, ..
            } => {
                assert_eq!(status, StatusCode::EOK);
                assert_eq!(entries.len(), 5);
                assert_eq!(entries[0], entry(11, 10, 9, &payload));
            }
            other => panic!("unexpected {other:?}"),
        }
        match c
            .call_v3(Request::GetListOfEntriesOfLedger { ledger_id: 11 }, None)
            .unwrap()
            .response
        {
            Response::GetListOfEntriesOfLedger { availability, .. } => {
                assert_eq!(
                    availability,
                    Some(net::availability::encode_entries(0..600))
                )
            }
            other => panic!("unexpected {other:?}"),
        }
    };
    check(&mut c);
    drop(c);
    bookie.stop();
    bookie.restart();
    check(&mut bookie.client());
    bookie.kill();
    bookie.restart();
    let mut c = bookie.client();
    check(&mut c);
    // The master key survived in ledger storage's metadata.
    assert_eq!(
        c.call_v3(add(11, 600, 2, entry(11, 600, 599, b"x"), false), None)
            .unwrap()
            .response
            .status(),
        StatusCode::EUA
    );
    let journal = dir.path().join("journal");
    let segments: usize = std::fs::read_dir(&journal)
        .unwrap()
        .flatten()
        .filter(|shard| shard.path().is_dir())
        .map(|shard| {
            std::fs::read_dir(shard.path())
                .unwrap()
                .flatten()
                .filter(|f| f.file_name().to_string_lossy().ends_with(".jrnl"))
                .count()
        })
        .sum();
    assert!(
        segments <= 8,
        "the journal was trimmed after flushes ({segments} live segments)"
    );
}
