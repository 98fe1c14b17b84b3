//! The principal of a TLS client certificate, as Kafka's DefaultKafkaPrincipalBuilder derives
//! it: the subject's distinguished name in RFC 2253 form (`CN=alice,OU=eng,O=Acme,C=US`), mapped
//! by `ssl.principal.mapping.rules` (`RULE:pattern/replacement/[LU]`, `DEFAULT`).

use regex::Regex;
use x509_parser::der_parser::oid::Oid;
use x509_parser::prelude::{FromDer, X509Certificate};

/// One `ssl.principal.mapping.rules` entry.
#[derive(Debug, Clone)]
enum Rule {
    /// The distinguished name as it is.
    Default,
    /// A pattern that must match the whole name, its replacement and a case change.
    Replace {
        pattern: Regex,
        replacement: String,
        case: Option<char>,
    },
}

/// Parsed `ssl.principal.mapping.rules`.
#[derive(Debug, Clone)]
pub struct PrincipalMapper {
    rules: Vec<Rule>,
}

impl PartialEq for PrincipalMapper {
    fn eq(&self, other: &Self) -> bool {
        format!("{:?}", self.rules) == format!("{:?}", other.rules)
    }
}

impl Eq for PrincipalMapper {}

/// Reads one `/`-terminated part of a rule, keeping backslash escapes.
fn take_part(text: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                let (_, next) = chars.next()?;
                out.push('\\');
                out.push(next);
            }
            '/' => return Some((out, &text[i + 1..])),
            c => out.push(c),
        }
    }
    None
}

impl PrincipalMapper {
    /// Parses the rules (Kafka's default is `DEFAULT`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut rules = Vec::new();
        let mut rest = text.trim();
        // Java's `$1` is Rust's `${1}` (a bare `$1a` would name group "1a").
        let dollar = Regex::new(r"\$(\d+)").expect("a valid literal pattern");
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix("DEFAULT") {
                rules.push(Rule::Default);
                rest = after;
            } else if let Some(after) = rest.strip_prefix("RULE:") {
                let bad = || format!("ssl.principal.mapping.rules: invalid rule '{rest}'");
                let (pattern, after) = take_part(after).ok_or_else(bad)?;
                let (replacement, after) = take_part(after).ok_or_else(bad)?;
                let (case, after) = match after.chars().next() {
                    Some(c @ ('L' | 'U')) => (Some(c), &after[1..]),
                    _ => (None, after),
                };
                let pattern = Regex::new(&format!("^(?:{pattern})$"))
                    .map_err(|e| format!("ssl.principal.mapping.rules: {e}"))?;
                let replacement = dollar
                    .replace_all(&replacement, "$${$1}")
                    .replace("\\/", "/");
                rules.push(Rule::Replace {
                    pattern,
                    replacement,
                    case,
                });
                rest = after;
            } else {
                return Err(format!(
                    "ssl.principal.mapping.rules: invalid rule '{rest}'"
                ));
            }
            rest = rest.trim_start();
            match rest.strip_prefix(',') {
                Some(after) => rest = after.trim_start(),
                None if rest.is_empty() => {}
                None => {
                    return Err(format!(
                        "ssl.principal.mapping.rules: invalid rule '{rest}'"
                    ))
                }
            }
        }
        if rules.is_empty() {
            rules.push(Rule::Default);
        }
        Ok(PrincipalMapper { rules })
    }

    /// The short name for a distinguished name: the first rule that applies.
    pub fn map(&self, dn: &str) -> Result<String, String> {
        for rule in &self.rules {
            match rule {
                Rule::Default => return Ok(dn.to_string()),
                Rule::Replace {
                    pattern,
                    replacement,
                    case,
                } => {
                    if pattern.is_match(dn) {
                        let name = pattern.replace_all(dn, replacement.as_str()).into_owned();
                        return Ok(match case {
                            Some('L') => name.to_lowercase(),
                            Some('U') => name.to_uppercase(),
                            _ => name,
                        });
                    }
                }
            }
        }
        Err(format!("No rules apply to {dn}, rules {:?}", self.rules))
    }
}

/// RFC 2253 keywords for the attribute types Java's X500Principal names; others are dotted OIDs.
fn keyword(oid: &Oid<'_>) -> Option<&'static str> {
    Some(match oid.to_id_string().as_str() {
        "2.5.4.3" => "CN",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "2.5.4.9" => "STREET",
        "0.9.2342.19200300.100.1.25" => "DC",
        "0.9.2342.19200300.100.1.1" => "UID",
        _ => return None,
    })
}

fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for (i, c) in value.chars().enumerate() {
        let edge =
            (i == 0 && (c == ' ' || c == '#')) || (i + 1 == value.chars().count() && c == ' ');
        if edge || matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The subject of a DER certificate in RFC 2253 form (most specific RDN first).
pub(crate) fn subject_dn(der: &[u8]) -> Result<String, String> {
    let (_, cert) = X509Certificate::from_der(der).map_err(|e| format!("bad certificate: {e}"))?;
    let mut rdns = Vec::new();
    for rdn in cert.subject().iter() {
        let mut parts = Vec::new();
        for attr in rdn.iter() {
            let value = attr
                .as_str()
                .map_err(|_| "certificate subject is not text")?;
            let part = match keyword(attr.attr_type()) {
                Some(k) => format!("{k}={}", escape(value)),
                None => format!("{}={}", attr.attr_type().to_id_string(), escape(value)),
            };
            parts.push(part);
        }
        rdns.push(parts.join("+"));
    }
    rdns.reverse();
    Ok(rdns.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_rule_keeps_the_name() {
        let m = PrincipalMapper::parse("DEFAULT").unwrap();
        assert_eq!(m.map("CN=alice,OU=eng").unwrap(), "CN=alice,OU=eng");
        assert_eq!(PrincipalMapper::parse("").unwrap(), m);
    }

    #[test]
    fn kafka_style_rules_apply_in_order() {
        let m = PrincipalMapper::parse(
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$1@$2/L, DEFAULT",
        )
        .unwrap();
        assert_eq!(
            m.map("CN=kafka-mirror,OU=ServiceUsers,O=Acme").unwrap(),
            "kafka-mirror"
        );
        assert_eq!(m.map("CN=Alice,OU=ENG,O=Acme").unwrap(), "alice@eng");
        assert_eq!(m.map("CN=x").unwrap(), "CN=x");
        let upper = PrincipalMapper::parse("RULE:^CN=([a-z]+)$/$1/U").unwrap();
        assert_eq!(upper.map("CN=bob").unwrap(), "BOB");
        assert!(upper.map("CN=Bob1").is_err(), "no rule applies");
        for bad in ["RULE:abc", "RULE:(/x/", "NONSENSE", "DEFAULT DEFAULT"] {
            assert!(PrincipalMapper::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn rfc2253_escapes() {
        assert_eq!(escape("a,b"), "a\\,b");
        assert_eq!(escape(" x "), "\\ x\\ ");
        assert_eq!(escape("#1"), "\\#1");
    }
}
