//! One client connection on a shard: a reader that decodes frames and hands them to the shard,
//! and a writer that sends whatever replies have accumulated, in one write.
//!
//! Replies are encoded straight into the connection's output buffer by whoever completes the
//! request (the shard, possibly after a journal sync, or a reply from another shard or the
//! reader thread), and the writer is woken.
//!
//! Memory is bounded against any client, the way Java bounds it with channel writability:
//! - at most `max_pending_per_connection` requests unanswered per connection;
//! - at most `per_connection` bytes of replies not yet written per connection, and
//!   `per_shard` bytes over all the shard's connections ([`ReplyBudget`]): a connection over
//!   either stops being read (TCP pushes back on its client) until its socket drains, and stops
//!   decoding in the middle of what it has read, since one 64 KiB read can hold a thousand
//!   pipelined reads of large entries;
//! - once the connection is closed (by the peer, a write error or a bad frame) its queued
//!   replies are dropped at once, and reads not yet done for it are skipped
//!   ([`ConnShared`], which other shards and the reader threads see too);
//! - a reply that arrives while the connection is over its budget (a cache-miss read done on
//!   another thread, a reply from another shard) is parked as it is, its body shared rather
//!   than copied, and encoded once the socket drains; the reader threads read an entry for a
//!   connection only while it has room, so they never fill memory for a client that does not
//!   read.
//!
//! A frame the decoder rejects closes only this connection. The connection talks to its shard
//! through [`RequestSink`] only, so this module does not know the shard.
//!
//! Security (`security/tls.rs`, `security/auth.rs`): every request first passes the connection's auth
//! [`Gate`]; a `START_TLS` (TLS configured) makes the connection answer it, hand its socket
//! from the plain halves to a TLS handshake, and go on with the TLS halves ([`start_tls`]).

pub mod ratelimit;

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use net::server::RequestDecoder;
use net::{codec, RequestFrame, Response, ResponseFrame};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use rustls::pki_types::CertificateDer;

use crate::conn::ratelimit::LogLimiter;
use crate::security::auth::{Admit, Gate};
use crate::security::tls::{self, ReadHalf, Security, WriteHalf};

const READ_CHUNK: usize = 64 << 10;

/// What a connection needs from its shard.
pub trait RequestSink {
    /// A decoded request from `conn`.
    fn dispatch(&mut self, frame: RequestFrame, conn: &Rc<Conn>);
    /// Make progress (journal, replies) after a batch of requests.
    fn drive(&mut self);
    /// Whether the shard takes no new requests now (journal buffers or write cache full).
    fn is_blocked(&self) -> bool;
    /// Woken when [`RequestSink::is_blocked`] may have turned false.
    fn unblocked(&self) -> Rc<Notify>;
    /// A pause before the connection reads more: the shard slows its intake before it has to
    /// stop it (`None`: read at once).
    fn admission_delay(&self) -> Option<Duration> {
        None
    }
    /// The connection is gone.
    fn forget_connection(&mut self, id: u64);
    /// Replies stamped with these ready times (`metrics::now_us`) reached the socket.
    fn replies_written(&self, _ready_at_us: &[u64]) {}
}

/// The byte budget of replies a shard holds for its connections and has not yet written.
/// Shared with the other threads that produce replies for this shard's connections (the reader
/// threads wait while it is over).
pub struct ReplyBudget {
    queued: AtomicUsize,
    pub per_connection: usize,
    pub per_shard: usize,
    /// `waitTimeoutOnResponseBackpressureMs`: how long a socket may accept no byte of a reply
    /// before the connection counts as stuck (`None`: never, Java's default).
    pub stuck_after: Option<Duration>,
    /// `closeChannelOnResponseTimeout`: a stuck connection is closed; otherwise the replies it
    /// has not been sent yet are dropped, as Java drops them.
    pub close_when_stuck: bool,
}

impl ReplyBudget {
    pub fn new(per_connection: usize, per_shard: usize) -> ReplyBudget {
        ReplyBudget {
            queued: AtomicUsize::new(0),
            per_connection: per_connection.max(1),
            per_shard: per_shard.max(1),
            stuck_after: None,
            close_when_stuck: false,
        }
    }

    /// With Java's response-backpressure timeout and its close switch.
    pub fn with_stuck_timeout(mut self, after: Option<Duration>, close: bool) -> ReplyBudget {
        self.stuck_after = after;
        self.close_when_stuck = close;
        self
    }

    /// Bytes of replies queued and not yet written, over all the shard's connections.
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// Whether the shard holds more unwritten reply bytes than it may.
    pub fn over(&self) -> bool {
        self.queued() >= self.per_shard
    }

    fn add(&self, n: usize) {
        self.queued.fetch_add(n, Ordering::Relaxed);
    }

    fn sub(&self, n: usize) {
        self.queued.fetch_sub(n, Ordering::Relaxed);
    }
}

/// What other threads see of a connection: whether it is closed, and whether it has room for
/// more replies. The reader threads read an entry for a connection only when it has room, so
/// entries read from disk never pile up for a client that does not read.
pub struct ConnShared {
    gone: AtomicBool,
    /// Reply bytes encoded or parked and not yet written.
    unwritten: AtomicUsize,
    budget: Arc<ReplyBudget>,
}

impl ConnShared {
    /// The state of no connection, for work that replies to nobody (a read-ahead run): never
    /// gone, always with room.
    pub fn detached(budget: Arc<ReplyBudget>) -> ConnShared {
        ConnShared {
            gone: AtomicBool::new(false),
            unwritten: AtomicUsize::new(0),
            budget,
        }
    }

    /// Whether the connection is closed (its replies would be dropped).
    pub fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Relaxed)
    }

    /// Whether the connection can take another reply without going over its budget.
    pub fn has_room(&self) -> bool {
        self.unwritten.load(Ordering::Relaxed) < self.budget.per_connection
    }

    fn unwritten(&self) -> usize {
        self.unwritten.load(Ordering::Relaxed)
    }

    fn add(&self, n: usize) {
        self.unwritten.fetch_add(n, Ordering::Relaxed);
        self.budget.add(n);
    }

    fn sub(&self, n: usize) {
        self.unwritten.fetch_sub(n, Ordering::Relaxed);
        self.budget.sub(n);
    }
}

/// Bytes counted for a parked reply before it is encoded: its body and a header allowance.
fn parked_size(frame: &ResponseFrame) -> usize {
    use net::Response;
    let body = match &frame.response {
        Response::ReadEntry { body, .. } => body.as_ref().map_or(0, |b| b.len()),
        Response::BatchReadEntry { entries, .. } => entries.iter().map(|e| e.len() + 8).sum(),
        Response::ReadLac {
            lac_body,
            last_entry_body,
            ..
        } => {
            lac_body.as_ref().map_or(0, |b| b.len())
                + last_entry_body.as_ref().map_or(0, |b| b.len())
        }
        _ => 0,
    };
    body + 64
}

/// The shard-side state of a connection.
pub struct Conn {
    pub id: u64,
    /// Encoded replies not yet handed to the writer.
    out: RefCell<BytesMut>,
    /// Replies that arrived while the connection was over its budget: kept as they are (their
    /// bodies are shared with the write cache or a read buffer, not copied) and encoded as the
    /// socket drains.
    parked: RefCell<VecDeque<(ResponseFrame, usize, u64)>>,
    /// Bytes in `out` or being written.
    encoded: Cell<usize>,
    /// Ready times of the stamped replies in `out` (see [`Conn::send_timed`]).
    stamps: RefCell<Vec<u64>>,
    /// When the last socket read returned (`metrics::now_us`): the frames it completed were
    /// read then.
    read_at: Cell<u64>,
    wake_writer: Notify,
    wake_reader: Notify,
    /// Set by the reader for `START_TLS`: the writer hands its half back once it has written
    /// everything.
    hand_over: Cell<bool>,
    outstanding: Cell<usize>,
    max_outstanding: usize,
    shared: Arc<ConnShared>,
}

impl Conn {
    pub fn new(id: u64, max_outstanding: usize, budget: Arc<ReplyBudget>) -> Conn {
        Conn {
            id,
            out: RefCell::new(BytesMut::new()),
            parked: RefCell::new(VecDeque::new()),
            encoded: Cell::new(0),
            stamps: RefCell::new(Vec::new()),
            read_at: Cell::new(0),
            wake_writer: Notify::new(),
            wake_reader: Notify::new(),
            hand_over: Cell::new(false),
            outstanding: Cell::new(0),
            max_outstanding,
            shared: Arc::new(ConnShared {
                gone: AtomicBool::new(false),
                unwritten: AtomicUsize::new(0),
                budget,
            }),
        }
    }

    /// What work done elsewhere on this connection's behalf needs to see of it.
    pub fn shared(&self) -> &Arc<ConnShared> {
        &self.shared
    }

    pub fn is_closed(&self) -> bool {
        self.shared.is_gone()
    }

    /// When the socket read that completed the frames being dispatched returned.
    pub fn read_at(&self) -> u64 {
        self.read_at.get()
    }

    /// Queues a reply for sending (dropped if the connection is closed). It was ready at
    /// `ready_at_us` (`metrics::now_us`; 0: not timed): once its bytes are written, the shard
    /// hears of it through [`RequestSink::replies_written`].
    pub fn send_timed(&self, frame: ResponseFrame, ready_at_us: u64) {
        let left = self.outstanding.get().saturating_sub(1);
        self.outstanding.set(left);
        if left + 1 == self.max_outstanding {
            self.wake_reader.notify_one();
        }
        if self.is_closed() {
            return;
        }
        let mut parked = self.parked.borrow_mut();
        if !parked.is_empty() || self.encoded.get() >= self.shared.budget.per_connection {
            let size = parked_size(&frame);
            self.shared.add(size);
            parked.push_back((frame, size, ready_at_us));
            return;
        }
        drop(parked);
        self.encode(&frame, ready_at_us);
        self.wake_writer.notify_one();
    }

    fn encode(&self, frame: &ResponseFrame, ready_at_us: u64) {
        let added = {
            let mut out = self.out.borrow_mut();
            let before = out.len();
            if let Err(err) = codec::encode_response(frame, &mut out) {
                log::warn!("connection {}: cannot encode a reply: {err:?}", self.id);
                return;
            }
            out.len() - before
        };
        if ready_at_us != 0 {
            self.stamps.borrow_mut().push(ready_at_us);
        }
        self.encoded.set(self.encoded.get() + added);
        self.shared.add(added);
    }

    /// Encodes parked replies while the encoded bytes are under the budget.
    fn unpark(&self) {
        loop {
            if self.encoded.get() >= self.shared.budget.per_connection {
                return;
            }
            let Some((frame, size, ready_at_us)) = self.parked.borrow_mut().pop_front() else {
                return;
            };
            self.shared.sub(size);
            self.encode(&frame, ready_at_us);
        }
    }

    fn request_started(&self) {
        self.outstanding.set(self.outstanding.get() + 1);
    }

    /// Whether this connection must not decode more requests now: too many unanswered, or too
    /// many reply bytes unwritten (its own, or the shard's while it holds some of them).
    fn must_wait(&self) -> bool {
        let unwritten = self.shared.unwritten();
        self.outstanding.get() >= self.max_outstanding
            || unwritten >= self.shared.budget.per_connection
            || (unwritten > 0 && self.shared.budget.over())
    }

    /// Whether it waits for its own replies or requests (which wake it when they drain),
    /// rather than for the shard's other connections.
    fn over_own_limits(&self) -> bool {
        self.outstanding.get() >= self.max_outstanding
            || self.shared.unwritten() >= self.shared.budget.per_connection
    }

    /// `n` reply bytes reached the socket.
    fn written(&self, n: usize) {
        self.encoded.set(self.encoded.get() - n);
        self.shared.sub(n);
        self.wake_reader.notify_one();
    }

    /// The socket took no byte for the response-backpressure timeout: close the connection, or
    /// drop the replies not yet encoded (Java does not send a reply it timed out on).
    fn stuck(&self) {
        let parked = self.parked.take();
        let dropped: usize = parked.iter().map(|(_, size, _)| size).sum();
        self.shared.sub(dropped);
        STUCK.warn(|more| {
            format!(
                "connection {}: the client has not read its replies for {:?}; {}{more}",
                self.id,
                self.shared.budget.stuck_after.unwrap_or_default(),
                if self.shared.budget.close_when_stuck {
                    "closing it".to_string()
                } else {
                    format!("dropped {} replies", parked.len())
                }
            )
        });
        if self.shared.budget.close_when_stuck {
            self.close();
        }
    }

    /// Closes the connection: drops what is queued and wakes both halves.
    fn close(&self) {
        if self.shared.gone.swap(true, Ordering::Relaxed) {
            return;
        }
        let dropped = {
            let mut out = self.out.borrow_mut();
            let n = out.len();
            *out = BytesMut::new();
            n
        };
        self.encoded.set(self.encoded.get() - dropped);
        self.stamps.borrow_mut().clear();
        let parked: usize = self.parked.take().iter().map(|(_, size, _)| size).sum();
        self.shared.sub(dropped + parked);
        self.wake_writer.notify_one();
        self.wake_reader.notify_one();
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        // Bytes still counted (a writer stopped mid-write) go back to the shard's budget.
        self.shared.sub(self.shared.unwritten());
    }
}

/// Bad frames are logged at most this often (with a count of those not logged).
static BAD_FRAMES: LogLimiter = LogLimiter::new(Duration::from_secs(10), 5);
static STUCK: LogLimiter = LogLimiter::new(Duration::from_secs(10), 5);
static SECURITY: LogLimiter = LogLimiter::new(Duration::from_secs(10), 5);

/// Writes `data` to the socket, counting bytes as they go; with a response-backpressure
/// timeout, a socket that takes nothing for that long makes the connection stuck.
async fn write_replies(writer: &mut WriteHalf, data: &[u8], conn: &Conn) -> Result<(), ()> {
    let mut off = 0;
    let mut stuck_after = conn.shared.budget.stuck_after;
    while off < data.len() {
        let written = match stuck_after {
            None => writer.write(&data[off..]).await,
            Some(after) => match tokio::time::timeout(after, writer.write(&data[off..])).await {
                Ok(result) => result,
                Err(_) => {
                    conn.stuck();
                    if conn.is_closed() {
                        conn.written(data.len() - off);
                        return Err(());
                    }
                    // The frame begun must still be finished: wait for it without a timer.
                    stuck_after = None;
                    continue;
                }
            },
        };
        match written {
            Ok(n) if n > 0 => {
                off += n;
                conn.written(n);
            }
            _ => {
                conn.written(data.len() - off);
                return Err(());
            }
        }
    }
    // TLS keeps records it could not send in its buffer; plain TCP has nothing to flush.
    writer.flush().await.map_err(|_| ())
}

/// Sends the replies the connection accumulates until it closes (`None`) or the reader asks
/// for the socket back for `START_TLS` (`Some`, once everything queued is written).
async fn write_loop<S: RequestSink + 'static>(
    conn: Rc<Conn>,
    shard: Rc<RefCell<S>>,
    mut writer: WriteHalf,
) -> Option<WriteHalf> {
    // Ready times of the replies being written (swapped with the connection's, so that
    // neither allocates once grown).
    let mut writing: Vec<u64> = Vec::new();
    loop {
        conn.wake_writer.notified().await;
        loop {
            if conn.is_closed() {
                let _ = writer.shutdown().await;
                return None;
            }
            conn.unpark();
            let data = {
                let mut out = conn.out.borrow_mut();
                if out.is_empty() {
                    break;
                }
                std::mem::swap(&mut writing, &mut *conn.stamps.borrow_mut());
                out.split().freeze()
            };
            if write_replies(&mut writer, &data, &conn).await.is_err() {
                conn.close();
                return None;
            }
            if !writing.is_empty() {
                shard.borrow().replies_written(&writing);
                writing.clear();
            }
        }
        if conn.hand_over.get() {
            return Some(writer);
        }
    }
}

/// Serves one connection until the peer closes it, it sends a bad frame, or the shard stops.
pub async fn serve<S: RequestSink + 'static>(
    shard: Rc<RefCell<S>>,
    stream: TcpStream,
    conn: Rc<Conn>,
    max_frame: usize,
    security: Arc<Security>,
) {
    let _ = stream.set_nodelay(true);
    let mut gate = Gate::new(&security.auth, security.tls.is_some());
    let (mut reader, writer) = tls::split_plain(stream);
    let mut writer_task = Some(tokio::task::spawn_local(write_loop(
        conn.clone(),
        shard.clone(),
        writer,
    )));
    let mut decoder = RequestDecoder::new(max_frame);
    let mut buf = BytesMut::new();
    'read: loop {
        // Backpressure from this connection's replies: leave the bytes in the socket (TCP
        // pushes back on the client) until they drain. A shard-wide excess has no single
        // waker, so it is re-checked on a short timer.
        while conn.must_wait() && !conn.is_closed() {
            let woken = conn.wake_reader.notified();
            if conn.over_own_limits() {
                // Its own replies or requests: the writer or a reply wakes it, so a thousand
                // stuck connections cost no timer wake-ups.
                woken.await;
            } else {
                let _ = tokio::time::timeout(Duration::from_millis(5), woken).await;
            }
        }
        if conn.is_closed() {
            break;
        }
        // A write cache filling up: pause before the blocked check below, so that what was
        // flushed or filled meanwhile is seen before the next batch is dispatched.
        let delay = shard.borrow().admission_delay();
        if let Some(delay) = delay {
            tokio::time::sleep(delay).await;
        }
        // The shard is out of journal buffers or write cache: same, until it can take more.
        loop {
            let (blocked, notify) = {
                let s = shard.borrow();
                (s.is_blocked(), s.unblocked())
            };
            if !blocked {
                break;
            }
            let woken = notify.notified();
            tokio::pin!(woken);
            // A timer guards against a missed wake-up; the check is cheap.
            let _ = tokio::time::timeout(Duration::from_millis(5), woken).await;
        }
        // Decode what is buffered first; read the socket only once it is used up.
        let mut stopped_early = false;
        let mut start_tls_header = None;
        {
            let mut shard = shard.borrow_mut();
            loop {
                if conn.must_wait() || conn.is_closed() {
                    stopped_early = true;
                    break;
                }
                match decoder.decode(&mut buf) {
                    Ok(Some(frame)) => match gate.admit(&frame.header, &frame.request) {
                        Admit::Serve => {
                            conn.request_started();
                            shard.dispatch(frame, &conn);
                        }
                        Admit::Reply(response) => {
                            conn.request_started();
                            let header = frame.reply_header();
                            conn.send_timed(ResponseFrame { header, response }, 0);
                        }
                        Admit::Ignore => {}
                        Admit::Close => {
                            SECURITY.warn(|more| {
                                format!(
                                    "connection {}: closed: {:?} before authentication{more}",
                                    conn.id,
                                    frame.request.operation()
                                )
                            });
                            conn.close();
                            shard.drive();
                            break 'read;
                        }
                        Admit::StartTls => {
                            start_tls_header = Some(frame.reply_header());
                            break;
                        }
                    },
                    Ok(None) => break,
                    Err(err) => {
                        BAD_FRAMES.warn(|suppressed| {
                            format!(
                                "connection {}: closing on a bad frame: {err}{suppressed}",
                                conn.id
                            )
                        });
                        shard.drive();
                        break 'read;
                    }
                }
            }
            shard.drive();
        }
        if let (Some(header), Some(context)) = (start_tls_header, security.tls.as_ref()) {
            let Some(plain_writer) = hand_over(&conn, writer_task.take()).await else {
                break;
            };
            if !buf.is_empty() {
                SECURITY.warn(|more| {
                    format!(
                        "connection {}: bytes sent after START_TLS before its reply; closing{more}",
                        conn.id
                    )
                });
                conn.close();
                break;
            }
            let Some((r, w, peer)) = start_tls(&conn, header, reader, plain_writer, context).await
            else {
                conn.close();
                break;
            };
            reader = r;
            if let Err(why) = gate.on_handshake(&security.auth, peer.as_deref()) {
                SECURITY.warn(|more| {
                    format!(
                        "connection {}: TLS client not authorized: {why}{more}",
                        conn.id
                    )
                });
                // Java: EIO on the START_TLS request, and the connection stays open without
                // being served (EUA).
                conn.request_started();
                let response = Response::Error {
                    operation: net::OperationType::StartTls,
                    status: net::StatusCode::EIO,
                };
                conn.send_timed(ResponseFrame { header, response }, 0);
            }
            writer_task = Some(tokio::task::spawn_local(write_loop(
                conn.clone(),
                shard.clone(),
                w,
            )));
            conn.wake_writer.notify_one();
            continue;
        }
        if stopped_early {
            continue;
        }
        if buf.capacity() - buf.len() < READ_CHUNK / 4 {
            buf.reserve(READ_CHUNK);
        }
        match reader.read_buf(&mut buf).await {
            Ok(0) => break,
            Ok(_) => conn.read_at.set(crate::admin::metrics::now_us()),
            Err(err) => {
                log::debug!("connection {}: read error {err}", conn.id);
                break;
            }
        }
    }
    // Replies still queued are sent before the writer shuts the socket down, unless the
    // connection is gone (then they are dropped).
    if !conn.is_closed() {
        drain_then_close(&conn).await;
    }
    conn.close();
    shard.borrow_mut().forget_connection(conn.id);
    if let Some(task) = writer_task {
        let _ = task.await;
    }
}

/// For `START_TLS`: waits until every earlier request is answered and written, then takes the
/// plain writing half back from the writer task. `None`: the connection closed meanwhile.
async fn hand_over(
    conn: &Conn,
    writer_task: Option<JoinHandle<Option<WriteHalf>>>,
) -> Option<WriteHalf> {
    drain_then_close(conn).await;
    if conn.outstanding.get() > 0 {
        return None;
    }
    conn.hand_over.set(true);
    conn.wake_writer.notify_one();
    let writer = writer_task?.await.ok().flatten();
    conn.hand_over.set(false);
    writer
}

/// Answers `START_TLS` with EOK in plaintext and runs the handshake on the same socket
/// (Java's `processStartTLSRequestV3`); returns the TLS halves and the client's certificate
/// chain. `None`: the handshake failed (logged).
async fn start_tls(
    conn: &Conn,
    header: net::ResponseHeader,
    reader: ReadHalf,
    mut writer: WriteHalf,
    context: &tls::TlsContext,
) -> Option<(ReadHalf, WriteHalf, Option<Vec<CertificateDer<'static>>>)> {
    let mut reply = BytesMut::new();
    let ok = ResponseFrame {
        header,
        response: Response::StartTls {
            status: net::StatusCode::EOK,
        },
    };
    codec::encode_response(&ok, &mut reply).ok()?;
    writer.write_all(&reply).await.ok()?;
    writer.flush().await.ok()?;
    let stream = tls::reunite(reader, writer).ok()?;
    match tls::handshake(context.acceptor(), stream).await {
        Ok(stream) => {
            log::debug!("connection {}: TLS session established", conn.id);
            let peer = stream.get_ref().1.peer_certificates().map(|c| c.to_vec());
            let (r, w) = tls::split_tls(stream);
            Some((r, w, peer))
        }
        Err(e) => {
            SECURITY
                .warn(|more| format!("connection {}: TLS handshake failed: {e}{more}", conn.id));
            None
        }
    }
}

/// After the peer stopped sending (it may have only shut down its side): lets the requests in
/// flight finish and the writer send their replies, for a few seconds at most, then closes.
async fn drain_then_close(conn: &Conn) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while (conn.shared.unwritten() > 0 || conn.outstanding.get() > 0) && !conn.is_closed() {
        if tokio::time::Instant::now() >= deadline {
            break;
        }
        let woken = conn.wake_reader.notified();
        let _ = tokio::time::timeout(Duration::from_millis(5), woken).await;
    }
}
