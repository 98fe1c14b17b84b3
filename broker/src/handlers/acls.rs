//! CreateAcls, DescribeAcls and DeleteAcls, with Kafka's checks: SECURITY_DISABLED without an
//! authorizer, CLUSTER_AUTHORIZATION_FAILED without ALTER (create, delete) or DESCRIBE
//! (describe) on the cluster, INVALID_REQUEST for bindings and filters Kafka refuses.

use std::collections::BTreeMap;

use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use kafka_protocol::ResponseError;
use tern_controller::acls::{
    AclBinding, AclBindingFilter, AclOperation, AclPatternType, AclPermissionType, AclResourceType,
};

use super::api_error_fields::WithApiError;
use super::{sb, RequestContext};
use crate::broker::Broker;

const NO_AUTHORIZER: &str = "No Authorizer is configured.";

/// Why a request may not go on: (error, message), or None.
fn refusal(
    broker: &Broker,
    ctx: &RequestContext,
    op: AclOperation,
) -> Option<(ResponseError, String)> {
    let authz = ctx.authz(broker);
    if !authz.enabled() {
        return Some((ResponseError::SecurityDisabled, NO_AUTHORIZER.into()));
    }
    if !authz.cluster(op) {
        return Some((
            ResponseError::ClusterAuthorizationFailed,
            format!("{op} on the cluster is not allowed for {}", ctx.principal),
        ));
    }
    None
}

/// Version 0 of the three APIs knows only literal patterns (the field came with v1), so its
/// filters match, and its clients see, literal patterns only.
fn pattern_of(code: i8, version: i16) -> AclPatternType {
    if version == 0 {
        AclPatternType::Literal
    } else {
        AclPatternType::from_code(code)
    }
}

/// Answers CreateAcls.
pub(crate) fn create(
    broker: &Broker,
    ctx: &RequestContext,
    req: CreateAclsRequest,
    version: i16,
) -> CreateAclsResponse {
    if let Some((error, message)) = refusal(broker, ctx, AclOperation::Alter) {
        let results = req
            .creations
            .iter()
            .map(|_| {
                AclCreationResult::default()
                    .with_error_code(error.code())
                    .with_error_message(Some(sb(message.clone())))
            })
            .collect();
        return CreateAclsResponse::default().with_results(results);
    }
    let bindings: Vec<AclBinding> = req
        .creations
        .iter()
        .map(|c| AclBinding {
            resource_type: AclResourceType::from_code(c.resource_type),
            resource_name: c.resource_name.to_string(),
            pattern_type: pattern_of(c.resource_pattern_type, version),
            principal: c.principal.to_string(),
            host: c.host.to_string(),
            operation: AclOperation::from_code(c.operation),
            permission: AclPermissionType::from_code(c.permission_type),
        })
        .collect();
    let results = broker
        .controller
        .create_acls(&bindings)
        .into_iter()
        .map(|r| match r {
            Ok(()) => AclCreationResult::default(),
            Err(e) => AclCreationResult::default().with_api_error(e),
        })
        .collect();
    CreateAclsResponse::default().with_results(results)
}

/// Answers DescribeAcls: the matching ACLs grouped by resource pattern.
pub(crate) fn describe(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeAclsRequest,
    version: i16,
) -> DescribeAclsResponse {
    let error = |e: ResponseError, m: String| {
        DescribeAclsResponse::default()
            .with_error_code(e.code())
            .with_error_message(Some(sb(m)))
    };
    if let Some((e, m)) = refusal(broker, ctx, AclOperation::Describe) {
        return error(e, m);
    }
    let filter = AclBindingFilter {
        resource_type: AclResourceType::from_code(req.resource_type_filter),
        resource_name: req.resource_name_filter.as_ref().map(|n| n.to_string()),
        pattern_type: pattern_of(req.pattern_type_filter, version),
        principal: req.principal_filter.as_ref().map(|p| p.to_string()),
        host: req.host_filter.as_ref().map(|h| h.to_string()),
        operation: AclOperation::from_code(req.operation),
        permission: AclPermissionType::from_code(req.permission_type),
    };
    if filter.is_unknown() {
        return error(
            ResponseError::InvalidRequest,
            format!("DescribeAcls filter has UNKNOWN elements: {filter:?}"),
        );
    }
    let image = broker.controller.image();
    let mut by_resource: BTreeMap<(i8, String, i8), Vec<AclDescription>> = BTreeMap::new();
    for acl in image.acls.values().filter(|a| filter.matches(a)) {
        by_resource
            .entry((
                acl.resource_type.code(),
                acl.resource_name.clone(),
                acl.pattern_type.code(),
            ))
            .or_default()
            .push(
                AclDescription::default()
                    .with_principal(sb(acl.principal.clone()))
                    .with_host(sb(acl.host.clone()))
                    .with_operation(acl.operation.code())
                    .with_permission_type(acl.permission.code()),
            );
    }
    let resources = by_resource
        .into_iter()
        .map(|((resource_type, name, pattern_type), acls)| {
            DescribeAclsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(sb(name))
                .with_pattern_type(pattern_type)
                .with_acls(acls)
        })
        .collect();
    DescribeAclsResponse::default().with_resources(resources)
}

fn delete_filter(f: &DeleteAclsFilter, version: i16) -> AclBindingFilter {
    AclBindingFilter {
        resource_type: AclResourceType::from_code(f.resource_type_filter),
        resource_name: f.resource_name_filter.as_ref().map(|n| n.to_string()),
        pattern_type: pattern_of(f.pattern_type_filter, version),
        principal: f.principal_filter.as_ref().map(|p| p.to_string()),
        host: f.host_filter.as_ref().map(|h| h.to_string()),
        operation: AclOperation::from_code(f.operation),
        permission: AclPermissionType::from_code(f.permission_type),
    }
}

/// Answers DeleteAcls: per filter, the ACLs it matched and deleted.
pub(crate) fn delete(
    broker: &Broker,
    ctx: &RequestContext,
    req: DeleteAclsRequest,
    version: i16,
) -> DeleteAclsResponse {
    if let Some((error, message)) = refusal(broker, ctx, AclOperation::Alter) {
        let results = req
            .filters
            .iter()
            .map(|_| {
                DeleteAclsFilterResult::default()
                    .with_error_code(error.code())
                    .with_error_message(Some(sb(message.clone())))
            })
            .collect();
        return DeleteAclsResponse::default().with_filter_results(results);
    }
    let filters: Vec<AclBindingFilter> = req
        .filters
        .iter()
        .map(|f| delete_filter(f, version))
        .collect();
    let results = broker
        .controller
        .delete_acls(&filters)
        .into_iter()
        .map(|r| match r {
            Ok(matched) => DeleteAclsFilterResult::default().with_matching_acls(
                matched
                    .into_iter()
                    .map(|a| {
                        DeleteAclsMatchingAcl::default()
                            .with_resource_type(a.resource_type.code())
                            .with_resource_name(sb(a.resource_name))
                            .with_pattern_type(a.pattern_type.code())
                            .with_principal(sb(a.principal))
                            .with_host(sb(a.host))
                            .with_operation(a.operation.code())
                            .with_permission_type(a.permission.code())
                    })
                    .collect(),
            ),
            Err(e) => DeleteAclsFilterResult::default().with_api_error(e),
        })
        .collect();
    DeleteAclsResponse::default().with_filter_results(results)
}
