//! The transaction index (`.txnindex`) of a segment: aborted transactions whose abort marker
//! lies in the segment, so a read_committed fetch can return the aborted list.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use crate::error::{IoContext, Result};

const ENTRY_SIZE: usize = 34;

/// An aborted transaction as returned to fetchers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    /// The producer of the aborted transaction.
    pub producer_id: i64,
    /// Offset of its first record.
    pub first_offset: i64,
    /// Offset of its abort marker.
    pub last_offset: i64,
    /// Last stable offset after the abort was written.
    pub last_stable_offset: i64,
}

/// Append-only file of 34-byte entries (version i16, producer id i64, first offset i64,
/// last offset i64, last stable offset i64), mirrored in memory.
#[derive(Debug)]
pub(crate) struct TransactionIndex {
    path: PathBuf,
    file: Option<File>,
    entries: Vec<AbortedTxn>,
}

fn i64_at(b: &[u8], at: usize) -> i64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(x)
}

/// The file's bytes for `entries`.
pub(crate) fn encode(entries: &[AbortedTxn]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(entries.len() * ENTRY_SIZE);
    for e in entries {
        bytes.extend_from_slice(&0i16.to_be_bytes());
        bytes.extend_from_slice(&e.producer_id.to_be_bytes());
        bytes.extend_from_slice(&e.first_offset.to_be_bytes());
        bytes.extend_from_slice(&e.last_offset.to_be_bytes());
        bytes.extend_from_slice(&e.last_stable_offset.to_be_bytes());
    }
    bytes
}

impl TransactionIndex {
    /// Loads the index if the file exists; a torn last entry is dropped.
    pub(crate) fn open(path: &Path) -> Result<Self> {
        let mut entries = Vec::new();
        match std::fs::read(path) {
            Ok(bytes) => {
                for e in bytes.chunks_exact(ENTRY_SIZE) {
                    if e[0..2] != [0, 0] {
                        break;
                    }
                    entries.push(AbortedTxn {
                        producer_id: i64_at(e, 2),
                        first_offset: i64_at(e, 10),
                        last_offset: i64_at(e, 18),
                        last_stable_offset: i64_at(e, 26),
                    });
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).ctx(path),
        }
        let mut index = TransactionIndex {
            path: path.to_path_buf(),
            file: None,
            entries,
        };
        if index.path.exists() {
            index.rewrite()?;
        }
        Ok(index)
    }

    fn rewrite(&mut self) -> Result<()> {
        let bytes = encode(&self.entries);
        let current = std::fs::metadata(&self.path).map(|m| m.len()).unwrap_or(0);
        if current != bytes.len() as u64 {
            std::fs::write(&self.path, &bytes).ctx(&self.path)?;
        }
        self.file = None;
        Ok(())
    }

    /// Records an aborted transaction.
    pub(crate) fn append(&mut self, txn: AbortedTxn) -> Result<()> {
        if self.file.is_none() {
            let f = OpenOptions::new()
                .append(true)
                .create(true)
                .open(&self.path)
                .ctx(&self.path)?;
            self.file = Some(f);
        }
        let e = encode(std::slice::from_ref(&txn));
        if let Some(f) = &mut self.file {
            crate::fault::write_all(f, &self.path, &e).ctx(&self.path)?;
        }
        self.entries.push(txn);
        Ok(())
    }

    /// Aborted transactions overlapping `[start, upper)`.
    pub(crate) fn collect(&self, start: i64, upper: i64, out: &mut Vec<AbortedTxn>) {
        for e in &self.entries {
            if e.last_offset >= start && e.first_offset < upper {
                out.push(*e);
            }
        }
    }

    /// Drops entries whose marker is at or past `offset`.
    pub(crate) fn truncate_to(&mut self, offset: i64) -> Result<()> {
        let before = self.entries.len();
        self.entries.retain(|e| e.last_offset < offset);
        if self.entries.len() != before {
            self.rewrite()?;
        }
        Ok(())
    }

    /// Drops every entry.
    pub(crate) fn reset(&mut self) -> Result<()> {
        self.entries.clear();
        if self.path.exists() {
            self.rewrite()?;
        }
        Ok(())
    }

    /// fsyncs the file.
    pub(crate) fn flush(&self) -> Result<()> {
        if let Some(f) = &self.file {
            crate::fault::sync_data(f, &self.path).ctx(&self.path)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_persist_and_truncate() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("0.txnindex");
        let mut t = TransactionIndex::open(&p).unwrap();
        let a = AbortedTxn {
            producer_id: 1,
            first_offset: 5,
            last_offset: 9,
            last_stable_offset: 10,
        };
        t.append(a).unwrap();
        t.append(AbortedTxn {
            first_offset: 20,
            last_offset: 30,
            ..a
        })
        .unwrap();
        drop(t);
        let mut t = TransactionIndex::open(&p).unwrap();
        let mut out = Vec::new();
        t.collect(0, 6, &mut out);
        assert_eq!(out, vec![a]);
        t.truncate_to(25).unwrap();
        let t = TransactionIndex::open(&p).unwrap();
        let mut out = Vec::new();
        t.collect(0, 100, &mut out);
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn torn_entry_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("0.txnindex");
        std::fs::write(&p, [0u8; 40]).unwrap();
        let t = TransactionIndex::open(&p).unwrap();
        assert_eq!(t.entries.len(), 1);
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 34);
    }
}
