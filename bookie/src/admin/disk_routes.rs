//! Java 4.18's admin routes about this bookie's directories, answered as Java answers them
//! with what is true of our formats (docs/research/issue-46-admin-routes.md §4.4-4.6, §4.16):
//!
//! - `GET /api/v1/bookie/last_log_mark`: per journal (ours: one per shard), where a restart
//!   would begin replaying: Java's persisted `lastMark` (a `.txn` file id and byte offset);
//!   ours, the oldest live segment of the shard's journal, whose first record is read first
//!   (`Pos` is the offset of that record, after the segment header; records under the ledger
//!   storage's checkpoint are skipped by their number, not their position).
//! - `GET /api/v1/bookie/list_disk_file[?file_type=journal|entrylog|index]`: file names,
//!   oldest first, each followed by a tab, as Java's `listFilesAndSort`: journal files are our
//!   segments (`*.jrnl`; Java's `*.txn` of a taken-over disk too), entry logs `*.log`, index
//!   files our index runs (`*.idx`).
//! - `PUT /api/v1/bookie/expand_storage`: the start-up cookie check again (Java's
//!   `checkCookies`), which with `allowStorageExpansion` stamps new directories. Our
//!   directories are fixed for the life of the process (a new one needs a restart), so this
//!   verifies the cookies in ZooKeeper and on every disk and says so.
//! - `/api/v1/bookie/entry_location_compact`: compaction of DbLedgerStorage's RocksDB entry
//!   location index. We have no such index (ours is runs of sorted `*.idx` files, merged by our
//!   own garbage collection), so this answers as Java's storages without one
//!   (Interleaved, Sorted): no paths, `{ }`, and nothing to compact.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::Value;

use crate::admin::cluster_routes::java_hash_map_order;
use crate::admin::jackson;
use crate::autorecovery::routes::Answer;
use crate::config::BookieConfig;

fn text(status: u16, body: impl Into<String>) -> Answer {
    (status, body.into(), false)
}

fn quoted(status: u16, s: &str) -> Answer {
    (status, jackson::pretty(&Value::String(s.to_string())), true)
}

/// The routes that need the bookie's configuration only. `expand_storage` needs ZooKeeper and
/// is answered by [`expand_storage`].
pub fn route(
    config: &BookieConfig,
    bookie_id: &str,
    method: &str,
    path: &str,
    query: &str,
    body: &[u8],
) -> Option<Answer> {
    Some(match path {
        "/api/v1/bookie/last_log_mark" => last_log_mark(config, method),
        "/api/v1/bookie/list_disk_file" => list_disk_file(config, method, query),
        "/api/v1/bookie/entry_location_compact" => entry_location_compact(bookie_id, method, body),
        _ => return None,
    })
}

fn last_log_mark(config: &BookieConfig, method: &str) -> Answer {
    if method != "GET" {
        return text(404, "Not found method. Should be GET method");
    }
    let mut marks = Vec::new();
    for dir in shard_journal_dirs(&config.journal_dirs) {
        let oldest = std::fs::read_dir(&dir).ok().and_then(|rd| {
            rd.flatten()
                .filter_map(|e| journal::format::parse_file_name(&e.file_name().to_string_lossy()))
                .filter(|(_, free)| !free)
                .map(|(id, _)| id)
                .min()
        });
        let Some(id) = oldest else { continue };
        marks.push((
            format!(
                "LastLogMark: Journal Id - {}({})",
                id.0,
                journal::format::segment_file_name(id)
            ),
            Value::String(format!("Pos - {}", journal::format::SEGMENT_HEADER_BYTES)),
        ));
    }
    (200, hash_map(marks), true)
}

/// `<journal dir>/shard-<n>` for every shard journal found (ledger_dirs.rs).
fn shard_journal_dirs(journal_dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = Vec::new();
    for d in journal_dirs {
        let Ok(rd) = std::fs::read_dir(d) else {
            continue;
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(n) = name.strip_prefix("shard-").and_then(|n| n.parse().ok()) {
                found.push((n, e.path()));
            }
        }
    }
    found.sort();
    found.into_iter().map(|(_, p)| p).collect()
}

/// A `java.util.HashMap<String, String>` filled in this order, as Jackson prints it.
fn hash_map(fields: Vec<(String, Value)>) -> String {
    let ranked = fields
        .iter()
        .enumerate()
        .map(|(i, (k, _))| (k.clone(), i as i64))
        .collect();
    let mut fields = fields;
    let ordered: Vec<(String, Value)> = java_hash_map_order(ranked)
        .into_iter()
        .filter_map(|k| {
            let i = fields.iter().position(|(f, _)| *f == k)?;
            Some(fields.swap_remove(i))
        })
        .collect();
    jackson::pretty_object(&ordered)
}

fn list_disk_file(config: &BookieConfig, method: &str, query: &str) -> Answer {
    if method != "GET" {
        return text(404, "Not found method. Should be GET method");
    }
    let wanted = query
        .split('&')
        .filter_map(|p| p.split_once('='))
        .filter(|(k, _)| *k == "file_type")
        .map(|(_, v)| v)
        .next_back();
    let all = !matches!(wanted, Some("journal" | "entrylog" | "index"));
    let index_dirs = config.index_dirs.as_deref().unwrap_or(&config.ledger_dirs);
    let mut fields = Vec::new();
    if all || wanted == Some("journal") {
        let names = files_by_age(&config.journal_dirs, &["jrnl", "txn"]);
        fields.push(("journal files".to_string(), Value::String(names)));
    }
    if all || wanted == Some("entrylog") {
        let names = files_by_age(&config.ledger_dirs, &["log"]);
        fields.push(("entrylog files".to_string(), Value::String(names)));
    }
    if all || wanted == Some("index") {
        let names = files_by_age(index_dirs, &["idx"]);
        fields.push(("index files".to_string(), Value::String(names)));
    }
    (200, hash_map(fields), true)
}

/// The names of the files below `dirs` (recursively) with one of `extensions`, oldest first
/// (creation time, then modification time, then name), each followed by a tab.
fn files_by_age(dirs: &[PathBuf], extensions: &[&str]) -> String {
    let mut files: Vec<(SystemTime, SystemTime, String)> = Vec::new();
    for d in dirs {
        walk(d, 0, &mut |p| {
            let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
            if !extensions.contains(&ext) {
                return;
            }
            let Ok(m) = std::fs::metadata(p) else { return };
            let modified = m.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            let created = m.created().unwrap_or(modified);
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            files.push((created, modified, name));
        });
    }
    files.sort();
    files.into_iter().map(|(_, _, n)| n + "\t").collect()
}

/// Calls `f` on every file below `dir`, at most 8 levels down.
fn walk(dir: &Path, depth: usize, f: &mut dyn FnMut(&Path)) {
    if depth > 8 {
        return;
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        match e.file_type() {
            Ok(t) if t.is_dir() => walk(&e.path(), depth + 1, f),
            Ok(t) if t.is_file() => f(&e.path()),
            _ => {}
        }
    }
}

fn entry_location_compact(id: &str, method: &str, body: &[u8]) -> Answer {
    match method {
        "PUT" => {
            let body = String::from_utf8_lossy(body);
            if body.trim().is_empty() {
                return text(400, "Empty request body");
            }
            let Ok(Value::Object(m)) = serde_json::from_str::<Value>(&body) else {
                return quoted(400, "Failed to deserialize Object from Json string");
            };
            // Java casts: a value of another JSON type is a ClassCastException, a 500.
            let compact = match m.get("entryLocationRocksDBCompact") {
                None => false,
                Some(Value::Bool(b)) => *b,
                Some(_) => return text(500, "Internal Server Error"),
            };
            let locations = match m.get("entryLocations") {
                None => String::new(),
                Some(Value::String(s)) => s.clone(),
                Some(_) => return text(500, "Internal Server Error"),
            };
            if !compact {
                return text(200, "Not trigger Entry Location RocksDB compact.");
            }
            if locations.trim().is_empty() {
                quoted(
                    200,
                    &format!("Triggered entry Location RocksDB compact on bookie:{id}"),
                )
            } else {
                quoted(
                    400,
                    &format!(
                        "Specified trigger compact entryLocations: {locations} is invalid. \
                         Bookie entry location RocksDB path: []."
                    ),
                )
            }
        }
        "GET" => (200, "{ }".to_string(), true),
        _ => text(
            405,
            "Not found method. Should be PUT to trigger entry location compact, Or GET to get \
             entry location compact state.",
        ),
    }
}

/// `PUT /api/v1/bookie/expand_storage`: the cookie check of the start, again.
pub async fn expand_storage(
    config: &BookieConfig,
    zk: &crate::autorecovery::routes::AutorecoveryRoutes,
    method: &str,
) -> Answer {
    if method != "PUT" {
        return text(404, "Not found method. Should be PUT method");
    }
    let (dirs, options) = crate::admin::cluster::cookie_check(config);
    let checked = async {
        let (client, _) = zk.session().await?;
        let instance_id = metadata::cluster::read_instance_id(&client, &zk.cfg)
            .await
            .map_err(|e| e.to_string())?;
        metadata::cookie::validate_and_stamp(&client, &zk.cfg, &dirs, instance_id, &options)
            .await
            .map_err(|e| e.to_string())
    };
    match checked.await {
        Ok(outcome) => {
            log::info!("admin: expand_storage: cookies {outcome:?}");
            text(200, "Success expand storage")
        }
        Err(e) => {
            log::error!("admin: expand_storage: {e}");
            text(500, "Exception while updating cookie for storage expansion")
        }
    }
}
