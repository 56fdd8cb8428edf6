//! The manifest's schemas, generated from the types so they cannot drift from what is read:
//! the document's JSON Schema (for editors and `miggate schema`), and the body's structural
//! OpenAPI v3 schema (what a Kubernetes resource's `spec.manifest` holds).

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::Value;

use crate::manifest::{ApiVersion, GpuManifest, Kind};

/// The document: the envelope around the body. Only its schema is ever used.
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(
    title = "GpuManifest",
    description = "What a GPU checkpoint was captured on, or what a restore target offers (miggate.io/v1alpha1)."
)]
#[allow(dead_code)]
struct Document {
    /// Always `miggate.io/v1alpha1`.
    api_version: ApiVersion,
    /// Always `GpuManifest`.
    kind: Kind,
    #[serde(flatten)]
    body: GpuManifest,
}

/// The JSON Schema of a manifest document, pretty-printed with a trailing newline. The
/// checked-in copy under `compat/schema/` is compared with this in a test.
pub fn manifest_schema() -> String {
    let schema = schemars::schema_for!(Document);
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
    text.push('\n');
    text
}

/// The structural OpenAPI v3 schema of a manifest body, as a Kubernetes
/// `CustomResourceDefinition` needs it: every subschema inlined (no `$ref`), optional fields
/// `nullable` instead of type unions, quantities `x-kubernetes-int-or-string`, and every
/// mapping keeping unknown fields so a typo reaches miggate's warning instead of being pruned
/// by the API server.
pub fn manifest_body_schema() -> Value {
    let generator = SchemaSettings::openapi3()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    let mut schema = generator.into_root_schema_for::<GpuManifest>().to_value();
    if let Value::Object(map) = &mut schema {
        map.remove("$schema");
        map.remove("title");
    }
    make_structural(&mut schema);
    schema
}

/// Rewrites the two shapes schemars emits that a structural schema cannot hold: an optional
/// value without a `type` of its own (`anyOf: [T, null]` becomes `T` with `nullable: true`),
/// and an enum whose variants carry documentation (`oneOf` of one-value enums becomes one
/// `enum`). The schema's depth is the types' nesting, never the input's, so recursion is fine.
fn make_structural(node: &mut Value) {
    let Value::Object(map) = node else { return };
    let is_null = |b: &Value| b.get("enum") == Some(&serde_json::json!([null]));
    if let Some(Value::Array(branches)) = map.get("anyOf")
        && branches.len() == 2
        && branches.iter().any(is_null)
        && let Some(Value::Object(inner)) = branches.iter().find(|b| !is_null(b)).cloned()
    {
        map.remove("anyOf");
        for (k, v) in inner {
            map.entry(k).or_insert(v);
        }
        map.insert("nullable".into(), Value::Bool(true));
    }
    if let Some(Value::Array(branches)) = map.get("oneOf") {
        let values: Option<Vec<Value>> = branches
            .iter()
            .map(|b| match (b.get("type"), b.get("enum")) {
                (Some(t), Some(Value::Array(v))) if t == "string" => Some(v.clone()),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()
            .map(|v| v.into_iter().flatten().collect());
        if let Some(values) = values {
            map.remove("oneOf");
            map.insert("type".into(), "string".into());
            map.insert("enum".into(), Value::Array(values));
        }
    }
    kubernetes_integer_format(map);
    for key in ["properties"] {
        if let Some(Value::Object(props)) = map.get_mut(key) {
            props.values_mut().for_each(make_structural);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = map.get_mut(key) {
            make_structural(child);
        }
    }
}

/// Rewrites an integer's format into one the API server knows. schemars names Rust's unsigned
/// types (`uint32`, `uint64`), which Kubernetes does not: it warns on every apply and drops the
/// format. The bound the name carried is kept as `minimum`/`maximum` instead, so the server
/// still refuses a value the reader would refuse.
fn kubernetes_integer_format(map: &mut serde_json::Map<String, Value>) {
    if map.get("type") != Some(&Value::from("integer")) {
        return;
    }
    let Some(Value::String(format)) = map.get("format") else {
        return;
    };
    let maximum: Option<u64> = match format.as_str() {
        "int32" | "int64" => return,
        "uint8" => Some(u8::MAX.into()),
        "uint16" => Some(u16::MAX.into()),
        "uint32" => Some(u32::MAX.into()),
        _ => None,
    };
    let unsigned = format.starts_with("uint");
    map.insert("format".into(), "int64".into());
    if unsigned {
        map.entry("minimum").or_insert(Value::from(0));
    }
    if let Some(max) = maximum {
        map.entry("maximum").or_insert(Value::from(max));
    }
}

/// What keeps `schema` from being a structural schema, the form `apiextensions.k8s.io/v1`
/// requires of a CRD, one line per problem naming where it is (`root.pod.cpuLimit: no type`);
/// empty when there is none. Every node needs one type name (or `x-kubernetes-int-or-string`,
/// or `x-kubernetes-preserve-unknown-fields`); no `$ref`, `const`, `oneOf`, `allOf`, `not`; an
/// `anyOf` only as int-or-string's `[integer, string]`; never both `properties` and
/// `additionalProperties`; every array has `items`. Walked with a stack, not recursion, so any
/// depth of schema is checked.
pub fn structural_problems(schema: &Value, root: &str) -> Vec<String> {
    const TYPES: [&str; 6] = ["object", "array", "string", "integer", "number", "boolean"];
    let mut problems = Vec::new();
    let mut stack: Vec<(&Value, String)> = vec![(schema, root.to_string())];
    while let Some((node, at)) = stack.pop() {
        let Some(map) = node.as_object() else {
            problems.push(format!("{at}: not an object"));
            continue;
        };
        for banned in [
            "$ref",
            "$defs",
            "definitions",
            "$schema",
            "const",
            "oneOf",
            "allOf",
            "not",
        ] {
            if map.contains_key(banned) {
                problems.push(format!("{at}: has `{banned}`"));
            }
        }
        let int_or_string = map.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
        let preserve = map.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
        match map.get("type") {
            Some(Value::String(t)) if TYPES.contains(&t.as_str()) => {
                if int_or_string {
                    problems.push(format!("{at}: int-or-string with a type"));
                }
            }
            Some(other) => problems.push(format!("{at}: type is {other}, not one type name")),
            None if int_or_string || preserve => {}
            None => problems.push(format!("{at}: no type")),
        }
        if let Some(any) = map.get("anyOf")
            && !(int_or_string && any == &serde_json::json!([{"type": "integer"}, {"type": "string"}]))
        {
            problems.push(format!("{at}: anyOf outside int-or-string: {any}"));
        }
        if map.contains_key("properties") && map.contains_key("additionalProperties") {
            problems.push(format!("{at}: both properties and additionalProperties"));
        }
        if map.get("type") == Some(&Value::from("array")) && !map.contains_key("items") {
            problems.push(format!("{at}: an array without items"));
        }
        if let Some(Value::Object(props)) = map.get("properties") {
            for (k, v) in props.iter().rev() {
                stack.push((v, child(&at, ".", k)));
            }
        }
        if let Some(items) = map.get("items") {
            stack.push((items, child(&at, "[]", "")));
        }
        if let Some(extra @ Value::Object(_)) = map.get("additionalProperties") {
            stack.push((extra, child(&at, "{}", "")));
        }
    }
    problems
}

/// A child's path; past 512 bytes a path stops growing (marked once with `…`), so a deep schema
/// costs linear work, not a path as long as its depth at every node.
fn child(at: &str, sep: &str, key: &str) -> String {
    const LONGEST: usize = 512;
    if at.len() >= LONGEST {
        if at.ends_with('…') {
            at.to_string()
        } else {
            format!("{at}…")
        }
    } else {
        format!("{at}{sep}{key}")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_structural_rules_each_catch_their_case() {
        let bad = json!({"type": "object", "properties": {
            "union": {"type": ["string", "null"]},
            "reference": {"$ref": "#/definitions/X"},
            "untyped": {"description": "no type"},
            "choice": {"anyOf": [{"type": "string"}, {"type": "boolean"}]},
            "both": {"type": "object", "properties": {}, "additionalProperties": {"type": "string"}},
            "list": {"type": "array"},
            "quantity": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
        }});
        let problems = structural_problems(&bad, "root");
        for want in [
            "root.union: type is",
            "root.reference: has `$ref`",
            "root.untyped: no type",
            "root.choice: anyOf outside int-or-string",
            "root.both: both properties and additionalProperties",
            "root.list: an array without items",
        ] {
            assert!(
                problems.iter().any(|p| p.starts_with(want)),
                "{want}: {problems:#?}"
            );
        }
        assert!(
            !problems.iter().any(|p| p.starts_with("root.quantity")),
            "{problems:#?}"
        );
        // Each bad child is named; the object holding them is fine.
        assert!(!problems.iter().any(|p| p.starts_with("root:")), "{problems:#?}");
    }

    #[test]
    fn any_depth_is_walked_without_recursion() {
        // Built by hand: `json!` would serialize the inner value recursively.
        let mut node = json!({"type": "string"});
        for _ in 0..100_000 {
            let mut map = serde_json::Map::new();
            map.insert("type".into(), "array".into());
            map.insert("items".into(), node);
            node = Value::Object(map);
        }
        assert!(structural_problems(&node, "deep").is_empty());
        // serde_json's Value drops recursively; unwind it by hand so the test thread's stack
        // is not the one to overflow.
        let mut node = node;
        while let Value::Object(mut map) = node {
            node = map.remove("items").unwrap_or(Value::Null);
        }
    }
}
