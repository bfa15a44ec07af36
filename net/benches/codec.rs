//! Codec micro-benchmark for the target: decoding and encoding an ADD of
//! a 1 KiB entry, each under 200 ns, with no allocation besides the `Bytes` handle
//! (the allocation half is asserted in tests/fuzz_smoke.rs).
//!
//! Run: `cargo bench -p net --bench codec`. No criterion (it would change the
//! workspace lock file): each case runs in rounds of 10 000 operations and the
//! best round is reported as ns/op, which filters out scheduler noise on a shared
//! machine. Decoding includes framing (`split_to(..).freeze()` of the receive
//! buffer) and protocol detection, as the server runs it.

use std::hint::black_box;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use net::codec::{encode_request, encode_response};
use net::server::RequestDecoder;
use net::{Request, RequestFrame, RequestHeader, ResponseFrame, StatusCode};

const OPS_PER_ROUND: usize = 10_000;
const ROUNDS: usize = 30;

fn add_frame(v2: bool) -> RequestFrame {
    let mut entry = Vec::with_capacity(1024);
    entry.extend_from_slice(&5i64.to_be_bytes());
    entry.extend_from_slice(&3i64.to_be_bytes());
    entry.resize(1024, 0x5a);
    RequestFrame {
        header: if v2 {
            RequestHeader::v2()
        } else {
            RequestHeader::v3(1)
        },
        request: Request::AddEntry {
            ledger_id: 5,
            entry_id: 3,
            master_key: Bytes::from_static(&[7; 20]),
            body: Bytes::from(entry),
            recovery: false,
            write_flags: None,
        },
    }
}

fn best_ns_per_op(mut round: impl FnMut() -> std::time::Duration) -> f64 {
    (0..ROUNDS)
        .map(|_| round().as_nanos() as f64 / OPS_PER_ROUND as f64)
        .fold(f64::INFINITY, f64::min)
}

fn bench_decode(v2: bool) -> f64 {
    let frame = add_frame(v2);
    let mut source = BytesMut::new();
    for _ in 0..OPS_PER_ROUND {
        encode_request(&frame, &mut source).unwrap();
    }
    best_ns_per_op(|| {
        let mut received = BytesMut::from(&source[..]); // not timed
        let mut decoder = RequestDecoder::default();
        let start = Instant::now();
        while let Some(decoded) = decoder.decode(&mut received).unwrap() {
            black_box(&decoded);
        }
        start.elapsed()
    })
}

fn bench_encode_request(v2: bool) -> f64 {
    let frame = add_frame(v2);
    let mut out = BytesMut::with_capacity(OPS_PER_ROUND * 1200);
    best_ns_per_op(|| {
        out.clear();
        let start = Instant::now();
        for _ in 0..OPS_PER_ROUND {
            encode_request(black_box(&frame), &mut out).unwrap();
        }
        start.elapsed()
    })
}

fn bench_encode_response(v2: bool) -> f64 {
    let request = add_frame(v2);
    let reply = ResponseFrame {
        header: request.reply_header(),
        response: request.request.error_response(StatusCode::EOK),
    };
    let mut out = BytesMut::with_capacity(OPS_PER_ROUND * 64);
    best_ns_per_op(|| {
        out.clear();
        let start = Instant::now();
        for _ in 0..OPS_PER_ROUND {
            encode_response(black_box(&reply), &mut out).unwrap();
        }
        start.elapsed()
    })
}

fn main() {
    // `cargo test --benches` runs this with `--bench` absent; keep that quick.
    if !std::env::args().any(|arg| arg == "--bench") {
        println!("codec bench: run with `cargo bench -p net --bench codec`");
        return;
    }
    println!("ADD of a 1 KiB entry, best of {ROUNDS} rounds x {OPS_PER_ROUND} ops, ns/op");
    for (name, v2) in [("v3", false), ("v2", true)] {
        println!(
            "  {name} decode request (framing + detection + parse): {:7.1}",
            bench_decode(v2)
        );
        println!(
            "  {name} encode request (1 KiB copied into the frame): {:7.1}",
            bench_encode_request(v2)
        );
        println!(
            "  {name} encode response:                              {:7.1}",
            bench_encode_response(v2)
        );
    }
}
