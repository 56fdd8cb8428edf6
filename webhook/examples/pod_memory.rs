//! The webhook's resident memory with `--store kube` over a cluster of bloated pods: the real
//! `miggate webhook` binary started against an in-process API server (kube-fake) holding 400
//! pods that are not restore pods, each with 200 KiB of annotations, and 5 restore pods. Once
//! `/readyz` says ready (every cache listed; the restore pods found), the child's peak and
//! current resident memory (`VmHWM`, `VmRSS`) are read from `/proc`. Each run starts a fresh
//! process; the medians are printed last.
//!
//! ```sh
//! cargo build -p miggate
//! cargo run -p miggate-webhook --example pod_memory -- target/debug/miggate 3
//! ```
//!
//! `MIGGATE_BLOATED_PODS` (default 400) and `MIGGATE_BLOAT_KIB` (default 200) size the
//! cluster. `MIGGATE_BLOATED_CLAIMS` and `MIGGATE_BLOATED_SNAPSHOTS` (default 0) add as many
//! `ResourceClaim`s and `PodSnapshot`s, any tenant's to write, with as many KiB of annotations
//! each (the other kinds' watches, listed beside the pods'). `MIGGATE_STREAMING_LISTS=refused`
//! has the API server refuse streaming lists (`422`, as with `WatchList` off), so every kind is
//! listed whole from its cache instead. A measurement, not a test: nothing
//! is asserted but that the webhook became ready and found the restore pods.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kube_fake::FakeApiServer;
use rcgen::{CertificateParams, KeyPair};
use serde_json::{Value, json};

/// Restore pods among the bloated ones.
const RESTORE_PODS: usize = 5;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

/// A pod of `ns` named `name`: bloated with `kib` KiB of foreign annotations in 8 values, or
/// a restore pod of checkpoint `vllm-ckpt`.
fn pod(name: &str, kib: usize, restore: bool) -> Value {
    let mut annotations = serde_json::Map::new();
    if restore {
        annotations.insert("miggate.io/restore-from".into(), json!("vllm-ckpt"));
    } else {
        for i in 0..8 {
            annotations.insert(
                format!("tenant.example/blob-{i}"),
                json!("x".repeat(kib * 1024 / 8)),
            );
        }
    }
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "tenant", "annotations": annotations},
        "spec": {"containers": [{"name": "c", "image": "registry.example/app:1",
            "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}})
}

/// `kib` KiB of foreign annotations in 8 values.
fn blob(kib: usize) -> Value {
    let annotations: serde_json::Map<String, Value> = (0..8)
        .map(|i| {
            (
                format!("tenant.example/blob-{i}"),
                json!("x".repeat(kib * 1024 / 8)),
            )
        })
        .collect();
    Value::Object(annotations)
}

/// An allocated `ResourceClaim` of `tenant` with `kib` KiB of annotations.
fn claim(name: &str, kib: usize) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "tenant", "annotations": blob(kib)},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0"}]}}}})
}

/// A bound `PodSnapshot` of `tenant` with `kib` KiB of annotations.
fn snapshot(name: &str, kib: usize) -> Value {
    json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "PodSnapshot",
        "metadata": {"name": name, "namespace": "tenant", "annotations": blob(kib)},
        "spec": {"source": {"podRef": {"name": "p", "containers": ["engine"]}}},
        "status": {"boundSnapshotContentName": format!("{name}-content")}})
}

/// `VmHWM` and `VmRSS` of process `pid`, KiB.
fn memory_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// One run: a fresh webhook process over `fake`, its memory once ready.
async fn run(binary: &PathBuf, fake: &FakeApiServer) -> (u64, u64, Duration) {
    fake.clear_requests();
    let dir = tempfile::tempdir().unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    std::fs::write(dir.path().join("tls.crt"), cert.pem()).unwrap();
    std::fs::write(dir.path().join("tls.key"), key.serialize_pem()).unwrap();
    std::fs::write(dir.path().join("kubeconfig"), fake.kubeconfig()).unwrap();
    let (listen, health) = (free_port(), free_port());
    let child = Command::new(binary)
        .arg("webhook")
        .arg(format!("--listen={listen}"))
        .arg(format!("--health-listen={health}"))
        .arg(format!("--tls-cert={}", dir.path().join("tls.crt").display()))
        .arg(format!("--tls-key={}", dir.path().join("tls.key").display()))
        .arg("--store=kube")
        .env("KUBECONFIG", dir.path().join("kubeconfig"))
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("MIGGATE_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut child = Killed(child);
    let child = &mut child.0;
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let started = Instant::now();
    let ready = loop {
        assert!(child.try_wait().unwrap().is_none(), "the webhook exited");
        assert!(started.elapsed() < Duration::from_secs(300), "never ready");
        if let Ok(r) = client.get(format!("http://{health}/readyz")).send().await
            && r.status().is_success()
        {
            break r.json::<Value>().await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let took = started.elapsed();
    let pods = ready["store"]["kube"]
        .as_array()
        .and_then(|kinds| kinds.iter().find(|k| k["kind"] == "Pod"))
        .map(|k| k["objects"].clone());
    assert_eq!(
        pods,
        Some(json!(RESTORE_PODS)),
        "restore pods not all found: {ready}"
    );
    // A moment for the allocator to settle what the list left behind.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (hwm, rss) = memory_kib(child.id());
    for plural in ["pods", "resourceclaims", "podsnapshots"] {
        let pages: Vec<String> = fake
            .requests()
            .iter()
            .filter(|r| r.is_list(plural))
            .map(|r| r.query.get("limit").cloned().unwrap_or_else(|| "none".into()))
            .collect();
        let limit = pages.first().cloned().unwrap_or_default();
        println!("  {plural} list pages: {} (limit {limit})", pages.len());
    }
    (hwm, rss, took)
}

/// The webhook process, killed when dropped (a failed run too).
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut args = std::env::args().skip(1);
    let binary = PathBuf::from(args.next().unwrap_or_else(|| "target/debug/miggate".into()));
    let runs: usize = args.next().and_then(|r| r.parse().ok()).unwrap_or(3);
    let bloated = env_usize("MIGGATE_BLOATED_PODS", 400);
    let kib = env_usize("MIGGATE_BLOAT_KIB", 200);
    let claims = env_usize("MIGGATE_BLOATED_CLAIMS", 0);
    let snapshots = env_usize("MIGGATE_BLOATED_SNAPSHOTS", 0);

    let fake = FakeApiServer::start().await.unwrap();
    let refused = std::env::var("MIGGATE_STREAMING_LISTS").is_ok_and(|v| v == "refused");
    if refused {
        fake.streaming_lists(kube_fake::StreamingLists::Invalid);
    }
    for i in 0..bloated {
        fake.apply(pod(&format!("web-{i:04}"), kib, false));
    }
    for i in 0..RESTORE_PODS {
        // Spread among the others (the fake lists in name order).
        fake.apply(pod(
            &format!("web-{:04}-restore-{i}", i * bloated / RESTORE_PODS),
            kib,
            true,
        ));
    }
    for i in 0..claims {
        fake.apply(claim(&format!("claim-{i:04}"), kib));
    }
    for i in 0..snapshots {
        fake.apply(snapshot(&format!("snap-{i:04}"), kib));
    }
    println!(
        "{}: {bloated} pods, {claims} claims and {snapshots} snapshots with {kib} KiB of annotations each and {RESTORE_PODS} restore pods; lists {}; {runs} runs",
        binary.display(),
        if refused { "refused to stream" } else { "streamed" }
    );
    let (mut hwms, mut rsss) = (Vec::new(), Vec::new());
    for i in 0..runs {
        let (hwm, rss, took) = run(&binary, &fake).await;
        println!(
            "run {}: VmHWM {} KiB ({:.1} MiB), VmRSS {} KiB ({:.1} MiB), ready in {took:.1?}",
            i + 1,
            hwm,
            hwm as f64 / 1024.0,
            rss,
            rss as f64 / 1024.0
        );
        hwms.push(hwm);
        rsss.push(rss);
    }
    let (hwm, rss) = (median(hwms), median(rsss));
    println!(
        "median: VmHWM {hwm} KiB ({:.1} MiB), VmRSS {rss} KiB ({:.1} MiB)",
        hwm as f64 / 1024.0,
        rss as f64 / 1024.0
    );
}
