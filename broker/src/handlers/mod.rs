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
pub mod describe_cluster;
pub mod describe_configs;
pub mod fetch;
pub mod init_producer_id;
pub mod list_offsets;
pub mod metadata;
pub mod offset_for_leader_epoch;
pub mod produce;

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
];

/// Whether `version` of `key` is served.
pub fn is_supported(key: ApiKey, version: i16) -> bool {
    SUPPORTED_APIS
        .iter()
        .any(|(k, min, max)| *k == key && (*min..=*max).contains(&version))
}

/// Handles one request; `None` means no response is sent.
pub async fn handle(broker: &Broker, req: DecodedRequest) -> Option<ResponseKind> {
    let version = req.header.request_api_version;
    let response = match req.body {
        RequestKind::ApiVersions(r) => ResponseKind::ApiVersions(api_versions::handle(r, version)),
        RequestKind::Metadata(r) => ResponseKind::Metadata(metadata::handle(broker, r, version)),
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
            ResponseKind::DescribeCluster(describe_cluster::handle(broker, r))
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
