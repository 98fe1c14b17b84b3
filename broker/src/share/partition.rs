//! One share-partition (KIP-932): the records a share group has in flight on one partition.
//! Records from the start offset (SPSO) up to the end offset (SPEO) each have a state:
//! available to be acquired, acquired by one member under a time lock, acknowledged, or
//! archived. Acquiring hands out whole batches' offsets; acknowledging settles them; the start
//! offset moves past every settled record at the front. Time comes in as `now_ms`.

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;

/// Kafka's acknowledge types (ShareFetch and ShareAcknowledge `AcknowledgeTypes`).
pub(crate) mod ack_type {
    /// The offset holds no record (compacted away, or a control record).
    pub(crate) const GAP: i8 = 0;
    /// Processed: never deliver again.
    #[cfg(test)]
    pub(crate) const ACCEPT: i8 = 1;
    /// Not processed: deliver again (to any member).
    pub(crate) const RELEASE: i8 = 2;
    /// Unprocessable: never deliver again.
    pub(crate) const REJECT: i8 = 3;
    /// Still being processed: the lock starts again (ShareFetch and ShareAcknowledge v2,
    /// KIP-1222).
    pub(crate) const RENEW: i8 = 4;
}

/// Limits of a share-partition (Kafka's `group.share.*` broker configs).
#[derive(Debug, Clone, Copy)]
pub struct ShareLimits {
    /// `group.share.record.lock.duration.ms`: how long an acquisition lasts.
    pub lock_duration_ms: i64,
    /// `group.share.delivery.count.limit`: deliveries before a record is archived.
    pub delivery_count_limit: i16,
    /// `group.share.partition.max.record.locks`: records in flight at most.
    pub max_in_flight: i64,
}

impl Default for ShareLimits {
    fn default() -> Self {
        ShareLimits {
            lock_duration_ms: 30_000,
            delivery_count_limit: 5,
            max_in_flight: 2_000,
        }
    }
}

/// Where one in-flight record is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum RecordState {
    Available,
    Acquired { member: String, deadline_ms: i64 },
    Settled,
}

#[derive(Debug, Clone)]
struct InFlight {
    state: RecordState,
    delivery_count: i16,
}

/// A batch the log returned, by its offsets: what acquisition needs of it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchSpan {
    /// First offset.
    pub(crate) base_offset: i64,
    /// Last offset.
    pub(crate) last_offset: i64,
    /// Never delivered: a transaction marker, or (read_committed) an aborted transaction's.
    pub(crate) control: bool,
}

/// Offsets handed to a member, as ShareFetch's AcquiredRecords.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AcquiredRange {
    /// First offset.
    pub(crate) first_offset: i64,
    /// Last offset.
    pub(crate) last_offset: i64,
    /// How many times these records have been delivered, this time included.
    pub(crate) delivery_count: i16,
}

/// One share-partition's in-flight records.
#[derive(Debug, Clone)]
pub(crate) struct SharePartition {
    start: i64,
    end: i64,
    in_flight: BTreeMap<i64, InFlight>,
}

impl SharePartition {
    /// A share-partition whose next record to deliver is `start`.
    pub(crate) fn new(start: i64) -> Self {
        SharePartition {
            start,
            end: start,
            in_flight: BTreeMap::new(),
        }
    }

    /// The start offset (SPSO): every record before it is settled.
    pub(crate) fn start(&self) -> i64 {
        self.start
    }

    /// The end offset (SPEO): the first offset never acquired.
    #[cfg(test)]
    pub(crate) fn end(&self) -> i64 {
        self.end
    }

    /// Where the next read of the log should start: the first available record, or the end.
    /// None when nothing can be acquired (every in-flight record is taken and the in-flight
    /// limit is reached).
    pub(crate) fn next_fetch_offset(&self, limits: &ShareLimits) -> Option<i64> {
        let available = self
            .in_flight
            .iter()
            .find(|(_, r)| r.state == RecordState::Available)
            .map(|(o, _)| *o);
        available.or_else(|| (self.end - self.start < limits.max_in_flight).then_some(self.end))
    }

    /// The log no longer holds records before `log_start` (retention, DeleteRecords): they
    /// can no longer be delivered.
    pub(crate) fn skip_to(&mut self, log_start: i64) {
        if log_start <= self.start {
            return;
        }
        self.in_flight = self.in_flight.split_off(&log_start);
        self.start = log_start;
        self.end = self.end.max(log_start);
        self.advance();
    }

    /// Acquires for `member` the deliverable records of `batches` (as read from the log from
    /// [`Self::next_fetch_offset`]), whole batches at a time until `max_records` are taken, or
    /// with `record_limit` (ShareFetch v2's record-limit mode, KIP-1206) exactly `max_records`,
    /// stopping inside a batch. Returns the acquired ranges and how many of `batches` they span
    /// (the rest is not sent).
    pub(crate) fn acquire(
        &mut self,
        member: &str,
        batches: &[BatchSpan],
        (max_records, record_limit): (i64, bool),
        limits: &ShareLimits,
        now_ms: i64,
    ) -> (Vec<AcquiredRange>, usize) {
        let deadline_ms = now_ms + limits.lock_duration_ms;
        let mut acquired: Vec<(i64, i16)> = Vec::new();
        let mut used = 0;
        for (i, batch) in batches.iter().enumerate() {
            if acquired.len() as i64 >= max_records.max(1) {
                break;
            }
            let before = acquired.len();
            for offset in batch.base_offset.max(self.start)..=batch.last_offset {
                if record_limit && acquired.len() as i64 >= max_records.max(1) {
                    break;
                }
                if offset >= self.end {
                    if self.end - self.start >= limits.max_in_flight {
                        break;
                    }
                    // Offsets the log skipped (compaction) are settled as they are passed.
                    for gap in self.end..offset {
                        self.in_flight.insert(gap, settled());
                    }
                    self.end = offset + 1;
                    self.in_flight.insert(
                        offset,
                        if batch.control {
                            settled()
                        } else {
                            InFlight {
                                state: RecordState::Available,
                                delivery_count: 0,
                            }
                        },
                    );
                }
                let Some(r) = self.in_flight.get_mut(&offset) else {
                    continue;
                };
                if r.state == RecordState::Available && !batch.control {
                    r.delivery_count += 1;
                    r.state = RecordState::Acquired {
                        member: member.to_string(),
                        deadline_ms,
                    };
                    acquired.push((offset, r.delivery_count));
                }
            }
            if acquired.len() > before {
                used = i + 1;
            }
        }
        self.advance();
        (ranges(&acquired), used)
    }

    /// Settles `member`'s acquired records from `first` to `last` with `types` (one type for
    /// the whole range, or one per offset); a renewal instead starts their locks again, for
    /// the full lock duration from `now_ms`. Nothing changes unless every offset is acquired by
    /// `member`: INVALID_RECORD_STATE otherwise, as Kafka answers.
    pub(crate) fn acknowledge(
        &mut self,
        member: &str,
        (first, last): (i64, i64),
        types: &[i8],
        limits: &ShareLimits,
        now_ms: i64,
    ) -> Result<(), ResponseError> {
        let count = last - first + 1;
        if count <= 0 || !(types.len() == 1 || types.len() as i64 == count) {
            return Err(ResponseError::InvalidRequest);
        }
        if types
            .iter()
            .any(|t| !(ack_type::GAP..=ack_type::RENEW).contains(t))
        {
            return Err(ResponseError::InvalidRequest);
        }
        // Offsets before the start offset are settled already: skipped, as Kafka skips them.
        let from = first.max(self.start);
        for offset in from..=last {
            match self.in_flight.get(&offset).map(|r| &r.state) {
                Some(RecordState::Acquired { member: m, .. }) if m == member => {}
                _ => return Err(ResponseError::InvalidRecordState),
            }
        }
        for offset in from..=last {
            let kind = if types.len() == 1 {
                types[0]
            } else {
                types[(offset - first) as usize]
            };
            if let Some(r) = self.in_flight.get_mut(&offset) {
                r.state = match kind {
                    ack_type::RELEASE => redelivery(r.delivery_count, limits),
                    ack_type::RENEW => RecordState::Acquired {
                        member: member.to_string(),
                        deadline_ms: now_ms + limits.lock_duration_ms,
                    },
                    _ => RecordState::Settled,
                };
            }
        }
        self.advance();
        Ok(())
    }

    /// Makes every record acquired by `member` available again (its session closed).
    pub(crate) fn release_member(&mut self, member: &str, limits: &ShareLimits) {
        for r in self.in_flight.values_mut() {
            if matches!(&r.state, RecordState::Acquired { member: m, .. } if m == member) {
                r.state = redelivery(r.delivery_count, limits);
            }
        }
        self.advance();
    }

    /// Makes records whose lock ran out available again; true when any did.
    pub(crate) fn expire_locks(&mut self, limits: &ShareLimits, now_ms: i64) -> bool {
        let mut any = false;
        for r in self.in_flight.values_mut() {
            if matches!(r.state, RecordState::Acquired { deadline_ms, .. } if deadline_ms <= now_ms)
            {
                r.state = redelivery(r.delivery_count, limits);
                any = true;
            }
        }
        if any {
            self.advance();
        }
        any
    }

    /// Moves the start offset past the settled records at the front.
    fn advance(&mut self) {
        while let Some(entry) = self.in_flight.first_entry() {
            if entry.get().state != RecordState::Settled {
                break;
            }
            self.start = *entry.key() + 1;
            entry.remove();
        }
        if self.in_flight.is_empty() {
            self.start = self.end;
        }
    }

    /// Records acquired now, by any member.
    #[cfg(test)]
    pub(crate) fn acquired_count(&self) -> usize {
        self.in_flight
            .values()
            .filter(|r| matches!(r.state, RecordState::Acquired { .. }))
            .count()
    }
}

fn settled() -> InFlight {
    InFlight {
        state: RecordState::Settled,
        delivery_count: 0,
    }
}

/// A released record is delivered again, unless it has been delivered as often as allowed.
fn redelivery(delivery_count: i16, limits: &ShareLimits) -> RecordState {
    if delivery_count >= limits.delivery_count_limit {
        RecordState::Settled
    } else {
        RecordState::Available
    }
}

/// Consecutive offsets of the same delivery count, as ranges.
fn ranges(acquired: &[(i64, i16)]) -> Vec<AcquiredRange> {
    let mut out: Vec<AcquiredRange> = Vec::new();
    for &(offset, count) in acquired {
        match out.last_mut() {
            Some(r) if r.last_offset + 1 == offset && r.delivery_count == count => {
                r.last_offset = offset
            }
            _ => out.push(AcquiredRange {
                first_offset: offset,
                last_offset: offset,
                delivery_count: count,
            }),
        }
    }
    out
}

#[cfg(test)]
#[path = "partition_tests.rs"]
mod tests;
