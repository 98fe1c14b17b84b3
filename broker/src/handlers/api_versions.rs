//! ApiVersions: which APIs and versions this broker serves.

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::ResponseError;

use super::SUPPORTED_APIS;

fn api_keys() -> Vec<ApiVersion> {
    let kafka = SUPPORTED_APIS
        .iter()
        .map(|(k, min, max)| (*k as i16, *min, *max));
    // The mirror RPCs (94..=105), version 0 each.
    let mirror = (tern_protocol::mirror::api_keys::FIRST..=tern_protocol::mirror::api_keys::LAST)
        .map(|k| (k, 0, 0));
    kafka
        .chain(mirror)
        .map(|(k, min, max)| {
            ApiVersion::default()
                .with_api_key(k)
                .with_min_version(min)
                .with_max_version(max)
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
