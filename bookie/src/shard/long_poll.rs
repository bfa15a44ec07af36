//! Long-poll reads (`previousLAC`): watchers parked per ledger until its LAC moves past what
//! the reader saw, or their timeout.

use super::*;

pub(super) struct Watcher {
    id: u64,
    entry: i64,
    previous_lac: i64,
    flag: Option<ReadFlag>,
    to: Responder,
}

impl Shard {
    /// Registers a long poll; the shard's timer task expires it.
    pub(super) fn watch(&mut self, poll: LongPoll, to: Responder) {
        let LongPoll {
            ledger,
            entry,
            previous_lac,
            flag,
            timeout_ms,
        } = poll;
        let id = self.next_watch;
        self.next_watch += 1;
        self.watchers.entry(ledger).or_default().push(Watcher {
            id,
            entry,
            previous_lac,
            flag,
            to,
        });
        let timeout = Duration::from_millis(timeout_ms);
        let shard = SHARD.with(|s| s.borrow().clone());
        if let Some(shard) = shard.and_then(|w| w.upgrade()) {
            tokio::task::spawn_local(async move {
                tokio::time::sleep(timeout).await;
                shard.borrow_mut().expire_watcher(ledger, id);
            });
        }
    }

    pub(super) fn expire_watcher(&mut self, ledger: i64, id: u64) {
        let Some(list) = self.watchers.get_mut(&ledger) else {
            return;
        };
        if let Some(i) = list.iter().position(|w| w.id == id) {
            let w = list.swap_remove(i);
            if list.is_empty() {
                self.watchers.remove(&ledger);
            }
            let reply = self
                .core
                .table
                .long_poll_reply(ledger, w.entry, w.previous_lac, w.flag);
            self.respond(w.to, reply);
        }
    }

    /// Answers the long polls whose wait is over (the LAC passed, or the ledger was fenced).
    pub(super) fn wake_watchers(&mut self, ledger: i64) {
        let Some(l) = self.core.table.get(ledger) else {
            return;
        };
        let (lac, fenced) = (l.lac, l.fenced);
        let Some(list) = self.watchers.remove(&ledger) else {
            return;
        };
        let (ready, waiting): (Vec<Watcher>, Vec<Watcher>) = list
            .into_iter()
            .partition(|w| lac > w.previous_lac || fenced);
        if !waiting.is_empty() {
            self.watchers.insert(ledger, waiting);
        }
        for w in ready {
            let reply = self
                .core
                .table
                .long_poll_reply(ledger, w.entry, w.previous_lac, w.flag);
            self.respond(w.to, reply);
        }
    }
}
