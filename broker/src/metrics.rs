//! Prometheus metrics, named after Kafka's JMX beans as the Prometheus JMX exporter renders them
//! (`kafka_server_brokertopicmetrics_messagesin_total{topic}` ...), so existing Kafka dashboards
//! work with little change, and the mirror's own (`tern_mirror_*`). Counters are kept as requests
//! pass; gauges are read from the broker's state at each scrape.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use kafka_protocol::messages::ApiKey;
use kafka_protocol::messages::DescribeClusterMirrorsRequest;
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::broker::Broker;

type Labels = Vec<(String, String)>;

fn topic(t: &str) -> Labels {
    vec![("topic".to_string(), t.to_string())]
}

/// An API by its key: the label value is its name, written only when a scrape encodes it, so
/// counting a request allocates nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ApiName(pub i16);

impl EncodeLabelValue for ApiName {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> std::fmt::Result {
        // The mirror RPCs are ApiKey variants too, named as Kafka names its own.
        match ApiKey::try_from(self.0) {
            Ok(k) => write!(encoder, "{k:?}"),
            Err(()) => write!(encoder, "{}", self.0),
        }
    }
}

type RequestLabels = [(&'static str, ApiName); 1];

fn request_labels(api_key: i16) -> RequestLabels {
    [("request", ApiName(api_key))]
}

/// Request latency buckets in milliseconds: 0.25 ms to about 16 s.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.25, 2.0, 17))
}

/// An open client connection: counted while it lives.
pub struct OpenConnection(Gauge);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// The broker's counters.
pub struct Metrics {
    messages_in: Family<Labels, Counter>,
    bytes_in: Family<Labels, Counter>,
    bytes_out: Family<Labels, Counter>,
    requests: Family<RequestLabels, Counter>,
    request_time_ms: Family<RequestLabels, Histogram, fn() -> Histogram>,
    connections: Family<Labels, Gauge>,
    connections_created: Family<Labels, Counter>,
    isr_shrinks: Counter,
    isr_expands: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            messages_in: Family::default(),
            bytes_in: Family::default(),
            bytes_out: Family::default(),
            requests: Family::default(),
            request_time_ms: Family::new_with_constructor(latency_histogram),
            connections: Family::default(),
            connections_created: Family::default(),
            isr_shrinks: Counter::default(),
            isr_expands: Counter::default(),
        }
    }
}

impl Metrics {
    /// Records appended by Produce to a topic, and their bytes.
    pub fn produced(&self, t: &str, records: u64, bytes: u64) {
        self.messages_in.get_or_create(&topic(t)).inc_by(records);
        self.bytes_in.get_or_create(&topic(t)).inc_by(bytes);
    }

    /// Bytes a consumer Fetch returned from a topic.
    pub fn fetched(&self, t: &str, bytes: u64) {
        if bytes > 0 {
            self.bytes_out.get_or_create(&topic(t)).inc_by(bytes);
        }
    }

    /// One request of this API received.
    pub fn request(&self, api_key: i16) {
        self.requests.get_or_create(&request_labels(api_key)).inc();
    }

    /// One request of this API answered `took` after it was read.
    pub fn request_done(&self, api_key: i16, took: Duration) {
        self.request_time_ms
            .get_or_create(&request_labels(api_key))
            .observe(took.as_secs_f64() * 1000.0);
    }

    /// A client connected to `listener`; it counts as open until the result is dropped.
    pub fn connection_opened(&self, listener: &str) -> OpenConnection {
        let labels = vec![("listener".to_string(), listener.to_string())];
        self.connections_created.get_or_create(&labels).inc();
        let gauge = self.connections.get_or_create(&labels).clone();
        gauge.inc();
        OpenConnection(gauge)
    }

    /// The ISR of a partition led here changed from `old_len` to `new_len` replicas.
    pub fn isr_changed(&self, old_len: usize, new_len: usize) {
        if new_len < old_len {
            self.isr_shrinks.inc();
        } else if new_len > old_len {
            self.isr_expands.inc();
        }
    }

    /// Everything in the Prometheus text format (OpenMetrics).
    pub async fn render(&self, broker: &Broker) -> String {
        let mut registry = Registry::default();
        self.register_counters(&mut registry);
        register_partition_gauges(&mut registry, broker);
        register_mirror_metrics(&mut registry, broker).await;
        let mut out = String::new();
        if encode(&mut out, &registry).is_err() {
            out.clear();
        }
        out
    }

    fn register_counters(&self, registry: &mut Registry) {
        registry.register(
            "kafka_server_brokertopicmetrics_messagesin",
            "Records appended by Produce, by topic",
            self.messages_in.clone(),
        );
        registry.register(
            "kafka_server_brokertopicmetrics_bytesin",
            "Bytes appended by Produce, by topic",
            self.bytes_in.clone(),
        );
        registry.register(
            "kafka_server_brokertopicmetrics_bytesout",
            "Bytes returned to consumers by Fetch, by topic",
            self.bytes_out.clone(),
        );
        registry.register(
            "kafka_network_requestmetrics_requests",
            "Requests received, by API",
            self.requests.clone(),
        );
        registry.register(
            "kafka_network_requestmetrics_totaltimems",
            "Milliseconds from reading a request to writing its response, by API",
            self.request_time_ms.clone(),
        );
        registry.register(
            "kafka_server_socket_server_metrics_connection_count",
            "Open client connections, by listener",
            self.connections.clone(),
        );
        registry.register(
            "kafka_server_socket_server_metrics_connection_creation",
            "Client connections accepted, by listener",
            self.connections_created.clone(),
        );
        registry.register(
            "kafka_server_replicamanager_isrshrinks",
            "ISR shrinks of partitions led here",
            self.isr_shrinks.clone(),
        );
        registry.register(
            "kafka_server_replicamanager_isrexpands",
            "ISR expansions of partitions led here",
            self.isr_expands.clone(),
        );
    }
}

fn gauge(v: i64) -> Gauge {
    let g = Gauge::<i64>::default();
    g.set(v);
    g
}

/// Leadership and replication state of the partitions, from this broker's view.
fn register_partition_gauges(registry: &mut Registry, broker: &Broker) {
    let (mut led, mut under_replicated) = (0i64, 0i64);
    for p in broker.replicas.all_partitions() {
        let a = p.assignment();
        if a.leader == broker.config.node_id {
            led += 1;
            if a.isr.len() < a.replicas.len() {
                under_replicated += 1;
            }
        }
    }
    let image = broker.controller.image();
    let offline = image
        .topics
        .values()
        .flat_map(|t| t.partitions.values())
        .filter(|p| p.leader < 0)
        .count() as i64;
    registry.register(
        "kafka_server_replicamanager_leadercount",
        "Partitions this broker leads",
        gauge(led),
    );
    registry.register(
        "kafka_server_replicamanager_underreplicatedpartitions",
        "Partitions led here whose ISR is smaller than their replica set",
        gauge(under_replicated),
    );
    registry.register(
        "kafka_controller_kafkacontroller_offlinepartitionscount",
        "Partitions of the cluster without a leader",
        gauge(offline),
    );
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The mirror partitions led here (state, lag in records and in time) and each mirror's
/// fetching counters.
async fn register_mirror_metrics(registry: &mut Registry, broker: &Broker) {
    let lag = Family::<Labels, Gauge>::default();
    let lag_seconds = Family::<Labels, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
    let states = Family::<Labels, Gauge>::default();
    let described = broker
        .mirrors
        .describe_mirrors(&DescribeClusterMirrorsRequest::default().with_local_only(true))
        .await;
    let now = now_ms();
    for m in &described.mirrors {
        for t in &m.topics {
            for p in &t.partitions {
                // Partitions led elsewhere have no destination offset here.
                if p.destination_offset < 0 {
                    continue;
                }
                states
                    .get_or_create(&vec![
                        ("mirror".to_string(), m.mirror_name.to_string()),
                        ("state".to_string(), p.state_value.to_string()),
                    ])
                    .inc();
                if p.lag < 0 {
                    continue;
                }
                let labels = vec![
                    ("mirror".to_string(), m.mirror_name.to_string()),
                    ("topic".to_string(), t.topic_name.to_string()),
                    ("partition".to_string(), p.partition_index.to_string()),
                ];
                lag.get_or_create(&labels).set(p.lag);
                // Behind the source, the mirror holds its records up to the newest timestamp
                // it appended: the records not yet mirrored are younger than now minus that.
                let seconds = if p.lag == 0 {
                    Some(0.0)
                } else {
                    broker
                        .mirrors
                        .newest_mirrored_timestamp(&m.mirror_name, &t.topic_name, p.partition_index)
                        .filter(|ts| *ts >= 0)
                        .map(|ts| (now - ts).max(0) as f64 / 1000.0)
                };
                if let Some(s) = seconds {
                    lag_seconds.get_or_create(&labels).set(s);
                }
            }
        }
    }
    registry.register(
        "tern_mirror_partition_lag_records",
        "Source high watermark minus the mirror's log end, for mirror partitions led here",
        lag,
    );
    registry.register(
        "tern_mirror_partition_lag_seconds",
        "0 when caught up; else seconds since the newest record timestamp mirrored (an upper bound on the age of the oldest record not yet mirrored)",
        lag_seconds,
    );
    registry.register(
        "tern_mirror_partitions",
        "Mirror partitions led here, by state",
        states,
    );
    register_mirror_counters(registry, broker);
}

fn register_mirror_counters(registry: &mut Registry, broker: &Broker) {
    let bytes = Family::<Labels, Counter>::default();
    let records = Family::<Labels, Counter>::default();
    let errors = Family::<Labels, Counter>::default();
    let retries = Family::<Labels, Counter>::default();
    let since_fetch = Family::<Labels, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
    let now = Instant::now();
    for (mirror, c) in broker.mirrors.counters() {
        let labels = vec![("mirror".to_string(), mirror.clone())];
        bytes.get_or_create(&labels).inc_by(c.bytes);
        records.get_or_create(&labels).inc_by(c.records);
        errors.get_or_create(&labels).inc_by(c.fetch_errors);
        retries.get_or_create(&labels).inc_by(c.fetch_retries);
        for (source_broker, at) in &c.last_fetch {
            since_fetch
                .get_or_create(&vec![
                    ("mirror".to_string(), mirror.clone()),
                    ("source_broker".to_string(), source_broker.to_string()),
                ])
                .set(now.saturating_duration_since(*at).as_secs_f64());
        }
    }
    registry.register(
        "tern_mirror_bytes",
        "Bytes of record batches mirrored from the source",
        bytes,
    );
    registry.register(
        "tern_mirror_records",
        "Records mirrored from the source",
        records,
    );
    registry.register(
        "tern_mirror_fetch_errors",
        "Source fetches and appends that failed",
        errors,
    );
    registry.register(
        "tern_mirror_fetch_retries",
        "Partitions handed back to a fetcher after an error or a source leader move",
        retries,
    );
    registry.register(
        "tern_mirror_seconds_since_last_fetch",
        "Seconds since each source broker last answered a mirror fetch without error",
        since_fetch,
    );
}
