//! Tests of `conf.rs`: keys onto settings, Java's refusals, warnings, and the stock files.

use super::*;
use std::time::Duration;

use crate::config::keys_table::interface_address;

/// `listeningInterface` names an interface (its IPv4 address) or is an address already.
#[test]
fn interface_address_by_name_or_address() {
    assert_eq!(interface_address("lo").as_deref(), Ok("127.0.0.1"));
    assert_eq!(interface_address("10.1.2.3").as_deref(), Ok("10.1.2.3"));
    assert_eq!(
        interface_address("no-such-if0"),
        Err("no IPv4 address on interface no-such-if0".to_string())
    );
}

fn conf(text: &str) -> Result<(BookieConfig, Applied), String> {
    let mut c = conf_defaults();
    let a = apply(&parse_properties(text)?, &mut c)?;
    Ok((c, a))
}

/// The journal's recovery switch and preallocation: `journalRecoveryMode` takes strict or
/// tolerate (anything else names the key); `journalPreAllocSizeMB` counts whole segments,
/// so Java's default 16 prepares none with 64 MiB segments, and 128 prepares two.
#[test]
fn response_backpressure_keys() {
    let (c, _) = conf("").unwrap();
    assert_eq!(c.response_backpressure_timeout, None);
    assert!(!c.close_on_response_timeout);
    let (c, _) =
        conf("waitTimeoutOnResponseBackpressureMs=250\ncloseChannelOnResponseTimeout=true\n")
            .unwrap();
    assert_eq!(
        c.response_backpressure_timeout,
        Some(Duration::from_millis(250))
    );
    assert!(c.close_on_response_timeout);
    let (c, _) = conf("waitTimeoutOnResponseBackpressureMs=-1\n").unwrap();
    assert_eq!(c.response_backpressure_timeout, None);
    let err = conf("waitTimeoutOnResponseBackpressureMs=soon\n").unwrap_err();
    assert!(err.contains("waitTimeoutOnResponseBackpressureMs"), "{err}");
}

#[test]
fn journal_recovery_mode_and_preallocation_keys() {
    let (c, _) = conf("journalRecoveryMode=tolerate\njournalPreAllocSizeMB=128\n").unwrap();
    assert_eq!(
        c.journal.recovery_mode,
        journal::RecoveryMode::TolerateCorruption
    );
    assert_eq!(c.journal.preallocate_segments, 2);
    let (c, _) = conf("journalPreAllocSizeMB=16\n").unwrap();
    assert_eq!(c.journal.recovery_mode, journal::RecoveryMode::Strict);
    assert_eq!(c.journal.preallocate_segments, 0);
    let err = conf("journalRecoveryMode=sometimes\n").unwrap_err();
    assert!(err.contains("journalRecoveryMode"), "{err}");
}

#[test]
fn the_prometheus_provider_has_its_own_endpoint_while_the_admin_server_is_off() {
    const STOCK: &str = "httpServerEnabled=false\n\
         statsProviderClass=org.apache.bookkeeper.stats.prometheus.PrometheusMetricsProvider\n";
    let (c, a) = conf(STOCK).unwrap();
    assert!(a.ignored.is_empty(), "{:?}", a.ignored);
    assert_eq!(
        c.http.prometheus.own_endpoint(c.http.enabled),
        Some(("0.0.0.0", 8000)),
        "Java's defaults"
    );
    let (c, _) = conf(&format!(
        "{STOCK}prometheusStatsHttpAddress=10.0.0.5\nprometheusStatsHttpPort=9100\n"
    ))
    .unwrap();
    assert_eq!(
        c.http.prometheus.own_endpoint(c.http.enabled),
        Some(("10.0.0.5", 9100))
    );
    // The admin server on: /metrics is its (Java skips its own server then).
    let (c, _) = conf(&STOCK.replace("=false", "=true")).unwrap();
    assert_eq!(c.http.prometheus.own_endpoint(c.http.enabled), None);
    let (c, _) = conf(&format!("{STOCK}prometheusStatsHttpEnable=false\n")).unwrap();
    assert_eq!(c.http.prometheus.own_endpoint(c.http.enabled), None);
    // Java's default provider (NullStatsProvider) and any other: no endpoint.
    let (c, _) = conf("httpServerEnabled=false\n").unwrap();
    assert_eq!(c.http.prometheus.own_endpoint(c.http.enabled), None);
    let (c, _) = conf(&STOCK.replace("prometheus.Prometheus", "codahale.Codahale")).unwrap();
    assert_eq!(c.http.prometheus.own_endpoint(c.http.enabled), None);
    let err = conf("prometheusStatsHttpPort=99999\n").unwrap_err();
    assert!(err.contains("prometheusStatsHttpPort"), "{err}");
}

#[test]
fn read_worker_threads_are_shared_among_shards() {
    let shards = BookieConfig::default().shard_count();
    let (c, _) = conf("numReadWorkerThreads=8\n").unwrap();
    assert_eq!(c.read_threads_per_shard, 8usize.div_ceil(shards));
    // Java's 0 (reads on the network threads) still gets one reader per shard.
    let (c, _) = conf("numReadWorkerThreads=0\n").unwrap();
    assert_eq!(c.read_threads_per_shard, 1);
    let (c, _) = conf("").unwrap();
    assert_eq!(c.read_threads_per_shard, 1, "adds first by default");
    assert!(conf("numReadWorkerThreads=lots\n").is_err());
}

#[test]
fn keys_map_onto_the_config() {
    let (c, a) = conf(
        "bookiePort=3999\n\
         journalDirectories=/j\n\
         ledgerDirectories = /l\n\
         journalMaxGroupWaitMSec=3\n\
         journalBufferedWritesThreshold=65536\n\
         journalBufferedEntriesThreshold=100\n\
         journalFlushWhenQueueEmpty=yes\n\
         journalMaxSizeMB=32\n\
         flushInterval=5000\n\
         nettyMaxFrameSizeBytes=5253120\n\
         maxPendingAddRequestsPerThread=500\n\
         maxPendingReadRequestsPerThread=600\n\
         dbStorage_writeCacheMaxSizeMb=512\n\
         diskUsageThreshold=0.9\n\
         diskUsageWarnThreshold=0.8\n\
         diskCheckInterval=2000\n\
         readOnlyModeEnabled=true\n\
         forceReadOnlyBookie=false\n\
         httpServerEnabled=true\n\
         httpServerPort=8000\n\
         metadataServiceUri=zk+hierarchical://zk1:2181;zk2:2181/ledgers\n\
         zkTimeout=30000\n\
         bookieId=bk-1\n\
         advertisedAddress=10.0.0.5\n\
         useHostNameAsBookieID=true\n\
         allowLoopback=true\n\
         ledgerStorageClass=org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage\n\
         journalAlignmentSize=4096\n",
    )
    .unwrap();
    assert_eq!(c.port, 3999);
    assert_eq!(c.journal_dirs, vec![PathBuf::from("/j")]);
    assert_eq!(c.ledger_dirs, vec![PathBuf::from("/l")]);
    assert_eq!(c.journal.max_group_wait_us, 3000);
    assert_eq!(c.journal.buffered_writes_threshold_bytes, 65536);
    assert_eq!(c.journal.buffered_entries_threshold, 100);
    assert!(c.journal.flush_when_queue_empty);
    assert_eq!(c.journal.segment_size_bytes, 32 << 20);
    assert_eq!(c.flush_interval, Duration::from_secs(5));
    assert_eq!(c.max_frame_bytes, 5253120);
    assert_eq!(c.max_pending_per_connection, 500);
    assert_eq!(c.read_queue, 600);
    assert_eq!(a.write_cache_total_bytes, Some(512 << 20));
    assert_eq!(c.disk.usage_threshold, 0.9);
    assert_eq!(c.disk.warn_threshold, 0.8);
    assert_eq!(c.disk.lwm_threshold, 0.9, "lwm defaults to the threshold");
    assert_eq!(c.disk.check_interval, Duration::from_secs(2));
    assert!(c.http.enabled && c.http.required);
    assert_eq!(c.http.port, 8000);
    assert_eq!(
        c.cluster.metadata_service_uri.as_deref(),
        Some("zk+hierarchical://zk1:2181;zk2:2181/ledgers")
    );
    assert_eq!(c.cluster.zk_timeout, Duration::from_secs(30));
    assert_eq!(c.cluster.bookie_id.as_deref(), Some("bk-1"));
    assert_eq!(c.cluster.advertised_address.as_deref(), Some("10.0.0.5"));
    assert!(c.cluster.use_host_name_as_bookie_id && c.cluster.allow_loopback);
    assert_eq!(
        c.bind_address, "0.0.0.0",
        "advertisedAddress does not move the bind"
    );
    assert_eq!(a.ignored, vec!["journalAlignmentSize".to_string()]);
    assert!(a.unknown.is_empty() && a.warnings.is_empty());
}

#[test]
fn journal_directories_wins_over_journal_directory_in_any_order() {
    for text in [
        "journalDirectories=/a,/b\njournalDirectory=/old\n",
        "journalDirectory=/old\njournalDirectories=/a,/b\n",
    ] {
        let (c, _) = conf(text).unwrap();
        assert_eq!(
            c.journal_dirs,
            vec![PathBuf::from("/a"), PathBuf::from("/b")],
            "{text}"
        );
    }
    let (c, a) = conf("journalDirectory=/only\njournalDirectories=\n").unwrap();
    assert_eq!(c.journal_dirs, vec![PathBuf::from("/only")]);
    assert!(a.ignored.is_empty(), "{:?}", a.ignored);
    let (c, a) = conf("journalDirectory=/old\njournalDirectories=/a\n").unwrap();
    assert_eq!(c.journal_dirs, vec![PathBuf::from("/a")]);
    assert!(a.ignored.is_empty(), "{:?}", a.ignored);
}

#[test]
fn defaults_without_keys() {
    let (c, a) = conf("# nothing\n").unwrap();
    assert_eq!(c.bind_address, "0.0.0.0");
    assert_eq!(c.journal_dirs, vec![PathBuf::from("/tmp/bk-txn")]);
    assert!(!c.http.enabled);
    assert!(!c.cluster.has_metadata_store());
    assert!(a.ignored.is_empty() && key_report(&a) == (None, None));
}

#[test]
fn listening_interface() {
    let (c, _) = conf("listeningInterface=lo").unwrap();
    assert_eq!(c.bind_address, "127.0.0.1");
    let (c, _) = conf("listeningInterface=10.1.2.3").unwrap();
    assert_eq!(c.bind_address, "10.1.2.3");
    let err = conf("listeningInterface=nosuchif0").unwrap_err();
    assert!(err.contains("listeningInterface") && err.contains("nosuchif0"));
}

#[test]
fn invalid_values_name_key_and_value() {
    let cases = [
        ("bookiePort=70000", "bookiePort"),
        ("bookiePort=abc", "bookiePort"),
        ("diskUsageThreshold=1.5", "diskUsageThreshold"),
        ("diskUsageThreshold=0", "diskUsageThreshold"),
        ("diskUsageThreshold=nan", "diskUsageThreshold"),
        ("diskUsageWarnThreshold=0.99", "diskUsageWarnThreshold"),
        ("diskUsageLwmThreshold=0.99", "diskUsageLwmThreshold"),
        ("readOnlyModeEnabled=maybe", "readOnlyModeEnabled"),
        ("journalDirectories=/a,/b,/a", "journalDirectories"),
        ("indexDirectories=,", "indexDirectories"),
        ("ledgerDirectories=", "ledgerDirectories"),
        ("flushInterval=-1", "flushInterval"),
        ("httpServerPort=", "httpServerPort"),
        ("metadataServiceUri=localhost", "metadataServiceUri"),
        ("zkLedgersRootPath=ledgers", "zkLedgersRootPath"),
        (
            "maxPendingReadRequestsPerThread=0",
            "maxPendingReadRequestsPerThread",
        ),
        (
            "forceReadOnlyBookie=true\nreadOnlyModeEnabled=false",
            "forceReadOnlyBookie",
        ),
        ("majorCompactionThreshold=1.5", "majorCompactionThreshold"),
        (
            "minorCompactionThreshold=0.9\nmajorCompactionThreshold=0.5",
            "minorCompactionThreshold",
        ),
        (
            "gcWaitTime=7200000\nminorCompactionInterval=3600",
            "minorCompactionInterval",
        ),
        (
            "minorCompactionInterval=86400\nmajorCompactionInterval=86400",
            "minorCompactionInterval",
        ),
        ("compactionRateByEntries=0", "compactionRateByEntries"),
        ("logSizeLimit=100", "logSizeLimit"),
        ("isThrottleByBytes=sometimes", "isThrottleByBytes"),
    ];
    for (text, key) in cases {
        let err = conf(text).expect_err(text);
        assert!(err.contains(key), "{text:?} -> {err}");
    }
    let err = conf("bookiePort = 99999").unwrap_err();
    assert!(err.contains("\"99999\"") && err.contains("line 1"), "{err}");
}

#[test]
fn compaction_keys() {
    let (c, a) = conf(
        "minorCompactionThreshold=0.3\nminorCompactionInterval=600\n\
         majorCompactionThreshold=0.5\nmajorCompactionInterval=-1\n\
         compactionRateByEntries=50\ncompactionRateByBytes=2000000\nisThrottleByBytes=true\n\
         logSizeLimit=67108864\ngcWaitTime=300000\nallowStorageExpansion=true",
    )
    .unwrap();
    assert!(a.ignored.is_empty(), "{:?}", a.ignored);
    assert_eq!(c.gc.minor_threshold, 0.3);
    assert_eq!(c.gc.minor_interval, Duration::from_secs(600));
    assert_eq!(c.gc.major_threshold, 0.5);
    assert!(c.gc.major_interval.is_zero(), "-1 disables");
    assert_eq!(c.gc.rate_by_entries, 50);
    assert_eq!(c.gc.rate_by_bytes, 2_000_000);
    assert!(c.gc.throttle_by_bytes);
    assert_eq!(c.ledger_store.entry_log_size_bytes, 64 << 20);
    assert_eq!(c.cluster.gc_wait_time, Duration::from_secs(300));
    assert!(c.cluster.allow_storage_expansion);
    // A threshold of 0 (or less) disables that compaction, as in Java.
    let (c, _) = conf("majorCompactionThreshold=-1").unwrap();
    assert_eq!(c.gc.major_threshold, 0.0);
    // The rest of garbage collection: defaults, then set; 0 or below disables
    // over-replicated-ledger GC, as in Java.
    let (c, _) = conf("").unwrap();
    assert_eq!(
        c.cluster.gc_overreplicated_ledger_wait_time,
        Duration::from_secs(86_400)
    );
    assert!(!c.cluster.verify_metadata_on_gc && !c.gc.force_gc_allow_when_no_space);
    let (c, a) = conf(
        "gcOverreplicatedLedgerWaitTime=5000
verifyMetadataOnGC=true
         isForceGCAllowWhenNoSpace=true",
    )
    .unwrap();
    assert!(a.ignored.is_empty(), "{:?}", a.ignored);
    assert_eq!(
        c.cluster.gc_overreplicated_ledger_wait_time,
        Duration::from_secs(5)
    );
    assert!(c.cluster.verify_metadata_on_gc && c.gc.force_gc_allow_when_no_space);
    for off in ["0", "-1"] {
        let (c, _) = conf(&format!("gcOverreplicatedLedgerWaitTime={off}")).unwrap();
        assert!(c.cluster.gc_overreplicated_ledger_wait_time.is_zero());
    }
    assert_eq!(c.cluster.gc_metadata_op_rate, 1000);
    let (c, _) = conf("gcMetadataOpRateLimit=50").unwrap();
    assert_eq!(c.cluster.gc_metadata_op_rate, 50);
    assert!(conf("gcMetadataOpRateLimit=0").is_err());
    assert!(conf("isForceGCAllowWhenNoSpace=maybe").is_err());
    assert!(conf("gcOverreplicatedLedgerWaitTime=soon").is_err());
}

#[test]
fn tls_and_auth_keys_are_known_and_checked() {
    let (c, a) = conf(
        "tlsProviderFactoryClass=org.apache.bookkeeper.tls.TLSContextFactory\n\
         tlsKeyStoreType=PEM\ntlsClientAuthentication=true\n\
         bookieAuthProviderFactoryClass=org.apache.bookkeeper.tls.BookieAuthZFactory\n\
         authorizedRoles=admin",
    )
    .unwrap();
    assert!(a.ignored.is_empty(), "{:?}", a.ignored);
    assert!(c.tls.enabled() && c.tls.client_authentication);
    let err = conf("tlsKeyStoreType=FOO").unwrap_err();
    assert!(
        err.contains("tlsKeyStoreType") && err.contains("line 1"),
        "{err}"
    );
    let err = conf(
        "bookieAuthProviderFactoryClass=org.apache.bookkeeper.sasl.SASLBookieAuthProviderFactory",
    )
    .unwrap_err();
    assert!(err.contains("SASL"), "{err}");
}

#[test]
fn the_example_conf_parses() {
    let text = include_str!("../../conf/bk_server.conf");
    let (c, a) = conf(text).unwrap();
    assert_eq!(c.port, 3181);
    assert!(c.http.enabled);
    assert!(
        a.ignored.is_empty(),
        "example uses only known keys: {:?}",
        a.ignored
    );
}

/// The stock files' key lines (bookie/tests/stock-conf/SOURCES.md).
fn stock_files() -> Vec<(String, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/stock-conf");
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .expect("bookie/tests/stock-conf")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "keys"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    out.sort();
    assert_eq!(out.len(), 8, "five bk_server.conf and three Pulsar files");
    out
}

/// What an operator edits in a stock file: the value of a key line in place, or a line added.
pub fn operator_edit(text: &str, edits: &[(&str, &str)]) -> String {
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    for (key, value) in edits {
        let at = lines
            .iter()
            .position(|l| l.split_once('=').is_some_and(|(k, _)| k.trim() == *key));
        match at {
            Some(i) => lines[i] = format!("{key}={value}"),
            None => lines.push(format!("{key}={value}")),
        }
    }
    lines.join("\n") + "\n"
}

/// Every key of every stock file is in the registry (docs/config-keys.md), and our bookie
/// takes each file edited only where an operator edits one: metadata service, directories,
/// ports. The one warning a stock file earns is Pulsar's autorecovery, which we do not run.
#[test]
fn the_stock_files_start_our_bookie() {
    for (name, text) in stock_files() {
        for p in parse_properties(&text).unwrap() {
            assert!(
                crate::config::keys::lookup(&p.key).is_some(),
                "{name}: key {} is not in keys_table.rs",
                p.key
            );
        }
        // As shipped (Java starts on it too, and fails only to reach ZooKeeper).
        let (_, a) = conf(&text).unwrap_or_else(|e| panic!("{name} as shipped: {e}"));
        assert!(a.unknown.is_empty(), "{name}: {:?}", a.unknown);
        let pulsar = name.starts_with("pulsar");
        let journal_key = if pulsar {
            "journalDirectory"
        } else {
            "journalDirectories"
        };
        let mut edits = vec![
            ("zkServers", "10.0.0.1:2181,10.0.0.2:2181"),
            (journal_key, "/mnt/journal"),
            ("ledgerDirectories", "/mnt/ledgers1,/mnt/ledgers2"),
            ("bookiePort", "3999"),
            ("httpServerPort", "8999"),
            ("prometheusStatsHttpPort", "9999"),
        ];
        if !pulsar {
            edits.push((
                "metadataServiceUri",
                "zk+hierarchical://10.0.0.1:2181/ledgers",
            ));
        }
        let edited = operator_edit(&text, &edits);
        let (c, a) = conf(&edited).unwrap_or_else(|e| panic!("{name} edited: {e}"));
        assert_eq!(c.port, 3999, "{name}");
        assert_eq!(
            c.journal_dirs,
            vec![PathBuf::from("/mnt/journal")],
            "{name}"
        );
        assert_eq!(c.ledger_dirs.len(), 2, "{name}");
        assert!(c.cluster.has_metadata_store(), "{name}");
        if pulsar {
            assert_eq!(
                c.cluster.metadata_service_uri, None,
                "{name}: empty is unset"
            );
            assert_eq!(
                c.cluster.zk_servers.as_deref(),
                Some("10.0.0.1:2181,10.0.0.2:2181")
            );
            assert!(c.java_storage.is_db(), "{name}");
            assert_eq!(c.max_pending_per_connection, 10000, "{name}");
            assert!(a.warnings.is_empty(), "{name}: {:#?}", a.warnings);
            assert!(
                c.autorecovery.enabled,
                "{name}: Pulsar's file turns autorecovery on"
            );
            assert_eq!(c.autorecovery.settings.batch_entries, 100, "{name}");
            assert!(
                c.autorecovery.settings.pulsar_racks,
                "{name}: Pulsar's rack mapping"
            );
            // Java's getLongVariableOrDefault: the empty sizes leave our defaults.
            assert_eq!(a.write_cache_total_bytes, None);
        } else {
            assert!(a.warnings.is_empty(), "{name}: {:#?}", a.warnings);
        }
    }
}

/// Java takes an empty value for unset on the keys whose getters say so, and refuses it on
/// typed keys (its getters throw even with a default).
#[test]
fn empty_values_as_java_reads_them() {
    let (c, a) = conf(
        "metadataServiceUri=\nadvertisedAddress=\ndbStorage_writeCacheMaxSizeMb=\n\
         dbStorage_readAheadCacheMaxSizeMb=\ndbStorage_rocksDB_blockCacheSize=\n\
         extraServerComponents=\nzkServers=\nhttpServerKeyStorePath=\n",
    )
    .unwrap();
    assert!(a.warnings.is_empty(), "{:?}", a.warnings);
    assert_eq!(c.cluster.metadata_service_uri, None);
    assert_eq!(c.cluster.advertised_address, None);
    assert_eq!(c.cluster.zk_servers, None);
    assert_eq!(a.write_cache_total_bytes, None);
    assert_eq!(c.read_ahead.cache_bytes, 256 << 20);
    for typed in [
        "bookiePort",
        "zkTimeout",
        "journalSyncData",
        "diskUsageThreshold",
        "gcWaitTime",
    ] {
        let err = conf(&format!("{typed}=\n")).unwrap_err();
        assert!(err.contains(typed) && err.contains("empty"), "{err}");
    }
    // An ignored key is checked as Java reads it too.
    let err = conf("journalAdaptiveGroupWrites=maybe\n").unwrap_err();
    assert!(err.contains("journalAdaptiveGroupWrites"), "{err}");
    let err = conf("serverNumIOThreads=\n").unwrap_err();
    assert!(err.contains("serverNumIOThreads"), "{err}");
    // ...but not one Java reads only in code a bookie may not run.
    assert!(conf("auditorPeriodicCheckInterval=weekly\n").is_ok());
    // The Helm chart's empty zkLedgersRootPath beside a metadataServiceUri is fine; alone, it
    // would put the ledgers root at ZooKeeper's root.
    assert!(conf("zkLedgersRootPath=\nmetadataServiceUri=zk://z:2181/ledgers\n").is_ok());
    let err = conf("zkLedgersRootPath=\nzkServers=z:2181\n").unwrap_err();
    assert!(err.contains("zkLedgersRootPath"), "{err}");
}

/// A key given twice: Java's list, whose first value every scalar getter returns.
#[test]
fn a_key_given_twice_reads_its_first_value_and_says_so() {
    let (c, a) = conf("bookiePort=3999\nzkTimeout=5000\nbookiePort=4999\n").unwrap();
    assert_eq!(c.port, 3999);
    assert_eq!(a.warnings.len(), 1, "{:?}", a.warnings);
    assert!(a.warnings[0].contains("bookiePort") && a.warnings[0].contains("line 3"));
    // Lists: a scalar getter reads the first element, a list getter all of them.
    let (c, _) = conf("tlsEnabledProtocols=TLSv1.3,TLSv1.2\nledgerDirectories=/a, /b\n").unwrap();
    assert_eq!(c.tls.enabled_protocols, vec!["TLSv1.3".to_string()]);
    assert_eq!(
        c.ledger_dirs,
        vec![PathBuf::from("/a"), PathBuf::from("/b")]
    );
    let err = conf("ledgerDirectories=/a,\n").unwrap_err();
    assert!(err.contains("stray comma"), "{err}");
}

/// Java's number and boolean forms, and interpolation.
#[test]
fn java_forms_and_interpolation() {
    let (c, _) = conf(
        "bookiePort=+3999\nzkTimeout=0x2710\nuseHostNameAsBookieID=Y\nallowLoopback=on\n\
         base=/srv/bk\nledgerDirectories=${base}/l1,${base}/l2\n\
         journalDirectories=${sys:java.io.tmpdir}/j\n",
    )
    .unwrap();
    assert_eq!(c.port, 3999);
    assert_eq!(c.cluster.zk_timeout, Duration::from_millis(10_000));
    assert!(c.cluster.use_host_name_as_bookie_id && c.cluster.allow_loopback);
    assert_eq!(
        c.ledger_dirs,
        vec![PathBuf::from("/srv/bk/l1"), PathBuf::from("/srv/bk/l2")]
    );
    assert_eq!(c.journal_dirs, vec![PathBuf::from("/tmp/j")]);
    assert!(
        conf("bookiePort=0X10\n").is_err(),
        "uppercase 0X is not Java's"
    );
    let err = conf("x=${x}\nbookiePort=${x}\n").unwrap_err();
    assert!(err.contains("infinite loop"), "{err}");
}

/// Unhonoured keys warn, each with its own line, only when their value loses something.
#[test]
fn unhonoured_keys_warn_on_their_own_line() {
    let (_, a) = conf(
        "journalSyncData=true\njournalWriteData=true\n\
         zkEnableSecurity=false\nextraServerComponents=\n\
         dataIntegrityChecking=false\n",
    )
    .unwrap();
    assert!(a.warnings.is_empty(), "{:?}", a.warnings);
    assert_eq!(a.ignored.len(), 5);
    let (_, a) = conf(
        "journalSyncData=false\njournalWriteData=false\n\
         zkEnableSecurity=true\n\
         extraServerComponents=org.apache.bookkeeper.stream.server.StreamStorageLifecycleComponent\n\
         dataIntegrityChecking=true\n",
    )
    .unwrap();
    assert_eq!(a.warnings.len(), 5, "{:#?}", a.warnings);
    assert!(
        a.warnings[0].starts_with("journalSyncData=false"),
        "{}",
        a.warnings[0]
    );
    assert!(a.warnings.iter().all(|w| w.contains("is not honoured")));
}

#[test]
fn permitted_startup_users_as_java_checks_them() {
    let me = nix::unistd::User::from_uid(nix::unistd::getuid())
        .unwrap()
        .unwrap()
        .name;
    let (c, _) = conf(&format!("permittedStartupUsers=nobody-else, {me}\n")).unwrap();
    assert!(check_startup_user(&c).is_ok());
    let (c, _) = conf("permittedStartupUsers=nobody-else\n").unwrap();
    let err = check_startup_user(&c).unwrap_err();
    assert!(err.contains("permittedStartupUsers"), "{err}");
    let (c, _) = conf("permittedStartupUsers=\n").unwrap();
    assert!(
        check_startup_user(&c).is_err(),
        "an empty list permits no one (Java)"
    );
    let (c, _) = conf("").unwrap();
    assert!(check_startup_user(&c).is_ok());
}

#[test]
fn unknown_keys_are_told_apart_from_known_ignored_ones() {
    let (_, a) = conf("journalAlignmentSize=4096\nbookiPort=3181\n").unwrap();
    assert_eq!(a.ignored, vec!["journalAlignmentSize".to_string()]);
    assert_eq!(a.unknown, vec!["bookiPort".to_string()]);
    let (unknown, ignored) = key_report(&a);
    assert!(unknown.unwrap().contains("bookiPort"));
    assert!(ignored.unwrap().contains("journalAlignmentSize"));
}

/// A literal comma survives only behind five or six backslashes in the file (the reader and
/// two list splits each take some), as in commons-configuration2.
#[test]
fn escaped_commas_through_the_whole_pipeline() {
    let elements = |text: &str| {
        let p = &parse_properties(text).unwrap()[0];
        crate::config::values::elements(&p.value)
    };
    assert_eq!(elements("k=a\\,b"), vec!["a", "b"]);
    assert_eq!(elements("k=a\\\\\\\\\\,b"), vec!["a,b"]);
    assert_eq!(elements("k=a\\\\\\\\\\\\,b"), vec!["a,b"]);
    assert_eq!(elements("k=a\\\\b"), vec!["a\\b"]);
}

/// Autorecovery's keys apply when it runs; a value Java's autorecovery would refuse stops the
/// start only then (Java reads them only there), and warns otherwise.
#[test]
fn autorecovery_keys() {
    let (c, a) = conf(
        "autoRecoveryDaemonEnabled=true\nlostBookieRecoveryDelay=30\nrereplicationEntryBatchSize=100\n\
         openLedgerRereplicationGracePeriod=5000\nreplicationRateByBytes=-1\n\
         reppDnsResolverClass=org.apache.pulsar.zookeeper.ZkBookieRackAffinityMapping\n\
         ensemblePlacementPolicy=org.apache.bookkeeper.client.DefaultEnsemblePlacementPolicy\n",
    )
    .unwrap();
    assert!(a.warnings.is_empty(), "{:?}", a.warnings);
    let s = &c.autorecovery.settings;
    assert!(c.autorecovery.enabled);
    assert_eq!(
        (
            s.lost_bookie_recovery_delay_s,
            s.batch_entries,
            s.open_ledger_grace_ms
        ),
        (30, 100, 5000)
    );
    assert_eq!(
        s.rate_bytes_per_sec,
        autorecovery::settings::DEFAULT_RATE_BYTES_PER_SEC
    );
    assert!(s.pulsar_racks);
    assert!(c
        .autorecovery
        .placement_class
        .as_deref()
        .unwrap()
        .ends_with("DefaultEnsemblePlacementPolicy"));
    let err = conf("autoRecoveryDaemonEnabled=true\nlostBookieRecoveryDelay=soon\n").unwrap_err();
    assert!(err.contains("lostBookieRecoveryDelay"), "{err}");
    let (_, a) = conf("lostBookieRecoveryDelay=soon\n").unwrap();
    assert_eq!(a.warnings.len(), 1, "{:?}", a.warnings);
    assert!(
        a.warnings[0].contains("autorecovery, which is off"),
        "{:?}",
        a.warnings
    );
}
