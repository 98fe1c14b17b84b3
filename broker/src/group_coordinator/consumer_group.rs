//! The membership of a consumer group of the KIP-848 protocol (ConsumerGroupHeartbeat): the
//! group epoch, the target assignment the server-side assignor computes at each epoch, and each
//! member's reconciliation towards its target. A member first gives up the partitions it must
//! revoke (it stays at its epoch meanwhile), then moves to the target epoch and receives
//! partitions as their previous owners release them, as Kafka's CurrentAssignmentBuilder does.
//! Time comes in as `now_ms`. The coordinator stores the membership in `__consumer_offsets`
//! after each change (`stored`, `consumer_group_records`).

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::ResponseError;

use super::assignor::{self, Assignment, MemberSpec};

#[path = "consumer_group_classic.rs"]
mod classic;
#[path = "consumer_group_stored.rs"]
mod stored;
pub(crate) use classic::ClassicMembership;

/// The epoch a member sends to leave the group.
pub(crate) const LEAVE_EPOCH: i32 = -1;
/// The epoch a static member sends to leave for a while, keeping its assignment.
pub(crate) const LEAVE_STATIC_EPOCH: i32 = -2;

/// Settings of consumer groups (Kafka's `group.consumer.*`).
#[derive(Debug, Clone)]
pub struct ConsumerGroupConfig {
    /// `group.consumer.session.timeout.ms`.
    pub session_timeout_ms: i32,
    /// `group.consumer.heartbeat.interval.ms`.
    pub heartbeat_interval_ms: i32,
    /// `group.consumer.assignors`, as short names; the first is the default.
    pub assignors: Vec<String>,
    /// `group.consumer.max.size`.
    pub max_size: usize,
}

impl Default for ConsumerGroupConfig {
    fn default() -> Self {
        ConsumerGroupConfig {
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5_000,
            assignors: vec!["uniform".into(), "range".into()],
            max_size: i32::MAX as usize,
        }
    }
}

/// The topics a group can be assigned: what the metadata image holds.
pub trait TopicView {
    /// The partition count of `topic`, if it exists.
    fn partition_count(&self, topic: &str) -> Option<i32>;
    /// Every topic name (for regex subscriptions).
    fn topic_names(&self) -> Vec<String>;
}

/// The metadata image as the coordinator's view of topics.
impl TopicView for tern_controller::MetadataImage {
    fn partition_count(&self, topic: &str) -> Option<i32> {
        self.topic(topic).map(|t| t.partitions.len() as i32)
    }
    fn topic_names(&self) -> Vec<String> {
        self.topic_ids.keys().cloned().collect()
    }
}

impl TopicView for BTreeMap<String, i32> {
    fn partition_count(&self, topic: &str) -> Option<i32> {
        self.get(topic).copied()
    }
    fn topic_names(&self) -> Vec<String> {
        self.keys().cloned().collect()
    }
}

/// Where a member is in reconciling towards its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// It has its target at the target epoch.
    Stable,
    /// It must first give up partitions (it keeps its epoch until it does).
    UnrevokedPartitions,
    /// It is at the target epoch, waiting for partitions other members still own.
    UnreleasedPartitions,
}

/// Which partitions of a commit may be written (see [`ConsumerGroup::check_commit`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommitCheck {
    /// Every partition.
    All,
    /// The partitions assigned to the member at or before `epoch` (by their assignment
    /// epochs); the others answer `refusal` (STALE_MEMBER_EPOCH, or ILLEGAL_GENERATION to a
    /// member of the classic protocol).
    AssignedBy {
        /// The commit's member epoch.
        epoch: i32,
        /// The member's partitions and the epochs they were assigned at.
        assignment_epochs: BTreeMap<(String, i32), i32>,
        /// The error of a partition it may not write.
        refusal: ResponseError,
    },
}

impl CommitCheck {
    /// The error of committing `partition` of `topic`, if it may not be written.
    pub fn partition_error(&self, topic: &str, partition: i32) -> Option<ResponseError> {
        match self {
            CommitCheck::All => None,
            CommitCheck::AssignedBy {
                epoch,
                assignment_epochs,
                refusal,
            } => match assignment_epochs.get(&(topic.to_string(), partition)) {
                Some(since) if since <= epoch => None,
                _ => Some(*refusal),
            },
        }
    }
}

/// One member of a consumer group.
#[derive(Debug, Clone)]
pub struct ConsumerMember {
    /// Member id.
    pub member_id: String,
    /// Static membership id.
    pub instance_id: Option<String>,
    /// Rack.
    pub rack_id: Option<String>,
    /// Client id.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
    /// Rebalance timeout: how long it may take to revoke partitions.
    pub rebalance_timeout_ms: i32,
    /// Subscribed topic names, sorted.
    pub subscribed_topic_names: Vec<String>,
    /// Subscribed topic regex.
    pub subscribed_topic_regex: Option<String>,
    /// That regex, compiled once when it changes (heartbeats and assignments match with it).
    compiled_regex: Option<regex::Regex>,
    /// The server assignor it asks for.
    pub server_assignor: Option<String>,
    /// Its epoch (-2 while a static member is away).
    pub member_epoch: i32,
    /// Its epoch before the last change (a heartbeat whose answer was lost may come with it).
    pub previous_member_epoch: i32,
    /// Reconciliation state.
    pub state: MemberState,
    /// Partitions it owns now.
    pub assigned: Assignment,
    /// Partitions it must give up.
    pub pending_revocation: Assignment,
    /// The member epoch at which each partition it owns or must give up was assigned to it: a
    /// commit of an older epoch may still write the partitions it had then.
    assignment_epochs: BTreeMap<(String, i32), i32>,
    last_heartbeat_ms: i64,
    /// The session timeout in force at its last heartbeat (the group's config, else the
    /// broker's), as Kafka schedules each member's session timer.
    session_timeout_ms: i64,
    revocation_deadline_ms: Option<i64>,
    /// What a member of the classic protocol (JoinGroup, SyncGroup, Heartbeat) told the group;
    /// None for a member of the consumer protocol.
    pub classic: Option<ClassicMembership>,
}

impl ConsumerMember {
    fn new(member_id: String, now_ms: i64) -> Self {
        ConsumerMember {
            member_id,
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            rebalance_timeout_ms: 300_000,
            subscribed_topic_names: Vec::new(),
            subscribed_topic_regex: None,
            compiled_regex: None,
            server_assignor: None,
            member_epoch: 0,
            previous_member_epoch: 0,
            state: MemberState::Stable,
            assigned: Assignment::new(),
            pending_revocation: Assignment::new(),
            assignment_epochs: BTreeMap::new(),
            last_heartbeat_ms: now_ms,
            session_timeout_ms: 45_000,
            revocation_deadline_ms: None,
            classic: None,
        }
    }

    /// Keeps the assignment epoch of each partition still owned or pending revocation; the
    /// partitions new to it were assigned at `epoch`.
    fn track_assignment_epochs(&mut self, epoch: i32) {
        let mut epochs = BTreeMap::new();
        for (topic, partitions) in self.assigned.iter().chain(self.pending_revocation.iter()) {
            for p in partitions {
                let key = (topic.clone(), *p);
                let since = self.assignment_epochs.get(&key).copied().unwrap_or(epoch);
                epochs.insert(key, since);
            }
        }
        self.assignment_epochs = epochs;
    }

    /// The error of an epoch that is not the member's: a classic member's epoch is its
    /// generation.
    fn stale_epoch_error(&self) -> ResponseError {
        if self.classic.is_some() {
            ResponseError::IllegalGeneration
        } else {
            ResponseError::StaleMemberEpoch
        }
    }

    fn set_epoch(&mut self, epoch: i32) {
        if epoch != self.member_epoch {
            self.previous_member_epoch = self.member_epoch;
            self.member_epoch = epoch;
        }
    }

    fn subscription(&self) -> (&[String], Option<&str>, Option<&str>) {
        (
            &self.subscribed_topic_names,
            self.subscribed_topic_regex.as_deref(),
            self.server_assignor.as_deref(),
        )
    }
}

/// A consumer group's state as Kafka names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerGroupState {
    /// No members.
    Empty,
    /// The group epoch is ahead of the target assignment.
    Assigning,
    /// Some member has not reached its target.
    Reconciling,
    /// Every member has its target.
    Stable,
}

impl ConsumerGroupState {
    /// Kafka's name.
    pub fn name(self) -> &'static str {
        match self {
            ConsumerGroupState::Empty => "Empty",
            ConsumerGroupState::Assigning => "Assigning",
            ConsumerGroupState::Reconciling => "Reconciling",
            ConsumerGroupState::Stable => "Stable",
        }
    }
}

/// A ConsumerGroupHeartbeat as the group needs it (None: the field was not sent).
#[derive(Debug, Clone, Default)]
pub struct Heartbeat {
    /// Member id (v0: empty on the first join).
    pub member_id: String,
    /// Member epoch: 0 joins, -1 leaves, -2 leaves for a while (static).
    pub member_epoch: i32,
    /// Static membership id.
    pub instance_id: Option<String>,
    /// Rack.
    pub rack_id: Option<String>,
    /// Rebalance timeout (-1: unchanged).
    pub rebalance_timeout_ms: i32,
    /// Subscribed topic names.
    pub subscribed_topic_names: Option<Vec<String>>,
    /// Subscribed topic regex.
    pub subscribed_topic_regex: Option<String>,
    /// Server assignor.
    pub server_assignor: Option<String>,
    /// Partitions the member owns now.
    pub owned: Option<Assignment>,
    /// Client id.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
}

/// What a heartbeat answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatAnswer {
    /// The member's id.
    pub member_id: String,
    /// The member's epoch.
    pub member_epoch: i32,
    /// Its assignment, when it changed or the request was a full one.
    pub assignment: Option<Assignment>,
}

/// A refused heartbeat: Kafka's error and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The error.
    pub error: ResponseError,
    /// The message.
    pub message: String,
}

fn refuse<T>(error: ResponseError, message: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal {
        error,
        message: message.into(),
    })
}

/// The membership of one consumer group.
#[derive(Debug, Clone, Default)]
pub struct ConsumerGroup {
    /// Group epoch: grows with every change of membership, subscriptions or their topics.
    pub group_epoch: i32,
    /// The epoch of the target assignment.
    pub assignment_epoch: i32,
    /// Members by id.
    pub members: BTreeMap<String, ConsumerMember>,
    /// Target assignment by member id.
    pub target: BTreeMap<String, Assignment>,
    /// The assignor of the last target assignment.
    pub assignor: String,
    /// Partition counts of the subscribed topics at the last epoch.
    subscribed_topics: BTreeMap<String, i32>,
    /// Set when only classic members remain after members were fenced or a classic static
    /// member replaced a consumer-protocol one: Kafka then turns the group classic.
    downgrade_due: Option<Downgrade>,
}

/// A downgrade to a classic group that is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Downgrade {
    /// The classic group's generation: the group epoch before the fenced members went.
    pub generation: i32,
    /// Whether the classic group rebalances at once (else it starts Stable, members holding
    /// their targets).
    pub rebalance: bool,
}

impl ConsumerGroup {
    /// The group's state.
    pub fn state(&self) -> ConsumerGroupState {
        if self.members.is_empty() {
            ConsumerGroupState::Empty
        } else if self.group_epoch > self.assignment_epoch {
            ConsumerGroupState::Assigning
        } else if self
            .members
            .values()
            .any(|m| m.state != MemberState::Stable || m.member_epoch != self.assignment_epoch)
        {
            ConsumerGroupState::Reconciling
        } else {
            ConsumerGroupState::Stable
        }
    }

    /// Every topic some member subscribes to, by name (existing or not) or by regex.
    pub fn subscribed_topic_names(&self) -> BTreeSet<String> {
        self.members
            .values()
            .flat_map(|m| m.subscribed_topic_names.iter().cloned())
            .chain(self.subscribed_topics.keys().cloned())
            .collect()
    }

    /// Handles a heartbeat (its fields already validated by `validate`).
    pub fn heartbeat(
        &mut self,
        hb: Heartbeat,
        topics: &dyn TopicView,
        config: &ConsumerGroupConfig,
        now_ms: i64,
    ) -> Result<HeartbeatAnswer, Refusal> {
        if hb.member_epoch == LEAVE_EPOCH || hb.member_epoch == LEAVE_STATIC_EPOCH {
            return self.leave(&hb, now_ms);
        }
        let joining = hb.member_epoch == 0;
        if self.members.len() >= config.max_size && !self.members.contains_key(&hb.member_id) {
            return refuse(
                ResponseError::GroupMaxSizeReached,
                format!(
                    "The consumer group has reached its maximum capacity of {} members.",
                    config.max_size
                ),
            );
        }
        let member_id = if hb.member_id.is_empty() {
            uuid::Uuid::new_v4().to_string()
        } else {
            hb.member_id.clone()
        };
        let existing = self.find_member(&member_id, &hb, joining)?;
        let is_new = existing.is_none();
        let mut member = existing.unwrap_or_else(|| ConsumerMember::new(member_id.clone(), now_ms));
        let before_assigned = member.assigned.clone();
        let before = (
            member.subscribed_topic_names.clone(),
            member.subscribed_topic_regex.clone(),
            member.server_assignor.clone(),
        );
        if hb.instance_id.is_some() {
            member.instance_id = hb.instance_id.clone();
        }
        if hb.rack_id.is_some() {
            member.rack_id = hb.rack_id.clone();
        }
        if hb.rebalance_timeout_ms != -1 {
            member.rebalance_timeout_ms = hb.rebalance_timeout_ms;
        }
        if hb.server_assignor.is_some() {
            member.server_assignor = hb.server_assignor.clone();
        }
        if let Some(names) = &hb.subscribed_topic_names {
            let mut names = names.clone();
            names.sort();
            names.dedup();
            member.subscribed_topic_names = names;
        }
        if let Some(regex) = &hb.subscribed_topic_regex {
            if member.subscribed_topic_regex.as_ref() != Some(regex) {
                member.subscribed_topic_regex = (!regex.is_empty()).then(|| regex.clone());
                // `validate` refused a regex that does not compile.
                member.compiled_regex = member
                    .subscribed_topic_regex
                    .as_deref()
                    .and_then(|r| anchored(r).ok());
            }
        }
        member.client_id = hb.client_id.clone();
        member.client_host = hb.client_host.clone();
        member.last_heartbeat_ms = now_ms;
        member.session_timeout_ms = i64::from(config.session_timeout_ms);
        // A member heartbeating with this protocol uses it, whatever it joined with.
        member.classic = None;
        let changed = {
            let (names, regex, assignor) = member.subscription();
            is_new
                || names != before.0.as_slice()
                || regex != before.1.as_deref()
                || assignor != before.2.as_deref()
        };
        self.members.insert(member_id.clone(), member);
        self.refresh_target(changed, topics, config);
        self.reconcile(&member_id, hb.owned.as_ref(), now_ms);

        let member = &self.members[&member_id];
        let full = joining
            || (hb.rebalance_timeout_ms != -1
                && hb.subscribed_topic_names.is_some()
                && hb.owned.is_some());
        Ok(HeartbeatAnswer {
            member_id,
            member_epoch: member.member_epoch,
            assignment: (full || member.assigned != before_assigned)
                .then(|| member.assigned.clone()),
        })
    }

    /// Bumps the group epoch when a member's subscription `changed` or the subscribed topics
    /// did, and computes a new target assignment when the epoch is ahead of it.
    fn refresh_target(
        &mut self,
        changed: bool,
        topics: &dyn TopicView,
        config: &ConsumerGroupConfig,
    ) {
        self.bump_epoch(changed, topics);
        if self.group_epoch > self.assignment_epoch {
            self.compute_target(config);
        }
    }

    /// Bumps the group epoch when a member's subscription `changed` or the subscribed topics
    /// did.
    fn bump_epoch(&mut self, changed: bool, topics: &dyn TopicView) {
        let subscribed = self.subscribed_partitions(topics);
        let mut bump = changed;
        if subscribed != self.subscribed_topics {
            self.subscribed_topics = subscribed;
            bump = true;
        }
        if bump {
            self.group_epoch += 1;
            tracing::debug!(epoch = self.group_epoch, "consumer group epoch bumped");
        }
    }

    /// The member a heartbeat speaks for (None: a new one joins), with Kafka's checks of
    /// instance ids and epochs. A static member rejoining takes over its predecessor's
    /// partitions and target.
    fn find_member(
        &mut self,
        member_id: &str,
        hb: &Heartbeat,
        joining: bool,
    ) -> Result<Option<ConsumerMember>, Refusal> {
        let Some(instance) = hb.instance_id.as_deref() else {
            return match self.members.get(member_id) {
                Some(m) => {
                    check_epoch(m, hb.member_epoch, hb.owned.as_ref())?;
                    Ok(Some(m.clone()))
                }
                None if joining => Ok(None),
                None => refuse(
                    ResponseError::UnknownMemberId,
                    format!("Member {member_id} is not a member of the group."),
                ),
            };
        };
        if !joining {
            let old = self.static_member(instance, member_id)?;
            check_epoch(old, hb.member_epoch, hb.owned.as_ref())?;
            return Ok(Some(old.clone()));
        }
        let Some(old) = self
            .members
            .values()
            .find(|m| m.instance_id.as_deref() == Some(instance))
            .cloned()
        else {
            return Ok(None);
        };
        // A classic holder is replaced (a rolling upgrade restarts it with this protocol).
        if old.member_epoch != LEAVE_STATIC_EPOCH
            && old.member_id != member_id
            && old.classic.is_none()
        {
            return refuse(
                ResponseError::UnreleasedInstanceId,
                format!(
                    "Static member {member_id} with instance id {instance} cannot join the \
                     group because the instance id is owned by {} member.",
                    old.member_id
                ),
            );
        }
        self.members.remove(&old.member_id);
        if let Some(t) = self.target.remove(&old.member_id) {
            self.target.insert(member_id.to_string(), t);
        }
        let mut m = old;
        m.member_id = member_id.to_string();
        m.member_epoch = 0;
        m.previous_member_epoch = 0;
        Ok(Some(m))
    }

    /// The static member of `instance`, which must be `member_id` (Kafka: UNKNOWN_MEMBER_ID for
    /// an instance id nobody has, FENCED_INSTANCE_ID when another member holds it).
    fn static_member(&self, instance: &str, member_id: &str) -> Result<&ConsumerMember, Refusal> {
        let Some(m) = self
            .members
            .values()
            .find(|m| m.instance_id.as_deref() == Some(instance))
        else {
            return refuse(
                ResponseError::UnknownMemberId,
                format!("Instance id {instance} is unknown."),
            );
        };
        if m.member_id != member_id {
            return refuse(
                ResponseError::FencedInstanceId,
                format!(
                    "Static member {member_id} with instance id {instance} was fenced by member {}.",
                    m.member_id
                ),
            );
        }
        Ok(m)
    }

    /// A member leaves: a static one leaving for a while (-2) keeps its partitions until its
    /// session expires; any other is removed and the group rebalances.
    fn leave(&mut self, hb: &Heartbeat, now_ms: i64) -> Result<HeartbeatAnswer, Refusal> {
        let id = match hb.instance_id.as_deref() {
            Some(instance) => self
                .static_member(instance, &hb.member_id)?
                .member_id
                .clone(),
            None if self.members.contains_key(&hb.member_id) => hb.member_id.clone(),
            None => {
                return refuse(
                    ResponseError::UnknownMemberId,
                    format!("Member {} is not a member of the group.", hb.member_id),
                )
            }
        };
        if hb.member_epoch == LEAVE_STATIC_EPOCH {
            if let Some(m) = self.members.get_mut(&id) {
                m.member_epoch = LEAVE_STATIC_EPOCH;
                m.last_heartbeat_ms = now_ms;
            }
        } else {
            self.fence(std::slice::from_ref(&id));
        }
        Ok(HeartbeatAnswer {
            member_id: id,
            member_epoch: hb.member_epoch,
            assignment: None,
        })
    }

    /// Removes a member; the group rebalances without it.
    fn remove_member(&mut self, member_id: &str) {
        if self.members.remove(member_id).is_some() {
            self.target.remove(member_id);
            self.group_epoch += 1;
        }
    }

    /// Removes members (they left, were fenced or expired); the group rebalances without
    /// them. When they were all of the consumer protocol and only classic members remain,
    /// notes that Kafka would now turn the group classic (see [`Self::take_downgrade_due`]).
    pub fn fence(&mut self, ids: &[String]) {
        let leaving = ids
            .iter()
            .filter(|id| self.members.contains_key(*id))
            .count();
        let mut remaining = self
            .members
            .values()
            .filter(|m| !ids.contains(&m.member_id))
            .peekable();
        let only_classic_remain =
            remaining.peek().is_some() && remaining.all(|m| m.classic.is_some());
        if leaving > 0 && only_classic_remain {
            self.downgrade_due = Some(Downgrade {
                generation: self.group_epoch,
                rebalance: true,
            });
        }
        for id in ids {
            self.remove_member(id);
        }
    }

    /// The downgrade to a classic group that is due, once (see [`Self::fence`]).
    pub fn take_downgrade_due(&mut self) -> Option<Downgrade> {
        self.downgrade_due.take()
    }

    /// Removes members whose session expired, that did not revoke in time, or (classic
    /// members) that did not rejoin or sync within their rebalance timeout; returns them.
    pub fn expire(&mut self, now_ms: i64) -> Vec<String> {
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| {
                m.last_heartbeat_ms + m.session_timeout_ms <= now_ms
                    || (m.state == MemberState::UnrevokedPartitions
                        && m.revocation_deadline_ms.is_some_and(|d| d <= now_ms))
                    || m.classic.as_ref().is_some_and(|c| c.overdue(now_ms))
            })
            .map(|m| m.member_id.clone())
            .collect();
        self.fence(&expired);
        expired
    }

    /// Partition counts of every existing topic some member subscribes to, by name or regex.
    fn subscribed_partitions(&self, topics: &dyn TopicView) -> BTreeMap<String, i32> {
        let mut out = BTreeMap::new();
        let mut regexes: Vec<&regex::Regex> = Vec::new();
        for m in self.members.values() {
            for t in &m.subscribed_topic_names {
                if let Some(n) = topics.partition_count(t) {
                    out.insert(t.clone(), n);
                }
            }
            if let Some(r) = &m.compiled_regex {
                if !regexes.iter().any(|seen| seen.as_str() == r.as_str()) {
                    regexes.push(r);
                }
            }
        }
        if !regexes.is_empty() {
            for t in topics.topic_names() {
                if regexes.iter().any(|r| r.is_match(&t)) {
                    if let Some(n) = topics.partition_count(&t) {
                        out.insert(t, n);
                    }
                }
            }
        }
        out
    }

    /// The topics (of those subscribed) a member subscribes to.
    fn member_topics<'a>(&'a self, m: &'a ConsumerMember) -> BTreeSet<&'a str> {
        self.subscribed_topics
            .keys()
            .filter(|t| {
                m.subscribed_topic_names.binary_search(t).is_ok()
                    || m.compiled_regex.as_ref().is_some_and(|r| r.is_match(t))
            })
            .map(String::as_str)
            .collect()
    }

    /// A new target assignment at the group epoch, with the assignor most members ask for
    /// (the first configured one when none asks).
    fn compute_target(&mut self, config: &ConsumerGroupConfig) {
        let mut asked: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(a) = m.server_assignor.as_deref().and_then(assignor::short_name) {
                *asked.entry(a).or_default() += 1;
            }
        }
        let name = asked
            .iter()
            .max_by_key(|(name, n)| (**n, std::cmp::Reverse(**name)))
            .map(|(name, _)| name.to_string())
            .or_else(|| config.assignors.first().cloned())
            .unwrap_or_else(|| "uniform".into());
        let specs: Vec<MemberSpec<'_>> = self
            .members
            .values()
            .map(|m| MemberSpec {
                id: &m.member_id,
                instance_id: m.instance_id.as_deref(),
                topics: self.member_topics(m),
                previous: self.target.get(&m.member_id),
            })
            .collect();
        let target = assignor::assign(&name, &specs, &self.subscribed_topics);
        self.target = target;
        self.assignor = name;
        self.assignment_epoch = self.group_epoch;
    }

    /// Moves a member towards its target (Kafka's CurrentAssignmentBuilder).
    fn reconcile(&mut self, member_id: &str, owned: Option<&Assignment>, now_ms: i64) {
        let Some(m) = self.members.get(member_id) else {
            return;
        };
        let target_epoch = self.assignment_epoch;
        let proceed = match m.state {
            MemberState::Stable => m.member_epoch != target_epoch,
            MemberState::UnrevokedPartitions => !owns_any(owned, &m.pending_revocation),
            MemberState::UnreleasedPartitions => true,
        };
        if !proceed {
            return;
        }
        let target = self.target.get(member_id).cloned().unwrap_or_default();
        let owned_by_others = self.owned_by_others(member_id);
        let Some(m) = self.members.get_mut(member_id) else {
            return;
        };
        let mut keep = Assignment::new();
        let mut revoke = Assignment::new();
        let mut add = Assignment::new();
        let mut unreleased = false;
        let topics: BTreeSet<&String> = target.keys().chain(m.assigned.keys()).collect();
        for t in topics {
            let current = m.assigned.get(t).cloned().unwrap_or_default();
            let wanted = target.get(t).cloned().unwrap_or_default();
            let kept: BTreeSet<i32> = current.intersection(&wanted).copied().collect();
            let gone: BTreeSet<i32> = current.difference(&kept).copied().collect();
            let mut new: BTreeSet<i32> = wanted.difference(&kept).copied().collect();
            let before = new.len();
            new.retain(|p| !owned_by_others.contains(&(t.clone(), *p)));
            unreleased |= new.len() != before;
            if !kept.is_empty() {
                keep.insert(t.clone(), kept);
            }
            if !gone.is_empty() {
                revoke.insert(t.clone(), gone);
            }
            if !new.is_empty() {
                add.insert(t.clone(), new);
            }
        }
        if !revoke.is_empty() && owns_any(owned, &revoke) {
            m.state = MemberState::UnrevokedPartitions;
            m.assigned = keep;
            m.pending_revocation = revoke;
            m.track_assignment_epochs(target_epoch);
            m.revocation_deadline_ms = Some(now_ms + i64::from(m.rebalance_timeout_ms.max(0)));
            return;
        }
        for (t, ps) in add {
            keep.entry(t).or_default().extend(ps);
        }
        m.assigned = keep;
        m.pending_revocation.clear();
        m.track_assignment_epochs(target_epoch);
        m.revocation_deadline_ms = None;
        m.state = if unreleased {
            MemberState::UnreleasedPartitions
        } else {
            MemberState::Stable
        };
        m.set_epoch(target_epoch);
    }

    /// Partitions other members own or have yet to revoke.
    fn owned_by_others(&self, member_id: &str) -> BTreeSet<(String, i32)> {
        self.members
            .values()
            .filter(|m| m.member_id != member_id)
            .flat_map(|m| m.assigned.iter().chain(m.pending_revocation.iter()))
            .flat_map(|(t, ps)| ps.iter().map(move |p| (t.clone(), *p)))
            .collect()
    }

    /// Which partitions an OffsetCommit (or TxnOffsetCommit, `transactional`, with no group
    /// instance id) of `member_id` at `epoch` may write, as Kafka 4.3+ decides: anything
    /// without a member epoch while the group is empty (and a TxnOffsetCommit naming no member
    /// at all); otherwise the member
    /// must exist (UNKNOWN_MEMBER_ID) with at least that epoch (STALE_MEMBER_EPOCH), and an
    /// older epoch writes only the partitions it held then, still owned or being revoked (a
    /// consumer committing before it has seen its new epoch is not refused).
    pub fn check_commit(
        &self,
        member_id: &str,
        epoch: i32,
        transactional: bool,
    ) -> Result<CommitCheck, ResponseError> {
        if epoch < 0 && self.members.is_empty() {
            return Ok(CommitCheck::All);
        }
        if transactional && epoch == -1 && member_id.is_empty() {
            return Ok(CommitCheck::All);
        }
        let m = self
            .members
            .get(member_id)
            .ok_or(ResponseError::UnknownMemberId)?;
        match epoch.cmp(&m.member_epoch) {
            std::cmp::Ordering::Equal => Ok(CommitCheck::All),
            std::cmp::Ordering::Greater => Err(m.stale_epoch_error()),
            std::cmp::Ordering::Less => Ok(CommitCheck::AssignedBy {
                epoch,
                assignment_epochs: m.assignment_epochs.clone(),
                refusal: m.stale_epoch_error(),
            }),
        }
    }

    /// Whether an OffsetFetch naming `member_id` (None: an admin or a client without a group
    /// membership) at `epoch` may read the group's offsets.
    pub fn check_fetch(&self, member_id: Option<&str>, epoch: i32) -> Result<(), ResponseError> {
        match member_id {
            None if epoch < 0 => Ok(()),
            m => self.check_member_epoch(m.unwrap_or(""), epoch),
        }
    }

    fn check_member_epoch(&self, member_id: &str, epoch: i32) -> Result<(), ResponseError> {
        let m = self
            .members
            .get(member_id)
            .ok_or(ResponseError::UnknownMemberId)?;
        if m.member_epoch != epoch {
            return Err(m.stale_epoch_error());
        }
        Ok(())
    }
}

/// Kafka matches subscription regexes against the whole topic name.
fn anchored(r: &str) -> Result<regex::Regex, regex::Error> {
    regex::Regex::new(&format!("^(?:{r})$"))
}

/// Kafka's checks of a heartbeat's fields before anything changes.
pub(crate) fn validate(
    hb: &Heartbeat,
    version: i16,
    config: &ConsumerGroupConfig,
) -> Result<(), Refusal> {
    let invalid = |m: &str| refuse(ResponseError::InvalidRequest, m);
    if hb.instance_id.as_deref() == Some("") {
        return invalid("InstanceId can't be empty.");
    }
    if hb.rack_id.as_deref() == Some("") {
        return invalid("RackId can't be empty.");
    }
    if version >= 1 && hb.member_id.is_empty() {
        return invalid("MemberId can't be empty.");
    }
    match hb.member_epoch {
        e if e > 0 || e == LEAVE_EPOCH => {
            if hb.member_id.is_empty() {
                return invalid("MemberId can't be empty.");
            }
        }
        0 => {
            if hb.rebalance_timeout_ms == -1 {
                return invalid("RebalanceTimeoutMs must be provided in first request.");
            }
            if hb.owned.as_ref().is_none_or(|o| !o.is_empty()) {
                return invalid("TopicPartitions must be empty when (re-)joining.");
            }
            let names = hb
                .subscribed_topic_names
                .as_ref()
                .is_some_and(|n| !n.is_empty());
            let regex = hb
                .subscribed_topic_regex
                .as_ref()
                .is_some_and(|r| !r.is_empty());
            if !names && !regex {
                return invalid(
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
                );
            }
        }
        LEAVE_STATIC_EPOCH => {
            if hb.member_id.is_empty() {
                return invalid("MemberId can't be empty.");
            }
            if hb.instance_id.is_none() {
                return invalid("InstanceId can't be null.");
            }
        }
        _ => return invalid("MemberEpoch is invalid."),
    }
    if let Some(r) = hb
        .subscribed_topic_regex
        .as_deref()
        .filter(|r| !r.is_empty())
    {
        if anchored(r).is_err() {
            return refuse(
                ResponseError::InvalidRegularExpression,
                format!("SubscribedTopicRegex `{r}` is not a valid regular expression."),
            );
        }
    }
    if let Some(a) = &hb.server_assignor {
        let known =
            assignor::short_name(a).is_some_and(|s| config.assignors.iter().any(|c| c == s));
        if !known {
            return refuse(
                ResponseError::UnsupportedAssignor,
                format!(
                    "ServerAssignor {a} is not supported. Supported assignors: {}.",
                    config.assignors.join(", ")
                ),
            );
        }
    }
    Ok(())
}

/// Kafka's epoch check: a newer epoch than the member's is fenced; an older one is taken
/// only if it is the previous epoch and the member owns no more than its assignment (the
/// answer that bumped the epoch was lost).
fn check_epoch(
    m: &ConsumerMember,
    received: i32,
    owned: Option<&Assignment>,
) -> Result<(), Refusal> {
    let fenced = received > m.member_epoch
        || (received < m.member_epoch
            && (received != m.previous_member_epoch
                || !owned.is_some_and(|o| is_subset(o, &m.assigned))));
    if fenced {
        return refuse(
            ResponseError::FencedMemberEpoch,
            format!(
                "The consumer group member has a {} member epoch ({received}) than the one known \
                 by the group coordinator ({}). The member must abandon all its partitions and \
                 rejoin.",
                if received > m.member_epoch {
                    "greater"
                } else {
                    "smaller"
                },
                m.member_epoch
            ),
        );
    }
    Ok(())
}

fn is_subset(owned: &Assignment, of: &Assignment) -> bool {
    owned
        .iter()
        .all(|(t, ps)| ps.is_empty() || of.get(t).is_some_and(|a| ps.is_subset(a)))
}

/// Whether the member still owns any of `partitions` (not knowing means it does).
fn owns_any(owned: Option<&Assignment>, partitions: &Assignment) -> bool {
    let Some(owned) = owned else {
        return true;
    };
    owned
        .iter()
        .any(|(t, ps)| partitions.get(t).is_some_and(|r| !r.is_disjoint(ps)))
}

#[cfg(test)]
#[path = "consumer_group_tests.rs"]
mod tests;
