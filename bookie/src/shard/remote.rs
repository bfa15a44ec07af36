//! Requests for another shard's ledgers and the replies that come back: the cross-shard half
//! of dispatch.

use super::*;

impl Shard {
    /// A request from another shard about one of ours.
    pub fn handle_remote(&mut self, request: RemoteRequest) {
        self.m().stage(Stage::CrossShardQueue, request.since);
        let to = Responder::Remote {
            origin: request.origin,
            conn_id: request.conn_id,
            shared: request.conn,
            header: request.frame.reply_header(),
            op: op_of(&request.frame.request),
            since: request.since,
        };
        self.handle(request.frame, to);
    }

    /// A reply from another shard for one of our connections.
    pub fn deliver_remote_reply(&mut self, reply: RemoteReply) {
        if reply.timing != 0 {
            let (op, since) = crate::admin::metrics::unpack_timing(reply.timing);
            self.record(op, since, &reply.frame.response);
            self.m().stage(Stage::CacheMissRead, since);
        }
        if let Some(conn) = self.conns.get(&reply.conn_id).and_then(Weak::upgrade) {
            conn.send_timed(reply.frame, reply.ready_at);
        }
    }
}
