//! The metadata quorum: raft-rs over RocksDB, as a sans-I/O [`RaftNode`] plus drivers.

pub(crate) mod driver;
pub(crate) mod node;
pub(crate) mod storage;
pub(crate) mod transport;

mod logging;
#[cfg(test)]
mod sim_tests;

pub(crate) use driver::QuorumHandle;
pub use driver::SnapshotPolicy;
pub(crate) use logging::raft_logger;
pub(crate) use node::{CommittedEntry, InstalledSnapshot, RaftNode, RaftNodeConfig};
pub(crate) use storage::RaftStorage;
