//! ApiVersions: which APIs and versions this broker serves.

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
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

/// Answers ApiVersions. From v5 a client may name the cluster and node it means to reach
/// (KIP-1242): both or neither, and both must be this broker's, as Kafka 4.4 checks them.
pub fn handle(req: ApiVersionsRequest, cluster_id: &str, node_id: i32) -> ApiVersionsResponse {
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
        None => ApiVersionsResponse::default().with_api_keys(api_keys()),
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
