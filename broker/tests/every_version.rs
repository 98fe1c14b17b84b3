//! Every version of the core APIs gets a decodable answer: a response field set beyond what a
//! version carries would fail to encode and close the connection.

mod support;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiVersionsRequest, BrokerId, DescribeClusterRequest, DescribeConfigsRequest,
    DescribeGroupsRequest, DescribeLogDirsRequest, FetchRequest, FindCoordinatorRequest, GroupId,
    ListConfigResourcesRequest, ListGroupsRequest, ListOffsetsRequest, MetadataRequest,
    OffsetFetchRequest, ProduceRequest,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use support::*;

#[tokio::test]
async fn core_apis_answer_at_every_supported_version() {
    let s = TestServer::start().await;
    let mut c = s.connect().await;
    create_topic(&mut c, "v", 1, &[]).await;
    produce(&mut c, "v", 0, batch(3)).await;
    let meta = c
        .send(&MetadataRequest::default().with_topics(None), 12)
        .await
        .unwrap();
    let topic_id = meta
        .topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| n.0.as_str()) == Some("v"))
        .unwrap()
        .topic_id;

    for v in 0..=4 {
        let r = c.send(&ApiVersionsRequest::default(), v).await.unwrap();
        assert_eq!(r.error_code, 0, "ApiVersions v{v}");
    }
    for v in 0..=13 {
        let mut t = MetadataRequestTopic::default().with_name(Some(name("v")));
        if v >= 10 {
            t.topic_id = topic_id;
        }
        let r = c
            .send(&MetadataRequest::default().with_topics(Some(vec![t])), v)
            .await
            .unwrap();
        assert_eq!(r.topics[0].error_code, 0, "Metadata v{v}");
        assert_eq!(r.topics[0].partitions.len(), 1, "Metadata v{v}");
    }
    let produce_to = |v: i16, id: uuid::Uuid| {
        // From v13 a topic is named by its id only.
        let topic = if v >= 13 {
            TopicProduceData::default().with_topic_id(id)
        } else {
            TopicProduceData::default().with_name(name("v"))
        };
        ProduceRequest::default()
            .with_acks(1)
            .with_timeout_ms(1000)
            .with_topic_data(vec![topic.with_partition_data(vec![
                PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(batch(1))),
            ])])
    };
    for v in 3..=13 {
        let r = c.send(&produce_to(v, topic_id), v).await.unwrap();
        assert_eq!(
            r.responses[0].partition_responses[0].error_code, 0,
            "Produce v{v}"
        );
        if v >= 13 {
            assert_eq!(
                r.responses[0].topic_id, topic_id,
                "Produce v{v} answers by id"
            );
        }
    }
    let r = c
        .send(&produce_to(13, uuid::Uuid::from_u128(7)), 13)
        .await
        .unwrap();
    assert_eq!(
        r.responses[0].partition_responses[0].error_code,
        kafka_protocol::ResponseError::UnknownTopicId.code(),
        "Produce v13 to an unknown topic id"
    );
    for v in 1..=11 {
        let stamps: &[i64] = if v >= 11 {
            &[-1, -2, 1_000, -6]
        } else {
            &[-1, -2, 1_000]
        };
        for &ts in stamps {
            let mut req = ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(vec![ListOffsetsTopic::default()
                    .with_name(name("v"))
                    .with_partitions(vec![ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(ts)])]);
            if v >= 4 {
                req.topics[0].partitions[0].current_leader_epoch = -1;
            }
            let r = c.send(&req, v).await.unwrap();
            let p = &r.topics[0].partitions[0];
            assert_eq!(p.error_code, 0, "ListOffsets v{v} ts {ts}");
            let expected = match ts {
                -1 => 14,
                -6 => -1, // no tiered storage: nothing pending upload
                _ => 0,
            };
            assert_eq!(p.offset, expected, "ListOffsets v{v} ts {ts}");
        }
    }
    for v in 4..=18 {
        let mut topic = FetchTopic::default().with_partitions(vec![FetchPartition::default()
            .with_partition(0)
            .with_fetch_offset(0)
            .with_partition_max_bytes(1 << 20)]);
        if v >= 13 {
            topic.topic_id = topic_id;
        } else {
            topic.topic = name("v");
        }
        let req = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(0)
            .with_max_bytes(1 << 20)
            .with_session_epoch(-1)
            .with_topics(vec![topic]);
        let r = c.send(&req, v).await.unwrap();
        assert_eq!(r.error_code, 0, "Fetch v{v}");
        let p = &r.responses[0].partitions[0];
        assert_eq!(p.error_code, 0, "Fetch v{v}");
        assert_eq!(p.high_watermark, 14, "Fetch v{v}");
        assert!(
            p.records.as_ref().is_some_and(|r| !r.is_empty()),
            "Fetch v{v}"
        );
    }
    for v in 1..=4 {
        let req = DescribeConfigsRequest::default().with_resources(vec![
            kafka_protocol::messages::describe_configs_request::DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str("v")),
        ]);
        let r = c.send(&req, v).await.unwrap();
        assert_eq!(r.results[0].error_code, 0, "DescribeConfigs v{v}");
        assert!(r.results[0].configs.len() > 20, "DescribeConfigs v{v}");
    }
    for v in 0..=6 {
        let mut req = FindCoordinatorRequest::default();
        if v >= 4 {
            req.coordinator_keys = vec![StrBytes::from_static_str("g")];
        } else {
            req.key = StrBytes::from_static_str("g");
        }
        let r = c.send(&req, v).await.unwrap();
        let code = if v >= 4 {
            r.coordinators[0].error_code
        } else {
            r.error_code
        };
        assert_eq!(code, 0, "FindCoordinator v{v}");
    }
    for v in 1..=7 {
        let req = OffsetFetchRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("g")))
            .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                .with_name(name("v"))
                .with_partition_indexes(vec![0])]));
        let r = c.send(&req, v).await.unwrap();
        assert_eq!(
            r.topics[0].partitions[0].committed_offset, -1,
            "OffsetFetch v{v}"
        );
    }
    for v in 0..=5 {
        let r = c.send(&ListGroupsRequest::default(), v).await.unwrap();
        assert_eq!(r.error_code, 0, "ListGroups v{v}");
    }
    for v in 0..=2 {
        let r = c.send(&DescribeClusterRequest::default(), v).await.unwrap();
        assert_eq!(r.brokers.len(), 1, "DescribeCluster v{v}");
        assert!(!r.brokers[0].is_fenced, "DescribeCluster v{v}");
    }
    // The controllers are not described on a broker listener (Kafka's error).
    let r = c
        .send(&DescribeClusterRequest::default().with_endpoint_type(2), 1)
        .await
        .unwrap();
    assert_eq!(r.error_code, ResponseError::MismatchedEndpointType.code());
    for v in 0..=6 {
        let r = c
            .send(
                &DescribeGroupsRequest::default()
                    .with_groups(vec![GroupId(StrBytes::from_static_str("nobody"))]),
                v,
            )
            .await
            .unwrap();
        let want = if v >= 6 {
            ResponseError::GroupIdNotFound.code()
        } else {
            0
        };
        assert_eq!(r.groups[0].error_code, want, "DescribeGroups v{v}");
        assert_eq!(
            r.groups[0].group_state.as_str(),
            "Dead",
            "DescribeGroups v{v}"
        );
    }
    for v in 1..=5 {
        let r = c
            .send(&DescribeLogDirsRequest::default().with_topics(None), v)
            .await
            .unwrap();
        assert_eq!(r.results.len(), 1, "DescribeLogDirs v{v}");
        assert!(!r.results[0].is_cordoned, "DescribeLogDirs v{v}");
        let topics: Vec<&str> = r.results[0]
            .topics
            .iter()
            .map(|t| t.name.0.as_str())
            .collect();
        assert!(topics.contains(&"v"), "DescribeLogDirs v{v}: {topics:?}");
    }
    for v in 0..=1 {
        let r = c
            .send(&ListConfigResourcesRequest::default(), v)
            .await
            .unwrap();
        assert_eq!(r.error_code, 0, "ListConfigResources v{v}");
        let listed = |t: i8, n: &str| {
            r.config_resources
                .iter()
                .any(|c| c.resource_type == t && c.resource_name.as_str() == n)
        };
        // v0 lists client-metrics subscriptions only (Tern has none).
        assert_eq!(listed(2, "v"), v >= 1, "ListConfigResources v{v}: topic");
        assert_eq!(listed(4, "1"), v >= 1, "ListConfigResources v{v}: broker");
        if v == 0 {
            assert!(r.config_resources.is_empty(), "ListConfigResources v0");
        }
    }
}
