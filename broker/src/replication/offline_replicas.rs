//! Replicas an I/O error took offline are reported to the controller, as Kafka reports a failed
//! log dir: a leader hands the partition to another in-sync replica, so producers and consumers
//! go on there, and a follower leaves the ISR at once, so acks=all writes do not wait
//! `replica.lag.time.max.ms` for it. The controller keeps the replica out of elections and the
//! ISR until this broker restarts.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tern_controller::{Controller, ReplicaOffline};
use tern_protocol::error::ResponseError;
use tokio::sync::watch;
use uuid::Uuid;

use crate::replica_manager::ReplicaManager;

/// How often the broker looks for an offline replica of its own.
const CHECK_INTERVAL: Duration = Duration::from_millis(500);

/// What a round tells the controller about one partition: (leader epoch, partition epoch) of
/// the view reported, so a partition is reported again once its leadership or ISR changes.
type Reported = HashMap<(Uuid, i32), (i32, i32)>;

/// Runs until `shutdown` fires; `incarnation_id` is this process's registration.
pub(crate) fn spawn(
    node_id: i32,
    incarnation_id: Uuid,
    replicas: Arc<ReplicaManager>,
    controller: Arc<Controller>,
    mut shutdown: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut reported = Reported::new();
        loop {
            tokio::select! {
                _ = tokio::time::sleep(CHECK_INTERVAL) => {}
                _ = shutdown.changed() => return,
            }
            let reports = to_report(node_id, incarnation_id, &replicas, &mut reported);
            if reports.is_empty() {
                continue;
            }
            let controller = controller.clone();
            let stopping = shutdown.clone();
            // Controller calls block (they may wait for the quorum).
            let retry =
                tokio::task::spawn_blocking(move || send(node_id, &controller, reports, &stopping))
                    .await
                    .unwrap_or_default();
            for key in retry {
                reported.remove(&key);
            }
        }
    })
}

/// The offline replicas of this broker not reported at their current epochs (every one: the
/// controller keeps even an out-of-sync one out of unclean elections); forgets partitions no
/// longer offline here.
fn to_report(
    node_id: i32,
    incarnation_id: Uuid,
    replicas: &ReplicaManager,
    reported: &mut Reported,
) -> Vec<Report> {
    let offline: Vec<_> = replicas
        .all_partitions()
        .into_iter()
        // A failed log, not one closed at shutdown or deleted with its partition.
        .filter(|p| p.log.has_failed())
        .collect();
    reported.retain(|key, _| offline.iter().any(|p| (p.topic_id, p.index) == *key));
    let mut reports = Vec::new();
    for p in offline {
        let a = p.assignment();
        let view = (a.leader_epoch, a.partition_epoch);
        if reported.insert((p.topic_id, p.index), view) == Some(view) {
            continue;
        }
        let report = ReplicaOffline {
            broker_id: node_id,
            incarnation_id,
            topic_id: p.topic_id,
            partition: p.index,
            leader_epoch: a.leader_epoch,
        };
        let led = p.is_leader();
        reports.push(Report {
            partition: p,
            report,
            led,
        });
    }
    reports
}

/// One offline replica to report, and whether this broker led it when the report was made
/// (the answer comes after new metadata may have arrived).
struct Report {
    partition: Arc<crate::replica_manager::Partition>,
    report: ReplicaOffline,
    led: bool,
}

/// Sends the reports one by one until `stopping`; answers those to send again next round (the
/// controller was unreachable or moving; a report refused for a stale view waits for the new
/// one).
fn send(
    node_id: i32,
    controller: &Controller,
    reports: Vec<Report>,
    stopping: &watch::Receiver<bool>,
) -> Vec<(Uuid, i32)> {
    let mut retry = Vec::new();
    for Report {
        partition: p,
        report,
        led,
    } in reports
    {
        let key = (p.topic_id, p.index);
        if *stopping.borrow() {
            retry.push(key);
            continue;
        }
        match controller.replica_offline(report) {
            Ok(leader) if leader == node_id => tracing::warn!(
                topic = %p.topic, partition = p.index,
                "this replica is offline and no other in-sync replica is live: it stays leader, refusing writes"
            ),
            Ok(leader) if led => tracing::warn!(
                topic = %p.topic, partition = p.index, leader,
                "this replica is offline: leadership moved to another in-sync replica"
            ),
            Ok(leader) => tracing::warn!(
                topic = %p.topic, partition = p.index, leader,
                "this replica is offline: out of the ISR and of elections until a restart"
            ),
            Err(e)
                if matches!(
                    e.error,
                    ResponseError::NotLeaderOrFollower
                        | ResponseError::FencedLeaderEpoch
                        | ResponseError::UnknownTopicOrPartition
                ) =>
            {
                tracing::debug!(
                    topic = %p.topic, partition = p.index, error = %e,
                    "offline replica report refused; waiting for newer metadata"
                )
            }
            Err(e) => {
                tracing::info!(
                    topic = %p.topic, partition = p.index, error = %e,
                    "reporting the offline replica failed; retrying"
                );
                retry.push(key);
            }
        }
    }
    retry
}
