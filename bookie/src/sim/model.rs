//! The simulated clients and what they know: every entry they wrote, which adds the bookie
//! acknowledged, which fences, explicit LACs and deletions took effect. Each reply is checked
//! against that knowledge the moment it arrives; a broken rule is a [`Violation`].
//!
//! The rules (issue 33), as checked here:
//! - an acknowledged add reads back byte for byte, until its ledger is deleted (reads, batch
//!   reads, READ_LAC's last entry; after every restart too, by the final read-back);
//! - a fenced ledger never acknowledges a later add that is not a recovery add, and EFENCED
//!   comes only after a fence was asked for;
//! - the LAC never passes what the writer vouched for (the highest LAC it piggybacked or wrote
//!   explicitly) and never falls below what an acknowledged record carried;
//! - a ledger deleted by garbage collection stays deleted;
//! - a reply answers the request it names (v2 matches by ledger and entry: a reply for an entry
//!   nobody asked for is a violation too);
//! - every request is answered, or its connection closed, within a bounded simulated time.

use std::collections::{BTreeMap, BTreeSet};

use bytes::{BufMut, Bytes, BytesMut};
use net::client::RequestId;
use net::{ReadFlag, Request, Response, StatusCode};
use storage::sim::SimRng;

/// A broken rule: what, where.
#[derive(Debug, Clone)]
pub struct Violation(pub String);

/// The writer's state of one ledger.
#[derive(Debug)]
pub struct LedgerModel {
    pub key: Bytes,
    /// Every entry ever sent, by id (a resend carries the same body).
    pub bodies: BTreeMap<i64, Bytes>,
    pub acked: BTreeSet<i64>,
    /// The next entry the writer sends.
    pub next: i64,
    /// Requests in flight that may create the ledger on the bookie (adds, recovery adds,
    /// fences, explicit LACs): it is not deleted while any is.
    pub in_flight: usize,
    /// Such requests whose connection closed: the bookie may still act on them (one that
    /// crossed to another shard arrives later), until it restarts.
    pub limbo: usize,
    /// The highest LAC any request carried (piggybacked or explicit).
    pub lac_vouched: i64,
    /// The highest LAC an acknowledged record carried: the bookie's LAC is at least this.
    pub lac_floor: i64,
    /// When the first fence was acknowledged (virtual µs).
    pub fenced_at: Option<u64>,
    pub fence_asked: bool,
    /// The writer stopped: an add failed or its outcome is unknown (a crash, a closed
    /// connection); only recovery adds follow.
    pub broken: bool,
    /// Deleted from "ZooKeeper" (no longer listed).
    pub unlisted: bool,
    /// When garbage collection dropped it from the bookie.
    pub collected_at: Option<u64>,
}

impl LedgerModel {
    fn new(key: Bytes) -> LedgerModel {
        LedgerModel {
            key,
            bodies: BTreeMap::new(),
            acked: BTreeSet::new(),
            next: 0,
            in_flight: 0,
            limbo: 0,
            lac_vouched: -1,
            lac_floor: -1,
            fenced_at: None,
            fence_asked: false,
            broken: false,
            unlisted: false,
            collected_at: None,
        }
    }

    /// The writer's LAC: the end of the acknowledged prefix.
    fn contiguous(&self) -> i64 {
        let mut lac = -1;
        for &e in &self.acked {
            if e == lac + 1 {
                lac = e;
            } else if e > lac + 1 {
                break;
            }
        }
        lac
    }
}

/// A BookKeeper entry body: ledger, entry, LAC, length (the bookie reads the LAC at 16..24),
/// then a payload drawn from the seed.
pub fn entry_body(ledger: i64, entry: i64, lac: i64, rng: &mut SimRng, max: usize) -> Bytes {
    let len = rng.below(max as u64 + 1) as usize;
    let mut b = BytesMut::with_capacity(32 + len);
    b.put_i64(ledger);
    b.put_i64(entry);
    b.put_i64(lac);
    b.put_i64(len as i64);
    let mut payload = vec![0u8; len];
    rng.fill(&mut payload);
    b.put_slice(&payload);
    b.freeze()
}

fn body_ids(body: &[u8]) -> Option<(i64, i64, i64)> {
    let f = |r: std::ops::Range<usize>| {
        body.get(r)
            .map(|b| i64::from_be_bytes(b.try_into().expect("8 bytes")))
    };
    Some((f(0..8)?, f(8..16)?, f(16..24)?))
}

/// A request in flight and what the model needs to judge its reply.
#[derive(Debug, Clone)]
pub enum Asked {
    Add {
        ledger: i64,
        entry: i64,
        recovery: bool,
    },
    /// An add with a wrong master key: must be refused.
    BadKey {
        ledger: i64,
        entry: i64,
    },
    Read {
        ledger: i64,
        entry: i64,
        /// Acknowledged before the read was sent: it must be found.
        must_exist: bool,
    },
    LongPoll {
        ledger: i64,
        previous_lac: i64,
    },
    Fence {
        ledger: i64,
        entry: i64,
    },
    Batch {
        ledger: i64,
        start: i64,
        must_exist: bool,
    },
    ReadLac {
        ledger: i64,
        /// The highest acknowledged entry when it was sent.
        acked_max: Option<i64>,
    },
    WriteLac {
        ledger: i64,
        lac: i64,
    },
    Force {
        ledger: i64,
    },
}

impl Asked {
    /// Whether the request may create its ledger on the bookie.
    pub fn creates(&self) -> bool {
        matches!(
            self,
            Asked::Add { .. } | Asked::BadKey { .. } | Asked::Fence { .. } | Asked::WriteLac { .. }
        )
    }

    pub fn ledger(&self) -> i64 {
        match *self {
            Asked::Add { ledger, .. }
            | Asked::BadKey { ledger, .. }
            | Asked::Read { ledger, .. }
            | Asked::LongPoll { ledger, .. }
            | Asked::Fence { ledger, .. }
            | Asked::Batch { ledger, .. }
            | Asked::ReadLac { ledger, .. }
            | Asked::WriteLac { ledger, .. }
            | Asked::Force { ledger } => ledger,
        }
    }
}

#[derive(Debug, Clone)]
pub struct InFlight {
    pub asked: Asked,
    pub sent_at: u64,
    /// The LAC floor of its ledger when sent.
    pub floor_at_send: i64,
    /// Whether its ledger had been collected when it was sent.
    pub collected_before: bool,
    /// Answer by then (virtual µs) or the connection must have closed.
    pub deadline: u64,
}

/// Everything the clients know.
pub struct Model {
    pub ledgers: BTreeMap<i64, LedgerModel>,
    next_ledger: i64,
    /// (connection, request) → what it asked.
    pub in_flight: BTreeMap<(u64, RequestId), InFlight>,
    /// Whether read faults are on: an EIO read is then allowed.
    pub read_faults: bool,
    pub counts: Counts,
    /// A catch-up reader: the ledger it reads through in order, and its next entry.
    catch_up: Option<(i64, i64)>,
}

/// What happened, for the run's summary.
#[derive(Debug, Default, Clone, Copy)]
pub struct Counts {
    pub adds_acked: u64,
    pub adds_failed: u64,
    pub reads_ok: u64,
    pub fences: u64,
    pub long_polls: u64,
    pub lac_reads: u64,
    pub batch_reads: u64,
    pub deleted: u64,
    pub unknown: u64,
}

/// How long a request may wait for its answer (virtual µs), beyond a long poll's own timeout.
pub const ANSWER_BOUND_US: u64 = 30_000_000;

impl Model {
    pub fn new(read_faults: bool) -> Model {
        Model {
            ledgers: BTreeMap::new(),
            next_ledger: 1,
            in_flight: BTreeMap::new(),
            read_faults,
            counts: Counts::default(),
            catch_up: None,
        }
    }

    /// The ledgers ZooKeeper lists.
    pub fn listed(&self) -> BTreeSet<u64> {
        self.ledgers
            .iter()
            .filter(|(_, l)| !l.unlisted)
            .map(|(&id, _)| id as u64)
            .collect()
    }

    /// Picks the next request of the workload, or none (nothing sensible to do now).
    pub fn next_request(
        &mut self,
        rng: &mut SimRng,
        v3: bool,
        max_body: usize,
    ) -> Option<(Request, Asked)> {
        let writers = self
            .ledgers
            .values()
            .filter(|l| !l.broken && !l.unlisted && l.fenced_at.is_none())
            .count();
        if writers < 3 || rng.chance(0.01) {
            let id = self.next_ledger;
            self.next_ledger += 1;
            let mut key = vec![0u8; 20];
            rng.fill(&mut key);
            self.ledgers.insert(id, LedgerModel::new(Bytes::from(key)));
        }
        let ids: Vec<i64> = self.ledgers.keys().copied().collect();
        // A catch-up reader reads a ledger in order, one entry after the other (the
        // read-ahead's case): a third of the requests while it has entries left.
        if let Some((ledger, entry)) = self.catch_up {
            let l = &self.ledgers[&ledger];
            if entry < l.next && !l.unlisted && rng.chance(0.5) {
                self.catch_up = Some((ledger, entry + 1));
                let must_exist = l.acked.contains(&entry) && l.collected_at.is_none();
                return Some((
                    read(ledger, entry, None),
                    self_read(ledger, entry, must_exist),
                ));
            }
            if entry >= l.next || l.unlisted {
                self.catch_up = None;
            }
        } else if rng.chance(0.05) {
            // A ledger no longer written (its entries flushed by now, likely): the catch-up
            // of a reader that fell behind.
            let done: Vec<i64> = self
                .ledgers
                .iter()
                .filter(|(_, l)| (l.broken || l.fenced_at.is_some()) && !l.unlisted && l.next > 3)
                .map(|(&id, _)| id)
                .collect();
            if !done.is_empty() {
                self.catch_up = Some((done[rng.below(done.len() as u64) as usize], 0));
            }
        }
        let ledger = ids[rng.below(ids.len() as u64) as usize];
        let l = self.ledgers.get_mut(&ledger).expect("picked");
        if l.unlisted {
            // Only reads of a deleted ledger: it must stay deleted.
            let entry = rng.below(l.next.max(1) as u64) as i64;
            return Some((read(ledger, entry, None), self_read(ledger, entry, false)));
        }
        let roll = rng.below(100);
        match roll {
            // Adds by the writer (the common case).
            0..=54 if !l.broken && l.fenced_at.is_none() && l.in_flight < 8 => {
                let entry = l.next;
                l.next += 1;
                let lac = l.contiguous();
                let body = entry_body(ledger, entry, lac, rng, max_body);
                l.bodies.insert(entry, body.clone());
                l.lac_vouched = l.lac_vouched.max(lac);
                l.in_flight += 1;
                // Some with DEFERRED_SYNC: this bookie syncs them all the same, so they must
                // survive a crash like any other acknowledged add.
                let write_flags = rng.chance(0.2).then_some(1);
                Some(add(ledger, entry, l.key.clone(), body, false, write_flags))
            }
            // A zombie writer: an add to a fenced ledger (must be refused).
            55..=57 if l.fenced_at.is_some() && l.next > 0 => {
                let entry = l.next;
                l.next += 1;
                let body = entry_body(ledger, entry, -1, rng, max_body);
                l.bodies.insert(entry, body.clone());
                l.in_flight += 1;
                Some(add(ledger, entry, l.key.clone(), body, false, None))
            }
            // Recovery: an entry written before, added again with the recovery flag.
            58..=61 if l.fence_asked && !l.bodies.is_empty() => {
                let keys: Vec<i64> = l.bodies.keys().copied().collect();
                let entry = keys[rng.below(keys.len() as u64) as usize];
                let body = l.bodies[&entry].clone();
                if let Some((_, _, lac)) = body_ids(&body) {
                    l.lac_vouched = l.lac_vouched.max(lac);
                }
                l.in_flight += 1;
                Some(add(ledger, entry, l.key.clone(), body, true, None))
            }
            62..=63 if !l.acked.is_empty() => {
                let entry = l.next;
                let mut key = l.key.to_vec();
                key[0] ^= 0xff;
                let body = entry_body(ledger, entry, -1, rng, 64);
                l.in_flight += 1;
                let (req, _) = add(ledger, entry, Bytes::from(key), body, false, None);
                Some((req, Asked::BadKey { ledger, entry }))
            }
            // Fencing (recovery's first step), after a writer broke or at random.
            64..=66 if l.broken || rng.chance(0.2) => {
                l.fence_asked = true;
                l.in_flight += 1;
                let entry = l.contiguous() + 1;
                let req = Request::ReadEntry {
                    ledger_id: ledger,
                    entry_id: entry,
                    master_key: Some(l.key.clone()),
                    flag: Some(ReadFlag::FenceLedger),
                    previous_lac: None,
                    time_out: None,
                };
                Some((req, Asked::Fence { ledger, entry }))
            }
            67..=71 if v3 => {
                let previous_lac = l.contiguous().max(-1) - rng.below(2) as i64;
                let req = Request::ReadEntry {
                    ledger_id: ledger,
                    entry_id: previous_lac + 1,
                    master_key: None,
                    flag: None,
                    previous_lac: Some(previous_lac),
                    time_out: Some(rng.range(1, 2000) as i64),
                };
                Some((
                    req,
                    Asked::LongPoll {
                        ledger,
                        previous_lac,
                    },
                ))
            }
            72..=75 if !v3 && l.next > 0 => {
                let start = rng.below(l.next as u64) as i64;
                let must_exist = l.acked.contains(&start) && l.collected_at.is_none();
                let req = Request::BatchReadEntry {
                    ledger_id: ledger,
                    start_entry_id: start,
                    request_id: rng.below(1 << 40) as i64,
                    max_count: rng.range(1, 40) as i32,
                    max_size: rng.range(1024, 256 << 10) as i64,
                    fence: false,
                    master_key: None,
                };
                Some((
                    req,
                    Asked::Batch {
                        ledger,
                        start,
                        must_exist,
                    },
                ))
            }
            76..=79 if v3 => {
                let acked_max = l.acked.iter().next_back().copied();
                Some((
                    Request::ReadLac { ledger_id: ledger },
                    Asked::ReadLac { ledger, acked_max },
                ))
            }
            80..=81 if v3 && !l.broken && l.fenced_at.is_none() => {
                let lac = l.contiguous();
                l.lac_vouched = l.lac_vouched.max(lac);
                let mut body = BytesMut::with_capacity(16);
                body.put_i64(ledger);
                body.put_i64(lac);
                l.in_flight += 1;
                let req = Request::WriteLac {
                    ledger_id: ledger,
                    lac,
                    master_key: l.key.clone(),
                    body: body.freeze(),
                };
                Some((req, Asked::WriteLac { ledger, lac }))
            }
            82 if v3 => Some((
                Request::ForceLedger { ledger_id: ledger },
                Asked::Force { ledger },
            )),
            // Deletion: ZooKeeper no longer lists it (the writer is done with it).
            // (Not while a request that may recreate it can still reach the bookie: a Java
            // bookie, like this one, recreates a ledger an add arrives for after its deletion.)
            83 if l.in_flight == 0
                && l.limbo == 0
                && (l.broken || l.fenced_at.is_some() || rng.chance(0.1)) =>
            {
                l.unlisted = true;
                self.counts.deleted += 1;
                None
            }
            // Reads: mostly entries the writer was told are stored, some never written.
            _ if l.next > 0 || rng.chance(0.1) => {
                let entry = if rng.chance(0.9) && l.next > 0 {
                    rng.below(l.next as u64) as i64
                } else {
                    l.next + rng.below(3) as i64
                };
                let must_exist = l.acked.contains(&entry) && l.collected_at.is_none();
                Some((
                    read(ledger, entry, None),
                    self_read(ledger, entry, must_exist),
                ))
            }
            _ => None,
        }
    }

    /// Records a request sent.
    pub fn sent(&mut self, conn: u64, id: RequestId, asked: Asked, now: u64, timeout_us: u64) {
        let l = &self.ledgers[&asked.ledger()];
        let flight = InFlight {
            floor_at_send: l.lac_floor,
            collected_before: l.collected_at.is_some(),
            asked,
            sent_at: now,
            deadline: now + timeout_us + ANSWER_BOUND_US,
        };
        self.in_flight.insert((conn, id), flight);
    }

    /// The request could not be sent: undo its bookkeeping.
    pub fn not_sent(&mut self, asked: &Asked) {
        if asked.creates() {
            let l = self.ledgers.get_mut(&asked.ledger()).expect("known");
            l.in_flight = l.in_flight.saturating_sub(1);
            l.broken = true;
        }
    }

    /// The connection closed (or the bookie restarted): its requests' outcomes are unknown.
    pub fn conn_lost(&mut self, conn: u64) {
        let lost: Vec<(u64, RequestId)> = self
            .in_flight
            .range((conn, RequestId(0))..=(conn, RequestId(u64::MAX)))
            .map(|(k, _)| *k)
            .collect();
        for k in lost {
            let f = self.in_flight.remove(&k).expect("listed");
            self.counts.unknown += 1;
            if f.asked.creates() {
                let l = self.ledgers.get_mut(&f.asked.ledger()).expect("known");
                l.in_flight = l.in_flight.saturating_sub(1);
                l.limbo += 1;
                l.broken = true;
            }
        }
    }

    /// The bookie restarted: nothing it had received before is still on its way.
    pub fn restarted(&mut self) {
        for l in self.ledgers.values_mut() {
            l.limbo = 0;
        }
    }

    /// Garbage collection dropped these ledgers from the bookie's memory: only ledgers
    /// ZooKeeper no longer lists.
    pub fn deleted(&mut self, ids: &BTreeSet<u64>) -> Result<(), Violation> {
        for &id in ids {
            match self.ledgers.get(&(id as i64)) {
                Some(l) if l.unlisted => {}
                _ => {
                    return Err(Violation(format!(
                        "gc deleted ledger {id}, which ZooKeeper still lists"
                    )))
                }
            }
        }
        Ok(())
    }

    /// These ledgers' deletions are durable: they must stay deleted.
    pub fn collected(&mut self, ids: &BTreeSet<u64>, now: u64) -> Result<(), Violation> {
        for &id in ids {
            let Some(l) = self.ledgers.get_mut(&(id as i64)) else {
                return Err(Violation(format!(
                    "gc deleted ledger {id}, which no client ever used"
                )));
            };
            if !l.unlisted {
                return Err(Violation(format!(
                    "gc deleted ledger {id}, which ZooKeeper still lists"
                )));
            }
            l.collected_at.get_or_insert(now);
        }
        Ok(())
    }

    /// Judges a reply.
    pub fn reply(
        &mut self,
        conn: u64,
        id: RequestId,
        response: &Response,
        now: u64,
    ) -> Result<(), Violation> {
        let Some(f) = self.in_flight.remove(&(conn, id)) else {
            return Err(Violation(format!(
                "conn {conn}: a reply to request {id:?}, which is not in flight: {response:?}"
            )));
        };
        let ledger = f.asked.ledger();
        let l = self.ledgers.get_mut(&ledger).expect("known ledger");
        if f.asked.creates() {
            l.in_flight = l.in_flight.saturating_sub(1);
        }
        // A ledger ZooKeeper no longer lists may be collected at any moment: what was acked
        // need not be found any more (but must not come back once collected).
        let must_exist_now = !l.unlisted;
        let bad = |what: String| Err(Violation(format!("ledger {ledger}: {what}")));
        let check_body = |l: &LedgerModel, entry: i64, body: &Bytes| -> Result<(), Violation> {
            match l.bodies.get(&entry) {
                Some(b) if b == body => Ok(()),
                Some(_) => Err(Violation(format!(
                    "ledger {ledger} entry {entry}: a body other than the one written ({:?})",
                    body_ids(body)
                ))),
                None => Err(Violation(format!(
                    "ledger {ledger} entry {entry}: read back but never written ({:?})",
                    body_ids(body)
                ))),
            }
        };
        let check_lac = |l: &LedgerModel, lac: i64, f: &InFlight| -> Result<(), Violation> {
            if l.collected_at.is_some() || f.collected_before || l.unlisted {
                return Ok(());
            }
            if lac > l.lac_vouched {
                return Err(Violation(format!(
                    "ledger {ledger}: LAC {lac} passes what its writer vouched for ({})",
                    l.lac_vouched
                )));
            }
            if lac < f.floor_at_send {
                return Err(Violation(format!(
                    "ledger {ledger}: LAC {lac} went back below {} (carried by an acknowledged record)",
                    f.floor_at_send
                )));
            }
            Ok(())
        };
        match (&f.asked, response) {
            (
                &Asked::Add {
                    entry, recovery, ..
                },
                Response::AddEntry {
                    status,
                    entry_id,
                    ledger_id,
                },
            ) => {
                if (*ledger_id, *entry_id) != (ledger, entry) {
                    return bad(format!(
                        "add of {entry} answered for {ledger_id}/{entry_id}"
                    ));
                }
                match *status {
                    StatusCode::EOK => {
                        if let Some(at) = l.fenced_at {
                            if !recovery && f.sent_at > at {
                                return bad(format!(
                                    "entry {entry}: an add sent after the fence was acknowledged"
                                ));
                            }
                        }
                        l.acked.insert(entry);
                        if let Some((_, _, lac)) = body_ids(&l.bodies[&entry]) {
                            l.lac_floor = l.lac_floor.max(lac);
                        }
                        self.counts.adds_acked += 1;
                    }
                    StatusCode::EFENCED if !l.fence_asked => {
                        return bad(format!("entry {entry}: EFENCED, but nobody fenced it"));
                    }
                    _ => {
                        self.counts.adds_failed += 1;
                        if !recovery {
                            l.broken = true;
                        }
                    }
                }
            }
            (&Asked::BadKey { entry, .. }, Response::AddEntry { status, .. }) => {
                if *status == StatusCode::EOK {
                    return bad(format!(
                        "entry {entry}: an add with a wrong master key acknowledged"
                    ));
                }
            }
            (
                &Asked::Read {
                    entry, must_exist, ..
                },
                Response::ReadEntry {
                    status,
                    entry_id,
                    body,
                    max_lac,
                    ..
                },
            ) => {
                if *entry_id != entry {
                    return bad(format!("read of {entry} answered for entry {entry_id}"));
                }
                match (*status, body) {
                    (StatusCode::EOK, Some(body)) => {
                        if l.collected_at.is_some() && f.collected_before {
                            return bad(format!(
                                "entry {entry} read back after gc deleted the ledger"
                            ));
                        }
                        check_body(l, entry, body)?;
                        self.counts.reads_ok += 1;
                    }
                    (StatusCode::ENOENTRY | StatusCode::ENOLEDGER, _)
                        if must_exist && must_exist_now =>
                    {
                        return bad(format!("entry {entry}: acknowledged, now {status:?}"));
                    }
                    (StatusCode::EIO, _) if must_exist && must_exist_now && !self.read_faults => {
                        return bad(format!("entry {entry}: acknowledged, now EIO"));
                    }
                    _ => {}
                }
                if let Some(lac) = max_lac {
                    check_lac(l, *lac, &f)?;
                }
            }
            (
                &Asked::LongPoll { .. },
                Response::ReadEntry {
                    status,
                    max_lac,
                    body,
                    entry_id,
                    ..
                },
            ) => {
                self.counts.long_polls += 1;
                if *status == StatusCode::EOK {
                    if let Some(lac) = max_lac {
                        check_lac(l, *lac, &f)?;
                    }
                    if let Some(body) = body {
                        check_body(l, *entry_id, body)?;
                    }
                }
            }
            (
                &Asked::Fence { .. },
                Response::ReadEntry {
                    status,
                    body,
                    entry_id,
                    ..
                },
            ) => match *status {
                StatusCode::EOK | StatusCode::ENOENTRY | StatusCode::ENOLEDGER => {
                    l.fenced_at.get_or_insert(now);
                    self.counts.fences += 1;
                    if let Some(body) = body {
                        check_body(l, *entry_id, body)?;
                    }
                }
                _ => {}
            },
            (
                &Asked::Batch {
                    start, must_exist, ..
                },
                Response::BatchReadEntry {
                    status,
                    start_entry_id,
                    entries,
                    ..
                },
            ) => {
                if *start_entry_id != start {
                    return bad(format!(
                        "batch read from {start} answered from {start_entry_id}"
                    ));
                }
                self.counts.batch_reads += 1;
                if *status == StatusCode::EOK {
                    for (i, body) in entries.iter().enumerate() {
                        check_body(l, start + i as i64, body)?;
                    }
                } else if must_exist
                    && must_exist_now
                    && !(self.read_faults && *status == StatusCode::EIO)
                {
                    return bad(format!(
                        "batch read from acknowledged entry {start}: {status:?}"
                    ));
                }
            }
            (
                &Asked::ReadLac { acked_max, .. },
                Response::ReadLac {
                    status,
                    lac_body,
                    last_entry_body,
                    ..
                },
            ) => {
                self.counts.lac_reads += 1;
                let gone = l.collected_at.is_some() || f.collected_before || l.unlisted;
                if *status == StatusCode::EOK {
                    if let Some(body) = last_entry_body {
                        let Some((_, entry, _)) = body_ids(body) else {
                            return bad("READ_LAC: a last entry without a header".into());
                        };
                        check_body(l, entry, body)?;
                        if let (Some(max), false) = (acked_max, gone) {
                            if entry < max {
                                return bad(format!(
                                    "READ_LAC: last entry {entry} below acknowledged {max}"
                                ));
                            }
                        }
                    } else if acked_max.is_some() && !gone && !self.read_faults {
                        return bad(
                            "READ_LAC without the last entry of a ledger with acknowledged entries"
                                .into(),
                        );
                    }
                    if let Some(b) = lac_body {
                        if let Some(lac) = b
                            .get(8..16)
                            .map(|x| i64::from_be_bytes(x.try_into().expect("8")))
                        {
                            if lac > l.lac_vouched {
                                return bad(format!("explicit LAC {lac} never written"));
                            }
                        }
                    }
                } else if acked_max.is_some() && !gone && !self.read_faults {
                    return bad(format!(
                        "READ_LAC of a ledger with acknowledged entries: {status:?}"
                    ));
                }
            }
            (&Asked::WriteLac { lac, .. }, Response::WriteLac { status, .. }) => {
                if *status == StatusCode::EOK {
                    l.lac_floor = l.lac_floor.max(lac);
                }
            }
            (&Asked::Force { .. }, Response::ForceLedger { .. }) => {}
            (_, Response::Error { .. }) => {}
            (asked, other) => {
                return bad(format!("{asked:?} answered with {other:?}"));
            }
        }
        Ok(())
    }

    /// A request waiting past its bound on a live connection.
    pub fn overdue(&self, now: u64) -> Option<Violation> {
        self.in_flight
            .iter()
            .find(|(_, f)| now > f.deadline)
            .map(|((conn, id), f)| {
                Violation(format!(
                    "conn {conn} request {id:?} ({:?}) unanswered for {} ms",
                    f.asked,
                    (now - f.sent_at) / 1000
                ))
            })
    }
}

/// A writer's add and what the model must judge its reply by (an add with a wrong key keeps
/// the request and is judged as [`Asked::BadKey`] instead).
fn add(
    ledger: i64,
    entry: i64,
    master_key: Bytes,
    body: Bytes,
    recovery: bool,
    write_flags: Option<i32>,
) -> (Request, Asked) {
    let request = Request::AddEntry {
        ledger_id: ledger,
        entry_id: entry,
        master_key,
        body,
        recovery,
        write_flags,
    };
    (
        request,
        Asked::Add {
            ledger,
            entry,
            recovery,
        },
    )
}

fn read(ledger: i64, entry: i64, previous_lac: Option<i64>) -> Request {
    Request::ReadEntry {
        ledger_id: ledger,
        entry_id: entry,
        master_key: None,
        flag: None,
        previous_lac,
        time_out: None,
    }
}

fn self_read(ledger: i64, entry: i64, must_exist: bool) -> Asked {
    Asked::Read {
        ledger,
        entry,
        must_exist,
    }
}

/// The final read-back after the run: every acknowledged entry of every ledger not deleted,
/// as requests for the checker.
pub fn read_back(model: &Model) -> Vec<(Request, Asked)> {
    let mut out = Vec::new();
    for (&ledger, l) in &model.ledgers {
        if l.unlisted {
            continue;
        }
        for &entry in &l.acked {
            out.push((read(ledger, entry, None), self_read(ledger, entry, true)));
        }
    }
    out
}
