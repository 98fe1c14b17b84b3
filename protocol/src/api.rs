//! Request headers and bodies in, responses out, on top of the kafka-protocol crate's messages
//! (Tern's mirror RPCs, 94..=105, among them: see `vendor/README.md`).

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable};

/// Why a request could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// Shorter than the fixed api key / version / correlation id prefix.
    #[error("request shorter than its header")]
    TooShort,
    /// An api key this broker does not serve.
    #[error("unknown api key {api_key}")]
    UnknownApiKey {
        /// The key sent.
        api_key: i16,
        /// The request's correlation id.
        correlation_id: i32,
    },
    /// A version outside what this broker offers for the key.
    #[error("unsupported version {version} of api key {api_key}")]
    UnsupportedVersion {
        /// The key sent.
        api_key: i16,
        /// The version sent.
        version: i16,
        /// The request's correlation id.
        correlation_id: i32,
    },
    /// Bytes that do not decode as the declared request.
    #[error("malformed request (api key {api_key} v{version}): {reason}")]
    Malformed {
        /// The key sent.
        api_key: i16,
        /// The version sent.
        version: i16,
        /// The decoder's complaint.
        reason: String,
    },
}

/// The fixed prefix of every request header: api key, version, correlation id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestPrefix {
    /// Api key.
    pub api_key: i16,
    /// Api version.
    pub api_version: i16,
    /// Correlation id echoed in the response.
    pub correlation_id: i32,
}

/// Reads the api key, version and correlation id without decoding the rest.
pub fn peek_prefix(frame: &[u8]) -> Result<RequestPrefix, RequestError> {
    if frame.len() < 8 {
        return Err(RequestError::TooShort);
    }
    let mut b = &frame[..8];
    Ok(RequestPrefix {
        api_key: b.get_i16(),
        api_version: b.get_i16(),
        correlation_id: b.get_i32(),
    })
}

/// A decoded request: its header and the typed body.
#[derive(Debug)]
pub struct DecodedRequest {
    /// The request header (client id, correlation id, ...).
    pub header: RequestHeader,
    /// The known api key.
    pub api_key: ApiKey,
    /// The typed body.
    pub body: RequestKind,
}

/// Decodes a request frame whose version `supported` accepts.
pub fn decode_request(
    frame: Bytes,
    supported: impl Fn(ApiKey, i16) -> bool,
) -> Result<DecodedRequest, RequestError> {
    let prefix = peek_prefix(&frame)?;
    let api_key = ApiKey::try_from(prefix.api_key).map_err(|_| RequestError::UnknownApiKey {
        api_key: prefix.api_key,
        correlation_id: prefix.correlation_id,
    })?;
    if !supported(api_key, prefix.api_version) {
        return Err(RequestError::UnsupportedVersion {
            api_key: prefix.api_key,
            version: prefix.api_version,
            correlation_id: prefix.correlation_id,
        });
    }
    let malformed = |e: anyhow::Error| RequestError::Malformed {
        api_key: prefix.api_key,
        version: prefix.api_version,
        reason: e.to_string(),
    };
    let mut buf = frame;
    let header_version = api_key.request_header_version(prefix.api_version);
    let header = RequestHeader::decode(&mut buf, header_version).map_err(malformed)?;
    let body = RequestKind::decode(api_key, &mut buf, prefix.api_version).map_err(malformed)?;
    Ok(DecodedRequest {
        header,
        api_key,
        body,
    })
}

/// Encodes a response (header and body, without the size prefix).
pub fn encode_response(
    correlation_id: i32,
    version: i16,
    response: &ResponseKind,
) -> Result<BytesMut, String> {
    let mut buf = BytesMut::new();
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    header
        .encode(&mut buf, response.header_version(version))
        .map_err(|e| e.to_string())?;
    response
        .encode(&mut buf, version)
        .map_err(|e| e.to_string())?;
    Ok(buf)
}

/// Encodes a request with its header, for the client side.
pub fn encode_request(
    header: &RequestHeader,
    api_key: ApiKey,
    body: &RequestKind,
) -> Result<BytesMut, String> {
    let mut buf = BytesMut::new();
    header
        .encode(
            &mut buf,
            api_key.request_header_version(header.request_api_version),
        )
        .map_err(|e| e.to_string())?;
    body.encode(&mut buf, header.request_api_version)
        .map_err(|e| e.to_string())?;
    Ok(buf)
}
