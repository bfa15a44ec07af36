//! The standalone daemon's HTTP server (`bookie autorecovery` with `httpServerEnabled=true`),
//! as Java's AutoRecoveryMain serves one: `/heartbeat`, `/metrics` (the daemon's series,
//! `autorecovery/metrics.rs`) and the seven `/api/v1/autorecovery/*` routes. The Pulsar chart's
//! recovery pod is scraped there. Anything else is 404, as the bookie-only routes are useless
//! without a bookie. The server itself is the bookie's (`admin/http.rs`: limits, TLS).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use autorecovery::live::daemon::Status;

use super::routes::AutorecoveryRoutes;
use crate::admin::http::{Request, Response, Service};

/// What the standalone server answers from.
pub struct StandaloneAdmin {
    pub routes: Arc<AutorecoveryRoutes>,
    pub status: Arc<Mutex<Status>>,
}

impl Service for StandaloneAdmin {
    fn handle<'a>(&'a self, r: &'a Request) -> Pin<Box<dyn Future<Output = Response> + Send + 'a>> {
        Box::pin(async move {
            if let Some(sub) = r.path.strip_prefix("/api/v1/autorecovery/") {
                if let Some(answer) = self.routes.route(&r.method, sub, &r.query, &r.body).await {
                    return crate::admin::http::Response::answer(answer);
                }
            }
            match (r.method.as_str(), r.path.as_str()) {
                (_, "/heartbeat") => Response::text(200, "OK\n"),
                ("GET", "/metrics") => {
                    let mut body = String::new();
                    if let Ok(s) = self.status.lock() {
                        super::metrics::render(&mut body, &s, "");
                    }
                    Response {
                        status: 200,
                        content_type: "text/plain; version=0.0.4; charset=utf-8",
                        body: body.into_bytes(),
                    }
                }
                (_, "/metrics") => Response::text(403, "GET only\n"),
                _ => Response::text(
                    404,
                    "not found: a standalone autorecovery serves /heartbeat, /metrics and \
                     /api/v1/autorecovery/*\n",
                ),
            }
        })
    }
}
