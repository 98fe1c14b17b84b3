//! AlterConfigs (replace all) and IncrementalAlterConfigs (set, delete, append, subtract).

use kafka_protocol::messages::{
    alter_configs_response, incremental_alter_configs_response, AlterConfigsRequest,
    AlterConfigsResponse, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use std::collections::BTreeMap;

use kafka_protocol::ResponseError;
use tern_protocol::error::ApiError;

use tern_controller::acls::AclOperation;

use super::api_error_fields::WithApiError;
use super::describe_configs::{
    config_authorization, RESOURCE_BROKER, RESOURCE_GROUP, RESOURCE_TOPIC,
};
use super::{Authz, RequestContext};
use crate::broker::Broker;
use crate::config::catalog::broker_config;
use crate::security::tls::{TlsAcceptorSource, TlsSettings};

const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;
const OP_SUBTRACT: i8 = 3;

fn unsupported_resource(resource_type: i8) -> ApiError {
    ApiError::new(
        ResponseError::InvalidRequest,
        format!("Unsupported resource type {resource_type}"),
    )
}

/// Dynamic broker configs of broker `name` (a node id, or empty for every broker): the broker
/// defaults of topic configs apply from the next metadata image; other settings are refused
/// (dynamic::validate_change). Removing a setting that is not set is a no-op, as in Kafka
/// (kafka-reassign-partitions.sh clears throttle rates so).
fn apply_broker(
    broker: &Broker,
    name: &str,
    changes: Vec<(String, Option<String>)>,
    replace_all: bool,
    validate_only: bool,
) -> Result<(), ApiError> {
    let image = broker.controller.image();
    if !name.is_empty() {
        // Kafka's error and wording (ConfigAdminManager); any broker takes a change for a
        // registered one, since the metadata log carries it to all.
        let Ok(id) = name.parse::<i32>() else {
            return Err(ApiError::new(
                ResponseError::InvalidRequest,
                format!("Node id must be an integer, but it is: {name}"),
            ));
        };
        if !image.brokers.contains_key(&id) {
            return Err(ApiError::new(
                ResponseError::InvalidRequest,
                format!("Broker {name} is not a registered broker id"),
            ));
        }
    }
    for (key, value) in &changes {
        if let Some(v) = value {
            crate::config::dynamic::validate_change(key, v)?;
            check_level(name, key)?;
            if key == NUM_FETCHERS {
                check_thread_count(broker, &image, key, v)?;
            }
        }
    }
    let proposed = Proposed {
        name,
        image: &image,
        changes: &changes,
        replace_all,
    };
    if changes
        .iter()
        .any(|(k, _)| crate::config::dynamic::is_tls_store_key(k))
    {
        check_tls_change(broker, &proposed)?;
    }
    if changes
        .iter()
        .any(|(k, _)| crate::config::cleaner::is_cleaner_key(k))
    {
        check_cleaner_change(broker, &proposed)?;
    }
    let set = image.broker_configs(name);
    let changes: Vec<_> = changes
        .into_iter()
        .filter(|(k, v)| v.is_some() || set.contains_key(k))
        .collect();
    if validate_only {
        return Ok(());
    }
    broker
        .controller
        .alter_broker_configs(name, &changes, replace_all)?;
    broker.replicas.apply_image(&broker.controller.image());
    Ok(())
}

const NUM_FETCHERS: &str = "num.replica.fetchers";

/// Kafka's rules for where TLS store settings may change: per listener (with the listener
/// prefix), and per broker (not at the cluster-wide default).
fn check_level(name: &str, key: &str) -> Result<(), ApiError> {
    if !crate::config::dynamic::is_tls_store_key(key) {
        return Ok(());
    }
    if !key.starts_with("listener.name.") {
        return Err(ApiError::new(
            ResponseError::InvalidRequest,
            format!(
                "These security configs can be dynamically updated only per-listener using the \
                 listener prefix: [{key}]"
            ),
        ));
    }
    if name.is_empty() {
        return Err(ApiError::new(
            ResponseError::InvalidRequest,
            format!(
                "Cannot update these configs at default cluster level, broker id must be \
                 specified: [{key}]"
            ),
        ));
    }
    Ok(())
}

/// Kafka's bounds on a new thread count: at least half, at most double the one in force on the
/// broker that takes the change.
fn check_thread_count(
    broker: &Broker,
    image: &tern_controller::MetadataImage,
    key: &str,
    value: &str,
) -> Result<(), ApiError> {
    let current: i64 = crate::config::dynamic::effective(
        image,
        broker.config.node_id,
        &broker.config.properties,
        key,
    )
    .and_then(|(v, _)| v.trim().parse().ok())
    .unwrap_or(1);
    let new: i64 = value.trim().parse().unwrap_or(0);
    let why = if new < current / 2 {
        format!("value should be at least half the current value {current}")
    } else if new > current * 2 {
        format!("value should not be greater than double the current value {current}")
    } else {
        return Ok(());
    };
    Err(ApiError::new(
        ResponseError::InvalidRequest,
        format!("Dynamic thread count update validation failed for {key}={value}, {why}"),
    ))
}

/// A change of broker `name`'s settings (empty: the cluster-wide default) in `image`.
struct Proposed<'a> {
    name: &'a str,
    image: &'a tern_controller::MetadataImage,
    changes: &'a [(String, Option<String>)],
    replace_all: bool,
}

/// This broker's settings (server.properties with the dynamic values over it) as they would
/// be after `change`; None when the change is for another broker, which checks it itself
/// when it applies it.
fn settings_after(broker: &Broker, change: &Proposed<'_>) -> Option<BTreeMap<String, String>> {
    let own = broker.config.node_id.to_string();
    if !change.name.is_empty() && change.name != own {
        return None;
    }
    let mut default = change.image.broker_configs("");
    let mut own_layer = change.image.broker_configs(&own);
    let layer = if change.name.is_empty() {
        &mut default
    } else {
        &mut own_layer
    };
    if change.replace_all {
        layer.clear();
    }
    for (k, v) in change.changes {
        match v {
            Some(v) => layer.insert(k.clone(), v.clone()),
            None => layer.remove(k),
        };
    }
    Some(crate::config::dynamic::overlay(
        &broker.config.properties,
        &default,
        &own_layer,
    ))
}

/// A change of the log cleaner's settings must keep them valid here (Kafka's thread-count
/// bounds and dedupe buffer floor, against the settings in force on this broker).
fn check_cleaner_change(broker: &Broker, change: &Proposed<'_>) -> Result<(), ApiError> {
    let Some(after) = settings_after(broker, change) else {
        return Ok(());
    };
    let before = crate::config::dynamic::overlay(
        &broker.config.properties,
        &change.image.broker_configs(""),
        &change
            .image
            .broker_configs(&broker.config.node_id.to_string()),
    );
    crate::config::cleaner::check_change(&before, &after)
}

/// A change of listeners' TLS stores for this broker (or every broker) must load here, as
/// Kafka loads the new stores before it takes the change; another broker checks its own when
/// it applies it (and keeps its stores if they do not load).
fn check_tls_change(broker: &Broker, change: &Proposed<'_>) -> Result<(), ApiError> {
    let Some(merged) = settings_after(broker, change) else {
        return Ok(());
    };
    for l in broker
        .config
        .listener_security
        .iter()
        .filter(|l| l.tls.is_some())
    {
        TlsSettings::from_props(&merged, &l.name)
            .and_then(|s| TlsAcceptorSource::check(&s))
            .map_err(|e| {
                ApiError::new(
                    ResponseError::InvalidRequest,
                    format!(
                        "Validation of dynamic config update of SSLFactory failed for listener \
                         {}: {e}",
                        l.name
                    ),
                )
            })?;
    }
    Ok(())
}

/// Configs of group `name` (Kafka's GROUP resource): validated as a whole after the change, as
/// Kafka's controller does, then stored in the metadata log. Any group id may carry configs,
/// whether or not the group exists yet.
fn apply_group(
    broker: &Broker,
    name: &str,
    changes: Vec<(String, Option<String>)>,
    replace_all: bool,
    validate_only: bool,
) -> Result<(), ApiError> {
    if name.is_empty() {
        return Err(ApiError::new(
            ResponseError::InvalidRequest,
            "Default group resources are not allowed.",
        ));
    }
    let mut configs = if replace_all {
        Default::default()
    } else {
        broker.controller.image().group_configs(name)
    };
    for (key, value) in &changes {
        match value {
            Some(v) => {
                configs.insert(key.clone(), v.clone());
            }
            None if replace_all => {
                return Err(ApiError::new(
                    ResponseError::InvalidConfig,
                    format!("Null value not supported for group configs: {key}"),
                ))
            }
            None => {
                configs.remove(key);
            }
        }
    }
    crate::config::group_configs::validate(&configs, &broker.groups.config)?;
    if validate_only {
        return Ok(());
    }
    broker
        .controller
        .alter_group_configs(name, &changes, replace_all)
}

/// One AlterConfigs or IncrementalAlterConfigs request: who asks, and how its changes apply.
struct Alteration<'a> {
    broker: &'a Broker,
    authz: Authz<'a>,
    /// The legacy AlterConfigs: configs not named are reset to their defaults.
    replace_all: bool,
    validate_only: bool,
}

impl<'a> Alteration<'a> {
    fn new(
        broker: &'a Broker,
        ctx: &'a RequestContext,
        replace_all: bool,
        validate_only: bool,
    ) -> Self {
        Alteration {
            broker,
            authz: ctx.authz(broker),
            replace_all,
            validate_only,
        }
    }

    /// Authorizes and applies `changes` to the resource `resource_type`/`name`.
    fn apply(
        &self,
        resource_type: i8,
        name: &str,
        changes: Result<Vec<(String, Option<String>)>, ApiError>,
    ) -> Result<(), ApiError> {
        let Self {
            broker,
            ref authz,
            replace_all,
            validate_only,
        } = *self;
        if let Some(e) =
            config_authorization(authz, AclOperation::AlterConfigs, resource_type, name)
        {
            return Err(ApiError::new(e, "Authorization failed."));
        }
        if resource_type == RESOURCE_BROKER {
            return apply_broker(broker, name, changes?, replace_all, validate_only);
        }
        if resource_type == RESOURCE_GROUP {
            return apply_group(broker, name, changes?, replace_all, validate_only);
        }
        if resource_type != RESOURCE_TOPIC {
            return Err(unsupported_resource(resource_type));
        }
        let changes = changes?;
        if changes
            .iter()
            .any(|(k, _)| k == tern_controller::topic_configs::MIRROR_NAME_CONFIG)
        {
            return Err(ApiError::new(
            ResponseError::InvalidConfig,
            "mirror.name is managed by cluster mirroring (tern mirrors --start/--stop) and cannot be altered",
        ));
        }
        broker
            .controller
            .alter_topic_configs(name, &changes, replace_all, validate_only)?;
        if !validate_only {
            broker.replicas.apply_image(&broker.controller.image());
        }
        Ok(())
    }
}

/// Answers the legacy AlterConfigs: the given set replaces every topic config (ALTER_CONFIGS
/// on each resource).
pub(crate) fn handle_legacy(
    broker: &Broker,
    ctx: &RequestContext,
    req: AlterConfigsRequest,
) -> AlterConfigsResponse {
    let alteration = Alteration::new(broker, ctx, true, req.validate_only);
    let responses = req
        .resources
        .into_iter()
        .map(|r| {
            let changes = r
                .configs
                .iter()
                .map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string())))
                .collect();
            let result = alteration.apply(r.resource_type, r.resource_name.as_str(), Ok(changes));
            alter_configs_response::AlterConfigsResourceResponse::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name)
                .with_result(result)
        })
        .collect();
    AlterConfigsResponse::default().with_responses(responses)
}

fn incremental_changes(
    broker: &Broker,
    resource_type: i8,
    name: &str,
    ops: &[kafka_protocol::messages::incremental_alter_configs_request::AlterableConfig],
) -> Result<Vec<(String, Option<String>)>, ApiError> {
    use tern_controller::topic_configs::{topic_config, ConfigType};
    let image = broker.controller.image();
    let current = match resource_type {
        RESOURCE_BROKER => image.broker_configs(name),
        RESOURCE_GROUP => image.group_configs(name),
        _ => image.topic_configs(name),
    };
    let mut out = Vec::with_capacity(ops.len());
    for op in ops {
        let name = op.name.to_string();
        let value = op.value.as_ref().map(|v| v.to_string());
        let list = |v: &Option<String>| -> Vec<String> {
            v.as_deref()
                .unwrap_or("")
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        };
        let change = match op.config_operation {
            OP_SET => (name, value),
            OP_DELETE => (name, None),
            OP_APPEND | OP_SUBTRACT => {
                let kind = match resource_type {
                    RESOURCE_BROKER => broker_config(&name).map(|d| d.kind),
                    RESOURCE_GROUP => {
                        crate::config::group_configs::group_config(&name).map(|d| d.kind)
                    }
                    _ => topic_config(&name).map(|d| d.kind),
                };
                if kind != Some(ConfigType::List) {
                    return Err(ApiError::new(
                        ResponseError::InvalidConfig,
                        format!(
                            "Config {name} is not a list; APPEND and SUBTRACT apply to lists only"
                        ),
                    ));
                }
                let mut items = list(&current.get(&name).cloned());
                for item in list(&value) {
                    if op.config_operation == OP_APPEND {
                        if !items.contains(&item) {
                            items.push(item);
                        }
                    } else {
                        items.retain(|i| *i != item);
                    }
                }
                (name, Some(items.join(",")))
            }
            other => {
                return Err(ApiError::new(
                    ResponseError::InvalidRequest,
                    format!("Unknown config operation {other}"),
                ))
            }
        };
        out.push(change);
    }
    Ok(out)
}

/// Answers IncrementalAlterConfigs (ALTER_CONFIGS on each resource).
pub(crate) fn handle_incremental(
    broker: &Broker,
    ctx: &RequestContext,
    req: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let alteration = Alteration::new(broker, ctx, false, req.validate_only);
    let responses = req
        .resources
        .into_iter()
        .map(|r| {
            let name = r.resource_name.to_string();
            let changes = incremental_changes(broker, r.resource_type, &name, &r.configs);
            let result = alteration.apply(r.resource_type, &name, changes);
            incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name)
                .with_result(result)
        })
        .collect();
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}
