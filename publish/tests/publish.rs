//! The publisher against an in-process API server (kube-fake): the first round applies, an
//! unchanged node is not written, a change is applied once, the apply body is one a
//! server-side apply accepts, the recovery state becomes the `Recovered` condition, and a stop
//! ends the loop. Through an API server restart (kube-fake's `stop`/`start_again`): what
//! changed while it was down is written soon after it is back, not at the next interval; the
//! rounds while it is down are paced by the backoff; a stop ends the loop while it is down.

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
    publisher_every(fake, root, node, Duration::from_millis(50), mig_strategy)
}

fn publisher_every(
    fake: &FakeApiServer,
    root: &Path,
    node: &Node,
    interval: Duration,
    mig_strategy: Option<miggate_compat::MigStrategy>,
) -> Publisher<Node> {
    Publisher::new(
        fake.client().unwrap(),
        Config {
            node: "gpu-node-7".into(),
            interval,
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

/// On the real server `status.conditions` merges by `type` per field manager (the CRD's
/// `x-kubernetes-list-type: map`), so the publisher's `Recovered` apply keeps another
/// writer's condition; the fake does the same once it has read the CRD (kube-fake's `apply`
/// module says what was checked against kube-apiserver).
#[tokio::test]
async fn another_writer_s_condition_is_kept_beside_the_recovered_condition() {
    use kube::CustomResourceExt;
    let fake = FakeApiServer::start().await.unwrap();
    let (plural, lists) = fake.learn_crd(miggate_crds::GpuNode::crd());
    assert_eq!((plural.as_str(), lists), ("gpunodes", 1));
    let root = tempfile::tempdir().unwrap();
    let node = Node::default();
    *node.manifest.lock().unwrap() = Some(manifest("webhook-store/nodes/gpu-node-7.yaml", "t0"));
    write_state(
        root.path(),
        json!({"state": "recovering", "step": "sriov", "message": "enabling VFs"}),
    );
    let mut p = publisher(&fake, root.path(), &node).await;
    assert!(p.round().await.unwrap().status_written);
    let api: kube::Api<miggate_crds::GpuNode> = kube::Api::all(fake.client().unwrap());
    let drained = json!({
        "apiVersion": "miggate.io/v1alpha1", "kind": "GpuNode", "metadata": {"name": "gpu-node-7"},
        "status": {"conditions": [{"type": "Drained", "status": "False", "reason": "NotDrained",
            "message": "", "lastTransitionTime": "2026-12-03T00:00:00Z"}]},
    });
    api.patch_status(
        "gpu-node-7",
        &kube::api::PatchParams::apply("drain-controller"),
        &kube::api::Patch::Apply(&drained),
    )
    .await
    .unwrap();
    write_state(
        root.path(),
        json!({"state": "ready", "step": "verify", "message": "layout matches"}),
    );
    assert!(p.round().await.unwrap().status_written);
    let stored = fake.get("gpunodes", None, "gpu-node-7").unwrap();
    let conditions: Vec<(&str, &str)> = stored["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["type"].as_str().unwrap(), c["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(conditions, [("Recovered", "Ready"), ("Drained", "NotDrained")]);
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

/// The interval of the outage tests: far longer than any of them runs, so whatever they see
/// written was written by a retry or the watch, not by a round at the interval.
const LONG: Duration = Duration::from_secs(60);

/// A running publisher and how to stop it.
struct Running {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

fn run(p: Publisher<Node>) -> Running {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(p.run(async move {
        let _ = stopped.await;
    }));
    Running { stop, task }
}

impl Running {
    /// Stops it, and checks that it ended at once (a generous 2 s: "at once", not a timing).
    async fn stop(self) {
        self.stop.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(2), self.task)
            .await
            .expect("run ended within 2 s of the stop")
            .unwrap();
    }
}

/// Polls until `ready` holds of the stored `GpuNode`, failing after `within`.
async fn until(fake: &FakeApiServer, within: Duration, what: &str, ready: impl Fn(&Value) -> bool) {
    let deadline = Instant::now() + within;
    loop {
        if fake
            .get("gpunodes", None, "gpu-node-7")
            .is_some_and(|o| ready(&o))
        {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn reason(obj: &Value) -> Option<&str> {
    obj.pointer("/status/conditions/0/reason").and_then(Value::as_str)
}

fn devices(obj: &Value) -> usize {
    obj.pointer("/spec/manifest/nvidia/devices")
        .and_then(Value::as_array)
        .map_or(0, Vec::len)
}

/// No write is lost to an outage: the `GpuNode` deleted while the API server was down, the
/// inventory that changed meanwhile and the recovery state written meanwhile are all written
/// within seconds of its return, with an interval of a minute.
#[tokio::test]
async fn what_changed_while_the_api_server_was_down_is_written_soon_after_it_is_back() {
    let fake = FakeApiServer::start().await.unwrap();
    let root = tempfile::tempdir().unwrap();
    let node = Node::default();
    let full = manifest("webhook-store/nodes/gpu-node-7.yaml", "t0");
    let full_devices = full.devices().map_or(0, <[_]>::len);
    assert!(full_devices > 2);
    *node.manifest.lock().unwrap() = Some(full.clone());
    write_state(root.path(), json!({"state": "recovering", "step": "sriov"}));
    let running = run(publisher_every(&fake, root.path(), &node, LONG, None));
    until(&fake, Duration::from_secs(20), "first publish", |o| {
        reason(o) == Some("Recovering")
    })
    .await;

    fake.stop().await;
    assert!(fake.delete("gpunodes", None, "gpu-node-7"));
    let mut recut = full;
    recut
        .nvidia
        .as_mut()
        .unwrap()
        .devices
        .as_mut()
        .unwrap()
        .truncate(2);
    *node.manifest.lock().unwrap() = Some(recut);
    write_state(root.path(), json!({"state": "ready", "step": "verify"}));
    tokio::time::sleep(Duration::from_secs(3)).await;
    fake.start_again().await.unwrap();

    let back = Instant::now();
    until(
        &fake,
        Duration::from_secs(20),
        "caught up after the restart",
        |o| devices(o) == 2 && reason(o) == Some("Ready"),
    )
    .await;
    assert!(back.elapsed() < LONG / 3, "well before the interval");
    running.stop().await;
}

/// While the API server is down, rounds come at the backoff's pace: a few in five seconds,
/// starting when the watch is cut, not one per interval and not a hot loop.
#[tokio::test]
async fn rounds_while_the_api_server_is_down_are_paced_by_the_backoff() {
    let fake = FakeApiServer::start().await.unwrap();
    let root = tempfile::tempdir().unwrap();
    let node = Node::default();
    *node.manifest.lock().unwrap() = Some(manifest("webhook-store/nodes/gpu-node-7.yaml", "t0"));
    let running = run(publisher_every(&fake, root.path(), &node, LONG, None));
    until(&fake, Duration::from_secs(20), "first publish", |_| true).await;
    let captures = || *node.captures.lock().unwrap();
    let before = captures();

    fake.stop().await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let during = captures() - before;
    // The watch's cut starts one round; the backoff (1 s, 2 s, 4 s ..., each up to twice that)
    // allows two to four more in five seconds.
    assert!((2..10).contains(&during), "{during} rounds in a 5 s outage");
    fake.start_again().await.unwrap();
    running.stop().await;
}

/// A stop while the API server is down, in the middle of a backoff wait, ends `run` at once.
#[tokio::test]
async fn a_stop_while_the_api_server_is_down_ends_run_at_once() {
    let fake = FakeApiServer::start().await.unwrap();
    let root = tempfile::tempdir().unwrap();
    let node = Node::default();
    *node.manifest.lock().unwrap() = Some(manifest("webhook-store/nodes/gpu-node-7.yaml", "t0"));
    let running = run(publisher_every(&fake, root.path(), &node, LONG, None));
    until(&fake, Duration::from_secs(20), "first publish", |_| true).await;
    fake.stop().await;
    // A round failed on the cut watch; the next waits at least a second.
    let deadline = Instant::now() + Duration::from_secs(20);
    while *node.captures.lock().unwrap() < 2 {
        assert!(Instant::now() < deadline, "no round after the cut");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    running.stop().await;
}

/// A `GpuNode` deleted while the server is up is put back at once, through the watch, not at
/// the next round a minute later.
#[tokio::test]
async fn a_gpu_node_deleted_between_rounds_is_applied_again_at_once() {
    let fake = FakeApiServer::start().await.unwrap();
    let root = tempfile::tempdir().unwrap();
    let node = Node::default();
    *node.manifest.lock().unwrap() = Some(manifest("webhook-store/nodes/gpu-node-7.yaml", "t0"));
    let running = run(publisher_every(&fake, root.path(), &node, LONG, None));
    until(&fake, Duration::from_secs(20), "first publish", |_| true).await;
    // The watch has listed the object before it is deleted, so the delete is news to it.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !fake.requests().iter().any(Recorded::is_watch) {
        assert!(
            Instant::now() < deadline,
            "the publisher never watched its GpuNode"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let watch = fake.requests().into_iter().find(Recorded::is_watch).unwrap();
    assert_eq!(
        watch.query.get("fieldSelector").map(String::as_str),
        Some("metadata.name=gpu-node-7"),
        "one object watched"
    );
    let first_uid = fake.get("gpunodes", None, "gpu-node-7").unwrap()["metadata"]["uid"].clone();
    assert!(fake.delete("gpunodes", None, "gpu-node-7"));
    until(&fake, Duration::from_secs(20), "applied again", |o| {
        o["metadata"]["uid"] != first_uid
    })
    .await;
    assert_eq!(
        patches(&fake).len(),
        2,
        "one apply at the start, one after the delete"
    );
    running.stop().await;
}

/// A restarted API server refuses requests (`403`) for a moment while its authorizer loads
/// (measured on kube-apiserver v1.36.2): a watch refused so is retried, not given up, and
/// then answers a deletion at once, well before the next round.
#[tokio::test]
async fn a_watch_refused_for_a_moment_is_retried_and_then_answers_a_deletion() {
    let fake = FakeApiServer::start().await.unwrap();
    let root = tempfile::tempdir().unwrap();
    let node = Node::default();
    *node.manifest.lock().unwrap() = Some(manifest("webhook-store/nodes/gpu-node-7.yaml", "t0"));
    let running = run(publisher_every(&fake, root.path(), &node, LONG, None));
    until(&fake, Duration::from_secs(20), "first publish", |_| true).await;
    let watches = || fake.requests().iter().filter(|r| r.is_watch()).count();
    let deadline = Instant::now() + Duration::from_secs(20);
    while watches() == 0 {
        assert!(
            Instant::now() < deadline,
            "the publisher never watched its GpuNode"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The watch ends (as at a server's watch timeout: no error, no round) and its next two
    // tries are refused; rounds are not.
    fake.fail_next_watch("gpunodes", 403);
    fake.fail_next_watch("gpunodes", 403);
    let before = watches();
    fake.drop_watches("gpunodes");
    let deadline = Instant::now() + Duration::from_secs(30);
    while watches() < before + 3 {
        assert!(Instant::now() < deadline, "the refused watch was not tried again");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let first_uid = fake.get("gpunodes", None, "gpu-node-7").unwrap()["metadata"]["uid"].clone();
    assert!(fake.delete("gpunodes", None, "gpu-node-7"));
    until(
        &fake,
        Duration::from_secs(10),
        "applied again by the watch, not the 60 s round",
        |o| o["metadata"]["uid"] != first_uid,
    )
    .await;
    running.stop().await;
}
