//! The internal topics coordinators keep their state in (`__consumer_offsets`,
//! `__transaction_state`): appending a batch as the partition leader, and reading every record
//! back when a coordinator takes a partition over.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::ResponseError;
use tern_protocol::record_batch::{BatchIter, Compression, RecordBatchHeader};
use tern_protocol::records::{decode_records, Record, RecordBatchBuilder};
use tern_storage::StorageError;

use crate::group_coordinator::now_ms;
use crate::replica_manager::Partition;
use crate::replication::delayed_produce::{wait_for_isr, PendingAck};

/// Largest batch of stored records read at once while loading.
const LOAD_READ_BYTES: usize = 4 * 1024 * 1024;
/// Upper bound on one decompressed batch while loading.
const LOAD_MAX_UNCOMPRESSED: usize = 64 * 1024 * 1024;

/// How long a coordinator's write waits for its ISR (Kafka's `offsets.commit.timeout.ms`).
const REPLICATION_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(5_000);

/// Waits until the ISR has a coordinator's write (coordinators append with acks=all, so that
/// a failover never loses what they answered), as the errors a client retries on.
pub(crate) async fn replicated(ack: Option<PendingAck>) -> Result<(), ResponseError> {
    let Some(ack) = ack else { return Ok(()) };
    match wait_for_isr(&[ack], REPLICATION_TIMEOUT).await.remove(0) {
        Ok(()) => Ok(()),
        Err(ResponseError::NotLeaderOrFollower) => Err(ResponseError::NotCoordinator),
        Err(_) => Err(ResponseError::CoordinatorNotAvailable),
    }
}

/// Appends `batch` as the leader; the wait returned is met once the ISR has it. A storage
/// failure is answered with `map_error`'s code.
pub(crate) fn append_batch(
    partition: &Arc<Partition>,
    batch: BytesMut,
    map_error: impl FnOnce(&StorageError) -> ResponseError,
) -> Result<PendingAck, ResponseError> {
    append_leader(partition, map_error, |log, epoch| {
        log.append_as_leader(batch, epoch)
    })
}

/// Appends a transaction marker as the leader, as [`append_batch`]; `bumped_epoch` is a
/// transaction version 2 marker, which must carry an epoch above its transaction's.
pub(crate) fn append_marker_batch(
    partition: &Arc<Partition>,
    batch: BytesMut,
    bumped_epoch: bool,
    map_error: impl FnOnce(&StorageError) -> ResponseError,
) -> Result<PendingAck, ResponseError> {
    append_leader(partition, map_error, |log, epoch| {
        log.append_marker_as_leader(batch, epoch, bumped_epoch)
    })
}

fn append_leader(
    partition: &Arc<Partition>,
    map_error: impl FnOnce(&StorageError) -> ResponseError,
    append: impl FnOnce(&tern_storage::Log, i32) -> Result<tern_storage::LogAppendInfo, StorageError>,
) -> Result<PendingAck, ResponseError> {
    append(&partition.log, partition.leader_epoch())
        .map_err(|e| {
            tracing::warn!(topic = %partition.topic, partition = partition.index, error = %e, "cannot append to an internal topic");
            map_error(&e)
        })?;
    partition.on_local_append();
    Ok(PendingAck {
        partition: partition.clone(),
        required_offset: partition.log.log_end_offset(),
        min_insync: 1,
    })
}

/// Appends records (key, value or tombstone) as one batch, a transactional batch of
/// `producer` (id, epoch) when given.
pub(crate) fn append_records(
    partition: &Arc<Partition>,
    records: &[(Bytes, Option<Bytes>)],
    producer: Option<(i64, i16)>,
    map_error: impl FnOnce(&StorageError) -> ResponseError,
) -> Result<PendingAck, ResponseError> {
    let now = now_ms();
    let mut builder = RecordBatchBuilder::new(Compression::None);
    if let Some((producer_id, epoch)) = producer {
        builder = builder.producer(producer_id, epoch, -1).transactional(true);
    }
    for (key, value) in records {
        builder
            .push(now, Some(key), value.as_deref(), &[])
            .map_err(|_| ResponseError::UnknownServerError)?;
    }
    let batch = builder
        .build()
        .map_err(|_| ResponseError::UnknownServerError)?;
    append_batch(partition, BytesMut::from(&batch[..]), map_error)
}

/// Calls `f` with every batch header and its records, from the log start to the log end as of
/// now. A batch that cannot be decoded is skipped with a warning; a read error ends the scan.
pub(crate) fn scan(partition: &Partition, mut f: impl FnMut(&RecordBatchHeader, Vec<Record>)) {
    let log = &partition.log;
    let mut offset = log.log_start_offset();
    let end = log.log_end_offset();
    while offset < end {
        let data = match log.read(offset, LOAD_READ_BYTES, Some(end), true) {
            Ok(d) => d,
            Err(e) => {
                tracing::error!(topic = %partition.topic, partition = partition.index, error = %e, "cannot load an internal topic partition");
                return;
            }
        };
        if data.records.is_empty() {
            return;
        }
        let mut next = offset;
        for item in BatchIter::new(&data.records) {
            let Ok((header, batch)) = item else { break };
            next = header.next_offset();
            match decode_records(batch, LOAD_MAX_UNCOMPRESSED) {
                Ok((_, records)) => f(&header, records),
                Err(e) => tracing::warn!(
                    topic = %partition.topic,
                    partition = partition.index,
                    offset = header.base_offset,
                    error = %e,
                    "skipping an undecodable batch"
                ),
            }
        }
        if next <= offset {
            return;
        }
        offset = next;
    }
}
