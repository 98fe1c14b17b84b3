//! Members of the classic protocol in a consumer group (Kafka's online migration): their
//! JoinGroup, SyncGroup, Heartbeat and LeaveGroup as the consumer group answers them, and the
//! membership a group carries over when it changes protocol. A classic member's generation is
//! its member epoch; it reconciles only when it joins, so a heartbeat asks it to rejoin
//! (REBALANCE_IN_PROGRESS) whenever it has something to revoke or to receive.

use bytes::Bytes;
use kafka_protocol::ResponseError;

use super::super::consumer_protocol::{self, decode_assignment, decode_subscription};
use super::super::group::{JoinRequest, JoinResult, Member};
use super::{
    Assignment, ConsumerGroup, ConsumerGroupConfig, ConsumerMember, MemberState, TopicView,
};

/// The embedded protocol type of consumers.
const CONSUMER_PROTOCOL: &str = "consumer";

/// What a classic member told the group at its last JoinGroup, and its deadlines.
#[derive(Debug, Clone)]
pub struct ClassicMembership {
    /// Session timeout of its JoinGroup.
    pub session_timeout_ms: i32,
    /// Its protocols (name, metadata) in preference order; the first is the one it is told.
    pub protocols: Vec<(String, Bytes)>,
    /// It was told to rejoin: it is fenced unless it joins by then.
    join_deadline_ms: Option<i64>,
    /// It joined: it is fenced unless it syncs by then.
    sync_deadline_ms: Option<i64>,
}

impl ClassicMembership {
    pub(super) fn new(session_timeout_ms: i32, protocols: Vec<(String, Bytes)>) -> Self {
        ClassicMembership {
            session_timeout_ms,
            protocols,
            join_deadline_ms: None,
            sync_deadline_ms: None,
        }
    }

    /// Whether it missed its rejoin or its sync.
    pub(super) fn overdue(&self, now_ms: i64) -> bool {
        self.join_deadline_ms
            .into_iter()
            .chain(self.sync_deadline_ms)
            .any(|d| d <= now_ms)
    }

    /// The protocol named in its JoinGroup and SyncGroup answers.
    pub fn protocol_name(&self) -> &str {
        self.protocols.first().map_or("", |(n, _)| n)
    }

    /// The embedded protocol version it speaks, in which its assignment is written.
    fn version(&self) -> i16 {
        self.protocols
            .first()
            .and_then(|(_, m)| consumer_protocol::version(m))
            .unwrap_or(0)
    }
}

/// A member as a classic group takes it over when a consumer group turns classic.
#[derive(Debug, Clone)]
pub struct DowngradedMember {
    /// Member id.
    pub member_id: String,
    /// Static membership id.
    pub instance_id: Option<String>,
    /// Client id.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
    /// Rebalance timeout.
    pub rebalance_timeout_ms: i32,
    /// Classic session timeout.
    pub session_timeout_ms: i32,
    /// Protocols of its last JoinGroup.
    pub protocols: Vec<(String, Bytes)>,
    /// Its target assignment.
    pub target: Assignment,
}

/// Why a classic group cannot become a consumer group (Kafka's messages).
fn unconvertible(group_id: &str, why: &str) -> String {
    format!("Cannot upgrade classic group {group_id} to consumer group because {why}.")
}

impl ConsumerGroup {
    /// The consumer group a classic group of the consumer protocol becomes, as Kafka's
    /// `fromClassicGroup`: each member keeps its last assignment as its target at the
    /// classic generation, in state Stable, and is asked to rejoin when that changes.
    pub fn from_classic<'a>(
        group_id: &str,
        generation: i32,
        protocol: &str,
        members: impl Iterator<Item = &'a Member>,
        topics: &dyn TopicView,
        now_ms: i64,
    ) -> Result<ConsumerGroup, String> {
        let mut group = ConsumerGroup {
            group_epoch: generation,
            assignment_epoch: generation,
            ..Default::default()
        };
        let malformed = || unconvertible(group_id, "the embedded consumer protocol is malformed");
        for cm in members {
            let assigned = if cm.assignment.is_empty() {
                Assignment::new()
            } else {
                match decode_assignment(&cm.assignment) {
                    Some((a, false)) => a,
                    Some((_, true)) => {
                        return Err(format!(
                            "Cannot upgrade classic group {group_id} to consumer group because an \
                             unsupported custom assignor is in use. Please refer to the \
                             documentation or switch to a default assignor before re-attempting \
                             the upgrade."
                        ))
                    }
                    None => return Err(malformed()),
                }
            };
            let sub = decode_subscription(&cm.metadata(protocol)).ok_or_else(malformed)?;
            let mut m = ConsumerMember::new(cm.member_id.clone(), now_ms);
            m.member_epoch = generation;
            m.previous_member_epoch = generation;
            m.instance_id = cm.group_instance_id.clone();
            m.rack_id = sub.rack_id;
            m.rebalance_timeout_ms = cm.rebalance_timeout_ms;
            m.client_id = cm.client_id.clone();
            m.client_host = cm.client_host.clone();
            m.subscribed_topic_names = sorted(sub.topics);
            m.assigned = assigned.clone();
            m.track_assignment_epochs(generation);
            m.session_timeout_ms = i64::from(cm.session_timeout_ms);
            m.classic = Some(ClassicMembership::new(
                cm.session_timeout_ms,
                cm.protocols.clone(),
            ));
            group.target.insert(cm.member_id.clone(), assigned);
            group.members.insert(cm.member_id.clone(), m);
        }
        group.subscribed_topics = group.subscribed_partitions(topics);
        Ok(group)
    }

    /// The members a classic group takes over, each with its target assignment.
    pub fn downgraded_members(&self) -> Vec<DowngradedMember> {
        self.members
            .values()
            .map(|m| {
                let classic = m.classic.as_ref();
                DowngradedMember {
                    member_id: m.member_id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: classic.map_or(45_000, |c| c.session_timeout_ms),
                    protocols: classic.map(|c| c.protocols.clone()).unwrap_or_default(),
                    target: self.target.get(&m.member_id).cloned().unwrap_or_default(),
                }
            })
            .collect()
    }

    /// Whether a classic member with these protocols may join: the consumer protocol type,
    /// and a protocol every classic member already in the group supports.
    fn supports_classic(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if protocol_type != CONSUMER_PROTOCOL {
            return false;
        }
        protocols.iter().any(|(name, _)| {
            self.members
                .values()
                .filter_map(|m| m.classic.as_ref())
                .all(|c| c.protocols.iter().any(|(n, _)| n == name))
        })
    }

    /// A JoinGroup of a classic member, as Kafka's `classicGroupJoinToConsumerGroup`: the
    /// member subscribes with its embedded subscription, the group epoch moves when that
    /// changed, and the member reconciles with the partitions it says it owns. The answer
    /// names no leader and no members: the member's assignment comes with its SyncGroup.
    pub fn classic_join(
        &mut self,
        req: &JoinRequest,
        topics: &dyn TopicView,
        config: &ConsumerGroupConfig,
        may_downgrade: bool,
        now_ms: i64,
    ) -> JoinResult {
        let fail = |e: ResponseError| JoinResult::error(e, &req.member_id);
        let unknown = req.member_id.is_empty();
        let member_id = if unknown {
            uuid::Uuid::new_v4().to_string()
        } else {
            req.member_id.clone()
        };
        if !self.members.contains_key(&member_id) && self.members.len() >= config.max_size {
            return fail(ResponseError::GroupMaxSizeReached);
        }
        if !self.supports_classic(&req.protocol_type, &req.protocols) {
            return fail(ResponseError::InconsistentGroupProtocol);
        }
        if req.require_known_member_id && unknown && req.group_instance_id.is_none() {
            return JoinResult {
                error: ResponseError::MemberIdRequired.code(),
                generation: -1,
                member_id,
                ..Default::default()
            };
        }
        let Some(sub) = req
            .protocols
            .first()
            .and_then(|(_, m)| decode_subscription(m))
        else {
            return fail(ResponseError::UnknownServerError);
        };
        let (existing, replaced) =
            match self.member_to_join(&member_id, req.group_instance_id.as_deref(), unknown) {
                Ok(found) => found,
                Err(e) => return fail(e),
            };
        // A static member of the consumer protocol replaced by a classic one.
        let replaced_modern = replaced && existing.as_ref().is_some_and(|m| m.classic.is_none());
        let is_new = existing.is_none();
        let mut m = existing.unwrap_or_else(|| ConsumerMember::new(member_id.clone(), now_ms));
        let names = sorted(sub.topics);
        let changed =
            is_new || m.subscribed_topic_names != names || m.subscribed_topic_regex.is_some();
        if req.group_instance_id.is_some() {
            m.instance_id = req.group_instance_id.clone();
        }
        if sub.rack_id.is_some() {
            m.rack_id = sub.rack_id;
        }
        if req.rebalance_timeout_ms != -1 {
            m.rebalance_timeout_ms = req.rebalance_timeout_ms;
        }
        // A classic member cannot subscribe by regex.
        m.subscribed_topic_names = names;
        m.subscribed_topic_regex = None;
        m.compiled_regex = None;
        m.client_id = req.client_id.clone();
        m.client_host = req.client_host.clone();
        m.last_heartbeat_ms = now_ms;
        m.session_timeout_ms = i64::from(req.session_timeout_ms);
        let mut classic = ClassicMembership::new(req.session_timeout_ms, req.protocols.clone());
        classic.sync_deadline_ms = Some(now_ms + i64::from(req.rebalance_timeout_ms.max(0)));
        let protocol = classic.protocol_name().to_string();
        m.classic = Some(classic);
        self.members.insert(member_id.clone(), m);
        if may_downgrade && replaced_modern && self.members.values().all(|m| m.classic.is_some()) {
            // Kafka turns the group classic now: at once if the target is current (the member
            // reconciles first), else with a rebalance.
            self.bump_epoch(changed, topics);
            let rebalance = self.assignment_epoch < self.group_epoch;
            if !rebalance {
                self.reconcile(&member_id, Some(&sub.owned), now_ms);
            }
            self.downgrade_due = Some(super::Downgrade {
                generation: self.group_epoch,
                rebalance,
            });
        } else {
            self.refresh_target(changed, topics, config);
            self.reconcile(&member_id, Some(&sub.owned), now_ms);
        }
        JoinResult {
            error: 0,
            generation: self.members[&member_id].member_epoch,
            protocol_type: Some(CONSUMER_PROTOCOL.into()),
            protocol: Some(protocol),
            leader: String::new(),
            member_id,
            members: Vec::new(),
        }
    }

    /// The member a classic JoinGroup speaks for (None: a new one), and whether it replaces
    /// another: a static member joining without its member id replaces the one holding its
    /// instance id, taking over its partitions and target; with a member id, that must be the
    /// holder's.
    fn member_to_join(
        &mut self,
        member_id: &str,
        instance: Option<&str>,
        unknown: bool,
    ) -> Result<(Option<ConsumerMember>, bool), ResponseError> {
        let Some(instance) = instance else {
            return Ok((self.members.get(member_id).cloned(), false));
        };
        let holder = self
            .members
            .values()
            .find(|m| m.instance_id.as_deref() == Some(instance))
            .cloned();
        if !unknown {
            let m = holder.ok_or(ResponseError::UnknownMemberId)?;
            if m.member_id != member_id {
                return Err(ResponseError::FencedInstanceId);
            }
            return Ok((Some(m), false));
        }
        let Some(mut m) = holder else {
            return Ok((None, false));
        };
        self.members.remove(&m.member_id);
        if let Some(t) = self.target.remove(&m.member_id) {
            self.target.insert(member_id.to_string(), t);
        }
        m.member_id = member_id.to_string();
        m.member_epoch = 0;
        m.previous_member_epoch = 0;
        Ok((Some(m), true))
    }

    /// The classic member a SyncGroup, Heartbeat or LeaveGroup names: by instance id when it
    /// has one (FENCED_INSTANCE_ID when another member id holds it), else by member id.
    fn named_member(
        &self,
        member_id: &str,
        instance: Option<&str>,
    ) -> Result<&ConsumerMember, ResponseError> {
        match instance {
            None => self
                .members
                .get(member_id)
                .ok_or(ResponseError::UnknownMemberId),
            Some(i) => {
                let m = self
                    .members
                    .values()
                    .find(|m| m.instance_id.as_deref() == Some(i))
                    .ok_or(ResponseError::UnknownMemberId)?;
                if m.member_id != member_id {
                    return Err(ResponseError::FencedInstanceId);
                }
                Ok(m)
            }
        }
    }

    /// A classic member at `generation`, which must be its epoch; returns its id.
    fn classic_member_at(
        &self,
        member_id: &str,
        instance: Option<&str>,
        generation: i32,
    ) -> Result<String, ResponseError> {
        let m = self.named_member(member_id, instance)?;
        if m.classic.is_none() {
            return Err(ResponseError::UnknownMemberId);
        }
        if m.member_epoch != generation {
            return Err(ResponseError::IllegalGeneration);
        }
        Ok(m.member_id.clone())
    }

    /// Asks a classic member to rejoin: it is fenced if it has not by its rebalance timeout.
    fn ask_to_rejoin(&mut self, id: &str, now_ms: i64) -> ResponseError {
        if let Some(m) = self.members.get_mut(id) {
            let timeout = i64::from(m.rebalance_timeout_ms.max(0));
            if let Some(c) = m.classic.as_mut() {
                c.join_deadline_ms.get_or_insert(now_ms + timeout);
            }
        }
        ResponseError::RebalanceInProgress
    }

    /// A SyncGroup of a classic member: its assignment, in its embedded protocol's version
    /// (REBALANCE_IN_PROGRESS when a newer target waits for it to rejoin).
    pub fn classic_sync(
        &mut self,
        member_id: &str,
        instance: Option<&str>,
        generation: i32,
        protocol_type: Option<&str>,
        protocol_name: Option<&str>,
        now_ms: i64,
    ) -> Result<Bytes, ResponseError> {
        let id = self.classic_member_at(member_id, instance, generation)?;
        let m = &self.members[&id];
        let classic = m.classic.as_ref().ok_or(ResponseError::UnknownMemberId)?;
        if protocol_type.is_some_and(|t| t != CONSUMER_PROTOCOL)
            || protocol_name.is_some_and(|n| n != classic.protocol_name())
        {
            return Err(ResponseError::InconsistentGroupProtocol);
        }
        if self.assignment_epoch > m.member_epoch && m.state != MemberState::UnrevokedPartitions {
            return Err(self.ask_to_rejoin(&id, now_ms));
        }
        let m = self
            .members
            .get_mut(&id)
            .ok_or(ResponseError::UnknownMemberId)?;
        m.last_heartbeat_ms = now_ms;
        let classic = m.classic.as_mut().ok_or(ResponseError::UnknownMemberId)?;
        classic.sync_deadline_ms = None;
        Ok(consumer_protocol::encode_assignment(
            &m.assigned,
            classic.version(),
        ))
    }

    /// A Heartbeat of a classic member: REBALANCE_IN_PROGRESS when it should rejoin, because
    /// the target moved past its epoch, it has partitions to revoke, or the partitions it waits
    /// for are free.
    pub fn classic_heartbeat(
        &mut self,
        member_id: &str,
        instance: Option<&str>,
        generation: i32,
        now_ms: i64,
    ) -> Result<(), ResponseError> {
        let id = self.classic_member_at(member_id, instance, generation)?;
        let waiting = self.waiting_on_unreleased(&id);
        let assignment_epoch = self.assignment_epoch;
        let m = self
            .members
            .get_mut(&id)
            .ok_or(ResponseError::UnknownMemberId)?;
        m.last_heartbeat_ms = now_ms;
        let rejoin = m.member_epoch < assignment_epoch
            || m.state == MemberState::UnrevokedPartitions
            || (m.state == MemberState::UnreleasedPartitions && !waiting);
        if rejoin {
            return Err(self.ask_to_rejoin(&id, now_ms));
        }
        Ok(())
    }

    /// Whether a member waits for target partitions another member still owns.
    fn waiting_on_unreleased(&self, id: &str) -> bool {
        let (Some(m), Some(target)) = (self.members.get(id), self.target.get(id)) else {
            return false;
        };
        if m.state != MemberState::UnreleasedPartitions {
            return false;
        }
        let others = self.owned_by_others(id);
        target.iter().any(|(t, ps)| {
            ps.iter().any(|p| {
                !m.assigned.get(t).is_some_and(|a| a.contains(p))
                    && others.contains(&(t.clone(), *p))
            })
        })
    }

    /// A LeaveGroup: one error code per (member id, instance id) named; the members found
    /// (of either protocol) are fenced together.
    pub fn classic_leave(&mut self, leaving: &[(String, Option<String>)]) -> Vec<i16> {
        let mut codes = Vec::with_capacity(leaving.len());
        let mut ids: Vec<String> = Vec::new();
        for (member_id, instance) in leaving {
            // An admin removes a static member by instance id alone.
            let found = match instance.as_deref() {
                Some(i) if member_id.is_empty() => self
                    .members
                    .values()
                    .find(|m| m.instance_id.as_deref() == Some(i))
                    .ok_or(ResponseError::UnknownMemberId),
                i => self.named_member(member_id, i),
            };
            match found {
                Ok(m) => {
                    if !ids.contains(&m.member_id) {
                        ids.push(m.member_id.clone());
                    }
                    codes.push(0);
                }
                Err(e) => codes.push(e.code()),
            }
        }
        self.fence(&ids);
        codes
    }
}

fn sorted(mut names: Vec<String>) -> Vec<String> {
    names.sort();
    names.dedup();
    names
}
