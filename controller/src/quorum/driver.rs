//! The quorum driver: one thread that owns a [`RaftNode`] and moves it forward in real time.
//!
//! Everything reaches the node through one bounded channel of [`Input`]s (peer messages from
//! the network, proposals from the controller), so the node needs no lock. The driver ticks
//! the clock, persists and sends what raft asks for, and hands every committed entry, on
//! every voter, to the state machine (the controller's image) in log order. A proposal is
//! answered only after its entry was applied, so the proposer's next read sees it.

use std::collections::BTreeMap;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use raft::eraftpb::Message;

use crate::quorum::node::{CommittedEntry, InstalledSnapshot, RaftNode};
use crate::quorum::transport::RaftTransport;
use crate::ControllerError;

/// Wall-clock length of one raft tick.
pub(crate) const TICK_INTERVAL: Duration = Duration::from_millis(100);
/// Inputs queued for the driver before senders are refused (peers' messages are then dropped;
/// raft retransmits).
const INPUT_QUEUE: usize = 4096;
/// Most inputs handled between two ready rounds.
const INPUTS_PER_ROUND: usize = 256;
/// How long a proposal waits for its entry to commit (Kafka's `request.timeout.ms` default).
pub(crate) const PROPOSAL_TIMEOUT: Duration = Duration::from_secs(30);

/// What the driver drives: committed entries go in, in log order; snapshots come out of it
/// and go back into it. An error stops the driver.
pub(crate) trait StateMachine: Send {
    /// Applies one committed entry.
    fn apply(&mut self, entry: &CommittedEntry) -> Result<(), ControllerError>;
    /// Replaces the state by a snapshot the leader sent (its state at `snapshot.index`).
    fn restore(&mut self, snapshot: &InstalledSnapshot) -> Result<(), ControllerError>;
    /// The state at `index` (everything up to it is applied) as snapshot bytes.
    fn snapshot(&mut self, index: u64) -> Result<Vec<u8>, ControllerError>;
    /// The log up to `index` was replaced by the snapshot `data`.
    fn compacted(&mut self, index: u64, data: &[u8]);
}

/// When a voter snapshots its state and truncates its log (Kafka's
/// `metadata.log.max.record.bytes.between.snapshots` and `metadata.log.max.snapshot.interval.ms`).
#[derive(Debug, Clone, Copy)]
pub struct SnapshotPolicy {
    /// Bytes of entries applied since the last snapshot that call for a new one.
    pub max_bytes_between: u64,
    /// Longest time between snapshots while anything new was applied.
    pub max_interval: Duration,
}

impl Default for SnapshotPolicy {
    fn default() -> Self {
        SnapshotPolicy {
            max_bytes_between: 20 * 1024 * 1024,
            max_interval: Duration::from_secs(3600),
        }
    }
}

/// What the driver is fed.
pub(crate) enum Input {
    /// A raft message from a peer.
    Message(Message),
    /// Bytes to append as one entry; answered once committed and applied.
    Propose {
        /// The entry's data.
        data: Vec<u8>,
        /// Where the outcome goes.
        reply: SyncSender<Result<(), ControllerError>>,
    },
    /// A peer opened a raft stream; its log ends at `last_index`.
    PeerConnected {
        /// Its raft id.
        id: u64,
        /// Its last log index when it started.
        last_index: u64,
    },
    /// Stop the driver.
    Shutdown,
}

/// The role of this voter as last seen by the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Follows a leader (or waits for one).
    Follower,
    /// Campaigning.
    Candidate,
    /// Leads the quorum.
    Leader,
}

/// A voter's replication progress as its leader sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaProgress {
    /// Raft id.
    pub id: u64,
    /// Highest log index known replicated to it.
    pub matched: u64,
    /// When the leader last heard from it, if it has.
    pub last_contact: Option<Instant>,
}

/// What the driver last knew of the quorum.
#[derive(Debug, Clone)]
pub struct QuorumStatus {
    /// This voter's raft id.
    pub id: u64,
    /// Current term.
    pub term: u64,
    /// Known leader.
    pub leader: Option<u64>,
    /// This voter's role.
    pub role: Role,
    /// Highest committed index.
    pub commit_index: u64,
    /// Highest index applied to the state machine.
    pub applied_index: u64,
    /// Last index in the local log.
    pub last_index: u64,
    /// First index still in the local log (everything before is in the latest snapshot).
    pub first_index: u64,
    /// Leader only: all entries of earlier terms are applied, so commands may be validated.
    pub leader_ready: bool,
    /// The voters' raft ids.
    pub voters: Vec<u64>,
    /// Leader only: each voter's progress.
    pub progress: Vec<ReplicaProgress>,
    /// Set if the driver stopped after a failure.
    pub failed: Option<String>,
}

/// The handle the rest of the controller holds: submit proposals, feed messages, read status.
#[derive(Clone)]
pub struct QuorumHandle {
    inputs: SyncSender<Input>,
    status: Arc<Mutex<QuorumStatus>>,
}

impl std::fmt::Debug for QuorumHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuorumHandle")
            .field("status", &*self.status.lock())
            .finish()
    }
}

impl QuorumHandle {
    /// The last status the driver published.
    pub fn status(&self) -> QuorumStatus {
        self.status.lock().clone()
    }

    /// Whether this voter leads and may validate and append commands now.
    pub fn is_ready_leader(&self) -> bool {
        let s = self.status.lock();
        s.role == Role::Leader && s.leader_ready && s.failed.is_none()
    }

    /// Hands a peer's message to the driver; dropped when the driver is overloaded.
    pub fn deliver(&self, message: Message) {
        match self.inputs.try_send(Input::Message(message)) {
            Ok(()) | Err(TrySendError::Disconnected(_)) => {}
            Err(TrySendError::Full(_)) => {
                tracing::debug!("raft input queue full; a peer message was dropped");
            }
        }
    }

    /// Tells the driver a peer opened a raft stream with a log ending at `last_index`.
    pub fn peer_connected(&self, id: u64, last_index: u64) {
        let _ = self
            .inputs
            .try_send(Input::PeerConnected { id, last_index });
    }

    /// Appends `data` as one entry; returns once it is committed and applied on this voter.
    pub fn propose(&self, data: Vec<u8>) -> Result<(), ControllerError> {
        let (reply, outcome) = mpsc::sync_channel(1);
        self.inputs
            .send(Input::Propose { data, reply })
            .map_err(|_| {
                ControllerError::Quorum("the metadata quorum driver has stopped".into())
            })?;
        match outcome.recv_timeout(PROPOSAL_TIMEOUT + Duration::from_secs(1)) {
            Ok(result) => result,
            Err(_) => Err(ControllerError::Quorum(
                "no answer from the metadata quorum driver".into(),
            )),
        }
    }

    /// Stops the driver thread (it finishes the round it is in).
    pub fn shutdown(&self) {
        let _ = self.inputs.try_send(Input::Shutdown);
    }
}

/// A proposal waiting for its entry to be applied.
struct Pending {
    term: u64,
    deadline: Instant,
    reply: SyncSender<Result<(), ControllerError>>,
}

/// The driver loop's state (see the module docs).
pub(crate) struct QuorumDriver {
    node: RaftNode,
    transport: Box<dyn RaftTransport>,
    machine: Box<dyn StateMachine>,
    policy: SnapshotPolicy,
    /// Entry bytes applied since the last snapshot, and when that was.
    bytes_since_snapshot: u64,
    last_snapshot: Instant,
    inputs: Receiver<Input>,
    status: Arc<Mutex<QuorumStatus>>,
    pending: BTreeMap<u64, Pending>,
    /// The term this voter leads, if it does.
    leader_term: Option<u64>,
    /// The index of this leader's first entry of its term; applied means leader-ready.
    leader_ready_index: Option<u64>,
    last_contact: BTreeMap<u64, Instant>,
    next_tick: Instant,
}

impl QuorumDriver {
    /// Wraps `node`; returns the driver (to run on a thread of its own) and its handle.
    pub(crate) fn new(
        node: RaftNode,
        transport: Box<dyn RaftTransport>,
        machine: Box<dyn StateMachine>,
        policy: SnapshotPolicy,
    ) -> (QuorumDriver, QuorumHandle) {
        let (tx, rx) = mpsc::sync_channel(INPUT_QUEUE);
        let status = Arc::new(Mutex::new(QuorumStatus {
            id: node.id(),
            term: node.term(),
            leader: node.leader_id(),
            role: Role::Follower,
            commit_index: node.commit_index(),
            applied_index: node.applied_index(),
            last_index: node.last_index(),
            first_index: node.first_index(),
            leader_ready: false,
            voters: node.voters(),
            progress: Vec::new(),
            failed: None,
        }));
        let driver = QuorumDriver {
            node,
            transport,
            machine,
            policy,
            bytes_since_snapshot: 0,
            last_snapshot: Instant::now(),
            inputs: rx,
            status: status.clone(),
            pending: BTreeMap::new(),
            leader_term: None,
            leader_ready_index: None,
            last_contact: BTreeMap::new(),
            next_tick: Instant::now() + TICK_INTERVAL,
        };
        (driver, QuorumHandle { inputs: tx, status })
    }

    /// Starts an election at once (a single voter becomes leader without peers).
    pub(crate) fn campaign(&mut self) -> Result<(), ControllerError> {
        self.node.campaign()?;
        self.round()
    }

    /// Runs the driver on a new thread until shut down or failed.
    pub(crate) fn spawn(mut self, name: String) -> std::io::Result<std::thread::JoinHandle<()>> {
        std::thread::Builder::new().name(name).spawn(move || {
            if let Err(e) = self.run() {
                tracing::error!(error = %e, "the metadata quorum driver stopped");
                self.status.lock().failed = Some(e.to_string());
                self.fail_pending(|| {
                    ControllerError::Quorum(format!("metadata quorum failed: {e}"))
                });
            }
        })
    }

    fn run(&mut self) -> Result<(), ControllerError> {
        loop {
            let now = Instant::now();
            let wait = self.next_tick.saturating_duration_since(now);
            let mut handled = 0;
            let mut input = match self.inputs.recv_timeout(wait) {
                Ok(input) => Some(input),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => return Ok(()),
            };
            while let Some(i) = input.take() {
                if !self.handle_input(i)? {
                    self.fail_pending(|| {
                        ControllerError::Quorum("the metadata quorum stopped".into())
                    });
                    return Ok(());
                }
                handled += 1;
                if handled < INPUTS_PER_ROUND {
                    input = self.inputs.try_recv().ok();
                }
            }
            let now = Instant::now();
            if now >= self.next_tick {
                self.node.tick();
                self.next_tick = now + TICK_INTERVAL;
                self.expire_pending(now);
            }
            self.round()?;
        }
    }

    /// Handles one input; false means shut down.
    fn handle_input(&mut self, input: Input) -> Result<bool, ControllerError> {
        match input {
            Input::Message(message) => {
                let from = message.from;
                match self.node.step(message) {
                    Ok(()) => {
                        self.last_contact.insert(from, Instant::now());
                    }
                    Err(ControllerError::Raft(e)) => {
                        tracing::debug!(from, error = %e, "raft message refused");
                    }
                    Err(e) => return Err(e),
                }
            }
            Input::Propose { data, reply } => {
                if self
                    .leader_ready_index
                    .is_none_or(|i| self.node.applied_index() < i)
                    || !self.node.is_leader()
                {
                    let _ = reply.send(Err(ControllerError::NotLeader {
                        leader: self.node.leader_id(),
                    }));
                    return Ok(true);
                }
                match self.node.propose(data) {
                    Ok((index, term)) => {
                        self.pending.insert(
                            index,
                            Pending {
                                term,
                                deadline: Instant::now() + PROPOSAL_TIMEOUT,
                                reply,
                            },
                        );
                    }
                    Err(e) => {
                        let _ = reply.send(Err(e));
                    }
                }
            }
            Input::PeerConnected { id, last_index } => self.node.peer_log_end(id, last_index),
            Input::Shutdown => return Ok(false),
        }
        Ok(true)
    }

    /// Persists, sends, applies; then publishes the status.
    fn round(&mut self) -> Result<(), ControllerError> {
        self.node.handle_ready()?;
        self.transport.send(self.node.take_messages());
        if let Some(snapshot) = self.node.take_installed_snapshot() {
            tracing::info!(
                index = snapshot.index,
                "installing a metadata snapshot from the leader"
            );
            self.machine.restore(&snapshot)?;
            self.bytes_since_snapshot = 0;
            self.last_snapshot = Instant::now();
        }
        for entry in self.node.take_committed() {
            self.machine.apply(&entry)?;
            self.bytes_since_snapshot += entry.data.len() as u64;
            if let Some(p) = self.pending.remove(&entry.index) {
                let outcome = if p.term == entry.term {
                    Ok(())
                } else {
                    Err(ControllerError::NotLeader {
                        leader: self.node.leader_id(),
                    })
                };
                let _ = p.reply.send(outcome);
            }
        }
        // Entries replaced by another leader's never commit: answer their proposers now.
        let applied = self.node.applied_index();
        let stale: Vec<u64> = self.pending.range(..=applied).map(|(i, _)| *i).collect();
        for index in stale {
            if let Some(p) = self.pending.remove(&index) {
                let _ = p.reply.send(Err(ControllerError::NotLeader {
                    leader: self.node.leader_id(),
                }));
            }
        }
        if self.node.is_leader() {
            let term = self.node.term();
            if self.leader_term != Some(term) {
                // The empty entry a new leader appends: once applied, so is everything before
                // it. Nothing else was appended in this term yet.
                self.leader_term = Some(term);
                self.leader_ready_index = Some(self.node.last_index());
                tracing::info!(term, "this node is now the active controller");
            }
        } else {
            self.leader_term = None;
            self.leader_ready_index = None;
            if !self.pending.is_empty() {
                self.fail_pending(|| ControllerError::NotLeader { leader: None });
            }
        }
        self.maybe_snapshot()?;
        self.publish_status();
        Ok(())
    }

    /// Snapshots the state and truncates the log when the policy says so.
    fn maybe_snapshot(&mut self) -> Result<(), ControllerError> {
        let due = self.bytes_since_snapshot >= self.policy.max_bytes_between
            || (self.bytes_since_snapshot > 0
                && self.last_snapshot.elapsed() >= self.policy.max_interval);
        if !due {
            return Ok(());
        }
        let index = self.node.applied_index();
        let data = self.machine.snapshot(index)?;
        self.node.compact(index, data.clone())?;
        self.machine.compacted(index, &data);
        tracing::info!(
            index,
            bytes = data.len(),
            "metadata log truncated after a snapshot"
        );
        self.bytes_since_snapshot = 0;
        self.last_snapshot = Instant::now();
        Ok(())
    }

    fn publish_status(&self) {
        let node = &self.node;
        let role = if node.is_leader() {
            Role::Leader
        } else if node.is_candidate() {
            Role::Candidate
        } else {
            Role::Follower
        };
        let progress = if node.is_leader() {
            node.progress()
                .into_iter()
                .map(|(id, matched)| ReplicaProgress {
                    id,
                    matched,
                    last_contact: if id == node.id() {
                        Some(Instant::now())
                    } else {
                        self.last_contact.get(&id).copied()
                    },
                })
                .collect()
        } else {
            Vec::new()
        };
        let mut s = self.status.lock();
        s.term = node.term();
        s.leader = node.leader_id();
        s.role = role;
        s.commit_index = node.commit_index();
        s.applied_index = node.applied_index();
        s.last_index = node.last_index();
        s.first_index = node.first_index();
        s.leader_ready = node.is_leader()
            && self
                .leader_ready_index
                .is_some_and(|i| node.applied_index() >= i);
        s.progress = progress;
    }

    fn expire_pending(&mut self, now: Instant) {
        let expired: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(i, _)| *i)
            .collect();
        for index in expired {
            if let Some(p) = self.pending.remove(&index) {
                let _ = p.reply.send(Err(ControllerError::Quorum(format!(
                    "metadata entry {index} not committed after {} ms",
                    PROPOSAL_TIMEOUT.as_millis()
                ))));
            }
        }
    }

    fn fail_pending(&mut self, error: impl Fn() -> ControllerError) {
        for (_, p) in std::mem::take(&mut self.pending) {
            let _ = p.reply.send(Err(error()));
        }
    }
}
