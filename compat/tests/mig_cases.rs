#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The MIG cases: offer mode against node inventories, compute instances and `gpu-request`.
//! Kinds, UUID forms, slice shapes, skips and the report's shape are in `mig_cases_shapes.rs`;
//! targets as GPU feature discovery describes them (listed or uncounted) in `mig_cases_gfd.rs`.
//!
//! Both sides carry every other fact (host, driver, pod) so that a case's refusing set is
//! exactly what the devices make it, and strict mode is meaningful.

mod common;

use common::*;
use miggate_compat::{CheckName, Device, MigStrategy, Outcome};
use rstest::rstest;

const P0: &str = "GPU-4b5a1c6e-8d2f-4e1a-9b7c-3d2e1f0a9b8c";
const P1: &str = "GPU-9c8b7a6f-5e4d-4c3b-8a29-1f0e9d8c7b6a";

// ---------------------------------------------------------------------------------------------
// Offer mode against node inventories.

#[test]
fn offer_mode_passes_on_a_larger_node() {
    let source = testdata("checkpoint-h100-3g40gb-x2.yaml");
    let r = check_with(source, testdata("node-h100-8gpu-mixed.yaml"), &offer());
    assert_refusing(&r, "");
    for c in CheckName::ALL
        .into_iter()
        .filter(|c| c.scope() == miggate_compat::Scope::Pod)
    {
        assert_eq!(outcome(&r, c), Outcome::NotApplicable, "{c}");
    }
    // Paired by class: the node's two 3g.40gb, not its first two devices by position.
    assert_eq!(
        r.device_map.as_deref(),
        Some(
            "MIG-7089d0f3-293f-58c9-8f8c-5ea666eedbde=MIG-2f1e0d9c-8b7a-5c6d-9e4f-1a2b3c4d5e6f,\
             MIG-56c30729-3b1e-5f2a-8c4d-7e6f5a4b3c2d=MIG-a1b2c3d4-e5f6-5a7b-8c9d-0e1f2a3b4c5d"
        )
    );
}

#[test]
fn offer_mode_refuses_a_node_one_slice_short_naming_the_profile() {
    let source = testdata("checkpoint-h100-3g40gb-x2.yaml");
    let n = node(vec![
        slice_in("MIG-t1", H100, "3g.40gb", P1, 1, 0),
        slice_in("MIG-t2", H100, "1g.10gb", P1, 7, 0),
        slice_in("MIG-t3", H100, "1g.10gb", P1, 8, 0),
        slice_in("MIG-t4", H100, "1g.10gb", P1, 9, 0),
        whole("GPU-c", H100),
    ]);
    let r = check_with(source, n, &offer());
    assert_refusing(&r, "mig-profile");
    let p = row_of(&r, CheckName::MIG_PROFILE);
    assert_eq!(p.message, "the target is short of 3g.40gb (needs 2, has 1)");
    assert_eq!(
        r.reason,
        "mig-profile: source 3g.40gb x2, target 1g.10gb x3, 3g.40gb x1"
    );
    insta::assert_snapshot!("offer_one_slice_short", table(&r));
}

#[test]
fn two_whole_gpus_against_one_whole_and_one_cut_in_offer_mode() {
    let source = testdata("checkpoint-h100-whole-x2.json");
    let r = check_with(source, testdata("node-h100-1-whole-1-cut.yaml"), &offer());
    // The node has whole GPUs (so the partitioning is offered) but only one of them.
    assert_refusing(&r, "gpu-model, gpu-count");
    assert_reason(
        &r,
        "gpu-model: source NVIDIA H100 80GB HBM3 x2, target NVIDIA H100 80GB HBM3 x1, NVIDIA H100 80GB HBM3 (MIG slice) x2; \
         gpu-count: source 2, target 1",
    );
    insta::assert_snapshot!("offer_two_whole_one_whole_one_cut", table(&r));
}

#[test]
fn a_node_inventory_without_pod_is_compatible_in_strict_mode() {
    let source = testdata("checkpoint-h100-3g40gb-x2.yaml");
    let r = check_with(source, testdata("node-h100-8gpu-mixed.yaml"), &strict(offer()));
    assert_refusing(&r, "");
    for c in [
        CheckName::IMAGE_DIGEST,
        CheckName::MEMORY_LIMIT,
        CheckName::CPU_LIMIT,
        CheckName::MOUNT,
        CheckName::GPU_REQUEST,
    ] {
        assert_eq!(outcome(&r, c), Outcome::NotApplicable, "{c}");
    }
}

#[test]
fn exact_mode_against_a_whole_node_inventory_is_refused() {
    // A node agent that compared against the node's inventory instead of what the container
    // got would see 15 devices where the checkpoint had 2.
    let source = testdata("checkpoint-h100-3g40gb-x2.yaml");
    let r = check(source, testdata("node-h100-8gpu-mixed.yaml"));
    assert_refusing(&r, "gpu-model, gpu-count, mig-partitioning, mig-profile");
}

#[test]
fn a_restore_that_got_what_it_needs_passes_exactly() {
    let r = check_with(
        testdata("checkpoint-h100-3g40gb-x2.yaml"),
        testdata("restore-h100-3g40gb-x2.yaml"),
        &strict(exact()),
    );
    assert_refusing(&r, "");
    assert!(
        r.results.iter().all(|c| c.outcome == Outcome::Pass),
        "{}",
        table(&r)
    );
}

#[test]
fn a_restore_handed_whole_gpus_instead_of_slices() {
    let r = check(
        testdata("checkpoint-h100-3g40gb-x2.yaml"),
        testdata("restore-h100-whole.yaml"),
    );
    assert_refusing(&r, "mig-partitioning, gpu-request");
    insta::assert_snapshot!("restore_whole_instead_of_slices", table(&r));
}

// ---------------------------------------------------------------------------------------------
// Compute instances share their GPU instance's memory.

fn ci(uuid: &str, parent: &str, gi: u32, ci_id: u32) -> Device {
    slice_in(uuid, H100, "1c.3g.40gb", parent, gi, ci_id)
}

fn without_place(mut d: Device) -> Device {
    d.parent_uuid = None;
    d.gpu_instance_id = None;
    d
}

#[test]
fn two_compute_instances_in_one_gpu_instance_are_not_two_in_separate_ones() {
    let one_gi = vec![ci("MIG-s1", P0, 1, 0), ci("MIG-s2", P0, 1, 1)];
    let two_gis = vec![ci("MIG-t1", P1, 1, 0), ci("MIG-t2", P1, 2, 0)];
    let r = check(full(one_gi.clone()), full(two_gis.clone()));
    assert_refusing(&r, "mig-profile");
    assert_eq!(
        r.reason,
        "mig-profile: source {1c.3g.40gb, 1c.3g.40gb} x1, target {1c.3g.40gb} x2"
    );
    insta::assert_snapshot!("compute_instances_one_gi_vs_two", table(&r));
    // The other way round, and in offer mode.
    assert_refusing(&check(full(two_gis.clone()), full(one_gi.clone())), "mig-profile");
    assert_refusing(
        &check_with(full(one_gi.clone()), node(two_gis), &offer()),
        "mig-profile",
    );
    // The same layout elsewhere passes.
    let same = vec![ci("MIG-t1", P1, 2, 0), ci("MIG-t2", P1, 2, 1)];
    assert_refusing(&check(full(one_gi), full(same)), "");
}

#[test]
fn legacy_uuids_carry_the_gpu_instance() {
    let legacy = vec![
        slice(
            "MIG-GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f/1/0",
            H100,
            "1c.3g.40gb",
        ),
        slice(
            "MIG-GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f/1/1",
            H100,
            "1c.3g.40gb",
        ),
    ];
    let r = check(
        full(legacy.clone()),
        full(vec![ci("MIG-t1", P1, 1, 0), ci("MIG-t2", P1, 2, 0)]),
    );
    assert_refusing(&r, "mig-profile");
    let r = check(
        full(legacy),
        full(vec![ci("MIG-t1", P1, 3, 0), ci("MIG-t2", P1, 3, 1)]),
    );
    assert_refusing(&r, "");
}

// Offer mode asks whether the node can offer a GPU instance holding the checkpoint's compute
// instances: one of the same GPU-instance profile (and model) with at least those compute
// instances can, and each of the checkpoint's GPU instances needs one of its own.

fn ci_on(uuid: &str, model: &str, parent: &str, gi: u32, ci_id: u32) -> Device {
    slice_in(uuid, model, "1c.3g.40gb", parent, gi, ci_id)
}

const P2: &str = "GPU-2e3d4c5b-6a79-4880-9f1e-2d3c4b5a6978";

fn two_in_one() -> Vec<Device> {
    vec![ci("MIG-s1", P0, 1, 0), ci("MIG-s2", P0, 1, 1)]
}

fn two_in_each_of_two() -> Vec<Device> {
    vec![
        ci("MIG-s1", P0, 1, 0),
        ci("MIG-s2", P0, 1, 1),
        ci("MIG-s3", P0, 2, 0),
        ci("MIG-s4", P0, 2, 1),
    ]
}

#[rstest]
#[case::more_compute_instances_in_one_gpu_instance(
    two_in_one(),
    vec![ci("MIG-t1", P1, 1, 0), ci("MIG-t2", P1, 1, 1), ci("MIG-t3", P1, 1, 2)],
    Outcome::Pass
)]
#[case::the_same_layout(
    two_in_one(),
    vec![ci("MIG-t1", P1, 2, 0), ci("MIG-t2", P1, 2, 1)],
    Outcome::Pass
)]
#[case::one_compute_instance_in_each_of_two(
    two_in_one(),
    vec![ci("MIG-t1", P1, 1, 0), ci("MIG-t2", P1, 2, 0)],
    Outcome::Refuse
)]
#[case::a_big_enough_instance_beside_a_small_one(
    two_in_one(),
    vec![ci("MIG-t1", P1, 1, 0), ci("MIG-t2", P1, 2, 0), ci("MIG-t3", P1, 2, 1), ci("MIG-t4", P1, 2, 2)],
    Outcome::Pass
)]
#[case::the_big_enough_instance_is_another_model(
    two_in_one(),
    vec![
        ci("MIG-t1", P1, 1, 0),
        ci("MIG-t2", P1, 2, 0),
        ci_on("MIG-t3", A100_80, P2, 1, 0),
        ci_on("MIG-t4", A100_80, P2, 1, 1),
    ],
    Outcome::Refuse
)]
#[case::two_instances_cannot_share_one(
    two_in_each_of_two(),
    vec![ci("MIG-t1", P1, 1, 0), ci("MIG-t2", P1, 1, 1), ci("MIG-t3", P1, 1, 2), ci("MIG-t4", P1, 1, 3)],
    Outcome::Refuse
)]
#[case::two_instances_onto_two_bigger_ones(
    two_in_each_of_two(),
    vec![
        ci("MIG-t1", P1, 1, 0),
        ci("MIG-t2", P1, 1, 1),
        ci("MIG-t3", P1, 1, 2),
        ci("MIG-t4", P2, 5, 0),
        ci("MIG-t5", P2, 5, 1),
    ],
    Outcome::Pass
)]
fn offer_mode_places_each_gpu_instance_of_the_checkpoint(
    #[case] source: Vec<Device>,
    #[case] node_devices: Vec<Device>,
    #[case] want: Outcome,
) {
    let r = check_with(full(source.clone()), node(node_devices.clone()), &offer());
    assert_eq!(outcome(&r, CheckName::MIG_PROFILE), want, "{}", table(&r));
    // Exact mode keeps comparing the layouts for equality.
    let same = node_devices.len() == source.len() && want == Outcome::Pass;
    let r = check(full(source), full(node_devices));
    assert_eq!(
        outcome(&r, CheckName::MIG_PROFILE),
        if same { Outcome::Pass } else { Outcome::Refuse },
        "{}",
        table(&r)
    );
}

#[test]
fn offer_mode_names_the_gpu_instance_it_cannot_place() {
    let r = check_with(
        full(two_in_one()),
        node(vec![ci("MIG-t1", P1, 1, 0), ci("MIG-t2", P1, 2, 0)]),
        &offer(),
    );
    assert_refusing(&r, "mig-profile");
    let row = row_of(&r, CheckName::MIG_PROFILE);
    assert_eq!(
        row.message,
        "no GPU instance on the target can hold {1c.3g.40gb, 1c.3g.40gb} x1 (each needs its own GPU instance of the same profile with at least those compute instances, which share its memory)"
    );
    assert_eq!(
        r.reason,
        "mig-profile: source {1c.3g.40gb, 1c.3g.40gb} x1, target {1c.3g.40gb} x2"
    );
}

#[test]
fn exact_mode_still_wants_the_same_gpu_instances() {
    let r = check(
        full(two_in_one()),
        full(vec![
            ci("MIG-t1", P1, 1, 0),
            ci("MIG-t2", P1, 1, 1),
            ci("MIG-t3", P1, 1, 2),
        ]),
    );
    assert_eq!(
        outcome(&r, CheckName::MIG_PROFILE),
        Outcome::Refuse,
        "{}",
        table(&r)
    );
    assert_eq!(
        row_of(&r, CheckName::MIG_PROFILE).target,
        "{1c.3g.40gb, 1c.3g.40gb, 1c.3g.40gb} x1"
    );
}

#[rstest]
#[case::neither_side_knows(true, true)]
#[case::source_does_not_know(true, false)]
#[case::target_does_not_know(false, true)]
fn compute_instances_without_gpu_instance_ids_are_unknown(#[case] hide_s: bool, #[case] hide_t: bool) {
    let place = |hide: bool, d: Device| if hide { without_place(d) } else { d };
    let s = vec![
        place(hide_s, ci("MIG-s1", P0, 1, 0)),
        place(hide_s, ci("MIG-s2", P0, 1, 1)),
    ];
    let t = vec![
        place(hide_t, ci("MIG-t1", P1, 1, 0)),
        place(hide_t, ci("MIG-t2", P1, 2, 0)),
    ];
    let r = check(full(s.clone()), full(t.clone()));
    assert_refusing(&r, "");
    assert_eq!(outcome(&r, CheckName::MIG_PROFILE), Outcome::Unknown);
    let r = check_with(full(s), full(t), &strict(exact()));
    assert_refusing(&r, "mig-profile");
}

#[test]
fn compute_instance_shapes_that_differ_refuse_even_without_ids() {
    let r = check(
        full(vec![without_place(ci("MIG-s1", P0, 1, 0))]),
        full(vec![without_place(slice_in(
            "MIG-t1",
            H100,
            "2c.3g.40gb",
            P1,
            1,
            0,
        ))]),
    );
    assert_refusing(&r, "mig-profile");
}

// ---------------------------------------------------------------------------------------------
// gpu-request: would the restore container's limits give it the checkpoint's devices?

fn restore_pod(devices: Vec<Device>, strategy: Option<MigStrategy>, requests: &[(&str, &str)]) -> M {
    let mut t = full(devices).requests(requests);
    t.0.nvidia.as_mut().unwrap().mig_strategy = strategy;
    t
}

#[rstest]
#[case::mixed_strategy_mig_resource(
    vec![s3g("MIG-s1"), s3g("MIG-s2")],
    Some(MigStrategy::Mixed),
    &[("nvidia.com/mig-3g.40gb", "2")],
    Outcome::Pass
)]
#[case::count_mismatch(
    vec![s3g("MIG-s1"), s3g("MIG-s2")],
    Some(MigStrategy::Mixed),
    &[("nvidia.com/mig-3g.40gb", "1")],
    Outcome::Refuse
)]
#[case::other_shape(
    vec![s3g("MIG-s1")],
    Some(MigStrategy::Mixed),
    &[("nvidia.com/mig-1g.10gb", "1")],
    Outcome::Refuse
)]
#[case::media_extension_becomes_dot_me(
    vec![slice("MIG-s1", H100, "1g.10gb+me")],
    Some(MigStrategy::Mixed),
    &[("nvidia.com/mig-1g.10gb.me", "1")],
    Outcome::Pass
)]
#[case::media_extension_is_not_the_plain_profile(
    vec![slice("MIG-s1", H100, "1g.10gb+me")],
    Some(MigStrategy::Mixed),
    &[("nvidia.com/mig-1g.10gb", "1")],
    Outcome::Refuse
)]
#[case::whole_gpus_under_mixed(
    vec![whole("GPU-a", H100), whole("GPU-b", H100)],
    Some(MigStrategy::Mixed),
    &[("nvidia.com/gpu", "2")],
    Outcome::Pass
)]
#[case::whole_gpus_under_none(
    vec![whole("GPU-a", H100)],
    Some(MigStrategy::None),
    &[("nvidia.com/gpu", "1")],
    Outcome::Pass
)]
#[case::gpu_resource_for_a_slice_under_mixed(
    vec![s3g("MIG-s1")],
    Some(MigStrategy::Mixed),
    &[("nvidia.com/gpu", "1")],
    Outcome::Refuse
)]
#[case::gpu_resource_with_unknown_strategy(
    vec![whole("GPU-a", H100)],
    None,
    &[("nvidia.com/gpu", "1")],
    Outcome::Unknown
)]
#[case::two_profiles_through_gpu_with_unknown_strategy(
    vec![s3g("MIG-s1"), s3g("MIG-s2"), s1g("MIG-s3")],
    None,
    &[("nvidia.com/gpu", "3")],
    Outcome::Refuse
)]
#[case::two_profiles_partly_through_gpu_with_unknown_strategy(
    vec![s3g("MIG-s1"), s3g("MIG-s2"), s1g("MIG-s3")],
    None,
    &[("nvidia.com/mig-3g.40gb", "2"), ("nvidia.com/gpu", "1")],
    Outcome::Refuse
)]
#[case::every_slice_by_its_own_name_and_a_whole_gpu_through_gpu(
    vec![whole("GPU-a", H100), s3g("MIG-s1"), s1g("MIG-s2")],
    None,
    &[("nvidia.com/gpu", "1"), ("nvidia.com/mig-3g.40gb", "1"), ("nvidia.com/mig-1g.10gb", "1")],
    Outcome::Unknown
)]
#[case::one_profile_through_gpu_with_unknown_strategy(
    vec![s3g("MIG-s1"), s3g("MIG-s2")],
    None,
    &[("nvidia.com/gpu", "2")],
    Outcome::Unknown
)]
#[case::single_strategy_gives_a_slice(
    vec![s3g("MIG-s1")],
    Some(MigStrategy::Single),
    &[("nvidia.com/gpu", "1")],
    Outcome::Pass
)]
#[case::single_strategy_advertises_no_mig_resources(
    vec![s3g("MIG-s1")],
    Some(MigStrategy::Single),
    &[("nvidia.com/mig-3g.40gb", "1")],
    Outcome::Refuse
)]
#[case::single_strategy_two_slices_of_one_shape(
    vec![s3g("MIG-s1"), s3g("MIG-s2")],
    Some(MigStrategy::Single),
    &[("nvidia.com/gpu", "2")],
    Outcome::Pass
)]
#[case::single_strategy_slices_of_two_shapes(
    vec![s1g("MIG-s1"), s3g("MIG-s2"), s3g("MIG-s3")],
    Some(MigStrategy::Single),
    &[("nvidia.com/gpu", "3")],
    Outcome::Refuse
)]
#[case::single_strategy_whole_gpus_and_slices(
    vec![whole("GPU-a", H100), s3g("MIG-s1")],
    Some(MigStrategy::Single),
    &[("nvidia.com/gpu", "2")],
    Outcome::Refuse
)]
#[case::none_strategy_advertises_no_mig_resources(
    vec![s3g("MIG-s1")],
    Some(MigStrategy::None),
    &[("nvidia.com/mig-3g.40gb", "1")],
    Outcome::Refuse
)]
#[case::other_vendors_resources_are_ignored(
    vec![s3g("MIG-s1")],
    Some(MigStrategy::Mixed),
    &[("nvidia.com/mig-3g.40gb", "1"), ("example.com/fpga", "1")],
    Outcome::Pass
)]
#[case::no_gpu_requested_at_all(vec![s3g("MIG-s1")], Some(MigStrategy::Mixed), &[], Outcome::Refuse)]
#[case::fractional_count(
    vec![s3g("MIG-s1")],
    Some(MigStrategy::Mixed),
    &[("nvidia.com/mig-3g.40gb", "500m")],
    Outcome::Unknown
)]
fn gpu_request(
    #[case] source: Vec<Device>,
    #[case] strategy: Option<MigStrategy>,
    #[case] requests: &[(&str, &str)],
    #[case] want: Outcome,
) {
    let target = restore_pod(source.clone(), strategy, requests);
    let r = check(full(source), target);
    assert_eq!(outcome(&r, CheckName::GPU_REQUEST), want, "{}", table(&r));
    assert_refusing(
        &r,
        if want == Outcome::Refuse {
            "gpu-request"
        } else {
            ""
        },
    );
}

#[test]
fn gpu_request_reasons_name_resources() {
    let s = vec![s3g("MIG-s1"), s3g("MIG-s2")];
    let r = check(
        full(s.clone()),
        restore_pod(s, Some(MigStrategy::Mixed), &[("nvidia.com/mig-3g.40gb", "1")]),
    );
    assert_eq!(
        r.reason,
        "gpu-request: source nvidia.com/mig-3g.40gb x2, target nvidia.com/mig-3g.40gb x1"
    );
}

/// Slices asked by name where the node advertises none: the same names on both sides must not
/// read as a match, so the target says why it cannot give them.
#[rstest]
#[case::single(MigStrategy::Single, "single")]
#[case::none(MigStrategy::None, "none")]
fn slices_a_node_does_not_advertise_say_so_in_the_target(#[case] strategy: MigStrategy, #[case] name: &str) {
    let s = vec![s3g("MIG-s1"), s3g("MIG-s2")];
    let r = check(
        full(s.clone()),
        restore_pod(s, Some(strategy), &[("nvidia.com/mig-3g.40gb", "2")]),
    );
    assert_eq!(
        r.reason,
        format!(
            "gpu-request: source nvidia.com/mig-3g.40gb x2, target nvidia.com/mig-3g.40gb x2 (not advertised under the {name} strategy)"
        )
    );
    assert_eq!(
        row_of(&r, CheckName::GPU_REQUEST).message,
        format!("the {name} strategy advertises no nvidia.com/mig-* resources")
    );
}

/// No node needed: a checkpoint on slices of two profiles can never come through
/// `nvidia.com/gpu`, so a pod not yet bound (no strategy known) is refused at creation.
#[test]
fn two_profiles_are_refused_through_nvidia_gpu_without_a_node() {
    let s = vec![s3g("MIG-s1"), s3g("MIG-s2"), s1g("MIG-s3")];
    let pod = restore_pod(s.clone(), None, &[("nvidia.com/gpu", "3")]);
    let r = miggate_compat::evaluate_target(
        &full(s).0,
        miggate_compat::Target::pod(pod.0.pod.as_ref().unwrap()),
        &miggate_compat::Options::mode(miggate_compat::Mode::Offer),
    );
    assert_refusing(&r, "gpu-request");
    insta::assert_snapshot!(
        "gpu_request_two_profiles_through_gpu",
        row_of(&r, CheckName::GPU_REQUEST).message
    );
    assert_eq!(
        r.reason,
        "gpu-request: source nvidia.com/mig-1g.10gb x1, nvidia.com/mig-3g.40gb x2, target nvidia.com/gpu x3"
    );
}

#[test]
fn the_single_strategy_gives_one_shape_per_node() {
    let s = vec![s1g("MIG-s1"), s3g("MIG-s2"), s3g("MIG-s3")];
    let r = check(
        full(s.clone()),
        restore_pod(s, Some(MigStrategy::Single), &[("nvidia.com/gpu", "3")]),
    );
    assert_refusing(&r, "gpu-request");
    assert_eq!(
        row_of(&r, CheckName::GPU_REQUEST).message,
        "under the single strategy every device nvidia.com/gpu gives on a node has the same shape; the checkpoint used 2 shapes (nvidia.com/mig-1g.10gb, nvidia.com/mig-3g.40gb)"
    );
    assert_eq!(
        r.reason,
        "gpu-request: source nvidia.com/mig-1g.10gb x1, nvidia.com/mig-3g.40gb x2, target nvidia.com/gpu x3"
    );
}

/// Found in review: two requests of `u64::MAX` overflowed the sum of the requests (a panic in
/// debug builds, a wrapped count in release).
#[test]
fn request_counts_at_the_edge_of_u64_refuse_without_a_panic() {
    let source = full(vec![s1g("MIG-s1")]).build();
    for strategy in ["mixed", "single", "none"] {
        for claims in [r#", "resourceClaims": []"#, ""] {
            let target = miggate_compat::from_str(&format!(
                r#"{{"apiVersion": "miggate.io/v1alpha1", "kind": "GpuManifest",
                    "pod": {{"gpuRequests": {{"nvidia.com/gpu": "18446744073709551615", "nvidia.com/mig-1g.10gb": "18446744073709551615"}}{claims}}},
                    "nvidia": {{"migStrategy": "{strategy}"}}}}"#
            ))
            .unwrap();
            let r = miggate_compat::evaluate(&source, &target, &exact());
            assert_eq!(
                outcome(&r, CheckName::GPU_REQUEST),
                Outcome::Refuse,
                "{strategy}{claims}: {}",
                table(&r)
            );
            let target = row_of(&r, CheckName::GPU_REQUEST).target.to_string();
            assert!(
                target.starts_with(
                    "nvidia.com/gpu x18446744073709551615, nvidia.com/mig-1g.10gb x18446744073709551615"
                ),
                "{target}"
            );
        }
    }
}

#[test]
fn a_compute_instance_checkpoint_cannot_be_requested_through_the_device_plugin() {
    let s = vec![ci("MIG-s1", P0, 1, 0)];
    let r = check(
        full(s.clone()),
        restore_pod(s, Some(MigStrategy::Mixed), &[("nvidia.com/mig-3g.40gb", "1")]),
    );
    assert_refusing(&r, "gpu-request");
    let row = row_of(&r, CheckName::GPU_REQUEST);
    assert!(row.message.contains("DRA"), "{}", row.message);
    assert!(row.message.contains("1c.3g.40gb"), "{}", row.message);
    assert_eq!(
        r.reason,
        "gpu-request: source 1c.3g.40gb x1, target nvidia.com/mig-3g.40gb x1"
    );
    insta::assert_snapshot!("gpu_request_compute_instance", row.message);
}

#[test]
fn a_compute_instance_refuses_whatever_order_an_unknown_slice_comes_in() {
    let unshaped = Device {
        mig_profile: None,
        ..s3g("MIG-s2")
    };
    for s in [
        vec![ci("MIG-s1", P0, 1, 0), unshaped.clone()],
        vec![unshaped.clone(), ci("MIG-s1", P0, 1, 0)],
    ] {
        let t = restore_pod(
            s.clone(),
            Some(MigStrategy::Mixed),
            &[("nvidia.com/mig-3g.40gb", "2")],
        );
        let r = check(full(s), t);
        assert_eq!(
            outcome(&r, CheckName::GPU_REQUEST),
            Outcome::Refuse,
            "{}",
            table(&r)
        );
        assert_eq!(
            row_of(&r, CheckName::GPU_REQUEST).source,
            "1c.3g.40gb x1, unknown x1"
        );
    }
}

#[test]
fn gpu_request_is_not_applicable_without_device_plugin_requests() {
    let s = vec![s3g("MIG-s1")];
    // GPUs through resource claims (DRA).
    let t = restore_pod(s.clone(), Some(MigStrategy::Mixed), &[]).claims(&["gpu"]);
    let r = check(full(s.clone()), t);
    assert_eq!(outcome(&r, CheckName::GPU_REQUEST), Outcome::NotApplicable);
    assert_refusing(&r, "");
    // No gpuRequests recorded.
    let r = check(full(s.clone()), full(s.clone()));
    assert_eq!(outcome(&r, CheckName::GPU_REQUEST), Outcome::NotApplicable);
    // Not applicable stays quiet in strict mode.
    let r = check_with(full(s.clone()), full(s), &strict(exact()));
    assert_eq!(outcome(&r, CheckName::GPU_REQUEST), Outcome::NotApplicable);
    assert_refusing(&r, "");
}

#[test]
fn requests_short_of_the_checkpoint_are_unknown_when_claims_are_not_recorded() {
    // Absent `resourceClaims` is unknown: the rest could come through a claim.
    let s = vec![s3g("MIG-s1"), s3g("MIG-s2")];
    let mut t = restore_pod(
        s.clone(),
        Some(MigStrategy::Mixed),
        &[("nvidia.com/mig-3g.40gb", "1")],
    );
    t.0.pod.as_mut().unwrap().resource_claims = None;
    let r = check(full(s.clone()), t.clone());
    assert_eq!(
        outcome(&r, CheckName::GPU_REQUEST),
        Outcome::Unknown,
        "{}",
        table(&r)
    );
    assert_refusing(&r, "");
    // ... but a request for something the checkpoint did not use refuses regardless.
    let mut t = restore_pod(
        s.clone(),
        Some(MigStrategy::Mixed),
        &[("nvidia.com/mig-1g.10gb", "1")],
    );
    t.0.pod.as_mut().unwrap().resource_claims = None;
    assert_refusing(&check(full(s.clone()), t), "gpu-request");
    let mut t = restore_pod(
        s.clone(),
        Some(MigStrategy::Mixed),
        &[("nvidia.com/mig-3g.40gb", "3")],
    );
    t.0.pod.as_mut().unwrap().resource_claims = None;
    assert_refusing(&check(full(s), t), "gpu-request");
}
