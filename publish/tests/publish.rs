//! The publisher against an in-process API server (kube-fake): the first round applies, an
//! unchanged node is not written, a change is applied once, the apply body is one a
//! server-side apply accepts, the recovery state becomes the `Recovered` condition, and a stop
//! ends the loop.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube_fake::{FakeApiServer, Recorded};
use miggate_compat::GpuManifest;
use miggate_publish::{Config, FIELD_MANAGER, InventorySource, Publisher, RECOVERY_STATE, Round};
use serde_json::{Value, json};

/// A node whose inventory the test sets, counting captures.
#[derive(Clone, Default)]
struct Node {
    manifest: Arc<Mutex<Option<GpuManifest>>>,
    captures: Arc<Mutex<usize>>,
}

impl InventorySource for Node {
    type Error = std::io::Error;

    fn capture(&mut self) -> Result<GpuManifest, std::io::Error> {
        *self.captures.lock().unwrap() += 1;
        self.manifest
            .lock()
            .unwrap()
            .clone()
            .ok_or_else(|| std::io::Error::other("nvidia-smi: no devices were found"))
    }
}

fn manifest(rel: &str, captured_at: &str) -> GpuManifest {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../testdata")
            .join(rel),
    )
    .unwrap();
    let mut m = miggate_crds::read_stored(&text).unwrap().manifest;
    m.captured_at = Some(captured_at.into());
    m
}

fn patches(fake: &FakeApiServer) -> Vec<Recorded> {
    fake.requests()
        .into_iter()
        .filter(|r| r.method == "PATCH")
        .collect()
}

async fn publisher(fake: &FakeApiServer, root: &Path, node: &Node) -> Publisher<Node> {
    publisher_with(fake, root, node, None)
}

fn publisher_with(
    fake: &FakeApiServer,
    root: &Path,
    node: &Node,
    mig_strategy: Option<miggate_compat::MigStrategy>,
) -> Publisher<Node> {
    Publisher::new(
        fake.client().unwrap(),
        Config {
            node: "gpu-node-7".into(),
            interval: Duration::from_millis(50),
            root: root.to_path_buf(),
            mig_strategy,
        },
        node.clone(),
    )
}

/// A capture cannot see the device plugin's MIG strategy: the one the publisher is told
/// goes into the `GpuNode`, so `gpu-request` can judge `nvidia.com/gpu` against it; one the
/// inventory already carries is kept.
#[rstest::rstest]
#[case::told_and_unknown(Some(miggate_compat::MigStrategy::Single), None, Some("single"))]
#[case::not_told(None, None, None)]
#[case::inventory_has_one(
    Some(miggate_compat::MigStrategy::Single),
    Some(miggate_compat::MigStrategy::Mixed),
    Some("mixed")
)]
#[tokio::test]
async fn the_mig_strategy_is_published(
    #[case] told: Option<miggate_compat::MigStrategy>,
    #[case] captured: Option<miggate_compat::MigStrategy>,
    #[case] want: Option<&str>,
) {
    let fake = FakeApiServer::start().await.unwrap();
    let root = tempfile::tempdir().unwrap();
    let node = Node::default();
    let mut m = manifest("webhook-store/nodes/gpu-node-7.yaml", "2026-11-30T10:00:00Z");
    m.nvidia.as_mut().unwrap().mig_strategy = captured;
    *node.manifest.lock().unwrap() = Some(m);
    let mut p = publisher_with(&fake, root.path(), &node, told);
    assert!(p.round().await.unwrap().applied);
    let stored = fake.get("gpunodes", None, "gpu-node-7").unwrap();
    let strategy = &stored["spec"]["manifest"]["nvidia"]["migStrategy"];
    assert_eq!(strategy.as_str(), want, "{stored}");
}

#[tokio::test]
async fn applies_first_then_only_changes() {
    let fake = FakeApiServer::start().await.unwrap();
    let root = tempfile::tempdir().unwrap();
    let node = Node::default();
    *node.manifest.lock().unwrap() = Some(manifest(
        "webhook-store/nodes/gpu-node-7.yaml",
        "2026-11-30T10:00:00Z",
    ));
    let mut p = publisher(&fake, root.path(), &node).await;

    assert_eq!(
        p.round().await.unwrap(),
        Round {
            applied: true,
            status_written: false
        }
    );
    let first = patches(&fake);
    assert_eq!(first.len(), 1);
    let apply = &first[0];
    assert_eq!(apply.path, "/apis/miggate.io/v1alpha1/gpunodes/gpu-node-7");
    assert_eq!(
        apply.content_type.as_deref(),
        Some("application/apply-patch+yaml")
    );
    assert_eq!(
        apply.query.get("fieldManager").map(String::as_str),
        Some(FIELD_MANAGER)
    );
    assert_eq!(apply.query.get("force").map(String::as_str), Some("true"));
    // The body a server-side apply takes: apiVersion, kind, metadata.name, the spec.
    let body = apply.body.clone().unwrap();
    assert_eq!(body["apiVersion"], "miggate.io/v1alpha1");
    assert_eq!(body["kind"], "GpuNode");
    assert_eq!(body["metadata"]["name"], "gpu-node-7");
    insta::assert_yaml_snapshot!("apply_body", body, {".spec.observedAt" => "[observedAt]"});
    let stored = fake.get("gpunodes", None, "gpu-node-7").unwrap();
    assert_eq!(stored["spec"]["manifest"]["host"]["nodeName"], "gpu-node-7");

    // Captured again, later: only the capture time differs. No write.
    *node.manifest.lock().unwrap() = Some(manifest(
        "webhook-store/nodes/gpu-node-7.yaml",
        "2026-11-30T10:01:00Z",
    ));
    assert_eq!(p.round().await.unwrap(), Round::default());
    assert_eq!(patches(&fake).len(), 1, "nothing changed, nothing written");

    // The node is re-cut: one apply, with the new inventory.
    let mut recut = manifest("webhook-store/nodes/gpu-node-7.yaml", "2026-11-30T10:02:00Z");
    recut
        .nvidia
        .as_mut()
        .unwrap()
        .devices
        .as_mut()
        .unwrap()
        .truncate(2);
    *node.manifest.lock().unwrap() = Some(recut);
    assert!(p.round().await.unwrap().applied);
    assert!(!p.round().await.unwrap().applied);
    assert_eq!(patches(&fake).len(), 2);
    let stored = fake.get("gpunodes", None, "gpu-node-7").unwrap();
    assert_eq!(
        stored["spec"]["manifest"]["nvidia"]["devices"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(*node.captures.lock().unwrap(), 4);
}

/// The source's own error is the round's error's source, not its text: a caller can ask what
/// kind of failure it was.
#[tokio::test]
async fn a_failed_capture_carries_the_sources_error() {
    let fake = FakeApiServer::start().await.unwrap();
    let root = tempfile::tempdir().unwrap();
    let node = Node::default();
    let mut p = publisher(&fake, root.path(), &node).await;
    let err = p.round().await.unwrap_err();
    let source = std::error::Error::source(&err).and_then(|s| s.downcast_ref::<std::io::Error>());
    assert_eq!(
        source.map(std::io::Error::kind),
        Some(std::io::ErrorKind::Other),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_failed_capture_writes_nothing_and_is_retried() {
    let fake = FakeApiServer::start().await.unwrap();
    let root = tempfile::tempdir().unwrap();
    let node = Node::default();
    let mut p = publisher(&fake, root.path(), &node).await;
    let err = p.round().await.unwrap_err().to_string();
    assert!(
        err.contains("capture failed: nvidia-smi: no devices were found"),
        "{err}"
    );
    assert!(patches(&fake).is_empty());
    *node.manifest.lock().unwrap() = Some(manifest("webhook-store/nodes/gpu-node-7.yaml", "x"));
    assert!(p.round().await.unwrap().applied);
}

/// Writes a state file as recovery does: every state carries the time it was written.
fn write_state(root: &Path, mut state: Value) {
    state["updatedAt"] = "2026-11-30T00:00:00Z".into();
    let path = root.join(RECOVERY_STATE);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, state.to_string()).unwrap();
}

#[tokio::test]
async fn the_recovery_state_becomes_the_recovered_condition() {
    let fake = FakeApiServer::start().await.unwrap();
    let root = tempfile::tempdir().unwrap();
    let node = Node::default();
    *node.manifest.lock().unwrap() = Some(manifest("webhook-store/nodes/gpu-node-7.yaml", "t0"));
    write_state(
        root.path(),
        json!({"state": "recovering", "step": "sriov", "message": "enabling VFs on 8 GPUs", "updatedAt": "2026-11-30T10:00:00Z"}),
    );
    let mut p = publisher(&fake, root.path(), &node).await;
    assert_eq!(
        p.round().await.unwrap(),
        Round {
            applied: true,
            status_written: true
        }
    );
    let status_patch = patches(&fake).pop().unwrap();
    assert_eq!(
        status_patch.path,
        "/apis/miggate.io/v1alpha1/gpunodes/gpu-node-7/status"
    );
    assert_eq!(
        status_patch.query.get("fieldManager").map(String::as_str),
        Some(FIELD_MANAGER)
    );
    let stored = fake.get("gpunodes", None, "gpu-node-7").unwrap();
    let condition = &stored["status"]["conditions"][0];
    assert_eq!(condition["type"], "Recovered");
    assert_eq!(condition["reason"], "Recovering");
    assert_eq!(condition["status"], "False");
    assert_eq!(condition["message"], "sriov: enabling VFs on 8 GPUs");
    assert_eq!(condition["observedGeneration"], 1);

    // Unchanged state: no write.
    assert_eq!(p.round().await.unwrap(), Round::default());
    assert_eq!(patches(&fake).len(), 2);

    write_state(
        root.path(),
        json!({"state": "ready", "step": "verify", "message": "layout matches"}),
    );
    assert!(p.round().await.unwrap().status_written);
    let stored = fake.get("gpunodes", None, "gpu-node-7").unwrap();
    let condition = &stored["status"]["conditions"][0];
    assert_eq!(
        (condition["reason"].as_str(), condition["status"].as_str()),
        (Some("Ready"), Some("True"))
    );

    // A state file that cannot be read is an error of the round, and writes nothing.
    write_state(root.path(), json!({"state": "half-done"}));
    let err = p.round().await.unwrap_err().to_string();
    assert!(err.contains("unknown variant `half-done`"), "{err}");
    assert_eq!(patches(&fake).len(), 3);
}

#[tokio::test]
async fn run_applies_and_stops_when_asked() {
    let fake = FakeApiServer::start().await.unwrap();
    let root = tempfile::tempdir().unwrap();
    let node = Node::default();
    *node.manifest.lock().unwrap() = Some(manifest("webhook-store/nodes/gpu-node-7.yaml", "t0"));
    let p = publisher(&fake, root.path(), &node).await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(p.run(async move {
        let _ = stopped.await;
    }));
    let deadline = Instant::now() + Duration::from_secs(10);
    while patches(&fake).is_empty() || *node.captures.lock().unwrap() < 3 {
        assert!(Instant::now() < deadline, "never applied");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(2), task)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(patches(&fake).len(), 1, "rounds after the first wrote nothing");
}

#[tokio::test]
async fn a_gpu_node_deleted_or_edited_by_another_writer_is_applied_again() {
    let fake = FakeApiServer::start().await.unwrap();
    let root = tempfile::tempdir().unwrap();
    let node = Node::default();
    *node.manifest.lock().unwrap() = Some(manifest(
        "webhook-store/nodes/gpu-node-7.yaml",
        "2026-11-30T10:00:00Z",
    ));
    write_state(
        root.path(),
        json!({"state": "ready", "updatedAt": "2026-11-30T10:00:00Z"}),
    );
    let mut p = publisher(&fake, root.path(), &node).await;
    assert_eq!(
        p.round().await.unwrap(),
        Round {
            applied: true,
            status_written: true
        }
    );

    // Someone deletes the GpuNode: the node has not changed, but admission now has no
    // inventory for it. The next round puts it back.
    assert!(fake.delete("gpunodes", None, "gpu-node-7"));
    assert_eq!(
        p.round().await.unwrap(),
        Round {
            applied: true,
            status_written: true
        },
        "a deleted GpuNode is re-created, with its condition"
    );
    let stored = fake.get("gpunodes", None, "gpu-node-7").unwrap();
    assert_eq!(stored["status"]["conditions"][0]["reason"], "Ready");
    assert!(!p.round().await.unwrap().applied);

    // Someone edits its spec (kubectl edit): the publisher's inventory wins again.
    let mut edited = fake.get("gpunodes", None, "gpu-node-7").unwrap();
    edited["spec"]["manifest"]["nvidia"]["devices"] = json!([]);
    fake.apply(edited);
    assert!(p.round().await.unwrap().applied, "an edited spec is re-applied");
    let stored = fake.get("gpunodes", None, "gpu-node-7").unwrap();
    assert!(
        !stored["spec"]["manifest"]["nvidia"]["devices"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert!(!p.round().await.unwrap().applied);
    assert_eq!(
        patches(&fake).len(),
        5,
        "one write per change, none while unchanged"
    );
}
