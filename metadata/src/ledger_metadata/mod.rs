//! Ledger metadata as the Java client writes it into a ledger's znode
//! (`LedgerMetadataSerDe`): read for garbage collection (over-replicated-ledger GC and
//! `verifyMetadataOnGC` need a ledger's state and ensembles) and for autorecovery, and written
//! back by autorecovery as Java's replication writes it: in the format version it was read in,
//! fields as Java's serializer emits them (byte for byte: `tests/data/ledger-metadata/`), with a
//! versioned `setData` ([`write_versioned`]).
//!
//! Every format starts with the header line `BookieMetadataFormatVersion\t<n>\n` (at most 10
//! digits). Then, by version:
//! - 1 (BookKeeper 4.0-4.1): lines `quorumSize`, `ensembleSize`, `length`, then one line per
//!   ensemble `firstEntryId\tbookie\tbookie...`, and for a closed ledger a last line
//!   `lastEntryId\tCLOSED` (`-102\tCLOSED` means in recovery);
//! - 2 (4.2-4.8): `LedgerMetadataFormat` in protobuf text format;
//! - 3 (4.9+): `LedgerMetadataFormat` in protobuf binary, preceded by its length as a varint.
//!
//! `LedgerMetadataFormat` (DataFormats.proto, proto2): 1 quorumSize int32, 2 ensembleSize
//! int32, 3 length int64, 4 lastEntryId int64, 5 state enum (OPEN 1, IN_RECOVERY 2, CLOSED 3),
//! 6 segment* {1 ensembleMember string*, 2 firstEntryId int64}, 7 digestType enum (CRC32 1,
//! HMAC 2, CRC32C 3, DUMMY 4), 8 password bytes, 9 ackQuorumSize int32, 10 ctime int64,
//! 11 customMetadata* {1 key string, 2 value bytes}, 12 cToken int64. Unknown fields are
//! skipped, a missing required field (1, 2, 3, 5) is an error, as protobuf refuses it.
//!
//! Bad input is a [`MetaError::BadData`] with what is wrong, never a panic; garbage collection
//! keeps a ledger whose metadata it cannot read.

use zookeeper_client::{Client, Error as ZkError};

use crate::cluster::LedgerLayout;
use crate::config::MetadataConfig;
use crate::error::{MetaError, Result};
use crate::ledgers::ledger_path;

const HEADER: &[u8] = b"BookieMetadataFormatVersion\t";
const MAX_VERSION_DIGITS: usize = 10;
/// Version 1's last entry id of a ledger in recovery.
const V1_IN_RECOVERY: i64 = -102;

/// A ledger's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LedgerState {
    Open,
    InRecovery,
    Closed,
}

/// The digest type recorded with the password (versions 2 and 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DigestType {
    Crc32,
    Hmac,
    Crc32c,
    Dummy,
}

/// What a ledger's znode says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LedgerMetadata {
    /// The format it was read from (1, 2 or 3).
    pub format_version: u32,
    pub ensemble_size: i32,
    pub write_quorum_size: i32,
    pub ack_quorum_size: i32,
    pub state: LedgerState,
    /// Last entry id and length: meaningful when closed.
    pub last_entry_id: Option<i64>,
    pub length: i64,
    /// (first entry id, bookie ids), in the order stored (ascending first entry ids).
    pub ensembles: Vec<(i64, Vec<String>)>,
    pub digest_type: Option<DigestType>,
    pub password: Option<Vec<u8>>,
    pub ctime: Option<i64>,
    pub custom_metadata: Vec<(String, Vec<u8>)>,
    pub ctoken: Option<i64>,
}

pub(crate) fn bad(what: impl std::fmt::Display) -> MetaError {
    MetaError::BadData(format!("ledger metadata: {what}"))
}

impl LedgerMetadata {
    pub fn is_closed(&self) -> bool {
        self.state == LedgerState::Closed
    }

    /// Whether `bookie` is in any of the ledger's ensembles.
    pub fn has_bookie(&self, bookie: &str) -> bool {
        self.ensembles
            .iter()
            .any(|(_, e)| e.iter().any(|b| b == bookie))
    }

    /// Parses a ledger znode's data, any version Java writes.
    pub fn parse(data: &[u8]) -> Result<LedgerMetadata> {
        let rest = data
            .strip_prefix(HEADER)
            .ok_or_else(|| bad("no BookieMetadataFormatVersion header"))?;
        let nl = rest
            .iter()
            .take(MAX_VERSION_DIGITS)
            .position(|&b| b == b'\n')
            .ok_or_else(|| bad("the format version line does not end"))?;
        let version: u32 = std::str::from_utf8(&rest[..nl])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad(format!("bad format version {:?}", &rest[..nl])))?;
        let body = &rest[nl + 1..];
        match version {
            1 => v1::parse(body),
            2 => {
                let text = std::str::from_utf8(body).map_err(|_| bad("version 2 is not UTF-8"))?;
                let fields = crate::pb::text::parse(text)?;
                format::Format::from_text(&fields)?.into_metadata(2)
            }
            3 => {
                let mut r = crate::pb::binary::Reader::new(body);
                let len = r.varint()?;
                let len = usize::try_from(len).map_err(|_| bad("length"))?;
                let msg = r.take(len)?;
                format::Format::from_binary(msg)?.into_metadata(3)
            }
            v => Err(bad(format!("format version {v} is not supported (1 to 3)"))),
        }
    }
}

impl LedgerMetadata {
    /// The checks Java's `LedgerMetadataBuilder.build` makes before any write: at least one
    /// ensemble, each of the ensemble size, first entry ids strictly increasing, ack quorum ≤
    /// write quorum ≤ ensemble size; and a password for versions 2 and 3 (Java cannot write
    /// those without one).
    pub fn validate(&self) -> Result<()> {
        if self.ensembles.is_empty() {
            return Err(bad("no ensemble"));
        }
        if !(1 <= self.ack_quorum_size
            && self.ack_quorum_size <= self.write_quorum_size
            && self.write_quorum_size <= self.ensemble_size)
        {
            return Err(bad(format!(
                "quorums {}/{}/{} (ensemble/write/ack) are not ordered",
                self.ensemble_size, self.write_quorum_size, self.ack_quorum_size
            )));
        }
        let mut previous: Option<i64> = None;
        for (first, members) in &self.ensembles {
            if members.len() != self.ensemble_size as usize {
                return Err(bad(format!(
                    "the ensemble at entry {first} has {} bookies, not {}",
                    members.len(),
                    self.ensemble_size
                )));
            }
            if previous.is_some_and(|p| p >= *first) {
                return Err(bad(format!(
                    "ensemble first entry ids not increasing at {first}"
                )));
            }
            previous = Some(*first);
        }
        if self.format_version >= 2 && self.password.is_none() {
            return Err(bad(
                "no password: Java does not write version 2 or 3 metadata without one",
            ));
        }
        Ok(())
    }

    /// The bytes of the znode, in the format the metadata was read in (Java never upgrades a
    /// ledger's format when it rewrites it).
    pub fn encode(&self) -> Result<Vec<u8>> {
        self.validate()?;
        let mut out = HEADER.to_vec();
        out.extend_from_slice(format!("{}\n", self.format_version).as_bytes());
        match self.format_version {
            1 => out.extend_from_slice(v1::encode(self).as_bytes()),
            2 => out.extend_from_slice(format::to_text(self).as_bytes()),
            3 => {
                let body = format::to_binary(self);
                let mut w = crate::pb::binary::Writer::new();
                w.varint(body.len() as u64);
                out.extend_from_slice(&w.buf);
                out.extend_from_slice(&body);
            }
            v => return Err(bad(format!("format version {v} cannot be written"))),
        }
        Ok(out)
    }

    /// The metadata as Java's `LedgerMetadataBuilder.from(md)` copies it for a rewrite: the
    /// creator token is not carried over (a version-3 rewrite writes 0).
    pub fn for_rewrite(&self) -> LedgerMetadata {
        LedgerMetadata {
            ctoken: (self.format_version == 3).then_some(0),
            ..self.clone()
        }
    }

    /// `replaceEnsembleEntry(first, ...)` with each bookie of that ensemble mapped through
    /// `replace`; `false` when no ensemble starts at `first`.
    pub fn replace_in_ensemble(
        &mut self,
        first: i64,
        replace: &dyn Fn(&str) -> Option<String>,
    ) -> bool {
        let Some((_, members)) = self.ensembles.iter_mut().find(|(f, _)| *f == first) else {
            return false;
        };
        for m in members.iter_mut() {
            if let Some(new) = replace(m) {
                *m = new;
            }
        }
        debug_assert!(
            {
                let mut seen = members.clone();
                seen.sort();
                seen.windows(2).all(|w| w[0] != w[1])
            },
            "an ensemble lists a bookie twice"
        );
        true
    }
}

/// Ledger metadata with the znode version it was read at (for a compare-and-set write).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Versioned {
    pub metadata: LedgerMetadata,
    pub version: i32,
    /// The znode's creation time (ms): Java's `ctime` of a ledger whose metadata does not store
    /// one (`storeSystemtimeAsLedgerCreationTime=false`, the default).
    pub znode_ctime: i64,
}

/// What a versioned write found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Written; the znode's new version.
    Written(i32),
    /// Someone wrote it since it was read (ZooKeeper's BADVERSION).
    Conflict,
    /// The ledger is gone.
    Deleted,
}

pub(crate) fn path_of(cfg: &MetadataConfig, layout: LedgerLayout, id: u64) -> String {
    format!("{}{}", cfg.ledgers_root, ledger_path(layout, id))
}

/// Reads ledger `id`'s metadata with its znode version; `Ok(None)`: deleted.
pub async fn read_versioned(
    zk: &Client,
    cfg: &MetadataConfig,
    layout: LedgerLayout,
    id: u64,
) -> Result<Option<Versioned>> {
    let path = path_of(cfg, layout, id);
    match zk.get_data(&path).await {
        Ok((data, stat)) => LedgerMetadata::parse(&data)
            .map(|metadata| {
                Some(Versioned {
                    metadata,
                    version: stat.version,
                    znode_ctime: stat.ctime,
                })
            })
            .map_err(|e| MetaError::BadData(format!("{path}: {e}"))),
        Err(ZkError::NoNode) => Ok(None),
        Err(e) => Err(MetaError::zk(format!("read {path}"), e)),
    }
}

/// Writes ledger `id`'s metadata if its znode is still at `version` (Java's
/// `writeLedgerMetadata`: a versioned `setData`).
pub async fn write_versioned(
    zk: &Client,
    cfg: &MetadataConfig,
    layout: LedgerLayout,
    id: u64,
    metadata: &LedgerMetadata,
    version: i32,
) -> Result<WriteOutcome> {
    let path = path_of(cfg, layout, id);
    let data = metadata.encode()?;
    match zk.set_data(&path, &data, Some(version)).await {
        Ok(stat) => Ok(WriteOutcome::Written(stat.version)),
        Err(ZkError::BadVersion) => Ok(WriteOutcome::Conflict),
        Err(ZkError::NoNode) => Ok(WriteOutcome::Deleted),
        Err(e) => Err(MetaError::zk(format!("write {path}"), e)),
    }
}

/// Reads ledger `id`'s metadata. `Ok(None)`: the znode does not exist (the ledger is deleted,
/// Java's `NoSuchLedgerExistsOnMetadataServerException`); any other failure, including
/// data we cannot parse, is an error.
pub async fn read_ledger_metadata(
    zk: &Client,
    cfg: &MetadataConfig,
    layout: LedgerLayout,
    id: u64,
) -> Result<Option<LedgerMetadata>> {
    let path = format!("{}{}", cfg.ledgers_root, ledger_path(layout, id));
    match zk.get_data(&path).await {
        Ok((data, _)) => LedgerMetadata::parse(&data)
            .map(Some)
            .map_err(|e| MetaError::BadData(format!("{path}: {e}"))),
        Err(ZkError::NoNode) => Ok(None),
        Err(e) => Err(MetaError::zk(format!("read {path}"), e)),
    }
}

mod format;
pub mod lifecycle;
mod v1;

#[cfg(test)]
mod tests;
