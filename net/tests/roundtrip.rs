//! Round-trip property tests for every message type of both protocols.
//!
//! Method: for each request and response kind, generate a few thousand random
//! canonical values from fixed seeds (common::Rng), encode each, and check that
//! decoding gives the value back, that decoding then re-encoding gives the same
//! bytes, and that a frame fed one byte at a time decodes the same as a frame fed
//! whole. Failures print the seed and iteration, which reproduce them.

mod common;

use bytes::BytesMut;
use common::Rng;
use net::client::{ClientConfig, ClientConnection};
use net::codec::{decode_response_v2, decode_response_v3, encode_request, encode_response};
use net::frame::{split_frame, DEFAULT_MAX_FRAME_SIZE};
use net::server::{Detection, RequestDecoder};
use net::{Request, RequestFrame, Response, ResponseFrame, ResponseHeader, StatusCode};

const CASES_PER_KIND: u64 = 2000;

fn round_trip_request(frame: &RequestFrame, context: &str) {
    let mut bytes = BytesMut::new();
    encode_request(frame, &mut bytes)
        .unwrap_or_else(|e| panic!("{context}: encode {frame:?}: {e}"));
    let wire = bytes.clone().freeze();
    for detection in [Detection::PerFrame, Detection::JavaOneWay] {
        let mut decoder = RequestDecoder::default().with_detection(detection);
        let decoded = decoder
            .decode(&mut bytes.clone())
            .unwrap_or_else(|e| panic!("{context}: decode {frame:?}: {e}"))
            .expect("complete frame");
        assert_eq!(&decoded, frame, "{context} ({detection:?})");
        let mut again = BytesMut::new();
        encode_request(&decoded, &mut again).unwrap();
        assert_eq!(&again[..], &wire[..], "{context}: re-encoding");
    }
}

fn round_trip_response(frame: &ResponseFrame, context: &str) {
    let mut bytes = BytesMut::new();
    encode_response(frame, &mut bytes)
        .unwrap_or_else(|e| panic!("{context}: encode {frame:?}: {e}"));
    let wire = bytes.clone().freeze();
    let body = split_frame(&mut bytes, DEFAULT_MAX_FRAME_SIZE)
        .unwrap()
        .unwrap();
    assert!(bytes.is_empty());
    let decoded = match frame.header {
        ResponseHeader::V2 { .. } => decode_response_v2(&body),
        ResponseHeader::V3 { .. } => decode_response_v3(&body),
    }
    .unwrap_or_else(|e| panic!("{context}: decode {frame:?}: {e}"));
    assert_eq!(&decoded, frame, "{context}");
    let mut again = BytesMut::new();
    encode_response(&decoded, &mut again).unwrap();
    assert_eq!(&again[..], &wire[..], "{context}: re-encoding");
}

/// Goal: every v3 request kind survives encode → decode → encode.
#[test]
fn v3_requests_round_trip() {
    for kind in 0..common::V3_REQUEST_KINDS {
        let mut rng = Rng::new(0x3000 + kind);
        for case in 0..CASES_PER_KIND {
            let frame = common::v3_request(&mut rng, kind);
            round_trip_request(&frame, &format!("v3 request kind {kind} case {case}"));
        }
    }
}

/// Goal: every v2 request kind survives encode → decode → encode, including
/// legacy and out-of-range version bytes.
#[test]
fn v2_requests_round_trip() {
    for kind in 0..common::V2_REQUEST_KINDS {
        let mut rng = Rng::new(0x2000 + kind);
        for case in 0..CASES_PER_KIND {
            let frame = common::v2_request(&mut rng, kind);
            round_trip_request(&frame, &format!("v2 request kind {kind} case {case}"));
        }
    }
}

/// Goal: every v3 response kind survives encode → decode → encode.
#[test]
fn v3_responses_round_trip() {
    for kind in 0..common::V3_RESPONSE_KINDS {
        let mut rng = Rng::new(0x3100 + kind);
        for case in 0..CASES_PER_KIND {
            let frame = common::v3_response(&mut rng, kind);
            round_trip_response(&frame, &format!("v3 response kind {kind} case {case}"));
        }
    }
}

/// Goal: every v2 response kind survives encode → decode → encode.
#[test]
fn v2_responses_round_trip() {
    for kind in 0..common::V2_RESPONSE_KINDS {
        let mut rng = Rng::new(0x2100 + kind);
        for case in 0..CASES_PER_KIND {
            let frame = common::v2_response(&mut rng, kind);
            round_trip_response(&frame, &format!("v2 response kind {kind} case {case}"));
        }
    }
}

/// Goal: a stream of mixed v2 and v3 frames split at arbitrary points decodes to
/// the same frames, in order, as when fed whole (per-frame protocol detection).
#[test]
fn stream_split_anywhere() {
    let mut rng = Rng::new(0x5157);
    for round in 0..200 {
        let frames: Vec<RequestFrame> = (0..8).map(|_| common::any_request(&mut rng)).collect();
        let mut wire = BytesMut::new();
        for frame in &frames {
            encode_request(frame, &mut wire).unwrap();
        }
        let mut decoder = RequestDecoder::default();
        let mut received = BytesMut::new();
        let mut decoded = Vec::new();
        let mut offset = 0;
        while offset < wire.len() {
            let chunk = (1 + rng.below(40) as usize).min(wire.len() - offset);
            received.extend_from_slice(&wire[offset..offset + chunk]);
            offset += chunk;
            while let Some(frame) = decoder.decode(&mut received).unwrap() {
                decoded.push(frame);
            }
        }
        assert_eq!(decoded, frames, "round {round}");
        assert!(received.is_empty());
    }
}

/// Goal: v3 fields in any order, unknown fields, repeated (merged) sub-messages
/// and `requestContext` pairs decode to the same value as protobuf-java's order.
#[test]
fn v3_field_order_and_unknown_fields_are_accepted() {
    // READ txnId 3 of ledger 5 entry 3 (§8.11), rewritten: sub-message before the
    // header, fields reversed, an unknown varint field 7 and an unknown group,
    // a context pair, and the sub-message split in two occurrences.
    let canonical = {
        let mut b =
            BytesMut::from(&[0x0a, 6, 8, 3, 0x10, 1, 0x18, 3, 0xa2, 6, 4, 8, 5, 0x10, 3][..]);
        RequestDecoder::default()
            .decode_body(&b.split().freeze())
            .unwrap()
    };
    let shuffled: &[u8] = &[
        0xa2, 0x06, 0x02, 0x10, 0x03, // readRequest { entryId 3 }
        0x38, 0x01, // unknown field 7
        0xc2, 0x0c, 0x06, 0x0a, 0x01, b'k', 0x12, 0x01, b'v', // requestContext {k, v}
        0x0a, 0x06, 0x18, 0x03, 0x10, 0x01, 0x08, 0x03, // header, reversed
        0x5b, 0x08, 0x01, 0x5c, // group 11 { field 1 = 1 }
        0xa2, 0x06, 0x02, 0x08, 0x05, // readRequest { ledgerId 5 } (merged)
    ];
    let decoded = RequestDecoder::default()
        .decode_body(&bytes::Bytes::from_static(shuffled))
        .unwrap();
    assert_eq!(decoded, canonical);
}

/// Goal: the client matches pipelined responses that come back in any order,
/// by txnId for v3 and by (ledger, entry, op) or requestId for v2, and respects
/// its pending-request limit.
#[test]
fn client_matches_out_of_order_responses() {
    let mut rng = Rng::new(0xc11e);
    let limit = 64;
    let mut client = ClientConnection::new(ClientConfig {
        max_frame_size: DEFAULT_MAX_FRAME_SIZE,
        max_pending_requests: limit,
    });
    let mut sent = Vec::new();
    for index in 0..limit {
        let v2 = index % 2 == 0;
        let frame = if v2 {
            // The client always sends version 2.
            loop {
                let frame = common::v2_request(&mut rng, index as u64 % 3);
                if matches!(frame.header, net::RequestHeader::V2 { version: 2, .. }) {
                    break frame;
                }
            }
        } else {
            common::v3_request(&mut rng, 1)
        };
        let id = if v2 {
            client.send_v2(frame.request.clone(), false).unwrap()
        } else {
            client.send_v3(frame.request.clone(), None).unwrap()
        };
        sent.push(id);
    }
    assert_eq!(
        client.send_v3(Request::ReadLac { ledger_id: 1 }, None),
        Err(net::client::ClientError::TooManyPendingRequests)
    );
    // Play the server: decode what the client wrote, answer in reverse order.
    let mut wire = BytesMut::from(&client.take_output()[..]);
    let mut decoder = RequestDecoder::default();
    let mut requests = Vec::new();
    while let Some(frame) = decoder.decode(&mut wire).unwrap() {
        requests.push(frame);
    }
    assert_eq!(requests.len(), limit);
    let mut replies = BytesMut::new();
    for request in requests.iter().rev() {
        let reply = ResponseFrame {
            header: request.reply_header(),
            response: request.request.error_response(StatusCode::ENOENTRY),
        };
        encode_response(&reply, &mut replies).unwrap();
    }
    // An unsolicited reply is dropped and counted.
    let stray = ResponseFrame {
        header: ResponseHeader::V3 {
            version: net::ProtocolVersion::Three,
            txn_id: 999_999,
            priority: None,
        },
        response: Response::Error {
            operation: net::OperationType::ReadLac,
            status: StatusCode::EOK,
        },
    };
    encode_response(&stray, &mut replies).unwrap();
    // Deliver in odd-sized pieces.
    let mut matched = Vec::new();
    for chunk in replies.chunks(37) {
        client.receive(chunk);
        while let Some((id, frame)) = client.poll_response().unwrap() {
            let index = sent.iter().position(|s| *s == id).expect("a sent id");
            assert_eq!(
                frame.response.operation(),
                requests[index].request.operation()
            );
            matched.push(id);
        }
    }
    matched.sort();
    assert_eq!(matched, sent);
    assert_eq!(client.pending_requests(), 0);
    assert_eq!(client.unmatched_responses(), 1);
}
