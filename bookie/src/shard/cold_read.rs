//! The shard's side of a read that misses the write cache: park it on a read-ahead run on its
//! way, ask for a run, or hand it to a reader thread (`crate::read`); answer the reads parked on
//! a run when it lands.

use super::*;

/// How a disk read reaches [`Shard::read_disk_via`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Via {
    /// From a request.
    Request,
    /// Parked on a run that landed, which ended before `end` (`None`: it brought nothing). A
    /// read of an entry the run held that still misses (a second read of an entry taken by
    /// the first, or one evicted since) goes to a reader: parking it again on a new run of the
    /// same entries would let a client that repeats its reads starve the others. Only a read
    /// past the run may wait for the next one.
    Run { end: Option<u64> },
    /// Parked on a run that did not land in time.
    Late,
}

/// How long a read waits in the shard for a read-ahead run (`run_waits`) before it goes to a
/// reader by itself. A run is one device read; this only bounds a reader that never reports.
pub(super) const RUN_WAIT_DEADLINE: Duration = Duration::from_secs(2);

impl Shard {
    /// Hands a cache miss to the shard's reader thread (bounded queue: full means busy).
    pub(super) fn read_disk(&mut self, read: DiskRead, to: Responder) {
        self.read_disk_via(read, to, Via::Request);
    }

    /// As [`read_disk`](Self::read_disk), for a read that comes `via` a request, a run it was
    /// parked on, or a run that never landed.
    pub(super) fn read_disk_via(&mut self, read: DiskRead, to: Responder, via: Via) {
        // An entry read ahead by a reader: answered here, no hop to a reader thread. When it
        // starts a sequential reader's run, the run after it is read ahead meanwhile. A miss
        // that a run in flight will bring, or that continues the last run, waits here for
        // the run (`run_waits`) instead of crossing to a reader.
        if let (
            &DiskRead::Entry {
                ledger,
                entry,
                reply_entry_id,
                max_lac,
            },
            Some(cache),
        ) = (&read, &self.store.read_cache)
        {
            let (hit, next, follows) = {
                let mut cache = cache.lock().unwrap_or_else(|p| p.into_inner());
                let (hit, next) = cache.take_and_trigger(ledger as u64, entry as u64);
                let follows = hit.is_none() && cache.follows_run(ledger as u64, entry as u64);
                (hit, next, follows)
            };
            if let Some(body) = hit {
                if let Some(next) = next {
                    self.ask_run(ledger, next);
                }
                if via != Via::Request {
                    // It waited for the device: a cache-miss read as far as its latency goes.
                    self.m().stage(Stage::CacheMissRead, to.since());
                }
                let reply = read_thread::entry_reply(ledger, reply_entry_id, max_lac, Some(body));
                self.respond(to, reply);
                return;
            }
            let may_park = entry >= 0
                && match via {
                    Via::Request => true,
                    Via::Run { end } => end.is_some_and(|end| entry as u64 >= end),
                    Via::Late => false,
                };
            if may_park {
                let (l, e) = (ledger as u64, entry as u64);
                let parked = match self.run_waits.park(l, e, (read, to)) {
                    Ok(()) => Ok(()),
                    Err(back) if follows && self.ask_run(ledger, e) => {
                        self.run_waits.park(l, e, back)
                    }
                    Err(back) => Err(back),
                };
                match parked {
                    Ok(()) => {
                        self.m().read_ahead_waits.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                    Err((read, to)) => return self.send_to_reader(read, to),
                }
            }
        }
        self.send_to_reader(read, to);
    }

    /// Queues `read` for the shard's readers (full: ETOOMANYREQUESTS).
    pub(super) fn send_to_reader(&mut self, read: DiskRead, to: Responder) {
        let job = self.read_job(read, &to);
        if let Err(err) = self.store.read_jobs.try_send(job) {
            self.stats.rejected_busy += 1;
            let job = match err {
                crossbeam_channel::TrySendError::Full(j)
                | crossbeam_channel::TrySendError::Disconnected(j) => j,
            };
            let reply = read_thread::error_reply(&job.read, StatusCode::ETOOMANYREQUESTS);
            self.respond(to, reply);
        }
    }

    /// Asks a reader for the run of `ledger` from `start` (into the read-ahead cache), unless
    /// it is in flight already; true when it is in flight now. Best effort: a full queue means
    /// the readers have real reads to do.
    pub(super) fn ask_run(&mut self, ledger: i64, start: u64) -> bool {
        if self.run_waits.in_flight(ledger as u64, start) {
            return true;
        }
        let job = ReadJob {
            timing: 0,
            view: self.store.view.clone(),
            read: DiskRead::Prefetch {
                ledger,
                entry: start as i64,
                report: true,
            },
            // The report goes to this shard, which parks the reads, whoever holds their
            // connections; the run itself is for no connection.
            origin: self.id,
            conn_id: 0,
            conn: self.no_conn.clone(),
            header: ResponseHeader::V2 { version: 2 },
        };
        if self.store.read_jobs.try_send(job).is_err() {
            return false;
        }
        self.run_waits.asked(ledger as u64, start, now_us());
        true
    }

    /// A reader's report of a run asked by [`ask_run`](Self::ask_run): the reads parked on it
    /// are answered from the read-ahead cache, or go on to a reader ([`Via::Run`]: only a read
    /// past the run may wait again, for the next run).
    pub fn run_landed(&mut self, landed: RunLanded) {
        let reads = self
            .run_waits
            .landed(landed.ledger as u64, landed.start as u64);
        let via = Via::Run {
            end: (landed.entries > 0).then_some(landed.start as u64 + landed.entries as u64),
        };
        for (read, to) in reads {
            self.read_disk_via(read, to, via);
        }
    }

    /// Reads parked on a run that has not landed in `RUN_WAIT_DEADLINE` go to a reader.
    pub(super) fn expire_run_waits(&mut self) {
        if self.run_waits.is_empty() {
            return;
        }
        let deadline = now_us().saturating_sub(RUN_WAIT_DEADLINE.as_micros() as u64);
        for (read, to) in self.run_waits.expired(deadline) {
            self.read_disk_via(read, to, Via::Late);
        }
    }

    /// A reader thread's job for `read`, replying to `to`'s connection.
    pub(super) fn read_job(&self, read: DiskRead, to: &Responder) -> ReadJob {
        let (origin, conn_id, conn_state, header, timing) = match to {
            Responder::Local {
                conn,
                header,
                op,
                since,
            } => (
                self.id,
                conn.id,
                conn.shared().clone(),
                *header,
                crate::admin::metrics::pack_timing(*op, *since),
            ),
            Responder::Remote {
                origin,
                conn_id,
                shared,
                header,
                op,
                since,
            } => (
                *origin,
                *conn_id,
                shared.clone(),
                *header,
                crate::admin::metrics::pack_timing(*op, *since),
            ),
        };
        ReadJob {
            timing,
            view: self.store.view.clone(),
            read,
            origin,
            conn_id,
            conn: conn_state,
            header,
        }
    }
}
