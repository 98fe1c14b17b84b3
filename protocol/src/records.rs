//! Records inside a batch.
