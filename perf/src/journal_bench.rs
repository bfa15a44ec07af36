//! `bkperf journal`: appends from concurrent writers to the real journal (being written).

use std::path::PathBuf;

/// Arguments of `bkperf journal`.
#[derive(clap::Args, Debug, Clone)]
pub struct JournalArgs {
    /// Directory for the journal segments (a temporary directory when absent).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Payload bytes per record.
    #[arg(long, default_value_t = 1024)]
    pub entry_size: usize,
    /// Closed-loop writers, each with one record outstanding.
    #[arg(long, default_value_t = 64)]
    pub writers: usize,
    /// Measured duration, e.g. 10s, 500ms.
    #[arg(long, default_value = "10s")]
    pub duration: String,
    /// Warm-up excluded from the results.
    #[arg(long, default_value = "2s")]
    pub warmup: String,
    /// Write a bookie-bench/1 JSON report here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Runs the benchmark.
pub fn run(_args: &JournalArgs) -> Result<(), Box<dyn std::error::Error>> {
    Err("bkperf journal is being written".into())
}
