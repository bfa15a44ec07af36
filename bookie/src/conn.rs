//! One client connection on a shard: a reader that decodes frames and hands them to the shard,
//! and a writer that sends whatever replies have accumulated, in one write.
//!
//! Replies are encoded straight into the connection's output buffer by whoever completes the
//! request (the shard, possibly after a journal sync, or a reply from another shard), and the
//! writer is woken. Backpressure: when `max_pending_per_connection` requests are unanswered,
//! the reader stops reading the socket until replies drain, so a client cannot make the bookie
//! queue without bound. A frame the decoder rejects closes only this connection.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use bytes::BytesMut;
use net::server::RequestDecoder;
use net::{codec, ResponseFrame};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Notify;

use crate::shard::Shard;

const READ_CHUNK: usize = 64 << 10;

/// The shard-side state of a connection.
pub struct Conn {
    pub id: u64,
    out: RefCell<BytesMut>,
    wake_writer: Notify,
    wake_reader: Notify,
    outstanding: Cell<usize>,
    max_outstanding: usize,
    closed: Cell<bool>,
}

impl Conn {
    pub fn new(id: u64, max_outstanding: usize) -> Conn {
        Conn {
            id,
            out: RefCell::new(BytesMut::with_capacity(READ_CHUNK)),
            wake_writer: Notify::new(),
            wake_reader: Notify::new(),
            outstanding: Cell::new(0),
            max_outstanding,
            closed: Cell::new(false),
        }
    }

    /// Queues a reply for sending.
    pub fn send(&self, frame: &ResponseFrame) {
        let left = self.outstanding.get().saturating_sub(1);
        self.outstanding.set(left);
        if left + 1 == self.max_outstanding {
            self.wake_reader.notify_one();
        }
        if self.closed.get() {
            return;
        }
        if let Err(err) = codec::encode_response(frame, &mut self.out.borrow_mut()) {
            log::warn!("connection {}: cannot encode a reply: {err:?}", self.id);
            return;
        }
        self.wake_writer.notify_one();
    }

    fn request_started(&self) {
        self.outstanding.set(self.outstanding.get() + 1);
    }
}

/// Serves one connection until the peer closes it, it sends a bad frame, or the shard stops.
pub async fn serve(shard: Rc<RefCell<Shard>>, stream: TcpStream, conn: Rc<Conn>, max_frame: usize) {
    let _ = stream.set_nodelay(true);
    let (mut reader, mut writer) = stream.into_split();
    let out_conn = conn.clone();
    let writer_task = tokio::task::spawn_local(async move {
        loop {
            out_conn.wake_writer.notified().await;
            loop {
                let data = {
                    let mut out = out_conn.out.borrow_mut();
                    if out.is_empty() {
                        break;
                    }
                    out.split().freeze()
                };
                if writer.write_all(&data).await.is_err() {
                    out_conn.closed.set(true);
                    return;
                }
            }
            if out_conn.closed.get() {
                let _ = writer.shutdown().await;
                return;
            }
        }
    });
    let mut decoder = RequestDecoder::new(max_frame);
    let mut buf = BytesMut::with_capacity(READ_CHUNK);
    'read: loop {
        while conn.outstanding.get() >= conn.max_outstanding {
            conn.wake_reader.notified().await;
        }
        // The shard is out of journal buffers or write cache: leave the bytes in the socket
        // (TCP pushes back on the client) until it can take more.
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
            let _ = tokio::time::timeout(std::time::Duration::from_millis(5), woken).await;
        }
        if buf.capacity() - buf.len() < READ_CHUNK / 4 {
            buf.reserve(READ_CHUNK);
        }
        match reader.read_buf(&mut buf).await {
            Ok(0) => break,
            Ok(_) => {}
            Err(err) => {
                log::debug!("connection {}: read error {err}", conn.id);
                break;
            }
        }
        let mut shard = shard.borrow_mut();
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(frame)) => {
                    conn.request_started();
                    shard.dispatch(frame, &conn);
                }
                Ok(None) => break,
                Err(err) => {
                    log::warn!("connection {}: closing on a bad frame: {err}", conn.id);
                    shard.drive();
                    break 'read;
                }
            }
        }
        shard.drive();
    }
    conn.closed.set(true);
    conn.wake_writer.notify_one();
    shard.borrow_mut().forget_connection(conn.id);
    let _ = writer_task.await;
}
