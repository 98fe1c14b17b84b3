//! Starting a node's controller: the voter (raft over RocksDB, its driver, the controller
//! listener) or the observer that follows the metadata log of the voters without voting.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::client::ControllerClient;
use crate::controller::{Controller, ControllerConfig, DEFAULT_BROKER_SESSION_TIMEOUT};
use crate::metadata_state::{LogEntry, MetadataState, SnapshotPayload};
use crate::quorum::driver::{QuorumDriver, SnapshotPolicy, StateMachine};
use crate::quorum::transport::{NoPeers, PeerRefusal, RaftTransport, TcpTransport};
use crate::quorum::{raft_logger, RaftNode, RaftNodeConfig, RaftStorage};
use crate::quorum::{CommittedEntry, InstalledSnapshot};
use crate::server::{self, ServerContext};
use crate::wire::Hello;
use crate::ControllerError;

/// The file of the metadata log that came before Raft; refused rather than silently ignored.
const LEGACY_LOG_FILE: &str = "metadata.log";
/// How often the active controller's housekeeping runs.
const MAINTENANCE_INTERVAL: Duration = Duration::from_millis(250);
/// How long an observer's fetch waits for new entries.
const OBSERVER_FETCH_WAIT: Duration = Duration::from_secs(2);

/// The Kafka `node.id` as a raft id (raft reserves 0, Kafka node ids start at 0).
pub fn raft_id(node_id: i32) -> Result<u64, ControllerError> {
    u64::try_from(node_id)
        .map(|id| id + 1)
        .map_err(|_| ControllerError::Quorum(format!("node.id {node_id} is negative")))
}

/// The Kafka `node.id` of a raft id (the inverse of [`raft_id`]).
pub(crate) fn node_id(raft_id: u64) -> i32 {
    raft_id as i32 - 1
}

/// How this node takes part in the metadata quorum.
#[derive(Debug, Clone)]
pub struct QuorumConfig {
    /// This node's `node.id`.
    pub node_id: i32,
    /// `controller.quorum.voters` as (node id, host:port); empty means this node alone.
    pub voters: Vec<(i32, String)>,
    /// Whether this node votes (`process.roles` includes `controller`).
    pub is_voter: bool,
    /// Where a voter keeps the raft log.
    pub metadata_dir: PathBuf,
    /// The address the controller listener binds (a voter of several needs one).
    pub listener: Option<String>,
    /// The cluster id this node was formatted with, if any.
    pub cluster_id: Option<String>,
    /// `broker.session.timeout.ms`.
    pub session_timeout: Duration,
    /// When a voter snapshots and truncates its log.
    pub snapshots: SnapshotPolicy,
}

impl QuorumConfig {
    /// A single voter keeping its log in `dir`: the default single-node cluster.
    pub fn single_voter(dir: &Path, node_id: i32) -> Self {
        QuorumConfig {
            node_id,
            voters: Vec::new(),
            is_voter: true,
            metadata_dir: dir.to_path_buf(),
            listener: None,
            cluster_id: None,
            session_timeout: DEFAULT_BROKER_SESSION_TIMEOUT,
            snapshots: SnapshotPolicy::default(),
        }
    }

    /// Voters as raft ids with addresses; this node alone when none are configured.
    fn raft_voters(&self) -> Result<Vec<(u64, String)>, ControllerError> {
        if self.voters.is_empty() {
            return Ok(vec![(raft_id(self.node_id)?, String::new())]);
        }
        self.voters
            .iter()
            .map(|(id, addr)| Ok((raft_id(*id)?, addr.clone())))
            .collect()
    }
}

/// The metadata image as the quorum driver's state machine.
struct ImageMachine(Arc<MetadataState>);

impl StateMachine for ImageMachine {
    fn apply(&mut self, entry: &CommittedEntry) -> Result<(), ControllerError> {
        let records = MetadataState::decode(entry.index, &entry.data)?;
        self.0.apply(LogEntry {
            index: entry.index,
            records,
        });
        Ok(())
    }

    fn restore(&mut self, snapshot: &InstalledSnapshot) -> Result<(), ControllerError> {
        let mut payload = SnapshotPayload::decode(&snapshot.data)?;
        payload.index = snapshot.index;
        self.0.restore(payload);
        Ok(())
    }

    fn snapshot(&mut self, index: u64) -> Result<Vec<u8>, ControllerError> {
        // Entries without records (a new leader's) change nothing: the image is the one at
        // `index`.
        self.0.advance_to(index);
        let mut payload = self.0.snapshot();
        payload.index = index;
        payload.encode()
    }

    fn compacted(&mut self, index: u64, data: &[u8]) {
        match SnapshotPayload::decode(data) {
            Ok(mut payload) => {
                payload.index = index;
                self.0.compacted(payload);
            }
            Err(e) => tracing::error!(error = %e, "a snapshot this node wrote does not decode"),
        }
    }
}

/// The controller, its threads stopped when the last handle is dropped.
pub(crate) type ControllerHandle = Arc<Controller>;

/// Opens a single voter's controller in `dir` (tests, `tern format`).
pub fn open_single_voter(
    dir: &Path,
    node_id: i32,
    config: ControllerConfig,
) -> Result<ControllerHandle, ControllerError> {
    start(&QuorumConfig::single_voter(dir, node_id), config)
}

/// Starts this node's controller as `quorum` says (see the module docs).
pub fn start(
    quorum: &QuorumConfig,
    config: ControllerConfig,
) -> Result<ControllerHandle, ControllerError> {
    let voters = quorum.raft_voters()?;
    let state = Arc::new(MetadataState::new());
    if !quorum.is_voter {
        return start_observer(quorum, config, state, voters);
    }
    let dir = &quorum.metadata_dir;
    if dir.join(LEGACY_LOG_FILE).exists() && !dir.join("CURRENT").exists() {
        return Err(ControllerError::Quorum(format!(
            "{} holds a file-based metadata log ({LEGACY_LOG_FILE}) from an older Tern; \
             this version keeps metadata in a Raft log in RocksDB and cannot read it",
            dir.display()
        )));
    }
    let id = raft_id(quorum.node_id)?;
    let ids: Vec<u64> = voters.iter().map(|(i, _)| *i).collect();
    if !ids.contains(&id) {
        return Err(ControllerError::Quorum(format!(
            "node.id {} is not among controller.quorum.voters",
            quorum.node_id
        )));
    }
    let storage = RaftStorage::open(dir)?;
    let node = RaftNode::new(
        &RaftNodeConfig::new(id, ids.clone()),
        storage,
        &raft_logger(),
    )?;
    // What was committed before this start is restored from the snapshot and applied from the
    // entries after it; raft hands out the rest.
    if let Some((index, data)) = node.storage().snapshot_state() {
        let mut snapshot = SnapshotPayload::decode(data)?;
        snapshot.index = index;
        state.restore(snapshot);
    }
    for entry in node.storage().committed_entries() {
        if entry.get_entry_type() != raft::eraftpb::EntryType::EntryNormal {
            return Err(ControllerError::Quorum(format!(
                "raft log entry {} is a membership change; those are not supported yet",
                entry.index
            )));
        }
        let records = MetadataState::decode(entry.index, &entry.data)?;
        state.apply(LogEntry {
            index: entry.index,
            records,
        });
    }
    let peers: Vec<(u64, String)> = voters.iter().filter(|(i, _)| *i != id).cloned().collect();
    let listener = match (&quorum.listener, peers.is_empty()) {
        (Some(addr), _) => Some(TcpListener::bind(addr).map_err(|e| {
            ControllerError::Quorum(format!("cannot bind the controller listener {addr}: {e}"))
        })?),
        (None, true) => None,
        (None, false) => {
            return Err(ControllerError::Quorum(
                "a voter of a quorum of several needs a controller listener (controller.listener.names)"
                    .into(),
            ))
        }
    };
    let refusal = PeerRefusal::default();
    let transport: Box<dyn RaftTransport> = if peers.is_empty() {
        Box::new(NoPeers)
    } else {
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        Box::new(TcpTransport::start(
            &peers,
            Hello {
                cluster_id: quorum.cluster_id.clone(),
                from: id,
                voters: sorted,
                last_index: node.last_index(),
            },
            refusal.clone(),
        )?)
    };
    let machine = Box::new(ImageMachine(state.clone()));
    let (mut driver, handle) = QuorumDriver::new(node, transport, machine, quorum.snapshots);
    if peers.is_empty() {
        // A single voter elects itself now, which also commits what a crash left uncommitted.
        driver.campaign()?;
        if !handle.is_ready_leader() {
            return Err(ControllerError::Quorum(
                "a single voter failed to elect itself".into(),
            ));
        }
    }
    let driver_thread = driver.spawn(format!("raft-{}", quorum.node_id))?;
    let client = (!peers.is_empty()).then(|| ControllerClient::new(voters.clone()));
    let controller = Arc::new(Controller::new(
        config,
        state.clone(),
        Some(handle.clone()),
        client,
        quorum.session_timeout,
        quorum.cluster_id.clone(),
    ));
    controller.set_driver_thread(driver_thread);
    controller.set_peer_refusal(refusal);
    if let Some(listener) = listener {
        let mut sorted = ids;
        sorted.sort_unstable();
        let ctx = Arc::new(ServerContext::new(
            Some(id),
            sorted,
            Some(handle),
            state,
            quorum.cluster_id.clone(),
        ));
        let _ = ctx.controller.set(Arc::downgrade(&controller));
        server::spawn(listener, ctx)?;
    }
    // Single voters too: the cluster id record and fencing live there.
    controller.maintain();
    spawn_maintenance(Arc::downgrade(&controller))?;
    Ok(controller)
}

fn spawn_maintenance(controller: Weak<Controller>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("controller-maintenance".into())
        .spawn(move || loop {
            std::thread::sleep(MAINTENANCE_INTERVAL);
            match controller.upgrade() {
                Some(c) => c.maintain(),
                None => return,
            }
        })?;
    Ok(())
}

/// A node without a vote: it fetches committed entries from the voters and applies them.
fn start_observer(
    quorum: &QuorumConfig,
    config: ControllerConfig,
    state: Arc<MetadataState>,
    voters: Vec<(u64, String)>,
) -> Result<ControllerHandle, ControllerError> {
    if quorum.voters.is_empty() {
        return Err(ControllerError::Quorum(
            "a node without the controller role needs controller.quorum.voters".into(),
        ));
    }
    let controller = Arc::new(Controller::new(
        config,
        state.clone(),
        None,
        Some(ControllerClient::new(voters.clone())),
        quorum.session_timeout,
        quorum.cluster_id.clone(),
    ));
    let fetcher = ControllerClient::new(voters);
    let weak = Arc::downgrade(&controller);
    let cluster_id = quorum.cluster_id.clone();
    let node_id = quorum.node_id;
    let refusal = PeerRefusal::default();
    controller.set_peer_refusal(refusal.clone());
    std::thread::Builder::new()
        .name("metadata-observer".into())
        .spawn(move || observe(node_id, &fetcher, &state, cluster_id, &weak, &refusal))?;
    Ok(controller)
}

fn observe(
    node_id: i32,
    client: &ControllerClient,
    state: &MetadataState,
    configured_cluster_id: Option<String>,
    controller: &Weak<Controller>,
    refusal: &PeerRefusal,
) {
    let voters = client.voter_ids();
    let mut next = 0usize;
    let mut last_error: Option<String> = None;
    while controller.strong_count() > 0 {
        let voter = voters[next % voters.len()];
        let cluster_id = state
            .image()
            .cluster_id
            .clone()
            .or(configured_cluster_id.clone());
        match client.fetch(
            node_id,
            voter,
            cluster_id,
            state.applied_index(),
            OBSERVER_FETCH_WAIT,
        ) {
            Ok(response) => {
                if let Some(e) = response.error {
                    tracing::error!(voter, error = %e.message, "the controller refused this node's metadata fetch");
                    *refusal.lock() = Some(e.message);
                    std::thread::sleep(Duration::from_secs(1));
                    next += 1;
                    continue;
                }
                last_error = None;
                if let Some(snapshot) = response.snapshot {
                    state.restore(snapshot);
                }
                for entry in response.entries {
                    state.apply(entry);
                }
                state.advance_to(response.seen_index);
                if let Some(i) = response
                    .leader
                    .and_then(|l| voters.iter().position(|v| *v == l))
                {
                    next = i;
                }
            }
            Err(e) => {
                if last_error.as_deref() != Some(e.as_str()) {
                    tracing::info!(voter, error = %e, "cannot fetch metadata from this controller; trying another");
                    last_error = Some(e);
                }
                next += 1;
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::BrokerRegistration;
    use crate::records::BrokerEndpoint;
    use crate::CreateTopic;

    fn config() -> ControllerConfig {
        ControllerConfig {
            num_partitions: 2,
            default_replication_factor: 1,
            leader_rebalance: Default::default(),
            unclean_leader_election: false,
            compaction_lag_defaults: (0, i64::MAX),
        }
    }

    fn open(dir: &Path) -> Result<ControllerHandle, ControllerError> {
        open_single_voter(dir, 0, config())
    }

    fn create(c: &Controller, name: &str) -> uuid::Uuid {
        let req = CreateTopic {
            name: name.into(),
            num_partitions: -1,
            replication_factor: -1,
            configs: vec![("retention.ms".into(), "1000".into())],
            ..CreateTopic::default()
        };
        c.create_topic(&req, false).unwrap()
    }

    fn register(c: &Controller) {
        c.register_broker(BrokerRegistration {
            broker_id: 0,
            incarnation_id: uuid::Uuid::new_v4(),
            endpoints: vec![BrokerEndpoint {
                listener: "PLAINTEXT".into(),
                host: "localhost".into(),
                port: 9092,
            }],
            rack: None,
        })
        .unwrap();
    }

    #[test]
    fn topics_and_configs_survive_restarts_and_each_start_is_a_new_term() {
        let dir = tempfile::tempdir().unwrap();
        let (a, term) = {
            let c = open(dir.path()).unwrap();
            register(&c);
            (create(&c, "a"), c.quorum().unwrap().status().term)
        };
        let b = {
            let c = open(dir.path()).unwrap();
            assert!(
                c.quorum().unwrap().status().term > term,
                "each start is a new term"
            );
            // A restarted single node registers again with a new incarnation.
            register(&c);
            create(&c, "b")
        };
        let c = open(dir.path()).unwrap();
        let image = c.image();
        assert_eq!(image.topic("a").map(|t| t.id), Some(a));
        assert_eq!(image.topic("b").map(|t| t.id), Some(b));
        assert_eq!(image.topic("a").unwrap().partitions.len(), 2);
        assert_eq!(
            image
                .topic_configs("a")
                .get("retention.ms")
                .map(String::as_str),
            Some("1000")
        );
        assert!(image.cluster_id.is_some());
        assert!(!image.brokers[&0].fenced);
    }

    #[test]
    fn an_uncommitted_tail_left_by_a_crash_commits_on_restart() {
        // A crash after the entry was synced but before the commit index was written.
        let dir = tempfile::tempdir().unwrap();
        let a = {
            let c = open(dir.path()).unwrap();
            register(&c);
            create(&c, "a")
        };
        {
            let mut storage = RaftStorage::open(dir.path()).unwrap();
            let mut hs = storage.hard_state().clone();
            let last = hs.commit;
            hs.commit = 1;
            storage.persist(&[], Some(&hs)).unwrap();
            assert!(storage.committed_entries().len() < last as usize);
        }
        let c = open(dir.path()).unwrap();
        assert_eq!(c.image().topic("a").map(|t| t.id), Some(a));
    }

    #[test]
    fn another_node_id_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        drop(open(dir.path()).unwrap());
        let err = open_single_voter(dir.path(), 7, config()).unwrap_err();
        assert!(err.to_string().contains("do not include"), "{err}");
    }

    #[test]
    fn the_old_file_log_is_refused_not_ignored() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(LEGACY_LOG_FILE), b"x").unwrap();
        let err = open(dir.path()).unwrap_err();
        assert!(err.to_string().contains("older Tern"), "{err}");
    }

    #[test]
    fn an_entry_that_does_not_decode_is_a_corrupt_error_at_start() {
        let dir = tempfile::tempdir().unwrap();
        {
            // An entry raft committed whose bytes are not records (as a bit flip would leave).
            let storage = RaftStorage::open(dir.path()).unwrap();
            let mut node =
                RaftNode::new(&RaftNodeConfig::new(1, vec![1]), storage, &raft_logger()).unwrap();
            node.campaign().unwrap();
            node.handle_ready().unwrap();
            node.propose(b"not json".to_vec()).unwrap();
            node.handle_ready().unwrap();
        }
        let err = open(dir.path()).unwrap_err();
        assert!(matches!(err, ControllerError::Corrupt(_)), "{err}");
    }

    #[test]
    fn negative_node_id_is_refused() {
        assert!(raft_id(-1).is_err());
        assert_eq!(raft_id(0).unwrap(), 1);
    }
}
