//! `tern mirrors`: the admin CLI for cluster mirrors, after the prototype's
//! `kafka-cluster-mirrors.sh` (same actions, options and table layouts).

use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use kafka_protocol::messages::{
    create_cluster_mirror_request, pause_mirror_topics_request, resume_mirror_topics_request,
    start_mirror_topics_request, stop_mirror_topics_request, CreateClusterMirrorRequest,
    DeleteClusterMirrorRequest, ListClusterMirrorsRequest, PauseMirrorTopicsRequest,
    ResumeMirrorTopicsRequest, StartMirrorTopicsRequest, StopMirrorTopicsRequest,
};
use kafka_protocol::protocol::StrBytes;
use tern_protocol::client::KafkaConnection;
use tern_protocol::error::ResponseError;
use tern_protocol::mirror::errors::mirror_error_name;

mod describe;
mod progress;
mod report;
mod source;
mod verify;
mod verify_compacted;

/// What to do (exactly one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// --create
    Create,
    /// --start
    Start,
    /// --stop
    Stop,
    /// --pause
    Pause,
    /// --resume
    Resume,
    /// --list
    List,
    /// --describe
    Describe,
    /// --delete
    Delete,
    /// --verify
    Verify,
}

/// Parsed `tern mirrors` options.
#[derive(Debug, Clone)]
pub(crate) struct MirrorsArgs {
    /// The destination cluster (a Tern broker).
    pub(crate) bootstrap_server: String,
    /// The action.
    pub(crate) action: Action,
    /// --mirror
    pub(crate) mirror: Option<String>,
    /// --mirror-config (properties file with the source's settings)
    pub(crate) mirror_config: Option<PathBuf>,
    /// --topics (comma-separated names or regexes)
    pub(crate) topics: Option<String>,
    /// --exclude (comma-separated regexes, with --start)
    pub(crate) exclude: Option<String>,
    /// --json (with --describe)
    pub(crate) json: bool,
    /// --failed (with --describe)
    pub(crate) failed: bool,
    /// --wait (with --start): follow the copy until the topics are caught up
    pub(crate) wait: bool,
}

/// A string field of a mirror request.
pub(crate) fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// A per-topic mirror response (start, stop, pause, resume) as `topics_outcome` reads it: the
/// top-level error code and message, then each topic's name, error code and message.
type TopicResults = (i16, Option<StrBytes>, Vec<(String, i16, Option<StrBytes>)>);

/// The `TopicResults` of one of the per-topic mirror responses (their topic types differ).
macro_rules! topic_results {
    ($r:expr) => {{
        let r = $r;
        let topics = r.topics.into_iter();
        let topics = topics.map(|t| (t.name.to_string(), t.error_code, t.error_message));
        (r.error_code, r.error_message, topics.collect::<Vec<_>>())
    }};
}

/// Kafka's name for an error code (`UNKNOWN_TOPIC_OR_PARTITION`, `READ_ONLY_TOPIC`, ...).
pub(crate) fn error_name(code: i16) -> String {
    if let Some(n) = mirror_error_name(code) {
        return n.to_string();
    }
    match ResponseError::try_from_code(code) {
        None => "NONE".into(),
        Some(ResponseError::Unknown(c)) => format!("ERROR_{c}"),
        Some(e) => {
            let camel = format!("{e:?}");
            let mut out = String::new();
            for (i, ch) in camel.chars().enumerate() {
                if ch.is_ascii_uppercase() && i > 0 {
                    out.push('_');
                }
                out.push(ch.to_ascii_uppercase());
            }
            out
        }
    }
}

fn is_pattern(item: &str) -> bool {
    item.chars().any(|c| "*?[]()|+^$\\{}".contains(c))
}

/// The items of `--topics` / `--exclude`: names and regexes, split only between them (a
/// comma inside `{1,3}` stays in its regex).
fn split(list: &str) -> Vec<String> {
    tern_mirror::split_patterns(list)
        .into_iter()
        .map(str::to_string)
        .collect()
}

fn left_truncate(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_string();
    }
    let tail: String = s
        .chars()
        .rev()
        .take(width - 3)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    format!("...{tail}")
}

pub(crate) fn dash(v: i64) -> String {
    if v < 0 {
        "-".into()
    } else {
        v.to_string()
    }
}

/// `s` as a JSON string literal.
pub(crate) fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Runs the command; returns the process exit code.
pub(crate) async fn run(args: MirrorsArgs) -> Result<i32> {
    let need_mirror = || {
        args.mirror
            .clone()
            .ok_or_else(|| anyhow!("--mirror is required with this action"))
    };
    let need_topics = || {
        args.topics
            .clone()
            .ok_or_else(|| anyhow!("--topics is required with this action"))
    };
    if args.exclude.is_some() && args.action != Action::Start {
        bail!("--exclude is only valid with --start");
    }
    if args.wait && args.action != Action::Start {
        bail!("--wait is only valid with --start");
    }
    if args.failed && args.action != Action::Describe {
        bail!("--failed is only valid with --describe");
    }
    if args.json
        && !matches!(
            args.action,
            Action::Describe | Action::Verify | Action::Stop
        )
    {
        bail!("--json is only valid with --describe, --verify and --stop");
    }
    let mut conn = KafkaConnection::connect(args.bootstrap_server.as_str(), "tern-mirrors-cli")
        .await
        .with_context(|| format!("connecting to {}", args.bootstrap_server))?;
    match args.action {
        Action::Create => {
            let mirror = need_mirror()?;
            let path = args
                .mirror_config
                .clone()
                .ok_or_else(|| anyhow!("--mirror-config is required with --create"))?;
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            let configs = tern_broker::parse_properties(&text)
                .into_iter()
                .map(|(k, v)| {
                    create_cluster_mirror_request::Config::default()
                        .with_name(StrBytes::from_string(k))
                        .with_value(Some(StrBytes::from_string(v)))
                })
                .collect();
            let request = CreateClusterMirrorRequest::default()
                .with_mirror_name(str_bytes(&mirror))
                .with_configs(configs);
            let r = conn.send(&request, 0).await?;
            check_top(r.error_code, r.error_message)?;
            println!("Created mirror {mirror}");
            Ok(0)
        }
        Action::Verify => {
            let mirror = need_mirror()?;
            let overrides = match &args.mirror_config {
                Some(path) => tern_broker::parse_properties(
                    &std::fs::read_to_string(path)
                        .with_context(|| format!("reading {}", path.display()))?,
                ),
                None => Default::default(),
            };
            let topics = args.topics.as_deref().map(split);
            crate::mirrors::verify::verify(
                &mut conn,
                &args.bootstrap_server,
                &mirror,
                topics,
                overrides,
                args.json,
            )
            .await
        }
        Action::Delete => {
            let mirror = need_mirror()?;
            let request =
                DeleteClusterMirrorRequest::default().with_mirror_name(str_bytes(&mirror));
            let r = conn.send(&request, 0).await?;
            check_top(r.error_code, r.error_message)?;
            println!("Deleted mirror {mirror}");
            Ok(0)
        }
        Action::Start => {
            let mirror = need_mirror()?;
            let items = split(&need_topics()?);
            let (patterns, names): (Vec<String>, Vec<String>) =
                items.into_iter().partition(|i| is_pattern(i));
            let topics = names.iter().map(|n| {
                start_mirror_topics_request::TopicData::default()
                    .with_topic_name(str_bytes(n))
                    .with_num_partitions(-1)
            });
            let excluded = args.exclude.as_deref().map(split).unwrap_or_default();
            let request = StartMirrorTopicsRequest::default()
                .with_mirror_name(str_bytes(&mirror))
                .with_topics(topics.collect())
                .with_include_patterns(patterns.iter().map(|p| str_bytes(p)).collect())
                .with_exclude_patterns(excluded.iter().map(|p| str_bytes(p)).collect());
            let r = topic_results!(conn.send(&request, 0).await?);
            let started = succeeded(&r);
            let code = topics_outcome(r, |ok| {
                Some(if ok.is_empty() {
                    "No matching topics found on the source.".to_string()
                } else {
                    format!(
                        "Started {} mirror topic(s) in mirror {mirror}: {}",
                        ok.len(),
                        ok.join(", ")
                    )
                })
            })?;
            if args.wait && !started.is_empty() {
                crate::mirrors::report::wait_caught_up(&mut conn, &mirror, &started).await?;
            }
            Ok(code)
        }
        Action::Stop | Action::Pause | Action::Resume => {
            let mirror = need_mirror()?;
            let items = split(&need_topics()?);
            let (patterns, mut names): (Vec<String>, Vec<String>) =
                items.into_iter().partition(|i| is_pattern(i));
            if !patterns.is_empty() && args.action != Action::Stop {
                // Pause and resume take names: resolve patterns against the mirror's topics.
                let request = ListClusterMirrorsRequest::default().with_include_topic_names(true);
                let l = conn.send(&request, 0).await?;
                let set = tern_mirror::PatternSet::compile(&patterns)?;
                for m in l.mirrors.into_iter().filter(|m| *m.mirror_name == *mirror) {
                    let matching = m.topic_names.iter().filter(|t| set.matches(t));
                    names.extend(matching.map(|t| t.to_string()));
                }
            }
            let names = names.iter().map(|n| str_bytes(n));
            let sent = std::time::Instant::now();
            // The request of the mirror's topics `names` (one generated type per action).
            macro_rules! by_name {
                ($request:ident, $module:ident) => {
                    $request::default()
                        .with_mirror_name(str_bytes(&mirror))
                        .with_topics(
                            names
                                .map(|n| $module::TopicData::default().with_topic_name(n))
                                .collect(),
                        )
                };
            }
            let (r, verb) = match args.action {
                Action::Stop => {
                    let request = by_name!(StopMirrorTopicsRequest, stop_mirror_topics_request)
                        .with_patterns(patterns.iter().map(|p| str_bytes(p)).collect());
                    (topic_results!(conn.send(&request, 0).await?), "Stopped")
                }
                Action::Pause => {
                    let request = by_name!(PauseMirrorTopicsRequest, pause_mirror_topics_request);
                    (topic_results!(conn.send(&request, 0).await?), "Paused")
                }
                _ => {
                    let request = by_name!(ResumeMirrorTopicsRequest, resume_mirror_topics_request);
                    (topic_results!(conn.send(&request, 0).await?), "Resumed")
                }
            };
            // A stop answers once every partition is STOPPED and the topics take writes.
            let writable_after = sent.elapsed();
            let stopped = succeeded(&r);
            let json = args.json;
            let code = topics_outcome(r, |ok| {
                (!json).then(|| {
                    format!(
                        "{verb} mirroring for {} topic(s) in mirror {mirror}: {}",
                        ok.len(),
                        ok.join(", ")
                    )
                })
            })?;
            if args.action == Action::Stop && !stopped.is_empty() {
                crate::mirrors::report::print_failover_report(
                    &mut conn,
                    &mirror,
                    &stopped,
                    writable_after,
                    json,
                )
                .await?;
            }
            Ok(code)
        }
        Action::List => {
            let request = ListClusterMirrorsRequest::default().with_include_topic_names(false);
            let r = conn.send(&request, 0).await?;
            check_top(r.error_code, r.error_message)?;
            let mut mirrors = r.mirrors;
            mirrors.sort_by(|a, b| a.mirror_name.cmp(&b.mirror_name));
            if mirrors.is_empty() {
                println!("No mirrors found");
                return Ok(0);
            }
            println!(
                "{:<30} {:<10} {:<26} {:<50}",
                "MIRROR", "TOPICS", "SOURCE-CLUSTER-ID", "SOURCE-BOOTSTRAP-SERVER"
            );
            for m in mirrors {
                let id = if m.source_cluster_id.is_empty() {
                    "-".to_string()
                } else {
                    m.source_cluster_id.to_string()
                };
                let bootstrap = if m.source_bootstrap.is_empty() {
                    "-".to_string()
                } else {
                    left_truncate(&m.source_bootstrap, 50)
                };
                println!(
                    "{:<30} {:<10} {:<26} {:<50}",
                    left_truncate(&m.mirror_name, 30),
                    m.topic_count,
                    id,
                    bootstrap
                );
            }
            Ok(0)
        }
        Action::Describe => {
            crate::mirrors::describe::describe(
                &mut conn,
                args.mirror.as_deref(),
                args.failed,
                args.json,
            )
            .await
        }
    }
}

pub(crate) fn check_top(code: i16, message: Option<StrBytes>) -> Result<()> {
    if code != 0 {
        bail!(
            "{}: {}",
            error_name(code),
            message.as_deref().unwrap_or_default()
        );
    }
    Ok(())
}

/// The topics of `r` that succeeded.
fn succeeded(r: &TopicResults) -> Vec<String> {
    let ok = r.2.iter().filter(|(_, code, _)| *code == 0);
    ok.map(|(name, _, _)| name.clone()).collect()
}

fn topics_outcome(
    r: TopicResults,
    ok_line: impl FnOnce(&[String]) -> Option<String>,
) -> Result<i32> {
    let (error_code, error_message, topics) = r;
    check_top(error_code, error_message)?;
    let mut ok = Vec::new();
    let mut failed = 0;
    for (name, error_code, error_message) in topics {
        if error_code == 0 {
            ok.push(name);
        } else {
            failed += 1;
            eprintln!(
                "Error for topic {}: {}: {}",
                name,
                error_name(error_code),
                error_message.as_deref().unwrap_or_default()
            );
        }
    }
    if !ok.is_empty() || failed == 0 {
        if let Some(line) = ok_line(&ok) {
            println!("{line}");
        }
    }
    Ok(if failed > 0 { 1 } else { 0 })
}
