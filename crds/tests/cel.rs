//! The CRDs' CEL rules, compiled and run client-side (kube's `cel` feature, the `cel` crate):
//! they parse, see only what a CRD rule may see, and refuse exactly the mistakes they are for.
//! The API server has its own CEL implementation; this is the closest check without one.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kube::core::cel::{ScopeContext, Validator, WarningKind, analyze_rule, check_rule_scope, compile_schema};
use miggate_crds::{CustomResourceDefinition, GpuNode, NODE_NAME_MESSAGE, NODE_NAME_RULE, crds};
use rstest::rstest;
use serde_json::{Value, json};

fn schema(kind: &str) -> Value {
    let crd: CustomResourceDefinition = crds().into_iter().find(|c| c.spec.names.kind == kind).unwrap();
    serde_json::to_value(
        crd.spec.versions[0]
            .schema
            .as_ref()
            .unwrap()
            .open_api_v3_schema
            .as_ref()
            .unwrap(),
    )
    .unwrap()
}

#[test]
fn every_rule_compiles_and_stays_in_scope() {
    for kind in ["GpuCheckpoint", "GpuNode"] {
        let compiled = compile_schema(&schema(kind));
        assert!(
            !compiled.has_errors(),
            "{kind}: {:?}",
            compiled.compilation_errors()
        );
    }
    let compiled = compile_schema(&schema("GpuNode"));
    let warnings = analyze_rule(NODE_NAME_RULE, &compiled, ScopeContext::CrdValidation);
    assert!(
        warnings
            .iter()
            .all(|w| !matches!(w.kind, WarningKind::CostExceeded)),
        "{warnings:?}"
    );
    assert_eq!(check_rule_scope(NODE_NAME_RULE, ScopeContext::CrdValidation), []);
}

fn node(name: &str, manifest: Value) -> Value {
    json!({
        "apiVersion": "miggate.io/v1alpha1",
        "kind": "GpuNode",
        "metadata": {"name": name},
        "spec": {"manifest": manifest, "observedAt": "2026-05-01T12:00:00Z"},
    })
}

#[rstest]
#[case::named_after_its_node("gpu-node-9", json!({"host": {"nodeName": "gpu-node-9"}}), true)]
#[case::no_host("gpu-node-9", json!({"nvidia": {"driverVersion": "580.82.07"}}), true)]
#[case::host_without_node_name("gpu-node-9", json!({"host": {"kernelVersion": "6.8.0"}}), true)]
#[case::empty_manifest("gpu-node-9", json!({}), true)]
#[case::another_nodes_inventory("gpu-node-9", json!({"host": {"nodeName": "gpu-node-1"}}), false)]
#[case::case_differs("gpu-node-9", json!({"host": {"nodeName": "GPU-node-9"}}), false)]
fn a_gpu_node_is_named_after_its_node(#[case] name: &str, #[case] manifest: Value, #[case] ok: bool) {
    let result = Validator::new().validate(&schema("GpuNode"), &node(name, manifest), None);
    match (result, ok) {
        (Ok(()), true) => {}
        (Err(errors), false) => {
            assert_eq!(errors.as_slice().len(), 1, "{errors:?}");
            assert_eq!(errors.as_slice()[0].message, NODE_NAME_MESSAGE);
        }
        (result, _) => panic!("expected ok={ok}, got {result:?}"),
    }
}

#[test]
fn what_from_manifest_builds_passes_the_rule() {
    let manifest = miggate_compat::from_str(include_str!(
        "../../testdata/manifests/node-h200-8gpu-gpu0-mig.yaml"
    ))
    .unwrap();
    let node = GpuNode::from_manifest(
        "h200-node-1",
        manifest,
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
    );
    kube::core::cel::validate_cel(&node).unwrap();
}

/// The summary is derived (by miggate's library, or the webhook's summary mutation), never
/// demanded: a writer that records devices without one, or with part of one, is accepted.
#[rstest]
#[case::devices_with_summary(json!({"nvidia": {"devices": []}}), Some(json!({"profiles": "none"})))]
#[case::devices_without_summary(json!({"nvidia": {"devices": []}}), None)]
#[case::summary_without_profiles(json!({"nvidia": {"devices": []}}), Some(json!({"model": "NVIDIA L4"})))]
#[case::no_devices_recorded(json!({"nvidia": {"driverVersion": "580.82.07"}}), None)]
#[case::no_nvidia(json!({}), None)]
fn a_summary_is_never_required(#[case] manifest: Value, #[case] summary: Option<Value>) {
    for kind in ["GpuNode", "GpuCheckpoint"] {
        let mut object = node("gpu-node-9", manifest.clone());
        object["kind"] = json!(kind);
        if let Some(s) = &summary {
            object["spec"]["summary"] = s.clone();
        }
        let result = Validator::new().validate(&schema(kind), &object, None);
        assert!(result.is_ok(), "{kind}: {result:?}");
    }
}
