//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka's ScramSaslServer speaks
//! them: no channel binding, the authorization id (if any) equal to the user, extensions
//! accepted and ignored except `tokenauth`, which Tern refuses (no delegation tokens).

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::{Digest, Sha256, Sha512};

use super::SaslError;

/// Kafka's bounds on SCRAM iterations.
pub const MIN_ITERATIONS: i32 = 4096;
/// Kafka's upper bound on SCRAM iterations.
pub const MAX_ITERATIONS: i32 = 16384;

/// The two SCRAM mechanisms Kafka defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScramMechanism {
    /// SCRAM-SHA-256.
    Sha256,
    /// SCRAM-SHA-512.
    Sha512,
}

impl ScramMechanism {
    /// The mechanism's SASL name.
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// The mechanism from its SASL name.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "SCRAM-SHA-256" => Some(ScramMechanism::Sha256),
            "SCRAM-SHA-512" => Some(ScramMechanism::Sha512),
            _ => None,
        }
    }

    /// The code AlterUserScramCredentials and DescribeUserScramCredentials use (1 and 2).
    pub fn code(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    /// The mechanism from its wire code.
    pub fn from_code(code: i8) -> Option<Self> {
        match code {
            1 => Some(ScramMechanism::Sha256),
            2 => Some(ScramMechanism::Sha512),
            _ => None,
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => {
                let mut m = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
            ScramMechanism::Sha512 => {
                let mut m = Hmac::<Sha512>::new_from_slice(key).expect("HMAC takes any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
            ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// Hi(password, salt, i) of RFC 5802: PBKDF2 with this mechanism's HMAC.
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => {
                pbkdf2::pbkdf2_hmac_array::<Sha256, 32>(password, salt, iterations).to_vec()
            }
            ScramMechanism::Sha512 => {
                pbkdf2::pbkdf2_hmac_array::<Sha512, 64>(password, salt, iterations).to_vec()
            }
        }
    }
}

/// What the server keeps of a SCRAM password (never the password itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramCredential {
    /// The salt.
    pub salt: Vec<u8>,
    /// H(ClientKey).
    pub stored_key: Vec<u8>,
    /// HMAC(SaltedPassword, "Server Key").
    pub server_key: Vec<u8>,
    /// PBKDF2 iterations.
    pub iterations: i32,
}

impl ScramCredential {
    /// The credential from a salted password, as AlterUserScramCredentials delivers it.
    pub fn from_salted_password(
        mechanism: ScramMechanism,
        salted_password: &[u8],
        salt: &[u8],
        iterations: i32,
    ) -> Self {
        let client_key = mechanism.hmac(salted_password, b"Client Key");
        ScramCredential {
            salt: salt.to_vec(),
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(salted_password, b"Server Key"),
            iterations,
        }
    }

    /// The credential for a clear-text password with a fresh random salt.
    pub fn from_password(mechanism: ScramMechanism, password: &str, iterations: i32) -> Self {
        let mut salt = [0u8; 32];
        rand::rng().fill_bytes(&mut salt);
        let salted = mechanism.salted_password(password.as_bytes(), &salt, iterations as u32);
        Self::from_salted_password(mechanism, &salted, &salt, iterations)
    }
}

/// The server side of one SCRAM exchange.
#[derive(Debug)]
pub struct ScramServer {
    mechanism: ScramMechanism,
    state: State,
}

#[derive(Debug)]
enum State {
    ExpectClientFirst,
    ExpectClientFinal {
        user: String,
        credential: ScramCredential,
        client_first_bare: String,
        server_first: String,
        nonce: String,
    },
    Done,
}

/// One step's outcome.
#[derive(Debug, PartialEq, Eq)]
pub enum ScramStep {
    /// Send this challenge and wait for the client's next message.
    Challenge(Vec<u8>),
    /// Authenticated as this user; send the final message.
    Authenticated {
        /// The SCRAM user name.
        user: String,
        /// The server-final message.
        server_final: Vec<u8>,
    },
}

fn invalid(reason: &str) -> SaslError {
    SaslError::InvalidMessage(reason.to_string())
}

/// Decodes a saslname (`=2C` is `,` and `=3D` is `=`).
fn decode_saslname(name: &str) -> Result<String, SaslError> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        match rest.get(i..i + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err(invalid("invalid escape in user name")),
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

impl ScramServer {
    /// A new exchange for `mechanism`.
    pub fn new(mechanism: ScramMechanism) -> Self {
        ScramServer {
            mechanism,
            state: State::ExpectClientFirst,
        }
    }

    /// Takes the client's next message; `lookup` finds a user's credential.
    pub fn step(
        &mut self,
        message: &[u8],
        lookup: impl Fn(&str) -> Option<ScramCredential>,
    ) -> Result<ScramStep, SaslError> {
        let text = std::str::from_utf8(message).map_err(|_| invalid("not UTF-8"))?;
        match std::mem::replace(&mut self.state, State::Done) {
            State::ExpectClientFirst => self.client_first(text, lookup),
            State::ExpectClientFinal {
                user,
                credential,
                client_first_bare,
                server_first,
                nonce,
            } => {
                let server_final = self.client_final(
                    text,
                    &credential,
                    &client_first_bare,
                    &server_first,
                    &nonce,
                )?;
                Ok(ScramStep::Authenticated { user, server_final })
            }
            State::Done => Err(invalid("the exchange is already complete")),
        }
    }

    fn client_first(
        &mut self,
        text: &str,
        lookup: impl Fn(&str) -> Option<ScramCredential>,
    ) -> Result<ScramStep, SaslError> {
        // gs2-header: "n," (no channel binding) then an optional "a=authzid," .
        let rest = match text.as_bytes().first() {
            Some(b'n') => &text[1..],
            Some(b'y') | Some(b'p') => {
                return Err(invalid("channel binding is not supported"));
            }
            _ => return Err(invalid("bad gs2 header")),
        };
        let rest = rest
            .strip_prefix(',')
            .ok_or_else(|| invalid("bad gs2 header"))?;
        let (authzid, bare) = rest
            .split_once(',')
            .ok_or_else(|| invalid("bad gs2 header"))?;
        let mut user = None;
        let mut client_nonce = None;
        let mut token_auth = false;
        for (i, attr) in bare.split(',').enumerate() {
            let (key, value) = attr
                .split_once('=')
                .ok_or_else(|| invalid("bad attribute in client-first message"))?;
            match (i, key) {
                (0, "n") => user = Some(decode_saslname(value)?),
                (1, "r") => client_nonce = Some(value.to_string()),
                (0, _) | (1, _) => return Err(invalid("client-first message out of order")),
                // Extensions (Kafka's `tokenauth=true` among them).
                (_, "tokenauth") => token_auth = value.eq_ignore_ascii_case("true"),
                _ => {}
            }
        }
        let user = user.ok_or_else(|| invalid("no user name"))?;
        let client_nonce = client_nonce.ok_or_else(|| invalid("no nonce"))?;
        if client_nonce.is_empty() || client_nonce.contains(',') {
            return Err(invalid("bad nonce"));
        }
        if let Some(a) = authzid.strip_prefix("a=") {
            if decode_saslname(a)? != user {
                return Err(SaslError::AuthenticationFailed(
                    "Authentication failed: Client requested an authorization id that is \
                     different from username"
                        .into(),
                ));
            }
        } else if !authzid.is_empty() {
            return Err(invalid("bad authorization id"));
        }
        if token_auth {
            return Err(SaslError::AuthenticationFailed(
                "Authentication failed: delegation tokens are not supported".into(),
            ));
        }
        let credential = lookup(&user).ok_or_else(|| {
            SaslError::AuthenticationFailed(
                "Authentication failed: Invalid user credentials".into(),
            )
        })?;
        let mut server_nonce = [0u8; 24];
        rand::rng().fill_bytes(&mut server_nonce);
        let nonce = format!("{client_nonce}{}", B64.encode(server_nonce));
        let server_first = format!(
            "r={nonce},s={},i={}",
            B64.encode(&credential.salt),
            credential.iterations
        );
        self.state = State::ExpectClientFinal {
            user,
            credential,
            client_first_bare: bare.to_string(),
            server_first: server_first.clone(),
            nonce,
        };
        Ok(ScramStep::Challenge(server_first.into_bytes()))
    }

    fn client_final(
        &self,
        text: &str,
        credential: &ScramCredential,
        client_first_bare: &str,
        server_first: &str,
        nonce: &str,
    ) -> Result<Vec<u8>, SaslError> {
        let (without_proof, proof) = text
            .rsplit_once(",p=")
            .ok_or_else(|| invalid("client-final message without proof"))?;
        let mut channel_binding = None;
        let mut client_nonce = None;
        for attr in without_proof.split(',') {
            match attr.split_once('=') {
                Some(("c", v)) => channel_binding = Some(v),
                Some(("r", v)) => client_nonce = Some(v),
                Some(_) => {}
                None => return Err(invalid("bad attribute in client-final message")),
            }
        }
        // "biws" is base64 of "n,,"; with an authzid the header is "n,a=...,".
        let cb = channel_binding.ok_or_else(|| invalid("no channel binding attribute"))?;
        let cb = B64.decode(cb).map_err(|_| invalid("bad channel binding"))?;
        if !cb.starts_with(b"n,") {
            return Err(invalid("channel binding is not supported"));
        }
        if client_nonce != Some(nonce) {
            return Err(invalid("nonce mismatch"));
        }
        let proof = B64
            .decode(proof)
            .map_err(|_| invalid("bad proof encoding"))?;
        let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
        let m = self.mechanism;
        let client_signature = m.hmac(&credential.stored_key, auth_message.as_bytes());
        let failed = || {
            SaslError::AuthenticationFailed(
                "Authentication failed: Invalid user credentials".into(),
            )
        };
        if proof.len() != client_signature.len() {
            return Err(failed());
        }
        let client_key: Vec<u8> = proof
            .iter()
            .zip(&client_signature)
            .map(|(a, b)| a ^ b)
            .collect();
        // Constant-time comparison of H(ClientKey) with the stored key.
        let computed = m.hash(&client_key);
        let diff = computed
            .iter()
            .zip(&credential.stored_key)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        if diff != 0 || computed.len() != credential.stored_key.len() {
            return Err(failed());
        }
        let server_signature = m.hmac(&credential.server_key, auth_message.as_bytes());
        Ok(format!("v={}", B64.encode(server_signature)).into_bytes())
    }
}

/// The client's side of the last step (RFC 5802): from the password, the client-first-bare
/// and the server-first messages, the client-final message and the server-final message to
/// expect. Used by tests and by clients of secured clusters.
pub fn client_final_message(
    mechanism: ScramMechanism,
    password: &str,
    client_first_bare: &str,
    server_first: &str,
) -> Result<(String, Vec<u8>), SaslError> {
    let mut nonce = None;
    let mut salt = None;
    let mut iterations = None;
    for attr in server_first.split(',') {
        match attr.split_once('=') {
            Some(("r", v)) => nonce = Some(v),
            Some(("s", v)) => salt = B64.decode(v).ok(),
            Some(("i", v)) => iterations = v.parse::<u32>().ok(),
            _ => {}
        }
    }
    let (Some(nonce), Some(salt), Some(iterations)) = (nonce, salt, iterations) else {
        return Err(invalid("bad server-first message"));
    };
    let m = mechanism;
    let salted = m.salted_password(password.as_bytes(), &salt, iterations);
    let client_key = m.hmac(&salted, b"Client Key");
    let stored_key = m.hash(&client_key);
    let without_proof = format!("c=biws,r={nonce}");
    let auth = format!("{client_first_bare},{server_first},{without_proof}");
    let signature = m.hmac(&stored_key, auth.as_bytes());
    let proof: Vec<u8> = client_key
        .iter()
        .zip(&signature)
        .map(|(a, b)| a ^ b)
        .collect();
    let server_key = m.hmac(&salted, b"Server Key");
    let expected = m.hmac(&server_key, auth.as_bytes());
    Ok((
        format!("{without_proof},p={}", B64.encode(proof)),
        format!("v={}", B64.encode(expected)).into_bytes(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc7677_sha256_vector_authenticates() {
        // RFC 7677, section 3: user "user", password "pencil", 4096 iterations.
        let m = ScramMechanism::Sha256;
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let salted = m.salted_password(b"pencil", &salt, 4096);
        let cred = ScramCredential::from_salted_password(m, &salted, &salt, 4096);
        let client_key = m.hmac(&salted, b"Client Key");
        assert_eq!(cred.stored_key, m.hash(&client_key));
        let mut server = ScramServer::new(m);
        let first = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
        let ScramStep::Challenge(sf) = server
            .step(first.as_bytes(), |_| Some(cred.clone()))
            .unwrap()
        else {
            panic!("expected a challenge")
        };
        let sf = String::from_utf8(sf).unwrap();
        assert!(sf.starts_with("r=rOprNGfwEbeRWgbNEkqO"));
        assert!(sf.contains(",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"));
        let (cf, expected_v) = client_final_message(m, "pencil", &first[3..], &sf).unwrap();
        let step = server.step(cf.as_bytes(), |_| None).unwrap();
        assert_eq!(
            step,
            ScramStep::Authenticated {
                user: "user".into(),
                server_final: expected_v
            }
        );
    }

    #[test]
    fn wrong_password_unknown_user_and_garbage_fail() {
        for m in [ScramMechanism::Sha256, ScramMechanism::Sha512] {
            let cred = ScramCredential::from_password(m, "secret", 4096);
            let lookup = |u: &str| (u == "alice").then(|| cred.clone());
            let mut server = ScramServer::new(m);
            let first = "n,,n=alice,r=abc";
            let ScramStep::Challenge(sf) = server.step(first.as_bytes(), lookup).unwrap() else {
                panic!()
            };
            let (cf, _) =
                client_final_message(m, "wrong", "n=alice,r=abc", &String::from_utf8(sf).unwrap())
                    .unwrap();
            assert!(matches!(
                server.step(cf.as_bytes(), lookup),
                Err(SaslError::AuthenticationFailed(_))
            ));
            assert!(matches!(
                ScramServer::new(m).step(b"n,,n=bob,r=abc", lookup),
                Err(SaslError::AuthenticationFailed(_))
            ));
            for garbage in [
                &b""[..],
                b"\xff\xfe",
                b"y,,n=alice,r=abc",
                b"n,,r=abc,n=alice",
                b"n,,n=alice",
                b"n,a=bob,n=alice,r=abc",
                b"n,,n=al=ZZice,r=abc",
                b"n,,n=alice,r=abc,tokenauth=true",
            ] {
                assert!(
                    ScramServer::new(m).step(garbage, lookup).is_err(),
                    "{garbage:?}"
                );
            }
            // A right password but a forged nonce.
            let mut server = ScramServer::new(m);
            let ScramStep::Challenge(sf) = server.step(first.as_bytes(), lookup).unwrap() else {
                panic!()
            };
            let sf = String::from_utf8(sf).unwrap().replacen("r=abc", "r=abd", 1);
            let (cf, _) = client_final_message(m, "secret", "n=alice,r=abc", &sf).unwrap();
            assert!(server.step(cf.as_bytes(), lookup).is_err());
        }
    }

    #[test]
    fn saslnames_decode_escapes() {
        assert_eq!(decode_saslname("a=2Cb=3Dc").unwrap(), "a,b=c");
        assert!(decode_saslname("a=").is_err());
    }
}
