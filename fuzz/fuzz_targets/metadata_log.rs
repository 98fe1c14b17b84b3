//! Metadata-log records as a node replays its log: each committed raft entry's data decoded
//! (`MetadataState::decode`) and applied to the image, a snapshot payload decoded and restored,
//! then the image snapshotted, encoded, decoded and restored again, as a voter's snapshot and an
//! observer's fetch do.
//!
//! Input: lines (`\n`). The first byte's low bit set: the first line is a snapshot payload
//! restored before the rest; every other line is one raft entry's data.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tern_controller::acls::{
    AclBinding, AclOperation, AclPatternType, AclPermissionType, AclResourceType,
};
use tern_controller::{LogEntry, SnapshotPayload};
use tern_controller::{MetadataImage, MetadataRecord, MetadataState};
use tern_fuzz::seeds::{self, Seed};

fuzz_target!(init: seeds::write_if_asked(make_seeds), |data: &[u8]| run(data));

fn run(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let state = MetadataState::new();
    let mut lines = rest.split(|b| *b == b'\n');
    if selector & 1 != 0 {
        if let Ok(payload) = SnapshotPayload::decode(lines.next().unwrap_or_default()) {
            state.restore(payload);
        }
    }
    let mut index = state.snapshot().index;
    for line in lines {
        index += 1;
        if let Ok(records) = MetadataState::decode(index, line) {
            state.apply(LogEntry { index, records });
        }
    }
    let image = state.image();
    let _ = (image.live_brokers(), image.to_records());
    let encoded = state.snapshot().encode().expect("a snapshot encodes");
    let payload = SnapshotPayload::decode(&encoded).expect("an encoded snapshot decodes");
    let restored = MetadataState::new();
    restored.restore(payload.clone());
    let _ = MetadataImage::from_records(&payload.records, payload.offset);
}

/// A log that registers brokers, creates a topic with partitions and configs, reassigns,
/// marks a replica offline, fences, adds a mirror, SCRAM credentials and an ACL; a snapshot of
/// it; an empty entry.
fn make_seeds() -> Vec<Seed> {
    let entries = [
        r#"[{"ClusterId":{"cluster_id":"q1Sh-9_ISia_zwGINzRvyQ"}}]"#,
        r#"[{"RegisterBroker":{"broker_id":1,"host":"127.0.0.1","port":9092,"rack":null,"endpoints":[{"listener":"PLAINTEXT","host":"127.0.0.1","port":9092}],"incarnation_id":"00000000-0000-0000-0000-000000000001"}},{"RegisterBroker":{"broker_id":2,"host":"h2","port":9093,"rack":"r2"}}]"#,
        r#"[{"Topic":{"name":"orders","topic_id":"6f3ad2a4-8b1e-4c37-9a0e-5b4d1f2c3e4a"}},{"Partition":{"topic_id":"6f3ad2a4-8b1e-4c37-9a0e-5b4d1f2c3e4a","partition":0,"replicas":[1,2],"isr":[1,2],"leader":1,"leader_epoch":0,"partition_epoch":0}},{"Config":{"resource_type":"Topic","resource_name":"orders","name":"cleanup.policy","value":"compact"}}]"#,
        r#"[{"PartitionReassignment":{"topic_id":"6f3ad2a4-8b1e-4c37-9a0e-5b4d1f2c3e4a","partition":0,"adding":[3],"removing":[2]}},{"ReplicaOffline":{"topic_id":"6f3ad2a4-8b1e-4c37-9a0e-5b4d1f2c3e4a","partition":0,"broker_id":1}},{"FenceBroker":{"broker_id":2}},{"UnfenceBroker":{"broker_id":2}},{"ProducerIds":{"next_producer_id":1000}}]"#,
        r#"[{"ClusterMirror":{"name":"m","mirror_id":"00000000-0000-0000-0000-0000000000aa","configs":{"bootstrap.servers":"src:9092"}}},{"ScramCredential":{"user":"alice","mechanism":1,"salt":[1,2,3],"stored_key":[4],"server_key":[5],"iterations":4096}},{"RemoveScramCredential":{"user":"bob","mechanism":2}}]"#,
        r#"[{"Config":{"resource_type":"Broker","resource_name":"","name":"log.retention.ms","value":null}},{"RemoveClusterMirror":{"name":"m"}},{"RemoveTopic":{"topic_id":"6f3ad2a4-8b1e-4c37-9a0e-5b4d1f2c3e4a"}},{"RemoveAcl":{"id":"00000000-0000-0000-0000-0000000000bb"}}]"#,
        "",
    ];
    let acl = MetadataRecord::Acl {
        id: uuid::Uuid::from_u128(0xbb),
        acl: AclBinding {
            resource_type: AclResourceType::Topic,
            resource_name: "orders".into(),
            pattern_type: AclPatternType::Literal,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: AclOperation::Read,
            permission: AclPermissionType::Allow,
        },
    };
    let acl = serde_json::to_string(&[acl]).expect("an ACL record encodes");
    let mut entries = entries.to_vec();
    entries.insert(5, &acl);
    let log = entries.join("\n");
    let state = MetadataState::new();
    for (i, line) in entries.iter().enumerate() {
        let index = i as u64 + 1;
        let records = MetadataState::decode(index, line.as_bytes()).expect("a seed entry decodes");
        state.apply(LogEntry { index, records });
    }
    let snapshot = String::from_utf8(state.snapshot().encode().unwrap()).unwrap();
    vec![
        ("log".into(), [b"\0", log.as_bytes()].concat()),
        (
            "snapshot_then_log".into(),
            [b"\x01", snapshot.as_bytes(), b"\n", log.as_bytes()].concat(),
        ),
    ]
}
