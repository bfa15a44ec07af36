//! A failing disk under a real `bookie serve` (issue 15): the storage port's debug-only fault
//! switch (`storage::fault`, feature `fault-injection`, driven through the control file named
//! by `BOOKIE_FAULT_INJECTION_FILE`) makes the writes or the syncs of the journal or of the
//! ledger directory fail with EIO, on a real disk.
//!
//! What must hold (ARCHITECTURE.md §5 invariant 2 and §9): an add is acknowledged only once its
//! journal record is synced, so adds in flight when the journal fails are answered with an error,
//! never EOK; the journal never retries, and the whole bookie turns read-only (EREADONLY) until
//! restarted — it does not exit, and it still serves reads. A failed flush of the ledger
//! storage does the same (adds acknowledged meanwhile are in the journal). After a stop and a
//! restart without the fault, every add acknowledged before reads back identical, and the bookie
//! takes adds again.
//!
//! Run with `cargo test -p bookie --features fault-injection --test disk_faults`.
#![cfg(feature = "fault-injection")]

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::bookie::{BookieBuilder, BookieProcess};
use common::{entry, free_port, read};
use net::client::blocking::BlockingClient;
use net::{Request, Response, StatusCode};

/// The shard of a ledger, as the bookie routes it (`bookie::shard::shard_of`).
fn shard_of(ledger: i64, shards: usize) -> usize {
    let h = (ledger as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    ((h >> 32) % shards as u64) as usize
}

fn add(ledger: i64, e: i64) -> (Request, Bytes) {
    let payload = format!(
        "ledger {ledger} entry {e} {}",
        "x".repeat((e % 7) as usize * 100)
    );
    let body = entry(ledger, e, e - 1, payload.as_bytes());
    let request = Request::AddEntry {
        ledger_id: ledger,
        entry_id: e,
        master_key: Bytes::from(vec![7u8; 20]),
        body: body.clone(),
        recovery: false,
        write_flags: None,
    };
    (request, body)
}

/// A bookie with two shards, the fault control file `control`, its log in `log`; ledger
/// storage flushed every 300 ms, so a failing ledger disk is met within a second.
fn launch(dir: &Path, port: u16, control: &Path, log: &Path) -> BookieBuilder {
    BookieBuilder::serve(port)
        .args(["--shards", "2", "--no-pin", "--flush-interval-ms", "300"])
        .data_dir(dir)
        .env("BOOKIE_LOG", "info")
        .env(
            storage::fault::CONTROL_ENV,
            control.to_str().expect("utf-8"),
        )
        .listen_timeout(Duration::from_secs(60))
        .log_to(log)
}

/// Polls `cond` every 20 ms for `within`; `false` if it never held.
fn eventually(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    cond()
}

/// Adds entries `from..to` to each ledger, one call at a time; all must be acknowledged.
fn add_all(c: &mut BlockingClient, ledgers: &[i64], from: i64, to: i64, acked: &mut Acked) {
    for e in from..to {
        for &l in ledgers {
            let (req, body) = add(l, e);
            let r = c.call_v3(req, None).expect("add");
            assert_eq!(r.response.status(), StatusCode::EOK, "add {l}/{e}");
            acked.push((l, e, body));
        }
    }
}

type Acked = Vec<(i64, i64, Bytes)>;

/// Turns the fault on: `kind` (`write`/`fsync`) under `dir`, and waits until the bookie says
/// it applies it.
fn inject(b: &BookieProcess, control: &Path, kind: &str, dir: &Path) {
    std::fs::write(control, format!("{kind} {}\n", dir.display())).expect("control file");
    assert!(
        eventually(Duration::from_secs(10), || b
            .log_text()
            .contains("fail with EIO from now")),
        "the bookie did not apply the fault:\n{}",
        b.log_text()
    );
}

/// The read-only refusal: an add on a fresh connection is answered EREADONLY.
fn refuses_adds(b: &BookieProcess, ledger: i64, entry: i64) -> bool {
    let mut c = b.client();
    let (req, _) = add(ledger, entry);
    c.call_v3(req, None)
        .is_ok_and(|r| r.response.status() == StatusCode::EREADONLY)
}

/// SIGTERM, which must end the failed bookie within 30 s (any status: its journal is broken).
fn stop_within(b: &mut BookieProcess, within: Duration) {
    b.signal(nix::sys::signal::Signal::SIGTERM);
    assert!(
        eventually(within, || b.exited().is_some()),
        "the failed bookie did not stop within {within:?} of SIGTERM:\n{}",
        b.log_text()
    );
}

/// After the restart without the fault: every acknowledged add reads back identical, and the
/// bookie takes adds again.
fn check_after_restart(b: &BookieProcess, acked: &Acked, ledgers: &[i64]) {
    let mut c = b.client();
    for (l, e, body) in acked {
        let r = c.call_v3(read(*l, *e), None).expect("read");
        match r.response {
            Response::ReadEntry {
                status: StatusCode::EOK,
                body: Some(got),
                ..
            } => assert_eq!(&got, body, "entry {l}/{e} differs after the restart"),
            other => panic!("acknowledged entry {l}/{e} lost after the restart: {other:?}"),
        }
    }
    for &l in ledgers {
        let next = acked.iter().filter(|a| a.0 == l).count() as i64 + 1_000;
        let (req, _) = add(l, next);
        let r = c.call_v3(req, None).expect("add after restart");
        assert_eq!(r.response.status(), StatusCode::EOK, "writable again");
    }
}

/// One ledger per shard.
fn ledgers() -> [i64; 2] {
    let a = (1..).find(|l| shard_of(*l, 2) == 0).expect("shard 0");
    let b = (1..).find(|l| shard_of(*l, 2) == 1).expect("shard 1");
    [a, b]
}

struct Setup {
    _dir: tempfile::TempDir,
    data: PathBuf,
    control: PathBuf,
    launch: BookieBuilder,
}

fn setup(name: &str) -> Setup {
    let dir = common::tempdir(&format!("bookie-disk-fault-{name}-"));
    let data = dir.path().join("data");
    let control = dir.path().join("faults");
    let launch = launch(&data, free_port(), &control, &dir.path().join("bookie.log"));
    Setup {
        _dir: dir,
        data,
        control,
        launch,
    }
}

/// The journal's writes or syncs fail while adds are in flight.
fn journal_fails(kind: &str) {
    let s = setup(&format!("journal-{kind}"));
    let b = s.launch.start();
    let ls = ledgers();
    let mut acked = Acked::new();
    let mut c = b.client();
    add_all(&mut c, &ls, 0, 40, &mut acked);

    inject(&b, &s.control, kind, &s.data.join("journal"));
    // A window of adds to both shards, in flight together: none may be acknowledged.
    let mut sent = 0;
    for e in 40..60 {
        for &l in &ls {
            c.send_v3(add(l, e).0, None).expect("send");
            sent += 1;
        }
    }
    c.flush().expect("flush");
    let (mut failed, mut dropped) = (0, false);
    for _ in 0..sent {
        match c.receive() {
            Ok((_, frame)) => {
                let status = frame.response.status();
                assert_ne!(
                    status,
                    StatusCode::EOK,
                    "an add was acknowledged after its journal {kind} failed"
                );
                failed += 1;
            }
            // The connection dropped: nothing more can be acknowledged on it.
            Err(_) => {
                dropped = true;
                break;
            }
        }
    }
    assert!(failed > 0 || dropped, "no answer at all");

    // The bookie stays up, read-only for good: adds refused, reads served.
    assert!(
        eventually(Duration::from_secs(10), || refuses_adds(&b, ls[0], 100)
            && refuses_adds(&b, ls[1], 100)),
        "the bookie still takes adds after its journal failed:\n{}",
        b.log_text()
    );
    let r = b.client().call_v3(read(ls[0], 0), None).expect("read");
    assert_eq!(r.response.status(), StatusCode::EOK, "reads go on");
    read_only_then_heal(&s, b, "will not retry", &acked, &ls);
}

/// The ledger storage's writes or syncs fail: the next flush fails, the bookie turns
/// read-only; adds acknowledged until then are in the journal.
fn ledgers_fail(kind: &str) {
    let s = setup(&format!("ledgers-{kind}"));
    let b = s.launch.start();
    let ls = ledgers();
    let mut acked = Acked::new();
    let mut c = b.client();
    add_all(&mut c, &ls, 0, 40, &mut acked);
    // Flushed at least once before the fault (the flush interval is 300 ms).
    std::thread::sleep(Duration::from_millis(700));

    inject(&b, &s.control, kind, &s.data.join("ledgers"));
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut e = 40;
    let refused = loop {
        assert!(
            Instant::now() < deadline,
            "still taking adds 20 s after the ledger disk failed:\n{}",
            b.log_text()
        );
        let (req, body) = add(ls[(e % 2) as usize], e / 2 + 40);
        let r = c.call_v3(req, None).expect("add");
        match r.response.status() {
            StatusCode::EOK => acked.push((ls[(e % 2) as usize], e / 2 + 40, body)),
            other => break other,
        }
        e += 1;
        std::thread::sleep(Duration::from_millis(5));
    };
    assert_eq!(refused, StatusCode::EREADONLY);
    assert!(refuses_adds(&b, ls[0], 10_000) && refuses_adds(&b, ls[1], 10_000));
    read_only_then_heal(&s, b, "ledger storage", &acked, &ls);
}

/// The bookie, up and read-only after the fault (its log names `cause`, no panic), is stopped;
/// healed (no fault) and restarted, it has everything acknowledged.
fn read_only_then_heal(s: &Setup, mut b: BookieProcess, cause: &str, acked: &Acked, ls: &[i64]) {
    assert!(b.alive(), "the bookie exited:\n{}", b.log_text());
    let log = b.log_text();
    assert!(log.contains(cause) && log.contains("read-only"), "{log}");
    assert!(!log.contains("panicked"), "{log}");
    stop_within(&mut b, Duration::from_secs(30));
    std::fs::remove_file(&s.control).expect("clear the fault");
    let b = s.launch.start();
    check_after_restart(&b, acked, ls);
}

#[test]
fn a_failing_journal_fsync_acknowledges_nothing_more_and_loses_nothing() {
    journal_fails("fsync");
}

#[test]
fn a_failing_journal_write_acknowledges_nothing_more_and_loses_nothing() {
    journal_fails("write");
}

#[test]
fn a_failing_ledger_fsync_turns_the_bookie_read_only_and_loses_nothing() {
    ledgers_fail("fsync");
}

#[test]
fn a_failing_ledger_write_turns_the_bookie_read_only_and_loses_nothing() {
    ledgers_fail("write");
}
