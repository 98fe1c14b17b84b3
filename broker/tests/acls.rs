//! ACLs over a real socket: a broker with the StandardAuthorizer, PLAIN users on a
//! SASL_PLAINTEXT listener and `super.users=User:admin`. A principal without a grant gets each
//! API's authorization error and changes nothing; with the grant it succeeds; DENY beats ALLOW;
//! prefixed patterns; super users; Metadata and ListGroups show only what may be described;
//! bad ACL bindings and filters get INVALID_REQUEST; without an authorizer the ACL APIs answer
//! SECURITY_DISABLED.

mod support;

use bytes::Bytes;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_cluster_mirror_request::Config;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    BrokerId, CreateAclsRequest, CreateClusterMirrorRequest, CreatePartitionsRequest,
    DeleteAclsRequest, DeleteGroupsRequest, DeleteRecordsRequest, DeleteTopicsRequest,
    DescribeAclsRequest, DescribeConfigsRequest, DescribeGroupsRequest,
    DescribeUserScramCredentialsRequest, FetchRequest, FindCoordinatorRequest,
    IncrementalAlterConfigsRequest, InitProducerIdRequest, JoinGroupRequest, ListGroupsRequest,
    ListOffsetsRequest, MetadataRequest, OffsetCommitRequest, OffsetFetchRequest,
    SaslAuthenticateRequest, SaslHandshakeRequest,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use support::*;
use tern_protocol::client::KafkaConnection;

const JAAS: &str = "org.apache.kafka.common.security.plain.PlainLoginModule required \
                    user_admin=\"admin-secret\" user_alice=\"alice-secret\" \
                    user_bob=\"bob-secret\";";

// Kafka's codes: resource types, pattern types, operations, permissions.
const TOPIC: i8 = 2;
const GROUP: i8 = 3;
const CLUSTER: i8 = 4;
const ANY: i8 = 1;
const MATCH: i8 = 2;
const LITERAL: i8 = 3;
const PREFIXED: i8 = 4;
const ALL: i8 = 2;
const READ: i8 = 3;
const WRITE: i8 = 4;
const DESCRIBE: i8 = 8;
const DENY: i8 = 2;
const ALLOW: i8 = 3;

const TOPIC_AUTH: i16 = 29;
const GROUP_AUTH: i16 = 30;
const CLUSTER_AUTH: i16 = 31;
const INVALID_REQUEST: i16 = 42;
const SECURITY_DISABLED: i16 = 54;
const CLUSTER_MIRROR_AUTH: i16 = 144;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

struct Secured {
    server: tern_broker::Server,
    _dir: tempfile::TempDir,
}

impl Secured {
    async fn start() -> Secured {
        let dir = tempfile::tempdir().unwrap();
        let server = start_in(
            dir.path(),
            &[
                (
                    "listeners",
                    "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                ),
                ("sasl.enabled.mechanisms", "PLAIN"),
                ("listener.name.sasl_plaintext.plain.sasl.jaas.config", JAAS),
                (
                    "authorizer.class.name",
                    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                ),
                ("super.users", "User:admin"),
            ],
        )
        .await;
        Secured { server, _dir: dir }
    }

    /// A connection authenticated with PLAIN as `user`.
    async fn login(&self, user: &str) -> KafkaConnection {
        let mut c = KafkaConnection::connect(self.server.local_addrs[1], user)
            .await
            .unwrap();
        let r = c
            .send(
                &SaslHandshakeRequest::default().with_mechanism(s("PLAIN")),
                1,
            )
            .await
            .unwrap();
        assert_eq!(r.error_code, 0);
        let token = format!("\0{user}\0{user}-secret");
        let r = c
            .send(
                &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token)),
                2,
            )
            .await
            .unwrap();
        assert_eq!(r.error_code, 0, "{user} logs in");
        c
    }
}

fn acl(rt: i8, name: &str, pattern: i8, principal: &str, op: i8, permission: i8) -> AclCreation {
    AclCreation::default()
        .with_resource_type(rt)
        .with_resource_name(s(name))
        .with_resource_pattern_type(pattern)
        .with_principal(s(principal))
        .with_host(s("*"))
        .with_operation(op)
        .with_permission_type(permission)
}

async fn create_acls(c: &mut KafkaConnection, acls: Vec<AclCreation>) -> Vec<i16> {
    let r = c
        .send(&CreateAclsRequest::default().with_creations(acls), 3)
        .await
        .unwrap();
    r.results.iter().map(|r| r.error_code).collect()
}

async fn grant(c: &mut KafkaConnection, acls: Vec<AclCreation>) {
    let codes = create_acls(c, acls).await;
    assert!(codes.iter().all(|c| *c == 0), "{codes:?}");
}

fn describe_filter(rt: i8, name: Option<&str>, pattern: i8) -> DescribeAclsRequest {
    DescribeAclsRequest::default()
        .with_resource_type_filter(rt)
        .with_resource_name_filter(name.map(s))
        .with_pattern_type_filter(pattern)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_operation(ANY)
        .with_permission_type(ANY)
}

/// A DeleteAcls filter on resource type, name and pattern; anything else matches.
fn delete_filter(rt: i8, name: Option<&str>, pattern: i8) -> DeleteAclsFilter {
    DeleteAclsFilter::default()
        .with_resource_type_filter(rt)
        .with_resource_name_filter(name.map(s))
        .with_pattern_type_filter(pattern)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_operation(ANY)
        .with_permission_type(ANY)
}

async fn metadata(c: &mut KafkaConnection, topics: Option<&[&str]>) -> Vec<(String, i16)> {
    let topics = topics.map(|ts| {
        ts.iter()
            .map(|t| MetadataRequestTopic::default().with_name(Some(name(t))))
            .collect()
    });
    let r = c
        .send(
            &MetadataRequest::default()
                .with_topics(topics)
                .with_allow_auto_topic_creation(false),
            12,
        )
        .await
        .unwrap();
    r.topics
        .iter()
        .map(|t| {
            (
                t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default(),
                t.error_code,
            )
        })
        .filter(|(n, _)| !n.starts_with("__"))
        .collect()
}

async fn list_offsets(c: &mut KafkaConnection, topic: &str) -> (i16, i64) {
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(-1)])]);
    let r = c.send(&req, 7).await.unwrap();
    let p = &r.topics[0].partitions[0];
    (p.error_code, p.offset)
}

async fn fetch(c: &mut KafkaConnection, topic: &str) -> i16 {
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name(topic))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    let r = c.send(&req, 12).await.unwrap();
    r.responses[0].partitions[0].error_code
}

async fn produce_code(c: &mut KafkaConnection, topic: &str) -> i16 {
    produce(c, topic, 0, batch(2)).await.responses[0].partition_responses[0].error_code
}

async fn init_producer_id(c: &mut KafkaConnection) -> i16 {
    c.send(
        &InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(kafka_protocol::messages::ProducerId(-1))
            .with_producer_epoch(-1),
        4,
    )
    .await
    .unwrap()
    .error_code
}

async fn find_coordinator(c: &mut KafkaConnection, group: &str) -> i16 {
    let r = c
        .send(
            &FindCoordinatorRequest::default()
                .with_key_type(0)
                .with_coordinator_keys(vec![s(group)]),
            4,
        )
        .await
        .unwrap();
    r.coordinators[0].error_code
}

/// A simple consumer's commit (generation -1, no member): creates the group when it is new.
async fn commit(c: &mut KafkaConnection, group: &str, topic: &str) -> i16 {
    let r = c
        .send(
            &OffsetCommitRequest::default()
                .with_group_id(kafka_protocol::messages::GroupId(s(group)))
                .with_generation_id_or_member_epoch(-1)
                .with_member_id(s(""))
                .with_topics(vec![OffsetCommitRequestTopic::default()
                    .with_name(name(topic))
                    .with_partitions(vec![OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(1)])]),
            8,
        )
        .await
        .unwrap();
    r.topics[0].partitions[0].error_code
}

#[tokio::test]
async fn an_ungranted_principal_gets_each_authorization_error_and_changes_nothing() {
    let b = Secured::start().await;
    let mut admin = b.login("admin").await;
    assert_eq!(
        create_topic(&mut admin, "t", 1, &[]).await.topics[0].error_code,
        0
    );
    assert_eq!(produce_code(&mut admin, "t").await, 0);
    assert_eq!(commit(&mut admin, "g", "t").await, 0);
    let mut alice = b.login("alice").await;

    assert_eq!(produce_code(&mut alice, "t").await, TOPIC_AUTH);
    assert_eq!(
        list_offsets(&mut admin, "t").await,
        (0, 2),
        "nothing appended"
    );
    assert_eq!(fetch(&mut alice, "t").await, TOPIC_AUTH);
    assert_eq!(list_offsets(&mut alice, "t").await.0, TOPIC_AUTH);
    assert_eq!(metadata(&mut alice, None).await, vec![], "no topic listed");
    assert_eq!(
        metadata(&mut alice, Some(&["t", "missing"])).await,
        vec![("t".into(), TOPIC_AUTH), ("missing".into(), TOPIC_AUTH)],
        "existence does not leak"
    );

    let r = create_topic(&mut alice, "new", 1, &[]).await;
    assert_eq!(r.topics[0].error_code, TOPIC_AUTH);
    let r = alice
        .send(
            &DeleteTopicsRequest::default()
                .with_topic_names(vec![name("t")])
                .with_timeout_ms(5000),
            4,
        )
        .await
        .unwrap();
    assert_eq!(r.responses[0].error_code, TOPIC_AUTH);
    let r = alice
        .send(
            &CreatePartitionsRequest::default()
                .with_topics(vec![CreatePartitionsTopic::default()
                    .with_name(name("t"))
                    .with_count(3)])
                .with_timeout_ms(5000),
            2,
        )
        .await
        .unwrap();
    assert_eq!(r.results[0].error_code, TOPIC_AUTH);
    let r = alice
        .send(
            &DeleteRecordsRequest::default()
                .with_topics(vec![DeleteRecordsTopic::default()
                    .with_name(name("t"))
                    .with_partitions(vec![DeleteRecordsPartition::default()
                        .with_partition_index(0)
                        .with_offset(-1)])])
                .with_timeout_ms(5000),
            2,
        )
        .await
        .unwrap();
    assert_eq!(r.topics[0].partitions[0].error_code, TOPIC_AUTH);
    let r = alice
        .send(
            &DescribeConfigsRequest::default().with_resources(vec![
                DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(s("t")),
                DescribeConfigsResource::default()
                    .with_resource_type(4)
                    .with_resource_name(s("1")),
            ]),
            4,
        )
        .await
        .unwrap();
    let codes: Vec<i16> = r.results.iter().map(|r| r.error_code).collect();
    assert_eq!(codes, [TOPIC_AUTH, CLUSTER_AUTH]);
    let r = alice
        .send(
            &IncrementalAlterConfigsRequest::default().with_resources(vec![
                AlterConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(s("t"))
                    .with_configs(vec![AlterableConfig::default()
                        .with_name(s("retention.ms"))
                        .with_config_operation(0)
                        .with_value(Some(s("1000")))]),
            ]),
            1,
        )
        .await
        .unwrap();
    assert_eq!(r.responses[0].error_code, TOPIC_AUTH);
    assert_eq!(init_producer_id(&mut alice).await, CLUSTER_AUTH);

    assert_eq!(find_coordinator(&mut alice, "g").await, GROUP_AUTH);
    let r = alice
        .send(
            &JoinGroupRequest::default()
                .with_group_id(kafka_protocol::messages::GroupId(s("g")))
                .with_session_timeout_ms(10_000)
                .with_rebalance_timeout_ms(10_000)
                .with_protocol_type(s("consumer"))
                .with_protocols(vec![
                    JoinGroupRequestProtocol::default().with_name(s("range"))
                ]),
            5,
        )
        .await
        .unwrap();
    assert_eq!(r.error_code, GROUP_AUTH);
    assert_eq!(commit(&mut alice, "g", "t").await, GROUP_AUTH);
    let r = alice
        .send(
            &OffsetFetchRequest::default()
                .with_group_id(kafka_protocol::messages::GroupId(s("g")))
                .with_topics(None),
            7,
        )
        .await
        .unwrap();
    assert_eq!(r.error_code, GROUP_AUTH);
    let r = alice
        .send(
            &DescribeGroupsRequest::default()
                .with_groups(vec![kafka_protocol::messages::GroupId(s("g"))]),
            5,
        )
        .await
        .unwrap();
    assert_eq!(r.groups[0].error_code, GROUP_AUTH);
    let r = alice
        .send(
            &DeleteGroupsRequest::default()
                .with_groups_names(vec![kafka_protocol::messages::GroupId(s("g"))]),
            2,
        )
        .await
        .unwrap();
    assert_eq!(r.results[0].error_code, GROUP_AUTH);
    let r = alice.send(&ListGroupsRequest::default(), 4).await.unwrap();
    assert!(r.groups.is_empty());
    let r = alice
        .send(&DescribeUserScramCredentialsRequest::default(), 0)
        .await
        .unwrap();
    assert_eq!(r.error_code, CLUSTER_AUTH);

    let codes = create_acls(
        &mut alice,
        vec![acl(TOPIC, "t", LITERAL, "User:alice", ALL, ALLOW)],
    )
    .await;
    assert_eq!(codes, [CLUSTER_AUTH]);
    let r = alice
        .send(&describe_filter(ANY, None, ANY), 3)
        .await
        .unwrap();
    assert_eq!(r.error_code, CLUSTER_AUTH);
    let r = alice
        .send(
            &DeleteAclsRequest::default().with_filters(vec![delete_filter(ANY, None, ANY)]),
            3,
        )
        .await
        .unwrap();
    assert_eq!(r.filter_results[0].error_code, CLUSTER_AUTH);
    let create = CreateClusterMirrorRequest::default()
        .with_mirror_name(StrBytes::from_static_str("m"))
        .with_configs(vec![Config::default()
            .with_name(StrBytes::from_static_str("bootstrap.servers"))
            .with_value(Some(StrBytes::from_static_str("127.0.0.1:1")))]);
    let r = alice.send(&create, 0).await.unwrap();
    assert_eq!(r.error_code, CLUSTER_MIRROR_AUTH);

    // Nothing changed: the topic is there with one partition and its offsets, no new topic,
    // no ACL, no mirror, the group's offset kept.
    assert_eq!(metadata(&mut admin, None).await, vec![("t".to_string(), 0)]);
    assert_eq!(list_offsets(&mut admin, "t").await, (0, 2));
    let r = admin
        .send(&describe_filter(ANY, None, ANY), 3)
        .await
        .unwrap();
    assert!(r.resources.is_empty());
    let image = b.server.broker.controller.image();
    assert!(image.mirrors.is_empty());
    assert_eq!(image.topic("t").unwrap().partitions.len(), 1);
    assert!(image.topic_configs("t").is_empty());
}

#[tokio::test]
async fn with_the_grant_the_same_requests_succeed() {
    let b = Secured::start().await;
    let mut admin = b.login("admin").await;
    create_topic(&mut admin, "t", 1, &[]).await;
    grant(
        &mut admin,
        vec![
            acl(TOPIC, "t", LITERAL, "User:alice", WRITE, ALLOW),
            acl(TOPIC, "t", LITERAL, "User:alice", READ, ALLOW),
            acl(GROUP, "g", LITERAL, "User:alice", READ, ALLOW),
        ],
    )
    .await;
    let mut alice = b.login("alice").await;
    assert_eq!(produce_code(&mut alice, "t").await, 0);
    assert_eq!(fetch(&mut alice, "t").await, 0);
    assert_eq!(
        list_offsets(&mut alice, "t").await,
        (0, 2),
        "READ implies DESCRIBE"
    );
    assert_eq!(metadata(&mut alice, None).await, vec![("t".to_string(), 0)]);
    assert_eq!(
        init_producer_id(&mut alice).await,
        0,
        "WRITE on a topic is enough"
    );
    assert_eq!(
        find_coordinator(&mut alice, "g").await,
        0,
        "READ implies DESCRIBE"
    );
    assert_eq!(commit(&mut alice, "g", "t").await, 0);
    // The group grant does not reach other groups, nor the topic grant other topics.
    assert_eq!(commit(&mut alice, "other", "t").await, GROUP_AUTH);
    create_topic(&mut admin, "u", 1, &[]).await;
    assert_eq!(produce_code(&mut alice, "u").await, TOPIC_AUTH);
    // CREATE on the cluster lets alice create topics; ALTER on it, manage ACLs.
    grant(
        &mut admin,
        vec![
            acl(CLUSTER, "kafka-cluster", LITERAL, "User:alice", 5, ALLOW),
            acl(CLUSTER, "kafka-cluster", LITERAL, "User:alice", 7, ALLOW),
        ],
    )
    .await;
    assert_eq!(
        create_topic(&mut alice, "new", 1, &[]).await.topics[0].error_code,
        0
    );
    grant(
        &mut alice,
        vec![acl(TOPIC, "new", LITERAL, "User:bob", READ, ALLOW)],
    )
    .await;
    let mut bob = b.login("bob").await;
    assert_eq!(list_offsets(&mut bob, "new").await.0, 0);
}

#[tokio::test]
async fn deny_beats_allow_and_super_users_beat_deny() {
    let b = Secured::start().await;
    let mut admin = b.login("admin").await;
    create_topic(&mut admin, "t", 1, &[]).await;
    create_topic(&mut admin, "u", 1, &[]).await;
    grant(
        &mut admin,
        vec![
            acl(TOPIC, "*", LITERAL, "User:alice", ALL, ALLOW),
            acl(TOPIC, "t", LITERAL, "User:alice", WRITE, DENY),
            acl(TOPIC, "*", LITERAL, "User:*", ALL, DENY),
        ],
    )
    .await;
    let mut alice = b.login("alice").await;
    assert_eq!(produce_code(&mut alice, "t").await, TOPIC_AUTH);
    assert_eq!(
        produce_code(&mut alice, "u").await,
        TOPIC_AUTH,
        "User:* DENY wins"
    );
    assert_eq!(produce_code(&mut admin, "t").await, 0, "super user");
    // Take the blanket deny away: the specific one still wins over the wildcard allow.
    let r = admin
        .send(
            &DeleteAclsRequest::default().with_filters(vec![delete_filter(
                TOPIC,
                Some("*"),
                LITERAL,
            )
            .with_principal_filter(Some(s("User:*")))
            .with_permission_type(DENY)]),
            3,
        )
        .await
        .unwrap();
    assert_eq!(r.filter_results[0].error_code, 0);
    assert_eq!(r.filter_results[0].matching_acls.len(), 1);
    assert_eq!(produce_code(&mut alice, "t").await, TOPIC_AUTH);
    assert_eq!(produce_code(&mut alice, "u").await, 0);
    assert_eq!(
        fetch(&mut alice, "t").await,
        0,
        "the DENY is for WRITE only"
    );
}

#[tokio::test]
async fn prefixed_patterns_and_filtered_metadata() {
    let b = Secured::start().await;
    let mut admin = b.login("admin").await;
    for t in ["payments", "payroll", "orders"] {
        create_topic(&mut admin, t, 1, &[]).await;
    }
    grant(
        &mut admin,
        vec![acl(TOPIC, "pay", PREFIXED, "User:alice", DESCRIBE, ALLOW)],
    )
    .await;
    let mut alice = b.login("alice").await;
    assert_eq!(
        metadata(&mut alice, None).await,
        vec![("payments".to_string(), 0), ("payroll".to_string(), 0)]
    );
    assert_eq!(list_offsets(&mut alice, "payroll").await.0, 0);
    assert_eq!(list_offsets(&mut alice, "orders").await.0, TOPIC_AUTH);
    assert_eq!(
        fetch(&mut alice, "payments").await,
        TOPIC_AUTH,
        "DESCRIBE is not READ"
    );
    // DescribeAcls with MATCH finds the prefixed ACL that applies to a topic name.
    let r = admin
        .send(&describe_filter(TOPIC, Some("payments"), MATCH), 3)
        .await
        .unwrap();
    assert_eq!(r.error_code, 0);
    assert_eq!(r.resources.len(), 1);
    assert_eq!(r.resources[0].resource_name.as_str(), "pay");
    assert_eq!(r.resources[0].pattern_type, PREFIXED);
    let r = admin
        .send(&describe_filter(TOPIC, Some("payments"), LITERAL), 3)
        .await
        .unwrap();
    assert!(r.resources.is_empty());
}

#[tokio::test]
async fn list_groups_shows_only_describable_groups() {
    let b = Secured::start().await;
    let mut admin = b.login("admin").await;
    create_topic(&mut admin, "t", 1, &[]).await;
    for g in ["g1", "g2"] {
        assert_eq!(commit(&mut admin, g, "t").await, 0);
    }
    grant(
        &mut admin,
        vec![acl(GROUP, "g1", LITERAL, "User:alice", DESCRIBE, ALLOW)],
    )
    .await;
    let mut alice = b.login("alice").await;
    let ids = |r: kafka_protocol::messages::ListGroupsResponse| -> Vec<String> {
        let mut ids: Vec<String> = r.groups.iter().map(|g| g.group_id.0.to_string()).collect();
        ids.sort();
        ids
    };
    let r = alice.send(&ListGroupsRequest::default(), 4).await.unwrap();
    assert_eq!(ids(r), ["g1"]);
    let r = admin.send(&ListGroupsRequest::default(), 4).await.unwrap();
    assert_eq!(ids(r), ["g1", "g2"]);
    // OffsetFetch of all topics leaves out topics alice may not describe.
    let r = alice
        .send(
            &OffsetFetchRequest::default()
                .with_group_id(kafka_protocol::messages::GroupId(s("g1")))
                .with_topics(None),
            7,
        )
        .await
        .unwrap();
    assert_eq!(r.error_code, 0);
    assert!(r.topics.is_empty(), "{:?}", r.topics);
}

#[tokio::test]
async fn bad_bindings_and_filters_are_invalid_requests() {
    let b = Secured::start().await;
    let mut admin = b.login("admin").await;
    let codes = create_acls(
        &mut admin,
        vec![
            acl(TOPIC, "t", MATCH, "User:alice", READ, ALLOW),
            acl(ANY, "t", LITERAL, "User:alice", READ, ALLOW),
            acl(TOPIC, "t", LITERAL, "alice", READ, ALLOW),
            acl(TOPIC, "t", LITERAL, "User:alice", ANY, ALLOW),
            acl(TOPIC, "t", LITERAL, "User:alice", READ, ANY),
            acl(TOPIC, "", LITERAL, "User:alice", READ, ALLOW),
            acl(CLUSTER, "my-cluster", LITERAL, "User:alice", 7, ALLOW),
            acl(TOPIC, "t", LITERAL, "User:alice", READ, ALLOW),
        ],
    )
    .await;
    assert_eq!(codes[..7], [INVALID_REQUEST; 7]);
    assert_eq!(codes[7], 0, "the good one is created");
    let r = admin
        .send(&describe_filter(TOPIC, None, ANY).with_operation(99), 3)
        .await
        .unwrap();
    assert_eq!(r.error_code, INVALID_REQUEST);
    let r = admin
        .send(
            &DeleteAclsRequest::default().with_filters(vec![
                delete_filter(TOPIC, None, 0),
                delete_filter(TOPIC, Some("t"), MATCH),
            ]),
            3,
        )
        .await
        .unwrap();
    assert_eq!(r.filter_results[0].error_code, INVALID_REQUEST);
    assert_eq!(r.filter_results[1].error_code, 0);
    assert_eq!(r.filter_results[1].matching_acls.len(), 1);
    let r = admin
        .send(&describe_filter(ANY, None, ANY), 3)
        .await
        .unwrap();
    assert!(r.resources.is_empty(), "deleted");
}

#[tokio::test]
async fn without_an_authorizer_the_acl_apis_answer_security_disabled() {
    let s_ = TestServer::start().await;
    let mut c = s_.connect().await;
    let codes = create_acls(
        &mut c,
        vec![acl(TOPIC, "t", LITERAL, "User:a", READ, ALLOW)],
    )
    .await;
    assert_eq!(codes, [SECURITY_DISABLED]);
    let r = c.send(&describe_filter(ANY, None, ANY), 3).await.unwrap();
    assert_eq!(r.error_code, SECURITY_DISABLED);
    let r = c
        .send(
            &DeleteAclsRequest::default().with_filters(vec![delete_filter(ANY, None, ANY)]),
            3,
        )
        .await
        .unwrap();
    assert_eq!(r.filter_results[0].error_code, SECURITY_DISABLED);
    // Everything else stays allowed for the anonymous principal.
    create_topic(&mut c, "t", 1, &[]).await;
    assert_eq!(produce_code(&mut c, "t").await, 0);
    assert_eq!(init_producer_id(&mut c).await, 0);
}

#[test]
fn error_codes_are_kafkas() {
    assert_eq!(ResponseError::TopicAuthorizationFailed.code(), TOPIC_AUTH);
    assert_eq!(ResponseError::GroupAuthorizationFailed.code(), GROUP_AUTH);
    assert_eq!(
        ResponseError::ClusterAuthorizationFailed.code(),
        CLUSTER_AUTH
    );
    assert_eq!(ResponseError::InvalidRequest.code(), INVALID_REQUEST);
    assert_eq!(ResponseError::SecurityDisabled.code(), SECURITY_DISABLED);
}
