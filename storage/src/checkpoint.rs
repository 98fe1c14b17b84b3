//! Checkpoint files, replaced atomically: write `<name>.tmp`, fsync it, rename over `<name>`,
//! fsync the directory. A crash leaves either the old or the new file, never a mix.

use std::fs::{File, OpenOptions};
use std::path::Path;

use crate::error::{IoContext, Result, StorageError};

/// File holding the offset below which all data is known to be on disk.
pub(crate) const RECOVERY_POINT_CHECKPOINT: &str = "recovery-point-offset-checkpoint";
/// File holding the log start offset (raised by DeleteRecords and retention).
pub(crate) const LOG_START_OFFSET_CHECKPOINT: &str = "log-start-offset-checkpoint";
/// File holding the leader epoch cache.
pub(crate) const LEADER_EPOCH_CHECKPOINT: &str = "leader-epoch-checkpoint";
/// File holding the offset up to which the log has been cleaned (Kafka keeps one per log dir).
pub(crate) const CLEANER_OFFSET_CHECKPOINT: &str = "cleaner-offset-checkpoint";
/// Marker written last on a clean close; its absence on open means "recover".
pub(crate) const CLEAN_SHUTDOWN_FILE: &str = ".kafka_cleanshutdown";

/// fsyncs a directory so renames and unlinks in it are durable.
pub(crate) fn fsync_dir(dir: &Path) -> Result<()> {
    crate::fault::sync_all(&File::open(dir).ctx(dir)?, dir).ctx(dir)
}

/// Atomically replaces `dir/name` with `contents`.
pub(crate) fn write_atomic(dir: &Path, name: &str, contents: &[u8]) -> Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let path = dir.join(name);
    write_synced(&tmp, contents)?;
    crate::fault::rename(&tmp, &path).ctx(&path)?;
    fsync_dir(dir)
}

/// Creates or truncates `path`, writes `contents` and fsyncs the file (not its directory).
pub(crate) fn write_synced(path: &Path, contents: &[u8]) -> Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .ctx(path)?;
    crate::fault::write_all(&mut f, path, contents).ctx(path)?;
    crate::fault::sync_all(&f, path).ctx(path)
}

fn corrupt(path: &Path, reason: impl Into<String>) -> StorageError {
    StorageError::Corrupt {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// Kafka's checkpoint text format: version line `0`, entry count line, then one entry per line.
/// Returns the entry lines, or `None` if the file does not exist.
pub fn read_entries(dir: &Path, name: &str) -> Result<Option<Vec<String>>> {
    let path = dir.join(name);
    let text = match std::fs::read(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StorageError::Io { path, source: e }),
    };
    let text = String::from_utf8(text).map_err(|_| corrupt(&path, "not UTF-8"))?;
    let mut lines = text.lines();
    if lines.next() != Some("0") {
        return Err(corrupt(&path, "unknown version"));
    }
    let count: usize = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or_else(|| corrupt(&path, "bad entry count"))?;
    let entries: Vec<String> = lines.map(str::to_string).collect();
    if entries.len() != count || !text.ends_with('\n') {
        return Err(corrupt(&path, "entry count does not match"));
    }
    Ok(Some(entries))
}

/// Writes entries in Kafka's checkpoint format.
pub fn write_entries(dir: &Path, name: &str, entries: &[String]) -> Result<()> {
    let mut text = format!("0\n{}\n", entries.len());
    for e in entries {
        text.push_str(e);
        text.push('\n');
    }
    write_atomic(dir, name, text.as_bytes())
}

/// Reads a single-offset checkpoint (this partition's entry).
pub(crate) fn read_offset(dir: &Path, name: &str) -> Result<Option<i64>> {
    let path = dir.join(name);
    match read_entries(dir, name)? {
        None => Ok(None),
        Some(entries) if entries.len() == 1 => entries[0]
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| corrupt(&path, "bad offset")),
        Some(_) => Err(corrupt(&path, "expected one entry")),
    }
}

/// Writes a single-offset checkpoint.
pub(crate) fn write_offset(dir: &Path, name: &str, offset: i64) -> Result<()> {
    write_entries(dir, name, &[offset.to_string()])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_checkpoint_round_trip_and_corruption() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_offset(dir.path(), "x").unwrap(), None);
        write_offset(dir.path(), "x", 42).unwrap();
        assert_eq!(read_offset(dir.path(), "x").unwrap(), Some(42));
        assert!(!dir.path().join("x.tmp").exists());
        std::fs::write(dir.path().join("x"), b"0\n1\n4z\n").unwrap();
        assert!(matches!(
            read_offset(dir.path(), "x"),
            Err(StorageError::Corrupt { .. })
        ));
        std::fs::write(dir.path().join("x"), b"0\n2\n4\n").unwrap();
        assert!(read_offset(dir.path(), "x").is_err());
        std::fs::write(dir.path().join("x"), [0xffu8, 0, 1]).unwrap();
        assert!(read_offset(dir.path(), "x").is_err());
    }
}
