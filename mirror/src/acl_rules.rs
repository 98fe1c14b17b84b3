//! `mirror.acls.include` and `mirror.acls.exclude`: which source ACLs a mirror syncs, in the
//! spec's rule format
//! `resourceType;resourceName;operation;permissionType;principal`, rules separated by commas.
//! `*` matches anything in a field, omitted trailing fields are `*`, and the resource name and
//! principal are regular expressions matched against the whole value.

use regex::Regex;
use tern_controller::acls::{AclBinding, AclOperation, AclPermissionType, AclResourceType};

/// One field that is either `*` or a value to compare.
#[derive(Debug, Clone)]
enum Field<T> {
    Any,
    Is(T),
}

impl<T: PartialEq> Field<T> {
    fn matches(&self, value: &T) -> bool {
        match self {
            Field::Any => true,
            Field::Is(v) => v == value,
        }
    }
}

/// One rule of `mirror.acls.include`.
#[derive(Debug, Clone)]
struct AclRule {
    resource_type: Field<AclResourceType>,
    resource_name: Option<Regex>,
    operation: Field<AclOperation>,
    permission: Field<AclPermissionType>,
    principal: Option<Regex>,
}

/// Parsed `mirror.acls.include` (or `.exclude`): the ACLs that any rule matches; the default
/// (no rule) matches none.
#[derive(Debug, Clone, Default)]
pub struct AclRules(Vec<AclRule>);

/// Why a `mirror.acls.include` (or `.exclude`) value does not parse; each names the rule's
/// field that is wrong.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AclRuleError {
    /// A rule has more than the five fields.
    #[error(
        "mirror.acls.include rule {rule:?} has more than 5 fields \
         (resourceType;resourceName;operation;permissionType;principal)"
    )]
    TooManyFields {
        /// The rule as given.
        rule: String,
    },
    /// The resource name or principal is not a valid regex.
    #[error("{field} pattern {text:?}: {error}")]
    Pattern {
        /// Which field: "resource name" or "principal".
        field: &'static str,
        /// The field as given.
        text: String,
        /// Why it does not compile (its text is part of this error's message).
        error: regex::Error,
    },
    /// The resource type, operation or permission type is not one Kafka knows.
    #[error("unknown {field} {text:?}")]
    UnknownValue {
        /// Which field: "resource type", "operation" or "permission type".
        field: &'static str,
        /// The field as given.
        text: String,
    },
}

fn regex_field(text: &str, field: &'static str) -> Result<Option<Regex>, AclRuleError> {
    if text == "*" {
        return Ok(None);
    }
    Regex::new(&format!("^(?:{text})$"))
        .map(Some)
        .map_err(|error| AclRuleError::Pattern {
            field,
            text: text.to_string(),
            error,
        })
}

fn enum_field<T>(
    text: &str,
    field: &'static str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Field<T>, AclRuleError> {
    if text == "*" {
        return Ok(Field::Any);
    }
    parse(&text.to_ascii_uppercase())
        .map(Field::Is)
        .ok_or_else(|| AclRuleError::UnknownValue {
            field,
            text: text.to_string(),
        })
}

fn by_name<T: Copy>(all: &[T], name: impl Fn(T) -> &'static str, text: &str) -> Option<T> {
    all.iter().copied().find(|v| name(*v) == text)
}

impl AclRules {
    /// Parses the config value; an empty value syncs nothing.
    pub fn parse(text: &str) -> Result<Self, AclRuleError> {
        use AclOperation as O;
        use AclResourceType as R;
        let types = [
            R::Topic,
            R::Group,
            R::Cluster,
            R::TransactionalId,
            R::DelegationToken,
            R::User,
            R::ClusterMirror,
        ];
        let ops = [
            O::All,
            O::Read,
            O::Write,
            O::Create,
            O::Delete,
            O::Alter,
            O::Describe,
            O::ClusterAction,
            O::DescribeConfigs,
            O::AlterConfigs,
            O::IdempotentWrite,
            O::CreateTokens,
            O::DescribeTokens,
            O::TwoPhaseCommit,
        ];
        let perms = [AclPermissionType::Allow, AclPermissionType::Deny];
        let mut rules = Vec::new();
        for rule in text.split(',').map(str::trim).filter(|r| !r.is_empty()) {
            let fields: Vec<&str> = rule.split(';').map(str::trim).collect();
            if fields.len() > 5 {
                return Err(AclRuleError::TooManyFields {
                    rule: rule.to_string(),
                });
            }
            let field = |i: usize| {
                fields
                    .get(i)
                    .copied()
                    .filter(|f| !f.is_empty())
                    .unwrap_or("*")
            };
            rules.push(AclRule {
                resource_type: enum_field(field(0), "resource type", |t| {
                    by_name(&types, R::name, t)
                })?,
                resource_name: regex_field(field(1), "resource name")?,
                operation: enum_field(field(2), "operation", |t| by_name(&ops, O::name, t))?,
                permission: enum_field(field(3), "permission type", |t| {
                    by_name(&perms, AclPermissionType::name, t)
                })?,
                principal: regex_field(field(4), "principal")?,
            });
        }
        Ok(AclRules(rules))
    }

    /// Whether the rules select `acl`.
    pub fn matches(&self, acl: &AclBinding) -> bool {
        self.0.iter().any(|r| {
            r.resource_type.matches(&acl.resource_type)
                && r.resource_name
                    .as_ref()
                    .is_none_or(|p| p.is_match(&acl.resource_name))
                && r.operation.matches(&acl.operation)
                && r.permission.matches(&acl.permission)
                && r.principal
                    .as_ref()
                    .is_none_or(|p| p.is_match(&acl.principal))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tern_controller::acls::AclPatternType;

    fn acl(
        t: AclResourceType,
        name: &str,
        op: AclOperation,
        perm: AclPermissionType,
        who: &str,
    ) -> AclBinding {
        AclBinding {
            resource_type: t,
            resource_name: name.into(),
            pattern_type: AclPatternType::Literal,
            principal: who.into(),
            host: "*".into(),
            operation: op,
            permission: perm,
        }
    }

    #[test]
    fn the_specs_examples_select_what_they_say() {
        use AclOperation::*;
        use AclPermissionType::*;
        use AclResourceType::*;
        let orders_read = acl(Topic, "orders-eu", Read, Allow, "User:bob");
        let pay_write = acl(Topic, "payments", Write, Deny, "User:alice");
        let group_read = acl(Group, "consumer-1", Read, Allow, "User:bob");
        let app = acl(Group, "g", Describe, Allow, "User:app-7");
        let all = [&orders_read, &pay_write, &group_read, &app];
        let picks = |rules: &str| -> Vec<bool> {
            let r = AclRules::parse(rules).unwrap();
            all.iter().map(|a| r.matches(a)).collect()
        };
        assert_eq!(picks("*"), [true, true, true, true]);
        assert_eq!(picks("TOPIC;orders.*"), [true, false, false, false]);
        assert_eq!(picks("*;*;*;*;User:alice"), [false, true, false, false]);
        assert_eq!(picks("*;*;*;*;User:app-.*"), [false, false, false, true]);
        assert_eq!(picks("TOPIC;*;READ;ALLOW"), [true, false, false, false]);
        assert_eq!(
            picks("GROUP;consumer-.*;READ;ALLOW;User:bob"),
            [false, false, true, false]
        );
        assert_eq!(
            picks("TOPIC;orders.*,*;*;*;*;User:alice"),
            [true, true, false, false]
        );
        assert_eq!(picks("topic;;read"), [true, false, false, false]);
        assert_eq!(picks(""), [false, false, false, false]);
    }

    #[test]
    fn bad_rules_are_refused_naming_the_field() {
        for (rules, says) in [
            ("BANANA", "resource type"),
            ("TOPIC;(unclosed", "resource name"),
            ("TOPIC;*;FLY", "operation"),
            ("TOPIC;*;READ;MAYBE", "permission"),
            ("*;*;*;*;User:[", "principal"),
            ("*;*;*;*;*;extra", "more than 5"),
        ] {
            let e = AclRules::parse(rules).unwrap_err().to_string();
            assert!(e.contains(says), "{rules}: {e}");
        }
    }
}
