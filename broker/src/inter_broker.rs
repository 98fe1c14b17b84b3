//! Requests from this broker to another over the inter-broker listener (a transaction
//! coordinator's AddPartitionsToTxn, a share-partition leader's share-group state), on pooled
//! connections. Like the markers and the replica fetchers, they do not authenticate.

use std::collections::HashMap;
use std::time::Duration;

use kafka_protocol::protocol::Request;
use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use tern_controller::MetadataImage;
use tern_protocol::client::KafkaConnection;

/// How long another broker has to connect and answer.
const TIMEOUT: Duration = Duration::from_secs(10);
/// Idle connections kept per broker (a burst opens more; they are closed after use).
const MAX_IDLE: usize = 4;

/// Connections to the other brokers of the cluster.
pub(crate) struct BrokerClient {
    node_id: i32,
    listener: String,
    /// What the requests are for, in their client id.
    purpose: &'static str,
    idle: Mutex<HashMap<i32, Vec<KafkaConnection>>>,
}

impl BrokerClient {
    /// A client of broker `node_id` reaching the others on `listener`.
    pub(crate) fn new(node_id: i32, listener: String, purpose: &'static str) -> Self {
        BrokerClient {
            node_id,
            listener,
            purpose,
            idle: Mutex::new(HashMap::new()),
        }
    }

    /// Sends `request` at `version` to broker `node` as registered in `image`, on an idle
    /// connection when there is one (a stale one is replaced once). NETWORK_EXCEPTION when it
    /// cannot be reached or does not answer; COORDINATOR_NOT_AVAILABLE when it is unknown.
    pub(crate) async fn send<R: Request>(
        &self,
        image: &MetadataImage,
        node: i32,
        request: &R,
        version: i16,
    ) -> Result<R::Response, ResponseError> {
        let broker = image
            .brokers
            .get(&node)
            .ok_or(ResponseError::CoordinatorNotAvailable)?;
        let (host, port) = broker.endpoint(&self.listener);
        let idle = self.idle.lock().entry(node).or_default().pop();
        let attempts = if idle.is_some() { 2 } else { 1 };
        let mut conn = idle;
        for _ in 0..attempts {
            let sent = tokio::time::timeout(TIMEOUT, async {
                let mut c = match conn.take() {
                    Some(c) => c,
                    None => {
                        let client_id = format!("tern-{}-{}", self.purpose, self.node_id);
                        KafkaConnection::connect((host, port), &client_id)
                            .await
                            .ok()?
                    }
                };
                let response = c.send(request, version).await.ok()?;
                Some((c, response))
            })
            .await;
            if let Ok(Some((c, response))) = sent {
                let mut idle = self.idle.lock();
                let idle = idle.entry(node).or_default();
                if idle.len() < MAX_IDLE {
                    idle.push(c);
                }
                return Ok(response);
            }
        }
        tracing::debug!(node, purpose = self.purpose, "broker not reached");
        Err(ResponseError::NetworkException)
    }
}
