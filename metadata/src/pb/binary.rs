//! Protobuf binary wire format, just what `LedgerMetadataFormat` needs.
//! `LedgerMetadataFormat` and the under-replication manager's records need: a reader, and a
//! writer that emits fields as protobuf-java and LightProto do (by field number, negative
//! int64 values as ten-byte varints).

use crate::error::{MetaError, Result};

fn bad(what: impl std::fmt::Display) -> MetaError {
    MetaError::BadData(format!("protobuf: {what}"))
}

pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    pub fn varint(&mut self) -> Result<u64> {
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

    pub fn tag(&mut self) -> Result<Option<(u64, u64)>> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let t = self.varint()?;
        if t >> 3 == 0 {
            return Err(bad("field number 0"));
        }
        Ok(Some((t >> 3, t & 7)))
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| bad("truncated field"))?;
        let b = &self.buf[self.pos..end];
        self.pos = end;
        Ok(b)
    }

    pub fn bytes(&mut self) -> Result<&'a [u8]> {
        let n = usize::try_from(self.varint()?).map_err(|_| bad("length"))?;
        self.take(n)
    }

    pub fn string(&mut self) -> Result<String> {
        String::from_utf8(self.bytes()?.to_vec()).map_err(|_| bad("string is not UTF-8"))
    }

    pub fn skip(&mut self, wire_type: u64) -> Result<()> {
        match wire_type {
            0 => self.varint().map(drop),
            1 => self.take(8).map(drop),
            2 => self.bytes().map(drop),
            5 => self.take(4).map(drop),
            w => Err(bad(format!("unsupported wire type {w}"))),
        }
    }
}

/// Writes a message field by field, as protobuf-java and LightProto do: the caller emits the
/// fields in field-number order; a negative int64 is a ten-byte varint (no zigzag).
#[derive(Default)]
pub struct Writer {
    pub buf: Vec<u8>,
}

impl Writer {
    pub fn new() -> Writer {
        Writer::default()
    }

    pub fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    fn tag(&mut self, field: u32, wire_type: u8) {
        debug_assert!(field > 0 && wire_type <= 5);
        self.varint((u64::from(field) << 3) | u64::from(wire_type));
    }

    /// An int32, int64 or enum field (wire type 0; negative values sign-extended).
    pub fn int(&mut self, field: u32, v: i64) {
        self.tag(field, 0);
        self.varint(v as u64);
    }

    pub fn bytes(&mut self, field: u32, b: &[u8]) {
        self.tag(field, 2);
        self.varint(b.len() as u64);
        self.buf.extend_from_slice(b);
    }

    pub fn message(&mut self, field: u32, m: &Writer) {
        self.bytes(field, &m.buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writer_and_reader_agree() {
        let mut sub = Writer::new();
        sub.bytes(1, b"a:1");
        sub.int(2, 0);
        let mut w = Writer::new();
        w.int(1, 3);
        w.int(4, -1);
        w.message(6, &sub);
        w.int(12, i64::MAX);
        assert_eq!(&w.buf[2..4], &[0x20, 0xff], "-1 as a ten-byte varint");
        let mut r = Reader::new(&w.buf);
        assert_eq!(r.tag().unwrap(), Some((1, 0)));
        assert_eq!(r.varint().unwrap(), 3);
        assert_eq!(r.tag().unwrap(), Some((4, 0)));
        assert_eq!(r.varint().unwrap() as i64, -1);
        assert_eq!(r.tag().unwrap(), Some((6, 2)));
        let mut s = Reader::new(r.bytes().unwrap());
        assert_eq!(s.tag().unwrap(), Some((1, 2)));
        assert_eq!(s.string().unwrap(), "a:1");
        assert_eq!(r.tag().unwrap(), Some((12, 0)));
        assert_eq!(r.varint().unwrap(), i64::MAX as u64);
        assert_eq!(r.tag().unwrap(), None);
    }
}
