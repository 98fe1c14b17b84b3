//! A small async Kafka client connection: send a typed request at a chosen version, read the
//! typed response. Used by the mirror fetchers and by tests.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, ToSocketAddrs};

use crate::frame::{read_frame, write_frame, FrameError};

/// Largest response a client accepts.
const MAX_RESPONSE_BYTES: usize = 256 * 1024 * 1024;

/// Why a client call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Connecting or writing failed.
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    /// The TLS setup or handshake failed.
    #[error("TLS: {0}")]
    Tls(String),
    /// SASL authentication failed (Kafka's error message, or why the exchange broke off).
    #[error("SASL authentication failed: {0}")]
    Authentication(String),
    /// Reading a response frame failed.
    #[error("frame: {0}")]
    Frame(#[from] FrameError),
    /// The peer closed the connection instead of answering.
    #[error("connection closed by peer")]
    Closed,
    /// Encoding or decoding failed.
    #[error("codec: {0}")]
    Codec(String),
    /// The response carried another request's correlation id.
    #[error("correlation id mismatch: sent {sent}, got {got}")]
    CorrelationMismatch {
        /// Id sent.
        sent: i32,
        /// Id received.
        got: i32,
    },
}

/// A byte stream to a broker: TCP, or TLS over TCP.
pub trait BrokerStream: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> BrokerStream for T {}

/// One connection to a Kafka broker.
pub struct KafkaConnection {
    stream: Box<dyn BrokerStream>,
    next_correlation_id: i32,
    client_id: String,
}

impl KafkaConnection {
    /// Connects to `addr` over PLAINTEXT.
    pub async fn connect(addr: impl ToSocketAddrs, client_id: &str) -> Result<Self, ClientError> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Self::over(Box::new(stream), client_id))
    }

    /// A connection over an already established stream (TLS, for example).
    pub fn over(stream: Box<dyn BrokerStream>, client_id: &str) -> Self {
        KafkaConnection {
            stream,
            next_correlation_id: 1,
            client_id: client_id.to_string(),
        }
    }

    /// Sends raw bytes as one frame (tests use this for malformed requests).
    pub async fn send_raw_frame(&mut self, body: &[u8]) -> Result<(), ClientError> {
        write_frame(&mut self.stream, &[body]).await?;
        self.stream.flush().await?;
        Ok(())
    }

    /// Reads one raw response frame.
    pub async fn read_raw_frame(&mut self) -> Result<Bytes, ClientError> {
        read_frame(&mut self.stream, MAX_RESPONSE_BYTES)
            .await?
            .ok_or(ClientError::Closed)
    }

    /// Sends `request` at `version` and waits for its response.
    pub async fn send<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<R::Response, ClientError> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_string(self.client_id.clone())));
        let mut buf = BytesMut::new();
        header
            .encode(&mut buf, R::header_version(version))
            .map_err(|e| ClientError::Codec(e.to_string()))?;
        request
            .encode(&mut buf, version)
            .map_err(|e| ClientError::Codec(e.to_string()))?;
        self.send_raw_frame(&buf).await?;
        let mut frame = self.read_raw_frame().await?;
        let response_header =
            ResponseHeader::decode(&mut frame, R::Response::header_version(version))
                .map_err(|e| ClientError::Codec(e.to_string()))?;
        if response_header.correlation_id != correlation_id {
            return Err(ClientError::CorrelationMismatch {
                sent: correlation_id,
                got: response_header.correlation_id,
            });
        }
        R::Response::decode(&mut frame, version).map_err(|e| ClientError::Codec(e.to_string()))
    }
}
