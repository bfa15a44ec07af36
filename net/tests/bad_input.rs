//! The bad-input table of the crate docs (src/lib.rs, "Bad input"), row by row.
//!
//! Method: build the offending bytes by hand, run them through the server's
//! `RequestDecoder` (or the client), and check the documented outcome: a
//! `ProtocolError` (close the connection, no reply), or a decoded request whose
//! reply carries the status the Java bookie sends.

use bytes::{BufMut, Bytes, BytesMut};
use net::client::{ClientConfig, ClientConnection, ClientError};
use net::codec::encode_response;
use net::server::{Detection, RequestDecoder};
use net::{
    EncodeError, OperationType, ProtobufError, ProtocolError, ReadFlag, Request, RequestFrame,
    RequestHeader, Response, ResponseFrame, StatusCode,
};

fn framed(body: &[u8]) -> BytesMut {
    let mut out = BytesMut::new();
    out.put_u32(body.len() as u32);
    out.put_slice(body);
    out
}

fn decode(body: &[u8]) -> Result<RequestFrame, ProtocolError> {
    RequestDecoder::default()
        .decode(&mut framed(body))
        .map(|frame| frame.expect("whole frame"))
}

fn encode_reply(frame: &RequestFrame, status: StatusCode) -> Vec<u8> {
    let reply = ResponseFrame {
        header: frame.reply_header(),
        response: frame.request.error_response(status),
    };
    let mut out = BytesMut::new();
    encode_response(&reply, &mut out).unwrap();
    out.to_vec()
}

/// Row: frame too long / negative length / empty frame: close.
#[test]
fn framing_errors_close() {
    let mut decoder = RequestDecoder::new(1024);
    let mut too_long = BytesMut::from(&(1021u32).to_be_bytes()[..]);
    assert!(matches!(
        decoder.decode(&mut too_long),
        Err(ProtocolError::FrameTooLarge { length: 1021, .. })
    ));
    let mut negative = BytesMut::from(&[0xff, 0xff, 0xff, 0xfe][..]);
    assert_eq!(
        decoder.decode(&mut negative),
        Err(ProtocolError::NegativeFrameLength(-2))
    );
    assert_eq!(decode(&[]), Err(ProtocolError::EmptyFrame));
}

/// Row: v2 bodies too short for their opcode: close.
#[test]
fn v2_truncated_bodies_close() {
    let short_header = [0x02, 0x01];
    assert_eq!(
        decode(&short_header),
        Err(ProtocolError::TruncatedV2 { opcode: 0 })
    );
    let mut add = vec![0x02, 0x01, 0x00, 0x00];
    add.extend_from_slice(&[0; 20 + 15]); // key + 15 bytes: the ids need 16
    assert_eq!(decode(&add), Err(ProtocolError::TruncatedV2 { opcode: 1 }));
    let read = [0x02, 0x02, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0];
    assert_eq!(decode(&read), Err(ProtocolError::TruncatedV2 { opcode: 2 }));
    let mut fence_without_key = vec![0x02, 0x02, 0x00, 0x01];
    fence_without_key.extend_from_slice(&[0; 16 + 19]);
    assert_eq!(
        decode(&fence_without_key),
        Err(ProtocolError::TruncatedV2 { opcode: 2 })
    );
    let mut batch = vec![0x02, 0x07, 0x00, 0x00];
    batch.extend_from_slice(&[0; 35]);
    assert_eq!(
        decode(&batch),
        Err(ProtocolError::TruncatedV2 { opcode: 7 })
    );
}

/// Row: v2 opcodes 4, 5, 6 (defined but not decoded by Java) and unknown ones: close.
#[test]
fn v2_unknown_opcodes_close() {
    for opcode in [0u8, 4, 5, 6, 8, 0xff] {
        let body = [
            0x02, opcode, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        assert_eq!(decode(&body), Err(ProtocolError::UnknownV2Opcode(opcode)));
    }
}

/// Row: v2 AUTH whose AuthMessage lacks a required field, or is malformed: close.
#[test]
fn v2_bad_auth_closes() {
    let no_payload = [0x02, 0x03, 0, 0, 0x0a, 0x01, b'x'];
    assert_eq!(
        decode(&no_payload),
        Err(ProtocolError::Protobuf(ProtobufError::MissingRequired(
            "AuthMessage.payload"
        )))
    );
    let truncated = [0x02, 0x03, 0, 0, 0x0a, 0x05, b'x'];
    assert_eq!(
        decode(&truncated),
        Err(ProtocolError::Protobuf(ProtobufError::Truncated))
    );
}

/// Row: v2 ADD/READ/BATCH_READ with an unsupported version byte: decoded, and
/// answered EBADVERSION(103) with the request's version byte and ids copied.
#[test]
fn v2_bad_version_gets_ebadversion() {
    let body = [
        0x05, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 3,
    ];
    let frame = decode(&body).unwrap();
    assert!(!frame.header.is_version_supported());
    let reply = encode_reply(&frame, StatusCode::EBADVERSION);
    assert_eq!(
        reply,
        [
            0, 0, 0, 24, 0x05, 0x02, 0, 0, 0, 0, 0, 103, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0,
            0, 3
        ]
    );
    // 0x80 is a negative Java byte: unsupported, and no master key is read even
    // with the fence bit set.
    let negative = [
        0x80, 0x02, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 3,
    ];
    let frame = decode(&negative).unwrap();
    assert!(!frame.header.is_version_supported());
    assert!(matches!(
        frame.request,
        Request::ReadEntry {
            master_key: None,
            flag: Some(ReadFlag::FenceLedger),
            ..
        }
    ));
    assert!(
        decode(&[0x02, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 3])
            .unwrap()
            .header
            .is_version_supported()
    );
}

/// Row: v2 flags that do not apply, and bytes after a READ's fields: ignored.
#[test]
fn v2_ignored_flags_and_trailing_bytes() {
    let plain = decode(&[
        0x02, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 3,
    ])
    .unwrap();
    let mut noisy = vec![
        0x02,
        0x02,
        0x00,
        0x02 | 0x40,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        5,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        3,
    ];
    noisy.extend_from_slice(&[0xee; 20]); // a key without the fence bit
    assert_eq!(decode(&noisy).unwrap(), plain);
}

/// Row: a v3 frame that fails the strict parse falls back to v2 and closes;
/// PerFrame keeps serving v3 afterwards while JavaOneWay, like Java, does not.
#[test]
fn v3_parse_failures_close() {
    // ADD with no body: a required field of a present sub-message is missing.
    let add_without_body = [
        0x0a, 0x06, 0x08, 0x03, 0x10, 0x02, 0x18, 0x01, 0xaa, 0x06, 0x06, 0x08, 0x05, 0x10, 0x03,
        0x1a, 0x00,
    ];
    assert_eq!(
        decode(&add_without_body),
        Err(ProtocolError::Protobuf(ProtobufError::MissingRequired(
            "AddRequest.body"
        )))
    );
    // The incomplete sub-message need not be the one the operation names.
    let read_with_bad_add = [
        0x0a, 0x06, 0x08, 0x03, 0x10, 0x01, 0x18, 0x01, 0xa2, 0x06, 0x04, 0x08, 0x05, 0x10, 0x03,
        0xaa, 0x06, 0x00,
    ];
    assert!(matches!(
        decode(&read_with_bad_add),
        Err(ProtocolError::Protobuf(ProtobufError::MissingRequired(_)))
    ));
    // Operation 13 is outside the enum, so the required field counts as missing.
    let unknown_operation = [0x0a, 0x06, 0x08, 0x03, 0x10, 0x0d, 0x18, 0x01];
    assert_eq!(
        decode(&unknown_operation),
        Err(ProtocolError::Protobuf(ProtobufError::MissingRequired(
            "BKPacketHeader.operation"
        )))
    );
    let truncated = [0x0a, 0x06, 0x08, 0x03, 0x10];
    assert!(decode(&truncated).is_err());

    // After a v2 frame, a v3 frame: served per frame; closed by the Java rule.
    let v2_read = [
        0x02, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 3,
    ];
    let v3_read = [0x0a, 6, 8, 3, 0x10, 1, 0x18, 3, 0xa2, 6, 4, 8, 5, 0x10, 3];
    for (detection, served) in [(Detection::PerFrame, true), (Detection::JavaOneWay, false)] {
        let mut decoder = RequestDecoder::default().with_detection(detection);
        let mut wire = framed(&v2_read);
        wire.extend_from_slice(&framed(&v3_read));
        assert!(decoder.decode(&mut wire).unwrap().unwrap().header.is_v2());
        assert_eq!(decoder.decode(&mut wire).is_ok(), served, "{detection:?}");
    }
}

/// Rows: operations 3, 4, 12 and a missing sub-message decode as `Unsupported`
/// and get EBADREQ with the header copied and no sub-message.
#[test]
fn v3_unsupported_operations_get_ebadreq() {
    for (operation, code) in [
        (OperationType::RangeReadEntry, 3u8),
        (OperationType::RangeAddEntry, 4),
        (OperationType::BatchReadEntry, 12),
        (OperationType::AddEntry, 2), // header names ADD, no addRequest
    ] {
        let frame = decode(&[0x0a, 0x06, 0x08, 0x03, 0x10, code, 0x18, 0x2a]).unwrap();
        assert_eq!(frame.request, Request::Unsupported { operation });
        assert_eq!(
            encode_reply(&frame, StatusCode::EBADREQ),
            [0, 0, 0, 11, 0x0a, 0x06, 0x08, 0x03, 0x10, code, 0x18, 0x2a, 0x10, 0x94, 0x03]
        );
    }
}

/// Row: v3 header.version other than VERSION_THREE: EBADVERSION in the sub-response.
#[test]
fn v3_bad_version_gets_ebadversion() {
    let read = [0x0a, 6, 8, 2, 0x10, 1, 0x18, 3, 0xa2, 6, 4, 8, 5, 0x10, 3];
    let frame = decode(&read).unwrap();
    assert!(!frame.header.is_version_supported());
    assert_eq!(
        encode_reply(&frame, StatusCode::EBADVERSION),
        [
            0, 0, 0, 0x15, 0x0a, 6, 8, 3, 0x10, 1, 0x18, 3, 0x10, 0xf7, 0x03, 0xa2, 6, 7, 8, 0xf7,
            0x03, 0x10, 5, 0x18, 3
        ]
    );
}

/// Row: unknown optional enum values and unknown fields are ignored.
#[test]
fn v3_unknown_values_are_ignored() {
    // READ with flag = 7 (not in the enum) and an unknown fixed64 field 9.
    let read = [
        0x0a, 6, 8, 3, 0x10, 1, 0x18, 3, 0xa2, 6, 16, 8, 5, 0x10, 3, 0xa0, 6, 7, 0x49, 1, 2, 3, 4,
        5, 6, 7, 8,
    ];
    let frame = decode(&read).unwrap();
    assert!(matches!(
        frame.request,
        Request::ReadEntry {
            flag: None,
            ledger_id: 5,
            entry_id: 3,
            ..
        }
    ));
}

/// Client rows: unknown v2 rc closes; 107 is accepted; an oversized response
/// closes; encode errors refuse to send and leave nothing half-written.
#[test]
fn client_bad_input() {
    let read = Request::ReadEntry {
        ledger_id: 5,
        entry_id: 3,
        master_key: None,
        flag: None,
        previous_lac: None,
        time_out: None,
    };
    let reply = |rc: i32| {
        let mut body = vec![0x02, 0x02, 0, 0];
        body.extend_from_slice(&rc.to_be_bytes());
        body.extend_from_slice(&5i64.to_be_bytes());
        body.extend_from_slice(&3i64.to_be_bytes());
        framed(&body)
    };
    let mut client = ClientConnection::new(ClientConfig::default());
    client.send_v2(read.clone(), false).unwrap();
    client.receive(&reply(107));
    let (_, frame) = client.poll_response().unwrap().unwrap();
    assert_eq!(frame.response.status(), StatusCode::EUNKNOWNLEDGERSTATE);
    client.send_v2(read.clone(), false).unwrap();
    client.receive(&reply(108));
    assert_eq!(
        client.poll_response(),
        Err(ClientError::Protocol(ProtocolError::UnknownV2Status(108)))
    );

    let mut small = ClientConnection::new(ClientConfig {
        max_frame_size: 64,
        max_pending_requests: 4,
    });
    small.send_v2(read, false).unwrap();
    small.receive(&(61u32).to_be_bytes());
    assert!(matches!(
        small.poll_response(),
        Err(ClientError::Protocol(ProtocolError::FrameTooLarge { .. }))
    ));
    let big = Request::WriteLac {
        ledger_id: 1,
        lac: 0,
        master_key: Bytes::new(),
        body: Bytes::from(vec![0; 64]),
    };
    assert!(matches!(
        small.send_v3(big, None),
        Err(ClientError::Encode(EncodeError::FrameTooLarge { .. }))
    ));
    assert_eq!(
        small.send_v2(Request::ReadLac { ledger_id: 1 }, false),
        Err(ClientError::Encode(EncodeError::NotInV2("this operation")))
    );
    // Only the 24-byte READ is queued; the refused requests left nothing behind.
    assert_eq!(small.take_output().len(), 24);
}

/// Encoders refuse what a protocol cannot express instead of sending something
/// the peer would misread.
#[test]
fn unexpressible_values_are_refused() {
    let mut out = BytesMut::new();
    let v2_reply = |response| ResponseFrame {
        header: net::ResponseHeader::V2 { version: 2 },
        response,
    };
    let lac = Response::WriteLac {
        status: StatusCode::EOK,
        ledger_id: 1,
    };
    assert!(matches!(
        encode_response(&v2_reply(lac), &mut out),
        Err(EncodeError::NotInV2(_))
    ));
    let auth_error = Response::Auth {
        status: StatusCode::EUA,
        message: net::AuthMessage::auth_disabled(),
    };
    assert!(matches!(
        encode_response(&v2_reply(auth_error), &mut out),
        Err(EncodeError::NotInV2(_))
    ));
    let long_poll = RequestFrame {
        header: RequestHeader::v2(),
        request: Request::ReadEntry {
            ledger_id: 1,
            entry_id: -1,
            master_key: None,
            flag: Some(ReadFlag::EntryPiggyback),
            previous_lac: Some(0),
            time_out: Some(1000),
        },
    };
    assert!(matches!(
        net::codec::encode_request(&long_poll, &mut out),
        Err(EncodeError::NotInV2(_))
    ));
    let batch = RequestFrame {
        header: RequestHeader::v3(1),
        request: Request::BatchReadEntry {
            ledger_id: 1,
            start_entry_id: 0,
            request_id: 1,
            max_count: 1,
            max_size: 1,
            fence: false,
            master_key: None,
        },
    };
    assert!(matches!(
        net::codec::encode_request(&batch, &mut out),
        Err(EncodeError::NotInV3(_))
    ));
    assert!(out.is_empty(), "nothing half-written");
}
