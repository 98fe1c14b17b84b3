//! The MetadataImage: the cluster as the committed metadata records describe it.

use std::collections::{BTreeMap, HashMap};

use uuid::Uuid;

use crate::acls::AclBinding;
use crate::records::{BrokerEndpoint, ConfigResourceType, MetadataRecord};
pub(crate) use crate::topic_configs::{MIRROR_NAME_CONFIG, MIRROR_PAUSED_SUFFIX};

/// A registered broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerInfo {
    /// Node id.
    pub id: i32,
    /// Advertised host.
    pub host: String,
    /// Advertised port.
    pub port: u16,
    /// Rack, if any.
    pub rack: Option<String>,
    /// Every advertised listener (the first is `host:port`).
    pub endpoints: Vec<BrokerEndpoint>,
    /// The incarnation that registered last.
    pub incarnation_id: Option<Uuid>,
    /// Fenced: missed its heartbeats or shut down; leads nothing.
    pub fenced: bool,
}

impl BrokerInfo {
    /// The (host, port) of `listener`, or of the first listener if it has none of that name.
    pub fn endpoint(&self, listener: &str) -> (&str, u16) {
        self.endpoints
            .iter()
            .find(|e| e.listener == listener)
            .map(|e| (e.host.as_str(), e.port))
            .unwrap_or((self.host.as_str(), self.port))
    }
}

/// Replicas, ISR and leadership of one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    /// Replica broker ids.
    pub replicas: Vec<i32>,
    /// In-sync replica broker ids.
    pub isr: Vec<i32>,
    /// Leader broker id or -1.
    pub leader: i32,
    /// Leader epoch.
    pub leader_epoch: i32,
    /// Partition epoch.
    pub partition_epoch: i32,
    /// Replicas a reassignment is adding (empty when none is ongoing).
    pub adding: Vec<i32>,
    /// Replicas a reassignment removes once the added ones are in sync.
    pub removing: Vec<i32>,
    /// Replicas an I/O error took offline, until their broker restarts: never elected, never
    /// back in the ISR meanwhile.
    pub offline: Vec<i32>,
}

impl PartitionInfo {
    /// Whether a reassignment is ongoing.
    pub fn reassigning(&self) -> bool {
        !self.adding.is_empty() || !self.removing.is_empty()
    }

    /// The replicas before the ongoing reassignment (all of them when none is ongoing).
    pub fn original_replicas(&self) -> Vec<i32> {
        self.replicas
            .iter()
            .copied()
            .filter(|r| !self.adding.contains(r))
            .collect()
    }

    /// The replicas a reassignment ends with (all of them when none is ongoing).
    pub fn target_replicas(&self) -> Vec<i32> {
        self.replicas
            .iter()
            .copied()
            .filter(|r| !self.removing.contains(r))
            .collect()
    }
}

/// A topic and its partitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicImage {
    /// Topic name.
    pub name: String,
    /// Topic id.
    pub id: Uuid,
    /// Partitions by index.
    pub partitions: BTreeMap<i32, PartitionInfo>,
}

/// The whole cluster metadata at one point of the metadata log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetadataImage {
    /// Number of records applied; grows with every change, equal on every node.
    pub offset: u64,
    /// The cluster id, once the first active controller wrote it.
    pub cluster_id: Option<String>,
    /// Registered brokers by id.
    pub brokers: BTreeMap<i32, BrokerInfo>,
    /// Topic ids by name.
    pub topic_ids: BTreeMap<String, Uuid>,
    /// Topics by id.
    pub topics: HashMap<Uuid, TopicImage>,
    /// Explicitly set configs by resource.
    pub configs: BTreeMap<(ConfigResourceType, String), BTreeMap<String, String>>,
    /// Next producer id to hand out.
    pub next_producer_id: i64,
    /// Cluster mirrors by name.
    pub mirrors: BTreeMap<String, MirrorImage>,
    /// SCRAM credentials by (user, mechanism code).
    pub scram_credentials: BTreeMap<(String, i8), ScramCredentialImage>,
    /// ACLs by id.
    pub acls: BTreeMap<Uuid, AclBinding>,
}

/// A user's SCRAM credential for one mechanism (never the password).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramCredentialImage {
    /// Salt.
    pub salt: Vec<u8>,
    /// H(ClientKey).
    pub stored_key: Vec<u8>,
    /// HMAC(SaltedPassword, "Server Key").
    pub server_key: Vec<u8>,
    /// PBKDF2 iterations.
    pub iterations: i32,
}

/// One cluster mirror: a source cluster this cluster mirrors topics from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorImage {
    /// Mirror name.
    pub name: String,
    /// Mirror id.
    pub id: Uuid,
    /// Mirror configs as set (secrets included; never returned to clients).
    pub configs: BTreeMap<String, String>,
}

impl MetadataImage {
    /// Applies one committed record.
    pub fn apply(&mut self, record: &MetadataRecord) {
        self.offset += 1;
        match record {
            MetadataRecord::RegisterBroker {
                broker_id,
                host,
                port,
                rack,
                endpoints,
                incarnation_id,
            } => {
                // A new incarnation is a restart: its logs were opened again.
                let restarted = self
                    .brokers
                    .get(broker_id)
                    .is_none_or(|b| b.incarnation_id != *incarnation_id);
                if restarted {
                    for topic in self.topics.values_mut() {
                        for p in topic.partitions.values_mut() {
                            p.offline.retain(|b| b != broker_id);
                        }
                    }
                }
                self.brokers.insert(
                    *broker_id,
                    BrokerInfo {
                        id: *broker_id,
                        host: host.clone(),
                        port: *port,
                        rack: rack.clone(),
                        endpoints: endpoints.clone(),
                        incarnation_id: *incarnation_id,
                        fenced: false,
                    },
                );
            }
            MetadataRecord::ReplicaOffline {
                topic_id,
                partition,
                broker_id,
            } => {
                if let Some(p) = self
                    .topics
                    .get_mut(topic_id)
                    .and_then(|t| t.partitions.get_mut(partition))
                {
                    if !p.offline.contains(broker_id) {
                        p.offline.push(*broker_id);
                    }
                }
            }
            MetadataRecord::FenceBroker { broker_id } => {
                if let Some(b) = self.brokers.get_mut(broker_id) {
                    b.fenced = true;
                }
            }
            MetadataRecord::UnfenceBroker { broker_id } => {
                if let Some(b) = self.brokers.get_mut(broker_id) {
                    b.fenced = false;
                }
            }
            MetadataRecord::ClusterId { cluster_id } => {
                if self.cluster_id.is_none() {
                    self.cluster_id = Some(cluster_id.clone());
                }
            }
            MetadataRecord::Topic { name, topic_id } => {
                self.topic_ids.insert(name.clone(), *topic_id);
                self.topics.insert(
                    *topic_id,
                    TopicImage {
                        name: name.clone(),
                        id: *topic_id,
                        partitions: BTreeMap::new(),
                    },
                );
            }
            MetadataRecord::Partition {
                topic_id,
                partition,
                replicas,
                isr,
                leader,
                leader_epoch,
                partition_epoch,
            } => {
                if let Some(topic) = self.topics.get_mut(topic_id) {
                    // A reassignment in progress and offline replicas outlive leader and ISR
                    // changes.
                    let (adding, removing, mut offline) = topic
                        .partitions
                        .remove(partition)
                        .map(|p| (p.adding, p.removing, p.offline))
                        .unwrap_or_default();
                    // A replica removed from the partition took its failed copy with it.
                    offline.retain(|b| replicas.contains(b));
                    topic.partitions.insert(
                        *partition,
                        PartitionInfo {
                            replicas: replicas.clone(),
                            isr: isr.clone(),
                            leader: *leader,
                            leader_epoch: *leader_epoch,
                            partition_epoch: *partition_epoch,
                            adding,
                            removing,
                            offline,
                        },
                    );
                }
            }
            MetadataRecord::PartitionReassignment {
                topic_id,
                partition,
                adding,
                removing,
            } => {
                if let Some(p) = self
                    .topics
                    .get_mut(topic_id)
                    .and_then(|t| t.partitions.get_mut(partition))
                {
                    p.adding = adding.clone();
                    p.removing = removing.clone();
                }
            }
            MetadataRecord::Config {
                resource_type,
                resource_name,
                name,
                value,
            } => {
                let key = (*resource_type, resource_name.clone());
                match value {
                    Some(v) => {
                        self.configs
                            .entry(key)
                            .or_default()
                            .insert(name.clone(), v.clone());
                    }
                    None => {
                        if let Some(map) = self.configs.get_mut(&key) {
                            map.remove(name);
                            if map.is_empty() {
                                self.configs.remove(&key);
                            }
                        }
                    }
                }
            }
            MetadataRecord::RemoveTopic { topic_id } => {
                if let Some(topic) = self.topics.remove(topic_id) {
                    self.topic_ids.remove(&topic.name);
                    self.configs
                        .remove(&(ConfigResourceType::Topic, topic.name));
                }
            }
            MetadataRecord::ProducerIds { next_producer_id } => {
                self.next_producer_id = self.next_producer_id.max(*next_producer_id);
            }
            MetadataRecord::ClusterMirror {
                name,
                mirror_id,
                configs,
            } => {
                self.mirrors.insert(
                    name.clone(),
                    MirrorImage {
                        name: name.clone(),
                        id: *mirror_id,
                        configs: configs.clone(),
                    },
                );
            }
            MetadataRecord::RemoveClusterMirror { name } => {
                self.mirrors.remove(name);
            }
            MetadataRecord::ScramCredential {
                user,
                mechanism,
                salt,
                stored_key,
                server_key,
                iterations,
            } => {
                self.scram_credentials.insert(
                    (user.clone(), *mechanism),
                    ScramCredentialImage {
                        salt: salt.clone(),
                        stored_key: stored_key.clone(),
                        server_key: server_key.clone(),
                        iterations: *iterations,
                    },
                );
            }
            MetadataRecord::RemoveScramCredential { user, mechanism } => {
                self.scram_credentials.remove(&(user.clone(), *mechanism));
            }
            MetadataRecord::Acl { id, acl } => {
                self.acls.insert(*id, acl.clone());
            }
            MetadataRecord::RemoveAcl { id } => {
                self.acls.remove(id);
            }
        }
    }

    /// Records that rebuild this image from an empty one (a snapshot's content); applying them
    /// counts its own offset, which the snapshot carries separately.
    pub fn to_records(&self) -> Vec<MetadataRecord> {
        let mut records = Vec::new();
        if let Some(cluster_id) = &self.cluster_id {
            records.push(MetadataRecord::ClusterId {
                cluster_id: cluster_id.clone(),
            });
        }
        for b in self.brokers.values() {
            records.push(MetadataRecord::RegisterBroker {
                broker_id: b.id,
                host: b.host.clone(),
                port: b.port,
                rack: b.rack.clone(),
                endpoints: b.endpoints.clone(),
                incarnation_id: b.incarnation_id,
            });
            if b.fenced {
                records.push(MetadataRecord::FenceBroker { broker_id: b.id });
            }
        }
        for id in self.topic_ids.values() {
            let Some(topic) = self.topics.get(id) else {
                continue;
            };
            records.push(MetadataRecord::Topic {
                name: topic.name.clone(),
                topic_id: topic.id,
            });
            for (&partition, p) in &topic.partitions {
                records.push(MetadataRecord::Partition {
                    topic_id: topic.id,
                    partition,
                    replicas: p.replicas.clone(),
                    isr: p.isr.clone(),
                    leader: p.leader,
                    leader_epoch: p.leader_epoch,
                    partition_epoch: p.partition_epoch,
                });
                for &broker_id in &p.offline {
                    records.push(MetadataRecord::ReplicaOffline {
                        topic_id: topic.id,
                        partition,
                        broker_id,
                    });
                }
                if p.reassigning() {
                    records.push(MetadataRecord::PartitionReassignment {
                        topic_id: topic.id,
                        partition,
                        adding: p.adding.clone(),
                        removing: p.removing.clone(),
                    });
                }
            }
        }
        for ((resource_type, resource_name), configs) in &self.configs {
            for (name, value) in configs {
                records.push(MetadataRecord::Config {
                    resource_type: *resource_type,
                    resource_name: resource_name.clone(),
                    name: name.clone(),
                    value: Some(value.clone()),
                });
            }
        }
        if self.next_producer_id != 0 {
            records.push(MetadataRecord::ProducerIds {
                next_producer_id: self.next_producer_id,
            });
        }
        for m in self.mirrors.values() {
            records.push(MetadataRecord::ClusterMirror {
                name: m.name.clone(),
                mirror_id: m.id,
                configs: m.configs.clone(),
            });
        }
        for ((user, mechanism), c) in &self.scram_credentials {
            records.push(MetadataRecord::ScramCredential {
                user: user.clone(),
                mechanism: *mechanism,
                salt: c.salt.clone(),
                stored_key: c.stored_key.clone(),
                server_key: c.server_key.clone(),
                iterations: c.iterations,
            });
        }
        for (id, acl) in &self.acls {
            records.push(MetadataRecord::Acl {
                id: *id,
                acl: acl.clone(),
            });
        }
        records
    }

    /// The image a snapshot's records and offset describe.
    pub fn from_records(records: &[MetadataRecord], offset: u64) -> MetadataImage {
        let mut image = MetadataImage::default();
        for r in records {
            image.apply(r);
        }
        image.offset = offset;
        image
    }

    /// Ids of the brokers that are registered and not fenced, sorted.
    pub fn live_brokers(&self) -> Vec<i32> {
        self.brokers
            .values()
            .filter(|b| !b.fenced)
            .map(|b| b.id)
            .collect()
    }

    /// The replicas of `p` on brokers that are fenced or not registered, or that an I/O error
    /// took offline (Metadata's offline replicas).
    pub fn offline_replicas(&self, p: &PartitionInfo) -> Vec<i32> {
        p.replicas
            .iter()
            .copied()
            .filter(|r| p.offline.contains(r) || self.brokers.get(r).is_none_or(|b| b.fenced))
            .collect()
    }

    /// The topic of a name.
    pub fn topic(&self, name: &str) -> Option<&TopicImage> {
        self.topic_ids.get(name).and_then(|id| self.topics.get(id))
    }

    /// The topic of an id.
    pub fn topic_by_id(&self, id: &Uuid) -> Option<&TopicImage> {
        self.topics.get(id)
    }

    /// Names of the topics that `mirror` mirrors now, paused ones included (not the stopped).
    pub fn mirror_topics(&self, mirror: &str) -> Vec<String> {
        let paused = format!("{mirror}{MIRROR_PAUSED_SUFFIX}");
        self.configs
            .iter()
            .filter(|((kind, _), configs)| {
                *kind == ConfigResourceType::Topic
                    && configs
                        .get(MIRROR_NAME_CONFIG)
                        .is_some_and(|m| m == mirror || *m == paused)
            })
            .map(|((_, name), _)| name.clone())
            .collect()
    }

    /// The configs set on one resource (none when it has no entry).
    pub fn configs_of(
        &self,
        resource_type: ConfigResourceType,
        name: &str,
    ) -> BTreeMap<String, String> {
        self.configs
            .get(&(resource_type, name.to_string()))
            .cloned()
            .unwrap_or_default()
    }

    /// The dynamic configs of a broker (`name` a node id, or empty for the cluster-wide default).
    pub fn broker_configs(&self, name: &str) -> BTreeMap<String, String> {
        self.configs_of(ConfigResourceType::Broker, name)
    }

    /// The configs set on a group.
    pub fn group_configs(&self, group: &str) -> BTreeMap<String, String> {
        self.configs_of(ConfigResourceType::Group, group)
    }

    /// The groups that have configs set, in name order.
    pub fn groups_with_configs(&self) -> Vec<String> {
        self.configs
            .keys()
            .filter(|(t, _)| *t == ConfigResourceType::Group)
            .map(|(_, name)| name.clone())
            .collect()
    }

    /// The explicitly set configs of a topic.
    pub fn topic_configs(&self, name: &str) -> BTreeMap<String, String> {
        self.configs_of(ConfigResourceType::Topic, name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acls::{
        AclBinding, AclOperation, AclPatternType, AclPermissionType, AclResourceType,
    };

    #[test]
    fn an_image_rebuilt_from_its_records_is_equal() {
        let t = Uuid::new_v4();
        let records = vec![
            MetadataRecord::ClusterId {
                cluster_id: "abc".into(),
            },
            MetadataRecord::RegisterBroker {
                broker_id: 1,
                host: "h".into(),
                port: 9092,
                rack: Some("r".into()),
                endpoints: vec![BrokerEndpoint {
                    listener: "PLAINTEXT".into(),
                    host: "h".into(),
                    port: 9092,
                }],
                incarnation_id: Some(Uuid::new_v4()),
            },
            MetadataRecord::RegisterBroker {
                broker_id: 2,
                host: "g".into(),
                port: 9093,
                rack: None,
                endpoints: vec![],
                incarnation_id: None,
            },
            MetadataRecord::FenceBroker { broker_id: 2 },
            MetadataRecord::Topic {
                name: "t".into(),
                topic_id: t,
            },
            MetadataRecord::Partition {
                topic_id: t,
                partition: 0,
                replicas: vec![1],
                isr: vec![1],
                leader: 1,
                leader_epoch: 3,
                partition_epoch: 4,
            },
            MetadataRecord::PartitionReassignment {
                topic_id: t,
                partition: 0,
                adding: vec![2],
                removing: vec![1],
            },
            MetadataRecord::ReplicaOffline {
                topic_id: t,
                partition: 0,
                broker_id: 1,
            },
            MetadataRecord::Config {
                resource_type: ConfigResourceType::Topic,
                resource_name: "t".into(),
                name: "retention.ms".into(),
                value: Some("5".into()),
            },
            MetadataRecord::ProducerIds {
                next_producer_id: 2000,
            },
            MetadataRecord::ClusterMirror {
                name: "m".into(),
                mirror_id: Uuid::new_v4(),
                configs: [("bootstrap.servers".to_string(), "x:1".to_string())].into(),
            },
            MetadataRecord::ScramCredential {
                user: "u".into(),
                mechanism: 2,
                salt: vec![1],
                stored_key: vec![2],
                server_key: vec![3],
                iterations: 4096,
            },
            MetadataRecord::Acl {
                id: Uuid::new_v4(),
                acl: AclBinding {
                    resource_type: AclResourceType::Topic,
                    resource_name: "t".into(),
                    pattern_type: AclPatternType::Literal,
                    principal: "User:a".into(),
                    host: "*".into(),
                    operation: AclOperation::Read,
                    permission: AclPermissionType::Allow,
                },
            },
        ];
        let mut image = MetadataImage::default();
        for r in &records {
            image.apply(r);
        }
        let rebuilt = MetadataImage::from_records(&image.to_records(), image.offset);
        assert_eq!(rebuilt, image);
    }
}
