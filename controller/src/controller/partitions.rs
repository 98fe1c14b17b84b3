//! Partition state on the active controller: ISR changes a leader asks for (Kafka's
//! AlterPartition), and leader election from the ISR when brokers are fenced or return.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use tern_protocol::error::{ApiError, ResponseError};
use uuid::Uuid;

use super::{unexpected, Controller};
use crate::commands::{Command, Reply};
use crate::image::{MetadataImage, PartitionInfo};
use crate::records::MetadataRecord;

/// A partition leader's request to change the ISR (Kafka's AlterPartition, one partition).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlterPartition {
    /// The leader asking.
    pub broker_id: i32,
    /// Topic id.
    pub topic_id: Uuid,
    /// Partition index.
    pub partition: i32,
    /// The leader epoch the leader holds.
    pub leader_epoch: i32,
    /// The partition epoch the leader's view was taken at.
    pub partition_epoch: i32,
    /// The ISR wanted.
    pub new_isr: Vec<i32>,
}

/// The partition's state once an AlterPartition was applied: (ISR, partition epoch).
pub(crate) type AlteredPartition = (Vec<i32>, i32);

impl Controller {
    /// Changes a partition's ISR as its leader asks; answers the state now committed.
    /// FENCED_LEADER_EPOCH / NOT_LEADER_OR_FOLLOWER if the asker no longer leads,
    /// INVALID_UPDATE_VERSION for a stale partition epoch, INELIGIBLE_REPLICA for a new member
    /// that is fenced or not a replica, as in Kafka.
    pub fn alter_partition(&self, request: AlterPartition) -> Result<AlteredPartition, ApiError> {
        match self.submit(Command::AlterPartition(request))? {
            Reply::Partition(isr, epoch) => Ok((isr, epoch)),
            other => Err(unexpected(other)),
        }
    }

    pub(super) fn do_alter_partition(
        &self,
        r: &AlterPartition,
    ) -> Result<AlteredPartition, ApiError> {
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
        if r.partition_epoch != p.partition_epoch {
            return Err(ApiError::new(
                ResponseError::InvalidUpdateVersion,
                format!(
                    "partition epoch {} is not the current {}",
                    r.partition_epoch, p.partition_epoch
                ),
            ));
        }
        if !r.new_isr.contains(&r.broker_id) {
            return Err(ApiError::new(
                ResponseError::InvalidRequest,
                "the leader must stay in the ISR",
            ));
        }
        let live: BTreeSet<i32> = image.live_brokers().into_iter().collect();
        for added in r.new_isr.iter().filter(|b| !p.isr.contains(b)) {
            if !p.replicas.contains(added) || !live.contains(added) {
                return Err(ApiError::new(
                    ResponseError::IneligibleReplica,
                    format!("replica {added} is not a live replica of the partition"),
                ));
            }
            if p.offline.contains(added) {
                return Err(ApiError::new(
                    ResponseError::IneligibleReplica,
                    format!("replica {added} is offline until its broker restarts"),
                ));
            }
        }
        // Keep the replicas' order, so the ISR reads the same on every broker.
        let isr: Vec<i32> = p
            .replicas
            .iter()
            .copied()
            .filter(|b| r.new_isr.contains(b))
            .collect();
        if isr == p.isr {
            return Ok((p.isr.clone(), p.partition_epoch));
        }
        let epoch = p.partition_epoch + 1;
        self.commit(vec![partition_record(
            r.topic_id,
            r.partition,
            p,
            isr.clone(),
            p.leader,
            p.leader_epoch,
        )])?;
        Ok((isr, epoch))
    }
}

impl Controller {
    /// Raises a partition's leader epoch to `at_least` (same leader and ISR) unless it is that
    /// high already. Mirror partitions keep the source's leader epochs in their batches, and
    /// their own epoch never below them, so epochs stay monotonic after a failover.
    pub fn raise_leader_epoch(
        &self,
        topic_id: Uuid,
        partition: i32,
        at_least: i32,
    ) -> Result<(), ApiError> {
        self.submit(Command::RaiseLeaderEpoch {
            topic_id,
            partition,
            at_least,
        })
        .map(|_| ())
    }

    pub(super) fn do_raise_leader_epoch(
        &self,
        topic_id: Uuid,
        partition: i32,
        at_least: i32,
    ) -> Result<(), ApiError> {
        let image = self.image();
        let p = image
            .topics
            .get(&topic_id)
            .and_then(|t| t.partitions.get(&partition))
            .ok_or_else(|| {
                ApiError::new(
                    ResponseError::UnknownTopicOrPartition,
                    format!("unknown partition {topic_id}-{partition}"),
                )
            })?;
        if p.leader_epoch >= at_least {
            return Ok(());
        }
        if p.leader < 0 {
            return Err(ApiError::new(
                ResponseError::LeaderNotAvailable,
                format!("partition {topic_id}-{partition} has no leader"),
            ));
        }
        self.commit(vec![partition_record(
            topic_id,
            partition,
            p,
            p.isr.clone(),
            p.leader,
            at_least,
        )])
    }
}

/// A Partition record for `p` with a new ISR and leader; the partition epoch is bumped.
pub(super) fn partition_record(
    topic_id: Uuid,
    partition: i32,
    p: &PartitionInfo,
    isr: Vec<i32>,
    leader: i32,
    leader_epoch: i32,
) -> MetadataRecord {
    MetadataRecord::Partition {
        topic_id,
        partition,
        replicas: p.replicas.clone(),
        isr,
        leader,
        leader_epoch,
        partition_epoch: p.partition_epoch + 1,
    }
}

/// The leader Kafka elects from an ISR: the first replica, in assignment order (the preferred
/// leader first), that is in the ISR and in `live`, and whose copy is not offline.
pub(super) fn elect_from_isr(p: &PartitionInfo, isr: &[i32], live: &BTreeSet<i32>) -> i32 {
    p.replicas
        .iter()
        .copied()
        .find(|r| isr.contains(r) && live.contains(r) && !p.offline.contains(r))
        .unwrap_or(-1)
}

/// With no live in-sync replica and unclean election allowed, the first live replica whose copy
/// is not offline leads and is the whole ISR: whatever only the old ISR had is lost (Kafka's
/// unclean election).
pub(super) fn elect_unclean(p: &PartitionInfo, live: &BTreeSet<i32>) -> Option<(i32, Vec<i32>)> {
    let leader = p
        .replicas
        .iter()
        .copied()
        .find(|r| live.contains(r) && !p.offline.contains(r))?;
    Some((leader, vec![leader]))
}

/// Whether `topic` may elect an out-of-sync replica: its `unclean.leader.election.enable`, else
/// the broker default.
pub(super) fn unclean_allowed(image: &MetadataImage, topic: &str, default: bool) -> bool {
    image
        .topic_configs(topic)
        .get(crate::topic_configs::UNCLEAN_ELECTION)
        .map_or(default, |v| v.trim().eq_ignore_ascii_case("true"))
}

/// Fencing `broker_id` (missed heartbeats, controlled shutdown, a new incarnation): it leaves
/// the ISR of every partition where another member remains (the last member stays, so the
/// partition keeps the one replica known to hold everything), and each partition it led gets
/// a leader elected from what remains of its ISR, or (`unclean_default` or the topic's
/// `unclean.leader.election.enable`) any live replica, or none (offline) until it returns.
pub(super) fn fence_records(
    image: &MetadataImage,
    broker_id: i32,
    unclean_default: bool,
) -> Vec<MetadataRecord> {
    let live: BTreeSet<i32> = image
        .live_brokers()
        .into_iter()
        .filter(|b| *b != broker_id)
        .collect();
    let mut records = vec![MetadataRecord::FenceBroker { broker_id }];
    for topic in image.topics.values() {
        for (&partition, p) in &topic.partitions {
            let in_isr = p.isr.contains(&broker_id);
            if !in_isr && p.leader != broker_id {
                continue;
            }
            let isr: Vec<i32> = if in_isr && p.isr.len() > 1 {
                p.isr.iter().copied().filter(|b| *b != broker_id).collect()
            } else {
                p.isr.clone()
            };
            let (mut isr, mut leader, leader_epoch) = (isr, p.leader, p.leader_epoch);
            let leader_epoch = if p.leader == broker_id {
                leader = elect_from_isr(p, &isr, &live);
                if leader == -1 && unclean_allowed(image, &topic.name, unclean_default) {
                    if let Some((l, i)) = elect_unclean(p, &live) {
                        tracing::warn!(topic = %topic.name, partition, leader = l, "unclean leader election: records only the lost ISR had are gone");
                        (leader, isr) = (l, i);
                    }
                }
                leader_epoch + 1
            } else {
                leader_epoch
            };
            records.push(partition_record(
                topic.id,
                partition,
                p,
                isr,
                leader,
                leader_epoch,
            ));
        }
    }
    records
}

/// A broker is back: it leads again each partition that has no leader and lists it in its ISR.
pub(super) fn elect_leaders_for_returning(
    image: &MetadataImage,
    broker_id: i32,
) -> Vec<MetadataRecord> {
    let mut records = Vec::new();
    for topic in image.topics.values() {
        for (&partition, p) in &topic.partitions {
            if p.leader >= 0 || !p.isr.contains(&broker_id) || p.offline.contains(&broker_id) {
                continue;
            }
            records.push(partition_record(
                topic.id,
                partition,
                p,
                p.isr.clone(),
                broker_id,
                p.leader_epoch + 1,
            ));
        }
    }
    records
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image_with(partition: PartitionInfo, brokers: &[(i32, bool)]) -> (MetadataImage, Uuid) {
        let mut image = MetadataImage::default();
        for &(id, fenced) in brokers {
            image.apply(&MetadataRecord::RegisterBroker {
                broker_id: id,
                host: "h".into(),
                port: 1,
                rack: None,
                endpoints: vec![],
                incarnation_id: None,
            });
            if fenced {
                image.apply(&MetadataRecord::FenceBroker { broker_id: id });
            }
        }
        let topic_id = Uuid::new_v4();
        image.apply(&MetadataRecord::Topic {
            name: "t".into(),
            topic_id,
        });
        image.apply(&MetadataRecord::Partition {
            topic_id,
            partition: 0,
            replicas: partition.replicas,
            isr: partition.isr,
            leader: partition.leader,
            leader_epoch: partition.leader_epoch,
            partition_epoch: partition.partition_epoch,
        });
        (image, topic_id)
    }

    fn after(image: &MetadataImage, records: &[MetadataRecord], id: Uuid) -> PartitionInfo {
        let mut image = image.clone();
        for r in records {
            image.apply(r);
        }
        image.topics[&id].partitions[&0].clone()
    }

    fn info(replicas: &[i32], isr: &[i32], leader: i32) -> PartitionInfo {
        PartitionInfo {
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            leader,
            leader_epoch: 3,
            partition_epoch: 7,
            adding: vec![],
            removing: vec![],
            offline: vec![],
        }
    }

    #[test]
    fn fencing_the_leader_elects_the_next_isr_member_in_replica_order() {
        let (image, id) = image_with(
            info(&[1, 2, 3], &[3, 1, 2], 1),
            &[(1, false), (2, false), (3, false)],
        );
        let p = after(&image, &fence_records(&image, 1, false), id);
        assert_eq!(p.leader, 2);
        assert_eq!(p.isr, vec![3, 2]);
        assert_eq!(p.leader_epoch, 4);
        assert_eq!(p.partition_epoch, 8);
    }

    #[test]
    fn fencing_a_follower_shrinks_the_isr_and_keeps_the_leader_epoch() {
        let (image, id) = image_with(
            info(&[1, 2, 3], &[1, 2, 3], 1),
            &[(1, false), (2, false), (3, false)],
        );
        let p = after(&image, &fence_records(&image, 3, false), id);
        assert_eq!((p.leader, p.leader_epoch), (1, 3));
        assert_eq!(p.isr, vec![1, 2]);
    }

    #[test]
    fn the_last_isr_member_stays_and_the_partition_goes_offline_until_it_returns() {
        let (image, id) = image_with(info(&[1, 2], &[1], 1), &[(1, false), (2, false)]);
        let fenced = fence_records(&image, 1, false);
        let p = after(&image, &fenced, id);
        assert_eq!((p.leader, p.isr.clone()), (-1, vec![1]));
        // Broker 2 is live but out of sync: it is not elected (no unclean election).
        let mut offline = image.clone();
        for r in &fenced {
            offline.apply(r);
        }
        assert!(elect_leaders_for_returning(&offline, 2).is_empty());
        let back = after(&offline, &elect_leaders_for_returning(&offline, 1), id);
        assert_eq!((back.leader, back.leader_epoch), (1, 5));
    }

    #[test]
    fn with_unclean_election_a_live_out_of_sync_replica_takes_over_alone() {
        let (mut image, id) = image_with(info(&[1, 2], &[1], 1), &[(1, false), (2, false)]);
        // The broker default allows it.
        let p = after(&image, &fence_records(&image, 1, true), id);
        assert_eq!((p.leader, p.isr.clone(), p.leader_epoch), (2, vec![2], 4));
        // The topic config decides over the broker default, either way.
        image.apply(&MetadataRecord::Config {
            resource_type: crate::records::ConfigResourceType::Topic,
            resource_name: "t".into(),
            name: crate::topic_configs::UNCLEAN_ELECTION.into(),
            value: Some("false".into()),
        });
        let p = after(&image, &fence_records(&image, 1, true), id);
        assert_eq!((p.leader, p.isr), (-1, vec![1]));
    }

    #[test]
    fn alter_partition_checks_leader_epochs_and_new_members() {
        let dir = tempfile::tempdir().unwrap();
        let c = crate::controller::acl_tests::open(dir.path());
        let incarnations = crate::controller::acl_tests::register_brokers(&c, 3);
        let topic_id = c
            .create_topic(
                &crate::CreateTopic {
                    name: "t".into(),
                    num_partitions: 1,
                    replication_factor: 3,
                    ..Default::default()
                },
                false,
            )
            .unwrap();
        let p = c.image().topics[&topic_id].partitions[&0].clone();
        let ask = |isr: &[i32], leader_epoch: i32, partition_epoch: i32, broker: i32| {
            c.alter_partition(AlterPartition {
                broker_id: broker,
                topic_id,
                partition: 0,
                leader_epoch,
                partition_epoch,
                new_isr: isr.to_vec(),
            })
        };
        let leader = p.leader;
        let other: Vec<i32> = p
            .replicas
            .iter()
            .copied()
            .filter(|r| *r != leader)
            .collect();
        let err = |r: Result<AlteredPartition, ApiError>| r.unwrap_err().error;
        assert_eq!(
            err(ask(&[leader], p.leader_epoch, p.partition_epoch, other[0])),
            ResponseError::NotLeaderOrFollower
        );
        assert_eq!(
            err(ask(
                &[leader],
                p.leader_epoch - 1,
                p.partition_epoch,
                leader
            )),
            ResponseError::FencedLeaderEpoch
        );
        assert_eq!(
            err(ask(
                &[leader],
                p.leader_epoch,
                p.partition_epoch + 1,
                leader
            )),
            ResponseError::InvalidUpdateVersion
        );
        assert_eq!(
            err(ask(&[other[0]], p.leader_epoch, p.partition_epoch, leader)),
            ResponseError::InvalidRequest
        );
        assert_eq!(
            c.image().topics[&topic_id].partitions[&0],
            p,
            "refusals change nothing"
        );

        let (isr, epoch) = ask(&[leader], p.leader_epoch, p.partition_epoch, leader).unwrap();
        assert_eq!((isr, epoch), (vec![leader], p.partition_epoch + 1));
        // A fenced broker cannot come back into the ISR; a live replica can.
        c.controlled_shutdown(other[0], incarnations[other[0] as usize])
            .unwrap();
        let now = c.image().topics[&topic_id].partitions[&0].clone();
        assert_eq!(
            err(ask(
                &[leader, other[0]],
                now.leader_epoch,
                now.partition_epoch,
                leader
            )),
            ResponseError::IneligibleReplica
        );
        let (isr, _) = ask(
            &[other[1], leader],
            now.leader_epoch,
            now.partition_epoch,
            leader,
        )
        .unwrap();
        let mut expected = vec![leader, other[1]];
        expected.sort_by_key(|b| now.replicas.iter().position(|r| r == b));
        assert_eq!(isr, expected);
    }
}
