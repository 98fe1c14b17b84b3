//! Shared helpers of the Tern benchmarks (the binaries live in `src/bin`).
