//! Leaders whose replica an I/O error took offline ask the controller to hand the partition to
//! another in-sync replica (Kafka moves leadership off a failed log dir), so producers and
//! consumers go on at the new leader while this broker's copy waits for a restart.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tern_controller::{Controller, ReplicaOffline};
use tokio::sync::watch;

use crate::replica_manager::ReplicaManager;

/// How often leaders look for an offline replica of their own.
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
                if !p.is_leader() || !p.log.is_offline() {
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
                        Ok(leader) => tracing::warn!(
                            topic = %p.topic, partition = p.index, leader,
                            "this replica is offline: leadership moved to another in-sync replica"
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
