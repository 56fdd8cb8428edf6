//! The admission router in process, over the recorded reviews in `testdata/admission/`: every
//! response is snapshotted (status and body), uid echoes and all.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use miggate_webhook::server::{AppState, MAX_BODY_BYTES, admission_service, health_router};
use support::recorded_store;
use tower::ServiceExt;

mod support;

fn state() -> Arc<AppState> {
    let state = Arc::new(AppState::new(Arc::new(recorded_store())));
    state.ready.store(true, Ordering::Release);
    state
}

async fn post(state: &Arc<AppState>, body: impl Into<Body>) -> (StatusCode, String) {
    let req = Request::post("/validate")
        .header("content-type", "application/json")
        .body(body.into())
        .unwrap();
    let resp = admission_service(state.clone()).oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(bytes.to_vec()).unwrap())
}

async fn get(state: &Arc<AppState>, path: &str) -> (StatusCode, String) {
    let req = Request::get(path).body(Body::empty()).unwrap();
    let resp = health_router(state.clone()).oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(bytes.to_vec()).unwrap())
}

#[derive(serde::Serialize)]
struct Snap {
    status: u16,
    body: serde_json::Value,
}

#[test]
fn recorded_reviews() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let state = state();
    insta::glob!("../../testdata/admission", "*.json", |path| {
        let text = std::fs::read_to_string(path).unwrap();
        let (status, body) = rt.block_on(post(&state, text.clone()));
        let body = serde_json::from_str(&body).unwrap_or(serde_json::Value::String(body));
        // Every answer to a review with a request echoes its uid.
        if let Ok(review) = serde_json::from_str::<serde_json::Value>(&text)
            && let Some(uid) = review.pointer("/request/uid")
            && status == StatusCode::OK
        {
            assert_eq!(body.pointer("/response/uid"), Some(uid), "{}", path.display());
        }
        insta::assert_yaml_snapshot!(Snap {
            status: status.as_u16(),
            body
        });
    });
}

/// Every admission path takes POST only; another path is not found. Neither reads the body or
/// counts as a decision.
#[rstest::rstest]
#[case::validate_get("GET", "/validate", 405)]
#[case::mutate_put("PUT", "/mutate", 405)]
#[case::device_map_get("GET", "/mutate-binding", 405)]
#[case::summary_get("GET", "/mutate-summary", 405)]
#[case::health_on_the_admission_port("GET", "/healthz", 404)]
#[case::unknown_path("POST", "/validate/extra", 404)]
#[case::root("POST", "/", 404)]
#[tokio::test]
async fn admission_routes_take_post_only(#[case] method: &str, #[case] path: &str, #[case] expected: u16) {
    let state = state();
    let req = Request::builder()
        .method(method)
        .uri(path)
        .body(Body::from("{}"))
        .unwrap();
    let resp = admission_service(state.clone()).oneshot(req).await.unwrap();
    assert_eq!(resp.status().as_u16(), expected);
    if expected == 405 {
        assert_eq!(resp.headers().get("allow").unwrap(), "POST");
    }
    let (_, metrics) = get(&state, "/metrics").await;
    assert!(
        !metrics.contains("miggate_admission_decisions_total{"),
        "{metrics}"
    );
}

#[tokio::test]
async fn oversized_body_is_413_with_a_message() {
    let state = state();
    let body = vec![b' '; MAX_BODY_BYTES + 1];
    let (status, text) = post(&state, body).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(text.contains("over the 8388608-byte limit"), "{text}");
}

#[tokio::test]
async fn empty_and_non_json_bodies_are_400_not_422() {
    let state = state();
    for body in ["", "null", "[]", "{}", "\u{1b}[2J"] {
        let (status, text) = post(&state, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body:?}: {text}");
        assert!(!text.contains('\u{1b}'), "{text}");
    }
}

#[tokio::test]
async fn health_readiness_and_metrics() {
    let state = state();
    let allowed = include_str!("../../testdata/admission/pod-create-restore-allowed.json");
    let refused = include_str!("../../testdata/admission/pod-create-restore-refused.json");
    post(&state, allowed).await;
    post(&state, refused).await;
    post(&state, "{").await;

    assert_eq!(get(&state, "/healthz").await, (StatusCode::OK, "ok\n".into()));
    let (status, ready) = get(&state, "/readyz").await;
    assert_eq!(status, StatusCode::OK, "{ready}");
    let ready: serde_json::Value = serde_json::from_str(&ready).unwrap();
    assert_eq!(ready["store"]["checkpoints"], 2);
    assert_eq!(ready["store"]["nodes"], 3);
    assert_eq!(ready["store"]["unreadable"], serde_json::json!([]));

    let (status, metrics) = get(&state, "/metrics").await;
    assert_eq!(status, StatusCode::OK);
    for line in [
        "miggate_admission_decisions_total{outcome=\"warned\"} 1",
        "miggate_admission_decisions_total{outcome=\"refused\"} 1",
        "miggate_admission_decisions_total{outcome=\"bad-request\"} 1",
        "miggate_admission_refusals_total{check=\"memory-limit\"} 1",
        "miggate_admission_refusals_total{check=\"mount\"} 1",
        "miggate_admission_duration_seconds_count 3",
        "miggate_store_objects{kind=\"node\"} 3",
        "miggate_store_problems 0",
    ] {
        assert!(metrics.contains(line), "{line} missing from\n{metrics}");
    }
    assert!(metrics.contains("miggate_store_age_seconds "), "{metrics}");

    state.ready.store(false, Ordering::Release);
    assert_eq!(get(&state, "/readyz").await.0, StatusCode::SERVICE_UNAVAILABLE);
}

#[tokio::test]
async fn a_stalled_body_is_cut_at_the_deadline() {
    let mut state = AppState::new(Arc::new(recorded_store()));
    state.deadline = std::time::Duration::from_millis(100);
    let state = Arc::new(state);
    // A body that never ends: 408, the deadline named.
    let started = std::time::Instant::now();
    let (status, text) = post(&state, Body::new(Stall)).await;
    assert_eq!(status, StatusCode::REQUEST_TIMEOUT, "{text}");
    assert_eq!(
        text,
        "AdmissionReview body not complete within the 100 ms request deadline (0 bytes received)\n"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
}

/// A request body whose next frame never comes.
struct Stall;

impl http_body::Body for Stall {
    type Data = axum::body::Bytes;
    type Error = std::convert::Infallible;
    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        std::task::Poll::Pending
    }
}

/// `--restore-pod-selector` reaches the decision from the state (as `serve` sets it from the
/// kube store's options): the recorded restore pod, which lacks the label, is refused and
/// counted by its reason.
#[tokio::test]
async fn the_restore_pod_selector_reaches_the_decision() {
    let mut state = AppState::new(Arc::new(recorded_store()));
    state.restore_pod_selector = Some("miggate.io/restore=true".parse().unwrap());
    let state = Arc::new(state);
    let review = std::fs::read_to_string(support::testdata_path(
        "admission/pod-create-restore-allowed.json",
    ))
    .unwrap();
    let (status, body) = post(&state, review).await;
    assert_eq!(status, StatusCode::OK);
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["response"]["allowed"], false, "{body}");
    assert!(
        body["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("lacks the labels of the webhook's --restore-pod-selector (miggate.io/restore=true)"),
        "{body}"
    );
    let (_, metrics) = get(&state, "/metrics").await;
    assert!(
        metrics.contains("miggate_admission_refusals_total{check=\"pod-not-selected\"} 1"),
        "{metrics}"
    );
}

/// A Binding carrying a device map the webhook does not write gets it removed through
/// `/mutate-binding`, counted as `map-removed`.
#[tokio::test]
async fn a_device_map_the_webhook_did_not_write_is_removed() {
    let state = state();
    let mut review: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(support::testdata_path("admission/binding-create.json")).unwrap(),
    )
    .unwrap();
    review["request"]["object"]["metadata"]["annotations"] =
        serde_json::json!({"miggate.io/device-map": "x=y"});
    let req = Request::post("/mutate-binding")
        .header("content-type", "application/json")
        .body(Body::from(review.to_string()))
        .unwrap();
    let resp = admission_service(state.clone()).oneshot(req).await.unwrap();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(body["response"]["allowed"], true, "{body}");
    assert_eq!(body["response"]["patchType"], "JSONPatch", "{body}");
    assert_eq!(
        body["response"]["auditAnnotations"]["device-map-removed"],
        "system:kube-scheduler"
    );
    let (_, metrics) = get(&state, "/metrics").await;
    assert!(
        metrics.contains("miggate_admission_decisions_total{outcome=\"map-removed\"} 1"),
        "{metrics}"
    );
}
