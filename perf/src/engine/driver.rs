//! The engine's loop: connecting, sending, receiving and matching replies, deciding and
//! expiring operations, and the measured run (warm-up, window, drain).

use super::*;

impl Engine {
    pub(super) fn new(
        config: &EngineConfig,
        thread: usize,
        threads: usize,
    ) -> Result<Engine, BoxError> {
        let per_thread = |x: f64| x / threads as f64;
        let mut conns = Vec::new();
        for addr in &config.bookies {
            for _ in 0..config.connections {
                let stream = TcpStream::connect_timeout(addr, Duration::from_secs(5))
                    .map_err(|e| format!("cannot connect to bookie {addr}: {e}"))?;
                stream.set_nodelay(true)?;
                stream.set_nonblocking(true)?;
                conns.push(Conn {
                    stream,
                    conn: ClientConnection::new(ClientConfig {
                        max_frame_size: net::frame::DEFAULT_MAX_FRAME_SIZE
                            .max(config.write.as_ref().map_or(0, |w| w.sizes.max() + 4096)),
                        max_pending_requests: 1 << 20,
                    }),
                    out: None,
                    out_pos: 0,
                    want_write: false,
                    tags: VecDeque::new(),
                    base: 0,
                    dead: false,
                });
            }
        }
        let ensemble = config.write.as_ref().map_or(1, |w| w.ensemble);
        let mut ledgers = Vec::new();
        for idx in (thread..config.ledgers).step_by(threads) {
            // Ensembles rotate over the bookies so that many ledgers spread the load.
            let members = (0..ensemble)
                .map(|i| (idx + i) % config.bookies.len())
                .collect();
            ledgers.push(Ledger {
                id: config.first_ledger_id + idx as i64,
                ensemble: members,
                conn_slot: (idx / threads) % config.connections,
                next_entry: 0,
                lac: -1,
                length: 0,
                decided: VecDeque::new(),
                times: VecDeque::new(),
                times_base: 0,
                read_cursor: 0,
                tail_seen: -1,
                polling: false,
                poll_wait: false,
            });
        }
        let seed = config.seed ^ (thread as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let side = |mode: Mode, salt: u64| {
            let mode = match mode {
                Mode::Open { rate, arrival } => Mode::Open {
                    rate: per_thread(rate),
                    arrival,
                },
                Mode::Closed { outstanding } => Mode::Closed {
                    outstanding: outstanding.div_ceil(threads).max(1),
                },
            };
            Side {
                mode,
                schedule: match mode {
                    Mode::Open { rate, arrival } => Some(Schedule::new(rate, arrival, seed ^ salt)),
                    Mode::Closed { .. } => None,
                },
                outstanding: 0,
                next_ledger: 0,
                result: SideResult::new(),
            }
        };
        let max_payload = config
            .write
            .as_ref()
            .map_or(0, |w| w.sizes.max())
            .max(config.preload_size);
        let mut rng = Rng::new(seed);
        let payload = (0..max_payload).map(|_| rng.next_u64() as u8).collect();
        let tailing = matches!(
            config.read.as_ref().map(|r| r.pattern),
            Some(ReadPattern::Tailing { .. })
        );
        Ok(Engine {
            protocol: config.protocol,
            conns,
            connections: config.connections,
            ledgers,
            ops: Vec::new(),
            free: Vec::new(),
            write: config.write.as_ref().map(|w| side(w.mode, 1)),
            write_cfg: config.write.clone(),
            read: config.read.as_ref().map(|r| side(r.mode, 2)),
            read_cfg: config.read.clone(),
            master_key: Bytes::copy_from_slice(&config.master_key),
            digest: config.write.as_ref().map_or(config.digest, |w| w.digest),
            payload,
            scratch: BytesMut::with_capacity(1 << 20),
            rng,
            config: config.clone(),
            start: Instant::now(),
            warmup_ns: 0,
            end_ns: 0,
            max_outstanding: config.max_outstanding.div_ceil(threads).max(1),
            chunk: vec![0u8; 256 * 1024],
            replies: Vec::new(),
            ready: Vec::new(),
            tailing,
            why: "unknown",
        })
    }

    pub(super) fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    pub(super) fn conn_index(&self, bookie: usize, ledger: usize) -> usize {
        bookie * self.connections + self.ledgers[ledger].conn_slot
    }

    pub(super) fn alloc(&mut self, op: Op) -> u32 {
        match self.free.pop() {
            Some(slot) => {
                let generation = self.ops[slot as usize].generation.wrapping_add(1);
                self.ops[slot as usize] = Op { generation, ..op };
                slot
            }
            None => {
                self.ops.push(op);
                (self.ops.len() - 1) as u32
            }
        }
    }

    pub(super) fn release(&mut self, slot: u32) {
        let op = &mut self.ops[slot as usize];
        if op.live {
            op.live = false;
            op.generation = op.generation.wrapping_add(1);
            self.free.push(slot);
        }
    }

    /// Sends one request on a connection; false if it could not be sent.
    pub(super) fn send(&mut self, conn: usize, request: Request, v2: bool, tag: Tag) -> bool {
        let c = &mut self.conns[conn];
        if c.dead {
            return false;
        }
        let sent = if v2 {
            c.conn.send_v2(request, false)
        } else {
            c.conn.send_v3(request, None)
        };
        match sent {
            Ok(id) => {
                c.push(id, tag);
                true
            }
            Err(err) => {
                log::debug!("cannot send: {err}");
                false
            }
        }
    }

    pub(super) fn side_mut(&mut self, side: SideId) -> Option<&mut Side> {
        match side {
            SideId::Write => self.write.as_mut(),
            SideId::Read => self.read.as_mut(),
        }
    }

    /// An operation is decided: record it, free its place in the side's window.
    pub(super) fn decide(&mut self, slot: u32, ok: bool, now: u64, bytes: u64, entries: u64) {
        let (warmup, op) = (self.warmup_ns, &mut self.ops[slot as usize]);
        if op.decided {
            return;
        }
        op.decided = true;
        let op = *op;
        if op.replies_left == 0 {
            self.release(slot);
        }
        if op.preload {
            return;
        }
        let why = self.why;
        // Completions during the drain count in the last second of the window.
        let at = now
            .min(self.end_ns.saturating_sub(1))
            .saturating_sub(warmup);
        let Some(side) = self.side_mut(op.side) else {
            return;
        };
        side.outstanding = side.outstanding.saturating_sub(1);
        if !op.measured {
            return;
        }
        if ok {
            side.result.ops_ok += 1;
            side.result.bytes += bytes;
            side.result.entries += entries;
            side.result
                .record(Latency::of(op.intended, op.sent, now), at);
        } else {
            side.result.error(why);
        }
    }

    pub(super) fn on_reply(&mut self, tag: Tag, frame: ResponseFrame, now: u64) {
        let Some(op) = self.ops.get(tag.slot as usize).copied() else {
            return;
        };
        if op.generation != tag.generation || !op.live {
            return; // the operation timed out and its slot was reused
        }
        match op.kind {
            OpKind::Add { .. } => {
                let ok = matches!(
                    frame.response,
                    Response::AddEntry {
                        status: StatusCode::EOK,
                        ..
                    }
                );
                self.why = status_name(frame.response.status());
                let o = &mut self.ops[tag.slot as usize];
                o.replies_left = o.replies_left.saturating_sub(1);
                let done = o.replies_left == 0 && o.decided;
                self.add_reply(tag.slot, tag.member as usize, ok, now);
                let o = &self.ops[tag.slot as usize];
                if done || (o.replies_left == 0 && o.decided) {
                    self.release(tag.slot);
                }
            }
            OpKind::Read { .. } => self.read_reply(tag.slot, &frame, now),
            OpKind::Poll { .. } => self.poll_reply(tag.slot, &frame, now),
        }
    }

    /// A connection failed: every request pending on it failed.
    pub(super) fn fail_conn(&mut self, index: usize, why: &str, now: u64) {
        let c = &mut self.conns[index];
        if c.dead {
            return;
        }
        log::warn!("connection {index} failed: {why}; its pending requests count as errors");
        c.dead = true;
        c.conn.fail_all();
        c.out = None;
        let tags: Vec<Tag> = c.tags.drain(..).flatten().collect();
        self.why = "connection failed";
        for tag in tags {
            let Some(op) = self.ops.get(tag.slot as usize).copied() else {
                continue;
            };
            if op.generation != tag.generation || !op.live {
                continue;
            }
            match op.kind {
                OpKind::Add { .. } => {
                    let o = &mut self.ops[tag.slot as usize];
                    o.replies_left = o.replies_left.saturating_sub(1);
                    self.add_reply(tag.slot, tag.member as usize, false, now);
                    let o = &self.ops[tag.slot as usize];
                    if o.replies_left == 0 && o.decided {
                        self.release(tag.slot);
                    }
                }
                OpKind::Read { .. } => {
                    self.ops[tag.slot as usize].replies_left = 0;
                    self.decide(tag.slot, false, now, 0, 0);
                }
                OpKind::Poll { ledger } => {
                    self.release(tag.slot);
                    self.ledgers[ledger as usize].polling = false;
                    if let Some(side) = self.read.as_mut() {
                        side.result.error("connection failed");
                    }
                }
            }
        }
    }

    /// Operations without a decision after the timeout count as timeouts; decided adds still
    /// waiting for slow members are forgotten.
    pub(super) fn expire(&mut self, now: u64) {
        let timeout = self.config.timeout.as_nanos() as u64;
        let poll_extra = match self.read_cfg.as_ref().map(|r| r.pattern) {
            Some(ReadPattern::Tailing { poll_timeout_ms }) => {
                poll_timeout_ms.max(0) as u64 * 1_000_000
            }
            _ => 0,
        };
        for slot in 0..self.ops.len() as u32 {
            let op = self.ops[slot as usize];
            if !op.live {
                continue;
            }
            let limit = if matches!(op.kind, OpKind::Poll { .. }) {
                timeout + poll_extra
            } else {
                timeout
            };
            if now.saturating_sub(op.sent) < limit {
                continue;
            }
            if !op.decided {
                self.ops[slot as usize].decided = true;
                match op.kind {
                    OpKind::Add { ledger, entry, .. } => self.add_decided(ledger as usize, entry),
                    OpKind::Poll { ledger } => self.ledgers[ledger as usize].polling = false,
                    OpKind::Read { .. } => {}
                }
                if !op.preload && !matches!(op.kind, OpKind::Poll { .. }) {
                    if let Some(side) = self.side_mut(op.side) {
                        side.outstanding = side.outstanding.saturating_sub(1);
                        if op.measured {
                            side.result.timeouts += 1;
                        }
                    }
                } else if matches!(op.kind, OpKind::Poll { .. }) && now != u64::MAX {
                    // A long poll unanswered past its own timeout (the final sweep is not one:
                    // the last poll of each ledger waits for an entry that never comes).
                    if let Some(side) = self.read.as_mut() {
                        side.result.timeouts += 1;
                    }
                }
            }
            self.release(slot);
        }
    }

    // ---- I/O ----

    pub(super) fn flush(&mut self, now: u64) {
        for i in 0..self.conns.len() {
            let mut failure = None;
            {
                let c = &mut self.conns[i];
                if c.dead {
                    continue;
                }
                c.want_write = false;
                loop {
                    if c.out.is_none() {
                        if !c.conn.has_output() {
                            break;
                        }
                        c.out = Some(c.conn.take_output());
                        c.out_pos = 0;
                    }
                    let out = c.out.as_ref().expect("just set");
                    match c.stream.write(&out[c.out_pos..]) {
                        Ok(0) => {
                            failure = Some("write returned 0".to_string());
                            break;
                        }
                        Ok(n) => {
                            c.out_pos += n;
                            if c.out_pos == out.len() {
                                c.out = None;
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            c.want_write = true;
                            break;
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => {
                            failure = Some(format!("write: {e}"));
                            break;
                        }
                    }
                }
            }
            if let Some(why) = failure {
                self.fail_conn(i, &why, now);
            }
        }
    }

    /// Reads what a readable connection has and handles its replies.
    pub(super) fn receive(&mut self, index: usize) {
        let mut failure = None;
        let mut eof = false;
        for _ in 0..8 {
            let c = &mut self.conns[index];
            match c.stream.read(&mut self.chunk) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(n) => {
                    c.conn.receive(&self.chunk[..n]);
                    if n < self.chunk.len() {
                        break;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    failure = Some(format!("read: {e}"));
                    break;
                }
            }
        }
        let mut replies = std::mem::take(&mut self.replies);
        {
            let c = &mut self.conns[index];
            loop {
                match c.conn.poll_response() {
                    Ok(Some((id, frame))) => {
                        if let Some(tag) = c.take(id) {
                            replies.push((tag, frame));
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        failure = Some(format!("bad reply: {e}"));
                        break;
                    }
                }
            }
        }
        let now = self.now_ns();
        for (tag, frame) in replies.drain(..) {
            self.on_reply(tag, frame, now);
        }
        self.replies = replies;
        if let Some(why) = failure {
            self.fail_conn(index, &why, now);
        } else if eof {
            self.fail_conn(index, "closed by the bookie", now);
        }
    }

    /// Waits for readiness up to `timeout_ns` and handles what is ready.
    pub(super) fn wait_and_receive(&mut self, timeout_ns: u64) {
        use nix::poll::{ppoll, PollFd, PollFlags};
        let mut ready = std::mem::take(&mut self.ready);
        ready.clear();
        // Dead connections are left out (ppoll ignored them as fd -1); `ready` maps each
        // entry of `fds` back to its connection.
        let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(self.conns.len());
        for (i, c) in self.conns.iter().enumerate() {
            if c.dead {
                continue;
            }
            let events = if c.want_write {
                PollFlags::POLLIN | PollFlags::POLLOUT
            } else {
                PollFlags::POLLIN
            };
            ready.push(i);
            fds.push(PollFd::new(c.stream.as_fd(), events));
        }
        let timeout = nix::sys::time::TimeSpec::from_duration(Duration::from_nanos(timeout_ns));
        if !matches!(ppoll(&mut fds, Some(timeout), None), Ok(n) if n > 0) {
            self.ready = ready;
            return;
        }
        let wake = PollFlags::POLLIN | PollFlags::POLLERR | PollFlags::POLLHUP;
        let mut polled = fds.iter();
        ready.retain(|_| {
            polled
                .next()
                .and_then(PollFd::revents)
                .is_some_and(|r| r.intersects(wake))
        });
        drop(fds);
        for &i in &ready {
            self.receive(i);
        }
        self.ready = ready;
    }

    /// Issues what is due on each side. Returns the time the next open-loop op is due.
    pub(super) fn issue_due(&mut self, now: u64, issue_end: u64) -> Option<u64> {
        let mut next_due: Option<u64> = None;
        for side_id in [SideId::Write, SideId::Read] {
            let max_out = self.max_outstanding;
            while let Some(side) = self.side_mut(side_id) {
                let intended = match (side.mode, side.schedule.as_mut()) {
                    (Mode::Open { .. }, Some(s)) => {
                        let t = s.peek_ns();
                        if t >= issue_end {
                            break;
                        }
                        if t > now {
                            next_due = Some(next_due.map_or(t, |d| d.min(t)));
                            break;
                        }
                        if side.outstanding >= max_out {
                            break; // due but the window is full: it waits, and that wait counts
                        }
                        s.take()
                    }
                    (Mode::Closed { outstanding }, _) => {
                        if now >= issue_end || side.outstanding >= outstanding {
                            break;
                        }
                        now
                    }
                    _ => break,
                };
                let issued = match side_id {
                    SideId::Write => {
                        let n = self.ledgers.len();
                        let side = self.write.as_mut().expect("write side");
                        let ledger = side.next_ledger % n;
                        side.next_ledger += 1;
                        self.issue_add(ledger, intended, now, false)
                    }
                    SideId::Read => self.issue_read(intended, now),
                };
                if !issued {
                    // Nothing readable yet: retry in a moment (the op keeps its time).
                    next_due = Some(now + 100_000);
                    break;
                }
            }
        }
        if self.tailing && now < issue_end {
            self.issue_polls(now);
        }
        next_due
    }

    pub(super) fn in_flight(&self) -> bool {
        self.ops.iter().any(|o| o.live)
    }

    /// The measured run: warm-up, window, drain.
    pub(super) fn measure(&mut self) -> Result<(), BoxError> {
        set_timer_slack_ns(1000);
        self.start = Instant::now();
        // Keep the ledger times consistent with the new clock: nothing in flight now.
        self.warmup_ns = self.config.warmup.as_nanos() as u64;
        self.end_ns = self.warmup_ns + self.config.duration.as_nanos() as u64;
        let drain_deadline = self.end_ns + self.config.timeout.as_nanos() as u64 + 1_000_000_000;
        let mut next_expire = 50_000_000;
        loop {
            let now = self.now_ns();
            let next_due = self.issue_due(now, self.end_ns);
            self.flush(now);
            if now >= self.end_ns {
                let pending = self
                    .ops
                    .iter()
                    .any(|o| o.live && !o.decided && !matches!(o.kind, OpKind::Poll { .. }));
                if !pending || now >= drain_deadline {
                    break;
                }
            }
            if self.conns.iter().all(|c| c.dead) {
                return Err("every connection to the bookies failed".into());
            }
            if now >= next_expire {
                self.expire(now);
                next_expire = now + 50_000_000;
            }
            let mut wake = next_expire.min(if now < self.end_ns {
                self.end_ns
            } else {
                drain_deadline
            });
            if let Some(d) = next_due {
                wake = wake.min(d);
            }
            let timeout = wake.saturating_sub(now);
            let tick = self.config.send_tick.as_nanos() as u64;
            self.wait_and_receive(if tick == 0 && timeout < 20_000 {
                // Sub-20 µs waits are not worth a sleep: check the sockets and go round.
                0
            } else {
                // Sleep at least a tick: what falls due meanwhile is sent together, late by
                // at most the tick, and the corrected latency counts that.
                timeout.max(tick)
            });
        }
        // Ops that were due in the window but never sent.
        let end = self.end_ns;
        for side in [self.write.as_mut(), self.read.as_mut()]
            .into_iter()
            .flatten()
        {
            if let Some(s) = side.schedule.as_mut() {
                while s.peek_ns() < end {
                    s.take();
                    side.result.not_sent += 1;
                }
            }
        }
        // Whatever is still undecided at the drain deadline timed out.
        self.expire(u64::MAX);
        Ok(())
    }
}
