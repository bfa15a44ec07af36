//! Reading `bk_server.conf`: the Java properties format, and the keys an operator sets mapped
//! onto [`BookieConfig`] (docs/semantics.md §6.4).
//!
//! Why our own parser: the format is small but has rules an operator's file relies on —
//! `key=value`, `key:value` and `key value`, `#`/`!` comment lines, a trailing `\` continuing
//! the line (leading blanks of the next line dropped), `\t \n \r \f \uXXXX` escapes and `\x`
//! meaning `x` — exactly as `java.util.Properties.load` reads them. List values (directories)
//! are comma-separated, as Apache Commons Configuration splits them.
//!
//! Mapping: [`apply`] starts from the Java defaults a conf-file bookie has (bind all addresses,
//! HTTP off, `/tmp/bk-txn` and `/tmp/bk-data`) and sets what the file says. A value that does
//! not parse or is out of range is an error naming the key, the value and the line, and stops
//! the start. Keys this bookie does not use are returned so the caller logs them once, in one
//! line. `BK_<key>` environment variables (`conf_env`) come after the file, and command-line
//! flags after both (see `main.rs`), so they win.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::BookieConfig;

/// One `key=value` of a properties file, with the line where its logical line starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Property {
    pub key: String,
    pub value: String,
    /// The line of the file; 0: a `BK_<key>` environment variable (`conf_env`).
    pub line: usize,
}

fn is_blank(c: char) -> bool {
    c == ' ' || c == '\t' || c == '\x0c'
}

/// Parses the text of a Java properties file. Later duplicates win (as in `Properties`).
pub fn parse_properties(text: &str) -> Result<Vec<Property>, String> {
    let mut out: Vec<Property> = Vec::new();
    let mut lines = natural_lines(text).into_iter().peekable();
    while let Some((number, first)) = lines.next() {
        let trimmed = first.trim_start_matches(is_blank);
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with('!') {
            continue;
        }
        // Join continuation lines: a line ending in an odd number of backslashes continues.
        let mut logical = String::from(trimmed);
        while ends_with_odd_backslashes(&logical) {
            logical.pop();
            match lines.next() {
                Some((_, next)) => logical.push_str(next.trim_start_matches(is_blank)),
                None => break,
            }
        }
        let (key, value) = split_key_value(&logical);
        let key = unescape(key).map_err(|e| format!("line {number}: {e}"))?;
        let value = unescape(value).map_err(|e| format!("line {number}: {e}"))?;
        out.retain(|p| p.key != key);
        out.push(Property {
            key,
            value,
            line: number,
        });
    }
    Ok(out)
}

/// Lines split on `\n`, `\r\n` or `\r`, numbered from 1.
fn natural_lines(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let (mut start, mut i, mut number) = (0, 0, 1);
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => {
                out.push((number, &text[start..i]));
                number += 1;
                i += 1;
                start = i;
            }
            b'\r' => {
                out.push((number, &text[start..i]));
                number += 1;
                i += if bytes.get(i + 1) == Some(&b'\n') {
                    2
                } else {
                    1
                };
                start = i;
            }
            _ => i += 1,
        }
    }
    if start < bytes.len() {
        out.push((number, &text[start..]));
    }
    out
}

fn ends_with_odd_backslashes(s: &str) -> bool {
    s.bytes().rev().take_while(|&b| b == b'\\').count() % 2 == 1
}

/// The raw (still escaped) key and value of a logical line that starts with a non-blank.
fn split_key_value(line: &str) -> (&str, &str) {
    let mut escaped = false;
    let mut key_end = line.len();
    for (i, c) in line.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        if c == '\\' {
            escaped = true;
        } else if c == '=' || c == ':' || is_blank(c) {
            key_end = i;
            break;
        }
    }
    let key = &line[..key_end];
    let mut rest = line[key_end..].trim_start_matches(is_blank);
    if rest.starts_with('=') || rest.starts_with(':') {
        rest = rest[1..].trim_start_matches(is_blank);
    }
    (key, rest)
}

fn unescape(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\x0c'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                let code = (hex.len() == 4)
                    .then(|| u32::from_str_radix(&hex, 16).ok())
                    .flatten()
                    .ok_or_else(|| format!("malformed \\uxxxx escape: \\u{hex}"))?;
                // A lone surrogate half cannot be a char: keep the replacement character.
                out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    Ok(out)
}

/// What applying a file did besides setting fields.
#[derive(Debug, Default)]
pub struct Applied {
    /// Keys of the file this bookie does not use (logged once by the caller).
    pub ignored: Vec<String>,
    /// `dbStorage_writeCacheMaxSizeMb` in bytes, for the whole bookie (split over the shards
    /// once the shard count is known).
    pub write_cache_total_bytes: Option<usize>,
}

/// The settings a conf-file bookie starts from: ours, with Java's defaults where an operator's
/// file may rely on them (bind everything, HTTP off, /tmp directories).
pub fn conf_defaults() -> BookieConfig {
    let mut c = BookieConfig {
        bind_address: "0.0.0.0".into(),
        journal_dirs: vec![PathBuf::from("/tmp/bk-txn")],
        ledger_dirs: vec![PathBuf::from("/tmp/bk-data")],
        ..BookieConfig::default()
    };
    c.http.enabled = false;
    c.http.host = "0.0.0.0".into();
    c
}

/// Reads and parses a properties file.
pub fn read(path: &Path) -> Result<Vec<Property>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let text = String::from_utf8_lossy(&bytes);
    parse_properties(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Sets the fields of `config` the properties name.
pub fn apply(props: &[Property], config: &mut BookieConfig) -> Result<Applied, String> {
    let mut applied = Applied::default();
    for p in props {
        config
            .properties
            .insert(p.key.clone(), p.value.trim().to_string());
    }
    let mut lwm_set = false;
    let mut prealloc_bytes = None;
    let mut read_threads = None;
    // Java's getJournalDirNames: a non-empty journalDirectories wins over journalDirectory,
    // whichever comes later (in the file or from BK_ variables).
    let has_journal_dirs = props
        .iter()
        .any(|p| p.key == "journalDirectories" && !p.value.trim().is_empty());
    for p in props {
        let v = Value(p);
        let c = &mut *config;
        match p.key.as_str() {
            "bookiePort" => c.port = v.parse_range(0, u16::MAX as u64)? as u16,
            "listeningInterface" => {
                let name = v.nonempty()?;
                c.bind_address = interface_address(name).map_err(|e| v.invalid(&e))?;
                c.cluster.listening_interface = Some(name.to_string());
            }
            "advertisedAddress" => c.cluster.advertised_address = v.optional(),
            "bookieId" => c.cluster.bookie_id = v.optional(),
            "useHostNameAsBookieID" => c.cluster.use_host_name_as_bookie_id = v.boolean()?,
            "useShortHostName" => c.cluster.use_short_host_name = v.boolean()?,
            "allowLoopback" => c.cluster.allow_loopback = v.boolean()?,
            "allowEphemeralPorts" => c.cluster.allow_ephemeral_ports = v.boolean()?,
            "metadataServiceUri" => {
                let uri = v.nonempty()?;
                if !uri.contains("://") && !uri.starts_with("metadata-store:") {
                    return Err(v.invalid("expected scheme://servers/path"));
                }
                c.cluster.metadata_service_uri = Some(uri.to_string());
            }
            "zkServers" => c.cluster.zk_servers = Some(v.nonempty()?.to_string()),
            "zkLedgersRootPath" => {
                let path = v.nonempty()?;
                if !path.starts_with('/') || (path.len() > 1 && path.ends_with('/')) {
                    return Err(v.invalid("expected an absolute ZooKeeper path like /ledgers"));
                }
                c.cluster.zk_ledgers_root_path = path.to_string();
            }
            "zkTimeout" => c.cluster.zk_timeout = v.millis(1)?,
            "zkEnableSecurity" => c.cluster.zk_enable_security = v.boolean()?,
            "ledgerManagerFactoryClass" => c.cluster.ledger_manager_factory_class = v.optional(),
            "ledgerManagerType" => c.cluster.ledger_manager_type = v.optional(),
            "gcWaitTime" => c.cluster.gc_wait_time = v.millis(1)?,
            "gcOverreplicatedLedgerWaitTime" => {
                // Java: 0 (or below) disables over-replicated-ledger GC.
                c.cluster.gc_overreplicated_ledger_wait_time = v.millis_or_zero()?
            }
            "verifyMetadataOnGC" => c.cluster.verify_metadata_on_gc = v.boolean()?,
            "gcMetadataOpRateLimit" => {
                c.cluster.gc_metadata_op_rate = v.parse_range(1, u32::MAX as u64)? as u32
            }
            "minorCompactionThreshold" => c.gc.minor_threshold = v.threshold()?,
            "majorCompactionThreshold" => c.gc.major_threshold = v.threshold()?,
            "minorCompactionInterval" => c.gc.minor_interval = v.seconds()?,
            "majorCompactionInterval" => c.gc.major_interval = v.seconds()?,
            "compactionRateByEntries" => {
                c.gc.rate_by_entries = v.parse_range(1, u32::MAX as u64)?
            }
            "compactionRateByBytes" => c.gc.rate_by_bytes = v.parse_range(1, u64::MAX)?,
            "isThrottleByBytes" => c.gc.throttle_by_bytes = v.boolean()?,
            "isForceGCAllowWhenNoSpace" => c.gc.force_gc_allow_when_no_space = v.boolean()?,
            "logSizeLimit" => {
                // Java caps entry logs below 2 GiB (their offsets are ints); ours are u64, but
                // the same range keeps an operator's file meaning the same.
                c.ledger_store.entry_log_size_bytes = v.parse_range(64 << 10, (2u64 << 30) - 1)?
            }
            "allowStorageExpansion" => c.cluster.allow_storage_expansion = v.boolean()?,
            // Empty: Java falls back to journalDirectory (or its default).
            "journalDirectories" if !has_journal_dirs => {}
            "journalDirectories" => c.journal_dirs = v.dirs()?,
            "journalDirectory" if !has_journal_dirs => c.journal_dirs = v.dirs()?,
            // Overridden by journalDirectories: unused, as in Java, and reported so.
            "journalDirectory" => applied.ignored.push(p.key.clone()),
            "ledgerDirectories" => c.ledger_dirs = v.dirs()?,
            "indexDirectories" => c.index_dirs = Some(v.dirs()?),
            "journalMaxGroupWaitMSec" => {
                c.journal.max_group_wait_us = v.parse_range(0, 60_000)? * 1000
            }
            "journalBufferedWritesThreshold" => {
                c.journal.buffered_writes_threshold_bytes = v.parse_range(1, 1 << 30)? as usize
            }
            "journalBufferedEntriesThreshold" => {
                c.journal.buffered_entries_threshold = v.parse_range(0, 1 << 30)? as usize
            }
            "journalFlushWhenQueueEmpty" => c.journal.flush_when_queue_empty = v.boolean()?,
            "journalMaxSizeMB" => {
                // Java's limit on a journal file's size: ours are recycled, pre-written
                // segments, so the value is an upper bound on our (smaller) segment size.
                let mb = v.parse_range(1, 1 << 20)?;
                c.journal.segment_size_bytes = c.journal.segment_size_bytes.min(mb << 20);
            }
            "journalPreAllocSizeMB" => {
                prealloc_bytes = Some(v.parse_range(0, 1 << 20)? << 20);
            }
            "journalRecoveryMode" => {
                c.journal.recovery_mode = crate::store::journal_recovery::parse_mode(v.text())
                    .map_err(|e| v.invalid(&e))?
            }
            "flushInterval" => c.flush_interval = v.millis(1)?,
            "maxBatchReadSize" => c.max_batch_read_bytes = v.parse_range(1, 1 << 40)? as i64,
            "nettyMaxFrameSizeBytes" => {
                let bytes = v.parse_range(1024, 1 << 30)? as usize;
                c.max_frame_bytes = bytes;
                c.journal.max_record_bytes = bytes + (64 << 10);
            }
            "maxPendingAddRequestsPerThread" => {
                c.max_pending_per_connection = v.parse_range(1, 1 << 24)? as usize
            }
            "waitTimeoutOnResponseBackpressureMs" => {
                let ms: i64 = v
                    .text()
                    .parse()
                    .map_err(|_| v.invalid("not a whole number of milliseconds"))?;
                c.response_backpressure_timeout =
                    (ms >= 0).then(|| Duration::from_millis(ms.min(1 << 40) as u64));
            }
            "closeChannelOnResponseTimeout" => c.close_on_response_timeout = v.boolean()?,
            "maxPendingReadRequestsPerThread" => c.read_queue = v.parse_range(1, 1 << 24)? as usize,
            "numReadWorkerThreads" => read_threads = Some(v.parse_range(0, 4096)? as usize),
            "dbStorage_writeCacheMaxSizeMb" => {
                applied.write_cache_total_bytes = Some((v.parse_range(1, 1 << 24)? as usize) << 20)
            }
            "dbStorage_readAheadCacheMaxSizeMb" => {
                c.read_ahead.cache_bytes = (v.parse_range(0, 1 << 24)? as usize) << 20
            }
            "dbStorage_readAheadCacheBatchSize" => {
                c.read_ahead.batch_entries = v.parse_range(1, 1 << 20)? as usize
            }
            "dbStorage_readAheadCacheBatchBytesSize" => {
                let n: i64 = v
                    .text()
                    .parse()
                    .map_err(|_| v.invalid("not a whole number of bytes"))?;
                // Java: -1 (or any value ≤ 0) means no byte limit; ours keeps one read bounded.
                if n > 0 {
                    c.read_ahead.batch_bytes = (n as usize).clamp(4096, 16 << 20);
                }
            }
            "diskUsageThreshold" => c.disk.usage_threshold = v.fraction()?,
            "diskUsageWarnThreshold" => c.disk.warn_threshold = v.fraction()?,
            "diskUsageLwmThreshold" => {
                c.disk.lwm_threshold = v.fraction()?;
                lwm_set = true;
            }
            "diskCheckInterval" => c.disk.check_interval = v.millis(1)?,
            "readOnlyModeEnabled" => c.disk.read_only_mode_enabled = v.boolean()?,
            "forceReadOnlyBookie" => c.disk.force_read_only = v.boolean()?,
            "readOnlyModeOnAnyDiskFullEnabled" => c.disk.read_only_on_any_full = v.boolean()?,
            "minUsableSizeForHighPriorityWrites" => {
                c.disk.min_usable_for_high_priority = v.parse_range(0, u64::MAX)?
            }
            "httpServerEnabled" => {
                c.http.enabled = v.boolean()?;
                c.http.required = c.http.enabled;
            }
            "ledgerStorageClass" => {
                c.java_storage.ledger_storage_class = Some(v.text().trim().to_string())
            }
            "sortedLedgerStorageEnabled" => c.java_storage.sorted_disabled = !v.boolean()?,
            "skipReplayJournalInvalidRecord" => {
                c.java_storage.skip_invalid_journal_records = v.boolean()?
            }
            "httpServerPort" => c.http.port = v.parse_range(0, u16::MAX as u64)? as u16,
            "httpServerHost" => c.http.host = v.nonempty()?.to_string(),
            "statsProviderClass" => {
                c.http.prometheus.provider_class =
                    Some(v.text().to_string()).filter(|s| !s.is_empty())
            }
            "prometheusStatsHttpEnable" => c.http.prometheus.http_enable = v.boolean()?,
            "prometheusStatsHttpAddress" => c.http.prometheus.address = v.nonempty()?.to_string(),
            "prometheusStatsHttpPort" => {
                c.http.prometheus.port = v.parse_range(0, u16::MAX as u64)? as u16
            }
            k if crate::security::http_tls::CONF_KEYS.contains(&k) => {
                c.http.tls.set(k, v.text()).map_err(|e| v.invalid(&e))?
            }
            k if crate::security::tls::CONF_KEYS.contains(&k) => {
                c.tls.set(k, v.text()).map_err(|e| v.invalid(&e))?
            }
            k if crate::security::auth::CONF_KEYS.contains(&k) => {
                c.auth.set(k, v.text()).map_err(|e| v.invalid(&e))?
            }
            _ if p.line == 0 => {
                applied
                    .ignored
                    .push(format!("{}{}", crate::config::conf_env::PREFIX, p.key))
            }
            _ => applied.ignored.push(p.key.clone()),
        }
    }
    if !lwm_set {
        config.disk.lwm_threshold = config.disk.usage_threshold;
    }
    if let Some(n) = read_threads {
        // Java's count is for the whole bookie (0: reads on the network threads); ours are per
        // shard, each with its own ring, at least one.
        config.read_threads_per_shard = n.div_ceil(config.shard_count().max(1)).max(1);
    }
    if let Some(bytes) = prealloc_bytes {
        // Java grows its journal file in steps of this size; ours are whole pre-written
        // segments, so the key says how many free segments to prepare at start (rounded down).
        config.journal.preallocate_segments =
            (bytes / config.journal.segment_size_bytes.max(1)) as usize;
    }
    validate(config)?;
    Ok(applied)
}

/// Cross-key rules (checked again after the command line is applied).
pub fn validate(c: &BookieConfig) -> Result<(), String> {
    let d = &c.disk;
    if d.warn_threshold > d.usage_threshold {
        return Err(format!(
            "diskUsageWarnThreshold ({}) must not exceed diskUsageThreshold ({})",
            d.warn_threshold, d.usage_threshold
        ));
    }
    if d.lwm_threshold > d.usage_threshold {
        return Err(format!(
            "diskUsageLwmThreshold ({}) must not exceed diskUsageThreshold ({})",
            d.lwm_threshold, d.usage_threshold
        ));
    }
    if d.force_read_only && !d.read_only_mode_enabled {
        return Err("forceReadOnlyBookie=true needs readOnlyModeEnabled=true".into());
    }
    let g = &c.gc;
    let minor_on = g.minor_threshold > 0.0 && !g.minor_interval.is_zero();
    let major_on = g.major_threshold > 0.0 && !g.major_interval.is_zero();
    // Java's GarbageCollectorThread refuses these too ("Invalid minor/major compaction
    // settings"): with both enabled, minor must be strictly below major in both respects.
    if minor_on
        && major_on
        && (g.minor_threshold >= g.major_threshold || g.minor_interval >= g.major_interval)
    {
        return Err(format!(
            "invalid minor/major compaction settings: minorCompactionThreshold ({}) and \
             minorCompactionInterval ({} s) must be below majorCompactionThreshold ({}) and \
             majorCompactionInterval ({} s)",
            g.minor_threshold,
            g.minor_interval.as_secs(),
            g.major_threshold,
            g.major_interval.as_secs()
        ));
    }
    let wait = c.cluster.gc_wait_time;
    for (key, threshold, interval) in [
        (
            "minorCompactionInterval",
            g.minor_threshold,
            g.minor_interval,
        ),
        (
            "majorCompactionInterval",
            g.major_threshold,
            g.major_interval,
        ),
    ] {
        if threshold > 0.0 && !interval.is_zero() && interval < wait {
            return Err(format!(
                "{key} ({} s) must not be shorter than gcWaitTime ({} ms)",
                interval.as_secs(),
                wait.as_millis()
            ));
        }
    }
    c.auth.policy()?;
    c.journal
        .validate()
        .map_err(|e| format!("journal settings (journal* keys): {e}"))
}

/// A property's value with the helpers that turn it into a setting or a clear error.
struct Value<'a>(&'a Property);

impl Value<'_> {
    fn text(&self) -> &str {
        self.0.value.trim()
    }

    fn invalid(&self, why: &str) -> String {
        format!(
            "invalid value {:?} for {} ({}): {why}",
            self.0.value,
            self.0.key,
            crate::config::conf_env::origin(self.0)
        )
    }

    fn nonempty(&self) -> Result<&str, String> {
        match self.text() {
            "" => Err(self.invalid("empty")),
            t => Ok(t),
        }
    }

    fn optional(&self) -> Option<String> {
        Some(self.text().to_string()).filter(|t| !t.is_empty())
    }

    fn parse_range(&self, min: u64, max: u64) -> Result<u64, String> {
        let n: u64 = self
            .text()
            .parse()
            .map_err(|_| self.invalid("not a whole number"))?;
        if n < min || n > max {
            return Err(self.invalid(&format!("expected {min}..={max}")));
        }
        Ok(n)
    }

    /// A compaction threshold: at most 1.0; zero or below disables (Java).
    fn threshold(&self) -> Result<f64, String> {
        let f: f64 = self
            .text()
            .parse()
            .map_err(|_| self.invalid("not a number"))?;
        if !f.is_finite() || f > 1.0 {
            return Err(self.invalid("expected at most 1.0 (0 or less disables)"));
        }
        Ok(f.max(0.0))
    }

    /// Whole seconds; zero or below is zero (disabled, for compaction intervals).
    fn seconds(&self) -> Result<Duration, String> {
        let n: i64 = self
            .text()
            .parse()
            .map_err(|_| self.invalid("not a whole number of seconds"))?;
        Ok(Duration::from_secs(n.clamp(0, 1 << 40) as u64))
    }

    /// Milliseconds; zero or below is zero (disabled).
    fn millis_or_zero(&self) -> Result<Duration, String> {
        let n: i64 = self
            .text()
            .parse()
            .map_err(|_| self.invalid("not a whole number of milliseconds"))?;
        Ok(Duration::from_millis(n.clamp(0, 1 << 40) as u64))
    }

    fn millis(&self, min: u64) -> Result<Duration, String> {
        Ok(Duration::from_millis(self.parse_range(min, 1 << 40)?))
    }

    fn fraction(&self) -> Result<f64, String> {
        let f: f64 = self
            .text()
            .parse()
            .map_err(|_| self.invalid("not a number"))?;
        if !(f > 0.0 && f <= 1.0) {
            return Err(self.invalid("expected a fraction in (0, 1]"));
        }
        Ok(f)
    }

    /// Commons Configuration's booleans: true/false, yes/no, on/off.
    fn boolean(&self) -> Result<bool, String> {
        match self.text().to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" => Ok(true),
            "false" | "no" | "off" => Ok(false),
            _ => Err(self.invalid("expected true or false")),
        }
    }

    /// A comma-separated directory list, as Java's: at least one, none twice.
    fn dirs(&self) -> Result<Vec<PathBuf>, String> {
        let mut dirs: Vec<PathBuf> = Vec::new();
        for d in self
            .text()
            .split(',')
            .map(str::trim)
            .filter(|d| !d.is_empty())
        {
            let d = PathBuf::from(d);
            if dirs.contains(&d) {
                return Err(self.invalid(&format!("lists {} twice", d.display())));
            }
            dirs.push(d);
        }
        if dirs.is_empty() {
            return Err(self.invalid("empty"));
        }
        Ok(dirs)
    }
}

/// `listeningInterface` names a network interface (eth0); an address is accepted as well.
fn interface_address(name: &str) -> Result<String, String> {
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

/// The keys of a file, for the `ignored` log line: sorted, deduplicated.
pub fn ignored_line(ignored: &[String]) -> Option<String> {
    if ignored.is_empty() {
        return None;
    }
    let set: BTreeMap<&str, ()> = ignored.iter().map(|k| (k.as_str(), ())).collect();
    let keys: Vec<&str> = set.into_keys().collect();
    Some(format!(
        "configuration: ignoring {} key{} this bookie does not use: {}",
        keys.len(),
        if keys.len() == 1 { "" } else { "s" },
        keys.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn kv(text: &str) -> Vec<(String, String)> {
        parse_properties(text)
            .unwrap()
            .into_iter()
            .map(|p| (p.key, p.value))
            .collect()
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn properties_syntax_table() {
        let cases: &[(&str, &[(&str, &str)])] = &[
            ("a=1", &[("a", "1")]),
            ("a:1", &[("a", "1")]),
            ("a 1", &[("a", "1")]),
            ("  a  =  1  ", &[("a", "1  ")]),
            ("a=", &[("a", "")]),
            ("a", &[("a", "")]),
            ("# comment\n! other\n\n   \na=1", &[("a", "1")]),
            ("  # indented comment\na=1", &[("a", "1")]),
            ("a=1 # not a comment", &[("a", "1 # not a comment")]),
            ("a=x\\\n    y", &[("a", "xy")]),
            ("a=x\\\r\n  y\\\n  z", &[("a", "xyz")]),
            ("a=x\\\\\nb=2", &[("a", "x\\"), ("b", "2")]),
            ("a=x\\", &[("a", "x")]),
            ("# comment \\\na=1", &[("a", "1")]),
            ("k\\=ey=v", &[("k=ey", "v")]),
            ("k\\ ey = v", &[("k ey", "v")]),
            ("a=\\t\\n\\u0041\\q", &[("a", "\t\nAq")]),
            ("a==b", &[("a", "=b")]),
            ("a=1\ra=2", &[("a", "2")]),
            ("a = b:c=d", &[("a", "b:c=d")]),
            ("a\t\x0c=1", &[("a", "1")]),
            ("dirs=/d1, /d2", &[("dirs", "/d1, /d2")]),
        ];
        for (text, want) in cases {
            assert_eq!(kv(text), pairs(want), "parsing {text:?}");
        }
    }

    #[test]
    fn bad_escape_is_an_error_not_a_panic() {
        for text in ["a=\\u12", "a=\\uzzzz", "\\u00=1"] {
            let err = parse_properties(text).unwrap_err();
            assert!(err.contains("line 1"), "{err}");
        }
        // Odd input never panics.
        for text in ["\\", "=", ":", "\\\n", "é=ü", "\u{feff}a=1", "\r\r\n\n"] {
            let _ = parse_properties(text);
        }
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
        assert_eq!(
            ignored_line(&a.ignored).unwrap(),
            "configuration: ignoring 1 key this bookie does not use: journalAlignmentSize"
        );
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
        let (_, a) = conf("journalDirectory=/old\njournalDirectories=/a\n").unwrap();
        assert_eq!(a.ignored, vec!["journalDirectory".to_string()]);
    }

    #[test]
    fn defaults_without_keys() {
        let (c, a) = conf("# nothing\n").unwrap();
        assert_eq!(c.bind_address, "0.0.0.0");
        assert_eq!(c.journal_dirs, vec![PathBuf::from("/tmp/bk-txn")]);
        assert!(!c.http.enabled);
        assert!(!c.cluster.has_metadata_store());
        assert!(a.ignored.is_empty() && ignored_line(&a.ignored).is_none());
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
}
