//! Ledger metadata as the Java client writes it into a ledger's znode
//! (`LedgerMetadataSerDe`), read for garbage collection: over-replicated-ledger GC and
//! `verifyMetadataOnGC` need a ledger's state and ensembles.
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

fn bad(what: impl std::fmt::Display) -> MetaError {
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
            1 => parse_v1(body),
            2 => {
                let text = std::str::from_utf8(body).map_err(|_| bad("version 2 is not UTF-8"))?;
                let fields = text_format::parse(text)?;
                Format::from_text(&fields)?.into_metadata(2)
            }
            3 => {
                let mut r = binary::Reader::new(body);
                let len = r.varint()?;
                let len = usize::try_from(len).map_err(|_| bad("length"))?;
                let msg = r.take(len)?;
                Format::from_binary(msg)?.into_metadata(3)
            }
            v => Err(bad(format!("format version {v} is not supported (1 to 3)"))),
        }
    }
}

fn parse_v1(body: &[u8]) -> Result<LedgerMetadata> {
    let text = std::str::from_utf8(body).map_err(|_| bad("version 1 is not UTF-8"))?;
    let mut lines = text.lines();
    let mut num = |what: &str| -> Result<i64> {
        lines
            .next()
            .and_then(|l| l.parse::<i64>().ok())
            .ok_or_else(|| bad(format!("version 1: bad or missing {what}")))
    };
    let quorum = i32::try_from(num("quorum size")?).map_err(|_| bad("quorum size"))?;
    let ensemble = i32::try_from(num("ensemble size")?).map_err(|_| bad("ensemble size"))?;
    let length = num("length")?;
    let mut md = LedgerMetadata {
        format_version: 1,
        ensemble_size: ensemble,
        write_quorum_size: quorum,
        ack_quorum_size: quorum,
        state: LedgerState::Open,
        last_entry_id: None,
        length: 0,
        ensembles: Vec::new(),
        digest_type: None,
        password: None,
        ctime: None,
        custom_metadata: Vec::new(),
        ctoken: None,
    };
    for line in lines {
        let mut parts = line.split('\t');
        let first: i64 = parts
            .next()
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| bad(format!("version 1: bad line {line:?}")))?;
        let rest: Vec<&str> = parts.collect();
        if rest.first() == Some(&"CLOSED") {
            if first == V1_IN_RECOVERY {
                md.state = LedgerState::InRecovery;
            } else {
                md.state = LedgerState::Closed;
                md.last_entry_id = Some(first);
                md.length = length;
            }
            break;
        }
        if rest.is_empty() {
            return Err(bad(format!(
                "version 1: ensemble line {line:?} lists no bookie"
            )));
        }
        md.ensembles
            .push((first, rest.into_iter().map(String::from).collect()));
    }
    Ok(md)
}

/// `LedgerMetadataFormat` as decoded, before the rules of `decodeFormat` apply.
#[derive(Default)]
struct Format {
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
    fn from_binary(msg: &[u8]) -> Result<Format> {
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

    fn from_text(fields: &[text_format::Field]) -> Result<Format> {
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
    fn into_metadata(self, version: u32) -> Result<LedgerMetadata> {
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
            last_entry_id: if closed {
                Some(self.last_entry_id.unwrap_or(-1))
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

/// Protobuf binary wire format, just what `LedgerMetadataFormat` needs.
mod binary {
    use super::bad;
    use crate::error::Result;

    pub(super) struct Reader<'a> {
        buf: &'a [u8],
        pos: usize,
    }

    impl<'a> Reader<'a> {
        pub(super) fn new(buf: &'a [u8]) -> Reader<'a> {
            Reader { buf, pos: 0 }
        }

        pub(super) fn varint(&mut self) -> Result<u64> {
            let mut v: u64 = 0;
            for shift in (0..70).step_by(7) {
                let Some(&b) = self.buf.get(self.pos) else {
                    return Err(bad("truncated varint"));
                };
                self.pos += 1;
                if shift < 64 {
                    v |= u64::from(b & 0x7f) << shift;
                }
                if b & 0x80 == 0 {
                    return Ok(v);
                }
            }
            Err(bad("varint longer than 10 bytes"))
        }

        pub(super) fn tag(&mut self) -> Result<Option<(u64, u64)>> {
            if self.pos >= self.buf.len() {
                return Ok(None);
            }
            let t = self.varint()?;
            if t >> 3 == 0 {
                return Err(bad("field number 0"));
            }
            Ok(Some((t >> 3, t & 7)))
        }

        pub(super) fn take(&mut self, n: usize) -> Result<&'a [u8]> {
            let end = self
                .pos
                .checked_add(n)
                .filter(|&e| e <= self.buf.len())
                .ok_or_else(|| bad("truncated field"))?;
            let b = &self.buf[self.pos..end];
            self.pos = end;
            Ok(b)
        }

        pub(super) fn bytes(&mut self) -> Result<&'a [u8]> {
            let n = usize::try_from(self.varint()?).map_err(|_| bad("length"))?;
            self.take(n)
        }

        pub(super) fn string(&mut self) -> Result<String> {
            String::from_utf8(self.bytes()?.to_vec()).map_err(|_| bad("string is not UTF-8"))
        }

        pub(super) fn skip(&mut self, wire_type: u64) -> Result<()> {
            match wire_type {
                0 => self.varint().map(drop),
                1 => self.take(8).map(drop),
                2 => self.bytes().map(drop),
                5 => self.take(4).map(drop),
                w => Err(bad(format!("unsupported wire type {w}"))),
            }
        }
    }
}

/// Protobuf text format (what `TextFormat` prints and parses): `name: value`, `name { ... }`
/// (or `< ... >`), `#` comments, strings in either quote with C escapes, adjacent strings
/// concatenated.
mod text_format {
    use super::bad;
    use crate::error::Result;

    pub(super) enum Value {
        /// A number or an enum name.
        Scalar(String),
        /// A string or bytes value (escapes resolved).
        Bytes(Vec<u8>),
        Message(Vec<Field>),
    }

    pub(super) struct Field {
        pub name: String,
        pub value: Value,
    }

    pub(super) fn parse(text: &str) -> Result<Vec<Field>> {
        let mut p = Parser {
            b: text.as_bytes(),
            i: 0,
            depth: 0,
        };
        let fields = p.message(None)?;
        Ok(fields)
    }

    struct Parser<'a> {
        b: &'a [u8],
        i: usize,
        depth: u32,
    }

    impl Parser<'_> {
        fn skip_ws(&mut self) {
            while let Some(&c) = self.b.get(self.i) {
                if c.is_ascii_whitespace() {
                    self.i += 1;
                } else if c == b'#' {
                    while self.b.get(self.i).is_some_and(|&c| c != b'\n') {
                        self.i += 1;
                    }
                } else {
                    break;
                }
            }
        }

        fn word(&mut self) -> &str {
            let start = self.i;
            while self.b.get(self.i).is_some_and(|&c| {
                c.is_ascii_alphanumeric() || c == b'_' || c == b'-' || c == b'+' || c == b'.'
            }) {
                self.i += 1;
            }
            // Only ASCII was taken.
            std::str::from_utf8(&self.b[start..self.i]).unwrap_or("")
        }

        /// Fields until `close` (or the end of the text at the top).
        fn message(&mut self, close: Option<u8>) -> Result<Vec<Field>> {
            self.depth += 1;
            if self.depth > 100 {
                return Err(bad("text format nested too deeply"));
            }
            let mut out = Vec::new();
            loop {
                self.skip_ws();
                match (self.b.get(self.i), close) {
                    (None, None) => break,
                    (None, Some(_)) => return Err(bad("text format: unterminated message")),
                    (Some(&c), Some(cl)) if c == cl => {
                        self.i += 1;
                        break;
                    }
                    _ => {}
                }
                let name = self.word().to_string();
                if name.is_empty() {
                    return Err(bad(format!(
                        "text format: unexpected {:?} at byte {}",
                        self.b[self.i] as char, self.i
                    )));
                }
                self.skip_ws();
                let colon = self.b.get(self.i) == Some(&b':');
                if colon {
                    self.i += 1;
                    self.skip_ws();
                }
                let value = match self.b.get(self.i) {
                    Some(b'{') => {
                        self.i += 1;
                        Value::Message(self.message(Some(b'}'))?)
                    }
                    Some(b'<') => {
                        self.i += 1;
                        Value::Message(self.message(Some(b'>'))?)
                    }
                    _ if !colon => {
                        return Err(bad(format!("text format: field {name} has no ':'")))
                    }
                    Some(b'"') | Some(b'\'') => Value::Bytes(self.strings()?),
                    _ => {
                        let w = self.word().to_string();
                        if w.is_empty() {
                            return Err(bad(format!("text format: field {name} has no value")));
                        }
                        Value::Scalar(w)
                    }
                };
                out.push(Field { name, value });
                self.skip_ws();
                if matches!(self.b.get(self.i), Some(b',') | Some(b';')) {
                    self.i += 1;
                }
            }
            self.depth -= 1;
            Ok(out)
        }

        /// One or more adjacent quoted strings.
        fn strings(&mut self) -> Result<Vec<u8>> {
            let mut v = Vec::new();
            while let Some(&q @ (b'"' | b'\'')) = self.b.get(self.i) {
                self.i += 1;
                loop {
                    let Some(&c) = self.b.get(self.i) else {
                        return Err(bad("text format: unterminated string"));
                    };
                    self.i += 1;
                    if c == q {
                        break;
                    }
                    if c == b'\n' {
                        return Err(bad("text format: newline in a string"));
                    }
                    if c != b'\\' {
                        v.push(c);
                        continue;
                    }
                    let Some(&e) = self.b.get(self.i) else {
                        return Err(bad("text format: dangling escape"));
                    };
                    self.i += 1;
                    match e {
                        b'a' => v.push(0x07),
                        b'b' => v.push(0x08),
                        b'f' => v.push(0x0c),
                        b'n' => v.push(b'\n'),
                        b'r' => v.push(b'\r'),
                        b't' => v.push(b'\t'),
                        b'v' => v.push(0x0b),
                        b'\\' | b'\'' | b'"' | b'?' => v.push(e),
                        b'0'..=b'7' => {
                            let mut n = u32::from(e - b'0');
                            for _ in 0..2 {
                                match self.b.get(self.i) {
                                    Some(&d @ b'0'..=b'7') => {
                                        n = n * 8 + u32::from(d - b'0');
                                        self.i += 1;
                                    }
                                    _ => break,
                                }
                            }
                            v.push(
                                u8::try_from(n)
                                    .map_err(|_| bad("text format: octal escape out of range"))?,
                            );
                        }
                        b'x' => {
                            let mut n = 0u32;
                            let mut digits = 0;
                            while digits < 2 {
                                match self.b.get(self.i).and_then(|d| (*d as char).to_digit(16)) {
                                    Some(d) => {
                                        n = n * 16 + d;
                                        self.i += 1;
                                        digits += 1;
                                    }
                                    None => break,
                                }
                            }
                            if digits == 0 {
                                return Err(bad("text format: empty hex escape"));
                            }
                            v.push(n as u8);
                        }
                        _ => {
                            return Err(bad(format!("text format: invalid escape \\{}", e as char)))
                        }
                    }
                }
                self.skip_ws();
            }
            Ok(v)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Base64 of the test vectors of Java's `TestLedgerMetadataSerDe` (ledger metadata as
    /// 4.0/4.1, 4.2-4.8 and 4.9+ write it).
    const V1: &str = "Qm9va2llTWV0YWRhdGFGb3JtYXRWZXJzaW9uCTEKMgozCjAKMAkxOTIuMC4yLjE6MTIzNAkxOTIu\
                      MC4yLjI6MTIzNAkxOTIuMC4yLjM6MTIzNAotMTAyCUNMT1NFRA==";
    const V2: &str =
        "Qm9va2llTWV0YWRhdGFGb3JtYXRWZXJzaW9uCTIKcXVvcnVtU2l6ZTogMgplbnNlbWJsZVNpemU6I\
                      DMKbGVuZ3RoOiAwCmxhc3RFbnRyeUlkOiAtMQpzdGF0ZTogSU5fUkVDT1ZFUlkKc2VnbWVudCB7\
                      CiAgZW5zZW1ibGVNZW1iZXI6ICIxOTIuMC4yLjE6MTIzNCIKICBlbnNlbWJsZU1lbWJlcjogIjE\
                      5Mi4wLjIuMjoxMjM0IgogIGVuc2VtYmxlTWVtYmVyOiAiMTkyLjAuMi4zOjEyMzQiCiAgZmlyc3\
                      RFbnRyeUlkOiAwCn0KZGlnZXN0VHlwZTogQ1JDMzIKcGFzc3dvcmQ6ICJwYXNzd2QiCmFja1F1b\
                      3J1bVNpemU6IDIKY3RpbWU6IDE1NDQwMDIzODMwNzUK";
    const V3: &str =
        "Qm9va2llTWV0YWRhdGFGb3JtYXRWZXJzaW9uCTMKYAgCEAMYACD///////////8BKAEyMgoOMTkyL\
                      jAuMi4xOjMxODEKDjE5Mi4wLjIuMjozMTgxCg4xOTIuMC4yLjM6MzE4MRAAOANCBmZvb2JhckgB\
                      UP///////////wFgAA==";

    fn base64(s: &str) -> Vec<u8> {
        let val = |c: u8| -> u32 {
            match c {
                b'A'..=b'Z' => u32::from(c - b'A'),
                b'a'..=b'z' => u32::from(c - b'a') + 26,
                b'0'..=b'9' => u32::from(c - b'0') + 52,
                b'+' => 62,
                b'/' => 63,
                _ => panic!("bad base64 {c}"),
            }
        };
        let clean: Vec<u8> = s.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
        let mut out = Vec::new();
        for chunk in clean.chunks(4) {
            let pads = chunk.iter().filter(|&&c| c == b'=').count();
            let mut n = 0u32;
            for &c in chunk {
                n = (n << 6) | if c == b'=' { 0 } else { val(c) };
            }
            let bytes = n.to_be_bytes();
            out.extend_from_slice(&bytes[1..4 - pads]);
        }
        out
    }

    fn three(port: u16) -> Vec<String> {
        (1..=3).map(|i| format!("192.0.2.{i}:{port}")).collect()
    }

    #[test]
    fn version_1() {
        let md = LedgerMetadata::parse(&base64(V1)).unwrap();
        assert_eq!(md.format_version, 1);
        assert_eq!((md.write_quorum_size, md.ensemble_size), (2, 3));
        assert_eq!(md.ack_quorum_size, 2);
        assert_eq!(
            md.state,
            LedgerState::InRecovery,
            "-102 CLOSED is in recovery"
        );
        assert_eq!(md.ensembles, vec![(0, three(1234))]);
        assert!(md.has_bookie("192.0.2.2:1234") && !md.has_bookie("192.0.2.4:1234"));
        // Closed, written as 4.0 does.
        let closed = b"BookieMetadataFormatVersion\t1\n2\n3\n420\n0\ta:1\tb:1\tc:1\n5\td:1\tb:1\tc:1\n9\tCLOSED";
        let md = LedgerMetadata::parse(closed).unwrap();
        assert!(md.is_closed());
        assert_eq!((md.last_entry_id, md.length), (Some(9), 420));
        assert_eq!(md.ensembles.len(), 2);
        assert!(md.has_bookie("d:1") && md.has_bookie("a:1"));
        // Open: no CLOSED line.
        let open = b"BookieMetadataFormatVersion\t1\n2\n3\n0\n0\ta:1\tb:1\tc:1\n";
        assert_eq!(
            LedgerMetadata::parse(open).unwrap().state,
            LedgerState::Open
        );
    }

    #[test]
    fn version_2() {
        let md = LedgerMetadata::parse(&base64(V2)).unwrap();
        assert_eq!(md.format_version, 2);
        assert_eq!(
            (md.write_quorum_size, md.ensemble_size, md.ack_quorum_size),
            (2, 3, 2)
        );
        assert_eq!(md.state, LedgerState::InRecovery);
        assert_eq!(md.ensembles, vec![(0, three(1234))]);
        assert_eq!(md.digest_type, Some(DigestType::Crc32));
        assert_eq!(md.password.as_deref(), Some(&b"passwd"[..]));
        assert_eq!(md.ctime, Some(1544002383075));
        // Closed, two ensembles, escapes, custom metadata, comments, `<>` and a missing ':'.
        let text = "BookieMetadataFormatVersion\t2\n\
            # a comment\n\
            quorumSize: 2 ensembleSize: 3 length: 1024 lastEntryId: 41 state: CLOSED\n\
            segment { ensembleMember: \"a:1\" ensembleMember: 'b:1' ensembleMember: \"c:1\" firstEntryId: 0 }\n\
            segment < ensembleMember: \"d\" \":1\" ensembleMember: \"b:1\" ensembleMember: \"c:1\" firstEntryId: 20 >\n\
            digestType: CRC32C\npassword: \"\\000\\001\\x7f\\\"\"\n\
            customMetadata { key: \"app\" value: \"\\303\\251\" }\n";
        let md = LedgerMetadata::parse(text.as_bytes()).unwrap();
        assert!(md.is_closed());
        assert_eq!((md.last_entry_id, md.length), (Some(41), 1024));
        assert_eq!(
            md.ensembles[1],
            (20, vec!["d:1".into(), "b:1".into(), "c:1".into()])
        );
        assert_eq!(md.password.as_deref(), Some(&[0u8, 1, 0x7f, b'"'][..]));
        assert_eq!(
            md.custom_metadata,
            vec![("app".into(), "é".as_bytes().to_vec())]
        );
        assert_eq!(md.ack_quorum_size, 2, "defaults to the write quorum");
    }

    #[test]
    fn version_3() {
        let md = LedgerMetadata::parse(&base64(V3)).unwrap();
        assert_eq!(md.format_version, 3);
        assert_eq!(
            (md.write_quorum_size, md.ensemble_size, md.ack_quorum_size),
            (2, 3, 1)
        );
        assert_eq!(md.state, LedgerState::Open);
        assert_eq!(md.ensembles, vec![(0, three(3181))]);
        assert_eq!(md.digest_type, Some(DigestType::Crc32c));
        assert_eq!(md.password.as_deref(), Some(&b"foobar"[..]));
        assert_eq!(md.ctime, Some(-1));
        assert_eq!(md.ctoken, Some(0));
    }

    /// A closed version-3 ledger built by hand from the field numbers, with an unknown field.
    #[test]
    fn version_3_closed_by_hand() {
        fn varint(out: &mut Vec<u8>, mut v: u64) {
            while v >= 0x80 {
                out.push(v as u8 | 0x80);
                v >>= 7;
            }
            out.push(v as u8);
        }
        fn field(out: &mut Vec<u8>, f: u64, v: u64) {
            varint(out, f << 3);
            varint(out, v);
        }
        fn bytes(out: &mut Vec<u8>, f: u64, b: &[u8]) {
            varint(out, (f << 3) | 2);
            varint(out, b.len() as u64);
            out.extend_from_slice(b);
        }
        let mut seg = Vec::new();
        for b in ["x:3181", "y:3181"] {
            bytes(&mut seg, 1, b.as_bytes());
        }
        field(&mut seg, 2, 0);
        let mut seg2 = Vec::new();
        for b in ["x:3181", "z:3181"] {
            bytes(&mut seg2, 1, b.as_bytes());
        }
        field(&mut seg2, 2, 7);
        let mut m = Vec::new();
        field(&mut m, 1, 2);
        field(&mut m, 2, 2);
        field(&mut m, 3, 999);
        field(&mut m, 4, 12);
        field(&mut m, 5, 3);
        bytes(&mut m, 6, &seg);
        bytes(&mut m, 6, &seg2);
        field(&mut m, 99, 5); // unknown: skipped
        let mut data = b"BookieMetadataFormatVersion\t3\n".to_vec();
        varint(&mut data, m.len() as u64);
        data.extend_from_slice(&m);
        let md = LedgerMetadata::parse(&data).unwrap();
        assert!(md.is_closed());
        assert_eq!((md.last_entry_id, md.length), (Some(12), 999));
        assert!(md.has_bookie("y:3181") && md.has_bookie("z:3181"));
        assert!(!md.has_bookie("w:3181"));
        // Every truncation is an error, never a panic.
        for n in 0..data.len() {
            let _ = LedgerMetadata::parse(&data[..n]);
        }
        let header = b"BookieMetadataFormatVersion\t3\n".len();
        for n in header..data.len() {
            assert!(LedgerMetadata::parse(&data[..n]).is_err(), "{n}");
        }
    }

    #[test]
    fn junk_is_an_error() {
        for junk in [
            &b""[..],
            b"BookieMetadataFormatVersion\tfoobar\nblahblah",
            b"BookieMetadataFormatVersion\t123456789123456789\nblahblah",
            b"BookieMetadataFormatVersion\t4\n",
            b"BookieMetadataFormatVersion\t2\nquorumSize: 2\n",
            b"BookieMetadataFormatVersion\t2\nquorumSize: 2 ensembleSize: 3 length: 0 state: GONE\n",
            b"BookieMetadataFormatVersion\t2\nsegment { ensembleMember: \"a\"\n",
            b"BookieMetadataFormatVersion\t1\n2\nthree\n",
            b"BookieMetadataFormatVersion\t3\n\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff",
            b"not metadata at all",
        ] {
            assert!(LedgerMetadata::parse(junk).is_err(), "{junk:?}");
        }
        // Random bytes: errors or (unlikely) something, never a panic.
        let mut x = 0x9e3779b97f4a7c15u64;
        for _ in 0..2000 {
            let mut buf = b"BookieMetadataFormatVersion\t3\n".to_vec();
            for _ in 0..64 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                buf.push(x as u8);
            }
            let _ = LedgerMetadata::parse(&buf);
            buf[28] = b'2';
            let _ = LedgerMetadata::parse(&buf);
        }
    }
}
