//! v3: the protobuf protocol (`BookkeeperProtocol.proto`, docs/protocol.md §3), coded
//! by hand.
//!
//! The schema lives in `net/proto/bookkeeper.proto` (written for this project, with
//! BookKeeper's message and field numbers). The codec does not generate code from
//! it; instead [`SCHEMA`] lists every field number the codec uses, and a test
//! parses the `.proto` and checks the two agree, so the file stays the truth.
//!
//! proto2 rules kept here (docs/protocol.md §3.1, §9 items 1 and 25):
//! * every `required` field is written even when it is zero or empty, and a parsed
//!   message missing one is a parse failure, as in protobuf-java;
//! * `optional` fields are `Option`s (a has-bit), written only when set;
//! * an enum value outside the enum is an unknown field (so a `required` enum with
//!   an unknown value counts as missing);
//! * negative `int64`s are 10-byte varints, never zigzag;
//! * fields are written in field-number order; any order is accepted.

pub(crate) mod request;
pub(crate) mod response;

use bytes::BytesMut;

use crate::error::ProtobufError;
use crate::operation::{OperationType, ProtocolVersion};
use crate::protobuf::{self, Reader, LEN, VARINT};

/// Field numbers, one module per message.
pub(crate) mod field {
    /// `BKPacketHeader`.
    pub(crate) mod header {
        pub(crate) const VERSION: u32 = 1;
        pub(crate) const OPERATION: u32 = 2;
        pub(crate) const TXN_ID: u32 = 3;
        pub(crate) const PRIORITY: u32 = 4;
    }
    /// `ContextPair`.
    pub(crate) mod context_pair {
        pub(crate) const KEY: u32 = 1;
        pub(crate) const VALUE: u32 = 2;
    }
    /// `Request` and `Response` share the sub-message numbers.
    pub(crate) mod envelope {
        pub(crate) const HEADER: u32 = 1;
        pub(crate) const STATUS: u32 = 2;
        pub(crate) const READ: u32 = 100;
        pub(crate) const ADD: u32 = 101;
        pub(crate) const AUTH: u32 = 102;
        pub(crate) const WRITE_LAC: u32 = 103;
        pub(crate) const READ_LAC: u32 = 104;
        pub(crate) const GET_BOOKIE_INFO: u32 = 105;
        pub(crate) const START_TLS: u32 = 106;
        pub(crate) const FORCE_LEDGER: u32 = 107;
        pub(crate) const GET_LIST_OF_ENTRIES_OF_LEDGER: u32 = 108;
        pub(crate) const REQUEST_CONTEXT: u32 = 200;
    }
    /// `ReadRequest`.
    pub(crate) mod read_request {
        pub(crate) const LEDGER_ID: u32 = 1;
        pub(crate) const ENTRY_ID: u32 = 2;
        pub(crate) const MASTER_KEY: u32 = 3;
        pub(crate) const PREVIOUS_LAC: u32 = 4;
        pub(crate) const TIME_OUT: u32 = 5;
        pub(crate) const FLAG: u32 = 100;
    }
    /// `AddRequest`.
    pub(crate) mod add_request {
        pub(crate) const LEDGER_ID: u32 = 1;
        pub(crate) const ENTRY_ID: u32 = 2;
        pub(crate) const MASTER_KEY: u32 = 3;
        pub(crate) const BODY: u32 = 4;
        pub(crate) const WRITE_FLAGS: u32 = 5;
        pub(crate) const FLAG: u32 = 100;
    }
    /// `WriteLacRequest`.
    pub(crate) mod write_lac_request {
        pub(crate) const LEDGER_ID: u32 = 1;
        pub(crate) const LAC: u32 = 2;
        pub(crate) const MASTER_KEY: u32 = 3;
        pub(crate) const BODY: u32 = 4;
    }
    /// `ReadLacRequest`, `ForceLedgerRequest`, `GetListOfEntriesOfLedgerRequest`.
    pub(crate) mod ledger_request {
        pub(crate) const LEDGER_ID: u32 = 1;
    }
    /// `GetBookieInfoRequest`.
    pub(crate) mod get_bookie_info_request {
        pub(crate) const REQUESTED: u32 = 1;
    }
    /// `AuthMessage`.
    pub(crate) mod auth_message {
        pub(crate) const AUTH_PLUGIN_NAME: u32 = 1;
        pub(crate) const PAYLOAD: u32 = 2;
    }
    /// `ReadResponse`.
    pub(crate) mod read_response {
        pub(crate) const STATUS: u32 = 1;
        pub(crate) const LEDGER_ID: u32 = 2;
        pub(crate) const ENTRY_ID: u32 = 3;
        pub(crate) const BODY: u32 = 4;
        pub(crate) const MAX_LAC: u32 = 5;
        pub(crate) const LAC_UPDATE_TIMESTAMP: u32 = 6;
    }
    /// `AddResponse`.
    pub(crate) mod add_response {
        pub(crate) const STATUS: u32 = 1;
        pub(crate) const LEDGER_ID: u32 = 2;
        pub(crate) const ENTRY_ID: u32 = 3;
    }
    /// `WriteLacResponse`, `ForceLedgerResponse`: status and ledger id.
    pub(crate) mod ledger_response {
        pub(crate) const STATUS: u32 = 1;
        pub(crate) const LEDGER_ID: u32 = 2;
    }
    /// `ReadLacResponse`.
    pub(crate) mod read_lac_response {
        pub(crate) const STATUS: u32 = 1;
        pub(crate) const LEDGER_ID: u32 = 2;
        pub(crate) const LAC_BODY: u32 = 3;
        pub(crate) const LAST_ENTRY_BODY: u32 = 4;
    }
    /// `GetBookieInfoResponse`.
    pub(crate) mod get_bookie_info_response {
        pub(crate) const STATUS: u32 = 1;
        pub(crate) const TOTAL_DISK_CAPACITY: u32 = 2;
        pub(crate) const FREE_DISK_SPACE: u32 = 3;
    }
    /// `GetListOfEntriesOfLedgerResponse`.
    pub(crate) mod get_list_response {
        pub(crate) const STATUS: u32 = 1;
        pub(crate) const LEDGER_ID: u32 = 2;
        pub(crate) const AVAILABILITY: u32 = 3;
    }
}

/// Every `(message, field, number)` the codec reads or writes. A test checks this
/// against `net/proto/bookkeeper.proto`.
pub const SCHEMA: &[(&str, &str, u32)] = {
    use field::*;
    &[
        ("BKPacketHeader", "version", header::VERSION),
        ("BKPacketHeader", "operation", header::OPERATION),
        ("BKPacketHeader", "txnId", header::TXN_ID),
        ("BKPacketHeader", "priority", header::PRIORITY),
        ("ContextPair", "key", context_pair::KEY),
        ("ContextPair", "value", context_pair::VALUE),
        ("Request", "header", envelope::HEADER),
        ("Request", "readRequest", envelope::READ),
        ("Request", "addRequest", envelope::ADD),
        ("Request", "authRequest", envelope::AUTH),
        ("Request", "writeLacRequest", envelope::WRITE_LAC),
        ("Request", "readLacRequest", envelope::READ_LAC),
        ("Request", "getBookieInfoRequest", envelope::GET_BOOKIE_INFO),
        ("Request", "startTLSRequest", envelope::START_TLS),
        ("Request", "forceLedgerRequest", envelope::FORCE_LEDGER),
        (
            "Request",
            "getListOfEntriesOfLedgerRequest",
            envelope::GET_LIST_OF_ENTRIES_OF_LEDGER,
        ),
        ("Request", "requestContext", envelope::REQUEST_CONTEXT),
        ("ReadRequest", "ledgerId", read_request::LEDGER_ID),
        ("ReadRequest", "entryId", read_request::ENTRY_ID),
        ("ReadRequest", "masterKey", read_request::MASTER_KEY),
        ("ReadRequest", "previousLAC", read_request::PREVIOUS_LAC),
        ("ReadRequest", "timeOut", read_request::TIME_OUT),
        ("ReadRequest", "flag", read_request::FLAG),
        ("AddRequest", "ledgerId", add_request::LEDGER_ID),
        ("AddRequest", "entryId", add_request::ENTRY_ID),
        ("AddRequest", "masterKey", add_request::MASTER_KEY),
        ("AddRequest", "body", add_request::BODY),
        ("AddRequest", "writeFlags", add_request::WRITE_FLAGS),
        ("AddRequest", "flag", add_request::FLAG),
        ("WriteLacRequest", "ledgerId", write_lac_request::LEDGER_ID),
        ("WriteLacRequest", "lac", write_lac_request::LAC),
        (
            "WriteLacRequest",
            "masterKey",
            write_lac_request::MASTER_KEY,
        ),
        ("WriteLacRequest", "body", write_lac_request::BODY),
        ("ReadLacRequest", "ledgerId", ledger_request::LEDGER_ID),
        ("ForceLedgerRequest", "ledgerId", ledger_request::LEDGER_ID),
        (
            "GetListOfEntriesOfLedgerRequest",
            "ledgerId",
            ledger_request::LEDGER_ID,
        ),
        (
            "GetBookieInfoRequest",
            "requested",
            get_bookie_info_request::REQUESTED,
        ),
        (
            "AuthMessage",
            "authPluginName",
            auth_message::AUTH_PLUGIN_NAME,
        ),
        ("AuthMessage", "payload", auth_message::PAYLOAD),
        ("Response", "header", envelope::HEADER),
        ("Response", "status", envelope::STATUS),
        ("Response", "readResponse", envelope::READ),
        ("Response", "addResponse", envelope::ADD),
        ("Response", "authResponse", envelope::AUTH),
        ("Response", "writeLacResponse", envelope::WRITE_LAC),
        ("Response", "readLacResponse", envelope::READ_LAC),
        (
            "Response",
            "getBookieInfoResponse",
            envelope::GET_BOOKIE_INFO,
        ),
        ("Response", "startTLSResponse", envelope::START_TLS),
        ("Response", "forceLedgerResponse", envelope::FORCE_LEDGER),
        (
            "Response",
            "getListOfEntriesOfLedgerResponse",
            envelope::GET_LIST_OF_ENTRIES_OF_LEDGER,
        ),
        ("ReadResponse", "status", read_response::STATUS),
        ("ReadResponse", "ledgerId", read_response::LEDGER_ID),
        ("ReadResponse", "entryId", read_response::ENTRY_ID),
        ("ReadResponse", "body", read_response::BODY),
        ("ReadResponse", "maxLAC", read_response::MAX_LAC),
        (
            "ReadResponse",
            "lacUpdateTimestamp",
            read_response::LAC_UPDATE_TIMESTAMP,
        ),
        ("AddResponse", "status", add_response::STATUS),
        ("AddResponse", "ledgerId", add_response::LEDGER_ID),
        ("AddResponse", "entryId", add_response::ENTRY_ID),
        ("WriteLacResponse", "status", ledger_response::STATUS),
        ("WriteLacResponse", "ledgerId", ledger_response::LEDGER_ID),
        ("ForceLedgerResponse", "status", ledger_response::STATUS),
        (
            "ForceLedgerResponse",
            "ledgerId",
            ledger_response::LEDGER_ID,
        ),
        ("ReadLacResponse", "status", read_lac_response::STATUS),
        ("ReadLacResponse", "ledgerId", read_lac_response::LEDGER_ID),
        ("ReadLacResponse", "lacBody", read_lac_response::LAC_BODY),
        (
            "ReadLacResponse",
            "lastEntryBody",
            read_lac_response::LAST_ENTRY_BODY,
        ),
        (
            "GetBookieInfoResponse",
            "status",
            get_bookie_info_response::STATUS,
        ),
        (
            "GetBookieInfoResponse",
            "totalDiskCapacity",
            get_bookie_info_response::TOTAL_DISK_CAPACITY,
        ),
        (
            "GetBookieInfoResponse",
            "freeDiskSpace",
            get_bookie_info_response::FREE_DISK_SPACE,
        ),
        (
            "GetListOfEntriesOfLedgerResponse",
            "status",
            get_list_response::STATUS,
        ),
        (
            "GetListOfEntriesOfLedgerResponse",
            "ledgerId",
            get_list_response::LEDGER_ID,
        ),
        (
            "GetListOfEntriesOfLedgerResponse",
            "availabilityOfEntriesOfLedger",
            get_list_response::AVAILABILITY,
        ),
    ]
};

/// `Some(value)` of a required field, or the parse failure protobuf-java raises.
pub(crate) fn required<T>(value: Option<T>, name: &'static str) -> Result<T, ProtobufError> {
    value.ok_or(ProtobufError::MissingRequired(name))
}

/// A `BKPacketHeader` being parsed (messages merge if repeated).
#[derive(Default)]
pub(crate) struct HeaderParts {
    version: Option<ProtocolVersion>,
    operation: Option<OperationType>,
    txn_id: Option<u64>,
    priority: Option<u32>,
}

/// A complete `BKPacketHeader`.
#[derive(Clone, Copy)]
pub(crate) struct Header {
    pub(crate) version: ProtocolVersion,
    pub(crate) operation: OperationType,
    pub(crate) txn_id: u64,
    pub(crate) priority: Option<u32>,
}

impl HeaderParts {
    /// Merges one occurrence of the header message.
    pub(crate) fn merge(&mut self, mut reader: Reader<'_>) -> Result<(), ProtobufError> {
        use field::header::*;
        while !reader.is_done() {
            let (number, wire_type) = reader.tag()?;
            match (number, wire_type) {
                (VERSION, VARINT) => {
                    if let Some(version) = ProtocolVersion::from_code(reader.int32()?) {
                        self.version = Some(version);
                    }
                }
                (OPERATION, VARINT) => {
                    if let Some(operation) = OperationType::from_code(reader.int32()?) {
                        self.operation = Some(operation);
                    }
                }
                (TXN_ID, VARINT) => self.txn_id = Some(reader.varint()?),
                (PRIORITY, VARINT) => self.priority = Some(reader.int32()? as u32),
                _ => reader.skip(number, wire_type)?,
            }
        }
        Ok(())
    }

    /// Checks the required fields.
    pub(crate) fn finish(self) -> Result<Header, ProtobufError> {
        Ok(Header {
            version: required(self.version, "BKPacketHeader.version")?,
            operation: required(self.operation, "BKPacketHeader.operation")?,
            txn_id: required(self.txn_id, "BKPacketHeader.txnId")?,
            priority: self.priority,
        })
    }
}

impl Header {
    /// Length of the header message's content.
    fn content_len(&self) -> usize {
        use field::header::*;
        protobuf::int32_field_len(VERSION, self.version.code())
            + protobuf::int32_field_len(OPERATION, self.operation.code())
            + protobuf::tag_len(TXN_ID)
            + protobuf::varint_len(self.txn_id)
            + self.priority.map_or(0, |p| {
                protobuf::tag_len(PRIORITY) + protobuf::varint_len(u64::from(p))
            })
    }

    /// Length of the `header` field (tag, length and content).
    pub(crate) fn field_len(&self) -> usize {
        protobuf::len_field_len(field::envelope::HEADER, self.content_len())
    }

    /// Writes the `header` field.
    pub(crate) fn put(&self, out: &mut BytesMut) {
        use field::header::*;
        protobuf::put_len_header(out, field::envelope::HEADER, self.content_len());
        protobuf::put_int32_field(out, VERSION, self.version.code());
        protobuf::put_int32_field(out, OPERATION, self.operation.code());
        protobuf::put_tag(out, TXN_ID, VARINT);
        protobuf::put_varint(out, self.txn_id);
        if let Some(priority) = self.priority {
            protobuf::put_tag(out, PRIORITY, VARINT);
            protobuf::put_varint(out, u64::from(priority));
        }
    }
}

/// Validates a `ContextPair` (both fields are `required`); its content is ignored.
pub(crate) fn check_context_pair(mut reader: Reader<'_>) -> Result<(), ProtobufError> {
    use field::context_pair::*;
    let (mut key, mut value) = (false, false);
    while !reader.is_done() {
        let (number, wire_type) = reader.tag()?;
        match (number, wire_type) {
            (KEY, LEN) => key = reader.bytes().map(|_| true)?,
            (VALUE, LEN) => value = reader.bytes().map(|_| true)?,
            _ => reader.skip(number, wire_type)?,
        }
    }
    required(key.then_some(()), "ContextPair.key")?;
    required(value.then_some(()), "ContextPair.value")
}

/// Skips every field of an empty message (`StartTLSRequest`/`StartTLSResponse`),
/// still checking that its bytes are well-formed.
pub(crate) fn check_empty_message(mut reader: Reader<'_>) -> Result<(), ProtobufError> {
    while !reader.is_done() {
        let (number, wire_type) = reader.tag()?;
        reader.skip(number, wire_type)?;
    }
    Ok(())
}

/// An `AuthMessage` being parsed.
#[derive(Default)]
pub(crate) struct AuthParts {
    auth_plugin_name: Option<bytes::Bytes>,
    payload: Option<bytes::Bytes>,
}

impl AuthParts {
    /// Merges one occurrence of the message.
    pub(crate) fn merge(&mut self, mut reader: Reader<'_>) -> Result<(), ProtobufError> {
        use field::auth_message::*;
        while !reader.is_done() {
            let (number, wire_type) = reader.tag()?;
            match (number, wire_type) {
                (AUTH_PLUGIN_NAME, LEN) => self.auth_plugin_name = Some(reader.bytes()?),
                (PAYLOAD, LEN) => self.payload = Some(reader.bytes()?),
                _ => reader.skip(number, wire_type)?,
            }
        }
        Ok(())
    }

    /// Checks the required fields.
    pub(crate) fn finish(self) -> Result<crate::AuthMessage, ProtobufError> {
        Ok(crate::AuthMessage {
            auth_plugin_name: required(self.auth_plugin_name, "AuthMessage.authPluginName")?,
            payload: required(self.payload, "AuthMessage.payload")?,
        })
    }
}

/// Length of an `AuthMessage`'s content.
pub(crate) fn auth_content_len(message: &crate::AuthMessage) -> usize {
    use field::auth_message::*;
    protobuf::len_field_len(AUTH_PLUGIN_NAME, message.auth_plugin_name.len())
        + protobuf::len_field_len(PAYLOAD, message.payload.len())
}

/// Writes an `AuthMessage`'s content (both fields are required: an empty payload
/// is still written as `12 00`).
pub(crate) fn put_auth_content(out: &mut BytesMut, message: &crate::AuthMessage) {
    use field::auth_message::*;
    protobuf::put_bytes_field(out, AUTH_PLUGIN_NAME, &message.auth_plugin_name);
    protobuf::put_bytes_field(out, PAYLOAD, &message.payload);
}
