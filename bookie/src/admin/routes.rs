//! The admin server's routes: Java 4.18's 30 (`HttpRouter`), each answering with the status
//! codes, texts and JSON its Java service gives (docs/research/issue-46-admin-routes.md; the
//! interop test S17 compares ours with a Java bookie's, call by call), plus three of ours
//! (`PUT /api/v1/bookie/flush`, `GET /api/v1/bookie/list_ledgers`, `GET
//! /api/v1/bookie/gc/details` with our collector's own figures).
//!
//! Dispatch is Vert.x's: a path that is no route is a 404 with Vert.x's HTML page; a method
//! other than GET, PUT, POST and DELETE on a route is a 405; everything else reaches the
//! route's service, which answers a method it does not serve in its own words (mostly 404).
//! Routes that act as a client of the cluster are in `ledger_routes`, `cluster_routes` and
//! `autorecovery/routes`; those about the disks in `disk_routes`.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use serde_json::Value;

use crate::admin::http::{Admin, Request, Response, Service};
use crate::admin::jackson;
use crate::admin::readonly::BookieState;
use crate::autorecovery::routes::Answer;
use crate::shard::mailbox::{AdminQuery, GcRequest};

/// Java's `HttpRouter` paths (the autorecovery ones below `/api/v1/autorecovery/`).
const JAVA_ROUTES: [&str; 23] = [
    "/heartbeat",
    "/api/v1/config/server_config",
    "/metrics",
    "/api/v1/ledger/delete",
    "/api/v1/ledger/list",
    "/api/v1/ledger/metadata",
    "/api/v1/ledger/read",
    "/api/v1/bookie/list_bookies",
    "/api/v1/bookie/list_bookie_info",
    "/api/v1/bookie/last_log_mark",
    "/api/v1/bookie/list_disk_file",
    "/api/v1/bookie/expand_storage",
    "/api/v1/bookie/gc",
    "/api/v1/bookie/gc_details",
    "/api/v1/bookie/gc/suspend_compaction",
    "/api/v1/bookie/gc/resume_compaction",
    "/api/v1/bookie/state",
    "/api/v1/bookie/sanity",
    "/api/v1/bookie/state/readonly",
    "/api/v1/bookie/is_ready",
    "/api/v1/bookie/info",
    "/api/v1/bookie/cluster_info",
    "/api/v1/bookie/entry_location_compact",
];
const AUTORECOVERY_ROUTES: [&str; 7] = [
    "status",
    "bookie",
    "list_under_replicated_ledger",
    "who_is_auditor",
    "trigger_audit",
    "lost_bookie_recovery_delay",
    "decommission",
];
/// Ours, not Java's.
const OUR_ROUTES: [&str; 3] = [
    "/api/v1/bookie/flush",
    "/api/v1/bookie/list_ledgers",
    "/api/v1/bookie/gc/details",
];

/// Keys `PUT server_config` may hold in memory (bk_server.conf has about 300).
const MAX_CONFIG_OVERRIDES: usize = 4096;

fn text(status: u16, body: impl Into<String>) -> Answer {
    (status, body.into(), false)
}

fn json(status: u16, body: String) -> Answer {
    (status, body, true)
}

fn quoted(status: u16, s: &str) -> Answer {
    json(status, jackson::pretty(&Value::String(s.to_string())))
}

/// Vert.x's answer to an exception a Java service throws.
fn exception() -> Answer {
    text(500, "Internal Server Error")
}

fn known(path: &str) -> bool {
    JAVA_ROUTES.contains(&path)
        || OUR_ROUTES.contains(&path)
        || path
            .strip_prefix("/api/v1/autorecovery/")
            .is_some_and(|sub| AUTORECOVERY_ROUTES.contains(&sub))
}

/// The bookie id Java's answers name (`bookieServer.getBookieId()`).
fn bookie_id(admin: &Admin) -> String {
    match &admin.autorecovery {
        Some(r) => r.cfg.bookie_id.clone(),
        None => format!("{}:{}", admin.config.bind_address, admin.config.port),
    }
}

/// Java's `BookieServer.toString()`: its advertised address and its id.
fn bookie_server(admin: &Admin) -> String {
    let id = bookie_id(admin);
    let addr = admin
        .autorecovery
        .as_ref()
        .and_then(|r| r.cfg.service_info.rpc_endpoint())
        .map(|e| format!("{}:{}", e.host, e.port))
        .unwrap_or_else(|| id.clone());
    format!("Bookie Server listening on {addr} with id {id}")
}

/// The bookie's admin server answers with these routes (the standalone autorecovery daemon's
/// has its own few: `autorecovery/http.rs`).
impl Service for Admin {
    fn handle<'a>(
        &'a self,
        request: &'a Request,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Response> + Send + 'a>> {
        Box::pin(route(self, request))
    }
}

/// Answers one request.
pub async fn route(admin: &Admin, r: &Request) -> Response {
    let path = r.path.as_str();
    if admin.metrics_only && path != "/metrics" {
        return Response::text(404, "not found: this endpoint serves /metrics only\n");
    }
    if !known(path) {
        return Response {
            status: 404,
            content_type: "text/html; charset=utf-8",
            body: b"<html><body><h1>Resource not found</h1></body></html>".to_vec(),
        };
    }
    if !matches!(r.method.as_str(), "GET" | "PUT" | "POST" | "DELETE") {
        return Response::answer(text(405, ""));
    }
    if path == "/metrics" && r.method == "GET" {
        return Response {
            status: 200,
            content_type: "text/plain; version=0.0.4; charset=utf-8",
            body: admin.metrics.render(&admin.state).into_bytes(),
        };
    }
    Response::answer(answer(admin, r).await)
}

async fn answer(admin: &Admin, r: &Request) -> Answer {
    let (method, path, query) = (r.method.as_str(), r.path.as_str(), r.query.as_str());
    // The routes that need the cluster's metadata store.
    if let Some(zk) = &admin.autorecovery {
        if let Some(sub) = path.strip_prefix("/api/v1/autorecovery/") {
            if let Some(a) = zk.route(method, sub, query, &r.body).await {
                return a;
            }
        }
        if let Some(a) = crate::admin::cluster_routes::route(zk, method, path, query).await {
            return a;
        }
        let client = crate::admin::ledger_routes::LedgerRoutes {
            zk,
            force_read_only: admin.config.disk.force_read_only,
        };
        if let Some(a) = client.route(method, path, query).await {
            return a;
        }
        if path == "/api/v1/bookie/expand_storage" {
            return crate::admin::disk_routes::expand_storage(&admin.config, zk, method).await;
        }
    } else if path.starts_with("/api/v1/autorecovery/")
        || path.starts_with("/api/v1/ledger/")
        || matches!(
            path,
            "/api/v1/bookie/list_bookies"
                | "/api/v1/bookie/list_bookie_info"
                | "/api/v1/bookie/cluster_info"
                | "/api/v1/bookie/sanity"
                | "/api/v1/bookie/expand_storage"
        )
    {
        // Java's admin server always has a metadata store; a bookie without one (ours,
        // standalone) cannot answer these.
        return text(
            503,
            "this route needs the cluster's metadata store: the bookie runs without ZooKeeper",
        );
    }
    let id = bookie_id(admin);
    if let Some(a) =
        crate::admin::disk_routes::route(&admin.config, &id, method, path, query, &r.body)
    {
        return a;
    }
    let state = &admin.state;
    match path {
        "/heartbeat" => text(200, "OK\n"),
        "/api/v1/config/server_config" => server_config(admin, method, &r.body),
        "/metrics" => text(403, format!("{method} is forbidden. Should be GET method")),
        "/api/v1/bookie/info" if method == "GET" => {
            match crate::admin::readonly::ledger_space(&admin.config.ledger_dirs) {
                Ok(u) => {
                    let fields = [
                        ("freeSpace".to_string(), Value::from(u.usable_bytes)),
                        ("totalSpace".to_string(), Value::from(u.total_bytes)),
                    ];
                    json(200, jackson::pretty_object(&fields))
                }
                Err(e) => {
                    log::warn!("admin: info: {e}");
                    exception()
                }
            }
        }
        "/api/v1/bookie/info" => text(404, "Only GET is supported."),
        "/api/v1/bookie/state" if method == "GET" => {
            let fields = [
                ("running", state.is_running()),
                ("readOnly", state.is_read_only()),
                ("shuttingDown", state.is_shutting_down()),
                (
                    "availableForHighPriorityWrites",
                    state.high_priority_available(),
                ),
            ]
            .map(|(k, v)| (k.to_string(), Value::Bool(v)));
            json(200, jackson::pretty_object(&fields))
        }
        "/api/v1/bookie/state" => text(404, "Only support GET method to retrieve bookie state."),
        "/api/v1/bookie/is_ready" if method == "GET" => {
            if state.is_running() && !state.is_shutting_down() {
                text(200, "OK")
            } else {
                text(503, "Bookie is not fully started yet")
            }
        }
        "/api/v1/bookie/is_ready" => text(404, "Only support GET method check if bookie is ready."),
        "/api/v1/bookie/state/readonly" => readonly(state, method, &r.body),
        "/api/v1/bookie/gc" => gc(admin, method, &r.body, &id),
        "/api/v1/bookie/gc_details" if method == "GET" => gc_details(admin, false),
        "/api/v1/bookie/gc_details" => text(
            404,
            "Only support GET method to retrieve GC details. If you want to trigger gc, send \
             a POST to gc endpoint.",
        ),
        "/api/v1/bookie/gc/suspend_compaction" => {
            compaction_switch(admin, method, &r.body, &bookie_server(admin), true)
        }
        "/api/v1/bookie/gc/resume_compaction" => {
            compaction_switch(admin, method, &r.body, &bookie_server(admin), false)
        }
        // Ours: flush every shard's write cache now (benchmarks use it to read from ledger
        // storage; a GC request would also flush, but collects garbage too).
        "/api/v1/bookie/flush" if method == "PUT" || method == "POST" => {
            let sent = admin
                .shards
                .iter()
                .filter(|s| s.admin.send(AdminQuery::Flush).is_ok())
                .count();
            quoted(200, &format!("Flush requested of {sent} shards"))
        }
        "/api/v1/bookie/list_ledgers" if method == "GET" => list_ledgers(admin).await,
        "/api/v1/bookie/gc/details" if method == "GET" => gc_details(admin, true),
        _ => text(404, "Not found method"),
    }
}

/// Java's `ConfigurationService`: GET every key as a string; PUT a JSON object of keys to set
/// in memory. As in Java, a key set here changes what GET shows and what `expand_storage`
/// would check, and no setting the bookie has already read: a restart with the file edited
/// is how settings change. Passwords are not shown, unlike Java.
fn server_config(admin: &Admin, method: &str, body: &[u8]) -> Answer {
    match method {
        "GET" => {
            let overrides = admin
                .config_overrides
                .lock()
                .map(|m| m.clone())
                .unwrap_or_default();
            let mut all: BTreeMap<String, String> = admin.config.properties.clone();
            all.extend(overrides);
            let ranked = all.keys().map(|k| (k.clone(), 0)).collect();
            let fields: Vec<(String, Value)> =
                crate::admin::cluster_routes::java_hash_map_order(ranked)
                    .into_iter()
                    .map(|k| {
                        let v = if k.to_ascii_lowercase().ends_with("password") {
                            "(not shown)".to_string()
                        } else {
                            all.get(&k).cloned().unwrap_or_default()
                        };
                        (k, Value::String(v))
                    })
                    .collect();
            json(200, jackson::pretty_object(&fields))
        }
        "PUT" if !body.is_empty() => {
            let Ok(Value::Object(m)) = serde_json::from_slice::<Value>(body) else {
                return exception();
            };
            let Ok(mut overrides) = admin.config_overrides.lock() else {
                return exception();
            };
            // Bounded: each PUT holds at most a body's worth, and the keys at most this many.
            if m.keys().filter(|k| !overrides.contains_key(*k)).count() + overrides.len()
                > MAX_CONFIG_OVERRIDES
            {
                log::warn!("admin: server_config: more than {MAX_CONFIG_OVERRIDES} keys set in memory; refused");
                return exception();
            }
            for (k, v) in m {
                let v = match v {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                log::info!("admin: server_config: {k}={v} set in memory (read at the next start only if written to the file)");
                overrides.insert(k, v);
            }
            text(200, "Success set server config.")
        }
        _ => text(404, "Request body not found. should contains k-v pairs"),
    }
}

/// Java's `BookieStateReadOnlyService`.
fn readonly(state: &BookieState, method: &str, body: &[u8]) -> Answer {
    match method {
        "GET" => {}
        "PUT" => {
            // Java reads the body into its ReadOnlyState: anything else is an exception.
            let wanted = match serde_json::from_slice::<Value>(body) {
                Ok(Value::Object(m)) if m.keys().all(|k| k == "readOnly") => {
                    match m.get("readOnly") {
                        Some(Value::Bool(b)) => *b,
                        None => false,
                        Some(_) => return exception(),
                    }
                }
                _ => return exception(),
            };
            if state.is_read_only() && !wanted {
                if state.is_forced_read_only() {
                    return text(
                        400,
                        "Bookie is in forceReadOnly mode, cannot transit to writable mode",
                    );
                }
                if let Err(e) = state.set_manual(false) {
                    log::warn!("admin: state/readonly: {e}");
                    return exception();
                }
            } else if !state.is_read_only() && wanted {
                if !state.read_only_mode_enabled() {
                    return text(
                        400,
                        "Bookie is disabled ReadOnly mode, cannot transit to readOnly mode",
                    );
                }
                if let Err(e) = state.set_manual(true) {
                    log::warn!("admin: state/readonly: {e}");
                    return exception();
                }
            }
        }
        _ => return text(404, "Unsupported method. Should be GET or PUT method"),
    }
    let fields = [("readOnly".to_string(), Value::Bool(state.is_read_only()))];
    json(200, jackson::pretty_object(&fields))
}

/// A flag as Java's `Boolean.parseBoolean(value.toString())` reads it.
fn parse_boolean(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::String(s) => s.eq_ignore_ascii_case("true"),
        _ => false,
    }
}

/// Java's `TriggerGCService`.
fn gc(admin: &Admin, method: &str, body: &[u8], id: &str) -> Answer {
    let ctl = &admin.metrics.gc_control;
    match method {
        "PUT" => {
            let body = String::from_utf8_lossy(body);
            let req = if body.trim().is_empty() {
                GcRequest {
                    force: true,
                    force_major: !ctl.suspend_major.load(Relaxed),
                    force_minor: !ctl.suspend_minor.load(Relaxed),
                }
            } else {
                let Ok(Value::Object(m)) = serde_json::from_str::<Value>(&body) else {
                    return text(
                        400,
                        "Failed to handle the request, exception: Failed to deserialize Object \
                         from Json string",
                    );
                };
                GcRequest {
                    force: true,
                    force_major: m
                        .get("forceMajor")
                        .map_or(!ctl.suspend_major.load(Relaxed), parse_boolean),
                    force_minor: m
                        .get("forceMinor")
                        .map_or(!ctl.suspend_minor.load(Relaxed), parse_boolean),
                }
            };
            match &admin.gc {
                Some(t) => {
                    // As Java's, a no-op while a forced collection is already under way.
                    t.trigger(req);
                    quoted(200, &format!("Triggered GC on BookieServer: {id}"))
                }
                None => text(503, "garbage collection is not running"),
            }
        }
        "GET" => {
            let forcing = admin.gc.as_ref().is_some_and(|t| t.force_pending())
                || admin
                    .metrics
                    .shards
                    .iter()
                    .any(|s| s.gc.force_compacting.load(Relaxed));
            let fields = [(
                "is_in_force_gc".to_string(),
                Value::String(forcing.to_string()),
            )];
            json(200, jackson::pretty_object(&fields))
        }
        _ => text(
            405,
            "Not allowed method. Should be PUT to trigger GC, Or GET to get Force GC state.",
        ),
    }
}

/// Java's `GCDetailsService`: one object per shard (Java: per ledger directory) with
/// `GarbageCollectionStatus`'s nine fields in their order; `ours` adds our collector's
/// figures (`/api/v1/bookie/gc/details`).
fn gc_details(admin: &Admin, ours: bool) -> Answer {
    let list: Vec<jackson::Json> = admin
        .metrics
        .shards
        .iter()
        .map(|s| {
            let g = &s.gc;
            let mut fields: Vec<(String, Value)> = vec![
                (
                    "forceCompacting".into(),
                    g.force_compacting.load(Relaxed).into(),
                ),
                (
                    "majorCompacting".into(),
                    g.major_compacting.load(Relaxed).into(),
                ),
                (
                    "minorCompacting".into(),
                    g.minor_compacting.load(Relaxed).into(),
                ),
                (
                    "lastMajorCompactionTime".into(),
                    g.last_major_ms.load(Relaxed).into(),
                ),
                (
                    "lastMinorCompactionTime".into(),
                    g.last_minor_ms.load(Relaxed).into(),
                ),
                // We have no entry-location RocksDB to compact (disk_routes.rs).
                ("lastEntryLocationCompactionTime".into(), 0.into()),
                (
                    "majorCompactionCounter".into(),
                    g.major_count.load(Relaxed).into(),
                ),
                (
                    "minorCompactionCounter".into(),
                    g.minor_count.load(Relaxed).into(),
                ),
                ("entryLocationCompactionCounter".into(), 0.into()),
            ];
            if ours {
                fields.extend([
                    (
                        "deletedLedgers".into(),
                        g.deleted_ledgers.load(Relaxed).into(),
                    ),
                    (
                        "reclaimedDeletionBytes".into(),
                        g.reclaimed_deletion_bytes.load(Relaxed).into(),
                    ),
                    (
                        "reclaimedCompactionBytes".into(),
                        g.reclaimed_compaction_bytes.load(Relaxed).into(),
                    ),
                    (
                        "entryLogUsage".into(),
                        (g.usage_ppm.load(Relaxed) as f64 / 1e6).into(),
                    ),
                ]);
            }
            jackson::Json::Object(
                fields
                    .into_iter()
                    .map(|(k, v)| (k, jackson::Json::Value(v)))
                    .collect(),
            )
        })
        .collect();
    json(200, jackson::pretty_json(&jackson::Json::Array(list)))
}

/// Java's `SuspendCompactionService` (`suspend`) and `ResumeCompactionService`; `server` is
/// how Java's message names the bookie (`BookieServer.toString()`).
fn compaction_switch(
    admin: &Admin,
    method: &str,
    body: &[u8],
    server: &str,
    suspend: bool,
) -> Answer {
    let ctl = &admin.metrics.gc_control;
    let (verb, major, minor) = if suspend {
        ("Suspend", "suspendMajor", "suspendMinor")
    } else {
        ("Resume", "resumeMajor", "resumeMinor")
    };
    match method {
        "PUT" => {
            if body.is_empty() {
                return text(400, "Empty request body");
            }
            let Ok(Value::Object(m)) = serde_json::from_slice::<Value>(body) else {
                return exception();
            };
            // Java casts each to Boolean: another JSON type is an exception.
            let flag = |k: &str| match m.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::Bool(b)) => Ok(Some(*b)),
                Some(_) => Err(()),
            };
            let (Ok(a), Ok(b)) = (flag(major), flag(minor)) else {
                return exception();
            };
            if a.is_none() && b.is_none() {
                return text(400, format!("No {major} or {minor} params found"));
            }
            let mut out = String::new();
            if a == Some(true) {
                out = format!("{verb} majorGC on BookieServer: {server}");
                ctl.suspend_major.store(suspend, Relaxed);
            }
            if b == Some(true) {
                out.push_str(&format!(", {verb} minorGC on BookieServer: {server}"));
                ctl.suspend_minor.store(suspend, Relaxed);
            }
            quoted(200, &out)
        }
        "GET" if suspend => {
            // A java.util.HashMap of these two keys iterates minor first.
            let fields = [
                (
                    "isMinorGcSuspended".to_string(),
                    Value::String(ctl.suspend_minor.load(Relaxed).to_string()),
                ),
                (
                    "isMajorGcSuspended".to_string(),
                    Value::String(ctl.suspend_major.load(Relaxed).to_string()),
                ),
            ];
            json(200, jackson::pretty_object(&fields))
        }
        _ if suspend => text(
            404,
            "Not found method. Should be PUT to suspend major or minor compaction, Or GET to \
             get compaction state.",
        ),
        _ => text(
            404,
            "Not found method. Should be PUT to resume major or minor compaction, Or GET to \
             get compaction state.",
        ),
    }
}

/// Ours: the ledgers the shards hold (write cache and ledger storage), asked of each shard
/// over its admin queue, answered between requests.
async fn list_ledgers(admin: &Admin) -> Answer {
    let mut ids = Vec::new();
    for shard in admin.shards.iter() {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if shard.admin.send(AdminQuery::ListLedgers(tx)).is_err() {
            return text(503, "a shard is not running");
        }
        match tokio::time::timeout(Duration::from_secs(5), rx).await {
            Ok(Ok(list)) => ids.extend(list),
            _ => return text(503, "a shard did not answer"),
        }
    }
    ids.sort_unstable();
    let fields = [
        ("count".to_string(), Value::from(ids.len())),
        ("ledgers".to_string(), Value::from(ids)),
    ];
    json(200, jackson::pretty_object(&fields))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thirty_java_routes() {
        assert_eq!(JAVA_ROUTES.len() + AUTORECOVERY_ROUTES.len(), 30);
        assert!(known("/api/v1/autorecovery/who_is_auditor"));
        assert!(!known("/api/v1/autorecovery/nope"));
        assert!(!known("/api/v1/bookie"));
        assert!(known("/api/v1/bookie/flush"));
    }

    #[test]
    fn java_booleans() {
        assert!(parse_boolean(&Value::Bool(true)));
        assert!(parse_boolean(&Value::String("TRUE".into())));
        assert!(!parse_boolean(&Value::String("yes".into())));
        assert!(!parse_boolean(&Value::from(1)));
    }
}
