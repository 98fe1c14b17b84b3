//! Reaching the controller quorum from another node: forwarding commands to the active
//! controller and fetching committed metadata entries, over the controller listener.

use std::collections::HashMap;
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use parking_lot::Mutex;

use crate::commands::{Command, CommandRequest, CommandResponse};
use crate::server::{FetchRequest, FetchResponse};
use crate::wire::{from_json, read_frame, to_json, write_frame, FrameKind};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// A command waits for its entry to commit (30 s at most) on the other side.
pub(crate) const COMMAND_READ_TIMEOUT: Duration = Duration::from_secs(35);

/// How one request failed.
enum Failure {
    /// The connection was closed before an answer: the request did not run.
    Closed(String),
    /// Anything else (a timeout may mean it ran).
    Other(String),
}

impl Failure {
    fn into_message(self) -> String {
        match self {
            Failure::Closed(m) | Failure::Other(m) => m,
        }
    }
}

/// Connections to the voters, one cached per voter.
pub struct ControllerClient {
    /// Voters by raft id: `host:port` of their controller listener.
    voters: Vec<(u64, String)>,
    idle: Mutex<HashMap<u64, TcpStream>>,
}

impl std::fmt::Debug for ControllerClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerClient")
            .field("voters", &self.voters)
            .finish()
    }
}

impl ControllerClient {
    /// A client for voters `(raft id, host:port)`.
    pub fn new(voters: Vec<(u64, String)>) -> Self {
        ControllerClient {
            voters,
            idle: Mutex::new(HashMap::new()),
        }
    }

    /// The voters' raft ids, in configuration order.
    pub fn voter_ids(&self) -> Vec<u64> {
        self.voters.iter().map(|(id, _)| *id).collect()
    }

    fn connect(&self, voter: u64) -> Result<TcpStream, String> {
        let addr = self
            .voters
            .iter()
            .find(|(id, _)| *id == voter)
            .map(|(_, a)| a.as_str())
            .ok_or_else(|| format!("raft id {voter} is not a voter"))?;
        let sock = addr
            .to_socket_addrs()
            .map_err(|e| format!("resolve {addr}: {e}"))?
            .next()
            .ok_or_else(|| format!("{addr} resolves to nothing"))?;
        let stream = TcpStream::connect_timeout(&sock, CONNECT_TIMEOUT)
            .map_err(|e| format!("connect to {addr}: {e}"))?;
        stream.set_nodelay(true).ok();
        Ok(stream)
    }

    /// One request and its answer on a cached or new connection to `voter`.
    fn call(
        &self,
        voter: u64,
        kind: FrameKind,
        payload: &[u8],
        answer: FrameKind,
        read_timeout: Duration,
    ) -> Result<Vec<u8>, String> {
        let cached = self.idle.lock().remove(&voter);
        let reused = cached.is_some();
        let mut stream = match cached {
            Some(s) => s,
            None => self.connect(voter)?,
        };
        match self.exchange(&mut stream, kind, payload, answer, read_timeout) {
            Ok(body) => {
                self.idle.lock().insert(voter, stream);
                Ok(body)
            }
            // A cached connection the peer closed in the meantime fails at once (end of
            // stream, reset): the request never reached it, so it is sent again on a new one.
            // A timeout is not retried: the request may have been executed.
            Err(Failure::Closed(_)) if reused => {
                let mut stream = self.connect(voter)?;
                let body = self
                    .exchange(&mut stream, kind, payload, answer, read_timeout)
                    .map_err(Failure::into_message)?;
                self.idle.lock().insert(voter, stream);
                Ok(body)
            }
            Err(e) => Err(e.into_message()),
        }
    }

    fn exchange(
        &self,
        stream: &mut TcpStream,
        kind: FrameKind,
        payload: &[u8],
        answer: FrameKind,
        read_timeout: Duration,
    ) -> Result<Vec<u8>, Failure> {
        stream.set_read_timeout(Some(read_timeout)).ok();
        stream.set_write_timeout(Some(Duration::from_secs(5))).ok();
        write_frame(stream, kind, payload).map_err(|e| Failure::Closed(e.to_string()))?;
        match read_frame(stream) {
            Ok(Some((k, body))) if k == answer => Ok(body),
            Ok(Some((FrameKind::Refused, why))) => Err(Failure::Other(format!(
                "refused: {}",
                String::from_utf8_lossy(&why)
            ))),
            Ok(Some((k, _))) => Err(Failure::Other(format!("unexpected answer {k:?}"))),
            Ok(None) => Err(Failure::Closed("connection closed".into())),
            Err(crate::ControllerError::Io(e))
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
                ) =>
            {
                Err(Failure::Closed(e.to_string()))
            }
            Err(e) => Err(Failure::Other(e.to_string())),
        }
    }

    /// Sends `command` to `voter` and waits up to `timeout` for the answer, which says
    /// whether it was the active controller. A short `timeout` (heartbeats) keeps a call to a
    /// controller that became unreachable from outliving the broker's session.
    pub fn forward(
        &self,
        voter: u64,
        cluster_id: Option<String>,
        command: &Command,
        timeout: Duration,
    ) -> Result<CommandResponse, String> {
        let payload = to_json(&CommandRequest {
            cluster_id,
            command: command.clone(),
        })
        .map_err(|e| e.to_string())?;
        let body = self.call(
            voter,
            FrameKind::CommandRequest,
            &payload,
            FrameKind::CommandResponse,
            timeout.min(COMMAND_READ_TIMEOUT),
        )?;
        from_json(&body, "command response").map_err(|e| e.to_string())
    }

    /// Committed entries after `after_index` from `voter`, waiting up to `wait` for new ones.
    pub fn fetch(
        &self,
        node_id: i32,
        voter: u64,
        cluster_id: Option<String>,
        after_index: u64,
        wait: Duration,
    ) -> Result<FetchResponse, String> {
        let payload = to_json(&FetchRequest {
            node_id,
            cluster_id,
            after_index,
            max_wait_ms: wait.as_millis() as u64,
        })
        .map_err(|e| e.to_string())?;
        let body = self.call(
            voter,
            FrameKind::FetchRequest,
            &payload,
            FrameKind::FetchResponse,
            wait + Duration::from_secs(10),
        )?;
        from_json(&body, "fetch response").map_err(|e| e.to_string())
    }
}
