//! The network server: one accept loop per listener, one task per connection, and a clean
//! shutdown that stops accepting, lets connections finish their current request, and closes logs.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::broker::Broker;
use crate::connection::serve_connection;
use crate::response_writer::ResponseWriter;
use crate::security::listener::ListenerSecurity;
use crate::security::ssl_principal::subject_dn;
use crate::security::tls::TlsAcceptorSource;
use crate::start_error::{Result, StartError};

/// A running server.
pub struct Server {
    /// The broker behind it.
    pub broker: Arc<Broker>,
    /// Bound addresses, one per listener (useful when port 0 was asked for).
    pub local_addrs: Vec<std::net::SocketAddr>,
    shutdown: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    background: Option<tern_storage::BackgroundHandle>,
}

impl Server {
    /// Binds every listener and starts serving.
    pub async fn start(broker: Arc<Broker>) -> Result<Server> {
        let (shutdown, shutdown_rx) = watch::channel(false);
        let connections = Arc::new(ConnectionCount::default());
        let mut local_addrs = Vec::new();
        let mut tasks = Vec::new();
        for (listener_config, security) in broker
            .config
            .listeners
            .iter()
            .zip(&broker.config.listener_security)
        {
            let addr = listener_config.bind_addr();
            let listener = TcpListener::bind(&addr)
                .await
                .map_err(|e| StartError::io(format!("binding listener {addr}"), e))?;
            let local = listener
                .local_addr()
                .map_err(|e| StartError::io(format!("binding listener {addr}"), e))?;
            tracing::info!(listener = %listener_config.name, %local, "listening");
            local_addrs.push(local);
            broker
                .set_bound_port(&listener_config.name, local.port())
                .map_err(|e| StartError::Refused(e.to_string()))?;
            tasks.push(tokio::spawn(accept_loop(
                listener,
                Arc::new(security.clone()),
                broker.clone(),
                connections.clone(),
                shutdown_rx.clone(),
            )));
        }
        if let Some((addr, configured)) = broker.config.http_listener.clone() {
            match TcpListener::bind(&addr).await {
                Ok(listener) => {
                    if let Ok(local) = listener.local_addr() {
                        tracing::info!(%local, "serving /metrics and /health");
                    }
                    tasks.push(tokio::spawn(crate::http::serve(
                        listener,
                        broker.clone(),
                        shutdown_rx.clone(),
                    )));
                }
                Err(e) if configured => {
                    return Err(StartError::io(format!("binding http.listeners {addr}"), e));
                }
                Err(e) => {
                    tracing::warn!(%addr, error = %e, "the default http.listeners address is taken: no /metrics (set http.listeners to serve them elsewhere)")
                }
            }
        }
        tasks.push(broker.spawn_metadata_listener(shutdown_rx.clone()));
        tasks.push(broker.spawn_heartbeats(shutdown_rx.clone()));
        tasks.push(broker.spawn_high_watermark_checkpoints(shutdown_rx.clone()));
        tasks.push(crate::replication::isr_updater::spawn(
            broker.config.node_id,
            broker.replicas.clone(),
            broker.controller.clone(),
            broker.config.replication.lag_time_max_ms,
            broker.metrics.clone(),
            shutdown_rx.clone(),
        ));
        tasks.push(crate::replication::offline_replicas::spawn(
            broker.config.node_id,
            broker.incarnation_id,
            broker.replicas.clone(),
            broker.controller.clone(),
            shutdown_rx.clone(),
        ));
        broker.groups.spawn_ticker();
        broker.txns.spawn_timers();
        crate::share::ShareManager::spawn_flusher(Arc::downgrade(&broker));
        tasks.push(tokio::spawn(
            broker.mirrors.clone().run(shutdown_rx.clone()),
        ));
        let background = broker
            .logs
            .start_background_tasks(broker.config.log_retention_check_interval_ms);
        Ok(Server {
            broker,
            local_addrs,
            shutdown,
            tasks,
            background: Some(background),
        })
    }

    /// Stops accepting, waits for connection tasks to wind down, and closes the logs.
    pub async fn shutdown(mut self) -> Result<()> {
        // In a cluster, hand partition leadership away before going quiet (a single node has
        // nobody to hand it to).
        if self.broker.config.is_multi_node() {
            let broker = self.broker.clone();
            let _ = tokio::task::spawn_blocking(move || broker.controlled_shutdown()).await;
        }
        let _ = self.shutdown.send(true);
        for task in self.tasks.drain(..) {
            let _ = task.await;
        }
        self.broker.fetchers.shutdown();
        let broker = self.broker.clone();
        let _ = tokio::task::spawn_blocking(move || broker.checkpoint_high_watermarks()).await;
        if let Some(bg) = self.background.take() {
            bg.stop();
        }
        if let Some(cleaner) = self.broker.cleaner.clone() {
            // A pass in progress finishes before the logs close.
            let _ = tokio::task::spawn_blocking(move || cleaner.stop()).await;
        }
        let logs = self.broker.logs.clone();
        tokio::task::spawn_blocking(move || logs.shutdown())
            .await
            .map_err(|e| StartError::io("joining log shutdown", std::io::Error::other(e)))?
            .map_err(|e| StartError::storage("closing logs", e))?;
        Ok(())
    }
}

/// Client connections open now, across listeners (`max.connections` bounds them).
#[derive(Default)]
struct ConnectionCount(AtomicUsize);

/// One counted connection; uncounted when dropped.
struct ConnectionSlot(Arc<ConnectionCount>);

impl ConnectionCount {
    /// A slot if fewer than `limit` connections are open.
    fn try_take(self: &Arc<Self>, limit: usize) -> Option<ConnectionSlot> {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            })
            .ok()
            .map(|_| ConnectionSlot(self.clone()))
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.0 .0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// `max.connections` in effect now: a dynamic value (AlterConfigs) over server.properties.
fn max_connections(broker: &Broker) -> usize {
    let image = broker.controller.image();
    crate::config::dynamic::effective(
        &image,
        broker.config.node_id,
        &broker.config.properties,
        "max.connections",
    )
    .and_then(|(v, _)| v.trim().parse().ok())
    .unwrap_or(broker.config.max_connections)
}

async fn accept_loop(
    listener: TcpListener,
    security: Arc<ListenerSecurity>,
    broker: Arc<Broker>,
    connections: Arc<ConnectionCount>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut conns = tokio::task::JoinSet::new();
    let mut refused: u64 = 0;
    // As in Kafka, replication keeps its connections when clients fill max.connections: the
    // inter-broker listener is exempt when it is a listener of its own.
    let exempt =
        broker.config.listeners.len() > 1 && security.name == broker.config.inter_broker_listener();
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shutdown.changed() => break,
        };
        match accepted {
            Ok((stream, peer)) => {
                // Over max.connections a client is closed at once rather than left waiting in
                // the kernel's backlog: it sees the refusal and retries after its backoff.
                let limit = max_connections(&broker);
                let permit = if exempt {
                    None
                } else if let Some(p) = connections.try_take(limit) {
                    Some(p)
                } else {
                    refused += 1;
                    if refused.is_power_of_two() {
                        tracing::warn!(%peer, refused, max_connections = limit, "max.connections reached: closing new connections");
                    }
                    drop(stream);
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let broker = broker.clone();
                let shutdown = shutdown.clone();
                let security = security.clone();
                conns.spawn(async move {
                    match security.tls.clone() {
                        None => {
                            let (reader, writer) = stream.into_split();
                            let writer = ResponseWriter::plain(writer);
                            serve_connection(reader, writer, peer, security, None, broker, shutdown)
                                .await
                        }
                        Some(tls) => {
                            if let Some((stream, principal)) = tls_handshake(&tls, stream).await {
                                let (reader, writer) = tokio::io::split(stream);
                                let writer = ResponseWriter::copying(writer);
                                serve_connection(
                                    reader, writer, peer, security, principal, broker, shutdown,
                                )
                                .await;
                            }
                        }
                    }
                    drop(permit);
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
        // Reap finished connection tasks so the set stays small.
        while conns.try_join_next().is_some() {}
    }
    conns.shutdown().await;
}

/// How long a client has to finish the TLS handshake.
const TLS_HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Runs the TLS handshake; returns the stream and, when the client showed a certificate, the
/// principal it maps to. A failed handshake (plaintext bytes, an untrusted or expired
/// certificate, a refused mapping) closes the connection.
async fn tls_handshake(
    tls: &TlsAcceptorSource,
    stream: tokio::net::TcpStream,
) -> Option<(
    tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
    Option<String>,
)> {
    let accept = tls.acceptor().accept(stream);
    let stream = match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, accept).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tracing::info!(error = %e, "TLS handshake failed");
            return None;
        }
        Err(_) => {
            tracing::info!("TLS handshake timed out");
            return None;
        }
    };
    let principal = match stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
    {
        None => None,
        Some(cert) => {
            let mapped = subject_dn(cert.as_ref()).and_then(|dn| tls.settings().mapper.map(&dn));
            match mapped {
                Ok(name) => Some(format!("User:{name}")),
                Err(e) => {
                    tracing::info!(error = %e, "client certificate has no principal");
                    return None;
                }
            }
        }
    };
    Some((stream, principal))
}
