#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The MIG cases: kinds (whole GPU vs slice), slice shapes with counts, models, compute
//! instances, offer mode against node inventories, `gpu-request`, skips and the report's shape.
//!
//! Both sides carry every other fact (host, driver, pod) so that a case's refusing set is
//! exactly what the devices make it, and strict mode is meaningful.

mod common;

use common::*;
use miggate_compat::{CheckName, Device, Error, MigStrategy, Options, Outcome, Report, parse_skip};
use rstest::rstest;

const P0: &str = "GPU-4b5a1c6e-8d2f-4e1a-9b7c-3d2e1f0a9b8c";
const P1: &str = "GPU-9c8b7a6f-5e4d-4c3b-8a29-1f0e9d8c7b6a";

fn s3g(uuid: &str) -> Device {
    slice(uuid, H100, "3g.40gb")
}

fn s1g(uuid: &str) -> Device {
    slice(uuid, H100, "1g.10gb")
}

fn row_of(r: &Report, c: CheckName) -> &miggate_compat::CheckResult {
    r.result(c).unwrap()
}

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
