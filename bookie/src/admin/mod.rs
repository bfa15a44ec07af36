//! How the bookie is operated and seen: the HTTP admin server and the metrics endpoint (which
//! of them run: `endpoints`), metrics, its process-wide state (read-only mode), and its
//! registration in ZooKeeper.

pub mod bookie_status;
pub mod clock;
pub mod cluster;
pub mod cluster_routes;
pub mod disk_routes;
pub mod disk_space;
pub mod endpoints;
pub mod http;
pub mod jackson;
pub mod ledger_routes;
pub mod metrics;
pub mod readonly;
pub mod routes;
