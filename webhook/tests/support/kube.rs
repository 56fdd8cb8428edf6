//! The Kubernetes store under test against kube-fake (`support::kube`): the recorded objects it
//! is fed, the admission reviews posted to it, and the harness that serves its decisions, shared
//! by `kube_store.rs`, `kube_store_outages.rs` and `kube_store_tenants.rs`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube_fake::FakeApiServer;
use miggate_compat::GpuManifest;
use miggate_crds::{GpuCheckpoint, GpuNode};
use miggate_store::kube_store::{KubeOptions, KubeStore};
use miggate_webhook::metrics::Metrics;
use miggate_webhook::server::{AppState, Store, admission_service, health_router};
use serde_json::{Value, json};
use tower::ServiceExt;

use super::{manifest, testdata};

/// The recorded checkpoint `ml/vllm-ckpt` (H100, 3g.40gb).
pub fn checkpoint() -> GpuCheckpoint {
    serde_saphyr::from_str(&testdata("webhook-store/checkpoints/ml/vllm-ckpt.yaml")).unwrap()
}

/// H100 with two 3g.40gb slices: fits the checkpoint.
pub fn fits() -> GpuManifest {
    manifest("webhook-store/nodes/gpu-node-7.yaml")
}

/// A100 with seven 1g.5gb: short of the checkpoint's profile.
pub fn short() -> GpuManifest {
    manifest("webhook-store/nodes/a100-node-2.yaml")
}

/// A node's `GpuNode` as the publisher writes it: the manifest names the node it is stored under
/// (the CRD's rule, and the inventory reader, refuse one that names another).
pub fn gpu_node(name: &str, mut m: GpuManifest) -> GpuNode {
    if let Some(host) = m.host.as_mut() {
        host.node_name = Some(name.into());
    }
    GpuNode::from_manifest(name, m, Time(Timestamp::from_second(1_764_000_000).unwrap()))
}

/// A pod `ns/name` labelled `app=vllm`; with `restore_from`, a restore pod carrying a 4 KiB
/// unrelated annotation besides.
pub fn pod(ns: &str, name: &str, restore_from: Option<&str>) -> Pod {
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

/// A bare `Node` called `name`.
pub fn node(name: &str) -> Node {
    let mut n = Node::default();
    n.metadata.name = Some(name.into());
    n
}

/// A recorded pod CREATE naming `node`.
pub fn pod_review(node: &str) -> String {
    let mut review: Value =
        serde_json::from_str(&testdata("admission/pod-create-restore-node-allowed.json")).unwrap();
    review["request"]["object"]["spec"]["nodeName"] = json!(node);
    review.to_string()
}

/// A recorded `pods/binding` CREATE of `ml/<pod>` to `node`.
pub fn binding_review(pod: &str, node: &str) -> String {
    let mut review: Value = serde_json::from_str(&testdata("admission/binding-create.json")).unwrap();
    review["request"]["name"] = json!(pod);
    review["request"]["object"]["metadata"]["name"] = json!(pod);
    review["request"]["object"]["target"]["name"] = json!(node);
    review.to_string()
}

/// The store started against kube-fake, and the webhook state that decides from it.
pub struct Harness {
    pub fake: FakeApiServer,
    pub store: Arc<KubeStore>,
    pub state: Arc<AppState>,
}

/// Starts the store against `fake` with `options`, the webhook marked ready.
pub async fn harness(fake: FakeApiServer, options: KubeOptions) -> Harness {
    let metrics = Metrics::new();
    let config = kube::Config::new(fake.url().parse().unwrap());
    let store = KubeStore::start(config, &options, &metrics.watch).unwrap();
    let state = Arc::new(AppState::with_store(Store::Kube(store.clone()), metrics));
    state.ready.store(true, Ordering::Release);
    Harness { fake, store, state }
}

/// kube-fake holding the recorded checkpoint.
pub async fn fake_with_checkpoint() -> FakeApiServer {
    let fake = FakeApiServer::start().await.unwrap();
    fake.apply(checkpoint());
    fake
}

impl Harness {
    /// Posts an admission review to `/validate`: its `response`.
    pub async fn post(&self, body: String) -> Value {
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

    /// GETs `path` of the health router (`/readyz`, `/metrics`): status and body.
    pub async fn get(&self, path: &str) -> (StatusCode, String) {
        let req = Request::get(path).body(Body::empty()).unwrap();
        let resp = health_router(self.state.clone()).oneshot(req).await.unwrap();
        let status = resp.status();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8(bytes.to_vec()).unwrap())
    }

    /// Waits up to 10 s for every cache to sync.
    pub async fn synced(&self) {
        assert!(
            self.store.wait_synced(Duration::from_secs(10)).await,
            "caches never synced: {:?}",
            self.store.status()
        );
    }

    /// Posts `body` until the answer's `allowed` is `want` (a watch event is asynchronous).
    pub async fn until_allowed(&self, body: &str, want: bool) -> Value {
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
    pub fn count(&self, plural: &str, watch: bool) -> usize {
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

/// Polls `f` every 20 ms until it yields, for up to 10 s.
pub async fn tokio_wait<T>(mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `/readyz`'s status and body, parsed.
pub async fn readyz(h: &Harness) -> (StatusCode, Value) {
    let (status, body) = h.get("/readyz").await;
    (status, serde_json::from_str(&body).unwrap())
}

/// Polls `/readyz` until `done` holds of it, for up to `within`.
pub async fn until_readyz(h: &Harness, within: Duration, done: impl Fn(StatusCode, &Value) -> bool) -> Value {
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

/// A `PodSnapshot` of `ml` bound (its status written by whoever may) to `content`.
pub fn peer_snapshot(namespace: &str, name: &str, content: &str) -> Value {
    json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "PodSnapshot",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"source": {"podRef": {"name": "vllm-0", "containers": ["vllm"]}}},
        "status": {"boundSnapshotContentName": content}})
}
