//! Framing of fetched record data: which whole batches of a response a fetcher keeps.

use bytes::Bytes;
use tern_protocol::record_batch::RecordBatchHeader;

/// The whole batches of a fetched buffer that end at or after `fetch_offset`: leading batches
/// wholly below it are skipped, a partial batch at the end is dropped.
pub fn whole_batches_from(records: &Bytes, fetch_offset: i64) -> (Bytes, Option<i64>) {
    let mut pos = 0usize;
    let mut start = None;
    let mut first_base = None;
    while pos < records.len() {
        let rest = &records[pos..];
        let header = match RecordBatchHeader::parse(rest) {
            Ok(h) => h,
            // A partial batch (cut by the size limit) or the old message format's tail.
            Err(_) => break,
        };
        if header.size() > rest.len() {
            break;
        }
        if header.last_offset() >= fetch_offset && start.is_none() {
            start = Some(pos);
            first_base = Some(header.base_offset);
        }
        pos += header.size();
    }
    match start {
        Some(s) => (records.slice(s..pos), first_base),
        None => (Bytes::new(), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use tern_protocol::record_batch::Compression;
    use tern_protocol::records::RecordBatchBuilder;

    fn batch(base: i64, n: usize) -> Bytes {
        let mut b = RecordBatchBuilder::new(Compression::None).base_offset(base);
        for i in 0..n {
            b.push(1000 + i as i64, Some(b"k"), Some(b"value"), &[])
                .unwrap();
        }
        b.build().unwrap()
    }

    #[test]
    fn keeps_whole_batches_at_or_after_the_fetch_offset() {
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&batch(0, 3));
        buf.extend_from_slice(&batch(3, 3));
        let third = batch(6, 3);
        buf.extend_from_slice(&third);
        let all = buf.clone().freeze();
        // Fetch offset inside the second batch: that batch and the third.
        let (kept, first) = whole_batches_from(&all, 4);
        assert_eq!(first, Some(3));
        assert_eq!(kept.len(), all.len() - batch(0, 3).len());
        // A cut third batch is dropped.
        let cut = all.slice(..all.len() - 5);
        let (kept, _) = whole_batches_from(&cut, 0);
        assert_eq!(kept.len(), all.len() - third.len());
        // Everything below the offset: nothing.
        let (kept, first) = whole_batches_from(&all, 9);
        assert!(kept.is_empty());
        assert_eq!(first, None);
    }
}
