//! `mirror.fetch.rate.max.bytes`: a per-mirror byte rate, shared by the mirror's fetchers on one
//! broker, so an initial copy cannot saturate the link or the source. A token bucket holding at
//! most one second of bytes: a fetch takes what its response carried and, when the bucket runs
//! dry, waits until the rate has paid for it.

use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// A byte-rate limit (bytes per second).
#[derive(Debug)]
pub struct ByteRate {
    rate: u64,
    /// (tokens, when last refilled); tokens may go negative: a debt later fetches wait out.
    bucket: Mutex<(f64, Instant)>,
}

impl ByteRate {
    /// A limit of `rate` bytes per second, starting with a full second's allowance.
    pub fn new(rate: u64) -> Self {
        ByteRate {
            rate,
            bucket: Mutex::new((rate as f64, Instant::now())),
        }
    }

    /// The most one fetch should ask for: a second's worth.
    pub fn max_fetch_bytes(&self) -> i32 {
        self.rate.clamp(1, i32::MAX as u64) as i32
    }

    /// Takes `bytes` from the bucket at `now`; returns how long to wait before the next fetch.
    pub fn take(&self, bytes: usize, now: Instant) -> Duration {
        let mut b = self.bucket.lock();
        let rate = self.rate as f64;
        let refill = now.saturating_duration_since(b.1).as_secs_f64() * rate;
        b.0 = (b.0 + refill).min(rate) - bytes as f64;
        b.1 = now;
        if b.0 >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-b.0 / rate)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_of_bytes_passes_then_the_rate_holds() {
        let r = ByteRate::new(1000);
        let t0 = Instant::now();
        assert_eq!(
            r.take(1000, t0),
            Duration::ZERO,
            "a full second's allowance"
        );
        assert_eq!(r.take(500, t0), Duration::from_millis(500), "then a debt");
        // Half a second later the debt is paid; 250 more bytes cost a quarter second.
        let t1 = t0 + Duration::from_millis(500);
        assert_eq!(r.take(250, t1), Duration::from_millis(250));
        // An idle bucket fills up to one second's worth, no more.
        let t2 = t1 + Duration::from_secs(10);
        assert_eq!(r.take(1000, t2), Duration::ZERO);
        assert!(r.take(1, t2) > Duration::ZERO);
        assert_eq!(r.max_fetch_bytes(), 1000);
    }
}
