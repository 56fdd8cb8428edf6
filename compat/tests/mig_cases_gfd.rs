#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The MIG cases against targets as GPU feature discovery describes them: every slice listed
//! (counts per profile) but no UUIDs, or classes named without counts.
//!
//! Both sides carry every other fact (host, driver, pod) so that a case's refusing set is
//! exactly what the devices make it, and strict mode is meaningful.

mod common;

use common::*;
use miggate_compat::{CheckName, Device, Options, Outcome};
use rstest::rstest;

// ---------------------------------------------------------------------------------------------
// A target that lists every slice (GFD's counts per profile) but whose GPUs have no UUID.

/// A slice as GFD's counts give it: a profile and a model, no UUID.
fn counted(profile: &str) -> Device {
    Device {
        product_name: Some(H100.into()),
        mig_profile: Some(profile.parse().unwrap()),
        ..Device::default()
    }
}

/// A GPU GFD counts: a model, no UUID, so its kind is unknown (whole, or a cut parent).
fn counted_gpu() -> Device {
    Device {
        product_name: Some(H100.into()),
        ..Device::default()
    }
}

/// With every slice listed, the GPUs of unknown kind cannot make up a slice shortfall: the
/// refusal names the checks and both values. Without, they could be any slice: unknown.
#[rstest]
#[case::missing_profile(
    vec![s3g("MIG-s1"), s3g("MIG-s2"), s1g("MIG-s3")],
    true,
    "gpu-model,gpu-count,mig-profile",
    Some("mig-profile: source 1g.10gb x1, 3g.40gb x2, target 3g.40gb x2")
)]
#[case::missing_profile_not_listed(
    vec![s3g("MIG-s1"), s3g("MIG-s2"), s1g("MIG-s3")],
    false,
    "",
    None
)]
#[case::one_slice_too_many(
    vec![s3g("MIG-s1"), s3g("MIG-s2"), s3g("MIG-s3")],
    true,
    "gpu-model,gpu-count,mig-profile",
    Some("mig-profile: source 3g.40gb x3, target 3g.40gb x2")
)]
#[case::fits(vec![s3g("MIG-s1"), s3g("MIG-s2")], true, "", None)]
#[case::whole_gpu_stays_unknown(vec![whole("GPU-a", H100)], true, "", None)]
fn a_listed_shortfall_is_not_masked_by_gpus_of_unknown_kind(
    #[case] source: Vec<Device>,
    #[case] listed: bool,
    #[case] refused: &str,
    #[case] profile_reason: Option<&str>,
) {
    let target = node(vec![counted("3g.40gb"), counted("3g.40gb"), counted_gpu()]).0;
    let r = miggate_compat::evaluate_target(
        &full(source).0,
        miggate_compat::Target::node(&target).with_slices_listed(listed),
        &Options::mode(miggate_compat::Mode::Offer),
    );
    assert_refusing(&r, refused);
    if let Some(want) = profile_reason {
        assert!(r.reason.split("; ").any(|p| p == want), "{}", r.reason);
    }
    if refused.is_empty() {
        // Whatever is admitted stays a warning where the GPUs' kind matters.
        assert!(
            r.results.iter().any(|x| x.outcome == Outcome::Unknown),
            "{}",
            table(&r)
        );
    }
}

/// A target that lists no slice at all has none: a checkpoint on slices is refused by
/// mig-partitioning even though the target's GPUs are of unknown kind.
#[test]
fn a_listed_target_without_slices_has_none() {
    let target = node(vec![counted_gpu(), counted_gpu()]).0;
    let source = full(vec![s3g("MIG-s1")]).0;
    let options = Options::mode(miggate_compat::Mode::Offer);
    let listed = miggate_compat::evaluate_target(
        &source,
        miggate_compat::Target::node(&target).with_slices_listed(true),
        &options,
    );
    assert_eq!(outcome(&listed, CheckName::MIG_PARTITIONING), Outcome::Refuse);
    let not = miggate_compat::evaluate_target(&source, miggate_compat::Target::node(&target), &options);
    assert_eq!(outcome(&not, CheckName::MIG_PARTITIONING), Outcome::Unknown);
}

/// `rank_nodes_listed` ranks a node judged from listed counts as `check` judges it: the same certain
/// shortfall refuses there, where `rank_nodes` (nothing listed) leaves it unknown and fitting.
#[test]
fn placement_honours_a_listed_inventory() {
    let gfd = node(vec![counted("3g.40gb"), counted("3g.40gb"), counted_gpu()]).0;
    let source = full(vec![s3g("MIG-s1"), s3g("MIG-s2"), s1g("MIG-s3")]).0;
    let options = Options::mode(miggate_compat::Mode::Offer);
    let listed = miggate_compat::rank_nodes_listed(&source, [("gfd-node", &gfd, true)], &options);
    assert!(!listed[0].fits());
    assert_eq!(
        listed[0].first_refusal().map(|r| r.check.as_str()),
        Some("gpu-model")
    );
    let plain = miggate_compat::rank_nodes(&source, [("gfd-node", &gfd)], &options);
    assert!(plain[0].fits(), "{}", plain[0].report.reason);
}

// ---------------------------------------------------------------------------------------------
// A target that names classes without knowing how many devices of each it has (GFD labels
// without `nvidia.com/gpu.count`: `Nvidia::uncounted`).

/// The checks that read the devices.
const ALL_GPU: [CheckName; 4] = [
    CheckName::GPU_MODEL,
    CheckName::GPU_COUNT,
    CheckName::MIG_PARTITIONING,
    CheckName::MIG_PROFILE,
];

/// A target whose devices of `uncounted` kinds name classes only.
fn uncounted_node(
    devices: Vec<Device>,
    uncounted: &[miggate_compat::DeviceKind],
) -> miggate_compat::GpuManifest {
    let mut target = node(devices).0;
    target.nvidia.as_mut().unwrap().uncounted = uncounted.to_vec();
    target
}

/// What is certain refuses (a model, a profile, a kind the target lacks whatever its counts);
/// what rests on a number the target does not know is unknown, never a refusal, never a pass.
#[rstest]
// Every GPU cut into 3g.40gb slices, how many not known (the single strategy's product label).
#[case::single_same_profile(vec![counted("3g.40gb")], &[miggate_compat::DeviceKind::Slice], true, vec![s3g("MIG-s1")], "", &ALL_GPU)]
#[case::single_more_of_it(vec![counted("3g.40gb")], &[miggate_compat::DeviceKind::Slice], true, vec![s3g("MIG-s1"), s3g("MIG-s2"), s3g("MIG-s3")], "", &ALL_GPU)]
#[case::single_other_profile(vec![counted("3g.40gb")], &[miggate_compat::DeviceKind::Slice], true, vec![s1g("MIG-s1")], "mig-profile", &[])]
#[case::single_whole_gpu(vec![counted("3g.40gb")], &[miggate_compat::DeviceKind::Slice], true, vec![whole("GPU-a", H100)], "gpu-model,gpu-count,mig-partitioning", &[])]
#[case::single_other_model(vec![counted("3g.40gb")], &[miggate_compat::DeviceKind::Slice], true, vec![slice("MIG-s1", A100_80, "3g.40gb")], "gpu-model,mig-profile", &[])]
// MIG certainly off, whole GPUs of a number not known.
#[case::off_one_whole(vec![counted_gpu()], &[miggate_compat::DeviceKind::Unknown], true, vec![whole("GPU-a", H100)], "", &[CheckName::GPU_MODEL, CheckName::GPU_COUNT, CheckName::MIG_PARTITIONING])]
#[case::off_slice(vec![counted_gpu()], &[miggate_compat::DeviceKind::Unknown], true, vec![s3g("MIG-s1")], "gpu-model,gpu-count,mig-partitioning", &[])]
#[case::off_other_model(vec![counted_gpu()], &[miggate_compat::DeviceKind::Unknown], true, vec![whole("GPU-a", L4)], "gpu-model", &[])]
// Slices counted per profile, whole GPUs of a number not known (possibly none).
#[case::mixed_counted_slices_fit(vec![counted("3g.40gb"), counted("3g.40gb"), counted_gpu()], &[miggate_compat::DeviceKind::Unknown], true, vec![s3g("MIG-s1"), s3g("MIG-s2")], "", &[])]
#[case::mixed_one_slice_too_many(vec![counted("3g.40gb"), counted("3g.40gb"), counted_gpu()], &[miggate_compat::DeviceKind::Unknown], true, vec![s3g("MIG-s1"), s3g("MIG-s2"), s3g("MIG-s3")], "gpu-model,gpu-count,mig-profile", &[])]
#[case::mixed_whole_gpu(vec![counted("3g.40gb"), counted("3g.40gb"), counted_gpu()], &[miggate_compat::DeviceKind::Unknown], true, vec![whole("GPU-a", H100)], "", &[CheckName::GPU_MODEL, CheckName::GPU_COUNT, CheckName::MIG_PARTITIONING])]
// MIG mode not known, GPUs of a number not known: only the model is certain.
#[case::unlisted_whole(vec![counted_gpu()], &[miggate_compat::DeviceKind::Unknown], false, vec![whole("GPU-a", H100)], "", &[CheckName::GPU_MODEL, CheckName::GPU_COUNT, CheckName::MIG_PARTITIONING])]
#[case::unlisted_slice(vec![counted_gpu()], &[miggate_compat::DeviceKind::Unknown], false, vec![s3g("MIG-s1")], "", &[CheckName::GPU_MODEL, CheckName::GPU_COUNT, CheckName::MIG_PARTITIONING])]
#[case::unlisted_other_model(vec![counted_gpu()], &[miggate_compat::DeviceKind::Unknown], false, vec![whole("GPU-a", L4)], "gpu-model", &[])]
fn an_uncounted_class_is_named_but_never_counted(
    #[case] target: Vec<Device>,
    #[case] uncounted: &[miggate_compat::DeviceKind],
    #[case] listed: bool,
    #[case] source: Vec<Device>,
    #[case] refused: &str,
    #[case] unknown: &[CheckName],
) {
    let target = uncounted_node(target, uncounted);
    let r = miggate_compat::evaluate_target(
        &full(source).0,
        miggate_compat::Target::node(&target).with_slices_listed(listed),
        &Options::mode(miggate_compat::Mode::Offer),
    );
    assert_refusing(&r, refused);
    let unknowns: Vec<CheckName> = r
        .results
        .iter()
        .filter(|x| ALL_GPU.contains(&x.check) && x.outcome == Outcome::Unknown)
        .map(|x| x.check)
        .collect();
    if refused.is_empty() {
        assert_eq!(unknowns, unknown.to_vec(), "{}", table(&r));
    }
}

/// The numbers a target does not know are shown as such, and a refusal names what it lacks.
#[test]
fn uncounted_classes_are_shown_without_a_number() {
    let target = uncounted_node(vec![counted("3g.40gb")], &[miggate_compat::DeviceKind::Slice]);
    let options = Options::mode(miggate_compat::Mode::Offer);
    let listed = miggate_compat::Target::node(&target).with_slices_listed(true);
    let r = miggate_compat::evaluate_target(&full(vec![s1g("MIG-s1")]).0, listed, &options);
    assert!(
        r.reason
            .split("; ")
            .any(|p| p == "mig-profile: source 1g.10gb x1, target 3g.40gb x?"),
        "{}",
        r.reason
    );
    let same = miggate_compat::evaluate_target(&full(vec![s3g("MIG-s1"), s3g("MIG-s2")]).0, listed, &options);
    let count = row_of(&same, CheckName::GPU_COUNT);
    assert_eq!(count.target, "0 counted, more of a number not known");
    let profile = row_of(&same, CheckName::MIG_PROFILE);
    assert_eq!(profile.target, "3g.40gb x?");
    assert_eq!(
        profile.message,
        "the target has 3g.40gb, but how many is not known"
    );
    // Exact mode: the same shapes are unknown, another shape is refused.
    let exact = Options::mode(miggate_compat::Mode::Exact);
    let r = miggate_compat::evaluate_target(&full(vec![s3g("MIG-s1")]).0, listed, &exact);
    assert_eq!(
        outcome(&r, CheckName::MIG_PROFILE),
        Outcome::Unknown,
        "{}",
        table(&r)
    );
    assert_eq!(
        outcome(&r, CheckName::GPU_COUNT),
        Outcome::Unknown,
        "{}",
        table(&r)
    );
    let r = miggate_compat::evaluate_target(&full(vec![s1g("MIG-s1")]).0, listed, &exact);
    assert_eq!(
        outcome(&r, CheckName::MIG_PROFILE),
        Outcome::Refuse,
        "{}",
        table(&r)
    );
}

/// Placement gives a node that does not know its counts no spare count to rank by.
#[test]
fn placement_does_not_count_an_uncounted_node() {
    let target = uncounted_node(vec![counted("3g.40gb")], &[miggate_compat::DeviceKind::Slice]);
    let source = full(vec![s3g("MIG-s1")]).0;
    let options = Options::mode(miggate_compat::Mode::Offer);
    let ranked = miggate_compat::rank_nodes_listed(&source, [("n", &target, true)], &options);
    assert!(ranked[0].report.compatible);
    assert_eq!(ranked[0].spare, None);
}
