//! The cluster-mirroring RPCs (api keys 94..=105), hand-written because the kafka-protocol
//! crate does not know them, and their error codes.

pub mod codec;
pub mod errors;
pub mod messages;

pub use codec::{
    decode_mirror_request, decode_mirror_response, encode_mirror_request, encode_mirror_response,
};
pub use messages::*;
