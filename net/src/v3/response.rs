//! v3 `Response` messages: write (server side) and parse (client side).
//!
//! Every required field is written whatever its value: `Response.status` (`10 00`
//! for EOK), each sub-response's `status`, `ledgerId` and `entryId`. This is the
//! trap of docs/protocol.md §9 item 1.

use bytes::{Bytes, BytesMut};

use super::field::{self, envelope};
use super::{check_empty_message, required, AuthParts, Header, HeaderParts};
use crate::error::{EncodeError, ProtobufError};
use crate::operation::{OperationType, ProtocolVersion};
use crate::protobuf::{self as pb, Reader, LEN, VARINT};
use crate::response::{Response, ResponseFrame, ResponseHeader};
use crate::status::StatusCode;

/// The fields every sub-response may have. Sub-responses differ only in which of
/// these numbers they use and which are required, so one parts type serves all.
#[derive(Default)]
struct SubParts {
    status: Option<StatusCode>,
    /// Varint field 2: `ledgerId`, or GetBookieInfoResponse's `totalDiskCapacity`.
    ledger_id: Option<i64>,
    /// Varint field 3: `entryId`, or GetBookieInfoResponse's `freeDiskSpace`.
    field3_varint: Option<i64>,
    /// Length-delimited field 3: `lacBody` or `availabilityOfEntriesOfLedger`.
    field3_bytes: Option<Bytes>,
    /// Length-delimited field 4: `body` or `lastEntryBody`.
    field4_bytes: Option<Bytes>,
    /// Varint field 5: ReadResponse `maxLAC`.
    field5_varint: Option<i64>,
    /// Varint field 6: ReadResponse `lacUpdateTimestamp`.
    field6_varint: Option<i64>,
}

impl SubParts {
    fn merge(&mut self, mut reader: Reader<'_>) -> Result<(), ProtobufError> {
        while !reader.is_done() {
            let (number, wire_type) = reader.tag()?;
            match (number, wire_type) {
                (1, VARINT) => {
                    if let Some(status) = StatusCode::from_v3_code(reader.int32()?) {
                        self.status = Some(status);
                    }
                }
                (2, VARINT) => self.ledger_id = Some(reader.int64()?),
                (3, VARINT) => self.field3_varint = Some(reader.int64()?),
                (3, LEN) => self.field3_bytes = Some(reader.bytes()?),
                (4, LEN) => self.field4_bytes = Some(reader.bytes()?),
                (5, VARINT) => self.field5_varint = Some(reader.int64()?),
                (6, VARINT) => self.field6_varint = Some(reader.int64()?),
                _ => reader.skip(number, wire_type)?,
            }
        }
        Ok(())
    }
}

#[derive(Default)]
struct ResponseParts {
    header: Option<HeaderParts>,
    status: Option<StatusCode>,
    subs: [Option<SubParts>; 9],
    auth: Option<AuthParts>,
    start_tls: bool,
}

/// Index in `ResponseParts::subs` of a sub-response field number (100..=108).
fn sub_index(number: u32) -> usize {
    (number - envelope::READ) as usize
}

/// Parses one frame body as a v3 `Response`.
pub(crate) fn decode(body: &Bytes) -> Result<ResponseFrame, ProtobufError> {
    let mut parts = ResponseParts::default();
    let mut reader = Reader::new(body);
    while !reader.is_done() {
        let (number, wire_type) = reader.tag()?;
        match (number, wire_type) {
            (envelope::HEADER, LEN) => parts
                .header
                .get_or_insert_with(Default::default)
                .merge(reader.message()?)?,
            (envelope::STATUS, VARINT) => {
                if let Some(status) = StatusCode::from_v3_code(reader.int32()?) {
                    parts.status = Some(status);
                }
            }
            (envelope::AUTH, LEN) => parts
                .auth
                .get_or_insert_with(Default::default)
                .merge(reader.message()?)?,
            (envelope::START_TLS, LEN) => {
                check_empty_message(reader.message()?)?;
                parts.start_tls = true;
            }
            (envelope::READ..=envelope::GET_LIST_OF_ENTRIES_OF_LEDGER, LEN) => parts.subs
                [sub_index(number)]
            .get_or_insert_with(Default::default)
            .merge(reader.message()?)?,
            _ => reader.skip(number, wire_type)?,
        }
    }
    finish(parts)
}

/// The status a Java client acts on: the outer one unless it is EOK.
fn effective(outer: StatusCode, inner: StatusCode) -> StatusCode {
    if outer.is_ok() {
        inner
    } else {
        outer
    }
}

fn finish(mut parts: ResponseParts) -> Result<ResponseFrame, ProtobufError> {
    let header = required(parts.header.take(), "Response.header")?.finish()?;
    let status = required(parts.status, "Response.status")?;
    // Validate the required fields of every present sub-response.
    let mut checked: [Option<Response>; 9] = Default::default();
    for (index, sub) in parts.subs.iter_mut().enumerate() {
        if let Some(sub) = sub.take() {
            checked[index] = finish_sub(envelope::READ + index as u32, sub, status)?;
        }
    }
    let auth = parts.auth.take().map(AuthParts::finish).transpose()?;
    let field = match header.operation {
        OperationType::ReadEntry => Some(envelope::READ),
        OperationType::AddEntry => Some(envelope::ADD),
        OperationType::WriteLac => Some(envelope::WRITE_LAC),
        OperationType::ReadLac => Some(envelope::READ_LAC),
        OperationType::GetBookieInfo => Some(envelope::GET_BOOKIE_INFO),
        OperationType::ForceLedger => Some(envelope::FORCE_LEDGER),
        OperationType::GetListOfEntriesOfLedger => Some(envelope::GET_LIST_OF_ENTRIES_OF_LEDGER),
        _ => None,
    };
    let response = match header.operation {
        OperationType::Auth => auth.map(|message| Response::Auth { status, message }),
        OperationType::StartTls => parts.start_tls.then_some(Response::StartTls { status }),
        _ => field.and_then(|number| checked[sub_index(number)].take()),
    }
    .unwrap_or(Response::Error {
        operation: header.operation,
        status,
    });
    Ok(ResponseFrame {
        header: ResponseHeader::V3 {
            version: header.version,
            txn_id: header.txn_id,
            priority: header.priority,
        },
        response,
    })
}

/// Checks one sub-response and turns it into a [`Response`]; AUTH and START_TLS
/// (102, 106) are parsed elsewhere and give `None` here.
fn finish_sub(
    number: u32,
    sub: SubParts,
    outer: StatusCode,
) -> Result<Option<Response>, ProtobufError> {
    Ok(Some(match number {
        envelope::READ => Response::ReadEntry {
            status: effective(outer, required(sub.status, "ReadResponse.status")?),
            ledger_id: required(sub.ledger_id, "ReadResponse.ledgerId")?,
            entry_id: required(sub.field3_varint, "ReadResponse.entryId")?,
            body: sub.field4_bytes,
            max_lac: sub.field5_varint,
            lac_update_timestamp: sub.field6_varint,
        },
        envelope::ADD => Response::AddEntry {
            status: effective(outer, required(sub.status, "AddResponse.status")?),
            ledger_id: required(sub.ledger_id, "AddResponse.ledgerId")?,
            entry_id: required(sub.field3_varint, "AddResponse.entryId")?,
        },
        envelope::WRITE_LAC => Response::WriteLac {
            status: effective(outer, required(sub.status, "WriteLacResponse.status")?),
            ledger_id: required(sub.ledger_id, "WriteLacResponse.ledgerId")?,
        },
        envelope::READ_LAC => Response::ReadLac {
            status: effective(outer, required(sub.status, "ReadLacResponse.status")?),
            ledger_id: required(sub.ledger_id, "ReadLacResponse.ledgerId")?,
            lac_body: sub.field3_bytes,
            last_entry_body: sub.field4_bytes,
        },
        envelope::GET_BOOKIE_INFO => Response::GetBookieInfo {
            status: effective(outer, required(sub.status, "GetBookieInfoResponse.status")?),
            total_disk_capacity: sub.ledger_id,
            free_disk_space: sub.field3_varint,
        },
        envelope::FORCE_LEDGER => Response::ForceLedger {
            status: effective(outer, required(sub.status, "ForceLedgerResponse.status")?),
            ledger_id: required(sub.ledger_id, "ForceLedgerResponse.ledgerId")?,
        },
        envelope::GET_LIST_OF_ENTRIES_OF_LEDGER => Response::GetListOfEntriesOfLedger {
            status: effective(
                outer,
                required(sub.status, "GetListOfEntriesOfLedgerResponse.status")?,
            ),
            ledger_id: required(sub.ledger_id, "GetListOfEntriesOfLedgerResponse.ledgerId")?,
            availability: sub.field3_bytes,
        },
        _ => return Ok(None),
    }))
}

/// Writes `response` as the body of a v3 frame (no length prefix).
pub(crate) fn encode(
    version: ProtocolVersion,
    txn_id: u64,
    priority: Option<u32>,
    response: &Response,
    out: &mut BytesMut,
) -> Result<(), EncodeError> {
    if let Response::BatchReadEntry { .. } = response {
        return Err(EncodeError::NotInV3("BATCH_READ_ENTRY"));
    }
    let header = Header {
        version,
        operation: response.operation(),
        txn_id,
        priority,
    };
    let status = response.status();
    let sub_message = sub_message_field(response);
    out.reserve(
        header.field_len()
            + pb::int32_field_len(envelope::STATUS, status.v3_code())
            + sub_message.map_or(0, |(number, len)| pb::len_field_len(number, len)),
    );
    header.put(out);
    pb::put_int32_field(out, envelope::STATUS, status.v3_code());
    if let Some((number, len)) = sub_message {
        pb::put_len_header(out, number, len);
        put_sub_message(response, out);
    }
    Ok(())
}

fn status_len(status: StatusCode) -> usize {
    pb::int32_field_len(1, status.v3_code())
}

fn opt_int64_len(number: u32, value: Option<i64>) -> usize {
    value.map_or(0, |v| pb::int64_field_len(number, v))
}

fn opt_bytes_len(number: u32, value: &Option<Bytes>) -> usize {
    value
        .as_ref()
        .map_or(0, |v| pb::len_field_len(number, v.len()))
}

/// The field number and content length of the response's sub-message.
fn sub_message_field(response: &Response) -> Option<(u32, usize)> {
    Some(match response {
        Response::ReadEntry {
            status,
            ledger_id,
            entry_id,
            body,
            max_lac,
            lac_update_timestamp,
        } => {
            use field::read_response::*;
            let len = status_len(*status)
                + pb::int64_field_len(LEDGER_ID, *ledger_id)
                + pb::int64_field_len(ENTRY_ID, *entry_id)
                + opt_bytes_len(BODY, body)
                + opt_int64_len(MAX_LAC, *max_lac)
                + opt_int64_len(LAC_UPDATE_TIMESTAMP, *lac_update_timestamp);
            (envelope::READ, len)
        }
        Response::AddEntry {
            status,
            ledger_id,
            entry_id,
        } => {
            use field::add_response::*;
            let len = status_len(*status)
                + pb::int64_field_len(LEDGER_ID, *ledger_id)
                + pb::int64_field_len(ENTRY_ID, *entry_id);
            (envelope::ADD, len)
        }
        Response::Auth { message, .. } => (envelope::AUTH, super::auth_content_len(message)),
        Response::WriteLac { status, ledger_id } => (
            envelope::WRITE_LAC,
            status_len(*status)
                + pb::int64_field_len(field::ledger_response::LEDGER_ID, *ledger_id),
        ),
        Response::ReadLac {
            status,
            ledger_id,
            lac_body,
            last_entry_body,
        } => {
            use field::read_lac_response::*;
            let len = status_len(*status)
                + pb::int64_field_len(LEDGER_ID, *ledger_id)
                + opt_bytes_len(LAC_BODY, lac_body)
                + opt_bytes_len(LAST_ENTRY_BODY, last_entry_body);
            (envelope::READ_LAC, len)
        }
        Response::GetBookieInfo {
            status,
            total_disk_capacity,
            free_disk_space,
        } => {
            use field::get_bookie_info_response::*;
            let len = status_len(*status)
                + opt_int64_len(TOTAL_DISK_CAPACITY, *total_disk_capacity)
                + opt_int64_len(FREE_DISK_SPACE, *free_disk_space);
            (envelope::GET_BOOKIE_INFO, len)
        }
        Response::StartTls { .. } => (envelope::START_TLS, 0),
        Response::ForceLedger { status, ledger_id } => (
            envelope::FORCE_LEDGER,
            status_len(*status)
                + pb::int64_field_len(field::ledger_response::LEDGER_ID, *ledger_id),
        ),
        Response::GetListOfEntriesOfLedger {
            status,
            ledger_id,
            availability,
        } => {
            use field::get_list_response::*;
            let len = status_len(*status)
                + pb::int64_field_len(LEDGER_ID, *ledger_id)
                + opt_bytes_len(AVAILABILITY, availability);
            (envelope::GET_LIST_OF_ENTRIES_OF_LEDGER, len)
        }
        Response::Error { .. } | Response::BatchReadEntry { .. } => return None,
    })
}

fn put_status(out: &mut BytesMut, status: StatusCode) {
    pb::put_int32_field(out, 1, status.v3_code());
}

fn put_opt_int64(out: &mut BytesMut, number: u32, value: Option<i64>) {
    if let Some(value) = value {
        pb::put_int64_field(out, number, value);
    }
}

fn put_opt_bytes(out: &mut BytesMut, number: u32, value: &Option<Bytes>) {
    if let Some(value) = value {
        pb::put_bytes_field(out, number, value);
    }
}

/// Writes the content of the response's sub-message, fields in number order.
fn put_sub_message(response: &Response, out: &mut BytesMut) {
    match response {
        Response::ReadEntry {
            status,
            ledger_id,
            entry_id,
            body,
            max_lac,
            lac_update_timestamp,
        } => {
            use field::read_response::*;
            put_status(out, *status);
            pb::put_int64_field(out, LEDGER_ID, *ledger_id);
            pb::put_int64_field(out, ENTRY_ID, *entry_id);
            put_opt_bytes(out, BODY, body);
            put_opt_int64(out, MAX_LAC, *max_lac);
            put_opt_int64(out, LAC_UPDATE_TIMESTAMP, *lac_update_timestamp);
        }
        Response::AddEntry {
            status,
            ledger_id,
            entry_id,
        } => {
            use field::add_response::*;
            put_status(out, *status);
            pb::put_int64_field(out, LEDGER_ID, *ledger_id);
            pb::put_int64_field(out, ENTRY_ID, *entry_id);
        }
        Response::Auth { message, .. } => super::put_auth_content(out, message),
        Response::WriteLac { status, ledger_id } | Response::ForceLedger { status, ledger_id } => {
            put_status(out, *status);
            pb::put_int64_field(out, field::ledger_response::LEDGER_ID, *ledger_id);
        }
        Response::ReadLac {
            status,
            ledger_id,
            lac_body,
            last_entry_body,
        } => {
            use field::read_lac_response::*;
            put_status(out, *status);
            pb::put_int64_field(out, LEDGER_ID, *ledger_id);
            put_opt_bytes(out, LAC_BODY, lac_body);
            put_opt_bytes(out, LAST_ENTRY_BODY, last_entry_body);
        }
        Response::GetBookieInfo {
            status,
            total_disk_capacity,
            free_disk_space,
        } => {
            use field::get_bookie_info_response::*;
            put_status(out, *status);
            put_opt_int64(out, TOTAL_DISK_CAPACITY, *total_disk_capacity);
            put_opt_int64(out, FREE_DISK_SPACE, *free_disk_space);
        }
        Response::GetListOfEntriesOfLedger {
            status,
            ledger_id,
            availability,
        } => {
            use field::get_list_response::*;
            put_status(out, *status);
            pb::put_int64_field(out, LEDGER_ID, *ledger_id);
            put_opt_bytes(out, AVAILABILITY, availability);
        }
        Response::StartTls { .. } | Response::Error { .. } | Response::BatchReadEntry { .. } => {}
    }
}
