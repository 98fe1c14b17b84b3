//! One partition's replication state as this broker sees it: who leads, the ISR from the
//! metadata image, and on the leader each follower's progress. Pure: the high watermark, ISR
//! shrink and expansion are computed here from numbers passed in, so they are tested without
//! logs, sockets or clocks (Kafka's `Partition` keeps the same rules).

use std::collections::HashMap;

/// What the leader knows of one follower.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerProgress {
    /// The follower's log end offset (its last fetch offset), -1 until it fetched from us.
    pub log_end_offset: i64,
    /// When the follower last had everything this leader had (ms).
    pub last_caught_up_ms: i64,
    /// This leader's log end offset when the follower fetched last.
    last_fetch_leader_leo: i64,
    /// When the follower fetched last (ms).
    last_fetch_ms: i64,
}

impl FollowerProgress {
    fn new(now_ms: i64) -> Self {
        FollowerProgress {
            log_end_offset: -1,
            last_caught_up_ms: now_ms,
            last_fetch_leader_leo: -1,
            last_fetch_ms: now_ms,
        }
    }
}

/// The assignment and leadership of a partition from the metadata image.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Assignment {
    /// Replicas, preferred leader first.
    pub replicas: Vec<i32>,
    /// In-sync replicas.
    pub isr: Vec<i32>,
    /// Leader, or -1.
    pub leader: i32,
    /// Leader epoch.
    pub leader_epoch: i32,
    /// Partition epoch (bumped on every change).
    pub partition_epoch: i32,
    /// Replicas whose copy is offline until their broker restarts: never added to the ISR.
    pub offline: Vec<i32>,
}

/// A partition's replication state on this broker.
#[derive(Debug, Clone)]
pub struct PartitionState {
    /// This broker.
    pub own_id: i32,
    /// As the image has it.
    pub assignment: Assignment,
    /// Where this leader's epoch began (its log end offset when it became leader).
    pub leader_epoch_start_offset: i64,
    /// Followers' progress; empty unless this broker leads.
    pub followers: HashMap<i32, FollowerProgress>,
    /// An ISR change was sent to the controller and is not in the image yet.
    pub isr_change_pending: bool,
}

/// A change of role that `apply` made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoleChange {
    /// Nothing new for this broker's role (the ISR may have changed).
    None,
    /// This broker became leader (or stays leader in a new epoch).
    BecameLeader,
    /// This broker follows a new leader (or the same in a new epoch); -1 if none is elected.
    BecameFollower(i32),
}

impl PartitionState {
    /// A state before any image applied.
    pub fn new(own_id: i32) -> Self {
        PartitionState {
            own_id,
            assignment: Assignment {
                leader: -1,
                leader_epoch: -1,
                partition_epoch: -1,
                ..Default::default()
            },
            leader_epoch_start_offset: 0,
            followers: HashMap::new(),
            isr_change_pending: false,
        }
    }

    /// Whether this broker leads.
    pub fn is_leader(&self) -> bool {
        self.assignment.leader == self.own_id
    }

    /// Takes a new assignment from the image; `log_end_offset` is the local log's now.
    pub fn apply(&mut self, a: Assignment, log_end_offset: i64, now_ms: i64) -> RoleChange {
        let old = std::mem::replace(&mut self.assignment, a);
        let new = &self.assignment;
        if new.partition_epoch != old.partition_epoch {
            self.isr_change_pending = false;
        }
        let epoch_changed = new.leader_epoch != old.leader_epoch || new.leader != old.leader;
        if new.leader == self.own_id {
            if epoch_changed {
                self.leader_epoch_start_offset = log_end_offset;
                // Kafka resets followers' progress at election: none counts as caught up
                // until it fetches from this leader, but none is dropped for lag before the
                // full lag time has passed.
                self.followers = new
                    .replicas
                    .iter()
                    .filter(|r| **r != self.own_id)
                    .map(|r| (*r, FollowerProgress::new(now_ms)))
                    .collect();
                return RoleChange::BecameLeader;
            }
            // Reassignment may add replicas.
            for r in new.replicas.iter().filter(|r| **r != self.own_id) {
                self.followers
                    .entry(*r)
                    .or_insert_with(|| FollowerProgress::new(now_ms));
            }
            self.followers.retain(|r, _| new.replicas.contains(r));
            RoleChange::None
        } else {
            self.followers.clear();
            if epoch_changed {
                RoleChange::BecameFollower(new.leader)
            } else {
                RoleChange::None
            }
        }
    }

    /// Records a follower's fetch at `fetch_offset` (Kafka's `updateFollowerFetchState`);
    /// false if `replica` is not a follower of this leader.
    pub fn follower_fetched(
        &mut self,
        replica: i32,
        fetch_offset: i64,
        leader_leo: i64,
        now_ms: i64,
    ) -> bool {
        let Some(f) = self.followers.get_mut(&replica) else {
            return false;
        };
        if fetch_offset >= leader_leo {
            f.last_caught_up_ms = now_ms;
        } else if fetch_offset >= f.last_fetch_leader_leo {
            // It has what we had at its previous fetch: caught up as of that moment.
            f.last_caught_up_ms = f.last_caught_up_ms.max(f.last_fetch_ms);
        }
        f.log_end_offset = fetch_offset;
        f.last_fetch_leader_leo = leader_leo;
        f.last_fetch_ms = now_ms;
        true
    }

    /// Whether every other ISR member has fetched since this broker led and its log ends at or
    /// below `offset`: after the leader truncated its log to `offset` (a mirror failing
    /// back), no in-sync follower still holds what the truncation removed. False unless
    /// this broker leads.
    pub fn isr_ends_at_or_below(&self, offset: i64) -> bool {
        self.is_leader()
            && self
                .assignment
                .isr
                .iter()
                .filter(|r| **r != self.own_id)
                .all(|r| {
                    self.followers
                        .get(r)
                        .is_some_and(|f| f.log_end_offset >= 0 && f.log_end_offset <= offset)
                })
    }

    /// The high watermark the ISR allows: the smallest log end offset among its members
    /// (this leader's own included); None while a member's is unknown, or if not leader.
    pub fn high_watermark(&self, own_leo: i64) -> Option<i64> {
        if !self.is_leader() {
            return None;
        }
        let mut hw = own_leo;
        for r in self.assignment.isr.iter().filter(|r| **r != self.own_id) {
            match self.followers.get(r) {
                Some(f) if f.log_end_offset >= 0 => hw = hw.min(f.log_end_offset),
                _ => return None,
            }
        }
        Some(hw)
    }

    /// The ISR without followers that have not caught up for `lag_max_ms` (Kafka's
    /// `getOutOfSyncReplicas`), if any must go.
    pub fn isr_to_shrink(&self, now_ms: i64, lag_max_ms: i64) -> Option<Vec<i32>> {
        if !self.is_leader() || self.isr_change_pending {
            return None;
        }
        let isr: Vec<i32> = self
            .assignment
            .isr
            .iter()
            .copied()
            .filter(|r| {
                *r == self.own_id
                    || self
                        .followers
                        .get(r)
                        .is_some_and(|f| now_ms - f.last_caught_up_ms <= lag_max_ms)
            })
            .collect();
        (isr.len() < self.assignment.isr.len()).then_some(isr)
    }

    /// The ISR with every follower that caught up to the high watermark, has fetched in this
    /// leader's epoch (Kafka's `isFollowerInSync`) and was caught up within `lag_max_ms`, if any
    /// can join. Kafka looks only at a follower that is fetching; the last condition keeps a
    /// follower that stopped (dead, or stuck) from rejoining on the progress it once reported.
    pub fn isr_to_expand(
        &self,
        high_watermark: i64,
        now_ms: i64,
        lag_max_ms: i64,
    ) -> Option<Vec<i32>> {
        if !self.is_leader() || self.isr_change_pending {
            return None;
        }
        let mut isr = self.assignment.isr.clone();
        for r in &self.assignment.replicas {
            if isr.contains(r) || self.assignment.offline.contains(r) {
                continue;
            }
            if self.followers.get(r).is_some_and(|f| {
                f.log_end_offset >= high_watermark
                    && f.log_end_offset >= self.leader_epoch_start_offset
                    && now_ms - f.last_caught_up_ms <= lag_max_ms
            }) {
                isr.push(*r);
            }
        }
        (isr.len() > self.assignment.isr.len()).then_some(isr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leader_of(isr: &[i32]) -> PartitionState {
        let mut s = PartitionState::new(1);
        let change = s.apply(
            Assignment {
                replicas: vec![1, 2, 3],
                isr: isr.to_vec(),
                leader: 1,
                leader_epoch: 5,
                partition_epoch: 9,
                offline: vec![],
            },
            100,
            1_000,
        );
        assert_eq!(change, RoleChange::BecameLeader);
        s
    }

    #[test]
    fn the_high_watermark_waits_for_every_isr_member() {
        let mut s = leader_of(&[1, 2, 3]);
        assert_eq!(s.high_watermark(120), None, "followers not heard from yet");
        s.follower_fetched(2, 110, 120, 1_100);
        assert_eq!(s.high_watermark(120), None);
        s.follower_fetched(3, 105, 120, 1_100);
        assert_eq!(s.high_watermark(120), Some(105));
        s.follower_fetched(3, 120, 120, 1_200);
        assert_eq!(s.high_watermark(120), Some(110));
        // A replica outside the ISR does not hold the high watermark back.
        let mut s = leader_of(&[1, 2]);
        s.follower_fetched(2, 120, 120, 1_100);
        assert_eq!(s.high_watermark(120), Some(120));
        assert!(!s.follower_fetched(7, 120, 120, 1_100), "not a replica");
    }

    #[test]
    fn the_isr_ends_below_a_truncation_once_every_follower_fetched_there() {
        let mut s = leader_of(&[1, 2, 3]);
        assert!(!s.isr_ends_at_or_below(100), "followers not heard from yet");
        s.follower_fetched(2, 130, 100, 1_100);
        s.follower_fetched(3, 90, 100, 1_100);
        assert!(
            !s.isr_ends_at_or_below(100),
            "follower 2 still ends past the truncation"
        );
        s.follower_fetched(2, 100, 100, 1_200);
        assert!(s.isr_ends_at_or_below(100));
        // Only the ISR counts; a follower never leads.
        let mut s = leader_of(&[1, 2]);
        s.follower_fetched(2, 100, 100, 1_100);
        s.follower_fetched(3, 500, 100, 1_100);
        assert!(s.isr_ends_at_or_below(100));
        assert!(!PartitionState::new(1).isr_ends_at_or_below(100));
    }

    #[test]
    fn a_follower_that_stops_catching_up_leaves_the_isr_after_the_lag_time() {
        let mut s = leader_of(&[1, 2, 3]);
        // Follower 2 keeps fetching the end; 3 fetched once, behind, then went quiet.
        s.follower_fetched(3, 90, 120, 1_100);
        for t in (1_100..=12_000).step_by(500) {
            s.follower_fetched(2, 120, 120, t);
        }
        assert_eq!(
            s.isr_to_shrink(10_999, 10_000),
            None,
            "within the lag time of election"
        );
        assert_eq!(s.isr_to_shrink(11_001, 10_000), Some(vec![1, 2]));
        s.isr_change_pending = true;
        assert_eq!(
            s.isr_to_shrink(20_000, 10_000),
            None,
            "one change at a time"
        );
    }

    #[test]
    fn a_follower_fetching_behind_a_moving_end_counts_as_caught_up_at_its_previous_fetch() {
        let mut s = leader_of(&[1, 2]);
        // Each fetch reaches what the leader had at the previous one, never the current end.
        s.follower_fetched(2, 100, 110, 2_000);
        s.follower_fetched(2, 110, 120, 3_000);
        s.follower_fetched(2, 120, 130, 4_000);
        assert_eq!(s.followers[&2].last_caught_up_ms, 3_000);
        assert_eq!(s.isr_to_shrink(12_000, 10_000), None);
    }

    #[test]
    fn a_follower_rejoins_once_it_reaches_the_high_watermark_in_this_epoch() {
        let mut s = leader_of(&[1, 2]);
        s.follower_fetched(2, 130, 130, 1_100);
        let hw = s.high_watermark(130).unwrap();
        s.follower_fetched(3, 90, 130, 1_100);
        assert_eq!(
            s.isr_to_expand(hw, 1_200, 10_000),
            None,
            "behind the high watermark"
        );
        s.follower_fetched(3, 130, 130, 1_200);
        assert_eq!(s.isr_to_expand(hw, 1_300, 10_000), Some(vec![1, 2, 3]));
        // A follower that reported the end once and then went quiet does not rejoin later.
        assert_eq!(s.isr_to_expand(hw, 20_000, 10_000), None, "quiet since");
    }

    #[test]
    fn a_new_epoch_resets_progress_and_followers_learn_their_leader() {
        let mut s = leader_of(&[1, 2, 3]);
        s.follower_fetched(2, 120, 120, 1_100);
        let mut a = s.assignment.clone();
        a.leader = 2;
        a.leader_epoch = 6;
        assert_eq!(
            s.apply(a.clone(), 120, 2_000),
            RoleChange::BecameFollower(2)
        );
        assert!(s.followers.is_empty());
        assert_eq!(s.high_watermark(120), None);
        a.isr = vec![1, 2];
        a.partition_epoch += 1;
        assert_eq!(
            s.apply(a.clone(), 120, 2_100),
            RoleChange::None,
            "an ISR change only"
        );
        a.leader = 1;
        a.leader_epoch = 7;
        assert_eq!(s.apply(a, 125, 3_000), RoleChange::BecameLeader);
        assert_eq!(s.leader_epoch_start_offset, 125);
        assert_eq!(s.followers[&2].log_end_offset, -1);
    }
}
