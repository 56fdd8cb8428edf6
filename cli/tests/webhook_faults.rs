//! Faults under the real `miggate webhook --store kube` binary, its caches fed by kube-fake:
//! an API server restart (with a change made while it was down), an outage longer than
//! `--max-staleness`, an expired watch whose re-list is cut, and slow lists. What each claims:
//! the webhook answers from its caches through a short outage, says how stale they are, is
//! ready again within seconds of the server, and decides on changes made after it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::peer::{content, full_source, gpu_node, snapshot};
use support::{Webhook, plain, post_review};

const FITS: [&str; 3] = ["3g.40gb", "3g.40gb", "1g.10gb"];
const SHORT: [&str; 1] = ["1g.10gb"];

fn restore_pod(node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "vllm-restore", "namespace": "ml",
        "annotations": {"nvidia.com/restore-from": "snap"}},
        "spec": {"nodeName": node, "containers": [{"name": "engine", "image": "vllm:1", "resources": {"limits": {
            "memory": "32Gi", "cpu": "8", "nvidia.com/mig-3g.40gb": "2", "nvidia.com/mig-1g.10gb": "1"}}}]}})
}

fn create_review(object: &Value) -> String {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "00000000-0000-4000-8000-000000000032",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "name": object["metadata"]["name"], "namespace": "ml", "operation": "CREATE",
        "userInfo": {"username": "tenant"}, "object": object}})
    .to_string()
}

/// A fake holding a bound peer snapshot whose source fits `node-big` as `profiles`.
async fn cluster(profiles: &[&str]) -> kube_fake::FakeApiServer {
    let fake = kube_fake::FakeApiServer::start().await.unwrap();
    fake.apply(snapshot("snap", Some("content")));
    fake.apply(content("content", "snap", Some(full_source())));
    fake.apply(gpu_node("node-big", profiles));
    fake
}

async fn start(fake: &kube_fake::FakeApiServer, flags: &[&str]) -> (Webhook, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, fake.kubeconfig()).unwrap();
    (Webhook::start_kube(&kubeconfig, flags).await, dir)
}

async fn allowed(webhook: &Webhook) -> (bool, String) {
    let r = post_review(webhook, "/validate", create_review(&restore_pod("node-big"))).await;
    (
        r["allowed"] == json!(true),
        r["status"]["message"].as_str().unwrap_or_default().to_string(),
    )
}

async fn readyz(webhook: &Webhook) -> (u16, Value) {
    let r = plain()
        .get(format!("http://{}/readyz", webhook.health))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap())
}

/// Every cache listed and current (`staleSeconds` 0).
fn current(body: &Value) -> bool {
    body["store"]["kube"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["synced"] == json!(true) && c["staleSeconds"] == json!(0.0))
}

fn stale_of(body: &Value, kind: &str) -> f64 {
    let cache = body["store"]["kube"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == json!(kind))
        .unwrap();
    cache["staleSeconds"].as_f64().unwrap()
}

/// Polls `f` every 50 ms until it is `Some`, for up to `within`.
async fn eventually<T, F: std::future::Future<Output = Option<T>>>(
    webhook: &Webhook,
    within: Duration,
    what: &str,
    mut f: impl FnMut() -> F,
) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(t) = f().await {
            return t;
        }
        assert!(
            Instant::now() < deadline,
            "{what} not within {within:?}; log:\n{}",
            webhook.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits up to `within` for the restore onto node-big to be refused for node-big's change.
async fn refused_for_the_change(webhook: &Webhook, within: Duration) {
    let message = eventually(webhook, within, "the change decided", || async {
        let (ok, message) = allowed(webhook).await;
        (!ok).then_some(message)
    })
    .await;
    assert!(
        message.contains("cannot be restored on node node-big"),
        "{message}"
    );
}

/// Waits up to `within` for `/readyz` to be 200 with every cache synced and current; its body.
async fn every_cache_current(webhook: &Webhook, within: Duration) -> Value {
    eventually(webhook, within, "every cache current", || async {
        let (status, body) = readyz(webhook).await;
        (status == 200 && current(&body)).then_some(body)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_server_restart_keeps_it_ready_and_decisions_follow_a_change_made_meanwhile() {
    let fake = cluster(&FITS).await;
    let (webhook, _dir) = start(&fake, &[]).await;
    assert!(allowed(&webhook).await.0);

    // Down for 3 s: every watch is cut and every reconnect refused.
    fake.stop().await;
    let down = Instant::now();
    let mut stale = 0.0;
    while down.elapsed() < Duration::from_secs(3) {
        let (status, body) = readyz(&webhook).await;
        assert_eq!(status, 200, "ready through a short outage: {body}");
        stale = stale_of(&body, "GpuNode");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(stale >= 2.0, "says how stale: {stale}");
    // Decided from the caches meanwhile.
    assert!(
        allowed(&webhook).await.0,
        "answered from the caches while the server is down"
    );

    // Written while it was down (through another replica): node-big lost its 3g.40gb slices.
    fake.apply(gpu_node("node-big", &SHORT));
    fake.start_again().await.unwrap();
    let back = Instant::now();
    // The restarted server has no history: every watch is answered 410, every cache re-lists.
    refused_for_the_change(&webhook, Duration::from_secs(10)).await;
    let body = every_cache_current(&webhook, Duration::from_secs(10)).await;
    let relists = body["store"]["kube"][1]["lists"].as_u64().unwrap();
    assert!(relists >= 2, "GpuNode re-listed after the restart: {body}");
    eprintln!("refused {:?} after the restart", back.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_past_max_staleness_is_not_ready_then_ready_within_seconds_of_the_server() {
    let fake = cluster(&FITS).await;
    let (webhook, _dir) = start(&fake, &["--max-staleness=2s"]).await;
    fake.stop().await;
    let body = eventually(&webhook, Duration::from_secs(20), "not ready", || async {
        let (status, body) = readyz(&webhook).await;
        (status == 503).then_some(body)
    })
    .await;
    let failing: Vec<&Value> = body["store"]["kube"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["failing"] == json!(true))
        .collect();
    assert!(!failing.is_empty(), "{body}");
    let (ok, message) = allowed(&webhook).await;
    assert!(!ok);
    assert!(
        message.contains("cache has been behind the API server for")
            && message.contains("--max-staleness is 2 s"),
        "{message}"
    );

    fake.start_again().await.unwrap();
    let back = Instant::now();
    eventually(&webhook, Duration::from_secs(10), "ready again", || async {
        (readyz(&webhook).await.0 == 200).then_some(())
    })
    .await;
    assert!(allowed(&webhook).await.0, "deciding again");
    eprintln!("ready {:?} after the server", back.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_watch_whose_relist_is_cut_relists_again_and_follows_the_change() {
    let fake = cluster(&FITS).await;
    let (webhook, _dir) = start(&fake, &[]).await;
    fake.break_next_list("gpunodes");
    fake.expire("gpunodes");
    // The watch is answered 410 and the re-list cut: two errors, and a retry after a backoff.
    let body = eventually(&webhook, Duration::from_secs(10), "the cut list", || async {
        let (_, body) = readyz(&webhook).await;
        (body["store"]["kube"][1]["errors"].as_u64() == Some(2)).then_some(body)
    })
    .await;
    assert!(
        stale_of(&body, "GpuNode") > 0.0,
        "behind until a list completes: {body}"
    );
    // Changed before the retry: only a completed re-list can bring it.
    fake.apply(gpu_node("node-big", &SHORT));
    refused_for_the_change(&webhook, Duration::from_secs(15)).await;
    let body = every_cache_current(&webhook, Duration::from_secs(10)).await;
    assert!(body["store"]["kube"][1]["lists"].as_u64().unwrap() >= 3, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_a_slow_relist_the_old_cache_answers_and_says_it_is_behind() {
    let fake = cluster(&FITS).await;
    let (webhook, _dir) = start(&fake, &[]).await;
    fake.delay_lists("gpunodes", Duration::from_secs(4));
    fake.expire("gpunodes");
    // Re-listing: behind, still ready, still deciding from what it held.
    eventually(&webhook, Duration::from_secs(5), "behind", || async {
        let (status, body) = readyz(&webhook).await;
        (status == 200 && stale_of(&body, "GpuNode") > 0.5).then_some(())
    })
    .await;
    fake.apply(gpu_node("node-big", &SHORT));
    assert!(allowed(&webhook).await.0, "the list has not answered yet");
    // The list answers with the state after its wait: the change is decided, the cache current.
    refused_for_the_change(&webhook, Duration::from_secs(15)).await;
    fake.delay_lists("gpunodes", Duration::ZERO);
    every_cache_current(&webhook, Duration::from_secs(10)).await;
}
