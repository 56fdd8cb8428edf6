#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The manifest body as a Kubernetes resource's `spec.manifest`: its schema must be structural
//! (what apiextensions.k8s.io/v1 accepts), and its values must survive plain serde.

use miggate_compat::{GpuManifest, manifest_body_schema, render_path};
use serde_json::{Value, json};

fn at<'a>(schema: &'a Value, path: &[&str]) -> &'a Value {
    path.iter().fold(schema, |node, key| match *key {
        "[]" => &node["items"],
        "{}" => &node["additionalProperties"],
        k => &node["properties"][k],
    })
}

#[test]
fn the_body_schema_is_structural() {
    let schema = manifest_body_schema();
    let problems = miggate_compat::structural_problems(&schema, "spec.manifest");
    assert!(problems.is_empty(), "{problems:#?}\n{schema:#}");
}

#[test]
fn the_body_schema_has_no_envelope_and_keeps_unknown_fields() {
    let schema = manifest_body_schema();
    let props = schema["properties"].as_object().unwrap();
    assert!(
        !props.contains_key("apiVersion") && !props.contains_key("kind"),
        "{props:?}"
    );
    assert!(schema.get("required").is_none(), "{schema:#}");
    for path in [
        &[][..],
        &["host"],
        &["pod"],
        &["nvidia"],
        &["nvidia", "devices", "[]"],
        &["nvidia", "gpus", "[]"],
        &["capturedBy"],
    ] {
        assert_eq!(
            at(&schema, path)["x-kubernetes-preserve-unknown-fields"],
            true,
            "{path:?}"
        );
    }
}

#[test]
fn quantities_are_int_or_string() {
    let schema = manifest_body_schema();
    for path in [
        &["pod", "cpuLimit"][..],
        &["pod", "memoryLimit"],
        &["pod", "gpuRequests", "{}"],
    ] {
        let q = at(&schema, path);
        assert_eq!(q["x-kubernetes-int-or-string"], true, "{path:?}: {q}");
        assert!(q.get("type").is_none(), "{path:?}: {q}");
    }
}

#[test]
fn a_typo_read_through_plain_serde_is_warned_and_written_back() {
    // What kube does with a resource's spec: serde_json::from_value, then to_value.
    let spec = json!({
        "host": {"kernelVersion": "6.8.0-1015-nvidia"},
        "nvidia": {"driverversion": "580.82.07", "devices": [{"uuid": "GPU-1", "productname": "NVIDIA L4"}]},
    });
    let m: GpuManifest = serde_json::from_value(spec.clone()).unwrap();
    let warnings = m.read_warnings();
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings[0].to_string().contains("`nvidia.driverversion`"),
        "{warnings:?}"
    );
    assert!(
        warnings[1]
            .to_string()
            .contains("`nvidia.devices[0].productname`"),
        "{warnings:?}"
    );
    let paths: Vec<String> = m.unknown_fields().iter().map(|f| render_path(&f.path)).collect();
    assert_eq!(paths, ["nvidia.driverversion", "nvidia.devices[0].productname"]);
    assert_eq!(serde_json::to_value(&m).unwrap(), spec);
    assert_eq!(
        serde_json::from_str::<GpuManifest>(&serde_json::to_string(&m).unwrap()).unwrap(),
        m
    );
    // The document writer keeps them too, under the envelope.
    let doc = m.to_value().unwrap();
    assert_eq!(doc["apiVersion"], "miggate.io/v1alpha1");
    assert_eq!(doc["nvidia"]["driverversion"], "580.82.07");
}
