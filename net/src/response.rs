//! Typed responses, shared by both protocols.
//!
//! A [`ResponseFrame`] is a [`ResponseHeader`] plus a [`Response`]. In v3 the
//! outer `Response.status` and the sub-response's status are always equal in what a
//! Java bookie sends (docs/protocol.md §3.4), so a [`Response`] carries one status and
//! the encoder writes it in both places. The decoder reads it the way the Java
//! client does: the outer status if it is not EOK, else the sub-response's.
//!
//! [`Response::Error`] is a v3 reply with no sub-message at all (EUA before auth,
//! EBADREQ for an unsupported operation or a START_TLS refusal).

use bytes::Bytes;

use crate::operation::{OperationType, ProtocolVersion};
use crate::request::AuthMessage;
use crate::status::StatusCode;

/// Which protocol a reply uses, with that protocol's header fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResponseHeader {
    /// v2: the request's version byte (flags are always 0 in replies).
    V2 {
        /// The version byte.
        version: u8,
    },
    /// v3 `BKPacketHeader` (the operation is implied by the [`Response`]).
    V3 {
        /// Normally `VERSION_THREE`.
        version: ProtocolVersion,
        /// The request's txnId.
        txn_id: u64,
        /// Only set by paths that copy the request header whole; clients ignore it.
        priority: Option<u32>,
    },
}

/// What a reply says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Response {
    /// Reply to ADD_ENTRY / ADDENTRY.
    AddEntry {
        /// Result.
        status: StatusCode,
        /// Copied from the request.
        ledger_id: i64,
        /// Copied from the request.
        entry_id: i64,
    },
    /// Reply to READ_ENTRY / READENTRY.
    ReadEntry {
        /// Result.
        status: StatusCode,
        /// Copied from the request.
        ledger_id: i64,
        /// Copied from the request, except on a long poll that attaches an entry.
        entry_id: i64,
        /// The entry as stored. On v2 everything after the ids; `None` if empty.
        body: Option<Bytes>,
        /// v3 only: the bookie's known LAC (omitted on fence reads).
        max_lac: Option<i64>,
        /// v3 only: long-poll LAC update time, ms since the epoch.
        lac_update_timestamp: Option<i64>,
    },
    /// Reply to v2 BATCH_READ_ENTRY.
    BatchReadEntry {
        /// Result.
        status: StatusCode,
        /// Copied from the request.
        ledger_id: i64,
        /// Copied from the request.
        start_entry_id: i64,
        /// Copied from the request.
        request_id: i64,
        /// Entries `start_entry_id`, `start_entry_id + 1`, …
        entries: Vec<Bytes>,
    },
    /// Reply to AUTH. v2 has no status field: only EOK can be sent over v2.
    Auth {
        /// Result.
        status: StatusCode,
        /// The server plugin's answer.
        message: AuthMessage,
    },
    /// Reply to WRITE_LAC.
    WriteLac {
        /// Result.
        status: StatusCode,
        /// Copied from the request.
        ledger_id: i64,
    },
    /// Reply to READ_LAC.
    ReadLac {
        /// Result.
        status: StatusCode,
        /// Copied from the request.
        ledger_id: i64,
        /// The explicit-LAC blob, if stored.
        lac_body: Option<Bytes>,
        /// The last stored entry, if any.
        last_entry_body: Option<Bytes>,
    },
    /// Reply to GET_BOOKIE_INFO.
    GetBookieInfo {
        /// Result.
        status: StatusCode,
        /// Bytes, if asked for.
        total_disk_capacity: Option<i64>,
        /// Usable bytes, if asked for.
        free_disk_space: Option<i64>,
    },
    /// Reply to START_TLS with its (empty) sub-message.
    StartTls {
        /// Result (EOK in practice; a refusal is a [`Response::Error`]).
        status: StatusCode,
    },
    /// Reply to FORCE_LEDGER.
    ForceLedger {
        /// Result.
        status: StatusCode,
        /// Copied from the request.
        ledger_id: i64,
    },
    /// Reply to GET_LIST_OF_ENTRIES_OF_LEDGER.
    GetListOfEntriesOfLedger {
        /// Result.
        status: StatusCode,
        /// Copied from the request.
        ledger_id: i64,
        /// The availability encoding ([`crate::availability`]).
        availability: Option<Bytes>,
    },
    /// v3 only: a reply with a status and no sub-message.
    Error {
        /// The request's operation.
        operation: OperationType,
        /// Result.
        status: StatusCode,
    },
}

impl Response {
    /// The v3 operation this reply answers.
    pub fn operation(&self) -> OperationType {
        match self {
            Response::AddEntry { .. } => OperationType::AddEntry,
            Response::ReadEntry { .. } => OperationType::ReadEntry,
            Response::BatchReadEntry { .. } => OperationType::BatchReadEntry,
            Response::Auth { .. } => OperationType::Auth,
            Response::WriteLac { .. } => OperationType::WriteLac,
            Response::ReadLac { .. } => OperationType::ReadLac,
            Response::GetBookieInfo { .. } => OperationType::GetBookieInfo,
            Response::StartTls { .. } => OperationType::StartTls,
            Response::ForceLedger { .. } => OperationType::ForceLedger,
            Response::GetListOfEntriesOfLedger { .. } => OperationType::GetListOfEntriesOfLedger,
            Response::Error { operation, .. } => *operation,
        }
    }

    /// This reply as a failure: the same kind of reply, with its ids, `status` and no data.
    /// For a reply prepared before the request failed (an add whose journal write failed);
    /// from the request itself, [`crate::Request::error_response`] gives the same reply.
    pub fn failed(&self, status: StatusCode) -> Response {
        let mut failed = match self {
            Response::ReadEntry {
                ledger_id,
                entry_id,
                ..
            } => Response::ReadEntry {
                status,
                ledger_id: *ledger_id,
                entry_id: *entry_id,
                body: None,
                max_lac: None,
                lac_update_timestamp: None,
            },
            Response::BatchReadEntry {
                ledger_id,
                start_entry_id,
                request_id,
                ..
            } => Response::BatchReadEntry {
                status,
                ledger_id: *ledger_id,
                start_entry_id: *start_entry_id,
                request_id: *request_id,
                entries: Vec::new(),
            },
            Response::ReadLac { ledger_id, .. } => Response::ReadLac {
                status,
                ledger_id: *ledger_id,
                lac_body: None,
                last_entry_body: None,
            },
            Response::GetBookieInfo { .. } => Response::GetBookieInfo {
                status,
                total_disk_capacity: None,
                free_disk_space: None,
            },
            Response::GetListOfEntriesOfLedger { ledger_id, .. } => {
                Response::GetListOfEntriesOfLedger {
                    status,
                    ledger_id: *ledger_id,
                    availability: None,
                }
            }
            Response::Auth { .. } | Response::StartTls { .. } => Response::Error {
                operation: self.operation(),
                status,
            },
            other => other.clone(),
        };
        failed.set_status(status);
        failed
    }

    fn set_status(&mut self, to: StatusCode) {
        match self {
            Response::AddEntry { status, .. }
            | Response::ReadEntry { status, .. }
            | Response::BatchReadEntry { status, .. }
            | Response::Auth { status, .. }
            | Response::WriteLac { status, .. }
            | Response::ReadLac { status, .. }
            | Response::GetBookieInfo { status, .. }
            | Response::StartTls { status }
            | Response::ForceLedger { status, .. }
            | Response::GetListOfEntriesOfLedger { status, .. }
            | Response::Error { status, .. } => *status = to,
        }
    }

    /// The reply's status.
    pub fn status(&self) -> StatusCode {
        match *self {
            Response::AddEntry { status, .. }
            | Response::ReadEntry { status, .. }
            | Response::BatchReadEntry { status, .. }
            | Response::Auth { status, .. }
            | Response::WriteLac { status, .. }
            | Response::ReadLac { status, .. }
            | Response::GetBookieInfo { status, .. }
            | Response::StartTls { status }
            | Response::ForceLedger { status, .. }
            | Response::GetListOfEntriesOfLedger { status, .. }
            | Response::Error { status, .. } => status,
        }
    }
}

/// One decoded or to-be-encoded response frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResponseFrame {
    /// Protocol and header fields.
    pub header: ResponseHeader,
    /// What the reply says.
    pub response: Response,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_keeps_the_ids_and_drops_the_data() {
        let read = Response::ReadEntry {
            status: StatusCode::EOK,
            ledger_id: 7,
            entry_id: 3,
            body: Some(Bytes::from_static(b"entry")),
            max_lac: Some(2),
            lac_update_timestamp: Some(1),
        };
        assert_eq!(
            read.failed(StatusCode::EIO),
            Response::ReadEntry {
                status: StatusCode::EIO,
                ledger_id: 7,
                entry_id: 3,
                body: None,
                max_lac: None,
                lac_update_timestamp: None,
            }
        );
        let add = Response::AddEntry {
            status: StatusCode::EOK,
            ledger_id: 7,
            entry_id: 4,
        };
        assert_eq!(add.failed(StatusCode::EIO).status(), StatusCode::EIO);
        assert_eq!(
            add.failed(StatusCode::EIO).operation(),
            OperationType::AddEntry
        );
        let auth = Response::Auth {
            status: StatusCode::EOK,
            message: AuthMessage {
                auth_plugin_name: Bytes::from_static(b"x"),
                payload: Bytes::new(),
            },
        };
        assert_eq!(
            auth.failed(StatusCode::EUA),
            Response::Error {
                operation: OperationType::Auth,
                status: StatusCode::EUA,
            }
        );
    }
}
