//! `__consumer_offsets` as the group coordinator loads a partition on start
//! (`GroupCoordinator::load_partition`): batches decoded as `internal_topic::scan` reads them,
//! offset and group keys and values decoded and applied to the groups (transactional offsets
//! pending until their marker), then what the coordinator reads and writes back: each group's
//! metadata value re-encoded and decoded alike, its members' subscriptions parsed; share groups'
//! metadata and start offsets decoded and re-encoded alike.
//!
//! Input: batches back to back; their CRCs are fixed first (the log checked them on append).

#![no_main]

use std::collections::HashMap;

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use tern_broker::fuzzing::consumer_offsets::{
    decode_group_value, decode_key, decode_offset_value, decode_share_group_value,
    decode_share_offset_value, group_key, group_value, offset_key, offset_value, share_group_key,
    share_group_value, share_offset_key, share_offset_value, GroupMetadataValue, OffsetValue,
    OffsetsKey, StoredMember,
};
use tern_broker::fuzzing::{apply_offsets_records, Group};
use tern_fuzz::seeds::{self, Seed};
use tern_fuzz::NOW_MS;
use tern_protocol::record_batch::Compression;
use tern_protocol::records::{build_control_batch, control_record_type, ControlRecordType};

fuzz_target!(init: seeds::write_if_asked(make_seeds), |data: &[u8]| run(data));

fn run(data: &[u8]) {
    let mut buf = data.to_vec();
    tern_fuzz::fix_crcs(&mut buf);
    let mut groups: HashMap<String, Group> = HashMap::new();
    // One known topic, so that consumer-group records naming it by id load partitions.
    let topic_ids = std::collections::BTreeMap::from([("t".to_string(), uuid::Uuid::from_u128(1))]);
    tern_fuzz::scan(&buf, |header, records| {
        if header.is_control() {
            tern_fuzz::read_marker(&records);
            let kind = records.first().and_then(control_record_type);
            if let Some(t @ (ControlRecordType::Commit | ControlRecordType::Abort)) = kind {
                for g in groups.values_mut() {
                    g.complete_txn_offsets(header.producer_id, t == ControlRecordType::Commit);
                }
            }
            return;
        }
        // What the coordinator reads back re-encodes to the same value.
        for r in &records {
            let Some(value) = r.value.as_deref() else {
                continue;
            };
            match r.key.as_deref().and_then(decode_key) {
                Some(OffsetsKey::Offset { .. }) => {
                    if let Some(v) = decode_offset_value(value) {
                        let again = decode_offset_value(&offset_value(&v));
                        assert_eq!(again.as_ref(), Some(&v), "an offset value re-encodes");
                    }
                }
                Some(OffsetsKey::Group { .. }) => {
                    if let Some(v) = decode_group_value(value) {
                        let again = decode_group_value(&group_value(&v));
                        assert_eq!(again.as_ref(), Some(&v), "a group value re-encodes");
                    }
                }
                Some(OffsetsKey::ShareGroup { .. }) => {
                    if let Some(epoch) = decode_share_group_value(value) {
                        let again = decode_share_group_value(&share_group_value(epoch));
                        assert_eq!(again, Some(epoch), "a share group value re-encodes");
                    }
                }
                // Loaded below; their encoder is driven by unit tests.
                Some(OffsetsKey::Consumer { .. }) => {}
                Some(OffsetsKey::ShareStartOffset { .. }) => {
                    if let Some(v) = decode_share_offset_value(value) {
                        let again = decode_share_offset_value(&share_offset_value(&v, NOW_MS));
                        assert_eq!(again, Some(v), "a share start offset re-encodes");
                    }
                }
                None => {}
            }
        }
        let txn_producer = header.is_transactional().then_some(header.producer_id);
        apply_offsets_records(&mut groups, records, txn_producer, &topic_ids, NOW_MS);
    });
    for g in groups.values() {
        let _ = g.subscribed_topics();
        let stored = g.metadata_value(NOW_MS);
        let again = decode_group_value(&group_value(&stored));
        assert_eq!(
            again.as_ref(),
            Some(&stored),
            "a loaded group's metadata re-encodes"
        );
    }
}

/// Committed offsets, a group with members, a tombstone, transactional offsets with their
/// commit and abort markers.
fn make_seeds() -> Vec<Seed> {
    let offset = |o: i64| {
        Some(offset_value(&OffsetValue {
            offset: o,
            leader_epoch: 3,
            metadata: "meta".into(),
            commit_timestamp: NOW_MS,
        }))
    };
    // ConsumerProtocolSubscription v0: version, topics, user data.
    let subscription = Bytes::from_static(b"\0\0\0\0\0\x01\0\x06orders\xff\xff\xff\xff");
    let member = StoredMember {
        member_id: "consumer-1-5b1c".into(),
        group_instance_id: Some("instance-1".into()),
        client_id: "consumer-1".into(),
        client_host: "/127.0.0.1".into(),
        rebalance_timeout_ms: 300_000,
        session_timeout_ms: 45_000,
        subscription,
        assignment: Bytes::from_static(
            b"\0\0\0\0\0\x01\0\x06orders\0\0\0\x01\0\0\0\0\xff\xff\xff\xff",
        ),
    };
    let group = GroupMetadataValue {
        protocol_type: "consumer".into(),
        generation: 4,
        protocol: Some("range".into()),
        leader: Some(member.member_id.clone()),
        current_state_timestamp: NOW_MS,
        members: vec![member],
    };
    let plain = seeds::batch(
        Compression::None,
        None,
        &[
            (offset_key("g", "orders", 0), offset(42)),
            (offset_key("g", "orders", 1), offset(7)),
            (group_key("g"), Some(group_value(&group))),
            (offset_key("g", "orders", 1), None),
        ],
    );
    let txn = seeds::batch(
        Compression::None,
        Some((1000, 0)),
        &[(offset_key("g", "orders", 0), offset(50))],
    );
    let commit = build_control_batch(1000, 0, true, 5, NOW_MS)
        .unwrap()
        .to_vec();
    let abort = build_control_batch(1000, 0, false, 5, NOW_MS)
        .unwrap()
        .to_vec();
    let gone = seeds::batch(Compression::None, None, &[(group_key("g"), None)]);
    let gzip = seeds::batch(
        Compression::Gzip,
        None,
        &[(offset_key("h", "t", 0), offset(1))],
    );
    // A share group: its metadata, two start offsets, one deleted, then the group deleted.
    let start = |o: i64| {
        let v = decode_share_offset_value(&share_offset_value_seed(o)).expect("seed decodes");
        Some(share_offset_value(&v, NOW_MS))
    };
    let share = seeds::batch(
        Compression::None,
        None,
        &[
            (share_group_key("sg"), Some(share_group_value(2))),
            (share_offset_key("sg", "orders", 0), start(12)),
            (share_offset_key("sg", "orders", 1), start(40)),
            (share_offset_key("sg", "orders", 1), None),
        ],
    );
    let share_gone = seeds::batch(Compression::None, None, &[(share_group_key("sg"), None)]);
    vec![
        ("share_group".into(), share.clone()),
        (
            "share_group_tombstone".into(),
            [&share[..], &share_gone].concat(),
        ),
        ("offsets_and_group".into(), plain.clone()),
        ("txn_commit".into(), [&plain[..], &txn, &commit].concat()),
        ("txn_abort".into(), [&txn[..], &abort].concat()),
        ("group_tombstone".into(), [&plain[..], &gone].concat()),
        ("gzip".into(), gzip),
    ]
}

/// A ShareSnapshotValue v0 as Kafka writes it: start offset `o`, leader epoch 3, state epoch
/// 1, no state batches.
fn share_offset_value_seed(o: i64) -> Vec<u8> {
    let mut v = vec![0, 0]; // version
    v.extend(0i32.to_be_bytes()); // snapshot epoch
    v.extend(1i32.to_be_bytes()); // state epoch
    v.extend(3i32.to_be_bytes()); // leader epoch
    v.extend(o.to_be_bytes()); // start offset
    v.extend(NOW_MS.to_be_bytes()); // create timestamp
    v.extend(NOW_MS.to_be_bytes()); // write timestamp
    v.extend([1, 0]); // no state batches, no tagged fields
    v
}
