//! The coordinator's side of share groups: reading, altering and deleting their start
//! offsets, each change stored in `__consumer_offsets` before it takes effect.

use bytes::Bytes;
use kafka_protocol::ResponseError;

use super::consumer_group::Refusal;
use super::offsets_topic::{
    share_group_key, share_group_value, share_offset_key, share_offset_value,
};
use super::share_group::{ShareGroup, ShareStartOffset};
use super::{now_ms, GroupCoordinator};

/// A start offset to set: (topic, partition, offset, leader epoch).
pub(crate) type ShareOffsetChange = (String, i32, i64, i32);

fn not_found(group_id: &str) -> Refusal {
    Refusal {
        error: ResponseError::GroupIdNotFound,
        message: format!("Group {group_id} not found."),
    }
}

fn not_share(group_id: &str) -> Refusal {
    Refusal {
        error: ResponseError::GroupIdNotFound,
        message: format!("Group {group_id} is not a share group."),
    }
}

fn coordinator_error(error: ResponseError) -> Refusal {
    Refusal {
        error,
        message: String::new(),
    }
}

impl GroupCoordinator {
    /// The start offsets of share group `group_id`; GROUP_ID_NOT_FOUND when there is no such
    /// group or it is of another type.
    pub fn share_offsets(&self, group_id: &str) -> Result<ShareGroup, Refusal> {
        self.check_coordinator(group_id)
            .map_err(coordinator_error)?;
        match self.with_group(group_id, false, |g| g.share().cloned()) {
            Some(Some(share)) => Ok(share),
            Some(None) => Err(not_share(group_id)),
            None => Err(not_found(group_id)),
        }
    }

    /// AlterShareGroupOffsets: sets start offsets, creating the share group when the id is
    /// free (as Kafka's offset reset does). A group of another type is GROUP_ID_NOT_FOUND.
    pub fn alter_share_offsets(
        &self,
        group_id: &str,
        changes: Vec<ShareOffsetChange>,
    ) -> Result<(), Refusal> {
        self.check_coordinator(group_id)
            .map_err(coordinator_error)?;
        let created = self
            .with_group(group_id, true, |g| g.share_mut(true).is_some())
            .unwrap_or(false);
        if !created {
            return Err(not_share(group_id));
        }
        let mut next = self.share_offsets(group_id)?;
        refuse_members(&next)?;
        let keys: Vec<(String, i32)> = changes.iter().map(|(t, p, _, _)| (t.clone(), *p)).collect();
        next.set_offsets(
            changes
                .into_iter()
                .map(|(t, p, offset, epoch)| ((t, p), offset, epoch)),
        );
        let now = now_ms();
        let mut records: Vec<(Bytes, Option<Bytes>)> = vec![(
            share_group_key(group_id),
            Some(share_group_value(next.epoch)),
        )];
        records.extend(keys.iter().filter_map(|k| {
            let v = next.start_offsets.get(k)?;
            Some((
                share_offset_key(group_id, &k.0, k.1),
                Some(share_offset_value(v, now)),
            ))
        }));
        self.store(group_id, &records).map_err(coordinator_error)?;
        self.replace_share(group_id, next);
        Ok(())
    }

    /// DeleteShareGroupOffsets: forgets the start offsets of whole topics. One result per
    /// topic in request order: None when deleted, UNKNOWN_TOPIC_OR_PARTITION when the group
    /// kept nothing of it.
    pub fn delete_share_offsets(
        &self,
        group_id: &str,
        topics: &[String],
    ) -> Result<Vec<Option<ResponseError>>, Refusal> {
        let mut next = self.share_offsets(group_id)?;
        refuse_members(&next)?;
        let mut results = Vec::with_capacity(topics.len());
        let mut tombstones: Vec<(Bytes, Option<Bytes>)> = Vec::new();
        for topic in topics {
            let removed = next.remove_topic(topic);
            if removed.is_empty() {
                results.push(Some(ResponseError::UnknownTopicOrPartition));
                continue;
            }
            results.push(None);
            tombstones.extend(
                removed
                    .iter()
                    .map(|(t, p)| (share_offset_key(group_id, t, *p), None)),
            );
        }
        if !tombstones.is_empty() {
            let mut records = vec![(
                share_group_key(group_id),
                Some(share_group_value(next.epoch)),
            )];
            records.extend(tombstones);
            self.store(group_id, &records).map_err(coordinator_error)?;
            self.replace_share(group_id, next);
        }
        Ok(results)
    }

    /// Puts a share group's new start offsets in place (after their records were stored).
    fn replace_share(&self, group_id: &str, next: ShareGroup) {
        self.with_group(group_id, false, |g| {
            if let Some(share) = g.share_mut(false) {
                share.start_offsets = next.start_offsets;
                share.epoch = share.epoch.max(next.epoch);
            }
        });
    }

    /// The stored start offset of a share-partition, where this broker coordinates the group
    /// (a partition leader initializing its share-partition reads it).
    pub fn share_start(
        &self,
        group_id: &str,
        topic: &str,
        partition: i32,
    ) -> Option<ShareStartOffset> {
        self.check_coordinator(group_id).ok()?;
        self.with_group(group_id, false, |g| {
            g.share()?
                .start_offsets
                .get(&(topic.to_string(), partition))
                .copied()
        })
        .flatten()
    }

    /// A share-partition's start offset moved as its consumers settled records (or was first
    /// set from `share.auto.offset.reset`): stored with its state epoch unchanged (0 for a
    /// new one). The state epoch stored; None where this broker does not coordinate the group.
    pub fn record_share_progress(
        &self,
        group_id: &str,
        topic: &str,
        partition: i32,
        offset: i64,
        leader_epoch: i32,
    ) -> Option<i32> {
        self.check_coordinator(group_id).ok()?;
        let key = (topic.to_string(), partition);
        let value = self
            .with_group(group_id, true, |g| {
                let share = g.share_mut(true)?;
                let state_epoch = share.start_offsets.get(&key).map_or(0, |s| s.state_epoch);
                Some(ShareStartOffset {
                    offset,
                    leader_epoch,
                    state_epoch,
                })
            })
            .flatten()?;
        let record = (
            share_offset_key(group_id, topic, partition),
            Some(share_offset_value(&value, now_ms())),
        );
        if let Err(e) = self.store(group_id, &[record]) {
            tracing::warn!(group = group_id, topic, partition, error = ?e, "cannot store a share-partition's start offset");
            return None;
        }
        self.with_group(group_id, false, |g| {
            if let Some(share) = g.share_mut(false) {
                share.start_offsets.insert(key, value);
            }
        });
        Some(value.state_epoch)
    }
}

/// Start offsets are set and deleted only while no consumer reads them, as Kafka's.
fn refuse_members(share: &ShareGroup) -> Result<(), Refusal> {
    if share.members.is_empty() {
        Ok(())
    } else {
        Err(Refusal {
            error: ResponseError::NonEmptyGroup,
            message: "The group is not empty.".into(),
        })
    }
}
