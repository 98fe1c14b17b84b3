//! Connections to the other brokers of this cluster, for the requests brokers send each other
//! on the mirror's behalf (ReadMirrorStates, WriteMirrorStates, DescribeClusterMirrors of their
//! partitions, ListOffsets of the partitions they lead).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::protocol::Request;
use parking_lot::Mutex;
use tern_protocol::client::{ClientError, KafkaConnection};

use crate::host::MirrorHost;

/// How long one request to a peer may take, connecting included.
const PEER_TIMEOUT: Duration = Duration::from_secs(10);

type Slot = Arc<tokio::sync::Mutex<Option<KafkaConnection>>>;

/// Why a request to another broker of this cluster got no answer.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// The metadata has no endpoint for the broker.
    #[error("broker {node} is not registered")]
    NotRegistered {
        /// The broker.
        node: i32,
    },
    /// Connecting took longer than the peer timeout (10 s).
    #[error("connecting to broker {node} at {host}:{port} timed out")]
    ConnectTimeout {
        /// The broker.
        node: i32,
        /// Its inter-broker host.
        host: String,
        /// Its inter-broker port.
        port: u16,
    },
    /// Connecting failed.
    #[error("connecting to broker {node} at {host}:{port}: {error}")]
    Connect {
        /// The broker.
        node: i32,
        /// Its inter-broker host.
        host: String,
        /// Its inter-broker port.
        port: u16,
        /// Why (its text is part of this error's message).
        error: ClientError,
    },
    /// Sending the request or reading the answer failed.
    #[error("broker {node}: {error}")]
    Request {
        /// The broker.
        node: i32,
        /// Why (its text is part of this error's message).
        error: ClientError,
    },
    /// The answer took longer than the peer timeout (10 s).
    #[error("broker {node} did not answer in time")]
    Timeout {
        /// The broker.
        node: i32,
    },
}

/// One cached connection per peer broker; a request that fails drops it.
pub(crate) struct Peers {
    host: Arc<dyn MirrorHost>,
    conns: Mutex<HashMap<i32, Slot>>,
}

impl Peers {
    /// Connections made on demand to the brokers `host` knows.
    pub(crate) fn new(host: Arc<dyn MirrorHost>) -> Self {
        Peers {
            host,
            conns: Mutex::new(HashMap::new()),
        }
    }

    /// Sends a Kafka request at `version` to broker `node` and waits for its answer.
    pub(crate) async fn send_kafka<R: Request>(
        &self,
        node: i32,
        request: &R,
        version: i16,
    ) -> Result<R::Response, PeerError> {
        let (mut slot, mut conn) = self.checkout(node).await?;
        let out = tokio::time::timeout(PEER_TIMEOUT, conn.send(request, version)).await;
        finish(node, &mut slot, conn, out)
    }

    /// The peer's slot, held so one request at a time uses the connection (it is not
    /// pipelined), and the connection taken out of it (made if there was none).
    async fn checkout(&self, node: i32) -> Result<(Held, KafkaConnection), PeerError> {
        let slot = self.conns.lock().entry(node).or_default().clone();
        let mut held = slot.lock_owned().await;
        if let Some(conn) = held.take() {
            return Ok((held, conn));
        }
        let (host, port) = self
            .host
            .broker_endpoint(node)
            .ok_or(PeerError::NotRegistered { node })?;
        let client_id = format!("tern-mirror-peer-{}", self.host.node_id());
        let connected = tokio::time::timeout(
            PEER_TIMEOUT,
            KafkaConnection::connect((host.as_str(), port), &client_id),
        )
        .await;
        match connected {
            Ok(Ok(conn)) => Ok((held, conn)),
            Ok(Err(error)) => Err(PeerError::Connect {
                node,
                host,
                port,
                error,
            }),
            Err(_) => Err(PeerError::ConnectTimeout { node, host, port }),
        }
    }
}

type Held = tokio::sync::OwnedMutexGuard<Option<KafkaConnection>>;

/// Puts the connection back after a successful exchange; a failed one drops it.
fn finish<T>(
    node: i32,
    slot: &mut Held,
    conn: KafkaConnection,
    out: Result<Result<T, ClientError>, tokio::time::error::Elapsed>,
) -> Result<T, PeerError> {
    match out {
        Ok(Ok(v)) => {
            **slot = Some(conn);
            Ok(v)
        }
        Ok(Err(error)) => Err(PeerError::Request { node, error }),
        Err(_) => Err(PeerError::Timeout { node }),
    }
}
