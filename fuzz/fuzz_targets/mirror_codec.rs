//! The mirror RPCs (api keys 94-105, generated into the kafka-protocol crate from
//! `protocol/schemas/mirror`), requests and responses: whatever decodes encodes again, and
//! decodes to the same value, also through the in-memory structs Tern's mirror code uses.
//!
//! Input: `[selector][bytes...]`. An even selector: `bytes` is a request frame (header v2 and
//! body, as the broker reads it). An odd one: `bytes` is the body of a response to api key
//! `94 + (selector >> 1) % 12`, as the client reads it.

#![no_main]

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseKind};
use kafka_protocol::protocol::StrBytes;
use libfuzzer_sys::fuzz_target;
use tern_fuzz::seeds::{self, Seed};
use tern_protocol::api::{decode_request, encode_request, encode_response};
use tern_protocol::mirror::*;

fuzz_target!(init: seeds::write_if_asked(make_seeds), |data: &[u8]| run(data));

fn run(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    if selector & 1 == 0 {
        let mirror = |key: ApiKey, version: i16| (94..=105).contains(&(key as i16)) && version == 0;
        let Ok(req) = decode_request(Bytes::copy_from_slice(rest), mirror) else {
            return;
        };
        let encoded = encode_request(&req.header, req.api_key, &req.body).expect("encodes");
        let again = decode_request(encoded.freeze(), mirror).expect("an encoded request decodes");
        assert_eq!(again.body, req.body);
        assert_eq!(again.header, req.header);
        // Through the in-memory structs and back (unknown tagged fields stay behind).
        let request = mirror_request(&req.body).expect("a mirror request");
        assert_eq!(mirror_request(&request_kind(&request)), Some(request));
    } else {
        let api_key = ApiKey::try_from(94 + i16::from(selector >> 1) % 12).expect("a mirror key");
        let Ok(response) = ResponseKind::decode(api_key, &mut Bytes::copy_from_slice(rest), 0)
        else {
            return;
        };
        let encoded = encode_response(7, 0, &response).expect("encodes");
        // The response header v1: correlation id, then an empty tagged-field section.
        let again = ResponseKind::decode(api_key, &mut encoded.freeze().slice(5..), 0)
            .expect("an encoded response decodes");
        assert_eq!(again, response);
        let converted = mirror_response(&response).expect("a mirror response");
        assert_eq!(mirror_response(&response_kind(&converted)), Some(converted));
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
        let header = RequestHeader::default()
            .with_request_api_key(r.api_key())
            .with_correlation_id(i as i32)
            .with_client_id(Some(StrBytes::from_static_str("fuzz")));
        let key = ApiKey::try_from(r.api_key()).expect("a mirror key");
        let frame = encode_request(&header, key, &request_kind(r)).expect("encodes");
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
        let body = encode_response(0, 0, &response_kind(r))
            .expect("encodes")
            .split_off(5);
        let selector = (i as u8) << 1 | 1;
        out.push((
            format!("response_{}", 94 + i),
            [&[selector][..], &body].concat(),
        ));
    }
    out
}
