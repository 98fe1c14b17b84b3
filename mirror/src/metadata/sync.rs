//! Periodic metadata sync from the source (the spec's MirrorMetadataManager): partition
//! counts, topic configs and consumer-group offsets of the topics a mirror mirrors. It runs on
//! the mirror's metadata coordinator only.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use tern_controller::topic_configs::{topic_config, validate_topic_config, MIRROR_NAME_CONFIG};
use tern_controller::MetadataImage;

use crate::fetcher::runtime::MirrorRuntime;
use crate::host::CommittedOffset;
use crate::manager::MirrorManager;
use crate::source::list_offsets_request;

/// Connect/request timeout for the per-broker group-offset sync connections.
const GROUP_SYNC_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
use crate::source::SourceConnection;

impl MirrorManager {
    pub(crate) async fn sync_metadata(
        &self,
        mirror: &str,
        rt: &mut MirrorRuntime,
        image: &MetadataImage,
    ) {
        // Paused topics too get their group offsets synced, within what is mirrored.
        let group_topics = image.mirror_topics(mirror);
        let topics: Vec<String> = group_topics
            .iter()
            .filter(|t| {
                image
                    .topic_configs(t)
                    .get(MIRROR_NAME_CONFIG)
                    .is_some_and(|m| m == mirror)
            })
            .cloned()
            .collect();
        let discovering = !rt.settings.topics_include.is_empty();
        if group_topics.is_empty() && !discovering {
            return;
        }
        let metadata = match rt.metadata(mirror, std::time::Duration::ZERO).await {
            Ok(m) => m.clone(),
            Err(e) => {
                tracing::warn!(%mirror, error = %e, "mirror metadata sync: source unreachable");
                return;
            }
        };
        if discovering {
            self.discover_topics(mirror, rt, &metadata, image).await;
        }
        let exclude = rt.settings.topic_properties_exclude.clone();
        for topic in &topics {
            let Some(source) = metadata.topics.get(topic).filter(|t| t.error_code == 0) else {
                continue;
            };
            let local_id = image.topic(topic).map(|t| t.id);
            if !source.topic_id.is_nil() && Some(source.topic_id) != local_id {
                // Recreated on the source: the topic we mirrored is gone, stop ours.
                tracing::warn!(%mirror, %topic, "source topic recreated with another id: stopping the mirror topic");
                let stopped = format!(
                    "{mirror}{}",
                    tern_controller::topic_configs::MIRROR_REMOVED_SUFFIX
                );
                let _ = self
                    .controller
                    .update_topic_config(topic, MIRROR_NAME_CONFIG, |_| Ok(Some(stopped.clone())));
                continue;
            }
            let local = image.topic(topic).map(|t| t.partitions.len()).unwrap_or(0);
            let wanted = source.partitions.len();
            if wanted > local {
                tracing::info!(%mirror, %topic, from = local, to = wanted, "source topic grew: adding partitions");
                if let Err(e) = self
                    .controller
                    .create_partitions(topic, wanted as i32, &[], false)
                {
                    tracing::warn!(%topic, error = %e, "cannot add mirrored partitions");
                }
            }
            let Ok(conn) = rt.connection(mirror).await else {
                return;
            };
            match conn.topic_configs(topic).await {
                Ok(source_configs) => {
                    let wanted = mirrored_topic_configs(&source_configs, &exclude);
                    let current = image.topic_configs(topic);
                    let mut changes: Vec<(String, Option<String>)> = Vec::new();
                    for (k, v) in &wanted {
                        if current.get(k) != Some(v) {
                            changes.push((k.clone(), Some(v.clone())));
                        }
                    }
                    for k in current.keys() {
                        if k != MIRROR_NAME_CONFIG
                            && !wanted.contains_key(k)
                            && !exclude.contains(k)
                        {
                            changes.push((k.clone(), None));
                        }
                    }
                    if !changes.is_empty() {
                        tracing::info!(%mirror, %topic, changes = changes.len(), "syncing topic configs from the source");
                        if let Err(e) = self
                            .controller
                            .alter_topic_configs(topic, &changes, false, false)
                        {
                            tracing::warn!(%topic, error = %e, "cannot sync topic configs");
                        }
                    }
                }
                Err(e) => {
                    rt.source = None;
                    tracing::warn!(%topic, error = %e, "cannot read source topic configs");
                    return;
                }
            }
        }
        self.sync_group_offsets(mirror, rt, &metadata, &group_topics, image)
            .await;
        self.sync_acls(mirror, rt, &topics, image).await;
    }

    /// Starts source topics that match `mirror.topics.include` (minus `.exclude`) and do not
    /// exist here yet: the spec's topic creation by the metadata manager.
    async fn discover_topics(
        &self,
        mirror: &str,
        rt: &mut MirrorRuntime,
        metadata: &crate::source::SourceMetadata,
        image: &MetadataImage,
    ) {
        let settings = rt.settings.clone();
        let new: Vec<String> = metadata
            .topics
            .iter()
            .filter(|(name, t)| {
                t.error_code == 0
                    && !t.is_internal
                    && settings.topics_include.matches(name)
                    && !settings.topics_exclude.matches(name)
                    && image.topic(name).is_none()
            })
            .map(|(name, _)| name.clone())
            .collect();
        if new.is_empty() {
            return;
        }
        let Ok(conn) = rt.connection(mirror).await else {
            return;
        };
        for name in new {
            match self
                .start_topic(mirror, &name, None, metadata, conn, &settings)
                .await
            {
                Ok(()) => {
                    tracing::info!(%mirror, topic = %name, "started a newly discovered source topic")
                }
                Err(e) => {
                    tracing::warn!(%mirror, topic = %name, error = %e, "cannot start a discovered source topic")
                }
            }
        }
    }

    /// Copies the source's committed offsets of the mirrored topics to the destination's
    /// groups, and share groups' start offsets to share groups, each kept within what is
    /// mirrored here (the destination's high watermark), so
    /// that after a failover no committed offset lies beyond the topic's end; a lagging mirror
    /// is re-synced as it catches up.
    async fn sync_group_offsets(
        &self,
        mirror: &str,
        rt: &mut MirrorRuntime,
        metadata: &crate::source::SourceMetadata,
        topics: &[String],
        image: &MetadataImage,
    ) {
        let mut synced = Vec::new();
        // Read the TLS files once for the whole pass, not once per source broker.
        let Ok(security) = rt.settings.client_security() else {
            return;
        };
        // Groups live on their coordinators: ask every source broker for its groups.
        for (id, (host, port)) in &metadata.brokers {
            let mut conn = match SourceConnection::connect(
                host,
                *port,
                &format!("tern-mirror-{mirror}"),
                &security,
                // A dead broker must not hold up the coordinator's pass for long.
                rt.settings.request_timeout.min(GROUP_SYNC_TIMEOUT),
            )
            .await
            {
                Ok(c) => c,
                Err(e) => {
                    tracing::debug!(broker = id, error = %e, "group sync: broker unreachable");
                    continue;
                }
            };
            let groups = match conn.list_groups().await {
                Ok(g) => g,
                Err(e) => {
                    tracing::debug!(broker = id, error = %e, "group sync: ListGroups failed");
                    continue;
                }
            };
            for group in groups {
                if !rt.settings.groups_include.matches(&group.id)
                    || rt.settings.groups_exclude.matches(&group.id)
                {
                    continue;
                }
                let offsets = if group.share {
                    conn.share_group_offsets(&group.id).await
                } else {
                    conn.committed_offsets(&group.id).await
                };
                let offsets = match offsets {
                    Ok(o) => o,
                    Err(e) => {
                        tracing::debug!(group = %group.id, error = %e, "group sync: reading offsets failed");
                        continue;
                    }
                };
                let offsets: Vec<_> = offsets
                    .into_iter()
                    .filter(|o| topics.contains(&o.topic))
                    .collect();
                if !offsets.is_empty() {
                    synced.push((group, offsets));
                }
            }
        }
        if synced.is_empty() {
            return;
        }
        let wanted: BTreeSet<(String, i32)> = synced
            .iter()
            .flat_map(|(_, o)| o.iter().map(|c| (c.topic.clone(), c.partition)))
            .collect();
        let ends = self.destination_ends(image, &wanted).await;
        for (group, offsets) in synced {
            let clamped: Vec<_> = offsets
                .into_iter()
                .filter_map(|c| {
                    let end = *ends.get(&(c.topic.clone(), c.partition))?;
                    // A clamped offset points at another record: its epoch is not known here.
                    Some(if c.offset > end {
                        CommittedOffset {
                            offset: end,
                            leader_epoch: -1,
                            ..c
                        }
                    } else {
                        c
                    })
                })
                .collect();
            if clamped.is_empty() {
                continue;
            }
            if group.share {
                self.host.sync_share_group_offsets(&group.id, clamped);
            } else {
                self.host.sync_group_offsets(&group.id, clamped);
            }
        }
    }

    /// The high watermarks of destination partitions: from this broker for those it leads,
    /// else from their leaders (ListOffsets LATEST). Partitions without an answer are left out.
    async fn destination_ends(
        &self,
        image: &MetadataImage,
        wanted: &BTreeSet<(String, i32)>,
    ) -> HashMap<(String, i32), i64> {
        let mut ends = HashMap::new();
        let mut remote: BTreeMap<i32, BTreeMap<String, Vec<i32>>> = BTreeMap::new();
        for (topic, p) in wanted {
            if let Some(hw) = self.host.watch_high_watermark(topic, *p) {
                ends.insert((topic.clone(), *p), *hw.borrow());
                continue;
            }
            let leader = image
                .topic(topic)
                .and_then(|t| t.partitions.get(p))
                .map(|info| info.leader)
                .filter(|&l| l >= 0 && l != self.host.node_id());
            if let Some(leader) = leader {
                remote
                    .entry(leader)
                    .or_default()
                    .entry(topic.clone())
                    .or_default()
                    .push(*p);
            }
        }
        for (node, topics) in remote {
            // read_uncommitted: the high watermark, what is mirrored and replicated.
            let request = list_offsets_request(topics, -1, 0);
            match self.peers.send_kafka(node, &request, 5).await {
                Ok(response) => {
                    for t in response.topics {
                        for p in t.partitions.into_iter().filter(|p| p.error_code == 0) {
                            ends.insert((t.name.to_string(), p.partition_index), p.offset);
                        }
                    }
                }
                Err(e) => {
                    tracing::debug!(broker = node, error = %e, "group sync: destination ends unknown")
                }
            }
        }
        ends
    }
}

/// The source topic configs Tern takes over: known to Tern, valid, not excluded.
pub(crate) fn mirrored_topic_configs(
    source: &[(String, String)],
    exclude: &[String],
) -> BTreeMap<String, String> {
    source
        .iter()
        .filter(|(k, _)| k != MIRROR_NAME_CONFIG && !exclude.contains(k))
        .filter(|(k, v)| topic_config(k).is_some() && validate_topic_config(k, v).is_ok())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}
