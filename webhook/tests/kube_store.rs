//! The Kubernetes store against an in-process API server speaking the real list and watch
//! protocol (kube-fake): the first list, watch events that change decisions, readiness only
//! after every cache has synced, a dropped watch resumed, a `410 Gone` forcing a re-list, and
//! `pods/binding` decisions read from the pod cache.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube_fake::{FakeApiServer, StreamingLists};
use miggate_admission::lookup::Lookup;
use miggate_compat::GpuManifest;
use miggate_crds::{GpuCheckpoint, GpuNode};
use miggate_store::kube_store::{KubeOptions, KubeStore, MAX_KEPT_ANNOTATION_BYTES};
use miggate_webhook::metrics::Metrics;
use miggate_webhook::server::{AppState, Store, admission_service, health_router};
use rstest::rstest;
use serde_json::{Value, json};
use support::{manifest, testdata};
use tower::ServiceExt;

mod support;

fn checkpoint() -> GpuCheckpoint {
    serde_saphyr::from_str(&testdata("webhook-store/checkpoints/ml/vllm-ckpt.yaml")).unwrap()
}

/// H100 with two 3g.40gb slices: fits the checkpoint.
fn fits() -> GpuManifest {
    manifest("webhook-store/nodes/gpu-node-7.yaml")
}

/// A100 with seven 1g.5gb: short of the checkpoint's profile.
fn short() -> GpuManifest {
    manifest("webhook-store/nodes/a100-node-2.yaml")
}

/// A node's `GpuNode` as the publisher writes it: the manifest names the node it is stored under
/// (the CRD's rule, and the inventory reader, refuse one that names another).
fn gpu_node(name: &str, mut m: GpuManifest) -> GpuNode {
    if let Some(host) = m.host.as_mut() {
        host.node_name = Some(name.into());
    }
    GpuNode::from_manifest(name, m, Time(Timestamp::from_second(1_764_000_000).unwrap()))
}

fn pod(ns: &str, name: &str, restore_from: Option<&str>) -> Pod {
    let mut p = Pod::default();
    p.metadata.name = Some(name.into());
    p.metadata.namespace = Some(ns.into());
    p.metadata.labels = Some([("app".to_string(), "vllm".to_string())].into());
    if let Some(from) = restore_from {
        p.metadata.annotations = Some(
            [
                ("miggate.io/restore-from".to_string(), from.to_string()),
                ("unrelated".to_string(), "x".repeat(4096)),
            ]
            .into(),
        );
    }
    p
}

fn node(name: &str) -> Node {
    let mut n = Node::default();
    n.metadata.name = Some(name.into());
    n
}

/// A recorded pod CREATE naming `node`.
fn pod_review(node: &str) -> String {
    let mut review: Value =
        serde_json::from_str(&testdata("admission/pod-create-restore-node-allowed.json")).unwrap();
    review["request"]["object"]["spec"]["nodeName"] = json!(node);
    review.to_string()
}

/// A recorded `pods/binding` CREATE of `ml/<pod>` to `node`.
fn binding_review(pod: &str, node: &str) -> String {
    let mut review: Value = serde_json::from_str(&testdata("admission/binding-create.json")).unwrap();
    review["request"]["name"] = json!(pod);
    review["request"]["object"]["metadata"]["name"] = json!(pod);
    review["request"]["object"]["target"]["name"] = json!(node);
    review.to_string()
}

struct Harness {
    fake: FakeApiServer,
    store: Arc<KubeStore>,
    state: Arc<AppState>,
}

async fn harness(fake: FakeApiServer, options: KubeOptions) -> Harness {
    let metrics = Metrics::new();
    let config = kube::Config::new(fake.url().parse().unwrap());
    let store = KubeStore::start(config, &options, &metrics.watch).unwrap();
    let state = Arc::new(AppState::with_store(Store::Kube(store.clone()), metrics));
    state.ready.store(true, Ordering::Release);
    Harness { fake, store, state }
}

async fn fake_with_checkpoint() -> FakeApiServer {
    let fake = FakeApiServer::start().await.unwrap();
    fake.apply(checkpoint());
    fake
}

impl Harness {
    async fn post(&self, body: String) -> Value {
        let req = Request::post("/validate")
            .header("content-type", "application/json")
            .body(Body::from(body))
            .unwrap();
        let resp = admission_service(self.state.clone()).oneshot(req).await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        let review: Value = serde_json::from_slice(&bytes).unwrap();
        review["response"].clone()
    }

    async fn get(&self, path: &str) -> (StatusCode, String) {
        let req = Request::get(path).body(Body::empty()).unwrap();
        let resp = health_router(self.state.clone()).oneshot(req).await.unwrap();
        let status = resp.status();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8(bytes.to_vec()).unwrap())
    }

    async fn synced(&self) {
        assert!(
            self.store.wait_synced(Duration::from_secs(10)).await,
            "caches never synced: {:?}",
            self.store.status()
        );
    }

    /// Posts `body` until the answer's `allowed` is `want` (a watch event is asynchronous).
    async fn until_allowed(&self, body: &str, want: bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let response = self.post(body.to_string()).await;
            if response["allowed"] == json!(want) {
                return response;
            }
            assert!(Instant::now() < deadline, "still {response}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Requests of `plural`'s collection: watches opened (`watch`; a streaming list opens
    /// one too), or lists (a streaming list is one).
    fn count(&self, plural: &str, watch: bool) -> usize {
        self.fake
            .requests()
            .iter()
            .filter(|r| {
                let opens_a_watch = r.is_watch() || r.is_streaming_list();
                r.method == "GET"
                    && r.path.ends_with(&format!("/{plural}"))
                    && if watch { opens_a_watch } else { r.is_list(plural) }
            })
            .count()
    }
}

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
    for i in 0..8 {
        assert_eq!(list_mode(&h, i).await, json!(mode));
    }
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
    let slices = requests
        .iter()
        .find(|r| r.path.ends_with("/resourceslices"))
        .unwrap();
    assert_eq!(
        slices.query.get("fieldSelector").map(String::as_str),
        Some("spec.driver=gpu.nvidia.com")
    );
    assert!(requests.iter().all(|r| r.method == "GET"), "the store only reads");

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

async fn tokio_wait<T>(mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out");
        tokio::time::sleep(Duration::from_millis(20)).await;
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

#[tokio::test]
async fn a_cluster_without_the_resource_slice_api_is_ready_without_that_source() {
    // Kubernetes 1.30 to 1.33 serve no resource.k8s.io/v1: ResourceSlices are an optional
    // source there, not a reason to refuse every restore pod forever.
    let fake = fake_with_checkpoint().await;
    fake.apply(gpu_node("n1", fits()));
    fake.serve("resourceslices", false);
    let h = harness(fake, KubeOptions::default()).await;
    h.synced().await;
    let (status, body) = h.get("/readyz").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let ready: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(ready["store"]["kube"][4]["kind"], json!("ResourceSlice"));
    assert_eq!(ready["store"]["kube"][4]["served"], json!(false), "{body}");
    assert_eq!(h.post(pod_review("n1")).await["allowed"], json!(true));

    // The API appears (an upgrade): the cache lists it on a later retry.
    h.fake.serve("resourceslices", true);
    let deadline = Instant::now() + Duration::from_secs(40);
    while !h.store.status()[4].served {
        assert!(Instant::now() < deadline, "never listed once served");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_, body) = h.get("/readyz").await;
    let ready: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(ready["store"]["kube"][4]["served"], json!(true), "{body}");
}

/// `/readyz`'s status and body, parsed.
async fn readyz(h: &Harness) -> (StatusCode, Value) {
    let (status, body) = h.get("/readyz").await;
    (status, serde_json::from_str(&body).unwrap())
}

/// Polls `/readyz` until `done` holds of it, for up to `within`.
async fn until_readyz(h: &Harness, within: Duration, done: impl Fn(StatusCode, &Value) -> bool) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let (status, body) = readyz(h).await;
        if done(status, &body) {
            return body;
        }
        assert!(Instant::now() < deadline, "never: {status} {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn gpu_node_stale(body: &Value) -> f64 {
    assert_eq!(body["store"]["kube"][1]["kind"], json!("GpuNode"));
    body["store"]["kube"][1]["staleSeconds"].as_f64().unwrap()
}

#[tokio::test]
async fn through_a_short_outage_the_caches_keep_answering_and_say_how_stale() {
    let fake = fake_with_checkpoint().await;
    fake.apply(gpu_node("n1", fits()));
    let h = harness(fake, KubeOptions::default()).await;
    h.synced().await;
    tokio_wait(|| (h.count("gpunodes", true) == 1).then_some(())).await;
    assert_eq!(h.post(pod_review("n1")).await["allowed"], json!(true));

    // The GpuNode API goes away and its watch breaks: every retry fails.
    h.fake.serve("gpunodes", false);
    h.fake.drop_watches("gpunodes");
    let body = until_readyz(&h, Duration::from_secs(20), |_, b| gpu_node_stale(b) >= 2.0).await;
    // Behind, but within --max-staleness (60 s): still ready, still deciding from the cache.
    assert_eq!(readyz(&h).await.0, StatusCode::OK, "{body}");
    assert_eq!(body["store"]["kube"][1]["failing"], json!(false), "{body}");
    assert_eq!(body["store"]["kube"][0]["staleSeconds"], json!(0.0), "{body}");
    assert_eq!(h.post(pod_review("n1")).await["allowed"], json!(true));
    let (_, metrics) = h.get("/metrics").await;
    let line = metrics
        .lines()
        .find(|l| l.starts_with("miggate_cache_stale_seconds{kind=\"GpuNode\"}"))
        .unwrap_or_else(|| panic!("{metrics}"));
    let stale: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(stale >= 2.0, "{line}");

    // Served again. Nothing changed, so the resumed watch sends nothing: the cache is seen to
    // have caught up because the server accepted the watch and kept it open, not by an event.
    let before = h.count("gpunodes", false);
    h.fake.serve("gpunodes", true);
    let body = until_readyz(&h, Duration::from_secs(10), |_, b| gpu_node_stale(b) == 0.0).await;
    assert_eq!(
        h.count("gpunodes", false),
        before,
        "caught up without a re-list: {body}"
    );
}

#[tokio::test]
async fn a_cache_behind_longer_than_the_bound_is_not_ready_and_refuses_restores() {
    let fake = fake_with_checkpoint().await;
    fake.apply(gpu_node("n1", fits()));
    fake.apply(node("n1"));
    fake.apply(pod("ml", "vllm-restore-0", Some("vllm-ckpt")));
    let options = KubeOptions {
        max_staleness: Duration::from_secs(2),
        ..KubeOptions::default()
    };
    let h = harness(fake, options).await;
    h.synced().await;
    tokio_wait(|| (h.count("gpunodes", true) == 1).then_some(())).await;
    assert_eq!(readyz(&h).await.0, StatusCode::OK);

    h.fake.serve("gpunodes", false);
    h.fake.drop_watches("gpunodes");
    let body = until_readyz(&h, Duration::from_secs(20), |s, _| {
        s == StatusCode::SERVICE_UNAVAILABLE
    })
    .await;
    assert_eq!(body["store"]["kube"][1]["failing"], json!(true), "{body}");
    assert_eq!(body["store"]["kube"][0]["failing"], json!(false), "{body}");
    let (_, metrics) = h.get("/metrics").await;
    assert!(
        metrics.contains("miggate_watch_failing{kind=\"GpuNode\"} 1"),
        "{metrics}"
    );

    // A restore is refused, saying which cache and for how long; a binding goes unchecked
    // (as before the first list), with a warning saying why.
    let refused = h.post(pod_review("n1")).await;
    assert_eq!(refused["allowed"], json!(false), "{refused}");
    let message = refused["status"]["message"].as_str().unwrap();
    assert!(message.starts_with("miggate: cannot check checkpoint ml/vllm-ckpt now: the webhook's GpuNode cache has been behind the API server for "), "{message}");
    assert!(
        message.ends_with(
            "s (its watch is failing; --max-staleness is 2 s); retry once the API server answers again"
        ),
        "{message}"
    );
    let binding = h.post(binding_review("vllm-restore-0", "n1")).await;
    assert_eq!(binding["allowed"], json!(true), "{binding}");
    assert!(
        binding["warnings"][0]
            .as_str()
            .unwrap()
            .starts_with("miggate: binding not checked: the webhook's GpuNode cache has been behind"),
        "{binding}"
    );

    // Served again: ready within seconds, without an event, and deciding again.
    h.fake.serve("gpunodes", true);
    until_readyz(&h, Duration::from_secs(10), |s, _| s == StatusCode::OK).await;
    assert_eq!(h.post(pod_review("n1")).await["allowed"], json!(true));
    let (_, metrics) = h.get("/metrics").await;
    assert!(
        metrics.contains("miggate_watch_failing{kind=\"GpuNode\"} 0"),
        "{metrics}"
    );
}

#[tokio::test]
async fn an_expired_version_keeps_the_cache_behind_until_its_relist_completes() {
    let fake = fake_with_checkpoint().await;
    fake.apply(gpu_node("n1", fits()));
    let h = harness(fake, KubeOptions::default()).await;
    h.synced().await;
    tokio_wait(|| (h.count("gpunodes", true) == 1).then_some(())).await;
    // The server forgets the history and is slow to list: the watch is accepted and answered
    // 410 at once, and the cache stays behind through the re-list, then is current.
    h.fake.fail_next("gpunodes", 500);
    h.fake.expire("gpunodes");
    let body = until_readyz(&h, Duration::from_secs(10), |_, b| gpu_node_stale(b) > 0.0).await;
    assert_eq!(
        body["store"]["kube"][1]["lists"],
        json!(1),
        "behind before the re-list: {body}"
    );
    let body = until_readyz(&h, Duration::from_secs(15), |_, b| gpu_node_stale(b) == 0.0).await;
    // Current only once a list completed: the failed one counts as started, not done.
    assert!(body["store"]["kube"][1]["lists"].as_u64().unwrap() >= 2, "{body}");
    assert_eq!(
        body["store"]["kube"][1]["errors"],
        json!(2),
        "the 410 and the 500: {body}"
    );
    assert_eq!(body["ready"], json!(true), "{body}");
}

#[tokio::test]
async fn a_restore_from_naming_another_namespace_finds_nothing_there() {
    // The checkpoint exists only in namespace `other`; pods in `ml` name it every way a
    // hostile annotation might. None may read it: a checkpoint is its namespace's.
    let fake = FakeApiServer::start().await.unwrap();
    let mut foreign = checkpoint();
    foreign.metadata.namespace = Some("other".into());
    fake.apply(foreign);
    fake.apply(gpu_node("n1", fits()));
    for (name, from) in [
        ("slash", "other/vllm-ckpt"),
        ("dotdot", "../other/vllm-ckpt"),
        ("spaces", " other/vllm-ckpt "),
    ] {
        fake.apply(pod("ml", name, Some(from)));
    }
    let h = harness(fake, KubeOptions::default()).await;
    h.synced().await;
    assert!(h.store.checkpoint("other", "vllm-ckpt").is_some());
    for name in ["slash", "dotdot", "spaces"] {
        let r = h.post(binding_review(name, "n1")).await;
        assert_eq!(r["allowed"], json!(false), "{name}: {r}");
        let message = r["status"]["message"].as_str().unwrap();
        assert!(message.contains("does not exist"), "{name}: {message}");
    }
    let mut review: Value = serde_json::from_str(&pod_review("n1")).unwrap();
    review["request"]["object"]["metadata"]["annotations"]["miggate.io/restore-from"] =
        json!("other/vllm-ckpt");
    let r = h.post(review.to_string()).await;
    assert_eq!(r["allowed"], json!(false), "{r}");
    assert!(
        r["status"]["message"]
            .as_str()
            .unwrap()
            .contains("does not exist"),
        "{r}"
    );
}

/// A pod of `ml` with `annotations` and a 64 KiB label-free blob of foreign annotations.
fn bloated(name: &str, annotations: Value) -> Value {
    let mut all = json!({"tenant.example/blob-a": "x".repeat(32 * 1024), "tenant.example/blob-b": "y".repeat(32 * 1024)});
    if let (Some(all), Some(extra)) = (all.as_object_mut(), annotations.as_object()) {
        all.extend(extra.clone());
    }
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "annotations": all},
        "spec": {"containers": [{"name": "c", "image": "x", "env": [{"name": "E", "value": "z".repeat(8 * 1024)}]}]}})
}

#[rstest]
#[case::streamed(StreamingLists::Served)]
#[case::listed(StreamingLists::Invalid)]
#[tokio::test]
async fn restore_pods_among_bloated_pods_are_found_one_pod_at_a_time(#[case] streaming: StreamingLists) {
    let fake = fake_with_checkpoint().await;
    fake.streaming_lists(streaming);
    fake.apply(gpu_node("short", short()));
    // 250 pods of about 72 KiB each, none a restore pod: several pages.
    for i in 0..250 {
        fake.apply(bloated(&format!("web-{i:03}"), json!({})));
    }
    // Restore pods sorted among them (the fake pages by name), one with each oversized value.
    let over = "a".repeat(MAX_KEPT_ANNOTATION_BYTES + 1);
    fake.apply(bloated(
        "web-150-restore",
        json!({"miggate.io/restore-from": "vllm-ckpt"}),
    ));
    fake.apply(bloated(
        "web-151-restore-from-over",
        json!({"miggate.io/restore-from": over}),
    ));
    fake.apply(bloated(
        "web-152-skip-over",
        json!({"miggate.io/restore-from": "vllm-ckpt", "miggate.io/skip-checks": format!("all{}", " ".repeat(over.len()))}),
    ));
    fake.apply(bloated(
        "web-153-peer-over",
        json!({"nvidia.com/restore-from": over}),
    ));
    let h = harness(fake, KubeOptions::default()).await;
    h.synced().await;

    // Streamed: one pod at a time. Where the server refuses to stream: one list of every
    // pod, decoded one pod at a time as it arrives.
    let lists: Vec<_> = h
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.is_list("pods") && !r.is_streaming_list())
        .collect();
    assert!(
        lists.iter().all(|r| !r.query.contains_key("limit")
            && r.query.get("resourceVersion").map(String::as_str) == Some("0")),
        "{lists:#?}"
    );
    let whole = usize::from(streaming != StreamingLists::Served);
    assert_eq!(lists.len(), whole, "{lists:#?}");
    assert_eq!(h.store.status()[2].objects, 4, "only the restore pods are kept");

    let refused = h.post(binding_review("web-150-restore", "short")).await;
    assert_eq!(refused["allowed"], json!(false), "{refused}");
    assert!(
        refused["status"]["message"]
            .as_str()
            .unwrap()
            .contains("mig-profile"),
        "{refused}"
    );
    // An oversized value is not kept, and the binding is refused, never passed unchecked
    // (a 16 KiB "all" padded with spaces would otherwise waive every check).
    for (pod, says) in [
        ("web-151-restore-from-over", "does not exist"),
        ("web-152-skip-over", "waives nothing"),
        ("web-153-peer-over", "is not a valid PodSnapshot name"),
    ] {
        let r = h.post(binding_review(pod, "short")).await;
        assert_eq!(r["allowed"], json!(false), "{pod}: {r}");
        let message = r["status"]["message"].as_str().unwrap();
        assert!(
            message.contains(says) && message.contains("bytes not kept: over the 16384-byte bound"),
            "{pod}: {message}"
        );
        let kept = h.store.restore_pod("ml", pod).unwrap();
        assert!(format!("{kept:?}").len() < 1024, "{pod}: {kept:?}");
    }
}

#[tokio::test]
async fn a_refused_streaming_list_is_not_asked_again_at_the_next_relist() {
    let fake = fake_with_checkpoint().await;
    fake.streaming_lists(StreamingLists::StorageUnsupported);
    fake.apply(gpu_node("n1", fits()));
    let h = harness(fake, KubeOptions::default()).await;
    h.synced().await;
    let streaming = |h: &Harness| {
        h.fake
            .requests()
            .iter()
            .filter(|r| r.path.ends_with("/gpunodes") && r.is_streaming_list())
            .count()
    };
    assert_eq!(streaming(&h), 1);
    tokio_wait(|| {
        h.fake
            .requests()
            .into_iter()
            .find(|r| r.path.ends_with("/gpunodes") && r.is_watch())
    })
    .await;

    // The version expires: the kind is listed again whole, without asking to stream again.
    h.fake.expire("gpunodes");
    h.fake.apply(gpu_node("n1", short()));
    h.until_allowed(&pod_review("n1"), false).await;
    assert_eq!(
        h.count("gpunodes", false),
        3,
        "the refused stream and two whole lists"
    );
    assert_eq!(streaming(&h), 1, "not asked again within the retry time");
    let body = readyz(&h).await.1;
    assert_eq!(body["store"]["kube"][1]["lists"], json!(2), "{body}");
    assert_eq!(body["store"]["kube"][1]["list"], json!("listed"), "{body}");
}

/// Where the server refuses to stream, a list cut mid-body (the server gone while sending it) is
/// an error and is never swapped in short: the cache keeps what it held until a whole list
/// arrives, and the watch then follows it.
#[tokio::test]
async fn a_whole_list_cut_mid_body_is_never_swapped_in_short() {
    let fake = fake_with_checkpoint().await;
    fake.streaming_lists(StreamingLists::Invalid);
    for i in 0..60 {
        fake.apply(gpu_node(&format!("n{i:02}"), fits()));
    }
    let h = harness(fake, KubeOptions::default()).await;
    h.synced().await;
    assert_eq!(h.store.status()[1].objects, 60);

    h.fake.break_next_list("gpunodes");
    h.fake.expire("gpunodes");
    let deadline = Instant::now() + Duration::from_secs(10);
    while h.count("gpunodes", false) < 4 {
        assert_eq!(h.store.status()[1].objects, 60, "a short list swapped in");
        assert!(
            Instant::now() < deadline,
            "never listed again: {:#?}",
            h.fake.requests()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The refused stream, the first list, the cut one and the whole one after it.
    let body = readyz(&h).await.1;
    assert_eq!(body["store"]["kube"][1]["list"], json!("listed"), "{body}");
    assert!(
        body["store"]["kube"][1]["errors"].as_u64().unwrap() >= 1,
        "{body}"
    );
    // And the watch from the new list's version carries on.
    h.fake.apply(gpu_node("n00", short()));
    h.until_allowed(&pod_review("n00"), false).await;
    assert_eq!(h.store.status()[1].objects, 60);
}

/// A `PodSnapshot` of `ml` bound (its status written by whoever may) to `content`.
fn peer_snapshot(namespace: &str, name: &str, content: &str) -> Value {
    json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "PodSnapshot",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"source": {"podRef": {"name": "vllm-0", "containers": ["vllm"]}}},
        "status": {"boundSnapshotContentName": content}})
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

/// Every kind's list is read one object at a time, streamed or, where the server refuses to
/// stream, one list from its watch cache decoded as it arrives; either way tenants' fat claims
/// and snapshots are kept as what is judged of them.
#[rstest]
#[case::streamed(StreamingLists::Served)]
#[case::listed(StreamingLists::Invalid)]
#[tokio::test]
async fn fat_claims_and_snapshots_are_listed_one_at_a_time_and_kept_lean(#[case] streaming: StreamingLists) {
    let fake = fake_with_checkpoint().await;
    fake.streaming_lists(streaming);
    let blob = |i: usize| json!({format!("tenant.example/blob-{i}"): "x".repeat(200 * 1024)});
    let count = 21;
    for i in 0..count {
        fake.apply(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": format!("claim-{i:03}"), "namespace": "ml", "annotations": blob(i)},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n1", "device": format!("gpu-{i}")}]}}}}));
        let mut s = peer_snapshot("ml", &format!("snap-{i:03}"), "c");
        s["metadata"]["annotations"] = blob(i);
        fake.apply(s);
    }
    let h = harness(fake, KubeOptions::default()).await;
    h.synced().await;
    let lists = |plural: &str| -> Vec<_> {
        h.fake
            .requests()
            .into_iter()
            .filter(|r| r.is_list(plural) && !r.is_streaming_list())
            .collect()
    };
    let listed = usize::from(streaming != StreamingLists::Served);
    for plural in [
        "resourceclaims",
        "podsnapshots",
        "podsnapshotcontents",
        "gpucheckpoints",
        "gpunodes",
        "nodes",
        "resourceslices",
    ] {
        let lists = lists(plural);
        assert_eq!(lists.len(), listed, "{plural}: {lists:#?}");
        assert!(
            lists.iter().all(|r| !r.query.contains_key("limit")
                && r.query.get("resourceVersion").map(String::as_str) == Some("0")),
            "{plural}: {lists:#?}"
        );
    }
    let last = format!("{:03}", count - 1);
    let claim = h.store.claim("ml", &format!("claim-{last}")).unwrap();
    assert_eq!(
        claim.devices.as_ref().unwrap()[0].device,
        format!("gpu-{}", count - 1)
    );
    assert!(format!("{claim:?}").len() < 512, "{claim:?}");
    assert!(matches!(
        h.store.snapshot("ml", &format!("snap-{last}")),
        miggate_admission::lookup::SnapshotLookup::ContentMissing(c) if c == "c"
    ));
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
