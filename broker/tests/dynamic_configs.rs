//! Dynamic broker configs: IncrementalAlterConfigs and AlterConfigs on a broker resource change
//! the broker defaults of topic configs without a restart, survive one, and refuse what Tern
//! cannot change at runtime with Kafka's error codes.

mod support;

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::DescribeConfigsRequest;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use support::*;
use tern_protocol::client::KafkaConnection;

const BROKER: i8 = 4;
const TOPIC: i8 = 2;

/// One IncrementalAlterConfigs on broker `name`: (key, op, value); answers (error code, message).
async fn alter(
    c: &mut KafkaConnection,
    name: &str,
    ops: &[(&str, i8, Option<&str>)],
) -> (i16, Option<String>) {
    incremental_alter(c, BROKER, name, ops).await
}

/// (value, source) of `key` on a resource.
async fn described(
    c: &mut KafkaConnection,
    kind: i8,
    name: &str,
    key: &str,
) -> (Option<String>, i8) {
    let req =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(StrBytes::from_string(name.to_string()))
            .with_configuration_keys(Some(vec![StrBytes::from_string(key.to_string())]))]);
    let r = c.send(&req, 4).await.unwrap();
    assert_eq!(r.results[0].error_code, 0, "{name}");
    let e = r.results[0]
        .configs
        .first()
        .unwrap_or_else(|| panic!("{key} not described"));
    (e.value.as_ref().map(|v| v.to_string()), e.config_source)
}

fn big_batch() -> bytes::Bytes {
    let mut b = tern_protocol::records::RecordBatchBuilder::new(
        tern_protocol::record_batch::Compression::None,
    );
    b.push(1_000, None, Some(&vec![7u8; 4000]), &[]).unwrap();
    b.build().unwrap()
}

async fn produce_code(c: &mut KafkaConnection, topic: &str) -> i16 {
    produce(c, topic, 0, big_batch()).await.responses[0].partition_responses[0].error_code
}

#[tokio::test]
async fn broker_defaults_of_topic_configs_change_without_a_restart_and_survive_one() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_in(dir.path(), &[]).await;
    let mut c = KafkaConnection::connect(server.local_addrs[0], "t")
        .await
        .unwrap();
    create_topic(&mut c, "t", 1, &[]).await;
    assert_eq!(produce_code(&mut c, "t").await, 0);

    // The cluster-wide default: a 4 KB record no longer fits, at once.
    assert_eq!(
        alter(&mut c, "", &[("message.max.bytes", 0, Some("2000"))])
            .await
            .0,
        0
    );
    assert_eq!(
        produce_code(&mut c, "t").await,
        ResponseError::MessageTooLarge.code()
    );
    assert_eq!(
        described(&mut c, TOPIC, "t", "max.message.bytes").await,
        (Some("2000".into()), 3),
        "DYNAMIC_DEFAULT_BROKER_CONFIG"
    );
    assert_eq!(
        described(&mut c, BROKER, "", "message.max.bytes").await,
        (Some("2000".into()), 3)
    );
    // This broker's own value wins over the default.
    assert_eq!(
        alter(&mut c, "1", &[("message.max.bytes", 0, Some("9000"))])
            .await
            .0,
        0
    );
    assert_eq!(produce_code(&mut c, "t").await, 0);
    assert_eq!(
        described(&mut c, BROKER, "1", "message.max.bytes").await,
        (Some("9000".into()), 2),
        "DYNAMIC_BROKER_CONFIG"
    );
    server.shutdown().await.unwrap();

    // Stored in the metadata log: after a restart the broker's value still applies; removing it
    // brings back the cluster default.
    let server = start_in(dir.path(), &[]).await;
    let mut c = KafkaConnection::connect(server.local_addrs[0], "t")
        .await
        .unwrap();
    assert_eq!(
        described(&mut c, TOPIC, "t", "max.message.bytes").await,
        (Some("9000".into()), 2)
    );
    assert_eq!(
        alter(&mut c, "1", &[("message.max.bytes", 1, None)])
            .await
            .0,
        0
    );
    assert_eq!(
        produce_code(&mut c, "t").await,
        ResponseError::MessageTooLarge.code()
    );
    assert_eq!(
        alter(&mut c, "", &[("message.max.bytes", 1, None)]).await.0,
        0
    );
    assert_eq!(produce_code(&mut c, "t").await, 0);
    assert_eq!(
        described(&mut c, TOPIC, "t", "max.message.bytes").await,
        (Some("1048588".into()), 5),
        "DEFAULT_CONFIG again"
    );
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn settings_that_cannot_change_at_runtime_are_refused_with_kafkas_codes() {
    let s = TestServer::start().await;
    let mut c = s.connect().await;
    let invalid_request = ResponseError::InvalidRequest.code();
    // Read-only in Kafka too.
    let (code, msg) = alter(&mut c, "", &[("num.partitions", 0, Some("3"))]).await;
    assert_eq!(code, invalid_request, "{msg:?}");
    // Dynamic in Kafka, read only at start by Tern: refused, not stored and ignored.
    let (code, msg) = alter(&mut c, "1", &[("listeners", 0, Some("PLAINTEXT://:9093"))]).await;
    assert_eq!(code, invalid_request);
    assert!(msg.unwrap().contains("only at start"));
    // Dynamic, but not below Kafka's least value.
    let (code, msg) = alter(&mut c, "1", &[("num.replica.fetchers", 0, Some("0"))]).await;
    assert_eq!(code, invalid_request);
    assert!(msg.unwrap().contains("at least 1"));
    // A bad value; a name nobody knows is stored, as Kafka stores it.
    let (code, _) = alter(&mut c, "", &[("log.retention.ms", 0, Some("soon"))]).await;
    assert_eq!(code, invalid_request);
    let (code, _) = alter(&mut c, "", &[("plugin.custom.setting", 0, Some("1"))]).await;
    assert_eq!(code, 0);
    // A broker id that is not registered, and one that is not a number (Kafka's message).
    assert_eq!(
        alter(&mut c, "7", &[("log.retention.ms", 0, Some("1000"))])
            .await
            .0,
        invalid_request
    );
    let (code, msg) = alter(&mut c, "one", &[("log.retention.ms", 0, Some("1000"))]).await;
    assert_eq!(code, invalid_request);
    assert_eq!(
        msg.as_deref(),
        Some("Node id must be an integer, but it is: one")
    );
    // Removing what is not set is a no-op (kafka-reassign-partitions.sh clears throttle rates).
    assert_eq!(
        alter(
            &mut c,
            "1",
            &[("leader.replication.throttled.rate", 1, None)]
        )
        .await
        .0,
        0
    );
    // Nothing was stored.
    let (value, source) = described(&mut c, BROKER, "1", "num.replica.fetchers").await;
    assert_eq!((value.as_deref(), source), (Some("1"), 5));
    // TLS stores change per listener and per broker, as in Kafka.
    let (code, msg) = alter(&mut c, "1", &[("ssl.keystore.location", 0, Some("/k.pem"))]).await;
    assert_eq!(code, invalid_request);
    assert!(msg.unwrap().contains("only per-listener"));
    let key = "listener.name.ssl.ssl.keystore.location";
    let (code, msg) = alter(&mut c, "", &[(key, 0, Some("/k.pem"))]).await;
    assert_eq!(code, invalid_request);
    assert!(msg.unwrap().contains("broker id must be specified"));
    // On a broker without TLS listeners there is nothing to load: stored.
    assert_eq!(alter(&mut c, "1", &[(key, 0, Some("/k.pem"))]).await.0, 0);
    // A thread count moves by at most half or double the one in force.
    let (code, msg) = alter(&mut c, "1", &[("num.replica.fetchers", 0, Some("3"))]).await;
    assert_eq!(code, invalid_request);
    assert_eq!(
        msg.as_deref(),
        Some(
            "Dynamic thread count update validation failed for num.replica.fetchers=3, value \
             should not be greater than double the current value 1"
        )
    );
}

/// Whether a new connection is served: ApiVersions answered.
async fn served(s: &TestServer) -> bool {
    let Ok(mut c) = KafkaConnection::connect(s.addr(), "t").await else {
        return false;
    };
    c.send(&kafka_protocol::messages::ApiVersionsRequest::default(), 3)
        .await
        .is_ok()
}

#[tokio::test]
async fn max_connections_changes_without_a_restart() {
    let s = TestServer::start().await;
    let mut c = s.connect().await;
    let (code, msg) = alter(&mut c, "1", &[("max.connections", 0, Some("-1"))]).await;
    assert_eq!(code, ResponseError::InvalidRequest.code());
    assert_eq!(
        msg.as_deref(),
        Some("Invalid value -1 for configuration max.connections: Value must be at least 0")
    );
    // Two at most: this connection and one more.
    assert_eq!(
        alter(&mut c, "1", &[("max.connections", 0, Some("2"))])
            .await
            .0,
        0
    );
    let (value, source) = described(&mut c, BROKER, "1", "max.connections").await;
    assert_eq!((value.as_deref(), source), (Some("2"), 2));
    let second = s.connect().await;
    assert!(!served(&s).await, "a third connection is closed at once");
    // Connections that close give their place back; a higher limit lets more in.
    drop(second);
    wait_until("the second connection's place", async || {
        if served(&s).await {
            Ok(())
        } else {
            Err("refused".to_string())
        }
    })
    .await;
    assert_eq!(
        alter(&mut c, "", &[("max.connections", 0, Some("100"))])
            .await
            .0,
        0
    );
    assert_eq!(
        alter(&mut c, "1", &[("max.connections", 1, None)]).await.0,
        0
    );
    let held: Vec<KafkaConnection> = answered_connections(&s, 5).await;
    assert_eq!(held.len(), 5);
    assert!(served(&s).await);
}

/// `n` connections that each got an answer.
async fn answered_connections(s: &TestServer, n: usize) -> Vec<KafkaConnection> {
    let mut out = Vec::new();
    for _ in 0..n {
        let mut c = s.connect().await;
        c.send(&kafka_protocol::messages::ApiVersionsRequest::default(), 3)
            .await
            .unwrap();
        out.push(c);
    }
    out
}

#[tokio::test]
async fn log_cleaner_settings_change_without_a_restart() {
    let s = TestServer::start().await;
    let mut c = s.connect().await;
    let cleaner = s.server.broker.cleaner.clone().expect("log.cleaner.enable");
    assert_eq!(cleaner.threads(), 1);
    let invalid_request = ResponseError::InvalidRequest.code();
    // Kafka's checks and messages.
    let (code, msg) = alter(&mut c, "", &[("log.cleaner.threads", 0, Some("5"))]).await;
    assert_eq!(code, invalid_request);
    assert_eq!(
        msg.as_deref(),
        Some(
            "Invalid value org.apache.kafka.common.config.ConfigException: Log cleaner threads \
             cannot be increased to more than double the current value 1 for configuration \
             Invalid dynamic configuration"
        )
    );
    let (code, msg) = alter(&mut c, "", &[("log.cleaner.enable", 0, Some("false"))]).await;
    assert_eq!(code, invalid_request);
    assert_eq!(
        msg.as_deref(),
        Some("Cannot update these configs dynamically: [log.cleaner.enable]")
    );
    let (code, msg) = alter(&mut c, "1", &[("log.cleaner.backoff.ms", 0, Some("-1"))]).await;
    assert_eq!(code, invalid_request);
    assert_eq!(
        msg.as_deref(),
        Some("Invalid value -1 for configuration log.cleaner.backoff.ms: Value must be at least 0")
    );
    let factor = "log.cleaner.io.buffer.load.factor";
    let (code, msg) = alter(&mut c, "1", &[(factor, 0, Some("abc"))]).await;
    assert_eq!(code, invalid_request);
    assert_eq!(
        msg.as_deref(),
        Some("Invalid value abc for configuration log.cleaner.io.buffer.load.factor: Not a number of type DOUBLE")
    );
    let (code, msg) = alter(
        &mut c,
        "",
        &[
            ("log.cleaner.threads", 0, Some("2")),
            ("log.cleaner.dedupe.buffer.size", 0, Some("1000")),
        ],
    )
    .await;
    assert_eq!(code, invalid_request);
    assert_eq!(
        msg.as_deref(),
        Some(
            "requirement failed: log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner \
             thread."
        )
    );
    assert_eq!(cleaner.threads(), 1, "nothing refused was applied");
    // Taken at once: two threads, a shorter backoff and an I/O budget.
    let ok = alter(
        &mut c,
        "",
        &[
            ("log.cleaner.threads", 0, Some("2")),
            ("log.cleaner.backoff.ms", 0, Some("100")),
        ],
    )
    .await;
    assert_eq!(ok.0, 0, "{ok:?}");
    let rate = "log.cleaner.io.max.bytes.per.second";
    assert_eq!(alter(&mut c, "1", &[(rate, 0, Some("1048576"))]).await.0, 0);
    wait_until("the cleaner takes the settings", async || {
        let config = cleaner.config();
        if cleaner.threads() == 2
            && config.backoff_ms == 100
            && config.max_io_bytes_per_second == 1048576.0
        {
            Ok(())
        } else {
            Err(format!("{} threads, {config:?}", cleaner.threads()))
        }
    })
    .await;
    let (value, source) = described(&mut c, BROKER, "1", "log.cleaner.threads").await;
    assert_eq!(
        (value.as_deref(), source),
        (Some("2"), 3),
        "dynamic default"
    );
    // The broker's own value goes; the cluster-wide default is back in force.
    assert_eq!(alter(&mut c, "1", &[(rate, 1, None)]).await.0, 0);
    wait_until("the I/O budget is lifted", async || {
        let rate = cleaner.config().max_io_bytes_per_second;
        (rate == f64::MAX).then_some(()).ok_or(format!("{rate}"))
    })
    .await;
}
