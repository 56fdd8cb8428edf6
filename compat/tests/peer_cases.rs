#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Every case of the Go peer's check tests (ai-dynamo/snapshot `api/compat/checks_test.go`,
//! `compat_test.go`, `reason_test.go`), same inputs, same verdicts.
//!
//! Mapping: the peer's "no mismatch" is our `pass`, `unknown` (an absent fact admits) or
//! `not-applicable`; a peer mismatch is our `refuse` with the reason
//! `<check>: source <s>, target <t>`. Each case asserts the whole set of refusing checks, not
//! one row, so a rule that starts refusing somewhere else breaks it.

mod common;

use common::*;
use miggate_compat::{CheckName, GpuManifest, Outcome, Report};
use rstest::rstest;

fn row(r: &Report, c: CheckName) -> (Outcome, &str, &str) {
    let x = r.result(c).unwrap();
    (x.outcome, x.source.as_ref(), x.target.as_ref())
}

// ---------------------------------------------------------------------------------------------
// TestCPUArchCheck

#[rstest]
#[case::same_architecture(Some("amd64"), Some("amd64"), Outcome::Pass, "", "")]
#[case::different_architecture(
    Some("amd64"),
    Some("arm64"),
    Outcome::Refuse,
    "cpu-arch",
    "cpu-arch: source amd64, target arm64"
)]
#[case::checkpoint_taken_before_the_architecture_was_recorded(None, Some("arm64"), Outcome::Unknown, "", "")]
#[case::target_architecture_unknown(Some("amd64"), None, Outcome::Unknown, "", "")]
fn cpu_arch(
    #[case] s: Option<&str>,
    #[case] t: Option<&str>,
    #[case] want: Outcome,
    #[case] refused: &str,
    #[case] reason: &str,
) {
    let side = |a: Option<&str>| a.map_or_else(m, |a| m().arch(a));
    let r = check(side(s), side(t));
    assert_refusing(&r, refused);
    assert_eq!(outcome(&r, CheckName::CPU_ARCH), want);
    assert_reason(&r, reason);
}

// ---------------------------------------------------------------------------------------------
// TestKernelVersionCheck

#[rstest]
#[case::same_release(Some("5.15.0-1071-aws"), Some("5.15.0-1071-aws"), "", "")]
#[case::same_major_minor_different_release(
    Some("5.15.0-1071-aws"),
    Some("5.15.0-1082-aws"),
    "kernel-version",
    "kernel-version: source 5.15.0-1071-aws, target 5.15.0-1082-aws"
)]
#[case::source_unknown(None, Some("5.15.0-1071-aws"), "", "")]
#[case::target_unknown(Some("5.15.0-1071-aws"), None, "", "")]
#[case::target_below_floor(
    Some("5.15.0-1071-aws"),
    Some("5.4.0-150-generic"),
    "kernel-version, kernel-minimum",
    "kernel-version: source 5.15.0-1071-aws, target 5.4.0-150-generic; \
     kernel-minimum: source 5.13 or newer, target 5.4.0-150-generic"
)]
#[case::both_below_floor(
    Some("4.19.0-25-amd64"),
    Some("4.19.0-25-amd64"),
    "kernel-minimum",
    "kernel-minimum: source 5.13 or newer, target 4.19.0-25-amd64"
)]
#[case::exactly_at_floor(Some("5.13.0-52-generic"), Some("5.13.0-52-generic"), "", "")]
#[case::newer_major(Some("6.8.0-45-generic"), Some("6.8.0-45-generic"), "", "")]
#[case::unreadable_release(Some("custom-build"), Some("custom-build"), "", "")]
fn kernel_version(
    #[case] s: Option<&str>,
    #[case] t: Option<&str>,
    #[case] refused: &str,
    #[case] reason: &str,
) {
    let side = |k: Option<&str>| k.map_or_else(m, |k| m().kernel(k));
    let r = check(side(s), side(t));
    assert_refusing(&r, refused);
    assert_reason(&r, reason);
}

#[test]
fn kernel_rows_say_unknown_where_the_peer_passes_silently() {
    let r = check(m(), m().kernel("5.15.0-1071-aws"));
    assert_eq!(
        row(&r, CheckName::KERNEL_VERSION),
        (Outcome::Unknown, "unknown", "5.15.0-1071-aws")
    );
    assert_eq!(
        row(&r, CheckName::KERNEL_MINIMUM),
        (Outcome::Pass, "5.13 or newer", "5.15.0-1071-aws")
    );
    let r = check(m().kernel("custom-build"), m().kernel("custom-build"));
    assert_eq!(row(&r, CheckName::KERNEL_VERSION).0, Outcome::Pass);
    assert_eq!(
        row(&r, CheckName::KERNEL_MINIMUM),
        (Outcome::Unknown, "5.13 or newer", "custom-build")
    );
    let r = check(m().kernel("5.15.0-1071-aws"), m());
    assert_eq!(row(&r, CheckName::KERNEL_MINIMUM).0, Outcome::Unknown);
}

// ---------------------------------------------------------------------------------------------
// TestImageDigestCheck

const CAPTURED: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
const REBUILT: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

fn img(reference: Option<&str>, id: Option<&str>) -> M {
    let mut x = m().pod();
    if let Some(r) = reference {
        x = x.image(r);
    }
    if let Some(i) = id {
        x = x.digest(i);
    }
    x
}

#[rstest]
#[case::same_content(img(None, Some(CAPTURED)), img(None, Some(CAPTURED)), Outcome::Pass, "")]
#[case::different_index_aliases_same_runtime_content(
    img(Some("registry.example/source@sha256:index-a"), Some(CAPTURED)),
    img(Some("registry.example/target@sha256:index-b"), Some(CAPTURED)),
    Outcome::Pass,
    ""
)]
#[case::same_reference_rebuilt(
    img(Some("nvcr.io/nvidia/tritonserver:24.09"), Some(CAPTURED)),
    img(Some("nvcr.io/nvidia/tritonserver:24.09"), Some(REBUILT)),
    Outcome::Refuse,
    "image-digest: source sha256:1111111111111111111111111111111111111111111111111111111111111111, \
     target sha256:2222222222222222222222222222222222222222222222222222222222222222"
)]
#[case::same_digest_wrapped(
    img(None, Some(&format!("docker-pullable://nvcr.io/nvidia/tritonserver@{CAPTURED}"))),
    img(None, Some(CAPTURED)),
    Outcome::Pass,
    ""
)]
#[case::different_content_wrapped(
    img(None, Some(&format!("docker-pullable://nvcr.io/nvidia/tritonserver@{CAPTURED}"))),
    img(None, Some(&format!("docker-pullable://nvcr.io/nvidia/tritonserver@{REBUILT}"))),
    Outcome::Refuse,
    "image-digest: source sha256:1111111111111111111111111111111111111111111111111111111111111111, \
     target sha256:2222222222222222222222222222222222222222222222222222222222222222"
)]
#[case::checkpoint_without_image_id(img(None, None), img(None, Some(CAPTURED)), Outcome::Unknown, "")]
#[case::runtime_image_id_unavailable(img(None, Some(CAPTURED)), img(None, None), Outcome::Unknown, "")]
#[case::runtime_id_not_a_content_digest(
    img(None, Some(CAPTURED)),
    img(None, Some("runtime-local-image")),
    Outcome::Unknown,
    ""
)]
#[case::checkpoint_id_not_a_digest(
    img(None, Some("runtime-local-image")),
    img(None, Some(CAPTURED)),
    Outcome::Unknown,
    ""
)]
fn image_digest(#[case] s: M, #[case] t: M, #[case] want: Outcome, #[case] reason: &str) {
    let r = check(s, t);
    assert_refusing(
        &r,
        if want == Outcome::Refuse {
            "image-digest"
        } else {
            ""
        },
    );
    assert_eq!(outcome(&r, CheckName::IMAGE_DIGEST), want);
    assert_reason(&r, reason);
}

// ---------------------------------------------------------------------------------------------
// TestMemoryLimitCheck, TestCPULimitCheck

fn mem(q: Option<&str>) -> M {
    q.map_or_else(|| m().pod(), |q| m().mem(q))
}

fn cpu(q: Option<&str>) -> M {
    q.map_or_else(|| m().pod(), |q| m().cpu(q))
}

#[rstest]
#[case::same_limit(Some("32Gi"), Some("32Gi"), Outcome::Pass)]
#[case::larger_target(Some("32Gi"), Some("64Gi"), Outcome::Pass)]
#[case::smaller_target(Some("32Gi"), Some("1Gi"), Outcome::Refuse)]
#[case::same_value_other_spelling(Some("32Gi"), Some("34359738368"), Outcome::Pass)]
#[case::target_has_no_limit(Some("32Gi"), None, Outcome::Unknown)]
#[case::checkpoint_has_no_limit(None, Some("32Gi"), Outcome::Unknown)]
#[case::unreadable_limit(Some("32Gi"), Some("plenty"), Outcome::Unknown)]
fn memory_limit(#[case] s: Option<&str>, #[case] t: Option<&str>, #[case] want: Outcome) {
    let r = check(mem(s), mem(t));
    assert_eq!(outcome(&r, CheckName::MEMORY_LIMIT), want);
    if want == Outcome::Refuse {
        assert_refusing(&r, "memory-limit");
        assert_eq!(
            r.reason,
            format!("memory-limit: source {}, target {}", s.unwrap(), t.unwrap())
        );
    } else {
        assert_refusing(&r, "");
    }
}

#[rstest]
#[case::same_limit(Some("4"), Some("4"), Outcome::Pass)]
#[case::more_cpu(Some("4"), Some("8"), Outcome::Pass)]
#[case::less_cpu(Some("4"), Some("1"), Outcome::Refuse)]
#[case::millicores_below(Some("4"), Some("500m"), Outcome::Refuse)]
#[case::millicores_above(Some("1"), Some("4500m"), Outcome::Pass)]
#[case::same_value_in_millicores(Some("4"), Some("4000m"), Outcome::Pass)]
#[case::target_has_no_limit(Some("4"), None, Outcome::Unknown)]
#[case::checkpoint_has_no_limit(None, Some("4"), Outcome::Unknown)]
#[case::exponent_past_every_scale(Some("1e9223372036854775807"), Some("4"), Outcome::Unknown)]
#[case::exponent_past_every_scale_on_the_target(Some("4"), Some("1e9223372036854775807"), Outcome::Unknown)]
#[case::negative_exponent_at_the_bottom(
    Some("4"),
    Some("1.000000000e-9223372036854775808"),
    Outcome::Unknown
)]
fn cpu_limit(#[case] s: Option<&str>, #[case] t: Option<&str>, #[case] want: Outcome) {
    let r = check(cpu(s), cpu(t));
    assert_eq!(outcome(&r, CheckName::CPU_LIMIT), want);
    if want == Outcome::Refuse {
        assert_refusing(&r, "cpu-limit");
        assert_eq!(
            r.reason,
            format!("cpu-limit: source {}, target {}", s.unwrap(), t.unwrap())
        );
    } else {
        assert_refusing(&r, "");
    }
}

// ---------------------------------------------------------------------------------------------
// TestMountCheck

#[rstest]
#[case::every_mount_there(&["/model-cache", "/data"], &["/model-cache", "/data"], "")]
#[case::one_missing(&["/model-cache", "/data"], &["/model-cache"], "mount: source /data, target missing")]
#[case::none_present(
    &["/model-cache", "/data"],
    &[],
    "mount: source /model-cache, target missing; mount: source /data, target missing"
)]
#[case::root_and_dev_shm_are_exempt(&["/", "/dev/shm"], &[], "")]
#[case::nothing_externalized(&[], &[], "")]
#[case::pod_has_extra_paths(&["/model-cache"], &["/model-cache", "/data", "/etc/hosts"], "")]
fn mount(#[case] s: &[&str], #[case] t: &[&str], #[case] reason: &str) {
    let r = check(m().mounts(s), m().mounts(t));
    assert_refusing(&r, if reason.is_empty() { "" } else { "mount" });
    assert_reason(&r, reason);
    let want = if reason.is_empty() {
        Outcome::Pass
    } else {
        Outcome::Refuse
    };
    assert_eq!(outcome(&r, CheckName::MOUNT), want);
}

#[test]
fn mounts_the_target_did_not_record_are_unknown_but_none_recorded_refuses() {
    // The peer resolves the target's paths from the source list, so "absent" there is
    // "missing"; our manifest tells absent (unknown) from `[]` (known none).
    let r = check(m().mounts(&["/data"]), m().pod());
    assert_eq!(outcome(&r, CheckName::MOUNT), Outcome::Unknown);
    assert!(r.compatible);
    let r = check(m().mounts(&["/data"]), m().mounts(&[]));
    assert_refusing(&r, "mount");
    assert_eq!(r.reason, "mount: source /data, target missing");
}

// ---------------------------------------------------------------------------------------------
// TestGPUModelCheck

#[rstest]
#[case::same_model(gpus(&[L4]), gpus(&[L4]), Outcome::Pass, "", "")]
#[case::different_model(
    gpus(&[L4]),
    gpus(&[A100_40]),
    Outcome::Refuse,
    "gpu-model",
    "gpu-model: source NVIDIA L4 x1, target NVIDIA A100-SXM4-40GB x1"
)]
#[case::same_models_other_order(gpus(&[L4, T4]), gpus(&[T4, L4]), Outcome::Pass, "", "")]
#[case::mixed_set_replaced(
    gpus(&[L4, T4]),
    gpus(&[L4, L4]),
    Outcome::Refuse,
    "gpu-model",
    "gpu-model: source NVIDIA L4 x1, Tesla T4 x1, target NVIDIA L4 x2"
)]
#[case::models_not_recorded(uuids(1), gpus(&[L4]), Outcome::Unknown, "", "")]
#[case::padded_model(gpus(&[" NVIDIA L4 "]), gpus(&[L4]), Outcome::Pass, "", "")]
#[case::target_models_unreadable(gpus(&[L4]), uuids(1), Outcome::Unknown, "", "")]
#[case::no_target_gpus(
    gpus(&[L4]),
    vec![],
    Outcome::NotApplicable,
    "gpu-count",
    "gpu-count: source 1, target 0"
)]
fn gpu_model(
    #[case] s: Vec<miggate_compat::Device>,
    #[case] t: Vec<miggate_compat::Device>,
    #[case] want: Outcome,
    #[case] refused: &str,
    #[case] reason: &str,
) {
    let r = check(m().devices(s), m().devices(t));
    assert_refusing(&r, refused);
    assert_eq!(outcome(&r, CheckName::GPU_MODEL), want);
    assert_reason(&r, reason);
}

// ---------------------------------------------------------------------------------------------
// TestGPUCountCheck

#[rstest]
#[case::same_count(gpus(&[L4, L4]), gpus(&[L4, L4]), "", "")]
#[case::fewer_on_target(
    gpus(&[L4, L4]),
    gpus(&[L4]),
    "gpu-model, gpu-count",
    "gpu-model: source NVIDIA L4 x2, target NVIDIA L4 x1; gpu-count: source 2, target 1"
)]
#[case::more_on_target(
    gpus(&[L4]),
    gpus(&[L4, L4]),
    "gpu-model, gpu-count",
    "gpu-model: source NVIDIA L4 x1, target NVIDIA L4 x2; gpu-count: source 1, target 2"
)]
#[case::checkpoint_recorded_none(vec![], gpus(&[L4]), "", "")]
#[case::none_discovered_on_target(gpus(&[L4]), vec![], "gpu-count", "gpu-count: source 1, target 0")]
#[case::unnamed_uuids_against_one_named(uuids(2), gpus(&[L4]), "gpu-count", "gpu-count: source 2, target 1")]
fn gpu_count(
    #[case] s: Vec<miggate_compat::Device>,
    #[case] t: Vec<miggate_compat::Device>,
    #[case] refused: &str,
    #[case] reason: &str,
) {
    let r = check(m().devices(s), m().devices(t));
    assert_refusing(&r, refused);
    assert_reason(&r, reason);
}

#[test]
fn gpu_mapping_leaves_count_policy_to_the_count_check() {
    // TestGPUMappingLeavesCountPolicyToInspectGate: 1 source vs 2 target ⇒ exactly gpu-count
    // (the devices carry no model, so gpu-model cannot speak).
    let r = check(m().devices(uuids(1)), m().devices(uuids(2)));
    assert_refusing(&r, "gpu-count");
    assert_eq!(r.reason, "gpu-count: source 1, target 2");
}

// ---------------------------------------------------------------------------------------------
// TestDriverVersionCheck

#[rstest]
#[case::same_build(Some("580.65.06"), Some("580.65.06"), "", "")]
#[case::other_build(
    Some("580.65.06"),
    Some("580.65.08"),
    "driver-version",
    "driver-version: source 580.65.06, target 580.65.08"
)]
#[case::other_branch(
    Some("580.65.06"),
    Some("585.10.01"),
    "driver-version",
    "driver-version: source 580.65.06, target 585.10.01"
)]
#[case::older_than_floor(
    Some("580.65.06"),
    Some("560.35.03"),
    "driver-version, driver-minimum",
    "driver-version: source 580.65.06, target 560.35.03; driver-minimum: source 580 or newer, target 560.35.03"
)]
#[case::both_below_floor(
    Some("560.35.03"),
    Some("560.35.03"),
    "driver-minimum",
    "driver-minimum: source 580 or newer, target 560.35.03"
)]
#[case::source_unknown(None, Some("580.65.06"), "", "")]
#[case::target_unknown(Some("580.65.06"), None, "", "")]
#[case::vendor_build(Some("vendor-build"), Some("vendor-build"), "", "")]
#[case::same_build_other_spelling(Some("580.65.06"), Some("580.65.6"), "", "")]
fn driver_version(
    #[case] s: Option<&str>,
    #[case] t: Option<&str>,
    #[case] refused: &str,
    #[case] reason: &str,
) {
    let side = |d: Option<&str>| d.map_or_else(m, |d| m().driver(d));
    let r = check(side(s), side(t));
    assert_refusing(&r, refused);
    assert_reason(&r, reason);
}

#[test]
fn driver_rows_name_both_values() {
    let r = check(m(), m().driver("580.65.06"));
    assert_eq!(
        row(&r, CheckName::DRIVER_VERSION),
        (Outcome::Unknown, "unknown", "580.65.06")
    );
    assert_eq!(
        row(&r, CheckName::DRIVER_MINIMUM),
        (Outcome::Pass, "580 or newer", "580.65.06")
    );
    let r = check(m().driver("vendor-build"), m().driver("vendor-build"));
    assert_eq!(row(&r, CheckName::DRIVER_VERSION).0, Outcome::Pass);
    assert_eq!(
        row(&r, CheckName::DRIVER_MINIMUM),
        (Outcome::Unknown, "580 or newer", "vendor-build")
    );
}

// ---------------------------------------------------------------------------------------------
// TestCompareIgnoresUnknownFacts, TestCompareNamesTheFailingCheck (compat_test.go fixtures)

fn populated() -> M {
    m().kernel("6.8.0-45-generic")
        .arch("amd64")
        .image("nvcr.io/nvidia/tritonserver:24.09")
        .cpu("8")
        .mem("32Gi")
        .mounts(&["/model-cache"])
        .driver("580.82.07")
        .devices(vec![whole("GPU-1111", T4)])
}

fn different() -> M {
    m().kernel("5.15.0-89-generic")
        .arch("arm64")
        .image("nvcr.io/nvidia/tritonserver:24.01")
        .cpu("1")
        .mem("1Gi")
        .mounts(&[])
        .driver("560.35.03")
        .devices(vec![whole("GPU-2222", A100_40)])
}

/// A side that knows nothing, but has the blocks (so the pod checks apply and say unknown).
fn knows_nothing() -> M {
    let mut x = m().pod();
    x.0.host = Some(Default::default());
    x.0.nvidia = Some(Default::default());
    x
}

#[rstest]
#[case::neither_side_knows_anything(knows_nothing(), knows_nothing())]
#[case::checkpoint_recorded_facts_target_cannot_describe(populated(), knows_nothing())]
#[case::target_describes_facts_checkpoint_never_recorded(knows_nothing(), populated())]
#[case::both_agree(populated(), populated())]
#[case::empty_documents(m(), m())]
fn compare_ignores_unknown_facts(
    #[case] s: M,
    #[case] t: M,
    #[values(exact(), offer())] o: miggate_compat::Options,
) {
    let r = check_with(s, t, &o);
    assert_refusing(&r, "");
    for row in &r.results {
        assert_ne!(row.outcome, Outcome::Skipped);
    }
}

#[rstest]
#[case::exact(exact())]
#[case::offer(offer())]
fn mount_is_not_silent_when_the_target_knows_it_has_none(#[case] o: miggate_compat::Options) {
    // The peer's one exemption: a target whose mounts are known to be none refuses each.
    let r = check_with(populated(), knows_nothing().mounts(&[]), &o);
    assert_refusing(&r, "mount");
    assert_eq!(r.reason, "mount: source /model-cache, target missing");
}

#[test]
fn compare_names_the_failing_check() {
    let r = check(populated(), different());
    assert_refusing(
        &r,
        "cpu-arch, kernel-version, memory-limit, cpu-limit, mount, gpu-model, driver-version, driver-minimum",
    );
    assert_reason(
        &r,
        "cpu-arch: source amd64, target arm64; \
         kernel-version: source 6.8.0-45-generic, target 5.15.0-89-generic; \
         memory-limit: source 32Gi, target 1Gi; \
         cpu-limit: source 8, target 1; \
         mount: source /model-cache, target missing; \
         gpu-model: source Tesla T4 x1, target NVIDIA A100-SXM4-40GB x1; \
         driver-version: source 580.82.07, target 560.35.03; \
         driver-minimum: source 580 or newer, target 560.35.03",
    );
    insta::assert_snapshot!("populated_vs_different_rows", table(&r));
}

// ---------------------------------------------------------------------------------------------
// reason_test.go

#[test]
fn reason_format_follows_the_peer_protocol() {
    let r = check(m().mem("32Gi"), m().mem("1Gi"));
    assert_eq!(r.reason, "memory-limit: source 32Gi, target 1Gi");

    let r = check(m().arch("amd64").mem("32Gi"), m().arch("arm64").mem("1Gi"));
    assert_reason(
        &r,
        "cpu-arch: source amd64, target arm64; \
         memory-limit: source 32Gi, target 1Gi",
    );

    // Blank on both sides renders `unknown` (reached here through strict mode).
    let r = check_with(
        m().pod(),
        m().pod(),
        &skipping_all_but(strict(exact()), CheckName::KERNEL_VERSION),
    );
    assert_eq!(r.reason, "kernel-version: source unknown, target unknown");

    // A blank (white-space) value is unknown too, and compared as absent.
    let r = check_with(
        m().arch("  "),
        m().arch("amd64"),
        &strict(skipping_all_but(exact(), CheckName::CPU_ARCH)),
    );
    assert_eq!(r.reason, "cpu-arch: source unknown, target amd64");

    // Nothing refused: empty reason.
    assert_eq!(check(m(), m()).reason, "");
}

#[test]
fn an_empty_multiset_renders_none() {
    let r = check(m().devices(gpus(&[L4])), m().devices(vec![]));
    let model = r.result(CheckName::GPU_MODEL).unwrap();
    assert_eq!(
        (model.source.as_ref(), model.target.as_ref()),
        ("NVIDIA L4 x1", "none")
    );
}

#[test]
fn every_check_is_named_and_registered_once() {
    let names: std::collections::BTreeSet<&str> = CheckName::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(names.len(), CheckName::ALL.len());
    let peer = [
        "cpu-arch",
        "kernel-version",
        "kernel-minimum",
        "image-digest",
        "memory-limit",
        "cpu-limit",
        "mount",
        "gpu-model",
        "gpu-count",
        "mig-partitioning",
        "mig-profile",
        "driver-version",
        "driver-minimum",
    ];
    // Every one of the peer's 13 under the peer's name, and ours beside them; where each
    // stands is the registry's row, which no test pins.
    for name in peer.into_iter().chain(["gpu-request"]) {
        assert!(names.contains(name), "`{name}` is not registered");
    }
}

#[test]
fn the_default_manifest_is_all_unknown() {
    let r = check(GpuManifest::new(), GpuManifest::new());
    assert_refusing(&r, "");
    for c in &r.results {
        assert!(
            matches!(c.outcome, Outcome::Unknown | Outcome::NotApplicable),
            "{}: {:?}",
            c.check,
            c.outcome
        );
    }
}

/// Found in review: `9 + exponent - fraction digits` overflowed on an exponent at the edge of
/// `i64` (a panic in debug builds, a wrapped scale in release). Such a limit has no value.
#[test]
fn a_limit_with_an_exponent_at_the_edge_of_i64_is_unknown_not_a_panic() {
    let read = |cpu: &str| {
        miggate_compat::from_str(&format!(
            r#"{{"apiVersion": "miggate.io/v1alpha1", "kind": "GpuManifest", "pod": {{"cpuLimit": "{cpu}"}}}}"#
        ))
        .unwrap()
    };
    for edge in ["1e9223372036854775807", "1.000000000e-9223372036854775808"] {
        let r = miggate_compat::evaluate(&read(edge), &read("4"), &Default::default());
        assert_eq!(outcome(&r, CheckName::CPU_LIMIT), Outcome::Unknown, "{edge}");
        let r = miggate_compat::evaluate(&read("4"), &read(edge), &Default::default());
        assert_eq!(outcome(&r, CheckName::CPU_LIMIT), Outcome::Unknown, "{edge}");
        assert_eq!(r.result(CheckName::CPU_LIMIT).unwrap().target, edge);
    }
}
