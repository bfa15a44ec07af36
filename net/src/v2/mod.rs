//! v2: the hand-made binary protocol (`BookieProtocol`, docs/protocol.md §2).
//!
//! Every v2 body starts with a 4-byte header word: version byte, opcode byte,
//! 16 flag bits. Version 0 is the legacy format whose whole word is the opcode.
//! What follows depends on the opcode; there is no self-description, so a body
//! too short for its opcode, or an opcode the Java bookie does not decode (4, 5, 6
//! and anything unknown), closes the connection.

pub(crate) mod request;
pub(crate) mod response;

use crate::error::ProtocolError;

/// A decoded v2 header word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HeaderWord {
    pub(crate) version: u8,
    pub(crate) opcode: u8,
    pub(crate) flags: u16,
}

impl HeaderWord {
    /// Splits a header word as `BookieProtocol.PacketHeader` does.
    pub(crate) fn parse(word: u32) -> HeaderWord {
        let version = (word >> 24) as u8;
        if version == 0 {
            HeaderWord {
                version,
                opcode: word as u8,
                flags: 0,
            }
        } else {
            HeaderWord {
                version,
                opcode: (word >> 16) as u8,
                flags: word as u16,
            }
        }
    }

    /// Packs a header word; version 0 writes the opcode alone.
    pub(crate) fn pack(self) -> u32 {
        if self.version == 0 {
            u32::from(self.opcode)
        } else {
            (u32::from(self.version) << 24) | (u32::from(self.opcode) << 16) | u32::from(self.flags)
        }
    }
}

/// A bounds-checked big-endian cursor over a v2 body; running off the end is
/// `TruncatedV2` (Java's `IndexOutOfBoundsException`, which closes the connection).
pub(crate) struct Cursor<'a> {
    body: &'a [u8],
    pos: usize,
    opcode: u8,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(body: &'a [u8], pos: usize, opcode: u8) -> Cursor<'a> {
        Cursor { body, pos, opcode }
    }

    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.body.len() - self.pos
    }

    /// Takes the next `count` bytes' range.
    pub(crate) fn take(&mut self, count: usize) -> Result<(usize, usize), ProtocolError> {
        if self.remaining() < count {
            return Err(ProtocolError::TruncatedV2 {
                opcode: self.opcode,
            });
        }
        let start = self.pos;
        self.pos += count;
        Ok((start, self.pos))
    }

    pub(crate) fn i32(&mut self) -> Result<i32, ProtocolError> {
        let (start, end) = self.take(4)?;
        let mut bytes = [0u8; 4];
        bytes.copy_from_slice(&self.body[start..end]);
        Ok(i32::from_be_bytes(bytes))
    }

    pub(crate) fn i64(&mut self) -> Result<i64, ProtocolError> {
        let (start, end) = self.take(8)?;
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&self.body[start..end]);
        Ok(i64::from_be_bytes(bytes))
    }
}

/// Reads the header word at the start of a body.
pub(crate) fn header_word(body: &[u8]) -> Result<HeaderWord, ProtocolError> {
    match body {
        [] => Err(ProtocolError::EmptyFrame),
        [a, b, c, d, ..] => Ok(HeaderWord::parse(u32::from_be_bytes([*a, *b, *c, *d]))),
        // Java's readInt() on fewer than 4 bytes throws IndexOutOfBounds: close.
        _ => Err(ProtocolError::TruncatedV2 { opcode: 0 }),
    }
}
