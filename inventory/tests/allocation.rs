//! A pod's DRA allocation matched to the node's devices (the NVIDIA DRA driver's fixture
//! slices), and the exact check and device map the binding webhook derives from it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use k8s_openapi::api::resource::v1::ResourceSlice;
use miggate_compat::{GpuManifest, Mode, Options, Target, evaluate_target};
use miggate_inventory::{self as inventory, AllocatedDevice};
use rstest::rstest;
use serde::Deserialize;
use serde_json::{Value, json};
use support::testdata;

mod support;

#[derive(Deserialize)]
struct List<T> {
    items: Vec<T>,
}

/// Every slice of a fixture, whatever its driver, node and generation.
fn slices(file: &str) -> Vec<ResourceSlice> {
    let text = testdata(&format!("inventory/{file}"));
    match serde_saphyr::from_str::<List<ResourceSlice>>(&text) {
        Ok(list) => list.items,
        Err(_) => vec![serde_saphyr::from_str(&text).unwrap()],
    }
}

fn alloc(pool: &str, devices: &[&str]) -> Vec<AllocatedDevice> {
    devices
        .iter()
        .map(|d| AllocatedDevice {
            request: "gpus".into(),
            driver: "gpu.nvidia.com".into(),
            pool: pool.into(),
            device: (*d).into(),
        })
        .collect()
}

const V25_12: &str = "dra-v25.12-gpu-node-7.yaml";
const V25_3: &str = "dra-v25.3-gpu-node-7.yaml";
const SLICE_A: &str = "MIG-6d7e2b1c-0f4a-5e8b-9c3d-2a1b0c9d8e7f";
const SLICE_B: &str = "MIG-0b9a8c7d-6e5f-5a4b-8c3d-1e2f3a4b5c6d";
const WHOLE: &str = "GPU-f0e1d2c3-b4a5-9687-7869-5a4b3c2d1e0f";

/// Each allocation's devices, as the UUIDs the inventory reader gives them, in allocation order.
#[rstest]
#[case::two_slices(V25_12, &["gpu-0-mig-3g40gb-9-0", "gpu-0-mig-3g40gb-9-4"], &[SLICE_A, SLICE_B])]
#[case::in_allocation_order(V25_12, &["gpu-1", "gpu-0-mig-3g40gb-9-4"], &[WHOLE, SLICE_B])]
#[case::the_older_release_s_names(V25_3, &["gpu-0-mig-9-4-4", "gpu-1"], &[SLICE_B, WHOLE])]
fn an_allocation_maps_to_the_devices_its_names_are(
    #[case] fixture: &str,
    #[case] devices: &[&str],
    #[case] uuids: &[&str],
) {
    let slices = slices(fixture);
    let refs: Vec<&ResourceSlice> = slices.iter().collect();
    let got = inventory::allocated("gpu-node-7", &refs, &alloc("gpu-node-7", devices)).unwrap();
    let got: Vec<String> = got
        .devices
        .iter()
        .map(|d| d.uuid.as_ref().unwrap().to_string())
        .collect();
    assert_eq!(got, uuids);
}

/// What the allocation's devices are, each case with what makes it unmatchable.
#[rstest]
#[case::another_pool(V25_12, "gpu-node-1", &["gpu-1"], "is from pool `gpu-node-1`, not the node's pool `gpu-node-7`")]
#[case::a_device_the_pool_lacks(V25_12, "gpu-node-7", &["gpu-2"], "no device `gpu-2` in pool `gpu-node-7`")]
#[case::an_older_generation_s_device(V25_3, "gpu-node-7", &["gpu-0"], "no device `gpu-0` in pool `gpu-node-7` at its newest generation")]
#[case::named_twice(V25_12, "gpu-node-7", &["gpu-1", "gpu-1"], "is allocated twice")]
fn an_allocation_that_cannot_be_matched_says_why(
    #[case] fixture: &str,
    #[case] pool: &str,
    #[case] devices: &[&str],
    #[case] why: &str,
) {
    let slices = slices(fixture);
    let refs: Vec<&ResourceSlice> = slices.iter().collect();
    let error = inventory::allocated("gpu-node-7", &refs, &alloc(pool, devices))
        .unwrap_err()
        .to_string();
    assert!(error.contains(why), "{error}");
    assert!(error.contains("node `gpu-node-7`"), "{error}");
}

#[test]
fn devices_of_other_drivers_are_left_out_and_counted() {
    let slices = slices(V25_12);
    let refs: Vec<&ResourceSlice> = slices.iter().collect();
    let mut results = alloc("gpu-node-7", &["gpu-1"]);
    results.push(AllocatedDevice {
        request: "nic".into(),
        driver: "rdma.example.com".into(),
        pool: "gpu-node-7".into(),
        device: "nic-0".into(),
    });
    let got = inventory::allocated("gpu-node-7", &refs, &results).unwrap();
    assert_eq!(got.devices.len(), 1);
    assert_eq!(got.other_drivers, 1);
    assert_eq!(got.describe(), "gpu-node-7/gpu-1");
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

fn whole(n: u32) -> Value {
    json!({"uuid": format!("GPU-00000000-0000-4000-8000-{n:012}"), "productName": "NVIDIA H100 80GB HBM3"})
}

/// The exact check on just the allocated devices: the node's whole inventory passes offer mode
/// in every case, so only the allocation decides. The device map pairs each source device with
/// the allocated device of its class, in order.
#[rstest]
#[case::the_checkpoint_s_shape(
    checkpoint(json!([slice("3g.40gb", 1), slice("3g.40gb", 2)])),
    &["gpu-0-mig-3g40gb-9-0", "gpu-0-mig-3g40gb-9-4"],
    Some(format!("MIG-00000000-0000-5000-8000-000000000001={SLICE_A},MIG-00000000-0000-5000-8000-000000000002={SLICE_B}"))
)]
#[case::slices_and_a_whole_gpu(
    checkpoint(json!([whole(3), slice("3g.40gb", 1), slice("3g.40gb", 2)])),
    &["gpu-0-mig-3g40gb-9-4", "gpu-1", "gpu-0-mig-3g40gb-9-0"],
    Some(format!("GPU-00000000-0000-4000-8000-000000000003={WHOLE},MIG-00000000-0000-5000-8000-000000000001={SLICE_B},MIG-00000000-0000-5000-8000-000000000002={SLICE_A}"))
)]
#[case::one_slice_too_few(checkpoint(json!([slice("3g.40gb", 1), slice("3g.40gb", 2)])), &["gpu-0-mig-3g40gb-9-0"], None)]
#[case::one_device_too_many(checkpoint(json!([slice("3g.40gb", 1)])), &["gpu-0-mig-3g40gb-9-0", "gpu-1"], None)]
#[case::a_whole_gpu_for_a_slice(checkpoint(json!([slice("3g.40gb", 1)])), &["gpu-1"], None)]
fn the_exact_verdict_and_device_map_on_the_allocated_devices(
    #[case] checkpoint: GpuManifest,
    #[case] devices: &[&str],
    #[case] map: Option<String>,
) {
    let slices = slices(V25_12);
    let refs: Vec<&ResourceSlice> = slices.iter().collect();
    let node = inventory::from_resource_slices("gpu-node-7", None, &refs)
        .unwrap()
        .unwrap();
    let offer = evaluate_target(&checkpoint, node.target(), &Options::mode(Mode::Offer));
    assert!(
        offer.compatible,
        "the whole node fits in offer mode: {}",
        offer.reason
    );

    let allocated = inventory::allocated("gpu-node-7", &refs, &alloc("gpu-node-7", devices)).unwrap();
    let judged = inventory::restricted(&node.manifest, &allocated);
    let exact = evaluate_target(&checkpoint, Target::node(&judged), &Options::mode(Mode::Exact));
    assert_eq!(exact.compatible, map.is_some(), "{}", exact.reason);
    assert_eq!(exact.device_map, map);
}

/// Under DynamicMIG the allocated devices are possible partitions, made when the pod starts:
/// the shape is judged, and no device map can name them yet.
#[test]
fn a_dynamic_mig_allocation_is_judged_by_shape_without_a_map() {
    let slices = slices("dra-dynmig-gpu-node-8.yaml");
    let refs: Vec<&ResourceSlice> = slices.iter().collect();
    let node = inventory::from_resource_slices("gpu-node-8", None, &refs)
        .unwrap()
        .unwrap();
    let checkpoint = checkpoint(json!([slice("3g.40gb", 1), slice("1g.10gb", 2)]));
    let results = alloc("gpu-node-8", &["gpu-0-mig-3g40gb-9-4", "gpu-0-mig-1g10gb-19-0"]);
    let allocated = inventory::allocated("gpu-node-8", &refs, &results).unwrap();
    assert!(allocated.devices.iter().all(|d| d.uuid.is_none()));
    let judged = inventory::restricted(&node.manifest, &allocated);
    let exact = evaluate_target(&checkpoint, Target::node(&judged), &Options::mode(Mode::Exact));
    assert!(exact.compatible, "{}", exact.reason);
    assert_eq!(exact.device_map, None);

    let wrong = alloc("gpu-node-8", &["gpu-0-mig-3g40gb-9-4", "gpu-0-mig-3g40gb-9-0"]);
    let allocated = inventory::allocated("gpu-node-8", &refs, &wrong).unwrap();
    let judged = inventory::restricted(&node.manifest, &allocated);
    let exact = evaluate_target(&checkpoint, Target::node(&judged), &Options::mode(Mode::Exact));
    assert!(!exact.compatible);
}
