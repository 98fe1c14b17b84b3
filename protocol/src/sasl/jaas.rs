//! Kafka's inline JAAS syntax (`sasl.jaas.config`):
//! `org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="secret";`

use std::collections::BTreeMap;

/// One parsed login module entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JaasEntry {
    /// The login module's class name.
    pub login_module: String,
    /// Its options (`username`, `password`, `user_<name>`, ...).
    pub options: BTreeMap<String, String>,
}

/// Parses a `sasl.jaas.config` value holding exactly one login module.
pub fn parse(text: &str) -> Result<JaasEntry, String> {
    let mut chars = text.trim().chars().peekable();
    let word = |chars: &mut std::iter::Peekable<std::str::Chars<'_>>| -> String {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let mut w = String::new();
        while let Some(&c) = chars.peek() {
            if c.is_whitespace() || c == '=' || c == ';' || c == '"' {
                break;
            }
            w.push(c);
            chars.next();
        }
        w
    };
    let login_module = word(&mut chars);
    if login_module.is_empty() {
        return Err("JAAS config has no login module".into());
    }
    let flag = word(&mut chars);
    if !["required", "requisite", "sufficient", "optional"].contains(&flag.as_str()) {
        return Err(format!("JAAS config: invalid control flag '{flag}'"));
    }
    let mut options = BTreeMap::new();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        match chars.peek() {
            Some(';') => {
                chars.next();
                break;
            }
            None => return Err("JAAS config must end with ';'".into()),
            _ => {}
        }
        let key = word(&mut chars);
        if key.is_empty() || chars.next() != Some('=') {
            return Err("JAAS config: expected key=value".into());
        }
        let value = if chars.peek() == Some(&'"') {
            chars.next();
            let mut v = String::new();
            loop {
                match chars.next() {
                    Some('"') => break,
                    Some('\\') => match chars.next() {
                        Some(c) => v.push(c),
                        None => return Err("JAAS config: unterminated string".into()),
                    },
                    Some(c) => v.push(c),
                    None => return Err("JAAS config: unterminated string".into()),
                }
            }
            v
        } else {
            word(&mut chars)
        };
        options.insert(key, value);
    }
    if chars.any(|c| !c.is_whitespace()) {
        return Err("JAAS config: more than one login module".into());
    }
    Ok(JaasEntry {
        login_module,
        options,
    })
}

impl JaasEntry {
    /// The PLAIN users a broker-side PlainLoginModule declares (`user_<name>="<password>"`).
    pub fn plain_users(&self) -> BTreeMap<String, String> {
        self.options
            .iter()
            .filter_map(|(k, v)| k.strip_prefix("user_").map(|u| (u.to_string(), v.clone())))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kafkas_plain_broker_entry() {
        let e = parse(
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required
               username="admin" password="admin-secret"
               user_admin="admin-secret" user_alice="al\"ice";"#,
        )
        .unwrap();
        assert_eq!(
            e.login_module,
            "org.apache.kafka.common.security.plain.PlainLoginModule"
        );
        assert_eq!(e.options["username"], "admin");
        let users = e.plain_users();
        assert_eq!(users["admin"], "admin-secret");
        assert_eq!(users["alice"], "al\"ice");
        assert_eq!(users.len(), 2);
    }

    #[test]
    fn refuses_malformed_entries() {
        for bad in [
            "",
            "Module",
            "Module required",
            "Module maybe a=\"b\";",
            "Module required a=\"b\"",
            "Module required a=\"b;",
            "Module required =b;",
            "Module required a=\"b\"; Other required;",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert!(parse("Module required;").unwrap().options.is_empty());
    }
}
