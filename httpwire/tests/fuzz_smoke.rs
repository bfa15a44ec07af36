//! Bounded fuzz smoke, run by `cargo test`: the fuzz target's properties (`common::check`) on
//! mutated requests from a fixed seed, and on heads and bodies at and around the admin
//! server's limits, which the fuzzer's short inputs reach only with tiny limits.
//!
//! Method: start from well-formed requests (with and without a body, pipelined, chunked,
//! half-sent), mutate them (byte stores from an HTTP alphabet, deletions, insertions,
//! truncation, splices of two seeds, duplicated spans) with an xorshift generator, and check
//! each input. Any failure prints the input, which `cargo fuzz run parse_request <file>`
//! replays once written to a file.

mod common;

use httpwire::{MAX_BODY, MAX_HEAD};

const SEEDS: &[&[u8]] = &[
    b"GET /heartbeat HTTP/1.1\r\nHost: localhost:8080\r\nUser-Agent: curl/8\r\nAccept: */*\r\n\r\n",
    b"PUT /api/v1/bookie/state/readonly HTTP/1.1\r\nContent-Length: 18\r\n\r\n{\"readOnly\": true}",
    b"PUT /api/v1/bookie/gc?x=1 HTTP/1.0\r\ncontent-length:\t2 \r\n\r\n{}GET / HTTP/1.1\r\n\r\n",
    b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    b"GET /metrics HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
    b"GET /api/v1/bookie/list_ledgers/ HTTP/1.1\r\nHost: x\r\n",
    b"DELETE /a/b/c// HTTP/1.1\r\nContent-Length: 65536\r\n\r\n",
];

const ALPHABET: &[u8] = b"\r\n :/?\t0123456789GETPUHTP/1.Content-LengthTransfer-Encoding\xff\x00";

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn mutate(rng: &mut Rng, input: &mut Vec<u8>) {
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(input.len() + 1);
        match rng.below(6) {
            0 if at < input.len() => input[at] = ALPHABET[rng.below(ALPHABET.len())],
            1 if at < input.len() => {
                input.remove(at);
            }
            2 => input.insert(at, ALPHABET[rng.below(ALPHABET.len())]),
            3 => input.truncate(at),
            4 => {
                let other = SEEDS[rng.below(SEEDS.len())];
                let from = rng.below(other.len());
                input.splice(at..at, other[from..].iter().copied());
            }
            _ if at < input.len() => {
                let end = (at + 1 + rng.below(16)).min(input.len());
                let span = input[at..end].to_vec();
                input.splice(at..at, span);
            }
            _ => {}
        }
    }
}

/// Thousands of mutated requests keep every property of the fuzz target.
#[test]
fn mutated_requests_keep_the_properties() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for round in 0..4000 {
        let mut input = SEEDS[round % SEEDS.len()].to_vec();
        mutate(&mut rng, &mut input);
        common::check(&input);
    }
    for seed in SEEDS {
        common::check(seed);
    }
}

/// Heads and bodies at the limits, a byte under and a byte over, with and without a
/// following request: 431 and 413 exactly past the limit.
#[test]
fn the_limits_keep_the_properties() {
    let request_line = b"PUT /x HTTP/1.1\r\nX-Pad: ";
    for head_len in [MAX_HEAD - 1, MAX_HEAD, MAX_HEAD + 1, MAX_HEAD + 4096] {
        for body_len in [0, MAX_BODY, MAX_BODY + 1] {
            let length = format!("\r\nContent-Length: {body_len}");
            let mut input = request_line.to_vec();
            input.resize(head_len - length.len() - 4, b'a');
            input.extend_from_slice(length.as_bytes());
            input.extend_from_slice(b"\r\n\r\n");
            assert_eq!(input.len(), head_len);
            let body_start = input.len();
            input.resize(body_start + body_len.min(MAX_BODY + 10), b'b');
            common::check(&input);
            input.extend_from_slice(b"GET /next HTTP/1.1\r\n\r\n");
            common::check(&input);
        }
    }
}
