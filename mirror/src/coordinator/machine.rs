//! The mirror partition state machine, without I/O: it takes what the topic's `mirror.name`
//! asks for, the state its coordinator holds, what the broker observes (the local log, whether
//! a fetcher has the partition, whether the source can be reached), fetcher events and the
//! time, and answers with one action at a time. The driver (`manager/`) carries the action out
//! and reports its outcome; nothing here waits, locks or touches a socket, so a seeded
//! simulation can drive it (`simulation.rs`).
//!
//! The spec's lifecycle: UNKNOWN / STOPPED / FAILED -> PREPARING (failback: truncate the local
//! log to the offset the other side last mirrored) -> MIRRORING <-> PAUSED; any of them ->
//! STOPPING (fetcher removed, producer ids reserved, epoch raised) -> STOPPED with the last
//! mirrored offset. Failures enter FAILED and are retried with exponential backoff.

use std::time::{Duration, Instant};

use crate::state::{MirrorPartitionState, PartitionStateRecord};

/// What a topic's `mirror.name` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DesiredState {
    /// `M`: mirror it.
    Mirroring,
    /// `M.paused`: keep it read-only, do not fetch.
    Paused,
    /// `M.removed`: fail over (read-only until every partition is STOPPED); `M.stopped`:
    /// failed over, writable.
    Stopped,
}

/// A partition's state as its coordinator holds it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct StoredState {
    /// The state record (None: UNKNOWN, nothing recorded).
    pub record: Option<PartitionStateRecord>,
    /// The offset recorded when it was last stopped.
    pub last_mirrored_offset: Option<i64>,
}

impl StoredState {
    /// The state (UNKNOWN when none is recorded).
    pub(crate) fn state(&self) -> MirrorPartitionState {
        self.record
            .as_ref()
            .map(|r| r.state)
            .unwrap_or(MirrorPartitionState::Unknown)
    }
}

/// How FAILED partitions are retried.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RetryPolicy {
    /// Retries before a partition stays FAILED (0: never retry).
    pub max_attempts: i16,
    /// The first backoff.
    pub initial_backoff: Duration,
    /// The largest backoff.
    pub max_backoff: Duration,
}

/// The local log's span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LocalLog {
    /// Log start offset.
    pub start: i64,
    /// Log end offset.
    pub end: i64,
}

/// What the broker observes of the partition when the machine is asked.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Observed {
    /// The local log, if this broker still leads the partition.
    pub log: Option<LocalLog>,
    /// Whether a mirror fetcher has the partition.
    pub fetching: bool,
    /// Whether source actions may be asked for (the mirror's own task asks; the coordinator's
    /// loop, which must never wait on a source, does not).
    pub source: bool,
}

/// One thing for the driver to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    /// Write this state to the partition's coordinator (and, once it is acknowledged, take it
    /// as the stored state). Outcome: `Done` or `Failed`.
    Persist {
        /// The new record.
        record: PartitionStateRecord,
        /// The last mirrored offset to record with it.
        last_mirrored_offset: Option<i64>,
    },
    /// Take the partition away from the mirror fetchers. Outcome: `Done`.
    StopFetching,
    /// Ask the source for the offset it last mirrored of this partition (failback).
    /// Outcome: `RemoteOffset`, or `Failed` when the source cannot be reached.
    AskRemoteOffset,
    /// Truncate the local log to this offset (restart it there if it is at or below the log
    /// start). Outcome: `Done` or `Failed`.
    Truncate {
        /// The new log end.
        to: i64,
    },
    /// See whether every in-sync follower has truncated to `offset` too (fetched there since),
    /// so none keeps what the truncation removed once the delta is fetched on top. Outcome:
    /// `Done` when they have, `Skipped` when not yet.
    AwaitFollowers {
        /// Where the local log was truncated to.
        offset: i64,
    },
    /// Hand the partition to the fetcher of its source leader, from the local log end.
    /// Outcome: `Done`, `Failed` (source metadata), or `Skipped` (nothing to do any more).
    Assign {
        /// Whether the source's metadata must be looked up afresh.
        refresh_metadata: bool,
    },
    /// Before STOPPED: reserve producer ids above the mirrored ones and raise the leader epoch
    /// above the mirrored batches'. Outcome: `Stopped` or `Failed`.
    PrepareStop,
}

/// What the source said of the offset it last mirrored (failback).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RemoteOffset {
    /// The other side stopped mirroring the topic at this offset.
    At(i64),
    /// The other side knows nothing of it (never mirrored it, or not a Tern).
    Unknown,
    /// The other side still mirrors the topic (MIRROR_TOPIC_NOT_STOPPED).
    StillMirrored,
}

/// How an action went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Done.
    Done,
    /// Nothing was done, and nothing needs to be.
    Skipped,
    /// It failed, for this reason.
    Failed(String),
    /// The answer to `AskRemoteOffset`.
    RemoteOffset(RemoteOffset),
    /// `PrepareStop` is done; the local log ends here.
    Stopped {
        /// The last mirrored offset.
        last_mirrored_offset: i64,
    },
}

/// Wait before looking up a moved source leader again (Kafka's replica.fetch.backoff.ms).
pub(crate) const LEADER_LOOKUP_BACKOFF: Duration = Duration::from_millis(200);
/// Wait before retrying a step that failed without the partition entering FAILED.
pub(crate) const STEP_RETRY: Duration = Duration::from_millis(500);
/// Wait before looking at the followers of a truncated partition again.
pub(crate) const FOLLOWERS_POLL: Duration = Duration::from_millis(100);

/// Progress of a PREPARING partition, kept in memory: a restart redoes the step.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PrepareProgress {
    /// The remote offset, once asked.
    remote: Option<RemoteOffset>,
    /// The offset the local log was truncated to, once it was.
    truncated_to: Option<i64>,
    /// Whether every in-sync follower has truncated there too.
    followers_aligned: bool,
}

/// One mirror partition led by this broker.
#[derive(Debug, Clone)]
pub(crate) struct PartitionMachine {
    stored: StoredState,
    policy: RetryPolicy,
    /// The last action handed out, until its outcome is reported.
    awaiting: Option<Action>,
    /// A state to persist that events asked for (a failure, or retries reset).
    pending: Option<PartitionStateRecord>,
    preparing: Option<PrepareProgress>,
    /// When a FAILED partition may be retried, or a moved leader looked up again.
    next_retry: Option<Instant>,
    /// No action before this instant (a step failed without entering FAILED).
    hold_until: Option<Instant>,
    /// Set by a finished `PrepareStop`: STOPPED is persisted next, with this offset.
    stopped_at: Option<i64>,
    /// Just resumed from PAUSED: the cached source metadata is good enough to assign.
    resumed: bool,
    last_error: Option<String>,
    /// Set when a persist failed: the stored state is no longer known.
    stale: bool,
    jitter: u64,
}

impl PartitionMachine {
    /// A machine for a partition whose coordinator holds `stored`; `jitter_seed` spreads the
    /// retries of many partitions.
    pub(crate) fn new(stored: StoredState, policy: RetryPolicy, jitter_seed: u64) -> Self {
        PartitionMachine {
            stored,
            policy,
            awaiting: None,
            pending: None,
            preparing: None,
            next_retry: None,
            hold_until: None,
            stopped_at: None,
            resumed: false,
            last_error: None,
            stale: false,
            jitter: jitter_seed | 1,
        }
    }

    /// The state as the coordinator holds it.
    pub(crate) fn stored(&self) -> &StoredState {
        &self.stored
    }

    /// The current state.
    pub(crate) fn state(&self) -> MirrorPartitionState {
        self.stored.state()
    }

    /// The last error seen (kept while the partition recovers).
    pub(crate) fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    /// Whether a write to the coordinator failed: the machine must be dropped and the state
    /// read from the coordinator again.
    pub(crate) fn is_stale(&self) -> bool {
        self.stale
    }

    /// The next action, if any. Call [`PartitionMachine::on_outcome`] with how it went before
    /// asking again.
    pub(crate) fn poll(
        &mut self,
        now: Instant,
        desired: DesiredState,
        seen: Observed,
    ) -> Option<Action> {
        use MirrorPartitionState::*;
        if self.stale || self.awaiting.is_some() || seen.log.is_none() {
            return None;
        }
        if self.hold_until.is_some_and(|t| now < t) {
            return None;
        }
        let cur = self.state();
        let action = match desired {
            DesiredState::Stopped | DesiredState::Paused if seen.fetching => {
                Some(Action::StopFetching)
            }
            DesiredState::Stopped => {
                self.pending = None;
                match cur {
                    Stopped => None,
                    Stopping => Some(self.stop_step()),
                    _ => Some(self.transition(Stopping, None)),
                }
            }
            DesiredState::Paused => {
                self.pending = None;
                match cur {
                    // Nothing recorded yet: nothing is fetched, and PAUSED is entered only
                    // from a recorded state.
                    Unknown | Paused | Stopping | Stopped => None,
                    // Its log may still hold what this cluster wrote after a failover, and a
                    // resumed PAUSED partition fetches at once: it pauses where it stands (it
                    // fetches nothing there either) until it is aligned.
                    _ if self.alignment_pending() => None,
                    _ => Some(self.transition(Paused, None)),
                }
            }
            DesiredState::Mirroring => {
                if let Some(record) = self.pending.clone() {
                    Some(Action::Persist {
                        record,
                        last_mirrored_offset: None,
                    })
                } else {
                    self.mirroring_step(now, cur, seen)
                }
            }
        };
        self.awaiting = action.clone();
        action
    }

    /// The next step towards MIRRORING.
    fn mirroring_step(
        &mut self,
        now: Instant,
        cur: MirrorPartitionState,
        seen: Observed,
    ) -> Option<Action> {
        use MirrorPartitionState::*;
        let waiting = self.next_retry.is_some_and(|t| now < t);
        match cur {
            // A failover in progress finishes first: STOPPING never goes back.
            Stopping => Some(self.stop_step()),
            Unknown | Stopped => Some(self.enter_preparing(cur)),
            Failed => {
                let retryable = self
                    .stored
                    .record
                    .as_ref()
                    .is_some_and(|r| r.retry_attempt >= 0);
                if !retryable || waiting {
                    return None;
                }
                // FAILED while aligning the log: the alignment did not happen, redo it.
                let from = match self.stored.record.as_ref().map(|r| r.previous_state) {
                    Some(Preparing) => Unknown,
                    _ => Failed,
                };
                Some(self.enter_preparing(from))
            }
            Preparing if seen.source => self.preparing_step(seen),
            Paused => Some(self.transition(Mirroring, None)),
            Mirroring if seen.source && !seen.fetching && !waiting => Some(Action::Assign {
                refresh_metadata: !self.resumed,
            }),
            _ => None,
        }
    }

    /// Whether the local log may hold records that are not the source's, so PREPARING must
    /// align it before the partition fetches: it is preparing, or failed while preparing.
    fn alignment_pending(&self) -> bool {
        use MirrorPartitionState::*;
        self.stored.record.as_ref().is_some_and(|r| {
            r.state == Preparing || (r.state == Failed && r.previous_state == Preparing)
        })
    }

    /// STOPPING: prepare the stop, then persist STOPPED with the offset mirroring ended at:
    /// the log end, unless the partition was stopped before and may not have been aligned
    /// since (it stops from a state other than MIRRORING), when what it wrote after that
    /// failover may still be there: then no more than the earlier last mirrored offset.
    fn stop_step(&self) -> Action {
        let Some(end) = self.stopped_at else {
            return Action::PrepareStop;
        };
        let from_mirroring = self
            .stored
            .record
            .as_ref()
            .is_some_and(|r| r.previous_state == MirrorPartitionState::Mirroring);
        let offset = match self.stored.last_mirrored_offset {
            Some(earlier) if !from_mirroring => end.min(earlier),
            _ => end,
        };
        self.transition(MirrorPartitionState::Stopped, Some(offset))
    }

    /// PREPARING, remembering where from (a crash mid-PREPARING redoes the same step).
    fn enter_preparing(&mut self, from: MirrorPartitionState) -> Action {
        self.preparing = None;
        let retry_attempt = self.carried_attempts(MirrorPartitionState::Preparing);
        Action::Persist {
            record: PartitionStateRecord {
                state: MirrorPartitionState::Preparing,
                previous_state: from,
                retry_attempt,
                error_message: None,
            },
            last_mirrored_offset: None,
        }
    }

    /// Aligns the local log with the source: a log holding data this mirror did not put
    /// there (failback, or a restart after a failover) is truncated to the offset the other
    /// side last mirrored, so only the delta is fetched.
    fn preparing_step(&mut self, seen: Observed) -> Option<Action> {
        use MirrorPartitionState::*;
        let log = seen.log?;
        let from = self
            .stored
            .record
            .as_ref()
            .map(|r| r.previous_state)
            .unwrap_or(Unknown);
        let progress = self.preparing.get_or_insert(PrepareProgress {
            remote: None,
            truncated_to: None,
            followers_aligned: false,
        });
        let needs_alignment = matches!(from, Unknown | Stopped) && log.end > log.start;
        if !needs_alignment || progress.followers_aligned {
            return Some(self.transition(Mirroring, None));
        }
        if let Some(offset) = progress.truncated_to {
            return Some(Action::AwaitFollowers { offset });
        }
        let Some(remote) = progress.remote.clone() else {
            return Some(Action::AskRemoteOffset);
        };
        let remote = match remote {
            RemoteOffset::At(offset) => Some(offset),
            RemoteOffset::Unknown => None,
            // Unreachable: answered by `on_outcome` with a failure.
            RemoteOffset::StillMirrored => return None,
        };
        // Restarting a topic this mirror stopped (or retrying after a failure on the way):
        // up to our own last mirrored offset the log is the source's, so only what was
        // written here after the failover goes.
        let own = self.stored.last_mirrored_offset;
        let to = match (remote, own) {
            (Some(r), Some(o)) => r.min(o),
            (Some(r), None) => r,
            (None, Some(o)) => o,
            (None, None) => 0,
        };
        Some(Action::Truncate { to })
    }

    /// Retries carry on through PREPARING and MIRRORING until a fetch succeeds.
    fn carried_attempts(&self, next: MirrorPartitionState) -> i16 {
        use MirrorPartitionState::*;
        let cur = self.state();
        let carried = matches!(cur, Failed | Preparing) && matches!(next, Preparing | Mirroring);
        if carried {
            self.stored
                .record
                .as_ref()
                .map(|r| r.retry_attempt)
                .unwrap_or(0)
        } else {
            0
        }
    }

    fn transition(&self, next: MirrorPartitionState, last_mirrored_offset: Option<i64>) -> Action {
        Action::Persist {
            record: PartitionStateRecord {
                state: next,
                previous_state: self.state(),
                retry_attempt: self.carried_attempts(next),
                error_message: None,
            },
            last_mirrored_offset,
        }
    }

    /// Reports how the last action went.
    pub(crate) fn on_outcome(&mut self, now: Instant, outcome: Outcome) {
        let Some(action) = self.awaiting.take() else {
            return;
        };
        match (action, outcome) {
            (
                Action::Persist {
                    record,
                    last_mirrored_offset,
                },
                Outcome::Done,
            ) => {
                use MirrorPartitionState::*;
                if self.pending.as_ref() == Some(&record) {
                    self.pending = None;
                }
                match record.state {
                    Preparing => self.preparing = None,
                    Stopped => self.stopped_at = None,
                    _ => {}
                }
                self.resumed = record.state == Mirroring && self.state() == Paused;
                // A FAILED partition's retry time and a moved leader's lookup time stay.
                if !matches!(record.state, Failed | Mirroring) {
                    self.next_retry = None;
                }
                self.stored.record = Some(record);
                if last_mirrored_offset.is_some() {
                    self.stored.last_mirrored_offset = last_mirrored_offset;
                }
            }
            (Action::Persist { .. }, Outcome::Failed(reason)) => {
                self.last_error = Some(reason);
                self.stale = true;
            }
            (Action::AskRemoteOffset, Outcome::RemoteOffset(RemoteOffset::StillMirrored)) => {
                self.fail(
                    now,
                    "the source still mirrors this topic (MIRROR_TOPIC_NOT_STOPPED): stop it there before failing back".to_string(),
                );
            }
            (Action::AskRemoteOffset, Outcome::RemoteOffset(remote)) => {
                if let Some(p) = self.preparing.as_mut() {
                    p.remote = Some(remote);
                }
            }
            (Action::Truncate { to }, Outcome::Done) => {
                if let Some(p) = self.preparing.as_mut() {
                    p.truncated_to = Some(to);
                }
            }
            (Action::AwaitFollowers { .. }, Outcome::Done) => {
                if let Some(p) = self.preparing.as_mut() {
                    p.followers_aligned = true;
                }
            }
            (Action::AwaitFollowers { .. }, _) => self.hold_until = Some(now + FOLLOWERS_POLL),
            (Action::Assign { .. }, Outcome::Done) => {
                self.next_retry = None;
                self.resumed = false;
            }
            (
                Action::PrepareStop,
                Outcome::Stopped {
                    last_mirrored_offset,
                },
            ) => {
                self.stopped_at = Some(last_mirrored_offset);
            }
            (Action::PrepareStop, Outcome::Failed(reason)) => {
                self.last_error = Some(reason);
                self.hold_until = Some(now + STEP_RETRY);
            }
            (
                Action::AskRemoteOffset | Action::Truncate { .. } | Action::Assign { .. },
                Outcome::Failed(reason),
            ) => self.fail(now, reason),
            _ => {}
        }
    }

    /// A fetch of the partition succeeded: it has recovered, its retries start over.
    pub(crate) fn on_fetch_succeeded(&mut self) {
        self.last_error = None;
        if let Some(r) = self.stored.record.as_ref() {
            if r.state == MirrorPartitionState::Mirroring && r.retry_attempt != 0 {
                self.pending = Some(PartitionStateRecord {
                    retry_attempt: 0,
                    error_message: None,
                    ..r.clone()
                });
            }
        }
    }

    /// The fetcher dropped the partition because its source leader moved: look it up again
    /// after a short backoff.
    pub(crate) fn on_needs_leader(&mut self, now: Instant, reason: String) {
        self.last_error = Some(reason);
        self.next_retry = Some(now + LEADER_LOOKUP_BACKOFF);
    }

    /// The fetcher dropped the partition after an error.
    pub(crate) fn on_fetch_failed(&mut self, now: Instant, reason: String) {
        self.fail(now, reason);
    }

    /// FAILED with one more retry attempt and a backoff (or for good, past the maximum).
    fn fail(&mut self, now: Instant, reason: String) {
        use MirrorPartitionState::*;
        self.preparing = None;
        self.last_error = Some(reason.clone());
        let cur = self.state();
        if matches!(cur, Stopping | Stopped | Paused) {
            return;
        }
        let record = self.stored.record.as_ref();
        let attempts = record.map(|r| r.retry_attempt).unwrap_or(0);
        let next_attempt = if attempts < 0 || attempts >= self.policy.max_attempts {
            -1
        } else {
            attempts + 1
        };
        let previous_state = match (cur, record) {
            (Failed, Some(r)) => r.previous_state,
            _ => cur,
        };
        self.pending = Some(PartitionStateRecord {
            state: Failed,
            previous_state,
            retry_attempt: next_attempt,
            error_message: Some(reason),
        });
        self.next_retry = (next_attempt > 0).then(|| now + self.backoff(next_attempt));
    }

    /// Exponential backoff with jitter: half the step, plus up to half again.
    fn backoff(&mut self, attempt: i16) -> Duration {
        let initial = self.policy.initial_backoff.as_millis() as u64;
        let max = self.policy.max_backoff.as_millis() as u64;
        let exp = initial
            .saturating_mul(1u64 << (attempt.clamp(1, 30) - 1) as u32)
            .min(max)
            .max(1);
        // xorshift64: deterministic for a seed, so simulations replay.
        self.jitter ^= self.jitter << 13;
        self.jitter ^= self.jitter >> 7;
        self.jitter ^= self.jitter << 17;
        Duration::from_millis(exp / 2 + self.jitter % (exp / 2 + 1))
    }
}

#[cfg(test)]
#[path = "simulation.rs"]
mod simulation;

#[cfg(test)]
mod tests {
    use super::*;
    use MirrorPartitionState::*;

    fn machine(
        state: Option<(MirrorPartitionState, MirrorPartitionState)>,
        lmo: Option<i64>,
    ) -> PartitionMachine {
        let record = state.map(|(state, previous_state)| PartitionStateRecord {
            state,
            previous_state,
            retry_attempt: 0,
            error_message: None,
        });
        let policy = RetryPolicy {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(1000),
        };
        PartitionMachine::new(
            StoredState {
                record,
                last_mirrored_offset: lmo,
            },
            policy,
            7,
        )
    }

    fn seen(start: i64, end: i64, fetching: bool) -> Observed {
        Observed {
            log: Some(LocalLog { start, end }),
            fetching,
            source: true,
        }
    }

    /// Polls once at `now` and reports `outcome`; returns the action.
    fn step_at(
        m: &mut PartitionMachine,
        now: Instant,
        desired: DesiredState,
        seen: Observed,
        outcome: Outcome,
    ) -> Option<Action> {
        let action = m.poll(now, desired, seen)?;
        m.on_outcome(now, outcome);
        Some(action)
    }

    /// Polls once now and reports `outcome`.
    fn step(
        m: &mut PartitionMachine,
        desired: DesiredState,
        seen: Observed,
        outcome: Outcome,
    ) -> Option<Action> {
        step_at(m, Instant::now(), desired, seen, outcome)
    }

    fn persisted(action: Option<Action>) -> (MirrorPartitionState, Option<i64>) {
        match action {
            Some(Action::Persist {
                record,
                last_mirrored_offset,
            }) => (record.state, last_mirrored_offset),
            other => panic!("expected a state write, got {other:?}"),
        }
    }

    #[test]
    fn a_failover_stops_the_fetcher_before_it_writes_stopping() {
        let mut m = machine(Some((Mirroring, Preparing)), None);
        let d = DesiredState::Stopped;
        assert_eq!(
            step(&mut m, d, seen(0, 50, true), Outcome::Done),
            Some(Action::StopFetching)
        );
        assert_eq!(
            persisted(step(&mut m, d, seen(0, 50, false), Outcome::Done)),
            (Stopping, None)
        );
        assert_eq!(
            step(
                &mut m,
                d,
                seen(0, 50, false),
                Outcome::Stopped {
                    last_mirrored_offset: 50
                }
            ),
            Some(Action::PrepareStop)
        );
        assert_eq!(
            persisted(step(&mut m, d, seen(0, 50, false), Outcome::Done)),
            (Stopped, Some(50))
        );
        assert_eq!(
            m.poll(Instant::now(), d, seen(0, 50, false)),
            None,
            "nothing more to do"
        );
    }

    #[test]
    fn restarting_a_stopped_topic_truncates_to_the_lower_offset_and_waits_for_the_followers() {
        // Stopped at 40; 10 records written here since; the other side last mirrored 35.
        let mut m = machine(Some((Stopped, Stopping)), Some(40));
        let d = DesiredState::Mirroring;
        assert_eq!(
            persisted(step(&mut m, d, seen(0, 50, false), Outcome::Done)),
            (Preparing, None)
        );
        assert_eq!(
            step(
                &mut m,
                d,
                seen(0, 50, false),
                Outcome::RemoteOffset(RemoteOffset::At(35))
            ),
            Some(Action::AskRemoteOffset)
        );
        assert_eq!(
            step(&mut m, d, seen(0, 50, false), Outcome::Done),
            Some(Action::Truncate { to: 35 })
        );
        // The followers have not truncated yet: asked again after a short wait.
        assert_eq!(
            step(&mut m, d, seen(0, 35, false), Outcome::Skipped),
            Some(Action::AwaitFollowers { offset: 35 })
        );
        assert_eq!(m.poll(Instant::now(), d, seen(0, 35, false)), None);
        let later = Instant::now() + FOLLOWERS_POLL * 2;
        assert_eq!(
            m.poll(later, d, seen(0, 35, false)),
            Some(Action::AwaitFollowers { offset: 35 })
        );
        m.on_outcome(later, Outcome::Done);
        assert_eq!(
            persisted(step_at(&mut m, later, d, seen(0, 35, false), Outcome::Done)),
            (Mirroring, None)
        );
        assert_eq!(
            step_at(&mut m, later, d, seen(0, 35, false), Outcome::Done),
            Some(Action::Assign {
                refresh_metadata: true
            })
        );
    }

    #[test]
    fn failing_back_onto_a_topic_the_source_still_mirrors_fails_and_backs_off() {
        let mut m = machine(Some((Stopped, Stopping)), Some(40));
        let d = DesiredState::Mirroring;
        persisted(step(&mut m, d, seen(0, 50, false), Outcome::Done));
        step(
            &mut m,
            d,
            seen(0, 50, false),
            Outcome::RemoteOffset(RemoteOffset::StillMirrored),
        );
        let record = match m.poll(Instant::now(), d, seen(0, 50, false)) {
            Some(Action::Persist { record, .. }) => record,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            (record.state, record.previous_state, record.retry_attempt),
            (Failed, Preparing, 1)
        );
        assert!(record
            .error_message
            .unwrap()
            .contains("MIRROR_TOPIC_NOT_STOPPED"));
        m.on_outcome(Instant::now(), Outcome::Done);
        assert_eq!(
            m.poll(Instant::now(), d, seen(0, 50, false)),
            None,
            "backing off"
        );
        // Paused meanwhile, it stays FAILED until it is aligned: a resume would fetch at once.
        assert_eq!(
            m.poll(Instant::now(), DesiredState::Paused, seen(0, 50, false)),
            None
        );
    }

    #[test]
    fn retries_stop_at_the_maximum_and_start_over_after_a_good_fetch() {
        let mut m = machine(Some((Mirroring, Preparing)), None);
        let d = DesiredState::Mirroring;
        let mut now = Instant::now();
        for attempt in 1..=4 {
            m.on_fetch_failed(now, "down".into());
            let Some(Action::Persist { record, .. }) = m.poll(now, d, seen(0, 5, false)) else {
                panic!("a failure is written")
            };
            assert_eq!(
                record.retry_attempt,
                if attempt <= 3 { attempt } else { -1 }
            );
            m.on_outcome(now, Outcome::Done);
            now += Duration::from_secs(5);
            if attempt <= 3 {
                // Retried after the backoff: PREPARING, then MIRRORING and an assignment.
                persisted(step_at(&mut m, now, d, seen(0, 5, false), Outcome::Done));
                persisted(step_at(&mut m, now, d, seen(0, 5, false), Outcome::Done));
                step_at(&mut m, now, d, seen(0, 5, false), Outcome::Done);
            }
        }
        assert_eq!(
            m.poll(now, d, seen(0, 5, false)),
            None,
            "FAILED for good after the maximum"
        );

        let mut m = machine(Some((Mirroring, Preparing)), None);
        m.on_fetch_failed(now, "down".into());
        step_at(&mut m, now, d, seen(0, 5, false), Outcome::Done);
        now += Duration::from_secs(5);
        persisted(step_at(&mut m, now, d, seen(0, 5, false), Outcome::Done));
        persisted(step_at(&mut m, now, d, seen(0, 5, false), Outcome::Done));
        step_at(&mut m, now, d, seen(0, 5, false), Outcome::Done);
        m.on_fetch_succeeded();
        let Some(Action::Persist { record, .. }) = m.poll(now, d, seen(0, 5, true)) else {
            panic!("the recovery is written")
        };
        assert_eq!((record.state, record.retry_attempt), (Mirroring, 0));
    }
}
