//! What the mirror needs from the broker that hosts it: the seam between `mirror/` and
//! `broker/`. The broker implements [`MirrorHost`]; tests may implement it over bare logs.

use std::sync::Arc;

use tern_protocol::error::ApiError;
use tern_storage::Log;

/// Why the hosting broker could not raise a partition's leader epoch.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RaiseEpochError {
    /// The broker's metadata has no such topic.
    #[error("unknown topic {0}")]
    UnknownTopic(String),
    /// The controller refused the change.
    #[error(transparent)]
    Controller(#[from] ApiError),
}

/// A group's committed offset of one partition, as the source holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// The committed offset.
    pub offset: i64,
    /// The leader epoch of the record before it (KIP-320), or -1.
    pub leader_epoch: i32,
    /// The commit's metadata.
    pub metadata: Option<String>,
}

/// A partition this broker leads.
pub struct LeaderReplica {
    /// Its log.
    pub log: Arc<Log>,
    /// This broker's leader epoch for it (never below the epochs of mirrored batches).
    pub leader_epoch: i32,
}

/// The hosting broker, as the mirror sees it.
pub trait MirrorHost: Send + Sync + 'static {
    /// This broker's node id.
    fn node_id(&self) -> i32;

    /// Where another broker of this cluster takes inter-broker requests (host, port).
    fn broker_endpoint(&self, node_id: i32) -> Option<(String, u16)>;

    /// The local log of a partition this broker leads, or `None`.
    fn leader_replica(&self, topic: &str, partition: i32) -> Option<LeaderReplica>;

    /// The high watermark of a partition this broker leads, watched (None if not led here).
    fn watch_high_watermark(
        &self,
        topic: &str,
        partition: i32,
    ) -> Option<tokio::sync::watch::Receiver<i64>>;

    /// Mirrored batches were appended: advance the high watermark and wake waiting fetches.
    fn on_mirror_append(&self, topic: &str, partition: i32);

    /// The log was truncated or restarted: the high watermark follows the log end.
    fn on_log_reset(&self, topic: &str, partition: i32);

    /// Whether every in-sync follower of this led partition has fetched since and ends at or
    /// below `offset` (so none holds what a truncation to `offset` removed).
    fn followers_end_at_or_below(&self, topic: &str, partition: i32, offset: i64) -> bool;

    /// Raises this partition's leader epoch to at least `at_least` (through the controller).
    fn raise_leader_epoch(
        &self,
        topic: &str,
        partition: i32,
        at_least: i32,
    ) -> Result<(), RaiseEpochError>;

    /// No producer id up to `max_id` may be handed out from now on.
    fn reserve_producer_ids_above(&self, max_id: i64);

    /// Commits a group's offsets synced from the source, unless the group is active here.
    fn sync_group_offsets(&self, group: &str, offsets: Vec<CommittedOffset>);

    /// Sets a share group's start offsets synced from the source (creating the share group).
    fn sync_share_group_offsets(&self, group: &str, offsets: Vec<CommittedOffset>);
}
