//! `BookieServiceInfoFormat` (DataFormats.proto, proto2), the payload of the registration
//! znode, hand-encoded: field 6 repeated `Endpoint {1 id, 2 port (int32), 3 host, 4 protocol,
//! 5 auth*, 6 extensions*}`, field 7 `map<string,string> properties` (entries `{1 key, 2 value}`).
//! Fields are written in field-number order as Java's generated code does, so our bytes equal
//! a Java bookie's for the same content. The decoder is tolerant (skips unknown fields) and
//! never panics on bad input; it serves `listbookies` and the tests.

use std::collections::BTreeMap;

use crate::error::{MetaError, Result};

/// One endpoint of a bookie (`bookie-rpc`, `http`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Endpoint {
    pub id: String,
    pub port: i32,
    pub host: String,
    pub protocol: String,
    pub auth: Vec<String>,
    pub extensions: Vec<String>,
}

/// What the bookie publishes about itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BookieServiceInfo {
    pub endpoints: Vec<Endpoint>,
    pub properties: BTreeMap<String, String>,
}

impl BookieServiceInfo {
    /// What a Java bookie publishes (`EmbeddedServer.buildBookieServiceInfo`): endpoint `bookie`
    /// / `bookie-rpc` at host:port, extensions `["tls"]` when TLS is configured, and, when the
    /// HTTP server is enabled, endpoint `httpserver` / `http` at its host:port.
    pub fn for_bookie(host: &str, port: u16, tls: bool, http: Option<(&str, u16)>) -> Self {
        let mut endpoints = vec![Endpoint {
            id: "bookie".into(),
            port: i32::from(port),
            host: host.into(),
            protocol: "bookie-rpc".into(),
            auth: Vec::new(),
            extensions: if tls { vec!["tls".into()] } else { Vec::new() },
        }];
        // Java's ComponentInfoPublisher keeps its endpoints in a ConcurrentHashMap keyed by id;
        // "httpserver" iterates before "bookie" (seen in endpointinfo against a Java bookie).
        if let Some((h, p)) = http {
            endpoints.insert(
                0,
                Endpoint {
                    id: "httpserver".into(),
                    port: i32::from(p),
                    host: h.into(),
                    protocol: "http".into(),
                    auth: Vec::new(),
                    extensions: Vec::new(),
                },
            );
        }
        BookieServiceInfo {
            endpoints,
            properties: BTreeMap::new(),
        }
    }

    /// The `bookie-rpc` endpoint, as clients pick it.
    pub fn rpc_endpoint(&self) -> Option<&Endpoint> {
        self.endpoints.iter().find(|e| e.protocol == "bookie-rpc")
    }

    /// Binary protobuf, no length prefix.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for e in &self.endpoints {
            let mut m = Vec::new();
            put_string(&mut m, 1, &e.id);
            put_tag(&mut m, 2, 0);
            // int32: negative values are sign-extended to 10 bytes, as protobuf does.
            put_varint(&mut m, i64::from(e.port) as u64);
            put_string(&mut m, 3, &e.host);
            put_string(&mut m, 4, &e.protocol);
            for a in &e.auth {
                put_string(&mut m, 5, a);
            }
            for x in &e.extensions {
                put_string(&mut m, 6, x);
            }
            put_bytes(&mut out, 6, &m);
        }
        for (k, v) in &self.properties {
            let mut m = Vec::new();
            put_string(&mut m, 1, k);
            put_string(&mut m, 2, v);
            put_bytes(&mut out, 7, &m);
        }
        out
    }

    /// Parses the registration payload. Empty input is a "legacy" bookie: no endpoints.
    pub fn decode(buf: &[u8]) -> Result<Self> {
        let mut info = BookieServiceInfo::default();
        let mut r = Reader { buf, pos: 0 };
        while let Some((field, wt)) = r.tag()? {
            match (field, wt) {
                (6, 2) => info.endpoints.push(decode_endpoint(r.bytes()?)?),
                (7, 2) => {
                    let mut e = Reader {
                        buf: r.bytes()?,
                        pos: 0,
                    };
                    let (mut k, mut v) = (String::new(), String::new());
                    while let Some((f, w)) = e.tag()? {
                        match (f, w) {
                            (1, 2) => k = e.string()?,
                            (2, 2) => v = e.string()?,
                            _ => e.skip(w)?,
                        }
                    }
                    info.properties.insert(k, v);
                }
                _ => r.skip(wt)?,
            }
        }
        Ok(info)
    }
}

fn decode_endpoint(buf: &[u8]) -> Result<Endpoint> {
    let mut e = Endpoint::default();
    let mut r = Reader { buf, pos: 0 };
    while let Some((f, w)) = r.tag()? {
        match (f, w) {
            (1, 2) => e.id = r.string()?,
            (2, 0) => e.port = r.varint()? as i32,
            (3, 2) => e.host = r.string()?,
            (4, 2) => e.protocol = r.string()?,
            (5, 2) => e.auth.push(r.string()?),
            (6, 2) => e.extensions.push(r.string()?),
            _ => r.skip(w)?,
        }
    }
    Ok(e)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}
fn put_tag(out: &mut Vec<u8>, field: u32, wt: u32) {
    put_varint(out, u64::from((field << 3) | wt));
}
fn put_bytes(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    put_tag(out, field, 2);
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}
fn put_string(out: &mut Vec<u8>, field: u32, s: &str) {
    put_bytes(out, field, s.as_bytes());
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn bad(what: &str) -> MetaError {
        MetaError::BadData(format!("BookieServiceInfo protobuf: {what}"))
    }
    fn varint(&mut self) -> Result<u64> {
        let mut v: u64 = 0;
        for shift in (0..70).step_by(7) {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(Self::bad("truncated varint"));
            };
            self.pos += 1;
            if shift < 64 {
                v |= u64::from(b & 0x7f) << shift;
            }
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(Self::bad("varint too long"))
    }
    fn tag(&mut self) -> Result<Option<(u64, u64)>> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let t = self.varint()?;
        Ok(Some((t >> 3, t & 7)))
    }
    fn bytes(&mut self) -> Result<&'a [u8]> {
        let n = usize::try_from(self.varint()?).map_err(|_| Self::bad("length"))?;
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| Self::bad("truncated field"))?;
        let b = &self.buf[self.pos..end];
        self.pos = end;
        Ok(b)
    }
    fn string(&mut self) -> Result<String> {
        String::from_utf8(self.bytes()?.to_vec()).map_err(|_| Self::bad("string is not UTF-8"))
    }
    fn skip(&mut self, wt: u64) -> Result<()> {
        let n = match wt {
            0 => return self.varint().map(|_| ()),
            1 => 8,
            2 => return self.bytes().map(|_| ()),
            5 => 4,
            _ => return Err(Self::bad("unsupported wire type")),
        };
        if self.pos + n > self.buf.len() {
            return Err(Self::bad("truncated fixed field"));
        }
        self.pos += n;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_bytes() {
        // Hand-derived from DataFormats.proto: 0x32 = field 6 LEN; inside 0x0a id, 0x10 port,
        // 0x1a host, 0x22 protocol.
        let info = BookieServiceInfo::for_bookie("1.2.3.4", 3181, false, None);
        let mut want = vec![0x32, 32, 0x0a, 6];
        want.extend_from_slice(b"bookie");
        want.extend_from_slice(&[0x10, 0xed, 0x18]); // 3181 = 0x0c6d
        want.extend_from_slice(&[0x1a, 7]);
        want.extend_from_slice(b"1.2.3.4");
        want.extend_from_slice(&[0x22, 10]);
        want.extend_from_slice(b"bookie-rpc");
        assert_eq!(info.encode(), want);
        assert_eq!(BookieServiceInfo::decode(&want).unwrap(), info);
    }

    #[test]
    fn roundtrip_full_and_garbage() {
        let mut info = BookieServiceInfo::for_bookie("h", 1, true, Some(("0.0.0.0", 8080)));
        info.properties.insert("k".into(), "v".into());
        info.endpoints[0].auth.push("sasl".into());
        let b = info.encode();
        assert_eq!(BookieServiceInfo::decode(&b).unwrap(), info);
        assert_eq!(
            BookieServiceInfo::decode(&[]).unwrap(),
            BookieServiceInfo::default()
        );
        for cut in 1..b.len() {
            let _ = BookieServiceInfo::decode(&b[..cut]); // must not panic
        }
        assert!(BookieServiceInfo::decode(&[0x32, 0xff]).is_err());
        assert!(BookieServiceInfo::decode(&[0xff; 12]).is_err());
    }
}
