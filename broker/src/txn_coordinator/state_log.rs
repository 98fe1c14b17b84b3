//! `__transaction_state`: which partition a transactional id lives in, and Kafka's key and value
//! formats (TransactionLogKey v0, TransactionLogValue v1; v0 is read too), so that Kafka's tools can read it.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tern_protocol::flexible::{
    get_compact_len, get_tagged_fields, put_compact_len, put_compact_str, put_tagged_fields,
};

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

/// TransactionLogValue v1 of `m` (flexible, as Kafka writes it once transaction version 1 or
/// later is in force): the producer id before a rotation, the one a prepared version 2
/// transaction hands over, and the transaction's version are tagged fields.
pub fn value(m: &TxnMetadata) -> Bytes {
    let mut b = BytesMut::with_capacity(64);
    b.put_i16(1);
    b.put_i64(m.producer_id);
    b.put_i16(m.producer_epoch);
    b.put_i32(m.timeout_ms);
    b.put_i8(m.state.id());
    if m.state == TxnState::Empty && m.partitions.is_empty() {
        put_compact_len(&mut b, None); // null, as Kafka writes an empty transaction's
    } else {
        let mut by_topic: std::collections::BTreeMap<&str, Vec<i32>> = Default::default();
        for (t, p) in &m.partitions {
            by_topic.entry(t.as_str()).or_default().push(*p);
        }
        put_compact_len(&mut b, Some(by_topic.len()));
        for (topic, parts) in by_topic {
            put_compact_str(&mut b, topic);
            put_compact_len(&mut b, Some(parts.len()));
            for p in parts {
                b.put_i32(p);
            }
            put_tagged_fields(&mut b, &[]);
        }
    }
    b.put_i64(m.last_update_ms);
    b.put_i64(m.start_ms);
    // Tagged fields, in tag order, each only when not its default.
    let mut tagged: Vec<(u32, Vec<u8>)> = Vec::new();
    if m.last_producer_id != -1 {
        tagged.push((0, m.last_producer_id.to_be_bytes().to_vec()));
    }
    if m.next_producer_id != -1 {
        tagged.push((1, m.next_producer_id.to_be_bytes().to_vec()));
    }
    if m.txn_version != 0 {
        tagged.push((2, i16::from(m.txn_version).to_be_bytes().to_vec()));
    }
    let tagged: Vec<(u32, &[u8])> = tagged.iter().map(|(t, d)| (*t, &d[..])).collect();
    put_tagged_fields(&mut b, &tagged);
    b.freeze()
}

/// A length (compact: `n + 1`, 0 for null) checked against the bytes left, each element
/// taking at least `min_size` bytes.
fn get_len(b: &mut &[u8], compact: bool, min_size: usize) -> Option<usize> {
    if compact {
        return get_compact_len(b, min_size)?;
    }
    if b.remaining() < 4 {
        return None;
    }
    let n = usize::try_from(b.get_i32()).ok()?;
    (n.checked_mul(min_size)? <= b.remaining()).then_some(n)
}

/// The metadata of `transactional_id` from a value (TransactionLogValue v0 or v1); `None` for
/// an unknown version or a malformed value.
pub fn decode_value(transactional_id: &str, value: &[u8]) -> Option<TxnMetadata> {
    let mut b = value;
    if b.remaining() < 2 {
        return None;
    }
    let compact = match b.get_i16() {
        0 => false,
        1 => true,
        _ => return None,
    };
    if b.remaining() < 15 {
        return None;
    }
    let producer_id = b.get_i64();
    let producer_epoch = b.get_i16();
    let timeout_ms = b.get_i32();
    let state = TxnState::from_id(b.get_i8())?;
    let mut partitions = std::collections::BTreeSet::new();
    // Null (v1's empty transaction) reads as none.
    let null = compact && b.first() == Some(&0);
    let topics = if null {
        b.advance(1);
        0
    } else {
        get_len(&mut b, compact, 1)?
    };
    for _ in 0..topics {
        let topic = if compact {
            let n = get_len(&mut b, true, 1)?;
            let t = std::str::from_utf8(&b[..n]).ok()?.to_string();
            b.advance(n);
            t
        } else {
            get_str(&mut b)?
        };
        let n = get_len(&mut b, compact, 4)?;
        for _ in 0..n {
            partitions.insert((topic.clone(), b.get_i32()));
        }
        if compact {
            skip_tagged_fields(&mut b)?;
        }
    }
    if b.remaining() < 16 {
        return None;
    }
    let last_update_ms = b.get_i64();
    let start_ms = b.get_i64();
    let mut m = TxnMetadata {
        transactional_id: transactional_id.to_string(),
        producer_id,
        last_producer_id: -1,
        next_producer_id: -1,
        producer_epoch,
        last_producer_epoch: -1,
        timeout_ms,
        state,
        partitions,
        start_ms,
        last_update_ms,
        txn_version: 0,
    };
    if compact {
        for (tag, mut data) in get_tagged_fields(&mut b)? {
            match (tag, data.len()) {
                (0, 8) => m.last_producer_id = data.get_i64(),
                (1, 8) => m.next_producer_id = data.get_i64(),
                (2, 2) => m.txn_version = i8::try_from(data.get_i16()).ok()?,
                (0..=2, _) => return None,
                _ => {} // NextProducerEpoch (never set by Kafka 4.4) and later tags
            }
        }
    }
    Some(m)
}

fn skip_tagged_fields(b: &mut &[u8]) -> Option<()> {
    get_tagged_fields(b).map(|_| ())
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
        // The layout Kafka reads: version 1, then producer id.
        assert_eq!(&v[..2], &[0, 1]);
        assert_eq!(&v[2..10], &4000i64.to_be_bytes());
        // The tagged fields of a prepared version 2 transaction that rotates its producer id.
        m.state = TxnState::PrepareCommit;
        m.last_producer_id = 3999;
        m.next_producer_id = 4001;
        m.txn_version = 2;
        assert_eq!(decode_value("orders-app", &value(&m)), Some(m.clone()));
        // An empty transaction's partitions are null, as Kafka writes them.
        let empty = TxnMetadata::new("orders-app", 4000, 60_000, 17);
        let v = value(&empty);
        assert_eq!(v[17], 0);
        assert_eq!(decode_value("orders-app", &v), Some(empty));
    }

    #[test]
    fn version_0_values_still_load() {
        // TransactionLogValue v0, as Tern wrote it before: producer 4000 epoch 3, timeout 60 s,
        // Ongoing, a-1 and b-7, updated at 17, started at 10.
        let mut v = BytesMut::new();
        v.put_i16(0);
        v.put_i64(4000);
        v.put_i16(3);
        v.put_i32(60_000);
        v.put_i8(1);
        v.put_i32(2);
        for (topic, p) in [("a", 1), ("b", 7)] {
            put_str(&mut v, topic);
            v.put_i32(1);
            v.put_i32(p);
        }
        v.put_i64(17);
        v.put_i64(10);
        let m = decode_value("t", &v).expect("decodes");
        assert_eq!(
            (m.producer_id, m.producer_epoch, m.state),
            (4000, 3, TxnState::Ongoing)
        );
        assert_eq!(
            m.partitions.into_iter().collect::<Vec<_>>(),
            vec![("a".to_string(), 1), ("b".to_string(), 7)]
        );
        assert_eq!((m.start_ms, m.last_update_ms, m.txn_version), (10, 17, 0));
    }

    #[test]
    fn malformed_records_do_not_decode() {
        assert_eq!(decode_key(&[0, 1, 0, 1, b'x']), None);
        let mut m = TxnMetadata::new("t", 1, 1000, 0);
        m.state = TxnState::Ongoing;
        m.partitions.insert(("a".into(), 0));
        m.next_producer_id = 2;
        let v = value(&m);
        for cut in 0..v.len() {
            assert_eq!(decode_value("t", &v[..cut]), None, "cut at {cut}");
        }
        let mut bad_state = v.to_vec();
        bad_state[16] = 42;
        assert_eq!(decode_value("t", &bad_state), None);
    }
}
