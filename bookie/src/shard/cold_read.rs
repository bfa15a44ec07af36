//! The shard's side of a read that misses the write cache, as the read-ahead policy
//! (`crate::read::ahead`) decides it: answer it from the read-ahead cache, park it on a run on
//! its way, or hand it to a reader thread (`crate::read::read_thread`) as a single or a run
//! read; answer the reads parked on a run when it lands.

use super::*;
use crate::read::ahead::{Step, Via};

/// How long a read waits in the shard for a read-ahead run (`run_waits`) before it goes to a
/// reader by itself. A run is one device read; this only bounds a reader that never reports.
pub(super) const RUN_WAIT_DEADLINE: Duration = Duration::from_secs(2);

impl Shard {
    /// A read that missed the write cache, from a request.
    pub(super) fn read_disk(&mut self, read: DiskRead, to: Responder) {
        self.read_disk_via(read, to, Via::Request);
    }

    /// As [`read_disk`](Self::read_disk), for a read that comes `via` a request, a run it was
    /// parked on, or a run that never landed.
    fn read_disk_via(&mut self, read: DiskRead, to: Responder, via: Via) {
        let (ledger, entry) = match read {
            DiskRead::Entry { ledger, entry, .. } => (ledger, u64::try_from(entry).ok()),
            _ => (0, None),
        };
        let (jobs, view, id, no_conn) = (
            &self.store.read_jobs,
            &self.store.view,
            self.id,
            &self.no_conn,
        );
        let mut ask = |ledger: u64, start: u64| {
            let job = ReadJob {
                timing: 0,
                view: view.clone(),
                read: DiskRead::Prefetch {
                    ledger: ledger as i64,
                    entry: start as i64,
                },
                run: 1,
                shard: id,
                // The run goes to this shard, which parks the reads, whoever holds their
                // connections; the run itself is for no connection.
                origin: id,
                conn_id: 0,
                conn: no_conn.clone(),
                header: ResponseHeader::V2 { version: 2 },
            };
            // Best effort: a full queue means the readers have real reads to do.
            jobs.try_send(job).is_ok()
        };
        let step = self
            .read_ahead
            .miss(ledger as u64, entry, (read, to), via, now_us(), &mut ask);
        match step {
            Step::Hit {
                read: (read, to),
                body,
            } => {
                // From the read-ahead cache: a read of ledger storage, decoded → in hand.
                let now = self.m().read_entry(to.since(), true);
                if via != Via::Request {
                    // It waited for the device: a cache-miss read as far as its latency goes.
                    self.m()
                        .stage_between(Stage::CacheMissRead, to.since(), now);
                }
                match read {
                    DiskRead::Entry {
                        ledger,
                        reply_entry_id,
                        max_lac,
                        ..
                    } => {
                        let reply =
                            read_thread::entry_reply(ledger, reply_entry_id, max_lac, Some(body));
                        self.respond(to, reply);
                    }
                    // The policy hits only entry reads; anything else is read as asked.
                    other => self.send_to_reader(other, to, 1),
                }
            }
            Step::Parked => {
                self.m().read_ahead_waits.fetch_add(1, Ordering::Relaxed);
            }
            Step::Read {
                read: (read, to),
                run,
            } => {
                if matches!(read, DiskRead::Entry { .. }) {
                    // In neither cache: read from disk (Java's `read-cache-misses`).
                    self.m().read_cache_misses.fetch_add(1, Ordering::Relaxed);
                }
                self.send_to_reader(read, to, run)
            }
        }
    }

    /// Queues `read` for the shard's readers, `run` entries from it (full: ETOOMANYREQUESTS).
    fn send_to_reader(&mut self, read: DiskRead, to: Responder, run: usize) {
        let run_from = match read {
            DiskRead::Entry { ledger, entry, .. } if run > 1 => {
                Some((ledger as u64, entry as u64 + 1))
            }
            _ => None,
        };
        let mut job = self.read_job(read, &to);
        job.run = run;
        if let Err(err) = self.store.read_jobs.try_send(job) {
            self.stats.rejected_busy += 1;
            let job = match err {
                crossbeam_channel::TrySendError::Full(j)
                | crossbeam_channel::TrySendError::Disconnected(j) => j,
            };
            let reply = read_thread::error_reply(&job.read, StatusCode::ETOOMANYREQUESTS);
            self.respond(to, reply);
            if let Some((ledger, start)) = run_from {
                // The run will not land: the reads parked behind it go to a reader.
                self.run_landed(RunLanded {
                    ledger,
                    start,
                    bodies: Vec::new(),
                    trigger: None,
                    more: None,
                });
            }
        }
    }

    /// A run a reader read for this shard's read-ahead: into the cache, and the reads parked
    /// on it answered from there or sent on ([`Via::Run`]: only a read past the run may wait
    /// again, for the next run).
    pub fn run_landed(&mut self, run: RunLanded) {
        let (reads, via) = self.read_ahead.landed(run, now_us());
        for (read, to) in reads {
            self.read_disk_via(read, to, via);
        }
    }

    /// Reads parked on a run that has not landed in `RUN_WAIT_DEADLINE` go to a reader.
    pub(super) fn expire_run_waits(&mut self) {
        let deadline = now_us().saturating_sub(RUN_WAIT_DEADLINE.as_micros() as u64);
        for (read, to) in self.read_ahead.expired(deadline) {
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
            run: 1,
            shard: self.id,
            origin,
            conn_id,
            conn: conn_state,
            header,
        }
    }
}
