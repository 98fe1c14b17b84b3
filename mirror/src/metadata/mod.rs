//! The mirror's metadata manager: what runs on a mirror's metadata coordinator (the leader of
//! the `__mirror_state` partition its name hashes to) every refresh interval.
//!
//! - [`sync`]: partition counts, topic configs, topics matching the include patterns, and
//!   consumer-group offsets (clamped to what is mirrored).
//! - [`acl_sync`]: ACLs on what the mirror mirrors.

pub(crate) mod acl_sync;
pub(crate) mod sync;
