//! `LedgerMetadataFormat` (DataFormats.proto) between its binary and text encodings and
//! [`LedgerMetadata`], with the rules of Java's `LedgerMetadataSerDe`.

use super::{bad, DigestType, LedgerMetadata, LedgerState};
use crate::error::Result;
use crate::pb::{binary, text as text_format};

/// `LedgerMetadataFormat` as decoded, before the rules of `decodeFormat` apply.
#[derive(Default)]
pub(super) struct Format {
    quorum_size: Option<i32>,
    ensemble_size: Option<i32>,
    length: Option<i64>,
    last_entry_id: Option<i64>,
    state: Option<i64>,
    segments: Vec<(Option<i64>, Vec<String>)>,
    digest_type: Option<i64>,
    password: Option<Vec<u8>>,
    ack_quorum_size: Option<i32>,
    ctime: Option<i64>,
    custom: Vec<(String, Vec<u8>)>,
    ctoken: Option<i64>,
}

impl Format {
    pub(super) fn from_binary(msg: &[u8]) -> Result<Format> {
        let mut f = Format::default();
        let mut r = binary::Reader::new(msg);
        while let Some((field, wt)) = r.tag()? {
            match (field, wt) {
                (1, 0) => f.quorum_size = Some(r.varint()? as i32),
                (2, 0) => f.ensemble_size = Some(r.varint()? as i32),
                (3, 0) => f.length = Some(r.varint()? as i64),
                (4, 0) => f.last_entry_id = Some(r.varint()? as i64),
                (5, 0) => f.state = Some(r.varint()? as i32 as i64),
                (6, 2) => {
                    let mut s = binary::Reader::new(r.bytes()?);
                    let (mut first, mut members) = (None, Vec::new());
                    while let Some((f2, w2)) = s.tag()? {
                        match (f2, w2) {
                            (1, 2) => members.push(s.string()?),
                            (2, 0) => first = Some(s.varint()? as i64),
                            _ => s.skip(w2)?,
                        }
                    }
                    f.segments.push((first, members));
                }
                (7, 0) => f.digest_type = Some(r.varint()? as i32 as i64),
                (8, 2) => f.password = Some(r.bytes()?.to_vec()),
                (9, 0) => f.ack_quorum_size = Some(r.varint()? as i32),
                (10, 0) => f.ctime = Some(r.varint()? as i64),
                (11, 2) => {
                    let mut s = binary::Reader::new(r.bytes()?);
                    let (mut k, mut v) = (String::new(), Vec::new());
                    while let Some((f2, w2)) = s.tag()? {
                        match (f2, w2) {
                            (1, 2) => k = s.string()?,
                            (2, 2) => v = s.bytes()?.to_vec(),
                            _ => s.skip(w2)?,
                        }
                    }
                    f.custom.push((k, v));
                }
                (12, 0) => f.ctoken = Some(r.varint()? as i64),
                _ => r.skip(wt)?,
            }
        }
        Ok(f)
    }

    pub(super) fn from_text(fields: &[text_format::Field]) -> Result<Format> {
        use text_format::Value;
        let mut f = Format::default();
        let int = |v: &Value, name: &str| -> Result<i64> {
            match v {
                Value::Scalar(s) => s
                    .parse()
                    .map_err(|_| bad(format!("{name}: {s:?} is not a number"))),
                _ => Err(bad(format!("{name} is not a scalar"))),
            }
        };
        let int32 = |v: &Value, name: &str| -> Result<i32> {
            i32::try_from(int(v, name)?).map_err(|_| bad(format!("{name} out of range")))
        };
        let enumeration = |v: &Value, name: &str, names: &[&str]| -> Result<i64> {
            match v {
                Value::Scalar(s) => names
                    .iter()
                    .position(|n| n == s)
                    .map(|i| i as i64 + 1)
                    .or_else(|| s.parse().ok())
                    .ok_or_else(|| bad(format!("{name}: unknown value {s:?}"))),
                _ => Err(bad(format!("{name} is not a scalar"))),
            }
        };
        let bytes = |v: &Value, name: &str| -> Result<Vec<u8>> {
            match v {
                Value::Bytes(b) => Ok(b.clone()),
                _ => Err(bad(format!("{name} is not a string"))),
            }
        };
        let string = |v: &Value, name: &str| -> Result<String> {
            String::from_utf8(bytes(v, name)?).map_err(|_| bad(format!("{name} is not UTF-8")))
        };
        for field in fields {
            let v = &field.value;
            match field.name.as_str() {
                "quorumSize" => f.quorum_size = Some(int32(v, "quorumSize")?),
                "ensembleSize" => f.ensemble_size = Some(int32(v, "ensembleSize")?),
                "length" => f.length = Some(int(v, "length")?),
                "lastEntryId" => f.last_entry_id = Some(int(v, "lastEntryId")?),
                "state" => {
                    f.state = Some(enumeration(v, "state", &["OPEN", "IN_RECOVERY", "CLOSED"])?)
                }
                "segment" => {
                    let Value::Message(sub) = v else {
                        return Err(bad("segment is not a message"));
                    };
                    let (mut first, mut members) = (None, Vec::new());
                    for s in sub {
                        match s.name.as_str() {
                            "ensembleMember" => members.push(string(&s.value, "ensembleMember")?),
                            "firstEntryId" => first = Some(int(&s.value, "firstEntryId")?),
                            other => return Err(bad(format!("unknown segment field {other:?}"))),
                        }
                    }
                    f.segments.push((first, members));
                }
                "digestType" => {
                    f.digest_type = Some(enumeration(
                        v,
                        "digestType",
                        &["CRC32", "HMAC", "CRC32C", "DUMMY"],
                    )?)
                }
                "password" => f.password = Some(bytes(v, "password")?),
                "ackQuorumSize" => f.ack_quorum_size = Some(int32(v, "ackQuorumSize")?),
                "ctime" => f.ctime = Some(int(v, "ctime")?),
                "customMetadata" => {
                    let Value::Message(sub) = v else {
                        return Err(bad("customMetadata is not a message"));
                    };
                    let (mut k, mut val) = (String::new(), Vec::new());
                    for s in sub {
                        match s.name.as_str() {
                            "key" => k = string(&s.value, "key")?,
                            "value" => val = bytes(&s.value, "value")?,
                            other => {
                                return Err(bad(format!("unknown customMetadata field {other:?}")))
                            }
                        }
                    }
                    f.custom.push((k, val));
                }
                "cToken" => f.ctoken = Some(int(v, "cToken")?),
                // The text parser refuses unknown fields, as protobuf's does.
                other => return Err(bad(format!("unknown field {other:?}"))),
            }
        }
        Ok(f)
    }

    /// `LedgerMetadataSerDe.decodeFormat`.
    pub(super) fn into_metadata(self, version: u32) -> Result<LedgerMetadata> {
        let missing = |what: &str| bad(format!("required field {what} is missing"));
        let quorum = self.quorum_size.ok_or_else(|| missing("quorumSize"))?;
        let ensemble_size = self.ensemble_size.ok_or_else(|| missing("ensembleSize"))?;
        let length = self.length.ok_or_else(|| missing("length"))?;
        let state = match self.state.ok_or_else(|| missing("state"))? {
            1 => LedgerState::Open,
            2 => LedgerState::InRecovery,
            3 => LedgerState::Closed,
            s => return Err(bad(format!("unknown state {s}"))),
        };
        let closed = state == LedgerState::Closed;
        let mut ensembles = Vec::with_capacity(self.segments.len());
        for (first, members) in self.segments {
            let first = first.ok_or_else(|| missing("segment.firstEntryId"))?;
            ensembles.push((first, members));
        }
        let digest_type = match self.digest_type {
            None => None,
            Some(1) => Some(DigestType::Crc32),
            Some(2) => Some(DigestType::Hmac),
            Some(3) => Some(DigestType::Crc32c),
            Some(4) => Some(DigestType::Dummy),
            Some(d) => return Err(bad(format!("unknown digest type {d}"))),
        };
        Ok(LedgerMetadata {
            format_version: version,
            ensemble_size,
            write_quorum_size: quorum,
            ack_quorum_size: self.ack_quorum_size.unwrap_or(quorum),
            state,
            // proto2's default: a closed record without the field reads 0, as Java reads it.
            last_entry_id: if closed {
                Some(self.last_entry_id.unwrap_or(0))
            } else {
                None
            },
            length: if closed { length } else { 0 },
            ensembles,
            digest_type,
            password: self.password,
            ctime: self.ctime,
            custom_metadata: self.custom,
            ctoken: self.ctoken,
        })
    }
}

fn state_number(s: LedgerState) -> i64 {
    match s {
        LedgerState::Open => 1,
        LedgerState::InRecovery => 2,
        LedgerState::Closed => 3,
    }
}

fn state_name(s: LedgerState) -> &'static str {
    match s {
        LedgerState::Open => "OPEN",
        LedgerState::InRecovery => "IN_RECOVERY",
        LedgerState::Closed => "CLOSED",
    }
}

fn digest_number(d: DigestType) -> i64 {
    match d {
        DigestType::Crc32 => 1,
        DigestType::Hmac => 2,
        DigestType::Crc32c => 3,
        DigestType::Dummy => 4,
    }
}

fn digest_name(d: DigestType) -> &'static str {
    match d {
        DigestType::Crc32 => "CRC32",
        DigestType::Hmac => "HMAC",
        DigestType::Crc32c => "CRC32C",
        DigestType::Dummy => "DUMMY",
    }
}

/// What `LedgerMetadataSerDe.serialize` writes for length and last entry id: the real values
/// of a closed ledger, `0` and `-1` otherwise.
fn length_and_last(md: &LedgerMetadata) -> (i64, i64) {
    if md.is_closed() {
        (md.length, md.last_entry_id.unwrap_or(-1))
    } else {
        (0, -1)
    }
}

/// The version-3 body (`LedgerMetadataFormat` in binary, fields by number), without the
/// header and the length prefix. The caller has checked there is a password.
pub(super) fn to_binary(md: &LedgerMetadata) -> Vec<u8> {
    let (length, last) = length_and_last(md);
    let mut w = binary::Writer::new();
    w.int(1, i64::from(md.write_quorum_size));
    w.int(2, i64::from(md.ensemble_size));
    w.int(3, length);
    w.int(4, last);
    w.int(5, state_number(md.state));
    for (first, members) in &md.ensembles {
        let mut s = binary::Writer::new();
        for m in members {
            s.bytes(1, m.as_bytes());
        }
        s.int(2, *first);
        w.message(6, &s);
    }
    w.int(
        7,
        digest_number(md.digest_type.unwrap_or(DigestType::Crc32)),
    );
    w.bytes(8, md.password.as_deref().unwrap_or_default());
    w.int(9, i64::from(md.ack_quorum_size));
    if let Some(ctime) = md.ctime {
        w.int(10, ctime);
    }
    for (k, v) in &md.custom_metadata {
        let mut c = binary::Writer::new();
        c.bytes(1, k.as_bytes());
        c.bytes(2, v);
        w.message(11, &c);
    }
    w.int(12, md.ctoken.unwrap_or(0));
    w.buf
}

/// The version-2 body (`LedgerMetadataFormat` in text format). No cToken, as Java.
pub(super) fn to_text(md: &LedgerMetadata) -> String {
    let (length, last) = length_and_last(md);
    let mut w = text_format::Writer::new();
    w.scalar("quorumSize", md.write_quorum_size);
    w.scalar("ensembleSize", md.ensemble_size);
    w.scalar("length", length);
    w.scalar("lastEntryId", last);
    w.scalar("state", state_name(md.state));
    for (first, members) in &md.ensembles {
        w.begin("segment");
        for m in members {
            w.string("ensembleMember", m.as_bytes());
        }
        w.scalar("firstEntryId", first);
        w.end();
    }
    w.scalar(
        "digestType",
        digest_name(md.digest_type.unwrap_or(DigestType::Crc32)),
    );
    w.string("password", md.password.as_deref().unwrap_or_default());
    w.scalar("ackQuorumSize", md.ack_quorum_size);
    if let Some(ctime) = md.ctime {
        w.scalar("ctime", ctime);
    }
    for (k, v) in &md.custom_metadata {
        w.begin("customMetadata");
        w.string("key", k.as_bytes());
        w.string("value", v);
        w.end();
    }
    w.out
}
