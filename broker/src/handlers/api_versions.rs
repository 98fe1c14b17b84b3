//! ApiVersions: which APIs and versions this broker serves.

use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::SUPPORTED_APIS;

fn api_keys() -> Vec<ApiVersion> {
    SUPPORTED_APIS
        .iter()
        .map(|(k, min, max)| {
            ApiVersion::default()
                .with_api_key(*k as i16)
                .with_min_version(*min)
                .with_max_version(*max)
        })
        .collect()
}

/// The features Tern serves, as (name, lowest level, highest level, level in force):
/// group version 1 (KIP-848 consumer groups), share version 1 (KIP-932 share groups, without
/// Kafka 4.2's ShareFetch v2 of level 2) and transaction version 2 (KIP-890: a new epoch per
/// transaction, partitions added by their leaders), as a new Kafka 4.4 cluster has them.
pub const FEATURES: &[(&str, i16, i16, i16)] = &[
    ("group.version", 0, 1, 1),
    ("share.version", 0, 1, 1),
    ("transaction.version", 0, 2, 2),
];

/// The epoch of the features in force. It never changes (they are fixed), and must be at least
/// 0: a Java producer ignores finalized features of a lower epoch than it has seen (-1 at
/// first), and would never turn transaction version 2 on.
const FINALIZED_FEATURES_EPOCH: i64 = 0;

/// The feature fields of an answer to ApiVersions `version`. Before v4 a supported feature
/// whose lowest level is 0 is left out, as Kafka leaves it out for clients that cannot take it.
fn with_features(response: ApiVersionsResponse, version: i16) -> ApiVersionsResponse {
    let supported = FEATURES
        .iter()
        .filter(|(_, min, _, _)| version >= 4 || *min > 0)
        .map(|(name, min, max, _)| {
            SupportedFeatureKey::default()
                .with_name(StrBytes::from_static_str(name))
                .with_min_version(*min)
                .with_max_version(*max)
        })
        .collect();
    let finalized = FEATURES
        .iter()
        .filter(|(_, _, _, level)| *level > 0)
        .map(|(name, _, _, level)| {
            FinalizedFeatureKey::default()
                .with_name(StrBytes::from_static_str(name))
                .with_min_version_level(*level)
                .with_max_version_level(*level)
        })
        .collect();
    response
        .with_supported_features(supported)
        .with_finalized_features_epoch(FINALIZED_FEATURES_EPOCH)
        .with_finalized_features(finalized)
}

/// Answers ApiVersions. From v5 a client may name the cluster and node it means to reach
/// (KIP-1242): both or neither, and both must be this broker's, as Kafka 4.4 checks them.
pub fn handle(
    req: ApiVersionsRequest,
    version: i16,
    cluster_id: &str,
    node_id: i32,
) -> ApiVersionsResponse {
    let refused = match (req.cluster_id.as_deref(), req.node_id) {
        (None, -1) => None,
        (Some(cluster), node) if node >= 0 => {
            (cluster != cluster_id || node != node_id).then_some(ResponseError::RebootstrapRequired)
        }
        _ => Some(ResponseError::InvalidRequest),
    };
    match refused {
        // Kafka answers a refused check without the api keys.
        Some(error) => ApiVersionsResponse::default().with_error_code(error.code()),
        None => with_features(
            ApiVersionsResponse::default().with_api_keys(api_keys()),
            version,
        ),
    }
}

/// The v0 reply to a version we do not know: UNSUPPORTED_VERSION plus our ranges.
pub fn unsupported_version() -> kafka_protocol::messages::ResponseKind {
    kafka_protocol::messages::ResponseKind::ApiVersions(
        ApiVersionsResponse::default()
            .with_error_code(ResponseError::UnsupportedVersion.code())
            .with_api_keys(api_keys()),
    )
}
