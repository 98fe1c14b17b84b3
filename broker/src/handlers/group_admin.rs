//! Group administration: ListGroups, DescribeGroups, DeleteGroups.

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{
    DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse,
    ListGroupsRequest, ListGroupsResponse,
};

use kafka_protocol::ResponseError;
use tern_controller::acls::{AclOperation, AclResourceType};

use super::offsets::gid;
use super::{sb, RequestContext};
use crate::broker::Broker;
use crate::group_coordinator::group::GroupState;

/// Answers ListGroups, with the v4 state filter and v5 type filter: every group with
/// DESCRIBE on the cluster, otherwise the groups the principal may DESCRIBE.
pub(crate) fn list_groups(
    broker: &Broker,
    ctx: &RequestContext,
    req: ListGroupsRequest,
) -> ListGroupsResponse {
    let authz = ctx.authz(broker);
    let all = authz.cluster(AclOperation::Describe);
    let states: Vec<String> = req
        .states_filter
        .iter()
        .map(|s| s.to_ascii_lowercase())
        .collect();
    let types: Vec<String> = req
        .types_filter
        .iter()
        .map(|s| s.to_ascii_lowercase())
        .collect();
    let mut groups: Vec<ListedGroup> = broker
        .groups
        .list()
        .into_iter()
        .filter(|g| states.is_empty() || states.contains(&g.state.to_ascii_lowercase()))
        .filter(|g| types.is_empty() || types.iter().any(|t| t == g.group_type))
        .filter(|g| all || authz.group(AclOperation::Describe, &g.id))
        .map(|g| {
            ListedGroup::default()
                .with_group_id(gid(&g.id))
                .with_protocol_type(sb(g.protocol_type))
                .with_group_state(sb(g.state))
                .with_group_type(sb(g.group_type))
        })
        .collect();
    groups.sort_by(|a, b| a.group_id.0.cmp(&b.group_id.0));
    ListGroupsResponse::default().with_groups(groups)
}

/// Answers DescribeGroups (DESCRIBE on each group, GROUP_AUTHORIZATION_FAILED otherwise).
pub(crate) fn describe_groups(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeGroupsRequest,
    version: i16,
) -> DescribeGroupsResponse {
    let authz = ctx.authz(broker);
    // A group DescribeGroups cannot show: Dead before v6, GROUP_ID_NOT_FOUND with Kafka's
    // message from v6 (KIP-1043).
    let not_found = |described: DescribedGroup, message: String| {
        let dead = described.with_group_state(sb(GroupState::Dead.name()));
        if version >= 6 {
            dead.with_error_code(ResponseError::GroupIdNotFound.code())
                .with_error_message(Some(sb(message)))
        } else {
            dead
        }
    };
    let groups = req
        .groups
        .into_iter()
        .map(|g| {
            let id = g.0.to_string();
            let mut described = DescribedGroup::default().with_group_id(g.clone());
            if !authz.group(AclOperation::Describe, &id) {
                return described
                    .with_error_code(ResponseError::GroupAuthorizationFailed.code())
                    .with_group_state(sb(""));
            }
            if req.include_authorized_operations {
                described.authorized_operations =
                    authz.authorized_operations(AclResourceType::Group, &id);
            }
            if let Err(e) = broker.groups.check_coordinator(&id) {
                return described.with_error_code(e.code());
            }
            broker
                .groups
                .with_group(&id, false, |group| {
                    if group.group_type() != "classic" {
                        // As Kafka: DescribeGroups is for classic groups; a consumer group is
                        // described by ConsumerGroupDescribe, a share group by
                        // ShareGroupDescribe.
                        return not_found(
                            described.clone(),
                            format!("Group {id} is not a classic group."),
                        );
                    }
                    let protocol = group.protocol().unwrap_or_default().to_string();
                    // Member metadata and assignments are shown only once the group is Stable,
                    // as Kafka does.
                    let stable = group.state() == GroupState::Stable;
                    let members = group
                        .members()
                        .values()
                        .map(|m| {
                            let mut d = DescribedGroupMember::default()
                                .with_member_id(sb(m.member_id.clone()))
                                .with_group_instance_id(m.group_instance_id.clone().map(sb))
                                .with_client_id(sb(m.client_id.clone()))
                                .with_client_host(sb(m.client_host.clone()));
                            if stable {
                                d = d
                                    .with_member_metadata(m.metadata(&protocol))
                                    .with_member_assignment(m.assignment.clone());
                            }
                            d
                        })
                        .collect();
                    described
                        .clone()
                        .with_group_state(sb(group.state().name()))
                        .with_protocol_type(sb(group
                            .protocol_type()
                            .unwrap_or_default()
                            .to_string()))
                        .with_protocol_data(sb(if stable { protocol } else { String::new() }))
                        .with_members(members)
                })
                .unwrap_or_else(|| not_found(described, format!("Group {id} not found.")))
        })
        .collect();
    DescribeGroupsResponse::default().with_groups(groups)
}

/// Answers DeleteGroups (DELETE on each group, GROUP_AUTHORIZATION_FAILED otherwise).
pub(crate) fn delete_groups(
    broker: &Broker,
    ctx: &RequestContext,
    req: DeleteGroupsRequest,
) -> DeleteGroupsResponse {
    let authz = ctx.authz(broker);
    let results = req
        .groups_names
        .into_iter()
        .map(|g| {
            if !authz.group(AclOperation::Delete, g.0.as_str()) {
                return DeletableGroupResult::default()
                    .with_group_id(g)
                    .with_error_code(ResponseError::GroupAuthorizationFailed.code());
            }
            let code = match broker.groups.delete_group(g.0.as_str()) {
                Ok(()) => 0,
                Err(e) => e.code(),
            };
            DeletableGroupResult::default()
                .with_group_id(g)
                .with_error_code(code)
        })
        .collect();
    DeleteGroupsResponse::default().with_results(results)
}
