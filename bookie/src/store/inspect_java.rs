//! `bookie inspect java --conf bk_server.conf`: what a stopped Java bookie left on the disks its
//! configuration names, read-only (`javastore`), as a takeover would see it (issue 32): the
//! ledger storage class, each journal's last mark and the records after it, the entry logs, and
//! per ledger its master key, fenced bit, explicit LAC and entries, from the index files and
//! from the journal replay. `--ledger L` lists one ledger's entries (with `--bodies`, their
//! bytes); `--json` prints the same as one JSON document.
//!
//! Interleaved/SortedLedgerStorage and DbLedgerStorage (its RocksDB databases opened read-only
//! through the system librocksdb). Nothing is written: the Java files stay as they are (a Java
//! bookie must not be running on them, or what is printed may be half of a checkpoint).

use std::collections::BTreeMap;
use std::path::Path;

use javastore::journal::Record;
use javastore::replay::{replay, Replayed};
use javastore::{JavaDirs, JavaStore};
use serde_json::{json, Value};

use crate::config::conf;

/// Where an entry of the merged view comes from.
enum Source {
    Index(javastore::Location),
    Journal { file: u64, offset: u64 },
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The class a Java bookie with these settings runs (its default: SortedLedgerStorage, or
/// InterleavedLedgerStorage with `sortedLedgerStorageEnabled=false`).
fn storage_class(j: &crate::config::JavaStorageConfig) -> String {
    match j.ledger_storage_class.as_deref().map(str::trim) {
        Some(c) if !c.is_empty() => c.to_string(),
        _ if !j.sorted_disabled => "org.apache.bookkeeper.bookie.SortedLedgerStorage".into(),
        _ => "org.apache.bookkeeper.bookie.InterleavedLedgerStorage".into(),
    }
}

/// Reads the directories a Java configuration names, as Java reads the file.
pub fn java_dirs(conf_path: &Path) -> Result<(JavaDirs, String, bool), String> {
    let read = conf::read(conf_path)?;
    let mut c = conf::conf_defaults();
    conf::apply(&read.properties, &mut c).map_err(|e| format!("{}: {e}", conf_path.display()))?;
    let class = storage_class(&c.java_storage);
    let skip_invalid = c.java_storage.skip_invalid_journal_records;
    let dirs = JavaDirs::new(c.journal_dirs, c.ledger_dirs, c.index_dirs);
    Ok((dirs, class, skip_invalid))
}

pub fn run(
    conf_path: &Path,
    ledger: Option<u64>,
    bodies: bool,
    as_json: bool,
) -> Result<(), String> {
    let (dirs, class, skip_invalid) = java_dirs(conf_path)?;
    let kind = dirs.storage_kind().map_err(|e| e.to_string())?;
    let mut store = JavaStore::open(dirs.clone(), kind).map_err(|e| e.to_string())?;
    // The journal records after the marks, with Java's rules.
    let mut replayed = Replayed::default();
    let mut positions: BTreeMap<(i64, i64), (u64, u64)> = BTreeMap::new();
    let (mut keys, mut fences, mut lacs, mut entries) = (0u64, 0u64, 0u64, 0u64);
    let indexed: std::collections::BTreeSet<u64> = store.ledgers().into_iter().collect();
    let journals = replay(&dirs, skip_invalid, |_, file, offset, rec| {
        match &rec {
            Record::Entry { ledger, entry, .. } => {
                entries += 1;
                positions.insert((*ledger, *entry), (file, offset));
            }
            Record::MasterKey { .. } => keys += 1,
            Record::Fence { .. } => fences += 1,
            Record::ExplicitLac { .. } => lacs += 1,
            Record::Other { .. } => {}
        }
        replayed.apply(rec, |l| l >= 0 && indexed.contains(&(l as u64)));
    })
    .map_err(|e| e.to_string())?;

    let mut all: Vec<i64> = indexed.iter().map(|&l| l as i64).collect();
    all.extend(replayed.ledgers.keys().copied());
    all.sort_unstable();
    all.dedup();
    let mut ledgers_json = Vec::new();
    let mut lines = Vec::new();
    for &l in &all {
        if ledger.is_some_and(|x| x as i64 != l) {
            continue;
        }
        let state = if l >= 0 {
            store.state(l as u64).map_err(|e| e.to_string())?
        } else {
            None
        };
        let rep = replayed.ledgers.get(&l);
        let master_key = state
            .as_ref()
            .map(|s| s.master_key.clone())
            .filter(|k| !k.is_empty())
            .or_else(|| rep.and_then(|r| r.master_key.clone()))
            .unwrap_or_default();
        let fenced = state.as_ref().is_some_and(|s| s.fenced) || rep.is_some_and(|r| r.fenced);
        let explicit_lac = rep
            .and_then(|r| r.explicit_lac.clone())
            .or_else(|| state.as_ref().and_then(|s| s.explicit_lac.clone()));
        // The merged entries: the index's, superseded by the journal's.
        let mut merged: BTreeMap<i64, Source> = BTreeMap::new();
        if l >= 0 {
            for (e, loc) in store.entries(l as u64).map_err(|e| e.to_string())? {
                merged.insert(e as i64, Source::Index(loc));
            }
        }
        let index_count = merged.len();
        if let Some(r) = rep {
            for e in r.entries.keys() {
                let (file, offset) = positions[&(l, *e)];
                merged.insert(*e, Source::Journal { file, offset });
            }
        }
        let journal_count = rep.map_or(0, |r| r.entries.len());
        let last = merged.keys().next_back().copied();
        lines.push(format!(
            "ledger {l}: {} entries (index {index_count}, journal {journal_count}), last {}, \
             {}, master key {} B{}",
            merged.len(),
            last.map_or("none".to_string(), |x| x.to_string()),
            if fenced { "fenced" } else { "not fenced" },
            master_key.len(),
            if explicit_lac.is_some() {
                ", explicit LAC"
            } else {
                ""
            },
        ));
        let mut entry_json = Vec::new();
        if ledger.is_some() {
            for (&e, src) in &merged {
                let body = match src {
                    Source::Index(loc) => store.read_at(*loc, l as u64, e as u64),
                    Source::Journal { .. } => Ok(rep.expect("journal entry").entries[&e].clone()),
                }
                .map_err(|e| e.to_string())?;
                let (where_, text) = match src {
                    Source::Index(loc) => (
                        json!({"log": loc.log_id, "offset": loc.offset}),
                        format!("{:x}.log@{}", loc.log_id, loc.offset),
                    ),
                    Source::Journal { file, offset } => (
                        json!({"journal_file": file, "offset": offset}),
                        format!("{file:x}.txn@{offset}"),
                    ),
                };
                lines.push(format!("  entry {e}: {} B from {text}", body.len()));
                let mut v = json!({"entry": e, "length": body.len(), "from": where_});
                if bodies {
                    v["body_hex"] = Value::String(hex(&body));
                    lines.push(format!("    {}", hex(&body)));
                }
                entry_json.push(v);
            }
        }
        let mut v = json!({
            "ledger": l,
            "master_key_hex": hex(&master_key),
            "fenced": fenced,
            "explicit_lac_hex": explicit_lac.as_deref().map(hex),
            "index_file": state.is_some(),
            "index_entries": index_count,
            "journal_entries": journal_count,
            "entries": merged.len(),
            "last_entry": last,
        });
        if ledger.is_some() {
            v["entry_list"] = Value::Array(entry_json);
        }
        ledgers_json.push(v);
    }
    if ledger.is_some_and(|x| !all.contains(&(x as i64))) {
        return Err(format!(
            "ledger {} is not on these disks",
            ledger.unwrap_or(0)
        ));
    }

    let logs = store.entry_log_count();
    let journals_json: Vec<Value> = journals
        .iter()
        .map(|j| {
            json!({
                "journal": j.journal,
                "dir": dirs.journal_dirs[j.journal].display().to_string(),
                "mark": {"file": j.mark.file_id, "offset": j.mark.offset},
                "files": j.files.iter().map(|(id, end, why)| json!({
                    "file": id, "end": end, "end_reason": format!("{why:?}")
                })).collect::<Vec<_>>(),
                "records_after_mark": j.records,
            })
        })
        .collect();
    if as_json {
        let doc = json!({
            "storage_class": class,
            "storage": format!("{kind:?}"),
            "journals": journals_json,
            "replay": {
                "entries": entries, "master_keys": keys, "fences": fences,
                "explicit_lacs": lacs, "skipped_unknown_ledger": replayed.skipped_unknown,
                "skipped_unknown_type": replayed.skipped_other,
            },
            "entry_logs": logs,
            "ledgers": ledgers_json,
        });
        println!("{doc}");
        return Ok(());
    }
    println!(
        "ledgerStorageClass {class}; on disk: {kind:?} ({})",
        store.kind_name()
    );
    for j in &journals {
        println!(
            "journal {} ({}): mark {:x}.txn@{}, {} file(s) replayed, {} record(s) after the mark{}",
            j.journal,
            dirs.journal_dirs[j.journal].display(),
            j.mark.file_id,
            j.mark.offset,
            j.files.len(),
            j.records,
            j.files
                .last()
                .map(|(id, end, why)| format!(", last {id:x}.txn ends at {end} ({why:?})"))
                .unwrap_or_default()
        );
    }
    println!(
        "replay: {entries} entries, {keys} master keys, {fences} fences, {lacs} explicit LACs; \
         skipped {} record(s) of unknown (deleted) ledgers, {} of unknown types",
        replayed.skipped_unknown, replayed.skipped_other
    );
    println!("entry logs: {logs}");
    println!("ledgers: {}", all.len());
    for line in lines {
        println!("{line}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(text: &str) -> crate::config::JavaStorageConfig {
        let mut c = conf::conf_defaults();
        conf::apply(&conf::parse_properties(text).unwrap(), &mut c).unwrap();
        c.java_storage
    }

    #[test]
    fn storage_class_as_java_defaults_it() {
        assert!(storage_class(&props("")).ends_with("SortedLedgerStorage"));
        assert!(storage_class(&props("sortedLedgerStorageEnabled=false\n"))
            .ends_with("InterleavedLedgerStorage"));
        assert!(storage_class(&props(
            "ledgerStorageClass=org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage\n"
        ))
        .ends_with("DbLedgerStorage"));
    }
}
