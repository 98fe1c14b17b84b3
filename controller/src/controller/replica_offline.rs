//! A leader whose replica of a partition an I/O error took offline hands the partition to
//! another in-sync replica, as Kafka's controller moves leadership off a failed log dir
//! (KIP-858): the old leader leaves the ISR, and its replica stays out until it catches up
//! again after a restart.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use tern_protocol::error::{ApiError, ResponseError};
use uuid::Uuid;

use super::partitions::{elect_from_isr, partition_record};
use super::{unexpected, Controller};
use crate::commands::{Command, Reply};

/// A leader's report that its replica of a partition is offline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaOffline {
    /// The leader reporting.
    pub broker_id: i32,
    /// Topic id.
    pub topic_id: Uuid,
    /// Partition index.
    pub partition: i32,
    /// The leader epoch it leads at.
    pub leader_epoch: i32,
}

impl Controller {
    /// Moves the partition's leadership to the first live ISR member in replica order other
    /// than the reporting leader, which leaves the ISR; answers the leader now. With no other
    /// live in-sync replica nothing changes (the old leader keeps serving what its log can still
    /// read): the answer is the reporter itself. NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH
    /// when the reporter no longer leads at that epoch.
    pub fn replica_offline(&self, report: ReplicaOffline) -> Result<i32, ApiError> {
        match self.submit(Command::ReplicaOffline(report))? {
            Reply::Leader(leader) => Ok(leader),
            other => Err(unexpected(other)),
        }
    }

    pub(super) fn do_replica_offline(&self, r: &ReplicaOffline) -> Result<i32, ApiError> {
        let image = self.image();
        let p = image
            .topics
            .get(&r.topic_id)
            .and_then(|t| t.partitions.get(&r.partition))
            .ok_or_else(|| {
                ApiError::new(
                    ResponseError::UnknownTopicOrPartition,
                    format!("unknown partition {}-{}", r.topic_id, r.partition),
                )
            })?;
        if p.leader != r.broker_id {
            return Err(ApiError::new(
                ResponseError::NotLeaderOrFollower,
                format!("broker {} does not lead this partition", r.broker_id),
            ));
        }
        if r.leader_epoch != p.leader_epoch {
            return Err(ApiError::new(
                ResponseError::FencedLeaderEpoch,
                format!(
                    "leader epoch {} is not the current {}",
                    r.leader_epoch, p.leader_epoch
                ),
            ));
        }
        let live: BTreeSet<i32> = image
            .live_brokers()
            .into_iter()
            .filter(|b| *b != r.broker_id)
            .collect();
        let isr: Vec<i32> = p
            .isr
            .iter()
            .copied()
            .filter(|b| *b != r.broker_id)
            .collect();
        let leader = elect_from_isr(p, &isr, &live);
        if leader == -1 {
            return Ok(r.broker_id);
        }
        self.commit(vec![partition_record(
            r.topic_id,
            r.partition,
            p,
            isr,
            leader,
            p.leader_epoch + 1,
        )])?;
        Ok(leader)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offline_leader_hands_over_to_the_next_in_sync_replica() {
        let dir = tempfile::tempdir().unwrap();
        let c = crate::controller::acl_tests::open(dir.path());
        for b in 1..=3 {
            c.register_broker(crate::BrokerRegistration {
                broker_id: b,
                incarnation_id: Uuid::new_v4(),
                endpoints: vec![],
                rack: None,
            })
            .unwrap();
        }
        let create = |name: &str, replicas: Vec<i32>| {
            c.create_topic(
                &crate::CreateTopic {
                    name: name.into(),
                    num_partitions: -1,
                    replication_factor: -1,
                    assignments: vec![replicas],
                    ..Default::default()
                },
                false,
            )
            .unwrap()
        };
        let topic_id = create("t", vec![2, 3, 1]);
        let p = c.image().topics[&topic_id].partitions[&0].clone();
        assert_eq!((p.leader, p.isr.clone()), (2, vec![2, 3, 1]));
        let report = |broker: i32, leader_epoch: i32| ReplicaOffline {
            broker_id: broker,
            topic_id,
            partition: 0,
            leader_epoch,
        };
        // Only the leader, at its epoch, may report.
        let err = |r: Result<i32, ApiError>| r.unwrap_err().error;
        assert_eq!(
            err(c.replica_offline(report(3, p.leader_epoch))),
            ResponseError::NotLeaderOrFollower
        );
        assert_eq!(
            err(c.replica_offline(report(2, p.leader_epoch - 1))),
            ResponseError::FencedLeaderEpoch
        );
        assert_eq!(c.replica_offline(report(2, p.leader_epoch)), Ok(3));
        let now = c.image().topics[&topic_id].partitions[&0].clone();
        assert_eq!((now.leader, now.isr), (3, vec![3, 1]));
        assert_eq!(now.leader_epoch, p.leader_epoch + 1);
        assert_eq!(now.partition_epoch, p.partition_epoch + 1);

        // Alone in the ISR: nothing moves, the reporter stays leader.
        let alone = create("alone", vec![1]);
        let p = c.image().topics[&alone].partitions[&0].clone();
        let report = ReplicaOffline {
            broker_id: 1,
            topic_id: alone,
            partition: 0,
            leader_epoch: p.leader_epoch,
        };
        assert_eq!(c.replica_offline(report), Ok(1));
        let after = c.image().topics[&alone].partitions[&0].clone();
        assert_eq!(
            (after.leader, after.isr, after.leader_epoch),
            (p.leader, p.isr, p.leader_epoch)
        );
    }
}
