//! Helpers shared by the end-to-end tests (each test binary uses the parts it needs).

#![allow(dead_code)]

pub mod bookie;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use bytes::Bytes;
use net::Request;

/// A loopback port nobody listens on right now, and never handed out before in this test
/// process: the tests of one binary run in parallel threads, and two of them must not be given
/// the same port between its release here and a bookie's bind (a client would then talk to
/// another test's bookie; with TLS, to one whose CA has the same name: `BadSignature`).
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// A temporary directory on the real disk (the target dir), removed on drop.
pub fn tempdir(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("temp dir")
}

/// An entry as a BookKeeper client builds it: ledger, entry, writer LAC, length, payload.
pub fn entry(ledger: i64, entry: i64, lac: i64, payload: &[u8]) -> Bytes {
    let mut v = Vec::with_capacity(32 + payload.len());
    v.extend_from_slice(&ledger.to_be_bytes());
    v.extend_from_slice(&entry.to_be_bytes());
    v.extend_from_slice(&lac.to_be_bytes());
    v.extend_from_slice(&(payload.len() as i64).to_be_bytes());
    v.extend_from_slice(payload);
    Bytes::from(v)
}

/// A plain read of one entry.
pub fn read(ledger: i64, e: i64) -> Request {
    Request::ReadEntry {
        ledger_id: ledger,
        entry_id: e,
        master_key: None,
        flag: None,
        previous_lac: None,
        time_out: None,
    }
}

/// One HTTP/1.1 request to the admin server on `port`: (status, body).
pub fn http(port: u16, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("http connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).expect("http response");
    let status = out
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (status, body.to_string())
}
