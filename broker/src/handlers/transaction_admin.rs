//! What `kafka-transactions.sh` asks: DescribeTransactions, ListTransactions and
//! DescribeProducers.

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::list_transactions_response::TransactionState as ListedTransaction;
use kafka_protocol::messages::{
    DescribeProducersRequest, DescribeProducersResponse, DescribeTransactionsRequest,
    DescribeTransactionsResponse, ListTransactionsRequest, ListTransactionsResponse, ProducerId,
    TopicName, TransactionalId,
};
use kafka_protocol::ResponseError;

use tern_controller::acls::{AclOperation, AclResourceType};

use super::{sb, Authz, RequestContext};
use crate::broker::Broker;
use crate::txn_coordinator::metadata::TxnState;

fn may_describe_txn(authz: &Authz<'_>, transactional_id: &str) -> bool {
    authz.allows(
        AclOperation::Describe,
        AclResourceType::TransactionalId,
        transactional_id,
    )
}

/// Answers DescribeTransactions for the ids this broker coordinates; topics the principal may
/// not DESCRIBE are left out of each transaction, as in Kafka.
pub(crate) fn describe_transactions(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let authz = ctx.authz(broker);
    let states = req
        .transactional_ids
        .iter()
        .map(|id| {
            let state = TransactionState::default()
                .with_transactional_id(id.clone())
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1)
                .with_transaction_start_time_ms(-1);
            if !may_describe_txn(&authz, id.0.as_str()) {
                return state
                    .with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code());
            }
            match broker.txns.describe(id.0.as_str()) {
                Err(e) => state.with_error_code(e.code()),
                Ok(m) => {
                    let mut by_topic: BTreeMap<String, Vec<i32>> = BTreeMap::new();
                    for (t, p) in &m.partitions {
                        if authz.topic(AclOperation::Describe, t) {
                            by_topic.entry(t.clone()).or_default().push(*p);
                        }
                    }
                    state
                        .with_transaction_state(sb(m.state.name()))
                        .with_transaction_timeout_ms(m.timeout_ms)
                        .with_transaction_start_time_ms(m.start_ms)
                        .with_producer_id(ProducerId(m.producer_id))
                        .with_producer_epoch(m.producer_epoch)
                        .with_topics(
                            by_topic
                                .into_iter()
                                .map(|(t, ps)| {
                                    TopicData::default()
                                        .with_topic(TopicName(sb(t)))
                                        .with_partitions(ps)
                                })
                                .collect(),
                        )
                }
            }
        })
        .collect();
    DescribeTransactionsResponse::default().with_transaction_states(states)
}

/// Answers ListTransactions: the ids this broker coordinates that the principal may DESCRIBE,
/// filtered by state, producer id, duration (v1+) and id pattern (v2+).
pub(crate) fn list_transactions(
    broker: &Broker,
    ctx: &RequestContext,
    req: ListTransactionsRequest,
) -> ListTransactionsResponse {
    let authz = ctx.authz(broker);
    let mut wanted_states = Vec::new();
    let mut unknown = Vec::new();
    for f in &req.state_filters {
        match TxnState::ALL.iter().find(|s| s.name() == f.as_str()) {
            Some(s) => wanted_states.push(*s),
            None => unknown.push(f.clone()),
        }
    }
    let pattern = match req
        .transactional_id_pattern
        .as_deref()
        .filter(|p| !p.is_empty())
    {
        None => None,
        Some(p) => match regex::Regex::new(&format!("^(?:{p})$")) {
            Ok(r) => Some(r),
            Err(_) => {
                return ListTransactionsResponse::default()
                    .with_error_code(ResponseError::InvalidRegularExpression.code())
            }
        },
    };
    let mut listed: Vec<ListedTransaction> = broker
        .txns
        .list()
        .into_iter()
        .filter(|t| {
            wanted_states.is_empty() && unknown.is_empty() || wanted_states.contains(&t.state)
        })
        .filter(|t| {
            req.producer_id_filters.is_empty()
                || req.producer_id_filters.contains(&ProducerId(t.producer_id))
        })
        .filter(|t| req.duration_filter < 0 || t.duration_ms > req.duration_filter)
        .filter(|t| {
            pattern
                .as_ref()
                .is_none_or(|r| r.is_match(&t.transactional_id))
        })
        .filter(|t| may_describe_txn(&authz, &t.transactional_id))
        .map(|t| {
            ListedTransaction::default()
                .with_transactional_id(TransactionalId(sb(t.transactional_id)))
                .with_producer_id(ProducerId(t.producer_id))
                .with_transaction_state(sb(t.state.name()))
        })
        .collect();
    listed.sort_by(|a, b| a.transactional_id.0.cmp(&b.transactional_id.0));
    ListTransactionsResponse::default()
        .with_unknown_state_filters(unknown)
        .with_transaction_states(listed)
}

/// Answers DescribeProducers: the producers with state in each partition this broker leads
/// (READ on the topic needed).
pub(crate) fn describe_producers(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeProducersRequest,
) -> DescribeProducersResponse {
    let authz = ctx.authz(broker);
    let topics = req
        .topics
        .iter()
        .map(|t| {
            let name = t.name.0.as_str();
            let readable = authz.topic(AclOperation::Read, name);
            let partitions = t
                .partition_indexes
                .iter()
                .map(|&p| {
                    let resp = PartitionResponse::default().with_partition_index(p);
                    if !readable {
                        return resp
                            .with_error_code(ResponseError::TopicAuthorizationFailed.code());
                    }
                    let Some(part) = broker.replicas.partition(name, p) else {
                        return resp
                            .with_error_code(broker.unhosted_partition_error(name, p).code());
                    };
                    if !part.is_leader() {
                        return resp.with_error_code(ResponseError::NotLeaderOrFollower.code());
                    }
                    resp.with_active_producers(
                        part.log
                            .producer_states()
                            .into_iter()
                            .map(|e| {
                                ProducerState::default()
                                    .with_producer_id(ProducerId(e.producer_id))
                                    .with_producer_epoch(e.producer_epoch as i32)
                                    .with_last_sequence(e.last_sequence())
                                    .with_last_timestamp(e.last_timestamp)
                                    .with_coordinator_epoch(e.coordinator_epoch)
                                    .with_current_txn_start_offset(
                                        e.current_txn_first_offset.unwrap_or(-1),
                                    )
                            })
                            .collect(),
                    )
                })
                .collect();
            TopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    DescribeProducersResponse::default().with_topics(topics)
}
