//! Fetch: whole batches as byte ranges up to the high watermark (or last stable offset),
//! long-polling until `min_bytes` arrive or `max_wait_ms` passes.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::fetch_request::FetchTopic;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::{FetchRequest, FetchResponse, ProducerId, TopicName};
use kafka_protocol::ResponseError;
use tern_controller::MetadataImage;
use tokio::sync::watch;

use super::sb;
use crate::broker::Broker;
use crate::errors::storage_error_code;

const READ_COMMITTED: i8 = 1;

struct Pass {
    responses: Vec<FetchableTopicResponse>,
    bytes: usize,
    has_error: bool,
    watchers: Vec<watch::Receiver<i64>>,
}

fn error_data(index: i32, code: ResponseError) -> PartitionData {
    PartitionData::default()
        .with_partition_index(index)
        .with_error_code(code.code())
        .with_high_watermark(-1)
        .with_last_stable_offset(-1)
        .with_log_start_offset(-1)
}

fn read_pass(
    broker: &Broker,
    image: &MetadataImage,
    topics: &[FetchTopic],
    version: i16,
    max_bytes: usize,
    isolation_level: i8,
) -> Pass {
    let mut pass = Pass {
        responses: Vec::with_capacity(topics.len()),
        bytes: 0,
        has_error: false,
        watchers: Vec::new(),
    };
    for topic in topics {
        let name: Option<String> = if version >= 13 {
            image.topic_by_id(&topic.topic_id).map(|t| t.name.clone())
        } else {
            Some(topic.topic.0.to_string())
        };
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for fp in &topic.partitions {
            let Some(name) = &name else {
                pass.has_error = true;
                partitions.push(error_data(fp.partition, ResponseError::UnknownTopicId));
                continue;
            };
            let partition = match broker.replicas.partition(name, fp.partition) {
                Some(p) if p.is_leader() => p,
                Some(_) => {
                    pass.has_error = true;
                    partitions.push(error_data(fp.partition, ResponseError::NotLeaderOrFollower));
                    continue;
                }
                None => {
                    pass.has_error = true;
                    partitions.push(error_data(
                        fp.partition,
                        ResponseError::UnknownTopicOrPartition,
                    ));
                    continue;
                }
            };
            if fp.current_leader_epoch >= 0 && fp.current_leader_epoch != partition.leader_epoch() {
                pass.has_error = true;
                let code = if fp.current_leader_epoch < partition.leader_epoch() {
                    ResponseError::FencedLeaderEpoch
                } else {
                    ResponseError::UnknownLeaderEpoch
                };
                partitions.push(error_data(fp.partition, code));
                continue;
            }
            // Subscribe before reading so an append in between still wakes us.
            pass.watchers.push(partition.watch_high_watermark());
            let hw = partition.high_watermark();
            let lso = partition.last_stable_offset();
            let upper = if isolation_level == READ_COMMITTED {
                lso
            } else {
                hw
            };
            let log_start = partition.log.log_start_offset();
            let mut data = PartitionData::default()
                .with_partition_index(fp.partition)
                .with_high_watermark(hw)
                .with_last_stable_offset(lso)
                .with_log_start_offset(log_start);
            let remaining = max_bytes.saturating_sub(pass.bytes);
            let limit = (fp.partition_max_bytes.max(0) as usize).min(remaining);
            match partition
                .log
                .read(fp.fetch_offset, limit, Some(upper), pass.bytes == 0)
            {
                Ok(info) => {
                    pass.bytes += info.records.len();
                    if isolation_level == READ_COMMITTED {
                        let aborted = partition
                            .log
                            .aborted_transactions(fp.fetch_offset, upper)
                            .into_iter()
                            .map(|a| {
                                AbortedTransaction::default()
                                    .with_producer_id(ProducerId(a.producer_id))
                                    .with_first_offset(a.first_offset)
                            })
                            .collect();
                        data = data.with_aborted_transactions(Some(aborted));
                    }
                    data = data.with_records(Some(info.records));
                }
                Err(e) => {
                    pass.has_error = true;
                    data = data.with_error_code(storage_error_code(&e).code());
                }
            }
            partitions.push(data);
        }
        let mut response = FetchableTopicResponse::default().with_partitions(partitions);
        if version >= 13 {
            response.topic_id = topic.topic_id;
        } else {
            response.topic = TopicName(sb(topic.topic.0.to_string()));
        }
        pass.responses.push(response);
    }
    pass
}

/// Answers Fetch.
pub async fn handle(broker: &Broker, req: FetchRequest, version: i16) -> FetchResponse {
    let max_bytes = if req.max_bytes <= 0 {
        usize::MAX
    } else {
        req.max_bytes as usize
    };
    let min_bytes = req.min_bytes.max(0) as usize;
    let deadline =
        tokio::time::Instant::now() + Duration::from_millis(req.max_wait_ms.max(0) as u64);
    loop {
        let image: Arc<MetadataImage> = broker.controller.image();
        let mut pass = read_pass(
            broker,
            &image,
            &req.topics,
            version,
            max_bytes,
            req.isolation_level,
        );
        let now = tokio::time::Instant::now();
        if pass.bytes >= min_bytes.max(1)
            || pass.has_error
            || now >= deadline
            || pass.watchers.is_empty()
            || min_bytes == 0
        {
            return FetchResponse::default().with_responses(pass.responses);
        }
        // Wait for any partition's high watermark to move, or the deadline.
        let waits = pass
            .watchers
            .iter_mut()
            .map(|w| Box::pin(w.changed()))
            .collect::<Vec<_>>();
        let any = futures_util_select_all(waits);
        if tokio::time::timeout_at(deadline, any).await.is_err() {
            let pass = read_pass(
                broker,
                &image,
                &req.topics,
                version,
                max_bytes,
                req.isolation_level,
            );
            return FetchResponse::default().with_responses(pass.responses);
        }
    }
}

/// Resolves when the first of `futs` resolves.
async fn futures_util_select_all<F: std::future::Future + Unpin>(futs: Vec<F>) {
    let mut futs = futs;
    std::future::poll_fn(move |cx| {
        for f in futs.iter_mut() {
            if std::pin::Pin::new(f).poll(cx).is_ready() {
                return std::task::Poll::Ready(());
            }
        }
        std::task::Poll::Pending
    })
    .await
}
