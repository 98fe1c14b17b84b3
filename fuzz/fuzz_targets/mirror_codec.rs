//! The mirror RPC codec (api keys 94-105), requests and responses: whatever decodes encodes
//! again, and decodes to the same value.
//!
//! Input: `[selector][bytes...]`. An even selector: `bytes` is a request frame (header v2 and
//! body, as the broker reads it). An odd one: `bytes` is the body of a response to api key
//! `94 + (selector >> 1) % 12`, as the client reads it.

#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use tern_fuzz::seeds::{self, Seed};
use tern_protocol::mirror::*;

fuzz_target!(init: seeds::write_if_asked(make_seeds), |data: &[u8]| run(data));

fn run(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    if selector & 1 == 0 {
        let Ok((header, request)) = decode_mirror_request(Bytes::copy_from_slice(rest)) else {
            return;
        };
        let client_id = header.client_id.as_deref().unwrap_or("");
        let encoded = encode_mirror_request(header.correlation_id, client_id, &request);
        let (again_header, again) =
            decode_mirror_request(encoded.freeze()).expect("an encoded request decodes");
        assert_eq!(again, request);
        assert_eq!(again_header.correlation_id, header.correlation_id);
    } else {
        let api_key = api_keys::FIRST + i16::from(selector >> 1) % 12;
        let Ok(response) = decode_mirror_response(api_key, Bytes::copy_from_slice(rest)) else {
            return;
        };
        let encoded = encode_mirror_response(7, &response);
        // The response header v1: correlation id, then an empty tagged-field section.
        let again = decode_mirror_response(api_key, encoded.freeze().slice(5..))
            .expect("an encoded response decodes");
        assert_eq!(again, response);
    }
}

/// Every request and response kind, empty and with a little content.
fn make_seeds() -> Vec<Seed> {
    let topics = || vec!["orders".to_string(), "payments".to_string()];
    let requests = [
        MirrorRequest::CreateClusterMirror(CreateClusterMirrorRequest::default()),
        MirrorRequest::StartMirrorTopics(StartMirrorTopicsRequest {
            mirror_name: "m".into(),
            topics: vec![StartMirrorTopic::default()],
            include_patterns: vec!["or.*".into()],
            exclude_patterns: vec!["x".into()],
            state_validation_offset: 5,
        }),
        MirrorRequest::StopMirrorTopics(MirrorTopicsRequest {
            mirror_name: "m".into(),
            topics: topics(),
            patterns: vec!["p.*".into()],
            state_validation_offset: -1,
        }),
        MirrorRequest::LastMirroredOffsets(LastMirroredOffsetsRequest::default()),
        MirrorRequest::ListClusterMirrors(ListClusterMirrorsRequest::default()),
        MirrorRequest::DescribeClusterMirrors(DescribeClusterMirrorsRequest::default()),
        MirrorRequest::ReadMirrorStates(ReadMirrorStatesRequest::default()),
        MirrorRequest::WriteMirrorStates(WriteMirrorStatesRequest::default()),
        MirrorRequest::PauseMirrorTopics(MirrorTopicsRequest {
            mirror_name: "m".into(),
            topics: topics(),
            ..Default::default()
        }),
        MirrorRequest::ResumeMirrorTopics(MirrorTopicsRequest::default()),
        MirrorRequest::DeleteClusterMirror(DeleteClusterMirrorRequest::default()),
        MirrorRequest::BumpLeaderEpochs(BumpLeaderEpochsRequest::default()),
    ];
    let mut out = Vec::new();
    for (i, r) in requests.iter().enumerate() {
        let frame = encode_mirror_request(i as i32, "fuzz", r);
        out.push((
            format!("request_{}_{i}", r.api_key()),
            [&[0][..], &frame].concat(),
        ));
    }
    let responses = [
        MirrorResponse::CreateClusterMirror(SimpleMirrorResponse::default()),
        MirrorResponse::StartMirrorTopics(TopicsMirrorResponse {
            topics: vec![TopicResult::default()],
            ..Default::default()
        }),
        MirrorResponse::StopMirrorTopics(TopicsMirrorResponse::default()),
        MirrorResponse::LastMirroredOffsets(LastMirroredOffsetsResponse {
            topics: vec![LastMirroredOffsetTopic {
                partitions: vec![LastMirroredOffsetPartition::default()],
                ..Default::default()
            }],
            ..Default::default()
        }),
        MirrorResponse::ListClusterMirrors(ListClusterMirrorsResponse {
            mirrors: vec![ListedMirror::default()],
            ..Default::default()
        }),
        MirrorResponse::DescribeClusterMirrors(DescribeClusterMirrorsResponse::default()),
        MirrorResponse::ReadMirrorStates(ReadMirrorStatesResponse::default()),
        MirrorResponse::WriteMirrorStates(WriteMirrorStatesResponse::default()),
        MirrorResponse::PauseMirrorTopics(TopicsMirrorResponse::default()),
        MirrorResponse::ResumeMirrorTopics(TopicsMirrorResponse::default()),
        MirrorResponse::DeleteClusterMirror(SimpleMirrorResponse::default()),
        MirrorResponse::BumpLeaderEpochs(BumpLeaderEpochsResponse::default()),
    ];
    for (i, r) in responses.iter().enumerate() {
        let body = encode_mirror_response(0, r).split_off(5);
        let selector = (i as u8) << 1 | 1;
        out.push((
            format!("response_{}", 94 + i),
            [&[selector][..], &body].concat(),
        ));
    }
    out
}
