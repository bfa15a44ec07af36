//! The bookie's settings, with the defaults of the standalone mode (`bookie` with no
//! arguments). Each field names the bk_server.conf key it corresponds to, where one exists;
//! reading bk_server.conf itself comes with the cluster mode (issue #6).

use std::path::PathBuf;

use std::time::Duration;

use entrylog::LedgerStoreConfig;
use journal::JournalConfig;

#[derive(Clone, Debug)]
pub struct BookieConfig {
    /// `bookiePort` (3181).
    pub port: u16,
    /// `listeningInterface` / `advertisedAddress`: where to listen (127.0.0.1 standalone).
    pub bind_address: String,
    /// `journalDirectories` (one directory; each shard journals in `shard-<n>` below it).
    pub journal_dir: PathBuf,
    /// `ledgerDirectories` (one directory; each shard stores in `shard-<n>` below it).
    pub ledger_dir: PathBuf,
    /// Shards (threads, each pinned to a core); 0 = one per available core.
    pub shards: usize,
    /// Pin shard threads to cores.
    pub pin_threads: bool,
    /// `nettyMaxFrameSizeBytes` (5 MiB).
    pub max_frame_bytes: usize,
    /// Connections per shard before new ones are refused (closed at accept).
    pub max_connections_per_shard: usize,
    /// Requests read from one connection and not yet answered; beyond it the bookie stops
    /// reading that socket (`maxPendingAddRequestsPerThread` plays this role in Java).
    pub max_pending_per_connection: usize,
    /// Capacity of each cross-shard request queue; when full, ETOOMANYREQUESTS.
    pub cross_shard_queue: usize,
    /// Write cache per shard (`dbStorage_writeCacheMaxSizeMb`, split over shards).
    pub write_cache_bytes: usize,
    /// Use the psync driver even where io_uring works.
    pub force_psync: bool,
    pub journal: JournalConfig,
    /// Flush the write cache at least this often (`flushInterval`, 60 s); it also flushes
    /// whenever it is half full.
    pub flush_interval: Duration,
    /// Cache-miss reads waiting for a shard's reader; beyond it, ETOOMANYREQUESTS.
    pub read_queue: usize,
    pub ledger_store: LedgerStoreConfig,
    /// Most bytes per second a write-cache flush writes (0 = unpaced): the flush's share of a
    /// disk the journal shares.
    pub flush_rate_bytes_per_sec: u64,
    /// Flush the write cache when it holds this much (per shard): it bounds how much journal
    /// a shard keeps, and so how many segment files it cycles through.
    pub flush_threshold_bytes: usize,
}

impl Default for BookieConfig {
    fn default() -> BookieConfig {
        BookieConfig {
            port: 3181,
            bind_address: "127.0.0.1".into(),
            journal_dir: PathBuf::from("data/journal"),
            ledger_dir: PathBuf::from("data/ledgers"),
            shards: 0,
            pin_threads: true,
            max_frame_bytes: 5 << 20,
            max_connections_per_shard: 4096,
            max_pending_per_connection: 10_000,
            cross_shard_queue: 65_536,
            write_cache_bytes: 1 << 30,
            force_psync: false,
            journal: JournalConfig {
                // Pulsar's shipped value; ours closes groups earlier when the disk is idle.
                max_group_wait_us: 1_000,
                // Smaller zero-fill writes while a new segment is prepared, and a free pool that
                // covers a whole write cache, so that after warm-up segments are recycled and
                // never zero-filled under load.
                zero_fill_chunk_bytes: 256 << 10,
                segment_size_bytes: 64 << 20,
                max_free_segments: 8,
                preallocate_segments: 6,
                ..JournalConfig::default()
            },
            flush_interval: Duration::from_secs(60),
            read_queue: 1024,
            // Small writes, one at a time, paced: a journal sync never queues behind more
            // than ~256 KiB of flush (about 0.15 ms of this disk).
            ledger_store: LedgerStoreConfig {
                write_chunk_bytes: 256 << 10,
                max_writes_in_flight: 1,
                ..LedgerStoreConfig::default()
            },
            flush_rate_bytes_per_sec: 384 << 20,
            flush_threshold_bytes: 128 << 20,
        }
    }
}

impl BookieConfig {
    /// The number of shards to run.
    pub fn shard_count(&self) -> usize {
        if self.shards > 0 {
            self.shards
        } else {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        }
    }
}
