//! The read side: single and batch reads, and tailing long polls behind the writer.

use super::*;

impl Engine {
    pub(super) fn issue_read(&mut self, intended: u64, now: u64) -> bool {
        let Some(cfg) = self.read_cfg.clone() else {
            return false;
        };
        let n = self.ledgers.len();
        let side = self.read.as_mut().expect("read side with a read config");
        let measured = intended >= self.warmup_ns && intended < self.end_ns;
        let (ledger, entry, count) = match cfg.pattern {
            ReadPattern::Sequential { batch } => {
                let mut found = None;
                for _ in 0..n {
                    let i = side.next_ledger % n;
                    side.next_ledger += 1;
                    let l = &mut self.ledgers[i];
                    if l.lac < 0 {
                        continue;
                    }
                    if l.read_cursor > l.lac {
                        l.read_cursor = 0; // caught up: start over (catch-up reads again)
                        if measured {
                            side.result.restarts += 1;
                        }
                    }
                    let e = l.read_cursor;
                    let count = (batch.max(1) as i64).min(l.lac - e + 1);
                    l.read_cursor += count;
                    found = Some((i, e, count as u32));
                    break;
                }
                match found {
                    Some(f) => f,
                    None => return false,
                }
            }
            ReadPattern::Random => {
                let i = self.rng.below(n as u64) as usize;
                let l = &self.ledgers[i];
                if l.lac < 0 {
                    return false;
                }
                (i, self.rng.below(l.lac as u64 + 1) as i64, 1)
            }
            ReadPattern::Tailing { .. } => return false,
        };
        let slot = self.alloc(Op {
            kind: OpKind::Read {
                ledger: ledger as u32,
                entry,
                count,
            },
            side: SideId::Read,
            intended,
            sent: now,
            replies_left: 1,
            decided: false,
            measured,
            preload: false,
            generation: 0,
            live: true,
        });
        let generation = self.ops[slot as usize].generation;
        let l = &self.ledgers[ledger];
        let e = l.ensemble.len();
        let member = write_set(entry, e, 1).next().unwrap_or(0);
        let conn = self.conn_index(l.ensemble[member], ledger);
        let request = if count > 1 {
            Request::BatchReadEntry {
                ledger_id: l.id,
                start_entry_id: entry,
                request_id: i64::from(slot) << 20 | i64::from(generation & 0xFFFFF),
                max_count: count as i32,
                max_size: 64 << 20,
                fence: false,
                master_key: None,
            }
        } else {
            Request::ReadEntry {
                ledger_id: l.id,
                entry_id: entry,
                master_key: None,
                flag: None,
                previous_lac: None,
                time_out: None,
            }
        };
        let v2 = self.protocol == Protocol::V2;
        self.read.as_mut().expect("read side").outstanding += 1;
        let tag = Tag {
            slot,
            generation,
            member: member as u8,
        };
        if !self.send(conn, request, v2, tag) {
            self.ops[slot as usize].replies_left = 0;
            self.why = "send failed";
            self.decide(slot, false, now, 0, 0);
        }
        true
    }

    pub(super) fn issue_polls(&mut self, now: u64) {
        let Some(ReadPattern::Tailing { poll_timeout_ms }) =
            self.read_cfg.as_ref().map(|r| r.pattern)
        else {
            return;
        };
        for i in 0..self.ledgers.len() {
            let l = &self.ledgers[i];
            if l.polling || l.poll_wait {
                continue;
            }
            let (id, prev, ensemble) = (l.id, l.tail_seen, l.ensemble.clone());
            let slot = self.alloc(Op {
                kind: OpKind::Poll { ledger: i as u32 },
                side: SideId::Read,
                intended: now,
                sent: now,
                replies_left: 1,
                decided: false,
                measured: false,
                preload: false,
                generation: 0,
                live: true,
            });
            let generation = self.ops[slot as usize].generation;
            // Java sends long polls to the whole ensemble; one member is enough to follow.
            let member = write_set(prev + 1, ensemble.len(), 1).next().unwrap_or(0);
            let conn = self.conn_index(ensemble[member], i);
            let request = Request::ReadEntry {
                ledger_id: id,
                entry_id: -1,
                master_key: None,
                flag: Some(ReadFlag::EntryPiggyback),
                previous_lac: Some(prev),
                time_out: Some(poll_timeout_ms),
            };
            let tag = Tag {
                slot,
                generation,
                member: member as u8,
            };
            // Long polls exist only in v3 (a v2 client turns them into plain reads).
            if self.send(conn, request, false, tag) {
                self.ledgers[i].polling = true;
            } else {
                self.release(slot);
            }
        }
    }

    pub(super) fn poll_reply(&mut self, slot: u32, frame: &ResponseFrame, now: u64) {
        let OpKind::Poll { ledger } = self.ops[slot as usize].kind else {
            return;
        };
        let ledger = ledger as usize;
        self.release(slot);
        self.ledgers[ledger].polling = false;
        let verify = self.read_cfg.as_ref().is_some_and(|r| r.verify);
        let Response::ReadEntry {
            status,
            entry_id,
            ref body,
            ..
        } = frame.response
        else {
            self.read
                .as_mut()
                .expect("read side")
                .result
                .error("unexpected reply");
            return;
        };
        if status != StatusCode::EOK {
            if status != StatusCode::ENOLEDGER && status != StatusCode::ENOENTRY {
                self.read
                    .as_mut()
                    .expect("read side")
                    .result
                    .error(status_name(status));
            }
            return;
        }
        let l = &mut self.ledgers[ledger];
        if entry_id < 0 || body.is_none() {
            return; // only the LAC: poll again
        }
        if entry_id != l.tail_seen + 1 || entry_id >= l.next_entry {
            l.poll_wait = true; // ahead of the writer (the sink): wait for the next add
            return;
        }
        let ok = !verify
            || body
                .as_ref()
                .is_some_and(|b| verify_entry(b, self.digest, l.id, entry_id).is_ok());
        l.tail_seen = entry_id;
        let times = entry_id
            .checked_sub(l.times_base)
            .and_then(|i| l.times.get(i as usize).copied());
        while l.times_base <= entry_id && !l.times.is_empty() {
            l.times.pop_front();
            l.times_base += 1;
        }
        let (warmup, end) = (self.warmup_ns, self.end_ns);
        let side = self.read.as_mut().expect("read side");
        if !ok {
            side.result.error("bad entry");
            return;
        }
        if let Some((intended, sent)) = times {
            if intended >= warmup && intended < end {
                side.result.ops_ok += 1;
                side.result.entries += 1;
                side.result.bytes += body.as_ref().map_or(0, |b| b.len() as u64);
                side.result.record(
                    Latency::of(intended, sent, now),
                    now.min(end.saturating_sub(1)).saturating_sub(warmup),
                );
            }
        }
    }

    pub(super) fn read_reply(&mut self, slot: u32, frame: &ResponseFrame, now: u64) {
        let op = self.ops[slot as usize];
        let OpKind::Read {
            ledger,
            entry,
            count,
        } = op.kind
        else {
            return;
        };
        let verify = self.read_cfg.as_ref().is_some_and(|r| r.verify);
        let id = self.ledgers[ledger as usize].id;
        let check = |b: &Bytes, e: i64| !verify || verify_entry(b, self.digest, id, e).is_ok();
        let (ok, bytes, entries) = match &frame.response {
            Response::ReadEntry {
                status: StatusCode::EOK,
                body: Some(b),
                ..
            } => (check(b, entry), b.len() as u64, 1),
            Response::BatchReadEntry {
                status: StatusCode::EOK,
                entries,
                ..
            } => {
                let ok = !entries.is_empty()
                    && entries.len() <= count as usize
                    && entries
                        .iter()
                        .enumerate()
                        .all(|(i, b)| check(b, entry + i as i64));
                (
                    ok,
                    entries.iter().map(|b| b.len() as u64).sum(),
                    entries.len() as u64,
                )
            }
            _ => (false, 0, 0),
        };
        self.why = match frame.response.status() {
            StatusCode::EOK => "bad entry",
            other => status_name(other),
        };
        self.ops[slot as usize].replies_left = 0;
        self.decide(slot, ok, now, bytes, entries);
    }
}
