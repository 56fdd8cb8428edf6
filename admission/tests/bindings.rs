//! `pods/binding` decisions as a table, over an in-memory store: which bindings are checked,
//! what a missing fact does, and that every checked one names its inventory source.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use kube::core::DynamicObject;
use kube::core::admission::AdmissionReview;
use miggate_admission::decide::{Verdict, decide};
use miggate_admission::lookup::{Checkpoint, Inventory, Note, RestoreAnnotations, RestorePod, Source};
use rstest::rstest;
use serde_json::{Value, json};
use support::{Fake, binding, gpu_node_of, manifest, testdata};

mod support;

fn memory() -> Fake {
    let ckpt = miggate_crds::read_stored(&testdata("webhook-store/checkpoints/ml/vllm-ckpt.yaml")).unwrap();
    let inv = |rel: &str, source: Source, notes: Vec<Note>| Inventory {
        manifest: Arc::new(manifest(rel)),
        source,
        notes,
        passed_over: Vec::new(),
        slices_listed: false,
        supply: None,
    };
    let pod = |from: &str, skip: Option<&str>| {
        Arc::new(RestorePod {
            uid: None,
            annotations: RestoreAnnotations {
                restore_from: Some(from.into()),
                skip_checks: skip.map(str::to_string),
                ..RestoreAnnotations::default()
            },
            claims: Vec::new(),
            gpu_asks: Vec::new(),
        })
    };
    Fake {
        checkpoints: [(
            "ml/vllm-ckpt".to_string(),
            Arc::new(Checkpoint {
                manifest: ckpt.manifest,
                container_name: ckpt.container_name,
                origin: "test".into(),
            }),
        )]
        .into(),
        inventories: [
            (
                "fits".to_string(),
                inv("webhook-store/nodes/gpu-node-7.yaml", Source::GpuNode, vec![]),
            ),
            (
                "short".to_string(),
                inv("webhook-store/nodes/a100-node-2.yaml", Source::GpuNode, vec![]),
            ),
            (
                "dra".to_string(),
                inv(
                    "webhook-store/nodes/gpu-node-7.yaml",
                    Source::ResourceSlice,
                    vec![Note::NoKernel(Source::ResourceSlice)],
                ),
            ),
            (
                "fallback".to_string(),
                Inventory {
                    passed_over: vec![gpu_node_of("fallback", "gpu-node-1")],
                    ..inv("webhook-store/nodes/a100-node-2.yaml", Source::GfdLabels, vec![])
                },
            ),
        ]
        .into(),
        unusable: [("other".to_string(), vec![gpu_node_of("other", "gpu-node-1")])].into(),
        pods: [
            ("ml/restore".to_string(), pod("vllm-ckpt", None)),
            ("ml/orphan".to_string(), pod("deleted-ckpt", None)),
            ("ml/waives".to_string(), pod("vllm-ckpt", Some("all"))),
            ("ml/typo".to_string(), pod("vllm-ckpt", Some("gpu-cuont"))),
        ]
        .into(),
        ..Fake::default()
    }
}

/// A Binding places the pod of its `metadata.uid`: the cached pod of that name is judged only
/// when it is that pod. One deleted and made again under the name while the pod watch lags is
/// passed as a pod not seen yet (allowed untouched), never judged as the old one.
#[rstest]
#[case::the_cached_pod(Some("u-1"), Some("u-1"), Verdict::Refused)]
#[case::recreated_under_its_name(Some("u-1"), Some("u-2"), Verdict::Ignored)]
#[case::a_binding_without_uid(Some("u-1"), None, Verdict::Refused)]
#[case::a_binding_with_an_empty_uid(Some("u-1"), Some(""), Verdict::Refused)]
#[case::a_cached_pod_without_uid(None, Some("u-2"), Verdict::Ignored)]
fn a_binding_judges_the_pod_of_its_uid(
    #[case] cached: Option<&str>,
    #[case] bound: Option<&str>,
    #[case] verdict: Verdict,
) {
    let mut store = memory();
    let pod = store.pods.get("ml/restore").unwrap().as_ref().clone();
    store.pods.insert(
        "ml/restore".into(),
        Arc::new(RestorePod {
            uid: cached.map(str::to_string),
            ..pod
        }),
    );
    let mut req = binding("restore", "short");
    req.object.as_mut().unwrap().metadata.uid = bound.map(str::to_string);
    let d = decide(&req, &store);
    assert_eq!(d.verdict, verdict, "{}", d.response.result.message);
    assert!(d.response.allowed == (verdict != Verdict::Refused));
}

#[rstest]
#[case::not_a_restore_pod("web-0", "short", Verdict::Ignored, None, "")]
#[case::fits("restore", "fits", Verdict::Allowed, Some("GpuNode"), "")]
#[case::short_node(
    "restore",
    "short",
    Verdict::Refused,
    Some("GpuNode"),
    "cannot be restored on node short (inventory from GpuNode): kernel-version"
)]
#[case::no_inventory(
    "restore",
    "nowhere",
    Verdict::Warned,
    None,
    "node nowhere has no GPU inventory"
)]
#[case::lesser_source(
    "restore",
    "dra",
    Verdict::Warned,
    Some("ResourceSlice"),
    "node dra inventory from ResourceSlice (no GpuNode)"
)]
#[case::only_an_unreadable_gpu_node(
    "restore",
    "other",
    Verdict::Warned,
    None,
    "node other: GpuNode inventory of node `other` cannot be read: GpuNode other holds the inventory of node gpu-node-1"
)]
#[case::fell_back_and_refused(
    "restore",
    "fallback",
    Verdict::Refused,
    Some("GFD labels"),
    "(inventory from GFD labels, passed over: GpuNode inventory of node `fallback` cannot be read: GpuNode fallback holds the inventory of node gpu-node-1 (spec.manifest.host.nodeName)): "
)]
#[case::checkpoint_gone(
    "orphan",
    "fits",
    Verdict::Refused,
    None,
    "checkpoint ml/deleted-ckpt named by annotation miggate.io/restore-from does not exist"
)]
#[case::waived(
    "waives",
    "short",
    Verdict::Warned,
    Some("GpuNode"),
    "waived by miggate.io/skip-checks: cpu-arch, kernel-version"
)]
#[case::skip_typo(
    "typo",
    "fits",
    Verdict::Refused,
    None,
    "waives nothing: unknown check `gpu-cuont`"
)]
fn bindings(
    #[case] pod: &str,
    #[case] node: &str,
    #[case] verdict: Verdict,
    #[case] source: Option<&str>,
    #[case] says: &str,
) {
    let d = decide(&binding(pod, node), &memory());
    let text = format!("{} {:?}", d.response.result.message, d.response.warnings);
    assert_eq!(d.verdict, verdict, "{text}");
    assert_eq!(d.inventory_source.map(Source::as_str), source, "{text}");
    assert_eq!(
        d.response
            .audit_annotations
            .get("inventory-source")
            .map(String::as_str),
        source
    );
    assert!(text.contains(says), "{says:?} not in {text}");
    assert_eq!(d.response.allowed, verdict != Verdict::Refused);
    assert_eq!(d.response.uid, "0b7a1c3e-0013-4c1e-9d2a-000000000013");
}

#[test]
fn before_sync_a_binding_passes_with_a_warning_and_a_restore_pod_is_refused() {
    let store = Fake {
        listing: true,
        ..memory()
    };
    let d = decide(&binding("restore", "short"), &store);
    assert_eq!(d.verdict, Verdict::Warned);
    let review: Value =
        serde_json::from_str(&testdata("admission/pod-create-restore-node-allowed.json")).unwrap();
    let review: AdmissionReview<DynamicObject> = serde_json::from_value(review).unwrap();
    let d = decide(&review.try_into().unwrap(), &store);
    assert_eq!(d.verdict, Verdict::Refused);
    assert_eq!(d.refused_by, ["store-not-synced"]);
}

#[test]
fn a_pod_naming_a_node_reads_the_same_inventory_source() {
    let review: Value =
        serde_json::from_str(&testdata("admission/pod-create-restore-node-allowed.json")).unwrap();
    let mut review = review;
    review["request"]["object"]["spec"]["nodeName"] = json!("dra");
    let review: AdmissionReview<DynamicObject> = serde_json::from_value(review).unwrap();
    let d = decide(&review.try_into().unwrap(), &memory());
    assert_eq!(d.inventory_source, Some(Source::ResourceSlice));
    let warnings = d.response.warnings.unwrap_or_default().join("\n");
    assert!(
        warnings.contains(
            "node dra: ResourceSlice: no Node.status.nodeInfo kernelVersion; kernel checks are unknown"
        ),
        "{warnings}"
    );
}

#[test]
fn a_node_whose_only_source_is_unreadable_is_named_with_why_not_as_missing() {
    let mut review: Value =
        serde_json::from_str(&testdata("admission/pod-create-restore-node-allowed.json")).unwrap();
    review["request"]["object"]["spec"]["nodeName"] = json!("other");
    let review: AdmissionReview<DynamicObject> = serde_json::from_value(review).unwrap();
    let d = decide(&review.try_into().unwrap(), &memory());
    assert_eq!(d.verdict, Verdict::Refused);
    assert_eq!(d.refused_by, ["node-not-found"]);
    let message = &d.response.result.message;
    assert!(
        message.contains(
            "which has no usable GPU inventory: GpuNode inventory of node `other` cannot be read: GpuNode other holds the inventory of node gpu-node-1 (spec.manifest.host.nodeName); cannot check"
        ),
        "{message}"
    );
    assert!(!message.contains("no GpuNode"), "{message}");
    let warnings = d.response.warnings.unwrap_or_default();
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("miggate: node other: GpuNode inventory of node `other` cannot be read")),
        "{warnings:?}"
    );

    let d = decide(&binding("restore", "other"), &memory());
    let warnings = d.response.warnings.unwrap_or_default();
    assert!(warnings[0].contains("no usable GPU inventory"), "{warnings:?}");
    assert!(!warnings[0].contains("no GpuNode"), "{warnings:?}");
}

#[test]
fn a_binding_through_the_legacy_bindings_resource_is_checked_too() {
    // POST /api/v1/namespaces/ml/bindings: resource `bindings`, no subresource.
    let mut review: Value = serde_json::from_str(&testdata("admission/binding-create.json")).unwrap();
    review["request"]["resource"]["resource"] = json!("bindings");
    review["request"]["requestResource"]["resource"] = json!("bindings");
    review["request"]["subResource"] = Value::Null;
    review["request"]["requestSubResource"] = Value::Null;
    review["request"]["name"] = json!("restore");
    review["request"]["object"]["metadata"]["name"] = json!("restore");
    review["request"]["object"]["target"]["name"] = json!("short");
    let review: AdmissionReview<DynamicObject> = serde_json::from_value(review).unwrap();
    let d = decide(&review.try_into().unwrap(), &memory());
    assert_eq!(d.verdict, Verdict::Refused, "{:?}", d.response.result.message);
    assert_eq!(d.inventory_source, Some(Source::GpuNode));
}

/// The node's MIG strategy reaches the binding: `gpu-request` is judged there on the restore
/// container's cached requests, which the pod's creation judged without a node. A checkpoint
/// of one `3g.40gb` slice asking `nvidia.com/gpu: 1` is refused on a node whose strategy is
/// mixed (whole GPUs only); asking `nvidia.com/mig-3g.40gb: 1` is not; with no strategy known,
/// nothing new is said.
#[rstest]
#[case::gpu_on_mixed("asks-gpu", Some(miggate_compat::MigStrategy::Mixed), true)]
#[case::gpu_on_none("asks-gpu", Some(miggate_compat::MigStrategy::None), true)]
#[case::gpu_strategy_unknown("asks-gpu", None, false)]
#[case::slice_on_mixed("asks-slice", Some(miggate_compat::MigStrategy::Mixed), false)]
#[case::waived("asks-gpu-waived", Some(miggate_compat::MigStrategy::Mixed), false)]
#[case::several_without_a_name("two-ask", Some(miggate_compat::MigStrategy::Mixed), false)]
fn the_node_s_mig_strategy_judges_the_requests_at_binding(
    #[case] pod: &str,
    #[case] strategy: Option<miggate_compat::MigStrategy>,
    #[case] refused: bool,
) {
    use miggate_admission::lookup::GpuAsk;
    let checkpoint = miggate_compat::from_str(
        "apiVersion: miggate.io/v1alpha1\nkind: GpuManifest\nnvidia:\n  devices:\n  - {uuid: MIG-6d7e2b1c-0f4a-5e8b-9c3d-2a1b0c9d8e7f, parentUuid: GPU-00000000-0000-4000-8000-000000000000, productName: NVIDIA H100 80GB HBM3, migProfile: 3g.40gb}\n",
    )
    .unwrap();
    let mut node = manifest("webhook-store/nodes/gpu-node-7.yaml");
    node.nvidia.as_mut().unwrap().mig_strategy = strategy;
    let ask = |container: &str, resource: &str| GpuAsk {
        container: container.into(),
        requests: [(resource.to_string(), miggate_compat::Quantity::new("1"))].into(),
        claims: Vec::new(),
    };
    let restore = |asks: Vec<GpuAsk>, skip: Option<&str>| {
        Arc::new(RestorePod {
            uid: None,
            annotations: RestoreAnnotations {
                restore_from: Some("one-slice".into()),
                skip_checks: skip.map(str::to_string),
                ..RestoreAnnotations::default()
            },
            gpu_asks: asks,
            ..RestorePod::default()
        })
    };
    let store = Fake {
        checkpoints: [(
            "ml/one-slice".to_string(),
            Arc::new(Checkpoint {
                manifest: checkpoint,
                container_name: None,
                origin: "test".into(),
            }),
        )]
        .into(),
        inventories: [(
            "gpu-node-7".to_string(),
            Inventory {
                manifest: Arc::new(node),
                source: Source::GpuNode,
                notes: Vec::new(),
                passed_over: Vec::new(),
                slices_listed: false,
                supply: None,
            },
        )]
        .into(),
        pods: [
            (
                "ml/asks-gpu".to_string(),
                restore(vec![ask("vllm", "nvidia.com/gpu")], None),
            ),
            (
                "ml/asks-slice".to_string(),
                restore(vec![ask("vllm", "nvidia.com/mig-3g.40gb")], None),
            ),
            (
                "ml/asks-gpu-waived".to_string(),
                restore(vec![ask("vllm", "nvidia.com/gpu")], Some("gpu-request")),
            ),
            (
                "ml/two-ask".to_string(),
                restore(vec![ask("a", "nvidia.com/gpu"), ask("b", "nvidia.com/gpu")], None),
            ),
        ]
        .into(),
        ..Fake::default()
    };
    let d = decide(&binding(pod, "gpu-node-7"), &store);
    let message = &d.response.result.message;
    assert_eq!(
        d.verdict == Verdict::Refused,
        refused,
        "{message} {:?}",
        d.response.warnings
    );
    if refused {
        assert!(
            message.ends_with(
                "cannot be restored on node gpu-node-7 (inventory from GpuNode): gpu-request: source nvidia.com/mig-3g.40gb x1, target nvidia.com/gpu x1"
            ),
            "{message}"
        );
    }
}

/// What the API server's audit log keeps of each binding's decision: the verdict, what refused,
/// what could not run, the waiver, the checkpoint and the node, one line per annotation.
#[test]
fn every_decision_on_a_restore_is_in_the_audit_annotations() {
    let store = memory();
    let mut table = String::new();
    for (pod, node) in [
        ("web-0", "short"),
        ("restore", "fits"),
        ("restore", "short"),
        ("restore", "nowhere"),
        ("restore", "dra"),
        ("orphan", "fits"),
        ("waives", "short"),
        ("typo", "fits"),
    ] {
        let d = decide(&binding(pod, node), &store);
        let mut lines: Vec<String> = d
            .response
            .audit_annotations
            .iter()
            .map(|(k, v)| format!("  {k}={v}"))
            .collect();
        lines.sort();
        table.push_str(&format!("{pod} -> {node}:\n{}\n", lines.join("\n")));
    }
    insta::assert_snapshot!(table);
}

/// A node's name reaches the audit log escaped and cut, whatever the binder sent.
#[test]
fn audit_values_are_escaped_and_bounded() {
    let node = format!("evil\u{1b}[31m\n{}", "n".repeat(4000));
    let d = decide(&binding("restore", &node), &memory());
    let value = &d.response.audit_annotations["node"];
    assert!(!value.contains('\u{1b}') && !value.contains('\n'), "{value:?}");
    // The bound, plus the "… [N more bytes cut]" that says so.
    assert!(
        value.len() <= miggate_admission::decide::audit::MAX_AUDIT_VALUE_BYTES + 32,
        "{}",
        value.len()
    );
    assert_eq!(d.response.audit_annotations["verdict"], "warned");
    assert_eq!(d.response.audit_annotations["not-run"], "all: no-inventory");
}
