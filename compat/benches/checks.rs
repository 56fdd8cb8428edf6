//! How long the checks take on a large realistic pair: 8 H100s, each cut into seven `1g.10gb`
//! slices (56 slices with UUIDs, parents, instance ids), in exact and offer mode, and how long
//! reading that manifest from JSON takes.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use miggate_compat::{
    Device, GpuManifest, Host, MigStrategy, Mode, Nvidia, Options, Pod, Quantity, Target, VersionText,
    evaluate, evaluate_target, from_str,
};

use miggate_compat::H100_NAME as H100;

/// A node-sized manifest: 8 GPUs × 7 `1g.10gb` slices. `seed` varies the UUIDs so the two sides
/// need a real device map.
fn manifest(seed: u32, with_pod: bool) -> GpuManifest {
    let mut devices = Vec::new();
    for gpu in 0..8u32 {
        let parent = format!("GPU-{seed:08x}-{gpu:04x}-4000-8000-000000000000");
        for slot in 0..7u32 {
            devices.push(Device {
                unknown: Default::default(),
                uuid: Some(
                    format!("MIG-{seed:08x}-{gpu:04x}-5000-8000-{slot:012x}")
                        .parse()
                        .unwrap(),
                ),
                parent_uuid: Some(parent.parse().unwrap()),
                product_name: Some(H100.into()),
                mig_profile: Some("1g.10gb".parse().unwrap()),
                gpu_instance_id: Some(7 + slot),
                compute_instance_id: Some(0),
                memory_mib: Some(9856),
            });
        }
    }
    let mut m = GpuManifest::new();
    m.host = Some(Host {
        unknown: Default::default(),
        node_name: Some(format!("gpu-node-{seed}")),
        kernel_version: Some(VersionText::new("5.15.0-1071-aws")),
        cpu_arch: Some("amd64".into()),
    });
    if with_pod {
        m.pod = Some(Pod {
            unknown: Default::default(),
            image: Some("nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.1".into()),
            image_digest: Some(
                "sha256:9f2c4be5a0e7f4b1c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0".into(),
            ),
            cpu_limit: Some(Quantity::new("64")),
            memory_limit: Some(Quantity::new("512Gi")),
            mounts: Some(vec!["/model-cache".into(), "/dev/shm".into()]),
            gpu_requests: Some([("nvidia.com/mig-1g.10gb".to_string(), Quantity::new("56"))].into()),
            resource_claims: Some(vec![]),
        });
    }
    m.nvidia = Some(Nvidia {
        unknown: Default::default(),
        driver_version: Some(VersionText::new("580.82.07")),
        cuda_driver_version: Some(VersionText::new("13.0")),
        mig_strategy: Some(MigStrategy::Mixed),
        gpus: None,
        devices: Some(devices),
        uncounted: Vec::new(),
    });
    m
}

fn checks(c: &mut Criterion) {
    let source = manifest(1, true);
    let restore = manifest(2, true);
    let node = manifest(3, false);
    let exact = Options::default();
    let offer = Options {
        mode: Mode::Offer,
        ..Options::default()
    };
    // The pair is compatible and needs a 56-entry map: the bench measures the whole path.
    let r = evaluate(&source, &restore, &exact);
    assert!(r.compatible, "{}", r.reason);
    assert_eq!(r.device_map.as_deref().unwrap().split(',').count(), 56);
    assert!(evaluate(&source, &node, &offer).compatible);

    c.bench_function("evaluate/exact/56-slices", |b| {
        b.iter(|| evaluate(black_box(&source), black_box(&restore), black_box(&exact)))
    });
    c.bench_function("evaluate/offer/56-slices", |b| {
        b.iter(|| evaluate(black_box(&source), black_box(&node), black_box(&offer)))
    });
    // Admission before binding: the restore pod's own facts, no node yet.
    let pod = restore.pod.clone().unwrap();
    let strict = Options {
        strict: true,
        ..Options::default()
    };
    assert!(evaluate_target(&source, Target::pod(&pod), &strict).compatible);
    c.bench_function("evaluate/pod-scope/56-slices", |b| {
        b.iter(|| {
            evaluate_target(
                black_box(&source),
                black_box(Target::pod(&pod)),
                black_box(&strict),
            )
        })
    });
    // A pod on its node, assembled from borrowed parts as the webhook does.
    c.bench_function("evaluate/pod-on-node/56-slices", |b| {
        b.iter(|| {
            evaluate_target(
                black_box(&source),
                black_box(Target::pod_on_node(&pod, &node)),
                black_box(&offer),
            )
        })
    });
    let text = source.to_json().unwrap();
    c.bench_function("from_str/json/56-slices", |b| {
        b.iter(|| from_str(black_box(&text)).unwrap())
    });
}

criterion_group!(benches, checks);
criterion_main!(benches);
