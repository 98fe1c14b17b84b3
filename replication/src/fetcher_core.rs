//! The sans-I/O core of a replica fetcher: which partitions it fetches, from what offset and
//! epoch, and what each partition of a Fetch response means for the local log. No sockets, no
//! disk: the I/O side asks it for the next request and carries out the [`Outcome`]s it returns
//! (Kafka's `AbstractFetcherThread`, with KIP-101/KIP-279 truncation by leader epoch through
//! the diverging epoch of Fetch v12+).

use std::collections::BTreeMap;

use bytes::Bytes;

/// A topic partition by name.
pub type TopicPartition = (String, i32);

const NONE: i16 = 0;
const OFFSET_OUT_OF_RANGE: i16 = 1;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const UNKNOWN_LEADER_EPOCH: i16 = 75;
/// Backoff when the leader has not applied the metadata this follower already has (it is
/// about to): the new leader's high watermark waits on this follower's first fetch.
const METADATA_RACE_BACKOFF_MS: i64 = 50;

/// What the core needs to know of the local log of a partition.
pub trait LocalLog {
    /// The log end offset.
    fn log_end_offset(&self) -> i64;
    /// The latest leader epoch in the log, if any.
    fn latest_epoch(&self) -> Option<i32>;
    /// Kafka's `endOffsetForEpoch`: the largest epoch <= `epoch` and where it ends.
    fn end_offset_for_epoch(&self, epoch: i32) -> Option<(i32, i64)>;
    /// The local high watermark.
    fn high_watermark(&self) -> i64;
}

/// One partition of a Fetch request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchTarget {
    /// The partition.
    pub tp: TopicPartition,
    /// The local log end offset.
    pub fetch_offset: i64,
    /// The epoch of the last batch in the local log (-1 if none): the leader checks it.
    pub last_fetched_epoch: i32,
    /// The leader epoch this follower knows.
    pub current_leader_epoch: i32,
    /// Which registration of the partition this is (a response to an older one is dropped).
    pub generation: u64,
}

/// One partition of a Fetch response, as the core reads it.
#[derive(Debug, Clone, Default)]
pub struct FetchedPartition {
    /// Error code.
    pub error_code: i16,
    /// The leader's high watermark.
    pub high_watermark: i64,
    /// The diverging epoch, if the leader found one: (epoch, end offset).
    pub diverging: Option<(i32, i64)>,
    /// Whole batches.
    pub records: Bytes,
}

/// What the I/O side must do with one partition's response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Append `records` through the follower path, then take the leader's high watermark.
    Append {
        /// The batches.
        records: Bytes,
        /// The leader's high watermark.
        leader_high_watermark: i64,
    },
    /// Nothing new: take the leader's high watermark.
    HighWatermark(i64),
    /// The log diverged from the leader's: truncate to this offset, then fetch again.
    Truncate(i64),
    /// The fetch offset is outside the leader's log: look up its earliest and latest offsets.
    ResetOffsets,
    /// Back off and retry later (the leader's error code).
    Backoff(i16),
}

#[derive(Debug, Clone)]
struct Entry<P> {
    leader_epoch: i32,
    generation: u64,
    delayed_until_ms: i64,
    payload: P,
}

/// The partitions of one fetcher (one leader broker), each carrying a payload `P` the I/O
/// side needs (the partition's log).
#[derive(Debug)]
pub struct FetcherCore<P> {
    partitions: BTreeMap<TopicPartition, Entry<P>>,
    next_generation: u64,
    backoff_ms: i64,
}

impl<P: Clone> FetcherCore<P> {
    /// An empty fetcher that backs a failing partition off for `backoff_ms`.
    pub fn new(backoff_ms: i64) -> Self {
        FetcherCore {
            partitions: BTreeMap::new(),
            next_generation: 1,
            backoff_ms,
        }
    }

    /// Starts (or restarts, in a new leader epoch) fetching a partition.
    pub fn add(&mut self, tp: TopicPartition, leader_epoch: i32, payload: P) {
        let generation = self.next_generation;
        self.next_generation += 1;
        self.partitions.insert(
            tp,
            Entry {
                leader_epoch,
                generation,
                delayed_until_ms: 0,
                payload,
            },
        );
    }

    /// The payload of a partition, to update what the I/O side keeps in it.
    pub fn payload_mut(&mut self, tp: &TopicPartition) -> Option<&mut P> {
        self.partitions.get_mut(tp).map(|e| &mut e.payload)
    }

    /// Takes a newer leader epoch the leader reported, and fetches again at once.
    pub fn set_leader_epoch(&mut self, tp: &TopicPartition, leader_epoch: i32) {
        if let Some(e) = self.partitions.get_mut(tp) {
            e.leader_epoch = leader_epoch;
            e.delayed_until_ms = 0;
        }
    }

    /// Stops fetching every partition; returns them.
    pub fn clear(&mut self) -> Vec<TopicPartition> {
        std::mem::take(&mut self.partitions).into_keys().collect()
    }

    /// Stops fetching a partition; true if it was here.
    pub fn remove(&mut self, tp: &TopicPartition) -> bool {
        self.partitions.remove(tp).is_some()
    }

    /// Stops fetching a partition and hands back its leader epoch and payload, for another
    /// fetcher to take it on.
    pub fn take(&mut self, tp: &TopicPartition) -> Option<(i32, P)> {
        self.partitions
            .remove(tp)
            .map(|e| (e.leader_epoch, e.payload))
    }

    /// Whether the partition is fetched here, and in which leader epoch.
    pub fn leader_epoch(&self, tp: &TopicPartition) -> Option<i32> {
        self.partitions.get(tp).map(|e| e.leader_epoch)
    }

    /// Number of partitions.
    pub fn len(&self) -> usize {
        self.partitions.len()
    }

    /// Whether no partition is fetched here.
    pub fn is_empty(&self) -> bool {
        self.partitions.is_empty()
    }

    /// The earliest time a delayed partition may be fetched again, if any is delayed.
    pub fn next_wakeup_ms(&self, now_ms: i64) -> Option<i64> {
        self.partitions
            .values()
            .map(|e| e.delayed_until_ms)
            .filter(|t| *t > now_ms)
            .min()
    }

    /// The partitions to fetch now, with their payloads; `position` gives a partition's log
    /// end offset and latest epoch (-1 if none).
    pub fn targets(
        &self,
        now_ms: i64,
        position: impl Fn(&P) -> (i64, i32),
    ) -> Vec<(FetchTarget, P)> {
        self.partitions
            .iter()
            .filter(|(_, e)| e.delayed_until_ms <= now_ms)
            .map(|(tp, e)| {
                let (fetch_offset, last_fetched_epoch) = position(&e.payload);
                (
                    FetchTarget {
                        tp: tp.clone(),
                        fetch_offset,
                        last_fetched_epoch,
                        current_leader_epoch: e.leader_epoch,
                        generation: e.generation,
                    },
                    e.payload.clone(),
                )
            })
            .collect()
    }

    /// Reads one partition of a response to a request made for `target`. None if the
    /// partition was removed or re-added since (the response is stale for it).
    pub fn on_response(
        &mut self,
        target: &FetchTarget,
        data: &FetchedPartition,
        log: &impl LocalLog,
        now_ms: i64,
    ) -> Option<Outcome> {
        let entry = self.partitions.get_mut(&target.tp)?;
        if entry.generation != target.generation {
            return None;
        }
        let outcome = match data.error_code {
            NONE => match data.diverging {
                Some((epoch, end_offset)) => Outcome::Truncate(truncation_offset(
                    epoch,
                    end_offset,
                    log.log_end_offset(),
                    log.high_watermark(),
                    |e| log.end_offset_for_epoch(e),
                )),
                None if data.records.is_empty() => Outcome::HighWatermark(data.high_watermark),
                None => Outcome::Append {
                    records: data.records.clone(),
                    leader_high_watermark: data.high_watermark,
                },
            },
            OFFSET_OUT_OF_RANGE => Outcome::ResetOffsets,
            code @ (NOT_LEADER_OR_FOLLOWER | UNKNOWN_LEADER_EPOCH | UNKNOWN_TOPIC_OR_PARTITION) => {
                // The leader's metadata is behind ours (or ours behind, and a new epoch re-adds
                // the partition at once): retry soon.
                entry.delayed_until_ms = now_ms + self.backoff_ms.min(METADATA_RACE_BACKOFF_MS);
                Outcome::Backoff(code)
            }
            code => {
                // FENCED_LEADER_EPOCH (this follower's metadata is behind: the next image
                // re-adds it), storage errors: wait, then retry.
                entry.delayed_until_ms = now_ms + self.backoff_ms;
                Outcome::Backoff(code)
            }
        };
        Some(outcome)
    }

    /// Backs a partition off after the I/O side failed on it (storage, connection).
    pub fn delay(&mut self, tp: &TopicPartition, now_ms: i64) {
        if let Some(e) = self.partitions.get_mut(tp) {
            e.delayed_until_ms = now_ms + self.backoff_ms;
        }
    }

    /// Backs every partition off (the connection to the leader failed).
    pub fn delay_all(&mut self, now_ms: i64) {
        for e in self.partitions.values_mut() {
            e.delayed_until_ms = now_ms + self.backoff_ms;
        }
    }
}

/// Where a follower truncates when the leader reports the diverging epoch `(epoch, end)`
/// (Kafka's `getOffsetTruncationState`): if the follower has that epoch, to the smaller of
/// the two ends; if not, to the end of its own largest earlier epoch (the next fetch then
/// carries that epoch and the leader checks again). Never beyond the log end; an undefined
/// answer falls back to the high watermark, which every in-sync replica has.
pub(crate) fn truncation_offset(
    epoch: i32,
    end_offset: i64,
    log_end_offset: i64,
    high_watermark: i64,
    end_offset_for_epoch: impl Fn(i32) -> Option<(i32, i64)>,
) -> i64 {
    if epoch < 0 || end_offset < 0 {
        return high_watermark.min(log_end_offset);
    }
    let target = match end_offset_for_epoch(epoch) {
        Some((follower_epoch, follower_end)) if follower_epoch == epoch => {
            follower_end.min(end_offset)
        }
        Some((_, follower_end)) => follower_end,
        None => end_offset,
    };
    target.min(log_end_offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log as (epoch, start offset) entries and an end offset, like the epoch cache.
    #[derive(Debug, Clone)]
    struct FakeLog {
        epochs: Vec<(i32, i64)>,
        end: i64,
        hw: i64,
    }

    impl FakeLog {
        fn new(epochs: &[(i32, i64)], end: i64) -> Self {
            FakeLog {
                epochs: epochs.to_vec(),
                end,
                hw: 0,
            }
        }

        /// Kafka's endOffsetFor over this log's epochs.
        fn end_for(&self, epoch: i32) -> Option<(i32, i64)> {
            let i = self.epochs.iter().rposition(|(e, _)| *e <= epoch)?;
            let end = self.epochs.get(i + 1).map_or(self.end, |(_, start)| *start);
            Some((self.epochs[i].0, end))
        }

        fn truncate(&mut self, offset: i64) {
            self.end = self.end.min(offset);
            self.epochs.retain(|(_, start)| *start < offset);
        }

        fn append(&mut self, epoch: i32, count: i64) {
            if self.epochs.last().is_none_or(|(e, _)| *e < epoch) {
                self.epochs.push((epoch, self.end));
            }
            self.end += count;
        }
    }

    impl LocalLog for &FakeLog {
        fn log_end_offset(&self) -> i64 {
            self.end
        }
        fn latest_epoch(&self) -> Option<i32> {
            self.epochs.last().map(|(e, _)| *e)
        }
        fn end_offset_for_epoch(&self, epoch: i32) -> Option<(i32, i64)> {
            self.end_for(epoch)
        }
        fn high_watermark(&self) -> i64 {
            self.hw
        }
    }

    fn position(log: &FakeLog) -> (i64, i32) {
        (log.end, log.epochs.last().map_or(-1, |(e, _)| *e))
    }

    /// A fake leader: answers a target as a Kafka leader would (diverging epoch check, then
    /// the batches after the fetch offset as one "record" per offset).
    fn leader_answer(leader: &FakeLog, t: &FetchTarget) -> FetchedPartition {
        if t.last_fetched_epoch >= 0 {
            match leader.end_for(t.last_fetched_epoch) {
                Some((e, end)) if e == t.last_fetched_epoch && end >= t.fetch_offset => {}
                Some((e, end)) => {
                    return FetchedPartition {
                        diverging: Some((e, end)),
                        high_watermark: leader.hw,
                        ..Default::default()
                    }
                }
                None => {
                    return FetchedPartition {
                        diverging: Some((-1, -1)),
                        high_watermark: leader.hw,
                        ..Default::default()
                    }
                }
            }
        }
        if t.fetch_offset > leader.end {
            return FetchedPartition {
                error_code: OFFSET_OUT_OF_RANGE,
                ..Default::default()
            };
        }
        let n = leader.end - t.fetch_offset;
        FetchedPartition {
            high_watermark: leader.hw,
            records: Bytes::from(vec![0u8; n as usize]),
            ..Default::default()
        }
    }

    /// Runs fetch rounds until the follower has the leader's log; returns the offsets it
    /// truncated to along the way.
    fn sync(follower: &mut FakeLog, leader: &FakeLog) -> Vec<i64> {
        let mut core: FetcherCore<()> = FetcherCore::new(100);
        core.add(("t".into(), 0), 9, ());
        let mut truncations = Vec::new();
        for round in 0..10 {
            let targets = core.targets(round, |_| position(follower));
            let (t, ()) = targets[0].clone();
            let answer = leader_answer(leader, &t);
            match core.on_response(&t, &answer, &&*follower, round).unwrap() {
                Outcome::Truncate(o) => {
                    truncations.push(o);
                    follower.truncate(o);
                }
                Outcome::Append { records, .. } => {
                    // The fake's records carry the leader's epochs for those offsets.
                    let from = follower.end;
                    for offset in from..from + records.len() as i64 {
                        let epoch = leader
                            .epochs
                            .iter()
                            .rev()
                            .find(|(_, s)| *s <= offset)
                            .unwrap()
                            .0;
                        follower.append(epoch, 1);
                    }
                }
                Outcome::HighWatermark(_) => return truncations,
                other => panic!("unexpected {other:?}"),
            }
        }
        panic!("did not converge")
    }

    #[test]
    fn a_follower_with_an_uncommitted_tail_of_the_old_leader_truncates_it() {
        // Old leader (epoch 1) wrote 0..10; the new leader (epoch 2) had only 0..8 and wrote 8..12.
        let mut follower = FakeLog::new(&[(0, 0), (1, 5)], 10);
        let leader = FakeLog::new(&[(0, 0), (1, 5), (2, 8)], 12);
        assert_eq!(sync(&mut follower, &leader), vec![8]);
        assert_eq!(follower.epochs, leader.epochs);
        assert_eq!(follower.end, 12);
    }

    #[test]
    fn a_follower_that_led_an_epoch_the_leader_never_had_truncates_where_they_part() {
        // The follower led epoch 2 briefly (offsets 6..9) without replicating it; the leader
        // went from epoch 1 straight to epoch 3 at offset 6.
        let mut follower = FakeLog::new(&[(0, 0), (1, 3), (2, 6)], 9);
        let leader = FakeLog::new(&[(0, 0), (1, 3), (3, 6)], 11);
        assert_eq!(sync(&mut follower, &leader), vec![6]);
        assert_eq!(follower.epochs, leader.epochs);
        assert_eq!(follower.end, 11);
    }

    #[test]
    fn a_follower_missing_the_leaders_epoch_truncates_in_two_steps() {
        // The follower never saw epoch 1: it truncates to the end of its epoch 0 first, then
        // the leader's answer for epoch 0 takes it back to where epoch 1 began.
        let mut follower = FakeLog::new(&[(0, 0), (2, 4)], 9);
        let leader = FakeLog::new(&[(0, 0), (1, 3), (3, 6)], 11);
        assert_eq!(sync(&mut follower, &leader), vec![4, 3]);
        assert_eq!(follower.epochs, leader.epochs);
        assert_eq!(follower.end, 11);
    }

    #[test]
    fn a_follower_behind_on_the_same_history_only_appends() {
        let mut follower = FakeLog::new(&[(0, 0), (1, 5)], 7);
        let leader = FakeLog::new(&[(0, 0), (1, 5), (2, 9)], 12);
        assert_eq!(sync(&mut follower, &leader), Vec::<i64>::new());
        assert_eq!(
            (follower.end, follower.epochs.clone()),
            (12, leader.epochs.clone())
        );
    }

    #[test]
    fn an_empty_follower_fetches_everything_and_an_unknown_epoch_truncates_to_the_hw() {
        let mut follower = FakeLog::new(&[], 0);
        let leader = FakeLog::new(&[(4, 0)], 3);
        assert_eq!(sync(&mut follower, &leader), Vec::<i64>::new());
        assert_eq!(follower.end, 3);
        // The leader has no epoch at or below the follower's: truncate to the high watermark.
        assert_eq!(truncation_offset(-1, -1, 10, 4, |_| None), 4);
    }

    #[test]
    fn errors_back_off_and_stale_responses_are_dropped() {
        let log = FakeLog::new(&[(0, 0)], 5);
        let mut core: FetcherCore<()> = FetcherCore::new(1_000);
        let tp: TopicPartition = ("t".into(), 0);
        core.add(tp.clone(), 3, ());
        let (t, ()) = core.targets(0, |_| position(&log))[0].clone();
        assert_eq!(
            (t.fetch_offset, t.last_fetched_epoch, t.current_leader_epoch),
            (5, 0, 3)
        );
        let fenced = FetchedPartition {
            error_code: 74,
            ..Default::default()
        };
        assert_eq!(
            core.on_response(&t, &fenced, &&log, 10),
            Some(Outcome::Backoff(74))
        );
        assert!(core.targets(500, |_| position(&log)).is_empty(), "delayed");
        assert_eq!(core.next_wakeup_ms(500), Some(1_010));
        assert_eq!(core.targets(1_010, |_| position(&log)).len(), 1);
        // Re-added in a new epoch while a request was out: its answer is dropped.
        core.add(tp.clone(), 4, ());
        let ok = FetchedPartition::default();
        assert_eq!(core.on_response(&t, &ok, &&log, 20), None);
        let out_of_range = FetchedPartition {
            error_code: OFFSET_OUT_OF_RANGE,
            ..Default::default()
        };
        let (t, ()) = core.targets(20, |_| position(&log))[0].clone();
        assert_eq!(t.current_leader_epoch, 4);
        assert_eq!(
            core.on_response(&t, &out_of_range, &&log, 20),
            Some(Outcome::ResetOffsets)
        );
        assert!(core.remove(&tp));
        assert_eq!(core.on_response(&t, &ok, &&log, 20), None);
    }
}
