//! `bkperf write | read | mixed`: protocol workloads against bookies given by address (or a
//! `bookie` child started for the run), their table, interval rows, JSON and HTML reports.
//!
//! The options map onto [`crate::engine::EngineConfig`]; this module turns them into one, runs
//! the engine, and presents the result: one table row per side and latency kind (corrected =
//! from the intended send time, uncorrected = from the actual send), one row per second of the
//! measured phase, then the `bookie-bench/1` report (`--json`) and the HTML page (`--html`).
//! The primary side of a run (writes for `write` and `mixed`, reads for `read`) goes into the
//! report's `results`; the other side, when there is one, into `results_read` /
//! `results_write` with the same shape.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::bookie_proc::BookieChild;
use crate::engine::{
    self, EngineConfig, Mode, Protocol, ReadConfig, ReadPattern, RunResult, SideResult, WriteConfig,
};
use crate::entry::{master_key, DigestType};
use crate::load::{is_saturated, Arrival, SizeDist};
use crate::report::{
    parse_duration, write_json, GitInfo, IntervalStat, LatencySummary, MachineInfo, ReportBuilder,
    Results, Table,
};
use crate::stages::{self, Breakdown};

type BoxError = Box<dyn std::error::Error>;

/// Options every protocol workload shares.
#[derive(clap::Args, Debug, Clone)]
pub struct CommonArgs {
    /// Bookies to load, `host:port,host:port`. Without it, a `bookie` is started for the run.
    #[arg(long, value_delimiter = ',')]
    pub bookies: Vec<String>,
    /// The `bookie` binary to start when --bookies is not given (default: next to bkperf).
    #[arg(long)]
    pub bookie_bin: Option<PathBuf>,
    /// Extra argument for the started bookie's `serve` (repeatable), e.g. --bookie-arg=--psync.
    #[arg(long, allow_hyphen_values = true)]
    pub bookie_arg: Vec<String>,
    /// The HTTP admin server (`host:port`) of a bookie given with --bookies: its /metrics is
    /// scraped before and after the measured window for the per-stage breakdown. A started
    /// bookie gets one on a free port.
    #[arg(long)]
    pub bookie_http: Option<String>,
    /// The process id of a bookie given with --bookies (ours or Java's, on this machine): its
    /// CPU and context switches per operation over the measured window are reported (system
    /// calls too with --syscalls). A started bookie is measured without it.
    #[arg(long)]
    pub bookie_pid: Option<u32>,
    /// Wire protocol.
    #[arg(long, value_enum, default_value_t = Protocol::V3)]
    pub protocol: Protocol,
    /// Connections per bookie (per client thread), as the client's `numChannelsPerBookie`.
    #[arg(long, default_value_t = 1)]
    pub connections: usize,
    /// Ledgers written or read (round robin).
    #[arg(long, default_value_t = 8)]
    pub ledgers: usize,
    /// Client threads, each with its own connections and a share of ledgers and rate.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Warm-up, executed but excluded from the results.
    #[arg(long, default_value = "2s")]
    pub warmup: String,
    /// Measured duration.
    #[arg(long, default_value = "10s")]
    pub duration: String,
    /// An operation without an answer after this long counts as a timeout.
    #[arg(long, default_value = "10s")]
    pub timeout: String,
    /// Open loop: most operations in flight per side (further due ones wait, and it counts).
    #[arg(long, default_value_t = 10_000)]
    pub max_outstanding: usize,
    /// Open loop: operations due within this many microseconds of each other are sent
    /// together (one write per connection), as a client's event loop batches what is due;
    /// each still counts its latency from its intended send time, so this adds at most the
    /// tick to corrected latency. 0 sends each at its exact time, spinning between
    /// (a core's worth of CPU at 100k/s).
    #[arg(long, default_value_t = 50)]
    pub send_tick_us: u64,
    /// Count the system calls of the bookie and of bkperf over the window (`perf stat -e
    /// raw_syscalls:sys_enter`; needs perf and permission, and adds a little cost per call).
    #[arg(long)]
    pub syscalls: bool,
    /// Ledger password; the master key is SHA-1("ledger" + password), as Java derives it.
    #[arg(long, default_value = "")]
    pub password: String,
    /// First ledger id (default: derived from the clock, so reruns use fresh ledgers).
    #[arg(long)]
    pub first_ledger_id: Option<i64>,
    /// Seed of the size, arrival and random-read choices.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Write a bookie-bench/1 JSON report here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write a self-contained HTML page (latency spectrum and latency over time) here.
    #[arg(long)]
    pub html: Option<PathBuf>,
    /// `run.role` in the report: candidate, baseline or reference.
    #[arg(long, default_value = "candidate")]
    pub role: String,
    /// `run.round` in the report (set by scripts/bench-regress).
    #[arg(long)]
    pub round: Option<u64>,
    /// Workload id in the report (default: derived from the options).
    #[arg(long)]
    pub workload_id: Option<String>,
}

/// The write side.
#[derive(clap::Args, Debug, Clone)]
pub struct WriteSideArgs {
    /// Open loop at this many adds/s (the default, at 1000/s, unless --outstanding is given).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Closed loop with this many adds in flight.
    #[arg(long, conflicts_with = "rate")]
    pub outstanding: Option<usize>,
    /// Open-loop arrivals.
    #[arg(long, value_enum, default_value_t = Arrival::Uniform)]
    pub arrival: Arrival,
    /// Payload sizes: `1024`, `64k`, `100-4096` (uniform), `1k:9,64k:1` (weighted).
    #[arg(long, default_value = "1024")]
    pub entry_size: String,
    /// Ensemble size E.
    #[arg(short = 'e', long, default_value_t = 1)]
    pub ensemble: usize,
    /// Write quorum W.
    #[arg(short = 'w', long, default_value_t = 1)]
    pub write_quorum: usize,
    /// Ack quorum A.
    #[arg(short = 'a', long, default_value_t = 1)]
    pub ack_quorum: usize,
    /// Entry digest.
    #[arg(long, value_enum, default_value_t = DigestType::Crc32c)]
    pub digest: DigestType,
}

/// Which reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PatternArg {
    /// Catch-up: every ledger from entry 0 up (with --batch > 1: v2 batch reads).
    Sequential,
    /// Random entries among those written.
    Random,
    /// Follow the writer with v3 long polls; latency is end to end (add intended → read).
    Tailing,
}

/// The read side.
#[derive(clap::Args, Debug, Clone)]
pub struct ReadSideArgs {
    /// Which entries to read.
    #[arg(long, value_enum, default_value_t = PatternArg::Sequential)]
    pub pattern: PatternArg,
    /// Open loop at this many reads/s (default: closed loop, see --read-outstanding).
    #[arg(long)]
    pub read_rate: Option<f64>,
    /// Closed loop with this many reads in flight.
    #[arg(long, default_value_t = 16, conflicts_with = "read_rate")]
    pub read_outstanding: usize,
    /// Entries per batch read (sequential pattern, protocol v2 only).
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// Entries written to each ledger before the run for the readers.
    #[arg(long, default_value_t = 1000)]
    pub preload: u64,
    /// Payload bytes of the preloaded entries.
    #[arg(long, default_value_t = 1024)]
    pub preload_size: usize,
    /// The ledgers already hold --preload entries each (written by an earlier run with the
    /// same --first-ledger-id, --ledgers and --threads, e.g. into a bookie since stopped, or a
    /// Java bookie whose disks ours took over): read them without writing anything.
    #[arg(long, requires = "first_ledger_id")]
    pub preloaded: bool,
    /// Long-poll timeout of tailing reads, ms.
    #[arg(long, default_value_t = 1000)]
    pub poll_timeout_ms: i64,
    /// Do not check the digest and ids of entries read.
    #[arg(long)]
    pub no_verify: bool,
    /// Read from ledger storage, not the write cache: after the preload and before the clock
    /// starts, ask the bookie to flush (`PUT /api/v1/bookie/flush`, ours; never a GC, which
    /// on a Java bookie deletes ledgers without metadata) and wait until its /metrics shows
    /// `bookie_write_cache_size` 0; a bookie whose metrics do not show it is given --cold-wait
    /// instead. The report says which happened.
    #[arg(long)]
    pub cold: bool,
    /// How long --cold waits for a bookie whose write cache cannot be watched (a Java bookie
    /// flushes every `flushInterval`, 60 s by default) and at most for one that can.
    #[arg(long, default_value = "65s")]
    pub cold_wait: String,
    /// With --cold or --preloaded: before the clock starts, drop the machine's clean page
    /// cache (sync, then 1 to /proc/sys/vm/drop_caches; needs root), so that a bookie reading
    /// through the page cache (a Java bookie's entry logs) reads the disk as it would for a
    /// backlog older than the cache. Ours reads its own files with O_DIRECT either way.
    #[arg(long)]
    pub drop_page_cache: bool,
}

/// `bkperf write`.
#[derive(clap::Args, Debug, Clone)]
pub struct WriteArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub write: WriteSideArgs,
}

/// `bkperf read`.
#[derive(clap::Args, Debug, Clone)]
pub struct ReadArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub read: ReadSideArgs,
    /// The writer that tailing readers follow.
    #[command(flatten)]
    pub write: WriteSideArgs,
}

/// `bkperf mixed`.
#[derive(clap::Args, Debug, Clone)]
pub struct MixedArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub write: WriteSideArgs,
    #[command(flatten)]
    pub read: ReadSideArgs,
}

/// Which subcommand, for titles and report names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Write,
    Read,
    Mixed,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Write => "write",
            Kind::Read => "read",
            Kind::Mixed => "mixed",
        }
    }
}

fn write_config(w: &WriteSideArgs) -> Result<WriteConfig, BoxError> {
    let mode = match (w.rate, w.outstanding) {
        (_, Some(n)) => Mode::Closed { outstanding: n },
        (rate, None) => Mode::Open {
            rate: rate.unwrap_or(1000.0),
            arrival: w.arrival,
        },
    };
    Ok(WriteConfig {
        mode,
        sizes: SizeDist::parse(&w.entry_size)?,
        ensemble: w.ensemble,
        write_quorum: w.write_quorum,
        ack_quorum: w.ack_quorum,
        digest: w.digest,
    })
}

fn read_config(r: &ReadSideArgs) -> ReadConfig {
    ReadConfig {
        mode: match r.read_rate {
            Some(rate) => Mode::Open {
                rate,
                arrival: Arrival::Uniform,
            },
            None => Mode::Closed {
                outstanding: r.read_outstanding,
            },
        },
        pattern: match r.pattern {
            PatternArg::Sequential => ReadPattern::Sequential { batch: r.batch },
            PatternArg::Random => ReadPattern::Random,
            PatternArg::Tailing => ReadPattern::Tailing {
                poll_timeout_ms: r.poll_timeout_ms,
            },
        },
        verify: !r.no_verify,
    }
}

fn resolve(bookies: &[String]) -> Result<Vec<SocketAddr>, BoxError> {
    let mut out = Vec::new();
    for b in bookies.iter().filter(|b| !b.trim().is_empty()) {
        let addr = b
            .trim()
            .to_socket_addrs()
            .map_err(|e| format!("bad bookie address {b:?}: {e}"))?
            .next()
            .ok_or_else(|| format!("bookie address {b:?} resolves to nothing"))?;
        out.push(addr);
    }
    Ok(out)
}

fn default_first_ledger_id() -> i64 {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    // Seconds since the epoch times 2^16: fresh ids per run, room for 65 536 ledgers.
    ((secs & 0xFFFF_FFFF) << 16) as i64
}

/// Everything needed to run and report one workload.
pub struct Plan {
    pub kind: Kind,
    pub common: CommonArgs,
    pub config: EngineConfig,
    pub entry_size: String,
    /// `--cold`: the longest wait for the preloaded entries to leave the write cache.
    pub cold: Option<Duration>,
    /// `--drop-page-cache`: after that, drop the OS page cache too.
    pub drop_page_cache: bool,
}

impl Plan {
    pub fn write(args: &WriteArgs) -> Result<Plan, BoxError> {
        Plan::build(Kind::Write, &args.common, Some(&args.write), None)
    }

    pub fn read(args: &ReadArgs) -> Result<Plan, BoxError> {
        let tailing = args.read.pattern == PatternArg::Tailing;
        Plan::build(
            Kind::Read,
            &args.common,
            tailing.then_some(&args.write),
            Some(&args.read),
        )
    }

    pub fn mixed(args: &MixedArgs) -> Result<Plan, BoxError> {
        Plan::build(
            Kind::Mixed,
            &args.common,
            Some(&args.write),
            Some(&args.read),
        )
    }

    fn build(
        kind: Kind,
        common: &CommonArgs,
        write: Option<&WriteSideArgs>,
        read: Option<&ReadSideArgs>,
    ) -> Result<Plan, BoxError> {
        let write_cfg = write.map(write_config).transpose()?;
        let digest = write.map_or(DigestType::Crc32c, |w| w.digest);
        let read_cfg = read.map(read_config);
        let preload = match read.map(|r| r.pattern) {
            Some(PatternArg::Tailing) | None => 0,
            Some(_) => read.map_or(0, |r| r.preload.max(1)),
        };
        let config = EngineConfig {
            bookies: resolve(&common.bookies)?,
            protocol: common.protocol,
            connections: common.connections,
            ledgers: common.ledgers,
            first_ledger_id: common
                .first_ledger_id
                .unwrap_or_else(default_first_ledger_id),
            master_key: master_key(common.password.as_bytes()),
            write: write_cfg,
            read: read_cfg,
            preload_entries: preload,
            preloaded: read.is_some_and(|r| r.preloaded),
            digest,
            preload_size: read.map_or(1024, |r| r.preload_size),
            warmup: parse_duration(&common.warmup)?,
            duration: parse_duration(&common.duration)?,
            timeout: parse_duration(&common.timeout)?,
            threads: common.threads,
            seed: common.seed,
            max_outstanding: common.max_outstanding,
            send_tick: Duration::from_micros(common.send_tick_us),
        };
        if config.duration.is_zero() {
            return Err("--duration must be more than 0".into());
        }
        let cold = match read {
            Some(r) if r.cold => Some(parse_duration(&r.cold_wait)?),
            _ => None,
        };
        if read.is_some_and(|r| r.drop_page_cache && !r.cold && !r.preloaded) {
            return Err("--drop-page-cache needs --cold or --preloaded".into());
        }
        Ok(Plan {
            kind,
            cold,
            drop_page_cache: read.is_some_and(|r| r.drop_page_cache),
            common: common.clone(),
            config,
            entry_size: write.map_or_else(
                || read.map_or(1024, |r| r.preload_size).to_string(),
                |w| w.entry_size.clone(),
            ),
        })
    }

    /// A short workload id, e.g. `write-1024B-fixed_rate-5000-E1W1A1-v3`.
    pub fn workload_id(&self) -> String {
        if let Some(id) = &self.common.workload_id {
            return id.clone();
        }
        let mut id = format!("{}-{}B", self.kind.name(), self.entry_size);
        if let Some(w) = &self.config.write {
            match w.mode {
                Mode::Open { rate, .. } => id.push_str(&format!("-rate{rate:.0}")),
                Mode::Closed { outstanding } => id.push_str(&format!("-closed{outstanding}")),
            }
            id.push_str(&format!(
                "-E{}W{}A{}",
                w.ensemble, w.write_quorum, w.ack_quorum
            ));
        }
        if let Some(r) = &self.config.read {
            id.push_str(
                &format!("-{:?}", r.pattern)
                    .to_lowercase()
                    .replace([' ', '{', '}', ':'], ""),
            );
        }
        id.push('-');
        id.push_str(self.config.protocol.name());
        id
    }
}

/// The outcome of one run, with what is needed for its report.
pub struct Outcome {
    pub result: RunResult,
    pub bookie: Option<BookieFacts>,
    pub saturated: Vec<String>,
    /// Where the bookie's time went, when its /metrics could be scraped.
    pub stages: Option<Breakdown>,
    /// Why there is no breakdown although a metrics address was known.
    pub stages_error: Option<String>,
    /// What the machine did meanwhile (busy, stolen time, late wake-ups).
    pub stalls: Option<crate::stalls::Stalls>,
    /// `--cold`: how the preloaded entries were made to leave the write cache.
    pub read_mode: Option<String>,
    /// The bookie's CPU, context switches and syscalls over the measured window (a started
    /// bookie, or `--bookie-pid`), and bkperf's own.
    pub bookie_usage: Option<crate::usage::Usage>,
    pub client_usage: Option<crate::usage::Usage>,
}

impl Outcome {
    /// Operations answered in the measured window, both sides (the denominator of the
    /// per-operation costs).
    pub fn window_ops(&self) -> u64 {
        [self.result.write.as_ref(), self.result.read.as_ref()]
            .into_iter()
            .flatten()
            .map(|s| s.ops_ok + s.errors)
            .sum()
    }
}

/// What is known about a bookie child we ran.
#[derive(Clone, Debug)]
pub struct BookieFacts {
    pub binary: PathBuf,
    pub data_dir: PathBuf,
    pub cpu_s: f64,
    pub max_rss_mib: f64,
}

/// Runs a plan: starts a bookie if needed (or uses `shared`), runs the engine, stops the
/// bookie it started.
pub fn execute(plan: &mut Plan, shared: Option<&BookieChild>) -> Result<Outcome, BoxError> {
    let own = if plan.config.bookies.is_empty() && shared.is_none() {
        Some(BookieChild::start(
            plan.common.bookie_bin.as_deref(),
            &plan.common.bookie_arg,
            Duration::from_secs(60),
        )?)
    } else {
        None
    };
    let child = own.as_ref().or(shared);
    if let Some(c) = child {
        if plan.config.bookies.is_empty() {
            plan.config.bookies = vec![c.addr()];
            if let Some(w) = plan.config.write.as_mut() {
                // One local bookie: quorums larger than 1 cannot be placed.
                w.ensemble = 1;
                w.write_quorum = 1;
                w.ack_quorum = 1;
            }
        }
    }
    let http = match &plan.common.bookie_http {
        Some(h) => Some(resolve(std::slice::from_ref(h))?[0]),
        None => child.and_then(|c| c.http()),
    };
    let cpu_before = child.map_or(0.0, |c| c.cpu_since_ready_s());
    let bookie_pid = plan.common.bookie_pid.or(child.map(|c| c.pid()));
    let mut usage_before = None;
    let count_syscalls = plan.common.syscalls;
    let mut before = None;
    let mut probe = None;
    let mut read_mode = None;
    let cold = plan.cold;
    let drop_page_cache = plan.drop_page_cache;
    let mut drop_failed = None;
    let result = engine::run_observed(
        &plan.config,
        &mut || {
            if let Some(wait) = cold {
                let mut mode = crate::cold::make_cold(http, wait);
                if drop_page_cache {
                    match crate::cold::drop_page_cache() {
                        Ok(()) => mode.push_str("; page cache dropped (sync, vm.drop_caches=1)"),
                        Err(e) => drop_failed = Some(e),
                    }
                }
                read_mode = Some(mode);
            } else if drop_page_cache {
                // --preloaded: entries written before this run, read from disk.
                read_mode = Some(match crate::cold::drop_page_cache() {
                    Ok(()) => {
                        "preloaded earlier; page cache dropped (sync, vm.drop_caches=1)".into()
                    }
                    Err(e) => {
                        drop_failed = Some(e);
                        "preloaded earlier".into()
                    }
                });
            }
        },
        &mut || {
            before = Some(stages::snapshot(http));
            // perf stat first (it takes a moment to attach), the stall probe last: bkperf's
            // own window holds the probe's whole life, whose cost is then taken out.
            let calls = (
                bookie_pid
                    .filter(|_| count_syscalls)
                    .and_then(crate::usage::SyscallCount::start),
                Some(std::process::id())
                    .filter(|_| count_syscalls)
                    .and_then(crate::usage::SyscallCount::start),
            );
            usage_before = Some((
                bookie_pid.and_then(crate::usage::Sample::take),
                crate::usage::Sample::own(),
                calls.0,
                calls.1,
            ));
            probe = Some(crate::stalls::StallProbe::start());
        },
    )
    .map_err(|e| e.to_string())?;
    let stalls = probe.and_then(|p| p.finish());
    let (bookie_usage, client_usage) = match usage_before {
        Some((b, c, b_calls, c_calls)) => {
            let b_end = bookie_pid.and_then(crate::usage::Sample::take);
            let c_end = crate::usage::Sample::own();
            let (b_calls, c_calls) = (
                b_calls.and_then(|s| s.finish()),
                c_calls.and_then(|s| s.finish()),
            );
            (
                b.zip(b_end).map(|(a, z)| a.until(&z, b_calls)),
                Some({
                    let own = c.until(&c_end, c_calls);
                    match &stalls {
                        Some(s) => own.without(&s.probe_cost),
                        None => own,
                    }
                }),
            )
        }
        None => (None, None),
    };
    if let Some(e) = drop_failed {
        return Err(e.into());
    }
    if let Some(mode) = &read_mode {
        println!("read mode: {mode}");
    }
    if let Some(note) = result.read.as_ref().and_then(restart_note) {
        println!("{note}");
    }
    let (stages, stages_error) = stage_breakdown(http, before, &result.engine_threads);
    let bookie = child.map(|c| BookieFacts {
        binary: c.binary().to_path_buf(),
        data_dir: c.data_dir().to_path_buf(),
        cpu_s: c.cpu_since_ready_s() - cpu_before,
        max_rss_mib: c.max_rss_mib(),
    });
    drop(own);
    let mut saturated = Vec::new();
    for (name, side, mode) in sides(plan, &result) {
        if let Some(rate) = mode.rate() {
            let achieved = side.ops_ok as f64 / result.measured.as_secs_f64();
            let (c, u) = (
                side.latency.value_at_quantile(0.99),
                side.uncorrected.value_at_quantile(0.99),
            );
            if is_saturated(rate, achieved, c, u) {
                saturated.push(format!(
                    "{name}: saturated: achieved {achieved:.0}/s of {rate:.0}/s target, corrected p99 {c} us vs uncorrected {u} us"
                ));
            }
        }
    }
    Ok(Outcome {
        result,
        bookie,
        saturated,
        stages,
        stages_error,
        stalls,
        read_mode,
        bookie_usage,
        client_usage,
    })
}

/// A warning when catch-up reads went through their ledgers and started over in the window:
/// the entries read again may come from a cache (a Java bookie's page cache), not the disk.
fn restart_note(read: &SideResult) -> Option<String> {
    (read.restarts > 0).then(|| {
        format!(
            "catch-up: the readers read their ledgers through and started over {} time(s) in the \
             measured window: entries read again may be served from a cache (a Java bookie's \
             page cache), so the run is not all cold; --preload more entries (or a shorter \
             --duration) for a run that reads each entry once",
            read.restarts
        )
    })
}

/// The second scrape (after the window and its drain) and the breakdown.
fn stage_breakdown(
    http: Option<SocketAddr>,
    before: Option<stages::Before>,
    exited: &[stages::ThreadTime],
) -> (Option<Breakdown>, Option<String>) {
    let (Some(addr), Some(before)) = (http, before) else {
        return (None, None);
    };
    if let Some(e) = before.error {
        return (None, Some(e));
    }
    match stages::fetch_metrics(addr) {
        Ok(after) => (
            Some(stages::breakdown(
                &format!("http://{addr}/metrics"),
                &before,
                &after,
                exited,
            )),
            None,
        ),
        Err(e) => (None, Some(e)),
    }
}

/// (name, result, mode) of each side that ran, primary first.
fn sides<'a>(plan: &Plan, r: &'a RunResult) -> Vec<(&'static str, &'a SideResult, Mode)> {
    let mut out = Vec::new();
    let w = r
        .write
        .as_ref()
        .zip(plan.config.write.as_ref())
        .map(|(s, c)| ("write", s, c.mode));
    let rd = r
        .read
        .as_ref()
        .zip(plan.config.read.as_ref())
        .map(|(s, c)| ("read", s, c.mode));
    if plan.kind == Kind::Read {
        out.extend(rd);
        out.extend(w);
    } else {
        out.extend(w);
        out.extend(rd);
    }
    out
}

fn interval_stats(side: &SideResult) -> Vec<IntervalStat> {
    side.intervals
        .iter()
        .enumerate()
        .map(|(i, h)| IntervalStat::from_histogram((i + 1) as f64, h))
        .collect()
}

/// Prints the tables.
pub fn print(plan: &Plan, o: &Outcome) {
    let c = &plan.config;
    let secs = o.result.measured.as_secs_f64();
    let mut title = format!(
        "bkperf {}: {} bookie(s) {}, protocol {}, {} ledger(s), {} connection(s)/bookie, {} thread(s), {} measured after {} warm-up",
        plan.kind.name(),
        c.bookies.len(),
        c.bookies.iter().map(|b| b.to_string()).collect::<Vec<_>>().join(","),
        c.protocol.name(),
        c.ledgers,
        c.connections,
        c.threads,
        plan.common.duration,
        plan.common.warmup,
    );
    if let Some(w) = &c.write {
        title.push_str(&format!(
            "\n  writes: {} B entries, E{} W{} A{}, digest {}, {}",
            plan.entry_size,
            w.ensemble,
            w.write_quorum,
            w.ack_quorum,
            w.digest.name(),
            mode_text(&w.mode)
        ));
    }
    if let Some(r) = &c.read {
        title.push_str(&match r.pattern {
            ReadPattern::Tailing { poll_timeout_ms } => format!(
                "\n  reads: tailing, one v3 long poll per ledger ({poll_timeout_ms} ms); latency end to end from the add's intended send"
            ),
            p => format!("\n  reads: {p:?}, {}", mode_text(&r.mode)),
        });
    }
    println!("{title}");
    let mut table = Table::new(&[
        "side", "latency", "target/s", "ok/s", "MiB/s", "ok", "errors", "timeouts", "p50", "p90",
        "p99", "p99.9", "p99.99", "max",
    ]);
    let tailing = c
        .read
        .as_ref()
        .is_some_and(|r| matches!(r.pattern, ReadPattern::Tailing { .. }));
    for (name, side, mode) in sides(plan, &o.result) {
        for (kind, hist) in [
            ("corrected", &side.latency),
            ("uncorrected", &side.uncorrected),
        ] {
            if kind == "uncorrected" && mode.rate().is_none() && !(tailing && name == "read") {
                continue; // closed loop: the two are the same
            }
            let s = LatencySummary::from_histogram(hist);
            let first = kind == "corrected";
            let cell = |v: String| if first { v } else { String::new() };
            table.row(vec![
                if first {
                    name.to_string()
                } else {
                    String::new()
                },
                if tailing && name == "read" {
                    format!("e2e {kind}")
                } else if mode.rate().is_none() && first {
                    "from send".into()
                } else {
                    kind.to_string()
                },
                cell(mode.rate().map_or("-".into(), |r| format!("{r:.0}"))),
                cell(format!("{:.0}", side.ops_ok as f64 / secs)),
                cell(format!(
                    "{:.2}",
                    side.bytes as f64 / secs / (1024.0 * 1024.0)
                )),
                cell(side.ops_ok.to_string()),
                cell(side.errors.to_string()),
                cell((side.timeouts + side.not_sent).to_string()),
                s.p50.to_string(),
                s.p90.to_string(),
                s.p99.to_string(),
                s.p99_9.to_string(),
                s.p99_99.to_string(),
                s.max.to_string(),
            ]);
        }
    }
    println!("{}", table.render());
    println!(
        "latency in microseconds; corrected = from the intended send time (open loop), uncorrected = from the actual send"
    );
    // Per-second rows, both sides side by side.
    let all = sides(plan, &o.result);
    let mut headers = vec!["t_s".to_string()];
    for (name, _, _) in &all {
        for h in ["ops", "p50", "p99", "max"] {
            headers.push(format!("{name} {h}"));
        }
    }
    // Beside each second, what the machine did in it: a slow second with a late wake-up was
    // the machine's; one with retransmitted segments was held up in TCP.
    let machine = o.stalls.as_ref().map(|s| &s.per_second);
    if machine.is_some() {
        headers.extend(["machine late max".to_string(), "tcp retrans".to_string()]);
    }
    let mut per_second = Table::new(&headers);
    let rows = all.iter().map(|s| s.1.intervals.len()).max().unwrap_or(0);
    for i in 0..rows {
        let mut row = vec![format!("{}", i + 1)];
        for (_, side, _) in &all {
            match side.intervals.get(i) {
                Some(h) => {
                    let s = IntervalStat::from_histogram(0.0, h);
                    row.extend([s.ops, s.p50, s.p99, s.max].map(|v| v.to_string()));
                }
                None => row.extend(std::iter::repeat_n(String::new(), 4)),
            }
        }
        if let Some(seconds) = machine {
            match seconds.get(i) {
                Some(m) => row.extend([
                    m.late_max_us.to_string(),
                    m.tcp_retransmitted
                        .map_or("?".to_string(), |r| r.to_string()),
                ]),
                None => row.extend(std::iter::repeat_n(String::new(), 2)),
            }
        }
        per_second.row(row);
    }
    println!("{}", per_second.render());
    if let Some(b) = &o.bookie {
        println!(
            "bookie {}: {:.1} CPU s, peak RSS {:.0} MiB; bkperf: {:.1} CPU s",
            b.binary.display(),
            b.cpu_s,
            b.max_rss_mib,
            o.result.client_cpu_s
        );
    } else {
        println!("bkperf: {:.1} CPU s", o.result.client_cpu_s);
    }
    let ops = o.window_ops();
    if let Some(u) = &o.bookie_usage {
        println!(
            "bookie cost over the measured window ({ops} ops): {}",
            u.per_op_text(ops)
        );
    }
    if let Some(u) = &o.client_usage {
        println!(
            "bkperf cost over the measured window ({ops} ops): {}",
            u.per_op_text(ops)
        );
    }
    for (name, side, _) in sides(plan, &o.result) {
        if !side.error_kinds.is_empty() {
            let kinds: Vec<String> = side
                .error_kinds
                .iter()
                .map(|(k, v)| format!("{k} x{v}"))
                .collect();
            println!("{name} errors: {}", kinds.join(", "));
        }
    }
    if let Some(b) = &o.stages {
        println!("{}", b.render());
    }
    if let Some(e) = &o.stages_error {
        println!("no per-stage breakdown: {e}");
    }
    if let Some(s) = &o.stalls {
        println!("{}", s.render());
    }
    for s in &o.saturated {
        println!("WARNING {s}");
    }
}

fn mode_text(m: &Mode) -> String {
    match m {
        Mode::Open { rate, arrival } => format!("open loop at {rate:.0}/s ({arrival:?})"),
        Mode::Closed { outstanding } => format!("closed loop, {outstanding} outstanding"),
    }
}

/// Builds the bookie-bench/1 report.
pub fn report(plan: &Plan, o: &Outcome) -> Value {
    let c = &plan.config;
    let git = GitInfo::gather();
    let (impl_name, version, storage) = match &o.bookie {
        Some(_) => ("rust", git.commit.clone(), "rust-v1"),
        None => ("unknown", "unknown".to_string(), "unknown"),
    };
    let mut workload = json!({
        "id": plan.workload_id(),
        "ledgers": c.ledgers,
        "warmup_s": c.warmup.as_secs_f64(),
        "duration_s": c.duration.as_secs_f64(),
        "seed": c.seed,
        "threads": c.threads,
        "timeout_s": c.timeout.as_secs_f64(),
    });
    let primary_mode = match plan.kind {
        Kind::Read => c.read.as_ref().map(|r| r.mode),
        _ => c.write.as_ref().map(|w| w.mode),
    };
    if let Some(m) = primary_mode {
        workload["mode"] = json!(m.name());
        match m {
            Mode::Open { rate, arrival } => {
                workload["target_rate_ops"] = json!(rate);
                workload["arrival"] = json!(format!("{arrival:?}").to_lowercase());
                workload["max_outstanding"] = json!(c.max_outstanding);
                workload["send_tick_us"] = json!(c.send_tick.as_micros() as u64);
            }
            Mode::Closed { outstanding } => workload["max_outstanding"] = json!(outstanding),
        }
    }
    if let Some(w) = &c.write {
        // §5.1's `entry_bytes` is a number: the size, or the mean of a distribution.
        workload["entry_bytes"] = json!(w.sizes.mean().round() as u64);
        workload["entry_size"] = json!(plan.entry_size);
        workload["ensemble"] = json!(w.ensemble);
        workload["write_quorum"] = json!(w.write_quorum);
        workload["ack_quorum"] = json!(w.ack_quorum);
    }
    if let Some(r) = &c.read {
        workload["read"] = json!({
            "pattern": format!("{:?}", r.pattern),
            "mode": r.mode.name(),
            "target_rate_ops": r.mode.rate(),
            "preload_entries": c.preload_entries,
            "verify": r.verify,
        });
    }
    let secs = o.result.measured;
    let results_of = |side: &SideResult, mode: Mode| {
        ReportBuilder::results_json(&Results {
            ops_ok: side.ops_ok,
            ops_failed: side.errors,
            elapsed: secs,
            bytes: side.bytes,
            latency: &side.latency,
            corrected: mode.rate().is_some(),
            intervals: interval_stats(side),
            uncorrected: Some(&side.uncorrected),
            timeouts: side.timeouts + side.not_sent,
        })
    };
    let mut b = ReportBuilder::new(&format!("bkperf-{}", plan.kind.name()), &plan.common.role)
        .target(json!({
            "impl": impl_name,
            "version": version,
            "bookies": c.bookies.len(),
            "addresses": c.bookies.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
            "storage": storage,
            "journal_sync": true,
            "binary": o.bookie.as_ref().map(|b| b.binary.display().to_string()),
        }))
        .client(json!({
            "impl": "rust",
            "protocol": c.protocol.name(),
            "channels_per_bookie": c.connections * c.threads.max(1),
            "digest": c.write.as_ref().map_or(c.digest, |w| w.digest).name(),
        }))
        .workload(workload);
    let mut extra = Vec::new();
    for (i, (name, side, mode)) in sides(plan, &o.result).into_iter().enumerate() {
        let mut r = results_of(side, mode);
        r["errors_by_kind"] = json!(side.error_kinds);
        if name == "read" {
            // Sequential reads that started their ledger over in the window (restart_note).
            r["catchup_restarts"] = json!(side.restarts);
        }
        if i == 0 {
            b = b.section("results", r);
        } else {
            extra.push((format!("results_{name}"), r));
        }
    }
    for (k, v) in extra {
        b = b.section(&k, v);
    }
    b = b.section(
        "resources",
        json!({
            "client_cpu_s": (o.result.client_cpu_s * 100.0).round() / 100.0,
            "bookie_cpu_s": o.bookie.as_ref().map(|b| (b.cpu_s * 100.0).round() / 100.0),
            "bookie_max_rss_mib": o.bookie.as_ref().map(|b| b.max_rss_mib.round()),
            "bookie_per_op": o.bookie_usage.as_ref().map(|u| u.per_op_json(o.window_ops())),
            "client_per_op": o.client_usage.as_ref().map(|u| u.per_op_json(o.window_ops())),
        }),
    );
    if let Some(stages) = &o.stages {
        b = b.section("stages", stages.to_json());
    }
    if let Some(e) = &o.stages_error {
        b = b.warning(format!("no per-stage breakdown: {e}"));
    }
    if let Some(s) = &o.stalls {
        b = b.section("machine_stalls", s.to_json());
    }
    if plan.config.read.is_some() {
        b = b.section(
            "read_mode",
            json!({
                "cold": plan.cold.is_some(),
                "page_cache_dropped": plan.drop_page_cache,
                "how": o.read_mode.clone().unwrap_or_else(|| {
                    "warm: read as preloaded (entries may still be in the write cache)".into()
                }),
            }),
        );
    }
    let data_dir = o.bookie.as_ref().map(|b| b.data_dir.clone());
    let machine = MachineInfo::gather(Some(data_dir.as_deref().unwrap_or(Path::new("."))));
    b = b.machine(&machine, None);
    b = b.saturated(!o.saturated.is_empty());
    for s in &o.saturated {
        b = b.warning(s.clone());
    }
    if o.result.unmatched > 0 {
        b = b.warning(format!("{} replies matched no request", o.result.unmatched));
    }
    let cores = machine.cores.max(1) as f64;
    let cpu_share = o.result.client_cpu_s / secs.as_secs_f64().max(1e-9);
    if cpu_share > 0.9 * c.threads.max(1) as f64 || cpu_share > 0.9 * cores {
        b = b.warning(format!(
            "bkperf used {cpu_share:.2} cores: the client may be the bottleneck"
        ));
    }
    let mut report = b.build();
    if let Some(round) = plan.common.round {
        report["run"]["round"] = json!(round);
    }
    report
}

/// Runs one workload end to end: plan, run, print, reports.
pub fn run_plan(mut plan: Plan) -> Result<Outcome, BoxError> {
    run_plan_with(&mut plan, None)
}

fn run_plan_with(plan: &mut Plan, shared: Option<&BookieChild>) -> Result<Outcome, BoxError> {
    let outcome = execute(plan, shared)?;
    let plan = &*plan;
    print(plan, &outcome);
    let report = report(plan, &outcome);
    if let Some(path) = &plan.common.json {
        write_json(path, &report)?;
        println!("report written to {}", path.display());
    }
    if let Some(path) = &plan.common.html {
        std::fs::write(path, crate::html::page(&report, plan, &outcome))?;
        println!("HTML page written to {}", path.display());
    }
    Ok(outcome)
}

pub fn run_write(args: &WriteArgs) -> Result<(), BoxError> {
    run_plan(Plan::write(args)?).map(|_| ())
}

pub fn run_read(args: &ReadArgs) -> Result<(), BoxError> {
    run_plan(Plan::read(args)?).map(|_| ())
}

pub fn run_mixed(args: &MixedArgs) -> Result<(), BoxError> {
    run_plan(Plan::mixed(args)?).map(|_| ())
}

/// The per-side results for the HTML page: (name, result).
pub fn sides_for_page<'a>(
    plan: &Plan,
    o: &'a Outcome,
) -> Vec<(&'static str, &'a SideResult, bool)> {
    sides(plan, &o.result)
        .into_iter()
        .map(|(n, s, m)| (n, s, m.rate().is_some()))
        .collect()
}

/// Why the default job could not run.
pub enum DefaultJobError {
    /// No bookie could be started: the caller may fall back to the storage job.
    NoBookie(String),
    Run(BoxError),
}

/// Where the main job writes its reports: `<cargo target dir>/bkperf/` when bkperf runs from
/// a cargo target directory (`.../release/bkperf`), so the work tree stays clean; else `.`.
fn reports_dir() -> PathBuf {
    let from_target = std::env::current_exe().ok().and_then(|exe| {
        let profile_dir = exe.parent()?;
        let name = profile_dir.file_name()?.to_str()?;
        (name == "release" || name == "debug")
            .then(|| profile_dir.parent().map(|t| t.join("bkperf")))?
    });
    match from_target {
        Some(dir) if std::fs::create_dir_all(&dir).is_ok() => dir,
        _ => PathBuf::from("."),
    }
}

/// Rounds down to two significant digits (a rate that is the same on reruns).
pub fn round_down_2sig(x: f64) -> f64 {
    if !(x.is_finite() && x > 0.0) {
        return 0.0;
    }
    let scale = 10f64.powi(x.log10().floor() as i32 - 1);
    (x / scale).floor() * scale
}

/// The canonical workload (the main job): 1 KiB adds, E1 W1 A1, 8 ledgers, v3; a 3 s
/// closed-loop calibration (256 outstanding) finds the peak; the measured run is open loop at
/// half of it (two significant digits), 2 s warm-up + 10 s. Reports go to
/// `bkperf-<utc time>.json` and `.html` in [`reports_dir`].
pub fn default_job(bookies: &[String], bookie_bin: Option<&Path>) -> Result<(), DefaultJobError> {
    let child = if bookies.is_empty() {
        Some(
            BookieChild::start(bookie_bin, &[], Duration::from_secs(60))
                .map_err(|e| DefaultJobError::NoBookie(e.to_string()))?,
        )
    } else {
        None
    };
    let stamp = crate::report::utc_now_iso().replace([':', '-'], "");
    let parse = |extra: &[&str]| -> Result<WriteArgs, BoxError> {
        let mut argv = vec!["write".to_string()];
        if !bookies.is_empty() {
            argv.push(format!("--bookies={}", bookies.join(",")));
        }
        argv.extend(extra.iter().map(|s| s.to_string()));
        #[derive(clap::Parser)]
        struct One {
            #[command(flatten)]
            args: WriteArgs,
        }
        use clap::Parser;
        Ok(One::try_parse_from(argv)?.args)
    };
    let run = || -> Result<(), BoxError> {
        let calibration = parse(&["--outstanding=256", "--warmup=1s", "--duration=3s"])?;
        println!("== calibration: closed loop, 256 adds outstanding, 3 s");
        let mut plan = Plan::write(&calibration)?;
        let out = execute(&mut plan, child.as_ref())?;
        let peak = out.result.write.as_ref().map_or(0.0, |w| w.ops_ok as f64)
            / out.result.measured.as_secs_f64();
        let rate = round_down_2sig(peak / 2.0).max(100.0);
        println!(
            "calibration: peak {peak:.0} adds/s; the measured run is open loop at {rate:.0}/s\n"
        );
        let dir = reports_dir();
        let json = dir
            .join(format!("bkperf-{stamp}.json"))
            .display()
            .to_string();
        let html = dir
            .join(format!("bkperf-{stamp}.html"))
            .display()
            .to_string();
        let measured = parse(&[
            &format!("--rate={rate}"),
            "--warmup=2s",
            "--duration=10s",
            &format!("--json={json}"),
            &format!("--html={html}"),
            "--workload-id=canonical-1KiB-open-loop",
        ])?;
        let mut plan = Plan::write(&measured)?;
        run_plan_with(&mut plan, child.as_ref())?;
        Ok(())
    };
    let result = run();
    drop(child);
    result.map_err(DefaultJobError::Run)
}
