//! Copying a fragment's entries to the bookies that replace its lost ones.
//!
//! Unlike Java's worker, which reads each entry through a client, re-packages it with a new
//! digest and its own LAC and sends it to every new bookie, this copies the entry *as stored*
//! (a packaged entry is self-describing and its digest stays valid), reads a batch of
//! `rereplicationEntryBatchSize` entries from one surviving replica in one pipelined request,
//! and writes to each new bookie only the entries that bookie's index holds. Every add is a
//! recovery add with the ledger's master key.
//!
//! Batches are pipelined: while one batch's adds wait for the target's journal, the next
//! batches are read. Java keeps one batch in flight, so a copy there costs a read and a
//! durable write per batch; here up to [`MAX_BATCHES_IN_FLIGHT`] batches, and at most
//! [`MAX_BYTES_IN_FLIGHT`] bytes, move at once, and the bytes per second are bounded
//! ([`Throttle`]) so healing never crowds the bookies' live traffic.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use bytes::Bytes;

use crate::fragments::Fragment;
use crate::port::{Cluster, Registered};
use crate::schedule;

/// Batches of one fragment's copy in flight at once, at most.
pub const MAX_BATCHES_IN_FLIGHT: usize = 16;
/// Bytes of one fragment's copy in flight at once, at most (beyond the first batch).
pub const MAX_BYTES_IN_FLIGHT: u64 = 16 << 20;

/// What a copy moved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CopyStats {
    pub entries: u64,
    pub bytes: u64,
}

/// A bytes-per-second bound over the cluster's clock, shared by the batches in flight: each
/// reserves its bytes' slot, then waits for it.
#[derive(Debug)]
pub struct Throttle {
    rate: u64,
    next_ms: Cell<i64>,
}

impl Throttle {
    pub fn new(rate_bytes_per_sec: u64) -> Throttle {
        Throttle {
            rate: rate_bytes_per_sec.max(1),
            next_ms: Cell::new(0),
        }
    }

    /// Takes `bytes` of the budget, waiting until they fit.
    pub async fn take<C: Cluster>(&self, c: &C, bytes: u64) {
        let now = c.now_ms();
        let start = self.next_ms.get().max(now);
        self.next_ms
            .set(start + (bytes.saturating_mul(1000) / self.rate) as i64);
        if start > now {
            c.sleep_ms((start - now) as u64).await;
        }
    }
}

/// The work of one fragment: `targets[index]` is the new bookie of bad index `index`.
pub struct Plan<'a> {
    pub ledger: u64,
    pub master_key: [u8; 20],
    pub fragment: &'a Fragment,
    pub targets: &'a BTreeMap<usize, String>,
    pub write_quorum: usize,
}

type BatchFuture<'a> = Pin<Box<dyn Future<Output = Result<CopyStats, String>> + 'a>>;

/// Copies every entry of the fragment that a bad index stores to that index's new bookie.
pub async fn copy_fragment<C: Cluster>(
    c: &C,
    plan: &Plan<'_>,
    registered: &Registered,
    batch: usize,
    throttle: &Throttle,
) -> Result<CopyStats, String> {
    let f = plan.fragment;
    let e = f.ensemble.len();
    let w = plan.write_quorum;
    debug_assert!(plan.targets.keys().all(|i| f.bad.contains(i)));
    // Entries some bad index stores, in order.
    let wanted: Vec<i64> = (f.first..=f.last)
        .filter(|&entry| {
            plan.targets
                .keys()
                .any(|&i| schedule::stores(i, entry, e, w))
        })
        .collect();
    let mut stats = CopyStats::default();
    let mut chunks = wanted.chunks(batch.max(1));
    let mut in_flight: VecDeque<(BatchFuture<'_>, Option<Result<CopyStats, String>>)> =
        VecDeque::new();
    // One batch until a batch's size is known, then as many as the bounds allow.
    let mut depth = 1usize;
    loop {
        while in_flight.len() < depth {
            let Some(chunk) = chunks.next() else { break };
            in_flight.push_back((
                Box::pin(copy_batch(c, plan, registered, chunk, throttle)),
                None,
            ));
        }
        if in_flight.is_empty() {
            break;
        }
        let done = next_in_order(&mut in_flight).await?;
        stats.entries += done.entries;
        stats.bytes += done.bytes;
        if let Some(per_batch) = MAX_BYTES_IN_FLIGHT.checked_div(done.bytes) {
            depth = per_batch.clamp(1, MAX_BATCHES_IN_FLIGHT as u64) as usize;
        }
    }
    Ok(stats)
}

/// Polls every batch in flight; returns the oldest one's result once it has one (the others
/// keep their results until their turn).
async fn next_in_order<'a>(
    in_flight: &mut VecDeque<(BatchFuture<'a>, Option<Result<CopyStats, String>>)>,
) -> Result<CopyStats, String> {
    std::future::poll_fn(|cx| {
        for (fut, out) in in_flight.iter_mut() {
            if out.is_none() {
                if let Poll::Ready(r) = fut.as_mut().poll(cx) {
                    *out = Some(r);
                }
            }
        }
        match in_flight.front_mut() {
            Some((_, out @ Some(_))) => {
                let r = out.take().expect("checked");
                in_flight.pop_front();
                Poll::Ready(r)
            }
            _ => Poll::Pending,
        }
    })
    .await
}

/// One batch: read from surviving replicas, then added to each target it belongs to.
async fn copy_batch<C: Cluster>(
    c: &C,
    plan: &Plan<'_>,
    registered: &Registered,
    chunk: &[i64],
    throttle: &Throttle,
) -> Result<CopyStats, String> {
    let f = plan.fragment;
    let (e, w) = (f.ensemble.len(), plan.write_quorum);
    let bodies = read_batch(c, plan, registered, chunk).await?;
    let mut to: BTreeMap<&str, Vec<(i64, Bytes)>> = BTreeMap::new();
    let mut bytes = 0u64;
    for (&entry, body) in chunk.iter().zip(&bodies) {
        bytes += body.len() as u64;
        for (&i, target) in plan.targets {
            if schedule::stores(i, entry, e, w) {
                to.entry(target.as_str())
                    .or_default()
                    .push((entry, body.clone()));
            }
        }
    }
    throttle.take(c, bytes).await;
    let mut entries = 0;
    for (target, adds) in to {
        let n = adds.len() as u64;
        let results = c
            .recovery_add(target, plan.ledger, &plan.master_key, adds)
            .await;
        if let Some(Err(err)) = results.iter().find(|r| r.is_err()) {
            return Err(format!(
                "ledger {}: a recovery add to {target} failed: {}",
                plan.ledger, err.0
            ));
        }
        entries += n;
    }
    Ok(CopyStats { entries, bytes })
}

/// The entries of `chunk`, each from a replica that is not bad: one pipelined read per source
/// bookie, then each entry a read failed for from the next replica of its write set.
async fn read_batch<C: Cluster>(
    c: &C,
    plan: &Plan<'_>,
    registered: &Registered,
    chunk: &[i64],
) -> Result<Vec<Bytes>, String> {
    let f = plan.fragment;
    let e = f.ensemble.len();
    let w = plan.write_quorum;
    let sources = |entry: i64| -> Vec<usize> {
        schedule::write_set(entry, e, w)
            .into_iter()
            .filter(|i| !f.bad.contains(i) && registered.is_available(&f.ensemble[*i]))
            .collect()
    };
    let mut got: Vec<Option<Bytes>> = vec![None; chunk.len()];
    let mut tried: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); chunk.len()];
    loop {
        // Each entry still missing goes to the first replica not tried yet.
        let mut by_source: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (k, &entry) in chunk.iter().enumerate() {
            if got[k].is_some() {
                continue;
            }
            match sources(entry).into_iter().find(|i| !tried[k].contains(i)) {
                Some(i) => by_source.entry(i).or_default().push(k),
                None => {
                    return Err(format!(
                        "ledger {}: entry {entry} cannot be read from any surviving replica",
                        plan.ledger
                    ))
                }
            }
        }
        if by_source.is_empty() {
            break;
        }
        for (src, ks) in by_source {
            let entries: Vec<i64> = ks.iter().map(|&k| chunk[k]).collect();
            let results = c
                .read_entries(&f.ensemble[src], plan.ledger, &entries)
                .await;
            for (j, &k) in ks.iter().enumerate() {
                tried[k].insert(src);
                if let Some(Ok(body)) = results.get(j) {
                    got[k] = Some(body.clone());
                }
            }
        }
    }
    Ok(got
        .into_iter()
        .map(|b| b.expect("every entry read"))
        .collect())
}
