//! The controller: validates admin commands, turns them into metadata records, makes them
//! durable in the metadata log, applies them to the MetadataImage and publishes the new image.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use parking_lot::Mutex;
use tern_protocol::error::{ApiError, ResponseError};
use tokio::sync::watch;
use uuid::Uuid;

use crate::acls::{validate_new_acl, AclBinding, AclBindingFilter, MAX_ACL_RECORDS_PER_OP};
use crate::image::MetadataImage;
use crate::metadata_log::MetadataLog;
use crate::placement::assign_replicas;
use crate::records::{ConfigResourceType, MetadataRecord};
use crate::topic_configs::validate_topic_config;
use crate::ControllerError;

/// Longest topic name Kafka accepts.
const MAX_TOPIC_NAME_LEN: usize = 249;
/// Producer ids handed out per metadata record (Kafka's block size).
const PRODUCER_ID_BLOCK: i64 = 1000;

/// A request to create one topic.
#[derive(Debug, Clone, Default)]
pub struct CreateTopic {
    /// Topic name.
    pub name: String,
    /// Partition count; -1 means the broker default.
    pub num_partitions: i32,
    /// Replication factor; -1 means the broker default.
    pub replication_factor: i16,
    /// Explicit replica assignment, partition by partition (empty: let placement choose).
    pub assignments: Vec<Vec<i32>>,
    /// Topic configs.
    pub configs: Vec<(String, String)>,
    /// A given topic id (mirrors keep the source's), or a fresh one.
    pub topic_id: Option<Uuid>,
}

/// Cluster defaults the controller applies when a request leaves them out.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// `num.partitions`.
    pub num_partitions: i32,
    /// `default.replication.factor`.
    pub default_replication_factor: i16,
}

struct Inner {
    log: Box<dyn MetadataLog>,
    image: MetadataImage,
}

/// The cluster controller (one voter; the quorum log sits behind [`MetadataLog`]).
pub struct Controller {
    config: ControllerConfig,
    inner: Mutex<Inner>,
    publisher: watch::Sender<Arc<MetadataImage>>,
}

/// Checks a topic name against Kafka's rules.
pub fn validate_topic_name(name: &str) -> Result<(), ApiError> {
    let invalid = |why: String| Err(ApiError::new(ResponseError::InvalidTopicException, why));
    if name.is_empty() {
        return invalid("Topic name is illegal, it can't be empty".into());
    }
    if name == "." || name == ".." {
        return invalid("Topic name cannot be \".\" or \"..\"".into());
    }
    if name.len() > MAX_TOPIC_NAME_LEN {
        return invalid(format!(
            "Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LEN} characters"
        ));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-')
    {
        return invalid(format!(
            "Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
        ));
    }
    Ok(())
}

impl Controller {
    /// Replays the metadata log into an image and starts publishing it.
    pub fn open(
        mut log: Box<dyn MetadataLog>,
        config: ControllerConfig,
    ) -> Result<Self, ControllerError> {
        let mut image = MetadataImage::default();
        for record in log.replay()? {
            image.apply(&record);
        }
        let (publisher, _) = watch::channel(Arc::new(image.clone()));
        Ok(Controller {
            config,
            inner: Mutex::new(Inner { log, image }),
            publisher,
        })
    }

    /// The current image.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.publisher.borrow().clone()
    }

    /// A receiver that sees every new image.
    pub fn subscribe(&self) -> watch::Receiver<Arc<MetadataImage>> {
        self.publisher.subscribe()
    }

    fn commit(&self, inner: &mut Inner, records: Vec<MetadataRecord>) -> Result<(), ApiError> {
        if records.is_empty() {
            return Ok(());
        }
        inner.log.append(&records).map_err(|e| {
            ApiError::new(
                ResponseError::UnknownServerError,
                format!("metadata log: {e}"),
            )
        })?;
        for record in &records {
            inner.image.apply(record);
        }
        self.publisher.send_replace(Arc::new(inner.image.clone()));
        Ok(())
    }

    /// Registers a broker (idempotent when nothing changed).
    pub fn register_broker(
        &self,
        broker_id: i32,
        host: &str,
        port: u16,
        rack: Option<String>,
    ) -> Result<(), ApiError> {
        let mut inner = self.inner.lock();
        if let Some(b) = inner.image.brokers.get(&broker_id) {
            if b.host == host && b.port == port && b.rack == rack {
                return Ok(());
            }
        }
        let record = MetadataRecord::RegisterBroker {
            broker_id,
            host: host.to_string(),
            port,
            rack,
        };
        self.commit(&mut inner, vec![record])
    }

    /// Creates a topic, or with `validate_only` just checks that it could be. Returns its id.
    pub fn create_topic(&self, req: &CreateTopic, validate_only: bool) -> Result<Uuid, ApiError> {
        validate_topic_name(&req.name)?;
        let mut inner = self.inner.lock();
        if inner.image.topic(&req.name).is_some() {
            return Err(ApiError::new(
                ResponseError::TopicAlreadyExists,
                format!("Topic '{}' already exists.", req.name),
            ));
        }
        // '.' and '_' collide in metric names, so Kafka refuses names that differ only there.
        let folded = req.name.replace('.', "_");
        if let Some(existing) = inner
            .image
            .topic_ids
            .keys()
            .find(|t| t.replace('.', "_") == folded)
        {
            return Err(ApiError::new(
                ResponseError::InvalidTopicException,
                format!(
                    "Topic '{}' collides with existing topic: {existing}",
                    req.name
                ),
            ));
        }
        if let Some(id) = req.topic_id {
            if inner.image.topics.contains_key(&id) {
                return Err(ApiError::new(
                    ResponseError::TopicAlreadyExists,
                    format!("Topic id {id} already exists."),
                ));
            }
        }
        for (name, value) in &req.configs {
            validate_topic_config(name, value)
                .map_err(|m| ApiError::new(ResponseError::InvalidConfig, m))?;
        }
        let brokers: Vec<i32> = inner.image.brokers.keys().copied().collect();
        let assignments = if req.assignments.is_empty() {
            let partitions = if req.num_partitions == -1 {
                self.config.num_partitions
            } else {
                req.num_partitions
            };
            if partitions <= 0 {
                return Err(ApiError::new(
                    ResponseError::InvalidPartitions,
                    "Number of partitions must be larger than 0.",
                ));
            }
            let rf = if req.replication_factor == -1 {
                self.config.default_replication_factor
            } else {
                req.replication_factor
            };
            if rf <= 0 {
                return Err(ApiError::new(
                    ResponseError::InvalidReplicationFactor,
                    "Replication factor must be larger than 0.",
                ));
            }
            if rf as usize > brokers.len() {
                return Err(ApiError::new(
                    ResponseError::InvalidReplicationFactor,
                    format!(
                        "Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot be reached because only {} broker(s) are registered.",
                        brokers.len()
                    ),
                ));
            }
            assign_replicas(&brokers, 0, partitions, rf as usize)
        } else {
            if req.num_partitions != -1 || req.replication_factor != -1 {
                return Err(ApiError::new(
                    ResponseError::InvalidRequest,
                    "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.",
                ));
            }
            validate_assignments(&req.assignments, &brokers)?;
            req.assignments.clone()
        };
        let topic_id = req.topic_id.unwrap_or_else(Uuid::new_v4);
        if validate_only {
            return Ok(topic_id);
        }
        let mut records = vec![MetadataRecord::Topic {
            name: req.name.clone(),
            topic_id,
        }];
        records.extend(partition_records(topic_id, 0, &assignments));
        records.extend(
            req.configs
                .iter()
                .map(|(name, value)| MetadataRecord::Config {
                    resource_type: ConfigResourceType::Topic,
                    resource_name: req.name.clone(),
                    name: name.clone(),
                    value: Some(value.clone()),
                }),
        );
        self.commit(&mut inner, records)?;
        Ok(topic_id)
    }

    /// Deletes a topic by name.
    pub fn delete_topic(&self, name: &str) -> Result<Uuid, ApiError> {
        let mut inner = self.inner.lock();
        let Some(topic_id) = inner.image.topic_ids.get(name).copied() else {
            return Err(ApiError::new(
                ResponseError::UnknownTopicOrPartition,
                "This server does not host this topic-partition.",
            ));
        };
        self.commit(&mut inner, vec![MetadataRecord::RemoveTopic { topic_id }])?;
        Ok(topic_id)
    }

    /// Grows a topic to `count` partitions.
    pub fn create_partitions(
        &self,
        name: &str,
        count: i32,
        assignments: &[Vec<i32>],
        validate_only: bool,
    ) -> Result<(), ApiError> {
        let mut inner = self.inner.lock();
        let Some(topic) = inner.image.topic(name).cloned() else {
            return Err(ApiError::new(
                ResponseError::UnknownTopicOrPartition,
                format!("The topic '{name}' does not exist."),
            ));
        };
        let current = topic.partitions.len() as i32;
        if count <= current {
            return Err(ApiError::new(
                ResponseError::InvalidPartitions,
                format!("Topic currently has {current} partitions, which is higher than the requested {count}."),
            ));
        }
        let brokers: Vec<i32> = inner.image.brokers.keys().copied().collect();
        let new = if assignments.is_empty() {
            let rf = topic
                .partitions
                .values()
                .next()
                .map(|p| p.replicas.len())
                .unwrap_or(1);
            assign_replicas(&brokers, current, count - current, rf)
        } else {
            if assignments.len() as i32 != count - current {
                return Err(ApiError::new(
                    ResponseError::InvalidReplicaAssignment,
                    format!(
                        "Increasing the number of partitions by {} but {} assignments provided.",
                        count - current,
                        assignments.len()
                    ),
                ));
            }
            validate_assignments(assignments, &brokers)?;
            assignments.to_vec()
        };
        if validate_only {
            return Ok(());
        }
        let records = partition_records(topic.id, current, &new);
        self.commit(&mut inner, records)
    }

    /// Sets (`Some`) or removes (`None`) topic configs. With `replace_all` (the legacy
    /// AlterConfigs) every config not named is reset to its default.
    pub fn alter_topic_configs(
        &self,
        name: &str,
        changes: &[(String, Option<String>)],
        replace_all: bool,
        validate_only: bool,
    ) -> Result<(), ApiError> {
        let mut inner = self.inner.lock();
        if inner.image.topic(name).is_none() {
            return Err(ApiError::new(
                ResponseError::UnknownTopicOrPartition,
                format!("Topic {name} does not exist"),
            ));
        }
        for (key, value) in changes {
            match value {
                Some(v) => validate_topic_config(key, v),
                None => crate::topic_configs::topic_config(key)
                    .map(|_| ())
                    .ok_or_else(|| format!("Unknown topic config name: {key}")),
            }
            .map_err(|m| ApiError::new(ResponseError::InvalidConfig, m))?;
        }
        if validate_only {
            return Ok(());
        }
        let mut records = Vec::new();
        if replace_all {
            for key in inner.image.topic_configs(name).into_keys() {
                // The mirror association is not a user config: a full replace keeps it.
                if key == crate::topic_configs::MIRROR_NAME_CONFIG {
                    continue;
                }
                if !changes.iter().any(|(k, _)| *k == key) {
                    records.push(config_record(name, &key, None));
                }
            }
        }
        records.extend(
            changes
                .iter()
                .map(|(k, v)| config_record(name, k, v.clone())),
        );
        self.commit(&mut inner, records)
    }

    /// Reads a topic config and sets it from what `decide` returns, atomically with respect to
    /// every other metadata change (mirror start, stop, pause and resume race otherwise).
    /// `decide` gets the current value and answers the new one (`None` removes it).
    pub fn update_topic_config(
        &self,
        topic: &str,
        key: &str,
        decide: impl FnOnce(Option<&str>) -> Result<Option<String>, ApiError>,
    ) -> Result<(), ApiError> {
        let mut inner = self.inner.lock();
        if inner.image.topic(topic).is_none() {
            return Err(ApiError::new(
                ResponseError::UnknownTopicOrPartition,
                format!("Topic {topic} does not exist"),
            ));
        }
        let configs = inner.image.topic_configs(topic);
        let current = configs.get(key).map(String::as_str);
        let new = decide(current)?;
        if new.as_deref() == current {
            return Ok(());
        }
        self.commit(&mut inner, vec![config_record(topic, key, new)])
    }

    /// Defines a cluster mirror with already validated configs.
    pub fn create_mirror(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<Uuid, ApiError> {
        let mut inner = self.inner.lock();
        if inner.image.mirrors.contains_key(name) {
            return Err(ApiError::new(
                tern_protocol::mirror::errors::CLUSTER_MIRROR_ALREADY_EXISTS,
                format!("Cluster mirror {name} already exists"),
            ));
        }
        let mirror_id = Uuid::new_v4();
        if validate_only {
            return Ok(mirror_id);
        }
        self.commit(
            &mut inner,
            vec![MetadataRecord::ClusterMirror {
                name: name.to_string(),
                mirror_id,
                configs,
            }],
        )?;
        Ok(mirror_id)
    }

    /// Deletes a cluster mirror that mirrors no topic any more.
    pub fn delete_mirror(&self, name: &str) -> Result<(), ApiError> {
        let mut inner = self.inner.lock();
        if !inner.image.mirrors.contains_key(name) {
            return Err(ApiError::new(
                tern_protocol::mirror::errors::UNKNOWN_CLUSTER_MIRROR,
                format!("Cluster mirror {name} does not exist"),
            ));
        }
        let topics = inner.image.mirror_topics(name);
        if !topics.is_empty() {
            return Err(ApiError::new(
                tern_protocol::mirror::errors::CLUSTER_MIRROR_NOT_EMPTY,
                format!(
                    "Cluster mirror {name} still mirrors {} topic(s): {}; stop them first",
                    topics.len(),
                    topics.join(", ")
                ),
            ));
        }
        self.commit(
            &mut inner,
            vec![MetadataRecord::RemoveClusterMirror {
                name: name.to_string(),
            }],
        )
    }

    /// Commits SCRAM credential changes (`ScramCredential` / `RemoveScramCredential` records,
    /// validated by the caller) as one metadata log entry.
    pub fn alter_scram_credentials(&self, records: Vec<MetadataRecord>) -> Result<(), ApiError> {
        debug_assert!(records.iter().all(|r| matches!(
            r,
            MetadataRecord::ScramCredential { .. } | MetadataRecord::RemoveScramCredential { .. }
        )));
        let mut inner = self.inner.lock();
        self.commit(&mut inner, records)
    }

    /// Creates ACLs, answering once they are committed: one result per binding, in order.
    /// An ACL that exists already (or twice in the request) succeeds without a new record, as
    /// in Kafka's AclControlManager.
    pub fn create_acls(&self, acls: &[AclBinding]) -> Vec<Result<(), ApiError>> {
        let mut inner = self.inner.lock();
        let existing: BTreeSet<&AclBinding> = inner.image.acls.values().collect();
        let mut new: BTreeSet<&AclBinding> = BTreeSet::new();
        let mut records = Vec::new();
        let mut results = Vec::with_capacity(acls.len());
        for acl in acls {
            if let Err(e) = validate_new_acl(acl) {
                results.push(Err(e));
                continue;
            }
            if !existing.contains(acl) && new.insert(acl) {
                records.push(MetadataRecord::Acl {
                    id: Uuid::new_v4(),
                    acl: acl.clone(),
                });
            }
            results.push(Ok(()));
        }
        drop(existing);
        if records.len() > MAX_ACL_RECORDS_PER_OP {
            let e = ApiError::new(
                ResponseError::InvalidRequest,
                format!(
                    "Cannot create more than {MAX_ACL_RECORDS_PER_OP} ACLs in a single operation."
                ),
            );
            return acls.iter().map(|_| Err(e.clone())).collect();
        }
        if let Err(e) = self.commit(&mut inner, records) {
            return results.into_iter().map(|r| r.and(Err(e.clone()))).collect();
        }
        results
    }

    /// Deletes every ACL matching each filter, atomically, answering once committed: per
    /// filter, the ACLs it matched (an ACL matched by two filters is listed under both).
    pub fn delete_acls(
        &self,
        filters: &[AclBindingFilter],
    ) -> Vec<Result<Vec<AclBinding>, ApiError>> {
        let mut inner = self.inner.lock();
        let mut removed: BTreeSet<Uuid> = BTreeSet::new();
        let mut results = Vec::with_capacity(filters.len());
        for filter in filters {
            if filter.is_unknown() {
                results.push(Err(ApiError::new(
                    ResponseError::InvalidRequest,
                    "Unknown ACL filter: it names an UNKNOWN resource type, pattern type, \
                     operation or permission type.",
                )));
                continue;
            }
            let mut matched = Vec::new();
            for (id, acl) in &inner.image.acls {
                if filter.matches(acl) {
                    removed.insert(*id);
                    matched.push(acl.clone());
                }
            }
            results.push(Ok(matched));
        }
        if removed.len() > MAX_ACL_RECORDS_PER_OP {
            // Kafka fails the whole request rather than delete a part that is easy to miss.
            let e = ApiError::new(
                ResponseError::InvalidRequest,
                format!("Cannot remove more than {MAX_ACL_RECORDS_PER_OP} ACLs in a single delete operation."),
            );
            return filters.iter().map(|_| Err(e.clone())).collect();
        }
        let records = removed
            .into_iter()
            .map(|id| MetadataRecord::RemoveAcl { id })
            .collect();
        if let Err(e) = self.commit(&mut inner, records) {
            return results.into_iter().map(|r| r.and(Err(e.clone()))).collect();
        }
        results
    }

    /// Makes sure no producer id below `floor` is handed out from now on (mirrored data
    /// carries the source cluster's producer ids; ours must not collide with them).
    pub fn ensure_producer_id_floor(&self, floor: i64) -> Result<(), ApiError> {
        let mut inner = self.inner.lock();
        if inner.image.next_producer_id >= floor {
            return Ok(());
        }
        self.commit(
            &mut inner,
            vec![MetadataRecord::ProducerIds {
                next_producer_id: floor,
            }],
        )
    }

    /// Hands out a block of producer ids; returns (first id, count).
    pub fn allocate_producer_ids(&self) -> Result<(i64, i64), ApiError> {
        let mut inner = self.inner.lock();
        let first = inner.image.next_producer_id;
        self.commit(
            &mut inner,
            vec![MetadataRecord::ProducerIds {
                next_producer_id: first + PRODUCER_ID_BLOCK,
            }],
        )?;
        Ok((first, PRODUCER_ID_BLOCK))
    }
}

fn config_record(topic: &str, name: &str, value: Option<String>) -> MetadataRecord {
    MetadataRecord::Config {
        resource_type: ConfigResourceType::Topic,
        resource_name: topic.to_string(),
        name: name.to_string(),
        value,
    }
}

fn partition_records(topic_id: Uuid, first: i32, assignments: &[Vec<i32>]) -> Vec<MetadataRecord> {
    assignments
        .iter()
        .enumerate()
        .map(|(i, replicas)| MetadataRecord::Partition {
            topic_id,
            partition: first + i as i32,
            replicas: replicas.clone(),
            isr: replicas.clone(),
            leader: replicas.first().copied().unwrap_or(-1),
            leader_epoch: 0,
            partition_epoch: 0,
        })
        .collect()
}

fn validate_assignments(assignments: &[Vec<i32>], brokers: &[i32]) -> Result<(), ApiError> {
    let invalid = |m: String| Err(ApiError::new(ResponseError::InvalidReplicaAssignment, m));
    let rf = assignments.first().map(Vec::len).unwrap_or(0);
    for (p, replicas) in assignments.iter().enumerate() {
        if replicas.is_empty() {
            return invalid(format!("Partition {p} has an empty replica list."));
        }
        if replicas.len() != rf {
            return invalid("All partitions should have the same number of replicas.".into());
        }
        let mut seen = BTreeMap::new();
        for r in replicas {
            if !brokers.contains(r) {
                return invalid(format!(
                    "Replica {r} of partition {p} is not a registered broker."
                ));
            }
            if seen.insert(*r, ()).is_some() {
                return invalid(format!("Duplicate replica {r} in partition {p}."));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod acl_tests {
    use super::*;
    use crate::acls::{AclOperation, AclPatternType, AclPermissionType, AclResourceType};
    use crate::RaftMetadataLog;

    fn open(dir: &std::path::Path) -> Controller {
        let log = RaftMetadataLog::open_single_voter(dir, 0).unwrap();
        let config = ControllerConfig {
            num_partitions: 1,
            default_replication_factor: 1,
        };
        Controller::open(Box::new(log), config).unwrap()
    }

    fn acl(name: &str, pattern: AclPatternType, op: AclOperation) -> AclBinding {
        AclBinding {
            resource_type: AclResourceType::Topic,
            resource_name: name.into(),
            pattern_type: pattern,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: op,
            permission: AclPermissionType::Allow,
        }
    }

    fn topic_filter(name: Option<&str>, pattern: AclPatternType) -> AclBindingFilter {
        AclBindingFilter {
            resource_type: AclResourceType::Topic,
            resource_name: name.map(str::to_string),
            pattern_type: pattern,
            ..AclBindingFilter::any()
        }
    }

    #[test]
    fn acls_are_committed_with_ids_and_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let a = acl("orders", AclPatternType::Literal, AclOperation::Read);
        let b = acl("pay", AclPatternType::Prefixed, AclOperation::Write);
        {
            let c = open(dir.path());
            let results = c.create_acls(&[a.clone(), b.clone()]);
            assert!(results.iter().all(Result::is_ok), "{results:?}");
            let image = c.image();
            assert_eq!(image.acls.len(), 2);
            let ids: BTreeSet<&Uuid> = image.acls.keys().collect();
            assert_eq!(ids.len(), 2, "each ACL has its own id");
        }
        let c = open(dir.path());
        let mut acls: Vec<AclBinding> = c.image().acls.values().cloned().collect();
        acls.sort();
        let mut want = vec![a, b];
        want.sort();
        assert_eq!(acls, want);
    }

    #[test]
    fn an_existing_or_repeated_acl_succeeds_without_a_second_record() {
        let dir = tempfile::tempdir().unwrap();
        let c = open(dir.path());
        let a = acl("t", AclPatternType::Literal, AclOperation::Read);
        let results = c.create_acls(&[a.clone(), a.clone()]);
        assert!(results.iter().all(Result::is_ok));
        let offset = c.image().offset;
        assert!(c.create_acls(std::slice::from_ref(&a))[0].is_ok());
        assert_eq!(c.image().acls.len(), 1);
        assert_eq!(c.image().offset, offset, "nothing appended");
    }

    #[test]
    fn invalid_acls_fail_alone_with_invalid_request() {
        let dir = tempfile::tempdir().unwrap();
        let c = open(dir.path());
        let good = acl("t", AclPatternType::Literal, AclOperation::Read);
        let bad = acl("t", AclPatternType::Match, AclOperation::Read);
        let results = c.create_acls(&[bad, good]);
        assert_eq!(
            results[0].as_ref().unwrap_err().error,
            ResponseError::InvalidRequest
        );
        assert!(results[1].is_ok());
        assert_eq!(c.image().acls.len(), 1);
    }

    #[test]
    fn delete_by_filter_removes_what_matches_and_reports_it_per_filter() {
        let dir = tempfile::tempdir().unwrap();
        let c = open(dir.path());
        let literal = acl("foobar", AclPatternType::Literal, AclOperation::Read);
        let prefix = acl("foo", AclPatternType::Prefixed, AclOperation::Read);
        let other = acl("bar", AclPatternType::Literal, AclOperation::Read);
        c.create_acls(&[literal.clone(), prefix.clone(), other.clone()]);
        let results = c.delete_acls(&[
            topic_filter(Some("foobar"), AclPatternType::Match),
            topic_filter(Some("foo"), AclPatternType::Prefixed),
            AclBindingFilter {
                operation: AclOperation::Unknown,
                ..AclBindingFilter::any()
            },
        ]);
        let mut first = results[0].clone().unwrap();
        first.sort();
        let mut want = vec![literal, prefix.clone()];
        want.sort();
        assert_eq!(first, want);
        assert_eq!(results[1].clone().unwrap(), vec![prefix]);
        assert_eq!(
            results[2].as_ref().unwrap_err().error,
            ResponseError::InvalidRequest
        );
        let left: Vec<AclBinding> = c.image().acls.values().cloned().collect();
        assert_eq!(left, vec![other]);
        // Deleted ACLs stay deleted after a restart.
        drop(c);
        let c = open(dir.path());
        assert_eq!(c.image().acls.len(), 1);
    }
}
