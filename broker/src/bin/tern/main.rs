//! The `tern` binary: `tern server` starts a broker (with its controller in the same process).

use std::path::PathBuf;

use anyhow::Result;
use clap::{Parser, Subcommand};
use tern_broker::{Broker, BrokerConfig, Server};

mod mirrors;

#[derive(Parser)]
#[command(
    name = "tern",
    version,
    about = "A Kafka-compatible broker with built-in cluster mirroring"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start a broker. With no options: a single-node cluster on 127.0.0.1:9092, data in ./data.
    Server {
        /// A server.properties file with Apache Kafka's broker config names.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Override one property: --override key=value (repeatable).
        #[arg(long = "override", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
    },
    /// Format storage before the first start (Kafka's kafka-storage.sh format): write
    /// meta.properties with a cluster id and, with --add-scram, SCRAM users.
    Format {
        /// A server.properties file with Apache Kafka's broker config names.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Override one property: --override key=value (repeatable).
        #[arg(long = "override", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
        /// The cluster id (tern random-uuid makes one); a new one if not given.
        #[arg(long)]
        cluster_id: Option<String>,
        /// A SCRAM user: 'SCRAM-SHA-512=[name=alice,password=alice-secret]' (repeatable).
        #[arg(long = "add-scram", value_name = "MECHANISM=[name=..,password=..]")]
        add_scram: Vec<String>,
        /// Leave already formatted log dirs as they are instead of failing.
        #[arg(long)]
        ignore_formatted: bool,
    },
    /// Print a new random cluster id.
    RandomUuid,
    /// Manage cluster mirrors on a Tern cluster (create, start/stop/pause/resume topics, list,
    /// describe, delete), like Kafka's kafka-cluster-mirrors.sh.
    Mirrors(MirrorsCli),
}

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("action").required(true).args(
    ["create", "start", "stop", "pause", "resume", "list", "describe", "delete", "verify"]
)))]
struct MirrorsCli {
    /// The Tern cluster to manage (host:port).
    #[arg(long)]
    bootstrap_server: String,
    /// Define a mirror (needs --mirror and --mirror-config).
    #[arg(long)]
    create: bool,
    /// Start mirroring topics (needs --mirror and --topics).
    #[arg(long)]
    start: bool,
    /// Stop mirroring topics: fail over, the topics become writable.
    #[arg(long)]
    stop: bool,
    /// Pause mirroring topics (they stay read-only).
    #[arg(long)]
    pause: bool,
    /// Resume paused topics.
    #[arg(long)]
    resume: bool,
    /// List mirrors.
    #[arg(long)]
    list: bool,
    /// Describe mirror partitions (all mirrors, or --mirror).
    #[arg(long)]
    describe: bool,
    /// Delete a mirror that mirrors no topic.
    #[arg(long)]
    delete: bool,
    /// Compare the mirror's topics with the source batch by batch (needs --mirror; exit
    /// status 0 when equal, 2 when they differ).
    #[arg(long)]
    verify: bool,
    /// The mirror name.
    #[arg(long)]
    mirror: Option<String>,
    /// A properties file with the source cluster's settings (bootstrap.servers, ...; with
    /// --verify, secrets the destination withholds).
    #[arg(long)]
    mirror_config: Option<PathBuf>,
    /// Comma-separated topic names or regexes.
    #[arg(long)]
    topics: Option<String>,
    /// Comma-separated regexes of topics not to start (with --start).
    #[arg(long)]
    exclude: Option<String>,
    /// JSON output (with --describe, --verify and --stop).
    #[arg(long)]
    json: bool,
    /// Only failed partitions (with --describe).
    #[arg(long)]
    failed: bool,
    /// With --start: show the copy's progress until the topics are caught up.
    #[arg(long)]
    wait: bool,
}

fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Server { config, overrides } => {
            let config = BrokerConfig::load(config.as_deref(), &overrides)?;
            let ignored = config.ignored_settings();
            if !ignored.is_empty() {
                tracing::warn!(
                    settings = %ignored.join(","),
                    "ignoring Kafka settings that Tern does not implement"
                );
            }
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            runtime.block_on(run_server(config))
        }
        Command::Format {
            config,
            overrides,
            cluster_id,
            add_scram,
            ignore_formatted,
        } => {
            let config = BrokerConfig::load(config.as_deref(), &overrides)?;
            let users = add_scram
                .iter()
                .map(|u| tern_broker::parse_add_scram(u))
                .collect::<Result<Vec<_>, _>>()?;
            let meta =
                tern_broker::format(&config, cluster_id.as_deref(), &users, ignore_formatted)?;
            println!(
                "Formatted {} with cluster id {} (node {}){}",
                config
                    .log_dirs
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(","),
                meta.cluster_id,
                meta.node_id,
                if users.is_empty() {
                    String::new()
                } else {
                    format!("; {} SCRAM credential(s) stored", users.len())
                }
            );
            Ok(())
        }
        Command::RandomUuid => {
            println!("{}", tern_broker::new_cluster_id());
            Ok(())
        }
        Command::Mirrors(m) => {
            use crate::mirrors::{run, Action, MirrorsArgs};
            let action = [
                (m.create, Action::Create),
                (m.start, Action::Start),
                (m.stop, Action::Stop),
                (m.pause, Action::Pause),
                (m.resume, Action::Resume),
                (m.list, Action::List),
                (m.describe, Action::Describe),
                (m.delete, Action::Delete),
                (m.verify, Action::Verify),
            ]
            .into_iter()
            .find_map(|(set, a)| set.then_some(a))
            .ok_or_else(|| anyhow::anyhow!("one action is required"))?;
            let args = MirrorsArgs {
                bootstrap_server: m.bootstrap_server,
                action,
                mirror: m.mirror,
                mirror_config: m.mirror_config,
                topics: m.topics,
                exclude: m.exclude,
                json: m.json,
                failed: m.failed,
                wait: m.wait,
            };
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            match runtime.block_on(run(args)) {
                Ok(code) => std::process::exit(code),
                Err(e) => {
                    eprintln!("Error: {e:#}");
                    std::process::exit(1);
                }
            }
        }
    }
}

/// Raises the soft limit on open files to the hard one, as Go's runtime and the JVM do: each
/// partition holds a descriptor per segment, and a 1024 default runs out near a thousand
/// partitions. Returns the limit in force.
#[allow(unsafe_code)]
fn raise_open_file_limit() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed by reference.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return None;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                return Some(raised.rlim_cur);
            }
        }
    }
    Some(lim.rlim_cur)
}

async fn run_server(config: BrokerConfig) -> Result<()> {
    if let Some(limit) = raise_open_file_limit() {
        tracing::info!(limit, "open file limit");
    }
    if !config.is_broker() {
        return run_controller_only(config).await;
    }
    let broker = tokio::task::spawn_blocking(move || Broker::start(config)).await??;
    let server = Server::start(broker).await?;
    tracing::info!(addrs = ?server.local_addrs, "tern started");
    wait_for_signal().await?;
    tracing::info!("shutting down");
    server.shutdown().await?;
    tracing::info!("stopped");
    Ok(())
}

/// `process.roles=controller`: a voter of the metadata quorum that serves no clients.
async fn run_controller_only(config: BrokerConfig) -> Result<()> {
    let (controller, cluster_id) =
        tokio::task::spawn_blocking(move || tern_broker::start_controller(&config)).await??;
    tracing::info!(%cluster_id, "tern controller started");
    wait_for_signal().await?;
    tracing::info!("shutting down");
    tokio::task::spawn_blocking(move || drop(controller)).await?;
    tracing::info!("stopped");
    Ok(())
}

async fn wait_for_signal() -> Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::select! {
        _ = term.recv() => {},
        _ = int.recv() => {},
    }
    Ok(())
}
