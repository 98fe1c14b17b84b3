//! `tern mirrors --verify`: proves, batch by batch, that a mirror's topics on the destination
//! hold the source's bytes at the same offsets, or names where they part.
//!
//! For every partition it reads both sides from the later of the two log starts up to the
//! destination's high watermark (leaders found through each side's Metadata) and compares each
//! record batch: base offset, last offset, CRC, and the whole batch's bytes. The first
//! difference ends that partition's check. A partition where the source ends first (writes on
//! the destination after a failover) differs at the source's end. Compacted topics are compacted
//! by each cluster's own cleaner, so their batches may legitimately differ: for them what
//! compaction preserves is compared instead ([`crate::mirrors::verify_compacted`]).

use std::collections::BTreeMap;

use anyhow::{anyhow, bail, Result};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::DescribeConfigsRequest;
use kafka_protocol::protocol::StrBytes;
use tern_protocol::client::KafkaConnection;
use tern_protocol::client_security::ClientSecurity;
use tern_protocol::record_batch::BatchIter;

use crate::mirrors::source::{destination_servers, mirror_topics, source_settings, Side};

const RESOURCE_TOPIC: i8 = 2;

/// How one partition compared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Every batch in the range is the same on both sides.
    Equal {
        /// Batches compared.
        batches: u64,
    },
    /// A compacted partition: what compaction preserves is the same on both sides.
    EqualCompacted {
        /// Offsets present on both sides, with the same record.
        shared_offsets: u64,
        /// Keys whose latest record is at the same offset on both sides.
        keys: u64,
    },
    /// The sides part at this offset.
    Differs {
        /// The first offset where they differ.
        offset: i64,
        /// What differs there.
        what: String,
    },
}

/// One partition's row.
struct Row {
    topic: String,
    partition: i32,
    start: i64,
    end: i64,
    verdict: Verdict,
}

/// A batch's identity for the comparison: base offset, last offset, CRC.
fn header(batch: &[u8]) -> (i64, i64, u32) {
    let base = i64::from_be_bytes(batch[0..8].try_into().unwrap_or_default());
    let delta = i32::from_be_bytes(batch[23..27].try_into().unwrap_or_default());
    let crc = u32::from_be_bytes(batch[17..21].try_into().unwrap_or_default());
    (base, base + delta as i64, crc)
}

/// Compares one partition over `[from, to)`.
async fn compare(
    source: &mut Side,
    dest: &mut Side,
    topic: &str,
    partition: i32,
    from: i64,
    to: i64,
) -> Result<Verdict> {
    let mut pos = from;
    let mut batches = 0u64;
    while pos < to {
        let d = dest.batches(topic, partition, pos).await?;
        let s = source.batches(topic, partition, pos).await?;
        let d_batches: Vec<&[u8]> = BatchIter::new(&d)
            .filter_map(|b| b.ok().map(|(_, bytes)| bytes))
            .filter(|b| b.len() >= 61)
            .collect();
        let s_batches: Vec<&[u8]> = BatchIter::new(&s)
            .filter_map(|b| b.ok().map(|(_, bytes)| bytes))
            .filter(|b| b.len() >= 61)
            .collect();
        if d_batches.is_empty() {
            bail!("the destination returned no batch of {topic}-{partition} at {pos}");
        }
        for (i, db) in d_batches.iter().enumerate() {
            let (d_base, d_last, d_crc) = header(db);
            if d_base >= to {
                return Ok(Verdict::Equal { batches });
            }
            let Some(sb) = s_batches.get(i) else {
                return Ok(Verdict::Differs {
                    offset: d_base.max(pos),
                    what: "the source has no batch there (it ends first)".into(),
                });
            };
            let (s_base, s_last, s_crc) = header(sb);
            let what = if (s_base, s_last) != (d_base, d_last) {
                Some(format!(
                    "batches span {s_base}..={s_last} on the source, {d_base}..={d_last} here"
                ))
            } else if s_crc != d_crc {
                Some(format!("CRC {s_crc:08x} on the source, {d_crc:08x} here"))
            } else if sb != db {
                Some("same CRC, different bytes (the leader epoch or header)".to_string())
            } else {
                None
            };
            if let Some(what) = what {
                return Ok(Verdict::Differs {
                    offset: d_base.min(s_base).max(pos),
                    what,
                });
            }
            batches += 1;
            pos = d_last + 1;
        }
    }
    Ok(Verdict::Equal { batches })
}

/// Whether a destination topic is compacted.
async fn compacted(conn: &mut KafkaConnection, topic: &str) -> Result<bool> {
    let request =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(RESOURCE_TOPIC)
            .with_resource_name(StrBytes::from_string(topic.to_string()))
            .with_configuration_keys(Some(vec![StrBytes::from_static_str("cleanup.policy")]))]);
    let response = conn.send(&request, 4).await?;
    Ok(response.results.first().is_some_and(|r| {
        r.configs.iter().any(|c| {
            c.name.as_str() == "cleanup.policy"
                && c.value.as_deref().is_some_and(|v| v.contains("compact"))
        })
    }))
}

/// Runs `--verify`; returns the exit status: 0 every partition equal, 2 some differ.
pub(crate) async fn verify(
    conn: &mut KafkaConnection,
    bootstrap_server: &str,
    mirror: &str,
    topics: Option<Vec<String>>,
    overrides: BTreeMap<String, String>,
    json: bool,
) -> Result<i32> {
    let settings = source_settings(conn, mirror, overrides).await?;
    let security = settings
        .client_security()
        .map_err(|e| anyhow!("the mirror's source settings: {}", e.0))?;
    let wanted = mirror_topics(conn, mirror, topics.as_deref()).await?;
    if let Some(names) = &topics {
        for n in names {
            if !wanted.iter().any(|(t, _)| t == n) {
                bail!("topic {n} is not mirrored by {mirror}");
            }
        }
    }
    let dest_servers = destination_servers(bootstrap_server)?;
    let mut dest = Side::connect("destination", &dest_servers, ClientSecurity::default()).await?;
    let mut source = Side::connect("source", &settings.bootstrap_servers, security).await?;

    let mut rows = Vec::new();
    for (topic, partitions) in &wanted {
        let is_compacted = compacted(conn, topic).await?;
        for &partition in partitions {
            let (d_start, d_end) = dest.span(topic, partition).await?;
            let (s_start, s_end) = source.span(topic, partition).await?;
            let start = d_start.max(s_start);
            let verdict = if is_compacted {
                crate::mirrors::verify_compacted::compare(
                    &mut source,
                    &mut dest,
                    topic,
                    partition,
                    start,
                    d_end,
                    s_end,
                )
                .await?
            } else if start >= d_end {
                Verdict::Equal { batches: 0 }
            } else {
                compare(&mut source, &mut dest, topic, partition, start, d_end).await?
            };
            let verdict = match verdict {
                // Past the source's end the destination holds what the source does not.
                Verdict::Equal { .. } | Verdict::EqualCompacted { .. } if d_end > s_end => {
                    Verdict::Differs {
                        offset: s_end,
                        what: "the source has no batch there (it ends first)".into(),
                    }
                }
                v => v,
            };
            rows.push(Row {
                topic: topic.clone(),
                partition,
                start,
                end: d_end,
                verdict,
            });
        }
    }
    print_rows(&rows, json);
    let differ = rows
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::Differs { .. }))
        .count();
    Ok(if differ > 0 { 2 } else { 0 })
}

fn print_rows(rows: &[Row], json: bool) {
    let differ = rows
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::Differs { .. }))
        .count();
    let equal = rows.len() - differ;
    if json {
        let items: Vec<String> = rows
            .iter()
            .map(|r| {
                let (result, detail) = match &r.verdict {
                    Verdict::Equal { batches } => ("EQUAL", format!("\"batches\":{batches}")),
                    Verdict::EqualCompacted {
                        shared_offsets,
                        keys,
                    } => (
                        "EQUAL",
                        format!("\"compacted\":true,\"sharedOffsets\":{shared_offsets},\"keys\":{keys}"),
                    ),
                    Verdict::Differs { offset, what } => (
                        "DIFFERS",
                        format!(
                            "\"firstDivergentOffset\":{offset},\"detail\":{}",
                            crate::mirrors::json_str(what)
                        ),
                    ),
                };
                format!(
                    "{{\"topic\":{},\"partition\":{},\"startOffset\":{},\"endOffset\":{},\"result\":\"{result}\",{detail}}}",
                    crate::mirrors::json_str(&r.topic),
                    r.partition,
                    r.start,
                    r.end
                )
            })
            .collect();
        println!(
            "{{\"partitions\":[{}],\"equal\":{equal},\"differ\":{differ}}}",
            items.join(",")
        );
        return;
    }
    println!(
        "{:<30} {:>9} {:>12} {:>12}  RESULT",
        "TOPIC", "PARTITION", "FROM", "TO"
    );
    for r in rows {
        let result = match &r.verdict {
            Verdict::Equal { batches } => format!("EQUAL ({batches} batches)"),
            Verdict::EqualCompacted {
                shared_offsets,
                keys,
            } => format!(
                "EQUAL (compacted: {shared_offsets} offsets on both sides the same, {keys} keys' latest records at the same offsets)"
            ),
            Verdict::Differs { offset, what } => format!("DIFFERS at offset {offset}: {what}"),
        };
        println!(
            "{:<30} {:>9} {:>12} {:>12}  {result}",
            r.topic, r.partition, r.start, r.end
        );
    }
    println!("{} partitions: {equal} equal, {differ} differ", rows.len());
}
