//! Three voters of the metadata quorum over TCP on loopback, in one process: election,
//! forwarded commands, a killed active controller, a restarted voter catching up, an observer,
//! broker fencing, and the bad inputs the controller listener refuses.

use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tern_controller::wire::{read_frame, to_json, write_frame, FrameKind, Hello};
use tern_controller::BrokerRegistration;
use tern_controller::SnapshotPolicy;
use tern_controller::{
    BrokerEndpoint, Controller, ControllerConfig, CreateTopic, MetadataImage, QuorumConfig,
};
use tern_protocol::error::ResponseError;
use uuid::Uuid;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

struct Cluster {
    dirs: Vec<tempfile::TempDir>,
    voters: Vec<(i32, String)>,
    nodes: Vec<Option<Arc<Controller>>>,
    session_timeout: Duration,
    snapshots: SnapshotPolicy,
}

impl Cluster {
    fn new(size: usize, session_timeout: Duration) -> Cluster {
        Self::with_snapshots(size, session_timeout, SnapshotPolicy::default())
    }

    fn with_snapshots(
        size: usize,
        session_timeout: Duration,
        snapshots: SnapshotPolicy,
    ) -> Cluster {
        let voters: Vec<(i32, String)> = (0..size)
            .map(|i| (i as i32, format!("127.0.0.1:{}", free_port())))
            .collect();
        let mut c = Cluster {
            dirs: (0..size).map(|_| tempfile::tempdir().unwrap()).collect(),
            voters,
            nodes: (0..size).map(|_| None).collect(),
            session_timeout,
            snapshots,
        };
        for i in 0..size {
            c.start(i);
        }
        c
    }

    fn quorum_config(&self, i: usize) -> QuorumConfig {
        QuorumConfig {
            session_timeout: self.session_timeout,
            ..node_config(
                i as i32,
                self.voters.clone(),
                true,
                self.dirs[i].path(),
                Some(self.voters[i].1.clone()),
                self.snapshots,
            )
        }
    }

    fn start(&mut self, i: usize) {
        let config = controller_config();
        // The previous incarnation's port may take a moment to be released.
        let deadline = Instant::now() + Duration::from_secs(10);
        let node = loop {
            match tern_controller::start(&self.quorum_config(i), config.clone()) {
                Ok(n) => break n,
                Err(e) if Instant::now() < deadline && e.to_string().contains("bind") => {
                    std::thread::sleep(Duration::from_millis(100))
                }
                Err(e) => panic!("node {i}: {e}"),
            }
        };
        self.nodes[i] = Some(node);
    }

    /// Stops node `i` as a crash would look to the others (its threads end, its port closes).
    fn kill(&mut self, i: usize) {
        let node = self.nodes[i].take().expect("node is running");
        // Housekeeping may hold it for a moment; the last handle stops its threads.
        wait_for("the node's last handle", Duration::from_secs(10), || {
            Arc::strong_count(&node) == 1
        });
        drop(node);
    }

    fn node(&self, i: usize) -> &Arc<Controller> {
        self.nodes[i].as_ref().expect("node is running")
    }

    fn running(&self) -> impl Iterator<Item = (usize, &Arc<Controller>)> {
        self.nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n.as_ref().map(|n| (i, n)))
    }

    fn active(&self) -> Option<usize> {
        let active: Vec<usize> = self
            .running()
            .filter(|(_, n)| n.is_active())
            .map(|(i, _)| i)
            .collect();
        assert!(active.len() <= 1, "two active controllers: {active:?}");
        active.first().copied()
    }

    fn wait_for_active(&self) -> usize {
        let mut found = None;
        wait_for("an active controller", Duration::from_secs(20), || {
            found = self.active();
            found.is_some()
        });
        found.unwrap()
    }

    /// Registers brokers 0..n (through node 0's controller) so topics can be placed.
    fn register_brokers(&self, n: i32) {
        let node = self.running().next().unwrap().1.clone();
        for id in 0..n {
            node.register_broker(registration(id)).unwrap();
        }
    }

    fn wait_all(&self, what: &str, ok: impl Fn(&MetadataImage) -> bool) {
        wait_for(what, Duration::from_secs(20), || {
            self.running().all(|(_, n)| ok(&n.image()))
        });
    }
}

/// The controller defaults every test node uses.
fn controller_config() -> ControllerConfig {
    ControllerConfig {
        num_partitions: 1,
        default_replication_factor: 1,
        leader_rebalance: Default::default(),
        unclean_leader_election: false,
        compaction_lag_defaults: (0, i64::MAX),
    }
}

/// Node `node_id` of a quorum of `voters`, keeping its log in `dir`.
fn node_config(
    node_id: i32,
    voters: Vec<(i32, String)>,
    is_voter: bool,
    dir: &std::path::Path,
    listener: Option<String>,
    snapshots: SnapshotPolicy,
) -> QuorumConfig {
    QuorumConfig {
        node_id,
        voters,
        is_voter,
        metadata_dir: dir.to_path_buf(),
        listener,
        cluster_id: None,
        session_timeout: Duration::from_secs(60),
        snapshots,
    }
}

fn registration(id: i32) -> BrokerRegistration {
    BrokerRegistration {
        broker_id: id,
        incarnation_id: Uuid::new_v4(),
        endpoints: vec![BrokerEndpoint {
            listener: "PLAINTEXT".into(),
            host: "127.0.0.1".into(),
            port: 9092 + id as u16,
        }],
        rack: Some(format!("rack-{id}")),
    }
}

fn topic(name: &str) -> CreateTopic {
    CreateTopic {
        name: name.into(),
        num_partitions: 3,
        replication_factor: 1,
        ..CreateTopic::default()
    }
}

#[test]
fn three_voters_elect_one_active_controller_and_every_node_applies_every_command() {
    let cluster = Cluster::new(3, Duration::from_secs(60));
    cluster.wait_for_active();
    cluster.wait_all("the cluster id", |i| i.cluster_id.is_some());
    let ids: Vec<String> = cluster
        .running()
        .map(|(_, n)| n.image().cluster_id.clone().unwrap())
        .collect();
    assert!(
        ids.iter().all(|id| *id == ids[0]),
        "one cluster id: {ids:?}"
    );
    // Commands sent to any node, the followers' forwarded to the active controller.
    for i in 0..3 {
        cluster
            .node(i)
            .register_broker(registration(i as i32))
            .unwrap();
    }
    let follower = (0..3).find(|i| Some(*i) != cluster.active()).unwrap();
    let id = cluster
        .node(follower)
        .create_topic(&topic("orders"), false)
        .unwrap();
    // Answered once applied on the node that was asked.
    let image = cluster.node(follower).image();
    assert_eq!(image.topic("orders").map(|t| t.id), Some(id));
    assert_eq!(image.brokers.len(), 3);
    // Placement spread the partitions over the three brokers.
    let leaders: std::collections::BTreeSet<i32> = image
        .topic("orders")
        .unwrap()
        .partitions
        .values()
        .map(|p| p.leader)
        .collect();
    assert_eq!(leaders.len(), 3, "{leaders:?}");
    let err = cluster
        .node(follower)
        .create_topic(&topic("orders"), false)
        .unwrap_err();
    assert_eq!(err.error, ResponseError::TopicAlreadyExists);
    cluster.wait_all("the topic on every node", |i| {
        i.topic("orders").map(|t| t.id) == Some(id)
    });
    // Every node applied the same records in the same order.
    let offsets: Vec<u64> = cluster.running().map(|(_, n)| n.image().offset).collect();
    assert!(offsets.iter().all(|o| *o == offsets[0]), "{offsets:?}");
    let q = cluster.node(follower).describe_quorum().unwrap();
    assert_eq!(q.voters.len(), 3);
    assert_eq!(Some(q.leader_id as usize), cluster.active());
}

#[test]
fn a_killed_active_controller_is_replaced_and_no_acknowledged_command_is_lost() {
    let mut cluster = Cluster::new(3, Duration::from_secs(60));
    cluster.wait_for_active();
    cluster.register_brokers(3);
    let mut created = Vec::new();
    for round in 0..3 {
        let active = cluster.wait_for_active();
        let name = format!("before-kill-{round}");
        cluster
            .node(active)
            .create_topic(&topic(&name), false)
            .unwrap();
        created.push(name);
        cluster.kill(active);
        let next = cluster.wait_for_active();
        assert_ne!(next, active);
        // Metadata operations continue on the two that are left, through either of them.
        for (i, _) in cluster.running().collect::<Vec<_>>() {
            let name = format!("after-kill-{round}-via-{i}");
            cluster.node(i).create_topic(&topic(&name), false).unwrap();
            created.push(name);
        }
        cluster.start(active);
    }
    cluster.wait_all("every acknowledged topic on every node", |i| {
        created.iter().all(|t| i.topic(t).is_some())
    });
    let offsets: Vec<u64> = cluster.running().map(|(_, n)| n.image().offset).collect();
    assert!(offsets.iter().all(|o| *o == offsets[0]), "{offsets:?}");
}

#[test]
fn a_minority_cannot_commit_and_the_majority_goes_on() {
    let mut cluster = Cluster::new(3, Duration::from_secs(60));
    let active = cluster.wait_for_active();
    cluster.register_brokers(3);
    let others: Vec<usize> = (0..3).filter(|i| *i != active).collect();
    // Cut the active controller off from both others by killing them: alone it cannot commit.
    cluster.kill(others[0]);
    cluster.kill(others[1]);
    let lone = cluster.node(active).clone();
    let err = lone.create_topic(&topic("lonely"), false).unwrap_err();
    assert_eq!(err.error, ResponseError::NotController, "{err}");
    assert!(lone.image().topic("lonely").is_none());
    // check_quorum: it steps down instead of acting as leader without a majority.
    wait_for(
        "the lone leader to step down",
        Duration::from_secs(10),
        || !lone.is_active(),
    );
    drop(lone);
    cluster.start(others[0]);
    cluster.start(others[1]);
    cluster.wait_for_active();
    cluster
        .node(others[0])
        .create_topic(&topic("together"), false)
        .unwrap();
    cluster.wait_all("the topic", |i| i.topic("together").is_some());
    // The refused command's entry may still commit later (the lone leader's log may win the
    // next election, as in Raft and KRaft: an unanswered command's outcome is unknown), but
    // every node agrees on whether it did.
    let offsets: Vec<u64> = cluster.running().map(|(_, n)| n.image().offset).collect();
    cluster.wait_all("equal images", |i| {
        i.offset == offsets.iter().copied().max().unwrap()
    });
    let lonely: Vec<bool> = cluster
        .running()
        .map(|(_, n)| n.image().topic("lonely").is_some())
        .collect();
    assert!(lonely.iter().all(|l| *l == lonely[0]), "{lonely:?}");
}

#[test]
fn an_observer_follows_the_log_and_forwards_its_commands() {
    let cluster = Cluster::new(3, Duration::from_secs(60));
    cluster.wait_for_active();
    let dir = tempfile::tempdir().unwrap();
    let observer = tern_controller::start(
        &node_config(
            10,
            cluster.voters.clone(),
            false,
            dir.path(),
            None,
            SnapshotPolicy::default(),
        ),
        controller_config(),
    )
    .unwrap();
    assert!(!observer.is_active());
    observer.register_broker(registration(10)).unwrap();
    let id = observer
        .create_topic(&topic("seen-by-observer"), false)
        .unwrap();
    assert_eq!(
        observer.image().topic("seen-by-observer").map(|t| t.id),
        Some(id)
    );
    cluster
        .node(0)
        .create_topic(&topic("from-a-voter"), false)
        .unwrap();
    wait_for(
        "the observer to apply a voter's change",
        Duration::from_secs(10),
        || observer.image().topic("from-a-voter").is_some(),
    );
    let q = cluster.node(0).describe_quorum().unwrap();
    assert_eq!(
        q.observers.iter().map(|o| o.node_id).collect::<Vec<_>>(),
        vec![10]
    );
    assert!(q.observers[0].log_end_offset > 0, "{q:?}");
}

#[test]
fn silent_brokers_are_fenced_and_return_with_their_partitions() {
    let cluster = Cluster::new(3, Duration::from_millis(1500));
    cluster.wait_for_active();
    let b7 = registration(7);
    let node = cluster.node(0);
    node.register_broker(b7.clone()).unwrap();
    let t = CreateTopic {
        assignments: vec![vec![7]],
        num_partitions: -1,
        replication_factor: -1,
        ..topic("on-seven")
    };
    node.create_topic(&t, false).unwrap();
    // A second process with node id 7 is refused while the first still heartbeats.
    let err = node.register_broker(registration(7)).unwrap_err();
    assert_eq!(
        err.error,
        ResponseError::DuplicateBrokerRegistration,
        "{err}"
    );
    let leader = |i: &MetadataImage| i.topic("on-seven").unwrap().partitions[&0].clone();
    let epoch = leader(&node.image()).leader_epoch;
    // No heartbeats: fenced, and its partition has no leader.
    cluster.wait_all("broker 7 fenced", |i| {
        i.brokers[&7].fenced && leader(i).leader == -1
    });
    // A heartbeat brings it back as the leader, in a new epoch.
    node.broker_heartbeat(7, b7.incarnation_id).unwrap();
    cluster.wait_all("broker 7 back", |i| {
        !i.brokers[&7].fenced && leader(i).leader == 7
    });
    assert_eq!(leader(&node.image()).leader_epoch, epoch + 2);
    // A heartbeat from an incarnation the controller does not know must register again.
    let err = node.broker_heartbeat(7, Uuid::new_v4()).unwrap_err();
    assert_eq!(err.error, ResponseError::StaleBrokerEpoch);
    // A controlled shutdown fences at once.
    node.controlled_shutdown(7, b7.incarnation_id).unwrap();
    assert!(node.image().brokers[&7].fenced);
}

#[test]
fn the_controller_listener_refuses_other_quorums_clusters_and_garbage() {
    let cluster = Cluster::new(3, Duration::from_secs(60));
    cluster.wait_for_active();
    cluster.wait_all("the cluster id", |i| i.cluster_id.is_some());
    cluster.register_brokers(1);
    let addr = cluster.voters[0].1.clone();
    let hello = |h: &Hello| {
        let mut s = TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        write_frame(&mut s, FrameKind::RaftHello, &to_json(h).unwrap()).unwrap();
        read_frame(&mut s).unwrap()
    };
    let refused = |answer: Option<(FrameKind, Vec<u8>)>| match answer {
        Some((FrameKind::Refused, why)) => String::from_utf8(why).unwrap(),
        other => panic!("not refused: {other:?}"),
    };
    // Voters that disagree with this quorum's.
    let why = refused(hello(&Hello {
        cluster_id: None,
        from: 2,
        voters: vec![1, 2],
        last_index: 0,
    }));
    assert!(why.contains("voters disagree"), "{why}");
    // Another cluster.
    let why = refused(hello(&Hello {
        cluster_id: Some("AnotherClusterId012345".into()),
        from: 2,
        voters: vec![1, 2, 3],
        last_index: 0,
    }));
    assert!(why.contains("cluster id"), "{why}");
    // A raft id that is not a voter, or this voter's own.
    let why = refused(hello(&Hello {
        cluster_id: None,
        from: 1,
        voters: vec![1, 2, 3],
        last_index: 0,
    }));
    assert!(why.contains("not another voter"), "{why}");
    // Garbage: an oversized frame, an unknown kind. The connection closes; the node serves on.
    for bytes in [vec![0xff, 0xff, 0xff, 0xff, 1], vec![0, 0, 0, 2, 99, 0]] {
        let mut s = TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        std::io::Write::write_all(&mut s, &bytes).unwrap();
        assert!(matches!(read_frame(&mut s), Ok(None) | Err(_)));
    }
    cluster
        .node(1)
        .create_topic(&topic("still-serving"), false)
        .unwrap();
}

/// Snapshots every few kilobytes of records.
fn small_snapshots() -> SnapshotPolicy {
    SnapshotPolicy {
        max_bytes_between: 4096,
        max_interval: Duration::from_secs(3600),
    }
}

fn first_index(c: &Controller) -> u64 {
    c.quorum().unwrap().status().first_index
}

#[test]
fn snapshots_truncate_the_log_and_a_wiped_voter_catches_up_from_one() {
    let mut cluster = Cluster::with_snapshots(3, Duration::from_secs(60), small_snapshots());
    cluster.wait_for_active();
    // The active controller writes the cluster id in its housekeeping: before the images are
    // compared, every node has it.
    cluster.wait_all("the cluster id", |i: &MetadataImage| i.cluster_id.is_some());
    cluster.register_brokers(3);
    for i in 0..40 {
        cluster
            .node(i % 3)
            .create_topic(&topic(&format!("t{i}")), false)
            .unwrap();
    }
    let all = |i: &MetadataImage| (0..40).all(|t| i.topic(&format!("t{t}")).is_some());
    cluster.wait_all("every topic", all);
    wait_for(
        "every voter to truncate its log",
        Duration::from_secs(10),
        || cluster.running().all(|(_, n)| first_index(n) > 20),
    );
    // A restart loads the snapshot and the entries after it.
    let before = cluster.node(1).image();
    cluster.kill(1);
    cluster.start(1);
    assert_eq!(*cluster.node(1).image(), *before);
    // A voter whose data is gone gets the leader's snapshot, then the rest.
    let victim = (0..3).find(|i| Some(*i) != cluster.active()).unwrap();
    cluster.kill(victim);
    let dir = cluster.dirs[victim].path().to_path_buf();
    std::fs::remove_dir_all(&dir).unwrap();
    for i in 40..50 {
        let n = (0..3).find(|n| *n != victim).unwrap();
        cluster
            .node(n)
            .create_topic(&topic(&format!("t{i}")), false)
            .unwrap();
    }
    cluster.start(victim);
    cluster.wait_all("the wiped voter caught up", |i| {
        (0..50).all(|t| i.topic(&format!("t{t}")).is_some())
    });
    let images: Vec<Arc<MetadataImage>> = cluster.running().map(|(_, n)| n.image()).collect();
    cluster.wait_all("equal images", |i| {
        i.offset == images[0].offset.max(i.offset)
    });
    let images: Vec<Arc<MetadataImage>> = cluster.running().map(|(_, n)| n.image()).collect();
    assert!(
        images.iter().all(|i| **i == *images[0]),
        "every voter's image is equal"
    );
    assert!(
        first_index(cluster.node(victim)) > 1,
        "it started from a snapshot"
    );
    // An observer that starts now begins from a snapshot too.
    let odir = tempfile::tempdir().unwrap();
    let observer = tern_controller::start(
        &node_config(
            10,
            cluster.voters.clone(),
            false,
            odir.path(),
            None,
            small_snapshots(),
        ),
        controller_config(),
    )
    .unwrap();
    wait_for("the observer", Duration::from_secs(10), || {
        (0..50).all(|t| observer.image().topic(&format!("t{t}")).is_some())
    });
}

#[test]
fn a_wiped_voter_catches_up_from_the_log_without_snapshots() {
    let mut cluster = Cluster::new(3, Duration::from_secs(60));
    cluster.wait_for_active();
    cluster.register_brokers(3);
    for i in 0..10 {
        cluster
            .node(i % 3)
            .create_topic(&topic(&format!("w{i}")), false)
            .unwrap();
    }
    let victim = (0..3).find(|i| Some(*i) != cluster.active()).unwrap();
    cluster.wait_all("every topic", |i| i.topic("w9").is_some());
    cluster.kill(victim);
    std::fs::remove_dir_all(cluster.dirs[victim].path()).unwrap();
    cluster.start(victim);
    cluster.wait_all("the wiped voter caught up", |i| {
        (0..10).all(|t| i.topic(&format!("w{t}")).is_some())
    });
    assert_eq!(
        first_index(cluster.node(victim)),
        1,
        "no snapshot was needed"
    );
}

#[test]
fn a_node_configured_with_other_voters_learns_it_is_refused() {
    let cluster = Cluster::new(3, Duration::from_secs(60));
    cluster.wait_for_active();
    let dir = tempfile::tempdir().unwrap();
    // Node 1 of a two-voter quorum whose other voter is node 0 of the running cluster.
    let stranger = tern_controller::start(
        &node_config(
            1,
            vec![
                (0, cluster.voters[0].1.clone()),
                (1, format!("127.0.0.1:{}", free_port())),
            ],
            true,
            dir.path(),
            None,
            SnapshotPolicy::default(),
        ),
        controller_config(),
    );
    // Without a listener a voter of two cannot even start.
    let err = stranger.unwrap_err();
    assert!(err.to_string().contains("controller listener"), "{err}");
    let listener = format!("127.0.0.1:{}", free_port());
    let stranger = tern_controller::start(
        &node_config(
            1,
            vec![(0, cluster.voters[0].1.clone()), (1, listener.clone())],
            true,
            dir.path(),
            Some(listener),
            SnapshotPolicy::default(),
        ),
        controller_config(),
    )
    .unwrap();
    wait_for("the refusal", Duration::from_secs(10), || {
        stranger
            .peer_refusal()
            .is_some_and(|why| why.contains("voters disagree"))
    });
    assert!(stranger.image().cluster_id.is_none(), "it applied nothing");
}
