//! DescribeConfigs: every topic config with its value and where it comes from; broker configs.

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::ResponseError;
use tern_controller::topic_configs::{ConfigType, TOPIC_CONFIGS};

use crate::config::catalog::{broker_config, is_secret_name, BROKER_CONFIGS};
use crate::config::dynamic::{dynamic_values, Layer};

use tern_controller::acls::{AclOperation, AclResourceType};

use super::{sb, Authz, RequestContext};
use crate::broker::Broker;

/// ConfigResource type of a topic.
pub(crate) const RESOURCE_TOPIC: i8 = 2;
/// ConfigResource type of a broker.
pub(crate) const RESOURCE_BROKER: i8 = 4;
/// ConfigResource type of a cluster mirror (the prototype's number).
pub(crate) const RESOURCE_CLUSTER_MIRROR: i8 = 64;

/// Kafka's config sources.
const SOURCE_TOPIC: i8 = 1;
const SOURCE_STATIC_BROKER: i8 = 4;
const SOURCE_DEFAULT: i8 = 5;

/// One resolved config: value, source, and the chain of synonyms that could have set it.
pub(crate) struct ConfigEntry {
    /// Config name.
    pub name: String,
    /// Effective value (None: unset, or a secret that is never returned).
    pub value: Option<String>,
    /// Kafka config source code.
    pub source: i8,
    /// Value type code.
    pub config_type: i8,
    /// (name, value, source) from most to least specific.
    pub synonyms: Vec<(String, Option<String>, i8)>,
    /// Cannot change without a restart.
    pub read_only: bool,
    /// A secret: the value is withheld.
    pub sensitive: bool,
}

/// A DOUBLE value as Kafka shows it, parsed and printed back as Java's `Double.toString`
/// does ("1048576" shows as "1048576.0", a huge one as "1.7976931348623157E308"); any other
/// value as it is.
fn shown_as_kafka(value: String, config_type: i8) -> String {
    if config_type != ConfigType::Double.code() {
        return value;
    }
    let Ok(x) = value.trim().parse::<f64>() else {
        return value;
    };
    if !x.is_finite() {
        return value;
    }
    let magnitude = x.abs();
    if magnitude == 0.0 || (1e-3..1e7).contains(&magnitude) {
        let plain = format!("{x}");
        return if plain.contains('.') {
            plain
        } else {
            format!("{plain}.0")
        };
    }
    let scientific = format!("{x:E}");
    match scientific.split_once('E') {
        Some((mantissa, exponent)) if !mantissa.contains('.') => {
            format!("{mantissa}.0E{exponent}")
        }
        _ => scientific,
    }
}

impl ConfigEntry {
    /// The entry with its value shown as Kafka shows a parsed value (see [`shown_as_kafka`]);
    /// cluster-wide defaults are shown as stored, as Kafka shows them.
    fn parsed(mut self) -> Self {
        self.value = self.value.map(|v| shown_as_kafka(v, self.config_type));
        self
    }

    /// A changeable, non-secret entry whose value and source are its most specific synonym's,
    /// else `unset` as a default.
    fn from_synonyms(
        name: &str,
        synonyms: Vec<(String, Option<String>, i8)>,
        unset: Option<&str>,
        config_type: i8,
    ) -> Self {
        let (value, source) = match synonyms.first() {
            Some((_, v, s)) => (v.clone(), *s),
            None => (unset.map(str::to_string), SOURCE_DEFAULT),
        };
        ConfigEntry {
            name: name.to_string(),
            value,
            source,
            config_type,
            synonyms,
            read_only: false,
            sensitive: false,
        }
    }
}

/// Resolves every topic config given the topic's explicit settings.
pub(crate) fn topic_config_entries(
    broker: &Broker,
    explicit: &BTreeMap<String, String>,
) -> Vec<ConfigEntry> {
    let image = broker.controller.image();
    TOPIC_CONFIGS
        .iter()
        .map(|def| {
            let mut synonyms = Vec::new();
            if let Some(v) = explicit.get(def.name) {
                synonyms.push((def.name.to_string(), Some(v.clone()), SOURCE_TOPIC));
            }
            if let Some(syn) = def.broker_synonym {
                for (v, layer) in dynamic_values(&image, broker.config.node_id, syn) {
                    synonyms.push((syn.to_string(), Some(v), layer.source()));
                }
                if let Some(v) = broker.config.properties.get(syn) {
                    synonyms.push((syn.to_string(), Some(v.clone()), SOURCE_STATIC_BROKER));
                }
            }
            // The built-in default shows as the broker synonym's default, except where that
            // synonym has none of its own (log.retention.ms defers to log.retention.hours), as
            // in Kafka.
            let synonym_default = match def.broker_synonym {
                Some(syn) => broker_config(syn).is_some_and(|b| b.default.is_some()),
                None => true,
            };
            if synonym_default {
                synonyms.push((
                    def.broker_synonym.unwrap_or(def.name).to_string(),
                    Some(def.default.to_string()),
                    SOURCE_DEFAULT,
                ));
            }
            ConfigEntry::from_synonyms(def.name, synonyms, Some(def.default), def.kind.code())
                .parsed()
        })
        .collect()
}

/// Every broker setting of the catalog with its value (explicit or Tern's default), then the
/// other settings given that Tern reads (listener-prefixed security, mirror defaults); secrets are
/// withheld. Settings Tern ignores are not listed: they would look as if they took effect.
fn broker_config_entries(broker: &Broker) -> Vec<ConfigEntry> {
    let image = broker.controller.image();
    let props = &broker.config.properties;
    let mut entries: Vec<ConfigEntry> = BROKER_CONFIGS
        .iter()
        .map(|def| {
            let sensitive = def.sensitive();
            let shown = |v: &str| (!sensitive).then(|| v.to_string());
            let mut synonyms: Vec<_> = dynamic_values(&image, broker.config.node_id, def.name)
                .into_iter()
                .map(|(v, layer)| (def.name.to_string(), shown(&v), layer.source()))
                .collect();
            if let Some(v) = props.get(def.name) {
                synonyms.push((def.name.to_string(), shown(v), SOURCE_STATIC_BROKER));
            }
            if let Some(d) = def.default {
                synonyms.push((def.name.to_string(), shown(d), SOURCE_DEFAULT));
            }
            ConfigEntry {
                read_only: def.read_only,
                sensitive,
                ..ConfigEntry::from_synonyms(def.name, synonyms, None, def.kind.code())
            }
            .parsed()
        })
        .collect();
    let ignored = broker.config.ignored_settings();
    for (k, v) in props {
        if broker_config(k).is_some() || ignored.contains(k) {
            continue;
        }
        let sensitive = is_secret_name(k);
        let value = (!sensitive).then(|| v.clone());
        entries.push(ConfigEntry {
            name: k.clone(),
            value: value.clone(),
            source: SOURCE_STATIC_BROKER,
            config_type: if sensitive {
                ConfigType::Password
            } else {
                ConfigType::String
            }
            .code(),
            synonyms: vec![(k.clone(), value, SOURCE_STATIC_BROKER)],
            read_only: true,
            sensitive,
        });
    }
    entries
}

/// Config source of a group's own setting.
const SOURCE_GROUP: i8 = 8;

/// Every group config Tern applies for group `group`, as Kafka's ConfigHelper describes one:
/// the group's value, else its broker synonym's (static or default), else Kafka's default.
fn group_config_entries(broker: &Broker, group: &str) -> Vec<ConfigEntry> {
    let explicit = broker.controller.image().group_configs(group);
    crate::config::group_configs::GROUP_CONFIGS
        .iter()
        .map(|def| {
            let mut synonyms = Vec::new();
            if let Some(v) = explicit.get(def.name) {
                synonyms.push((def.name.to_string(), Some(v.clone()), SOURCE_GROUP));
            }
            match def.broker_synonym {
                Some(syn) => {
                    if let Some(v) = broker.config.properties.get(syn) {
                        synonyms.push((syn.to_string(), Some(v.clone()), SOURCE_STATIC_BROKER));
                    }
                    let default = broker_config(syn).and_then(|b| b.default);
                    synonyms.push((
                        syn.to_string(),
                        Some(default.unwrap_or(def.default).to_string()),
                        SOURCE_DEFAULT,
                    ));
                }
                None => synonyms.push((
                    def.name.to_string(),
                    Some(def.default.to_string()),
                    SOURCE_DEFAULT,
                )),
            }
            ConfigEntry::from_synonyms(def.name, synonyms, Some(def.default), def.kind.code())
        })
        .collect()
}

/// The cluster-wide dynamic defaults (the broker resource with an empty name), as Kafka lists
/// them: only what is set.
fn cluster_default_entries(broker: &Broker) -> Vec<ConfigEntry> {
    let source = Layer::DynamicDefault.source();
    broker
        .controller
        .image()
        .broker_configs("")
        .into_iter()
        .map(|(k, v)| {
            let kind = broker_config(&k)
                .map_or(ConfigType::String, |d| d.kind)
                .code();
            let synonyms = vec![(k.clone(), Some(v), source)];
            ConfigEntry::from_synonyms(&k, synonyms, None, kind)
        })
        .collect()
}

/// ConfigResource type of a broker's loggers.
pub(crate) const RESOURCE_BROKER_LOGGER: i8 = 8;
/// ConfigResource type of client metrics subscriptions.
pub(crate) const RESOURCE_CLIENT_METRICS: i8 = 16;
/// ConfigResource type of a group.
pub(crate) const RESOURCE_GROUP: i8 = 32;

/// The authorization error for `op` (DESCRIBE_CONFIGS or ALTER_CONFIGS) on a config resource,
/// as Kafka's ConfigHelper and ConfigAdminManager map it, or None when allowed (or the type is
/// one no authorization applies to; such types are refused elsewhere).
pub(crate) fn config_authorization(
    authz: &Authz<'_>,
    op: AclOperation,
    resource_type: i8,
    name: &str,
) -> Option<ResponseError> {
    let (allowed, error) = match resource_type {
        RESOURCE_TOPIC => (
            authz.topic(op, name),
            ResponseError::TopicAuthorizationFailed,
        ),
        RESOURCE_BROKER | RESOURCE_BROKER_LOGGER | RESOURCE_CLIENT_METRICS => {
            (authz.cluster(op), ResponseError::ClusterAuthorizationFailed)
        }
        RESOURCE_GROUP => (
            authz.group(op, name),
            ResponseError::GroupAuthorizationFailed,
        ),
        RESOURCE_CLUSTER_MIRROR => (
            authz.allows(op, AclResourceType::ClusterMirror, name),
            tern_protocol::mirror::errors::CLUSTER_MIRROR_AUTHORIZATION_FAILED,
        ),
        _ => (true, ResponseError::InvalidRequest),
    };
    (!allowed).then_some(error)
}

/// Answers DescribeConfigs (DESCRIBE_CONFIGS on each resource).
pub(crate) fn handle(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeConfigsRequest,
    version: i16,
) -> DescribeConfigsResponse {
    let authz = ctx.authz(broker);
    let image = broker.controller.image();
    let results = req
        .resources
        .into_iter()
        .map(|res| {
            let name = res.resource_name.to_string();
            let result = DescribeConfigsResult::default()
                .with_resource_type(res.resource_type)
                .with_resource_name(res.resource_name.clone());
            if let Some(e) = config_authorization(
                &authz,
                AclOperation::DescribeConfigs,
                res.resource_type,
                &name,
            ) {
                return result.with_error_code(e.code());
            }
            let entries = match res.resource_type {
                RESOURCE_TOPIC => {
                    if image.topic(&name).is_none() {
                        return result
                            .with_error_code(ResponseError::UnknownTopicOrPartition.code())
                            .with_error_message(Some(sb(format!("Topic {name} does not exist"))));
                    }
                    topic_config_entries(broker, &image.topic_configs(&name))
                }
                RESOURCE_BROKER => {
                    if !name.is_empty() && name != broker.config.node_id.to_string() {
                        return result
                            .with_error_code(ResponseError::InvalidRequest.code())
                            .with_error_message(Some(sb(format!(
                                "Unexpected broker id, expected {} but received {name}",
                                broker.config.node_id
                            ))));
                    }
                    if name.is_empty() {
                        cluster_default_entries(broker)
                    } else {
                        broker_config_entries(broker)
                    }
                }
                RESOURCE_GROUP => {
                    if name.is_empty() {
                        return result
                            .with_error_code(ResponseError::InvalidRequest.code())
                            .with_error_message(Some(sb("Group name must not be empty")));
                    }
                    group_config_entries(broker, &name)
                }
                RESOURCE_CLUSTER_MIRROR => {
                    return match broker.mirrors.mirror_configs(&name) {
                        None => result
                            .with_error_code(
                                tern_protocol::mirror::errors::UNKNOWN_CLUSTER_MIRROR.code(),
                            )
                            .with_error_message(Some(sb(format!(
                                "Cluster mirror {name} does not exist"
                            )))),
                        // Secrets (sasl.jaas.config, passwords) are never returned.
                        Some(configs) => result.with_configs(
                            configs
                                .into_iter()
                                .map(|(k, v)| {
                                    DescribeConfigsResourceResult::default()
                                        .with_is_sensitive(v.is_none())
                                        .with_name(sb(k))
                                        .with_value(v.map(sb))
                                        .with_config_source(SOURCE_TOPIC)
                                        .with_config_type(2)
                                })
                                .collect(),
                        ),
                    };
                }
                other => {
                    return result
                        .with_error_code(ResponseError::InvalidRequest.code())
                        .with_error_message(Some(sb(format!("Unsupported resource type {other}"))))
                }
            };
            // An empty key list asks for every config, like a null one (as Kafka does).
            let keys = res
                .configuration_keys
                .filter(|k| !k.is_empty())
                .map(|k| k.into_iter().map(|s| s.to_string()).collect::<Vec<_>>());
            let configs = entries
                .into_iter()
                .filter(|e| keys.as_ref().is_none_or(|k| k.contains(&e.name)))
                .map(|e| {
                    let mut r = DescribeConfigsResourceResult::default()
                        .with_name(sb(e.name))
                        .with_value(e.value.map(sb))
                        .with_read_only(e.read_only)
                        .with_is_sensitive(e.sensitive)
                        .with_config_source(e.source)
                        .with_config_type(e.config_type);
                    if version == 0 {
                        r.config_source = -1;
                    }
                    if req.include_synonyms {
                        r.synonyms = e
                            .synonyms
                            .into_iter()
                            .map(|(n, v, s)| {
                                DescribeConfigsSynonym::default()
                                    .with_name(sb(n))
                                    .with_value(v.map(sb))
                                    .with_source(s)
                            })
                            .collect();
                    }
                    r
                })
                .collect();
            result.with_configs(configs)
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_show_as_java_prints_them() {
        let double = ConfigType::Double.code();
        let cases = [
            ("1048576", "1048576.0"),
            ("0.50", "0.5"),
            ("1.7976931348623157E308", "1.7976931348623157E308"),
            ("10000000", "1.0E7"),
            ("0.0001", "1.0E-4"),
            ("0", "0.0"),
            ("not a number", "not a number"),
        ];
        for (given, shown) in cases {
            assert_eq!(shown_as_kafka(given.into(), double), shown, "{given}");
        }
        let long = ConfigType::Long.code();
        assert_eq!(shown_as_kafka("1048576".into(), long), "1048576");
    }
}
