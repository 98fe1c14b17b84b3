//! Share groups (KIP-932) as their coordinator keeps them: each share-partition's start offset
//! (SPSO), set by AlterShareGroupOffsets (`kafka-share-groups.sh --reset-offsets`, the mirror's
//! sync from a source cluster) or by the partition's share consumers as they settle records,
//! and the members of ShareGroupHeartbeat with the partitions the simple assignor gives them.
//! Membership lives in memory (see the README); KIP-848 groups' is stored.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::ResponseError;

use super::consumer_group::{Refusal, TopicView};
use crate::share::partition::ShareLimits;

/// Settings of share groups (Kafka's `group.share.*`).
#[derive(Debug, Clone)]
pub struct ShareGroupConfig {
    /// `group.share.session.timeout.ms`.
    pub session_timeout_ms: i32,
    /// `group.share.heartbeat.interval.ms`.
    pub heartbeat_interval_ms: i32,
    /// `group.share.max.size`.
    pub max_size: usize,
    /// Record locks and delivery limits of each share-partition.
    pub limits: ShareLimits,
    /// Where a share-partition without a stored start offset starts (the group config
    /// `share.auto.offset.reset`; latest by default).
    pub auto_offset_reset: ShareOffsetReset,
    /// `share.isolation.level=read_committed`: deliver only committed transactional records.
    pub read_committed: bool,
    /// `share.renew.acknowledge.enable` (true by default): members may renew their locks.
    pub renew_enabled: bool,
}

/// Kafka's `share.auto.offset.reset`: where a new share-partition starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ShareOffsetReset {
    /// The log start.
    Earliest,
    /// The high watermark.
    #[default]
    Latest,
    /// The first record at most this many milliseconds old (`by_duration:<ISO-8601>`).
    ByDurationMs(i64),
}

impl ShareOffsetReset {
    /// Parses Kafka's value: `earliest`, `latest` or `by_duration:PnDTnHnMn.nS` (not negative).
    pub fn parse(value: &str) -> Result<Self, String> {
        match value {
            "earliest" => Ok(ShareOffsetReset::Earliest),
            "latest" => Ok(ShareOffsetReset::Latest),
            _ => {
                let iso = value
                    .strip_prefix("by_duration:")
                    .ok_or_else(|| format!("Unknown auto offset reset strategy: {value}"))?;
                match iso_duration_ms(iso) {
                    Some(ms) if ms >= 0 => Ok(ShareOffsetReset::ByDurationMs(ms)),
                    Some(_) => Err("Negative duration is not supported".to_string()),
                    None => Err(format!("Unable to parse duration string {iso}")),
                }
            }
        }
    }
}

/// Milliseconds of an ISO-8601 duration as Java's `Duration.parse` reads it
/// (`[-+]PnDTnHnMn.nS`, any letter case, each number signed); None when malformed.
fn iso_duration_ms(text: &str) -> Option<i64> {
    let upper = text.to_ascii_uppercase();
    let (negative, rest) = match upper.as_bytes().first()? {
        b'-' => (true, &upper[1..]),
        b'+' => (false, &upper[1..]),
        _ => (false, &upper[..]),
    };
    let rest = rest.strip_prefix('P')?;
    let (date, time) = match rest.split_once('T') {
        Some((d, t)) if !t.is_empty() => (d, Some(t)),
        Some(_) => return None,
        None => (rest, None),
    };
    let mut total: i128 = 0;
    let mut any = false;
    let mut take = |part: &str, units: &[(char, i128)]| -> Option<()> {
        let mut rest = part;
        let mut allowed = units;
        while !rest.is_empty() {
            let end = rest.find(|c: char| c.is_ascii_alphabetic())?;
            let (number, unit) = (&rest[..end], rest[end..].chars().next()?);
            let at = allowed.iter().position(|(u, _)| *u == unit)?;
            let scale = allowed[at].1;
            allowed = &allowed[at + 1..];
            let (whole, fraction) = match number.split_once(['.', ',']) {
                Some((w, f))
                    if unit == 'S' && f.len() <= 9 && f.bytes().all(|b| b.is_ascii_digit()) =>
                {
                    (w, f)
                }
                Some(_) => return None,
                None => (number, ""),
            };
            let digits = whole.trim_start_matches(['+', '-']);
            if digits.is_empty()
                || !digits.bytes().all(|b| b.is_ascii_digit())
                || whole.len() - digits.len() > 1
            {
                return None;
            }
            let sign: i128 = if whole.starts_with('-') { -1 } else { 1 };
            let mut ms = digits.parse::<i128>().ok()? * scale;
            if !fraction.is_empty() {
                let nanos: i128 = format!("{fraction:0<9}").parse().ok()?;
                ms += nanos / 1_000_000;
            }
            total += sign * ms;
            any = true;
            rest = &rest[end + 1..];
        }
        Some(())
    };
    take(date, &[('D', 86_400_000)])?;
    if let Some(t) = time {
        take(t, &[('H', 3_600_000), ('M', 60_000), ('S', 1_000)])?;
    }
    if !any {
        return None;
    }
    let total = if negative { -total } else { total };
    i64::try_from(total).ok()
}

impl Default for ShareGroupConfig {
    fn default() -> Self {
        ShareGroupConfig {
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5_000,
            max_size: 200,
            limits: ShareLimits::default(),
            auto_offset_reset: ShareOffsetReset::Latest,
            read_committed: false,
            renew_enabled: true,
        }
    }
}

/// One ShareGroupHeartbeat, as the coordinator needs it.
#[derive(Debug, Clone)]
pub struct ShareHeartbeat {
    /// Member id (the client makes it).
    pub member_id: String,
    /// 0 to join, -1 to leave, else the epoch it was last given.
    pub member_epoch: i32,
    /// Rack, when set.
    pub rack_id: Option<String>,
    /// Subscribed topics; None when unchanged.
    pub subscribed_topic_names: Option<Vec<String>>,
    /// Client id and host (for describing the group).
    pub client_id: String,
    /// Client host.
    pub client_host: String,
}

/// What a heartbeat answers: the member's epoch, and its partitions when they changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareHeartbeatAnswer {
    /// Member id.
    pub member_id: String,
    /// Its epoch now (-1 after leaving).
    pub member_epoch: i32,
    /// Its partitions by topic, when the member must be told them.
    pub assignment: Option<BTreeMap<String, Vec<i32>>>,
}

/// One member of a share group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareMember {
    /// Member id.
    pub member_id: String,
    /// Rack.
    pub rack_id: Option<String>,
    /// Client id.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
    /// Subscribed topic names, sorted.
    pub subscribed_topic_names: Vec<String>,
    /// The epoch of the assignment it was last given.
    pub member_epoch: i32,
    /// Its partitions.
    pub assigned: BTreeSet<(String, i32)>,
    last_heartbeat_ms: i64,
    /// The session timeout in force at its last heartbeat (the group's config, else the
    /// broker's).
    session_timeout_ms: i64,
}

/// A share-partition's start offset as stored (Kafka's ShareSnapshotValue without in-flight
/// record states: Tern keeps none, as no share consumer reads here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareStartOffset {
    /// The first offset not yet delivered to the group.
    pub offset: i64,
    /// Leader epoch of the partition when the offset was set (-1: unknown).
    pub leader_epoch: i32,
    /// Bumped each time the offset is altered (Kafka's state epoch).
    pub state_epoch: i32,
}

/// A share group: its epoch and its start offsets by (topic, partition).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShareGroup {
    /// Group epoch, bumped when partitions are initialized or deleted.
    pub epoch: i32,
    /// Start offsets by (topic, partition).
    pub start_offsets: BTreeMap<(String, i32), ShareStartOffset>,
    /// Members by id (kept in memory only).
    pub members: BTreeMap<String, ShareMember>,
    /// The epoch of the current assignment.
    pub assignment_epoch: i32,
    /// The partitions of the subscribed topics the assignment was made from.
    assigned_from: BTreeMap<String, i32>,
}

fn refuse<T>(error: ResponseError, message: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal {
        error,
        message: message.into(),
    })
}

impl ShareGroup {
    /// Sets start offsets (an alter): each partition's state epoch moves on, and the group
    /// epoch once, when partitions were set at all.
    pub fn set_offsets(&mut self, offsets: impl IntoIterator<Item = ((String, i32), i64, i32)>) {
        let mut any = false;
        for (key, offset, leader_epoch) in offsets {
            any = true;
            let state_epoch = self.start_offsets.get(&key).map_or(0, |s| s.state_epoch) + 1;
            self.start_offsets.insert(
                key,
                ShareStartOffset {
                    offset,
                    leader_epoch,
                    state_epoch,
                },
            );
        }
        if any {
            self.epoch += 1;
        }
    }

    /// Removes every partition of `topic`; the keys removed.
    pub fn remove_topic(&mut self, topic: &str) -> Vec<(String, i32)> {
        let keys: Vec<(String, i32)> = self
            .start_offsets
            .keys()
            .filter(|(t, _)| t == topic)
            .cloned()
            .collect();
        for k in &keys {
            self.start_offsets.remove(k);
        }
        if !keys.is_empty() {
            self.epoch += 1;
        }
        keys
    }

    /// Kafka's name of its state.
    pub fn state_name(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else {
            "Stable"
        }
    }

    /// ShareGroupHeartbeat: joins (epoch 0), leaves (-1) and heartbeats of members. A change
    /// of membership, subscriptions or partition counts moves the group to a new epoch with a
    /// new assignment, which each member is given at its next heartbeat.
    pub fn heartbeat(
        &mut self,
        group_id: &str,
        hb: ShareHeartbeat,
        topics: &dyn TopicView,
        config: &ShareGroupConfig,
        now_ms: i64,
    ) -> Result<ShareHeartbeatAnswer, Refusal> {
        let id = hb.member_id.clone();
        if hb.member_epoch == -1 {
            if self.members.remove(&id).is_none() {
                return refuse(
                    ResponseError::UnknownMemberId,
                    format!("Member {id} is not a member of group {group_id}."),
                );
            }
            self.reassign(topics, true);
            return Ok(ShareHeartbeatAnswer {
                member_id: id,
                member_epoch: -1,
                assignment: None,
            });
        }
        let joining = hb.member_epoch == 0;
        if joining {
            if !self.members.contains_key(&id) && self.members.len() >= config.max_size {
                return refuse(
                    ResponseError::GroupMaxSizeReached,
                    format!(
                        "The share group has reached its maximum capacity of {} members.",
                        config.max_size
                    ),
                );
            }
            let member = self
                .members
                .entry(id.clone())
                .or_insert_with(|| ShareMember {
                    member_id: id.clone(),
                    rack_id: None,
                    client_id: String::new(),
                    client_host: String::new(),
                    subscribed_topic_names: Vec::new(),
                    member_epoch: 0,
                    assigned: BTreeSet::new(),
                    last_heartbeat_ms: now_ms,
                    session_timeout_ms: i64::from(config.session_timeout_ms),
                });
            member.member_epoch = 0;
        }
        let Some(member) = self.members.get_mut(&id) else {
            return refuse(
                ResponseError::UnknownMemberId,
                format!("Member {id} is not a member of group {group_id}."),
            );
        };
        if !joining && hb.member_epoch != member.member_epoch {
            return refuse(
                ResponseError::FencedMemberEpoch,
                format!(
                    "The share group member has a different epoch ({}) than the one known by the group coordinator ({}).",
                    hb.member_epoch, member.member_epoch
                ),
            );
        }
        member.last_heartbeat_ms = now_ms;
        member.session_timeout_ms = i64::from(config.session_timeout_ms);
        member.client_id = hb.client_id;
        member.client_host = hb.client_host;
        if hb.rack_id.is_some() {
            member.rack_id = hb.rack_id;
        }
        let full = hb.subscribed_topic_names.is_some();
        let mut changed = joining;
        if let Some(mut names) = hb.subscribed_topic_names {
            names.sort();
            names.dedup();
            if names != member.subscribed_topic_names {
                member.subscribed_topic_names = names;
                changed = true;
            }
        }
        self.reassign(topics, changed);
        let epoch = self.assignment_epoch;
        let member = self.members.get_mut(&id).expect("the member is there");
        let moved = member.member_epoch != epoch;
        member.member_epoch = epoch;
        let assignment = (joining || full || moved).then(|| {
            let mut by_topic: BTreeMap<String, Vec<i32>> = BTreeMap::new();
            for (t, p) in &member.assigned {
                by_topic.entry(t.clone()).or_default().push(*p);
            }
            by_topic
        });
        Ok(ShareHeartbeatAnswer {
            member_id: id,
            member_epoch: epoch,
            assignment,
        })
    }

    /// Removes members silent for longer than the session timeout; their ids.
    pub fn expire(&mut self, now_ms: i64) -> Vec<String> {
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| m.last_heartbeat_ms + m.session_timeout_ms < now_ms)
            .map(|m| m.member_id.clone())
            .collect();
        for id in &gone {
            self.members.remove(id);
        }
        if !gone.is_empty() {
            // The partitions as last seen: the next heartbeat brings any change of them.
            let known = self.assigned_from.clone();
            self.reassign(&known, true);
        }
        gone
    }

    /// Recomputes the assignment when membership or subscriptions changed (`changed`) or the
    /// subscribed topics' partitions did, moving the group to a new epoch.
    fn reassign(&mut self, topics: &dyn TopicView, changed: bool) {
        let subscribed: BTreeSet<&String> = self
            .members
            .values()
            .flat_map(|m| m.subscribed_topic_names.iter())
            .collect();
        let partitions: BTreeMap<String, i32> = subscribed
            .into_iter()
            .filter_map(|t| Some((t.clone(), topics.partition_count(t)?)))
            .collect();
        if !changed && partitions == self.assigned_from {
            return;
        }
        self.epoch += 1;
        self.assignment_epoch = self.epoch;
        let assignment = simple_assignment(&self.members, &partitions);
        for (id, m) in self.members.iter_mut() {
            m.assigned = assignment.get(id).cloned().unwrap_or_default();
        }
        self.assigned_from = partitions;
    }

    /// Whether any partition of `topic` has a start offset.
    pub fn has_topic(&self, topic: &str) -> bool {
        self.start_offsets.keys().any(|(t, _)| t == topic)
    }
}

/// Kafka's simple share assignor, topic by topic: with no more members than partitions each
/// partition goes to one member, round the members; with more members, each member gets one
/// partition, round the partitions, so that a partition is shared.
fn simple_assignment(
    members: &BTreeMap<String, ShareMember>,
    partitions: &BTreeMap<String, i32>,
) -> BTreeMap<String, BTreeSet<(String, i32)>> {
    let mut out: BTreeMap<String, BTreeSet<(String, i32)>> = BTreeMap::new();
    for (topic, &count) in partitions {
        let subscribers: Vec<&String> = members
            .values()
            .filter(|m| m.subscribed_topic_names.contains(topic))
            .map(|m| &m.member_id)
            .collect();
        if subscribers.is_empty() || count <= 0 {
            continue;
        }
        let n = subscribers.len();
        if n <= count as usize {
            for p in 0..count {
                let m = subscribers[p as usize % n];
                out.entry(m.clone()).or_default().insert((topic.clone(), p));
            }
        } else {
            for (i, m) in subscribers.iter().enumerate() {
                let p = (i % count as usize) as i32;
                out.entry((*m).clone())
                    .or_default()
                    .insert((topic.clone(), p));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_offset_reset_reads_kafkas_values() {
        use ShareOffsetReset::*;
        assert_eq!(ShareOffsetReset::parse("earliest"), Ok(Earliest));
        assert_eq!(ShareOffsetReset::parse("latest"), Ok(Latest));
        assert_eq!(
            ShareOffsetReset::parse("by_duration:PT1H"),
            Ok(ByDurationMs(3_600_000))
        );
        assert_eq!(
            ShareOffsetReset::parse("by_duration:P1DT2M3.5S"),
            Ok(ByDurationMs(86_523_500))
        );
        assert_eq!(
            ShareOffsetReset::parse("by_duration:pt-1s30s"),
            Err("Unable to parse duration string pt-1s30s".into())
        );
        assert_eq!(
            ShareOffsetReset::parse("by_duration:PT-1M30S"),
            Err("Negative duration is not supported".into())
        );
        for bad in [
            "none",
            "EARLIEST",
            "by_duration",
            "by_duration:",
            "by_duration:P",
            "by_duration:PT",
            "by_duration:P1H",
            "by_duration:-PT1S",
        ] {
            assert!(ShareOffsetReset::parse(bad).is_err(), "{bad}");
        }
    }

    fn hb(member: &str, epoch: i32, topics: Option<&[&str]>) -> ShareHeartbeat {
        ShareHeartbeat {
            member_id: member.to_string(),
            member_epoch: epoch,
            rack_id: None,
            subscribed_topic_names: topics.map(|t| t.iter().map(|s| s.to_string()).collect()),
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
        }
    }

    fn parts(a: &ShareHeartbeatAnswer) -> Vec<i32> {
        a.assignment
            .as_ref()
            .unwrap()
            .get("t")
            .cloned()
            .unwrap_or_default()
    }

    #[test]
    fn members_split_partitions_and_share_them_when_more_numerous() {
        let topics: BTreeMap<String, i32> = [("t".to_string(), 2)].into();
        let cfg = ShareGroupConfig::default();
        let mut g = ShareGroup::default();
        let a = g
            .heartbeat("g", hb("a", 0, Some(&["t"])), &topics, &cfg, 0)
            .unwrap();
        assert_eq!((a.member_epoch, parts(&a)), (1, vec![0, 1]));
        let b = g
            .heartbeat("g", hb("b", 0, Some(&["t"])), &topics, &cfg, 0)
            .unwrap();
        assert_eq!((b.member_epoch, parts(&b)), (2, vec![1]));
        // a learns of the new epoch, and gives up partition 1.
        let a = g
            .heartbeat("g", hb("a", 1, None), &topics, &cfg, 0)
            .unwrap();
        assert_eq!((a.member_epoch, parts(&a)), (2, vec![0]));
        // Nothing changed since: no assignment in the answer.
        let a = g
            .heartbeat("g", hb("a", 2, None), &topics, &cfg, 0)
            .unwrap();
        assert_eq!(a.assignment, None);
        // A third member shares a partition.
        let c = g
            .heartbeat("g", hb("c", 0, Some(&["t"])), &topics, &cfg, 0)
            .unwrap();
        assert_eq!(parts(&c), vec![0]);
        assert_eq!(g.state_name(), "Stable");
    }

    #[test]
    fn stale_epochs_unknown_members_and_leaving() {
        let topics: BTreeMap<String, i32> = [("t".to_string(), 1)].into();
        let cfg = ShareGroupConfig::default();
        let mut g = ShareGroup::default();
        g.heartbeat("g", hb("a", 0, Some(&["t"])), &topics, &cfg, 0)
            .unwrap();
        let e = g
            .heartbeat("g", hb("a", 7, None), &topics, &cfg, 0)
            .unwrap_err();
        assert_eq!(e.error, ResponseError::FencedMemberEpoch);
        let e = g
            .heartbeat("g", hb("x", 1, None), &topics, &cfg, 0)
            .unwrap_err();
        assert_eq!(e.error, ResponseError::UnknownMemberId);
        let left = g
            .heartbeat("g", hb("a", -1, None), &topics, &cfg, 0)
            .unwrap();
        assert_eq!(left.member_epoch, -1);
        assert_eq!(g.state_name(), "Empty");
        let e = g
            .heartbeat("g", hb("a", -1, None), &topics, &cfg, 0)
            .unwrap_err();
        assert_eq!(e.error, ResponseError::UnknownMemberId);
    }

    #[test]
    fn silent_members_expire_and_the_others_take_their_partitions() {
        let topics: BTreeMap<String, i32> = [("t".to_string(), 2)].into();
        let cfg = ShareGroupConfig::default();
        let mut g = ShareGroup::default();
        g.heartbeat("g", hb("a", 0, Some(&["t"])), &topics, &cfg, 0)
            .unwrap();
        g.heartbeat("g", hb("b", 0, Some(&["t"])), &topics, &cfg, 40_000)
            .unwrap();
        assert_eq!(g.expire(50_000), vec!["a".to_string()]);
        let b = g
            .heartbeat("g", hb("b", 2, None), &topics, &cfg, 50_000)
            .unwrap();
        assert_eq!(parts(&b), vec![0, 1]);
        // More partitions: a new epoch and assignment without any membership change.
        let topics: BTreeMap<String, i32> = [("t".to_string(), 3)].into();
        let b = g
            .heartbeat("g", hb("b", 3, None), &topics, &cfg, 50_000)
            .unwrap();
        assert_eq!((b.member_epoch, parts(&b)), (4, vec![0, 1, 2]));
    }

    #[test]
    fn altering_moves_state_and_group_epochs() {
        let mut g = ShareGroup::default();
        g.set_offsets([(("t".to_string(), 0), 5, 2), (("t".to_string(), 1), 7, 2)]);
        assert_eq!(g.epoch, 1);
        g.set_offsets([(("t".to_string(), 0), 9, 3)]);
        assert_eq!(g.epoch, 2);
        assert_eq!(
            g.start_offsets[&("t".to_string(), 0)],
            ShareStartOffset {
                offset: 9,
                leader_epoch: 3,
                state_epoch: 2
            }
        );
        assert_eq!(g.start_offsets[&("t".to_string(), 1)].state_epoch, 1);
        g.set_offsets([]);
        assert_eq!(g.epoch, 2, "an empty alter changes nothing");
    }

    #[test]
    fn removing_a_topic_removes_its_partitions_only() {
        let mut g = ShareGroup::default();
        g.set_offsets([
            (("a".to_string(), 0), 1, -1),
            (("a".to_string(), 1), 2, -1),
            (("b".to_string(), 0), 3, -1),
        ]);
        let removed = g.remove_topic("a");
        assert_eq!(removed, vec![("a".to_string(), 0), ("a".to_string(), 1)]);
        assert!(!g.has_topic("a"));
        assert!(g.has_topic("b"));
        assert_eq!(g.epoch, 2);
        assert!(g.remove_topic("missing").is_empty());
        assert_eq!(g.epoch, 2);
    }
}
