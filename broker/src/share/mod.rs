//! Share consumers (KIP-932) on the partition leader: each share-partition's in-flight
//! records, and the share sessions of ShareFetch and ShareAcknowledge.

pub(crate) mod manager;
pub(crate) mod partition;
pub(crate) mod sessions;

pub(crate) use manager::ShareManager;
