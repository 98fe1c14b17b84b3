//! Replication throttles, as Kafka's: a broker's `leader.replication.throttled.rate` and
//! `follower.replication.throttled.rate` (bytes per second) bound the bytes that move for the
//! replicas a topic names in `leader.replication.throttled.replicas` and
//! `follower.replication.throttled.replicas` (`partition:broker,...` or `*`) while those
//! replicas are out of sync. The rate is measured over Kafka's window of eleven one-second
//! samples, counting at least ten seconds, so a throttle lets a burst through first and then
//! holds the average.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// Samples in the window (Kafka's `replication.quota.window.num` + 1).
const SAMPLES: u64 = 11;

/// One side's byte rate and what moved recently.
#[derive(Debug)]
pub struct ReplicationQuota {
    /// Bytes per second; `u64::MAX` for none.
    rate: AtomicU64,
    /// (second, bytes) of the last `SAMPLES` seconds.
    samples: Mutex<VecDeque<(u64, u64)>>,
}

impl Default for ReplicationQuota {
    fn default() -> Self {
        ReplicationQuota {
            rate: AtomicU64::new(u64::MAX),
            samples: Mutex::new(VecDeque::new()),
        }
    }
}

impl ReplicationQuota {
    /// Sets the rate (bytes per second; `u64::MAX` lifts the throttle).
    pub fn set_rate(&self, bytes_per_second: u64) {
        self.rate.store(bytes_per_second, Ordering::Relaxed);
    }

    /// Whether a rate is set.
    pub fn is_limited(&self) -> bool {
        self.rate.load(Ordering::Relaxed) != u64::MAX
    }

    /// Counts bytes of throttled replicas that moved at `now_ms`.
    pub fn record(&self, bytes: u64, now_ms: i64) {
        if bytes == 0 {
            return;
        }
        let second = now_ms.max(0) as u64 / 1000;
        let mut samples = self.samples.lock();
        match samples.back_mut() {
            Some((s, b)) if *s == second => *b += bytes,
            _ => samples.push_back((second, bytes)),
        }
        while samples.front().is_some_and(|(s, _)| s + SAMPLES <= second) {
            samples.pop_front();
        }
    }

    /// Whether throttled replicas moved more than the rate allows over the window.
    pub fn is_exceeded(&self, now_ms: i64) -> bool {
        let rate = self.rate.load(Ordering::Relaxed);
        if rate == u64::MAX {
            return false;
        }
        let second = now_ms.max(0) as u64 / 1000;
        let samples = self.samples.lock();
        let total: u64 = samples
            .iter()
            .filter(|(s, _)| s + SAMPLES > second)
            .map(|(_, b)| b)
            .sum();
        // Kafka counts at least the window less one sample.
        total / (SAMPLES - 1) > rate
    }
}

/// The replication throttles of a broker: the leader's (bytes it sends to throttled followers)
/// and the follower's (bytes it fetches for throttled replicas).
#[derive(Debug, Default)]
pub struct ReplicationQuotas {
    /// `leader.replication.throttled.rate`.
    pub leader: ReplicationQuota,
    /// `follower.replication.throttled.rate`.
    pub follower: ReplicationQuota,
}

/// Whether a `*.replication.throttled.replicas` value names replica `broker` of `partition`.
pub(crate) fn names_replica(value: Option<&str>, partition: i32, broker: i32) -> bool {
    let Some(value) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return false;
    };
    if value == "*" {
        return true;
    }
    value.split(',').any(|entry| {
        entry.trim().split_once(':').is_some_and(|(p, b)| {
            p.trim().parse() == Ok(partition) && b.trim().parse() == Ok(broker)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttled_replicas_are_read_as_kafka_writes_them() {
        assert!(names_replica(Some("0:1,1:2"), 1, 2));
        assert!(!names_replica(Some("0:1,1:2"), 1, 1));
        assert!(names_replica(Some(" * "), 7, 9));
        assert!(!names_replica(Some(""), 0, 1));
        assert!(!names_replica(None, 0, 1));
        assert!(!names_replica(Some("x:y,0"), 0, 1));
    }

    #[test]
    fn the_rate_is_held_over_the_window() {
        let q = ReplicationQuota::default();
        assert!(!q.is_limited());
        q.record(1 << 30, 0);
        assert!(!q.is_exceeded(0), "no throttle, no limit");
        let q = ReplicationQuota::default();
        q.set_rate(1000);
        // Ten seconds' worth passes at once; one byte more does not.
        q.record(10_000, 0);
        assert!(!q.is_exceeded(500));
        q.record(11, 900);
        assert!(q.is_exceeded(900));
        // Eleven seconds later the burst has left the window.
        assert!(!q.is_exceeded(11_000));
        q.set_rate(u64::MAX);
        q.record(1 << 30, 11_000);
        assert!(!q.is_exceeded(11_000));
    }
}
