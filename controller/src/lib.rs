//! Cluster metadata for Tern: metadata records, the durable metadata log, the MetadataImage
//! that brokers apply, and the controller that validates admin commands.
//!
//! The metadata log is a Raft log (the `raft` crate, persisted in RocksDB) behind the
//! [`MetadataLog`] trait: [`RaftMetadataLog`] drives a sans-I/O [`quorum::RaftNode`].

pub mod acls;
pub mod controller;
pub mod image;
pub mod metadata_log;
pub mod placement;
pub mod quorum;
pub mod records;
pub mod topic_configs;

pub use acls::{
    AclBinding, AclBindingFilter, AclOperation, AclPatternType, AclPermissionType, AclResourceType,
};
pub use controller::{validate_topic_name, Controller, ControllerConfig, CreateTopic};
pub use image::{BrokerInfo, MetadataImage, PartitionInfo, ScramCredentialImage, TopicImage};
pub use metadata_log::{MetadataLog, RaftMetadataLog};
pub use records::{ConfigResourceType, MetadataRecord};

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
