//! What each source can and cannot tell of a node: a certain count of zero is a shortfall
//! whatever else is unknown, labels in flux never decide, the MIG strategy the cluster
//! publishes reaches every inventory, and a DynamicMIG pool is read as what its GPUs can
//! supply. Fixtures: `testdata/inventory/` (provenance in its README).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use k8s_openapi::api::resource::v1::ResourceSlice;
use miggate_compat::{CheckName, Gpu, GpuManifest, Mode, Options, Outcome, Target, evaluate_target};
use miggate_inventory::{self as inventory, Inventory, Source};
use rstest::rstest;
use support::gpu_node_7::{
    Ckpt, KERNEL, List, checkpoint, ckpt, fixture, gpu_node, node, table, verdict, with_labels,
};

mod support;
// ---------------------------------------------------------------------------------------------
// What each source can and cannot tell.

/// A checkpoint on two 3g.40gb and one 1g.10gb slice.
fn two_3g_one_1g() -> GpuManifest {
    checkpoint(
        KERNEL,
        "580.82.07",
        vec![Gpu::h100().cut(["3g.40gb", "3g.40gb", "1g.10gb"])],
    )
}

/// Rule: an unknown in one part of an inventory never masks a shortfall certain in another.
/// GFD says exactly how many 1g.10gb slices the node has (none); that its GPUs have no UUID
/// (so whether each is whole is unknown) cannot make one appear. With the node's
/// `nvidia.com/gpu` capacity (whole GPUs known) and without it (an upper bound).
#[rstest]
#[case::whole_count_from_capacity(true)]
#[case::whole_count_unknown(false)]
fn a_gfd_count_of_zero_is_a_certain_shortfall(#[case] capacity: bool) {
    let mut n = with_labels(
        node("gfd-mixed-gpu-node-7.yaml"),
        &[("nvidia.com/mig-1g.10gb.count", "0")],
    );
    if !capacity {
        n.status
            .as_mut()
            .unwrap()
            .capacity
            .as_mut()
            .unwrap()
            .remove("nvidia.com/gpu");
    }
    let inv = inventory::best(&inventory::NodeObjects {
        gpu_node: None,
        node: Some(&n),
        slices: &[],
    })
    .unwrap();
    assert_eq!(inv.source, Source::GfdLabels);
    assert!(inv.slices_listed);
    let report = evaluate_target(&two_3g_one_1g(), inv.target(), &Options::mode(Mode::Offer));
    assert!(!report.compatible, "{}", table(&report));
    let profile = report.result(CheckName::MIG_PROFILE).unwrap();
    assert_eq!(profile.outcome, Outcome::Refuse, "{}", table(&report));
    assert_eq!(profile.source.to_string(), "1g.10gb x1, 3g.40gb x2");
    assert_eq!(profile.target.to_string(), "3g.40gb x2");
    assert!(
        report
            .reason
            .contains("mig-profile: source 1g.10gb x1, 3g.40gb x2, target 3g.40gb x2"),
        "{}",
        report.reason
    );
    // The whole-GPU checkpoint still fits what the labels may hold, as a warning.
    let whole = evaluate_target(&ckpt(Ckpt::WholeH100), inv.target(), &Options::mode(Mode::Offer));
    assert!(whole.compatible, "{}", table(&whole));
}

/// Rule: labels in flux never decide. mig-manager mid-way (or failed) makes every fact the
/// node's labels give unknown, so no checkpoint is refused from them, whatever the labels
/// say (MIG counts or, as in the refusal this replaced, only `gpu.count`), and the note
/// says the node is being reconfigured.
#[rstest]
fn labels_in_flux_never_refuse(
    #[values("pending", "rebooting", "failed")] state: &str,
    #[values(
        Ckpt::Two3g,
        Ckpt::Three3g,
        Ckpt::WholeH100,
        Ckpt::OtherKernel,
        Ckpt::OtherDriver,
        Ckpt::A100Slices
    )]
    c: Ckpt,
    #[values("mig-counts", "gpu-count-only", "with-gpu-node")] labels: &str,
) {
    let base = match labels {
        "mig-counts" => node("gfd-pending-gpu-node-7.yaml"),
        _ => with_labels(
            node("gfd-pending-gpu-node-7.yaml"),
            &[
                ("nvidia.com/mig-3g.40gb.count", ""),
                ("nvidia.com/gpu.count", "1"),
            ],
        ),
    };
    let n = with_labels(base, &[("nvidia.com/mig.config.state", state)]);
    let g = gpu_node();
    let inv = inventory::best(&inventory::NodeObjects {
        gpu_node: (labels == "with-gpu-node").then_some(&g),
        node: Some(&n),
        slices: &[],
    })
    .unwrap();
    for source in [ckpt(c), two_3g_one_1g()] {
        let report = evaluate_target(&source, inv.target(), &Options::mode(Mode::Offer));
        assert!(report.compatible, "{state} {c:?} {labels}\n{}", table(&report));
    }
    let said = if state == "failed" {
        "mig-manager did not apply its MIG layout"
    } else {
        "is being reconfigured"
    };
    assert!(
        matches!(&inv.notes[0], inventory::Note::Reconfiguring { state: s, .. } if s == state),
        "{:?}",
        inv.notes
    );
    let note = inv.notes[0].to_string();
    assert!(note.contains(said), "{note}");
    assert!(
        note.contains(&format!("nvidia.com/mig.config.state={state}")),
        "{note}"
    );
}

#[test]
fn labels_in_flux_wording() {
    let inv = inventory::best(&inventory::NodeObjects {
        gpu_node: None,
        node: Some(&node("gfd-pending-gpu-node-7.yaml")),
        slices: &[],
    })
    .unwrap();
    insta::assert_yaml_snapshot!("in_flux", (inv.source.as_str(), &*inv.manifest, &inv.notes));
}

/// Rule: the MIG strategy is a node fact the cluster publishes. A `GpuNode` without one (a
/// capture leaves it unknown) takes GFD's `nvidia.com/mig.strategy` label; one that carries
/// it (`miggate publish --mig-strategy`) keeps its own.
#[rstest]
#[case::published(
    Some(miggate_compat::MigStrategy::Single),
    None,
    Some(miggate_compat::MigStrategy::Single)
)]
#[case::published_wins_over_label(
    Some(miggate_compat::MigStrategy::Mixed),
    Some("single"),
    Some(miggate_compat::MigStrategy::Mixed)
)]
#[case::from_label(None, Some("mixed"), Some(miggate_compat::MigStrategy::Mixed))]
#[case::unknown(None, None, None)]
#[case::label_not_a_strategy(None, Some("bogus"), None)]
fn the_strategy_reaches_the_inventory(
    #[case] published: Option<miggate_compat::MigStrategy>,
    #[case] label: Option<&str>,
    #[case] want: Option<miggate_compat::MigStrategy>,
) {
    let mut g = gpu_node();
    g.spec.manifest.nvidia.as_mut().unwrap().mig_strategy = published;
    let n = with_labels(
        node("node-gpu-node-7.yaml"),
        &[("nvidia.com/mig.strategy", label.unwrap_or(""))],
    );
    let inv = inventory::best(&inventory::NodeObjects {
        gpu_node: Some(&g),
        node: Some(&n),
        slices: &[],
    })
    .unwrap();
    assert_eq!(inv.source, Source::GpuNode);
    assert_eq!(inv.manifest.nvidia.as_ref().unwrap().mig_strategy, want);
}

// ---------------------------------------------------------------------------------------------
// DynamicMIG: slices that list what a GPU *can* supply.

fn dynamic() -> Inventory {
    let slices = serde_saphyr::from_str::<List<ResourceSlice>>(&fixture("dra-dynmig-gpu-node-8.yaml"))
        .unwrap()
        .items;
    let refs: Vec<&ResourceSlice> = slices.iter().collect();
    inventory::from_resource_slices("gpu-node-8", None, &refs)
        .unwrap()
        .unwrap()
}

#[test]
fn a_dynamic_mig_pool_is_read_as_possible_supply() {
    let inv = dynamic();
    assert_eq!(inv.source, Source::ResourceSlice);
    let supply = inv.supply.as_ref().expect("a DynamicMIG pool has a supply");
    // Per GPU: the full GPU and 7 + 3 + 2 + 1 possible partitions.
    assert_eq!(supply.offered(), 2 * 14);
    assert_eq!(
        inv.manifest.devices(),
        None,
        "no device exists until a claim is allocated"
    );
    assert!(
        matches!(inv.notes[0], inventory::Note::DynamicMig { .. }),
        "{:?}",
        inv.notes
    );
    insta::assert_yaml_snapshot!("dynamic_mig", (&*inv.manifest, &inv.notes));
}

/// Two H100s partitioned on demand, with 8 memory slices each: what fits their counters is
/// admitted; a shape whose profiles exist one by one but not together is refused, naming
/// the shape's check with both values.
#[rstest]
#[case::two_3g_and_a_1g_over_two_gpus(vec![Gpu::h100().cut(["3g.40gb", "3g.40gb", "1g.10gb"])], &[])]
#[case::seven_1g_and_a_3g(
    vec![Gpu::h100().cut(["1g.10gb"; 7]), Gpu::h100().cut(["3g.40gb"])],
    &[]
)]
#[case::a_whole_gpu_and_a_3g(vec![Gpu::h100(), Gpu::h100().cut(["3g.40gb"])], &[])]
#[case::a_3g_a_2g_and_a_1g_on_one_gpu(vec![Gpu::h100().cut(["3g.40gb", "2g.20gb", "1g.10gb"])], &[])]
#[case::four_3g_and_a_1g(
    vec![Gpu::h100().cut(["3g.40gb"; 4]), Gpu::h100().cut(["1g.10gb"])],
    &["gpu-model", "gpu-count", "mig-profile"]
)]
#[case::two_whole_gpus_and_a_3g(
    vec![Gpu::h100(), Gpu::h100(), Gpu::h100().cut(["3g.40gb"])],
    &["gpu-model", "gpu-count"]
)]
#[case::fifteen_1g(
    vec![Gpu::h100().cut(["1g.10gb"; 7]), Gpu::h100().cut(["1g.10gb"; 7]), Gpu::h100().cut(["1g.10gb"])],
    &["gpu-model", "gpu-count", "mig-profile"]
)]
fn dynamic_mig_supply_decides_by_counters(
    #[case] gpus: Vec<miggate_compat::GpuBuilder>,
    #[case] refused: &[&str],
) {
    let inv = dynamic();
    let source = checkpoint(KERNEL, "580.82.07", gpus);
    let judged = inv.manifest_for(&source);
    let report = evaluate_target(&source, Target::node(&judged), &Options::mode(Mode::Offer));
    let (_, by) = verdict(&report);
    assert_eq!(by, refused.to_vec(), "{}", table(&report));
    if refused.contains(&"mig-profile") {
        let row = report.result(CheckName::MIG_PROFILE).unwrap();
        assert!(row.message.to_string().contains("short of"), "{}", table(&report));
    }
    // The devices judged are possible ones: slices without a UUID, so no device map.
    assert!(
        judged
            .devices()
            .unwrap()
            .iter()
            .filter(|d| d.mig_profile.is_some())
            .all(|d| d.uuid.is_none())
    );
}

#[test]
fn dynamic_mig_shortfall_wording() {
    let inv = dynamic();
    let source = checkpoint(
        KERNEL,
        "580.82.07",
        vec![Gpu::h100().cut(["3g.40gb"; 4]), Gpu::h100().cut(["1g.10gb"])],
    );
    let judged = inv.manifest_for(&source);
    let report = evaluate_target(&source, Target::node(&judged), &Options::mode(Mode::Offer));
    insta::assert_snapshot!("dynamic_mig_shortfall", report.reason);
}

/// A checkpoint whose devices are not known well enough to place stays unknown, never a
/// refusal on a guess.
#[test]
fn dynamic_mig_with_an_unknown_source_shape_is_unknown() {
    let inv = dynamic();
    let mut source = checkpoint(KERNEL, "580.82.07", vec![Gpu::h100().cut(["3g.40gb"])]);
    source.nvidia.as_mut().unwrap().devices.as_mut().unwrap()[0].mig_profile = None;
    let judged = inv.manifest_for(&source);
    assert_eq!(judged.devices(), None);
    let report = evaluate_target(&source, Target::node(&judged), &Options::mode(Mode::Offer));
    assert!(report.compatible, "{}", table(&report));
}

/// A hostile pool: a thousand possible partitions of one profile on one GPU, counters to hold
/// them all. The search stops at its budget and the GPU checks stay unknown: no refusal on a
/// guess, no unbounded work.
#[test]
fn a_dynamic_pool_past_the_search_budget_is_unknown() {
    let slices = serde_saphyr::from_str::<List<ResourceSlice>>(&fixture("dra-dynmig-gpu-node-8.yaml"))
        .unwrap()
        .items;
    let mut slices: Vec<ResourceSlice> = slices;
    for set in slices[0].spec.shared_counters.as_mut().unwrap() {
        for counter in set.counters.values_mut() {
            counter.value = k8s_openapi::apimachinery::pkg::api::resource::Quantity("1000Ti".into());
        }
    }
    let one = slices[1].spec.devices.as_ref().unwrap()[1].clone();
    let mut many = vec![slices[1].spec.devices.as_ref().unwrap()[0].clone()];
    for i in 0..1000 {
        let mut d = one.clone();
        d.name = format!("gpu-0-mig-1g10gb-19-{i}");
        many.push(d);
    }
    slices[1].spec.devices = Some(many);
    let refs: Vec<&ResourceSlice> = slices.iter().collect();
    let inv = inventory::from_resource_slices("gpu-node-8", None, &refs)
        .unwrap()
        .unwrap();
    let source = checkpoint(KERNEL, "580.82.07", vec![Gpu::h100().cut(["1g.10gb"; 7])]);
    assert_eq!(inv.manifest_for(&source).devices(), None);
    // A shape the budget allows is still placed.
    let small = checkpoint(KERNEL, "580.82.07", vec![Gpu::h100().cut(["1g.10gb"])]);
    assert_eq!(inv.manifest_for(&small).devices().map(<[_]>::len), Some(1));
}
