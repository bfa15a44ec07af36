//! `bkperf`: latency benchmarks for the bookie and its parts.
//!
//! Subcommands (more follow: write, read, mixed, sink, compare):
//! - `probe`: the device's own limits in this run (commit latency, bandwidth per fdatasync
//!   size, CRC32C rate), the yardstick for every other number;
//! - `journal`: concurrent writers appending to the real journal.
//!
//! Every subcommand prints a human table and can write a `bookie-bench/1` JSON report
//! (interop.md §5.1) built with [`report`]. With no arguments, `bkperf` runs a default job
//! ([`default_job`]). Logging goes to stderr through a tiny logger of our own; `-v` or
//! `BKPERF_LOG=debug|trace|warn|error` change its level.

mod journal_bench;
mod probe;
mod report;

use clap::{CommandFactory, Parser, Subcommand};
use std::error::Error;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::OnceLock;
use std::time::Instant;

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
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Measure the device: 4 KiB commit latency, bandwidth per fdatasync size, CRC32C rate.
    Probe(probe::ProbeArgs),
    /// Append records from concurrent writers to the real journal.
    Journal(journal_bench::JournalArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.verbose);
    let result = match &cli.command {
        Some(Command::Probe(args)) => probe::run(args),
        Some(Command::Journal(args)) => journal_bench::run(args),
        None => default_job(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            log::error!("{err}");
            ExitCode::FAILURE
        }
    }
}

/// What `bkperf` does without arguments: a probe of the disk under the current directory (in
/// `./bkperf-probe-<pid>`, removed afterwards), then the journal benchmark with its defaults.
fn default_job() -> Result<(), Box<dyn Error>> {
    eprintln!(
        "bkperf: no subcommand given; running the default job: `probe` in a temporary \
         directory here, then `journal` with defaults. See `bkperf --help`:\n"
    );
    let mut help = Cli::command();
    eprintln!("{}", help.render_help());
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

/// Writes `[+seconds LEVEL target] message` lines to stderr.
struct StderrLogger;

static START: OnceLock<Instant> = OnceLock::new();
static LOGGER: StderrLogger = StderrLogger;

impl log::Log for StderrLogger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            let t = START.get_or_init(Instant::now).elapsed().as_secs_f64();
            eprintln!(
                "[+{t:.3}s {:5} {}] {}",
                record.level(),
                record.target(),
                record.args()
            );
        }
    }

    fn flush(&self) {}
}

fn init_logging(verbose: u8) {
    START.get_or_init(Instant::now);
    let from_env = std::env::var("BKPERF_LOG")
        .ok()
        .and_then(|v| v.parse::<log::LevelFilter>().ok());
    let level = match verbose {
        0 => from_env.unwrap_or(log::LevelFilter::Info),
        1 => log::LevelFilter::Debug,
        _ => log::LevelFilter::Trace,
    };
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(level);
    }
}
