//! Autorecovery over the real cluster: the ports over ZooKeeper and the wire ([`cluster`],
//! [`conn`]) and the daemon that runs the auditor and a worker ([`daemon`]).

pub mod cluster;
pub mod conn;
pub mod daemon;
