//! What the mirror needs from the broker that hosts it: the seam between `mirror/` and
//! `broker/`. The broker implements [`MirrorHost`]; tests may implement it over bare logs.

use std::sync::Arc;

use tern_storage::Log;

/// A partition this broker leads.
pub struct LeaderReplica {
    /// Its log.
    pub log: Arc<Log>,
    /// This broker's leader epoch for it (mirrored batches get this epoch).
    pub leader_epoch: i32,
}

/// The hosting broker, as the mirror sees it.
pub trait MirrorHost: Send + Sync + 'static {
    /// This broker's node id.
    fn node_id(&self) -> i32;

    /// The local log of a partition this broker leads, or `None`.
    fn leader_replica(&self, topic: &str, partition: i32) -> Option<LeaderReplica>;

    /// Mirrored batches were appended: advance the high watermark and wake waiting fetches.
    fn on_mirror_append(&self, topic: &str, partition: i32);

    /// The log was truncated or restarted: the high watermark follows the log end.
    fn on_log_reset(&self, topic: &str, partition: i32);

    /// No producer id up to `max_id` may be handed out from now on.
    fn reserve_producer_ids_above(&self, max_id: i64);

    /// Commits a group's offsets synced from the source, unless the group is active here.
    fn sync_group_offsets(&self, group: &str, offsets: Vec<(String, i32, i64, Option<String>)>);
}
