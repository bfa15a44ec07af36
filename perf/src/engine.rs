//! The load engine: drives adds and reads against bookies over the wire and measures them.
//!
//! **Threading and I/O.** Each engine thread owns its connections (`--connections` per bookie)
//! and a share of the ledgers, and runs one loop: issue what is due, write every connection's
//! pending bytes, `ppoll` the sockets until a reply arrives or the next intended send time,
//! read, match replies to operations. Sockets are plain `std` `TcpStream`s in non-blocking mode
//! and the readiness wait is `libc::ppoll` with a nanosecond timeout (and a 1 µs timer slack),
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

use std::collections::{BTreeMap, VecDeque};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use hdrhistogram::Histogram;
use net::client::{ClientConfig, ClientConnection, RequestId};
use net::{ReadFlag, Request, Response, ResponseFrame, StatusCode};

use crate::entry::{build_entry, verify_entry, DigestType, EntryHeader};
use crate::load::{write_set, AckOutcome, AckSet, Arrival, Latency, Rng, Schedule, SizeDist};
use crate::report::{new_histogram, HDR_HIGHEST_US};

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
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Connects, preloads, runs the measured window on `config.threads` threads, merges.
pub fn run(config: &EngineConfig) -> Result<RunResult, BoxError> {
    validate(config)?;
    let threads = config.threads.max(1).min(config.ledgers.max(1));
    let barrier = Arc::new(Barrier::new(threads));
    let cpu_before = process_cpu_s();
    let mut handles = Vec::new();
    for t in 0..threads {
        let config = config.clone();
        let barrier = barrier.clone();
        handles.push(
            std::thread::Builder::new()
                .name(format!("bkperf-{t}"))
                .spawn(move || -> Result<Engine, String> {
                    let mut engine = Engine::new(&config, t, threads).map_err(|e| e.to_string());
                    if let Ok(e) = engine.as_mut() {
                        if let Err(err) = e.preload() {
                            engine = Err(err.to_string());
                        }
                    }
                    barrier.wait();
                    let mut engine = engine?;
                    engine.measure().map_err(|e| e.to_string())?;
                    Ok(engine)
                })?,
        );
    }
    let mut write: Option<SideResult> = None;
    let mut read: Option<SideResult> = None;
    let mut unmatched = 0;
    let mut first_err = None;
    for h in handles {
        match h.join() {
            Ok(Ok(engine)) => {
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
    // SAFETY: rusage is plain data; getrusage fills it.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid out pointer.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
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
    tailing: bool,
    /// Cause of the failure being decided (see [`SideResult::error_kinds`]).
    why: &'static str,
}

impl Engine {
    fn new(config: &EngineConfig, thread: usize, threads: usize) -> Result<Engine, BoxError> {
        let per_thread = |x: f64| x / threads as f64;
        let mut conns = Vec::new();
        for addr in &config.bookies {
            for _ in 0..config.connections {
                let stream = TcpStream::connect_timeout(addr, Duration::from_secs(5))
                    .map_err(|e| format!("cannot connect to bookie {addr}: {e}"))?;
                stream.set_nodelay(true)?;
                stream.set_nonblocking(true)?;
                conns.push(Conn {
                    stream,
                    conn: ClientConnection::new(ClientConfig {
                        max_frame_size: net::frame::DEFAULT_MAX_FRAME_SIZE
                            .max(config.write.as_ref().map_or(0, |w| w.sizes.max() + 4096)),
                        max_pending_requests: 1 << 20,
                    }),
                    out: None,
                    out_pos: 0,
                    want_write: false,
                    tags: VecDeque::new(),
                    base: 0,
                    dead: false,
                });
            }
        }
        let ensemble = config.write.as_ref().map_or(1, |w| w.ensemble);
        let mut ledgers = Vec::new();
        for idx in (thread..config.ledgers).step_by(threads) {
            // Ensembles rotate over the bookies so that many ledgers spread the load.
            let members = (0..ensemble)
                .map(|i| (idx + i) % config.bookies.len())
                .collect();
            ledgers.push(Ledger {
                id: config.first_ledger_id + idx as i64,
                ensemble: members,
                conn_slot: (idx / threads) % config.connections,
                next_entry: 0,
                lac: -1,
                length: 0,
                decided: VecDeque::new(),
                times: VecDeque::new(),
                times_base: 0,
                read_cursor: 0,
                tail_seen: -1,
                polling: false,
                poll_wait: false,
            });
        }
        let seed = config.seed ^ (thread as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let side = |mode: Mode, salt: u64| {
            let mode = match mode {
                Mode::Open { rate, arrival } => Mode::Open {
                    rate: per_thread(rate),
                    arrival,
                },
                Mode::Closed { outstanding } => Mode::Closed {
                    outstanding: outstanding.div_ceil(threads).max(1),
                },
            };
            Side {
                mode,
                schedule: match mode {
                    Mode::Open { rate, arrival } => Some(Schedule::new(rate, arrival, seed ^ salt)),
                    Mode::Closed { .. } => None,
                },
                outstanding: 0,
                next_ledger: 0,
                result: SideResult::new(),
            }
        };
        let max_payload = config
            .write
            .as_ref()
            .map_or(0, |w| w.sizes.max())
            .max(config.preload_size);
        let mut rng = Rng::new(seed);
        let payload = (0..max_payload).map(|_| rng.next_u64() as u8).collect();
        let tailing = matches!(
            config.read.as_ref().map(|r| r.pattern),
            Some(ReadPattern::Tailing { .. })
        );
        Ok(Engine {
            protocol: config.protocol,
            conns,
            connections: config.connections,
            ledgers,
            ops: Vec::new(),
            free: Vec::new(),
            write: config.write.as_ref().map(|w| side(w.mode, 1)),
            write_cfg: config.write.clone(),
            read: config.read.as_ref().map(|r| side(r.mode, 2)),
            read_cfg: config.read.clone(),
            master_key: Bytes::copy_from_slice(&config.master_key),
            digest: config.write.as_ref().map_or(config.digest, |w| w.digest),
            payload,
            scratch: BytesMut::with_capacity(1 << 20),
            rng,
            config: config.clone(),
            start: Instant::now(),
            warmup_ns: 0,
            end_ns: 0,
            max_outstanding: config.max_outstanding.div_ceil(threads).max(1),
            chunk: vec![0u8; 256 * 1024],
            replies: Vec::new(),
            tailing,
            why: "unknown",
        })
    }

    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    fn conn_index(&self, bookie: usize, ledger: usize) -> usize {
        bookie * self.connections + self.ledgers[ledger].conn_slot
    }

    fn alloc(&mut self, op: Op) -> u32 {
        match self.free.pop() {
            Some(slot) => {
                let generation = self.ops[slot as usize].generation.wrapping_add(1);
                self.ops[slot as usize] = Op { generation, ..op };
                slot
            }
            None => {
                self.ops.push(op);
                (self.ops.len() - 1) as u32
            }
        }
    }

    fn release(&mut self, slot: u32) {
        let op = &mut self.ops[slot as usize];
        if op.live {
            op.live = false;
            op.generation = op.generation.wrapping_add(1);
            self.free.push(slot);
        }
    }

    /// Sends one request on a connection; false if it could not be sent.
    fn send(&mut self, conn: usize, request: Request, v2: bool, tag: Tag) -> bool {
        let c = &mut self.conns[conn];
        if c.dead {
            return false;
        }
        let sent = if v2 {
            c.conn.send_v2(request, false)
        } else {
            c.conn.send_v3(request, None)
        };
        match sent {
            Ok(id) => {
                c.push(id, tag);
                true
            }
            Err(err) => {
                log::debug!("cannot send: {err}");
                false
            }
        }
    }

    fn side_mut(&mut self, side: SideId) -> Option<&mut Side> {
        match side {
            SideId::Write => self.write.as_mut(),
            SideId::Read => self.read.as_mut(),
        }
    }

    // ---- writes ----

    fn issue_add(&mut self, ledger: usize, intended: u64, now: u64, preload: bool) -> bool {
        let (size, wq, e) = match (&self.write_cfg, preload) {
            (Some(w), false) => (w.sizes.sample(&mut self.rng), w.write_quorum, w.ensemble),
            (Some(w), true) => (self.config.preload_size, w.write_quorum, w.ensemble),
            (None, _) => (self.config.preload_size, 1, 1),
        };
        let (wq, e) = (
            wq.min(self.ledgers[ledger].ensemble.len()),
            e.min(self.ledgers[ledger].ensemble.len()),
        );
        let l = &mut self.ledgers[ledger];
        let entry = l.next_entry;
        l.next_entry += 1;
        l.length += size as i64;
        l.decided.push_back(false);
        let header = EntryHeader {
            ledger_id: l.id,
            entry_id: entry,
            last_add_confirmed: l.lac,
            length: l.length,
        };
        if self.tailing {
            if l.times.is_empty() {
                l.times_base = entry;
            }
            l.times.push_back((intended, now));
            if l.times.len() > 1 << 20 {
                l.times.pop_front();
                l.times_base += 1;
            }
        }
        let body = build_entry(
            &header,
            self.digest,
            &self.payload[..size],
            &mut self.scratch,
        );
        let measured = !preload && intended >= self.warmup_ns && intended < self.end_ns;
        let slot = self.alloc(Op {
            kind: OpKind::Add {
                ledger: ledger as u32,
                entry,
                acks: AckSet::default(),
                size: size as u32,
            },
            side: SideId::Write,
            intended,
            sent: now,
            replies_left: 0,
            decided: false,
            measured,
            preload,
            generation: 0,
            live: true,
        });
        let generation = self.ops[slot as usize].generation;
        let v2 = self.protocol == Protocol::V2;
        let members: Vec<usize> = write_set(entry, e, wq).collect();
        let mut failed_members = Vec::new();
        for &member in &members {
            let bookie = self.ledgers[ledger].ensemble[member];
            let conn = self.conn_index(bookie, ledger);
            let request = Request::AddEntry {
                ledger_id: header.ledger_id,
                entry_id: entry,
                master_key: self.master_key.clone(),
                body: body.clone(),
                recovery: false,
                write_flags: None,
            };
            let tag = Tag {
                slot,
                generation,
                member: member as u8,
            };
            if self.send(conn, request, v2, tag) {
                self.ops[slot as usize].replies_left += 1;
            } else {
                failed_members.push(member);
            }
        }
        if let Some(side) = self.write.as_mut().filter(|_| !preload) {
            side.outstanding += 1;
        }
        for member in failed_members {
            self.why = "send failed";
            self.add_reply(slot, member, false, now);
        }
        true
    }

    fn add_reply(&mut self, slot: u32, member: usize, ok: bool, now: u64) {
        let (wq, aq) = self
            .write_cfg
            .as_ref()
            .map_or((1, 1), |w| (w.write_quorum, w.ack_quorum));
        let op = &mut self.ops[slot as usize];
        let OpKind::Add {
            ledger,
            entry,
            ref mut acks,
            size,
        } = op.kind
        else {
            return;
        };
        match acks.reply(member, ok, wq, aq) {
            AckOutcome::Pending => {}
            outcome => {
                let success = outcome == AckOutcome::Completed;
                self.decide(slot, success, now, size as u64, 1);
                self.add_decided(ledger as usize, entry);
            }
        }
    }

    /// Advances the ledger's LAC over the decided prefix (a failed add is skipped, where a
    /// Java client would change the ensemble; the run reports it as an error either way).
    fn add_decided(&mut self, ledger: usize, entry: i64) {
        let l = &mut self.ledgers[ledger];
        let idx = entry - l.lac - 1;
        if idx >= 0 {
            if let Some(d) = l.decided.get_mut(idx as usize) {
                *d = true;
            }
        }
        while l.decided.front() == Some(&true) {
            l.decided.pop_front();
            l.lac += 1;
        }
        l.poll_wait = false;
    }

    // ---- reads ----

    fn issue_read(&mut self, intended: u64, now: u64) -> bool {
        let Some(cfg) = self.read_cfg.clone() else {
            return false;
        };
        let n = self.ledgers.len();
        let side = self.read.as_mut().expect("read side with a read config");
        let (ledger, entry, count) = match cfg.pattern {
            ReadPattern::Sequential { batch } => {
                let mut found = None;
                for _ in 0..n {
                    let i = side.next_ledger % n;
                    side.next_ledger += 1;
                    let l = &mut self.ledgers[i];
                    if l.lac < 0 {
                        continue;
                    }
                    if l.read_cursor > l.lac {
                        l.read_cursor = 0; // caught up: start over (catch-up reads again)
                    }
                    let e = l.read_cursor;
                    let count = (batch.max(1) as i64).min(l.lac - e + 1);
                    l.read_cursor += count;
                    found = Some((i, e, count as u32));
                    break;
                }
                match found {
                    Some(f) => f,
                    None => return false,
                }
            }
            ReadPattern::Random => {
                let i = self.rng.below(n as u64) as usize;
                let l = &self.ledgers[i];
                if l.lac < 0 {
                    return false;
                }
                (i, self.rng.below(l.lac as u64 + 1) as i64, 1)
            }
            ReadPattern::Tailing { .. } => return false,
        };
        let measured = intended >= self.warmup_ns && intended < self.end_ns;
        let slot = self.alloc(Op {
            kind: OpKind::Read {
                ledger: ledger as u32,
                entry,
                count,
            },
            side: SideId::Read,
            intended,
            sent: now,
            replies_left: 1,
            decided: false,
            measured,
            preload: false,
            generation: 0,
            live: true,
        });
        let generation = self.ops[slot as usize].generation;
        let l = &self.ledgers[ledger];
        let e = l.ensemble.len();
        let member = write_set(entry, e, 1).next().unwrap_or(0);
        let conn = self.conn_index(l.ensemble[member], ledger);
        let request = if count > 1 {
            Request::BatchReadEntry {
                ledger_id: l.id,
                start_entry_id: entry,
                request_id: i64::from(slot) << 20 | i64::from(generation & 0xFFFFF),
                max_count: count as i32,
                max_size: 64 << 20,
                fence: false,
                master_key: None,
            }
        } else {
            Request::ReadEntry {
                ledger_id: l.id,
                entry_id: entry,
                master_key: None,
                flag: None,
                previous_lac: None,
                time_out: None,
            }
        };
        let v2 = self.protocol == Protocol::V2;
        self.read.as_mut().expect("read side").outstanding += 1;
        let tag = Tag {
            slot,
            generation,
            member: member as u8,
        };
        if !self.send(conn, request, v2, tag) {
            self.ops[slot as usize].replies_left = 0;
            self.why = "send failed";
            self.decide(slot, false, now, 0, 0);
        }
        true
    }

    fn issue_polls(&mut self, now: u64) {
        let Some(ReadPattern::Tailing { poll_timeout_ms }) =
            self.read_cfg.as_ref().map(|r| r.pattern)
        else {
            return;
        };
        for i in 0..self.ledgers.len() {
            let l = &self.ledgers[i];
            if l.polling || l.poll_wait {
                continue;
            }
            let (id, prev, ensemble) = (l.id, l.tail_seen, l.ensemble.clone());
            let slot = self.alloc(Op {
                kind: OpKind::Poll { ledger: i as u32 },
                side: SideId::Read,
                intended: now,
                sent: now,
                replies_left: 1,
                decided: false,
                measured: false,
                preload: false,
                generation: 0,
                live: true,
            });
            let generation = self.ops[slot as usize].generation;
            // Java sends long polls to the whole ensemble; one member is enough to follow.
            let member = write_set(prev + 1, ensemble.len(), 1).next().unwrap_or(0);
            let conn = self.conn_index(ensemble[member], i);
            let request = Request::ReadEntry {
                ledger_id: id,
                entry_id: -1,
                master_key: None,
                flag: Some(ReadFlag::EntryPiggyback),
                previous_lac: Some(prev),
                time_out: Some(poll_timeout_ms),
            };
            let tag = Tag {
                slot,
                generation,
                member: member as u8,
            };
            // Long polls exist only in v3 (a v2 client turns them into plain reads).
            if self.send(conn, request, false, tag) {
                self.ledgers[i].polling = true;
            } else {
                self.release(slot);
            }
        }
    }

    fn poll_reply(&mut self, slot: u32, frame: &ResponseFrame, now: u64) {
        let OpKind::Poll { ledger } = self.ops[slot as usize].kind else {
            return;
        };
        let ledger = ledger as usize;
        self.release(slot);
        self.ledgers[ledger].polling = false;
        let verify = self.read_cfg.as_ref().is_some_and(|r| r.verify);
        let Response::ReadEntry {
            status,
            entry_id,
            ref body,
            ..
        } = frame.response
        else {
            self.read
                .as_mut()
                .expect("read side")
                .result
                .error("unexpected reply");
            return;
        };
        if status != StatusCode::EOK {
            if status != StatusCode::ENOLEDGER && status != StatusCode::ENOENTRY {
                self.read
                    .as_mut()
                    .expect("read side")
                    .result
                    .error(status_name(status));
            }
            return;
        }
        let l = &mut self.ledgers[ledger];
        if entry_id < 0 || body.is_none() {
            return; // only the LAC: poll again
        }
        if entry_id != l.tail_seen + 1 || entry_id >= l.next_entry {
            l.poll_wait = true; // ahead of the writer (the sink): wait for the next add
            return;
        }
        let ok = !verify
            || body
                .as_ref()
                .is_some_and(|b| verify_entry(b, self.digest, l.id, entry_id).is_ok());
        l.tail_seen = entry_id;
        let times = entry_id
            .checked_sub(l.times_base)
            .and_then(|i| l.times.get(i as usize).copied());
        while l.times_base <= entry_id && !l.times.is_empty() {
            l.times.pop_front();
            l.times_base += 1;
        }
        let (warmup, end) = (self.warmup_ns, self.end_ns);
        let side = self.read.as_mut().expect("read side");
        if !ok {
            side.result.error("bad entry");
            return;
        }
        if let Some((intended, sent)) = times {
            if intended >= warmup && intended < end {
                side.result.ops_ok += 1;
                side.result.entries += 1;
                side.result.bytes += body.as_ref().map_or(0, |b| b.len() as u64);
                side.result.record(
                    Latency::of(intended, sent, now),
                    now.min(end.saturating_sub(1)).saturating_sub(warmup),
                );
            }
        }
    }

    fn read_reply(&mut self, slot: u32, frame: &ResponseFrame, now: u64) {
        let op = self.ops[slot as usize];
        let OpKind::Read {
            ledger,
            entry,
            count,
        } = op.kind
        else {
            return;
        };
        let verify = self.read_cfg.as_ref().is_some_and(|r| r.verify);
        let id = self.ledgers[ledger as usize].id;
        let check = |b: &Bytes, e: i64| !verify || verify_entry(b, self.digest, id, e).is_ok();
        let (ok, bytes, entries) = match &frame.response {
            Response::ReadEntry {
                status: StatusCode::EOK,
                body: Some(b),
                ..
            } => (check(b, entry), b.len() as u64, 1),
            Response::BatchReadEntry {
                status: StatusCode::EOK,
                entries,
                ..
            } => {
                let ok = !entries.is_empty()
                    && entries.len() <= count as usize
                    && entries
                        .iter()
                        .enumerate()
                        .all(|(i, b)| check(b, entry + i as i64));
                (
                    ok,
                    entries.iter().map(|b| b.len() as u64).sum(),
                    entries.len() as u64,
                )
            }
            _ => (false, 0, 0),
        };
        self.why = match frame.response.status() {
            StatusCode::EOK => "bad entry",
            other => status_name(other),
        };
        self.ops[slot as usize].replies_left = 0;
        self.decide(slot, ok, now, bytes, entries);
    }

    /// An operation is decided: record it, free its place in the side's window.
    fn decide(&mut self, slot: u32, ok: bool, now: u64, bytes: u64, entries: u64) {
        let (warmup, op) = (self.warmup_ns, &mut self.ops[slot as usize]);
        if op.decided {
            return;
        }
        op.decided = true;
        let op = *op;
        if op.replies_left == 0 {
            self.release(slot);
        }
        if op.preload {
            return;
        }
        let why = self.why;
        // Completions during the drain count in the last second of the window.
        let at = now
            .min(self.end_ns.saturating_sub(1))
            .saturating_sub(warmup);
        let Some(side) = self.side_mut(op.side) else {
            return;
        };
        side.outstanding = side.outstanding.saturating_sub(1);
        if !op.measured {
            return;
        }
        if ok {
            side.result.ops_ok += 1;
            side.result.bytes += bytes;
            side.result.entries += entries;
            side.result
                .record(Latency::of(op.intended, op.sent, now), at);
        } else {
            side.result.error(why);
        }
    }

    fn on_reply(&mut self, tag: Tag, frame: ResponseFrame, now: u64) {
        let Some(op) = self.ops.get(tag.slot as usize).copied() else {
            return;
        };
        if op.generation != tag.generation || !op.live {
            return; // the operation timed out and its slot was reused
        }
        match op.kind {
            OpKind::Add { .. } => {
                let ok = matches!(
                    frame.response,
                    Response::AddEntry {
                        status: StatusCode::EOK,
                        ..
                    }
                );
                self.why = status_name(frame.response.status());
                let o = &mut self.ops[tag.slot as usize];
                o.replies_left = o.replies_left.saturating_sub(1);
                let done = o.replies_left == 0 && o.decided;
                self.add_reply(tag.slot, tag.member as usize, ok, now);
                let o = &self.ops[tag.slot as usize];
                if done || (o.replies_left == 0 && o.decided) {
                    self.release(tag.slot);
                }
            }
            OpKind::Read { .. } => self.read_reply(tag.slot, &frame, now),
            OpKind::Poll { .. } => self.poll_reply(tag.slot, &frame, now),
        }
    }

    /// A connection failed: every request pending on it failed.
    fn fail_conn(&mut self, index: usize, why: &str, now: u64) {
        let c = &mut self.conns[index];
        if c.dead {
            return;
        }
        log::warn!("connection {index} failed: {why}; its pending requests count as errors");
        c.dead = true;
        c.conn.fail_all();
        c.out = None;
        let tags: Vec<Tag> = c.tags.drain(..).flatten().collect();
        self.why = "connection failed";
        for tag in tags {
            let Some(op) = self.ops.get(tag.slot as usize).copied() else {
                continue;
            };
            if op.generation != tag.generation || !op.live {
                continue;
            }
            match op.kind {
                OpKind::Add { .. } => {
                    let o = &mut self.ops[tag.slot as usize];
                    o.replies_left = o.replies_left.saturating_sub(1);
                    self.add_reply(tag.slot, tag.member as usize, false, now);
                    let o = &self.ops[tag.slot as usize];
                    if o.replies_left == 0 && o.decided {
                        self.release(tag.slot);
                    }
                }
                OpKind::Read { .. } => {
                    self.ops[tag.slot as usize].replies_left = 0;
                    self.decide(tag.slot, false, now, 0, 0);
                }
                OpKind::Poll { ledger } => {
                    self.release(tag.slot);
                    self.ledgers[ledger as usize].polling = false;
                    if let Some(side) = self.read.as_mut() {
                        side.result.error("connection failed");
                    }
                }
            }
        }
    }

    /// Operations without a decision after the timeout count as timeouts; decided adds still
    /// waiting for slow members are forgotten.
    fn expire(&mut self, now: u64) {
        let timeout = self.config.timeout.as_nanos() as u64;
        let poll_extra = match self.read_cfg.as_ref().map(|r| r.pattern) {
            Some(ReadPattern::Tailing { poll_timeout_ms }) => {
                poll_timeout_ms.max(0) as u64 * 1_000_000
            }
            _ => 0,
        };
        for slot in 0..self.ops.len() as u32 {
            let op = self.ops[slot as usize];
            if !op.live {
                continue;
            }
            let limit = if matches!(op.kind, OpKind::Poll { .. }) {
                timeout + poll_extra
            } else {
                timeout
            };
            if now.saturating_sub(op.sent) < limit {
                continue;
            }
            if !op.decided {
                self.ops[slot as usize].decided = true;
                match op.kind {
                    OpKind::Add { ledger, entry, .. } => self.add_decided(ledger as usize, entry),
                    OpKind::Poll { ledger } => self.ledgers[ledger as usize].polling = false,
                    OpKind::Read { .. } => {}
                }
                if !op.preload && !matches!(op.kind, OpKind::Poll { .. }) {
                    if let Some(side) = self.side_mut(op.side) {
                        side.outstanding = side.outstanding.saturating_sub(1);
                        if op.measured {
                            side.result.timeouts += 1;
                        }
                    }
                } else if matches!(op.kind, OpKind::Poll { .. }) && now != u64::MAX {
                    // A long poll unanswered past its own timeout (the final sweep is not one:
                    // the last poll of each ledger waits for an entry that never comes).
                    if let Some(side) = self.read.as_mut() {
                        side.result.timeouts += 1;
                    }
                }
            }
            self.release(slot);
        }
    }

    // ---- I/O ----

    fn flush(&mut self, now: u64) {
        for i in 0..self.conns.len() {
            let mut failure = None;
            {
                let c = &mut self.conns[i];
                if c.dead {
                    continue;
                }
                c.want_write = false;
                loop {
                    if c.out.is_none() {
                        if !c.conn.has_output() {
                            break;
                        }
                        c.out = Some(c.conn.take_output());
                        c.out_pos = 0;
                    }
                    let out = c.out.as_ref().expect("just set");
                    match c.stream.write(&out[c.out_pos..]) {
                        Ok(0) => {
                            failure = Some("write returned 0".to_string());
                            break;
                        }
                        Ok(n) => {
                            c.out_pos += n;
                            if c.out_pos == out.len() {
                                c.out = None;
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            c.want_write = true;
                            break;
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => {
                            failure = Some(format!("write: {e}"));
                            break;
                        }
                    }
                }
            }
            if let Some(why) = failure {
                self.fail_conn(i, &why, now);
            }
        }
    }

    /// Reads what a readable connection has and handles its replies.
    fn receive(&mut self, index: usize) {
        let mut failure = None;
        let mut eof = false;
        for _ in 0..8 {
            let c = &mut self.conns[index];
            match c.stream.read(&mut self.chunk) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(n) => {
                    c.conn.receive(&self.chunk[..n]);
                    if n < self.chunk.len() {
                        break;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    failure = Some(format!("read: {e}"));
                    break;
                }
            }
        }
        let mut replies = std::mem::take(&mut self.replies);
        {
            let c = &mut self.conns[index];
            loop {
                match c.conn.poll_response() {
                    Ok(Some((id, frame))) => {
                        if let Some(tag) = c.take(id) {
                            replies.push((tag, frame));
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        failure = Some(format!("bad reply: {e}"));
                        break;
                    }
                }
            }
        }
        let now = self.now_ns();
        for (tag, frame) in replies.drain(..) {
            self.on_reply(tag, frame, now);
        }
        self.replies = replies;
        if let Some(why) = failure {
            self.fail_conn(index, &why, now);
        } else if eof {
            self.fail_conn(index, "closed by the bookie", now);
        }
    }

    /// Waits for readiness up to `timeout_ns` and handles what is ready.
    fn wait_and_receive(&mut self, timeout_ns: u64) {
        let mut fds: Vec<libc::pollfd> = self
            .conns
            .iter()
            .map(|c| libc::pollfd {
                fd: if c.dead { -1 } else { c.stream.as_raw_fd() },
                events: libc::POLLIN | if c.want_write { libc::POLLOUT } else { 0 },
                revents: 0,
            })
            .collect();
        let ts = libc::timespec {
            tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: fds is a valid array of pollfd for the call's duration; ts is valid.
        let n = unsafe {
            libc::ppoll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                &ts,
                std::ptr::null(),
            )
        };
        if n <= 0 {
            return;
        }
        for (i, fd) in fds.iter().enumerate() {
            if fd.revents & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0 {
                self.receive(i);
            }
        }
    }

    /// Issues what is due on each side. Returns the time the next open-loop op is due.
    fn issue_due(&mut self, now: u64, issue_end: u64) -> Option<u64> {
        let mut next_due: Option<u64> = None;
        for side_id in [SideId::Write, SideId::Read] {
            let max_out = self.max_outstanding;
            while let Some(side) = self.side_mut(side_id) {
                let intended = match (side.mode, side.schedule.as_mut()) {
                    (Mode::Open { .. }, Some(s)) => {
                        let t = s.peek_ns();
                        if t >= issue_end {
                            break;
                        }
                        if t > now {
                            next_due = Some(next_due.map_or(t, |d| d.min(t)));
                            break;
                        }
                        if side.outstanding >= max_out {
                            break; // due but the window is full: it waits, and that wait counts
                        }
                        s.take()
                    }
                    (Mode::Closed { outstanding }, _) => {
                        if now >= issue_end || side.outstanding >= outstanding {
                            break;
                        }
                        now
                    }
                    _ => break,
                };
                let issued = match side_id {
                    SideId::Write => {
                        let n = self.ledgers.len();
                        let side = self.write.as_mut().expect("write side");
                        let ledger = side.next_ledger % n;
                        side.next_ledger += 1;
                        self.issue_add(ledger, intended, now, false)
                    }
                    SideId::Read => self.issue_read(intended, now),
                };
                if !issued {
                    // Nothing readable yet: retry in a moment (the op keeps its time).
                    next_due = Some(now + 100_000);
                    break;
                }
            }
        }
        if self.tailing && now < issue_end {
            self.issue_polls(now);
        }
        next_due
    }

    fn in_flight(&self) -> bool {
        self.ops.iter().any(|o| o.live)
    }

    /// Writes `preload_entries` to every ledger (closed loop, 256 in flight, unrecorded).
    fn preload(&mut self) -> Result<(), BoxError> {
        let target = self.config.preload_entries as i64;
        if target == 0 {
            return Ok(());
        }
        let deadline = Instant::now() + Duration::from_secs(600);
        let mut in_flight_limit = 256usize;
        let mut next = 0usize;
        loop {
            let now = self.now_ns();
            let live = self.ops.iter().filter(|o| o.live && !o.decided).count();
            let mut all_sent = true;
            if live < in_flight_limit {
                for _ in 0..self.ledgers.len() {
                    let i = next % self.ledgers.len();
                    next += 1;
                    if self.ledgers[i].next_entry < target {
                        all_sent = false;
                        self.issue_add(i, now, now, true);
                        if self.ops.iter().filter(|o| o.live && !o.decided).count()
                            >= in_flight_limit
                        {
                            break;
                        }
                    }
                }
            } else {
                all_sent = self.ledgers.iter().all(|l| l.next_entry >= target);
            }
            self.flush(now);
            if all_sent && !self.ops.iter().any(|o| o.live && !o.decided) {
                break;
            }
            if self.conns.iter().all(|c| c.dead) {
                return Err("every connection failed during the preload".into());
            }
            if Instant::now() > deadline {
                return Err("preload did not finish in 10 minutes".into());
            }
            self.wait_and_receive(1_000_000);
            in_flight_limit = in_flight_limit.max(1);
        }
        // Let late replies of decided adds arrive, then start clean.
        let until = self.now_ns() + 50_000_000;
        while self.in_flight() && self.now_ns() < until {
            self.flush(self.now_ns());
            self.wait_and_receive(1_000_000);
        }
        for slot in 0..self.ops.len() as u32 {
            self.release(slot);
        }
        for l in &mut self.ledgers {
            l.tail_seen = l.lac;
        }
        log::info!(
            "preloaded {} entries into each of {} ledgers",
            target,
            self.ledgers.len()
        );
        Ok(())
    }

    /// The measured run: warm-up, window, drain.
    fn measure(&mut self) -> Result<(), BoxError> {
        set_timer_slack_ns(1000);
        self.start = Instant::now();
        // Keep the ledger times consistent with the new clock: nothing in flight now.
        self.warmup_ns = self.config.warmup.as_nanos() as u64;
        self.end_ns = self.warmup_ns + self.config.duration.as_nanos() as u64;
        let drain_deadline = self.end_ns + self.config.timeout.as_nanos() as u64 + 1_000_000_000;
        let mut next_expire = 50_000_000;
        loop {
            let now = self.now_ns();
            let next_due = self.issue_due(now, self.end_ns);
            self.flush(now);
            if now >= self.end_ns {
                let pending = self
                    .ops
                    .iter()
                    .any(|o| o.live && !o.decided && !matches!(o.kind, OpKind::Poll { .. }));
                if !pending || now >= drain_deadline {
                    break;
                }
            }
            if self.conns.iter().all(|c| c.dead) {
                return Err("every connection to the bookies failed".into());
            }
            if now >= next_expire {
                self.expire(now);
                next_expire = now + 50_000_000;
            }
            let mut wake = next_expire.min(if now < self.end_ns {
                self.end_ns
            } else {
                drain_deadline
            });
            if let Some(d) = next_due {
                wake = wake.min(d);
            }
            let timeout = wake.saturating_sub(now);
            // Sub-20 µs waits are not worth a sleep: check the sockets and go round.
            self.wait_and_receive(if timeout < 20_000 { 0 } else { timeout });
        }
        // Ops that were due in the window but never sent.
        let end = self.end_ns;
        for side in [self.write.as_mut(), self.read.as_mut()]
            .into_iter()
            .flatten()
        {
            if let Some(s) = side.schedule.as_mut() {
                while s.peek_ns() < end {
                    s.take();
                    side.result.not_sent += 1;
                }
            }
        }
        // Whatever is still undecided at the drain deadline timed out.
        self.expire(u64::MAX);
        Ok(())
    }
}

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
    // SAFETY: PR_SET_TIMERSLACK takes an unsigned long; no pointers.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0);
    }
}

#[cfg(test)]
mod tests {
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
            digest: DigestType::Crc32c,
            preload_size: 1024,
            warmup: Duration::from_millis(200),
            duration: Duration::from_millis(1000),
            timeout: Duration::from_secs(5),
            threads: 1,
            seed: 1,
            max_outstanding: 1000,
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

    /// A bookie that never answers: the open-loop ops time out and are counted as such.
    #[test]
    fn silent_bookie_gives_timeouts_not_hangs() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
        let addr = listener.local_addr().expect("addr");
        let keep = std::thread::spawn(move || {
            let conn = listener.accept();
            std::thread::sleep(Duration::from_secs(3));
            drop(conn);
        });
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
        }
    }
}
