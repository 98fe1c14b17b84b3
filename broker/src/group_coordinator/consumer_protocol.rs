//! The consumer protocol embedded in classic groups' JoinGroup metadata and SyncGroup
//! assignments (ConsumerProtocolSubscription and ConsumerProtocolAssignment), as far as a
//! consumer group with classic members needs it: a member's subscription read from its join,
//! and its assignment written for its sync in the version the member speaks.

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTopic;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::assignor::Assignment;

/// The newest version of either message Tern reads and writes.
const NEWEST: i16 = 3;

/// What a classic member's JoinGroup metadata says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Subscription {
    /// Subscribed topics, as sent.
    pub topics: Vec<String>,
    /// Partitions it owns (v1+; eager members send none).
    pub owned: Assignment,
    /// Rack (v3+).
    pub rack_id: Option<String>,
}

/// The version a piece of embedded-protocol metadata starts with (Kafka refuses a negative one).
pub(crate) fn version(metadata: &[u8]) -> Option<i16> {
    let v = metadata
        .get(..2)
        .map(|b| i16::from_be_bytes([b[0], b[1]]))?;
    (v >= 0).then_some(v)
}

/// Reads a ConsumerProtocolSubscription; a version newer than Tern knows is read as the newest
/// (its fields come first, as Kafka's reader assumes).
pub(crate) fn decode_subscription(metadata: &[u8]) -> Option<Subscription> {
    let v = version(metadata)?;
    let mut body = &metadata[2..];
    let s = ConsumerProtocolSubscription::decode(&mut body, v.min(NEWEST)).ok()?;
    let mut owned = Assignment::new();
    for tp in s.owned_partitions {
        owned
            .entry(tp.topic.0.to_string())
            .or_default()
            .extend(tp.partitions);
    }
    Some(Subscription {
        topics: s.topics.iter().map(|t| t.to_string()).collect(),
        owned,
        rack_id: s.rack_id.map(|r| r.to_string()),
    })
}

/// Reads a ConsumerProtocolAssignment into partitions by topic and whether it carried user
/// data (a custom assignor's, which a consumer group could not keep).
pub(crate) fn decode_assignment(bytes: &[u8]) -> Option<(Assignment, bool)> {
    let v = version(bytes)?;
    let mut body = &bytes[2..];
    let a = ConsumerProtocolAssignment::decode(&mut body, v.min(NEWEST)).ok()?;
    let mut out = Assignment::new();
    for tp in a.assigned_partitions {
        out.entry(tp.topic.0.to_string())
            .or_default()
            .extend(tp.partitions);
    }
    let user_data = a.user_data.is_some_and(|d| d.has_remaining());
    Some((out, user_data))
}

/// Writes `assignment` as a ConsumerProtocolAssignment of `version` (that of the member's
/// subscription, as Kafka answers; capped at the newest Tern writes).
pub(crate) fn encode_assignment(assignment: &Assignment, version: i16) -> Bytes {
    let version = version.clamp(0, NEWEST);
    let message = ConsumerProtocolAssignment::default().with_assigned_partitions(
        assignment
            .iter()
            .filter(|(_, ps)| !ps.is_empty())
            .map(|(t, ps)| {
                AssignedTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(t.clone())))
                    .with_partitions(ps.iter().copied().collect())
            })
            .collect(),
    );
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&version.to_be_bytes());
    // Encoding a message built here cannot fail: every field fits its type.
    let _ = message.encode(&mut buf, version);
    buf.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::consumer_protocol_subscription::TopicPartition as OwnedTopic;

    fn subscription_bytes(version: i16, s: &ConsumerProtocolSubscription) -> Vec<u8> {
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&version.to_be_bytes());
        s.encode(&mut buf, version).unwrap();
        buf.to_vec()
    }

    #[test]
    fn subscriptions_of_every_version_are_read() {
        let s = ConsumerProtocolSubscription::default()
            .with_topics(vec![
                StrBytes::from_static_str("b"),
                StrBytes::from_static_str("a"),
            ])
            .with_owned_partitions(vec![OwnedTopic::default()
                .with_topic(TopicName(StrBytes::from_static_str("a")))
                .with_partitions(vec![2, 0])])
            .with_generation_id(4)
            .with_rack_id(Some(StrBytes::from_static_str("r1")));
        let v0 = decode_subscription(&subscription_bytes(0, &s)).unwrap();
        assert_eq!(v0.topics, vec!["b", "a"]);
        assert!(v0.owned.is_empty());
        let v3 = decode_subscription(&subscription_bytes(3, &s)).unwrap();
        assert_eq!(
            v3.owned["a"].iter().copied().collect::<Vec<_>>(),
            vec![0, 2]
        );
        assert_eq!(v3.rack_id.as_deref(), Some("r1"));
        // A newer version is read as the newest known.
        let mut v9 = subscription_bytes(3, &s);
        v9[1] = 9;
        assert_eq!(decode_subscription(&v9).unwrap(), v3);
        // Negative versions and truncated bodies are refused.
        assert!(decode_subscription(&[0xff, 0xff, 0, 0, 0, 0]).is_none());
        let full = subscription_bytes(3, &s);
        for n in 0..full.len() - 1 {
            assert!(decode_subscription(&full[..n]).is_none(), "{n}");
        }
    }

    #[test]
    fn assignments_round_trip_in_the_members_version() {
        let mut a = Assignment::new();
        a.insert("t".into(), [1, 3].into_iter().collect());
        a.insert("empty".into(), Default::default());
        for v in 0..=3 {
            let bytes = encode_assignment(&a, v);
            assert_eq!(version(&bytes), Some(v));
            let (back, user_data) = decode_assignment(&bytes).unwrap();
            assert!(!user_data);
            assert_eq!(back.len(), 1);
            assert_eq!(back["t"], a["t"]);
        }
        let with_data = {
            let mut buf = BytesMut::new();
            buf.extend_from_slice(&1i16.to_be_bytes());
            ConsumerProtocolAssignment::default()
                .with_user_data(Some(Bytes::from_static(b"x")))
                .encode(&mut buf, 1)
                .unwrap();
            buf
        };
        assert!(decode_assignment(&with_data).unwrap().1);
    }
}
