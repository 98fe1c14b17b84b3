//! DescribeLogDirs (35) and AlterReplicaLogDirs (34): which of this broker's `log.dirs` holds
//! each replica, and its size (`kafka-log-dirs.sh`).

use std::path::{Path, PathBuf};

use kafka_protocol::messages::alter_replica_log_dirs_response::{
    AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
};
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{
    AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, DescribeLogDirsRequest,
    DescribeLogDirsResponse, TopicName,
};
use kafka_protocol::ResponseError;
use tern_controller::acls::AclOperation;

use super::{sb, RequestContext};
use crate::broker::Broker;

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Answers DescribeLogDirs (DESCRIBE on the cluster): every log dir with the replicas in it
/// (those asked for, or all).
pub(crate) fn describe(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeLogDirsRequest,
    version: i16,
) -> DescribeLogDirsResponse {
    if !ctx.authz(broker).cluster(AclOperation::Describe) {
        // Kafka answers an unauthorized DescribeLogDirs with no dirs (v3+: the error code).
        return DescribeLogDirsResponse::default().with_error_code(if version >= 3 {
            ResponseError::ClusterAuthorizationFailed.code()
        } else {
            0
        });
    }
    let wanted = |topic: &str, partition: i32| {
        req.topics.as_ref().is_none_or(|ts| {
            ts.iter()
                .any(|t| t.topic.0.as_str() == topic && t.partitions.contains(&partition))
        })
    };
    let logs = broker.logs.all_logs();
    let results = broker
        .config
        .log_dirs
        .iter()
        .map(|dir| {
            let dir_c = canonical(dir);
            let mut topics: Vec<DescribeLogDirsTopic> = Vec::new();
            for ((topic, partition), log) in &logs {
                if log.dir().parent().map(canonical) != Some(dir_c.clone())
                    || !wanted(topic, *partition)
                {
                    continue;
                }
                let p = DescribeLogDirsPartition::default()
                    .with_partition_index(*partition)
                    .with_partition_size(log.size_bytes() as i64)
                    .with_offset_lag(0)
                    .with_is_future_key(false);
                match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
                    Some(t) => t.partitions.push(p),
                    None => topics.push(
                        DescribeLogDirsTopic::default()
                            .with_name(TopicName(sb(topic.clone())))
                            .with_partitions(vec![p]),
                    ),
                }
            }
            let (total, usable) =
                tern_storage::disk_space(&dir_c).map_or((-1, -1), |(t, u)| (t as i64, u as i64));
            DescribeLogDirsResult::default()
                .with_log_dir(sb(dir_c.to_string_lossy().into_owned()))
                .with_topics(topics)
                .with_total_bytes(total)
                .with_usable_bytes(usable)
        })
        .collect();
    DescribeLogDirsResponse::default().with_results(results)
}

/// Answers AlterReplicaLogDirs (ALTER on the cluster). A replica already in the named dir
/// succeeds; a dir not in `log.dirs` is LOG_DIR_NOT_FOUND; a replica this broker does not
/// host is REPLICA_NOT_AVAILABLE. Moving a replica to another dir is not implemented yet and
/// answers KAFKA_STORAGE_ERROR, with the reason in the broker's log.
pub(crate) fn alter(
    broker: &Broker,
    ctx: &RequestContext,
    req: AlterReplicaLogDirsRequest,
) -> AlterReplicaLogDirsResponse {
    let allowed = ctx.authz(broker).cluster(AclOperation::Alter);
    let dirs: Vec<PathBuf> = broker
        .config
        .log_dirs
        .iter()
        .map(|d| canonical(d))
        .collect();
    let mut results: Vec<AlterReplicaLogDirTopicResult> = Vec::new();
    for d in req.dirs {
        let target = canonical(Path::new(d.path.as_str()));
        for t in d.topics {
            let topic = t.name.0.to_string();
            let partitions = t
                .partitions
                .iter()
                .map(|&partition| {
                    let code = if !allowed {
                        ResponseError::ClusterAuthorizationFailed
                    } else if !dirs.contains(&target) {
                        ResponseError::LogDirNotFound
                    } else {
                        match broker.logs.get(&topic, partition) {
                            None => ResponseError::ReplicaNotAvailable,
                            Some(log) if log.dir().parent().map(canonical) == Some(target.clone()) => {
                                return AlterReplicaLogDirPartitionResult::default()
                                    .with_partition_index(partition)
                            }
                            Some(_) => {
                                tracing::warn!(
                                    topic, partition, dir = %target.display(),
                                    "AlterReplicaLogDirs: moving a replica between log dirs is not implemented yet"
                                );
                                ResponseError::KafkaStorageError
                            }
                        }
                    };
                    AlterReplicaLogDirPartitionResult::default()
                        .with_partition_index(partition)
                        .with_error_code(code.code())
                })
                .collect();
            results.push(
                AlterReplicaLogDirTopicResult::default()
                    .with_topic_name(t.name)
                    .with_partitions(partitions),
            );
        }
    }
    AlterReplicaLogDirsResponse::default().with_results(results)
}
