//! `__transaction_state`: which partition a transactional id lives in, and Kafka's key and value
//! formats (TransactionLogKey v0, TransactionLogValue v0), so that Kafka's tools can read it.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::metadata::{TxnMetadata, TxnState};
use crate::group_coordinator::offsets_topic::{get_str, put_str};

/// The internal topic holding transaction metadata.
pub const TXN_STATE_TOPIC: &str = "__transaction_state";

/// The `__transaction_state` partition of a transactional id, as Kafka computes it.
pub fn partition_for(transactional_id: &str, num_partitions: i32) -> i32 {
    crate::group_coordinator::offsets_topic::partition_for(transactional_id, num_partitions)
}

/// TransactionLogKey v0: version, transactional id.
pub fn key(transactional_id: &str) -> Bytes {
    let mut b = BytesMut::with_capacity(4 + transactional_id.len());
    b.put_i16(0);
    put_str(&mut b, transactional_id);
    b.freeze()
}

/// The transactional id of a key; `None` for an unknown version or a malformed key.
pub fn decode_key(key: &[u8]) -> Option<String> {
    let mut b = key;
    if b.remaining() < 2 || b.get_i16() != 0 {
        return None;
    }
    get_str(&mut b)
}

/// TransactionLogValue v0 of `m`.
pub fn value(m: &TxnMetadata) -> Bytes {
    let mut b = BytesMut::with_capacity(64);
    b.put_i16(0);
    b.put_i64(m.producer_id);
    b.put_i16(m.producer_epoch);
    b.put_i32(m.timeout_ms);
    b.put_i8(m.state.id());
    let mut by_topic: std::collections::BTreeMap<&str, Vec<i32>> = Default::default();
    for (t, p) in &m.partitions {
        by_topic.entry(t.as_str()).or_default().push(*p);
    }
    b.put_i32(by_topic.len() as i32);
    for (topic, parts) in by_topic {
        put_str(&mut b, topic);
        b.put_i32(parts.len() as i32);
        for p in parts {
            b.put_i32(p);
        }
    }
    b.put_i64(m.last_update_ms);
    b.put_i64(m.start_ms);
    b.freeze()
}

/// The metadata of `transactional_id` from a value; `None` for an unknown version or a
/// malformed value.
pub fn decode_value(transactional_id: &str, value: &[u8]) -> Option<TxnMetadata> {
    let mut b = value;
    if b.remaining() < 2 || b.get_i16() != 0 || b.remaining() < 15 {
        return None;
    }
    let producer_id = b.get_i64();
    let producer_epoch = b.get_i16();
    let timeout_ms = b.get_i32();
    let state = TxnState::from_id(b.get_i8())?;
    if b.remaining() < 4 {
        return None;
    }
    let topics = b.get_i32();
    let mut partitions = std::collections::BTreeSet::new();
    for _ in 0..topics.max(0) {
        let topic = get_str(&mut b)?;
        if b.remaining() < 4 {
            return None;
        }
        let n = b.get_i32();
        if n < 0 || b.remaining() < n as usize * 4 {
            return None;
        }
        for _ in 0..n {
            partitions.insert((topic.clone(), b.get_i32()));
        }
    }
    if b.remaining() < 16 {
        return None;
    }
    let last_update_ms = b.get_i64();
    let start_ms = b.get_i64();
    Some(TxnMetadata {
        transactional_id: transactional_id.to_string(),
        producer_id,
        last_producer_id: -1,
        producer_epoch,
        last_producer_epoch: -1,
        timeout_ms,
        state,
        partitions,
        start_ms,
        last_update_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_matches_kafka() {
        // Same hash as groups: Utils.abs(id.hashCode) % partitions.
        assert_eq!(partition_for("my-txn", 50), partition_for("my-txn", 50));
        assert!((0..50).contains(&partition_for("any", 50)));
    }

    #[test]
    fn key_and_value_round_trip() {
        assert_eq!(
            decode_key(&key("orders-app")).as_deref(),
            Some("orders-app")
        );
        let mut m = TxnMetadata::new("orders-app", 4000, 60_000, 17);
        m.producer_epoch = 3;
        m.state = TxnState::Ongoing;
        m.partitions.insert(("a".into(), 1));
        m.partitions.insert(("a".into(), 0));
        m.partitions.insert(("b".into(), 7));
        m.start_ms = 10;
        let v = value(&m);
        let back = decode_value("orders-app", &v).expect("decodes");
        assert_eq!(back, m);
        // The layout Kafka reads: version 0, then producer id.
        assert_eq!(&v[..2], &[0, 0]);
        assert_eq!(&v[2..10], &4000i64.to_be_bytes());
    }

    #[test]
    fn malformed_records_do_not_decode() {
        assert_eq!(decode_key(&[0, 1, 0, 1, b'x']), None);
        let m = TxnMetadata::new("t", 1, 1000, 0);
        let v = value(&m);
        for cut in 0..v.len() {
            assert_eq!(decode_value("t", &v[..cut]), None, "cut at {cut}");
        }
        let mut bad_state = v.to_vec();
        bad_state[16] = 42;
        assert_eq!(decode_value("t", &bad_state), None);
    }
}
