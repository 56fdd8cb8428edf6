//! The Kubernetes store against what tenants write (kube-fake): a restore annotation naming
//! another namespace, restore pods among bloated pods with oversized values, and fat claims and
//! snapshots, each read one object at a time and kept lean.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kube_fake::{FakeApiServer, StreamingLists};
use miggate_admission::lookup::Lookup;
use miggate_store::kube_store::{KubeOptions, MAX_KEPT_ANNOTATION_BYTES};
use rstest::rstest;
use serde_json::{Value, json};
use support::kube::{
    binding_review, checkpoint, fake_with_checkpoint, fits, gpu_node, harness, peer_snapshot, pod,
    pod_review, short,
};

mod support;

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
