//! Replication throttles, as Kafka's: a broker's `leader.replication.throttled.rate` and
//! `follower.replication.throttled.rate` (bytes per second) bound the bytes that move for the
//! replicas a topic names in `leader.replication.throttled.replicas` and
//! `follower.replication.throttled.replicas` (`partition:broker,...` or `*`): bytes of every
//! replica they name count, and those out of sync wait while the rate is exceeded. The rate is
//! Kafka's `SimpleRate` over eleven one-second samples: the bytes in them over the time since
//! the oldest began (at least a second), so it holds from the first second.

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
        let now_ms = now_ms.max(0) as u64;
        let second = now_ms / 1000;
        let samples = self.samples.lock();
        let live = samples.iter().filter(|(s, _)| s + SAMPLES > second);
        let oldest = live.clone().map(|(s, _)| *s).min().unwrap_or(second);
        let total: u64 = live.map(|(_, b)| b).sum();
        let elapsed_ms = now_ms.saturating_sub(oldest * 1000).max(1000);
        total.saturating_mul(1000) / elapsed_ms > rate
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
        // A second's worth passes in the first second; one byte more does not.
        q.record(1000, 0);
        assert!(!q.is_exceeded(500));
        q.record(1, 900);
        assert!(q.is_exceeded(900));
        // Later the same bytes spread over the time since: under the rate again.
        assert!(!q.is_exceeded(1_500));
        q.record(2100, 3_000);
        assert!(q.is_exceeded(3_000), "3101 bytes in 3 s");
        assert!(!q.is_exceeded(4_000), "3101 bytes in 4 s");
        // Eleven seconds later the bytes have left the window.
        assert!(!q.is_exceeded(14_000));
        q.set_rate(u64::MAX);
        q.record(1 << 30, 11_000);
        assert!(!q.is_exceeded(11_000));
    }
}
