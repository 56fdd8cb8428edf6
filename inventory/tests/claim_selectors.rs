//! `miggate claim` against the inventory reader: the template's selectors, run as the
//! scheduler runs them (Kubernetes' CEL with its semver library, `kube-cel`) over the NVIDIA DRA
//! driver's fixture slices, pick exactly the devices offer mode counts in the node's inventory
//! (read from the same slices) for each of the checkpoint's classes, and the claim is
//! satisfiable exactly where offer mode finds the node fits. The selectors' own tests are
//! crds' (`crds/tests/claim.rs`, whose CEL harness this repeats).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;

use k8s_openapi::api::resource::v1::{Device, DeviceAttribute, ResourceSlice};
use kube_cel::{KubeCelExt, cel};
use miggate_compat::{
    CheckName, DeviceKind, GpuManifest, Mode, Options, Outcome, SliceShape, Target, evaluate_target,
};
use miggate_crds::claim::{self, ClaimRequest, GPU_CLASS, MIG_CLASS};
use miggate_inventory as inventory;
use rstest::rstest;
use serde::Deserialize;
use serde_json::{Value, json};
use support::testdata;

mod support;

#[derive(Deserialize)]
struct List<T> {
    items: Vec<T>,
}

/// The slices the scheduler would read for gpu-node-7: the driver's, for that node, at the
/// pool's newest generation.
fn slices(file: &str) -> Vec<ResourceSlice> {
    let text = testdata(&format!("inventory/{file}"));
    let all: Vec<ResourceSlice> = match serde_saphyr::from_str::<List<ResourceSlice>>(&text) {
        Ok(list) => list.items,
        Err(_) => vec![serde_saphyr::from_str(&text).unwrap()],
    };
    let ours: Vec<ResourceSlice> = all
        .into_iter()
        .filter(|s| {
            s.spec.driver == inventory::DRA_DRIVER && s.spec.node_name.as_deref() == Some("gpu-node-7")
        })
        .collect();
    let newest = ours.iter().map(|s| s.spec.pool.generation).max().unwrap();
    ours.into_iter()
        .filter(|s| s.spec.pool.generation == newest)
        .collect()
}

/// A device as CEL sees it: `device.driver` and `device.attributes[domain][name]`. Bare
/// attribute names belong to the driver's domain; version attributes are kept as their text
/// and read through `semver()` (see [`selector_for_test`]).
fn cel_device(device: &Device) -> Value {
    let mut ours = serde_json::Map::new();
    for (name, attribute) in device.attributes.iter().flatten() {
        let DeviceAttribute {
            bool,
            int,
            string,
            version,
            ..
        } = attribute;
        let value = match (bool, int, string, version) {
            (Some(b), ..) => json!(b),
            (_, Some(i), ..) => json!(i),
            (_, _, Some(s), _) => json!(s),
            (_, _, _, Some(v)) => json!(v),
            _ => continue,
        };
        if !name.contains('/') {
            ours.insert(name.clone(), value);
        }
    }
    json!({"driver": inventory::DRA_DRIVER, "attributes": {inventory::DRA_DRIVER: ours}})
}

/// The selector with each version attribute read through `semver()`: the driver publishes them
/// as CEL versions, which a Rust value cannot be made into, so the fixture keeps their text.
fn selector_for_test(selector: &str) -> String {
    ["driverVersion", "cudaDriverVersion"]
        .iter()
        .fold(selector.to_string(), |s, name| {
            let attribute = format!("device.attributes['{}'].{name}", inventory::DRA_DRIVER);
            s.replace(
                &format!("{attribute}.compareTo"),
                &format!("semver({attribute}).compareTo"),
            )
        })
}

/// The DeviceClasses' own selectors, as the NVIDIA DRA driver's chart installs them.
fn class_selector(class: &str) -> String {
    let kind = match class {
        MIG_CLASS => "mig",
        GPU_CLASS => "gpu",
        other => panic!("no class {other}"),
    };
    format!("device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == '{kind}'")
}

fn eval(expression: &str, device: &Value) -> bool {
    let program = cel::Program::compile(expression).unwrap_or_else(|e| panic!("{expression}: {e:?}"));
    let mut context = cel::Context::default().with_all();
    context.add_variable("device", device.clone()).unwrap();
    match program.execute(&context) {
        Ok(cel::Value::Bool(b)) => b,
        other => panic!("{expression}: {other:?}"),
    }
}

/// The UUIDs of the devices a request's class and selector pick.
fn picked(request: &ClaimRequest, devices: &[Device]) -> BTreeSet<String> {
    let selector = selector_for_test(&request.selector);
    let class = class_selector(request.device_class);
    devices
        .iter()
        .map(|d| (d, cel_device(d)))
        .filter(|(_, v)| eval(&class, v) && eval(&selector, v))
        .map(|(d, _)| d.attributes.as_ref().unwrap()["uuid"].string.clone().unwrap())
        .collect()
}

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

fn manifest(file: &str) -> GpuManifest {
    miggate_compat::from_str(&testdata(&format!("manifests/{file}"))).unwrap()
}

/// A checkpoint of the given devices on gpu-node-7's driver.
fn checkpoint(devices: Value) -> GpuManifest {
    let doc = json!({"apiVersion": "miggate.io/v1alpha1", "kind": "GpuManifest",
        "nvidia": {"driverVersion": "580.82.07", "cudaDriverVersion": "13.0", "devices": devices}});
    miggate_compat::from_str(&doc.to_string()).unwrap()
}

fn slice(profile: &str, n: u32) -> Value {
    json!({"uuid": format!("MIG-00000000-0000-5000-8000-{n:012}"), "parentUuid": "GPU-00000000-0000-4000-8000-000000000000",
        "productName": "NVIDIA H100 80GB HBM3", "migProfile": profile})
}

fn whole(product: &str, n: u32) -> Value {
    json!({"uuid": format!("GPU-00000000-0000-4000-8000-{n:012}"), "productName": product})
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
