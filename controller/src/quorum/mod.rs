//! The metadata quorum: raft-rs over RocksDB, as a sans-I/O [`RaftNode`] plus drivers.

pub mod driver;
pub mod node;
pub mod storage;
pub mod transport;

mod logging;
#[cfg(test)]
mod sim_tests;

pub use driver::{QuorumDriver, QuorumHandle, QuorumStatus, Role, SnapshotPolicy, StateMachine};
pub(crate) use logging::raft_logger;
pub use node::{CommittedEntry, InstalledSnapshot, RaftNode, RaftNodeConfig};
pub use storage::RaftStorage;
pub use transport::{NoPeers, RaftTransport, TcpTransport};
