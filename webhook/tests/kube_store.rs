//! The Kubernetes store against an in-process API server speaking the real list and watch
//! protocol (kube-fake): the first list, watch events that change decisions, readiness only
//! after every cache has synced, a dropped watch resumed, a `410 Gone` forcing a re-list, and
//! `pods/binding` decisions read from the pod cache. Outages and staleness are in
//! `kube_store_outages.rs`; tenants' hostile and bloated objects in `kube_store_tenants.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use k8s_openapi::api::core::v1::Node;
use kube_fake::{FakeApiServer, Recorded, StreamingLists};
use miggate_admission::lookup::Lookup;
use miggate_store::kube_store::KubeOptions;
use rstest::rstest;
use serde_json::{Value, json};
use support::kube::{
    Harness, binding_review, fake_with_checkpoint, fits, gpu_node, harness, node, peer_snapshot, pod,
    pod_review, readyz, short, tokio_wait,
};
use support::testdata;

mod support;

/// What `/readyz` says of the `i`th cache's last list.
async fn list_mode(h: &Harness, i: usize) -> Value {
    readyz(h).await.1["store"]["kube"][i]["list"].clone()
}

#[rstest]
#[case::streamed(StreamingLists::Served, "streamed")]
#[case::refused_by_the_feature_gate(StreamingLists::Invalid, "listed")]
#[case::refused_by_the_storage(StreamingLists::StorageUnsupported, "listed")]
#[tokio::test]
async fn lists_then_watches_and_a_node_event_flips_the_decision(
    #[case] streaming: StreamingLists,
    #[case] mode: &str,
) {
    let fake = fake_with_checkpoint().await;
    fake.streaming_lists(streaming);
    fake.apply(gpu_node("n1", fits()));
    let h = harness(fake, KubeOptions::default()).await;
    h.synced().await;

    // Each kind's list is streamed where the server streams (a watch asking for every object
    // first, with bookmarks), else listed in one request from the server's watch cache;
    // either way followed by a watch of the changes, and the cache current. Slices of the
    // NVIDIA driver only.
    let requests = h.fake.requests();
    for (plural, path) in [
        ("gpucheckpoints", "/apis/miggate.io/v1alpha1/gpucheckpoints"),
        ("gpunodes", "/apis/miggate.io/v1alpha1/gpunodes"),
        ("pods", "/api/v1/pods"),
        ("nodes", "/api/v1/nodes"),
        ("resourceslices", "/apis/resource.k8s.io/v1/resourceslices"),
    ] {
        assert_listed_then_watched(&h, &requests, plural, path, mode).await;
    }
    for i in 0..8 {
        assert_eq!(list_mode(&h, i).await, json!(mode));
    }
    assert_list_metrics(&h, mode).await;
    let slices = requests
        .iter()
        .find(|r| r.path.ends_with("/resourceslices"))
        .unwrap();
    assert_eq!(
        slices.query.get("fieldSelector").map(String::as_str),
        Some("spec.driver=gpu.nvidia.com")
    );
    assert!(requests.iter().all(|r| r.method == "GET"), "the store only reads");

    node_events_flip_the_decision(&h).await;
}

/// `plural` (at `path`) was asked to stream once, refused or not; where refused (`mode` is
/// `listed`), listed whole from the server's watch cache, then watched from that list's version.
async fn assert_listed_then_watched(
    h: &Harness,
    requests: &[Recorded],
    plural: &str,
    path: &str,
    mode: &str,
) {
    let streamed = requests
        .iter()
        .filter(|r| r.path == path && r.is_streaming_list())
        .count();
    let listed: Vec<_> = requests
        .iter()
        .filter(|r| r.path == path && r.is_list(plural) && !r.is_streaming_list())
        .collect();
    assert_eq!(
        streamed, 1,
        "{plural}: one streaming list, refused or not: {requests:#?}"
    );
    assert_eq!(
        listed.len(),
        usize::from(mode == "listed"),
        "{plural}: {requests:#?}"
    );
    for list in listed {
        // Whole, from the server's watch cache: not paged through storage.
        assert_eq!(
            list.query.get("resourceVersion").map(String::as_str),
            Some("0"),
            "{list:?}"
        );
        assert!(!list.query.contains_key("limit"), "{list:?}");
    }
    if mode == "listed" {
        // After a refusal, one list then a watch from its version.
        let watch = tokio_wait(|| {
            h.fake
                .requests()
                .into_iter()
                .find(|r| r.path == path && r.is_watch())
        })
        .await;
        assert_eq!(
            watch.query.get("allowWatchBookmarks").map(String::as_str),
            Some("true")
        );
        assert!(watch.query.contains_key("resourceVersion"), "{watch:?}");
    }
}

/// The Pod cache's list fallbacks and streamed gauge, as `mode` says it was listed.
async fn assert_list_metrics(h: &Harness, mode: &str) {
    let (_, metrics) = h.get("/metrics").await;
    let fallbacks = if mode == "listed" { 1 } else { 0 };
    assert!(
        metrics.contains(&format!(
            "miggate_watch_list_fallbacks_total{{kind=\"Pod\"}} {fallbacks}"
        )) || fallbacks == 0 && !metrics.contains("miggate_watch_list_fallbacks_total{kind=\"Pod\"}"),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!(
            "miggate_watch_list_streamed{{kind=\"Pod\"}} {}",
            usize::from(mode == "streamed")
        )),
        "{metrics}"
    );
}

/// n1 fits, is re-cut short (a MODIFIED event) and is deleted: each event flips the decision on
/// the same pod, decided from the caches without a GET.
async fn node_events_flip_the_decision(h: &Harness) {
    let review = pod_review("n1");
    let allowed = h.post(review.clone()).await;
    assert_eq!(allowed["allowed"], json!(true), "{allowed}");
    assert_eq!(allowed["auditAnnotations"]["inventory-source"], json!("GpuNode"));

    // The node is re-cut: a MODIFIED event, and the same pod is now refused.
    h.fake.clear_requests();
    h.fake.apply(gpu_node("n1", short()));
    let refused = h.until_allowed(&review, false).await;
    let message = refused["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("on node n1 (inventory from GpuNode)"),
        "{message}"
    );
    assert!(message.contains("mig-profile"), "{message}");
    // No GET was sent to answer it: admission reads the caches only.
    assert!(
        h.fake.requests().iter().all(|r| r.is_watch()),
        "{:#?}",
        h.fake.requests()
    );

    // Deleted: a pod naming the node is refused for want of an inventory.
    h.fake.delete("gpunodes", None, "n1");
    let gone = h.until_allowed(&review, false).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut gone = gone;
    while !gone["status"]["message"]
        .as_str()
        .unwrap()
        .contains("no GPU inventory")
    {
        assert!(Instant::now() < deadline, "{gone}");
        tokio::time::sleep(Duration::from_millis(20)).await;
        gone = h.post(review.clone()).await;
    }
}

#[tokio::test]
async fn ready_only_once_every_cache_has_synced() {
    let fake = fake_with_checkpoint().await;
    fake.apply(gpu_node("n1", fits()));
    // The first two lists of ResourceSlices fail: that cache syncs only after two backoffs.
    fake.fail_next("resourceslices", 500);
    fake.fail_next("resourceslices", 500);
    let h = harness(fake, KubeOptions::default()).await;

    let (status, body) = h.get("/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    // While a cache is missing, a restore pod is refused rather than judged on half the facts.
    let early = h.post(pod_review("n1")).await;
    if !h.store.synced() {
        assert_eq!(early["allowed"], json!(false), "{early}");
        assert!(
            early["status"]["message"]
                .as_str()
                .unwrap()
                .contains("not finished their first list"),
            "{early}"
        );
    }
    // The other caches sync at once; ResourceSlice waits for its retries.
    tokio_wait(|| h.store.status()[..4].iter().all(|c| c.synced).then_some(())).await;
    let (status, body) = h.get("/readyz").await;
    if !h.store.synced() {
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        let ready: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(ready["store"]["kube"][4]["kind"], json!("ResourceSlice"));
        assert_eq!(ready["store"]["kube"][4]["synced"], json!(false));
    }
    h.synced().await;
    let (status, body) = h.get("/readyz").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let ready: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(ready["store"]["kube"][4]["errors"], json!(2), "{body}");
    assert_eq!(ready["store"]["kube"][0]["objects"], json!(1), "{body}");
    assert_eq!(h.post(pod_review("n1")).await["allowed"], json!(true));

    let (_, metrics) = h.get("/metrics").await;
    for line in [
        "miggate_watch_errors_total{kind=\"ResourceSlice\"} 2",
        "miggate_cache_synced{kind=\"ResourceSlice\"} 1",
        "miggate_store_objects{kind=\"GpuNode\"} 1",
        "miggate_cache_age_seconds{kind=\"GpuCheckpoint\"}",
    ] {
        assert!(metrics.contains(line), "{line} missing from\n{metrics}");
    }
    // Three list attempts in all: two refused, one served.
    assert_eq!(h.count("resourceslices", false), 3);
}

#[tokio::test]
async fn a_dropped_watch_resumes_from_its_version_without_a_relist() {
    let fake = fake_with_checkpoint().await;
    fake.apply(gpu_node("n1", fits()));
    let h = harness(fake, KubeOptions::default()).await;
    h.synced().await;
    tokio_wait(|| (h.count("gpunodes", true) == 1).then_some(())).await;
    let first_rv = h.fake.resource_version();

    h.fake.drop_watches("gpunodes");
    // A new watch is opened from the version the cache had reached (the first was the
    // streaming list's).
    let resumed = tokio_wait(|| {
        h.fake
            .requests()
            .into_iter()
            .find(|r| r.path.ends_with("/gpunodes") && r.is_watch())
    })
    .await;
    assert_eq!(resumed.query["resourceVersion"], first_rv.to_string());
    h.fake.apply(gpu_node("n1", short()));
    h.until_allowed(&pod_review("n1"), false).await;
    assert_eq!(h.count("gpunodes", false), 1, "resumed, not re-listed");
    let (_, metrics) = h.get("/metrics").await;
    assert!(
        !metrics.contains("miggate_watch_restarts_total{kind=\"GpuNode\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn gone_forces_a_relist_that_replaces_the_cache() {
    let fake = fake_with_checkpoint().await;
    fake.apply(gpu_node("n1", fits()));
    fake.apply(gpu_node("n2", fits()));
    let h = harness(fake, KubeOptions::default()).await;
    h.synced().await;
    tokio_wait(|| (h.count("gpunodes", true) == 1).then_some(())).await;
    assert_eq!(h.post(pod_review("n2")).await["allowed"], json!(true));

    // While the watch is open the history is compacted: the watch gets ERROR 410 and ends.
    // Changes made meanwhile reach the cache only through the re-list.
    h.fake.expire("gpunodes");
    h.fake.delete("gpunodes", None, "n2");
    h.fake.apply(gpu_node("n1", short()));
    h.until_allowed(&pod_review("n1"), false).await;
    let n2 = h.post(pod_review("n2")).await;
    assert!(
        n2["status"]["message"]
            .as_str()
            .unwrap()
            .contains("no GPU inventory"),
        "{n2}"
    );
    assert_eq!(h.count("gpunodes", false), 2, "listed again after the 410");
    let (_, metrics) = h.get("/metrics").await;
    for line in [
        "miggate_watch_restarts_total{kind=\"GpuNode\"} 1",
        "miggate_watch_errors_total{kind=\"GpuNode\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} missing from\n{metrics}");
    }
    let status = &h.store.status()[1];
    assert_eq!((&*status.kind, status.lists, status.objects), ("GpuNode", 2, 1));
}

#[tokio::test]
async fn bindings_are_checked_only_for_restore_pods() {
    let fake = fake_with_checkpoint().await;
    fake.apply(gpu_node("fits", fits()));
    fake.apply(gpu_node("short", short()));
    fake.apply(node("bare"));
    fake.apply(pod("ml", "vllm-restore-0", Some("vllm-ckpt")));
    fake.apply(pod("ml", "web-0", None));
    fake.apply(pod("ml", "web-1", None));
    let h = harness(fake, KubeOptions::default()).await;
    h.synced().await;
    // Only the restore pod is kept.
    assert_eq!(h.store.status()[2].objects, 1);

    let refused = h.post(binding_review("vllm-restore-0", "short")).await;
    assert_eq!(refused["allowed"], json!(false), "{refused}");
    assert_eq!(refused["auditAnnotations"]["inventory-source"], json!("GpuNode"));
    insta::assert_yaml_snapshot!("binding_to_a_short_node", refused);

    let allowed = h.post(binding_review("vllm-restore-0", "fits")).await;
    assert_eq!(allowed["allowed"], json!(true), "{allowed}");
    assert_eq!(allowed["auditAnnotations"]["inventory-source"], json!("GpuNode"));

    let bare = h.post(binding_review("vllm-restore-0", "bare")).await;
    assert_eq!(bare["allowed"], json!(true), "{bare}");
    insta::assert_yaml_snapshot!("binding_to_a_node_without_inventory", bare);

    let plain = h.post(binding_review("web-0", "short")).await;
    assert_eq!(plain["allowed"], json!(true), "{plain}");
    assert!(plain.get("warnings").is_none_or(Value::is_null), "{plain}");
    assert!(
        plain
            .get("auditAnnotations")
            .is_none_or(|a| a.as_object().is_none_or(|o| o.is_empty())),
        "{plain}"
    );

    // The annotation removed: the pod is dropped from the cache and its binding passes.
    h.fake.apply(pod("ml", "vllm-restore-0", None));
    h.until_allowed(&binding_review("vllm-restore-0", "short"), true)
        .await;
    assert!(h.store.restore_pod("ml", "vllm-restore-0").is_none());
}

#[tokio::test]
async fn a_restore_pod_selector_is_sent_to_the_server() {
    let fake = fake_with_checkpoint().await;
    let mut labelled = pod("ml", "a", Some("vllm-ckpt"));
    labelled.metadata.labels = Some([("miggate.io/restore".to_string(), "true".to_string())].into());
    fake.apply(labelled);
    fake.apply(pod("ml", "b", Some("vllm-ckpt")));
    let h = harness(
        fake,
        KubeOptions {
            restore_pod_selector: Some("miggate.io/restore=true".parse().unwrap()),
            ..KubeOptions::default()
        },
    )
    .await;
    h.synced().await;
    let list = h
        .fake
        .requests()
        .into_iter()
        .find(|r| r.path == "/api/v1/pods")
        .unwrap();
    assert_eq!(list.query["labelSelector"], "miggate.io/restore=true");
    assert!(h.store.restore_pod("ml", "a").is_some());
    assert!(
        h.store.restore_pod("ml", "b").is_none(),
        "not selected by the server"
    );
}

#[tokio::test]
async fn a_watch_resumed_from_a_compacted_version_relists() {
    let fake = fake_with_checkpoint().await;
    fake.apply(gpu_node("n1", fits()));
    let h = harness(fake, KubeOptions::default()).await;
    h.synced().await;
    tokio_wait(|| (h.count("gpunodes", true) == 1).then_some(())).await;

    // The connection drops, the node changes and the history is compacted before the cache
    // can resume: its resumed watch is answered with an ERROR 410 event, and it re-lists.
    h.fake.drop_watches("gpunodes");
    h.fake.apply(gpu_node("n1", short()));
    h.fake.expire("gpunodes");
    h.until_allowed(&pod_review("n1"), false).await;
    tokio_wait(|| (h.count("gpunodes", false) == 2).then_some(())).await;
    assert_eq!(h.store.status()[1].lists, 2);
}

#[tokio::test]
async fn an_inventory_is_read_once_per_version_of_its_objects() {
    let fake = fake_with_checkpoint().await;
    fake.apply(gpu_node("n1", fits()));
    let h = harness(fake, KubeOptions::default()).await;
    h.synced().await;

    let first = h.store.inventory("n1").unwrap();
    let again = h.store.inventory("n1").unwrap();
    assert!(
        Arc::ptr_eq(&first.manifest, &again.manifest),
        "an unchanged node is not read again"
    );
    assert_eq!(first.manifest.nvidia, fits().nvidia);

    // A new version of the GpuNode is read on the next lookup.
    h.fake.apply(gpu_node("n1", short()));
    let changed = tokio_wait(|| {
        h.store
            .inventory("n1")
            .ok()
            .filter(|i| !Arc::ptr_eq(&i.manifest, &first.manifest))
    })
    .await;
    assert_eq!(changed.manifest.nvidia, short().nvidia);

    // A node no object names has no inventory, and asking leaves nothing behind.
    assert!(
        h.store
            .inventory("no-such-node")
            .unwrap_err()
            .passed_over
            .is_empty()
    );
}

#[tokio::test]
async fn a_refused_gpu_node_is_named_with_why_in_every_decision() {
    // n1's GpuNode holds another node's inventory (a copied object): the reader refuses it,
    // and nothing else describes n1. The operator must hear that, not "no GpuNode".
    let fake = fake_with_checkpoint().await;
    let mut copied = gpu_node("n1", fits());
    copied.spec.manifest.host.as_mut().unwrap().node_name = Some("n2".into());
    fake.apply(copied);
    fake.apply(pod("ml", "vllm-restore-0", Some("vllm-ckpt")));
    let h = harness(fake, KubeOptions::default()).await;
    h.synced().await;
    let why = "GpuNode inventory of node `n1` cannot be read: GpuNode n1 holds the inventory of node n2 (spec.manifest.host.nodeName)";

    let refused = h.post(pod_review("n1")).await;
    assert_eq!(refused["allowed"], json!(false), "{refused}");
    let message = refused["status"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("which has no usable GPU inventory: {why}")),
        "{message}"
    );
    assert!(!message.contains("no GpuNode"), "{message}");

    let binding = h.post(binding_review("vllm-restore-0", "n1")).await;
    assert_eq!(binding["allowed"], json!(true), "{binding}");
    let warnings = binding["warnings"].to_string();
    assert!(warnings.contains("no usable GPU inventory"), "{warnings}");
    assert!(warnings.contains(why), "{warnings}");
    assert!(!warnings.contains("no GpuNode"), "{warnings}");

    // GFD labels appear on the node: the decision uses them and still says why the GpuNode
    // was passed over, in the refusal message itself.
    // (gpu-node-7's recorded GFD labels, with A100s where the checkpoint ran on H100s)
    let mut labelled: Node =
        serde_saphyr::from_str(&testdata("inventory/gfd-mixed-gpu-node-7.yaml")).unwrap();
    labelled.metadata.name = Some("n1".into());
    let labels = labelled.metadata.labels.as_mut().unwrap();
    labels.insert("nvidia.com/gpu.product".into(), "NVIDIA-A100-SXM4-80GB".into());
    labels.insert(
        "nvidia.com/mig-3g.40gb.product".into(),
        "NVIDIA-A100-SXM4-80GB-MIG-3g.40gb".into(),
    );
    h.fake.apply(labelled);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = h.post(pod_review("n1")).await;
        if r["auditAnnotations"]["inventory-source"] == json!("GFD labels") {
            assert_eq!(r["allowed"], json!(false), "{r}");
            let message = r["status"]["message"].as_str().unwrap();
            assert!(
                message.contains(&format!("(inventory from GFD labels, passed over: {why})")),
                "{message}"
            );
            let warnings = r["warnings"].to_string();
            assert!(
                warnings.contains("inventory from GFD labels (a better source cannot be read)"),
                "{warnings}"
            );
            assert!(!warnings.contains("no GpuNode"), "{warnings}");
            break;
        }
        assert!(Instant::now() < deadline, "{r}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A `PodSnapshotContent` whose back-pointer is `back` (namespace, name, uid), recording node n1.
fn peer_content(name: &str, back: Option<(&str, &str, Option<&str>)>) -> Value {
    let mut spec =
        json!({"source": {"nodeName": "n1", "podRef": {"name": "vllm-0", "containers": ["vllm"]}}});
    if let Some((namespace, snapshot, uid)) = back {
        spec["snapshotRef"] = json!({"namespace": namespace, "name": snapshot});
        if let Some(uid) = uid {
            spec["snapshotRef"]["uid"] = json!(uid);
        }
    }
    json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "PodSnapshotContent", "metadata": {"name": name},
        "spec": spec, "status": {"source": {"node": {"name": "n1", "architecture": "amd64"}}}})
}

/// A recorded pod CREATE in `ml`, restoring PodSnapshot `snapshot` on n1.
fn peer_pod_review(snapshot: &str) -> String {
    let mut review: Value = serde_json::from_str(&pod_review("n1")).unwrap();
    review["request"]["object"]["metadata"]["annotations"] = json!({"nvidia.com/restore-from": snapshot});
    review.to_string()
}

#[tokio::test]
async fn a_snapshot_bound_to_another_namespace_s_content_is_refused_naming_both() {
    let fake = FakeApiServer::start().await.unwrap();
    fake.apply(gpu_node("n1", fits()));
    // team-b's snapshot and its content, recorded with its UID as the peer records it.
    fake.apply(peer_snapshot("team-b", "train", "team-b-content"));
    let team_b_uid = fake.get("podsnapshots", Some("team-b"), "train").unwrap()["metadata"]["uid"].clone();
    fake.apply(peer_content(
        "team-b-content",
        Some(("team-b", "train", team_b_uid.as_str())),
    ));
    // A tenant of ml binds its own snapshot to team-b's content.
    fake.apply(peer_snapshot("ml", "borrowed", "team-b-content"));
    // ml's own snapshot and content, pointing back with its UID.
    fake.apply(peer_snapshot("ml", "own", "own-content"));
    let own_uid = fake.get("podsnapshots", Some("ml"), "own").unwrap()["metadata"]["uid"].clone();
    fake.apply(peer_content("own-content", Some(("ml", "own", own_uid.as_str()))));
    // A snapshot made again under the name of one whose content records the old UID.
    fake.apply(peer_snapshot("ml", "recreated", "old-content"));
    fake.apply(peer_content(
        "old-content",
        Some(("ml", "recreated", Some("uid-of-the-deleted-one"))),
    ));
    // A content that points back to nothing.
    fake.apply(peer_snapshot("ml", "orphaned", "no-ref-content"));
    fake.apply(peer_content("no-ref-content", None));
    for name in ["borrowed", "recreated", "orphaned"] {
        fake.apply(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("restore-{name}"), "namespace": "ml", "uid": format!("pod-uid-{name}"),
                "annotations": {"nvidia.com/restore-from": name}},
            "spec": {"containers": [{"name": "vllm", "image": "x"}]}}));
    }
    let h = harness(fake, KubeOptions::default()).await;
    h.synced().await;

    let own = h.post(peer_pod_review("own")).await;
    assert_eq!(own["allowed"], json!(true), "{own}");
    let mut messages = Vec::new();
    for name in ["borrowed", "recreated", "orphaned"] {
        let r = h.post(peer_pod_review(name)).await;
        assert_eq!(r["allowed"], json!(false), "{name}: {r}");
        messages.push(r["status"]["message"].as_str().unwrap().to_string());
    }
    assert!(
        !messages.iter().any(|m| m.contains("3g.40gb")),
        "no value of team-b's checkpoint is shown: {messages:?}"
    );
    let bound = h.post(binding_review("restore-borrowed", "n1")).await;
    assert_eq!(bound["allowed"], json!(false), "{bound}");
    messages.push(bound["status"]["message"].as_str().unwrap().to_string());
    insta::assert_snapshot!(
        "snapshot_bound_to_another_snapshot_s_content",
        messages.join("\n")
    );

    let (_, metrics) = h.get("/metrics").await;
    assert!(
        metrics.contains(r#"miggate_admission_refusals_total{check="snapshot-content-mismatch"} 4"#),
        "{metrics}"
    );
}

/// A pod deleted and made again under its name, its watch event not yet here: the scheduler's
/// Binding names the new pod's UID, and the cached pod (the old one) is not judged for it.
#[tokio::test]
async fn a_binding_of_a_pod_recreated_under_its_name_is_not_judged_as_the_old_one() {
    let fake = fake_with_checkpoint().await;
    fake.apply(gpu_node("short", short()));
    fake.apply(pod("ml", "vllm-restore-0", Some("vllm-ckpt")));
    let h = harness(fake, KubeOptions::default()).await;
    h.synced().await;
    let cached = h.store.restore_pod("ml", "vllm-restore-0").unwrap();
    let old_uid = cached.uid.clone().unwrap();
    let review = |uid: &str| {
        let mut review: Value = serde_json::from_str(&binding_review("vllm-restore-0", "short")).unwrap();
        review["request"]["object"]["metadata"]["uid"] = json!(uid);
        review.to_string()
    };
    let old = h.post(review(&old_uid)).await;
    assert_eq!(old["allowed"], json!(false), "the cached pod is judged: {old}");
    let new = h.post(review("uid-of-the-new-pod")).await;
    assert_eq!(new["allowed"], json!(true), "{new}");
    assert!(
        new["warnings"].is_null() && new["status"]["message"].is_null(),
        "passed untouched: {new}"
    );
    assert!(
        h.store
            .claims_allocated("ml", "vllm-restore-0", Some("uid-of-the-new-pod")),
        "no wait on the old pod's claims"
    );
}

/// `miggate_gpu_nodes_without_inventory` counts the Nodes with GPUs that no source describes:
/// a labelled GPU node with no GpuNode, GFD labels or slices counts until its GpuNode arrives;
/// a node without GPUs never counts.
#[tokio::test]
async fn gpu_nodes_without_inventory_are_counted_in_the_metrics() {
    let fake = fake_with_checkpoint().await;
    let mut bare = node("bare-gpu");
    bare.metadata.labels = Some([("nvidia.com/gpu.present".to_string(), "true".to_string())].into());
    fake.apply(bare);
    fake.apply(node("cpu-only"));
    let h = harness(fake, KubeOptions::default()).await;
    h.synced().await;
    let gauge = |text: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix("miggate_gpu_nodes_without_inventory "))
            .map(str::to_string)
    };
    let (_, text) = h.get("/metrics").await;
    assert_eq!(gauge(&text).as_deref(), Some("1"), "{text}");

    h.fake.apply(gpu_node("bare-gpu", fits()));
    tokio_wait(|| (h.store.gpu_nodes_without_inventory() == 0).then_some(())).await;
    let (_, text) = h.get("/metrics").await;
    assert_eq!(gauge(&text).as_deref(), Some("0"), "{text}");
}
