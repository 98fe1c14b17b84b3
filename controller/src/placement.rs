//! Replica placement: which brokers hold each new partition.

/// Assigns `count` partitions starting at index `first`, each with `rf` distinct replicas,
/// round-robin over `brokers` so that leaders (the first replica) spread evenly.
pub fn assign_replicas(brokers: &[i32], first: i32, count: i32, rf: usize) -> Vec<Vec<i32>> {
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
}
