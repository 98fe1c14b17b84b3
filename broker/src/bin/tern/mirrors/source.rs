//! Reaching both sides of a mirror from the admin CLI: the source with the mirror's own settings,
//! and either cluster's partition leaders, for `--verify` and the failover report.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use kafka_protocol::messages::describe_cluster_mirrors_response::DescribedMirror;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{
    BrokerId, DescribeClusterMirrorsRequest, DescribeConfigsRequest, FetchRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use tern_mirror::{connect_bootstrap, MirrorSettings, SourceConnection, SourceMetadata};
use tern_protocol::client::KafkaConnection;
use tern_protocol::client_security::ClientSecurity;

const TIMEOUT: Duration = Duration::from_secs(15);
const FETCH_BYTES: i32 = 1 << 20;
/// DescribeConfigs resource type of a cluster mirror (the prototype's).
const RESOURCE_CLUSTER_MIRROR: i8 = 64;

/// The destination's `--bootstrap-server` list as (host, port) pairs.
pub(crate) fn destination_servers(bootstrap_server: &str) -> Result<Vec<(String, u16)>> {
    bootstrap_server
        .split(',')
        .map(|s| tern_mirror::parse_host_port(s.trim()).map_err(|e| anyhow!(e.0)))
        .collect::<Result<Vec<_>>>()
        .with_context(|| format!("--bootstrap-server {bootstrap_server}"))
}

/// One side of the comparison: its metadata and a connection per broker, made on demand.
pub(crate) struct Side {
    name: &'static str,
    security: ClientSecurity,
    metadata: SourceMetadata,
    conns: HashMap<i32, SourceConnection>,
}

impl Side {
    pub(crate) async fn connect(
        name: &'static str,
        servers: &[(String, u16)],
        security: ClientSecurity,
    ) -> Result<Side> {
        let mut conn = connect_bootstrap(servers, "tern-mirrors-verify", &security, TIMEOUT)
            .await
            .map_err(|e| anyhow!("connecting to the {name}: {e}"))?;
        let metadata = conn
            .metadata(None)
            .await
            .map_err(|e| anyhow!("the {name}'s metadata: {e}"))?;
        Ok(Side {
            name,
            security,
            metadata,
            conns: HashMap::new(),
        })
    }

    /// The connection to the leader of a partition.
    pub(crate) async fn leader(
        &mut self,
        topic: &str,
        partition: i32,
    ) -> Result<&mut SourceConnection> {
        let leader = self
            .metadata
            .topics
            .get(topic)
            .filter(|t| t.error_code == 0)
            .and_then(|t| t.partitions.get(&partition))
            .map(|p| p.leader)
            .ok_or_else(|| anyhow!("{topic}-{partition} is not on the {}", self.name))?;
        if !self.conns.contains_key(&leader) {
            let (host, port) = self
                .metadata
                .brokers
                .get(&leader)
                .cloned()
                .ok_or_else(|| anyhow!("the {}'s broker {leader} is unknown", self.name))?;
            let conn = SourceConnection::connect(
                &host,
                port,
                "tern-mirrors-verify",
                &self.security,
                TIMEOUT,
            )
            .await
            .map_err(|e| anyhow!("connecting to the {}'s broker {leader}: {e}", self.name))?;
            self.conns.insert(leader, conn);
        }
        self.conns
            .get_mut(&leader)
            .ok_or_else(|| anyhow!("no connection"))
    }

    /// The partition's log start and high watermark.
    pub(crate) async fn span(&mut self, topic: &str, partition: i32) -> Result<(i64, i64)> {
        let name = self.name;
        let conn = self.leader(topic, partition).await?;
        let offset = |answer: Vec<(i32, i16, i64)>, what: &str| -> Result<i64> {
            match answer.first() {
                Some((_, 0, o)) => Ok(*o),
                Some((_, code, _)) => bail!(
                    "the {name}'s {what} of {topic}-{partition}: {}",
                    crate::mirrors::error_name(*code)
                ),
                None => bail!("the {name} did not answer {topic}-{partition}"),
            }
        };
        let start = conn
            .list_offsets_isolated(topic, &[partition], -2, 0)
            .await
            .map_err(|e| anyhow!("the {name}'s log start of {topic}-{partition}: {e}"))?;
        let start = offset(start, "log start")?;
        let end = conn
            .list_offsets_isolated(topic, &[partition], -1, 0)
            .await
            .map_err(|e| anyhow!("the {name}'s high watermark of {topic}-{partition}: {e}"))?;
        Ok((start, offset(end, "high watermark")?))
    }

    /// Whole record batches of a partition from `offset` (read_uncommitted).
    pub(crate) async fn batches(
        &mut self,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> Result<Bytes> {
        let name = self.name;
        let conn = self.leader(topic, partition).await?;
        let version = conn
            .fetch_version()
            .ok_or_else(|| anyhow!("the {name} offers no Fetch version Tern speaks"))?;
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(0)
            .with_min_bytes(1)
            .with_max_bytes(FETCH_BYTES)
            .with_isolation_level(0)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(partition)
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(FETCH_BYTES)])]);
        let response = conn
            .fetch(&request, version)
            .await
            .map_err(|e| anyhow!("fetching {topic}-{partition} from the {name}: {e}"))?;
        let p = response
            .responses
            .first()
            .and_then(|t| t.partitions.first())
            .ok_or_else(|| anyhow!("the {name} answered no data for {topic}-{partition}"))?;
        if p.error_code != 0 {
            bail!(
                "fetching {topic}-{partition} at {offset} from the {name}: {}",
                crate::mirrors::error_name(p.error_code)
            );
        }
        Ok(p.records.clone().unwrap_or_default())
    }
}

/// The mirror's source settings: its configs as the destination shows them (secrets withheld),
/// overridden by `--mirror-config` when given.
pub(crate) async fn source_settings(
    conn: &mut KafkaConnection,
    mirror: &str,
    overrides: BTreeMap<String, String>,
) -> Result<MirrorSettings> {
    let request =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(RESOURCE_CLUSTER_MIRROR)
            .with_resource_name(StrBytes::from_string(mirror.to_string()))]);
    let response = conn.send(&request, 4).await?;
    let r = response
        .results
        .first()
        .ok_or_else(|| anyhow!("no answer for cluster mirror {mirror}"))?;
    if r.error_code != 0 {
        bail!(
            "{}: cluster mirror {mirror}",
            crate::mirrors::error_name(r.error_code)
        );
    }
    let mut configs: BTreeMap<String, String> = r
        .configs
        .iter()
        .filter_map(|c| Some((c.name.to_string(), c.value.as_ref()?.to_string())))
        .collect();
    configs.extend(overrides);
    Ok(MirrorSettings::from_configs(&configs))
}

/// One mirror as the destination describes it; an error names the mirror's error code.
pub(crate) async fn describe_mirror(
    conn: &mut KafkaConnection,
    mirror: &str,
) -> Result<DescribedMirror> {
    let request = DescribeClusterMirrorsRequest::default()
        .with_mirror_names(vec![crate::mirrors::str_bytes(mirror)]);
    let described = conn.send(&request, 0).await?;
    let m = described
        .mirrors
        .into_iter()
        .next()
        .ok_or_else(|| anyhow!("cluster mirror {mirror} was not described"))?;
    if m.error_code != 0 {
        bail!(
            "{}: cluster mirror {mirror}",
            crate::mirrors::error_name(m.error_code)
        );
    }
    Ok(m)
}

/// The mirror's topics (all, or those named) with their partitions, sorted, as the destination
/// describes them.
pub(crate) async fn mirror_topics(
    conn: &mut KafkaConnection,
    mirror: &str,
    named: Option<&[String]>,
) -> Result<Vec<(String, Vec<i32>)>> {
    let m = describe_mirror(conn, mirror).await?;
    let mut topics: Vec<(String, Vec<i32>)> = m
        .topics
        .iter()
        .filter(|t| named.is_none_or(|names| names.iter().any(|n| **n == *t.topic_name)))
        .map(|t| {
            let mut ps: Vec<i32> = t.partitions.iter().map(|p| p.partition_index).collect();
            ps.sort();
            (t.topic_name.to_string(), ps)
        })
        .collect();
    topics.sort();
    Ok(topics)
}
