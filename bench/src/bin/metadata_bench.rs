//! Metadata history against restart time and disk use: a single-voter controller creates and
//! deletes topics over and over; at checkpoints it is closed, its RocksDB directory measured
//! and the time to open it again (restore the snapshot, replay the entries after it) taken,
//! once without snapshots and once with a snapshot every 1 MiB of records.
//!
//! `cargo run --release -p tern-bench --bin metadata-bench -- [cycles]` (default 10000).

use std::path::Path;
use std::time::{Duration, Instant};

use tern_controller::SnapshotPolicy;
use tern_controller::{
    BrokerEndpoint, BrokerRegistration, ControllerConfig, CreateTopic, QuorumConfig,
};

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| match e.metadata() {
                    Ok(m) if m.is_dir() => dir_bytes(&e.path()),
                    Ok(m) => m.len(),
                    Err(_) => 0,
                })
                .sum()
        })
        .unwrap_or(0)
}

fn main() {
    let cycles: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let checkpoints: Vec<usize> = [cycles / 10, cycles / 2, cycles]
        .into_iter()
        .filter(|c| *c > 0)
        .collect();
    let policies = [
        ("no snapshots", u64::MAX),
        ("snapshot every 1 MiB", 1024 * 1024),
    ];
    println!("| policy | cycles | metadata dir | reopen | log starts at |");
    println!("|---|---|---|---|---|");
    for (name, max_bytes) in policies {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut quorum = QuorumConfig::single_voter(dir.path(), 0);
        quorum.snapshots = SnapshotPolicy {
            max_bytes_between: max_bytes,
            max_interval: Duration::from_secs(3600),
        };
        let config = ControllerConfig {
            num_partitions: 1,
            default_replication_factor: 1,
            leader_rebalance: Default::default(),
            unclean_leader_election: false,
            compaction_lag_defaults: (0, i64::MAX),
        };
        let open = || tern_controller::start(&quorum, config.clone()).expect("open controller");
        let mut controller = open();
        controller
            .register_broker(BrokerRegistration {
                broker_id: 0,
                incarnation_id: uuid::Uuid::new_v4(),
                endpoints: vec![BrokerEndpoint {
                    listener: "PLAINTEXT".into(),
                    host: "127.0.0.1".into(),
                    port: 9092,
                }],
                rack: None,
            })
            .expect("register");
        let mut done = 0;
        for &checkpoint in &checkpoints {
            while done < checkpoint {
                let topic = CreateTopic {
                    name: format!("churn-{done}"),
                    num_partitions: 4,
                    replication_factor: 1,
                    configs: vec![("retention.ms".into(), "60000".into())],
                    ..CreateTopic::default()
                };
                controller.create_topic(&topic, false).expect("create");
                controller.delete_topic(&topic.name).expect("delete");
                done += 1;
            }
            drop(controller);
            let bytes = dir_bytes(dir.path());
            let started = Instant::now();
            controller = open();
            let reopen = started.elapsed();
            let first = controller.quorum().map_or(0, |q| q.status().first_index);
            println!(
                "| {name} | {done} | {:.1} MiB | {} ms | {first} |",
                bytes as f64 / (1024.0 * 1024.0),
                reopen.as_millis()
            );
        }
    }
}
