//! The `tern` binary: `tern server` starts a broker (with its controller in the same process).

use std::path::PathBuf;

use anyhow::Result;
use clap::{Parser, Subcommand};
use tern_broker::broker::Broker;
use tern_broker::config::BrokerConfig;
use tern_broker::server::Server;

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
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            runtime.block_on(run_server(config))
        }
    }
}

async fn run_server(config: BrokerConfig) -> Result<()> {
    let broker = tokio::task::spawn_blocking(move || Broker::start(config)).await??;
    let server = Server::start(broker).await?;
    tracing::info!(addrs = ?server.local_addrs, "tern started");
    wait_for_signal().await?;
    tracing::info!("shutting down");
    server.shutdown().await?;
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
