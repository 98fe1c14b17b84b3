//! SASL/PLAIN (RFC 4616) checked against the listener's JAAS `user_<name>="<password>"` entries,
//! as Kafka's PlainServerCallbackHandler does.

use std::collections::BTreeMap;

use super::SaslError;

/// Checks one PLAIN message `authzid NUL user NUL password`; returns the user.
pub(crate) fn authenticate(
    message: &[u8],
    users: &BTreeMap<String, String>,
) -> Result<String, SaslError> {
    let text = std::str::from_utf8(message)
        .map_err(|_| SaslError::InvalidMessage("PLAIN message is not UTF-8".into()))?;
    let mut parts = text.split('\u{0}');
    let (Some(authzid), Some(user), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(SaslError::InvalidMessage(
            "Invalid SASL/PLAIN response: expected 3 tokens".into(),
        ));
    };
    if user.is_empty() {
        return Err(SaslError::InvalidMessage(
            "Authentication failed: username not specified".into(),
        ));
    }
    if password.is_empty() {
        return Err(SaslError::InvalidMessage(
            "Authentication failed: password not specified".into(),
        ));
    }
    let expected = users.get(user).map(String::as_bytes).unwrap_or(b"");
    // Constant-time in the password; an unknown user compares against nothing and fails.
    let mut diff = u8::from(expected.len() != password.len() || expected.is_empty());
    for (a, b) in expected.iter().zip(password.as_bytes()) {
        diff |= a ^ b;
    }
    if diff != 0 {
        return Err(SaslError::AuthenticationFailed(
            "Authentication failed: Invalid username or password".into(),
        ));
    }
    if !authzid.is_empty() && authzid != user {
        return Err(SaslError::AuthenticationFailed(
            "Authentication failed: Client requested an authorization id that is different \
             from username"
                .into(),
        ));
    }
    Ok(user.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_accepts_the_right_password_only() {
        let users: BTreeMap<String, String> = [("alice".to_string(), "s3cret".to_string())].into();
        assert_eq!(authenticate(b"\0alice\0s3cret", &users).unwrap(), "alice");
        assert_eq!(
            authenticate(b"alice\0alice\0s3cret", &users).unwrap(),
            "alice"
        );
        for bad in [
            &b"\0alice\0wrong"[..],
            b"\0alice\0s3cre",
            b"\0alice\0s3cret!",
            b"\0bob\0s3cret",
            b"bob\0alice\0s3cret",
            b"\0alice\0",
            b"\0\0s3cret",
            b"alice s3cret",
            b"\0alice\0s3cret\0x",
            b"\xff\0alice\0s3cret",
        ] {
            assert!(authenticate(bad, &users).is_err(), "{bad:?}");
        }
    }
}
