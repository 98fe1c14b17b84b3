//! Shared pieces of Tern's fuzz targets: checksum fix-up, the produce path's validation and the
//! internal-topic loaders' batch walk as the broker runs them, and seed-corpus writing.

pub mod seeds;

use bytes::{Bytes, BytesMut};
use tern_broker::fuzzing::{prepare, TopicWritePolicy};
use tern_protocol::record_batch::{
    compute_crc, set_base_offset, set_log_append_time, set_partition_leader_epoch, validate_batch,
    BatchIter, RecordBatchHeader, RECORD_BATCH_OVERHEAD,
};
use tern_protocol::records::{
    control_record_type, decode_records, end_txn_coordinator_epoch, Record,
};

/// A fixed broker clock: runs must not depend on when they happen.
pub const NOW_MS: i64 = 1_700_000_000_000;

/// The produce handler's bound on a batch's decompressed records (`MAX_UNCOMPRESSED_BATCH`).
pub const PRODUCE_MAX_UNCOMPRESSED: usize = 64 * 1024 * 1024;

/// The internal-topic loaders' bound (`LOAD_MAX_UNCOMPRESSED`).
pub const LOAD_MAX_UNCOMPRESSED: usize = 64 * 1024 * 1024;

/// `max.message.bytes`' default, which the log checks every batch against.
const MAX_MESSAGE_BYTES: usize = 1_048_588;

/// Rewrites the CRC32C of every whole batch in `buf`, so that mutated record bytes get read
/// instead of being refused at the checksum (libFuzzer cannot solve a CRC). Stops at the first
/// batch whose header does not parse or that runs past the end.
pub fn fix_crcs(buf: &mut [u8]) {
    let mut pos = 0usize;
    while pos < buf.len() {
        let Ok(h) = RecordBatchHeader::parse(&buf[pos..]) else {
            return;
        };
        let Some(end) = pos.checked_add(h.size()).filter(|e| *e <= buf.len()) else {
            return;
        };
        let crc = compute_crc(&buf[pos..end]);
        buf[pos + 17..pos + 21].copy_from_slice(&crc.to_be_bytes());
        pos = end;
    }
}

/// A topic's write policy chosen by one byte: target codec (bits 0-2), compacted (bit 3), a
/// CreateTime window (bit 4) that is bounded before now (bit 5).
pub fn policy_from(byte: u8) -> TopicWritePolicy {
    let codec = [
        "producer",
        "uncompressed",
        "gzip",
        "snappy",
        "lz4",
        "zstd",
        "producer",
        "producer",
    ][(byte & 7) as usize];
    let cleanup = if byte & 8 != 0 { "compact" } else { "delete" };
    let timestamp_type = if byte & 16 != 0 {
        "CreateTime"
    } else {
        "LogAppendTime"
    };
    let before = if byte & 32 != 0 { 86_400_000 } else { i64::MAX };
    TopicWritePolicy::from_configs(codec, cleanup).with_timestamps(
        timestamp_type,
        before,
        3_600_000,
    )
}

/// A partition's records through the produce handler's checks (`prepare`), then what the log
/// does before it writes a leader's append: validate every batch, stamp its offset, leader
/// epoch and (LogAppendTime) timestamp, read the header back and its transaction marker.
pub fn produce(records: &Bytes, policy: TopicWritePolicy) {
    let Ok(mut out) = prepare(records, policy, PRODUCE_MAX_UNCOMPRESSED, "fuzz-0", NOW_MS) else {
        return;
    };
    leader_append(&mut out, policy.timestamp_window.is_none());
}

/// The validation and header rewriting of `Log::append` for a leader (without the disk and the
/// producer state): all batches are checked before any is changed.
pub fn leader_append(records: &mut BytesMut, log_append_time: bool) {
    let mut batches = Vec::new();
    let mut pos = 0usize;
    while pos < records.len() {
        let Ok(h) = validate_batch(&records[pos..]) else {
            return;
        };
        if h.size() > MAX_MESSAGE_BYTES {
            return;
        }
        batches.push((pos, h));
        pos += h.size();
    }
    let mut next = 0i64;
    let mut record_count = 0usize;
    for (pos, h) in &mut batches {
        let batch = &mut records[*pos..*pos + h.size()];
        set_base_offset(batch, next);
        set_partition_leader_epoch(batch, 7);
        if log_append_time {
            set_log_append_time(batch, NOW_MS);
        }
        *h = RecordBatchHeader::parse(batch).expect("a validated batch parses after stamping");
        validate_batch(batch).expect("stamping keeps the CRC right");
        if h.is_control() {
            let _ = tern_storage::record::control_marker(batch);
        }
        let _ = h.last_sequence();
        next = h.next_offset();
        record_count += h.records_count as usize;
    }
    std::hint::black_box(record_count);
}

/// Every batch of `buf` read as the internal-topic loaders read a partition
/// (`internal_topic::scan`): stop at the first bad header, skip a batch that does not decode,
/// hand each decoded one to `f`.
pub fn scan(buf: &[u8], mut f: impl FnMut(&RecordBatchHeader, Vec<Record>)) {
    let mut offset = 0i64;
    for item in BatchIter::new(buf) {
        let Ok((header, batch)) = item else { break };
        offset = header.next_offset();
        if let Ok((_, records)) = decode_records(batch, LOAD_MAX_UNCOMPRESSED) {
            f(&header, records);
        }
    }
    std::hint::black_box(offset);
}

/// What the coordinators read from a control batch's first record.
pub fn read_marker(records: &[Record]) {
    if let Some(r) = records.first() {
        let _ = control_record_type(r);
        let _ = end_txn_coordinator_epoch(r);
    }
}

/// The records section of a batch (after its fixed header).
pub fn records_section(batch: &[u8]) -> &[u8] {
    batch.get(RECORD_BATCH_OVERHEAD..).unwrap_or(&[])
}
