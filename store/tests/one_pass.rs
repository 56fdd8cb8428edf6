//! `review::parse_restore` (a restore pod's spec decoded in the review's one pass) must answer
//! every body exactly as `review::parse` (every spec raw, decoded later) does: the same
//! response, verdict and refusing checks, or the same 400. Over every recorded review and over
//! bodies built to split the two readers: a spec that is not a pod spec, fields in an order the
//! API server never writes, fields given twice, a body that is not UTF-8.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use miggate_admission::decide::decide_review;
use miggate_admission::review::{self, Spec};
use miggate_store::file_store::FileStore;
use rstest::rstest;
use support::{recorded_store, testdata_path};

mod support;

/// The answer a body gets through one reader: the response JSON, the verdict and the refusing
/// checks, or the 400's message.
fn answer(
    store: &FileStore,
    read: fn(&[u8]) -> Result<review::Review<'_>, review::BadReview>,
    body: &[u8],
) -> String {
    match read(body) {
        Ok(review) => {
            let d = decide_review(&review, &*store.snapshot());
            format!(
                "{} {:?} {}",
                d.verdict.as_str(),
                d.refused_by,
                String::from_utf8(review::render(&d.response).unwrap()).unwrap()
            )
        }
        Err(bad) => format!("400 {bad}"),
    }
}

fn same_answer(body: &[u8]) -> String {
    let store = recorded_store();
    let one_pass = answer(&store, review::parse_restore, body);
    let raw = answer(&store, review::parse, body);
    assert_eq!(
        one_pass,
        raw,
        "the readers differ on {}",
        String::from_utf8_lossy(body)
    );
    one_pass
}

#[test]
fn every_recorded_review_gets_the_same_answer_from_both_readers() {
    let dir = testdata_path("admission");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let body = std::fs::read(entry.unwrap().path()).unwrap();
        same_answer(&body);
        n += 1;
    }
    assert!(n >= 20, "only {n} recorded reviews");
}

/// A restore pod's review with `object` as given.
fn review_with(object: &str) -> Vec<u8> {
    format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u1",
        "kind":{{"group":"","version":"v1","kind":"Pod"}},"resource":{{"group":"","version":"v1","resource":"pods"}},
        "name":"p","namespace":"ml","operation":"CREATE","userInfo":{{}},"object":{object}}}}}"#
    )
    .into_bytes()
}

const META: &str =
    r#""metadata":{"name":"p","namespace":"ml","annotations":{"miggate.io/restore-from":"vllm-ckpt"}}"#;
const SPEC: &str = r#""spec":{"containers":[{"name":"vllm","image":"nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.1",
    "resources":{"limits":{"cpu":"8","memory":"64Gi","nvidia.com/mig-3g.40gb":"2"}},
    "volumeMounts":[{"name":"m","mountPath":"/model-cache"},{"name":"s","mountPath":"/dev/shm"}]}]}"#;

#[rstest]
#[case::the_api_servers_order(&format!(r#"{{"apiVersion":"v1","kind":"Pod",{META},{SPEC}}}"#), "warned")]
#[case::spec_before_metadata(&format!(r#"{{"apiVersion":"v1","kind":"Pod",{SPEC},{META}}}"#), "warned")]
#[case::kind_after_spec(&format!(r#"{{"apiVersion":"v1",{META},{SPEC},"kind":"Pod"}}"#), "warned")]
#[case::no_kind_on_the_object(&format!(r#"{{{META},{SPEC}}}"#), "warned")]
#[case::containers_not_a_list(&format!(r#"{{"apiVersion":"v1","kind":"Pod",{META},"spec":{{"containers":5}}}}"#), "refused")]
#[case::a_container_without_a_name(&format!(r#"{{"apiVersion":"v1","kind":"Pod",{META},"spec":{{"containers":[{{"image":"x"}}]}}}}"#), "refused")]
#[case::spec_not_an_object(&format!(r#"{{"apiVersion":"v1","kind":"Pod",{META},"spec":"x"}}"#), "refused")]
#[case::a_null_spec(&format!(r#"{{"apiVersion":"v1","kind":"Pod",{META},"spec":null}}"#), "refused")]
#[case::spec_given_twice(&format!(r#"{{"apiVersion":"v1","kind":"Pod",{META},{SPEC},{SPEC}}}"#), "400")]
#[case::metadata_given_twice(&format!(r#"{{"apiVersion":"v1","kind":"Pod",{META},{META},{SPEC}}}"#), "400")]
#[case::kind_given_twice(&format!(r#"{{"apiVersion":"v1","kind":"Pod",{META},{SPEC},"kind":"Pod"}}"#), "warned")]
#[case::kind_not_a_string(&format!(r#"{{"apiVersion":"v1","kind":7,{META},{SPEC}}}"#), "warned")]
#[case::broken_json_in_the_spec(&format!(r#"{{"apiVersion":"v1","kind":"Pod",{META},"spec":{{"containers":[}}}}"#), "400")]
fn crafted_bodies_get_the_same_answer_from_both_readers(#[case] object: &str, #[case] verdict: &str) {
    let answer = same_answer(&review_with(object));
    assert!(answer.starts_with(verdict), "{answer}");
}

/// A stray byte in a string neither reader decodes: in userInfo, and in a field of a restore
/// pod's spec that the one-pass reader skips but the raw reader keeps, and checks, as text.
#[rstest]
#[case::in_user_info(r#""userInfo":{"#)]
#[case::in_a_skipped_field_of_the_spec(r#""spec":{"#)]
fn a_body_that_is_not_utf8_gets_the_same_answer(#[case] after: &str) {
    let mut body = review_with(&format!(r#"{{"apiVersion":"v1","kind":"Pod",{META},{SPEC}}}"#));
    let at = body
        .windows(after.len())
        .position(|w| w == after.as_bytes())
        .unwrap()
        + after.len();
    body.splice(at..at, *b"\"k\":\"\xff\",");
    same_answer(&body);
}

#[test]
fn a_restore_pods_spec_is_decoded_in_the_one_pass_and_kept_raw_otherwise() {
    let body = review_with(&format!(r#"{{"apiVersion":"v1","kind":"Pod",{META},{SPEC}}}"#));
    let one = review::parse_restore(&body).unwrap();
    assert!(matches!(one.object.unwrap().spec, Some(Spec::Pod(_))));
    let raw = review::parse(&body).unwrap();
    assert!(matches!(raw.object.unwrap().spec, Some(Spec::Raw(_))));
    // Not a restore pod (no annotation): kept raw by either reader.
    let plain = review_with(&format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"p"}},{SPEC}}}"#
    ));
    assert!(matches!(
        review::parse_restore(&plain).unwrap().object.unwrap().spec,
        Some(Spec::Raw(_))
    ));
}

/// Recorded reviews with bytes replaced, inserted or deleted where the JSON's structure lives
/// (quotes, braces, brackets, colons, commas, digits, letters of field names): whatever the
/// edit breaks or keeps, both readers give the same answer.
mod edited {
    use super::*;
    use proptest::prelude::*;

    const BYTES: &[u8] = b"\"{}[],:0a\\ nud8\xff";

    fn recorded() -> Vec<Vec<u8>> {
        let dir = testdata_path("admission");
        let mut bodies: Vec<Vec<u8>> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| std::fs::read(e.unwrap().path()).unwrap())
            .collect();
        bodies.sort();
        bodies
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]
        #[test]
        fn an_edited_review_gets_the_same_answer_from_both_readers(
            which in any::<prop::sample::Index>(),
            edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, 0..BYTES.len()), 1..4),
        ) {
            let bodies = recorded();
            let mut body = which.get(&bodies).clone();
            for (at, op, byte) in edits {
                let i = at.index(body.len().max(1)).min(body.len());
                match op {
                    0 if i < body.len() => body[i] = BYTES[byte],
                    1 => body.insert(i, BYTES[byte]),
                    _ if i < body.len() => { body.remove(i); }
                    _ => body.push(BYTES[byte]),
                }
            }
            same_answer(&body);
        }
    }
}
