//! The engine against the sink: rates, quorums, timeouts and verified reads.

use super::*;
use crate::sink::Sink;

fn config(bookies: Vec<SocketAddr>) -> EngineConfig {
    EngineConfig {
        bookies,
        protocol: Protocol::V3,
        connections: 1,
        ledgers: 4,
        first_ledger_id: 1000,
        master_key: crate::entry::master_key(b""),
        write: Some(WriteConfig {
            mode: Mode::Open {
                rate: 2000.0,
                arrival: Arrival::Uniform,
            },
            sizes: SizeDist::Fixed(1024),
            ensemble: 1,
            write_quorum: 1,
            ack_quorum: 1,
            digest: DigestType::Crc32c,
        }),
        read: None,
        preload_entries: 0,
        preloaded: false,
        digest: DigestType::Crc32c,
        preload_size: 1024,
        warmup: Duration::from_millis(200),
        duration: Duration::from_millis(1000),
        timeout: Duration::from_secs(5),
        threads: 1,
        seed: 1,
        max_outstanding: 1000,
        send_tick: std::time::Duration::from_micros(50),
    }
}

/// Open loop against the sink: the achieved rate is the target and every op succeeds.
#[test]
fn open_loop_against_the_sink_hits_the_rate() {
    let sink = Sink::start("127.0.0.1:0", 1024).expect("sink");
    let r = run(&config(vec![sink.addr()])).expect("runs");
    let w = r.write.expect("write side");
    assert_eq!(w.errors + w.timeouts + w.not_sent, 0);
    // 2000/s for 1 s.
    assert!((1990..=2010).contains(&w.ops_ok), "{}", w.ops_ok);
    assert_eq!(w.latency.len(), w.ops_ok);
    assert!(w.latency.value_at_quantile(0.5) < 50_000);
    assert!(sink.requests() >= 2000 + 400 - 5);
}

/// E3 W3 A2 against three sinks, v2, closed loop: every add reaches all three.
#[test]
fn quorum_writes_reach_the_write_set() {
    let sinks: Vec<Sink> = (0..3)
        .map(|_| Sink::start("127.0.0.1:0", 64).expect("sink"))
        .collect();
    let mut c = config(sinks.iter().map(Sink::addr).collect());
    c.protocol = Protocol::V2;
    c.write = Some(WriteConfig {
        mode: Mode::Closed { outstanding: 32 },
        sizes: SizeDist::Uniform(10, 2000),
        ensemble: 3,
        write_quorum: 3,
        ack_quorum: 2,
        digest: DigestType::Crc32,
    });
    c.warmup = Duration::ZERO;
    c.duration = Duration::from_millis(300);
    let r = run(&c).expect("runs");
    let w = r.write.expect("write side");
    assert!(w.ops_ok > 100, "{}", w.ops_ok);
    assert_eq!(w.errors + w.timeouts, 0);
    // The third copy of the last adds may still be in a sink's socket buffer (the add
    // completed at the second ack): give the sinks a moment to count them.
    let mut total: u64 = 0;
    for _ in 0..100 {
        total = sinks.iter().map(Sink::requests).sum();
        if total >= 3 * w.ops_ok {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        total >= 3 * w.ops_ok,
        "{total} requests for {} adds",
        w.ops_ok
    );
    let per: Vec<u64> = sinks.iter().map(Sink::requests).collect();
    assert!(per.iter().all(|&n| n >= w.ops_ok), "{per:?}");
}

/// A listener that accepts one connection, never reads or answers it, and closes it after 3 s.
fn silent_bookie() -> (SocketAddr, std::thread::JoinHandle<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
    let addr = listener.local_addr().expect("addr");
    let keep = std::thread::spawn(move || {
        let conn = listener.accept();
        std::thread::sleep(Duration::from_secs(3));
        drop(conn);
    });
    (addr, keep)
}

/// A bookie that never answers: the open-loop ops time out and are counted as such.
#[test]
fn silent_bookie_gives_timeouts_not_hangs() {
    let (addr, keep) = silent_bookie();
    let mut c = config(vec![addr]);
    c.warmup = Duration::ZERO;
    c.duration = Duration::from_millis(200);
    c.timeout = Duration::from_millis(300);
    let started = Instant::now();
    let r = run(&c).expect("runs");
    assert!(started.elapsed() < Duration::from_secs(3));
    let w = r.write.expect("write side");
    assert_eq!(w.ops_ok, 0);
    assert!(w.timeouts >= 390, "{}", w.timeouts);
    keep.join().expect("joins");
}

/// A bookie that stops answering during the preload: the run stops after `--timeout` with a
/// stall report, not after the preload's 10-minute deadline.
#[test]
fn preload_stall_is_reported_after_the_timeout() {
    let (addr, keep) = silent_bookie();
    let mut c = config(vec![addr]);
    c.preload_entries = 1000;
    c.timeout = Duration::from_millis(300);
    let started = Instant::now();
    let Err(err) = run(&c) else {
        panic!("the preload cannot finish");
    };
    let err = err.to_string();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(err.contains("preload stalled"), "{err}");
    assert!(err.contains("0 of 4000 entries were acknowledged"), "{err}");
    keep.join().expect("joins");
}

/// Reads against the sink: sequential batch (v2), random (v3) and tailing, with verification.
#[test]
fn reads_against_the_sink_verify() {
    let sink = Sink::start("127.0.0.1:0", 100).expect("sink");
    for (protocol, pattern) in [
        (Protocol::V2, ReadPattern::Sequential { batch: 8 }),
        (Protocol::V3, ReadPattern::Sequential { batch: 1 }),
        (Protocol::V3, ReadPattern::Random),
    ] {
        let mut c = config(vec![sink.addr()]);
        c.protocol = protocol;
        c.write = None;
        c.preload_entries = 50;
        c.preload_size = 100;
        c.read = Some(ReadConfig {
            mode: Mode::Closed { outstanding: 8 },
            pattern,
            verify: true,
        });
        c.warmup = Duration::ZERO;
        c.duration = Duration::from_millis(200);
        let r = run(&c).expect("runs");
        let rd = r.read.expect("read side");
        assert!(rd.ops_ok > 50, "{pattern:?}: {}", rd.ops_ok);
        assert_eq!(rd.errors + rd.timeouts, 0, "{pattern:?}");
        if let ReadPattern::Sequential { batch: 8 } = pattern {
            assert!(
                rd.entries > 4 * rd.ops_ok,
                "batch reads move several entries"
            );
        }
        match pattern {
            // 50 entries read more than 50 times over: the catch-up started over, and says so.
            ReadPattern::Sequential { .. } => assert!(
                {
                    // one restart per pass of 50 entries, give or take reads in flight
                    let passes = rd.entries.max(rd.ops_ok) / 50;
                    rd.restarts > 0 && rd.restarts >= passes / 2 && rd.restarts <= passes + 8
                },
                "{pattern:?}: {} restarts for {} entries in {} reads",
                rd.restarts,
                rd.entries,
                rd.ops_ok
            ),
            _ => assert_eq!(rd.restarts, 0, "random reads never start over"),
        }
    }
}

/// `--preloaded`: the readers take entries an earlier run wrote; nothing is written first (the
/// sink sees reads only: with a preload it would see 50 adds per ledger before any read).
#[test]
fn preloaded_ledgers_are_read_without_writing() {
    let sink = Sink::start("127.0.0.1:0", 100).expect("sink");
    let mut c = config(vec![sink.addr()]);
    c.write = None;
    c.preload_entries = 50;
    c.preloaded = true;
    c.preload_size = 100;
    c.read = Some(ReadConfig {
        mode: Mode::Closed { outstanding: 1 },
        pattern: ReadPattern::Sequential { batch: 1 },
        verify: true,
    });
    c.warmup = Duration::ZERO;
    c.duration = Duration::from_millis(100);
    let r = run(&c).expect("runs");
    let rd = r.read.expect("read side");
    assert!(rd.ops_ok > 0);
    assert_eq!(rd.errors + rd.timeouts, 0);
    // Closed loop with one read in flight: requests are the reads (and nothing else).
    assert!(
        sink.requests() <= rd.ops_ok + 2,
        "{} requests for {} reads",
        sink.requests(),
        rd.ops_ok
    );
}
