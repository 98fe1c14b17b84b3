//! The transaction coordinator: transactional producers' ids and epochs, their open
//! transactions, and the markers that end them, persisted in `__transaction_state` in Kafka's
//! record formats. A transactional id lives in the partition its id hashes to; the leader of
//! that partition coordinates it (as groups follow `__consumer_offsets`).

pub mod markers;
pub mod metadata;
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
    /// How long the current transaction has been open (ms; -1 without one).
    pub duration_ms: i64,
}

/// How long one round of markers may wait before the ones left are retried.
const MARKER_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause between rounds of markers for partitions that could not take them yet.
const MARKER_RETRY_BACKOFF: Duration = Duration::from_millis(200);

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
    txns: Mutex<HashMap<String, TxnMetadata>>,
    /// Transactional ids whose markers a task is writing now.
    completing: Mutex<HashSet<String>>,
}

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
        TransactionCoordinator {
            config,
            node_id,
            inter_broker_listener,
            controller: producer_ids.controller.clone(),
            replicas,
            groups,
            producer_ids,
            txns: Mutex::new(HashMap::new()),
            completing: Mutex::new(HashSet::new()),
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
        match self
            .replicas
            .partition(TXN_STATE_TOPIC, self.partition_for(transactional_id))
        {
            Some(p) if p.is_leader() => Ok(p),
            Some(_) => Err(ResponseError::NotCoordinator),
            None => Err(ResponseError::CoordinatorNotAvailable),
        }
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
        let now = now_ms();
        let mut txns = self.txns.lock();
        let (outcome, m) = match txns.get_mut(transactional_id) {
            None => {
                if expected.is_some_and(|(pid, _)| pid >= 0) {
                    return Err(ResponseError::InvalidProducerIdMapping);
                }
                let pid = self.producer_ids.next().map_err(|e| e.error)?;
                let m = TxnMetadata::new(transactional_id, pid, timeout_ms, now);
                txns.insert(transactional_id.to_string(), m);
                (InitOutcome::Bumped, &txns[transactional_id])
            }
            Some(m) => {
                let outcome = m.init(timeout_ms, expected, now, || {
                    self.producer_ids.next().map_err(|e| e.error)
                })?;
                (outcome, &*m)
            }
        };
        let ids = (m.producer_id, m.producer_epoch);
        match outcome {
            InitOutcome::Unchanged => Ok((ids, None)),
            InitOutcome::Bumped => {
                let ack = self.persist(&partition, transactional_id, Some(state_log::value(m)))?;
                Ok((ids, Some(ack)))
            }
            InitOutcome::FencedOngoing => {
                let ack = self.persist(&partition, transactional_id, Some(state_log::value(m)))?;
                drop(txns);
                self.complete_in_background(transactional_id, Some(ack));
                Err(ResponseError::ConcurrentTransactions)
            }
        }
    }

    /// Adds partitions to the open transaction (starting one if none is open).
    pub fn add_partitions(
        &self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &[(String, i32)],
    ) -> Result<Option<PendingAck>, ResponseError> {
        let partition = self.check_coordinator(transactional_id)?;
        let mut txns = self.txns.lock();
        let m = txns
            .get_mut(transactional_id)
            .ok_or(ResponseError::InvalidProducerIdMapping)?;
        if !m.add_partitions(producer_id, epoch, partitions, now_ms())? {
            return Ok(None);
        }
        let value = state_log::value(m);
        self.persist(&partition, transactional_id, Some(value))
            .map(Some)
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
        Ok(partitions
            .iter()
            .map(|tp| {
                let included = m.state == TxnState::Ongoing && m.partitions.contains(tp);
                (!included).then_some(ResponseError::InvalidTxnState)
            })
            .collect())
    }

    /// EndTxn: prepares the commit or abort and starts writing its markers once the prepare is
    /// replicated. The wait returned is that of the prepare record.
    pub fn end_txn(
        self: &Arc<Self>,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        commit: bool,
    ) -> Result<Option<PendingAck>, ResponseError> {
        let partition = self.check_coordinator(transactional_id)?;
        let mut txns = self.txns.lock();
        let m = txns
            .get_mut(transactional_id)
            .ok_or(ResponseError::InvalidProducerIdMapping)?;
        match m.end(producer_id, epoch, commit, now_ms())? {
            EndOutcome::AlreadyComplete => Ok(None),
            EndOutcome::Prepared => {
                let value = state_log::value(m);
                let ack = self.persist(&partition, transactional_id, Some(value))?;
                drop(txns);
                self.complete_in_background(
                    transactional_id,
                    Some(PendingAck {
                        partition: ack.partition.clone(),
                        required_offset: ack.required_offset,
                        min_insync: ack.min_insync,
                    }),
                );
                Ok(Some(ack))
            }
        }
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
            if crate::internal_topic::replicated(prepared).await.is_ok() {
                me.write_markers_until_done(&id).await;
            }
            me.completing.lock().remove(&id);
        });
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
            let commit = snapshot.state == TxnState::PrepareCommit;
            let remaining = self
                .write_markers(
                    &snapshot.partitions,
                    snapshot.producer_id,
                    snapshot.producer_epoch,
                    coordinator_epoch,
                    commit,
                )
                .await;
            if remaining.is_empty() {
                let mut txns = self.txns.lock();
                let Some(m) = txns.get_mut(transactional_id) else {
                    return;
                };
                if m.state != snapshot.state || m.producer_epoch != snapshot.producer_epoch {
                    return;
                }
                m.complete(now_ms());
                let value = state_log::value(m);
                drop(txns);
                if let Err(e) = self.persist(&state_partition, transactional_id, Some(value)) {
                    tracing::warn!(transactional_id, error = ?e, "cannot record a completed transaction");
                }
                return;
            }
            tracing::debug!(
                transactional_id,
                left = remaining.len(),
                "retrying transaction markers"
            );
            {
                let mut txns = self.txns.lock();
                if let Some(m) = txns.get_mut(transactional_id) {
                    if m.state == snapshot.state {
                        // Partitions of deleted topics are done; the rest are tried again.
                        m.partitions = snapshot
                            .partitions
                            .iter()
                            .filter(|tp| remaining.contains(tp))
                            .cloned()
                            .collect();
                    }
                }
            }
            tokio::time::sleep(MARKER_RETRY_BACKOFF).await;
        }
    }

    /// One round of markers to every partition: appended here where this broker leads,
    /// sent as WriteTxnMarkers to the leader elsewhere. Returns the partitions still without one.
    async fn write_markers(
        &self,
        partitions: &std::collections::BTreeSet<(String, i32)>,
        producer_id: i64,
        epoch: i16,
        coordinator_epoch: i32,
        commit: bool,
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
            match markers::append_marker(p, producer_id, epoch, coordinator_epoch, commit) {
                Ok(ack) => waits.push(ack),
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
                        self.groups.complete_txn_offsets(tp.1, producer_id, commit);
                    }
                }
                Err(_) => {
                    remaining.insert(tp);
                }
            }
        }
        for (leader, tps) in remote {
            let sent = self
                .send_markers(
                    &image,
                    leader,
                    &tps,
                    producer_id,
                    epoch,
                    coordinator_epoch,
                    commit,
                )
                .await;
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
    #[allow(clippy::too_many_arguments)]
    async fn send_markers(
        &self,
        image: &tern_controller::MetadataImage,
        leader: i32,
        tps: &[(String, i32)],
        producer_id: i64,
        epoch: i16,
        coordinator_epoch: i32,
        commit: bool,
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
                .with_producer_id(ProducerId(producer_id))
                .with_producer_epoch(epoch)
                .with_transaction_result(commit)
                .with_coordinator_epoch(coordinator_epoch)
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
            conn.send(&request, 1).await.map_err(|e| e.to_string())
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
                    if p.error_code != 0 {
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
        let mut aborted = Vec::new();
        {
            let mut txns = self.txns.lock();
            for (id, m) in txns.iter_mut() {
                let Ok(partition) = self.check_coordinator(id) else {
                    continue;
                };
                if m.abort_if_timed_out(now) {
                    tracing::info!(transactional_id = %id, producer_id = m.producer_id, "aborting a transaction that exceeded its timeout");
                    match self.persist(&partition, id, Some(state_log::value(m))) {
                        Ok(ack) => aborted.push((id.clone(), ack)),
                        Err(e) => {
                            tracing::warn!(transactional_id = %id, error = ?e, "cannot record a timed-out abort")
                        }
                    }
                }
            }
        }
        for (id, ack) in aborted {
            self.complete_in_background(&id, Some(ack));
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
                duration_ms: if m.state == TxnState::Ongoing && m.start_ms >= 0 {
                    now - m.start_ms
                } else {
                    -1
                },
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
        let n = self.config.num_partitions;
        self.txns
            .lock()
            .retain(|id, _| state_log::partition_for(id, n) != p);
    }

    /// Rebuilds the ids of partition `p` from its log, and finishes transactions that were
    /// being completed when the last coordinator stopped.
    pub fn load_partition(self: &Arc<Self>, p: i32) {
        self.unload_partition(p);
        let Some(partition) = self.replicas.partition(TXN_STATE_TOPIC, p) else {
            return;
        };
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
        self.txns.lock().extend(loaded);
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
