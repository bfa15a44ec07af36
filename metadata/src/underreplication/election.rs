//! Auditor election, as Java's `ZkLedgerAuditorManager` runs it, so that our autorecovery and
//! Java's elect one auditor between them: each candidate creates an ephemeral sequential
//! `<root>/underreplication/auditorelection/V_<10 digits>` holding `bookieId: "<its id>"`; the
//! lowest number is the auditor, which also writes its vote onto `auditorelection` itself; the
//! others watch the vote just before theirs. `whoisauditor` reads the first vote. Only
//! children named `V_<digits>` are votes (a Java elector fails on any other name, so this code
//! never creates one).

use zookeeper_client::{Client, CreateMode, Error as ZkError};

use super::records;
use crate::config::MetadataConfig;
use crate::error::{MetaError, Result};
use crate::zk::PERSISTENT;

fn election_path(cfg: &MetadataConfig) -> String {
    format!("{}/underreplication/auditorelection", cfg.ledgers_root)
}

fn vote_number(name: &str) -> Option<i64> {
    let d = name.strip_prefix("V_")?;
    (!d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        .then(|| d.parse().ok())
        .flatten()
}

/// The votes, lowest first.
async fn votes(zk: &Client, path: &str) -> Result<Vec<String>> {
    let mut v: Vec<(i64, String)> = match zk.list_children(path).await {
        Ok(c) => c,
        Err(ZkError::NoNode) => Vec::new(),
        Err(e) => return Err(MetaError::zk(format!("list {path}"), e)),
    }
    .into_iter()
    .filter_map(|c| vote_number(&c).map(|n| (n, c)))
    .collect();
    v.sort();
    Ok(v.into_iter().map(|(_, c)| c).collect())
}

/// Whether the election's node exists (a cluster where no auditor ever ran has none; Java's
/// admin then reports ZooKeeper's NoNode rather than "no auditor").
pub async fn election_exists(zk: &Client, cfg: &MetadataConfig) -> Result<bool> {
    let path = election_path(cfg);
    zk.check_stat(&path)
        .await
        .map(|s| s.is_some())
        .map_err(|e| MetaError::zk(format!("read {path}"), e))
}

/// Java's `KeeperException.NoNodeException` text for the election's node.
pub fn election_no_node(cfg: &MetadataConfig) -> String {
    format!(
        "org.apache.zookeeper.KeeperException$NoNodeException: KeeperErrorCode = NoNode for {}",
        election_path(cfg)
    )
}

/// The elected auditor's bookie id (`whoisauditor`); `None` when nobody stands.
pub async fn current_auditor(zk: &Client, cfg: &MetadataConfig) -> Result<Option<String>> {
    let path = election_path(cfg);
    for vote in votes(zk, &path).await? {
        let p = format!("{path}/{vote}");
        match zk.get_data(&p).await {
            Ok((data, _)) => return records::parse_bookie_id_record(&data),
            Err(ZkError::NoNode) => continue, // gone meanwhile: the next one leads
            Err(e) => return Err(MetaError::zk(format!("read {p}"), e)),
        }
    }
    Ok(None)
}

/// One candidate.
pub struct Elector {
    zk: Client,
    path: String,
    bookie_id: String,
    vote: Option<String>,
}

impl Elector {
    pub fn new(zk: Client, cfg: &MetadataConfig, bookie_id: &str) -> Elector {
        Elector {
            zk,
            path: election_path(cfg),
            bookie_id: bookie_id.to_string(),
            vote: None,
        }
    }

    async fn ensure(&self, path: &str) -> Result<()> {
        match self.zk.create(path, b"", &PERSISTENT).await {
            Ok(_) | Err(ZkError::NodeExists) => Ok(()),
            Err(e) => Err(MetaError::zk(format!("create {path}"), e)),
        }
    }

    /// Our vote, created if we have none (or it vanished with an old session).
    async fn vote(&mut self) -> Result<String> {
        if let Some(v) = &self.vote {
            let full = format!("{}/{v}", self.path);
            if matches!(self.zk.check_stat(&full).await, Ok(Some(_))) {
                return Ok(v.clone());
            }
        }
        let under = self
            .path
            .rsplit_once('/')
            .map(|(p, _)| p.to_string())
            .unwrap_or_default();
        self.ensure(&under).await?;
        self.ensure(&self.path).await?;
        let data = records::bookie_id_record(&self.bookie_id);
        let opts = CreateMode::EphemeralSequential.with_acls(zookeeper_client::Acls::anyone_all());
        let prefix = format!("{}/V_", self.path);
        let (_, seq) = self
            .zk
            .create(&prefix, &data, &opts)
            .await
            .map_err(|e| MetaError::zk(format!("create {prefix}"), e))?;
        let name = format!("V_{seq}");
        self.vote = Some(name.clone());
        Ok(name)
    }

    /// Returns once this candidate is the auditor (it then writes its vote onto the election
    /// node, as Java does "for debugging").
    pub async fn wait_until_elected(&mut self) -> Result<()> {
        loop {
            let mine = self.vote().await?;
            let all = votes(&self.zk, &self.path).await?;
            let Some(at) = all.iter().position(|v| *v == mine) else {
                continue; // our vote vanished between the two calls: vote again
            };
            if at == 0 {
                let data = records::bookie_id_record(&self.bookie_id);
                self.zk
                    .set_data(&self.path, &data, None)
                    .await
                    .map_err(|e| MetaError::zk(format!("write {}", self.path), e))?;
                return Ok(());
            }
            let before = format!("{}/{}", self.path, all[at - 1]);
            match self.zk.check_and_watch_stat(&before).await {
                Ok((None, _)) => continue,
                Ok((Some(_), watcher)) => {
                    watcher.changed().await;
                }
                Err(e) => return Err(MetaError::zk(format!("watch {before}"), e)),
            }
        }
    }

    /// Withdraws the vote (at shutdown; a dead session withdraws it too).
    pub async fn resign(&mut self) {
        if let Some(v) = self.vote.take() {
            let _ = self.zk.delete(&format!("{}/{v}", self.path), None).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_v_digits_are_votes() {
        assert_eq!(vote_number("V_0000000007"), Some(7));
        assert_eq!(vote_number("V_"), None);
        assert_eq!(vote_number("X_0001"), None);
        assert_eq!(vote_number("V_12a"), None);
    }
}
