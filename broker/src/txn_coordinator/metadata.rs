//! The state of one transactional id and its transitions, as Kafka's TransactionMetadata and
//! TransactionCoordinator define them. Pure: the coordinator persists what changes.

use std::collections::BTreeSet;

use kafka_protocol::ResponseError;

/// Where a transactional id's transaction stands (Kafka's TransactionState and its ids).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TxnState {
    /// No transaction open.
    Empty,
    /// Partitions were added; records may be written.
    Ongoing,
    /// EndTxn(commit) accepted; commit markers are being written.
    PrepareCommit,
    /// EndTxn(abort), a timeout or a fencing producer; abort markers are being written.
    PrepareAbort,
    /// Commit markers written everywhere.
    CompleteCommit,
    /// Abort markers written everywhere.
    CompleteAbort,
    /// Expired; about to be removed.
    Dead,
    /// The epoch is being bumped to fence a producer.
    PrepareEpochFence,
}

impl TxnState {
    /// Every state, in id order.
    pub const ALL: [TxnState; 8] = [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
        TxnState::Dead,
        TxnState::PrepareEpochFence,
    ];

    /// The id stored in `__transaction_state`.
    pub fn id(self) -> i8 {
        match self {
            TxnState::Empty => 0,
            TxnState::Ongoing => 1,
            TxnState::PrepareCommit => 2,
            TxnState::PrepareAbort => 3,
            TxnState::CompleteCommit => 4,
            TxnState::CompleteAbort => 5,
            TxnState::Dead => 6,
            TxnState::PrepareEpochFence => 7,
        }
    }

    /// The state of a stored id.
    pub fn from_id(id: i8) -> Option<Self> {
        Some(match id {
            0 => TxnState::Empty,
            1 => TxnState::Ongoing,
            2 => TxnState::PrepareCommit,
            3 => TxnState::PrepareAbort,
            4 => TxnState::CompleteCommit,
            5 => TxnState::CompleteAbort,
            6 => TxnState::Dead,
            7 => TxnState::PrepareEpochFence,
            _ => return None,
        })
    }

    /// The name DescribeTransactions and ListTransactions use.
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    /// Markers are being written (the transaction is decided but not complete).
    pub fn is_preparing(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }
}

/// One transactional id: its producer, epoch, timeout and open transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMetadata {
    /// The transactional id.
    pub transactional_id: String,
    /// Producer id in use.
    pub producer_id: i64,
    /// The producer id before an epoch overflow gave a new one (-1: none).
    pub last_producer_id: i64,
    /// Current epoch.
    pub producer_epoch: i16,
    /// The epoch before the last bump (-1: none); lets a retried InitProducerId through.
    pub last_producer_epoch: i16,
    /// `transaction.timeout.ms` of the producer.
    pub timeout_ms: i32,
    /// Where the transaction stands.
    pub state: TxnState,
    /// Partitions of the open transaction.
    pub partitions: BTreeSet<(String, i32)>,
    /// When the open transaction started (-1: none).
    pub start_ms: i64,
    /// When the metadata last changed.
    pub last_update_ms: i64,
}

/// What InitProducerId did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitOutcome {
    /// A new epoch (or producer id) to hand out; persist first.
    Bumped,
    /// A retried request: the current producer id and epoch, nothing to persist.
    Unchanged,
    /// An open transaction was fenced and is being aborted; persist, write abort markers, and
    /// answer CONCURRENT_TRANSACTIONS so the producer retries.
    FencedOngoing,
}

/// What EndTxn did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndOutcome {
    /// Prepared: persist, answer, then write markers.
    Prepared,
    /// A retry of an end already complete: answer without change.
    AlreadyComplete,
}

impl TxnMetadata {
    /// A new transactional id with epoch 0 and no transaction.
    pub fn new(transactional_id: &str, producer_id: i64, timeout_ms: i32, now: i64) -> Self {
        TxnMetadata {
            transactional_id: transactional_id.to_string(),
            producer_id,
            last_producer_id: -1,
            producer_epoch: 0,
            last_producer_epoch: -1,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            last_update_ms: now,
        }
    }

    /// The producer of a request is this id's current one (Kafka's errors otherwise).
    pub fn check_producer(&self, producer_id: i64, epoch: i16) -> Result<(), ResponseError> {
        if producer_id != self.producer_id {
            return Err(ResponseError::InvalidProducerIdMapping);
        }
        if epoch != self.producer_epoch {
            return Err(ResponseError::ProducerFenced);
        }
        Ok(())
    }

    /// Raises the epoch of the same producer id (a fence: markers of the open transaction keep
    /// its producer id; the fenced producer's epoch is forgotten). At the largest epoch the
    /// epoch stays, as in Kafka.
    fn fence_epoch(&mut self) {
        self.producer_epoch = self.producer_epoch.saturating_add(1);
        self.last_producer_epoch = -1;
    }

    /// Whether the epoch is used up: the next bump takes a new producer id.
    pub fn epoch_exhausted(epoch: i16) -> bool {
        epoch >= i16::MAX - 1
    }

    /// InitProducerId for this id, as Kafka's coordinator answers it: an open transaction is
    /// fenced (and must be aborted); otherwise the epoch is bumped, or a new producer id taken
    /// from `new_producer_id` once the epoch is exhausted. `expected` is the producer id and
    /// epoch a v3+ client says it has (KIP-360): a retry of the last bump is answered unchanged,
    /// any other epoch is fenced.
    pub fn init(
        &mut self,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
        now: i64,
        new_producer_id: impl FnOnce() -> Result<i64, ResponseError>,
    ) -> Result<InitOutcome, ResponseError> {
        if let Some((pid, epoch)) = expected {
            let valid = pid == self.producer_id
                || (pid == self.last_producer_id && Self::epoch_exhausted(epoch));
            if !valid {
                return Err(ResponseError::ProducerFenced);
            }
        }
        match self.state {
            TxnState::PrepareCommit
            | TxnState::PrepareAbort
            | TxnState::PrepareEpochFence
            | TxnState::Dead => Err(ResponseError::ConcurrentTransactions),
            TxnState::Ongoing => {
                self.fence_epoch();
                self.state = TxnState::PrepareAbort;
                self.last_update_ms = now;
                Ok(InitOutcome::FencedOngoing)
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                let expected_epoch = expected.map(|(_, e)| e);
                if Self::epoch_exhausted(self.producer_epoch)
                    && expected_epoch.is_none_or(|e| e == self.producer_epoch)
                {
                    let rotated_from = self.producer_epoch;
                    self.last_producer_id = self.producer_id;
                    self.producer_id = new_producer_id()?;
                    self.producer_epoch = 0;
                    // The old producer may retry with its exhausted epoch and get this id.
                    self.last_producer_epoch = if expected.is_some() { rotated_from } else { -1 };
                } else {
                    match expected_epoch {
                        None => {
                            self.producer_epoch += 1;
                            self.last_producer_epoch = -1;
                        }
                        Some(e) if e == self.producer_epoch => {
                            self.last_producer_epoch = self.producer_epoch;
                            self.producer_epoch += 1;
                        }
                        Some(e) if e == self.last_producer_epoch => {
                            return Ok(InitOutcome::Unchanged);
                        }
                        Some(_) => return Err(ResponseError::ProducerFenced),
                    }
                }
                self.timeout_ms = timeout_ms;
                self.state = TxnState::Empty;
                self.partitions.clear();
                self.start_ms = -1;
                self.last_update_ms = now;
                Ok(InitOutcome::Bumped)
            }
        }
    }

    /// AddPartitionsToTxn (and AddOffsetsToTxn's offsets partition): true if the metadata
    /// changed and must be persisted.
    pub fn add_partitions(
        &mut self,
        producer_id: i64,
        epoch: i16,
        partitions: &[(String, i32)],
        now: i64,
    ) -> Result<bool, ResponseError> {
        self.check_producer(producer_id, epoch)?;
        match self.state {
            TxnState::PrepareCommit
            | TxnState::PrepareAbort
            | TxnState::PrepareEpochFence
            | TxnState::Dead => Err(ResponseError::ConcurrentTransactions),
            TxnState::Ongoing => {
                let before = self.partitions.len();
                self.partitions.extend(partitions.iter().cloned());
                if self.partitions.len() != before {
                    self.last_update_ms = now;
                }
                Ok(self.partitions.len() != before)
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                self.partitions = partitions.iter().cloned().collect();
                self.state = TxnState::Ongoing;
                self.start_ms = now;
                self.last_update_ms = now;
                Ok(true)
            }
        }
    }

    /// EndTxn from the producer (Kafka's transaction version 1: the epoch stays).
    pub fn end(
        &mut self,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        now: i64,
    ) -> Result<EndOutcome, ResponseError> {
        self.check_producer(producer_id, epoch)?;
        match (self.state, commit) {
            (TxnState::Ongoing, _) => {
                self.state = if commit {
                    TxnState::PrepareCommit
                } else {
                    TxnState::PrepareAbort
                };
                self.last_update_ms = now;
                Ok(EndOutcome::Prepared)
            }
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => {
                Ok(EndOutcome::AlreadyComplete)
            }
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                Err(ResponseError::ConcurrentTransactions)
            }
            (TxnState::PrepareEpochFence, _) | (TxnState::Dead, _) => {
                Err(ResponseError::ConcurrentTransactions)
            }
            _ => Err(ResponseError::InvalidTxnState),
        }
    }

    /// The coordinator aborts a transaction open longer than its timeout: the epoch is bumped
    /// so the producer is fenced. True if it did.
    pub fn abort_if_timed_out(&mut self, now: i64) -> bool {
        if self.state != TxnState::Ongoing
            || now < self.start_ms.saturating_add(self.timeout_ms as i64)
        {
            return false;
        }
        self.fence_epoch();
        self.state = TxnState::PrepareAbort;
        self.last_update_ms = now;
        true
    }

    /// Every marker is written: the transaction is complete.
    pub fn complete(&mut self, now: i64) {
        self.state = match self.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            TxnState::PrepareAbort => TxnState::CompleteAbort,
            other => other,
        };
        self.partitions.clear();
        self.last_update_ms = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_new_id() -> Result<i64, ResponseError> {
        panic!("no new producer id expected")
    }

    fn ongoing() -> TxnMetadata {
        let mut m = TxnMetadata::new("t", 7, 60_000, 0);
        m.add_partitions(7, 0, &[("a".into(), 0)], 5).unwrap();
        m
    }

    #[test]
    fn init_bumps_the_epoch_and_fences_an_open_transaction() {
        let mut m = TxnMetadata::new("t", 7, 60_000, 0);
        assert_eq!(m.init(1000, None, 1, no_new_id), Ok(InitOutcome::Bumped));
        assert_eq!(
            (m.producer_id, m.producer_epoch, m.timeout_ms),
            (7, 1, 1000)
        );
        m.add_partitions(7, 1, &[("a".into(), 0)], 2).unwrap();
        assert_eq!(
            m.init(1000, None, 3, no_new_id),
            Ok(InitOutcome::FencedOngoing)
        );
        assert_eq!((m.state, m.producer_epoch), (TxnState::PrepareAbort, 2));
        assert_eq!(
            m.init(1000, None, 4, no_new_id),
            Err(ResponseError::ConcurrentTransactions)
        );
        m.complete(5);
        assert_eq!(m.state, TxnState::CompleteAbort);
        assert!(m.partitions.is_empty());
        assert_eq!(m.init(1000, None, 6, no_new_id), Ok(InitOutcome::Bumped));
        assert_eq!(m.producer_epoch, 3);
    }

    #[test]
    fn an_exhausted_epoch_takes_a_new_producer_id() {
        let mut m = TxnMetadata::new("t", 7, 60_000, 0);
        m.producer_epoch = i16::MAX - 1;
        assert_eq!(m.init(1000, None, 1, || Ok(99)), Ok(InitOutcome::Bumped));
        assert_eq!(
            (m.producer_id, m.producer_epoch, m.last_producer_id),
            (99, 0, 7)
        );
        // Rotated without an expected epoch: the old producer is fenced, as in Kafka.
        assert_eq!(
            m.init(1000, Some((7, i16::MAX - 1)), 2, no_new_id),
            Err(ResponseError::ProducerFenced)
        );
        // Rotated for a producer that named its epoch: its retry gets the new id unchanged.
        let mut m = TxnMetadata::new("t", 7, 60_000, 0);
        m.producer_epoch = i16::MAX - 1;
        assert_eq!(
            m.init(1000, Some((7, i16::MAX - 1)), 1, || Ok(99)),
            Ok(InitOutcome::Bumped)
        );
        assert_eq!(
            m.init(1000, Some((7, i16::MAX - 1)), 2, no_new_id),
            Ok(InitOutcome::Unchanged)
        );
        assert_eq!((m.producer_id, m.producer_epoch), (99, 0));
    }

    #[test]
    fn init_with_a_stale_producer_is_fenced_and_a_retry_is_answered_unchanged() {
        let mut m = TxnMetadata::new("t", 7, 60_000, 0);
        m.init(1000, None, 1, no_new_id).unwrap();
        m.init(1000, None, 2, no_new_id).unwrap();
        assert_eq!((m.producer_epoch, m.last_producer_epoch), (2, -1));
        // Without an expected epoch the epoch before is forgotten: a zombie naming it is fenced.
        assert_eq!(
            m.init(1000, Some((7, 1)), 3, no_new_id),
            Err(ResponseError::ProducerFenced)
        );
        assert_eq!(
            m.init(1000, Some((8, 2)), 3, no_new_id),
            Err(ResponseError::ProducerFenced)
        );
        // The current producer bumps its own epoch; a retry of that bump is answered unchanged.
        assert_eq!(
            m.init(1000, Some((7, 2)), 3, no_new_id),
            Ok(InitOutcome::Bumped)
        );
        assert_eq!((m.producer_epoch, m.last_producer_epoch), (3, 2));
        assert_eq!(
            m.init(1000, Some((7, 2)), 4, no_new_id),
            Ok(InitOutcome::Unchanged)
        );
        assert_eq!(
            m.init(1000, Some((7, 3)), 5, no_new_id),
            Ok(InitOutcome::Bumped)
        );
        assert_eq!(m.producer_epoch, 4);
        // A fence forgets the fenced epoch too.
        m.add_partitions(7, 4, &[("a".into(), 0)], 6).unwrap();
        assert_eq!(
            m.init(1000, None, 7, no_new_id),
            Ok(InitOutcome::FencedOngoing)
        );
        assert_eq!((m.producer_epoch, m.last_producer_epoch), (5, -1));
    }

    #[test]
    fn add_partitions_checks_the_producer_and_the_state() {
        let mut m = ongoing();
        assert_eq!(
            m.add_partitions(8, 0, &[("a".into(), 1)], 6),
            Err(ResponseError::InvalidProducerIdMapping)
        );
        assert_eq!(
            m.add_partitions(7, 1, &[("a".into(), 1)], 6),
            Err(ResponseError::ProducerFenced)
        );
        assert_eq!(m.add_partitions(7, 0, &[("a".into(), 0)], 6), Ok(false));
        assert_eq!(m.add_partitions(7, 0, &[("a".into(), 1)], 6), Ok(true));
        assert_eq!(m.start_ms, 5);
        m.end(7, 0, true, 7).unwrap();
        assert_eq!(
            m.add_partitions(7, 0, &[("b".into(), 0)], 8),
            Err(ResponseError::ConcurrentTransactions)
        );
    }

    #[test]
    fn end_follows_kafkas_table() {
        let mut m = TxnMetadata::new("t", 7, 60_000, 0);
        assert_eq!(m.end(7, 0, true, 1), Err(ResponseError::InvalidTxnState));
        let mut m = ongoing();
        assert_eq!(m.end(7, 0, true, 6), Ok(EndOutcome::Prepared));
        assert_eq!(m.state, TxnState::PrepareCommit);
        assert_eq!(
            m.end(7, 0, true, 7),
            Err(ResponseError::ConcurrentTransactions)
        );
        assert_eq!(m.end(7, 0, false, 7), Err(ResponseError::InvalidTxnState));
        m.complete(8);
        assert_eq!(m.end(7, 0, true, 9), Ok(EndOutcome::AlreadyComplete));
        assert_eq!(m.end(7, 0, false, 9), Err(ResponseError::InvalidTxnState));
        let mut m = ongoing();
        m.end(7, 0, false, 6).unwrap();
        m.complete(7);
        assert_eq!(m.end(7, 0, false, 9), Ok(EndOutcome::AlreadyComplete));
        assert_eq!(m.end(7, 0, true, 9), Err(ResponseError::InvalidTxnState));
    }

    #[test]
    fn a_timed_out_transaction_is_aborted_and_its_producer_fenced() {
        let mut m = ongoing();
        assert!(!m.abort_if_timed_out(5 + 59_999));
        assert!(m.abort_if_timed_out(5 + 60_000));
        assert_eq!((m.state, m.producer_epoch), (TxnState::PrepareAbort, 1));
        assert_eq!(
            m.end(7, 0, false, 60_010),
            Err(ResponseError::ProducerFenced)
        );
        assert!(!m.abort_if_timed_out(200_000));
    }

    #[test]
    fn states_round_trip_their_ids() {
        for id in 0..8 {
            assert_eq!(TxnState::from_id(id).map(|s| s.id()), Some(id));
        }
        assert_eq!(TxnState::from_id(8), None);
    }
}
