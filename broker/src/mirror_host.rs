//! The broker side of the seam to `mirror/`: how the mirror reaches partitions, the high
//! watermark, producer ids and the group coordinator.

use std::sync::Arc;

use parking_lot::Mutex;
use tern_controller::Controller;
use tern_mirror::{CommittedOffset, LeaderReplica, MirrorHost, RaiseEpochError};

use kafka_protocol::messages::alter_share_group_offsets_request::{
    AlterShareGroupOffsetsRequestPartition, AlterShareGroupOffsetsRequestTopic,
};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, GroupId, OffsetCommitRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use tern_protocol::client::KafkaConnection;
use tern_protocol::error::ResponseError;

use crate::group_coordinator::offsets_topic::OffsetValue;
use crate::group_coordinator::{now_ms, GroupCoordinator};
use crate::group_coordinator::{Committer, ShareOffsetChange};
use crate::replica_manager::ReplicaManager;

/// [`MirrorHost`] over this broker's replica manager, controller and group coordinator.
pub(crate) struct BrokerMirrorHost {
    /// This broker's id.
    pub node_id: i32,
    /// The listener brokers reach each other on (`inter.broker.listener.name`).
    pub listener: String,
    /// Hosted partitions.
    pub replicas: Arc<ReplicaManager>,
    /// The controller.
    pub controller: Arc<Controller>,
    /// Consumer groups.
    pub groups: Arc<GroupCoordinator>,
    /// The broker's cached block of producer ids (first unused, end).
    pub producer_ids: Arc<Mutex<(i64, i64)>>,
}

impl MirrorHost for BrokerMirrorHost {
    fn node_id(&self) -> i32 {
        self.node_id
    }

    fn broker_endpoint(&self, node_id: i32) -> Option<(String, u16)> {
        let image = self.controller.image();
        let broker = image.brokers.get(&node_id)?;
        let (host, port) = broker.endpoint(&self.listener);
        Some((host.to_string(), port))
    }

    fn leader_replica(&self, topic: &str, partition: i32) -> Option<LeaderReplica> {
        let p = self.replicas.partition(topic, partition)?;
        p.is_leader().then(|| LeaderReplica {
            log: p.log.clone(),
            leader_epoch: p.leader_epoch(),
        })
    }

    fn watch_high_watermark(
        &self,
        topic: &str,
        partition: i32,
    ) -> Option<tokio::sync::watch::Receiver<i64>> {
        let p = self.replicas.partition(topic, partition)?;
        p.is_leader().then(|| p.watch_high_watermark())
    }

    fn on_mirror_append(&self, topic: &str, partition: i32) {
        if let Some(p) = self.replicas.partition(topic, partition) {
            p.on_local_append();
        }
    }

    fn on_log_reset(&self, topic: &str, partition: i32) {
        if let Some(p) = self.replicas.partition(topic, partition) {
            p.reset_high_watermark(p.log.log_end_offset());
        }
    }

    fn followers_end_at_or_below(&self, topic: &str, partition: i32, offset: i64) -> bool {
        self.replicas
            .partition(topic, partition)
            .is_some_and(|p| p.with_state(|s| s.isr_ends_at_or_below(offset)))
    }

    fn raise_leader_epoch(
        &self,
        topic: &str,
        partition: i32,
        at_least: i32,
    ) -> Result<(), RaiseEpochError> {
        let topic_id = self
            .controller
            .image()
            .topic(topic)
            .map(|t| t.id)
            .ok_or_else(|| RaiseEpochError::UnknownTopic(topic.to_string()))?;
        crate::blocking::disk_io(|| {
            self.controller
                .raise_leader_epoch(topic_id, partition, at_least)
        })
        .map_err(RaiseEpochError::from)
    }

    fn reserve_producer_ids_above(&self, max_id: i64) {
        let floor = max_id.saturating_add(1);
        if let Err(e) = self.controller.ensure_producer_id_floor(floor) {
            tracing::error!(error = %e, "cannot reserve producer ids above mirrored ones");
        }
        // Drop a cached block that reaches below the floor: the next id comes from above it.
        let mut ids = self.producer_ids.lock();
        if ids.0 < floor {
            *ids = (0, 0);
        }
    }

    fn sync_group_offsets(&self, group: &str, offsets: Vec<CommittedOffset>) {
        if self.groups.check_coordinator(group) == Err(ResponseError::NotCoordinator) {
            self.commit_at_coordinator(group, offsets);
            return;
        }
        let changed: Vec<(String, i32, OffsetValue)> = {
            let current = self
                .groups
                .with_group(group, false, |g| g.offsets().clone())
                .unwrap_or_default();
            offsets
                .into_iter()
                .filter(|c| {
                    current
                        .get(&(c.topic.clone(), c.partition))
                        .map(|v| (v.offset, v.leader_epoch))
                        != Some((c.offset, c.leader_epoch))
                })
                .map(|c| {
                    (
                        c.topic,
                        c.partition,
                        OffsetValue {
                            offset: c.offset,
                            leader_epoch: c.leader_epoch,
                            metadata: c.metadata.unwrap_or_default(),
                            commit_timestamp: now_ms(),
                        },
                    )
                })
                .collect()
        };
        if changed.is_empty() {
            return;
        }
        // A standalone commit: refused while the group has members here (it is active on
        // this cluster, so its own commits win).
        match self.groups.commit_offsets(group, Committer::NONE, changed) {
            Ok(_) => tracing::debug!(group, "synced group offsets from the mirror source"),
            Err(e) => tracing::debug!(group, error = ?e, "group offsets not synced"),
        }
    }

    fn sync_share_group_offsets(&self, group: &str, offsets: Vec<CommittedOffset>) {
        if self.groups.check_coordinator(group) == Err(ResponseError::NotCoordinator) {
            self.share_offsets_at_coordinator(group, offsets);
            return;
        }
        let current = self
            .groups
            .with_group(group, false, |g| g.share().map(|s| s.start_offsets.clone()))
            .flatten()
            .unwrap_or_default();
        let changed: Vec<ShareOffsetChange> = offsets
            .into_iter()
            .filter(|c| {
                current
                    .get(&(c.topic.clone(), c.partition))
                    .map(|s| (s.offset, s.leader_epoch))
                    != Some((c.offset, c.leader_epoch))
            })
            .map(|c| (c.topic, c.partition, c.offset, c.leader_epoch))
            .collect();
        if changed.is_empty() {
            return;
        }
        match self.groups.alter_share_offsets(group, changed) {
            Ok(()) => tracing::debug!(group, "synced share group offsets from the mirror source"),
            Err(r) => tracing::debug!(group, error = %r.message, "share group offsets not synced"),
        }
    }
}

/// How long a synced commit sent to another broker may take.
const REMOTE_COMMIT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

impl BrokerMirrorHost {
    /// Sends synced offsets to the broker that coordinates the group, as a standalone
    /// OffsetCommit (generation -1, no member): refused there too while the group is active.
    fn commit_at_coordinator(&self, group: &str, offsets: Vec<CommittedOffset>) {
        let Some((leader, endpoint)) = self.coordinator_endpoint(group) else {
            return;
        };
        let mut by_topic: std::collections::BTreeMap<String, Vec<OffsetCommitRequestPartition>> =
            Default::default();
        for c in offsets {
            by_topic.entry(c.topic).or_default().push(
                OffsetCommitRequestPartition::default()
                    .with_partition_index(c.partition)
                    .with_committed_offset(c.offset)
                    .with_committed_leader_epoch(c.leader_epoch)
                    .with_committed_metadata(c.metadata.map(StrBytes::from_string)),
            );
        }
        let request = OffsetCommitRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(
                by_topic
                    .into_iter()
                    .map(|(t, ps)| {
                        OffsetCommitRequestTopic::default()
                            .with_name(TopicName(StrBytes::from_string(t)))
                            .with_partitions(ps)
                    })
                    .collect(),
            );
        self.send_to_coordinator(group, leader, endpoint, request, 8);
    }

    /// Sends synced share-group start offsets to the broker that coordinates the group, as
    /// AlterShareGroupOffsets.
    fn share_offsets_at_coordinator(&self, group: &str, offsets: Vec<CommittedOffset>) {
        let Some((leader, endpoint)) = self.coordinator_endpoint(group) else {
            return;
        };
        let mut by_topic: std::collections::BTreeMap<
            String,
            Vec<AlterShareGroupOffsetsRequestPartition>,
        > = Default::default();
        for c in offsets {
            by_topic.entry(c.topic).or_default().push(
                AlterShareGroupOffsetsRequestPartition::default()
                    .with_partition_index(c.partition)
                    .with_start_offset(c.offset),
            );
        }
        let request = AlterShareGroupOffsetsRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
            .with_topics(
                by_topic
                    .into_iter()
                    .map(|(t, ps)| {
                        AlterShareGroupOffsetsRequestTopic::default()
                            .with_topic_name(TopicName(StrBytes::from_string(t)))
                            .with_partitions(ps)
                    })
                    .collect(),
            );
        self.send_to_coordinator(group, leader, endpoint, request, 0);
    }

    /// The broker coordinating `group` when it is another one, and its endpoint.
    fn coordinator_endpoint(&self, group: &str) -> Option<(i32, (String, u16))> {
        let Some(leader) = self
            .groups
            .coordinator_in(&self.controller.image(), group)
            .filter(|&l| l >= 0 && l != self.node_id)
        else {
            tracing::debug!(
                group,
                "group offsets not synced: its coordinator is not available"
            );
            return None;
        };
        Some((leader, self.broker_endpoint(leader)?))
    }

    /// Sends `request` to the group's coordinator `leader` in the background; the outcome is
    /// logged (the next sync pass tries again).
    fn send_to_coordinator<R>(
        &self,
        group: &str,
        leader: i32,
        (host, port): (String, u16),
        request: R,
        version: i16,
    ) where
        R: kafka_protocol::protocol::Request + Send + Sync + 'static,
        R::Response: Send,
    {
        let client_id = format!("tern-mirror-offsets-{}", self.node_id);
        let group = group.to_string();
        tokio::spawn(async move {
            let result = tokio::time::timeout(REMOTE_COMMIT_TIMEOUT, async {
                let mut conn = KafkaConnection::connect((host.as_str(), port), &client_id)
                    .await
                    .map_err(|e| e.to_string())?;
                conn.send(&request, version)
                    .await
                    .map_err(|e| e.to_string())
            })
            .await;
            match result {
                Ok(Ok(_)) => {
                    tracing::debug!(%group, coordinator = leader, "synced group offsets at its coordinator")
                }
                Ok(Err(e)) => tracing::debug!(%group, error = %e, "group offsets not synced"),
                Err(_) => {
                    tracing::debug!(%group, "group offsets not synced: the coordinator did not answer in time")
                }
            }
        });
    }
}
