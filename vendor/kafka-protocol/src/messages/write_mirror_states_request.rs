//! WriteMirrorStatesRequest
//!
//! Not a Kafka message: one of Tern's mirror RPCs, generated from its schema `protocol/schemas/mirror/WriteMirrorStatesRequest.json`.
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
pub struct PartitionData {
    /// The partition index.
    ///
    /// Supported API versions: 0
    pub partition_index: i32,

    /// The last mirror epoch, or -1.
    ///
    /// Supported API versions: 0
    pub last_mirror_epoch: i32,

    /// The state id.
    ///
    /// Supported API versions: 0
    pub state: i8,

    /// Tern: the retries while FAILED.
    ///
    /// Supported API versions: 0
    pub retry_attempt: i16,

    /// Tern: the error that made the partition FAILED.
    ///
    /// Supported API versions: 0
    pub error_message: Option<StrBytes>,

    /// Tern: the offset to record as last mirrored, or -1 to keep the recorded one.
    ///
    /// Supported API versions: 0
    pub last_mirrored_offset: i64,

    /// Tern: the state before this one as the writer sees it, or -1 for the coordinator's current state.
    ///
    /// Supported API versions: 0
    pub previous_state: i8,

    /// Tern: the writer's leader epoch of this partition, or -1; a lower epoch than the partition's current one is refused (FENCED_LEADER_EPOCH).
    ///
    /// Supported API versions: 0
    pub leader_epoch: i32,

    /// Other tagged fields
    pub unknown_tagged_fields: BTreeMap<i32, Bytes>,
}

impl PartitionData {
    /// Sets `partition_index` to the passed value.
    ///
    /// The partition index.
    ///
    /// Supported API versions: 0
    pub fn with_partition_index(mut self, value: i32) -> Self {
        self.partition_index = value;
        self
    }
    /// Sets `last_mirror_epoch` to the passed value.
    ///
    /// The last mirror epoch, or -1.
    ///
    /// Supported API versions: 0
    pub fn with_last_mirror_epoch(mut self, value: i32) -> Self {
        self.last_mirror_epoch = value;
        self
    }
    /// Sets `state` to the passed value.
    ///
    /// The state id.
    ///
    /// Supported API versions: 0
    pub fn with_state(mut self, value: i8) -> Self {
        self.state = value;
        self
    }
    /// Sets `retry_attempt` to the passed value.
    ///
    /// Tern: the retries while FAILED.
    ///
    /// Supported API versions: 0
    pub fn with_retry_attempt(mut self, value: i16) -> Self {
        self.retry_attempt = value;
        self
    }
    /// Sets `error_message` to the passed value.
    ///
    /// Tern: the error that made the partition FAILED.
    ///
    /// Supported API versions: 0
    pub fn with_error_message(mut self, value: Option<StrBytes>) -> Self {
        self.error_message = value;
        self
    }
    /// Sets `last_mirrored_offset` to the passed value.
    ///
    /// Tern: the offset to record as last mirrored, or -1 to keep the recorded one.
    ///
    /// Supported API versions: 0
    pub fn with_last_mirrored_offset(mut self, value: i64) -> Self {
        self.last_mirrored_offset = value;
        self
    }
    /// Sets `previous_state` to the passed value.
    ///
    /// Tern: the state before this one as the writer sees it, or -1 for the coordinator's current state.
    ///
    /// Supported API versions: 0
    pub fn with_previous_state(mut self, value: i8) -> Self {
        self.previous_state = value;
        self
    }
    /// Sets `leader_epoch` to the passed value.
    ///
    /// Tern: the writer's leader epoch of this partition, or -1; a lower epoch than the partition's current one is refused (FENCED_LEADER_EPOCH).
    ///
    /// Supported API versions: 0
    pub fn with_leader_epoch(mut self, value: i32) -> Self {
        self.leader_epoch = value;
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
impl Encodable for PartitionData {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        if version != 0 {
            bail!("specified version not supported by this message type");
        }
        types::Int32.encode(buf, &self.partition_index)?;
        types::Int32.encode(buf, &self.last_mirror_epoch)?;
        types::Int8.encode(buf, &self.state)?;
        let mut num_tagged_fields = self.unknown_tagged_fields.len();
        if self.retry_attempt != 0 {
            num_tagged_fields += 1;
        }
        if !self.error_message.is_none() {
            num_tagged_fields += 1;
        }
        if self.last_mirrored_offset != -1 {
            num_tagged_fields += 1;
        }
        if self.previous_state != -1 {
            num_tagged_fields += 1;
        }
        if self.leader_epoch != -1 {
            num_tagged_fields += 1;
        }
        if num_tagged_fields > std::u32::MAX as usize {
            bail!(
                "Too many tagged fields to encode ({} fields)",
                num_tagged_fields
            );
        }
        types::UnsignedVarInt.encode(buf, num_tagged_fields as u32)?;
        if self.retry_attempt != 0 {
            let computed_size = types::Int16.compute_size(&self.retry_attempt)?;
            if computed_size > std::u32::MAX as usize {
                bail!(
                    "Tagged field is too large to encode ({} bytes)",
                    computed_size
                );
            }
            types::UnsignedVarInt.encode(buf, 0)?;
            types::UnsignedVarInt.encode(buf, computed_size as u32)?;
            types::Int16.encode(buf, &self.retry_attempt)?;
        }
        if !self.error_message.is_none() {
            let computed_size = types::CompactString.compute_size(&self.error_message)?;
            if computed_size > std::u32::MAX as usize {
                bail!(
                    "Tagged field is too large to encode ({} bytes)",
                    computed_size
                );
            }
            types::UnsignedVarInt.encode(buf, 1)?;
            types::UnsignedVarInt.encode(buf, computed_size as u32)?;
            types::CompactString.encode(buf, &self.error_message)?;
        }
        if self.last_mirrored_offset != -1 {
            let computed_size = types::Int64.compute_size(&self.last_mirrored_offset)?;
            if computed_size > std::u32::MAX as usize {
                bail!(
                    "Tagged field is too large to encode ({} bytes)",
                    computed_size
                );
            }
            types::UnsignedVarInt.encode(buf, 2)?;
            types::UnsignedVarInt.encode(buf, computed_size as u32)?;
            types::Int64.encode(buf, &self.last_mirrored_offset)?;
        }
        if self.previous_state != -1 {
            let computed_size = types::Int8.compute_size(&self.previous_state)?;
            if computed_size > std::u32::MAX as usize {
                bail!(
                    "Tagged field is too large to encode ({} bytes)",
                    computed_size
                );
            }
            types::UnsignedVarInt.encode(buf, 3)?;
            types::UnsignedVarInt.encode(buf, computed_size as u32)?;
            types::Int8.encode(buf, &self.previous_state)?;
        }
        if self.leader_epoch != -1 {
            let computed_size = types::Int32.compute_size(&self.leader_epoch)?;
            if computed_size > std::u32::MAX as usize {
                bail!(
                    "Tagged field is too large to encode ({} bytes)",
                    computed_size
                );
            }
            types::UnsignedVarInt.encode(buf, 4)?;
            types::UnsignedVarInt.encode(buf, computed_size as u32)?;
            types::Int32.encode(buf, &self.leader_epoch)?;
        }

        write_unknown_tagged_fields(buf, 5.., &self.unknown_tagged_fields)?;
        Ok(())
    }
    fn compute_size(&self, version: i16) -> Result<usize> {
        let mut total_size = 0;
        total_size += types::Int32.compute_size(&self.partition_index)?;
        total_size += types::Int32.compute_size(&self.last_mirror_epoch)?;
        total_size += types::Int8.compute_size(&self.state)?;
        let mut num_tagged_fields = self.unknown_tagged_fields.len();
        if self.retry_attempt != 0 {
            num_tagged_fields += 1;
        }
        if !self.error_message.is_none() {
            num_tagged_fields += 1;
        }
        if self.last_mirrored_offset != -1 {
            num_tagged_fields += 1;
        }
        if self.previous_state != -1 {
            num_tagged_fields += 1;
        }
        if self.leader_epoch != -1 {
            num_tagged_fields += 1;
        }
        if num_tagged_fields > std::u32::MAX as usize {
            bail!(
                "Too many tagged fields to encode ({} fields)",
                num_tagged_fields
            );
        }
        total_size += types::UnsignedVarInt.compute_size(num_tagged_fields as u32)?;
        if self.retry_attempt != 0 {
            let computed_size = types::Int16.compute_size(&self.retry_attempt)?;
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
        if !self.error_message.is_none() {
            let computed_size = types::CompactString.compute_size(&self.error_message)?;
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
        if self.last_mirrored_offset != -1 {
            let computed_size = types::Int64.compute_size(&self.last_mirrored_offset)?;
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
        if self.previous_state != -1 {
            let computed_size = types::Int8.compute_size(&self.previous_state)?;
            if computed_size > std::u32::MAX as usize {
                bail!(
                    "Tagged field is too large to encode ({} bytes)",
                    computed_size
                );
            }
            total_size += types::UnsignedVarInt.compute_size(3)?;
            total_size += types::UnsignedVarInt.compute_size(computed_size as u32)?;
            total_size += computed_size;
        }
        if self.leader_epoch != -1 {
            let computed_size = types::Int32.compute_size(&self.leader_epoch)?;
            if computed_size > std::u32::MAX as usize {
                bail!(
                    "Tagged field is too large to encode ({} bytes)",
                    computed_size
                );
            }
            total_size += types::UnsignedVarInt.compute_size(4)?;
            total_size += types::UnsignedVarInt.compute_size(computed_size as u32)?;
            total_size += computed_size;
        }

        total_size += compute_unknown_tagged_fields_size(&self.unknown_tagged_fields)?;
        Ok(total_size)
    }
}

#[cfg(feature = "broker")]
impl Decodable for PartitionData {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        if version != 0 {
            bail!("specified version not supported by this message type");
        }
        let partition_index = types::Int32.decode(buf)?;
        let last_mirror_epoch = types::Int32.decode(buf)?;
        let state = types::Int8.decode(buf)?;
        let mut retry_attempt = 0;
        let mut error_message = None;
        let mut last_mirrored_offset = -1;
        let mut previous_state = -1;
        let mut leader_epoch = -1;
        let mut unknown_tagged_fields = BTreeMap::new();
        let num_tagged_fields = types::UnsignedVarInt.decode(buf)?;
        for _ in 0..num_tagged_fields {
            let tag: u32 = types::UnsignedVarInt.decode(buf)?;
            let size: u32 = types::UnsignedVarInt.decode(buf)?;
            match tag {
                0 => {
                    retry_attempt = types::Int16.decode(buf)?;
                }
                1 => {
                    error_message = types::CompactString.decode(buf)?;
                }
                2 => {
                    last_mirrored_offset = types::Int64.decode(buf)?;
                }
                3 => {
                    previous_state = types::Int8.decode(buf)?;
                }
                4 => {
                    leader_epoch = types::Int32.decode(buf)?;
                }
                _ => {
                    let unknown_value = buf.try_get_bytes(size as usize)?;
                    unknown_tagged_fields.insert(tag as i32, unknown_value);
                }
            }
        }
        Ok(Self {
            partition_index,
            last_mirror_epoch,
            state,
            retry_attempt,
            error_message,
            last_mirrored_offset,
            previous_state,
            leader_epoch,
            unknown_tagged_fields,
        })
    }
}

impl Default for PartitionData {
    fn default() -> Self {
        Self {
            partition_index: 0,
            last_mirror_epoch: -1,
            state: -1,
            retry_attempt: 0,
            error_message: None,
            last_mirrored_offset: -1,
            previous_state: -1,
            leader_epoch: -1,
            unknown_tagged_fields: BTreeMap::new(),
        }
    }
}

impl Message for PartitionData {
    const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

/// Valid versions: 0
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct TopicData {
    /// The topic name.
    ///
    /// Supported API versions: 0
    pub name: StrBytes,

    /// The partitions' new states.
    ///
    /// Supported API versions: 0
    pub partitions: Vec<PartitionData>,

    /// Other tagged fields
    pub unknown_tagged_fields: BTreeMap<i32, Bytes>,
}

impl TopicData {
    /// Sets `name` to the passed value.
    ///
    /// The topic name.
    ///
    /// Supported API versions: 0
    pub fn with_name(mut self, value: StrBytes) -> Self {
        self.name = value;
        self
    }
    /// Sets `partitions` to the passed value.
    ///
    /// The partitions' new states.
    ///
    /// Supported API versions: 0
    pub fn with_partitions(mut self, value: Vec<PartitionData>) -> Self {
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
impl Encodable for TopicData {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        if version != 0 {
            bail!("specified version not supported by this message type");
        }
        types::CompactString.encode(buf, &self.name)?;
        types::CompactArray(types::Struct { version }).encode(buf, &self.partitions)?;
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
        total_size += types::CompactString.compute_size(&self.name)?;
        total_size +=
            types::CompactArray(types::Struct { version }).compute_size(&self.partitions)?;
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
impl Decodable for TopicData {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        if version != 0 {
            bail!("specified version not supported by this message type");
        }
        let name = types::CompactString.decode(buf)?;
        let partitions = types::CompactArray(types::Struct { version }).decode(buf)?;
        let mut unknown_tagged_fields = BTreeMap::new();
        let num_tagged_fields = types::UnsignedVarInt.decode(buf)?;
        for _ in 0..num_tagged_fields {
            let tag: u32 = types::UnsignedVarInt.decode(buf)?;
            let size: u32 = types::UnsignedVarInt.decode(buf)?;
            let unknown_value = buf.try_get_bytes(size as usize)?;
            unknown_tagged_fields.insert(tag as i32, unknown_value);
        }
        Ok(Self {
            name,
            partitions,
            unknown_tagged_fields,
        })
    }
}

impl Default for TopicData {
    fn default() -> Self {
        Self {
            name: Default::default(),
            partitions: Default::default(),
            unknown_tagged_fields: BTreeMap::new(),
        }
    }
}

impl Message for TopicData {
    const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

/// Valid versions: 0
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub struct WriteMirrorStatesRequest {
    /// The mirror name.
    ///
    /// Supported API versions: 0
    pub mirror_name: StrBytes,

    /// The topics.
    ///
    /// Supported API versions: 0
    pub topics: Vec<TopicData>,

    /// The topics to be stopped.
    ///
    /// Supported API versions: 0
    pub stopped_topics: Vec<StrBytes>,

    /// Other tagged fields
    pub unknown_tagged_fields: BTreeMap<i32, Bytes>,
}

impl WriteMirrorStatesRequest {
    /// Sets `mirror_name` to the passed value.
    ///
    /// The mirror name.
    ///
    /// Supported API versions: 0
    pub fn with_mirror_name(mut self, value: StrBytes) -> Self {
        self.mirror_name = value;
        self
    }
    /// Sets `topics` to the passed value.
    ///
    /// The topics.
    ///
    /// Supported API versions: 0
    pub fn with_topics(mut self, value: Vec<TopicData>) -> Self {
        self.topics = value;
        self
    }
    /// Sets `stopped_topics` to the passed value.
    ///
    /// The topics to be stopped.
    ///
    /// Supported API versions: 0
    pub fn with_stopped_topics(mut self, value: Vec<StrBytes>) -> Self {
        self.stopped_topics = value;
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
impl Encodable for WriteMirrorStatesRequest {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        if version != 0 {
            bail!("specified version not supported by this message type");
        }
        types::CompactString.encode(buf, &self.mirror_name)?;
        types::CompactArray(types::Struct { version }).encode(buf, &self.topics)?;
        types::CompactArray(types::CompactString).encode(buf, &self.stopped_topics)?;
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
        total_size += types::CompactString.compute_size(&self.mirror_name)?;
        total_size += types::CompactArray(types::Struct { version }).compute_size(&self.topics)?;
        total_size +=
            types::CompactArray(types::CompactString).compute_size(&self.stopped_topics)?;
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
impl Decodable for WriteMirrorStatesRequest {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        if version != 0 {
            bail!("specified version not supported by this message type");
        }
        let mirror_name = types::CompactString.decode(buf)?;
        let topics = types::CompactArray(types::Struct { version }).decode(buf)?;
        let stopped_topics = types::CompactArray(types::CompactString).decode(buf)?;
        let mut unknown_tagged_fields = BTreeMap::new();
        let num_tagged_fields = types::UnsignedVarInt.decode(buf)?;
        for _ in 0..num_tagged_fields {
            let tag: u32 = types::UnsignedVarInt.decode(buf)?;
            let size: u32 = types::UnsignedVarInt.decode(buf)?;
            let unknown_value = buf.try_get_bytes(size as usize)?;
            unknown_tagged_fields.insert(tag as i32, unknown_value);
        }
        Ok(Self {
            mirror_name,
            topics,
            stopped_topics,
            unknown_tagged_fields,
        })
    }
}

impl Default for WriteMirrorStatesRequest {
    fn default() -> Self {
        Self {
            mirror_name: Default::default(),
            topics: Default::default(),
            stopped_topics: Default::default(),
            unknown_tagged_fields: BTreeMap::new(),
        }
    }
}

impl Message for WriteMirrorStatesRequest {
    const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

impl HeaderVersion for WriteMirrorStatesRequest {
    fn header_version(version: i16) -> i16 {
        2
    }
}
