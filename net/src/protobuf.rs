//! Protobuf wire-format primitives for the hand-written v3 codec.
//!
//! Only what `BookkeeperProtocol.proto` needs: varints (no zigzag anywhere in this
//! protocol), length-delimited fields, and skipping every wire type so unknown
//! fields are ignored as protobuf-java ignores them. The reader walks a `Bytes`
//! frame and hands out `Bytes` slices of it for `bytes`/`string` fields, so payloads
//! are never copied.
//!
//! Parsing follows protobuf-java 3.25 (BookKeeper up to 4.17), checked against it
//! byte for byte (net/fuzz/differential): a varint may take up to 10 bytes; a 10-byte
//! varint has bit 63 set whatever its last byte holds (see [`Reader::varint`]); 32-bit
//! fields truncate; field number 0 is an error; a field whose wire type is not the
//! declared one is treated as an unknown field; groups are skipped (up to
//! protobuf-java's recursion limit of 100, which enclosing messages count against). LightProto (BookKeeper 4.18+) differs on
//! malformed input only: it skips field number 0, rejects groups, reads the 10th
//! varint byte's low bit, and replaces rather than merges a repeated sub-message.

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::ProtobufError;

/// Wire type 0.
pub(crate) const VARINT: u32 = 0;
/// Wire type 1.
pub(crate) const FIXED64: u32 = 1;
/// Wire type 2.
pub(crate) const LEN: u32 = 2;
/// Wire type 3.
pub(crate) const START_GROUP: u32 = 3;
/// Wire type 4.
pub(crate) const END_GROUP: u32 = 4;
/// Wire type 5.
pub(crate) const FIXED32: u32 = 5;

/// protobuf-java's default recursion limit, used for groups.
const MAX_GROUP_DEPTH: u32 = 100;

/// The tag of `field` with wire type `wire_type`.
pub(crate) const fn tag(field: u32, wire_type: u32) -> u32 {
    (field << 3) | wire_type
}

/// A cursor over one message: `data[pos..end]`.
pub(crate) struct Reader<'a> {
    data: &'a Bytes,
    pos: usize,
    end: usize,
    /// How many messages enclose this one. protobuf-java counts embedded messages and
    /// groups against one recursion limit, so a group inside a sub-message may nest
    /// one level less than a group at the top.
    depth: u32,
}

impl<'a> Reader<'a> {
    /// A reader over all of `data`.
    pub(crate) fn new(data: &'a Bytes) -> Reader<'a> {
        Reader {
            data,
            pos: 0,
            end: data.len(),
            depth: 0,
        }
    }

    /// True when the message is consumed.
    #[inline]
    pub(crate) fn is_done(&self) -> bool {
        self.pos >= self.end
    }

    /// Reads a varint of up to 10 bytes.
    ///
    /// The 10th byte only has to end the varint: its value is ignored and bit 63 is
    /// set, because protobuf-java's fast path (`readRawVarint64`, taken whenever the
    /// varint lies inside its buffer) keeps the 9th byte's continuation bit as bit 63
    /// and never adds the 10th byte in. A Java writer always ends a 10-byte varint
    /// with `01`, which reads the same either way.
    #[inline]
    pub(crate) fn varint(&mut self) -> Result<u64, ProtobufError> {
        let bytes = &self.data[self.pos..self.end];
        let mut value: u64 = 0;
        for (index, &byte) in bytes.iter().take(10).enumerate() {
            value |= if index == 9 {
                1 << 63
            } else {
                u64::from(byte & 0x7f) << (7 * index)
            };
            if byte < 0x80 {
                self.pos += index + 1;
                return Ok(value);
            }
        }
        Err(if bytes.len() >= 10 {
            ProtobufError::VarintTooLong
        } else {
            ProtobufError::Truncated
        })
    }

    /// Reads a tag; returns `(field number, wire type)`.
    #[inline]
    pub(crate) fn tag(&mut self) -> Result<(u32, u32), ProtobufError> {
        // protobuf-java reads tags as 32-bit varints.
        let raw = self.varint()? as u32;
        let field = raw >> 3;
        if field == 0 {
            return Err(ProtobufError::FieldNumberZero);
        }
        Ok((field, raw & 7))
    }

    /// Reads an `int64`/`uint64`.
    #[inline]
    pub(crate) fn int64(&mut self) -> Result<i64, ProtobufError> {
        Ok(self.varint()? as i64)
    }

    /// Reads an `int32`/`uint32`/enum: the low 32 bits of the varint.
    #[inline]
    pub(crate) fn int32(&mut self) -> Result<i32, ProtobufError> {
        Ok(self.varint()? as u32 as i32)
    }

    /// Reads a length prefix and returns the range of the field's bytes.
    #[inline]
    fn length_delimited(&mut self) -> Result<(usize, usize), ProtobufError> {
        let length = self.int32()?;
        if length < 0 {
            return Err(ProtobufError::NegativeLength);
        }
        let start = self.pos;
        let end = start
            .checked_add(length as usize)
            .filter(|&end| end <= self.end)
            .ok_or(ProtobufError::Truncated)?;
        self.pos = end;
        Ok((start, end))
    }

    /// Reads a `bytes`/`string` field as a slice of the frame.
    #[inline]
    pub(crate) fn bytes(&mut self) -> Result<Bytes, ProtobufError> {
        let (start, end) = self.length_delimited()?;
        Ok(self.data.slice(start..end))
    }

    /// Reads an embedded message and returns a reader over it.
    #[inline]
    pub(crate) fn message(&mut self) -> Result<Reader<'a>, ProtobufError> {
        let (start, end) = self.length_delimited()?;
        Ok(Reader {
            data: self.data,
            pos: start,
            end,
            depth: self.depth + 1,
        })
    }

    /// Skips the value of a field with `wire_type` whose tag has been read.
    pub(crate) fn skip(&mut self, field: u32, wire_type: u32) -> Result<(), ProtobufError> {
        self.skip_at_depth(field, wire_type, self.depth)
    }

    fn skip_at_depth(
        &mut self,
        field: u32,
        wire_type: u32,
        depth: u32,
    ) -> Result<(), ProtobufError> {
        match wire_type {
            VARINT => self.varint().map(drop),
            FIXED64 => self.advance(8),
            LEN => self.length_delimited().map(drop),
            FIXED32 => self.advance(4),
            START_GROUP => {
                if depth >= MAX_GROUP_DEPTH {
                    return Err(ProtobufError::GroupTooDeep);
                }
                loop {
                    let (inner_field, inner_wire_type) = self.tag()?;
                    if inner_wire_type == END_GROUP {
                        if inner_field == field {
                            return Ok(());
                        }
                        return Err(ProtobufError::InvalidWireType);
                    }
                    self.skip_at_depth(inner_field, inner_wire_type, depth + 1)?;
                }
            }
            _ => Err(ProtobufError::InvalidWireType),
        }
    }

    fn advance(&mut self, count: usize) -> Result<(), ProtobufError> {
        if self.end - self.pos < count {
            return Err(ProtobufError::Truncated);
        }
        self.pos += count;
        Ok(())
    }
}

/// Bytes taken by `value` as a varint.
pub(crate) const fn varint_len(value: u64) -> usize {
    // 1 byte per 7 significant bits, at least 1.
    let bits = 64 - (value | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Bytes taken by a tag (all tags in this protocol are below 2^14).
pub(crate) const fn tag_len(field: u32) -> usize {
    varint_len(tag(field, 0) as u64)
}

/// Bytes taken by an `int64` field, tag included.
pub(crate) const fn int64_field_len(field: u32, value: i64) -> usize {
    tag_len(field) + varint_len(value as u64)
}

/// Bytes taken by an `int32`/enum field, tag included (negative values sign-extend
/// to 10 bytes, as protobuf-java writes them).
pub(crate) const fn int32_field_len(field: u32, value: i32) -> usize {
    tag_len(field) + varint_len(value as i64 as u64)
}

/// Bytes taken by a length-delimited field with `length` bytes of content.
pub(crate) const fn len_field_len(field: u32, length: usize) -> usize {
    tag_len(field) + varint_len(length as u64) + length
}

/// Writes a varint.
pub(crate) fn put_varint(out: &mut BytesMut, mut value: u64) {
    while value >= 0x80 {
        out.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    out.put_u8(value as u8);
}

/// Writes a tag.
pub(crate) fn put_tag(out: &mut BytesMut, field: u32, wire_type: u32) {
    put_varint(out, u64::from(tag(field, wire_type)));
}

/// Writes an `int64`/`uint64` field.
pub(crate) fn put_int64_field(out: &mut BytesMut, field: u32, value: i64) {
    put_tag(out, field, VARINT);
    put_varint(out, value as u64);
}

/// Writes an `int32`/`uint32`/enum field (negative values sign-extended).
pub(crate) fn put_int32_field(out: &mut BytesMut, field: u32, value: i32) {
    put_tag(out, field, VARINT);
    put_varint(out, value as i64 as u64);
}

/// Writes a `bytes`/`string` field.
pub(crate) fn put_bytes_field(out: &mut BytesMut, field: u32, value: &[u8]) {
    put_len_header(out, field, value.len());
    out.put_slice(value);
}

/// Writes the tag and length of a length-delimited field whose content follows.
pub(crate) fn put_len_header(out: &mut BytesMut, field: u32, length: usize) {
    put_tag(out, field, LEN);
    put_varint(out, length as u64);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: varints encode as the spec's vectors (-1 takes 10 bytes) and read back,
    /// and varint_len agrees with what put_varint writes.
    #[test]
    fn varints() {
        let mut out = BytesMut::new();
        put_varint(&mut out, -1i64 as u64);
        assert_eq!(
            &out[..],
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]
        );
        for value in [0u64, 1, 127, 128, 300, 10_000, 1 << 35, u64::MAX] {
            let mut out = BytesMut::new();
            put_varint(&mut out, value);
            assert_eq!(out.len(), varint_len(value));
            let frozen = out.freeze();
            assert_eq!(Reader::new(&frozen).varint(), Ok(value));
        }
        let too_long = Bytes::from_static(&[0x80; 11]);
        assert_eq!(
            Reader::new(&too_long).varint(),
            Err(ProtobufError::VarintTooLong)
        );
        let truncated = Bytes::from_static(&[0x80]);
        assert_eq!(
            Reader::new(&truncated).varint(),
            Err(ProtobufError::Truncated)
        );
    }

    /// Goal: every wire type can be skipped, groups included, and bad wire types and
    /// truncation are errors.
    #[test]
    fn skipping() {
        // field 1 group { field 2 varint 5 } end group 1, then field 3 fixed32.
        let data = Bytes::from_static(&[0x0b, 0x10, 0x05, 0x0c, 0x1d, 1, 2, 3, 4]);
        let mut reader = Reader::new(&data);
        let (field, wire_type) = reader.tag().unwrap();
        reader.skip(field, wire_type).unwrap();
        let (field, wire_type) = reader.tag().unwrap();
        reader.skip(field, wire_type).unwrap();
        assert!(reader.is_done());
        let bad = Bytes::from_static(&[0x0e]);
        let mut reader = Reader::new(&bad);
        let (field, wire_type) = reader.tag().unwrap();
        assert_eq!(
            reader.skip(field, wire_type),
            Err(ProtobufError::InvalidWireType)
        );
        let short = Bytes::from_static(&[0x09, 1, 2]);
        let mut reader = Reader::new(&short);
        let (field, wire_type) = reader.tag().unwrap();
        assert_eq!(reader.skip(field, wire_type), Err(ProtobufError::Truncated));
    }
}
