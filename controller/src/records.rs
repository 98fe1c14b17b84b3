//! Metadata records: every change to the cluster is one of these, appended to the metadata log.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Kind of resource a config record applies to (Kafka's ConfigResource types).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ConfigResourceType {
    /// A topic's configs.
    Topic,
    /// A broker's dynamic configs.
    Broker,
    /// A group's configs (Kafka's GROUP resource: `share.auto.offset.reset`, ...).
    Group,
}

/// One advertised listener of a broker.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BrokerEndpoint {
    /// Listener name (PLAINTEXT, SASL_SSL, ...).
    pub listener: String,
    /// Advertised host.
    pub host: String,
    /// Advertised port.
    pub port: u16,
}

/// One change to the cluster metadata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum MetadataRecord {
    /// A broker registered (or re-registered after a restart).
    RegisterBroker {
        /// Node id.
        broker_id: i32,
        /// Advertised host.
        host: String,
        /// Advertised port.
        port: u16,
        /// Rack, if configured.
        rack: Option<String>,
        /// Every advertised listener (logs written before clusters existed have none).
        #[serde(default)]
        endpoints: Vec<BrokerEndpoint>,
        /// The registering process's incarnation (none in older logs).
        #[serde(default)]
        incarnation_id: Option<Uuid>,
    },
    /// A broker missed its heartbeats or shut down: it leads nothing until it is back.
    FenceBroker {
        /// Node id.
        broker_id: i32,
    },
    /// A fenced broker heartbeats again.
    UnfenceBroker {
        /// Node id.
        broker_id: i32,
    },
    /// The cluster's id, written once by the first active controller.
    ClusterId {
        /// The cluster id.
        cluster_id: String,
    },
    /// A topic was created.
    Topic {
        /// Topic name.
        name: String,
        /// Topic id.
        topic_id: Uuid,
    },
    /// A partition was created, or its replicas, ISR or leader changed.
    Partition {
        /// Topic id.
        topic_id: Uuid,
        /// Partition index.
        partition: i32,
        /// Replica broker ids, preferred leader first.
        replicas: Vec<i32>,
        /// In-sync replicas.
        isr: Vec<i32>,
        /// Leader broker id, or -1.
        leader: i32,
        /// Bumped on every leader change.
        leader_epoch: i32,
        /// Bumped on every change of this partition.
        partition_epoch: i32,
    },
    /// A partition's reassignment started, moved on or ended (KIP-455): the replicas being
    /// added and those to remove once the added ones are in sync (both empty: none ongoing).
    PartitionReassignment {
        /// Topic id.
        topic_id: Uuid,
        /// Partition index.
        partition: i32,
        /// Replicas being added.
        adding: Vec<i32>,
        /// Replicas to remove when the reassignment completes.
        removing: Vec<i32>,
    },
    /// A config was set (`value` Some) or removed (`value` None).
    Config {
        /// Resource type.
        resource_type: ConfigResourceType,
        /// Topic name, broker id as a string ("" for the cluster default), or group id.
        resource_name: String,
        /// Config key.
        name: String,
        /// New value, or None to remove.
        value: Option<String>,
    },
    /// A topic and all its partitions and configs were deleted.
    RemoveTopic {
        /// Topic id.
        topic_id: Uuid,
    },
    /// A block of producer ids was handed out (ids below `next_producer_id` are taken).
    ProducerIds {
        /// The next id not yet handed out.
        next_producer_id: i64,
    },
    /// A cluster mirror was defined: a source cluster and how to reach it.
    ClusterMirror {
        /// Mirror name.
        name: String,
        /// Mirror id.
        mirror_id: Uuid,
        /// Mirror configs (`bootstrap.servers`, `mirror.fetch.*`, ...), secrets included.
        configs: std::collections::BTreeMap<String, String>,
    },
    /// A cluster mirror was deleted.
    RemoveClusterMirror {
        /// Mirror name.
        name: String,
    },
    /// A user's SCRAM credential for one mechanism was set (Kafka's UserScramCredentialRecord).
    ScramCredential {
        /// User name.
        user: String,
        /// Mechanism code (1 SCRAM-SHA-256, 2 SCRAM-SHA-512).
        mechanism: i8,
        /// Salt.
        salt: Vec<u8>,
        /// H(ClientKey).
        stored_key: Vec<u8>,
        /// HMAC(SaltedPassword, "Server Key").
        server_key: Vec<u8>,
        /// PBKDF2 iterations.
        iterations: i32,
    },
    /// A user's SCRAM credential for one mechanism was removed.
    RemoveScramCredential {
        /// User name.
        user: String,
        /// Mechanism code.
        mechanism: i8,
    },
    /// An ACL was created (Kafka's AccessControlEntryRecord).
    Acl {
        /// The ACL's id, generated by the controller.
        id: Uuid,
        /// The ACL.
        acl: crate::acls::AclBinding,
    },
    /// An ACL was deleted (Kafka's RemoveAccessControlEntryRecord).
    RemoveAcl {
        /// The ACL's id.
        id: Uuid,
    },
    /// A broker's replica of a partition is offline (an I/O error) until the broker restarts
    /// (Kafka's offline log dir): never elected leader, never back in the ISR meanwhile.
    ReplicaOffline {
        /// Topic id.
        topic_id: Uuid,
        /// Partition index.
        partition: i32,
        /// The broker whose replica it is.
        broker_id: i32,
    },
}
