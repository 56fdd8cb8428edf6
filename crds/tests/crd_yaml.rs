//! The generated CRDs: the checked-in YAML matches them, their schemas are structural (what
//! apiextensions.k8s.io/v1 accepts), and the columns, scopes and rules a cluster relies on are
//! there. `UPDATE_CRDS=1 cargo test -p miggate-crds` rewrites the checked-in copies: this
//! crate's, and the chart's `crds/crds.yaml` (which `deploy/crds.yaml` is rendered from).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use miggate_crds::{CustomResourceDefinition, NODE_NAME_MESSAGE, NODE_NAME_RULE, crd_yaml, crds, crds_yaml};
use serde_json::{Value, json};

/// Where each CRD is checked in, in the order [`crds`] gives them.
const FILES: [&str; 2] = ["miggate.io_gpucheckpoints.yaml", "miggate.io_gpunodes.yaml"];

fn checked_in(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(file)
}

#[test]
fn the_checked_in_crds_are_the_generated_ones() {
    let update = std::env::var_os("UPDATE_CRDS").is_some_and(|v| v == "1");
    let mut drifted = Vec::new();
    for (crd, file) in crds().iter().zip(FILES) {
        let generated = crd_yaml(crd).unwrap();
        let path = checked_in(file);
        if update {
            std::fs::write(&path, &generated).unwrap();
            continue;
        }
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        if on_disk != generated {
            drifted.push(file);
        }
    }
    let chart = checked_in("../charts/miggate/crds/crds.yaml");
    let generated = crds_yaml().unwrap();
    if update {
        std::fs::write(&chart, &generated).unwrap();
    } else if std::fs::read_to_string(&chart).unwrap_or_default() != generated {
        drifted.push("charts/miggate/crds/crds.yaml");
    }
    assert!(
        drifted.is_empty(),
        "{drifted:?} differ from the generated CRDs; run `UPDATE_CRDS=1 cargo test -p miggate-crds` and review the diff"
    );
}

#[test]
fn the_stream_is_the_files_joined_and_reads_back_as_the_crds() {
    let stream = crds_yaml().unwrap();
    let files: Vec<String> = crds().iter().map(|c| crd_yaml(c).unwrap()).collect();
    assert_eq!(stream, files.join("---\n"));
    let docs: Vec<CustomResourceDefinition> = serde_saphyr::from_multiple(&stream).unwrap();
    assert_eq!(docs, crds());
}

fn schema_of(crd: &CustomResourceDefinition) -> Value {
    assert_eq!(crd.spec.versions.len(), 1);
    let version = &crd.spec.versions[0];
    assert_eq!(version.name, "v1alpha1");
    assert!(version.served && version.storage);
    let schema = version
        .schema
        .as_ref()
        .unwrap()
        .open_api_v3_schema
        .as_ref()
        .unwrap();
    serde_json::to_value(schema).unwrap()
}

#[test]
fn every_crd_schema_is_structural() {
    for crd in crds() {
        let schema = schema_of(&crd);
        let problems = miggate_compat::structural_problems(&schema, &crd.spec.names.kind);
        assert!(problems.is_empty(), "{problems:#?}\n{schema:#}");
        // apiVersion, kind and metadata are the API server's; spec is required.
        assert_eq!(schema["required"], json!(["spec"]), "{}", crd.spec.names.kind);
    }
}

fn at<'a>(schema: &'a Value, path: &str) -> &'a Value {
    path.split('.').fold(schema, |node, key| match key {
        "[]" => &node["items"],
        k => &node["properties"][k],
    })
}

#[test]
fn the_manifest_is_compats_body_made_strict() {
    let body = miggate_compat::manifest_body_schema();
    for crd in crds() {
        let schema = schema_of(&crd);
        let manifest = at(&schema, "spec.manifest");
        // compat's rewrite is already structural: kube's rewriter must not have changed it
        // beyond the description the field's doc comment gives it, the int-or-string branches
        // this crate drops (the marker alone is Kubernetes' own quantity schema), the unknown
        // fields it stops keeping, and the fields it requires.
        let mut expected = body.clone();
        expected["description"] = manifest["description"].clone();
        for quantity in ["cpuLimit", "memoryLimit"] {
            expected["properties"]["pod"]["properties"][quantity]
                .as_object_mut()
                .unwrap()
                .remove("anyOf");
        }
        expected["properties"]["pod"]["properties"]["gpuRequests"]["additionalProperties"]
            .as_object_mut()
            .unwrap()
            .remove("anyOf");
        let mut stack = vec![&mut expected];
        while let Some(node) = stack.pop() {
            match node {
                Value::Object(map) => {
                    map.remove("x-kubernetes-preserve-unknown-fields");
                    stack.extend(map.values_mut());
                }
                Value::Array(items) => stack.extend(items.iter_mut()),
                _ => {}
            }
        }
        expected["required"] = json!(["host", "nvidia"]);
        expected["properties"]["nvidia"]["properties"]["gpus"]["items"]["required"] = json!(["uuid"]);
        expected["properties"]["nvidia"]["properties"]["devices"]["items"]["required"] = json!(["uuid"]);
        assert_eq!(
            numbers_as_floats(manifest),
            numbers_as_floats(&expected),
            "{}",
            crd.spec.names.kind
        );
        let text = serde_json::to_string(manifest).unwrap();
        assert!(
            !text.contains("x-kubernetes-preserve-unknown-fields"),
            "{}",
            crd.spec.names.kind
        );
        assert_eq!(
            at(&schema, "spec.manifest.pod.cpuLimit")["x-kubernetes-int-or-string"],
            true
        );
        assert_eq!(at(&schema, "spec")["required"][0], "manifest");
    }
}

/// The fields of `object` its CRD schema does not know: what the API server prunes, or refuses
/// under strict field validation (kubectl's default). `apiVersion`, `kind` and `metadata` are
/// the server's own. Walked with a stack.
fn unknown_fields(schema: &Value, object: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack: Vec<(&Value, &Value, String)> = vec![(schema, object, String::new())];
    while let Some((schema, value, at)) = stack.pop() {
        if schema["x-kubernetes-preserve-unknown-fields"] == true {
            continue;
        }
        match value {
            Value::Object(map) => {
                for (key, child) in map {
                    if at.is_empty() && ["apiVersion", "kind", "metadata"].contains(&key.as_str()) {
                        continue;
                    }
                    let here = format!("{at}.{key}");
                    if let Some(sub) = schema["properties"].get(key) {
                        stack.push((sub, child, here));
                    } else if schema["additionalProperties"].is_object() {
                        stack.push((&schema["additionalProperties"], child, here));
                    } else {
                        out.push(here);
                    }
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    stack.push((&schema["items"], item, format!("{at}[{i}]")));
                }
            }
            _ => {}
        }
    }
    out.sort();
    out
}

/// A hand-written object with its `spec.manifest` edited by `edit`.
fn edited(file: &str, edit: impl Fn(&mut Value)) -> Value {
    let text = std::fs::read_to_string(checked_in(file)).unwrap();
    let mut object: Value = serde_saphyr::from_str(&text).unwrap();
    edit(&mut object["spec"]["manifest"]);
    object
}

#[rstest::rstest]
#[case::as_written(|_: &mut Value| {}, &[])]
#[case::devices_misspelt(|m: &mut Value| {
    let devices = m["nvidia"].as_object_mut().unwrap().remove("devices").unwrap();
    m["nvidia"]["devcies"] = devices;
}, &[".spec.manifest.nvidia.devcies"])]
#[case::driver_lowercased(|m: &mut Value| {
    let v = m["nvidia"].as_object_mut().unwrap().remove("driverVersion").unwrap();
    m["nvidia"]["driverversion"] = v;
}, &[".spec.manifest.nvidia.driverversion"])]
#[case::a_field_inside_a_device(|m: &mut Value| {
    m["nvidia"]["devices"][1]["migProfle"] = json!("3g.40gb");
}, &[".spec.manifest.nvidia.devices[1].migProfle"])]
#[case::top_level(|m: &mut Value| { m["hots"] = json!({}); }, &[".spec.manifest.hots"])]
fn a_typo_in_a_manifest_is_a_field_the_crd_does_not_know(
    #[case] edit: fn(&mut Value),
    #[case] unknown: &[&str],
) {
    for (file, kind) in [
        ("../testdata/inventory/gpunode-gpu-node-7.yaml", "GpuNode"),
        (
            "../testdata/webhook-store/checkpoints/ml/vllm-ckpt.yaml",
            "GpuCheckpoint",
        ),
    ] {
        let object = edited(file, edit);
        assert_eq!(unknown_fields(&schema_of(&crd(kind)), &object), unknown, "{kind}");
    }
}

#[test]
fn what_every_capture_records_is_required() {
    for kind in ["GpuCheckpoint", "GpuNode"] {
        let schema = schema_of(&crd(kind));
        assert_eq!(
            at(&schema, "spec.manifest")["required"],
            json!(["host", "nvidia"]),
            "{kind}"
        );
        assert_eq!(
            at(&schema, "spec.manifest.nvidia.gpus.[]")["required"],
            json!(["uuid"]),
            "{kind}"
        );
        assert_eq!(
            at(&schema, "spec.manifest.nvidia.devices.[]")["required"],
            json!(["uuid"]),
            "{kind}"
        );
    }
}

/// The CRD type keeps `minimum` and friends as floats: compare numbers by value.
fn numbers_as_floats(v: &Value) -> Value {
    match v {
        Value::Number(n) => json!(n.as_f64().unwrap()),
        Value::Array(a) => Value::Array(a.iter().map(numbers_as_floats).collect()),
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), numbers_as_floats(v))).collect()),
        other => other.clone(),
    }
}

fn crd(kind: &str) -> CustomResourceDefinition {
    crds().into_iter().find(|c| c.spec.names.kind == kind).unwrap()
}

#[test]
fn names_scopes_and_the_status_subresource() {
    let checkpoint = crd("GpuCheckpoint");
    assert_eq!(
        checkpoint.metadata.name.as_deref(),
        Some("gpucheckpoints.miggate.io")
    );
    assert_eq!(checkpoint.spec.group, "miggate.io");
    assert_eq!(checkpoint.spec.scope, "Namespaced");
    assert_eq!(checkpoint.spec.names.plural, "gpucheckpoints");
    assert_eq!(checkpoint.spec.names.short_names, Some(vec!["gpuckpt".into()]));
    assert_eq!(checkpoint.spec.names.categories, Some(vec!["miggate".into()]));

    let node = crd("GpuNode");
    assert_eq!(node.metadata.name.as_deref(), Some("gpunodes.miggate.io"));
    assert_eq!(node.spec.scope, "Cluster");
    assert_eq!(node.spec.names.plural, "gpunodes");
    assert_eq!(node.spec.names.categories, Some(vec!["miggate".into()]));

    for crd in [checkpoint, node] {
        let sub = crd.spec.versions[0].subresources.as_ref().unwrap();
        assert!(sub.status.is_some(), "{}", crd.spec.names.kind);
    }
}

#[test]
fn status_has_conditions_keyed_by_type() {
    for (kind, extra) in [("GpuCheckpoint", Some("observedGeneration")), ("GpuNode", None)] {
        let schema = schema_of(&crd(kind));
        let conditions = at(&schema, "status.conditions");
        assert_eq!(conditions["type"], "array", "{kind}");
        assert_eq!(conditions["x-kubernetes-list-type"], "map", "{kind}");
        assert_eq!(
            conditions["x-kubernetes-list-map-keys"],
            json!(["type"]),
            "{kind}"
        );
        let item = &conditions["items"];
        for field in ["type", "status", "reason", "message", "lastTransitionTime"] {
            assert!(
                item["required"].as_array().unwrap().contains(&json!(field)),
                "{kind}: {field}"
            );
        }
        assert_eq!(item["properties"]["lastTransitionTime"]["format"], "date-time");
        if let Some(field) = extra {
            assert_eq!(at(&schema, &format!("status.{field}"))["type"], "integer");
        }
    }
}

fn columns(kind: &str) -> Vec<(String, String, String)> {
    crd(kind).spec.versions[0]
        .additional_printer_columns
        .clone()
        .unwrap()
        .into_iter()
        .map(|c| (c.name, c.type_, c.json_path))
        .collect()
}

#[test]
fn printer_columns_point_at_fields_that_exist() {
    let own = |kind: &str| -> Vec<String> { columns(kind).into_iter().map(|(n, ..)| n).collect() };
    assert_eq!(
        own("GpuCheckpoint"),
        ["Model", "Devices", "Driver", "Container", "Age"]
    );
    assert_eq!(
        own("GpuNode"),
        ["Model", "Devices", "Driver", "Recovered", "Observed", "Age"]
    );
    for kind in ["GpuCheckpoint", "GpuNode"] {
        let schema = schema_of(&crd(kind));
        for (name, type_, path) in columns(kind) {
            if path == ".metadata.creationTimestamp" {
                assert_eq!(type_, "date");
                continue;
            }
            // The path's plain prefix (before any filter) must name a field of the schema.
            let plain = path
                .trim_start_matches('.')
                .split('[')
                .next()
                .unwrap()
                .to_string();
            let node = at(&schema, &plain);
            assert!(node.is_object(), "{kind} column {name}: {path} names no field");
            if type_ == "date" {
                assert_eq!(node["format"], "date-time", "{kind} column {name}");
            }
        }
    }
    assert!(columns("GpuNode").contains(&(
        "Recovered".into(),
        "string".into(),
        r#".status.conditions[?(@.type=="Recovered")].reason"#.into()
    )));
}

#[test]
fn validation_rules_are_in_the_yaml() {
    let yaml = std::fs::read_to_string(checked_in(FILES[1])).unwrap();
    assert!(yaml.contains("x-kubernetes-validations:"), "{yaml}");
    assert!(yaml.contains(NODE_NAME_RULE), "{yaml}");
    assert!(yaml.contains(NODE_NAME_MESSAGE), "{yaml}");
    // The rule sits on the root, the only place that sees metadata.name.
    let schema = schema_of(&crd("GpuNode"));
    assert_eq!(
        schema["x-kubernetes-validations"],
        json!([{"rule": NODE_NAME_RULE, "message": NODE_NAME_MESSAGE}])
    );

    let yaml = std::fs::read_to_string(checked_in(FILES[0])).unwrap();
    let schema = schema_of(&crd("GpuCheckpoint"));
    // The summary is derived, not demanded: no rule requires it (docs/crds.md).
    assert_eq!(schema.get("x-kubernetes-validations"), None, "{schema}");
    let name = at(&schema, "spec.containerName");
    assert_eq!(name["maxLength"], 63);
    assert_eq!(name["minLength"], 1);
    let pattern = name["pattern"].as_str().unwrap();
    assert!(yaml.contains(pattern), "{yaml}");
}

/// The fields the node rule reads exist with the types it compares (`tests/cel.rs` runs it).
#[test]
fn the_node_rule_reads_fields_that_exist() {
    let schema = schema_of(&crd("GpuNode"));
    assert!(NODE_NAME_RULE.contains("self.spec.manifest.host.nodeName == self.metadata.name"));
    assert_eq!(at(&schema, "spec.manifest.host")["type"], "object");
    assert_eq!(at(&schema, "spec.manifest.host.nodeName")["type"], "string");
}

/// What kubectl's server-side printing shows for `path` in `object`: the first match of the
/// JSONPath forms the columns use (`.field`, `[N]`, `[?(@.key=="value")]`), as text. Any other
/// form panics, so a new column's path is evaluated here before it ships.
fn column_value(object: &Value, path: &str) -> Option<String> {
    let filter = regex::Regex::new(r#"^\[\?\(@\.([A-Za-z]+)=="([^"]*)"\)\]"#).unwrap();
    let mut node = object;
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            node = node.get(&after[..end])?;
            rest = &after[end..];
        } else if let Some(c) = filter.captures(rest) {
            let (key, value) = (&c[1], &c[2]);
            node = node.as_array()?.iter().find(|item| item[key] == value)?;
            rest = &rest[c[0].len()..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']').unwrap();
            node = node.get(after[..end].parse::<usize>().expect("an index or a filter"))?;
            rest = &after[end + 1..];
        } else {
            panic!("a JSONPath form the columns do not use: {rest}");
        }
    }
    match node {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

/// Objects as people write them (`kubectl apply -f`), not as the publisher does.
#[rstest::rstest]
#[case::checkpoint_by_hand(
    "../testdata/webhook-store/checkpoints/ml/vllm-ckpt.yaml",
    "NVIDIA H100 80GB HBM3",
    "3g.40gb x2",
    "580.82.07"
)]
#[case::node_by_hand(
    "../testdata/webhook-store/nodes/gpu-node-9.yaml",
    "NVIDIA H100 80GB HBM3",
    "3g.40gb x2, whole x1",
    "580.82.07"
)]
#[case::inventory_fixture(
    "../testdata/inventory/gpunode-gpu-node-7.yaml",
    "NVIDIA H100 80GB HBM3",
    "3g.40gb x2, whole x1",
    "580.82.07"
)]
fn the_columns_show_for_objects_written_by_hand(
    #[case] file: &str,
    #[case] model: &str,
    #[case] devices: &str,
    #[case] driver: &str,
) {
    let text = std::fs::read_to_string(checked_in(file)).unwrap();
    let object: Value = serde_saphyr::from_str(&text).unwrap();
    let kind = object["kind"].as_str().unwrap();
    let shown: Vec<(String, Option<String>)> = columns(kind)
        .into_iter()
        .map(|(name, _, path)| (name, column_value(&object, &path)))
        .collect();
    let get = |name: &str| shown.iter().find(|(n, _)| n == name).unwrap().1.clone();
    assert_eq!(get("Model").as_deref(), Some(model), "{shown:?}");
    assert_eq!(get("Devices").as_deref(), Some(devices), "{shown:?}");
    assert_eq!(get("Driver").as_deref(), Some(driver), "{shown:?}");
    // What the writer gives is what the library would compute for the same manifest.
    let manifest: miggate_crds::GpuManifest =
        serde_json::from_value(object["spec"]["manifest"].clone()).unwrap();
    assert_eq!(
        miggate_crds::Summary::of(&manifest).profiles.as_deref(),
        Some(devices)
    );
}

#[test]
fn the_columns_show_for_what_the_library_writes() {
    let manifest = miggate_compat::from_str(include_str!(
        "../../testdata/manifests/node-h100-1-whole-1-cut.yaml"
    ))
    .unwrap();
    let node = miggate_crds::GpuNode::from_manifest(
        "gpu-node-9",
        manifest,
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
    );
    let object = serde_json::to_value(&node).unwrap();
    for (name, _, path) in columns("GpuNode") {
        if ["Recovered", "Age"].contains(&name.as_str()) {
            continue; // status, and the server's own metadata
        }
        assert!(column_value(&object, &path).is_some(), "{name}: {path}");
    }
}
