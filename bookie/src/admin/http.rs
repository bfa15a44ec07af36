//! The HTTP admin server (docs/semantics.md §6.1): `/heartbeat`, `/metrics`, the bookie's
//! state and read-only switch, disk info, the ledger list, and the GC routes.
//!
//! It runs on its own thread with its own current-thread tokio runtime, never on a shard, so
//! a scrape or a slow admin client cannot delay a request. The HTTP/1.1 handling is ours and
//! small on purpose: a handful of routes with tiny bodies, answered with `Connection: close`,
//! do not justify hyper's dependency tree in a from-scratch CI build. The request framing
//! (request line, headers, `Content-Length`, limits) is the `httpwire` crate's, without I/O
//! and fuzzed; this module does the sockets, the deadline and the routes. Limits keep a bad
//! client harmless: 16 KiB of request head (431 beyond), 64 KiB of body (Content-Length only;
//! 413 beyond), 10 s to send it and take the answer (`HttpServer::start_with_timeout` sets
//! another), at most [`MAX_CONNECTIONS`] connections at once (one more is closed unanswered,
//! so idle or slow clients cannot pile up tasks and buffers, nor TLS handshakes); anything
//! malformed gets a 400, and a client too slow is closed unanswered, never a panic. One
//! request per connection: bytes after it are ignored. After a refusal the server reads and
//! drops what the client still sends (up to a request's worth, within the deadline) before
//! it closes, so that the client reads the answer rather than a reset.
//!
//! With `httpServerTlsEnable` it speaks HTTPS only and requires a client certificate signed by
//! its trust store, as Java's does (`security/http_tls.rs`); the handshake counts against the
//! same 10 s.
//!
//! JSON shapes follow the Java bookie's handlers: `/api/v1/bookie/state` →
//! `{"running","readOnly","shuttingDown","availableForHighPriorityWrites"}`,
//! `/api/v1/bookie/state/readonly` → `{"readOnly":bool}` (PUT the same to switch; 400 when
//! read-only is forced or read-only mode is disabled), `/api/v1/bookie/info` →
//! `{"freeSpace","totalSpace"}`, `PUT /api/v1/bookie/gc` (optional `{"forceMajor","forceMinor"}`)
//! → `"Triggered GC on BookieServer: host:port"`, `GET /api/v1/bookie/gc` →
//! `{"is_in_force_gc":"false"}`, `/api/v1/bookie/gc_details` → one object per shard (Java: per
//! ledger directory) with Java's fields plus ours (deleted ledgers, reclaimed bytes, usage),
//! `/api/v1/bookie/gc/suspend_compaction` and `resume_compaction` (PUT
//! `{"suspendMajor","suspendMinor"}` / `{"resumeMajor","resumeMinor"}`; GET →
//! `{"isMajorGcSuspended","isMinorGcSuspended"}`).

use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use httpwire::{Refusal, RequestReader};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use crate::admin::metrics::Metrics;
use crate::admin::readonly::BookieState;
use crate::config::BookieConfig;
use crate::gc::GcTrigger;
use crate::shard::mailbox::{AdminQuery, GcRequest, ShardHandle};

pub use httpwire::Request;

/// The time a client has to send its request and take the answer (TLS handshake included).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// After a refusal, how much of what the client still sends is read and dropped before the
/// connection closes: a whole request's worth.
const DRAIN_BYTES_MAX: usize = httpwire::MAX_HEAD + httpwire::MAX_BODY;
/// Connections served at once; a scrape and a few operators need a handful.
pub const MAX_CONNECTIONS: usize = 64;

/// What answers the requests of an [`HttpServer`]: the bookie's [`Admin`], or the standalone
/// autorecovery daemon's few routes (`autorecovery/http.rs`).
pub trait Service: Send + Sync + 'static {
    fn handle<'a>(
        &'a self,
        request: &'a Request,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Response> + Send + 'a>>;
}

impl Service for Admin {
    fn handle<'a>(
        &'a self,
        request: &'a Request,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Response> + Send + 'a>> {
        Box::pin(route(self, request))
    }
}

/// What the handlers need.
pub struct Admin {
    pub state: Arc<BookieState>,
    pub metrics: Arc<Metrics>,
    pub config: Arc<BookieConfig>,
    pub shards: Arc<Vec<ShardHandle>>,
    /// The garbage-collection driver (None only in tests without one).
    pub gc: Option<GcTrigger>,
    /// Serve `/metrics` alone (Java's Prometheus provider's own endpoint, `prometheusStats*`).
    pub metrics_only: bool,
    /// `/api/v1/autorecovery/*` (cluster mode).
    pub autorecovery: Option<Arc<crate::autorecovery::routes::AutorecoveryRoutes>>,
}

/// The running server: stop it by dropping or calling [`HttpServer::stop`].
pub struct HttpServer {
    stop: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
    pub addr: SocketAddr,
}

impl HttpServer {
    /// Binds `host:port` and serves on a new thread: HTTPS when `tls` is given.
    pub fn start<S: Service>(
        admin: S,
        host: &str,
        port: u16,
        tls: Option<Arc<rustls::ServerConfig>>,
    ) -> Result<HttpServer, String> {
        Self::start_with_timeout(admin, host, port, tls, REQUEST_TIMEOUT)
    }

    /// [`HttpServer::start`] with another deadline than [`REQUEST_TIMEOUT`] for each
    /// connection: a client still sending its request, or not taking the answer, when it
    /// passes is closed unanswered.
    pub fn start_with_timeout<S: Service>(
        admin: S,
        host: &str,
        port: u16,
        tls: Option<Arc<rustls::ServerConfig>>,
        request_timeout: Duration,
    ) -> Result<HttpServer, String> {
        let tls = tls.map(TlsAcceptor::from);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("http: runtime: {e}"))?;
        let listener = {
            let _guard = rt.enter();
            let addr = format!("{host}:{port}");
            let std_listener = std::net::TcpListener::bind(&addr)
                .map_err(|e| format!("http: cannot listen on {addr}: {e}"))?;
            std_listener
                .set_nonblocking(true)
                .map_err(|e| format!("http: {e}"))?;
            tokio::net::TcpListener::from_std(std_listener).map_err(|e| format!("http: {e}"))?
        };
        let addr = listener.local_addr().map_err(|e| format!("http: {e}"))?;
        let (stop, mut stopped) = watch::channel(false);
        let admin = Arc::new(admin);
        let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
        let thread = std::thread::Builder::new()
            .name("http-admin".into())
            .spawn(move || {
                rt.block_on(async move {
                    loop {
                        tokio::select! {
                            _ = stopped.changed() => break,
                            accepted = listener.accept() => match accepted {
                                Ok((stream, _)) => {
                                    // Over the limit: closed at once (dropped).
                                    let Ok(slot) = slots.clone().try_acquire_owned() else {
                                        continue;
                                    };
                                    let admin = admin.clone();
                                    let tls = tls.clone();
                                    tokio::spawn(async move {
                                        let _slot = slot;
                                        let _ = tokio::time::timeout(request_timeout, async {
                                            match tls {
                                                None => serve(stream, &*admin).await,
                                                // A failed handshake (no or an untrusted
                                                // client certificate) closes the connection.
                                                Some(tls) => {
                                                    if let Ok(s) = tls.accept(stream).await {
                                                        serve(s, &*admin).await
                                                    }
                                                }
                                            }
                                        })
                                        .await;
                                    });
                                }
                                Err(e) => {
                                    log::warn!("http: accept failed: {e}");
                                    tokio::time::sleep(Duration::from_millis(10)).await;
                                }
                            },
                        }
                    }
                });
            })
            .map_err(|e| format!("http: cannot start the thread: {e}"))?;
        Ok(HttpServer {
            stop,
            thread: Some(thread),
            addr,
        })
    }

    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// An answer.
#[derive(Debug, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
}

impl Response {
    /// A route's answer (`autorecovery::routes::Answer`): status, body, and whether the body
    /// is JSON.
    pub fn answer((status, body, is_json): (u16, String, bool)) -> Response {
        Response {
            status,
            content_type: if is_json {
                "application/json"
            } else {
                "text/plain; charset=utf-8"
            },
            body: body.into_bytes(),
        }
    }

    pub fn text(status: u16, body: &str) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.as_bytes().to_vec(),
        }
    }

    fn json(status: u16, value: serde_json::Value) -> Response {
        let mut body = serde_json::to_vec_pretty(&value).unwrap_or_default();
        body.push(b'\n');
        Response {
            status,
            content_type: "application/json",
            body,
        }
    }

    fn error(status: u16, message: &str) -> Response {
        Response::json(status, serde_json::json!({ "error": message }))
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Payload Too Large",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        _ => "",
    }
}

async fn serve<S: AsyncRead + AsyncWrite + Unpin, A: Service>(mut stream: S, admin: &A) {
    let (response, refused) = match read_request(&mut stream).await {
        Ok(request) => (admin.handle(&request).await, false),
        Err(refusal) => (
            Response::text(refusal.status, &format!("{}\n", refusal.reason)),
            true,
        ),
    };
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        response.status,
        reason(response.status),
        response.content_type,
        response.body.len()
    );
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(&response.body).await;
    let _ = stream.shutdown().await;
    if refused {
        // Closing with unread bytes would send a reset, which can destroy the answer before
        // the client reads it (RFC 9112 §9.6).
        drain(&mut stream).await;
    }
}

/// Reads one request (`httpwire` decides) until it is whole, refused, or the client stops
/// sending.
async fn read_request<S: AsyncRead + Unpin>(stream: &mut S) -> Result<Request, Refusal> {
    let mut reader = RequestReader::default();
    let mut chunk = [0u8; 4096];
    loop {
        let n = match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if reader.push(&chunk[..n]) != httpwire::Progress::NeedMore {
            break;
        }
    }
    reader.finish()
}

/// Reads and drops until the client closes, fails, or sends more than [`DRAIN_BYTES_MAX`].
async fn drain<S: AsyncRead + Unpin>(stream: &mut S) {
    let mut chunk = [0u8; 4096];
    let mut drained = 0;
    while drained <= DRAIN_BYTES_MAX {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => drained += n,
        }
    }
}

async fn route(admin: &Admin, r: &Request) -> Response {
    let get = r.method == "GET";
    let put = r.method == "PUT" || r.method == "POST";
    let state = &admin.state;
    if admin.metrics_only && r.path != "/metrics" {
        return Response::text(404, "not found: this endpoint serves /metrics only\n");
    }
    if let Some(sub) = r.path.strip_prefix("/api/v1/autorecovery/") {
        let Some(routes) = &admin.autorecovery else {
            return Response::text(
                404,
                "autorecovery routes need a metadata store (cluster mode)\n",
            );
        };
        if let Some(answer) = routes.route(&r.method, sub, &r.query, &r.body).await {
            return Response::answer(answer);
        }
    }
    if let Some(routes) = &admin.autorecovery {
        let answer =
            crate::admin::cluster_routes::route(routes, &r.method, &r.path, &r.query).await;
        if let Some(answer) = answer {
            return Response::answer(answer);
        }
    }
    match r.path.as_str() {
        "/heartbeat" => Response::text(200, "OK\n"),
        "/api/v1/config/server_config" if get => server_config(&admin.config),
        "/api/v1/config/server_config" if put => Response::error(
            501,
            "this bookie does not change its configuration at run time: edit bk_server.conf \
             (or the BK_ variables) and restart it",
        ),
        "/metrics" if get => Response {
            status: 200,
            content_type: "text/plain; version=0.0.4; charset=utf-8",
            body: admin.metrics.render(state).into_bytes(),
        },
        "/metrics" => Response::text(403, "GET only\n"),
        "/api/v1/bookie/info" if get => {
            match crate::admin::readonly::ledger_space(&admin.config.ledger_dirs) {
                Ok(u) => Response::json(
                    200,
                    serde_json::json!({ "freeSpace": u.usable_bytes, "totalSpace": u.total_bytes }),
                ),
                Err(e) => Response::error(500, &format!("statvfs: {e}")),
            }
        }
        "/api/v1/bookie/state" if get => Response::json(
            200,
            serde_json::json!({
                "running": state.is_running(),
                "readOnly": state.is_read_only(),
                "shuttingDown": state.is_shutting_down(),
                "availableForHighPriorityWrites": state.high_priority_available(),
            }),
        ),
        "/api/v1/bookie/is_ready" if get => {
            if state.is_running() && !state.is_shutting_down() {
                Response::text(200, "OK\n")
            } else {
                Response::text(503, "Bookie is not fully started yet\n")
            }
        }
        "/api/v1/bookie/state/readonly" if get => readonly_state(state),
        "/api/v1/bookie/state/readonly" if put => {
            let wanted = serde_json::from_slice::<serde_json::Value>(&r.body)
                .ok()
                .and_then(|v| v.get("readOnly").and_then(|b| b.as_bool()));
            let Some(read_only) = wanted else {
                return Response::error(400, "expected a body like {\"readOnly\": true}");
            };
            match state.set_manual(read_only) {
                Ok(()) => readonly_state(state),
                Err(why) => Response::error(400, &why),
            }
        }
        // Ours, not Java's: flush every shard's write cache now (benchmarks use it to read
        // from ledger storage; a GC request would also flush, but collects garbage too).
        "/api/v1/bookie/flush" if put => {
            let sent = admin
                .shards
                .iter()
                .filter(|s| s.admin.send(AdminQuery::Flush).is_ok())
                .count();
            Response::json(
                200,
                serde_json::json!(format!("Flush requested of {sent} shards")),
            )
        }
        "/api/v1/bookie/gc" if put => {
            // Java: optional {"forceMajor": .., "forceMinor": ..}, booleans or strings.
            let body = json_body(&r.body);
            let req = GcRequest {
                force: true,
                force_major: json_flag(&body, "forceMajor"),
                force_minor: json_flag(&body, "forceMinor"),
            };
            match &admin.gc {
                Some(t) if t.trigger(req) => Response::json(
                    200,
                    serde_json::json!(format!(
                        "Triggered GC on BookieServer: {}:{}",
                        admin.config.bind_address, admin.config.port
                    )),
                ),
                _ => Response::error(503, "garbage collection is not running"),
            }
        }
        "/api/v1/bookie/gc" if get => {
            let forcing = admin.gc.as_ref().is_some_and(|t| t.force_pending())
                || admin
                    .metrics
                    .shards
                    .iter()
                    .any(|s| s.gc.force_compacting.load(Relaxed));
            Response::json(
                200,
                serde_json::json!({ "is_in_force_gc": forcing.to_string() }),
            )
        }
        "/api/v1/bookie/gc_details" | "/api/v1/bookie/gc/details" if get => {
            let list: Vec<serde_json::Value> = admin
                .metrics
                .shards
                .iter()
                .map(|s| {
                    let g = &s.gc;
                    serde_json::json!({
                        "forceCompacting": g.force_compacting.load(Relaxed),
                        "majorCompacting": g.major_compacting.load(Relaxed),
                        "minorCompacting": g.minor_compacting.load(Relaxed),
                        "lastMajorCompactionTime": g.last_major_ms.load(Relaxed),
                        "lastMinorCompactionTime": g.last_minor_ms.load(Relaxed),
                        "majorCompactionCounter": g.major_count.load(Relaxed),
                        "minorCompactionCounter": g.minor_count.load(Relaxed),
                        "deletedLedgers": g.deleted_ledgers.load(Relaxed),
                        "reclaimedDeletionBytes": g.reclaimed_deletion_bytes.load(Relaxed),
                        "reclaimedCompactionBytes": g.reclaimed_compaction_bytes.load(Relaxed),
                        "entryLogUsage": g.usage_ppm.load(Relaxed) as f64 / 1e6,
                    })
                })
                .collect();
            Response::json(200, serde_json::Value::Array(list))
        }
        "/api/v1/bookie/gc/suspend_compaction" | "/api/v1/bookie/gc/resume_compaction" if put => {
            let body = json_body(&r.body);
            let ctl = &admin.metrics.gc_control;
            let suspend = r.path.ends_with("suspend_compaction");
            let (major, minor) = if suspend {
                ("suspendMajor", "suspendMinor")
            } else {
                ("resumeMajor", "resumeMinor")
            };
            if json_flag(&body, major) {
                ctl.suspend_major.store(suspend, Relaxed);
            }
            if json_flag(&body, minor) {
                ctl.suspend_minor.store(suspend, Relaxed);
            }
            gc_suspension(admin)
        }
        "/api/v1/bookie/gc/suspend_compaction" if get => gc_suspension(admin),
        "/api/v1/bookie/list_ledgers" if get => list_ledgers(admin).await,
        _ => Response::error(404, "not found"),
    }
}

/// Java's `ConfigurationService` GET: the configuration's keys and values as strings (Java's
/// `asJson` of what was set). Here: what the conf file and the `BK_` variables gave. Passwords
/// (`httpServerKeyStorePassword`, ...) are not shown, unlike Java: anyone with a client
/// certificate for the admin server would read the key stores' passwords.
fn server_config(config: &BookieConfig) -> Response {
    let map: serde_json::Map<String, serde_json::Value> = config
        .properties
        .iter()
        .map(|(k, v)| {
            let shown = if k.to_ascii_lowercase().ends_with("password") {
                "(not shown)".to_string()
            } else {
                v.clone()
            };
            (k.clone(), serde_json::Value::String(shown))
        })
        .collect();
    Response::json(200, serde_json::Value::Object(map))
}

fn json_body(body: &[u8]) -> serde_json::Value {
    serde_json::from_slice(body).unwrap_or(serde_json::Value::Null)
}

/// A flag of a Java admin body: `true` or `"true"`.
fn json_flag(body: &serde_json::Value, key: &str) -> bool {
    match body.get(key) {
        Some(serde_json::Value::Bool(b)) => *b,
        Some(serde_json::Value::String(s)) => s.eq_ignore_ascii_case("true"),
        _ => false,
    }
}

fn gc_suspension(admin: &Admin) -> Response {
    let ctl = &admin.metrics.gc_control;
    Response::json(
        200,
        serde_json::json!({
            "isMajorGcSuspended": ctl.suspend_major.load(Relaxed).to_string(),
            "isMinorGcSuspended": ctl.suspend_minor.load(Relaxed).to_string(),
        }),
    )
}

fn readonly_state(state: &BookieState) -> Response {
    Response::json(200, serde_json::json!({ "readOnly": state.is_read_only() }))
}

/// The ledgers the shards hold (write cache and ledger storage): asked of each shard over its
/// admin queue, answered between requests.
async fn list_ledgers(admin: &Admin) -> Response {
    let mut ids = Vec::new();
    for shard in admin.shards.iter() {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if shard.admin.send(AdminQuery::ListLedgers(tx)).is_err() {
            return Response::error(503, "a shard is not running");
        }
        match tokio::time::timeout(Duration::from_secs(5), rx).await {
            Ok(Ok(list)) => ids.extend(list),
            _ => return Response::error(503, "a shard did not answer"),
        }
    }
    ids.sort_unstable();
    Response::json(
        200,
        serde_json::json!({ "count": ids.len(), "ledgers": ids }),
    )
}

#[cfg(test)]
mod bad_input;
