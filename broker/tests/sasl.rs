//! SASL over a real socket: SCRAM users created with AlterUserScramCredentials authenticate on a
//! SASL_PLAINTEXT listener; nothing but ApiVersions and SaslHandshake is served before that;
//! failures get Kafka's error and a closed connection while other connections go on.

mod support;

use bytes::Bytes;
use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, ApiVersionsRequest, DescribeUserScramCredentialsRequest,
    MetadataRequest, SaslAuthenticateRequest, SaslHandshakeRequest,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use support::*;
use tern_protocol::client::{ClientError, KafkaConnection};
use tern_protocol::sasl::scram::{client_final_message, ScramMechanism};

const PLAIN_JAAS: &str = "org.apache.kafka.common.security.plain.PlainLoginModule required \
                          user_admin=\"admin-secret\";";

async fn start() -> (tern_broker::Server, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let server = start_in(
        dir.path(),
        &[
            (
                "listeners",
                "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            ),
            (
                "sasl.enabled.mechanisms",
                "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            ),
            (
                "listener.name.sasl_plaintext.plain.sasl.jaas.config",
                PLAIN_JAAS,
            ),
        ],
    )
    .await;
    (server, dir)
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn upsert(
    user: &str,
    m: ScramMechanism,
    password: &str,
    iterations: i32,
) -> ScramCredentialUpsertion {
    let salt = b"0123456789abcdef".to_vec();
    let salted = m.salted_password(password.as_bytes(), &salt, iterations.max(1) as u32);
    ScramCredentialUpsertion::default()
        .with_name(s(user))
        .with_mechanism(m.code())
        .with_iterations(iterations)
        .with_salt(Bytes::from(salt))
        .with_salted_password(Bytes::from(salted))
}

async fn handshake(c: &mut KafkaConnection, mechanism: &str) -> i16 {
    let r = c
        .send(
            &SaslHandshakeRequest::default().with_mechanism(s(mechanism)),
            1,
        )
        .await
        .unwrap();
    r.error_code
}

async fn authenticate(
    c: &mut KafkaConnection,
    token: &[u8],
) -> kafka_protocol::messages::SaslAuthenticateResponse {
    c.send(
        &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::copy_from_slice(token)),
        2,
    )
    .await
    .unwrap()
}

/// A full SCRAM exchange; returns the connection when it succeeded.
async fn scram_login(
    addr: std::net::SocketAddr,
    m: ScramMechanism,
    user: &str,
    password: &str,
) -> Result<KafkaConnection, i16> {
    let mut c = KafkaConnection::connect(addr, "scram").await.unwrap();
    assert_eq!(handshake(&mut c, m.name()).await, 0);
    let first_bare = format!("n={user},r=clientnonce123");
    let r = authenticate(&mut c, format!("n,,{first_bare}").as_bytes()).await;
    if r.error_code != 0 {
        return Err(r.error_code);
    }
    let server_first = String::from_utf8(r.auth_bytes.to_vec()).unwrap();
    let (client_final, expected) =
        client_final_message(m, password, &first_bare, &server_first).unwrap();
    let r = authenticate(&mut c, client_final.as_bytes()).await;
    if r.error_code != 0 {
        return Err(r.error_code);
    }
    assert_eq!(
        r.auth_bytes.to_vec(),
        expected,
        "the server proves it knows the key"
    );
    Ok(c)
}

async fn closed(c: &mut KafkaConnection) -> bool {
    matches!(
        c.send(&ApiVersionsRequest::default(), 3).await,
        Err(ClientError::Closed | ClientError::Io(_) | ClientError::Frame(_))
    )
}

#[tokio::test]
async fn scram_users_created_over_the_wire_authenticate_and_wrong_passwords_do_not() {
    let (server, _dir) = start().await;
    let (plain, sasl) = (server.local_addrs[0], server.local_addrs[1]);
    let mut admin = KafkaConnection::connect(plain, "admin").await.unwrap();
    let r = admin
        .send(
            &AlterUserScramCredentialsRequest::default().with_upsertions(vec![
                upsert("alice", ScramMechanism::Sha512, "alice-secret", 8192),
                upsert("bob", ScramMechanism::Sha256, "bob-secret", 4096),
            ]),
            0,
        )
        .await
        .unwrap();
    assert!(r.results.iter().all(|r| r.error_code == 0), "{r:?}");

    let mut alice = scram_login(sasl, ScramMechanism::Sha512, "alice", "alice-secret")
        .await
        .unwrap();
    let md = alice.send(&MetadataRequest::default(), 12).await.unwrap();
    assert!(!md.brokers.is_empty());
    scram_login(sasl, ScramMechanism::Sha256, "bob", "bob-secret")
        .await
        .unwrap();
    for (m, user, password) in [
        (ScramMechanism::Sha512, "alice", "wrong"),
        (ScramMechanism::Sha256, "alice", "alice-secret"),
        (ScramMechanism::Sha512, "nobody", "x"),
    ] {
        assert_eq!(
            scram_login(sasl, m, user, password).await.err(),
            Some(ResponseError::SaslAuthenticationFailed.code()),
            "{user} with {}",
            m.name()
        );
    }
    // Authenticated connections are not disturbed by the failures.
    alice.send(&MetadataRequest::default(), 12).await.unwrap();

    // Deleting bob's credential ends his logins.
    let r = admin
        .send(
            &AlterUserScramCredentialsRequest::default().with_deletions(vec![
                ScramCredentialDeletion::default()
                    .with_name(s("bob"))
                    .with_mechanism(ScramMechanism::Sha256.code()),
            ]),
            0,
        )
        .await
        .unwrap();
    assert_eq!(r.results[0].error_code, 0);
    assert!(
        scram_login(sasl, ScramMechanism::Sha256, "bob", "bob-secret")
            .await
            .is_err()
    );
}

#[tokio::test]
async fn plain_users_come_from_the_listener_jaas_entry() {
    let (server, _dir) = start().await;
    let sasl = server.local_addrs[1];
    let mut c = KafkaConnection::connect(sasl, "plain").await.unwrap();
    assert_eq!(handshake(&mut c, "PLAIN").await, 0);
    let r = authenticate(&mut c, b"\0admin\0admin-secret").await;
    assert_eq!(r.error_code, 0);
    c.send(&MetadataRequest::default(), 12).await.unwrap();
    let mut c = KafkaConnection::connect(sasl, "plain").await.unwrap();
    assert_eq!(handshake(&mut c, "PLAIN").await, 0);
    let r = authenticate(&mut c, b"\0admin\0nope").await;
    assert_eq!(r.error_code, ResponseError::SaslAuthenticationFailed.code());
    assert!(r.error_message.is_some());
    assert!(closed(&mut c).await, "a failed login closes the connection");
}

#[tokio::test]
async fn requests_before_authentication_bad_mechanisms_and_garbage_close_the_connection() {
    let (server, _dir) = start().await;
    let (plain, sasl) = (server.local_addrs[0], server.local_addrs[1]);
    // ApiVersions is served before authentication, Metadata is not.
    let mut c = KafkaConnection::connect(sasl, "early").await.unwrap();
    let v = c.send(&ApiVersionsRequest::default(), 3).await.unwrap();
    let keys: Vec<i16> = v.api_keys.iter().map(|k| k.api_key).collect();
    for key in [17, 36, 50, 51] {
        assert!(keys.contains(&key), "ApiVersions lists {key}");
    }
    assert!(matches!(
        c.send(&MetadataRequest::default(), 12).await,
        Err(ClientError::Closed | ClientError::Io(_) | ClientError::Frame(_))
    ));
    // An unknown mechanism: Kafka's error with the enabled list, then closed.
    let mut c = KafkaConnection::connect(sasl, "gssapi").await.unwrap();
    let r = c
        .send(
            &SaslHandshakeRequest::default().with_mechanism(s("GSSAPI")),
            1,
        )
        .await
        .unwrap();
    assert_eq!(r.error_code, ResponseError::UnsupportedSaslMechanism.code());
    assert_eq!(
        r.mechanisms,
        vec![s("PLAIN"), s("SCRAM-SHA-256"), s("SCRAM-SHA-512")]
    );
    assert!(closed(&mut c).await);
    // Garbage in SaslAuthenticate.
    for garbage in [&b"\xff\xfe\x00"[..], b"", b"n,,", b"hello"] {
        let mut c = KafkaConnection::connect(sasl, "garbage").await.unwrap();
        assert_eq!(handshake(&mut c, "SCRAM-SHA-256").await, 0);
        let r = authenticate(&mut c, garbage).await;
        assert_eq!(r.error_code, ResponseError::SaslAuthenticationFailed.code());
        assert!(closed(&mut c).await);
    }
    // SASL on the PLAINTEXT listener: ILLEGAL_SASL_STATE, and the connection stays usable.
    let mut c = KafkaConnection::connect(plain, "confused").await.unwrap();
    assert_eq!(
        handshake(&mut c, "PLAIN").await,
        ResponseError::IllegalSaslState.code()
    );
    let r = authenticate(&mut c, b"\0admin\0admin-secret").await;
    assert_eq!(r.error_code, ResponseError::IllegalSaslState.code());
    c.send(&MetadataRequest::default(), 12).await.unwrap();
}

#[tokio::test]
async fn scram_credential_admin_errors_are_kafkas() {
    let (server, _dir) = start().await;
    let mut admin = KafkaConnection::connect(server.local_addrs[0], "admin")
        .await
        .unwrap();
    let r = admin
        .send(
            &AlterUserScramCredentialsRequest::default()
                .with_upsertions(vec![
                    upsert("few", ScramMechanism::Sha256, "x", 4095),
                    upsert("many", ScramMechanism::Sha256, "x", 16385),
                    upsert("", ScramMechanism::Sha256, "x", 4096),
                    upsert("twice", ScramMechanism::Sha256, "x", 4096),
                    upsert("twice", ScramMechanism::Sha512, "x", 4096),
                    upsert("ok", ScramMechanism::Sha512, "x", 4096),
                    upsert("weird", ScramMechanism::Sha512, "x", 4096).with_mechanism(9),
                ])
                .with_deletions(vec![ScramCredentialDeletion::default()
                    .with_name(s("ghost"))
                    .with_mechanism(1)]),
            0,
        )
        .await
        .unwrap();
    let code = |user: &str| {
        r.results
            .iter()
            .find(|x| x.user.as_str() == user)
            .unwrap_or_else(|| panic!("no result for {user}: {r:?}"))
            .error_code
    };
    assert_eq!(code("few"), ResponseError::UnacceptableCredential.code());
    assert_eq!(code("many"), ResponseError::UnacceptableCredential.code());
    assert_eq!(code(""), ResponseError::UnacceptableCredential.code());
    assert_eq!(code("twice"), ResponseError::DuplicateResource.code());
    assert_eq!(code("ok"), 0);
    assert_eq!(
        code("weird"),
        ResponseError::UnsupportedSaslMechanism.code()
    );
    assert_eq!(code("ghost"), ResponseError::ResourceNotFound.code());
    assert_eq!(r.results.len(), 7, "one result per user");

    let d = admin
        .send(&DescribeUserScramCredentialsRequest::default(), 0)
        .await
        .unwrap();
    let users: Vec<&str> = d.results.iter().map(|r| r.user.as_str()).collect();
    assert_eq!(users, vec!["ok"], "only the accepted change was written");
    assert_eq!(d.results[0].credential_infos[0].mechanism, 2);
    assert_eq!(d.results[0].credential_infos[0].iterations, 4096);
    let d = admin
        .send(
            &DescribeUserScramCredentialsRequest::default().with_users(Some(vec![
                UserName::default().with_name(s("ghost")),
                UserName::default().with_name(s("ok")),
                UserName::default().with_name(s("ok")),
            ])),
            0,
        )
        .await
        .unwrap();
    assert_eq!(d.results.len(), 2);
    assert_eq!(
        d.results[0].error_code,
        ResponseError::ResourceNotFound.code()
    );
    assert_eq!(
        d.results[1].error_code,
        ResponseError::DuplicateResource.code()
    );
}

#[tokio::test]
async fn scram_credentials_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let props = [
        (
            "listeners",
            "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        ),
        ("sasl.enabled.mechanisms", "SCRAM-SHA-512"),
    ];
    let server = start_in(dir.path(), &props).await;
    let mut admin = KafkaConnection::connect(server.local_addrs[0], "admin")
        .await
        .unwrap();
    let r = admin
        .send(
            &AlterUserScramCredentialsRequest::default().with_upsertions(vec![upsert(
                "carol",
                ScramMechanism::Sha512,
                "pw",
                4096,
            )]),
            0,
        )
        .await
        .unwrap();
    assert_eq!(r.results[0].error_code, 0);
    drop(admin);
    server.shutdown().await.unwrap();
    let server = start_in(dir.path(), &props).await;
    scram_login(server.local_addrs[1], ScramMechanism::Sha512, "carol", "pw")
        .await
        .unwrap();
    server.shutdown().await.unwrap();
}
