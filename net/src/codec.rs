//! Whole frames in, whole frames out: the protocol-independent entry points that
//! pick the v2 or v3 codec from a frame's header.
//!
//! The encoders append one complete frame (length prefix included) to `out` and
//! leave `out` untouched on error. The decoders take a frame body as produced by
//! [`crate::frame::split_frame`].

use bytes::{Bytes, BytesMut};

use crate::error::{EncodeError, ProtocolError};
use crate::frame::{begin_frame, end_frame};
use crate::request::{RequestFrame, RequestHeader};
use crate::response::{ResponseFrame, ResponseHeader};
use crate::{v2, v3};

/// The first byte of every v3 message a Java client builds: field 1 (`header`),
/// wire type 2. A v2 body starts with its version byte (0, 1 or 2) instead.
pub const V3_FIRST_BYTE: u8 = 0x0a;

/// Appends `frame` to `out` as one length-prefixed request frame.
pub fn encode_request(frame: &RequestFrame, out: &mut BytesMut) -> Result<(), EncodeError> {
    let start = begin_frame(out);
    let result = match frame.header {
        RequestHeader::V2 {
            version,
            high_priority,
        } => v2::request::encode(version, high_priority, &frame.request, out),
        RequestHeader::V3 {
            version,
            txn_id,
            priority,
        } => v3::request::encode(version, txn_id, priority, &frame.request, out),
    };
    finish(out, start, result)
}

/// Appends `frame` to `out` as one length-prefixed response frame.
pub fn encode_response(frame: &ResponseFrame, out: &mut BytesMut) -> Result<(), EncodeError> {
    let start = begin_frame(out);
    let result = match frame.header {
        ResponseHeader::V2 { version } => v2::response::encode(version, &frame.response, out),
        ResponseHeader::V3 {
            version,
            txn_id,
            priority,
        } => v3::response::encode(version, txn_id, priority, &frame.response, out),
    };
    finish(out, start, result)
}

fn finish(
    out: &mut BytesMut,
    start: usize,
    result: Result<(), EncodeError>,
) -> Result<(), EncodeError> {
    match result {
        Ok(()) => {
            end_frame(out, start);
            Ok(())
        }
        Err(error) => {
            out.truncate(start);
            Err(error)
        }
    }
}

/// Parses a request body as v2.
pub fn decode_request_v2(body: &Bytes) -> Result<RequestFrame, ProtocolError> {
    v2::request::decode(body)
}

/// Parses a request body as v3 (strict proto2: required fields checked).
pub fn decode_request_v3(body: &Bytes) -> Result<RequestFrame, ProtocolError> {
    if body.is_empty() {
        return Err(ProtocolError::EmptyFrame);
    }
    Ok(v3::request::decode(body)?)
}

/// Parses a response body as v2.
pub fn decode_response_v2(body: &Bytes) -> Result<ResponseFrame, ProtocolError> {
    v2::response::decode(body)
}

/// Parses a response body as v3.
pub fn decode_response_v3(body: &Bytes) -> Result<ResponseFrame, ProtocolError> {
    if body.is_empty() {
        return Err(ProtocolError::EmptyFrame);
    }
    Ok(v3::response::decode(body)?)
}

/// Parses a response body, choosing the protocol by its first byte.
pub fn decode_response(body: &Bytes) -> Result<ResponseFrame, ProtocolError> {
    match body.first() {
        None => Err(ProtocolError::EmptyFrame),
        Some(&V3_FIRST_BYTE) => decode_response_v3(body),
        Some(_) => decode_response_v2(body),
    }
}
