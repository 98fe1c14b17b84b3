//! Cluster metadata for Tern: metadata records, the durable metadata log, the MetadataImage
//! that brokers apply, and the controller that validates admin commands.
//!
//! Today the metadata log is a single-voter file log behind the [`MetadataLog`] trait; the Raft
//! quorum (the `raft` crate over RocksDB) replaces it behind the same trait.

pub mod controller;
pub mod image;
pub mod metadata_log;
pub mod placement;
pub mod records;
pub mod topic_configs;

pub use controller::{validate_topic_name, Controller, ControllerConfig, CreateTopic};
pub use image::{BrokerInfo, MetadataImage, PartitionInfo, TopicImage};
pub use metadata_log::{FileMetadataLog, MetadataLog};
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
}
