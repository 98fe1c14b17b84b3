//! Controller commands as values, so that a node that is not the active controller can
//! forward them to the one that is (over the controller listener) and get the same answer a
//! local call would give.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tern_protocol::error::{ApiError, ResponseError};
use uuid::Uuid;

use crate::acls::{AclBinding, AclBindingFilter};
use crate::controller::CreateTopic;
use crate::records::{BrokerEndpoint, MetadataRecord};

/// A broker's registration: who it is and where clients reach it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerRegistration {
    /// Node id.
    pub broker_id: i32,
    /// Random per process start: a second process with the same node id is told apart.
    pub incarnation_id: Uuid,
    /// Every advertised listener.
    pub endpoints: Vec<BrokerEndpoint>,
    /// `broker.rack`.
    pub rack: Option<String>,
}

/// One controller operation (the public methods of [`crate::Controller`] build these).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Command {
    /// Register (or re-register) a broker.
    RegisterBroker(BrokerRegistration),
    /// A live broker's heartbeat.
    BrokerHeartbeat {
        /// Node id.
        broker_id: i32,
        /// The registration's incarnation.
        incarnation_id: Uuid,
    },
    /// A broker shutting down cleanly: fence it now.
    ControlledShutdown {
        /// Node id.
        broker_id: i32,
        /// The registration's incarnation.
        incarnation_id: Uuid,
    },
    /// Create a topic.
    CreateTopic {
        /// The topic.
        request: CreateTopic,
        /// Only check.
        validate_only: bool,
    },
    /// Delete a topic.
    DeleteTopic {
        /// Topic name.
        name: String,
    },
    /// Add partitions.
    CreatePartitions {
        /// Topic name.
        name: String,
        /// The new total.
        count: i32,
        /// Explicit assignments of the new partitions.
        assignments: Vec<Vec<i32>>,
        /// Only check.
        validate_only: bool,
    },
    /// Set or remove topic configs.
    AlterTopicConfigs {
        /// Topic name.
        name: String,
        /// (key, value or None to remove).
        changes: Vec<(String, Option<String>)>,
        /// Legacy AlterConfigs: reset everything not named.
        replace_all: bool,
        /// Only check.
        validate_only: bool,
    },
    /// Set or remove dynamic broker configs (validated by the broker that took the request).
    AlterBrokerConfigs {
        /// A node id, or empty for the cluster-wide default.
        broker: String,
        /// (key, value or None to remove).
        changes: Vec<(String, Option<String>)>,
        /// Legacy AlterConfigs: reset everything not named.
        replace_all: bool,
    },
    /// Set or remove a group's configs (validated by the broker that took the request).
    AlterGroupConfigs {
        /// Group id.
        group: String,
        /// (key, value or None to remove).
        changes: Vec<(String, Option<String>)>,
        /// Legacy AlterConfigs: reset everything not named.
        replace_all: bool,
    },
    /// Set a topic config only if it still has the value the caller decided from.
    CompareAndSetTopicConfig {
        /// Topic name.
        topic: String,
        /// Config key.
        key: String,
        /// The value the caller saw.
        expected: Option<String>,
        /// The value to set (None removes).
        new: Option<String>,
    },
    /// Define a cluster mirror.
    CreateMirror {
        /// Mirror name.
        name: String,
        /// Validated configs.
        configs: BTreeMap<String, String>,
        /// Only check.
        validate_only: bool,
    },
    /// Delete an empty cluster mirror.
    DeleteMirror {
        /// Mirror name.
        name: String,
    },
    /// Commit SCRAM credential records.
    AlterScramCredentials {
        /// ScramCredential / RemoveScramCredential records.
        records: Vec<MetadataRecord>,
    },
    /// Create ACLs.
    CreateAcls {
        /// The ACLs.
        acls: Vec<AclBinding>,
    },
    /// Delete ACLs matching filters.
    DeleteAcls {
        /// The filters.
        filters: Vec<AclBindingFilter>,
    },
    /// Raise the producer-id counter to at least `floor`.
    EnsureProducerIdFloor {
        /// The floor.
        floor: i64,
    },
    /// Hand out a block of producer ids.
    AllocateProducerIds,
    /// Describe the quorum as the active controller sees it (DescribeQuorum).
    DescribeQuorum,
    /// A partition leader changes the ISR (AlterPartition).
    AlterPartition(crate::controller::AlterPartition),
    /// A partition leader's replica went offline: hand the partition to another ISR member.
    ReplicaOffline(crate::controller::ReplicaOffline),
    /// Elect leaders (ElectLeaders); all partitions when None.
    ElectLeaders {
        /// The partitions.
        partitions: Option<Vec<crate::controller::TopicPartition>>,
        /// Which leader.
        election: crate::controller::ElectionType,
    },
    /// Raise a partition's leader epoch to at least `at_least` (a mirror partition's leader
    /// keeps its epoch at or above the source's epochs of the batches it mirrors).
    RaiseLeaderEpoch {
        /// Topic id.
        topic_id: Uuid,
        /// Partition index.
        partition: i32,
        /// The lowest leader epoch wanted.
        at_least: i32,
    },
    /// Start (Some target) or cancel (None) partition reassignments.
    AlterReassignments {
        /// Per partition: the target replicas, or None to cancel.
        changes: Vec<(crate::controller::TopicPartition, Option<Vec<i32>>)>,
    },
}

/// One replica of the metadata log, as DescribeQuorum shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaDescription {
    /// Node id.
    pub node_id: i32,
    /// Its log end offset (raft index), -1 if unknown.
    pub log_end_offset: i64,
    /// When the leader last heard from it (ms since the epoch), -1 if never.
    pub last_fetch_timestamp: i64,
    /// When it last had everything the leader had (ms since the epoch), -1 if never.
    pub last_caught_up_timestamp: i64,
}

/// The metadata quorum, as the active controller sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuorumDescription {
    /// The active controller's node id.
    pub leader_id: i32,
    /// Its raft term (Kafka's leader epoch).
    pub leader_epoch: i32,
    /// The commit index (Kafka's high watermark).
    pub high_watermark: i64,
    /// The voters.
    pub voters: Vec<ReplicaDescription>,
    /// Nodes that follow the log without voting.
    pub observers: Vec<ReplicaDescription>,
}

impl Command {
    /// The command's name, for logs.
    pub fn name(&self) -> &'static str {
        match self {
            Command::RegisterBroker(_) => "RegisterBroker",
            Command::BrokerHeartbeat { .. } => "BrokerHeartbeat",
            Command::ControlledShutdown { .. } => "ControlledShutdown",
            Command::CreateTopic { .. } => "CreateTopic",
            Command::DeleteTopic { .. } => "DeleteTopic",
            Command::CreatePartitions { .. } => "CreatePartitions",
            Command::AlterTopicConfigs { .. } => "AlterTopicConfigs",
            Command::AlterBrokerConfigs { .. } => "AlterBrokerConfigs",
            Command::AlterGroupConfigs { .. } => "AlterGroupConfigs",
            Command::CompareAndSetTopicConfig { .. } => "CompareAndSetTopicConfig",
            Command::CreateMirror { .. } => "CreateMirror",
            Command::DeleteMirror { .. } => "DeleteMirror",
            Command::AlterScramCredentials { .. } => "AlterScramCredentials",
            Command::CreateAcls { .. } => "CreateAcls",
            Command::DeleteAcls { .. } => "DeleteAcls",
            Command::EnsureProducerIdFloor { .. } => "EnsureProducerIdFloor",
            Command::AllocateProducerIds => "AllocateProducerIds",
            Command::DescribeQuorum => "DescribeQuorum",
            Command::AlterPartition(_) => "AlterPartition",
            Command::ReplicaOffline(_) => "ReplicaOffline",
            Command::ElectLeaders { .. } => "ElectLeaders",
            Command::AlterReassignments { .. } => "AlterReassignments",
            Command::RaiseLeaderEpoch { .. } => "RaiseLeaderEpoch",
        }
    }
}

/// A successful command's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Reply {
    /// Nothing to report.
    Done,
    /// A topic or mirror id.
    Id(Uuid),
    /// A producer-id block: (first, count).
    ProducerIds(i64, i64),
    /// Per-ACL outcomes of CreateAcls.
    CreatedAcls(Vec<Result<(), WireError>>),
    /// Per-filter outcomes of DeleteAcls.
    DeletedAcls(Vec<Result<Vec<AclBinding>, WireError>>),
    /// The quorum's state.
    Quorum(QuorumDescription),
    /// A partition's ISR and partition epoch after AlterPartition.
    Partition(Vec<i32>, i32),
    /// A partition's leader now.
    Leader(i32),
    /// Per-partition outcomes, in request order.
    PartitionResults(Vec<(crate::controller::TopicPartition, Result<(), WireError>)>),
}

/// An [`ApiError`] on the wire between nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireError {
    /// Kafka error code.
    pub code: i16,
    /// Message.
    pub message: String,
}

impl From<ApiError> for WireError {
    fn from(e: ApiError) -> Self {
        WireError {
            code: e.code(),
            message: e.message,
        }
    }
}

impl From<WireError> for ApiError {
    fn from(e: WireError) -> Self {
        let error =
            ResponseError::try_from_code(e.code).unwrap_or(ResponseError::UnknownServerError);
        ApiError::new(error, e.message)
    }
}

/// A forwarded command.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct CommandRequest {
    /// The forwarding node's cluster id, if it knows it.
    pub cluster_id: Option<String>,
    /// The command.
    pub command: Command,
}

/// The active controller's answer to a forwarded command.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CommandResponse {
    /// The outcome.
    pub result: Result<Reply, WireError>,
    /// The answering controller's image offset after the command: the forwarder waits until
    /// its own image has applied this much before it answers its client.
    pub image_offset: u64,
}
