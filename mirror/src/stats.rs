//! Counters of each mirror's fetching: bytes and records mirrored, fetch errors, retries, and
//! when each source broker last answered. The fetchers and the coordinator add to them as they
//! work; the broker's metrics read a snapshot at each scrape.

use std::collections::HashMap;
use std::time::Instant;

use parking_lot::Mutex;

/// One mirror's counters.
#[derive(Debug, Clone, Default)]
pub struct MirrorCounters {
    /// Bytes of record batches appended from the source.
    pub bytes: u64,
    /// Records in those batches.
    pub records: u64,
    /// Fetch requests that failed (connection, source error) and appends that failed.
    pub fetch_errors: u64,
    /// Partitions handed back to a fetcher after a fetch error or a source leader move.
    pub fetch_retries: u64,
    /// When each source broker (by id) last answered a fetch without error.
    pub last_fetch: HashMap<i32, Instant>,
}

/// Every mirror's counters, by mirror name.
#[derive(Debug, Default)]
pub(crate) struct MirrorStats {
    mirrors: Mutex<HashMap<String, MirrorCounters>>,
}

impl MirrorStats {
    fn with(&self, mirror: &str, f: impl FnOnce(&mut MirrorCounters)) {
        let mut mirrors = self.mirrors.lock();
        match mirrors.get_mut(mirror) {
            Some(c) => f(c),
            None => f(mirrors.entry(mirror.to_string()).or_default()),
        }
    }

    /// Batches appended: their bytes and records.
    pub(crate) fn appended(&self, mirror: &str, bytes: u64, records: u64) {
        self.with(mirror, |c| {
            c.bytes += bytes;
            c.records += records;
        });
    }

    /// A source broker answered a fetch without error.
    pub(crate) fn fetch_succeeded(&self, mirror: &str, broker: i32, at: Instant) {
        self.with(mirror, |c| {
            c.last_fetch.insert(broker, at);
        });
    }

    /// A fetch request or an append failed.
    pub(crate) fn fetch_failed(&self, mirror: &str) {
        self.with(mirror, |c| c.fetch_errors += 1);
    }

    /// A partition went back to a fetcher after an error or a leader move.
    pub(crate) fn retried(&self, mirror: &str) {
        self.with(mirror, |c| c.fetch_retries += 1);
    }

    /// Forgets a mirror (deleted).
    pub(crate) fn forget(&self, mirror: &str) {
        self.mirrors.lock().remove(mirror);
    }

    /// The counters of every mirror seen.
    pub(crate) fn snapshot(&self) -> Vec<(String, MirrorCounters)> {
        let mut all: Vec<_> = self
            .mirrors
            .lock()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_mirror() {
        let stats = MirrorStats::default();
        let t = Instant::now();
        stats.appended("a", 100, 3);
        stats.appended("a", 50, 2);
        stats.fetch_failed("b");
        stats.retried("b");
        stats.fetch_succeeded("a", 7, t);
        let snap = stats.snapshot();
        assert_eq!(snap.len(), 2);
        let a = &snap[0].1;
        assert_eq!((a.bytes, a.records, a.fetch_errors), (150, 5, 0));
        assert_eq!(a.last_fetch.get(&7), Some(&t));
        let b = &snap[1].1;
        assert_eq!((b.fetch_errors, b.fetch_retries, b.bytes), (1, 1, 0));
        stats.forget("a");
        assert_eq!(stats.snapshot().len(), 1);
    }
}
