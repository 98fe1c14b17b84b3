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

    /// A change under way (markers being written, a fence, an expiry): requests that would
    /// start or end a transaction answer CONCURRENT_TRANSACTIONS and are retried.
    pub fn is_changing(self) -> bool {
        matches!(
            self,
            TxnState::PrepareCommit
                | TxnState::PrepareAbort
                | TxnState::PrepareEpochFence
                | TxnState::Dead
        )
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
    /// The producer id a prepared transaction version 2 commit or abort hands over once
    /// complete, because the epoch is used up (-1: none); Kafka's NextProducerId.
    pub next_producer_id: i64,
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
    /// The transaction version of the open (or last) transaction: 2 for KIP-890's epoch bump
    /// per transaction, below 2 for the protocol before it. Partition leaders get it with the
    /// markers.
    pub txn_version: i8,
}

/// Transaction version 2 (KIP-890 part 2): every transaction ends with a new producer epoch,
/// and partitions join a transaction through the producer's writes.
pub(crate) const TXN_VERSION_2: i8 = 2;

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
            next_producer_id: -1,
            producer_epoch: 0,
            last_producer_epoch: -1,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            last_update_ms: now,
            txn_version: 0,
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
        // The coordinator, not the client, ends this transaction: with the cluster's
        // transaction version, as Kafka's fences do.
        self.txn_version = TXN_VERSION_2;
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

    /// AddPartitionsToTxn (and AddOffsetsToTxn's offsets partition, and the partitions a
    /// transaction version 2 producer writes to): true if the metadata changed and must be
    /// persisted. `txn_version` is that of the request. A commit or abort still being written
    /// answers CONCURRENT_TRANSACTIONS before the producer is looked at, as in Kafka: a
    /// version 2 producer may already hold the epoch (or producer id) that follows it.
    pub fn add_partitions(
        &mut self,
        producer: (i64, i16),
        partitions: &[(String, i32)],
        txn_version: i8,
        now: i64,
    ) -> Result<bool, ResponseError> {
        if self.state.is_changing() {
            return Err(ResponseError::ConcurrentTransactions);
        }
        self.check_producer(producer.0, producer.1)?;
        if self.state == TxnState::Ongoing {
            let before = self.partitions.len();
            self.partitions.extend(partitions.iter().cloned());
            let added = self.partitions.len() != before;
            if added {
                self.last_update_ms = now;
            }
            return Ok(added);
        }
        self.partitions = partitions.iter().cloned().collect();
        self.state = TxnState::Ongoing;
        self.txn_version = txn_version;
        self.start_ms = now;
        self.last_update_ms = now;
        Ok(true)
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
                // The version is the EndTxn's, as Kafka takes it: the markers keep the epoch.
                self.txn_version = 0;
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

    /// EndTxn v5 (transaction version 2), as Kafka's coordinator answers it: the commit or
    /// abort is prepared with the next epoch, or with a new producer id (taken from
    /// `new_producer_id`) once the epoch is used up; an abort with no transaction open is
    /// prepared too, so that it still fences; a retry of an end already complete is answered
    /// with the producer id and epoch it handed out.
    pub fn end_v2(
        &mut self,
        producer: (i64, i16),
        commit: bool,
        now: i64,
        new_producer_id: impl FnOnce() -> Result<i64, ResponseError>,
    ) -> Result<EndOutcome, ResponseError> {
        let (producer_id, epoch) = producer;
        if self.state.is_changing() {
            // Its markers are being written.
            return Err(ResponseError::ConcurrentTransactions);
        }
        let retry_on_bump = self.producer_id == producer_id
            && i32::from(self.producer_epoch) == i32::from(epoch) + 1;
        let retry_on_overflow = self.last_producer_id == producer_id
            && epoch == i16::MAX - 1
            && self.producer_epoch == 0;
        let retry = retry_on_bump || retry_on_overflow;
        if producer_id != self.producer_id && !retry_on_overflow {
            return Err(ResponseError::InvalidProducerIdMapping);
        }
        let current = epoch == self.producer_epoch;
        let valid = match self.state {
            TxnState::Ongoing | TxnState::Empty => current,
            _ => retry || current,
        };
        if !valid {
            return Err(ResponseError::ProducerFenced);
        }
        match (self.state, commit) {
            (TxnState::Ongoing, _) => {}
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) if retry => {
                return Ok(EndOutcome::AlreadyComplete)
            }
            (TxnState::CompleteCommit, false) if retry => {
                return Err(ResponseError::InvalidTxnState)
            }
            // An abort with nothing open: prepared all the same, for the epoch bump.
            (TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort, false) => {
                self.partitions.clear();
                self.start_ms = now;
            }
            _ => return Err(ResponseError::InvalidTxnState),
        }
        if Self::epoch_exhausted(self.producer_epoch) {
            self.next_producer_id = new_producer_id()?;
        }
        self.last_producer_epoch = self.producer_epoch;
        // At the largest epoch (only a fence gets there) an abort keeps it, as in Kafka.
        self.producer_epoch = self.producer_epoch.saturating_add(1);
        self.state = if commit {
            TxnState::PrepareCommit
        } else {
            TxnState::PrepareAbort
        };
        self.txn_version = TXN_VERSION_2;
        self.last_update_ms = now;
        Ok(EndOutcome::Prepared)
    }

    /// The producer id and epoch a transaction version 2 producer continues with once the
    /// prepared (or completed) transaction is done.
    pub fn producer_after_end(&self) -> (i64, i16) {
        if self.next_producer_id >= 0 {
            (self.next_producer_id, 0)
        } else {
            (self.producer_id, self.producer_epoch)
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
        if self.next_producer_id >= 0 {
            // The markers went out with the used-up epoch; the producer goes on with the new id.
            (self.last_producer_id, self.producer_id) = (self.producer_id, self.next_producer_id);
            self.producer_epoch = 0;
            self.next_producer_id = -1;
        }
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
        m.add_partitions((7, 0), &[("a".into(), 0)], 0, 5).unwrap();
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
        m.add_partitions((7, 1), &[("a".into(), 0)], 0, 2).unwrap();
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
        m.add_partitions((7, 4), &[("a".into(), 0)], 0, 6).unwrap();
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
            m.add_partitions((8, 0), &[("a".into(), 1)], 0, 6),
            Err(ResponseError::InvalidProducerIdMapping)
        );
        assert_eq!(
            m.add_partitions((7, 1), &[("a".into(), 1)], 0, 6),
            Err(ResponseError::ProducerFenced)
        );
        assert_eq!(
            m.add_partitions((7, 0), &[("a".into(), 0)], 0, 6),
            Ok(false)
        );
        assert_eq!(m.add_partitions((7, 0), &[("a".into(), 1)], 0, 6), Ok(true));
        assert_eq!(m.start_ms, 5);
        m.end(7, 0, true, 7).unwrap();
        assert_eq!(
            m.add_partitions((7, 0), &[("b".into(), 0)], 0, 8),
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

    /// An open transaction version 2 transaction of producer 7 at `epoch`.
    fn ongoing_v2(epoch: i16) -> TxnMetadata {
        let mut m = TxnMetadata::new("t", 7, 60_000, 0);
        m.producer_epoch = epoch;
        m.add_partitions((7, epoch), &[("a".into(), 0)], TXN_VERSION_2, 5)
            .unwrap();
        m
    }

    #[test]
    fn a_version_2_end_prepares_with_the_next_epoch() {
        let mut m = ongoing_v2(3);
        assert_eq!(m.txn_version, TXN_VERSION_2);
        assert_eq!(
            m.end_v2((7, 3), true, 6, no_new_id),
            Ok(EndOutcome::Prepared)
        );
        assert_eq!(
            (m.state, m.producer_epoch, m.last_producer_epoch),
            (TxnState::PrepareCommit, 4, 3)
        );
        assert_eq!(m.producer_after_end(), (7, 4));
        // While its markers are written, any end or add waits.
        assert_eq!(
            m.end_v2((7, 3), true, 7, no_new_id),
            Err(ResponseError::ConcurrentTransactions)
        );
        assert_eq!(
            m.add_partitions((7, 4), &[("a".into(), 0)], TXN_VERSION_2, 7),
            Err(ResponseError::ConcurrentTransactions)
        );
        m.complete(8);
        assert_eq!((m.state, m.producer_epoch), (TxnState::CompleteCommit, 4));
        // The retry of the commit (the old epoch) is answered with the epoch handed out.
        assert_eq!(
            m.end_v2((7, 3), true, 9, no_new_id),
            Ok(EndOutcome::AlreadyComplete)
        );
        assert_eq!(m.producer_after_end(), (7, 4));
        // Its abort is not a retry; an epoch before that is fenced.
        assert_eq!(
            m.end_v2((7, 3), false, 9, no_new_id),
            Err(ResponseError::InvalidTxnState)
        );
        assert_eq!(
            m.end_v2((7, 2), true, 9, no_new_id),
            Err(ResponseError::ProducerFenced)
        );
        assert_eq!(
            m.end_v2((8, 4), true, 9, no_new_id),
            Err(ResponseError::InvalidProducerIdMapping)
        );
        // A commit with nothing open at the current epoch is no transaction to commit.
        assert_eq!(
            m.end_v2((7, 4), true, 9, no_new_id),
            Err(ResponseError::InvalidTxnState)
        );
        // The next transaction runs at the new epoch; the old one is fenced from it.
        assert_eq!(
            m.add_partitions((7, 3), &[("a".into(), 0)], TXN_VERSION_2, 10),
            Err(ResponseError::ProducerFenced)
        );
        assert_eq!(
            m.add_partitions((7, 4), &[("b".into(), 1)], TXN_VERSION_2, 10),
            Ok(true)
        );
        assert_eq!(
            m.end_v2((7, 4), false, 11, no_new_id),
            Ok(EndOutcome::Prepared)
        );
        assert_eq!((m.state, m.producer_epoch), (TxnState::PrepareAbort, 5));
    }

    #[test]
    fn a_version_1_end_of_a_transaction_its_leaders_added_keeps_the_epoch() {
        // Partitions added by leaders (Produce v12) but ended with EndTxn v4: the markers keep
        // the epoch, so they must not go out as version 2 ones.
        let mut m = ongoing_v2(3);
        assert_eq!(m.end(7, 3, true, 6), Ok(EndOutcome::Prepared));
        assert_eq!((m.producer_epoch, m.txn_version), (3, 0));
    }

    #[test]
    fn a_version_2_abort_with_nothing_open_still_bumps_the_epoch() {
        let mut m = TxnMetadata::new("t", 7, 60_000, 0);
        assert_eq!(
            m.end_v2((7, 0), true, 1, no_new_id),
            Err(ResponseError::InvalidTxnState)
        );
        assert_eq!(
            m.end_v2((7, 0), false, 1, no_new_id),
            Ok(EndOutcome::Prepared)
        );
        assert_eq!((m.state, m.producer_epoch), (TxnState::PrepareAbort, 1));
        assert!(m.partitions.is_empty());
        m.complete(2);
        assert_eq!(
            m.end_v2((7, 0), false, 3, no_new_id),
            Ok(EndOutcome::AlreadyComplete)
        );
        assert_eq!(
            m.end_v2((7, 1), false, 3, no_new_id),
            Ok(EndOutcome::Prepared)
        );
        assert_eq!(m.producer_epoch, 2);
    }

    #[test]
    fn a_version_2_end_at_a_used_up_epoch_hands_over_a_new_producer_id() {
        let mut m = ongoing_v2(i16::MAX - 1);
        assert_eq!(
            m.end_v2((7, i16::MAX - 1), true, 6, || Ok(99)),
            Ok(EndOutcome::Prepared)
        );
        // Markers go out with the old id at the last epoch; the producer is told the new id.
        assert_eq!(
            (m.producer_id, m.producer_epoch, m.next_producer_id),
            (7, i16::MAX, 99)
        );
        assert_eq!(m.producer_after_end(), (99, 0));
        m.complete(7);
        assert_eq!(
            (m.producer_id, m.producer_epoch, m.last_producer_id),
            (99, 0, 7)
        );
        assert_eq!(m.next_producer_id, -1);
        // The old producer's retry is answered with the new id.
        assert_eq!(
            m.end_v2((7, i16::MAX - 1), true, 8, no_new_id),
            Ok(EndOutcome::AlreadyComplete)
        );
        assert_eq!(m.producer_after_end(), (99, 0));
        assert_eq!(
            m.add_partitions((99, 0), &[("a".into(), 0)], TXN_VERSION_2, 9),
            Ok(true)
        );
    }
}
