//! Cluster metadata for Tern: metadata records, the durable metadata log, the MetadataImage
//! that brokers apply, and the controller that validates admin commands.
//!
//! The metadata log is a Raft log (the `raft` crate, persisted in RocksDB): a sans-I/O
//! `quorum::RaftNode` moved by a driver thread, voters talking over the controller listener
//! (`server`, `client`, [`wire`]), nodes without a vote following it (`start`).

pub mod acls;
mod client;
mod commands;
mod controller;
mod image;
mod metadata_state;
mod placement;
mod quorum;
mod records;
mod server;
mod start;
pub mod topic_configs;
pub mod wire;

pub use acls::{
    AclBinding, AclBindingFilter, AclOperation, AclPatternType, AclPermissionType, AclResourceType,
};
pub use commands::{BrokerRegistration, ReplicaDescription};
pub use controller::{
    validate_topic_name, AlterPartition, Controller, ControllerConfig, CreateTopic, ElectionType,
    LeaderRebalance, ReplicaOffline,
};
pub use image::{BrokerInfo, MetadataImage, PartitionInfo, ScramCredentialImage, TopicImage};
pub use metadata_state::{LogEntry, MetadataState, SnapshotPayload};
pub use quorum::SnapshotPolicy;
pub use records::{BrokerEndpoint, ConfigResourceType, MetadataRecord};
pub use start::{open_single_voter, raft_id, start, QuorumConfig};

/// A Kafka-style cluster id: 16 random bytes, URL-safe base64 without padding (22 chars),
/// never starting with `-` (command-line tools would read it as an option).
pub fn new_cluster_id() -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    loop {
        let mut bits: u128 = u128::from_be_bytes(uuid::Uuid::new_v4().into_bytes());
        let mut out = String::with_capacity(22);
        for _ in 0..22 {
            out.push(ALPHABET[(bits & 63) as usize] as char);
            bits >>= 6;
        }
        if !out.starts_with('-') {
            return out;
        }
    }
}

/// Failures inside the controller.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// Disk I/O on the metadata log.
    #[error("metadata log I/O: {0}")]
    Io(#[from] std::io::Error),
    /// Bytes in the metadata log that cannot be what we wrote.
    #[error("metadata log corrupt: {0}")]
    Corrupt(String),
    /// RocksDB under the metadata log failed (I/O, or corruption it detected).
    #[error("metadata log RocksDB: {0}")]
    RocksDb(#[from] rocksdb::Error),
    /// The raft library refused an operation.
    #[error("metadata quorum raft: {0}")]
    Raft(#[from] raft::Error),
    /// The metadata quorum cannot do what was asked (configuration, limits, an earlier failure).
    #[error("metadata quorum: {0}")]
    Quorum(String),
    /// Only the quorum leader appends; this voter is not it.
    #[error("this node is not the metadata quorum leader (leader raft id: {leader:?})")]
    NotLeader {
        /// The leader's raft id, if known.
        leader: Option<u64>,
    },
}
