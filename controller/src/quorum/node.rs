//! `RaftNode`: one voter of the metadata quorum as a state machine without I/O of its own.
//!
//! Time comes in through [`RaftNode::tick`], peer messages through [`RaftNode::step`], new
//! records through [`RaftNode::propose`]; [`RaftNode::handle_ready`] persists what raft asks
//! for (through [`RaftStorage`], which is in memory in simulations) and queues what goes out:
//! messages for peers ([`RaftNode::take_messages`]) and committed entries for the state
//! machine ([`RaftNode::take_committed`]). A driver moves messages and drives the clock.

use raft::eraftpb::{Entry, EntryType, Message, MessageType};
use raft::{Config, RawNode, SnapshotStatus, StateRole};

use crate::quorum::storage::RaftStorage;
use crate::ControllerError;

/// Largest entry payload accepted by [`RaftNode::propose`].
pub(crate) const MAX_ENTRY_BYTES: usize = 8 * 1024 * 1024;
/// Most bytes of entries in one append message to a peer.
const MAX_BYTES_PER_MSG: u64 = 1024 * 1024;
/// Most append messages in flight to one peer.
const MAX_INFLIGHT_MSGS: usize = 256;
/// Most uncommitted bytes a leader accepts before dropping proposals.
const MAX_UNCOMMITTED_BYTES: u64 = 64 * 1024 * 1024;
/// Bound on ready rounds in one [`RaftNode::handle_ready`] call (each round makes progress).
const MAX_READY_ROUNDS: usize = 64;

/// Identity and timing of one voter.
#[derive(Debug, Clone)]
pub(crate) struct RaftNodeConfig {
    /// This voter's raft id (non-zero).
    pub id: u64,
    /// The voters of a new quorum (used only when the storage is empty).
    pub voters: Vec<u64>,
    /// Ticks without a leader before a follower campaigns (at least this, below `max_election_tick`).
    pub election_tick: usize,
    /// Election timeouts are drawn from `[election_tick, max_election_tick)`.
    pub max_election_tick: usize,
    /// Ticks between a leader's heartbeats.
    pub heartbeat_tick: usize,
}

impl RaftNodeConfig {
    /// Defaults for voter `id` of `voters`: heartbeat every tick, elections after 10 to 20.
    pub(crate) fn new(id: u64, voters: Vec<u64>) -> Self {
        RaftNodeConfig {
            id,
            voters,
            election_tick: 10,
            max_election_tick: 20,
            heartbeat_tick: 1,
        }
    }
}

/// A committed log entry carrying data, handed to the state machine in log order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CommittedEntry {
    /// Raft log index.
    pub index: u64,
    /// Term the entry was proposed in.
    pub term: u64,
    /// The proposed bytes.
    pub data: Vec<u8>,
}

/// A snapshot received from the leader and installed in storage: the state machine must be
/// restored from `data` (its state at `index`) before later entries are applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InstalledSnapshot {
    /// Raft index the snapshot is at.
    pub index: u64,
    /// The state machine's bytes.
    pub data: Vec<u8>,
}

/// One voter of the metadata quorum (see the module docs).
pub(crate) struct RaftNode {
    raw: RawNode<RaftStorage>,
    outbox: Vec<Message>,
    committed: Vec<CommittedEntry>,
    installed: Option<InstalledSnapshot>,
    /// Set by the first persistence or apply failure; the node then refuses to go on.
    failed: Option<String>,
}

impl std::fmt::Debug for RaftNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RaftNode")
            .field("id", &self.id())
            .field("term", &self.term())
            .field("role", &self.raw.raft.state)
            .field("commit", &self.commit_index())
            .finish()
    }
}

impl RaftNode {
    /// Starts a voter on `storage`, recording `config.voters` first if the storage is empty.
    /// Entries committed before are not handed out again: they are in `storage`.
    pub(crate) fn new(
        config: &RaftNodeConfig,
        mut storage: RaftStorage,
        logger: &slog::Logger,
    ) -> Result<Self, ControllerError> {
        if !storage.is_initialized() {
            storage.bootstrap(&config.voters)?;
        }
        let voters = &storage.conf_state().voters;
        if !voters.contains(&config.id) {
            return Err(ControllerError::Quorum(format!(
                "the metadata log belongs to voters {voters:?}, which do not include this node (raft id {})",
                config.id
            )));
        }
        let mut stored = voters.clone();
        let mut configured = config.voters.clone();
        stored.sort_unstable();
        configured.sort_unstable();
        if stored != configured {
            return Err(ControllerError::Quorum(format!(
                "configured voters {configured:?} differ from the metadata log's {stored:?} (membership changes are not supported yet)"
            )));
        }
        let raft_config = Config {
            id: config.id,
            election_tick: config.election_tick,
            min_election_tick: config.election_tick,
            max_election_tick: config.max_election_tick,
            heartbeat_tick: config.heartbeat_tick,
            applied: storage.hard_state().commit,
            max_size_per_msg: MAX_BYTES_PER_MSG,
            max_inflight_msgs: MAX_INFLIGHT_MSGS,
            max_uncommitted_size: MAX_UNCOMMITTED_BYTES,
            check_quorum: true,
            pre_vote: true,
            ..Config::default()
        };
        let raw = RawNode::new(&raft_config, storage, logger)?;
        Ok(RaftNode {
            raw,
            outbox: Vec::new(),
            committed: Vec::new(),
            installed: None,
            failed: None,
        })
    }

    /// This voter's raft id.
    pub(crate) fn id(&self) -> u64 {
        self.raw.raft.id
    }

    /// Current term.
    pub(crate) fn term(&self) -> u64 {
        self.raw.raft.term
    }

    /// Whether this voter is the leader of its current term.
    pub(crate) fn is_leader(&self) -> bool {
        self.raw.raft.state == StateRole::Leader
    }

    /// The leader this voter knows of, if any.
    pub(crate) fn leader_id(&self) -> Option<u64> {
        match self.raw.raft.leader_id {
            raft::INVALID_ID => None,
            id => Some(id),
        }
    }

    /// Highest log index known committed.
    pub(crate) fn commit_index(&self) -> u64 {
        self.raw.raft.raft_log.committed
    }

    /// Highest log index handed to the state machine.
    pub(crate) fn applied_index(&self) -> u64 {
        self.raw.raft.raft_log.applied
    }

    /// Last index in the local log.
    pub(crate) fn last_index(&self) -> u64 {
        self.raw.raft.raft_log.last_index()
    }

    /// First index still in the local log.
    pub(crate) fn first_index(&self) -> u64 {
        self.raw.raft.raft_log.first_index()
    }

    /// Whether this voter is campaigning.
    pub(crate) fn is_candidate(&self) -> bool {
        matches!(
            self.raw.raft.state,
            StateRole::Candidate | StateRole::PreCandidate
        )
    }

    /// The voters' raft ids, sorted.
    pub(crate) fn voters(&self) -> Vec<u64> {
        let mut v = self.storage().conf_state().voters.clone();
        v.sort_unstable();
        v
    }

    /// A peer (re)connected with a log ending at `last_index`. If this leader believed it had
    /// more (its data was wiped or lost), the belief is dropped and the peer probed again;
    /// raft-rs would otherwise ignore the peer's rejections as stale and never catch it up.
    pub(crate) fn peer_log_end(&mut self, id: u64, last_index: u64) {
        if !self.is_leader() || id == self.id() {
            return;
        }
        if let Some(pr) = self.raw.raft.mut_prs().get_mut(id) {
            if pr.matched > last_index {
                tracing::warn!(
                    peer = id,
                    believed = pr.matched,
                    last_index,
                    "a voter's log is shorter than it was; replicating to it anew"
                );
                pr.matched = last_index;
                pr.become_probe();
            }
        }
    }

    /// Leader only: each voter's highest replicated index, by raft id.
    pub(crate) fn progress(&self) -> Vec<(u64, u64)> {
        let mut p: Vec<(u64, u64)> = self
            .raw
            .raft
            .prs()
            .iter()
            .map(|(id, pr)| (*id, pr.matched))
            .collect();
        p.sort_unstable();
        p
    }

    /// The persistent state.
    pub(crate) fn storage(&self) -> &RaftStorage {
        self.raw.store()
    }

    fn check_failed(&self) -> Result<(), ControllerError> {
        match &self.failed {
            Some(why) => Err(ControllerError::Quorum(format!(
                "the metadata log stopped after an earlier failure: {why}"
            ))),
            None => Ok(()),
        }
    }

    /// Advances the logical clock by one tick.
    pub(crate) fn tick(&mut self) {
        self.raw.tick();
    }

    /// Starts an election now (a single voter wins it at once).
    pub(crate) fn campaign(&mut self) -> Result<(), ControllerError> {
        self.check_failed()?;
        self.raw.campaign()?;
        Ok(())
    }

    /// Feeds one message from a peer.
    pub(crate) fn step(&mut self, mut message: Message) -> Result<(), ControllerError> {
        self.check_failed()?;
        // A leader tells a voter whose data was wiped the commit index that voter had reached
        // before; raft-rs panics on a commit beyond the log end. The commit index is only an
        // upper bound: clamped, the heartbeat is answered, and the leader then finds out how
        // short the log is and sends entries or a snapshot.
        if message.get_msg_type() == MessageType::MsgHeartbeat {
            message.commit = message.commit.min(self.last_index());
        }
        self.raw.step(message)?;
        Ok(())
    }

    /// Appends `data` as one entry if this voter leads; returns its (index, term).
    pub(crate) fn propose(&mut self, data: Vec<u8>) -> Result<(u64, u64), ControllerError> {
        self.check_failed()?;
        if !self.is_leader() {
            return Err(ControllerError::NotLeader {
                leader: self.leader_id(),
            });
        }
        if data.len() > MAX_ENTRY_BYTES {
            return Err(ControllerError::Quorum(format!(
                "a metadata entry of {} bytes exceeds the limit of {MAX_ENTRY_BYTES}",
                data.len()
            )));
        }
        self.raw.propose(Vec::new(), data)?;
        Ok((self.raw.raft.raft_log.last_index(), self.raw.raft.term))
    }

    /// Persists, queues messages and applies until raft has nothing more ready.
    pub(crate) fn handle_ready(&mut self) -> Result<(), ControllerError> {
        self.check_failed()?;
        let result = self.handle_ready_rounds();
        if let Err(e) = &result {
            self.failed = Some(e.to_string());
        }
        result
    }

    fn handle_ready_rounds(&mut self) -> Result<(), ControllerError> {
        for _ in 0..MAX_READY_ROUNDS {
            if !self.raw.has_ready() {
                return Ok(());
            }
            let mut ready = self.raw.ready();
            // A leader may send before it persists (raft's thesis, 10.2.1); raft-rs puts only
            // such messages here and the rest in `persisted_messages`.
            self.outbox.extend(ready.take_messages());
            if !ready.snapshot().is_empty() {
                // The leader's state replaces this voter's log; the state machine restores it
                // before any later committed entry is applied.
                let snapshot = ready.snapshot().clone();
                self.raw.mut_store().apply_snapshot(&snapshot)?;
                let index = snapshot.get_metadata().index;
                self.committed.retain(|e| e.index > index);
                self.installed = Some(InstalledSnapshot {
                    index,
                    data: snapshot.data.to_vec(),
                });
            }
            // Committed entries in a Ready are already persisted here.
            let committed = ready.take_committed_entries();
            self.apply(committed)?;
            self.raw.mut_store().persist(ready.entries(), ready.hs())?;
            self.outbox.extend(ready.take_persisted_messages());
            let mut light = self.raw.advance(ready);
            if let Some(commit) = light.commit_index() {
                self.raw.mut_store().persist_commit(commit)?;
            }
            self.outbox.extend(light.take_messages());
            self.apply(light.take_committed_entries())?;
            self.raw.advance_apply();
        }
        Ok(())
    }

    fn apply(&mut self, entries: Vec<Entry>) -> Result<(), ControllerError> {
        for entry in entries {
            match entry.get_entry_type() {
                EntryType::EntryNormal => {
                    // A new leader's empty entry carries nothing for the state machine.
                    if !entry.data.is_empty() {
                        self.committed.push(CommittedEntry {
                            index: entry.index,
                            term: entry.term,
                            data: entry.data.to_vec(),
                        });
                    }
                }
                EntryType::EntryConfChange | EntryType::EntryConfChangeV2 => {
                    return Err(ControllerError::Quorum(format!(
                        "raft log entry {} is a membership change; those are not supported yet",
                        entry.index
                    )));
                }
            }
        }
        Ok(())
    }

    /// Messages for peers, in the order raft produced them.
    pub(crate) fn take_messages(&mut self) -> Vec<Message> {
        let messages = std::mem::take(&mut self.outbox);
        // Delivery is best effort, so a snapshot is reported sent as it leaves (as etcd does
        // once its stream accepted it): the leader then probes the follower, and one that did
        // not get it is sent a snapshot again, instead of waiting for an answer forever.
        for m in &messages {
            if m.get_msg_type() == MessageType::MsgSnapshot {
                self.raw.report_snapshot(m.to, SnapshotStatus::Finish);
            }
        }
        messages
    }

    /// Newly committed entries with data, in log order (after any installed snapshot).
    pub(crate) fn take_committed(&mut self) -> Vec<CommittedEntry> {
        std::mem::take(&mut self.committed)
    }

    /// A snapshot installed since the last call, to restore before [`RaftNode::take_committed`].
    pub(crate) fn take_installed_snapshot(&mut self) -> Option<InstalledSnapshot> {
        self.installed.take()
    }

    /// Replaces the log up to `index` (at most the applied index) with `data`, the state
    /// machine at that index; followers further behind then get the snapshot.
    pub(crate) fn compact(&mut self, index: u64, data: Vec<u8>) -> Result<(), ControllerError> {
        self.check_failed()?;
        if index > self.applied_index() {
            return Err(ControllerError::Quorum(format!(
                "snapshot at {index} beyond the applied index {}",
                self.applied_index()
            )));
        }
        let result = self.raw.mut_store().compact(index, data);
        if let Err(e) = &result {
            self.failed = Some(e.to_string());
        }
        result
    }
}
