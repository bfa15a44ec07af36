//! Crash tests: the production ledger store on the simulated disk, driven by one seed.
//!
//! Flushes are interrupted in two ways: by a [`FailAfter`] wrapper that lets N storage
//! operations through and fails every later one with EIO (then the disk crashes), and by the
//! simulator's injected faults (EIO, ENOSPC, short writes, lying syncs). After each crash the
//! store is reopened and the checker proves:
//! 1. the recovered journal mark is the mark of a completed flush, or of the interrupted one;
//! 2. the store then holds exactly the state after that flush: every entry reads back byte for
//!    byte through a `Reader` (newest duplicate wins), no other entry exists (`entries_of`),
//!    `last_entry` agrees, and the ledger metadata matches;
//! 3. reopening again gives the same state (recovery is idempotent).
//!
//! `crash_at_every_step_of_a_flush` cuts one flush (with a merge) at every storage operation.
//! A failing seed prints the command to replay it: `SIM_SEED=<seed> cargo test -p entrylog
//! --test crash replay_one_seed -- --nocapture`.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;

use bytes::Bytes;
use entrylog::{FlushBatch, LedgerMeta, LedgerStore, LedgerStoreConfig, Reader, StoreError};
use storage::sim::{FaultConfig, SimConfig, SimDisk, SimRng, SimStorage};
use storage::{AlignedBuf, Completion, DriverKind, FileId, IoError, Op, Storage, Wait};

/// Lets `budget` operations through, then fails every namespace call and submit with EIO.
/// Completions of operations already in flight still arrive (poll is not cut), so the store
/// never closes a file with I/O in flight.
struct FailAfter<S> {
    inner: S,
    budget: Rc<Cell<u64>>,
    used: Rc<Cell<u64>>,
}

impl<S: Storage> FailAfter<S> {
    /// The wrapper, its budget (adjustable later) and its counter of operations used.
    #[allow(clippy::type_complexity)]
    fn new(inner: S, budget: u64) -> (FailAfter<S>, Rc<Cell<u64>>, Rc<Cell<u64>>) {
        let used = Rc::new(Cell::new(0));
        let budget = Rc::new(Cell::new(budget));
        (
            FailAfter {
                inner,
                budget: budget.clone(),
                used: used.clone(),
            },
            budget,
            used,
        )
    }

    fn take(&self) -> Result<(), IoError> {
        self.used.set(self.used.get() + 1);
        if self.used.get() > self.budget.get() {
            Err(IoError::EIO)
        } else {
            Ok(())
        }
    }
}

impl<S: Storage> Storage for FailAfter<S> {
    fn kind(&self) -> DriverKind {
        self.inner.kind()
    }
    fn list(&mut self) -> Result<Vec<String>, IoError> {
        self.take()?;
        self.inner.list()
    }
    fn open(&mut self, name: &str, create: bool) -> Result<FileId, IoError> {
        self.take()?;
        self.inner.open(name, create)
    }
    fn close(&mut self, file: FileId) {
        self.inner.close(file)
    }
    fn file_len(&mut self, file: FileId) -> Result<u64, IoError> {
        self.take()?;
        self.inner.file_len(file)
    }
    fn allocate(&mut self, file: FileId, offset: u64, len: u64) -> Result<(), IoError> {
        self.take()?;
        self.inner.allocate(file, offset, len)
    }
    fn truncate(&mut self, file: FileId, len: u64) -> Result<(), IoError> {
        self.take()?;
        self.inner.truncate(file, len)
    }
    fn rename(&mut self, from: &str, to: &str) -> Result<(), IoError> {
        self.take()?;
        self.inner.rename(from, to)
    }
    fn remove(&mut self, name: &str) -> Result<(), IoError> {
        self.take()?;
        self.inner.remove(name)
    }
    fn sync_dir(&mut self) -> Result<(), IoError> {
        self.take()?;
        self.inner.sync_dir()
    }
    fn submit(&mut self, token: u64, op: Op) -> Result<(), (IoError, Option<AlignedBuf>)> {
        if let Err(e) = self.take() {
            let buf = match op {
                Op::Write { buf, .. } | Op::Read { buf, .. } => Some(buf),
                Op::SyncData { .. } | Op::SyncDir => None,
            };
            return Err((e, buf));
        }
        self.inner.submit(token, op)
    }
    fn poll(&mut self, out: &mut Vec<Completion>, wait: Wait) -> Result<(), IoError> {
        self.inner.poll(out, wait)
    }
    fn in_flight(&self) -> usize {
        self.inner.in_flight()
    }
}

/// The store's content after some number of completed flushes.
#[derive(Clone, Debug, Default, PartialEq)]
struct State {
    mark: u64,
    entries: BTreeMap<(u64, u64), Bytes>,
    ledgers: BTreeMap<u64, LedgerMeta>,
}

impl State {
    /// The state after `batch` completes (the store's rules: later duplicates win, deleted
    /// ledgers lose their entries, last_entry only rises).
    fn apply(&self, batch: &FlushBatch) -> State {
        let mut s = self.clone();
        s.mark = s.mark.max(batch.journal_mark);
        for m in &batch.ledgers {
            let old_last = s.ledgers.get(&m.ledger).and_then(|o| o.last_entry);
            let mut m = m.clone();
            m.last_entry = m.last_entry.max(old_last);
            s.ledgers.insert(m.ledger, m);
        }
        for (l, e, b) in &batch.entries {
            if s.ledgers.get(l).is_some_and(|m| m.deleted) {
                continue;
            }
            s.entries.insert((*l, *e), b.clone());
            let m = s.ledgers.entry(*l).or_insert_with(|| LedgerMeta {
                ledger: *l,
                ..LedgerMeta::default()
            });
            m.last_entry = m.last_entry.max(Some(*e));
        }
        let deleted: Vec<u64> = s
            .ledgers
            .values()
            .filter(|m| m.deleted)
            .map(|m| m.ledger)
            .collect();
        s.entries.retain(|(l, _), _| !deleted.contains(l));
        s
    }
}

fn random_batch(rng: &mut SimRng, mark: u64, ledgers: &BTreeMap<u64, LedgerMeta>) -> FlushBatch {
    let mut b = FlushBatch {
        journal_mark: mark,
        ..FlushBatch::default()
    };
    let n = match rng.below(6) {
        0 => 0,
        1..=3 => rng.range(1, 40),
        _ => rng.range(40, 300),
    };
    for _ in 0..n {
        let l = rng.range(1, 9);
        let e = rng.below(120);
        let len = match rng.below(10) {
            0 => 0,
            1..=7 => rng.range(1, 400),
            _ => rng.range(400, 9000),
        } as usize;
        let mut body = vec![0u8; len];
        rng.fill(&mut body);
        // Stamp mark and key so a stale copy never matches.
        let stamp = [mark.to_le_bytes(), l.to_le_bytes(), e.to_le_bytes()].concat();
        for (i, x) in stamp.iter().enumerate().take(len) {
            body[i] = *x;
        }
        b.entries.push((l, e, Bytes::from(body)));
    }
    for _ in 0..rng.below(4) {
        let l = rng.range(1, 9);
        let old = ledgers.get(&l).cloned().unwrap_or(LedgerMeta {
            ledger: l,
            ..LedgerMeta::default()
        });
        let mut m = LedgerMeta {
            master_key: Bytes::from(format!("key{l}")),
            fenced: old.fenced || rng.chance(0.2),
            lac: Some(rng.below(100)),
            explicit_lac: if rng.chance(0.3) {
                Some(Bytes::from(vec![mark as u8; rng.below(40) as usize]))
            } else {
                old.explicit_lac.clone()
            },
            ..old
        };
        if rng.chance(0.05) {
            m.deleted = true;
        }
        b.ledgers.push(m);
    }
    b
}

fn config(rng: &mut SimRng) -> LedgerStoreConfig {
    LedgerStoreConfig {
        entry_log_size_bytes: [16 << 10, 64 << 10, 1 << 20][rng.below(3) as usize],
        write_chunk_bytes: [4096, 8192, 64 << 10][rng.below(3) as usize],
        max_writes_in_flight: rng.range(1, 3) as usize,
        index_block_cache_bytes: [0, 8192, 1 << 20][rng.below(3) as usize],
        max_index_runs: rng.range(2, 5) as usize,
    }
}

/// Opens the store and checks it holds one of `candidates` (by mark); returns the store and
/// the index of the candidate it matched.
fn open_and_check(
    disk: &SimDisk,
    config: &LedgerStoreConfig,
    candidates: &[&State],
    seed: u64,
) -> (LedgerStore<SimStorage>, usize) {
    let (store, rec) = LedgerStore::open(disk.storage("l"), config.clone())
        .unwrap_or_else(|e| panic!("seed {seed}: open failed: {e}"));
    let Some(i) = candidates.iter().position(|s| s.mark == rec.journal_mark) else {
        panic!(
            "seed {seed}: recovered mark {} is none of {:?}",
            rec.journal_mark,
            candidates.iter().map(|s| s.mark).collect::<Vec<_>>()
        );
    };
    let want = candidates[i];
    let got_ledgers: BTreeMap<u64, LedgerMeta> =
        rec.ledgers.into_iter().map(|m| (m.ledger, m)).collect();
    assert_eq!(
        got_ledgers, want.ledgers,
        "seed {seed}: metadata differs at mark {}",
        want.mark
    );
    let view = store.snapshot();
    let mut reader = Reader::new(disk.storage("l"), config);
    for ((l, e), b) in &want.entries {
        match reader.read(&view, *l, *e) {
            Ok(Some(got)) => assert_eq!(
                &got, b,
                "seed {seed}: entry {l}:{e} differs at mark {}",
                want.mark
            ),
            other => panic!(
                "seed {seed}: entry {l}:{e} at mark {}: {other:?}",
                want.mark
            ),
        }
    }
    for l in 0..10 {
        let ids: Vec<u64> = want
            .entries
            .keys()
            .filter(|k| k.0 == l)
            .map(|k| k.1)
            .collect();
        assert_eq!(
            reader.entries_of(&view, l).unwrap(),
            ids,
            "seed {seed}: entries of ledger {l}"
        );
        assert_eq!(
            reader.last_entry(&view, l).unwrap(),
            ids.last().copied(),
            "seed {seed}: last entry of {l}"
        );
    }
    // The index is derived state: a scan of the entry log must give the same locations.
    let mut scanned = BTreeMap::new();
    let mut store = store;
    store
        .scan_all(|s| {
            scanned.insert((s.ledger, s.entry), s.location);
        })
        .unwrap_or_else(|e| panic!("seed {seed}: scan failed: {e}"));
    for (l, e) in want.entries.keys() {
        assert_eq!(
            reader.locate(&view, *l, *e).unwrap(),
            scanned.get(&(*l, *e)).copied(),
            "seed {seed}: scan vs index {l}:{e}"
        );
    }
    (store, i)
}

fn workload_faults(rng: &mut SimRng) -> FaultConfig {
    match rng.below(6) {
        0 => FaultConfig::none().with_sync_eio(0.05).with_fsyncgate(true),
        1 => FaultConfig::none().with_write_eio(0.02).with_enospc(0.02),
        2 => FaultConfig::none()
            .with_short_write(0.05)
            .with_short_read(0.05),
        _ => FaultConfig::none(),
    }
}

type Store = LedgerStore<FailAfter<SimStorage>>;

/// Opens the store behind a [`FailAfter`] with no limit yet; returns the store and its budget
/// and counter.
fn open_cuttable(
    disk: &SimDisk,
    config: &LedgerStoreConfig,
    state: &State,
    seed: u64,
) -> (Store, Rc<Cell<u64>>, Rc<Cell<u64>>) {
    let (fa, budget, used) = FailAfter::new(disk.storage("l"), u64::MAX);
    let (store, rec) = LedgerStore::open(fa, config.clone())
        .unwrap_or_else(|e| panic!("seed {seed}: open failed: {e}"));
    assert_eq!(rec.journal_mark, state.mark, "seed {seed}");
    (store, budget, used)
}

fn run_seed(seed: u64) {
    let mut rng = SimRng::new(seed);
    let mut wl = rng.fork("workload");
    let sector = if rng.chance(0.5) { 512 } else { 4096 };
    let disk = SimDisk::new(
        SimConfig::new(seed)
            .with_sector_size(sector)
            .with_latency_us(5, 300),
    );
    let config = config(&mut wl);
    let mut state = State::default();
    let mut mark = 0;
    let verbose = std::env::var("SIM_VERBOSE").is_ok();
    drop(open_and_check(&disk, &config, &[&state], seed));
    let (mut store, mut budget, mut used) = open_cuttable(&disk, &config, &state, seed);
    for round in 0..8 {
        disk.set_faults(workload_faults(&mut wl));
        let flushes = wl.range(1, 6);
        let mut interrupted: Option<State> = None;
        for _ in 0..flushes {
            mark += wl.range(1, 100);
            let batch = random_batch(&mut wl, mark, &state.ledgers);
            let next = state.apply(&batch);
            if wl.chance(0.3) {
                // Cut this flush after a random number of operations; the disk crashes next.
                budget.set(used.get() + wl.below(80));
            }
            let cut = budget.get() != u64::MAX;
            let mut result = store.flush(&batch);
            // A failure before the commit leaves the store usable: the bookie retries the same
            // batch (its write cache still holds it). A failure at the commit stops the store.
            let mut retries = 0;
            while !cut && retries < 3 && matches!(result, Err(StoreError::Io { .. })) {
                retries += 1;
                result = store.flush(&batch);
            }
            if verbose {
                eprintln!(
                    "round {round}: flush mark {mark} ({} entries): {:?}",
                    batch.entries.len(),
                    result.as_ref().map(|_| ())
                );
            }
            match result {
                Ok(_) => state = next,
                Err(StoreError::Stopped) | Err(StoreError::Io { .. }) => {
                    // The commit may or may not have happened: either state is acceptable.
                    interrupted = Some(next);
                    break;
                }
                Err(e) => panic!("seed {seed}: unexpected flush error {e}"),
            }
            if cut {
                // The cut came after the commit (e.g. during a merge, whose failure is only
                // logged): crash now anyway.
                break;
            }
        }
        drop(store);
        disk.set_faults(FaultConfig::none());
        disk.crash();
        let candidates: Vec<&State> = std::iter::once(&state)
            .chain(interrupted.as_ref())
            .collect();
        let (s, i) = open_and_check(&disk, &config, &candidates, seed);
        drop(s);
        if i == 1 {
            state = interrupted.clone().unwrap();
        }
        if verbose {
            eprintln!("round {round}: recovered mark {}", state.mark);
        }
        if wl.chance(0.3) {
            // Idempotence: crash right after recovery and recover again.
            disk.crash();
            drop(open_and_check(&disk, &config, &[&state], seed));
        }
        (store, budget, used) = open_cuttable(&disk, &config, &state, seed);
    }
}

fn run_seeds(seeds: impl Iterator<Item = u64>) {
    for seed in seeds {
        if std::panic::catch_unwind(|| run_seed(seed)).is_err() {
            panic!(
                "crash test failed for seed {seed}; replay it with:\n  SIM_SEED={seed} cargo test -p entrylog --test crash replay_one_seed -- --nocapture"
            );
        }
    }
}

/// A fixed list of seeds, run on every `cargo test`.
#[test]
fn crash_fixed_seeds() {
    run_seeds(0..30);
}

/// Replays `SIM_SEED`, or sweeps `SIM_SEEDS` seeds from `SIM_SEED_BASE`; does nothing without.
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

/// One flush (that also triggers an index merge) is cut at every storage operation in turn,
/// then the disk crashes: recovery always yields exactly the state before the flush or after
/// it, both at least once, and the full-budget run is the state after it.
#[test]
fn crash_at_every_step_of_a_flush() {
    let config = LedgerStoreConfig {
        entry_log_size_bytes: 24 << 10,
        write_chunk_bytes: 8192,
        max_writes_in_flight: 2,
        index_block_cache_bytes: 1 << 20,
        max_index_runs: 2,
    };
    let mut rng = SimRng::new(99);
    let mut batches = Vec::new();
    let mut states = vec![State::default()];
    for i in 0..3u64 {
        let b = random_batch(&mut rng, (i + 1) * 10, &states.last().unwrap().ledgers);
        states.push(states.last().unwrap().apply(&b));
        batches.push(b);
    }
    let mut last = random_batch(&mut rng, 100, &states.last().unwrap().ledgers);
    // Make it big enough to rotate segments and span several write chunks.
    for e in 0..40u64 {
        last.entries
            .push((1, 500 + e, Bytes::from(vec![e as u8; 1500])));
    }
    let before = states.last().unwrap().clone();
    let after = before.apply(&last);
    let prepare = |seed: u64| -> SimDisk {
        let disk = SimDisk::new(SimConfig::new(seed).with_latency_us(5, 300));
        let (mut store, _) = LedgerStore::open(disk.storage("l"), config.clone()).unwrap();
        for b in &batches {
            store.flush(b).unwrap();
        }
        disk
    };
    // Count the operations of the last flush.
    let disk = prepare(1);
    let (fa, _, used) = FailAfter::new(disk.storage("l"), u64::MAX);
    let (mut store, _) = LedgerStore::open(fa, config.clone()).unwrap();
    let at_open = used.get();
    let stats = store.flush(&last).unwrap();
    assert!(stats.merges > 0 && stats.segments_rotated > 0, "{stats:?}");
    let total = used.get() - at_open;
    assert!(total > 20, "only {total} operations");
    let mut outcomes = [0u32; 2];
    for cut in 0..=total {
        let disk = prepare(1000 + cut);
        let (fa, _, _) = FailAfter::new(disk.storage("l"), at_open + cut);
        let (mut store, _) = LedgerStore::open(fa, config.clone()).unwrap();
        let r = store.flush(&last);
        if cut == total {
            assert!(r.is_ok(), "the uncut flush failed: {r:?}");
        }
        drop(store);
        disk.crash();
        let (_, i) = open_and_check(&disk, &config, &[&before, &after], cut);
        outcomes[i] += 1;
        if r.is_ok() {
            assert_eq!(
                i, 1,
                "cut {cut} of {total}: a flush that returned Ok was lost"
            );
        }
    }
    assert!(outcomes[0] > 0 && outcomes[1] > 0, "{outcomes:?}");
}
