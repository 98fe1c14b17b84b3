//! Which Kafka settings Tern refuses and which it ignores.
//!
//! Fail closed: a setting that changes security or safety (security protocols, SASL, TLS,
//! authorizers, a multi-node quorum) and that Tern does not implement is a startup error naming
//! it, so that a Kafka `server.properties` never silently becomes an open or unsafe broker.
//! Every other Kafka setting that Tern does not read is reported once as ignored.

use std::collections::BTreeMap;

use super::Listener;
use crate::security::authorizer::{Authorizer, AUTHORIZER_CONFIGS};
use crate::security::listener::{is_implemented_security_setting, SecurityProtocol};

/// Kafka's default `listener.security.protocol.map` (in the order Kafka describes it).
pub(crate) const DEFAULT_PROTOCOL_MAP: &str =
    "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT";

/// The security protocols Kafka knows.
const SECURITY_PROTOCOLS: &[&str] = &["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"];

/// Settings that turn on authentication, encryption or authorization in Kafka (refused when set
/// to anything but empty).
const SECURITY_KEYS: &[&str] = &[
    "authorizer.class.name",
    "super.users",
    "allow.everyone.if.no.acl.found",
    "principal.builder.class",
    "security.providers",
    "connections.max.reauth.ms",
    "delegation.token.secret.key",
    "delegation.token.master.key",
    "zookeeper.set.acl",
];

/// Prefixes of the same kind: every TLS and SASL setting, per-listener overrides among them.
const SECURITY_PREFIXES: &[&str] = &[
    "ssl.",
    "sasl.",
    "listener.name.",
    "authorizer.",
    "delegation.token.",
    "zookeeper.ssl.",
];

fn is_set(value: &str) -> bool {
    !value.trim().is_empty()
}

/// Parses `listener.security.protocol.map` (Kafka's default when absent).
fn protocol_map(props: &BTreeMap<String, String>) -> Result<BTreeMap<String, String>, String> {
    let text = props
        .get("listener.security.protocol.map")
        .map(String::as_str)
        .unwrap_or(DEFAULT_PROTOCOL_MAP);
    let mut map = BTreeMap::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((name, protocol)) = entry.split_once(':') else {
            return Err(format!(
                "listener.security.protocol.map: '{entry}' is not LISTENER_NAME:PROTOCOL"
            ));
        };
        let protocol = protocol.trim().to_ascii_uppercase();
        if !SECURITY_PROTOCOLS.contains(&protocol.as_str()) {
            return Err(format!(
                "listener.security.protocol.map: unknown security protocol '{protocol}'"
            ));
        }
        map.insert(name.trim().to_ascii_uppercase(), protocol);
    }
    Ok(map)
}

/// The security protocol of a listener name, as Kafka resolves it.
pub(crate) fn listener_protocol(
    props: &BTreeMap<String, String>,
    name: &str,
    controller_names: &[String],
) -> Option<String> {
    protocol_map(props)
        .ok()
        .and_then(|map| protocol_of(name, &map, controller_names))
}

fn protocol_of(
    name: &str,
    map: &BTreeMap<String, String>,
    controller_names: &[String],
) -> Option<String> {
    match map.get(name) {
        Some(p) => Some(p.clone()),
        // Kafka lets an unmapped controller listener default to PLAINTEXT.
        None if controller_names.iter().any(|c| c == name) => Some("PLAINTEXT".into()),
        None => None,
    }
}

/// What a start is checked against: the properties, this node's id, the listener lists by the
/// setting that gives them, and the controller listener names.
#[derive(Clone, Copy)]
pub(crate) struct StartSettings<'a> {
    pub(crate) props: &'a BTreeMap<String, String>,
    pub(crate) node_id: i32,
    pub(crate) listeners: &'a [(&'a str, &'a [Listener])],
    pub(crate) controller_names: &'a [String],
}

/// Every reason to refuse starting with these settings; empty when Tern can honour them all.
pub(crate) fn refused_settings(settings: StartSettings<'_>) -> Vec<String> {
    let StartSettings {
        props,
        listeners,
        controller_names,
        ..
    } = settings;
    let mut problems = Vec::new();
    match protocol_map(props) {
        Err(e) => problems.push(e),
        Ok(map) => {
            for (key, list) in listeners {
                for l in list.iter() {
                    match protocol_of(&l.name, &map, controller_names) {
                        None => problems.push(format!(
                            "{key}: listener name {} has no security protocol in \
                             listener.security.protocol.map",
                            l.name
                        )),
                        Some(p) if SecurityProtocol::served(&p).is_none() => {
                            problems.push(format!(
                                "{key}: listener {}://{}:{} uses security protocol {p}, which \
                                 Tern does not implement yet (PLAINTEXT and SASL_PLAINTEXT \
                                 listeners are served)",
                                l.name, l.host, l.port
                            ))
                        }
                        Some(_) => {}
                    }
                }
            }
            if let Some(name) = props.get("inter.broker.listener.name") {
                let name = name.trim().to_ascii_uppercase();
                match protocol_of(&name, &map, controller_names) {
                    Some(p) if SecurityProtocol::served(&p).is_some() => {}
                    Some(p) => problems.push(format!(
                        "inter.broker.listener.name={name} uses security protocol {p}, which \
                         Tern does not implement yet"
                    )),
                    None => problems.push(format!(
                        "inter.broker.listener.name={name} has no security protocol in \
                         listener.security.protocol.map"
                    )),
                }
            }
        }
    }
    if let Some(p) = props.get("security.inter.broker.protocol") {
        if SecurityProtocol::served(&p.trim().to_ascii_uppercase()).is_none() {
            problems.push(format!(
                "security.inter.broker.protocol={p}: Tern does not implement it yet (PLAINTEXT \
                 and SASL_PLAINTEXT are served)"
            ));
        }
    }
    if let Err(authorizer_problems) = Authorizer::from_properties(props) {
        problems.extend(authorizer_problems);
    }
    for (key, value) in props {
        if AUTHORIZER_CONFIGS.contains(&key.as_str()) {
            continue; // checked by Authorizer::from_properties just above
        }
        let security = (SECURITY_KEYS.contains(&key.as_str())
            || SECURITY_PREFIXES.iter().any(|p| key.starts_with(p)))
            && !is_implemented_security_setting(key);
        if security && is_set(value) {
            problems.push(format!(
                "{key} is a security setting that Tern does not implement yet; remove it \
                 (Tern would otherwise serve without the protection it asks for)"
            ));
        }
    }
    problems.extend(quorum_problems(settings));
    problems
}

/// Parses `controller.quorum.voters` (`id@host:port,...`) into (node id, host:port).
pub(crate) fn parse_voters(value: &str) -> Result<Vec<(i32, String)>, String> {
    let mut voters: Vec<(i32, String)> = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|v| !v.is_empty()) {
        let bad = || format!("controller.quorum.voters: '{entry}' is not id@host:port");
        let (id, addr) = entry.split_once('@').ok_or_else(bad)?;
        let id: i32 = id.trim().parse().map_err(|_| bad())?;
        if id < 0 {
            return Err(bad());
        }
        let (host, port) = addr.rsplit_once(':').ok_or_else(bad)?;
        port.parse::<u16>().map_err(|_| bad())?;
        if host.is_empty() {
            return Err(bad());
        }
        if voters.iter().any(|(v, _)| *v == id) {
            return Err(format!(
                "controller.quorum.voters: node id {id} is listed twice"
            ));
        }
        voters.push((id, addr.to_string()));
    }
    Ok(voters)
}

/// The quorum settings that Tern cannot honour: roles it does not know, a voters list that
/// does not parse or leaves this node out, a controller listener that is missing or secured.
fn quorum_problems(settings: StartSettings<'_>) -> Vec<String> {
    let StartSettings {
        props,
        node_id,
        listeners,
        controller_names,
    } = settings;
    let mut problems = Vec::new();
    let mut roles: Vec<String> = props
        .get("process.roles")
        .map(String::as_str)
        .unwrap_or("broker,controller")
        .split(',')
        .map(|r| r.trim().to_ascii_lowercase())
        .filter(|r| !r.is_empty())
        .collect();
    roles.sort();
    roles.dedup();
    if roles.is_empty() || roles.iter().any(|r| r != "broker" && r != "controller") {
        problems.push(format!(
            "process.roles={}: the roles are broker, controller, or both",
            roles.join(",")
        ));
    }
    let is_controller = roles.iter().any(|r| r == "controller");
    let voters = match props.get("controller.quorum.voters").filter(|v| is_set(v)) {
        None => Vec::new(),
        Some(v) => match parse_voters(v) {
            Ok(v) => v,
            Err(e) => {
                problems.push(e);
                Vec::new()
            }
        },
    };
    let own_controller_listeners: Vec<&Listener> = listeners
        .iter()
        .filter(|(key, _)| *key == "listeners")
        .flat_map(|(_, list)| list.iter())
        .filter(|l| controller_names.contains(&l.name))
        .collect();
    if voters.is_empty() {
        if !is_controller {
            problems.push(
                "process.roles=broker needs controller.quorum.voters to find the controllers"
                    .into(),
            );
        }
    } else if is_controller {
        if !voters.iter().any(|(id, _)| *id == node_id) {
            problems.push(format!(
                "controller.quorum.voters does not list this controller (node.id={node_id})"
            ));
        }
        if voters.len() > 1 && own_controller_listeners.is_empty() {
            problems.push(format!(
                "a controller of a quorum of several needs a listener named by \
                 controller.listener.names ({}) in listeners",
                controller_names.join(",")
            ));
        }
    } else if voters.iter().any(|(id, _)| *id == node_id) {
        problems.push(format!(
            "node.id={node_id} is a voter in controller.quorum.voters but process.roles has no controller"
        ));
    }
    // Inter-node traffic is plaintext only so far: a secured controller listener is refused.
    if let Ok(map) = protocol_map(props) {
        for l in &own_controller_listeners {
            if let Some(protocol) = protocol_of(&l.name, &map, controller_names) {
                if protocol != "PLAINTEXT" {
                    problems.push(format!(
                        "controller listener {}: security protocol {protocol} between \
                         controllers is not implemented yet (PLAINTEXT only)",
                        l.name
                    ));
                }
            }
        }
    }
    // Replication between brokers goes over the inter-broker listener without credentials or
    // TLS so far: a secured one in a cluster of several brokers is refused.
    let several = voters.iter().any(|(id, _)| *id != node_id) || !is_controller;
    if several {
        if let Ok(map) = protocol_map(props) {
            let inter_broker = props
                .get("inter.broker.listener.name")
                .map(|n| n.trim().to_ascii_uppercase())
                .or_else(|| {
                    listeners
                        .iter()
                        .filter(|(key, _)| *key == "listeners")
                        .flat_map(|(_, list)| list.iter())
                        .find(|l| !controller_names.contains(&l.name))
                        .map(|l| l.name.clone())
                });
            if let Some(name) = inter_broker {
                if let Some(protocol) = protocol_of(&name, &map, controller_names) {
                    if protocol != "PLAINTEXT" {
                        problems.push(format!(
                            "inter.broker.listener.name: listener {name} uses {protocol}; replication between brokers over {protocol} is not implemented yet (PLAINTEXT only)"
                        ));
                    }
                }
            }
        }
    }
    if let Some(servers) = props
        .get("controller.quorum.bootstrap.servers")
        .filter(|v| is_set(v) && voters.is_empty())
    {
        // Kafka's sample server.properties points this at the node's own controller listener.
        let is_local = |host: &str| {
            host == "localhost" || host == "::1" || host.starts_with("127.") || host.is_empty()
        };
        let only_self = servers
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .all(|s| {
                let Some((host, port)) = s.rsplit_once(':') else {
                    return false;
                };
                let host = host.trim_start_matches('[').trim_end_matches(']');
                port.parse::<u16>().is_ok_and(|p| {
                    own_controller_listeners
                        .iter()
                        .any(|l| l.port == p && (l.host == host || is_local(host)))
                })
            });
        if !only_self {
            problems.push(format!(
                "controller.quorum.bootstrap.servers={servers}: a dynamic quorum (KIP-853) is \
                 not implemented; list the voters in controller.quorum.voters"
            ));
        }
    }
    problems
}

/// Kafka settings given that Tern does not read (sorted): to be logged once as ignored.
pub(crate) fn ignored_settings(props: &BTreeMap<String, String>) -> Vec<String> {
    props
        .keys()
        .filter(|key| {
            super::catalog::broker_config(key).is_none()
                && !is_implemented_security_setting(key)
                && !key.starts_with("mirror.")
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::BrokerConfig;

    use crate::config::test_props as props;

    fn refusal(pairs: &[(&str, &str)]) -> String {
        match BrokerConfig::from_properties(props(pairs)) {
            Ok(_) => panic!("{pairs:?} was accepted"),
            Err(e) => format!("{e:#}"),
        }
    }

    #[test]
    fn a_secured_inter_broker_listener_of_a_cluster_is_refused() {
        let unclean =
            BrokerConfig::from_properties(props(&[("unclean.leader.election.enable", "true")]))
                .unwrap();
        assert!(unclean.unclean_leader_election);
        fn cluster(listeners: &str) -> Vec<(&str, &str)> {
            vec![
                ("node.id", "1"),
                ("listeners", listeners),
                (
                    "controller.quorum.voters",
                    "1@127.0.0.1:29093,2@127.0.0.1:29094",
                ),
                (
                    "listener.security.protocol.map",
                    "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
                ),
                ("sasl.enabled.mechanisms", "PLAIN"),
                (
                    "listener.name.sasl_plaintext.plain.sasl.jaas.config",
                    "org.apache.kafka.common.security.plain.PlainLoginModule required \
                     user_admin=\"pw\";",
                ),
            ]
        }
        let e = refusal(&cluster(
            "SASL_PLAINTEXT://127.0.0.1:29092,CONTROLLER://127.0.0.1:29093",
        ));
        assert!(
            e.contains("replication between brokers over SASL_PLAINTEXT"),
            "{e}"
        );
        // A PLAINTEXT listener first is the inter-broker one: accepted.
        BrokerConfig::from_properties(props(&cluster(
            "PLAINTEXT://127.0.0.1:29091,SASL_PLAINTEXT://127.0.0.1:29092,CONTROLLER://127.0.0.1:29093",
        )))
        .unwrap();
    }

    #[test]
    fn secured_listeners_and_authorizers_are_startup_errors_naming_them() {
        let e = refusal(&[
            ("listeners", "SASL_PLAINTEXT://127.0.0.1:29092"),
            ("authorizer.class.name", "com.example.ThirdPartyAuthorizer"),
            ("super.users", "admin"),
        ]);
        assert!(e.contains("SASL_PLAINTEXT://127.0.0.1:29092"), "{e}");
        assert!(e.contains("com.example.ThirdPartyAuthorizer"), "{e}");
        assert!(e.contains("super.users: 'admin'"), "{e}");
        assert!(e.contains("sasl.enabled.mechanisms"), "{e}");
        let e = refusal(&[("super.users", "User:admin")]);
        assert!(
            e.contains("super.users") && e.contains("authorizer.class.name"),
            "{e}"
        );
        let e = refusal(&[("authorizer.allow.something", "x")]);
        assert!(e.contains("authorizer.allow.something"), "{e}");
        for (key, value) in [
            ("listeners", "SSL://127.0.0.1:9093"),
            ("listeners", "SASL_SSL://127.0.0.1:9093"),
            ("ssl.key.password", "hunter2"),
            ("principal.builder.class", "com.example.Builder"),
            ("sasl.jaas.config", "org.apache..."),
            ("sasl.kerberos.service.name", "kafka"),
            (
                "listener.name.plaintext.gssapi.sasl.jaas.config",
                "org.apache...",
            ),
            ("allow.everyone.if.no.acl.found", "true"),
            ("security.inter.broker.protocol", "SASL_TLS"),
        ] {
            let e = refusal(&[(key, value)]);
            assert!(e.contains(key) || e.contains(value), "{key}: {e}");
        }
    }

    #[test]
    fn custom_listener_names_resolve_through_the_protocol_map() {
        let e = refusal(&[
            (
                "listeners",
                "INTERNAL://127.0.0.1:9092,EXTERNAL://127.0.0.1:9093",
            ),
            (
                "listener.security.protocol.map",
                "INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL",
            ),
        ]);
        // EXTERNAL resolves to SASL_SSL, which needs mechanisms and a keystore.
        assert!(
            e.contains("EXTERNAL://127.0.0.1:9093") && e.contains("sasl.enabled.mechanisms"),
            "{e}"
        );
        assert!(!e.contains("INTERNAL://"), "{e}");
        let e = refusal(&[("listeners", "CLIENTS://127.0.0.1:9092")]);
        assert!(
            e.contains("CLIENTS") && e.contains("no security protocol"),
            "{e}"
        );
        let e = refusal(&[
            ("listeners", "PLAINTEXT://127.0.0.1:9092"),
            ("advertised.listeners", "SSL://kafka.example:9093"),
        ]);
        assert!(e.contains("advertised.listeners"), "{e}");
        let e = refusal(&[("listener.security.protocol.map", "PLAINTEXT:TLS")]);
        assert!(e.contains("TLS"), "{e}");
        let c = BrokerConfig::from_properties(props(&[
            ("listeners", "CLIENTS://127.0.0.1:0"),
            ("listener.security.protocol.map", "CLIENTS:PLAINTEXT"),
            ("inter.broker.listener.name", "CLIENTS"),
        ]))
        .unwrap();
        assert_eq!(c.listeners[0].name, "CLIENTS");
    }

    #[test]
    fn quorum_settings_that_cannot_work_are_refused_naming_them() {
        // A controller of three without a controller listener.
        let e = refusal(&[("controller.quorum.voters", "1@a:9093,2@b:9093,3@c:9093")]);
        assert!(e.contains("controller.listener.names"), "{e}");
        // A controller that is not among the voters.
        let e = refusal(&[("node.id", "2"), ("controller.quorum.voters", "1@a:9093")]);
        assert!(e.contains("does not list this controller"), "{e}");
        // A broker with no way to find the controllers.
        let e = refusal(&[("process.roles", "broker")]);
        assert!(e.contains("process.roles=broker"), "{e}");
        let e = refusal(&[("process.roles", "broker,zookeeper")]);
        assert!(e.contains("process.roles"), "{e}");
        // A broker-only node that claims a voter's id.
        let e = refusal(&[
            ("process.roles", "broker"),
            ("node.id", "1"),
            ("controller.quorum.voters", "1@a:9093"),
        ]);
        assert!(e.contains("no controller"), "{e}");
        for bad in ["1@a", "x@a:9093", "1@a:9093,1@b:9093", "1@:9093", "-2@a:1"] {
            let e = refusal(&[("controller.quorum.voters", bad)]);
            assert!(e.contains("controller.quorum.voters"), "{bad}: {e}");
        }
        let e = refusal(&[
            ("listeners", "PLAINTEXT://:9092,CONTROLLER://:9093"),
            ("controller.quorum.bootstrap.servers", "other:9093"),
        ]);
        assert!(e.contains("controller.quorum.bootstrap.servers"), "{e}");
        let e = refusal(&[
            ("listeners", "PLAINTEXT://:9092,CONTROLLER://:9093"),
            (
                "listener.security.protocol.map",
                "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL",
            ),
            ("controller.quorum.voters", "1@a:9093,2@b:9093,3@c:9093"),
        ]);
        assert!(e.contains("between controllers"), "{e}");
    }

    #[test]
    fn three_voters_and_brokers_alone_are_accepted() {
        let c = BrokerConfig::from_properties(props(&[
            ("node.id", "2"),
            (
                "listeners",
                "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:19093",
            ),
            (
                "controller.quorum.voters",
                "1@127.0.0.1:19092,2@127.0.0.1:19093,3@127.0.0.1:19094",
            ),
        ]))
        .unwrap();
        assert_eq!(c.quorum_voters.len(), 3);
        assert!(c.is_controller() && c.is_broker());
        assert_eq!(c.controller_listener.as_ref().unwrap().port, 19093);
        let b = BrokerConfig::from_properties(props(&[
            ("node.id", "7"),
            ("process.roles", "broker"),
            ("controller.quorum.voters", "1@127.0.0.1:19092"),
        ]))
        .unwrap();
        assert!(b.is_broker() && !b.is_controller());
        let c = BrokerConfig::from_properties(props(&[
            ("node.id", "1"),
            ("process.roles", "controller"),
            ("listeners", "CONTROLLER://127.0.0.1:19092"),
            ("controller.quorum.voters", "1@127.0.0.1:19092"),
        ]))
        .unwrap();
        assert!(!c.is_broker() && c.listeners.is_empty());
    }

    #[test]
    fn kafkas_sample_kraft_server_properties_starts_and_names_what_it_ignores() {
        // The settings of Apache Kafka 4.x's config/server.properties.
        let sample = props(&[
            ("process.roles", "broker,controller"),
            ("node.id", "1"),
            ("controller.quorum.bootstrap.servers", "localhost:9093"),
            ("listeners", "PLAINTEXT://:9092,CONTROLLER://:9093"),
            ("inter.broker.listener.name", "PLAINTEXT"),
            (
                "advertised.listeners",
                "PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093",
            ),
            ("controller.listener.names", "CONTROLLER"),
            (
                "listener.security.protocol.map",
                "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
            ),
            ("num.network.threads", "3"),
            ("num.io.threads", "8"),
            ("socket.send.buffer.bytes", "102400"),
            ("socket.receive.buffer.bytes", "102400"),
            ("socket.request.max.bytes", "104857600"),
            ("log.dirs", "/tmp/kraft-combined-logs"),
            ("num.partitions", "1"),
            ("num.recovery.threads.per.data.dir", "1"),
            ("offsets.topic.replication.factor", "1"),
            ("share.coordinator.state.topic.replication.factor", "1"),
            ("share.coordinator.state.topic.min.isr", "1"),
            ("transaction.state.log.replication.factor", "1"),
            ("transaction.state.log.min.isr", "1"),
            ("log.retention.hours", "168"),
            ("log.segment.bytes", "1073741824"),
            ("log.retention.check.interval.ms", "300000"),
        ]);
        let c = BrokerConfig::from_properties(sample.clone()).unwrap();
        assert_eq!(c.advertised().name, "PLAINTEXT");
        assert_eq!(c.advertised().host, "localhost");
        assert_eq!(
            ignored_settings(&sample),
            vec![
                "num.io.threads",
                "num.network.threads",
                "share.coordinator.state.topic.min.isr",
                "share.coordinator.state.topic.replication.factor",
                "socket.receive.buffer.bytes",
                "socket.send.buffer.bytes",
            ]
        );
    }

    #[test]
    fn kafkas_authorizer_settings_start_an_authorizer_and_are_not_ignored() {
        let p = props(&[
            (
                "authorizer.class.name",
                "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            ),
            ("super.users", "User:admin;User:ops"),
            ("allow.everyone.if.no.acl.found", "true"),
        ]);
        let c = BrokerConfig::from_properties(p.clone()).unwrap();
        let a = c.authorizer.expect("an authorizer");
        assert!(a.is_super_user("User:ops"));
        assert!(ignored_settings(&p).is_empty());
        for class in ["kafka.security.authorizer.AclAuthorizer", "standard"] {
            let c = BrokerConfig::from_properties(props(&[("authorizer.class.name", class)]));
            assert!(c.unwrap().authorizer.is_some(), "{class}");
        }
        assert!(BrokerConfig::from_properties(BTreeMap::new())
            .unwrap()
            .authorizer
            .is_none());
    }

    #[test]
    fn empty_security_values_are_kafkas_defaults_and_accepted() {
        BrokerConfig::from_properties(props(&[
            ("authorizer.class.name", ""),
            ("super.users", " "),
            ("security.inter.broker.protocol", "PLAINTEXT"),
        ]))
        .unwrap();
    }
}
