//! What several test files of this crate read (`mod support;`): the recorded files under the
//! workspace's `testdata/`, the checked-in install, `deploy/`, and the Helm chart rendered by
//! the real `helm` ([`chart`]).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

#[allow(unused_imports)] // Not every test binary that includes this module reads testdata.
pub use miggate_testkit::{testdata, testdata_path};
use serde_json::Value;

pub mod chart;
pub mod dra;

/// Every document of every YAML file of `deploy/`, in file-name order, with its file's name.
pub fn deploy_docs() -> Vec<(String, Value)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    let mut docs = Vec::new();
    for file in files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&file).unwrap();
        let values: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
        docs.extend(
            values
                .into_iter()
                // kustomization.yaml lists the files; it is no cluster object.
                .filter(|v| v.get("kind").is_some_and(|k| k != "Kustomization"))
                .map(|v| (name.clone(), v)),
        );
    }
    docs
}

/// The install with the chart's defaults: every object of `deploy/`, which is the chart rendered
/// by `helm template` (crds/tests/chart.rs holds it current), read with no helm at hand.
pub fn installed() -> Vec<Value> {
    deploy_docs().into_iter().map(|(_, v)| v).collect()
}

/// The object of `kind` named `name` among `objects`; panics naming it when there is none.
pub fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

/// The ValidatingAdmissionPolicy `name` of `objects`, checked bound to deny.
pub fn policy(objects: &[Value], name: &str) -> Value {
    assert_eq!(
        find(objects, "ValidatingAdmissionPolicyBinding", name)["spec"],
        serde_json::json!({"policyName": name, "validationActions": ["Deny"]})
    );
    find(objects, "ValidatingAdmissionPolicy", name).clone()
}

/// `value` read as its typed kind `T` (k8s-openapi's), checked to lose nothing on the way: a
/// field the kind does not have would be pruned by the API server, silently.
pub fn typed<T: serde::de::DeserializeOwned + serde::Serialize>(value: &Value) -> T {
    let read: T = serde_json::from_value(value.clone()).unwrap_or_else(|e| {
        panic!(
            "{} {}: not of its kind: {e}",
            value["kind"], value["metadata"]["name"]
        )
    });
    let written = serde_json::to_value(&read).unwrap();
    assert_eq!(
        &written, value,
        "{} {}: fields its kind does not have",
        value["kind"], value["metadata"]["name"]
    );
    read
}

/// Runs one CEL expression of a policy or webhook configuration with `vars` bound (`object`,
/// `oldObject`, `request`), returning what it evaluates to.
fn run(expression: &str, vars: &[(&str, &Value)]) -> Result<kube::core::cel::cel::Value, String> {
    use kube::core::cel::cel::{Context, Program};
    let program = Program::compile(expression).map_err(|e| format!("{expression}: {e}"))?;
    let mut ctx = Context::default();
    for (name, value) in vars {
        ctx.add_variable(*name, (*value).clone())
            .map_err(|e| e.to_string())?;
    }
    program.execute(&ctx).map_err(|e| format!("{expression}: {e}"))
}

/// [`run`] of an expression that must give a boolean (a rule, a condition, a validation).
pub fn eval(expression: &str, vars: &[(&str, &Value)]) -> Result<bool, String> {
    match run(expression, vars)? {
        kube::core::cel::cel::Value::Bool(b) => Ok(b),
        other => Err(format!("{expression}: {other:?}")),
    }
}

/// An AdmissionReview request as the API server builds it for a policy: `operation` on
/// `resource` (with `/subresource` when given) in `namespace`, by `user` (with the token's
/// `node`, when bound to one), carrying `object` and `old`.
pub fn admission(
    operation: &str,
    resource: &str,
    namespace: &str,
    user: &str,
    node: Option<&str>,
    object: Value,
    old: Option<Value>,
) -> Value {
    let (resource, sub) = resource.split_once('/').unwrap_or((resource, ""));
    let (resource, group) = resource.split_once('.').unwrap_or((resource, ""));
    let mut user_info = serde_json::json!({"username": user, "groups": ["system:authenticated"]});
    if let Some(n) = node {
        user_info["extra"] = serde_json::json!({"authentication.kubernetes.io/node-name": [n]});
    }
    // The kind of whichever object the request carries (`object` is null on DELETE).
    let kind = object
        .get("kind")
        .or_else(|| old.as_ref().and_then(|o| o.get("kind")))
        .cloned()
        .unwrap_or(Value::Null);
    serde_json::json!({
        "operation": operation, "namespace": namespace, "userInfo": user_info,
        "kind": {"group": group, "version": "v1", "kind": kind},
        "resource": {"group": group, "version": "v1", "resource": resource}, "subResource": sub,
        "name": object.pointer("/metadata/name").cloned().unwrap_or(Value::Null),
        "object": object, "oldObject": old.unwrap_or(Value::Null),
    })
}

/// What a ValidatingAdmissionPolicy says of `req`, as the API server decides it: `None` when
/// it does not apply (its resource rules, namespace selector on the namespace's name label,
/// or a match condition), else the messages of the validations that fail (empty: allowed).
/// `messageExpression` is evaluated as the API server does, falling back to `message`.
pub fn policy_verdict(policy: &Value, req: &Value) -> Option<Vec<String>> {
    if !policy_applies(policy, req) {
        return None;
    }
    let variables = variables(policy, req);
    let vars = [
        ("object", &req["object"]),
        ("oldObject", &req["oldObject"]),
        ("request", req),
        ("variables", &variables),
    ];
    let mut failed = Vec::new();
    for v in policy["spec"]["validations"].as_array().unwrap() {
        let expression = v["expression"].as_str().unwrap();
        if eval(expression, &vars).unwrap_or_else(|e| panic!("{e}")) {
            continue;
        }
        failed.push(message(v, req));
    }
    Some(failed)
}

/// A policy's `spec.variables`, each evaluated in order as the API server does (a later one may
/// read an earlier one), as the map CEL reads as `variables`.
fn variables(policy: &Value, req: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for v in policy["spec"]["variables"].as_array().into_iter().flatten() {
        let sofar = Value::Object(out.clone());
        let vars = [
            ("object", &req["object"]),
            ("oldObject", &req["oldObject"]),
            ("request", req),
            ("variables", &sofar),
        ];
        let expression = v["expression"].as_str().unwrap();
        let value = run(expression, &vars).unwrap_or_else(|e| panic!("{e}"));
        out.insert(v["name"].as_str().unwrap().to_string(), to_json(&value));
    }
    Value::Object(out)
}

/// A CEL value as JSON, to bind it again as a variable.
fn to_json(value: &kube::core::cel::cel::Value) -> Value {
    use kube::core::cel::cel::Value as Cel;
    match value {
        Cel::Null => Value::Null,
        Cel::Bool(b) => Value::Bool(*b),
        Cel::Int(i) => Value::from(*i),
        Cel::UInt(u) => Value::from(*u),
        Cel::Float(f) => serde_json::json!(f),
        Cel::String(s) => Value::String(s.to_string()),
        Cel::List(items) => Value::Array(items.iter().map(to_json).collect()),
        Cel::Map(map) => Value::Object(map.map.iter().map(|(k, v)| (key_text(k), to_json(v))).collect()),
        other => panic!("a variable of a kind the tests do not bind: {other:?}"),
    }
}

fn key_text(key: &kube::core::cel::cel::objects::Key) -> String {
    use kube::core::cel::cel::objects::Key;
    match key {
        Key::String(s) => s.to_string(),
        Key::Int(i) => i.to_string(),
        Key::Uint(u) => u.to_string(),
        Key::Bool(b) => b.to_string(),
    }
}

/// A validation's message for `req`: its `messageExpression` as the API server evaluates it,
/// falling back to `message`.
pub fn message(validation: &Value, req: &Value) -> String {
    let vars = [
        ("object", &req["object"]),
        ("oldObject", &req["oldObject"]),
        ("request", req),
    ];
    validation["messageExpression"]
        .as_str()
        .and_then(|m| match run(m, &vars) {
            Ok(kube::core::cel::cel::Value::String(s)) => Some(s.to_string()),
            _ => None,
        })
        .or_else(|| validation["message"].as_str().map(String::from))
        .unwrap()
}

/// Whether a ValidatingAdmissionPolicy applies to `req`, as the API server decides it: its
/// resource rules (group, operation, resource), namespace selector on the namespace's name
/// label, and every match condition.
pub fn policy_applies(policy: &Value, req: &Value) -> bool {
    let spec = &policy["spec"];
    let resource = match req["subResource"].as_str().unwrap_or("") {
        "" => req["resource"]["resource"].as_str().unwrap().to_string(),
        sub => format!("{}/{sub}", req["resource"]["resource"].as_str().unwrap()),
    };
    let rule_matches = spec["matchConstraints"]["resourceRules"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| {
            r["apiGroups"]
                .as_array()
                .unwrap()
                .contains(&req["resource"]["group"])
                && r["operations"].as_array().unwrap().contains(&req["operation"])
                && r["resources"]
                    .as_array()
                    .unwrap()
                    .contains(&Value::from(resource.clone()))
        });
    let namespace_matches = spec["matchConstraints"]["namespaceSelector"]["matchLabels"]
        .as_object()
        .is_none_or(|labels| {
            labels
                .iter()
                .all(|(k, v)| k == "kubernetes.io/metadata.name" && *v == req["namespace"])
        });
    if !(rule_matches && namespace_matches) {
        return false;
    }
    let vars = [
        ("object", &req["object"]),
        ("oldObject", &req["oldObject"]),
        ("request", req),
    ];
    spec["matchConditions"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|c| eval(c["expression"].as_str().unwrap(), &vars).unwrap())
}
