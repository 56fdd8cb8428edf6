//! How long reading a large node's `nvidia-smi` output takes: an 8-GPU `nvidia-smi -L` listing
//! with seven `1g.10gb` slices under each GPU (R470+ format, 64 lines), an 8-row
//! `--query-gpu` CSV (`noheader,nounits`, as the runner asks for it), and the join of the two
//! into devices. The same at 10,000 GPUs (70,000 slices, about 6 MiB of `-L`): a hostile or
//! broken nvidia-smi may print that much, and reading it must stay near-linear.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use miggate_capture::assemble;
use miggate_smi::{list, query};

use miggate_compat::H100_NAME as H100;
const GPUS: u32 = 8;
const SLICES: u32 = 7;

/// The hostile size: 10,000 GPUs with seven slices each.
const HUGE_GPUS: u32 = 10_000;

fn gpu_uuid(gpu: u32) -> String {
    format!("GPU-{gpu:08x}-9c8b-4c3b-8a29-1f0e9d8c7b6a")
}

/// `nvidia-smi -L` on a node of `gpus` H100s with every GPU cut into seven `1g.10gb` slices.
fn listing_text(gpus: u32) -> String {
    let mut out = String::new();
    for gpu in 0..gpus {
        writeln!(out, "GPU {gpu}: {H100} (UUID: {})", gpu_uuid(gpu)).unwrap();
        for slot in 0..SLICES {
            writeln!(
                out,
                "  MIG 1g.10gb     Device  {slot}: (UUID: MIG-{gpu:08x}-{slot:04x}-5000-8000-000000000000)"
            )
            .unwrap();
        }
    }
    out
}

/// `--query-gpu=<FIELDS> --format=csv,noheader,nounits` on the same node: MIG on everywhere.
fn query_text(gpus: u32) -> String {
    let mut out = String::new();
    for gpu in 0..gpus {
        writeln!(
            out,
            "{gpu}, {}, {H100}, 00000000:{:02X}:00.0, 81559, 9.0, 580.82.07, Enabled, Enabled",
            gpu_uuid(gpu),
            (0x18 + 0x10 * gpu) % 0x100
        )
        .unwrap();
    }
    out
}

fn bench(c: &mut Criterion) {
    let small_list = listing_text(GPUS);
    let small_query = query_text(GPUS);
    let listing = list::parse(&small_list).expect("the generated listing reads");
    let table = query::parse(&small_query, &query::FIELDS).expect("the generated query reads");
    // The inputs are what they claim to be: 56 slices, 8 rows, and 56 devices once joined,
    // with nothing skipped.
    assert_eq!(listing.gpus.iter().map(|g| g.slices.len()).sum::<usize>(), 56);
    assert!(listing.warnings.is_empty(), "{:?}", listing.warnings);
    assert_eq!(table.rows.len(), 8);
    assert!(table.warnings.is_empty(), "{:?}", table.warnings);
    let facts = assemble(Some(&listing), &table);
    assert_eq!(facts.devices.as_ref().map(Vec::len), Some(56));

    c.bench_function("parse/list-8gpu-x7-1g.10gb", |b| {
        b.iter(|| list::parse(black_box(&small_list)).unwrap())
    });
    c.bench_function("parse/query-8-rows", |b| {
        b.iter(|| query::parse(black_box(&small_query), &query::FIELDS).unwrap())
    });
    c.bench_function("assemble/8gpu-x7-slices", |b| {
        b.iter(|| assemble(Some(black_box(&listing)), black_box(&table)))
    });

    let huge_list = listing_text(HUGE_GPUS);
    let huge_query = query_text(HUGE_GPUS);
    let listing = list::parse(&huge_list).expect("the generated listing reads");
    let table = query::parse(&huge_query, &query::FIELDS).expect("the generated query reads");
    assert!(listing.warnings.is_empty() && table.warnings.is_empty());
    let facts = assemble(Some(&listing), &table);
    assert_eq!(facts.devices.as_ref().map(Vec::len), Some(70_000));
    let mut group = c.benchmark_group("hostile");
    group.sample_size(10);
    group.bench_function("list-10000gpu-x7", |b| {
        b.iter(|| list::parse(black_box(&huge_list)).unwrap())
    });
    group.bench_function("query-10000-rows", |b| {
        b.iter(|| query::parse(black_box(&huge_query), &query::FIELDS).unwrap())
    });
    group.bench_function("assemble-10000gpu-x7", |b| {
        b.iter(|| assemble(Some(black_box(&listing)), black_box(&table)))
    });
    group.bench_function("read-10000gpu-x7", |b| {
        b.iter(|| {
            let listing = list::parse(black_box(&huge_list)).unwrap();
            let table = query::parse(black_box(&huge_query), &query::FIELDS).unwrap();
            assemble(Some(&listing), &table)
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
