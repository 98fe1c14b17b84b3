//! One module per Kafka API. `handle` dispatches a decoded request to its handler.

use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use kafka_protocol::protocol::StrBytes;
use tern_protocol::api::DecodedRequest;

use std::sync::Arc;

use tern_controller::acls::{AclOperation, AclResourceType, CLUSTER_RESOURCE_NAME};
use tern_controller::MetadataImage;

use crate::broker::Broker;
use crate::security::authenticator::ANONYMOUS;
use crate::security::authorizer::Authorizer;

pub(crate) mod acls;
pub(crate) mod alter_configs;
mod api_error_fields;
pub mod api_versions;
pub(crate) mod consumer_groups;
pub(crate) mod create_partitions;
pub(crate) mod create_topics;
pub(crate) mod delete_records;
pub(crate) mod delete_topics;
pub(crate) mod describe_client_quotas;
pub(crate) mod describe_cluster;
pub(crate) mod describe_configs;
pub(crate) mod describe_quorum;
pub(crate) mod describe_topic_partitions;
pub(crate) mod elect_leaders;
pub(crate) mod fetch;
pub(crate) mod group_admin;
pub(crate) mod groups;
pub(crate) mod init_producer_id;
pub(crate) mod list_config_resources;
pub(crate) mod list_offsets;
pub(crate) mod log_dirs;
pub(crate) mod metadata;
pub(crate) mod mirror;
pub(crate) mod offset_for_leader_epoch;
pub(crate) mod offsets;
pub(crate) mod produce;
pub(crate) mod reassignments;
pub(crate) mod scram_credentials;
pub(crate) mod share_consumers;
pub(crate) mod share_groups;
pub(crate) mod share_state;
pub(crate) mod transaction_admin;
pub(crate) mod transactions;

/// The APIs and version ranges this broker serves.
pub const SUPPORTED_APIS: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 13),
    (ApiKey::Fetch, 4, 18),
    (ApiKey::ListOffsets, 1, 11),
    (ApiKey::Metadata, 0, 13),
    (ApiKey::ApiVersions, 0, 5),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::InitProducerId, 0, 5),
    (ApiKey::AddPartitionsToTxn, 0, 5),
    (ApiKey::AddOffsetsToTxn, 0, 4),
    (ApiKey::EndTxn, 0, 5),
    (ApiKey::WriteTxnMarkers, 1, 2),
    (ApiKey::TxnOffsetCommit, 0, 6),
    (ApiKey::DescribeProducers, 0, 0),
    (ApiKey::DescribeTransactions, 0, 0),
    (ApiKey::ListTransactions, 0, 2),
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::DescribeCluster, 0, 2),
    (ApiKey::DescribeQuorum, 0, 2),
    (ApiKey::FindCoordinator, 0, 6),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::OffsetCommit, 2, 10),
    (ApiKey::OffsetFetch, 1, 10),
    (ApiKey::OffsetDelete, 0, 0),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::DescribeGroups, 0, 6),
    (ApiKey::DeleteGroups, 0, 3),
    (ApiKey::ConsumerGroupHeartbeat, 0, 1),
    (ApiKey::ConsumerGroupDescribe, 0, 1),
    (ApiKey::ShareGroupHeartbeat, 1, 1),
    (ApiKey::ShareGroupDescribe, 1, 1),
    (ApiKey::ShareFetch, 1, 2),
    (ApiKey::ShareAcknowledge, 1, 2),
    (ApiKey::DescribeShareGroupOffsets, 0, 1),
    (ApiKey::AlterShareGroupOffsets, 0, 0),
    (ApiKey::DeleteShareGroupOffsets, 0, 0),
    // Between brokers: share-partition leaders and their groups' coordinators.
    (ApiKey::WriteShareGroupState, 0, 1),
    (ApiKey::ReadShareGroupStateSummary, 0, 1),
    (ApiKey::DescribeTopicPartitions, 0, 0),
    (ApiKey::SaslHandshake, 0, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
    (ApiKey::DescribeClientQuotas, 0, 1),
    (ApiKey::DescribeUserScramCredentials, 0, 0),
    (ApiKey::AlterUserScramCredentials, 0, 0),
    (ApiKey::DescribeAcls, 0, 3),
    (ApiKey::CreateAcls, 0, 3),
    (ApiKey::DeleteAcls, 0, 3),
    (ApiKey::ElectLeaders, 0, 2),
    (ApiKey::AlterPartitionReassignments, 0, 1),
    (ApiKey::ListPartitionReassignments, 0, 0),
    (ApiKey::DescribeLogDirs, 1, 5),
    (ApiKey::AlterReplicaLogDirs, 1, 2),
    (ApiKey::ListConfigResources, 0, 1),
    // Tern's cluster-mirroring RPCs (protocol/schemas/mirror).
    (ApiKey::CreateClusterMirror, 0, 0),
    (ApiKey::StartMirrorTopics, 0, 0),
    (ApiKey::StopMirrorTopics, 0, 0),
    (ApiKey::LastMirroredOffsets, 0, 0),
    (ApiKey::ListClusterMirrors, 0, 0),
    (ApiKey::DescribeClusterMirrors, 0, 0),
    (ApiKey::ReadMirrorStates, 0, 0),
    (ApiKey::WriteMirrorStates, 0, 0),
    (ApiKey::PauseMirrorTopics, 0, 0),
    (ApiKey::ResumeMirrorTopics, 0, 0),
    (ApiKey::DeleteClusterMirror, 0, 0),
    (ApiKey::BumpLeaderEpochs, 0, 0),
];

/// Who sent a request.
pub(crate) struct RequestContext {
    /// The client id from the request header.
    pub client_id: String,
    /// The peer address as Kafka shows it (`/127.0.0.1`).
    pub client_host: String,
    /// The authenticated principal (`User:alice`; `User:ANONYMOUS` without authentication).
    pub principal: String,
    /// The peer's IP address as ACLs name hosts (`127.0.0.1`).
    pub host: String,
    /// The listener the request came in on (brokers are advertised by its endpoints).
    pub listener: String,
    /// This broker's number for the connection (share sessions end with it).
    pub connection_id: u64,
}

impl RequestContext {
    /// The context of a request from `peer` on `listener` by `principal` (None: not
    /// authenticated).
    pub(crate) fn new(
        peer: std::net::SocketAddr,
        listener: &str,
        principal: Option<&str>,
        client_id: String,
        connection_id: u64,
    ) -> Self {
        RequestContext {
            connection_id,
            client_id,
            client_host: format!("/{}", peer.ip()),
            principal: principal.unwrap_or(ANONYMOUS).to_string(),
            host: peer.ip().to_string(),
            listener: listener.to_string(),
        }
    }

    /// Authorization decisions for this request, against the current metadata image.
    pub(crate) fn authz<'a>(&'a self, broker: &'a Broker) -> Authz<'a> {
        Authz {
            authorizer: broker.config.authorizer.as_ref(),
            image: broker.controller.image(),
            ctx: self,
        }
    }
}

/// Answers whether the request's principal may do something, as Kafka's AuthHelper does:
/// everything is allowed when no authorizer is configured.
pub(crate) struct Authz<'a> {
    authorizer: Option<&'a Authorizer>,
    image: Arc<MetadataImage>,
    ctx: &'a RequestContext,
}

impl Authz<'_> {
    /// Whether an authorizer is configured.
    pub(crate) fn enabled(&self) -> bool {
        self.authorizer.is_some()
    }

    /// May the principal perform `op` on the resource?
    pub(crate) fn allows(
        &self,
        op: AclOperation,
        resource_type: AclResourceType,
        name: &str,
    ) -> bool {
        self.authorizer.is_none_or(|a| {
            a.authorize(
                &self.image,
                &self.ctx.principal,
                &self.ctx.host,
                op,
                resource_type,
                name,
            )
        })
    }

    /// May the principal perform `op` on the cluster?
    pub(crate) fn cluster(&self, op: AclOperation) -> bool {
        self.allows(op, AclResourceType::Cluster, CLUSTER_RESOURCE_NAME)
    }

    /// May the principal perform `op` on the topic?
    pub(crate) fn topic(&self, op: AclOperation, name: &str) -> bool {
        self.allows(op, AclResourceType::Topic, name)
    }

    /// May the principal perform `op` on the group?
    pub(crate) fn group(&self, op: AclOperation, name: &str) -> bool {
        self.allows(op, AclResourceType::Group, name)
    }

    /// May the principal perform `op` on some resource of this type?
    pub(crate) fn any_of_type(&self, op: AclOperation, resource_type: AclResourceType) -> bool {
        self.authorizer.is_none_or(|a| {
            a.authorize_any(
                &self.image,
                &self.ctx.principal,
                &self.ctx.host,
                op,
                resource_type,
            )
        })
    }
}

/// Whether `version` of `key` is served.
pub fn is_supported(key: ApiKey, version: i16) -> bool {
    SUPPORTED_APIS
        .iter()
        .any(|(k, min, max)| *k == key && (*min..=*max).contains(&version))
}

/// What a handler answers.
pub(crate) enum Response {
    /// A response message, encoded whole.
    Message(ResponseKind),
    /// A Fetch response whose records are still in log files until the writer sends them.
    Fetch(fetch::FetchReply),
}

/// Handles one request from `principal` (None: not authenticated); `None` means no response
/// is sent.
pub(crate) async fn handle(
    broker: &Broker,
    peer: std::net::SocketAddr,
    listener: &str,
    principal: Option<&str>,
    req: DecodedRequest,
    connection_id: u64,
) -> Option<Response> {
    let version = req.header.request_api_version;
    let client_id = req
        .header
        .client_id
        .as_ref()
        .map(|c| c.to_string())
        .unwrap_or_default();
    let ctx = RequestContext::new(peer, listener, principal, client_id, connection_id);
    let response = match req.body {
        RequestKind::ApiVersions(r) => ResponseKind::ApiVersions(api_versions::handle(
            r,
            version,
            &broker.cluster_id,
            broker.config.node_id,
        )),
        RequestKind::Metadata(r) => {
            ResponseKind::Metadata(metadata::handle(broker, &ctx, r, version))
        }
        RequestKind::Produce(r) => {
            ResponseKind::Produce(produce::handle(broker, &ctx, r, version).await)
        }
        RequestKind::Fetch(r) => {
            return Some(Response::Fetch(
                fetch::handle(broker, &ctx, r, version).await,
            ))
        }
        RequestKind::ListOffsets(r) => {
            ResponseKind::ListOffsets(list_offsets::handle(broker, &ctx, r, version))
        }
        RequestKind::CreateTopics(r) => {
            ResponseKind::CreateTopics(create_topics::handle(broker, &ctx, r, version))
        }
        RequestKind::DeleteTopics(r) => {
            ResponseKind::DeleteTopics(delete_topics::handle(broker, &ctx, r, version))
        }
        RequestKind::ElectLeaders(r) => {
            ResponseKind::ElectLeaders(elect_leaders::handle(broker, &ctx, r, version))
        }
        RequestKind::AlterPartitionReassignments(r) => {
            ResponseKind::AlterPartitionReassignments(reassignments::alter(broker, &ctx, r))
        }
        RequestKind::ListPartitionReassignments(r) => {
            ResponseKind::ListPartitionReassignments(reassignments::list(broker, &ctx, r))
        }
        RequestKind::DescribeLogDirs(r) => {
            ResponseKind::DescribeLogDirs(log_dirs::describe(broker, &ctx, r, version))
        }
        RequestKind::AlterReplicaLogDirs(r) => {
            ResponseKind::AlterReplicaLogDirs(log_dirs::alter(broker, &ctx, r))
        }
        RequestKind::CreatePartitions(r) => {
            ResponseKind::CreatePartitions(create_partitions::handle(broker, &ctx, r))
        }
        RequestKind::DeleteRecords(r) => {
            ResponseKind::DeleteRecords(delete_records::handle(broker, &ctx, r))
        }
        RequestKind::InitProducerId(r) => {
            ResponseKind::InitProducerId(init_producer_id::handle(broker, &ctx, r, version).await)
        }
        RequestKind::AddPartitionsToTxn(r) => ResponseKind::AddPartitionsToTxn(
            transactions::add_partitions_to_txn(broker, &ctx, r, version).await,
        ),
        RequestKind::AddOffsetsToTxn(r) => ResponseKind::AddOffsetsToTxn(
            transactions::add_offsets_to_txn(broker, &ctx, r, version).await,
        ),
        RequestKind::EndTxn(r) => {
            ResponseKind::EndTxn(transactions::end_txn(broker, &ctx, r, version).await)
        }
        RequestKind::TxnOffsetCommit(r) => ResponseKind::TxnOffsetCommit(
            transactions::txn_offset_commit(broker, &ctx, r, version).await,
        ),
        RequestKind::DescribeTransactions(r) => ResponseKind::DescribeTransactions(
            transaction_admin::describe_transactions(broker, &ctx, r),
        ),
        RequestKind::ListTransactions(r) => {
            ResponseKind::ListTransactions(transaction_admin::list_transactions(broker, &ctx, r))
        }
        RequestKind::DescribeProducers(r) => {
            ResponseKind::DescribeProducers(transaction_admin::describe_producers(broker, &ctx, r))
        }
        RequestKind::WriteTxnMarkers(r) => {
            ResponseKind::WriteTxnMarkers(transactions::write_txn_markers(broker, &ctx, r).await)
        }
        RequestKind::OffsetForLeaderEpoch(r) => {
            ResponseKind::OffsetForLeaderEpoch(offset_for_leader_epoch::handle(broker, &ctx, r))
        }
        RequestKind::ListConfigResources(r) => ResponseKind::ListConfigResources(
            list_config_resources::handle(broker, &ctx, r, version),
        ),
        RequestKind::DescribeConfigs(r) => {
            ResponseKind::DescribeConfigs(describe_configs::handle(broker, &ctx, r, version))
        }
        RequestKind::AlterConfigs(r) => {
            ResponseKind::AlterConfigs(alter_configs::handle_legacy(broker, &ctx, r))
        }
        RequestKind::IncrementalAlterConfigs(r) => ResponseKind::IncrementalAlterConfigs(
            alter_configs::handle_incremental(broker, &ctx, r),
        ),
        RequestKind::DescribeCluster(r) => {
            ResponseKind::DescribeCluster(describe_cluster::handle(broker, &ctx, r))
        }
        RequestKind::DescribeQuorum(r) => {
            ResponseKind::DescribeQuorum(describe_quorum::handle(broker, &ctx, r, version))
        }
        RequestKind::FindCoordinator(r) => {
            ResponseKind::FindCoordinator(groups::find_coordinator(broker, &ctx, r, version))
        }
        RequestKind::JoinGroup(r) => {
            ResponseKind::JoinGroup(groups::join_group(broker, &ctx, r, version).await)
        }
        RequestKind::SyncGroup(r) => {
            ResponseKind::SyncGroup(groups::sync_group(broker, &ctx, r).await)
        }
        RequestKind::Heartbeat(r) => ResponseKind::Heartbeat(groups::heartbeat(broker, &ctx, r)),
        RequestKind::LeaveGroup(r) => {
            ResponseKind::LeaveGroup(groups::leave_group(broker, &ctx, r, version))
        }
        RequestKind::OffsetCommit(r) => {
            ResponseKind::OffsetCommit(offsets::offset_commit(broker, &ctx, r, version).await)
        }
        RequestKind::OffsetFetch(r) => {
            ResponseKind::OffsetFetch(offsets::offset_fetch(broker, &ctx, r, version))
        }
        RequestKind::OffsetDelete(r) => {
            ResponseKind::OffsetDelete(offsets::offset_delete(broker, &ctx, r))
        }
        RequestKind::ListGroups(r) => {
            ResponseKind::ListGroups(group_admin::list_groups(broker, &ctx, r))
        }
        RequestKind::DescribeGroups(r) => {
            ResponseKind::DescribeGroups(group_admin::describe_groups(broker, &ctx, r, version))
        }
        RequestKind::ConsumerGroupHeartbeat(r) => ResponseKind::ConsumerGroupHeartbeat(
            consumer_groups::heartbeat(broker, &ctx, r, version),
        ),
        RequestKind::ConsumerGroupDescribe(r) => {
            ResponseKind::ConsumerGroupDescribe(consumer_groups::describe(broker, &ctx, r, version))
        }
        RequestKind::ShareGroupHeartbeat(r) => {
            ResponseKind::ShareGroupHeartbeat(share_consumers::heartbeat(broker, &ctx, r))
        }
        RequestKind::ShareFetch(r) => {
            ResponseKind::ShareFetch(share_consumers::fetch(broker, &ctx, r, version).await)
        }
        RequestKind::ShareAcknowledge(r) => ResponseKind::ShareAcknowledge(
            share_consumers::acknowledge(broker, &ctx, r, version).await,
        ),
        RequestKind::ReadShareGroupStateSummary(r) => {
            ResponseKind::ReadShareGroupStateSummary(share_state::read_summary(broker, &ctx, r))
        }
        RequestKind::WriteShareGroupState(r) => {
            ResponseKind::WriteShareGroupState(share_state::write(broker, &ctx, r))
        }
        RequestKind::ShareGroupDescribe(r) => {
            ResponseKind::ShareGroupDescribe(share_groups::describe(broker, &ctx, r))
        }
        RequestKind::DescribeShareGroupOffsets(r) => ResponseKind::DescribeShareGroupOffsets(
            share_groups::describe_offsets(broker, &ctx, r).await,
        ),
        RequestKind::AlterShareGroupOffsets(r) => {
            ResponseKind::AlterShareGroupOffsets(share_groups::alter_offsets(broker, &ctx, r))
        }
        RequestKind::DeleteShareGroupOffsets(r) => {
            ResponseKind::DeleteShareGroupOffsets(share_groups::delete_offsets(broker, &ctx, r))
        }
        RequestKind::DeleteGroups(r) => {
            ResponseKind::DeleteGroups(group_admin::delete_groups(broker, &ctx, r))
        }
        RequestKind::DescribeTopicPartitions(r) => ResponseKind::DescribeTopicPartitions(
            describe_topic_partitions::handle(broker, &ctx, r),
        ),
        RequestKind::DescribeClientQuotas(r) => {
            ResponseKind::DescribeClientQuotas(describe_client_quotas::handle(broker, &ctx, r))
        }
        RequestKind::AlterUserScramCredentials(r) => {
            ResponseKind::AlterUserScramCredentials(scram_credentials::alter(broker, &ctx, r))
        }
        RequestKind::DescribeUserScramCredentials(r) => {
            ResponseKind::DescribeUserScramCredentials(scram_credentials::describe(broker, &ctx, r))
        }
        RequestKind::CreateAcls(r) => {
            ResponseKind::CreateAcls(acls::create(broker, &ctx, r, version))
        }
        RequestKind::DescribeAcls(r) => {
            ResponseKind::DescribeAcls(acls::describe(broker, &ctx, r, version))
        }
        RequestKind::DeleteAcls(r) => {
            ResponseKind::DeleteAcls(acls::delete(broker, &ctx, r, version))
        }
        body @ (RequestKind::CreateClusterMirror(_)
        | RequestKind::StartMirrorTopics(_)
        | RequestKind::StopMirrorTopics(_)
        | RequestKind::LastMirroredOffsets(_)
        | RequestKind::ListClusterMirrors(_)
        | RequestKind::DescribeClusterMirrors(_)
        | RequestKind::ReadMirrorStates(_)
        | RequestKind::WriteMirrorStates(_)
        | RequestKind::PauseMirrorTopics(_)
        | RequestKind::ResumeMirrorTopics(_)
        | RequestKind::DeleteClusterMirror(_)
        | RequestKind::BumpLeaderEpochs(_)) => mirror::handle(broker, &ctx, body).await?,
        other => {
            tracing::warn!(request = ?std::mem::discriminant(&other), "no handler");
            return None;
        }
    };
    Some(Response::Message(response))
}

/// A `StrBytes` from an owned string.
pub(crate) fn sb(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

/// The operations Kafka lists for a resource type in authorized-operations bit fields.
fn supported_operations(resource_type: AclResourceType) -> &'static [AclOperation] {
    use AclOperation::*;
    match resource_type {
        AclResourceType::Topic => &[
            Read,
            Write,
            Create,
            Describe,
            Delete,
            Alter,
            DescribeConfigs,
            AlterConfigs,
        ],
        AclResourceType::Group => &[Read, Describe, Delete, DescribeConfigs, AlterConfigs],
        AclResourceType::Cluster => &[
            Create,
            ClusterAction,
            DescribeConfigs,
            AlterConfigs,
            IdempotentWrite,
            Alter,
            Describe,
        ],
        AclResourceType::TransactionalId => &[Describe, Write, TwoPhaseCommit],
        AclResourceType::DelegationToken => &[Describe],
        AclResourceType::User => &[CreateTokens, DescribeTokens],
        AclResourceType::ClusterMirror => &[
            Create,
            Alter,
            Describe,
            Delete,
            AlterConfigs,
            DescribeConfigs,
        ],
        _ => &[],
    }
}

impl Authz<'_> {
    /// The bit field of operations the principal may perform on the resource (bit n set:
    /// operation code n allowed), as Kafka's `authorizedOperations` answers it.
    pub(crate) fn authorized_operations(&self, resource_type: AclResourceType, name: &str) -> i32 {
        supported_operations(resource_type)
            .iter()
            .filter(|op| self.allows(**op, resource_type, name))
            .fold(0, |bits, op| bits | (1 << op.code()))
    }
}
