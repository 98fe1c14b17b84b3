//! Seed corpora. Each target derives its seeds with Tern's own encoders and the record-batch
//! fixtures in `protocol/testdata` (written by Kafka's Java client, kafka-python and Tern):
//! `TERN_FUZZ_WRITE_SEEDS=DIR target` writes them into DIR and exits (`tests/fuzz.sh --seed`).

use std::path::{Path, PathBuf};

use bytes::Bytes;
use tern_protocol::record_batch::Compression;
use tern_protocol::records::RecordBatchBuilder;

/// A seed: a file name and its bytes.
pub type Seed = (String, Vec<u8>);

/// Writes `make()`'s seeds into `$TERN_FUZZ_WRITE_SEEDS` and exits, when that is set; returns
/// at once otherwise. Called from each target's init.
pub fn write_if_asked(make: impl FnOnce() -> Vec<Seed>) {
    let Some(dir) = std::env::var_os("TERN_FUZZ_WRITE_SEEDS") else {
        return;
    };
    let dir = PathBuf::from(dir);
    std::fs::create_dir_all(&dir).expect("create the seed directory");
    let seeds = make();
    for (name, bytes) in &seeds {
        std::fs::write(dir.join(name), bytes).expect("write a seed");
    }
    eprintln!("wrote {} seeds to {}", seeds.len(), dir.display());
    std::process::exit(0);
}

/// `protocol/testdata`, found from this crate's source directory.
fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../protocol/testdata")
}

/// Every record-batch fixture as (`<writer>_<name>`, bytes), sorted by name.
pub fn fixture_batches() -> Vec<Seed> {
    let mut out = Vec::new();
    for writer in ["kafka_java", "kafka_python", "tern_built"] {
        let dir = testdata().join(writer);
        let entries =
            std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            if path.extension().is_some_and(|x| x == "bin") {
                let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
                out.push((
                    format!("{writer}_{stem}"),
                    std::fs::read(&path).expect("read a fixture"),
                ));
            }
        }
    }
    out.sort();
    out
}

/// One batch of `records` (key, value) written with `codec`; transactional under `producer`.
pub fn batch(
    codec: Compression,
    producer: Option<(i64, i16)>,
    records: &[(Bytes, Option<Bytes>)],
) -> Vec<u8> {
    let mut b = RecordBatchBuilder::new(codec);
    if let Some((id, epoch)) = producer {
        b = b.producer(id, epoch, 0).transactional(true);
    }
    for (i, (k, v)) in records.iter().enumerate() {
        b.push(crate::NOW_MS + i as i64, Some(k), v.as_deref(), &[])
            .expect("push a seed record");
    }
    b.build().expect("build a seed batch").to_vec()
}
