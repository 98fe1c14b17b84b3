//! The source cluster as the mirror sees it: connections with negotiated versions and the
//! standard RPCs the mirror needs (ApiVersions, Metadata, DescribeConfigs, ListOffsets, Fetch,
//! ListGroups, OffsetFetch, DescribeShareGroupOffsets, DescribeAcls), plus LastMirroredOffsets
//! when the source is a Tern.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{
    last_mirrored_offsets_request, ApiKey, ApiVersionsRequest, DescribeAclsRequest,
    DescribeConfigsRequest, DescribeShareGroupOffsetsRequest, FetchRequest, FetchResponse, GroupId,
    LastMirroredOffsetsRequest, ListGroupsRequest, ListOffsetsRequest, MetadataRequest,
    OffsetFetchRequest, TopicName,
};
use kafka_protocol::protocol::{Request, StrBytes};
use tern_controller::acls::{
    AclBinding, AclOperation, AclPatternType, AclPermissionType, AclResourceType,
};
use tern_protocol::client::{ClientError, KafkaConnection};
use tern_protocol::client_security::ClientSecurity;
use uuid::Uuid;

use crate::host::CommittedOffset;

impl From<crate::config::InvalidMirrorConfig> for SourceError {
    fn from(e: crate::config::InvalidMirrorConfig) -> Self {
        SourceError::Security(e.0)
    }
}

/// A group as the source's ListGroups names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedGroup {
    /// Group id.
    pub id: String,
    /// Whether it is a share group (KIP-932), whose start offsets are synced, not commits.
    pub share: bool,
}

/// Why talking to the source failed.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// Connecting, sending or reading failed.
    #[error("source connection: {0}")]
    Client(#[from] ClientError),
    /// The source did not answer in time.
    #[error("source request timed out after {0:?}")]
    Timeout(Duration),
    /// The TLS or SASL settings for the source are unusable.
    #[error("source security settings: {0}")]
    Security(String),
    /// No bootstrap server answered.
    #[error("no source bootstrap server reachable: {0}")]
    Unreachable(String),
    /// The source does not offer a version of an API the mirror needs.
    #[error("the source does not support {0:?} in a version Tern speaks")]
    Unsupported(ApiKey),
    /// The source answered with an error code.
    #[error("source error {code} on {what}")]
    Kafka {
        /// What was asked.
        what: String,
        /// Kafka error code.
        code: i16,
    },
}

/// One connection to a source broker with the versions it offers.
pub struct SourceConnection {
    conn: KafkaConnection,
    versions: HashMap<i16, (i16, i16)>,
    timeout: Duration,
}

impl SourceConnection {
    /// Connects to `host:port` and learns the broker's API versions.
    pub async fn connect(
        host: &str,
        port: u16,
        client_id: &str,
        security: &ClientSecurity,
        timeout: Duration,
    ) -> Result<Self, SourceError> {
        let conn = tokio::time::timeout(timeout, security.connect(host, port, client_id))
            .await
            .map_err(|_| SourceError::Timeout(timeout))??;
        let mut source = SourceConnection {
            conn,
            versions: HashMap::new(),
            timeout,
        };
        // ApiVersions v0 is understood by every broker version.
        let response = source.call(&ApiVersionsRequest::default(), 0).await?;
        if response.error_code != 0 {
            return Err(SourceError::Kafka {
                what: "ApiVersions".into(),
                code: response.error_code,
            });
        }
        source.versions = response
            .api_keys
            .iter()
            .map(|k| (k.api_key, (k.min_version, k.max_version)))
            .collect();
        Ok(source)
    }

    /// The highest version of `key` both sides speak, within `ours`.
    pub fn version(&self, key: ApiKey, ours: (i16, i16)) -> Option<i16> {
        let (min, max) = self.versions.get(&(key as i16))?;
        let v = (*max).min(ours.1);
        (v >= (*min).max(ours.0)).then_some(v)
    }

    /// Whether the source serves an api key at all (a Tern source serves the mirror RPCs).
    pub fn supports(&self, api_key: i16) -> bool {
        self.versions.contains_key(&api_key)
    }

    async fn call<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<R::Response, SourceError> {
        tokio::time::timeout(self.timeout, self.conn.send(request, version))
            .await
            .map_err(|_| SourceError::Timeout(self.timeout))?
            .map_err(SourceError::from)
    }

    /// Metadata for `topics` (all topics when `None`).
    pub async fn metadata(
        &mut self,
        topics: Option<&[String]>,
    ) -> Result<SourceMetadata, SourceError> {
        let version = self
            .version(ApiKey::Metadata, (1, 12))
            .ok_or(SourceError::Unsupported(ApiKey::Metadata))?;
        let request = MetadataRequest::default()
            .with_topics(topics.map(|ts| {
                ts.iter()
                    .map(|t| {
                        MetadataRequestTopic::default()
                            .with_name(Some(TopicName(StrBytes::from_string(t.clone()))))
                    })
                    .collect()
            }))
            .with_allow_auto_topic_creation(false);
        let response = self.call(&request, version).await?;
        let mut meta = SourceMetadata {
            cluster_id: response.cluster_id.map(|c| c.to_string()),
            brokers: response
                .brokers
                .iter()
                .map(|b| (b.node_id.0, (b.host.to_string(), b.port as u16)))
                .collect(),
            topics: BTreeMap::new(),
        };
        for t in response.topics {
            let Some(name) = t.name else { continue };
            meta.topics.insert(
                name.to_string(),
                SourceTopic {
                    error_code: t.error_code,
                    topic_id: t.topic_id,
                    is_internal: t.is_internal,
                    partitions: t
                        .partitions
                        .iter()
                        .map(|p| {
                            (
                                p.partition_index,
                                SourcePartition {
                                    leader: p.leader_id.0,
                                    leader_epoch: if version >= 7 { p.leader_epoch } else { -1 },
                                    error_code: p.error_code,
                                },
                            )
                        })
                        .collect(),
                },
            );
        }
        Ok(meta)
    }

    /// A topic's configs that differ from the source's defaults (set on the topic itself).
    pub async fn topic_configs(
        &mut self,
        topic: &str,
    ) -> Result<Vec<(String, String)>, SourceError> {
        let version = self
            .version(ApiKey::DescribeConfigs, (1, 4))
            .ok_or(SourceError::Unsupported(ApiKey::DescribeConfigs))?;
        let request = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_string(topic.to_string()))
                .with_configuration_keys(None),
        ]);
        let response = self.call(&request, version).await?;
        let mut out = Vec::new();
        for result in response.results {
            if result.error_code != 0 {
                return Err(SourceError::Kafka {
                    what: format!("DescribeConfigs({topic})"),
                    code: result.error_code,
                });
            }
            for c in result.configs {
                // 1 = DYNAMIC_TOPIC_CONFIG: set on the topic, not inherited.
                if c.config_source == 1 && !c.is_sensitive {
                    if let Some(v) = c.value {
                        out.push((c.name.to_string(), v.to_string()));
                    }
                }
            }
        }
        Ok(out)
    }

    /// Every ACL of the source (DescribeAcls with a match-all filter); `None` when the source
    /// has no authorizer (SECURITY_DISABLED) or is too old to have pattern types (before 2.0).
    pub async fn acls(&mut self) -> Result<Option<Vec<AclBinding>>, SourceError> {
        const SECURITY_DISABLED: i16 = 54;
        // v1 (Kafka 2.0) brought pattern types; before it every ACL was literal.
        let Some(version) = self.version(ApiKey::DescribeAcls, (1, 3)) else {
            return Ok(None);
        };
        // The generated defaults are empty strings, which match only empty names: null matches all.
        let request = DescribeAclsRequest::default()
            .with_resource_name_filter(None)
            .with_principal_filter(None)
            .with_host_filter(None)
            .with_resource_type_filter(AclResourceType::Any.code())
            .with_pattern_type_filter(AclPatternType::Any.code())
            .with_operation(AclOperation::Any.code())
            .with_permission_type(AclPermissionType::Any.code());
        let response = self.call(&request, version).await?;
        if response.error_code == SECURITY_DISABLED {
            return Ok(None);
        }
        if response.error_code != 0 {
            return Err(SourceError::Kafka {
                what: "DescribeAcls".into(),
                code: response.error_code,
            });
        }
        let mut out = Vec::new();
        for resource in response.resources {
            for acl in resource.acls {
                out.push(AclBinding {
                    resource_type: AclResourceType::from_code(resource.resource_type),
                    resource_name: resource.resource_name.to_string(),
                    pattern_type: AclPatternType::from_code(resource.pattern_type),
                    principal: acl.principal.to_string(),
                    host: acl.host.to_string(),
                    operation: AclOperation::from_code(acl.operation),
                    permission: AclPermissionType::from_code(acl.permission_type),
                });
            }
        }
        Ok(Some(out))
    }

    /// ListOffsets at `timestamp` (-2 earliest, -1 latest: the last stable offset) for the
    /// partitions of one topic.
    pub async fn list_offsets(
        &mut self,
        topic: &str,
        partitions: &[i32],
        timestamp: i64,
    ) -> Result<Vec<(i32, i16, i64)>, SourceError> {
        self.list_offsets_isolated(topic, partitions, timestamp, 1)
            .await
    }

    /// ListOffsets at `timestamp` with an isolation level (0: -1 is the high watermark).
    pub async fn list_offsets_isolated(
        &mut self,
        topic: &str,
        partitions: &[i32],
        timestamp: i64,
        isolation_level: i8,
    ) -> Result<Vec<(i32, i16, i64)>, SourceError> {
        let version = self
            .version(ApiKey::ListOffsets, (1, 7))
            .ok_or(SourceError::Unsupported(ApiKey::ListOffsets))?;
        let request = list_offsets_request(
            [(topic.to_string(), partitions.to_vec())],
            timestamp,
            isolation_level,
        );
        let response = self.call(&request, version).await?;
        Ok(response
            .topics
            .into_iter()
            .flat_map(|t| t.partitions)
            .map(|p| (p.partition_index, p.error_code, p.offset))
            .collect())
    }

    /// The Fetch version to use (names, not topic ids: at most 12).
    pub fn fetch_version(&self) -> Option<i16> {
        self.version(ApiKey::Fetch, (4, 12))
    }

    /// Sends a Fetch at `version`; waits at most the request's own wait plus the timeout.
    pub async fn fetch(
        &mut self,
        request: &FetchRequest,
        version: i16,
    ) -> Result<FetchResponse, SourceError> {
        let limit = self.timeout + Duration::from_millis(request.max_wait_ms.max(0) as u64);
        tokio::time::timeout(limit, self.conn.send(request, version))
            .await
            .map_err(|_| SourceError::Timeout(limit))?
            .map_err(SourceError::from)
    }

    /// Groups on this broker (ListGroups is answered per coordinator broker), each with its
    /// type (`classic`, `consumer`, `share`; `classic` from sources older than ListGroups v5).
    pub async fn list_groups(&mut self) -> Result<Vec<ListedGroup>, SourceError> {
        let version = self
            .version(ApiKey::ListGroups, (0, 5))
            .ok_or(SourceError::Unsupported(ApiKey::ListGroups))?;
        let response = self.call(&ListGroupsRequest::default(), version).await?;
        Ok(response
            .groups
            .into_iter()
            .map(|g| ListedGroup {
                id: g.group_id.to_string(),
                share: g.group_type.eq_ignore_ascii_case("share"),
            })
            .collect())
    }

    /// A share group's start offsets (DescribeShareGroupOffsets, every partition it has),
    /// as committed offsets without metadata.
    pub async fn share_group_offsets(
        &mut self,
        group: &str,
    ) -> Result<Vec<CommittedOffset>, SourceError> {
        let version = self
            .version(ApiKey::DescribeShareGroupOffsets, (0, 1))
            .ok_or(SourceError::Unsupported(ApiKey::DescribeShareGroupOffsets))?;
        let request = DescribeShareGroupOffsetsRequest::default().with_groups(vec![
            DescribeShareGroupOffsetsRequestGroup::default()
                .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
                .with_topics(None),
        ]);
        let response = self.call(&request, version).await?;
        let mut offsets = Vec::new();
        for g in response.groups {
            if g.error_code != 0 {
                return Err(SourceError::Kafka {
                    what: format!("DescribeShareGroupOffsets({group})"),
                    code: g.error_code,
                });
            }
            for t in g.topics {
                let name = t.topic_name.to_string();
                offsets.extend(t.partitions.into_iter().filter_map(|p| {
                    (p.error_code == 0 && p.start_offset >= 0).then(|| CommittedOffset {
                        topic: name.clone(),
                        partition: p.partition_index,
                        offset: p.start_offset,
                        leader_epoch: p.leader_epoch,
                        metadata: None,
                    })
                }));
            }
        }
        Ok(offsets)
    }

    /// A group's committed offsets: (topic, partition, offset, metadata).
    pub async fn committed_offsets(
        &mut self,
        group: &str,
    ) -> Result<Vec<CommittedOffset>, SourceError> {
        let version = self
            .version(ApiKey::OffsetFetch, (2, 7))
            .ok_or(SourceError::Unsupported(ApiKey::OffsetFetch))?;
        let request = OffsetFetchRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
            .with_topics(None::<Vec<OffsetFetchRequestTopic>>);
        let response = self.call(&request, version).await?;
        if response.error_code != 0 {
            return Err(SourceError::Kafka {
                what: format!("OffsetFetch({group})"),
                code: response.error_code,
            });
        }
        Ok(response
            .topics
            .into_iter()
            .flat_map(|t| {
                let name = t.name.to_string();
                t.partitions.into_iter().filter_map(move |p| {
                    (p.error_code == 0 && p.committed_offset >= 0).then(|| CommittedOffset {
                        topic: name.clone(),
                        partition: p.partition_index,
                        offset: p.committed_offset,
                        leader_epoch: p.committed_leader_epoch,
                        metadata: p.metadata.map(|m| m.to_string()),
                    })
                })
            })
            .collect())
    }

    /// LastMirroredOffsets of a Tern source: `None` when the source does not serve the API.
    pub async fn last_mirrored_offsets(
        &mut self,
        mirror: &str,
        topic: &str,
        partitions: &[i32],
    ) -> Result<Option<HashMap<i32, (i16, i64)>>, SourceError> {
        if !self.supports(LastMirroredOffsetsRequest::KEY) {
            return Ok(None);
        }
        let partitions = partitions.iter().map(|&p| {
            last_mirrored_offsets_request::PartitionData::default().with_partition_index(p)
        });
        let topic = last_mirrored_offsets_request::TopicData::default()
            .with_name(StrBytes::from_string(topic.to_string()))
            .with_partitions(partitions.collect());
        let request = LastMirroredOffsetsRequest::default()
            .with_mirror_name(StrBytes::from_string(mirror.to_string()))
            .with_topics(vec![topic]);
        let r = self.call(&request, 0).await?;
        if r.error_code != 0 {
            return Err(SourceError::Kafka {
                what: "LastMirroredOffsets".into(),
                code: r.error_code,
            });
        }
        Ok(Some(
            r.topics
                .into_iter()
                .flat_map(|t| t.partitions)
                .map(|p| (p.partition_index, (p.error_code, p.last_mirrored_offset)))
                .collect(),
        ))
    }
}

/// The source's view of its brokers and topics.
#[derive(Debug, Clone, Default)]
pub struct SourceMetadata {
    /// Source cluster id (Metadata v2+).
    pub cluster_id: Option<String>,
    /// Brokers by id.
    pub brokers: HashMap<i32, (String, u16)>,
    /// Topics by name.
    pub topics: BTreeMap<String, SourceTopic>,
}

/// One source topic.
#[derive(Debug, Clone)]
pub struct SourceTopic {
    /// Error code (UNKNOWN_TOPIC_OR_PARTITION when absent).
    pub error_code: i16,
    /// Topic id (nil before Kafka 2.8).
    pub topic_id: Uuid,
    /// Internal topic.
    pub is_internal: bool,
    /// Partitions by index.
    pub partitions: BTreeMap<i32, SourcePartition>,
}

/// One source partition's leadership.
#[derive(Debug, Clone, Copy)]
pub struct SourcePartition {
    /// Leader broker id, or -1.
    pub leader: i32,
    /// Leader epoch, or -1 when the source does not say (Metadata < v7).
    pub leader_epoch: i32,
    /// Error code.
    pub error_code: i16,
}

/// Connects to the first bootstrap server that answers.
pub async fn connect_bootstrap(
    servers: &[(String, u16)],
    client_id: &str,
    security: &ClientSecurity,
    timeout: Duration,
) -> Result<SourceConnection, SourceError> {
    let mut errors = Vec::new();
    for (host, port) in servers {
        match SourceConnection::connect(host, *port, client_id, security, timeout).await {
            Ok(c) => return Ok(c),
            Err(e) => errors.push(format!("{host}:{port}: {e}")),
        }
    }
    Err(SourceError::Unreachable(errors.join("; ")))
}

/// A consumer's ListOffsets request (no replica id) at `timestamp` (-2 earliest, -1 latest)
/// for these partitions; `isolation_level` 1 is read_committed.
pub(crate) fn list_offsets_request(
    topics: impl IntoIterator<Item = (String, Vec<i32>)>,
    timestamp: i64,
    isolation_level: i8,
) -> ListOffsetsRequest {
    ListOffsetsRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_isolation_level(isolation_level)
        .with_topics(
            topics
                .into_iter()
                .map(|(t, ps)| {
                    ListOffsetsTopic::default()
                        .with_name(TopicName(StrBytes::from_string(t)))
                        .with_partitions(
                            ps.into_iter()
                                .map(|p| {
                                    ListOffsetsPartition::default()
                                        .with_partition_index(p)
                                        .with_current_leader_epoch(-1)
                                        .with_timestamp(timestamp)
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
}
