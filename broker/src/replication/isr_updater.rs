//! The ISR updater: on every partition this broker leads, drops followers that have not caught
//! up for `replica.lag.time.max.ms` and adds back those that have, through the controller's
//! AlterPartition with the partition epoch the leader's view was taken at (Kafka's
//! `maybeShrinkIsr` / `maybeExpandIsr`). One change per partition is in flight at a time; the
//! new ISR counts once the metadata image carries it.

use std::sync::Arc;
use std::time::Duration;

use tern_controller::AlterPartition;
use tern_controller::Controller;
use tokio::sync::watch;

use crate::group_coordinator::now_ms;
use crate::metrics::Metrics;
use crate::replica_manager::ReplicaManager;

/// How often leaders look at their followers.
const CHECK_INTERVAL: Duration = Duration::from_millis(250);

/// Runs the updater until `shutdown` fires.
pub(crate) fn spawn(
    node_id: i32,
    replicas: Arc<ReplicaManager>,
    controller: Arc<Controller>,
    lag_time_max_ms: u64,
    metrics: Arc<Metrics>,
    mut shutdown: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(CHECK_INTERVAL) => {}
                _ = shutdown.changed() => return,
            }
            let now = now_ms();
            let mut changes = Vec::new();
            for p in replicas.all_partitions() {
                let hw = p.high_watermark();
                let change = p.with_state(|st| {
                    let new_isr = st
                        .isr_to_shrink(now, lag_time_max_ms as i64)
                        .or_else(|| st.isr_to_expand(hw, now, lag_time_max_ms as i64))?;
                    st.isr_change_pending = true;
                    let a = &st.assignment;
                    Some(AlterPartition {
                        broker_id: node_id,
                        topic_id: p.topic_id,
                        partition: p.index,
                        leader_epoch: a.leader_epoch,
                        partition_epoch: a.partition_epoch,
                        new_isr,
                    })
                });
                if let Some(c) = change {
                    changes.push((p, c));
                }
            }
            if changes.is_empty() {
                continue;
            }
            let controller = controller.clone();
            let metrics = metrics.clone();
            // Controller calls block (they may wait for the quorum).
            let _ = tokio::task::spawn_blocking(move || {
                for (p, change) in changes {
                    let old = p.assignment().isr;
                    let new_isr = change.new_isr.clone();
                    match controller.alter_partition(change) {
                        Ok((isr, epoch)) => {
                            metrics.isr_changed(old.len(), isr.len());
                            tracing::info!(
                                topic = %p.topic, partition = p.index, ?old, ?isr, partition_epoch = epoch,
                                "ISR changed"
                            )
                        }
                        Err(e) => {
                            tracing::info!(
                                topic = %p.topic, partition = p.index, ?old, wanted = ?new_isr, error = %e,
                                "ISR change refused; retrying from the next metadata"
                            );
                            p.with_state(|st| st.isr_change_pending = false);
                        }
                    }
                }
            })
            .await;
        }
    })
}
