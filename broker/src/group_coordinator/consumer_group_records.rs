//! KIP-848 consumer groups in `__consumer_offsets`, in Kafka's own record formats, so that a
//! restarted or new coordinator carries the members on where they were (same member ids,
//! epochs, targets and owned partitions) instead of making each rejoin:
//! - type 3, ConsumerGroupMetadata: the group epoch;
//! - type 5, ConsumerGroupMemberMetadata: a member's subscription and client details;
//! - type 6, ConsumerGroupTargetAssignmentMetadata: the target assignment's epoch;
//! - type 7, ConsumerGroupTargetAssignmentMember: a member's target partitions;
//! - type 8, ConsumerGroupCurrentMemberAssignment: a member's epochs, state, owned partitions
//!   and those it must revoke.
//!
//! Topics are named by id, as Kafka names them; a topic no longer in the metadata is left
//! out when loading. Only what changed since the last write is written ([`changes`]).

use std::collections::BTreeMap;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tern_protocol::flexible::{
    get_compact_bytes, get_compact_len, get_compact_nullable_str, get_compact_str,
    get_tagged_fields, put_compact_bytes, put_compact_len, put_compact_nullable_str,
    put_compact_str, put_tagged_fields, put_uvarint,
};
use uuid::Uuid;

use super::assignor::Assignment;
use super::consumer_group::MemberState;
use super::offsets_topic::{get_str, put_str};

/// Record types (the first two bytes of the key).
const GROUP_METADATA: i16 = 3;
const MEMBER_METADATA: i16 = 5;
const TARGET_METADATA: i16 = 6;
const TARGET_MEMBER: i16 = 7;
const CURRENT_ASSIGNMENT: i16 = 8;

/// Topic ids and names, as the metadata image holds them.
pub trait TopicIds {
    /// The id of topic `name`.
    fn id_of(&self, name: &str) -> Option<Uuid>;
    /// The name of topic `id`.
    fn name_of(&self, id: Uuid) -> Option<String>;
}

/// What a member of the classic protocol told a consumer group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct StoredClassic {
    /// Its session timeout.
    pub session_timeout_ms: i32,
    /// Its protocols (name, metadata).
    pub protocols: Vec<(String, Bytes)>,
}

/// A member's subscription and client details (record 5).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct StoredMemberMetadata {
    /// Static membership id.
    pub instance_id: Option<String>,
    /// Rack.
    pub rack_id: Option<String>,
    /// Client id.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
    /// Subscribed topic names.
    pub topics: Vec<String>,
    /// Subscribed topic regex.
    pub regex: Option<String>,
    /// Rebalance timeout.
    pub rebalance_timeout_ms: i32,
    /// The server assignor it asks for.
    pub server_assignor: Option<String>,
    /// Set for a member of the classic protocol.
    pub classic: Option<StoredClassic>,
}

/// A member's reconciliation (record 8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredCurrent {
    /// Its epoch.
    pub member_epoch: i32,
    /// Its epoch before the last change.
    pub previous_member_epoch: i32,
    /// Reconciliation state.
    pub state: MemberState,
    /// Partitions it owns.
    pub assigned: Assignment,
    /// Partitions it must give up.
    pub pending_revocation: Assignment,
    /// The epoch at which each partition above was assigned to it.
    pub assignment_epochs: BTreeMap<(String, i32), i32>,
}

/// One member as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct StoredMember {
    /// Record 5.
    pub metadata: Option<StoredMemberMetadata>,
    /// Record 7.
    pub target: Option<Assignment>,
    /// Record 8.
    pub current: Option<StoredCurrent>,
}

/// What `__consumer_offsets` holds of a consumer group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct StoredConsumerGroup {
    /// Record 3: the group epoch.
    pub epoch: i32,
    /// Record 3: a hash of the subscribed topics' partition counts at that epoch (Kafka's
    /// MetadataHash field; Tern's own hash, see [`metadata_hash`]), so that a load sees
    /// whether they changed meanwhile.
    pub metadata_hash: i64,
    /// Record 6: the target assignment's epoch.
    pub assignment_epoch: i32,
    /// Records 5, 7 and 8 by member id.
    pub members: BTreeMap<String, StoredMember>,
}

/// The key of a consumer-group record: its type, the group and, for member records, the member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConsumerRecordKey {
    /// Record type (3, 5, 6, 7 or 8).
    pub kind: i16,
    /// Member id (records 5, 7 and 8).
    pub member: Option<String>,
}

fn key(kind: i16, group: &str, member: Option<&str>) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(kind);
    put_str(&mut b, group);
    if let Some(m) = member {
        put_str(&mut b, m);
    }
    b.freeze()
}

/// Decodes the rest of a key of type `kind` (after its type and group).
pub(crate) fn decode_key_rest(kind: i16, b: &mut &[u8]) -> Option<ConsumerRecordKey> {
    let member = match kind {
        GROUP_METADATA | TARGET_METADATA => None,
        MEMBER_METADATA | TARGET_MEMBER | CURRENT_ASSIGNMENT => Some(get_str(b)?),
        _ => return None,
    };
    Some(ConsumerRecordKey { kind, member })
}

/// Whether `kind` is a consumer-group record type.
pub(crate) fn is_consumer_record(kind: i16) -> bool {
    matches!(
        kind,
        GROUP_METADATA | MEMBER_METADATA | TARGET_METADATA | TARGET_MEMBER | CURRENT_ASSIGNMENT
    )
}

/// A value: version 0 of a flexible record, `body` then no tagged fields unless `tagged`.
fn value(body: impl FnOnce(&mut BytesMut), tagged: &[(u32, &[u8])]) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(0);
    body(&mut b);
    put_tagged_fields(&mut b, tagged);
    b.freeze()
}

fn epoch_value(epoch: i32) -> Bytes {
    value(|b| b.put_i32(epoch), &[])
}

fn group_metadata_value(epoch: i32, metadata_hash: i64) -> Bytes {
    let hash = metadata_hash.to_be_bytes();
    let tagged: &[(u32, &[u8])] = if metadata_hash == 0 {
        &[]
    } else {
        &[(0, &hash)]
    };
    value(|b| b.put_i32(epoch), tagged)
}

/// FNV-1a over the topics' names and partition counts: the same topics give the same hash in
/// every Tern version.
pub(crate) fn metadata_hash(topics: &BTreeMap<String, i32>) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for (name, count) in topics {
        eat(name.as_bytes());
        eat(&[0]);
        eat(&count.to_be_bytes());
    }
    h as i64
}

fn put_str_array(b: &mut BytesMut, items: &[String]) {
    put_compact_len(b, Some(items.len()));
    for s in items {
        put_compact_str(b, s);
    }
}

fn member_metadata_value(m: &StoredMemberMetadata) -> Bytes {
    // A tagged nullable struct, as Kafka's generated code writes it: a presence byte (0 for
    // null, which Kafka writes too), then the struct with its own tagged fields.
    let mut classic = BytesMut::new();
    match &m.classic {
        None => classic.put_u8(0),
        Some(c) => {
            classic.put_u8(1);
            classic.put_i32(c.session_timeout_ms);
            put_compact_len(&mut classic, Some(c.protocols.len()));
            for (name, metadata) in &c.protocols {
                put_compact_str(&mut classic, name);
                put_compact_bytes(&mut classic, metadata);
                put_uvarint(&mut classic, 0);
            }
            put_uvarint(&mut classic, 0);
        }
    }
    let tagged: [(u32, &[u8]); 1] = [(0, &classic[..])];
    value(
        |b| {
            put_compact_nullable_str(b, m.instance_id.as_deref());
            put_compact_nullable_str(b, m.rack_id.as_deref());
            put_compact_str(b, &m.client_id);
            put_compact_str(b, &m.client_host);
            put_str_array(b, &m.topics);
            put_compact_nullable_str(b, m.regex.as_deref());
            b.put_i32(m.rebalance_timeout_ms);
            put_compact_nullable_str(b, m.server_assignor.as_deref());
        },
        &tagged,
    )
}

/// Topic partitions by id, in topic-name order; topics without an id are left out.
fn by_id<'a>(partitions: &'a Assignment, ids: &dyn TopicIds) -> Vec<(Uuid, &'a str, Vec<i32>)> {
    partitions
        .iter()
        .filter_map(|(t, ps)| Some((ids.id_of(t)?, t.as_str(), ps.iter().copied().collect())))
        .collect()
}

fn put_i32_array(b: &mut BytesMut, items: &[i32]) {
    put_compact_len(b, Some(items.len()));
    for i in items {
        b.put_i32(*i);
    }
}

fn target_member_value(target: &Assignment, ids: &dyn TopicIds) -> Bytes {
    value(
        |b| {
            let topics = by_id(target, ids);
            put_compact_len(b, Some(topics.len()));
            for (id, _, partitions) in topics {
                b.put_slice(id.as_bytes());
                put_i32_array(b, &partitions);
                put_uvarint(b, 0);
            }
        },
        &[],
    )
}

/// Kafka's byte for a member state.
fn state_id(s: MemberState) -> i8 {
    match s {
        MemberState::Stable => 0,
        MemberState::UnrevokedPartitions => 1,
        MemberState::UnreleasedPartitions => 2,
    }
}

fn state_of(id: i8) -> Option<MemberState> {
    match id {
        0 => Some(MemberState::Stable),
        1 => Some(MemberState::UnrevokedPartitions),
        2 => Some(MemberState::UnreleasedPartitions),
        _ => None,
    }
}

/// TopicPartitions with their assignment epochs (tag 0).
fn put_topic_partitions(
    b: &mut BytesMut,
    partitions: &Assignment,
    epochs: &BTreeMap<(String, i32), i32>,
    fallback_epoch: i32,
    ids: &dyn TopicIds,
) {
    let topics = by_id(partitions, ids);
    put_compact_len(b, Some(topics.len()));
    for (id, name, partitions) in topics {
        b.put_slice(id.as_bytes());
        put_i32_array(b, &partitions);
        let mut t = BytesMut::new();
        let assigned_at: Vec<i32> = partitions
            .iter()
            .map(|p| {
                epochs
                    .get(&(name.to_string(), *p))
                    .copied()
                    .unwrap_or(fallback_epoch)
            })
            .collect();
        put_i32_array(&mut t, &assigned_at);
        put_tagged_fields(b, &[(0, &t[..])]);
    }
}

fn current_value(c: &StoredCurrent, ids: &dyn TopicIds) -> Bytes {
    value(
        |b| {
            b.put_i32(c.member_epoch);
            b.put_i32(c.previous_member_epoch);
            b.put_i8(state_id(c.state));
            put_topic_partitions(b, &c.assigned, &c.assignment_epochs, c.member_epoch, ids);
            put_topic_partitions(
                b,
                &c.pending_revocation,
                &c.assignment_epochs,
                c.member_epoch,
                ids,
            );
        },
        &[],
    )
}

/// The records that take what is stored of group `group` from `before` to `after` (None: no
/// consumer group), in the order a load applies them: leaving members' tombstones, the group
/// epoch, members' metadata, targets, the target epoch, members' current assignments; a group
/// that goes ends with the tombstones of its epochs.
pub(crate) fn changes(
    group: &str,
    before: Option<&StoredConsumerGroup>,
    after: Option<&StoredConsumerGroup>,
    ids: &dyn TopicIds,
) -> Vec<(Bytes, Option<Bytes>)> {
    let empty = StoredConsumerGroup::default();
    let old = before.unwrap_or(&empty);
    let new = after.unwrap_or(&empty);
    let mut out = Vec::new();
    for id in old.members.keys().filter(|m| !new.members.contains_key(*m)) {
        for kind in [CURRENT_ASSIGNMENT, TARGET_MEMBER, MEMBER_METADATA] {
            out.push((key(kind, group, Some(id)), None));
        }
    }
    let Some(new_group) = after else {
        if before.is_some() {
            out.push((key(TARGET_METADATA, group, None), None));
            out.push((key(GROUP_METADATA, group, None), None));
        }
        return out;
    };
    if before.is_none()
        || old.epoch != new_group.epoch
        || old.metadata_hash != new_group.metadata_hash
    {
        out.push((
            key(GROUP_METADATA, group, None),
            Some(group_metadata_value(
                new_group.epoch,
                new_group.metadata_hash,
            )),
        ));
    }
    let unchanged = StoredMember::default();
    let pairs: Vec<(&String, &StoredMember, &StoredMember)> = new_group
        .members
        .iter()
        .map(|(id, m)| (id, old.members.get(id).unwrap_or(&unchanged), m))
        .collect();
    for (id, was, is) in &pairs {
        if was.metadata != is.metadata {
            let v = is.metadata.as_ref().map(member_metadata_value);
            out.push((key(MEMBER_METADATA, group, Some(id)), v));
        }
    }
    for (id, was, is) in &pairs {
        if was.target != is.target {
            let v = is.target.as_ref().map(|t| target_member_value(t, ids));
            out.push((key(TARGET_MEMBER, group, Some(id)), v));
        }
    }
    if before.is_none() || old.assignment_epoch != new_group.assignment_epoch {
        out.push((
            key(TARGET_METADATA, group, None),
            Some(epoch_value(new_group.assignment_epoch)),
        ));
    }
    for (id, was, is) in &pairs {
        if was.current != is.current {
            let v = is.current.as_ref().map(|c| current_value(c, ids));
            out.push((key(CURRENT_ASSIGNMENT, group, Some(id)), v));
        }
    }
    out
}

fn get_i32(b: &mut &[u8]) -> Option<i32> {
    (b.remaining() >= 4).then(|| b.get_i32())
}

fn get_str_array(b: &mut &[u8]) -> Option<Vec<String>> {
    let n = get_compact_len(b, 1)??;
    (0..n).map(|_| get_compact_str(b)).collect()
}

fn get_i32_array(b: &mut &[u8]) -> Option<Vec<i32>> {
    let n = get_compact_len(b, 4)??;
    Some((0..n).map(|_| b.get_i32()).collect())
}

fn get_uuid(b: &mut &[u8]) -> Option<Uuid> {
    if b.remaining() < 16 {
        return None;
    }
    let id = Uuid::from_slice(&b[..16]).ok()?;
    b.advance(16);
    Some(id)
}

/// The body of a version-0 value, after its version.
fn body(value: &[u8]) -> Option<&[u8]> {
    let mut b = value;
    (b.remaining() >= 2 && b.get_i16() == 0).then_some(b)
}

/// A tombstone clears `slot`; a value sets it when it decodes, else the earlier one stays.
fn replace<T>(slot: &mut Option<T>, value: Option<&[u8]>, decode: impl FnOnce(&[u8]) -> Option<T>) {
    match value {
        None => *slot = None,
        Some(v) => {
            if let Some(d) = decode(v) {
                *slot = Some(d);
            }
        }
    }
}

/// The member a member record is about, made if new.
fn member_of<'a>(
    group: &'a mut StoredConsumerGroup,
    key: &ConsumerRecordKey,
) -> Option<&'a mut StoredMember> {
    let id = key.member.clone()?;
    Some(group.members.entry(id).or_default())
}

fn decode_epoch(value: &[u8]) -> Option<i32> {
    get_i32(&mut body(value)?)
}

/// The epoch and metadata hash (0 when absent) of record 3.
fn decode_group_metadata(value: &[u8]) -> Option<(i32, i64)> {
    let mut b = body(value)?;
    let epoch = get_i32(&mut b)?;
    let mut hash = 0;
    for (tag, mut data) in get_tagged_fields(&mut b)? {
        if tag == 0 && data.remaining() >= 8 {
            hash = data.get_i64();
        }
    }
    Some((epoch, hash))
}

fn decode_member_metadata(value: &[u8]) -> Option<StoredMemberMetadata> {
    let mut b = body(value)?;
    let mut m = StoredMemberMetadata {
        instance_id: get_compact_nullable_str(&mut b)?,
        rack_id: get_compact_nullable_str(&mut b)?,
        client_id: get_compact_str(&mut b)?,
        client_host: get_compact_str(&mut b)?,
        topics: get_str_array(&mut b)?,
        regex: get_compact_nullable_str(&mut b)?,
        rebalance_timeout_ms: get_i32(&mut b)?,
        server_assignor: get_compact_nullable_str(&mut b)?,
        classic: None,
    };
    for (tag, mut data) in get_tagged_fields(&mut b)? {
        // Tag 0: the classic member metadata, after a presence byte (0: null).
        if tag != 0 || data.first().copied().unwrap_or(0) == 0 {
            continue;
        }
        data.advance(1);
        let session_timeout_ms = get_i32(&mut data)?;
        let n = get_compact_len(&mut data, 2)??;
        let mut protocols = Vec::with_capacity(n);
        for _ in 0..n {
            let name = get_compact_str(&mut data)?;
            let metadata = get_compact_bytes(&mut data)?;
            get_tagged_fields(&mut data)?;
            protocols.push((name, metadata));
        }
        m.classic = Some(StoredClassic {
            session_timeout_ms,
            protocols,
        });
    }
    Some(m)
}

/// Topic partitions by id as names (topics the metadata no longer has are left out), with
/// the assignment epochs of tag 0 when `epochs` is given.
fn get_topic_partitions(
    b: &mut &[u8],
    ids: &dyn TopicIds,
    mut epochs: Option<&mut BTreeMap<(String, i32), i32>>,
) -> Option<Assignment> {
    let n = get_compact_len(b, 18)??;
    let mut out = Assignment::new();
    for _ in 0..n {
        let id = get_uuid(b)?;
        let partitions = get_i32_array(b)?;
        let tagged = get_tagged_fields(b)?;
        let Some(name) = ids.name_of(id) else {
            continue;
        };
        if let Some(epochs) = epochs.as_deref_mut() {
            // Tag 0: the assignment epochs, a nullable array (null: not known).
            if let Some((_, mut data)) = tagged.into_iter().find(|(t, _)| *t == 0) {
                if let Some(n) = get_compact_len(&mut data, 4)? {
                    for p in partitions.iter().take(n) {
                        epochs.insert((name.clone(), *p), data.get_i32());
                    }
                }
            }
        }
        out.entry(name).or_default().extend(partitions);
    }
    Some(out)
}

fn decode_target(value: &[u8], ids: &dyn TopicIds) -> Option<Assignment> {
    get_topic_partitions(&mut body(value)?, ids, None)
}

fn decode_current(value: &[u8], ids: &dyn TopicIds) -> Option<StoredCurrent> {
    let mut b = body(value)?;
    if b.remaining() < 9 {
        return None;
    }
    let member_epoch = b.get_i32();
    let previous_member_epoch = b.get_i32();
    let state = state_of(b.get_i8())?;
    let mut assignment_epochs = BTreeMap::new();
    let assigned = get_topic_partitions(&mut b, ids, Some(&mut assignment_epochs))?;
    let pending_revocation = get_topic_partitions(&mut b, ids, Some(&mut assignment_epochs))?;
    Some(StoredCurrent {
        member_epoch,
        previous_member_epoch,
        state,
        assigned,
        pending_revocation,
        assignment_epochs,
    })
}

/// Applies one loaded record to what is known of its group (`stored`: None until a record of
/// it is seen, and again after the group's epoch is tombstoned). A value that does not decode
/// is skipped, as Kafka skips what it cannot read.
pub(crate) fn apply(
    stored: &mut Option<StoredConsumerGroup>,
    key: &ConsumerRecordKey,
    value: Option<&[u8]>,
    ids: &dyn TopicIds,
) {
    if key.kind == GROUP_METADATA && value.is_none() {
        *stored = None;
        return;
    }
    let group = stored.get_or_insert_with(StoredConsumerGroup::default);
    match (key.kind, value) {
        (GROUP_METADATA, Some(v)) => {
            if let Some((epoch, hash)) = decode_group_metadata(v) {
                group.epoch = epoch;
                group.metadata_hash = hash;
            }
        }
        (TARGET_METADATA, v) => {
            let mut epoch = Some(group.assignment_epoch);
            replace(&mut epoch, v, decode_epoch);
            group.assignment_epoch = epoch.unwrap_or(0);
        }
        (MEMBER_METADATA, v) => {
            if let Some(m) = member_of(group, key) {
                replace(&mut m.metadata, v, decode_member_metadata);
            }
        }
        (TARGET_MEMBER, v) => {
            if let Some(m) = member_of(group, key) {
                replace(&mut m.target, v, |v| decode_target(v, ids));
            }
        }
        (CURRENT_ASSIGNMENT, v) => {
            if let Some(m) = member_of(group, key) {
                replace(&mut m.current, v, |v| decode_current(v, ids));
            }
        }
        _ => {}
    }
    group.members.retain(|_, m| *m != StoredMember::default());
}

impl TopicIds for BTreeMap<String, Uuid> {
    fn id_of(&self, name: &str) -> Option<Uuid> {
        self.get(name).copied()
    }
    fn name_of(&self, id: Uuid) -> Option<String> {
        self.iter().find(|(_, v)| **v == id).map(|(k, _)| k.clone())
    }
}

impl TopicIds for tern_controller::MetadataImage {
    fn id_of(&self, name: &str) -> Option<Uuid> {
        self.topic_ids.get(name).copied()
    }
    fn name_of(&self, id: Uuid) -> Option<String> {
        self.topics.get(&id).map(|t| t.name.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Ids(BTreeMap<String, Uuid>);

    impl TopicIds for Ids {
        fn id_of(&self, name: &str) -> Option<Uuid> {
            self.0.get(name).copied()
        }
        fn name_of(&self, id: Uuid) -> Option<String> {
            self.0
                .iter()
                .find(|(_, v)| **v == id)
                .map(|(k, _)| k.clone())
        }
    }

    fn ids() -> Ids {
        Ids(BTreeMap::from([
            ("orders".to_string(), Uuid::from_u128(1)),
            ("payments".to_string(), Uuid::from_u128(2)),
        ]))
    }

    fn assignment(pairs: &[(&str, &[i32])]) -> Assignment {
        pairs
            .iter()
            .map(|(t, ps)| (t.to_string(), ps.iter().copied().collect()))
            .collect()
    }

    fn group() -> StoredConsumerGroup {
        let metadata = StoredMemberMetadata {
            instance_id: Some("i-1".into()),
            rack_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            topics: vec!["orders".into(), "payments".into()],
            regex: None,
            rebalance_timeout_ms: 30_000,
            server_assignor: Some("uniform".into()),
            classic: Some(StoredClassic {
                session_timeout_ms: 10_000,
                protocols: vec![("range".into(), Bytes::from_static(b"\x00\x01"))],
            }),
        };
        let current = StoredCurrent {
            member_epoch: 7,
            previous_member_epoch: 6,
            state: MemberState::UnrevokedPartitions,
            assigned: assignment(&[("orders", &[0, 2])]),
            pending_revocation: assignment(&[("payments", &[1])]),
            assignment_epochs: BTreeMap::from([
                (("orders".to_string(), 0), 3),
                (("orders".to_string(), 2), 7),
                (("payments".to_string(), 1), 5),
            ]),
        };
        StoredConsumerGroup {
            epoch: 8,
            metadata_hash: metadata_hash(&BTreeMap::from([("orders".to_string(), 3)])),
            assignment_epoch: 8,
            members: BTreeMap::from([(
                "m1".to_string(),
                StoredMember {
                    metadata: Some(metadata),
                    target: Some(assignment(&[("orders", &[0, 1, 2])])),
                    current: Some(current),
                },
            )]),
        }
    }

    /// Loads `records` as a coordinator does.
    fn load(records: &[(Bytes, Option<Bytes>)]) -> Option<StoredConsumerGroup> {
        let mut stored = None;
        for (k, v) in records {
            let mut b = &k[..];
            let kind = b.get_i16();
            assert_eq!(get_str(&mut b).as_deref(), Some("g"));
            let key = decode_key_rest(kind, &mut b).unwrap();
            apply(&mut stored, &key, v.as_deref(), &ids());
        }
        stored
    }

    #[test]
    fn a_group_written_from_nothing_loads_back_equal() {
        let g = group();
        let records = changes("g", None, Some(&g), &ids());
        let kinds: Vec<i16> = records
            .iter()
            .map(|(k, _)| i16::from_be_bytes([k[0], k[1]]))
            .collect();
        assert_eq!(kinds, vec![3, 5, 7, 6, 8]);
        assert_eq!(load(&records), Some(g));
    }

    #[test]
    fn only_what_changed_is_written_and_a_leaving_member_is_tombstoned() {
        let g = group();
        assert!(changes("g", Some(&g), Some(&g), &ids()).is_empty());
        let mut next = g.clone();
        next.members
            .get_mut("m1")
            .unwrap()
            .current
            .as_mut()
            .unwrap()
            .member_epoch = 8;
        let records = changes("g", Some(&g), Some(&next), &ids());
        assert_eq!(records.len(), 1);
        assert_eq!(i16::from_be_bytes([records[0].0[0], records[0].0[1]]), 8);

        let mut empty = next.clone();
        empty.members.clear();
        empty.epoch = 9;
        let mut all = changes("g", None, Some(&next), &ids());
        all.extend(changes("g", Some(&next), Some(&empty), &ids()));
        assert_eq!(
            load(&all),
            Some(empty.clone()),
            "the member is gone, the epoch moved"
        );
        all.extend(changes("g", Some(&empty), None, &ids()));
        assert_eq!(load(&all), None, "a group that goes leaves nothing");
    }

    #[test]
    fn a_consumer_protocol_member_writes_the_null_classic_tag_as_kafka_does() {
        let mut m = group().members["m1"].metadata.clone().unwrap();
        m.classic = None;
        let v = member_metadata_value(&m);
        // One tagged field: tag 0, one byte, null.
        assert_eq!(&v[v.len() - 4..], &[1, 0, 1, 0]);
        assert_eq!(decode_member_metadata(&v), Some(m));
    }

    #[test]
    fn a_deleted_topic_is_left_out_and_bad_values_are_skipped() {
        let g = group();
        let records = changes("g", None, Some(&g), &ids());
        let only_orders = BTreeMap::from([("orders".to_string(), Uuid::from_u128(1))]);
        let mut stored = None;
        for (k, v) in &records {
            let mut b = &k[..];
            let kind = b.get_i16();
            get_str(&mut b);
            let key = decode_key_rest(kind, &mut b).unwrap();
            apply(&mut stored, &key, v.as_deref(), &only_orders);
        }
        let m = &stored.unwrap().members["m1"];
        assert!(m.current.as_ref().unwrap().pending_revocation.is_empty());
        for (k, v) in &records {
            let Some(v) = v else { continue };
            for cut in 0..v.len() {
                let mut b = &k[..];
                let kind = b.get_i16();
                get_str(&mut b);
                let key = decode_key_rest(kind, &mut b).unwrap();
                // A value that does not decode leaves what was loaded before it.
                let mut stored = Some(g.clone());
                apply(&mut stored, &key, Some(&v[..cut]), &ids());
                if kind != GROUP_METADATA {
                    assert_eq!(stored.as_ref(), Some(&g), "type {kind} cut at {cut}");
                }
            }
        }
    }
}
