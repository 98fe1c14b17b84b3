//! Prometheus metrics, named after Kafka's JMX beans as the Prometheus JMX exporter renders them
//! (`kafka_server_brokertopicmetrics_messagesin_total{topic}` ...), so existing Kafka dashboards
//! work with little change, and the mirror's own (`tern_mirror_*`). Counters are kept as requests
//! pass; gauges are read from the broker's state at each scrape.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tern_protocol::mirror::DescribeClusterMirrorsRequest;

use crate::broker::Broker;

type Labels = Vec<(String, String)>;

fn topic(t: &str) -> Labels {
    vec![("topic".to_string(), t.to_string())]
}

/// The broker's counters.
#[derive(Default)]
pub struct Metrics {
    messages_in: Family<Labels, Counter>,
    bytes_in: Family<Labels, Counter>,
    bytes_out: Family<Labels, Counter>,
    requests: Family<Labels, Counter>,
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

    /// One request of this API.
    pub fn request(&self, api: &str) {
        self.requests
            .get_or_create(&vec![("request".to_string(), api.to_string())])
            .inc();
    }

    /// Everything in the Prometheus text format (OpenMetrics).
    pub async fn render(&self, broker: &Broker) -> String {
        let mut registry = Registry::default();
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
        let gauge = |v: i64| {
            let g = Gauge::<i64>::default();
            g.set(v);
            g
        };
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
        let lag = Family::<Labels, Gauge>::default();
        let states = Family::<Labels, Gauge>::default();
        let described = broker
            .mirrors
            .describe_mirrors(&DescribeClusterMirrorsRequest {
                local_only: true,
                ..Default::default()
            })
            .await;
        for m in &described.mirrors {
            for t in &m.topics {
                for p in &t.partitions {
                    // Partitions led elsewhere have no destination offset here.
                    if p.destination_offset < 0 {
                        continue;
                    }
                    states
                        .get_or_create(&vec![
                            ("mirror".to_string(), m.mirror_name.clone()),
                            ("state".to_string(), p.state_value.clone()),
                        ])
                        .inc();
                    if p.lag >= 0 {
                        lag.get_or_create(&vec![
                            ("mirror".to_string(), m.mirror_name.clone()),
                            ("topic".to_string(), t.topic_name.clone()),
                            ("partition".to_string(), p.partition_index.to_string()),
                        ])
                        .set(p.lag);
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
            "tern_mirror_partitions",
            "Mirror partitions led here, by state",
            states,
        );
        let mut out = String::new();
        if encode(&mut out, &registry).is_err() {
            out.clear();
        }
        out
    }
}
