//! Conversions between the mirror RPCs' in-memory structs (`messages.rs`, what the broker, the
//! mirror manager and the CLI work with) and the kafka-protocol crate's generated types (the
//! wire, generated from `protocol/schemas/mirror`). A seam while the users move to the
//! generated types: it goes away with `messages.rs` once they have.

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::messages as m;
use super::messages::{MirrorRequest, MirrorResponse};

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

fn osb(s: &Option<String>) -> Option<StrBytes> {
    s.as_deref().map(sb)
}

fn st(s: &StrBytes) -> String {
    s.to_string()
}

fn ost(s: &Option<StrBytes>) -> Option<String> {
    s.as_ref().map(st)
}

fn sbs(v: &[String]) -> Vec<StrBytes> {
    v.iter().map(|s| sb(s)).collect()
}

fn sts(v: &[StrBytes]) -> Vec<String> {
    v.iter().map(st).collect()
}

/// Stop, Pause and Resume requests: topics by name, without (Pause, Resume) or with (Stop)
/// patterns.
macro_rules! topics_request {
    ($to:ident, $from:ident, $module:ident, $type:ident, $($patterns:ident)?) => {
        fn $to(r: &m::MirrorTopicsRequest) -> $type {
            let mut out = $type::default();
            out.mirror_name = sb(&r.mirror_name);
            out.topics = r
                .topics
                .iter()
                .map(|t| {
                    let mut d = $module::TopicData::default();
                    d.topic_name = sb(t);
                    d
                })
                .collect();
            out.state_validation_offset = r.state_validation_offset;
            $(out.$patterns = sbs(&r.patterns);)?
            out
        }

        fn $from(r: &$type) -> m::MirrorTopicsRequest {
            m::MirrorTopicsRequest {
                mirror_name: st(&r.mirror_name),
                topics: r.topics.iter().map(|t| st(&t.topic_name)).collect(),
                patterns: std::iter::empty()$(.chain(sts(&r.$patterns)))?.collect(),
                state_validation_offset: r.state_validation_offset,
            }
        }
    };
}

topics_request!(
    stop_to,
    stop_from,
    stop_mirror_topics_request,
    StopMirrorTopicsRequest,
    patterns
);
topics_request!(
    pause_to,
    pause_from,
    pause_mirror_topics_request,
    PauseMirrorTopicsRequest,
);
topics_request!(
    resume_to,
    resume_from,
    resume_mirror_topics_request,
    ResumeMirrorTopicsRequest,
);

/// Start, Stop, Pause and Resume responses: per-topic results.
macro_rules! topics_response {
    ($to:ident, $from:ident, $module:ident, $type:ident) => {
        fn $to(r: &m::TopicsMirrorResponse) -> $type {
            let mut out = $type::default();
            out.throttle_time_ms = r.throttle_time_ms;
            out.error_code = r.error_code;
            out.error_message = osb(&r.error_message);
            out.topics = r
                .topics
                .iter()
                .map(|t| {
                    let mut d = $module::TopicResult::default();
                    d.name = sb(&t.name);
                    d.error_code = t.error_code;
                    d.error_message = osb(&t.error_message);
                    d
                })
                .collect();
            out
        }

        fn $from(r: &$type) -> m::TopicsMirrorResponse {
            m::TopicsMirrorResponse {
                throttle_time_ms: r.throttle_time_ms,
                error_code: r.error_code,
                error_message: ost(&r.error_message),
                topics: r
                    .topics
                    .iter()
                    .map(|t| m::TopicResult {
                        name: st(&t.name),
                        error_code: t.error_code,
                        error_message: ost(&t.error_message),
                    })
                    .collect(),
            }
        }
    };
}

topics_response!(
    start_resp_to,
    start_resp_from,
    start_mirror_topics_response,
    StartMirrorTopicsResponse
);
topics_response!(
    stop_resp_to,
    stop_resp_from,
    stop_mirror_topics_response,
    StopMirrorTopicsResponse
);
topics_response!(
    pause_resp_to,
    pause_resp_from,
    pause_mirror_topics_response,
    PauseMirrorTopicsResponse
);
topics_response!(
    resume_resp_to,
    resume_resp_from,
    resume_mirror_topics_response,
    ResumeMirrorTopicsResponse
);

/// Create and Delete responses: a top-level error only.
macro_rules! simple_response {
    ($to:ident, $from:ident, $type:ident) => {
        fn $to(r: &m::SimpleMirrorResponse) -> $type {
            let mut out = $type::default();
            out.throttle_time_ms = r.throttle_time_ms;
            out.error_code = r.error_code;
            out.error_message = osb(&r.error_message);
            out
        }

        fn $from(r: &$type) -> m::SimpleMirrorResponse {
            m::SimpleMirrorResponse {
                throttle_time_ms: r.throttle_time_ms,
                error_code: r.error_code,
                error_message: ost(&r.error_message),
            }
        }
    };
}

simple_response!(
    create_resp_to,
    create_resp_from,
    CreateClusterMirrorResponse
);
simple_response!(
    delete_resp_to,
    delete_resp_from,
    DeleteClusterMirrorResponse
);

/// Last mirrored offsets and read states requests: topics and partition indexes.
macro_rules! topic_partitions_request {
    ($to:ident, $from:ident, $module:ident, $type:ident) => {
        fn $to(mirror_name: &str, topics: &[m::TopicPartitions]) -> $type {
            let mut out = $type::default();
            out.mirror_name = sb(mirror_name);
            out.topics = topics
                .iter()
                .map(|t| {
                    let mut d = $module::TopicData::default();
                    d.name = sb(&t.name);
                    d.partitions = t
                        .partitions
                        .iter()
                        .map(|p| {
                            let mut pd = $module::PartitionData::default();
                            pd.partition_index = *p;
                            pd
                        })
                        .collect();
                    d
                })
                .collect();
            out
        }

        fn $from(r: &$type) -> (String, Vec<m::TopicPartitions>) {
            let topics = r
                .topics
                .iter()
                .map(|t| m::TopicPartitions {
                    name: st(&t.name),
                    partitions: t.partitions.iter().map(|p| p.partition_index).collect(),
                })
                .collect();
            (st(&r.mirror_name), topics)
        }
    };
}

topic_partitions_request!(
    last_to,
    last_from,
    last_mirrored_offsets_request,
    LastMirroredOffsetsRequest
);
topic_partitions_request!(
    read_to,
    read_from,
    read_mirror_states_request,
    ReadMirrorStatesRequest
);

/// The wire form of a mirror request.
pub fn request_kind(request: &MirrorRequest) -> RequestKind {
    match request {
        MirrorRequest::CreateClusterMirror(r) => {
            let mut out = CreateClusterMirrorRequest::default();
            out.mirror_name = sb(&r.mirror_name);
            out.configs = r
                .configs
                .iter()
                .map(|(name, value)| {
                    let mut c = create_cluster_mirror_request::Config::default();
                    c.name = sb(name);
                    c.value = osb(value);
                    c
                })
                .collect();
            RequestKind::CreateClusterMirror(out)
        }
        MirrorRequest::StartMirrorTopics(r) => {
            let mut out = StartMirrorTopicsRequest::default();
            out.mirror_name = sb(&r.mirror_name);
            out.topics = r
                .topics
                .iter()
                .map(|t| {
                    let mut d = start_mirror_topics_request::TopicData::default();
                    d.topic_id = t.topic_id;
                    d.topic_name = sb(&t.topic_name);
                    d.num_partitions = t.num_partitions;
                    d
                })
                .collect();
            out.state_validation_offset = r.state_validation_offset;
            out.include_patterns = sbs(&r.include_patterns);
            out.exclude_patterns = sbs(&r.exclude_patterns);
            RequestKind::StartMirrorTopics(out)
        }
        MirrorRequest::StopMirrorTopics(r) => RequestKind::StopMirrorTopics(stop_to(r)),
        MirrorRequest::PauseMirrorTopics(r) => RequestKind::PauseMirrorTopics(pause_to(r)),
        MirrorRequest::ResumeMirrorTopics(r) => RequestKind::ResumeMirrorTopics(resume_to(r)),
        MirrorRequest::LastMirroredOffsets(r) => {
            RequestKind::LastMirroredOffsets(last_to(&r.mirror_name, &r.topics))
        }
        MirrorRequest::ReadMirrorStates(r) => {
            RequestKind::ReadMirrorStates(read_to(&r.mirror_name, &r.topics))
        }
        MirrorRequest::ListClusterMirrors(r) => {
            let mut out = ListClusterMirrorsRequest::default();
            out.include_topic_names = r.include_topic_names;
            RequestKind::ListClusterMirrors(out)
        }
        MirrorRequest::DescribeClusterMirrors(r) => {
            let mut out = DescribeClusterMirrorsRequest::default();
            out.mirror_names = sbs(&r.mirror_names);
            out.include_authorized_operations = r.include_authorized_operations;
            out.cluster_id = osb(&r.cluster_id);
            out.last_mirror_epoch_lookups = r
                .last_mirror_epoch_lookups
                .iter()
                .map(|l| {
                    let mut d = describe_cluster_mirrors_request::LastMirrorEpochLookup::default();
                    d.topic_id = l.topic_id;
                    d.partitions = l.partitions.clone();
                    d
                })
                .collect();
            out.local_only = r.local_only;
            RequestKind::DescribeClusterMirrors(out)
        }
        MirrorRequest::WriteMirrorStates(r) => {
            use write_mirror_states_request::{PartitionData, TopicData};
            let mut out = WriteMirrorStatesRequest::default();
            out.mirror_name = sb(&r.mirror_name);
            out.topics = r
                .topics
                .iter()
                .map(|t| {
                    let mut d = TopicData::default();
                    d.name = sb(&t.name);
                    d.partitions = t
                        .partitions
                        .iter()
                        .map(|p| {
                            let mut pd = PartitionData::default();
                            pd.partition_index = p.partition_index;
                            pd.last_mirror_epoch = p.last_mirror_epoch;
                            pd.state = p.state;
                            pd.retry_attempt = p.retry_attempt;
                            pd.error_message = osb(&p.error_message);
                            pd.last_mirrored_offset = p.last_mirrored_offset;
                            pd.previous_state = p.previous_state;
                            pd.leader_epoch = p.leader_epoch;
                            pd
                        })
                        .collect();
                    d
                })
                .collect();
            out.stopped_topics = sbs(&r.stopped_topics);
            RequestKind::WriteMirrorStates(out)
        }
        MirrorRequest::DeleteClusterMirror(r) => {
            let mut out = DeleteClusterMirrorRequest::default();
            out.mirror_name = sb(&r.mirror_name);
            out.state_validation_offset = r.state_validation_offset;
            RequestKind::DeleteClusterMirror(out)
        }
        MirrorRequest::BumpLeaderEpochs(r) => {
            use bump_leader_epochs_request::{PartitionData, TopicData};
            let mut out = BumpLeaderEpochsRequest::default();
            out.topics = r
                .topics
                .iter()
                .map(|t| {
                    let mut d = TopicData::default();
                    d.topic_id = t.topic_id;
                    d.partitions = t
                        .partitions
                        .iter()
                        .map(|p| {
                            let mut pd = PartitionData::default();
                            pd.partition_index = p.partition_index;
                            pd.min_leader_epoch = p.min_leader_epoch;
                            pd
                        })
                        .collect();
                    d
                })
                .collect();
            RequestKind::BumpLeaderEpochs(out)
        }
    }
}

/// The in-memory form of a decoded mirror request; `None` for any other request.
pub fn mirror_request(request: &RequestKind) -> Option<MirrorRequest> {
    Some(match request {
        RequestKind::CreateClusterMirror(r) => {
            MirrorRequest::CreateClusterMirror(m::CreateClusterMirrorRequest {
                mirror_name: st(&r.mirror_name),
                configs: r
                    .configs
                    .iter()
                    .map(|c| (st(&c.name), ost(&c.value)))
                    .collect(),
            })
        }
        RequestKind::StartMirrorTopics(r) => {
            MirrorRequest::StartMirrorTopics(m::StartMirrorTopicsRequest {
                mirror_name: st(&r.mirror_name),
                topics: r
                    .topics
                    .iter()
                    .map(|t| m::StartMirrorTopic {
                        topic_id: t.topic_id,
                        topic_name: st(&t.topic_name),
                        num_partitions: t.num_partitions,
                    })
                    .collect(),
                include_patterns: sts(&r.include_patterns),
                exclude_patterns: sts(&r.exclude_patterns),
                state_validation_offset: r.state_validation_offset,
            })
        }
        RequestKind::StopMirrorTopics(r) => MirrorRequest::StopMirrorTopics(stop_from(r)),
        RequestKind::PauseMirrorTopics(r) => MirrorRequest::PauseMirrorTopics(pause_from(r)),
        RequestKind::ResumeMirrorTopics(r) => MirrorRequest::ResumeMirrorTopics(resume_from(r)),
        RequestKind::LastMirroredOffsets(r) => {
            let (mirror_name, topics) = last_from(r);
            MirrorRequest::LastMirroredOffsets(m::LastMirroredOffsetsRequest {
                mirror_name,
                topics,
            })
        }
        RequestKind::ReadMirrorStates(r) => {
            let (mirror_name, topics) = read_from(r);
            MirrorRequest::ReadMirrorStates(m::ReadMirrorStatesRequest {
                mirror_name,
                topics,
            })
        }
        RequestKind::ListClusterMirrors(r) => {
            MirrorRequest::ListClusterMirrors(m::ListClusterMirrorsRequest {
                include_topic_names: r.include_topic_names,
            })
        }
        RequestKind::DescribeClusterMirrors(r) => {
            MirrorRequest::DescribeClusterMirrors(m::DescribeClusterMirrorsRequest {
                mirror_names: sts(&r.mirror_names),
                include_authorized_operations: r.include_authorized_operations,
                cluster_id: ost(&r.cluster_id),
                last_mirror_epoch_lookups: r
                    .last_mirror_epoch_lookups
                    .iter()
                    .map(|l| m::LastMirrorEpochLookup {
                        topic_id: l.topic_id,
                        partitions: l.partitions.clone(),
                    })
                    .collect(),
                local_only: r.local_only,
            })
        }
        RequestKind::WriteMirrorStates(r) => {
            MirrorRequest::WriteMirrorStates(m::WriteMirrorStatesRequest {
                mirror_name: st(&r.mirror_name),
                topics: r
                    .topics
                    .iter()
                    .map(|t| m::WriteMirrorStateTopic {
                        name: st(&t.name),
                        partitions: t
                            .partitions
                            .iter()
                            .map(|p| m::WriteMirrorStatePartition {
                                partition_index: p.partition_index,
                                last_mirror_epoch: p.last_mirror_epoch,
                                state: p.state,
                                retry_attempt: p.retry_attempt,
                                error_message: ost(&p.error_message),
                                last_mirrored_offset: p.last_mirrored_offset,
                                previous_state: p.previous_state,
                                leader_epoch: p.leader_epoch,
                            })
                            .collect(),
                    })
                    .collect(),
                stopped_topics: sts(&r.stopped_topics),
            })
        }
        RequestKind::DeleteClusterMirror(r) => {
            MirrorRequest::DeleteClusterMirror(m::DeleteClusterMirrorRequest {
                mirror_name: st(&r.mirror_name),
                state_validation_offset: r.state_validation_offset,
            })
        }
        RequestKind::BumpLeaderEpochs(r) => {
            MirrorRequest::BumpLeaderEpochs(m::BumpLeaderEpochsRequest {
                topics: r
                    .topics
                    .iter()
                    .map(|t| m::BumpLeaderEpochTopic {
                        topic_id: t.topic_id,
                        partitions: t
                            .partitions
                            .iter()
                            .map(|p| m::BumpLeaderEpochPartition {
                                partition_index: p.partition_index,
                                min_leader_epoch: p.min_leader_epoch,
                            })
                            .collect(),
                    })
                    .collect(),
            })
        }
        _ => return None,
    })
}

/// The wire form of a mirror response.
pub fn response_kind(response: &MirrorResponse) -> ResponseKind {
    match response {
        MirrorResponse::CreateClusterMirror(r) => {
            ResponseKind::CreateClusterMirror(create_resp_to(r))
        }
        MirrorResponse::DeleteClusterMirror(r) => {
            ResponseKind::DeleteClusterMirror(delete_resp_to(r))
        }
        MirrorResponse::StartMirrorTopics(r) => ResponseKind::StartMirrorTopics(start_resp_to(r)),
        MirrorResponse::StopMirrorTopics(r) => ResponseKind::StopMirrorTopics(stop_resp_to(r)),
        MirrorResponse::PauseMirrorTopics(r) => ResponseKind::PauseMirrorTopics(pause_resp_to(r)),
        MirrorResponse::ResumeMirrorTopics(r) => {
            ResponseKind::ResumeMirrorTopics(resume_resp_to(r))
        }
        MirrorResponse::LastMirroredOffsets(r) => {
            use last_mirrored_offsets_response::{PartitionResult, TopicResult};
            let mut out = LastMirroredOffsetsResponse::default();
            out.throttle_time_ms = r.throttle_time_ms;
            out.error_code = r.error_code;
            out.error_message = osb(&r.error_message);
            out.topics = r
                .topics
                .iter()
                .map(|t| {
                    let mut d = TopicResult::default();
                    d.name = sb(&t.name);
                    d.partitions = t
                        .partitions
                        .iter()
                        .map(|p| {
                            let mut pd = PartitionResult::default();
                            pd.partition_index = p.partition_index;
                            pd.last_mirrored_offset = p.last_mirrored_offset;
                            pd.error_code = p.error_code;
                            pd
                        })
                        .collect();
                    d
                })
                .collect();
            ResponseKind::LastMirroredOffsets(out)
        }
        MirrorResponse::ListClusterMirrors(r) => {
            let mut out = ListClusterMirrorsResponse::default();
            out.throttle_time_ms = r.throttle_time_ms;
            out.error_code = r.error_code;
            out.error_message = osb(&r.error_message);
            out.mirrors = r
                .mirrors
                .iter()
                .map(|l| {
                    let mut d = list_cluster_mirrors_response::ListedMirror::default();
                    d.mirror_name = sb(&l.mirror_name);
                    d.source_bootstrap = sb(&l.source_bootstrap);
                    d.source_cluster_id = sb(&l.source_cluster_id);
                    d.topic_count = l.topic_count;
                    d.topic_names = sbs(&l.topic_names);
                    d
                })
                .collect();
            ResponseKind::ListClusterMirrors(out)
        }
        MirrorResponse::DescribeClusterMirrors(r) => {
            use describe_cluster_mirrors_response::*;
            let mut out = DescribeClusterMirrorsResponse::default();
            out.throttle_time_ms = r.throttle_time_ms;
            out.error_code = r.error_code;
            out.error_message = osb(&r.error_message);
            out.mirrors = r
                .mirrors
                .iter()
                .map(|dm| {
                    let mut d = DescribedMirror::default();
                    d.error_code = dm.error_code;
                    d.mirror_name = sb(&dm.mirror_name);
                    d.authorized_operations = dm.authorized_operations;
                    d.topics = dm
                        .topics
                        .iter()
                        .map(|t| {
                            let mut mt = MirrorTopic::default();
                            mt.topic_name = sb(&t.topic_name);
                            mt.partitions = t
                                .partitions
                                .iter()
                                .map(|p| {
                                    let mut mp = MirrorPartition::default();
                                    mp.partition_index = p.partition_index;
                                    mp.source_offset = p.source_offset;
                                    mp.destination_offset = p.destination_offset;
                                    mp.lag = p.lag;
                                    mp.state_value = sb(&p.state_value);
                                    mp.retry_attempt = p.retry_attempt;
                                    mp.error_message = osb(&p.error_message);
                                    mp
                                })
                                .collect();
                            mt
                        })
                        .collect();
                    d
                })
                .collect();
            out.lookup_results = r
                .lookup_results
                .iter()
                .map(|l| {
                    let mut d = LookupResult::default();
                    d.topic_id = l.topic_id;
                    d.partitions = l
                        .partitions
                        .iter()
                        .map(|p| {
                            let mut lp = LookupPartition::default();
                            lp.partition_index = p.partition_index;
                            lp.last_mirror_epoch = p.last_mirror_epoch;
                            lp
                        })
                        .collect();
                    d
                })
                .collect();
            ResponseKind::DescribeClusterMirrors(out)
        }
        MirrorResponse::ReadMirrorStates(r) => {
            use read_mirror_states_response::{PartitionResult, TopicResult};
            let mut out = ReadMirrorStatesResponse::default();
            out.throttle_time_ms = r.throttle_time_ms;
            out.error_code = r.error_code;
            out.error_message = osb(&r.error_message);
            out.topics = r
                .topics
                .iter()
                .map(|t| {
                    let mut d = TopicResult::default();
                    d.name = sb(&t.name);
                    d.partitions = t
                        .partitions
                        .iter()
                        .map(|p| {
                            let mut pd = PartitionResult::default();
                            pd.partition_index = p.partition_index;
                            pd.last_mirror_epoch = p.last_mirror_epoch;
                            pd.state = p.state;
                            pd.error_code = p.error_code;
                            pd.previous_state = p.previous_state;
                            pd.retry_attempt = p.retry_attempt;
                            pd.error_message = osb(&p.error_message);
                            pd.last_mirrored_offset = p.last_mirrored_offset;
                            pd
                        })
                        .collect();
                    d
                })
                .collect();
            ResponseKind::ReadMirrorStates(out)
        }
        MirrorResponse::WriteMirrorStates(r) => {
            use write_mirror_states_response::{PartitionResult, TopicResult};
            let mut out = WriteMirrorStatesResponse::default();
            out.throttle_time_ms = r.throttle_time_ms;
            out.error_code = r.error_code;
            out.error_message = osb(&r.error_message);
            out.topics = r
                .topics
                .iter()
                .map(|t| {
                    let mut d = TopicResult::default();
                    d.name = sb(&t.name);
                    d.partitions = t
                        .partitions
                        .iter()
                        .map(|p| {
                            let mut pd = PartitionResult::default();
                            pd.partition_index = p.partition_index;
                            pd.error_code = p.error_code;
                            pd.error_message = osb(&p.error_message);
                            pd
                        })
                        .collect();
                    d
                })
                .collect();
            ResponseKind::WriteMirrorStates(out)
        }
        MirrorResponse::BumpLeaderEpochs(r) => {
            use bump_leader_epochs_response::{PartitionResult, TopicResult};
            let mut out = BumpLeaderEpochsResponse::default();
            out.throttle_time_ms = r.throttle_time_ms;
            out.error_code = r.error_code;
            out.topics = r
                .topics
                .iter()
                .map(|t| {
                    let mut d = TopicResult::default();
                    d.topic_name = sb(&t.topic_name);
                    d.partitions = t
                        .partitions
                        .iter()
                        .map(|p| {
                            let mut pd = PartitionResult::default();
                            pd.partition_index = p.partition_index;
                            pd.error_code = p.error_code;
                            pd
                        })
                        .collect();
                    d
                })
                .collect();
            ResponseKind::BumpLeaderEpochs(out)
        }
    }
}

/// The in-memory form of a decoded mirror response; `None` for any other response.
pub fn mirror_response(response: &ResponseKind) -> Option<MirrorResponse> {
    Some(match response {
        ResponseKind::CreateClusterMirror(r) => {
            MirrorResponse::CreateClusterMirror(create_resp_from(r))
        }
        ResponseKind::DeleteClusterMirror(r) => {
            MirrorResponse::DeleteClusterMirror(delete_resp_from(r))
        }
        ResponseKind::StartMirrorTopics(r) => MirrorResponse::StartMirrorTopics(start_resp_from(r)),
        ResponseKind::StopMirrorTopics(r) => MirrorResponse::StopMirrorTopics(stop_resp_from(r)),
        ResponseKind::PauseMirrorTopics(r) => MirrorResponse::PauseMirrorTopics(pause_resp_from(r)),
        ResponseKind::ResumeMirrorTopics(r) => {
            MirrorResponse::ResumeMirrorTopics(resume_resp_from(r))
        }
        ResponseKind::LastMirroredOffsets(r) => {
            MirrorResponse::LastMirroredOffsets(m::LastMirroredOffsetsResponse {
                throttle_time_ms: r.throttle_time_ms,
                error_code: r.error_code,
                error_message: ost(&r.error_message),
                topics: r
                    .topics
                    .iter()
                    .map(|t| m::LastMirroredOffsetTopic {
                        name: st(&t.name),
                        partitions: t
                            .partitions
                            .iter()
                            .map(|p| m::LastMirroredOffsetPartition {
                                partition_index: p.partition_index,
                                last_mirrored_offset: p.last_mirrored_offset,
                                error_code: p.error_code,
                            })
                            .collect(),
                    })
                    .collect(),
            })
        }
        ResponseKind::ListClusterMirrors(r) => {
            MirrorResponse::ListClusterMirrors(m::ListClusterMirrorsResponse {
                throttle_time_ms: r.throttle_time_ms,
                error_code: r.error_code,
                error_message: ost(&r.error_message),
                mirrors: r
                    .mirrors
                    .iter()
                    .map(|l| m::ListedMirror {
                        mirror_name: st(&l.mirror_name),
                        source_bootstrap: st(&l.source_bootstrap),
                        source_cluster_id: st(&l.source_cluster_id),
                        topic_count: l.topic_count,
                        topic_names: sts(&l.topic_names),
                    })
                    .collect(),
            })
        }
        ResponseKind::DescribeClusterMirrors(r) => {
            MirrorResponse::DescribeClusterMirrors(m::DescribeClusterMirrorsResponse {
                throttle_time_ms: r.throttle_time_ms,
                error_code: r.error_code,
                error_message: ost(&r.error_message),
                mirrors: r
                    .mirrors
                    .iter()
                    .map(|d| m::DescribedMirror {
                        error_code: d.error_code,
                        mirror_name: st(&d.mirror_name),
                        authorized_operations: d.authorized_operations,
                        topics: d
                            .topics
                            .iter()
                            .map(|t| m::MirrorTopicDetail {
                                topic_name: st(&t.topic_name),
                                partitions: t
                                    .partitions
                                    .iter()
                                    .map(|p| m::MirrorPartitionDetail {
                                        partition_index: p.partition_index,
                                        source_offset: p.source_offset,
                                        destination_offset: p.destination_offset,
                                        lag: p.lag,
                                        state_value: st(&p.state_value),
                                        retry_attempt: p.retry_attempt,
                                        error_message: ost(&p.error_message),
                                    })
                                    .collect(),
                            })
                            .collect(),
                    })
                    .collect(),
                lookup_results: r
                    .lookup_results
                    .iter()
                    .map(|l| m::LookupResult {
                        topic_id: l.topic_id,
                        partitions: l
                            .partitions
                            .iter()
                            .map(|p| m::LookupPartitionResult {
                                partition_index: p.partition_index,
                                last_mirror_epoch: p.last_mirror_epoch,
                            })
                            .collect(),
                    })
                    .collect(),
            })
        }
        ResponseKind::ReadMirrorStates(r) => {
            MirrorResponse::ReadMirrorStates(m::ReadMirrorStatesResponse {
                throttle_time_ms: r.throttle_time_ms,
                error_code: r.error_code,
                error_message: ost(&r.error_message),
                topics: r
                    .topics
                    .iter()
                    .map(|t| m::ReadMirrorStateTopic {
                        name: st(&t.name),
                        partitions: t
                            .partitions
                            .iter()
                            .map(|p| m::ReadMirrorStatePartition {
                                partition_index: p.partition_index,
                                last_mirror_epoch: p.last_mirror_epoch,
                                state: p.state,
                                error_code: p.error_code,
                                previous_state: p.previous_state,
                                retry_attempt: p.retry_attempt,
                                error_message: ost(&p.error_message),
                                last_mirrored_offset: p.last_mirrored_offset,
                            })
                            .collect(),
                    })
                    .collect(),
            })
        }
        ResponseKind::WriteMirrorStates(r) => {
            MirrorResponse::WriteMirrorStates(m::WriteMirrorStatesResponse {
                throttle_time_ms: r.throttle_time_ms,
                error_code: r.error_code,
                error_message: ost(&r.error_message),
                topics: r
                    .topics
                    .iter()
                    .map(|t| m::WriteMirrorStateTopicResult {
                        name: st(&t.name),
                        partitions: t
                            .partitions
                            .iter()
                            .map(|p| m::WriteMirrorStatePartitionResult {
                                partition_index: p.partition_index,
                                error_code: p.error_code,
                                error_message: ost(&p.error_message),
                            })
                            .collect(),
                    })
                    .collect(),
            })
        }
        ResponseKind::BumpLeaderEpochs(r) => {
            MirrorResponse::BumpLeaderEpochs(m::BumpLeaderEpochsResponse {
                throttle_time_ms: r.throttle_time_ms,
                error_code: r.error_code,
                topics: r
                    .topics
                    .iter()
                    .map(|t| m::BumpLeaderEpochTopicResult {
                        topic_name: st(&t.topic_name),
                        partitions: t
                            .partitions
                            .iter()
                            .map(|p| m::BumpLeaderEpochPartitionResult {
                                partition_index: p.partition_index,
                                error_code: p.error_code,
                            })
                            .collect(),
                    })
                    .collect(),
            })
        }
        _ => return None,
    })
}
