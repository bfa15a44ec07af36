//! Reading `bk_server.conf` onto [`BookieConfig`] as the Java bookie reads it
//! (docs/config-keys.md): the syntax (`properties.rs`), lists, interpolation and conversions
//! (`values.rs`), and each key's fate (`keys.rs`, `keys_table.rs`).
//!
//! [`apply`] starts from the Java defaults a conf-file bookie has (bind all addresses, HTTP
//! off, `/tmp/bk-txn` and `/tmp/bk-data`) and sets what the keys say. A value Java would refuse
//! (a number that does not parse, an empty value where Java's getter throws) or that is out of
//! our range stops the start with a message naming the key, the value and the line. An empty
//! value Java takes for unset leaves the default. Besides the settings, [`Applied`] says which
//! keys are unknown, which change nothing here, and which the operator must hear about: an
//! unhonoured key whose value changes durability, availability or security, a key given twice
//! (Java reads the first), a byte-order mark, a continuation cut off at the end of the file.
//! `BK_<key>` environment variables (`conf_env`) come after the file, and command-line flags
//! after both (see `main.rs`), so they win.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::config::keys::{self, Ctx, Fate, Pending, V};
use crate::config::properties::{self, Property};
use crate::config::values::{self, Entry};
use crate::config::BookieConfig;

/// What applying a configuration did besides setting fields.
#[derive(Debug, Default)]
pub struct Applied {
    /// Keys this bookie knows and does not use, each for a reason docs/config-keys.md gives
    /// (`BK_<key>` for a variable).
    pub ignored: Vec<String>,
    /// Keys this bookie does not know (not a key of BookKeeper 4.14–4.18: a typo?).
    pub unknown: Vec<String>,
    /// Lines the operator must read: one per unhonoured key whose value loses something, key
    /// given twice, or oddity of the file.
    pub warnings: Vec<String>,
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

/// Reads a properties file (and its includes).
pub fn read(path: &Path) -> Result<properties::Read, String> {
    properties::read_file(path)
}

/// What the operator should hear of a file's form (not of its keys).
pub fn read_warnings(read: &properties::Read, path: &Path) -> Vec<String> {
    let mut out = Vec::new();
    if read.byte_order_mark {
        let first = read.properties.first().map_or("", |p| p.key.as_str());
        out.push(format!(
            "{}: the file starts with a UTF-8 byte-order mark; Java reads the file as \
             ISO-8859-1, so its first key is {first:?}, which no bookie knows: that line is \
             ignored (by Java too). Save the file without the mark.",
            path.display()
        ));
    }
    if let Some(line) = read.dropped_at_end {
        out.push(format!(
            "{}: line {line} ends with a backslash (a continuation) at the end of the file: \
             Java drops that key, and so does this bookie",
            path.display()
        ));
    }
    out
}

/// Parses the text of a properties file (tests).
#[cfg(test)]
pub fn parse_properties(text: &str) -> Result<Vec<Property>, String> {
    properties::parse(text).map(|r| r.properties)
}

/// The keys of `props` as Java's configuration holds them: one entry per key in the order keys
/// first appear, the values of a key given twice making one list (the first value first). A
/// `BK_<key>` variable (line 0) replaces what the file said for its key.
pub fn entries(props: &[Property]) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::new();
    for p in props {
        let origin = origin(p);
        let elements = values::elements(&p.value);
        match out.iter_mut().find(|e| e.key == p.key) {
            Some(e) if p.line == 0 => {
                *e = Entry {
                    key: p.key.clone(),
                    elements,
                    origin,
                    repeated_at: Vec::new(),
                    raw: p.value.clone(),
                }
            }
            Some(e) => {
                e.elements.extend(elements);
                e.repeated_at.push(origin);
            }
            None => out.push(Entry {
                key: p.key.clone(),
                elements,
                origin,
                repeated_at: Vec::new(),
                raw: p.value.clone(),
            }),
        }
    }
    out
}

/// Where a property came from, for messages and `--print-config`.
pub fn origin(p: &Property) -> String {
    match (&p.file, p.line) {
        (_, 0) => format!(
            "environment variable {}{}",
            crate::config::conf_env::PREFIX,
            p.key
        ),
        (Some(f), line) => format!("line {line} of {}", f.display()),
        (None, line) => format!("line {line}"),
    }
}

/// Sets the fields of `config` the properties name.
pub fn apply(props: &[Property], config: &mut BookieConfig) -> Result<Applied, String> {
    let entries = entries(props);
    let mut applied = Applied::default();
    let mut pending = Pending {
        has_journal_dirs: entries
            .iter()
            .any(|e| e.key == "journalDirectories" && !e.first().is_empty()),
        ..Pending::default()
    };
    let resolve = |name: &str| -> Option<Vec<String>> {
        entries
            .iter()
            .find(|e| e.key == name)
            .map(|e| e.elements.clone())
    };
    for e in &entries {
        config.properties.insert(e.key.clone(), e.raw.clone());
    }
    for e in &entries {
        let shown = display_key(e);
        if !e.repeated_at.is_empty() {
            applied.warnings.push(format!(
                "{} is given more than once ({}, then {}): Java reads the first value ({:?}), \
                 and so does this bookie; delete the others",
                e.key,
                e.origin,
                e.repeated_at.join(", "),
                e.raw
            ));
        }
        let Some(k) = keys::lookup(&e.key) else {
            applied.unknown.push(shown);
            continue;
        };
        let v = V::new(e, &resolve)?;
        if v.is_empty() && k.empty_unset {
            // Java takes it for unset: the default applies.
            if let Fate::Applied { .. } = k.fate {
                continue;
            }
        } else if v.is_empty() && keys::empty_is_an_error(k) {
            return Err(v.invalid(&format!(
                "empty, which Java's {} getter refuses: give a value or delete the line",
                k.ty.name()
            )));
        } else {
            v.check(k.ty)?;
        }
        match k.fate {
            Fate::Applied { set, .. } => {
                let mut ctx = Ctx {
                    c: config,
                    pending: &mut pending,
                };
                if let Err(e) = set(&mut ctx, &v) {
                    if k.ty != keys::Ty::Lazy {
                        return Err(e);
                    }
                    pending.lazy_errors.push(e);
                }
            }
            Fate::Ignored { .. } => applied.ignored.push(shown),
            Fate::Unhonoured { ours, loses } => {
                if keys::matches_ours(ours, &v) {
                    applied.ignored.push(shown);
                } else {
                    applied.warnings.push(format!(
                        "{}={} ({}) is not honoured: {loses}",
                        e.key,
                        v.text(),
                        e.origin
                    ));
                }
            }
        }
    }
    finish(config, &pending)?;
    if let Some(e) = pending.lazy_errors.first() {
        if config.autorecovery.enabled {
            return Err(e.clone());
        }
        for e in &pending.lazy_errors {
            applied.warnings.push(format!(
                "{e} (read only by autorecovery, which is off: no effect)"
            ));
        }
    }
    applied.write_cache_total_bytes = pending.write_cache_total_bytes;
    Ok(applied)
}

/// A file's keys as Java's `getStringArray` returns them (split, interpolated), or the error a
/// getter would throw: `bookie conf-view`, for the interop tier to compare with Java's.
pub fn java_view(props: &[Property]) -> Vec<(String, Result<Vec<String>, String>)> {
    let entries = entries(props);
    let lookup = |name: &str| -> Option<Vec<String>> {
        entries
            .iter()
            .find(|e| e.key == name)
            .map(|e| e.elements.clone())
    };
    entries
        .iter()
        .map(|e| {
            let v = values::interpolated_elements(&e.elements, &lookup);
            (e.key.clone(), v)
        })
        .collect()
}

/// How a key is named in the lists of ignored and unknown keys.
fn display_key(e: &Entry) -> String {
    if e.origin.starts_with("environment variable") {
        format!("{}{}", crate::config::conf_env::PREFIX, e.key)
    } else {
        e.key.clone()
    }
}

/// The settings that depend on more than one key.
fn finish(config: &mut BookieConfig, pending: &Pending) -> Result<(), String> {
    if !pending.lwm_set {
        config.disk.lwm_threshold = config.disk.usage_threshold;
    }
    if let Some(n) = pending.read_threads {
        // Java's count is for the whole bookie (0: reads on the network threads); ours are per
        // shard, each with its own ring, at least one.
        config.read_threads_per_shard = n.div_ceil(config.shard_count().max(1)).max(1);
    }
    if let Some(bytes) = pending.prealloc_bytes {
        // Java grows its journal file in steps of this size; ours are whole pre-written
        // segments, so the key says how many free segments to prepare at start (rounded down).
        config.journal.preallocate_segments =
            (bytes / config.journal.segment_size_bytes.max(1)) as usize;
    }
    if let Some(origin) = &pending.zk_root_empty {
        let cluster = &config.cluster;
        if cluster.metadata_service_uri.is_none() && cluster.zk_servers.is_some() {
            return Err(format!(
                "zkLedgersRootPath is empty ({origin}) and metadataServiceUri is not set: the \
                 ledgers root would be ZooKeeper's own root (a Java bookie would register under \
                 /available). Set zkLedgersRootPath (usually /ledgers) or metadataServiceUri"
            ));
        }
    }
    validate(config)
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

/// `permittedStartupUsers`: when set, the bookie starts only as one of the users it lists
/// (Java's `BookieServer.validateUser`, exact names; an empty value permits no one).
pub fn check_startup_user(c: &BookieConfig) -> Result<(), String> {
    let Some(users) = &c.permitted_startup_users else {
        return Ok(());
    };
    let me = nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .map(|u| u.name)
        .unwrap_or_else(|| nix::unistd::getuid().to_string());
    if users.contains(&me) {
        return Ok(());
    }
    Err(format!(
        "cannot start: the current user {me:?} is not in permittedStartupUsers {users:?} (as \
         Java's bookie refuses)"
    ))
}

/// The log lines that report the keys: the unknown ones (a warning: a typo loses a setting
/// silently), and the known ones that change nothing here (for the record).
pub fn key_report(applied: &Applied) -> (Option<String>, Option<String>) {
    let list = |keys: &[String]| -> String {
        let set: BTreeMap<&str, ()> = keys.iter().map(|k| (k.as_str(), ())).collect();
        set.into_keys().collect::<Vec<_>>().join(", ")
    };
    let unknown = (!applied.unknown.is_empty()).then(|| {
        format!(
            "configuration: {} key{} no bookie of BookKeeper 4.14–4.18 reads (a typo loses \
             the setting; Java ignores them too): {}",
            applied.unknown.len(),
            if applied.unknown.len() == 1 { "" } else { "s" },
            list(&applied.unknown)
        )
    });
    let ignored = (!applied.ignored.is_empty()).then(|| {
        format!(
            "configuration: {} key{} this bookie reads and does not need \
             (docs/config-keys.md says why for each): {}",
            applied.ignored.len(),
            if applied.ignored.len() == 1 { "" } else { "s" },
            list(&applied.ignored)
        )
    });
    (unknown, ignored)
}

#[cfg(test)]
#[path = "conf_tests.rs"]
mod tests;
