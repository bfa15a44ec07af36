//! Crash tests: the production ledger store on the simulated disk, driven by one seed.
//!
//! The workload mixes flushes (entries, metadata, ledger deletions) with garbage collection
//! cycles: `collect_index`, then a compaction planned with a random threshold and copied in
//! small steps, with flushes between the steps, sometimes aborted. Operations are interrupted
//! in two ways: by a [`FailAfter`] wrapper that lets N storage operations through and fails
//! every later one with EIO (then the disk crashes), and by the simulator's injected faults
//! (EIO, ENOSPC, short writes, lying syncs). After each crash the store is reopened and the
//! checker proves:
//! 1. the recovered journal mark is the mark of a completed flush, or of the interrupted one;
//! 2. the store then holds exactly the state after that flush: every entry reads back byte for
//!    byte through a `Reader` (newest duplicate wins), no other entry exists (`entries_of`),
//!    deleted ledgers have none, `last_entry` agrees, and the ledger metadata matches. Garbage
//!    collection commits do not move the mark and change no content, so the model treats them
//!    as no-ops: whether or not one committed, the state is that of the last flush;
//! 3. the directory holds exactly the files the manifest references (open removes garbage);
//! 4. reopening again gives the same state (recovery is idempotent).
//!
//! `crash_at_every_step_of_a_flush` cuts one flush (with a merge) at every storage operation,
//! `crash_at_every_step_of_a_compaction` an index collection and a multi-step compaction with
//! flushes between its steps. A failing seed prints the command to replay it:
//! `SIM_SEED=<seed> cargo test -p entrylog --test crash replay_one_seed -- --nocapture`
//! (`SIM_VERBOSE=1` logs every operation).

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use bytes::Bytes;
use entrylog::format::{file_name, is_trash_name, FileKind, MANIFEST_NAME};
use entrylog::{FlushBatch, LedgerMeta, LedgerStore, LedgerStoreConfig, Reader, Step, StoreError};
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
    /// Tombstones stay here after the store purged them (ids are never reused).
    ledgers: BTreeMap<u64, LedgerMeta>,
    /// Deleted ledgers whose tombstones the store has purged (garbage collection, once nothing
    /// of them is left): never written again, not even a late entry.
    purged: BTreeSet<u64>,
}

impl State {
    /// Tombstones `store` no longer has are purged.
    fn note_purged(&mut self, store: &BTreeMap<u64, LedgerMeta>) {
        for m in self.ledgers.values().filter(|m| m.deleted) {
            if !store.contains_key(&m.ledger) {
                self.purged.insert(m.ledger);
            }
        }
    }

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

/// The ledger a workload writes for `slot` (1..=8): deleted ledgers are never written again
/// (ids are not reused), so a slot moves on to `slot + 10`, `slot + 20`, ...
fn live_ledger(ledgers: &BTreeMap<u64, LedgerMeta>, slot: u64) -> u64 {
    let mut l = slot;
    while ledgers.get(&l).is_some_and(|m| m.deleted) {
        l += 10;
    }
    l
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
        let l = live_ledger(ledgers, rng.range(1, 9));
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
        let l = live_ledger(ledgers, rng.range(1, 9));
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

/// Adds the deletion of a live ledger to `b` (after whatever `b` does to it), and sometimes an
/// entry for a ledger deleted earlier: the store drops both the ledger's entries and that one.
fn add_deletion(rng: &mut SimRng, b: &mut FlushBatch, state: &State) {
    let ledgers = &state.ledgers;
    let l = live_ledger(ledgers, rng.range(1, 9));
    let old = ledgers.get(&l).cloned().unwrap_or(LedgerMeta {
        ledger: l,
        ..LedgerMeta::default()
    });
    b.ledgers.push(LedgerMeta {
        deleted: true,
        ..old
    });
    if l > 10 && rng.chance(0.3) && !state.purged.contains(&(l - 10)) {
        let late = Bytes::from(format!("late {} {l}", b.journal_mark));
        b.entries.push((l - 10, rng.below(120), late));
    }
}

fn config(rng: &mut SimRng) -> LedgerStoreConfig {
    LedgerStoreConfig {
        entry_log_size_bytes: [16 << 10, 64 << 10, 1 << 20][rng.below(3) as usize],
        write_chunk_bytes: [4096, 8192, 64 << 10][rng.below(3) as usize],
        max_writes_in_flight: rng.range(1, 3) as usize,
        index_block_cache_bytes: [0, 8192, 1 << 20][rng.below(3) as usize],
        index_merge_width: rng.range(2, 5) as usize,
        max_index_runs: rng.range(2, 9) as usize,
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
    let (mut store, rec) = LedgerStore::open(disk.storage("l"), config.clone())
        .unwrap_or_else(|e| panic!("seed {seed}: open failed: {e}"));
    check_no_garbage(disk, &mut store, seed);
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
    // A tombstone may be gone: garbage collection purges it once nothing of its ledger is
    // left (the scan below checks that nothing is).
    let want_ledgers: BTreeMap<u64, LedgerMeta> = want
        .ledgers
        .iter()
        .filter(|(l, m)| !m.deleted || got_ledgers.contains_key(l))
        .map(|(l, m)| (*l, m.clone()))
        .collect();
    assert_eq!(
        got_ledgers, want_ledgers,
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
    let ledgers: BTreeSet<u64> = (0..10).chain(want.ledgers.keys().copied()).collect();
    for &l in &ledgers {
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
    // The index points at verified entries of the entry log: a scan of every live segment
    // finds each entry at the location the index gives, and no entry of a live ledger that
    // the model does not have. (Scan order is not age order once a compaction has copied old
    // entries into segments newer than ones a flush wrote meanwhile, so the newest copy in
    // scan order need not be the one the index points at.)
    let mut scanned: BTreeMap<(u64, u64), Vec<entrylog::Location>> = BTreeMap::new();
    let mut store = store;
    store
        .scan_all(|s| {
            scanned
                .entry((s.ledger, s.entry))
                .or_default()
                .push(s.location);
        })
        .unwrap_or_else(|e| panic!("seed {seed}: scan failed: {e}"));
    for (l, e) in want.entries.keys() {
        let loc = reader.locate(&view, *l, *e).unwrap();
        let copies = scanned.get(&(*l, *e));
        assert!(
            loc.is_some_and(|loc| copies.is_some_and(|c| c.contains(&loc))),
            "seed {seed}: index {l}:{e} at {loc:?}, scan found {copies:?}"
        );
    }
    for (l, e) in scanned.keys() {
        assert!(
            view.is_deleted(*l) || want.entries.contains_key(&(*l, *e)),
            "seed {seed}: the entry log holds {l}:{e}, which the store never had"
        );
    }
    (store, i)
}

/// After open, the directory holds exactly the files the manifest references, durably, and
/// the trash open hands to its owner: open removed the garbage of interrupted flushes and
/// compactions, and segments retired before the crash are either gone or trash. The owner's
/// deletion of the trash is then checked too.
fn check_no_garbage(disk: &SimDisk, store: &mut LedgerStore<SimStorage>, seed: u64) {
    let m = store.manifest();
    let mut want: BTreeSet<String> = BTreeSet::new();
    want.insert(MANIFEST_NAME.to_string());
    want.extend(
        m.segments
            .iter()
            .map(|s| file_name(FileKind::Segment, s.id)),
    );
    want.extend(m.runs.iter().map(|r| file_name(FileKind::Run, r.id)));
    want.extend(m.meta.map(|(id, _)| file_name(FileKind::Meta, id)));
    let trash: BTreeSet<String> = store.take_trash().into_iter().collect();
    for t in &trash {
        assert!(is_trash_name(t), "seed {seed}: {t} handed over as trash");
        assert!(
            !want.contains(t.trim_end_matches(".trash")),
            "seed {seed}: {t} is trash but its segment is in the manifest"
        );
    }
    let volatile: BTreeSet<String> = disk.volatile_names("l").into_iter().collect();
    let with_trash: BTreeSet<String> = want.union(&trash).cloned().collect();
    assert_eq!(volatile, with_trash, "seed {seed}: files after open");
    let durable: BTreeSet<String> = disk.durable_names("l").into_iter().collect();
    assert!(
        durable.is_superset(&want) && durable.is_subset(&with_trash),
        "seed {seed}: durable files after open: {durable:?}, manifest {want:?}"
    );
    let mut owner = disk.storage("l");
    for t in &trash {
        owner
            .remove(t)
            .unwrap_or_else(|e| panic!("seed {seed}: {t}: {e}"));
    }
    let volatile: BTreeSet<String> = disk.volatile_names("l").into_iter().collect();
    assert_eq!(
        volatile, want,
        "seed {seed}: files after the trash is deleted"
    );
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

/// What a seed's workload did (to check the fixed seeds cover garbage collection).
#[derive(Clone, Copy, Debug, Default)]
struct Coverage {
    flushes: u64,
    deletions: u64,
    collections: u64,
    segments_dropped: u64,
    tombstones_purged: u64,
    compactions: u64,
    segments_compacted: u64,
    flushes_between_steps: u64,
    aborts: u64,
    gc_failures: u64,
}

impl Coverage {
    fn add(&mut self, o: &Coverage) {
        self.flushes += o.flushes;
        self.deletions += o.deletions;
        self.collections += o.collections;
        self.segments_dropped += o.segments_dropped;
        self.tombstones_purged += o.tombstones_purged;
        self.compactions += o.compactions;
        self.segments_compacted += o.segments_compacted;
        self.flushes_between_steps += o.flushes_between_steps;
        self.aborts += o.aborts;
        self.gc_failures += o.gc_failures;
    }
}

/// The workload of one seed: its random stream and the model.
struct Workload {
    seed: u64,
    verbose: bool,
    wl: SimRng,
    /// The state after the last flush known to be committed.
    state: State,
    mark: u64,
    /// A flush that failed where its commit may or may not have happened: recovery may give
    /// its state instead.
    interrupted: Option<State>,
    /// The current operation runs under a [`FailAfter`] budget: no retries, crash after it.
    cut: bool,
    cov: Coverage,
}

impl Workload {
    /// Flushes a random batch (retried like the bookie does after a failure before the
    /// commit). False when it failed: `interrupted` is set and the round ends.
    fn flush(&mut self, store: &mut Store, what: &str) -> bool {
        self.mark += self.wl.range(1, 100);
        let mut batch = random_batch(&mut self.wl, self.mark, &self.state.ledgers);
        if self.wl.chance(0.2) {
            add_deletion(&mut self.wl, &mut batch, &self.state);
            self.cov.deletions += 1;
        }
        let next = self.state.apply(&batch);
        let mut result = store.flush(&batch);
        // A failure before the commit leaves the store usable: the bookie retries the same
        // batch (its write cache still holds it). A failure at the commit stops the store.
        let mut retries = 0;
        while !self.cut && retries < 3 && matches!(result, Err(StoreError::Io { .. })) {
            retries += 1;
            result = store.flush(&batch);
        }
        if self.verbose {
            eprintln!(
                "  {what}: flush mark {} ({} entries, {} ledgers): {:?}",
                self.mark,
                batch.entries.len(),
                batch.ledgers.len(),
                result.as_ref().map(|_| ())
            );
        }
        match result {
            Ok(_) => {
                self.state = next;
                self.cov.flushes += 1;
                true
            }
            Err(StoreError::Stopped) | Err(StoreError::Io { .. }) => {
                self.interrupted = Some(next);
                false
            }
            Err(e) => panic!("seed {}: unexpected flush error {e}", self.seed),
        }
    }

    /// A failed garbage collection step. Whether or not it committed, the content is that of
    /// the last flush; the store may have stopped (then the next flush says so).
    fn gc_failed(&mut self, what: &str, e: StoreError) {
        if self.verbose {
            eprintln!("  {what} failed: {e}");
        }
        match e {
            StoreError::Io { .. } | StoreError::Stopped => self.cov.gc_failures += 1,
            e => panic!("seed {}: unexpected {what} error {e}", self.seed),
        }
    }

    /// One garbage collection cycle: collect the index, plan a compaction, copy it in small
    /// steps with flushes between them, sometimes give up. False when a flush failed (the
    /// round ends).
    fn gc(&mut self, store: &mut Store, disk: &SimDisk) -> bool {
        // Sometimes a reader holds the view from before the cycle all through it: the files
        // the cycle retires must stay readable until it lets go.
        let held = self
            .wl
            .chance(0.4)
            .then(|| (store.snapshot(), self.state.clone()));
        let ok = self.gc_cycle(store);
        if let Some((view, state)) = held {
            let mut reader = Reader::new(disk.storage("l"), store.config());
            let keys: Vec<&(u64, u64)> = state.entries.keys().collect();
            for _ in 0..keys.len().min(30) {
                let k = keys[self.wl.below(keys.len() as u64) as usize];
                match reader.read(&view, k.0, k.1) {
                    Ok(Some(b)) => assert_eq!(
                        b, state.entries[k],
                        "seed {}: {k:?} through a view held across gc",
                        self.seed
                    ),
                    // The injected faults of the round (a retired file removed too early
                    // would be "not found").
                    Err(StoreError::Io { error, .. }) if !error.is_not_found() => {}
                    other => panic!(
                        "seed {}: {k:?} through a view held across gc: {other:?}",
                        self.seed
                    ),
                }
            }
        }
        ok
    }

    fn gc_cycle(&mut self, store: &mut Store) -> bool {
        let gc = match store.collect_index() {
            Ok(g) => g,
            Err(e) => {
                self.gc_failed("collect_index", e);
                return true;
            }
        };
        self.cov.collections += 1;
        self.cov.segments_dropped += gc.segments_dropped as u64;
        self.cov.tombstones_purged += gc.tombstones_purged as u64;
        self.state.note_purged(store.ledgers());
        if self.verbose {
            eprintln!(
                "  collect_index: {} -> {} records, {} runs -> 1, {} segments dropped, usage {:?}",
                gc.records_before,
                gc.records_after,
                gc.runs_before,
                gc.segments_dropped,
                gc.usage
                    .iter()
                    .map(|u| format!("{}:{:.2}", u.id, u.usage()))
                    .collect::<Vec<_>>()
            );
        }
        // A flush now makes the usage stale: the plan is skipped.
        if self.wl.chance(0.1) && !self.flush(store, "before compaction") {
            return false;
        }
        let threshold = 0.2 + 0.7 * self.wl.below(1001) as f64 / 1000.0;
        let max_live = [8 << 10, 64 << 10, u64::MAX][self.wl.below(3) as usize];
        let step_bytes = self.wl.range(1, 12 << 10);
        // The bookie's rate by entries: at most this many entries a step.
        let step_entries = if self.wl.chance(0.3) {
            self.wl.range(1, 8) as usize
        } else {
            usize::MAX
        };
        let mut c = match store.begin_compaction(&gc.usage, threshold, max_live) {
            Ok(Some(c)) => c,
            Ok(None) => return true,
            Err(e) => {
                self.gc_failed("begin_compaction", e);
                return true;
            }
        };
        if self.verbose {
            eprintln!(
                "  compaction of {:?} ({} entries, threshold {threshold:.2}, {step_bytes} B a step)",
                c.victims(),
                c.remaining()
            );
        }
        let victims = c.victims().to_vec();
        loop {
            let r = if step_entries == usize::MAX {
                store.compact_step(&mut c, step_bytes)
            } else {
                store.compact_step_limited(&mut c, u64::MAX, step_entries)
            };
            match r {
                Ok(Step::Done(stats)) => {
                    if self.verbose {
                        eprintln!("  compaction done: {stats:?}");
                    }
                    self.cov.compactions += 1;
                    self.cov.segments_compacted += stats.segments as u64;
                    let live = store.snapshot();
                    for v in &victims {
                        assert_eq!(live.segment_len(*v), None, "seed {}", self.seed);
                    }
                    return true;
                }
                Ok(Step::More(_)) => {
                    if self.wl.chance(0.1) {
                        if self.verbose {
                            eprintln!("  compaction aborted, {} entries left", c.remaining());
                        }
                        store.abort_compaction(c);
                        self.cov.aborts += 1;
                        return true;
                    }
                    if self.wl.chance(0.4) {
                        if !self.flush(store, "between compaction steps") {
                            return false;
                        }
                        self.cov.flushes_between_steps += 1;
                    }
                }
                Err(e) => {
                    store.abort_compaction(c);
                    self.gc_failed("compact_step", e);
                    return true;
                }
            }
        }
    }
}

fn run_seed(seed: u64) -> Coverage {
    let mut rng = SimRng::new(seed);
    let sector = if rng.chance(0.5) { 512 } else { 4096 };
    let disk = SimDisk::new(
        SimConfig::new(seed)
            .with_sector_size(sector)
            .with_latency_us(5, 300),
    );
    let mut w = Workload {
        seed,
        verbose: std::env::var("SIM_VERBOSE").is_ok(),
        wl: rng.fork("workload"),
        state: State::default(),
        mark: 0,
        interrupted: None,
        cut: false,
        cov: Coverage::default(),
    };
    let config = config(&mut w.wl);
    drop(open_and_check(&disk, &config, &[&w.state], seed));
    let (mut store, mut budget, mut used) = open_cuttable(&disk, &config, &w.state, seed);
    for round in 0..8 {
        disk.set_faults(workload_faults(&mut w.wl));
        let ops = w.wl.range(1, 7);
        w.interrupted = None;
        for op in 0..ops {
            let gc = w.wl.chance(0.3);
            // Cut this operation after a random number of storage operations; the disk
            // crashes next.
            w.cut = w.wl.chance(0.3);
            if w.cut {
                budget.set(used.get() + w.wl.below(if gc { 250 } else { 80 }));
            }
            if w.verbose {
                eprintln!(
                    "round {round} op {op}: {}{}",
                    if gc { "gc" } else { "flush" },
                    if w.cut { " (cut)" } else { "" }
                );
            }
            let ok = if gc {
                w.gc(&mut store, &disk)
            } else {
                w.flush(&mut store, "flush")
            };
            // A cut that came after the commit (e.g. during a merge or the removal of retired
            // files, whose failures are only logged): crash now anyway.
            if !ok || w.cut {
                break;
            }
        }
        drop(store);
        disk.set_faults(FaultConfig::none());
        disk.crash();
        let candidates: Vec<&State> = std::iter::once(&w.state)
            .chain(w.interrupted.as_ref())
            .collect();
        let (s, i) = open_and_check(&disk, &config, &candidates, seed);
        if i == 1 {
            w.state = w.interrupted.take().unwrap();
        }
        w.state.note_purged(s.ledgers());
        drop(s);
        if w.verbose {
            eprintln!("round {round}: recovered mark {}", w.state.mark);
        }
        if w.wl.chance(0.3) {
            // Idempotence: crash right after recovery and recover again.
            disk.crash();
            drop(open_and_check(&disk, &config, &[&w.state], seed));
        }
        (store, budget, used) = open_cuttable(&disk, &config, &w.state, seed);
    }
    w.cov
}

fn run_seeds(seeds: impl Iterator<Item = u64>) -> Coverage {
    let mut total = Coverage::default();
    for seed in seeds {
        match std::panic::catch_unwind(|| run_seed(seed)) {
            Ok(c) => total.add(&c),
            Err(_) => panic!(
                "crash test failed for seed {seed}; replay it with:\n  SIM_SEED={seed} cargo test -p entrylog --test crash replay_one_seed -- --nocapture"
            ),
        }
    }
    total
}

/// A fixed list of seeds, run on every `cargo test`.
#[test]
fn crash_fixed_seeds() {
    let c = run_seeds(0..30);
    // The fixed seeds exercise every part of garbage collection.
    assert!(
        c.deletions > 0
            && c.segments_dropped > 0
            && c.tombstones_purged > 0
            && c.compactions > 0
            && c.flushes_between_steps > 0
            && c.aborts > 0
            && c.gc_failures > 0,
        "{c:?}"
    );
}

/// Replays `SIM_SEED`, or sweeps `SIM_SEEDS` seeds from `SIM_SEED_BASE`; does nothing without.
#[test]
fn replay_one_seed() {
    if let Ok(seed) = std::env::var("SIM_SEED") {
        let c = run_seed(seed.parse().expect("SIM_SEED is a number"));
        eprintln!("{c:?}");
    } else if let Ok(n) = std::env::var("SIM_SEEDS") {
        let n: u64 = n.parse().expect("SIM_SEEDS is a number");
        let base: u64 = std::env::var("SIM_SEED_BASE")
            .ok()
            .and_then(|b| b.parse().ok())
            .unwrap_or(1000);
        let c = run_seeds(base..base + n);
        eprintln!("{n} seeds from {base}: {c:?}");
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
        index_merge_width: 2,
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
    // And more index records than the run the earlier flushes merged into, so that the last
    // flush merges too (an older run smaller than the newer one is merged into it).
    for e in 0..200u64 {
        last.entries
            .push((2, 1000 + e, Bytes::from(vec![e as u8; 8])));
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

/// A stamped body of `len` bytes for (ledger, entry, version).
fn stamped(l: u64, e: u64, version: u64, len: usize) -> Bytes {
    let mut b = vec![(l * 31 + e * 7 + version) as u8; len.max(24)];
    b[0..8].copy_from_slice(&l.to_le_bytes());
    b[8..16].copy_from_slice(&e.to_le_bytes());
    b[16..24].copy_from_slice(&version.to_le_bytes());
    Bytes::from(b)
}

/// An index collection and a multi-step compaction, with two flushes between its steps (one
/// overwrites entries being relocated, the other deletes a ledger being relocated), are cut at
/// every storage operation in turn, then the disk crashes. Recovery always yields the state of
/// the last flush that may have committed (a flush that returned `Ok` is never lost), the
/// files on disk are exactly the manifest's, and both sides of the compaction's commit are
/// reached: the victims survive the cuts before it and are gone after it.
#[test]
fn crash_at_every_step_of_a_compaction() {
    let config = LedgerStoreConfig {
        entry_log_size_bytes: 16 << 10,
        write_chunk_bytes: 8192,
        max_writes_in_flight: 2,
        index_block_cache_bytes: 1 << 20,
        index_merge_width: 2,
        max_index_runs: 3,
    };
    // Ledgers 1..=4 interleaved over several segments, ledger 6 alone in two, then 1, 2 and 6
    // deleted: the index collection drops ledger 6's segments, the others are about half live.
    let mut batches = Vec::new();
    let mut states = vec![State::default()];
    for i in 0..5u64 {
        let mut b = FlushBatch {
            journal_mark: (i + 1) * 10,
            ..FlushBatch::default()
        };
        for e in i * 6..(i + 1) * 6 {
            for l in 1..=4u64 {
                b.entries
                    .push((l, e, stamped(l, e, 0, 500 + 40 * l as usize)));
            }
        }
        if i == 2 {
            // Fills the active segment and two more of its own.
            for e in 0..16u64 {
                b.entries.push((6, e, stamped(6, e, 0, 3000)));
            }
        }
        states.push(states.last().unwrap().apply(&b));
        batches.push(b);
    }
    let delete = |ls: &[u64], state: &State| -> Vec<LedgerMeta> {
        ls.iter()
            .map(|l| LedgerMeta {
                deleted: true,
                ..state.ledgers[l].clone()
            })
            .collect()
    };
    let b = FlushBatch {
        ledgers: delete(&[1, 2, 6], states.last().unwrap()),
        journal_mark: 55,
        ..FlushBatch::default()
    };
    states.push(states.last().unwrap().apply(&b));
    batches.push(b);
    let before = states.last().unwrap().clone();
    // After the first step: overwrite entries of ledger 3 (in the victims), add ledger 5.
    let mut mid1 = FlushBatch {
        journal_mark: 60,
        ..FlushBatch::default()
    };
    for e in (0..30u64).step_by(5) {
        mid1.entries.push((3, e, stamped(3, e, 1, 300)));
    }
    for e in 0..8u64 {
        mid1.entries.push((5, e, stamped(5, e, 0, 900)));
    }
    let after1 = before.apply(&mid1);
    // After the third step: delete ledger 4, whose entries are still being copied.
    let mid2 = FlushBatch {
        ledgers: delete(&[4], &after1),
        entries: vec![(3, 100, stamped(3, 100, 0, 200))],
        journal_mark: 70,
    };
    let after2 = after1.apply(&mid2);
    let candidates = [&before, &after1, &after2];

    let prepare = |seed: u64| -> SimDisk {
        let disk = SimDisk::new(SimConfig::new(seed).with_latency_us(5, 300));
        let (mut store, _) = LedgerStore::open(disk.storage("l"), config.clone()).unwrap();
        for b in &batches {
            store.flush(b).unwrap();
        }
        disk
    };
    /// What the cut sequence got through.
    #[derive(Debug, Default)]
    struct Done {
        collected: bool,
        dropped: u32,
        victims: Vec<u64>,
        steps: u32,
        flushed: [bool; 2],
        compacted: bool,
    }
    // The sequence under test; stops at the first error (the cut), aborting the compaction.
    let run = |store: &mut Store| -> Done {
        let mut done = Done::default();
        let Ok(gc) = store.collect_index() else {
            return done;
        };
        done.collected = true;
        done.dropped = gc.segments_dropped;
        let mut c = match store.begin_compaction(&gc.usage, 0.9, u64::MAX) {
            Ok(Some(c)) => c,
            Ok(None) => panic!("nothing to compact: {gc:?}"),
            Err(_) => return done,
        };
        done.victims = c.victims().to_vec();
        loop {
            match store.compact_step(&mut c, 2048) {
                Ok(Step::More(_)) => {
                    done.steps += 1;
                    let (k, batch) = match done.steps {
                        1 => (0, &mid1),
                        3 => (1, &mid2),
                        _ => continue,
                    };
                    if store.flush(batch).is_err() {
                        store.abort_compaction(c);
                        return done;
                    }
                    done.flushed[k] = true;
                }
                Ok(Step::Done(_)) => {
                    done.steps += 1;
                    done.compacted = true;
                    return done;
                }
                Err(_) => {
                    store.abort_compaction(c);
                    return done;
                }
            }
        }
    };
    // Count the operations of the whole sequence.
    let disk = prepare(1);
    let (fa, _, used) = FailAfter::new(disk.storage("l"), u64::MAX);
    let (mut store, _) = LedgerStore::open(fa, config.clone()).unwrap();
    let at_open = used.get();
    let full = run(&mut store);
    assert!(
        full.compacted && full.flushed == [true, true] && full.steps > 6 && full.dropped >= 2,
        "{full:?}"
    );
    assert!(full.victims.len() >= 3, "{full:?}");
    let total = used.get() - at_open;
    drop(store);
    disk.crash();
    let (store, i) = open_and_check(&disk, &config, &candidates, 0);
    assert_eq!(i, 2);
    let segments_after = store.manifest().segments.clone();
    assert!(
        full.victims
            .iter()
            .all(|v| !segments_after.iter().any(|s| s.id == *v)),
        "{full:?} {segments_after:?}"
    );
    drop(store);

    let mut outcomes = [0u32; 3];
    let mut committed = [0u32; 2];
    for cut in 0..=total {
        let disk = prepare(1000 + cut);
        let (fa, _, _) = FailAfter::new(disk.storage("l"), at_open + cut);
        let (mut store, _) = LedgerStore::open(fa, config.clone()).unwrap();
        let done = run(&mut store);
        if cut == total {
            assert!(done.compacted, "the uncut compaction failed: {done:?}");
        }
        drop(store);
        disk.crash();
        let (store, i) = open_and_check(&disk, &config, &candidates, cut);
        outcomes[i] += 1;
        for (k, flushed) in done.flushed.iter().enumerate() {
            if *flushed {
                assert!(
                    i > k,
                    "cut {cut} of {total}: flush {k} returned Ok but was lost ({done:?})"
                );
            }
        }
        // The compaction committed iff its victims left the manifest, all at once.
        let live: Vec<bool> = done
            .victims
            .iter()
            .map(|v| store.manifest().segments.iter().any(|s| s.id == *v))
            .collect();
        assert!(
            live.iter().all(|x| *x) || live.iter().all(|x| !*x),
            "cut {cut}: {done:?} {live:?}"
        );
        let gone = !live.is_empty() && !live[0];
        if done.compacted {
            assert!(gone, "cut {cut}: a compaction that returned Done was lost");
        }
        committed[gone as usize] += 1;
        drop(store);
        if cut % 4 == 0 {
            // Idempotence.
            disk.crash();
            drop(open_and_check(&disk, &config, &candidates[i..=i], cut));
        }
    }
    assert!(
        outcomes.iter().all(|&n| n > 0) && committed.iter().all(|&n| n > 0),
        "{total} cuts: outcomes {outcomes:?}, compaction committed {committed:?}"
    );
}
