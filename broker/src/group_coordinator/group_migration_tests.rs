use std::collections::{BTreeMap, BTreeSet};

use bytes::BytesMut;
use kafka_protocol::messages::consumer_protocol_subscription::TopicPartition as OwnedTopic;
use kafka_protocol::messages::{ConsumerProtocolSubscription, TopicName};
use kafka_protocol::protocol::{Encodable, StrBytes};

use super::super::super::assignor::Assignment;
use super::super::super::consumer_group::{ConsumerGroupConfig, Heartbeat, LEAVE_EPOCH};
use super::super::super::consumer_protocol::decode_assignment;
use super::super::{Committer, MigrationPolicy};
use super::*;

const T: &str = "orders";

fn topics() -> BTreeMap<String, i32> {
    [(T.to_string(), 4)].into_iter().collect()
}

fn config(migration: MigrationPolicy) -> GroupConfig {
    GroupConfig {
        min_session_timeout_ms: 10,
        max_session_timeout_ms: 100_000,
        initial_rebalance_delay_ms: 0,
        max_size: 10,
        migration,
    }
}

fn partitions(ps: &[i32]) -> Assignment {
    let mut a = Assignment::new();
    if !ps.is_empty() {
        a.insert(T.into(), ps.iter().copied().collect());
    }
    a
}

/// A ConsumerProtocolSubscription v3 to `T` owning `owned`.
fn subscription(owned: &[i32]) -> Bytes {
    let s = ConsumerProtocolSubscription::default()
        .with_topics(vec![StrBytes::from_static_str(T)])
        .with_owned_partitions(if owned.is_empty() {
            vec![]
        } else {
            vec![OwnedTopic::default()
                .with_topic(TopicName(StrBytes::from_static_str(T)))
                .with_partitions(owned.to_vec())]
        })
        .with_generation_id(-1);
    let mut b = BytesMut::new();
    b.extend_from_slice(&3i16.to_be_bytes());
    s.encode(&mut b, 3).unwrap();
    b.freeze()
}

fn join_req(member: &str, protocol: &str, owned: &[i32]) -> JoinRequest {
    JoinRequest {
        member_id: member.into(),
        group_instance_id: None,
        client_id: "classic".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 30_000,
        protocol_type: "consumer".into(),
        protocols: vec![(protocol.into(), subscription(owned))],
        require_known_member_id: true,
    }
}

fn settle<T>(r: Reply<T>) -> T {
    match r {
        Reply::Now(t) => t,
        Reply::Wait(mut rx) => rx.try_recv().expect("reply should be ready"),
    }
}

/// A classic group of one member `m1` of the "range" protocol owning all four partitions, at
/// generation 1.
fn classic_group(cfg: &GroupConfig) -> Group {
    let mut g = Group::with_member_ids("g", 0, Box::new(|_| "m1".to_string()));
    let first = settle(g.join(join_req("", "range", &[]), cfg, 0));
    assert_eq!(first.error, ResponseError::MemberIdRequired.code());
    let joined = settle(g.join(join_req("m1", "range", &[]), cfg, 0));
    assert_eq!((joined.error, joined.generation), (0, 1));
    let all =
        super::super::super::consumer_protocol::encode_assignment(&partitions(&[0, 1, 2, 3]), 3);
    let (sync, _) = g.sync("m1", None, 1, vec![("m1".into(), all)], 0);
    assert_eq!(settle(sync).error, 0);
    assert_eq!(g.state(), GroupState::Stable);
    g
}

fn consumer_join(id: &str) -> Heartbeat {
    Heartbeat {
        member_id: id.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(vec![T.into()]),
        owned: Some(Assignment::new()),
        client_id: "modern".into(),
        client_host: "/127.0.0.1".into(),
        ..Default::default()
    }
}

/// Upgrades `g` with a consumer-protocol member `c1` joining; returns c1's epoch.
fn upgrade(g: &mut Group, cfg: &GroupConfig, now: i64) -> i32 {
    let ccfg = ConsumerGroupConfig::default();
    let mut c = g.upgraded(cfg, &ccfg, &topics(), now).expect("upgrade");
    let a = c
        .heartbeat(consumer_join("c1"), &topics(), &ccfg, now)
        .expect("c1 joins");
    g.install_consumer_group(c, now);
    a.member_epoch
}

fn sync_assignment(
    g: &mut Group,
    member: &str,
    generation: i32,
    now: i64,
) -> Result<Assignment, i16> {
    let (reply, _) = g.sync_any(
        member,
        None,
        generation,
        (Some("consumer"), Some("range")),
        vec![],
        now,
    );
    let r = settle(reply);
    if r.error != 0 {
        return Err(r.error);
    }
    Ok(decode_assignment(&r.assignment).expect("an assignment").0)
}

fn classic_join(g: &mut Group, member: &str, owned: &[i32], now: i64) -> JoinResult {
    let cfg = config(MigrationPolicy::Bidirectional);
    join_with(g, join_req(member, "range", owned), &cfg, now)
}

/// A JoinGroup into `g`, of either protocol, under `cfg` and the default consumer settings.
fn join_with(g: &mut Group, req: JoinRequest, cfg: &GroupConfig, now: i64) -> JoinResult {
    let ccfg = ConsumerGroupConfig::default();
    let t = topics();
    let s = Membership {
        classic: cfg,
        consumer: &ccfg,
        topics: &t,
    };
    settle(g.join_any(req, &s, now))
}

#[test]
fn a_consumer_member_upgrades_a_classic_group_and_the_classic_member_rejoins_it() {
    let cfg = config(MigrationPolicy::Bidirectional);
    let mut g = classic_group(&cfg);
    let c1_epoch = upgrade(&mut g, &cfg, 10);
    assert_eq!(g.group_type(), "consumer");
    let c = g.consumer().unwrap();
    // The classic member keeps its assignment at its generation; c1's join bumped the epoch.
    assert_eq!(c.members["m1"].member_epoch, 1);
    assert!(c.members["m1"].classic.is_some());
    assert_eq!(c.group_epoch, 2);
    assert_eq!(c1_epoch, 2);
    assert!(
        c.members["c1"].assigned.is_empty(),
        "m1 has not released anything yet"
    );

    // m1's heartbeat asks it to rejoin; its stale sync is refused the same way.
    assert_eq!(
        g.heartbeat_any("m1", None, 1, 20),
        ResponseError::RebalanceInProgress.code()
    );
    assert_eq!(
        sync_assignment(&mut g, "m1", 1, 20),
        Err(ResponseError::RebalanceInProgress.code())
    );
    // A cooperative rejoin owning all four: it must first give two up, at its generation.
    let j = classic_join(&mut g, "m1", &[0, 1, 2, 3], 30);
    assert_eq!((j.error, j.generation), (0, 1));
    assert_eq!(j.protocol.as_deref(), Some("range"));
    assert_eq!(j.protocol_type.as_deref(), Some("consumer"));
    assert!(j.leader.is_empty() && j.members.is_empty());
    let kept = sync_assignment(&mut g, "m1", 1, 31).unwrap();
    assert_eq!(kept.values().map(BTreeSet::len).sum::<usize>(), 2);
    assert_eq!(
        g.heartbeat_any("m1", None, 1, 32),
        ResponseError::RebalanceInProgress.code()
    );
    let owned: Vec<i32> = kept[T].iter().copied().collect();
    let j = classic_join(&mut g, "m1", &owned, 40);
    assert_eq!((j.error, j.generation), (0, 2));
    assert_eq!(sync_assignment(&mut g, "m1", 2, 41).unwrap(), kept);
    assert_eq!(g.heartbeat_any("m1", None, 2, 42), 0);

    // c1 now gets the two m1 released; every partition has one owner.
    let ccfg = ConsumerGroupConfig::default();
    let hb = Heartbeat {
        member_id: "c1".into(),
        member_epoch: 2,
        rebalance_timeout_ms: -1,
        owned: Some(Assignment::new()),
        ..Default::default()
    };
    let a = g
        .drive_consumer(50, false, |c| c.heartbeat(hb, &topics(), &ccfg, 50))
        .unwrap()
        .unwrap();
    let c1: BTreeSet<i32> = a.assignment.unwrap()[T].clone();
    let m1: BTreeSet<i32> = kept[T].clone();
    assert!(c1.is_disjoint(&m1));
    assert_eq!(c1.len() + m1.len(), 4);
    assert_eq!(g.consumer().unwrap().state().name(), "Stable");
}

#[test]
fn the_last_consumer_member_leaving_downgrades_the_group_and_the_classic_member_rejoins() {
    let cfg = config(MigrationPolicy::Bidirectional);
    let mut g = classic_group(&cfg);
    upgrade(&mut g, &cfg, 10);
    // An eager member rejoins owning nothing and moves to the new epoch at once.
    let j = classic_join(&mut g, "m1", &[], 20);
    assert_eq!((j.error, j.generation), (0, 2));
    let target = g.consumer().unwrap().target["m1"].clone();
    assert_eq!(sync_assignment(&mut g, "m1", 2, 21).unwrap(), target);

    let ccfg = ConsumerGroupConfig::default();
    let leave = Heartbeat {
        member_id: "c1".into(),
        member_epoch: LEAVE_EPOCH,
        ..Default::default()
    };
    g.drive_consumer(30, false, |c| c.heartbeat(leave, &topics(), &ccfg, 30))
        .unwrap()
        .unwrap();
    assert!(g.maybe_downgrade(&cfg, 30));
    assert_eq!(g.group_type(), "classic");
    assert_eq!(g.state(), GroupState::PreparingRebalance);
    // The classic group starts at the consumer group's epoch, m1 holding its target.
    assert_eq!(g.generation, 2);
    assert_eq!(g.protocol(), Some("range"));
    let held = decode_assignment(&g.members()["m1"].assignment).unwrap().0;
    assert_eq!(held, target);
    assert_eq!(
        g.heartbeat_any("m1", None, 2, 31),
        ResponseError::RebalanceInProgress.code()
    );
    // It rejoins as a classic member, leads generation 3 and assigns everything to itself.
    let j = settle(g.join(join_req("m1", "range", &[]), &cfg, 32));
    assert_eq!((j.error, j.generation, j.leader.as_str()), (0, 3, "m1"));
    assert!(!g.maybe_downgrade(&cfg, 33), "a downgrade happens once");
}

#[test]
fn a_consumer_member_leaving_a_group_with_other_consumer_members_does_not_downgrade() {
    let cfg = config(MigrationPolicy::Bidirectional);
    let mut g = classic_group(&cfg);
    upgrade(&mut g, &cfg, 10);
    let ccfg = ConsumerGroupConfig::default();
    g.drive_consumer(11, false, |c| {
        c.heartbeat(consumer_join("c2"), &topics(), &ccfg, 11)
    })
    .unwrap()
    .unwrap();
    let leave = Heartbeat {
        member_id: "c1".into(),
        member_epoch: LEAVE_EPOCH,
        ..Default::default()
    };
    g.drive_consumer(12, false, |c| c.heartbeat(leave, &topics(), &ccfg, 12))
        .unwrap()
        .unwrap();
    assert!(!g.maybe_downgrade(&cfg, 12));
    assert_eq!(g.group_type(), "consumer");
    // The classic member leaving by LeaveGroup is not a downgrade either: no classic member
    // is left, and the group stays a consumer group.
    let (codes, stored) = g.leave_any(&[("m1".into(), None), ("nobody".into(), None)], &cfg, 13);
    assert_eq!(codes, vec![0, ResponseError::UnknownMemberId.code()]);
    assert!(!stored);
    assert_eq!(g.group_type(), "consumer");
}

#[test]
fn the_downgrade_waits_for_the_policy_and_the_classic_group_size() {
    for (policy, max_size) in [
        (MigrationPolicy::Upgrade, 10),
        (MigrationPolicy::Bidirectional, 0),
    ] {
        let mut cfg = config(policy);
        let mut g = classic_group(&cfg);
        upgrade(&mut g, &cfg, 10);
        cfg.max_size = max_size;
        let ccfg = ConsumerGroupConfig::default();
        let leave = Heartbeat {
            member_id: "c1".into(),
            member_epoch: LEAVE_EPOCH,
            ..Default::default()
        };
        g.drive_consumer(30, false, |c| c.heartbeat(leave, &topics(), &ccfg, 30))
            .unwrap()
            .unwrap();
        assert!(!g.maybe_downgrade(&cfg, 30), "{policy:?} {max_size}");
        assert_eq!(g.group_type(), "consumer");
        // The classic member carries on in the consumer group.
        assert_eq!(
            g.heartbeat_any("m1", None, 1, 31),
            ResponseError::RebalanceInProgress.code()
        );
    }
}

#[test]
fn upgrades_kafka_refuses_are_refused_with_its_messages() {
    let ccfg = ConsumerGroupConfig::default();
    let cfg = config(MigrationPolicy::Downgrade);
    let g = classic_group(&cfg);
    let e = g.upgraded(&cfg, &ccfg, &topics(), 5).unwrap_err();
    assert_eq!(e.error, ResponseError::GroupIdNotFound);
    assert_eq!(
        e.message,
        "Cannot upgrade classic group g to consumer group because online upgrade is disabled."
    );
    let cfg = config(MigrationPolicy::Bidirectional);
    let small = ConsumerGroupConfig {
        max_size: 0,
        ..Default::default()
    };
    let e = g.upgraded(&cfg, &small, &topics(), 5).unwrap_err();
    assert!(e
        .message
        .ends_with("because the group size exceeds the consumer group maximum size."));

    // A group of another embedded protocol (Connect's) cannot become a consumer group.
    let mut connect = Group::with_member_ids("w", 0, Box::new(|_| "w1".to_string()));
    let mut req = join_req("", "sessioned", &[]);
    req.protocol_type = "connect".into();
    req.require_known_member_id = false;
    settle(connect.join(req, &cfg, 0));
    let e = connect.upgraded(&cfg, &ccfg, &topics(), 5).unwrap_err();
    assert!(e
        .message
        .ends_with("because the group does not use the consumer embedded protocol."));

    // A custom assignor's user data would be lost.
    let mut custom = classic_group(&cfg);
    let with_data = {
        let mut b = BytesMut::new();
        b.extend_from_slice(&0i16.to_be_bytes());
        kafka_protocol::messages::ConsumerProtocolAssignment::default()
            .with_user_data(Some(Bytes::from_static(b"state")))
            .encode(&mut b, 0)
            .unwrap();
        b.freeze()
    };
    custom.members.get_mut("m1").unwrap().assignment = with_data;
    let e = custom.upgraded(&cfg, &ccfg, &topics(), 5).unwrap_err();
    assert!(
        e.message
            .contains("an unsupported custom assignor is in use"),
        "{}",
        e.message
    );
    assert_eq!(custom.group_type(), "classic");
}

#[test]
fn classic_requests_to_a_consumer_group_get_kafkas_errors() {
    let cfg = config(MigrationPolicy::Bidirectional);
    let mut g = classic_group(&cfg);
    upgrade(&mut g, &cfg, 10);
    // A consumer-protocol member is not a classic one.
    assert_eq!(
        g.heartbeat_any("c1", None, 2, 11),
        ResponseError::UnknownMemberId.code()
    );
    assert_eq!(
        g.heartbeat_any("m1", None, 7, 11),
        ResponseError::IllegalGeneration.code()
    );
    assert_eq!(
        g.heartbeat_any("m1", Some("i1"), 1, 11),
        ResponseError::UnknownMemberId.code()
    );
    // A new member must ask for an id, then a protocol every classic member has.
    let j = classic_join(&mut g, "", &[], 12);
    assert_eq!(j.error, ResponseError::MemberIdRequired.code());
    assert!(!j.member_id.is_empty());
    let other = join_with(&mut g, join_req(&j.member_id, "roundrobin", &[]), &cfg, 13);
    assert_eq!(other.error, ResponseError::InconsistentGroupProtocol.code());
    let mut connect = join_req(&j.member_id, "range", &[]);
    connect.protocol_type = "connect".into();
    assert_eq!(
        join_with(&mut g, connect, &cfg, 13).error,
        ResponseError::InconsistentGroupProtocol.code()
    );
    // With migration disabled no classic member joins a consumer group.
    let off = config(MigrationPolicy::Disabled);
    assert_eq!(
        join_with(&mut g, join_req("m1", "range", &[]), &off, 14).error,
        ResponseError::InconsistentGroupProtocol.code()
    );
    // A sync naming another protocol than the one it was told.
    let j = classic_join(&mut g, "m1", &[], 15);
    let (reply, _) = g.sync_any(
        "m1",
        None,
        j.generation,
        (Some("consumer"), Some("roundrobin")),
        vec![],
        16,
    );
    assert_eq!(
        settle(reply).error,
        ResponseError::InconsistentGroupProtocol.code()
    );
    // A commit of a classic member at another generation is ILLEGAL_GENERATION, not
    // STALE_MEMBER_EPOCH.
    let newer = Committer {
        member_id: "m1",
        instance: None,
        generation: j.generation + 1,
    };
    assert_eq!(
        g.check_commit(&newer).unwrap_err(),
        ResponseError::IllegalGeneration
    );
}

#[test]
fn a_classic_member_that_does_not_rejoin_in_time_is_fenced_and_the_group_goes_on() {
    let cfg = config(MigrationPolicy::Bidirectional);
    let mut g = classic_group(&cfg);
    upgrade(&mut g, &cfg, 10);
    assert_eq!(
        g.heartbeat_any("m1", None, 1, 100),
        ResponseError::RebalanceInProgress.code()
    );
    // It keeps heartbeating but never rejoins: its 30 s rebalance timeout runs out.
    assert_eq!(
        g.heartbeat_any("m1", None, 1, 20_000),
        ResponseError::RebalanceInProgress.code()
    );
    assert_eq!(
        g.heartbeat_any("m1", None, 1, 29_000),
        ResponseError::RebalanceInProgress.code()
    );
    let expired = g
        .drive_consumer(30_099, false, |c| c.expire(30_099))
        .unwrap();
    assert!(expired.is_empty());
    let expired = g
        .drive_consumer(30_100, false, |c| c.expire(30_100))
        .unwrap();
    assert_eq!(expired, vec!["m1".to_string()]);
    assert!(
        !g.maybe_downgrade(&cfg, 30_100),
        "no classic member is left"
    );
    assert_eq!(g.consumer().unwrap().members.len(), 1);
}

/// A classic group of static member `m1` (instance `i1`) owning all four partitions.
fn static_classic_group(cfg: &GroupConfig) -> Group {
    let mut g = Group::with_member_ids("g", 0, Box::new(|_| "m1".to_string()));
    let mut req = join_req("", "range", &[]);
    req.group_instance_id = Some("i1".into());
    let joined = settle(g.join(req, cfg, 0));
    assert_eq!(
        (joined.error, joined.generation, joined.member_id.as_str()),
        (0, 1, "m1")
    );
    let all =
        super::super::super::consumer_protocol::encode_assignment(&partitions(&[0, 1, 2, 3]), 3);
    let (sync, _) = g.sync("m1", Some("i1"), 1, vec![("m1".into(), all)], 0);
    assert_eq!(settle(sync).error, 0);
    g
}

#[test]
fn a_rolling_upgrade_replaces_a_classic_static_member_with_a_consumer_one() {
    let cfg = config(MigrationPolicy::Bidirectional);
    let mut g = static_classic_group(&cfg);
    let ccfg = ConsumerGroupConfig::default();
    // The same instance restarts with the consumer protocol and a new member id.
    let mut hb = consumer_join("m1-new");
    hb.instance_id = Some("i1".into());
    let mut c = g.upgraded(&cfg, &ccfg, &topics(), 10).expect("upgrade");
    let a = c
        .heartbeat(hb, &topics(), &ccfg, 10)
        .expect("takes over the instance id");
    g.install_consumer_group(c, 10);
    let c = g.consumer().unwrap();
    assert_eq!(c.members.len(), 1);
    let m = &c.members["m1-new"];
    assert!(m.classic.is_none(), "it uses the consumer protocol now");
    assert_eq!(
        a.assignment
            .unwrap()
            .values()
            .map(BTreeSet::len)
            .sum::<usize>(),
        4
    );
    // Its heartbeats keep it (no classic sync deadline is left to fence it).
    let beat = Heartbeat {
        member_id: "m1-new".into(),
        member_epoch: a.member_epoch,
        instance_id: Some("i1".into()),
        rebalance_timeout_ms: -1,
        owned: Some(partitions(&[0, 1, 2, 3])),
        ..Default::default()
    };
    g.drive_consumer(40_000, false, |c| {
        c.heartbeat(beat, &topics(), &ccfg, 40_000)
    })
    .unwrap()
    .unwrap();
    assert!(g
        .drive_consumer(40_001, false, |c| c.expire(40_001))
        .unwrap()
        .is_empty());
}

#[test]
fn a_classic_static_member_replacing_the_last_consumer_one_downgrades_the_group() {
    let cfg = config(MigrationPolicy::Bidirectional);
    let mut g = classic_group(&cfg);
    let ccfg = ConsumerGroupConfig::default();
    let mut c = g.upgraded(&cfg, &ccfg, &topics(), 10).expect("upgrade");
    let mut hb = consumer_join("c1");
    hb.instance_id = Some("i9".into());
    c.heartbeat(hb, &topics(), &ccfg, 10).unwrap();
    g.install_consumer_group(c, 10);
    // m1 catches up with the new target, eagerly.
    let j = classic_join(&mut g, "m1", &[], 20);
    assert_eq!((j.error, j.generation), (0, 2));
    // Instance i9 restarts as a classic member: no consumer-protocol member is left.
    let mut req = join_req("", "range", &[]);
    req.group_instance_id = Some("i9".into());
    let j = join_with(&mut g, req, &cfg, 30);
    assert_eq!(j.error, 0);
    assert_eq!(g.group_type(), "classic");
    // The target was current: the group is Stable at the consumer group's epoch, each member
    // holding its target, and the new member syncs at its generation.
    assert_eq!(g.state(), GroupState::Stable);
    assert_eq!(g.generation, j.generation);
    let (reply, _) = g.sync_any(
        &j.member_id,
        Some("i9"),
        j.generation,
        (None, None),
        vec![],
        31,
    );
    let r = settle(reply);
    assert_eq!(r.error, 0);
    let held = decode_assignment(&r.assignment).unwrap().0;
    let m1 = decode_assignment(&g.members()["m1"].assignment).unwrap().0;
    let count = |a: &Assignment| a.values().map(BTreeSet::len).sum::<usize>();
    assert_eq!(count(&held) + count(&m1), 4);
    assert!(count(&held) > 0);
}

#[test]
fn fencing_a_consumer_and_a_classic_member_together_still_downgrades() {
    let cfg = config(MigrationPolicy::Bidirectional);
    let mut g = classic_group(&cfg);
    upgrade(&mut g, &cfg, 10);
    // A second classic member joins the consumer group (asking for its id first).
    let j = classic_join(&mut g, "", &[], 11);
    let j = classic_join(&mut g, &j.member_id, &[], 11);
    assert_eq!(j.error, 0);
    // c1 and m1 go in one LeaveGroup: the new member remains, classic.
    let (codes, stored) = g.leave_any(&[("c1".into(), None), ("m1".into(), None)], &cfg, 12);
    assert_eq!(codes, vec![0, 0]);
    assert!(stored);
    assert_eq!(g.group_type(), "classic");
    assert_eq!(
        g.members().keys().cloned().collect::<Vec<_>>(),
        vec![j.member_id]
    );
}

#[test]
fn a_classic_join_to_a_consumer_group_checks_the_session_timeout() {
    let cfg = config(MigrationPolicy::Bidirectional);
    let mut g = classic_group(&cfg);
    upgrade(&mut g, &cfg, 10);
    let mut req = join_req("m1", "range", &[]);
    req.session_timeout_ms = 1;
    assert_eq!(
        join_with(&mut g, req, &cfg, 11).error,
        ResponseError::InvalidSessionTimeout.code()
    );
}
