//! The mirror coordinator: the state machine of every mirror partition and where its state is
//! kept (`__mirror_state`, read and written at the partition's coordinator).
//!
//! - [`machine`]: the per-partition state machine, without I/O.
//! - [`store`]: the coordinator's persisted states (`__mirror_state` partitions led here).
//! - [`states`]: reading and writing a partition's state at its coordinator, here or a peer.

pub(crate) mod machine;
pub(crate) mod states;
pub(crate) mod store;

pub(crate) use machine::{
    Action, DesiredState, LocalLog, Observed, Outcome, PartitionMachine, RemoteOffset, RetryPolicy,
    StoredState,
};
pub(crate) use states::{apply_write, stored_here, CoordinationError, PartitionStates};
