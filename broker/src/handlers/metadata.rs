//! Metadata: brokers, controller and topic/partition leadership; creates topics on demand.

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::ResponseError;
use tern_controller::{MetadataImage, TopicImage};

use tern_controller::acls::{AclOperation, AclResourceType, CLUSTER_RESOURCE_NAME};

use super::{sb, RequestContext};
use crate::broker::Broker;

/// Answers Metadata. With an authorizer, listing all topics shows only those the principal may
/// DESCRIBE; a named topic it may not describe answers TOPIC_AUTHORIZATION_FAILED whether or
/// not it exists (so names do not leak), and auto-creation needs CREATE on the cluster or on
/// the topic, as in Kafka.
pub(crate) fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: MetadataRequest,
    version: i16,
) -> MetadataResponse {
    let requested: Option<Vec<String>> = match req.topics {
        // v0 used an empty list to mean "all topics".
        Some(t) if t.is_empty() && version == 0 => None,
        Some(t) => Some(
            t.into_iter()
                .filter_map(|t| match t.name {
                    Some(n) => Some(n.0.to_string()),
                    None => {
                        let image = broker.controller.image();
                        image.topic_by_id(&t.topic_id).map(|ti| ti.name.clone())
                    }
                })
                .collect(),
        ),
        None => None,
    };
    let auto_create =
        broker.config.auto_create_topics_enable && (version < 4 || req.allow_auto_topic_creation);
    let authz = ctx.authz(broker);
    let may_create_any = authz.cluster(AclOperation::Create);
    let mut image = broker.controller.image();
    if let (Some(names), true) = (&requested, auto_create) {
        let mut created = false;
        for name in names {
            let may_create = authz.topic(AclOperation::Describe, name)
                && (may_create_any || authz.topic(AclOperation::Create, name));
            if image.topic(name).is_none() && may_create {
                let create = tern_controller::CreateTopic {
                    name: name.clone(),
                    num_partitions: -1,
                    replication_factor: -1,
                    ..Default::default()
                };
                if broker.controller.create_topic(&create, false).is_ok() {
                    created = true;
                }
            }
        }
        if created {
            image = broker.controller.image();
            // Make sure the new logs exist before clients are told to produce.
            broker.replicas.apply_image(&image);
        }
    }
    let with_ops = version >= 8 && req.include_topic_authorized_operations;
    let describe = |t: &TopicImage| {
        let mut m = topic_metadata(t, &image, version);
        if with_ops {
            m.topic_authorized_operations =
                authz.authorized_operations(AclResourceType::Topic, &t.name);
        }
        m
    };
    let topics = match requested {
        None => {
            let mut all: Vec<&TopicImage> = image
                .topics
                .values()
                .filter(|t| authz.topic(AclOperation::Describe, &t.name))
                .collect();
            all.sort_by(|a, b| a.name.cmp(&b.name));
            all.into_iter().map(describe).collect()
        }
        Some(names) => names
            .iter()
            .map(|name| {
                let refused = |code: ResponseError| {
                    MetadataResponseTopic::default()
                        .with_name(Some(TopicName(sb(name.clone()))))
                        .with_is_internal(name.starts_with("__"))
                        .with_error_code(code.code())
                };
                if !authz.topic(AclOperation::Describe, name) {
                    return refused(ResponseError::TopicAuthorizationFailed);
                }
                match image.topic(name) {
                    Some(t) => describe(t),
                    None => {
                        let code = if tern_controller::validate_topic_name(name).is_err() {
                            ResponseError::InvalidTopicException
                        } else if auto_create
                            && !(may_create_any || authz.topic(AclOperation::Create, name))
                        {
                            ResponseError::TopicAuthorizationFailed
                        } else if auto_create {
                            ResponseError::LeaderNotAvailable
                        } else {
                            ResponseError::UnknownTopicOrPartition
                        };
                        refused(code)
                    }
                }
            })
            .collect(),
    };
    let mut response = MetadataResponse::default()
        .with_brokers(brokers(broker, &ctx.listener, &image))
        .with_cluster_id(Some(sb(broker.cluster_id.clone())))
        .with_controller_id(BrokerId(broker.controller_id()))
        .with_topics(topics);
    if (8..=10).contains(&version) && req.include_cluster_authorized_operations {
        response.cluster_authorized_operations = if authz.cluster(AclOperation::Describe) {
            authz.authorized_operations(AclResourceType::Cluster, CLUSTER_RESOURCE_NAME)
        } else {
            0
        };
    }
    response
}

fn brokers(broker: &Broker, listener: &str, image: &MetadataImage) -> Vec<MetadataResponseBroker> {
    image
        .brokers
        .values()
        .filter(|b| !b.fenced)
        .map(|b| {
            let (host, port) = broker.endpoint_of(b, listener);
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(b.id))
                .with_host(sb(host))
                .with_port(port as i32)
                .with_rack(b.rack.clone().map(sb))
        })
        .collect()
}

fn topic_metadata(t: &TopicImage, image: &MetadataImage, version: i16) -> MetadataResponseTopic {
    let partitions = t
        .partitions
        .iter()
        .map(|(&i, p)| {
            let ids = |v: &[i32]| v.iter().map(|&b| BrokerId(b)).collect::<Vec<_>>();
            MetadataResponsePartition::default()
                .with_partition_index(i)
                .with_error_code(if p.leader < 0 {
                    ResponseError::LeaderNotAvailable.code()
                } else {
                    0
                })
                .with_leader_id(BrokerId(p.leader))
                .with_leader_epoch(p.leader_epoch)
                .with_replica_nodes(ids(&p.replicas))
                .with_isr_nodes(ids(&p.isr))
                .with_offline_replicas(if version >= 5 {
                    ids(&image.offline_replicas(p))
                } else {
                    Vec::new()
                })
        })
        .collect();
    let mut topic = MetadataResponseTopic::default()
        .with_name(Some(TopicName(sb(t.name.clone()))))
        .with_is_internal(t.name.starts_with("__"))
        .with_partitions(partitions);
    if version >= 10 {
        topic.topic_id = t.id;
    }
    topic
}
