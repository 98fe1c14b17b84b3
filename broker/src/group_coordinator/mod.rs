//! The GroupCoordinator: classic consumer groups and committed offsets, persisted in
//! `__consumer_offsets` in Kafka's record formats. A group lives in the partition its id hashes
//! to; the leader of that partition coordinates it.

pub(crate) mod assignor;
pub(crate) mod consumer_group;
pub(crate) mod consumer_group_records;
pub(crate) mod consumer_protocol;
pub(crate) mod group;
mod load;
pub mod offsets_topic;
pub(crate) mod share_group;
mod share_members;
mod share_offsets;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use tern_protocol::records::{control_record_type, ControlRecordType};

use crate::replica_manager::ReplicaManager;
use crate::replication::delayed_produce::PendingAck;
use consumer_group::{
    CommitCheck, ConsumerGroupConfig, Heartbeat, HeartbeatAnswer, Refusal, TopicView,
};
pub(crate) use group::Committer;
use group::{Group, GroupConfig, GroupState};
pub use load::apply_offsets_records;
use offsets_topic::{
    group_key, group_value, offset_key, offset_value, partition_for, OffsetValue, OFFSETS_TOPIC,
};
pub(crate) use share_offsets::ShareOffsetChange;

/// Settings of the coordinator (Kafka's `group.*` and `offsets.*` broker configs).
#[derive(Debug, Clone)]
pub struct CoordinatorConfig {
    /// Group limits and delays.
    pub group: GroupConfig,
    /// Consumer-protocol (KIP-848) group settings.
    pub consumer: ConsumerGroupConfig,
    /// Share group (KIP-932) settings.
    pub share: share_group::ShareGroupConfig,
    /// `offsets.topic.num.partitions`.
    pub offsets_partitions: i32,
    /// `offset.metadata.max.bytes`.
    pub offset_metadata_max_bytes: usize,
    /// `offsets.retention.minutes`, in ms.
    pub offsets_retention_ms: i64,
}

/// One group as ListGroups shows it.
#[derive(Debug, Clone)]
pub struct ListedGroup {
    /// Group id.
    pub id: String,
    /// Protocol type (`consumer` for consumer groups of either protocol).
    pub protocol_type: String,
    /// Kafka's name of its state.
    pub state: &'static str,
    /// `classic` or `consumer`.
    pub group_type: &'static str,
}

/// Milliseconds since the epoch.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The group coordinator of this broker.
pub struct GroupCoordinator {
    /// Settings.
    pub config: CoordinatorConfig,
    replicas: Arc<ReplicaManager>,
    groups: Mutex<HashMap<String, Group>>,
    /// The metadata image, for the topic ids and partition counts of the consumer groups it
    /// stores and loads; while unset, their membership is kept in memory only.
    images: std::sync::OnceLock<ImageSource>,
}

/// Where the coordinator reads the metadata image.
type ImageSource = Box<dyn Fn() -> Arc<tern_controller::MetadataImage> + Send + Sync>;

impl GroupCoordinator {
    /// A coordinator over the partitions of `replicas`.
    pub fn new(config: CoordinatorConfig, replicas: Arc<ReplicaManager>) -> Self {
        GroupCoordinator {
            config,
            replicas,
            groups: Mutex::new(HashMap::new()),
            images: std::sync::OnceLock::new(),
        }
    }

    /// Stores consumer groups' membership from now on, with topics as `images` describes
    /// them (set before `load`, which then restores it).
    pub fn set_image_source(
        &self,
        images: impl Fn() -> Arc<tern_controller::MetadataImage> + Send + Sync + 'static,
    ) {
        let _ = self.images.set(Box::new(images));
    }

    fn image(&self) -> Option<Arc<tern_controller::MetadataImage>> {
        self.images.get().map(|f| f())
    }

    /// Writes, as one batch, the group's classic metadata record when `classic` and what
    /// changed in its consumer-group membership since it was last written (Kafka's records,
    /// see `consumer_group_records`), so that a change of group type is never half written.
    /// The write happens under the groups' lock, so changes reach the log in the order they
    /// were made; what was written is remembered only once the write succeeded, so a failed
    /// write is made good by the next one.
    pub fn store_changes(&self, group_id: &str, classic: bool) -> Result<(), ResponseError> {
        let mut groups = self.groups.lock();
        let Some(g) = groups.get_mut(group_id) else {
            return Ok(());
        };
        let mut records = Vec::new();
        if classic && g.state() != GroupState::Dead {
            records.push((
                group_key(group_id),
                Some(group_value(&g.metadata_value(now_ms()))),
            ));
        }
        let consumer = self.image().and_then(|image| g.consumer_changes(&*image));
        if let Some((changes, _)) = &consumer {
            records.extend(changes.iter().cloned());
        }
        if records.is_empty() {
            return Ok(());
        }
        self.store(group_id, &records)?;
        if let Some((_, stored)) = consumer {
            g.set_stored_consumer(stored);
        }
        Ok(())
    }

    /// Writes what changed in `group_id`'s consumer-group membership ([`Self::store_changes`]
    /// without the classic record); a failed write is logged.
    pub fn store_consumer_changes(&self, group_id: &str) {
        if let Err(e) = self.store_changes(group_id, false) {
            tracing::warn!(group = group_id, error = ?e, "consumer group membership not stored");
        }
    }

    /// The `__consumer_offsets` partition of a group.
    pub fn partition_for(&self, group_id: &str) -> i32 {
        partition_for(group_id, self.config.offsets_partitions)
    }

    /// The broker coordinating a group in `image`: the leader of its `__consumer_offsets`
    /// partition (-1 while it has none).
    pub fn coordinator_in(
        &self,
        image: &tern_controller::MetadataImage,
        group_id: &str,
    ) -> Option<i32> {
        let topic = image.topic(offsets_topic::OFFSETS_TOPIC)?;
        Some(topic.partitions.get(&self.partition_for(group_id))?.leader)
    }

    /// Whether this broker coordinates the group; Kafka's error otherwise.
    pub fn check_coordinator(&self, group_id: &str) -> Result<(), ResponseError> {
        if group_id.is_empty() {
            return Err(ResponseError::InvalidGroupId);
        }
        match self
            .replicas
            .partition(OFFSETS_TOPIC, self.partition_for(group_id))
        {
            Some(p) if p.is_leader() => Ok(()),
            Some(_) => Err(ResponseError::NotCoordinator),
            None => Err(ResponseError::CoordinatorNotAvailable),
        }
    }

    /// Runs `f` on the group, creating it when `create` is set.
    pub fn with_group<T>(
        &self,
        group_id: &str,
        create: bool,
        f: impl FnOnce(&mut Group) -> T,
    ) -> Option<T> {
        let mut groups = self.groups.lock();
        if create && !groups.contains_key(group_id) {
            groups.insert(group_id.to_string(), Group::new(group_id, now_ms()));
        }
        groups.get_mut(group_id).map(f)
    }

    /// Every group, as ListGroups shows it.
    pub fn list(&self) -> Vec<ListedGroup> {
        self.groups
            .lock()
            .values()
            .filter(|g| g.state() != GroupState::Dead)
            .map(|g| ListedGroup {
                id: g.id().to_string(),
                protocol_type: match g.group_type() {
                    "consumer" => "consumer".to_string(),
                    "share" => "share".to_string(),
                    _ => g.protocol_type().unwrap_or_default().to_string(),
                },
                state: g.state_name(),
                group_type: g.group_type(),
            })
            .collect()
    }

    /// Whether `member_id` is a member of `group_id` by the consumer protocol (KIP-848).
    pub fn is_consumer_protocol_member(&self, group_id: &str, member_id: &str) -> bool {
        self.groups
            .lock()
            .get(group_id)
            .and_then(|g| g.consumer())
            .and_then(|c| c.members.get(member_id))
            .is_some_and(|m| m.classic.is_none())
    }

    /// Whether an OffsetFetch naming `member_id` at `epoch` may read a consumer-protocol
    /// group's offsets (classic groups check nothing here, as Kafka's).
    pub fn check_offset_fetch(
        &self,
        group_id: &str,
        member_id: Option<&str>,
        epoch: i32,
    ) -> Result<(), ResponseError> {
        let groups = self.groups.lock();
        match groups.get(group_id).and_then(|g| g.consumer()) {
            Some(c) => c.check_fetch(member_id, epoch),
            None => Ok(()),
        }
    }

    /// ConsumerGroupHeartbeat: joins, heartbeats and leaves of the consumer protocol. A
    /// classic group becomes a consumer group when a member joins (with members in it, as the
    /// migration policy allows); a consumer group whose last member of this protocol leaves
    /// turns classic if classic members remain. What changed of the membership is then
    /// stored, so that members carry on after a restart or a coordinator move.
    pub fn consumer_heartbeat(
        &self,
        group_id: &str,
        hb: Heartbeat,
        version: i16,
        topics: &dyn TopicView,
        settings: &ConsumerGroupConfig,
    ) -> Result<HeartbeatAnswer, Refusal> {
        let mut store = false;
        let answer =
            self.consumer_heartbeat_locked(group_id, hb, version, topics, settings, &mut store);
        if let Err(e) = self.store_changes(group_id, store) {
            tracing::warn!(group = group_id, error = ?e, "group changes not stored");
        }
        answer
    }

    fn consumer_heartbeat_locked(
        &self,
        group_id: &str,
        hb: Heartbeat,
        version: i16,
        topics: &dyn TopicView,
        settings: &ConsumerGroupConfig,
        store: &mut bool,
    ) -> Result<HeartbeatAnswer, Refusal> {
        let refuse = |error: ResponseError, message: String| Refusal { error, message };
        consumer_group::validate(&hb, version, settings)?;
        self.check_coordinator(group_id)
            .map_err(|e| refuse(e, String::new()))?;
        let now = now_ms();
        let epoch = hb.member_epoch;
        let mut groups = self.groups.lock();
        if epoch == 0 && !groups.contains_key(group_id) {
            groups.insert(group_id.to_string(), Group::new(group_id, now));
        }
        let unknown_member = || {
            refuse(
                ResponseError::UnknownMemberId,
                format!(
                    "Member {} is not a member of group {group_id}.",
                    hb.member_id
                ),
            )
        };
        let Some(g) = groups.get_mut(group_id) else {
            return Err(if epoch < 0 {
                refuse(
                    ResponseError::GroupIdNotFound,
                    format!("Consumer group {group_id} not found."),
                )
            } else {
                unknown_member()
            });
        };
        if g.consumer().is_none() && epoch != 0 && g.state() == GroupState::Empty {
            return Err(unknown_member());
        }
        let classic_with_members = g.consumer().is_none()
            && g.share().is_none()
            && !matches!(g.state(), GroupState::Empty | GroupState::Dead);
        if epoch == 0 && classic_with_members {
            let mut converted = g.upgraded(&self.config.group, settings, topics, now)?;
            let answer = converted.heartbeat(hb, topics, settings, now)?;
            g.install_consumer_group(converted, now);
            *store = true;
            return Ok(answer);
        }
        // Only a joining member turns an empty classic group into a consumer group.
        let answer = g
            .drive_consumer(now, epoch == 0, |c| c.heartbeat(hb, topics, settings, now))
            .unwrap_or_else(|| {
                Err(refuse(
                    ResponseError::GroupIdNotFound,
                    format!("Group {group_id} is not a consumer group."),
                ))
            });
        *store |= g.maybe_downgrade(&self.config.group, now);
        answer
    }

    /// Appends records (key, value-or-tombstone) to the group's partition.
    pub fn store(
        &self,
        group_id: &str,
        records: &[(Bytes, Option<Bytes>)],
    ) -> Result<(), ResponseError> {
        self.store_as(group_id, records, None)
    }

    /// Appends records, as a transactional batch of `producer` (id, epoch) when given.
    fn store_as(
        &self,
        group_id: &str,
        records: &[(Bytes, Option<Bytes>)],
        producer: Option<(i64, i16)>,
    ) -> Result<(), ResponseError> {
        if records.is_empty() {
            return Ok(());
        }
        let partition = self
            .replicas
            .partition(OFFSETS_TOPIC, self.partition_for(group_id))
            .ok_or(ResponseError::CoordinatorNotAvailable)?;
        crate::internal_topic::append_records(&partition, records, producer, |e| match e {
            tern_storage::StorageError::InvalidProducerEpoch { .. } => {
                ResponseError::ProducerFenced
            }
            _ => ResponseError::CoordinatorNotAvailable,
        })?;
        Ok(())
    }

    /// What a commit of `group_id` must wait for to be replicated: its offsets partition's
    /// log end as of now (Kafka appends offset commits with acks=all).
    pub fn replication_of(&self, group_id: &str) -> Option<PendingAck> {
        let partition = self
            .replicas
            .partition(OFFSETS_TOPIC, self.partition_for(group_id))?;
        let required_offset = partition.log.log_end_offset();
        Some(PendingAck {
            partition,
            required_offset,
            min_insync: 1,
        })
    }

    /// Stores a group's metadata record.
    pub fn store_group(&self, group_id: &str) -> Result<(), ResponseError> {
        self.store_changes(group_id, true)
    }

    /// Commits offsets; returns one error code per (topic, partition) in request order.
    pub fn commit_offsets(
        &self,
        group_id: &str,
        committer: Committer<'_>,
        offsets: Vec<(String, i32, OffsetValue)>,
    ) -> Result<Vec<i16>, ResponseError> {
        self.check_coordinator(group_id)?;
        let check = self
            .with_group(group_id, true, |g| g.check_commit(&committer))
            .unwrap_or(Err(ResponseError::CoordinatorNotAvailable))?;
        self.write_checked_offsets(group_id, &check, offsets, None)
    }

    /// Writes the offsets if `check` lets every one through; the first it refuses fails the
    /// whole commit, as Kafka's offset manager fails it.
    fn write_checked_offsets(
        &self,
        group_id: &str,
        check: &CommitCheck,
        offsets: Vec<(String, i32, OffsetValue)>,
        producer: Option<(i64, i16)>,
    ) -> Result<Vec<i16>, ResponseError> {
        if let Some(e) = offsets
            .iter()
            .find_map(|(topic, partition, _)| check.partition_error(topic, *partition))
        {
            return Err(e);
        }
        self.write_offsets(group_id, offsets, producer)
    }

    /// Stores offsets (those with too much metadata refused), as a transactional batch of
    /// `producer` (id, epoch) whose offsets stay pending until its commit marker, or committed
    /// at once. One error code per offset.
    fn write_offsets(
        &self,
        group_id: &str,
        offsets: Vec<(String, i32, OffsetValue)>,
        producer: Option<(i64, i16)>,
    ) -> Result<Vec<i16>, ResponseError> {
        let mut codes = Vec::with_capacity(offsets.len());
        let mut records = Vec::new();
        let mut accepted = Vec::new();
        for (topic, partition, value) in offsets {
            if value.metadata.len() > self.config.offset_metadata_max_bytes {
                codes.push(ResponseError::OffsetMetadataTooLarge.code());
                continue;
            }
            codes.push(0);
            records.push((
                offset_key(group_id, &topic, partition),
                Some(offset_value(&value)),
            ));
            accepted.push(((topic, partition), value));
        }
        match producer {
            None => {
                self.store_as(group_id, &records, None)?;
                self.with_group(group_id, true, |g| g.commit_offsets(accepted));
            }
            Some((producer_id, _)) => {
                // Pending before the append, so that a marker written after it finds them.
                let keys: Vec<(String, i32)> = accepted.iter().map(|(k, _)| k.clone()).collect();
                self.with_group(group_id, true, |g| {
                    g.add_pending_txn_offsets(producer_id, accepted)
                });
                if let Err(e) = self.store_as(group_id, &records, producer) {
                    self.with_group(group_id, false, |g| {
                        g.forget_pending_txn_offsets(producer_id, &keys)
                    });
                    return Err(e);
                }
            }
        }
        Ok(codes)
    }

    /// TxnOffsetCommit: stores the offsets as part of `producer`'s transaction; they take
    /// effect when its commit marker arrives. One error code per partition in request order.
    pub fn txn_commit_offsets(
        &self,
        group_id: &str,
        producer: (i64, i16),
        committer: Committer<'_>,
        offsets: Vec<(String, i32, OffsetValue)>,
    ) -> Result<Vec<i16>, ResponseError> {
        self.check_coordinator(group_id)?;
        let check = self
            .with_group(group_id, true, |g| g.check_txn_commit(&committer))
            .unwrap_or(Err(ResponseError::CoordinatorNotAvailable))?;
        self.write_checked_offsets(group_id, &check, offsets, Some(producer))
    }

    /// A transaction marker of `producer_id` reached offsets partition `partition`: its
    /// pending offsets there become committed (commit) or are dropped (abort).
    pub fn complete_txn_offsets(&self, partition: i32, producer_id: i64, commit: bool) {
        let n = self.config.offsets_partitions;
        let mut groups = self.groups.lock();
        for g in groups.values_mut() {
            if partition_for(g.id(), n) != partition {
                continue;
            }
            g.complete_txn_offsets(producer_id, commit);
        }
    }

    /// Whether an open transaction holds an offset for the partition (OffsetFetch with
    /// require_stable answers UNSTABLE_OFFSET_COMMIT then).
    pub fn has_pending_txn_offset(&self, group_id: &str, topic: &str, partition: i32) -> bool {
        let key = (topic.to_string(), partition);
        self.groups
            .lock()
            .get(group_id)
            .is_some_and(|g| g.has_pending_txn_offset(&key))
    }

    /// Rebuilds groups and offsets from every `__consumer_offsets` partition this broker leads.
    pub fn load(&self) {
        for p in 0..self.config.offsets_partitions {
            if self
                .replicas
                .partition(OFFSETS_TOPIC, p)
                .is_some_and(|part| part.is_leader())
            {
                self.load_partition(p);
            }
        }
        let count = self.groups.lock().len();
        tracing::info!(groups = count, "loaded consumer groups");
    }

    /// Loads and unloads groups as this broker gains and loses leadership of
    /// `__consumer_offsets` partitions: the coordinator follows its partition.
    pub fn follow_leadership(self: &Arc<Self>) {
        let me = Arc::downgrade(self);
        self.replicas
            .on_leadership_change(Box::new(move |partition, leader| {
                let Some(c) = me.upgrade() else { return };
                if partition.topic != OFFSETS_TOPIC {
                    return;
                }
                if leader {
                    c.load_partition(partition.index);
                    tracing::info!(
                        partition = partition.index,
                        "coordinating the groups of this offsets partition"
                    );
                } else {
                    c.unload_partition(partition.index);
                }
            }));
    }

    /// Forgets the groups of offsets partition `p` (another broker coordinates them now).
    pub fn unload_partition(&self, p: i32) {
        let n = self.config.offsets_partitions;
        self.groups.lock().retain(|id, _| partition_for(id, n) != p);
    }

    /// Rebuilds the groups of offsets partition `p` from its log.
    pub fn load_partition(&self, p: i32) {
        self.unload_partition(p);
        let now = now_ms();
        let Some(partition) = self.replicas.partition(OFFSETS_TOPIC, p) else {
            return;
        };
        let image = self.image().unwrap_or_default();
        crate::internal_topic::scan(&partition, |header, records| {
            if header.is_control() {
                let kind = records.first().and_then(control_record_type);
                if let Some(t @ (ControlRecordType::Commit | ControlRecordType::Abort)) = kind {
                    self.complete_txn_offsets(
                        p,
                        header.producer_id,
                        t == ControlRecordType::Commit,
                    );
                }
                return;
            }
            // Offsets of a transaction stay pending until its commit marker.
            let txn_producer = header.is_transactional().then_some(header.producer_id);
            load::apply_offsets_records(
                &mut self.groups.lock(),
                records,
                txn_producer,
                &*image,
                now,
            );
        });
        let n = self.config.offsets_partitions;
        let assignor = self
            .config
            .consumer
            .assignors
            .first()
            .cloned()
            .unwrap_or_default();
        for (id, g) in self.groups.lock().iter_mut() {
            if partition_for(id, n) == p {
                // The group's own session timeout, as its heartbeats would set it.
                let settings = crate::config::group_configs::consumer_settings(
                    &self.config.consumer,
                    &image.group_configs(id),
                );
                g.finish_load(&*image, &assignor, settings.session_timeout_ms, now);
            }
        }
    }

    /// Advances every group's timers and expires offsets of long-empty groups.
    pub fn tick(&self) {
        let now = now_ms();
        let mut to_store = Vec::new();
        let mut expired_offsets: Vec<(String, Vec<(String, i32)>)> = Vec::new();
        let mut fenced = Vec::new();
        {
            let mut groups = self.groups.lock();
            for g in groups.values_mut() {
                if g.tick(&self.config.group, now) {
                    to_store.push(g.id().to_string());
                }
                let expired = g
                    .drive_consumer(now, false, |c| c.expire(now))
                    .unwrap_or_default();
                if !expired.is_empty() {
                    fenced.push(g.id().to_string());
                    tracing::info!(group = %g.id(), members = ?expired, "consumer group members expired");
                    if g.maybe_downgrade(&self.config.group, now) {
                        to_store.push(g.id().to_string());
                    }
                }
                if g.is_empty() && now - g.state_since_ms() > self.config.offsets_retention_ms {
                    let keys = g.expired_offsets(now, self.config.offsets_retention_ms);
                    for k in &keys {
                        g.remove_offset(k);
                    }
                    if !keys.is_empty() {
                        expired_offsets.push((g.id().to_string(), keys));
                    }
                }
            }
        }
        self.expire_share_members();
        for id in &fenced {
            let _ = self.store_changes(id, to_store.contains(id));
        }
        for id in to_store.iter().filter(|id| !fenced.contains(id)) {
            let _ = self.store_group(id);
        }
        for (group, keys) in expired_offsets {
            let tombstones: Vec<(Bytes, Option<Bytes>)> = keys
                .iter()
                .map(|(t, p)| (offset_key(&group, t, *p), None))
                .collect();
            let _ = self.store(&group, &tombstones);
        }
    }

    /// Deletes an empty group: tombstones for its offsets and metadata.
    pub fn delete_group(&self, group_id: &str) -> Result<(), ResponseError> {
        self.check_coordinator(group_id)?;
        let keys = {
            let mut groups = self.groups.lock();
            let Some(g) = groups.get_mut(group_id) else {
                return Err(ResponseError::GroupIdNotFound);
            };
            match g.state() {
                GroupState::Dead => return Err(ResponseError::GroupIdNotFound),
                _ if g.is_empty() => {}
                _ => return Err(ResponseError::NonEmptyGroup),
            }
            let keys: Vec<(String, i32)> = g.offsets().keys().cloned().collect();
            let share_keys: Option<Vec<(String, i32)>> =
                g.share().map(|s| s.start_offsets.keys().cloned().collect());
            let consumer = self
                .image()
                .map(|image| g.consumer_tombstones(&*image))
                .unwrap_or_default();
            g.mark_dead(now_ms());
            groups.remove(group_id);
            (keys, share_keys, consumer)
        };
        let (keys, share_keys, consumer) = keys;
        let mut records: Vec<(Bytes, Option<Bytes>)> = keys
            .iter()
            .map(|(t, p)| (offset_key(group_id, t, *p), None))
            .collect();
        records.extend(consumer);
        match share_keys {
            Some(share_keys) => {
                records.extend(
                    share_keys
                        .iter()
                        .map(|(t, p)| (offsets_topic::share_offset_key(group_id, t, *p), None)),
                );
                records.push((offsets_topic::share_group_key(group_id), None));
            }
            None => records.push((group_key(group_id), None)),
        }
        self.store(group_id, &records)
    }

    /// Starts the timer task.
    /// Ends by itself once the coordinator is dropped.
    pub fn spawn_ticker(self: &Arc<Self>) {
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(Duration::from_millis(100));
            loop {
                interval.tick().await;
                match me.upgrade() {
                    Some(c) => c.tick(),
                    None => return,
                }
            }
        });
    }
}
