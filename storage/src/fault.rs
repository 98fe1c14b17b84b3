//! A fault-injecting file layer for tests: the storage crate's writes, fsyncs, renames and
//! reads go through these functions, and a test can make the Nth of them under a directory
//! fail (EIO) or write only part of its bytes (then ENOSPC), to drive the offline path and
//! recovery. With nothing injected each call costs one relaxed atomic load.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

/// The kind of file operation a fault applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultOp {
    /// Writes of data to a file (segment appends, checkpoint and cleaner output).
    Write,
    /// fsync / fdatasync of a file or directory.
    Sync,
    /// Renames (checkpoint replacement, segment deletion, the cleaner's swap).
    Rename,
    /// Reads of segment data.
    Read,
}

/// What an injected fault does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultAction {
    /// The operation fails with EIO and does nothing.
    Fail,
    /// A write stores only its first `bytes` bytes, then fails with ENOSPC (a disk that filled
    /// mid-write); for other operations the same as `Fail`.
    ShortWrite {
        /// Bytes written before the failure.
        bytes: usize,
    },
}

/// Which operations fail: those of kind `op` on paths under `under`, after `skip` of them
/// succeeded, for `times` operations (`u64::MAX`: until removed).
#[derive(Clone, Debug)]
pub struct FaultPlan {
    /// Directory (or file) the fault applies to, compared by path components. Segment data
    /// operations are matched by their partition directory, others by their file.
    pub under: PathBuf,
    /// The operation kind.
    pub op: FaultOp,
    /// Matching operations let through before the first failure.
    pub skip: u64,
    /// Matching operations failed after that.
    pub times: u64,
    /// What each failure does.
    pub action: FaultAction,
}

struct Armed {
    plan: FaultPlan,
    seen: AtomicU64,
    hits: Arc<AtomicU64>,
    id: u64,
}

static ANY: AtomicBool = AtomicBool::new(false);
static FAULTS: Mutex<Vec<Armed>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// Removes its fault when dropped; counts the operations it failed.
#[must_use = "the fault is removed when this is dropped"]
pub struct FaultGuard {
    id: u64,
    hits: Arc<AtomicU64>,
}

impl FaultGuard {
    /// Operations this fault has failed so far.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Acquire)
    }
}

impl Drop for FaultGuard {
    fn drop(&mut self) {
        let mut faults = FAULTS.lock();
        faults.retain(|a| a.id != self.id);
        ANY.store(!faults.is_empty(), Ordering::Release);
    }
}

/// Arms a fault until the returned guard is dropped.
pub fn inject(plan: FaultPlan) -> FaultGuard {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let hits = Arc::new(AtomicU64::new(0));
    FAULTS.lock().push(Armed {
        plan,
        seen: AtomicU64::new(0),
        hits: hits.clone(),
        id,
    });
    ANY.store(true, Ordering::Release);
    FaultGuard { id, hits }
}

/// The action to take for this operation, if a fault says it fails.
fn triggered(path: &Path, op: FaultOp) -> Option<FaultAction> {
    if !ANY.load(Ordering::Relaxed) {
        return None;
    }
    let faults = FAULTS.lock();
    for a in faults.iter() {
        if a.plan.op != op || !path.starts_with(&a.plan.under) {
            continue;
        }
        let n = a.seen.fetch_add(1, Ordering::AcqRel);
        if n >= a.plan.skip && n - a.plan.skip < a.plan.times {
            a.hits.fetch_add(1, Ordering::AcqRel);
            return Some(a.plan.action);
        }
    }
    None
}

fn injected(errno: i32) -> io::Error {
    io::Error::from_raw_os_error(errno)
}

/// Fails with EIO if a fault says this operation on `path` fails.
fn check(path: &Path, op: FaultOp) -> io::Result<()> {
    match triggered(path, op) {
        Some(_) => Err(injected(libc::EIO)),
        None => Ok(()),
    }
}

/// `file.write_all_at(buf, pos)`, where `file` is at `path`.
pub(crate) fn write_all_at(file: &File, path: &Path, buf: &[u8], pos: u64) -> io::Result<()> {
    match triggered(path, FaultOp::Write) {
        None => file.write_all_at(buf, pos),
        Some(FaultAction::Fail) => Err(injected(libc::EIO)),
        Some(FaultAction::ShortWrite { bytes }) => {
            file.write_all_at(&buf[..bytes.min(buf.len())], pos)?;
            Err(injected(libc::ENOSPC))
        }
    }
}

/// `file.write_all(buf)`, where `file` is at `path`.
pub(crate) fn write_all(file: &mut File, path: &Path, buf: &[u8]) -> io::Result<()> {
    match triggered(path, FaultOp::Write) {
        None => file.write_all(buf),
        Some(FaultAction::Fail) => Err(injected(libc::EIO)),
        Some(FaultAction::ShortWrite { bytes }) => {
            file.write_all(&buf[..bytes.min(buf.len())])?;
            Err(injected(libc::ENOSPC))
        }
    }
}

/// `file.sync_data()`, where `file` is at `path`.
pub(crate) fn sync_data(file: &File, path: &Path) -> io::Result<()> {
    check(path, FaultOp::Sync)?;
    file.sync_data()
}

/// `file.sync_all()`, where `file` is at `path`.
pub(crate) fn sync_all(file: &File, path: &Path) -> io::Result<()> {
    check(path, FaultOp::Sync)?;
    file.sync_all()
}

/// `std::fs::rename(from, to)`.
pub(crate) fn rename(from: &Path, to: &Path) -> io::Result<()> {
    check(from, FaultOp::Rename)?;
    std::fs::rename(from, to)
}

/// Fails if a fault says a read of `path` fails (called before the read itself).
pub(crate) fn before_read(path: &Path) -> io::Result<()> {
    check(path, FaultOp::Read)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nth_matching_operation_fails_and_only_under_its_directory() {
        let dir = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        let f = File::create(dir.path().join("a")).unwrap();
        let g = File::create(other.path().join("b")).unwrap();
        let guard = inject(FaultPlan {
            under: dir.path().to_path_buf(),
            op: FaultOp::Sync,
            skip: 1,
            times: 1,
            action: FaultAction::Fail,
        });
        let a = dir.path().join("a");
        assert!(sync_data(&f, &a).is_ok());
        let e = sync_data(&f, &a).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EIO));
        assert!(sync_data(&f, &a).is_ok(), "only one failure was asked for");
        assert!(sync_all(&g, &other.path().join("b")).is_ok());
        assert_eq!(guard.hits(), 1);
    }

    #[test]
    fn a_short_write_stores_the_prefix_then_fails() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seg");
        let f = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        let _guard = inject(FaultPlan {
            under: dir.path().to_path_buf(),
            op: FaultOp::Write,
            skip: 0,
            times: u64::MAX,
            action: FaultAction::ShortWrite { bytes: 3 },
        });
        let e = write_all_at(&f, &path, b"abcdef", 0).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        assert_eq!(std::fs::read(&path).unwrap(), b"abc");
    }

    #[test]
    fn a_dropped_guard_removes_its_fault() {
        let dir = tempfile::tempdir().unwrap();
        let from = dir.path().join("x");
        std::fs::write(&from, b"1").unwrap();
        let guard = inject(FaultPlan {
            under: dir.path().to_path_buf(),
            op: FaultOp::Rename,
            skip: 0,
            times: u64::MAX,
            action: FaultAction::Fail,
        });
        assert!(rename(&from, &dir.path().join("y")).is_err());
        drop(guard);
        rename(&from, &dir.path().join("y")).unwrap();
        assert_eq!(std::fs::read(dir.path().join("y")).unwrap(), b"1");
    }
}
