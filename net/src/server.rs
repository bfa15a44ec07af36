//! The server side of a connection: split frames out of the receive buffer and
//! decode them as v2 or v3 (docs/protocol.md §1.3).
//!
//! [`RequestDecoder`] is created per connection. It does no I/O: the connection
//! task reads into a `BytesMut`, calls [`RequestDecoder::decode`] until it returns
//! `Ok(None)`, and closes the connection on `Err` without replying (that is what
//! the Java bookie does for every [`ProtocolError`]).
//!
//! Protocol detection. [`Detection::PerFrame`] (the default) is Java's rule
//! without its one-way latch: every frame is first parsed as a strict proto2 v3
//! `Request`, and if that fails it is decoded as v2. A v2 body fails the v3 parse
//! on its first byte (the version byte 0, 1 or 2 reads as protobuf field number 0),
//! so v2 frames pay one byte of extra work. This accepts everything a Java client
//! sends, including a v3 frame after v2 traffic (START_TLS, or the v2 client's
//! GET_LIST_OF_ENTRIES_OF_LEDGER quirk, docs/protocol.md §9 item 27), and v3 frames
//! from encoders that do not write `header` first. [`Detection::JavaOneWay`]
//! copies Java exactly: frames are tried as v3 until one fails, and from then on
//! the connection is v2 for good.

use bytes::{Bytes, BytesMut};

use crate::codec::{decode_request_v2, decode_request_v3, V3_FIRST_BYTE};
use crate::error::ProtocolError;
use crate::frame::{split_frame, DEFAULT_MAX_FRAME_SIZE};
use crate::request::RequestFrame;

/// How a connection tells v2 frames from v3 frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detection {
    /// Per frame: v3 if the frame parses as v3, else v2. A superset of both
    /// docs/protocol.md §1.3 choices (a) and (b).
    PerFrame,
    /// Java's rule: v3 until a frame fails to parse as v3, then v2 forever.
    JavaOneWay,
}

/// Per-connection request decoder.
#[derive(Debug)]
pub struct RequestDecoder {
    max_frame_size: usize,
    detection: Detection,
    /// `usingV3Protocol` of the Java decoder (used by [`Detection::JavaOneWay`]).
    using_v3: bool,
}

impl Default for RequestDecoder {
    fn default() -> Self {
        RequestDecoder::new(DEFAULT_MAX_FRAME_SIZE)
    }
}

impl RequestDecoder {
    /// A decoder for a new connection, with the given maximum frame size (prefix
    /// included, like `nettyMaxFrameSizeBytes`).
    pub fn new(max_frame_size: usize) -> RequestDecoder {
        RequestDecoder {
            max_frame_size,
            detection: Detection::PerFrame,
            using_v3: true,
        }
    }

    /// Chooses the detection rule.
    pub fn with_detection(mut self, detection: Detection) -> RequestDecoder {
        self.detection = detection;
        self
    }

    /// The maximum frame size.
    pub fn max_frame_size(&self) -> usize {
        self.max_frame_size
    }

    /// Takes the next whole frame out of `buf` and decodes it. `Ok(None)` means
    /// more bytes are needed; `Err` means close the connection.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<RequestFrame>, ProtocolError> {
        match split_frame(buf, self.max_frame_size)? {
            Some(body) => self.decode_body(&body).map(Some),
            None => Ok(None),
        }
    }

    /// Decodes one frame body (without its length prefix).
    pub fn decode_body(&mut self, body: &Bytes) -> Result<RequestFrame, ProtocolError> {
        if body.is_empty() {
            return Err(ProtocolError::EmptyFrame);
        }
        let try_v3 = match self.detection {
            Detection::PerFrame => true,
            Detection::JavaOneWay => self.using_v3,
        };
        if !try_v3 {
            return decode_request_v2(body);
        }
        match decode_request_v3(body) {
            Ok(frame) => Ok(frame),
            Err(v3_error) => {
                self.using_v3 = false;
                // Java rewinds and decodes the same bytes as v2. If that fails too,
                // report the v3 error when the frame looked like v3 (it starts
                // with the `header` tag, as every Java-built request does).
                decode_request_v2(body).map_err(|v2_error| {
                    if body[0] == V3_FIRST_BYTE {
                        v3_error
                    } else {
                        v2_error
                    }
                })
            }
        }
    }
}
