//! The records autorecovery keeps in ZooKeeper, encoded as Java encodes them
//! (DataFormats.proto; protobuf text format, each field `name: value` on its own line, only
//! the fields Java knows — a 4.14 reader refuses any other):
//!
//! - `UnderreplicatedLedgerFormat`: `replica: "<bookie id>"` per missing bookie, then
//!   `ctime: <ms>`;
//! - `LockDataFormat` and `AuditorVoteFormat`: `bookieId: "<…>"`;
//! - `LedgerRereplicationLayoutFormat`: `type: "BASIC"`, `version: 1`;
//! - the auditor's check times (`CheckAllLedgersFormat` and its two siblings): binary, field 1
//!   an int64 (`08 <varint>`).
//!
//! Reading is lenient (any field order, unknown fields skipped, empty data is an empty
//! record), as LightProto reads.

use crate::error::{MetaError, Result};
use crate::pb::{binary, text};

fn bad(what: impl std::fmt::Display) -> MetaError {
    MetaError::BadData(format!("under-replication record: {what}"))
}

/// An under-replicated ledger's record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UrRecord {
    /// The missing bookies, as the auditor found them (informational: a worker checks for
    /// itself).
    pub replicas: Vec<String>,
    /// When it was marked (ms since the epoch), if the marker stores it.
    pub ctime: Option<i64>,
}

impl UrRecord {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = text::Writer::new();
        for r in &self.replicas {
            w.string("replica", r.as_bytes());
        }
        if let Some(c) = self.ctime {
            w.scalar("ctime", c);
        }
        w.out.into_bytes()
    }

    pub fn parse(data: &[u8]) -> Result<UrRecord> {
        let mut rec = UrRecord::default();
        for f in parse_text(data)? {
            match (f.name.as_str(), &f.value) {
                ("replica", text::Value::Bytes(b)) => rec.replicas.push(utf8(b)?),
                ("ctime", text::Value::Scalar(s)) => {
                    rec.ctime = Some(s.parse().map_err(|_| bad(format!("ctime {s:?}")))?)
                }
                _ => {} // unknown: skipped
            }
        }
        Ok(rec)
    }
}

fn parse_text(data: &[u8]) -> Result<Vec<text::Field>> {
    let s = std::str::from_utf8(data).map_err(|_| bad("not UTF-8"))?;
    text::parse(s)
}

fn utf8(b: &[u8]) -> Result<String> {
    String::from_utf8(b.to_vec()).map_err(|_| bad("a string is not UTF-8"))
}

/// `bookieId: "<id>"` (`LockDataFormat`, `AuditorVoteFormat`).
pub fn bookie_id_record(id: &str) -> Vec<u8> {
    let mut w = text::Writer::new();
    w.string("bookieId", id.as_bytes());
    w.out.into_bytes()
}

/// The `bookieId` of a lock or vote record, if it has one.
pub fn parse_bookie_id_record(data: &[u8]) -> Result<Option<String>> {
    for f in parse_text(data)? {
        if let ("bookieId", text::Value::Bytes(b)) = (f.name.as_str(), &f.value) {
            return utf8(b).map(Some);
        }
    }
    Ok(None)
}

/// The layout record (`type: "BASIC"\nversion: 1\n`).
pub const LAYOUT: &[u8] = b"type: \"BASIC\"\nversion: 1\n";

/// Whether a layout record is the one this implementation (and Java's) understands.
pub fn layout_is_basic_v1(data: &[u8]) -> Result<bool> {
    let (mut ty, mut version) = (None, None);
    for f in parse_text(data)? {
        match (f.name.as_str(), &f.value) {
            ("type", text::Value::Bytes(b)) => ty = Some(utf8(b)?),
            ("version", text::Value::Scalar(s)) => version = s.parse::<i64>().ok(),
            _ => {}
        }
    }
    Ok(ty.as_deref() == Some("BASIC") && version == Some(1))
}

/// A check time (`CheckAllLedgersFormat` …): binary, field 1.
pub fn encode_ctime(ms: i64) -> Vec<u8> {
    let mut w = binary::Writer::new();
    w.int(1, ms);
    w.buf
}

/// A check time's value; `None` when the field is absent.
pub fn parse_ctime(data: &[u8]) -> Result<Option<i64>> {
    let mut r = binary::Reader::new(data);
    let mut out = None;
    while let Some((field, wt)) = r.tag()? {
        match (field, wt) {
            (1, 0) => out = Some(r.varint()? as i64),
            _ => r.skip(wt)?,
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes as the 4.14.7 and 4.18.2 classes print them.
    #[test]
    fn records_match_javas_bytes() {
        let r = UrRecord {
            replicas: vec!["10.0.0.5:3181".into(), "bk-2.bk.svc:3181".into()],
            ctime: Some(1700000000123),
        };
        assert_eq!(
            r.encode(),
            b"replica: \"10.0.0.5:3181\"\nreplica: \"bk-2.bk.svc:3181\"\nctime: 1700000000123\n"
        );
        assert_eq!(UrRecord::parse(&r.encode()).unwrap(), r);
        assert_eq!(UrRecord::default().encode(), b"");
        assert_eq!(UrRecord::parse(b"").unwrap(), UrRecord::default());
        // Java reads single-line input and unknown fields (4.18) alike.
        let one_line =
            UrRecord::parse(b"replica: \"a:1\" replica: \"b:2\" ctime: 5 foo: 3").unwrap();
        assert_eq!(one_line.replicas, vec!["a:1", "b:2"]);
        assert_eq!(one_line.ctime, Some(5));
        assert_eq!(
            bookie_id_record("myhost.example.com"),
            b"bookieId: \"myhost.example.com\"\n"
        );
        assert_eq!(
            parse_bookie_id_record(b"bookieId: \"10.0.0.5:3181\"\n")
                .unwrap()
                .as_deref(),
            Some("10.0.0.5:3181")
        );
        assert_eq!(parse_bookie_id_record(b"").unwrap(), None);
        assert_eq!(
            encode_ctime(1700000000123),
            [0x08, 0xfb, 0xd0, 0x95, 0xff, 0xbc, 0x31]
        );
        assert_eq!(
            parse_ctime(&encode_ctime(1700000000123)).unwrap(),
            Some(1700000000123)
        );
        assert_eq!(parse_ctime(b"").unwrap(), None);
        assert!(layout_is_basic_v1(LAYOUT).unwrap());
        assert!(!layout_is_basic_v1(b"type: \"BASIC\"\nversion: 2\n").unwrap());
    }
}
