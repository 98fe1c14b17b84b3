//! The Tern broker: network server, request handlers, replica manager and configuration.

mod blocking;
mod broker;
mod config;
mod connection;
mod errors;
mod fetch_session;
mod format;
mod group_coordinator;
mod handlers;
mod http;
mod inter_broker;
mod internal_topic;
mod meta_properties;
mod metrics;
mod mirror_host;
mod produce_validation;
mod replica_manager;
mod replication;
mod response_writer;
mod security;
mod server;
mod share;
mod start_error;
mod txn_coordinator;

pub use broker::{start_controller, Broker};
pub use config::{parse_properties, BrokerConfig, ConfigError};
pub use format::{format, parse_add_scram, ScramUser};
pub use meta_properties::{new_cluster_id, MetaProperties};
pub use server::Server;
pub use start_error::StartError;

/// What the fuzz targets drive directly: request decoding and ApiVersions, produce validation,
/// group state, and the internal topics' record formats.
pub mod fuzzing {
    pub use crate::group_coordinator::apply_offsets_records;
    pub use crate::group_coordinator::consumer_group_records::TopicIds;
    pub use crate::group_coordinator::group::Group;
    pub use crate::group_coordinator::offsets_topic as consumer_offsets;
    pub use crate::handlers::{api_versions, is_supported, SUPPORTED_APIS};
    pub use crate::produce_validation::{prepare, TopicWritePolicy};
    pub use crate::txn_coordinator::metadata::{TxnMetadata, TxnState};
    pub use crate::txn_coordinator::state_log as transaction_state;
}
