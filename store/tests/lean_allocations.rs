//! Decoding a watched object allocates for the fields kept, never for what its writers added
//! beside them: the bytes this thread allocates while a fat object (256 KiB of annotations,
//! foreign labels, managed fields, a large unrelated spec and status) is decoded are those of
//! the thin object it reads as, within a few hundred bytes of serde_json's own scratch. Were a
//! foreign annotation, label or field built (a `String`, a `Value`), the count would grow by
//! its size.
//!
//! The count is per thread (each test runs on its own), by a global allocator that forwards to
//! the system's and adds up every allocation's size.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// The one unsafe: the allocator interface is an unsafe trait, implemented here by forwarding
// every call unchanged to the system allocator.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use miggate_store::kube_store::lean::{
    WatchedCheckpoint, WatchedClaim, WatchedContent, WatchedGpuNode, WatchedNode, WatchedPod, WatchedSlice,
    WatchedSnapshot,
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

thread_local! {
    static ALLOCATED: Cell<usize> = const { Cell::new(0) };
}

fn count(bytes: usize) {
    let _ = ALLOCATED.try_with(|a| a.set(a.get().saturating_add(bytes)));
}

struct Counting;

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size.saturating_sub(layout.size()));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// The bytes this thread allocated while decoding `text` as `T`, and the value.
fn decoded<T: DeserializeOwned>(text: &str) -> (T, usize) {
    let before = ALLOCATED.with(Cell::get);
    let value: T = serde_json::from_str(text).unwrap();
    (value, ALLOCATED.with(Cell::get) - before)
}

/// `thin` with 256 KiB of annotations in 64 keys, 200 foreign labels, 64 KiB of managed
/// fields, owner references, and 128 KiB of unrelated nested JSON in its spec and its status.
fn fatten(mut thin: Value) -> Value {
    let meta = thin["metadata"].as_object_mut().unwrap();
    let annotations: serde_json::Map<String, Value> = (0..64)
        .map(|i| {
            (
                format!("tenant.example/blob-{i}"),
                json!("x".repeat(4 * 1024 - 32)),
            )
        })
        .collect();
    let kept = meta.entry("annotations").or_insert_with(|| json!({}));
    kept.as_object_mut().unwrap().extend(annotations);
    let labels = meta.entry("labels").or_insert_with(|| json!({}));
    for i in 0..200 {
        labels[format!("tenant.example/l-{i}")] = json!("v".repeat(63));
    }
    meta.insert(
        "managedFields".into(),
        json!([{"manager": "kubectl", "fieldsV1": {"f:blob": "m".repeat(64 * 1024), "f:a": {"f:b": {}}}}]),
    );
    meta.insert(
        "ownerReferences".into(),
        json!([{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u"}]),
    );
    for part in ["spec", "status"] {
        let object = thin.as_object_mut().unwrap();
        let section = object.entry(part).or_insert_with(|| json!({}));
        section["tenantBlob"] =
            json!({"nested": ["s\\u00e9".repeat(32 * 1024), {"deep": [1, null, true, 2.5]}]});
    }
    thin
}

/// Decodes the thin and the fat form of `thin` as `T`: equal values, and the fat one's
/// decoding allocates no more than the thin one's but for serde_json's scratch.
fn allocates_as_thin<T: DeserializeOwned + PartialEq + std::fmt::Debug>(thin: Value) {
    let fat = fatten(thin.clone()).to_string();
    let thin = thin.to_string();
    assert!(fat.len() > 450 * 1024, "{}", fat.len());
    let (lean_thin, thin_bytes) = decoded::<T>(&thin);
    let (lean_fat, fat_bytes) = decoded::<T>(&fat);
    assert_eq!(lean_fat, lean_thin);
    assert!(
        fat_bytes <= thin_bytes + 512,
        "decoding {} bytes allocated {fat_bytes} bytes, the thin object's {} bytes {thin_bytes}",
        fat.len(),
        thin.len()
    );
}

fn meta(name: &str, namespace: Option<&str>) -> Value {
    let mut m = json!({"name": name, "uid": format!("uid-{name}"), "resourceVersion": "42"});
    if let Some(ns) = namespace {
        m["namespace"] = json!(ns);
    }
    m
}

/// The kinds any tenant writes.
#[test]
fn a_fat_resource_claim_allocates_as_a_thin_one() {
    allocates_as_thin::<WatchedClaim>(json!({"metadata": meta("c", Some("ml")),
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "mig.nvidia.com"}}]}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0-mig-1"}]}}}}));
}

#[test]
fn a_fat_pod_snapshot_allocates_as_a_thin_one() {
    allocates_as_thin::<WatchedSnapshot>(json!({"metadata": meta("s", Some("ml")),
        "spec": {"source": {"podRef": {"name": "p", "containers": ["engine"]}}},
        "status": {"boundSnapshotContentName": "c-1", "conditions": [{"type": "Ready", "status": "True"}]}}));
}

#[test]
fn every_other_kind_allocates_as_a_thin_one() {
    allocates_as_thin::<WatchedContent>(json!({"metadata": meta("c-1", None),
        "spec": {"snapshotRef": {"namespace": "ml", "name": "s", "uid": "uid-s"},
            "source": {"nodeName": "n1", "podRef": {"name": "p", "containers": ["engine"]}}},
        "status": {"source": {"node": {"name": "n1"}}}}));
    allocates_as_thin::<WatchedCheckpoint>(json!({"metadata": meta("ck", Some("ml")),
        "spec": {"containerName": "vllm", "manifest": {"host": {"cpuArch": "amd64"}}}}));
    allocates_as_thin::<WatchedGpuNode>(json!({"metadata": meta("n1", None),
        "spec": {"observedAt": "2026-01-01T00:00:00Z", "manifest": {"host": {"nodeName": "n1"}}}, "status": {}}));
    allocates_as_thin::<WatchedSlice>(json!({"metadata": meta("n1-gpu", None),
        "spec": {"driver": "gpu.nvidia.com", "nodeName": "n1",
            "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1}, "devices": [{"name": "gpu-0"}]}}));
    allocates_as_thin::<WatchedNode>(json!({"metadata": {"name": "n1", "resourceVersion": "7",
            "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
        "status": {"nodeInfo": {"kernelVersion": "6.8.0", "architecture": "amd64"},
            "capacity": {"nvidia.com/gpu": "8"}}}));
    allocates_as_thin::<WatchedPod>(json!({"metadata": {"name": "p", "namespace": "ml",
            "annotations": {"miggate.io/restore-from": "ck"}},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}, "status": {}}));
}

/// The count is not blind: decoding the fat object whole allocates its foreign bytes.
#[test]
fn the_count_sees_what_a_whole_decoding_keeps() {
    let thin = json!({"metadata": meta("s", Some("ml")), "status": {"boundSnapshotContentName": "c-1"}});
    let fat = fatten(thin.clone()).to_string();
    let (_, lean) = decoded::<WatchedSnapshot>(&fat);
    let (_, whole) = decoded::<miggate_crds::peer::PodSnapshot>(&fat);
    assert!(whole > lean + 256 * 1024, "whole {whole}, lean {lean}");
}
