//! DescribeClientQuotas (48): Tern enforces no client quotas and stores none, so every filter
//! matches nothing. Served because `kafka-configs --describe --entity-type users` asks for quotas
//! before it lists SCRAM credentials.

use kafka_protocol::messages::{DescribeClientQuotasRequest, DescribeClientQuotasResponse};
use kafka_protocol::ResponseError;
use tern_controller::acls::AclOperation;

use super::{sb, RequestContext};
use crate::broker::Broker;

/// Answers DescribeClientQuotas with no entries (DESCRIBE_CONFIGS on the cluster, as in Kafka).
pub(crate) fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    _req: DescribeClientQuotasRequest,
) -> DescribeClientQuotasResponse {
    if !ctx.authz(broker).cluster(AclOperation::DescribeConfigs) {
        return DescribeClientQuotasResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
            .with_error_message(Some(sb("Cluster authorization failed.")));
    }
    DescribeClientQuotasResponse::default().with_entries(Some(Vec::new()))
}
