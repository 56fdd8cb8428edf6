//! A DRA restore pod's binding: the exact check on the devices its claims were allocated
//! (the NVIDIA DRA driver's fixture slices for gpu-node-7: two 3g.40gb slices and a whole
//! H100), the validating verdict, and the device map the binding mutation writes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::core::DynamicObject;
use kube::core::admission::AdmissionRequest;
use miggate_admission::decide::{Verdict, decide};
use miggate_admission::device_map::{self, Outcome};
use miggate_admission::lookup::{ClaimAllocation, RestoreAnnotations, RestorePod};
use miggate_compat::GpuManifest;
use miggate_inventory::AllocatedDevice;
use rstest::rstest;
use serde_json::{Value, json};
use support::{Fake, testdata};

mod support;

/// A checkpoint of two 3g.40gb slices and one whole H100 on gpu-node-7's driver.
fn checkpoint() -> GpuManifest {
    let slice = |n: u32| {
        json!({"uuid": format!("MIG-00000000-0000-5000-8000-{n:012}"), "parentUuid": "GPU-00000000-0000-4000-8000-000000000000",
            "productName": "NVIDIA H100 80GB HBM3", "migProfile": "3g.40gb"})
    };
    let doc = json!({"apiVersion": "miggate.io/v1alpha1", "kind": "GpuManifest",
        "nvidia": {"driverVersion": "580.82.07", "cudaDriverVersion": "13.0", "devices": [
            slice(1), slice(2),
            {"uuid": "GPU-00000000-0000-4000-8000-000000000003", "productName": "NVIDIA H100 80GB HBM3"}]}});
    miggate_compat::from_str(&doc.to_string()).unwrap()
}

fn allocated(devices: &[&str]) -> Arc<ClaimAllocation> {
    Arc::new(ClaimAllocation {
        devices: Some(
            devices
                .iter()
                .map(|d| AllocatedDevice {
                    request: "gpus".into(),
                    driver: "gpu.nvidia.com".into(),
                    pool: "gpu-node-7".into(),
                    device: (*d).into(),
                })
                .collect(),
        ),
    })
}

fn cluster() -> Fake {
    let slice: ResourceSlice =
        serde_saphyr::from_str(&testdata("inventory/dra-v25.12-gpu-node-7.yaml")).unwrap();
    let mut node = Node::default();
    node.metadata.name = Some("gpu-node-7".into());
    let pod = |claims: &[&str]| {
        Arc::new(RestorePod {
            uid: None,
            annotations: RestoreAnnotations {
                restore_from: Some("ckpt".into()),
                ..RestoreAnnotations::default()
            },
            claims: claims.iter().map(|c| (*c).to_string()).collect(),
            gpu_asks: Vec::new(),
        })
    };
    Fake {
        pods: [
            ("ml/fits", pod(&["fits-gpus"])),
            ("ml/split", pod(&["split-a", "split-b"])),
            ("ml/short", pod(&["short-gpus"])),
            ("ml/pending", pod(&["pending-gpus"])),
            ("ml/unseen", pod(&["never-seen"])),
            ("ml/stale", pod(&["stale-gpus"])),
            ("ml/plain", pod(&[])),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect(),
        claims: [
            (
                "ml/fits-gpus",
                allocated(&["gpu-0-mig-3g40gb-9-0", "gpu-0-mig-3g40gb-9-4", "gpu-1"]),
            ),
            ("ml/split-a", allocated(&["gpu-1"])),
            (
                "ml/split-b",
                allocated(&["gpu-0-mig-3g40gb-9-4", "gpu-0-mig-3g40gb-9-0"]),
            ),
            ("ml/short-gpus", allocated(&["gpu-0-mig-3g40gb-9-0", "gpu-1"])),
            ("ml/pending-gpus", Arc::new(ClaimAllocation { devices: None })),
            (
                "ml/stale-gpus",
                allocated(&["gpu-0-mig-3g40gb-9-0", "gpu-0-mig-3g40gb-9-4", "gpu-2"]),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect(),
        keeps_claims: true,
        ..Fake::default()
    }
    .with_checkpoint("ml/ckpt", checkpoint(), None)
    .with_node(node, vec![slice])
}

fn binding(pod: &str) -> AdmissionRequest<DynamicObject> {
    support::binding(pod, "gpu-node-7")
}

const MAP: &str = "MIG-00000000-0000-5000-8000-000000000001=MIG-6d7e2b1c-0f4a-5e8b-9c3d-2a1b0c9d8e7f,MIG-00000000-0000-5000-8000-000000000002=MIG-0b9a8c7d-6e5f-5a4b-8c3d-1e2f3a4b5c6d,GPU-00000000-0000-4000-8000-000000000003=GPU-f0e1d2c3-b4a5-9687-7869-5a4b3c2d1e0f";

/// Each pod's binding to gpu-node-7, whose whole inventory fits the checkpoint in offer mode:
/// only the allocation can refuse. `exact_on` is the audit annotation naming the devices the
/// exact check ran on; `says` a text of the message or a warning.
#[rstest]
#[case::allocated_the_checkpoint_s_shape(
    "fits",
    Verdict::Warned,
    Some("gpu-node-7/gpu-0-mig-3g40gb-9-0, gpu-node-7/gpu-0-mig-3g40gb-9-4, gpu-node-7/gpu-1"),
    ""
)]
#[case::over_two_claims(
    "split",
    Verdict::Warned,
    Some("gpu-node-7/gpu-1, gpu-node-7/gpu-0-mig-3g40gb-9-4, gpu-node-7/gpu-0-mig-3g40gb-9-0"),
    ""
)]
#[case::allocated_one_slice_short(
    "short",
    Verdict::Refused,
    Some("gpu-node-7/gpu-0-mig-3g40gb-9-0, gpu-node-7/gpu-1"),
    "cannot be restored on node gpu-node-7 (inventory from ResourceSlice, exact check on the allocated devices gpu-node-7/gpu-0-mig-3g40gb-9-0, gpu-node-7/gpu-1): "
)]
#[case::claim_not_allocated(
    "pending",
    Verdict::Warned,
    None,
    "exact check on the allocated devices not run: ResourceClaim ml/pending-gpus is not allocated; judged against the whole node in offer mode"
)]
#[case::claim_not_seen(
    "unseen",
    Verdict::Warned,
    None,
    "ResourceClaim ml/never-seen is not in the webhook's cache"
)]
#[case::allocation_the_slices_no_longer_list(
    "stale",
    Verdict::Warned,
    None,
    "no device `gpu-2` in pool `gpu-node-7`"
)]
#[case::no_claims("plain", Verdict::Warned, None, "")]
fn the_binding_is_judged_on_the_allocated_devices(
    #[case] pod: &str,
    #[case] verdict: Verdict,
    #[case] exact_on: Option<&str>,
    #[case] says: &str,
) {
    let d = decide(&binding(pod), &cluster());
    let text = format!("{} {:?}", d.response.result.message, d.response.warnings);
    assert_eq!(d.verdict, verdict, "{text}");
    assert_eq!(
        d.response
            .audit_annotations
            .get("exact-on-allocated")
            .map(String::as_str),
        exact_on
    );
    assert!(text.contains(says), "{text}");
    if verdict == Verdict::Refused {
        assert!(
            d.refused_by.iter().any(|r| *r == "gpu-count"),
            "{:?}",
            d.refused_by
        );
    }
}

/// The device map written to each binding: the pairs of the exact check's report, or nothing.
#[rstest]
#[case::allocated_the_checkpoint_s_shape("fits", Outcome::Mapped, Some(MAP))]
#[case::over_two_claims(
    "split",
    Outcome::Mapped,
    Some(
        "MIG-00000000-0000-5000-8000-000000000001=MIG-0b9a8c7d-6e5f-5a4b-8c3d-1e2f3a4b5c6d,MIG-00000000-0000-5000-8000-000000000002=MIG-6d7e2b1c-0f4a-5e8b-9c3d-2a1b0c9d8e7f,GPU-00000000-0000-4000-8000-000000000003=GPU-f0e1d2c3-b4a5-9687-7869-5a4b3c2d1e0f"
    )
)]
#[case::allocated_one_slice_short("short", Outcome::NotMapped, None)]
#[case::claim_not_allocated("pending", Outcome::Ignored, None)]
#[case::allocation_the_slices_no_longer_list("stale", Outcome::Ignored, None)]
#[case::no_claims("plain", Outcome::Ignored, None)]
#[case::not_a_restore_pod("web-0", Outcome::Ignored, None)]
fn the_binding_carries_the_device_map(
    #[case] pod: &str,
    #[case] outcome: Outcome,
    #[case] map: Option<&str>,
) {
    let m = device_map::map(&binding(pod), &cluster(), &binders());
    assert_eq!(m.outcome, outcome, "{:?}", m.response.warnings);
    assert!(m.response.allowed, "a binding mutation never refuses");
    let patch: Option<Value> = m
        .response
        .patch
        .as_ref()
        .map(|p| serde_json::from_slice(p).unwrap());
    let want = map.map(|map| json!([{"op": "add", "path": "/metadata/annotations", "value": {"miggate.io/device-map": map}}]));
    assert_eq!(patch, want);
    assert_eq!(
        m.response.audit_annotations.get("device-map").map(String::as_str),
        map
    );
}

#[test]
fn a_binding_with_annotations_gets_the_key_added() {
    let mut req = binding("fits");
    req.object.as_mut().unwrap().metadata.annotations = Some([("team".to_string(), "ml".to_string())].into());
    let m = device_map::map(&req, &cluster(), &binders());
    let patch: Value = serde_json::from_slice(m.response.patch.as_ref().unwrap()).unwrap();
    assert_eq!(
        patch,
        json!([{"op": "add", "path": "/metadata/annotations/miggate.io~1device-map", "value": MAP}])
    );
}

/// Another scheduler (KAI, Volcano) binds a restore pod: bound without a map, never blocked,
/// counted; listed, it gets the map as the default scheduler does.
#[rstest]
#[case::unlisted("system:serviceaccount:kai-scheduler:kai-scheduler", &["system:kube-scheduler"], Outcome::UnlistedBinder)]
#[case::listed("system:serviceaccount:kai-scheduler:kai-scheduler", &["system:kube-scheduler", "system:serviceaccount:kai-scheduler:kai-scheduler"], Outcome::Mapped)]
#[case::nobody_listed_matches("", &["system:kube-scheduler"], Outcome::UnlistedBinder)]
fn only_a_listed_binder_gets_the_map(#[case] user: &str, #[case] listed: &[&str], #[case] outcome: Outcome) {
    let mut req = binding("fits");
    req.user_info.username = Some(user.to_string());
    let listed: Vec<String> = listed.iter().map(|s| s.to_string()).collect();
    let m = device_map::map(&req, &cluster(), &listed);
    assert_eq!(m.outcome, outcome);
    assert!(m.response.allowed, "never blocked");
    assert_eq!(m.response.patch.is_some(), outcome == Outcome::Mapped);
}

fn binders() -> Vec<String> {
    vec!["system:kube-scheduler".to_string()]
}

/// The map is the pod's whose UID the Binding carries: a pod recreated under the name while the
/// watch lags is not mapped as the cached one (whose claims are another pod's).
#[rstest]
#[case::the_cached_pod(Some("u-1"), Some("u-1"), Outcome::Mapped)]
#[case::recreated_under_its_name(Some("u-1"), Some("u-2"), Outcome::Ignored)]
#[case::a_binding_without_uid(Some("u-1"), None, Outcome::Mapped)]
fn the_map_is_the_bound_uid_s(
    #[case] cached: Option<&str>,
    #[case] bound: Option<&str>,
    #[case] outcome: Outcome,
) {
    let mut cluster = cluster();
    let pod = cluster.pods.get("ml/fits").unwrap().as_ref().clone();
    cluster.pods.insert(
        "ml/fits".into(),
        Arc::new(RestorePod {
            uid: cached.map(str::to_string),
            ..pod
        }),
    );
    let mut req = binding("fits");
    req.object.as_mut().unwrap().metadata.uid = bound.map(str::to_string);
    let m = device_map::map(&req, &cluster, &binders());
    assert_eq!(m.outcome, outcome, "{:?}", m.response.warnings);
    assert_eq!(m.response.patch.is_some(), outcome == Outcome::Mapped);
}

/// A Binding that arrives carrying a device map (written by whoever can bind as a listed
/// binder) keeps none of it: the webhook's own map replaces it where it maps the pod, and it
/// is removed everywhere else, with a warning, read in place as from kube's types.
#[rstest]
#[case::mapped_replaces_it("fits", "system:kube-scheduler", Outcome::Mapped)]
#[case::refused_allocation("short", "system:kube-scheduler", Outcome::MapRemoved)]
#[case::claim_not_allocated("pending", "system:kube-scheduler", Outcome::MapRemoved)]
#[case::no_claims("plain", "system:kube-scheduler", Outcome::MapRemoved)]
#[case::not_a_restore_pod("web-0", "system:kube-scheduler", Outcome::MapRemoved)]
#[case::unlisted_binder("fits", "system:serviceaccount:ml:default", Outcome::MapRemoved)]
fn a_map_the_binding_carries_is_never_kept(#[case] pod: &str, #[case] user: &str, #[case] outcome: Outcome) {
    let mut req = binding(pod);
    req.user_info.username = Some(user.to_string());
    req.object.as_mut().unwrap().metadata.annotations = Some(
        [
            ("miggate.io/device-map".to_string(), "GPU-a=GPU-b".to_string()),
            ("team".to_string(), "ml".to_string()),
        ]
        .into(),
    );
    let body = serde_json::to_vec(
        &json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}),
    )
    .unwrap();
    let lean = miggate_admission::review::parse(&body).unwrap();
    for m in [
        device_map::map(&req, &cluster(), &binders()),
        device_map::map_review(&lean, &cluster(), &binders()),
    ] {
        assert_eq!(m.outcome, outcome, "{:?}", m.response.warnings);
        assert!(m.response.allowed, "never blocked");
        let patch: Value = serde_json::from_slice(m.response.patch.as_ref().unwrap()).unwrap();
        let warnings = m.response.warnings.clone().unwrap_or_default();
        if outcome == Outcome::Mapped {
            assert_eq!(
                patch,
                json!([{"op": "add", "path": "/metadata/annotations/miggate.io~1device-map", "value": MAP}])
            );
            assert!(warnings.is_empty(), "{warnings:?}");
            continue;
        }
        assert_eq!(
            patch,
            json!([{"op": "remove", "path": "/metadata/annotations/miggate.io~1device-map"}])
        );
        assert_eq!(
            warnings.last().map(String::as_str),
            Some(
                format!("miggate: removed annotation miggate.io/device-map from the Binding of pod ml/{pod}: only miggate writes it, from the devices the pod was allocated")
                    .as_str()
            )
        );
        assert_eq!(
            m.response
                .audit_annotations
                .get("device-map-removed")
                .map(String::as_str),
            Some(user)
        );
        assert_eq!(m.response.audit_annotations.get("device-map"), None);
    }
}

/// The exact check's own warning stays beside the removal's.
#[test]
fn a_removed_map_keeps_the_warning_of_why_none_was_written() {
    let mut req = binding("short");
    req.object.as_mut().unwrap().metadata.annotations =
        Some([("miggate.io/device-map".to_string(), "x".to_string())].into());
    let m = device_map::map(&req, &cluster(), &binders());
    let warnings = m.response.warnings.unwrap_or_default();
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings[0].contains("the exact check on its allocated devices refused"),
        "{warnings:?}"
    );
}

/// Without a map in the Binding nothing is removed: the answers stay as they were.
#[test]
fn a_binding_without_a_map_is_not_patched_for_it() {
    let m = device_map::map(&binding("web-0"), &cluster(), &binders());
    assert_eq!(m.outcome, Outcome::Ignored);
    assert!(m.response.patch.is_none() && m.response.warnings.is_none());
}
