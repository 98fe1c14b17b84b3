//! `meta.properties` in each log dir: the cluster id and node id, written on first start
//! (Kafka's `kafka-storage format`, done implicitly).

use std::path::PathBuf;

use crate::config::parse_properties;
use crate::start_error::{Result, StartError};

/// What meta.properties records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaProperties {
    /// The cluster id.
    pub cluster_id: String,
    /// The node id.
    pub node_id: i32,
}

/// A Kafka-style cluster id (22 URL-safe base64 characters, never starting with `-`).
pub fn new_cluster_id() -> String {
    tern_controller::new_cluster_id()
}

/// Whether `dir` holds a meta.properties.
pub(crate) fn is_formatted(dir: &std::path::Path) -> bool {
    dir.join("meta.properties").exists()
}

/// Reads meta.properties from every log dir, writing it where missing. All dirs must agree.
pub(crate) fn load_or_format(log_dirs: &[PathBuf], node_id: i32) -> Result<MetaProperties> {
    load_or_format_as(log_dirs, node_id, None)
}

/// As [`load_or_format`], with the cluster id to write (`tern format --cluster-id`); a dir
/// that belongs to another cluster is an error.
pub(crate) fn load_or_format_as(
    log_dirs: &[PathBuf],
    node_id: i32,
    cluster_id: Option<&str>,
) -> Result<MetaProperties> {
    let found = load_existing(log_dirs, node_id, cluster_id)?;
    write_missing(log_dirs, node_id, found, cluster_id)
}

/// Reads meta.properties from the log dirs that have one (None if none has); all must agree
/// with each other, with `node_id`, and with `cluster_id` if given.
pub(crate) fn load_existing(
    log_dirs: &[PathBuf],
    node_id: i32,
    cluster_id: Option<&str>,
) -> Result<Option<MetaProperties>> {
    let mut found: Option<MetaProperties> = None;
    for dir in log_dirs {
        let path = dir.join("meta.properties");
        if !path.exists() {
            continue;
        }
        let props = parse_properties(
            &std::fs::read_to_string(&path)
                .map_err(|e| StartError::io(format!("reading {}", path.display()), e))?,
        );
        let meta = MetaProperties {
            cluster_id: props.get("cluster.id").cloned().unwrap_or_default(),
            node_id: props
                .get("node.id")
                .and_then(|v| v.parse().ok())
                .unwrap_or(node_id),
        };
        if meta.node_id != node_id {
            return Err(StartError::Refused(format!(
                "{} belongs to node {}, but this is node.id={node_id}",
                path.display(),
                meta.node_id
            )));
        }
        if let Some(wanted) = cluster_id.filter(|w| *w != meta.cluster_id) {
            return Err(StartError::Refused(format!(
                "{} belongs to cluster {}, not {wanted}",
                path.display(),
                meta.cluster_id
            )));
        }
        if let Some(prev) = &found {
            if prev.cluster_id != meta.cluster_id {
                return Err(StartError::Refused(
                    "log dirs belong to different clusters".to_string(),
                ));
            }
        }
        found = Some(meta);
    }
    Ok(found)
}

fn write_missing(
    log_dirs: &[PathBuf],
    node_id: i32,
    found: Option<MetaProperties>,
    cluster_id: Option<&str>,
) -> Result<MetaProperties> {
    let meta = found.unwrap_or_else(|| MetaProperties {
        cluster_id: cluster_id.map_or_else(new_cluster_id, str::to_string),
        node_id,
    });
    for dir in log_dirs {
        let path = dir.join("meta.properties");
        if path.exists() {
            continue;
        }
        let text = format!(
            "#Written by tern on first start\nversion=1\ncluster.id={}\nnode.id={}\n",
            meta.cluster_id, meta.node_id
        );
        let tmp = dir.join("meta.properties.tmp");
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::File::open(&tmp)?.sync_all())
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| StartError::io(format!("writing {}", path.display()), e))?;
    }
    Ok(meta)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_once_and_keeps_the_cluster_id() {
        let dir = tempfile::tempdir().unwrap();
        let dirs = vec![dir.path().to_path_buf()];
        let a = load_or_format(&dirs, 1).unwrap();
        assert_eq!(a.cluster_id.len(), 22);
        let b = load_or_format(&dirs, 1).unwrap();
        assert_eq!(a, b);
        assert!(load_or_format(&dirs, 2).is_err());
    }
}
