//! The properties of [`httpwire::RequestReader`] that the fuzz target
//! (`httpwire/fuzz/fuzz_targets/parse_request.rs`) and the bounded smoke run
//! (`tests/fuzz_smoke.rs`) both check. The file is shared so that the two cannot drift apart.
//!
//! For each input, read with the admin server's limits and with tiny limits taken from the
//! input's first two bytes (so short inputs reach the 431 and 413 paths too):
//!
//! - no panic; the same bytes read twice give the same answer;
//! - the answer does not depend on how the bytes are cut into pushes: all at once, one byte at
//!   a time, and in pseudo-random chunks (lengths drawn from a hash of the input) agree on the
//!   progress, the request, the head's length and the surplus;
//! - once decided, the answer never changes, and it is decided at the byte that settles it:
//!   the request's last byte, the blank line of a refused head, or the head limit's last byte;
//! - it equals a plain one-shot model of the framing (find the blank line within the limit,
//!   parse the head, count the body);
//! - a request's head is at most the head limit and the bytes given, its body is exactly its
//!   `Content-Length` and at most the body limit, and head + body + surplus is every byte;
//! - a refusal is one of the documented statuses, and ending the connection early is a 400.

use httpwire::{parse_head, Limits, Progress, Refusal, Request, RequestReader, MAX_BODY, MAX_HEAD};

/// Everything the reader tells after some pushes.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    progress: Progress,
    head_len: Option<usize>,
    surplus: usize,
    answer: Result<Request, Refusal>,
}

/// Reads `data` pushed in chunks of the given lengths (the last chunk takes what is left).
/// Returns the outcome and how many bytes had been pushed when the answer was decided.
fn read_in_chunks(
    data: &[u8],
    limits: Limits,
    lengths: &mut dyn Iterator<Item = usize>,
) -> (Outcome, Option<usize>) {
    let mut reader = RequestReader::new(limits);
    let mut pushed = 0;
    let mut decided_at = None;
    let mut decided = Progress::NeedMore;
    while pushed < data.len() {
        let length = lengths
            .next()
            .unwrap_or(data.len())
            .clamp(1, data.len() - pushed);
        let progress = reader.push(&data[pushed..pushed + length]);
        pushed += length;
        match decided {
            Progress::NeedMore => {
                if progress != Progress::NeedMore {
                    decided = progress;
                    decided_at = Some(pushed);
                }
            }
            _ => assert_eq!(progress, decided, "a decided answer changed"),
        }
    }
    (finish(reader), decided_at)
}

fn finish(reader: RequestReader) -> Outcome {
    Outcome {
        progress: reader.progress(),
        head_len: reader.head_len(),
        surplus: reader.surplus(),
        answer: reader.finish(),
    }
}

/// The framing written the plain way: everything at once, no resumption.
fn model(data: &[u8], limits: Limits) -> Outcome {
    let window = &data[..data.len().min(limits.head_bytes_max)];
    let Some(head_end) = window.windows(4).position(|w| w == b"\r\n\r\n") else {
        if data.len() >= limits.head_bytes_max {
            return refused(Refusal::HEAD_TOO_LARGE, data.len() - window.len());
        }
        return Outcome {
            progress: Progress::NeedMore,
            head_len: None,
            surplus: 0,
            answer: Err(Refusal::INCOMPLETE_HEAD),
        };
    };
    let head_len = head_end + 4;
    let (mut request, content_length) = match parse_head(&data[..head_end], limits) {
        Ok(parsed) => parsed,
        Err(refusal) => return refused(refusal, data.len() - head_len),
    };
    let body = &data[head_len..];
    if body.len() < content_length {
        return Outcome {
            progress: Progress::NeedMore,
            head_len: Some(head_len),
            surplus: 0,
            answer: Err(Refusal::INCOMPLETE_BODY),
        };
    }
    request.body = body[..content_length].to_vec();
    Outcome {
        progress: Progress::Complete,
        head_len: Some(head_len),
        surplus: body.len() - content_length,
        answer: Ok(request),
    }
}

fn refused(refusal: Refusal, surplus: usize) -> Outcome {
    Outcome {
        progress: Progress::Refused(refusal),
        head_len: None,
        surplus,
        answer: Err(refusal),
    }
}

/// Chunk lengths from a hash of the input: mostly short, sometimes long.
fn chunk_lengths(data: &[u8]) -> impl Iterator<Item = usize> {
    let mut state = data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    }) | 1;
    std::iter::from_fn(move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        Some(match state % 8 {
            0 => 1 + (state >> 8) as usize % 4096,
            _ => 1 + (state >> 8) as usize % 16,
        })
    })
}

/// Every property above, for one input.
pub fn check(data: &[u8]) {
    check_with(data, Limits::default());
    if let [head, body, rest @ ..] = data {
        let tiny = Limits {
            // A limit under 4 bytes could not hold the blank line.
            head_bytes_max: 4 + usize::from(*head),
            body_bytes_max: usize::from(*body),
        };
        check_with(rest, tiny);
    }
}

fn check_with(data: &[u8], limits: Limits) {
    let (whole, _) = read_in_chunks(data, limits, &mut std::iter::once(data.len()));
    let (again, _) = read_in_chunks(data, limits, &mut std::iter::once(data.len()));
    assert_eq!(whole, again, "the same bytes read twice");
    let (bytewise, decided_at) = read_in_chunks(data, limits, &mut std::iter::repeat(1));
    assert_eq!(whole, bytewise, "all at once vs one byte at a time");
    let (chunked, _) = read_in_chunks(data, limits, &mut chunk_lengths(data));
    assert_eq!(whole, chunked, "all at once vs in chunks");
    assert_eq!(whole, model(data, limits), "the reader vs the plain model");

    match &whole.answer {
        Ok(request) => {
            let head_len = whole.head_len.expect("a complete request has a head");
            assert_eq!(whole.progress, Progress::Complete);
            assert!(head_len <= limits.head_bytes_max && head_len <= data.len());
            assert!(request.body.len() <= limits.body_bytes_max);
            assert_eq!(head_len + request.body.len() + whole.surplus, data.len());
            assert_eq!(decided_at, Some(head_len + request.body.len()));
            assert!(request.path.is_empty() || request.path.starts_with('/'));
            assert!(!request.path.contains('?') && !request.path.ends_with('/'));
            assert!(!request.method.is_empty());
        }
        Err(refusal) => {
            assert!(
                matches!(refusal.status, 400 | 411 | 413 | 431),
                "{refusal:?}"
            );
            match whole.progress {
                Progress::Refused(r) => {
                    assert_eq!(r, *refusal);
                    if r == Refusal::HEAD_TOO_LARGE {
                        assert_eq!(decided_at, Some(limits.head_bytes_max));
                    } else {
                        // Decided at the blank line, which ends within the head limit.
                        let at = decided_at.expect("decided");
                        assert_eq!(&data[at - 4..at], b"\r\n\r\n");
                        assert!(at <= limits.head_bytes_max);
                    }
                    assert_eq!(decided_at.map(|at| at + whole.surplus), Some(data.len()));
                }
                Progress::NeedMore => {
                    assert_eq!(refusal.status, 400);
                    assert_eq!(decided_at, None);
                    assert_eq!(whole.surplus, 0);
                }
                Progress::Complete => panic!("complete without a request"),
            }
        }
    }
    // The server's limits are the documented ones.
    assert_eq!(
        Limits::default(),
        Limits {
            head_bytes_max: MAX_HEAD,
            body_bytes_max: MAX_BODY,
        }
    );
}
