//! One client connection: read a frame, authenticate or decode, handle, answer, in order.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use tern_protocol::api::{decode_request, encode_response, peek_prefix, RequestError};
use tern_protocol::fetch_response::encode_fetch_response;
use tern_protocol::frame::read_frame;
use tokio::io::AsyncRead;
use tokio::sync::watch;
use tracing::Instrument;

use crate::broker::Broker;
use crate::handlers::{self, api_versions, Response};
use crate::response_writer::{ResponseFrame, ResponseWriter};
use crate::security::authenticator::{Admission, AfterReply, Authenticator};
use crate::security::listener::ListenerSecurity;
use crate::security::ListenerCredentials;

/// What one frame turned into.
enum Outcome {
    /// Send this response frame, then go on or close.
    Reply(ResponseFrame, AfterReply),
    /// Nothing to send (acks=0 produce, or a request without a handler).
    Silent,
    /// Close without an answer.
    Close,
}

/// Numbers connections, from 1 (0 stands for none).
static NEXT_CONNECTION_ID: AtomicU64 = AtomicU64::new(1);

/// Ends the share sessions a connection opened when it closes, however it closes.
struct ShareSessionsOfConnection {
    broker: Arc<Broker>,
    connection_id: u64,
}

impl Drop for ShareSessionsOfConnection {
    fn drop(&mut self) {
        if !self.broker.share.sessions.any_of(self.connection_id) {
            return;
        }
        // Releasing records may read logs and store start offsets: not on this thread.
        let (broker, id) = (self.broker.clone(), self.connection_id);
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn_blocking(move || broker.share.connection_closed(&broker, id));
        } else {
            broker.share.connection_closed(&broker, id);
        }
    }
}

/// Serves one connection, read from `reader` and answered through `writer`, until the peer
/// closes it, it misbehaves, or the server shuts down. `tls_principal` is the principal of the
/// client's TLS certificate, if it showed one.
pub(crate) async fn serve_connection<R>(
    mut reader: R,
    mut writer: ResponseWriter,
    peer: SocketAddr,
    security: Arc<ListenerSecurity>,
    tls_principal: Option<String>,
    broker: Arc<Broker>,
    mut shutdown: watch::Receiver<bool>,
) where
    R: AsyncRead + Send + Unpin,
{
    let span = tracing::debug_span!("connection", %peer, listener = %security.name);
    async move {
        let max = broker.config.socket_request_max_bytes;
        let idle = Duration::from_millis(broker.config.connections_max_idle_ms);
        let _open = broker.metrics.connection_opened(&security.name);
        let connection_id = NEXT_CONNECTION_ID.fetch_add(1, Ordering::Relaxed);
        let _share_sessions = ShareSessionsOfConnection {
            broker: broker.clone(),
            connection_id,
        };
        let mut auth = Authenticator::new(security, tls_principal);
        loop {
            let frame = tokio::select! {
                f = tokio::time::timeout(idle, read_frame(&mut reader, max)) => f,
                _ = shutdown.changed() => return,
            };
            let frame = match frame {
                Ok(Ok(Some(f))) => f,
                Ok(Ok(None)) => return,
                Err(_) => {
                    tracing::debug!("closing a connection idle for connections.max.idle.ms");
                    return;
                }
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "closing connection on bad frame");
                    return;
                }
            };
            let started = Instant::now();
            // A bare SASL token has no request header: it is not a request of any API.
            let raw = auth.expects_raw_token();
            let api_key = peek_prefix(&frame).ok().filter(|_| !raw).map(|p| p.api_key);
            let outcome = if raw {
                raw_token(&broker, &mut auth, &frame)
            } else {
                request(&broker, (peer, connection_id), &mut auth, frame).await
            };
            let (frame, after) = match outcome {
                Outcome::Reply(frame, after) => (frame, after),
                Outcome::Silent => continue,
                Outcome::Close => return,
            };
            // A client that stops reading its responses is idle too: its write times out.
            match tokio::time::timeout(idle, writer.write(&frame)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "closing connection: response not written");
                    return;
                }
                Err(_) => return,
            }
            if let Some(k) = api_key {
                broker.metrics.request_done(k, started.elapsed());
            }
            if after == AfterReply::Close {
                tracing::debug!("closing connection after a failed SASL exchange");
                return;
            }
        }
    }
    .instrument(span)
    .await
}

/// A bare SASL token (after SaslHandshake v0): answered with a bare token, or the connection
/// closes.
fn raw_token(broker: &Broker, auth: &mut Authenticator, token: &[u8]) -> Outcome {
    let plain_users = auth.plain_users();
    let store = ListenerCredentials {
        plain_users: &plain_users,
        image: broker.controller.image(),
    };
    match auth.step(token, &store, Instant::now()) {
        Ok(reply) => Outcome::Reply(
            ResponseFrame::bytes(bytes::BytesMut::from(&reply[..])),
            AfterReply::Continue,
        ),
        Err(e) => {
            tracing::info!(error = %e, "SASL authentication failed");
            Outcome::Close
        }
    }
}

async fn request(
    broker: &Broker,
    (peer, connection_id): (SocketAddr, u64),
    auth: &mut Authenticator,
    frame: bytes::Bytes,
) -> Outcome {
    let Ok(prefix) = peek_prefix(&frame) else {
        return Outcome::Close;
    };
    let api_key = ApiKey::try_from(prefix.api_key).ok();
    if let Admission::Close(why) = auth.admit(api_key, Instant::now()) {
        tracing::debug!(api_key = prefix.api_key, why, "closing connection");
        return Outcome::Close;
    }
    broker.metrics.request(prefix.api_key);
    let req = match decode_request(frame, handlers::is_supported) {
        Ok(req) => req,
        Err(RequestError::UnsupportedVersion {
            api_key,
            correlation_id,
            ..
        }) if api_key == ApiKey::ApiVersions as i16 => {
            // Kafka answers an unknown ApiVersions version with a v0 reply so the client can
            // pick a version both sides know.
            return reply(
                correlation_id,
                0,
                ApiKey::ApiVersions,
                &api_versions::unsupported_version(),
                AfterReply::Continue,
            );
        }
        Err(e) => {
            tracing::debug!(error = %e, "closing connection on undecodable request");
            return Outcome::Close;
        }
    };
    let version = req.header.request_api_version;
    let correlation_id = req.header.correlation_id;
    let api_key = req.api_key;
    let (response, after) = match req.body {
        RequestKind::SaslHandshake(r) => {
            let (resp, after) = auth.handshake(r.mechanism.as_str(), version);
            (ResponseKind::SaslHandshake(resp), after)
        }
        RequestKind::SaslAuthenticate(r) => {
            let plain_users = auth.plain_users();
            let store = ListenerCredentials {
                plain_users: &plain_users,
                image: broker.controller.image(),
            };
            let (resp, after) = auth.authenticate(&r.auth_bytes, &store, Instant::now());
            if resp.error_code != 0 {
                tracing::info!(error = ?resp.error_message, "SASL authentication failed");
            }
            (ResponseKind::SaslAuthenticate(resp), after)
        }
        body => {
            let no_response = matches!(&body, RequestKind::Produce(p) if p.acks == 0);
            let req = tern_protocol::api::DecodedRequest {
                header: req.header,
                api_key,
                body,
            };
            let response = handlers::handle(
                broker,
                peer,
                auth.listener_name(),
                auth.principal(),
                req,
                connection_id,
            )
            .await;
            match response {
                Some(Response::Message(r)) if !no_response => (r, AfterReply::Continue),
                Some(Response::Fetch(fetched)) => {
                    return fetch_reply(correlation_id, version, fetched)
                }
                _ => return Outcome::Silent,
            }
        }
    };
    reply(correlation_id, version, api_key, &response, after)
}

/// A Fetch answer as a frame whose holes the writer fills from the log files.
fn fetch_reply(correlation_id: i32, version: i16, fetched: handlers::fetch::FetchReply) -> Outcome {
    let lens: Vec<usize> = fetched.slices.iter().map(|s| s.len()).collect();
    match encode_fetch_response(correlation_id, version, &fetched.response, &lens) {
        Ok(body) => Outcome::Reply(
            ResponseFrame::spliced(body, fetched.slices),
            AfterReply::Continue,
        ),
        Err(e) => {
            tracing::error!(error = %e, "cannot encode a Fetch response");
            Outcome::Close
        }
    }
}

fn reply(
    correlation_id: i32,
    version: i16,
    api_key: ApiKey,
    response: &ResponseKind,
    after: AfterReply,
) -> Outcome {
    match encode_response(correlation_id, version, response) {
        Ok(bytes) => Outcome::Reply(ResponseFrame::bytes(bytes), after),
        Err(e) => {
            tracing::error!(?api_key, error = %e, "cannot encode response");
            Outcome::Close
        }
    }
}
