//! The durable, ordered log of metadata records that the controller replays on start.
//!
//! [`RaftMetadataLog`] keeps it as a Raft log: each [`MetadataLog::append`] call becomes one
//! raft entry holding the records as a JSON array, and returns once that entry is committed.
//! The raft state lives in RocksDB ([`RaftStorage`]); the quorum logic is the sans-I/O
//! [`RaftNode`], which this type drives synchronously, inside its own calls.

use std::path::Path;
use std::time::{Duration, Instant};

use raft::eraftpb::EntryType;

use crate::quorum::{raft_logger, NoPeers, RaftNode, RaftNodeConfig, RaftStorage, RaftTransport};
use crate::records::MetadataRecord;
use crate::ControllerError;

/// Wall-clock length of one raft tick.
const TICK_INTERVAL: Duration = Duration::from_millis(100);
/// How long an append waits for its entry to commit (Kafka's `request.timeout.ms` default).
const APPEND_TIMEOUT: Duration = Duration::from_secs(30);
/// The file of the metadata log that came before Raft; refused rather than silently ignored.
const LEGACY_LOG_FILE: &str = "metadata.log";

/// A durable sequence of metadata records.
pub trait MetadataLog: Send {
    /// Appends records durably, in order; returns once they are safe on disk.
    fn append(&mut self, records: &[MetadataRecord]) -> Result<(), ControllerError>;
    /// All records in the log, oldest first.
    fn replay(&mut self) -> Result<Vec<MetadataRecord>, ControllerError>;
}

/// The Kafka `node.id` as a raft id (raft reserves 0, Kafka node ids start at 0).
pub fn raft_id(node_id: i32) -> Result<u64, ControllerError> {
    u64::try_from(node_id)
        .map(|id| id + 1)
        .map_err(|_| ControllerError::Quorum(format!("node.id {node_id} is negative")))
}

/// The metadata log as a Raft log persisted in RocksDB (see the module docs).
pub struct RaftMetadataLog {
    node: RaftNode,
    transport: Box<dyn RaftTransport>,
    last_tick: Instant,
}

impl std::fmt::Debug for RaftMetadataLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RaftMetadataLog")
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl RaftMetadataLog {
    /// Opens the log in `dir` with node `node_id` as the quorum's only voter.
    pub fn open_single_voter(dir: &Path, node_id: i32) -> Result<Self, ControllerError> {
        let id = raft_id(node_id)?;
        Self::open(dir, &RaftNodeConfig::new(id, vec![id]), Box::new(NoPeers))
    }

    /// Opens the log in `dir` as voter `config.id`, reaching the other voters by `transport`.
    /// A single voter elects itself here, which also commits any entry a crash left uncommitted.
    pub fn open(
        dir: &Path,
        config: &RaftNodeConfig,
        transport: Box<dyn RaftTransport>,
    ) -> Result<Self, ControllerError> {
        if dir.join(LEGACY_LOG_FILE).exists() && !dir.join("CURRENT").exists() {
            return Err(ControllerError::Quorum(format!(
                "{} holds a file-based metadata log ({LEGACY_LOG_FILE}) from an older Tern; \
                 this version keeps metadata in a Raft log in RocksDB and cannot read it",
                dir.display()
            )));
        }
        let storage = RaftStorage::open(dir)?;
        let node = RaftNode::new(config, storage, &raft_logger())?;
        let mut log = RaftMetadataLog {
            node,
            transport,
            last_tick: Instant::now(),
        };
        if log.node.is_single_voter() {
            log.node.campaign()?;
            log.node.handle_ready()?;
            if !log.node.is_leader() {
                return Err(ControllerError::Quorum(
                    "a single voter failed to elect itself".into(),
                ));
            }
        }
        // Whatever committed while opening is in storage, where replay reads it.
        log.node.take_committed();
        Ok(log)
    }

    /// The raft core (for status and tests).
    pub fn node(&self) -> &RaftNode {
        &self.node
    }

    /// One round of the driver: ready, send, tick when due, wait for a message until `deadline`.
    fn drive(&mut self, deadline: Instant) -> Result<(), ControllerError> {
        self.node.handle_ready()?;
        self.transport.send(self.node.take_messages());
        let now = Instant::now();
        let next_tick = self.last_tick + TICK_INTERVAL;
        if now >= next_tick {
            self.last_tick = now;
            self.node.tick();
            return Ok(());
        }
        if let Some(message) = self
            .transport
            .recv(next_tick.min(deadline).saturating_duration_since(now))?
        {
            if let Err(e) = self.node.step(message) {
                tracing::warn!(error = %e, "raft message refused");
            }
        }
        Ok(())
    }
}

impl MetadataLog for RaftMetadataLog {
    fn append(&mut self, records: &[MetadataRecord]) -> Result<(), ControllerError> {
        if records.is_empty() {
            return Ok(());
        }
        let data = serde_json::to_vec(records)
            .map_err(|e| ControllerError::Corrupt(format!("encode records: {e}")))?;
        let (index, term) = self.node.propose(data)?;
        let deadline = Instant::now() + APPEND_TIMEOUT;
        loop {
            self.node.handle_ready()?;
            if let Some(entry) = self.node.take_committed().first() {
                if entry.index == index && entry.term == term {
                    return Ok(());
                }
                // Only this voter has appended since it was elected in `open`; anything else
                // means a leader change, which the multi-voter quorum must handle (apply them).
                return Err(ControllerError::Quorum(format!(
                    "raft entry {} (term {}) committed while waiting for entry {index} (term {term})",
                    entry.index, entry.term
                )));
            }
            if !self.node.is_leader() {
                return Err(ControllerError::NotLeader {
                    leader: self.node.leader_id(),
                });
            }
            if Instant::now() >= deadline {
                return Err(ControllerError::Quorum(format!(
                    "raft entry {index} not committed after {} ms",
                    APPEND_TIMEOUT.as_millis()
                )));
            }
            self.drive(deadline)?;
        }
    }

    fn replay(&mut self) -> Result<Vec<MetadataRecord>, ControllerError> {
        let mut records = Vec::new();
        for entry in self.node.storage().committed_entries() {
            if entry.get_entry_type() != EntryType::EntryNormal {
                return Err(ControllerError::Quorum(format!(
                    "raft log entry {} is a membership change; those are not supported yet",
                    entry.index
                )));
            }
            if entry.data.is_empty() {
                continue;
            }
            let batch: Vec<MetadataRecord> = serde_json::from_slice(&entry.data).map_err(|e| {
                ControllerError::Corrupt(format!("raft log entry {}: {e}", entry.index))
            })?;
            records.extend(batch);
        }
        Ok(records)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn topic(name: &str) -> MetadataRecord {
        MetadataRecord::Topic {
            name: name.into(),
            topic_id: Uuid::new_v4(),
        }
    }

    fn open(dir: &Path) -> Result<RaftMetadataLog, ControllerError> {
        RaftMetadataLog::open_single_voter(dir, 0)
    }

    #[test]
    fn records_survive_reopen_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, c) = (topic("a"), topic("b"), topic("c"));
        {
            let mut log = open(dir.path()).unwrap();
            assert!(log.replay().unwrap().is_empty());
            assert!(log.node().is_leader());
            log.append(std::slice::from_ref(&a)).unwrap();
            log.append(&[b.clone(), c.clone()]).unwrap();
            assert_eq!(log.replay().unwrap(), vec![a.clone(), b.clone(), c.clone()]);
        }
        let d = topic("d");
        let term_before;
        {
            let mut log = open(dir.path()).unwrap();
            term_before = log.node().term();
            assert_eq!(log.replay().unwrap(), vec![a.clone(), b.clone(), c.clone()]);
            log.append(std::slice::from_ref(&d)).unwrap();
        }
        let mut log = open(dir.path()).unwrap();
        assert!(log.node().term() > term_before, "each start is a new term");
        assert_eq!(log.replay().unwrap(), vec![a, b, c, d]);
    }

    #[test]
    fn uncommitted_tail_left_by_a_crash_commits_on_restart() {
        // A crash after the entry was synced but before the commit index was written.
        let dir = tempfile::tempdir().unwrap();
        let a = topic("a");
        {
            let mut log = open(dir.path()).unwrap();
            log.append(std::slice::from_ref(&a)).unwrap();
        }
        {
            let mut storage = RaftStorage::open(dir.path()).unwrap();
            let mut hs = storage.hard_state().clone();
            let last = hs.commit;
            hs.commit = 1;
            storage.persist(&[], Some(&hs)).unwrap();
            assert!(storage.committed_entries().len() < last as usize);
        }
        let mut log = open(dir.path()).unwrap();
        assert_eq!(log.replay().unwrap(), vec![a]);
    }

    #[test]
    fn another_node_id_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        drop(open(dir.path()).unwrap());
        let err = RaftMetadataLog::open_single_voter(dir.path(), 7).unwrap_err();
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
    fn a_record_batch_that_does_not_decode_is_a_corrupt_error() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut log = open(dir.path()).unwrap();
            log.append(&[topic("a")]).unwrap();
            // An entry raft committed whose bytes are not records (as a bit flip would leave).
            log.node.propose(b"not json".to_vec()).unwrap();
            log.node.handle_ready().unwrap();
        }
        let err = open(dir.path()).unwrap().replay().unwrap_err();
        assert!(matches!(err, ControllerError::Corrupt(_)), "{err}");
    }

    #[test]
    fn topics_and_configs_survive_a_controller_restart() {
        use crate::{Controller, ControllerConfig, CreateTopic};
        let dir = tempfile::tempdir().unwrap();
        let config = ControllerConfig {
            num_partitions: 2,
            default_replication_factor: 1,
        };
        let open_controller =
            || Controller::open(Box::new(open(dir.path()).unwrap()), config.clone()).unwrap();
        let id = {
            let controller = open_controller();
            controller
                .register_broker(0, "localhost", 9092, None)
                .unwrap();
            let req = CreateTopic {
                name: "t".into(),
                num_partitions: -1,
                replication_factor: -1,
                configs: vec![("retention.ms".into(), "1000".into())],
                ..CreateTopic::default()
            };
            controller.create_topic(&req, false).unwrap()
        };
        let controller = open_controller();
        let image = controller.image();
        let topic = image.topic("t").unwrap();
        assert_eq!(topic.id, id);
        assert_eq!(topic.partitions.len(), 2);
        assert_eq!(
            image
                .topic_configs("t")
                .get("retention.ms")
                .map(String::as_str),
            Some("1000")
        );
        assert!(image.brokers.contains_key(&0));
    }

    #[test]
    fn negative_node_id_is_refused() {
        assert!(raft_id(-1).is_err());
        assert_eq!(raft_id(0).unwrap(), 1);
    }
}
