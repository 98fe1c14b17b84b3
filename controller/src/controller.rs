//! The controller: validates admin commands, turns them into metadata records, makes them
//! durable in the metadata quorum's log and answers once they are applied to the image.
//!
//! Every node has one. On the active controller (the quorum leader, once it has applied the
//! log of earlier terms) a command runs here, one at a time; on any other node it is forwarded
//! to the active controller over the controller listener, and the answer waits until this
//! node's own image has applied the change, so a client that reads back sees it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tern_protocol::error::{ApiError, ResponseError};
use tokio::sync::watch;
use uuid::Uuid;

use crate::acls::{validate_new_acl, AclBinding, AclBindingFilter, MAX_ACL_RECORDS_PER_OP};
use crate::client::ControllerClient;
use crate::commands::{BrokerRegistration, Command, Reply, WireError};
use crate::image::MetadataImage;
use crate::metadata_state::MetadataState;
use crate::placement::place;
use crate::quorum::QuorumHandle;
use crate::records::{ConfigResourceType, MetadataRecord};
use crate::topic_configs::validate_topic_config;
use crate::ControllerError;

mod brokers;
mod elections;
mod forward;
mod partitions;
mod replica_offline;

pub(crate) use elections::TopicPartition;
pub use elections::{ElectionType, LeaderRebalance};
pub use partitions::AlterPartition;
pub use replica_offline::ReplicaOffline;

use brokers::Liveness;

/// Longest topic name Kafka accepts.
const MAX_TOPIC_NAME_LEN: usize = 249;
/// Producer ids handed out per metadata record (Kafka's block size).
const PRODUCER_ID_BLOCK: i64 = 1000;
/// How long a command may look for an active controller (Kafka's `request.timeout.ms`).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a heartbeat looks for an active controller.
const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long a shutting-down broker looks for a controller to tell.
const CONTROLLED_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause between attempts to reach an active controller.
const RETRY_BACKOFF: Duration = Duration::from_millis(100);
/// Most attempts of a compare-and-set config change that keeps losing races.
const MAX_CAS_ATTEMPTS: usize = 16;

/// A request to create one topic.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CreateTopic {
    /// Topic name.
    pub name: String,
    /// Partition count; -1 means the broker default.
    pub num_partitions: i32,
    /// Replication factor; -1 means the broker default.
    pub replication_factor: i16,
    /// Explicit replica assignment, partition by partition (empty: let placement choose).
    pub assignments: Vec<Vec<i32>>,
    /// Topic configs.
    pub configs: Vec<(String, String)>,
    /// A given topic id (mirrors keep the source's), or a fresh one.
    pub topic_id: Option<Uuid>,
}

/// Cluster defaults the controller applies when a request leaves them out.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// `num.partitions`.
    pub num_partitions: i32,
    /// `default.replication.factor`.
    pub default_replication_factor: i16,
    /// `auto.leader.rebalance.enable` and its interval and threshold.
    pub leader_rebalance: LeaderRebalance,
    /// `unclean.leader.election.enable`, the default of the topic config.
    pub unclean_leader_election: bool,
    /// `log.cleaner.min.compaction.lag.ms` and `log.cleaner.max.compaction.lag.ms`, the
    /// defaults a topic's compaction lags are checked against.
    pub compaction_lag_defaults: (i64, i64),
}

/// How long a broker may go without a heartbeat before it is fenced
/// (`broker.session.timeout.ms`).
pub(crate) const DEFAULT_BROKER_SESSION_TIMEOUT: Duration = Duration::from_millis(9_000);

/// The cluster controller of this node (see the module docs).
pub struct Controller {
    config: ControllerConfig,
    state: Arc<MetadataState>,
    /// The quorum driver, if this node is a voter.
    quorum: Option<QuorumHandle>,
    /// How to reach the voters, if there are others.
    client: Option<ControllerClient>,
    /// Commands run one at a time on the active controller.
    command_lock: Mutex<()>,
    liveness: Mutex<Liveness>,
    session_timeout: Duration,
    /// The cluster id this node was formatted with, if any.
    configured_cluster_id: Option<String>,
    /// The quorum driver's thread, stopped and joined on drop.
    driver_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Why another voter refused this one, if it did.
    peer_refusal: Mutex<crate::quorum::transport::PeerRefusal>,
    /// When the leader imbalance was last checked.
    last_rebalance_check: Mutex<Option<std::time::Instant>>,
}

impl Drop for Controller {
    fn drop(&mut self) {
        if let Some(q) = &self.quorum {
            q.shutdown();
        }
        if let Some(t) = self.driver_thread.lock().take() {
            let _ = t.join();
        }
    }
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("state", &self.state)
            .field("quorum", &self.quorum)
            .finish_non_exhaustive()
    }
}

/// Checks a topic name against Kafka's rules.
pub fn validate_topic_name(name: &str) -> Result<(), ApiError> {
    let invalid = |why: String| Err(ApiError::new(ResponseError::InvalidTopicException, why));
    if name.is_empty() {
        return invalid("Topic name is illegal, it can't be empty".into());
    }
    if name == "." || name == ".." {
        return invalid("Topic name cannot be \".\" or \"..\"".into());
    }
    if name.len() > MAX_TOPIC_NAME_LEN {
        return invalid(format!(
            "Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LEN} characters"
        ));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-')
    {
        return invalid(format!(
            "Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
        ));
    }
    Ok(())
}

fn not_controller(message: impl Into<String>) -> ApiError {
    ApiError::new(ResponseError::NotController, message)
}

impl Controller {
    /// A controller over `state`, voting through `quorum` (if a voter) and reaching the
    /// other voters through `client` (if there are others).
    pub fn new(
        config: ControllerConfig,
        state: Arc<MetadataState>,
        quorum: Option<QuorumHandle>,
        client: Option<ControllerClient>,
        session_timeout: Duration,
        configured_cluster_id: Option<String>,
    ) -> Self {
        Controller {
            config,
            state,
            quorum,
            client,
            command_lock: Mutex::new(()),
            liveness: Mutex::new(Liveness::default()),
            session_timeout,
            configured_cluster_id,
            driver_thread: Mutex::new(None),
            peer_refusal: Mutex::new(Default::default()),
            last_rebalance_check: Mutex::new(None),
        }
    }

    /// Shares where the raft transport records a peer's refusal.
    pub fn set_peer_refusal(&self, refusal: crate::quorum::transport::PeerRefusal) {
        *self.peer_refusal.lock() = refusal;
    }

    /// Why this node cannot take part in the quorum: another voter refused it (another
    /// quorum or cluster), or its raft driver stopped after a failure.
    pub fn peer_refusal(&self) -> Option<String> {
        self.peer_refusal.lock().lock().clone().or_else(|| {
            self.quorum
                .as_ref()
                .and_then(|q| q.status().failed)
                .map(|why| format!("the metadata quorum driver failed: {why}"))
        })
    }

    /// Hands over the quorum driver's thread, to be stopped and joined when this is dropped.
    pub fn set_driver_thread(&self, thread: std::thread::JoinHandle<()>) {
        *self.driver_thread.lock() = Some(thread);
    }

    /// The current image.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.state.image()
    }

    /// A receiver that sees every new image.
    pub fn subscribe(&self) -> watch::Receiver<Arc<MetadataImage>> {
        self.state.subscribe()
    }

    /// The applied metadata state.
    pub fn state(&self) -> &Arc<MetadataState> {
        &self.state
    }

    /// The quorum driver, if this node votes.
    pub fn quorum(&self) -> Option<&QuorumHandle> {
        self.quorum.as_ref()
    }

    /// Whether this node is the active controller now.
    pub fn is_active(&self) -> bool {
        self.quorum
            .as_ref()
            .is_some_and(QuorumHandle::is_ready_leader)
    }

    /// `unclean.leader.election.enable` for topics that do not set it, as Kafka's KRaft
    /// controller resolves it: its own node's dynamic value, else the cluster-wide dynamic
    /// default, else its static setting. A dynamic change applies at the next election.
    pub(crate) fn unclean_default(&self, image: &MetadataImage) -> bool {
        self.dynamic_setting(image, crate::topic_configs::UNCLEAN_ELECTION)
            .map_or(self.config.unclean_leader_election, |v| {
                v.trim().eq_ignore_ascii_case("true")
            })
    }

    /// A broker setting's dynamic value on the active controller's node, else the
    /// cluster-wide one.
    fn dynamic_setting(&self, image: &MetadataImage, key: &str) -> Option<String> {
        self.active_controller_id()
            .and_then(|id| image.broker_configs(&id.to_string()).get(key).cloned())
            .or_else(|| image.broker_configs("").get(key).cloned())
    }

    /// The compaction lags a topic that does not set them has, resolved as
    /// [`Controller::unclean_default`] resolves its setting (Kafka checks a topic's lags
    /// against its controller's configuration).
    fn compaction_lag_defaults(&self, image: &MetadataImage) -> (i64, i64) {
        let (min, max) = self.config.compaction_lag_defaults;
        let value = |key: &str, otherwise: i64| {
            self.dynamic_setting(image, key)
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(otherwise)
        };
        (
            value("log.cleaner.min.compaction.lag.ms", min),
            value("log.cleaner.max.compaction.lag.ms", max),
        )
    }

    /// The node id of the active controller, if known.
    pub fn active_controller_id(&self) -> Option<i32> {
        let status = self.quorum.as_ref()?.status();
        status.leader.map(crate::start::node_id)
    }

    fn cluster_id_hint(&self) -> Option<String> {
        self.image()
            .cluster_id
            .clone()
            .or_else(|| self.configured_cluster_id.clone())
    }

    /// Appends records and waits until they are applied here.
    fn commit(&self, records: Vec<MetadataRecord>) -> Result<(), ApiError> {
        if records.is_empty() {
            return Ok(());
        }
        let Some(quorum) = &self.quorum else {
            return Err(not_controller("this node is not a controller"));
        };
        let data = serde_json::to_vec(&records).map_err(|e| {
            ApiError::new(
                ResponseError::UnknownServerError,
                format!("encode records: {e}"),
            )
        })?;
        quorum.propose(data).map_err(|e| match e {
            ControllerError::NotLeader { .. } => {
                not_controller("this node stopped being the active controller")
            }
            e => ApiError::new(
                ResponseError::UnknownServerError,
                format!("metadata log: {e}"),
            ),
        })
    }

    /// Runs a command on this node, which must be the active controller (NOT_CONTROLLER
    /// otherwise). The controller listener calls this for forwarded commands.
    pub fn execute(&self, command: &Command) -> Result<Reply, ApiError> {
        let _one_at_a_time = self.command_lock.lock();
        if !self.is_active() {
            return Err(not_controller("this node is not the active controller"));
        }
        let done = |r: Result<(), ApiError>| r.map(|()| Reply::Done);
        match command {
            Command::RegisterBroker(r) => done(self.do_register_broker(r)),
            Command::BrokerHeartbeat {
                broker_id,
                incarnation_id,
            } => done(self.do_heartbeat(*broker_id, *incarnation_id)),
            Command::ControlledShutdown {
                broker_id,
                incarnation_id,
            } => done(self.do_controlled_shutdown(*broker_id, *incarnation_id)),
            Command::CreateTopic {
                request,
                validate_only,
            } => self.do_create_topic(request, *validate_only).map(Reply::Id),
            Command::DeleteTopic { name } => self.do_delete_topic(name).map(Reply::Id),
            Command::CreatePartitions {
                name,
                count,
                assignments,
                validate_only,
            } => done(self.do_create_partitions(name, *count, assignments, *validate_only)),
            Command::AlterTopicConfigs {
                name,
                changes,
                replace_all,
                validate_only,
            } => done(self.do_alter_topic_configs(name, changes, *replace_all, *validate_only)),
            Command::AlterBrokerConfigs {
                broker,
                changes,
                replace_all,
            } => done(self.do_alter_resource_configs(
                ConfigResourceType::Broker,
                broker,
                changes,
                *replace_all,
            )),
            Command::AlterGroupConfigs {
                group,
                changes,
                replace_all,
            } => done(self.do_alter_resource_configs(
                ConfigResourceType::Group,
                group,
                changes,
                *replace_all,
            )),
            Command::CompareAndSetTopicConfig {
                topic,
                key,
                expected,
                new,
            } => done(self.do_compare_and_set(topic, key, expected.as_deref(), new.clone())),
            Command::CreateMirror {
                name,
                configs,
                validate_only,
            } => self
                .do_create_mirror(name, configs.clone(), *validate_only)
                .map(Reply::Id),
            Command::DeleteMirror { name } => done(self.do_delete_mirror(name)),
            Command::AlterScramCredentials { records } => done(self.commit(records.clone())),
            Command::CreateAcls { acls } => Ok(Reply::CreatedAcls(
                self.do_create_acls(acls)
                    .into_iter()
                    .map(|r| r.map_err(WireError::from))
                    .collect(),
            )),
            Command::DeleteAcls { filters } => Ok(Reply::DeletedAcls(
                self.do_delete_acls(filters)
                    .into_iter()
                    .map(|r| r.map_err(WireError::from))
                    .collect(),
            )),
            Command::EnsureProducerIdFloor { floor } => {
                done(self.do_ensure_producer_id_floor(*floor))
            }
            Command::AllocateProducerIds => self
                .do_allocate_producer_ids()
                .map(|(first, count)| Reply::ProducerIds(first, count)),
            Command::DescribeQuorum => Ok(Reply::Quorum(self.do_describe_quorum())),
            Command::ElectLeaders {
                partitions,
                election,
            } => self.do_elect_leaders(partitions, *election),
            Command::AlterReassignments { changes } => self.do_alter_reassignments(changes),
            Command::AlterPartition(r) => self
                .do_alter_partition(r)
                .map(|(isr, epoch)| Reply::Partition(isr, epoch)),
            Command::ReplicaOffline(r) => self.do_replica_offline(r).map(Reply::Leader),
            Command::RaiseLeaderEpoch {
                topic_id,
                partition,
                at_least,
            } => done(self.do_raise_leader_epoch(*topic_id, *partition, *at_least)),
        }
    }

    /// Registers a broker (idempotent when nothing changed). Refused with
    /// DUPLICATE_BROKER_REGISTRATION while another live process holds the same node id.
    pub fn register_broker(&self, registration: BrokerRegistration) -> Result<(), ApiError> {
        self.submit(Command::RegisterBroker(registration))
            .map(|_| ())
    }

    /// A live broker's heartbeat; STALE_BROKER_EPOCH means it must register again. Gives up
    /// after a few seconds: the next heartbeat tries again.
    pub fn broker_heartbeat(&self, broker_id: i32, incarnation_id: Uuid) -> Result<(), ApiError> {
        self.submit_within(
            Command::BrokerHeartbeat {
                broker_id,
                incarnation_id,
            },
            HEARTBEAT_TIMEOUT,
        )
        .map(|_| ())
    }

    /// A broker shutting down: fenced at once, its partition leaderships given away. Tries for
    /// a few seconds only: the last node of a cluster has no controller to tell.
    pub fn controlled_shutdown(
        &self,
        broker_id: i32,
        incarnation_id: Uuid,
    ) -> Result<(), ApiError> {
        self.submit_within(
            Command::ControlledShutdown {
                broker_id,
                incarnation_id,
            },
            CONTROLLED_SHUTDOWN_TIMEOUT,
        )
        .map(|_| ())
    }

    /// Creates a topic, or with `validate_only` just checks that it could be. Returns its id.
    pub fn create_topic(&self, req: &CreateTopic, validate_only: bool) -> Result<Uuid, ApiError> {
        validate_topic_name(&req.name)?;
        match self.submit(Command::CreateTopic {
            request: req.clone(),
            validate_only,
        })? {
            Reply::Id(id) => Ok(id),
            other => Err(unexpected(other)),
        }
    }

    /// Deletes a topic by name.
    pub fn delete_topic(&self, name: &str) -> Result<Uuid, ApiError> {
        match self.submit(Command::DeleteTopic {
            name: name.to_string(),
        })? {
            Reply::Id(id) => Ok(id),
            other => Err(unexpected(other)),
        }
    }

    /// Grows a topic to `count` partitions.
    pub fn create_partitions(
        &self,
        name: &str,
        count: i32,
        assignments: &[Vec<i32>],
        validate_only: bool,
    ) -> Result<(), ApiError> {
        self.submit(Command::CreatePartitions {
            name: name.to_string(),
            count,
            assignments: assignments.to_vec(),
            validate_only,
        })
        .map(|_| ())
    }

    /// Sets (`Some`) or removes (`None`) topic configs. With `replace_all` (the legacy
    /// AlterConfigs) every config not named is reset to its default.
    pub fn alter_topic_configs(
        &self,
        name: &str,
        changes: &[(String, Option<String>)],
        replace_all: bool,
        validate_only: bool,
    ) -> Result<(), ApiError> {
        self.submit(Command::AlterTopicConfigs {
            name: name.to_string(),
            changes: changes.to_vec(),
            replace_all,
            validate_only,
        })
        .map(|_| ())
    }

    /// Sets or removes dynamic configs of broker `broker` (a node id, or empty for the
    /// cluster-wide default); the caller has validated them.
    pub fn alter_broker_configs(
        &self,
        broker: &str,
        changes: &[(String, Option<String>)],
        replace_all: bool,
    ) -> Result<(), ApiError> {
        self.submit(Command::AlterBrokerConfigs {
            broker: broker.to_string(),
            changes: changes.to_vec(),
            replace_all,
        })
        .map(|_| ())
    }

    /// Sets or removes configs of group `group`; the caller has validated them.
    pub fn alter_group_configs(
        &self,
        group: &str,
        changes: &[(String, Option<String>)],
        replace_all: bool,
    ) -> Result<(), ApiError> {
        self.submit(Command::AlterGroupConfigs {
            group: group.to_string(),
            changes: changes.to_vec(),
            replace_all,
        })
        .map(|_| ())
    }

    /// Reads a topic config and sets it from what `decide` returns, atomically with respect to
    /// every other metadata change (mirror start, stop, pause and resume race otherwise).
    /// `decide` gets the current value and answers the new one (`None` removes it); the change
    /// is a compare-and-set on the active controller, retried when another change won.
    pub fn update_topic_config(
        &self,
        topic: &str,
        key: &str,
        decide: impl Fn(Option<&str>) -> Result<Option<String>, ApiError>,
    ) -> Result<(), ApiError> {
        let mut last = None;
        for _ in 0..MAX_CAS_ATTEMPTS {
            let image = self.image();
            if image.topic(topic).is_none() {
                return Err(ApiError::new(
                    ResponseError::UnknownTopicOrPartition,
                    format!("Topic {topic} does not exist"),
                ));
            }
            let current = image.topic_configs(topic).get(key).cloned();
            let new = decide(current.as_deref())?;
            if new == current {
                return Ok(());
            }
            match self.submit(Command::CompareAndSetTopicConfig {
                topic: topic.to_string(),
                key: key.to_string(),
                expected: current,
                new,
            }) {
                Err(e) if e.error == ResponseError::ConcurrentTransactions => {
                    last = Some(e);
                    std::thread::sleep(Duration::from_millis(10));
                }
                other => return other.map(|_| ()),
            }
        }
        Err(last.unwrap_or_else(|| not_controller("config change kept losing races")))
    }

    /// Defines a cluster mirror with already validated configs.
    pub fn create_mirror(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<Uuid, ApiError> {
        match self.submit(Command::CreateMirror {
            name: name.to_string(),
            configs,
            validate_only,
        })? {
            Reply::Id(id) => Ok(id),
            other => Err(unexpected(other)),
        }
    }

    /// Deletes a cluster mirror that mirrors no topic any more.
    pub fn delete_mirror(&self, name: &str) -> Result<(), ApiError> {
        self.submit(Command::DeleteMirror {
            name: name.to_string(),
        })
        .map(|_| ())
    }

    /// Commits SCRAM credential changes (`ScramCredential` / `RemoveScramCredential` records,
    /// validated by the caller) as one metadata log entry.
    pub fn alter_scram_credentials(&self, records: Vec<MetadataRecord>) -> Result<(), ApiError> {
        debug_assert!(records.iter().all(|r| matches!(
            r,
            MetadataRecord::ScramCredential { .. } | MetadataRecord::RemoveScramCredential { .. }
        )));
        self.submit(Command::AlterScramCredentials { records })
            .map(|_| ())
    }

    /// Creates ACLs, answering once they are committed: one result per binding, in order.
    /// An ACL that exists already (or twice in the request) succeeds without a new record, as
    /// in Kafka's AclControlManager.
    pub fn create_acls(&self, acls: &[AclBinding]) -> Vec<Result<(), ApiError>> {
        let reply = self.submit(Command::CreateAcls {
            acls: acls.to_vec(),
        });
        per_item(acls.len(), reply, |r| match r {
            Reply::CreatedAcls(results) => Ok(results),
            other => Err(other),
        })
    }

    /// Deletes every ACL matching each filter, atomically, answering once committed: per
    /// filter, the ACLs it matched (an ACL matched by two filters is listed under both).
    pub fn delete_acls(
        &self,
        filters: &[AclBindingFilter],
    ) -> Vec<Result<Vec<AclBinding>, ApiError>> {
        let reply = self.submit(Command::DeleteAcls {
            filters: filters.to_vec(),
        });
        per_item(filters.len(), reply, |r| match r {
            Reply::DeletedAcls(results) => Ok(results),
            other => Err(other),
        })
    }

    /// Makes sure no producer id below `floor` is handed out from now on (mirrored data
    /// carries the source cluster's producer ids; ours must not collide with them).
    pub fn ensure_producer_id_floor(&self, floor: i64) -> Result<(), ApiError> {
        if self.image().next_producer_id >= floor {
            return Ok(());
        }
        self.submit(Command::EnsureProducerIdFloor { floor })
            .map(|_| ())
    }

    /// Hands out a block of producer ids; returns (first id, count).
    pub fn allocate_producer_ids(&self) -> Result<(i64, i64), ApiError> {
        match self.submit(Command::AllocateProducerIds)? {
            Reply::ProducerIds(first, count) => Ok((first, count)),
            other => Err(unexpected(other)),
        }
    }

    // ---- On the active controller: validate against the image, then commit. ----

    fn do_create_topic(&self, req: &CreateTopic, validate_only: bool) -> Result<Uuid, ApiError> {
        validate_topic_name(&req.name)?;
        let image = self.image();
        if image.topic(&req.name).is_some() {
            return Err(ApiError::new(
                ResponseError::TopicAlreadyExists,
                format!("Topic '{}' already exists.", req.name),
            ));
        }
        // '.' and '_' collide in metric names, so Kafka refuses names that differ only there.
        let folded = req.name.replace('.', "_");
        if let Some(existing) = image
            .topic_ids
            .keys()
            .find(|t| t.replace('.', "_") == folded)
        {
            return Err(ApiError::new(
                ResponseError::InvalidTopicException,
                format!(
                    "Topic '{}' collides with existing topic: {existing}",
                    req.name
                ),
            ));
        }
        if let Some(id) = req.topic_id {
            if image.topics.contains_key(&id) {
                return Err(ApiError::new(
                    ResponseError::TopicAlreadyExists,
                    format!("Topic id {id} already exists."),
                ));
            }
        }
        for (name, value) in &req.configs {
            validate_topic_config(name, value)
                .map_err(|m| ApiError::new(ResponseError::InvalidConfig, m))?;
        }
        crate::topic_configs::validate_topic_config_set(
            req.configs.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            self.compaction_lag_defaults(&image),
        )
        .map_err(|m| ApiError::new(ResponseError::InvalidConfig, m))?;
        let brokers = image.live_brokers();
        let assignments = if req.assignments.is_empty() {
            let partitions = if req.num_partitions == -1 {
                self.config.num_partitions
            } else {
                req.num_partitions
            };
            if partitions <= 0 {
                return Err(ApiError::new(
                    ResponseError::InvalidPartitions,
                    "Number of partitions must be larger than 0.",
                ));
            }
            let rf = if req.replication_factor == -1 {
                self.config.default_replication_factor
            } else {
                req.replication_factor
            };
            if rf <= 0 {
                return Err(ApiError::new(
                    ResponseError::InvalidReplicationFactor,
                    "Replication factor must be larger than 0.",
                ));
            }
            if rf as usize > brokers.len() {
                return Err(ApiError::new(
                    ResponseError::InvalidReplicationFactor,
                    format!(
                        "Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot be reached because only {} broker(s) are registered.",
                        brokers.len()
                    ),
                ));
            }
            place(&image, 0, partitions, rf as usize)
        } else {
            if req.num_partitions != -1 || req.replication_factor != -1 {
                return Err(ApiError::new(
                    ResponseError::InvalidRequest,
                    "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.",
                ));
            }
            validate_assignments(
                &req.assignments,
                &image.brokers.keys().copied().collect::<Vec<_>>(),
            )?;
            req.assignments.clone()
        };
        let topic_id = req.topic_id.unwrap_or_else(Uuid::new_v4);
        if validate_only {
            return Ok(topic_id);
        }
        let mut records = vec![MetadataRecord::Topic {
            name: req.name.clone(),
            topic_id,
        }];
        records.extend(partition_records(&image, topic_id, 0, &assignments));
        records.extend(
            req.configs
                .iter()
                .map(|(name, value)| MetadataRecord::Config {
                    resource_type: ConfigResourceType::Topic,
                    resource_name: req.name.clone(),
                    name: name.clone(),
                    value: Some(value.clone()),
                }),
        );
        self.commit(records)?;
        Ok(topic_id)
    }

    fn do_delete_topic(&self, name: &str) -> Result<Uuid, ApiError> {
        let Some(topic_id) = self.image().topic_ids.get(name).copied() else {
            return Err(ApiError::new(
                ResponseError::UnknownTopicOrPartition,
                "This server does not host this topic-partition.",
            ));
        };
        self.commit(vec![MetadataRecord::RemoveTopic { topic_id }])?;
        Ok(topic_id)
    }

    fn do_create_partitions(
        &self,
        name: &str,
        count: i32,
        assignments: &[Vec<i32>],
        validate_only: bool,
    ) -> Result<(), ApiError> {
        let image = self.image();
        let Some(topic) = image.topic(name).cloned() else {
            return Err(ApiError::new(
                ResponseError::UnknownTopicOrPartition,
                format!("The topic '{name}' does not exist."),
            ));
        };
        let current = topic.partitions.len() as i32;
        if count <= current {
            return Err(ApiError::new(
                ResponseError::InvalidPartitions,
                format!("Topic currently has {current} partitions, which is higher than the requested {count}."),
            ));
        }
        let brokers = image.live_brokers();
        let new = if assignments.is_empty() {
            let rf = topic
                .partitions
                .values()
                .next()
                .map(|p| p.replicas.len())
                .unwrap_or(1);
            if rf > brokers.len() {
                return Err(ApiError::new(
                    ResponseError::InvalidReplicationFactor,
                    format!("The target replication factor of {rf} cannot be reached because only {} broker(s) are live.", brokers.len()),
                ));
            }
            place(&image, current, count - current, rf)
        } else {
            if assignments.len() as i32 != count - current {
                return Err(ApiError::new(
                    ResponseError::InvalidReplicaAssignment,
                    format!(
                        "Increasing the number of partitions by {} but {} assignments provided.",
                        count - current,
                        assignments.len()
                    ),
                ));
            }
            validate_assignments(
                assignments,
                &image.brokers.keys().copied().collect::<Vec<_>>(),
            )?;
            assignments.to_vec()
        };
        if validate_only {
            return Ok(());
        }
        self.commit(partition_records(&image, topic.id, current, &new))
    }

    fn do_alter_topic_configs(
        &self,
        name: &str,
        changes: &[(String, Option<String>)],
        replace_all: bool,
        validate_only: bool,
    ) -> Result<(), ApiError> {
        let image = self.image();
        if image.topic(name).is_none() {
            return Err(ApiError::new(
                ResponseError::UnknownTopicOrPartition,
                format!("Topic {name} does not exist"),
            ));
        }
        for (key, value) in changes {
            match value {
                Some(v) => validate_topic_config(key, v),
                None => crate::topic_configs::topic_config(key)
                    .map(|_| ())
                    .ok_or_else(|| format!("Unknown topic config name: {key}")),
            }
            .map_err(|m| ApiError::new(ResponseError::InvalidConfig, m))?;
        }
        let mut after = if replace_all {
            BTreeMap::new()
        } else {
            image.topic_configs(name)
        };
        for (key, value) in changes {
            match value {
                Some(v) => after.insert(key.clone(), v.clone()),
                None => after.remove(key),
            };
        }
        crate::topic_configs::validate_topic_config_set(
            after.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            self.compaction_lag_defaults(&image),
        )
        .map_err(|m| ApiError::new(ResponseError::InvalidConfig, m))?;
        if validate_only {
            return Ok(());
        }
        let mut records = Vec::new();
        if replace_all {
            for key in image.topic_configs(name).into_keys() {
                // The mirror association is not a user config: a full replace keeps it.
                if key == crate::topic_configs::MIRROR_NAME_CONFIG {
                    continue;
                }
                if !changes.iter().any(|(k, _)| *k == key) {
                    records.push(config_record(name, &key, None));
                }
            }
        }
        records.extend(
            changes
                .iter()
                .map(|(k, v)| config_record(name, k, v.clone())),
        );
        self.commit(records)
    }

    /// Sets or removes configs of a broker or group resource (validated by the broker).
    fn do_alter_resource_configs(
        &self,
        resource_type: ConfigResourceType,
        name: &str,
        changes: &[(String, Option<String>)],
        replace_all: bool,
    ) -> Result<(), ApiError> {
        let record = |key: &str, value: Option<String>| MetadataRecord::Config {
            resource_type,
            resource_name: name.to_string(),
            name: key.to_string(),
            value,
        };
        let mut records = Vec::new();
        if replace_all {
            for key in self.image().configs_of(resource_type, name).into_keys() {
                if !changes.iter().any(|(k, _)| *k == key) {
                    records.push(record(&key, None));
                }
            }
        }
        records.extend(changes.iter().map(|(k, v)| record(k, v.clone())));
        if records.is_empty() {
            return Ok(());
        }
        self.commit(records)
    }

    fn do_compare_and_set(
        &self,
        topic: &str,
        key: &str,
        expected: Option<&str>,
        new: Option<String>,
    ) -> Result<(), ApiError> {
        let image = self.image();
        if image.topic(topic).is_none() {
            return Err(ApiError::new(
                ResponseError::UnknownTopicOrPartition,
                format!("Topic {topic} does not exist"),
            ));
        }
        let configs = image.topic_configs(topic);
        let current = configs.get(key).map(String::as_str);
        if current != expected {
            // Another change came first: the caller decides again from the new value.
            return Err(ApiError::new(
                ResponseError::ConcurrentTransactions,
                format!("{key} of {topic} changed concurrently"),
            ));
        }
        if new.as_deref() == current {
            return Ok(());
        }
        self.commit(vec![config_record(topic, key, new)])
    }

    fn do_create_mirror(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<Uuid, ApiError> {
        if self.image().mirrors.contains_key(name) {
            return Err(ApiError::new(
                tern_protocol::mirror::errors::CLUSTER_MIRROR_ALREADY_EXISTS,
                format!("Cluster mirror {name} already exists"),
            ));
        }
        let mirror_id = Uuid::new_v4();
        if validate_only {
            return Ok(mirror_id);
        }
        self.commit(vec![MetadataRecord::ClusterMirror {
            name: name.to_string(),
            mirror_id,
            configs,
        }])?;
        Ok(mirror_id)
    }

    fn do_delete_mirror(&self, name: &str) -> Result<(), ApiError> {
        let image = self.image();
        if !image.mirrors.contains_key(name) {
            return Err(ApiError::new(
                tern_protocol::mirror::errors::UNKNOWN_CLUSTER_MIRROR,
                format!("Cluster mirror {name} does not exist"),
            ));
        }
        let topics = image.mirror_topics(name);
        if !topics.is_empty() {
            return Err(ApiError::new(
                tern_protocol::mirror::errors::CLUSTER_MIRROR_NOT_EMPTY,
                format!(
                    "Cluster mirror {name} still mirrors {} topic(s): {}; stop them first",
                    topics.len(),
                    topics.join(", ")
                ),
            ));
        }
        self.commit(vec![MetadataRecord::RemoveClusterMirror {
            name: name.to_string(),
        }])
    }

    fn do_create_acls(&self, acls: &[AclBinding]) -> Vec<Result<(), ApiError>> {
        let image = self.image();
        let existing: BTreeSet<&AclBinding> = image.acls.values().collect();
        let mut new: BTreeSet<&AclBinding> = BTreeSet::new();
        let mut records = Vec::new();
        let mut results = Vec::with_capacity(acls.len());
        for acl in acls {
            if let Err(e) = validate_new_acl(acl) {
                results.push(Err(e));
                continue;
            }
            if !existing.contains(acl) && new.insert(acl) {
                records.push(MetadataRecord::Acl {
                    id: Uuid::new_v4(),
                    acl: acl.clone(),
                });
            }
            results.push(Ok(()));
        }
        if records.len() > MAX_ACL_RECORDS_PER_OP {
            let e = ApiError::new(
                ResponseError::InvalidRequest,
                format!(
                    "Cannot create more than {MAX_ACL_RECORDS_PER_OP} ACLs in a single operation."
                ),
            );
            return acls.iter().map(|_| Err(e.clone())).collect();
        }
        if let Err(e) = self.commit(records) {
            return results.into_iter().map(|r| r.and(Err(e.clone()))).collect();
        }
        results
    }

    fn do_delete_acls(
        &self,
        filters: &[AclBindingFilter],
    ) -> Vec<Result<Vec<AclBinding>, ApiError>> {
        let image = self.image();
        let mut removed: BTreeSet<Uuid> = BTreeSet::new();
        let mut results = Vec::with_capacity(filters.len());
        for filter in filters {
            if filter.is_unknown() {
                results.push(Err(ApiError::new(
                    ResponseError::InvalidRequest,
                    "Unknown ACL filter: it names an UNKNOWN resource type, pattern type, \
                     operation or permission type.",
                )));
                continue;
            }
            let mut matched = Vec::new();
            for (id, acl) in &image.acls {
                if filter.matches(acl) {
                    removed.insert(*id);
                    matched.push(acl.clone());
                }
            }
            results.push(Ok(matched));
        }
        if removed.len() > MAX_ACL_RECORDS_PER_OP {
            // Kafka fails the whole request rather than delete a part that is easy to miss.
            let e = ApiError::new(
                ResponseError::InvalidRequest,
                format!("Cannot remove more than {MAX_ACL_RECORDS_PER_OP} ACLs in a single delete operation."),
            );
            return filters.iter().map(|_| Err(e.clone())).collect();
        }
        let records = removed
            .into_iter()
            .map(|id| MetadataRecord::RemoveAcl { id })
            .collect();
        if let Err(e) = self.commit(records) {
            return results.into_iter().map(|r| r.and(Err(e.clone()))).collect();
        }
        results
    }

    fn do_ensure_producer_id_floor(&self, floor: i64) -> Result<(), ApiError> {
        if self.image().next_producer_id >= floor {
            return Ok(());
        }
        self.commit(vec![MetadataRecord::ProducerIds {
            next_producer_id: floor,
        }])
    }

    fn do_allocate_producer_ids(&self) -> Result<(i64, i64), ApiError> {
        let first = self.image().next_producer_id;
        self.commit(vec![MetadataRecord::ProducerIds {
            next_producer_id: first + PRODUCER_ID_BLOCK,
        }])?;
        Ok((first, PRODUCER_ID_BLOCK))
    }
}

/// The per-item outcomes of a batch command's reply (picked out by `pick`), or the whole
/// command's error (or an unexpected reply) for each of the `n` items.
fn per_item<T>(
    n: usize,
    reply: Result<Reply, ApiError>,
    pick: impl FnOnce(Reply) -> Result<Vec<Result<T, WireError>>, Reply>,
) -> Vec<Result<T, ApiError>> {
    let error = match reply.map(pick) {
        Ok(Ok(results)) => {
            return results
                .into_iter()
                .map(|r| r.map_err(ApiError::from))
                .collect()
        }
        Ok(Err(other)) => unexpected(other),
        Err(e) => e,
    };
    (0..n).map(|_| Err(error.clone())).collect()
}

fn unexpected(reply: Reply) -> ApiError {
    ApiError::new(
        ResponseError::UnknownServerError,
        format!("unexpected controller reply {reply:?}"),
    )
}

fn config_record(topic: &str, name: &str, value: Option<String>) -> MetadataRecord {
    MetadataRecord::Config {
        resource_type: ConfigResourceType::Topic,
        resource_name: topic.to_string(),
        name: name.to_string(),
        value,
    }
}

/// New partitions, each led by its first replica that is not fenced.
fn partition_records(
    image: &MetadataImage,
    topic_id: Uuid,
    first: i32,
    assignments: &[Vec<i32>],
) -> Vec<MetadataRecord> {
    let live = image.live_brokers();
    assignments
        .iter()
        .enumerate()
        .map(|(i, replicas)| MetadataRecord::Partition {
            topic_id,
            partition: first + i as i32,
            replicas: replicas.clone(),
            isr: replicas.clone(),
            leader: replicas
                .iter()
                .copied()
                .find(|r| live.contains(r))
                .unwrap_or(-1),
            leader_epoch: 0,
            partition_epoch: 0,
        })
        .collect()
}

fn validate_assignments(assignments: &[Vec<i32>], brokers: &[i32]) -> Result<(), ApiError> {
    let invalid = |m: String| Err(ApiError::new(ResponseError::InvalidReplicaAssignment, m));
    let rf = assignments.first().map(Vec::len).unwrap_or(0);
    for (p, replicas) in assignments.iter().enumerate() {
        if replicas.is_empty() {
            return invalid(format!("Partition {p} has an empty replica list."));
        }
        if replicas.len() != rf {
            return invalid("All partitions should have the same number of replicas.".into());
        }
        let mut seen = BTreeMap::new();
        for r in replicas {
            if !brokers.contains(r) {
                return invalid(format!(
                    "Replica {r} of partition {p} is not a registered broker."
                ));
            }
            if seen.insert(*r, ()).is_some() {
                return invalid(format!("Duplicate replica {r} in partition {p}."));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod acl_tests {
    use super::*;
    use crate::acls::{AclOperation, AclPatternType, AclPermissionType, AclResourceType};

    pub(super) fn open(dir: &std::path::Path) -> Arc<Controller> {
        let config = ControllerConfig {
            num_partitions: 1,
            default_replication_factor: 1,
            leader_rebalance: Default::default(),
            unclean_leader_election: false,
            compaction_lag_defaults: (0, i64::MAX),
        };
        crate::open_single_voter(dir, 0, config).unwrap()
    }

    /// Registers brokers 1..=`n` with fresh incarnations; index `b` holds broker `b`'s.
    pub(super) fn register_brokers(c: &Controller, n: i32) -> Vec<Uuid> {
        let incarnations: Vec<Uuid> = (0..=n).map(|_| Uuid::new_v4()).collect();
        for b in 1..=n {
            c.register_broker(BrokerRegistration {
                broker_id: b,
                incarnation_id: incarnations[b as usize],
                endpoints: vec![],
                rack: None,
            })
            .unwrap();
        }
        incarnations
    }

    fn acl(name: &str, pattern: AclPatternType, op: AclOperation) -> AclBinding {
        AclBinding {
            resource_type: AclResourceType::Topic,
            resource_name: name.into(),
            pattern_type: pattern,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: op,
            permission: AclPermissionType::Allow,
        }
    }

    fn topic_filter(name: Option<&str>, pattern: AclPatternType) -> AclBindingFilter {
        AclBindingFilter {
            resource_type: AclResourceType::Topic,
            resource_name: name.map(str::to_string),
            pattern_type: pattern,
            ..AclBindingFilter::any()
        }
    }

    #[test]
    fn acls_are_committed_with_ids_and_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let a = acl("orders", AclPatternType::Literal, AclOperation::Read);
        let b = acl("pay", AclPatternType::Prefixed, AclOperation::Write);
        {
            let c = open(dir.path());
            let results = c.create_acls(&[a.clone(), b.clone()]);
            assert!(results.iter().all(Result::is_ok), "{results:?}");
            let image = c.image();
            assert_eq!(image.acls.len(), 2);
            let ids: BTreeSet<&Uuid> = image.acls.keys().collect();
            assert_eq!(ids.len(), 2, "each ACL has its own id");
        }
        let c = open(dir.path());
        let mut acls: Vec<AclBinding> = c.image().acls.values().cloned().collect();
        acls.sort();
        let mut want = vec![a, b];
        want.sort();
        assert_eq!(acls, want);
    }

    #[test]
    fn an_existing_or_repeated_acl_succeeds_without_a_second_record() {
        let dir = tempfile::tempdir().unwrap();
        let c = open(dir.path());
        let a = acl("t", AclPatternType::Literal, AclOperation::Read);
        let results = c.create_acls(&[a.clone(), a.clone()]);
        assert!(results.iter().all(Result::is_ok));
        let offset = c.image().offset;
        assert!(c.create_acls(std::slice::from_ref(&a))[0].is_ok());
        assert_eq!(c.image().acls.len(), 1);
        assert_eq!(c.image().offset, offset, "nothing appended");
    }

    #[test]
    fn invalid_acls_fail_alone_with_invalid_request() {
        let dir = tempfile::tempdir().unwrap();
        let c = open(dir.path());
        let good = acl("t", AclPatternType::Literal, AclOperation::Read);
        let bad = acl("t", AclPatternType::Match, AclOperation::Read);
        let results = c.create_acls(&[bad, good]);
        assert_eq!(
            results[0].as_ref().unwrap_err().error,
            ResponseError::InvalidRequest
        );
        assert!(results[1].is_ok());
        assert_eq!(c.image().acls.len(), 1);
    }

    #[test]
    fn delete_by_filter_removes_what_matches_and_reports_it_per_filter() {
        let dir = tempfile::tempdir().unwrap();
        let c = open(dir.path());
        let literal = acl("foobar", AclPatternType::Literal, AclOperation::Read);
        let prefix = acl("foo", AclPatternType::Prefixed, AclOperation::Read);
        let other = acl("bar", AclPatternType::Literal, AclOperation::Read);
        c.create_acls(&[literal.clone(), prefix.clone(), other.clone()]);
        let results = c.delete_acls(&[
            topic_filter(Some("foobar"), AclPatternType::Match),
            topic_filter(Some("foo"), AclPatternType::Prefixed),
            AclBindingFilter {
                operation: AclOperation::Unknown,
                ..AclBindingFilter::any()
            },
        ]);
        let mut first = results[0].clone().unwrap();
        first.sort();
        let mut want = vec![literal, prefix.clone()];
        want.sort();
        assert_eq!(first, want);
        assert_eq!(results[1].clone().unwrap(), vec![prefix]);
        assert_eq!(
            results[2].as_ref().unwrap_err().error,
            ResponseError::InvalidRequest
        );
        let left: Vec<AclBinding> = c.image().acls.values().cloned().collect();
        assert_eq!(left, vec![other]);
        // Deleted ACLs stay deleted after a restart.
        drop(c);
        let c = open(dir.path());
        assert_eq!(c.image().acls.len(), 1);
    }
}
