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
