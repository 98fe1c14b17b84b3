//! What the log cleaner needs to know about transactions as it walks a log in offset order
//! (Kafka's `CleanedTransactionMetadata`): whether a transactional batch belongs to an aborted
//! transaction (its records go), and whether a transaction marker may go (no batch of its
//! transaction is left to need it).

use std::collections::{HashMap, HashSet, VecDeque};

use tern_protocol::record_batch::RecordBatchHeader;

use crate::record::control_marker;
use crate::txn_index::AbortedTxn;

/// An aborted transaction met so far, and whether any of its batches were seen in this walk.
struct OngoingAbort {
    txn: AbortedTxn,
    batches_seen: bool,
}

/// Transaction state of one walk over a log, fed every batch in offset order.
pub(crate) struct TxnWalk {
    /// Aborted transactions not reached yet, by first offset.
    pending: VecDeque<AbortedTxn>,
    /// Aborted transactions begun and not yet ended by their marker, by producer.
    aborting: HashMap<i64, OngoingAbort>,
    /// Producers whose committed (or open) transaction had a batch in this walk.
    committing: HashSet<i64>,
}

/// What to do with a transaction marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MarkerFate {
    /// A batch of its transaction was seen: the marker stays. For an abort marker, the
    /// aborted transaction it ends stays in the transaction index.
    Needed(Option<AbortedTxn>),
    /// No batch of its transaction is left: the marker may go once its delete horizon passes.
    Unneeded,
}

impl TxnWalk {
    /// A walk that knows the aborted transactions overlapping the part of the log it covers.
    pub(crate) fn new(mut aborted: Vec<AbortedTxn>) -> TxnWalk {
        aborted.sort_by_key(|t| t.first_offset);
        TxnWalk {
            pending: aborted.into(),
            aborting: HashMap::new(),
            committing: HashSet::new(),
        }
    }

    /// Aborted transactions that have begun by `offset` become ongoing; one whose marker lies
    /// before `offset` (its marker is gone) stops counting, so that the producer's later
    /// transactions are not taken for aborted.
    fn reach(&mut self, offset: i64) {
        self.aborting.retain(|_, a| a.txn.last_offset >= offset);
        while self
            .pending
            .front()
            .is_some_and(|t| t.first_offset <= offset)
        {
            let Some(txn) = self.pending.pop_front() else {
                break;
            };
            if txn.last_offset >= offset {
                self.aborting
                    .entry(txn.producer_id)
                    .or_insert(OngoingAbort {
                        txn,
                        batches_seen: false,
                    });
            }
        }
    }

    /// A data batch: true when it belongs to an aborted transaction (its records go).
    pub(crate) fn is_aborted(&mut self, h: &RecordBatchHeader) -> bool {
        self.reach(h.last_offset());
        if !h.is_transactional() {
            return false;
        }
        match self.aborting.get_mut(&h.producer_id) {
            Some(abort) => {
                abort.batches_seen = true;
                true
            }
            None => {
                self.committing.insert(h.producer_id);
                false
            }
        }
    }

    /// A control batch: whether its marker is still needed. A marker that does not read as
    /// one (empty, or an unknown type) is kept.
    pub(crate) fn marker(&mut self, h: &RecordBatchHeader, batch: &[u8]) -> MarkerFate {
        self.reach(h.last_offset());
        let Some((commit, _)) = control_marker(batch) else {
            return MarkerFate::Needed(None);
        };
        if commit {
            if self.committing.remove(&h.producer_id) {
                return MarkerFate::Needed(None);
            }
            return MarkerFate::Unneeded;
        }
        match self.aborting.remove(&h.producer_id) {
            Some(abort) if abort.batches_seen => MarkerFate::Needed(Some(abort.txn)),
            _ => MarkerFate::Unneeded,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{build_batch, build_control_batch, BatchSpec};
    use tern_protocol::record_batch::validate_batch;

    fn txn_spec(pid: i64, offset: i64) -> BatchSpec {
        BatchSpec {
            base_offset: offset,
            ..BatchSpec::transactional(pid, 0, 0)
        }
    }

    fn data(pid: i64, offset: i64) -> (RecordBatchHeader, Vec<u8>) {
        let b = build_batch(&txn_spec(pid, offset), &[(Some(b"k"), Some(b"v"))]);
        (validate_batch(&b).unwrap(), b.to_vec())
    }

    fn marker(pid: i64, offset: i64, commit: bool) -> (RecordBatchHeader, Vec<u8>) {
        let b = build_control_batch(&txn_spec(pid, offset), commit);
        (validate_batch(&b).unwrap(), b.to_vec())
    }

    #[test]
    fn aborted_batches_are_told_apart_and_their_marker_kept_while_they_exist() {
        let abort = AbortedTxn {
            producer_id: 7,
            first_offset: 1,
            last_offset: 3,
            last_stable_offset: 4,
        };
        let mut walk = TxnWalk::new(vec![abort]);
        let (h, _) = data(9, 0);
        assert!(!walk.is_aborted(&h), "producer 9 commits");
        let (h, _) = data(7, 1);
        assert!(walk.is_aborted(&h));
        let (h, b) = marker(9, 2, true);
        assert_eq!(walk.marker(&h, &b), MarkerFate::Needed(None));
        let (h, b) = marker(7, 3, false);
        assert_eq!(walk.marker(&h, &b), MarkerFate::Needed(Some(abort)));
        // The next walk finds the aborted batch gone: the marker is not needed any more.
        let mut walk = TxnWalk::new(vec![abort]);
        assert_eq!(walk.marker(&h, &b), MarkerFate::Unneeded);
        let (h, b) = marker(9, 2, true);
        assert_eq!(walk.marker(&h, &b), MarkerFate::Unneeded);
    }

    #[test]
    fn plain_batches_are_never_aborted() {
        let mut walk = TxnWalk::new(vec![AbortedTxn {
            producer_id: 7,
            first_offset: 0,
            last_offset: 5,
            last_stable_offset: 6,
        }]);
        let b = build_batch(
            &BatchSpec {
                producer_id: 7,
                ..BatchSpec::default()
            },
            &[(Some(b"k"), Some(b"v"))],
        );
        assert!(!walk.is_aborted(&validate_batch(&b).unwrap()));
    }
}
