//! Decisions on cluster states the source tables do not cover, read through the real
//! inventory sources (`miggate_inventory::best`): a GFD count that is a certain
//! shortfall, labels in flux, and a checkpoint `nvidia.com/gpu` can never serve.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionReview};
use miggate_admission::decide::{Verdict, decide};
use miggate_admission::lookup::{Checkpoint, RestoreAnnotations, RestorePod};
use miggate_compat::{Gpu, GpuManifest, MigStrategy};
use rstest::rstest;
use serde_json::{Value, json};
use support::{Fake, binding, inventory, testdata};

mod support;

/// A checkpoint on two 3g.40gb and one 1g.10gb slice of one H100.
fn two_3g_one_1g() -> GpuManifest {
    GpuManifest::builder()
        .kernel("5.15.0-1071-aws")
        .cpu_arch("amd64")
        .driver("580.82.07")
        .gpu(Gpu::h100().cut(["3g.40gb", "3g.40gb", "1g.10gb"]))
        .build()
        .unwrap()
}

/// One node, read from its `Node` object (GFD labels) and its DRA slices, and one restore pod
/// of the checkpoint `ml/ckpt`.
fn one_node(
    node: Node,
    slices: Vec<k8s_openapi::api::resource::v1::ResourceSlice>,
    checkpoint: GpuManifest,
) -> Fake {
    Fake::default()
        .with_checkpoint("ml/ckpt", checkpoint, None)
        .with_node(node, slices)
        .with_pod(
            "ml/restore",
            RestorePod {
                annotations: RestoreAnnotations {
                    restore_from: Some("ckpt".into()),
                    ..RestoreAnnotations::default()
                },
                ..RestorePod::default()
            },
        )
}

fn gfd_node(labels: &[(&str, &str)]) -> Fake {
    let mut node: Node = serde_saphyr::from_str(&testdata("inventory/gfd-mixed-gpu-node-7.yaml")).unwrap();
    let map = node.metadata.labels.as_mut().unwrap();
    for (k, v) in labels {
        if v.is_empty() {
            map.remove(*k);
        } else {
            map.insert((*k).into(), (*v).into());
        }
    }
    one_node(node, Vec::new(), two_3g_one_1g())
}

/// gpu-node-8 under DynamicMIG: two H100s the DRA driver partitions on demand.
fn dynamic_node() -> Fake {
    dynamic_node_of(two_3g_one_1g())
}

/// gpu-node-8 under DynamicMIG, and a checkpoint of `checkpoint`.
fn dynamic_node_of(checkpoint: GpuManifest) -> Fake {
    #[derive(serde::Deserialize)]
    struct List {
        items: Vec<k8s_openapi::api::resource::v1::ResourceSlice>,
    }
    let list: List = serde_saphyr::from_str(&testdata("inventory/dra-dynmig-gpu-node-8.yaml")).unwrap();
    let mut node: Node = serde_saphyr::from_str(&testdata("inventory/node-gpu-node-7.yaml")).unwrap();
    node.metadata.name = Some("gpu-node-8".into());
    one_node(node, list.items, checkpoint)
}

/// The checkpoint (2×3g.40gb + 1×1g.10gb) fits what two H100s can supply on demand: the
/// binding is admitted, and a warning says the node partitions on demand.
#[test]
fn a_dynamic_mig_node_is_judged_by_what_it_can_supply() {
    let store = dynamic_node();
    let d = decide(&binding("restore", "gpu-node-8"), &store);
    assert_ne!(d.verdict, Verdict::Refused, "{}", text(&d));
    let warnings = d.response.warnings.clone().unwrap_or_default();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("partitions its GPUs on demand")),
        "{warnings:?}"
    );
    assert!(
        !warnings.iter().any(|w| w.contains("mig-profile unknown")),
        "{warnings:?}"
    );
}

fn pod_create(limits: Value, node: Option<&str>) -> AdmissionRequest<DynamicObject> {
    let mut review: Value =
        serde_json::from_str(&testdata("admission/pod-create-restore-allowed.json")).unwrap();
    let obj = &mut review["request"]["object"];
    obj["metadata"]["annotations"]["miggate.io/restore-from"] = json!("ckpt");
    obj["spec"]["containers"][0]["resources"]["limits"] = limits;
    if let Some(n) = node {
        obj["spec"]["nodeName"] = json!(n);
    }
    let review: AdmissionReview<DynamicObject> = serde_json::from_value(review).unwrap();
    review.try_into().unwrap()
}

fn text(d: &miggate_admission::decide::Decision) -> String {
    format!("{} {:?}", d.response.result.message, d.response.warnings)
}

/// GFD says the node has no 1g.10gb slice: the binding is refused naming mig-profile with
/// both values, though the GPUs GFD counts have no UUID.
#[test]
fn a_gfd_shortfall_is_refused_at_binding() {
    let store = gfd_node(&[("nvidia.com/mig-1g.10gb.count", "0")]);
    let d = decide(&binding("restore", "gpu-node-7"), &store);
    assert_eq!(d.verdict, Verdict::Refused, "{}", text(&d));
    assert!(
        d.refused_by.iter().any(|r| *r == "mig-profile"),
        "{:?}",
        d.refused_by
    );
    assert!(
        d.response
            .result
            .message
            .contains("mig-profile: source 1g.10gb x1, 3g.40gb x2, target 3g.40gb x2"),
        "{}",
        text(&d)
    );
    insta::assert_snapshot!("gfd_shortfall_binding", d.response.result.message);
}

/// mig-manager mid-way: nothing read from the node refuses, at binding or at a pod created
/// on the node, and a warning says the node is being reconfigured. `only-gpu-count` is the
/// state that used to refuse on `gpu-model` (one GPU counted, no MIG labels yet).
#[rstest]
fn a_node_being_reconfigured_never_refuses(
    #[values("pending", "rebooting")] state: &str,
    #[values("mig-counts", "only-gpu-count")] labels: &str,
    #[values("binding", "pod-on-node")] request: &str,
) {
    let mut set = vec![("nvidia.com/mig.config.state", state)];
    if labels == "only-gpu-count" {
        set.extend([
            ("nvidia.com/mig-3g.40gb.count", ""),
            ("nvidia.com/gpu.count", "1"),
            ("nvidia.com/gpu.replicas", "1"),
        ]);
    }
    let store = gfd_node(&set);
    let req = match request {
        "binding" => binding("restore", "gpu-node-7"),
        _ => pod_create(
            json!({"nvidia.com/mig-3g.40gb": "2", "nvidia.com/mig-1g.10gb": "1"}),
            Some("gpu-node-7"),
        ),
    };
    let d = decide(&req, &store);
    assert_ne!(d.verdict, Verdict::Refused, "{}", text(&d));
    let warnings = d.response.warnings.clone().unwrap_or_default();
    assert!(
        warnings.iter().any(|w| w.contains("is being reconfigured")),
        "{warnings:?}"
    );
}

/// A checkpoint on slices of two profiles can never come through `nvidia.com/gpu`: refused
/// when the pod is created, with no node named and no strategy known.
#[test]
fn two_profiles_through_nvidia_gpu_are_refused_at_creation() {
    let store = gfd_node(&[]);
    let d = decide(&pod_create(json!({"nvidia.com/gpu": "3"}), None), &store);
    assert_eq!(d.verdict, Verdict::Refused, "{}", text(&d));
    assert_eq!(d.refused_by, ["gpu-request"]);
    insta::assert_snapshot!("two_profiles_through_gpu", d.response.result.message);
}

/// The strategy the node's labels give reaches gpu-request for a pod created on the node:
/// under `single` no `nvidia.com/mig-*` resource exists, so the requests are refused in that
/// strategy's words; without the label the same requests pass gpu-request.
#[rstest]
#[case::single("single", true)]
#[case::unlabelled("", false)]
fn the_labelled_strategy_reaches_gpu_request(#[case] strategy: &str, #[case] refused: bool) {
    let store = gfd_node(&[
        ("nvidia.com/mig-1g.10gb.count", "1"),
        ("nvidia.com/mig.strategy", strategy),
    ]);
    let d = decide(
        &pod_create(
            json!({"nvidia.com/mig-3g.40gb": "2", "nvidia.com/mig-1g.10gb": "1"}),
            Some("gpu-node-7"),
        ),
        &store,
    );
    assert_eq!(
        d.refused_by.iter().any(|r| *r == "gpu-request"),
        refused,
        "{}",
        text(&d)
    );
    if refused {
        assert!(
            d.response
                .result
                .message
                .contains("gpu-request: source nvidia.com/mig-1g.10gb x1, nvidia.com/mig-3g.40gb x2"),
            "{}",
            text(&d)
        );
    }
}

/// A shape the node's counters cannot hold together (4×3g.40gb + 1×1g.10gb on two H100s with
/// 8 memory slices each) is refused at binding, and the refusal says the node partitions on
/// demand.
#[test]
fn a_dynamic_mig_node_refuses_a_shape_its_counters_cannot_hold() {
    let four_and_one = GpuManifest::builder()
        .kernel("5.15.0-1071-aws")
        .cpu_arch("amd64")
        .driver("580.82.07")
        .gpu(Gpu::h100().cut(["3g.40gb"; 2]))
        .gpu(Gpu::h100().cut(["3g.40gb", "3g.40gb", "1g.10gb"]))
        .build()
        .unwrap();
    let d = decide(&binding("restore", "gpu-node-8"), &dynamic_node_of(four_and_one));
    assert_eq!(d.verdict, Verdict::Refused, "{}", text(&d));
    assert!(
        d.refused_by.iter().any(|r| *r == "mig-profile"),
        "{:?}",
        d.refused_by
    );
    insta::assert_snapshot!("dynamic_mig_refused", d.response.result.message);
}

/// A real GFD label set (`testdata/inventory/gfd-real/`) as node gpu-node-7, with `removed`
/// labels taken away and `set` ones set.
fn real_gfd_node(file: &str, removed: &[&str], set: &[(&str, &str)]) -> Fake {
    let mut node: Node = serde_saphyr::from_str(&testdata(&format!("inventory/gfd-real/{file}"))).unwrap();
    node.metadata.name = Some("gpu-node-7".into());
    let map = node.metadata.labels.as_mut().unwrap();
    for k in removed {
        assert!(map.remove(*k).is_some(), "{file} has {k}");
    }
    for (k, v) in set {
        map.insert((*k).into(), (*v).into());
    }
    one_node(node, Vec::new(), two_3g_one_1g())
}

/// Partial GFD labels at binding: what they settle refuses, naming the check and what the
/// labels show (`x?` where they name a class but not how many); a failed mig-manager state is
/// admitted with a warning that names it.
#[rstest]
// The H100 all-balanced set without gpu.count: its slices are counted per profile, one
// 3g.40gb where the checkpoint needs two.
#[case::mixed_counted_short(
    "gfd-real-mig-mixed-h100-balanced-gpuop.yaml",
    &["nvidia.com/gpu.count"],
    &[],
    Some("mig-profile: source 1g.10gb x1, 3g.40gb x2, target 1g.10gb x2, 2g.20gb x1, 3g.40gb x1")
)]
// The H100 NVL single-strategy set without gpu.count, relabelled as an H100 80GB cut into
// 1g.10gb: no 3g.40gb, however many slices.
#[case::single_other_profile(
    "gfd-real-single-nocount-h100nvl-wangken.yaml",
    &[],
    &[("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb")],
    Some("mig-profile: source 1g.10gb x1, 3g.40gb x2, target 1g.10gb x?")
)]
#[case::failed_admitted("gfd-real-failed-unknown-longpt-partial.yaml", &[], &[], None)]
fn partial_gfd_labels_at_binding(
    #[case] file: &str,
    #[case] removed: &[&str],
    #[case] set: &[(&str, &str)],
    #[case] refused: Option<&str>,
) {
    let store = real_gfd_node(file, removed, set);
    let d = decide(&binding("restore", "gpu-node-7"), &store);
    let warnings = d.response.warnings.clone().unwrap_or_default();
    match refused {
        Some(reason) => {
            assert_eq!(d.verdict, Verdict::Refused, "{}", text(&d));
            assert!(d.response.result.message.contains(reason), "{}", text(&d));
            assert!(
                warnings.iter().any(|w| w.contains("no nvidia.com/gpu.count")),
                "{warnings:?}"
            );
        }
        None => {
            assert_ne!(d.verdict, Verdict::Refused, "{}", text(&d));
            assert!(
                warnings
                    .iter()
                    .any(|w| w.contains("nvidia.com/mig.config.state=failed, not success")),
                "{warnings:?}"
            );
        }
    }
}

/// A peer restore pod's binding judges each destination its container map names, as the
/// pod's creation on that node does, and both reach the same verdict. The mapped pod keeps a
/// `main` that asks for no GPU beside `engine-0`, which asks: a binding that ignored the map
/// would judge `main` and pass. The checkpoint holds two `3g.40gb` slices: `nvidia.com/gpu`
/// gives whole GPUs under `mixed` and slices under `single`, `nvidia.com/mig-3g.40gb` exists
/// only under `mixed`.
#[rstest]
#[case::mapped_gpu_on_mixed(true, "nvidia.com/gpu", "2", MigStrategy::Mixed, true)]
#[case::unmapped_gpu_on_mixed(false, "nvidia.com/gpu", "2", MigStrategy::Mixed, true)]
#[case::mapped_slices_on_mixed(true, "nvidia.com/mig-3g.40gb", "2", MigStrategy::Mixed, false)]
#[case::unmapped_slices_on_mixed(false, "nvidia.com/mig-3g.40gb", "2", MigStrategy::Mixed, false)]
#[case::mapped_gpu_on_single(true, "nvidia.com/gpu", "2", MigStrategy::Single, false)]
#[case::unmapped_gpu_on_single(false, "nvidia.com/gpu", "2", MigStrategy::Single, false)]
#[case::mapped_one_short_on_single(true, "nvidia.com/gpu", "1", MigStrategy::Single, true)]
#[case::unmapped_one_short_on_single(false, "nvidia.com/gpu", "1", MigStrategy::Single, true)]
#[case::mapped_slices_on_single(true, "nvidia.com/mig-3g.40gb", "2", MigStrategy::Single, true)]
#[case::unmapped_slices_on_single(false, "nvidia.com/mig-3g.40gb", "2", MigStrategy::Single, true)]
fn a_peer_restore_is_judged_on_its_mapped_destination_at_creation_and_binding(
    #[case] mapped: bool,
    #[case] resource: &str,
    #[case] quantity: &str,
    #[case] strategy: MigStrategy,
    #[case] refused: bool,
) {
    use miggate_admission::lookup::{Content, GpuAsk, SnapshotLookup, Source};

    let mut annotations = serde_json::Map::new();
    annotations.insert("nvidia.com/restore-from".into(), json!("snap"));
    if mapped {
        annotations.insert("nvidia.com/restore-container-map".into(), json!("main=engine-0"));
    }
    let asking = if mapped { "engine-0" } else { "main" };
    let mut containers =
        vec![json!({"name": asking, "image": "x", "resources": {"limits": {resource: quantity}}})];
    if mapped {
        containers.insert(0, json!({"name": "main", "image": "x"}));
    }

    let mut review: Value =
        serde_json::from_str(&testdata("admission/pod-create-restore-allowed.json")).unwrap();
    let obj = &mut review["request"]["object"];
    obj["metadata"]["name"] = json!("peer-restore");
    obj["metadata"]["annotations"] = Value::Object(annotations.clone());
    obj["spec"]["containers"] = json!(containers);
    obj["spec"]["volumes"] = json!([]);
    obj["spec"]["nodeName"] = json!("gpu-node-7");
    review["request"]["name"] = json!("peer-restore");
    let review: AdmissionReview<DynamicObject> = serde_json::from_value(review).unwrap();
    let creation: AdmissionRequest<DynamicObject> = review.try_into().unwrap();

    let mut node = miggate_crds::read_stored(&testdata("webhook-store/nodes/gpu-node-7.yaml"))
        .unwrap()
        .manifest;
    node.nvidia.as_mut().unwrap().mig_strategy = Some(strategy);
    let two_slices = miggate_compat::from_str(
        "apiVersion: miggate.io/v1alpha1\nkind: GpuManifest\nnvidia:\n  devices:\n  - {uuid: MIG-6d7e2b1c-0f4a-5e8b-9c3d-2a1b0c9d8e7f, parentUuid: GPU-00000000-0000-4000-8000-000000000000, productName: NVIDIA H100 80GB HBM3, migProfile: 3g.40gb}\n  - {uuid: MIG-6d7e2b1c-0f4a-5e8b-9c3d-2a1b0c9d8e70, parentUuid: GPU-00000000-0000-4000-8000-000000000000, productName: NVIDIA H100 80GB HBM3, migProfile: 3g.40gb}\n",
    )
    .unwrap();
    let content = Arc::new(Content {
        name: "snapcontent-1".into(),
        snapshot_ref: Some(miggate_crds::peer::SnapshotRef {
            namespace: Some("ml".into()),
            name: Some("snap".into()),
            uid: Some("snap-uid".into()),
        }),
        checkpoint: Ok(Arc::new(Checkpoint {
            manifest: two_slices,
            container_name: Some("main".into()),
            origin: "PodSnapshotContent snapcontent-1".into(),
        })),
    });
    // What the pod cache keeps of the same pod: its annotations, read as every reader reads
    // them, and the GPU asks of the one container asking.
    let pod = RestorePod {
        annotations: RestoreAnnotations::from_pairs(
            annotations
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str().unwrap().to_string())),
        ),
        gpu_asks: vec![GpuAsk {
            container: asking.into(),
            requests: [(resource.to_string(), miggate_compat::Quantity::new(quantity))].into(),
            claims: Vec::new(),
        }],
        ..RestorePod::default()
    };
    let store = Fake::default()
        .with_inventory("gpu-node-7", inventory(node, Source::GpuNode))
        .with_snapshot(
            "ml/snap",
            SnapshotLookup::Bound {
                content,
                snapshot_uid: Some("snap-uid".into()),
            },
        )
        .with_pod("ml/peer-restore", pod);

    for (path, request) in [
        ("creation", creation),
        ("binding", binding("peer-restore", "gpu-node-7")),
    ] {
        let d = decide(&request, &store);
        assert_eq!(d.verdict == Verdict::Refused, refused, "{path}: {}", text(&d));
        if refused {
            assert_eq!(d.refused_by, ["gpu-request"], "{path}: {}", text(&d));
            let named = format!("{asking}: gpu-request: ");
            assert!(d.response.result.message.contains(&named), "{path}: {}", text(&d));
        }
        assert!(!text(&d).contains("requests are unknown"), "{path}: {}", text(&d));
    }
}
