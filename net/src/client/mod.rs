//! The client side of a bookie connection, sans I/O.
//!
//! [`ClientConnection`] is a state machine: [`ClientConnection::send_v2`] /
//! [`ClientConnection::send_v3`] encode a request into the outgoing buffer and
//! register it as pending; the I/O layer writes [`ClientConnection::take_output`]
//! to the socket, puts what it reads into [`ClientConnection::receive_buffer`], and
//! collects matched responses with [`ClientConnection::poll_response`]. It works
//! the same under a blocking socket ([`blocking::BlockingClient`]) or an async
//! runtime.
//!
//! Matching follows the Java client (docs/protocol.md §1.5):
//! * v3: by `(txnId, operation)`; txnIds come from a per-connection counter from 1;
//! * v2 ADD/READ: by `(ledgerId, entryId, opcode)`, several pending requests may
//!   share a key and are completed first-in first-out;
//! * v2 BATCH_READ: by `requestId`;
//! * a response that matches nothing is dropped and counted.
//!
//! Limits: at most `max_pending_requests` pending requests (sending more is
//! refused, not queued), and frames in both directions within `max_frame_size`.
//!
//! A connection may mix protocols, as a Java v2 client does with START_TLS and
//! GET_LIST_OF_ENTRIES_OF_LEDGER. A response is decoded as v2 when only v2
//! requests are pending, as v3 when only v3 ones are, and by its first byte
//! otherwise.

pub mod blocking;

use std::collections::{HashMap, VecDeque};
use std::fmt;

use bytes::{Bytes, BytesMut};

use crate::codec::{decode_response, decode_response_v2, decode_response_v3, encode_request};
use crate::error::{EncodeError, ProtocolError};
use crate::frame::{split_frame, DEFAULT_MAX_FRAME_SIZE};
use crate::operation::{opcode, OperationType, ProtocolVersion, V2_CURRENT_VERSION};
use crate::request::{Request, RequestFrame, RequestHeader};
use crate::response::{Response, ResponseFrame};

/// Identifies a request sent on a [`ClientConnection`] until its response arrives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(pub u64);

/// Limits of a client connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientConfig {
    /// Largest frame, length prefix included, in either direction
    /// (`nettyMaxFrameSizeBytes`, default 5 MiB).
    pub max_frame_size: usize,
    /// Most requests that may wait for a response at once.
    pub max_pending_requests: usize,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            max_pending_requests: 4096,
        }
    }
}

/// Why a client operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientError {
    /// `max_pending_requests` requests are already pending; nothing was sent.
    TooManyPendingRequests,
    /// The request cannot be expressed (or is too large); nothing was sent.
    Encode(EncodeError),
    /// The peer sent bytes we cannot understand; the connection must be closed.
    Protocol(ProtocolError),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::TooManyPendingRequests => write!(f, "too many pending requests"),
            ClientError::Encode(error) => write!(f, "cannot encode request: {error}"),
            ClientError::Protocol(error) => write!(f, "protocol error: {error}"),
        }
    }
}

impl std::error::Error for ClientError {}

/// How a response is matched to its request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum MatchKey {
    V3 {
        txn_id: u64,
        operation: OperationType,
    },
    V2Entry {
        ledger_id: i64,
        entry_id: i64,
        opcode: u8,
    },
    V2Batch {
        request_id: i64,
    },
}

/// A sans-I/O client connection. See the module docs.
#[derive(Debug)]
pub struct ClientConnection {
    config: ClientConfig,
    next_txn_id: u64,
    next_request_id: u64,
    pending: HashMap<MatchKey, VecDeque<RequestId>>,
    pending_v2: usize,
    pending_v3: usize,
    outgoing: BytesMut,
    incoming: BytesMut,
    unmatched_responses: u64,
}

impl ClientConnection {
    /// A new connection with the given limits.
    pub fn new(config: ClientConfig) -> ClientConnection {
        ClientConnection {
            config,
            next_txn_id: 1,
            next_request_id: 1,
            pending: HashMap::new(),
            pending_v2: 0,
            pending_v3: 0,
            outgoing: BytesMut::new(),
            incoming: BytesMut::new(),
            unmatched_responses: 0,
        }
    }

    /// The limits.
    pub fn config(&self) -> ClientConfig {
        self.config
    }

    /// Number of requests waiting for a response.
    pub fn pending_requests(&self) -> usize {
        self.pending_v2 + self.pending_v3
    }

    /// Responses received that matched no pending request (dropped, as in Java).
    pub fn unmatched_responses(&self) -> u64 {
        self.unmatched_responses
    }

    /// Encodes a v2 request (version byte 2). Only ADD, READ, BATCH_READ and AUTH
    /// exist in v2; anything else is refused with [`ClientError::Encode`].
    pub fn send_v2(
        &mut self,
        request: Request,
        high_priority: bool,
    ) -> Result<RequestId, ClientError> {
        let key = match &request {
            Request::AddEntry {
                ledger_id,
                entry_id,
                ..
            } => MatchKey::V2Entry {
                ledger_id: *ledger_id,
                entry_id: *entry_id,
                opcode: opcode::ADD_ENTRY,
            },
            Request::ReadEntry {
                ledger_id,
                entry_id,
                ..
            } => MatchKey::V2Entry {
                ledger_id: *ledger_id,
                entry_id: *entry_id,
                opcode: opcode::READ_ENTRY,
            },
            Request::BatchReadEntry { request_id, .. } => MatchKey::V2Batch {
                request_id: *request_id,
            },
            Request::Auth(_) => MatchKey::V2Entry {
                ledger_id: -1,
                entry_id: -1,
                opcode: opcode::AUTH,
            },
            _ => return Err(ClientError::Encode(EncodeError::NotInV2("this operation"))),
        };
        let header = RequestHeader::V2 {
            version: V2_CURRENT_VERSION,
            high_priority,
        };
        self.enqueue(RequestFrame { header, request }, key)
    }

    /// Encodes a v3 request with a fresh txnId. `priority > 0` asks for the
    /// bookie's high-priority pool (the Java client uses 100).
    pub fn send_v3(
        &mut self,
        request: Request,
        priority: Option<u32>,
    ) -> Result<RequestId, ClientError> {
        let txn_id = self.next_txn_id;
        let key = MatchKey::V3 {
            txn_id,
            operation: request.operation(),
        };
        let header = RequestHeader::V3 {
            version: ProtocolVersion::Three,
            txn_id,
            priority,
        };
        let id = self.enqueue(RequestFrame { header, request }, key)?;
        self.next_txn_id += 1;
        Ok(id)
    }

    fn enqueue(&mut self, frame: RequestFrame, key: MatchKey) -> Result<RequestId, ClientError> {
        if self.pending_requests() >= self.config.max_pending_requests {
            return Err(ClientError::TooManyPendingRequests);
        }
        let start = self.outgoing.len();
        encode_request(&frame, &mut self.outgoing).map_err(ClientError::Encode)?;
        crate::frame::enforce_frame_limit(&mut self.outgoing, start, self.config.max_frame_size)
            .map_err(ClientError::Encode)?;
        let id = RequestId(self.next_request_id);
        self.next_request_id += 1;
        self.pending.entry(key).or_default().push_back(id);
        if frame.header.is_v2() {
            self.pending_v2 += 1;
        } else {
            self.pending_v3 += 1;
        }
        Ok(id)
    }

    /// True if there are encoded bytes waiting to be written.
    pub fn has_output(&self) -> bool {
        !self.outgoing.is_empty()
    }

    /// Takes every encoded byte waiting to be written.
    pub fn take_output(&mut self) -> Bytes {
        self.outgoing.split().freeze()
    }

    /// The buffer the I/O layer appends received bytes to.
    pub fn receive_buffer(&mut self) -> &mut BytesMut {
        &mut self.incoming
    }

    /// Appends received bytes (a copying alternative to [`Self::receive_buffer`]).
    pub fn receive(&mut self, data: &[u8]) {
        self.incoming.extend_from_slice(data);
    }

    /// Returns the next response that matches a pending request, or `None` if no
    /// complete one is buffered. On `Err` the connection must be closed; call
    /// [`Self::fail_all`] to learn which requests are lost.
    pub fn poll_response(&mut self) -> Result<Option<(RequestId, ResponseFrame)>, ClientError> {
        loop {
            let Some(body) = split_frame(&mut self.incoming, self.config.max_frame_size)
                .map_err(ClientError::Protocol)?
            else {
                return Ok(None);
            };
            let frame = self.decode(&body).map_err(ClientError::Protocol)?;
            let key = match_key(&frame);
            let id = self.pending.get_mut(&key).and_then(VecDeque::pop_front);
            if self.pending.get(&key).is_some_and(VecDeque::is_empty) {
                self.pending.remove(&key);
            }
            match id {
                Some(id) => {
                    match key {
                        MatchKey::V3 { .. } => self.pending_v3 -= 1,
                        _ => self.pending_v2 -= 1,
                    }
                    return Ok(Some((id, frame)));
                }
                None => self.unmatched_responses += 1,
            }
        }
    }

    fn decode(&self, body: &Bytes) -> Result<ResponseFrame, ProtocolError> {
        match (self.pending_v2 > 0, self.pending_v3 > 0) {
            (true, false) => decode_response_v2(body),
            (false, true) => decode_response_v3(body),
            _ => decode_response(body),
        }
    }

    /// Forgets every pending request (the connection is closed) and returns them,
    /// oldest first, so the caller can fail them.
    pub fn fail_all(&mut self) -> Vec<RequestId> {
        let mut ids: Vec<RequestId> = self.pending.drain().flat_map(|(_, ids)| ids).collect();
        ids.sort();
        self.pending_v2 = 0;
        self.pending_v3 = 0;
        self.outgoing.clear();
        self.incoming.clear();
        ids
    }
}

fn match_key(frame: &ResponseFrame) -> MatchKey {
    match frame.header {
        crate::response::ResponseHeader::V3 { txn_id, .. } => MatchKey::V3 {
            txn_id,
            operation: frame.response.operation(),
        },
        crate::response::ResponseHeader::V2 { .. } => match frame.response {
            Response::AddEntry {
                ledger_id,
                entry_id,
                ..
            } => MatchKey::V2Entry {
                ledger_id,
                entry_id,
                opcode: opcode::ADD_ENTRY,
            },
            Response::ReadEntry {
                ledger_id,
                entry_id,
                ..
            } => MatchKey::V2Entry {
                ledger_id,
                entry_id,
                opcode: opcode::READ_ENTRY,
            },
            Response::BatchReadEntry { request_id, .. } => MatchKey::V2Batch { request_id },
            // The v2 decoder produces no other variant but AUTH.
            _ => MatchKey::V2Entry {
                ledger_id: -1,
                entry_id: -1,
                opcode: opcode::AUTH,
            },
        },
    }
}
