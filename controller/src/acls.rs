//! ACL bindings as Apache Kafka defines them (resource pattern plus access control entry), the
//! filters that DescribeAcls and DeleteAcls match them with, and the checks a new ACL must pass.
//! The numeric codes are Kafka's wire codes (ResourceType, PatternType, AclOperation,
//! AclPermissionType), with the cluster-mirroring proposal's `CLUSTER_MIRROR` resource type.

use serde::{Deserialize, Serialize};
use tern_protocol::error::{ApiError, ResponseError};

/// The name of the one CLUSTER resource (Kafka's `kafka-cluster`).
pub const CLUSTER_RESOURCE_NAME: &str = "kafka-cluster";
/// The resource name of a literal pattern that matches every resource of its type.
pub const WILDCARD_RESOURCE: &str = "*";
/// The principal of an ACL that applies to every user.
pub const WILDCARD_PRINCIPAL: &str = "User:*";
/// The host of an ACL that applies to every host.
pub const WILDCARD_HOST: &str = "*";
/// Most ACL records one CreateAcls or DeleteAcls may produce (Kafka's MAX_RECORDS_PER_USER_OP).
pub const MAX_ACL_RECORDS_PER_OP: usize = 10_000;

/// Generates the code conversions of a Kafka ACL enum; unknown codes become `Unknown`.
macro_rules! kafka_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $code:expr, $text:expr;)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vdoc])* $variant,)*
        }

        impl $name {
            /// The value of a wire code (`Unknown` for a code Kafka does not define).
            pub fn from_code(code: i8) -> Self {
                match code {
                    $($code => $name::$variant,)*
                    _ => $name::Unknown,
                }
            }

            /// The wire code.
            pub fn code(self) -> i8 {
                match self {
                    $($name::$variant => $code,)*
                }
            }

            /// Kafka's name for it (`TOPIC`, `PREFIXED`, `DESCRIBE_CONFIGS`, ...).
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

kafka_enum!(
    /// The kind of resource an ACL protects (Kafka's ResourceType).
    AclResourceType {
        /// A code this broker does not know.
        Unknown = 0, "UNKNOWN";
        /// In a filter: every resource type.
        Any = 1, "ANY";
        /// A topic.
        Topic = 2, "TOPIC";
        /// A consumer group.
        Group = 3, "GROUP";
        /// The cluster (the one resource named `kafka-cluster`).
        Cluster = 4, "CLUSTER";
        /// A transactional id.
        TransactionalId = 5, "TRANSACTIONAL_ID";
        /// A delegation token.
        DelegationToken = 6, "DELEGATION_TOKEN";
        /// A user principal.
        User = 7, "USER";
        /// A cluster mirror (the cluster-mirroring proposal).
        ClusterMirror = 8, "CLUSTER_MIRROR";
    }
);

kafka_enum!(
    /// How an ACL's resource name matches resource names (Kafka's PatternType).
    AclPatternType {
        /// A code this broker does not know.
        Unknown = 0, "UNKNOWN";
        /// In a filter: every pattern type, names compared exactly.
        Any = 1, "ANY";
        /// In a filter: every pattern that matches the named resource.
        Match = 2, "MATCH";
        /// The name is the resource name (or `*`, every resource).
        Literal = 3, "LITERAL";
        /// The name is a prefix of resource names.
        Prefixed = 4, "PREFIXED";
    }
);

kafka_enum!(
    /// What an ACL allows or denies (Kafka's AclOperation).
    AclOperation {
        /// A code this broker does not know.
        Unknown = 0, "UNKNOWN";
        /// In a filter: every operation.
        Any = 1, "ANY";
        /// Every operation.
        All = 2, "ALL";
        /// Read.
        Read = 3, "READ";
        /// Write.
        Write = 4, "WRITE";
        /// Create.
        Create = 5, "CREATE";
        /// Delete.
        Delete = 6, "DELETE";
        /// Alter.
        Alter = 7, "ALTER";
        /// Describe.
        Describe = 8, "DESCRIBE";
        /// Broker-to-broker actions.
        ClusterAction = 9, "CLUSTER_ACTION";
        /// Describe configs.
        DescribeConfigs = 10, "DESCRIBE_CONFIGS";
        /// Alter configs.
        AlterConfigs = 11, "ALTER_CONFIGS";
        /// Idempotent produce.
        IdempotentWrite = 12, "IDEMPOTENT_WRITE";
        /// Create delegation tokens.
        CreateTokens = 13, "CREATE_TOKENS";
        /// Describe delegation tokens.
        DescribeTokens = 14, "DESCRIBE_TOKENS";
        /// Two-phase commit of transactions.
        TwoPhaseCommit = 15, "TWO_PHASE_COMMIT";
    }
);

kafka_enum!(
    /// Whether an ACL allows or denies (Kafka's AclPermissionType).
    AclPermissionType {
        /// A code this broker does not know.
        Unknown = 0, "UNKNOWN";
        /// In a filter: both.
        Any = 1, "ANY";
        /// Deny.
        Deny = 2, "DENY";
        /// Allow.
        Allow = 3, "ALLOW";
    }
);

/// One ACL: who may (or may not) do what, from where, on which resources.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AclBinding {
    /// Resource type.
    pub resource_type: AclResourceType,
    /// Resource name, prefix, or `*`.
    pub resource_name: String,
    /// LITERAL or PREFIXED.
    pub pattern_type: AclPatternType,
    /// `Type:name`, e.g. `User:alice` or `User:*`.
    pub principal: String,
    /// Client IP address, or `*`.
    pub host: String,
    /// Operation.
    pub operation: AclOperation,
    /// ALLOW or DENY.
    pub permission: AclPermissionType,
}

/// Matches ACL bindings (DescribeAcls, DeleteAcls); `None` fields match anything.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclBindingFilter {
    /// Resource type, or ANY.
    pub resource_type: AclResourceType,
    /// Resource name, or None for any.
    pub resource_name: Option<String>,
    /// Pattern type, ANY, or MATCH.
    pub pattern_type: AclPatternType,
    /// Principal, or None for any.
    pub principal: Option<String>,
    /// Host, or None for any.
    pub host: Option<String>,
    /// Operation, or ANY.
    pub operation: AclOperation,
    /// Permission, or ANY.
    pub permission: AclPermissionType,
}

impl AclBindingFilter {
    /// A filter that matches every ACL.
    pub fn any() -> Self {
        AclBindingFilter {
            resource_type: AclResourceType::Any,
            resource_name: None,
            pattern_type: AclPatternType::Any,
            principal: None,
            host: None,
            operation: AclOperation::Any,
            permission: AclPermissionType::Any,
        }
    }

    /// Whether the filter names a code this broker does not know (Kafka refuses those).
    pub fn is_unknown(&self) -> bool {
        self.resource_type == AclResourceType::Unknown
            || self.pattern_type == AclPatternType::Unknown
            || self.operation == AclOperation::Unknown
            || self.permission == AclPermissionType::Unknown
    }

    /// Whether `acl` passes the filter, with Kafka's ResourcePatternFilter semantics: MATCH
    /// selects every pattern that would apply to the named resource (the literal name, the
    /// literal wildcard, and every prefix of it).
    pub fn matches(&self, acl: &AclBinding) -> bool {
        self.matches_pattern(acl) && self.matches_entry(acl)
    }

    fn matches_pattern(&self, acl: &AclBinding) -> bool {
        if self.resource_type != AclResourceType::Any && self.resource_type != acl.resource_type {
            return false;
        }
        if !matches!(
            self.pattern_type,
            AclPatternType::Any | AclPatternType::Match
        ) && self.pattern_type != acl.pattern_type
        {
            return false;
        }
        let Some(name) = &self.resource_name else {
            return true;
        };
        if self.pattern_type == AclPatternType::Any || self.pattern_type == acl.pattern_type {
            return *name == acl.resource_name;
        }
        match acl.pattern_type {
            AclPatternType::Literal => {
                *name == acl.resource_name || acl.resource_name == WILDCARD_RESOURCE
            }
            AclPatternType::Prefixed => name.starts_with(&acl.resource_name),
            _ => false,
        }
    }

    fn matches_entry(&self, acl: &AclBinding) -> bool {
        self.principal.as_ref().is_none_or(|p| *p == acl.principal)
            && self.host.as_ref().is_none_or(|h| *h == acl.host)
            && (self.operation == AclOperation::Any || self.operation == acl.operation)
            && (self.permission == AclPermissionType::Any || self.permission == acl.permission)
    }
}

/// Checks a new ACL as Kafka's controller and AclApis do; every failure is INVALID_REQUEST.
pub fn validate_new_acl(acl: &AclBinding) -> Result<(), ApiError> {
    let invalid = |m: String| Err(ApiError::new(ResponseError::InvalidRequest, m));
    if matches!(
        acl.resource_type,
        AclResourceType::Unknown | AclResourceType::Any
    ) {
        return invalid(format!("Invalid resourceType {}", acl.resource_type));
    }
    if !matches!(
        acl.pattern_type,
        AclPatternType::Literal | AclPatternType::Prefixed
    ) {
        return invalid(format!("Invalid patternType {}", acl.pattern_type));
    }
    if matches!(acl.operation, AclOperation::Unknown | AclOperation::Any) {
        return invalid(format!("Invalid operation {}", acl.operation));
    }
    if !matches!(
        acl.permission,
        AclPermissionType::Allow | AclPermissionType::Deny
    ) {
        return invalid(format!("Invalid permissionType {}", acl.permission));
    }
    if acl.resource_name.is_empty() {
        return invalid("Resource name should not be empty".into());
    }
    if acl.resource_type == AclResourceType::Cluster && acl.resource_name != CLUSTER_RESOURCE_NAME {
        return invalid(format!(
            "The only valid name for the CLUSTER resource is {CLUSTER_RESOURCE_NAME}"
        ));
    }
    if !acl.principal.contains(':') {
        return invalid(format!(
            "Could not parse principal from `{}` (no colon is present separating the principal \
             type from the principal name)",
            acl.principal
        ));
    }
    if acl.host.is_empty() {
        return invalid("Host should not be empty (use * for every host)".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(rt: AclResourceType, name: &str, pt: AclPatternType) -> AclBinding {
        AclBinding {
            resource_type: rt,
            resource_name: name.into(),
            pattern_type: pt,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: AclOperation::Read,
            permission: AclPermissionType::Allow,
        }
    }

    #[test]
    fn codes_round_trip_and_unknown_codes_are_unknown() {
        for code in 0..=8 {
            assert_eq!(AclResourceType::from_code(code).code(), code);
        }
        for code in 0..=15 {
            assert_eq!(AclOperation::from_code(code).code(), code);
        }
        assert_eq!(AclResourceType::from_code(9), AclResourceType::Unknown);
        assert_eq!(AclPatternType::from_code(-1), AclPatternType::Unknown);
        assert_eq!(AclOperation::from_code(99), AclOperation::Unknown);
        assert_eq!(AclPermissionType::from_code(4), AclPermissionType::Unknown);
        assert_eq!(AclResourceType::ClusterMirror.code(), 8);
        assert_eq!(AclOperation::DescribeConfigs.name(), "DESCRIBE_CONFIGS");
    }

    #[test]
    fn match_filters_select_every_pattern_that_applies_to_the_name() {
        use AclPatternType::*;
        let literal = acl(AclResourceType::Topic, "foobar", Literal);
        let wildcard = acl(AclResourceType::Topic, "*", Literal);
        let prefix = acl(AclResourceType::Topic, "foo", Prefixed);
        let other = acl(AclResourceType::Topic, "bar", Prefixed);
        let group = acl(AclResourceType::Group, "foobar", Literal);
        let mut f = AclBindingFilter::any();
        f.resource_type = AclResourceType::Topic;
        f.resource_name = Some("foobar".into());
        f.pattern_type = Match;
        let hits: Vec<bool> = [&literal, &wildcard, &prefix, &other, &group]
            .iter()
            .map(|a| f.matches(a))
            .collect();
        assert_eq!(hits, [true, true, true, false, false]);
        // ANY compares names exactly, whatever the pattern type.
        f.pattern_type = Any;
        f.resource_name = Some("foo".into());
        assert!(f.matches(&prefix));
        assert!(!f.matches(&literal));
        // A concrete pattern type selects only that type.
        f.pattern_type = Literal;
        f.resource_name = None;
        assert!(f.matches(&literal) && f.matches(&wildcard) && !f.matches(&prefix));
    }

    #[test]
    fn entry_filters_compare_principal_host_operation_and_permission() {
        let a = acl(AclResourceType::Topic, "t", AclPatternType::Literal);
        let mut f = AclBindingFilter::any();
        assert!(f.matches(&a));
        f.principal = Some("User:bob".into());
        assert!(!f.matches(&a));
        f.principal = Some("User:alice".into());
        f.operation = AclOperation::Write;
        assert!(!f.matches(&a));
        f.operation = AclOperation::Read;
        f.permission = AclPermissionType::Deny;
        assert!(!f.matches(&a));
        f.permission = AclPermissionType::Allow;
        f.host = Some("*".into());
        assert!(f.matches(&a));
        assert!(!f.is_unknown());
        f.operation = AclOperation::Unknown;
        assert!(f.is_unknown());
    }

    #[test]
    fn new_acls_are_validated_as_kafka_does() {
        let ok = acl(AclResourceType::Topic, "t", AclPatternType::Literal);
        assert!(validate_new_acl(&ok).is_ok());
        let bad = [
            AclBinding {
                resource_type: AclResourceType::Any,
                ..ok.clone()
            },
            AclBinding {
                pattern_type: AclPatternType::Match,
                ..ok.clone()
            },
            AclBinding {
                operation: AclOperation::Any,
                ..ok.clone()
            },
            AclBinding {
                permission: AclPermissionType::Any,
                ..ok.clone()
            },
            AclBinding {
                resource_name: String::new(),
                ..ok.clone()
            },
            AclBinding {
                principal: "alice".into(),
                ..ok.clone()
            },
            AclBinding {
                resource_type: AclResourceType::Cluster,
                resource_name: "my-cluster".into(),
                ..ok.clone()
            },
        ];
        for b in bad {
            let e = validate_new_acl(&b).unwrap_err();
            assert_eq!(e.error, ResponseError::InvalidRequest, "{b:?}");
        }
        let cluster = AclBinding {
            resource_type: AclResourceType::Cluster,
            resource_name: CLUSTER_RESOURCE_NAME.into(),
            ..ok
        };
        assert!(validate_new_acl(&cluster).is_ok());
    }
}
