//! Share sessions (KIP-932): for each (group, member), the partitions its ShareFetch
//! requests read, and the epoch the next request must carry. Epoch 0 opens a session, -1
//! closes it, and each other request must bring the session's epoch, which then moves on. A
//! session also ends when the connection that opened it closes, as in Kafka; there is no idle
//! timeout (acquisition locks run out on their own).

use std::collections::{BTreeSet, HashMap};

use kafka_protocol::ResponseError;
use parking_lot::Mutex;

/// A share-partition by (topic, partition).
pub(crate) type TopicPartition = (String, i32);

/// The epoch that opens a session.
pub(crate) const OPEN_EPOCH: i32 = 0;
/// The epoch that closes a session.
pub(crate) const CLOSE_EPOCH: i32 = -1;

struct Session {
    epoch: i32,
    partitions: BTreeSet<TopicPartition>,
    /// The connection that opened it.
    connection: u64,
}

/// The share sessions of this broker.
pub(crate) struct ShareSessions {
    sessions: Mutex<HashMap<(String, String), Session>>,
    max_sessions: usize,
}

/// What a request's epoch made of its session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SessionStep {
    /// Opened, or moved on: the partitions to read.
    Fetch(Vec<TopicPartition>),
    /// Closed: the partitions it read, whose records the member still holds go back.
    Closed(Vec<TopicPartition>),
}

fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

impl ShareSessions {
    /// At most `max_sessions` sessions (`group.share.max.share.sessions`).
    pub(crate) fn new(max_sessions: usize) -> Self {
        ShareSessions {
            sessions: Mutex::new(HashMap::new()),
            max_sessions,
        }
    }

    /// ShareFetch's session step: epoch 0 replaces any session with one of `added`, tied to
    /// `connection`; -1 closes it; another epoch must be the session's, and adds `added` and
    /// drops `forgotten`.
    pub(crate) fn fetch(
        &self,
        (group, member): (&str, &str),
        epoch: i32,
        added: Vec<TopicPartition>,
        forgotten: Vec<TopicPartition>,
        connection: u64,
    ) -> Result<SessionStep, ResponseError> {
        let key = (group.to_string(), member.to_string());
        let mut sessions = self.sessions.lock();
        match epoch {
            OPEN_EPOCH => {
                if !sessions.contains_key(&key) && sessions.len() >= self.max_sessions {
                    return Err(ResponseError::ShareSessionLimitReached);
                }
                let partitions: BTreeSet<TopicPartition> = added.into_iter().collect();
                let fetch = partitions.iter().cloned().collect();
                sessions.insert(
                    key,
                    Session {
                        epoch: 1,
                        partitions,
                        connection,
                    },
                );
                Ok(SessionStep::Fetch(fetch))
            }
            CLOSE_EPOCH => {
                let s = sessions
                    .remove(&key)
                    .ok_or(ResponseError::ShareSessionNotFound)?;
                Ok(SessionStep::Closed(s.partitions.into_iter().collect()))
            }
            _ => {
                let s = sessions
                    .get_mut(&key)
                    .ok_or(ResponseError::ShareSessionNotFound)?;
                if s.epoch != epoch {
                    return Err(ResponseError::InvalidShareSessionEpoch);
                }
                s.epoch = next_epoch(s.epoch);
                s.partitions.extend(added);
                for f in &forgotten {
                    s.partitions.remove(f);
                }
                Ok(SessionStep::Fetch(s.partitions.iter().cloned().collect()))
            }
        }
    }

    /// ShareAcknowledge's session step: epoch 0 is refused; -1 closes the session; another
    /// epoch must be the session's, which moves on.
    pub(crate) fn acknowledge(
        &self,
        group: &str,
        member: &str,
        epoch: i32,
    ) -> Result<SessionStep, ResponseError> {
        match epoch {
            OPEN_EPOCH => Err(ResponseError::InvalidShareSessionEpoch),
            // Never opens a session, so no connection is recorded.
            _ => self.fetch((group, member), epoch, Vec::new(), Vec::new(), 0),
        }
    }

    /// Whether a session opened on `connection` is open.
    pub(crate) fn any_of(&self, connection: u64) -> bool {
        self.sessions
            .lock()
            .values()
            .any(|s| s.connection == connection)
    }

    /// Ends the sessions opened on `connection` (it closed): (group, member, partitions) of
    /// each.
    pub(crate) fn close_connection(
        &self,
        connection: u64,
    ) -> Vec<(String, String, Vec<TopicPartition>)> {
        let mut sessions = self.sessions.lock();
        let gone: Vec<(String, String)> = sessions
            .iter()
            .filter(|(_, s)| s.connection == connection)
            .map(|(k, _)| k.clone())
            .collect();
        gone.into_iter()
            .filter_map(|k| {
                let s = sessions.remove(&k)?;
                Some((k.0, k.1, s.partitions.into_iter().collect()))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(p: i32) -> TopicPartition {
        ("t".to_string(), p)
    }

    #[test]
    fn epochs_open_move_on_and_close() {
        let s = ShareSessions::new(10);
        assert_eq!(
            s.fetch(("g", "m"), 3, vec![], vec![], 0),
            Err(ResponseError::ShareSessionNotFound)
        );
        assert_eq!(
            s.fetch(("g", "m"), 0, vec![tp(0)], vec![], 0),
            Ok(SessionStep::Fetch(vec![tp(0)]))
        );
        // An incremental request reads every partition of the session.
        assert_eq!(
            s.fetch(("g", "m"), 1, vec![tp(1)], vec![], 0),
            Ok(SessionStep::Fetch(vec![tp(0), tp(1)]))
        );
        assert_eq!(
            s.fetch(("g", "m"), 1, vec![], vec![], 0),
            Err(ResponseError::InvalidShareSessionEpoch)
        );
        assert_eq!(
            s.acknowledge("g", "m", 0),
            Err(ResponseError::InvalidShareSessionEpoch)
        );
        assert_eq!(
            s.acknowledge("g", "m", 2),
            Ok(SessionStep::Fetch(vec![tp(0), tp(1)]))
        );
        assert_eq!(
            s.fetch(("g", "m"), 3, vec![], vec![tp(0)], 0),
            Ok(SessionStep::Fetch(vec![tp(1)]))
        );
        assert_eq!(
            s.acknowledge("g", "m", -1),
            Ok(SessionStep::Closed(vec![tp(1)]))
        );
        assert_eq!(
            s.fetch(("g", "m"), -1, vec![], vec![], 0),
            Err(ResponseError::ShareSessionNotFound)
        );
    }

    #[test]
    fn the_session_limit_and_closed_connections() {
        let s = ShareSessions::new(1);
        s.fetch(("g", "a"), 0, vec![tp(0)], vec![], 7).unwrap();
        assert_eq!(
            s.fetch(("g", "b"), 0, vec![tp(0)], vec![], 8),
            Err(ResponseError::ShareSessionLimitReached)
        );
        // Reopening one's own session is no new session; it moves to the new connection.
        s.fetch(("g", "a"), 0, vec![tp(1)], vec![], 5).unwrap();
        assert!(s.close_connection(7).is_empty());
        assert!(s.any_of(5));
        assert_eq!(
            s.close_connection(5),
            vec![("g".to_string(), "a".to_string(), vec![tp(1)])]
        );
        assert!(!s.any_of(5));
        assert_eq!(
            s.fetch(("g", "a"), 1, vec![], vec![], 5),
            Err(ResponseError::ShareSessionNotFound)
        );
    }
}
