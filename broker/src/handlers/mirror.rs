//! The mirror RPCs (api keys 94..=105), answered by the MirrorManager after the authorization
//! checks of the prototype (aiven/inkless, branch inkless-linking): CREATE on the cluster
//! mirror to create it, ALTER on it (and ALTER_CONFIGS on each named topic) to start, stop,
//! pause or resume topics, DELETE on it to delete it, DESCRIBE on it to list, describe or look
//! up its last mirrored offsets, CLUSTER_ACTION on the cluster for the broker-to-coordinator
//! state RPCs and BumpLeaderEpochs. A refused mirror permission answers CLUSTER_MIRROR_AUTHORIZATION_FAILED (144).

use tern_controller::acls::{AclOperation, AclResourceType};
use tern_protocol::error::ResponseError;
use tern_protocol::mirror::errors::CLUSTER_MIRROR_AUTHORIZATION_FAILED;
use tern_protocol::mirror::{
    DescribedMirror, MirrorRequest, MirrorResponse, SimpleMirrorResponse, TopicsMirrorResponse,
};

use super::{Authz, RequestContext};
use crate::broker::Broker;

/// The error of a refused mirror permission, with Kafka's message style.
fn mirror_refusal(op: AclOperation, mirror: &str) -> (i16, Option<String>) {
    (
        CLUSTER_MIRROR_AUTHORIZATION_FAILED.code(),
        Some(format!(
            "Request needs {op} permission on ClusterMirror:{mirror}."
        )),
    )
}

/// Whether the principal may `op` the mirror; the refusal as (code, message) otherwise.
fn check_mirror(
    authz: &Authz<'_>,
    op: AclOperation,
    mirror: &str,
) -> Result<(), (i16, Option<String>)> {
    if authz.allows(op, AclResourceType::ClusterMirror, mirror) {
        Ok(())
    } else {
        Err(mirror_refusal(op, mirror))
    }
}

/// ALTER on the mirror and ALTER_CONFIGS on every named topic (the prototype refuses the whole
/// request with TOPIC_AUTHORIZATION_FAILED when any topic is not allowed).
fn check_topics_change<'t>(
    authz: &Authz<'_>,
    mirror: &str,
    topics: impl IntoIterator<Item = &'t String>,
) -> Option<TopicsMirrorResponse> {
    if let Err((error_code, error_message)) = check_mirror(authz, AclOperation::Alter, mirror) {
        return Some(TopicsMirrorResponse {
            error_code,
            error_message,
            ..Default::default()
        });
    }
    let refused: Vec<&String> = topics
        .into_iter()
        .filter(|t| !authz.topic(AclOperation::AlterConfigs, t))
        .collect();
    if refused.is_empty() {
        return None;
    }
    let names: Vec<&str> = refused.iter().map(|t| t.as_str()).collect();
    Some(TopicsMirrorResponse {
        error_code: ResponseError::TopicAuthorizationFailed.code(),
        error_message: Some(format!(
            "Not authorized to alter the configs of topics: {}",
            names.join(", ")
        )),
        ..Default::default()
    })
}

/// Handles one mirror request from the principal of `ctx`.
pub(crate) async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    request: MirrorRequest,
) -> MirrorResponse {
    broker.ensure_mirror_state_topic();
    let m = &broker.mirrors;
    let authz = ctx.authz(broker);
    let cluster_action = || {
        (!authz.cluster(AclOperation::ClusterAction)).then(|| {
            (
                ResponseError::ClusterAuthorizationFailed.code(),
                Some("Request needs CLUSTER_ACTION permission on the cluster.".to_string()),
            )
        })
    };
    match request {
        MirrorRequest::CreateClusterMirror(r) => MirrorResponse::CreateClusterMirror(
            match check_mirror(&authz, AclOperation::Create, &r.mirror_name) {
                Ok(()) => m.create_mirror(&r),
                Err((error_code, error_message)) => SimpleMirrorResponse {
                    error_code,
                    error_message,
                    ..Default::default()
                },
            },
        ),
        MirrorRequest::StartMirrorTopics(r) => {
            let topics: Vec<String> = r.topics.iter().map(|t| t.topic_name.clone()).collect();
            MirrorResponse::StartMirrorTopics(
                match check_topics_change(&authz, &r.mirror_name, &topics) {
                    Some(refused) => refused,
                    None => m.start_topics(&r).await,
                },
            )
        }
        MirrorRequest::StopMirrorTopics(r) => MirrorResponse::StopMirrorTopics(
            match check_topics_change(&authz, &r.mirror_name, &r.topics) {
                Some(refused) => refused,
                None => m.stop_topics(&r).await,
            },
        ),
        MirrorRequest::LastMirroredOffsets(r) => MirrorResponse::LastMirroredOffsets(
            match check_mirror(&authz, AclOperation::Describe, &r.mirror_name) {
                Ok(()) => m.last_mirrored_offsets(&r).await,
                Err((error_code, error_message)) => {
                    tern_protocol::mirror::LastMirroredOffsetsResponse {
                        error_code,
                        error_message,
                        ..Default::default()
                    }
                }
            },
        ),
        MirrorRequest::ListClusterMirrors(r) => {
            let mut response = m.list_mirrors(&r);
            response.mirrors.retain(|l| {
                authz.allows(
                    AclOperation::Describe,
                    AclResourceType::ClusterMirror,
                    &l.mirror_name,
                )
            });
            MirrorResponse::ListClusterMirrors(response)
        }
        MirrorRequest::DescribeClusterMirrors(mut r) => {
            let may = |name: &str| {
                authz.allows(AclOperation::Describe, AclResourceType::ClusterMirror, name)
            };
            let describe_all = r.mirror_names.is_empty();
            let (allowed, refused): (Vec<String>, Vec<String>) =
                r.mirror_names.drain(..).partition(|n| may(n));
            let include_ops = r.include_authorized_operations;
            let mut response = if describe_all || !allowed.is_empty() {
                r.mirror_names = allowed;
                m.describe_mirrors(&r).await
            } else {
                // Every named mirror is refused: asking the manager with no names would
                // describe them all.
                tern_protocol::mirror::DescribeClusterMirrorsResponse::default()
            };
            // Describing all shows the mirrors the principal may describe; a named one it may
            // not answers 144.
            response.mirrors.retain(|d| may(&d.mirror_name));
            if include_ops {
                for d in &mut response.mirrors {
                    d.authorized_operations =
                        authz.authorized_operations(AclResourceType::ClusterMirror, &d.mirror_name);
                }
            }
            response
                .mirrors
                .extend(refused.into_iter().map(|mirror_name| DescribedMirror {
                    error_code: CLUSTER_MIRROR_AUTHORIZATION_FAILED.code(),
                    mirror_name,
                    ..Default::default()
                }));
            MirrorResponse::DescribeClusterMirrors(response)
        }
        MirrorRequest::ReadMirrorStates(r) => {
            MirrorResponse::ReadMirrorStates(match cluster_action() {
                None => m.read_states(&r),
                Some((error_code, error_message)) => {
                    tern_protocol::mirror::ReadMirrorStatesResponse {
                        error_code,
                        error_message,
                        ..Default::default()
                    }
                }
            })
        }
        MirrorRequest::WriteMirrorStates(r) => {
            MirrorResponse::WriteMirrorStates(match cluster_action() {
                None => m.write_states(&r).await,
                Some((error_code, error_message)) => {
                    tern_protocol::mirror::WriteMirrorStatesResponse {
                        error_code,
                        error_message,
                        ..Default::default()
                    }
                }
            })
        }
        MirrorRequest::PauseMirrorTopics(r) => MirrorResponse::PauseMirrorTopics(
            match check_topics_change(&authz, &r.mirror_name, &r.topics) {
                Some(refused) => refused,
                None => m.pause_topics(&r).await,
            },
        ),
        MirrorRequest::ResumeMirrorTopics(r) => MirrorResponse::ResumeMirrorTopics(
            match check_topics_change(&authz, &r.mirror_name, &r.topics) {
                Some(refused) => refused,
                None => m.resume_topics(&r).await,
            },
        ),
        MirrorRequest::DeleteClusterMirror(r) => MirrorResponse::DeleteClusterMirror(
            match check_mirror(&authz, AclOperation::Delete, &r.mirror_name) {
                Ok(()) => m.delete_mirror(&r).await,
                Err((error_code, error_message)) => SimpleMirrorResponse {
                    error_code,
                    error_message,
                    ..Default::default()
                },
            },
        ),
        MirrorRequest::BumpLeaderEpochs(r) => {
            MirrorResponse::BumpLeaderEpochs(match cluster_action() {
                None => m.bump_leader_epochs(&r),
                Some((error_code, _)) => tern_protocol::mirror::BumpLeaderEpochsResponse {
                    error_code,
                    ..Default::default()
                },
            })
        }
    }
}
