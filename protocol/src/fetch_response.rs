//! Fetch responses whose records stay in log files until they are written to the socket.
//!
//! The response is encoded by kafka-protocol's own encoder, every version alike. A partition
//! whose records come from a file carries [`records_hole`] as its records; the encoding buffer
//! recognises that marker when the encoder copies it, writes the length prefix of the real
//! records instead, and notes where their bytes belong. The frame is then the encoded bytes
//! with each hole filled by its file range, in order.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{FetchResponse, ResponseHeader};
use kafka_protocol::protocol::buf::ByteBufMut;
use kafka_protocol::protocol::{Encodable, HeaderVersion};

/// The marker's one byte. A static has one address, which no other records share.
static HOLE_MARKER: [u8; 1] = [0];

/// Records that mark a hole: set as a partition's `records`, their real bytes are spliced in
/// by the writer; their length is given to [`encode_fetch_response`].
pub fn records_hole() -> Bytes {
    Bytes::from_static(&HOLE_MARKER)
}

/// Whether `records` is the marker of [`records_hole`].
pub fn is_records_hole(records: &[u8]) -> bool {
    std::ptr::eq(records.as_ptr(), HOLE_MARKER.as_ptr()) && records.len() == HOLE_MARKER.len()
}

/// An encoded response frame body with holes: the records of the `i`th hole go at byte
/// `holes[i]` of `bytes` (offsets ascending).
#[derive(Debug)]
pub struct SplicedBody {
    /// Header and response, without the records of the holes.
    pub bytes: BytesMut,
    /// Where each hole's records go, in hole order.
    pub holes: Vec<usize>,
}

/// Encodes a Fetch response with its header. Partitions whose records are [`records_hole`]
/// get the length prefix of `hole_lens[i]` bytes (the `i`th hole in encoding order: topics,
/// then their partitions) and a hole in the output.
pub fn encode_fetch_response(
    correlation_id: i32,
    version: i16,
    response: &FetchResponse,
    hole_lens: &[usize],
) -> Result<SplicedBody, String> {
    let mut out = HoleBuf {
        buf: BytesMut::new(),
        holes: Vec::with_capacity(hole_lens.len()),
        lens: hole_lens,
        // Fetch v12 and later use compact (varint) lengths for records.
        flexible: version >= 12,
        error: None,
    };
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut out, FetchResponse::header_version(version))
        .map_err(|e| e.to_string())?;
    response
        .encode(&mut out, version)
        .map_err(|e| e.to_string())?;
    if let Some(e) = out.error {
        return Err(e);
    }
    if out.holes.len() != hole_lens.len() {
        return Err(format!(
            "{} record holes encoded, {} lengths given",
            out.holes.len(),
            hole_lens.len()
        ));
    }
    Ok(SplicedBody {
        bytes: out.buf,
        holes: out.holes,
    })
}

/// The encoding buffer that turns each hole marker into a length prefix and a noted offset.
struct HoleBuf<'a> {
    buf: BytesMut,
    holes: Vec<usize>,
    lens: &'a [usize],
    flexible: bool,
    error: Option<String>,
}

impl HoleBuf<'_> {
    /// The encoder has just written the prefix for the marker's one byte; replace it with the
    /// prefix of the hole's real length.
    fn hole(&mut self) {
        let Some(&len) = self.lens.get(self.holes.len()) else {
            self.error = Some("more record holes than lengths given".into());
            return;
        };
        let (marker_prefix, real_prefix): (&[u8], Vec<u8>) = if self.flexible {
            (&[2], unsigned_varint(len as u64 + 1))
        } else {
            match i32::try_from(len) {
                Ok(l) => (&[0, 0, 0, 1], l.to_be_bytes().to_vec()),
                Err(_) => {
                    self.error = Some(format!("records of {len} bytes"));
                    return;
                }
            }
        };
        if !self.buf.ends_with(marker_prefix) {
            self.error = Some("a record hole without its length prefix".into());
            return;
        }
        self.buf.truncate(self.buf.len() - marker_prefix.len());
        self.buf.extend_from_slice(&real_prefix);
        self.holes.push(self.buf.len());
    }
}

fn unsigned_varint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(5);
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
    out
}

// SAFETY: every method forwards to the inner BytesMut, which upholds BufMut's contract; only
// put_slice differs, and it writes through the inner buffer's safe methods.
#[allow(unsafe_code)]
unsafe impl BufMut for HoleBuf<'_> {
    fn remaining_mut(&self) -> usize {
        self.buf.remaining_mut()
    }

    unsafe fn advance_mut(&mut self, cnt: usize) {
        // SAFETY: the caller's guarantee (cnt bytes of chunk_mut initialised) is passed on to
        // the same buffer that handed out the chunk.
        unsafe { self.buf.advance_mut(cnt) }
    }

    fn chunk_mut(&mut self) -> &mut bytes::buf::UninitSlice {
        self.buf.chunk_mut()
    }

    fn put_slice(&mut self, src: &[u8]) {
        if is_records_hole(src) {
            self.hole();
        } else {
            self.buf.put_slice(src);
        }
    }
}

impl ByteBufMut for HoleBuf<'_> {
    fn offset(&self) -> usize {
        self.buf.len()
    }

    fn seek(&mut self, offset: usize) {
        self.buf.resize(offset, 0);
    }

    fn range(&mut self, r: std::ops::Range<usize>) -> &mut [u8] {
        &mut self.buf[r]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::encode_response;
    use kafka_protocol::messages::fetch_response::{
        AbortedTransaction, EpochEndOffset, FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint,
        PartitionData,
    };
    use kafka_protocol::messages::{BrokerId, ProducerId, ResponseKind, TopicName};
    use kafka_protocol::protocol::StrBytes;

    /// A response with what each version can carry: two topics, tagged fields, aborted
    /// transactions, and records of every size class a varint prefix has.
    fn response(version: i16, records: &[Option<Bytes>]) -> FetchResponse {
        let mut records = records.iter().cloned();
        let mut topics = Vec::new();
        for t in 0..2 {
            let mut topic = FetchableTopicResponse::default();
            if version >= 13 {
                topic.topic_id = uuid::Uuid::from_u128(t as u128 + 7);
            } else {
                topic.topic = TopicName(StrBytes::from_string(format!("topic-{t}")));
            }
            for p in 0..3 {
                let mut d = PartitionData::default()
                    .with_partition_index(p)
                    .with_high_watermark(1000 + p as i64)
                    .with_last_stable_offset(900)
                    .with_log_start_offset(3)
                    .with_aborted_transactions(Some(vec![AbortedTransaction::default()
                        .with_producer_id(ProducerId(42))
                        .with_first_offset(17)]))
                    .with_records(records.next().flatten());
                if version >= 11 {
                    d = d.with_preferred_read_replica(BrokerId(-1));
                }
                if version >= 12 && p == 1 {
                    d = d
                        .with_diverging_epoch(
                            EpochEndOffset::default().with_epoch(4).with_end_offset(77),
                        )
                        .with_current_leader(
                            LeaderIdAndEpoch::default()
                                .with_leader_id(BrokerId(2))
                                .with_leader_epoch(5),
                        );
                }
                topic.partitions.push(d);
            }
            topics.push(topic);
        }
        let mut r = FetchResponse::default().with_responses(topics);
        if version >= 7 {
            r = r.with_session_id(12345);
        }
        if version >= 16 {
            r = r.with_node_endpoints(vec![NodeEndpoint::default()
                .with_node_id(BrokerId(2))
                .with_host(StrBytes::from_static_str("127.0.0.2"))
                .with_port(9092)]);
        }
        r
    }

    /// Fills each hole with its records, as the writer does.
    fn splice(body: &SplicedBody, fills: &[Bytes]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut at = 0;
        for (&hole, fill) in body.holes.iter().zip(fills) {
            out.extend_from_slice(&body.bytes[at..hole]);
            out.extend_from_slice(fill);
            at = hole;
        }
        out.extend_from_slice(&body.bytes[at..]);
        out
    }

    #[test]
    fn spliced_frames_equal_kafka_protocol_encoding_at_every_version() {
        // None, empty, one byte, and lengths around the varint steps (127/128, 16383/16384).
        let sizes = [None, Some(0), Some(1), Some(126), Some(127), Some(16_383)];
        let data: Vec<Option<Bytes>> = sizes
            .iter()
            .map(|s| s.map(|n| Bytes::from((0..n).map(|i| i as u8).collect::<Vec<u8>>())))
            .collect();
        for version in 4..=18 {
            let expected =
                encode_response(99, version, &ResponseKind::Fetch(response(version, &data)))
                    .unwrap();
            // Every non-empty records value becomes a hole.
            let holed: Vec<Option<Bytes>> = data
                .iter()
                .map(|d| match d {
                    Some(b) if !b.is_empty() => Some(records_hole()),
                    other => other.clone(),
                })
                .collect();
            let fills: Vec<Bytes> = data
                .iter()
                .flatten()
                .filter(|b| !b.is_empty())
                .cloned()
                .collect();
            let lens: Vec<usize> = fills.iter().map(Bytes::len).collect();
            let body =
                encode_fetch_response(99, version, &response(version, &holed), &lens).unwrap();
            assert_eq!(body.holes.len(), 4, "v{version}");
            assert_eq!(splice(&body, &fills), expected.to_vec(), "v{version}");
        }
    }

    #[test]
    fn hole_lengths_must_match_the_holes() {
        let holed = vec![Some(records_hole()), Some(records_hole())];
        let r = response(12, &holed);
        assert!(encode_fetch_response(1, 12, &r, &[10])
            .unwrap_err()
            .contains("more record holes"));
        assert!(encode_fetch_response(1, 12, &r, &[10, 20, 30])
            .unwrap_err()
            .contains("2 record holes encoded, 3 lengths given"));
        let ok = encode_fetch_response(1, 12, &r, &[10, 20]).unwrap();
        assert_eq!(ok.holes.len(), 2);
        assert!(ok.holes[0] < ok.holes[1]);
    }

    #[test]
    fn only_the_marker_itself_is_a_hole() {
        assert!(is_records_hole(&records_hole()));
        assert!(!is_records_hole(&[0]));
        assert!(!is_records_hole(&Bytes::from_static(&[0])));
    }
}
