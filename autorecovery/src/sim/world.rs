//! The simulated cluster: ledger metadata with znode versions, bookies with their ledgers'
//! entries, master keys and fence bits, the under-replication manager's records and locks, and
//! a clock. Each actor (auditor, worker, writer) sees it through an [`Actor`], which implements
//! the ports; every call first yields to the scheduler, so actors interleave at each call, in
//! an order the seed decides.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use bytes::Bytes;
use metadata::ledger_metadata::{LedgerMetadata, Versioned, WriteOutcome};
use metadata::underreplication::manager::Claim;
use metadata::underreplication::records::UrRecord;

use crate::placement::Rng;
use crate::port::{AddError, Cluster, PortResult, ReadError, Registered, UnderReplication};

#[derive(Clone, Debug, Default)]
pub struct SimLedger {
    pub key: [u8; 20],
    pub fenced: bool,
    pub entries: BTreeMap<i64, Bytes>,
}

#[derive(Clone, Debug, Default)]
pub struct SimBookie {
    pub alive: bool,
    pub read_only: bool,
    pub ledgers: BTreeMap<u64, SimLedger>,
}

#[derive(Debug, Default)]
pub struct UrState {
    pub records: BTreeMap<u64, (UrRecord, i32)>,
    /// ledger → the actor holding its lock
    pub locks: BTreeMap<u64, u32>,
    pub enabled: bool,
}

pub struct World {
    pub now: Cell<i64>,
    pub ledgers: RefCell<BTreeMap<u64, (LedgerMetadata, i32)>>,
    pub bookies: RefCell<BTreeMap<String, SimBookie>>,
    pub ur: RefCell<UrState>,
    /// Transient read failures, per thousand reads.
    pub read_faults_per_mille: Cell<u64>,
    pub rng: RefCell<Rng>,
    pub trace: RefCell<Vec<String>>,
    /// Versioned metadata writes refused because another writer got there first.
    pub conflicts: Cell<u64>,
    /// Metadata writes by an actor over a version another actor wrote.
    pub interleaved_writes: Cell<u64>,
    last_writer: RefCell<BTreeMap<u64, u32>>,
}

impl World {
    pub fn new(seed: u64, bookies: &[String]) -> Rc<World> {
        Rc::new(World {
            now: Cell::new(1_000_000),
            ledgers: RefCell::new(BTreeMap::new()),
            bookies: RefCell::new(
                bookies
                    .iter()
                    .map(|b| {
                        (
                            b.clone(),
                            SimBookie {
                                alive: true,
                                ..SimBookie::default()
                            },
                        )
                    })
                    .collect(),
            ),
            ur: RefCell::new(UrState {
                enabled: true,
                ..UrState::default()
            }),
            read_faults_per_mille: Cell::new(0),
            rng: RefCell::new(Rng::new(seed ^ 0x5eed)),
            trace: RefCell::new(Vec::new()),
            conflicts: Cell::new(0),
            interleaved_writes: Cell::new(0),
            last_writer: RefCell::new(BTreeMap::new()),
        })
    }

    pub fn log(&self, s: String) {
        let mut t = self.trace.borrow_mut();
        t.push(format!("[{}] {s}", self.now.get()));
        if t.len() > 4000 {
            t.drain(..1000);
        }
    }

    pub fn registered(&self) -> Registered {
        let mut r = Registered::default();
        for (id, b) in self.bookies.borrow().iter() {
            if b.alive && b.read_only {
                r.read_only.insert(id.clone());
            } else if b.alive {
                r.writable.insert(id.clone());
            }
        }
        r
    }

    /// A session ends: its locks go.
    pub fn expire(&self, actor: u32) {
        self.ur
            .borrow_mut()
            .locks
            .retain(|_, owner| *owner != actor);
    }

    /// A client's add (not a recovery add): refused on a fenced ledger.
    pub fn client_add(
        &self,
        bookie: &str,
        ledger: u64,
        key: [u8; 20],
        entry: i64,
        body: Bytes,
    ) -> bool {
        let mut bookies = self.bookies.borrow_mut();
        let Some(b) = bookies.get_mut(bookie).filter(|b| b.alive && !b.read_only) else {
            return false;
        };
        let l = b.ledgers.entry(ledger).or_insert_with(|| SimLedger {
            key,
            ..SimLedger::default()
        });
        if l.key != key || l.fenced {
            return false;
        }
        l.entries.insert(entry, body);
        true
    }
}

/// Yields once to the scheduler.
pub struct Yield(bool);

impl Future for Yield {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

pub fn yield_now() -> Yield {
    Yield(false)
}

/// One actor's view of the world (its session is `id`).
#[derive(Clone)]
pub struct Actor {
    pub world: Rc<World>,
    pub id: u32,
}

impl Cluster for Actor {
    async fn ledger_ids(&self) -> PortResult<Vec<u64>> {
        yield_now().await;
        Ok(self.world.ledgers.borrow().keys().copied().collect())
    }

    async fn read_ledger(&self, ledger: u64) -> PortResult<Option<Versioned>> {
        yield_now().await;
        Ok(self
            .world
            .ledgers
            .borrow()
            .get(&ledger)
            .map(|(m, v)| Versioned {
                metadata: m.clone(),
                version: *v,
                znode_ctime: 0,
            }))
    }

    async fn write_ledger(
        &self,
        ledger: u64,
        md: &LedgerMetadata,
        version: i32,
    ) -> PortResult<WriteOutcome> {
        yield_now().await;
        md.encode()
            .map_err(|e| format!("metadata Java would not write: {e}"))?;
        let mut ledgers = self.world.ledgers.borrow_mut();
        let Some((m, v)) = ledgers.get_mut(&ledger) else {
            return Ok(WriteOutcome::Deleted);
        };
        if *v != version {
            self.world.conflicts.set(self.world.conflicts.get() + 1);
            return Ok(WriteOutcome::Conflict);
        }
        if let Some(prev) = self.world.last_writer.borrow_mut().insert(ledger, self.id) {
            if prev != self.id {
                self.world
                    .interleaved_writes
                    .set(self.world.interleaved_writes.get() + 1);
            }
        }
        *m = md.clone();
        *v += 1;
        self.world.log(format!(
            "actor {} wrote ledger {ledger} v{}: {:?} {:?}",
            self.id, *v, md.state, md.ensembles
        ));
        Ok(WriteOutcome::Written(*v))
    }

    async fn registered(&self) -> PortResult<Registered> {
        yield_now().await;
        Ok(self.world.registered())
    }

    async fn racks(&self) -> Vec<(String, String)> {
        Vec::new()
    }

    async fn read_entries(
        &self,
        bookie: &str,
        ledger: u64,
        entries: &[i64],
    ) -> Vec<Result<Bytes, ReadError>> {
        yield_now().await;
        let faults = self.world.read_faults_per_mille.get();
        let bookies = self.world.bookies.borrow();
        let Some(b) = bookies.get(bookie).filter(|b| b.alive) else {
            return entries
                .iter()
                .map(|_| Err(ReadError::Failed("down".into())))
                .collect();
        };
        entries
            .iter()
            .map(|e| {
                if faults > 0 && self.world.rng.borrow_mut().below(1000) < faults as usize {
                    return Err(ReadError::Failed("timeout".into()));
                }
                match b.ledgers.get(&ledger) {
                    None => Err(ReadError::NoLedger),
                    Some(l) => l.entries.get(e).cloned().ok_or(ReadError::NoEntry),
                }
            })
            .collect()
    }

    async fn read_last(
        &self,
        bookie: &str,
        ledger: u64,
        fence: Option<&[u8; 20]>,
    ) -> Result<Option<Bytes>, ReadError> {
        yield_now().await;
        let mut bookies = self.world.bookies.borrow_mut();
        let Some(b) = bookies.get_mut(bookie).filter(|b| b.alive) else {
            return Err(ReadError::Failed("down".into()));
        };
        if let Some(key) = fence {
            let l = b.ledgers.entry(ledger).or_insert_with(|| SimLedger {
                key: *key,
                ..SimLedger::default()
            });
            if l.key != *key {
                return Err(ReadError::Failed("unauthorized".into()));
            }
            l.fenced = true;
        }
        match b.ledgers.get(&ledger) {
            None => Err(ReadError::NoLedger),
            Some(l) => Ok(l.entries.values().next_back().cloned()),
        }
    }

    async fn recovery_add(
        &self,
        bookie: &str,
        ledger: u64,
        key: &[u8; 20],
        entries: Vec<(i64, Bytes)>,
    ) -> Vec<Result<(), AddError>> {
        yield_now().await;
        let mut bookies = self.world.bookies.borrow_mut();
        let Some(b) = bookies.get_mut(bookie).filter(|b| b.alive && !b.read_only) else {
            return entries
                .iter()
                .map(|_| Err(AddError("down".into())))
                .collect();
        };
        let l = b.ledgers.entry(ledger).or_insert_with(|| SimLedger {
            key: *key,
            ..SimLedger::default()
        });
        if l.key != *key {
            return entries
                .iter()
                .map(|_| Err(AddError("unauthorized".into())))
                .collect();
        }
        entries
            .into_iter()
            .map(|(e, body)| {
                l.entries.insert(e, body);
                Ok(())
            })
            .collect()
    }

    fn now_ms(&self) -> i64 {
        self.world.now.get()
    }

    async fn sleep_ms(&self, ms: u64) {
        self.world.now.set(self.world.now.get() + ms as i64);
        yield_now().await;
    }
}

impl UnderReplication for Actor {
    async fn mark(&self, ledger: u64, missing: &[String], now_ms: Option<i64>) -> PortResult<()> {
        yield_now().await;
        let mut ur = self.world.ur.borrow_mut();
        match ur.records.get_mut(&ledger) {
            None => {
                ur.records.insert(
                    ledger,
                    (
                        UrRecord {
                            replicas: missing.to_vec(),
                            ctime: now_ms,
                        },
                        0,
                    ),
                );
            }
            Some((rec, v)) => {
                let before = rec.replicas.len();
                for m in missing {
                    if !rec.replicas.contains(m) {
                        rec.replicas.push(m.clone());
                    }
                }
                if rec.replicas.len() > before {
                    rec.ctime = now_ms.or(rec.ctime);
                    *v += 1;
                }
            }
        }
        Ok(())
    }

    async fn list(&self) -> PortResult<Vec<(u64, UrRecord)>> {
        yield_now().await;
        Ok(self
            .world
            .ur
            .borrow()
            .records
            .iter()
            .map(|(l, (r, _))| (*l, r.clone()))
            .collect())
    }

    async fn claim(&self, skip: &BTreeSet<u64>, seed: u64) -> PortResult<Option<Claim>> {
        yield_now().await;
        let mut ur = self.world.ur.borrow_mut();
        let free: Vec<(u64, i32)> = ur
            .records
            .iter()
            .filter(|(l, _)| !skip.contains(l) && !ur.locks.contains_key(l))
            .map(|(l, (_, v))| (*l, *v))
            .collect();
        if free.is_empty() {
            return Ok(None);
        }
        let (ledger, version) = free[(seed % free.len() as u64) as usize];
        ur.locks.insert(ledger, self.id);
        Ok(Some(Claim { ledger, version }))
    }

    async fn mark_replicated(&self, claim: &Claim) -> PortResult<()> {
        yield_now().await;
        let mut ur = self.world.ur.borrow_mut();
        if ur
            .records
            .get(&claim.ledger)
            .is_some_and(|(_, v)| *v == claim.version)
        {
            ur.records.remove(&claim.ledger);
        }
        if ur.locks.get(&claim.ledger) == Some(&self.id) {
            ur.locks.remove(&claim.ledger);
        }
        Ok(())
    }

    async fn release(&self, ledger: u64) -> PortResult<()> {
        yield_now().await;
        let mut ur = self.world.ur.borrow_mut();
        if ur.locks.get(&ledger) == Some(&self.id) {
            ur.locks.remove(&ledger);
        }
        Ok(())
    }

    async fn is_enabled(&self) -> PortResult<bool> {
        yield_now().await;
        Ok(self.world.ur.borrow().enabled)
    }

    async fn lost_bookie_recovery_delay(&self) -> PortResult<Option<i32>> {
        yield_now().await;
        Ok(Some(0))
    }
}
