//! Loading `__consumer_offsets`: the records of a partition applied, in log order, to the
//! groups they belong to: classic groups, committed offsets, KIP-848 consumer groups, and share
//! groups' start offsets.

use std::collections::HashMap;

use tern_protocol::records::Record;

use super::consumer_group_records::{self, TopicIds};
use super::group::Group;
use super::offsets_topic::{
    decode_group_value, decode_key, decode_offset_value, decode_share_group_value,
    decode_share_offset_value, OffsetsKey,
};

/// Applies the records of one data batch: committed offsets (pending under `txn_producer`
/// until its transaction's marker), offset tombstones, group metadata and group tombstones.
/// Records whose key does not decode are skipped, as Kafka skips unknown record versions.
pub fn apply_offsets_records(
    groups: &mut HashMap<String, Group>,
    records: Vec<Record>,
    txn_producer: Option<i64>,
    ids: &dyn TopicIds,
    now: i64,
) {
    for r in records {
        let Some(key) = r.key.as_deref().and_then(decode_key) else {
            continue;
        };
        match key {
            OffsetsKey::Offset {
                group,
                topic,
                partition,
            } => {
                let g = groups
                    .entry(group.clone())
                    .or_insert_with(|| Group::new(&group, now));
                match (
                    r.value.as_deref().and_then(decode_offset_value),
                    txn_producer,
                ) {
                    (Some(v), Some(pid)) => {
                        g.add_pending_txn_offsets(pid, [((topic, partition), v)]);
                    }
                    (Some(v), None) => g.commit_offsets([((topic, partition), v)]),
                    (None, _) => g.remove_offset(&(topic, partition)),
                }
            }
            OffsetsKey::Group { group } => match r.value.as_deref() {
                Some(v) => {
                    if let Some(v) = decode_group_value(v) {
                        groups
                            .entry(group.clone())
                            .or_insert_with(|| Group::new(&group, now))
                            .restore(&v, now);
                    }
                }
                None => {
                    groups.remove(&group);
                }
            },
            OffsetsKey::Consumer {
                group,
                kind,
                member,
            } => {
                let key = consumer_group_records::ConsumerRecordKey { kind, member };
                let g = groups
                    .entry(group.clone())
                    .or_insert_with(|| Group::new(&group, now));
                consumer_group_records::apply(
                    g.stored_consumer_mut(),
                    &key,
                    r.value.as_deref(),
                    ids,
                );
            }
            OffsetsKey::ShareGroup { group } => match r.value.as_deref() {
                Some(v) => {
                    if let Some(epoch) = decode_share_group_value(v) {
                        let g = groups
                            .entry(group.clone())
                            .or_insert_with(|| Group::new(&group, now));
                        if let Some(share) = g.share_mut(true) {
                            share.epoch = epoch;
                        }
                    }
                }
                None => {
                    groups.remove(&group);
                }
            },
            OffsetsKey::ShareStartOffset {
                group,
                topic,
                partition,
            } => {
                // Written after the group's own record, so the group is known here.
                let Some(share) = groups.get_mut(&group).and_then(|g| g.share_mut(false)) else {
                    continue;
                };
                match r.value.as_deref().and_then(decode_share_offset_value) {
                    Some(v) => {
                        share.start_offsets.insert((topic, partition), v);
                    }
                    None => {
                        share.start_offsets.remove(&(topic, partition));
                    }
                }
            }
        }
    }
}
