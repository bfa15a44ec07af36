//! v3 `Request` messages: parse (server side) and write (client side).
//!
//! The parser reads every known sub-message that is present, not only the one the
//! header's operation names, because protobuf-java validates the whole message:
//! an incomplete `addRequest` on a READ request fails the parse in Java too.

use bytes::{Bytes, BytesMut};

use super::field::{self, envelope};
use super::{check_context_pair, check_empty_message, required, AuthParts, Header, HeaderParts};
use crate::error::{EncodeError, ProtobufError};
use crate::operation::{OperationType, ProtocolVersion, ReadFlag};
use crate::protobuf::{self as pb, Reader, LEN, VARINT};
use crate::request::{Request, RequestFrame, RequestHeader};

/// `AddRequest.flag` value `RECOVERY_ADD`.
const ADD_FLAG_RECOVERY: i32 = 1;

#[derive(Default)]
struct ReadParts {
    ledger_id: Option<i64>,
    entry_id: Option<i64>,
    master_key: Option<Bytes>,
    previous_lac: Option<i64>,
    time_out: Option<i64>,
    flag: Option<ReadFlag>,
}

#[derive(Default)]
struct AddParts {
    ledger_id: Option<i64>,
    entry_id: Option<i64>,
    master_key: Option<Bytes>,
    body: Option<Bytes>,
    write_flags: Option<i32>,
    recovery: bool,
}

#[derive(Default)]
struct WriteLacParts {
    ledger_id: Option<i64>,
    lac: Option<i64>,
    master_key: Option<Bytes>,
    body: Option<Bytes>,
}

/// Every sub-message seen so far.
#[derive(Default)]
struct RequestParts {
    header: Option<HeaderParts>,
    read: Option<ReadParts>,
    add: Option<AddParts>,
    auth: Option<AuthParts>,
    write_lac: Option<WriteLacParts>,
    read_lac: Option<Option<i64>>,
    get_bookie_info: Option<Option<i64>>,
    start_tls: bool,
    force_ledger: Option<Option<i64>>,
    get_list: Option<Option<i64>>,
}

/// Parses one frame body as a v3 `Request`.
pub(crate) fn decode(body: &Bytes) -> Result<RequestFrame, ProtobufError> {
    let mut parts = RequestParts::default();
    let mut reader = Reader::new(body);
    while !reader.is_done() {
        let (number, wire_type) = reader.tag()?;
        if wire_type != LEN {
            reader.skip(number, wire_type)?;
            continue;
        }
        match number {
            envelope::HEADER => parts
                .header
                .get_or_insert_with(Default::default)
                .merge(reader.message()?)?,
            envelope::READ => merge_read(
                parts.read.get_or_insert_with(Default::default),
                reader.message()?,
            )?,
            envelope::ADD => merge_add(
                parts.add.get_or_insert_with(Default::default),
                reader.message()?,
            )?,
            envelope::AUTH => parts
                .auth
                .get_or_insert_with(Default::default)
                .merge(reader.message()?)?,
            envelope::WRITE_LAC => merge_write_lac(
                parts.write_lac.get_or_insert_with(Default::default),
                reader.message()?,
            )?,
            envelope::READ_LAC => {
                merge_ledger(parts.read_lac.get_or_insert(None), reader.message()?)?
            }
            envelope::GET_BOOKIE_INFO => {
                merge_ledger(parts.get_bookie_info.get_or_insert(None), reader.message()?)?
            }
            envelope::START_TLS => {
                check_empty_message(reader.message()?)?;
                parts.start_tls = true;
            }
            envelope::FORCE_LEDGER => {
                merge_ledger(parts.force_ledger.get_or_insert(None), reader.message()?)?
            }
            envelope::GET_LIST_OF_ENTRIES_OF_LEDGER => {
                merge_ledger(parts.get_list.get_or_insert(None), reader.message()?)?
            }
            envelope::REQUEST_CONTEXT => check_context_pair(reader.message()?)?,
            _ => reader.skip(number, wire_type)?,
        }
    }
    finish(parts)
}

fn merge_read(parts: &mut ReadParts, mut reader: Reader<'_>) -> Result<(), ProtobufError> {
    use field::read_request::*;
    while !reader.is_done() {
        let (number, wire_type) = reader.tag()?;
        match (number, wire_type) {
            (LEDGER_ID, VARINT) => parts.ledger_id = Some(reader.int64()?),
            (ENTRY_ID, VARINT) => parts.entry_id = Some(reader.int64()?),
            (MASTER_KEY, LEN) => parts.master_key = Some(reader.bytes()?),
            (PREVIOUS_LAC, VARINT) => parts.previous_lac = Some(reader.int64()?),
            (TIME_OUT, VARINT) => parts.time_out = Some(reader.int64()?),
            (FLAG, VARINT) => {
                if let Some(flag) = ReadFlag::from_code(reader.int32()?) {
                    parts.flag = Some(flag);
                }
            }
            _ => reader.skip(number, wire_type)?,
        }
    }
    Ok(())
}

fn merge_add(parts: &mut AddParts, mut reader: Reader<'_>) -> Result<(), ProtobufError> {
    use field::add_request::*;
    while !reader.is_done() {
        let (number, wire_type) = reader.tag()?;
        match (number, wire_type) {
            (LEDGER_ID, VARINT) => parts.ledger_id = Some(reader.int64()?),
            (ENTRY_ID, VARINT) => parts.entry_id = Some(reader.int64()?),
            (MASTER_KEY, LEN) => parts.master_key = Some(reader.bytes()?),
            (BODY, LEN) => parts.body = Some(reader.bytes()?),
            (WRITE_FLAGS, VARINT) => parts.write_flags = Some(reader.int32()?),
            (FLAG, VARINT) => {
                // RECOVERY_ADD is the enum's only value; others are unknown fields.
                if reader.int32()? == ADD_FLAG_RECOVERY {
                    parts.recovery = true;
                }
            }
            _ => reader.skip(number, wire_type)?,
        }
    }
    Ok(())
}

fn merge_write_lac(parts: &mut WriteLacParts, mut reader: Reader<'_>) -> Result<(), ProtobufError> {
    use field::write_lac_request::*;
    while !reader.is_done() {
        let (number, wire_type) = reader.tag()?;
        match (number, wire_type) {
            (LEDGER_ID, VARINT) => parts.ledger_id = Some(reader.int64()?),
            (LAC, VARINT) => parts.lac = Some(reader.int64()?),
            (MASTER_KEY, LEN) => parts.master_key = Some(reader.bytes()?),
            (BODY, LEN) => parts.body = Some(reader.bytes()?),
            _ => reader.skip(number, wire_type)?,
        }
    }
    Ok(())
}

/// Merges a message whose only field is an `int64` numbered 1 (`ledgerId` of
/// ReadLac/ForceLedger/GetList requests, `requested` of GetBookieInfoRequest).
fn merge_ledger(value: &mut Option<i64>, mut reader: Reader<'_>) -> Result<(), ProtobufError> {
    while !reader.is_done() {
        let (number, wire_type) = reader.tag()?;
        match (number, wire_type) {
            (field::ledger_request::LEDGER_ID, VARINT) => *value = Some(reader.int64()?),
            _ => reader.skip(number, wire_type)?,
        }
    }
    Ok(())
}

/// Checks required fields everywhere, then builds the request the header's
/// operation names.
fn finish(parts: RequestParts) -> Result<RequestFrame, ProtobufError> {
    let header = required(parts.header, "Request.header")?.finish()?;
    // protobuf-java validates every present sub-message, used or not.
    let read = parts.read.map(finish_read).transpose()?;
    let add = parts.add.map(finish_add).transpose()?;
    let auth = parts.auth.map(AuthParts::finish).transpose()?;
    let write_lac = parts.write_lac.map(finish_write_lac).transpose()?;
    let read_lac = parts
        .read_lac
        .map(|id| required(id, "ReadLacRequest.ledgerId"))
        .transpose()?;
    let force_ledger = parts
        .force_ledger
        .map(|id| required(id, "ForceLedgerRequest.ledgerId"))
        .transpose()?;
    let get_list = parts
        .get_list
        .map(|id| required(id, "GetListOfEntriesOfLedgerRequest.ledgerId"))
        .transpose()?;

    let request = match header.operation {
        OperationType::ReadEntry => read,
        OperationType::AddEntry => add,
        OperationType::Auth => auth.map(Request::Auth),
        OperationType::WriteLac => write_lac,
        OperationType::ReadLac => read_lac.map(|ledger_id| Request::ReadLac { ledger_id }),
        OperationType::GetBookieInfo => parts
            .get_bookie_info
            .map(|requested| Request::GetBookieInfo { requested }),
        OperationType::StartTls => parts.start_tls.then_some(Request::StartTls),
        OperationType::ForceLedger => {
            force_ledger.map(|ledger_id| Request::ForceLedger { ledger_id })
        }
        OperationType::GetListOfEntriesOfLedger => {
            get_list.map(|ledger_id| Request::GetListOfEntriesOfLedger { ledger_id })
        }
        OperationType::RangeReadEntry
        | OperationType::RangeAddEntry
        | OperationType::BatchReadEntry => None,
    }
    .unwrap_or(Request::Unsupported {
        operation: header.operation,
    });
    Ok(RequestFrame {
        header: RequestHeader::V3 {
            version: header.version,
            txn_id: header.txn_id,
            priority: header.priority,
        },
        request,
    })
}

fn finish_read(parts: ReadParts) -> Result<Request, ProtobufError> {
    Ok(Request::ReadEntry {
        ledger_id: required(parts.ledger_id, "ReadRequest.ledgerId")?,
        entry_id: required(parts.entry_id, "ReadRequest.entryId")?,
        master_key: parts.master_key,
        flag: parts.flag,
        previous_lac: parts.previous_lac,
        time_out: parts.time_out,
    })
}

fn finish_add(parts: AddParts) -> Result<Request, ProtobufError> {
    Ok(Request::AddEntry {
        ledger_id: required(parts.ledger_id, "AddRequest.ledgerId")?,
        entry_id: required(parts.entry_id, "AddRequest.entryId")?,
        master_key: required(parts.master_key, "AddRequest.masterKey")?,
        body: required(parts.body, "AddRequest.body")?,
        recovery: parts.recovery,
        write_flags: parts.write_flags,
    })
}

fn finish_write_lac(parts: WriteLacParts) -> Result<Request, ProtobufError> {
    Ok(Request::WriteLac {
        ledger_id: required(parts.ledger_id, "WriteLacRequest.ledgerId")?,
        lac: required(parts.lac, "WriteLacRequest.lac")?,
        master_key: required(parts.master_key, "WriteLacRequest.masterKey")?,
        body: required(parts.body, "WriteLacRequest.body")?,
    })
}

/// Writes `request` as the body of a v3 frame (no length prefix).
pub(crate) fn encode(
    version: ProtocolVersion,
    txn_id: u64,
    priority: Option<u32>,
    request: &Request,
    out: &mut BytesMut,
) -> Result<(), EncodeError> {
    let header = Header {
        version,
        operation: request.operation(),
        txn_id,
        priority,
    };
    let sub_message = match request {
        Request::BatchReadEntry { .. } => return Err(EncodeError::NotInV3("BATCH_READ_ENTRY")),
        Request::Unsupported { .. } => None,
        _ => Some(sub_message_field(request)),
    };
    let content_len = sub_message.map_or(0, |(_, len)| len);
    out.reserve(
        header.field_len() + sub_message.map_or(0, |(number, len)| pb::len_field_len(number, len)),
    );
    header.put(out);
    if let Some((number, _)) = sub_message {
        pb::put_len_header(out, number, content_len);
        put_sub_message(request, out);
    }
    Ok(())
}

/// The field number and content length of the request's sub-message.
fn sub_message_field(request: &Request) -> (u32, usize) {
    match request {
        Request::AddEntry {
            ledger_id,
            entry_id,
            master_key,
            body,
            recovery,
            write_flags,
        } => {
            use field::add_request::*;
            let len = pb::int64_field_len(LEDGER_ID, *ledger_id)
                + pb::int64_field_len(ENTRY_ID, *entry_id)
                + pb::len_field_len(MASTER_KEY, master_key.len())
                + pb::len_field_len(BODY, body.len())
                + write_flags.map_or(0, |flags| pb::int32_field_len(WRITE_FLAGS, flags))
                + if *recovery {
                    pb::int32_field_len(FLAG, ADD_FLAG_RECOVERY)
                } else {
                    0
                };
            (envelope::ADD, len)
        }
        Request::ReadEntry {
            ledger_id,
            entry_id,
            master_key,
            flag,
            previous_lac,
            time_out,
        } => {
            use field::read_request::*;
            let len = pb::int64_field_len(LEDGER_ID, *ledger_id)
                + pb::int64_field_len(ENTRY_ID, *entry_id)
                + master_key
                    .as_ref()
                    .map_or(0, |key| pb::len_field_len(MASTER_KEY, key.len()))
                + previous_lac.map_or(0, |lac| pb::int64_field_len(PREVIOUS_LAC, lac))
                + time_out.map_or(0, |t| pb::int64_field_len(TIME_OUT, t))
                + flag.map_or(0, |f| pb::int32_field_len(FLAG, f.code()));
            (envelope::READ, len)
        }
        Request::Auth(message) => (envelope::AUTH, super::auth_content_len(message)),
        Request::WriteLac {
            ledger_id,
            lac,
            master_key,
            body,
        } => {
            use field::write_lac_request::*;
            let len = pb::int64_field_len(LEDGER_ID, *ledger_id)
                + pb::int64_field_len(LAC, *lac)
                + pb::len_field_len(MASTER_KEY, master_key.len())
                + pb::len_field_len(BODY, body.len());
            (envelope::WRITE_LAC, len)
        }
        Request::ReadLac { ledger_id } => (envelope::READ_LAC, pb::int64_field_len(1, *ledger_id)),
        Request::GetBookieInfo { requested } => (
            envelope::GET_BOOKIE_INFO,
            requested.map_or(0, |r| pb::int64_field_len(1, r)),
        ),
        Request::StartTls => (envelope::START_TLS, 0),
        Request::ForceLedger { ledger_id } => {
            (envelope::FORCE_LEDGER, pb::int64_field_len(1, *ledger_id))
        }
        Request::GetListOfEntriesOfLedger { ledger_id } => (
            envelope::GET_LIST_OF_ENTRIES_OF_LEDGER,
            pb::int64_field_len(1, *ledger_id),
        ),
        Request::BatchReadEntry { .. } | Request::Unsupported { .. } => (0, 0),
    }
}

/// Writes the content of the request's sub-message, fields in number order.
fn put_sub_message(request: &Request, out: &mut BytesMut) {
    match request {
        Request::AddEntry {
            ledger_id,
            entry_id,
            master_key,
            body,
            recovery,
            write_flags,
        } => {
            use field::add_request::*;
            pb::put_int64_field(out, LEDGER_ID, *ledger_id);
            pb::put_int64_field(out, ENTRY_ID, *entry_id);
            pb::put_bytes_field(out, MASTER_KEY, master_key);
            pb::put_bytes_field(out, BODY, body);
            if let Some(flags) = write_flags {
                pb::put_int32_field(out, WRITE_FLAGS, *flags);
            }
            if *recovery {
                pb::put_int32_field(out, FLAG, ADD_FLAG_RECOVERY);
            }
        }
        Request::ReadEntry {
            ledger_id,
            entry_id,
            master_key,
            flag,
            previous_lac,
            time_out,
        } => {
            use field::read_request::*;
            pb::put_int64_field(out, LEDGER_ID, *ledger_id);
            pb::put_int64_field(out, ENTRY_ID, *entry_id);
            if let Some(key) = master_key {
                pb::put_bytes_field(out, MASTER_KEY, key);
            }
            if let Some(lac) = previous_lac {
                pb::put_int64_field(out, PREVIOUS_LAC, *lac);
            }
            if let Some(t) = time_out {
                pb::put_int64_field(out, TIME_OUT, *t);
            }
            if let Some(f) = flag {
                pb::put_int32_field(out, FLAG, f.code());
            }
        }
        Request::Auth(message) => super::put_auth_content(out, message),
        Request::WriteLac {
            ledger_id,
            lac,
            master_key,
            body,
        } => {
            use field::write_lac_request::*;
            pb::put_int64_field(out, LEDGER_ID, *ledger_id);
            pb::put_int64_field(out, LAC, *lac);
            pb::put_bytes_field(out, MASTER_KEY, master_key);
            pb::put_bytes_field(out, BODY, body);
        }
        Request::ReadLac { ledger_id }
        | Request::ForceLedger { ledger_id }
        | Request::GetListOfEntriesOfLedger { ledger_id } => {
            pb::put_int64_field(out, field::ledger_request::LEDGER_ID, *ledger_id);
        }
        Request::GetBookieInfo { requested } => {
            if let Some(requested) = requested {
                pb::put_int64_field(out, field::get_bookie_info_request::REQUESTED, *requested);
            }
        }
        Request::StartTls | Request::BatchReadEntry { .. } | Request::Unsupported { .. } => {}
    }
}
