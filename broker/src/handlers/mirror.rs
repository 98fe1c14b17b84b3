//! The mirror RPCs (api keys 94..=104), answered by the MirrorManager.

use tern_protocol::mirror::{MirrorRequest, MirrorResponse};

use crate::broker::Broker;

/// Handles one mirror request.
pub async fn handle(broker: &Broker, request: MirrorRequest) -> MirrorResponse {
    let m = &broker.mirrors;
    match request {
        MirrorRequest::CreateClusterMirror(r) => {
            MirrorResponse::CreateClusterMirror(m.create_mirror(&r))
        }
        MirrorRequest::StartMirrorTopics(r) => {
            MirrorResponse::StartMirrorTopics(m.start_topics(&r).await)
        }
        MirrorRequest::StopMirrorTopics(r) => {
            MirrorResponse::StopMirrorTopics(m.stop_topics(&r).await)
        }
        MirrorRequest::LastMirroredOffsets(r) => {
            MirrorResponse::LastMirroredOffsets(m.last_mirrored_offsets(&r))
        }
        MirrorRequest::ListClusterMirrors(r) => {
            MirrorResponse::ListClusterMirrors(m.list_mirrors(&r))
        }
        MirrorRequest::DescribeClusterMirrors(r) => {
            MirrorResponse::DescribeClusterMirrors(m.describe_mirrors(&r))
        }
        MirrorRequest::ReadMirrorStates(r) => MirrorResponse::ReadMirrorStates(m.read_states(&r)),
        MirrorRequest::WriteMirrorStates(r) => {
            MirrorResponse::WriteMirrorStates(m.write_states(&r))
        }
        MirrorRequest::PauseMirrorTopics(r) => {
            MirrorResponse::PauseMirrorTopics(m.pause_topics(&r).await)
        }
        MirrorRequest::ResumeMirrorTopics(r) => {
            MirrorResponse::ResumeMirrorTopics(m.resume_topics(&r).await)
        }
        MirrorRequest::DeleteClusterMirror(r) => {
            MirrorResponse::DeleteClusterMirror(m.delete_mirror(&r).await)
        }
    }
}
