//! Memory bounds against hostile or careless clients, on a real `bookie` process.
//!
//! Goal: the bookie's resident memory stays within its caches plus a constant whatever its
//! clients do, and one bad client cannot starve the others. Method: each test starts a bookie
//! (one shard, free port, temporary data dir, stderr to a file), measures its RSS from
//! `/proc/<pid>/status`, lets a misbehaving client loose — one that pipelines reads of 1 MiB
//! entries and never reads its socket, a thousand idle connections, a flood of bad frames — and
//! asserts a bound on the RSS growth and that a well-behaved client is still served. Only memory
//! and correctness are asserted here; latency belongs to benchmarks.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
mod common;

use common::bookie::{BookieBuilder, BookieProcess};
use common::{entry, free_port, read};
use net::{codec, ProtocolVersion, Request, RequestFrame, RequestHeader, StatusCode};

const MIB: usize = 1 << 20;

/// A listening bookie with `shards` unpinned shards, no admin server, a 64 MiB write cache,
/// data in `<dir>/data`, stderr to `<dir>/bookie.log` and `extra` arguments, on a free port.
fn start_with(dir: &Path, shards: usize, extra: &[&str]) -> BookieProcess {
    BookieBuilder::serve(free_port())
        .args(["--shards", &shards.to_string()])
        .args(["--no-pin", "--no-http", "--write-cache-mb", "64"])
        .data_dir(&dir.join("data"))
        .args(extra)
        .log_to(&dir.join("bookie.log"))
        .start()
}

fn start_shards(dir: &Path, shards: usize) -> BookieProcess {
    start_with(dir, shards, &[])
}

fn start(dir: &Path) -> BookieProcess {
    start_shards(dir, 1)
}

fn add(ledger: i64, e: i64, body: Bytes) -> Request {
    Request::AddEntry {
        ledger_id: ledger,
        entry_id: e,
        master_key: Bytes::from_static(&[7; 20]),
        body,
        recovery: false,
        write_flags: None,
    }
}

/// v3 READ requests for entries 0..8 of `ledgers` (in turn), `n` of them, as one byte string.
fn pipelined_reads(ledgers: &[i64], n: usize) -> Bytes {
    let mut out = BytesMut::new();
    for i in 0..n {
        let ledger = ledgers[i % ledgers.len()];
        let frame = RequestFrame {
            header: RequestHeader::V3 {
                version: ProtocolVersion::Three,
                txn_id: i as u64,
                priority: None,
            },
            request: read(ledger, ((i / ledgers.len()) % 8) as i64),
        };
        codec::encode_request(&frame, &mut out).expect("encode");
    }
    out.freeze()
}

/// Writes `requests` over and over to `stream` until `stop`, never reading a reply. The socket
/// has a write timeout, so a bookie that stops reading does not hang this thread.
fn never_read(mut stream: TcpStream, requests: Bytes, stop: Arc<AtomicBool>) -> usize {
    stream
        .set_write_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut sent = 0;
    while !stop.load(Ordering::Relaxed) {
        match stream.write(&requests) {
            Ok(n) => sent += n,
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => break,
        }
    }
    sent
}

/// A client that pipelines reads of 1 MiB entries and never reads its socket must not make the
/// bookie's memory grow without bound, neither while it is connected nor after it closes; a
/// second client is served meanwhile. Entries served from the write cache, one shard.
#[test]
fn a_client_that_never_reads_its_replies_is_bounded() {
    never_reading_client(1, false);
}

/// The same with two shards (half the reads cross to the other shard) and every entry in
/// ledger storage (cache-miss reads on the reader threads).
#[test]
fn a_client_that_never_reads_cold_reads_across_shards_is_bounded() {
    never_reading_client(2, true);
}

fn never_reading_client(shards: usize, cold: bool) {
    let dir = common::tempdir("bookie-mem-");
    let mut bookie = start_shards(dir.path(), shards);
    let mut writer = bookie.client();
    let ledgers = [1, 2, 3, 4];
    let payload = vec![0x5a; MIB];
    for &ledger in &ledgers {
        for e in 0..8 {
            let r = writer
                .call_v3(add(ledger, e, entry(ledger, e, e - 1, &payload)), None)
                .unwrap();
            assert_eq!(r.response.status(), StatusCode::EOK, "add {ledger}/{e}");
        }
    }
    drop(writer);
    if cold {
        // A restart replays the journal into the write cache: flush it to ledger storage over
        // the admin server, so that every read below is a cache-miss read.
        bookie.stop();
        bookie = BookieBuilder::serve(free_port())
            .args(["--shards", &shards.to_string()])
            .args(["--no-pin", "--write-cache-mb", "64"])
            .http_port(free_port())
            .data_dir(&dir.path().join("data"))
            .log_to(&dir.path().join("bookie.log"))
            .start();
        bookie.flush_write_cache();
    }
    let before = bookie.rss();

    let stop = Arc::new(AtomicBool::new(false));
    let requests = pipelined_reads(&ledgers, 4096);
    let hostile = TcpStream::connect(("127.0.0.1", bookie.port())).unwrap();
    let flooder = {
        let (stream, stop) = (hostile.try_clone().unwrap(), stop.clone());
        std::thread::spawn(move || never_read(stream, requests, stop))
    };

    let mut peak = before;
    let mut served = 0;
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(6) {
        std::thread::sleep(Duration::from_millis(250));
        assert!(bookie.alive(), "the bookie died");
        peak = peak.max(bookie.rss());
        // Another client keeps being served: an add, and reads of 1 MiB entries.
        let mut other = bookie.client();
        let e = served as i64;
        let r = other
            .call_v3(add(9, e, entry(9, e, e - 1, b"still served")), None)
            .unwrap();
        assert_eq!(r.response.status(), StatusCode::EOK);
        for &ledger in &ledgers {
            let r = other.call_v3(read(ledger, 3), None).unwrap();
            assert_eq!(r.response.status(), StatusCode::EOK);
        }
        served += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let sent = flooder.join().unwrap();
    drop(hostile);
    // After the close nothing more is produced for it.
    let mut after_close = 0;
    for _ in 0..8 {
        std::thread::sleep(Duration::from_millis(250));
        after_close = after_close.max(bookie.rss());
    }
    let grew = peak.saturating_sub(before);
    let grew_after = after_close.saturating_sub(before);
    eprintln!(
        "never-reading client ({shards} shards, cold {cold}): sent {} KiB of requests; RSS \
         before {} MiB, peak +{} MiB, after close +{} MiB; {served} rounds of the other client",
        sent / 1024,
        before / MIB,
        grew / MIB,
        grew_after / MIB
    );
    assert!(
        sent > 64 * 1024,
        "the hostile client sent too little to test anything"
    );
    assert!(
        grew < 160 * MIB,
        "RSS grew by {} MiB under a never-reading client",
        grew / MIB
    );
    assert!(
        grew_after < 160 * MIB,
        "RSS grew by {} MiB after the never-reading client closed",
        grew_after / MIB
    );
    assert!(served >= 5);
}

/// With Java's `waitTimeoutOnResponseBackpressureMs` and `closeChannelOnResponseTimeout`, a
/// client that does not read its replies for that long is disconnected.
#[test]
fn a_stuck_client_is_closed_after_the_response_timeout() {
    let dir = common::tempdir("bookie-mem-");
    let conf = dir.path().join("bk_server.conf");
    std::fs::write(
        &conf,
        "waitTimeoutOnResponseBackpressureMs=300\ncloseChannelOnResponseTimeout=true\n",
    )
    .unwrap();
    let bookie = start_with(
        dir.path(),
        1,
        &["--conf", conf.to_str().unwrap(), "--bind", "127.0.0.1"],
    );
    let mut writer = bookie.client();
    let payload = vec![0x5a; MIB];
    for e in 0..8 {
        let r = writer
            .call_v3(add(1, e, entry(1, e, e - 1, &payload)), None)
            .unwrap();
        assert_eq!(r.response.status(), StatusCode::EOK);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let hostile = TcpStream::connect(("127.0.0.1", bookie.port())).unwrap();
    let flooder = {
        let (stream, stop) = (hostile.try_clone().unwrap(), stop.clone());
        let requests = pipelined_reads(&[1], 2048);
        std::thread::spawn(move || never_read(stream, requests, stop))
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let closed = loop {
        let log = bookie.log_text();
        if log.contains("has not read its replies") && log.contains("closing it") {
            break true;
        }
        if Instant::now() > deadline {
            break false;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    stop.store(true, Ordering::Relaxed);
    flooder.join().unwrap();
    assert!(closed, "the stuck connection was not closed");
    // The bookie has closed its side: draining the socket ends in EOF or a reset.
    hostile
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut sink = vec![0u8; 1 << 20];
    let mut reader = &hostile;
    let ended = loop {
        match reader.read(&mut sink) {
            Ok(0) | Err(_) => break true,
            Ok(_) => {}
        }
    };
    assert!(ended);
    let r = writer.call_v3(read(1, 0), None).unwrap();
    assert_eq!(r.response.status(), StatusCode::EOK);
}

/// A thousand idle connections cost a bounded amount of memory, and the bookie still serves.
#[test]
fn a_thousand_idle_connections_are_cheap() {
    let dir = common::tempdir("bookie-mem-");
    let bookie = start(dir.path());
    let before = bookie.rss();
    let mut idle = Vec::new();
    for _ in 0..1000 {
        idle.push(TcpStream::connect(("127.0.0.1", bookie.port())).unwrap());
    }
    // Half of them send one byte of a frame and stop.
    for s in idle.iter_mut().step_by(2) {
        s.write_all(&[0, 0]).unwrap();
    }
    std::thread::sleep(Duration::from_millis(500));
    let mut c = bookie.client();
    let r = c
        .call_v3(add(3, 0, entry(3, 0, -1, b"after idle")), None)
        .unwrap();
    assert_eq!(r.response.status(), StatusCode::EOK);
    let grew = bookie.rss().saturating_sub(before);
    eprintln!("1000 idle connections: RSS +{} KiB", grew / 1024);
    assert!(
        grew < 24 * MIB,
        "1000 idle connections cost {} MiB",
        grew / MIB
    );
}

/// A flood of bad frames closes each offending connection, costs no memory, and is logged as a
/// summary rather than one line per frame.
#[test]
fn a_flood_of_bad_frames_is_logged_in_summary() {
    let dir = common::tempdir("bookie-mem-");
    let mut bookie = start(dir.path());
    let before = bookie.rss();
    let garbage = [0u8, 0, 0, 8, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4];
    for _ in 0..2000 {
        let mut s = TcpStream::connect(("127.0.0.1", bookie.port())).unwrap();
        let _ = s.write_all(&garbage);
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut sink = [0u8; 64];
        // The bookie closes the connection (EOF or reset).
        let _ = s.read(&mut sink);
    }
    assert!(bookie.alive(), "the bookie died");
    let mut c = bookie.client();
    let r = c
        .call_v3(add(4, 0, entry(4, 0, -1, b"after the flood")), None)
        .unwrap();
    assert_eq!(r.response.status(), StatusCode::EOK);
    let grew = bookie.rss().saturating_sub(before);
    assert!(grew < 24 * MIB, "2000 bad frames cost {} MiB", grew / MIB);
    let log = bookie.log_text();
    let lines = log.lines().filter(|l| l.contains("bad frame")).count();
    eprintln!(
        "2000 bad frames: {lines} log lines, RSS +{} KiB",
        grew / 1024
    );
    assert!(
        lines < 100,
        "{lines} log lines for 2000 bad frames: not rate limited"
    );
}
