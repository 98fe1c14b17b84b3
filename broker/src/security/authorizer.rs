//! The ACL authorizer: decides whether a principal, connecting from a host, may perform an
//! operation on a resource, from the ACLs of the metadata image, `super.users` and
//! `allow.everyone.if.no.acl.found`, with Apache Kafka's StandardAuthorizer semantics:
//!
//! - a super user is allowed everything;
//! - the ACLs that apply are those on the resource's exact name (LITERAL), on the literal
//!   wildcard `*`, and on every prefix of the name (PREFIXED), for the principal itself or
//!   `User:*`, from the client's IP address or `*`;
//! - any DENY that applies wins; otherwise any ALLOW that applies allows;
//! - an ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE, and an ALLOW of
//!   ALTER_CONFIGS also allows DESCRIBE_CONFIGS (a DENY implies nothing);
//! - when no ACL at all is on the resource (for any principal), the answer is
//!   `allow.everyone.if.no.acl.found` (default false); when there are ACLs but none for this
//!   principal, it is denied.

use std::collections::{BTreeMap, BTreeSet};

use tern_controller::acls::{
    AclBinding, AclOperation, AclPatternType, AclPermissionType, AclResourceType, WILDCARD_HOST,
    WILDCARD_PRINCIPAL, WILDCARD_RESOURCE,
};
use tern_controller::MetadataImage;

/// The `authorizer.class.name` setting.
pub(crate) const AUTHORIZER_CLASS_CONFIG: &str = "authorizer.class.name";
/// The `super.users` setting.
pub(crate) const SUPER_USERS_CONFIG: &str = "super.users";
/// The `allow.everyone.if.no.acl.found` setting.
pub(crate) const ALLOW_EVERYONE_CONFIG: &str = "allow.everyone.if.no.acl.found";
/// The authorizer settings Tern reads.
pub(crate) const AUTHORIZER_CONFIGS: &[&str] = &[
    AUTHORIZER_CLASS_CONFIG,
    SUPER_USERS_CONFIG,
    ALLOW_EVERYONE_CONFIG,
];

/// Values of `authorizer.class.name` that select this authorizer: Kafka's KRaft class, its
/// older ZooKeeper-era class (same semantics) and a short form; compared case-insensitively.
const ACCEPTED_CLASSES: &[&str] = &[
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
    "standard",
];

/// The authorizer's settings; the ACLs themselves live in the metadata image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorizer {
    super_users: BTreeSet<String>,
    allow_everyone_if_no_acl_found: bool,
}

fn is_set(value: Option<&String>) -> Option<&str> {
    value.map(|v| v.trim()).filter(|v| !v.is_empty())
}

impl Authorizer {
    /// An authorizer with these super users and default.
    pub fn new(super_users: &[&str], allow_everyone_if_no_acl_found: bool) -> Self {
        Authorizer {
            super_users: super_users.iter().map(|s| s.to_string()).collect(),
            allow_everyone_if_no_acl_found,
        }
    }

    /// Reads the authorizer settings: `None` when no authorizer is configured (every request is
    /// then allowed, as in Kafka without an authorizer). Every problem is returned, each naming
    /// its setting: an unknown class (fail closed: Tern cannot run someone else's authorizer),
    /// a malformed `super.users` entry or boolean, or authorizer settings without an authorizer.
    pub fn from_properties(props: &BTreeMap<String, String>) -> Result<Option<Self>, Vec<String>> {
        let class = is_set(props.get(AUTHORIZER_CLASS_CONFIG));
        let super_users = is_set(props.get(SUPER_USERS_CONFIG));
        let allow_everyone = is_set(props.get(ALLOW_EVERYONE_CONFIG));
        let mut problems = Vec::new();
        let Some(class) = class else {
            for (key, value) in [
                (SUPER_USERS_CONFIG, super_users),
                (ALLOW_EVERYONE_CONFIG, allow_everyone),
            ] {
                if value.is_some() {
                    problems.push(format!(
                        "{key} is set but {AUTHORIZER_CLASS_CONFIG} is not: without an \
                         authorizer every request is allowed; set {AUTHORIZER_CLASS_CONFIG}=\
                         org.apache.kafka.metadata.authorizer.StandardAuthorizer or remove {key}"
                    ));
                }
            }
            return if problems.is_empty() {
                Ok(None)
            } else {
                Err(problems)
            };
        };
        if !ACCEPTED_CLASSES
            .iter()
            .any(|c| c.eq_ignore_ascii_case(class))
        {
            problems.push(format!(
                "{AUTHORIZER_CLASS_CONFIG}={class} is not an authorizer Tern implements (it \
                 accepts {}); refusing to start rather than serve without it",
                ACCEPTED_CLASSES.join(", ")
            ));
        }
        let mut users = BTreeSet::new();
        for entry in super_users
            .unwrap_or("")
            .split(';')
            .map(str::trim)
            .filter(|e| !e.is_empty())
        {
            match entry.split_once(':') {
                Some((kind, name)) if !kind.trim().is_empty() && !name.trim().is_empty() => {
                    users.insert(format!("{}:{}", kind.trim(), name.trim()));
                }
                _ => problems.push(format!(
                    "{SUPER_USERS_CONFIG}: '{entry}' is not a principal of the form Type:name \
                     (e.g. User:admin; entries are separated by ';')"
                )),
            }
        }
        let allow = match allow_everyone.map(str::to_ascii_lowercase).as_deref() {
            None | Some("false") => false,
            Some("true") => true,
            Some(other) => {
                problems.push(format!(
                    "{ALLOW_EVERYONE_CONFIG}={other} is not true or false"
                ));
                false
            }
        };
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(Some(Authorizer {
            super_users: users,
            allow_everyone_if_no_acl_found: allow,
        }))
    }

    /// Whether `principal` is a super user.
    pub fn is_super_user(&self, principal: &str) -> bool {
        self.super_users.contains(principal)
    }

    /// Whether `principal` (`User:alice`) connecting from `host` (an IP address) may perform
    /// `op` on the resource `resource_type`/`name`, by the ACLs of `image`.
    pub fn authorize(
        &self,
        image: &MetadataImage,
        principal: &str,
        host: &str,
        op: AclOperation,
        resource_type: AclResourceType,
        name: &str,
    ) -> bool {
        if self.is_super_user(principal) {
            return true;
        }
        let mut resource_has_acls = false;
        let mut allowed = false;
        for acl in image.acls.values() {
            if acl.resource_type != resource_type || !pattern_applies(acl, name) {
                continue;
            }
            resource_has_acls = true;
            match entry_result(acl, principal, host, op) {
                Some(AclPermissionType::Deny) => return false,
                Some(AclPermissionType::Allow) => allowed = true,
                _ => {}
            }
        }
        if allowed {
            return true;
        }
        !resource_has_acls && self.allow_everyone_if_no_acl_found
    }

    /// Whether `principal` may perform `op` on at least one resource of `resource_type`
    /// (Kafka's `authorizeByResourceType`, used by InitProducerId for idempotent producers that
    /// may WRITE some topic): some ALLOW pattern for the principal not covered by a DENY of the
    /// same name or of one of its prefixes, and no wildcard DENY.
    pub fn authorize_any(
        &self,
        image: &MetadataImage,
        principal: &str,
        host: &str,
        op: AclOperation,
        resource_type: AclResourceType,
    ) -> bool {
        // Kafka checks a made-up resource name first, so super users (and the default of
        // allow.everyone.if.no.acl.found) win regardless of DENY ACLs.
        if self.authorize(image, principal, host, op, resource_type, "hardcode") {
            return true;
        }
        let mut deny_literal = BTreeSet::new();
        let mut deny_prefixed = BTreeSet::new();
        let mut allow = Vec::new();
        let mut allow_wildcard = false;
        for acl in image.acls.values() {
            let applies = acl.resource_type == resource_type
                && (acl.host == host || acl.host == WILDCARD_HOST)
                && (acl.principal == principal || acl.principal == WILDCARD_PRINCIPAL)
                && (acl.operation == op || acl.operation == AclOperation::All);
            if !applies {
                continue;
            }
            match (acl.permission, acl.pattern_type) {
                (AclPermissionType::Deny, AclPatternType::Literal) => {
                    if acl.resource_name == WILDCARD_RESOURCE {
                        return false;
                    }
                    deny_literal.insert(acl.resource_name.as_str());
                }
                (AclPermissionType::Deny, AclPatternType::Prefixed) => {
                    deny_prefixed.insert(acl.resource_name.as_str());
                }
                // Decided after the loop: a wildcard DENY later in the map still wins.
                (AclPermissionType::Allow, AclPatternType::Literal)
                    if acl.resource_name == WILDCARD_RESOURCE =>
                {
                    allow_wildcard = true;
                }
                (AclPermissionType::Allow, pattern) => allow.push((pattern, &acl.resource_name)),
                _ => {}
            }
        }
        if allow_wildcard {
            return true;
        }
        allow.into_iter().any(|(pattern, name)| {
            let literal_denied =
                pattern == AclPatternType::Literal && deny_literal.contains(name.as_str());
            let prefix_denied = name
                .char_indices()
                .map(|(i, c)| &name[..i + c.len_utf8()])
                .any(|prefix| deny_prefixed.contains(prefix));
            !literal_denied && !prefix_denied
        })
    }
}

/// Whether the ACL's resource pattern covers the resource `name`.
fn pattern_applies(acl: &AclBinding, name: &str) -> bool {
    match acl.pattern_type {
        AclPatternType::Literal => {
            acl.resource_name == name || acl.resource_name == WILDCARD_RESOURCE
        }
        AclPatternType::Prefixed => name.starts_with(acl.resource_name.as_str()),
        _ => false,
    }
}

/// What the ACL says about this principal, host and operation: its permission, or `None`
/// when it does not apply to them.
fn entry_result(
    acl: &AclBinding,
    principal: &str,
    host: &str,
    op: AclOperation,
) -> Option<AclPermissionType> {
    if acl.principal != principal && acl.principal != WILDCARD_PRINCIPAL {
        return None;
    }
    if acl.host != WILDCARD_HOST && acl.host != host {
        return None;
    }
    if acl.operation != AclOperation::All {
        let matches = if acl.permission == AclPermissionType::Allow {
            // Only an ALLOW implies: a DENY of READ does not deny DESCRIBE.
            match op {
                AclOperation::Describe => matches!(
                    acl.operation,
                    AclOperation::Describe
                        | AclOperation::Read
                        | AclOperation::Write
                        | AclOperation::Delete
                        | AclOperation::Alter
                ),
                AclOperation::DescribeConfigs => matches!(
                    acl.operation,
                    AclOperation::DescribeConfigs | AclOperation::AlterConfigs
                ),
                _ => acl.operation == op,
            }
        } else {
            acl.operation == op
        };
        if !matches {
            return None;
        }
    }
    Some(acl.permission)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tern_controller::MetadataRecord;
    use uuid::Uuid;
    use AclOperation::*;
    use AclPatternType::{Literal, Prefixed};
    use AclPermissionType::{Allow, Deny};
    use AclResourceType::{Cluster, Group, Topic};

    const HOST: &str = "127.0.0.1";

    struct Acl {
        rt: AclResourceType,
        name: &'static str,
        pattern: AclPatternType,
        principal: &'static str,
        host: &'static str,
        op: AclOperation,
        permission: AclPermissionType,
    }

    fn allow(name: &'static str, pattern: AclPatternType, op: AclOperation) -> Acl {
        Acl {
            rt: Topic,
            name,
            pattern,
            principal: "User:alice",
            host: "*",
            op,
            permission: Allow,
        }
    }

    fn deny(name: &'static str, pattern: AclPatternType, op: AclOperation) -> Acl {
        Acl {
            permission: Deny,
            ..allow(name, pattern, op)
        }
    }

    fn image(acls: Vec<Acl>) -> MetadataImage {
        let mut image = MetadataImage::default();
        for a in acls {
            image.apply(&MetadataRecord::Acl {
                id: Uuid::new_v4(),
                acl: AclBinding {
                    resource_type: a.rt,
                    resource_name: a.name.into(),
                    pattern_type: a.pattern,
                    principal: a.principal.into(),
                    host: a.host.into(),
                    operation: a.op,
                    permission: a.permission,
                },
            });
        }
        image
    }

    fn strict() -> Authorizer {
        Authorizer::new(&["User:admin"], false)
    }

    fn can(image: &MetadataImage, who: &str, op: AclOperation, topic: &str) -> bool {
        strict().authorize(image, who, HOST, op, Topic, topic)
    }

    #[test]
    fn without_acls_the_default_decides_and_super_users_are_always_allowed() {
        let empty = MetadataImage::default();
        assert!(!can(&empty, "User:alice", Read, "t"));
        let open = Authorizer::new(&[], true);
        assert!(open.authorize(&empty, "User:alice", HOST, Read, Topic, "t"));
        assert!(can(&empty, "User:admin", Alter, "t"));
        let denied = image(vec![Acl {
            principal: "User:admin",
            ..deny("t", Literal, All)
        }]);
        assert!(
            can(&denied, "User:admin", Read, "t"),
            "super users ignore DENY"
        );
    }

    #[test]
    fn acls_on_a_resource_for_someone_else_deny_even_with_allow_everyone() {
        let img = image(vec![Acl {
            principal: "User:bob",
            ..allow("t", Literal, Read)
        }]);
        let open = Authorizer::new(&[], true);
        assert!(!open.authorize(&img, "User:alice", HOST, Read, Topic, "t"));
        assert!(open.authorize(&img, "User:bob", HOST, Read, Topic, "t"));
        // Another resource has no ACL: the default applies there.
        assert!(open.authorize(&img, "User:alice", HOST, Read, Topic, "other"));
    }

    #[test]
    fn deny_beats_allow_wherever_each_comes_from() {
        let img = image(vec![allow("*", Literal, All), deny("pay", Prefixed, Write)]);
        assert!(can(&img, "User:alice", Write, "orders"));
        assert!(!can(&img, "User:alice", Write, "payments"));
        assert!(
            can(&img, "User:alice", Read, "payments"),
            "the DENY is for WRITE only"
        );
        let img = image(vec![allow("t", Literal, Read), deny("*", Literal, Read)]);
        assert!(!can(&img, "User:alice", Read, "t"));
        let img = image(vec![
            allow("t", Literal, Read),
            Acl {
                principal: "User:*",
                ..deny("t", Literal, All)
            },
        ]);
        assert!(
            !can(&img, "User:alice", Read, "t"),
            "a DENY for User:* applies"
        );
    }

    #[test]
    fn literal_prefixed_and_wildcard_patterns() {
        let img = image(vec![
            allow("orders", Literal, Read),
            allow("pay", Prefixed, Read),
            allow("*", Literal, Describe),
        ]);
        assert!(can(&img, "User:alice", Read, "orders"));
        assert!(
            !can(&img, "User:alice", Read, "orders-eu"),
            "literal is exact"
        );
        assert!(can(&img, "User:alice", Read, "pay"));
        assert!(can(&img, "User:alice", Read, "payments"));
        assert!(!can(&img, "User:alice", Read, "pa"));
        assert!(can(&img, "User:alice", Describe, "anything"));
        assert!(!can(&img, "User:alice", Read, "anything"));
        // A literal named "*" is the wildcard only as a literal; a prefix "*" is a plain prefix.
        let img = image(vec![allow("*", Prefixed, Read)]);
        assert!(!can(&img, "User:alice", Read, "t"));
        assert!(can(&img, "User:alice", Read, "*t"));
    }

    #[test]
    fn allow_implies_describe_and_describe_configs_but_deny_implies_nothing() {
        for op in [Read, Write, Delete, Alter] {
            let img = image(vec![allow("t", Literal, op)]);
            assert!(can(&img, "User:alice", Describe, "t"), "{op}");
            assert!(!can(&img, "User:alice", DescribeConfigs, "t"), "{op}");
        }
        let img = image(vec![allow("t", Literal, Create)]);
        assert!(!can(&img, "User:alice", Describe, "t"));
        let img = image(vec![allow("t", Literal, AlterConfigs)]);
        assert!(can(&img, "User:alice", DescribeConfigs, "t"));
        assert!(!can(&img, "User:alice", Describe, "t"));
        let img = image(vec![
            allow("t", Literal, Describe),
            deny("t", Literal, Read),
        ]);
        assert!(can(&img, "User:alice", Describe, "t"));
        assert!(!can(&img, "User:alice", Read, "t"));
        let img = image(vec![allow("t", Literal, All)]);
        assert!(can(&img, "User:alice", IdempotentWrite, "t"));
    }

    #[test]
    fn principal_host_and_resource_type_must_match() {
        let img = image(vec![
            Acl {
                host: "10.0.0.1",
                ..allow("t", Literal, Read)
            },
            Acl {
                principal: "User:*",
                ..allow("u", Literal, Read)
            },
            Acl {
                rt: Group,
                ..allow("g", Literal, Read)
            },
        ]);
        assert!(!can(&img, "User:alice", Read, "t"), "another host");
        assert!(strict().authorize(&img, "User:alice", "10.0.0.1", Read, Topic, "t"));
        assert!(can(&img, "User:bob", Read, "u"), "User:* is everyone");
        assert!(
            !can(&img, "User:alice", Read, "g"),
            "a group ACL is not a topic ACL"
        );
        assert!(strict().authorize(&img, "User:alice", HOST, Read, Group, "g"));
        assert!(!strict().authorize(&img, "User:alice", HOST, Read, Cluster, "kafka-cluster"));
    }

    #[test]
    fn authorize_any_finds_an_allow_not_shadowed_by_a_deny() {
        let a = strict();
        let any = |img: &MetadataImage| a.authorize_any(img, "User:alice", HOST, Write, Topic);
        assert!(!any(&image(vec![])));
        assert!(any(&image(vec![allow("t", Literal, Write)])));
        assert!(any(&image(vec![allow("t", Prefixed, All)])));
        assert!(!any(&image(vec![allow("t", Literal, Read)])));
        assert!(!any(&image(vec![
            allow("t", Literal, Write),
            deny("t", Literal, Write)
        ])));
        assert!(!any(&image(vec![
            allow("orders", Prefixed, Write),
            deny("ord", Prefixed, Write)
        ])));
        assert!(any(&image(vec![
            allow("orders", Prefixed, Write),
            deny("orders-eu", Prefixed, Write)
        ])));
        assert!(!any(&image(vec![
            allow("*", Literal, Write),
            deny("*", Literal, Write)
        ])));
        assert!(a.authorize_any(&image(vec![]), "User:admin", HOST, Write, Topic));
    }

    use crate::config::test_props as props;

    #[test]
    fn config_accepts_kafkas_classes_and_refuses_everything_else_by_name() {
        assert_eq!(Authorizer::from_properties(&props(&[])).unwrap(), None);
        for class in ACCEPTED_CLASSES.iter().chain(&["Standard"]) {
            let a = Authorizer::from_properties(&props(&[
                (AUTHORIZER_CLASS_CONFIG, class),
                (SUPER_USERS_CONFIG, "User:admin; User:ops"),
                (ALLOW_EVERYONE_CONFIG, "TRUE"),
            ]))
            .unwrap()
            .unwrap();
            assert!(a.is_super_user("User:admin") && a.is_super_user("User:ops"));
            assert!(a.allow_everyone_if_no_acl_found);
        }
        let e =
            Authorizer::from_properties(&props(&[(AUTHORIZER_CLASS_CONFIG, "com.example.Mine")]))
                .unwrap_err();
        assert!(e[0].contains("com.example.Mine"), "{e:?}");
        let e = Authorizer::from_properties(&props(&[
            (AUTHORIZER_CLASS_CONFIG, "standard"),
            (SUPER_USERS_CONFIG, "admin"),
            (ALLOW_EVERYONE_CONFIG, "yes"),
        ]))
        .unwrap_err();
        assert_eq!(e.len(), 2, "{e:?}");
        for key in [SUPER_USERS_CONFIG, ALLOW_EVERYONE_CONFIG] {
            let e = Authorizer::from_properties(&props(&[(key, "User:admin")])).unwrap_err();
            assert!(
                e[0].contains(key) && e[0].contains(AUTHORIZER_CLASS_CONFIG),
                "{e:?}"
            );
        }
    }
}
