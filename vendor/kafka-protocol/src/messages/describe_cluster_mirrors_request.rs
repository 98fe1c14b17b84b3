//! DescribeClusterMirrorsRequest
//!
//! Not a Kafka message: one of Tern's mirror RPCs, generated from its schema `protocol/schemas/mirror/DescribeClusterMirrorsRequest.json`.
// WARNING: the items of this module are generated and should not be edited directly
#![allow(unused)]

use std::borrow::Borrow;
use std::collections::BTreeMap;

use anyhow::{bail, Result};
use bytes::Bytes;
use uuid::Uuid;

use crate::protocol::{
    buf::{ByteBuf, ByteBufMut},
    compute_unknown_tagged_fields_size, types, write_unknown_tagged_fields, Decodable, Decoder,
    Encodable, Encoder, HeaderVersion, Message, StrBytes, VersionRange,
};

/// Valid versions: 0
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct DescribeClusterMirrorsRequest {
    /// The mirrors to describe; empty means all.
    ///
    /// Supported API versions: 0
    pub mirror_names: Vec<StrBytes>,

    /// Whether to include the authorized operations.
    ///
    /// Supported API versions: 0
    pub include_authorized_operations: bool,

    /// The asking cluster's id.
    ///
    /// Supported API versions: 0
    pub cluster_id: Option<StrBytes>,

    /// The partitions whose last mirror epochs to look up.
    ///
    /// Supported API versions: 0
    pub last_mirror_epoch_lookups: Vec<LastMirrorEpochLookup>,

    /// Tern: answer only for the partitions this broker leads (brokers set it when they gather the cluster's view from each other).
    ///
    /// Supported API versions: 0
    pub local_only: bool,

    /// Other tagged fields
    pub unknown_tagged_fields: BTreeMap<i32, Bytes>,
}

impl DescribeClusterMirrorsRequest {
    /// Sets `mirror_names` to the passed value.
    ///
    /// The mirrors to describe; empty means all.
    ///
    /// Supported API versions: 0
    pub fn with_mirror_names(mut self, value: Vec<StrBytes>) -> Self {
        self.mirror_names = value;
        self
    }
    /// Sets `include_authorized_operations` to the passed value.
    ///
    /// Whether to include the authorized operations.
    ///
    /// Supported API versions: 0
    pub fn with_include_authorized_operations(mut self, value: bool) -> Self {
        self.include_authorized_operations = value;
        self
    }
    /// Sets `cluster_id` to the passed value.
    ///
    /// The asking cluster's id.
    ///
    /// Supported API versions: 0
    pub fn with_cluster_id(mut self, value: Option<StrBytes>) -> Self {
        self.cluster_id = value;
        self
    }
    /// Sets `last_mirror_epoch_lookups` to the passed value.
    ///
    /// The partitions whose last mirror epochs to look up.
    ///
    /// Supported API versions: 0
    pub fn with_last_mirror_epoch_lookups(mut self, value: Vec<LastMirrorEpochLookup>) -> Self {
        self.last_mirror_epoch_lookups = value;
        self
    }
    /// Sets `local_only` to the passed value.
    ///
    /// Tern: answer only for the partitions this broker leads (brokers set it when they gather the cluster's view from each other).
    ///
    /// Supported API versions: 0
    pub fn with_local_only(mut self, value: bool) -> Self {
        self.local_only = value;
        self
    }
    /// Sets unknown_tagged_fields to the passed value.
    pub fn with_unknown_tagged_fields(mut self, value: BTreeMap<i32, Bytes>) -> Self {
        self.unknown_tagged_fields = value;
        self
    }
    /// Inserts an entry into unknown_tagged_fields.
    pub fn with_unknown_tagged_field(mut self, key: i32, value: Bytes) -> Self {
        self.unknown_tagged_fields.insert(key, value);
        self
    }
}

#[cfg(feature = "client")]
impl Encodable for DescribeClusterMirrorsRequest {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        if version != 0 {
            bail!("specified version not supported by this message type");
        }
        types::CompactArray(types::CompactString).encode(buf, &self.mirror_names)?;
        types::Boolean.encode(buf, &self.include_authorized_operations)?;
        let mut num_tagged_fields = self.unknown_tagged_fields.len();
        if !self.cluster_id.is_none() {
            num_tagged_fields += 1;
        }
        if !self.last_mirror_epoch_lookups.is_empty() {
            num_tagged_fields += 1;
        }
        if self.local_only {
            num_tagged_fields += 1;
        }
        if num_tagged_fields > std::u32::MAX as usize {
            bail!(
                "Too many tagged fields to encode ({} fields)",
                num_tagged_fields
            );
        }
        types::UnsignedVarInt.encode(buf, num_tagged_fields as u32)?;
        if !self.cluster_id.is_none() {
            let computed_size = types::CompactString.compute_size(&self.cluster_id)?;
            if computed_size > std::u32::MAX as usize {
                bail!(
                    "Tagged field is too large to encode ({} bytes)",
                    computed_size
                );
            }
            types::UnsignedVarInt.encode(buf, 0)?;
            types::UnsignedVarInt.encode(buf, computed_size as u32)?;
            types::CompactString.encode(buf, &self.cluster_id)?;
        }
        if !self.last_mirror_epoch_lookups.is_empty() {
            let computed_size = types::CompactArray(types::Struct { version })
                .compute_size(&self.last_mirror_epoch_lookups)?;
            if computed_size > std::u32::MAX as usize {
                bail!(
                    "Tagged field is too large to encode ({} bytes)",
                    computed_size
                );
            }
            types::UnsignedVarInt.encode(buf, 1)?;
            types::UnsignedVarInt.encode(buf, computed_size as u32)?;
            types::CompactArray(types::Struct { version })
                .encode(buf, &self.last_mirror_epoch_lookups)?;
        }
        if self.local_only {
            let computed_size = types::Boolean.compute_size(&self.local_only)?;
            if computed_size > std::u32::MAX as usize {
                bail!(
                    "Tagged field is too large to encode ({} bytes)",
                    computed_size
                );
            }
            types::UnsignedVarInt.encode(buf, 2)?;
            types::UnsignedVarInt.encode(buf, computed_size as u32)?;
            types::Boolean.encode(buf, &self.local_only)?;
        }

        write_unknown_tagged_fields(buf, 3.., &self.unknown_tagged_fields)?;
        Ok(())
    }
    fn compute_size(&self, version: i16) -> Result<usize> {
        let mut total_size = 0;
        total_size += types::CompactArray(types::CompactString).compute_size(&self.mirror_names)?;
        total_size += types::Boolean.compute_size(&self.include_authorized_operations)?;
        let mut num_tagged_fields = self.unknown_tagged_fields.len();
        if !self.cluster_id.is_none() {
            num_tagged_fields += 1;
        }
        if !self.last_mirror_epoch_lookups.is_empty() {
            num_tagged_fields += 1;
        }
        if self.local_only {
            num_tagged_fields += 1;
        }
        if num_tagged_fields > std::u32::MAX as usize {
            bail!(
                "Too many tagged fields to encode ({} fields)",
                num_tagged_fields
            );
        }
        total_size += types::UnsignedVarInt.compute_size(num_tagged_fields as u32)?;
        if !self.cluster_id.is_none() {
            let computed_size = types::CompactString.compute_size(&self.cluster_id)?;
            if computed_size > std::u32::MAX as usize {
                bail!(
                    "Tagged field is too large to encode ({} bytes)",
                    computed_size
                );
            }
            total_size += types::UnsignedVarInt.compute_size(0)?;
            total_size += types::UnsignedVarInt.compute_size(computed_size as u32)?;
            total_size += computed_size;
        }
        if !self.last_mirror_epoch_lookups.is_empty() {
            let computed_size = types::CompactArray(types::Struct { version })
                .compute_size(&self.last_mirror_epoch_lookups)?;
            if computed_size > std::u32::MAX as usize {
                bail!(
                    "Tagged field is too large to encode ({} bytes)",
                    computed_size
                );
            }
            total_size += types::UnsignedVarInt.compute_size(1)?;
            total_size += types::UnsignedVarInt.compute_size(computed_size as u32)?;
            total_size += computed_size;
        }
        if self.local_only {
            let computed_size = types::Boolean.compute_size(&self.local_only)?;
            if computed_size > std::u32::MAX as usize {
                bail!(
                    "Tagged field is too large to encode ({} bytes)",
                    computed_size
                );
            }
            total_size += types::UnsignedVarInt.compute_size(2)?;
            total_size += types::UnsignedVarInt.compute_size(computed_size as u32)?;
            total_size += computed_size;
        }

        total_size += compute_unknown_tagged_fields_size(&self.unknown_tagged_fields)?;
        Ok(total_size)
    }
}

#[cfg(feature = "broker")]
impl Decodable for DescribeClusterMirrorsRequest {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        if version != 0 {
            bail!("specified version not supported by this message type");
        }
        let mirror_names = types::CompactArray(types::CompactString).decode(buf)?;
        let include_authorized_operations = types::Boolean.decode(buf)?;
        let mut cluster_id = None;
        let mut last_mirror_epoch_lookups = Default::default();
        let mut local_only = false;
        let mut unknown_tagged_fields = BTreeMap::new();
        let num_tagged_fields = types::UnsignedVarInt.decode(buf)?;
        for _ in 0..num_tagged_fields {
            let tag: u32 = types::UnsignedVarInt.decode(buf)?;
            let size: u32 = types::UnsignedVarInt.decode(buf)?;
            match tag {
                0 => {
                    cluster_id = types::CompactString.decode(buf)?;
                }
                1 => {
                    last_mirror_epoch_lookups =
                        types::CompactArray(types::Struct { version }).decode(buf)?;
                }
                2 => {
                    local_only = types::Boolean.decode(buf)?;
                }
                _ => {
                    let unknown_value = buf.try_get_bytes(size as usize)?;
                    unknown_tagged_fields.insert(tag as i32, unknown_value);
                }
            }
        }
        Ok(Self {
            mirror_names,
            include_authorized_operations,
            cluster_id,
            last_mirror_epoch_lookups,
            local_only,
            unknown_tagged_fields,
        })
    }
}

impl Default for DescribeClusterMirrorsRequest {
    fn default() -> Self {
        Self {
            mirror_names: Default::default(),
            include_authorized_operations: false,
            cluster_id: None,
            last_mirror_epoch_lookups: Default::default(),
            local_only: false,
            unknown_tagged_fields: BTreeMap::new(),
        }
    }
}

impl Message for DescribeClusterMirrorsRequest {
    const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

/// Valid versions: 0
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct LastMirrorEpochLookup {
    /// The topic id.
    ///
    /// Supported API versions: 0
    pub topic_id: Uuid,

    /// The partition indexes.
    ///
    /// Supported API versions: 0
    pub partitions: Vec<i32>,

    /// Other tagged fields
    pub unknown_tagged_fields: BTreeMap<i32, Bytes>,
}

impl LastMirrorEpochLookup {
    /// Sets `topic_id` to the passed value.
    ///
    /// The topic id.
    ///
    /// Supported API versions: 0
    pub fn with_topic_id(mut self, value: Uuid) -> Self {
        self.topic_id = value;
        self
    }
    /// Sets `partitions` to the passed value.
    ///
    /// The partition indexes.
    ///
    /// Supported API versions: 0
    pub fn with_partitions(mut self, value: Vec<i32>) -> Self {
        self.partitions = value;
        self
    }
    /// Sets unknown_tagged_fields to the passed value.
    pub fn with_unknown_tagged_fields(mut self, value: BTreeMap<i32, Bytes>) -> Self {
        self.unknown_tagged_fields = value;
        self
    }
    /// Inserts an entry into unknown_tagged_fields.
    pub fn with_unknown_tagged_field(mut self, key: i32, value: Bytes) -> Self {
        self.unknown_tagged_fields.insert(key, value);
        self
    }
}

#[cfg(feature = "client")]
impl Encodable for LastMirrorEpochLookup {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        if version != 0 {
            bail!("specified version not supported by this message type");
        }
        types::Uuid.encode(buf, &self.topic_id)?;
        types::CompactArray(types::Int32).encode(buf, &self.partitions)?;
        let num_tagged_fields = self.unknown_tagged_fields.len();
        if num_tagged_fields > std::u32::MAX as usize {
            bail!(
                "Too many tagged fields to encode ({} fields)",
                num_tagged_fields
            );
        }
        types::UnsignedVarInt.encode(buf, num_tagged_fields as u32)?;

        write_unknown_tagged_fields(buf, 0.., &self.unknown_tagged_fields)?;
        Ok(())
    }
    fn compute_size(&self, version: i16) -> Result<usize> {
        let mut total_size = 0;
        total_size += types::Uuid.compute_size(&self.topic_id)?;
        total_size += types::CompactArray(types::Int32).compute_size(&self.partitions)?;
        let num_tagged_fields = self.unknown_tagged_fields.len();
        if num_tagged_fields > std::u32::MAX as usize {
            bail!(
                "Too many tagged fields to encode ({} fields)",
                num_tagged_fields
            );
        }
        total_size += types::UnsignedVarInt.compute_size(num_tagged_fields as u32)?;

        total_size += compute_unknown_tagged_fields_size(&self.unknown_tagged_fields)?;
        Ok(total_size)
    }
}

#[cfg(feature = "broker")]
impl Decodable for LastMirrorEpochLookup {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        if version != 0 {
            bail!("specified version not supported by this message type");
        }
        let topic_id = types::Uuid.decode(buf)?;
        let partitions = types::CompactArray(types::Int32).decode(buf)?;
        let mut unknown_tagged_fields = BTreeMap::new();
        let num_tagged_fields = types::UnsignedVarInt.decode(buf)?;
        for _ in 0..num_tagged_fields {
            let tag: u32 = types::UnsignedVarInt.decode(buf)?;
            let size: u32 = types::UnsignedVarInt.decode(buf)?;
            let unknown_value = buf.try_get_bytes(size as usize)?;
            unknown_tagged_fields.insert(tag as i32, unknown_value);
        }
        Ok(Self {
            topic_id,
            partitions,
            unknown_tagged_fields,
        })
    }
}

impl Default for LastMirrorEpochLookup {
    fn default() -> Self {
        Self {
            topic_id: Uuid::nil(),
            partitions: Default::default(),
            unknown_tagged_fields: BTreeMap::new(),
        }
    }
}

impl Message for LastMirrorEpochLookup {
    const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

impl HeaderVersion for DescribeClusterMirrorsRequest {
    fn header_version(version: i16) -> i16 {
        2
    }
}
