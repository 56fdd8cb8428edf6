//! `POST /mutate-summary`: a `GpuCheckpoint`'s or `GpuNode`'s `spec.summary` (the text
//! `kubectl get` shows in its Devices column) computed from its `spec.manifest` by
//! [`Summary::of`], the one home of that text.
//!
//! Printer columns are JSONPath and cannot count, so the text has to be stored beside the
//! manifest; but a derived field is the server's to derive, not every writer's to compute (the
//! peer's agent, an agent in Go or Python, `kubectl apply` of a hand-written object). So the
//! CRDs do not require it, miggate's own library still writes it, and this mutation writes it
//! for everyone else, replacing a summary that does not match the manifest. Failure policy
//! Ignore: where the webhook does not run, the object is accepted and its column is empty
//! (or what its writer put there). Nothing decides on the summary: every check reads
//! `spec.manifest`.

use crate::patch::{add, path};
use crate::review::{Operation, Review};
use kube::core::admission::AdmissionResponse;
use miggate_compat::GpuManifest;
use miggate_crds::Summary;
use serde::Deserialize;

/// The audit annotation a written summary carries: the profiles text.
pub const SUMMARY_AUDIT: &str = "summary";

/// How a summary review was answered, for metrics and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Not a `GpuCheckpoint` or `GpuNode` with a readable manifest: allowed unchanged (the
    /// API server's schema is the judge of the object).
    Ignored,
    /// The summary already matched the manifest.
    Kept,
    /// The summary was written (absent, or another text).
    Written,
}

impl Outcome {
    /// The label value used in metrics and logs ([`crate::outcome::Outcome`] spells it).
    pub fn as_str(self) -> &'static str {
        crate::outcome::Outcome::from(self).as_str()
    }
}

/// What the mutation reads of either kind's spec.
#[derive(Deserialize)]
struct Spec {
    manifest: GpuManifest,
    #[serde(default)]
    summary: Option<Summary>,
}

/// Answers a review of a `GpuCheckpoint` or `GpuNode` create or update: allowed always, with
/// a JSON patch setting `spec.summary` when it differs from the manifest's.
pub fn summary_review(review: &Review<'_>) -> (AdmissionResponse, Outcome) {
    let base = review.allowed();
    let ours = review.resource.group == miggate_wire::GROUP
        && matches!(&*review.resource.resource, "gpucheckpoints" | "gpunodes")
        && review.sub_resource.is_none()
        && matches!(review.operation, Operation::Create | Operation::Update);
    let spec = review
        .object
        .as_ref()
        .and_then(|o| o.spec.as_ref())
        .and_then(|s| match s {
            crate::review::Spec::Raw(raw) => raw.decode::<Spec>().ok(),
            crate::review::Spec::Pod(_) => None,
        });
    let (true, Some(spec)) = (ours, spec) else {
        return (base, Outcome::Ignored);
    };
    let summary = Summary::of(&spec.manifest);
    if spec.summary.as_ref() == Some(&summary) {
        return (base, Outcome::Kept);
    }
    let shown = summary.profiles.clone().unwrap_or_default();
    // `add` on an object member replaces it when present (RFC 6902 §4.1).
    let Ok(value) = serde_json::to_value(&summary) else {
        // A summary serializes to JSON always; were it not to, the object still goes through.
        return (base, Outcome::Ignored);
    };
    let ops = vec![add(path(["spec", "summary"]), value)];
    match crate::review::patched(&base, ops, SUMMARY_AUDIT, shown) {
        Ok(response) => (response, Outcome::Written),
        // A summary serializes to JSON always; were it not to, the object still goes through.
        Err(_) => (base, Outcome::Ignored),
    }
}

impl From<crate::summary::Outcome> for crate::outcome::Outcome {
    fn from(outcome: crate::summary::Outcome) -> Self {
        use crate::summary::Outcome as Summary;
        match outcome {
            Summary::Ignored => crate::outcome::Outcome::SummaryIgnored,
            Summary::Kept => crate::outcome::Outcome::SummaryKept,
            Summary::Written => crate::outcome::Outcome::SummaryWritten,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::{Value, json};

    fn review(group: &str, resource: &str, operation: &str, spec: Value) -> String {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "u-1", "kind": {"group": group, "version": "v1alpha1", "kind": "GpuCheckpoint"},
            "resource": {"group": group, "version": "v1alpha1", "resource": resource},
            "name": "c", "namespace": "ml", "operation": operation, "userInfo": {"username": "agent"},
            "object": {"apiVersion": format!("{group}/v1alpha1"), "kind": "GpuCheckpoint",
                "metadata": {"name": "c", "namespace": "ml"}, "spec": spec}}})
        .to_string()
    }

    fn manifest() -> Value {
        let slice = |n: u32, p: &str| {
            json!({"uuid": format!("MIG-00000000-0000-5000-8000-00000000000{n}"),
                "parentUuid": "GPU-00000000-0000-4000-8000-000000000000",
                "productName": "NVIDIA H100 80GB HBM3", "migProfile": p})
        };
        json!({"nvidia": {"driverVersion": "580.82.07", "devices": [slice(1, "3g.40gb"), slice(2, "3g.40gb"), slice(3, "1g.10gb")]}})
    }

    fn patch_of(response: &AdmissionResponse) -> Option<Value> {
        response
            .patch
            .as_ref()
            .map(|p| serde_json::from_slice(p).unwrap())
    }

    #[rstest]
    #[case::created_without_one("miggate.io", "gpucheckpoints", "CREATE", None, Outcome::Written)]
    #[case::node_updated_without_one("miggate.io", "gpunodes", "UPDATE", None, Outcome::Written)]
    #[case::a_wrong_one_replaced(
        "miggate.io",
        "gpucheckpoints",
        "CREATE",
        Some(json!({"profiles": "7g.80gb x8"})),
        Outcome::Written
    )]
    #[case::the_right_one_kept(
        "miggate.io",
        "gpucheckpoints",
        "CREATE",
        Some(json!({"model": "NVIDIA H100 80GB HBM3", "profiles": "1g.10gb x1, 3g.40gb x2", "driver": "580.82.07"})),
        Outcome::Kept
    )]
    #[case::another_group("example.com", "gpucheckpoints", "CREATE", None, Outcome::Ignored)]
    #[case::another_resource("miggate.io", "widgets", "CREATE", None, Outcome::Ignored)]
    #[case::a_delete("miggate.io", "gpucheckpoints", "DELETE", None, Outcome::Ignored)]
    fn the_summary_is_derived_from_the_manifest(
        #[case] group: &str,
        #[case] resource: &str,
        #[case] operation: &str,
        #[case] summary: Option<Value>,
        #[case] outcome: Outcome,
    ) {
        let mut spec = json!({"manifest": manifest()});
        if let Some(s) = summary {
            spec["summary"] = s;
        }
        let body = review(group, resource, operation, spec);
        let parsed = crate::review::parse(body.as_bytes()).unwrap();
        let (response, got) = summary_review(&parsed);
        assert!(response.allowed);
        assert_eq!(got, outcome);
        match outcome {
            Outcome::Written => {
                assert_eq!(
                    patch_of(&response),
                    Some(json!([{"op": "add", "path": "/spec/summary", "value":
                        {"model": "NVIDIA H100 80GB HBM3", "profiles": "1g.10gb x1, 3g.40gb x2", "driver": "580.82.07"}}]))
                );
                assert_eq!(
                    response.audit_annotations.get(SUMMARY_AUDIT).map(String::as_str),
                    Some("1g.10gb x1, 3g.40gb x2")
                );
            }
            _ => assert_eq!(patch_of(&response), None),
        }
    }

    #[test]
    fn an_unreadable_manifest_is_left_to_the_api_server() {
        let body = review(
            "miggate.io",
            "gpucheckpoints",
            "CREATE",
            json!({"manifest": {"nvidia": {"devices": "not a list"}}}),
        );
        let parsed = crate::review::parse(body.as_bytes()).unwrap();
        let (response, outcome) = summary_review(&parsed);
        assert!(response.allowed);
        assert_eq!((outcome, patch_of(&response)), (Outcome::Ignored, None));
    }
}
