//! ACL sync, the spec's metadata-manager step 4: the source's ACLs selected by
//! `mirror.acls.include` are created here, and those here that the source no longer has are
//! deleted, every refresh interval; `mirror.acls.exclude` takes ACLs out of that again.
//!
//! Only ACLs on what the mirror mirrors are touched, so local ACLs of other topics stay as they
//! are and a failed-over topic's ACLs stop being synced: topic ACLs whose literal name, prefix
//! or `*` covers a topic this mirror still mirrors; group ACLs on groups whose offsets it
//! syncs (`mirror.groups.include`/`.exclude`); transactional-id ACLs, which producers need after
//! a failover. Cluster, user, token and cluster-mirror ACLs grant power over this cluster
//! itself and are never copied.

use std::collections::BTreeSet;

use tern_controller::acls::{AclBinding, AclBindingFilter, AclPatternType, AclResourceType};
use tern_controller::MetadataImage;

use crate::config::MirrorSettings;
use crate::fetcher::runtime::MirrorRuntime;
use crate::manager::MirrorManager;

/// Whether the mirror's ACL sync owns `acl`, given the topics it mirrors now.
fn in_scope(acl: &AclBinding, topics: &BTreeSet<&str>, settings: &MirrorSettings) -> bool {
    let name = acl.resource_name.as_str();
    match (acl.resource_type, acl.pattern_type) {
        (AclResourceType::Topic, AclPatternType::Literal) => {
            (name == "*" && !topics.is_empty()) || topics.contains(name)
        }
        (AclResourceType::Topic, AclPatternType::Prefixed) => {
            topics.iter().any(|t| t.starts_with(name))
        }
        (AclResourceType::Group, AclPatternType::Literal | AclPatternType::Prefixed) => {
            settings.groups_include.matches(name) && !settings.groups_exclude.matches(name)
        }
        (AclResourceType::TransactionalId, _) => true,
        _ => false,
    }
}

/// The filter that matches exactly one binding.
fn exact(acl: &AclBinding) -> AclBindingFilter {
    AclBindingFilter {
        resource_type: acl.resource_type,
        resource_name: Some(acl.resource_name.clone()),
        pattern_type: acl.pattern_type,
        principal: Some(acl.principal.clone()),
        host: Some(acl.host.clone()),
        operation: acl.operation,
        permission: acl.permission,
    }
}

/// What one sync pass must create and delete.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct AclChanges {
    pub create: Vec<AclBinding>,
    pub delete: Vec<AclBinding>,
}

/// Compares the source's ACLs with ours within the mirror's scope.
pub(crate) fn acl_changes<'a>(
    source: &[AclBinding],
    ours: impl IntoIterator<Item = &'a AclBinding>,
    topics: &BTreeSet<&str>,
    settings: &MirrorSettings,
) -> AclChanges {
    let wanted = |a: &AclBinding| {
        settings.acls_include.matches(a)
            && !settings.acls_exclude.matches(a)
            && in_scope(a, topics, settings)
    };
    let source: BTreeSet<&AclBinding> = source.iter().filter(|a| wanted(a)).collect();
    let ours: BTreeSet<&AclBinding> = ours.into_iter().filter(|a| wanted(a)).collect();
    AclChanges {
        create: source.difference(&ours).map(|a| (*a).clone()).collect(),
        delete: ours.difference(&source).map(|a| (*a).clone()).collect(),
    }
}

impl MirrorManager {
    /// One ACL sync pass for `mirror`, whose mirrored topics are `topics`.
    pub(crate) async fn sync_acls(
        &self,
        mirror: &str,
        rt: &mut MirrorRuntime,
        topics: &[String],
        image: &MetadataImage,
    ) {
        if topics.is_empty() {
            return;
        }
        let conn = match rt.connection(mirror).await {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!(%mirror, error = %e, "ACL sync: source unreachable");
                return;
            }
        };
        let source = match conn.acls().await {
            Ok(Some(acls)) => acls,
            // No authorizer on the source: nothing to sync, nothing to delete.
            Ok(None) => {
                tracing::debug!(%mirror, "ACL sync: the source has no ACLs to describe");
                return;
            }
            Err(e) => {
                rt.source = None;
                tracing::warn!(%mirror, error = %e, "cannot read the source's ACLs");
                return;
            }
        };
        let topics: BTreeSet<&str> = topics.iter().map(String::as_str).collect();
        let changes = acl_changes(&source, image.acls.values(), &topics, &rt.settings);
        tracing::debug!(%mirror, source = source.len(), create = changes.create.len(), delete = changes.delete.len(), "ACL sync pass");
        if !changes.create.is_empty() {
            tracing::info!(%mirror, count = changes.create.len(), "creating ACLs synced from the source");
            for (acl, result) in changes
                .create
                .iter()
                .zip(self.controller.create_acls(&changes.create))
            {
                if let Err(e) = result {
                    tracing::warn!(%mirror, ?acl, error = %e, "cannot create a synced ACL");
                }
            }
        }
        if !changes.delete.is_empty() {
            tracing::info!(%mirror, count = changes.delete.len(), "deleting ACLs the source no longer has");
            let filters: Vec<AclBindingFilter> = changes.delete.iter().map(exact).collect();
            for result in self.controller.delete_acls(&filters) {
                if let Err(e) = result {
                    tracing::warn!(%mirror, error = %e, "cannot delete a synced ACL");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use tern_controller::acls::{AclOperation, AclPermissionType};

    fn acl(t: AclResourceType, name: &str, p: AclPatternType, who: &str) -> AclBinding {
        AclBinding {
            resource_type: t,
            resource_name: name.into(),
            pattern_type: p,
            principal: who.into(),
            host: "*".into(),
            operation: AclOperation::Read,
            permission: AclPermissionType::Allow,
        }
    }

    fn settings(extra: &[(&str, &str)]) -> MirrorSettings {
        let mut c: BTreeMap<String, String> = [("bootstrap.servers", "h:1")]
            .iter()
            .chain(extra)
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        c.entry("mirror.groups.exclude".into()).or_default();
        MirrorSettings::from_configs(&c)
    }

    #[test]
    fn only_acls_on_what_the_mirror_mirrors_are_created_and_deleted() {
        use AclPatternType::{Literal, Prefixed};
        use AclResourceType::*;
        let s = settings(&[("mirror.groups.include", "app-.*")]);
        let topics: BTreeSet<&str> = ["orders", "payments"].into();
        let source = vec![
            acl(Topic, "orders", Literal, "User:bob"),
            acl(Topic, "pay", Prefixed, "User:bob"),
            acl(Topic, "*", Literal, "User:ops"),
            acl(Topic, "local-only", Literal, "User:bob"), // not mirrored here
            acl(Topic, "zzz", Prefixed, "User:bob"),       // covers no mirrored topic
            acl(Group, "app-1", Literal, "User:bob"),
            acl(Group, "other", Literal, "User:bob"), // its offsets are not synced
            acl(TransactionalId, "tx", Literal, "User:bob"),
            acl(Cluster, "kafka-cluster", Literal, "User:bob"), // never copied
        ];
        let ours = [
            acl(Topic, "orders", Literal, "User:bob"),   // already here
            acl(Topic, "orders", Literal, "User:eve"),   // gone from the source
            acl(Topic, "local-only", Literal, "User:x"), // outside the scope: kept
            acl(Cluster, "kafka-cluster", Literal, "User:admin"),
        ];
        let c = acl_changes(&source, ours.iter(), &topics, &s);
        assert_eq!(
            c.create,
            vec![
                acl(Topic, "*", Literal, "User:ops"),
                acl(Topic, "pay", Prefixed, "User:bob"),
                acl(Group, "app-1", Literal, "User:bob"),
                acl(TransactionalId, "tx", Literal, "User:bob"),
            ]
            .into_iter()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect::<Vec<_>>()
        );
        assert_eq!(c.delete, vec![acl(Topic, "orders", Literal, "User:eve")]);
        // After failover of both topics nothing on them is in scope any more.
        let none: BTreeSet<&str> = BTreeSet::new();
        let c = acl_changes(&source, ours.iter(), &none, &s);
        assert!(c.create.iter().all(|a| a.resource_type != Topic), "{c:?}");
        assert!(c.delete.is_empty(), "{c:?}");
    }

    #[test]
    fn the_include_rules_narrow_the_sync() {
        use AclPatternType::Literal;
        use AclResourceType::*;
        let s = settings(&[("mirror.acls.include", "TOPIC;*;*;*;User:bob")]);
        let topics: BTreeSet<&str> = ["orders"].into();
        let source = vec![
            acl(Topic, "orders", Literal, "User:bob"),
            acl(Topic, "orders", Literal, "User:eve"),
        ];
        let c = acl_changes(&source, [].iter(), &topics, &s);
        assert_eq!(c.create, vec![acl(Topic, "orders", Literal, "User:bob")]);
        // Excluded ACLs are neither created nor deleted.
        let s = settings(&[("mirror.acls.exclude", "*;*;*;*;User:eve")]);
        let ours = [acl(Topic, "orders", Literal, "User:eve")];
        let c = acl_changes(&source[..1], ours.iter(), &topics, &s);
        assert_eq!(c.create, vec![acl(Topic, "orders", Literal, "User:bob")]);
        assert!(c.delete.is_empty(), "{c:?}");
    }
}
