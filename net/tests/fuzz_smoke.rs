//! Bounded fuzz smoke, run by `cargo test`, and the allocation targets of the add
//! path.
//!
//! Method: start from valid frames of every kind (common generators), mutate them
//! (bit flips, byte stores, truncation, extension, rewritten length prefixes,
//! splices, pure noise) with a fixed seed, and feed each input to the server's
//! `RequestDecoder` (both detection modes) and to a `ClientConnection`. Each must
//! return without panicking, consume input or stop, and the server decoder must
//! not allocate more than the frame limit while doing it. Any frame the server
//! decodes must re-encode and decode to the same value (canonical stability).
//!
//! Allocation is measured with a counting global allocator, per thread so tests
//! running in parallel do not disturb each other. This file holds the crate's only
//! `unsafe`: the `GlobalAlloc` impl, which forwards to `System` unchanged. The
//! library itself is `#![forbid(unsafe_code)]`.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::{BufMut, Bytes, BytesMut};
use common::Rng;
use net::client::{ClientConfig, ClientConnection};
use net::codec::{encode_request, encode_response};
use net::server::{Detection, RequestDecoder};
use net::{ProtocolError, Request, RequestHeader};

struct CountingAllocator;

thread_local! {
    /// (bytes currently allocated by this thread, peak, number of allocations)
    static STATS: Cell<(usize, usize, usize)> = const { Cell::new((0, 0, 0)) };
}

fn record(grow: usize, shrink: usize, new_allocation: bool) {
    // try_with: the thread-local may be gone while a thread shuts down.
    let _ = STATS.try_with(|stats| {
        let (live, peak, count) = stats.get();
        let live = (live + grow).saturating_sub(shrink);
        stats.set((live, peak.max(live), count + usize::from(new_allocation)));
    });
}

// SAFETY: every method forwards to `System` with the same arguments; the only
// addition is bookkeeping in a thread-local `Cell`, which does not allocate.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        record(layout.size(), 0, true);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        record(0, layout.size(), false);
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        record(new_size, layout.size(), true);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// Runs `work` and returns (its result, peak bytes allocated above the starting
/// level, number of allocations) on this thread.
fn measure<T>(work: impl FnOnce() -> T) -> (T, usize, usize) {
    let (start_live, _, start_count) = STATS.with(Cell::get);
    STATS.with(|s| s.set((start_live, start_live, start_count)));
    let result = work();
    let (_, peak, count) = STATS.with(Cell::get);
    (result, peak - start_live, count - start_count)
}

const MAX_FRAME_SIZE: usize = 64 * 1024;

fn mutate(rng: &mut Rng, seed_frame: &[u8], other: &[u8]) -> Vec<u8> {
    let mut data = seed_frame.to_vec();
    for _ in 0..1 + rng.below(4) {
        match rng.below(8) {
            0 if !data.is_empty() => {
                let at = rng.below(data.len() as u64) as usize;
                data[at] ^= 1 << rng.below(8);
            }
            1 if !data.is_empty() => {
                let at = rng.below(data.len() as u64) as usize;
                data[at] = rng.pick(&[0x00, 0x0a, 0xff, 0x80, 0x7f, 0x02, 0x08, 0x10]);
            }
            2 => data.truncate(rng.below(data.len() as u64 + 1) as usize),
            3 => data.extend((0..rng.below(64)).map(|_| rng.next_u64() as u8)),
            4 if data.len() >= 4 => {
                // A lying length prefix: huge, negative, zero, or off by a little.
                let claimed: u32 = match rng.below(4) {
                    0 => rng.next_u64() as u32,
                    1 => 0,
                    2 => (data.len() as u32).wrapping_sub(4 + rng.below(3) as u32),
                    _ => u32::MAX,
                };
                data[..4].copy_from_slice(&claimed.to_be_bytes());
            }
            5 => data.extend_from_slice(other),
            6 => data = (0..rng.below(128)).map(|_| rng.next_u64() as u8).collect(),
            _ => {
                // Keep the prefix honest after an edit of the body.
                if data.len() >= 4 {
                    let body = (data.len() - 4) as u32;
                    data[..4].copy_from_slice(&body.to_be_bytes());
                }
            }
        }
    }
    data
}

fn valid_request_frames(rng: &mut Rng, count: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|_| {
            let mut out = BytesMut::new();
            encode_request(&common::any_request(rng), &mut out).unwrap();
            out.to_vec()
        })
        .collect()
}

/// Feeds `input` to a fresh decoder until it needs more bytes or fails.
fn drain(detection: Detection, input: &[u8]) -> Result<Vec<net::RequestFrame>, ProtocolError> {
    let mut decoder = RequestDecoder::new(MAX_FRAME_SIZE).with_detection(detection);
    let mut buffer = BytesMut::from(input);
    let mut frames = Vec::new();
    // Each decoded frame consumes at least 4 bytes, so this terminates.
    while let Some(frame) = decoder.decode(&mut buffer)? {
        frames.push(frame);
    }
    Ok(frames)
}

/// Goal: the server decoder survives 30 000 hostile inputs: no panic, no
/// allocation beyond the frame limit, and every frame it accepts is canonical.
#[test]
fn fuzz_smoke_server_decoder() {
    let mut rng = Rng::new(0xf022);
    let corpus = valid_request_frames(&mut rng, 300);
    let mut accepted = 0;
    let mut rejected = 0;
    for case in 0..30_000 {
        let seed_frame = &corpus[rng.below(corpus.len() as u64) as usize];
        let other = &corpus[rng.below(corpus.len() as u64) as usize];
        let input = mutate(&mut rng, seed_frame, other);
        for detection in [Detection::PerFrame, Detection::JavaOneWay] {
            // The decoder's own allocations only: the input copy is made inside,
            // so allow for it on top of the limit.
            let (result, peak, _) = measure(|| drain(detection, &input));
            assert!(
                peak <= MAX_FRAME_SIZE + input.len(),
                "case {case}: decoding allocated {peak} bytes"
            );
            match result {
                Ok(frames) => {
                    accepted += frames.len();
                    if detection == Detection::PerFrame {
                        for frame in frames {
                            let mut again = BytesMut::new();
                            encode_request(&frame, &mut again).unwrap_or_else(|e| {
                                panic!("case {case}: {frame:?} does not re-encode: {e}")
                            });
                            let back = drain(Detection::PerFrame, &again).unwrap();
                            assert_eq!(back, vec![frame], "case {case}");
                        }
                    }
                }
                Err(_) => rejected += 1,
            }
        }
    }
    eprintln!("server fuzz smoke: {accepted} frames accepted, {rejected} inputs rejected");
    // The mutations must reach both outcomes, or the smoke tests nothing.
    assert!(
        accepted > 1000 && rejected > 1000,
        "accepted {accepted}, rejected {rejected}"
    );
}

/// Goal: a frame claiming up to 4 GiB is refused from its prefix alone, before
/// anything is reserved, whatever the detection mode.
#[test]
fn oversized_prefix_is_refused_without_allocating() {
    for claimed in [MAX_FRAME_SIZE as u32 - 3, 1 << 30, u32::MAX >> 1] {
        let mut input = BytesMut::new();
        input.put_u32(claimed);
        input.put_slice(&[0x0a; 16]);
        let (result, peak, count) =
            measure(|| RequestDecoder::new(MAX_FRAME_SIZE).decode(&mut input));
        assert!(
            matches!(result, Err(ProtocolError::FrameTooLarge { .. })),
            "{result:?}"
        );
        assert_eq!((peak, count), (0, 0));
    }
}

/// Checks the canonical-form promise for one response body: if it decodes, it
/// re-encodes, and that decodes to the same value, except a v2 EUNKNOWNLEDGERSTATE,
/// which is written as EIO on purpose (Java v2 clients close on rc 107). Mirrors the
/// `decode_response` cargo-fuzz target.
fn check_response_round_trip(body: &Bytes) -> bool {
    let Ok(frame) = net::codec::decode_response(body) else {
        return false;
    };
    let mut encoded = BytesMut::new();
    encode_response(&frame, &mut encoded)
        .unwrap_or_else(|error| panic!("{frame:?} does not re-encode: {error}"));
    let again = net::codec::decode_response(&Bytes::copy_from_slice(&encoded[4..])).unwrap();
    if again != frame {
        let folded = matches!(frame.header, net::ResponseHeader::V2 { .. })
            && frame.response.status() == net::StatusCode::EUNKNOWNLEDGERSTATE
            && again.response.status() == net::StatusCode::EIO;
        assert!(folded, "{frame:?} came back as {again:?}");
        let mut twice = BytesMut::new();
        encode_response(&again, &mut twice).unwrap();
        assert_eq!(twice, encoded);
    }
    true
}

/// Goal: the first input the `decode_response` fuzz target failed on, a v2 batch-read
/// response with rc 107, is read as EUNKNOWNLEDGERSTATE and written back as EIO, and
/// nothing else about it changes.
#[test]
fn v2_unknown_ledger_state_response_folds_into_eio() {
    let mut frame = vec![
        0xe7, 0x07, 0, 0, 0, 0, 0, 0x6b, 0x08, 0x27, 0x03, 0xd7, 0x21, 0, 0, 0, 0x27, 0x03, 0xd7,
        0x21, 0, 0, 0, 0x21, 0xff, 0, 0, 0x4a,
    ];
    frame.extend_from_slice(&[0; 8]);
    let body = Bytes::from(frame);
    let decoded = net::codec::decode_response(&body).unwrap();
    assert_eq!(
        decoded.response.status(),
        net::StatusCode::EUNKNOWNLEDGERSTATE
    );
    assert!(check_response_round_trip(&body));
}

/// Goal: the client survives hostile responses the same way: no panic, and the
/// connection is either served or failed; and every response body that decodes
/// keeps its value through a re-encode.
#[test]
fn fuzz_smoke_client_decoder() {
    let mut rng = Rng::new(0xc0de);
    let corpus: Vec<Vec<u8>> = (0..300)
        .map(|_| {
            let mut out = BytesMut::new();
            encode_response(&common::any_response(&mut rng), &mut out).unwrap();
            out.to_vec()
        })
        .collect();
    let mut failed = 0;
    let mut round_trips = 0;
    for _ in 0..20_000 {
        let seed_frame = &corpus[rng.below(corpus.len() as u64) as usize];
        let other = &corpus[rng.below(corpus.len() as u64) as usize];
        let input = mutate(&mut rng, seed_frame, other);
        let mut client = ClientConnection::new(ClientConfig {
            max_frame_size: MAX_FRAME_SIZE,
            max_pending_requests: 8,
        });
        // One v2 and one v3 request pending, so both decoders are in play.
        client
            .send_v3(Request::ReadLac { ledger_id: 5 }, None)
            .unwrap();
        let read = Request::ReadEntry {
            ledger_id: 5,
            entry_id: 3,
            master_key: None,
            flag: None,
            previous_lac: None,
            time_out: None,
        };
        client.send_v2(read, false).unwrap();
        let mut frames = BytesMut::from(&input[..]);
        while let Ok(Some(body)) = net::frame::split_frame(&mut frames, MAX_FRAME_SIZE) {
            round_trips += usize::from(check_response_round_trip(&body));
        }
        client.receive(&input);
        loop {
            match client.poll_response() {
                Ok(Some(_)) => continue,
                Ok(None) => break,
                Err(_) => {
                    failed += 1;
                    let pending = client.pending_requests();
                    assert_eq!(client.fail_all().len(), pending);
                    assert_eq!(client.pending_requests(), 0);
                    break;
                }
            }
        }
    }
    eprintln!(
        "client fuzz smoke: {failed} of 20000 connections failed, {round_trips} responses round-tripped"
    );
    assert!(failed > 1000, "failed {failed}");
    assert!(round_trips > 1000, "round trips {round_trips}");
}

fn add_request_frames(count: usize, v2: bool) -> BytesMut {
    let body = {
        let mut entry = Vec::with_capacity(1024);
        entry.extend_from_slice(&5i64.to_be_bytes());
        entry.extend_from_slice(&3i64.to_be_bytes());
        entry.resize(1024, 0x5a);
        Bytes::from(entry)
    };
    let request = Request::AddEntry {
        ledger_id: 5,
        entry_id: 3,
        master_key: Bytes::from_static(&[7; 20]),
        body,
        recovery: false,
        write_flags: None,
    };
    let header = if v2 {
        RequestHeader::v2()
    } else {
        RequestHeader::v3(1)
    };
    let frame = net::RequestFrame { header, request };
    let mut out = BytesMut::new();
    for _ in 0..count {
        encode_request(&frame, &mut out).unwrap();
    }
    out
}

/// Goal (issue target): decoding a 1 KiB ADD allocates nothing but the `Bytes`
/// handle; encoding an ADD request or its reply into a reserved buffer allocates
/// nothing. Method: decode one frame to warm up (the receive buffer becomes
/// shared on the first split), then count allocations over 1000 more.
#[test]
fn add_path_does_not_allocate() {
    for v2 in [false, true] {
        let mut received = add_request_frames(1001, v2);
        let mut decoder = RequestDecoder::default();
        let first = decoder.decode(&mut received).unwrap().unwrap();
        let (decoded, _, allocations) = measure(|| {
            let mut decoded = 0;
            while let Some(frame) = decoder.decode(&mut received).unwrap() {
                assert!(matches!(frame.request, Request::AddEntry { .. }));
                decoded += 1;
            }
            decoded
        });
        assert_eq!(decoded, 1000);
        assert_eq!(allocations, 0, "decode v2={v2}");

        let mut out = BytesMut::with_capacity(2 * 1024 * 1024);
        let reply = net::ResponseFrame {
            header: first.reply_header(),
            response: first.request.error_response(net::StatusCode::EOK),
        };
        let (_, _, allocations) = measure(|| {
            for _ in 0..1000 {
                encode_request(&first, &mut out).unwrap();
                encode_response(&reply, &mut out).unwrap();
            }
        });
        assert_eq!(allocations, 0, "encode v2={v2}");
    }
}
