//! Autorecovery's simulator: one seed drives a cluster of simulated bookies, writers (Java
//! clients that add, change ensembles when a bookie fails, close, or die leaving a ledger
//! open), an auditor and two replication workers, interleaved call by call in an order the
//! seed picks, with faults: a bookie lost for good (then, once healed, a second one), a worker
//! killed mid-fragment (its locks go with its session, a new one starts), transient read
//! failures, a read-only bookie. At the end every acknowledged entry must be on all the
//! bookies its ledger's final metadata names for it, with its bytes; no ensemble may name a
//! lost bookie; every record and lock must be gone. `AUTORECOVERY_SIM_SEEDS=N cargo test -p
//! autorecovery sim` runs N seeds; a failing seed prints its trace.

mod world;

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Waker};

use bytes::Bytes;
use metadata::ledger_metadata::{LedgerMetadata, LedgerState};

use crate::auditor::{audit, Act, AuditorState};
use crate::entry;
use crate::placement::Rng;
use crate::port::Cluster;
use crate::schedule;
use crate::settings::Settings;
use crate::worker_loop::{Step, WorkerLoop};
use world::{yield_now, Actor, World};

/// What each writer managed: the entries acknowledged to it, with their bytes.
#[derive(Debug, Default)]
struct Written {
    acked: BTreeMap<i64, Bytes>,
}

struct LedgerSpec {
    id: u64,
    ensemble: usize,
    write: usize,
    ack: usize,
    entries: i64,
    close: bool,
}

fn body(ledger: u64, e: i64, lac: i64, length: i64, payload: &[u8]) -> Bytes {
    let mut b = Vec::with_capacity(40 + payload.len());
    for v in [ledger as i64, e, lac, length] {
        b.extend_from_slice(&v.to_be_bytes());
    }
    b.extend_from_slice(&[0xd1; 8]); // a stand-in digest
    b.extend_from_slice(payload);
    Bytes::from(b)
}

/// A writer: creates its ledger, adds entries (acknowledged at the write quorum, after an
/// ensemble change when a bookie fails), then closes it or stops (dies).
async fn writer(a: Actor, spec: LedgerSpec, seed: u64, out: Rc<RefCell<BTreeMap<u64, Written>>>) {
    let mut rng = Rng::new(seed);
    let password = format!("pw{}", spec.id).into_bytes();
    let key = entry::master_key(&password);
    let writable: Vec<String> = a.world.registered().writable.into_iter().collect();
    if writable.len() < spec.ensemble {
        return;
    }
    let mut pool = writable.clone();
    let mut ens = Vec::new();
    while ens.len() < spec.ensemble {
        ens.push(pool.remove(rng.below(pool.len())));
    }
    let md = LedgerMetadata {
        format_version: 3,
        ensemble_size: spec.ensemble as i32,
        write_quorum_size: spec.write as i32,
        ack_quorum_size: spec.ack as i32,
        state: LedgerState::Open,
        last_entry_id: None,
        length: 0,
        ensembles: vec![(0, ens)],
        digest_type: Some(metadata::ledger_metadata::DigestType::Crc32c),
        password: Some(password),
        ctime: Some(a.now_ms()),
        custom_metadata: Vec::new(),
        ctoken: Some(1),
    };
    a.world.ledgers.borrow_mut().insert(spec.id, (md, 0));
    out.borrow_mut().insert(spec.id, Written::default());
    let mut length = 0i64;
    let mut lac = -1i64;
    for e in 0..spec.entries {
        let payload = vec![(e as u8).wrapping_mul(31) ^ spec.id as u8; 1 + (e as usize % 7)];
        length += payload.len() as i64;
        let b = body(spec.id, e, lac, length, &payload);
        let mut done = false;
        for _ in 0..8 {
            let Ok(Some(v)) = a.read_ledger(spec.id).await else {
                return;
            };
            if v.metadata.state != LedgerState::Open {
                return; // fenced out by a recovery
            }
            let (first, ens) = v.metadata.ensembles.last().cloned().expect("an ensemble");
            let mut failed = Vec::new();
            for i in schedule::write_set(e, spec.ensemble, spec.write) {
                yield_now().await;
                if !a.world.client_add(&ens[i], spec.id, key, e, b.clone()) {
                    let fenced = a.world.bookies.borrow().get(&ens[i]).is_some_and(|bk| {
                        bk.alive && bk.ledgers.get(&spec.id).is_some_and(|l| l.fenced)
                    });
                    if fenced {
                        return;
                    }
                    failed.push(i);
                }
            }
            if failed.is_empty() {
                done = true;
                break;
            }
            // Ensemble change from this entry: the failed bookies replaced.
            let writable = a.world.registered().writable;
            let mut next = ens.clone();
            let mut taken: BTreeSet<String> = ens.iter().cloned().collect();
            for i in failed {
                let cands: Vec<String> = writable
                    .iter()
                    .filter(|w| !taken.contains(*w))
                    .cloned()
                    .collect();
                if cands.is_empty() {
                    return;
                }
                next[i] = cands[rng.below(cands.len())].clone();
                taken.insert(next[i].clone());
            }
            let mut m = v.metadata.for_rewrite();
            if first == e {
                m.ensembles.last_mut().expect("an ensemble").1 = next;
            } else {
                m.ensembles.push((e, next));
            }
            let _ = a.write_ledger(spec.id, &m, v.version).await;
        }
        if !done {
            return;
        }
        out.borrow_mut()
            .get_mut(&spec.id)
            .expect("written")
            .acked
            .insert(e, b);
        lac = e;
    }
    if spec.close {
        for _ in 0..20 {
            let Ok(Some(v)) = a.read_ledger(spec.id).await else {
                return;
            };
            if v.metadata.state != LedgerState::Open {
                return;
            }
            let mut m = v.metadata.for_rewrite();
            m.state = LedgerState::Closed;
            m.last_entry_id = Some(lac);
            m.length = length;
            if let Ok(metadata::ledger_metadata::WriteOutcome::Written(_)) =
                a.write_ledger(spec.id, &m, v.version).await
            {
                return;
            }
        }
    }
}

async fn auditor(a: Actor, delay_s: i32) {
    // As the live daemon (Java 4.16+): every bookie with a cookie is known from the start, so
    // one lost before the auditor's first look is noticed too.
    let cookies = a.world.bookies.borrow().keys().cloned().collect();
    let mut state = AuditorState::new(cookies, delay_s);
    loop {
        let available = match a.registered().await {
            Ok(r) => r.available(),
            Err(_) => continue,
        };
        let now = a.now_ms();
        let run = match state.on_bookies(&available, delay_s, now) {
            Act::AuditNow => true,
            _ => state.take_due(now),
        };
        if run {
            match audit(&a, &a, true).await {
                Ok(r) => a.world.log(format!(
                    "auditor: {} lost, {} marks",
                    r.lost.len(),
                    r.marked
                )),
                Err(e) => a.world.log(format!("auditor: {e}")),
            }
        }
        a.sleep_ms(200).await;
    }
}

async fn worker(a: Actor, settings: Settings, seed: u64) {
    let mut w = WorkerLoop::new(settings, seed);
    loop {
        let step = w.step(&a, &a).await;
        if !matches!(step, Step::Idle) {
            a.world.log(format!("worker {}: {step:?}", a.id));
        }
        match step {
            Step::Worked(..) | Step::Recovered(..) => {}
            Step::Idle | Step::Disabled | Step::Error(_) => a.sleep_ms(150).await,
        }
    }
}

type Task = Pin<Box<dyn Future<Output = ()>>>;

/// One seed's run; `Err` says which invariant broke (with the trace's tail).
pub fn run(seed: u64) -> Result<RunStats, String> {
    let mut rng = Rng::new(seed);
    let n_bookies = 5 + rng.below(3);
    let bookies: Vec<String> = (0..n_bookies).map(|i| format!("b{i}:3181")).collect();
    let world = World::new(seed, &bookies);
    if rng.below(4) == 0 {
        world.read_faults_per_mille.set(20);
    }
    let written: Rc<RefCell<BTreeMap<u64, Written>>> = Rc::new(RefCell::new(BTreeMap::new()));
    let mut settings = Settings {
        open_ledger_grace_ms: 2_000 + 1_000 * rng.below(3) as u64,
        batch_entries: 1 + rng.below(6),
        rate_bytes_per_sec: 1 << 20,
        backoff_ms: 500,
        failed_lock_grace_ms: 8_000,
        ..Settings::default()
    };
    settings.verification_percentage = [0, 50, 100][rng.below(3)];
    let mut tasks: Vec<(u32, Task)> = Vec::new();
    let mut next_id = 1u32;
    let mut actor = |world: &Rc<World>| {
        let a = Actor {
            world: world.clone(),
            id: next_id,
        };
        next_id += 1;
        a
    };
    let n_ledgers = 2 + rng.below(4);
    let mut max_ensemble = 0;
    for l in 0..n_ledgers {
        let ensemble = 2 + rng.below(3);
        max_ensemble = max_ensemble.max(ensemble);
        let write = 2 + rng.below(ensemble - 1);
        // An ack quorum of 1 cannot be recovered with its bookie lost (Java's neither).
        let ack = 2 + rng.below(write - 1);
        let spec = LedgerSpec {
            id: 100 + l as u64,
            ensemble,
            write,
            ack,
            entries: rng.below(30) as i64,
            close: rng.below(3) != 0,
        };
        let a = actor(&world);
        tasks.push((
            a.id,
            Box::pin(writer(a, spec, rng.next_u64(), written.clone())),
        ));
    }
    let delay_s = [0, 0, 1, 3][rng.below(4)];
    let a = actor(&world);
    tasks.push((a.id, Box::pin(auditor(a, delay_s))));
    let mut worker_ids = Vec::new();
    for _ in 0..2 {
        let a = actor(&world);
        worker_ids.push(a.id);
        tasks.push((a.id, Box::pin(worker(a, settings.clone(), rng.next_u64()))));
    }

    let waker = Waker::noop();
    let mut cx = Context::from_waker(waker);
    let first_kill_at = 20 + rng.below(400);
    let mut killed: Vec<String> = Vec::new();
    let mut second_kill = rng.below(2) == 0;
    let mut worker_crashes = rng.below(3);
    let max_steps = 400_000;
    let mut stats = RunStats::default();
    for step in 0..max_steps {
        // Faults.
        if step == first_kill_at
            || (second_kill && killed.len() == 1 && healed(&world, &written, &killed))
        {
            if killed.len() == 1 {
                second_kill = false;
            }
            let alive: Vec<String> = world
                .bookies
                .borrow()
                .iter()
                .filter(|(_, b)| b.alive)
                .map(|(k, _)| k.clone())
                .collect();
            // Faults never leave fewer writable bookies than an ensemble needs (nothing could
            // heal then, in Java either).
            if world.registered().writable.len() > max_ensemble {
                let victim = alive[rng.below(alive.len())].clone();
                world
                    .bookies
                    .borrow_mut()
                    .get_mut(&victim)
                    .expect("bookie")
                    .alive = false;
                world.log(format!("bookie {victim} lost for good"));
                killed.push(victim);
            }
        }
        if step == first_kill_at / 2
            && rng.below(3) == 0
            && world.registered().writable.len() > max_ensemble + 2
        {
            let b = bookies[rng.below(bookies.len())].clone();
            world
                .bookies
                .borrow_mut()
                .get_mut(&b)
                .expect("bookie")
                .read_only = true;
            world.log(format!("bookie {b} read-only"));
        }
        if worker_crashes > 0 && step > first_kill_at && rng.below(5000) == 0 {
            worker_crashes -= 1;
            let victim = worker_ids[rng.below(worker_ids.len())];
            tasks.retain(|(id, _)| *id != victim);
            world.expire(victim);
            world.log(format!("worker {victim} killed"));
            let a = actor(&world);
            worker_ids.retain(|w| *w != victim);
            worker_ids.push(a.id);
            tasks.push((a.id, Box::pin(worker(a, settings.clone(), rng.next_u64()))));
            stats.worker_crashes += 1;
        }
        if tasks.is_empty() {
            break;
        }
        let k = rng.below(tasks.len());
        if tasks[k].1.as_mut().poll(&mut cx).is_ready() {
            drop(tasks.remove(k));
        }
        if step > first_kill_at
            && step % 64 == 0
            && !killed.is_empty()
            && !second_kill
            && writers_done(&tasks, n_ledgers)
            && healed(&world, &written, &killed)
        {
            stats.steps = step;
            stats.lost = killed.len();
            stats.ledgers = written.borrow().len();
            stats.conflicts = world.conflicts.get();
            stats.interleaved = world.interleaved_writes.get();
            return check(&world, &written, &killed).map(|()| stats);
        }
    }
    Err(format!(
        "not healed after {max_steps} steps (lost {killed:?}; records {:?}, locks {:?})\n{}",
        world.ur.borrow().records.keys().collect::<Vec<_>>(),
        world.ur.borrow().locks,
        trace_tail(&world)
    ))
}

#[derive(Debug, Default)]
pub struct RunStats {
    pub steps: usize,
    pub lost: usize,
    pub ledgers: usize,
    pub worker_crashes: usize,
    /// Metadata writes that lost a race (compare-and-set refused) and were redone.
    pub conflicts: u64,
    /// Metadata writes over a version another actor (writer or worker) had written.
    pub interleaved: u64,
}

/// Writers are the first tasks made (ids 1..=writers).
fn writers_done(tasks: &[(u32, Task)], writers: usize) -> bool {
    tasks.iter().all(|(id, _)| *id as usize > writers)
}

/// No record, no lock, and every ledger's ensembles clear of lost bookies.
fn healed(world: &World, written: &Rc<RefCell<BTreeMap<u64, Written>>>, lost: &[String]) -> bool {
    let ur = world.ur.borrow();
    if !ur.records.is_empty() || !ur.locks.is_empty() {
        return false;
    }
    let ledgers = world.ledgers.borrow();
    written.borrow().keys().all(|id| {
        ledgers.get(id).is_some_and(|(m, _)| {
            !m.ensembles
                .iter()
                .any(|(_, e)| e.iter().any(|b| lost.contains(b)))
        })
    })
}

/// The invariants, once healed.
fn check(
    world: &World,
    written: &Rc<RefCell<BTreeMap<u64, Written>>>,
    lost: &[String],
) -> Result<(), String> {
    let ledgers = world.ledgers.borrow();
    let bookies = world.bookies.borrow();
    for (id, w) in written.borrow().iter() {
        let (md, _) = ledgers.get(id).ok_or(format!("ledger {id} vanished"))?;
        md.encode().map_err(|e| format!("ledger {id}: {e}"))?;
        let last_acked = w.acked.keys().next_back().copied().unwrap_or(-1);
        if md.is_closed() && md.last_entry_id.unwrap_or(-1) < last_acked {
            return Err(format!(
                "ledger {id} closed at {:?} below its last acknowledged entry {last_acked}\n{}",
                md.last_entry_id,
                trace_tail(world)
            ));
        }
        let e = md.ensemble_size as usize;
        let wq = md.write_quorum_size as usize;
        for (&entry_id, b) in &w.acked {
            let (_, ens) = md
                .ensembles
                .iter()
                .rev()
                .find(|(k, _)| *k <= entry_id)
                .ok_or(format!("ledger {id}: no ensemble for {entry_id}"))?;
            for i in schedule::write_set(entry_id, e, wq) {
                let bookie = &ens[i];
                if lost.contains(bookie) {
                    return Err(format!(
                        "ledger {id}: entry {entry_id} names lost bookie {bookie}"
                    ));
                }
                let got = bookies
                    .get(bookie)
                    .and_then(|bk| bk.ledgers.get(id))
                    .and_then(|l| l.entries.get(&entry_id));
                if got != Some(b) {
                    return Err(format!(
                        "ledger {id}: acknowledged entry {entry_id} is not on {bookie} (index {i}) as written: {got:?}\nmetadata {:?}\n{}",
                        md.ensembles,
                        trace_tail(world)
                    ));
                }
            }
        }
    }
    Ok(())
}

fn trace_tail(world: &World) -> String {
    let t = world.trace.borrow();
    // AUTORECOVERY_SIM_FULL_TRACE=1: all of it (with a replay)
    let n = match std::env::var_os("AUTORECOVERY_SIM_FULL_TRACE") {
        Some(_) => usize::MAX,
        None => 60,
    };
    t.iter()
        .rev()
        .take(n)
        .rev()
        .cloned()
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_heal_and_lose_nothing() {
        let n: u64 = std::env::var("AUTORECOVERY_SIM_SEEDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(5_000);
        let from: u64 = std::env::var("AUTORECOVERY_SIM_FROM")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let mut failed = Vec::new();
        let mut totals = RunStats::default();
        for seed in from..from + n {
            match run(seed) {
                Ok(s) => {
                    totals.lost += s.lost;
                    totals.ledgers += s.ledgers;
                    totals.worker_crashes += s.worker_crashes;
                    totals.conflicts += s.conflicts;
                    totals.interleaved += s.interleaved;
                }
                Err(e) => failed.push(format!("seed {seed}: {e}")),
            }
        }
        eprintln!(
            "autorecovery sim: {n} seeds, {} failed; {} bookies lost, {} ledgers, {} worker crashes, \
             {} metadata races lost and redone, {} writes over another actor's",
            failed.len(),
            totals.lost,
            totals.ledgers,
            totals.worker_crashes,
            totals.conflicts,
            totals.interleaved
        );
        assert!(
            failed.is_empty(),
            "{}",
            failed
                .iter()
                .take(3)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n\n")
        );
    }

    /// Seeds that once failed, kept: 10125 closed a ledger short (a recovery's ensemble
    /// change persisted before its adds, so the next recovery counted the new bookie's "no
    /// such entry" against an acknowledged entry: now written with the close, as Java does);
    /// 7399, 8440 and 12420 lost a bookie before the auditor's first look (the simulated
    /// auditor did not know it; the live one starts from the cookies, as Java 4.16+).
    #[test]
    fn seeds_that_once_failed() {
        for seed in [7399, 8440, 10125, 12420] {
            if let Err(e) = run(seed) {
                panic!("seed {seed}: {e}");
            }
        }
    }

    #[test]
    fn a_seed_replays_the_same() {
        let a = run(42).map(|s| (s.steps, s.lost, s.ledgers));
        let b = run(42).map(|s| (s.steps, s.lost, s.ledgers));
        assert_eq!(a, b);
    }
}

#[cfg(test)]
mod replay {
    /// `AUTORECOVERY_SIM_SEED=S cargo test -p autorecovery replay -- --nocapture`
    #[test]
    fn replay_one_seed() {
        let Some(seed) = std::env::var("AUTORECOVERY_SIM_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
        else {
            return;
        };
        match super::run(seed) {
            Ok(s) => eprintln!("seed {seed} ok: {s:?}"),
            Err(e) => panic!("seed {seed}: {e}"),
        }
    }
}
