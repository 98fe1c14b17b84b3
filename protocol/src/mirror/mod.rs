//! The cluster-mirroring RPCs (api keys 94..=105). Their wire types are generated into the
//! vendored kafka-protocol crate from `protocol/schemas/mirror` (`kafka_protocol::messages`,
//! e.g. `CreateClusterMirrorRequest`, and the `RequestKind` / `ResponseKind` variants) and used
//! as they are; this module holds their error codes.

pub mod errors;
