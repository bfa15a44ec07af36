//! The whole-bookie simulator (issue 33; VOPR-style): one seed drives the bookie's shards,
//! journals, ledger storage, readers, garbage collection and its clients' connections on one
//! simulated disk and one simulated clock, and every reply is checked against what the clients
//! know. The same seed gives the same run, step for step: a failure prints the command that
//! replays it and the trace before it.
//!
//! One run ([`run`]):
//! 1. From the seed: the bookie's settings (1–3 shards, journal group sizes and timings, entry
//!    log sizes, a small write cache so that flushes, compaction and back-pressure happen),
//!    the disk's latencies (some seeds with multi-millisecond stalls) and its faults (some
//!    seeds with write, sync and read errors, fsyncgate included).
//! 2. Steps, each one of: a client sends a request (workload in `model`); bytes cross to the
//!    bookie in random pieces and are decoded there (`net::server::RequestDecoder`) and
//!    dispatched (`bookie::SimBookie`); time passes and every shard turns its loop; reply
//!    bytes cross back in random pieces to the client's `net::client::ClientConnection`;
//!    garbage collection against the clients' ZooKeeper listing; a connection closed in the
//!    middle of a frame; a power loss (`SimDisk::crash`, torn and lost writes) or a clean
//!    stop, then a restart that replays the journal.
//! 3. The end: no more requests; everything in flight must be answered in bounded time; a last
//!    crash and restart; every acknowledged entry read back through the protocol.
//!
//! The checks are `model`'s; the bookie's memory (write cache, pending replies) is checked
//! against its budget after every step. A planted bug (crate `mutation`) must make some seed
//! fail: `scripts/vopr --mutate NAME`.

pub mod bookie;
pub mod cli;
pub mod model;

use bytes::BytesMut;
use net::client::{ClientConfig, ClientConnection};
use net::server::RequestDecoder;
use net::ResponseFrame;
use storage::sim::{FaultConfig, SimConfig, SimDisk, SimRng};

use bookie::{BookieSettings, SimBookie};
use model::{Model, Violation};

/// How a run is shaped.
#[derive(Clone, Debug)]
pub struct SimOptions {
    /// Steps of workload before the end (the settle and the read-back come after).
    pub steps: u64,
    /// The bug planted (crate `mutation`), if any.
    pub mutation: Option<mutation::Mutation>,
    /// How many of the last events a failure reports.
    pub trace_lines: usize,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            steps: 3_000,
            mutation: None,
            trace_lines: 48,
        }
    }
}

/// How a run ended.
#[derive(Debug)]
pub struct Outcome {
    pub seed: u64,
    /// A hash of every event of the run: equal for equal seeds (determinism).
    pub trace_hash: u64,
    pub steps: u64,
    pub restarts: u64,
    pub counts: model::Counts,
    /// Reads the read-ahead cache answered (the policy was exercised).
    pub read_ahead_hits: u64,
    /// The broken rule, with the last events before it.
    pub failure: Option<Failure>,
}

#[derive(Debug)]
pub struct Failure {
    pub step: u64,
    pub message: String,
    pub trace: Vec<String>,
}

/// One client connection: the client's side (`ClientConnection`), the bytes on the wire each
/// way, and the bookie's side (its decoder and receive buffer).
struct Conn {
    id: u64,
    v3: bool,
    client: ClientConnection,
    decoder: RequestDecoder,
    to_bookie: BytesMut,
    inbox: BytesMut,
    to_client: BytesMut,
}

impl Conn {
    fn new(id: u64, v3: bool) -> Conn {
        Conn {
            id,
            v3,
            client: ClientConnection::new(ClientConfig::default()),
            decoder: RequestDecoder::new(net::frame::DEFAULT_MAX_FRAME_SIZE),
            to_bookie: BytesMut::new(),
            inbox: BytesMut::new(),
            to_client: BytesMut::new(),
        }
    }
}

/// The last events, for a failure's report, and the hash of all of them.
struct Trace {
    hash: u64,
    recent: std::collections::VecDeque<String>,
    keep: usize,
}

impl Trace {
    fn new(keep: usize) -> Trace {
        Trace {
            hash: 0xcbf2_9ce4_8422_2325,
            recent: std::collections::VecDeque::new(),
            keep,
        }
    }

    fn mix(&mut self, v: u64) {
        for b in v.to_le_bytes() {
            self.hash ^= u64::from(b);
            self.hash = self.hash.wrapping_mul(0x0100_0000_01b3);
        }
    }

    /// An event: hashed, and kept (formatted) among the last few.
    fn event(&mut self, now: u64, kind: u64, a: u64, b: u64, line: impl FnOnce() -> String) {
        self.mix(now);
        self.mix(kind);
        self.mix(a);
        self.mix(b);
        if self.keep > 0 {
            if self.recent.len() == self.keep {
                self.recent.pop_front();
            }
            self.recent
                .push_back(format!("[{:>10} us] {}", now, line()));
        }
    }
}

/// The settings a seed gets.
fn settings(rng: &mut SimRng) -> (BookieSettings, SimConfig, bool) {
    let shards = rng.range(1, 4) as usize;
    let mut journal = journal::JournalConfig {
        max_record_bytes: 64 << 10,
        buffered_writes_threshold_bytes: [4096, 16 << 10, 64 << 10][rng.below(3) as usize],
        max_group_wait_us: rng.range(50, 3000),
        buffered_entries_threshold: [0, 3, 50][rng.below(3) as usize],
        flush_when_queue_empty: rng.chance(0.3),
        flush_when_idle: rng.chance(0.7),
        max_groups_in_flight: rng.range(1, 4) as usize,
        zero_fill_chunk_bytes: 16 << 10,
        max_free_segments: rng.below(3) as usize,
        // Both recovery modes; without corruption planted on the disk they must agree.
        recovery_mode: if rng.chance(0.3) {
            journal::RecoveryMode::TolerateCorruption
        } else {
            journal::RecoveryMode::Strict
        },
        ..journal::JournalConfig::default()
    };
    let min = 2 * 4096 + journal.group_buffer_bytes() as u64;
    journal.segment_size_bytes = storage::align_up((min + rng.below(3 * min)) as usize) as u64;
    let store = entrylog::LedgerStoreConfig {
        entry_log_size_bytes: [16 << 10, 64 << 10, 1 << 20][rng.below(3) as usize],
        write_chunk_bytes: [4096, 8192, 64 << 10][rng.below(3) as usize],
        max_writes_in_flight: rng.range(1, 3) as usize,
        index_block_cache_bytes: [0, 8192, 1 << 20][rng.below(3) as usize],
        index_merge_width: rng.range(2, 5) as usize,
        max_index_runs: rng.range(2, 9) as usize,
    };
    let write_cache_bytes = [64 << 10, 256 << 10, 2 << 20][rng.below(3) as usize];
    let bookie = BookieSettings {
        shards,
        journal,
        store,
        write_cache_bytes,
        flush_threshold_bytes: write_cache_bytes / 2,
        flush_interval_us: rng.range(20_000, 2_000_000),
        flush_report_us: (100, rng.range(200, 20_000)),
        read_delay_us: (10, rng.range(20, 5_000)),
        hop_us: (5, rng.range(10, 2_000)),
        max_batch_read_bytes: 16 << 20,
        read_ahead: if rng.chance(0.3) {
            (0, 1)
        } else {
            (
                [16 << 10, 256 << 10, 4 << 20][rng.below(3) as usize],
                rng.range(2, 33) as usize,
            )
        },
    };
    // Latencies: mostly fast; some seeds with stalls of several milliseconds.
    let max_latency = if rng.chance(0.2) {
        rng.range(2_000, 20_000)
    } else {
        rng.range(20, 800)
    };
    let faults = match rng.below(10) {
        0 => FaultConfig::none()
            .with_sync_eio(0.002)
            .with_fsyncgate(true),
        1 => FaultConfig::none().with_write_eio(0.002).with_enospc(0.002),
        2 => FaultConfig::none()
            .with_read_eio(0.01)
            .with_read_bitflip(0.01)
            .with_short_read(0.01),
        _ => FaultConfig::none(),
    };
    let read_faults = faults.read_eio > 0.0;
    let disk = SimConfig::new(rng.next_u64())
        .with_latency_us(rng.range(1, 20), max_latency)
        .with_faults(faults);
    (bookie, disk, read_faults)
}

/// Runs one seed.
pub fn run(seed: u64, options: &SimOptions) -> Outcome {
    let planted = mutation::plant(options.mutation);
    let mut sim = Sim::new(seed, options.trace_lines);
    let failure = match planted {
        Err(e) => Some(Failure {
            step: 0,
            message: e.to_string(),
            trace: Vec::new(),
        }),
        Ok(()) => sim.run(options.steps).err().map(|v| Failure {
            step: sim.step,
            message: v.0,
            trace: sim.trace.recent.iter().cloned().collect(),
        }),
    };
    let _ = mutation::plant(None);
    Outcome {
        seed,
        trace_hash: sim.trace.hash,
        steps: sim.step,
        restarts: sim.restarts,
        counts: sim.model.counts,
        read_ahead_hits: sim.read_ahead_hits
            + sim.bookie.as_ref().map_or(0, |b| b.read_ahead_hits()),
        failure,
    }
}

struct Sim {
    rng: SimRng,
    disk: SimDisk,
    faults: FaultConfig,
    settings: BookieSettings,
    bookie: Option<SimBookie>,
    model: Model,
    conns: Vec<Conn>,
    next_conn: u64,
    step: u64,
    restarts: u64,
    /// Read-ahead hits of the bookies stopped so far.
    read_ahead_hits: u64,
    trace: Trace,
}

impl Sim {
    fn new(seed: u64, trace_lines: usize) -> Sim {
        let root = SimRng::new(seed);
        let mut rng = root.fork("vopr");
        let (settings, disk_config, read_faults) = self::settings(&mut rng);
        let faults = disk_config.faults;
        let disk = SimDisk::new(disk_config);
        Sim {
            rng,
            disk,
            faults,
            settings,
            bookie: None,
            model: Model::new(read_faults),
            conns: Vec::new(),
            next_conn: 0,
            step: 0,
            restarts: 0,
            read_ahead_hits: 0,
            trace: Trace::new(trace_lines),
        }
    }

    fn now(&self) -> u64 {
        self.disk.now_us()
    }

    fn bookie(&mut self) -> &mut SimBookie {
        self.bookie.as_mut().expect("the bookie is up")
    }

    /// Starts the bookie on what the disk holds. The disk's faults are off while it starts:
    /// a read error while replaying is a refusal to start, which is not what is tested here.
    fn start(&mut self) -> Result<(), Violation> {
        self.dump();
        self.disk.set_faults(FaultConfig::none());
        let rng = self.rng.fork("bookie");
        let opened = SimBookie::open(&self.disk, &self.settings, rng);
        self.disk.set_faults(self.faults);
        match opened {
            Ok(b) => {
                self.bookie = Some(b);
                let now = self.now();
                self.trace
                    .event(now, 1, self.restarts, 0, || "bookie started".into());
                Ok(())
            }
            Err(e) => Err(Violation(format!("the bookie refused to start: {e}"))),
        }
    }

    /// `BOOKIE_SIM_DUMP=DIR` (a replay's debugging aid): what each start finds on the disk,
    /// written to `DIR/<start>/`, for `bookie inspect journal|entrylog` to read.
    fn dump(&self) {
        let Some(root) = std::env::var_os("BOOKIE_SIM_DUMP") else {
            return;
        };
        let base = std::path::Path::new(&root).join(self.restarts.to_string());
        for s in 0..self.settings.shards {
            for dir in [format!("journal/shard-{s}"), format!("ledgers/shard-{s}")] {
                let to = base.join(&dir);
                let _ = std::fs::create_dir_all(&to);
                for name in self.disk.volatile_names(&dir) {
                    if let Some(bytes) = self.disk.volatile_file(&dir, &name) {
                        let _ = std::fs::write(to.join(&name), bytes);
                    }
                }
            }
        }
    }

    fn connect(&mut self) {
        let id = self.next_conn;
        self.next_conn += 1;
        let v3 = self.rng.chance(0.5);
        self.conns.push(Conn::new(id, v3));
        let now = self.now();
        self.trace.event(now, 2, id, v3 as u64, || {
            format!("conn {id} opened (v{})", if v3 { 3 } else { 2 })
        });
    }

    fn close(&mut self, at: usize) {
        let conn = self.conns.swap_remove(at);
        self.model.conn_lost(conn.id);
        let now = self.now();
        self.trace
            .event(now, 3, conn.id, 0, || format!("conn {} closed", conn.id));
    }

    fn run(&mut self, steps: u64) -> Result<(), Violation> {
        self.start()?;
        for _ in 0..3 {
            self.connect();
        }
        let max_body = [64usize, 1024, 8192][self.rng.below(3) as usize];
        while self.step < steps {
            self.step += 1;
            let roll = self.rng.below(1000);
            match roll {
                0..=299 => self.send(max_body)?,
                300..=499 => self.deliver_to_bookie()?,
                500..=699 => self.pass_time(),
                700..=899 => self.deliver_to_client()?,
                900..=909 => self.gc()?,
                910..=913 if !self.conns.is_empty() => {
                    // A connection closed, maybe in the middle of a frame.
                    let at = self.rng.below(self.conns.len() as u64) as usize;
                    self.partial_delivery(at);
                    self.close(at);
                }
                914..=916 if self.conns.len() < 5 => self.connect(),
                917 => self.restart(true)?,
                918 if self.rng.chance(0.5) => self.restart(false)?,
                _ => self.pass_time(),
            }
            self.drive()?;
            if self.step.is_multiple_of(64) {
                if let Some(v) = self.model.overdue(self.now()) {
                    return Err(v);
                }
            }
        }
        self.settle()?;
        self.restart(true)?;
        self.read_back()
    }

    /// Every shard's loop turns; replies are encoded onto their connections; budgets checked.
    fn drive(&mut self) -> Result<(), Violation> {
        let bookie = self.bookie.as_mut().expect("up");
        bookie.drive();
        let out = std::mem::take(&mut bookie.out);
        let durable = bookie.take_durable_deletions();
        if !durable.is_empty() {
            let now = self.disk.now_us();
            self.trace.event(now, 11, durable.len() as u64, 0, || {
                format!("ledgers {durable:?}: deletion durable")
            });
            self.model.collected(&durable, now)?;
        }
        let footprint = bookie.footprint();
        let budget = self.settings.write_cache_bytes + self.settings.write_cache_bytes / 4;
        if footprint.cached_bytes > budget {
            return Err(Violation(format!(
                "write cache holds {} bytes, over its budget of {budget}",
                footprint.cached_bytes
            )));
        }
        if footprint.read_ahead_bytes > self.settings.read_ahead.0 {
            return Err(Violation(format!(
                "read-ahead cache holds {} bytes, over its budget of {}",
                footprint.read_ahead_bytes, self.settings.read_ahead.0
            )));
        }
        if footprint.pending > 100_000 {
            return Err(Violation(format!("{} replies pending", footprint.pending)));
        }
        let now = self.now();
        for (to, response) in out {
            let Some(conn) = self.conns.iter_mut().find(|c| c.id == to.conn) else {
                continue;
            };
            let status = response.status() as u64;
            self.trace.event(now, 4, to.conn, status, || {
                format!("bookie -> conn {}: {:?}", to.conn, brief(&response))
            });
            let frame = ResponseFrame {
                header: to.header,
                response,
            };
            if let Err(e) = net::codec::encode_response(&frame, &mut conn.to_client) {
                return Err(Violation(format!("a reply that cannot be encoded: {e:?}")));
            }
        }
        Ok(())
    }

    fn send(&mut self, max_body: usize) -> Result<(), Violation> {
        if self.conns.is_empty() {
            self.connect();
        }
        let at = self.rng.below(self.conns.len() as u64) as usize;
        let v3 = self.conns[at].v3;
        let Some((request, asked)) = self.model.next_request(&mut self.rng, v3, max_body) else {
            return Ok(());
        };
        if !v3 && self.v2_key_in_flight(at, &request) {
            // v2 replies carry no request id: a client matches them by ledger and entry, so
            // two requests of one kind for the same entry on one connection are ambiguous
            // (a fence read and a plain read of entry 0 answered out of order swap). A Java
            // client has the same limit.
            self.model.not_sent(&asked);
            return Ok(());
        }
        let timeout_us = match &request {
            net::Request::ReadEntry {
                time_out: Some(t), ..
            } => *t as u64 * 1000,
            _ => 0,
        };
        let line = format!("conn {} <- {asked:?}", self.conns[at].id);
        let conn = &mut self.conns[at];
        let sent = if v3 {
            conn.client.send_v3(request, None)
        } else {
            conn.client.send_v2(request, false)
        };
        let now = self.disk.now_us();
        match sent {
            Ok(id) => {
                let out = conn.client.take_output();
                conn.to_bookie.extend_from_slice(&out);
                let cid = conn.id;
                self.model.sent(cid, id, asked, now, timeout_us);
                self.trace.event(now, 5, cid, id.0, || line);
            }
            Err(_) => self.model.not_sent(&asked),
        }
        Ok(())
    }

    /// Whether a v2 request with `request`'s match key (ledger, entry) is in flight on
    /// connection `at`.
    fn v2_key_in_flight(&self, at: usize, request: &net::Request) -> bool {
        let key = match request {
            net::Request::AddEntry {
                ledger_id,
                entry_id,
                ..
            } => (0, *ledger_id, *entry_id),
            net::Request::ReadEntry {
                ledger_id,
                entry_id,
                ..
            } => (1, *ledger_id, *entry_id),
            _ => return false,
        };
        let conn = self.conns[at].id;
        self.model
            .in_flight
            .range((conn, net::client::RequestId(0))..=(conn, net::client::RequestId(u64::MAX)))
            .any(|(_, f)| {
                let k = match f.asked {
                    model::Asked::Add { ledger, entry, .. }
                    | model::Asked::BadKey { ledger, entry } => (0, ledger, entry),
                    model::Asked::Read { ledger, entry, .. } => (1, ledger, entry),
                    model::Asked::Fence { ledger, entry } => (1, ledger, entry),
                    model::Asked::LongPoll {
                        ledger,
                        previous_lac,
                    } => (1, ledger, previous_lac + 1),
                    _ => (2, 0, 0),
                };
                k == key
            })
    }

    /// Some of a connection's bytes reach the bookie, which decodes what frames they complete
    /// (unless its shard stopped reading sockets: back-pressure).
    fn deliver_to_bookie(&mut self) -> Result<(), Violation> {
        let ready: Vec<usize> = (0..self.conns.len())
            .filter(|&i| !self.conns[i].to_bookie.is_empty())
            .collect();
        if ready.is_empty() {
            return Ok(());
        }
        let at = ready[self.rng.below(ready.len() as u64) as usize];
        let id = self.conns[at].id;
        if self.bookie().is_blocked(id) {
            return Ok(());
        }
        let len = self.conns[at].to_bookie.len();
        let n = if self.rng.chance(0.7) {
            len
        } else {
            self.rng.range(1, len as u64 + 1) as usize
        };
        let conn = &mut self.conns[at];
        let chunk = conn.to_bookie.split_to(n);
        conn.inbox.extend_from_slice(&chunk);
        let id = conn.id;
        let now = self.disk.now_us();
        self.trace.event(now, 6, id, n as u64, || {
            format!("conn {id}: {n} bytes to the bookie")
        });
        loop {
            let conn = &mut self.conns[at];
            match conn.decoder.decode(&mut conn.inbox) {
                Ok(Some(frame)) => {
                    let bookie = self.bookie.as_mut().expect("up");
                    bookie.dispatch(frame, id);
                }
                Ok(None) => break,
                Err(e) => {
                    return Err(Violation(format!(
                        "conn {id}: the bookie could not decode a client's frame: {e:?}"
                    )))
                }
            }
        }
        Ok(())
    }

    /// The bytes of a frame cut short by a closing connection: the bookie sees them and then
    /// the close, and must not act on half a request.
    fn partial_delivery(&mut self, at: usize) {
        let conn = &mut self.conns[at];
        if conn.to_bookie.len() > 1 {
            let n = self.rng.range(1, conn.to_bookie.len() as u64) as usize;
            let chunk = conn.to_bookie.split_to(n);
            conn.inbox.extend_from_slice(&chunk);
            while let Ok(Some(frame)) = conn.decoder.decode(&mut conn.inbox) {
                let bookie = self.bookie.as_mut().expect("up");
                bookie.dispatch(frame, conn.id);
            }
        }
    }

    fn deliver_to_client(&mut self) -> Result<(), Violation> {
        let ready: Vec<usize> = (0..self.conns.len())
            .filter(|&i| !self.conns[i].to_client.is_empty())
            .collect();
        if ready.is_empty() {
            return Ok(());
        }
        let at = ready[self.rng.below(ready.len() as u64) as usize];
        let len = self.conns[at].to_client.len();
        let n = if self.rng.chance(0.7) {
            len
        } else {
            self.rng.range(1, len as u64 + 1) as usize
        };
        let now = self.disk.now_us();
        let conn = &mut self.conns[at];
        let chunk = conn.to_client.split_to(n);
        conn.client.receive(&chunk);
        loop {
            match conn.client.poll_response() {
                Ok(Some((id, frame))) => {
                    let cid = conn.id;
                    self.trace.event(now, 7, cid, id.0, || {
                        format!("conn {cid} got {:?}: {:?}", id, brief(&frame.response))
                    });
                    self.model.reply(cid, id, &frame.response, now)?;
                }
                Ok(None) => break,
                Err(e) => {
                    return Err(Violation(format!(
                        "conn {}: a reply the client cannot decode: {e:?}",
                        conn.id
                    )))
                }
            }
            if conn.client.unmatched_responses() > 0 {
                return Err(Violation(format!(
                    "conn {}: a reply for no request in flight (v2 matches ledger and entry)",
                    conn.id
                )));
            }
        }
        if conn.client.unmatched_responses() > 0 {
            return Err(Violation(format!(
                "conn {}: a reply for no request in flight (v2 matches ledger and entry)",
                conn.id
            )));
        }
        Ok(())
    }

    /// Virtual time passes: mostly tens to hundreds of µs, sometimes milliseconds.
    fn pass_time(&mut self) {
        let dt = match self.rng.below(20) {
            0 => self.rng.range(1_000, 50_000),
            1..=4 => self.rng.range(200, 2_000),
            _ => self.rng.range(1, 200),
        };
        self.disk.advance(dt);
        let now = self.now();
        self.trace.event(now, 8, dt, 0, || format!("{dt} us pass"));
    }

    fn gc(&mut self) -> Result<(), Violation> {
        let listed = self.model.listed();
        let deleted = self.bookie().garbage_collect(&listed);
        let now = self.now();
        self.trace.event(now, 9, deleted.len() as u64, 0, || {
            format!("gc: ledgers {deleted:?} deleted")
        });
        self.model.deleted(&deleted)
    }

    /// A power loss (`crash`) or a clean stop, then a start on what the disk kept.
    fn restart(&mut self, crash: bool) -> Result<(), Violation> {
        let bookie = self.bookie.take().expect("up");
        self.read_ahead_hits += bookie.read_ahead_hits();
        if crash {
            drop(bookie);
            self.disk.crash();
        } else {
            bookie.stop();
        }
        let now = self.now();
        self.trace.event(now, 10, crash as u64, 0, || {
            (if crash { "power loss" } else { "clean stop" }).to_string()
        });
        while !self.conns.is_empty() {
            self.close(0);
        }
        self.restarts += 1;
        self.model.restarted();
        self.start()?;
        for _ in 0..2 {
            self.connect();
        }
        Ok(())
    }

    /// No new requests: everything in flight is delivered and answered within the bound.
    fn settle(&mut self) -> Result<(), Violation> {
        let until = self.now() + 2 * model::ANSWER_BOUND_US + 5_000_000;
        while !self.model.in_flight.is_empty() && self.now() < until {
            for at in 0..self.conns.len() {
                let id = self.conns[at].id;
                if !self.conns[at].to_bookie.is_empty() && !self.bookie().is_blocked(id) {
                    let n = self.conns[at].to_bookie.len();
                    let chunk = self.conns[at].to_bookie.split_to(n);
                    self.conns[at].inbox.extend_from_slice(&chunk);
                    loop {
                        let conn = &mut self.conns[at];
                        match conn.decoder.decode(&mut conn.inbox) {
                            Ok(Some(frame)) => {
                                let id = conn.id;
                                self.bookie().dispatch(frame, id);
                            }
                            Ok(None) => break,
                            Err(e) => return Err(Violation(format!("undecodable frame: {e:?}"))),
                        }
                    }
                }
            }
            self.disk.advance(500);
            self.drive()?;
            for _ in 0..self.conns.len() {
                self.deliver_to_client()?;
            }
            if let Some(v) = self.model.overdue(self.now()) {
                return Err(v);
            }
        }
        if let Some((key, f)) = self.model.in_flight.iter().next() {
            return Err(Violation(format!(
                "after the workload, {key:?} ({:?}) was never answered",
                f.asked
            )));
        }
        Ok(())
    }

    /// Every acknowledged entry of every listed ledger, read back through a fresh connection.
    fn read_back(&mut self) -> Result<(), Violation> {
        let reads = model::read_back(&self.model);
        let mut conn = Conn::new(self.next_conn, false);
        self.next_conn += 1;
        let cid = conn.id;
        for batch in reads.chunks(512) {
            for (request, asked) in batch.iter().cloned() {
                let id = conn
                    .client
                    .send_v2(request, false)
                    .map_err(|e| Violation(format!("read-back: {e:?}")))?;
                let now = self.now();
                self.model.sent(cid, id, asked, now, 0);
            }
            let out = conn.client.take_output();
            conn.to_bookie.extend_from_slice(&out);
            self.conns.push(conn);
            self.settle()?;
            conn = self.conns.pop().expect("pushed");
        }
        // Faults may have made some reads fail (EIO); what was read is checked by the model.
        Ok(())
    }
}

/// A response without its bodies, for the trace.
fn brief(r: &net::Response) -> String {
    match r {
        net::Response::ReadEntry {
            status,
            ledger_id,
            entry_id,
            body,
            max_lac,
            ..
        } => format!(
            "ReadEntry {status:?} {ledger_id}/{entry_id} body {} lac {max_lac:?}",
            body.as_ref().map(|b| b.len()).unwrap_or(0)
        ),
        net::Response::BatchReadEntry {
            status,
            ledger_id,
            start_entry_id,
            entries,
            ..
        } => format!(
            "BatchRead {status:?} {ledger_id}/{start_entry_id} x{}",
            entries.len()
        ),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests;
