//! Resources as kube reads and writes them (plain serde_json): what a manifest does not know is
//! kept, warned about and written back, so neither the webhook nor a controller loses a typo.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use miggate_crds::{GpuCheckpoint, GpuNode, RecoveredReason};
use serde_json::json;

#[test]
fn a_typo_inside_a_checkpoints_manifest_is_kept_warned_and_written_back() {
    let object = json!({
        "apiVersion": "miggate.io/v1alpha1",
        "kind": "GpuCheckpoint",
        "metadata": {"name": "train-42", "namespace": "ml"},
        "spec": {
            "manifest": {
                "host": {"kernelVersion": "6.8.0-1015-nvidia"},
                "nvidia": {
                    "driverversion": "580.82.07",
                    "devices": [{"uuid": "MIG-1", "productName": "NVIDIA H100 80GB HBM3", "migProfile": "3g.40gb"}]
                }
            },
            "containerName": "trainer"
        }
    });
    let checkpoint: GpuCheckpoint = serde_json::from_value(object.clone()).unwrap();
    let warnings = checkpoint.spec.manifest.read_warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].to_string().contains("`nvidia.driverversion`"),
        "{warnings:?}"
    );
    assert_eq!(
        checkpoint.spec.manifest.nvidia.as_ref().unwrap().driver_version,
        None
    );
    assert_eq!(checkpoint.spec.container_name.as_deref(), Some("trainer"));

    let back = serde_json::to_value(&checkpoint).unwrap();
    assert_eq!(back, object);
    assert_eq!(back["spec"]["manifest"]["nvidia"]["driverversion"], "580.82.07");
    let again: GpuCheckpoint = serde_json::from_str(&serde_json::to_string(&checkpoint).unwrap()).unwrap();
    assert_eq!(again, checkpoint);
}

#[test]
fn a_node_with_its_status_reads_and_writes_back_unchanged() {
    let object = json!({
        "apiVersion": "miggate.io/v1alpha1",
        "kind": "GpuNode",
        "metadata": {"name": "gpu-node-9"},
        "spec": {
            "manifest": {"host": {"nodeName": "gpu-node-9"}, "nvidia": {"driverVersion": "580.82.07", "futureField": {"x": 1}}},
            "observedAt": "2026-05-01T12:00:00Z",
            "summary": {"driver": "580.82.07"}
        },
        "status": {"conditions": [{
            "type": "Recovered", "status": "True", "reason": "Ready", "message": "3 instances rebuilt",
            "lastTransitionTime": "2026-05-01T12:00:05Z", "observedGeneration": 3
        }]}
    });
    let node: GpuNode = serde_json::from_value(object.clone()).unwrap();
    assert_eq!(node.recovered(), Some(RecoveredReason::Ready));
    assert_eq!(
        node.spec.observed_at,
        Time("2026-05-01T12:00:00Z".parse::<Timestamp>().unwrap())
    );
    assert!(
        node.spec.manifest.read_warnings()[0]
            .to_string()
            .contains("`nvidia.futureField`")
    );
    assert_eq!(serde_json::to_value(&node).unwrap(), object);
}

#[test]
fn from_manifest_fills_in_name_summary_and_time() {
    let manifest = miggate_compat::from_str(include_str!(
        "../../testdata/manifests/node-h100-1-whole-1-cut.yaml"
    ))
    .unwrap();
    let at = Time("2026-05-01T12:00:00Z".parse::<Timestamp>().unwrap());
    let node = GpuNode::from_manifest("gpu-node-9", manifest.clone(), at);
    let value = serde_json::to_value(&node).unwrap();
    assert_eq!(value["metadata"], json!({"name": "gpu-node-9"}));
    assert_eq!(value["spec"]["observedAt"], "2026-05-01T12:00:00Z");
    assert_eq!(
        value["spec"]["summary"],
        json!({"model": "NVIDIA H100 80GB HBM3", "profiles": "3g.40gb x2, whole x1", "driver": "580.82.07"})
    );
    assert!(value.get("status").is_none(), "{value:#}");

    let checkpoint = GpuCheckpoint::from_manifest("ckpt", manifest);
    let value = serde_json::to_value(&checkpoint).unwrap();
    assert_eq!(value["apiVersion"], "miggate.io/v1alpha1");
    assert_eq!(value["kind"], "GpuCheckpoint");
    assert!(value["spec"].get("containerName").is_none());
}
