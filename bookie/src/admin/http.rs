//! The HTTP admin server (docs/semantics.md §6.1): the sockets, TLS and limits; what each of
//! Java's 30 routes answers is `routes.rs`'s.
//!
//! It runs on its own thread with its own current-thread tokio runtime, never on a shard, so
//! a scrape or a slow admin client cannot delay a request. The HTTP/1.1 handling is ours and
//! small on purpose: a handful of routes with tiny bodies, answered with `Connection: close`,
//! do not justify hyper's dependency tree in a from-scratch CI build. The request framing
//! (request line, headers, `Content-Length`, limits) is the `httpwire` crate's, without I/O
//! and fuzzed; this module does the sockets and the deadline. Limits keep a bad
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

use std::net::SocketAddr;
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
use crate::shard::mailbox::ShardHandle;

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
    /// Keys set by `PUT /api/v1/config/server_config`: shown, not applied (as in Java).
    pub config_overrides: std::sync::Mutex<std::collections::BTreeMap<String, String>>,
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

#[cfg(test)]
mod bad_input;
