//! The table of bk_server.conf keys (`keys.rs` says what a row means), grouped by what they
//! configure. A setter maps a value Java would accept onto [`crate::config::BookieConfig`];
//! ranges tighter than Java's are errors naming the key, the value and the line.

use std::time::Duration;

use super::keys::{applied, ignored, unhonoured, Key, Ours, Ty, V};

// Reasons shared by many keys.
const THREADS: &str = "sizes a Java thread pool; this bookie runs one pinned shard per core, \
                       each with its own flush and reader threads (ARCHITECTURE §4)";
const NETTY: &str = "tunes Java's Netty, socket or JVM allocator; this bookie's buffers are per \
                     shard and bounded by its own limits (docs/semantics.md)";
const ROCKSDB: &str = "tunes DbLedgerStorage's RocksDB index; this bookie's index is its own \
                       (sorted runs in entrylog/), and a taken-over Java index is only read";
const INDEX_FILES: &str = "tunes Interleaved/SortedLedgerStorage's index files or memtable; \
                           this bookie's ledger storage is its own (entrylog/)";
const JOURNAL_FILES: &str = "shapes Java's journal files; this bookie's journal is pre-written \
                             segments recycled after each checkpoint, 4 KiB-aligned O_DIRECT \
                             writes (journal/)";
const ENTRY_LOGS: &str = "shapes Java's entry logs or their flushing; this bookie's entry logs \
                          are written by its flush threads in paced 1 MiB O_DIRECT writes";
const CLIENT: &str = "a client setting of the BookKeeper client a Java bookie embeds for \
                      autorecovery; this bookie's autorecovery talks v3 to the bookies and reads \
                      from whichever replica answers";
const PLACEMENT: &str = "a placement setting of Java's region- or zone-aware policies; this \
                         bookie's autorecovery places copies rack-aware (docs/autorecovery.md)";
const TABLE_SERVICE: &str = "configures the table service (stream storage) that \
                             extraServerComponents starts in a Java bookie; this bookie does \
                             not run it";
const DLOG: &str = "a DistributedLog setting of the table service (extraServerComponents); not \
                    run by this bookie";
const STATS: &str = "tunes Java's stats collection; this bookie's /metrics always has its \
                     per-stage histograms (docs/semantics.md §6.2)";
const FORMATS: &str = "chooses the version of a Java on-disk format; this bookie writes its own \
                       formats (a Java bookie cannot read them: roll back to the directories \
                       it left)";
const SHELL: &str = "used by Java's shell commands only";

pub static KEYS: &[Key] = &[
    // --- The bookie's address and identity (docs/semantics.md §1.4) ---
    applied("bookiePort", Ty::Int, "the port to listen on and publish", |x, v| {
        x.c.port = v.range(0, u16::MAX as i64)? as u16;
        Ok(())
    }),
    applied("listeningInterface", Ty::Str, "the interface (or address) to listen on", |x, v| {
        let name = v.nonempty()?;
        x.c.bind_address = interface_address(name).map_err(|e| v.invalid(&e))?;
        x.c.cluster.listening_interface = Some(name.to_string());
        Ok(())
    }),
    applied("advertisedAddress", Ty::Str, "the address published in the bookie id", |x, v| {
        x.c.cluster.advertised_address = v.optional();
        Ok(())
    })
    .empty_unset(),
    applied("bookieId", Ty::Str, "the bookie id, when set", |x, v| {
        x.c.cluster.bookie_id = v.optional();
        Ok(())
    }),
    applied("useHostNameAsBookieID", Ty::Bool, "the host name in the bookie id", |x, v| {
        x.c.cluster.use_host_name_as_bookie_id = v.boolean()?;
        Ok(())
    }),
    applied("useShortHostName", Ty::Bool, "the short host name in the bookie id", |x, v| {
        x.c.cluster.use_short_host_name = v.boolean()?;
        Ok(())
    }),
    applied("allowLoopback", Ty::Bool, "allows a loopback address in the bookie id", |x, v| {
        x.c.cluster.allow_loopback = v.boolean()?;
        Ok(())
    }),
    applied("allowEphemeralPorts", Ty::Bool, "allows port 0 (an ephemeral port)", |x, v| {
        x.c.cluster.allow_ephemeral_ports = v.boolean()?;
        Ok(())
    }),
    applied(
        "permittedStartupUsers",
        Ty::List,
        "when set, the bookie starts only as one of these users (as Java: refused otherwise)",
        |x, v| {
            x.c.permitted_startup_users = Some(v.list().to_vec());
            Ok(())
        },
    ),
    ignored("disableServerSocketBind", Ty::Bool, "Java's in-process local transport; this bookie always listens on TCP"),
    ignored("enableLocalTransport", Ty::Bool, "Java's in-process local transport; this bookie always listens on TCP"),
    // --- Metadata and ZooKeeper (§1.1) ---
    applied(
        "metadataServiceUri",
        Ty::Str,
        "the metadata store (zk://, zk+hierarchical://, metadata-store:zk:); wins over zkServers",
        |x, v| {
            let uri = v.text();
            if !uri.contains("://") && !uri.starts_with("metadata-store:") {
                return Err(v.invalid("expected scheme://servers/path"));
            }
            x.c.cluster.metadata_service_uri = Some(uri.to_string());
            Ok(())
        },
    )
    .empty_unset(),
    applied(
        "zkServers",
        Ty::List,
        "ZooKeeper servers, when metadataServiceUri is not set; empty: none",
        |x, v| {
            x.c.cluster.zk_servers = Some(v.joined()).filter(|s| !s.is_empty());
            Ok(())
        },
    ),
    applied(
        "zkLedgersRootPath",
        Ty::Str,
        "the ledgers root with zkServers (unused with metadataServiceUri)",
        |x, v| {
            let path = v.text();
            if path.is_empty() {
                // Java's getString gives "": checked once metadataServiceUri is known.
                x.pending.zk_root_empty = Some(v.entry.origin.clone());
                return Ok(());
            }
            if !path.starts_with('/') || (path.len() > 1 && path.ends_with('/')) {
                return Err(v.invalid("expected an absolute ZooKeeper path like /ledgers"));
            }
            x.c.cluster.zk_ledgers_root_path = path.to_string();
            Ok(())
        },
    ),
    applied("zkTimeout", Ty::Int, "the ZooKeeper session timeout", |x, v| {
        x.c.cluster.zk_timeout = Duration::from_millis(v.range(1, i32::MAX as i64)?);
        Ok(())
    }),
    unhonoured(
        "zkEnableSecurity",
        Ty::Bool,
        Ours::Bool(false),
        "this bookie creates its znodes (registration, cookie) with open ACLs, not Java's \
         creator-only ones: anyone who reaches ZooKeeper can delete them",
    ),
    applied("ledgerManagerFactoryClass", Ty::Str, "the ledger layout, when metadataServiceUri names none", |x, v| {
        x.c.cluster.ledger_manager_factory_class = v.optional();
        Ok(())
    }),
    applied("ledgerManagerType", Ty::Str, "the ledger layout (legacy key)", |x, v| {
        x.c.cluster.ledger_manager_type = v.optional();
        Ok(())
    }),
    ignored("zkRetryBackoffStartMs", Ty::Int, "ZooKeeper retries: this bookie reconnects with its own backoff and keeps serving through an outage (docs/semantics.md §1.6)"),
    ignored("zkRetryBackoffMaxMs", Ty::Int, "ZooKeeper retries: this bookie reconnects with its own backoff and keeps serving through an outage (docs/semantics.md §1.6)"),
    ignored("zkRetryBackoffMaxRetries", Ty::Int, "ZooKeeper retries: this bookie reconnects with its own backoff and keeps serving through an outage (docs/semantics.md §1.6)"),
    ignored("zkRequestRateLimit", Ty::Double, "rate-limits Java's ZooKeeper requests; this bookie's are few (registration, cookies) and GC's are paced by gcMetadataOpRateLimit"),
    ignored("zkReplicationTaskRateLimit", Ty::Lazy, "rate-limits Java's worker's scans of ZooKeeper; this worker scans once a second when idle"),
    ignored("registrationManagerClass", Ty::Lazy, "Java's registration plug-in; this bookie registers in ZooKeeper as ZKRegistrationManager does"),
    ignored("metastoreImplClass", Ty::Lazy, "Java's metastore plug-in (unused by bookies)"),
    ignored("metastoreMaxEntriesPerScan", Ty::Lazy, "Java's metastore plug-in (unused by bookies)"),
    ignored("allowShadedLedgerManagerFactoryClass", Ty::Bool, "lets Java load a shaded ledger manager class; this bookie reads the layout from ZooKeeper"),
    ignored("shadedLedgerManagerFactoryClassPrefix", Ty::Str, "lets Java load a shaded ledger manager class; this bookie reads the layout from ZooKeeper"),
    ignored("ledgerMetadataVersion", Ty::Lazy, "the metadata format a Java client writes; this bookie writes no ledger metadata"),
    // --- Journal ---
    applied(
        "journalDirectories",
        Ty::List,
        "journal directories (shards spread over them); wins over journalDirectory",
        |x, v| {
            if x.pending.has_journal_dirs {
                x.c.journal_dirs = dirs(v, v.list())?;
            }
            Ok(())
        },
    )
    .empty_unset(),
    applied(
        "journalDirectory",
        Ty::Str,
        "the journal directory when journalDirectories is empty or unset (Java)",
        |x, v| {
            if !x.pending.has_journal_dirs {
                x.c.journal_dirs = dirs(v, &v.list()[..1])?;
            }
            Ok(())
        },
    ),
    applied("journalMaxGroupWaitMSec", Ty::Long, "the group commit's longest wait", |x, v| {
        x.c.journal.max_group_wait_us = v.range(0, 60_000)? * 1000;
        Ok(())
    }),
    applied("journalBufferedWritesThreshold", Ty::Long, "bytes that close a commit group", |x, v| {
        x.c.journal.buffered_writes_threshold_bytes = v.range(1, 1 << 30)? as usize;
        Ok(())
    }),
    applied("journalBufferedEntriesThreshold", Ty::Long, "entries that close a commit group (0: no limit)", |x, v| {
        x.c.journal.buffered_entries_threshold = v.range(0, 1 << 30)? as usize;
        Ok(())
    }),
    applied("journalFlushWhenQueueEmpty", Ty::Bool, "commit as soon as no add waits", |x, v| {
        x.c.journal.flush_when_queue_empty = v.boolean()?;
        Ok(())
    }),
    applied(
        "journalMaxSizeMB",
        Ty::Long,
        "an upper bound on our journal segment size (64 MiB)",
        |x, v| {
            let mb = v.range(1, 1 << 20)?;
            x.c.journal.segment_size_bytes = x.c.journal.segment_size_bytes.min(mb << 20);
            Ok(())
        },
    ),
    applied(
        "journalPreAllocSizeMB",
        Ty::Int,
        "free journal segments prepared at start (this size in whole segments)",
        |x, v| {
            x.pending.prealloc_bytes = Some(v.range(0, 1 << 20)? << 20);
            Ok(())
        },
    ),
    applied(
        "journalRecoveryMode",
        Ty::Str,
        "this bookie's own key: strict (default) or tolerate a corrupt journal at start",
        |x, v| {
            x.c.journal.recovery_mode = crate::store::journal_recovery::parse_mode(v.text())
                .map_err(|e| v.invalid(&e))?;
            Ok(())
        },
    ),
    applied(
        "skipReplayJournalInvalidRecord",
        Ty::Bool,
        "taking over a Java bookie: skip its journal's invalid records, as Java's replay",
        |x, v| {
            x.c.java_storage.skip_invalid_journal_records = v.boolean()?;
            Ok(())
        },
    ),
    unhonoured(
        "journalSyncData",
        Ty::Bool,
        Ours::Bool(true),
        "this bookie syncs every journal commit anyway and acknowledges an add only once it is \
         on disk: nothing is less durable, but adds wait for the disk as Java's would with true",
    ),
    unhonoured(
        "journalWriteData",
        Ty::Bool,
        Ours::Bool(true),
        "this bookie writes every entry's data to the journal anyway (Java with false does not, \
         and loses unflushed adds in a crash): adds are durable, at the journal's write cost",
    ),
    ignored("journalAdaptiveGroupWrites", Ty::Bool, "this bookie's group commit adapts to the disk always (journal/src/policy.rs)"),
    ignored("journalAlignmentSize", Ty::Int, JOURNAL_FILES),
    ignored("journalFormatVersionToWrite", Ty::Int, FORMATS),
    ignored("journalMaxBackups", Ty::Int, JOURNAL_FILES),
    ignored("journalRemoveFromPageCache", Ty::Bool, "this bookie's journal bypasses the page cache (O_DIRECT) always"),
    ignored("journalReuseFiles", Ty::Bool, "this bookie's journal reuses its segments always"),
    ignored("journalWriteBufferSizeKB", Ty::Int, JOURNAL_FILES),
    ignored("journalQueueSize", Ty::Int, "Java's journal queue; this bookie's adds wait in their shard's pending list, bounded by maxPendingAddRequestsPerThread"),
    ignored("journalMaxMemorySizeMb", Ty::Long, "bounds Java's journal queue memory; this bookie bounds adds in flight per connection and the write cache"),
    ignored("journalPageCacheFlushIntervalMSec", Ty::Long, JOURNAL_FILES),
    ignored("journalChannelProvider", Ty::Str, JOURNAL_FILES),
    ignored("numJournalCallbackThreads", Ty::Int, THREADS),
    // --- Ledger storage ---
    applied("ledgerDirectories", Ty::List, "ledger directories (each shard stores below each)", |x, v| {
        x.c.ledger_dirs = dirs(v, v.list())?;
        Ok(())
    }),
    applied("indexDirectories", Ty::List, "where the index files go, when set", |x, v| {
        x.c.index_dirs = Some(dirs(v, v.list())?);
        Ok(())
    }),
    applied("allowStorageExpansion", Ty::Bool, "new ledger directories accepted at start", |x, v| {
        x.c.cluster.allow_storage_expansion = v.boolean()?;
        Ok(())
    }),
    applied(
        "ledgerStorageClass",
        Ty::Class,
        "which Java storage's directories to take over in place (README, takeover); ours is used after",
        |x, v| {
            x.c.java_storage.ledger_storage_class = Some(v.text().to_string());
            Ok(())
        },
    ),
    applied(
        "sortedLedgerStorageEnabled",
        Ty::Bool,
        "(legacy) with ledgerStorageClass, which Java storage to take over",
        |x, v| {
            x.c.java_storage.sorted_disabled = !v.boolean()?;
            Ok(())
        },
    ),
    applied("flushInterval", Ty::Int, "the write cache is flushed at least this often", |x, v| {
        x.c.flush_interval = Duration::from_millis(v.range(1, i32::MAX as i64)?);
        Ok(())
    }),
    applied(
        "logSizeLimit",
        Ty::Long,
        "entry log size (64 KiB to 2 GiB−1)",
        |x, v| {
            // Java caps entry logs below 2 GiB (their offsets are ints); ours are u64, but
            // the same range keeps an operator's file meaning the same.
            x.c.ledger_store.entry_log_size_bytes = v.range(64 << 10, (2i64 << 30) - 1)?;
            Ok(())
        },
    ),
    applied(
        "dbStorage_writeCacheMaxSizeMb",
        Ty::Long,
        "the write cache of the whole bookie, split over the shards",
        |x, v| {
            x.pending.write_cache_total_bytes = Some((v.range(1, 1 << 24)? as usize) << 20);
            Ok(())
        },
    )
    .empty_unset(),
    applied(
        "dbStorage_readAheadCacheMaxSizeMb",
        Ty::Long,
        "the read-ahead cache of the whole bookie, split over the shards (0: off)",
        |x, v| {
            x.c.read_ahead.cache_bytes = (v.range(0, 1 << 24)? as usize) << 20;
            Ok(())
        },
    )
    .empty_unset(),
    applied("dbStorage_readAheadCacheBatchSize", Ty::Long, "entries per read-ahead", |x, v| {
        x.c.read_ahead.batch_entries = v.range(1, 1 << 20)? as usize;
        Ok(())
    }),
    applied(
        "dbStorage_readAheadCacheBatchBytesSize",
        Ty::Long,
        "the largest read-ahead read (≤ 0: ours, 256 KiB, where Java has no limit)",
        |x, v| {
            let n = v.long()?;
            if n > 0 {
                x.c.read_ahead.batch_bytes = (n as usize).clamp(4096, 16 << 20);
            }
            Ok(())
        },
    ),
    ignored("dbStorage_maxThrottleTimeMs", Ty::Lazy, "how long Java holds an add when its write cache is full; this bookie stops reading the socket instead (docs/semantics.md §4.2)"),
    ignored("dbStorage_directIOEntryLogger", Ty::Lazy, "Java's direct-I/O entry logger; this bookie's entry logs are always O_DIRECT"),
    ignored("dbStorage_directIOEntryLoggerTotalWriteBufferSizeMB", Ty::Lazy, ENTRY_LOGS),
    ignored("dbStorage_directIOEntryLoggerTotalReadBufferSizeMB", Ty::Lazy, ENTRY_LOGS),
    ignored("dbStorage_directIOEntryLoggerReadBufferSizeMB", Ty::Lazy, ENTRY_LOGS),
    ignored("dbStorage_directIOEntryLoggerMaxFdCacheTimeSeconds", Ty::Lazy, ENTRY_LOGS),
    ignored("dbStorage_rocksDB_blockCacheSize", Ty::Lazy, ROCKSDB).empty_unset(),
    ignored("dbStorage_rocksDB_blockSize", Ty::Lazy, ROCKSDB),
    ignored("dbStorage_rocksDB_bloomFilterBitsPerKey", Ty::Lazy, ROCKSDB),
    ignored("dbStorage_rocksDB_checksum_type", Ty::Lazy, ROCKSDB),
    ignored("dbStorage_rocksDB_format_version", Ty::Lazy, ROCKSDB),
    ignored("dbStorage_rocksDB_logLevel", Ty::Lazy, ROCKSDB),
    ignored("dbStorage_rocksDB_logPath", Ty::Lazy, ROCKSDB),
    ignored("dbStorage_rocksDB_lz4CompressionEnabled", Ty::Lazy, ROCKSDB),
    ignored("dbStorage_rocksDB_maxSizeInLevel1MB", Ty::Lazy, ROCKSDB),
    ignored("dbStorage_rocksDB_numFilesInLevel0", Ty::Lazy, ROCKSDB),
    ignored("dbStorage_rocksDB_numLevels", Ty::Lazy, ROCKSDB),
    ignored("dbStorage_rocksDB_sstSizeInMB", Ty::Lazy, ROCKSDB),
    ignored("dbStorage_rocksDB_writeBufferSizeMB", Ty::Lazy, ROCKSDB),
    ignored("defaultRocksdbConf", Ty::Str, ROCKSDB),
    ignored("entryLocationRocksdbConf", Ty::Str, ROCKSDB),
    ignored("ledgerMetadataRocksdbConf", Ty::Str, ROCKSDB),
    ignored("entryLocationCompactionInterval", Ty::Long, ROCKSDB),
    ignored("maxOperationNumbersInSingleRocksdbWriteBatch", Ty::Int, ROCKSDB),
    ignored("rocksDBDeleteEntriesBatchSize", Ty::Int, ROCKSDB),
    ignored("entryLogFilePreallocationEnabled", Ty::Bool, ENTRY_LOGS),
    ignored("entryLogPerLedgerEnabled", Ty::Bool, ENTRY_LOGS),
    ignored("entryLogPerLedgerCounterLimitsMultFactor", Ty::Int, ENTRY_LOGS),
    ignored("entrylogMapAccessExpiryTimeInSeconds", Ty::Int, ENTRY_LOGS),
    ignored("maximumNumberOfActiveEntryLogs", Ty::Int, ENTRY_LOGS),
    ignored("flushEntrylogBytes", Ty::Long, ENTRY_LOGS),
    ignored("readBufferSizeBytes", Ty::Int, ENTRY_LOGS),
    ignored("writeBufferSizeBytes", Ty::Int, ENTRY_LOGS),
    ignored("fileInfoFormatVersionToWrite", Ty::Int, FORMATS),
    ignored("fileInfoCacheInitialCapacity", Ty::Int, INDEX_FILES),
    ignored("fileInfoMaxIdleTime", Ty::Long, INDEX_FILES),
    ignored("openFileLimit", Ty::Int, INDEX_FILES),
    ignored("pageLimit", Ty::Int, INDEX_FILES),
    ignored("pageSize", Ty::Int, INDEX_FILES),
    ignored("skipListSizeLimit", Ty::Long, INDEX_FILES),
    ignored("skipListArenaChunkSize", Ty::Int, INDEX_FILES),
    ignored("skipListArenaMaxAllocSize", Ty::Int, INDEX_FILES),
    ignored("numOfMemtableFlushThreads", Ty::Int, THREADS),
    // --- Garbage collection and compaction (§4.7, §4.8) ---
    applied("gcWaitTime", Ty::Long, "the deleted-ledger GC period", |x, v| {
        x.c.cluster.gc_wait_time = Duration::from_millis(v.range(1, 1 << 40)?);
        Ok(())
    }),
    applied(
        "gcOverreplicatedLedgerWaitTime",
        Ty::Long,
        "the over-replicated-ledger GC period (≤ 0: off)",
        |x, v| {
            x.c.cluster.gc_overreplicated_ledger_wait_time =
                Duration::from_millis(v.long()?.clamp(0, 1 << 40) as u64);
            Ok(())
        },
    ),
    applied("verifyMetadataOnGC", Ty::Bool, "re-reads a ledger's metadata before dropping it", |x, v| {
        x.c.cluster.verify_metadata_on_gc = v.boolean()?;
        Ok(())
    }),
    applied("gcMetadataOpRateLimit", Ty::Int, "GC's ZooKeeper requests per second", |x, v| {
        x.c.cluster.gc_metadata_op_rate = v.range(1, u32::MAX as i64)? as u32;
        Ok(())
    }),
    applied("minorCompactionThreshold", Ty::Double, "minor compaction's live-bytes threshold (≤ 0: off)", |x, v| {
        x.c.gc.minor_threshold = threshold(v)?;
        Ok(())
    }),
    applied("majorCompactionThreshold", Ty::Double, "major compaction's live-bytes threshold (≤ 0: off)", |x, v| {
        x.c.gc.major_threshold = threshold(v)?;
        Ok(())
    }),
    applied("minorCompactionInterval", Ty::Long, "minor compaction's period in seconds (≤ 0: off)", |x, v| {
        x.c.gc.minor_interval = seconds(v)?;
        Ok(())
    }),
    applied("majorCompactionInterval", Ty::Long, "major compaction's period in seconds (≤ 0: off)", |x, v| {
        x.c.gc.major_interval = seconds(v)?;
        Ok(())
    }),
    applied("compactionRateByEntries", Ty::Int, "compaction's pace in entries per second", |x, v| {
        x.c.gc.rate_by_entries = v.range(1, u32::MAX as i64)?;
        Ok(())
    }),
    applied("compactionRateByBytes", Ty::Int, "compaction's pace in bytes per second", |x, v| {
        x.c.gc.rate_by_bytes = v.range(1, i64::MAX)?;
        Ok(())
    }),
    applied("isThrottleByBytes", Ty::Bool, "compaction paced by bytes, not entries", |x, v| {
        x.c.gc.throttle_by_bytes = v.boolean()?;
        Ok(())
    }),
    applied("isForceGCAllowWhenNoSpace", Ty::Bool, "compaction allowed while the disk is full", |x, v| {
        x.c.gc.force_gc_allow_when_no_space = v.boolean()?;
        Ok(())
    }),
    ignored("compactionRate", Ty::Int, "Java's deprecated name of compactionRateByEntries; this bookie reads compactionRateByEntries"),
    ignored("compactionMaxOutstandingRequests", Ty::Int, "Java's compaction batches; this bookie's compaction copies in paced runs (compactionRateBy*)"),
    ignored("forceAllowCompaction", Ty::Bool, "lets Java's admin force a compaction with thresholds off; this bookie's PUT /api/v1/bookie/gc always may"),
    ignored("minorCompactionMaxTimeMillis", Ty::Long, "bounds one Java compaction run; this bookie's compaction is paced and yields to the flush"),
    ignored("majorCompactionMaxTimeMillis", Ty::Long, "bounds one Java compaction run; this bookie's compaction is paced and yields to the flush"),
    ignored("useTransactionalCompaction", Ty::Bool, "Java's transactional compaction; this bookie's compaction commits through its MANIFEST always"),
    ignored("useTargetEntryLogSizeForGc", Ty::Bool, "Java's GC heuristic; this bookie compares live bytes with each log's own size"),
    ignored("gcEntryLogMetadataCacheEnabled", Ty::Bool, "caches Java's entry-log metadata in RocksDB; this bookie keeps it in memory"),
    ignored("gcEntryLogMetadataCachePath", Ty::Str, "caches Java's entry-log metadata in RocksDB; this bookie keeps it in memory").empty_unset(),
    ignored("gcOverreplicatedLedgerMaxConcurrentRequests", Ty::Int, "this bookie's over-replicated-ledger GC is paced by gcMetadataOpRateLimit"),
    ignored("verifyMetadataOnGc", Ty::Bool, "a misspelling some files carry; Java reads verifyMetadataOnGC only"),
    // --- Disks and read-only mode (§3.3) ---
    applied("diskUsageThreshold", Ty::Float, "read-only above this disk usage", |x, v| {
        x.c.disk.usage_threshold = fraction(v)?;
        Ok(())
    }),
    applied("diskUsageWarnThreshold", Ty::Float, "a warning above this disk usage", |x, v| {
        x.c.disk.warn_threshold = fraction(v)?;
        Ok(())
    }),
    applied("diskUsageLwmThreshold", Ty::Float, "writable again below this usage", |x, v| {
        x.c.disk.lwm_threshold = fraction(v)?;
        x.pending.lwm_set = true;
        Ok(())
    }),
    applied("diskCheckInterval", Ty::Int, "the disk checker's period", |x, v| {
        x.c.disk.check_interval = Duration::from_millis(v.range(1, i32::MAX as i64)?);
        Ok(())
    }),
    applied("readOnlyModeEnabled", Ty::Bool, "read-only (not exit) when the disks fill", |x, v| {
        x.c.disk.read_only_mode_enabled = v.boolean()?;
        Ok(())
    }),
    applied("forceReadOnlyBookie", Ty::Bool, "starts read-only", |x, v| {
        x.c.disk.force_read_only = v.boolean()?;
        Ok(())
    }),
    applied(
        "readOnlyModeOnAnyDiskFullEnabled",
        Ty::Bool,
        "read-only when any (not every) ledger directory is full",
        |x, v| {
            x.c.disk.read_only_on_any_full = v.boolean()?;
            Ok(())
        },
    ),
    applied(
        "minUsableSizeForHighPriorityWrites",
        Ty::Long,
        "free bytes kept for recovery adds while read-only",
        |x, v| {
            x.c.disk.min_usable_for_high_priority = v.range(0, i64::MAX)?;
            Ok(())
        },
    ),
    ignored("minUsableSizeForEntryLogCreation", Ty::Long, "Java's read-only entry-log creation floor; this bookie's flush stops at diskUsageThreshold and keeps minUsableSizeForHighPriorityWrites"),
    ignored("minUsableSizeForIndexFileCreation", Ty::Long, "Java's read-only index-file creation floor; this bookie's flush stops at diskUsageThreshold and keeps minUsableSizeForHighPriorityWrites"),
    ignored("allowMultipleDirsUnderSameDiskPartition", Ty::Bool, "Java's refusal of two directories on one partition; this bookie accounts for disk usage per file system"),
    applied(
        "persistBookieStatusEnabled",
        Ty::Bool,
        "the read-only or writable mode kept across restarts in BOOKIE_STATUS (Java's format)",
        |x, v| {
            x.c.disk.persist_status = v.boolean()?;
            Ok(())
        },
    ),
    // --- Requests and connections ---
    applied("nettyMaxFrameSizeBytes", Ty::Int, "the largest frame accepted", |x, v| {
        let bytes = v.range(1024, 1 << 30)? as usize;
        x.c.max_frame_bytes = bytes;
        x.c.journal.max_record_bytes = bytes + (64 << 10);
        Ok(())
    }),
    applied("maxBatchReadSize", Ty::Long, "caps a v2 batch read's reply", |x, v| {
        x.c.max_batch_read_bytes = v.range(1, 1 << 40)? as i64;
        Ok(())
    }),
    applied(
        "maxPendingAddRequestsPerThread",
        Ty::Int,
        "unanswered requests per connection before reading it stops",
        |x, v| {
            x.c.max_pending_per_connection = v.range(1, 1 << 24)? as usize;
            Ok(())
        },
    ),
    applied(
        "maxPendingReadRequestsPerThread",
        Ty::Int,
        "a shard's queue of cache-miss reads",
        |x, v| {
            x.c.read_queue = v.range(1, 1 << 24)? as usize;
            Ok(())
        },
    ),
    applied(
        "numReadWorkerThreads",
        Ty::Int,
        "reader threads, the bookie's total divided among shards (at least one each)",
        |x, v| {
            x.pending.read_threads = Some(v.range(0, 4096)? as usize);
            Ok(())
        },
    ),
    applied(
        "waitTimeoutOnResponseBackpressureMs",
        Ty::Long,
        "how long a connection may take no reply byte (< 0: forever)",
        |x, v| {
            let ms = v.long()?;
            x.c.response_backpressure_timeout =
                (ms >= 0).then(|| Duration::from_millis(ms.min(1 << 40) as u64));
            Ok(())
        },
    ),
    applied(
        "closeChannelOnResponseTimeout",
        Ty::Bool,
        "closes (not just drains) a connection stuck past that timeout",
        |x, v| {
            x.c.close_on_response_timeout = v.boolean()?;
            Ok(())
        },
    ),
    ignored("maxAddsInProgressLimit", Ty::Int, "Java's global limit of adds in progress; this bookie bounds them per connection (maxPendingAddRequestsPerThread) and by the write cache"),
    ignored("maxReadsInProgressLimit", Ty::Int, "Java's global limit of reads in progress; this bookie bounds them per shard (maxPendingReadRequestsPerThread)"),
    ignored("readWorkerThreadsThrottlingEnabled", Ty::Bool, "throttles Java's read pool; this bookie bounds each shard's read queue"),
    ignored("numAddWorkerThreads", Ty::Int, THREADS),
    ignored("numHighPriorityWorkerThreads", Ty::Int, THREADS),
    ignored("numLongPollWorkerThreads", Ty::Int, THREADS),
    ignored("serverNumIOThreads", Ty::Int, THREADS),
    ignored("serverNumAcceptorThreads", Ty::Int, THREADS),
    ignored("enableBusyWait", Ty::Bool, "Java's busy-waiting threads; this bookie's shards sleep in io_uring and epoll"),
    ignored("serverTcpNoDelay", Ty::Bool, "this bookie sets TCP_NODELAY on every connection always"),
    ignored("serverSockKeepalive", Ty::Bool, NETTY),
    ignored("serverTcpKeepIdle", Ty::Int, NETTY),
    ignored("serverTcpKeepIntvl", Ty::Int, NETTY),
    ignored("serverTcpKeepCnt", Ty::Int, NETTY),
    ignored("serverTcpLinger", Ty::Int, NETTY),
    ignored("serverWriteBufferLowWaterMark", Ty::Int, "Java's write-buffer marks; this bookie bounds each connection's unsent replies at 4 MiB"),
    ignored("serverWriteBufferHighWaterMark", Ty::Int, "Java's write-buffer marks; this bookie bounds each connection's unsent replies at 4 MiB"),
    ignored("byteBufAllocatorSizeInitial", Ty::Int, NETTY),
    ignored("byteBufAllocatorSizeMin", Ty::Int, NETTY),
    ignored("byteBufAllocatorSizeMax", Ty::Int, NETTY),
    ignored("allocatorPoolingPolicy", Ty::Str, NETTY),
    ignored("allocatorPoolingConcurrency", Ty::Int, NETTY),
    ignored("allocatorOutOfMemoryPolicy", Ty::Str, NETTY),
    ignored("allocatorLeakDetectionPolicy", Ty::Str, NETTY).empty_unset(),
    ignored("requestTimerTickDurationMs", Ty::Int, "Java's request timer wheel; this bookie's shards keep their own timers"),
    ignored("requestTimerNumTicks", Ty::Int, "Java's request timer wheel; this bookie's shards keep their own timers"),
    ignored("preserveMdcForTaskExecution", Ty::Bool, "Java logging context; this bookie logs per shard"),
    ignored("bookieDeathWatchInterval", Ty::Int, "how often Java checks that its own threads live; this bookie exits when a shard thread dies"),
    // --- HTTP admin server, metrics (§6.1, §6.2) ---
    applied("httpServerEnabled", Ty::Bool, "runs the HTTP admin server", |x, v| {
        x.c.http.enabled = v.boolean()?;
        x.c.http.required = x.c.http.enabled;
        Ok(())
    }),
    applied("httpServerPort", Ty::Int, "the admin server's port", |x, v| {
        x.c.http.port = v.range(0, u16::MAX as i64)? as u16;
        Ok(())
    }),
    applied("httpServerHost", Ty::Str, "the admin server's address", |x, v| {
        x.c.http.host = v.nonempty()?.to_string();
        Ok(())
    }),
    ignored("httpServerClass", Ty::Str, "Java's HTTP server plug-in (Vert.x); this bookie serves the same routes itself"),
    applied(
        "statsProviderClass",
        Ty::Class,
        "with the Prometheus provider and the admin server off, /metrics on prometheusStatsHttpPort",
        |x, v| {
            x.c.http.prometheus.provider_class = Some(v.text().to_string());
            Ok(())
        },
    ),
    applied("prometheusStatsHttpEnable", Ty::Bool, "the Prometheus provider's own endpoint", |x, v| {
        x.c.http.prometheus.http_enable = v.boolean()?;
        Ok(())
    }),
    applied("prometheusStatsHttpAddress", Ty::Str, "the Prometheus provider's address", |x, v| {
        x.c.http.prometheus.address = v.nonempty()?.to_string();
        Ok(())
    }),
    applied("prometheusStatsHttpPort", Ty::Int, "the Prometheus provider's port", |x, v| {
        x.c.http.prometheus.port = v.range(0, u16::MAX as i64)? as u16;
        Ok(())
    }),
    ignored("prometheusStatsLatencyRolloverSeconds", Ty::Int, "Java's summary rollover; this bookie's latency families are cumulative histograms"),
    ignored("enableStatistics", Ty::Bool, STATS),
    ignored("enableTaskExecutionStats", Ty::Bool, STATS),
    ignored("limitStatsLogging", Ty::Bool, STATS),
    ignored("sanityCheckMetricsEnabled", Ty::Bool, STATS),
    // --- TLS, HTTPS and authentication (protocol.md §4.3; security/) ---
    tls("tlsProviderFactoryClass", Ty::Str, "START_TLS on the bookie port (TLSContextFactory)"),
    tls("tlsProvider", Ty::Str, "the TLS implementation name (rustls here)"),
    tls("tlsClientAuthentication", Ty::Bool, "requires client certificates"),
    tls("tlsKeyStoreType", Ty::Str, "PEM or PKCS12 (JKS refused with the keytool command)"),
    tls("tlsKeyStore", Ty::Str, "the bookie's key and certificate"),
    tls("tlsKeyStorePasswordPath", Ty::Str, "the key store's password file"),
    tls("tlsTrustStoreType", Ty::Str, "PEM or PKCS12"),
    tls("tlsTrustStore", Ty::Str, "the CA certificates clients are checked against"),
    tls("tlsTrustStorePasswordPath", Ty::Str, "the trust store's password file"),
    tls("tlsCertificatePath", Ty::Str, "the certificate chain, with a PEM key store"),
    tls("tlsCertFilesRefreshDurationSeconds", Ty::Long, "re-reads the TLS files this often"),
    tls("tlsEnabledCipherSuites", Ty::Str, "cipher suites (Java reads the first of a comma list)"),
    tls("tlsEnabledProtocols", Ty::Str, "protocols (Java reads the first of a comma list)"),
    http_tls("httpServerTlsEnable", Ty::Bool, "HTTPS on the admin server, client certificates required"),
    http_tls("httpServerKeyStorePath", Ty::Str, "the admin server's key store (PKCS12)"),
    http_tls("httpServerKeyStorePassword", Ty::Str, "its password"),
    http_tls("httpServerTrustStorePath", Ty::Str, "the admin server's trust store (PKCS12)"),
    http_tls("httpServerTrustStorePassword", Ty::Str, "its password"),
    applied(
        "bookieAuthProviderFactoryClass",
        Ty::Str,
        "client authentication (certificate roles: BookieAuthZFactory; SASL refused at start)",
        |x, v| {
            let value = v.text().to_string();
            x.c.auth.set("bookieAuthProviderFactoryClass", &value).map_err(|e| v.invalid(&e))
        },
    ),
    applied("authorizedRoles", Ty::List, "the certificate roles allowed", |x, v| {
        x.c.auth.set("authorizedRoles", &v.joined()).map_err(|e| v.invalid(&e))
    }),
    // --- Autorecovery (docs/autorecovery.md) ---
    applied(
        "autoRecoveryDaemonEnabled",
        Ty::Bool,
        "runs autorecovery in this bookie: an auditor candidate and a replication worker, with Java's",
        |x, v| {
            x.c.autorecovery.enabled = v.boolean()?;
            Ok(())
        },
    ),
    ar("lostBookieRecoveryDelay", "seconds a lost bookie may come back before its ledgers are marked", |x, v| {
        x.c.autorecovery.settings.lost_bookie_recovery_delay_s = v.range(0, i32::MAX as i64)? as i32;
        Ok(())
    }),
    ar("auditorPeriodicCheckInterval", "seconds between two entry-wise checks of every ledger (0: never)", |x, v| {
        x.c.autorecovery.settings.check_all_interval_s = v.long()?.max(0) as u64;
        Ok(())
    }),
    ar("auditorPeriodicBookieCheckInterval", "seconds between two lost-bookie audits besides those a change starts", |x, v| {
        x.c.autorecovery.settings.bookie_check_interval_s = v.long()?.max(0) as u64;
        Ok(())
    }),
    ar("auditorLedgerVerificationPercentage", "entries read per checked fragment beyond its first and last", |x, v| {
        x.c.autorecovery.settings.verification_percentage = v.range(0, 100)? as u32;
        Ok(())
    }),
    ar("rereplicationEntryBatchSize", "entries a copy keeps in flight", |x, v| {
        x.c.autorecovery.settings.batch_entries = v.range(1, 1 << 20)? as usize;
        Ok(())
    }),
    ar("openLedgerRereplicationGracePeriod", "ms an open ledger's writer has to replace a lost bookie itself before the worker fences and recovers it", |x, v| {
        x.c.autorecovery.settings.open_ledger_grace_ms = v.long()?.max(0) as u64;
        Ok(())
    }),
    ar("lockReleaseOfFailedLedgerGracePeriod", "ms a failed ledger's lock is kept at most", |x, v| {
        x.c.autorecovery.settings.failed_lock_grace_ms = v.long()?.max(0) as u64;
        Ok(())
    }),
    ar("rwRereplicateBackoffMs", "ms the worker waits after a failed round", |x, v| {
        x.c.autorecovery.settings.backoff_ms = v.long()?.max(0) as u64;
        Ok(())
    }),
    ar("replicationRateByBytes", "bytes per second a worker copies at most (Java's -1: no limit; ours then 64 MiB/s)", |x, v| {
        let n = v.long()?;
        x.c.autorecovery.settings.rate_bytes_per_sec = if n > 0 {
            n as u64
        } else {
            autorecovery::settings::DEFAULT_RATE_BYTES_PER_SEC
        };
        Ok(())
    }),
    ar("storeSystemTimeAsLedgerUnderreplicatedMarkTime", "the auditor's records carry the time they were made", |x, v| {
        x.c.autorecovery.settings.store_mark_time = v.boolean()?;
        Ok(())
    }),
    ar("ensemblePlacementPolicy", "where copies go: rack-aware (Java's default) or DefaultEnsemblePlacementPolicy's random choice", |x, v| {
        x.c.autorecovery.placement_class = v.optional();
        Ok(())
    }),
    ar("reppDnsResolverClass", "Pulsar's rack mapping (racks from its /bookies znode) when it names it", |x, v| {
        x.c.autorecovery.settings.pulsar_racks = v.text().contains("BookieRackAffinityMapping");
        Ok(())
    }),
    ar("enforceMinNumRacksPerWriteQuorum", "no copy on a bookie whose rack breaks the rack rule", |x, v| {
        x.c.autorecovery.enforce_min_racks = v.boolean()?;
        Ok(())
    }),
    ignored("auditorPeriodicPlacementPolicyCheckInterval", Ty::Lazy, "Java's placement-policy check (off by default) only reports; this auditor does not run it"),
    ignored("auditorReplicasCheckInterval", Ty::Lazy, "Java's replicas check (off by default) only reports; this auditor does not run it"),
    ignored("repairedPlacementPolicyNotAdheringBookieEnabled", Ty::Lazy, "part of Java's placement-policy check, not run here"),
    ignored("underreplicatedLedgerRecoveryGracePeriod", Ty::Lazy, "part of Java's placement-policy check (a report of old records), not run here"),
    ignored("auditorMaxNumberOfConcurrentOpenLedgerOperations", Ty::Lazy, "bounds Java's concurrent checks; this auditor checks one ledger at a time"),
    ignored("auditorAcquireConcurrentOpenLedgerOperationsTimeOutMSec", Ty::Lazy, "bounds Java's concurrent checks; this auditor checks one ledger at a time"),
    ignored("inFlightReadEntryNumInLedgerChecker", Ty::Lazy, "bounds Java's checker's reads; this checker reads a fragment's probes in one pipelined batch"),
    unhonoured(
        "dataIntegrityChecking",
        Ty::Bool,
        Ours::Bool(false),
        "this bookie does not run Java's data integrity check: started on emptied disks it \
         does not copy its ledgers back from the other bookies (autorecovery must)",
    ),
    ignored("dataIntegrityStampMissingCookies", Ty::Lazy, "part of Java's data integrity check (dataIntegrityChecking)"),
    ignored("localConsistencyCheckOnStartup", Ty::Bool, "Java's start-up scan of its own index; this bookie checks every entry's CRC when it reads it"),
    ignored("localScrubInterval", Ty::Long, "Java's periodic scrub; this bookie checks every entry's CRC when it reads it"),
    ignored("localScrubRateLimit", Ty::Double, "Java's periodic scrub; this bookie checks every entry's CRC when it reads it"),
    // --- The embedded client's settings (used by autorecovery and the shell) ---
    ignored("useV2WireProtocol", Ty::Lazy, CLIENT),
    ignored("stickyReadSEnabled", Ty::Lazy, CLIENT),
    ignored("reorderReadSequenceEnabled", Ty::Lazy, CLIENT),

    ignored("minNumRacksPerWriteQuorum", Ty::Lazy, PLACEMENT),

    ignored("enforceMinNumFaultDomainsForWrite", Ty::Lazy, PLACEMENT),
    ignored("minNumZonesPerWriteQuorum", Ty::Lazy, PLACEMENT),
    ignored("desiredNumZonesPerWriteQuorum", Ty::Lazy, PLACEMENT),
    ignored("enforceStrictZoneawarePlacement", Ty::Lazy, PLACEMENT),
    ignored("ignoreLocalNodeInPlacementPolicy", Ty::Lazy, PLACEMENT),
    ignored("entryFormatterClass", Ty::Lazy, SHELL),
    ignored("ledgerIdFormatterClass", Ty::Lazy, SHELL),
    // --- Extra server components: the table service ---
    unhonoured(
        "extraServerComponents",
        Ty::List,
        Ours::Empty,
        "this bookie does not start extra server components (the table service of stream \
         storage): clients of those components find nothing",
    )
    .empty_unset(),
    ignored("ignoreExtraServerComponentsStartupFailures", Ty::Bool, TABLE_SERVICE),
    ignored("storageserver.grpc.port", Ty::Lazy, TABLE_SERVICE),
    ignored("storage.range.store.dirs", Ty::Lazy, TABLE_SERVICE),
    ignored("storage.serve.readonly.tables", Ty::Lazy, TABLE_SERVICE),
    ignored("storage.cluster.controller.schedule.interval.ms", Ty::Lazy, TABLE_SERVICE),
    ignored("dlog.bkcEnsembleSize", Ty::Lazy, DLOG),
    ignored("dlog.bkcWriteQuorumSize", Ty::Lazy, DLOG),
    ignored("dlog.bkcAckQuorumSize", Ty::Lazy, DLOG),
];

/// An autorecovery key: read as Java reads it when autorecovery runs; a value Java's getter
/// would refuse stops the start only then (Java reads these only in its autorecovery).
const fn ar(name: &'static str, does: &'static str, set: super::keys::Setter) -> Key {
    applied(name, Ty::Lazy, does, set)
}

const fn tls(name: &'static str, ty: Ty, does: &'static str) -> Key {
    applied(name, ty, does, |x, v| {
        let value = canonical(v)?;
        x.c.tls.set(&v.entry.key, &value).map_err(|e| v.invalid(&e))
    })
}

const fn http_tls(name: &'static str, ty: Ty, does: &'static str) -> Key {
    applied(name, ty, does, |x, v| {
        let value = canonical(v)?;
        x.c.http
            .tls
            .set(&v.entry.key, &value)
            .map_err(|e| v.invalid(&e))
    })
}

/// The value as the module that takes it expects: a boolean or number as Java read it
/// (`yes` is `true`, `0x10` is `16`), anything else the text Java's getter returns.
fn canonical(v: &V) -> Result<String, String> {
    let ty = super::keys::lookup(&v.entry.key).map_or(Ty::Str, |k| k.ty);
    Ok(match ty {
        Ty::Bool => v.boolean()?.to_string(),
        Ty::Int | Ty::Long => v.long()?.to_string(),
        _ => v.text().to_string(),
    })
}

/// A compaction threshold: at most 1.0; zero or below disables (Java).
fn threshold(v: &V) -> Result<f64, String> {
    let f = v.double()?;
    if !f.is_finite() || f > 1.0 {
        return Err(v.invalid("expected at most 1.0 (0 or less disables)"));
    }
    Ok(f.max(0.0))
}

/// Whole seconds; zero or below is zero (disabled, for compaction intervals).
fn seconds(v: &V) -> Result<Duration, String> {
    Ok(Duration::from_secs(v.long()?.clamp(0, 1 << 40) as u64))
}

fn fraction(v: &V) -> Result<f64, String> {
    let f = v.double()?;
    if !(f > 0.0 && f <= 1.0) {
        return Err(v.invalid("expected a fraction in (0, 1]"));
    }
    Ok(f)
}

/// A directory list, as Java's: at least one, none empty, none twice.
fn dirs(v: &V, list: &[String]) -> Result<Vec<std::path::PathBuf>, String> {
    let mut dirs: Vec<std::path::PathBuf> = Vec::new();
    for d in list {
        if d.is_empty() {
            // Java would make `new File("")` of it and write below `/current`.
            return Err(v.invalid("an empty directory in the list (a stray comma?)"));
        }
        let d = std::path::PathBuf::from(d);
        if dirs.contains(&d) {
            return Err(v.invalid(&format!("lists {} twice", d.display())));
        }
        dirs.push(d);
    }
    if dirs.is_empty() {
        return Err(v.invalid("empty"));
    }
    Ok(dirs)
}

/// `listeningInterface` names a network interface (eth0); an address is accepted as well.
pub fn interface_address(name: &str) -> Result<String, String> {
    if name.parse::<std::net::IpAddr>().is_ok() {
        return Ok(name.to_string());
    }
    let Ok(addrs) = nix::ifaddrs::getifaddrs() else {
        return Err("cannot list the network interfaces".into());
    };
    addrs
        .filter(|ifa| ifa.interface_name == name)
        .find_map(|ifa| Some(ifa.address?.as_sockaddr_in()?.ip().to_string()))
        .ok_or_else(|| format!("no IPv4 address on interface {name}"))
}
