//! v2 responses: write (server side) and parse (client side,
//! `ResponseEnDeCoderPreV3.decode`).
//!
//! Layouts after the header word, which carries the request's version byte, the
//! request's opcode and flags 0 (docs/protocol.md §2.6, §2.8, §2.10, §2.11):
//! * ADDENTRY: rc (4) | ledgerId (8) | entryId (8)
//! * READENTRY: rc (4) | ledgerId (8) | entryId (8) | entry (rest, on EOK)
//! * BATCH_READ_ENTRY: rc (4) | ledgerId (8) | startEntryId (8) | requestId (8) |
//!   then `[len (4) | entry (len)]` to the end
//! * AUTH: an `AuthMessage` protobuf (the rest); there is no rc

use bytes::{BufMut, Bytes, BytesMut};

use super::{header_word, Cursor, HeaderWord};
use crate::error::{EncodeError, ProtocolError};
use crate::operation::opcode;
use crate::protobuf::Reader;
use crate::response::{Response, ResponseFrame, ResponseHeader};
use crate::status::StatusCode;
use crate::v3::AuthParts;

/// Parses one frame body as a v2 response.
pub(crate) fn decode(body: &Bytes) -> Result<ResponseFrame, ProtocolError> {
    let word = header_word(body)?;
    let mut cursor = Cursor::new(body, 4, word.opcode);
    let response = match word.opcode {
        opcode::ADD_ENTRY => Response::AddEntry {
            status: status(cursor.i32()?)?,
            ledger_id: cursor.i64()?,
            entry_id: cursor.i64()?,
        },
        opcode::READ_ENTRY => {
            let status = status(cursor.i32()?)?;
            let ledger_id = cursor.i64()?;
            let entry_id = cursor.i64()?;
            let rest = body.slice(cursor.position()..);
            Response::ReadEntry {
                status,
                ledger_id,
                entry_id,
                body: (!rest.is_empty()).then_some(rest),
                max_lac: None,
                lac_update_timestamp: None,
            }
        }
        opcode::BATCH_READ_ENTRY => {
            let status = status(cursor.i32()?)?;
            let ledger_id = cursor.i64()?;
            let start_entry_id = cursor.i64()?;
            let request_id = cursor.i64()?;
            let mut entries = Vec::new();
            while cursor.remaining() > 0 {
                let length = cursor.i32()?;
                let length = usize::try_from(length).map_err(|_| ProtocolError::TruncatedV2 {
                    opcode: opcode::BATCH_READ_ENTRY,
                })?;
                let (start, end) = cursor.take(length)?;
                entries.push(body.slice(start..end));
            }
            Response::BatchReadEntry {
                status,
                ledger_id,
                start_entry_id,
                request_id,
                entries,
            }
        }
        opcode::AUTH => {
            let message = body.slice(4..);
            let mut parts = AuthParts::default();
            parts.merge(Reader::new(&message))?;
            Response::Auth {
                status: StatusCode::EOK,
                message: parts.finish()?,
            }
        }
        other => return Err(ProtocolError::UnknownV2Opcode(other)),
    };
    Ok(ResponseFrame {
        header: ResponseHeader::V2 {
            version: word.version,
        },
        response,
    })
}

fn status(rc: i32) -> Result<StatusCode, ProtocolError> {
    StatusCode::from_v2_rc(rc).ok_or(ProtocolError::UnknownV2Status(rc))
}

/// Writes `response` as the body of a v2 frame (no length prefix).
pub(crate) fn encode(
    version: u8,
    response: &Response,
    out: &mut BytesMut,
) -> Result<(), EncodeError> {
    let word = |opcode: u8| {
        HeaderWord {
            version,
            opcode,
            flags: 0,
        }
        .pack()
    };
    match response {
        Response::AddEntry {
            status,
            ledger_id,
            entry_id,
        } => {
            out.reserve(24);
            out.put_u32(word(opcode::ADD_ENTRY));
            out.put_i32(status.v2_rc());
            out.put_i64(*ledger_id);
            out.put_i64(*entry_id);
        }
        Response::ReadEntry {
            status,
            ledger_id,
            entry_id,
            body,
            max_lac,
            lac_update_timestamp,
        } => {
            if max_lac.is_some() || lac_update_timestamp.is_some() {
                return Err(EncodeError::NotInV2(
                    "ReadResponse.maxLAC / lacUpdateTimestamp",
                ));
            }
            out.reserve(24 + body.as_ref().map_or(0, Bytes::len));
            out.put_u32(word(opcode::READ_ENTRY));
            out.put_i32(status.v2_rc());
            out.put_i64(*ledger_id);
            out.put_i64(*entry_id);
            if let Some(body) = body {
                out.put_slice(body);
            }
        }
        Response::BatchReadEntry {
            status,
            ledger_id,
            start_entry_id,
            request_id,
            entries,
        } => {
            out.reserve(32 + entries.iter().map(|e| 4 + e.len()).sum::<usize>());
            out.put_u32(word(opcode::BATCH_READ_ENTRY));
            out.put_i32(status.v2_rc());
            out.put_i64(*ledger_id);
            out.put_i64(*start_entry_id);
            out.put_i64(*request_id);
            for entry in entries {
                let length = i32::try_from(entry.len())
                    .map_err(|_| EncodeError::BadV2Field("batch entry longer than 2 GiB"))?;
                out.put_i32(length);
                out.put_slice(entry);
            }
        }
        Response::Auth { status, message } => {
            if !status.is_ok() {
                return Err(EncodeError::NotInV2(
                    "AUTH reply with an error status (close instead)",
                ));
            }
            out.put_u32(word(opcode::AUTH));
            crate::v3::put_auth_content(out, message);
        }
        Response::WriteLac { .. } => return Err(EncodeError::NotInV2("WRITE_LAC")),
        Response::ReadLac { .. } => return Err(EncodeError::NotInV2("READ_LAC")),
        Response::GetBookieInfo { .. } => return Err(EncodeError::NotInV2("GET_BOOKIE_INFO")),
        Response::StartTls { .. } => return Err(EncodeError::NotInV2("START_TLS")),
        Response::ForceLedger { .. } => return Err(EncodeError::NotInV2("FORCE_LEDGER")),
        Response::GetListOfEntriesOfLedger { .. } => {
            return Err(EncodeError::NotInV2("GET_LIST_OF_ENTRIES_OF_LEDGER"))
        }
        Response::Error { .. } => return Err(EncodeError::NotInV2("a reply without ids")),
    }
    Ok(())
}
