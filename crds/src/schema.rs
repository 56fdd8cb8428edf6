//! Schemas that the derive cannot produce on its own: the manifest body (compat's structural
//! rewrite of it, so kube's rewriter has nothing left to change) and a conditions list that the
//! API server merges by `type`, as Kubernetes' own conditions are.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde_json::Value;

/// `spec.manifest`: compat's structural OpenAPI schema of the manifest body, made strict for
/// the API server. No mapping keeps unknown fields, so a typo (`devcies:`) is refused by
/// `kubectl apply` under its default `--validate=strict` (and pruned, with a warning, under
/// laxer clients) instead of being stored as a manifest that silently lacks its devices; and
/// what every capture records (`host`, `nvidia`, each GPU's and device's `uuid`) is required,
/// so a client that drops a field cannot store a manifest that reads as "unknown". A manifest
/// of a newer miggate with fields this version does not know is served by a newer CRD version.
pub(crate) fn manifest(_: &mut SchemaGenerator) -> Schema {
    let mut body = miggate_compat::manifest_body_schema();
    bare_int_or_string(&mut body);
    strict(&mut body);
    for (path, fields) in REQUIRED {
        require(&mut body, path, fields);
    }
    // compat's schema is always an object; the fallback keeps this total without a panic and
    // would still be structural (and fail the drift test loudly).
    Schema::try_from(body)
        .unwrap_or_else(|_| json_schema!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}))
}

/// The manifest fields every capture records, by where they are (`[]` for a list's items).
pub(crate) const REQUIRED: [(&[&str], &[&str]); 3] = [
    (&[], &["host", "nvidia"]),
    (&["nvidia", "gpus", "[]"], &["uuid"]),
    (&["nvidia", "devices", "[]"], &["uuid"]),
];

/// Removes `x-kubernetes-preserve-unknown-fields` everywhere in `node`. The schema's depth is
/// the types' nesting, never an input's, so recursion is bounded.
fn strict(node: &mut Value) {
    match node {
        Value::Object(map) => {
            map.remove("x-kubernetes-preserve-unknown-fields");
            map.values_mut().for_each(strict);
        }
        Value::Array(items) => items.iter_mut().for_each(strict),
        _ => {}
    }
}

/// Adds `fields` to the `required` of the object schema at `path` (property names, `[]` for
/// `items`). A path the schema does not have is left alone; the CRD tests name each one.
fn require(body: &mut Value, path: &[&str], fields: &[&str]) {
    let mut node = Some(body);
    for step in path {
        node = node.and_then(|n| match *step {
            "[]" => n.get_mut("items"),
            key => n.get_mut("properties").and_then(|p| p.get_mut(key)),
        });
    }
    let Some(Value::Object(map)) = node else { return };
    let required = map.entry("required").or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(list) = required {
        for field in fields {
            if !list.iter().any(|f| f == field) {
                list.push(Value::from(*field));
            }
        }
    }
}

/// Drops the `anyOf: [{type: integer}, {type: string}]` beside `x-kubernetes-int-or-string`.
/// The marker alone is what Kubernetes' own quantities carry; kube's rewriter would otherwise
/// hoist the branches' types away and leave `anyOf: [{}, {}]`, valid but meaningless.
fn bare_int_or_string(node: &mut Value) {
    let Value::Object(map) = node else { return };
    if map.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
        map.remove("anyOf");
    }
    for value in map.values_mut() {
        match value {
            Value::Object(_) => bare_int_or_string(value),
            Value::Array(items) => items.iter_mut().for_each(bare_int_or_string),
            _ => {}
        }
    }
}

/// `status.conditions`: a list of standard conditions keyed by `type`, so a server-side apply by
/// one writer (boot recovery) replaces its own condition and leaves another writer's alone.
pub(crate) fn conditions(generator: &mut SchemaGenerator) -> Schema {
    let item = Condition::json_schema(generator);
    json_schema!({
        "type": "array",
        "items": item,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
    })
}

/// A DNS-1123 label, what Kubernetes requires of a container's name.
pub(crate) const DNS_LABEL_PATTERN: &str = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
/// The longest DNS-1123 label.
pub(crate) const DNS_LABEL_MAX: usize = miggate_wire::dns::LABEL_MAX;

pub use miggate_wire::dns::is_dns_subdomain;
pub(crate) use miggate_wire::dns::{is_dns_label, is_subdomain_part};

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("trainer", true)]
    #[case("a", true)]
    #[case("0", true)]
    #[case("cuda-12-restore", true)]
    #[case(&"a".repeat(63), true)]
    #[case(&"a".repeat(64), false)]
    #[case("", false)]
    #[case("-trainer", false)]
    #[case("trainer-", false)]
    #[case("Trainer", false)]
    #[case("train_er", false)]
    #[case("train.er", false)]
    #[case("trainér", false)]
    #[case("trainer\n", false)]
    fn dns_labels_agree_with_the_schema_pattern(#[case] name: &str, #[case] ok: bool) {
        let pattern = regex::Regex::new(DNS_LABEL_PATTERN).unwrap();
        assert_eq!(is_dns_label(name), ok, "{name:?}");
        assert_eq!(
            pattern.is_match(name) && name.len() <= DNS_LABEL_MAX,
            ok,
            "{name:?}"
        );
    }
}
