//! Differential-check helper: decodes protobuf bodies given as hex, one per line, and
//! prints whether this crate accepts each one.
//!
//! Why: the v3 parser must accept and reject exactly what the Java bookie's parser does
//! (protobuf-java up to BookKeeper 4.17, LightProto from 4.18). Feeding the same lines to
//! a small Java program built on `bookkeeper-proto` and to this one, then diffing the
//! outputs, finds every disagreement (net/fuzz/differential/README.md).
//!
//! Input lines: `req HEX` (a v3 `Request` body), `resp HEX` (a v3 `Response` body) or
//! `auth HEX` (an `AuthMessage`, as the v2 AUTH frame carries it). Output, one line per
//! input: `OK <decoded value>` or `ERR <why>`. With `--canon`, an accepted request is
//! printed as the hex of its re-encoded body instead, to compare decoded values with
//! what protobuf-java re-serializes.
//!
//! Run: `cargo run -p net --example decode_hex [-- --canon] < cases.txt`.

use std::io::{self, BufRead, Write};

use bytes::{BufMut, Bytes, BytesMut};
use net::codec;

fn main() -> io::Result<()> {
    let canon = std::env::args().any(|arg| arg == "--canon");
    let stdin = io::stdin();
    let mut out = io::BufWriter::new(io::stdout().lock());
    for line in stdin.lock().lines() {
        let line = line?;
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let (kind, hex) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        writeln!(out, "{}", verdict(kind, hex, canon))?;
    }
    out.flush()
}

/// `OK ...` or `ERR ...` for one input line.
fn verdict(kind: &str, hex: &str, canon: bool) -> String {
    let Some(body) = parse_hex(hex) else {
        return "ERR bad hex".to_string();
    };
    let result = match kind {
        "req" if canon => codec::decode_request_v3(&body).map(|frame| reencoded(&frame)),
        "req" => codec::decode_request_v3(&body).map(|frame| format!("{frame:?}")),
        "resp" => codec::decode_response_v3(&body).map(|frame| format!("{frame:?}")),
        "auth" => codec::decode_request_v2(&v2_auth_body(&body)).map(|frame| format!("{frame:?}")),
        _ => return format!("ERR unknown kind {kind}"),
    };
    match result {
        Ok(value) => format!("OK {value}"),
        Err(error) => format!("ERR {error}"),
    }
}

/// The hex of `frame` encoded again, without its length prefix.
fn reencoded(frame: &net::RequestFrame) -> String {
    let mut out = BytesMut::new();
    match codec::encode_request(frame, &mut out) {
        Ok(()) => out[4..].iter().map(|byte| format!("{byte:02x}")).collect(),
        Err(error) => format!("(does not re-encode: {error})"),
    }
}

/// A v2 AUTH request body (version 2, opcode 3, no flags) carrying `message`.
fn v2_auth_body(message: &[u8]) -> Bytes {
    let mut body = BytesMut::with_capacity(4 + message.len());
    body.put_slice(&[0x02, 0x03, 0x00, 0x00]);
    body.put_slice(message);
    body.freeze()
}

fn parse_hex(hex: &str) -> Option<Bytes> {
    let digits: Vec<u8> = hex.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok())
        .collect::<Option<Vec<u8>>>()
        .map(Bytes::from)
}
