//! The fetcher manager. Mirror fetchers: one task per (mirror, source broker) sends consumer
//! Fetch requests (read_committed, many partitions each) to that broker and appends what comes
//! back through the log's replicated-append path, keeping the source's partition leader epochs.
//! Batches are copied as bytes: never decompressed, never re-checksummed. Which partitions a
//! fetcher holds, in which source epoch, and what each response means is the sans-I/O
//! [`FetcherCore`] that the replica fetchers run on too. [`runtime`] holds each mirror's
//! fetchers and its source connection.

pub(crate) mod rate;
pub(crate) mod runtime;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use parking_lot::Mutex;
use tern_protocol::record_batch::BatchIter;
use tokio::sync::{mpsc, Notify};

use crate::config::MirrorSettings;
use crate::host::{MirrorHost, RaiseEpochError};
use crate::source::{SourceConnection, SourceError};
use crate::stats::MirrorStats;
use tern_replication::{
    whole_batches_from, FetchTarget, FetchedPartition, FetcherCore, LocalLog, Outcome,
};

const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const FENCED_LEADER_EPOCH: i16 = 74;
const UNKNOWN_LEADER_EPOCH: i16 = 75;

/// A topic partition by name.
pub(crate) type TopicPartition = (String, i32);

/// Why fetched batches could not be appended to the local log (the partition's FAILED reason).
#[derive(Debug, thiserror::Error)]
pub(crate) enum AppendError {
    /// This broker no longer leads the partition.
    #[error("this broker no longer leads the partition")]
    NotLeader,
    /// Restarting the local log at the first fetched batch failed.
    #[error("restarting the local log at {offset}: {error}")]
    Restart {
        /// Where the log was to restart.
        offset: i64,
        /// Why it did not.
        error: tern_storage::StorageError,
    },
    /// A fetched batch starts below the local log end.
    #[error("source batch at {base} overlaps the local log end {log_end}")]
    Overlap {
        /// The batch's base offset.
        base: i64,
        /// The local log end offset.
        log_end: i64,
    },
    /// The partition's leader epoch could not be raised to the batches' epoch.
    #[error("raising the leader epoch to {epoch}: {error}")]
    RaiseEpoch {
        /// The epoch asked for.
        epoch: i32,
        /// Why the broker did not raise it.
        error: RaiseEpochError,
    },
    /// The local log refused the batches.
    #[error("appending mirrored batches: {0}")]
    Append(tern_storage::StorageError),
    /// Moving the local log start to the source's failed.
    #[error("moving the log start to {offset}: {error}")]
    LogStart {
        /// The source's log start offset.
        offset: i64,
        /// Why the local log did not follow.
        error: tern_storage::StorageError,
    },
}

/// Why a partition fetched out of range could not be brought back in range (its FAILED reason).
#[derive(Debug, thiserror::Error)]
pub(crate) enum OffsetResetError {
    /// ListOffsets for the source's log start failed.
    #[error("ListOffsets earliest: {0}")]
    Earliest(SourceError),
    /// ListOffsets for the source's log end failed.
    #[error("ListOffsets latest: {0}")]
    Latest(SourceError),
    /// The source answered ListOffsets without both offsets of the partition.
    #[error("ListOffsets on the source failed")]
    NoOffsets,
    /// This broker no longer leads the partition.
    #[error("no longer the local leader")]
    NotLeader,
    /// Restarting the local log at the source's log start failed.
    #[error("restarting the local log at {offset}: {error}")]
    Restart {
        /// The source's log start offset.
        offset: i64,
        /// Why the log did not restart there.
        error: tern_storage::StorageError,
    },
    /// The local log is longer than the source's: never truncated to follow it.
    #[error("the local log ends at {log_end}, beyond the source's end {source_end}: the source topic was recreated or lost data; not truncating")]
    AheadOfSource {
        /// The local log end offset.
        log_end: i64,
        /// The source's log end offset.
        source_end: i64,
    },
}

/// What a fetcher keeps per partition.
#[derive(Debug, Clone)]
pub(crate) struct PartitionFetchState {
    /// Next offset to fetch (the local log end offset).
    pub fetch_offset: i64,
    /// The source leader epoch we believe current, or -1.
    pub source_epoch: i32,
}

/// What a fetcher reports to the manager.
#[derive(Debug)]
pub(crate) enum FetcherEvent {
    /// The partition was taken out of this fetcher: its source leader must be looked up again.
    NeedsLeader {
        /// Mirror name.
        mirror: String,
        /// The partition.
        tp: TopicPartition,
        /// Why.
        reason: String,
    },
    /// Fetching failed for the partition (connection, storage): it was taken out.
    Failed {
        /// Mirror name.
        mirror: String,
        /// The partition.
        tp: TopicPartition,
        /// Why.
        reason: String,
    },
    /// Progress: the source's high watermark for a partition.
    SourceHighWatermark {
        /// Mirror name.
        mirror: String,
        /// The partition.
        tp: TopicPartition,
        /// Source high watermark.
        high_watermark: i64,
        /// The newest record timestamp appended by this fetch, if it appended any.
        newest_timestamp: Option<i64>,
    },
}

/// The shared side of one fetcher task.
pub(crate) struct MirrorFetcher {
    mirror: String,
    /// Source broker id.
    pub broker_id: i32,
    /// The partitions, each with its fetch offset (the local log end) as payload.
    partitions: Mutex<FetcherCore<i64>>,
    stats: Arc<MirrorStats>,
    changed: Notify,
    shutdown: Notify,
}

impl MirrorFetcher {
    /// Starts a fetcher task for `mirror` against source broker `broker_id` at `host:port`,
    /// counting what it does in `stats`.
    pub(crate) fn spawn(
        mirror: &str,
        broker_id: i32,
        addr: (String, u16),
        settings: MirrorSettings,
        host: Arc<dyn MirrorHost>,
        events: mpsc::UnboundedSender<FetcherEvent>,
        stats: Arc<MirrorStats>,
    ) -> Arc<MirrorFetcher> {
        let fetcher = Arc::new(MirrorFetcher {
            mirror: mirror.to_string(),
            broker_id,
            partitions: Mutex::new(FetcherCore::new(settings.fetch_backoff.as_millis() as i64)),
            stats,
            changed: Notify::new(),
            shutdown: Notify::new(),
        });
        let task = fetcher.clone();
        tokio::spawn(async move { task.run(addr, settings, host, events).await });
        fetcher
    }

    /// Adds (or replaces) a partition.
    pub(crate) fn add(&self, tp: TopicPartition, state: PartitionFetchState) {
        self.partitions
            .lock()
            .add(tp, state.source_epoch, state.fetch_offset);
        self.changed.notify_one();
    }

    /// Removes a partition; once this returns, no append for it is in progress or will follow.
    pub(crate) fn remove(&self, tp: &TopicPartition) -> bool {
        self.partitions.lock().remove(tp)
    }

    /// Whether the fetcher holds a partition.
    pub(crate) fn contains(&self, tp: &TopicPartition) -> bool {
        self.partitions.lock().leader_epoch(tp).is_some()
    }

    /// Number of partitions.
    pub(crate) fn len(&self) -> usize {
        self.partitions.lock().len()
    }

    /// Whether the fetcher holds no partition.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stops the task (partitions are dropped).
    pub(crate) fn shutdown(&self) {
        self.partitions.lock().clear();
        self.shutdown.notify_one();
    }

    async fn run(
        self: Arc<Self>,
        addr: (String, u16),
        settings: MirrorSettings,
        host: Arc<dyn MirrorHost>,
        events: mpsc::UnboundedSender<FetcherEvent>,
    ) {
        let mut conn: Option<SourceConnection> = None;
        // The response to a fetch sent while the one before it was being appended.
        let mut ahead: Option<Response> = None;
        loop {
            let now = now_ms();
            let (targets, wakeup) = {
                let core = self.partitions.lock();
                (
                    core.targets(now, |offset| (*offset, -1)),
                    core.next_wakeup_ms(now),
                )
            };
            if targets.is_empty() && ahead.is_none() {
                let wait = wakeup.map_or(Duration::from_secs(1), |t| {
                    Duration::from_millis((t - now).max(1) as u64)
                });
                tokio::select! {
                    _ = self.changed.notified() => {}
                    _ = self.shutdown.notified() => return,
                    _ = tokio::time::sleep(wait) => {}
                }
                continue;
            }
            if conn.is_none() {
                let client_id = format!("tern-mirror-{}", self.mirror);
                let connected = async {
                    // Read at each connection, so renewed certificates are picked up.
                    let security = settings.client_security()?;
                    SourceConnection::connect(
                        &addr.0,
                        addr.1,
                        &client_id,
                        &security,
                        settings.request_timeout,
                    )
                    .await
                }
                .await;
                match connected {
                    Ok(c) => conn = Some(c),
                    Err(e) => {
                        self.fail_all(
                            &events,
                            &format!(
                                "connecting to source broker {} at {}:{}: {e}",
                                self.broker_id, addr.0, addr.1
                            ),
                        );
                        continue;
                    }
                }
            }
            let Some(c) = conn.as_mut() else { continue };
            let (targets, version, response) = match ahead.take() {
                Some(sent) => sent,
                None => {
                    let Some(version) = c.fetch_version() else {
                        self.fail_all(
                            &events,
                            "the source broker offers no Fetch version between 4 and 12",
                        );
                        conn = None;
                        continue;
                    };
                    let request = build_request(&targets, &settings);
                    let response = tokio::select! {
                        r = c.fetch(&request, version) => r,
                        _ = self.shutdown.notified() => return,
                    };
                    (targets, version, response)
                }
            };
            // Under a byte-rate limit the response is applied at once and the next fetch waits.
            let throttle = match (settings.fetch_rate.as_ref(), response.as_ref()) {
                (Some(rate), Ok(r)) => {
                    let bytes: usize = r
                        .responses
                        .iter()
                        .flat_map(|t| t.partitions.iter())
                        .map(|p| p.records.as_ref().map_or(0, |b| b.len()))
                        .sum();
                    rate.take(bytes, std::time::Instant::now())
                }
                _ => Duration::ZERO,
            };
            match response {
                Ok(response) => {
                    if response.error_code != 0 {
                        self.fail_all(
                            &events,
                            &format!("source Fetch error {}", response.error_code),
                        );
                        conn = None;
                        tokio::time::sleep(settings.fetch_backoff).await;
                        continue;
                    }
                    self.stats.fetch_succeeded(
                        &self.mirror,
                        self.broker_id,
                        std::time::Instant::now(),
                    );
                    // Without a rate limit the next fetch goes out now, at the offsets this
                    // response will leave, and this response is appended while the source
                    // answers it (off the async workers: appends write to disk).
                    // Only while catching up: a fetch sent ahead of a caught-up source would
                    // wait out its max wait, and hold back partitions added meanwhile.
                    let next = if throttle.is_zero() {
                        let current = self.partitions.lock().targets(now_ms(), |o| (*o, -1));
                        let next = next_targets(current, &targets, &response);
                        if source_has_more(&next, &response) {
                            next
                        } else {
                            Vec::new()
                        }
                    } else {
                        Vec::new()
                    };
                    let applying = {
                        let fetcher = self.clone();
                        let host = host.clone();
                        let events = events.clone();
                        tokio::task::spawn_blocking(move || {
                            fetcher.apply_response(&targets, response, version, &*host, &events)
                        })
                    };
                    let out_of_range = if next.is_empty() {
                        applying.await
                    } else {
                        let request = build_request(&next, &settings);
                        let (fetched, applied) = tokio::select! {
                            both = async { tokio::join!(c.fetch(&request, version), applying) } => both,
                            _ = self.shutdown.notified() => return,
                        };
                        ahead = Some((next, version, fetched));
                        applied
                    };
                    for tp in out_of_range.unwrap_or_default() {
                        self.reset_out_of_range(&tp, c, &*host, &events).await;
                    }
                    if !throttle.is_zero() {
                        tokio::select! {
                            _ = tokio::time::sleep(throttle) => {}
                            _ = self.shutdown.notified() => return,
                        }
                    }
                }
                Err(e) => {
                    self.fail_all(
                        &events,
                        &format!("fetching from source broker {}: {e}", self.broker_id),
                    );
                    conn = None;
                }
            }
        }
    }

    fn fail_all(&self, events: &mpsc::UnboundedSender<FetcherEvent>, reason: &str) {
        self.stats.fetch_failed(&self.mirror);
        let removed: Vec<TopicPartition> = self.partitions.lock().clear();
        tracing::warn!(mirror = %self.mirror, broker = self.broker_id, partitions = removed.len(), reason, "mirror fetch failed");
        for tp in removed {
            let _ = events.send(FetcherEvent::Failed {
                mirror: self.mirror.clone(),
                tp,
                reason: reason.to_string(),
            });
        }
    }

    fn take_out(&self, tp: &TopicPartition) -> bool {
        self.partitions.lock().remove(tp)
    }

    /// Handles one partition of a fetch response to a request made for `target`.
    /// Appends what a response brought (under the partitions lock, so a partition removed by
    /// the manager never sees a late append); returns the partitions fetched out of range.
    fn apply_response(
        &self,
        targets: &[(FetchTarget, i64)],
        response: FetchResponse,
        version: i16,
        host: &dyn MirrorHost,
        events: &mpsc::UnboundedSender<FetcherEvent>,
    ) -> Vec<TopicPartition> {
        let by_tp: BTreeMap<&TopicPartition, &FetchTarget> =
            targets.iter().map(|(t, _)| (&t.tp, t)).collect();
        let mut out_of_range = Vec::new();
        let mut core = self.partitions.lock();
        for topic in response.responses {
            let name = topic.topic.to_string();
            for data in topic.partitions {
                let tp = (name.clone(), data.partition_index);
                let Some(target) = by_tp.get(&tp) else {
                    continue;
                };
                // A response to a fetch sent ahead is stale for a partition whose append before
                // it did not end where that fetch began (an epoch raise, a failure): it is
                // fetched again from where the log ends.
                if core.payload_mut(&tp).map(|o| *o) != Some(target.fetch_offset) {
                    continue;
                }
                let fetched = FetchedPartition {
                    error_code: data.error_code,
                    high_watermark: data.high_watermark,
                    // No last fetched epoch is sent (the local epochs are this cluster's own),
                    // so the source never answers with a diverging epoch.
                    diverging: None,
                    records: data.records.clone().unwrap_or_default(),
                };
                if self.apply_outcome(&mut core, target, &fetched, &data, version, host, events) {
                    out_of_range.push(tp);
                }
            }
        }
        out_of_range
    }

    /// Brings a partition fetched out of range back in range, or fails it.
    async fn reset_out_of_range(
        &self,
        tp: &TopicPartition,
        conn: &mut SourceConnection,
        host: &dyn MirrorHost,
        events: &mpsc::UnboundedSender<FetcherEvent>,
    ) {
        if let Err(e) = self.handle_out_of_range(tp, conn, host).await {
            self.stats.fetch_failed(&self.mirror);
            if self.take_out(tp) {
                let _ = events.send(FetcherEvent::Failed {
                    mirror: self.mirror.clone(),
                    tp: tp.clone(),
                    reason: e.to_string(),
                });
            }
        }
    }

    /// Carries out one partition's outcome under the partitions lock; true if its offsets
    /// must be looked up on the source (out of range).
    #[allow(clippy::too_many_arguments)]
    fn apply_outcome(
        &self,
        core: &mut FetcherCore<i64>,
        target: &FetchTarget,
        fetched: &FetchedPartition,
        data: &PartitionData,
        version: i16,
        host: &dyn MirrorHost,
        events: &mpsc::UnboundedSender<FetcherEvent>,
    ) -> bool {
        let tp = &target.tp;
        let Some(outcome) = core.on_response(target, fetched, &NoLocalEpochs, now_ms()) else {
            return false;
        };
        match outcome {
            Outcome::Append { .. } | Outcome::HighWatermark(_) => {
                let Some(offset) = core.payload_mut(tp) else {
                    return false;
                };
                match append_fetched(tp, offset, data, host) {
                    Ok(appended) => {
                        if let Some(a) = appended {
                            self.stats.appended(&self.mirror, a.bytes, a.records);
                        }
                        // Reported only after the append worked: it also tells the manager
                        // that the partition has recovered.
                        let _ = events.send(FetcherEvent::SourceHighWatermark {
                            mirror: self.mirror.clone(),
                            tp: tp.clone(),
                            high_watermark: data.high_watermark,
                            newest_timestamp: appended.map(|a| a.newest_timestamp),
                        });
                    }
                    Err(e) => {
                        self.stats.fetch_failed(&self.mirror);
                        core.remove(tp);
                        let _ = events.send(FetcherEvent::Failed {
                            mirror: self.mirror.clone(),
                            tp: tp.clone(),
                            reason: e.to_string(),
                        });
                    }
                }
            }
            Outcome::Backoff(FENCED_LEADER_EPOCH | UNKNOWN_LEADER_EPOCH)
                if version >= 12
                    && data.current_leader.leader_id.0 == self.broker_id
                    && data.current_leader.leader_epoch >= 0 =>
            {
                // The reply names the current epoch of this same leader: adopt it.
                core.set_leader_epoch(tp, data.current_leader.leader_epoch);
            }
            Outcome::ResetOffsets => return true,
            outcome @ (Outcome::Backoff(_) | Outcome::Truncate(_)) => {
                core.remove(tp);
                let reason = match outcome {
                    Outcome::Backoff(NOT_LEADER_OR_FOLLOWER) => "the source leader moved".into(),
                    Outcome::Backoff(FENCED_LEADER_EPOCH) => "fenced leader epoch".into(),
                    Outcome::Backoff(code) => format!("source error code {code}"),
                    _ => "the source answered with a diverging epoch".to_string(),
                };
                let _ = events.send(FetcherEvent::NeedsLeader {
                    mirror: self.mirror.clone(),
                    tp: tp.clone(),
                    reason,
                });
            }
        }
        false
    }

    /// The fetch offset is outside the source log: below its start (retention moved it), so
    /// the local log restarts at the source's start; or above its end, so it is truncated.
    async fn handle_out_of_range(
        &self,
        tp: &TopicPartition,
        conn: &mut SourceConnection,
        host: &dyn MirrorHost,
    ) -> Result<(), OffsetResetError> {
        let earliest = conn
            .list_offsets(&tp.0, &[tp.1], -2)
            .await
            .map_err(OffsetResetError::Earliest)?;
        let latest = conn
            .list_offsets(&tp.0, &[tp.1], -1)
            .await
            .map_err(OffsetResetError::Latest)?;
        let pick = |v: &[(i32, i16, i64)]| {
            v.iter()
                .find(|(p, code, _)| *p == tp.1 && *code == 0)
                .map(|(_, _, o)| *o)
        };
        let (Some(start), Some(end)) = (pick(&earliest), pick(&latest)) else {
            return Err(OffsetResetError::NoOffsets);
        };
        let mut parts = self.partitions.lock();
        let Some(fetch_offset) = parts.payload_mut(tp) else {
            return Ok(());
        };
        let replica = host
            .leader_replica(&tp.0, tp.1)
            .ok_or(OffsetResetError::NotLeader)?;
        let log = &replica.log;
        let leo = log.log_end_offset();
        if leo < start {
            tracing::info!(topic = %tp.0, partition = tp.1, local_end = leo, source_start = start, "source retention passed the mirror: restarting the local log at the source's start");
            log.truncate_fully_and_start_at(start)
                .map_err(|error| OffsetResetError::Restart {
                    offset: start,
                    error,
                })?;
        } else if leo > end {
            // Never truncate mirrored data to follow a shorter source: that is a recreated
            // topic or a source that lost data (unclean election, not supported by the spec).
            // The manager checks the topic id and stops the mirror topic if it changed.
            return Err(OffsetResetError::AheadOfSource {
                log_end: leo,
                source_end: end,
            });
        }
        host.on_log_reset(&tp.0, tp.1);
        *fetch_offset = log.log_end_offset();
        Ok(())
    }
}

/// Milliseconds since the epoch.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A mirror partition's log as the fetcher core sees it: its epochs are this cluster's, never
/// compared with the source's.
struct NoLocalEpochs;

impl LocalLog for NoLocalEpochs {
    fn log_end_offset(&self) -> i64 {
        -1
    }
    fn latest_epoch(&self) -> Option<i32> {
        None
    }
    fn end_offset_for_epoch(&self, _: i32) -> Option<(i32, i64)> {
        None
    }
    fn high_watermark(&self) -> i64 {
        -1
    }
}

/// The targets a fetch was made for, the version, and its response.
type Response = (
    Vec<(FetchTarget, i64)>,
    i16,
    Result<FetchResponse, SourceError>,
);

/// The fetch to send while `response` (to a fetch for `sent`) is appended: the fetcher's
/// `current` targets, each partition that answered without an error at the offset after its
/// last whole batch (where the append leaves the log). Those that answered with an error are
/// left out until the append step has dealt with them.
fn next_targets(
    current: Vec<(FetchTarget, i64)>,
    sent: &[(FetchTarget, i64)],
    response: &FetchResponse,
) -> Vec<(FetchTarget, i64)> {
    let mut answers: BTreeMap<(&str, i32), &PartitionData> = BTreeMap::new();
    for t in &response.responses {
        for p in &t.partitions {
            answers.insert((t.topic.as_str(), p.partition_index), p);
        }
    }
    let sent: BTreeMap<&TopicPartition, &FetchTarget> =
        sent.iter().map(|(t, _)| (&t.tp, t)).collect();
    let empty = bytes::Bytes::new();
    current
        .into_iter()
        .filter_map(|(mut target, payload)| {
            // Only an answer to a fetch made where the log ends now gets appended (others are
            // stale: added or re-added since, or an append that stopped short before it);
            // the rest are fetched from where the log ends.
            let Some(asked) = sent.get(&target.tp).filter(|a| {
                a.generation == target.generation && a.fetch_offset == target.fetch_offset
            }) else {
                return Some((target, payload));
            };
            let Some(data) = answers.get(&(target.tp.0.as_str(), target.tp.1)) else {
                return Some((target, payload));
            };
            if data.error_code != 0 {
                return None;
            }
            let records = data.records.as_ref().unwrap_or(&empty);
            let (batches, _) = whole_batches_from(records, asked.fetch_offset);
            target.fetch_offset = BatchIter::new(&batches)
                .map_while(Result::ok)
                .last()
                .map_or(asked.fetch_offset, |(h, _)| h.next_offset());
            Some((target, payload))
        })
        .collect()
}

/// Whether the source holds more than `response` brought: some partition's high watermark is
/// past where the next fetch for it starts, so that fetch is answered at once.
fn source_has_more(next: &[(FetchTarget, i64)], response: &FetchResponse) -> bool {
    let starts: BTreeMap<(&str, i32), i64> = next
        .iter()
        .map(|(t, _)| ((t.tp.0.as_str(), t.tp.1), t.fetch_offset))
        .collect();
    response.responses.iter().any(|t| {
        t.partitions.iter().any(|p| {
            p.error_code == 0
                && starts
                    .get(&(t.topic.as_str(), p.partition_index))
                    .is_some_and(|start| p.high_watermark > *start)
        })
    })
}

/// A consumer Fetch (read_committed) for `targets`, grouped by topic.
fn build_request(targets: &[(FetchTarget, i64)], settings: &MirrorSettings) -> FetchRequest {
    let mut topics: BTreeMap<&str, Vec<FetchPartition>> = BTreeMap::new();
    for (t, _) in targets {
        topics.entry(t.tp.0.as_str()).or_default().push(
            FetchPartition::default()
                .with_partition(t.tp.1)
                .with_current_leader_epoch(t.current_leader_epoch)
                .with_fetch_offset(t.fetch_offset)
                .with_last_fetched_epoch(-1)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(settings.fetch_partition_max_bytes),
        );
    }
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(settings.fetch_wait_max_ms)
        .with_min_bytes(settings.fetch_min_bytes)
        .with_max_bytes(match &settings.fetch_rate {
            // No single fetch asks for more than a second of the allowed rate.
            Some(rate) => settings
                .fetch_response_max_bytes
                .min(rate.max_fetch_bytes()),
            None => settings.fetch_response_max_bytes,
        })
        .with_isolation_level(1)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(
            topics
                .into_iter()
                .map(|(t, ps)| {
                    FetchTopic::default()
                        .with_topic(TopicName(StrBytes::from_string(t.to_string())))
                        .with_partitions(ps)
                })
                .collect(),
        )
}

/// The highest partition leader epoch among whole batches (-1 if none has one).
/// What one append of fetched batches added to the local log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Appended {
    /// Bytes of the batches.
    pub bytes: u64,
    /// Records in them.
    pub records: u64,
    /// Their newest record timestamp (the batches' max timestamp).
    pub newest_timestamp: i64,
    /// Their highest partition leader epoch.
    max_epoch: i32,
}

/// Reads the batch headers only: nothing is decompressed.
fn summarize(batches: &[u8]) -> Appended {
    let mut a = Appended {
        bytes: batches.len() as u64,
        records: 0,
        newest_timestamp: -1,
        max_epoch: -1,
    };
    for (h, _) in BatchIter::new(batches).map_while(Result::ok) {
        a.records += h.records_count.max(0) as u64;
        a.newest_timestamp = a.newest_timestamp.max(h.max_timestamp);
        a.max_epoch = a.max_epoch.max(h.partition_leader_epoch);
    }
    a
}

/// Appends one partition's fetched batches; returns what was appended, if anything.
fn append_fetched(
    tp: &TopicPartition,
    fetch_offset: &mut i64,
    data: &PartitionData,
    host: &dyn MirrorHost,
) -> Result<Option<Appended>, AppendError> {
    let replica = host
        .leader_replica(&tp.0, tp.1)
        .ok_or(AppendError::NotLeader)?;
    let log = &replica.log;
    let mut appended = None;
    if let Some(records) = data.records.as_ref().filter(|r| !r.is_empty()) {
        let (batches, first_base) = whole_batches_from(records, *fetch_offset);
        if !batches.is_empty() {
            let leo = log.log_end_offset();
            if let Some(base) = first_base.filter(|b| *b < leo) {
                if leo == log.log_start_offset() {
                    // The source's log starts inside this batch (DeleteRecords or retention):
                    // keep the whole batch, as the source serves it.
                    log.truncate_fully_and_start_at(base).map_err(|error| {
                        AppendError::Restart {
                            offset: base,
                            error,
                        }
                    })?;
                } else {
                    return Err(AppendError::Overlap { base, log_end: leo });
                }
            }
            // The batches keep the source's partition leader epochs, byte for byte; this
            // partition's own epoch is raised to at least theirs first, so its epochs stay
            // monotonic once it takes writes of its own. The next fetch retries the append.
            let summary = summarize(&batches);
            let max_epoch = summary.max_epoch;
            if max_epoch > replica.leader_epoch {
                host.raise_leader_epoch(&tp.0, tp.1, max_epoch)
                    .map_err(|error| AppendError::RaiseEpoch {
                        epoch: max_epoch,
                        error,
                    })?;
                return Ok(None);
            }
            log.append_replicated(batches, None)
                .map_err(AppendError::Append)?;
            appended = Some(summary);
        }
    }
    // Follow the source's log start (retention, DeleteRecords) once we hold data up to it.
    let source_start = data.log_start_offset;
    if source_start > log.log_start_offset() && source_start <= log.log_end_offset() {
        log.delete_records_before(source_start)
            .map_err(|error| AppendError::LogStart {
                offset: source_start,
                error,
            })?;
    }
    *fetch_offset = log.log_end_offset();
    if appended.is_some() {
        host.on_mirror_append(&tp.0, tp.1);
    }
    Ok(appended)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::LeaderReplica;
    use bytes::{Bytes, BytesMut};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tern_protocol::record_batch::Compression;
    use tern_protocol::record_batch::RecordBatchHeader;
    use tern_protocol::records::RecordBatchBuilder;
    use tern_storage::{Log, LogConfig};

    struct OneLog {
        log: Arc<Log>,
        appends: AtomicUsize,
        raised: AtomicUsize,
    }

    impl MirrorHost for OneLog {
        fn node_id(&self) -> i32 {
            1
        }
        fn broker_endpoint(&self, _: i32) -> Option<(String, u16)> {
            None
        }
        fn watch_high_watermark(
            &self,
            _: &str,
            _: i32,
        ) -> Option<tokio::sync::watch::Receiver<i64>> {
            None
        }
        fn leader_replica(&self, _: &str, _: i32) -> Option<LeaderReplica> {
            Some(LeaderReplica {
                log: self.log.clone(),
                leader_epoch: 7,
            })
        }
        fn on_mirror_append(&self, _: &str, _: i32) {
            self.appends.fetch_add(1, Ordering::SeqCst);
        }
        fn on_log_reset(&self, _: &str, _: i32) {}
        fn followers_end_at_or_below(&self, _: &str, _: i32, _: i64) -> bool {
            true
        }

        fn raise_leader_epoch(
            &self,
            _: &str,
            _: i32,
            at_least: i32,
        ) -> Result<(), crate::host::RaiseEpochError> {
            self.raised.store(at_least as usize, Ordering::SeqCst);
            Ok(())
        }
        fn reserve_producer_ids_above(&self, _: i64) {}
        fn sync_group_offsets(&self, _: &str, _: Vec<crate::host::CommittedOffset>) {}
        fn sync_share_group_offsets(&self, _: &str, _: Vec<crate::host::CommittedOffset>) {}
    }

    fn host() -> (tempfile::TempDir, OneLog) {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(&dir.path().join("t-0"), LogConfig::default()).unwrap();
        (
            dir,
            OneLog {
                log: Arc::new(log),
                appends: AtomicUsize::new(0),
                raised: AtomicUsize::new(0),
            },
        )
    }

    fn data(records: Bytes, log_start: i64, hw: i64) -> PartitionData {
        PartitionData::default()
            .with_records(Some(records))
            .with_log_start_offset(log_start)
            .with_high_watermark(hw)
    }

    fn concat(batches: &[Bytes]) -> Bytes {
        let mut b = BytesMut::new();
        for x in batches {
            b.extend_from_slice(x);
        }
        b.freeze()
    }

    #[test]
    fn appends_source_bytes_unchanged_leader_epochs_included() {
        let (_dir, host) = host();
        let source = concat(&[batch_in_epoch(0, 3, 2), batch_in_epoch(3, 2, 7)]);
        let tp = ("t".to_string(), 0);
        let mut st: i64 = 0;
        let appended = append_fetched(&tp, &mut st, &data(source.clone(), 0, 5), &host)
            .unwrap()
            .expect("appended");
        assert_eq!(
            (appended.bytes, appended.records, appended.newest_timestamp),
            (source.len() as u64, 5, 1002),
            "counted from the batch headers"
        );
        assert_eq!(st, 5);
        assert_eq!(host.appends.load(Ordering::SeqCst), 1);
        let read = host.log.read(0, 1 << 20, None, true).unwrap().records;
        assert_eq!(read.len(), source.len());
        let mut pos = 0;
        while pos < read.len() {
            let h = RecordBatchHeader::parse(&read[pos..]).unwrap();
            let end = pos + h.size();
            assert_eq!(&read[pos..end], &source[pos..end]);
            pos = end;
        }
        assert_eq!(host.log.epoch_entries(), vec![(2, 0), (7, 3)]);
        // A late duplicate of what is already there is skipped, not appended twice.
        assert!(append_fetched(&tp, &mut st, &data(source, 0, 5), &host)
            .unwrap()
            .is_none());
        assert_eq!(host.log.log_end_offset(), 5);
    }

    #[test]
    fn a_source_epoch_above_the_local_one_is_raised_before_appending() {
        let (_dir, host) = host();
        let tp = ("t".to_string(), 0);
        let mut st: i64 = 0;
        let source = concat(&[batch_in_epoch(0, 3, 5), batch_in_epoch(3, 2, 9)]);
        assert!(append_fetched(&tp, &mut st, &data(source, 0, 5), &host)
            .unwrap()
            .is_none());
        assert_eq!(host.raised.load(Ordering::SeqCst), 9);
        assert_eq!(
            host.log.log_end_offset(),
            0,
            "nothing appended above the local epoch"
        );
        assert_eq!(st, 0, "fetched again from the same offset");
    }

    #[test]
    fn follows_a_source_log_start_inside_a_batch() {
        let (_dir, host) = host();
        host.log.truncate_fully_and_start_at(4).unwrap();
        let tp = ("t".to_string(), 0);
        let mut st: i64 = 4;
        // The source starts at 4, inside the batch 3..=5, and serves that whole batch.
        let source = concat(&[batch(3, 3), batch(6, 2)]);
        append_fetched(&tp, &mut st, &data(source, 4, 8), &host).unwrap();
        assert_eq!(host.log.log_start_offset(), 4);
        assert_eq!(host.log.log_end_offset(), 8);
        let read = host.log.read(4, 1 << 20, None, true).unwrap();
        assert_eq!(read.first_offset, 3);
        // Retention on the source moves its start to 6: ours follows.
        append_fetched(&tp, &mut st, &data(Bytes::new(), 6, 8), &host).unwrap();
        assert_eq!(host.log.log_start_offset(), 6);
    }

    #[test]
    fn keeps_compaction_gaps() {
        let (_dir, host) = host();
        let tp = ("t".to_string(), 0);
        let mut st: i64 = 0;
        // Offsets 3..10 were compacted away on the source.
        let source = concat(&[batch(0, 3), batch(10, 2)]);
        append_fetched(&tp, &mut st, &data(source, 0, 12), &host).unwrap();
        assert_eq!(host.log.log_end_offset(), 12);
        let read = host.log.read(3, 1 << 20, None, true).unwrap();
        assert_eq!(read.first_offset, 10);
    }

    fn target(
        topic: &str,
        partition: i32,
        fetch_offset: i64,
        generation: u64,
    ) -> (FetchTarget, i64) {
        let t = FetchTarget {
            tp: (topic.to_string(), partition),
            fetch_offset,
            last_fetched_epoch: -1,
            current_leader_epoch: 0,
            generation,
        };
        (t, fetch_offset)
    }

    #[test]
    fn the_fetch_sent_ahead_starts_where_each_append_will_end() {
        use kafka_protocol::messages::fetch_response::FetchableTopicResponse;
        // p0 answered two whole batches and a partial one; p1 an error; p2 nothing new; p3
        // was asked at an offset its log no longer ends at; p4 was re-added since; p5 is new.
        let partial = batch(20, 4).slice(..30);
        let answers = vec![
            data(concat(&[batch(10, 5), batch(15, 5), partial]), 0, 30).with_partition_index(0),
            data(Bytes::new(), 0, 0)
                .with_partition_index(1)
                .with_error_code(NOT_LEADER_OR_FOLLOWER),
            data(Bytes::new(), 0, 7).with_partition_index(2),
            data(batch(3, 2), 0, 9).with_partition_index(3),
            data(batch(50, 2), 0, 60).with_partition_index(4),
        ];
        let response =
            FetchResponse::default().with_responses(vec![FetchableTopicResponse::default()
                .with_topic(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(answers)]);
        let sent = vec![
            target("t", 0, 10, 1),
            target("t", 1, 4, 1),
            target("t", 2, 7, 1),
            target("t", 3, 3, 1),
            target("t", 4, 50, 1),
        ];
        let current = vec![
            target("t", 0, 10, 1),
            target("t", 1, 4, 1),
            target("t", 2, 7, 1),
            target("t", 3, 1, 1),
            target("t", 4, 0, 2),
            target("t", 5, 0, 1),
        ];
        let next: Vec<(i32, i64)> = next_targets(current, &sent, &response)
            .into_iter()
            .map(|(t, _)| (t.tp.1, t.fetch_offset))
            .collect();
        assert_eq!(next, vec![(0, 20), (2, 7), (3, 1), (4, 0), (5, 0)]);
        // p0's source holds up to 30, past the 20 it is fetched from next: fetch ahead.
        let one = |hw: i64, error: i16| {
            FetchResponse::default().with_responses(vec![FetchableTopicResponse::default()
                .with_topic(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(vec![data(Bytes::new(), 0, hw)
                    .with_partition_index(0)
                    .with_error_code(error)])])
        };
        let from_20 = vec![target("t", 0, 20, 1)];
        assert!(source_has_more(&from_20, &one(30, 0)));
        // Caught up (or an error): a fetch sent now would wait, so none is sent ahead.
        assert!(!source_has_more(&from_20, &one(20, 0)));
        assert!(!source_has_more(&from_20, &one(30, NOT_LEADER_OR_FOLLOWER)));
        assert!(!source_has_more(&[], &one(30, 0)));
    }

    fn batch(base: i64, n: usize) -> Bytes {
        batch_in_epoch(base, n, 0)
    }

    /// A batch as a source leader in `epoch` wrote it.
    fn batch_in_epoch(base: i64, n: usize, epoch: i32) -> Bytes {
        let mut b = RecordBatchBuilder::new(Compression::None).base_offset(base);
        for i in 0..n {
            b.push(1000 + i as i64, Some(b"k"), Some(b"value"), &[])
                .unwrap();
        }
        let mut batch = BytesMut::from(&b.build().unwrap()[..]);
        tern_protocol::record_batch::set_partition_leader_epoch(&mut batch, epoch);
        batch.freeze()
    }
}
