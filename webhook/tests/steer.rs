//! Steering (`POST /mutate`) in process, over a recorded restore pod: which pods are steered,
//! the JSON patch each gets (pinned), what that patch makes of the pod once applied, and that
//! no answer ever refuses.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::Pod;
use miggate_webhook::server::{AppState, admission_service};
use rstest::rstest;
use serde_json::{Value, json};
use support::{recorded_store, testdata};
use tower::ServiceExt;

mod support;

fn state() -> Arc<AppState> {
    let state = Arc::new(AppState::new(Arc::new(recorded_store())));
    state.ready.store(true, Ordering::Release);
    state
}

/// The recorded restore pod's review, its pod edited by `edit`.
fn review(edit: impl Fn(&mut Value)) -> Value {
    let mut review: Value =
        serde_json::from_str(&testdata("admission/pod-create-restore-allowed.json")).unwrap();
    edit(&mut review["request"]["object"]);
    review
}

fn asking(pod: &mut Value) {
    pod["metadata"]["annotations"]["miggate.io/steer"] = json!("true");
}

async fn mutate(body: Value) -> (StatusCode, Value) {
    let req = Request::post("/mutate")
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let resp = admission_service(state()).oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// The response's JSON patch, decoded; `None` when there is none. kube writes the patch's
/// bytes as a JSON array of numbers, which the API server's decoder reads as `[]byte` (checked
/// on a real one: the pod was stored patched).
fn patch_of(response: &Value) -> Option<Value> {
    let bytes: Vec<u8> = serde_json::from_value(response["response"].get("patch")?.clone()).unwrap();
    assert_eq!(response["response"]["patchType"], "JSONPatch");
    Some(serde_json::from_slice(&bytes).unwrap())
}

/// The pod after the patch, as the API server would store it.
fn patched(pod: &Value, patch: &Value) -> Pod {
    let mut pod = pod.clone();
    let patch: json_patch::Patch = serde_json::from_value(patch.clone()).unwrap();
    json_patch::patch(&mut pod, &patch).unwrap();
    serde_json::from_value(pod).unwrap()
}

/// The required node selector terms, as `key op values` lines per term.
fn terms(pod: &Pod) -> Vec<Vec<String>> {
    pod.spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| n.required_during_scheduling_ignored_during_execution.as_ref())
        .map(|r| {
            r.node_selector_terms
                .iter()
                .map(|t| {
                    t.match_expressions
                        .iter()
                        .flatten()
                        .map(|e| {
                            format!(
                                "{} {} {}",
                                e.key,
                                e.operator,
                                e.values.clone().unwrap_or_default().join(",")
                            )
                        })
                        .collect()
                })
                .collect()
        })
        .unwrap_or_default()
}

fn steered_terms() -> Vec<Vec<String>> {
    let product = "nvidia.com/gpu.product In NVIDIA-H100-80GB-HBM3,NVIDIA-H100-80GB-HBM3-MIG-3g.40gb";
    let arch = "kubernetes.io/arch In amd64";
    vec![
        vec![
            product.to_string(),
            arch.to_string(),
            "nvidia.com/cuda.driver-version.major In 580".to_string(),
        ],
        vec![
            product.to_string(),
            arch.to_string(),
            "nvidia.com/cuda.driver.major In 580".to_string(),
        ],
    ]
}

#[tokio::test]
async fn a_restore_pod_that_asks_gets_node_affinity_on_gfd_labels() {
    let review = review(asking);
    let (status, body) = mutate(review.clone()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["response"]["allowed"], true);
    assert_eq!(body["response"]["uid"], review["request"]["uid"]);
    let patch = patch_of(&body).unwrap_or_else(|| panic!("no patch: {body}"));
    insta::assert_yaml_snapshot!(patch);
    let pod = patched(&review["request"]["object"], &patch);
    assert_eq!(terms(&pod), steered_terms());
    let described = &pod.metadata.annotations.as_ref().unwrap()["miggate.io/steered"];
    assert_eq!(body["response"]["auditAnnotations"]["steered"], json!(described));
    assert_eq!(
        described,
        "nvidia.com/gpu.product in (NVIDIA-H100-80GB-HBM3, NVIDIA-H100-80GB-HBM3-MIG-3g.40gb), kubernetes.io/arch in (amd64), nvidia.com/cuda.driver-version.major|nvidia.com/cuda.driver.major in (580)"
    );
}

#[tokio::test]
async fn the_pods_own_node_affinity_is_kept_and_narrowed() {
    let review = review(|pod| {
        asking(pod);
        pod["spec"]["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}]},
            {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["b"]}]},
        ]}}});
    });
    let (_, body) = mutate(review.clone()).await;
    let patch = patch_of(&body).unwrap();
    assert_eq!(patch[0]["op"], "replace");
    let pod = patched(&review["request"]["object"], &patch);
    // Each of the pod's alternatives, with each driver label: (a or b) and what the checkpoint needs.
    let mut expected = Vec::new();
    for zone in ["a", "b"] {
        for mut term in steered_terms() {
            term.insert(0, format!("topology.kubernetes.io/zone In {zone}"));
            expected.push(term);
        }
    }
    assert_eq!(terms(&pod), expected);
}

#[tokio::test]
async fn an_affinity_without_node_affinity_gains_one() {
    let review = review(|pod| {
        asking(pod);
        pod["spec"]["affinity"] = json!({"podAntiAffinity": {}});
    });
    let (_, body) = mutate(review.clone()).await;
    let patch = patch_of(&body).unwrap();
    assert_eq!(patch[0]["path"], "/spec/affinity/nodeAffinity");
    let pod = patched(&review["request"]["object"], &patch);
    assert_eq!(terms(&pod), steered_terms());
    assert!(pod.spec.unwrap().affinity.unwrap().pod_anti_affinity.is_some());
}

/// The restore pod on DRA: its restore container asks for no GPU, so it gets the checkpoint's
/// claim (the template `miggate-<checkpoint>`), and no node affinity.
#[tokio::test]
async fn a_restore_pod_asking_for_no_gpu_gets_the_checkpoint_s_claim() {
    let review = review(|pod| {
        asking(pod);
        pod["spec"]["containers"][0]["resources"]["limits"]
            .as_object_mut()
            .unwrap()
            .remove("nvidia.com/mig-3g.40gb");
    });
    let (status, body) = mutate(review.clone()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["response"]["allowed"], true);
    let patch = patch_of(&body).unwrap_or_else(|| panic!("no patch: {body}"));
    let described =
        "resourceClaims miggate-gpus from ResourceClaimTemplate miggate-vllm-ckpt, claimed by container vllm";
    assert_eq!(
        patch,
        json!([
            {"op": "add", "path": "/spec/resourceClaims", "value": [{"name": "miggate-gpus", "resourceClaimTemplateName": "miggate-vllm-ckpt"}]},
            {"op": "add", "path": "/spec/containers/0/resources/claims", "value": [{"name": "miggate-gpus"}]},
            {"op": "add", "path": "/metadata/annotations/miggate.io~1steered", "value": described},
        ])
    );
    assert_eq!(body["response"]["auditAnnotations"]["steered"], described);
    let pod = patched(&review["request"]["object"], &patch);
    let spec = pod.spec.unwrap();
    assert_eq!(
        spec.resource_claims.unwrap()[0]
            .resource_claim_template_name
            .as_deref(),
        Some("miggate-vllm-ckpt")
    );
    assert_eq!(
        spec.containers[0]
            .resources
            .as_ref()
            .unwrap()
            .claims
            .as_ref()
            .unwrap()[0]
            .name,
        "miggate-gpus"
    );
    assert!(spec.containers[1].resources.as_ref().unwrap().claims.is_none());
    assert!(spec.affinity.is_none(), "a claim, not node affinity");
}

/// A container with no `resources` at all gains them whole.
#[tokio::test]
async fn a_container_without_resources_gains_the_claim() {
    let review = review(|pod| {
        asking(pod);
        pod["spec"]["containers"][0]
            .as_object_mut()
            .unwrap()
            .remove("resources");
    });
    let (_, body) = mutate(review.clone()).await;
    let patch = patch_of(&body).unwrap();
    assert_eq!(
        patch[1],
        json!({"op": "add", "path": "/spec/containers/0/resources", "value": {"claims": [{"name": "miggate-gpus"}]}})
    );
    patched(&review["request"]["object"], &patch);
}

#[rstest]
#[case::not_asking(|_: &mut Value| {}, None)]
#[case::asking_with_another_word(|p: &mut Value| { p["metadata"]["annotations"]["miggate.io/steer"] = json!("yes"); }, None)]
#[case::already_steered(|p: &mut Value| { asking(p); p["metadata"]["annotations"]["miggate.io/steered"] = json!("x"); }, None)]
#[case::not_a_restore_pod(|p: &mut Value| { asking(p); p["metadata"]["annotations"].as_object_mut().unwrap().remove("miggate.io/restore-from"); }, None)]
#[case::missing_checkpoint(|p: &mut Value| { asking(p); p["metadata"]["annotations"]["miggate.io/restore-from"] = json!("nope"); },
    Some("miggate: not steered: checkpoint ml/nope does not exist"))]
#[case::a_dra_pod(|p: &mut Value| { asking(p); p["spec"]["resourceClaims"] = json!([{"name": "gpus", "resourceClaimTemplateName": "t"}]); },
    Some("miggate: not steered: the pod uses DRA claims; its claim steers it (miggate claim writes one from the checkpoint)"))]
#[case::a_dra_pod_asking_for_no_gpu_with_its_own_claim(|p: &mut Value| { asking(p);
    p["spec"]["containers"][0]["resources"]["limits"].as_object_mut().unwrap().remove("nvidia.com/mig-3g.40gb");
    p["spec"]["resourceClaims"] = json!([{"name": "gpus", "resourceClaimName": "mine"}]); },
    Some("miggate: not steered: the pod uses DRA claims; its claim steers it (miggate claim writes one from the checkpoint)"))]
#[tokio::test]
async fn a_pod_left_alone_is_allowed_unchanged(#[case] edit: fn(&mut Value), #[case] warning: Option<&str>) {
    let (status, body) = mutate(review(edit)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["response"]["allowed"], true, "{body}");
    assert_eq!(patch_of(&body), None, "{body}");
    let warnings: Vec<&str> = body["response"]["warnings"]
        .as_array()
        .map(|w| w.iter().map(|v| v.as_str().unwrap()).collect())
        .unwrap_or_default();
    assert_eq!(warnings, warning.into_iter().collect::<Vec<_>>());
}

#[tokio::test]
async fn a_malformed_review_is_a_bad_request_not_a_refusal() {
    let (status, body) =
        mutate(json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body, Value::String("AdmissionReview has no request\n".into()));
}
