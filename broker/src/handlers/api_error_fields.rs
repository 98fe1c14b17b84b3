//! Response parts that carry Kafka's error code and error message, filled from an `ApiError`.

use kafka_protocol::messages::{
    alter_configs_response,
    alter_partition_reassignments_response::AlterPartitionReassignmentsResponse,
    create_acls_response::AclCreationResult,
    create_partitions_response::CreatePartitionsTopicResult,
    create_topics_response::CreatableTopicResult, delete_acls_response::DeleteAclsFilterResult,
    delete_topics_response::DeletableTopicResult, incremental_alter_configs_response,
};
use tern_protocol::error::ApiError;

use super::sb;

/// A generated response part with `error_code` and `error_message` fields.
pub(crate) trait WithApiError: Sized {
    /// Sets the error code and message from `e`.
    fn with_api_error(self, e: ApiError) -> Self;

    /// Unchanged for `Ok`, with the error of an `Err`.
    fn with_result(self, result: Result<(), ApiError>) -> Self {
        match result {
            Ok(()) => self,
            Err(e) => self.with_api_error(e),
        }
    }
}

/// Implements [`WithApiError`] through the generated `with_error_code`/`with_error_message`.
macro_rules! with_api_error {
    ($($part:ty),* $(,)?) => {
        $(impl WithApiError for $part {
            fn with_api_error(self, e: ApiError) -> Self {
                self.with_error_code(e.code())
                    .with_error_message(Some(sb(e.message)))
            }
        })*
    };
}

with_api_error!(
    AclCreationResult,
    DeleteAclsFilterResult,
    alter_configs_response::AlterConfigsResourceResponse,
    incremental_alter_configs_response::AlterConfigsResourceResponse,
    CreatePartitionsTopicResult,
    CreatableTopicResult,
    DeletableTopicResult,
    AlterPartitionReassignmentsResponse,
);
