//! The error codes of cluster mirroring (Kafka's numbering from the cluster-mirroring proposal).

use kafka_protocol::error::ResponseError;

/// Produce to a topic that is being mirrored.
pub const READ_ONLY_TOPIC: ResponseError = ResponseError::Unknown(134);
/// CreateClusterMirror of a name already taken.
pub const CLUSTER_MIRROR_ALREADY_EXISTS: ResponseError = ResponseError::Unknown(136);
/// A mirror name that is not defined.
pub const UNKNOWN_CLUSTER_MIRROR: ResponseError = ResponseError::Unknown(137);
/// StartMirrorTopics of a topic some mirror already mirrors.
pub const TOPIC_ALREADY_IN_CLUSTER_MIRROR: ResponseError = ResponseError::Unknown(138);
/// Stop, pause or resume of a topic the mirror does not mirror.
pub const TOPIC_NOT_IN_CLUSTER_MIRROR: ResponseError = ResponseError::Unknown(139);
/// Pause of a paused topic.
pub const MIRROR_TOPIC_ALREADY_PAUSED: ResponseError = ResponseError::Unknown(140);
/// Resume of a topic that is not paused.
pub const MIRROR_TOPIC_NOT_PAUSED: ResponseError = ResponseError::Unknown(141);
/// An operation on a topic that is being stopped.
pub const MIRROR_TOPIC_BEING_STOPPED: ResponseError = ResponseError::Unknown(142);
/// DeleteClusterMirror of a mirror that still mirrors topics.
pub const CLUSTER_MIRROR_NOT_EMPTY: ResponseError = ResponseError::Unknown(143);
/// The principal may not manage cluster mirrors.
pub const CLUSTER_MIRROR_AUTHORIZATION_FAILED: ResponseError = ResponseError::Unknown(144);
/// LastMirroredOffsets of a topic that has not been stopped.
pub const MIRROR_TOPIC_NOT_STOPPED: ResponseError = ResponseError::Unknown(146);

/// Kafka's name for a mirroring error code, for messages and the CLI.
pub fn mirror_error_name(code: i16) -> Option<&'static str> {
    Some(match code {
        134 => "READ_ONLY_TOPIC",
        136 => "CLUSTER_MIRROR_ALREADY_EXISTS",
        137 => "UNKNOWN_CLUSTER_MIRROR",
        138 => "TOPIC_ALREADY_IN_CLUSTER_MIRROR",
        139 => "TOPIC_NOT_IN_CLUSTER_MIRROR",
        140 => "MIRROR_TOPIC_ALREADY_PAUSED",
        141 => "MIRROR_TOPIC_NOT_PAUSED",
        142 => "MIRROR_TOPIC_BEING_STOPPED",
        143 => "CLUSTER_MIRROR_NOT_EMPTY",
        144 => "CLUSTER_MIRROR_AUTHORIZATION_FAILED",
        146 => "MIRROR_TOPIC_NOT_STOPPED",
        _ => return None,
    })
}
