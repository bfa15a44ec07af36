//! Which HTTP servers a bookie runs, and on what, as a Java bookie decides it.
//!
//! - The admin server (`httpServerEnabled`, `httpServerHost:httpServerPort`): every route of
//!   `admin/http.rs`, `/metrics` included; HTTPS with client certificates required when
//!   `httpServerTlsEnable` (`security/http_tls.rs`). A port in use stops the start when the
//!   server was asked for (standalone's default only warns); HTTPS asked for and not possible
//!   always does: never an open plaintext admin server in its place.
//! - The Prometheus provider's own endpoint (`config::PrometheusConfig`): `/metrics` alone, when
//!   `statsProviderClass` names Java's provider and the admin server is off, as Apache's and
//!   Pulsar's stock bk_server.conf have it. A port it cannot bind stops the start, as in Java.

use std::sync::Arc;

use crate::admin::http::{Admin, HttpServer};
use crate::admin::metrics::Metrics;
use crate::admin::readonly::BookieState;
use crate::config::{BookieConfig, PROMETHEUS_PROVIDER};
use crate::gc::GcTrigger;
use crate::shard::mailbox::ShardHandle;

/// The running HTTP servers; stopped by [`HttpEndpoints::stop`] or when dropped.
#[derive(Default)]
pub struct HttpEndpoints {
    admin: Option<HttpServer>,
    metrics: Option<HttpServer>,
}

/// What the handlers of either server read.
pub struct Sources {
    pub config: Arc<BookieConfig>,
    pub state: Arc<BookieState>,
    pub metrics: Arc<Metrics>,
    pub shards: Arc<Vec<ShardHandle>>,
    pub gc: Option<GcTrigger>,
    pub autorecovery: Option<Arc<crate::autorecovery::routes::AutorecoveryRoutes>>,
}

impl Sources {
    fn admin(&self, metrics_only: bool) -> Admin {
        Admin {
            state: self.state.clone(),
            metrics: self.metrics.clone(),
            config: self.config.clone(),
            shards: self.shards.clone(),
            gc: if metrics_only { None } else { self.gc.clone() },
            metrics_only,
            autorecovery: if metrics_only {
                None
            } else {
                self.autorecovery.clone()
            },
            config_overrides: Default::default(),
        }
    }
}

impl HttpEndpoints {
    /// Starts the servers the configuration asks for; an error is why the bookie must not start.
    pub fn start(sources: Sources) -> Result<HttpEndpoints, String> {
        let config = &sources.config;
        let mut endpoints = HttpEndpoints::default();
        if config.http.enabled {
            match start_admin(&sources) {
                Ok(server) => endpoints.admin = Some(server),
                Err(e) if config.http.required || config.http.tls.enabled => return Err(e),
                Err(e) => log::warn!("{e}; serving without the HTTP admin server"),
            }
        }
        let p = &config.http.prometheus;
        if let Some(class) = p.provider_class.as_deref() {
            if class != PROMETHEUS_PROVIDER {
                log::warn!(
                    "statsProviderClass {class}: this bookie exports Prometheus metrics only, on \
                     {}",
                    if config.http.enabled {
                        "the admin server's /metrics"
                    } else {
                        "nothing while httpServerEnabled=false"
                    }
                );
            }
        }
        if let Some((host, port)) = p.own_endpoint(config.http.enabled) {
            let server = HttpServer::start(sources.admin(true), host, port, None)
                .map_err(|e| format!("prometheus stats endpoint (prometheusStatsHttpPort): {e}"))?;
            log::info!(
                "prometheus stats endpoint on http://{}/metrics",
                server.addr
            );
            endpoints.metrics = Some(server);
        }
        Ok(endpoints)
    }

    pub fn stop(&mut self) {
        if let Some(server) = self.admin.take() {
            server.stop();
        }
        if let Some(server) = self.metrics.take() {
            server.stop();
        }
    }
}

fn start_admin(sources: &Sources) -> Result<HttpServer, String> {
    let http = &sources.config.http;
    let tls = if http.tls.enabled {
        Some(
            http.tls
                .server_config()
                .map_err(|e| format!("http admin server: {e}"))?,
        )
    } else {
        None
    };
    let https = tls.is_some();
    let server = HttpServer::start(sources.admin(false), &http.host, http.port, tls)?;
    log::info!(
        "http admin server on {}{}",
        server.addr,
        if https {
            " (HTTPS, client certificates required)"
        } else {
            ""
        }
    );
    Ok(server)
}
