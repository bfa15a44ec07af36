//! The bookie's view of the cluster metadata in ZooKeeper.
//!
//! Everything here runs on a control-plane tokio runtime, never on a shard thread.
//!
//! # API for the bookie
//!
//! ```text
//! // configuration (bk_server.conf keys)
//! let addr = derive_bookie_address(&BookieIdConfig { .. })?;           // id + published host
//! let info = BookieServiceInfo::for_bookie(&addr.host, addr.port, tls, http);
//! let cfg  = MetadataConfig::from_keys(|k| conf.get(k), addr.id, info)?;
//!
//! // start-up, after journal replay
//! let zk = zk::connect(&cfg).await?;
//! let instance_id = cluster::read_instance_id(&zk, &cfg).await?;         // fails if <root> missing
//! cookie::validate_and_stamp(&zk, &cfg, &dirs, instance_id, &opts).await?;  // refuses mismatches
//! let reg = Registration::start(cfg.clone(), read_only).await?;         // exit 4 on error
//! reg.set_read_only(true).await?;                                        // disk full, admin
//! reg.watch_state()  // RegState::Failed(_) => exit(EXIT_ZK_REG_FAIL)
//! reg.shutdown().await?;                                                 // delete node, close
//!
//! // garbage collection
//! let live = ledgers::live_ledgers(&zk, &cfg, None).await?;             // refuses unknown LAYOUT
//! let delete = ledgers::gc_decision(&local_ids, Ok(&live), false)?;     // safety rules
//! let md = ledger_metadata::read_ledger_metadata(&zk, &cfg, layout, id).await?; // None: gone
//! let lock = underreplication::acquire(&zk, &cfg, id, &host).await?;   // over-replicated GC
//! ```
//!
//! Cluster tools: [`cluster::init_new_cluster`], [`cluster::metaformat`],
//! [`cluster::list_bookies`], and the `bk-metadata` binary (see `src/bin/bk-metadata.rs`),
//! whose `cli::run` the bookie can expose as `bookie initnewcluster|metaformat|listbookies`.
//!
//! Errors carry the exit code Java would use ([`MetaError::exit_code`]).

#![deny(unsafe_code)]

pub mod cli;
pub mod cluster;
pub mod config;
pub mod cookie;
pub mod error;
pub mod ledger_metadata;
pub mod ledgers;
pub mod pb;
pub mod registration;
pub mod service_info;
pub mod underreplication;
pub mod zk;

pub use cluster::{BookieList, LedgerLayout};
pub use config::{
    derive_bookie_address, parse_metadata_uri, BookieAddress, BookieIdConfig, MetadataConfig,
    UriLayout,
};
pub use error::{MetaError, Result, EXIT_INVALID_CONF, EXIT_ZK_REG_FAIL};
pub use registration::{RegState, Registration};
pub use service_info::{BookieServiceInfo, Endpoint};
pub use zookeeper_client as zookeeper;
