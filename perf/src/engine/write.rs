//! The write side: adds to the write set of each entry, decided at the ack quorum, and the
//! preload of the ledgers readers read.

use super::*;

impl Engine {
    pub(super) fn issue_add(
        &mut self,
        ledger: usize,
        intended: u64,
        now: u64,
        preload: bool,
    ) -> bool {
        let (size, wq, e) = match (&self.write_cfg, preload) {
            (Some(w), false) => (w.sizes.sample(&mut self.rng), w.write_quorum, w.ensemble),
            (Some(w), true) => (self.config.preload_size, w.write_quorum, w.ensemble),
            (None, _) => (self.config.preload_size, 1, 1),
        };
        let (wq, e) = (
            wq.min(self.ledgers[ledger].ensemble.len()),
            e.min(self.ledgers[ledger].ensemble.len()),
        );
        let l = &mut self.ledgers[ledger];
        let entry = l.next_entry;
        l.next_entry += 1;
        l.length += size as i64;
        l.decided.push_back(false);
        let header = EntryHeader {
            ledger_id: l.id,
            entry_id: entry,
            last_add_confirmed: l.lac,
            length: l.length,
        };
        if self.tailing {
            if l.times.is_empty() {
                l.times_base = entry;
            }
            l.times.push_back((intended, now));
            if l.times.len() > 1 << 20 {
                l.times.pop_front();
                l.times_base += 1;
            }
        }
        let body = build_entry(
            &header,
            self.digest,
            &self.payload[..size],
            &mut self.scratch,
        );
        let measured = !preload && intended >= self.warmup_ns && intended < self.end_ns;
        let slot = self.alloc(Op {
            kind: OpKind::Add {
                ledger: ledger as u32,
                entry,
                acks: AckSet::default(),
                size: size as u32,
            },
            side: SideId::Write,
            intended,
            sent: now,
            replies_left: 0,
            decided: false,
            measured,
            preload,
            generation: 0,
            live: true,
        });
        let generation = self.ops[slot as usize].generation;
        let v2 = self.protocol == Protocol::V2;
        let members: Vec<usize> = write_set(entry, e, wq).collect();
        let mut failed_members = Vec::new();
        for &member in &members {
            let bookie = self.ledgers[ledger].ensemble[member];
            let conn = self.conn_index(bookie, ledger);
            let request = Request::AddEntry {
                ledger_id: header.ledger_id,
                entry_id: entry,
                master_key: self.master_key.clone(),
                body: body.clone(),
                recovery: false,
                write_flags: None,
            };
            let tag = Tag {
                slot,
                generation,
                member: member as u8,
            };
            if self.send(conn, request, v2, tag) {
                self.ops[slot as usize].replies_left += 1;
            } else {
                failed_members.push(member);
            }
        }
        if let Some(side) = self.write.as_mut().filter(|_| !preload) {
            side.outstanding += 1;
        }
        for member in failed_members {
            self.why = "send failed";
            self.add_reply(slot, member, false, now);
        }
        true
    }

    pub(super) fn add_reply(&mut self, slot: u32, member: usize, ok: bool, now: u64) {
        let (wq, aq) = self
            .write_cfg
            .as_ref()
            .map_or((1, 1), |w| (w.write_quorum, w.ack_quorum));
        let op = &mut self.ops[slot as usize];
        let OpKind::Add {
            ledger,
            entry,
            ref mut acks,
            size,
        } = op.kind
        else {
            return;
        };
        match acks.reply(member, ok, wq, aq) {
            AckOutcome::Pending => {}
            outcome => {
                let success = outcome == AckOutcome::Completed;
                self.decide(slot, success, now, size as u64, 1);
                self.add_decided(ledger as usize, entry);
            }
        }
    }

    /// Advances the ledger's LAC over the decided prefix (a failed add is skipped, where a
    /// Java client would change the ensemble; the run reports it as an error either way).
    pub(super) fn add_decided(&mut self, ledger: usize, entry: i64) {
        let l = &mut self.ledgers[ledger];
        let idx = entry - l.lac - 1;
        if idx >= 0 {
            if let Some(d) = l.decided.get_mut(idx as usize) {
                *d = true;
            }
        }
        while l.decided.front() == Some(&true) {
            l.decided.pop_front();
            l.lac += 1;
        }
        l.poll_wait = false;
    }

    /// A preload add unanswered past `--timeout`: the bookie stopped answering (a preload
    /// never expires adds and carries on, which would leave holes the reads then miss), so the
    /// run stops with what was seen instead of waiting out the preload's 10-minute deadline.
    fn preload_stall(&self, now: u64, target: i64) -> Option<String> {
        let timeout = self.config.timeout.as_nanos() as u64;
        let late: Vec<&Op> = self
            .ops
            .iter()
            .filter(|o| o.live && !o.decided && now.saturating_sub(o.sent) >= timeout)
            .collect();
        let oldest = late.iter().map(|o| o.sent).min()?;
        let waiting = self.ops.iter().filter(|o| o.live && !o.decided).count();
        let acked: i64 = self.ledgers.iter().map(|l| l.lac + 1).sum();
        let total = target * self.ledgers.len() as i64;
        Some(format!(
            "preload stalled: {} of {waiting} adds in flight unanswered for over {:?} (oldest \
             {:.1} s) after {acked} of {total} entries were acknowledged; the bookie stopped \
             answering (is it reading its socket? `ss -tn` shows its receive queue); --timeout \
             sets the limit",
            late.len(),
            self.config.timeout,
            now.saturating_sub(oldest) as f64 / 1e9,
        ))
    }

    /// Writes `preload_entries` to every ledger (closed loop, 256 in flight, unrecorded).
    pub(super) fn preload(&mut self) -> Result<(), BoxError> {
        let target = self.config.preload_entries as i64;
        if target == 0 {
            return Ok(());
        }
        if self.config.preloaded {
            // Written by an earlier run: the readers take them as this run's preload.
            for l in &mut self.ledgers {
                l.next_entry = target;
                l.lac = target - 1;
                l.tail_seen = target - 1;
            }
            log::info!(
                "reading {} entries preloaded earlier in each of {} ledgers",
                target,
                self.ledgers.len()
            );
            return Ok(());
        }
        let deadline = Instant::now() + Duration::from_secs(600);
        let mut in_flight_limit = 256usize;
        let mut next = 0usize;
        loop {
            let now = self.now_ns();
            let mut live = self.ops.iter().filter(|o| o.live && !o.decided).count();
            // Fill the window round-robin over the ledgers that still need entries (one
            // ledger gets the whole window: a one-ledger preload is not one add per round trip).
            let mut progressed = true;
            while live < in_flight_limit && progressed {
                progressed = false;
                for _ in 0..self.ledgers.len() {
                    let i = next % self.ledgers.len();
                    next += 1;
                    if self.ledgers[i].next_entry < target {
                        self.issue_add(i, now, now, true);
                        live += 1;
                        progressed = true;
                        if live >= in_flight_limit {
                            break;
                        }
                    }
                }
            }
            let all_sent = self.ledgers.iter().all(|l| l.next_entry >= target);
            self.flush(now);
            if all_sent && !self.ops.iter().any(|o| o.live && !o.decided) {
                break;
            }
            if self.conns.iter().all(|c| c.dead) {
                return Err("every connection failed during the preload".into());
            }
            if let Some(stall) = self.preload_stall(now, target) {
                return Err(stall.into());
            }
            if Instant::now() > deadline {
                return Err("preload did not finish in 10 minutes".into());
            }
            self.wait_and_receive(1_000_000);
            in_flight_limit = in_flight_limit.max(1);
        }
        // Let late replies of decided adds arrive, then start clean.
        let until = self.now_ns() + 50_000_000;
        while self.in_flight() && self.now_ns() < until {
            self.flush(self.now_ns());
            self.wait_and_receive(1_000_000);
        }
        for slot in 0..self.ops.len() as u32 {
            self.release(slot);
        }
        for l in &mut self.ledgers {
            l.tail_seen = l.lac;
        }
        log::info!(
            "preloaded {} entries into each of {} ledgers",
            target,
            self.ledgers.len()
        );
        Ok(())
    }
}
