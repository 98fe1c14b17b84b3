//! Replication between brokers, Kafka's ISR model: followers fetch from partition leaders
//! ([`replica_fetcher`], driven by the sans-I/O `tern_replication::FetcherCore` and placed by
//! [`fetcher_manager`]); leaders track followers, move the high watermark and change the ISR
//! ([`partition_state`], [`isr_updater`]); acks=all produces wait for the ISR
//! ([`delayed_produce`]); high watermarks survive restarts ([`hw_checkpoint`]).

pub mod delayed_produce;
pub mod fetcher_manager;
pub mod hw_checkpoint;
pub mod isr_updater;
pub mod partition_state;
pub mod replica_fetcher;
