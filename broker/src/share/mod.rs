//! Share consumers (KIP-932) on the partition leader: each share-partition's in-flight
//! records, the share sessions of ShareFetch and ShareAcknowledge, and the start offsets of
//! share-partitions whose group another broker coordinates.

pub(crate) mod manager;
pub(crate) mod partition;
mod remote_state;
pub(crate) mod sessions;

pub(crate) use manager::ShareManager;
