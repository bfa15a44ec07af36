//! How the bookie is operated and seen: the HTTP admin server, metrics, its process-wide
//! state (read-only mode), and its registration in ZooKeeper.

pub mod clock;
pub mod cluster;
pub mod http;
pub mod metrics;
pub mod readonly;
