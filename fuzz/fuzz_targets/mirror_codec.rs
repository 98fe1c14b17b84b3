//! The mirror RPCs (api keys 94-105, generated into the kafka-protocol crate from
//! `protocol/schemas/mirror`), requests and responses: whatever decodes encodes again, and
//! decodes to the same value.
//!
//! Input: `[selector][bytes...]`. An even selector: `bytes` is a request frame (header v2 and
//! body, as the broker reads it). An odd one: `bytes` is the body of a response to api key
//! `94 + (selector >> 1) % 12`, as the client reads it.

#![no_main]

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use libfuzzer_sys::fuzz_target;
use tern_fuzz::seeds::{self, Seed};
use tern_protocol::api::{decode_request, encode_request, encode_response};

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
    }
}

/// Every request and response kind, empty and with a little content.
fn make_seeds() -> Vec<Seed> {
    let s = StrBytes::from_static_str;
    let stop_topics = ["orders", "payments"]
        .map(|t| stop_mirror_topics_request::TopicData::default().with_topic_name(s(t)));
    let pause_topics = ["orders", "payments"]
        .map(|t| pause_mirror_topics_request::TopicData::default().with_topic_name(s(t)));
    let requests = [
        RequestKind::CreateClusterMirror(Default::default()),
        RequestKind::StartMirrorTopics(
            StartMirrorTopicsRequest::default()
                .with_mirror_name(s("m"))
                .with_topics(vec![Default::default()])
                .with_include_patterns(vec![s("or.*")])
                .with_exclude_patterns(vec![s("x")])
                .with_state_validation_offset(5),
        ),
        RequestKind::StopMirrorTopics(
            StopMirrorTopicsRequest::default()
                .with_mirror_name(s("m"))
                .with_topics(stop_topics.to_vec())
                .with_patterns(vec![s("p.*")]),
        ),
        RequestKind::LastMirroredOffsets(Default::default()),
        RequestKind::ListClusterMirrors(Default::default()),
        RequestKind::DescribeClusterMirrors(Default::default()),
        RequestKind::ReadMirrorStates(Default::default()),
        RequestKind::WriteMirrorStates(Default::default()),
        RequestKind::PauseMirrorTopics(
            PauseMirrorTopicsRequest::default()
                .with_mirror_name(s("m"))
                .with_topics(pause_topics.to_vec()),
        ),
        RequestKind::ResumeMirrorTopics(Default::default()),
        RequestKind::DeleteClusterMirror(Default::default()),
        RequestKind::BumpLeaderEpochs(Default::default()),
    ];
    let mut out = Vec::new();
    for (i, r) in requests.iter().enumerate() {
        let key = ApiKey::try_from(94 + i as i16).expect("a mirror key");
        let header = RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_correlation_id(i as i32)
            .with_client_id(Some(s("fuzz")));
        let frame = encode_request(&header, key, r).expect("encodes");
        out.push((
            format!("request_{}_{i}", key as i16),
            [&[0][..], &frame].concat(),
        ));
    }
    let last_mirrored = last_mirrored_offsets_response::TopicResult::default()
        .with_partitions(vec![Default::default()]);
    let responses = [
        ResponseKind::CreateClusterMirror(Default::default()),
        ResponseKind::StartMirrorTopics(
            StartMirrorTopicsResponse::default().with_topics(vec![Default::default()]),
        ),
        ResponseKind::StopMirrorTopics(Default::default()),
        ResponseKind::LastMirroredOffsets(
            LastMirroredOffsetsResponse::default().with_topics(vec![last_mirrored]),
        ),
        ResponseKind::ListClusterMirrors(
            ListClusterMirrorsResponse::default().with_mirrors(vec![Default::default()]),
        ),
        ResponseKind::DescribeClusterMirrors(Default::default()),
        ResponseKind::ReadMirrorStates(Default::default()),
        ResponseKind::WriteMirrorStates(Default::default()),
        ResponseKind::PauseMirrorTopics(Default::default()),
        ResponseKind::ResumeMirrorTopics(Default::default()),
        ResponseKind::DeleteClusterMirror(Default::default()),
        ResponseKind::BumpLeaderEpochs(Default::default()),
    ];
    for (i, r) in responses.iter().enumerate() {
        let body = encode_response(0, 0, r).expect("encodes").split_off(5);
        let selector = (i as u8) << 1 | 1;
        out.push((
            format!("response_{}", 94 + i),
            [&[selector][..], &body].concat(),
        ));
    }
    out
}
