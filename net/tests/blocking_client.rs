//! The blocking client over a real TCP socket, against a toy bookie built from
//! the same crate's server side.
//!
//! Method: a thread accepts one connection, decodes requests with
//! `RequestDecoder`, and answers every batch it reads in reverse order (adds EOK,
//! reads with a body, everything else via `error_response`). The client pipelines
//! v2 and v3 requests on one connection and checks each reply reaches the request
//! that caused it.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::thread;

use bytes::{Bytes, BytesMut};
use net::client::blocking::BlockingClient;
use net::client::ClientConfig;
use net::codec::encode_response;
use net::server::RequestDecoder;
use net::{Request, Response, ResponseFrame, StatusCode};

fn toy_bookie(listener: TcpListener) {
    let (mut stream, _) = listener.accept().unwrap();
    let mut decoder = RequestDecoder::default();
    let mut received = BytesMut::new();
    let mut chunk = [0u8; 4096];
    loop {
        let count = match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(count) => count,
        };
        received.extend_from_slice(&chunk[..count]);
        let mut batch = Vec::new();
        while let Some(frame) = decoder.decode(&mut received).expect("valid requests") {
            batch.push(frame);
        }
        let mut out = BytesMut::new();
        for frame in batch.iter().rev() {
            let response = match &frame.request {
                Request::ReadEntry {
                    ledger_id,
                    entry_id,
                    ..
                } => Response::ReadEntry {
                    status: StatusCode::EOK,
                    ledger_id: *ledger_id,
                    entry_id: *entry_id,
                    body: Some(Bytes::from(format!("entry {ledger_id}/{entry_id}"))),
                    max_lac: (!frame.header.is_v2()).then_some(*entry_id),
                    lac_update_timestamp: None,
                },
                other => other.error_response(StatusCode::EOK),
            };
            let reply = ResponseFrame {
                header: frame.reply_header(),
                response,
            };
            encode_response(&reply, &mut out).unwrap();
        }
        stream.write_all(&out).unwrap();
    }
}

fn entry(ledger_id: i64, entry_id: i64) -> Bytes {
    let mut body = Vec::new();
    body.extend_from_slice(&ledger_id.to_be_bytes());
    body.extend_from_slice(&entry_id.to_be_bytes());
    body.extend_from_slice(b"payload");
    Bytes::from(body)
}

/// Goal: pipelined v2 and v3 requests on one TCP connection all complete with
/// their own replies, whatever order the bookie answers in.
#[test]
fn pipelined_requests_over_tcp() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let server = thread::spawn(move || toy_bookie(listener));

    let mut client = BlockingClient::connect(address, ClientConfig::default()).unwrap();
    client
        .stream()
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let mut expected = Vec::new();
    for entry_id in 0..10 {
        let add = Request::AddEntry {
            ledger_id: 7,
            entry_id,
            master_key: Bytes::from_static(&[1; 20]),
            body: entry(7, entry_id),
            recovery: false,
            write_flags: None,
        };
        let id = client.send_v2(add, false).unwrap();
        expected.push((
            id,
            Response::AddEntry {
                status: StatusCode::EOK,
                ledger_id: 7,
                entry_id,
            },
        ));
    }
    for entry_id in 0..5 {
        let read = Request::ReadEntry {
            ledger_id: 7,
            entry_id,
            master_key: None,
            flag: None,
            previous_lac: None,
            time_out: None,
        };
        let id = client.send_v3(read, None).unwrap();
        let body = Some(Bytes::from(format!("entry 7/{entry_id}")));
        let response = Response::ReadEntry {
            status: StatusCode::EOK,
            ledger_id: 7,
            entry_id,
            body,
            max_lac: Some(entry_id),
            lac_update_timestamp: None,
        };
        expected.push((id, response));
    }
    let mut received = Vec::new();
    for _ in 0..expected.len() {
        let (id, frame) = client.receive().unwrap();
        received.push((id, frame.response));
    }
    received.sort_by_key(|(id, _)| *id);
    assert_eq!(received, expected);

    let info = client
        .call_v3(Request::GetBookieInfo { requested: Some(3) }, None)
        .unwrap();
    assert_eq!(info.response.status(), StatusCode::EOK);
    assert_eq!(client.connection().pending_requests(), 0);
    drop(client);
    server.join().unwrap();
}
