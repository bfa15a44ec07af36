//! The ports over the real cluster: ledger metadata and registrations in ZooKeeper (the
//! `metadata` crate), Java's under-replication manager, and the bookies over the wire
//! (v3 requests, pipelined per batch on one connection per bookie). A bookie's address comes
//! from its registration (`BookieServiceInfo`'s `bookie-rpc` endpoint), else from its id when
//! that is `host:port`.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{SocketAddr, ToSocketAddrs};

use bytes::Bytes;
use metadata::cluster::{self, LedgerLayout};
use metadata::ledger_metadata::{self, LedgerMetadata, Versioned, WriteOutcome};
use metadata::underreplication::manager::{Claim, UrManager};
use metadata::underreplication::records::UrRecord;
use metadata::zookeeper::{Client, Error as ZkError};
use metadata::MetadataConfig;
use net::{ReadFlag, Request, Response, StatusCode};

use super::conn::Conn;
use crate::placement::parse_pulsar_racks;
use crate::port::{AddError, Cluster, PortResult, ReadError, Registered, UnderReplication};

/// Idle connections kept per bookie (the copy's pipeline depth at most).
const MAX_IDLE_CONNS: usize = crate::copy::MAX_BATCHES_IN_FLIGHT;

pub struct LiveCluster {
    pub zk: Client,
    pub cfg: MetadataConfig,
    layout: LedgerLayout,
    pub ur: UrManager,
    /// Idle connections per bookie: a batch takes one (or opens one) and gives it back, so
    /// the copy's batches in flight to one bookie each have their own.
    conns: RefCell<BTreeMap<String, Vec<Conn>>>,
    addrs: RefCell<BTreeMap<String, SocketAddr>>,
}

impl LiveCluster {
    pub async fn open(
        zk: Client,
        cfg: MetadataConfig,
        lock_host: &str,
    ) -> Result<LiveCluster, String> {
        let layout = cluster::read_layout(&zk, &cfg)
            .await
            .map_err(|e| e.to_string())?
            .unwrap_or(LedgerLayout::Hierarchical);
        let ur = UrManager::open(zk.clone(), &cfg, lock_host)
            .await
            .map_err(|e| e.to_string())?;
        Ok(LiveCluster {
            zk,
            cfg,
            layout,
            ur,
            conns: RefCell::new(BTreeMap::new()),
            addrs: RefCell::new(BTreeMap::new()),
        })
    }

    async fn address(&self, bookie: &str) -> Result<SocketAddr, String> {
        if let Some(a) = self.addrs.borrow().get(bookie) {
            return Ok(*a);
        }
        let info = cluster::read_bookie_service_info(&self.zk, &self.cfg, bookie)
            .await
            .ok()
            .flatten();
        let hostport = match info.as_ref().and_then(|i| i.rpc_endpoint()) {
            Some(ep) => format!("{}:{}", ep.host, ep.port),
            None => bookie.to_string(),
        };
        let addr = hostport
            .to_socket_addrs()
            .map_err(|e| format!("bookie {bookie}: cannot resolve {hostport}: {e}"))?
            .min_by_key(|a| !a.is_ipv4())
            .ok_or_else(|| format!("bookie {bookie}: {hostport} has no address"))?;
        self.addrs.borrow_mut().insert(bookie.to_string(), addr);
        Ok(addr)
    }

    /// The ledger layout the cluster's `LAYOUT` node names (hierarchical when absent).
    pub fn layout(&self) -> LedgerLayout {
        self.layout
    }

    /// One batch to `bookie` on an idle connection (opened if none; dropped on failure).
    pub async fn call(
        &self,
        bookie: &str,
        requests: Vec<Request>,
    ) -> Result<Vec<Response>, String> {
        let existing = self
            .conns
            .borrow_mut()
            .get_mut(bookie)
            .and_then(|idle| idle.pop());
        let mut conn = match existing {
            Some(c) => c,
            None => {
                let addr = self.address(bookie).await?;
                Conn::open(addr).await.inspect_err(|_| {
                    self.addrs.borrow_mut().remove(bookie);
                })?
            }
        };
        let result = conn.call_all(requests).await;
        if result.is_ok() {
            let mut conns = self.conns.borrow_mut();
            let idle = conns.entry(bookie.to_string()).or_default();
            if idle.len() < MAX_IDLE_CONNS {
                idle.push(conn);
            }
        }
        result
    }
}

fn read_result(r: Response) -> Result<Bytes, ReadError> {
    match r {
        Response::ReadEntry {
            status: StatusCode::EOK,
            body: Some(b),
            ..
        } => Ok(b),
        Response::ReadEntry {
            status: StatusCode::ENOENTRY,
            ..
        } => Err(ReadError::NoEntry),
        Response::ReadEntry {
            status: StatusCode::ENOLEDGER,
            ..
        } => Err(ReadError::NoLedger),
        other => Err(ReadError::Failed(format!("{other:?}"))),
    }
}

impl Cluster for LiveCluster {
    async fn ledger_ids(&self) -> PortResult<Vec<u64>> {
        metadata::ledgers::live_ledgers(&self.zk, &self.cfg, None)
            .await
            .map(|s| s.into_iter().collect())
            .map_err(|e| e.to_string())
    }

    async fn read_ledger(&self, ledger: u64) -> PortResult<Option<Versioned>> {
        ledger_metadata::read_versioned(&self.zk, &self.cfg, self.layout, ledger)
            .await
            .map_err(|e| e.to_string())
    }

    async fn write_ledger(
        &self,
        ledger: u64,
        md: &LedgerMetadata,
        version: i32,
    ) -> PortResult<WriteOutcome> {
        ledger_metadata::write_versioned(&self.zk, &self.cfg, self.layout, ledger, md, version)
            .await
            .map_err(|e| e.to_string())
    }

    async fn registered(&self) -> PortResult<Registered> {
        let list = cluster::list_bookies(&self.zk, &self.cfg)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Registered {
            writable: list.writable.into_iter().collect(),
            read_only: list.read_only.into_iter().collect(),
        })
    }

    async fn racks(&self) -> Vec<(String, String)> {
        match self.zk.get_data("/bookies").await {
            Ok((data, _)) => parse_pulsar_racks(&data),
            Err(ZkError::NoNode) => Vec::new(),
            Err(e) => {
                log::warn!("autorecovery: cannot read the rack mapping /bookies: {e}");
                Vec::new()
            }
        }
    }

    async fn read_entries(
        &self,
        bookie: &str,
        ledger: u64,
        entries: &[i64],
    ) -> Vec<Result<Bytes, ReadError>> {
        let requests = entries
            .iter()
            .map(|&e| Request::ReadEntry {
                ledger_id: ledger as i64,
                entry_id: e,
                master_key: None,
                flag: None,
                previous_lac: None,
                time_out: None,
            })
            .collect();
        match self.call(bookie, requests).await {
            Ok(rs) => rs.into_iter().map(read_result).collect(),
            Err(e) => entries
                .iter()
                .map(|_| Err(ReadError::Failed(e.clone())))
                .collect(),
        }
    }

    async fn read_last(
        &self,
        bookie: &str,
        ledger: u64,
        fence: Option<&[u8; 20]>,
    ) -> Result<Option<Bytes>, ReadError> {
        let request = Request::ReadEntry {
            ledger_id: ledger as i64,
            entry_id: -1,
            master_key: fence.map(|k| Bytes::copy_from_slice(k)),
            flag: fence.map(|_| ReadFlag::FenceLedger),
            previous_lac: None,
            time_out: None,
        };
        let r = self
            .call(bookie, vec![request])
            .await
            .map_err(ReadError::Failed)?
            .pop()
            .ok_or_else(|| ReadError::Failed("no reply".into()))?;
        match read_result(r) {
            Ok(b) => Ok(Some(b)),
            Err(ReadError::NoEntry) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn recovery_add(
        &self,
        bookie: &str,
        ledger: u64,
        key: &[u8; 20],
        entries: Vec<(i64, Bytes)>,
    ) -> Vec<Result<(), AddError>> {
        let n = entries.len();
        let master_key = Bytes::copy_from_slice(key);
        let requests = entries
            .into_iter()
            .map(|(e, body)| Request::AddEntry {
                ledger_id: ledger as i64,
                entry_id: e,
                master_key: master_key.clone(),
                body,
                recovery: true,
                write_flags: None,
            })
            .collect();
        match self.call(bookie, requests).await {
            Ok(rs) => rs
                .into_iter()
                .map(|r| match r {
                    Response::AddEntry {
                        status: StatusCode::EOK,
                        ..
                    } => Ok(()),
                    other => Err(AddError(format!("{other:?}"))),
                })
                .collect(),
            Err(e) => (0..n).map(|_| Err(AddError(e.clone()))).collect(),
        }
    }

    fn now_ms(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64)
    }

    async fn sleep_ms(&self, ms: u64) {
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }
}

impl UnderReplication for LiveCluster {
    async fn mark(&self, ledger: u64, missing: &[String], now_ms: Option<i64>) -> PortResult<()> {
        self.ur
            .mark(ledger, missing, now_ms)
            .await
            .map_err(|e| e.to_string())
    }

    async fn list(&self) -> PortResult<Vec<(u64, UrRecord)>> {
        self.ur.list().await.map_err(|e| e.to_string())
    }

    async fn claim(&self, skip: &BTreeSet<u64>, seed: u64) -> PortResult<Option<Claim>> {
        self.ur.claim(skip, seed).await.map_err(|e| e.to_string())
    }

    async fn mark_replicated(&self, claim: &Claim) -> PortResult<()> {
        self.ur
            .mark_replicated(claim)
            .await
            .map_err(|e| e.to_string())
    }

    async fn release(&self, ledger: u64) -> PortResult<()> {
        self.ur.release(ledger).await.map_err(|e| e.to_string())
    }

    async fn is_enabled(&self) -> PortResult<bool> {
        self.ur.is_enabled().await.map_err(|e| e.to_string())
    }

    async fn lost_bookie_recovery_delay(&self) -> PortResult<Option<i32>> {
        self.ur
            .lost_bookie_recovery_delay()
            .await
            .map_err(|e| e.to_string())
    }
}
