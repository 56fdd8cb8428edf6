//! The kinds the fake serves by plural, the `reason` the real API server gives with each
//! status code, and the answers' common forms.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// The `kind` of a resource, from its plural (the resources miggate reads and writes).
pub(crate) fn kind_of(plural: &str) -> &'static str {
    match plural {
        "pods" => "Pod",
        "nodes" => "Node",
        "gpunodes" => "GpuNode",
        "gpucheckpoints" => "GpuCheckpoint",
        "resourceslices" => "ResourceSlice",
        "resourceclaims" => "ResourceClaim",
        "namespaces" => "Namespace",
        "podsnapshots" => "PodSnapshot",
        "podsnapshotcontents" => "PodSnapshotContent",
        "secrets" => "Secret",
        "validatingwebhookconfigurations" => "ValidatingWebhookConfiguration",
        "mutatingwebhookconfigurations" => "MutatingWebhookConfiguration",
        _ => "Unknown",
    }
}

/// The plural of a kind, the inverse of [`kind_of`].
pub(crate) fn plural_of(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "Pod" => "pods",
        "Node" => "nodes",
        "GpuNode" => "gpunodes",
        "GpuCheckpoint" => "gpucheckpoints",
        "ResourceSlice" => "resourceslices",
        "ResourceClaim" => "resourceclaims",
        "Namespace" => "namespaces",
        "PodSnapshot" => "podsnapshots",
        "PodSnapshotContent" => "podsnapshotcontents",
        "Secret" => "secrets",
        "ValidatingWebhookConfiguration" => "validatingwebhookconfigurations",
        "MutatingWebhookConfiguration" => "mutatingwebhookconfigurations",
        _ => return None,
    })
}

/// The `reason` a real API server gives with `code`, so clients that read the reason
/// (kube's `Status::is_forbidden`, `is_not_found`) classify an injected failure as the real one.
pub(crate) fn reason_of(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        409 => "Conflict",
        410 => "Expired",
        422 => "Invalid",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "InternalError",
    }
}

/// An error `Status` of `code`, as the real server writes one.
pub(crate) fn status(code: u16, reason: &str, message: &str) -> Response {
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code,
    });
    let code = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// `body` as JSON with `code`.
pub(crate) fn json_response(code: StatusCode, body: &Value) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// The answer for a path the server does not serve.
pub(crate) fn not_found() -> Response {
    status(
        404,
        "NotFound",
        "the server could not find the requested resource",
    )
}
