//! `bkperf`: latency benchmarks for the bookie and its parts.
//!
//! Subcommands:
//! - `write`, `read`, `mixed`: protocol workloads against any bookie ([`bench`], driven by
//!   [`engine`]): adds built as a BookKeeper client builds them ([`entry`]), E/W/A placement
//!   and open/closed-loop load models ([`load`]); HDR latency corrected for coordinated
//!   omission, per-second rows, JSON and HTML ([`html`]) reports;
//! - `sink`: a fake bookie answering at once, bkperf's own ceiling ([`sink`]);
//! - `compare`, `compare-rounds`: regression verdicts over reports ([`compare`]);
//! - `trend`: the regression gate's history, drift summary and trend page ([`trend`]);
//! - `probe`: the device's own limits in this run (commit latency, bandwidth per fdatasync
//!   size, CRC32C rate), the yardstick for every other number;
//! - `journal`: concurrent writers appending to the real journal.
//!
//! Against a bookie whose HTTP port is known (a started one, or `--bookie-http`), the protocol
//! workloads also show where the bookie's time went: per-stage latency of the adds and the
//! threads' run-queue wait over the measured window ([`stages`]).
//!
//! Every workload prints a human table and can write a `bookie-bench/1` JSON report
//! (docs/interop.md §5.1) built with [`report`]. With no arguments, `bkperf` runs the canonical
//! workload against a bookie it starts ([`default_job`], [`bookie_proc`]). Logging goes to stderr through a tiny logger of our own; `-v` or
//! `BKPERF_LOG=debug|trace|warn|error` change its level.

#![forbid(unsafe_code)]

mod bench;
mod bookie_proc;
mod cold;
mod compare;
mod engine;
mod entry;
mod eventprobe;
mod html;
mod journal_bench;
mod load;
mod probe;
mod report;
mod sink;
mod stages;
mod stalls;
mod trend;
mod usage;

use clap::{Parser, Subcommand};
use std::error::Error;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "bkperf",
    version,
    about = "Latency benchmarks for the io_uring bookie"
)]
struct Cli {
    /// More log output (-v debug, -vv trace).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// Without a subcommand: benchmark these bookies (`host:port,...`) instead of starting one.
    #[arg(long, value_delimiter = ',')]
    bookies: Vec<String>,
    /// Without a subcommand: the `bookie` binary to start (default: next to bkperf).
    #[arg(long)]
    bookie_bin: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Measure the device: 4 KiB commit latency, bandwidth per fdatasync size, CRC32C rate.
    Probe(probe::ProbeArgs),
    /// Append records from concurrent writers to the real journal.
    Journal(journal_bench::JournalArgs),
    /// Adds as a BookKeeper client sends them (E/W/A placement, digest), open or closed loop.
    Write(bench::WriteArgs),
    /// Reads: catch-up (sequential, batch), random, or tailing (long poll) behind a writer.
    Read(bench::ReadArgs),
    /// Writes and reads at once, each side reported separately (I/O isolation).
    Mixed(bench::MixedArgs),
    /// A fake bookie answering every request at once: bkperf's own ceiling.
    Sink(sink::SinkArgs),
    /// Compare two reports: per-metric ratios, non-zero exit beyond the threshold.
    Compare(compare::CompareArgs),
    /// Judge interleaved rounds of a baseline and a candidate (median of paired ratios).
    CompareRounds(compare::CompareRoundsArgs),
    /// The regression gate's history: drift summary and an HTML trend page.
    Trend(trend::TrendArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    logline::init("BKPERF_LOG", cli.verbose);
    let result = match &cli.command {
        Some(Command::Probe(args)) => probe::run(args),
        Some(Command::Journal(args)) => journal_bench::run(args),
        Some(Command::Write(args)) => bench::run_write(args),
        Some(Command::Read(args)) => bench::run_read(args),
        Some(Command::Mixed(args)) => bench::run_mixed(args),
        Some(Command::Sink(args)) => sink::run(args),
        Some(Command::Compare(args)) => return compare::run(args),
        Some(Command::CompareRounds(args)) => return compare::run_rounds(args),
        Some(Command::Trend(args)) => trend::run(args),
        None => default_job(&cli),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            log::error!("{err}");
            ExitCode::FAILURE
        }
    }
}

/// What `bkperf` does without a subcommand: the canonical workload against a real bookie
/// ([`bench::default_job`]): a `bookie` started in a temporary directory (unless `--bookies`
/// is given), a short closed-loop calibration, then 1 KiB adds open loop at half the
/// calibrated peak; the table, and a JSON report and HTML page in the current directory.
/// When no bookie can be started (the binary is missing or does not serve), it says why and
/// falls back to the device probe and the journal benchmark ([`storage_job`]).
fn default_job(cli: &Cli) -> Result<(), Box<dyn Error>> {
    eprintln!(
        "bkperf: no subcommand given; running the canonical workload (1 KiB adds, open loop at \
         a calibrated rate) against {}. See `bkperf --help` for the others.\n",
        if cli.bookies.is_empty() {
            "a bookie started for the run"
        } else {
            "the given bookies"
        }
    );
    match bench::default_job(&cli.bookies, cli.bookie_bin.as_deref()) {
        Ok(()) => Ok(()),
        Err(bench::DefaultJobError::NoBookie(why)) => {
            eprintln!(
                "bkperf: cannot start a bookie ({why}).\nFalling back to the storage job: the \
                 device probe and the journal benchmark.\n"
            );
            storage_job()
        }
        Err(bench::DefaultJobError::Run(e)) => Err(e),
    }
}

/// The storage job: a probe of the disk under the current directory (in
/// `./bkperf-probe-<pid>`, removed afterwards), then the journal benchmark with its defaults.
fn storage_job() -> Result<(), Box<dyn Error>> {
    let dir = PathBuf::from(format!("./bkperf-probe-{}", std::process::id()));
    let probed = probe::run(&probe::ProbeArgs {
        dir: dir.clone(),
        seconds: 2.0,
        json: None,
    });
    if let Err(err) = std::fs::remove_dir_all(&dir) {
        log::warn!("cannot remove {}: {err}", dir.display());
    }
    probed?;
    let journal = match Cli::try_parse_from(["bkperf", "journal"])?.command {
        Some(Command::Journal(args)) => args,
        _ => return Err("internal: default journal arguments did not parse".into()),
    };
    journal_bench::run(&journal)
}
