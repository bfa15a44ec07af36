//! Restarts of a standalone `bookie` process: what a supervisor sees when it restarts a killed
//! bookie at once. The directory lock of the dying process is waited for instead of refusing
//! the start, and the port accepts connections only once every shard has replayed its journal
//! (a connection accepted earlier would have its adds hang behind the replaying shard).

use std::fs::File;
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
mod common;

use common::bookie::{BookieBuilder, BookieProcess};
use common::{entry, free_port};
use net::client::blocking::BlockingClient;
use net::{Request, StatusCode};
use nix::fcntl::{Flock, FlockArg};

/// `bookie serve` with two shards on `port`, data under `dir`, stderr to `log` (or inherited).
fn spawn(dir: &Path, port: u16, log: Option<&Path>) -> BookieProcess {
    let launch = BookieBuilder::serve(port)
        .args(["--shards", "2", "--no-pin"])
        .args(["--write-cache-mb", "256", "--flush-interval-ms", "3600000"])
        .data_dir(dir)
        .env("BOOKIE_LOG", "info")
        .listen_timeout(Duration::from_secs(60));
    match log {
        Some(path) => launch.log_to(path).spawn(),
        None => launch.spawn(),
    }
}

/// Waits until the bookie accepts a connection, or fails if it exits first; a client of it
/// with a 30 s read timeout.
fn wait_serving(b: &mut BookieProcess) -> BlockingClient {
    b.wait_listening();
    b.client_with_timeout(Duration::from_secs(30))
}

fn add(ledger: i64, e: i64, payload: &[u8]) -> Request {
    Request::AddEntry {
        ledger_id: ledger,
        entry_id: e,
        master_key: Bytes::from(vec![7u8; 20]),
        body: entry(ledger, e, e - 1, payload),
        recovery: false,
        write_flags: None,
    }
}

/// The shard of a ledger, as the bookie routes it (`bookie::shard::shard_of`).
fn shard_of(ledger: i64, shards: usize) -> usize {
    let h = (ledger as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    ((h >> 32) % shards as u64) as usize
}

/// A restart while the killed bookie's process still holds the journal directory's lock (held
/// here until the new bookie has found it held, then 300 ms more, like the 9-165 ms a SIGKILLed
/// bookie's threads take to exit) waits for the lock and serves, instead of exiting at once
/// with "in use by another bookie process".
#[test]
fn a_restart_waits_for_the_lock_of_a_dying_bookie() {
    let dir = common::tempdir("bookie-restart-lock-");
    let journal = dir.path().join("journal");
    std::fs::create_dir_all(&journal).unwrap();
    let held = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(journal.join("LOCK"))
        .unwrap();
    let held = Flock::lock(held, FlockArg::LockExclusiveNonblock)
        .unwrap_or_else(|(_, e)| panic!("cannot take the lock: {e}"));
    let port = free_port();
    let log = dir.path().join("bookie.log");
    let mut b = spawn(dir.path(), port, Some(&log));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("retrying for up to") {
            break;
        }
        if let Some(status) = b.exited() {
            panic!("the bookie exited with {status} on a held lock:\n{text}");
        }
        assert!(Instant::now() < deadline, "the bookie never tried the lock");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(300));
    drop(held);
    let mut c = wait_serving(&mut b);
    let r = c.call_v3(add(1, 0, b"after the lock"), None).expect("add");
    assert_eq!(r.response.status(), StatusCode::EOK);
}

/// After a SIGKILL one shard has a long journal to replay and the other an empty one. The port
/// must refuse connections until both have replayed: when the first connection succeeds, the
/// bookie's log already holds both shards' "replayed" lines (the log is written before the
/// listeners are bound, so reading it right after the connect is causally ordered).
#[test]
fn the_port_accepts_only_after_every_shard_replayed() {
    let dir = common::tempdir("bookie-restart-bind-");
    let port = free_port();
    let slow = (1..).find(|l| shard_of(*l, 2) == 0).unwrap();
    let mut b = spawn(dir.path(), port, None);
    let mut c = wait_serving(&mut b);
    // Many small records for one shard, pipelined in windows; nothing flushed (no checkpoint):
    // the whole journal is replayed after the kill.
    let records = 200_000i64;
    let window = 2_000i64;
    let payload = [0x5au8; 16];
    for start in (0..records).step_by(window as usize) {
        for e in start..start + window {
            c.send_v2(add(slow, e, &payload), false).expect("send");
        }
        c.flush().expect("flush");
        for _ in 0..window {
            let (_, frame) = c.receive().expect("reply");
            assert_eq!(frame.response.status(), StatusCode::EOK);
        }
    }
    drop(c);
    b.kill();

    let log = dir.path().join("restart.log");
    let mut b = spawn(dir.path(), port, Some(&log));
    let deadline = Instant::now() + Duration::from_secs(120);
    let seen = loop {
        if b.accepts() {
            break std::fs::read_to_string(&log).expect("read the log");
        }
        if let Some(status) = b.exited() {
            panic!("the bookie exited with {status} while replaying");
        }
        assert!(
            Instant::now() < deadline,
            "the bookie did not start serving"
        );
        std::thread::sleep(Duration::from_millis(1));
    };
    let replayed = |shard: usize| seen.contains(&format!("shard {shard}: journal "));
    assert!(
        replayed(0) && replayed(1),
        "a connection was accepted before every shard replayed its journal; log so far:\n{seen}"
    );
    let replay_line = seen
        .lines()
        .find(|l| l.contains("shard 0: journal "))
        .unwrap_or_default();
    eprintln!("slow shard: {replay_line}");
    let mut c = wait_serving(&mut b);
    let r = c
        .call_v3(add(slow, records, &payload), None)
        .expect("add after the restart");
    assert_eq!(r.response.status(), StatusCode::EOK);
}
