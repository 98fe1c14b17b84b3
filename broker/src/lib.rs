//! The Tern broker: network server, request handlers, replica manager and configuration.

pub mod blocking;
pub mod broker;
pub mod config;
pub mod connection;
pub mod errors;
pub mod fetch_session;
pub mod format;
pub mod group_coordinator;
pub mod handlers;
pub mod http;
pub mod internal_topic;
pub mod meta_properties;
pub mod metrics;
pub mod mirror_host;
pub mod produce_validation;
pub mod replica_manager;
pub mod replication;
pub mod response_writer;
pub mod security;
pub mod server;
pub mod start_error;
pub mod txn_coordinator;
