//! The messages the bookie's threads exchange, and the handles they send them through.
//!
//! A shard owns its ledgers and connections; everything else talks to it by message: other
//! shards (requests for the ledgers it owns, replies for its connections, handed-over
//! connections), the HTTP admin and GC threads (admin queries), its flush thread (flushed
//! batches, new read views, failures) and the reader threads (cache-miss read results). Keeping
//! the message types here, apart from their senders and receivers, is what lets `shard`,
//! `ledger_storage`, `compaction`, `gc` and `http` depend on this module instead of on each other.

use std::sync::atomic::AtomicU32;
use std::sync::Arc;

use bytes::Bytes;
use entrylog::{FlushStats, ReadView};
use net::{RequestFrame, ResponseFrame, ResponseHeader};
use tokio::sync::mpsc;

use crate::conn::{ConnShared, ReplyBudget};
use crate::store::ledger::{DiskRead, FrozenBatch, FrozenEntries};

/// A request for a ledger another shard owns.
pub struct RemoteRequest {
    pub origin: usize,
    pub conn_id: u64,
    pub frame: RequestFrame,
    /// When the origin shard decoded it (`metrics::now_us`).
    pub since: u64,
    /// The connection's state: a read for a closed one is not worth doing any more.
    pub conn: Arc<ConnShared>,
}

/// A reply travelling back to the shard that holds the connection.
pub struct RemoteReply {
    pub conn_id: u64,
    pub frame: ResponseFrame,
    /// A reply from the reader thread: `metrics::pack_timing` of the request, for the origin
    /// shard to record (0: recorded already).
    pub timing: u64,
    /// An add's reply: when it was ready (`metrics::now_us`), for the `reply` stage (0: none).
    pub ready_at: u64,
}

/// Questions the HTTP admin thread asks a shard, answered between requests.
pub enum AdminQuery {
    /// The ids of the ledgers the shard holds.
    ListLedgers(tokio::sync::oneshot::Sender<Vec<i64>>),
    /// Garbage collection: drop these ledgers (deleted from the cluster); answers how many
    /// were here.
    DeleteLedgers(Vec<i64>, tokio::sync::oneshot::Sender<usize>),
    /// Garbage collection: collect and maybe compact after the next flush.
    Gc(GcRequest),
    /// Flush the write cache now (`PUT /api/v1/bookie/flush`).
    Flush,
}

/// How other shards reach this one.
#[derive(Clone)]
pub struct ShardHandle {
    pub requests: mpsc::Sender<RemoteRequest>,
    pub replies: mpsc::UnboundedSender<RemoteReply>,
    /// Accepted connections handed over for balance (round robin over shards).
    pub connections: mpsc::UnboundedSender<std::net::TcpStream>,
    pub admin: mpsc::UnboundedSender<AdminQuery>,
    /// Runs a reader thread read for this shard's read-ahead (`read::ahead`), with their bodies.
    pub landed: mpsc::UnboundedSender<RunLanded>,
    /// Reply bytes the shard holds for its connections, not yet written (shared by the
    /// shard's connections; a reader thread looks at each connection's own room instead).
    pub reply_budget: Arc<ReplyBudget>,
    /// How full its write cache is, in thousandths (0 while it is read-only): every shard
    /// paces its connections on the fullest (`Shard::admission_delay`), since their adds
    /// may be for any shard's ledgers.
    pub cache_fill_permille: Arc<AtomicU32>,
}

/// The receiving ends, owned by the shard's thread.
pub struct ShardInbox {
    pub requests: mpsc::Receiver<RemoteRequest>,
    pub replies: mpsc::UnboundedReceiver<RemoteReply>,
    pub connections: mpsc::UnboundedReceiver<std::net::TcpStream>,
    pub admin: mpsc::UnboundedReceiver<AdminQuery>,
    pub landed: mpsc::UnboundedReceiver<RunLanded>,
}

/// A run a reader thread read for its shard's read-ahead (`read::ahead`): a run asked for
/// (`DiskRead::Prefetch`), or the entries after a run read's asked entry. The shard puts the
/// bodies in its read-ahead cache and answers the reads parked on the run; no bodies: nothing
/// read (not in the store, or the read failed), and those reads go to a reader.
#[derive(Debug)]
pub struct RunLanded {
    pub ledger: u64,
    pub start: u64,
    pub bodies: Vec<Bytes>,
    /// The entry whose take asks for the runs after this one (`read::cache` triggers).
    pub trigger: Option<u64>,
    /// While runs of the same ask follow: where the next starts, and where the last ends.
    pub more: Option<(u64, u64)>,
}

/// A request to collect garbage (sent by the GC driver to each shard, which forwards it to
/// its flush thread right after the flush that persists the latest ledger deletions).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GcRequest {
    /// Compact now, whatever the intervals say (`PUT /api/v1/bookie/gc`).
    pub force: bool,
    /// With `force`: which compaction (`forceMajor` / `forceMinor` of the PUT body).
    pub force_major: bool,
    pub force_minor: bool,
}

impl GcRequest {
    /// Two pending requests as one.
    pub fn merge(self, other: GcRequest) -> GcRequest {
        GcRequest {
            force: self.force || other.force,
            force_major: self.force_major || other.force_major,
            force_minor: self.force_minor || other.force_minor,
        }
    }
}

/// What the flush thread tells its shard.
pub enum StoreEvent {
    /// A flush completed: its entries are in the store, the journal may go up to `mark`.
    Flushed {
        mark: u64,
        view: Arc<ReadView>,
        stats: FlushStats,
    },
    /// Garbage collection published a new view (read through it from now on).
    View(Arc<ReadView>),
    /// A flush or garbage collection failed: the shard turns read-only.
    Failed(String),
}

/// Work for a flush thread.
pub enum FlushJob {
    /// Persist a frozen write cache.
    Flush(FrozenBatch),
    /// Free the entries of a cache whose flush completed.
    Dispose(FrozenEntries),
    /// Collect garbage (after the flush that persisted the latest deletions).
    Gc(GcRequest),
}

/// A cache-miss read and where its reply goes.
pub struct ReadJob {
    /// The request's kind and start (`metrics::pack_timing`), for the origin's metrics.
    pub timing: u64,
    pub view: Arc<ReadView>,
    pub read: DiskRead,
    /// Entries to read from the asked one in one device read (1: the entry alone). With more,
    /// the entries after the asked one go to the ledger's shard (`shard`) as a [`RunLanded`].
    pub run: usize,
    /// The shard that owns the ledger (and its read-ahead).
    pub shard: usize,
    /// The shard holding the connection, which the reply goes to.
    pub origin: usize,
    pub conn_id: u64,
    /// The connection's state: a read for a closed one is skipped, one for a connection
    /// over its reply budget waits.
    pub conn: Arc<ConnShared>,
    pub header: ResponseHeader,
}
