//! Autorecovery in the bookie (docs/autorecovery.md): the daemon of the `autorecovery` crate
//! started when `autoRecoveryDaemonEnabled=true` in cluster mode (after the registration, as
//! Java starts its AutoRecoveryService; stopped before the bookie unregisters), `bookie
//! autorecovery` (the daemon alone, as `bookkeeper autorecovery`, with its own HTTP server:
//! [`http`]), the admin routes `/api/v1/autorecovery/*` ([`routes`]) and the daemon's series in
//! `/metrics` ([`metrics`]).

pub mod admin_ops;
pub mod http;
pub mod metrics;
pub mod routes;

use autorecovery::live::daemon::{Daemon, DaemonConfig, Role};
use autorecovery::placement::Policy;

use crate::admin::cluster::{metadata_config, Failure};
use crate::config::BookieConfig;

/// The daemon's configuration from the bookie's.
pub fn daemon_config(config: &BookieConfig, role: Role) -> Result<DaemonConfig, Failure> {
    let metadata = metadata_config(config)?;
    let a = &config.autorecovery;
    let mut settings = a.settings.clone();
    settings.placement = Policy::from_class(a.placement_class.as_deref(), a.enforce_min_racks);
    Ok(DaemonConfig {
        bookie_id: metadata.bookie_id.clone(),
        metadata,
        lock_host: metadata::config::java_canonical_host_name(),
        settings,
        role,
    })
}

/// Starts the daemon when the configuration asks for it (cluster mode only).
pub fn start(config: &BookieConfig) -> Result<Option<Daemon>, Failure> {
    if !config.autorecovery.enabled || !config.cluster.has_metadata_store() {
        return Ok(None);
    }
    let cfg = daemon_config(config, Role::Both)?;
    log::info!(
        "autorecovery: starting (lostBookieRecoveryDelay {} s, grace {} ms, {} entries per batch, {} bytes/s)",
        cfg.settings.lost_bookie_recovery_delay_s,
        cfg.settings.open_ledger_grace_ms,
        cfg.settings.batch_entries,
        cfg.settings.rate_bytes_per_sec
    );
    Daemon::start(cfg).map(Some).map_err(Failure::from)
}
