//! The HTTP/1.1 request framing of the bookie's admin server (`bookie/src/admin/http.rs`),
//! without I/O: bytes go in as a socket delivers them, and a [`Request`] or a [`Refusal`] (the
//! status to answer) comes out. It is a crate of its own for two reasons. A cargo-fuzz target
//! (`httpwire/fuzz`) must be able to reach the parser, and `bookie` is a binary crate. And the
//! parser, which faces whoever can reach the admin port, must not grow a runtime or a
//! dependency: it uses std only.
//!
//! What is accepted: one request per connection (the server answers with `Connection: close`),
//! a request line `METHOD /target HTTP/1.x`, header lines `name: value` ended by a blank line,
//! and a body framed by `Content-Length` only. [`Limits`] keep a hostile client cheap. The head,
//! blank line included, is at most [`MAX_HEAD`] bytes, else 431. The body is at most
//! [`MAX_BODY`] bytes, else 413. A `Transfer-Encoding` is refused with 411. Anything malformed
//! gets a 400. Bytes after the request are ignored.
//!
//! The answer depends on the bytes alone, never on how they were cut into reads. A decision is
//! made at the first byte that settles it: the request's last byte, the blank line of a bad
//! head, or the head limit's last byte. The fuzz target checks this, and the bounded copy in
//! `tests/fuzz_smoke.rs` checks it on every `cargo test`.

#![forbid(unsafe_code)]

/// The longest request head, from the request line to its blank line inclusive (431 beyond).
pub const MAX_HEAD: usize = 16 << 10;
/// The longest body, as announced by `Content-Length` (413 beyond).
pub const MAX_BODY: usize = 64 << 10;

/// The end of a request head.
const BLANK_LINE: &[u8] = b"\r\n\r\n";

/// How much a request may take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The longest head, its blank line included.
    pub head_bytes_max: usize,
    /// The longest body.
    pub body_bytes_max: usize,
}

impl Default for Limits {
    /// The admin server's: [`MAX_HEAD`] and [`MAX_BODY`].
    fn default() -> Limits {
        Limits {
            head_bytes_max: MAX_HEAD,
            body_bytes_max: MAX_BODY,
        }
    }
}

/// A request as the routes see it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// The target before its first `?`, without trailing slashes: `/api/v1/bookie/state/` and
    /// `/api/v1/bookie/state` name one route (and `/` is the empty path).
    pub path: String,
    /// The target after its first `?` (empty if none), not decoded.
    pub query: String,
    /// Exactly `Content-Length` bytes.
    pub body: Vec<u8>,
}

/// A request that is not served: the status to answer and why, in one line without its
/// newline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub reason: &'static str,
}

impl Refusal {
    /// No blank line within [`Limits::head_bytes_max`] bytes.
    pub const HEAD_TOO_LARGE: Refusal = Refusal::new(431, "request head too large");
    /// The peer stopped sending before the blank line.
    pub const INCOMPLETE_HEAD: Refusal = Refusal::new(400, "incomplete request");
    /// The peer stopped sending before `Content-Length` bytes of body.
    pub const INCOMPLETE_BODY: Refusal = Refusal::new(400, "incomplete body");
    pub const HEAD_NOT_UTF8: Refusal = Refusal::new(400, "request head is not UTF-8");
    pub const MALFORMED_REQUEST_LINE: Refusal = Refusal::new(400, "malformed request line");
    /// A header line without a colon.
    pub const MALFORMED_HEADER: Refusal = Refusal::new(400, "malformed header");
    /// Not digits only, too large for a `usize`, or two `Content-Length` headers that differ
    /// (RFC 9112 §6.3: the framing is then unknown).
    pub const BAD_CONTENT_LENGTH: Refusal = Refusal::new(400, "bad Content-Length");
    /// A `Content-Length` over [`Limits::body_bytes_max`].
    pub const BODY_TOO_LARGE: Refusal = Refusal::new(413, "body too large");
    /// Any `Transfer-Encoding`: the admin routes' bodies are small and clients send a length.
    pub const TRANSFER_ENCODING: Refusal = Refusal::new(411, "send a Content-Length");

    const fn new(status: u16, reason: &'static str) -> Refusal {
        Refusal { status, reason }
    }
}

/// Where a [`RequestReader`] stands. Once it is not `NeedMore`, it never changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    NeedMore,
    /// The whole request is here: [`RequestReader::finish`] returns it.
    Complete,
    Refused(Refusal),
}

/// Reads one request from the bytes of a connection as they arrive. It keeps at most the head
/// limit plus the body limit, and it searches each byte for the blank line about once, so a
/// client that sends one byte at a time costs no more than one that sends the head at once.
#[derive(Debug)]
pub struct RequestReader {
    limits: Limits,
    state: State,
    /// Bytes given after the request's last byte, or after a refusal: ignored.
    surplus: usize,
}

#[derive(Debug)]
enum State {
    /// Looking for the blank line: the bytes so far (at most the head limit), of which the
    /// first `searched` have been searched.
    Head {
        bytes: Vec<u8>,
        searched: usize,
    },
    /// The head is parsed and the body is arriving.
    Body {
        request: Request,
        head_len: usize,
        content_length: usize,
    },
    Complete {
        request: Request,
        head_len: usize,
    },
    Refused(Refusal),
}

impl Default for RequestReader {
    fn default() -> RequestReader {
        RequestReader::new(Limits::default())
    }
}

impl RequestReader {
    pub fn new(limits: Limits) -> RequestReader {
        RequestReader {
            limits,
            state: State::Head {
                bytes: Vec::new(),
                searched: 0,
            },
            surplus: 0,
        }
    }

    /// Takes the next bytes of the connection.
    pub fn push(&mut self, bytes: &[u8]) -> Progress {
        let mut bytes = bytes;
        if let State::Head {
            bytes: head,
            searched,
        } = &mut self.state
        {
            let room = self.limits.head_bytes_max - head.len();
            let taken = room.min(bytes.len());
            head.extend_from_slice(&bytes[..taken]);
            bytes = &bytes[taken..];
            // The blank line may have started in an earlier push.
            let from = searched.saturating_sub(BLANK_LINE.len() - 1);
            let found = find(&head[from..], BLANK_LINE).map(|at| from + at);
            *searched = head.len();
            match found {
                Some(head_end) => {
                    let mut head = std::mem::take(head);
                    let head_len = head_end + BLANK_LINE.len();
                    let after = head.split_off(head_len);
                    head.truncate(head_end);
                    self.state = match parse_head(&head, self.limits) {
                        Ok((request, content_length)) => State::Body {
                            request,
                            head_len,
                            content_length,
                        },
                        Err(refusal) => State::Refused(refusal),
                    };
                    self.take_body(&after);
                }
                None if head.len() >= self.limits.head_bytes_max => {
                    self.state = State::Refused(Refusal::HEAD_TOO_LARGE);
                }
                None => debug_assert!(bytes.is_empty(), "the head had room for every byte"),
            }
        }
        self.take_body(bytes);
        self.progress()
    }

    /// Body bytes, then the surplus.
    fn take_body(&mut self, bytes: &[u8]) {
        let mut bytes = bytes;
        if let State::Body {
            request,
            head_len,
            content_length,
        } = &mut self.state
        {
            let taken = (*content_length - request.body.len()).min(bytes.len());
            request.body.extend_from_slice(&bytes[..taken]);
            bytes = &bytes[taken..];
            if request.body.len() == *content_length {
                let head_len = *head_len;
                let request = std::mem::take(request);
                self.state = State::Complete { request, head_len };
            }
        }
        self.surplus += bytes.len();
    }

    pub fn progress(&self) -> Progress {
        match &self.state {
            State::Head { .. } | State::Body { .. } => Progress::NeedMore,
            State::Complete { .. } => Progress::Complete,
            State::Refused(refusal) => Progress::Refused(*refusal),
        }
    }

    /// The head's length, its blank line included, once a valid head has been read.
    pub fn head_len(&self) -> Option<usize> {
        match &self.state {
            State::Body { head_len, .. } | State::Complete { head_len, .. } => Some(*head_len),
            State::Head { .. } | State::Refused(_) => None,
        }
    }

    /// The bytes given after the request's last byte or after a refusal, which were ignored.
    pub fn surplus(&self) -> usize {
        self.surplus
    }

    /// The request, or why there is none. Called before the request is complete (the peer
    /// sent its last byte, or reading failed), it gives the 400 for what is missing.
    pub fn finish(self) -> Result<Request, Refusal> {
        match self.state {
            State::Head { .. } => Err(Refusal::INCOMPLETE_HEAD),
            State::Body { .. } => Err(Refusal::INCOMPLETE_BODY),
            State::Complete { request, .. } => Ok(request),
            State::Refused(refusal) => Err(refusal),
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Parses a head without its blank line: the request line and the header lines, `\r\n`
/// apart. Gives the request, with an empty body, and the body's length. Only
/// `Content-Length` and `Transfer-Encoding` are read; other headers must have a colon and are
/// otherwise ignored. The first bad line decides the answer.
pub fn parse_head(head: &[u8], limits: Limits) -> Result<(Request, usize), Refusal> {
    let head = std::str::from_utf8(head).map_err(|_| Refusal::HEAD_NOT_UTF8)?;
    let mut lines = head.split("\r\n");
    let line = lines.next().unwrap_or_default();
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Refusal::MALFORMED_REQUEST_LINE);
    };
    if !version.starts_with("HTTP/1.") || method.is_empty() || !target.starts_with('/') {
        return Err(Refusal::MALFORMED_REQUEST_LINE);
    }
    let mut content_length: Option<usize> = None;
    for header in lines {
        let Some((name, value)) = header.split_once(':') else {
            return Err(Refusal::MALFORMED_HEADER);
        };
        // Optional white space is spaces and tabs (RFC 9110 §5.6.3), not all of Unicode's.
        let value = value.trim_matches([' ', '\t']);
        if name.eq_ignore_ascii_case("content-length") {
            let length = parse_content_length(value)?;
            if length > limits.body_bytes_max {
                return Err(Refusal::BODY_TOO_LARGE);
            }
            if content_length.is_some_and(|earlier| earlier != length) {
                return Err(Refusal::BAD_CONTENT_LENGTH);
            }
            content_length = Some(length);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(Refusal::TRANSFER_ENCODING);
        }
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let request = Request {
        method: method.to_string(),
        path: path.trim_end_matches('/').to_string(),
        query: query.to_string(),
        body: Vec::new(),
    };
    Ok((request, content_length.unwrap_or(0)))
}

/// `1*DIGIT` (RFC 9110 §8.6): no sign, no list, no other white space.
fn parse_content_length(value: &str) -> Result<usize, Refusal> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Refusal::BAD_CONTENT_LENGTH);
    }
    value.parse().map_err(|_| Refusal::BAD_CONTENT_LENGTH)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(bytes: &[u8]) -> Result<(Request, usize), Refusal> {
        parse_head(bytes, Limits::default())
    }

    /// Everything in one push, then the end of the connection.
    fn read(bytes: &[u8]) -> Result<Request, Refusal> {
        let mut reader = RequestReader::default();
        reader.push(bytes);
        reader.finish()
    }

    /// The request line, the two headers that frame a body, and the 400s, 411 and 413 of a
    /// bad head.
    #[test]
    fn request_heads() {
        let (r, len) =
            head(b"PUT /api/v1/bookie/state/readonly/?x=1 HTTP/1.1\r\nContent-Length: 17").unwrap();
        assert_eq!(r.method, "PUT");
        assert_eq!(r.path, "/api/v1/bookie/state/readonly");
        assert_eq!(r.query, "x=1");
        assert_eq!(len, 17);
        let bad: [&[u8]; 8] = [
            b"",
            b"GET",
            b"GET /x",
            b"GET x HTTP/1.1",
            b"GET /x HTTP/1.1 extra",
            b"GET /x SPDY/3\r\n",
            b"GET /x HTTP/1.1\r\nContent-Length: lots",
            b"GET /x HTTP/1.1\r\nno colon",
        ];
        for bytes in bad {
            assert_eq!(head(bytes).unwrap_err().status, 400, "{bytes:?}");
        }
        let huge = head(b"PUT /x HTTP/1.1\r\nContent-Length: 99999999").unwrap_err();
        assert_eq!(huge, Refusal::BODY_TOO_LARGE);
        let chunked = head(b"PUT /x HTTP/1.1\r\nTransfer-Encoding: chunked").unwrap_err();
        assert_eq!(chunked, Refusal::TRANSFER_ENCODING);
        assert_eq!(head(&[0xff, 0xfe]).unwrap_err(), Refusal::HEAD_NOT_UTF8);
    }

    /// `Content-Length` is digits and nothing else, and a repeated one must agree: a sign, a
    /// list, a non-breaking space or two different lengths leave the framing unknown.
    #[test]
    fn content_length_is_digits_and_agrees_with_itself() {
        for value in [
            "+5",
            "-5",
            "5, 5",
            "0x5",
            "\u{a0}5",
            "",
            "99999999999999999999999",
        ] {
            let bytes = format!("PUT /x HTTP/1.1\r\nContent-Length: {value}");
            assert_eq!(
                head(bytes.as_bytes()).unwrap_err(),
                Refusal::BAD_CONTENT_LENGTH,
                "{value:?}"
            );
        }
        let twice = b"PUT /x HTTP/1.1\r\nContent-Length: 5\r\ncontent-length: 6";
        assert_eq!(head(twice).unwrap_err(), Refusal::BAD_CONTENT_LENGTH);
        let same = b"PUT /x HTTP/1.1\r\nContent-Length: 5\r\ncontent-length:\t005 ";
        assert_eq!(head(same).unwrap().1, 5);
    }

    /// A head of exactly the limit, blank line included, is read; one byte more is a 431,
    /// decided when the limit's last byte arrives, whatever follows.
    #[test]
    fn the_head_limit_is_exact() {
        let prefix = b"GET /heartbeat HTTP/1.1\r\nX-Pad: ";
        let fill = |total: usize| {
            let mut bytes = prefix.to_vec();
            bytes.resize(total - BLANK_LINE.len(), b'a');
            bytes.extend_from_slice(BLANK_LINE);
            bytes
        };
        let fits = read(&fill(MAX_HEAD)).unwrap();
        assert_eq!(fits.path, "/heartbeat");
        assert_eq!(read(&fill(MAX_HEAD + 1)), Err(Refusal::HEAD_TOO_LARGE));

        let mut reader = RequestReader::default();
        let long = fill(MAX_HEAD + 100);
        assert_eq!(reader.push(&long[..MAX_HEAD - 1]), Progress::NeedMore);
        assert_eq!(
            reader.push(&long[MAX_HEAD - 1..MAX_HEAD]),
            Progress::Refused(Refusal::HEAD_TOO_LARGE)
        );
        assert_eq!(
            reader.push(b"\r\n\r\n"),
            Progress::Refused(Refusal::HEAD_TOO_LARGE)
        );
    }

    /// The body is exactly `Content-Length` bytes: the request is complete at its last byte,
    /// and what follows (a pipelined request) is surplus, never body.
    #[test]
    fn the_body_ends_at_content_length() {
        let bytes = b"PUT /x HTTP/1.1\r\nContent-Length: 5\r\n\r\nhelloGET /y HTTP/1.1\r\n\r\n";
        let mut reader = RequestReader::default();
        let head_len = bytes.len() - b"helloGET /y HTTP/1.1\r\n\r\n".len();
        let mut completed_at = None;
        for (i, byte) in bytes.iter().enumerate() {
            if reader.push(std::slice::from_ref(byte)) == Progress::Complete
                && completed_at.is_none()
            {
                completed_at = Some(i + 1);
            }
        }
        assert_eq!(completed_at, Some(head_len + 5));
        assert_eq!(reader.head_len(), Some(head_len));
        assert_eq!(reader.surplus(), bytes.len() - head_len - 5);
        let request = reader.finish().unwrap();
        assert_eq!(
            (request.method.as_str(), request.path.as_str()),
            ("PUT", "/x")
        );
        assert_eq!(request.body, b"hello");
    }

    /// A connection that ends early gets the 400 for what is missing; a request without a
    /// body is complete at its blank line.
    #[test]
    fn an_early_end_is_a_400() {
        assert_eq!(read(b""), Err(Refusal::INCOMPLETE_HEAD));
        assert_eq!(
            read(b"GET /x HTTP/1.1\r\nHost: a\r\n"),
            Err(Refusal::INCOMPLETE_HEAD)
        );
        assert_eq!(
            read(b"PUT /x HTTP/1.1\r\nContent-Length: 3\r\n\r\nab"),
            Err(Refusal::INCOMPLETE_BODY)
        );
        let request = read(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        assert_eq!((request.path.as_str(), request.body.len()), ("", 0));
    }

    /// A bad head is refused at its blank line, even if a body and more follow.
    #[test]
    fn a_bad_head_is_refused_at_its_blank_line() {
        let mut reader = RequestReader::default();
        assert_eq!(
            reader.push(b"GET /x HTTP/1.1\r\nbad\r\n"),
            Progress::NeedMore
        );
        let refused = Progress::Refused(Refusal::MALFORMED_HEADER);
        assert_eq!(reader.push(b"\r\nmore bytes"), refused);
        assert_eq!(reader.push(b"and more"), refused);
        assert_eq!(reader.finish(), Err(Refusal::MALFORMED_HEADER));
    }
}
