//! Server-side assignors of KIP-848 consumer groups: `uniform` (balanced, and sticky to the
//! previous target) and `range` (contiguous ranges per topic), as `group.consumer.assignors`
//! names them.

use std::collections::{BTreeMap, BTreeSet};

/// Partitions by topic name.
pub(crate) type Assignment = BTreeMap<String, BTreeSet<i32>>;

/// The assignors Tern serves, by Kafka's short name.
pub(crate) const ASSIGNORS: &[&str] = &["uniform", "range"];

/// Kafka's short name for an assignor given by short name or by Kafka's class name; None for
/// one Tern does not have.
pub(crate) fn short_name(name: &str) -> Option<&'static str> {
    let name = name.trim();
    let tail = name.rsplit('.').next().unwrap_or(name);
    match tail {
        "uniform" | "UniformAssignor" => Some("uniform"),
        "range" | "RangeAssignor" => Some("range"),
        _ => None,
    }
}

/// One member as an assignor sees it.
pub(crate) struct MemberSpec<'a> {
    /// Member id.
    pub id: &'a str,
    /// `group.instance.id` of a static member.
    pub instance_id: Option<&'a str>,
    /// Topics it subscribes to that exist.
    pub topics: BTreeSet<&'a str>,
    /// Its previous target assignment.
    pub previous: Option<&'a Assignment>,
}

/// The target assignment of every member: `assignor` over `partitions` (topic -> count).
pub(crate) fn assign(
    assignor: &str,
    members: &[MemberSpec<'_>],
    partitions: &BTreeMap<String, i32>,
) -> BTreeMap<String, Assignment> {
    match assignor {
        "range" => range(members, partitions),
        _ => uniform(members, partitions),
    }
}

/// An empty assignment for every member (members the assignor gives nothing still get one).
fn nothing_for(members: &[MemberSpec<'_>]) -> BTreeMap<String, Assignment> {
    members
        .iter()
        .map(|m| (m.id.to_string(), Assignment::new()))
        .collect()
}

/// Per topic, the subscribed members in Kafka's order (static members first by instance id, then
/// the others by member id) take contiguous ranges; the first `count % members` take one more.
/// As Kafka's server-side range assignor, it does not look at previous assignments.
fn range(
    members: &[MemberSpec<'_>],
    partitions: &BTreeMap<String, i32>,
) -> BTreeMap<String, Assignment> {
    let mut out = nothing_for(members);
    for (topic, &count) in partitions {
        let mut subscribers: Vec<&MemberSpec<'_>> = members
            .iter()
            .filter(|m| m.topics.contains(topic.as_str()))
            .collect();
        if subscribers.is_empty() || count <= 0 {
            continue;
        }
        // (None, id) sorts after every (Some(instance), _).
        subscribers.sort_unstable_by_key(|m| (m.instance_id.is_none(), m.instance_id, m.id));
        let n = subscribers.len() as i32;
        let (each, extra) = (count / n, count % n);
        let mut next = 0;
        for (i, id) in subscribers.iter().map(|m| m.id).enumerate() {
            let take = each + i32::from((i as i32) < extra);
            if take > 0 {
                let set = out
                    .entry(id.to_string())
                    .or_default()
                    .entry(topic.clone())
                    .or_default();
                set.extend(next..next + take);
            }
            next += take;
        }
    }
    out
}

/// Every partition to one subscribed member, counts as even as the subscriptions allow,
/// keeping each member's previous partitions where balance permits (fewer partitions move).
fn uniform(
    members: &[MemberSpec<'_>],
    partitions: &BTreeMap<String, i32>,
) -> BTreeMap<String, Assignment> {
    let mut out = nothing_for(members);
    let assignable: Vec<(&str, i32)> = partitions
        .iter()
        .filter(|(t, _)| members.iter().any(|m| m.topics.contains(t.as_str())))
        .flat_map(|(t, &n)| (0..n.max(0)).map(move |p| (t.as_str(), p)))
        .collect();
    if members.is_empty() || assignable.is_empty() {
        return out;
    }
    let quota = assignable.len() / members.len();
    let mut extra_slots = assignable.len() % members.len();
    let mut taken: BTreeSet<(&str, i32)> = BTreeSet::new();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    // Members that kept the most keep their extra partition first.
    let mut by_previous: Vec<&MemberSpec<'_>> = members.iter().collect();
    by_previous.sort_by_key(|m| {
        (
            std::cmp::Reverse(
                m.previous
                    .map_or(0, |p| p.values().map(BTreeSet::len).sum()),
            ),
            m.id,
        )
    });
    for m in by_previous {
        let mut keep: Vec<(&str, i32)> = m
            .previous
            .into_iter()
            .flat_map(|prev| prev.iter())
            .filter(|(t, _)| m.topics.contains(t.as_str()))
            .flat_map(|(t, ps)| ps.iter().map(move |&p| (t.as_str(), p)))
            .filter(|(t, p)| partitions.get(*t).is_some_and(|&n| *p < n) && *p >= 0)
            .filter(|tp| !taken.contains(tp))
            .collect();
        let mut limit = quota;
        if keep.len() > quota && extra_slots > 0 {
            limit += 1;
            extra_slots -= 1;
        }
        keep.truncate(limit);
        counts.insert(m.id, keep.len());
        for (t, p) in keep {
            taken.insert((t, p));
            out.entry(m.id.to_string())
                .or_default()
                .entry(t.to_string())
                .or_default()
                .insert(p);
        }
    }
    for (t, p) in assignable {
        if taken.contains(&(t, p)) {
            continue;
        }
        let Some(owner) = members
            .iter()
            .filter(|m| m.topics.contains(t))
            .min_by_key(|m| (counts.get(m.id).copied().unwrap_or(0), m.id))
        else {
            continue;
        };
        *counts.entry(owner.id).or_default() += 1;
        out.entry(owner.id.to_string())
            .or_default()
            .entry(t.to_string())
            .or_default()
            .insert(p);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec<'a>(
        id: &'a str,
        topics: &[&'a str],
        previous: Option<&'a Assignment>,
    ) -> MemberSpec<'a> {
        MemberSpec {
            id,
            instance_id: None,
            topics: topics.iter().copied().collect(),
            previous,
        }
    }

    fn count(a: &Assignment) -> usize {
        a.values().map(BTreeSet::len).sum()
    }

    fn every_partition_once(
        out: &BTreeMap<String, Assignment>,
        partitions: &BTreeMap<String, i32>,
    ) {
        let mut seen = BTreeSet::new();
        for a in out.values() {
            for (t, ps) in a {
                for p in ps {
                    assert!(seen.insert((t.clone(), *p)), "{t}-{p} assigned twice");
                }
            }
        }
        let all: BTreeSet<(String, i32)> = partitions
            .iter()
            .flat_map(|(t, n)| (0..*n).map(move |p| (t.clone(), p)))
            .collect();
        assert_eq!(seen, all);
    }

    #[test]
    fn uniform_balances_and_keeps_what_it_can() {
        let partitions: BTreeMap<String, i32> = [("a".to_string(), 5), ("b".to_string(), 2)].into();
        let first = assign("uniform", &[spec("m1", &["a", "b"], None)], &partitions);
        assert_eq!(count(&first["m1"]), 7);
        let prev = first["m1"].clone();
        let second = assign(
            "uniform",
            &[
                spec("m1", &["a", "b"], Some(&prev)),
                spec("m2", &["a", "b"], None),
            ],
            &partitions,
        );
        every_partition_once(&second, &partitions);
        assert_eq!((count(&second["m1"]), count(&second["m2"])), (4, 3));
        // m1 kept four of its own: only the moved three are new.
        for (t, ps) in &second["m1"] {
            assert!(ps.is_subset(&prev[t]));
        }
        let third = assign(
            "uniform",
            &[
                spec("m1", &["a", "b"], Some(&second["m1"])),
                spec("m2", &["a", "b"], Some(&second["m2"])),
                spec("m3", &["a", "b"], None),
            ],
            &partitions,
        );
        every_partition_once(&third, &partitions);
        let mut sizes: Vec<usize> = third.values().map(count).collect();
        sizes.sort();
        assert_eq!(sizes, vec![2, 2, 3]);
    }

    #[test]
    fn uniform_gives_each_topic_only_to_its_subscribers() {
        let partitions: BTreeMap<String, i32> = [("a".to_string(), 3), ("b".to_string(), 3)].into();
        let out = assign(
            "uniform",
            &[spec("m1", &["a"], None), spec("m2", &["a", "b"], None)],
            &partitions,
        );
        every_partition_once(&out, &partitions);
        assert!(!out["m1"].contains_key("b"));
    }

    #[test]
    fn range_takes_contiguous_ranges_per_topic() {
        let partitions: BTreeMap<String, i32> = [("a".to_string(), 5)].into();
        let out = assign(
            "range",
            &[spec("m2", &["a"], None), spec("m1", &["a"], None)],
            &partitions,
        );
        assert_eq!(out["m1"]["a"], [0, 1, 2].into());
        assert_eq!(out["m2"]["a"], [3, 4].into());
    }

    /// Kafka's order: static members first, by instance id, whatever their member ids; then
    /// dynamic ones by member id. Co-partitioned topics give each member the same ranges.
    #[test]
    fn range_puts_static_members_first_by_instance_id() {
        let partitions: BTreeMap<String, i32> = [("a".to_string(), 7), ("b".to_string(), 7)].into();
        let b = spec("a-dynamic", &["a", "b"], None);
        let mut z = spec("z-static", &["a", "b"], None);
        z.instance_id = Some("i1");
        let mut y = spec("b-static", &["a", "b"], None);
        y.instance_id = Some("i2");
        let out = assign("range", &[b, y, z], &partitions);
        for topic in ["a", "b"] {
            assert_eq!(out["z-static"][topic], [0, 1, 2].into());
            assert_eq!(out["b-static"][topic], [3, 4].into());
            assert_eq!(out["a-dynamic"][topic], [5, 6].into());
        }
    }

    #[test]
    fn assignor_names_are_kafkas() {
        assert_eq!(short_name("uniform"), Some("uniform"));
        assert_eq!(
            short_name("org.apache.kafka.coordinator.group.assignor.RangeAssignor"),
            Some("range")
        );
        assert_eq!(short_name("sticky"), None);
    }
}
