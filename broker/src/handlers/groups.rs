//! The classic group protocol: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup.

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{
    BrokerId, FindCoordinatorRequest, FindCoordinatorResponse, HeartbeatRequest, HeartbeatResponse,
    JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse, SyncGroupRequest,
    SyncGroupResponse,
};
use kafka_protocol::ResponseError;

use tern_controller::acls::{AclOperation, AclResourceType};

use super::{sb, Authz, RequestContext};
use crate::broker::Broker;
use crate::group_coordinator::group::{JoinRequest, JoinResult, Membership, Reply, SyncResult};

const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;

fn coordinator_for(
    broker: &Broker,
    authz: &Authz<'_>,
    listener: &str,
    key: &str,
    key_type: i8,
) -> Coordinator {
    let c = Coordinator::default()
        .with_key(sb(key))
        .with_node_id(BrokerId(-1));
    // DESCRIBE on the group (or transactional id), as in Kafka.
    if key_type == KEY_TYPE_GROUP && !authz.group(AclOperation::Describe, key) {
        return c.with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    if key_type == KEY_TYPE_TRANSACTION
        && !authz.allows(
            AclOperation::Describe,
            AclResourceType::TransactionalId,
            key,
        )
    {
        return c.with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code());
    }
    if key_type != KEY_TYPE_GROUP && key_type != KEY_TYPE_TRANSACTION {
        return c.with_error_code(ResponseError::InvalidRequest.code());
    }
    let image = broker.controller.image();
    let (local, leader) = if key_type == KEY_TYPE_GROUP {
        if !broker.ensure_offsets_topic() {
            return c.with_error_code(ResponseError::CoordinatorNotAvailable.code());
        }
        (
            broker.groups.check_coordinator(key),
            broker.groups.coordinator_in(&image, key),
        )
    } else {
        if !broker.ensure_txn_state_topic() {
            return c.with_error_code(ResponseError::CoordinatorNotAvailable.code());
        }
        (
            broker.txns.check_coordinator(key).map(|_| ()),
            broker.txns.coordinator_in(&image, key),
        )
    };
    match local {
        Ok(()) => {
            let (host, port) = broker.endpoint_for(listener);
            c.with_node_id(BrokerId(broker.config.node_id))
                .with_host(sb(host))
                .with_port(port as i32)
        }
        // In a cluster the coordinator is the leader of the key's partition.
        Err(e) => match leader.and_then(|l| image.brokers.get(&l)) {
            Some(b) if b.id != broker.config.node_id && !b.fenced => {
                let (host, port) = broker.endpoint_of(b, listener);
                c.with_node_id(BrokerId(b.id))
                    .with_host(sb(host))
                    .with_port(port as i32)
            }
            _ => {
                let e = if e == ResponseError::NotCoordinator {
                    ResponseError::CoordinatorNotAvailable
                } else {
                    e
                };
                c.with_error_code(e.code())
            }
        },
    }
}

/// Answers FindCoordinator (single key before v4, batched after).
pub(crate) fn find_coordinator(
    broker: &Broker,
    ctx: &RequestContext,
    req: FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    let authz = ctx.authz(broker);
    if version >= 4 {
        let coordinators = req
            .coordinator_keys
            .iter()
            .map(|k| coordinator_for(broker, &authz, &ctx.listener, k, req.key_type))
            .collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    let c = coordinator_for(broker, &authz, &ctx.listener, &req.key, req.key_type);
    FindCoordinatorResponse::default()
        .with_error_code(c.error_code)
        .with_error_message(c.error_message)
        .with_node_id(c.node_id)
        .with_host(c.host)
        .with_port(c.port)
}

fn join_response(r: JoinResult) -> JoinGroupResponse {
    JoinGroupResponse::default()
        .with_error_code(r.error)
        .with_generation_id(r.generation)
        .with_protocol_type(r.protocol_type.map(sb))
        .with_protocol_name(r.protocol.map(sb))
        .with_leader(sb(r.leader))
        .with_member_id(sb(r.member_id))
        .with_members(
            r.members
                .into_iter()
                .map(|(id, instance, metadata)| {
                    JoinGroupResponseMember::default()
                        .with_member_id(sb(id))
                        .with_group_instance_id(instance.map(sb))
                        .with_metadata(metadata)
                })
                .collect(),
        )
}

/// Answers JoinGroup, waiting for the rebalance to complete.
pub(crate) async fn join_group(
    broker: &Broker,
    ctx: &RequestContext,
    req: JoinGroupRequest,
    version: i16,
) -> JoinGroupResponse {
    let group_id = req.group_id.0.to_string();
    let error = |e: ResponseError| {
        join_response(JoinResult {
            error: e.code(),
            generation: -1,
            member_id: req.member_id.to_string(),
            ..Default::default()
        })
    };
    if !ctx.authz(broker).group(AclOperation::Read, &group_id) {
        return error(ResponseError::GroupAuthorizationFailed);
    }
    if let Err(e) = broker.groups.check_coordinator(&group_id) {
        return error(e);
    }
    if req.group_instance_id.is_some() && version < 5 {
        return error(ResponseError::UnsupportedVersion);
    }
    let rebalance_timeout_ms = if version == 0 {
        req.session_timeout_ms
    } else {
        req.rebalance_timeout_ms
    };
    let join = JoinRequest {
        member_id: req.member_id.to_string(),
        group_instance_id: req.group_instance_id.as_ref().map(|s| s.to_string()),
        client_id: ctx.client_id.clone(),
        client_host: ctx.client_host.clone(),
        session_timeout_ms: req.session_timeout_ms,
        rebalance_timeout_ms,
        protocol_type: req.protocol_type.to_string(),
        protocols: req
            .protocols
            .iter()
            .map(|p| (p.name.to_string(), p.metadata.clone()))
            .collect(),
        require_known_member_id: version >= 4,
    };
    let config = broker.groups.config.group.clone();
    let now = crate::group_coordinator::now_ms();
    // The settings borrow a topic view that is not Send: they live only for the join itself.
    let reply = {
        let image = broker.controller.image();
        let consumer = crate::config::group_configs::consumer_settings(
            &broker.groups.config.consumer,
            &image.group_configs(&group_id),
        );
        let topics = &*image;
        let membership = Membership {
            classic: &config,
            consumer: &consumer,
            topics,
        };
        let reply = broker
            .groups
            .with_group(&group_id, true, |g| g.join_any(join, &membership, now));
        broker.groups.store_consumer_changes(&group_id);
        reply
    };
    let result = match reply {
        Some(Reply::Now(r)) => r,
        Some(Reply::Wait(rx)) => match rx.await {
            Ok(r) => r,
            Err(_) => return error(ResponseError::UnknownMemberId),
        },
        None => return error(ResponseError::CoordinatorNotAvailable),
    };
    join_response(result)
}

fn sync_response(r: SyncResult) -> SyncGroupResponse {
    SyncGroupResponse::default()
        .with_error_code(r.error)
        .with_protocol_type(r.protocol_type.map(sb))
        .with_protocol_name(r.protocol.map(sb))
        .with_assignment(r.assignment)
}

/// Answers SyncGroup, waiting for the leader's assignment (READ on the group).
pub(crate) async fn sync_group(
    broker: &Broker,
    ctx: &RequestContext,
    req: SyncGroupRequest,
) -> SyncGroupResponse {
    let group_id = req.group_id.0.to_string();
    let error = |e: ResponseError| {
        sync_response(SyncResult {
            error: e.code(),
            ..Default::default()
        })
    };
    if !ctx.authz(broker).group(AclOperation::Read, &group_id) {
        return error(ResponseError::GroupAuthorizationFailed);
    }
    if let Err(e) = broker.groups.check_coordinator(&group_id) {
        return error(e);
    }
    let assignments = req
        .assignments
        .iter()
        .map(|a| (a.member_id.to_string(), a.assignment.clone()))
        .collect();
    let now = crate::group_coordinator::now_ms();
    let instance = req.group_instance_id.as_ref().map(|s| s.to_string());
    let protocol = (
        req.protocol_type.as_ref().map(|s| s.as_str()),
        req.protocol_name.as_ref().map(|s| s.as_str()),
    );
    let outcome = broker.groups.with_group(&group_id, false, |g| {
        g.sync_any(
            req.member_id.as_str(),
            instance.as_deref(),
            req.generation_id,
            protocol,
            assignments,
            now,
        )
    });
    let (reply, store) = match outcome {
        Some(o) => o,
        None => return error(ResponseError::UnknownMemberId),
    };
    if let Err(e) = broker.groups.store_changes(&group_id, store) {
        return error(e);
    }
    match reply {
        Reply::Now(r) => sync_response(r),
        Reply::Wait(rx) => match rx.await {
            Ok(r) => sync_response(r),
            Err(_) => error(ResponseError::RebalanceInProgress),
        },
    }
}

/// Answers Heartbeat (READ on the group).
pub(crate) fn heartbeat(
    broker: &Broker,
    ctx: &RequestContext,
    req: HeartbeatRequest,
) -> HeartbeatResponse {
    let group_id = req.group_id.0.to_string();
    if !ctx.authz(broker).group(AclOperation::Read, &group_id) {
        return HeartbeatResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    if let Err(e) = broker.groups.check_coordinator(&group_id) {
        return HeartbeatResponse::default().with_error_code(e.code());
    }
    let now = crate::group_coordinator::now_ms();
    let instance = req.group_instance_id.as_ref().map(|s| s.to_string());
    let code = broker
        .groups
        .with_group(&group_id, false, |g| {
            g.heartbeat_any(
                req.member_id.as_str(),
                instance.as_deref(),
                req.generation_id,
                now,
            )
        })
        .unwrap_or(ResponseError::UnknownMemberId.code());
    broker.groups.store_consumer_changes(&group_id);
    HeartbeatResponse::default().with_error_code(code)
}

/// Answers LeaveGroup (one member before v3, a batch after; READ on the group).
pub(crate) fn leave_group(
    broker: &Broker,
    ctx: &RequestContext,
    req: LeaveGroupRequest,
    version: i16,
) -> LeaveGroupResponse {
    let group_id = req.group_id.0.to_string();
    if !ctx.authz(broker).group(AclOperation::Read, &group_id) {
        return LeaveGroupResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    if let Err(e) = broker.groups.check_coordinator(&group_id) {
        return LeaveGroupResponse::default().with_error_code(e.code());
    }
    let leaving: Vec<(String, Option<String>)> = if version >= 3 {
        req.members
            .iter()
            .map(|m| {
                (
                    m.member_id.to_string(),
                    m.group_instance_id.as_ref().map(|s| s.to_string()),
                )
            })
            .collect()
    } else {
        vec![(req.member_id.to_string(), None)]
    };
    let config = broker.groups.config.group.clone();
    let now = crate::group_coordinator::now_ms();
    let outcome = broker
        .groups
        .with_group(&group_id, false, |g| g.leave_any(&leaving, &config, now));
    let Some((codes, store)) = outcome else {
        return LeaveGroupResponse::default()
            .with_error_code(ResponseError::UnknownMemberId.code());
    };
    let _ = broker.groups.store_changes(&group_id, store);
    if version >= 3 {
        let members = leaving
            .into_iter()
            .zip(codes)
            .map(|((id, instance), code)| {
                MemberResponse::default()
                    .with_member_id(sb(id))
                    .with_group_instance_id(instance.map(sb))
                    .with_error_code(code)
            })
            .collect();
        LeaveGroupResponse::default().with_members(members)
    } else {
        LeaveGroupResponse::default().with_error_code(codes.first().copied().unwrap_or(0))
    }
}
