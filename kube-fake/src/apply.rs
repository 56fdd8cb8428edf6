//! Server-side apply: the body checks the API server makes, the merge into what exists, and
//! lists merged as the CRD's schema says.
//!
//! A list the schema marks `x-kubernetes-list-type: map` (learnt with
//! [`FakeApiServer::learn_crd`](crate::FakeApiServer::learn_crd)) is merged item by item on its
//! `x-kubernetes-list-map-keys`, as the real server does: an apply sets the items it names
//! (merging into an item of the same key), keeps every item another field manager applied, and
//! removes an item only when the same manager applied it before and no longer does. The fake
//! tracks, per object and field manager, which items of each such list that manager applied;
//! it does not track other fields' ownership (an apply merges objects key by key and replaces
//! every other list, and a field an apply stops naming stays).
//!
//! Checked against kube-apiserver v1.36.2 with a `GpuNode`'s `status.conditions` (`type` is its
//! key), with `kubectl apply --server-side --subresource=status --field-manager=…`: two
//! managers each applying one condition keep both; a manager applying a changed condition of
//! its own type replaces it and leaves the other; a manager applying an empty list removes only
//! its own; a condition a manager stops applying goes; a new one is appended after those kept;
//! another manager applying a condition of the same type (with `--force-conflicts`) takes it
//! over. The test table in this module holds those verdicts.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use crate::{Recorded, Shared, Target, json_response, key, kind_of, status, store};

/// A list the schema merges by key: where it is (object keys from the root) and its keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ListMap {
    pub(crate) path: Vec<String>,
    pub(crate) keys: Vec<String>,
}

/// For one object and one field manager: each list-map's path, and the keys of the items the
/// manager applied there last.
pub(crate) type Owned = BTreeMap<Vec<String>, BTreeSet<String>>;

/// The list-maps of a CRD's schemas, every version's, by the plural it serves; lists are found
/// under `properties` (not inside other lists' items). Iterative: a schema nests as deep as its
/// author likes.
pub(crate) fn list_maps(crd: &Value) -> (String, Vec<ListMap>) {
    let plural = crd
        .pointer("/spec/names/plural")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let mut found = Vec::new();
    let versions = crd.pointer("/spec/versions").and_then(Value::as_array);
    let mut stack: Vec<(Vec<String>, &Value)> = versions
        .into_iter()
        .flatten()
        .filter_map(|v| v.pointer("/schema/openAPIV3Schema"))
        .map(|s| (Vec::new(), s))
        .collect();
    while let Some((path, schema)) = stack.pop() {
        if schema.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("map") {
            let keys = schema
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|ks| ks.iter().filter_map(Value::as_str).map(String::from).collect())
                .unwrap_or_default();
            let map = ListMap {
                path: path.clone(),
                keys,
            };
            if !found.contains(&map) {
                found.push(map);
            }
        }
        if let Some(props) = schema.get("properties").and_then(Value::as_object) {
            for (name, sub) in props {
                let mut p = path.clone();
                p.push(name.clone());
                stack.push((p, sub));
            }
        }
    }
    (plural, found)
}

/// The key an item is merged on: its key fields' values, as JSON.
fn item_key(item: &Value, keys: &[String]) -> String {
    let values: Vec<&Value> = keys.iter().map(|k| item.get(k).unwrap_or(&Value::Null)).collect();
    serde_json::to_string(&values).unwrap_or_default()
}

/// The list at `path` in `value`, taken out (`None` when absent or not a list).
fn take_list(value: &mut Value, path: &[String]) -> Option<Vec<Value>> {
    let (last, parents) = path.split_last()?;
    let mut at = value;
    for p in parents {
        at = at.get_mut(p)?;
    }
    match at.as_object_mut()?.remove(last)? {
        Value::Array(items) => Some(items),
        other => {
            at.as_object_mut()?.insert(last.clone(), other);
            None
        }
    }
}

/// Puts `items` at `path` in `value`, making the objects on the way.
fn put_list(value: &mut Value, path: &[String], items: Vec<Value>) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut at = value;
    for p in parents {
        if !at.get(p).is_some_and(Value::is_object)
            && let Some(o) = at.as_object_mut()
        {
            o.insert(p.clone(), json!({}));
        }
        let Some(next) = at.get_mut(p) else {
            return;
        };
        at = next;
    }
    if let Some(o) = at.as_object_mut() {
        o.insert(last.clone(), Value::Array(items));
    }
}

/// Merges each list-map in scope (`in_scope` of its path) of `patch` into `obj` by key, and
/// takes it out of `patch` so the plain merge that follows does not replace it; records what
/// this manager applied in `owned`.
fn merge_lists(
    obj: &mut Value,
    patch: &mut Value,
    maps: &[ListMap],
    owned: &mut Owned,
    in_scope: impl Fn(&[String]) -> bool,
) {
    for map in maps.iter().filter(|m| in_scope(&m.path)) {
        let applied = take_list(patch, &map.path).unwrap_or_default();
        let before = owned.remove(&map.path).unwrap_or_default();
        let now: BTreeSet<String> = applied.iter().map(|i| item_key(i, &map.keys)).collect();
        if applied.is_empty() && before.is_empty() {
            continue;
        }
        let mut items = take_list(obj, &map.path).unwrap_or_default();
        // Items this manager applied before and no longer does are removed.
        items.retain(|i| {
            let k = item_key(i, &map.keys);
            !before.contains(&k) || now.contains(&k)
        });
        for item in applied {
            let k = item_key(&item, &map.keys);
            match items.iter_mut().find(|i| item_key(i, &map.keys) == k) {
                Some(slot) => merge(slot, &item),
                None => items.push(item),
            }
        }
        put_list(obj, &map.path, items);
        if !now.is_empty() {
            owned.insert(map.path.clone(), now);
        }
    }
}

/// Objects merge key by key; anything else (lists included) is replaced.
fn merge(into: &mut Value, patch: &Value) {
    match (into, patch) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                match a.get_mut(k) {
                    Some(slot) if slot.is_object() && v.is_object() => merge(slot, v),
                    _ => {
                        a.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (slot, v) => *slot = v.clone(),
    }
}

pub(crate) fn patch(shared: &Arc<Shared>, target: &Target, name: &str, req: &Recorded) -> Response {
    let body = match apply_body(target, name, req) {
        Ok(body) => body,
        Err(refused) => return *refused,
    };
    let k = key(target.namespace.as_deref(), name);
    let mut inner = shared.lock();
    let existing = inner.objects.get(&target.plural).and_then(|m| m.get(&k)).cloned();
    let created = existing.is_none();
    let manager = req.query.get("fieldManager").cloned().unwrap_or_default();
    let maps = inner.list_maps.get(&target.plural).cloned().unwrap_or_default();
    let owner = (target.plural.clone(), k.clone(), manager);
    let mut owned = inner.owned.remove(&owner).unwrap_or_default();
    let before = existing.clone();
    let owned_before = owned.clone();
    let next = applied(target, name, body, existing, &maps, &mut owned);
    // A refused update leaves what each manager owns as it was.
    let refused = match &next {
        Ok(next) => before
            .as_ref()
            .and_then(|old| crate::write::secret_update_refused(&target.plural, name, old, next)),
        Err(_) => None,
    };
    inner
        .owned
        .insert(owner, if refused.is_some() { owned_before } else { owned });
    if let Some(refused) = refused {
        return refused;
    }
    let next = match next {
        Ok(next) => next,
        Err(refused) => return *refused,
    };
    let stored = store(shared, &mut inner, &target.plural, next);
    let code = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    json_response(code, &stored)
}

/// The body of a server-side apply to `target`/`name`, or the answer the API server gives a
/// request it refuses: another content type, no field manager, a body that is not an object
/// of the path's apiVersion, kind and name.
fn apply_body<'r>(target: &Target, name: &str, req: &'r Recorded) -> Result<&'r Value, Box<Response>> {
    if req.content_type.as_deref() != Some("application/apply-patch+yaml") {
        return Err(Box::new(status(
            415,
            "UnsupportedMediaType",
            "the fake supports only server-side apply (application/apply-patch+yaml)",
        )));
    }
    if req.query.get("fieldManager").is_none_or(String::is_empty) {
        return Err(Box::new(status(
            422,
            "Invalid",
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
        )));
    }
    let Some(body) = req.body.as_ref().filter(|b| b.is_object()) else {
        return Err(Box::new(status(
            400,
            "BadRequest",
            "the apply body is not a JSON or YAML object",
        )));
    };
    if body.get("apiVersion").and_then(Value::as_str) != Some(target.api_version.as_str()) {
        return Err(Box::new(status(
            400,
            "BadRequest",
            "apiVersion is missing or differs from the path",
        )));
    }
    if body.get("kind").and_then(Value::as_str) != Some(kind_of(&target.plural)) {
        return Err(Box::new(status(
            400,
            "BadRequest",
            "kind is missing or differs from the path",
        )));
    }
    if body.pointer("/metadata/name").and_then(Value::as_str) != Some(name) {
        return Err(Box::new(status(
            400,
            "BadRequest",
            "metadata.name is missing or differs from the path",
        )));
    }
    Ok(body)
}

/// The object after applying `body` to what exists: the status subresource merges only
/// `status` into an existing object; the object itself merges all but `status`.
fn applied(
    target: &Target,
    name: &str,
    body: &Value,
    existing: Option<Value>,
    maps: &[ListMap],
    owned: &mut Owned,
) -> Result<Value, Box<Response>> {
    match (target.subresource.as_deref(), existing) {
        (Some("status"), None) => Err(Box::new(status(
            404,
            "NotFound",
            &format!("{} \"{name}\" not found", target.plural),
        ))),
        (Some("status"), Some(mut obj)) => {
            let mut patch = json!({"status": body.get("status").cloned().unwrap_or_else(|| json!({}))});
            merge_lists(&mut obj, &mut patch, maps, owned, |path| {
                path.first().map(String::as_str) == Some("status")
            });
            merge(&mut obj, &patch);
            Ok(obj)
        }
        (Some(other), _) => Err(Box::new(status(
            404,
            "NotFound",
            &format!("no subresource {other}"),
        ))),
        (None, existing) => {
            let mut patch = body.clone();
            // With a status subresource, status is not written through the object.
            if let Some(o) = patch.as_object_mut() {
                o.remove("status");
            }
            let created = existing.is_none();
            let mut obj = existing.unwrap_or_else(|| json!({}));
            merge_lists(&mut obj, &mut patch, maps, owned, |path| {
                path.first().map(String::as_str) != Some("status")
            });
            merge(&mut obj, &patch);
            if created
                && let (Some(ns), Some(meta)) = (
                    &target.namespace,
                    obj.get_mut("metadata").and_then(Value::as_object_mut),
                )
            {
                meta.insert("namespace".into(), Value::String(ns.clone()));
            }
            Ok(obj)
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use rstest::rstest;

    /// A CRD whose `status.conditions` is a list-map keyed by `type`, and whose `spec.tags`
    /// is a plain (atomic) list.
    fn crd() -> Value {
        json!({
            "spec": {
                "names": {"plural": "gpunodes"},
                "versions": [{"schema": {"openAPIV3Schema": {"properties": {
                    "spec": {"properties": {"tags": {"type": "array"}}},
                    "status": {"properties": {"conditions": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["type"],
                    }}},
                }}}}],
            }
        })
    }

    fn status_target() -> Target {
        Target {
            api_version: "miggate.io/v1alpha1".into(),
            namespace: None,
            plural: "gpunodes".into(),
            name: Some("n1".into()),
            subresource: Some("status".into()),
        }
    }

    /// Condition `type=reason` pairs, as applied or as stored.
    fn conditions(pairs: &[(&str, &str)]) -> Value {
        Value::Array(
            pairs
                .iter()
                .map(|(t, r)| json!({"type": t, "reason": r}))
                .collect(),
        )
    }

    fn stored(obj: &Value) -> Vec<(String, String)> {
        obj.pointer("/status/conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| {
                (
                    c["type"].as_str().unwrap().to_string(),
                    c["reason"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    #[test]
    fn a_crd_s_list_maps_are_found_under_its_properties() {
        let (plural, maps) = list_maps(&crd());
        assert_eq!(plural, "gpunodes");
        assert_eq!(
            maps,
            [ListMap {
                path: vec!["status".into(), "conditions".into()],
                keys: vec!["type".into()],
            }]
        );
    }

    /// `type=reason` pairs, `, `-separated.
    fn pairs(text: &str) -> Vec<(&str, &str)> {
        text.split(", ")
            .filter(|p| !p.is_empty())
            .map(|p| p.split_once('=').unwrap())
            .collect()
    }

    /// Status applies in order, each `manager: type=reason, …`, and the conditions stored
    /// after the last, in order. The verdicts are what kube-apiserver v1.36.2 answered for the
    /// same sequences (the module's doc).
    #[rstest]
    #[case::two_managers_keep_both(
        &["recovery: Recovered=Ready", "other: Drained=No"],
        "Recovered=Ready, Drained=No"
    )]
    #[case::a_manager_s_own_condition_is_replaced_and_the_other_s_kept(
        &["other: Drained=No", "recovery: Recovered=Pending", "recovery: Recovered=Ready"],
        "Drained=No, Recovered=Ready"
    )]
    #[case::an_empty_apply_removes_only_the_manager_s_own(
        &["other: Drained=No", "recovery: Recovered=Ready", "recovery: "],
        "Drained=No"
    )]
    #[case::a_condition_no_longer_applied_goes(
        &["recovery: Recovered=Ready, Probed=Yes", "recovery: Recovered=Ready"],
        "Recovered=Ready"
    )]
    #[case::another_manager_may_set_a_condition_of_the_same_type(
        &["recovery: Recovered=Ready", "admin: Recovered=Failed"],
        "Recovered=Failed"
    )]
    #[case::the_sequence_run_on_the_real_server(
        &["recovery: Recovered=Ready", "other: Drained=No", "recovery: Recovered=Pending", "recovery: ",
          "recovery: Recovered=Ready, Probed=Yes"],
        "Drained=No, Recovered=Ready, Probed=Yes"
    )]
    fn status_conditions_merge_by_type_per_field_manager(#[case] applies: &[&str], #[case] expected: &str) {
        let (_, maps) = list_maps(&crd());
        let target = status_target();
        let mut obj =
            json!({"apiVersion": "miggate.io/v1alpha1", "kind": "GpuNode", "metadata": {"name": "n1"}});
        let mut owned: BTreeMap<&str, Owned> = BTreeMap::new();
        for apply in applies {
            let (manager, list) = apply.split_once(": ").unwrap();
            let body = json!({"apiVersion": "miggate.io/v1alpha1", "kind": "GpuNode", "metadata": {"name": "n1"}, "status": {"conditions": conditions(&pairs(list))}});
            obj = applied(
                &target,
                "n1",
                &body,
                Some(obj),
                &maps,
                owned.entry(manager).or_default(),
            )
            .unwrap();
        }
        let expected: Vec<(String, String)> = pairs(expected)
            .into_iter()
            .map(|(t, r)| (t.to_string(), r.to_string()))
            .collect();
        assert_eq!(stored(&obj), expected);
    }

    #[test]
    fn a_list_the_schema_does_not_mark_is_replaced_whole() {
        let (_, maps) = list_maps(&crd());
        let mut target = status_target();
        target.subresource = None;
        let body = |tags: Value| json!({"apiVersion": "miggate.io/v1alpha1", "kind": "GpuNode", "metadata": {"name": "n1"}, "spec": {"tags": tags}});
        let mut a = Owned::new();
        let mut b = Owned::new();
        let obj = applied(&target, "n1", &body(json!(["x", "y"])), None, &maps, &mut a).unwrap();
        let obj = applied(&target, "n1", &body(json!(["z"])), Some(obj), &maps, &mut b).unwrap();
        assert_eq!(obj.pointer("/spec/tags"), Some(&json!(["z"])));
    }

    #[test]
    fn without_the_crd_learnt_a_status_apply_replaces_the_list() {
        let target = status_target();
        let mut owned = Owned::new();
        let body = |pairs: &[(&str, &str)]| json!({"status": {"conditions": conditions(pairs)}});
        let obj =
            json!({"metadata": {"name": "n1"}, "status": {"conditions": conditions(&[("Drained", "No")])}});
        let obj = applied(
            &target,
            "n1",
            &body(&[("Recovered", "Ready")]),
            Some(obj),
            &[],
            &mut owned,
        )
        .unwrap();
        assert_eq!(stored(&obj), [("Recovered".to_string(), "Ready".to_string())]);
    }
}
