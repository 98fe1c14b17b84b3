//! The mirror RPC messages as the plain structs Tern's mirror code works with. The wire types
//! are generated from the schemas in `protocol/schemas/mirror` (after the prototype's, aiven/inkless
//! branch inkless-linking; every one version 0 and flexible; LastMirroredOffsets (97) follows the
//! prototype's earlier schema with the offset an int64, since Tern answers with an offset where
//! the prototype kept an epoch); `convert.rs` maps these to and from them. These go away once
//! the users work with the generated types directly.

use uuid::Uuid;

/// Api keys of the mirror RPCs.
pub mod api_keys {
    /// CreateClusterMirror.
    pub const CREATE_CLUSTER_MIRROR: i16 = 94;
    /// StartMirrorTopics (the spec's AddTopicsToMirror).
    pub const START_MIRROR_TOPICS: i16 = 95;
    /// StopMirrorTopics (the spec's RemoveTopicsFromMirror: failover).
    pub const STOP_MIRROR_TOPICS: i16 = 96;
    /// LastMirroredOffsets (failback).
    pub const LAST_MIRRORED_OFFSETS: i16 = 97;
    /// ListClusterMirrors.
    pub const LIST_CLUSTER_MIRRORS: i16 = 98;
    /// DescribeClusterMirrors.
    pub const DESCRIBE_CLUSTER_MIRRORS: i16 = 99;
    /// ReadMirrorStates (broker to mirror coordinator).
    pub const READ_MIRROR_STATES: i16 = 100;
    /// WriteMirrorStates (broker to mirror coordinator).
    pub const WRITE_MIRROR_STATES: i16 = 101;
    /// PauseMirrorTopics.
    pub const PAUSE_MIRROR_TOPICS: i16 = 102;
    /// ResumeMirrorTopics.
    pub const RESUME_MIRROR_TOPICS: i16 = 103;
    /// DeleteClusterMirror.
    pub const DELETE_CLUSTER_MIRROR: i16 = 104;
    /// BumpLeaderEpochs (broker to controller: raise mirror partitions' leader epochs).
    pub const BUMP_LEADER_EPOCHS: i16 = 105;
    /// The lowest mirror api key.
    pub const FIRST: i16 = CREATE_CLUSTER_MIRROR;
    /// The highest mirror api key Tern serves.
    pub const LAST: i16 = BUMP_LEADER_EPOCHS;

    /// The RPC's name, as Kafka names its own (`CreateClusterMirror`).
    pub fn name(key: i16) -> Option<&'static str> {
        Some(match key {
            CREATE_CLUSTER_MIRROR => "CreateClusterMirror",
            START_MIRROR_TOPICS => "StartMirrorTopics",
            STOP_MIRROR_TOPICS => "StopMirrorTopics",
            LAST_MIRRORED_OFFSETS => "LastMirroredOffsets",
            LIST_CLUSTER_MIRRORS => "ListClusterMirrors",
            DESCRIBE_CLUSTER_MIRRORS => "DescribeClusterMirrors",
            READ_MIRROR_STATES => "ReadMirrorStates",
            WRITE_MIRROR_STATES => "WriteMirrorStates",
            PAUSE_MIRROR_TOPICS => "PauseMirrorTopics",
            RESUME_MIRROR_TOPICS => "ResumeMirrorTopics",
            DELETE_CLUSTER_MIRROR => "DeleteClusterMirror",
            BUMP_LEADER_EPOCHS => "BumpLeaderEpochs",
            _ => return None,
        })
    }
}

/// 94 request: define a mirror.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CreateClusterMirrorRequest {
    /// Mirror name.
    pub mirror_name: String,
    /// Mirror configs (name, value).
    pub configs: Vec<(String, Option<String>)>,
}

/// A response with only a top-level error (94, 104).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimpleMirrorResponse {
    /// Throttle time.
    pub throttle_time_ms: i32,
    /// Error code.
    pub error_code: i16,
    /// Error message.
    pub error_message: Option<String>,
}

/// One topic of a StartMirrorTopics request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StartMirrorTopic {
    /// Topic id (zero: learn it from the source).
    pub topic_id: Uuid,
    /// Topic name.
    pub topic_name: String,
    /// Partition count (-1: take the source's).
    pub num_partitions: i32,
}

/// 95 request: start mirroring topics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartMirrorTopicsRequest {
    /// Mirror name.
    pub mirror_name: String,
    /// Topics named explicitly.
    pub topics: Vec<StartMirrorTopic>,
    /// Tagged 0: regexes of source topics to start as well.
    pub include_patterns: Vec<String>,
    /// Tagged 1: regexes of source topics not to start.
    pub exclude_patterns: Vec<String>,
    /// Metadata offset the caller validated at, or -1.
    pub state_validation_offset: i64,
}

impl Default for StartMirrorTopicsRequest {
    fn default() -> Self {
        StartMirrorTopicsRequest {
            mirror_name: String::new(),
            topics: Vec::new(),
            include_patterns: Vec::new(),
            exclude_patterns: Vec::new(),
            state_validation_offset: -1,
        }
    }
}

/// The result for one topic (95, 96, 102, 103).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicResult {
    /// Topic name.
    pub name: String,
    /// Error code.
    pub error_code: i16,
    /// Error message.
    pub error_message: Option<String>,
}

/// Response with per-topic results (95, 96, 102, 103).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicsMirrorResponse {
    /// Throttle time.
    pub throttle_time_ms: i32,
    /// Top-level error code.
    pub error_code: i16,
    /// Top-level error message.
    pub error_message: Option<String>,
    /// Per-topic results.
    pub topics: Vec<TopicResult>,
}

/// 96 (with `patterns`), 102, 103 request: topics of a mirror by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorTopicsRequest {
    /// Mirror name.
    pub mirror_name: String,
    /// Topic names.
    pub topics: Vec<String>,
    /// Tagged 0, StopMirrorTopics only: topic patterns.
    pub patterns: Vec<String>,
    /// Metadata offset the caller validated at, or -1.
    pub state_validation_offset: i64,
}

impl Default for MirrorTopicsRequest {
    fn default() -> Self {
        MirrorTopicsRequest {
            mirror_name: String::new(),
            topics: Vec::new(),
            patterns: Vec::new(),
            state_validation_offset: -1,
        }
    }
}

/// Topic and partitions (97 request, 100 request).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicPartitions {
    /// Topic name.
    pub name: String,
    /// Partition indexes.
    pub partitions: Vec<i32>,
}

/// 97 request: the last mirrored offsets of topics (asked by a failing-back cluster).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LastMirroredOffsetsRequest {
    /// The asking cluster's mirror name.
    pub mirror_name: String,
    /// Topics and partitions.
    pub topics: Vec<TopicPartitions>,
}

/// One partition's last mirrored offset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LastMirroredOffsetPartition {
    /// Partition index.
    pub partition_index: i32,
    /// The offset up to which the partition was mirrored when it was stopped, or -1.
    pub last_mirrored_offset: i64,
    /// Error code (MIRROR_TOPIC_NOT_STOPPED, UNKNOWN_TOPIC_OR_PARTITION, ...).
    pub error_code: i16,
}

/// One topic's last mirrored offsets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LastMirroredOffsetTopic {
    /// Topic name.
    pub name: String,
    /// Partitions.
    pub partitions: Vec<LastMirroredOffsetPartition>,
}

/// 97 response.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LastMirroredOffsetsResponse {
    /// Throttle time.
    pub throttle_time_ms: i32,
    /// Top-level error code.
    pub error_code: i16,
    /// Top-level error message.
    pub error_message: Option<String>,
    /// Per-topic results.
    pub topics: Vec<LastMirroredOffsetTopic>,
}

/// 98 request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListClusterMirrorsRequest {
    /// Whether to list each mirror's topic names.
    pub include_topic_names: bool,
}

/// One mirror in a ListClusterMirrors response.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListedMirror {
    /// Mirror name.
    pub mirror_name: String,
    /// Source bootstrap servers.
    pub source_bootstrap: String,
    /// Source cluster id, or empty.
    pub source_cluster_id: String,
    /// Number of topics in the mirror.
    pub topic_count: i32,
    /// Topic names (when asked for).
    pub topic_names: Vec<String>,
}

/// 98 response.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListClusterMirrorsResponse {
    /// Throttle time.
    pub throttle_time_ms: i32,
    /// Error code.
    pub error_code: i16,
    /// Error message.
    pub error_message: Option<String>,
    /// Mirrors.
    pub mirrors: Vec<ListedMirror>,
}

/// A last-mirror-epoch lookup (99 request, tagged).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LastMirrorEpochLookup {
    /// Topic id.
    pub topic_id: Uuid,
    /// Partitions.
    pub partitions: Vec<i32>,
}

/// 99 request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DescribeClusterMirrorsRequest {
    /// Mirrors to describe; empty means all.
    pub mirror_names: Vec<String>,
    /// Whether to include authorized operations.
    pub include_authorized_operations: bool,
    /// Tagged 0: the asking cluster's id.
    pub cluster_id: Option<String>,
    /// Tagged 1: last-mirror-epoch lookups.
    pub last_mirror_epoch_lookups: Vec<LastMirrorEpochLookup>,
    /// Tagged 2 (Tern): answer only for the partitions this broker leads; brokers set it when
    /// they gather the cluster's view from each other.
    pub local_only: bool,
}

/// One partition of a described mirror.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorPartitionDetail {
    /// Partition index.
    pub partition_index: i32,
    /// Source high watermark, or -1.
    pub source_offset: i64,
    /// Destination log end offset, or -1.
    pub destination_offset: i64,
    /// source - destination, or -1.
    pub lag: i64,
    /// State name (`MIRRORING`, ...).
    pub state_value: String,
    /// Retries while FAILED (-1: not retryable).
    pub retry_attempt: i16,
    /// Last error, if any.
    pub error_message: Option<String>,
}

impl Default for MirrorPartitionDetail {
    fn default() -> Self {
        MirrorPartitionDetail {
            partition_index: 0,
            source_offset: -1,
            destination_offset: -1,
            lag: -1,
            state_value: String::new(),
            retry_attempt: 0,
            error_message: None,
        }
    }
}

/// One topic of a described mirror.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MirrorTopicDetail {
    /// Topic name.
    pub topic_name: String,
    /// Partitions.
    pub partitions: Vec<MirrorPartitionDetail>,
}

/// One described mirror.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedMirror {
    /// Error code.
    pub error_code: i16,
    /// Mirror name.
    pub mirror_name: String,
    /// Authorized operations bitfield (i32::MIN when not asked for).
    pub authorized_operations: i32,
    /// Topics.
    pub topics: Vec<MirrorTopicDetail>,
}

impl Default for DescribedMirror {
    fn default() -> Self {
        DescribedMirror {
            error_code: 0,
            mirror_name: String::new(),
            authorized_operations: i32::MIN,
            topics: Vec::new(),
        }
    }
}

/// One partition's last mirror epoch (99 response, tagged).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LookupPartitionResult {
    /// Partition index.
    pub partition_index: i32,
    /// Last mirror epoch, or -1.
    pub last_mirror_epoch: i32,
}

/// One topic's last mirror epochs (99 response, tagged).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LookupResult {
    /// Topic id.
    pub topic_id: Uuid,
    /// Partitions.
    pub partitions: Vec<LookupPartitionResult>,
}

/// 99 response.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DescribeClusterMirrorsResponse {
    /// Throttle time.
    pub throttle_time_ms: i32,
    /// Error code.
    pub error_code: i16,
    /// Error message.
    pub error_message: Option<String>,
    /// Mirrors.
    pub mirrors: Vec<DescribedMirror>,
    /// Tagged 0: last-mirror-epoch lookup results.
    pub lookup_results: Vec<LookupResult>,
}

/// 100 request: read partition states from the mirror coordinator.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadMirrorStatesRequest {
    /// Mirror name.
    pub mirror_name: String,
    /// Topics and partitions.
    pub topics: Vec<TopicPartitions>,
}

/// One partition's state as the coordinator holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadMirrorStatePartition {
    /// Partition index.
    pub partition_index: i32,
    /// Last mirror epoch, or -1.
    pub last_mirror_epoch: i32,
    /// State id.
    pub state: i8,
    /// Error code.
    pub error_code: i16,
    /// Previous state id.
    pub previous_state: i8,
    /// Retries while FAILED.
    pub retry_attempt: i16,
    /// Error message.
    pub error_message: Option<String>,
    /// Tagged 0 (Tern): the offset recorded when the partition was stopped, or -1.
    pub last_mirrored_offset: i64,
}

impl Default for ReadMirrorStatePartition {
    fn default() -> Self {
        ReadMirrorStatePartition {
            partition_index: 0,
            last_mirror_epoch: -1,
            state: -1,
            error_code: 0,
            previous_state: 16,
            retry_attempt: 0,
            error_message: None,
            last_mirrored_offset: -1,
        }
    }
}

/// One topic of a ReadMirrorStates response.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadMirrorStateTopic {
    /// Topic name.
    pub name: String,
    /// Partitions.
    pub partitions: Vec<ReadMirrorStatePartition>,
}

/// 100 response.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadMirrorStatesResponse {
    /// Throttle time.
    pub throttle_time_ms: i32,
    /// Error code.
    pub error_code: i16,
    /// Error message.
    pub error_message: Option<String>,
    /// Topics.
    pub topics: Vec<ReadMirrorStateTopic>,
}

/// One partition's new state (101 request).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteMirrorStatePartition {
    /// Partition index.
    pub partition_index: i32,
    /// Last mirror epoch, or -1.
    pub last_mirror_epoch: i32,
    /// State id.
    pub state: i8,
    /// Tagged 0 (Tern): retries while FAILED.
    pub retry_attempt: i16,
    /// Tagged 1 (Tern): the error that made the partition FAILED.
    pub error_message: Option<String>,
    /// Tagged 2 (Tern): the offset to record as last mirrored, or -1 to keep the recorded one.
    pub last_mirrored_offset: i64,
    /// Tagged 3 (Tern): the state before this one as the writer sees it, or -1 for the
    /// coordinator's current state.
    pub previous_state: i8,
    /// Tagged 4 (Tern): the writer's leader epoch of this partition, or -1; a lower epoch
    /// than the partition's current one is refused (FENCED_LEADER_EPOCH).
    pub leader_epoch: i32,
}

impl Default for WriteMirrorStatePartition {
    fn default() -> Self {
        WriteMirrorStatePartition {
            partition_index: 0,
            last_mirror_epoch: -1,
            state: -1,
            retry_attempt: 0,
            error_message: None,
            last_mirrored_offset: -1,
            previous_state: -1,
            leader_epoch: -1,
        }
    }
}

/// One topic of a WriteMirrorStates request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteMirrorStateTopic {
    /// Topic name.
    pub name: String,
    /// Partitions.
    pub partitions: Vec<WriteMirrorStatePartition>,
}

/// 101 request: write partition states to the mirror coordinator.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteMirrorStatesRequest {
    /// Mirror name.
    pub mirror_name: String,
    /// Topics.
    pub topics: Vec<WriteMirrorStateTopic>,
    /// Topics to be stopped.
    pub stopped_topics: Vec<String>,
}

/// One partition's write result.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteMirrorStatePartitionResult {
    /// Partition index.
    pub partition_index: i32,
    /// Error code.
    pub error_code: i16,
    /// Error message.
    pub error_message: Option<String>,
}

/// One topic's write results.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteMirrorStateTopicResult {
    /// Topic name.
    pub name: String,
    /// Partitions.
    pub partitions: Vec<WriteMirrorStatePartitionResult>,
}

/// 101 response.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteMirrorStatesResponse {
    /// Throttle time.
    pub throttle_time_ms: i32,
    /// Error code.
    pub error_code: i16,
    /// Error message.
    pub error_message: Option<String>,
    /// Topics.
    pub topics: Vec<WriteMirrorStateTopicResult>,
}

/// 104 request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteClusterMirrorRequest {
    /// Mirror name.
    pub mirror_name: String,
    /// Metadata offset the caller validated at, or -1.
    pub state_validation_offset: i64,
}

impl Default for DeleteClusterMirrorRequest {
    fn default() -> Self {
        DeleteClusterMirrorRequest {
            mirror_name: String::new(),
            state_validation_offset: -1,
        }
    }
}

/// One partition of a BumpLeaderEpochs request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BumpLeaderEpochPartition {
    /// Partition index.
    pub partition_index: i32,
    /// The epoch the partition's leader epoch must reach at least.
    pub min_leader_epoch: i32,
}

/// One topic of a BumpLeaderEpochs request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BumpLeaderEpochTopic {
    /// Topic id.
    pub topic_id: Uuid,
    /// Partitions.
    pub partitions: Vec<BumpLeaderEpochPartition>,
}

/// 105 request: raise the leader epochs of mirror partitions to at least a minimum (the source's
/// epoch of a mirrored batch), so every broker of the cluster agrees on them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BumpLeaderEpochsRequest {
    /// Topics.
    pub topics: Vec<BumpLeaderEpochTopic>,
}

/// One partition's BumpLeaderEpochs result.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BumpLeaderEpochPartitionResult {
    /// Partition index.
    pub partition_index: i32,
    /// Error code.
    pub error_code: i16,
}

/// One topic's BumpLeaderEpochs results.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BumpLeaderEpochTopicResult {
    /// Topic name (empty when the topic id is unknown).
    pub topic_name: String,
    /// Partitions.
    pub partitions: Vec<BumpLeaderEpochPartitionResult>,
}

/// 105 response (no top-level error message in its schema).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BumpLeaderEpochsResponse {
    /// Throttle time.
    pub throttle_time_ms: i32,
    /// Error code.
    pub error_code: i16,
    /// Topics.
    pub topics: Vec<BumpLeaderEpochTopicResult>,
}

/// A decoded mirror request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MirrorRequest {
    /// 94.
    CreateClusterMirror(CreateClusterMirrorRequest),
    /// 95.
    StartMirrorTopics(StartMirrorTopicsRequest),
    /// 96.
    StopMirrorTopics(MirrorTopicsRequest),
    /// 97.
    LastMirroredOffsets(LastMirroredOffsetsRequest),
    /// 98.
    ListClusterMirrors(ListClusterMirrorsRequest),
    /// 99.
    DescribeClusterMirrors(DescribeClusterMirrorsRequest),
    /// 100.
    ReadMirrorStates(ReadMirrorStatesRequest),
    /// 101.
    WriteMirrorStates(WriteMirrorStatesRequest),
    /// 102.
    PauseMirrorTopics(MirrorTopicsRequest),
    /// 103.
    ResumeMirrorTopics(MirrorTopicsRequest),
    /// 104.
    DeleteClusterMirror(DeleteClusterMirrorRequest),
    /// 105.
    BumpLeaderEpochs(BumpLeaderEpochsRequest),
}

/// A mirror response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MirrorResponse {
    /// 94.
    CreateClusterMirror(SimpleMirrorResponse),
    /// 95.
    StartMirrorTopics(TopicsMirrorResponse),
    /// 96.
    StopMirrorTopics(TopicsMirrorResponse),
    /// 97.
    LastMirroredOffsets(LastMirroredOffsetsResponse),
    /// 98.
    ListClusterMirrors(ListClusterMirrorsResponse),
    /// 99.
    DescribeClusterMirrors(DescribeClusterMirrorsResponse),
    /// 100.
    ReadMirrorStates(ReadMirrorStatesResponse),
    /// 101.
    WriteMirrorStates(WriteMirrorStatesResponse),
    /// 102.
    PauseMirrorTopics(TopicsMirrorResponse),
    /// 103.
    ResumeMirrorTopics(TopicsMirrorResponse),
    /// 104.
    DeleteClusterMirror(SimpleMirrorResponse),
    /// 105.
    BumpLeaderEpochs(BumpLeaderEpochsResponse),
}

impl MirrorRequest {
    /// The request's api key.
    pub fn api_key(&self) -> i16 {
        use api_keys::*;
        match self {
            MirrorRequest::CreateClusterMirror(_) => CREATE_CLUSTER_MIRROR,
            MirrorRequest::StartMirrorTopics(_) => START_MIRROR_TOPICS,
            MirrorRequest::StopMirrorTopics(_) => STOP_MIRROR_TOPICS,
            MirrorRequest::LastMirroredOffsets(_) => LAST_MIRRORED_OFFSETS,
            MirrorRequest::ListClusterMirrors(_) => LIST_CLUSTER_MIRRORS,
            MirrorRequest::DescribeClusterMirrors(_) => DESCRIBE_CLUSTER_MIRRORS,
            MirrorRequest::ReadMirrorStates(_) => READ_MIRROR_STATES,
            MirrorRequest::WriteMirrorStates(_) => WRITE_MIRROR_STATES,
            MirrorRequest::PauseMirrorTopics(_) => PAUSE_MIRROR_TOPICS,
            MirrorRequest::ResumeMirrorTopics(_) => RESUME_MIRROR_TOPICS,
            MirrorRequest::DeleteClusterMirror(_) => DELETE_CLUSTER_MIRROR,
            MirrorRequest::BumpLeaderEpochs(_) => BUMP_LEADER_EPOCHS,
        }
    }
}
