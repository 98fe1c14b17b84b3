//! Sends raft-rs's `slog` output to `tracing`, so it lands where the rest of Tern logs.

use std::fmt::Write as _;

use slog::{Drain, Level, OwnedKVList, Record, Serializer, KV};

/// A `slog` drain that re-emits each record as a `tracing` event of the same level.
struct TracingDrain;

/// Collects a record's key-values as ` key=value` text.
struct KvText(String);

impl Serializer for KvText {
    fn emit_arguments(&mut self, key: slog::Key, value: &std::fmt::Arguments<'_>) -> slog::Result {
        let _ = write!(self.0, " {key}={value}");
        Ok(())
    }
}

impl Drain for TracingDrain {
    type Ok = ();
    type Err = slog::Never;

    fn log(&self, record: &Record<'_>, values: &OwnedKVList) -> Result<(), slog::Never> {
        let text = || {
            let mut kv = KvText(record.msg().to_string());
            let _ = record.kv().serialize(record, &mut kv);
            let _ = values.serialize(record, &mut kv);
            kv.0
        };
        // Format only what a subscriber wants: raft-rs logs every message at debug.
        macro_rules! emit {
            ($level:expr, $event:ident) => {
                if tracing::enabled!(target: "raft", $level) {
                    tracing::$event!(target: "raft", "{}", text());
                }
            };
        }
        match record.level() {
            Level::Critical | Level::Error => emit!(tracing::Level::ERROR, error),
            Level::Warning => emit!(tracing::Level::WARN, warn),
            Level::Info => emit!(tracing::Level::INFO, info),
            Level::Debug => emit!(tracing::Level::DEBUG, debug),
            Level::Trace => emit!(tracing::Level::TRACE, trace),
        }
        Ok(())
    }
}

/// The logger handed to raft-rs.
pub(crate) fn raft_logger() -> slog::Logger {
    slog::Logger::root(TracingDrain.fuse(), slog::o!())
}
