//! The NVIDIA DRA driver's view of gpu-node-7 for claim tests, shared by `crds/tests/claim.rs`
//! and `inventory/tests/claim_selectors.rs` (included there by path): its ResourceSlices, each
//! device as CEL sees it, the DeviceClasses' selectors, and the devices a claim request picks;
//! and the checkpoints those tests claim.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;

use k8s_openapi::api::resource::v1::{Device, DeviceAttribute, ResourceSlice};
use kube_cel::{KubeCelExt, cel};
use miggate_compat::GpuManifest;
use miggate_crds::claim::{ClaimRequest, GPU_CLASS, MIG_CLASS};
use miggate_testkit::testdata;
use miggate_wire::dra::DRIVER as DRA_DRIVER;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize)]
pub struct List<T> {
    pub items: Vec<T>,
}

/// The slices the scheduler would read for gpu-node-7: the driver's, for that node, at the
/// pool's newest generation.
pub fn slices(file: &str) -> Vec<ResourceSlice> {
    let text = testdata(&format!("inventory/{file}"));
    let all: Vec<ResourceSlice> = match serde_saphyr::from_str::<List<ResourceSlice>>(&text) {
        Ok(list) => list.items,
        Err(_) => vec![serde_saphyr::from_str(&text).unwrap()],
    };
    let ours: Vec<ResourceSlice> = all
        .into_iter()
        .filter(|s| s.spec.driver == DRA_DRIVER && s.spec.node_name.as_deref() == Some("gpu-node-7"))
        .collect();
    let newest = ours.iter().map(|s| s.spec.pool.generation).max().unwrap();
    ours.into_iter()
        .filter(|s| s.spec.pool.generation == newest)
        .collect()
}

/// A device as CEL sees it: `device.driver` and `device.attributes[domain][name]`. Bare
/// attribute names belong to the driver's domain; version attributes are kept as their text
/// and read through `semver()` (see [`selector_for_test`]).
pub fn cel_device(device: &Device) -> Value {
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
    json!({"driver": DRA_DRIVER, "attributes": {DRA_DRIVER: ours}})
}

/// The selector with each version attribute read through `semver()`: the driver publishes them
/// as CEL versions, which a Rust value cannot be made into, so the fixture keeps their text.
pub fn selector_for_test(selector: &str) -> String {
    ["driverVersion", "cudaDriverVersion"]
        .iter()
        .fold(selector.to_string(), |s, name| {
            let attribute = format!("device.attributes['{}'].{name}", DRA_DRIVER);
            s.replace(
                &format!("{attribute}.compareTo"),
                &format!("semver({attribute}).compareTo"),
            )
        })
}

/// The DeviceClasses' own selectors, as the NVIDIA DRA driver's chart installs them.
pub fn class_selector(class: &str) -> String {
    let kind = match class {
        MIG_CLASS => "mig",
        GPU_CLASS => "gpu",
        other => panic!("no class {other}"),
    };
    format!("device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == '{kind}'")
}

pub fn eval(expression: &str, device: &Value) -> bool {
    let program = cel::Program::compile(expression).unwrap_or_else(|e| panic!("{expression}: {e:?}"));
    let mut context = cel::Context::default().with_all();
    context.add_variable("device", device.clone()).unwrap();
    match program.execute(&context) {
        Ok(cel::Value::Bool(b)) => b,
        other => panic!("{expression}: {other:?}"),
    }
}

/// The UUIDs of the devices a request's class and selector pick.
pub fn picked(request: &ClaimRequest, devices: &[Device]) -> BTreeSet<String> {
    let selector = selector_for_test(&request.selector);
    let class = class_selector(request.device_class);
    devices
        .iter()
        .map(|d| (d, cel_device(d)))
        .filter(|(_, v)| eval(&class, v) && eval(&selector, v))
        .map(|(d, _)| d.attributes.as_ref().unwrap()["uuid"].string.clone().unwrap())
        .collect()
}

pub fn manifest(file: &str) -> GpuManifest {
    miggate_compat::from_str(&testdata(&format!("manifests/{file}"))).unwrap()
}

/// A checkpoint of the given devices on gpu-node-7's driver.
pub fn checkpoint(devices: Value) -> GpuManifest {
    let doc = json!({"apiVersion": "miggate.io/v1alpha1", "kind": "GpuManifest",
        "nvidia": {"driverVersion": "580.82.07", "cudaDriverVersion": "13.0", "devices": devices}});
    miggate_compat::from_str(&doc.to_string()).unwrap()
}

pub fn slice(profile: &str, n: u32) -> Value {
    json!({"uuid": format!("MIG-00000000-0000-5000-8000-{n:012}"), "parentUuid": "GPU-00000000-0000-4000-8000-000000000000",
        "productName": "NVIDIA H100 80GB HBM3", "migProfile": profile})
}

pub fn whole(product: &str, n: u32) -> Value {
    json!({"uuid": format!("GPU-00000000-0000-4000-8000-{n:012}"), "productName": product})
}
