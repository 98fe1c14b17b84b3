//! Tests of the mirror RPC codec: round trips, byte-exact layouts from the JSON schemas, and
//! robustness of the decoders against truncated, random and forged input.

use super::*;
use proptest::prelude::*;
use std::time::{Duration, Instant};

fn uuid_seq(start: u8) -> Uuid {
    let mut b = [0u8; 16];
    for (i, x) in b.iter_mut().enumerate() {
        *x = start.wrapping_add(i as u8);
    }
    Uuid::from_bytes(b)
}

/// Requests of every kind with non-default values, tagged fields both set and unset.
fn sample_requests() -> Vec<MirrorRequest> {
    vec![
        MirrorRequest::CreateClusterMirror(CreateClusterMirrorRequest {
            mirror_name: "east".into(),
            configs: vec![
                ("bootstrap.servers".into(), Some("src:9092".into())),
                ("mirror.topics.include".into(), None),
                ("empty".into(), Some(String::new())),
            ],
        }),
        MirrorRequest::CreateClusterMirror(CreateClusterMirrorRequest::default()),
        MirrorRequest::StartMirrorTopics(StartMirrorTopicsRequest {
            mirror_name: "east".into(),
            topics: vec![
                StartMirrorTopic {
                    topic_id: uuid_seq(1),
                    topic_name: "orders".into(),
                    num_partitions: 12,
                },
                StartMirrorTopic {
                    topic_id: Uuid::nil(),
                    topic_name: "payments-ü".into(),
                    num_partitions: -1,
                },
            ],
            include_patterns: vec!["orders.*".into(), "x".into()],
            exclude_patterns: vec!["secret.*".into()],
            state_validation_offset: 1234567890123,
        }),
        MirrorRequest::StartMirrorTopics(StartMirrorTopicsRequest {
            mirror_name: "east".into(),
            topics: vec![],
            include_patterns: vec![],
            exclude_patterns: vec!["only-exclude".into()],
            state_validation_offset: -1,
        }),
        MirrorRequest::StartMirrorTopics(StartMirrorTopicsRequest::default()),
        MirrorRequest::StopMirrorTopics(MirrorTopicsRequest {
            mirror_name: "east".into(),
            topics: vec!["orders".into(), "payments".into()],
            patterns: vec!["logs.*".into()],
            state_validation_offset: 77,
        }),
        MirrorRequest::StopMirrorTopics(MirrorTopicsRequest {
            mirror_name: "east".into(),
            topics: vec!["orders".into()],
            patterns: vec![],
            state_validation_offset: -1,
        }),
        MirrorRequest::PauseMirrorTopics(MirrorTopicsRequest {
            mirror_name: "west".into(),
            topics: vec!["a".into(), "b".into(), "c".into()],
            patterns: vec![],
            state_validation_offset: 5,
        }),
        MirrorRequest::ResumeMirrorTopics(MirrorTopicsRequest {
            mirror_name: "west".into(),
            topics: vec!["a".into()],
            patterns: vec![],
            state_validation_offset: i64::MAX,
        }),
        MirrorRequest::LastMirroredOffsets(LastMirroredOffsetsRequest {
            mirror_name: "back".into(),
            topics: vec![
                TopicPartitions {
                    name: "orders".into(),
                    partitions: vec![0, 1, 2, i32::MAX],
                },
                TopicPartitions {
                    name: "none".into(),
                    partitions: vec![],
                },
            ],
        }),
        MirrorRequest::ListClusterMirrors(ListClusterMirrorsRequest {
            include_topic_names: true,
        }),
        MirrorRequest::ListClusterMirrors(ListClusterMirrorsRequest {
            include_topic_names: false,
        }),
        MirrorRequest::DescribeClusterMirrors(DescribeClusterMirrorsRequest {
            mirror_names: vec!["east".into(), "west".into()],
            include_authorized_operations: true,
            cluster_id: Some("cluster-xyz".into()),
            last_mirror_epoch_lookups: vec![
                LastMirrorEpochLookup {
                    topic_id: uuid_seq(100),
                    partitions: vec![0, 3, 9],
                },
                LastMirrorEpochLookup {
                    topic_id: uuid_seq(200),
                    partitions: vec![],
                },
            ],
            local_only: false,
        }),
        MirrorRequest::DescribeClusterMirrors(DescribeClusterMirrorsRequest {
            mirror_names: vec![],
            include_authorized_operations: false,
            cluster_id: Some(String::new()),
            last_mirror_epoch_lookups: vec![],
            local_only: true,
        }),
        MirrorRequest::DescribeClusterMirrors(DescribeClusterMirrorsRequest {
            mirror_names: vec![],
            include_authorized_operations: false,
            cluster_id: None,
            last_mirror_epoch_lookups: vec![LastMirrorEpochLookup {
                topic_id: uuid_seq(7),
                partitions: vec![1],
            }],
            local_only: false,
        }),
        MirrorRequest::DescribeClusterMirrors(DescribeClusterMirrorsRequest::default()),
        MirrorRequest::ReadMirrorStates(ReadMirrorStatesRequest {
            mirror_name: "east".into(),
            topics: vec![TopicPartitions {
                name: "orders".into(),
                partitions: vec![5, 6],
            }],
        }),
        MirrorRequest::WriteMirrorStates(WriteMirrorStatesRequest {
            mirror_name: "east".into(),
            topics: vec![
                WriteMirrorStateTopic {
                    name: "orders".into(),
                    partitions: vec![
                        WriteMirrorStatePartition {
                            partition_index: 0,
                            last_mirror_epoch: 17,
                            state: 2,
                            ..Default::default()
                        },
                        WriteMirrorStatePartition {
                            partition_index: 1,
                            last_mirror_epoch: -1,
                            state: 5,
                            retry_attempt: 3,
                            error_message: Some("source down".into()),
                            last_mirrored_offset: 1234,
                            previous_state: 2,
                            leader_epoch: 7,
                        },
                        WriteMirrorStatePartition::default(),
                    ],
                },
                WriteMirrorStateTopic {
                    name: "empty".into(),
                    partitions: vec![],
                },
            ],
            stopped_topics: vec!["old".into()],
        }),
        MirrorRequest::DeleteClusterMirror(DeleteClusterMirrorRequest {
            mirror_name: "east".into(),
            state_validation_offset: 99,
        }),
        MirrorRequest::DeleteClusterMirror(DeleteClusterMirrorRequest::default()),
        MirrorRequest::BumpLeaderEpochs(BumpLeaderEpochsRequest {
            topics: vec![BumpLeaderEpochTopic {
                topic_id: uuid_seq(9),
                partitions: vec![
                    BumpLeaderEpochPartition {
                        partition_index: 0,
                        min_leader_epoch: 7,
                    },
                    BumpLeaderEpochPartition {
                        partition_index: 3,
                        min_leader_epoch: -1,
                    },
                ],
            }],
        }),
    ]
}

fn topics_response() -> TopicsMirrorResponse {
    TopicsMirrorResponse {
        throttle_time_ms: 10,
        error_code: 0,
        error_message: None,
        topics: vec![
            TopicResult {
                name: "orders".into(),
                error_code: 138,
                error_message: Some("already mirrored".into()),
            },
            TopicResult {
                name: "ok".into(),
                error_code: 0,
                error_message: None,
            },
        ],
    }
}

/// Responses of every kind with non-default values.
fn sample_responses() -> Vec<MirrorResponse> {
    vec![
        MirrorResponse::CreateClusterMirror(SimpleMirrorResponse {
            throttle_time_ms: 3,
            error_code: 136,
            error_message: Some("exists".into()),
        }),
        MirrorResponse::CreateClusterMirror(SimpleMirrorResponse::default()),
        MirrorResponse::StartMirrorTopics(topics_response()),
        MirrorResponse::StopMirrorTopics(TopicsMirrorResponse {
            error_code: 137,
            error_message: Some("unknown mirror".into()),
            ..Default::default()
        }),
        MirrorResponse::PauseMirrorTopics(topics_response()),
        MirrorResponse::ResumeMirrorTopics(topics_response()),
        MirrorResponse::LastMirroredOffsets(LastMirroredOffsetsResponse {
            throttle_time_ms: 1,
            error_code: 0,
            error_message: None,
            topics: vec![LastMirroredOffsetTopic {
                name: "orders".into(),
                partitions: vec![
                    LastMirroredOffsetPartition {
                        partition_index: 0,
                        last_mirrored_offset: 10_000_000_000,
                        error_code: 0,
                    },
                    LastMirroredOffsetPartition {
                        partition_index: 1,
                        last_mirrored_offset: -1,
                        error_code: 146,
                    },
                ],
            }],
        }),
        MirrorResponse::ListClusterMirrors(ListClusterMirrorsResponse {
            throttle_time_ms: 0,
            error_code: 0,
            error_message: None,
            mirrors: vec![
                ListedMirror {
                    mirror_name: "east".into(),
                    source_bootstrap: "a:9092,b:9092".into(),
                    source_cluster_id: "abc".into(),
                    topic_count: 2,
                    topic_names: vec!["x".into(), "y".into()],
                },
                ListedMirror {
                    mirror_name: "west".into(),
                    source_bootstrap: "w:9092".into(),
                    source_cluster_id: String::new(),
                    topic_count: 0,
                    topic_names: vec![],
                },
            ],
        }),
        MirrorResponse::DescribeClusterMirrors(DescribeClusterMirrorsResponse {
            throttle_time_ms: 2,
            error_code: 0,
            error_message: Some("partial".into()),
            mirrors: vec![
                DescribedMirror {
                    error_code: 0,
                    mirror_name: "east".into(),
                    authorized_operations: 0x1234,
                    topics: vec![MirrorTopicDetail {
                        topic_name: "orders".into(),
                        partitions: vec![
                            MirrorPartitionDetail {
                                partition_index: 0,
                                source_offset: 100,
                                destination_offset: 90,
                                lag: 10,
                                state_value: "MIRRORING".into(),
                                retry_attempt: 0,
                                error_message: None,
                            },
                            MirrorPartitionDetail {
                                partition_index: 1,
                                state_value: "FAILED".into(),
                                retry_attempt: -1,
                                error_message: Some("boom".into()),
                                ..Default::default()
                            },
                        ],
                    }],
                },
                DescribedMirror {
                    error_code: 137,
                    mirror_name: "gone".into(),
                    ..Default::default()
                },
            ],
            lookup_results: vec![LookupResult {
                topic_id: uuid_seq(50),
                partitions: vec![
                    LookupPartitionResult {
                        partition_index: 0,
                        last_mirror_epoch: 4,
                    },
                    LookupPartitionResult {
                        partition_index: 1,
                        last_mirror_epoch: -1,
                    },
                ],
            }],
        }),
        MirrorResponse::DescribeClusterMirrors(DescribeClusterMirrorsResponse::default()),
        MirrorResponse::ReadMirrorStates(ReadMirrorStatesResponse {
            throttle_time_ms: 0,
            error_code: 0,
            error_message: None,
            topics: vec![ReadMirrorStateTopic {
                name: "orders".into(),
                partitions: vec![
                    ReadMirrorStatePartition {
                        partition_index: 3,
                        last_mirror_epoch: 8,
                        state: 1,
                        error_code: 0,
                        previous_state: 0,
                        retry_attempt: 2,
                        error_message: Some("retrying".into()),
                        last_mirrored_offset: -1,
                    },
                    ReadMirrorStatePartition {
                        partition_index: 4,
                        state: 4,
                        last_mirrored_offset: 77,
                        ..Default::default()
                    },
                    ReadMirrorStatePartition::default(),
                ],
            }],
        }),
        MirrorResponse::WriteMirrorStates(WriteMirrorStatesResponse {
            throttle_time_ms: 0,
            error_code: 0,
            error_message: None,
            topics: vec![WriteMirrorStateTopicResult {
                name: "orders".into(),
                partitions: vec![
                    WriteMirrorStatePartitionResult {
                        partition_index: 0,
                        error_code: 0,
                        error_message: None,
                    },
                    WriteMirrorStatePartitionResult {
                        partition_index: 1,
                        error_code: 6,
                        error_message: Some("not leader".into()),
                    },
                ],
            }],
        }),
        MirrorResponse::DeleteClusterMirror(SimpleMirrorResponse {
            throttle_time_ms: 0,
            error_code: 143,
            error_message: None,
        }),
        MirrorResponse::BumpLeaderEpochs(BumpLeaderEpochsResponse {
            throttle_time_ms: 3,
            error_code: 0,
            topics: vec![BumpLeaderEpochTopicResult {
                topic_name: "orders".into(),
                partitions: vec![
                    BumpLeaderEpochPartitionResult {
                        partition_index: 0,
                        error_code: 0,
                    },
                    BumpLeaderEpochPartitionResult {
                        partition_index: 1,
                        error_code: 74,
                    },
                ],
            }],
        }),
    ]
}

fn response_api_key(response: &MirrorResponse) -> i16 {
    use api_keys::*;
    match response {
        MirrorResponse::CreateClusterMirror(_) => CREATE_CLUSTER_MIRROR,
        MirrorResponse::StartMirrorTopics(_) => START_MIRROR_TOPICS,
        MirrorResponse::StopMirrorTopics(_) => STOP_MIRROR_TOPICS,
        MirrorResponse::LastMirroredOffsets(_) => LAST_MIRRORED_OFFSETS,
        MirrorResponse::ListClusterMirrors(_) => LIST_CLUSTER_MIRRORS,
        MirrorResponse::DescribeClusterMirrors(_) => DESCRIBE_CLUSTER_MIRRORS,
        MirrorResponse::ReadMirrorStates(_) => READ_MIRROR_STATES,
        MirrorResponse::WriteMirrorStates(_) => WRITE_MIRROR_STATES,
        MirrorResponse::PauseMirrorTopics(_) => PAUSE_MIRROR_TOPICS,
        MirrorResponse::ResumeMirrorTopics(_) => RESUME_MIRROR_TOPICS,
        MirrorResponse::DeleteClusterMirror(_) => DELETE_CLUSTER_MIRROR,
        MirrorResponse::BumpLeaderEpochs(_) => BUMP_LEADER_EPOCHS,
    }
}

/// The response body after the 5-byte header v1 (correlation id + empty tag section).
fn response_body(encoded: &BytesMut) -> Bytes {
    assert_eq!(encoded[4], 0, "empty response header tag section");
    Bytes::copy_from_slice(&encoded[5..])
}

#[test]
fn mirror_samples_cover_every_api_key() {
    let mut req_keys: Vec<i16> = sample_requests().iter().map(|r| r.api_key()).collect();
    req_keys.sort();
    req_keys.dedup();
    let mut resp_keys: Vec<i16> = sample_responses().iter().map(response_api_key).collect();
    resp_keys.sort();
    resp_keys.dedup();
    let all: Vec<i16> = (api_keys::FIRST..=api_keys::LAST).collect();
    assert_eq!(req_keys, all);
    assert_eq!(resp_keys, all);
}

#[test]
fn mirror_request_round_trip() {
    for (i, request) in sample_requests().into_iter().enumerate() {
        let correlation_id = 1000 + i as i32;
        let encoded = encode_mirror_request(correlation_id, "tern-test", &request);
        let (header, decoded) = decode_mirror_request(encoded.freeze())
            .unwrap_or_else(|e| panic!("request {i} ({request:?}) failed to decode: {e}"));
        assert_eq!(decoded, request, "request {i}");
        assert_eq!(header.request_api_key, request.api_key());
        assert_eq!(header.request_api_version, 0);
        assert_eq!(header.correlation_id, correlation_id);
        assert_eq!(header.client_id.as_deref(), Some("tern-test"));
    }
}

#[test]
fn mirror_response_round_trip() {
    for (i, response) in sample_responses().into_iter().enumerate() {
        let encoded = encode_mirror_response(-5 + i as i32, &response);
        assert_eq!(&encoded[..4], &(-5 + i as i32).to_be_bytes());
        let decoded = decode_mirror_response(response_api_key(&response), response_body(&encoded))
            .unwrap_or_else(|e| panic!("response {i} ({response:?}) failed to decode: {e}"));
        assert_eq!(decoded, response, "response {i}");
    }
}

#[test]
fn mirror_create_cluster_mirror_request_bytes() {
    let request = MirrorRequest::CreateClusterMirror(CreateClusterMirrorRequest {
        mirror_name: "m1".into(),
        configs: vec![("a".into(), Some("b".into())), ("c".into(), None)],
    });
    let encoded = encode_mirror_request(7, "cli", &request);
    #[rustfmt::skip]
    let expected: &[u8] = &[
        // request header v2
        0x00, 0x5e,             // api key 94
        0x00, 0x00,             // version 0
        0x00, 0x00, 0x00, 0x07, // correlation id
        0x00, 0x03, b'c', b'l', b'i', // client id: int16 length + bytes
        0x00,                   // header tagged fields
        // body
        0x03, b'm', b'1',       // MirrorName: compact string (len + 1)
        0x03,                   // Config: compact array of 2
        0x02, b'a', 0x02, b'b', 0x00, // {Name "a", Value "b", no tags}
        0x02, b'c', 0x00, 0x00, //        {Name "c", Value null, no tags}
        0x00,                   // body tagged fields
    ];
    assert_eq!(&encoded[..], expected);
    let (_, decoded) = decode_mirror_request(Bytes::from_static(expected)).unwrap();
    assert_eq!(decoded, request);
}

#[test]
fn mirror_bump_leader_epochs_bytes() {
    let request = MirrorRequest::BumpLeaderEpochs(BumpLeaderEpochsRequest {
        topics: vec![BumpLeaderEpochTopic {
            topic_id: Uuid::from_bytes([1; 16]),
            partitions: vec![BumpLeaderEpochPartition {
                partition_index: 2,
                min_leader_epoch: 5,
            }],
        }],
    });
    let encoded = encode_mirror_request(1, "", &request);
    #[rustfmt::skip]
    let body: &[u8] = &[
        0x02,                                   // Topics: compact array of 1
        1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, // TopicId
        0x02,                                   // Partitions: compact array of 1
        0x00, 0x00, 0x00, 0x02,                 // PartitionIndex
        0x00, 0x00, 0x00, 0x05,                 // MinLeaderEpoch
        0x00,                                   // partition tags
        0x00,                                   // topic tags
        0x00,                                   // body tags
    ];
    assert_eq!(&encoded[..2], &[0x00, 0x69], "api key 105");
    assert_eq!(&encoded[encoded.len() - body.len()..], body);
    let (_, decoded) = decode_mirror_request(Bytes::from(encoded.to_vec())).unwrap();
    assert_eq!(decoded, request);

    // The response has no top-level error message.
    let response = MirrorResponse::BumpLeaderEpochs(BumpLeaderEpochsResponse {
        throttle_time_ms: 0,
        error_code: 0,
        topics: vec![BumpLeaderEpochTopicResult {
            topic_name: "t".into(),
            partitions: vec![BumpLeaderEpochPartitionResult {
                partition_index: 2,
                error_code: 74,
            }],
        }],
    });
    #[rustfmt::skip]
    let expected: &[u8] = &[
        0x00, 0x00, 0x00, 0x00, // ThrottleTimeMs
        0x00, 0x00,             // ErrorCode
        0x02,                   // Topics: compact array of 1
        0x02, b't',             // TopicName
        0x02,                   // Partitions: compact array of 1
        0x00, 0x00, 0x00, 0x02, // PartitionIndex
        0x00, 0x4a,             // ErrorCode 74
        0x00, 0x00, 0x00,       // partition, topic and body tags
    ];
    let encoded = encode_mirror_response(1, &response);
    assert_eq!(&encoded[5..], expected);
    assert_eq!(
        decode_mirror_response(api_keys::BUMP_LEADER_EPOCHS, Bytes::from_static(expected)).unwrap(),
        response
    );
}

#[test]
fn mirror_list_cluster_mirrors_response_bytes() {
    let response = MirrorResponse::ListClusterMirrors(ListClusterMirrorsResponse {
        throttle_time_ms: 5,
        error_code: 0,
        error_message: None,
        mirrors: vec![ListedMirror {
            mirror_name: "m".into(),
            source_bootstrap: "h:9092".into(),
            source_cluster_id: String::new(),
            topic_count: 2,
            topic_names: vec!["t1".into(), "t2".into()],
        }],
    });
    let encoded = encode_mirror_response(9, &response);
    #[rustfmt::skip]
    let expected: &[u8] = &[
        // response header v1
        0x00, 0x00, 0x00, 0x09, // correlation id
        0x00,                   // header tagged fields
        // body
        0x00, 0x00, 0x00, 0x05, // ThrottleTimeMs
        0x00, 0x00,             // ErrorCode
        0x00,                   // ErrorMessage: null
        0x02,                   // Mirrors: compact array of 1
        0x02, b'm',             //   MirrorName
        0x07, b'h', b':', b'9', b'0', b'9', b'2', // SourceBootstrap
        0x01,                   //   SourceClusterId: ""
        0x00, 0x00, 0x00, 0x02, //   TopicCount
        0x03, 0x03, b't', b'1', 0x03, b't', b'2', // TopicNames: [] string, no per-element tags
        0x00,                   //   ListedMirror tagged fields
        0x00,                   // body tagged fields
    ];
    assert_eq!(&encoded[..], expected);
    let decoded = decode_mirror_response(98, Bytes::copy_from_slice(&expected[5..])).unwrap();
    assert_eq!(decoded, response);
}

#[test]
fn mirror_start_mirror_topics_tagged_bytes() {
    let request = MirrorRequest::StartMirrorTopics(StartMirrorTopicsRequest {
        mirror_name: "m".into(),
        topics: vec![StartMirrorTopic {
            topic_id: uuid_seq(1),
            topic_name: "t".into(),
            num_partitions: -1,
        }],
        include_patterns: vec!["a.*".into()],
        exclude_patterns: vec!["x".into()],
        state_validation_offset: 42,
    });
    let encoded = encode_mirror_request(1, "", &request);
    let mut expected: Vec<u8> = vec![
        0x00, 0x5f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
    ];
    expected.extend_from_slice(&[0x02, b'm', 0x02]);
    expected.extend(1u8..=16); // TopicId
    expected.extend_from_slice(&[0x02, b't', 0xff, 0xff, 0xff, 0xff, 0x00]);
    expected.extend_from_slice(&42i64.to_be_bytes()); // StateValidationOffset
    #[rustfmt::skip]
    expected.extend_from_slice(&[
        0x02,                                     // two tagged fields, ascending
        0x00, 0x05, 0x02, 0x04, b'a', b'.', b'*', // tag 0 IncludePatterns, size 5
        0x01, 0x03, 0x02, 0x02, b'x',             // tag 1 ExcludePatterns, size 3
    ]);
    assert_eq!(&encoded[..], &expected[..]);

    // Only the default-valued tag left out.
    let request = MirrorRequest::StartMirrorTopics(StartMirrorTopicsRequest {
        mirror_name: "m".into(),
        exclude_patterns: vec!["x".into()],
        ..Default::default()
    });
    let encoded = encode_mirror_request(1, "", &request);
    #[rustfmt::skip]
    let expected_body: &[u8] = &[
        0x02, b'm', 0x01,
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0x01, 0x01, 0x03, 0x02, 0x02, b'x',
    ];
    assert_eq!(&encoded[11..], expected_body);
}

#[test]
fn mirror_describe_request_tag_bytes() {
    let request = MirrorRequest::DescribeClusterMirrors(DescribeClusterMirrorsRequest {
        mirror_names: vec![],
        include_authorized_operations: true,
        cluster_id: Some("c".into()),
        last_mirror_epoch_lookups: vec![LastMirrorEpochLookup {
            topic_id: Uuid::nil(),
            partitions: vec![3],
        }],
        local_only: false,
    });
    let encoded = encode_mirror_request(1, "", &request);
    let mut expected: Vec<u8> = vec![0x01, 0x01, 0x02, 0x00, 0x02, 0x02, b'c', 0x01, 23, 0x02];
    expected.extend_from_slice(&[0u8; 16]);
    expected.extend_from_slice(&[0x02, 0x00, 0x00, 0x00, 0x03, 0x00]);
    assert_eq!(&encoded[11..], &expected[..]);

    // Nothing tagged: a bare empty section.
    let request = MirrorRequest::DescribeClusterMirrors(DescribeClusterMirrorsRequest::default());
    assert_eq!(
        &encode_mirror_request(1, "", &request)[11..],
        &[0x01, 0x00, 0x00]
    );
}

#[test]
fn mirror_pause_resume_never_encode_patterns() {
    let with_patterns = MirrorTopicsRequest {
        mirror_name: "m".into(),
        topics: vec!["t".into()],
        patterns: vec!["p.*".into()],
        state_validation_offset: 3,
    };
    let stop = encode_mirror_request(
        1,
        "c",
        &MirrorRequest::StopMirrorTopics(with_patterns.clone()),
    );
    for request in [
        MirrorRequest::PauseMirrorTopics(with_patterns.clone()),
        MirrorRequest::ResumeMirrorTopics(with_patterns.clone()),
    ] {
        let encoded = encode_mirror_request(1, "c", &request);
        assert_eq!(*encoded.last().unwrap(), 0, "empty tag section");
        assert!(encoded.len() < stop.len());
        let (_, decoded) = decode_mirror_request(encoded.freeze()).unwrap();
        let expected = MirrorTopicsRequest {
            patterns: vec![],
            ..with_patterns.clone()
        };
        match decoded {
            MirrorRequest::PauseMirrorTopics(r) | MirrorRequest::ResumeMirrorTopics(r) => {
                assert_eq!(r, expected)
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    // A Pause frame carrying tag 0 anyway: the unknown tag is skipped.
    let mut forged = stop.to_vec();
    forged[1] = 102;
    let (_, decoded) = decode_mirror_request(Bytes::from(forged)).unwrap();
    assert_eq!(
        decoded,
        MirrorRequest::PauseMirrorTopics(MirrorTopicsRequest {
            patterns: vec![],
            ..with_patterns
        })
    );
}

#[test]
fn mirror_unknown_tags_are_skipped() {
    // ListClusterMirrors with an unknown tag 9 in the header and the body.
    let frame: &[u8] = &[
        0x00, 98, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0xff, 0xff, // null client id
        0x01, 0x09, 0x02, 0xaa, 0xbb, // header: tag 9, 2 bytes
        0x01, // IncludeTopicNames
        0x02, 0x05, 0x00, 0x07, 0x01, 0x01, // tags 5 (empty) and 7 (1 byte)
    ];
    let (header, decoded) = decode_mirror_request(Bytes::from_static(frame)).unwrap();
    assert_eq!(header.client_id, None);
    assert_eq!(
        decoded,
        MirrorRequest::ListClusterMirrors(ListClusterMirrorsRequest {
            include_topic_names: true
        })
    );
    // An unknown tag inside a nested array element of a response.
    let body: &[u8] = &[
        0, 0, 0, 0, 0, 0, 0x00, // head
        0x02, // one topic
        0x02, b't', 0x00, 0x00, 0x00, // name, code, null message
        0x01, 0x04, 0x03, 1, 2, 3, // tag 4, 3 bytes
        0x00,
    ];
    let decoded = decode_mirror_response(95, Bytes::from_static(body)).unwrap();
    assert_eq!(
        decoded,
        MirrorResponse::StartMirrorTopics(TopicsMirrorResponse {
            topics: vec![TopicResult {
                name: "t".into(),
                ..Default::default()
            }],
            ..Default::default()
        })
    );
}

#[test]
fn mirror_null_arrays_decode_as_empty() {
    // WriteMirrorStates with a null Topics and a null StoppedTopics.
    let frame: &[u8] = &[
        0x00, 101, 0, 0, 0, 0, 0, 1, 0x00, 0x00, 0x00, 0x02, b'm', 0x00, 0x00, 0x00,
    ];
    let (_, decoded) = decode_mirror_request(Bytes::from_static(frame)).unwrap();
    assert_eq!(
        decoded,
        MirrorRequest::WriteMirrorStates(WriteMirrorStatesRequest {
            mirror_name: "m".into(),
            ..Default::default()
        })
    );
}

#[test]
fn mirror_request_errors() {
    let valid = encode_mirror_request(
        42,
        "c",
        &MirrorRequest::ListClusterMirrors(ListClusterMirrorsRequest::default()),
    );
    for key in [0i16, 93, 106, 500, -1] {
        let mut frame = valid.to_vec();
        frame[..2].copy_from_slice(&key.to_be_bytes());
        match decode_mirror_request(Bytes::from(frame)) {
            Err(RequestError::UnknownApiKey {
                api_key,
                correlation_id,
            }) => {
                assert_eq!(api_key, key);
                assert_eq!(correlation_id, 42);
            }
            other => panic!("key {key}: {other:?}"),
        }
    }
    for version in [1i16, -1, 7] {
        let mut frame = valid.to_vec();
        frame[2..4].copy_from_slice(&version.to_be_bytes());
        assert!(matches!(
            decode_mirror_request(Bytes::from(frame)),
            Err(RequestError::UnsupportedVersion { api_key: 98, version: v, correlation_id: 42 }) if v == version
        ));
    }
    assert!(matches!(
        decode_mirror_request(Bytes::from_static(&[0, 98, 0])),
        Err(RequestError::TooShort)
    ));
    // Non-nullable string sent as null, bad UTF-8, negative client id length.
    let bad: [&[u8]; 3] = [
        &[
            0, 104, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ],
        &[
            0, 104, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0x02, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ],
        &[0, 98, 0, 0, 0, 0, 0, 1, 0xff, 0xfe, 0, 0, 0],
    ];
    for frame in bad {
        assert!(
            matches!(
                decode_mirror_request(Bytes::copy_from_slice(frame)),
                Err(RequestError::Malformed { .. })
            ),
            "{frame:?}"
        );
    }
    assert!(decode_mirror_response(93, Bytes::from_static(&[0; 16])).is_err());
}

#[test]
fn mirror_truncated_frames_are_errors() {
    for request in sample_requests() {
        let encoded = encode_mirror_request(3, "client", &request).freeze();
        for len in 0..encoded.len() {
            match decode_mirror_request(encoded.slice(..len)) {
                Err(RequestError::Malformed { .. }) if len >= 8 => {}
                Err(RequestError::TooShort) if len < 8 => {}
                other => panic!("{request:?} cut at {len}: {other:?}"),
            }
        }
        // Trailing bytes after the body are ignored.
        let mut longer = encoded.to_vec();
        longer.extend_from_slice(&[1, 2, 3]);
        assert_eq!(
            decode_mirror_request(Bytes::from(longer)).unwrap().1,
            request
        );
    }
    for response in sample_responses() {
        let body = response_body(&encode_mirror_response(3, &response));
        for len in 0..body.len() {
            assert!(
                decode_mirror_response(response_api_key(&response), body.slice(..len)).is_err(),
                "{response:?} cut at {len}"
            );
        }
    }
}

#[test]
fn mirror_forged_huge_counts_fail_fast() {
    let start = Instant::now();
    let huge = [0xff, 0xff, 0xff, 0xff, 0x0f]; // u32::MAX as an unsigned varint
    let header = [0u8, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0];
    let mut frames = Vec::new();
    for key in api_keys::FIRST..=api_keys::LAST {
        // The huge count right after the header: the first compact field of every body.
        let mut f = header.to_vec();
        f[..2].copy_from_slice(&key.to_be_bytes());
        f.extend_from_slice(&huge);
        f.extend_from_slice(&[0u8; 64]);
        frames.push(f);
    }
    // A huge Topics count after a valid mirror name, a huge tagged-field count and size, a
    // huge nested partition count.
    frames.push([&[0, 95][..], &header[2..], &[0x02, b'm'], &huge, &[0u8; 32]].concat());
    frames.push([&[0, 98][..], &header[2..], &[0x01], &huge, &[0u8; 8]].concat());
    frames.push(
        [
            &[0, 98][..],
            &header[2..],
            &[0x01, 0x01, 0x00],
            &huge,
            &[0u8; 8],
        ]
        .concat(),
    );
    frames.push(
        [
            &[0, 100][..],
            &header[2..],
            &[0x02, b'm', 0x02, 0x02, b't'],
            &huge,
            &[0u8; 8],
        ]
        .concat(),
    );
    // An overlong varint.
    frames.push([&[0, 98][..], &header[2..], &[0x01], &[0xff; 6]].concat());
    // A huge client id length is bounded by int16 anyway.
    frames.push([&[0, 98, 0, 0, 0, 0, 0, 1, 0x7f, 0xff][..], &[0u8; 4]].concat());
    for (i, f) in frames.iter().enumerate() {
        assert!(
            matches!(
                decode_mirror_request(Bytes::from(f.clone())),
                Err(RequestError::Malformed { .. })
            ),
            "frame {i}"
        );
    }
    for key in api_keys::FIRST..=api_keys::LAST {
        let body = [&[0u8, 0, 0, 0, 0, 0, 0][..], &huge, &[0u8; 16]].concat();
        // For 94/104 (no array) the varint is read as the tag count, which runs out of bytes.
        assert!(
            decode_mirror_response(key, Bytes::from(body)).is_err(),
            "key {key}"
        );
    }
    assert!(start.elapsed() < Duration::from_secs(1));
}

fn request_header_for(key: i16) -> Vec<u8> {
    let mut h = vec![0u8; 8];
    h[..2].copy_from_slice(&key.to_be_bytes());
    h[7] = 1;
    h.extend_from_slice(&[0x00, 0x01, b'x', 0x00]);
    h
}

proptest! {
    #[test]
    fn mirror_random_request_bodies_never_panic(
        key in api_keys::FIRST..=api_keys::LAST,
        body in proptest::collection::vec(any::<u8>(), 0..256),
    ) {
        let frame = [request_header_for(key), body].concat();
        let _ = decode_mirror_request(Bytes::from(frame));
    }

    #[test]
    fn mirror_random_frames_never_panic(frame in proptest::collection::vec(any::<u8>(), 0..128)) {
        let _ = decode_mirror_request(Bytes::from(frame));
    }

    #[test]
    fn mirror_mutated_requests_never_panic(
        index in 0usize..64,
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
        cut in any::<usize>(),
    ) {
        let requests = sample_requests();
        let request = &requests[index % requests.len()];
        let mut frame = encode_mirror_request(1, "c", request).to_vec();
        for (pos, byte) in edits {
            let n = frame.len();
            frame[8 + pos % (n - 8)] = byte;
        }
        let n = frame.len();
        frame.truncate(8 + cut % (n - 7));
        let _ = decode_mirror_request(Bytes::from(frame));
    }

    #[test]
    fn mirror_random_response_bodies_never_panic(
        key in api_keys::FIRST - 1..=api_keys::LAST + 1,
        body in proptest::collection::vec(any::<u8>(), 0..256),
    ) {
        let _ = decode_mirror_response(key, Bytes::from(body));
    }

    #[test]
    fn mirror_mutated_responses_never_panic(
        index in 0usize..64,
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
    ) {
        let responses = sample_responses();
        let response = &responses[index % responses.len()];
        let mut body = response_body(&encode_mirror_response(1, response)).to_vec();
        for (pos, byte) in edits {
            let n = body.len();
            body[pos % n] = byte;
        }
        let _ = decode_mirror_response(response_api_key(response), Bytes::from(body));
    }

    #[test]
    fn mirror_string_round_trip(
        name in "\\PC{0,40}",
        value in proptest::option::of("\\PC{0,300}"),
        offset in any::<i64>(),
        patterns in proptest::collection::vec("[a-z.*]{0,10}", 0..4),
    ) {
        let requests = [
            MirrorRequest::CreateClusterMirror(CreateClusterMirrorRequest {
                mirror_name: name.clone(),
                configs: vec![(name.clone(), value)],
            }),
            MirrorRequest::StopMirrorTopics(MirrorTopicsRequest {
                mirror_name: name.clone(),
                topics: patterns.clone(),
                patterns,
                state_validation_offset: offset,
            }),
        ];
        for request in requests {
            let encoded = encode_mirror_request(1, &name, &request);
            let (header, decoded) = decode_mirror_request(encoded.freeze()).unwrap();
            prop_assert_eq!(decoded, request);
            prop_assert_eq!(header.client_id.as_deref(), Some(name.as_str()));
        }
    }
}

#[tokio::test]
async fn mirror_client_send_mirror() {
    use crate::client::{ClientError, KafkaConnection};
    use crate::frame::{read_frame, write_frame};

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut answered = 0;
        while let Some(frame) = read_frame(&mut stream, 1 << 20).await.unwrap() {
            let (header, request) = decode_mirror_request(frame).unwrap();
            assert_eq!(header.client_id.as_deref(), Some("mirror-client"));
            let response = match request {
                MirrorRequest::ListClusterMirrors(r) => {
                    MirrorResponse::ListClusterMirrors(ListClusterMirrorsResponse {
                        mirrors: vec![ListedMirror {
                            mirror_name: "east".into(),
                            topic_names: if r.include_topic_names {
                                vec!["t".into()]
                            } else {
                                vec![]
                            },
                            topic_count: 1,
                            ..Default::default()
                        }],
                        ..Default::default()
                    })
                }
                MirrorRequest::DeleteClusterMirror(r) => {
                    MirrorResponse::DeleteClusterMirror(SimpleMirrorResponse {
                        error_code: 137,
                        error_message: Some(r.mirror_name),
                        ..Default::default()
                    })
                }
                other => panic!("unexpected {other:?}"),
            };
            // The third request gets a wrong correlation id.
            let correlation_id = if answered == 2 {
                header.correlation_id + 100
            } else {
                header.correlation_id
            };
            let out = encode_mirror_response(correlation_id, &response);
            write_frame(&mut stream, &[&out]).await.unwrap();
            answered += 1;
        }
    });

    let mut conn = KafkaConnection::connect(addr, "mirror-client")
        .await
        .unwrap();
    let list = conn
        .send_mirror(&MirrorRequest::ListClusterMirrors(
            ListClusterMirrorsRequest {
                include_topic_names: true,
            },
        ))
        .await
        .unwrap();
    match list {
        MirrorResponse::ListClusterMirrors(r) => {
            assert_eq!(r.mirrors.len(), 1);
            assert_eq!(r.mirrors[0].mirror_name, "east");
            assert_eq!(r.mirrors[0].topic_names, vec!["t".to_string()]);
        }
        other => panic!("unexpected {other:?}"),
    }
    let delete = conn
        .send_mirror(&MirrorRequest::DeleteClusterMirror(
            DeleteClusterMirrorRequest {
                mirror_name: "west".into(),
                state_validation_offset: -1,
            },
        ))
        .await
        .unwrap();
    assert_eq!(
        delete,
        MirrorResponse::DeleteClusterMirror(SimpleMirrorResponse {
            throttle_time_ms: 0,
            error_code: 137,
            error_message: Some("west".into()),
        })
    );
    let mismatch = conn
        .send_mirror(&MirrorRequest::ListClusterMirrors(
            ListClusterMirrorsRequest::default(),
        ))
        .await;
    assert!(matches!(
        mismatch,
        Err(ClientError::CorrelationMismatch { sent: 3, got: 103 })
    ));
    drop(conn);
    server.await.unwrap();
}
