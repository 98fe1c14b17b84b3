//! The controller listener: raft streams from the other voters, commands forwarded to the
//! active controller, and metadata fetches by nodes that follow the log without voting.
//! Plain threads: a handful of long-lived connections between nodes, bounded in number.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use protobuf::Message as _;
use raft::eraftpb::Message;
use serde::{Deserialize, Serialize};

use crate::commands::{CommandRequest, CommandResponse, WireError};
use crate::controller::Controller;
use crate::metadata_state::{LogEntry, MetadataState, SnapshotPayload};
use crate::quorum::QuorumHandle;
use crate::wire::{from_json, read_frame, to_json, write_frame, FrameKind, Hello};
use crate::ControllerError;

/// Most connections served at once; more are closed at accept.
const MAX_CONNECTIONS: usize = 256;
/// How long a new connection may take to say what it wants.
const FIRST_FRAME_TIMEOUT: Duration = Duration::from_secs(10);
/// An idle command or fetch connection is closed after this.
const IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// Most records in one fetch answer.
pub(crate) const MAX_FETCH_RECORDS: usize = 10_000;
/// Longest a fetch waits for new entries.
pub(crate) const MAX_FETCH_WAIT: Duration = Duration::from_secs(5);

/// A node's request for committed metadata entries.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct FetchRequest {
    /// The fetching node's id.
    pub node_id: i32,
    /// The fetching node's cluster id, if it knows it.
    pub cluster_id: Option<String>,
    /// Entries after this raft index.
    pub after_index: u64,
    /// How long to wait when there is nothing new (capped at [`MAX_FETCH_WAIT`]).
    pub max_wait_ms: u64,
}

/// Committed entries for a fetching node.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FetchResponse {
    /// The latest snapshot, if the fetcher is behind the log the voter still keeps.
    #[serde(default)]
    pub snapshot: Option<SnapshotPayload>,
    /// Entries with records, in log order.
    pub entries: Vec<LogEntry>,
    /// The reader has seen everything up to this raft index.
    pub seen_index: u64,
    /// Set if the answer is refused (another cluster, a node that cannot serve it).
    pub error: Option<WireError>,
    /// The quorum leader's raft id as the answering voter knows it: fetchers move there, so
    /// that the leader sees their progress (DescribeQuorum's observers).
    #[serde(default)]
    pub leader: Option<u64>,
}

/// What the listener serves from.
pub(crate) struct ServerContext {
    /// This voter's raft id, if it is one.
    pub raft_id: Option<u64>,
    /// The configured voters (raft ids, sorted).
    pub voters: Vec<u64>,
    /// The quorum driver of this voter.
    pub quorum: Option<QuorumHandle>,
    /// The applied image and entries.
    pub state: Arc<MetadataState>,
    /// The cluster id configured (formatted) on this node, if any.
    pub configured_cluster_id: Option<String>,
    /// The controller, once built.
    pub controller: OnceLock<Weak<Controller>>,
    connections: AtomicUsize,
}

impl ServerContext {
    /// A context with no controller yet (set it once it is built).
    pub(crate) fn new(
        raft_id: Option<u64>,
        voters: Vec<u64>,
        quorum: Option<QuorumHandle>,
        state: Arc<MetadataState>,
        configured_cluster_id: Option<String>,
    ) -> Self {
        ServerContext {
            raft_id,
            voters,
            quorum,
            state,
            configured_cluster_id,
            controller: OnceLock::new(),
            connections: AtomicUsize::new(0),
        }
    }

    /// Whether the controller this listener served has been dropped.
    fn is_shut_down(&self) -> bool {
        self.controller.get().is_some_and(|c| c.strong_count() == 0)
    }

    fn cluster_id(&self) -> Option<String> {
        self.state
            .image()
            .cluster_id
            .clone()
            .or_else(|| self.configured_cluster_id.clone())
    }

    /// Why a peer of `theirs` cluster id must be refused, if it must.
    fn cluster_mismatch(&self, theirs: &Option<String>) -> Option<String> {
        match (self.cluster_id(), theirs) {
            (Some(ours), Some(theirs)) if ours != *theirs => Some(format!(
                "cluster id {theirs} is not this cluster's ({ours})"
            )),
            _ => None,
        }
    }
}

/// How often the accept loop and idle raft streams check whether the controller is gone.
const SHUTDOWN_POLL: Duration = Duration::from_millis(50);

/// Serves `listener` on a thread of its own until the controller is dropped.
pub(crate) fn spawn(listener: TcpListener, ctx: Arc<ServerContext>) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
    std::thread::Builder::new()
        .name("controller-listener".into())
        .spawn(move || loop {
            if ctx.is_shut_down() {
                return;
            }
            let stream = match listener.accept() {
                Ok((stream, _)) => stream,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(SHUTDOWN_POLL);
                    continue;
                }
                Err(e) => {
                    tracing::debug!(error = %e, "controller listener accept failed");
                    std::thread::sleep(SHUTDOWN_POLL);
                    continue;
                }
            };
            if stream.set_nonblocking(false).is_err() {
                continue;
            }
            if ctx.connections.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
                ctx.connections.fetch_sub(1, Ordering::AcqRel);
                tracing::warn!("controller listener at its connection limit; closing one");
                continue;
            }
            let ctx2 = ctx.clone();
            let spawned = std::thread::Builder::new()
                .name("controller-conn".into())
                .spawn(move || {
                    if let Err(e) = serve(stream, &ctx2) {
                        tracing::debug!(error = %e, "controller connection closed");
                    }
                    ctx2.connections.fetch_sub(1, Ordering::AcqRel);
                });
            if spawned.is_err() {
                ctx.connections.fetch_sub(1, Ordering::AcqRel);
            }
        })?;
    Ok(())
}

fn refuse(stream: &mut TcpStream, why: &str) -> Result<(), ControllerError> {
    tracing::warn!(peer = ?stream.peer_addr().ok(), reason = why, "controller listener refused a peer");
    write_frame(stream, FrameKind::Refused, why.as_bytes())?;
    Ok(())
}

fn serve(mut stream: TcpStream, ctx: &ServerContext) -> Result<(), ControllerError> {
    stream.set_nodelay(true).ok();
    stream.set_read_timeout(Some(FIRST_FRAME_TIMEOUT))?;
    stream.set_write_timeout(Some(Duration::from_secs(10)))?;
    let Some((kind, payload)) = read_frame(&mut stream)? else {
        return Ok(());
    };
    match kind {
        FrameKind::RaftHello => serve_raft(stream, ctx, &payload),
        FrameKind::CommandRequest | FrameKind::FetchRequest => {
            stream.set_read_timeout(Some(IDLE_TIMEOUT))?;
            let mut next = Some((kind, payload));
            while let Some((kind, payload)) = next.take() {
                let (answer_kind, answer) = match kind {
                    FrameKind::CommandRequest => {
                        (FrameKind::CommandResponse, answer_command(ctx, &payload)?)
                    }
                    FrameKind::FetchRequest => {
                        (FrameKind::FetchResponse, answer_fetch(ctx, &payload)?)
                    }
                    other => {
                        return refuse(&mut stream, &format!("unexpected frame {other:?}"));
                    }
                };
                write_frame(&mut stream, answer_kind, &answer)?;
                stream.flush()?;
                if ctx.is_shut_down() {
                    return Ok(());
                }
                next = read_frame(&mut stream)?;
            }
            Ok(())
        }
        other => refuse(&mut stream, &format!("unexpected first frame {other:?}")),
    }
}

fn serve_raft(
    mut stream: TcpStream,
    ctx: &ServerContext,
    hello: &[u8],
) -> Result<(), ControllerError> {
    let hello: Hello = from_json(hello, "raft hello")?;
    let (Some(raft_id), Some(quorum)) = (ctx.raft_id, ctx.quorum.as_ref()) else {
        return refuse(&mut stream, "this node is not a controller");
    };
    let mut theirs = hello.voters.clone();
    theirs.sort_unstable();
    if theirs != ctx.voters {
        return refuse(
            &mut stream,
            &format!(
                "controller.quorum.voters disagree: the peer has raft ids {theirs:?}, this node {:?}",
                ctx.voters
            ),
        );
    }
    if !ctx.voters.contains(&hello.from) || hello.from == raft_id {
        return refuse(
            &mut stream,
            &format!("raft id {} is not another voter of this quorum", hello.from),
        );
    }
    if let Some(why) = ctx.cluster_mismatch(&hello.cluster_id) {
        return refuse(&mut stream, &why);
    }
    write_frame(&mut stream, FrameKind::HelloOk, &[])?;
    quorum.peer_connected(hello.from, hello.last_index);
    // A leader sends at least a heartbeat every tick: a longer silence is a dead peer.
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    loop {
        if ctx.is_shut_down() {
            return Ok(());
        }
        let Some((kind, payload)) = read_frame(&mut stream)? else {
            return Ok(());
        };
        if kind != FrameKind::RaftMessage {
            return Err(ControllerError::Quorum(format!(
                "a {kind:?} frame in a raft stream"
            )));
        }
        let message = Message::parse_from_bytes(&payload).map_err(|e| {
            ControllerError::Quorum(format!("a raft message that does not decode: {e}"))
        })?;
        // Only what this voter is meant to get, from the voter that said hello.
        if message.to == raft_id && message.from == hello.from {
            quorum.deliver(message);
        }
    }
}

fn answer_command(ctx: &ServerContext, payload: &[u8]) -> Result<Vec<u8>, ControllerError> {
    let request: CommandRequest = from_json(payload, "controller command")?;
    let controller = ctx.controller.get().and_then(Weak::upgrade);
    let result = if let Some(why) = ctx.cluster_mismatch(&request.cluster_id) {
        Err(WireError {
            code: tern_protocol::error::ResponseError::InconsistentClusterId.code(),
            message: why,
        })
    } else {
        match controller {
            Some(c) => c.execute(&request.command).map_err(WireError::from),
            None => Err(WireError {
                code: tern_protocol::error::ResponseError::NotController.code(),
                message: "the controller is starting".into(),
            }),
        }
    };
    to_json(&CommandResponse {
        result,
        image_offset: ctx.state.image().offset,
    })
}

fn answer_fetch(ctx: &ServerContext, payload: &[u8]) -> Result<Vec<u8>, ControllerError> {
    let request: FetchRequest = from_json(payload, "metadata fetch")?;
    if let Some(why) = ctx.cluster_mismatch(&request.cluster_id) {
        return to_json(&FetchResponse {
            snapshot: None,
            entries: Vec::new(),
            seen_index: request.after_index,
            error: Some(WireError {
                code: tern_protocol::error::ResponseError::InconsistentClusterId.code(),
                message: why,
            }),
            leader: None,
        });
    }
    ctx.state
        .note_observer(request.node_id, request.after_index);
    let wait = Duration::from_millis(request.max_wait_ms).min(MAX_FETCH_WAIT);
    let answer = ctx
        .state
        .entries_after(request.after_index, MAX_FETCH_RECORDS, wait);
    to_json(&FetchResponse {
        snapshot: answer.snapshot.map(|s| (*s).clone()),
        entries: answer.entries.iter().map(|e| (**e).clone()).collect(),
        seen_index: answer.seen,
        error: None,
        leader: ctx.quorum.as_ref().and_then(|q| q.status().leader),
    })
}
