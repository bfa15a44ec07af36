//! The load engine: drives adds and reads against bookies over the wire and measures them.
//!
//! **Threading and I/O.** Each engine thread owns its connections (`--connections` per bookie)
//! and a share of the ledgers, and runs one loop: issue what is due, write every connection's
//! pending bytes, `ppoll` the sockets until a reply arrives or the next intended send time,
//! read, match replies to operations. Sockets are plain `std` `TcpStream`s in non-blocking mode
//! and the readiness wait is `ppoll` (through `nix`) with a nanosecond timeout (and a 1 µs timer slack),
//! because the open-loop schedule needs send times finer than poll's milliseconds. No async
//! runtime: one thread, a handful of sockets and a timer is all this needs, and a runtime's
//! timer wheel (tokio's is 1 ms) would blur the schedule. Requests are pipelined through
//! `net::client::ClientConnection`; everything due in one iteration is encoded into the
//! connection's buffer and goes out in one `write` per connection (batching), replies are
//! read in 256 KiB gulps.
//!
//! **Operations.** An add goes to the W members of its write set (Java's round robin over the
//! ledger's ensemble) and completes at the A-th acknowledgement; its latency is taken then.
//! Reads go to the first member of the entry's write set (as Java's sequential read does);
//! batch reads (v2 only) ask for `batch` entries at once; a tailing reader keeps one v3 long
//! poll (`previousLAC`, piggyback) per ledger and records the *end-to-end* latency: from the
//! add's intended send time to the moment the reader holds the entry.
//!
//! **Load models.** Open loop: each operation has an intended send time from
//! [`crate::load::Schedule`]; when `max_outstanding` operations are in flight, due ones wait
//! (and their wait counts in the corrected latency). Closed loop: N operations always
//! outstanding. Operations whose intended time falls in the warm-up are executed but not
//! recorded; issuing stops at the end of the measured window and the engine then drains what
//! is in flight (up to `--timeout`). An operation without a decision after `--timeout` counts
//! as a timeout; a reply with a non-EOK status, a failed quorum or an entry that fails
//! verification counts as an error. A connection that fails (EOF, reset, protocol error)
//! fails its pending requests and is not reopened.
//!
//! **Files.** This module holds the configuration, the results and [`run`]; the engine's methods
//! are split by concern: `driver` (the loop: connections, sending, receiving, deciding,
//! expiring, the measured window), `write` (adds and the preload) and `read` (reads and
//! tailing long polls).

use std::collections::{BTreeMap, VecDeque};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsFd;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use hdrhistogram::Histogram;
use net::client::{ClientConfig, ClientConnection, RequestId};
use net::{ReadFlag, Request, Response, ResponseFrame, StatusCode};

use crate::entry::{build_entry, verify_entry, DigestType, EntryHeader};
use crate::load::{write_set, AckOutcome, AckSet, Arrival, Latency, Rng, Schedule, SizeDist};
use crate::report::{new_histogram, HDR_HIGHEST_US};
use crate::stages::ThreadTime;

/// Wire protocol of the requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Protocol {
    V2,
    V3,
}

impl Protocol {
    pub fn name(self) -> &'static str {
        match self {
            Protocol::V2 => "v2",
            Protocol::V3 => "v3",
        }
    }
}

/// How one side (writes or reads) is loaded.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mode {
    /// Open loop at `rate` operations per second.
    Open { rate: f64, arrival: Arrival },
    /// Closed loop with `outstanding` operations in flight.
    Closed { outstanding: usize },
}

impl Mode {
    /// The `workload.mode` string of the report.
    pub fn name(&self) -> &'static str {
        match self {
            Mode::Open { .. } => "fixed_rate",
            Mode::Closed { .. } => "closed_loop",
        }
    }

    pub fn rate(&self) -> Option<f64> {
        match *self {
            Mode::Open { rate, .. } => Some(rate),
            Mode::Closed { .. } => None,
        }
    }
}

/// Writes.
#[derive(Clone, Debug)]
pub struct WriteConfig {
    pub mode: Mode,
    pub sizes: SizeDist,
    pub ensemble: usize,
    pub write_quorum: usize,
    pub ack_quorum: usize,
    pub digest: DigestType,
}

/// Which entries readers ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadPattern {
    /// Catch-up: each ledger from entry 0 upwards (wrapping), `batch` > 1 = v2 batch reads.
    Sequential { batch: usize },
    /// Uniformly random entries among those written.
    Random,
    /// One long poll per ledger following the writer (v3 long poll with piggyback).
    Tailing { poll_timeout_ms: i64 },
}

/// Reads.
#[derive(Clone, Debug)]
pub struct ReadConfig {
    pub mode: Mode,
    pub pattern: ReadPattern,
    /// Check the digest and ids of every entry read.
    pub verify: bool,
}

/// A whole run.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    pub bookies: Vec<SocketAddr>,
    pub protocol: Protocol,
    /// Connections per bookie per engine thread.
    pub connections: usize,
    pub ledgers: usize,
    pub first_ledger_id: i64,
    pub master_key: [u8; 20],
    pub write: Option<WriteConfig>,
    pub read: Option<ReadConfig>,
    /// Entries written to every ledger (closed loop, unrecorded) before the run, for readers.
    pub preload_entries: u64,
    /// The ledgers already hold `preload_entries` each (an earlier run wrote them): nothing is
    /// written.
    pub preloaded: bool,
    /// Digest of preloaded entries and of entries checked by readers.
    pub digest: DigestType,
    /// Payload size of preloaded entries.
    pub preload_size: usize,
    pub warmup: Duration,
    pub duration: Duration,
    pub timeout: Duration,
    pub threads: usize,
    pub seed: u64,
    /// Most operations per side in flight in open loop.
    pub max_outstanding: usize,
    /// Open loop: the shortest sleep between two rounds of sends (ops due meanwhile go out
    /// together); zero spins to send each at its time.
    pub send_tick: Duration,
}

/// What one side measured.
pub struct SideResult {
    /// Corrected latency (open loop: from the intended start), µs.
    pub latency: Histogram<u64>,
    /// From the actual send, µs.
    pub uncorrected: Histogram<u64>,
    /// One histogram per second of the measured phase (by completion time), µs, 2 digits.
    pub intervals: Vec<Histogram<u64>>,
    pub ops_ok: u64,
    pub errors: u64,
    pub timeouts: u64,
    /// Payload (writes) or entry (reads) bytes of successful operations.
    pub bytes: u64,
    /// Entries moved (a batch read moves several).
    pub entries: u64,
    /// Operations due in the window that could not even be sent before it closed.
    pub not_sent: u64,
    /// Catch-up reads (sequential pattern) that found their ledger read through and started
    /// over at entry 0 in the measured window: what they read again a bookie may serve from
    /// its page cache or read cache, so past this a "cold" run is no longer all cold.
    pub restarts: u64,
    /// Errors by cause: a status name (`EIO`, `ETOOMANYREQUESTS`, …), `bad entry`,
    /// `connection failed`, `send failed`.
    pub error_kinds: BTreeMap<&'static str, u64>,
}

impl SideResult {
    fn new() -> SideResult {
        SideResult {
            latency: new_histogram(),
            uncorrected: new_histogram(),
            intervals: Vec::new(),
            ops_ok: 0,
            errors: 0,
            timeouts: 0,
            bytes: 0,
            entries: 0,
            not_sent: 0,
            restarts: 0,
            error_kinds: BTreeMap::new(),
        }
    }

    fn merge(&mut self, other: SideResult) {
        let _ = self.latency.add(&other.latency);
        let _ = self.uncorrected.add(&other.uncorrected);
        for (i, h) in other.intervals.into_iter().enumerate() {
            if i < self.intervals.len() {
                let _ = self.intervals[i].add(&h);
            } else {
                self.intervals.push(h);
            }
        }
        self.ops_ok += other.ops_ok;
        self.errors += other.errors;
        self.timeouts += other.timeouts;
        self.bytes += other.bytes;
        self.entries += other.entries;
        self.not_sent += other.not_sent;
        self.restarts += other.restarts;
        for (k, v) in other.error_kinds {
            *self.error_kinds.entry(k).or_default() += v;
        }
    }

    fn error(&mut self, why: &'static str) {
        self.errors += 1;
        *self.error_kinds.entry(why).or_default() += 1;
    }

    fn record(&mut self, lat: Latency, done_rel_ns: u64) {
        let us = |n: u64| (n / 1000).max(1);
        self.latency.saturating_record(us(lat.corrected_ns));
        self.uncorrected.saturating_record(us(lat.uncorrected_ns));
        let idx = (done_rel_ns / 1_000_000_000) as usize;
        if idx < 100_000 {
            while self.intervals.len() <= idx {
                self.intervals.push(interval_histogram());
            }
            self.intervals[idx].saturating_record(us(lat.corrected_ns));
        }
    }
}

/// Interval histograms keep 2 significant digits: one per second per side must stay small.
pub fn interval_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HDR_HIGHEST_US, 2).expect("constant, valid bounds")
}

/// What a run measured.
pub struct RunResult {
    pub write: Option<SideResult>,
    pub read: Option<SideResult>,
    /// Length of the measured window.
    pub measured: Duration,
    /// CPU seconds (user + system) of the whole bkperf process during the run.
    pub client_cpu_s: f64,
    /// Replies that matched no request (a bookie bug, or a reply after a timeout).
    pub unmatched: u64,
    /// Each engine thread's scheduler time when it finished (since it started).
    pub engine_threads: Vec<ThreadTime>,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Connects, preloads, runs the measured window on `config.threads` threads, merges.
#[cfg(test)]
pub fn run(config: &EngineConfig) -> Result<RunResult, BoxError> {
    run_observed(config, &mut || {}, &mut || {})
}

/// [`run`], calling `preloaded` on the calling thread once every thread has preloaded and
/// before any clock starts (`--cold` makes the bookie flush then), and `window_starts` when the
/// warm-up ends and the measured window begins (to take the bookie's metrics then).
pub fn run_observed(
    config: &EngineConfig,
    preloaded: &mut dyn FnMut(),
    window_starts: &mut dyn FnMut(),
) -> Result<RunResult, BoxError> {
    validate(config)?;
    let threads = config.threads.max(1).min(config.ledgers.max(1));
    // Every thread has preloaded (or failed to).
    let loaded = Arc::new(Barrier::new(threads + 1));
    // The engine threads and this one: all start their clocks together.
    let barrier = Arc::new(Barrier::new(threads + 1));
    let cpu_before = process_cpu_s();
    let mut handles = Vec::new();
    for t in 0..threads {
        let config = config.clone();
        let barrier = barrier.clone();
        let loaded = loaded.clone();
        handles.push(
            std::thread::Builder::new()
                .name(format!("bkperf-{t}"))
                .spawn(move || -> Result<(Engine, Option<ThreadTime>), String> {
                    let mut engine = Engine::new(&config, t, threads).map_err(|e| e.to_string());
                    if let Ok(e) = engine.as_mut() {
                        if let Err(err) = e.preload() {
                            engine = Err(err.to_string());
                        }
                    }
                    loaded.wait();
                    barrier.wait();
                    let mut engine = engine?;
                    engine.measure().map_err(|e| e.to_string())?;
                    // The thread's scheduler time, read before it exits and /proc forgets it.
                    Ok((engine, crate::stages::this_thread()))
                })?,
        );
    }
    loaded.wait();
    preloaded();
    barrier.wait();
    std::thread::sleep(config.warmup);
    window_starts();
    let mut write: Option<SideResult> = None;
    let mut read: Option<SideResult> = None;
    let mut unmatched = 0;
    let mut engine_threads = Vec::new();
    let mut first_err = None;
    for h in handles {
        match h.join() {
            Ok(Ok((engine, sched))) => {
                engine_threads.extend(sched);
                unmatched += engine
                    .conns
                    .iter()
                    .map(|c| c.conn.unmatched_responses())
                    .sum::<u64>();
                for (slot, side) in [(&mut write, engine.write), (&mut read, engine.read)] {
                    if let Some(side) = side {
                        match slot {
                            Some(acc) => acc.merge(side.result),
                            None => *slot = Some(side.result),
                        }
                    }
                }
            }
            Ok(Err(e)) => first_err = first_err.or(Some(e)),
            Err(_) => first_err = first_err.or(Some("an engine thread panicked".to_string())),
        }
    }
    if let Some(e) = first_err {
        return Err(e.into());
    }
    Ok(RunResult {
        write,
        read,
        measured: config.duration,
        client_cpu_s: process_cpu_s() - cpu_before,
        unmatched,
        engine_threads,
    })
}

fn validate(c: &EngineConfig) -> Result<(), BoxError> {
    if c.bookies.is_empty() {
        return Err("no bookies given".into());
    }
    if c.ledgers == 0 || c.connections == 0 {
        return Err("--ledgers and --connections must be at least 1".into());
    }
    if let Some(w) = &c.write {
        if w.ensemble == 0 || w.ensemble > c.bookies.len() || w.ensemble > 64 {
            return Err(format!(
                "ensemble {} needs 1..={} bookies (given {})",
                w.ensemble,
                c.bookies.len().min(64),
                c.bookies.len()
            )
            .into());
        }
        if !(1..=w.ensemble).contains(&w.write_quorum)
            || !(1..=w.write_quorum).contains(&w.ack_quorum)
        {
            return Err(format!(
                "need E >= W >= A >= 1, got E{} W{} A{}",
                w.ensemble, w.write_quorum, w.ack_quorum
            )
            .into());
        }
    }
    for mode in [
        c.write.as_ref().map(|w| w.mode),
        c.read.as_ref().map(|r| r.mode),
    ]
    .into_iter()
    .flatten()
    {
        match mode {
            Mode::Open { rate, .. } if !(rate.is_finite() && rate > 0.0) => {
                return Err(format!("rate must be > 0, got {rate}").into())
            }
            Mode::Closed { outstanding: 0 } => {
                return Err("--outstanding must be at least 1".into())
            }
            _ => {}
        }
    }
    if let Some(r) = &c.read {
        if let ReadPattern::Sequential { batch } = r.pattern {
            if batch > 1 && c.protocol != Protocol::V2 {
                return Err("batch reads exist only in protocol v2 (--protocol v2)".into());
            }
        }
        if matches!(r.pattern, ReadPattern::Tailing { .. }) && c.write.is_none() {
            return Err("tailing reads need a writer".into());
        }
    }
    if c.max_outstanding == 0 {
        return Err("--max-outstanding must be at least 1".into());
    }
    Ok(())
}

/// CPU seconds used by this process so far.
pub fn process_cpu_s() -> f64 {
    use nix::sys::resource::{getrusage, UsageWho};
    let Ok(u) = getrusage(UsageWho::RUSAGE_SELF) else {
        return 0.0;
    };
    let tv = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    tv(u.user_time()) + tv(u.system_time())
}

/// Routes a reply to the operation (and ensemble member) it belongs to.
#[derive(Clone, Copy, Debug)]
struct Tag {
    slot: u32,
    generation: u32,
    member: u8,
}

struct Conn {
    stream: TcpStream,
    conn: ClientConnection,
    out: Option<Bytes>,
    out_pos: usize,
    want_write: bool,
    /// Tags of pending requests, indexed by `RequestId - base`.
    tags: VecDeque<Option<Tag>>,
    base: u64,
    dead: bool,
}

impl Conn {
    fn push(&mut self, id: RequestId, tag: Tag) {
        if self.tags.is_empty() {
            self.base = id.0;
        }
        // Ids are dense per connection; fill any gap (a refused send consumes none).
        while self.base + (self.tags.len() as u64) < id.0 {
            self.tags.push_back(None);
        }
        self.tags.push_back(Some(tag));
    }

    fn take(&mut self, id: RequestId) -> Option<Tag> {
        let idx = id.0.checked_sub(self.base)? as usize;
        let tag = self.tags.get_mut(idx)?.take();
        while let Some(None) = self.tags.front() {
            self.tags.pop_front();
            self.base += 1;
        }
        tag
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SideId {
    Write,
    Read,
}

#[derive(Clone, Copy, Debug)]
enum OpKind {
    Add {
        ledger: u32,
        entry: i64,
        acks: AckSet,
        size: u32,
    },
    Read {
        ledger: u32,
        entry: i64,
        count: u32,
    },
    Poll {
        ledger: u32,
    },
}

#[derive(Clone, Copy, Debug)]
struct Op {
    kind: OpKind,
    side: SideId,
    intended: u64,
    sent: u64,
    replies_left: u8,
    decided: bool,
    measured: bool,
    preload: bool,
    generation: u32,
    live: bool,
}

struct Ledger {
    id: i64,
    /// Bookie index of each ensemble position.
    ensemble: Vec<usize>,
    /// Which of this thread's connections to each bookie it uses.
    conn_slot: usize,
    next_entry: i64,
    lac: i64,
    length: i64,
    /// Whether entries lac+1 .. next_entry are decided.
    decided: VecDeque<bool>,
    /// (intended, sent) of entries from `times_base` on, for tailing readers.
    times: VecDeque<(u64, u64)>,
    times_base: i64,
    read_cursor: i64,
    /// Last entry the tailing reader holds.
    tail_seen: i64,
    polling: bool,
    /// The reader got ahead of the writer (the sink does that): wait for the next add.
    poll_wait: bool,
}

struct Side {
    mode: Mode,
    schedule: Option<Schedule>,
    outstanding: usize,
    next_ledger: usize,
    result: SideResult,
}

struct Engine {
    protocol: Protocol,
    conns: Vec<Conn>,
    connections: usize,
    ledgers: Vec<Ledger>,
    ops: Vec<Op>,
    free: Vec<u32>,
    write: Option<Side>,
    write_cfg: Option<WriteConfig>,
    read: Option<Side>,
    read_cfg: Option<ReadConfig>,
    master_key: Bytes,
    digest: DigestType,
    payload: Vec<u8>,
    scratch: BytesMut,
    rng: Rng,
    config: EngineConfig,
    start: Instant,
    warmup_ns: u64,
    end_ns: u64,
    max_outstanding: usize,
    chunk: Vec<u8>,
    replies: Vec<(Tag, ResponseFrame)>,
    /// Indices of the connections a `ppoll` found ready (kept to reuse its allocation).
    ready: Vec<usize>,
    tailing: bool,
    /// Cause of the failure being decided (see [`SideResult::error_kinds`]).
    why: &'static str,
}

mod driver;
mod read;
mod write;

/// The wire name of a status.
pub fn status_name(s: StatusCode) -> &'static str {
    match s {
        StatusCode::EOK => "EOK",
        StatusCode::ENOLEDGER => "ENOLEDGER",
        StatusCode::ENOENTRY => "ENOENTRY",
        StatusCode::EBADREQ => "EBADREQ",
        StatusCode::EIO => "EIO",
        StatusCode::EUA => "EUA",
        StatusCode::EBADVERSION => "EBADVERSION",
        StatusCode::EFENCED => "EFENCED",
        StatusCode::EREADONLY => "EREADONLY",
        StatusCode::ETOOMANYREQUESTS => "ETOOMANYREQUESTS",
        StatusCode::EUNKNOWNLEDGERSTATE => "EUNKNOWNLEDGERSTATE",
    }
}

/// Asks the kernel for `ns` of timer slack on this thread (default 50 µs), so that short
/// sleeps of the open-loop schedule are not rounded up.
fn set_timer_slack_ns(ns: u64) {
    let _ = nix::sys::prctl::set_timerslack(ns as _);
}

#[cfg(test)]
mod tests;
