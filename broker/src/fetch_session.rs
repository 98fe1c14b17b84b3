//! Incremental fetch sessions (KIP-227): the broker remembers what a client fetches so that
//! later requests and responses carry only what changed.

use std::collections::HashMap;

use indexmap::IndexMap;
use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use uuid::Uuid;

/// Epoch a client sends to open a new session.
pub(crate) const INITIAL_EPOCH: i32 = 0;
/// Epoch a client sends for a sessionless fetch, or to close its session.
pub(crate) const FINAL_EPOCH: i32 = -1;

/// One partition a fetch reads.
#[derive(Debug, Clone, PartialEq)]
pub struct FetchItem {
    /// Topic name.
    pub topic: String,
    /// Topic id (nil before Fetch v13).
    pub topic_id: Uuid,
    /// Partition index.
    pub partition: i32,
    /// Offset to read from.
    pub fetch_offset: i64,
    /// Byte limit for this partition.
    pub max_bytes: i32,
    /// Leader epoch the client believes in, or -1.
    pub current_leader_epoch: i32,
    /// A follower's epoch of its last fetched batch (Fetch v12+), or -1.
    pub last_fetched_epoch: i32,
}

/// What the client was last told of a partition, to detect changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SentState {
    /// High watermark.
    pub high_watermark: i64,
    /// Last stable offset.
    pub last_stable_offset: i64,
    /// Log start offset.
    pub log_start_offset: i64,
}

struct Session {
    items: IndexMap<(String, i32), (FetchItem, Option<SentState>)>,
    epoch: i32,
    last_used_ms: i64,
}

/// The partitions one fetch request reads and how its response is shaped.
pub struct FetchContext {
    /// Session id to answer with (0: none).
    pub session_id: i32,
    /// Partitions to read, in order.
    pub items: Vec<FetchItem>,
    /// Only changed partitions go in the response.
    pub incremental: bool,
}

/// The broker's fetch session cache.
pub struct FetchSessionCache {
    max_sessions: usize,
    eviction_ms: i64,
    sessions: Mutex<HashMap<i32, Session>>,
}

/// A request's partitions (by name) and forgotten ones.
pub struct RequestedPartitions {
    /// Partitions named in the request.
    pub items: Vec<FetchItem>,
    /// (topic, partition) to drop from the session.
    pub forgotten: Vec<(String, i32)>,
}

impl FetchSessionCache {
    /// A cache of at most `max_sessions` sessions, evicting ones idle for `eviction_ms`.
    pub fn new(max_sessions: usize, eviction_ms: i64) -> Self {
        FetchSessionCache {
            max_sessions,
            eviction_ms,
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// Decides what a request reads, creating, updating or closing its session.
    pub fn context(
        &self,
        session_id: i32,
        epoch: i32,
        requested: RequestedPartitions,
        now_ms: i64,
    ) -> Result<FetchContext, ResponseError> {
        let mut sessions = self.sessions.lock();
        if session_id == 0 && epoch == FINAL_EPOCH {
            return Ok(FetchContext {
                session_id: 0,
                items: requested.items,
                incremental: false,
            });
        }
        if epoch == FINAL_EPOCH {
            sessions.remove(&session_id);
            return Ok(FetchContext {
                session_id: 0,
                items: requested.items,
                incremental: false,
            });
        }
        if epoch == INITIAL_EPOCH {
            if session_id != 0 {
                sessions.remove(&session_id);
            }
            sessions.retain(|_, s| now_ms - s.last_used_ms < self.eviction_ms);
            if sessions.len() >= self.max_sessions {
                // Full: evict the least recently used session to make room, as Kafka
                // prefers newer sessions when the cache is full.
                if let Some((&oldest, _)) = sessions.iter().min_by_key(|(_, s)| s.last_used_ms) {
                    sessions.remove(&oldest);
                }
            }
            let mut id = 0;
            while id == 0 || sessions.contains_key(&id) {
                id = (rand_u32() & 0x7fff_ffff) as i32;
            }
            let items: IndexMap<_, _> = requested
                .items
                .iter()
                .map(|i| ((i.topic.clone(), i.partition), (i.clone(), None)))
                .collect();
            sessions.insert(
                id,
                Session {
                    items,
                    epoch: 1,
                    last_used_ms: now_ms,
                },
            );
            return Ok(FetchContext {
                session_id: id,
                items: requested.items,
                incremental: false,
            });
        }
        let Some(session) = sessions.get_mut(&session_id) else {
            return Err(ResponseError::FetchSessionIdNotFound);
        };
        if session.epoch != epoch {
            return Err(ResponseError::InvalidFetchSessionEpoch);
        }
        session.epoch = session.epoch.wrapping_add(1).max(1);
        session.last_used_ms = now_ms;
        for item in requested.items {
            let key = (item.topic.clone(), item.partition);
            match session.items.get_mut(&key) {
                Some(entry) => entry.0 = item,
                None => {
                    session.items.insert(key, (item, None));
                }
            }
        }
        for key in &requested.forgotten {
            session.items.shift_remove(key);
        }
        Ok(FetchContext {
            session_id,
            items: session.items.values().map(|(i, _)| i.clone()).collect(),
            incremental: true,
        })
    }

    /// Records what the response told the client; returns, per item, whether it belongs in an
    /// incremental response (it has records, an error, or changed offsets).
    pub fn record_sent(
        &self,
        session_id: i32,
        sent: &[(String, i32, SentState, bool)],
    ) -> Vec<bool> {
        let mut sessions = self.sessions.lock();
        let Some(session) = sessions.get_mut(&session_id) else {
            return vec![true; sent.len()];
        };
        sent.iter()
            .map(|(topic, partition, state, has_data_or_error)| {
                match session.items.get_mut(&(topic.clone(), *partition)) {
                    Some(entry) => {
                        let changed = entry.1 != Some(*state);
                        entry.1 = Some(*state);
                        changed || *has_data_or_error
                    }
                    None => true,
                }
            })
            .collect()
    }
}

/// A random u32 without another dependency: the low bits of a v4 uuid.
fn rand_u32() -> u32 {
    let b = Uuid::new_v4().into_bytes();
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(p: i32, offset: i64) -> FetchItem {
        FetchItem {
            topic: "t".into(),
            topic_id: Uuid::nil(),
            partition: p,
            fetch_offset: offset,
            max_bytes: 1024,
            current_leader_epoch: -1,
            last_fetched_epoch: -1,
        }
    }

    fn req(items: Vec<FetchItem>, forgotten: Vec<(String, i32)>) -> RequestedPartitions {
        RequestedPartitions { items, forgotten }
    }

    #[test]
    fn session_lifecycle_full_then_incremental() {
        let cache = FetchSessionCache::new(10, 60_000);
        let ctx = cache
            .context(
                0,
                INITIAL_EPOCH,
                req(vec![item(0, 0), item(1, 0)], vec![]),
                0,
            )
            .unwrap();
        assert!(ctx.session_id > 0 && !ctx.incremental);
        let id = ctx.session_id;
        let st = SentState {
            high_watermark: 5,
            last_stable_offset: 5,
            log_start_offset: 0,
        };
        assert_eq!(
            cache.record_sent(id, &[("t".into(), 0, st, true), ("t".into(), 1, st, false)]),
            vec![true, true]
        );
        // Epoch 1: only partition 0 moved; both are still read.
        let ctx = cache
            .context(id, 1, req(vec![item(0, 5)], vec![]), 1)
            .unwrap();
        assert!(ctx.incremental);
        assert_eq!(ctx.items.len(), 2);
        assert_eq!(ctx.items[0].fetch_offset, 5);
        // Nothing changed for partition 1: left out of the response.
        assert_eq!(
            cache.record_sent(
                id,
                &[("t".into(), 0, st, false), ("t".into(), 1, st, false)]
            ),
            vec![false, false]
        );
        assert_eq!(
            cache.context(id, 1, req(vec![], vec![]), 2).err(),
            Some(ResponseError::InvalidFetchSessionEpoch)
        );
        let ctx = cache
            .context(id, 2, req(vec![], vec![("t".into(), 1)]), 3)
            .unwrap();
        assert_eq!(ctx.items.len(), 1);
        assert_eq!(
            cache.context(999, 1, req(vec![], vec![]), 4).err(),
            Some(ResponseError::FetchSessionIdNotFound)
        );
        let ctx = cache
            .context(id, FINAL_EPOCH, req(vec![item(0, 1)], vec![]), 5)
            .unwrap();
        assert_eq!(ctx.session_id, 0);
        assert_eq!(
            cache.context(id, 3, req(vec![], vec![]), 6).err(),
            Some(ResponseError::FetchSessionIdNotFound)
        );
    }

    #[test]
    fn full_cache_evicts_the_least_recently_used() {
        let cache = FetchSessionCache::new(1, 60_000);
        let a = cache
            .context(0, INITIAL_EPOCH, req(vec![item(0, 0)], vec![]), 0)
            .unwrap()
            .session_id;
        let b = cache
            .context(0, INITIAL_EPOCH, req(vec![item(0, 0)], vec![]), 1)
            .unwrap()
            .session_id;
        assert_ne!(a, b);
        assert!(cache.context(a, 1, req(vec![], vec![]), 2).is_err());
        assert!(cache.context(b, 1, req(vec![], vec![]), 2).is_ok());
    }
}
