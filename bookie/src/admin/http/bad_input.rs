//! Bad input against the real admin server: an [`HttpServer`] on a free port of 127.0.0.1,
//! with its own thread and runtime as in the bookie, serving a stub [`Service`] that answers
//! `METHOD path body="..."`, so that each answer names the request it answers. The routes
//! are not under test here (bookie/tests/admin.rs runs them in a real bookie). Under test are
//! the server's own answers to hostile clients: huge heads, slow heads, pipelined requests
//! and half-closed connections, each answered exactly as asserted or closed, with no hang
//! and no leaked connection slot.
//!
//! Each client sets a generous read timeout ([`HANG`]), only to turn a hang into a failure.
//! No test asserts how fast the server is.

use std::future::Future;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::pin::Pin;
use std::time::{Duration, Instant};

use super::{HttpServer, Request, Response, Service, MAX_CONNECTIONS, REQUEST_TIMEOUT};

/// How long a client waits for anything before the test calls it a hang.
const HANG: Duration = Duration::from_secs(20);

struct Echo;

impl Service for Echo {
    fn handle<'a>(&'a self, r: &'a Request) -> Pin<Box<dyn Future<Output = Response> + Send + 'a>> {
        Box::pin(async move {
            let body = String::from_utf8_lossy(&r.body);
            Response::text(200, &format!("{} {} body={body:?}\n", r.method, r.path))
        })
    }
}

fn server(request_timeout: Duration) -> HttpServer {
    HttpServer::start_with_timeout(Echo, "127.0.0.1", 0, None, request_timeout)
        .expect("an admin server on a free port")
}

fn connect(server: &HttpServer) -> TcpStream {
    let stream = TcpStream::connect(server.addr).expect("connect");
    stream.set_read_timeout(Some(HANG)).unwrap();
    stream.set_write_timeout(Some(HANG)).unwrap();
    stream
}

/// Everything the server sends until it closes the connection. A reset counts as closing;
/// waiting [`HANG`] fails the test.
fn until_closed(stream: &mut TcpStream) -> Vec<u8> {
    let mut received = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => return received,
            Ok(n) => received.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return received,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => panic!(
                "the server neither answered nor closed: {e}; received {:?}",
                String::from_utf8_lossy(&received)
            ),
        }
    }
}

/// The status and body of exactly one answer with `Connection: close`, nothing after it.
fn one_answer(bytes: &[u8]) -> (u16, String) {
    let text = String::from_utf8_lossy(bytes);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        panic!("no answer: {text:?}");
    };
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {status_line:?}"));
    let mut content_length = None;
    let mut close = false;
    for line in lines {
        match line.split_once(": ") {
            Some(("Content-Length", value)) => content_length = value.parse::<usize>().ok(),
            Some(("Connection", value)) => close = value == "close",
            _ => {}
        }
    }
    assert!(close, "Connection: close in {head:?}");
    assert_eq!(
        content_length,
        Some(body.len()),
        "one answer and nothing after its body: {text:?}"
    );
    (status, body.to_string())
}

/// Sends `bytes` on a new connection and returns the one answer before the server closes.
fn ask(server: &HttpServer, bytes: &[u8]) -> (u16, String) {
    let mut stream = connect(server);
    stream.write_all(bytes).unwrap();
    one_answer(&until_closed(&mut stream))
}

fn answer(status: u16, body: &str) -> (u16, String) {
    (status, body.to_string())
}

/// A head over 16 KiB, whether many short headers ending in a blank line or one header line
/// that never ends (64 KiB sent), gets a 431 and the connection closed; a body announced over
/// 64 KiB gets a 413. The server answers normally afterwards.
#[test]
fn a_huge_head_gets_431_and_the_connection_closed() {
    let server = server(REQUEST_TIMEOUT);
    let too_large = answer(431, "request head too large\n");

    let mut many = b"GET /heartbeat HTTP/1.1\r\n".to_vec();
    while many.len() <= httpwire::MAX_HEAD + 4096 {
        let header = format!("X-Header-{}: {}\r\n", many.len(), "v".repeat(100));
        many.extend_from_slice(header.as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    assert_eq!(ask(&server, &many), too_large);

    let mut endless = b"GET /heartbeat HTTP/1.1\r\nX-Endless: ".to_vec();
    endless.resize(64 << 10, b'a');
    assert_eq!(ask(&server, &endless), too_large);

    let body_too_large = format!(
        "PUT /x HTTP/1.1\r\nContent-Length: {}\r\n\r\nsome",
        httpwire::MAX_BODY + 1
    );
    assert_eq!(
        ask(&server, body_too_large.as_bytes()),
        answer(413, "body too large\n")
    );
    assert_eq!(
        ask(&server, b"GET /heartbeat HTTP/1.1\r\n\r\n"),
        answer(200, "GET /heartbeat body=\"\"\n")
    );
}

/// After a refusal the server goes on reading what the client sends (up to a request's
/// worth) until the client closes: a client that reads the 413 and then sends the body it
/// had announced can write all of it, instead of meeting a reset. Without this, a client
/// still writing when the refusal comes gets a reset, which on some systems destroys the
/// answer before it is read.
#[test]
fn after_a_refusal_the_server_reads_what_the_client_still_sends() {
    let server = server(REQUEST_TIMEOUT);
    let mut stream = connect(&server);
    let length = httpwire::MAX_BODY + 1;
    let head = format!("PUT /x HTTP/1.1\r\nContent-Length: {length}\r\n\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    assert_eq!(
        one_answer(&until_closed(&mut stream)),
        answer(413, "body too large\n")
    );
    for _ in 0..length / 4096 {
        stream
            .write_all(&[b'b'; 4096])
            .expect("the server still reads");
        std::thread::sleep(Duration::from_millis(1));
    }
    stream.shutdown(Shutdown::Write).unwrap();
}

/// The parser's other refusals reach the client as its status and reason.
#[test]
fn malformed_requests_get_their_4xx() {
    let server = server(REQUEST_TIMEOUT);
    let cases: [(&[u8], (u16, String)); 5] = [
        (
            b"PUT /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            answer(411, "send a Content-Length\n"),
        ),
        (
            b"GET heartbeat HTTP/1.1\r\n\r\n",
            answer(400, "malformed request line\n"),
        ),
        (
            b"GET /x HTTP/1.1\r\nno colon\r\n\r\n",
            answer(400, "malformed header\n"),
        ),
        (
            b"GET /\xff HTTP/1.1\r\n\r\n",
            answer(400, "request head is not UTF-8\n"),
        ),
        (
            b"PUT /x HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc",
            answer(400, "bad Content-Length\n"),
        ),
    ];
    for (request, expected) in cases {
        assert_eq!(
            ask(&server, request),
            expected,
            "{:?}",
            String::from_utf8_lossy(request)
        );
    }
}

/// A client that sends part of a head and stalls is closed unanswered once the deadline
/// (300 ms here) has passed, never before; so is one that keeps sending a byte at a time: the
/// deadline is for the whole request, not between bytes.
#[test]
fn a_slow_head_is_closed_at_the_deadline() {
    let deadline = Duration::from_millis(300);
    let server = server(deadline);

    let started = Instant::now();
    let mut stalled = connect(&server);
    stalled
        .write_all(b"GET /heartbeat HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let received = until_closed(&mut stalled);
    assert!(started.elapsed() >= deadline, "closed before the deadline");
    assert_eq!(String::from_utf8_lossy(&received), "", "closed unanswered");

    let started = Instant::now();
    let mut drip = connect(&server);
    drip.write_all(b"GET /heartbeat HTTP/1.1\r\nX-Drip: ")
        .unwrap();
    drip.set_nonblocking(true).unwrap();
    let mut dripped = 0;
    loop {
        match drip.read(&mut [0u8; 256]) {
            Ok(0) => break,
            Ok(n) => panic!("a dripping client was answered ({n} bytes)"),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => break,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => panic!("{e}"),
        }
        match drip.write(b"a") {
            Ok(_) => dripped += 1,
            Err(e) if matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset) => {
                break
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => panic!("{e}"),
        }
        assert!(
            started.elapsed() < HANG,
            "a dripping client was never closed"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(started.elapsed() >= deadline, "closed before the deadline");
    assert!(dripped > 0);
}

/// While a client holds a connection with half a request, others are answered, and the
/// stalled client is still served when it finishes its request (before its deadline, 60 s
/// here). A server that served one connection at a time would keep the others waiting for
/// that deadline, past [`HANG`].
#[test]
fn a_stalled_client_does_not_delay_others() {
    let server = server(Duration::from_secs(60));
    let mut stalled = connect(&server);
    stalled
        .write_all(b"PUT /stalled HTTP/1.1\r\nContent-Length: 4\r\n")
        .unwrap();
    for _ in 0..3 {
        assert_eq!(
            ask(&server, b"GET /other HTTP/1.1\r\n\r\n"),
            answer(200, "GET /other body=\"\"\n")
        );
    }
    stalled.set_nonblocking(true).unwrap();
    let open = stalled.read(&mut [0u8; 16]);
    assert!(
        matches!(&open, Err(e) if e.kind() == ErrorKind::WouldBlock),
        "the stalled connection is still open and unanswered: {open:?}"
    );
    stalled.set_nonblocking(false).unwrap();
    stalled.write_all(b"\r\nbody").unwrap();
    assert_eq!(
        one_answer(&until_closed(&mut stalled)),
        answer(200, "PUT /stalled body=\"body\"\n")
    );
}

/// Two requests in one write: the first is answered, exactly as if alone (its body is its
/// `Content-Length` bytes, not the next request), then the connection closes
/// (`Connection: close`); the second is never answered.
#[test]
fn pipelined_requests_get_one_answer_then_close() {
    let server = server(REQUEST_TIMEOUT);
    assert_eq!(
        ask(
            &server,
            b"GET /first HTTP/1.1\r\nHost: x\r\n\r\nGET /second HTTP/1.1\r\nHost: x\r\n\r\n"
        ),
        answer(200, "GET /first body=\"\"\n")
    );
    assert_eq!(
        ask(
            &server,
            b"PUT /first HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello\
              PUT /second HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"
        ),
        answer(200, "PUT /first body=\"hello\"\n")
    );
}

/// A client that writes a whole request and then shuts its write side down still gets its
/// answer.
#[test]
fn a_request_then_half_close_is_answered() {
    let server = server(REQUEST_TIMEOUT);
    let mut stream = connect(&server);
    stream
        .write_all(b"PUT /x HTTP/1.1\r\nContent-Length: 2\r\n\r\nok")
        .unwrap();
    stream.shutdown(Shutdown::Write).unwrap();
    assert_eq!(
        one_answer(&until_closed(&mut stream)),
        answer(200, "PUT /x body=\"ok\"\n")
    );
}

/// Clients that shut their write side down before the request is whole (nothing sent, half a
/// request line, half a head, half a body) each get a 400 for what is missing, and free their
/// connection slot: more of them than [`MAX_CONNECTIONS`], one after another, are all
/// answered, and then `MAX_CONNECTIONS` clients at once all are (a leaked slot would leave
/// one of them closed unanswered, for good).
#[test]
fn half_closed_requests_get_400_and_free_their_slots() {
    let server = server(REQUEST_TIMEOUT);
    let cuts: [(&[u8], &str); 4] = [
        (b"", "incomplete request\n"),
        (b"GET /heart", "incomplete request\n"),
        (
            b"GET /heartbeat HTTP/1.1\r\nHost: x\r\n",
            "incomplete request\n",
        ),
        (
            b"PUT /x HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc",
            "incomplete body\n",
        ),
    ];
    for i in 0..MAX_CONNECTIONS + 16 {
        let (sent, reason) = cuts[i % cuts.len()];
        let mut stream = connect(&server);
        stream.write_all(sent).unwrap();
        stream.shutdown(Shutdown::Write).unwrap();
        assert_eq!(
            one_answer(&until_closed(&mut stream)),
            answer(400, reason),
            "connection {i}"
        );
    }

    // The last of them may still be finishing on the server's side: retried until every
    // client of a full set is answered.
    let started = Instant::now();
    loop {
        let mut clients: Vec<TcpStream> = (0..MAX_CONNECTIONS).map(|_| connect(&server)).collect();
        let mut answered = 0;
        for stream in &mut clients {
            let _ = stream.write_all(b"GET /heartbeat HTTP/1.1\r\n\r\n");
            if until_closed(stream).starts_with(b"HTTP/1.1 200") {
                answered += 1;
            }
        }
        if answered == MAX_CONNECTIONS {
            break;
        }
        assert!(
            started.elapsed() < HANG,
            "only {answered} of {MAX_CONNECTIONS} clients at once answered: a slot leaked"
        );
        drop(clients);
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        ask(&server, b"GET /heartbeat HTTP/1.1\r\n\r\n"),
        answer(200, "GET /heartbeat body=\"\"\n")
    );
}
