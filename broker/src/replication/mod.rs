//! Replication between brokers, Kafka's ISR model: followers fetch from partition leaders
//! ([`replica_fetcher`], driven by the sans-I/O `tern_replication::FetcherCore` and placed by
//! [`fetcher_manager`]); leaders track followers, move the high watermark and change the ISR
//! ([`partition_state`], [`isr_updater`]), and hand a partition over when their own replica
//! goes offline ([`offline_replicas`]); acks=all produces wait for the ISR
//! ([`delayed_produce`]); high watermarks survive restarts ([`hw_checkpoint`]); throttles bound
//! the bytes out-of-sync replicas move ([`quota`]).

pub(crate) mod delayed_produce;
pub(crate) mod fetcher_manager;
pub(crate) mod hw_checkpoint;
pub(crate) mod isr_updater;
pub(crate) mod offline_replicas;
pub(crate) mod partition_state;
pub(crate) mod quota;
pub(crate) mod replica_fetcher;
