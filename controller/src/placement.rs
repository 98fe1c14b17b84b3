//! Replica placement: which brokers hold each new partition. Without racks, round-robin over
//! the brokers so leaders (the first replica) spread evenly; with `broker.rack` set, Kafka's
//! rack-aware placement, so each partition's replicas span as many racks as they can.

use std::collections::{BTreeMap, BTreeSet};

use crate::image::MetadataImage;

/// Replicas for `count` new partitions from index `first` on the live brokers of `image`.
pub(crate) fn place(image: &MetadataImage, first: i32, count: i32, rf: usize) -> Vec<Vec<i32>> {
    let live: Vec<(i32, Option<String>)> = image
        .brokers
        .values()
        .filter(|b| !b.fenced)
        .map(|b| (b.id, b.rack.clone()))
        .collect();
    if live.iter().any(|(_, rack)| rack.is_some()) {
        assign_replicas_rack_aware(&live, first, count, rf)
    } else {
        let ids: Vec<i32> = live.iter().map(|(id, _)| *id).collect();
        assign_replicas(&ids, first, count, rf)
    }
}

/// Assigns `count` partitions starting at index `first`, each with `rf` distinct replicas,
/// round-robin over `brokers` so that leaders (the first replica) spread evenly.
pub(crate) fn assign_replicas(brokers: &[i32], first: i32, count: i32, rf: usize) -> Vec<Vec<i32>> {
    if brokers.is_empty() {
        return Vec::new();
    }
    let n = brokers.len();
    (0..count)
        .map(|i| {
            let start = (first + i) as usize % n;
            (0..rf.min(n)).map(|r| brokers[(start + r) % n]).collect()
        })
        .collect()
}

/// The brokers ordered rack by rack in turn (Kafka's rack-alternated list): a run of
/// consecutive brokers spans as many racks as there are. A broker without a rack is in a rack
/// of its own name "".
fn rack_alternated(brokers: &[(i32, Option<String>)]) -> Vec<(i32, String)> {
    let mut by_rack: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for (id, rack) in brokers {
        by_rack
            .entry(rack.clone().unwrap_or_default())
            .or_default()
            .push(*id);
    }
    for ids in by_rack.values_mut() {
        ids.sort_unstable();
    }
    let mut out = Vec::with_capacity(brokers.len());
    let longest = by_rack.values().map(Vec::len).max().unwrap_or(0);
    for i in 0..longest {
        for (rack, ids) in &by_rack {
            if let Some(id) = ids.get(i) {
                out.push((*id, rack.clone()));
            }
        }
    }
    out
}

/// Kafka's rack-aware assignment (`assignReplicasToBrokersRackAware`): leaders round-robin over
/// the rack-alternated brokers, and each further replica is the next broker (shifted per round
/// of partitions) on a rack without a replica yet, once every rack has one, any broker
/// without one.
pub(crate) fn assign_replicas_rack_aware(
    brokers: &[(i32, Option<String>)],
    first: i32,
    count: i32,
    rf: usize,
) -> Vec<Vec<i32>> {
    let arranged = rack_alternated(brokers);
    let n = arranged.len();
    if n == 0 {
        return Vec::new();
    }
    let rf = rf.min(n);
    let num_racks = arranged
        .iter()
        .map(|(_, r)| r.as_str())
        .collect::<BTreeSet<_>>()
        .len();
    let mut out = Vec::with_capacity(count.max(0) as usize);
    let mut shift = 0usize;
    for i in 0..count {
        let partition = (first + i).max(0) as usize;
        if partition > 0 && partition.is_multiple_of(n) {
            shift += 1;
        }
        let first_index = partition % n;
        let (leader, leader_rack) = &arranged[first_index];
        let mut replicas = vec![*leader];
        let mut racks: BTreeSet<&str> = BTreeSet::from([leader_rack.as_str()]);
        let mut k = 0usize;
        while replicas.len() < rf {
            let index = if n > 1 {
                (first_index + 1 + (shift * num_racks + k) % (n - 1)) % n
            } else {
                first_index
            };
            k += 1;
            let (broker, rack) = &arranged[index];
            if replicas.contains(broker) {
                continue;
            }
            if racks.contains(rack.as_str()) && racks.len() < num_racks {
                continue;
            }
            racks.insert(rack.as_str());
            replicas.push(*broker);
        }
        out.push(replicas);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replicas_are_distinct_and_leaders_rotate() {
        let a = assign_replicas(&[1, 2, 3], 0, 6, 2);
        assert_eq!(a.len(), 6);
        for r in &a {
            assert_eq!(r.len(), 2);
            assert_ne!(r[0], r[1]);
        }
        let leaders: Vec<i32> = a.iter().map(|r| r[0]).collect();
        assert_eq!(leaders, vec![1, 2, 3, 1, 2, 3]);
    }

    #[test]
    fn with_racks_every_partition_spans_as_many_racks_as_it_can_and_leaders_spread() {
        let rack = |r: &str| Some(r.to_string());
        // Two racks, uneven: a has 1, 2, 3; b has 4, 5.
        let brokers = vec![
            (1, rack("a")),
            (2, rack("a")),
            (3, rack("a")),
            (4, rack("b")),
            (5, rack("b")),
        ];
        let rack_of = |id: i32| brokers.iter().find(|(b, _)| *b == id).unwrap().1.clone();
        let a = assign_replicas_rack_aware(&brokers, 0, 20, 3);
        let mut leaders = BTreeMap::new();
        for r in &a {
            assert_eq!(r.len(), 3);
            assert_eq!(
                r.iter().collect::<BTreeSet<_>>().len(),
                3,
                "distinct: {r:?}"
            );
            let racks: BTreeSet<_> = r.iter().map(|b| rack_of(*b)).collect();
            assert_eq!(racks.len(), 2, "both racks: {r:?}");
            *leaders.entry(r[0]).or_insert(0) += 1;
        }
        assert_eq!(leaders.len(), 5, "every broker leads some: {leaders:?}");
        assert!(leaders.values().all(|n| *n == 4), "evenly: {leaders:?}");
        // Replication factor 2 over three racks of one broker each: never twice in a rack.
        let three = vec![(7, rack("x")), (8, rack("y")), (9, rack("z"))];
        for r in assign_replicas_rack_aware(&three, 0, 9, 2) {
            assert_ne!(r[0], r[1]);
        }
        // More replicas than brokers is capped, as without racks.
        assert_eq!(assign_replicas_rack_aware(&three, 0, 1, 5)[0].len(), 3);
    }
}
