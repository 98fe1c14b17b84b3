//! `tern format`, Kafka's `kafka-storage.sh format`: writes `meta.properties` with a given (or
//! new) cluster id before the first start and, with `--add-scram`, puts SCRAM users into the
//! metadata log, so that a broker whose every listener needs SASL has a first user to log in as.

use tern_controller::{ControllerConfig, MetadataRecord};
use tern_protocol::sasl::scram::{ScramCredential, ScramMechanism, MAX_ITERATIONS, MIN_ITERATIONS};

use crate::config::{BrokerConfig, ConfigError};
use crate::meta_properties::{is_formatted, load_or_format_as, MetaProperties};
use crate::start_error::{Result, StartError};

/// Kafka's default SCRAM iteration count for `--add-scram`.
const DEFAULT_ITERATIONS: i32 = 4096;

/// One `--add-scram` user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramUser {
    /// SCRAM-SHA-256 or SCRAM-SHA-512.
    pub mechanism: ScramMechanism,
    /// User name.
    pub name: String,
    /// Clear-text password (hashed before it is stored).
    pub password: String,
    /// PBKDF2 iterations.
    pub iterations: i32,
}

/// Strips one pair of surrounding double quotes.
fn unquote(v: &str) -> &str {
    v.strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(v)
}

/// Parses Kafka's `--add-scram` syntax: `SCRAM-SHA-512=[name=alice,password=alice-secret]`,
/// optionally with `iterations=8192`; values may be double-quoted.
pub fn parse_add_scram(text: &str) -> Result<ScramUser, ConfigError> {
    let invalid = |what: &str| ConfigError::Invalid(format!("--add-scram{what}"));
    let (mechanism, rest) = text
        .split_once('=')
        .ok_or_else(|| invalid(" takes MECHANISM=[name=...,password=...]"))?;
    let mechanism = ScramMechanism::from_name(mechanism.trim()).ok_or_else(|| {
        invalid(&format!(
            ": unknown mechanism {mechanism:?} (SCRAM-SHA-256 or SCRAM-SHA-512)"
        ))
    })?;
    let Some(fields) = rest
        .trim()
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
    else {
        return Err(invalid(": the user is written [name=...,password=...]"));
    };
    let (mut name, mut password, mut iterations) = (None, None, DEFAULT_ITERATIONS);
    for field in fields.split(',') {
        let (k, v) = field
            .split_once('=')
            .ok_or_else(|| invalid(&format!(": {field:?} is not key=value")))?;
        let v = unquote(v.trim());
        match k.trim() {
            "name" => name = Some(v.to_string()),
            "password" => password = Some(v.to_string()),
            "iterations" => {
                iterations = v
                    .parse()
                    .ok()
                    .filter(|i| (MIN_ITERATIONS..=MAX_ITERATIONS).contains(i))
                    .ok_or_else(|| {
                        invalid(&format!(
                            ": iterations must be {MIN_ITERATIONS}..={MAX_ITERATIONS}"
                        ))
                    })?
            }
            // Never echo the field: it may be a mistyped password.
            _ => {
                return Err(invalid(
                    ": unknown field (name, password and iterations are known)",
                ))
            }
        }
    }
    match (name, password) {
        (Some(name), Some(password)) if !name.is_empty() && !password.is_empty() => Ok(ScramUser {
            mechanism,
            name,
            password,
            iterations,
        }),
        _ => Err(invalid(" needs a non-empty name and password")),
    }
}

/// Formats the node's storage: refuses log dirs that are formatted already unless
/// `ignore_formatted`, and then still refuses another cluster id than theirs.
pub fn format(
    config: &BrokerConfig,
    cluster_id: Option<&str>,
    users: &[ScramUser],
    ignore_formatted: bool,
) -> Result<MetaProperties> {
    if let Some(id) = cluster_id {
        validate_cluster_id(id)?;
    }
    for dir in &config.log_dirs {
        std::fs::create_dir_all(dir)
            .map_err(|e| StartError::io(format!("creating log dir {}", dir.display()), e))?;
        if is_formatted(dir) && !ignore_formatted {
            return Err(StartError::Refused(format!(
                "Log directory {} is already formatted. Use --ignore-formatted to ignore this \
                 directory and format the others.",
                dir.display()
            )));
        }
    }
    let meta = load_or_format_as(&config.log_dirs, config.node_id, cluster_id)?;
    if !users.is_empty() {
        if config.is_multi_node() {
            return Err(StartError::Refused(
                "--add-scram with controller.quorum.voters naming other nodes is not supported \
                 yet: start the cluster, then add users with kafka-configs.sh --alter"
                    .to_string(),
            ));
        }
        let controller = tern_controller::start(
            &config.quorum_config(Some(meta.cluster_id.clone())),
            ControllerConfig {
                num_partitions: config.num_partitions,
                default_replication_factor: config.default_replication_factor,
                leader_rebalance: Default::default(),
                unclean_leader_election: false,
                compaction_lag_defaults: (0, i64::MAX),
            },
        )
        .map_err(|source| StartError::Controller {
            what: "opening the metadata log",
            source,
        })?;
        let records = users
            .iter()
            .map(|u| {
                let c = ScramCredential::from_password(u.mechanism, &u.password, u.iterations);
                MetadataRecord::ScramCredential {
                    user: u.name.clone(),
                    mechanism: u.mechanism.code(),
                    salt: c.salt,
                    stored_key: c.stored_key,
                    server_key: c.server_key,
                    iterations: c.iterations,
                }
            })
            .collect();
        controller
            .alter_scram_credentials(records)
            .map_err(|e| StartError::Refused(format!("storing SCRAM users: {e}")))?;
    }
    Ok(meta)
}

/// Kafka's cluster ids are 16 bytes in URL-safe base64 without padding: 22 characters.
fn validate_cluster_id(id: &str) -> Result<()> {
    let ok = id.len() == 22
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !ok {
        return Err(ConfigError::Invalid(format!(
            "Cluster ID string {id} does not appear to be a valid UUID: 22 characters of \
             URL-safe base64 (tern random-uuid makes one)"
        ))
        .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_scram_reads_kafkas_syntax_and_refuses_the_rest() {
        let u = parse_add_scram("SCRAM-SHA-512=[name=alice,password=\"a,b=c\"]");
        // A quoted password may not hold a comma: Kafka's own tool splits on it too.
        assert!(u.is_err());
        let u = parse_add_scram("SCRAM-SHA-256=[name=alice,password=\"s3cret\",iterations=8192]")
            .unwrap();
        assert_eq!(
            u,
            ScramUser {
                mechanism: ScramMechanism::Sha256,
                name: "alice".into(),
                password: "s3cret".into(),
                iterations: 8192
            }
        );
        for bad in [
            "SCRAM-SHA-1=[name=a,password=b]",
            "SCRAM-SHA-512=name=a,password=b",
            "SCRAM-SHA-512=[name=a]",
            "SCRAM-SHA-512=[name=,password=b]",
            "SCRAM-SHA-512=[name=a,password=b,iterations=10]",
            "SCRAM-SHA-512=[name=a,pasword=b]",
        ] {
            assert!(parse_add_scram(bad).is_err(), "{bad}");
        }
        let e = parse_add_scram("SCRAM-SHA-512=[name=a,passwd=hunter2]").unwrap_err();
        assert!(!format!("{e:#}").contains("hunter2"));
    }

    #[test]
    fn cluster_ids_are_checked() {
        assert!(validate_cluster_id("MkU3OEVBNTcwNTJENDM2Qk").is_ok());
        assert!(validate_cluster_id("short").is_err());
        assert!(validate_cluster_id("MkU3OEVBNTcwNTJENDM2Q!").is_err());
    }
}
