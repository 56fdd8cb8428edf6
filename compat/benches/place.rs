//! How long `miggate where` takes to decide over a large store: a checkpoint on two `3g.40gb`
//! slices placed against 5,000 node inventories of 8 H100s each (mixed layouts: whole GPUs,
//! 3g.40gb cuts, 1g.10gb cuts, another kernel), and reading the peer's manifest.yaml.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use miggate_compat::{
    Device, GpuManifest, Host, MigStrategy, Nvidia, Options, VersionText, from_str, rank_nodes,
};

use miggate_compat::H100_NAME as H100;

fn slice(node: usize, gpu: usize, k: usize, profile: &str) -> Device {
    Device {
        uuid: Some(
            format!("MIG-{node:08x}-{gpu:04x}-5000-8000-{k:012x}")
                .parse()
                .unwrap(),
        ),
        parent_uuid: Some(
            format!("GPU-{node:08x}-{gpu:04x}-4000-8000-000000000000")
                .parse()
                .unwrap(),
        ),
        product_name: Some(H100.into()),
        mig_profile: Some(profile.parse().unwrap()),
        gpu_instance_id: Some(k as u32 + 1),
        compute_instance_id: Some(0),
        ..Device::default()
    }
}

fn whole(node: usize, gpu: usize) -> Device {
    Device {
        uuid: Some(
            format!("GPU-{node:08x}-{gpu:04x}-4000-8000-000000000000")
                .parse()
                .unwrap(),
        ),
        product_name: Some(H100.into()),
        ..Device::default()
    }
}

/// Node `i`: 8 H100s, `i % 4` of them cut (alternately 3g.40gb ×2 and 1g.10gb ×7), the rest
/// whole; every seventh node on another kernel.
fn node(i: usize) -> GpuManifest {
    let mut devices = Vec::new();
    for gpu in 0..8 {
        if gpu < i % 4 {
            if gpu.is_multiple_of(2) {
                devices.extend((0..2).map(|k| slice(i, gpu, k, "3g.40gb")));
            } else {
                devices.extend((0..7).map(|k| slice(i, gpu, k, "1g.10gb")));
            }
        } else {
            devices.push(whole(i, gpu));
        }
    }
    GpuManifest {
        host: Some(Host {
            node_name: Some(format!("gpu-node-{i}")),
            kernel_version: Some(VersionText::new(if i.is_multiple_of(7) {
                "6.8.0-45-generic"
            } else {
                "5.15.0-1071-aws"
            })),
            cpu_arch: Some("amd64".into()),
            ..Host::default()
        }),
        nvidia: Some(Nvidia {
            driver_version: Some(VersionText::new("580.82.07")),
            mig_strategy: Some(MigStrategy::Mixed),
            devices: Some(devices),
            ..Nvidia::default()
        }),
        ..GpuManifest::default()
    }
}

fn bench(c: &mut Criterion) {
    let peer = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../testdata/peer/manifest-h100-mig.yaml"
    ))
    .unwrap();
    let checkpoint = from_str(&peer).unwrap();
    let names: Vec<String> = (0..5_000).map(|i| format!("gpu-node-{i:05}")).collect();
    let nodes: Vec<GpuManifest> = (0..5_000).map(node).collect();
    let options = Options::default();
    let answer = rank_nodes(
        &checkpoint,
        names.iter().map(String::as_str).zip(&nodes),
        &options,
    );
    let fits = answer.iter().filter(|p| p.fits()).count();
    assert!(fits > 1_000 && fits < 5_000, "{fits}");

    c.bench_function("place/5000-nodes", |b| {
        b.iter(|| {
            rank_nodes(
                black_box(&checkpoint),
                names.iter().map(String::as_str).zip(&nodes),
                &options,
            )
        })
    });
    // What `miggate where` does after reading the files: each node's YAML text parsed (as the
    // store reader does first), then placed.
    let texts: Vec<String> = nodes.iter().map(|n| n.to_yaml().unwrap()).collect();
    c.bench_function("read+place/5000-node-yaml-files", |b| {
        b.iter(|| {
            let read: Vec<GpuManifest> = texts.iter().map(|t| from_str(black_box(t)).unwrap()).collect();
            rank_nodes(&checkpoint, names.iter().map(String::as_str).zip(&read), &options).len()
        })
    });
    c.bench_function("from_str/peer-manifest-yaml", |b| {
        b.iter(|| from_str(black_box(&peer)).unwrap())
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = bench
}
criterion_main!(benches);
