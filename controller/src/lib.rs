//! Cluster metadata.
