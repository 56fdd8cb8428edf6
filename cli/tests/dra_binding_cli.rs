//! A DRA restore pod's binding through the real `miggate webhook` binary over HTTPS, its
//! caches filled from an in-process API server (kube-fake): `/mutate-binding` adds the
//! `miggate.io/device-map` annotation (patch pinned) once the pod's claim is allocated, even
//! when the allocation arrives a moment after the binding; `/validate` refuses a binding
//! whose allocated devices fail the exact check. Neither mutation ever refuses. A map a
//! Binding already carries never passes: replaced by the webhook's, or removed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::{Webhook, testdata};

fn yaml(rel: &str) -> Value {
    serde_saphyr::from_str(&std::fs::read_to_string(testdata(rel)).unwrap()).unwrap()
}

fn checkpoint() -> Value {
    let slice = |n: u32| {
        json!({"uuid": format!("MIG-00000000-0000-5000-8000-{n:012}"), "parentUuid": "GPU-00000000-0000-4000-8000-000000000000",
            "productName": "NVIDIA H100 80GB HBM3", "migProfile": "3g.40gb"})
    };
    json!({"apiVersion": "miggate.io/v1alpha1", "kind": "GpuCheckpoint",
        "metadata": {"name": "ckpt", "namespace": "ml"},
        "spec": {"manifest": {"nvidia": {"driverVersion": "580.82.07", "cudaDriverVersion": "13.0",
            "devices": [slice(1), slice(2)]}}}})
}

/// A restore pod whose claim `claim` was made from a template (named in its status).
fn pod(name: &str, claim: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "annotations": {"miggate.io/restore-from": "ckpt"}},
        "spec": {"resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "restore"}],
                 "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "gpus"}]}}]},
        "status": {"resourceClaimStatuses": [{"name": "gpus", "resourceClaimName": claim}]}})
}

fn claim(name: &str, devices: Option<&[&str]>) -> Value {
    let mut c = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"devices": {"requests": [{"name": "mig-3g-40gb", "exactly": {"deviceClassName": "mig.nvidia.com", "count": 2}}]}}});
    if let Some(devices) = devices {
        let results: Vec<Value> = devices
            .iter()
            .map(|d| json!({"request": "mig-3g-40gb", "driver": "gpu.nvidia.com", "pool": "gpu-node-7", "device": d}))
            .collect();
        c["status"] = json!({"allocation": {"devices": {"results": results}}});
    }
    c
}

fn binding(pod: &str) -> String {
    let mut review: Value =
        serde_json::from_str(&std::fs::read_to_string(testdata("admission/binding-create.json")).unwrap())
            .unwrap();
    review["request"]["name"] = json!(pod);
    review["request"]["object"]["metadata"]["name"] = json!(pod);
    review["request"]["object"]["target"]["name"] = json!("gpu-node-7");
    review.to_string()
}

async fn post(webhook: &Webhook, path: &str, body: String) -> Value {
    support::post_review(webhook, path, body).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_maps_an_allocated_claim_s_devices_at_binding() {
    let fake = std::sync::Arc::new(kube_fake::FakeApiServer::start().await.unwrap());
    apply_the_node_pods_and_claims(&fake);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, fake.kubeconfig()).unwrap();
    let webhook = Webhook::start_kube(&kubeconfig, &[]).await;

    let r = post(&webhook, "/mutate-binding", binding("fits")).await;
    assert_eq!(r["allowed"], true, "{r}");
    let map = "MIG-00000000-0000-5000-8000-000000000001=MIG-0b9a8c7d-6e5f-5a4b-8c3d-1e2f3a4b5c6d,MIG-00000000-0000-5000-8000-000000000002=MIG-6d7e2b1c-0f4a-5e8b-9c3d-2a1b0c9d8e7f";
    assert_eq!(
        support::patch_of(&r),
        Some(
            json!([{"op": "add", "path": "/metadata/annotations", "value": {"miggate.io/device-map": map}}])
        )
    );
    assert_eq!(r["auditAnnotations"]["device-map"], map);
    let v = post(&webhook, "/validate", binding("fits")).await;
    assert_eq!(v["allowed"], true, "{v}");
    assert_eq!(
        v["auditAnnotations"]["exact-on-allocated"],
        "gpu-node-7/gpu-0-mig-3g40gb-9-4, gpu-node-7/gpu-0-mig-3g40gb-9-0"
    );

    // The whole node fits in offer mode; the devices allocated do not.
    let v = post(&webhook, "/validate", binding("short")).await;
    assert_eq!(v["allowed"], false, "{v}");
    let message = v["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("(inventory from ResourceSlice, exact check on the allocated devices gpu-node-7/gpu-0-mig-3g40gb-9-0, gpu-node-7/gpu-1): "),
        "{message}"
    );
    let r = post(&webhook, "/mutate-binding", binding("short")).await;
    assert_eq!((r["allowed"].clone(), r.get("patch")), (json!(true), None), "{r}");

    // The allocation lands while the binding waits for it.
    let applier = {
        let fake = fake.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            fake.apply(claim(
                "late-gpus",
                Some(&["gpu-0-mig-3g40gb-9-0", "gpu-0-mig-3g40gb-9-4"]),
            ));
        })
    };
    let r = post(&webhook, "/mutate-binding", binding("late")).await;
    applier.await.unwrap();
    let patch = support::patch_of(&r).unwrap_or_else(|| panic!("no map: {r}; {}", webhook.log()));
    assert_eq!(patch[0]["path"], "/metadata/annotations");

    // A binding of a pod the webhook does not know as a restore pod is left alone.
    let r = post(&webhook, "/mutate-binding", binding("web-0")).await;
    assert_eq!((r["allowed"].clone(), r.get("patch")), (json!(true), None), "{r}");

    // ...unless it carries a device map: only miggate writes one, so the binder's is removed
    // (whoever the pod), or replaced where the webhook maps the pod itself.
    a_map_the_binding_carries_is_removed_or_replaced(&webhook, map).await;
}

/// A checkpoint of two 3g.40gb slices, gpu-node-7 (its DRA slices), and three restore pods: one
/// allocated devices that fit, one devices that do not, and one not allocated yet.
fn apply_the_node_pods_and_claims(fake: &kube_fake::FakeApiServer) {
    fake.apply(checkpoint());
    fake.apply(yaml("inventory/dra-v25.12-gpu-node-7.yaml"));
    fake.apply(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-node-7"}}));
    fake.apply(pod("fits", "fits-gpus"));
    fake.apply(claim(
        "fits-gpus",
        Some(&["gpu-0-mig-3g40gb-9-4", "gpu-0-mig-3g40gb-9-0"]),
    ));
    fake.apply(pod("short", "short-gpus"));
    fake.apply(claim("short-gpus", Some(&["gpu-0-mig-3g40gb-9-0", "gpu-1"])));
    fake.apply(pod("late", "late-gpus"));
    fake.apply(claim("late-gpus", None));
}

/// The recorded binding of `pod`, carrying a device map of the binder's.
fn carrying(pod: &str) -> String {
    let mut review: Value = serde_json::from_str(&binding(pod)).unwrap();
    review["request"]["object"]["metadata"]["annotations"] = json!({"miggate.io/device-map": "GPU-a=GPU-b"});
    review.to_string()
}

/// A pod the webhook does not map loses the binder's device map, with a warning; a pod it maps
/// gets `map` in its place.
async fn a_map_the_binding_carries_is_removed_or_replaced(webhook: &Webhook, map: &str) {
    let r = post(webhook, "/mutate-binding", carrying("web-0")).await;
    assert_eq!(r["allowed"], true, "{r}");
    assert_eq!(
        support::patch_of(&r),
        Some(json!([{"op": "remove", "path": "/metadata/annotations/miggate.io~1device-map"}]))
    );
    assert_eq!(
        r["warnings"],
        json!([
            "miggate: removed annotation miggate.io/device-map from the Binding of pod ml/web-0: only miggate writes it, from the devices the pod was allocated"
        ])
    );
    assert_eq!(
        r["auditAnnotations"]["device-map-removed"],
        "system:kube-scheduler"
    );
    let r = post(webhook, "/mutate-binding", carrying("fits")).await;
    assert_eq!(
        support::patch_of(&r),
        Some(json!([{"op": "add", "path": "/metadata/annotations/miggate.io~1device-map", "value": map}])),
        "{r}"
    );
    assert!(
        webhook
            .metric("miggate_admission_decisions_total{outcome=\"map-removed\"}")
            .await
            >= 1
    );
}
