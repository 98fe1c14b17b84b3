//! A consumer group and what `__consumer_offsets` keeps of it (see `consumer_group_records`):
//! the image written after each change, and the group rebuilt from it when its coordinator
//! loads the partition. Timers start afresh at the load, as Kafka schedules them: each member
//! has a whole session to heartbeat, and one still revoking has its whole rebalance timeout.

use super::{ConsumerGroup, ConsumerMember, MemberState, TopicView};
use crate::group_coordinator::consumer_group_records::{
    metadata_hash, StoredClassic, StoredConsumerGroup, StoredCurrent, StoredMember,
    StoredMemberMetadata,
};

use super::classic::ClassicMembership;

impl ConsumerGroup {
    /// What is stored of the group now.
    pub(crate) fn stored(&self) -> StoredConsumerGroup {
        StoredConsumerGroup {
            epoch: self.group_epoch,
            metadata_hash: metadata_hash(&self.subscribed_topics),
            assignment_epoch: self.assignment_epoch,
            members: self
                .members
                .values()
                .map(|m| {
                    let stored = StoredMember {
                        metadata: Some(metadata_of(m)),
                        target: self.target.get(&m.member_id).cloned(),
                        current: Some(StoredCurrent {
                            member_epoch: m.member_epoch,
                            previous_member_epoch: m.previous_member_epoch,
                            state: m.state,
                            assigned: m.assigned.clone(),
                            pending_revocation: m.pending_revocation.clone(),
                            assignment_epochs: m.assignment_epochs.clone(),
                        }),
                    };
                    (m.member_id.clone(), stored)
                })
                .collect(),
        }
    }

    /// The group rebuilt from `stored` at `now_ms`, its subscribed topics read from `topics`;
    /// a member's session is `session_timeout_ms` (a classic member's own). Members whose
    /// metadata was not stored are left out.
    pub(crate) fn restored(
        stored: &StoredConsumerGroup,
        topics: &dyn TopicView,
        default_assignor: &str,
        session_timeout_ms: i32,
        now_ms: i64,
    ) -> ConsumerGroup {
        let mut group = ConsumerGroup {
            group_epoch: stored.epoch,
            assignment_epoch: stored.assignment_epoch,
            ..ConsumerGroup::default()
        };
        for (id, s) in &stored.members {
            let Some(meta) = &s.metadata else { continue };
            let mut m = ConsumerMember::new(id.clone(), now_ms);
            m.instance_id = meta.instance_id.clone();
            m.rack_id = meta.rack_id.clone();
            m.client_id = meta.client_id.clone();
            m.client_host = meta.client_host.clone();
            m.rebalance_timeout_ms = meta.rebalance_timeout_ms;
            m.subscribed_topic_names = meta.topics.clone();
            m.subscribed_topic_regex = meta.regex.clone();
            m.compiled_regex = meta.regex.as_deref().and_then(|r| super::anchored(r).ok());
            m.server_assignor = meta.server_assignor.clone();
            m.session_timeout_ms = i64::from(session_timeout_ms);
            if let Some(c) = &meta.classic {
                m.session_timeout_ms = i64::from(c.session_timeout_ms);
                m.classic = Some(ClassicMembership::new(
                    c.session_timeout_ms,
                    c.protocols.clone(),
                ));
            }
            if let Some(c) = &s.current {
                m.member_epoch = c.member_epoch;
                m.previous_member_epoch = c.previous_member_epoch;
                m.state = c.state;
                m.assigned = c.assigned.clone();
                m.pending_revocation = c.pending_revocation.clone();
                m.assignment_epochs = c.assignment_epochs.clone();
                m.track_assignment_epochs(c.member_epoch);
                if m.state == MemberState::UnrevokedPartitions {
                    m.revocation_deadline_ms = Some(now_ms + i64::from(m.rebalance_timeout_ms));
                }
            }
            if let Some(t) = &s.target {
                group.target.insert(id.clone(), t.clone());
            }
            group.members.insert(id.clone(), m);
        }
        group.assignor = group
            .members
            .values()
            .find_map(|m| m.server_assignor.clone())
            .unwrap_or_else(|| default_assignor.to_string());
        // Topics that changed while the group was not loaded count as a change at the next
        // heartbeat, which bumps the epoch (Kafka compares its metadata hash the same way).
        let subscribed = group.subscribed_partitions(topics);
        if metadata_hash(&subscribed) == stored.metadata_hash {
            group.subscribed_topics = subscribed;
        }
        group
    }
}

fn metadata_of(m: &ConsumerMember) -> StoredMemberMetadata {
    StoredMemberMetadata {
        instance_id: m.instance_id.clone(),
        rack_id: m.rack_id.clone(),
        client_id: m.client_id.clone(),
        client_host: m.client_host.clone(),
        topics: m.subscribed_topic_names.clone(),
        regex: m.subscribed_topic_regex.clone(),
        rebalance_timeout_ms: m.rebalance_timeout_ms,
        server_assignor: m.server_assignor.clone(),
        classic: m.classic.as_ref().map(|c| StoredClassic {
            session_timeout_ms: c.session_timeout_ms,
            protocols: c.protocols.clone(),
        }),
    }
}
