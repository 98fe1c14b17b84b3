//! Mirror partition states and the `__mirror_state` records that persist them.
//!
//! Record layout (after the prototype's coordinator records): key = int16 record type, then
//! the mirror name (int16-length string), the topic id (16 bytes) and the partition (int32);
//! value = int16 version 0, then a flexible struct. Type 2 holds the partition state; type 3
//! (Tern's) the last mirrored offset written when a partition is stopped.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tern_protocol::flexible::{get_uvarint, put_compact_nullable_str, put_uvarint};
use uuid::Uuid;

/// Name of the internal compacted topic holding mirror partition states.
pub const MIRROR_STATE_TOPIC: &str = "__mirror_state";

const STATE_RECORD: i16 = 2;
const LAST_MIRRORED_OFFSET_RECORD: i16 = 3;

/// The lifecycle state of one mirror partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MirrorPartitionState {
    /// No state recorded.
    Unknown,
    /// Aligning the local log with the source (failback truncation) before fetching.
    Preparing,
    /// The fetcher copies source batches.
    Mirroring,
    /// Read-only, no fetching.
    Paused,
    /// Failover requested: fetcher removed, last mirrored offset being persisted.
    Stopping,
    /// Failed over: the topic takes writes.
    Stopped,
    /// An error; retried with backoff.
    Failed,
}

impl MirrorPartitionState {
    /// The wire id (the prototype's numbering; PREPARING takes its LOG_TRUNCATION slot).
    pub fn id(self) -> i8 {
        match self {
            MirrorPartitionState::Unknown => -1,
            MirrorPartitionState::Preparing => 0,
            MirrorPartitionState::Mirroring => 2,
            MirrorPartitionState::Paused => 4,
            MirrorPartitionState::Stopping => 5,
            MirrorPartitionState::Stopped => 6,
            MirrorPartitionState::Failed => 7,
        }
    }

    /// The state of a wire id (unknown ids are `Unknown`).
    pub fn from_id(id: i8) -> Self {
        match id {
            0 | 1 => MirrorPartitionState::Preparing,
            2 => MirrorPartitionState::Mirroring,
            3 | 4 => MirrorPartitionState::Paused,
            5 => MirrorPartitionState::Stopping,
            6 => MirrorPartitionState::Stopped,
            7 => MirrorPartitionState::Failed,
            _ => MirrorPartitionState::Unknown,
        }
    }

    /// The name shown by describe.
    pub fn name(self) -> &'static str {
        match self {
            MirrorPartitionState::Unknown => "UNKNOWN",
            MirrorPartitionState::Preparing => "PREPARING",
            MirrorPartitionState::Mirroring => "MIRRORING",
            MirrorPartitionState::Paused => "PAUSED",
            MirrorPartitionState::Stopping => "STOPPING",
            MirrorPartitionState::Stopped => "STOPPED",
            MirrorPartitionState::Failed => "FAILED",
        }
    }

    /// Whether the spec allows moving from `self` to `next`.
    pub fn can_become(self, next: MirrorPartitionState) -> bool {
        use MirrorPartitionState::*;
        if self == next || next == Failed {
            return true;
        }
        match next {
            Preparing => matches!(self, Unknown | Stopped | Failed),
            Mirroring => matches!(self, Preparing | Paused),
            Paused => matches!(self, Preparing | Mirroring | Failed),
            Stopping => matches!(self, Unknown | Preparing | Mirroring | Paused | Failed),
            Stopped => self == Stopping,
            Unknown | Failed => false,
        }
    }
}

/// Identifies one mirror partition.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MirrorPartitionKey {
    /// Mirror name.
    pub mirror: String,
    /// Topic id (the same on source and destination).
    pub topic_id: Uuid,
    /// Partition index.
    pub partition: i32,
}

/// What is persisted of one mirror partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionStateRecord {
    /// Current state.
    pub state: MirrorPartitionState,
    /// State before the last transition.
    pub previous_state: MirrorPartitionState,
    /// Retries while FAILED (-1: not retryable).
    pub retry_attempt: i16,
    /// Last error.
    pub error_message: Option<String>,
}

/// One decoded `__mirror_state` record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateRecord {
    /// A partition's state (None: tombstone).
    State(MirrorPartitionKey, Option<PartitionStateRecord>),
    /// A stopped partition's last mirrored offset (None: tombstone).
    LastMirroredOffset(MirrorPartitionKey, Option<i64>),
}

/// Java's `String.hashCode`.
fn java_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(c as i32))
}

/// Kafka's `Uuid.toString`: URL-safe base64 without padding.
pub fn uuid_base64(id: &Uuid) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let bytes = id.as_bytes();
    let mut out = String::with_capacity(22);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

/// The `__mirror_state` partition that coordinates a mirror partition.
pub fn coordinator_partition(key: &MirrorPartitionKey, num_partitions: i32) -> i32 {
    let s = format!(
        "{}:{}:{}",
        key.mirror,
        uuid_base64(&key.topic_id),
        key.partition
    );
    hash_partition(&s, num_partitions)
}

/// The `__mirror_state` partition whose leader is a mirror's metadata coordinator: the one
/// broker that syncs the mirror's topics, configs, group offsets and ACLs, and completes its
/// failovers (the spec's assignment by mirror name alone).
pub fn metadata_coordinator_partition(mirror: &str, num_partitions: i32) -> i32 {
    hash_partition(mirror, num_partitions)
}

fn hash_partition(s: &str, num_partitions: i32) -> i32 {
    let h = java_hash(s);
    // Kafka's Utils.abs maps MIN_VALUE to 0.
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs % num_partitions.max(1)
}

fn encode_key(kind: i16, key: &MirrorPartitionKey) -> Bytes {
    let mut b = BytesMut::with_capacity(24 + key.mirror.len());
    b.put_i16(kind);
    b.put_i16(key.mirror.len() as i16);
    b.put_slice(key.mirror.as_bytes());
    b.put_slice(key.topic_id.as_bytes());
    b.put_i32(key.partition);
    b.freeze()
}

/// Encodes a partition-state record (key, value).
pub fn encode_state(key: &MirrorPartitionKey, rec: &PartitionStateRecord) -> (Bytes, Bytes) {
    let mut v = BytesMut::new();
    v.put_i16(0);
    v.put_i8(rec.state.id());
    v.put_i8(rec.previous_state.id());
    v.put_i16(rec.retry_attempt);
    put_compact_nullable_str(&mut v, rec.error_message.as_deref());
    put_uvarint(&mut v, 0);
    (encode_key(STATE_RECORD, key), v.freeze())
}

/// Encodes a last-mirrored-offset record (key, value).
pub fn encode_last_mirrored_offset(key: &MirrorPartitionKey, offset: i64) -> (Bytes, Bytes) {
    let mut v = BytesMut::new();
    v.put_i16(0);
    v.put_i64(offset);
    put_uvarint(&mut v, 0);
    (encode_key(LAST_MIRRORED_OFFSET_RECORD, key), v.freeze())
}

/// Decodes a `__mirror_state` record; `None` for anything that is not one of ours.
pub fn decode_record(key: &[u8], value: Option<&[u8]>) -> Option<StateRecord> {
    let mut k = key;
    if k.remaining() < 2 {
        return None;
    }
    let kind = k.get_i16();
    if k.remaining() < 2 {
        return None;
    }
    let len = usize::try_from(k.get_i16()).ok()?;
    if k.remaining() < len + 20 {
        return None;
    }
    let mirror = String::from_utf8(k[..len].to_vec()).ok()?;
    k.advance(len);
    let topic_id = Uuid::from_slice(&k[..16]).ok()?;
    k.advance(16);
    let partition = k.get_i32();
    let key = MirrorPartitionKey {
        mirror,
        topic_id,
        partition,
    };
    match kind {
        STATE_RECORD => {
            let Some(mut v) = value else {
                return Some(StateRecord::State(key, None));
            };
            if v.remaining() < 6 || v.get_i16() != 0 {
                return None;
            }
            let state = MirrorPartitionState::from_id(v.get_i8());
            let previous_state = MirrorPartitionState::from_id(v.get_i8());
            let retry_attempt = v.get_i16();
            let n = get_uvarint(&mut v)? as usize;
            let error_message = if n == 0 {
                None
            } else {
                if v.remaining() < n - 1 {
                    return None;
                }
                let m = String::from_utf8_lossy(&v[..n - 1]).into_owned();
                Some(m)
            };
            Some(StateRecord::State(
                key,
                Some(PartitionStateRecord {
                    state,
                    previous_state,
                    retry_attempt,
                    error_message,
                }),
            ))
        }
        LAST_MIRRORED_OFFSET_RECORD => {
            let Some(mut v) = value else {
                return Some(StateRecord::LastMirroredOffset(key, None));
            };
            if v.remaining() < 10 || v.get_i16() != 0 {
                return None;
            }
            Some(StateRecord::LastMirroredOffset(key, Some(v.get_i64())))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> MirrorPartitionKey {
        MirrorPartitionKey {
            mirror: "dr".into(),
            topic_id: Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef),
            partition: 7,
        }
    }

    #[test]
    fn records_round_trip() {
        let rec = PartitionStateRecord {
            state: MirrorPartitionState::Failed,
            previous_state: MirrorPartitionState::Mirroring,
            retry_attempt: 3,
            error_message: Some("source unreachable".into()),
        };
        let (k, v) = encode_state(&key(), &rec);
        assert_eq!(
            decode_record(&k, Some(&v)),
            Some(StateRecord::State(key(), Some(rec)))
        );
        assert_eq!(
            decode_record(&k, None),
            Some(StateRecord::State(key(), None))
        );
        let (k, v) = encode_last_mirrored_offset(&key(), 123_456_789_012);
        assert_eq!(
            decode_record(&k, Some(&v)),
            Some(StateRecord::LastMirroredOffset(
                key(),
                Some(123_456_789_012)
            ))
        );
    }

    #[test]
    fn garbage_never_panics() {
        let (k, v) = encode_state(
            &key(),
            &PartitionStateRecord {
                state: MirrorPartitionState::Mirroring,
                previous_state: MirrorPartitionState::Preparing,
                retry_attempt: 0,
                error_message: Some("x".repeat(40)),
            },
        );
        for i in 0..k.len() {
            let _ = decode_record(&k[..i], Some(&v));
        }
        for i in 0..v.len() {
            let _ = decode_record(&k, Some(&v[..i]));
        }
    }

    #[test]
    fn uuid_strings_match_kafka() {
        // Kafka prints Uuid(0, 1) as AAAAAAAAAAAAAAAAAAAAAQ.
        assert_eq!(uuid_base64(&Uuid::from_u128(1)), "AAAAAAAAAAAAAAAAAAAAAQ");
        assert_eq!(java_hash("abc"), 96354);
        let p = coordinator_partition(&key(), 50);
        assert!((0..50).contains(&p));
    }

    #[test]
    fn transitions_follow_the_spec() {
        use MirrorPartitionState::*;
        assert!(Unknown.can_become(Preparing));
        assert!(Preparing.can_become(Mirroring));
        assert!(Mirroring.can_become(Stopping));
        assert!(Stopping.can_become(Stopped));
        assert!(Stopped.can_become(Preparing));
        assert!(Mirroring.can_become(Failed));
        assert!(!Mirroring.can_become(Stopped));
        assert!(!Stopped.can_become(Mirroring));
        for s in [
            Unknown, Preparing, Mirroring, Paused, Stopping, Stopped, Failed,
        ] {
            assert_eq!(MirrorPartitionState::from_id(s.id()), s);
        }
    }
}
