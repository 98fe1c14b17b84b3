//! The catalog of broker settings Tern reads: Kafka's names and types, Tern's defaults, and
//! whether Kafka lets each change at runtime. DescribeConfigs on a broker answers from it, and
//! the startup policy treats every setting outside it (and the other read families) as ignored.

use tern_controller::topic_configs::ConfigType::{self, Boolean, Double, Int, List, Long, Short};

/// One broker setting.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BrokerConfigDef {
    /// Kafka's name.
    pub name: &'static str,
    /// The value Tern uses when the setting is absent (None: unset, as Kafka's null default).
    pub default: Option<&'static str>,
    /// Value type as DescribeConfigs reports it.
    pub kind: ConfigType,
    /// Kafka cannot change it without a restart (DescribeConfigs' `read_only`).
    pub read_only: bool,
}

impl BrokerConfigDef {
    /// A secret: its value is never returned.
    pub(crate) fn sensitive(&self) -> bool {
        self.kind == ConfigType::Password
    }
}

const fn def(
    name: &'static str,
    default: Option<&'static str>,
    kind: ConfigType,
    read_only: bool,
) -> BrokerConfigDef {
    BrokerConfigDef {
        name,
        default,
        kind,
        read_only,
    }
}

const STR: ConfigType = ConfigType::String;
const PASSWORD: ConfigType = ConfigType::Password;
const RO: bool = true;
const DYN: bool = false;

/// Every broker setting Tern reads, sorted by name. Defaults are Tern's; where they differ from
/// Kafka 4.4's the comment says so.
pub(crate) const BROKER_CONFIGS: &[BrokerConfigDef] = &[
    def("advertised.listeners", None, List, RO),
    def("allow.everyone.if.no.acl.found", Some("false"), Boolean, RO),
    def("authorizer.class.name", Some(""), STR, RO),
    def("auto.create.topics.enable", Some("true"), Boolean, RO),
    def("auto.leader.rebalance.enable", Some("true"), Boolean, RO),
    def("broker.heartbeat.interval.ms", Some("2000"), Int, RO),
    def("broker.id", None, Int, RO),
    def("broker.rack", None, STR, RO),
    def("broker.session.timeout.ms", Some("9000"), Int, RO),
    def("compression.gzip.level", Some("-1"), Int, DYN),
    def("compression.lz4.level", Some("9"), Int, DYN),
    def("compression.type", Some("producer"), STR, DYN),
    def("compression.zstd.level", Some("3"), Int, DYN),
    def("connections.max.idle.ms", Some("600000"), Long, RO),
    def("connections.max.reauth.ms", Some("0"), Long, RO),
    def("controller.listener.names", Some("CONTROLLER"), List, RO), // Kafka: null
    def("controller.quorum.bootstrap.servers", Some(""), List, RO),
    def("controller.quorum.voters", Some(""), List, RO),
    def("default.replication.factor", Some("1"), Int, RO),
    def(
        "follower.replication.throttled.rate",
        Some("9223372036854775807"),
        Long,
        DYN,
    ),
    def("group.consumer.assignors", Some("uniform,range"), List, RO),
    def(
        "group.consumer.heartbeat.interval.ms",
        Some("5000"),
        Int,
        RO,
    ),
    def("group.consumer.max.size", Some("2147483647"), Int, RO),
    def(
        "group.consumer.migration.policy",
        Some("bidirectional"),
        STR,
        RO,
    ),
    def("group.consumer.session.timeout.ms", Some("45000"), Int, RO),
    def("group.initial.rebalance.delay.ms", Some("3000"), Int, RO),
    def("group.max.session.timeout.ms", Some("1800000"), Int, RO),
    def("group.max.size", Some("2147483647"), Int, RO),
    def("group.min.session.timeout.ms", Some("6000"), Int, RO),
    def("group.share.delivery.count.limit", Some("5"), Int, RO),
    def("group.share.heartbeat.interval.ms", Some("5000"), Int, RO),
    def("group.share.max.size", Some("200"), Int, RO),
    def(
        "group.share.partition.max.record.locks",
        Some("2000"),
        Int,
        RO,
    ),
    def(
        "group.share.record.lock.duration.ms",
        Some("30000"),
        Int,
        RO,
    ),
    def("group.share.session.timeout.ms", Some("45000"), Int, RO),
    // Tern's /metrics and /health listener (no Kafka counterpart).
    def("http.listeners", Some("http://127.0.0.1:9644"), STR, RO),
    def("inter.broker.listener.name", None, STR, RO),
    def(
        "leader.imbalance.check.interval.seconds",
        Some("300"),
        Long,
        RO,
    ),
    def(
        "leader.imbalance.per.broker.percentage",
        Some("10"),
        Int,
        RO,
    ),
    def(
        "leader.replication.throttled.rate",
        Some("9223372036854775807"),
        Long,
        DYN,
    ),
    def(
        "listener.security.protocol.map",
        Some(super::policy::DEFAULT_PROTOCOL_MAP),
        STR,
        DYN,
    ),
    def("listeners", Some("PLAINTEXT://127.0.0.1:9092"), List, DYN), // Kafka: PLAINTEXT://:9092
    def("log.cleaner.backoff.ms", Some("15000"), Long, DYN),
    def(
        "log.cleaner.dedupe.buffer.size",
        Some("134217728"),
        Long,
        DYN,
    ),
    def(
        "log.cleaner.delete.retention.ms",
        Some("86400000"),
        Long,
        DYN,
    ),
    def("log.cleaner.enable", Some("true"), Boolean, RO),
    def(
        "log.cleaner.io.buffer.load.factor",
        Some("0.9"),
        Double,
        DYN,
    ),
    def(
        "log.cleaner.io.max.bytes.per.second",
        Some("1.7976931348623157E308"),
        Double,
        DYN,
    ),
    def(
        "log.cleaner.max.compaction.lag.ms",
        Some("9223372036854775807"),
        Long,
        DYN,
    ),
    def("log.cleaner.min.cleanable.ratio", Some("0.5"), Double, DYN),
    def("log.cleaner.min.compaction.lag.ms", Some("0"), Long, DYN),
    def("log.cleaner.threads", Some("1"), Int, DYN),
    def("log.cleanup.policy", Some("delete"), List, DYN),
    def("log.dir", Some("./data"), List, RO), // Kafka: /tmp/kafka-logs
    def("log.dirs", None, List, RO),
    def(
        "log.flush.interval.messages",
        Some("9223372036854775807"),
        Long,
        DYN,
    ),
    def("log.flush.interval.ms", None, Long, DYN),
    def("log.index.interval.bytes", Some("4096"), Int, DYN),
    def("log.index.size.max.bytes", Some("10485760"), Int, DYN),
    def(
        "log.message.timestamp.after.max.ms",
        Some("3600000"),
        Long,
        DYN,
    ),
    def(
        "log.message.timestamp.before.max.ms",
        Some("9223372036854775807"),
        Long,
        DYN,
    ),
    def("log.message.timestamp.type", Some("CreateTime"), STR, DYN),
    def("log.preallocate", Some("false"), Boolean, DYN),
    def("log.retention.bytes", Some("-1"), Long, DYN),
    def("log.retention.check.interval.ms", Some("300000"), Long, RO),
    def("log.retention.hours", Some("168"), Int, RO),
    def("log.retention.minutes", None, Int, RO),
    def("log.retention.ms", None, Long, DYN),
    def("log.roll.jitter.ms", None, Long, DYN),
    def("log.roll.ms", None, Long, DYN),
    def("log.segment.bytes", Some("1073741824"), Int, DYN),
    def("log.segment.delete.delay.ms", Some("60000"), Long, DYN),
    def("max.connections", Some("10000"), Int, DYN), // Kafka: 2147483647
    def(
        "max.incremental.fetch.session.cache.slots",
        Some("1000"),
        Int,
        RO,
    ),
    def("message.max.bytes", Some("1048588"), Int, DYN),
    def("metadata.log.dir", None, STR, RO),
    def(
        "metadata.log.max.record.bytes.between.snapshots",
        Some("20971520"),
        Long,
        RO,
    ),
    def(
        "metadata.log.max.snapshot.interval.ms",
        Some("3600000"),
        Long,
        RO,
    ),
    def(
        "min.incremental.fetch.session.eviction.ms",
        Some("120000"),
        Long,
        RO,
    ), // Kafka: internal
    def("min.insync.replicas", Some("1"), Int, DYN),
    // Cluster mirroring's broker-wide settings (the spec's names).
    def(
        "mirror.failed.retry.initial.backoff.ms",
        Some("1000"),
        Long,
        RO,
    ),
    def("mirror.failed.retry.max.attempts", Some("100"), Short, RO),
    def(
        "mirror.failed.retry.max.backoff.ms",
        Some("300000"),
        Long,
        RO,
    ),
    def(
        "mirror.metadata.refresh.interval.ms",
        Some("30000"),
        Long,
        RO,
    ),
    def("mirror.state.topic.num.partitions", Some("50"), Int, RO),
    def("node.id", Some("1"), Int, RO), // Kafka: required
    def("num.partitions", Some("1"), Int, RO),
    def("num.recovery.threads.per.data.dir", Some("2"), Int, DYN),
    def("num.replica.fetchers", Some("1"), Int, DYN),
    def("offset.metadata.max.bytes", Some("4096"), Int, RO),
    def("offsets.retention.minutes", Some("10080"), Int, RO),
    def("offsets.topic.num.partitions", Some("50"), Int, RO),
    def("offsets.topic.replication.factor", Some("3"), Short, RO),
    def("process.roles", Some("broker,controller"), List, RO), // Kafka: required
    def("queued.max.requests", Some("500"), Int, RO),
    def("replica.fetch.backoff.ms", Some("1000"), Int, RO),
    def("replica.fetch.max.bytes", Some("1048576"), Int, RO),
    def("replica.fetch.min.bytes", Some("1"), Int, RO),
    def(
        "replica.fetch.response.max.bytes",
        Some("10485760"),
        Int,
        RO,
    ),
    def("replica.fetch.wait.max.ms", Some("500"), Int, RO),
    def(
        "replica.high.watermark.checkpoint.interval.ms",
        Some("5000"),
        Long,
        RO,
    ),
    def("replica.lag.time.max.ms", Some("30000"), Long, RO),
    def("sasl.enabled.mechanisms", None, List, DYN), // Kafka: GSSAPI, which Tern lacks
    def(
        "sasl.mechanism.controller.protocol",
        Some("GSSAPI"),
        STR,
        RO,
    ),
    def(
        "sasl.mechanism.inter.broker.protocol",
        Some("GSSAPI"),
        STR,
        DYN,
    ),
    def("security.inter.broker.protocol", Some("PLAINTEXT"), STR, RO),
    def("socket.request.max.bytes", Some("104857600"), Int, RO),
    def("ssl.allow.dn.changes", Some("false"), Boolean, RO),
    def("ssl.allow.san.changes", Some("false"), Boolean, RO),
    def("ssl.client.auth", Some("none"), STR, DYN),
    def("ssl.enabled.protocols", Some("TLSv1.2,TLSv1.3"), List, DYN),
    def(
        "ssl.endpoint.identification.algorithm",
        Some("https"),
        STR,
        DYN,
    ),
    def("ssl.keymanager.algorithm", Some("SunX509"), STR, DYN),
    def("ssl.keystore.certificate.chain", None, PASSWORD, DYN),
    def("ssl.keystore.key", None, PASSWORD, DYN),
    def("ssl.keystore.location", None, STR, DYN),
    def("ssl.keystore.type", Some("PEM"), STR, DYN), // Kafka: JKS, which Tern does not read
    def("ssl.principal.mapping.rules", Some("DEFAULT"), STR, RO),
    def("ssl.protocol", Some("TLSv1.3"), STR, DYN),
    def("ssl.trustmanager.algorithm", Some("PKIX"), STR, DYN),
    def("ssl.truststore.certificates", None, PASSWORD, DYN),
    def("ssl.truststore.location", None, STR, DYN),
    def("ssl.truststore.type", Some("PEM"), STR, DYN), // Kafka: JKS
    def("super.users", None, STR, RO),
    def(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        Some("10000"),
        Int,
        RO,
    ),
    def("transaction.max.timeout.ms", Some("900000"), Int, RO),
    def(
        "transaction.partition.verification.enable",
        Some("true"),
        Boolean,
        DYN,
    ),
    def(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        Some("3600000"),
        Int,
        RO,
    ),
    def("transaction.state.log.min.isr", Some("2"), Int, RO),
    def("transaction.state.log.num.partitions", Some("50"), Int, RO),
    def(
        "transaction.state.log.replication.factor",
        Some("3"),
        Short,
        RO,
    ),
    def(
        "transaction.state.log.segment.bytes",
        Some("104857600"),
        Int,
        RO,
    ),
    def("transactional.id.expiration.ms", Some("604800000"), Int, RO),
    def(
        "unclean.leader.election.enable",
        Some("false"),
        Boolean,
        DYN,
    ),
];

/// The catalog entry of `name`.
pub(crate) fn broker_config(name: &str) -> Option<&'static BrokerConfigDef> {
    BROKER_CONFIGS
        .binary_search_by(|d| d.name.cmp(name))
        .ok()
        .map(|i| &BROKER_CONFIGS[i])
}

/// Whether a setting that is not in the catalog holds a secret (listener-prefixed TLS material,
/// JAAS texts, passwords), so that its value is never returned.
pub(crate) fn is_secret_name(name: &str) -> bool {
    name.ends_with("sasl.jaas.config")
        || name.contains("password")
        || name.ends_with(".keystore.key")
        || name.ends_with(".keystore.certificate.chain")
        || name.ends_with(".truststore.certificates")
        || name.ends_with(".secret.key")
        || name.ends_with(".master.key")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::BrokerConfig;
    use std::collections::BTreeMap;

    #[test]
    fn the_catalog_is_sorted_and_has_no_duplicates() {
        for pair in BROKER_CONFIGS.windows(2) {
            assert!(
                pair[0].name < pair[1].name,
                "{} before {}",
                pair[0].name,
                pair[1].name
            );
        }
        assert_eq!(broker_config("num.partitions").unwrap().default, Some("1"));
        assert!(broker_config("log.cleaner.io.buffer.size").is_none());
    }

    #[test]
    fn every_topic_config_synonym_is_in_the_catalog() {
        for d in tern_controller::topic_configs::TOPIC_CONFIGS {
            if let Some(syn) = d.broker_synonym {
                assert!(
                    broker_config(syn).is_some(),
                    "{syn} (synonym of {}) missing",
                    d.name
                );
            }
        }
    }

    /// Setting a config to its catalog default changes nothing: the catalog and the parser agree.
    #[test]
    fn each_default_is_the_value_the_broker_uses_when_the_setting_is_absent() {
        let base = BrokerConfig::from_properties(BTreeMap::new()).unwrap();
        let shape = |c: &BrokerConfig| {
            let mut c = c.clone();
            c.properties.clear();
            format!("{c:?}")
        };
        let mut checked = 0;
        for d in BROKER_CONFIGS {
            let Some(default) = d.default else { continue };
            // Security settings only take effect on a listener that uses them, the authorizer's
            // only with an authorizer (the policy refuses them alone).
            if d.name.starts_with("ssl.")
                || d.name.starts_with("sasl.")
                || (crate::security::authorizer::AUTHORIZER_CONFIGS.contains(&d.name)
                    && d.name != "authorizer.class.name")
                // Set or not is part of its value: only a default that cannot bind is a warning.
                || d.name == "http.listeners"
            {
                continue;
            }
            let props = BTreeMap::from([(d.name.to_string(), default.to_string())]);
            let set = BrokerConfig::from_properties(props)
                .unwrap_or_else(|e| panic!("{}={default} refused: {e:#}", d.name));
            assert_eq!(
                shape(&set),
                shape(&base),
                "{}={default} is not the default",
                d.name
            );
            checked += 1;
        }
        assert!(checked > 50, "only {checked} defaults checked");
    }

    #[test]
    fn secrets_are_recognised_by_name() {
        assert!(is_secret_name(
            "listener.name.sasl_ssl.plain.sasl.jaas.config"
        ));
        assert!(is_secret_name("listener.name.ssl.ssl.keystore.key"));
        assert!(is_secret_name("ssl.key.password"));
        assert!(!is_secret_name("listener.name.ssl.ssl.client.auth"));
    }
}
