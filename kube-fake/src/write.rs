//! Writes besides server-side apply, as the real API server answers them: `POST` creates
//! (`409 AlreadyExists` when the name is taken), `PUT` replaces (`404` when absent, `409
//! Conflict` when the body's `metadata.resourceVersion` is not the stored one: optimistic
//! concurrency), `PATCH` with `application/json-patch+json` (a failed `test` operation refuses
//! the whole patch with `422`), and `DELETE` (`409 Conflict` when its `preconditions` name
//! another UID or resource version than the stored object's). Every update of a Secret is
//! validated as the real server's `ValidateSecretUpdate` does ([`secret_update_refused`]).

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value;

use crate::{Recorded, Shared, Target, json_response, key, status, store};

fn body_object<'r>(target: &Target, req: &'r Recorded) -> Result<&'r Value, Box<Response>> {
    match &req.body {
        Some(v @ Value::Object(_)) => Ok(v),
        _ => Err(Box::new(status(
            400,
            "BadRequest",
            &format!("the body of a {} write is not a JSON object", target.plural),
        ))),
    }
}

/// `POST` to a collection.
pub(crate) fn create(shared: &Arc<Shared>, target: &Target, req: &Recorded) -> Response {
    let body = match body_object(target, req) {
        Ok(b) => b.clone(),
        Err(refused) => return *refused,
    };
    let Some(name) = body.pointer("/metadata/name").and_then(Value::as_str) else {
        return status(422, "Invalid", "metadata.name: Required value");
    };
    let mut object = body.clone();
    if let (Some(ns), Some(meta)) = (
        &target.namespace,
        object.get_mut("metadata").and_then(Value::as_object_mut),
    ) {
        meta.insert("namespace".into(), Value::String(ns.clone()));
    }
    let k = key(target.namespace.as_deref(), name);
    let mut inner = shared.lock();
    crate::access::run_races(shared, &mut inner, &target.plural);
    if inner
        .objects
        .get(&target.plural)
        .is_some_and(|m| m.contains_key(&k))
    {
        return status(
            409,
            "AlreadyExists",
            &format!("{} \"{name}\" already exists", target.plural),
        );
    }
    let stored = store(shared, &mut inner, &target.plural, object);
    json_response(StatusCode::CREATED, &stored)
}

/// `PUT` to an object.
pub(crate) fn replace(shared: &Arc<Shared>, target: &Target, name: &str, req: &Recorded) -> Response {
    let body = match body_object(target, req) {
        Ok(b) => b.clone(),
        Err(refused) => return *refused,
    };
    let k = key(target.namespace.as_deref(), name);
    let mut inner = shared.lock();
    let Some(existing) = inner.objects.get(&target.plural).and_then(|m| m.get(&k)) else {
        return status(
            404,
            "NotFound",
            &format!("{} \"{name}\" not found", target.plural),
        );
    };
    let stored_rv = existing.pointer("/metadata/resourceVersion").cloned();
    if let Some(asked) = body.pointer("/metadata/resourceVersion")
        && Some(asked) != stored_rv.as_ref()
    {
        return status(
            409,
            "Conflict",
            &format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                target.plural
            ),
        );
    }
    if let Some(refused) = secret_update_refused(&target.plural, name, existing, &body) {
        return refused;
    }
    let stored = store(shared, &mut inner, &target.plural, body);
    json_response(StatusCode::OK, &stored)
}

/// The refusal the real server gives an update of a Secret from `old` to `new`
/// (`ValidateSecretUpdate`, with its words): its `type` is immutable, and so, once `immutable`
/// is set, are `immutable` and `data`. `None` for other plurals and for allowed updates.
pub(crate) fn secret_update_refused(plural: &str, name: &str, old: &Value, new: &Value) -> Option<Response> {
    if plural != "secrets" {
        return None;
    }
    // The server defaults a missing type to Opaque before it validates.
    let type_of = |o: &Value| {
        o.get("type")
            .and_then(Value::as_str)
            .unwrap_or("Opaque")
            .to_string()
    };
    // Missing data and empty data decode alike.
    let data_of = |o: &Value| {
        o.get("data")
            .filter(|d| !d.is_null())
            .cloned()
            .unwrap_or_else(|| Value::Object(serde_json::Map::new()))
    };
    let immutable = |o: &Value| o.get("immutable") == Some(&Value::Bool(true));
    let mut causes = Vec::new();
    if type_of(old) != type_of(new) {
        causes.push(format!(
            "type: Invalid value: \"{}\": field is immutable",
            type_of(new)
        ));
    }
    if immutable(old) {
        if !immutable(new) {
            causes.push("immutable: Forbidden: field is immutable when `immutable` is set".to_string());
        }
        if data_of(old) != data_of(new) {
            causes.push("data: Forbidden: field is immutable when `immutable` is set".to_string());
        }
    }
    let causes = match causes.as_slice() {
        [] => return None,
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    Some(status(
        422,
        "Invalid",
        &format!("Secret \"{name}\" is invalid: {causes}"),
    ))
}

/// `PATCH` with a JSON patch.
pub(crate) fn json_patch(shared: &Arc<Shared>, target: &Target, name: &str, req: &Recorded) -> Response {
    let Some(ops) = req.body.clone() else {
        return status(400, "BadRequest", "empty patch");
    };
    let patch: json_patch::Patch = match serde_json::from_value(ops) {
        Ok(p) => p,
        Err(e) => return status(400, "BadRequest", &format!("not a JSON patch: {e}")),
    };
    let k = key(target.namespace.as_deref(), name);
    let mut inner = shared.lock();
    let Some(mut object) = inner.objects.get(&target.plural).and_then(|m| m.get(&k)).cloned() else {
        return status(
            404,
            "NotFound",
            &format!("{} \"{name}\" not found", target.plural),
        );
    };
    let before = object.clone();
    if let Err(e) = json_patch::patch(&mut object, &patch) {
        return status(
            422,
            "Invalid",
            &format!("the server rejected our request due to an error in our request: {e}"),
        );
    }
    if let Some(refused) = secret_update_refused(&target.plural, name, &before, &object) {
        return refused;
    }
    let stored = store(shared, &mut inner, &target.plural, object);
    json_response(StatusCode::OK, &stored)
}

/// `DELETE` of an object, refused when the body's `preconditions` (a `DeleteOptions`) name
/// another UID or resource version than the stored object's.
pub(crate) fn delete(shared: &Arc<Shared>, target: &Target, name: &str, req: &Recorded) -> Response {
    let k = key(target.namespace.as_deref(), name);
    let mut inner = shared.lock();
    let Some(stored) = inner.objects.get(&target.plural).and_then(|m| m.get(&k)) else {
        return status(
            404,
            "NotFound",
            &format!("{} \"{name}\" not found", target.plural),
        );
    };
    if let Some(refused) = precondition_failed(target, name, stored, req) {
        return refused;
    }
    let Some(mut object) = inner.objects.get_mut(&target.plural).and_then(|m| m.remove(&k)) else {
        return status(
            404,
            "NotFound",
            &format!("{} \"{name}\" not found", target.plural),
        );
    };
    inner
        .owned
        .retain(|(p, o, _), _| !(*p == target.plural && *o == k));
    inner.rv += 1;
    let rv = inner.rv;
    crate::set_rv(&mut object, rv);
    crate::notify(shared, &mut inner, &target.plural, "DELETED", object.clone());
    json_response(StatusCode::OK, &object)
}

/// The `409 Conflict` the real server answers a delete whose precondition does not hold, in
/// its words (`Precondition failed: UID in precondition: a, UID in object meta: b`).
fn precondition_failed(target: &Target, name: &str, stored: &Value, req: &Recorded) -> Option<Response> {
    let preconditions = req.body.as_ref()?.get("preconditions")?;
    let checks = [("uid", "UID"), ("resourceVersion", "ResourceVersion")];
    for (field, words) in checks {
        let Some(asked) = preconditions.get(field).and_then(Value::as_str) else {
            continue;
        };
        let have = stored
            .pointer(&format!("/metadata/{field}"))
            .and_then(Value::as_str)
            .unwrap_or("");
        if asked != have {
            return Some(status(
                409,
                "Conflict",
                &format!(
                    "Operation cannot be fulfilled on {} \"{name}\": Precondition failed: {words} in precondition: {asked}, {words} in object meta: {have}",
                    target.plural
                ),
            ));
        }
    }
    None
}
