use super::*;

fn topics(list: &[(&str, i32)]) -> BTreeMap<String, i32> {
    list.iter().map(|(t, n)| (t.to_string(), *n)).collect()
}

fn join(id: &str, subscribed: &[&str]) -> Heartbeat {
    Heartbeat {
        member_id: id.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 60_000,
        subscribed_topic_names: Some(subscribed.iter().map(|s| s.to_string()).collect()),
        owned: Some(Assignment::new()),
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        ..Default::default()
    }
}

fn beat(id: &str, epoch: i32, owned: &Assignment) -> Heartbeat {
    Heartbeat {
        member_id: id.into(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        owned: Some(owned.clone()),
        ..Default::default()
    }
}

fn parts(a: &Assignment) -> usize {
    a.values().map(BTreeSet::len).sum()
}

/// No partition is owned (assigned or pending revocation) by two members at once.
fn owned_once(g: &ConsumerGroup) {
    let mut seen = BTreeSet::new();
    for m in g.members.values() {
        for (t, ps) in m.assigned.iter().chain(m.pending_revocation.iter()) {
            for p in ps {
                assert!(seen.insert((t.clone(), *p)), "{t}-{p} owned twice");
            }
        }
    }
}

/// Runs a member's heartbeat as a client would: reporting what it owns after acting on the
/// last answer.
struct Client {
    id: String,
    epoch: i32,
    owned: Assignment,
}

impl Client {
    fn beat(&mut self, g: &mut ConsumerGroup, t: &BTreeMap<String, i32>, now: i64) {
        let cfg = ConsumerGroupConfig::default();
        let a = g
            .heartbeat(beat(&self.id, self.epoch, &self.owned), t, &cfg, now)
            .expect("heartbeat");
        self.epoch = a.member_epoch;
        if let Some(assigned) = a.assignment {
            self.owned = assigned;
        }
        owned_once(g);
    }
}

fn joined(g: &mut ConsumerGroup, id: &str, t: &BTreeMap<String, i32>, now: i64) -> Client {
    let cfg = ConsumerGroupConfig::default();
    let a = g
        .heartbeat(join(id, &["orders"]), t, &cfg, now)
        .expect("join");
    owned_once(g);
    Client {
        id: a.member_id,
        epoch: a.member_epoch,
        owned: a.assignment.expect("a join is answered with an assignment"),
    }
}

#[test]
fn first_member_gets_every_partition_at_epoch_one() {
    let t = topics(&[("orders", 4)]);
    let mut g = ConsumerGroup::default();
    let c = joined(&mut g, "m1", &t, 0);
    assert_eq!(c.epoch, 1);
    assert_eq!(parts(&c.owned), 4);
    assert_eq!(g.state(), ConsumerGroupState::Stable);
    assert_eq!(g.assignor, "uniform");
}

#[test]
fn partitions_move_only_after_their_owner_revokes_them() {
    let t = topics(&[("orders", 4)]);
    let mut g = ConsumerGroup::default();
    let mut c1 = joined(&mut g, "m1", &t, 0);
    let mut c2 = joined(&mut g, "m2", &t, 1);
    // m2 is at the new epoch, but every partition is still m1's.
    assert_eq!(c2.epoch, 2);
    assert_eq!(parts(&c2.owned), 0);
    assert_eq!(g.members["m2"].state, MemberState::UnreleasedPartitions);
    assert_eq!(g.state(), ConsumerGroupState::Reconciling);
    // m1 is told to give up two partitions and stays at its epoch until it has.
    c1.beat(&mut g, &t, 2);
    assert_eq!(c1.epoch, 1);
    assert_eq!(parts(&c1.owned), 2);
    assert_eq!(g.members["m1"].state, MemberState::UnrevokedPartitions);
    // m2 still gets nothing: m1 has not said it let go.
    c2.beat(&mut g, &t, 3);
    assert_eq!(parts(&c2.owned), 0);
    // m1 reports it owns two now: it moves to epoch 2, and m2 gets the released two.
    c1.beat(&mut g, &t, 4);
    assert_eq!(c1.epoch, 2);
    c2.beat(&mut g, &t, 5);
    assert_eq!(parts(&c2.owned), 2);
    assert_eq!(g.state(), ConsumerGroupState::Stable);
    let all: BTreeSet<i32> = c1.owned["orders"]
        .union(&c2.owned["orders"])
        .copied()
        .collect();
    assert_eq!(all, (0..4).collect());
}

#[test]
fn a_leaving_member_hands_its_partitions_to_the_rest() {
    let t = topics(&[("orders", 4)]);
    let mut g = ConsumerGroup::default();
    let mut c1 = joined(&mut g, "m1", &t, 0);
    let mut c2 = joined(&mut g, "m2", &t, 1);
    for now in 2..6 {
        c1.beat(&mut g, &t, now);
        c2.beat(&mut g, &t, now);
    }
    assert_eq!(g.state(), ConsumerGroupState::Stable);
    let cfg = ConsumerGroupConfig::default();
    let left = g
        .heartbeat(beat("m2", LEAVE_EPOCH, &c2.owned), &t, &cfg, 6)
        .unwrap();
    assert_eq!(left.member_epoch, LEAVE_EPOCH);
    assert!(!g.members.contains_key("m2"));
    c1.beat(&mut g, &t, 7);
    assert_eq!(parts(&c1.owned), 4);
    assert_eq!(c1.epoch, g.group_epoch);
    assert_eq!(g.state(), ConsumerGroupState::Stable);
}

#[test]
fn new_partitions_of_a_subscribed_topic_bump_the_epoch_and_are_assigned() {
    let mut t = topics(&[("orders", 2)]);
    let mut g = ConsumerGroup::default();
    let mut c1 = joined(&mut g, "m1", &t, 0);
    t.insert("orders".into(), 5);
    c1.beat(&mut g, &t, 1);
    assert_eq!(c1.epoch, 2);
    assert_eq!(parts(&c1.owned), 5);
}

#[test]
fn epochs_out_of_step_are_fenced_and_strangers_unknown() {
    let t = topics(&[("orders", 2)]);
    let cfg = ConsumerGroupConfig::default();
    let mut g = ConsumerGroup::default();
    let c1 = joined(&mut g, "m1", &t, 0);
    let ahead = g.heartbeat(beat("m1", 5, &c1.owned), &t, &cfg, 1);
    assert_eq!(ahead.unwrap_err().error, ResponseError::FencedMemberEpoch);
    let stranger = g.heartbeat(beat("m9", 1, &Assignment::new()), &t, &cfg, 1);
    assert_eq!(stranger.unwrap_err().error, ResponseError::UnknownMemberId);
    // The previous epoch with owned partitions within the assignment is taken: the answer
    // that moved the member on may have been lost.
    let mut grown = t.clone();
    grown.insert("orders".into(), 3);
    let moved = g
        .heartbeat(beat("m1", 1, &c1.owned), &grown, &cfg, 2)
        .unwrap();
    assert_eq!(moved.member_epoch, 2);
    let lost_answer = g
        .heartbeat(beat("m1", 1, &c1.owned), &grown, &cfg, 3)
        .unwrap();
    assert_eq!(lost_answer.member_epoch, 2);
    // ... but not with a partition it was never given.
    let mut more = c1.owned.clone();
    more.entry("orders".into()).or_default().insert(7);
    let wrong = g.heartbeat(beat("m1", 1, &more), &grown, &cfg, 4);
    assert_eq!(wrong.unwrap_err().error, ResponseError::FencedMemberEpoch);
    // An epoch older than the previous one is fenced too.
    let behind = g.heartbeat(beat("m1", 0, &Assignment::new()), &grown, &cfg, 5);
    assert_eq!(behind.unwrap_err().error, ResponseError::FencedMemberEpoch);
}

#[test]
fn silent_members_expire_and_slow_revokers_are_removed() {
    let t = topics(&[("orders", 4)]);
    let cfg = ConsumerGroupConfig {
        session_timeout_ms: 1_000,
        ..Default::default()
    };
    let mut g = ConsumerGroup::default();
    let mut c1 = joined(&mut g, "m1", &t, 0);
    let mut h2 = join("m2", &["orders"]);
    h2.rebalance_timeout_ms = 500;
    g.heartbeat(h2, &t, &cfg, 0).unwrap();
    // m1 must revoke within its rebalance timeout (60 s here) - it keeps beating and never
    // lets go; m2 goes silent and expires after its session.
    c1.beat(&mut g, &t, 100);
    assert_eq!(g.members["m1"].state, MemberState::UnrevokedPartitions);
    let epoch = g.group_epoch;
    let mut expired = Vec::new();
    for now in [600, 900, 1_050] {
        g.heartbeat(beat("m1", c1.epoch, &c1.owned), &t, &cfg, now)
            .unwrap();
        expired.extend(g.expire(now));
    }
    assert_eq!(expired, vec!["m2".to_string()]);
    assert_eq!(g.group_epoch, epoch + 1);
    // A revoker past its deadline is removed as well.
    let mut g = ConsumerGroup::default();
    let mut h1 = join("m1", &["orders"]);
    h1.rebalance_timeout_ms = 200;
    g.heartbeat(h1, &t, &cfg, 0).unwrap();
    let owned = g.members["m1"].assigned.clone();
    g.heartbeat(join("m2", &["orders"]), &t, &cfg, 10).unwrap();
    g.heartbeat(beat("m1", 1, &owned), &t, &cfg, 20).unwrap();
    assert_eq!(g.members["m1"].state, MemberState::UnrevokedPartitions);
    g.heartbeat(beat("m1", 1, &owned), &t, &cfg, 150).unwrap();
    assert!(g.expire(150).is_empty());
    g.heartbeat(beat("m2", 2, &Assignment::new()), &t, &cfg, 230)
        .unwrap();
    assert_eq!(g.expire(230), vec!["m1".to_string()]);
}

#[test]
fn a_static_member_comes_back_to_its_partitions() {
    let t = topics(&[("orders", 4)]);
    let cfg = ConsumerGroupConfig::default();
    let mut g = ConsumerGroup::default();
    let mut h = join("m1", &["orders"]);
    h.instance_id = Some("i1".into());
    let a = g.heartbeat(h.clone(), &t, &cfg, 0).unwrap();
    let owned = a.assignment.unwrap();
    // Another process with the same instance id while m1 is in: refused.
    let mut other = h.clone();
    other.member_id = "m1b".into();
    assert_eq!(
        g.heartbeat(other.clone(), &t, &cfg, 1).unwrap_err().error,
        ResponseError::UnreleasedInstanceId
    );
    let mut leave = beat("m1", LEAVE_STATIC_EPOCH, &owned);
    leave.instance_id = Some("i1".into());
    assert_eq!(
        g.heartbeat(leave, &t, &cfg, 2).unwrap().member_epoch,
        LEAVE_STATIC_EPOCH
    );
    let epoch = g.group_epoch;
    let back = g.heartbeat(other, &t, &cfg, 3).unwrap();
    assert_eq!(back.member_id, "m1b");
    assert_eq!(back.assignment.unwrap(), owned);
    assert_eq!(
        g.group_epoch, epoch,
        "a static member's return does not rebalance"
    );
    assert!(!g.members.contains_key("m1"));
}

#[test]
fn bad_heartbeats_answer_kafkas_errors() {
    let cfg = ConsumerGroupConfig::default();
    let code = |hb: &Heartbeat, v: i16| validate(hb, v, &cfg).map_err(|r| r.error);
    let ok = join("m1", &["orders"]);
    assert_eq!(code(&ok, 1), Ok(()));
    let mut bad = ok.clone();
    bad.member_epoch = -3;
    assert_eq!(code(&bad, 1), Err(ResponseError::InvalidRequest));
    let mut bad = ok.clone();
    bad.subscribed_topic_names = None;
    assert_eq!(code(&bad, 1), Err(ResponseError::InvalidRequest));
    let mut bad = ok.clone();
    bad.member_id.clear();
    assert_eq!(code(&bad, 1), Err(ResponseError::InvalidRequest));
    assert_eq!(
        code(&bad, 0),
        Ok(()),
        "v0 members get their id from the coordinator"
    );
    let mut bad = ok.clone();
    bad.rebalance_timeout_ms = -1;
    assert_eq!(code(&bad, 1), Err(ResponseError::InvalidRequest));
    let mut bad = ok.clone();
    bad.server_assignor = Some("sticky".into());
    assert_eq!(code(&bad, 1), Err(ResponseError::UnsupportedAssignor));
    let mut bad = ok.clone();
    bad.subscribed_topic_regex = Some("orders-(".into());
    assert_eq!(code(&bad, 1), Err(ResponseError::InvalidRegularExpression));
    let mut bad = beat("m1", LEAVE_STATIC_EPOCH, &Assignment::new());
    bad.instance_id = None;
    assert_eq!(code(&bad, 1), Err(ResponseError::InvalidRequest));
}

#[test]
fn commits_need_the_members_epoch_or_the_partitions_it_held_then() {
    let t = topics(&[("orders", 2)]);
    let mut g = ConsumerGroup::default();
    assert_eq!(
        g.check_commit("", -1, false),
        Ok(CommitCheck::All),
        "an empty group takes admin commits"
    );
    let mut c1 = joined(&mut g, "m1", &t, 0);
    let e1 = c1.epoch;
    assert_eq!(g.check_commit("m1", e1, false), Ok(CommitCheck::All));
    assert_eq!(
        g.check_commit("m1", e1 + 1, false),
        Err(ResponseError::StaleMemberEpoch),
        "an epoch the member never had"
    );
    assert_eq!(
        g.check_commit("", -1, false),
        Err(ResponseError::UnknownMemberId)
    );
    assert_eq!(
        g.check_commit("", -1, true),
        Ok(CommitCheck::All),
        "a transaction naming no member"
    );
    assert_eq!(
        g.check_commit("m9", 1, false),
        Err(ResponseError::UnknownMemberId)
    );

    // m2 joins: m1 gives up one partition and moves to a new epoch with the other.
    let mut c2 = joined(&mut g, "m2", &t, 1);
    c1.beat(&mut g, &t, 2);
    c1.beat(&mut g, &t, 3);
    c2.beat(&mut g, &t, 4);
    assert!(c1.epoch > e1, "m1 moved on");
    assert_eq!(parts(&c1.owned), 1);
    let (kept, gone) = match c1.owned["orders"].first() {
        Some(0) => (0, 1),
        _ => (1, 0),
    };
    // A commit m1 made with its old epoch (before it saw the new one) still writes the
    // partition it has kept since then, not the one it gave up.
    let check = g.check_commit("m1", e1, false).unwrap();
    assert_eq!(check.partition_error("orders", kept), None);
    assert_eq!(
        check.partition_error("orders", gone),
        Some(ResponseError::StaleMemberEpoch)
    );
    // m2's partition was assigned at its current epoch: an older one writes nothing.
    let check = g.check_commit("m2", c2.epoch - 1, false).unwrap();
    assert_eq!(
        check.partition_error("orders", gone),
        Some(ResponseError::StaleMemberEpoch)
    );
    assert_eq!(g.check_commit("m2", c2.epoch, false), Ok(CommitCheck::All));
    assert_eq!(g.check_fetch(None, -1), Ok(()));
    assert_eq!(
        g.check_fetch(Some("m1"), 7),
        Err(ResponseError::StaleMemberEpoch)
    );
}

#[test]
fn regex_subscriptions_follow_the_topics_that_match() {
    let mut t = topics(&[("orders-1", 1), ("payments", 1)]);
    let cfg = ConsumerGroupConfig::default();
    let mut g = ConsumerGroup::default();
    let mut h = join("m1", &[]);
    h.subscribed_topic_names = None;
    h.subscribed_topic_regex = Some("orders-.*".into());
    let a = g.heartbeat(h, &t, &cfg, 0).unwrap();
    assert_eq!(
        a.assignment.unwrap().keys().collect::<Vec<_>>(),
        ["orders-1"]
    );
    t.insert("orders-2".into(), 2);
    let a = g
        .heartbeat(
            beat("m1", 1, &g.members["m1"].assigned.clone()),
            &t,
            &cfg,
            1,
        )
        .unwrap();
    let assigned = a.assignment.unwrap();
    assert_eq!(
        assigned.keys().collect::<Vec<_>>(),
        ["orders-1", "orders-2"]
    );
}

#[test]
fn a_restored_group_carries_on_and_notices_topics_that_changed_meanwhile() {
    let cfg = ConsumerGroupConfig::default();
    let two = topics(&[("orders", 2)]);
    let mut g = ConsumerGroup::default();
    let a = g.heartbeat(join("m1", &["orders"]), &two, &cfg, 0).unwrap();
    let owned = a.assignment.unwrap();
    g.heartbeat(beat("m1", 1, &owned), &two, &cfg, 10).unwrap();
    let stored = g.stored();

    // Same topics: the member heartbeats on at epoch 1 with what it owns, session restarted.
    let mut same = ConsumerGroup::restored(&stored, &two, "uniform", 45_000, 1_000_000);
    assert_eq!(same.stored(), stored);
    let a = same
        .heartbeat(beat("m1", 1, &owned), &two, &cfg, 1_000_010)
        .unwrap();
    assert_eq!((a.member_epoch, same.group_epoch), (1, 1));
    assert!(
        same.expire(1_000_000 + 44_000).is_empty(),
        "a whole session from the load"
    );

    // A partition was added while the group was not loaded: the next heartbeat bumps the
    // epoch and assigns it.
    let three = topics(&[("orders", 3)]);
    let mut grown = ConsumerGroup::restored(&stored, &three, "uniform", 45_000, 1_000_000);
    let a = grown
        .heartbeat(beat("m1", 1, &owned), &three, &cfg, 1_000_010)
        .unwrap();
    assert_eq!((a.member_epoch, grown.group_epoch), (2, 2));
    assert_eq!(parts(&a.assignment.unwrap()), 3);
}
