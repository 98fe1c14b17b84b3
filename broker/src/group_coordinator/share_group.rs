//! Share groups (KIP-932), the part Tern keeps: each share-partition's start offset (SPSO),
//! set by AlterShareGroupOffsets (`kafka-share-groups.sh --reset-offsets`, or the mirror's
//! sync from a source cluster) and read back by DescribeShareGroupOffsets. Share consumers
//! (ShareGroupHeartbeat, ShareFetch, ShareAcknowledge) are not served, so a share group here
//! has no members: it is always Empty.

use std::collections::BTreeMap;

/// A share-partition's start offset as stored (Kafka's ShareSnapshotValue without in-flight
/// record states: Tern keeps none, as no share consumer reads here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareStartOffset {
    /// The first offset not yet delivered to the group.
    pub offset: i64,
    /// Leader epoch of the partition when the offset was set (-1: unknown).
    pub leader_epoch: i32,
    /// Bumped each time the offset is altered (Kafka's state epoch).
    pub state_epoch: i32,
}

/// A share group: its epoch and its start offsets by (topic, partition).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShareGroup {
    /// Group epoch, bumped when partitions are initialized or deleted.
    pub epoch: i32,
    /// Start offsets by (topic, partition).
    pub start_offsets: BTreeMap<(String, i32), ShareStartOffset>,
}

impl ShareGroup {
    /// Sets start offsets (an alter): each partition's state epoch moves on, and the group
    /// epoch once, when partitions were set at all.
    pub fn set_offsets(&mut self, offsets: impl IntoIterator<Item = ((String, i32), i64, i32)>) {
        let mut any = false;
        for (key, offset, leader_epoch) in offsets {
            any = true;
            let state_epoch = self.start_offsets.get(&key).map_or(0, |s| s.state_epoch) + 1;
            self.start_offsets.insert(
                key,
                ShareStartOffset {
                    offset,
                    leader_epoch,
                    state_epoch,
                },
            );
        }
        if any {
            self.epoch += 1;
        }
    }

    /// Removes every partition of `topic`; the keys removed.
    pub fn remove_topic(&mut self, topic: &str) -> Vec<(String, i32)> {
        let keys: Vec<(String, i32)> = self
            .start_offsets
            .keys()
            .filter(|(t, _)| t == topic)
            .cloned()
            .collect();
        for k in &keys {
            self.start_offsets.remove(k);
        }
        if !keys.is_empty() {
            self.epoch += 1;
        }
        keys
    }

    /// Whether any partition of `topic` has a start offset.
    pub fn has_topic(&self, topic: &str) -> bool {
        self.start_offsets.keys().any(|(t, _)| t == topic)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn altering_moves_state_and_group_epochs() {
        let mut g = ShareGroup::default();
        g.set_offsets([(("t".to_string(), 0), 5, 2), (("t".to_string(), 1), 7, 2)]);
        assert_eq!(g.epoch, 1);
        g.set_offsets([(("t".to_string(), 0), 9, 3)]);
        assert_eq!(g.epoch, 2);
        assert_eq!(
            g.start_offsets[&("t".to_string(), 0)],
            ShareStartOffset {
                offset: 9,
                leader_epoch: 3,
                state_epoch: 2
            }
        );
        assert_eq!(g.start_offsets[&("t".to_string(), 1)].state_epoch, 1);
        g.set_offsets([]);
        assert_eq!(g.epoch, 2, "an empty alter changes nothing");
    }

    #[test]
    fn removing_a_topic_removes_its_partitions_only() {
        let mut g = ShareGroup::default();
        g.set_offsets([
            (("a".to_string(), 0), 1, -1),
            (("a".to_string(), 1), 2, -1),
            (("b".to_string(), 0), 3, -1),
        ]);
        let removed = g.remove_topic("a");
        assert_eq!(removed, vec![("a".to_string(), 0), ("a".to_string(), 1)]);
        assert!(!g.has_topic("a"));
        assert!(g.has_topic("b"));
        assert_eq!(g.epoch, 2);
        assert!(g.remove_topic("missing").is_empty());
        assert_eq!(g.epoch, 2);
    }
}
