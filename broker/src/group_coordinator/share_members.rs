//! The coordinator's side of share consumers' membership: ShareGroupHeartbeat, and the
//! expiry of members whose session ran out.

use kafka_protocol::ResponseError;

use super::consumer_group::{Refusal, TopicView};
use super::offsets_topic::{share_group_key, share_group_value};
use super::share_group::{ShareGroupConfig, ShareHeartbeat, ShareHeartbeatAnswer};
use super::{now_ms, GroupCoordinator};

impl GroupCoordinator {
    /// ShareGroupHeartbeat: a member joins (epoch 0), heartbeats or leaves (-1). The group is
    /// created by the first join; a group of another type is GROUP_ID_NOT_FOUND, as Kafka
    /// answers. A new group epoch is stored, so that epochs never go back across restarts.
    pub fn share_heartbeat(
        &self,
        group_id: &str,
        hb: ShareHeartbeat,
        topics: &dyn TopicView,
        settings: &ShareGroupConfig,
    ) -> Result<ShareHeartbeatAnswer, Refusal> {
        self.check_coordinator(group_id).map_err(|error| Refusal {
            error,
            message: String::new(),
        })?;
        let now = now_ms();
        let joining = hb.member_epoch == 0;
        let member_id = hb.member_id.clone();
        let answer = self.with_group(group_id, joining, |g| {
            let before = g.share().map(|s| s.epoch);
            let Some(share) = g.share_mut(joining) else {
                return Err(Refusal {
                    error: ResponseError::GroupIdNotFound,
                    message: format!("Group {group_id} is not a share group."),
                });
            };
            let answer = share.heartbeat(group_id, hb, topics, settings, now)?;
            Ok((answer, (before != Some(share.epoch)).then_some(share.epoch)))
        });
        let (answer, new_epoch) = match answer {
            Some(a) => a?,
            // A heartbeat of a member the coordinator does not know (it restarted, or the
            // group moved here): the member rejoins, as after a fence.
            None => {
                return Err(Refusal {
                    error: ResponseError::UnknownMemberId,
                    message: format!("Member {member_id} is not a member of group {group_id}."),
                })
            }
        };
        if let Some(epoch) = new_epoch {
            // Best effort: the epoch is in memory already, and members are not stored.
            let _ = self.store(
                group_id,
                &[(share_group_key(group_id), Some(share_group_value(epoch)))],
            );
        }
        Ok(answer)
    }

    /// Removes the share-group members silent for longer than the session timeout.
    pub(super) fn expire_share_members(&self) {
        let now = now_ms();
        let mut groups = self.groups.lock();
        for g in groups.values_mut() {
            let id = g.id().to_string();
            let Some(share) = g.share_mut(false) else {
                continue;
            };
            if share.members.is_empty() {
                continue;
            }
            let gone = share.expire(now);
            if !gone.is_empty() {
                tracing::info!(group = %id, members = ?gone, "share group members expired");
            }
        }
    }
}
