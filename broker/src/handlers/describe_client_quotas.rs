//! DescribeClientQuotas (48): Tern enforces no client quotas and stores none, so every filter
//! matches nothing. Served because `kafka-configs --describe --entity-type users` asks for quotas
//! before it lists SCRAM credentials.

use kafka_protocol::messages::{DescribeClientQuotasRequest, DescribeClientQuotasResponse};

/// Answers DescribeClientQuotas with no entries.
pub fn handle(_req: DescribeClientQuotasRequest) -> DescribeClientQuotasResponse {
    DescribeClientQuotasResponse::default().with_entries(Some(Vec::new()))
}
