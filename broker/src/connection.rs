//! One client connection: read a frame, decode, handle, answer, in order.

use std::net::SocketAddr;
use std::sync::Arc;

use kafka_protocol::messages::{ApiKey, RequestKind};
use tern_protocol::api::{decode_request, encode_response, peek_prefix, RequestError};
use tern_protocol::frame::{read_frame, write_frame};
use tern_protocol::mirror::{
    api_keys as mirror_keys, decode_mirror_request, encode_mirror_response,
};
use tokio::io::BufWriter;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tracing::Instrument;

use crate::broker::Broker;
use crate::handlers::{self, api_versions};

/// Serves one connection until the peer closes it, it misbehaves, or the server shuts down.
pub async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    broker: Arc<Broker>,
    mut shutdown: watch::Receiver<bool>,
) {
    let span = tracing::debug_span!("connection", %peer);
    async move {
        let (mut reader, writer) = stream.into_split();
        let mut writer = BufWriter::new(writer);
        let max = broker.config.socket_request_max_bytes;
        loop {
            let frame = tokio::select! {
                f = read_frame(&mut reader, max) => f,
                _ = shutdown.changed() => return,
            };
            let frame = match frame {
                Ok(Some(f)) => f,
                Ok(None) => return,
                Err(e) => {
                    tracing::debug!(error = %e, "closing connection on bad frame");
                    return;
                }
            };
            let is_mirror_rpc = peek_prefix(&frame).is_ok_and(|p| {
                (mirror_keys::FIRST..=mirror_keys::LAST).contains(&p.api_key)
            });
            let response = if is_mirror_rpc {
                match decode_mirror_request(frame) {
                    Ok((header, request)) => {
                        let response = handlers::mirror::handle(&broker, request).await;
                        Ok(encode_mirror_response(header.correlation_id, &response))
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "closing connection: undecodable mirror request");
                        return;
                    }
                }
            } else {
                match decode_request(frame, handlers::is_supported) {
                    Ok(req) => {
                        let version = req.header.request_api_version;
                        let correlation_id = req.header.correlation_id;
                        let no_response = matches!(&req.body, RequestKind::Produce(p) if p.acks == 0);
                        let api_key = req.api_key;
                        let response = handlers::handle(&broker, peer, req).await;
                        if no_response {
                            continue;
                        }
                        match response {
                            Some(r) => {
                                encode_response(correlation_id, version, &r).map_err(|e| (api_key, e))
                            }
                            None => continue,
                        }
                    }
                    Err(RequestError::UnsupportedVersion {
                        api_key,
                        correlation_id,
                        ..
                    }) if api_key == ApiKey::ApiVersions as i16 => {
                        // Kafka answers an unknown ApiVersions version with a v0 reply so the
                        // client can pick a version both sides know.
                        encode_response(correlation_id, 0, &api_versions::unsupported_version())
                            .map_err(|e| (ApiKey::ApiVersions, e))
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "closing connection on undecodable request");
                        return;
                    }
                }
            };
            let bytes = match response {
                Ok(b) => b,
                Err((api_key, e)) => {
                    tracing::error!(?api_key, error = %e, "cannot encode response");
                    return;
                }
            };
            if write_frame(&mut writer, &[&bytes]).await.is_err() {
                return;
            }
            if tokio::io::AsyncWriteExt::flush(&mut writer).await.is_err() {
                return;
            }
        }
    }
    .instrument(span)
    .await
}
