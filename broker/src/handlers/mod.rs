//! One module per Kafka API. `handle` dispatches a decoded request to its handler.

use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use kafka_protocol::protocol::StrBytes;
use tern_protocol::api::DecodedRequest;

use crate::broker::Broker;

pub mod alter_configs;
pub mod api_versions;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_client_quotas;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_topic_partitions;
pub mod fetch;
pub mod group_admin;
pub mod groups;
pub mod init_producer_id;
pub mod list_offsets;
pub mod metadata;
pub mod mirror;
pub mod offset_for_leader_epoch;
pub mod offsets;
pub mod produce;
pub mod scram_credentials;

/// The APIs and version ranges this broker serves.
pub const SUPPORTED_APIS: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 12),
    (ApiKey::Fetch, 4, 16),
    (ApiKey::ListOffsets, 1, 9),
    (ApiKey::Metadata, 0, 12),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::InitProducerId, 0, 5),
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::DescribeCluster, 0, 1),
    (ApiKey::FindCoordinator, 0, 6),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::OffsetCommit, 2, 9),
    (ApiKey::OffsetFetch, 1, 9),
    (ApiKey::OffsetDelete, 0, 0),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::DescribeGroups, 0, 5),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::DescribeTopicPartitions, 0, 0),
    (ApiKey::SaslHandshake, 0, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
    (ApiKey::DescribeClientQuotas, 0, 1),
    (ApiKey::DescribeUserScramCredentials, 0, 0),
    (ApiKey::AlterUserScramCredentials, 0, 0),
];

/// Who sent a request.
pub struct RequestContext {
    /// The client id from the request header.
    pub client_id: String,
    /// The peer address as Kafka shows it (`/127.0.0.1`).
    pub client_host: String,
    /// The listener the request came in on (brokers are advertised by its endpoints).
    pub listener: String,
}

/// Whether `version` of `key` is served.
pub fn is_supported(key: ApiKey, version: i16) -> bool {
    SUPPORTED_APIS
        .iter()
        .any(|(k, min, max)| *k == key && (*min..=*max).contains(&version))
}

/// Handles one request; `None` means no response is sent.
pub async fn handle(
    broker: &Broker,
    peer: std::net::SocketAddr,
    listener: &str,
    req: DecodedRequest,
) -> Option<ResponseKind> {
    let version = req.header.request_api_version;
    let ctx = RequestContext {
        client_id: req
            .header
            .client_id
            .as_ref()
            .map(|c| c.to_string())
            .unwrap_or_default(),
        client_host: format!("/{}", peer.ip()),
        listener: listener.to_string(),
    };
    let response = match req.body {
        RequestKind::ApiVersions(r) => ResponseKind::ApiVersions(api_versions::handle(r, version)),
        RequestKind::Metadata(r) => {
            ResponseKind::Metadata(metadata::handle(broker, &ctx, r, version))
        }
        RequestKind::Produce(r) => ResponseKind::Produce(produce::handle(broker, r, version).await),
        RequestKind::Fetch(r) => ResponseKind::Fetch(fetch::handle(broker, r, version).await),
        RequestKind::ListOffsets(r) => {
            ResponseKind::ListOffsets(list_offsets::handle(broker, r, version))
        }
        RequestKind::CreateTopics(r) => {
            ResponseKind::CreateTopics(create_topics::handle(broker, r, version))
        }
        RequestKind::DeleteTopics(r) => {
            ResponseKind::DeleteTopics(delete_topics::handle(broker, r, version))
        }
        RequestKind::CreatePartitions(r) => {
            ResponseKind::CreatePartitions(create_partitions::handle(broker, r))
        }
        RequestKind::DeleteRecords(r) => {
            ResponseKind::DeleteRecords(delete_records::handle(broker, r))
        }
        RequestKind::InitProducerId(r) => {
            ResponseKind::InitProducerId(init_producer_id::handle(broker, r))
        }
        RequestKind::OffsetForLeaderEpoch(r) => {
            ResponseKind::OffsetForLeaderEpoch(offset_for_leader_epoch::handle(broker, r))
        }
        RequestKind::DescribeConfigs(r) => {
            ResponseKind::DescribeConfigs(describe_configs::handle(broker, r, version))
        }
        RequestKind::AlterConfigs(r) => {
            ResponseKind::AlterConfigs(alter_configs::handle_legacy(broker, r))
        }
        RequestKind::IncrementalAlterConfigs(r) => {
            ResponseKind::IncrementalAlterConfigs(alter_configs::handle_incremental(broker, r))
        }
        RequestKind::DescribeCluster(r) => {
            ResponseKind::DescribeCluster(describe_cluster::handle(broker, &ctx, r))
        }
        RequestKind::FindCoordinator(r) => {
            ResponseKind::FindCoordinator(groups::find_coordinator(broker, &ctx, r, version))
        }
        RequestKind::JoinGroup(r) => {
            ResponseKind::JoinGroup(groups::join_group(broker, &ctx, r, version).await)
        }
        RequestKind::SyncGroup(r) => ResponseKind::SyncGroup(groups::sync_group(broker, r).await),
        RequestKind::Heartbeat(r) => ResponseKind::Heartbeat(groups::heartbeat(broker, r)),
        RequestKind::LeaveGroup(r) => {
            ResponseKind::LeaveGroup(groups::leave_group(broker, r, version))
        }
        RequestKind::OffsetCommit(r) => {
            ResponseKind::OffsetCommit(offsets::offset_commit(broker, r))
        }
        RequestKind::OffsetFetch(r) => {
            ResponseKind::OffsetFetch(offsets::offset_fetch(broker, r, version))
        }
        RequestKind::OffsetDelete(r) => {
            ResponseKind::OffsetDelete(offsets::offset_delete(broker, r))
        }
        RequestKind::ListGroups(r) => ResponseKind::ListGroups(group_admin::list_groups(broker, r)),
        RequestKind::DescribeGroups(r) => {
            ResponseKind::DescribeGroups(group_admin::describe_groups(broker, r))
        }
        RequestKind::DeleteGroups(r) => {
            ResponseKind::DeleteGroups(group_admin::delete_groups(broker, r))
        }
        RequestKind::DescribeTopicPartitions(r) => {
            ResponseKind::DescribeTopicPartitions(describe_topic_partitions::handle(broker, r))
        }
        RequestKind::DescribeClientQuotas(r) => {
            ResponseKind::DescribeClientQuotas(describe_client_quotas::handle(r))
        }
        RequestKind::AlterUserScramCredentials(r) => {
            ResponseKind::AlterUserScramCredentials(scram_credentials::alter(broker, r))
        }
        RequestKind::DescribeUserScramCredentials(r) => {
            ResponseKind::DescribeUserScramCredentials(scram_credentials::describe(broker, r))
        }
        other => {
            tracing::warn!(request = ?std::mem::discriminant(&other), "no handler");
            return None;
        }
    };
    Some(response)
}

/// A `StrBytes` from an owned string.
pub(crate) fn sb(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}
