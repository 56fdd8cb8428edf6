//! `miggate claim` against the inventory reader: the template's selectors, run as the
//! scheduler runs them (Kubernetes' CEL with its semver library, `kube-cel`) over the NVIDIA DRA
//! driver's fixture slices, pick exactly the devices offer mode counts in the node's inventory
//! (read from the same slices) for each of the checkpoint's classes, and the claim is
//! satisfiable exactly where offer mode finds the node fits. The selectors' own tests are
//! crds' (`crds/tests/claim.rs`, whose CEL harness, `crds/tests/support/dra.rs`, this includes).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;

use dra::*;
use k8s_openapi::api::resource::v1::{Device, ResourceSlice};
use miggate_compat::{
    CheckName, DeviceKind, GpuManifest, Mode, Options, Outcome, SliceShape, Target, evaluate_target,
};
use miggate_crds::claim::{self, ClaimRequest};
use miggate_inventory as inventory;
use rstest::rstest;
use serde_json::json;

/// The DRA driver's slices, CEL harness and checkpoints of crds' claim tests: one home.
#[path = "../../crds/tests/support/dra.rs"]
mod dra;

/// The UUIDs offer mode counts for a request's class: the inventory's devices of the same kind,
/// model and profile, when the node's driver versions pass the checks.
fn counted(request: &ClaimRequest, inventory: &GpuManifest, checkpoint: &GpuManifest) -> BTreeSet<String> {
    let versions_pass = {
        let report = evaluate_target(checkpoint, Target::node(inventory), &Options::mode(Mode::Offer));
        report
            .result(CheckName::DRIVER_VERSION)
            .is_some_and(|r| r.outcome != Outcome::Refuse)
    };
    if !versions_pass {
        return BTreeSet::new();
    }
    inventory
        .nvidia
        .as_ref()
        .and_then(|n| n.devices.as_deref())
        .unwrap_or_default()
        .iter()
        .filter(|d| d.model() == Some(request.product.as_str()))
        .filter(|d| match (&request.profile, d.kind(), d.slice_shape()) {
            (Some(p), DeviceKind::Slice, Some(SliceShape::Known(q))) => q.as_str() == p,
            (None, DeviceKind::Whole, _) => true,
            _ => false,
        })
        .map(|d| d.uuid.as_ref().unwrap().to_string())
        .collect()
}

#[rstest]
#[case::two_3g40gb(checkpoint(json!([slice("3g.40gb", 1), slice("3g.40gb", 2)])), true)]
#[case::three_3g40gb(checkpoint(json!([slice("3g.40gb", 1), slice("3g.40gb", 2), slice("3g.40gb", 3)])), false)]
#[case::slices_and_a_whole_gpu(checkpoint(json!([slice("3g.40gb", 1), slice("3g.40gb", 2), whole("NVIDIA H100 80GB HBM3", 3)])), true)]
#[case::a_profile_the_node_lacks(checkpoint(json!([slice("3g.40gb", 1), slice("1g.10gb", 2)])), false)]
#[case::two_whole_gpus(checkpoint(json!([whole("NVIDIA H100 80GB HBM3", 1), whole("NVIDIA H100 80GB HBM3", 2)])), false)]
#[case::another_product(checkpoint(json!([whole("NVIDIA A100-SXM4-80GB", 1)])), false)]
#[case::the_recorded_checkpoint(manifest("checkpoint-h100-3g40gb-x2.yaml"), true)]
#[case::the_recorded_whole_checkpoint(manifest("checkpoint-h100-whole-x2.json"), false)]
fn selectors_pick_exactly_what_offer_mode_counts(
    #[case] checkpoint: GpuManifest,
    #[case] fits: bool,
    #[values("dra-v25.12-gpu-node-7.yaml", "dra-v25.3-gpu-node-7.yaml")] fixture: &str,
) {
    let slices = slices(fixture);
    let refs: Vec<&ResourceSlice> = slices.iter().collect();
    let inventory = inventory::from_resource_slices("gpu-node-7", None, &refs)
        .unwrap()
        .unwrap()
        .manifest;
    let devices: Vec<Device> = slices
        .iter()
        .flat_map(|s| s.spec.devices.clone().unwrap_or_default())
        .collect();

    let requests = claim::requests(&checkpoint).unwrap();
    let mut satisfiable = true;
    let mut taken = BTreeSet::new();
    for request in &requests {
        let picked = picked(request, &devices);
        assert_eq!(
            picked,
            counted(request, &inventory, &checkpoint),
            "{fixture}: request {}",
            request.name
        );
        // Requests of different classes never compete for one device.
        assert!(picked.is_disjoint(&taken), "{fixture}: {}", request.name);
        taken.extend(picked.iter().cloned());
        satisfiable &= picked.len() >= request.count;
    }
    assert_eq!(satisfiable, fits, "{fixture}: the claim against the node");
    let report = evaluate_target(&checkpoint, Target::node(&inventory), &Options::mode(Mode::Offer));
    assert_eq!(
        report.compatible, fits,
        "{fixture}: offer mode: {}",
        report.reason
    );
}
