//! Typed requests, shared by both protocols.
//!
//! A [`RequestFrame`] is a [`RequestHeader`] (which protocol, and that protocol's
//! header fields: the v2 version byte, or the v3 txnId and priority) plus a
//! [`Request`] that says what is asked. The bookie handles one `Request` type
//! whatever the protocol; the header tells the encoder how to answer
//! ([`RequestFrame::reply_header`]).
//!
//! Byte payloads are `Bytes` slices of the frame they were decoded from: decoding
//! an add copies nothing.
//!
//! Canonical forms. Where the wire has two spellings of one meaning, the decoder
//! picks one and the encoder writes that one. The v2 flag bits are spread into the
//! fields they govern (`recovery`, `flag`, `high_priority`); bits that do not apply
//! to an opcode are dropped, as the Java bookie ignores them.

use bytes::Bytes;

use crate::operation::{OperationType, ProtocolVersion, ReadFlag, V2_CURRENT_VERSION};
use crate::response::{Response, ResponseHeader};
use crate::status::StatusCode;

/// Which protocol a frame uses, with that protocol's header fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestHeader {
    /// v2 binary header word.
    V2 {
        /// The version byte (clients send 2; 0 means the legacy header format).
        version: u8,
        /// `FLAG_HIGH_PRIORITY` on ADD, READ and BATCH_READ.
        high_priority: bool,
    },
    /// v3 `BKPacketHeader` (the operation is implied by the [`Request`]).
    V3 {
        /// `BKPacketHeader.version`.
        version: ProtocolVersion,
        /// `BKPacketHeader.txnId`, copied into the reply.
        txn_id: u64,
        /// `BKPacketHeader.priority`; `> 0` means high priority.
        priority: Option<u32>,
    },
}

impl RequestHeader {
    /// The header a current client sends over v2.
    pub const fn v2() -> RequestHeader {
        RequestHeader::V2 {
            version: V2_CURRENT_VERSION,
            high_priority: false,
        }
    }

    /// The header a current client sends over v3.
    pub const fn v3(txn_id: u64) -> RequestHeader {
        RequestHeader::V3 {
            version: ProtocolVersion::Three,
            txn_id,
            priority: None,
        }
    }

    /// True if the request asks for the high-priority pool (v2 flag 0x0004, or v3
    /// `priority > 0`).
    pub fn is_high_priority(&self) -> bool {
        match *self {
            RequestHeader::V2 { high_priority, .. } => high_priority,
            RequestHeader::V3 { priority, .. } => priority.unwrap_or(0) > 0,
        }
    }

    /// True if a Java bookie would serve this version. v2: the version byte, read
    /// as signed, is 0, 1 or 2; otherwise ADD/READ/BATCH_READ get `EBADVERSION`.
    /// v3: `VERSION_THREE`; otherwise every operation except AUTH and START_TLS
    /// gets `EBADVERSION` in its sub-response (docs/protocol.md §2.1, §3.4).
    pub fn is_version_supported(&self) -> bool {
        match *self {
            RequestHeader::V2 { version, .. } => (0..=2).contains(&(version as i8)),
            RequestHeader::V3 { version, .. } => version == ProtocolVersion::Three,
        }
    }

    /// True for v2.
    pub fn is_v2(&self) -> bool {
        matches!(self, RequestHeader::V2 { .. })
    }
}

/// `AuthMessage`: an opaque exchange between auth plugins (v3 AUTH, and the body of
/// v2 AUTH frames).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthMessage {
    /// `authPluginName`, raw bytes of a proto `string`.
    pub auth_plugin_name: Bytes,
    /// `payload`, opaque to the bookie.
    pub payload: Bytes,
}

impl AuthMessage {
    /// The name the Java bookie answers with when it has no auth plugin.
    pub const AUTH_DISABLED_PLUGIN_NAME: &'static str = "AuthDisabledPlugin";

    /// The reply of a bookie without auth: plugin `"AuthDisabledPlugin"`, empty payload.
    pub fn auth_disabled() -> AuthMessage {
        AuthMessage {
            auth_plugin_name: Bytes::from_static(Self::AUTH_DISABLED_PLUGIN_NAME.as_bytes()),
            payload: Bytes::new(),
        }
    }

    /// The plugin name as text, if it is valid UTF-8.
    pub fn plugin_name(&self) -> Option<&str> {
        std::str::from_utf8(&self.auth_plugin_name).ok()
    }
}

/// What a request asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// ADD_ENTRY (v3) / ADDENTRY (v2).
    AddEntry {
        /// v3 `ledgerId`; on v2 the first 8 bytes of `body`.
        ledger_id: i64,
        /// v3 `entryId`; on v2 bytes 8..16 of `body`.
        entry_id: i64,
        /// The master key (20 bytes from Java clients; exactly 20 on v2).
        master_key: Bytes,
        /// The entry exactly as it is to be stored (docs/protocol.md §5.1).
        body: Bytes,
        /// v3 `flag = RECOVERY_ADD` / v2 `FLAG_RECOVERY_ADD`: write even if fenced.
        recovery: bool,
        /// v3 `writeFlags` (bit 0 = DEFERRED_SYNC); v3 only.
        write_flags: Option<i32>,
    },
    /// READ_ENTRY (v3) / READENTRY (v2), including fence reads and long polls.
    ReadEntry {
        /// `ledgerId`.
        ledger_id: i64,
        /// `entryId`; -1 means the last stored entry (or piggyback mode).
        entry_id: i64,
        /// `masterKey`; on v2 present only on fence reads with version >= 2.
        master_key: Option<Bytes>,
        /// `flag` (v2: `FLAG_DO_FENCING` maps to [`ReadFlag::FenceLedger`]).
        flag: Option<ReadFlag>,
        /// `previousLAC` (v3 only): present without fence means long poll.
        previous_lac: Option<i64>,
        /// `timeOut` in ms (v3 only).
        time_out: Option<i64>,
    },
    /// v2 BATCH_READ_ENTRY (opcode 7). Over v3 operation 12 decodes as
    /// [`Request::Unsupported`].
    BatchReadEntry {
        /// `ledgerId`.
        ledger_id: i64,
        /// First entry to read.
        start_entry_id: i64,
        /// The client's id for this request, copied into the reply.
        request_id: i64,
        /// Most entries to return (`<= 0`: no limit).
        max_count: i32,
        /// Most bytes to return.
        max_size: i64,
        /// `FLAG_DO_FENCING`.
        fence: bool,
        /// Present only on fence reads with version >= 2.
        master_key: Option<Bytes>,
    },
    /// AUTH.
    Auth(AuthMessage),
    /// WRITE_LAC (v3 only).
    WriteLac {
        /// `ledgerId`.
        ledger_id: i64,
        /// `lac` (logged only; the bookie uses the value inside `body`).
        lac: i64,
        /// `masterKey`.
        master_key: Bytes,
        /// The explicit-LAC blob (docs/protocol.md §5.4).
        body: Bytes,
    },
    /// READ_LAC (v3 only).
    ReadLac {
        /// `ledgerId`.
        ledger_id: i64,
    },
    /// GET_BOOKIE_INFO (v3 only).
    GetBookieInfo {
        /// Bitmask of `BOOKIE_INFO_*` fields asked for.
        requested: Option<i64>,
    },
    /// START_TLS (v3 only).
    StartTls,
    /// FORCE_LEDGER (v3 only).
    ForceLedger {
        /// `ledgerId`.
        ledger_id: i64,
    },
    /// GET_LIST_OF_ENTRIES_OF_LEDGER (v3 only).
    GetListOfEntriesOfLedger {
        /// `ledgerId`.
        ledger_id: i64,
    },
    /// A well-formed v3 request the bookie does not serve: operations
    /// RANGE_READ_ENTRY, RANGE_ADD_ENTRY and BATCH_READ_ENTRY, or a known operation
    /// whose sub-message is absent. The answer is `EBADREQ` with no sub-message
    /// ([`Request::error_response`] builds it).
    Unsupported {
        /// The header's operation, copied into the reply.
        operation: OperationType,
    },
}

impl Request {
    /// The v3 operation this request is (for v2 requests: the equivalent one).
    pub fn operation(&self) -> OperationType {
        match self {
            Request::AddEntry { .. } => OperationType::AddEntry,
            Request::ReadEntry { .. } => OperationType::ReadEntry,
            Request::BatchReadEntry { .. } => OperationType::BatchReadEntry,
            Request::Auth(_) => OperationType::Auth,
            Request::WriteLac { .. } => OperationType::WriteLac,
            Request::ReadLac { .. } => OperationType::ReadLac,
            Request::GetBookieInfo { .. } => OperationType::GetBookieInfo,
            Request::StartTls => OperationType::StartTls,
            Request::ForceLedger { .. } => OperationType::ForceLedger,
            Request::GetListOfEntriesOfLedger { .. } => OperationType::GetListOfEntriesOfLedger,
            Request::Unsupported { operation } => *operation,
        }
    }

    /// The reply a Java bookie gives when this request fails with `status` before
    /// any data is produced: the sub-response with the request's ids (docs/protocol.md
    /// §3.4, §9 item 19), or no sub-message for AUTH, START_TLS and unsupported
    /// operations. Use it for EUA-before-auth too: pass the request's
    /// [`Request::operation`] through [`Response::Error`] if no sub-message is wanted.
    pub fn error_response(&self, status: StatusCode) -> Response {
        match *self {
            Request::AddEntry {
                ledger_id,
                entry_id,
                ..
            } => Response::AddEntry {
                status,
                ledger_id,
                entry_id,
            },
            Request::ReadEntry {
                ledger_id,
                entry_id,
                ..
            } => Response::ReadEntry {
                status,
                ledger_id,
                entry_id,
                body: None,
                max_lac: None,
                lac_update_timestamp: None,
            },
            Request::BatchReadEntry {
                ledger_id,
                start_entry_id,
                request_id,
                ..
            } => Response::BatchReadEntry {
                status,
                ledger_id,
                start_entry_id,
                request_id,
                entries: Vec::new(),
            },
            Request::WriteLac { ledger_id, .. } => Response::WriteLac { status, ledger_id },
            Request::ReadLac { ledger_id } => Response::ReadLac {
                status,
                ledger_id,
                lac_body: None,
                last_entry_body: None,
            },
            Request::GetBookieInfo { .. } => Response::GetBookieInfo {
                status,
                total_disk_capacity: None,
                free_disk_space: None,
            },
            Request::ForceLedger { ledger_id } => Response::ForceLedger { status, ledger_id },
            Request::GetListOfEntriesOfLedger { ledger_id } => Response::GetListOfEntriesOfLedger {
                status,
                ledger_id,
                availability: None,
            },
            Request::Auth(_) | Request::StartTls | Request::Unsupported { .. } => Response::Error {
                operation: self.operation(),
                status,
            },
        }
    }
}

/// One decoded request frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestFrame {
    /// Protocol and header fields.
    pub header: RequestHeader,
    /// What is asked.
    pub request: Request,
}

impl RequestFrame {
    /// The header to answer with: v2 copies the request's version byte; v3 copies
    /// the txnId and answers with `VERSION_THREE` (the operation follows from the
    /// response).
    pub fn reply_header(&self) -> ResponseHeader {
        match self.header {
            RequestHeader::V2 { version, .. } => ResponseHeader::V2 { version },
            RequestHeader::V3 { txn_id, .. } => ResponseHeader::V3 {
                version: ProtocolVersion::Three,
                txn_id,
                priority: None,
            },
        }
    }
}
