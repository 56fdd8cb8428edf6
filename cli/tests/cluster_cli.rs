//! `where` and `check` reading the cluster, through the real binary against kube-fake (the real
//! wire protocol): a GpuCheckpoint by namespace and name, node inventories from GpuNodes as the
//! webhook reads them, and the errors a user gets for what is not there.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

fn testdata(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../testdata")
        .join(rel)
}

fn object(rel: &str) -> Value {
    serde_saphyr::from_str(&std::fs::read_to_string(testdata(rel)).unwrap()).unwrap()
}

/// Runs the binary in a blocking thread, so the fake keeps serving on this runtime.
async fn miggate(kubeconfig: &Path, args: &[&str]) -> Output {
    let kubeconfig = kubeconfig.to_path_buf();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_miggate"))
            .args(&args)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .env("NO_COLOR", "1")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

fn text(out: &Output) -> (i32, String, String) {
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn where_and_check_read_the_cluster_as_the_webhook_does() {
    let fake = kube_fake::FakeApiServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, fake.kubeconfig()).unwrap();
    // Two 3g.40gb slices and a whole H100 (fits), and a node of whole GPUs only (refused).
    fake.apply(object("webhook-store/checkpoints/ml/vllm-ckpt.yaml"));
    fake.apply(object("webhook-store/nodes/gpu-node-9.yaml"));
    let mut short = object("webhook-store/nodes/gpu-node-9.yaml");
    short["metadata"]["name"] = "gpu-node-2".into();
    short["spec"]["manifest"]["host"]["nodeName"] = "gpu-node-2".into();
    let devices = short["spec"]["manifest"]["nvidia"]["devices"]
        .as_array_mut()
        .unwrap();
    devices.retain(|d| d["migProfile"].is_null());
    short["spec"]["summary"]["profiles"] = "whole x1".into();
    fake.apply(short);

    let (code, stdout, stderr) = text(&miggate(&kubeconfig, &["where", "-n", "ml", "vllm-ckpt"]).await);
    assert_eq!(code, 0, "{stderr}");
    let rows: Vec<&str> = stdout.lines().collect();
    assert!(rows[1].starts_with("gpu-node-9  fits"), "{stdout}");
    assert!(rows[2].starts_with("gpu-node-2  refused  gpu-model: source NVIDIA H100 80GB HBM3 (MIG slice) x2, target NVIDIA H100 80GB HBM3 x1"), "{stdout}");
    assert!(stdout.contains("1 of 2 nodes fit"), "{stdout}");

    let (code, stdout, stderr) = text(
        &miggate(
            &kubeconfig,
            &["check", "-n", "ml", "vllm-ckpt", "--node", "gpu-node-9"],
        )
        .await,
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.starts_with("GpuCheckpoint ml/vllm-ckpt -> node gpu-node-9 (offer mode)"),
        "{stdout}"
    );
    let (code, stdout, _) = text(
        &miggate(
            &kubeconfig,
            &[
                "check",
                "-n",
                "ml",
                "vllm-ckpt",
                "--node",
                "gpu-node-2",
                "-o",
                "json",
            ],
        )
        .await,
    );
    assert_eq!(code, 1);
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["compatible"], false);
    assert!(
        report["reason"]
            .as_str()
            .unwrap()
            .contains("mig-partitioning: source slice x2, target whole x1"),
        "{report}"
    );

    // A checkpoint from a file against a cluster node works too.
    let file = testdata("manifests/checkpoint-h100-3g40gb-x2.yaml");
    let (code, _, stderr) = text(
        &miggate(
            &kubeconfig,
            &["check", file.to_str().unwrap(), "--node", "gpu-node-9"],
        )
        .await,
    );
    assert_eq!(code, 0, "{stderr}");

    let (code, _, stderr) = text(&miggate(&kubeconfig, &["where", "-n", "ml", "nope"]).await);
    assert_eq!(
        (code, stderr.as_str()),
        (2, "miggate: no GpuCheckpoint nope in namespace ml\n")
    );
    let (code, _, stderr) = text(
        &miggate(
            &kubeconfig,
            &["check", "-n", "ml", "vllm-ckpt", "--node", "gpu-node-404"],
        )
        .await,
    );
    assert_eq!(
        (code, stderr.as_str()),
        (
            2,
            "miggate: no node gpu-node-404 in the cluster (no Node, GpuNode or ResourceSlice of that name)\n"
        )
    );
}

/// On a node of the NVIDIA DRA driver, `where` names the devices a claim would take as the
/// node's ResourceSlice names them (the driver's v25.12 fixture for gpu-node-7).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn where_names_the_devices_a_claim_would_take_on_a_dra_node() {
    let fake = kube_fake::FakeApiServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, fake.kubeconfig()).unwrap();
    fake.apply(object("webhook-store/checkpoints/ml/vllm-ckpt.yaml"));
    fake.apply(object("inventory/dra-v25.12-gpu-node-7.yaml"));
    fake.apply(serde_json::json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-node-7"}}));

    let (code, stdout, stderr) = text(&miggate(&kubeconfig, &["where", "-n", "ml", "vllm-ckpt"]).await);
    assert_eq!(code, 0, "{stderr}");
    let rows: Vec<&str> = stdout.lines().collect();
    assert!(rows[1].starts_with("gpu-node-7  fits     MIG-"), "{stdout}");
    assert_eq!(
        rows[2],
        "                     claim takes: gpu-node-7/gpu-0-mig-3g40gb-9-4, gpu-node-7/gpu-0-mig-3g40gb-9-0",
        "{stdout}"
    );

    let (code, stdout, _) =
        text(&miggate(&kubeconfig, &["where", "-n", "ml", "vllm-ckpt", "-o", "json"]).await);
    assert_eq!(code, 0);
    let answer: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        answer["nodes"][0]["claimDevices"],
        serde_json::json!([
            "gpu-node-7/gpu-0-mig-3g40gb-9-4",
            "gpu-node-7/gpu-0-mig-3g40gb-9-0"
        ])
    );
}

#[test]
fn check_takes_a_target_file_or_a_node_not_both() {
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_miggate"))
            .args(args)
            .output()
            .unwrap()
    };
    let file = testdata("manifests/checkpoint-h100-3g40gb-x2.yaml");
    let f = file.to_str().unwrap();
    let both = run(&["check", f, f, "--node", "n"]);
    assert_eq!(both.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&both.stderr).contains("cannot be used with"),
        "{both:?}"
    );
    let neither = run(&["check", f]);
    assert_eq!(neither.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&neither.stderr).contains("required"),
        "{neither:?}"
    );
}
