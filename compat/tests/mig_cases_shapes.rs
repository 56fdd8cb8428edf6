#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The MIG cases of kind and shape: whole GPU vs slice, UUID forms, slice shapes with counts,
//! models, and (on two shapes that differ) skips and the report's shape.
//!
//! Both sides carry every other fact (host, driver, pod) so that a case's refusing set is
//! exactly what the devices make it, and strict mode is meaningful.

mod common;

use common::*;
use miggate_compat::{CheckName, Device, Error, Options, Outcome, parse_skip};
use rstest::rstest;

// ---------------------------------------------------------------------------------------------
// Kinds: whole GPU vs slice, both ways.

#[rstest]
#[case::whole_checkpoint_onto_a_slice(
    vec![whole("GPU-a", H100)],
    vec![s3g("MIG-t1")],
    "mig-partitioning: source whole x1, target slice x1"
)]
#[case::slice_checkpoint_onto_a_whole_gpu(
    vec![s3g("MIG-s1")],
    vec![whole("GPU-b", H100)],
    "mig-partitioning: source slice x1, target whole x1"
)]
#[case::two_slices_onto_two_whole_gpus(
    vec![s3g("MIG-s1"), s3g("MIG-s2")],
    vec![whole("GPU-a", H100), whole("GPU-b", H100)],
    "mig-partitioning: source slice x2, target whole x2"
)]
fn whole_and_slice_differ_in_partitioning(
    #[case] s: Vec<Device>,
    #[case] t: Vec<Device>,
    #[case] reason: &str,
) {
    // Same model on both sides: gpu-model and gpu-count pass, only the partitioning differs.
    let r = check(full(s), full(t));
    assert_refusing(&r, "mig-partitioning");
    assert_reason(&r, reason);
    let profile = outcome(&r, CheckName::MIG_PROFILE);
    assert!(
        matches!(profile, Outcome::NotApplicable | Outcome::Pass),
        "mig-profile leaves kinds to mig-partitioning: {profile:?}"
    );
}

#[test]
fn a_mixed_checkpoint_onto_slices_only() {
    // Both sides have slices, so mig-profile compares them too (and counts differ).
    let r = check(
        full(vec![whole("GPU-a", H100), s3g("MIG-s1")]),
        full(vec![s3g("MIG-t1"), s3g("MIG-t2")]),
    );
    assert_refusing(&r, "mig-partitioning, mig-profile");
    assert_reason(
        &r,
        "mig-partitioning: source slice x1, whole x1, target slice x2; \
         mig-profile: source 3g.40gb x1, target 3g.40gb x2",
    );
    // In offer mode the node has slices of that shape, and two devices of the checkpoint's
    // kinds: the missing whole GPU refuses per (kind, model) and per kind.
    let r = check_with(
        full(vec![whole("GPU-a", H100), s3g("MIG-s1")]),
        node(vec![s3g("MIG-t1"), s3g("MIG-t2")]),
        &offer(),
    );
    assert_refusing(&r, "gpu-model, mig-partitioning");
}

#[test]
fn partitioning_compares_kinds_not_counts() {
    // Counts are gpu-count's question; the same kinds on both sides is the same partitioning.
    let r = check(
        full(vec![whole("GPU-a", H100), s3g("MIG-s1")]),
        full(vec![whole("GPU-b", H100), s3g("MIG-t1"), s3g("MIG-t2")]),
    );
    assert_eq!(outcome(&r, CheckName::MIG_PARTITIONING), Outcome::Pass);
    assert_refusing(&r, "gpu-model, gpu-count, mig-profile");
}

#[test]
fn whole_checkpoint_against_a_node_of_slices_in_offer_mode() {
    let r = check_with(
        full(vec![whole("GPU-a", H100)]),
        node(vec![s3g("MIG-t1"), s3g("MIG-t2")]),
        &offer(),
    );
    assert_refusing(&r, "gpu-model, gpu-count, mig-partitioning");
    assert_eq!(
        row_of(&r, CheckName::MIG_PARTITIONING).message,
        "the checkpoint ran on whole GPUs; the target has none"
    );
}

#[test]
fn unknown_kinds_never_refuse_partitioning() {
    // A device with no UUID and no MIG fields: its kind is unknown.
    let odd = || Device {
        uuid: None,
        product_name: Some(H100.into()),
        ..Device::default()
    };
    let r = check(full(vec![s3g("MIG-s1")]), full(vec![odd()]));
    assert_eq!(outcome(&r, CheckName::MIG_PARTITIONING), Outcome::Unknown);
    assert!(r.compatible, "{}", r.reason);
    let r = check(full(vec![odd()]), full(vec![whole("GPU-b", H100)]));
    assert_eq!(outcome(&r, CheckName::MIG_PARTITIONING), Outcome::Unknown);
    assert!(r.compatible, "{}", r.reason);
}

// ---------------------------------------------------------------------------------------------
// UUID forms: legacy `MIG-GPU-<parent>/<gi>/<ci>` and `MIG-<uuid>` are both slices.

const LEGACY: &str = "MIG-GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f/7/0";
const NEW: &str = "MIG-7089d0f3-293f-58c9-8f8c-5ea666eedbde";

#[rstest]
#[case::legacy_source(LEGACY, NEW)]
#[case::legacy_target(NEW, LEGACY)]
fn legacy_and_new_uuid_forms_of_one_profile_pass(#[case] s: &str, #[case] t: &str) {
    let r = check(full(vec![s3g(s)]), full(vec![s3g(t)]));
    assert_refusing(&r, "");
    for c in [
        CheckName::GPU_MODEL,
        CheckName::GPU_COUNT,
        CheckName::MIG_PARTITIONING,
        CheckName::MIG_PROFILE,
    ] {
        assert_eq!(outcome(&r, c), Outcome::Pass, "{c}");
    }
    // cuda-checkpoint does not take legacy ids: no map, and a warning saying why.
    assert_eq!(r.device_map, None);
    assert!(
        r.warnings
            .iter()
            .any(|w| w.to_string().contains("legacy MIG-GPU-")),
        "{:?}",
        r.warnings
    );
}

#[test]
fn a_legacy_checkpoint_without_profile_admits_with_an_unknown_shape() {
    let source = testdata("checkpoint-a100-legacy-uuid.yaml");
    let target = node(vec![slice(
        "MIG-d0000000-0000-5000-8000-000000000001",
        "A100-SXM4-40GB",
        "1g.5gb",
    )])
    .kernel("5.15.0-89-generic")
    .driver("580.65.06");
    let r = check(source.clone(), target.clone());
    assert_refusing(&r, "");
    assert_eq!(outcome(&r, CheckName::MIG_PARTITIONING), Outcome::Pass);
    assert_eq!(outcome(&r, CheckName::MIG_PROFILE), Outcome::Unknown);
    let r = check_with(source, target, &strict(exact()));
    assert_refusing(&r, "mig-profile");
    assert_eq!(r.reason, "mig-profile: source unknown x1, target 1g.5gb x1");
}

// ---------------------------------------------------------------------------------------------
// Shapes with counts.

#[rstest]
#[case::exact(
    exact(),
    "mig-profile: source 1g.10gb x1, 3g.40gb x2, target 1g.10gb x2, 3g.40gb x1"
)]
#[case::offer(
    offer(),
    "mig-profile: source 1g.10gb x1, 3g.40gb x2, target 1g.10gb x2, 3g.40gb x1"
)]
fn same_count_other_shapes_is_refused_by_mig_profile_only(#[case] o: Options, #[case] reason: &str) {
    let s = vec![s3g("MIG-s1"), s3g("MIG-s2"), s1g("MIG-s3")];
    let t = vec![s3g("MIG-t1"), s1g("MIG-t2"), s1g("MIG-t3")];
    let r = check_with(full(s), full(t), &o);
    assert_refusing(&r, "mig-profile");
    assert_reason(&r, reason);
}

#[rstest]
#[case::media_extension_is_another_shape("1g.10gb+me", "1g.10gb")]
#[case::plain_against_media_extension("1g.10gb", "1g.10gb+me")]
#[case::compute_instance_is_not_its_gpu_instance("1c.3g.40gb", "3g.40gb")]
#[case::gpu_instance_is_not_one_of_its_compute_instances("3g.40gb", "1c.3g.40gb")]
#[case::two_compute_slices_are_not_one("2c.3g.40gb", "1c.3g.40gb")]
#[case::other_memory_size("1g.10gb", "1g.20gb")]
fn different_profile_text_is_a_different_shape(
    #[case] s: &str,
    #[case] t: &str,
    #[values(exact(), offer())] o: Options,
) {
    let r = check_with(
        full(vec![slice("MIG-s1", H100, s)]),
        full(vec![slice("MIG-t1", H100, t)]),
        &o,
    );
    assert_refusing(&r, "mig-profile");
    assert_eq!(r.reason, format!("mig-profile: source {s} x1, target {t} x1"));
}

#[test]
fn an_unknown_profile_admits_unless_strict() {
    let unshaped = bare("MIG-s1");
    let unshaped = Device {
        product_name: Some(H100.into()),
        ..unshaped
    };
    let r = check(full(vec![unshaped.clone()]), full(vec![s3g("MIG-t1")]));
    assert_refusing(&r, "");
    let p = row_of(&r, CheckName::MIG_PROFILE);
    assert_eq!(
        (p.outcome, p.source.as_ref(), p.target.as_ref()),
        (Outcome::Unknown, "unknown x1", "3g.40gb x1")
    );
    // A slice without a profile is a slice of unknown shape, never a whole GPU.
    assert_eq!(outcome(&r, CheckName::MIG_PARTITIONING), Outcome::Pass);

    let r = check_with(full(vec![unshaped]), full(vec![s3g("MIG-t1")]), &strict(exact()));
    assert_refusing(&r, "mig-profile");
    assert_eq!(r.reason, "mig-profile: source unknown x1, target 3g.40gb x1");
    assert!(row_of(&r, CheckName::MIG_PROFILE).message.contains("strict"));
}

#[test]
fn the_same_profile_name_on_another_model_is_refused_with_models_printed() {
    let r = check(
        full(vec![slice("MIG-s1", H100, "1g.10gb")]),
        full(vec![slice("MIG-t1", A100_80, "1g.10gb")]),
    );
    assert_refusing(&r, "gpu-model, mig-profile");
    assert_reason(
        &r,
        "gpu-model: source NVIDIA H100 80GB HBM3 x1, target NVIDIA A100-SXM4-80GB x1; \
         mig-profile: source NVIDIA H100 80GB HBM3 1g.10gb x1, target NVIDIA A100-SXM4-80GB 1g.10gb x1",
    );
    // Against a node that has both models, the H100's slice is what counts.
    let n = node(vec![
        slice("MIG-t1", A100_80, "1g.10gb"),
        slice("MIG-t2", A100_80, "1g.10gb"),
    ]);
    let r = check_with(full(vec![slice("MIG-s1", H100, "1g.10gb")]), n, &offer());
    assert_refusing(&r, "gpu-model, mig-profile");
    let n = node(vec![
        slice("MIG-t1", A100_80, "1g.10gb"),
        slice("MIG-t2", H100, "1g.10gb"),
    ]);
    let r = check_with(full(vec![slice("MIG-s1", H100, "1g.10gb")]), n, &offer());
    assert_refusing(&r, "");
}

#[test]
fn the_model_is_left_out_when_only_one_appears() {
    let r = check(full(vec![s3g("MIG-s1")]), full(vec![s1g("MIG-t1")]));
    assert_eq!(r.reason, "mig-profile: source 3g.40gb x1, target 1g.10gb x1");
}

// ---------------------------------------------------------------------------------------------
// Skips, and the report's shape.

fn shapes_differ() -> (M, M) {
    (
        full(vec![s3g("MIG-s1"), s3g("MIG-s2"), s1g("MIG-s3")]),
        full(vec![s3g("MIG-t1"), s1g("MIG-t2"), s1g("MIG-t3")]),
    )
}

#[test]
fn a_skipped_refusal_is_reported_skipped_and_the_verdict_is_compatible() {
    let (s, t) = shapes_differ();
    let r = check_with(s, t, &skipping(exact(), "mig-profile"));
    assert_refusing(&r, "");
    let p = row_of(&r, CheckName::MIG_PROFILE);
    assert_eq!(p.outcome, Outcome::Skipped);
    assert_eq!(p.message, "waived by request (refuse)");
    // Both values are still reported.
    assert_eq!(p.source, "1g.10gb x1, 3g.40gb x2");
    assert_eq!(p.target, "1g.10gb x2, 3g.40gb x1");
    // Skipping something else changes nothing.
    let (s, t) = shapes_differ();
    assert_refusing(
        &check_with(s, t, &skipping(exact(), "mount,gpu-count")),
        "mig-profile",
    );
}

#[test]
fn skipping_all_waives_every_check() {
    let r = check_with(
        full(vec![whole("GPU-a", H100)]),
        m(),
        &skipping(strict(exact()), "all"),
    );
    assert_refusing(&r, "");
    assert!(r.results.iter().all(|c| c.outcome == Outcome::Skipped));
}

#[rstest]
#[case("mig-profil")]
#[case("mount,gpu-cuont")]
#[case("All")]
#[case("mig_profile")]
fn unknown_check_names_in_a_skip_list_are_errors(#[case] list: &str) {
    let err = parse_skip(list).unwrap_err();
    assert!(matches!(err, Error::UnknownCheck { .. }), "{err:?}");
    let text = err.to_string();
    for c in CheckName::ALL {
        assert!(
            text.contains(c.as_str()),
            "the error lists every known check: {text}"
        );
    }
}

#[test]
fn every_report_has_a_row_per_check_in_order_and_reasons_join_in_that_order() {
    // A pair that refuses many checks at once, given in an order unlike the report's.
    let s = full(vec![whole("GPU-a", H100), whole("GPU-b", H100)])
        .arch("amd64")
        .driver("580.82.07");
    let t = full(vec![s3g("MIG-t1")])
        .arch("arm64")
        .driver("560.35.03")
        .mem("1Gi")
        .mounts(&[]);
    let r = check(s, t);
    assert_refusing(
        &r,
        "cpu-arch, memory-limit, mount, gpu-model, gpu-count, mig-partitioning, driver-version, driver-minimum",
    );
    let parts: Vec<&str> = r.reason.split("; ").collect();
    assert_eq!(parts.len(), 8);
    assert!(parts[0].starts_with("cpu-arch: "));
    assert!(parts[7].starts_with("driver-minimum: "));
    for o in [exact(), offer(), strict(exact()), skipping(offer(), "all")] {
        for (s, t) in [(m(), m()), (full(vec![]), node(vec![])), shapes_differ()] {
            let r = check_with(s, t, &o);
            assert_eq!(r.results.len(), CheckName::ALL.len());
            assert_rows(&r);
        }
    }
}

#[test]
fn report_json_has_the_documented_shape() {
    let (s, t) = shapes_differ();
    let r = check(s, t);
    let v = serde_json::to_value(&r).unwrap();
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    for k in [
        "schemaVersion",
        "compatible",
        "mode",
        "results",
        "reason",
        "deviceMap",
        "warnings",
    ] {
        assert!(keys.contains(&k), "{k} in {keys:?}");
    }
    assert_eq!(v["schemaVersion"], 1);
    assert_eq!(v["mode"], "exact");
    assert_eq!(v["deviceMap"], serde_json::Value::Null);
    let row = &v["results"][10];
    assert_eq!(row["check"], "mig-profile");
    assert_eq!(row["outcome"], "refuse");
    let row_keys: Vec<&str> = row.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(row_keys.len(), 5, "{row_keys:?}");
    for k in ["check", "outcome", "source", "target", "message"] {
        assert!(row_keys.contains(&k));
    }
    assert_eq!(
        serde_json::to_value(Outcome::NotApplicable).unwrap(),
        "not-applicable"
    );
}
