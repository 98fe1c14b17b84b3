//! Share consumers (KIP-932): ShareGroupHeartbeat to the group's coordinator, ShareFetch and
//! ShareAcknowledge to partition leaders. Topics travel by id on the wire.

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::messages::share_fetch_response::{
    AcquiredRecords, PartitionData, ShareFetchableTopicResponse,
};
use kafka_protocol::messages::share_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{
    share_acknowledge_response, ShareAcknowledgeRequest, ShareAcknowledgeResponse,
    ShareFetchRequest, ShareFetchResponse, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse,
};
use kafka_protocol::ResponseError;
use tern_controller::acls::AclOperation;
use tern_controller::MetadataImage;
use uuid::Uuid;

use super::{sb, Authz, RequestContext};
use crate::blocking::disk_io;
use crate::broker::Broker;
use crate::group_coordinator::now_ms;
use crate::group_coordinator::share_group::ShareHeartbeat;
use crate::share::manager::{Delivery, GroupView};
use crate::share::partition::ack_type;
use crate::share::sessions::{SessionStep, TopicPartition};

/// The longest member id Kafka takes (a UUID's text).
const MAX_MEMBER_ID_LEN: usize = 36;
/// How often a waiting ShareFetch looks again for records whose locks ran out or that other
/// members released (new records wake it at once).
const RECHECK_INTERVAL: Duration = Duration::from_millis(200);

/// Answers ShareGroupHeartbeat (READ on the group).
pub(crate) fn heartbeat(
    broker: &Broker,
    ctx: &RequestContext,
    req: ShareGroupHeartbeatRequest,
) -> ShareGroupHeartbeatResponse {
    let error = |e: ResponseError, message: &str| {
        ShareGroupHeartbeatResponse::default()
            .with_error_code(e.code())
            .with_error_message((!message.is_empty()).then(|| sb(message.to_string())))
    };
    let group_id = req.group_id.0.to_string();
    let member_id = req.member_id.to_string();
    let subscribed: Option<Vec<String>> = req
        .subscribed_topic_names
        .as_ref()
        .map(|ns| ns.iter().map(|n| n.0.to_string()).collect());
    let invalid = if group_id.is_empty() {
        Some("GroupId can't be empty.")
    } else if member_id.is_empty() || member_id.len() > MAX_MEMBER_ID_LEN {
        Some("MemberId can't be empty or longer than 36 characters.")
    } else if req.rack_id.as_ref().is_some_and(|r| r.is_empty()) {
        Some("RackId can't be empty.")
    } else if req.member_epoch < -1 {
        Some("MemberEpoch is invalid.")
    } else if req.member_epoch == 0 && subscribed.as_ref().is_none_or(|s| s.is_empty()) {
        Some("SubscribedTopicNames must be set in first request.")
    } else {
        None
    };
    if let Some(message) = invalid {
        return error(ResponseError::InvalidRequest, message);
    }
    if !ctx.authz(broker).group(AclOperation::Read, &group_id) {
        return error(ResponseError::GroupAuthorizationFailed, "");
    }
    let image = broker.controller.image();
    let hb = ShareHeartbeat {
        member_id,
        member_epoch: req.member_epoch,
        rack_id: req.rack_id.as_ref().map(|s| s.to_string()),
        subscribed_topic_names: subscribed,
        client_id: ctx.client_id.clone(),
        client_host: ctx.client_host.clone(),
    };
    let settings = crate::config::group_configs::share_settings(
        &broker.groups.config.share,
        &image.group_configs(&group_id),
    );
    match broker
        .groups
        .share_heartbeat(&group_id, hb, &*image, &settings)
    {
        Ok(answer) => {
            let leaving = answer.member_epoch < 0;
            let assignment = answer.assignment.map(|by_topic| {
                Assignment::default().with_topic_partitions(
                    by_topic
                        .into_iter()
                        .filter_map(|(topic, partitions)| {
                            Some(
                                TopicPartitions::default()
                                    .with_topic_id(image.topic(&topic)?.id)
                                    .with_partitions(partitions),
                            )
                        })
                        .collect(),
                )
            });
            ShareGroupHeartbeatResponse::default()
                .with_member_id(Some(sb(answer.member_id)))
                .with_member_epoch(answer.member_epoch)
                .with_heartbeat_interval_ms(if leaving {
                    0
                } else {
                    settings.heartbeat_interval_ms
                })
                .with_assignment(assignment)
        }
        Err(r) => error(r.error, &r.message),
    }
}

/// A partition's acknowledgements: (first, last, types) batches.
type AckBatches = Vec<(i64, i64, Vec<i8>)>;

/// Kafka's checks of acknowledgement batches: ordered, not overlapping, and each with one
/// type or one per offset, of the known types; RENEW only where the request says it renews
/// (`IsRenewAck`, from v2).
fn valid_batches(batches: &AckBatches, renew: bool) -> bool {
    let highest = if renew {
        ack_type::RENEW
    } else {
        ack_type::REJECT
    };
    let mut previous_last = i64::MIN;
    batches.iter().all(|(first, last, types)| {
        let ok = first <= last
            && *first > previous_last
            && !types.is_empty()
            && (types.len() == 1 || types.len() as i64 == last - first + 1)
            && types.iter().all(|t| (ack_type::GAP..=highest).contains(t));
        previous_last = *last;
        ok
    })
}

/// The partitions of a request by topic id, with names where the id is known.
struct Named {
    id: Uuid,
    name: Option<String>,
    partition: i32,
}

fn named(image: &MetadataImage, id: Uuid, partition: i32) -> Named {
    Named {
        id,
        name: image.topic_by_id(&id).map(|t| t.name.clone()),
        partition,
    }
}

/// Applies one partition's acknowledgements (`renew`: RENEW may be among them); the
/// partition's error, if any.
fn acknowledge_partition(
    broker: &Broker,
    (authz, view): (&Authz<'_>, &GroupView),
    (member, renew): (&str, bool),
    p: &Named,
    batches: &AckBatches,
) -> Option<ResponseError> {
    let Some(topic) = &p.name else {
        return Some(ResponseError::UnknownTopicId);
    };
    if !authz.topic(AclOperation::Read, topic) {
        return Some(ResponseError::TopicAuthorizationFailed);
    }
    if !valid_batches(batches, renew) {
        return Some(ResponseError::InvalidRequest);
    }
    broker
        .share
        .acknowledge(
            broker,
            view,
            member,
            (topic, p.partition),
            batches,
            now_ms(),
        )
        .err()
}

/// How long a share request waits for its moved start offsets to reach another broker's
/// coordinator before it answers (the rest follow within a second).
const FLUSH_BUDGET: Duration = Duration::from_secs(1);

/// ShareFetch v2's acquire modes (KIP-1206).
const BATCH_OPTIMIZED: i8 = 0;
const RECORD_LIMIT: i8 = 1;

/// What a ShareFetch v2 that renews locks must leave out (Kafka checks each): it only carries
/// acknowledgements, so it neither waits nor fetches. Kafka's message, naming what is wrong.
fn renew_only_problems(req: &ShareFetchRequest) -> Option<String> {
    let problems: String = [
        (req.max_bytes != 0, "maxBytes"),
        (req.min_bytes != 0, "minBytes"),
        (req.max_records != 0, "maxRecords"),
        (req.max_wait_ms != 0, "maxWaitMs"),
    ]
    .into_iter()
    .filter(|(bad, _)| *bad)
    .map(|(_, field)| format!("{field} must be set to 0, "))
    .collect();
    (!problems.is_empty()).then(|| format!("{problems}if isRenewAck is true."))
}

/// The group and member a share request names; INVALID_REQUEST when either is missing.
fn group_and_member(
    group: Option<&kafka_protocol::messages::GroupId>,
    member: Option<&kafka_protocol::protocol::StrBytes>,
) -> Result<(String, String), ResponseError> {
    let group = group.map(|g| g.0.to_string()).unwrap_or_default();
    let member = member.map(|m| m.to_string()).unwrap_or_default();
    if group.is_empty() || member.is_empty() || member.len() > MAX_MEMBER_ID_LEN {
        return Err(ResponseError::InvalidRequest);
    }
    Ok((group, member))
}

/// One partition's part of a ShareFetch answer.
#[derive(Default)]
struct Outcome {
    error: Option<ResponseError>,
    ack_error: Option<ResponseError>,
    /// It carried acknowledgements: always answered, with their result.
    acked: bool,
    delivery: Delivery,
    /// Listed even when empty (a full session's first answer).
    listed: bool,
}

/// Answers ShareFetch (READ on the group and the topics): applies the acknowledgements it
/// carries, moves the share session on, then acquires records of every partition of the
/// session, waiting up to MaxWaitMs for some. From v2 the records may be limited exactly
/// (record-limit mode), and a fetch that renews locks only acknowledges.
pub(crate) async fn fetch(
    broker: &Broker,
    ctx: &RequestContext,
    req: ShareFetchRequest,
    version: i16,
) -> ShareFetchResponse {
    let top = |e: ResponseError| ShareFetchResponse::default().with_error_code(e.code());
    let (group, member) = match group_and_member(req.group_id.as_ref(), req.member_id.as_ref()) {
        Ok(gm) => gm,
        Err(e) => return top(e),
    };
    let renew = version >= 2 && req.is_renew_ack;
    // Tern answers an unknown mode INVALID_REQUEST before anything changes (Kafka 4.4 fails
    // it with UNKNOWN_SERVER_ERROR after applying the acknowledgements).
    if ![BATCH_OPTIMIZED, RECORD_LIMIT].contains(&req.share_acquire_mode) {
        return top(ResponseError::InvalidRequest).with_error_message(Some(sb(format!(
            "Unknown share acquire mode {}",
            req.share_acquire_mode
        ))));
    }
    if !ctx.authz(broker).group(AclOperation::Read, &group) {
        return top(ResponseError::GroupAuthorizationFailed);
    }
    if renew {
        if let Some(message) = renew_only_problems(&req) {
            return top(ResponseError::InvalidRequest).with_error_message(Some(sb(message)));
        }
    }
    let image = broker.controller.image();
    let epoch = req.share_session_epoch;
    let mut acks: Vec<(Named, AckBatches)> = Vec::new();
    let mut added: Vec<TopicPartition> = Vec::new();
    let mut outcomes: BTreeMap<(Uuid, i32), Outcome> = BTreeMap::new();
    for t in &req.topics {
        for p in &t.partitions {
            let n = named(&image, t.topic_id, p.partition_index);
            match &n.name {
                Some(name) => added.push((name.clone(), p.partition_index)),
                None => {
                    outcomes.entry((n.id, n.partition)).or_default().error =
                        Some(ResponseError::UnknownTopicId)
                }
            }
            if !p.acknowledgement_batches.is_empty() {
                let batches = p
                    .acknowledgement_batches
                    .iter()
                    .map(|b| (b.first_offset, b.last_offset, b.acknowledge_types.clone()))
                    .collect();
                acks.push((n, batches));
            }
        }
    }
    if epoch == 0 && !acks.is_empty() {
        return top(ResponseError::InvalidRequest);
    }
    let forgotten: Vec<TopicPartition> = req
        .forgotten_topics_data
        .iter()
        .flat_map(|f| {
            let name = image.topic_by_id(&f.topic_id).map(|t| t.name.clone());
            f.partitions
                .iter()
                .filter_map(move |p| Some((name.clone()?, *p)))
        })
        .collect();
    let step = match broker.share.sessions.fetch(
        (&group, &member),
        epoch,
        added,
        forgotten,
        ctx.connection_id,
    ) {
        Ok(step) => step,
        Err(e) => return top(e),
    };
    let view = broker.share.group_view(broker, &group);
    let authz = ctx.authz(broker);
    let session_partitions = match &step {
        SessionStep::Closed(partitions) | SessionStep::Fetch(partitions) => partitions,
    };
    let touched: Vec<TopicPartition> = acks
        .iter()
        .filter_map(|(n, _)| Some((n.name.clone()?, n.partition)))
        .chain(session_partitions.iter().cloned())
        .collect();
    broker.share.refresh_remote(broker, &view, &touched).await;
    for (p, batches) in &acks {
        let code = acknowledge_partition(broker, (&authz, &view), (&member, renew), p, batches);
        outcomes.entry((p.id, p.partition)).or_default().ack_error = code;
        outcomes.entry((p.id, p.partition)).or_default().acked = true;
    }
    let partitions = match step {
        SessionStep::Closed(partitions) => {
            broker.share.release(broker, &view, &member, &partitions);
            Vec::new()
        }
        // A renewing fetch only acknowledges, and a fetch for no records or no bytes (a
        // record-limit consumer's to every broker but one) takes none: Kafka answers both at
        // once.
        SessionStep::Fetch(_) if renew || req.max_records == 0 || req.max_bytes == 0 => Vec::new(),
        SessionStep::Fetch(partitions) => partitions,
    };
    if !partitions.is_empty() {
        let deliveries =
            acquire_with_wait(broker, (&authz, &view), &member, &partitions, &req).await;
        for ((topic, index), result) in partitions.iter().zip(deliveries) {
            let id = image.topic(topic).map(|t| t.id).unwrap_or_default();
            let o = outcomes.entry((id, *index)).or_default();
            o.listed = epoch == 0;
            match result {
                Ok(d) => o.delivery = d,
                Err(e) => o.error = Some(e),
            }
        }
    }
    // Start offsets that moved are stored by the group's coordinator before the answer.
    broker.share.flush_remote(broker, Some(FLUSH_BUDGET)).await;
    let mut by_topic: BTreeMap<Uuid, Vec<PartitionData>> = BTreeMap::new();
    for ((id, index), o) in outcomes {
        let has_data = !o.delivery.acquired.is_empty();
        if !(has_data || o.listed || o.error.is_some() || o.acked) {
            continue;
        }
        let leader = image
            .topic_by_id(&id)
            .and_then(|t| t.partitions.get(&index))
            .map(|p| (p.leader, p.leader_epoch))
            .unwrap_or((-1, -1));
        let acquired = o
            .delivery
            .acquired
            .iter()
            .map(|r| {
                AcquiredRecords::default()
                    .with_first_offset(r.first_offset)
                    .with_last_offset(r.last_offset)
                    .with_delivery_count(r.delivery_count)
            })
            .collect();
        by_topic.entry(id).or_default().push(
            PartitionData::default()
                .with_partition_index(index)
                .with_error_code(o.error.map_or(0, |e| e.code()))
                .with_acknowledge_error_code(o.ack_error.map_or(0, |e| e.code()))
                .with_current_leader(
                    kafka_protocol::messages::share_fetch_response::LeaderIdAndEpoch::default()
                        .with_leader_id(leader.0)
                        .with_leader_epoch(leader.1),
                )
                // v1 records are never null.
                .with_records(Some(o.delivery.records))
                .with_acquired_records(acquired),
        );
    }
    ShareFetchResponse::default()
        .with_acquisition_lock_timeout_ms(view.settings.limits.lock_duration_ms as i32)
        .with_responses(
            by_topic
                .into_iter()
                .map(|(id, partitions)| {
                    ShareFetchableTopicResponse::default()
                        .with_topic_id(id)
                        .with_partitions(partitions)
                })
                .collect(),
        )
}

/// Acquires records of each partition, waiting until some are acquired, an error comes up
/// or MaxWaitMs passes.
async fn acquire_with_wait(
    broker: &Broker,
    (authz, first_view): (&Authz<'_>, &GroupView),
    member: &str,
    partitions: &[TopicPartition],
    req: &ShareFetchRequest,
) -> Vec<Result<Delivery, ResponseError>> {
    let deadline =
        tokio::time::Instant::now() + Duration::from_millis(req.max_wait_ms.max(0) as u64);
    let max_bytes = if req.max_bytes <= 0 {
        usize::MAX
    } else {
        req.max_bytes as usize
    };
    let per_partition = (max_bytes / partitions.len().max(1)).max(1);
    // MaxRecords is one budget for the whole fetch, as Kafka spends it: partition after
    // partition, starting one further on each fetch of the session so that none starves.
    let max_records = if req.max_records > 0 {
        req.max_records as i64
    } else {
        i64::MAX
    };
    let record_limit = req.share_acquire_mode == RECORD_LIMIT;
    let first = (req.share_session_epoch.max(0) as usize) % partitions.len().max(1);
    let mut later_view = None;
    loop {
        let view = later_view.as_ref().unwrap_or(first_view);
        broker.share.refresh_remote(broker, view, partitions).await;
        let mut watchers = Vec::new();
        let results: Vec<Result<Delivery, ResponseError>> = disk_io(|| {
            let mut results: Vec<Option<Result<Delivery, ResponseError>>> =
                partitions.iter().map(|_| None).collect();
            let mut left = max_records;
            for i in (0..partitions.len()).map(|k| (first + k) % partitions.len()) {
                let (topic, index) = &partitions[i];
                results[i] = Some(if !authz.topic(AclOperation::Read, topic) {
                    Err(ResponseError::TopicAuthorizationFailed)
                } else {
                    if let Some(p) = broker.replicas.partition(topic, *index) {
                        watchers.push(p.watch_high_watermark());
                    }
                    if left <= 0 {
                        Ok(Delivery::default())
                    } else {
                        let delivery = broker.share.acquire(
                            broker,
                            view,
                            member,
                            (topic, *index),
                            (left, record_limit, per_partition),
                            now_ms(),
                        );
                        if let Ok(d) = &delivery {
                            left -= d.record_count();
                        }
                        delivery
                    }
                });
            }
            results.into_iter().flatten().collect()
        });
        let done = results
            .iter()
            .any(|r| r.as_ref().map_or(true, |d| !d.acquired.is_empty()));
        let now = tokio::time::Instant::now();
        if done || now >= deadline || req.min_bytes <= 0 && req.max_wait_ms <= 0 {
            return results;
        }
        let waits: Vec<_> = watchers.iter_mut().map(|w| Box::pin(w.changed())).collect();
        let until = deadline.min(now + RECHECK_INTERVAL);
        let _ =
            tokio::time::timeout_at(until, crate::replication::delayed_produce::first_of(waits))
                .await;
        // Looked at again after a wait: the coordinator may have finished loading meanwhile.
        later_view = Some(broker.share.group_view(broker, &first_view.group));
    }
}

/// Answers ShareAcknowledge (READ on the group and the topics): moves the share session on
/// and settles the records; epoch -1 also closes the session, giving back what is left.
pub(crate) async fn acknowledge(
    broker: &Broker,
    ctx: &RequestContext,
    req: ShareAcknowledgeRequest,
    version: i16,
) -> ShareAcknowledgeResponse {
    let renew = version >= 2 && req.is_renew_ack;
    let top = |e: ResponseError| ShareAcknowledgeResponse::default().with_error_code(e.code());
    let (group, member) = match group_and_member(req.group_id.as_ref(), req.member_id.as_ref()) {
        Ok(gm) => gm,
        Err(e) => return top(e),
    };
    if !ctx.authz(broker).group(AclOperation::Read, &group) {
        return top(ResponseError::GroupAuthorizationFailed);
    }
    let step = match broker
        .share
        .sessions
        .acknowledge(&group, &member, req.share_session_epoch)
    {
        Ok(step) => step,
        Err(e) => return top(e),
    };
    let image = broker.controller.image();
    let view = broker.share.group_view(broker, &group);
    let authz = ctx.authz(broker);
    let touched: Vec<TopicPartition> = req
        .topics
        .iter()
        .flat_map(|t| {
            let name = image.topic_by_id(&t.topic_id).map(|i| i.name.clone());
            t.partitions
                .iter()
                .filter_map(move |p| Some((name.clone()?, p.partition_index)))
        })
        .collect();
    broker.share.refresh_remote(broker, &view, &touched).await;
    let responses = req
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let n = named(&image, t.topic_id, p.partition_index);
                    let batches: AckBatches = p
                        .acknowledgement_batches
                        .iter()
                        .map(|b| (b.first_offset, b.last_offset, b.acknowledge_types.clone()))
                        .collect();
                    let code = acknowledge_partition(
                        broker,
                        (&authz, &view),
                        (&member, renew),
                        &n,
                        &batches,
                    );
                    share_acknowledge_response::PartitionData::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code.map_or(0, |e| e.code()))
                })
                .collect();
            share_acknowledge_response::ShareAcknowledgeTopicResponse::default()
                .with_topic_id(t.topic_id)
                .with_partitions(partitions)
        })
        .collect();
    if let SessionStep::Closed(partitions) = step {
        broker.share.release(broker, &view, &member, &partitions);
    }
    broker.share.flush_remote(broker, Some(FLUSH_BUDGET)).await;
    // v2 tells the client how long a lock (a renewed one too) lasts.
    ShareAcknowledgeResponse::default()
        .with_acquisition_lock_timeout_ms(view.settings.limits.lock_duration_ms as i32)
        .with_responses(responses)
}
