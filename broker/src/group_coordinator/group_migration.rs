//! A group changing protocol with members in it (Kafka's online migration, KIP-848): a classic
//! group becomes a consumer group when a member of the consumer protocol joins it (upgrade), and
//! a consumer group whose members of the consumer protocol have all left becomes classic again
//! (downgrade). In between, classic members' JoinGroup, SyncGroup, Heartbeat and LeaveGroup go
//! to the consumer group.

use bytes::Bytes;
use kafka_protocol::ResponseError;

use super::super::consumer_group::{ConsumerGroup, ConsumerGroupConfig, Refusal, TopicView};
use super::super::consumer_protocol::{encode_assignment, version};
use super::{Group, GroupConfig, GroupState, JoinRequest, JoinResult, Member, Reply, SyncResult};

/// What a group needs to take a classic member into either kind of group.
pub struct Membership<'a> {
    /// Classic groups' settings (the migration policy among them).
    pub classic: &'a GroupConfig,
    /// Consumer groups' settings, the group's own configs applied.
    pub consumer: &'a ConsumerGroupConfig,
    /// The topics there are.
    pub topics: &'a dyn TopicView,
}

impl Group {
    /// JoinGroup into a group of either protocol. A consumer group with members takes a
    /// classic member unless migration is disabled (INCONSISTENT_GROUP_PROTOCOL, as Kafka).
    pub fn join_any(
        &mut self,
        req: JoinRequest,
        settings: &Membership<'_>,
        now_ms: i64,
    ) -> Reply<JoinResult> {
        let classic = settings.classic;
        // Kafka checks the session timeout before it looks at the group.
        if req.session_timeout_ms < classic.min_session_timeout_ms
            || req.session_timeout_ms > classic.max_session_timeout_ms
        {
            return Reply::Now(JoinResult::error(
                ResponseError::InvalidSessionTimeout,
                &req.member_id,
            ));
        }
        match self.consumer.as_mut() {
            Some(c) if !c.members.is_empty() && self.state != GroupState::Dead => {
                if classic.migration == super::MigrationPolicy::Disabled {
                    return Reply::Now(JoinResult::error(
                        ResponseError::InconsistentGroupProtocol,
                        &req.member_id,
                    ));
                }
                let may_downgrade =
                    classic.migration.downgrades() && c.members.len() <= classic.max_size;
                let result = c.classic_join(
                    &req,
                    settings.topics,
                    settings.consumer,
                    may_downgrade,
                    now_ms,
                );
                self.maybe_downgrade(classic, now_ms);
                Reply::Now(result)
            }
            _ => self.join(req, classic, now_ms),
        }
    }

    /// SyncGroup into a group of either protocol; returns the reply and whether to store the
    /// group's metadata.
    pub fn sync_any(
        &mut self,
        member_id: &str,
        instance: Option<&str>,
        generation: i32,
        protocol: (Option<&str>, Option<&str>),
        assignments: Vec<(String, Bytes)>,
        now_ms: i64,
    ) -> (Reply<SyncResult>, bool) {
        let c = match self.consumer.as_mut() {
            Some(c) if self.state != GroupState::Dead => c,
            _ => return self.sync(member_id, instance, generation, assignments, now_ms),
        };
        let (protocol_type, protocol_name) = protocol;
        let result = match c.classic_sync(
            member_id,
            instance,
            generation,
            protocol_type,
            protocol_name,
            now_ms,
        ) {
            Ok(assignment) => SyncResult {
                error: 0,
                protocol_type: protocol_type.map(str::to_string),
                protocol: protocol_name.map(str::to_string),
                assignment,
            },
            Err(e) => SyncResult {
                error: e.code(),
                ..Default::default()
            },
        };
        (Reply::Now(result), false)
    }

    /// Heartbeat into a group of either protocol; returns the error code.
    pub fn heartbeat_any(
        &mut self,
        member_id: &str,
        instance: Option<&str>,
        generation: i32,
        now_ms: i64,
    ) -> i16 {
        match self.consumer.as_mut() {
            Some(c) if self.state != GroupState::Dead => c
                .classic_heartbeat(member_id, instance, generation, now_ms)
                .err()
                .map_or(0, |e| e.code()),
            _ => self.heartbeat(member_id, instance, generation, now_ms),
        }
    }

    /// LeaveGroup from a group of either protocol; returns one error code per member and
    /// whether to store the group's metadata (a consumer group left to classic members only
    /// turns classic).
    pub fn leave_any(
        &mut self,
        members: &[(String, Option<String>)],
        config: &GroupConfig,
        now_ms: i64,
    ) -> (Vec<i16>, bool) {
        if self.consumer.is_none() || self.state == GroupState::Dead {
            return self.leave(members, config, now_ms);
        }
        let codes = self
            .drive_consumer(now_ms, false, |c| c.classic_leave(members))
            .unwrap_or_default();
        let store = self.maybe_downgrade(config, now_ms);
        (codes, store)
    }

    /// Kafka's online upgrade, when a member of the consumer protocol joins a classic group
    /// with members: the consumer group it would become, or a refusal (GROUP_ID_NOT_FOUND,
    /// with Kafka's message) when the policy does not allow it, the group's members are not
    /// consumers, there are more than a consumer group may have, or their metadata cannot be
    /// carried over. Nothing changes until [`Self::install_consumer_group`]: a joining
    /// heartbeat the consumer group refuses leaves the classic group as it was.
    pub fn upgraded(
        &self,
        config: &GroupConfig,
        consumer: &ConsumerGroupConfig,
        topics: &dyn TopicView,
        now_ms: i64,
    ) -> Result<ConsumerGroup, Refusal> {
        let refuse = |message: String| Refusal {
            error: ResponseError::GroupIdNotFound,
            message,
        };
        let id = self.id.clone();
        let cannot = |why: &str| {
            refuse(format!(
                "Cannot upgrade classic group {id} to consumer group because {why}."
            ))
        };
        if !config.migration.upgrades() {
            return Err(cannot("online upgrade is disabled"));
        }
        if self.protocol_type.as_deref() != Some("consumer") {
            return Err(cannot(
                "the group does not use the consumer embedded protocol",
            ));
        }
        if self.members.len() > consumer.max_size {
            return Err(cannot(
                "the group size exceeds the consumer group maximum size",
            ));
        }
        let protocol = self
            .protocol
            .clone()
            .or_else(|| self.select_protocol())
            .unwrap_or_default();
        ConsumerGroup::from_classic(
            &self.id,
            self.generation,
            &protocol,
            self.members.values(),
            topics,
            now_ms,
        )
        .map_err(refuse)
    }

    /// Makes the group the consumer group `converted` (see [`Self::upgraded`]): members
    /// waiting in a join or a sync are told REBALANCE_IN_PROGRESS and rejoin it.
    pub fn install_consumer_group(&mut self, converted: ConsumerGroup, now_ms: i64) {
        for m in self.members.values_mut() {
            if let Some(tx) = m.awaiting_join.take() {
                let _ = tx.send(JoinResult::error(
                    ResponseError::RebalanceInProgress,
                    &m.member_id,
                ));
            }
            if let Some(tx) = m.awaiting_sync.take() {
                let _ = tx.send(SyncResult {
                    error: ResponseError::RebalanceInProgress.code(),
                    ..Default::default()
                });
            }
        }
        tracing::info!(group = %self.id, "converted the classic group to a consumer group");
        self.become_consumer_group(converted, now_ms);
    }

    /// Kafka's online downgrade, once members of the consumer protocol were fenced and only
    /// classic ones remain: when the policy allows it and they fit a classic group, the group
    /// turns classic at the consumer group's epoch, each member holding its target assignment,
    /// and prepares a rebalance. Returns whether it did (its metadata is then to be stored).
    pub fn maybe_downgrade(&mut self, config: &GroupConfig, now_ms: i64) -> bool {
        let Some(c) = self.consumer.as_mut() else {
            return false;
        };
        let Some(due) = c.take_downgrade_due() else {
            return false;
        };
        let generation = due.generation;
        if !config.migration.downgrades() || c.members.len() > config.max_size {
            tracing::info!(group = %self.id, "consumer group of classic members left as it is");
            return false;
        }
        let members = c.downgraded_members();
        self.consumer = None;
        self.generation = generation;
        self.protocol_type = Some("consumer".into());
        self.members.clear();
        let mut targets = Vec::with_capacity(members.len());
        for m in members {
            targets.push((m.member_id.clone(), m.target));
            self.members.insert(
                m.member_id.clone(),
                Member {
                    member_id: m.member_id,
                    group_instance_id: m.instance_id,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    session_timeout_ms: m.session_timeout_ms,
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    protocols: m.protocols,
                    assignment: Bytes::new(),
                    last_heartbeat_ms: now_ms,
                    awaiting_join: None,
                    awaiting_sync: None,
                },
            );
        }
        self.protocol = self.select_protocol();
        let protocol = self.protocol.clone().unwrap_or_default();
        for (id, target) in targets {
            if let Some(m) = self.members.get_mut(&id) {
                let v = version(&m.metadata(&protocol)).unwrap_or(0);
                m.assignment = encode_assignment(&target, v);
            }
        }
        self.leader = self.members.keys().next().cloned();
        // The classic group starts Stable, as Kafka builds it, and rebalances unless a static
        // member's replacement left the assignment current.
        self.state = GroupState::Stable;
        self.state_since_ms = now_ms;
        if due.rebalance {
            self.prepare_rebalance(now_ms, config);
        }
        tracing::info!(group = %self.id, generation, "converted the consumer group to a classic group");
        true
    }
}

#[cfg(test)]
#[path = "group_migration_tests.rs"]
mod tests;
