//! Who the client is and what it may do, as a test sets it: `POST
//! /apis/authentication.k8s.io/v1/selfsubjectreviews` answers the user the requests are made as
//! ([`FakeApiServer::set_user`]); [`FakeApiServer::refuse`] answers one verb of a plural with an
//! error while its other verbs go through, as RBAC refuses a verb an account lacks (`403`);
//! and [`FakeApiServer::race_next_create`] lands another client's create just before the next
//! one of its plural, as two writers racing for one name.

use super::*;

/// The user a `SelfSubjectReview` reports until a test sets another: a service account's, as a
/// webhook in a cluster would be.
fn default_user() -> Value {
    json!({
        "username": "system:serviceaccount:default:kube-fake",
        "uid": "00000000-0000-4000-8000-00000000fa4e",
        "groups": ["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"],
    })
}

impl FakeApiServer {
    /// Sets the user every request is made as, which a `SelfSubjectReview` reports: its name,
    /// and its UID (`None`: none, as the real server reports for a user of a static token file
    /// or a client certificate).
    pub fn set_user(&self, username: &str, uid: Option<&str>) {
        let mut user = json!({"username": username, "groups": ["system:authenticated"]});
        if let (Some(uid), Some(o)) = (uid, user.as_object_mut()) {
            o.insert("uid".into(), Value::String(uid.to_string()));
        }
        self.shared.lock().user = Some(user);
    }

    /// Answers every request of `verb` (Kubernetes' verbs: `get`, `list`, `watch`, `create`,
    /// `update`, `patch`, `delete`, `deletecollection`) on `plural` with an error `Status` of
    /// `code` until [`allow`](Self::allow): `403` with the RBAC authorizer's message (an account
    /// without that verb), any other code with its usual reason.
    pub fn refuse(&self, verb: &str, plural: &str, code: u16) {
        self.shared
            .lock()
            .refused
            .insert((verb.to_string(), plural.to_string()), code);
    }

    /// Serves `verb` on `plural` again after [`refuse`](Self::refuse).
    pub fn allow(&self, verb: &str, plural: &str) {
        self.shared
            .lock()
            .refused
            .remove(&(verb.to_string(), plural.to_string()));
    }

    /// The next create (`POST`) of `object`'s plural finds `object` created first, as by another
    /// client a moment before: watches see it `ADDED`, and a create of the same name is answered
    /// `409 AlreadyExists`. Once per call.
    pub fn race_next_create(&self, object: impl serde::Serialize) {
        let Ok(object) = serde_json::to_value(object) else {
            return;
        };
        let Some(plural) = object.get("kind").and_then(Value::as_str).and_then(plural_of) else {
            return;
        };
        self.shared
            .lock()
            .races
            .entry(plural.to_string())
            .or_default()
            .push(object);
    }
}

/// The Kubernetes verb of a request, as RBAC names it.
fn verb(recorded: &Recorded, target: &Target) -> &'static str {
    match (recorded.method.as_str(), target.name.is_some()) {
        ("GET", true) => "get",
        ("GET", false) if recorded.is_watch() => "watch",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "unknown",
    }
}

/// The refusal a test set for this request's verb and plural, in the words the real server
/// uses: for `403`, the RBAC authorizer's (`secrets "x" is forbidden: User "u" cannot delete
/// resource "secrets" in API group "" in the namespace "ns"`).
pub(crate) fn refused(inner: &Inner, target: &Target, recorded: &Recorded) -> Option<Response> {
    let verb = verb(recorded, target);
    let code = *inner.refused.get(&(verb.to_string(), target.plural.clone()))?;
    if code != 403 {
        return Some(status(code, reason_of(code), "refused by the test"));
    }
    let user = inner.user.clone().unwrap_or_else(default_user);
    let username = user.get("username").and_then(Value::as_str).unwrap_or("");
    let group = target.api_version.rsplit_once('/').map_or("", |(g, _)| g);
    let what = match &target.name {
        Some(name) => format!("{} \"{name}\"", target.plural),
        None => target.plural.clone(),
    };
    let scope = match &target.namespace {
        Some(ns) => format!("in the namespace \"{ns}\""),
        None => "at the cluster scope".to_string(),
    };
    let message = format!(
        "{what} is forbidden: User \"{username}\" cannot {verb} resource \"{}\" in API group \"{group}\" {scope}",
        target.plural
    );
    Some(status(403, "Forbidden", &message))
}

/// `POST` of a `SelfSubjectReview`: `201` with the user the requests are made as, nothing
/// stored, as the real server answers it.
pub(crate) fn self_subject_review(shared: &Shared) -> Response {
    let user = shared.lock().user.clone().unwrap_or_else(default_user);
    let review = json!({
        "kind": "SelfSubjectReview", "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"creationTimestamp": "2026-11-30T00:00:00Z"},
        "status": {"userInfo": user},
    });
    json_response(StatusCode::CREATED, &review)
}

/// Stores the objects a test set to land just before the next create of `plural`.
pub(crate) fn run_races(shared: &Shared, inner: &mut Inner, plural: &str) {
    for object in inner.races.remove(plural).unwrap_or_default() {
        store(shared, inner, plural, object);
    }
}
