//! Writes the real API server refuses (an immutable Secret's data, a Secret's type, a delete
//! whose preconditions do not hold), who the client is (`SelfSubjectReview`), a verb refused
//! as RBAC refuses it, and a create that loses a race, each through kube's client.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use k8s_openapi::ByteString;
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams, Preconditions};
use kube_fake::FakeApiServer;
use serde_json::json;

fn secret(immutable: bool, kind: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Secret", "type": kind, "immutable": immutable,
        "metadata": {"name": "s", "namespace": "ns"}, "data": {"a": "YQ=="}})
}

fn api_error(e: kube::Error) -> (u16, String, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.reason, s.message),
        other => panic!("{other}"),
    }
}

#[tokio::test]
async fn an_immutable_secret_refuses_a_change_of_its_data_or_its_flag() {
    let fake = FakeApiServer::start().await.unwrap();
    fake.apply(secret(true, "Opaque"));
    let api: Api<Secret> = Api::namespaced(fake.client().unwrap(), "ns");
    let mut s = api.get("s").await.unwrap();
    s.data = Some([("a".to_string(), ByteString(b"b".to_vec()))].into());
    let (code, reason, message) = api_error(api.replace("s", &PostParams::default(), &s).await.unwrap_err());
    assert_eq!((code, reason.as_str()), (422, "Invalid"));
    assert_eq!(
        message,
        "Secret \"s\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
    );
    s.immutable = Some(false);
    let (_, _, message) = api_error(api.replace("s", &PostParams::default(), &s).await.unwrap_err());
    assert!(message.contains("[immutable: Forbidden"), "{message}");
    // The same data, still immutable: a label may change.
    let mut s = api.get("s").await.unwrap();
    s.metadata.labels = Some([("x".to_string(), "y".to_string())].into());
    api.replace("s", &PostParams::default(), &s).await.unwrap();
}

#[tokio::test]
async fn a_secret_keeps_its_type() {
    let fake = FakeApiServer::start().await.unwrap();
    fake.apply(secret(false, "example.com/made-up"));
    let api: Api<Secret> = Api::namespaced(fake.client().unwrap(), "ns");
    let mut s = api.get("s").await.unwrap();
    s.type_ = Some("Opaque".into());
    let (code, _, message) = api_error(api.replace("s", &PostParams::default(), &s).await.unwrap_err());
    assert_eq!(code, 422);
    assert_eq!(
        message,
        "Secret \"s\" is invalid: type: Invalid value: \"Opaque\": field is immutable"
    );
}

#[tokio::test]
async fn a_delete_holds_to_its_preconditions() {
    let fake = FakeApiServer::start().await.unwrap();
    let stored = fake.apply(secret(true, "Opaque"));
    let uid = stored["metadata"]["uid"].as_str().unwrap().to_string();
    let rv = stored["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let api: Api<Secret> = Api::namespaced(fake.client().unwrap(), "ns");
    let at = |uid: &str, rv: &str| DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.to_string()),
            resource_version: Some(rv.to_string()),
        }),
        ..DeleteParams::default()
    };
    let (code, reason, message) = api_error(api.delete("s", &at("other", &rv)).await.unwrap_err());
    assert_eq!((code, reason.as_str()), (409, "Conflict"));
    assert!(
        message.ends_with(&format!(
            "Precondition failed: UID in precondition: other, UID in object meta: {uid}"
        )),
        "{message}"
    );
    fake.apply(secret(true, "Opaque"));
    let (code, _, message) = api_error(api.delete("s", &at(&uid, &rv)).await.unwrap_err());
    assert_eq!(code, 409, "a newer version: {message}");
    let now = fake.get("secrets", Some("ns"), "s").unwrap()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    api.delete("s", &at(&uid, &now)).await.unwrap();
    assert!(fake.get("secrets", Some("ns"), "s").is_none());
}

#[tokio::test]
async fn a_self_subject_review_reports_the_user_set() {
    let fake = FakeApiServer::start().await.unwrap();
    let api: Api<SelfSubjectReview> = Api::all(fake.client().unwrap());
    let review = api
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .unwrap();
    let user = review.status.unwrap().user_info.unwrap();
    assert!(
        user.uid.is_some_and(|u| !u.is_empty()),
        "a service account's UID by default"
    );
    fake.set_user("admin", None);
    let review = api
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .unwrap();
    let user = review.status.unwrap().user_info.unwrap();
    assert_eq!((user.username.as_deref(), user.uid), (Some("admin"), None));
    assert!(
        fake.get("selfsubjectreviews", None, "").is_none(),
        "nothing stored"
    );
}

#[tokio::test]
async fn a_refused_verb_is_refused_alone_as_rbac_refuses_it() {
    let fake = FakeApiServer::start().await.unwrap();
    fake.apply(secret(false, "Opaque"));
    fake.set_user("system:serviceaccount:ns:sa", Some("u-1"));
    fake.refuse("delete", "secrets", 403);
    let api: Api<Secret> = Api::namespaced(fake.client().unwrap(), "ns");
    api.get("s").await.unwrap();
    let (code, reason, message) = api_error(api.delete("s", &DeleteParams::default()).await.unwrap_err());
    assert_eq!((code, reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        message,
        "secrets \"s\" is forbidden: User \"system:serviceaccount:ns:sa\" cannot delete resource \"secrets\" in API group \"\" in the namespace \"ns\""
    );
    fake.allow("delete", "secrets");
    api.delete("s", &DeleteParams::default()).await.unwrap();
}

#[tokio::test]
async fn a_create_that_loses_a_race_is_answered_already_exists() {
    let fake = FakeApiServer::start().await.unwrap();
    fake.race_next_create(secret(false, "Opaque"));
    let api: Api<Secret> = Api::namespaced(fake.client().unwrap(), "ns");
    let mine = Secret {
        metadata: ObjectMeta {
            name: Some("s".into()),
            ..ObjectMeta::default()
        },
        ..Secret::default()
    };
    let (code, reason, _) = api_error(api.create(&PostParams::default(), &mine).await.unwrap_err());
    assert_eq!((code, reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(fake.get("secrets", Some("ns"), "s").unwrap()["data"]["a"], "YQ==");
    // Once: the next create of another name goes through.
    let mut other = mine.clone();
    other.metadata.name = Some("t".into());
    api.create(&PostParams::default(), &other).await.unwrap();
}
