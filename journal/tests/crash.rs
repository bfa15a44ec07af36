//! Crash tests: the production journal on the simulated disk, driven by one seed.
//!
//! Each seed runs several rounds of: open (recovery, sometimes itself interrupted by injected
//! faults and a crash), check what recovery replayed against a model, run a random workload
//! (appends of random sizes, ticks, waits, trims, and in some rounds injected EIO, ENOSPC, short
//! writes and lying syncs), then crash at a random point. The checker proves, after every
//! recovery:
//! 1. every acknowledged record comes back byte for byte;
//! 2. nothing that was never appended appears (payloads carry their round and LSN);
//! 3. only a suffix of unacknowledged records is lost (replayed LSNs are contiguous);
//! 4. the durable LSN never goes backwards;
//! 5. recovering twice gives the same log (idempotence), also after a crash during recovery.
//!
//! A failing seed prints the command that replays it: `SIM_SEED=<seed> cargo test -p journal
//! --test crash replay_one_seed -- --nocapture`. `scripts/sim` sweeps random seeds.

use std::collections::BTreeMap;

use journal::{AppendError, Journal, JournalConfig, Lsn};
use storage::sim::{FaultConfig, SimConfig, SimDisk, SimRng};

/// What the checker knows: the payload of every LSN still in the log, and the acknowledged
/// prefix.
struct Model {
    records: BTreeMap<u64, Vec<u8>>,
    acked: u64,
    mark: u64,
}

fn payload(rng: &mut SimRng, round: u64, lsn: u64, max: usize) -> Vec<u8> {
    let len = match rng.below(10) {
        0 => 0,
        1..=6 => rng.range(1, 300) as usize,
        _ => rng.range(300, max as u64 + 1) as usize,
    };
    let mut p = vec![0u8; len];
    rng.fill(&mut p);
    // Stamp round and LSN so a record from another life can never match the model.
    let stamp = [round.to_le_bytes(), lsn.to_le_bytes()].concat();
    for (i, b) in stamp.iter().enumerate().take(len) {
        p[i] = *b;
    }
    p
}

fn config(rng: &mut SimRng) -> JournalConfig {
    let max_record_bytes = [512, 4096, 20_000][rng.below(3) as usize];
    let mut c = JournalConfig {
        max_record_bytes,
        buffered_writes_threshold_bytes: [2048, 8192, 65536][rng.below(3) as usize],
        max_group_wait_us: rng.range(50, 3000),
        buffered_entries_threshold: [0, 3, 50][rng.below(3) as usize],
        flush_when_queue_empty: rng.chance(0.3),
        flush_when_idle: rng.chance(0.7),
        max_groups_in_flight: rng.range(1, 4) as usize,
        zero_fill_chunk_bytes: 16 << 10,
        max_free_segments: rng.below(3) as usize,
        ..JournalConfig::default()
    };
    let min = 2 * 4096 + c.group_buffer_bytes() as u64;
    c.segment_size_bytes = storage::align_up((min + rng.below(3 * min)) as usize) as u64;
    c
}

fn workload_faults(rng: &mut SimRng) -> FaultConfig {
    match rng.below(6) {
        0 => FaultConfig::none().with_sync_eio(0.02).with_fsyncgate(true),
        1 => FaultConfig::none().with_write_eio(0.01).with_enospc(0.01),
        2 => FaultConfig::none().with_short_write(0.02),
        _ => FaultConfig::none(),
    }
}

/// Opens the journal, checks the replay against the model, and updates the model.
fn recover_and_check(
    disk: &SimDisk,
    config: &JournalConfig,
    model: &mut Model,
    seed: u64,
) -> Journal<storage::sim::SimStorage> {
    let mut replayed: Vec<(u64, Vec<u8>)> = Vec::new();
    if std::env::var("SIM_VERBOSE").is_ok() {
        let mut names = disk.durable_names("journal");
        names.sort();
        for n in names {
            let f = disk.durable_file("journal", &n).unwrap_or_default();
            let h = journal::format::SegmentHeader::decode(&f[..f.len().min(4096)]);
            eprintln!("  file {n} len {} header {h:?}", f.len());
        }
    }
    let journal = Journal::open(
        disk.storage("journal"),
        config.clone(),
        Lsn(model.mark),
        &mut |lsn, p| replayed.push((lsn.0, p.to_vec())),
    )
    .unwrap_or_else(|e| panic!("seed {seed}: recovery failed: {e}"));
    if std::env::var("SIM_VERBOSE").is_ok() {
        eprintln!(
            "recovered: mark {} acked {} next {} report {:?}",
            model.mark,
            model.acked,
            journal.next_lsn().0,
            journal.recovery_report()
        );
    }
    // 3. contiguous from the mark.
    for (i, (lsn, _)) in replayed.iter().enumerate() {
        let want = replayed[0].0 + i as u64;
        assert_eq!(*lsn, want, "seed {seed}: replay skipped an LSN");
    }
    if let Some((first, _)) = replayed.first() {
        assert!(
            *first <= model.mark.max(1),
            "seed {seed}: replay starts at {first}, after the mark {}",
            model.mark
        );
    }
    let end = journal.next_lsn().0 - 1;
    assert_eq!(
        replayed.last().map(|(l, _)| *l).unwrap_or(end).max(end),
        end,
        "seed {seed}: next LSN disagrees with the replay"
    );
    // 1. every acknowledged record is back, byte for byte.
    assert!(
        end >= model.acked,
        "seed {seed}: acknowledged up to {} but the log ends at {end}",
        model.acked
    );
    let got: BTreeMap<u64, &Vec<u8>> = replayed.iter().map(|(l, p)| (*l, p)).collect();
    for lsn in model.mark.max(1)..=model.acked {
        assert_eq!(
            got.get(&lsn).map(|p| p.as_slice()),
            model.records.get(&lsn).map(|p| p.as_slice()),
            "seed {seed}: acknowledged record {lsn} differs after recovery"
        );
    }
    // 2. nothing that was never appended.
    for (lsn, p) in &replayed {
        if *lsn < model.mark {
            continue;
        }
        assert_eq!(
            Some(p),
            model.records.get(lsn),
            "seed {seed}: record {lsn} was never appended with these bytes"
        );
    }
    // Unacknowledged records beyond the end are gone; their LSNs will be reused.
    model.records.retain(|lsn, _| *lsn <= end);
    model.acked = end;
    journal
}

fn run_seed(seed: u64) {
    let mut rng = SimRng::new(seed);
    let mut wl = rng.fork("workload");
    let sector = if rng.chance(0.5) { 512 } else { 4096 };
    let disk = SimDisk::new(
        SimConfig::new(seed)
            .with_sector_size(sector)
            .with_latency_us(5, 400),
    );
    let config = config(&mut wl);
    let mut model = Model {
        records: BTreeMap::new(),
        acked: 0,
        mark: 0,
    };
    let rounds = 6;
    for round in 0..rounds {
        // Sometimes crash in the middle of recovery: faults make open fail part-way.
        if round > 0 && wl.chance(0.3) {
            disk.set_faults(
                FaultConfig::none()
                    .with_sync_eio(0.3)
                    .with_write_eio(0.2)
                    .with_read_eio(0.05),
            );
            let _ = Journal::open(
                disk.storage("journal"),
                config.clone(),
                Lsn(model.mark),
                &mut |_, _| {},
            );
            disk.crash();
        }
        disk.set_faults(FaultConfig::none());
        let mut journal = recover_and_check(&disk, &config, &mut model, seed);
        if wl.chance(0.2) {
            // 5. idempotence: crash right after recovery and recover again.
            drop(journal);
            disk.crash();
            journal = recover_and_check(&disk, &config, &mut model, seed);
        }
        disk.set_faults(workload_faults(&mut wl));
        if std::env::var("SIM_VERBOSE").is_ok() {
            eprintln!(
                "round {round}: faults {:?} config {config:?}",
                disk.faults()
            );
        }
        let steps = wl.range(10, 300);
        let mut durable = journal.durable_lsn().0;
        for _ in 0..steps {
            let now = disk.now_us();
            match wl.below(10) {
                0..=5 => {
                    for _ in 0..wl.range(1, 20) {
                        let lsn = journal.next_lsn().0;
                        let p = payload(&mut wl, round, lsn, config.max_record_bytes);
                        match journal.append(&p, now) {
                            Ok(got) => {
                                assert_eq!(got.0, lsn);
                                model.records.insert(lsn, p);
                            }
                            Err(AppendError::Backpressure) => break,
                            Err(AppendError::Stopped(_)) => break,
                            Err(e) => panic!("seed {seed}: unexpected append error {e}"),
                        }
                    }
                    let _ = journal.tick(now, wl.chance(0.5));
                }
                6..=8 => {
                    let _ = journal.wait(Some(wl.range(10, 2000)));
                    let _ = journal.tick(disk.now_us(), true);
                }
                _ => {
                    if durable > 0 && journal.stopped().is_none() {
                        let mark = wl.range(model.mark.max(1), durable + 1);
                        if std::env::var("SIM_VERBOSE").is_ok() {
                            eprintln!("trim {mark}: {}", journal.describe_segments());
                        }
                        // The caller persists its mark before trimming (checkpoint order), so
                        // the mark holds even when the trim itself fails part-way.
                        model.mark = mark;
                        let _ = journal.trim(Lsn(mark));
                    }
                }
            }
            // 4. monotonic durable LSN, and only appended records can be durable.
            let now_durable = journal.durable_lsn().0;
            assert!(now_durable >= durable, "seed {seed}: durable LSN went back");
            assert!(now_durable < journal.next_lsn().0);
            durable = now_durable;
            model.acked = model.acked.max(durable);
        }
        if std::env::var("SIM_VERBOSE").is_ok() {
            eprintln!(
                "crash: durable {durable} stopped {:?} stats {:?}\n  {}\n  volatile names {:?}",
                journal.stopped(),
                journal.stats(),
                journal.describe_segments(),
                disk.volatile_names("journal")
            );
        }
        drop(journal);
        disk.crash();
    }
    let stats = disk.stats();
    assert!(stats.crashes >= rounds, "seed {seed}: {stats:?}");
}

fn run_seeds(seeds: impl Iterator<Item = u64>) {
    for seed in seeds {
        let result = std::panic::catch_unwind(|| run_seed(seed));
        if result.is_err() {
            panic!(
                "crash test failed for seed {seed}; replay it with:\n  SIM_SEED={seed} cargo \
                 test -p journal --test crash replay_one_seed -- --nocapture"
            );
        }
    }
}

/// A fixed list of seeds, run on every `cargo test`.
#[test]
fn crash_fixed_seeds() {
    run_seeds(0..40);
}

/// Replays one seed from `SIM_SEED`, or sweeps `SIM_SEEDS` random seeds from `SIM_SEED_BASE`;
/// does nothing without them (used by `scripts/sim`).
#[test]
fn replay_one_seed() {
    if let Ok(seed) = std::env::var("SIM_SEED") {
        run_seed(seed.parse().expect("SIM_SEED is a number"));
    } else if let Ok(n) = std::env::var("SIM_SEEDS") {
        let n: u64 = n.parse().expect("SIM_SEEDS is a number");
        let base: u64 = std::env::var("SIM_SEED_BASE")
            .ok()
            .and_then(|b| b.parse().ok())
            .unwrap_or(1000);
        run_seeds(base..base + n);
    }
}
