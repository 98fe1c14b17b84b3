//! The broker side of the seam to `mirror/`: how the mirror reaches partitions, the high
//! watermark, producer ids and the group coordinator.

use std::sync::Arc;

use parking_lot::Mutex;
use tern_controller::Controller;
use tern_mirror::{LeaderReplica, MirrorHost};

use crate::group_coordinator::offsets_topic::OffsetValue;
use crate::group_coordinator::{now_ms, GroupCoordinator};
use crate::replica_manager::ReplicaManager;

/// [`MirrorHost`] over this broker's replica manager, controller and group coordinator.
pub struct BrokerMirrorHost {
    /// This broker's id.
    pub node_id: i32,
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

    fn leader_replica(&self, topic: &str, partition: i32) -> Option<LeaderReplica> {
        let p = self.replicas.partition(topic, partition)?;
        p.is_leader().then(|| LeaderReplica {
            log: p.log.clone(),
            leader_epoch: p.leader_epoch(),
        })
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

    fn sync_group_offsets(&self, group: &str, offsets: Vec<(String, i32, i64, Option<String>)>) {
        let changed: Vec<(String, i32, OffsetValue)> = {
            let current = self
                .groups
                .with_group(group, false, |g| g.offsets.clone())
                .unwrap_or_default();
            offsets
                .into_iter()
                .filter(|(t, p, o, _)| current.get(&(t.clone(), *p)).map(|v| v.offset) != Some(*o))
                .map(|(t, p, o, m)| {
                    (
                        t,
                        p,
                        OffsetValue {
                            offset: o,
                            leader_epoch: -1,
                            metadata: m.unwrap_or_default(),
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
        match self.groups.commit_offsets(group, "", None, -1, changed) {
            Ok(_) => tracing::debug!(group, "synced group offsets from the mirror source"),
            Err(e) => tracing::debug!(group, error = ?e, "group offsets not synced"),
        }
    }
}
