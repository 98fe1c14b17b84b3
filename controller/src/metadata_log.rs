//! The durable, ordered log of metadata records that the controller replays on start.
//!
//! Each entry on disk is `[u32 length][u32 crc32c][json record]`, big-endian. On open, entries
//! are read until the first torn or corrupt one, and the file is truncated there: an entry that
//! was not fully written was never acknowledged.

use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::records::MetadataRecord;
use crate::ControllerError;

/// Largest single entry accepted on read; guards recovery against a garbage length.
const MAX_ENTRY_BYTES: u32 = 16 * 1024 * 1024;

/// A durable sequence of metadata records.
pub trait MetadataLog: Send {
    /// Appends records durably, in order; returns once they are safe on disk.
    fn append(&mut self, records: &[MetadataRecord]) -> Result<(), ControllerError>;
    /// All records in the log, oldest first.
    fn replay(&mut self) -> Result<Vec<MetadataRecord>, ControllerError>;
}

/// A single-voter metadata log in one file, fsynced on every append.
pub struct FileMetadataLog {
    path: PathBuf,
    file: File,
}

impl FileMetadataLog {
    /// Opens (or creates) the log at `dir/metadata.log`.
    pub fn open(dir: &Path) -> Result<Self, ControllerError> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join("metadata.log");
        let file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&path)?;
        Ok(FileMetadataLog { path, file })
    }

    fn read_entries(&self) -> Result<(Vec<MetadataRecord>, u64), ControllerError> {
        let mut reader = BufReader::new(File::open(&self.path)?);
        let mut records = Vec::new();
        let mut valid_len = 0u64;
        loop {
            let mut head = [0u8; 8];
            if read_full(&mut reader, &mut head)? < 8 {
                break;
            }
            let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
            let crc = u32::from_be_bytes([head[4], head[5], head[6], head[7]]);
            if len > MAX_ENTRY_BYTES {
                break;
            }
            let mut body = vec![0u8; len as usize];
            if read_full(&mut reader, &mut body)? < body.len() || crc32c::crc32c(&body) != crc {
                break;
            }
            match serde_json::from_slice(&body) {
                Ok(record) => records.push(record),
                Err(_) => break,
            }
            valid_len += 8 + len as u64;
        }
        Ok((records, valid_len))
    }
}

fn read_full(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        let n = reader.read(&mut buf[got..])?;
        if n == 0 {
            break;
        }
        got += n;
    }
    Ok(got)
}

impl MetadataLog for FileMetadataLog {
    fn append(&mut self, records: &[MetadataRecord]) -> Result<(), ControllerError> {
        let mut buf = Vec::new();
        for record in records {
            let body = serde_json::to_vec(record)
                .map_err(|e| ControllerError::Corrupt(format!("encode record: {e}")))?;
            buf.extend_from_slice(&(body.len() as u32).to_be_bytes());
            buf.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
            buf.extend_from_slice(&body);
        }
        self.file.write_all(&buf)?;
        self.file.sync_data()?;
        Ok(())
    }

    fn replay(&mut self) -> Result<Vec<MetadataRecord>, ControllerError> {
        let (records, valid_len) = self.read_entries()?;
        let actual = self.file.seek(SeekFrom::End(0))?;
        if actual != valid_len {
            tracing::warn!(
                path = %self.path.display(),
                valid_len,
                actual,
                "truncating torn metadata log tail"
            );
            self.file.set_len(valid_len)?;
            self.file.sync_all()?;
        }
        Ok(records)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn topic(name: &str) -> MetadataRecord {
        MetadataRecord::Topic {
            name: name.into(),
            topic_id: Uuid::new_v4(),
        }
    }

    #[test]
    fn records_survive_reopen_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (topic("a"), topic("b"));
        {
            let mut log = FileMetadataLog::open(dir.path()).unwrap();
            log.append(std::slice::from_ref(&a)).unwrap();
            log.append(std::slice::from_ref(&b)).unwrap();
        }
        let mut log = FileMetadataLog::open(dir.path()).unwrap();
        assert_eq!(log.replay().unwrap(), vec![a, b]);
    }

    #[test]
    fn torn_tail_is_truncated_and_appends_continue() {
        let dir = tempfile::tempdir().unwrap();
        let a = topic("a");
        {
            let mut log = FileMetadataLog::open(dir.path()).unwrap();
            log.append(&[a.clone(), topic("b")]).unwrap();
        }
        let path = dir.path().join("metadata.log");
        let len = std::fs::metadata(&path).unwrap().len();
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(len - 3).unwrap();
        let c = topic("c");
        {
            let mut log = FileMetadataLog::open(dir.path()).unwrap();
            assert_eq!(log.replay().unwrap(), vec![a.clone()]);
            log.append(std::slice::from_ref(&c)).unwrap();
        }
        let mut log = FileMetadataLog::open(dir.path()).unwrap();
        assert_eq!(log.replay().unwrap(), vec![a, c]);
    }

    #[test]
    fn flipped_byte_stops_replay_at_the_corrupt_entry() {
        let dir = tempfile::tempdir().unwrap();
        let a = topic("a");
        {
            let mut log = FileMetadataLog::open(dir.path()).unwrap();
            log.append(std::slice::from_ref(&a)).unwrap();
            log.append(&[topic("b")]).unwrap();
        }
        let path = dir.path().join("metadata.log");
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 2;
        bytes[last] ^= 0x55;
        std::fs::write(&path, &bytes).unwrap();
        let mut log = FileMetadataLog::open(dir.path()).unwrap();
        assert_eq!(log.replay().unwrap(), vec![a]);
    }
}
