//! `miggate deploy` as a user runs it: the real binary prints the checked-in install as one
//! stream, writes the same files as `deploy/` with `--out`, and takes the checkpoint agent's
//! service account.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::{Command, Output};
use support::workspace_root;

fn miggate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_miggate"))
        .args(args)
        .current_dir(workspace_root())
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

#[test]
fn deploy_prints_the_install_as_one_stream() {
    let out = miggate(&["deploy"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout, miggate_crds::deploy::stream(&Default::default()).unwrap());
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&stdout).unwrap();
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"Namespace"));
    assert_eq!(
        kinds.last(),
        Some(&"ValidatingWebhookConfiguration"),
        "applied last"
    );
    assert_eq!(
        kinds.iter().filter(|k| **k == "CustomResourceDefinition").count(),
        2
    );
}

#[test]
fn deploy_out_writes_the_checked_in_files() {
    let dir = tempfile::tempdir().unwrap();
    let out = miggate(&["deploy", "--out", dir.path().to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
    let mut written: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    written.sort();
    let mut checked_in: Vec<String> = std::fs::read_dir(workspace_root().join("deploy"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|f| f.ends_with(".yaml"))
        .collect();
    checked_in.sort();
    assert_eq!(written, checked_in);
    for f in &written {
        assert_eq!(
            std::fs::read_to_string(dir.path().join(f)).unwrap(),
            std::fs::read_to_string(workspace_root().join("deploy").join(f)).unwrap(),
            "{f}"
        );
    }
}

#[test]
fn deploy_takes_the_checkpoint_agent_and_refuses_a_malformed_one() {
    let out = miggate(&[
        "deploy",
        "--checkpoint-agent",
        "snapshot/snapshot-agent",
        "--image",
        "registry.local/miggate:dev",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&stdout).unwrap();
    let writers = docs
        .iter()
        .find(|d| {
            d["kind"] == "ValidatingAdmissionPolicy" && d["metadata"]["name"] == "miggate-checkpoint-writers"
        })
        .unwrap();
    assert_eq!(
        writers["spec"]["validations"][0]["expression"],
        "request.operation == 'DELETE' || request.userInfo.username == 'system:serviceaccount:snapshot:snapshot-agent'"
    );
    assert!(stdout.contains("image: registry.local/miggate:dev"));

    let out = miggate(&["deploy", "--checkpoint-agent", "snapshot-agent"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("expected NAMESPACE/NAME"), "{stderr}");
}

/// The API server's addresses narrow the admission port's NetworkPolicy; a range that is not
/// what the admin meant is refused with what to write, before anything is printed.
#[test]
fn deploy_takes_the_api_servers_addresses_and_refuses_a_wrong_one() {
    let out = miggate(&[
        "deploy",
        "--api-server-cidr",
        "10.0.0.0/24",
        "--api-server-cidr",
        "fd00:10::/64",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&String::from_utf8(out.stdout).unwrap()).unwrap();
    let policy = docs.iter().find(|d| d["kind"] == "NetworkPolicy").unwrap();
    assert_eq!(
        policy["spec"]["ingress"][0],
        serde_json::json!({"from": [{"ipBlock": {"cidr": "10.0.0.0/24"}}, {"ipBlock": {"cidr": "fd00:10::/64"}}],
            "ports": [{"port": "https", "protocol": "TCP"}]})
    );

    let out = miggate(&["deploy", "--api-server-cidr", "10.0.0.7/24"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("invalid value '10.0.0.7/24' for '--api-server-cidr <CIDR>': CIDR `10.0.0.7/24` has host bits set: its network is 10.0.0.0/24; for the one address write 10.0.0.7/32"),
        "{stderr}"
    );
}

/// The container args of the workload `kind` in `file`, with the kubelet's `$(NODE_NAME)`
/// substituted as it would be.
fn workload_args(file: &str, kind: &str) -> Vec<String> {
    let text = std::fs::read_to_string(workspace_root().join("deploy").join(file)).unwrap();
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).unwrap();
    let workload = docs.iter().find(|d| d["kind"] == kind).unwrap();
    workload["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().replace("$(NODE_NAME)", "node-a"))
        .collect()
}

/// The real binary takes the args `deploy/` gives it: run with them, each gets past flag
/// parsing and stops only where a cluster is missing (no API server to reach).
#[test]
fn the_deployed_args_are_flags_the_binary_takes() {
    for (file, kind, stops_at) in [
        (
            "webhook.yaml",
            "Deployment",
            "miggate: no cluster: /nonexistent/kubeconfig does not exist",
        ),
        (
            "publisher.yaml",
            "DaemonSet",
            "miggate: no cluster: /nonexistent/kubeconfig does not exist",
        ),
    ] {
        let args = workload_args(file, kind);
        let out = Command::new(env!("CARGO_BIN_EXE_miggate"))
            .args(&args)
            .env("NO_COLOR", "1")
            .env("KUBECONFIG", "/nonexistent/kubeconfig")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("NODE_NAME")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("Usage:") && !stderr.contains("unexpected argument"),
            "{file}: {args:?} rejected: {stderr}"
        );
        assert_eq!(out.status.code(), Some(2), "{file}: {stderr}");
        assert!(stderr.contains(stops_at), "{file}: {stderr}");
    }
}
