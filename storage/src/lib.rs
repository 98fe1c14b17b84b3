//! The partition log.
