//! Replicas an I/O error took offline are reported to the controller, as Kafka reports a failed
//! log dir: a leader hands the partition to another in-sync replica, so producers and consumers
//! go on there, and a follower leaves the ISR at once, so acks=all writes do not wait
//! `replica.lag.time.max.ms` for it. This broker's copy waits for a restart.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tern_controller::{Controller, ReplicaOffline};
use tokio::sync::watch;

use crate::replica_manager::ReplicaManager;

/// How often the broker looks for an offline replica of its own.
const CHECK_INTERVAL: Duration = Duration::from_millis(500);

/// Runs until `shutdown` fires. A partition is reported once per (leader epoch, partition
/// epoch): again after its ISR changes, when another replica may have caught up.
pub(crate) fn spawn(
    node_id: i32,
    replicas: Arc<ReplicaManager>,
    controller: Arc<Controller>,
    mut shutdown: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut reported: HashMap<(String, i32), (i32, i32)> = HashMap::new();
        loop {
            tokio::select! {
                _ = tokio::time::sleep(CHECK_INTERVAL) => {}
                _ = shutdown.changed() => return,
            }
            let mut reports = Vec::new();
            for p in replicas.all_partitions() {
                if !p.log.is_offline() || !(p.is_leader() || p.in_sync(node_id)) {
                    continue;
                }
                let a = p.assignment();
                let key = (p.topic.clone(), p.index);
                if reported.get(&key) == Some(&(a.leader_epoch, a.partition_epoch)) {
                    continue;
                }
                reported.insert(key, (a.leader_epoch, a.partition_epoch));
                reports.push((
                    p.clone(),
                    ReplicaOffline {
                        broker_id: node_id,
                        topic_id: p.topic_id,
                        partition: p.index,
                        leader_epoch: a.leader_epoch,
                    },
                ));
            }
            if reports.is_empty() {
                continue;
            }
            let controller = controller.clone();
            // Controller calls block (they may wait for the quorum).
            let refused = tokio::task::spawn_blocking(move || {
                let mut refused = Vec::new();
                for (p, report) in reports {
                    match controller.replica_offline(report) {
                        Ok(leader) if leader == node_id => tracing::warn!(
                            topic = %p.topic, partition = p.index,
                            "this replica is offline and no other in-sync replica is live: it stays leader, refusing writes"
                        ),
                        Ok(leader) if p.is_leader() => tracing::warn!(
                            topic = %p.topic, partition = p.index, leader,
                            "this replica is offline: leadership moved to another in-sync replica"
                        ),
                        Ok(leader) => tracing::warn!(
                            topic = %p.topic, partition = p.index, leader,
                            "this replica is offline: it left the ISR"
                        ),
                        Err(e) => {
                            tracing::info!(
                                topic = %p.topic, partition = p.index, error = %e,
                                "reporting the offline replica failed; retrying"
                            );
                            refused.push((p.topic.clone(), p.index));
                        }
                    }
                }
                refused
            })
            .await
            .unwrap_or_default();
            // A controller moving or a report racing new metadata: ask again next round.
            for key in refused {
                reported.remove(&key);
            }
        }
    })
}
