//! v2 requests: parse (server side, `RequestEnDeCoderPreV3.decode`) and write
//! (client side).
//!
//! Layouts after the header word (docs/protocol.md §2.5, §2.7, §2.9, §2.11):
//! * ADDENTRY: master key (20) | entry (rest; its first 16 bytes are the ids)
//! * READENTRY: ledgerId (8) | entryId (8) | master key (20, only with
//!   FLAG_DO_FENCING and version >= 2); anything else after is ignored
//! * BATCH_READ_ENTRY: ledgerId (8) | startEntryId (8) | requestId (8) |
//!   maxCount (4) | maxSize (8) | master key (as for READENTRY)
//! * AUTH: an `AuthMessage` protobuf (the rest)

use bytes::{BufMut, Bytes, BytesMut};

use super::{header_word, Cursor, HeaderWord};
use crate::error::{EncodeError, ProtocolError};
use crate::operation::{flag, opcode, ReadFlag, MASTER_KEY_LENGTH};
use crate::protobuf::Reader;
use crate::request::{Request, RequestFrame, RequestHeader};
use crate::v3::AuthParts;

/// Bytes of the ids at the start of every entry.
const ENTRY_ID_PREFIX: usize = 16;

/// Parses one frame body as a v2 request.
pub(crate) fn decode(body: &Bytes) -> Result<RequestFrame, ProtocolError> {
    let word = header_word(body)?;
    let fence = word.flags & flag::DO_FENCING != 0;
    // The version byte is a Java `byte`: 0x80..0xFF are negative.
    let key_allowed = word.version as i8 >= 2;
    let mut cursor = Cursor::new(body, 4, word.opcode);
    let request = match word.opcode {
        opcode::ADD_ENTRY => {
            let (key_start, key_end) = cursor.take(MASTER_KEY_LENGTH)?;
            let entry_start = cursor.position();
            // The ids are read without being consumed: they stay part of the entry.
            let ledger_id = cursor.i64()?;
            let entry_id = cursor.i64()?;
            Request::AddEntry {
                ledger_id,
                entry_id,
                master_key: body.slice(key_start..key_end),
                body: body.slice(entry_start..),
                recovery: word.flags & flag::RECOVERY_ADD != 0,
                write_flags: None,
            }
        }
        opcode::READ_ENTRY => {
            let ledger_id = cursor.i64()?;
            let entry_id = cursor.i64()?;
            let master_key = read_fence_key(&mut cursor, body, fence && key_allowed)?;
            Request::ReadEntry {
                ledger_id,
                entry_id,
                master_key,
                flag: fence.then_some(ReadFlag::FenceLedger),
                previous_lac: None,
                time_out: None,
            }
        }
        opcode::BATCH_READ_ENTRY => {
            let ledger_id = cursor.i64()?;
            let start_entry_id = cursor.i64()?;
            let request_id = cursor.i64()?;
            let max_count = cursor.i32()?;
            let max_size = cursor.i64()?;
            let master_key = read_fence_key(&mut cursor, body, fence && key_allowed)?;
            Request::BatchReadEntry {
                ledger_id,
                start_entry_id,
                request_id,
                max_count,
                max_size,
                fence,
                master_key,
            }
        }
        opcode::AUTH => {
            let message = body.slice(4..);
            let mut parts = AuthParts::default();
            parts.merge(Reader::new(&message))?;
            Request::Auth(parts.finish()?)
        }
        other => return Err(ProtocolError::UnknownV2Opcode(other)),
    };
    let priority_applies = word.opcode != opcode::AUTH;
    Ok(RequestFrame {
        header: RequestHeader::V2 {
            version: word.version,
            high_priority: priority_applies && word.flags & flag::HIGH_PRIORITY != 0,
        },
        request,
    })
}

fn read_fence_key(
    cursor: &mut Cursor<'_>,
    body: &Bytes,
    present: bool,
) -> Result<Option<Bytes>, ProtocolError> {
    if !present {
        return Ok(None);
    }
    let (start, end) = cursor.take(MASTER_KEY_LENGTH)?;
    Ok(Some(body.slice(start..end)))
}

/// Writes `request` as the body of a v2 frame (no length prefix).
pub(crate) fn encode(
    version: u8,
    high_priority: bool,
    request: &Request,
    out: &mut BytesMut,
) -> Result<(), EncodeError> {
    let priority = if high_priority {
        flag::HIGH_PRIORITY
    } else {
        0
    };
    let key_allowed = version as i8 >= 2;
    let word = |opcode: u8, flags: u16| -> Result<u32, EncodeError> {
        if version == 0 && flags != 0 {
            return Err(EncodeError::BadV2Field(
                "legacy version 0 cannot carry flags",
            ));
        }
        Ok(HeaderWord {
            version,
            opcode,
            flags,
        }
        .pack())
    };
    match request {
        Request::AddEntry {
            ledger_id,
            entry_id,
            master_key,
            body,
            recovery,
            write_flags,
        } => {
            if write_flags.is_some() {
                return Err(EncodeError::NotInV2("AddRequest.writeFlags"));
            }
            check_key(master_key)?;
            let ids_match = body.len() >= ENTRY_ID_PREFIX
                && body[..8] == ledger_id.to_be_bytes()
                && body[8..16] == entry_id.to_be_bytes();
            if !ids_match {
                return Err(EncodeError::BadV2Field(
                    "entry must start with its ledger and entry ids",
                ));
            }
            let flags = priority | if *recovery { flag::RECOVERY_ADD } else { 0 };
            out.reserve(4 + MASTER_KEY_LENGTH + body.len());
            out.put_u32(word(opcode::ADD_ENTRY, flags)?);
            out.put_slice(master_key);
            out.put_slice(body);
        }
        Request::ReadEntry {
            ledger_id,
            entry_id,
            master_key,
            flag: read_flag,
            previous_lac,
            time_out,
        } => {
            if previous_lac.is_some()
                || time_out.is_some()
                || *read_flag == Some(ReadFlag::EntryPiggyback)
            {
                return Err(EncodeError::NotInV2("long-poll read"));
            }
            let fence = *read_flag == Some(ReadFlag::FenceLedger);
            let flags = priority | if fence { flag::DO_FENCING } else { 0 };
            out.put_u32(word(opcode::READ_ENTRY, flags)?);
            out.put_i64(*ledger_id);
            out.put_i64(*entry_id);
            put_fence_key(out, master_key, fence && key_allowed)?;
        }
        Request::BatchReadEntry {
            ledger_id,
            start_entry_id,
            request_id,
            max_count,
            max_size,
            fence,
            master_key,
        } => {
            let flags = priority | if *fence { flag::DO_FENCING } else { 0 };
            out.put_u32(word(opcode::BATCH_READ_ENTRY, flags)?);
            out.put_i64(*ledger_id);
            out.put_i64(*start_entry_id);
            out.put_i64(*request_id);
            out.put_i32(*max_count);
            out.put_i64(*max_size);
            put_fence_key(out, master_key, *fence && key_allowed)?;
        }
        Request::Auth(message) => {
            if high_priority {
                return Err(EncodeError::BadV2Field("AUTH carries no priority"));
            }
            out.put_u32(word(opcode::AUTH, 0)?);
            crate::v3::put_auth_content(out, message);
        }
        Request::WriteLac { .. } => return Err(EncodeError::NotInV2("WRITE_LAC")),
        Request::ReadLac { .. } => return Err(EncodeError::NotInV2("READ_LAC")),
        Request::GetBookieInfo { .. } => return Err(EncodeError::NotInV2("GET_BOOKIE_INFO")),
        Request::StartTls => return Err(EncodeError::NotInV2("START_TLS")),
        Request::ForceLedger { .. } => return Err(EncodeError::NotInV2("FORCE_LEDGER")),
        Request::GetListOfEntriesOfLedger { .. } => {
            return Err(EncodeError::NotInV2("GET_LIST_OF_ENTRIES_OF_LEDGER"))
        }
        Request::Unsupported { .. } => return Err(EncodeError::NotInV2("unsupported operation")),
    }
    Ok(())
}

fn check_key(key: &[u8]) -> Result<(), EncodeError> {
    if key.len() != MASTER_KEY_LENGTH {
        return Err(EncodeError::BadV2Field("master key must be 20 bytes"));
    }
    Ok(())
}

/// Writes the master key of a fence read; the key must be present exactly when the
/// wire carries it (fence flag and version >= 2), so decoding gives the value back.
fn put_fence_key(
    out: &mut BytesMut,
    key: &Option<Bytes>,
    present: bool,
) -> Result<(), EncodeError> {
    match (key, present) {
        (Some(key), true) => {
            check_key(key)?;
            out.put_slice(key);
            Ok(())
        }
        (None, false) => Ok(()),
        (None, true) => Err(EncodeError::BadV2Field(
            "a v2 fence read needs a master key",
        )),
        (Some(_), false) => Err(EncodeError::BadV2Field(
            "v2 carries a master key only on fence reads with version >= 2",
        )),
    }
}
