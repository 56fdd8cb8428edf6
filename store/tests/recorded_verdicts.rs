//! The recorded reviews in `testdata/admission/`, each with the verdict it must get and the
//! checks or reasons that refuse it. The wording of every answer is pinned apart, by the
//! snapshots of `router.rs`; this table says what each file is for.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::PathBuf;

use miggate_admission::decide::{Verdict, decide_review};
use miggate_admission::review;
use rstest::rstest;
use support::{recorded_store, testdata_path};

mod support;

fn dir() -> PathBuf {
    testdata_path("admission")
}

/// What a recorded review must get.
#[derive(Debug)]
enum Expect {
    /// Not a review the webhook can answer: a 400.
    BadRequest,
    /// Not a restore: allowed without a look.
    Ignored,
    /// A restore, allowed with no warning.
    Allowed,
    /// A restore, allowed with this many warnings.
    Warned(usize),
    /// A restore refused by these checks or reasons.
    Refused(&'static [&'static str]),
}

#[rstest]
#[case::a_binding_of_a_pod_the_file_store_does_not_know("binding-create.json", Expect::Ignored)]
#[case::not_a_pod("configmap-create.json", Expect::Ignored)]
#[case::truncated_json("malformed.json", Expect::BadRequest)]
#[case::a_review_without_a_request("no-request.json", Expect::BadRequest)]
#[case::another_review_version("v1beta1.json", Expect::BadRequest)]
#[case::a_pod_without_the_container_checkpointed("pod-create-container-missing.json", Expect::Refused(&["container-not-found"]))]
#[case::two_gpu_containers_and_no_name("pod-create-container-unknown.json", Expect::Warned(1))]
#[case::a_pinned_digest_that_differs("pod-create-digest-differs.json", Expect::Warned(1))]
#[case::the_only_gpu_container_is_the_target("pod-create-only-gpu-container.json", Expect::Warned(2))]
#[case::a_pod_that_restores_nothing("pod-create-plain.json", Expect::Ignored)]
#[case::a_restore_that_fits("pod-create-restore-allowed.json", Expect::Warned(1))]
#[case::a_dry_run_is_judged_alike("pod-create-restore-dry-run.json", Expect::Refused(&["memory-limit", "mount"]))]
#[case::a_checkpoint_name_with_a_typo("pod-create-restore-missing-checkpoint.json", Expect::Refused(&["checkpoint-not-found"]))]
#[case::a_restore_on_a_node_that_fits("pod-create-restore-node-allowed.json", Expect::Allowed)]
#[case::a_node_from_a_gpunode_cr("pod-create-restore-node-cr.json", Expect::Warned(1))]
#[case::a_node_of_another_gpu_shape(
    "pod-create-restore-node-refused.json",
    Expect::Refused(&["kernel-version", "gpu-model", "mig-profile", "driver-version", "gpu-request"])
)]
#[case::a_node_nobody_describes("pod-create-restore-node-unknown.json", Expect::Refused(&["node-not-found"]))]
#[case::limits_and_mounts_short("pod-create-restore-refused.json", Expect::Refused(&["memory-limit", "mount"]))]
#[case::a_waiver_with_a_typo_waives_nothing("pod-create-skip-typo.json", Expect::Refused(&["skip-checks-invalid"]))]
#[case::a_waiver_that_waives("pod-create-skip-waives.json", Expect::Warned(2))]
#[case::a_deletion("pod-delete-restore.json", Expect::Ignored)]
#[case::an_update("pod-update-restore.json", Expect::Ignored)]
fn each_recorded_review_gets_its_verdict(#[case] file: &str, #[case] expect: Expect) {
    let store = recorded_store();
    let body = std::fs::read(dir().join(file)).unwrap();
    let parsed = review::parse(&body);
    let (review, expect) = match (parsed, expect) {
        (Err(_), Expect::BadRequest) => return,
        (Err(e), expect) => panic!("{file}: expected {expect:?}, the review is refused: {e}"),
        (Ok(_), Expect::BadRequest) => panic!("{file}: expected a bad request, the review reads"),
        (Ok(r), expect) => (r, expect),
    };
    let d = decide_review(&review, &*store.snapshot());
    let warnings = d.response.warnings.as_ref().map_or(0, Vec::len);
    match expect {
        Expect::Ignored => assert_eq!(d.verdict, Verdict::Ignored, "{file}"),
        Expect::Allowed => assert_eq!((d.verdict, warnings), (Verdict::Allowed, 0), "{file}"),
        Expect::Warned(n) => assert_eq!((d.verdict, warnings), (Verdict::Warned, n), "{file}"),
        Expect::Refused(by) => {
            assert_eq!(d.verdict, Verdict::Refused, "{file}");
            assert!(!d.response.allowed, "{file}");
            // As a set: the order is the registry's, which no test pins.
            let got: BTreeSet<&str> = d.refused_by.iter().map(|r| r.as_str()).collect();
            assert_eq!(got, by.iter().copied().collect(), "{file}");
        }
        Expect::BadRequest => unreachable!("handled above"),
    }
    assert_eq!(d.response.uid, review.uid.as_ref(), "{file}: the uid is echoed");
}

/// A review added to `testdata/admission/` without a row above would be pinned only by its
/// snapshot: every file must have a stated verdict.
#[test]
fn every_recorded_review_has_a_row() {
    let source = include_str!("recorded_verdicts.rs");
    let files: BTreeSet<String> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    let missing: Vec<&String> = files
        .iter()
        .filter(|f| !source.contains(&format!("\"{f}\"")))
        .collect();
    assert!(
        missing.is_empty(),
        "recorded reviews without a stated verdict: {missing:?}"
    );
}

/// The metric labels operators alert on are listed in the docs: a reason added to `Refusal`
/// without its line there fails here.
#[test]
fn the_docs_list_every_refusal_label() {
    let docs = include_str!("../../docs/webhook.md");
    let row = docs
        .lines()
        .find(|l| l.starts_with("| `miggate_admission_refusals_total{check}`"))
        .expect("docs/webhook.md has the refusals metric row");
    let missing: Vec<&str> = miggate_admission::decide::Reason::ALL
        .map(|r| r.as_str())
        .into_iter()
        .filter(|l| !row.contains(&format!("`{l}`")))
        .collect();
    assert!(missing.is_empty(), "docs/webhook.md does not list {missing:?}");
}
