//! The summary mutation through the real `miggate webhook` binary over HTTPS: a
//! `GpuCheckpoint` written from a manifest alone (as the peer's agent or a Go or Python agent
//! writes one) gets the `spec.summary` `kubectl get` shows, a wrong one is replaced, a right one
//! kept, and each answer is counted.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use serde_json::{Value, json};
use support::{Webhook, patch_of, post_review};

fn review(resource: &str, summary: Option<Value>) -> String {
    let slice = |n: u32, p: &str| {
        json!({"uuid": format!("MIG-00000000-0000-5000-8000-00000000000{n}"),
            "parentUuid": "GPU-00000000-0000-4000-8000-000000000000",
            "productName": "NVIDIA H100 80GB HBM3", "migProfile": p})
    };
    let mut spec = json!({"manifest": {"host": {"nodeName": "gpu-node-7"},
        "nvidia": {"driverVersion": "580.82.07", "devices": [slice(1, "3g.40gb"), slice(2, "3g.40gb"),
            {"uuid": "GPU-10000000-0000-4000-8000-000000000000", "productName": "NVIDIA H100 80GB HBM3"}]}}});
    if let Some(s) = summary {
        spec["summary"] = s;
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "00000000-0000-4000-8000-000000000301",
        "kind": {"group": "miggate.io", "version": "v1alpha1", "kind": "GpuCheckpoint"},
        "resource": {"group": "miggate.io", "version": "v1alpha1", "resource": resource},
        "name": "vllm-ckpt", "namespace": "ml", "operation": "CREATE",
        "userInfo": {"username": "system:serviceaccount:ml:checkpoint-agent"},
        "object": {"apiVersion": "miggate.io/v1alpha1", "kind": "GpuCheckpoint",
            "metadata": {"name": "vllm-ckpt", "namespace": "ml"}, "spec": spec}}})
    .to_string()
}

async fn post(webhook: &Webhook, body: String) -> Value {
    post_review(webhook, "/mutate-summary", body).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_written_from_a_manifest_alone_gets_its_summary() {
    let webhook = Webhook::start(&[]).await;
    let expected =
        json!({"model": "NVIDIA H100 80GB HBM3", "profiles": "3g.40gb x2, whole x1", "driver": "580.82.07"});

    let r = post(&webhook, review("gpucheckpoints", None)).await;
    assert_eq!(r["allowed"], true, "{r}");
    assert_eq!(r["uid"], "00000000-0000-4000-8000-000000000301");
    assert_eq!(
        patch_of(&r),
        Some(json!([{"op": "add", "path": "/spec/summary", "value": expected}])),
        "{r}"
    );
    assert_eq!(r["auditAnnotations"]["summary"], "3g.40gb x2, whole x1", "{r}");

    // A summary that does not match the manifest is replaced; the right one is kept.
    let r = post(
        &webhook,
        review("gpucheckpoints", Some(json!({"profiles": "7g.80gb x8"}))),
    )
    .await;
    assert_eq!(
        patch_of(&r),
        Some(json!([{"op": "add", "path": "/spec/summary", "value": expected}])),
        "{r}"
    );
    let r = post(&webhook, review("gpucheckpoints", Some(expected.clone()))).await;
    assert_eq!((r["allowed"].clone(), patch_of(&r)), (json!(true), None), "{r}");

    // Another resource is left alone, allowed.
    let r = post(&webhook, review("widgets", None)).await;
    assert_eq!((r["allowed"].clone(), patch_of(&r)), (json!(true), None), "{r}");

    for (outcome, n) in [
        ("summary-written", 2),
        ("summary-kept", 1),
        ("summary-ignored", 1),
    ] {
        let counted = webhook
            .metric(&format!(
                "miggate_admission_decisions_total{{outcome=\"{outcome}\"}}"
            ))
            .await;
        assert_eq!(counted, n, "{outcome}");
    }
}
