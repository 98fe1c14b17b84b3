//! What fetching from a leader means, without sockets or disks: the per-partition state of a
//! fetcher (Fetching, Delayed; truncation by diverging epoch), the requests it makes and the
//! outcomes of responses. Tern's replica fetchers (broker) and mirror fetchers (mirror) both
//! run on [`fetcher_core::FetcherCore`], so they follow leaders by the same rules.

pub mod batches;
pub mod fetcher_core;
