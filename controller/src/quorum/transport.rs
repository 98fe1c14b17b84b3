//! How raft messages travel between voters; the network implementation comes with the
//! multi-voter quorum, tests use a simulated one.

use std::time::Duration;

use raft::eraftpb::Message;

use crate::ControllerError;

/// Carries raft messages between the voters of the metadata quorum.
pub trait RaftTransport: Send {
    /// Queues messages for their recipients (`Message::to`); delivery is best effort.
    fn send(&mut self, messages: Vec<Message>);
    /// Waits up to `timeout` for one message addressed to this voter.
    fn recv(&mut self, timeout: Duration) -> Result<Option<Message>, ControllerError>;
}

/// The transport of a quorum with a single voter: there is nobody to talk to.
#[derive(Debug, Default)]
pub struct NoPeers;

impl RaftTransport for NoPeers {
    fn send(&mut self, messages: Vec<Message>) {
        for m in messages {
            tracing::warn!(to = m.to, kind = ?m.get_msg_type(), "raft message with no peer transport dropped");
        }
    }

    fn recv(&mut self, timeout: Duration) -> Result<Option<Message>, ControllerError> {
        std::thread::sleep(timeout);
        Ok(None)
    }
}
