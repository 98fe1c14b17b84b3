//! What `tern mirrors` reports of a copy: the failover report `--stop` prints (per partition,
//! the offset mirroring ended at, what the source held at that moment if it can be reached, how
//! many records and how many seconds of the source's writes the failover leaves behind, and how
//! long the topics took to become writable), and the progress `--start --wait` follows.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Result};
use kafka_protocol::messages::describe_cluster_mirrors_response::MirrorPartition;
use kafka_protocol::messages::last_mirrored_offsets_request::{PartitionData, TopicData};
use kafka_protocol::messages::LastMirroredOffsetsRequest;
use tern_protocol::client::KafkaConnection;
use tern_protocol::record_batch::BatchIter;

use crate::mirrors::progress::{bar, human, percent, time_left};
use crate::mirrors::source::{describe_mirror, mirror_topics, source_settings, Side};
use crate::mirrors::{error_name, json_str, str_bytes};

/// One partition of the report.
struct Row {
    topic: String,
    partition: i32,
    last_mirrored_offset: i64,
    /// The source's high watermark right after the failover, if reachable.
    source_high_watermark: Option<i64>,
    /// Age of the oldest source record not mirrored, at the failover (0 when none).
    lag_seconds: Option<f64>,
}

impl Row {
    fn not_mirrored(&self) -> Option<i64> {
        self.source_high_watermark
            .map(|hw| (hw - self.last_mirrored_offset).max(0))
    }
}

/// The destination's last mirrored offsets of these stopped topics' partitions.
async fn last_mirrored(
    conn: &mut KafkaConnection,
    mirror: &str,
    topics: &[(String, Vec<i32>)],
) -> Result<Vec<(String, i32, i64)>> {
    let topics = topics.iter().map(|(name, partitions)| {
        let partitions = partitions.iter();
        let partitions = partitions.map(|&p| PartitionData::default().with_partition_index(p));
        TopicData::default()
            .with_name(str_bytes(name))
            .with_partitions(partitions.collect())
    });
    let request = LastMirroredOffsetsRequest::default()
        .with_mirror_name(str_bytes(mirror))
        .with_topics(topics.collect());
    let r = conn.send(&request, 0).await?;
    if r.error_code != 0 {
        bail!("{}: last mirrored offsets", error_name(r.error_code));
    }
    let mut out = Vec::new();
    for t in r.topics {
        for p in t.partitions {
            if p.error_code != 0 {
                bail!(
                    "{}: last mirrored offset of {}-{}",
                    error_name(p.error_code),
                    t.name,
                    p.partition_index
                );
            }
            out.push((
                t.name.to_string(),
                p.partition_index,
                p.last_mirrored_offset,
            ));
        }
    }
    out.sort();
    Ok(out)
}

/// What the source holds past `offset`: its high watermark and the age of its record there.
async fn source_side(
    source: &mut Side,
    topic: &str,
    partition: i32,
    offset: i64,
    at_ms: i64,
) -> Result<(i64, f64)> {
    let (_, hw) = source.span(topic, partition).await?;
    if hw <= offset {
        return Ok((hw, 0.0));
    }
    let records = source.batches(topic, partition, offset).await?;
    // A compacted batch's base timestamp may be its delete horizon (KIP-534), not a record's
    // time: its max timestamp is one then.
    let first_timestamp = BatchIter::new(&records)
        .filter_map(|b| b.ok())
        .map(|(h, _)| h)
        .find(|h| h.last_offset() >= offset)
        .map(|h| {
            if h.has_delete_horizon() {
                h.max_timestamp
            } else {
                h.base_timestamp
            }
        });
    let lag = first_timestamp
        .map(|ts| ((at_ms - ts).max(0)) as f64 / 1000.0)
        .unwrap_or(0.0);
    Ok((hw, lag))
}

/// Prints the failover report of `topics` (just stopped through `conn`, answered after
/// `writable_after`).
pub(crate) async fn print_failover_report(
    conn: &mut KafkaConnection,
    mirror: &str,
    topics: &[String],
    writable_after: Duration,
    json: bool,
) -> Result<()> {
    let at_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    let wanted = mirror_topics(conn, mirror, Some(topics)).await?;
    let offsets = last_mirrored(conn, mirror, &wanted).await?;
    // The source may be down: that is often why one fails over. Then its figures are unknown.
    let mut source = match source_settings(conn, mirror, Default::default()).await {
        Ok(settings) => match settings.client_security() {
            Ok(security) => Side::connect("source", &settings.bootstrap_servers, security)
                .await
                .ok(),
            Err(_) => None,
        },
        Err(_) => None,
    };
    let mut rows = Vec::new();
    for (topic, partition, lmo) in offsets {
        let figures = match source.as_mut() {
            Some(s) => source_side(s, &topic, partition, lmo, at_ms).await.ok(),
            None => None,
        };
        rows.push(Row {
            topic,
            partition,
            last_mirrored_offset: lmo,
            source_high_watermark: figures.map(|f| f.0),
            lag_seconds: figures.map(|f| f.1),
        });
    }
    let ms = writable_after.as_millis();
    let opt = |v: Option<i64>| v.map_or("null".to_string(), |v| v.to_string());
    if json {
        let items: Vec<String> = rows
            .iter()
            .map(|r| {
                format!(
                    "{{\"topic\":{},\"partition\":{},\"lastMirroredOffset\":{},\"sourceHighWatermark\":{},\"recordsNotMirrored\":{},\"lagSeconds\":{}}}",
                    json_str(&r.topic),
                    r.partition,
                    r.last_mirrored_offset,
                    opt(r.source_high_watermark),
                    opt(r.not_mirrored()),
                    r.lag_seconds.map_or("null".to_string(), |l| format!("{l:.3}")),
                )
            })
            .collect();
        println!(
            "{{\"mirror\":{},\"writableAfterMs\":{ms},\"partitions\":[{}]}}",
            json_str(mirror),
            items.join(",")
        );
        return Ok(());
    }
    println!(
        "{:<30} {:>9} {:>20} {:>21} {:>20} {:>11}",
        "TOPIC",
        "PARTITION",
        "LAST-MIRRORED-OFFSET",
        "SOURCE-HIGH-WATERMARK",
        "RECORDS-NOT-MIRRORED",
        "LAG-SECONDS"
    );
    let dash = |v: Option<i64>| v.map_or("-".to_string(), |v| v.to_string());
    for r in &rows {
        println!(
            "{:<30} {:>9} {:>20} {:>21} {:>20} {:>11}",
            r.topic,
            r.partition,
            r.last_mirrored_offset,
            dash(r.source_high_watermark),
            dash(r.not_mirrored()),
            r.lag_seconds.map_or("-".to_string(), |l| format!("{l:.1}")),
        );
    }
    let lost: i64 = rows.iter().filter_map(Row::not_mirrored).sum();
    let unknown = rows
        .iter()
        .filter(|r| r.source_high_watermark.is_none())
        .count();
    println!(
        "Writable after {ms} ms; {lost} source record(s) not mirrored{}",
        if unknown > 0 {
            format!(" ({unknown} partition(s) unknown: source unreachable)")
        } else {
            String::new()
        }
    );
    Ok(())
}

/// `--start --wait`: describes the started topics every second, printing a progress bar, how
/// much of the source is mirrored and an estimate of the time left, until every partition is MIRRORING with lag 0.
pub(crate) async fn wait_caught_up(
    conn: &mut KafkaConnection,
    mirror: &str,
    topics: &[String],
) -> Result<()> {
    let started = std::time::Instant::now();
    let mut first: Option<(std::time::Instant, i64)> = None;
    loop {
        let m = describe_mirror(conn, mirror).await?;
        let parts: Vec<&MirrorPartition> = m
            .topics
            .iter()
            .filter(|t| topics.iter().any(|n| **n == *t.topic_name))
            .flat_map(|t| t.partitions.iter())
            .collect();
        if let Some(failed) = parts.iter().find(|p| p.state_value.as_str() == "FAILED") {
            eprintln!(
                "partition {} is FAILED (retrying): {}",
                failed.partition_index,
                failed.error_message.as_deref().unwrap_or("")
            );
        }
        let source: i64 = parts.iter().map(|p| p.source_offset.max(0)).sum();
        let mirrored: i64 = parts.iter().map(|p| p.destination_offset.max(0)).sum();
        let done = !parts.is_empty()
            && parts.iter().all(|p| {
                p.state_value.as_str() == "MIRRORING" && p.lag == 0 && p.source_offset >= 0
            });
        let now = std::time::Instant::now();
        let (t0, m0) = *first.get_or_insert((now, mirrored));
        let rate = (mirrored - m0) as f64 / now.duration_since(t0).as_secs_f64().max(0.001);
        let left = (source - mirrored).max(0);
        let percent = percent(mirrored, source);
        let eta = if done {
            "caught up".to_string()
        } else {
            match time_left(left, rate) {
                Some(d) => format!("about {} left", human(d)),
                None => "time left unknown".to_string(),
            }
        };
        println!(
            "{} {percent:5.1}% {mirrored} of {source} records mirrored, {left} to go, {eta} [{:.0} s]",
            bar(percent, 30),
            started.elapsed().as_secs_f64()
        );
        if done {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
