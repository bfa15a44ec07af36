//! `bookie sim`: the simulator from the command line (`scripts/vopr` calls it). A sweep of
//! seeds, one seed replayed with its trace, or seeds for a number of hours; a planted bug with
//! `--mutate` (a build with the `planted` feature). Prints one line per failing seed with the
//! command that replays it, and a summary whose hash is equal for equal sweeps.

use std::time::Instant;

use super::{run, Outcome, SimOptions};

#[derive(clap::Args, Debug)]
pub struct SimArgs {
    /// How many seeds to run (from `--from`).
    #[arg(long, default_value_t = 100)]
    seeds: u64,
    /// The first seed of the sweep.
    #[arg(long, default_value_t = 0)]
    from: u64,
    /// Run this one seed and print its trace (replaying a failure).
    #[arg(long, conflicts_with_all = ["seeds", "hours"])]
    seed: Option<u64>,
    /// Run seeds from `--from` on until this many hours have passed.
    #[arg(long)]
    hours: Option<f64>,
    /// Steps of workload per seed.
    #[arg(long, default_value_t = SimOptions::default().steps)]
    steps: u64,
    /// Plant a bug (crate `mutation`): ack-before-sync, fence-not-persisted,
    /// reply-wrong-entry, lac-early, gc-drops-live-ledger. The sweep stops at the first seed
    /// that catches it.
    #[arg(long)]
    mutate: Option<String>,
    /// With `--seed`: how many of the last events to print on a failure.
    #[arg(long, default_value_t = 48)]
    trace_lines: usize,
}

fn failure_report(o: &Outcome, mutate: Option<&str>) -> String {
    let f = o.failure.as_ref().expect("failed");
    let planted = mutate.map(|m| format!(" --mutate {m}")).unwrap_or_default();
    format!(
        "seed {} FAILED at step {}: {}\n  replay: scripts/vopr --seed {}{planted}",
        o.seed, f.step, f.message, o.seed
    )
}

/// Runs the command; the exit status is 0 when every seed passed (or, with `--mutate`, when
/// some seed caught the planted bug).
pub fn main(args: SimArgs) -> Result<(), String> {
    // The bookie's own log lines (flushes, compactions, recoveries) would drown the report.
    // `bookie -v sim --seed S` keeps them, for a replay.
    if args.seed.is_none() || log::max_level() < log::LevelFilter::Debug {
        log::set_max_level(log::LevelFilter::Off);
    }
    let mutation = match &args.mutate {
        None => None,
        Some(name) => Some(
            mutation::Mutation::from_name(name)
                .ok_or_else(|| format!("--mutate {name}: no such planted bug"))?,
        ),
    };
    if mutation.is_some() && !mutation::available() {
        return Err(
            "--mutate needs a build with the `planted` feature (scripts/vopr does it)".into(),
        );
    }
    let options = SimOptions {
        steps: args.steps,
        mutation,
        trace_lines: if args.seed.is_some() {
            args.trace_lines
        } else {
            0
        },
    };
    if let Some(seed) = args.seed {
        let o = run(seed, &options);
        println!(
            "seed {seed}: {} steps, {} restarts, {} read-ahead hits, trace hash {:016x}, {:?}",
            o.steps, o.restarts, o.read_ahead_hits, o.trace_hash, o.counts
        );
        return match &o.failure {
            None => Ok(()),
            Some(f) => {
                println!("last events before the failure:");
                for line in &f.trace {
                    println!("  {line}");
                }
                Err(failure_report(&o, args.mutate.as_deref()))
            }
        };
    }
    let started = Instant::now();
    let deadline = args
        .hours
        .map(|h| started + std::time::Duration::from_secs_f64(h * 3600.0));
    let (mut passed, mut failed, mut sweep_hash) = (0u64, 0u64, 0xcbf2_9ce4_8422_2325u64);
    let (mut acked, mut restarts, mut hits) = (0u64, 0u64, 0u64);
    let mut seed = args.from;
    loop {
        match deadline {
            Some(d) if Instant::now() >= d => break,
            None if seed >= args.from + args.seeds => break,
            _ => {}
        }
        let o = run(seed, &options);
        sweep_hash = (sweep_hash ^ o.trace_hash).wrapping_mul(0x0100_0000_01b3);
        acked += o.counts.adds_acked;
        restarts += o.restarts;
        hits += o.read_ahead_hits;
        seed += 1;
        if o.failure.is_some() {
            failed += 1;
            println!("{}", failure_report(&o, args.mutate.as_deref()));
            if mutation.is_some() {
                break;
            }
        } else {
            passed += 1;
        }
    }
    println!(
        "sim: seeds {}..{seed} (end excluded): {passed} passed, {failed} failed; {acked} adds acknowledged, \
         {restarts} restarts, {hits} read-ahead hits; {:.1} s; sweep hash {sweep_hash:016x}",
        args.from,
        started.elapsed().as_secs_f64()
    );
    match (mutation, failed) {
        (None, 0) => Ok(()),
        (None, n) => Err(format!("{n} seeds failed")),
        (Some(m), 0) => Err(format!("the planted bug {} was not caught", m.name())),
        (Some(_), _) => Ok(()),
    }
}
