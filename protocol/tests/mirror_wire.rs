//! The mirror RPCs (api keys 94..=105) as the kafka-protocol crate's generated types, from the
//! schemas in `protocol/schemas/mirror/`: their bytes must stay exactly those of the codec they
//! replaced (the e2e tests and older brokers speak them), and every message must round-trip.

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use tern_protocol::api::{decode_request, encode_request, encode_response, RequestError};

/// Request frames (header v2 + body) the hand-written mirror codec encoded for its test samples
/// (every field set, tagged fields both set and unset), before the codec was replaced by the
/// generated types.
const GOLDEN_REQUESTS: &[(ApiKey, &str)] = &[
    (
        ApiKey::CreateClusterMirror,
        concat!(
            "005e0000000003e80006676f6c64656e0005656173740412626f6f7473747261702e736572766572",
            "73097372633a3930393200166d6972726f722e746f706963732e696e636c756465000006656d7074",
            "79010000",
        ),
    ),
    (
        ApiKey::CreateClusterMirror,
        "005e0000000003e90006676f6c64656e00010100",
    ),
    (
        ApiKey::StartMirrorTopics,
        concat!(
            "005f0000000003ea0006676f6c64656e000565617374030102030405060708090a0b0c0d0e0f1007",
            "6f72646572730000000c00000000000000000000000000000000000c7061796d656e74732dc3bcff",
            "ffffff000000011f71fb04cb02000c03096f72646572732e2a0278010a02097365637265742e2a",
        ),
    ),
    (
        ApiKey::StartMirrorTopics,
        concat!(
            "005f0000000003eb0006676f6c64656e00056561737401ffffffffffffffff01010e020d6f6e6c79",
            "2d6578636c756465",
        ),
    ),
    (
        ApiKey::StartMirrorTopics,
        "005f0000000003ec0006676f6c64656e000101ffffffffffffffff00",
    ),
    (
        ApiKey::StopMirrorTopics,
        concat!(
            "00600000000003ed0006676f6c64656e00056561737403076f726465727300097061796d656e7473",
            "00000000000000004d01000802076c6f67732e2a",
        ),
    ),
    (
        ApiKey::StopMirrorTopics,
        "00600000000003ee0006676f6c64656e00056561737402076f726465727300ffffffffffffffff00",
    ),
    (
        ApiKey::PauseMirrorTopics,
        concat!(
            "00660000000003ef0006676f6c64656e000577657374040261000262000263000000000000000005",
            "00",
        ),
    ),
    (
        ApiKey::ResumeMirrorTopics,
        "00670000000003f00006676f6c64656e000577657374020261007fffffffffffffff00",
    ),
    (
        ApiKey::LastMirroredOffsets,
        concat!(
            "00610000000003f10006676f6c64656e00056261636b03076f726465727305000000000000000001",
            "0000000002007fffffff0000056e6f6e65010000",
        ),
    ),
    (
        ApiKey::ListClusterMirrors,
        "00620000000003f20006676f6c64656e000100",
    ),
    (
        ApiKey::ListClusterMirrors,
        "00620000000003f30006676f6c64656e000000",
    ),
    (
        ApiKey::DescribeClusterMirrors,
        concat!(
            "00630000000003f40006676f6c64656e0003056561737405776573740102000c0c636c7573746572",
            "2d78797a0131036465666768696a6b6c6d6e6f707172730400000000000000030000000900c8c9ca",
            "cbcccdcecfd0d1d2d3d4d5d6d70100",
        ),
    ),
    (
        ApiKey::DescribeClusterMirrors,
        "00630000000003f50006676f6c64656e00010002000101020101",
    ),
    (
        ApiKey::DescribeClusterMirrors,
        concat!(
            "00630000000003f60006676f6c64656e000100010117020708090a0b0c0d0e0f1011121314151602",
            "0000000100",
        ),
    ),
    (
        ApiKey::DescribeClusterMirrors,
        "00630000000003f70006676f6c64656e00010000",
    ),
    (
        ApiKey::ReadMirrorStates,
        concat!(
            "00640000000003f80006676f6c64656e00056561737402076f726465727303000000050000000006",
            "000000",
        ),
    ),
    (
        ApiKey::WriteMirrorStates,
        concat!(
            "00650000000003f90006676f6c64656e00056561737403076f726465727304000000000000001102",
            "0000000001ffffffff050500020003010c0c736f7572636520646f776e020800000000000004d203",
            "010204040000000700000000ffffffffff000006656d707479010002046f6c6400",
        ),
    ),
    (
        ApiKey::DeleteClusterMirror,
        "00680000000003fa0006676f6c64656e000565617374000000000000006300",
    ),
    (
        ApiKey::DeleteClusterMirror,
        "00680000000003fb0006676f6c64656e0001ffffffffffffffff00",
    ),
    (
        ApiKey::BumpLeaderEpochs,
        concat!(
            "00690000000003fc0006676f6c64656e0002090a0b0c0d0e0f101112131415161718030000000000",
            "0000070000000003ffffffff000000",
        ),
    ),
];

/// Response frames (header v1 + body) of the hand-written codec, as above.
const GOLDEN_RESPONSES: &[(ApiKey, &str)] = &[
    (
        ApiKey::CreateClusterMirror,
        "000007d0000000000300880765786973747300",
    ),
    (ApiKey::CreateClusterMirror, "000007d1000000000000000000"),
    (
        ApiKey::StartMirrorTopics,
        concat!(
            "000007d2000000000a00000003076f7264657273008a11616c7265616479206d6972726f72656400",
            "036f6b0000000000",
        ),
    ),
    (
        ApiKey::StopMirrorTopics,
        "000007d3000000000000890f756e6b6e6f776e206d6972726f720100",
    ),
    (
        ApiKey::PauseMirrorTopics,
        concat!(
            "000007d4000000000a00000003076f7264657273008a11616c7265616479206d6972726f72656400",
            "036f6b0000000000",
        ),
    ),
    (
        ApiKey::ResumeMirrorTopics,
        concat!(
            "000007d5000000000a00000003076f7264657273008a11616c7265616479206d6972726f72656400",
            "036f6b0000000000",
        ),
    ),
    (
        ApiKey::LastMirroredOffsets,
        concat!(
            "000007d6000000000100000002076f7264657273030000000000000002540be40000000000000001",
            "ffffffffffffffff0092000000",
        ),
    ),
    (
        ApiKey::ListClusterMirrors,
        concat!(
            "000007d700000000000000000305656173740e613a393039322c623a393039320461626300000002",
            "030278027900057765737407773a393039320100000000010000",
        ),
    ),
    (
        ApiKey::DescribeClusterMirrors,
        concat!(
            "000007d800000000020000087061727469616c03000005656173740000123402076f726465727303",
            "000000000000000000000064000000000000005a000000000000000a0a4d4952524f52494e470000",
            "000000000001ffffffffffffffffffffffffffffffffffffffffffffffff074641494c4544ffff05",
            "626f6f6d000000008905676f6e658000000001000100250232333435363738393a3b3c3d3e3f4041",
            "0300000000000000040000000001ffffffff0000",
        ),
    ),
    (
        ApiKey::DescribeClusterMirrors,
        "000007d900000000000000000100",
    ),
    (
        ApiKey::ReadMirrorStates,
        concat!(
            "000007da000000000000000002076f72646572730400000003000000080100000000020972657472",
            "79696e670000000004ffffffff04000010000000010008000000000000004d00000000ffffffffff",
            "000010000000000000",
        ),
    ),
    (
        ApiKey::WriteMirrorStates,
        concat!(
            "000007db000000000000000002076f72646572730300000000000000000000000100060b6e6f7420",
            "6c6561646572000000",
        ),
    ),
    (ApiKey::DeleteClusterMirror, "000007dc0000000000008f0000"),
    (
        ApiKey::BumpLeaderEpochs,
        "000007dd0000000003000002076f7264657273030000000000000000000001004a000000",
    ),
];

const MIRROR_KEYS: std::ops::RangeInclusive<i16> = 94..=105;

fn unhex(hex: &str) -> Bytes {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect::<Vec<u8>>()
        .into()
}

/// Every field the decoder met had a name in the schema: an unknown tag would be kept aside
/// and re-encoded, so equal bytes alone would not show a tagged field missing from a schema.
fn assert_no_unknown_tags(what: &impl std::fmt::Debug) {
    let debug = format!("{what:?}");
    let unknown = debug
        .match_indices("unknown_tagged_fields: ")
        .filter(|(i, m)| !debug[i + m.len()..].starts_with("{}"))
        .count();
    assert_eq!(unknown, 0, "unknown tagged fields in {debug}");
}

fn decode_golden_request(hex: &str) -> DecodedRequestParts {
    let frame = unhex(hex);
    let req = decode_request(frame.clone(), |key, version| {
        MIRROR_KEYS.contains(&(key as i16)) && version == 0
    })
    .expect("decodes");
    // The whole frame was read: header, body and nothing after.
    let mut rest = frame.clone();
    RequestHeader::decode(&mut rest, req.api_key.request_header_version(0)).unwrap();
    RequestKind::decode(req.api_key, &mut rest, 0).unwrap();
    assert!(!rest.has_remaining(), "{} bytes left", rest.remaining());
    DecodedRequestParts {
        frame,
        header: req.header,
        api_key: req.api_key,
        body: req.body,
    }
}

struct DecodedRequestParts {
    frame: Bytes,
    header: RequestHeader,
    api_key: ApiKey,
    body: RequestKind,
}

fn decode_golden_response(key: ApiKey, hex: &str) -> (Bytes, i32, ResponseKind) {
    let frame = unhex(hex);
    let mut buf = frame.clone();
    let header = ResponseHeader::decode(&mut buf, key.response_header_version(0)).unwrap();
    let body = ResponseKind::decode(key, &mut buf, 0).expect("decodes");
    assert!(!buf.has_remaining(), "{} bytes left", buf.remaining());
    (frame, header.correlation_id, body)
}

#[test]
fn mirror_golden_requests_decode_and_encode_to_the_same_bytes() {
    for (key, hex) in GOLDEN_REQUESTS {
        let req = decode_golden_request(hex);
        assert_eq!(req.api_key, *key);
        assert_eq!(req.header.request_api_version, 0);
        assert_eq!(req.header.client_id.as_deref(), Some("golden"));
        assert_no_unknown_tags(&req.body);
        let encoded = encode_request(&req.header, req.api_key, &req.body).unwrap();
        assert_eq!(
            &encoded[..],
            &req.frame[..],
            "{key:?} re-encoded differently"
        );
        // And back: decoding the re-encoded frame gives the same message.
        let again = decode_request(encoded.freeze(), |_, _| true).unwrap();
        assert_eq!(again.body, req.body);
    }
}

#[test]
fn mirror_golden_responses_decode_and_encode_to_the_same_bytes() {
    for (key, hex) in GOLDEN_RESPONSES {
        let (frame, correlation_id, body) = decode_golden_response(*key, hex);
        assert_no_unknown_tags(&body);
        let encoded = encode_response(correlation_id, 0, &body).unwrap();
        assert_eq!(&encoded[..], &frame[..], "{key:?} re-encoded differently");
        let mut again = encoded.freeze();
        ResponseHeader::decode(&mut again, 1).unwrap();
        assert_eq!(ResponseKind::decode(*key, &mut again, 0).unwrap(), body);
    }
}

#[test]
fn mirror_golden_samples_cover_every_api_key() {
    for key in MIRROR_KEYS {
        let key = ApiKey::try_from(key).unwrap();
        assert!(GOLDEN_REQUESTS.iter().any(|(k, _)| *k == key), "{key:?}");
        assert!(GOLDEN_RESPONSES.iter().any(|(k, _)| *k == key), "{key:?}");
        assert_eq!(key.valid_versions().min, 0);
        assert_eq!(key.valid_versions().max, 0);
        // Request header v2, response header v1: every mirror RPC is flexible.
        assert_eq!(key.request_header_version(0), 2);
        assert_eq!(key.response_header_version(0), 1);
    }
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_static_str(Box::leak(text.to_string().into_boxed_str()))
}

/// Fields of one type side by side (tagged ones above all) could trade places in a schema and
/// still give the same bytes; the golden samples' distinct values pin each to its name.
#[test]
fn mirror_golden_fields_land_in_their_names() {
    let body = |i: usize| decode_golden_request(GOLDEN_REQUESTS[i].1).body;
    let RequestKind::StartMirrorTopics(start) = body(2) else {
        panic!()
    };
    assert_eq!(start.include_patterns, vec![s("orders.*"), s("x")]);
    assert_eq!(start.exclude_patterns, vec![s("secret.*")]);
    assert_eq!(start.state_validation_offset, 1234567890123);
    assert_eq!(start.topics[0].num_partitions, 12);
    let RequestKind::StopMirrorTopics(stop) = body(5) else {
        panic!()
    };
    assert_eq!(stop.patterns, vec![s("logs.*")]);
    assert_eq!(stop.topics[1].topic_name, s("payments"));
    let RequestKind::DescribeClusterMirrors(describe) = body(12) else {
        panic!()
    };
    assert_eq!(describe.cluster_id, Some(s("cluster-xyz")));
    assert_eq!(
        describe.last_mirror_epoch_lookups[0].partitions,
        vec![0, 3, 9]
    );
    assert!(!describe.local_only);
    let RequestKind::DescribeClusterMirrors(local) = body(13) else {
        panic!()
    };
    assert!(local.local_only);
    assert_eq!(local.cluster_id, Some(s("")));
    let RequestKind::WriteMirrorStates(write) = body(17) else {
        panic!()
    };
    let p = &write.topics[0].partitions[1];
    assert_eq!(
        (
            p.last_mirror_epoch,
            p.state,
            p.retry_attempt,
            p.last_mirrored_offset
        ),
        (-1, 5, 3, 1234)
    );
    assert_eq!((p.previous_state, p.leader_epoch), (2, 7));
    assert_eq!(p.error_message, Some(s("source down")));
    assert_eq!(write.stopped_topics, vec![s("old")]);
    let RequestKind::BumpLeaderEpochs(bump) = body(20) else {
        panic!()
    };
    assert_eq!(bump.topics[0].partitions[0].min_leader_epoch, 7);

    let body = |i: usize| decode_golden_response(GOLDEN_RESPONSES[i].0, GOLDEN_RESPONSES[i].1).2;
    let ResponseKind::DescribeClusterMirrors(describe) = body(8) else {
        panic!()
    };
    let p = &describe.mirrors[0].topics[0].partitions[0];
    assert_eq!(
        (p.source_offset, p.destination_offset, p.lag),
        (100, 90, 10)
    );
    assert_eq!(describe.mirrors[0].authorized_operations, 0x1234);
    assert_eq!(
        describe.lookup_results[0].partitions[0].last_mirror_epoch,
        4
    );
    let ResponseKind::ReadMirrorStates(read) = body(10) else {
        panic!()
    };
    let p = &read.topics[0].partitions[0];
    assert_eq!(
        (
            p.last_mirror_epoch,
            p.state,
            p.previous_state,
            p.retry_attempt
        ),
        (8, 1, 0, 2)
    );
    assert_eq!(read.topics[0].partitions[1].last_mirrored_offset, 77);
    let ResponseKind::LastMirroredOffsets(last) = body(6) else {
        panic!()
    };
    assert_eq!(last.topics[0].partitions[1].error_code, 146);
    assert_eq!(
        last.topics[0].partitions[0].last_mirrored_offset,
        10_000_000_000
    );
}

/// The defaults the hand-written structs had, which the schemas carry over.
#[test]
fn mirror_defaults() {
    assert_eq!(
        StartMirrorTopicsRequest::default().state_validation_offset,
        -1
    );
    assert_eq!(
        DeleteClusterMirrorRequest::default().state_validation_offset,
        -1
    );
    let p = write_mirror_states_request::PartitionData::default();
    assert_eq!(
        (
            p.last_mirror_epoch,
            p.state,
            p.retry_attempt,
            p.last_mirrored_offset
        ),
        (-1, -1, 0, -1)
    );
    assert_eq!(
        (p.previous_state, p.leader_epoch, p.error_message),
        (-1, -1, None)
    );
    let p = read_mirror_states_response::PartitionResult::default();
    assert_eq!(
        (
            p.last_mirror_epoch,
            p.state,
            p.previous_state,
            p.last_mirrored_offset
        ),
        (-1, -1, 16, -1)
    );
    let p = describe_cluster_mirrors_response::MirrorPartition::default();
    assert_eq!((p.source_offset, p.destination_offset, p.lag), (-1, -1, -1));
    assert_eq!(
        describe_cluster_mirrors_response::DescribedMirror::default().authorized_operations,
        i32::MIN
    );
}

/// A mirror client: a request of the generated types goes out with `KafkaConnection::send` and
/// its typed response comes back; a response with another correlation id is refused.
#[tokio::test]
async fn mirror_client_sends_the_generated_types() {
    use tern_protocol::client::{ClientError, KafkaConnection};
    use tern_protocol::frame::{read_frame, write_frame};

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut answered = 0;
        while let Some(frame) = read_frame(&mut stream, 1 << 20).await.unwrap() {
            let decoded = decode_request(frame, |_, v| v == 0).unwrap();
            let header = decoded.header;
            assert_eq!(header.client_id.as_deref(), Some("mirror-client"));
            let response = match decoded.body {
                RequestKind::ListClusterMirrors(r) => {
                    let topic_names = if r.include_topic_names {
                        vec![s("t")]
                    } else {
                        vec![]
                    };
                    let mirror = list_cluster_mirrors_response::ListedMirror::default()
                        .with_mirror_name(s("east"))
                        .with_topic_names(topic_names)
                        .with_topic_count(1);
                    ResponseKind::ListClusterMirrors(
                        ListClusterMirrorsResponse::default().with_mirrors(vec![mirror]),
                    )
                }
                RequestKind::DeleteClusterMirror(r) => ResponseKind::DeleteClusterMirror(
                    DeleteClusterMirrorResponse::default()
                        .with_error_code(137)
                        .with_error_message(Some(r.mirror_name)),
                ),
                other => panic!("unexpected {other:?}"),
            };
            // The third request gets a wrong correlation id.
            let correlation_id = if answered == 2 {
                header.correlation_id + 100
            } else {
                header.correlation_id
            };
            let out = encode_response(correlation_id, 0, &response).unwrap();
            write_frame(&mut stream, &[&out]).await.unwrap();
            answered += 1;
        }
    });

    let mut conn = KafkaConnection::connect(addr, "mirror-client")
        .await
        .unwrap();
    let list = ListClusterMirrorsRequest::default().with_include_topic_names(true);
    let r = conn.send(&list, 0).await.unwrap();
    assert_eq!(r.mirrors.len(), 1);
    assert_eq!(r.mirrors[0].mirror_name.as_str(), "east");
    assert_eq!(r.mirrors[0].topic_names, vec![s("t")]);
    let delete = DeleteClusterMirrorRequest::default().with_mirror_name(s("west"));
    let r = conn.send(&delete, 0).await.unwrap();
    assert_eq!(
        r,
        DeleteClusterMirrorResponse::default()
            .with_error_code(137)
            .with_error_message(Some(s("west")))
    );
    let mismatch = conn.send(&ListClusterMirrorsRequest::default(), 0).await;
    assert!(matches!(
        mismatch,
        Err(ClientError::CorrelationMismatch { sent: 3, got: 103 })
    ));
    drop(conn);
    server.await.unwrap();
}

/// A request frame (header v2 and body) of `body`, as a client sends it.
fn request_frame(correlation_id: i32, key: ApiKey, body: &RequestKind) -> BytesMut {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(0)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(s("golden")));
    encode_request(&header, key, body).unwrap()
}

/// Decoding through the normal path: unknown keys and versions are refused before the body,
/// bodies that do not decode are malformed, unknown tags are kept aside, a forged count fails
/// fast.
/// A varint of more than five bytes is refused, as Kafka refuses it: read as five bytes, its
/// rest became the next field, so what decoded did not encode back to anything decodable
/// (found by the mirror_codec fuzz target).
#[test]
fn a_varint_longer_than_five_bytes_is_refused() {
    // BumpLeaderEpochsResponse: throttle, error code, no topics, then a tagged-field count
    // whose varint runs six bytes.
    let body: &[u8] = &[0, 0, 0, 0, 0, 0, 1, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00];
    let err = ResponseKind::decode(ApiKey::BumpLeaderEpochs, &mut Bytes::from_static(body), 0)
        .unwrap_err();
    assert!(format!("{err:#}").contains("Varint is too long"), "{err:#}");
    // Five bytes is the longest varint and still decodes.
    let body: &[u8] = &[0, 0, 0, 0, 0, 0, 1, 0x80, 0x80, 0x80, 0x80, 0x00];
    let r =
        ResponseKind::decode(ApiKey::BumpLeaderEpochs, &mut Bytes::from_static(body), 0).unwrap();
    assert!(matches!(r, ResponseKind::BumpLeaderEpochs(_)));
}

/// A tag of 2^31 or more (kept under a negative key) is written back: the generated encoders
/// wrote the field count with it but left the field out (found by the mirror_codec fuzz target).
#[test]
fn an_unknown_tag_of_2_pow_31_or_more_encodes_back() {
    let request = ListClusterMirrorsRequest::default()
        .with_include_topic_names(true)
        .with_unknown_tagged_field(-5, Bytes::from_static(b"x"))
        .with_unknown_tagged_field(2, Bytes::from_static(b"yz"));
    let mut buf = BytesMut::new();
    request.encode(&mut buf, 0).unwrap();
    let again = ListClusterMirrorsRequest::decode(&mut buf.freeze(), 0).unwrap();
    assert_eq!(again, request);
}

#[test]
fn mirror_request_errors() {
    let supported = |key: ApiKey, version: i16| MIRROR_KEYS.contains(&(key as i16)) && version == 0;
    let valid = request_frame(
        42,
        ApiKey::ListClusterMirrors,
        &RequestKind::ListClusterMirrors(ListClusterMirrorsRequest::default()),
    );
    for key in [93i16, 106, 500, -1] {
        let mut frame = valid.to_vec();
        frame[..2].copy_from_slice(&key.to_be_bytes());
        assert!(matches!(
            decode_request(Bytes::from(frame), supported),
            Err(RequestError::UnknownApiKey { api_key, correlation_id: 42 }) if api_key == key
        ));
    }
    for version in [1i16, -1, 7] {
        let mut frame = valid.to_vec();
        frame[2..4].copy_from_slice(&version.to_be_bytes());
        assert!(matches!(
            decode_request(Bytes::from(frame), supported),
            Err(RequestError::UnsupportedVersion { api_key: 98, version: v, correlation_id: 42 }) if v == version
        ));
    }
    // Non-nullable string sent as null, bad UTF-8, a null non-nullable array (which the
    // hand-written codec took as empty; Kafka refuses it).
    let bad: [&[u8]; 3] = [
        &[
            0, 104, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ],
        &[
            0, 104, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0x02, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ],
        &[
            0, 101, 0, 0, 0, 0, 0, 1, 0x00, 0x00, 0x00, 0x02, b'm', 0x00, 0x00, 0x00,
        ],
    ];
    for frame in bad {
        assert!(
            matches!(
                decode_request(Bytes::copy_from_slice(frame), supported),
                Err(RequestError::Malformed { .. })
            ),
            "{frame:?}"
        );
    }
    // Unknown tags in the header and the body: kept aside, the known fields read.
    let frame: &[u8] = &[
        0x00, 98, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0xff, 0xff, // null client id
        0x01, 0x09, 0x02, 0xaa, 0xbb, // header: tag 9, 2 bytes
        0x01, // IncludeTopicNames
        0x02, 0x05, 0x00, 0x07, 0x01, 0x01, // tags 5 (empty) and 7 (1 byte)
    ];
    let req = decode_request(Bytes::from_static(frame), supported).unwrap();
    assert_eq!(req.header.client_id, None);
    let RequestKind::ListClusterMirrors(body) = req.body else {
        panic!("{:?}", req.body)
    };
    assert!(body.include_topic_names);
    assert_eq!(body.unknown_tagged_fields.len(), 2, "{body:?}");
    // Truncated frames are malformed; a forged huge count fails at once.
    for (key, hex) in GOLDEN_REQUESTS {
        let frame = unhex(hex);
        for len in 8..frame.len() {
            assert!(
                decode_request(frame.slice(..len), supported).is_err(),
                "{key:?} cut at {len}"
            );
        }
    }
    let start = std::time::Instant::now();
    let huge = [0xff, 0xff, 0xff, 0xff, 0x0f];
    for key in MIRROR_KEYS {
        let mut f = vec![0u8, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0];
        f[..2].copy_from_slice(&key.to_be_bytes());
        f.extend_from_slice(&huge);
        f.extend_from_slice(&[0u8; 64]);
        assert!(decode_request(Bytes::from(f), supported).is_err(), "{key}");
    }
    assert!(start.elapsed() < std::time::Duration::from_secs(1));
}

proptest::proptest! {
    #[test]
    fn mirror_random_and_mutated_frames_never_panic(
        index in 0usize..64,
        edits in proptest::collection::vec((proptest::prelude::any::<usize>(), proptest::prelude::any::<u8>()), 0..6),
        cut in proptest::prelude::any::<usize>(),
    ) {
        let mut frame = unhex(GOLDEN_REQUESTS[index % GOLDEN_REQUESTS.len()].1).to_vec();
        for (pos, byte) in edits {
            let n = frame.len();
            frame[8 + pos % (n - 8)] = byte;
        }
        let n = frame.len();
        frame.truncate(8 + cut % (n - 7));
        let _ = decode_request(Bytes::from(frame), |_, _| true);
        let (key, hex) = GOLDEN_RESPONSES[index % GOLDEN_RESPONSES.len()];
        let mut body = unhex(hex).to_vec();
        body.truncate(5 + cut % (body.len() - 4));
        let _ = ResponseKind::decode(key, &mut Bytes::from(body).slice(5..), 0);
    }
}

/// Encode then decode gives the message back, for a default and for a decoded golden sample of
/// every request and response type.
fn round_trip<T: Encodable + Decodable + PartialEq + std::fmt::Debug>(message: &T) {
    let mut buf = BytesMut::new();
    message.encode(&mut buf, 0).unwrap();
    assert_eq!(buf.len(), message.compute_size(0).unwrap());
    let mut bytes = buf.freeze();
    let decoded = T::decode(&mut bytes, 0).unwrap();
    assert!(!bytes.has_remaining());
    assert_eq!(&decoded, message);
}

macro_rules! round_trips {
    ($($name:ident: $variant:ident = $request:ident / $response:ident,)*) => {
        $(
            #[test]
            fn $name() {
                round_trip(&$request::default());
                round_trip(&$response::default());
                assert_eq!(<$request as HeaderVersion>::header_version(0), 2);
                assert_eq!(<$response as HeaderVersion>::header_version(0), 1);
                for (key, hex) in GOLDEN_REQUESTS {
                    if let RequestKind::$variant(m) = decode_golden_request(hex).body {
                        assert_eq!(key.request_header_version(0), 2);
                        round_trip(&m);
                    }
                }
                for (key, hex) in GOLDEN_RESPONSES {
                    if let ResponseKind::$variant(m) = decode_golden_response(*key, hex).2 {
                        round_trip(&m);
                    }
                }
            }
        )*
    };
}

round_trips! {
    round_trip_create_cluster_mirror: CreateClusterMirror = CreateClusterMirrorRequest / CreateClusterMirrorResponse,
    round_trip_start_mirror_topics: StartMirrorTopics = StartMirrorTopicsRequest / StartMirrorTopicsResponse,
    round_trip_stop_mirror_topics: StopMirrorTopics = StopMirrorTopicsRequest / StopMirrorTopicsResponse,
    round_trip_last_mirrored_offsets: LastMirroredOffsets = LastMirroredOffsetsRequest / LastMirroredOffsetsResponse,
    round_trip_list_cluster_mirrors: ListClusterMirrors = ListClusterMirrorsRequest / ListClusterMirrorsResponse,
    round_trip_describe_cluster_mirrors: DescribeClusterMirrors = DescribeClusterMirrorsRequest / DescribeClusterMirrorsResponse,
    round_trip_read_mirror_states: ReadMirrorStates = ReadMirrorStatesRequest / ReadMirrorStatesResponse,
    round_trip_write_mirror_states: WriteMirrorStates = WriteMirrorStatesRequest / WriteMirrorStatesResponse,
    round_trip_pause_mirror_topics: PauseMirrorTopics = PauseMirrorTopicsRequest / PauseMirrorTopicsResponse,
    round_trip_resume_mirror_topics: ResumeMirrorTopics = ResumeMirrorTopicsRequest / ResumeMirrorTopicsResponse,
    round_trip_delete_cluster_mirror: DeleteClusterMirror = DeleteClusterMirrorRequest / DeleteClusterMirrorResponse,
    round_trip_bump_leader_epochs: BumpLeaderEpochs = BumpLeaderEpochsRequest / BumpLeaderEpochsResponse,
}
