//! A thin blocking adapter: a [`ClientConnection`] over a `std::net::TcpStream`.
//!
//! For tools and tests (bkperf's simple modes, end-to-end tests, talking to a
//! Java bookie). Pipelining works: queue several requests with `send_*`, then
//! [`BlockingClient::receive`] their responses in whatever order the bookie sends
//! them. Timeouts are the socket's (`set_read_timeout`).

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};

use super::{ClientConfig, ClientConnection, ClientError, RequestId};
use crate::request::Request;
use crate::response::ResponseFrame;

/// Bytes asked of the socket per read.
const READ_CHUNK: usize = 64 * 1024;

/// A blocking client connection to one bookie.
#[derive(Debug)]
pub struct BlockingClient {
    stream: TcpStream,
    connection: ClientConnection,
    /// Responses that arrived while [`BlockingClient::call_v3`]/`call_v2` waited
    /// for another one.
    ready: VecDeque<(RequestId, ResponseFrame)>,
}

fn to_io(error: ClientError) -> io::Error {
    let kind = match error {
        ClientError::Protocol(_) => io::ErrorKind::InvalidData,
        ClientError::TooManyPendingRequests | ClientError::Encode(_) => io::ErrorKind::InvalidInput,
    };
    io::Error::new(kind, error)
}

impl BlockingClient {
    /// Connects (with `TCP_NODELAY`, as the Java client does by default).
    pub fn connect(
        address: impl ToSocketAddrs,
        config: ClientConfig,
    ) -> io::Result<BlockingClient> {
        let stream = TcpStream::connect(address)?;
        stream.set_nodelay(true)?;
        Ok(BlockingClient::from_stream(stream, config))
    }

    /// Wraps an already connected stream.
    pub fn from_stream(stream: TcpStream, config: ClientConfig) -> BlockingClient {
        BlockingClient {
            stream,
            connection: ClientConnection::new(config),
            ready: VecDeque::new(),
        }
    }

    /// The socket, e.g. to set timeouts.
    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// The sans-I/O state underneath.
    pub fn connection(&self) -> &ClientConnection {
        &self.connection
    }

    /// Queues a v2 request; it is written by the next flush or receive.
    pub fn send_v2(&mut self, request: Request, high_priority: bool) -> io::Result<RequestId> {
        self.connection
            .send_v2(request, high_priority)
            .map_err(to_io)
    }

    /// Queues a v3 request; it is written by the next flush or receive.
    pub fn send_v3(&mut self, request: Request, priority: Option<u32>) -> io::Result<RequestId> {
        self.connection.send_v3(request, priority).map_err(to_io)
    }

    /// Writes every queued request.
    pub fn flush(&mut self) -> io::Result<()> {
        if self.connection.has_output() {
            let output = self.connection.take_output();
            self.stream.write_all(&output)?;
        }
        Ok(())
    }

    /// Flushes, then blocks until a response to any pending request arrives.
    pub fn receive(&mut self) -> io::Result<(RequestId, ResponseFrame)> {
        if let Some(ready) = self.ready.pop_front() {
            return Ok(ready);
        }
        self.flush()?;
        loop {
            if let Some(response) = self.connection.poll_response().map_err(to_io)? {
                return Ok(response);
            }
            let buffer = self.connection.receive_buffer();
            let filled = buffer.len();
            buffer.resize(filled + READ_CHUNK, 0);
            let read = self.stream.read(&mut buffer[filled..]);
            let count = *read.as_ref().unwrap_or(&0);
            buffer.truncate(filled + count);
            match read {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(_) => {}
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
    }

    /// Sends one v2 request and waits for its response.
    pub fn call_v2(&mut self, request: Request, high_priority: bool) -> io::Result<ResponseFrame> {
        let id = self.send_v2(request, high_priority)?;
        self.wait_for(id)
    }

    /// Sends one v3 request and waits for its response.
    pub fn call_v3(
        &mut self,
        request: Request,
        priority: Option<u32>,
    ) -> io::Result<ResponseFrame> {
        let id = self.send_v3(request, priority)?;
        self.wait_for(id)
    }

    fn wait_for(&mut self, id: RequestId) -> io::Result<ResponseFrame> {
        if let Some(index) = self.ready.iter().position(|(ready, _)| *ready == id) {
            return Ok(self.ready.remove(index).expect("index is in range").1);
        }
        self.flush()?;
        loop {
            // Bypass `ready` in receive(): everything new comes from the socket.
            let (got, frame) = {
                let ready = std::mem::take(&mut self.ready);
                let result = self.receive();
                self.ready = ready;
                result?
            };
            if got == id {
                return Ok(frame);
            }
            self.ready.push_back((got, frame));
        }
    }
}
