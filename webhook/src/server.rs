//! The HTTP side: the admission router (`POST /validate`, served over TLS only) and the plain
//! health router (`/healthz`, `/readyz`, `/metrics`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::time::Instant as TokioInstant;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{self as http, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use miggate_compat::escape::escape_within;

use crate::body::{BodyError, BodyLimits, read_body};
use crate::metrics::{Metrics, Outcome};
use miggate_admission::decide::{self, RefusedBy, RestorePodSelector, Verdict};
use miggate_admission::review;
use miggate_store::file_store::FileStore;

pub use crate::store::Store;

pub use crate::body::MAX_BODY_BYTES;
/// How long one admission request may take by default, well under the apiserver's 5 s
/// `timeoutSeconds` so the webhook answers before the apiserver gives up on it.
pub const DEFAULT_DEADLINE: Duration = miggate_wire::webhook::REQUEST_DEADLINE;

/// What every handler shares.
#[derive(Debug)]
pub struct AppState {
    /// Checkpoints, node inventories and restore pods.
    pub store: Store,
    /// Counters and histograms.
    pub metrics: Metrics,
    /// Set once the store is loaded and the admission listener is bound.
    pub ready: AtomicBool,
    /// The per-request deadline, from the request head to the answer (the body read included).
    pub deadline: Duration,
    /// How bodies are read: size, minimum rate, the memory budget.
    pub body: BodyLimits,
    /// The webhook's own certificates (`--tls-secret`): not ready until the API server can
    /// verify what this replica serves.
    pub certs: Option<miggate_certs::Handle>,
    /// The user names whose Bindings may carry the device map (`--binder`).
    pub binders: Vec<String>,
    /// `--restore-pod-selector`: the pods the kube store watches, and so the labels every
    /// restore pod must carry at creation.
    pub restore_pod_selector: Option<RestorePodSelector>,
}

impl AppState {
    /// State over a loaded file store, not yet ready.
    pub fn new(store: Arc<FileStore>) -> Self {
        AppState::with_store(Store::File(store), Metrics::new())
    }

    /// State over any store, with the metrics its watchers already count into; not yet ready.
    pub fn with_store(store: Store, metrics: Metrics) -> Self {
        AppState {
            store,
            metrics,
            ready: AtomicBool::new(false),
            deadline: DEFAULT_DEADLINE,
            body: BodyLimits::default(),
            certs: None,
            binders: vec![miggate_wire::webhook::DEFAULT_BINDER.to_string()],
            restore_pod_selector: None,
        }
    }
}

/// The admission service: `POST /validate`, `POST /mutate` (steering) and
/// `POST /mutate-binding` (the device map). Serve it over TLS only.
///
/// A plain service rather than a router of extractors and middleware: every request takes the
/// same path (the head's route, the body read under [`read_body`]'s limits, one handler
/// bounded by the deadline), and on a busy two-core node the per-request layers cost more
/// than the decision (measured beside a bare axum + rustls echo under wrk:
/// bench/webhook/FINDINGS.md).
pub fn admission_service(state: Arc<AppState>) -> AdmissionService {
    AdmissionService { state }
}

/// What [`admission_service`] returns: a cheap-to-clone `tower` service over any request body.
#[derive(Debug, Clone)]
pub struct AdmissionService {
    state: Arc<AppState>,
}

/// The paths the admission port serves (`/validate`, `/mutate`, `/mutate-binding`,
/// `/mutate-summary`), POST only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    Validate,
    Mutate,
    MutateBinding,
    MutateSummary,
}

impl Route {
    /// The route a request head asks for, or why there is none: 404 for another path, 405
    /// for another method.
    fn of(method: &http::Method, path: &str) -> Result<Route, StatusCode> {
        let route = match path {
            "/validate" => Route::Validate,
            "/mutate" => Route::Mutate,
            "/mutate-binding" => Route::MutateBinding,
            "/mutate-summary" => Route::MutateSummary,
            _ => return Err(StatusCode::NOT_FOUND),
        };
        if method != http::Method::POST {
            return Err(StatusCode::METHOD_NOT_ALLOWED);
        }
        Ok(route)
    }
}

/// The answer to a head with no route; a 405 says which method the path takes.
fn no_route(status: StatusCode) -> Response {
    if status == StatusCode::METHOD_NOT_ALLOWED {
        (status, [(header::ALLOW, "POST")]).into_response()
    } else {
        status.into_response()
    }
}

impl<B> tower::Service<http::Request<B>> for AdmissionService
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError> + Send,
{
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = futures::future::BoxFuture<'static, Result<Response, std::convert::Infallible>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), std::convert::Infallible>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(
        &mut self,
        req: http::Request<B>,
    ) -> futures::future::BoxFuture<'static, Result<Response, std::convert::Infallible>> {
        let state = self.state.clone();
        Box::pin(async move { Ok(admit(&state, req).await) })
    }
}

/// One admission request, bounded by the state's deadline from the arrival of its head: the
/// body is read under [`read_body`]'s limits (a body that does not arrive in time is answered
/// 408 and its connection closed), then the route's handler runs in what is left.
async fn admit<B>(state: &AppState, req: http::Request<B>) -> Response
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError> + Send,
{
    let head_at = TokioInstant::now();
    let started = head_at.into_std();
    let route = match Route::of(req.method(), req.uri().path()) {
        Ok(route) => route,
        Err(status) => return no_route(status),
    };
    let (parts, body) = req.into_parts();
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let read = match read_body(body, declared, &state.body, head_at, state.deadline).await {
        Ok(read) => read,
        Err(e) => return body_refused(state, &e, started),
    };
    let answered = {
        let body = &read.bytes;
        let mut run = std::pin::pin!(async move {
            match route {
                Route::Validate => validate(state, body, started).await,
                Route::Mutate => mutate(state, body, started),
                Route::MutateBinding => mutate_binding(state, body, started).await,
                Route::MutateSummary => mutate_summary(state, body, started),
            }
        });
        // The decision is synchronous: an answer ready at the first poll needs no timer.
        match futures::poll!(run.as_mut()) {
            std::task::Poll::Ready(response) => Ok(response),
            std::task::Poll::Pending => tokio::time::timeout_at(head_at + state.deadline, run).await,
        }
    };
    // The body's share of the budget is given back once the answer is built.
    drop(read);
    match answered {
        Ok(response) => response,
        Err(_) => {
            state.metrics.record(Outcome::Deadline, &[], started.elapsed());
            tracing::warn!(
                deadline_ms = state.deadline.as_millis() as u64,
                "admission request ran past its deadline"
            );
            deadline_response(state.deadline)
        }
    }
}

/// The health router: `/healthz`, `/readyz`, `/metrics`, plain HTTP for kubelet and Prometheus.
pub fn health_router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(state)
}

fn plain(status: StatusCode, message: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        message,
    )
        .into_response()
}

/// `POST /validate`. The body was read whole by [`admit`], under its limits (size, rate,
/// budget); the decision is synchronous and bounded by the body limit.
async fn validate(state: &AppState, body: &[u8], started: Instant) -> Response {
    let answer = match review::parse_restore(body) {
        Ok(review) => {
            settle_claims(state, &review).await;
            answer(state, &review)
        }
        Err(bad) => bad_request(bad.to_string()),
    };
    state
        .metrics
        .record(answer.outcome, &answer.refused_by, started.elapsed());
    answer.response
}

struct Answer {
    response: Response,
    outcome: Outcome,
    refused_by: Vec<RefusedBy>,
}

fn bad_request(message: String) -> Answer {
    tracing::warn!("bad admission request: {message}");
    Answer {
        response: plain(StatusCode::BAD_REQUEST, format!("{message}\n")),
        outcome: Outcome::BAD_REQUEST,
        refused_by: Vec::new(),
    }
}

/// `POST /mutate`: steering ([`miggate_admission::steer`]). Always allowed; bad input is a 400, which the
/// API server treats as a failed call (the registration's failure policy is Ignore).
fn mutate(state: &AppState, body: &[u8], started: Instant) -> Response {
    let review = match read_review(state, body, started) {
        Ok(r) => r,
        Err(response) => return *response,
    };
    let steering = state
        .store
        .with_lookup(|store| miggate_admission::steer::steer_review(&review, store));
    let outcome = Outcome::from(steering.outcome);
    if steering.outcome != miggate_admission::steer::Outcome::Ignored {
        tracing::info!(
            uid = %escape_within(&review.uid, 128),
            namespace = review.namespace.as_deref().unwrap_or(""),
            name = %escape_within(&review.name, 256),
            outcome = outcome.as_str(),
            steered = steering.response.audit_annotations.get(miggate_admission::steer::STEERED_AUDIT).map_or("", String::as_str),
            "steering"
        );
    }
    mutated(state, outcome, started, &steering.response)
}

/// The review in `body`, or the 400 answering it (counted as `bad-request`), for the mutating
/// paths, which count their own outcomes.
fn read_review<'b>(
    state: &AppState,
    body: &'b [u8],
    started: Instant,
) -> Result<review::Review<'b>, Box<Response>> {
    review::parse(body).map_err(|bad| {
        state.metrics.record(Outcome::BAD_REQUEST, &[], started.elapsed());
        Box::new(bad_request(bad.to_string()).response)
    })
}

/// How long a binding's admission waits for its pod's claims to be seen allocated: the
/// scheduler writes a claim's allocation just before it binds, and the claim's watch event
/// can arrive a moment after the binding. Well inside the deadline.
pub const CLAIM_WAIT: Duration = Duration::from_secs(1);

/// Waits (at most [`CLAIM_WAIT`]) until every claim of the restore pod a binding places (of
/// the Binding's UID) is in the kube store's cache and allocated. Returns at once for anything
/// else.
async fn settle_claims(state: &AppState, review: &review::Review<'_>) {
    let (Some(kube), Some((namespace, name))) = (state.store.kube(), review.bound_pod()) else {
        return;
    };
    let uid = review.bound_uid();
    let until = Instant::now() + CLAIM_WAIT;
    while !kube.claims_allocated(namespace, name, uid) && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `POST /mutate-binding`: the device map annotation on a DRA restore pod's Binding
/// ([`miggate_admission::device_map`]). Never refuses; a malformed review is a 400.
async fn mutate_binding(state: &AppState, body: &[u8], started: Instant) -> Response {
    let review = match read_review(state, body, started) {
        Ok(r) => r,
        Err(response) => return *response,
    };
    settle_claims(state, &review).await;
    let mapping = state
        .store
        .with_lookup(|store| miggate_admission::device_map::map_review(&review, store, &state.binders));
    let outcome = Outcome::from(mapping.outcome);
    if mapping.outcome != miggate_admission::device_map::Outcome::Ignored {
        tracing::info!(
            uid = %escape_within(&review.uid, 128),
            namespace = review.namespace.as_deref().unwrap_or(""),
            name = %escape_within(&review.name, 256),
            outcome = outcome.as_str(),
            binder = %escape_within(&review.username, 256),
            device_map = mapping.response.audit_annotations.get(miggate_admission::device_map::DEVICE_MAP_AUDIT).map_or("", String::as_str),
            "device map"
        );
    }
    mutated(state, outcome, started, &mapping.response)
}

/// `POST /mutate-summary`: a GpuCheckpoint's or GpuNode's `spec.summary` derived from its
/// manifest ([`miggate_admission::summary`]).
fn mutate_summary(state: &AppState, body: &[u8], started: Instant) -> Response {
    let review = match read_review(state, body, started) {
        Ok(r) => r,
        Err(response) => return *response,
    };
    let (response, outcome) = miggate_admission::summary::summary_review(&review);
    if outcome == miggate_admission::summary::Outcome::Written {
        tracing::info!(
            uid = %escape_within(&review.uid, 128),
            namespace = review.namespace.as_deref().unwrap_or(""),
            name = %escape_within(&review.name, 256),
            resource = %escape_within(&review.resource.resource, 64),
            outcome = outcome.as_str(),
            summary = response.audit_annotations.get(miggate_admission::summary::SUMMARY_AUDIT).map_or("", String::as_str),
            "summary"
        );
    }
    mutated(state, outcome, started, &response)
}

/// The one way a mutating handler answers: its outcome counted with the time taken, and the
/// response written.
fn mutated(
    state: &AppState,
    outcome: impl Into<Outcome>,
    started: Instant,
    response: &kube::core::admission::AdmissionResponse,
) -> Response {
    state.metrics.record(outcome, &[], started.elapsed());
    render_response(response)
}

/// The answer's JSON, or a 500 naming why it cannot be written.
fn render_response(response: &kube::core::admission::AdmissionResponse) -> Response {
    match review::render(response) {
        Ok(json) => (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], json).into_response(),
        Err(e) => plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot write AdmissionReview: {e}\n"),
        ),
    }
}

fn answer(state: &AppState, review: &review::Review<'_>) -> Answer {
    let selector = state.restore_pod_selector.as_ref();
    let decision = state
        .store
        .with_lookup(|store| decide::decide_review_with(review, store, selector));
    log_decision(review, &decision);
    let response = render_response(&decision.response);
    Answer {
        response,
        outcome: decision.verdict.into(),
        refused_by: decision.refused_by,
    }
}

/// One line per restore decided; nothing for requests not looked at (every binding in the
/// cluster passes through here).
fn log_decision(review: &review::Review<'_>, decision: &decide::Decision) {
    if decision.verdict == Verdict::Ignored {
        return;
    }
    let source = decision.inventory_source.map_or("none", |s| s.as_str());
    let what = if review.is_binding() { "binding" } else { "pod" };
    let namespace = review.namespace.as_deref().unwrap_or("");
    let name = escape_within(&review.name, 256);
    if decision.verdict == Verdict::Refused {
        tracing::info!(
            uid = %escape_within(&review.uid, 128),
            namespace,
            name = %name,
            dry_run = review.dry_run,
            refused_by = ?decision.refused_by,
            inventory = source,
            request = what,
            "refused: {}",
            decision.response.result.message
        );
    } else {
        tracing::info!(
            uid = %escape_within(&review.uid, 128),
            namespace,
            name = %name,
            verdict = decision.verdict.as_str(),
            dry_run = review.dry_run,
            inventory = source,
            request = what,
            exact_on = decision.response.audit_annotations.get(miggate_admission::allocation::EXACT_ON_AUDIT).map_or("", String::as_str),
            "restore admitted"
        );
    }
}

/// The answer to a body that was not read whole; the connection is closed after it, since
/// what is left of the body cannot be told from a next request.
fn body_refused(state: &AppState, e: &BodyError, started: Instant) -> Response {
    let (status, outcome) = match e {
        BodyError::TooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, Outcome::BAD_REQUEST),
        BodyError::Deadline { .. } | BodyError::TooSlow { .. } => {
            (StatusCode::REQUEST_TIMEOUT, Outcome::BodyTimeout)
        }
        BodyError::Busy { .. } => (StatusCode::SERVICE_UNAVAILABLE, Outcome::Busy),
        BodyError::Read(_) => (StatusCode::BAD_REQUEST, Outcome::BAD_REQUEST),
    };
    state.metrics.record(outcome, &[], started.elapsed());
    let text = e.to_string();
    let message = escape_within(&text, 1024);
    tracing::warn!(status = status.as_u16(), "bad admission request: {message}");
    let mut response = plain(status, format!("{message}\n"));
    response
        .headers_mut()
        .insert(header::CONNECTION, header::HeaderValue::from_static("close"));
    response
}

/// The answer when a request runs past its deadline: the apiserver treats it as a failed call
/// (failurePolicy decides), and the message says why.
pub fn deadline_response(deadline: Duration) -> Response {
    plain(
        StatusCode::SERVICE_UNAVAILABLE,
        format!(
            "miggate: no answer within the {} ms deadline\n",
            deadline.as_millis()
        ),
    )
}

async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    let listening = state.ready.load(Ordering::Acquire);
    let (store_ready, store) = state.store.readiness();
    let ready = listening && store_ready;
    let body = serde_json::json!({"ready": ready, "store": store});
    let (ready, body) = match &state.certs {
        None => (ready, body),
        Some(certs) => {
            let certs = certs.status();
            let mut body = body;
            let ready = ready && certs.verified;
            body["ready"] = serde_json::Value::Bool(ready);
            body["certificates"] = serde_json::to_value(&certs).unwrap_or_default();
            (ready, body)
        }
    };
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let mut text = serde_json::to_string_pretty(&body).unwrap_or_default();
    text.push('\n');
    (status, [(header::CONTENT_TYPE, "application/json")], text).into_response()
}

async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    let text = state.store.exposition(&state.metrics);
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        Body::from(text),
    )
        .into_response()
}
