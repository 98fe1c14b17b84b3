//! What fetching from a leader means, without sockets or disks: the per-partition state of a
//! fetcher (Fetching, Delayed; truncation by diverging epoch), the requests it makes and the
//! outcomes of responses. Tern's replica fetchers (broker) and mirror fetchers (mirror) both
//! run on [`FetcherCore`], so they follow leaders by the same rules.

mod batches;
mod fetcher_core;

pub use batches::whole_batches_from;
pub use fetcher_core::{
    FetchTarget, FetchedPartition, FetcherCore, LocalLog, Outcome, TopicPartition,
};
