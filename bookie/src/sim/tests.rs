//! The simulator in `cargo test`: a sweep of seeds passes, a seed replays to the same trace,
//! and each planted bug is caught by some seed of a bounded sweep.

use super::*;

/// Seeds of the sweep in `cargo test` (`BOOKIE_SIM_SEEDS` overrides; `scripts/vopr` runs
/// thousands in a release build).
fn sweep_seeds() -> u64 {
    std::env::var("BOOKIE_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40)
}

fn report(o: &Outcome) -> String {
    match &o.failure {
        None => format!("seed {} passed", o.seed),
        Some(f) => format!(
            "seed {} failed at step {}: {}\nreplay: scripts/vopr --seed {}\n{}",
            o.seed,
            f.step,
            f.message,
            o.seed,
            f.trace.join("\n")
        ),
    }
}

#[test]
fn seeds_pass() {
    let options = SimOptions::default();
    let mut acked = 0;
    for seed in 0..sweep_seeds() {
        let o = run(seed, &options);
        assert!(o.failure.is_none(), "{}", report(&o));
        acked += o.counts.adds_acked;
    }
    // The workload did something: adds were acknowledged and read back.
    assert!(acked > 0);
}

#[test]
fn a_seed_replays_to_the_same_trace() {
    let options = SimOptions {
        steps: 1_500,
        ..SimOptions::default()
    };
    for seed in [7, 1234, 99_999] {
        let a = run(seed, &options);
        let b = run(seed, &options);
        assert_eq!(a.trace_hash, b.trace_hash, "seed {seed}");
        assert_eq!(a.steps, b.steps);
    }
    assert_ne!(run(1, &options).trace_hash, run(2, &options).trace_hash);
}

/// Each planted bug fails some seed within `budget` seeds.
fn caught(m: mutation::Mutation, budget: u64) -> (u64, String) {
    let options = SimOptions {
        mutation: Some(m),
        ..SimOptions::default()
    };
    for seed in 0..budget {
        let o = run(seed, &options);
        if let Some(f) = o.failure {
            return (seed, f.message);
        }
    }
    panic!("{} was not caught by seeds 0..{budget}", m.name());
}

#[test]
fn planted_bugs_are_caught() {
    for m in mutation::Mutation::ALL {
        let (seed, why) = caught(m, 200);
        eprintln!("{}: caught by seed {seed}: {why}", m.name());
    }
}
