//! `bkperf sink`: a fake bookie that answers every request at once, to measure bkperf's own
//! ceiling. If bkperf cannot drive at least twice what a real bookie sustains against the
//! sink, bkperf is the bottleneck and its numbers say nothing about the bookie.
//!
//! It speaks both protocols through `net`'s server decoder (per-frame v2/v3 detection) and
//! answers:
//! - ADD: `EOK` with the request's ids (nothing is stored);
//! - READ: `EOK` with a well-formed entry of `--entry-size` payload bytes for the ids asked
//!   (CRC32C digest, LAC = entry − 1), so readers can verify what they get; a v3 long poll
//!   (`previousLAC` P, piggyback) gets entry P + 1 at once with `maxLAC` = P + 1;
//! - BATCH_READ: up to `max_count` (at most 64) such entries within `max_size`;
//! - AUTH: the reply of a bookie without auth; anything else: its sub-response with `EOK`.
//!
//! One thread per connection, blocking sockets: each read is decoded whole and every reply it
//! produced goes out in one `write`, so the sink batches exactly as much as the client
//! pipelines. A connection that sends bytes the decoder rejects is closed (as a bookie does).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use net::server::RequestDecoder;
use net::{codec, AuthMessage, ReadFlag, Request, Response, ResponseFrame, StatusCode};

use crate::entry::{DigestType, EntryHeader};

/// Arguments of `bkperf sink`.
#[derive(clap::Args, Debug, Clone)]
pub struct SinkArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:3181")]
    pub listen: String,
    /// Payload bytes of the entries returned to reads.
    #[arg(long, default_value_t = 1024)]
    pub entry_size: usize,
    /// Stop after this long (default: run until killed), e.g. 60s.
    #[arg(long)]
    pub duration: Option<String>,
}

/// A running sink; stops (its accept loop and connections) when dropped.
pub struct Sink {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    requests: Arc<AtomicU64>,
    accept: Option<std::thread::JoinHandle<()>>,
}

impl Sink {
    /// Binds `listen` (port 0 picks a free port) and serves in background threads.
    pub fn start(listen: &str, entry_size: usize) -> std::io::Result<Sink> {
        let listener = TcpListener::bind(listen)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(AtomicU64::new(0));
        let (stop2, requests2) = (stop.clone(), requests.clone());
        let accept = std::thread::Builder::new()
            .name("sink-accept".into())
            .spawn(move || {
                while !stop2.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((stream, peer)) => {
                            let (stop3, requests3) = (stop2.clone(), requests2.clone());
                            let spawned = std::thread::Builder::new()
                                .name("sink-conn".into())
                                .spawn(move || {
                                    if let Err(err) = serve(stream, entry_size, &stop3, &requests3)
                                    {
                                        log::debug!("sink: connection from {peer}: {err}");
                                    }
                                });
                            if let Err(err) = spawned {
                                log::warn!("sink: cannot start a connection thread: {err}");
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(5));
                        }
                        Err(e) => {
                            log::warn!("sink: accept: {e}");
                            std::thread::sleep(Duration::from_millis(50));
                        }
                    }
                }
            })?;
        Ok(Sink {
            addr,
            stop,
            requests,
            accept: Some(accept),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Requests answered so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

fn serve(
    mut stream: TcpStream,
    entry_size: usize,
    stop: &AtomicBool,
    requests: &AtomicU64,
) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(Duration::from_millis(100)))?;
    let mut decoder = RequestDecoder::default();
    let mut received = BytesMut::with_capacity(256 * 1024);
    let mut out = BytesMut::with_capacity(256 * 1024);
    let mut scratch = BytesMut::new();
    let payload = vec![0u8; entry_size];
    let mut chunk = vec![0u8; 256 * 1024];
    while !stop.load(Ordering::Relaxed) {
        let n = match stream.read(&mut chunk) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(e) => return Err(e),
        };
        received.extend_from_slice(&chunk[..n]);
        let mut answered = 0;
        loop {
            let frame = match decoder.decode(&mut received) {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(err) => {
                    // Flush what was answered, then close, as a bookie does.
                    stream.write_all(&out)?;
                    return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, err));
                }
            };
            let response = answer(&frame.request, frame.header.is_v2(), &payload, &mut scratch);
            let reply = ResponseFrame {
                header: frame.reply_header(),
                response,
            };
            if let Err(err) = codec::encode_response(&reply, &mut out) {
                // Never leave a request unanswered: fall back to a bare EBADREQ.
                log::warn!("sink: cannot encode a reply: {err}");
                let fallback = ResponseFrame {
                    header: frame.reply_header(),
                    response: frame.request.error_response(StatusCode::EBADREQ),
                };
                if let Err(err) = codec::encode_response(&fallback, &mut out) {
                    return Err(std::io::Error::other(format!("cannot answer: {err}")));
                }
            }
            answered += 1;
        }
        requests.fetch_add(answered, Ordering::Relaxed);
        if !out.is_empty() {
            stream.write_all(&out)?;
            out.clear();
        }
    }
    Ok(())
}

fn synthetic_entry(
    ledger_id: i64,
    entry_id: i64,
    payload: &[u8],
    scratch: &mut BytesMut,
) -> bytes::Bytes {
    let header = EntryHeader {
        ledger_id,
        entry_id,
        last_add_confirmed: entry_id - 1,
        length: (entry_id + 1).saturating_mul(payload.len() as i64),
    };
    crate::entry::build_entry(&header, DigestType::Crc32c, payload, scratch)
}

/// The sink's reply to one request.
fn answer(request: &Request, v2: bool, payload: &[u8], scratch: &mut BytesMut) -> Response {
    match *request {
        Request::AddEntry {
            ledger_id,
            entry_id,
            ..
        } => Response::AddEntry {
            status: StatusCode::EOK,
            ledger_id,
            entry_id,
        },
        Request::ReadEntry {
            ledger_id,
            entry_id,
            previous_lac,
            flag,
            ..
        } => {
            let long_poll = previous_lac.filter(|_| flag != Some(ReadFlag::FenceLedger));
            let id = match (long_poll, flag) {
                (Some(p), Some(ReadFlag::EntryPiggyback)) => p.saturating_add(1),
                _ => entry_id,
            };
            if id < 0 {
                return request.error_response(StatusCode::ENOENTRY);
            }
            Response::ReadEntry {
                status: StatusCode::EOK,
                ledger_id,
                entry_id: id,
                body: Some(synthetic_entry(ledger_id, id, payload, scratch)),
                max_lac: (!v2).then_some(id), // v2 has no piggybacked LAC
                lac_update_timestamp: None,
            }
        }
        Request::BatchReadEntry {
            ledger_id,
            start_entry_id,
            request_id,
            max_count,
            max_size,
            ..
        } => {
            let count = if max_count <= 0 {
                64
            } else {
                max_count.min(64)
            } as i64;
            let mut entries = Vec::new();
            let mut size = 0i64;
            for id in start_entry_id..start_entry_id.saturating_add(count) {
                let e = synthetic_entry(ledger_id, id, payload, scratch);
                size += e.len() as i64 + 4;
                if !entries.is_empty() && size > max_size {
                    break;
                }
                entries.push(e);
            }
            Response::BatchReadEntry {
                status: StatusCode::EOK,
                ledger_id,
                start_entry_id,
                request_id,
                entries,
            }
        }
        Request::Auth(_) => Response::Auth {
            status: StatusCode::EOK,
            message: AuthMessage::auth_disabled(),
        },
        _ => request.error_response(StatusCode::EOK),
    }
}

/// Runs `bkperf sink` in the foreground.
pub fn run(args: &SinkArgs) -> Result<(), Box<dyn std::error::Error>> {
    let limit = args
        .duration
        .as_deref()
        .map(crate::report::parse_duration)
        .transpose()?;
    let sink = Sink::start(&args.listen, args.entry_size)
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    println!(
        "bkperf sink listening on {} (answers every request at once; entries of {} B)",
        sink.addr(),
        args.entry_size
    );
    let start = std::time::Instant::now();
    let mut last = 0;
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let now = sink.requests();
        if now != last {
            log::info!("sink: {} requests/s", now - last);
            last = now;
        }
        if limit.is_some_and(|l| start.elapsed() >= l) {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use net::client::blocking::BlockingClient;
    use net::client::ClientConfig;

    #[test]
    fn sink_answers_v2_and_v3() {
        let sink = Sink::start("127.0.0.1:0", 100).expect("binds");
        let mut c =
            BlockingClient::connect(sink.addr(), ClientConfig::default()).expect("connects");
        let add = Request::AddEntry {
            ledger_id: 9,
            entry_id: 4,
            master_key: bytes::Bytes::from_static(&[0; 20]),
            body: synthetic_entry(9, 4, b"x", &mut BytesMut::new()),
            recovery: false,
            write_flags: None,
        };
        let r = c.call_v3(add.clone(), None).expect("v3 add");
        assert_eq!(r.response.status(), StatusCode::EOK);
        let r = c.call_v2(add, false).expect("v2 add");
        assert_eq!(r.response.status(), StatusCode::EOK);
        let read = Request::ReadEntry {
            ledger_id: 9,
            entry_id: 7,
            master_key: None,
            flag: None,
            previous_lac: None,
            time_out: None,
        };
        match c.call_v2(read, false).expect("v2 read").response {
            Response::ReadEntry { body: Some(b), .. } => {
                let h = crate::entry::verify_entry(&b, DigestType::Crc32c, 9, 7).expect("valid");
                assert_eq!(h.last_add_confirmed, 6);
                assert_eq!(b.len(), 32 + 4 + 100);
            }
            other => panic!("unexpected {other:?}"),
        }
        let poll = Request::ReadEntry {
            ledger_id: 9,
            entry_id: -1,
            master_key: None,
            flag: Some(ReadFlag::EntryPiggyback),
            previous_lac: Some(10),
            time_out: Some(1000),
        };
        match c.call_v3(poll, None).expect("long poll").response {
            Response::ReadEntry {
                entry_id, max_lac, ..
            } => {
                assert_eq!((entry_id, max_lac), (11, Some(11)));
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(sink.requests() >= 4);
    }
}
