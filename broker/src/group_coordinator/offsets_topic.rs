//! `__consumer_offsets`: which partition a group lives in, and Kafka's own key and value formats
//! for committed offsets and group metadata, so that Kafka tooling can read the topic.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::share_group::ShareStartOffset;

/// The internal topic holding committed offsets and group metadata.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Java's `String.hashCode` over UTF-16 code units.
fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(c as i32))
}

/// The `__consumer_offsets` partition of a group, as Kafka computes it.
pub fn partition_for(group_id: &str, num_partitions: i32) -> i32 {
    (java_string_hash(group_id) & 0x7fff_ffff) % num_partitions.max(1)
}

/// A committed offset as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetValue {
    /// Next offset to consume.
    pub offset: i64,
    /// Leader epoch of the last consumed record, or -1.
    pub leader_epoch: i32,
    /// Client metadata string.
    pub metadata: String,
    /// When it was committed.
    pub commit_timestamp: i64,
}

/// A member as stored in group metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMember {
    /// Member id.
    pub member_id: String,
    /// Static membership id.
    pub group_instance_id: Option<String>,
    /// Client id.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
    /// Rebalance timeout.
    pub rebalance_timeout_ms: i32,
    /// Session timeout.
    pub session_timeout_ms: i32,
    /// The member's metadata for the chosen protocol.
    pub subscription: Bytes,
    /// The member's assignment.
    pub assignment: Bytes,
}

/// Group metadata as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadataValue {
    /// Protocol type ("consumer", "connect", ...).
    pub protocol_type: String,
    /// Generation.
    pub generation: i32,
    /// Chosen protocol.
    pub protocol: Option<String>,
    /// Leader member id.
    pub leader: Option<String>,
    /// When the group entered its state.
    pub current_state_timestamp: i64,
    /// Members.
    pub members: Vec<StoredMember>,
}

/// A decoded key of `__consumer_offsets`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OffsetsKey {
    /// A committed offset of (group, topic, partition).
    Offset {
        /// Group.
        group: String,
        /// Topic.
        topic: String,
        /// Partition.
        partition: i32,
    },
    /// A group's metadata.
    Group {
        /// Group.
        group: String,
    },
    /// A record of a KIP-848 consumer group (types 3 and 5 to 8).
    Consumer {
        /// Group.
        group: String,
        /// Record type.
        kind: i16,
        /// The member, for a member's record.
        member: Option<String>,
    },
    /// A share group's metadata (Kafka's ShareGroupMetadataKey, record type 11).
    ShareGroup {
        /// Group.
        group: String,
    },
    /// A share-partition's start offset (Tern's record type 1000).
    ShareStartOffset {
        /// Group.
        group: String,
        /// Topic.
        topic: String,
        /// Partition.
        partition: i32,
    },
}

/// Kafka's record type of a share group's metadata in `__consumer_offsets`.
const SHARE_GROUP_METADATA_TYPE: i16 = 11;

/// Tern's record type of a share-partition start offset in `__consumer_offsets`. Kafka keeps
/// these in `__share_group_state` (ShareSnapshotKey: group, topic id, partition) under its
/// share coordinator; Tern keeps them beside the group, under a type Kafka does not use (its
/// loaders skip unknown types), with Kafka's ShareSnapshotValue as the value.
const SHARE_START_OFFSET_TYPE: i16 = 1000;

pub(crate) fn put_str(b: &mut BytesMut, s: &str) {
    b.put_i16(s.len() as i16);
    b.put_slice(s.as_bytes());
}

fn put_nullable_str(b: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => put_str(b, s),
        None => b.put_i16(-1),
    }
}

fn put_bytes(b: &mut BytesMut, v: &[u8]) {
    b.put_i32(v.len() as i32);
    b.put_slice(v);
}

pub(crate) fn get_str(b: &mut &[u8]) -> Option<String> {
    get_nullable_str(b)?
}

fn get_nullable_str(b: &mut &[u8]) -> Option<Option<String>> {
    if b.remaining() < 2 {
        return None;
    }
    let len = b.get_i16();
    if len < 0 {
        return Some(None);
    }
    let len = len as usize;
    if b.remaining() < len {
        return None;
    }
    let s = String::from_utf8(b[..len].to_vec()).ok()?;
    b.advance(len);
    Some(Some(s))
}

fn get_bytes(b: &mut &[u8]) -> Option<Bytes> {
    if b.remaining() < 4 {
        return None;
    }
    let len = b.get_i32();
    if len < 0 {
        return Some(Bytes::new());
    }
    let len = len as usize;
    if b.remaining() < len {
        return None;
    }
    let v = Bytes::copy_from_slice(&b[..len]);
    b.advance(len);
    Some(v)
}

impl OffsetValue {
    /// An offset a client commits now (no metadata: empty).
    pub fn committed(offset: i64, leader_epoch: i32, metadata: Option<&str>, now: i64) -> Self {
        OffsetValue {
            offset,
            leader_epoch,
            metadata: metadata.unwrap_or_default().to_string(),
            commit_timestamp: now,
        }
    }
}

/// Key of a committed offset (OffsetCommitKey v1).
pub fn offset_key(group: &str, topic: &str, partition: i32) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(1);
    put_str(&mut b, group);
    put_str(&mut b, topic);
    b.put_i32(partition);
    b.freeze()
}

/// Value of a committed offset (OffsetCommitValue v3).
pub fn offset_value(v: &OffsetValue) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(3);
    b.put_i64(v.offset);
    b.put_i32(v.leader_epoch);
    put_str(&mut b, &v.metadata);
    b.put_i64(v.commit_timestamp);
    b.freeze()
}

/// Key of group metadata (GroupMetadataKey v2).
pub fn group_key(group: &str) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(2);
    put_str(&mut b, group);
    b.freeze()
}

/// Value of group metadata (GroupMetadataValue v3).
pub fn group_value(v: &GroupMetadataValue) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(3);
    put_str(&mut b, &v.protocol_type);
    b.put_i32(v.generation);
    put_nullable_str(&mut b, v.protocol.as_deref());
    put_nullable_str(&mut b, v.leader.as_deref());
    b.put_i64(v.current_state_timestamp);
    b.put_i32(v.members.len() as i32);
    for m in &v.members {
        put_str(&mut b, &m.member_id);
        put_nullable_str(&mut b, m.group_instance_id.as_deref());
        put_str(&mut b, &m.client_id);
        put_str(&mut b, &m.client_host);
        b.put_i32(m.rebalance_timeout_ms);
        b.put_i32(m.session_timeout_ms);
        put_bytes(&mut b, &m.subscription);
        put_bytes(&mut b, &m.assignment);
    }
    b.freeze()
}

/// Key of a share group's metadata (ShareGroupMetadataKey).
pub fn share_group_key(group: &str) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(SHARE_GROUP_METADATA_TYPE);
    put_str(&mut b, group);
    b.freeze()
}

/// Value of a share group's metadata (ShareGroupMetadataValue v0, flexible: epoch, metadata
/// hash 0, no tagged fields).
pub fn share_group_value(epoch: i32) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(0);
    b.put_i32(epoch);
    b.put_i64(0);
    b.put_u8(0);
    b.freeze()
}

/// The epoch of a ShareGroupMetadataValue.
pub fn decode_share_group_value(value: &[u8]) -> Option<i32> {
    let mut b = value;
    if b.remaining() < 6 || b.get_i16() != 0 {
        return None;
    }
    Some(b.get_i32())
}

/// Key of a share-partition start offset (Tern's record type 1000: group, topic, partition).
pub fn share_offset_key(group: &str, topic: &str, partition: i32) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(SHARE_START_OFFSET_TYPE);
    put_str(&mut b, group);
    put_str(&mut b, topic);
    b.put_i32(partition);
    b.freeze()
}

/// Value of a share-partition start offset: Kafka's ShareSnapshotValue v0 (flexible) with no
/// state batches, written at `now`.
pub fn share_offset_value(v: &ShareStartOffset, now: i64) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(0);
    b.put_i32(0); // snapshot epoch
    b.put_i32(v.state_epoch);
    b.put_i32(v.leader_epoch);
    b.put_i64(v.offset);
    b.put_i64(now); // create timestamp
    b.put_i64(now); // write timestamp
    b.put_u8(1); // state batches: a compact array of none
    b.put_u8(0); // no tagged fields
    b.freeze()
}

/// The start offset of a ShareSnapshotValue v0 (its state batches and tagged fields, which
/// Tern does not keep, are not read).
pub fn decode_share_offset_value(value: &[u8]) -> Option<ShareStartOffset> {
    let mut b = value;
    if b.remaining() < 22 || b.get_i16() != 0 {
        return None;
    }
    let _snapshot_epoch = b.get_i32();
    let state_epoch = b.get_i32();
    let leader_epoch = b.get_i32();
    let offset = b.get_i64();
    Some(ShareStartOffset {
        offset,
        leader_epoch,
        state_epoch,
    })
}

/// Decodes a key; `None` for a key this broker does not understand.
pub fn decode_key(key: &[u8]) -> Option<OffsetsKey> {
    let mut b = key;
    if b.remaining() < 2 {
        return None;
    }
    match b.get_i16() {
        0 | 1 => {
            let group = get_str(&mut b)?;
            let topic = get_str(&mut b)?;
            if b.remaining() < 4 {
                return None;
            }
            Some(OffsetsKey::Offset {
                group,
                topic,
                partition: b.get_i32(),
            })
        }
        2 => Some(OffsetsKey::Group {
            group: get_str(&mut b)?,
        }),
        SHARE_GROUP_METADATA_TYPE => Some(OffsetsKey::ShareGroup {
            group: get_str(&mut b)?,
        }),
        kind if super::consumer_group_records::is_consumer_record(kind) => {
            let group = get_str(&mut b)?;
            let key = super::consumer_group_records::decode_key_rest(kind, &mut b)?;
            Some(OffsetsKey::Consumer {
                group,
                kind,
                member: key.member,
            })
        }
        SHARE_START_OFFSET_TYPE => {
            let group = get_str(&mut b)?;
            let topic = get_str(&mut b)?;
            if b.remaining() < 4 {
                return None;
            }
            Some(OffsetsKey::ShareStartOffset {
                group,
                topic,
                partition: b.get_i32(),
            })
        }
        _ => None,
    }
}

/// Decodes an offset value of versions 0 to 3.
pub fn decode_offset_value(value: &[u8]) -> Option<OffsetValue> {
    let mut b = value;
    if b.remaining() < 10 {
        return None;
    }
    let version = b.get_i16();
    let offset = b.get_i64();
    let leader_epoch = if version >= 3 {
        if b.remaining() < 4 {
            return None;
        }
        b.get_i32()
    } else {
        -1
    };
    let metadata = get_str(&mut b)?;
    if b.remaining() < 8 {
        return None;
    }
    let commit_timestamp = b.get_i64();
    Some(OffsetValue {
        offset,
        leader_epoch,
        metadata,
        commit_timestamp,
    })
}

/// Decodes a group metadata value of versions 0 to 3.
pub fn decode_group_value(value: &[u8]) -> Option<GroupMetadataValue> {
    let mut b = value;
    if b.remaining() < 2 {
        return None;
    }
    let version = b.get_i16();
    if !(0..=3).contains(&version) {
        return None;
    }
    let protocol_type = get_str(&mut b)?;
    if b.remaining() < 4 {
        return None;
    }
    let generation = b.get_i32();
    let protocol = get_nullable_str(&mut b)?;
    let leader = get_nullable_str(&mut b)?;
    let current_state_timestamp = if version >= 2 {
        if b.remaining() < 8 {
            return None;
        }
        b.get_i64()
    } else {
        -1
    };
    if b.remaining() < 4 {
        return None;
    }
    let count = b.get_i32().max(0) as usize;
    let mut members = Vec::with_capacity(count.min(1024));
    for _ in 0..count {
        let member_id = get_str(&mut b)?;
        let group_instance_id = if version >= 3 {
            get_nullable_str(&mut b)?
        } else {
            None
        };
        let client_id = get_str(&mut b)?;
        let client_host = get_str(&mut b)?;
        if b.remaining() < 4 {
            return None;
        }
        let rebalance_timeout_ms = if version >= 1 { b.get_i32() } else { 0 };
        if b.remaining() < 4 {
            return None;
        }
        let session_timeout_ms = b.get_i32();
        let subscription = get_bytes(&mut b)?;
        let assignment = get_bytes(&mut b)?;
        members.push(StoredMember {
            member_id,
            group_instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms: if version >= 1 {
                rebalance_timeout_ms
            } else {
                session_timeout_ms
            },
            session_timeout_ms,
            subscription,
            assignment,
        });
    }
    Some(GroupMetadataValue {
        protocol_type,
        generation,
        protocol,
        leader,
        current_state_timestamp,
        members,
    })
}

/// Topics a consumer-protocol member subscribes to (ConsumerProtocolSubscription, any version).
pub fn subscribed_topics(subscription: &[u8]) -> Vec<String> {
    let mut b = subscription;
    if b.remaining() < 6 {
        return Vec::new();
    }
    let _version = b.get_i16();
    let count = b.get_i32();
    let mut topics = Vec::new();
    for _ in 0..count.clamp(0, 100_000) {
        match get_str(&mut b) {
            Some(t) => topics.push(t),
            None => break,
        }
    }
    topics
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_matches_kafka_for_known_groups() {
        // Java: Utils.abs("my-group".hashCode()) % 50 == 42 ... computed with Java's hashCode.
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("ab"), 97 * 31 + 98);
        let p = partition_for("console-consumer-12345", 50);
        assert!((0..50).contains(&p));
    }

    #[test]
    fn offset_records_round_trip() {
        let k = offset_key("g", "t", 3);
        assert_eq!(
            decode_key(&k),
            Some(OffsetsKey::Offset {
                group: "g".into(),
                topic: "t".into(),
                partition: 3
            })
        );
        let v = OffsetValue {
            offset: 42,
            leader_epoch: 7,
            metadata: "meta".into(),
            commit_timestamp: 1234,
        };
        assert_eq!(decode_offset_value(&offset_value(&v)), Some(v));
    }

    #[test]
    fn group_records_round_trip() {
        let v = GroupMetadataValue {
            protocol_type: "consumer".into(),
            generation: 5,
            protocol: Some("range".into()),
            leader: Some("m1".into()),
            current_state_timestamp: 99,
            members: vec![StoredMember {
                member_id: "m1".into(),
                group_instance_id: Some("i1".into()),
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout_ms: 300000,
                session_timeout_ms: 45000,
                subscription: Bytes::from_static(b"sub"),
                assignment: Bytes::from_static(b"asg"),
            }],
        };
        assert_eq!(
            decode_key(&group_key("g")),
            Some(OffsetsKey::Group { group: "g".into() })
        );
        assert_eq!(decode_group_value(&group_value(&v)), Some(v));
    }

    #[test]
    fn share_records_round_trip() {
        assert_eq!(
            decode_key(&share_group_key("sg")),
            Some(OffsetsKey::ShareGroup { group: "sg".into() })
        );
        assert_eq!(decode_share_group_value(&share_group_value(7)), Some(7));
        assert_eq!(
            decode_key(&share_offset_key("sg", "t", 4)),
            Some(OffsetsKey::ShareStartOffset {
                group: "sg".into(),
                topic: "t".into(),
                partition: 4
            })
        );
        let v = ShareStartOffset {
            offset: 123,
            leader_epoch: 5,
            state_epoch: 2,
        };
        let bytes = share_offset_value(&v, 1_000);
        assert_eq!(decode_share_offset_value(&bytes), Some(v));
        for n in 0..22 {
            assert!(decode_share_offset_value(&bytes[..n]).is_none());
        }
        // ShareGroupMetadataValue v0: version, epoch, metadata hash, empty tagged fields.
        assert_eq!(share_group_value(3).len(), 2 + 4 + 8 + 1);
    }

    #[test]
    fn truncated_values_do_not_decode() {
        let v = offset_value(&OffsetValue {
            offset: 1,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp: 0,
        });
        for n in 0..v.len() {
            assert!(decode_offset_value(&v[..n]).is_none());
        }
        assert!(decode_key(&[0, 9]).is_none());
    }

    #[test]
    fn subscription_topics_are_read() {
        let mut b = BytesMut::new();
        b.put_i16(0);
        b.put_i32(2);
        put_str(&mut b, "a");
        put_str(&mut b, "b");
        b.put_i32(0);
        assert_eq!(
            subscribed_topics(&b),
            vec!["a".to_string(), "b".to_string()]
        );
    }
}
