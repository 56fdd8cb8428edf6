//! `where` and `check` reading the cluster, through the real binary against kube-fake (the real
//! wire protocol): a GpuCheckpoint by namespace and name, node inventories from GpuNodes as the
//! webhook reads them, and the errors a user gets for what is not there.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::Path;
use std::process::Output;

use serde_json::Value;
use support::testdata;

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
    // A node no object names, and a node whose only source cannot be read (named with why, in
    // the webhook's words): each an error, exit status 2.
    let mut foreign = object("webhook-store/nodes/gpu-node-9.yaml");
    foreign["metadata"]["name"] = "gpu-node-5".into();
    fake.apply(foreign);
    for (node, said) in [
        (
            "gpu-node-404",
            "miggate: no node gpu-node-404 in the cluster (no Node, GpuNode or ResourceSlice of that name)\n",
        ),
        (
            "gpu-node-5",
            "miggate: node gpu-node-5 has no usable GPU inventory: GpuNode inventory of node `gpu-node-5` cannot be read: GpuNode gpu-node-5 holds the inventory of node gpu-node-9 (spec.manifest.host.nodeName)\n",
        ),
    ] {
        let (code, _, stderr) =
            text(&miggate(&kubeconfig, &["check", "-n", "ml", "vllm-ckpt", "--node", node]).await);
        assert_eq!((code, stderr.as_str()), (2, said), "{node}");
    }
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

/// A `PodSnapshot` of the Go peer, bound to a content whose `status.source` records
/// 2 x 3g.40gb + 1 x 1g.10gb of an H100, and nodes with and without the 1g.10gb slice.
fn peer_objects(fake: &kube_fake::FakeApiServer) {
    use support::peer::{content, full_source, gpu_node, snapshot};
    fake.apply(gpu_node("node-big", &["3g.40gb", "3g.40gb", "1g.10gb"]));
    fake.apply(gpu_node("node-short", &["3g.40gb", "3g.40gb"]));
    fake.apply(snapshot("vllm-snap", Some("vllm-content")));
    fake.apply(content("vllm-content", "vllm-snap", Some(full_source())));
    fake.apply(snapshot("pending", None));
    fake.apply(snapshot("old", Some("old-content")));
    fake.apply(content("old-content", "old", None));
    fake.apply(snapshot("dangling", Some("gone")));
    // Bound to vllm-snap's content, which names vllm-snap back, not it.
    fake.apply(snapshot("borrowed", Some("vllm-content")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn where_check_and_claim_name_a_podsnapshot_as_kubectl_does() {
    let fake = kube_fake::FakeApiServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, fake.kubeconfig()).unwrap();
    peer_objects(&fake);

    where_reads_a_podsnapshot_in_kubectl_s_spellings(&kubeconfig).await;
    check_names_the_podsnapshot(&kubeconfig).await;
    claim_shapes_a_template_from_status_source(&kubeconfig).await;
    what_cannot_be_compared_exits_2(&kubeconfig).await;

    // A cluster without the peer's CRDs says so, rather than "no PodSnapshot".
    fake.serve("podsnapshots", false);
    let (code, _, stderr) =
        text(&miggate(&kubeconfig, &["where", "-n", "ml", "podsnapshot/vllm-snap"]).await);
    assert_eq!(
        (code, stderr.as_str()),
        (
            2,
            "miggate: the cluster does not serve nvidia.com/v1alpha1 PodSnapshots (is NVIDIA Snapshot installed?)\n"
        )
    );
}

/// `where`: the big node fits, the short one lacks the 1g.10gb slice; and so in every kubectl
/// spelling of the type.
async fn where_reads_a_podsnapshot_in_kubectl_s_spellings(kubeconfig: &Path) {
    let (code, stdout, stderr) =
        text(&miggate(kubeconfig, &["where", "-n", "ml", "podsnapshot/vllm-snap"]).await);
    assert_eq!(code, 0, "{stderr}");
    let rows: Vec<&str> = stdout.lines().collect();
    assert!(rows[1].starts_with("node-big    fits"), "{stdout}");
    assert!(rows[2].starts_with("node-short  refused  "), "{stdout}");
    assert!(
        rows[2].contains(
            "source NVIDIA H100 80GB HBM3 (MIG slice) x3, target NVIDIA H100 80GB HBM3 (MIG slice) x2"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("no device map"), "{stdout}");
    assert!(stdout.contains("1 of 2 nodes fit"), "{stdout}");

    // kubectl's other spellings of the type: plural, short name, with the group, any case.
    for spelled in [
        "podsnapshots/vllm-snap",
        "podsnap/vllm-snap",
        "PodSnapshot/vllm-snap",
        "podsnapshots.nvidia.com/vllm-snap",
    ] {
        let (code, stdout, stderr) = text(&miggate(kubeconfig, &["where", "-n", "ml", spelled]).await);
        assert_eq!(
            (code, stdout.contains("1 of 2 nodes fit")),
            (0, true),
            "{spelled}: {stderr}"
        );
    }
}

/// `check`: the header names the PodSnapshot; the short node is refused on mig-profile.
async fn check_names_the_podsnapshot(kubeconfig: &Path) {
    let (code, stdout, stderr) = text(
        &miggate(
            kubeconfig,
            &[
                "check",
                "-n",
                "ml",
                "podsnapshot/vllm-snap",
                "--node",
                "node-short",
            ],
        )
        .await,
    );
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stdout.starts_with("PodSnapshot ml/vllm-snap -> node node-short (offer mode)"),
        "{stdout}"
    );
    assert!(stdout.contains("mig-profile"), "{stdout}");
    let (code, _, stderr) = text(
        &miggate(
            kubeconfig,
            &["check", "-n", "ml", "podsnapshot/vllm-snap", "--node", "node-big"],
        )
        .await,
    );
    assert_eq!(code, 0, "{stderr}");
}

/// `claim`: the checkpoint's shape from status.source, as a ResourceClaimTemplate.
async fn claim_shapes_a_template_from_status_source(kubeconfig: &Path) {
    let (code, stdout, stderr) = text(
        &miggate(
            kubeconfig,
            &["claim", "-n", "ml", "podsnapshot/vllm-snap", "-o", "json"],
        )
        .await,
    );
    assert_eq!(code, 0, "{stderr}");
    let template: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(template["kind"], "ResourceClaimTemplate", "{template}");
    let requests = template["spec"]["spec"]["devices"]["requests"]
        .as_array()
        .unwrap();
    let counted: Vec<(String, u64)> = requests
        .iter()
        .map(|r| {
            let exactly = &r["exactly"];
            (
                exactly["selectors"].to_string(),
                exactly["count"].as_u64().unwrap_or(1),
            )
        })
        .collect();
    assert_eq!(counted.iter().map(|(_, n)| n).sum::<u64>(), 3, "{template}");
    assert!(
        counted.iter().any(|(s, n)| s.contains("3g.40gb") && *n == 2),
        "{template}"
    );
    assert!(
        counted.iter().any(|(s, n)| s.contains("1g.10gb") && *n == 1),
        "{template}"
    );
}

/// What cannot be compared is an error that says why, exit 2.
async fn what_cannot_be_compared_exits_2(kubeconfig: &Path) {
    for (name, said) in [
        (
            "podsnapshot/nope",
            "miggate: no PodSnapshot nope in namespace ml\n",
        ),
        (
            "podsnapshot/pending",
            "miggate: PodSnapshot ml/pending is not bound to a PodSnapshotContent yet (no status.boundSnapshotContentName): nothing records what it was captured on\n",
        ),
        (
            "podsnapshot/old",
            "miggate: PodSnapshotContent old-content of PodSnapshot ml/old has no status.source (an agent that does not record it, or a capture not Ready yet): nothing to compare\n",
        ),
        (
            "podsnapshot/dangling",
            "miggate: PodSnapshot ml/dangling is bound to PodSnapshotContent gone, which does not exist\n",
        ),
        (
            "podsnapshot/borrowed",
            "miggate: PodSnapshot ml/borrowed is bound to PodSnapshotContent vllm-content, whose spec.snapshotRef names PodSnapshot ml/vllm-snap, not it: a PodSnapshot restores only its own content\n",
        ),
        (
            "widget/vllm-snap",
            "miggate: widget/vllm-snap names no checkpoint kind: name a GpuCheckpoint as NAME or gpucheckpoint/NAME, a PodSnapshot as podsnapshot/NAME\n",
        ),
        (
            "podsnapshot/Bad_Name",
            "miggate: podsnapshot/Bad_Name is not an object name: lowercase letters, digits, '-' and '.', at most 253 characters\n",
        ),
        (
            "podsnapshot/a/b",
            "miggate: podsnapshot/a/b is not an object name: lowercase letters, digits, '-' and '.', at most 253 characters\n",
        ),
    ] {
        let (code, _, stderr) = text(&miggate(kubeconfig, &["where", "-n", "ml", name]).await);
        assert_eq!((code, stderr.as_str()), (2, said), "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claim_reads_a_gpucheckpoint_by_namespace_and_name() {
    let fake = kube_fake::FakeApiServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, fake.kubeconfig()).unwrap();
    fake.apply(object("webhook-store/checkpoints/ml/vllm-ckpt.yaml"));
    let file = testdata("webhook-store/checkpoints/ml/vllm-ckpt.yaml");
    let file = file.to_str().unwrap();
    let from_file = text(&miggate(&kubeconfig, &["claim", file, "-n", "ml"]).await);
    assert_eq!(from_file.0, 0, "{}", from_file.2);
    // A file stays a file with -n, as `kubectl create -f FILE -n NS`: the template goes into NS.
    let template: serde_json::Value = serde_saphyr::from_str(&from_file.1).unwrap();
    assert_eq!(template["metadata"]["namespace"], "ml");
    let without = text(&miggate(&kubeconfig, &["claim", file]).await);
    let template: serde_json::Value = serde_saphyr::from_str(&without.1).unwrap();
    assert!(
        template["metadata"]["namespace"].is_null(),
        "no -n: no namespace, as kubectl's current one applies"
    );
    for named in ["vllm-ckpt", "gpucheckpoint/vllm-ckpt", "gpuckpt/vllm-ckpt"] {
        let (code, stdout, stderr) = text(&miggate(&kubeconfig, &["claim", "-n", "ml", named]).await);
        assert_eq!(code, 0, "{named}: {stderr}");
        assert_eq!(stdout, from_file.1, "{named}: the same template as from the file");
    }
    let (code, _, stderr) = text(&miggate(&kubeconfig, &["claim", "-n", "ml", "nope"]).await);
    assert_eq!(
        (code, stderr.as_str()),
        (2, "miggate: no GpuCheckpoint nope in namespace ml\n")
    );
}

/// A checkpoint of `n` devices of `product`: MIG slices of `profile`, or whole GPUs.
fn gpu_checkpoint(product: &str, profile: Option<&str>, n: usize) -> String {
    let devices: Vec<String> = (0..n)
        .map(|i| match profile {
            Some(p) => format!(
                "  - {{uuid: MIG-00000000-0000-5000-8000-{i:012x}, parentUuid: GPU-00000000-0000-4000-8000-000000000000, productName: \"{product}\", migProfile: \"{p}\"}}"
            ),
            None => format!("  - {{uuid: GPU-00000000-0000-4000-8000-{i:012x}, productName: \"{product}\"}}"),
        })
        .collect();
    format!(
        "apiVersion: miggate.io/v1alpha1\nkind: GpuManifest\nnvidia:\n  devices:\n{}\n",
        devices.join("\n")
    )
}

/// `check --node` on nodes described only by partial GFD labels (real label sets, no
/// `nvidia.com/gpu.count`): what the labels settle is settled (a profile the single
/// strategy's product rules out is refused, counted slices fit), and where they leave a check
/// unknown the answer says why, naming the labels (a node mig-manager failed to apply a layout
/// on exits 3, naming `nvidia.com/mig.config.state=failed`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_reads_partial_gfd_labels_and_says_why() {
    let fake = kube_fake::FakeApiServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, fake.kubeconfig()).unwrap();
    for file in [
        "gfd-real-single-nocount-h100nvl-wangken.yaml",
        "gfd-real-mixed-custom-h20-johnsblog.yaml",
        "gfd-real-failed-unknown-longpt-partial.yaml",
    ] {
        fake.apply(object(&format!("inventory/gfd-real/{file}")));
    }
    let ckpt = |name: &str, body: String| {
        let path = dir.path().join(name);
        std::fs::write(&path, body).unwrap();
        path.to_str().unwrap().to_string()
    };
    let other_profile = ckpt(
        "nvl-3g.yaml",
        gpu_checkpoint("NVIDIA H100 NVL", Some("3g.47gb"), 1),
    );
    let same_profile = ckpt(
        "nvl-1g.yaml",
        gpu_checkpoint("NVIDIA H100 NVL", Some("1g.12gb"), 2),
    );
    let h20_slices = ckpt("h20-1g.yaml", gpu_checkpoint("NVIDIA H20", Some("1g.12gb"), 2));
    let check = |file: String, node: &'static str| {
        let kubeconfig = kubeconfig.clone();
        async move { text(&miggate(&kubeconfig, &["check", &file, "--node", node]).await) }
    };

    let (code, stdout, _) = check(other_profile, "single-nocount-h100nvl-node").await;
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("mig-profile"), "{stdout}");
    assert!(stdout.contains("3g.47gb"), "{stdout}");

    // The same profile: how many slices there are is all that is left, and nothing says: every
    // GPU check is unknown (exit 3), and the answer says why.
    let (code, stdout, _) = check(same_profile, "single-nocount-h100nvl-node").await;
    assert_eq!(code, 3, "{stdout}");
    assert!(
        stdout.contains("every GPU is cut into `1g.12gb` slices"),
        "{stdout}"
    );

    let (code, stdout, _) = check(h20_slices.clone(), "mixed-custom-h20-node").await;
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("counted per profile"), "{stdout}");

    let (code, stdout, _) = check(h20_slices, "failed-node").await;
    assert_eq!(code, 3, "{stdout}");
    assert!(
        stdout.contains("nvidia.com/mig.config.state=failed, not success"),
        "{stdout}"
    );
}
