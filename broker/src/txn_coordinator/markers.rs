//! Transaction markers: the COMMIT or ABORT control batch a partition leader appends to end a
//! producer's transaction in that partition, whether the coordinator is local or asked over
//! WriteTxnMarkers.

use std::sync::Arc;

use bytes::{BufMut, BytesMut};
use kafka_protocol::ResponseError;
use tern_protocol::record_batch::Compression;
use tern_protocol::records::{ControlRecordType, RecordBatchBuilder};

use crate::group_coordinator::now_ms;
use crate::replica_manager::Partition;
use crate::replication::delayed_produce::PendingAck;

/// The end-transaction control batch of `producer_id` at `producer_epoch`.
pub(crate) fn marker_batch(
    producer_id: i64,
    producer_epoch: i16,
    coordinator_epoch: i32,
    commit: bool,
) -> Result<BytesMut, ResponseError> {
    let kind = if commit {
        ControlRecordType::Commit
    } else {
        ControlRecordType::Abort
    };
    let mut key = BytesMut::with_capacity(4);
    key.put_i16(0);
    key.put_i16(kind.id());
    let mut value = BytesMut::with_capacity(6);
    value.put_i16(0);
    value.put_i32(coordinator_epoch);
    let mut builder = RecordBatchBuilder::new(Compression::None)
        .producer(producer_id, producer_epoch, -1)
        .transactional(true)
        .control(true);
    builder
        .push(now_ms(), Some(&key), Some(&value), &[])
        .map_err(|_| ResponseError::UnknownServerError)?;
    let batch = builder
        .build()
        .map_err(|_| ResponseError::UnknownServerError)?;
    Ok(BytesMut::from(&batch[..]))
}

/// One transaction marker as a coordinator asks for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Marker {
    pub(crate) producer_id: i64,
    /// Under transaction version 2 the epoch after the transaction's, which fences it.
    pub(crate) producer_epoch: i16,
    pub(crate) coordinator_epoch: i32,
    pub(crate) commit: bool,
    /// The transaction's version (below 2: the protocol before KIP-890 part 2).
    pub(crate) txn_version: i8,
}

/// Appends a marker to a partition this broker leads; the returned wait is met once the ISR
/// has it (markers are written with acks=all, as in Kafka).
pub(crate) fn append_marker(
    partition: &Arc<Partition>,
    marker: &Marker,
) -> Result<PendingAck, ResponseError> {
    if !partition.is_leader() {
        return Err(ResponseError::NotLeaderOrFollower);
    }
    let batch = marker_batch(
        marker.producer_id,
        marker.producer_epoch,
        marker.coordinator_epoch,
        marker.commit,
    )?;
    let bumped_epoch = marker.txn_version >= super::metadata::TXN_VERSION_2;
    crate::internal_topic::append_marker_batch(
        partition,
        batch,
        bumped_epoch,
        crate::errors::storage_error_code,
    )
}
