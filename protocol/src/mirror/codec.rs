//! Encoding and decoding of the mirror RPCs (all version 0, flexible).
//!
//! Every message follows its JSON schema (see `messages.rs`): request header v2, response
//! header v1, compact strings and arrays, 16-byte uuids, one-byte bools, and a tagged-field
//! section after every struct, nested array elements included. Tagged fields are written only
//! when they differ from their default, in ascending tag order; unknown tags are skipped.
//!
//! Decoding never panics and never reserves more elements than the remaining bytes could hold.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::RequestHeader;
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::messages::*;
use crate::api::{peek_prefix, RequestError};

/// A decode failure: what was being read when the bytes ran out or made no sense.
type DResult<T> = Result<T, String>;

// ---------------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------------

/// A bounds-checked cursor over a byte slice.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }

    fn remaining(&self) -> usize {
        self.buf.len()
    }

    fn take(&mut self, n: usize, what: &str) -> DResult<&'a [u8]> {
        if n > self.buf.len() {
            return Err(format!(
                "truncated {what}: need {n} bytes, {} left",
                self.buf.len()
            ));
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    fn array_of<const N: usize>(&mut self, what: &str) -> DResult<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, what)?);
        Ok(out)
    }

    fn i8(&mut self, what: &str) -> DResult<i8> {
        Ok(i8::from_be_bytes(self.array_of(what)?))
    }

    fn i16(&mut self, what: &str) -> DResult<i16> {
        Ok(i16::from_be_bytes(self.array_of(what)?))
    }

    fn i32(&mut self, what: &str) -> DResult<i32> {
        Ok(i32::from_be_bytes(self.array_of(what)?))
    }

    fn i64(&mut self, what: &str) -> DResult<i64> {
        Ok(i64::from_be_bytes(self.array_of(what)?))
    }

    fn bool(&mut self, what: &str) -> DResult<bool> {
        Ok(self.array_of::<1>(what)?[0] != 0)
    }

    fn uuid(&mut self, what: &str) -> DResult<Uuid> {
        Ok(Uuid::from_bytes(self.array_of(what)?))
    }

    /// An unsigned varint of at most 32 bits (at most 5 bytes).
    fn uvarint(&mut self, what: &str) -> DResult<u32> {
        let mut value: u32 = 0;
        for i in 0..5 {
            let b = self.array_of::<1>(what)?[0];
            if i == 4 && b > 0x0f {
                return Err(format!("{what}: unsigned varint overflows 32 bits"));
            }
            value |= u32::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(format!("{what}: unsigned varint longer than 5 bytes"))
    }

    fn utf8(&mut self, len: usize, what: &str) -> DResult<String> {
        let bytes = self.take(len, what)?;
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|e| format!("{what}: invalid UTF-8: {e}"))
    }

    /// A compact nullable string: unsigned varint length + 1, 0 = null.
    fn compact_nullable_string(&mut self, what: &str) -> DResult<Option<String>> {
        match self.uvarint(what)? {
            0 => Ok(None),
            n => self.utf8((n - 1) as usize, what).map(Some),
        }
    }

    /// A compact string; null is an error.
    fn compact_string(&mut self, what: &str) -> DResult<String> {
        self.compact_nullable_string(what)?
            .ok_or_else(|| format!("{what}: non-nullable string is null"))
    }

    /// A classic nullable string: int16 length, -1 = null.
    fn nullable_string(&mut self, what: &str) -> DResult<Option<String>> {
        match self.i16(what)? {
            -1 => Ok(None),
            n if n < 0 => Err(format!("{what}: negative string length {n}")),
            n => self.utf8(n as usize, what).map(Some),
        }
    }

    /// A compact array (null decodes as empty). Every element takes at least one byte, so a
    /// count above the remaining length is rejected before anything is allocated.
    fn compact_array<T>(
        &mut self,
        what: &str,
        mut element: impl FnMut(&mut Reader<'a>) -> DResult<T>,
    ) -> DResult<Vec<T>> {
        let count = match self.uvarint(what)? {
            0 => return Ok(Vec::new()),
            n => (n - 1) as usize,
        };
        if count > self.remaining() {
            return Err(format!(
                "{what}: array count {count} exceeds the {} bytes left",
                self.remaining()
            ));
        }
        let mut out = Vec::with_capacity(count.min(self.remaining()));
        for _ in 0..count {
            out.push(element(self)?);
        }
        Ok(out)
    }

    fn compact_string_array(&mut self, what: &str) -> DResult<Vec<String>> {
        self.compact_array(what, |r| r.compact_string(what))
    }

    fn compact_i32_array(&mut self, what: &str) -> DResult<Vec<i32>> {
        self.compact_array(what, |r| r.i32(what))
    }

    /// A tagged-field section. `known` decodes the field of a tag it knows from a reader over
    /// exactly that field's bytes and returns `Ok(false)` for tags it does not know, which are
    /// skipped. A known field must consume its whole size.
    fn tagged_fields(
        &mut self,
        what: &str,
        mut known: impl FnMut(u32, &mut Reader<'a>) -> DResult<bool>,
    ) -> DResult<()> {
        let count = self.uvarint(what)?;
        for _ in 0..count {
            let tag = self.uvarint(what)?;
            let size = self.uvarint(what)? as usize;
            let mut field = Reader::new(self.take(size, what)?);
            if known(tag, &mut field)? && field.remaining() != 0 {
                return Err(format!(
                    "{what}: tagged field {tag} has {} bytes past its value",
                    field.remaining()
                ));
            }
        }
        Ok(())
    }

    /// A tagged-field section in which no tag is known.
    fn skip_tagged_fields(&mut self, what: &str) -> DResult<()> {
        self.tagged_fields(what, |_, _| Ok(false))
    }
}

// ---------------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------------

fn put_uvarint(buf: &mut BytesMut, mut value: u32) {
    while value >= 0x80 {
        buf.put_u8((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    buf.put_u8(value as u8);
}

/// Length + 1 as an unsigned varint (lengths past u32 cannot be represented and are clamped;
/// no message gets anywhere near that).
fn put_compact_len(buf: &mut BytesMut, len: usize) {
    put_uvarint(
        buf,
        u32::try_from(len).unwrap_or(u32::MAX - 1).saturating_add(1),
    );
}

fn put_compact_string(buf: &mut BytesMut, s: &str) {
    put_compact_len(buf, s.len());
    buf.put_slice(s.as_bytes());
}

fn put_compact_nullable_string(buf: &mut BytesMut, s: Option<&str>) {
    match s {
        None => put_uvarint(buf, 0),
        Some(s) => put_compact_string(buf, s),
    }
}

fn put_compact_array<T>(
    buf: &mut BytesMut,
    items: &[T],
    mut element: impl FnMut(&mut BytesMut, &T),
) {
    put_compact_len(buf, items.len());
    for item in items {
        element(buf, item);
    }
}

fn put_compact_string_array(buf: &mut BytesMut, items: &[String]) {
    put_compact_array(buf, items, |b, s| put_compact_string(b, s));
}

fn put_bool(buf: &mut BytesMut, value: bool) {
    buf.put_u8(u8::from(value));
}

fn put_uuid(buf: &mut BytesMut, id: &Uuid) {
    buf.put_slice(id.as_bytes());
}

/// An empty tagged-field section.
fn put_no_tags(buf: &mut BytesMut) {
    put_uvarint(buf, 0);
}

/// A tagged-field section of the given `(tag, encoded value)` fields, which the caller lists in
/// ascending tag order and only when they differ from their default.
fn put_tags(buf: &mut BytesMut, fields: &[(u32, BytesMut)]) {
    put_uvarint(buf, u32::try_from(fields.len()).unwrap_or(u32::MAX));
    for (tag, value) in fields {
        put_uvarint(buf, *tag);
        put_uvarint(buf, u32::try_from(value.len()).unwrap_or(u32::MAX));
        buf.put_slice(value);
    }
}

/// Encodes one tagged field's value into its own buffer.
fn tagged(tag: u32, encode: impl FnOnce(&mut BytesMut)) -> (u32, BytesMut) {
    let mut value = BytesMut::new();
    encode(&mut value);
    (tag, value)
}

// ---------------------------------------------------------------------------------------------
// Shared pieces
// ---------------------------------------------------------------------------------------------

/// The throttle time, error code and error message every mirror response starts with.
struct ResponseHead {
    throttle_time_ms: i32,
    error_code: i16,
    error_message: Option<String>,
}

fn put_response_head(buf: &mut BytesMut, throttle: i32, code: i16, message: Option<&str>) {
    buf.put_i32(throttle);
    buf.put_i16(code);
    put_compact_nullable_string(buf, message);
}

fn read_response_head(r: &mut Reader<'_>) -> DResult<ResponseHead> {
    Ok(ResponseHead {
        throttle_time_ms: r.i32("ThrottleTimeMs")?,
        error_code: r.i16("ErrorCode")?,
        error_message: r.compact_nullable_string("ErrorMessage")?,
    })
}

/// `[]{PartitionIndex int32}` with a tagged-field section per element (97 and 100 requests).
fn put_partition_index_array(buf: &mut BytesMut, partitions: &[i32]) {
    put_compact_array(buf, partitions, |b, p| {
        b.put_i32(*p);
        put_no_tags(b);
    });
}

fn read_partition_index_array(r: &mut Reader<'_>) -> DResult<Vec<i32>> {
    r.compact_array("Partitions", |r| {
        let p = r.i32("PartitionIndex")?;
        r.skip_tagged_fields("PartitionData tags")?;
        Ok(p)
    })
}

/// `[]{Name string, Partitions []{PartitionIndex}}` (97 and 100 requests).
fn put_topic_partitions(buf: &mut BytesMut, topics: &[TopicPartitions]) {
    put_compact_array(buf, topics, |b, t| {
        put_compact_string(b, &t.name);
        put_partition_index_array(b, &t.partitions);
        put_no_tags(b);
    });
}

fn read_topic_partitions(r: &mut Reader<'_>) -> DResult<Vec<TopicPartitions>> {
    r.compact_array("Topics", |r| {
        let name = r.compact_string("Name")?;
        let partitions = read_partition_index_array(r)?;
        r.skip_tagged_fields("TopicData tags")?;
        Ok(TopicPartitions { name, partitions })
    })
}

// ---------------------------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------------------------

fn encode_request_body(buf: &mut BytesMut, request: &MirrorRequest) {
    match request {
        MirrorRequest::CreateClusterMirror(req) => {
            put_compact_string(buf, &req.mirror_name);
            put_compact_array(buf, &req.configs, |b, (name, value)| {
                put_compact_string(b, name);
                put_compact_nullable_string(b, value.as_deref());
                put_no_tags(b);
            });
            put_no_tags(buf);
        }
        MirrorRequest::StartMirrorTopics(req) => {
            put_compact_string(buf, &req.mirror_name);
            put_compact_array(buf, &req.topics, |b, t| {
                put_uuid(b, &t.topic_id);
                put_compact_string(b, &t.topic_name);
                b.put_i32(t.num_partitions);
                put_no_tags(b);
            });
            buf.put_i64(req.state_validation_offset);
            let mut tags = Vec::new();
            if !req.include_patterns.is_empty() {
                tags.push(tagged(0, |b| {
                    put_compact_string_array(b, &req.include_patterns)
                }));
            }
            if !req.exclude_patterns.is_empty() {
                tags.push(tagged(1, |b| {
                    put_compact_string_array(b, &req.exclude_patterns)
                }));
            }
            put_tags(buf, &tags);
        }
        MirrorRequest::StopMirrorTopics(req) => encode_mirror_topics(buf, req, true),
        MirrorRequest::BumpLeaderEpochs(req) => encode_bump_leader_epochs(buf, req),
        MirrorRequest::PauseMirrorTopics(req) | MirrorRequest::ResumeMirrorTopics(req) => {
            encode_mirror_topics(buf, req, false)
        }
        MirrorRequest::LastMirroredOffsets(req) => {
            put_compact_string(buf, &req.mirror_name);
            put_topic_partitions(buf, &req.topics);
            put_no_tags(buf);
        }
        MirrorRequest::ListClusterMirrors(req) => {
            put_bool(buf, req.include_topic_names);
            put_no_tags(buf);
        }
        MirrorRequest::DescribeClusterMirrors(req) => {
            put_compact_string_array(buf, &req.mirror_names);
            put_bool(buf, req.include_authorized_operations);
            let mut tags = Vec::new();
            if let Some(cluster_id) = &req.cluster_id {
                tags.push(tagged(0, |b| put_compact_string(b, cluster_id)));
            }
            if !req.last_mirror_epoch_lookups.is_empty() {
                tags.push(tagged(1, |b| {
                    put_compact_array(b, &req.last_mirror_epoch_lookups, |b, l| {
                        put_uuid(b, &l.topic_id);
                        put_compact_array(b, &l.partitions, |b, p| b.put_i32(*p));
                        put_no_tags(b);
                    })
                }));
            }
            if req.local_only {
                tags.push(tagged(2, |b| put_bool(b, true)));
            }
            put_tags(buf, &tags);
        }
        MirrorRequest::ReadMirrorStates(req) => {
            put_compact_string(buf, &req.mirror_name);
            put_topic_partitions(buf, &req.topics);
            put_no_tags(buf);
        }
        MirrorRequest::WriteMirrorStates(req) => {
            put_compact_string(buf, &req.mirror_name);
            put_compact_array(buf, &req.topics, |b, t| {
                put_compact_string(b, &t.name);
                put_compact_array(b, &t.partitions, |b, p| {
                    b.put_i32(p.partition_index);
                    b.put_i32(p.last_mirror_epoch);
                    b.put_i8(p.state);
                    let mut tags = Vec::new();
                    if p.retry_attempt != 0 {
                        tags.push(tagged(0, |b| b.put_i16(p.retry_attempt)));
                    }
                    if let Some(m) = &p.error_message {
                        tags.push(tagged(1, |b| put_compact_nullable_string(b, Some(m))));
                    }
                    if p.last_mirrored_offset != -1 {
                        tags.push(tagged(2, |b| b.put_i64(p.last_mirrored_offset)));
                    }
                    if p.previous_state != -1 {
                        tags.push(tagged(3, |b| b.put_i8(p.previous_state)));
                    }
                    if p.leader_epoch != -1 {
                        tags.push(tagged(4, |b| b.put_i32(p.leader_epoch)));
                    }
                    put_tags(b, &tags);
                });
                put_no_tags(b);
            });
            put_compact_string_array(buf, &req.stopped_topics);
            put_no_tags(buf);
        }
        MirrorRequest::DeleteClusterMirror(req) => {
            put_compact_string(buf, &req.mirror_name);
            buf.put_i64(req.state_validation_offset);
            put_no_tags(buf);
        }
    }
}

/// Stop (`with_patterns`: tagged field 0 `Patterns`), Pause and Resume requests.
fn encode_bump_leader_epochs(buf: &mut BytesMut, req: &BumpLeaderEpochsRequest) {
    put_compact_array(buf, &req.topics, |b, t| {
        put_uuid(b, &t.topic_id);
        put_compact_array(b, &t.partitions, |b, p| {
            b.put_i32(p.partition_index);
            b.put_i32(p.min_leader_epoch);
            put_no_tags(b);
        });
        put_no_tags(b);
    });
    put_no_tags(buf);
}

fn decode_bump_leader_epochs(r: &mut Reader<'_>) -> DResult<BumpLeaderEpochsRequest> {
    let topics = r.compact_array("Topics", |r| {
        let topic_id = r.uuid("TopicId")?;
        let partitions = r.compact_array("Partitions", |r| {
            let partition_index = r.i32("PartitionIndex")?;
            let min_leader_epoch = r.i32("MinLeaderEpoch")?;
            r.skip_tagged_fields("LeaderEpochState tags")?;
            Ok(BumpLeaderEpochPartition {
                partition_index,
                min_leader_epoch,
            })
        })?;
        r.skip_tagged_fields("TopicState tags")?;
        Ok(BumpLeaderEpochTopic {
            topic_id,
            partitions,
        })
    })?;
    r.skip_tagged_fields("request tags")?;
    Ok(BumpLeaderEpochsRequest { topics })
}

fn encode_mirror_topics(buf: &mut BytesMut, req: &MirrorTopicsRequest, with_patterns: bool) {
    put_compact_string(buf, &req.mirror_name);
    put_compact_array(buf, &req.topics, |b, t| {
        put_compact_string(b, t);
        put_no_tags(b);
    });
    buf.put_i64(req.state_validation_offset);
    let mut tags = Vec::new();
    if with_patterns && !req.patterns.is_empty() {
        tags.push(tagged(0, |b| put_compact_string_array(b, &req.patterns)));
    }
    put_tags(buf, &tags);
}

fn decode_mirror_topics(r: &mut Reader<'_>, with_patterns: bool) -> DResult<MirrorTopicsRequest> {
    let mirror_name = r.compact_string("MirrorName")?;
    let topics = r.compact_array("Topics", |r| {
        let name = r.compact_string("TopicName")?;
        r.skip_tagged_fields("TopicMetadata tags")?;
        Ok(name)
    })?;
    let state_validation_offset = r.i64("StateValidationOffset")?;
    let mut patterns = Vec::new();
    r.tagged_fields("request tags", |tag, f| match tag {
        0 if with_patterns => {
            patterns = f.compact_string_array("Patterns")?;
            Ok(true)
        }
        _ => Ok(false),
    })?;
    Ok(MirrorTopicsRequest {
        mirror_name,
        topics,
        patterns,
        state_validation_offset,
    })
}

fn decode_request_body(api_key: i16, r: &mut Reader<'_>) -> DResult<MirrorRequest> {
    use api_keys::*;
    Ok(match api_key {
        CREATE_CLUSTER_MIRROR => {
            let mirror_name = r.compact_string("MirrorName")?;
            let configs = r.compact_array("Config", |r| {
                let name = r.compact_string("Config.Name")?;
                let value = r.compact_nullable_string("Config.Value")?;
                r.skip_tagged_fields("Config tags")?;
                Ok((name, value))
            })?;
            r.skip_tagged_fields("request tags")?;
            MirrorRequest::CreateClusterMirror(CreateClusterMirrorRequest {
                mirror_name,
                configs,
            })
        }
        START_MIRROR_TOPICS => {
            let mirror_name = r.compact_string("MirrorName")?;
            let topics = r.compact_array("Topics", |r| {
                let topic_id = r.uuid("TopicId")?;
                let topic_name = r.compact_string("TopicName")?;
                let num_partitions = r.i32("NumPartitions")?;
                r.skip_tagged_fields("TopicMetadata tags")?;
                Ok(StartMirrorTopic {
                    topic_id,
                    topic_name,
                    num_partitions,
                })
            })?;
            let state_validation_offset = r.i64("StateValidationOffset")?;
            let mut include_patterns = Vec::new();
            let mut exclude_patterns = Vec::new();
            r.tagged_fields("request tags", |tag, f| match tag {
                0 => {
                    include_patterns = f.compact_string_array("IncludePatterns")?;
                    Ok(true)
                }
                1 => {
                    exclude_patterns = f.compact_string_array("ExcludePatterns")?;
                    Ok(true)
                }
                _ => Ok(false),
            })?;
            MirrorRequest::StartMirrorTopics(StartMirrorTopicsRequest {
                mirror_name,
                topics,
                include_patterns,
                exclude_patterns,
                state_validation_offset,
            })
        }
        STOP_MIRROR_TOPICS => MirrorRequest::StopMirrorTopics(decode_mirror_topics(r, true)?),
        BUMP_LEADER_EPOCHS => MirrorRequest::BumpLeaderEpochs(decode_bump_leader_epochs(r)?),
        PAUSE_MIRROR_TOPICS => MirrorRequest::PauseMirrorTopics(decode_mirror_topics(r, false)?),
        RESUME_MIRROR_TOPICS => MirrorRequest::ResumeMirrorTopics(decode_mirror_topics(r, false)?),
        LAST_MIRRORED_OFFSETS => {
            let mirror_name = r.compact_string("MirrorName")?;
            let topics = read_topic_partitions(r)?;
            r.skip_tagged_fields("request tags")?;
            MirrorRequest::LastMirroredOffsets(LastMirroredOffsetsRequest {
                mirror_name,
                topics,
            })
        }
        LIST_CLUSTER_MIRRORS => {
            let include_topic_names = r.bool("IncludeTopicNames")?;
            r.skip_tagged_fields("request tags")?;
            MirrorRequest::ListClusterMirrors(ListClusterMirrorsRequest {
                include_topic_names,
            })
        }
        DESCRIBE_CLUSTER_MIRRORS => {
            let mirror_names = r.compact_string_array("MirrorNames")?;
            let include_authorized_operations = r.bool("IncludeAuthorizedOperations")?;
            let mut cluster_id = None;
            let mut last_mirror_epoch_lookups = Vec::new();
            let mut local_only = false;
            r.tagged_fields("request tags", |tag, f| match tag {
                0 => {
                    cluster_id = f.compact_nullable_string("ClusterId")?;
                    Ok(true)
                }
                1 => {
                    last_mirror_epoch_lookups = f.compact_array("LastMirrorEpochLookups", |r| {
                        let topic_id = r.uuid("TopicId")?;
                        let partitions = r.compact_i32_array("Partitions")?;
                        r.skip_tagged_fields("LastMirrorEpochLookup tags")?;
                        Ok(LastMirrorEpochLookup {
                            topic_id,
                            partitions,
                        })
                    })?;
                    Ok(true)
                }
                2 => {
                    local_only = f.bool("LocalOnly")?;
                    Ok(true)
                }
                _ => Ok(false),
            })?;
            MirrorRequest::DescribeClusterMirrors(DescribeClusterMirrorsRequest {
                mirror_names,
                include_authorized_operations,
                cluster_id,
                last_mirror_epoch_lookups,
                local_only,
            })
        }
        READ_MIRROR_STATES => {
            let mirror_name = r.compact_string("MirrorName")?;
            let topics = read_topic_partitions(r)?;
            r.skip_tagged_fields("request tags")?;
            MirrorRequest::ReadMirrorStates(ReadMirrorStatesRequest {
                mirror_name,
                topics,
            })
        }
        WRITE_MIRROR_STATES => {
            let mirror_name = r.compact_string("MirrorName")?;
            let topics = r.compact_array("Topics", |r| {
                let name = r.compact_string("Name")?;
                let partitions = r.compact_array("Partitions", |r| {
                    let partition_index = r.i32("PartitionIndex")?;
                    let last_mirror_epoch = r.i32("LastMirrorEpoch")?;
                    let state = r.i8("State")?;
                    let mut p = WriteMirrorStatePartition {
                        partition_index,
                        last_mirror_epoch,
                        state,
                        ..Default::default()
                    };
                    r.tagged_fields("PartitionData tags", |tag, f| {
                        match tag {
                            0 => p.retry_attempt = f.i16("RetryAttempt")?,
                            1 => p.error_message = f.compact_nullable_string("ErrorMessage")?,
                            2 => p.last_mirrored_offset = f.i64("LastMirroredOffset")?,
                            3 => p.previous_state = f.i8("PreviousState")?,
                            4 => p.leader_epoch = f.i32("LeaderEpoch")?,
                            _ => return Ok(false),
                        }
                        Ok(true)
                    })?;
                    Ok(p)
                })?;
                r.skip_tagged_fields("TopicMetadata tags")?;
                Ok(WriteMirrorStateTopic { name, partitions })
            })?;
            let stopped_topics = r.compact_string_array("StoppedTopics")?;
            r.skip_tagged_fields("request tags")?;
            MirrorRequest::WriteMirrorStates(WriteMirrorStatesRequest {
                mirror_name,
                topics,
                stopped_topics,
            })
        }
        DELETE_CLUSTER_MIRROR => {
            let mirror_name = r.compact_string("MirrorName")?;
            let state_validation_offset = r.i64("StateValidationOffset")?;
            r.skip_tagged_fields("request tags")?;
            MirrorRequest::DeleteClusterMirror(DeleteClusterMirrorRequest {
                mirror_name,
                state_validation_offset,
            })
        }
        other => return Err(format!("api key {other} is not a mirror api key")),
    })
}

// ---------------------------------------------------------------------------------------------
// Responses
// ---------------------------------------------------------------------------------------------

fn encode_simple(buf: &mut BytesMut, resp: &SimpleMirrorResponse) {
    put_response_head(
        buf,
        resp.throttle_time_ms,
        resp.error_code,
        resp.error_message.as_deref(),
    );
    put_no_tags(buf);
}

fn decode_simple(r: &mut Reader<'_>) -> DResult<SimpleMirrorResponse> {
    let head = read_response_head(r)?;
    r.skip_tagged_fields("response tags")?;
    Ok(SimpleMirrorResponse {
        throttle_time_ms: head.throttle_time_ms,
        error_code: head.error_code,
        error_message: head.error_message,
    })
}

fn encode_topics_response(buf: &mut BytesMut, resp: &TopicsMirrorResponse) {
    put_response_head(
        buf,
        resp.throttle_time_ms,
        resp.error_code,
        resp.error_message.as_deref(),
    );
    put_compact_array(buf, &resp.topics, |b, t| {
        put_compact_string(b, &t.name);
        b.put_i16(t.error_code);
        put_compact_nullable_string(b, t.error_message.as_deref());
        put_no_tags(b);
    });
    put_no_tags(buf);
}

fn decode_topics_response(r: &mut Reader<'_>) -> DResult<TopicsMirrorResponse> {
    let head = read_response_head(r)?;
    let topics = r.compact_array("Topics", |r| {
        let name = r.compact_string("Name")?;
        let error_code = r.i16("ErrorCode")?;
        let error_message = r.compact_nullable_string("ErrorMessage")?;
        r.skip_tagged_fields("TopicResult tags")?;
        Ok(TopicResult {
            name,
            error_code,
            error_message,
        })
    })?;
    r.skip_tagged_fields("response tags")?;
    Ok(TopicsMirrorResponse {
        throttle_time_ms: head.throttle_time_ms,
        error_code: head.error_code,
        error_message: head.error_message,
        topics,
    })
}

fn encode_bump_leader_epochs_response(buf: &mut BytesMut, resp: &BumpLeaderEpochsResponse) {
    buf.put_i32(resp.throttle_time_ms);
    buf.put_i16(resp.error_code);
    put_compact_array(buf, &resp.topics, |b, t| {
        put_compact_string(b, &t.topic_name);
        put_compact_array(b, &t.partitions, |b, p| {
            b.put_i32(p.partition_index);
            b.put_i16(p.error_code);
            put_no_tags(b);
        });
        put_no_tags(b);
    });
    put_no_tags(buf);
}

fn decode_bump_leader_epochs_response(r: &mut Reader<'_>) -> DResult<BumpLeaderEpochsResponse> {
    let throttle_time_ms = r.i32("ThrottleTimeMs")?;
    let error_code = r.i16("ErrorCode")?;
    let topics = r.compact_array("Topics", |r| {
        let topic_name = r.compact_string("TopicName")?;
        let partitions = r.compact_array("Partitions", |r| {
            let partition_index = r.i32("PartitionIndex")?;
            let error_code = r.i16("ErrorCode")?;
            r.skip_tagged_fields("PartitionDetail tags")?;
            Ok(BumpLeaderEpochPartitionResult {
                partition_index,
                error_code,
            })
        })?;
        r.skip_tagged_fields("TopicPartitions tags")?;
        Ok(BumpLeaderEpochTopicResult {
            topic_name,
            partitions,
        })
    })?;
    r.skip_tagged_fields("response tags")?;
    Ok(BumpLeaderEpochsResponse {
        throttle_time_ms,
        error_code,
        topics,
    })
}

fn encode_response_body(buf: &mut BytesMut, response: &MirrorResponse) {
    match response {
        MirrorResponse::BumpLeaderEpochs(resp) => encode_bump_leader_epochs_response(buf, resp),
        MirrorResponse::CreateClusterMirror(resp) | MirrorResponse::DeleteClusterMirror(resp) => {
            encode_simple(buf, resp)
        }
        MirrorResponse::StartMirrorTopics(resp)
        | MirrorResponse::StopMirrorTopics(resp)
        | MirrorResponse::PauseMirrorTopics(resp)
        | MirrorResponse::ResumeMirrorTopics(resp) => encode_topics_response(buf, resp),
        MirrorResponse::LastMirroredOffsets(resp) => {
            put_response_head(
                buf,
                resp.throttle_time_ms,
                resp.error_code,
                resp.error_message.as_deref(),
            );
            put_compact_array(buf, &resp.topics, |b, t| {
                put_compact_string(b, &t.name);
                put_compact_array(b, &t.partitions, |b, p| {
                    b.put_i32(p.partition_index);
                    b.put_i64(p.last_mirrored_offset);
                    b.put_i16(p.error_code);
                    put_no_tags(b);
                });
                put_no_tags(b);
            });
            put_no_tags(buf);
        }
        MirrorResponse::ListClusterMirrors(resp) => {
            put_response_head(
                buf,
                resp.throttle_time_ms,
                resp.error_code,
                resp.error_message.as_deref(),
            );
            put_compact_array(buf, &resp.mirrors, |b, m| {
                put_compact_string(b, &m.mirror_name);
                put_compact_string(b, &m.source_bootstrap);
                put_compact_string(b, &m.source_cluster_id);
                b.put_i32(m.topic_count);
                put_compact_string_array(b, &m.topic_names);
                put_no_tags(b);
            });
            put_no_tags(buf);
        }
        MirrorResponse::DescribeClusterMirrors(resp) => {
            put_response_head(
                buf,
                resp.throttle_time_ms,
                resp.error_code,
                resp.error_message.as_deref(),
            );
            put_compact_array(buf, &resp.mirrors, |b, m| {
                b.put_i16(m.error_code);
                put_compact_string(b, &m.mirror_name);
                b.put_i32(m.authorized_operations);
                put_compact_array(b, &m.topics, |b, t| {
                    put_compact_string(b, &t.topic_name);
                    put_compact_array(b, &t.partitions, |b, p| {
                        b.put_i32(p.partition_index);
                        b.put_i64(p.source_offset);
                        b.put_i64(p.destination_offset);
                        b.put_i64(p.lag);
                        put_compact_string(b, &p.state_value);
                        b.put_i16(p.retry_attempt);
                        put_compact_nullable_string(b, p.error_message.as_deref());
                        put_no_tags(b);
                    });
                    put_no_tags(b);
                });
                put_no_tags(b);
            });
            let mut tags = Vec::new();
            if !resp.lookup_results.is_empty() {
                tags.push(tagged(0, |b| {
                    put_compact_array(b, &resp.lookup_results, |b, l| {
                        put_uuid(b, &l.topic_id);
                        put_compact_array(b, &l.partitions, |b, p| {
                            b.put_i32(p.partition_index);
                            b.put_i32(p.last_mirror_epoch);
                            put_no_tags(b);
                        });
                        put_no_tags(b);
                    })
                }));
            }
            put_tags(buf, &tags);
        }
        MirrorResponse::ReadMirrorStates(resp) => {
            put_response_head(
                buf,
                resp.throttle_time_ms,
                resp.error_code,
                resp.error_message.as_deref(),
            );
            put_compact_array(buf, &resp.topics, |b, t| {
                put_compact_string(b, &t.name);
                put_compact_array(b, &t.partitions, |b, p| {
                    b.put_i32(p.partition_index);
                    b.put_i32(p.last_mirror_epoch);
                    b.put_i8(p.state);
                    b.put_i16(p.error_code);
                    b.put_i8(p.previous_state);
                    b.put_i16(p.retry_attempt);
                    put_compact_nullable_string(b, p.error_message.as_deref());
                    let mut tags = Vec::new();
                    if p.last_mirrored_offset != -1 {
                        tags.push(tagged(0, |b| b.put_i64(p.last_mirrored_offset)));
                    }
                    put_tags(b, &tags);
                });
                put_no_tags(b);
            });
            put_no_tags(buf);
        }
        MirrorResponse::WriteMirrorStates(resp) => {
            put_response_head(
                buf,
                resp.throttle_time_ms,
                resp.error_code,
                resp.error_message.as_deref(),
            );
            put_compact_array(buf, &resp.topics, |b, t| {
                put_compact_string(b, &t.name);
                put_compact_array(b, &t.partitions, |b, p| {
                    b.put_i32(p.partition_index);
                    b.put_i16(p.error_code);
                    put_compact_nullable_string(b, p.error_message.as_deref());
                    put_no_tags(b);
                });
                put_no_tags(b);
            });
            put_no_tags(buf);
        }
    }
}

fn decode_response_body(api_key: i16, r: &mut Reader<'_>) -> DResult<MirrorResponse> {
    use api_keys::*;
    Ok(match api_key {
        BUMP_LEADER_EPOCHS => {
            MirrorResponse::BumpLeaderEpochs(decode_bump_leader_epochs_response(r)?)
        }
        CREATE_CLUSTER_MIRROR => MirrorResponse::CreateClusterMirror(decode_simple(r)?),
        DELETE_CLUSTER_MIRROR => MirrorResponse::DeleteClusterMirror(decode_simple(r)?),
        START_MIRROR_TOPICS => MirrorResponse::StartMirrorTopics(decode_topics_response(r)?),
        STOP_MIRROR_TOPICS => MirrorResponse::StopMirrorTopics(decode_topics_response(r)?),
        PAUSE_MIRROR_TOPICS => MirrorResponse::PauseMirrorTopics(decode_topics_response(r)?),
        RESUME_MIRROR_TOPICS => MirrorResponse::ResumeMirrorTopics(decode_topics_response(r)?),
        LAST_MIRRORED_OFFSETS => {
            let head = read_response_head(r)?;
            let topics = r.compact_array("Topics", |r| {
                let name = r.compact_string("Name")?;
                let partitions = r.compact_array("Partitions", |r| {
                    let partition_index = r.i32("PartitionIndex")?;
                    let last_mirrored_offset = r.i64("LastMirroredOffset")?;
                    let error_code = r.i16("ErrorCode")?;
                    r.skip_tagged_fields("PartitionResult tags")?;
                    Ok(LastMirroredOffsetPartition {
                        partition_index,
                        last_mirrored_offset,
                        error_code,
                    })
                })?;
                r.skip_tagged_fields("TopicResult tags")?;
                Ok(LastMirroredOffsetTopic { name, partitions })
            })?;
            r.skip_tagged_fields("response tags")?;
            MirrorResponse::LastMirroredOffsets(LastMirroredOffsetsResponse {
                throttle_time_ms: head.throttle_time_ms,
                error_code: head.error_code,
                error_message: head.error_message,
                topics,
            })
        }
        LIST_CLUSTER_MIRRORS => {
            let head = read_response_head(r)?;
            let mirrors = r.compact_array("Mirrors", |r| {
                let mirror_name = r.compact_string("MirrorName")?;
                let source_bootstrap = r.compact_string("SourceBootstrap")?;
                let source_cluster_id = r.compact_string("SourceClusterId")?;
                let topic_count = r.i32("TopicCount")?;
                let topic_names = r.compact_string_array("TopicNames")?;
                r.skip_tagged_fields("ListedMirror tags")?;
                Ok(ListedMirror {
                    mirror_name,
                    source_bootstrap,
                    source_cluster_id,
                    topic_count,
                    topic_names,
                })
            })?;
            r.skip_tagged_fields("response tags")?;
            MirrorResponse::ListClusterMirrors(ListClusterMirrorsResponse {
                throttle_time_ms: head.throttle_time_ms,
                error_code: head.error_code,
                error_message: head.error_message,
                mirrors,
            })
        }
        DESCRIBE_CLUSTER_MIRRORS => {
            let head = read_response_head(r)?;
            let mirrors = r.compact_array("Mirrors", |r| {
                let error_code = r.i16("ErrorCode")?;
                let mirror_name = r.compact_string("MirrorName")?;
                let authorized_operations = r.i32("AuthorizedOperations")?;
                let topics = r.compact_array("Topics", |r| {
                    let topic_name = r.compact_string("TopicName")?;
                    let partitions = r.compact_array("Partitions", |r| {
                        let partition_index = r.i32("PartitionIndex")?;
                        let source_offset = r.i64("SourceOffset")?;
                        let destination_offset = r.i64("DestinationOffset")?;
                        let lag = r.i64("Lag")?;
                        let state_value = r.compact_string("StateValue")?;
                        let retry_attempt = r.i16("RetryAttempt")?;
                        let error_message = r.compact_nullable_string("ErrorMessage")?;
                        r.skip_tagged_fields("PartitionDetail tags")?;
                        Ok(MirrorPartitionDetail {
                            partition_index,
                            source_offset,
                            destination_offset,
                            lag,
                            state_value,
                            retry_attempt,
                            error_message,
                        })
                    })?;
                    r.skip_tagged_fields("TopicPartitions tags")?;
                    Ok(MirrorTopicDetail {
                        topic_name,
                        partitions,
                    })
                })?;
                r.skip_tagged_fields("DescribedMirror tags")?;
                Ok(DescribedMirror {
                    error_code,
                    mirror_name,
                    authorized_operations,
                    topics,
                })
            })?;
            let mut lookup_results = Vec::new();
            r.tagged_fields("response tags", |tag, f| match tag {
                0 => {
                    lookup_results = f.compact_array("LookupResults", |r| {
                        let topic_id = r.uuid("TopicId")?;
                        let partitions = r.compact_array("Partitions", |r| {
                            let partition_index = r.i32("PartitionIndex")?;
                            let last_mirror_epoch = r.i32("LastMirrorEpoch")?;
                            r.skip_tagged_fields("PartitionResult tags")?;
                            Ok(LookupPartitionResult {
                                partition_index,
                                last_mirror_epoch,
                            })
                        })?;
                        r.skip_tagged_fields("LookupResult tags")?;
                        Ok(LookupResult {
                            topic_id,
                            partitions,
                        })
                    })?;
                    Ok(true)
                }
                _ => Ok(false),
            })?;
            MirrorResponse::DescribeClusterMirrors(DescribeClusterMirrorsResponse {
                throttle_time_ms: head.throttle_time_ms,
                error_code: head.error_code,
                error_message: head.error_message,
                mirrors,
                lookup_results,
            })
        }
        READ_MIRROR_STATES => {
            let head = read_response_head(r)?;
            let topics = r.compact_array("Topics", |r| {
                let name = r.compact_string("Name")?;
                let partitions = r.compact_array("Partitions", |r| {
                    let partition_index = r.i32("PartitionIndex")?;
                    let last_mirror_epoch = r.i32("LastMirrorEpoch")?;
                    let state = r.i8("State")?;
                    let error_code = r.i16("ErrorCode")?;
                    let previous_state = r.i8("PreviousState")?;
                    let retry_attempt = r.i16("RetryAttempt")?;
                    let error_message = r.compact_nullable_string("ErrorMessage")?;
                    let mut last_mirrored_offset = -1;
                    r.tagged_fields("PartitionResult tags", |tag, f| match tag {
                        0 => {
                            last_mirrored_offset = f.i64("LastMirroredOffset")?;
                            Ok(true)
                        }
                        _ => Ok(false),
                    })?;
                    Ok(ReadMirrorStatePartition {
                        partition_index,
                        last_mirror_epoch,
                        state,
                        error_code,
                        previous_state,
                        retry_attempt,
                        error_message,
                        last_mirrored_offset,
                    })
                })?;
                r.skip_tagged_fields("TopicResult tags")?;
                Ok(ReadMirrorStateTopic { name, partitions })
            })?;
            r.skip_tagged_fields("response tags")?;
            MirrorResponse::ReadMirrorStates(ReadMirrorStatesResponse {
                throttle_time_ms: head.throttle_time_ms,
                error_code: head.error_code,
                error_message: head.error_message,
                topics,
            })
        }
        WRITE_MIRROR_STATES => {
            let head = read_response_head(r)?;
            let topics = r.compact_array("Topics", |r| {
                let name = r.compact_string("Name")?;
                let partitions = r.compact_array("Partitions", |r| {
                    let partition_index = r.i32("PartitionIndex")?;
                    let error_code = r.i16("ErrorCode")?;
                    let error_message = r.compact_nullable_string("ErrorMessage")?;
                    r.skip_tagged_fields("PartitionResult tags")?;
                    Ok(WriteMirrorStatePartitionResult {
                        partition_index,
                        error_code,
                        error_message,
                    })
                })?;
                r.skip_tagged_fields("TopicResult tags")?;
                Ok(WriteMirrorStateTopicResult { name, partitions })
            })?;
            r.skip_tagged_fields("response tags")?;
            MirrorResponse::WriteMirrorStates(WriteMirrorStatesResponse {
                throttle_time_ms: head.throttle_time_ms,
                error_code: head.error_code,
                error_message: head.error_message,
                topics,
            })
        }
        other => return Err(format!("api key {other} is not a mirror api key")),
    })
}

// ---------------------------------------------------------------------------------------------
// Public API
// ---------------------------------------------------------------------------------------------

/// Decodes a full request frame (header + body) of a mirror api key.
pub fn decode_mirror_request(frame: Bytes) -> Result<(RequestHeader, MirrorRequest), RequestError> {
    let prefix = peek_prefix(&frame)?;
    if !(api_keys::FIRST..=api_keys::LAST).contains(&prefix.api_key) {
        return Err(RequestError::UnknownApiKey {
            api_key: prefix.api_key,
            correlation_id: prefix.correlation_id,
        });
    }
    if prefix.api_version != 0 {
        return Err(RequestError::UnsupportedVersion {
            api_key: prefix.api_key,
            version: prefix.api_version,
            correlation_id: prefix.correlation_id,
        });
    }
    let malformed = |reason: String| RequestError::Malformed {
        api_key: prefix.api_key,
        version: prefix.api_version,
        reason,
    };
    // The 8-byte prefix was checked by peek_prefix; the rest of header v2 follows.
    let mut r = Reader::new(&frame[8..]);
    let client_id = r.nullable_string("client_id").map_err(malformed)?;
    r.skip_tagged_fields("request header tags")
        .map_err(malformed)?;
    let body = decode_request_body(prefix.api_key, &mut r).map_err(malformed)?;
    let header = RequestHeader::default()
        .with_request_api_key(prefix.api_key)
        .with_request_api_version(prefix.api_version)
        .with_correlation_id(prefix.correlation_id)
        .with_client_id(client_id.map(StrBytes::from_string));
    Ok((header, body))
}

/// Encodes a response (response header v1 + body, without the 4-byte size prefix).
pub fn encode_mirror_response(correlation_id: i32, response: &MirrorResponse) -> BytesMut {
    let mut buf = BytesMut::with_capacity(64);
    buf.put_i32(correlation_id);
    put_no_tags(&mut buf);
    encode_response_body(&mut buf, response);
    buf
}

/// Encodes a request (request header v2 + body, without the size prefix).
pub fn encode_mirror_request(
    correlation_id: i32,
    client_id: &str,
    request: &MirrorRequest,
) -> BytesMut {
    let mut buf = BytesMut::with_capacity(64);
    buf.put_i16(request.api_key());
    buf.put_i16(0);
    buf.put_i32(correlation_id);
    // A classic int16-length string: a client id past i16::MAX bytes is cut at a char boundary.
    let mut end = client_id.len().min(i16::MAX as usize);
    while !client_id.is_char_boundary(end) {
        end -= 1;
    }
    buf.put_i16(end as i16);
    buf.put_slice(&client_id.as_bytes()[..end]);
    put_no_tags(&mut buf);
    encode_request_body(&mut buf, request);
    buf
}

/// Decodes a response body (after the response header) of api key `api_key`.
pub fn decode_mirror_response(api_key: i16, body: Bytes) -> Result<MirrorResponse, String> {
    let mut r = Reader::new(&body);
    decode_response_body(api_key, &mut r)
        .map_err(|e| format!("malformed response of api key {api_key}: {e}"))
}

#[cfg(test)]
#[path = "codec_tests.rs"]
mod tests;
