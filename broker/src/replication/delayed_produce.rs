//! acks=all: a produce answers once every in-sync replica has its records, in the manner of
//! Kafka's DelayedProduce. Each appended partition waits (woken by its high watermark, which
//! moves on follower progress and on leadership changes) until the high watermark passes its
//! last offset, or the request's timeout expires.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::ResponseError;

use crate::replica_manager::Partition;

/// One appended partition of an acks=all produce.
#[derive(Clone)]
pub struct PendingAck {
    /// The partition.
    pub partition: Arc<Partition>,
    /// The offset after the appended records: acknowledged once the high watermark reaches it.
    pub required_offset: i64,
    /// `min.insync.replicas`.
    pub min_insync: usize,
}

impl PendingAck {
    /// Kafka's `checkEnoughReplicasReachOffset`: Some(outcome) once decided.
    fn check(&self) -> Option<Result<(), ResponseError>> {
        if !self.partition.is_leader() {
            return Some(Err(ResponseError::NotLeaderOrFollower));
        }
        if self.partition.high_watermark() < self.required_offset {
            return None;
        }
        if self.partition.assignment().isr.len() < self.min_insync {
            return Some(Err(ResponseError::NotEnoughReplicasAfterAppend));
        }
        Some(Ok(()))
    }
}

/// Waits for every pending partition; one outcome each, in order (REQUEST_TIMED_OUT for
/// those the ISR did not reach within `timeout`).
pub(crate) async fn wait_for_isr(
    pending: &[PendingAck],
    timeout: Duration,
) -> Vec<Result<(), ResponseError>> {
    let deadline = tokio::time::Instant::now() + timeout;
    // Subscribe before checking, so a move in between still wakes us.
    let mut watchers: Vec<_> = pending
        .iter()
        .map(|p| p.partition.watch_high_watermark())
        .collect();
    let mut outcomes: Vec<Option<Result<(), ResponseError>>> = vec![None; pending.len()];
    loop {
        for (i, p) in pending.iter().enumerate() {
            if outcomes[i].is_none() {
                outcomes[i] = p.check();
            }
        }
        let open: Vec<usize> = (0..pending.len())
            .filter(|i| outcomes[*i].is_none())
            .collect();
        if open.is_empty() {
            break;
        }
        let waits: Vec<_> = watchers
            .iter_mut()
            .enumerate()
            .filter(|(i, _)| open.contains(i))
            .map(|(_, w)| Box::pin(w.changed()))
            .collect();
        if tokio::time::timeout_at(deadline, first_of(waits))
            .await
            .is_err()
        {
            break;
        }
    }
    outcomes
        .into_iter()
        .map(|o| o.unwrap_or(Err(ResponseError::RequestTimedOut)))
        .collect()
}

/// Resolves when the first of `futs` resolves.
pub(crate) async fn first_of<F: std::future::Future + Unpin>(mut futs: Vec<F>) {
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
