//! The v3 parser against protobuf-java, on malformed and non-canonical input.
//!
//! Goal: the server accepts exactly the v3 bodies a Java bookie (protobuf-java 3.25.5, as
//! in BookKeeper 4.17) accepts, and reads the same values from them. Method: every
//! vector below was run through `BookkeeperProtocol.Request.parseFrom` of
//! `bookkeeper-proto` 4.17.3 (net/fuzz/differential/README.md); the expected outcome
//! in each row is what protobuf-java did. Where LightProto (4.18+) disagrees, the row
//! says so; this crate follows protobuf-java.

use bytes::Bytes;
use net::codec::decode_request_v3;
use net::{ProtobufError, ProtocolError, Request, RequestFrame, RequestHeader};

fn hex(text: &str) -> Bytes {
    let digits: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    let bytes = digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect::<Vec<u8>>();
    Bytes::from(bytes)
}

fn decode(text: &str) -> Result<RequestFrame, ProtocolError> {
    decode_request_v3(&hex(text))
}

fn read_lac(txn_id: u64, ledger_id: i64) -> RequestFrame {
    RequestFrame {
        header: RequestHeader::v3(txn_id),
        request: Request::ReadLac { ledger_id },
    }
}

/// A valid READ_LAC request: header { VERSION_THREE, READ_LAC, txnId 1 }, ledger 5.
const HEADER: &str = "0a06 080310071801";
const READ_LAC_5: &str = "c206 020805";

/// Goal: a 10-byte varint reads as protobuf-java reads it: bit 63 set, whatever the
/// 10th byte holds (protobuf-java's `readRawVarint64` fast path never adds the 10th
/// byte in). Found by the differential check; LightProto and a textbook decoder read
/// `0x7fff_ffff_ffff_ffff` here instead.
#[test]
fn ten_byte_varints_have_bit_63_set() {
    // txnId and ReadRequest.entryId as ff×9 then 00: protobuf-java reads -1 for both.
    let frame =
        decode("0a0f 08031001 18ffffffffffffffffff00 a2060d 0805 10ffffffffffffffffff00").unwrap();
    assert_eq!(frame.header, RequestHeader::v3(u64::MAX));
    match frame.request {
        Request::ReadEntry {
            ledger_id: 5,
            entry_id: -1,
            ..
        } => {}
        other => panic!("unexpected {other:?}"),
    }
    // ff×8 80 then 00: the 9th byte carries no payload, bit 63 is still set.
    let frame = decode("0a0f 08031001 18ffffffffffffffff8000 c20602 0805").unwrap();
    assert_eq!(frame.header, RequestHeader::v3(0x80ff_ffff_ffff_ffff));
    // The 10th byte must still end the varint.
    assert_eq!(
        decode("0a0f 08031001 18ffffffffffffffffff80 c20602 0805"),
        Err(ProtocolError::Protobuf(ProtobufError::VarintTooLong))
    );
}

/// `n` groups of field 50 nested in each other, empty at the core.
fn nested_groups(n: usize) -> String {
    "9303".repeat(n) + &"9403".repeat(n)
}

/// Goal: protobuf-java's recursion limit (100) counts the enclosing messages, so a
/// sub-message holds one level of groups less than the top level: 100 nested groups
/// pass at the top of a Request and fail inside its header or readLacRequest.
/// (LightProto rejects every group.)
#[test]
fn group_nesting_counts_enclosing_messages() {
    let top = |n| format!("{HEADER} {READ_LAC_5} {}", nested_groups(n));
    let in_header = |n: usize| {
        format!(
            "0a{} 080310071801 {} {READ_LAC_5}",
            varint2(6 + 4 * n),
            nested_groups(n)
        )
    };
    let in_read_lac = |n: usize| {
        format!(
            "{HEADER} c206{} 0805 {}",
            varint2(2 + 4 * n),
            nested_groups(n)
        )
    };
    let too_deep = Err(ProtocolError::Protobuf(ProtobufError::GroupTooDeep));
    assert_eq!(decode(&top(100)), Ok(read_lac(1, 5)));
    assert_eq!(decode(&top(101)), too_deep);
    assert_eq!(decode(&in_header(99)), Ok(read_lac(1, 5)));
    assert_eq!(decode(&in_header(100)), too_deep);
    assert_eq!(decode(&in_read_lac(99)), Ok(read_lac(1, 5)));
    assert_eq!(decode(&in_read_lac(100)), too_deep);
}

/// A length in 128..16384 as the hex of its two-byte varint.
fn varint2(length: usize) -> String {
    assert!((128..16384).contains(&length));
    format!("{:02x}{:02x}", (length & 0x7f) | 0x80, length >> 7)
}

/// Goal: malformed bodies protobuf-java rejects are rejected, whatever part of the
/// message they sit in.
#[test]
fn what_protobuf_java_rejects() {
    let protobuf = |error| Err(ProtocolError::Protobuf(error));
    let rows: &[(&str, Result<RequestFrame, ProtocolError>)] = &[
        // Field number 0 (tag 00 or 02), at the top and inside a sub-message.
        // (LightProto skips these as unknown fields.)
        (
            "0a06080310071801 c206020805 0000",
            protobuf(ProtobufError::FieldNumberZero),
        ),
        (
            "0a06080310071801 c206020805 0200",
            protobuf(ProtobufError::FieldNumberZero),
        ),
        (
            "0a06080310071801 c20604 0805 0000",
            protobuf(ProtobufError::FieldNumberZero),
        ),
        (
            "0a08 080310071801 0000 c206020805",
            protobuf(ProtobufError::FieldNumberZero),
        ),
        // Wire types 6 and 7.
        (
            "0a06080310071801 c206020805 0e",
            protobuf(ProtobufError::InvalidWireType),
        ),
        (
            "0a06080310071801 c206020805 0f",
            protobuf(ProtobufError::InvalidWireType),
        ),
        // An end-group with no start, and one that closes another field's group.
        (
            "0a06080310071801 c206020805 9403",
            protobuf(ProtobufError::InvalidWireType),
        ),
        (
            "0a06080310071801 c206020805 9303 0c",
            protobuf(ProtobufError::InvalidWireType),
        ),
        // A group that the message ends inside.
        (
            "0a06080310071801 c206020805 9303 9503 9403",
            protobuf(ProtobufError::Truncated),
        ),
        // A length whose 32 low bits are negative.
        (
            "0a06080310071801 c206 8080808008 0805",
            protobuf(ProtobufError::NegativeLength),
        ),
        // An 11-byte varint.
        (
            "0a06080310071801 c2060c 08ffffffffffffffffff8001",
            protobuf(ProtobufError::VarintTooLong),
        ),
        // A sub-message longer than what is left.
        (
            "0a07080310071801 c206020805",
            protobuf(ProtobufError::Truncated),
        ),
        // A present sub-message of another operation misses its required fields.
        (
            "0a06080310071801 c206020805 a20600",
            protobuf(ProtobufError::MissingRequired("ReadRequest.ledgerId")),
        ),
        // An operation outside the enum leaves the required field unset.
        (
            "0a06080310631801 c206020805",
            protobuf(ProtobufError::MissingRequired("BKPacketHeader.operation")),
        ),
    ];
    for (body, expected) in rows {
        assert_eq!(&decode(body), expected, "{body}");
    }
}

/// Goal: non-canonical bodies protobuf-java accepts are accepted, with its values.
#[test]
fn what_protobuf_java_accepts() {
    let rows: &[(&str, RequestFrame)] = &[
        // A known field number with another wire type is an unknown field, kept aside:
        // field 1 (`header`) as a varint, ReadLacRequest.ledgerId as fixed32.
        ("0a06080310071801 0805 c206020805", read_lac(1, 5)),
        ("0a06080310071801 c20607 0805 0d01020304", read_lac(1, 5)),
        // Unknown groups are skipped, nested too.
        ("0a06080310071801 c206020805 9303 9403", read_lac(1, 5)),
        (
            "0a06080310071801 c206020805 9303 9303 9403 9403",
            read_lac(1, 5),
        ),
        // Overlong tag and length varints (up to 10 bytes, upper bits dropped).
        ("8a8080808000 06080310071801 c206020805", read_lac(1, 5)),
        ("0a868080808001 080310071801 c206020805", read_lac(1, 5)),
        // A repeated header merges into the first (LightProto: replaces it, and fails
        // on the missing required fields).
        ("0a06080310071801 c206020805 0a021802", read_lac(2, 5)),
        // A repeated sub-message merges too: an empty one changes nothing, a second
        // ledgerId wins.
        ("0a06080310071801 c206020805 c20600", read_lac(1, 5)),
        ("0a06080310071801 c206020805 c206020806", read_lac(1, 6)),
        // An unknown enum value in a repeated header leaves the earlier value.
        ("0a06080310071801 c206020805 0a021063", read_lac(1, 5)),
        // A sub-message of another operation, valid, is checked and ignored.
        ("0a06080310071801 c206020805 ca0600", read_lac(1, 5)),
        // A length varint is read as 32 bits: 10 bytes whose low 32 bits say 2.
        (
            "0a06080310071801 c206 82808080f0ffffffff01 0805",
            read_lac(1, 5),
        ),
        // The largest field number (2^29 - 1), as a bytes field and as a group.
        ("0a06080310071801 c206020805 faffffff0f00", read_lac(1, 5)),
        (
            "0a06080310071801 c206020805 fbffffff0f fcffffff0f",
            read_lac(1, 5),
        ),
    ];
    for (body, expected) in rows {
        assert_eq!(&decode(body).unwrap(), expected, "{body}");
    }
}

/// Goal: a proto2 `string` is not checked for UTF-8 (protobuf-java 3.25 and LightProto
/// both accept `ff fe` as `authPluginName`; Java reads it with replacement characters,
/// we keep the bytes, and neither matches a configured plugin name).
#[test]
fn strings_are_not_checked_for_utf8() {
    for (body, name) in [
        ("0a06080310051801 b20606 0a02fffe 1200", &b"\xff\xfe"[..]),
        ("0a06080310051801 b20606 0a02c328 1200", &b"\xc3("[..]),
    ] {
        let frame = decode(body).unwrap();
        assert_eq!(
            frame.request,
            Request::Auth(net::AuthMessage {
                auth_plugin_name: Bytes::copy_from_slice(name),
                payload: Bytes::new(),
            }),
            "{body}"
        );
    }
}
