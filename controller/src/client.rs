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
const COMMAND_READ_TIMEOUT: Duration = Duration::from_secs(35);

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
        // A cached connection may have been closed by the peer: retry once on a new one.
        let attempts: Vec<Option<TcpStream>> = match cached {
            Some(s) => vec![Some(s), None],
            None => vec![None],
        };
        let mut last = String::new();
        for stream in attempts {
            let mut stream = match stream {
                Some(s) => s,
                None => self.connect(voter)?,
            };
            stream.set_read_timeout(Some(read_timeout)).ok();
            stream.set_write_timeout(Some(Duration::from_secs(5))).ok();
            if let Err(e) = write_frame(&mut stream, kind, payload) {
                last = e.to_string();
                continue;
            }
            match read_frame(&mut stream) {
                Ok(Some((k, body))) if k == answer => {
                    self.idle.lock().insert(voter, stream);
                    return Ok(body);
                }
                Ok(Some((FrameKind::Refused, why))) => {
                    return Err(format!("refused: {}", String::from_utf8_lossy(&why)))
                }
                Ok(other) => last = format!("unexpected answer {:?}", other.map(|(k, _)| k)),
                Err(e) => last = e.to_string(),
            }
        }
        Err(last)
    }

    /// Sends `command` to `voter`; the answer says whether it was the active controller.
    pub fn forward(
        &self,
        voter: u64,
        cluster_id: Option<String>,
        command: &Command,
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
            COMMAND_READ_TIMEOUT,
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
