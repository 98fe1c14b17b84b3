//! One consumer group of the classic protocol: members, generations and the rebalance state
//! machine (Empty -> PreparingRebalance -> CompletingRebalance -> Stable, Dead when deleted).
//! Time comes in as `now_ms`; replies to waiting JoinGroup/SyncGroup calls go out on oneshots.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use kafka_protocol::ResponseError;
use tokio::sync::oneshot;

use super::consumer_group::{CommitCheck, ConsumerGroup, TopicView};
use super::consumer_group_records::{self, StoredConsumerGroup, TopicIds};
use super::offsets_topic::{GroupMetadataValue, OffsetValue, StoredMember};
use super::share_group::ShareGroup;

#[path = "group_migration.rs"]
mod migration;
pub(crate) use migration::Membership;

/// A group's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    /// No members; may still hold offsets.
    Empty,
    /// Waiting for members to (re)join.
    PreparingRebalance,
    /// Waiting for the leader's assignment.
    CompletingRebalance,
    /// Members have their assignments.
    Stable,
    /// Deleted.
    Dead,
}

impl GroupState {
    /// The states a group may come from into this one (Kafka's `validPreviousStates`).
    pub fn valid_previous(self) -> &'static [GroupState] {
        use GroupState::*;
        match self {
            Empty => &[PreparingRebalance],
            PreparingRebalance => &[Stable, CompletingRebalance, Empty],
            CompletingRebalance => &[PreparingRebalance],
            Stable => &[CompletingRebalance],
            Dead => &[Stable, PreparingRebalance, CompletingRebalance, Empty, Dead],
        }
    }

    /// Kafka's name for the state.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

/// What a JoinGroup caller gets back.
#[derive(Debug, Clone, Default)]
pub struct JoinResult {
    /// Error code (0 on success).
    pub error: i16,
    /// Generation.
    pub generation: i32,
    /// Protocol type.
    pub protocol_type: Option<String>,
    /// Chosen protocol.
    pub protocol: Option<String>,
    /// Leader member id.
    pub leader: String,
    /// The caller's member id.
    pub member_id: String,
    /// For the leader: every member and its metadata for the chosen protocol.
    pub members: Vec<(String, Option<String>, Bytes)>,
}

impl JoinResult {
    /// A refused join.
    pub(crate) fn error(code: ResponseError, member_id: &str) -> Self {
        JoinResult {
            error: code.code(),
            generation: -1,
            member_id: member_id.to_string(),
            ..Default::default()
        }
    }
}

/// What a SyncGroup caller gets back.
#[derive(Debug, Clone, Default)]
pub struct SyncResult {
    /// Error code.
    pub error: i16,
    /// Protocol type.
    pub protocol_type: Option<String>,
    /// Chosen protocol.
    pub protocol: Option<String>,
    /// The member's assignment.
    pub assignment: Bytes,
}

/// Either an answer now or one to wait for.
pub enum Reply<T> {
    /// Answer now.
    Now(T),
    /// Answer later on this channel.
    Wait(oneshot::Receiver<T>),
}

/// Who commits offsets: the member id, static instance id and generation (or member epoch)
/// an OffsetCommit or TxnOffsetCommit names; an admin client names none.
#[derive(Debug, Clone, Copy)]
pub struct Committer<'a> {
    /// Member id ("" for none).
    pub member_id: &'a str,
    /// Static membership id.
    pub instance: Option<&'a str>,
    /// Generation (classic) or member epoch (consumer protocol); -1 for none.
    pub generation: i32,
}

impl Committer<'_> {
    /// A commit that names no member (admin clients, the mirror's offset sync).
    pub const NONE: Committer<'static> = Committer {
        member_id: "",
        instance: None,
        generation: -1,
    };
}

/// A JoinGroup request, as the group needs it.
pub struct JoinRequest {
    /// Member id ("" for a new member).
    pub member_id: String,
    /// Static membership id.
    pub group_instance_id: Option<String>,
    /// Client id.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
    /// Session timeout.
    pub session_timeout_ms: i32,
    /// Rebalance timeout.
    pub rebalance_timeout_ms: i32,
    /// Protocol type.
    pub protocol_type: String,
    /// (protocol name, metadata), in preference order.
    pub protocols: Vec<(String, Bytes)>,
    /// Whether the client understands MEMBER_ID_REQUIRED (JoinGroup v4+).
    pub require_known_member_id: bool,
}

/// A group member.
pub struct Member {
    /// Member id.
    pub member_id: String,
    /// Static membership id.
    pub group_instance_id: Option<String>,
    /// Client id.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
    /// Session timeout.
    pub session_timeout_ms: i32,
    /// Rebalance timeout.
    pub rebalance_timeout_ms: i32,
    /// Supported protocols with metadata.
    pub protocols: Vec<(String, Bytes)>,
    /// Current assignment.
    pub assignment: Bytes,
    last_heartbeat_ms: i64,
    awaiting_join: Option<oneshot::Sender<JoinResult>>,
    awaiting_sync: Option<oneshot::Sender<SyncResult>>,
}

impl Member {
    /// Metadata for `protocol`.
    pub fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(n, _)| n == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }
}

/// Settings that bound group behaviour.
#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// `group.min.session.timeout.ms`.
    pub min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms`.
    pub max_session_timeout_ms: i32,
    /// `group.initial.rebalance.delay.ms`.
    pub initial_rebalance_delay_ms: i64,
    /// `group.max.size`.
    pub max_size: usize,
    /// `group.consumer.migration.policy`.
    pub migration: MigrationPolicy,
}

/// Whether a group may change protocol with members in it (Kafka's
/// `group.consumer.migration.policy`): a classic group becomes a consumer group when a member
/// of the consumer protocol joins (upgrade), a consumer group becomes classic when its last
/// member of the consumer protocol leaves (downgrade).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MigrationPolicy {
    /// Both ways (Kafka's default).
    #[default]
    Bidirectional,
    /// Classic to consumer only.
    Upgrade,
    /// Consumer to classic only.
    Downgrade,
    /// Neither; nor may classic members join a consumer group.
    Disabled,
}

impl MigrationPolicy {
    /// Whether a classic group with members may become a consumer group.
    pub fn upgrades(self) -> bool {
        matches!(
            self,
            MigrationPolicy::Bidirectional | MigrationPolicy::Upgrade
        )
    }

    /// Whether a consumer group of classic members only may become classic.
    pub fn downgrades(self) -> bool {
        matches!(
            self,
            MigrationPolicy::Bidirectional | MigrationPolicy::Downgrade
        )
    }
}

/// Where new member ids come from: given the client id (or the static instance id), a fresh id.
/// Injectable so that tests can name members.
pub(crate) type MemberIdSource = Box<dyn FnMut(&str) -> String + Send>;

/// A consumer group. Its fields are private: the state changes only through the handlers
/// below, and every state change through `transition`, which refuses what Kafka's
/// `assertValidTransition` refuses.
pub struct Group {
    id: String,
    state: GroupState,
    /// When the state last changed (or the group last became empty).
    state_since_ms: i64,
    generation: i32,
    /// Protocol type of the members.
    protocol_type: Option<String>,
    /// Chosen protocol.
    protocol: Option<String>,
    /// Leader member id.
    leader: Option<String>,
    members: BTreeMap<String, Member>,
    /// Member ids handed out (MEMBER_ID_REQUIRED) but not yet joined, with their expiry.
    pending_members: HashMap<String, i64>,
    /// Committed offsets.
    offsets: HashMap<(String, i32), OffsetValue>,
    /// Offsets committed in open transactions, by producer id: they take effect when the
    /// transaction's commit marker reaches this group's offsets partition.
    pending_txn_offsets: HashMap<i64, HashMap<(String, i32), OffsetValue>>,
    /// The membership of the consumer protocol (KIP-848) when the group is of that type; the
    /// classic state is then Empty.
    consumer: Option<ConsumerGroup>,
    /// What `__consumer_offsets` holds of the consumer-group membership: written after each
    /// change, built up while loading.
    stored_consumer: Option<StoredConsumerGroup>,
    /// The start offsets of a share group (KIP-932) when the group is of that type; the
    /// classic state is then Empty and it has no committed offsets.
    share: Option<ShareGroup>,
    member_ids: MemberIdSource,
    rebalance_deadline_ms: i64,
    initial_delay_until_ms: i64,
}

/// Records to write for a consumer group's change, and what is stored once they are.
pub(crate) type ConsumerChanges = (Vec<(Bytes, Option<Bytes>)>, Option<StoredConsumerGroup>);

/// Kafka's member ids: the client id (or instance id) plus a random suffix.
fn random_member_ids() -> MemberIdSource {
    Box::new(|prefix: &str| format!("{prefix}-{}", uuid::Uuid::new_v4()))
}

impl Group {
    /// A new empty group.
    pub fn new(id: &str, now_ms: i64) -> Self {
        Self::with_member_ids(id, now_ms, random_member_ids())
    }

    /// A new empty group whose member ids come from `member_ids`.
    pub fn with_member_ids(id: &str, now_ms: i64, member_ids: MemberIdSource) -> Self {
        Group {
            id: id.to_string(),
            state: GroupState::Empty,
            state_since_ms: now_ms,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            pending_members: HashMap::new(),
            offsets: HashMap::new(),
            pending_txn_offsets: HashMap::new(),
            consumer: None,
            stored_consumer: None,
            share: None,
            member_ids,
            rebalance_deadline_ms: 0,
            initial_delay_until_ms: 0,
        }
    }

    /// Kafka's group type: `consumer` for the KIP-848 protocol, `share` for a share group,
    /// `classic` otherwise.
    pub fn group_type(&self) -> &'static str {
        if self.consumer.is_some() {
            "consumer"
        } else if self.share.is_some() {
            "share"
        } else {
            "classic"
        }
    }

    /// Kafka's name for the group's state, of whichever protocol it runs.
    pub fn state_name(&self) -> &'static str {
        match (&self.consumer, &self.share) {
            (Some(c), _) if self.state != GroupState::Dead => c.state().name(),
            (_, Some(s)) if self.state != GroupState::Dead => s.state_name(),
            _ => self.state.name(),
        }
    }

    /// Whether the group has no members of either protocol (offsets may expire, it may be
    /// deleted).
    pub fn is_empty(&self) -> bool {
        self.state == GroupState::Empty
            && self.consumer.as_ref().is_none_or(|c| c.members.is_empty())
            && self.share.as_ref().is_none_or(|s| s.members.is_empty())
    }

    /// Moves to `state` if Kafka allows it from the current one; a refused transition is a
    /// bug, logged, and leaves the state as it was.
    fn transition(&mut self, state: GroupState, now_ms: i64) -> bool {
        if !state.valid_previous().contains(&self.state) {
            tracing::error!(group = %self.id, from = self.state.name(), to = state.name(),
                "invalid group state transition refused");
            return false;
        }
        self.state = state;
        self.state_since_ms = now_ms;
        true
    }

    fn new_member_id(&mut self, client_id: &str, instance: Option<&str>) -> String {
        (self.member_ids)(instance.unwrap_or(client_id))
    }

    /// Group id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The classic protocol's state.
    pub fn state(&self) -> GroupState {
        self.state
    }

    /// When the state last changed, or the group last became empty.
    pub fn state_since_ms(&self) -> i64 {
        self.state_since_ms
    }

    /// Protocol type of the classic members.
    pub fn protocol_type(&self) -> Option<&str> {
        self.protocol_type.as_deref()
    }

    /// The chosen protocol.
    pub fn protocol(&self) -> Option<&str> {
        self.protocol.as_deref()
    }

    /// Classic members by id.
    pub fn members(&self) -> &BTreeMap<String, Member> {
        &self.members
    }

    /// Committed offsets.
    pub fn offsets(&self) -> &HashMap<(String, i32), OffsetValue> {
        &self.offsets
    }

    /// The KIP-848 membership, when the group is a consumer group.
    pub fn consumer(&self) -> Option<&ConsumerGroup> {
        self.consumer.as_ref()
    }

    /// What the log holds of the consumer-group membership, to load records into.
    pub(crate) fn stored_consumer_mut(&mut self) -> &mut Option<StoredConsumerGroup> {
        &mut self.stored_consumer
    }

    /// The records that bring the log up to the consumer-group membership as it is now, with
    /// that image to take once they are written; None when nothing changed.
    pub(crate) fn consumer_changes(&self, ids: &dyn TopicIds) -> Option<ConsumerChanges> {
        let now = self.consumer.as_ref().map(ConsumerGroup::stored);
        if now == self.stored_consumer {
            return None;
        }
        let records = consumer_group_records::changes(
            &self.id,
            self.stored_consumer.as_ref(),
            now.as_ref(),
            ids,
        );
        Some((records, now))
    }

    /// Takes what the log now holds of the consumer-group membership (its records were
    /// written).
    pub(crate) fn set_stored_consumer(&mut self, stored: Option<StoredConsumerGroup>) {
        self.stored_consumer = stored;
    }

    /// The tombstones of every consumer-group record the log holds of this group (it is
    /// being deleted).
    pub(crate) fn consumer_tombstones(
        &mut self,
        ids: &dyn TopicIds,
    ) -> Vec<(Bytes, Option<Bytes>)> {
        let stored = self.stored_consumer.take();
        consumer_group_records::changes(&self.id, stored.as_ref(), None, ids)
    }

    /// After a load: a group whose log holds a consumer-group membership becomes that
    /// consumer group again, members, epochs and assignments as they were.
    pub(crate) fn finish_load(
        &mut self,
        topics: &dyn TopicView,
        default_assignor: &str,
        session_timeout_ms: i32,
        now_ms: i64,
    ) {
        let Some(stored) = &self.stored_consumer else {
            return;
        };
        let group =
            ConsumerGroup::restored(stored, topics, default_assignor, session_timeout_ms, now_ms);
        self.become_consumer_group(group, now_ms);
    }

    /// Drops the classic state (the classic group is gone, not moved through its state
    /// machine) and takes the membership of `group`.
    pub(crate) fn become_consumer_group(&mut self, group: ConsumerGroup, now_ms: i64) {
        self.members.clear();
        self.pending_members.clear();
        self.leader = None;
        self.protocol = None;
        self.protocol_type = None;
        self.state = GroupState::Empty;
        self.state_since_ms = now_ms;
        self.consumer = Some(group);
    }

    /// The start offsets, when the group is a share group.
    pub fn share(&self) -> Option<&ShareGroup> {
        self.share.as_ref()
    }

    /// Whether nothing is kept of the group: no members, offsets or share state (a group that
    /// exists only because something looked it up).
    fn is_blank(&self) -> bool {
        self.is_empty()
            && self.consumer.is_none()
            && self.share.is_none()
            && self.offsets.is_empty()
            && self.pending_txn_offsets.is_empty()
            && self.protocol_type.is_none()
    }

    /// The share group's state to change; with `create`, a group of which nothing is kept
    /// becomes a share group first (Kafka creates a share group on an offset reset). None when
    /// the group is of another type.
    pub fn share_mut(&mut self, create: bool) -> Option<&mut ShareGroup> {
        if self.share.is_none() && create && self.is_blank() {
            self.share = Some(ShareGroup::default());
        }
        self.share.as_mut()
    }

    /// Runs `f` on the KIP-848 membership; None when the group is not a consumer group. With
    /// `convert`, an empty classic group becomes one first (Kafka converts an empty group when
    /// a consumer-protocol member joins it). When its last member goes, offset retention starts
    /// counting.
    pub fn drive_consumer<T>(
        &mut self,
        now_ms: i64,
        convert: bool,
        f: impl FnOnce(&mut ConsumerGroup) -> T,
    ) -> Option<T> {
        if self.consumer.is_none()
            && self.share.is_none()
            && convert
            && self.state == GroupState::Empty
        {
            self.consumer = Some(ConsumerGroup::default());
        }
        let c = self.consumer.as_mut()?;
        let had_members = !c.members.is_empty();
        let out = f(c);
        if had_members && c.members.is_empty() {
            self.state_since_ms = now_ms;
        }
        Some(out)
    }

    /// Whether an open transaction holds an offset for `key`.
    pub fn has_pending_txn_offset(&self, key: &(String, i32)) -> bool {
        self.pending_txn_offsets
            .values()
            .any(|offsets| offsets.contains_key(key))
    }

    /// Takes back offsets `producer_id` had pending whose write failed.
    pub fn forget_pending_txn_offsets(&mut self, producer_id: i64, keys: &[(String, i32)]) {
        if let Some(pending) = self.pending_txn_offsets.get_mut(&producer_id) {
            for k in keys {
                pending.remove(k);
            }
        }
    }

    /// Offsets older than `retention_ms` that no open transaction is replacing (as Kafka
    /// keeps those).
    pub fn expired_offsets(&self, now_ms: i64, retention_ms: i64) -> Vec<(String, i32)> {
        self.offsets
            .iter()
            .filter(|(k, v)| {
                now_ms - v.commit_timestamp > retention_ms && !self.has_pending_txn_offset(k)
            })
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Restores generation and members from stored metadata (after a restart).
    pub fn restore(&mut self, v: &GroupMetadataValue, now_ms: i64) {
        self.generation = v.generation;
        self.protocol_type = Some(v.protocol_type.clone()).filter(|s| !s.is_empty());
        self.protocol = v.protocol.clone();
        self.leader = v.leader.clone();
        self.members.clear();
        for m in &v.members {
            let protocol = v.protocol.clone().unwrap_or_default();
            self.members.insert(
                m.member_id.clone(),
                Member {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    session_timeout_ms: m.session_timeout_ms,
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    protocols: vec![(protocol, m.subscription.clone())],
                    assignment: m.assignment.clone(),
                    last_heartbeat_ms: now_ms,
                    awaiting_join: None,
                    awaiting_sync: None,
                },
            );
        }
        // Loading sets the state outright: it is where the stored group was, not a transition.
        self.state = if self.members.is_empty() {
            GroupState::Empty
        } else {
            GroupState::Stable
        };
        self.state_since_ms = now_ms;
    }

    /// What to store for this group's metadata.
    pub fn metadata_value(&self, now_ms: i64) -> GroupMetadataValue {
        let protocol = self.protocol.clone().unwrap_or_default();
        GroupMetadataValue {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation,
            protocol: self.protocol.clone(),
            leader: self.leader.clone(),
            current_state_timestamp: now_ms,
            members: self
                .members
                .values()
                .map(|m| StoredMember {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: m.session_timeout_ms,
                    subscription: m.metadata(&protocol),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }
    }

    fn static_member(&self, instance: &str) -> Option<String> {
        self.members
            .values()
            .find(|m| m.group_instance_id.as_deref() == Some(instance))
            .map(|m| m.member_id.clone())
    }

    fn supports(&self, req: &JoinRequest) -> bool {
        if req.protocols.is_empty() || req.protocol_type.is_empty() {
            return false;
        }
        if self.members.is_empty() {
            return true;
        }
        if self.protocol_type.as_deref() != Some(req.protocol_type.as_str()) {
            return false;
        }
        // Some protocol every current member and the joiner support.
        req.protocols.iter().any(|(name, _)| {
            self.members
                .values()
                .all(|m| m.protocols.iter().any(|(n, _)| n == name))
        })
    }

    /// Handles JoinGroup.
    pub fn join(
        &mut self,
        req: JoinRequest,
        config: &GroupConfig,
        now_ms: i64,
    ) -> Reply<JoinResult> {
        if self.state == GroupState::Dead {
            return Reply::Now(JoinResult::error(
                ResponseError::CoordinatorNotAvailable,
                &req.member_id,
            ));
        }
        // A classic member cannot join a share group, nor a group of the consumer protocol that
        // has members (Kafka without online migration); an empty consumer group turns classic.
        if self.share.is_some() {
            return Reply::Now(JoinResult::error(
                ResponseError::InconsistentGroupProtocol,
                &req.member_id,
            ));
        }
        if let Some(c) = &self.consumer {
            if !c.members.is_empty() {
                return Reply::Now(JoinResult::error(
                    ResponseError::InconsistentGroupProtocol,
                    &req.member_id,
                ));
            }
            self.consumer = None;
        }
        if req.session_timeout_ms < config.min_session_timeout_ms
            || req.session_timeout_ms > config.max_session_timeout_ms
        {
            return Reply::Now(JoinResult::error(
                ResponseError::InvalidSessionTimeout,
                &req.member_id,
            ));
        }
        if !self.supports(&req) {
            return Reply::Now(JoinResult::error(
                ResponseError::InconsistentGroupProtocol,
                &req.member_id,
            ));
        }
        // Static members keep their identity across restarts by group.instance.id.
        let mut member_id = req.member_id.clone();
        if let Some(instance) = &req.group_instance_id {
            if let Some(existing) = self.static_member(instance) {
                if member_id.is_empty() || member_id != existing {
                    // A restarted static member replaces the old incarnation without a rebalance
                    // when nothing else changed.
                    let new_id = self.new_member_id(&req.client_id, Some(instance));
                    if let Some(mut old) = self.members.remove(&existing) {
                        if let Some(tx) = old.awaiting_join.take() {
                            let _ = tx.send(JoinResult::error(
                                ResponseError::FencedInstanceId,
                                &existing,
                            ));
                        }
                        old.member_id = new_id.clone();
                        old.protocols = req.protocols.clone();
                        old.last_heartbeat_ms = now_ms;
                        if self.leader.as_deref() == Some(existing.as_str()) {
                            self.leader = Some(new_id.clone());
                        }
                        self.members.insert(new_id.clone(), old);
                    }
                    member_id = new_id;
                    if self.state == GroupState::Stable {
                        let m = &self.members[&member_id];
                        return Reply::Now(self.join_result_for(m, false));
                    }
                }
            } else if member_id.is_empty() {
                member_id = self.new_member_id(&req.client_id, Some(instance));
            }
        } else if member_id.is_empty() {
            member_id = self.new_member_id(&req.client_id, None);
            if req.require_known_member_id {
                self.pending_members
                    .insert(member_id.clone(), now_ms + req.session_timeout_ms as i64);
                return Reply::Now(JoinResult {
                    error: ResponseError::MemberIdRequired.code(),
                    generation: -1,
                    member_id,
                    ..Default::default()
                });
            }
        } else if !self.members.contains_key(&member_id)
            && self.pending_members.remove(&member_id).is_none()
        {
            return Reply::Now(JoinResult::error(
                ResponseError::UnknownMemberId,
                &member_id,
            ));
        }
        if !self.members.contains_key(&member_id) && self.members.len() >= config.max_size {
            return Reply::Now(JoinResult::error(
                ResponseError::GroupMaxSizeReached,
                &member_id,
            ));
        }
        self.pending_members.remove(&member_id);
        let (tx, rx) = oneshot::channel();
        let changed = match self.members.get_mut(&member_id) {
            Some(m) => {
                let changed = m.protocols != req.protocols;
                m.protocols = req.protocols.clone();
                m.session_timeout_ms = req.session_timeout_ms;
                m.rebalance_timeout_ms = req.rebalance_timeout_ms;
                m.last_heartbeat_ms = now_ms;
                if let Some(old) = m.awaiting_join.replace(tx) {
                    let _ = old.send(JoinResult::error(
                        ResponseError::UnknownMemberId,
                        &member_id,
                    ));
                }
                changed
            }
            None => {
                self.members.insert(
                    member_id.clone(),
                    Member {
                        member_id: member_id.clone(),
                        group_instance_id: req.group_instance_id.clone(),
                        client_id: req.client_id.clone(),
                        client_host: req.client_host.clone(),
                        session_timeout_ms: req.session_timeout_ms,
                        rebalance_timeout_ms: req.rebalance_timeout_ms,
                        protocols: req.protocols.clone(),
                        assignment: Bytes::new(),
                        last_heartbeat_ms: now_ms,
                        awaiting_join: Some(tx),
                        awaiting_sync: None,
                    },
                );
                true
            }
        };
        if self.protocol_type.is_none() {
            self.protocol_type = Some(req.protocol_type.clone());
        }
        match self.state {
            GroupState::PreparingRebalance => {}
            GroupState::Stable if !changed && self.leader.as_deref() != Some(&member_id) => {
                // A follower rejoining with nothing new gets the current generation back.
                let m = self
                    .members
                    .get_mut(&member_id)
                    .expect("member just inserted");
                let tx = m.awaiting_join.take();
                let result = self.join_result_for(&self.members[&member_id], false);
                if let Some(tx) = tx {
                    let _ = tx.send(result);
                }
                return Reply::Wait(rx);
            }
            _ => self.prepare_rebalance(now_ms, config),
        }
        self.maybe_complete_join(now_ms);
        Reply::Wait(rx)
    }

    fn join_result_for(&self, m: &Member, include_members: bool) -> JoinResult {
        let protocol = self.protocol.clone().unwrap_or_default();
        JoinResult {
            error: 0,
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol: self.protocol.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            member_id: m.member_id.clone(),
            members: if include_members {
                self.members
                    .values()
                    .map(|x| {
                        (
                            x.member_id.clone(),
                            x.group_instance_id.clone(),
                            x.metadata(&protocol),
                        )
                    })
                    .collect()
            } else {
                Vec::new()
            },
        }
    }

    fn prepare_rebalance(&mut self, now_ms: i64, config: &GroupConfig) {
        if self.state == GroupState::CompletingRebalance {
            for m in self.members.values_mut() {
                m.assignment = Bytes::new();
                if let Some(tx) = m.awaiting_sync.take() {
                    let _ = tx.send(SyncResult {
                        error: ResponseError::RebalanceInProgress.code(),
                        ..Default::default()
                    });
                }
            }
        }
        let timeout = self
            .members
            .values()
            .map(|m| m.rebalance_timeout_ms as i64)
            .max()
            .unwrap_or(0);
        self.rebalance_deadline_ms = now_ms + timeout;
        self.initial_delay_until_ms = if self.state == GroupState::Empty {
            now_ms + config.initial_rebalance_delay_ms.min(timeout)
        } else {
            now_ms
        };
        self.transition(GroupState::PreparingRebalance, now_ms);
    }

    fn all_joined(&self) -> bool {
        self.pending_members.is_empty() && self.members.values().all(|m| m.awaiting_join.is_some())
    }

    /// Completes the join phase when everyone rejoined (or the deadline passed). Returns true
    /// when group metadata changed in a way worth storing (the group became empty).
    fn maybe_complete_join(&mut self, now_ms: i64) -> bool {
        if self.state != GroupState::PreparingRebalance {
            return false;
        }
        let deadline_passed = now_ms >= self.rebalance_deadline_ms;
        if !(deadline_passed || (self.all_joined() && now_ms >= self.initial_delay_until_ms)) {
            return false;
        }
        // Members that did not rejoin in time are out.
        self.members.retain(|_, m| m.awaiting_join.is_some());
        self.pending_members.clear();
        self.generation += 1;
        if self.members.is_empty() {
            self.protocol = None;
            self.leader = None;
            self.protocol_type = None;
            self.transition(GroupState::Empty, now_ms);
            return true;
        }
        self.protocol = self.select_protocol();
        if !self
            .leader
            .as_ref()
            .is_some_and(|l| self.members.contains_key(l))
        {
            self.leader = self.members.keys().next().cloned();
        }
        self.transition(GroupState::CompletingRebalance, now_ms);
        let leader = self.leader.clone().unwrap_or_default();
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let is_leader = id == leader;
            let result = self.join_result_for(&self.members[&id], is_leader);
            if let Some(m) = self.members.get_mut(&id) {
                m.last_heartbeat_ms = now_ms;
                if let Some(tx) = m.awaiting_join.take() {
                    let _ = tx.send(result);
                }
            }
        }
        false
    }

    fn select_protocol(&self) -> Option<String> {
        let candidates: Vec<&String> = self
            .members
            .values()
            .next()?
            .protocols
            .iter()
            .map(|(n, _)| n)
            .filter(|n| {
                self.members
                    .values()
                    .all(|m| m.protocols.iter().any(|(x, _)| x == *n))
            })
            .collect();
        let mut votes: BTreeMap<&String, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some((n, _)) = m.protocols.iter().find(|(n, _)| candidates.contains(&n)) {
                *votes.entry(n).or_default() += 1;
            }
        }
        votes
            .into_iter()
            .max_by_key(|(_, v)| *v)
            .map(|(n, _)| n.clone())
    }

    fn check_member(
        &self,
        member_id: &str,
        instance: Option<&str>,
        generation: i32,
    ) -> Result<(), ResponseError> {
        let Some(m) = self.members.get(member_id) else {
            if let Some(i) = instance {
                if self.static_member(i).is_some() {
                    return Err(ResponseError::FencedInstanceId);
                }
            }
            return Err(ResponseError::UnknownMemberId);
        };
        if let (Some(i), Some(mi)) = (instance, m.group_instance_id.as_deref()) {
            if i != mi {
                return Err(ResponseError::FencedInstanceId);
            }
        }
        if generation != self.generation {
            return Err(ResponseError::IllegalGeneration);
        }
        Ok(())
    }

    /// Handles SyncGroup. Returns the reply and whether group metadata should be stored.
    pub fn sync(
        &mut self,
        member_id: &str,
        instance: Option<&str>,
        generation: i32,
        assignments: Vec<(String, Bytes)>,
        now_ms: i64,
    ) -> (Reply<SyncResult>, bool) {
        let err = |e: ResponseError| {
            (
                Reply::Now(SyncResult {
                    error: e.code(),
                    ..Default::default()
                }),
                false,
            )
        };
        if self.state == GroupState::Dead {
            return err(ResponseError::CoordinatorNotAvailable);
        }
        if let Err(e) = self.check_member(member_id, instance, generation) {
            return err(e);
        }
        match self.state {
            GroupState::Empty | GroupState::Dead => err(ResponseError::UnknownMemberId),
            GroupState::PreparingRebalance => err(ResponseError::RebalanceInProgress),
            GroupState::Stable => {
                let m = &self.members[member_id];
                (
                    Reply::Now(SyncResult {
                        error: 0,
                        protocol_type: self.protocol_type.clone(),
                        protocol: self.protocol.clone(),
                        assignment: m.assignment.clone(),
                    }),
                    false,
                )
            }
            GroupState::CompletingRebalance => {
                let (tx, rx) = oneshot::channel();
                if let Some(m) = self.members.get_mut(member_id) {
                    m.last_heartbeat_ms = now_ms;
                    m.awaiting_sync = Some(tx);
                }
                if self.leader.as_deref() != Some(member_id) {
                    return (Reply::Wait(rx), false);
                }
                for m in self.members.values_mut() {
                    m.assignment = Bytes::new();
                }
                for (id, assignment) in assignments {
                    if let Some(m) = self.members.get_mut(&id) {
                        m.assignment = assignment;
                    }
                }
                self.transition(GroupState::Stable, now_ms);
                for m in self.members.values_mut() {
                    if let Some(tx) = m.awaiting_sync.take() {
                        let _ = tx.send(SyncResult {
                            error: 0,
                            protocol_type: self.protocol_type.clone(),
                            protocol: self.protocol.clone(),
                            assignment: m.assignment.clone(),
                        });
                    }
                }
                (Reply::Wait(rx), true)
            }
        }
    }

    /// Handles Heartbeat; returns the error code.
    pub fn heartbeat(
        &mut self,
        member_id: &str,
        instance: Option<&str>,
        generation: i32,
        now_ms: i64,
    ) -> i16 {
        if self.state == GroupState::Dead {
            return ResponseError::CoordinatorNotAvailable.code();
        }
        if let Err(e) = self.check_member(member_id, instance, generation) {
            return e.code();
        }
        if let Some(m) = self.members.get_mut(member_id) {
            m.last_heartbeat_ms = now_ms;
        }
        match self.state {
            GroupState::PreparingRebalance => ResponseError::RebalanceInProgress.code(),
            GroupState::Empty => ResponseError::UnknownMemberId.code(),
            _ => 0,
        }
    }

    /// Removes members (LeaveGroup); returns one error code per member and whether group
    /// metadata should be stored.
    pub fn leave(
        &mut self,
        members: &[(String, Option<String>)],
        config: &GroupConfig,
        now_ms: i64,
    ) -> (Vec<i16>, bool) {
        let mut codes = Vec::with_capacity(members.len());
        let mut removed = false;
        for (member_id, instance) in members {
            let id = if member_id.is_empty() {
                instance.as_deref().and_then(|i| self.static_member(i))
            } else {
                Some(member_id.clone())
            };
            match id.and_then(|id| self.members.remove(&id)) {
                Some(mut m) => {
                    if let Some(tx) = m.awaiting_join.take() {
                        let _ = tx.send(JoinResult::error(
                            ResponseError::UnknownMemberId,
                            &m.member_id,
                        ));
                    }
                    if let Some(tx) = m.awaiting_sync.take() {
                        let _ = tx.send(SyncResult {
                            error: ResponseError::UnknownMemberId.code(),
                            ..Default::default()
                        });
                    }
                    removed = true;
                    codes.push(0);
                }
                None => codes.push(ResponseError::UnknownMemberId.code()),
            }
        }
        let mut store = false;
        if removed {
            if self.state != GroupState::PreparingRebalance {
                self.prepare_rebalance(now_ms, config);
            }
            store = self.maybe_complete_join(now_ms);
        }
        (codes, store)
    }

    /// Advances timers: expires silent members and completes overdue joins. Returns true when
    /// group metadata should be stored.
    pub fn tick(&mut self, config: &GroupConfig, now_ms: i64) -> bool {
        self.pending_members
            .retain(|_, deadline| *deadline > now_ms);
        if matches!(
            self.state,
            GroupState::Stable | GroupState::CompletingRebalance | GroupState::PreparingRebalance
        ) {
            let expired: Vec<String> = self
                .members
                .values()
                .filter(|m| {
                    m.awaiting_join.is_none()
                        && m.last_heartbeat_ms + m.session_timeout_ms as i64 <= now_ms
                })
                .map(|m| m.member_id.clone())
                .collect();
            if !expired.is_empty() {
                tracing::info!(group = %self.id, members = ?expired, "members expired");
                let leaving: Vec<(String, Option<String>)> =
                    expired.into_iter().map(|id| (id, None)).collect();
                let (_, store) = self.leave(&leaving, config, now_ms);
                return store;
            }
        }
        self.maybe_complete_join(now_ms)
    }

    /// Whether a standalone (generation -1) or member commit is allowed; the error otherwise.
    ///
    /// As Kafka's classic group: a member of the current generation may commit while the group
    /// prepares a rebalance (consumers commit in their revoke callbacks, before they rejoin);
    /// only a group waiting for its leader's assignment (CompletingRebalance) refuses with
    /// REBALANCE_IN_PROGRESS.
    pub fn check_commit(&self, committer: &Committer<'_>) -> Result<CommitCheck, ResponseError> {
        self.check_commit_of(committer, false)
    }

    /// Whether a TxnOffsetCommit may commit: as Kafka's classic groups, without a member id,
    /// generation or instance id it is taken whatever the group's state; with any of them the
    /// member must be current, and no rebalance refuses it.
    pub fn check_txn_commit(
        &self,
        committer: &Committer<'_>,
    ) -> Result<CommitCheck, ResponseError> {
        self.check_commit_of(committer, true)
    }

    /// [`Self::check_commit`] or, `transactional`, [`Self::check_txn_commit`]. A classic group
    /// takes or refuses the whole commit; a consumer-protocol group may refuse some partitions.
    fn check_commit_of(
        &self,
        committer: &Committer<'_>,
        transactional: bool,
    ) -> Result<CommitCheck, ResponseError> {
        let Committer {
            member_id,
            instance,
            generation,
        } = *committer;
        if self.state == GroupState::Dead {
            return Err(ResponseError::CoordinatorNotAvailable);
        }
        if let Some(c) = &self.consumer {
            return c.check_commit(member_id, generation, transactional && instance.is_none());
        }
        self.check_classic_commit(committer, transactional)
            .map(|()| CommitCheck::All)
    }

    fn check_classic_commit(
        &self,
        committer: &Committer<'_>,
        transactional: bool,
    ) -> Result<(), ResponseError> {
        let Committer {
            member_id,
            instance,
            generation,
        } = *committer;
        if self.share.is_some() {
            // A share group has no committed offsets (its consumers acknowledge records).
            return Err(ResponseError::GroupIdNotFound);
        }
        let anonymous = member_id.is_empty() && instance.is_none();
        if transactional {
            if generation < 0 && (self.state == GroupState::Empty || anonymous) {
                return Ok(());
            }
            return self.check_member(member_id, instance, generation);
        }
        if generation < 0 && self.state == GroupState::Empty {
            // A client that manages its own assignment (assign() + commit), or an admin client.
            return Ok(());
        }
        if generation < 0 && anonymous {
            // No member id and no generation: only an empty group takes such commits.
            return Err(ResponseError::UnknownMemberId);
        }
        self.check_member(member_id, instance, generation)?;
        if self.state == GroupState::CompletingRebalance {
            return Err(ResponseError::RebalanceInProgress);
        }
        Ok(())
    }

    /// Topics some member subscribes to (consumer protocol only).
    pub fn subscribed_topics(&self) -> Vec<String> {
        if let Some(c) = &self.consumer {
            return c.subscribed_topic_names().into_iter().collect();
        }
        if self.protocol_type.as_deref() != Some("consumer") {
            return Vec::new();
        }
        let protocol = self.protocol.clone().unwrap_or_default();
        let mut topics: Vec<String> = self
            .members
            .values()
            .flat_map(|m| super::offsets_topic::subscribed_topics(&m.metadata(&protocol)))
            .collect();
        topics.sort();
        topics.dedup();
        topics
    }

    /// Marks the group deleted.
    pub fn mark_dead(&mut self, now_ms: i64) {
        self.transition(GroupState::Dead, now_ms);
        self.offsets.clear();
        self.pending_txn_offsets.clear();
        self.share = None;
    }

    /// Offsets committed outside a transaction take effect, and replace what open transactions
    /// hold for the same partitions: those records came before, and the later record wins (as
    /// Kafka replays them).
    pub fn commit_offsets(
        &mut self,
        entries: impl IntoIterator<Item = ((String, i32), OffsetValue)>,
    ) {
        for (key, value) in entries {
            for pending in self.pending_txn_offsets.values_mut() {
                pending.remove(&key);
            }
            self.offsets.insert(key, value);
        }
    }

    /// An offset deleted (a tombstone: expiry, OffsetDelete), pending ones included.
    pub fn remove_offset(&mut self, key: &(String, i32)) {
        self.offsets.remove(key);
        for pending in self.pending_txn_offsets.values_mut() {
            pending.remove(key);
        }
    }

    /// Offsets `producer_id` commits in its open transaction.
    pub fn add_pending_txn_offsets(
        &mut self,
        producer_id: i64,
        entries: impl IntoIterator<Item = ((String, i32), OffsetValue)>,
    ) {
        self.pending_txn_offsets
            .entry(producer_id)
            .or_default()
            .extend(entries);
    }

    /// `producer_id`'s transaction ended: its pending offsets take effect (commit) or go.
    pub fn complete_txn_offsets(&mut self, producer_id: i64, commit: bool) {
        if let Some(pending) = self.pending_txn_offsets.remove(&producer_id) {
            if commit {
                self.offsets.extend(pending);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committer an OffsetCommit or TxnOffsetCommit names.
    fn committer<'a>(
        member_id: &'a str,
        instance: Option<&'a str>,
        generation: i32,
    ) -> Committer<'a> {
        Committer {
            member_id,
            instance,
            generation,
        }
    }

    fn config() -> GroupConfig {
        GroupConfig {
            min_session_timeout_ms: 10,
            max_session_timeout_ms: 100_000,
            initial_rebalance_delay_ms: 0,
            max_size: 10,
            migration: MigrationPolicy::Bidirectional,
        }
    }

    fn join_req(member: &str) -> JoinRequest {
        JoinRequest {
            member_id: member.into(),
            group_instance_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            session_timeout_ms: 1000,
            rebalance_timeout_ms: 5000,
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), Bytes::from_static(b"m"))],
            require_known_member_id: true,
        }
    }

    fn now<T>(r: Reply<T>) -> T {
        match r {
            Reply::Now(t) => t,
            Reply::Wait(mut rx) => rx.try_recv().expect("reply should be ready"),
        }
    }

    fn waiting<T>(r: Reply<T>) -> oneshot::Receiver<T> {
        match r {
            Reply::Wait(rx) => rx,
            Reply::Now(_) => panic!("expected to wait"),
        }
    }

    /// A group whose members are named `m1`, `m2`, ... in the order they ask.
    fn named_group() -> Group {
        let mut n = 0;
        Group::with_member_ids(
            "g",
            0,
            Box::new(move |_| {
                n += 1;
                format!("m{n}")
            }),
        )
    }

    /// Joins a new member (two JoinGroups: MEMBER_ID_REQUIRED, then with the id).
    fn join_new(g: &mut Group, at: i64) -> (String, Reply<JoinResult>) {
        let id = now(g.join(join_req(""), &config(), at)).member_id;
        let reply = g.join(join_req(&id), &config(), at);
        (id, reply)
    }

    #[test]
    fn every_transition_kafka_allows_happens_and_no_other() {
        use GroupState::*;
        let mut g = named_group();
        // Empty -> PreparingRebalance -> CompletingRebalance (one member: the join completes).
        let (m1, r1) = join_new(&mut g, 0);
        assert_eq!(m1, "m1");
        assert_eq!(now(r1).leader, "m1");
        assert_eq!(g.state(), CompletingRebalance);
        // CompletingRebalance -> Stable (the leader's SyncGroup).
        let (reply, _) = g.sync(
            "m1",
            None,
            1,
            vec![("m1".into(), Bytes::from_static(b"a"))],
            1,
        );
        assert_eq!(now(reply).error, 0);
        assert_eq!(g.state(), Stable);
        // Stable -> PreparingRebalance (a second member joins); m1 is told to rejoin.
        let (m2, r2) = join_new(&mut g, 2);
        assert_eq!(m2, "m2");
        assert_eq!(g.state(), PreparingRebalance);
        assert_eq!(
            g.heartbeat("m1", None, 1, 2),
            ResponseError::RebalanceInProgress.code()
        );
        let r1 = g.join(join_req("m1"), &config(), 3);
        assert_eq!(g.state(), CompletingRebalance);
        assert_eq!(now(r1).generation, 2);
        assert_eq!(now(r2).generation, 2);
        // CompletingRebalance -> PreparingRebalance (a member leaves before the assignment).
        let (codes, _) = g.leave(&[("m2".into(), None)], &config(), 4);
        assert_eq!(codes, vec![0]);
        assert_eq!(g.state(), PreparingRebalance);
        let r1 = g.join(join_req("m1"), &config(), 4);
        assert_eq!(g.state(), CompletingRebalance);
        assert_eq!(now(r1).generation, 3);
        // PreparingRebalance -> Empty (the last member leaves).
        let (_, r) = join_new(&mut g, 5);
        assert_eq!(g.state(), PreparingRebalance);
        drop(r);
        let (codes, store) = g.leave(&[("m1".into(), None), ("m3".into(), None)], &config(), 6);
        assert_eq!(codes, vec![0, 0]);
        assert!(store);
        assert_eq!(g.state(), Empty);
        // Empty -> Dead.
        g.mark_dead(7);
        assert_eq!(g.state(), Dead);

        // The table itself is Kafka's, and a refused transition changes nothing.
        for to in [Empty, PreparingRebalance, CompletingRebalance, Stable, Dead] {
            for from in [Empty, PreparingRebalance, CompletingRebalance, Stable, Dead] {
                let allowed = match to {
                    Empty => from == PreparingRebalance,
                    PreparingRebalance => matches!(from, Stable | CompletingRebalance | Empty),
                    CompletingRebalance => from == PreparingRebalance,
                    Stable => from == CompletingRebalance,
                    Dead => true,
                };
                assert_eq!(
                    to.valid_previous().contains(&from),
                    allowed,
                    "{from:?} -> {to:?}"
                );
            }
        }
    }

    #[test]
    fn an_invalid_transition_is_refused_and_changes_nothing() {
        let mut g = named_group();
        assert!(!g.transition(GroupState::Stable, 5));
        assert_eq!((g.state(), g.state_since_ms()), (GroupState::Empty, 0));
        assert!(g.transition(GroupState::PreparingRebalance, 6));
        assert!(!g.transition(GroupState::Stable, 7));
        assert_eq!(g.state(), GroupState::PreparingRebalance);
    }

    #[test]
    fn new_member_needs_an_id_then_joins_and_syncs() {
        let mut g = Group::new("g", 0);
        let r = now(g.join(join_req(""), &config(), 0));
        assert_eq!(r.error, ResponseError::MemberIdRequired.code());
        let id = r.member_id;
        let r = now(g.join(join_req(&id), &config(), 1));
        assert_eq!(
            (r.error, r.generation, r.leader.as_str()),
            (0, 1, id.as_str())
        );
        assert_eq!(r.members.len(), 1);
        assert_eq!(g.state, GroupState::CompletingRebalance);
        let (reply, store) = g.sync(
            &id,
            None,
            1,
            vec![(id.clone(), Bytes::from_static(b"a"))],
            2,
        );
        assert!(store);
        assert_eq!(now(reply).assignment, Bytes::from_static(b"a"));
        assert_eq!(g.state, GroupState::Stable);
        assert_eq!(g.heartbeat(&id, None, 1, 3), 0);
        assert_eq!(
            g.heartbeat(&id, None, 0, 3),
            ResponseError::IllegalGeneration.code()
        );
        assert_eq!(
            g.heartbeat("nobody", None, 1, 3),
            ResponseError::UnknownMemberId.code()
        );
    }

    #[test]
    fn transactional_commits_check_the_member_only_when_one_is_named() {
        let mut g = Group::new("g", 0);
        // An empty group takes any commit without a generation.
        assert_eq!(
            g.check_txn_commit(&committer("", None, -1)),
            Ok(CommitCheck::All)
        );
        assert_eq!(
            g.check_txn_commit(&committer("ghost", None, -1)),
            Ok(CommitCheck::All)
        );
        let a = now(g.join(join_req(""), &config(), 0)).member_id;
        now(g.join(join_req(&a), &config(), 0));
        // Completing a rebalance does not refuse a transactional commit.
        assert_eq!(g.state, GroupState::CompletingRebalance);
        assert_eq!(
            g.check_txn_commit(&committer(&a, None, 1)),
            Ok(CommitCheck::All)
        );
        assert_eq!(
            g.check_txn_commit(&committer("", None, -1)),
            Ok(CommitCheck::All)
        );
        assert_eq!(
            g.check_txn_commit(&committer(&a, None, 2)),
            Err(ResponseError::IllegalGeneration)
        );
        assert_eq!(
            g.check_txn_commit(&committer(&a, None, -1)),
            Err(ResponseError::IllegalGeneration)
        );
        assert_eq!(
            g.check_txn_commit(&committer("ghost", None, 1)),
            Err(ResponseError::UnknownMemberId)
        );
        assert_eq!(
            g.check_txn_commit(&committer("", None, 1)),
            Err(ResponseError::UnknownMemberId)
        );
    }

    #[test]
    fn second_member_triggers_rebalance_and_both_get_the_new_generation() {
        let mut g = Group::new("g", 0);
        let a = now(g.join(join_req(""), &config(), 0)).member_id;
        now(g.join(join_req(&a), &config(), 0));
        now(g.sync(&a, None, 1, vec![], 0).0);
        let b = now(g.join(join_req(""), &config(), 1)).member_id;
        let mut rb = waiting(g.join(join_req(&b), &config(), 1));
        assert_eq!(g.state, GroupState::PreparingRebalance);
        assert_eq!(
            g.heartbeat(&a, None, 1, 2),
            ResponseError::RebalanceInProgress.code()
        );
        let ra = now(g.join(join_req(&a), &config(), 2));
        let rb = rb.try_recv().unwrap();
        assert_eq!((ra.generation, rb.generation), (2, 2));
        assert_eq!(
            ra.members.len() + rb.members.len(),
            2,
            "only the leader sees members"
        );
    }

    #[test]
    fn silent_member_expires_and_the_group_rebalances_without_it() {
        let mut g = Group::new("g", 0);
        let a = now(g.join(join_req(""), &config(), 0)).member_id;
        now(g.join(join_req(&a), &config(), 0));
        now(g.sync(&a, None, 1, vec![], 0).0);
        assert!(!g.tick(&config(), 500));
        assert_eq!(g.state, GroupState::Stable);
        assert!(g.tick(&config(), 1001), "group becomes empty: store it");
        assert_eq!(g.state, GroupState::Empty);
        assert!(g.members.is_empty());
        assert_eq!(g.generation, 2);
    }

    #[test]
    fn inconsistent_protocol_and_bad_timeouts_are_rejected() {
        let mut g = Group::new("g", 0);
        let a = now(g.join(join_req(""), &config(), 0)).member_id;
        now(g.join(join_req(&a), &config(), 0));
        let mut other = join_req("");
        other.protocols = vec![("roundrobin".into(), Bytes::new())];
        assert_eq!(
            now(g.join(other, &config(), 0)).error,
            ResponseError::InconsistentGroupProtocol.code()
        );
        let mut bad = join_req("");
        bad.session_timeout_ms = 1;
        assert_eq!(
            now(g.join(bad, &config(), 0)).error,
            ResponseError::InvalidSessionTimeout.code()
        );
        assert_eq!(
            now(g.join(join_req("made-up"), &config(), 0)).error,
            ResponseError::UnknownMemberId.code()
        );
    }

    #[test]
    fn members_commit_while_the_group_prepares_a_rebalance_but_not_while_it_completes_one() {
        let mut g = Group::new("g", 0);
        let a = now(g.join(join_req(""), &config(), 0)).member_id;
        now(g.join(join_req(&a), &config(), 0));
        assert_eq!(g.state, GroupState::CompletingRebalance);
        assert_eq!(
            g.check_commit(&committer(&a, None, 1)),
            Err(ResponseError::RebalanceInProgress),
            "generation 1 has no assignment yet"
        );
        now(g.sync(&a, None, 1, vec![], 0).0);
        assert_eq!(
            g.check_commit(&committer(&a, None, 1)),
            Ok(CommitCheck::All)
        );
        // A second member joins: the group prepares a rebalance while `a` still owns its
        // partitions and commits them from its revoke callback.
        let b = now(g.join(join_req(""), &config(), 1)).member_id;
        let _wait_b = waiting(g.join(join_req(&b), &config(), 1));
        assert_eq!(g.state, GroupState::PreparingRebalance);
        assert_eq!(
            g.check_commit(&committer(&a, None, 1)),
            Ok(CommitCheck::All)
        );
        assert_eq!(
            g.check_commit(&committer(&a, None, 0)),
            Err(ResponseError::IllegalGeneration)
        );
        assert_eq!(
            g.check_commit(&committer("nobody", None, 1)),
            Err(ResponseError::UnknownMemberId)
        );
        assert_eq!(
            g.check_commit(&committer("", None, -1)),
            Err(ResponseError::UnknownMemberId),
            "a standalone commit into a group with members"
        );
        // `a` rejoins: generation 2 waits for the leader's assignment.
        now(g.join(join_req(&a), &config(), 2));
        assert_eq!(g.state, GroupState::CompletingRebalance);
        assert_eq!(
            g.check_commit(&committer(&a, None, 2)),
            Err(ResponseError::RebalanceInProgress)
        );
        assert_eq!(
            g.check_commit(&committer(&a, None, 1)),
            Err(ResponseError::IllegalGeneration)
        );
    }

    #[test]
    fn leave_empties_the_group_and_standalone_commits_are_allowed_then() {
        let mut g = Group::new("g", 0);
        let a = now(g.join(join_req(""), &config(), 0)).member_id;
        now(g.join(join_req(&a), &config(), 0));
        assert_eq!(
            g.check_commit(&committer("", None, -1)),
            Err(ResponseError::UnknownMemberId)
        );
        let (codes, store) = g.leave(&[(a.clone(), None)], &config(), 1);
        assert_eq!(codes, vec![0]);
        assert!(store);
        assert_eq!(g.state, GroupState::Empty);
        assert_eq!(
            g.check_commit(&committer("", None, -1)),
            Ok(CommitCheck::All)
        );
        let (codes, _) = g.leave(&[(a, None)], &config(), 1);
        assert_eq!(codes, vec![ResponseError::UnknownMemberId.code()]);
    }
}
