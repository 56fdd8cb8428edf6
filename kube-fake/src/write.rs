//! Writes besides server-side apply, as the real API server answers them: `POST` creates
//! (`409 AlreadyExists` when the name is taken), `PUT` replaces (`404` when absent, `409
//! Conflict` when the body's `metadata.resourceVersion` is not the stored one: optimistic
//! concurrency), `PATCH` with `application/json-patch+json` (a failed `test` operation refuses
//! the whole patch with `422`), and `DELETE`.

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
    let stored = store(shared, &mut inner, &target.plural, body);
    json_response(StatusCode::OK, &stored)
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
    if let Err(e) = json_patch::patch(&mut object, &patch) {
        return status(
            422,
            "Invalid",
            &format!("the server rejected our request due to an error in our request: {e}"),
        );
    }
    let stored = store(shared, &mut inner, &target.plural, object);
    json_response(StatusCode::OK, &stored)
}

/// `DELETE` of an object.
pub(crate) fn delete(shared: &Arc<Shared>, target: &Target, name: &str) -> Response {
    let k = key(target.namespace.as_deref(), name);
    let mut inner = shared.lock();
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
