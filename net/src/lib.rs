//! The Apache BookKeeper bookie wire protocol, v2 (binary) and v3 (protobuf),
//! byte-exact with the Java bookie and client, without I/O.
//!
//! A Java client or Pulsar broker must not be able to tell our bookie from a Java
//! one on the wire. The reference is `docs/protocol.md`; where it and
//! the Java code disagree, the Java code wins.
//!
//! # Layout
//! * [`frame`]: the 4-byte length prefix and the frame-size limit.
//! * [`server::RequestDecoder`]: per-connection framing plus v2/v3 detection.
//! * [`codec`]: encode/decode whole frames in either protocol.
//! * [`Request`], [`Response`] and their frames: one typed model for both
//!   protocols; payloads are `Bytes` slices of the receive buffer.
//! * [`StatusCode`]: the closed set of wire statuses, with both numberings.
//! * [`availability`]: the GET_LIST_OF_ENTRIES_OF_LEDGER blob.
//! * [`client`]: a sans-I/O pipelining [`client::ClientConnection`] and a thin
//!   blocking adapter over `std::net::TcpStream`.
//! * `v2`, `v3`, `protobuf`: the codecs themselves (private).
//!
//! # Serving a connection
//! ```
//! use bytes::BytesMut;
//! use net::{codec, server::RequestDecoder, StatusCode};
//!
//! let mut decoder = RequestDecoder::default(); // 5 MiB frames, per-frame detection
//! let mut received = BytesMut::from(&[0, 0, 0, 0x0f, 0x0a, 6, 8, 3, 0x10, 1, 0x18, 3,
//!     0xa2, 6, 4, 8, 5, 0x10, 3][..]);
//! let mut send = BytesMut::new();
//! while let Some(frame) = decoder.decode(&mut received).expect("else: close, no reply") {
//!     let reply = net::ResponseFrame {
//!         header: frame.reply_header(),
//!         response: frame.request.error_response(StatusCode::ENOENTRY),
//!     };
//!     codec::encode_response(&reply, &mut send).unwrap();
//! }
//! assert_eq!(send.len(), 25);
//! ```
//!
//! # Why a hand-written protobuf codec
//! The v3 messages are defined in `net/proto/bookkeeper.proto` (our own file, with
//! BookKeeper's message names and field numbers). We do not generate code from it
//! with prost + protox. The reasons, in order of weight:
//! * **proto2 `required`.** A Java client drops the connection when a required
//!   field is missing, even a zero (docs/protocol.md §9 item 1), and the server must
//!   reject a request missing one exactly as protobuf-java does (that is what makes
//!   v2/v3 detection work). prost writes required fields but does not check them on
//!   decode, and its enums are bare `i32`s; we would need a validation layer over
//!   every generated type anyway.
//! * **Allocation.** The add path must not allocate: the body and master key are
//!   `Bytes` slices of the receive buffer, optional sub-messages live inline, and
//!   the ignored `requestContext` pairs are validated without being collected.
//!   prost can be configured for `Bytes` fields, but boxes nothing less than it
//!   decodes and collects repeated fields into `Vec`s.
//! * **Size.** The protocol is small: 20 messages, under 80 fields, varints and
//!   length-delimited fields only. The v3 codec and its protobuf primitives are ~1620 lines, docs and tests included, and the build
//!   adds no dependency (prost-build + protox add ~50 s to a cold build and change
//!   the workspace lock file).
//!
//! The cost is that the `.proto` is not compiled. To keep it honest,
//! `v3::SCHEMA` lists every `(message, field, number)` the codec uses, and the
//! test `tests/proto_schema.rs` parses the `.proto` and checks the two are equal.
//!
//! # Bad input: what the Java bookie does, and what this crate does
//! Two outcomes only. **Close**: the decoder returns a [`ProtocolError`]; the caller
//! closes that connection and sends nothing (other connections are unaffected).
//! **Reply**: the decoder returns a request; the bookie answers it with a status,
//! typically via [`Request::error_response`].
//!
//! | Input | Java bookie | Here |
//! |---|---|---|
//! | length prefix + 4 > max frame size | `TooLongFrameException`: close | `FrameTooLarge`: close, before the body is read or any buffer reserved |
//! | negative length prefix | `CorruptedFrameException`: close | `NegativeFrameLength`: close |
//! | zero-length frame | both decoders fail: close | `EmptyFrame`: close |
//! | v2 body shorter than 4 bytes, or too short for its opcode (ADD < 20+16 bytes, READ < 16, BATCH_READ < 36, a fence read without its 20-byte key) | `IndexOutOfBounds`: close | `TruncatedV2`: close |
//! | v2 opcode 4, 5, 6 or any unknown opcode | `IllegalStateException`: close | `UnknownV2Opcode`: close |
//! | v2 AUTH whose `AuthMessage` is malformed or misses a required field | parse/build fails: close | `Protobuf(..)`: close |
//! | v2 ADD/READ/BATCH_READ with version byte not in 0..=2 (signed) | reply `EBADVERSION(103)` | decoded; `RequestHeader::is_version_supported()` is false; the bookie replies `error_response(EBADVERSION)` |
//! | v2 flags that do not apply to the opcode; bytes after a READ's fields | ignored | ignored (dropped from the decoded value) |
//! | frame that fails the strict proto2 v3 parse: truncated field, field number 0, wire type 6/7 or an unmatched end-group, groups nested past protobuf-java's recursion limit of 100 (enclosing messages count), varint > 10 bytes, negative length, missing required field in the header or in *any* present sub-message | falls back to v2, which closes on an unknown opcode; after that the connection stays v2 | same fallback, per frame (`Detection::PerFrame`; `Detection::JavaOneWay` keeps Java's latch). If v2 also fails: close (`Protobuf(..)` if the frame began with `0x0A`, else the v2 error). A v2 decode that succeeds (e.g. version byte 10) is served as Java serves it |
//! | v3 `BKPacketHeader.operation` or `version` outside its enum | required field missing: as above, close | close |
//! | v3 operation RANGE_READ_ENTRY (3), RANGE_ADD_ENTRY (4), BATCH_READ_ENTRY (12) | reply `EBADREQ`, header copied, no sub-message | `Request::Unsupported`; bookie replies `error_response(EBADREQ)` = `Response::Error` |
//! | v3 header names an operation whose sub-message is absent | ≤ 4.17: default sub-message, usually EBADREQ; 4.18: close | `Request::Unsupported` (EBADREQ), the spec's "best choice" |
//! | v3 `header.version` ≠ VERSION_THREE | `EBADVERSION` in the sub-response (not for AUTH, START_TLS) | decoded; `is_version_supported()` is false; bookie replies `error_response(EBADVERSION)` |
//! | v3 unknown fields, unknown optional enum values (`flag = 7`), `requestContext` | ignored | ignored (skipped; context pairs are validated, not kept) |
//! | v3 ADD body shorter than 24 bytes | `EBADREQ` | decoded and stored: the bookie takes the ids from the request, not the body (docs/protocol.md §10) |
//! | v3 long poll with `ENTRY_PIGGYBACK` and entryId ≠ -1 | `EBADREQ` | decoded; the bookie replies `EBADREQ` |
//!
//! Client side ([`client::ClientConnection`]): a response frame over the client's
//! limit, a malformed response, or a v2 `rc` outside docs/protocol.md §2.4 (107
//! excepted, which we accept) is a `ProtocolError` and the connection is failed,
//! as the Java client does. A well-formed response matching no pending request
//! is dropped and counted, as in Java.
//!
//! # Canonical forms
//! Decoding then encoding gives back the same bytes for every frame a Java peer
//! sends. Where the wire has several spellings of one value (a v2 flag bit on an
//! opcode that ignores it, fields out of number order, unknown fields, a repeated
//! sub-message), the decoder keeps the meaning and the encoder writes the one
//! spelling protobuf-java would.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod availability;
pub mod client;
pub mod codec;
pub mod error;
pub mod frame;
pub mod operation;
mod protobuf;
pub mod request;
pub mod response;
pub mod server;
pub mod status;
mod v2;
pub mod v3;

pub use error::{EncodeError, ProtobufError, ProtocolError};
pub use operation::{OperationType, ProtocolVersion, ReadFlag};
pub use request::{AuthMessage, Request, RequestFrame, RequestHeader};
pub use response::{Response, ResponseFrame, ResponseHeader};
pub use status::StatusCode;
