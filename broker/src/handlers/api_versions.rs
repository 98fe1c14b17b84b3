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

/// Answers ApiVersions.
pub fn handle(_req: ApiVersionsRequest, _version: i16) -> ApiVersionsResponse {
    ApiVersionsResponse::default().with_api_keys(api_keys())
}

/// The v0 reply to a version we do not know: UNSUPPORTED_VERSION plus our ranges.
pub fn unsupported_version() -> kafka_protocol::messages::ResponseKind {
    kafka_protocol::messages::ResponseKind::ApiVersions(
        ApiVersionsResponse::default()
            .with_error_code(ResponseError::UnsupportedVersion.code())
            .with_api_keys(api_keys()),
    )
}
