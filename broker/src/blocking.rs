//! Disk work inside request handlers: on the multi-threaded runtime it runs with
//! `block_in_place`, so a slow disk read or write hands this worker's other connections to
//! another worker instead of stalling them (Kafka keeps such work off its network threads).

/// Runs `f`, which may block on the disk, without stalling the async workers' other tasks.
pub(crate) fn disk_io<T>(f: impl FnOnce() -> T) -> T {
    let multi_thread = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if multi_thread {
        tokio::task::block_in_place(f)
    } else {
        // Tests' single-threaded runtimes cannot hand tasks over; blocking there is harmless.
        f()
    }
}
