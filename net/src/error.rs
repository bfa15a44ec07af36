//! The two error types of the codec.
//!
//! * [`ProtocolError`]: the bytes cannot be understood. The Java bookie (and the Java
//!   client) close the connection in every such case, so the caller drops the
//!   connection and sends nothing (docs/protocol.md §1.6, §9 item 30).
//! * [`EncodeError`]: a value cannot be expressed in the protocol it is being
//!   encoded for (for example a long poll over v2). That is a bug in the caller, but
//!   it is returned rather than panicking so that a server never crashes on it.
//!
//! Replies with an error *status* are not errors of the codec: they are ordinary
//! [`crate::Response`] values built by the bookie. Both types are `Copy` so they can
//! be returned on the hot path without allocating.

use std::fmt;

/// Why a protobuf body could not be parsed (v3 messages, and the `AuthMessage`
/// carried inside v2 AUTH frames).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProtobufError {
    /// The message ended inside a field.
    Truncated,
    /// A varint ran over 10 bytes.
    VarintTooLong,
    /// A length-delimited field had a negative length.
    NegativeLength,
    /// A tag with field number 0.
    FieldNumberZero,
    /// Wire type 4 (end group) without a start, or wire type 6 or 7.
    InvalidWireType,
    /// Groups nested deeper than protobuf-java's recursion limit.
    GroupTooDeep,
    /// A proto2 `required` field was absent (named `Message.field`).
    MissingRequired(&'static str),
}

/// The bytes on a connection cannot be understood; close the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProtocolError {
    /// The frame length plus its 4-byte prefix exceeds the configured maximum.
    FrameTooLarge {
        /// The body length the prefix claims.
        length: u32,
        /// The configured maximum frame size, prefix included.
        max_frame_size: usize,
    },
    /// The 4-byte length prefix is negative as an `i32`.
    NegativeFrameLength(i32),
    /// A frame with an empty body: neither protocol can decode it.
    EmptyFrame,
    /// A v2 request or response with an opcode the peer does not decode.
    UnknownV2Opcode(u8),
    /// A v2 body too short for its opcode (Java: `IndexOutOfBoundsException`).
    TruncatedV2 {
        /// The opcode whose layout did not fit.
        opcode: u8,
    },
    /// A v2 response carried an `rc` outside docs/protocol.md §2.4.
    UnknownV2Status(i32),
    /// A v3 message, or the `AuthMessage` of a v2 AUTH frame, failed to parse.
    Protobuf(ProtobufError),
}

impl From<ProtobufError> for ProtocolError {
    fn from(error: ProtobufError) -> Self {
        ProtocolError::Protobuf(error)
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtocolError::FrameTooLarge {
                length,
                max_frame_size,
            } => write!(
                f,
                "frame of {length} bytes (+4 prefix) exceeds the maximum frame size {max_frame_size}"
            ),
            ProtocolError::NegativeFrameLength(length) => {
                write!(f, "negative frame length {length}")
            }
            ProtocolError::EmptyFrame => write!(f, "empty frame"),
            ProtocolError::UnknownV2Opcode(opcode) => write!(f, "unknown v2 opcode {opcode}"),
            ProtocolError::TruncatedV2 { opcode } => {
                write!(f, "v2 frame too short for opcode {opcode}")
            }
            ProtocolError::UnknownV2Status(rc) => write!(f, "unknown v2 rc {rc}"),
            ProtocolError::Protobuf(error) => write!(f, "malformed protobuf: {error:?}"),
        }
    }
}

impl std::error::Error for ProtocolError {}

/// A value that the target protocol cannot express.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncodeError {
    /// The operation or one of its fields does not exist in v2 (for example
    /// WRITE_LAC, a long poll, DEFERRED_SYNC, or a v2 AUTH reply with an error status).
    NotInV2(&'static str),
    /// The operation does not exist in v3 (BATCH_READ_ENTRY).
    NotInV3(&'static str),
    /// A v2 fixed-size field has the wrong size (master key not 20 bytes, entry
    /// shorter than its 16-byte ledger/entry id prefix, or ids that disagree with it).
    BadV2Field(&'static str),
    /// The encoded frame would be larger than the limit it was checked against.
    FrameTooLarge {
        /// The full frame size, prefix included.
        frame_size: usize,
        /// The limit.
        max_frame_size: usize,
    },
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EncodeError::NotInV2(what) => write!(f, "{what} cannot be expressed in v2"),
            EncodeError::NotInV3(what) => write!(f, "{what} cannot be expressed in v3"),
            EncodeError::BadV2Field(what) => write!(f, "bad v2 field: {what}"),
            EncodeError::FrameTooLarge {
                frame_size,
                max_frame_size,
            } => write!(
                f,
                "frame of {frame_size} bytes exceeds the maximum frame size {max_frame_size}"
            ),
        }
    }
}

impl std::error::Error for EncodeError {}
