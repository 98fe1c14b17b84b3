//! The mirror RPCs (api keys 94..=105), answered by the MirrorManager after the authorization
//! checks of the prototype (aiven/inkless, branch inkless-linking): CREATE on the cluster
//! mirror to create it, ALTER on it (and ALTER_CONFIGS on each named topic) to start, stop,
//! pause or resume topics, DELETE on it to delete it, DESCRIBE on it to list, describe or look
//! up its last mirrored offsets, CLUSTER_ACTION on the cluster for the broker-to-coordinator
//! state RPCs and BumpLeaderEpochs. A refused mirror permission answers CLUSTER_MIRROR_AUTHORIZATION_FAILED (144).

use kafka_protocol::messages::describe_cluster_mirrors_response::DescribedMirror;
use kafka_protocol::messages::{
    BumpLeaderEpochsResponse, CreateClusterMirrorResponse, DeleteClusterMirrorResponse,
    DescribeClusterMirrorsResponse, LastMirroredOffsetsResponse, PauseMirrorTopicsResponse,
    ReadMirrorStatesResponse, RequestKind, ResponseKind, ResumeMirrorTopicsResponse,
    StartMirrorTopicsResponse, StopMirrorTopicsResponse, WriteMirrorStatesResponse,
};
use kafka_protocol::protocol::StrBytes;
use tern_controller::acls::{AclOperation, AclResourceType};
use tern_protocol::error::ResponseError;
use tern_protocol::mirror::errors::CLUSTER_MIRROR_AUTHORIZATION_FAILED;

use super::{sb, Authz, RequestContext};
use crate::broker::Broker;

/// A refusal: the top-level error code and message a mirror response answers with.
type Refusal = (i16, Option<StrBytes>);

/// The error of a refused mirror permission, with Kafka's message style.
fn mirror_refusal(op: AclOperation, mirror: &str) -> Refusal {
    (
        CLUSTER_MIRROR_AUTHORIZATION_FAILED.code(),
        Some(sb(format!(
            "Request needs {op} permission on ClusterMirror:{mirror}."
        ))),
    )
}

/// Whether the principal may `op` the mirror; the refusal as (code, message) otherwise.
fn check_mirror(authz: &Authz<'_>, op: AclOperation, mirror: &str) -> Result<(), Refusal> {
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
    topics: impl IntoIterator<Item = &'t StrBytes>,
) -> Result<(), Refusal> {
    check_mirror(authz, AclOperation::Alter, mirror)?;
    let refused: Vec<&str> = topics
        .into_iter()
        .map(|t| t.as_str())
        .filter(|t| !authz.topic(AclOperation::AlterConfigs, t))
        .collect();
    if refused.is_empty() {
        return Ok(());
    }
    Err((
        ResponseError::TopicAuthorizationFailed.code(),
        Some(sb(format!(
            "Not authorized to alter the configs of topics: {}",
            refused.join(", ")
        ))),
    ))
}

/// A response that carries only a refusal (its type's defaults otherwise).
macro_rules! refused {
    ($response:ident, $refusal:expr) => {{
        let (error_code, error_message) = $refusal;
        $response::default()
            .with_error_code(error_code)
            .with_error_message(error_message)
    }};
}

/// Handles one mirror request from the principal of `ctx`; `None` for another API's request.
pub(crate) async fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    request: RequestKind,
) -> Option<ResponseKind> {
    broker.ensure_mirror_state_topic();
    let m = &broker.mirrors;
    let authz = ctx.authz(broker);
    let cluster_action = || {
        if authz.cluster(AclOperation::ClusterAction) {
            return Ok(());
        }
        Err((
            ResponseError::ClusterAuthorizationFailed.code(),
            Some(sb(
                "Request needs CLUSTER_ACTION permission on the cluster.",
            )),
        ))
    };
    // Start, stop, pause and resume (one generated type each): the topics-change check, then
    // the manager.
    macro_rules! topics_change {
        ($r:ident, $response:ident, $method:ident) => {{
            let topics = $r.topics.iter().map(|t| &t.topic_name);
            match check_topics_change(&authz, &$r.mirror_name, topics) {
                Ok(()) => m.$method(&$r).await,
                Err(refusal) => refused!($response, refusal),
            }
        }};
    }
    Some(match request {
        RequestKind::CreateClusterMirror(r) => ResponseKind::CreateClusterMirror(
            match check_mirror(&authz, AclOperation::Create, &r.mirror_name) {
                Ok(()) => m.create_mirror(&r),
                Err(refusal) => refused!(CreateClusterMirrorResponse, refusal),
            },
        ),
        RequestKind::StartMirrorTopics(r) => ResponseKind::StartMirrorTopics(topics_change!(
            r,
            StartMirrorTopicsResponse,
            start_topics
        )),
        RequestKind::StopMirrorTopics(r) => {
            ResponseKind::StopMirrorTopics(topics_change!(r, StopMirrorTopicsResponse, stop_topics))
        }
        RequestKind::LastMirroredOffsets(r) => ResponseKind::LastMirroredOffsets(
            match check_mirror(&authz, AclOperation::Describe, &r.mirror_name) {
                Ok(()) => m.last_mirrored_offsets(&r).await,
                Err(refusal) => refused!(LastMirroredOffsetsResponse, refusal),
            },
        ),
        RequestKind::ListClusterMirrors(r) => {
            let mut response = m.list_mirrors(&r);
            response.mirrors.retain(|l| {
                authz.allows(
                    AclOperation::Describe,
                    AclResourceType::ClusterMirror,
                    &l.mirror_name,
                )
            });
            ResponseKind::ListClusterMirrors(response)
        }
        RequestKind::DescribeClusterMirrors(mut r) => {
            let may = |name: &str| {
                authz.allows(AclOperation::Describe, AclResourceType::ClusterMirror, name)
            };
            let describe_all = r.mirror_names.is_empty();
            let (allowed, refused): (Vec<StrBytes>, Vec<StrBytes>) =
                r.mirror_names.drain(..).partition(|n| may(n));
            let include_ops = r.include_authorized_operations;
            let mut response = if describe_all || !allowed.is_empty() {
                r.mirror_names = allowed;
                m.describe_mirrors(&r).await
            } else {
                // Every named mirror is refused: asking the manager with no names would
                // describe them all.
                DescribeClusterMirrorsResponse::default()
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
                .extend(refused.into_iter().map(|mirror_name| {
                    DescribedMirror::default()
                        .with_error_code(CLUSTER_MIRROR_AUTHORIZATION_FAILED.code())
                        .with_mirror_name(mirror_name)
                }));
            ResponseKind::DescribeClusterMirrors(response)
        }
        RequestKind::ReadMirrorStates(r) => {
            ResponseKind::ReadMirrorStates(match cluster_action() {
                Ok(()) => m.read_states(&r),
                Err(refusal) => refused!(ReadMirrorStatesResponse, refusal),
            })
        }
        RequestKind::WriteMirrorStates(r) => {
            ResponseKind::WriteMirrorStates(match cluster_action() {
                Ok(()) => m.write_states(&r).await,
                Err(refusal) => refused!(WriteMirrorStatesResponse, refusal),
            })
        }
        RequestKind::PauseMirrorTopics(r) => ResponseKind::PauseMirrorTopics(topics_change!(
            r,
            PauseMirrorTopicsResponse,
            pause_topics
        )),
        RequestKind::ResumeMirrorTopics(r) => ResponseKind::ResumeMirrorTopics(topics_change!(
            r,
            ResumeMirrorTopicsResponse,
            resume_topics
        )),
        RequestKind::DeleteClusterMirror(r) => ResponseKind::DeleteClusterMirror(
            match check_mirror(&authz, AclOperation::Delete, &r.mirror_name) {
                Ok(()) => m.delete_mirror(&r).await,
                Err(refusal) => refused!(DeleteClusterMirrorResponse, refusal),
            },
        ),
        // Its schema has no top-level error message.
        RequestKind::BumpLeaderEpochs(r) => {
            ResponseKind::BumpLeaderEpochs(match cluster_action() {
                Ok(()) => m.bump_leader_epochs(&r),
                Err((error_code, _)) => {
                    BumpLeaderEpochsResponse::default().with_error_code(error_code)
                }
            })
        }
        _ => return None,
    })
}
