//! One pipelined connection to a bookie over tokio (the `net` crate's sans-I/O client): a batch
//! of v3 requests is written at once and the replies are matched as they come. A connection
//! that fails or times out is dropped; the next batch opens a new one.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use net::client::{ClientConfig, ClientConnection, RequestId};
use net::{Request, Response};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long a batch may take before the connection is given up.
pub const BATCH_TIMEOUT: Duration = Duration::from_secs(30);

pub struct Conn {
    stream: TcpStream,
    client: ClientConnection,
}

impl Conn {
    pub async fn open(addr: SocketAddr) -> Result<Conn, String> {
        let stream = tokio::time::timeout(Duration::from_secs(10), TcpStream::connect(addr))
            .await
            .map_err(|_| format!("connect {addr}: timed out"))?
            .map_err(|e| format!("connect {addr}: {e}"))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        Ok(Conn {
            stream,
            client: ClientConnection::new(ClientConfig::default()),
        })
    }

    /// Sends `requests` (v3) together and returns their responses in the same order.
    pub async fn call_all(&mut self, requests: Vec<Request>) -> Result<Vec<Response>, String> {
        tokio::time::timeout(BATCH_TIMEOUT, self.call_all_inner(requests))
            .await
            .map_err(|_| "the bookie did not answer in time".to_string())?
    }

    async fn call_all_inner(&mut self, requests: Vec<Request>) -> Result<Vec<Response>, String> {
        let n = requests.len();
        let mut ids: BTreeMap<RequestId, usize> = BTreeMap::new();
        for (i, r) in requests.into_iter().enumerate() {
            let id = self.client.send_v3(r, None).map_err(|e| e.to_string())?;
            ids.insert(id, i);
        }
        let out = self.client.take_output();
        self.stream
            .write_all(&out)
            .await
            .map_err(|e| format!("write: {e}"))?;
        let mut got: Vec<Option<Response>> = (0..n).map(|_| None).collect();
        let mut left = n;
        while left > 0 {
            while let Some((id, frame)) = self.client.poll_response().map_err(|e| e.to_string())? {
                if let Some(i) = ids.remove(&id) {
                    got[i] = Some(frame.response);
                    left -= 1;
                }
            }
            if left == 0 {
                break;
            }
            let buf = self.client.receive_buffer();
            let filled = buf.len();
            buf.resize(filled + 64 * 1024, 0);
            let read = self.stream.read(&mut buf[filled..]).await;
            let count = *read.as_ref().unwrap_or(&0);
            buf.truncate(filled + count);
            match read {
                Ok(0) => return Err("the bookie closed the connection".into()),
                Ok(_) => {}
                Err(e) => return Err(format!("read: {e}")),
            }
        }
        Ok(got
            .into_iter()
            .map(|r| r.expect("every reply matched"))
            .collect())
    }
}
