//! Leader elections an operator asks for (ElectLeaders, and the automatic return of preferred
//! leaders), and partition reassignments (KIP-455): new replicas are added, catch up and join
//! the ISR through their leader, then the old ones are removed.

use std::collections::BTreeSet;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use tern_protocol::error::{ApiError, ResponseError};
use uuid::Uuid;

use super::partitions::{elect_from_isr, elect_unclean, partition_record, unclean_allowed};
use super::{unexpected, Controller};
use crate::commands::{Command, Reply, WireError};
use crate::image::{MetadataImage, PartitionInfo};
use crate::records::MetadataRecord;

/// A topic partition by name.
pub(crate) type TopicPartition = (String, i32);

/// Which leader an ElectLeaders asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ElectionType {
    /// The preferred replica (the first of the assignment), if it is live and in sync.
    Preferred,
    /// For a partition without a live leader: an in-sync replica if one is live, else any live
    /// replica (records only the lost ISR had are gone).
    Unclean,
}

/// Per-partition outcomes of a command, in request order.
pub(crate) type PartitionResults = Vec<(TopicPartition, Result<(), ApiError>)>;

/// The auto leader rebalance settings (`auto.leader.rebalance.enable`,
/// `leader.imbalance.check.interval.seconds`, `leader.imbalance.per.broker.percentage`).
#[derive(Debug, Clone)]
pub struct LeaderRebalance {
    /// Whether preferred leaders return on their own.
    pub enabled: bool,
    /// How often the imbalance is checked.
    pub check_interval: std::time::Duration,
    /// A broker's share of partitions it should lead but does not, above which they move back.
    pub imbalance_percentage: u32,
}

impl Default for LeaderRebalance {
    fn default() -> Self {
        LeaderRebalance {
            enabled: true,
            check_interval: std::time::Duration::from_secs(300),
            imbalance_percentage: 10,
        }
    }
}

fn to_wire(results: PartitionResults) -> Vec<(TopicPartition, Result<(), WireError>)> {
    results
        .into_iter()
        .map(|(tp, r)| (tp, r.map_err(WireError::from)))
        .collect()
}

fn from_wire(results: Vec<(TopicPartition, Result<(), WireError>)>) -> PartitionResults {
    results
        .into_iter()
        .map(|(tp, r)| (tp, r.map_err(ApiError::from)))
        .collect()
}

impl Controller {
    /// Elects leaders (all partitions when `partitions` is None); one outcome per partition.
    pub fn elect_leaders(
        &self,
        partitions: Option<Vec<TopicPartition>>,
        election: ElectionType,
    ) -> Result<PartitionResults, ApiError> {
        match self.submit(Command::ElectLeaders {
            partitions,
            election,
        })? {
            Reply::PartitionResults(r) => Ok(from_wire(r)),
            other => Err(unexpected(other)),
        }
    }

    /// Starts (target Some) or cancels (None) reassignments; one outcome per partition.
    pub fn alter_reassignments(
        &self,
        changes: Vec<(TopicPartition, Option<Vec<i32>>)>,
    ) -> Result<PartitionResults, ApiError> {
        match self.submit(Command::AlterReassignments { changes })? {
            Reply::PartitionResults(r) => Ok(from_wire(r)),
            other => Err(unexpected(other)),
        }
    }

    pub(super) fn do_elect_leaders(
        &self,
        partitions: &Option<Vec<TopicPartition>>,
        election: ElectionType,
    ) -> Result<Reply, ApiError> {
        let image = self.image();
        let live: BTreeSet<i32> = image.live_brokers().into_iter().collect();
        let wanted: Vec<(TopicPartition, Option<(Uuid, &PartitionInfo)>)> = match partitions {
            Some(list) => list
                .iter()
                .map(|tp| (tp.clone(), lookup(&image, tp)))
                .collect(),
            None => all_partitions(&image),
        };
        // For all partitions, Kafka answers every one except those that need no election.
        let all = partitions.is_none();
        let mut records = Vec::new();
        let mut results = Vec::with_capacity(wanted.len());
        for (tp, found) in wanted {
            let Some((topic_id, p)) = found else {
                results.push((
                    tp,
                    Err(ApiError::new(
                        ResponseError::UnknownTopicOrPartition,
                        "The partition does not exist.",
                    )),
                ));
                continue;
            };
            let outcome = match election {
                ElectionType::Preferred => elect_preferred(p, &live).map(|l| (l, p.isr.clone())),
                ElectionType::Unclean => elect_any(p, &live),
            };
            match outcome {
                Ok((leader, isr)) => {
                    if !p.isr.contains(&leader) {
                        tracing::warn!(topic = %tp.0, partition = tp.1, leader, "unclean leader election (ElectLeaders): records only the lost ISR had are gone");
                    }
                    records.push(partition_record(
                        topic_id,
                        tp.1,
                        p,
                        isr,
                        leader,
                        p.leader_epoch + 1,
                    ));
                    results.push((tp, Ok(())));
                }
                Err(e) if all && e.error == ResponseError::ElectionNotNeeded => {}
                Err(e) => results.push((tp, Err(e))),
            }
        }
        self.commit(records)?;
        Ok(Reply::PartitionResults(to_wire(results)))
    }

    pub(super) fn do_alter_reassignments(
        &self,
        changes: &[(TopicPartition, Option<Vec<i32>>)],
    ) -> Result<Reply, ApiError> {
        let image = self.image();
        let live: BTreeSet<i32> = image.live_brokers().into_iter().collect();
        let registered: BTreeSet<i32> = image.brokers.keys().copied().collect();
        let mut records = Vec::new();
        let mut results = Vec::with_capacity(changes.len());
        for (tp, target) in changes {
            let outcome = match lookup(&image, tp) {
                None => Err(ApiError::new(
                    ResponseError::UnknownTopicOrPartition,
                    "The partition does not exist.",
                )),
                Some((topic_id, p)) => match target {
                    Some(target) => reassign(topic_id, tp.1, p, target, &registered, &live),
                    None => cancel(topic_id, tp.1, p, &live),
                },
            };
            match outcome {
                Ok(rs) => {
                    records.extend(rs);
                    results.push((tp.clone(), Ok(())));
                }
                Err(e) => results.push((tp.clone(), Err(e))),
            }
        }
        self.commit(records)?;
        Ok(Reply::PartitionResults(to_wire(results)))
    }

    /// Completes reassignments whose new replicas are all in sync, and (when due) moves
    /// leadership back to preferred replicas of brokers that lead too few of theirs. Run by
    /// the active controller's housekeeping.
    pub(super) fn maintain_partitions(&self, now: Instant) {
        let image = self.image();
        let live: BTreeSet<i32> = image.live_brokers().into_iter().collect();
        let mut records = Vec::new();
        let unclean_default = self.unclean_default(&image);
        for topic in image.topics.values() {
            let unclean = unclean_allowed(&image, &topic.name, unclean_default);
            for (&partition, p) in &topic.partitions {
                if let Some(rs) = complete_reassignment(topic.id, partition, p, &live) {
                    records.extend(rs);
                } else if unclean && (p.leader == -1 || p.offline.contains(&p.leader)) {
                    // Offline with no in-sync replica back: the topic allows an out-of-sync one.
                    if let Ok((leader, isr)) = elect_any(p, &live) {
                        tracing::warn!(topic = %topic.name, partition, leader, "unclean leader election: records only the lost ISR had are gone");
                        records.push(partition_record(
                            topic.id,
                            partition,
                            p,
                            isr,
                            leader,
                            p.leader_epoch + 1,
                        ));
                    }
                }
            }
        }
        if !records.is_empty() {
            if let Err(e) = self.commit(records) {
                tracing::warn!(error = %e, "cannot complete partition reassignments");
            }
        }
        let due = self.config.leader_rebalance.enabled && {
            let mut last = self.last_rebalance_check.lock();
            match *last {
                // The first check comes one interval after this controller became active.
                None => {
                    *last = Some(now);
                    false
                }
                Some(t)
                    if now.saturating_duration_since(t)
                        >= self.config.leader_rebalance.check_interval =>
                {
                    *last = Some(now);
                    true
                }
                Some(_) => false,
            }
        };
        if due {
            let records = rebalance_records(
                &self.image(),
                self.config.leader_rebalance.imbalance_percentage,
            );
            if !records.is_empty() {
                tracing::info!(
                    partitions = records.len(),
                    "moving leadership back to preferred replicas"
                );
                if let Err(e) = self.commit(records) {
                    tracing::warn!(error = %e, "cannot elect preferred leaders");
                }
            }
        }
    }
}

fn lookup<'a>(image: &'a MetadataImage, tp: &TopicPartition) -> Option<(Uuid, &'a PartitionInfo)> {
    let topic = image.topic(&tp.0)?;
    topic.partitions.get(&tp.1).map(|p| (topic.id, p))
}

fn all_partitions(image: &MetadataImage) -> Vec<(TopicPartition, Option<(Uuid, &PartitionInfo)>)> {
    let mut all = Vec::new();
    for (name, id) in &image.topic_ids {
        if let Some(topic) = image.topics.get(id) {
            for (&index, p) in &topic.partitions {
                all.push(((name.clone(), index), Some((*id, p))));
            }
        }
    }
    all
}

/// The preferred replica is live, in sync and not offline, but does not lead.
fn preferred_leader_missing(p: &PartitionInfo, live: &BTreeSet<i32>) -> bool {
    p.replicas.first().is_some_and(|&r| {
        p.leader != r && p.isr.contains(&r) && live.contains(&r) && !p.offline.contains(&r)
    })
}

fn elect_preferred(p: &PartitionInfo, live: &BTreeSet<i32>) -> Result<i32, ApiError> {
    let Some(&preferred) = p.replicas.first() else {
        return Err(ApiError::new(
            ResponseError::PreferredLeaderNotAvailable,
            "The partition has no replicas.",
        ));
    };
    if p.leader == preferred {
        return Err(ApiError::new(
            ResponseError::ElectionNotNeeded,
            "Leader election not needed for topic partition.",
        ));
    }
    if !p.isr.contains(&preferred) || !live.contains(&preferred) || p.offline.contains(&preferred) {
        return Err(ApiError::new(
            ResponseError::PreferredLeaderNotAvailable,
            format!("Failed to elect leader: the preferred replica {preferred} is not live and in sync."),
        ));
    }
    Ok(preferred)
}

/// An unclean election request (Kafka's ElectLeaders UNCLEAN, whatever the topic config): a
/// partition with a live leader whose copy is not offline needs none; one without gets an
/// in-sync replica if one is live, else any live replica, which becomes the whole ISR.
fn elect_any(p: &PartitionInfo, live: &BTreeSet<i32>) -> Result<(i32, Vec<i32>), ApiError> {
    if p.leader >= 0 && live.contains(&p.leader) && !p.offline.contains(&p.leader) {
        return Err(ApiError::new(
            ResponseError::ElectionNotNeeded,
            "Leader election not needed for topic partition.",
        ));
    }
    match elect_from_isr(p, &p.isr, live) {
        -1 => elect_unclean(p, live).ok_or_else(|| {
            ApiError::new(
                ResponseError::EligibleLeadersNotAvailable,
                "No replica of the partition is live.",
            )
        }),
        leader => Ok((leader, p.isr.clone())),
    }
}

/// Starts a reassignment to `target` (KIP-455): the replicas become the target followed by
/// the current ones it drops; the new ones catch up as followers and join the ISR; the
/// reassignment completes in [`complete_reassignment`]. A new target replaces an ongoing one.
fn reassign(
    topic_id: Uuid,
    partition: i32,
    p: &PartitionInfo,
    target: &[i32],
    registered: &BTreeSet<i32>,
    live: &BTreeSet<i32>,
) -> Result<Vec<MetadataRecord>, ApiError> {
    let invalid = |m: String| Err(ApiError::new(ResponseError::InvalidReplicaAssignment, m));
    if target.is_empty() {
        return invalid("The replica list is empty.".into());
    }
    let mut seen = BTreeSet::new();
    for r in target {
        if !seen.insert(*r) {
            return invalid(format!("Duplicate replica {r} in the target assignment."));
        }
        if !registered.contains(r) {
            return invalid(format!("Replica {r} is not a registered broker."));
        }
    }
    if !p.reassigning() && p.replicas == target {
        return Ok(Vec::new());
    }
    // Start from the assignment before any ongoing reassignment: what was there and stays.
    let original = p.original_replicas();
    let adding: Vec<i32> = target
        .iter()
        .copied()
        .filter(|r| !original.contains(r))
        .collect();
    let removing: Vec<i32> = original
        .iter()
        .copied()
        .filter(|r| !target.contains(r))
        .collect();
    let mut replicas: Vec<i32> = target.to_vec();
    replicas.extend(removing.iter().copied());
    // Replicas an earlier target added and this one drops leave at once: they were never in
    // the original assignment.
    let isr: Vec<i32> = p
        .isr
        .iter()
        .copied()
        .filter(|r| replicas.contains(r))
        .collect();
    let mut next = p.clone();
    next.replicas = replicas;
    next.adding = adding;
    next.removing = removing;
    let isr = if isr.is_empty() { p.isr.clone() } else { isr };
    let leader = if isr.contains(&p.leader) {
        p.leader
    } else {
        elect_from_isr(&next, &isr, live)
    };
    let leader_epoch = if leader == p.leader {
        p.leader_epoch
    } else {
        p.leader_epoch + 1
    };
    let mut records = vec![
        MetadataRecord::PartitionReassignment {
            topic_id,
            partition,
            adding: next.adding.clone(),
            removing: next.removing.clone(),
        },
        MetadataRecord::Partition {
            topic_id,
            partition,
            replicas: next.replicas.clone(),
            isr,
            leader,
            leader_epoch,
            partition_epoch: p.partition_epoch + 1,
        },
    ];
    if let Some(done) = complete_reassignment(topic_id, partition, &applied(&next, &records), live)
    {
        records.extend(done);
    }
    Ok(records)
}

/// The partition after `records` (all for it) are applied.
fn applied(base: &PartitionInfo, records: &[MetadataRecord]) -> PartitionInfo {
    let mut p = base.clone();
    for r in records {
        if let MetadataRecord::Partition {
            replicas,
            isr,
            leader,
            leader_epoch,
            partition_epoch,
            ..
        } = r
        {
            p.replicas = replicas.clone();
            p.isr = isr.clone();
            p.leader = *leader;
            p.leader_epoch = *leader_epoch;
            p.partition_epoch = *partition_epoch;
        }
    }
    p
}

/// Cancels an ongoing reassignment: back to the original replicas, the added ones removed.
fn cancel(
    topic_id: Uuid,
    partition: i32,
    p: &PartitionInfo,
    live: &BTreeSet<i32>,
) -> Result<Vec<MetadataRecord>, ApiError> {
    if !p.reassigning() {
        return Err(ApiError::new(
            ResponseError::NoReassignmentInProgress,
            "No partition reassignment is in progress for this partition.",
        ));
    }
    let original = p.original_replicas();
    Ok(finish(topic_id, partition, p, original, live))
}

/// The records that end a reassignment with `replicas`: the ISR keeps its members among them,
/// and a leader outside them hands over to the first in-sync one.
fn finish(
    topic_id: Uuid,
    partition: i32,
    p: &PartitionInfo,
    replicas: Vec<i32>,
    live: &BTreeSet<i32>,
) -> Vec<MetadataRecord> {
    let mut isr: Vec<i32> = p
        .isr
        .iter()
        .copied()
        .filter(|r| replicas.contains(r))
        .collect();
    if isr.is_empty() {
        isr = p.isr.clone();
    }
    let mut next = p.clone();
    next.replicas = replicas.clone();
    let leader = if replicas.contains(&p.leader) && isr.contains(&p.leader) {
        p.leader
    } else {
        elect_from_isr(&next, &isr, live)
    };
    // Removing replicas bumps the leader epoch, so a removed replica's fetches are fenced.
    let leader_epoch = p.leader_epoch + 1;
    vec![
        MetadataRecord::PartitionReassignment {
            topic_id,
            partition,
            adding: vec![],
            removing: vec![],
        },
        MetadataRecord::Partition {
            topic_id,
            partition,
            replicas,
            isr,
            leader,
            leader_epoch,
            partition_epoch: p.partition_epoch + 1,
        },
    ]
}

/// An ongoing reassignment whose target replicas are all in the ISR completes.
fn complete_reassignment(
    topic_id: Uuid,
    partition: i32,
    p: &PartitionInfo,
    live: &BTreeSet<i32>,
) -> Option<Vec<MetadataRecord>> {
    if !p.reassigning() {
        return None;
    }
    let target = p.target_replicas();
    if !target.iter().all(|r| p.isr.contains(r)) {
        return None;
    }
    Some(finish(topic_id, partition, p, target, live))
}

/// Preferred-leader elections for every broker whose share of partitions it prefers but does
/// not lead exceeds `percentage` (Kafka's `leader.imbalance.per.broker.percentage`).
fn rebalance_records(image: &MetadataImage, percentage: u32) -> Vec<MetadataRecord> {
    let live: BTreeSet<i32> = image.live_brokers().into_iter().collect();
    let mut preferred_count: std::collections::BTreeMap<i32, (usize, usize)> = Default::default();
    for topic in image.topics.values() {
        for p in topic.partitions.values() {
            if let Some(&r) = p.replicas.first() {
                let e = preferred_count.entry(r).or_default();
                e.0 += 1;
                if p.leader != r {
                    e.1 += 1;
                }
            }
        }
    }
    let imbalanced: BTreeSet<i32> = preferred_count
        .iter()
        .filter(|(_, (total, not_led))| *not_led * 100 > *total * percentage as usize)
        .map(|(b, _)| *b)
        .collect();
    let mut records = Vec::new();
    for topic in image.topics.values() {
        for (&partition, p) in &topic.partitions {
            let preferred = p.replicas.first().copied().unwrap_or(-1);
            if imbalanced.contains(&preferred) && preferred_leader_missing(p, &live) {
                records.push(partition_record(
                    topic.id,
                    partition,
                    p,
                    p.isr.clone(),
                    preferred,
                    p.leader_epoch + 1,
                ));
            }
        }
    }
    records
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(replicas: &[i32], isr: &[i32], leader: i32) -> PartitionInfo {
        PartitionInfo {
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            leader,
            leader_epoch: 2,
            partition_epoch: 5,
            adding: vec![],
            removing: vec![],
            offline: vec![],
        }
    }

    fn set(ids: &[i32]) -> BTreeSet<i32> {
        ids.iter().copied().collect()
    }

    /// A replica an I/O error took offline is never elected: not as the preferred leader, not
    /// from the ISR, not by an unclean election; a leader whose copy is offline counts as gone
    /// for an unclean election.
    #[test]
    fn offline_replicas_are_never_elected() {
        let live: BTreeSet<i32> = [1, 2, 3].into();
        let mut x = p(&[1, 2, 3], &[1, 2], 2);
        x.offline = vec![1];
        assert!(!preferred_leader_missing(&x, &live));
        assert_eq!(
            elect_preferred(&x, &live).unwrap_err().error,
            ResponseError::PreferredLeaderNotAvailable
        );
        let mut y = p(&[1, 2, 3], &[1], 1);
        y.offline = vec![1];
        assert_eq!(elect_from_isr(&y, &y.isr, &live), -1);
        assert_eq!(elect_unclean(&y, &live), Some((2, vec![2])));
        assert_eq!(elect_any(&y, &live).unwrap(), (2, vec![2]));
        y.offline.clear();
        assert_eq!(
            elect_any(&y, &live).unwrap_err().error,
            ResponseError::ElectionNotNeeded
        );
    }

    #[test]
    fn preferred_elections_need_a_live_in_sync_preferred_replica() {
        let live = set(&[1, 2, 3]);
        assert_eq!(elect_preferred(&p(&[1, 2], &[1, 2], 2), &live).unwrap(), 1);
        let err = |r: Result<i32, ApiError>| r.unwrap_err().error;
        assert_eq!(
            err(elect_preferred(&p(&[1, 2], &[1, 2], 1), &live)),
            ResponseError::ElectionNotNeeded
        );
        assert_eq!(
            err(elect_preferred(&p(&[1, 2], &[2], 2), &live)),
            ResponseError::PreferredLeaderNotAvailable
        );
        assert_eq!(
            err(elect_preferred(&p(&[1, 2], &[1, 2], 2), &set(&[2]))),
            ResponseError::PreferredLeaderNotAvailable
        );
        // An unclean request prefers a live in-sync replica, else takes any live one alone.
        assert_eq!(
            elect_any(&p(&[1, 2], &[1, 2], -1), &set(&[2])).unwrap(),
            (2, vec![1, 2])
        );
        assert_eq!(
            elect_any(&p(&[1, 2], &[1], -1), &set(&[2])).unwrap(),
            (2, vec![2])
        );
        assert_eq!(
            elect_any(&p(&[1, 2], &[1], -1), &set(&[3]))
                .unwrap_err()
                .error,
            ResponseError::EligibleLeadersNotAvailable
        );
        assert_eq!(
            elect_any(&p(&[1, 2], &[1, 2], 1), &set(&[1]))
                .unwrap_err()
                .error,
            ResponseError::ElectionNotNeeded
        );
    }

    #[test]
    fn a_reassignment_adds_first_and_removes_once_the_new_replicas_are_in_sync() {
        let id = Uuid::new_v4();
        let all = set(&[1, 2, 3, 4]);
        let start = p(&[1, 2], &[1, 2], 1);
        let records = reassign(id, 0, &start, &[3, 4], &all, &all).unwrap();
        let mut image = MetadataImage::default();
        image.apply(&MetadataRecord::Topic {
            name: "t".into(),
            topic_id: id,
        });
        image.apply(&MetadataRecord::Partition {
            topic_id: id,
            partition: 0,
            replicas: start.replicas.clone(),
            isr: start.isr.clone(),
            leader: 1,
            leader_epoch: 2,
            partition_epoch: 5,
        });
        for r in &records {
            image.apply(r);
        }
        let during = image.topics[&id].partitions[&0].clone();
        assert_eq!(during.replicas, vec![3, 4, 1, 2]);
        assert_eq!(
            (during.adding.clone(), during.removing.clone()),
            (vec![3, 4], vec![1, 2])
        );
        assert_eq!(
            (during.leader, during.isr.clone()),
            (1, vec![1, 2]),
            "the old ISR serves meanwhile"
        );
        assert!(
            complete_reassignment(id, 0, &during, &all).is_none(),
            "3 and 4 not in sync yet"
        );
        let mut synced = during.clone();
        synced.isr = vec![1, 2, 3, 4];
        for r in complete_reassignment(id, 0, &synced, &all).unwrap() {
            image.apply(&r);
        }
        let after = image.topics[&id].partitions[&0].clone();
        assert_eq!(
            (after.replicas.clone(), after.isr.clone()),
            (vec![3, 4], vec![3, 4])
        );
        assert_eq!(
            after.leader, 3,
            "the old leader was removed: the first new in-sync replica leads"
        );
        assert!(after.leader_epoch > during.leader_epoch);
        assert!(!after.reassigning());
    }

    #[test]
    fn bad_targets_are_refused_and_a_cancel_restores_the_original_replicas() {
        let id = Uuid::new_v4();
        let all = set(&[1, 2, 3]);
        let start = p(&[1, 2], &[1, 2], 1);
        let err = |r: Result<Vec<MetadataRecord>, ApiError>| r.unwrap_err().error;
        assert_eq!(
            err(reassign(id, 0, &start, &[], &all, &all)),
            ResponseError::InvalidReplicaAssignment
        );
        assert_eq!(
            err(reassign(id, 0, &start, &[1, 1], &all, &all)),
            ResponseError::InvalidReplicaAssignment
        );
        assert_eq!(
            err(reassign(id, 0, &start, &[1, 9], &all, &all)),
            ResponseError::InvalidReplicaAssignment
        );
        assert_eq!(
            err(cancel(id, 0, &start, &all)),
            ResponseError::NoReassignmentInProgress
        );
        let mut during = start.clone();
        during.replicas = vec![3, 1, 2];
        during.adding = vec![3];
        during.removing = vec![2];
        let records = cancel(id, 0, &during, &all).unwrap();
        let back = applied(&during, &records);
        assert_eq!(
            (back.replicas, back.isr, back.leader),
            (vec![1, 2], vec![1, 2], 1)
        );
        // The same replicas in another order: nothing to add or remove, done at once with the
        // new preferred order.
        let records = reassign(id, 0, &start, &[2, 1], &all, &all).unwrap();
        let done = applied(&start, &records);
        assert_eq!(done.replicas, vec![2, 1]);
    }

    #[test]
    fn brokers_leading_too_few_of_their_preferred_partitions_get_them_back() {
        let mut image = MetadataImage::default();
        for b in [1, 2] {
            image.apply(&MetadataRecord::RegisterBroker {
                broker_id: b,
                host: "h".into(),
                port: 1,
                rack: None,
                endpoints: vec![],
                incarnation_id: None,
            });
        }
        let id = Uuid::new_v4();
        image.apply(&MetadataRecord::Topic {
            name: "t".into(),
            topic_id: id,
        });
        for (i, (replicas, leader)) in [(vec![1, 2], 2), (vec![2, 1], 2), (vec![1, 2], 1)]
            .into_iter()
            .enumerate()
        {
            image.apply(&MetadataRecord::Partition {
                topic_id: id,
                partition: i as i32,
                replicas,
                isr: vec![1, 2],
                leader,
                leader_epoch: 0,
                partition_epoch: 0,
            });
        }
        // Broker 1 prefers partitions 0 and 2 and leads only 2: 50 % > 10 %.
        let records = rebalance_records(&image, 10);
        assert_eq!(records.len(), 1);
        for r in &records {
            image.apply(r);
        }
        assert_eq!(image.topics[&id].partitions[&0].leader, 1);
        assert!(rebalance_records(&image, 10).is_empty());
        // A 60 % threshold tolerates it.
        let mut lenient = image.clone();
        lenient.apply(&MetadataRecord::Partition {
            topic_id: id,
            partition: 0,
            replicas: vec![1, 2],
            isr: vec![1, 2],
            leader: 2,
            leader_epoch: 2,
            partition_epoch: 2,
        });
        assert!(rebalance_records(&lenient, 60).is_empty());
    }
}
