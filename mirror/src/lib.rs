//! Cluster mirroring: a Tern broker mirrors topics of a source Kafka cluster byte for byte,
//! at the same offsets, and on failover makes them writable.
//!
//! - `config`: per-mirror and broker-level settings; `acl_rules`: `mirror.acls.include`.
//! - [`state`]: partition states and their `__mirror_state` records.
//! - `coordinator`: the partition state machine (sans-I/O) and where states are kept.
//! - `source`: connections to the source cluster and the RPCs the mirror sends.
//! - `source_security`: TLS and SASL settings for a secured source.
//! - `fetcher`: the fetcher manager: mirror fetchers, one per (mirror, source broker), many
//!   partitions each, and each mirror's source connection.
//! - `metadata`: the metadata manager (topics, configs, group offsets, ACLs from the source).
//! - `manager`: the MirrorManager, which joins the three, and the mirror RPCs' admin side.
//! - `host`: the trait through which the mirror reaches the broker.
//! - `stats`: counters of each mirror's fetching, for the broker's metrics.

mod acl_rules;
mod config;
mod coordinator;
mod fetcher;
mod host;
mod manager;
mod metadata;
mod peers;
mod source;
mod source_security;
pub mod state;
mod stats;

pub use config::{parse_host_port, split_patterns, BrokerMirrorConfig, MirrorSettings, PatternSet};
pub use host::{CommittedOffset, LeaderReplica, MirrorHost, RaiseEpochError};
pub use manager::MirrorManager;
pub use peers::PeerError;
pub use source::{connect_bootstrap, SourceConnection, SourceMetadata};
pub use state::{MirrorPartitionState, MIRROR_STATE_TOPIC};
