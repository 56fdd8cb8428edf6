//! The Go peer's restore pods (`nvidia.com/restore-from`) through the real `miggate webhook`
//! binary over HTTPS, its caches filled from kube-fake taught the peer's kinds: a PodSnapshot
//! bound to a PodSnapshotContent that records 2 x 3g.40gb + 1 x 1g.10gb of an H100 is compared
//! per destination container at creation and against the node at binding; a misspelled name is
//! refused; a snapshot not bound, a content without `status.source` and the peer's skip are
//! admitted with warnings; a content change decides the next binding.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::peer::{content, full_source, gpu_node, snapshot};
use support::{Webhook, post_review};

fn container(name: &str, memory: &str) -> Value {
    json!({"name": name, "image": "vllm:1", "resources": {"limits": {"memory": memory, "cpu": "8",
        "nvidia.com/mig-3g.40gb": "2", "nvidia.com/mig-1g.10gb": "1"}}})
}

fn pod(name: &str, annotations: Value, containers: Vec<Value>, node: Option<&str>) -> Value {
    let mut spec = json!({"containers": containers});
    if let Some(n) = node {
        spec["nodeName"] = json!(n);
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ml", "annotations": annotations}, "spec": spec})
}

fn create_review(object: &Value) -> String {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "00000000-0000-4000-8000-000000000029",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "name": object["metadata"]["name"], "namespace": "ml", "operation": "CREATE",
        "userInfo": {"username": "tenant"}, "object": object}})
    .to_string()
}

fn binding_review(pod: &str, node: &str) -> String {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "00000000-0000-4000-8000-000000000030",
        "kind": {"group": "", "version": "v1", "kind": "Binding"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "subResource": "binding",
        "name": pod, "namespace": "ml", "operation": "CREATE", "userInfo": {"username": "system:kube-scheduler"},
        "object": {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod, "namespace": "ml"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}}}})
    .to_string()
}

async fn post(webhook: &Webhook, body: String) -> Value {
    post_review(webhook, "/validate", body).await
}

fn message(r: &Value) -> String {
    r["status"]["message"].as_str().unwrap_or_default().to_string()
}

fn warnings(r: &Value) -> String {
    r["warnings"]
        .as_array()
        .map(|w| format!("{w:?}"))
        .unwrap_or_default()
}

fn peer(snapshot: &str) -> Value {
    json!({"nvidia.com/restore-from": snapshot})
}

async fn start(fake: &kube_fake::FakeApiServer) -> (Webhook, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, fake.kubeconfig()).unwrap();
    (Webhook::start_kube(&kubeconfig, &[]).await, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_gates_the_peer_s_restore_pods() {
    let fake = std::sync::Arc::new(kube_fake::FakeApiServer::start().await.unwrap());
    apply_snapshots_and_nodes(&fake);
    let (webhook, _dir) = start(&fake).await;

    pods_are_compared_with_their_node_at_creation(&webhook).await;
    memory_is_compared_per_destination_container(&webhook).await;
    misspelled_and_invalid_names_are_refused(&webhook).await;
    missing_facts_and_the_peer_s_skip_admit_with_a_warning(&webhook).await;
    bindings_are_decided_from_the_pod_cache_and_the_content(&fake, &webhook).await;
}

/// Two nodes (one short of the 1g.10gb), and the peer's snapshots: one bound to a whole content,
/// one not bound, one whose content has no `status.source`, one whose source names no pod.
fn apply_snapshots_and_nodes(fake: &kube_fake::FakeApiServer) {
    fake.apply(gpu_node("node-big", &["3g.40gb", "3g.40gb", "1g.10gb"]));
    fake.apply(gpu_node("node-short", &["3g.40gb", "3g.40gb"]));
    fake.apply(snapshot("vllm-snap", Some("vllm-content")));
    fake.apply(content("vllm-content", "vllm-snap", Some(full_source())));
    fake.apply(snapshot("pending", None));
    fake.apply(snapshot("old", Some("old-content")));
    fake.apply(content("old-content", "old", None));
    fake.apply(snapshot("node-only", Some("node-only-content")));
    fake.apply(content(
        "node-only-content",
        "node-only",
        Some(json!({"node": {"name": "node-big"}})),
    ));
}

/// At creation: fits on the big node, refused on the short one.
async fn pods_are_compared_with_their_node_at_creation(webhook: &Webhook) {
    let ok = post(
        webhook,
        create_review(&pod(
            "a",
            peer("vllm-snap"),
            vec![container("engine", "32Gi")],
            Some("node-big"),
        )),
    )
    .await;
    assert_eq!(ok["allowed"], true, "{ok}");
    let r = post(
        webhook,
        create_review(&pod(
            "b",
            peer("vllm-snap"),
            vec![container("engine", "32Gi")],
            Some("node-short"),
        )),
    )
    .await;
    assert_eq!(r["allowed"], false, "{r}");
    assert!(
        message(&r).contains("checkpoint ml/vllm-snap (PodSnapshot) cannot be restored on node node-short"),
        "{r}"
    );
    assert!(message(&r).contains("engine: "), "{r}");
    assert!(message(&r).contains("mig-profile"), "{r}");
}

/// Half the memory, named by destination container; every destination of the map checked.
async fn memory_is_compared_per_destination_container(webhook: &Webhook) {
    let r = post(
        webhook,
        create_review(&pod(
            "c",
            peer("vllm-snap"),
            vec![container("engine", "16Gi")],
            None,
        )),
    )
    .await;
    assert_eq!(r["allowed"], false, "{r}");
    assert!(
        message(&r)
            .ends_with("cannot be restored in this pod: engine: memory-limit: source 32Gi, target 16Gi"),
        "{r}"
    );
    let mapped = json!({"nvidia.com/restore-from": "vllm-snap", "nvidia.com/restore-container-map": "engine=engine-0,engine=engine-1"});
    let r = post(
        webhook,
        create_review(&pod(
            "d",
            mapped.clone(),
            vec![container("engine-0", "32Gi"), container("engine-1", "16Gi")],
            None,
        )),
    )
    .await;
    assert_eq!(r["allowed"], false, "{r}");
    assert!(
        message(&r).ends_with(": engine-1: memory-limit: source 32Gi, target 16Gi"),
        "{r}"
    );
    let r = post(
        webhook,
        create_review(&pod("e", mapped, vec![container("engine-0", "32Gi")], None)),
    )
    .await;
    assert!(message(&r).contains("restores into container `engine-1` (nvidia.com/restore-container-map), which pod ml/e does not have"), "{r}");
    let bad_map =
        json!({"nvidia.com/restore-from": "vllm-snap", "nvidia.com/restore-container-map": "other=engine"});
    let r = post(
        webhook,
        create_review(&pod("f", bad_map, vec![container("engine", "32Gi")], None)),
    )
    .await;
    assert!(
        message(&r)
            .contains("restore source container \"other\" does not match captured container \"engine\""),
        "{r}"
    );
}

/// A misspelled snapshot is refused; an invalid name in the peer's words.
async fn misspelled_and_invalid_names_are_refused(webhook: &Webhook) {
    let r = post(
        webhook,
        create_review(&pod(
            "g",
            peer("vllm-snp"),
            vec![container("engine", "32Gi")],
            None,
        )),
    )
    .await;
    assert_eq!(r["allowed"], false, "{r}");
    assert!(
        message(&r)
            .contains("PodSnapshot ml/vllm-snp named by annotation nvidia.com/restore-from does not exist"),
        "{r}"
    );
    let r = post(
        webhook,
        create_review(&pod(
            "h",
            peer("Vllm_Snap"),
            vec![container("engine", "32Gi")],
            None,
        )),
    )
    .await;
    assert!(message(&r).contains("is not a valid PodSnapshot name"), "{r}");
    let both = json!({"nvidia.com/restore-from": "vllm-snap", "miggate.io/restore-from": "x"});
    let r = post(
        webhook,
        create_review(&pod("i", both, vec![container("engine", "32Gi")], None)),
    )
    .await;
    assert!(message(&r).contains("names a checkpoint twice"), "{r}");
}

/// Missing facts admit with a warning; the peer's skip waives on a boolean only.
async fn missing_facts_and_the_peer_s_skip_admit_with_a_warning(webhook: &Webhook) {
    // Missing facts admit with a warning.
    for (name, words) in [
        ("pending", "is not bound to a PodSnapshotContent yet"),
        ("old", "PodSnapshotContent old-content has no status.source"),
        ("node-only", "status.source records no pod"),
    ] {
        let r = post(
            webhook,
            create_review(&pod("j", peer(name), vec![container("engine", "1Gi")], None)),
        )
        .await;
        assert_eq!(r["allowed"], true, "{name}: {r}");
        assert!(warnings(&r).contains(words), "{name}: {r}");
    }

    // The peer's skip: ParseBool true waives; `yes` does not.
    let skip =
        |v: &str| json!({"nvidia.com/restore-from": "vllm-snap", "nvidia.com/snapshot-skip-compat-check": v});
    let r = post(
        webhook,
        create_review(&pod("k", skip(" True "), vec![container("engine", "16Gi")], None)),
    )
    .await;
    assert_eq!(r["allowed"], true, "{r}");
    assert!(
        warnings(&r).contains("every check waived by nvidia.com/snapshot-skip-compat-check"),
        "{r}"
    );
    let r = post(
        webhook,
        create_review(&pod("l", skip("yes"), vec![container("engine", "16Gi")], None)),
    )
    .await;
    assert_eq!(r["allowed"], false, "{r}");
    assert!(warnings(&r).contains("is not a boolean"), "{r}");
}

/// At binding the pod cache knows the peer's pod; a content change decides the next binding.
async fn bindings_are_decided_from_the_pod_cache_and_the_content(
    fake: &kube_fake::FakeApiServer,
    webhook: &Webhook,
) {
    // At binding: the pod cache knows the peer's pod; the short node is refused.
    fake.apply(pod(
        "pending-pod",
        peer("vllm-snap"),
        vec![container("engine", "32Gi")],
        None,
    ));
    let deadline = Instant::now() + Duration::from_secs(10);
    let r = loop {
        let r = post(webhook, binding_review("pending-pod", "node-short")).await;
        if r["allowed"] == false || Instant::now() > deadline {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(r["allowed"], false, "{r}");
    assert!(
        message(&r).contains("cannot be restored on node node-short (inventory from GpuNode)"),
        "{r}"
    );
    let r = post(webhook, binding_review("pending-pod", "node-big")).await;
    assert_eq!(r["allowed"], true, "{r}");

    // A content change decides the next binding: the checkpoint now records two slices only.
    let mut two = full_source();
    two["devices"]["nvidia"]["instances"]
        .as_array_mut()
        .unwrap()
        .pop();
    fake.apply(content("vllm-content", "vllm-snap", Some(two)));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = post(webhook, binding_review("pending-pod", "node-short")).await;
        if r["allowed"] == true {
            break;
        }
        assert!(Instant::now() < deadline, "not re-decided within 10 s: {r}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_peer_s_crds_may_come_after_the_webhook() {
    let fake = std::sync::Arc::new(kube_fake::FakeApiServer::start().await.unwrap());
    fake.serve("podsnapshots", false);
    fake.serve("podsnapshotcontents", false);
    let (webhook, _dir) = start(&fake).await;
    let restore = create_review(&pod(
        "a",
        peer("vllm-snap"),
        vec![container("engine", "16Gi")],
        None,
    ));
    let r = post(&webhook, restore.clone()).await;
    assert_eq!(r["allowed"], true, "{r}");
    assert!(
        warnings(&r).contains("this cluster does not serve nvidia.com/v1alpha1 PodSnapshots"),
        "{r}"
    );

    fake.apply(snapshot("vllm-snap", Some("vllm-content")));
    fake.apply(content("vllm-content", "vllm-snap", Some(full_source())));
    fake.serve("podsnapshots", true);
    fake.serve("podsnapshotcontents", true);
    // The watch retries under its backoff: every wait under 5 s (WATCH_RETRY_MAX and jitter).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = post(&webhook, restore.clone()).await;
        if r["allowed"] == false {
            assert!(
                message(&r).contains("engine: memory-limit: source 32Gi, target 16Gi"),
                "{r}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the peer's kinds not picked up: {r}; {}",
            webhook.log()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
