//! The bookie's settings, with the defaults of the standalone mode (`bookie` with no
//! arguments). Each field names the bk_server.conf key it corresponds to, where one exists;
//! `config/conf.rs` reads bk_server.conf onto it.

pub mod conf;
pub mod conf_env;
pub mod keys;
pub mod keys_table;
pub mod properties;
pub mod pulsar_env;
pub mod values;

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
    /// `journalDirectories`: shard n journals in `shard-<n>` below directory n mod their
    /// count (`store/ledger_dirs.rs`).
    pub journal_dirs: Vec<PathBuf>,
    /// `ledgerDirectories`: every shard stores in `shard-<n>` below each of them, its entry
    /// logs rotating over its own (`store/ledger_dirs.rs`).
    pub ledger_dirs: Vec<PathBuf>,
    /// `indexDirectories`: where the shards' index files go, when set.
    pub index_dirs: Option<Vec<PathBuf>>,
    /// Shards (threads, each pinned to a core); 0 = one per available core.
    pub shards: usize,
    /// Pin shard threads to cores.
    pub pin_threads: bool,
    /// `nettyMaxFrameSizeBytes` (5 MiB).
    pub max_frame_bytes: usize,
    /// `maxBatchReadSize` (Java: 5 MiB): the most bytes of a v2 batch-read reply, whatever
    /// the request's `maxSize` asks.
    pub max_batch_read_bytes: i64,
    /// Connections per shard before new ones are refused (closed at accept).
    pub max_connections_per_shard: usize,
    /// Requests read from one connection and not yet answered; beyond it the bookie stops
    /// reading that socket (`maxPendingAddRequestsPerThread` plays this role in Java).
    pub max_pending_per_connection: usize,
    /// Reply bytes one connection may have encoded and not yet written; beyond it the bookie
    /// stops reading that socket until it drains (Java: the channel's write-buffer high-water
    /// mark). 4 MiB.
    pub reply_bytes_per_connection: usize,
    /// The same over all of a shard's connections (256 MiB): beyond it, connections holding
    /// unwritten replies stop being read and the reader thread stops reading for the shard.
    pub reply_bytes_per_shard: usize,
    /// `waitTimeoutOnResponseBackpressureMs` (negative: `None`, Java's default): a connection
    /// whose socket takes no reply byte for this long is stuck.
    pub response_backpressure_timeout: Option<Duration>,
    /// `closeChannelOnResponseTimeout` (false): a stuck connection is closed rather than having
    /// its unsent replies dropped.
    pub close_on_response_timeout: bool,
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
    /// Reader threads per shard, each with its own ring and blocking reads: the cache-miss
    /// reads a shard has in flight at once (`numReadWorkerThreads`, divided among shards).
    pub read_threads_per_shard: usize,
    /// Cache-miss reads in flight across the bookie while a journal has records to make
    /// durable (`read/disk_share.rs`); `None`: one per shard; `Some(0)`: no limit.
    pub reads_beside_journal: Option<usize>,
    /// Cache-miss reads in flight across the bookie while no journal waits (`read/disk_share.rs`):
    /// the queue depth fitted to the disk; a reader thread keeps up to its part of it in
    /// flight at once (random reads; a sequential read moves a read-ahead run instead).
    pub read_depth: usize,
    /// Read-ahead of catch-up reads (`dbStorage_readAheadCache*`).
    pub read_ahead: ReadAheadConfig,
    pub ledger_store: LedgerStoreConfig,
    /// Most bytes per second a write-cache flush writes (0 = unpaced): the flush's share of a
    /// disk the journal shares.
    pub flush_rate_bytes_per_sec: u64,
    /// Flush the write cache when it holds this much (per shard): it bounds how much journal
    /// a shard keeps, and so how many segment files it cycles through.
    pub flush_threshold_bytes: usize,
    /// Disk checker and read-only mode (`diskUsage*`, `readOnlyModeEnabled`, ...).
    pub disk: DiskConfig,
    /// The HTTP admin server (`httpServer*`).
    pub http: HttpConfig,
    /// ZooKeeper and bookie-id settings, parsed and validated here, used by the metadata part.
    pub cluster: ClusterConfig,
    /// Garbage collection and compaction (`*Compaction*` keys; `gcWaitTime` is in `cluster`).
    pub gc: GcConfig,
    /// What a Java bookie's configuration says of its storage: read when this bookie starts
    /// on a stopped Java bookie's directories to take them over (`store/takeover.rs`).
    pub java_storage: JavaStorageConfig,
    /// TLS on the bookie port (`tls*` keys, `security/tls.rs`).
    pub tls: crate::security::tls::TlsConfig,
    /// Authentication (`bookieAuthProviderFactoryClass`, `authorizedRoles`; `security/auth.rs`).
    pub auth: crate::security::auth::AuthConfig,
    /// Autorecovery (`autoRecoveryDaemonEnabled` and its keys; the `autorecovery` crate).
    pub autorecovery: AutorecoveryConfig,
    /// `permittedStartupUsers`: when set, the only users the bookie starts as.
    pub permitted_startup_users: Option<Vec<String>>,
    /// The bk_server.conf keys and `BK_<key>` variables as given (the first value of a key
    /// given twice, as Java reads it), for `GET /api/v1/config/server_config`.
    pub properties: std::collections::BTreeMap<String, String>,
}

/// Read-ahead of sequential cache-miss reads (`entrylog::Reader`'s module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadAheadConfig {
    /// `dbStorage_readAheadCacheMaxSizeMb`: the read-ahead cache of the whole bookie, split
    /// over the shards; 0 turns read-ahead off. Java's default is a quarter of the JVM's
    /// direct memory; ours is 256 MiB.
    pub cache_bytes: usize,
    /// `dbStorage_readAheadCacheBatchSize` (Java: 100): entries per read-ahead.
    pub batch_entries: usize,
    /// `dbStorage_readAheadCacheBatchBytesSize` (Java: -1, no byte limit): the largest single
    /// read of a read-ahead. Ours defaults to 256 KiB, where this disk's reads stop getting
    /// cheaper per byte and a journal sync queued behind one still waits well under a
    /// millisecond (docs/machine.md §1.3, §1.6). Large entries gain from more: 64 KiB entries
    /// caught up at 657 MiB/s with 256 KiB and 921 MiB/s with 512 KiB (2026-12-03), each read
    /// then holding the device twice as long ahead of a journal write.
    pub batch_bytes: usize,
}

impl ReadAheadConfig {
    /// Entries one run read may bring: `batch_entries`, or 1 (read-ahead off) without a cache
    /// or a byte budget.
    pub fn run_entries(&self) -> usize {
        if self.cache_bytes == 0 || self.batch_bytes == 0 {
            1
        } else {
            self.batch_entries.max(1)
        }
    }
}

impl Default for ReadAheadConfig {
    fn default() -> Self {
        ReadAheadConfig {
            cache_bytes: 256 << 20,
            batch_entries: 100,
            batch_bytes: 256 << 10,
        }
    }
}

/// Entry-log compaction (docs/semantics.md §4.8), Java's keys and defaults.
#[derive(Clone, Debug)]
pub struct GcConfig {
    /// `minorCompactionThreshold` (0.2) / `minorCompactionInterval` (1 h); ≤ 0 disables.
    pub minor_threshold: f64,
    pub minor_interval: Duration,
    /// `majorCompactionThreshold` (0.8) / `majorCompactionInterval` (1 day); ≤ 0 disables.
    pub major_threshold: f64,
    pub major_interval: Duration,
    /// `compactionRateByEntries` (1000/s), `compactionRateByBytes` (1 MB/s), which one
    /// applies: `isThrottleByBytes` (false).
    pub rate_by_entries: u64,
    pub rate_by_bytes: u64,
    pub throttle_by_bytes: bool,
    /// Live bytes one compaction plans to copy before it commits (ours; at least one segment):
    /// its index records in memory are at most 4/5 of this (32 B per entry of 40 B or more),
    /// and it bounds how much work a crash throws away.
    pub max_compaction_bytes: u64,
    /// `isForceGCAllowWhenNoSpace` (false): with a directory above `diskUsageWarnThreshold`,
    /// force garbage collection (true) instead of suspending major compaction (and minor too
    /// above `diskUsageThreshold`), as Java's ledger-dirs listener does.
    pub force_gc_allow_when_no_space: bool,
}

impl Default for GcConfig {
    fn default() -> GcConfig {
        GcConfig {
            minor_threshold: 0.2,
            minor_interval: Duration::from_secs(3600),
            major_threshold: 0.8,
            major_interval: Duration::from_secs(86_400),
            rate_by_entries: 1000,
            rate_by_bytes: 1_000_000,
            throttle_by_bytes: false,
            max_compaction_bytes: 256 << 20,
            force_gc_allow_when_no_space: false,
        }
    }
}

/// When the bookie turns read-only because of its disks (docs/semantics.md §3.3).
#[derive(Clone, Debug)]
pub struct DiskConfig {
    /// `diskUsageThreshold` (0.95): a directory this full makes the bookie read-only.
    pub usage_threshold: f64,
    /// `diskUsageWarnThreshold` (0.90): a warning in the log.
    pub warn_threshold: f64,
    /// `diskUsageLwmThreshold` (= threshold): writable again once the total usage is below.
    pub lwm_threshold: f64,
    /// `diskCheckInterval` (10 s).
    pub check_interval: Duration,
    /// `readOnlyModeEnabled` (true); when false a full disk stops the bookie instead.
    pub read_only_mode_enabled: bool,
    /// `forceReadOnlyBookie` (false): read-only for good, manual writable refused.
    pub force_read_only: bool,
    /// `minUsableSizeForHighPriorityWrites` (1 GiB): while read-only because of full disks,
    /// high-priority (recovery) adds are still taken if some directory has this much free.
    pub min_usable_for_high_priority: u64,
    /// `readOnlyModeOnAnyDiskFullEnabled` (true, Java's default since 4.16): read-only as soon
    /// as any ledger (or index) directory is full, writable again when none is; false: only
    /// when every one is, the others taking the new entry logs meanwhile.
    pub read_only_on_any_full: bool,
    /// `persistBookieStatusEnabled` (false): the mode kept across restarts in `BOOKIE_STATUS`
    /// (`admin/bookie_status.rs`).
    pub persist_status: bool,
}

impl Default for DiskConfig {
    fn default() -> DiskConfig {
        DiskConfig {
            usage_threshold: 0.95,
            warn_threshold: 0.90,
            lwm_threshold: 0.95,
            check_interval: Duration::from_secs(10),
            read_only_mode_enabled: true,
            force_read_only: false,
            min_usable_for_high_priority: 1 << 30,
            read_only_on_any_full: true,
            persist_status: false,
        }
    }
}

/// The HTTP admin server (`admin/http.rs`).
#[derive(Clone, Debug)]
pub struct HttpConfig {
    /// `httpServerEnabled`: on in standalone mode, off by default with a bk_server.conf (Java).
    pub enabled: bool,
    /// `httpServerPort` (8080).
    pub port: u16,
    /// `httpServerHost` (0.0.0.0 with a conf file; the bookie's address standalone).
    pub host: String,
    /// Whether enabling it was asked for (conf key or flag): then a port in use stops the
    /// start; the standalone default only warns.
    pub required: bool,
    /// HTTPS with client certificates (`httpServerTlsEnable` and its stores).
    pub tls: crate::security::http_tls::HttpTlsConfig,
    /// Java's Prometheus stats provider and its own `/metrics` endpoint.
    pub prometheus: PrometheusConfig,
}

/// The stats keys of a Java bookie (`statsProviderClass`, `prometheusStats*`).
///
/// Java's `PrometheusMetricsProvider` serves `/metrics` on a server of its own
/// (`prometheusStatsHttpAddress:prometheusStatsHttpPort`, 0.0.0.0:8000) when the HTTP admin
/// server is off, which is what Apache's and Pulsar's stock bk_server.conf do; with the admin
/// server on, `/metrics` is the admin server's. This bookie does the same, so a scrape set up for
/// the Java bookie finds its metrics after the swap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrometheusConfig {
    /// `statsProviderClass` (Java's default: `NullStatsProvider`, no metrics).
    pub provider_class: Option<String>,
    /// `prometheusStatsHttpEnable` (true).
    pub http_enable: bool,
    /// `prometheusStatsHttpAddress` (0.0.0.0).
    pub address: String,
    /// `prometheusStatsHttpPort` (8000).
    pub port: u16,
}

/// Java's Prometheus stats provider.
pub const PROMETHEUS_PROVIDER: &str =
    "org.apache.bookkeeper.stats.prometheus.PrometheusMetricsProvider";

impl Default for PrometheusConfig {
    fn default() -> PrometheusConfig {
        PrometheusConfig {
            provider_class: None,
            http_enable: true,
            address: "0.0.0.0".into(),
            port: 8000,
        }
    }
}

impl PrometheusConfig {
    /// Where the metrics server of its own listens, when there is one: the Prometheus provider
    /// named, its HTTP endpoint enabled, and the admin server (which then has `/metrics`) off.
    pub fn own_endpoint(&self, admin_server_enabled: bool) -> Option<(&str, u16)> {
        let prometheus = self.provider_class.as_deref() == Some(PROMETHEUS_PROVIDER);
        (prometheus && self.http_enable && !admin_server_enabled)
            .then_some((self.address.as_str(), self.port))
    }
}

impl Default for HttpConfig {
    fn default() -> HttpConfig {
        HttpConfig {
            enabled: true,
            port: 8080,
            host: "127.0.0.1".into(),
            required: false,
            tls: Default::default(),
            prometheus: PrometheusConfig::default(),
        }
    }
}

/// Metadata-store and identity keys (docs/semantics.md §1, §6.4). Parsed and validated by
/// `config/conf.rs`; the ZooKeeper registration uses them.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// `metadataServiceUri`, e.g. `zk+hierarchical://zk1:2181;zk2:2181/ledgers`.
    pub metadata_service_uri: Option<String>,
    /// `zkServers` (legacy), comma-separated host:port.
    pub zk_servers: Option<String>,
    /// `zkLedgersRootPath` (legacy, `/ledgers`).
    pub zk_ledgers_root_path: String,
    /// `zkTimeout` (10 s): ZooKeeper session timeout.
    pub zk_timeout: Duration,
    /// `ledgerManagerFactoryClass` / `ledgerManagerType` (legacy).
    pub ledger_manager_factory_class: Option<String>,
    pub ledger_manager_type: Option<String>,
    /// `bookieId`: a custom id.
    pub bookie_id: Option<String>,
    /// `advertisedAddress`: the address in the bookie id and registration (not the bind).
    pub advertised_address: Option<String>,
    /// `listeningInterface`: the interface name (or address) given, if any.
    pub listening_interface: Option<String>,
    /// `useHostNameAsBookieID` / `useShortHostName`.
    pub use_host_name_as_bookie_id: bool,
    pub use_short_host_name: bool,
    /// `allowLoopback` / `allowEphemeralPorts`.
    pub allow_loopback: bool,
    pub allow_ephemeral_ports: bool,
    /// `gcWaitTime` (600 s), `gcOverreplicatedLedgerWaitTime` (1 day; 0 disables),
    /// `verifyMetadataOnGC` (false).
    pub gc_wait_time: Duration,
    pub gc_overreplicated_ledger_wait_time: Duration,
    pub verify_metadata_on_gc: bool,
    /// `gcMetadataOpRateLimit` (1000/s): ZooKeeper reads of the ledger scans per second.
    pub gc_metadata_op_rate: u32,
    /// `allowStorageExpansion` (false): cookies may gain journal/ledger directories.
    pub allow_storage_expansion: bool,
}

impl Default for ClusterConfig {
    fn default() -> ClusterConfig {
        ClusterConfig {
            metadata_service_uri: None,
            zk_servers: None,
            zk_ledgers_root_path: "/ledgers".into(),
            zk_timeout: Duration::from_secs(10),
            ledger_manager_factory_class: None,
            ledger_manager_type: None,
            bookie_id: None,
            advertised_address: None,
            listening_interface: None,
            use_host_name_as_bookie_id: false,
            use_short_host_name: false,
            allow_loopback: false,
            allow_ephemeral_ports: false,
            gc_wait_time: Duration::from_secs(600),
            gc_overreplicated_ledger_wait_time: Duration::from_secs(86_400),
            verify_metadata_on_gc: false,
            gc_metadata_op_rate: 1000,
            allow_storage_expansion: false,
        }
    }
}

impl ClusterConfig {
    /// Whether a metadata store is configured (otherwise: standalone, no registration).
    pub fn has_metadata_store(&self) -> bool {
        self.metadata_service_uri.is_some() || self.zk_servers.is_some()
    }
}

impl Default for BookieConfig {
    fn default() -> BookieConfig {
        BookieConfig {
            port: 3181,
            bind_address: "127.0.0.1".into(),
            journal_dirs: vec![PathBuf::from("data/journal")],
            ledger_dirs: vec![PathBuf::from("data/ledgers")],
            index_dirs: None,
            shards: 0,
            pin_threads: true,
            max_frame_bytes: 5 << 20,
            max_batch_read_bytes: 5 << 20,
            max_connections_per_shard: 4096,
            max_pending_per_connection: 10_000,
            reply_bytes_per_connection: 4 << 20,
            reply_bytes_per_shard: 256 << 20,
            response_backpressure_timeout: None,
            close_on_response_timeout: false,
            cross_shard_queue: 65_536,
            write_cache_bytes: 1 << 30,
            force_psync: false,
            journal: JournalConfig {
                // Pulsar's shipped value; ours closes groups earlier when the disk is idle.
                max_group_wait_us: 1_000,
                // Commits started because the disk fell idle come at least 0.5 ms apart: at a
                // few thousand adds a second that halves the commits, the bookie's CPU falls by
                // 12-18 % and the VM's host-imposed stalls with it (ARCHITECTURE.md §12); a
                // lone add on a quiet bookie still goes to disk at once.
                idle_commit_gap_us: 500,
                // Smaller zero-fill writes while a new segment is prepared, and a free pool that
                // covers a whole write cache, so that after warm-up segments are recycled and
                // never zero-filled under load.
                zero_fill_chunk_bytes: 256 << 10,
                segment_size_bytes: 64 << 20,
                max_free_segments: 8,
                // Six free files zero-filled at start: a burst at full speed (~300 MB of journal
                // in the first seconds) then recycles files instead of zero-filling new ones
                // beside its own writes — measured, two halve the closed-loop peak (53k vs 95k
                // adds/s). Fewer where the disk has less room or many shards share it
                // (`journal_space`); `journalPreAllocSizeMB` sets it in whole segments.
                preallocate_segments: 6,
                ..JournalConfig::default()
            },
            flush_interval: Duration::from_secs(60),
            read_queue: 1024,
            // One: more readers raise cold catch-up reads (sequential, 1 KiB entries: 8.7k →
            // 13–15k reads/s with four) but every reader in flight delays the journal's sync
            // on a shared disk (adds' p99.9 beside them +20–40 %). Adds first by default;
            // `numReadWorkerThreads` trades (ARCHITECTURE.md §12).
            read_threads_per_shard: 1,
            reads_beside_journal: None,
            // docs/machine.md and `bkperf probe`: 4 KiB random reads here reach 35k/s at depth
            // 1 and 122k/s at depth 32; beyond 32 an NVMe queue gains little.
            read_depth: 32,
            read_ahead: ReadAheadConfig::default(),
            // Small writes, one at a time, paced: a journal sync never queues behind more
            // than ~256 KiB of flush (about 0.15 ms of this disk).
            ledger_store: LedgerStoreConfig {
                write_chunk_bytes: 256 << 10,
                max_writes_in_flight: 1,
                ..LedgerStoreConfig::default()
            },
            flush_rate_bytes_per_sec: 384 << 20,
            flush_threshold_bytes: 128 << 20,
            disk: DiskConfig::default(),
            http: HttpConfig::default(),
            cluster: ClusterConfig::default(),
            gc: GcConfig::default(),
            java_storage: JavaStorageConfig::default(),
            tls: crate::security::tls::TlsConfig::default(),
            auth: crate::security::auth::AuthConfig::default(),
            autorecovery: AutorecoveryConfig::default(),
            permitted_startup_users: None,
            properties: Default::default(),
        }
    }
}

/// Autorecovery in this bookie (docs/autorecovery.md).
#[derive(Clone, Debug, Default)]
pub struct AutorecoveryConfig {
    /// `autoRecoveryDaemonEnabled` (false): run the auditor candidate and a replication worker.
    pub enabled: bool,
    /// The auditor's and the worker's knobs, with Java's names and defaults.
    pub settings: autorecovery::settings::Settings,
    /// `ensemblePlacementPolicy` and `enforceMinNumRacksPerWriteQuorum`, as written.
    pub placement_class: Option<String>,
    pub enforce_min_racks: bool,
}

/// The keys of a Java bookie's storage that a takeover needs (docs/java-formats.md §10).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JavaStorageConfig {
    /// `ledgerStorageClass` as written (None: Java's default, SortedLedgerStorage).
    pub ledger_storage_class: Option<String>,
    /// `sortedLedgerStorageEnabled=false` turns the default into InterleavedLedgerStorage
    /// (the same files).
    pub sorted_disabled: bool,
    /// `skipReplayJournalInvalidRecord`: a bad record ends the replay of its journal file
    /// instead of refusing the start, as in Java.
    pub skip_invalid_journal_records: bool,
}

impl JavaStorageConfig {
    /// True when the class is Interleaved or SortedLedgerStorage (index files).
    pub fn is_sorted(&self) -> bool {
        match self.ledger_storage_class.as_deref().map(str::trim) {
            None | Some("") => true,
            Some(c) => {
                c.ends_with(".SortedLedgerStorage") || c.ends_with(".InterleavedLedgerStorage")
            }
        }
    }

    /// True when the class is DbLedgerStorage (RocksDB index).
    pub fn is_db(&self) -> bool {
        self.ledger_storage_class
            .as_deref()
            .is_some_and(|c| c.trim().ends_with(".DbLedgerStorage"))
    }
}

impl BookieConfig {
    /// The number of shards to run: as configured, or one per core and at least one per
    /// journal directory.
    pub fn shard_count(&self) -> usize {
        if self.shards > 0 {
            self.shards
        } else {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
                .max(self.journal_dirs.len())
        }
    }
}
