//! Compression codecs.
