//! `--restore-pod-selector` at a restore pod's creation: the pod watch sends only the pods the
//! selector selects, so a restore pod without its labels would have its binding pass
//! unchecked; it is refused at creation instead, naming the selector. Read in place and
//! through kube's types alike.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionReview};
use miggate_admission::decide::{Decision, RestorePodSelector, Verdict, decide_review_with, decide_with};
use miggate_admission::review;
use rstest::rstest;
use serde_json::{Value, json};
use support::{Fake, manifest, testdata};

mod support;

fn store() -> Fake {
    Fake::default().with_checkpoint(
        "ml/vllm-ckpt",
        manifest("webhook-store/checkpoints/ml/vllm-ckpt.yaml"),
        None,
    )
}

/// The recorded restore pod's CREATE (allowed against [`store`]), its labels `labels`
/// (`Value::Null`: none at all).
fn pod_create(labels: Value) -> Value {
    let mut review: Value =
        serde_json::from_str(&testdata("admission/pod-create-restore-allowed.json")).unwrap();
    let meta = review["request"]["object"]["metadata"].as_object_mut().unwrap();
    match labels {
        Value::Null => meta.remove("labels"),
        labels => meta.insert("labels".into(), labels),
    };
    review
}

/// The decision on `review` under `selector`, by both readers, which must agree.
fn decide(review: &Value, selector: Option<&str>) -> Decision {
    let selector: Option<RestorePodSelector> = selector.map(|s| s.parse().unwrap());
    let body = serde_json::to_vec(review).unwrap();
    let lean = review::parse_restore(&body).unwrap();
    let by_lean = decide_review_with(&lean, &store(), selector.as_ref());
    let typed: AdmissionReview<DynamicObject> = serde_json::from_value(review.clone()).unwrap();
    let typed: AdmissionRequest<DynamicObject> = typed.try_into().unwrap();
    let by_kube = decide_with(&typed, &store(), selector.as_ref());
    assert_eq!(by_lean.verdict, by_kube.verdict);
    assert_eq!(by_lean.response.result.message, by_kube.response.result.message);
    by_lean
}

/// Selector × the pod's labels → whether its creation is refused for them.
#[rstest]
#[case::no_selector_no_labels(None, Value::Null, false)]
#[case::no_selector_other_labels(None, json!({"app": "vllm"}), false)]
#[case::empty_selector("", json!({}), false)]
#[case::matching("miggate.io/restore=true", json!({"miggate.io/restore": "true", "app": "vllm"}), false)]
#[case::missing_label("miggate.io/restore=true", json!({"app": "vllm"}), true)]
#[case::no_labels_at_all("miggate.io/restore=true", Value::Null, true)]
#[case::labels_null("miggate.io/restore=true", json!(null), true)]
#[case::wrong_value("miggate.io/restore=true", json!({"miggate.io/restore": "yes"}), true)]
#[case::exists("miggate.io/restore", json!({"miggate.io/restore": ""}), false)]
#[case::in_set("tier in (gold,silver)", json!({"tier": "silver"}), false)]
#[case::not_in_set("tier in (gold,silver)", json!({"tier": "bronze"}), true)]
#[case::in_set_key_missing("tier in (gold,silver)", json!({}), true)]
#[case::notin_key_missing("tier notin (bronze)", json!({}), false)]
#[case::notin_excluded("tier notin (bronze)", json!({"tier": "bronze"}), true)]
#[case::does_not_exist("!legacy", json!({"app": "vllm"}), false)]
#[case::does_not_exist_but_does("!legacy", json!({"legacy": ""}), true)]
#[case::all_of_several("a=b,c!=d", json!({"a": "b", "c": "e"}), false)]
#[case::one_of_several_fails("a=b,c!=d", json!({"a": "b", "c": "d"}), true)]
fn a_restore_pod_the_selector_does_not_select_is_refused(
    #[case] selector: impl Into<Option<&'static str>>,
    #[case] labels: Value,
    #[case] refused: bool,
) {
    let review = pod_create(labels);
    let d = decide(&review, selector.into());
    let text = format!("{} {:?}", d.response.result.message, d.response.warnings);
    if refused {
        assert_eq!(d.verdict, Verdict::Refused, "{text}");
        assert_eq!(d.refused_by, ["pod-not-selected"]);
    } else {
        assert_ne!(d.verdict, Verdict::Refused, "{text}");
    }
}

#[test]
fn the_refusal_names_the_selector_and_what_to_add() {
    let d = decide(
        &pod_create(json!({"app": "vllm"})),
        Some("miggate.io/restore == true, tier in (silver, gold)"),
    );
    assert_eq!(d.verdict, Verdict::Refused);
    insta::assert_snapshot!("pod_not_selected", d.response.result.message);
}

/// Only a restore pod's creation: a pod that restores nothing is not looked at, and a binding
/// (whose pod the selected watch delivered) is never refused for labels.
#[test]
fn neither_a_plain_pod_nor_a_binding_is_refused_for_labels() {
    let mut plain = pod_create(json!({}));
    plain["request"]["object"]["metadata"]["annotations"] = json!({});
    assert_eq!(
        decide(&plain, Some("miggate.io/restore=true")).verdict,
        Verdict::Ignored
    );

    let binding: Value = serde_json::from_str(&testdata("admission/binding-create.json")).unwrap();
    let store = store().with_pod(
        "ml/vllm-restore-0",
        miggate_admission::lookup::RestorePod {
            annotations: miggate_admission::lookup::RestoreAnnotations {
                restore_from: Some("vllm-ckpt".into()),
                ..Default::default()
            },
            ..Default::default()
        },
    );
    let selector: RestorePodSelector = "miggate.io/restore=true".parse().unwrap();
    let body = serde_json::to_vec(&binding).unwrap();
    let d = decide_review_with(&review::parse(&body).unwrap(), &store, Some(&selector));
    assert_ne!(d.verdict, Verdict::Ignored, "a restore pod's binding is judged");
    assert!(
        !d.refused_by.iter().any(|r| *r == "pod-not-selected"),
        "{:?}",
        d.refused_by
    );
}
