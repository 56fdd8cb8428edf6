//! The Kubernetes store through API-server outages (kube-fake): an API not served yet, a
//! watch failing for a short while or past `--max-staleness`, an expired version re-listed,
//! a refused streaming list not asked again, and a whole list cut mid-body.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use kube_fake::StreamingLists;
use miggate_store::kube_store::KubeOptions;
use serde_json::{Value, json};
use support::kube::{
    Harness, binding_review, fake_with_checkpoint, fits, gpu_node, harness, node, pod, pod_review, readyz,
    short, tokio_wait, until_readyz,
};

mod support;

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
