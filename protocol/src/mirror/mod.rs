//! The cluster-mirroring RPCs (api keys 94..=105). Their wire types are generated into the
//! vendored kafka-protocol crate from `protocol/schemas/mirror`; `messages` holds the structs
//! Tern's mirror code still works with and `convert` maps between the two. Also their error codes.

pub mod convert;
pub mod errors;
pub mod messages;

pub use convert::{mirror_request, mirror_response, request_kind, response_kind};
pub use messages::*;
