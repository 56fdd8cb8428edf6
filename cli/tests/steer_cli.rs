//! Steering through the real `miggate webhook` binary over HTTPS (a CA made here): a restore
//! pod that asks gets its JSON patch (pinned), one whose checkpoint is missing is allowed
//! unchanged with a warning, and neither is ever refused.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use serde_json::{Value, json};
use support::{Webhook, https, testdata};

async fn mutate(webhook: &Webhook, edit: impl Fn(&mut Value)) -> (u16, Value) {
    mutate_pod(webhook, |pod| edit(&mut pod["metadata"]["annotations"])).await
}

async fn mutate_pod(webhook: &Webhook, edit: impl Fn(&mut Value)) -> (u16, Value) {
    let mut review: Value = serde_json::from_str(
        &std::fs::read_to_string(testdata("admission/pod-create-restore-allowed.json")).unwrap(),
    )
    .unwrap();
    edit(&mut review["request"]["object"]);
    let resp = https(webhook)
        .post(format!("https://{}/mutate", webhook.listen))
        .header("content-type", "application/json")
        .body(review.to_string())
        .send()
        .await
        .unwrap_or_else(|e| panic!("not answered: {e}; {}", webhook.log()));
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_steers_a_pod_that_asks_and_never_refuses() {
    let webhook = Webhook::start(&[]).await;

    let (status, body) = mutate(&webhook, |a| a["miggate.io/steer"] = json!("true")).await;
    assert_eq!(status, 200);
    assert_eq!(body["response"]["allowed"], true);
    assert_eq!(body["response"]["patchType"], "JSONPatch");
    let bytes: Vec<u8> = serde_json::from_value(body["response"]["patch"].clone()).unwrap();
    let patch: Value = serde_json::from_slice(&bytes).unwrap();
    insta::assert_yaml_snapshot!("steered_patch", patch);
    assert_eq!(body["response"]["auditAnnotations"]["steered"], patch[1]["value"]);

    let (status, body) = mutate(&webhook, |a| {
        a["miggate.io/steer"] = json!("true");
        a["miggate.io/restore-from"] = json!("nope");
    })
    .await;
    assert_eq!(status, 200);
    assert_eq!(body["response"]["allowed"], true);
    assert_eq!(body["response"].get("patch"), None);
    assert_eq!(
        body["response"]["warnings"],
        json!(["miggate: not steered: checkpoint ml/nope does not exist"])
    );

    let (status, body) = mutate(&webhook, |_| {}).await;
    assert_eq!((status, &body["response"]["allowed"]), (200, &json!(true)));
    assert_eq!(body["response"].get("patch"), None);
}

/// A restore pod asking for steering whose container asks for no GPU gets the checkpoint's
/// claim through the real binary: the patch pinned, the audit annotation its description.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_gives_a_pod_asking_for_no_gpu_the_checkpoint_s_claim() {
    let webhook = Webhook::start(&[]).await;
    let (status, body) = mutate_pod(&webhook, |pod| {
        pod["metadata"]["annotations"]["miggate.io/steer"] = json!("true");
        pod["spec"]["containers"][0]["resources"]["limits"]
            .as_object_mut()
            .unwrap()
            .remove("nvidia.com/mig-3g.40gb");
    })
    .await;
    assert_eq!(status, 200);
    assert_eq!(body["response"]["allowed"], true);
    let bytes: Vec<u8> = serde_json::from_value(body["response"]["patch"].clone()).unwrap();
    let patch: Value = serde_json::from_slice(&bytes).unwrap();
    insta::assert_yaml_snapshot!("claim_patch", patch);
    assert_eq!(body["response"]["auditAnnotations"]["steered"], patch[2]["value"]);
}
