//! A request frame (the bytes after the size prefix) through what `connection.rs` does with
//! it before a handler needs the broker: every key (the mirror RPCs' too) through
//! `decode_request` with the broker's supported versions, ApiVersions answered and
//! encoded, a produce request's records through the produce checks and the log's validation,
//! SASL/SCRAM tokens through the server side of the exchange.

#![no_main]

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, RequestHeader, RequestKind, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;
use libfuzzer_sys::fuzz_target;
use tern_broker::fuzzing::{api_versions, is_supported, SUPPORTED_APIS};
use tern_fuzz::seeds::{self, Seed};
use tern_protocol::api::{
    decode_request, encode_request, encode_response, peek_prefix, RequestError,
};
use tern_protocol::sasl::scram::{ScramCredential, ScramMechanism, ScramServer, ScramStep};

fuzz_target!(init: seeds::write_if_asked(make_seeds), |data: &[u8]| run(data));

fn run(data: &[u8]) {
    let frame = Bytes::copy_from_slice(data);
    // As the connection loop: a frame whose header prefix does not parse is dropped first.
    if peek_prefix(&frame).is_err() {
        return;
    }
    let req = match decode_request(frame, is_supported) {
        Ok(req) => req,
        Err(RequestError::UnsupportedVersion {
            api_key,
            correlation_id,
            ..
        }) if api_key == ApiKey::ApiVersions as i16 => {
            encode_response(correlation_id, 0, &api_versions::unsupported_version())
                .expect("the v0 ApiVersions answer encodes");
            return;
        }
        Err(_) => return,
    };
    let version = req.header.request_api_version;
    let correlation_id = req.header.correlation_id;
    match req.body {
        RequestKind::ApiVersions(r) => {
            // A v5 request may name a cluster and node: the answer encodes whichever way it goes.
            let response = ResponseKind::ApiVersions(api_versions::handle(
                r,
                version,
                "fuzz-cluster",
                1,
            ));
            encode_response(correlation_id, version, &response)
                .expect("an ApiVersions answer encodes at every supported version");
        }
        RequestKind::Produce(p) => {
            // The correlation id's low byte picks the topic's configs.
            let policy = tern_fuzz::policy_from(correlation_id as u8);
            for topic in &p.topic_data {
                for partition in &topic.partition_data {
                    if let Some(records) = &partition.records {
                        tern_fuzz::produce(records, policy);
                    }
                }
            }
        }
        RequestKind::SaslAuthenticate(r) => scram(&r.auth_bytes),
        _ => {}
    }
}

/// The server side of a SCRAM exchange: the token up to a 0xff byte (never in UTF-8) is the
/// client-first message, the rest the client-final one.
fn scram(token: &[u8]) {
    let (first, last) = match token.iter().position(|b| *b == 0xff) {
        Some(i) => (&token[..i], Some(&token[i + 1..])),
        None => (token, None),
    };
    let mechanism = ScramMechanism::Sha256;
    let credential =
        ScramCredential::from_salted_password(mechanism, b"salted-password", b"salt", 4096);
    let lookup = |user: &str| (user == "alice").then(|| credential.clone());
    let mut server = ScramServer::new(mechanism);
    if let (Ok(ScramStep::Challenge(_)), Some(last)) = (server.step(first, lookup), last) {
        let _ = server.step(last, lookup);
    }
}

/// A frame: header then body, as a client sends it (without the size prefix).
fn frame(key: ApiKey, version: i16, correlation_id: i32, body: &RequestKind) -> Option<Vec<u8>> {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("fuzz")));
    encode_request(&header, key, body).ok().map(|b| b.to_vec())
}

/// An empty request of `key`.
fn empty_request(key: ApiKey) -> Option<RequestKind> {
    macro_rules! empty {
        ($($name:ident),* $(,)?) => {
            match key {
                $(ApiKey::$name => Some(RequestKind::$name(Default::default())),)*
                _ => None,
            }
        };
    }
    empty!(
        Produce,
        Fetch,
        ListOffsets,
        Metadata,
        ApiVersions,
        CreateTopics,
        DeleteTopics,
        DeleteRecords,
        InitProducerId,
        AddPartitionsToTxn,
        AddOffsetsToTxn,
        EndTxn,
        WriteTxnMarkers,
        TxnOffsetCommit,
        DescribeProducers,
        DescribeTransactions,
        ListTransactions,
        OffsetForLeaderEpoch,
        DescribeConfigs,
        AlterConfigs,
        CreatePartitions,
        IncrementalAlterConfigs,
        DescribeCluster,
        DescribeQuorum,
        FindCoordinator,
        JoinGroup,
        SyncGroup,
        Heartbeat,
        LeaveGroup,
        OffsetCommit,
        OffsetFetch,
        OffsetDelete,
        ListGroups,
        DescribeGroups,
        DeleteGroups,
        DescribeTopicPartitions,
        SaslHandshake,
        SaslAuthenticate,
        DescribeClientQuotas,
        DescribeUserScramCredentials,
        AlterUserScramCredentials,
        DescribeAcls,
        CreateAcls,
        DeleteAcls,
        ElectLeaders,
        AlterPartitionReassignments,
        ListPartitionReassignments,
        DescribeLogDirs,
        AlterReplicaLogDirs,
        ListConfigResources,
    )
}

/// An empty request of every supported key at every supported version, the record-batch
/// fixtures in produce requests of every version, SCRAM tokens, mirror requests, and an
/// ApiVersions of a version Tern does not offer.
fn make_seeds() -> Vec<Seed> {
    use kafka_protocol::messages::produce_request::{
        PartitionProduceData, ProduceRequest, TopicProduceData,
    };
    use kafka_protocol::messages::{SaslAuthenticateRequest, TopicName};

    let mut out = Vec::new();
    for &(key, min, max) in SUPPORTED_APIS {
        let body = empty_request(key).expect("every supported key has an empty request");
        for version in min..=max {
            if let Some(f) = frame(key, version, 0, &body) {
                out.push((format!("{key:?}_v{version}"), f));
            }
        }
    }
    let (min, max) = (3i16, 13i16);
    for (i, (name, batch)) in seeds::fixture_batches().into_iter().enumerate() {
        let version = min + (i as i16 % (max - min + 1));
        let partition = PartitionProduceData::default()
            .with_index(0)
            .with_records(Some(Bytes::from(batch)));
        let mut topic = TopicProduceData::default().with_partition_data(vec![partition]);
        if version >= 13 {
            topic.topic_id = uuid::Uuid::from_u128(1);
        } else {
            topic.name = TopicName(StrBytes::from_static_str("t"));
        }
        let body = RequestKind::Produce(
            ProduceRequest::default()
                .with_acks(-1)
                .with_timeout_ms(1000)
                .with_topic_data(vec![topic]),
        );
        // Correlation ids spread the fixtures over the policies `policy_from` picks.
        if let Some(f) = frame(ApiKey::Produce, version, i as i32 * 37, &body) {
            out.push((format!("Produce_v{version}_{name}"), f));
        }
    }
    let mut token = b"n,,n=alice,r=rOprNGfwEbeRWgbNEkqO".to_vec();
    token.push(0xff);
    token.extend_from_slice(b"c=biws,r=rOprNGfwEbeRWgbNEkqOnonce,p=dHpbzMQDHvOtE4ZnQHbcug==");
    let body = RequestKind::SaslAuthenticate(
        SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token)),
    );
    if let Some(f) = frame(ApiKey::SaslAuthenticate, 2, 0, &body) {
        out.push(("SaslAuthenticate_scram".into(), f));
    }
    let body = RequestKind::ApiVersions(ApiVersionsRequest::default());
    let mut unsupported = frame(ApiKey::ApiVersions, 3, 0, &body).expect("ApiVersions v3");
    unsupported[2..4].copy_from_slice(&9i16.to_be_bytes());
    out.push(("ApiVersions_v9".into(), unsupported));
    for key in 94i16..=105 {
        // A mirror request with an empty body: header v2 (client id, no tags).
        let mut f = BytesMut::new();
        f.put_i16(key);
        f.put_i16(0);
        f.put_i32(0);
        f.put_i16(4);
        f.put_slice(b"fuzz");
        f.put_u8(0);
        out.push((format!("mirror_{key}_header_only"), f.to_vec()));
    }
    out
}
