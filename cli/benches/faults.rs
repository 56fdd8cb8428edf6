//! How fast the real `miggate webhook --store kube` binary comes back from faults, over
//! kube-fake, side by side with another build when `MIGGATE_BASELINE` names its binary
//! (build the commit to compare in a worktree and point at its `target/*/miggate`):
//!
//! - `restart`: the API server down for `MIGGATE_FAULT_DOWN` seconds (default 6), node-big's
//!   GpuNode changed meanwhile (written through another replica), then back; measured from
//!   its return: when a restore is refused on the change (**decided**), when `/readyz` is 200
//!   (**ready**; `0` when it never went unready), and how long `/readyz` was 503 over the
//!   whole episode (**unready**);
//! - `kill`: the webhook SIGKILLed and started again: from the spawn to `/readyz` 200.
//!
//! Runs alternate between the builds (`MIGGATE_FAULT_RUNS`, default 5 each) so that a noisy
//! machine weighs on both alike; medians are printed. `cargo bench -p miggate --bench faults`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::peer::{content, full_source, gpu_node, snapshot};
use support::{Webhook, plain, post_review};

const FITS: [&str; 3] = ["3g.40gb", "3g.40gb", "1g.10gb"];
const SHORT: [&str; 1] = ["1g.10gb"];

fn review() -> String {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "00000000-0000-4000-8000-000000000033",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "name": "vllm-restore", "namespace": "ml", "operation": "CREATE",
        "userInfo": {"username": "tenant"}, "object": {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "vllm-restore", "namespace": "ml", "annotations": {"nvidia.com/restore-from": "snap"}},
            "spec": {"nodeName": "node-big", "containers": [{"name": "engine", "image": "vllm:1", "resources": {"limits": {
                "memory": "32Gi", "cpu": "8", "nvidia.com/mig-3g.40gb": "2", "nvidia.com/mig-1g.10gb": "1"}}}]}}}})
    .to_string()
}

async fn ready(webhook: &Webhook) -> bool {
    plain()
        .get(format!("http://{}/readyz", webhook.health))
        .timeout(Duration::from_secs(1))
        .send()
        .await
        .is_ok_and(|r| r.status().is_success())
}

async fn cluster() -> (kube_fake::FakeApiServer, tempfile::TempDir, PathBuf) {
    let fake = kube_fake::FakeApiServer::start().await.unwrap();
    fake.apply(snapshot("snap", Some("content")));
    fake.apply(content("content", "snap", Some(full_source())));
    fake.apply(gpu_node("node-big", &FITS));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, fake.kubeconfig()).unwrap();
    (fake, dir, kubeconfig)
}

#[derive(Debug, Default)]
struct Restart {
    decided: f64,
    ready: f64,
    unready: f64,
}

async fn restart(binary: &Path, down: Duration) -> Restart {
    let (fake, _dir, kubeconfig) = cluster().await;
    let webhook = Webhook::start_kube_with(binary, &kubeconfig, &[]).await;
    assert_eq!(
        post_review(&webhook, "/validate", review()).await["allowed"],
        json!(true)
    );
    let mut unready = Duration::ZERO;
    let tick = Duration::from_millis(20);
    fake.stop().await;
    let down_since = Instant::now();
    while down_since.elapsed() < down {
        if !ready(&webhook).await {
            unready += tick;
        }
        tokio::time::sleep(tick).await;
    }
    fake.apply(gpu_node("node-big", &SHORT));
    fake.start_again().await.unwrap();
    let back = Instant::now();
    let (mut decided, mut ready_at) = (None, None);
    while (decided.is_none() || ready_at.is_none()) && back.elapsed() < Duration::from_secs(60) {
        if ready(&webhook).await {
            ready_at.get_or_insert(back.elapsed());
            let r: Value = post_review(&webhook, "/validate", review()).await;
            if r["allowed"] == json!(false) {
                decided.get_or_insert(back.elapsed());
            }
        } else {
            unready += tick;
        }
        tokio::time::sleep(tick).await;
    }
    let secs = |d: Option<Duration>| d.map_or(f64::INFINITY, |d| d.as_secs_f64());
    Restart {
        decided: secs(decided),
        ready: secs(ready_at),
        unready: unready.as_secs_f64(),
    }
}

async fn kill(binary: &Path) -> f64 {
    let (_fake, _dir, kubeconfig) = cluster().await;
    let mut webhook = Webhook::start_kube_with(binary, &kubeconfig, &[]).await;
    webhook.child.kill().unwrap();
    webhook.child.wait().unwrap();
    drop(webhook);
    let spawned = Instant::now();
    let _webhook = Webhook::start_kube_with(binary, &kubeconfig, &[]).await;
    spawned.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // `cargo bench` passes `--bench`; a filter argument selects nothing here.
    let runs = env_u64("MIGGATE_FAULT_RUNS", 5).max(1);
    let down = Duration::from_secs(env_u64("MIGGATE_FAULT_DOWN", 6));
    let mut builds = vec![("this", PathBuf::from(env!("CARGO_BIN_EXE_miggate")))];
    if let Some(baseline) = std::env::var_os("MIGGATE_BASELINE") {
        builds.push(("baseline", PathBuf::from(baseline)));
    }
    let mut restarts: Vec<Vec<Restart>> = builds.iter().map(|_| Vec::new()).collect();
    let mut kills: Vec<Vec<f64>> = builds.iter().map(|_| Vec::new()).collect();
    for run in 0..runs {
        for (i, (label, binary)) in builds.iter().enumerate() {
            let r = restart(binary, down).await;
            eprintln!("restart {label} #{run}: {r:?}");
            restarts[i].push(r);
            let k = kill(binary).await;
            eprintln!("kill {label} #{run}: ready after {k:.2} s");
            kills[i].push(k);
        }
    }
    println!(
        "faults over kube-fake, API server down {} s, medians of {runs} (seconds):",
        down.as_secs()
    );
    println!(
        "{:<10} {:>22} {:>22} {:>20} {:>18}",
        "build",
        "restart: decided after",
        "restart: ready after",
        "restart: unready for",
        "kill: ready after"
    );
    for (i, (label, _)) in builds.iter().enumerate() {
        let of = |f: fn(&Restart) -> f64| median(restarts[i].iter().map(f).collect());
        println!(
            "{:<10} {:>22.2} {:>22.2} {:>20.2} {:>18.2}",
            label,
            of(|r| r.decided),
            of(|r| r.ready),
            of(|r| r.unready),
            median(kills[i].clone())
        );
    }
}
