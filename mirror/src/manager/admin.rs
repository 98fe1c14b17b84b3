//! The admin side of the mirror RPCs: create, start, stop, pause, resume, list, describe,
//! delete, and the LastMirroredOffsets / ReadMirrorStates / WriteMirrorStates lookups.

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_cluster_mirrors_response::{
    DescribedMirror, MirrorPartition, MirrorTopic,
};
use kafka_protocol::messages::list_cluster_mirrors_response::ListedMirror;
use kafka_protocol::messages::{
    bump_leader_epochs_response, last_mirrored_offsets_response, pause_mirror_topics_response,
    read_mirror_states_response, resume_mirror_topics_response, start_mirror_topics_response,
    stop_mirror_topics_response, write_mirror_states_response, BumpLeaderEpochsRequest,
    BumpLeaderEpochsResponse, CreateClusterMirrorRequest, CreateClusterMirrorResponse,
    DeleteClusterMirrorRequest, DeleteClusterMirrorResponse, DescribeClusterMirrorsRequest,
    DescribeClusterMirrorsResponse, LastMirroredOffsetsRequest, LastMirroredOffsetsResponse,
    ListClusterMirrorsRequest, ListClusterMirrorsResponse, PauseMirrorTopicsRequest,
    PauseMirrorTopicsResponse, ReadMirrorStatesRequest, ReadMirrorStatesResponse,
    ResumeMirrorTopicsRequest, ResumeMirrorTopicsResponse, StartMirrorTopicsRequest,
    StartMirrorTopicsResponse, StopMirrorTopicsRequest, StopMirrorTopicsResponse,
    WriteMirrorStatesRequest, WriteMirrorStatesResponse,
};
use kafka_protocol::protocol::StrBytes;
use tern_controller::topic_configs::{
    MIRROR_NAME_CONFIG, MIRROR_PAUSED_SUFFIX, MIRROR_REMOVED_SUFFIX, MIRROR_STOPPED_SUFFIX,
};
use tern_controller::CreateTopic;
use tern_protocol::error::{ApiError, ResponseError};
use tern_protocol::mirror::errors::*;
use uuid::Uuid;

use super::{parse_mirror_name, DesiredState, MirrorManager};
use crate::config::{is_secret, validate_mirror_configs, MirrorSettings, PatternSet};
use crate::coordinator::{apply_write, stored_here, CoordinationError};
use crate::metadata::sync::mirrored_topic_configs;
use crate::source::{connect_bootstrap, SourceMetadata};
use crate::state::{MirrorPartitionKey, MirrorPartitionState};

/// What StartMirrorTopics, StopMirrorTopics, PauseMirrorTopics and ResumeMirrorTopics answer:
/// a top-level error, or each topic's name and result.
type TopicOutcomes = Result<Vec<(String, Result<(), ApiError>)>, ApiError>;

/// One of those four responses (the same fields, but distinct generated types) from its
/// `TopicOutcomes`.
macro_rules! topics_response {
    ($response:ident, $module:ident, $outcomes:expr) => {
        match $outcomes {
            Err(e) => $response::default()
                .with_error_code(e.code())
                .with_error_message(Some(StrBytes::from(e.message))),
            Ok(results) => $response::default().with_topics(
                results
                    .into_iter()
                    .map(|(name, result)| {
                        let topic = $module::TopicResult::default().with_name(name.into());
                        match result {
                            Ok(()) => topic,
                            Err(e) => topic
                                .with_error_code(e.code())
                                .with_error_message(Some(StrBytes::from(e.message))),
                        }
                    })
                    .collect(),
            ),
        }
    };
}

fn unknown_mirror(name: &str) -> ApiError {
    ApiError::new(
        UNKNOWN_CLUSTER_MIRROR,
        format!("Cluster mirror {name} does not exist"),
    )
}

fn validate_mirror_name(name: &str) -> Result<(), ApiError> {
    let ok = !name.is_empty()
        && name.len() <= 249
        && name != "."
        && name != ".."
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-')
        && !name.ends_with(MIRROR_REMOVED_SUFFIX)
        && !name.ends_with(MIRROR_PAUSED_SUFFIX)
        && !name.ends_with(MIRROR_STOPPED_SUFFIX);
    if ok {
        Ok(())
    } else {
        Err(ApiError::new(
            ResponseError::InvalidRequest,
            format!("Invalid cluster mirror name '{name}': 1 to 249 characters of [A-Za-z0-9._-], not '.' or '..', not ending in .removed or .paused"),
        ))
    }
}

impl MirrorManager {
    /// CreateClusterMirror.
    pub fn create_mirror(&self, req: &CreateClusterMirrorRequest) -> CreateClusterMirrorResponse {
        // The configs as (name, value) pairs, as the validation reads them.
        let configs: Vec<(String, Option<String>)> = req
            .configs
            .iter()
            .map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string())))
            .collect();
        let result = validate_mirror_name(&req.mirror_name)
            .and_then(|_| validate_mirror_configs(&configs).map_err(ApiError::from))
            .and_then(|configs| {
                self.controller
                    .create_mirror(&req.mirror_name, configs, false)
                    .map(|_| ())
            });
        let (error_code, error_message) = error_of(result);
        CreateClusterMirrorResponse::default()
            .with_error_code(error_code)
            .with_error_message(error_message)
    }

    /// DeleteClusterMirror: only a mirror without mirrored (or paused) topics.
    pub async fn delete_mirror(
        &self,
        req: &DeleteClusterMirrorRequest,
    ) -> DeleteClusterMirrorResponse {
        let result = self.controller.delete_mirror(&req.mirror_name);
        if result.is_ok() {
            self.settle(None, 1).await;
        }
        let (error_code, error_message) = error_of(result);
        DeleteClusterMirrorResponse::default()
            .with_error_code(error_code)
            .with_error_message(error_message)
    }

    /// ListClusterMirrors.
    pub fn list_mirrors(&self, req: &ListClusterMirrorsRequest) -> ListClusterMirrorsResponse {
        let image = self.controller.image();
        let cluster_ids = self.cluster_ids.lock().clone();
        let mirrors = image.mirrors.values().map(|m| {
            let topics = image.mirror_topics(&m.name);
            let bootstrap = m.configs.get("bootstrap.servers").cloned();
            let cluster_id = cluster_ids.get(&m.name).cloned();
            ListedMirror::default()
                .with_mirror_name(m.name.clone().into())
                .with_source_bootstrap(bootstrap.unwrap_or_default().into())
                .with_source_cluster_id(cluster_id.unwrap_or_default().into())
                .with_topic_count(topics.len() as i32)
                .with_topic_names(if req.include_topic_names {
                    topics.into_iter().map(StrBytes::from).collect()
                } else {
                    Vec::new()
                })
        });
        ListClusterMirrorsResponse::default().with_mirrors(mirrors.collect())
    }

    /// The configs of a mirror with secrets left out (DescribeConfigs-style view for the CLI).
    pub fn mirror_configs(&self, name: &str) -> Option<BTreeMap<String, Option<String>>> {
        let image = self.controller.image();
        let m = image.mirrors.get(name)?;
        Some(
            m.configs
                .iter()
                .map(|(k, v)| (k.clone(), (!is_secret(k)).then(|| v.clone())))
                .collect(),
        )
    }

    /// DescribeClusterMirrors: per partition, state, source high watermark, destination log
    /// end offset, lag, retries and last error. Each partition is described by the broker that
    /// leads it: this one answers for its own and asks its peers (`local_only`) for theirs.
    pub async fn describe_mirrors(
        &self,
        req: &DescribeClusterMirrorsRequest,
    ) -> DescribeClusterMirrorsResponse {
        let mut response = self.describe_local(req);
        if req.local_only {
            return response;
        }
        let image = self.controller.image();
        let node = self.host.node_id();
        let leader_of = |topic: &str, p: i32| {
            image
                .topic(topic)
                .and_then(|t| t.partitions.get(&p))
                .map(|info| info.leader)
                .filter(|&l| l >= 0 && l != node)
        };
        let mut peers = std::collections::BTreeSet::new();
        for m in &response.mirrors {
            for t in &m.topics {
                peers.extend(
                    t.partitions
                        .iter()
                        .filter_map(|p| leader_of(&t.topic_name, p.partition_index)),
                );
            }
        }
        let request = req.clone().with_local_only(true);
        for peer in peers {
            let answer = self.peers.send_kafka(peer, &request, 0).await;
            let mut theirs = BTreeMap::new();
            if let Ok(r) = &answer {
                for m in &r.mirrors {
                    for t in &m.topics {
                        for p in &t.partitions {
                            theirs.insert(
                                (
                                    m.mirror_name.clone(),
                                    t.topic_name.clone(),
                                    p.partition_index,
                                ),
                                p.clone(),
                            );
                        }
                    }
                }
            }
            for m in &mut response.mirrors {
                for t in &mut m.topics {
                    for p in &mut t.partitions {
                        if leader_of(&t.topic_name, p.partition_index) != Some(peer) {
                            continue;
                        }
                        let k = (
                            m.mirror_name.clone(),
                            t.topic_name.clone(),
                            p.partition_index,
                        );
                        match (&answer, theirs.remove(&k)) {
                            (_, Some(detail)) => *p = detail,
                            (Err(e), None) => {
                                let message =
                                    format!("its leader, broker {peer}, did not answer: {e}");
                                p.error_message = Some(message.into())
                            }
                            (Ok(_), None) => {}
                        }
                    }
                }
            }
        }
        response
    }

    /// DescribeClusterMirrors as this broker knows it: full details for the partitions it
    /// leads, the coordinator's state (or UNKNOWN) for the others.
    fn describe_local(
        &self,
        req: &DescribeClusterMirrorsRequest,
    ) -> DescribeClusterMirrorsResponse {
        let image = self.controller.image();
        let names: Vec<String> = if req.mirror_names.is_empty() {
            image.mirrors.keys().cloned().collect()
        } else {
            req.mirror_names.iter().map(|n| n.to_string()).collect()
        };
        let mut store = self.states.store();
        store.sync_leadership();
        let driven = self.driven.lock();
        let status = self.status.lock();
        let mut mirrors = Vec::new();
        for name in names {
            if !image.mirrors.contains_key(&name) {
                mirrors.push(
                    DescribedMirror::default()
                        .with_error_code(UNKNOWN_CLUSTER_MIRROR.code())
                        .with_mirror_name(name.into()),
                );
                continue;
            }
            let mut topics = Vec::new();
            for ((kind, topic), configs) in &image.configs {
                if *kind != tern_controller::ConfigResourceType::Topic {
                    continue;
                }
                let Some((mirror, _)) = configs
                    .get(MIRROR_NAME_CONFIG)
                    .and_then(|v| parse_mirror_name(v))
                else {
                    continue;
                };
                if mirror != name {
                    continue;
                }
                let Some(t) = image.topic(topic) else {
                    continue;
                };
                let mut partitions = Vec::new();
                for &p in t.partitions.keys() {
                    let key = MirrorPartitionKey {
                        mirror: name.clone(),
                        topic_id: t.id,
                        partition: p,
                    };
                    let machine = driven.get(&key).map(|d| &d.machine);
                    let record = match machine {
                        Some(m) => m.stored().record.as_ref(),
                        None => store.get(&key),
                    };
                    let st = status.get(&key);
                    let destination = self
                        .host
                        .leader_replica(topic, p)
                        .map(|r| r.log.log_end_offset())
                        .unwrap_or(-1);
                    let source = st.and_then(|s| s.source_high_watermark).unwrap_or(-1);
                    let lag = if source >= 0 && destination >= 0 {
                        (source - destination).max(0)
                    } else {
                        -1
                    };
                    let state = record
                        .map(|r| r.state)
                        .unwrap_or(MirrorPartitionState::Unknown);
                    let error_message =
                        record.and_then(|r| r.error_message.clone()).or_else(|| {
                            (state != MirrorPartitionState::Stopped)
                                .then(|| machine.and_then(|m| m.last_error().map(str::to_string)))
                                .flatten()
                        });
                    partitions.push(
                        MirrorPartition::default()
                            .with_partition_index(p)
                            .with_source_offset(source)
                            .with_destination_offset(destination)
                            .with_lag(lag)
                            .with_state_value(StrBytes::from_static_str(state.name()))
                            .with_retry_attempt(record.map(|r| r.retry_attempt).unwrap_or(0))
                            .with_error_message(error_message.map(StrBytes::from)),
                    );
                }
                topics.push(
                    MirrorTopic::default()
                        .with_topic_name(topic.clone().into())
                        .with_partitions(partitions),
                );
            }
            mirrors.push(
                DescribedMirror::default()
                    .with_mirror_name(name.into())
                    .with_topics(topics),
            );
        }
        DescribeClusterMirrorsResponse::default().with_mirrors(mirrors)
    }

    /// StartMirrorTopics: creates each topic from the source (same partitions, configs and
    /// topic id) with `mirror.name` set, or re-attaches a stopped or failing-back topic.
    pub async fn start_topics(&self, req: &StartMirrorTopicsRequest) -> StartMirrorTopicsResponse {
        let outcomes = self.start_outcomes(req).await;
        topics_response!(
            StartMirrorTopicsResponse,
            start_mirror_topics_response,
            outcomes
        )
    }

    async fn start_outcomes(&self, req: &StartMirrorTopicsRequest) -> TopicOutcomes {
        let image = self.controller.image();
        let Some(mirror) = image.mirrors.get(req.mirror_name.as_str()).cloned() else {
            return Err(unknown_mirror(&req.mirror_name));
        };
        let (include, exclude) = match (
            PatternSet::compile(&strings(&req.include_patterns)),
            PatternSet::compile(&strings(&req.exclude_patterns)),
        ) {
            (Ok(i), Ok(e)) => (i, e),
            (Err(e), _) | (_, Err(e)) => return Err(e.into()),
        };
        let settings = MirrorSettings::from_configs(&mirror.configs);
        let connected = async {
            let security = settings.client_security()?;
            connect_bootstrap(
                &settings.bootstrap_servers,
                &format!("tern-mirror-{}", mirror.name),
                &security,
                settings.request_timeout,
            )
            .await
        }
        .await;
        let mut conn = match connected {
            Ok(c) => c,
            Err(e) => {
                return Err(ApiError::new(
                    ResponseError::NetworkException,
                    format!(
                        "Cannot reach the source cluster of mirror {}: {e}",
                        mirror.name
                    ),
                ))
            }
        };
        let metadata = match conn.metadata(None).await {
            Ok(m) => m,
            Err(e) => {
                return Err(ApiError::new(
                    ResponseError::NetworkException,
                    format!("Cannot read the source cluster's metadata: {e}"),
                ))
            }
        };
        if let Some(id) = &metadata.cluster_id {
            self.cluster_ids
                .lock()
                .insert(mirror.name.clone(), id.clone());
        }
        let mut names: Vec<(String, Option<Uuid>)> = Vec::new();
        for t in &req.topics {
            let id = (!t.topic_id.is_nil()).then_some(t.topic_id);
            if !names.iter().any(|(n, _)| *n == *t.topic_name) {
                names.push((t.topic_name.to_string(), id));
            }
        }
        if !include.is_empty() {
            for (name, t) in &metadata.topics {
                if t.error_code == 0
                    && !t.is_internal
                    && include.matches(name)
                    && !exclude.matches(name)
                    && !settings.topics_exclude.matches(name)
                    && !names.iter().any(|(n, _)| n == name)
                {
                    names.push((name.clone(), None));
                }
            }
        }
        let mut results = Vec::new();
        for (name, requested_id) in names {
            let r = self
                .start_topic(
                    &mirror.name,
                    &name,
                    requested_id,
                    &metadata,
                    &mut conn,
                    &settings,
                )
                .await;
            results.push((name, r));
        }
        self.settle(Some(&mirror.name), 1).await;
        Ok(results)
    }

    pub(crate) async fn start_topic(
        &self,
        mirror: &str,
        name: &str,
        requested_id: Option<Uuid>,
        metadata: &SourceMetadata,
        conn: &mut crate::source::SourceConnection,
        settings: &MirrorSettings,
    ) -> Result<(), ApiError> {
        let Some(source) = metadata.topics.get(name).filter(|t| t.error_code == 0) else {
            return Err(ApiError::new(
                ResponseError::UnknownTopicOrPartition,
                format!("Topic {name} does not exist on the source cluster of mirror {mirror}"),
            ));
        };
        let source_id = (!source.topic_id.is_nil()).then_some(source.topic_id);
        if let (Some(want), Some(have)) = (requested_id, source_id) {
            if want != have {
                return Err(ApiError::new(
                    ResponseError::InconsistentTopicId,
                    format!("Topic {name} has id {have} on the source, not {want}"),
                ));
            }
        }
        let image = self.controller.image();
        if let Some(local) = image.topic(name) {
            // An existing topic may be (re-)attached only if it is a copy of the source topic:
            // a stopped mirror topic, or the original of a failed-over one (same topic id).
            let current = image.topic_configs(name).get(MIRROR_NAME_CONFIG).cloned();
            let previously_mirrored = current
                .as_deref()
                .and_then(parse_mirror_name)
                .is_some_and(|(_, d)| d == DesiredState::Stopped);
            let same_id = source_id == Some(local.id);
            let reattachable = same_id || (source_id.is_none() && previously_mirrored);
            if !reattachable {
                return Err(ApiError::new(
                    ResponseError::TopicAlreadyExists,
                    format!("Topic {name} already exists on this cluster and is not a copy of the source topic (different topic id)"),
                ));
            }
            if local.partitions.len() > source.partitions.len() {
                return Err(ApiError::new(
                    ResponseError::InvalidPartitions,
                    format!(
                        "Topic {name} has {} partitions here but {} on the source",
                        local.partitions.len(),
                        source.partitions.len()
                    ),
                ));
            }
            let partitions: Vec<i32> = local.partitions.keys().copied().collect();
            let (local_id, current_mirror) = (
                local.id,
                current
                    .as_deref()
                    .and_then(parse_mirror_name)
                    .map(|(m, _)| m.to_string()),
            );
            let stopping = match current_mirror {
                Some(m) => self
                    .states
                    .read(&m, name, local_id, &partitions)
                    .await
                    .values()
                    .any(|r| {
                        r.as_ref()
                            .is_ok_and(|s| s.state() == MirrorPartitionState::Stopping)
                    }),
                None => false,
            };
            if stopping {
                return Err(ApiError::new(
                    MIRROR_TOPIC_BEING_STOPPED,
                    format!("Topic {name} is being stopped; start it again once it is stopped"),
                ));
            }
            let mirror_owned = mirror.to_string();
            self.controller
                .update_topic_config(name, MIRROR_NAME_CONFIG, |cur| {
                    match cur.and_then(parse_mirror_name) {
                        None | Some((_, DesiredState::Stopped)) => Ok(Some(mirror_owned.clone())),
                        Some((m, _)) => Err(ApiError::new(
                            TOPIC_ALREADY_IN_CLUSTER_MIRROR,
                            format!("Topic {name} is already mirrored by cluster mirror {m}"),
                        )),
                    }
                })?;
            if local.partitions.len() < source.partitions.len() {
                self.controller.create_partitions(
                    name,
                    source.partitions.len() as i32,
                    &[],
                    false,
                )?;
            }
            return Ok(());
        }
        let source_configs = conn.topic_configs(name).await.map_err(|e| {
            ApiError::new(
                ResponseError::NetworkException,
                format!("Cannot read the configs of source topic {name}: {e}"),
            )
        })?;
        let mut configs: Vec<(String, String)> =
            mirrored_topic_configs(&source_configs, &settings.topic_properties_exclude)
                .into_iter()
                .collect();
        configs.push((MIRROR_NAME_CONFIG.to_string(), mirror.to_string()));
        self.controller
            .create_topic(
                &CreateTopic {
                    name: name.to_string(),
                    num_partitions: source.partitions.len() as i32,
                    replication_factor: -1,
                    assignments: Vec::new(),
                    configs,
                    topic_id: source_id,
                },
                false,
            )
            .map(|_| ())
    }

    /// StopMirrorTopics (failover): each topic goes STOPPING -> STOPPED and becomes writable.
    /// Answers once every partition is stopped (or after 30 s).
    pub async fn stop_topics(&self, req: &StopMirrorTopicsRequest) -> StopMirrorTopicsResponse {
        let outcomes = self.stop_outcomes(req).await;
        topics_response!(
            StopMirrorTopicsResponse,
            stop_mirror_topics_response,
            outcomes
        )
    }

    async fn stop_outcomes(&self, req: &StopMirrorTopicsRequest) -> TopicOutcomes {
        let image = self.controller.image();
        if !image.mirrors.contains_key(req.mirror_name.as_str()) {
            return Err(unknown_mirror(&req.mirror_name));
        }
        let patterns = PatternSet::compile(&strings(&req.patterns))?;
        let mut names: Vec<String> = req
            .topics
            .iter()
            .map(|t| t.topic_name.to_string())
            .collect();
        if !patterns.is_empty() {
            for t in image.mirror_topics(&req.mirror_name) {
                if patterns.matches(&t) && !names.contains(&t) {
                    names.push(t);
                }
            }
        }
        let mirror = req.mirror_name.to_string();
        let results: Vec<(String, Result<(), ApiError>)> = names
            .iter()
            .map(|name| {
                let r = self
                    .controller
                    .update_topic_config(name, MIRROR_NAME_CONFIG, |cur| {
                        match cur.and_then(parse_mirror_name) {
                            Some((m, DesiredState::Mirroring | DesiredState::Paused))
                                if m == mirror =>
                            {
                                Ok(Some(format!("{mirror}{MIRROR_REMOVED_SUFFIX}")))
                            }
                            Some((m, DesiredState::Stopped)) if m == mirror => {
                                Ok(cur.map(str::to_string))
                            }
                            _ => Err(ApiError::new(
                                TOPIC_NOT_IN_CLUSTER_MIRROR,
                                format!("Topic {name} is not mirrored by cluster mirror {mirror}"),
                            )),
                        }
                    });
                (name.clone(), r)
            })
            .collect();
        // Wait for the coordinator to finish STOPPING the topics it accepted.
        let names: Vec<String> = results
            .iter()
            .filter(|(_, r)| r.is_ok())
            .map(|(name, _)| name.clone())
            .collect();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::time::Instant::now() < deadline {
            self.settle(None, 1).await;
            let done = self.complete_failovers(&mirror, &names).await;
            if names
                .iter()
                .all(|n| done.contains(n) || self.controller.image().topic(n).is_none())
            {
                break;
            }
        }
        Ok(results)
    }

    /// PauseMirrorTopics.
    pub async fn pause_topics(&self, req: &PauseMirrorTopicsRequest) -> PauseMirrorTopicsResponse {
        let topics: Vec<&str> = req.topics.iter().map(|t| t.topic_name.as_str()).collect();
        let outcomes = self.change_topics(&req.mirror_name, &topics, true).await;
        topics_response!(
            PauseMirrorTopicsResponse,
            pause_mirror_topics_response,
            outcomes
        )
    }

    /// ResumeMirrorTopics.
    pub async fn resume_topics(
        &self,
        req: &ResumeMirrorTopicsRequest,
    ) -> ResumeMirrorTopicsResponse {
        let topics: Vec<&str> = req.topics.iter().map(|t| t.topic_name.as_str()).collect();
        let outcomes = self.change_topics(&req.mirror_name, &topics, false).await;
        topics_response!(
            ResumeMirrorTopicsResponse,
            resume_mirror_topics_response,
            outcomes
        )
    }

    async fn change_topics(&self, mirror: &str, topics: &[&str], pause: bool) -> TopicOutcomes {
        let image = self.controller.image();
        if !image.mirrors.contains_key(mirror) {
            return Err(unknown_mirror(mirror));
        }
        let mirror = mirror.to_string();
        let results = topics
            .iter()
            .map(|&name| {
                let r = self
                    .controller
                    .update_topic_config(name, MIRROR_NAME_CONFIG, |cur| {
                        let not_in = || {
                            Err(ApiError::new(
                                TOPIC_NOT_IN_CLUSTER_MIRROR,
                                format!("Topic {name} is not mirrored by cluster mirror {mirror}"),
                            ))
                        };
                        match (cur.and_then(parse_mirror_name), pause) {
                            (Some((m, _)), _) if m != mirror => not_in(),
                            (Some((_, DesiredState::Mirroring)), true) => {
                                Ok(Some(format!("{mirror}{MIRROR_PAUSED_SUFFIX}")))
                            }
                            (Some((_, DesiredState::Paused)), true) => Err(ApiError::new(
                                MIRROR_TOPIC_ALREADY_PAUSED,
                                format!("Topic {name} is already paused"),
                            )),
                            (Some((_, DesiredState::Paused)), false) => Ok(Some(mirror.clone())),
                            (Some((_, DesiredState::Mirroring)), false) => Err(ApiError::new(
                                MIRROR_TOPIC_NOT_PAUSED,
                                format!("Topic {name} is not paused"),
                            )),
                            (Some((_, DesiredState::Stopped)), _) => Err(ApiError::new(
                                MIRROR_TOPIC_BEING_STOPPED,
                                format!("Topic {name} is stopped or being stopped"),
                            )),
                            (None, _) => not_in(),
                        }
                    });
                (name.to_string(), r)
            })
            .collect();
        self.settle(None, 2).await;
        Ok(results)
    }

    /// LastMirroredOffsets: for each partition, the offset up to which it was mirrored when it
    /// was stopped here (by the mirror the topic belongs to now; older mirrors' states of the
    /// same partition are history); MIRROR_TOPIC_NOT_STOPPED while it is still mirrored.
    pub async fn last_mirrored_offsets(
        &self,
        req: &LastMirroredOffsetsRequest,
    ) -> LastMirroredOffsetsResponse {
        let image = self.controller.image();
        self.states.store().sync_leadership();
        let mut topics = Vec::new();
        for t in &req.topics {
            let asked: Vec<i32> = t.partitions.iter().map(|p| p.partition_index).collect();
            let partition = |p: i32, last_mirrored_offset: i64, error_code: i16| {
                last_mirrored_offsets_response::PartitionResult::default()
                    .with_partition_index(p)
                    .with_last_mirrored_offset(last_mirrored_offset)
                    .with_error_code(error_code)
            };
            let unknown = |p: i32| partition(p, -1, ResponseError::UnknownTopicOrPartition.code());
            let mirror = image
                .topic_configs(&t.name)
                .get(MIRROR_NAME_CONFIG)
                .and_then(|v| parse_mirror_name(v))
                .map(|(m, _)| m.to_string());
            let partitions = match (image.topic(&t.name), mirror) {
                (Some(topic), Some(mirror)) => {
                    let stored = self.states.read(&mirror, &t.name, topic.id, &asked).await;
                    asked
                        .iter()
                        .map(|&p| match stored.get(&p) {
                            Some(Ok(s)) if s.record.is_none() => unknown(p),
                            Some(Ok(s)) if s.state() == MirrorPartitionState::Stopped => {
                                partition(p, s.last_mirrored_offset.unwrap_or(-1), 0)
                            }
                            Some(Ok(_)) => partition(p, -1, MIRROR_TOPIC_NOT_STOPPED.code()),
                            Some(Err(e)) => partition(p, -1, e.code()),
                            None => unknown(p),
                        })
                        .collect()
                }
                _ => asked.iter().map(|&p| unknown(p)).collect(),
            };
            topics.push(
                last_mirrored_offsets_response::TopicResult::default()
                    .with_name(t.name.clone())
                    .with_partitions(partitions),
            );
        }
        LastMirroredOffsetsResponse::default().with_topics(topics)
    }

    /// ReadMirrorStates: the coordinator's records for the asked partitions.
    pub fn read_states(&self, req: &ReadMirrorStatesRequest) -> ReadMirrorStatesResponse {
        let image = self.controller.image();
        let mut store = self.states.store();
        store.sync_leadership();
        let topics = req.topics.iter().map(|t| {
            let partitions = t.partitions.iter().map(|p| {
                let p = p.partition_index;
                let partition =
                    read_mirror_states_response::PartitionResult::default().with_partition_index(p);
                let Some(topic) = image.topic(&t.name) else {
                    return partition
                        .with_error_code(ResponseError::UnknownTopicOrPartition.code());
                };
                let key = MirrorPartitionKey {
                    mirror: req.mirror_name.to_string(),
                    topic_id: topic.id,
                    partition: p,
                };
                if !store.coordinates(&key) {
                    let message = format!(
                        "this broker does not coordinate {}-{p} of mirror {}",
                        t.name, req.mirror_name
                    );
                    return partition
                        .with_error_code(ResponseError::NotCoordinator.code())
                        .with_error_message(Some(message.into()));
                }
                let stored = stored_here(&store, &key);
                match stored.record {
                    Some(r) => partition
                        .with_state(r.state.id())
                        .with_previous_state(r.previous_state.id())
                        .with_retry_attempt(r.retry_attempt)
                        .with_error_message(r.error_message.map(StrBytes::from))
                        .with_last_mirrored_offset(stored.last_mirrored_offset.unwrap_or(-1)),
                    None => partition.with_state(MirrorPartitionState::Unknown.id()),
                }
            });
            read_mirror_states_response::TopicResult::default()
                .with_name(t.name.clone())
                .with_partitions(partitions.collect())
        });
        ReadMirrorStatesResponse::default().with_topics(topics.collect())
    }

    /// WriteMirrorStates: a remote broker records partition states with this coordinator;
    /// each is answered once committed in `__mirror_state`.
    pub async fn write_states(&self, req: &WriteMirrorStatesRequest) -> WriteMirrorStatesResponse {
        let image = self.controller.image();
        let mut topics = Vec::new();
        for t in &req.topics {
            let mut partitions = Vec::new();
            for p in &t.partitions {
                let result = match image.topic(&t.name) {
                    None => Err(CoordinationError::UnknownTopic(t.name.to_string())),
                    Some(topic) => {
                        let key = MirrorPartitionKey {
                            mirror: req.mirror_name.to_string(),
                            topic_id: topic.id,
                            partition: p.partition_index,
                        };
                        let applied = apply_write(&mut self.states.store(), &image, &key, p);
                        match applied {
                            Ok(pending) => self.states.committed(pending).await,
                            Err(e) => Err(e),
                        }
                    }
                };
                partitions.push(
                    write_mirror_states_response::PartitionResult::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(result.as_ref().err().map_or(0, CoordinationError::code))
                        .with_error_message(result.err().map(|e| e.to_string().into())),
                );
            }
            topics.push(
                write_mirror_states_response::TopicResult::default()
                    .with_name(t.name.clone())
                    .with_partitions(partitions),
            );
        }
        WriteMirrorStatesResponse::default().with_topics(topics)
    }
}

/// A top-level error code and message (CreateClusterMirror, DeleteClusterMirror).
fn error_of(result: Result<(), ApiError>) -> (i16, Option<StrBytes>) {
    match result {
        Ok(()) => (0, None),
        Err(e) => (e.code(), Some(e.message.into())),
    }
}

/// The strings of a request's list (topic patterns).
fn strings(list: &[StrBytes]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

impl MirrorManager {
    /// BumpLeaderEpochs (105): raises each named mirror partition's leader epoch to at least its
    /// MinLeaderEpoch through the controller, so every broker agrees on it. A minimum below the
    /// partition's current epoch is stale and refused with FENCED_LEADER_EPOCH (nothing
    /// changes); a minimum equal to it changes nothing; topics that are not mirror topics are
    /// refused with INVALID_REQUEST.
    pub fn bump_leader_epochs(&self, req: &BumpLeaderEpochsRequest) -> BumpLeaderEpochsResponse {
        let image = self.controller.image();
        let mut topics = Vec::with_capacity(req.topics.len());
        for t in &req.topics {
            let topic = image.topic_by_id(&t.topic_id);
            let is_mirror_topic = topic.is_some_and(|topic| {
                image
                    .topic_configs(&topic.name)
                    .get(MIRROR_NAME_CONFIG)
                    .and_then(|v| parse_mirror_name(v))
                    .is_some()
            });
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let error = match topic {
                        None => Some(ResponseError::UnknownTopicId),
                        Some(_) if !is_mirror_topic => Some(ResponseError::InvalidRequest),
                        Some(topic) => match topic.partitions.get(&p.partition_index) {
                            None => Some(ResponseError::UnknownTopicOrPartition),
                            Some(info) if p.min_leader_epoch < info.leader_epoch => {
                                Some(ResponseError::FencedLeaderEpoch)
                            }
                            Some(_) => self
                                .controller
                                .raise_leader_epoch(
                                    t.topic_id,
                                    p.partition_index,
                                    p.min_leader_epoch,
                                )
                                .err()
                                .map(|e| e.error),
                        },
                    };
                    bump_leader_epochs_response::PartitionResult::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(error.map_or(0, |e| e.code()))
                })
                .collect();
            topics.push(
                bump_leader_epochs_response::TopicResult::default()
                    .with_topic_name(topic.map(|t| t.name.clone()).unwrap_or_default().into())
                    .with_partitions(partitions),
            );
        }
        BumpLeaderEpochsResponse::default().with_topics(topics)
    }
}
