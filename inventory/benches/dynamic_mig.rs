//! How long judging a checkpoint against a DynamicMIG node costs: reading the pool's slices
//! (two H100s, 28 possible devices over shared counters), and the bounded search for a shape
//! that fits and one whose counters cannot hold it.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{Criterion, criterion_group, criterion_main};
use k8s_openapi::api::resource::v1::ResourceSlice;
use miggate_compat::{Gpu, GpuManifest};
use miggate_inventory as inventory;

#[derive(serde::Deserialize)]
struct List {
    items: Vec<ResourceSlice>,
}

fn slices() -> Vec<ResourceSlice> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/inventory/dra-dynmig-gpu-node-8.yaml");
    serde_saphyr::from_str::<List>(&std::fs::read_to_string(path).unwrap())
        .unwrap()
        .items
}

fn checkpoint(gpus: Vec<miggate_compat::GpuBuilder>) -> GpuManifest {
    let mut b = GpuManifest::builder()
        .kernel("5.15.0-1071-aws")
        .cpu_arch("amd64")
        .driver("580.82.07");
    for g in gpus {
        b = b.gpu(g);
    }
    b.build().unwrap()
}

fn bench(c: &mut Criterion) {
    let slices = slices();
    let refs: Vec<&ResourceSlice> = slices.iter().collect();
    c.bench_function("read a DynamicMIG pool (2 GPUs, 28 devices)", |b| {
        b.iter(|| inventory::from_resource_slices(black_box("gpu-node-8"), None, black_box(&refs)))
    });
    let inv = inventory::from_resource_slices("gpu-node-8", None, &refs)
        .unwrap()
        .unwrap();
    let fits = checkpoint(vec![Gpu::h100().cut(["3g.40gb", "3g.40gb", "1g.10gb"])]);
    let short = checkpoint(vec![
        Gpu::h100().cut(["3g.40gb"; 4]),
        Gpu::h100().cut(["1g.10gb"]),
    ]);
    let sevens = checkpoint(vec![
        Gpu::h100().cut(["1g.10gb"; 7]),
        Gpu::h100().cut(["1g.10gb"; 7]),
    ]);
    c.bench_function("place 2x3g.40gb+1x1g.10gb (fits)", |b| {
        b.iter(|| inv.manifest_for(black_box(&fits)))
    });
    c.bench_function("place 4x3g.40gb+1x1g.10gb (cannot fit)", |b| {
        b.iter(|| inv.manifest_for(black_box(&short)))
    });
    c.bench_function("place 14x1g.10gb (fits, widest search)", |b| {
        b.iter(|| inv.manifest_for(black_box(&sevens)))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
