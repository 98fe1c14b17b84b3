//! Storage failures as the Kafka error codes clients understand.

use kafka_protocol::ResponseError;
use tern_protocol::record_batch::BatchError;
use tern_storage::StorageError;

/// Kafka's READ_ONLY_TOPIC (mirror topics refuse produce).
pub(crate) const READ_ONLY_TOPIC: i16 = 134;

/// The error code a client sees for a storage failure.
pub(crate) fn storage_error_code(e: &StorageError) -> ResponseError {
    match e {
        StorageError::InvalidBatch(BatchError::CorruptCrc { .. }) => ResponseError::CorruptMessage,
        StorageError::InvalidBatch(BatchError::UnsupportedMagic(_)) => {
            ResponseError::UnsupportedForMessageFormat
        }
        StorageError::InvalidBatch(_) | StorageError::EmptyAppend => ResponseError::InvalidRecord,
        StorageError::RecordTooLarge { .. } => ResponseError::MessageTooLarge,
        StorageError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        StorageError::OutOfOrderSequence { .. } => ResponseError::OutOfOrderSequenceNumber,
        StorageError::InvalidProducerEpoch { .. } => ResponseError::InvalidProducerEpoch,
        StorageError::CoordinatorFenced { .. } => ResponseError::TransactionCoordinatorFenced,
        StorageError::InvalidConfig { .. } => ResponseError::InvalidConfig,
        StorageError::InvalidOffsets { .. } => ResponseError::InvalidRecord,
        StorageError::InvalidTxnState { .. } => ResponseError::InvalidTxnState,
        _ => ResponseError::KafkaStorageError,
    }
}
