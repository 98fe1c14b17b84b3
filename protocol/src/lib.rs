//! Kafka wire format for Tern: framing, request dispatch, record batches, compression codecs
//! and a small async client. Nothing here touches disk.

pub mod api;
pub mod client;
pub mod client_security;
pub mod compression;
pub mod error;
pub mod fetch_response;
pub mod flexible;
pub mod frame;
pub mod mirror;
pub mod record_batch;
pub mod records;
pub mod sasl;
