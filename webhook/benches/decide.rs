//! The decision path without the network: a recorded AdmissionReview's bytes in, the answer's
//! bytes out, against the project's file store. Beside it, in the same run, what a user of
//! kube's admission types would write: decode the review into `AdmissionReview<DynamicObject>`
//! and encode kube's response (`kube-types-echo`), and the same decision fed kube's types
//! (`decide-kube-types`). `cargo bench -p miggate-webhook --bench decide`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use miggate_admission::decide::{decide, decide_review};
use miggate_admission::review;
use miggate_store::file_store::FileStore;

fn read(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../testdata/admission")
            .join(name),
    )
    .unwrap()
}

fn bench(c: &mut Criterion) {
    let store =
        FileStore::open(Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/webhook-store")).unwrap();
    let snapshot = store.snapshot();
    for name in [
        "pod-create-restore-allowed.json",
        "pod-create-restore-node-refused.json",
    ] {
        let body = read(name);
        let mut g = c.benchmark_group(name.trim_end_matches(".json"));
        g.bench_function("kube-types-echo", |b| {
            b.iter(|| {
                let review: AdmissionReview<DynamicObject> = serde_json::from_slice(&body).unwrap();
                let req: AdmissionRequest<DynamicObject> = review.try_into().unwrap();
                serde_json::to_vec(&AdmissionResponse::from(&req).into_review()).unwrap()
            });
        });
        g.bench_function("decide-kube-types", |b| {
            b.iter(|| {
                let review: AdmissionReview<DynamicObject> = serde_json::from_slice(&body).unwrap();
                let req: AdmissionRequest<DynamicObject> = review.try_into().unwrap();
                let d = decide(&req, &*snapshot);
                serde_json::to_vec(&d.response.into_review()).unwrap()
            });
        });
        g.bench_function("miggate-parse-only", |b| {
            b.iter(|| review::parse(&body).unwrap().uid.len());
        });
        g.bench_function("miggate-parse-restore-only", |b| {
            b.iter(|| review::parse_restore(&body).unwrap().uid.len());
        });
        // What `POST /validate` runs.
        g.bench_function("miggate", |b| {
            b.iter(|| {
                let review = review::parse_restore(&body).unwrap();
                let d = decide_review(&review, &*snapshot);
                review::render(&d.response).unwrap()
            });
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
