//! `tern mirrors --describe`: each mirror partition's offsets on both sides, its lag and state,
//! how much of the source is mirrored and, while a copy runs, the time left. The time left is
//! measured: when some partition lags, the mirrors are described a second time a second later
//! and each partition's rate is what it gained between the two looks.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use kafka_protocol::messages::describe_cluster_mirrors_response::MirrorPartition;
use kafka_protocol::messages::DescribeClusterMirrorsRequest;
use tern_protocol::client::KafkaConnection;

use crate::mirrors::progress::{human, percent, time_left};
use crate::mirrors::{check_top, dash, error_name, json_str, str_bytes};

/// How long apart the two looks that measure the rate are.
const RATE_WINDOW: Duration = Duration::from_secs(1);

/// One partition as described: mirror, topic and the broker's detail.
type Row = (String, String, MirrorPartition);

/// The partitions of `mirror` (or of every mirror), sorted.
async fn rows(conn: &mut KafkaConnection, mirror: Option<&str>) -> Result<Vec<Row>> {
    let request = DescribeClusterMirrorsRequest::default()
        .with_mirror_names(mirror.map(str_bytes).into_iter().collect());
    let r = conn.send(&request, 0).await?;
    check_top(r.error_code, r.error_message)?;
    let mut rows = Vec::new();
    for m in r.mirrors {
        if m.error_code != 0 {
            bail!(
                "{}: cluster mirror {}",
                error_name(m.error_code),
                m.mirror_name
            );
        }
        for t in m.topics {
            for p in t.partitions {
                rows.push((m.mirror_name.to_string(), t.topic_name.to_string(), p));
            }
        }
    }
    rows.sort_by(|a, b| (&a.0, &a.1, a.2.partition_index).cmp(&(&b.0, &b.1, b.2.partition_index)));
    Ok(rows)
}

/// A copy is under way on this partition (its time left is worth measuring).
fn copying(p: &MirrorPartition) -> bool {
    p.lag > 0 && matches!(p.state_value.as_str(), "MIRRORING" | "PREPARING")
}

/// Each row's time left: from the offsets it gained since `before` was taken `elapsed` ago.
/// Each copying partition's estimated time left (`None`: no progress in the window).
type TimesLeft = HashMap<(String, String, i32), Option<Duration>>;

/// The time left of one partition: absent when it was not copying.
fn left_of(left: &TimesLeft, m: &str, t: &str, p: i32) -> Option<Option<Duration>> {
    left.get(&(m.to_string(), t.to_string(), p)).copied()
}

fn times_left(before: &[Row], now: &[Row], elapsed: Duration) -> TimesLeft {
    let earlier: HashMap<(&str, &str, i32), i64> = before
        .iter()
        .map(|(m, t, p)| {
            (
                (m.as_str(), t.as_str(), p.partition_index),
                p.destination_offset,
            )
        })
        .collect();
    now.iter()
        .filter(|(_, _, p)| copying(p))
        .map(|(m, t, p)| {
            let gained = earlier
                .get(&(m.as_str(), t.as_str(), p.partition_index))
                .map_or(0, |d| p.destination_offset - d);
            let rate = gained.max(0) as f64 / elapsed.as_secs_f64().max(0.001);
            (
                (m.clone(), t.clone(), p.partition_index),
                time_left(p.lag, rate),
            )
        })
        .collect()
}

/// Runs `--describe`; `failed` shows FAILED partitions with their errors only.
pub(crate) async fn describe(
    conn: &mut KafkaConnection,
    mirror: Option<&str>,
    failed: bool,
    json: bool,
) -> Result<i32> {
    let first = rows(conn, mirror).await?;
    let (mut rows, left) = if !failed && first.iter().any(|r| copying(&r.2)) {
        let started = Instant::now();
        tokio::time::sleep(RATE_WINDOW).await;
        let second = rows(conn, mirror).await?;
        let left = times_left(&first, &second, started.elapsed());
        (second, left)
    } else {
        (first, HashMap::new())
    };
    if failed {
        rows.retain(|r| r.2.state_value.as_str() == "FAILED");
    }
    if json {
        print_json(&rows, &left);
        return Ok(0);
    }
    if rows.is_empty() {
        println!(
            "{}",
            if failed {
                "No failed partitions found"
            } else {
                "No mirror partitions found"
            }
        );
        return Ok(0);
    }
    if failed {
        print_failed(rows);
        return Ok(0);
    }
    println!(
        "{:<30} {:<40} {:<10} {:<15} {:<18} {:<10} {:<12} {:<9} TIME-LEFT",
        "MIRROR",
        "TOPIC",
        "PARTITION",
        "SOURCE-OFFSET",
        "DESTINATION-OFFSET",
        "LAG",
        "STATE",
        "MIRRORED"
    );
    for (m, t, p) in &rows {
        let mirrored = if p.source_offset >= 0 {
            format!("{:.1}%", percent(p.destination_offset, p.source_offset))
        } else {
            "-".to_string()
        };
        let time_left = match left_of(&left, m, t, p.partition_index) {
            Some(Some(d)) => human(d),
            Some(None) => "unknown".to_string(),
            None if p.lag == 0 => "0s".to_string(),
            None => "-".to_string(),
        };
        println!(
            "{:<30} {:<40} {:<10} {:<15} {:<18} {:<10} {:<12} {:<9} {}",
            m,
            t,
            p.partition_index,
            dash(p.source_offset),
            dash(p.destination_offset),
            dash(p.lag),
            p.state_value,
            mirrored,
            time_left
        );
    }
    Ok(0)
}

fn print_json(rows: &[Row], left: &TimesLeft) {
    let items: Vec<String> = rows
        .iter()
        .map(|(m, t, p)| {
            let mirrored = if p.source_offset >= 0 {
                format!("{:.3}", percent(p.destination_offset, p.source_offset))
            } else {
                "null".to_string()
            };
            let seconds_left = match left_of(left, m, t, p.partition_index) {
                Some(Some(d)) => format!("{:.1}", d.as_secs_f64()),
                None if p.lag == 0 => "0".to_string(),
                _ => "null".to_string(),
            };
            format!(
                "{{\"mirror\":{},\"topic\":{},\"partition\":{},\"sourceOffset\":{},\"destinationOffset\":{},\"lag\":{},\"state\":{},\"retryAttempt\":{},\"errorMessage\":{},\"percentMirrored\":{mirrored},\"secondsLeft\":{seconds_left}}}",
                json_str(m), json_str(t), p.partition_index, p.source_offset, p.destination_offset, p.lag,
                json_str(&p.state_value), p.retry_attempt,
                p.error_message.as_deref().map(json_str).unwrap_or_else(|| "null".into())
            )
        })
        .collect();
    println!("[{}]", items.join(","));
}

fn print_failed(rows: Vec<Row>) {
    println!(
        "{:<30} {:<40} {:<10} {:<7} ERROR",
        "MIRROR", "TOPIC", "PARTITION", "RETRY"
    );
    for (m, t, p) in rows {
        let retry = if p.retry_attempt < 0 {
            "NonRetryable".to_string()
        } else {
            p.retry_attempt.to_string()
        };
        let mut err = p.error_message.as_deref().unwrap_or_default().to_string();
        if err.chars().count() > 80 {
            err = format!("{}...", err.chars().take(77).collect::<String>());
        }
        println!(
            "{:<30} {:<40} {:<10} {:<7} {}",
            m, t, p.partition_index, retry, err
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(partition: i32, dest: i64, source: i64, state: &str) -> Row {
        (
            "dr".into(),
            "orders".into(),
            MirrorPartition::default()
                .with_partition_index(partition)
                .with_source_offset(source)
                .with_destination_offset(dest)
                .with_lag((source - dest).max(0))
                .with_state_value(str_bytes(state)),
        )
    }

    #[test]
    fn time_left_from_what_each_partition_gained() {
        let before = vec![
            row(0, 100, 1000, "MIRRORING"),
            row(1, 50, 1000, "MIRRORING"),
        ];
        let now = vec![
            row(0, 300, 1000, "MIRRORING"),
            row(1, 50, 1000, "MIRRORING"),
            row(2, 10, 10, "MIRRORING"),
        ];
        let left = times_left(&before, &now, Duration::from_secs(2));
        let key = |p| ("dr".to_string(), "orders".to_string(), p);
        // 200 records in 2 s, 700 to go.
        assert_eq!(left[&key(0)], Some(Duration::from_secs(7)));
        assert_eq!(left[&key(1)], None, "no progress: unknown");
        assert!(!left.contains_key(&key(2)), "caught up: not copying");
    }
}
