//! `miggate claim`: the template's selectors, run as the scheduler runs them (Kubernetes' CEL
//! with its semver library, `kube-cel`) over the NVIDIA DRA driver's fixture slices, pick the
//! devices of each of the checkpoint's classes and no others; the template and its name; and
//! why a checkpoint cannot be claimed. That they pick exactly what offer mode counts in the
//! node's inventory is the inventory reader's test (`inventory/tests/claim_selectors.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;

use k8s_openapi::api::resource::v1::{Device, ResourceSlice};
use miggate_compat::GpuManifest;
use miggate_crds::claim::{self, ClaimRequest};
use miggate_testkit::testdata;
use rstest::rstest;
use serde_json::{Value, json};
use support::dra::*;

mod support;

#[test]
fn a_driver_other_than_the_checkpoints_is_never_picked() {
    let mut checkpoint = checkpoint(json!([slice("3g.40gb", 1)]));
    checkpoint.nvidia.as_mut().unwrap().driver_version = Some(miggate_compat::VersionText::new("570.124.06"));
    let slices = slices("dra-v25.12-gpu-node-7.yaml");
    let devices: Vec<Device> = slices
        .iter()
        .flat_map(|s| s.spec.devices.clone().unwrap_or_default())
        .collect();
    let requests = claim::requests(&checkpoint).unwrap();
    assert_eq!(picked(&requests[0], &devices), BTreeSet::new());
}

#[test]
fn the_template_is_a_resource_claim_template() {
    let template =
        claim::claim_template("vllm-restore", &manifest("checkpoint-h100-3g40gb-x2.yaml")).unwrap();
    let value = serde_json::to_value(&template).unwrap();
    insta::assert_yaml_snapshot!(value);
}

#[rstest]
#[case::no_devices(json!({"apiVersion": "miggate.io/v1alpha1", "kind": "GpuManifest", "nvidia": {}}), "does not record its devices")]
#[case::no_nvidia(json!({"apiVersion": "miggate.io/v1alpha1", "kind": "GpuManifest"}), "no nvidia section")]
#[case::empty(json!({"apiVersion": "miggate.io/v1alpha1", "kind": "GpuManifest", "nvidia": {"devices": []}}), "needs no claim")]
#[case::unshaped_slice(json!({"apiVersion": "miggate.io/v1alpha1", "kind": "GpuManifest", "nvidia": {"devices": [
    {"uuid": "MIG-00000000-0000-5000-8000-000000000001", "productName": "NVIDIA H100 80GB HBM3"}]}}), "unrecorded profile")]
#[case::no_product(json!({"apiVersion": "miggate.io/v1alpha1", "kind": "GpuManifest", "nvidia": {"devices": [
    {"uuid": "GPU-00000000-0000-4000-8000-000000000001"}]}}), "no product name")]
#[case::smuggled_quote(json!({"apiVersion": "miggate.io/v1alpha1", "kind": "GpuManifest", "nvidia": {"devices": [
    {"uuid": "GPU-00000000-0000-4000-8000-000000000001", "productName": "x\u{202e}y"}]}}), "cannot be put in a selector")]
#[case::bad_version(json!({"apiVersion": "miggate.io/v1alpha1", "kind": "GpuManifest", "nvidia": {"driverVersion": "580.x", "devices": [
    {"uuid": "GPU-00000000-0000-4000-8000-000000000001", "productName": "NVIDIA L4"}]}}), "not numbers separated by dots")]
fn a_checkpoint_that_cannot_be_claimed_says_why(#[case] doc: Value, #[case] why: &str) {
    let manifest = miggate_compat::from_str(&doc.to_string()).unwrap();
    let error = claim::requests(&manifest).unwrap_err().to_string();
    assert!(error.contains(why), "{error}");
}

#[test]
fn a_quote_in_a_product_name_stays_inside_its_string() {
    let checkpoint = checkpoint(json!([whole("NVIDIA L4' || true || '", 1)]));
    let request = &claim::requests(&checkpoint).unwrap()[0];
    let l4 = json!({"driver": "gpu.nvidia.com", "attributes": {"gpu.nvidia.com": {
        "type": "gpu", "productName": "NVIDIA L4", "driverVersion": "580.82.7", "cudaDriverVersion": "13.0.0"}}});
    assert!(
        !eval(&selector_for_test(&request.selector), &l4),
        "{}",
        request.selector
    );
}

/// The devices a request's class and selector pick, by device name (a DynamicMIG partition has
/// no `uuid`: it does not exist until allocated).
fn picked_names(request: &ClaimRequest, devices: &[Device]) -> BTreeSet<String> {
    let selector = selector_for_test(&request.selector);
    let class = class_selector(request.device_class);
    devices
        .iter()
        .filter(|d| {
            let v = cel_device(d);
            eval(&class, &v) && eval(&selector, &v)
        })
        .map(|d| d.name.clone())
        .collect()
}

#[test]
fn on_a_dynamic_mig_node_the_selectors_pick_every_possible_partition_of_the_class() {
    // The scheduler then picks among them under the GPUs' shared counters (KEP-4815), so the
    // claim asks for shapes and the counters decide which combinations exist.
    let text = testdata("inventory/dra-dynmig-gpu-node-8.yaml");
    let slices = serde_saphyr::from_str::<List<ResourceSlice>>(&text)
        .unwrap()
        .items;
    let devices: Vec<Device> = slices
        .iter()
        .flat_map(|s| s.spec.devices.clone().unwrap_or_default())
        .collect();
    let checkpoint = checkpoint(json!([
        slice("3g.40gb", 1),
        slice("3g.40gb", 2),
        slice("1g.10gb", 3)
    ]));
    let requests = claim::requests(&checkpoint).unwrap();
    let by_name = |name: &str| requests.iter().find(|r| r.name == name).unwrap();
    let names = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(
        picked_names(by_name("mig-3g-40gb"), &devices),
        names(&[
            "gpu-0-mig-3g40gb-9-0",
            "gpu-0-mig-3g40gb-9-4",
            "gpu-1-mig-3g40gb-9-0",
            "gpu-1-mig-3g40gb-9-4"
        ])
    );
    let ones: Vec<String> = (0..7)
        .flat_map(|i| {
            [
                format!("gpu-0-mig-1g10gb-19-{i}"),
                format!("gpu-1-mig-1g10gb-19-{i}"),
            ]
        })
        .collect();
    assert_eq!(
        picked_names(by_name("mig-1g-10gb"), &devices),
        ones.into_iter().collect()
    );
    // A whole GPU is picked as the full GPU device, which consumes every counter of its GPU.
    let whole = claim::requests(&checkpoint_whole()).unwrap();
    assert_eq!(picked_names(&whole[0], &devices), names(&["gpu-0", "gpu-1"]));
}

fn checkpoint_whole() -> GpuManifest {
    checkpoint(json!([whole("NVIDIA H100 80GB HBM3", 1)]))
}

/// `miggate-<checkpoint>`, while that is an object name (at most 253 bytes).
#[rstest]
#[case::a_checkpoint("vllm-ckpt".to_string(), true)]
#[case::the_longest_that_fits("c".repeat(245), true)]
#[case::one_too_long("c".repeat(246), false)]
fn the_template_name_convention(#[case] checkpoint: String, #[case] fits: bool) {
    let want = fits.then(|| format!("miggate-{checkpoint}"));
    assert_eq!(claim::template_name(&checkpoint), want);
}
