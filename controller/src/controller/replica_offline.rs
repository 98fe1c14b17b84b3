//! A broker whose replica of a partition an I/O error took offline leaves the ISR at once, and
//! as leader hands the partition to another in-sync replica, as Kafka's controller does for a
//! failed log dir (KIP-858); the replica stays out until it catches up again after a restart.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use tern_protocol::error::{ApiError, ResponseError};
use uuid::Uuid;

use super::brokers::current_registration;
use super::partitions::{elect_from_isr, elect_unclean, partition_record, unclean_allowed};
use super::{unexpected, Controller};
use crate::commands::{Command, Reply};
use crate::records::MetadataRecord;

/// A replica's report that its copy of a partition is offline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaOffline {
    /// The broker reporting.
    pub broker_id: i32,
    /// Its process (registration incarnation): a report from a process since replaced is
    /// refused, so it cannot mark the new process's healthy replica offline.
    pub incarnation_id: Uuid,
    /// Topic id.
    pub topic_id: Uuid,
    /// Partition index.
    pub partition: i32,
    /// The leader epoch of its view of the partition.
    pub leader_epoch: i32,
}

impl Controller {
    /// Marks the reporting replica offline until its broker restarts (never elected, never
    /// added back to the ISR meanwhile) and takes it out of the ISR; if it leads, leadership
    /// moves to the first live ISR member in replica order other than it. Answers the leader
    /// now. A leader with no other live in-sync replica, or the ISR's last member, stays (the
    /// old leader keeps serving what its log can still read). NOT_LEADER_OR_FOLLOWER when the reporter is no replica,
    /// FENCED_LEADER_EPOCH when its view of the partition is from another leader epoch.
    pub fn replica_offline(&self, report: ReplicaOffline) -> Result<i32, ApiError> {
        match self.submit(Command::ReplicaOffline(report))? {
            Reply::Leader(leader) => Ok(leader),
            other => Err(unexpected(other)),
        }
    }

    pub(super) fn do_replica_offline(&self, r: &ReplicaOffline) -> Result<i32, ApiError> {
        let image = self.image();
        current_registration(&image, r.broker_id, r.incarnation_id)
            .map_err(|why| ApiError::new(ResponseError::StaleBrokerEpoch, why))?;
        let topic = image.topics.get(&r.topic_id);
        let p = topic
            .and_then(|t| t.partitions.get(&r.partition))
            .ok_or_else(|| {
                ApiError::new(
                    ResponseError::UnknownTopicOrPartition,
                    format!("unknown partition {}-{}", r.topic_id, r.partition),
                )
            })?;
        if !p.replicas.contains(&r.broker_id) {
            return Err(ApiError::new(
                ResponseError::NotLeaderOrFollower,
                format!("broker {} is not a replica of this partition", r.broker_id),
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
        let mut isr: Vec<i32> = p
            .isr
            .iter()
            .copied()
            .filter(|b| *b != r.broker_id)
            .collect();
        let mut leader = p.leader;
        let mut leader_epoch = p.leader_epoch;
        let unclean =
            topic.is_some_and(|t| unclean_allowed(&image, &t.name, self.unclean_default(&image)));
        if p.leader == r.broker_id {
            match elect_from_isr(p, &isr, &live) {
                -1 => match elect_unclean(p, &live).filter(|_| unclean) {
                    // The topic takes an out-of-sync replica over a failed leader.
                    Some((next, only)) => {
                        tracing::warn!(topic_id = %r.topic_id, partition = r.partition, leader = next, "unclean leader election: records only the failed replica had are gone");
                        (leader, leader_epoch, isr) = (next, p.leader_epoch + 1, only);
                    }
                    // Nobody to hand over to: it stays leader and in the ISR.
                    None => isr.clone_from(&p.isr),
                },
                next => (leader, leader_epoch) = (next, p.leader_epoch + 1),
            }
        } else if isr.is_empty() {
            isr.clone_from(&p.isr);
        }
        let mut records = Vec::new();
        if isr != p.isr || leader != p.leader {
            records.push(partition_record(
                r.topic_id,
                r.partition,
                p,
                isr,
                leader,
                leader_epoch,
            ));
        }
        if !p.offline.contains(&r.broker_id) {
            records.push(MetadataRecord::ReplicaOffline {
                topic_id: r.topic_id,
                partition: r.partition,
                broker_id: r.broker_id,
            });
        }
        if !records.is_empty() {
            self.commit(records)?;
        }
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
        let incarnations = crate::controller::acl_tests::register_brokers(&c, 3);
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
            incarnation_id: incarnations[broker as usize],
            topic_id,
            partition: 0,
            leader_epoch,
        };
        // Only a replica, at the current leader epoch, may report.
        let err = |r: Result<i32, ApiError>| r.unwrap_err().error;
        let other = create("other", vec![1]);
        assert_eq!(
            err(c.replica_offline(ReplicaOffline {
                topic_id: other,
                ..report(2, p.leader_epoch)
            })),
            ResponseError::NotLeaderOrFollower
        );
        assert_eq!(
            err(c.replica_offline(report(2, p.leader_epoch - 1))),
            ResponseError::FencedLeaderEpoch
        );
        // A process since replaced may not report.
        assert_eq!(
            err(c.replica_offline(ReplicaOffline {
                incarnation_id: Uuid::new_v4(),
                ..report(2, p.leader_epoch)
            })),
            ResponseError::StaleBrokerEpoch
        );
        // A follower leaves the ISR; the leader and its epoch stay.
        assert_eq!(c.replica_offline(report(1, p.leader_epoch)), Ok(2));
        let now = c.image().topics[&topic_id].partitions[&0].clone();
        assert_eq!((now.leader, now.isr.clone()), (2, vec![2, 3]));
        assert_eq!(now.leader_epoch, p.leader_epoch);
        assert_eq!(now.partition_epoch, p.partition_epoch + 1);
        // The leader hands over to the next in-sync replica in replica order.
        assert_eq!(c.replica_offline(report(2, p.leader_epoch)), Ok(3));
        let now = c.image().topics[&topic_id].partitions[&0].clone();
        assert_eq!((now.leader, now.isr.clone()), (3, vec![3]));
        assert_eq!(now.leader_epoch, p.leader_epoch + 1);
        assert_eq!(now.partition_epoch, p.partition_epoch + 2);
        assert_eq!(now.offline, vec![1, 2]);
        // The last member stays leader and in the ISR, its copy offline.
        assert_eq!(c.replica_offline(report(3, now.leader_epoch)), Ok(3));
        let last = c.image().topics[&topic_id].partitions[&0].clone();
        assert_eq!(
            (last.leader, last.isr, last.offline),
            (3, vec![3], vec![1, 2, 3])
        );
        // An offline replica is not taken back into the ISR.
        let err = c
            .alter_partition(crate::AlterPartition {
                broker_id: 3,
                topic_id,
                partition: 0,
                leader_epoch: last.leader_epoch,
                partition_epoch: last.partition_epoch,
                new_isr: vec![3, 1],
            })
            .unwrap_err();
        assert_eq!(err.error, ResponseError::IneligibleReplica);
        // A restart (a new incarnation) brings broker 1's replica back into play.
        let restart = |old: Uuid| {
            c.controlled_shutdown(1, old).unwrap();
            let new = Uuid::new_v4();
            c.register_broker(crate::BrokerRegistration {
                broker_id: 1,
                incarnation_id: new,
                endpoints: vec![],
                rack: None,
            })
            .unwrap();
            new
        };
        let incarnation = restart(incarnations[1]);
        assert_eq!(
            c.image().topics[&topic_id].partitions[&0].offline,
            vec![2, 3]
        );
        // A snapshot keeps what is offline.
        let image = c.image();
        let rebuilt = crate::MetadataImage::from_records(&image.to_records(), image.offset);
        assert_eq!(rebuilt.topics[&topic_id].partitions[&0].offline, vec![2, 3]);

        // Alone in the ISR: nothing moves, the reporter stays leader.
        let alone = create("alone", vec![1]);
        let p = c.image().topics[&alone].partitions[&0].clone();
        let report = ReplicaOffline {
            broker_id: 1,
            incarnation_id: incarnation,
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
        assert_eq!(after.offline, vec![1]);
        // Its only replica back after a restart, the partition has its leader again.
        let incarnation = restart(incarnation);
        let back = c.image().topics[&alone].partitions[&0].clone();
        assert_eq!((back.leader, back.offline), (1, vec![]));

        // A topic that allows unclean elections takes an out-of-sync replica over a failed
        // leader with no other in-sync one.
        let unclean = c
            .create_topic(
                &crate::CreateTopic {
                    name: "unclean".into(),
                    num_partitions: -1,
                    replication_factor: -1,
                    assignments: vec![vec![1, 2]],
                    configs: vec![(crate::topic_configs::UNCLEAN_ELECTION.into(), "true".into())],
                    ..Default::default()
                },
                false,
            )
            .unwrap();
        let p = c.image().topics[&unclean].partitions[&0].clone();
        c.alter_partition(crate::AlterPartition {
            broker_id: 1,
            topic_id: unclean,
            partition: 0,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            new_isr: vec![1],
        })
        .unwrap();
        let report = ReplicaOffline {
            broker_id: 1,
            incarnation_id: incarnation,
            topic_id: unclean,
            partition: 0,
            leader_epoch: p.leader_epoch,
        };
        assert_eq!(c.replica_offline(report), Ok(2));
        let now = c.image().topics[&unclean].partitions[&0].clone();
        assert_eq!((now.leader, now.isr, now.offline), (2, vec![2], vec![1]));
    }
}
