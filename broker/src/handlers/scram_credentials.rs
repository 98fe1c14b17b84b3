//! AlterUserScramCredentials (51) and DescribeUserScramCredentials (50): SCRAM users live in
//! the metadata log; one change per user and request, validated as Kafka's controller does.

use std::collections::BTreeMap;

use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::ResponseError;
use tern_controller::MetadataRecord;

use tern_controller::acls::AclOperation;

use super::{sb, RequestContext};
use crate::broker::Broker;
use crate::security::sasl::scram::{
    ScramCredential, ScramMechanism, MAX_ITERATIONS, MIN_ITERATIONS,
};

type Refusal = (ResponseError, &'static str);

fn check_user_and_mechanism(user: &str, mechanism: i8) -> Result<ScramMechanism, Refusal> {
    if user.is_empty() {
        return Err((
            ResponseError::UnacceptableCredential,
            "Username must not be empty",
        ));
    }
    ScramMechanism::from_code(mechanism).ok_or((
        ResponseError::UnsupportedSaslMechanism,
        "Unknown SCRAM mechanism",
    ))
}

/// Answers AlterUserScramCredentials (ALTER on the cluster; CLUSTER_AUTHORIZATION_FAILED for
/// every user otherwise).
pub(crate) fn alter(
    broker: &Broker,
    ctx: &RequestContext,
    req: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    if !ctx.authz(broker).cluster(AclOperation::Alter) {
        let users: std::collections::BTreeSet<String> = req
            .deletions
            .iter()
            .map(|d| d.name.to_string())
            .chain(req.upsertions.iter().map(|u| u.name.to_string()))
            .collect();
        let results = users
            .into_iter()
            .map(|user| {
                AlterUserScramCredentialsResult::default()
                    .with_user(sb(user))
                    .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
            })
            .collect();
        return AlterUserScramCredentialsResponse::default().with_results(results);
    }
    let image = broker.controller.image();
    let mut changes: BTreeMap<String, MetadataRecord> = BTreeMap::new();
    let mut refused: BTreeMap<String, Refusal> = BTreeMap::new();
    let duplicate = (
        ResponseError::DuplicateResource,
        "A user credential cannot be altered twice in the same request",
    );
    for d in &req.deletions {
        let user = d.name.to_string();
        if refused.contains_key(&user) {
            continue;
        }
        if changes.remove(&user).is_some() {
            refused.insert(user, duplicate);
            continue;
        }
        let checked = check_user_and_mechanism(&user, d.mechanism).and_then(|m| {
            if image
                .scram_credentials
                .contains_key(&(user.clone(), m.code()))
            {
                Ok(m)
            } else {
                Err((
                    ResponseError::ResourceNotFound,
                    "Attempt to delete a user credential that does not exist",
                ))
            }
        });
        match checked {
            Ok(m) => {
                changes.insert(
                    user.clone(),
                    MetadataRecord::RemoveScramCredential {
                        user,
                        mechanism: m.code(),
                    },
                );
            }
            Err(e) => {
                refused.insert(user, e);
            }
        }
    }
    for u in &req.upsertions {
        let user = u.name.to_string();
        if refused.contains_key(&user) {
            continue;
        }
        if changes.remove(&user).is_some() {
            refused.insert(user, duplicate);
            continue;
        }
        let checked = check_user_and_mechanism(&user, u.mechanism).and_then(|m| {
            if u.iterations < MIN_ITERATIONS {
                Err((ResponseError::UnacceptableCredential, "Too few iterations"))
            } else if u.iterations > MAX_ITERATIONS {
                Err((ResponseError::UnacceptableCredential, "Too many iterations"))
            } else if u.salt.is_empty() || u.salted_password.is_empty() {
                Err((
                    ResponseError::UnacceptableCredential,
                    "Salt and salted password must not be empty",
                ))
            } else {
                Ok(m)
            }
        });
        match checked {
            Ok(m) => {
                let c = ScramCredential::from_salted_password(
                    m,
                    &u.salted_password,
                    &u.salt,
                    u.iterations,
                );
                changes.insert(
                    user.clone(),
                    MetadataRecord::ScramCredential {
                        user,
                        mechanism: m.code(),
                        salt: c.salt,
                        stored_key: c.stored_key,
                        server_key: c.server_key,
                        iterations: c.iterations,
                    },
                );
            }
            Err(e) => {
                refused.insert(user, e);
            }
        }
    }
    let users: Vec<String> = changes.keys().cloned().collect();
    let committed = broker
        .controller
        .alter_scram_credentials(changes.into_values().collect());
    let mut results: Vec<AlterUserScramCredentialsResult> = users
        .into_iter()
        .map(|user| {
            let r = AlterUserScramCredentialsResult::default().with_user(sb(user));
            match &committed {
                Ok(()) => r,
                Err(e) => r
                    .with_error_code(e.error.code())
                    .with_error_message(Some(sb(e.message.clone()))),
            }
        })
        .collect();
    results.extend(refused.into_iter().map(|(user, (error, message))| {
        AlterUserScramCredentialsResult::default()
            .with_user(sb(user))
            .with_error_code(error.code())
            .with_error_message(Some(sb(message)))
    }));
    AlterUserScramCredentialsResponse::default().with_results(results)
}

/// Answers DescribeUserScramCredentials: every user with a credential when no user is named
/// (DESCRIBE on the cluster; CLUSTER_AUTHORIZATION_FAILED otherwise).
pub(crate) fn describe(
    broker: &Broker,
    ctx: &RequestContext,
    req: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    if !ctx.authz(broker).cluster(AclOperation::Describe) {
        return DescribeUserScramCredentialsResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
            .with_error_message(Some(sb("Cluster authorization failed.")));
    }
    let image = broker.controller.image();
    let mut by_user: BTreeMap<&str, Vec<CredentialInfo>> = BTreeMap::new();
    for ((user, mechanism), c) in &image.scram_credentials {
        by_user.entry(user).or_default().push(
            CredentialInfo::default()
                .with_mechanism(*mechanism)
                .with_iterations(c.iterations),
        );
    }
    let result = |user: &str| -> DescribeUserScramCredentialsResult {
        let r = DescribeUserScramCredentialsResult::default().with_user(sb(user));
        match by_user.get(user) {
            Some(infos) => r.with_credential_infos(infos.clone()),
            None => r
                .with_error_code(ResponseError::ResourceNotFound.code())
                .with_error_message(Some(sb(format!(
                    "Attempt to describe a user credential that does not exist: {user}"
                )))),
        }
    };
    let results = match req.users.filter(|u| !u.is_empty()) {
        None => by_user.keys().map(|u| result(u)).collect(),
        Some(users) => {
            let names: Vec<String> = users.iter().map(|u| u.name.to_string()).collect();
            let mut seen = std::collections::BTreeSet::new();
            let duplicates: std::collections::BTreeSet<&String> =
                names.iter().filter(|n| !seen.insert(*n)).collect();
            let mut done = std::collections::BTreeSet::new();
            names
                .iter()
                .filter(|n| done.insert(*n))
                .map(|n| {
                    if duplicates.contains(n) {
                        DescribeUserScramCredentialsResult::default()
                            .with_user(sb(n.clone()))
                            .with_error_code(ResponseError::DuplicateResource.code())
                            .with_error_message(Some(sb(format!(
                                "Cannot describe SCRAM credentials for the same user twice in a single request: {n}"
                            ))))
                    } else {
                        result(n)
                    }
                })
                .collect()
        }
    };
    DescribeUserScramCredentialsResponse::default().with_results(results)
}
