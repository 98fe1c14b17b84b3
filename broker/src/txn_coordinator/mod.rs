//! The transaction coordinator: transactional producers' ids and epochs, their open
//! transactions, and the markers that end them, persisted in `__transaction_state` in Kafka's
//! record formats. A transactional id lives in the partition its id hashes to; the leader of
//! that partition coordinates it (as groups follow `__consumer_offsets`).

pub(crate) mod leader_add;
pub(crate) mod markers;
pub(crate) mod metadata;
pub mod state_log;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{ProducerId, TopicName, WriteTxnMarkersRequest};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use tern_controller::Controller;
use tern_protocol::client::KafkaConnection;

use crate::group_coordinator::offsets_topic::OFFSETS_TOPIC;
use crate::group_coordinator::{now_ms, GroupCoordinator};
use crate::replica_manager::{Partition, ReplicaManager};
use crate::replication::delayed_produce::{wait_for_isr, PendingAck};
use markers::Marker;
use metadata::{EndOutcome, InitOutcome, TxnMetadata, TxnState};
use state_log::TXN_STATE_TOPIC;

/// Settings of the coordinator (Kafka's `transaction.*` and `transactional.id.*` configs).
#[derive(Debug, Clone)]
pub struct TxnConfig {
    /// `transaction.state.log.num.partitions`.
    pub num_partitions: i32,
    /// `transaction.state.log.replication.factor` (capped at the live brokers).
    pub replication_factor: i16,
    /// `transaction.state.log.min.isr`.
    pub min_isr: i16,
    /// `transaction.state.log.segment.bytes`.
    pub segment_bytes: i64,
    /// `transaction.max.timeout.ms`.
    pub max_timeout_ms: i32,
    /// `transactional.id.expiration.ms`.
    pub id_expiration_ms: i64,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`.
    pub abort_interval_ms: u64,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms`.
    pub remove_expired_interval_ms: u64,
}

/// Where producer ids come from: the block this broker holds, refilled from the controller.
pub struct ProducerIdSource {
    /// (next id, end of block), shared with the mirror (which reserves ids above mirrored ones).
    pub block: Arc<Mutex<(i64, i64)>>,
    /// Allocates blocks.
    pub controller: Arc<Controller>,
}

impl ProducerIdSource {
    /// The next producer id, taking a new block from the controller when needed.
    pub fn next(&self) -> Result<i64, tern_protocol::error::ApiError> {
        let mut ids = self.block.lock();
        if ids.0 >= ids.1 {
            let (first, count) = self.controller.allocate_producer_ids()?;
            *ids = (first, first + count);
        }
        let id = ids.0;
        ids.0 += 1;
        Ok(id)
    }
}

/// A transaction as ListTransactions shows it.
#[derive(Debug, Clone)]
pub struct TxnListing {
    /// The transactional id.
    pub transactional_id: String,
    /// Its producer id.
    pub producer_id: i64,
    /// Its state.
    pub state: TxnState,
    /// Time since its last transaction started (ms), as ListTransactions' duration filter
    /// measures it.
    pub duration_ms: i64,
}

/// How long one round of markers may wait before the ones left are retried.
const MARKER_TIMEOUT: Duration = Duration::from_secs(10);
/// WriteTxnMarkers v2 carries each marker's transaction version (KIP-890).
const MARKERS_VERSION: i16 = 2;
/// Pause between rounds of markers for partitions that could not take them yet.
const MARKER_RETRY_BACKOFF: Duration = Duration::from_millis(200);

/// A marker a partition leader refuses for good (a newer producer epoch or coordinator wrote
/// there since): retrying cannot succeed, as Kafka's marker channel stops too.
fn marker_refused_for_good(e: ResponseError) -> bool {
    matches!(
        e,
        ResponseError::InvalidProducerEpoch | ResponseError::TransactionCoordinatorFenced
    )
}

/// The transaction coordinator of this broker.
pub struct TransactionCoordinator {
    /// Settings.
    pub config: TxnConfig,
    node_id: i32,
    inter_broker_listener: String,
    replicas: Arc<ReplicaManager>,
    controller: Arc<Controller>,
    groups: Arc<GroupCoordinator>,
    producer_ids: ProducerIdSource,
    /// The ids of the partitions this broker has loaded, in memory as their logs say. Held
    /// while a partition loads, so that no request sees it half loaded.
    txns: Mutex<HashMap<String, TxnMetadata>>,
    /// The `__transaction_state` partitions loaded (requests for the others answer
    /// COORDINATOR_LOAD_IN_PROGRESS until their leadership listener has run).
    loaded: Mutex<HashSet<i32>>,
    /// Transactional ids whose markers a task is writing now.
    completing: Mutex<HashSet<String>>,
    /// Connections to the other brokers' coordinators, for transaction version 2's adds.
    coordinators: crate::inter_broker::BrokerClient,
}

/// What a change to one id does: the value handed back, and whether a record is written.
type Change<T> = Result<(T, bool), ResponseError>;

impl TransactionCoordinator {
    /// A coordinator over the partitions of `replicas`.
    pub fn new(
        config: TxnConfig,
        node_id: i32,
        inter_broker_listener: String,
        replicas: Arc<ReplicaManager>,
        groups: Arc<GroupCoordinator>,
        producer_ids: ProducerIdSource,
    ) -> Self {
        let coordinators = crate::inter_broker::BrokerClient::new(
            node_id,
            inter_broker_listener.clone(),
            "txn-add-partitions",
        );
        TransactionCoordinator {
            config,
            node_id,
            inter_broker_listener,
            controller: producer_ids.controller.clone(),
            replicas,
            groups,
            producer_ids,
            txns: Mutex::new(HashMap::new()),
            loaded: Mutex::new(HashSet::new()),
            completing: Mutex::new(HashSet::new()),
            coordinators,
        }
    }

    /// The next producer id (idempotent producers take theirs here too).
    pub fn next_producer_id(&self) -> Result<i64, tern_protocol::error::ApiError> {
        self.producer_ids.next()
    }

    /// The `__transaction_state` partition of a transactional id.
    pub fn partition_for(&self, transactional_id: &str) -> i32 {
        state_log::partition_for(transactional_id, self.config.num_partitions)
    }

    /// The broker coordinating `transactional_id` in `image` (the leader of its partition).
    pub fn coordinator_in(
        &self,
        image: &tern_controller::MetadataImage,
        transactional_id: &str,
    ) -> Option<i32> {
        let topic = image.topic(TXN_STATE_TOPIC)?;
        Some(
            topic
                .partitions
                .get(&self.partition_for(transactional_id))?
                .leader,
        )
    }

    /// This broker's `__transaction_state` partition of the id, if it coordinates it.
    pub fn check_coordinator(
        &self,
        transactional_id: &str,
    ) -> Result<Arc<Partition>, ResponseError> {
        if transactional_id.is_empty() {
            return Err(ResponseError::InvalidRequest);
        }
        let index = self.partition_for(transactional_id);
        match self.replicas.partition(TXN_STATE_TOPIC, index) {
            Some(p) if p.is_leader() && self.loaded.lock().contains(&index) => Ok(p),
            Some(p) if p.is_leader() => Err(ResponseError::CoordinatorLoadInProgress),
            Some(_) => Err(ResponseError::NotCoordinator),
            None => Err(ResponseError::CoordinatorNotAvailable),
        }
    }

    /// Changes one id's metadata the safe way: `change` works on a copy, which is written to
    /// the log and only then kept, so a failed write leaves the coordinator as it was and a
    /// retry writes again. When nothing is written, the wait returned is for everything
    /// already in the log (a retry after a write whose replication was not seen).
    fn update<T>(
        &self,
        txns: &mut HashMap<String, TxnMetadata>,
        partition: &Arc<Partition>,
        transactional_id: &str,
        current: Option<TxnMetadata>,
        change: impl FnOnce(&mut TxnMetadata) -> Change<T>,
    ) -> Result<(T, TxnMetadata, PendingAck), ResponseError> {
        let mut m = match current {
            Some(m) => m,
            // Unknown here: moved to another coordinator meanwhile, or never initialized.
            None => txns.get(transactional_id).cloned().ok_or_else(|| {
                self.check_coordinator(transactional_id)
                    .err()
                    .unwrap_or(ResponseError::InvalidProducerIdMapping)
            })?,
        };
        let (value, write) = change(&mut m)?;
        if !write {
            let ack = PendingAck {
                partition: partition.clone(),
                required_offset: partition.log.log_end_offset(),
                min_insync: 1,
            };
            return Ok((value, m, ack));
        }
        let ack = self.persist(partition, transactional_id, Some(state_log::value(&m)))?;
        txns.insert(transactional_id.to_string(), m.clone());
        Ok((value, m, ack))
    }

    /// Appends the metadata (or a tombstone) of one transactional id to its partition.
    fn persist(
        &self,
        partition: &Arc<Partition>,
        transactional_id: &str,
        value: Option<Bytes>,
    ) -> Result<PendingAck, ResponseError> {
        let record = [(state_log::key(transactional_id), value)];
        crate::internal_topic::append_records(partition, &record, None, |_| {
            ResponseError::CoordinatorNotAvailable
        })
    }

    /// InitProducerId with a transactional id: the producer id and epoch to use, and the
    /// write to wait for before answering.
    pub fn init_producer_id(
        self: &Arc<Self>,
        transactional_id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
    ) -> Result<((i64, i16), Option<PendingAck>), ResponseError> {
        if timeout_ms <= 0 || timeout_ms > self.config.max_timeout_ms {
            return Err(ResponseError::InvalidTransactionTimeout);
        }
        let partition = self.check_coordinator(transactional_id)?;
        // A new producer id comes from the controller, which may take a while: not under the
        // lock every transaction shares.
        let needs_id = self
            .txns
            .lock()
            .get(transactional_id)
            .is_none_or(|m| TxnMetadata::epoch_exhausted(m.producer_epoch));
        let mut fresh_id = if needs_id {
            Some(self.producer_ids.next().map_err(|e| e.error)?)
        } else {
            None
        };
        let now = now_ms();
        let mut txns = self.txns.lock();
        let current = match txns.get(transactional_id) {
            Some(m) => Some(m.clone()),
            // Unknown (new, or expired): a new producer id, whatever the client names.
            None => Some(TxnMetadata::new(
                transactional_id,
                fresh_id
                    .take()
                    .ok_or(ResponseError::ConcurrentTransactions)?,
                timeout_ms,
                now,
            )),
        };
        let is_new = !txns.contains_key(transactional_id);
        let (outcome, m, ack) =
            self.update(&mut txns, &partition, transactional_id, current, |m| {
                if is_new {
                    return Ok((InitOutcome::Bumped, true));
                }
                let outcome = m.init(timeout_ms, expected, now, || {
                    fresh_id.take().ok_or(ResponseError::ConcurrentTransactions)
                })?;
                Ok((outcome, outcome != InitOutcome::Unchanged))
            })?;
        drop(txns);
        match outcome {
            InitOutcome::FencedOngoing => {
                self.complete_in_background(transactional_id, Some(ack));
                Err(ResponseError::ConcurrentTransactions)
            }
            _ => Ok(((m.producer_id, m.producer_epoch), Some(ack))),
        }
    }

    /// Adds partitions to the open transaction (starting one if none is open), for a request
    /// of transaction version `txn_version`.
    pub fn add_partitions(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        partitions: &[(String, i32)],
        txn_version: i8,
    ) -> Result<Option<PendingAck>, ResponseError> {
        let partition = self.check_coordinator(transactional_id)?;
        let mut txns = self.txns.lock();
        let now = now_ms();
        let ((), _, ack) = self.update(&mut txns, &partition, transactional_id, None, |m| {
            Ok((
                (),
                m.add_partitions(producer, partitions, txn_version, now)?,
            ))
        })?;
        Ok(Some(ack))
    }

    /// Whether each partition is in the producer's open transaction (AddPartitionsToTxn v4+
    /// with verify_only, as partition leaders ask): None, or the partition's error.
    pub fn verify_partitions(
        &self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &[(String, i32)],
    ) -> Result<Vec<Option<ResponseError>>, ResponseError> {
        self.check_coordinator(transactional_id)?;
        let txns = self.txns.lock();
        let m = txns
            .get(transactional_id)
            .ok_or(ResponseError::InvalidProducerIdMapping)?;
        m.check_producer(producer_id, epoch)?;
        // A transaction still ending: the producer retries (Kafka's coordinator).
        if matches!(m.state, TxnState::PrepareCommit | TxnState::PrepareAbort) {
            return Err(ResponseError::ConcurrentTransactions);
        }
        Ok(partitions
            .iter()
            .map(|tp| {
                let included = m.state == TxnState::Ongoing && m.partitions.contains(tp);
                (!included).then_some(ResponseError::InvalidTxnState)
            })
            .collect())
    }

    /// EndTxn: prepares the commit or abort and starts writing its markers once the prepare is
    /// replicated. The wait returned is that of the prepare record; with it the producer id
    /// and epoch the producer goes on with (its own under transaction version 1, `v2` false;
    /// the next epoch, or a new producer id, under version 2).
    pub fn end_txn(
        self: &Arc<Self>,
        transactional_id: &str,
        producer: (i64, i16),
        commit: bool,
        v2: bool,
    ) -> Result<(Option<PendingAck>, (i64, i16)), ResponseError> {
        let partition = self.check_coordinator(transactional_id)?;
        // A used-up epoch ends with a new producer id, from the controller: not under the lock.
        let needs_id = v2
            && self
                .txns
                .lock()
                .get(transactional_id)
                .is_some_and(|m| TxnMetadata::epoch_exhausted(m.producer_epoch));
        let mut fresh_id = if needs_id {
            Some(self.producer_ids.next().map_err(|e| e.error)?)
        } else {
            None
        };
        let mut txns = self.txns.lock();
        let now = now_ms();
        let (outcome, m, ack) =
            self.update(&mut txns, &partition, transactional_id, None, |m| {
                let outcome = if v2 {
                    m.end_v2(producer, commit, now, || {
                        fresh_id.take().ok_or(ResponseError::ConcurrentTransactions)
                    })?
                } else {
                    m.end(producer.0, producer.1, commit, now)?
                };
                Ok((outcome, outcome == EndOutcome::Prepared))
            })?;
        drop(txns);
        if outcome == EndOutcome::Prepared {
            self.complete_in_background(transactional_id, Some(ack.clone()));
        }
        let continues_with = if v2 { m.producer_after_end() } else { producer };
        Ok((Some(ack), continues_with))
    }

    /// Writes the markers of a prepared transaction (after `prepared` is replicated) until
    /// every partition has one, then records it complete. One task per transactional id.
    fn complete_in_background(
        self: &Arc<Self>,
        transactional_id: &str,
        prepared: Option<PendingAck>,
    ) {
        if !self.completing.lock().insert(transactional_id.to_string()) {
            return;
        }
        let me = self.clone();
        let id = transactional_id.to_string();
        tokio::spawn(async move {
            if me.prepare_replicated(&id, prepared).await {
                me.write_markers_until_done(&id).await;
            }
            // A prepare made while this task was ending found it still registered: look
            // under the lock every change takes, and go on if so.
            let again = {
                let txns = me.txns.lock();
                me.completing.lock().remove(&id);
                txns.get(&id).is_some_and(|m| m.state.is_preparing())
                    && me.check_coordinator(&id).is_ok()
            };
            if again {
                me.complete_in_background(&id, None);
            }
        });
    }

    /// Waits until the ISR has the prepare record, for as long as this broker coordinates the
    /// id (a new coordinator finishes the transaction otherwise).
    async fn prepare_replicated(
        &self,
        transactional_id: &str,
        prepared: Option<PendingAck>,
    ) -> bool {
        // Without the prepare's own wait: everything in the partition's log now.
        let prepared = match prepared {
            Some(ack) => ack,
            None => match self.check_coordinator(transactional_id) {
                Ok(partition) => PendingAck {
                    required_offset: partition.log.log_end_offset(),
                    partition,
                    min_insync: 1,
                },
                Err(_) => return false,
            },
        };
        let prepared = Some(prepared);
        loop {
            match crate::internal_topic::replicated(prepared.clone()).await {
                Ok(()) => return true,
                Err(_) if self.check_coordinator(transactional_id).is_ok() => {
                    tracing::debug!(transactional_id, "waiting for the prepare record's ISR");
                }
                Err(_) => return false,
            }
        }
    }

    async fn write_markers_until_done(&self, transactional_id: &str) {
        loop {
            let Ok(state_partition) = self.check_coordinator(transactional_id) else {
                return;
            };
            let coordinator_epoch = state_partition.leader_epoch();
            let snapshot = {
                let txns = self.txns.lock();
                match txns.get(transactional_id) {
                    Some(m) if m.state.is_preparing() => m.clone(),
                    _ => return,
                }
            };
            let marker = Marker {
                producer_id: snapshot.producer_id,
                producer_epoch: snapshot.producer_epoch,
                coordinator_epoch,
                commit: snapshot.state == TxnState::PrepareCommit,
                txn_version: snapshot.txn_version,
            };
            let remaining = self.write_markers(&snapshot.partitions, &marker).await;
            // The lock is not held across the pause.
            let finished = (|| {
                let mut txns = self.txns.lock();
                let current = match txns.get(transactional_id) {
                    Some(m)
                        if m.state == snapshot.state
                            && m.producer_epoch == snapshot.producer_epoch =>
                    {
                        m.clone()
                    }
                    _ => return true,
                };
                if remaining.is_empty() {
                    let now = now_ms();
                    let done = self.update(
                        &mut txns,
                        &state_partition,
                        transactional_id,
                        Some(current),
                        |m| {
                            m.complete(now);
                            Ok(((), true))
                        },
                    );
                    if let Err(e) = done {
                        tracing::warn!(transactional_id, error = ?e, "cannot record a completed transaction; retrying");
                        // Every marker is written: the next round only records the completion.
                        if let Some(m) = txns.get_mut(transactional_id) {
                            m.partitions.clear();
                        }
                    } else {
                        return true;
                    }
                } else {
                    tracing::debug!(
                        transactional_id,
                        left = remaining.len(),
                        "retrying transaction markers"
                    );
                    // Only the partitions still without a marker are tried again (in memory: a
                    // new coordinator starts from the prepare record's full list).
                    if let Some(m) = txns.get_mut(transactional_id) {
                        m.partitions.retain(|tp| remaining.contains(tp));
                    }
                }
                false
            })();
            if finished {
                return;
            }
            tokio::time::sleep(MARKER_RETRY_BACKOFF).await;
        }
    }

    /// One round of markers to every partition: appended here where this broker leads,
    /// sent as WriteTxnMarkers to the leader elsewhere. Returns the partitions still without one.
    async fn write_markers(
        &self,
        partitions: &std::collections::BTreeSet<(String, i32)>,
        marker: &Marker,
    ) -> HashSet<(String, i32)> {
        let image = self.controller.image();
        let mut remaining = HashSet::new();
        let mut local = Vec::new();
        let mut remote: BTreeMap<i32, Vec<(String, i32)>> = BTreeMap::new();
        for (topic, index) in partitions {
            let Some(info) = image.topic(topic).and_then(|t| t.partitions.get(index)) else {
                // The topic is gone: nothing to mark.
                continue;
            };
            if info.leader == self.node_id {
                match self.replicas.partition(topic, *index) {
                    Some(p) => local.push(p),
                    None => {
                        remaining.insert((topic.clone(), *index));
                    }
                }
            } else if info.leader >= 0 {
                remote
                    .entry(info.leader)
                    .or_default()
                    .push((topic.clone(), *index));
            } else {
                remaining.insert((topic.clone(), *index));
            }
        }
        let mut waits = Vec::new();
        for p in &local {
            match markers::append_marker(p, marker) {
                Ok(ack) => waits.push(ack),
                Err(e) if marker_refused_for_good(e) => {
                    tracing::warn!(topic = %p.topic, partition = p.index, error = ?e, "transaction marker refused; not retried");
                }
                Err(e) => {
                    tracing::debug!(topic = %p.topic, partition = p.index, error = ?e, "marker not written");
                    remaining.insert((p.topic.clone(), p.index));
                }
            }
        }
        let outcomes = wait_for_isr(&waits, MARKER_TIMEOUT).await;
        for (ack, outcome) in waits.iter().zip(outcomes) {
            let tp = (ack.partition.topic.clone(), ack.partition.index);
            match outcome {
                Ok(()) => {
                    if tp.0 == OFFSETS_TOPIC {
                        self.groups
                            .complete_txn_offsets(tp.1, marker.producer_id, marker.commit);
                    }
                }
                Err(_) => {
                    remaining.insert(tp);
                }
            }
        }
        for (leader, tps) in remote {
            let sent = self.send_markers(&image, leader, &tps, marker).await;
            match sent {
                Ok(failed) => remaining.extend(failed),
                Err(e) => {
                    tracing::debug!(leader, error = %e, "markers not sent");
                    remaining.extend(tps);
                }
            }
        }
        remaining
    }

    /// Sends WriteTxnMarkers to broker `leader`; returns the partitions it refused.
    async fn send_markers(
        &self,
        image: &tern_controller::MetadataImage,
        leader: i32,
        tps: &[(String, i32)],
        marker: &Marker,
    ) -> Result<Vec<(String, i32)>, String> {
        let broker = image
            .brokers
            .get(&leader)
            .ok_or_else(|| format!("broker {leader} is not registered"))?;
        let (host, port) = broker.endpoint(&self.inter_broker_listener);
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for (t, p) in tps {
            by_topic.entry(t.as_str()).or_default().push(*p);
        }
        let request =
            WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
                .with_producer_id(ProducerId(marker.producer_id))
                .with_producer_epoch(marker.producer_epoch)
                .with_transaction_result(marker.commit)
                .with_coordinator_epoch(marker.coordinator_epoch)
                .with_transaction_version(marker.txn_version)
                .with_topics(
                    by_topic
                        .into_iter()
                        .map(|(t, ps)| {
                            WritableTxnMarkerTopic::default()
                                .with_name(TopicName(StrBytes::from_string(t.to_string())))
                                .with_partition_indexes(ps)
                        })
                        .collect(),
                )]);
        let client_id = format!("tern-txn-markers-{}", self.node_id);
        let response = tokio::time::timeout(MARKER_TIMEOUT, async {
            let mut conn = KafkaConnection::connect((host, port), &client_id)
                .await
                .map_err(|e| e.to_string())?;
            // v1 for a transaction of the protocol before version 2, which any peer takes.
            let version = if marker.txn_version >= metadata::TXN_VERSION_2 {
                MARKERS_VERSION
            } else {
                1
            };
            conn.send(&request, version)
                .await
                .map_err(|e| e.to_string())
        })
        .await
        .map_err(|_| format!("broker {leader} did not answer in time"))??;
        let mut failed = Vec::new();
        let mut answered = HashSet::new();
        for marker in response.markers {
            for topic in marker.topics {
                for p in topic.partitions {
                    let tp = (topic.name.0.to_string(), p.partition_index);
                    answered.insert(tp.clone());
                    let e = ResponseError::try_from_code(p.error_code);
                    if p.error_code != 0 && !e.is_some_and(marker_refused_for_good) {
                        failed.push(tp);
                    }
                }
            }
        }
        failed.extend(tps.iter().filter(|tp| !answered.contains(*tp)).cloned());
        Ok(failed)
    }

    /// Aborts transactions open longer than their timeout, and forgets ids unused for
    /// `transactional.id.expiration.ms`.
    pub fn abort_timed_out(self: &Arc<Self>) {
        let now = now_ms();
        let mut to_complete = Vec::new();
        {
            let mut txns = self.txns.lock();
            let ids: Vec<String> = txns.keys().cloned().collect();
            for id in ids {
                let Ok(partition) = self.check_coordinator(&id) else {
                    continue;
                };
                let Some(m) = txns.get(&id) else { continue };
                if m.state.is_preparing() {
                    // A task stopped (a lost leadership regained, say): start another.
                    to_complete.push((id, None));
                    continue;
                }
                let timed_out = self.update(&mut txns, &partition, &id, None, |m| {
                    let aborted = m.abort_if_timed_out(now);
                    Ok(((m.producer_id, aborted), aborted))
                });
                match timed_out {
                    Ok(((producer_id, true), _, ack)) => {
                        tracing::info!(transactional_id = %id, producer_id, "aborting a transaction that exceeded its timeout");
                        to_complete.push((id, Some(ack)));
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(transactional_id = %id, error = ?e, "cannot record a timed-out abort")
                    }
                }
            }
        }
        for (id, ack) in to_complete {
            self.complete_in_background(&id, ack);
        }
    }

    /// Removes transactional ids with no open transaction and no use for the expiration time.
    pub fn remove_expired(&self) {
        let now = now_ms();
        let mut txns = self.txns.lock();
        let expired: Vec<String> = txns
            .iter()
            .filter(|(_, m)| {
                matches!(
                    m.state,
                    TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
                ) && now - m.last_update_ms > self.config.id_expiration_ms
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            let Ok(partition) = self.check_coordinator(&id) else {
                continue;
            };
            if self.persist(&partition, &id, None).is_ok() {
                txns.remove(&id);
                tracing::info!(transactional_id = %id, "transactional id expired");
            }
        }
    }

    /// The metadata of one transactional id, if this broker coordinates it and knows it.
    pub fn describe(&self, transactional_id: &str) -> Result<TxnMetadata, ResponseError> {
        self.check_coordinator(transactional_id)?;
        self.txns
            .lock()
            .get(transactional_id)
            .cloned()
            .ok_or(ResponseError::TransactionalIdNotFound)
    }

    /// Every transactional id this broker coordinates.
    pub fn list(&self) -> Vec<TxnListing> {
        let now = now_ms();
        self.txns
            .lock()
            .values()
            .filter(|m| m.state != TxnState::Dead)
            .map(|m| TxnListing {
                transactional_id: m.transactional_id.clone(),
                producer_id: m.producer_id,
                state: m.state,
                duration_ms: now - m.start_ms,
            })
            .collect()
    }

    /// Rebuilds the transactional ids of every partition this broker leads.
    pub fn load(self: &Arc<Self>) {
        for p in 0..self.config.num_partitions {
            if self
                .replicas
                .partition(TXN_STATE_TOPIC, p)
                .is_some_and(|part| part.is_leader())
            {
                self.load_partition(p);
            }
        }
    }

    /// Loads and unloads transactional ids as this broker gains and loses leadership of
    /// `__transaction_state` partitions.
    pub fn follow_leadership(self: &Arc<Self>) {
        let me = Arc::downgrade(self);
        self.replicas
            .on_leadership_change(Box::new(move |partition, leader| {
                let Some(c) = me.upgrade() else { return };
                if partition.topic != TXN_STATE_TOPIC {
                    return;
                }
                if leader {
                    c.load_partition(partition.index);
                } else {
                    c.unload_partition(partition.index);
                }
            }));
    }

    /// Forgets the ids of partition `p`.
    pub fn unload_partition(&self, p: i32) {
        let mut txns = self.txns.lock();
        self.forget_partition(&mut txns, p);
    }

    /// Drops partition `p`'s ids and marks it not loaded (the caller holds the ids' lock).
    fn forget_partition(&self, txns: &mut HashMap<String, TxnMetadata>, p: i32) {
        let n = self.config.num_partitions;
        self.loaded.lock().remove(&p);
        txns.retain(|id, _| state_log::partition_for(id, n) != p);
    }

    /// Rebuilds the ids of partition `p` from its log, and finishes transactions that were
    /// being completed when the last coordinator stopped.
    pub fn load_partition(self: &Arc<Self>, p: i32) {
        let Some(partition) = self.replicas.partition(TXN_STATE_TOPIC, p) else {
            return;
        };
        // The whole load under the lock: no request changes an id of this partition between
        // the scan and the ids taking effect.
        let mut txns = self.txns.lock();
        self.forget_partition(&mut txns, p);
        let mut loaded: HashMap<String, TxnMetadata> = HashMap::new();
        crate::internal_topic::scan(&partition, |header, records| {
            if header.is_control() {
                return;
            }
            for r in records {
                let Some(id) = r.key.as_deref().and_then(state_log::decode_key) else {
                    continue;
                };
                match r.value.as_deref() {
                    None => {
                        loaded.remove(&id);
                    }
                    Some(v) => match state_log::decode_value(&id, v) {
                        Some(m) => {
                            loaded.insert(id, m);
                        }
                        None => {
                            tracing::warn!(transactional_id = %id, "skipping an unreadable transaction state record")
                        }
                    },
                }
            }
        });
        let preparing: Vec<String> = loaded
            .values()
            .filter(|m| m.state.is_preparing())
            .map(|m| m.transactional_id.clone())
            .collect();
        tracing::info!(
            partition = p,
            ids = loaded.len(),
            "coordinating the transactions of this partition"
        );
        txns.extend(loaded);
        self.loaded.lock().insert(p);
        drop(txns);
        for id in preparing {
            self.complete_in_background(&id, None);
        }
    }

    /// Starts the timers: timed-out transactions are aborted and expired ids removed.
    /// Ends by itself once the coordinator is dropped.
    pub fn spawn_timers(self: &Arc<Self>) {
        let me = Arc::downgrade(self);
        let abort_every = Duration::from_millis(self.config.abort_interval_ms.max(10));
        let expire_every = Duration::from_millis(self.config.remove_expired_interval_ms.max(10));
        tokio::spawn(async move {
            let mut abort = tokio::time::interval(abort_every);
            let mut expire = tokio::time::interval(expire_every);
            loop {
                tokio::select! {
                    _ = abort.tick() => match me.upgrade() {
                        Some(c) => c.abort_timed_out(),
                        None => return,
                    },
                    _ = expire.tick() => match me.upgrade() {
                        Some(c) => c.remove_expired(),
                        None => return,
                    },
                }
            }
        });
    }
}
