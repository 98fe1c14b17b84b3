//! What one mirror's task works with: its settings, its connection to the source, the source's
//! metadata and its fetchers. Each mirror has its own task and runtime, so a slow or
//! unreachable source holds up only its own mirror. The fetchers are shared with the
//! coordinator's loop, which takes partitions away from them (this broker no longer leads
//! them) without waiting for the mirror's task.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::config::{InvalidMirrorConfig, MirrorSettings};
use crate::fetcher::{MirrorFetcher, TopicPartition};
use crate::source::{connect_bootstrap, SourceConnection, SourceError, SourceMetadata};

/// Why a mirror's task has no source connection or source metadata.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SourceUnavailable {
    /// The mirror's TLS or SASL settings are unusable (files unreadable since create).
    #[error(transparent)]
    Security(#[from] InvalidMirrorConfig),
    /// No bootstrap server could be connected to.
    #[error(transparent)]
    Connect(SourceError),
    /// The source's metadata could not be read, on a new connection too.
    #[error("source metadata: {0}")]
    Metadata(SourceError),
}

/// A fetcher's key: the source broker id and its slot among that broker's
/// `mirror.fetch.connections` fetchers.
type FetcherKey = (i32, usize);

/// A mirror's fetchers.
#[derive(Clone, Default)]
pub(crate) struct Fetchers(Arc<Mutex<HashMap<FetcherKey, Arc<MirrorFetcher>>>>);

impl Fetchers {
    /// Stops every fetcher.
    pub(crate) fn shutdown(&self) {
        for (_, f) in self.0.lock().drain() {
            f.shutdown();
        }
    }

    /// Takes a partition away from whichever fetcher has it.
    pub(crate) fn remove_partition(&self, tp: &TopicPartition) {
        for f in self.0.lock().values() {
            f.remove(tp);
        }
    }

    /// Whether some fetcher has the partition.
    pub(crate) fn is_fetching(&self, tp: &TopicPartition) -> bool {
        self.0.lock().values().any(|f| f.contains(tp))
    }

    /// The fetcher of `tp` on source broker `leader`, one of `connections`, made by `spawn`
    /// if there is none. A partition always lands on the same one of a broker's fetchers.
    pub(crate) fn get_or_spawn(
        &self,
        leader: i32,
        tp: &TopicPartition,
        connections: usize,
        spawn: impl FnOnce() -> Arc<MirrorFetcher>,
    ) -> Arc<MirrorFetcher> {
        let slot = fetcher_slot(tp, connections);
        self.0
            .lock()
            .entry((leader, slot))
            .or_insert_with(spawn)
            .clone()
    }

    /// Stops and drops fetchers left without partitions.
    pub(crate) fn drop_idle(&self) {
        self.0.lock().retain(|_, f| {
            let keep = !f.is_empty();
            if !keep {
                f.shutdown();
            }
            keep
        });
    }
}

/// Which of `connections` fetchers of a broker takes `tp`: the partitions of a topic go round
/// the fetchers in turn, starting at a place its name picks.
fn fetcher_slot(tp: &TopicPartition, connections: usize) -> usize {
    let start =
        tp.0.bytes()
            .fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize));
    start.wrapping_add(tp.1.max(0) as usize) % connections.max(1)
}

/// One mirror's source side.
pub(crate) struct MirrorRuntime {
    pub(crate) settings: MirrorSettings,
    pub(crate) source: Option<SourceConnection>,
    pub(crate) cluster_id: Option<String>,
    metadata: Option<(SourceMetadata, Instant)>,
    pub(crate) fetchers: Fetchers,
    pub(crate) last_sync: Option<Instant>,
}

impl MirrorRuntime {
    /// A runtime for a mirror with these configs; connects on first use.
    pub(crate) fn new(configs: &BTreeMap<String, String>) -> Self {
        MirrorRuntime {
            settings: MirrorSettings::from_configs(configs),
            source: None,
            cluster_id: None,
            metadata: None,
            fetchers: Fetchers::default(),
            last_sync: None,
        }
    }

    /// The connection to the source, made if there is none.
    pub(crate) async fn connection(
        &mut self,
        mirror: &str,
    ) -> Result<&mut SourceConnection, SourceUnavailable> {
        let conn = match self.source.take() {
            Some(conn) => conn,
            None => {
                let security = self.settings.client_security()?;
                connect_bootstrap(
                    &self.settings.bootstrap_servers,
                    &format!("tern-mirror-{mirror}"),
                    &security,
                    self.settings.request_timeout,
                )
                .await
                .map_err(SourceUnavailable::Connect)?
            }
        };
        Ok(self.source.insert(conn))
    }

    /// Source metadata no older than `max_age` (all topics).
    pub(crate) async fn metadata(
        &mut self,
        mirror: &str,
        max_age: Duration,
    ) -> Result<&SourceMetadata, SourceUnavailable> {
        let fresh = self
            .metadata
            .as_ref()
            .is_some_and(|(_, at)| at.elapsed() < max_age);
        // Stale metadata stays cached when reading it again fails.
        let entry = match self.metadata.take_if(|_| fresh) {
            Some(entry) => entry,
            None => (self.read_metadata(mirror).await?, Instant::now()),
        };
        Ok(&self.metadata.insert(entry).0)
    }

    /// Reads the source's metadata. A cached connection may be to a source broker that has
    /// died since: one retry on a new connection (to any bootstrap server) before the answer
    /// is a failure.
    async fn read_metadata(&mut self, mirror: &str) -> Result<SourceMetadata, SourceUnavailable> {
        let mut retried = false;
        loop {
            let reused = self.source.is_some();
            let conn = self.connection(mirror).await?;
            match conn.metadata(None).await {
                Ok(m) => {
                    if m.cluster_id.is_some() {
                        self.cluster_id = m.cluster_id.clone();
                    }
                    return Ok(m);
                }
                Err(e) => {
                    self.source = None;
                    if !reused || retried {
                        return Err(SourceUnavailable::Metadata(e));
                    }
                    retried = true;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fetcher_slot;

    #[test]
    fn partitions_spread_over_the_connections() {
        let mut counts = [0; 3];
        for p in 0..12 {
            counts[fetcher_slot(&("orders".to_string(), p), 3)] += 1;
        }
        assert_eq!(counts, [4, 4, 4]);
        assert!((0..12).all(|p| fetcher_slot(&("orders".to_string(), p), 1) == 0));
        assert_eq!(
            fetcher_slot(&("t".into(), 5), 4),
            fetcher_slot(&("t".into(), 5), 4)
        );
    }
}
