//! Connections to the other brokers of this cluster, for the requests brokers send each other
//! on the mirror's behalf (ReadMirrorStates, WriteMirrorStates, DescribeClusterMirrors of their
//! partitions, ListOffsets of the partitions they lead).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::protocol::Request;
use parking_lot::Mutex;
use tern_protocol::client::KafkaConnection;
use tern_protocol::mirror::{MirrorRequest, MirrorResponse};

use crate::host::MirrorHost;

/// How long one request to a peer may take, connecting included.
const PEER_TIMEOUT: Duration = Duration::from_secs(10);

type Slot = Arc<tokio::sync::Mutex<Option<KafkaConnection>>>;

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

    /// Sends a mirror RPC to broker `node` and waits for its answer.
    pub(crate) async fn send(
        &self,
        node: i32,
        request: &MirrorRequest,
    ) -> Result<MirrorResponse, String> {
        let (mut slot, mut conn) = self.checkout(node).await?;
        let out = tokio::time::timeout(PEER_TIMEOUT, conn.send_mirror(request)).await;
        finish(
            node,
            &mut slot,
            conn,
            out.map(|r| r.map_err(|e| e.to_string())),
        )
    }

    /// Sends a Kafka request at `version` to broker `node` and waits for its answer.
    pub(crate) async fn send_kafka<R: Request>(
        &self,
        node: i32,
        request: &R,
        version: i16,
    ) -> Result<R::Response, String> {
        let (mut slot, mut conn) = self.checkout(node).await?;
        let out = tokio::time::timeout(PEER_TIMEOUT, conn.send(request, version)).await;
        finish(
            node,
            &mut slot,
            conn,
            out.map(|r| r.map_err(|e| e.to_string())),
        )
    }

    /// The peer's slot, held so one request at a time uses the connection (it is not
    /// pipelined), and the connection taken out of it (made if there was none).
    async fn checkout(&self, node: i32) -> Result<(Held, KafkaConnection), String> {
        let slot = self.conns.lock().entry(node).or_default().clone();
        let mut held = slot.lock_owned().await;
        if let Some(conn) = held.take() {
            return Ok((held, conn));
        }
        let (host, port) = self
            .host
            .broker_endpoint(node)
            .ok_or_else(|| format!("broker {node} is not registered"))?;
        let client_id = format!("tern-mirror-peer-{}", self.host.node_id());
        let conn = tokio::time::timeout(
            PEER_TIMEOUT,
            KafkaConnection::connect((host.as_str(), port), &client_id),
        )
        .await
        .map_err(|_| format!("connecting to broker {node} at {host}:{port} timed out"))?
        .map_err(|e| format!("connecting to broker {node} at {host}:{port}: {e}"))?;
        Ok((held, conn))
    }
}

type Held = tokio::sync::OwnedMutexGuard<Option<KafkaConnection>>;

/// Puts the connection back after a successful exchange; a failed one drops it.
fn finish<T>(
    node: i32,
    slot: &mut Held,
    conn: KafkaConnection,
    out: Result<Result<T, String>, tokio::time::error::Elapsed>,
) -> Result<T, String> {
    match out {
        Ok(Ok(v)) => {
            **slot = Some(conn);
            Ok(v)
        }
        Ok(Err(e)) => Err(format!("broker {node}: {e}")),
        Err(_) => Err(format!("broker {node} did not answer in time")),
    }
}
