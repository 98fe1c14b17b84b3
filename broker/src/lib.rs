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
pub mod meta_properties;
pub mod metrics;
pub mod mirror_host;
pub mod mirrors_cli;
pub mod mirrors_describe;
pub mod mirrors_progress;
pub mod mirrors_report;
pub mod mirrors_source;
pub mod mirrors_verify;
pub mod mirrors_verify_compacted;
pub mod produce_validation;
pub mod replica_manager;
pub mod replication;
pub mod security;
pub mod server;
pub mod txn_coordinator;
