//! `miggate publish` as a DaemonSet runs it: the real binary, a replayed nvidia-smi, and an
//! in-process API server reached through `KUBECONFIG`; it applies the node's `GpuNode`, reports
//! the recovery state file, and exits 0 on SIGTERM; through an API server restart it puts
//! back what was deleted meanwhile within seconds, and a SIGTERM while the server is down
//! still exits 0 at once.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::workspace_root;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publishes_the_node_and_stops_on_sigterm() {
    let fake = kube_fake::FakeApiServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("kubeconfig"), fake.kubeconfig()).unwrap();
    let state = dir.path().join("host/run/miggate/recovery.json");
    std::fs::create_dir_all(state.parent().unwrap()).unwrap();
    std::fs::write(
        &state,
        r#"{"state":"ready","step":"verify","message":"layout matches","updatedAt":"2026-11-30T10:00:00Z"}"#,
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_miggate"))
        .args([
            "publish",
            "--node",
            "node-a",
            "--backend",
            "nvidia-smi",
            "--interval",
            "5",
        ])
        .arg("--nvidia-smi")
        .arg(workspace_root().join("testdata/nvidia-smi/replay/nvidia-smi"))
        .arg("--root")
        .arg(dir.path().join("host"))
        .env("KUBECONFIG", dir.path().join("kubeconfig"))
        .env("MIGGATE_REPLAY", "h100-mig-host")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("NODE_NAME")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let stored = loop {
        if let Some(obj) = fake.get("gpunodes", None, "node-a")
            && obj.pointer("/status/conditions/0/reason").is_some()
        {
            break obj;
        }
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            panic!("exited {status}: {}", String::from_utf8_lossy(&out.stderr));
        }
        assert!(Instant::now() < deadline, "never published");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(stored["spec"]["manifest"]["host"]["nodeName"], "node-a");
    assert!(
        !stored["spec"]["manifest"]["nvidia"]["devices"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(stored["status"]["conditions"][0]["reason"], "Ready");
    let patches: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| r.method == "PATCH")
        .collect();
    assert_eq!(patches.len(), 2, "{patches:#?}");
    assert!(
        patches
            .iter()
            .all(|p| p.query.get("fieldManager").map(String::as_str) == Some("miggate-publish"))
    );

    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "no exit on SIGTERM");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let out = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(status.success(), "{status}: {log}");
    assert!(log.contains("publisher stopped"), "{log}");
}

/// A SIGTERM while nvidia-smi hangs: the publisher exits at once, without waiting for the
/// capture's own deadline (which may be longer than the pod's grace period).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_mid_capture_exits_without_waiting_for_the_capture() {
    use std::os::unix::fs::PermissionsExt;
    let fake = kube_fake::FakeApiServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("kubeconfig"), fake.kubeconfig()).unwrap();
    let marker = dir.path().join("capturing");
    let smi = dir.path().join("nvidia-smi");
    std::fs::write(
        &smi,
        format!("#!/bin/sh\ntouch '{}'\nexec sleep 25\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(&smi, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_miggate"))
        .args([
            "publish",
            "--node",
            "node-a",
            "--backend",
            "nvidia-smi",
            "--timeout",
            "60",
        ])
        .arg("--nvidia-smi")
        .arg(&smi)
        .arg("--root")
        .arg(dir.path())
        .env("KUBECONFIG", dir.path().join("kubeconfig"))
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("NODE_NAME")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !marker.exists() {
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            panic!("exited {status}: {}", String::from_utf8_lossy(&out.stderr));
        }
        assert!(Instant::now() < deadline, "nvidia-smi never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > Duration::from_secs(8) {
            let _ = child.kill();
            panic!("no exit within 8 s of SIGTERM: it waited for the hung capture");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let out = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(status.success(), "{status}: {log}");
    assert!(log.contains("publisher stopped"), "{log}");
    assert!(
        fake.requests().iter().all(|r| r.method != "PATCH"),
        "nothing was captured to write"
    );
}

/// `--kubeconfig` and `--context` as kubectl takes them: the kubeconfig's current context
/// names no context at all, so only the one `--context` names reaches the cluster; the stop is
/// logged under `publish`'s own name (it was `miggate::webhook`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubeconfig_and_context_flags_pick_the_cluster() {
    let fake = kube_fake::FakeApiServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("lab-kubeconfig");
    let text = fake.kubeconfig();
    assert!(text.contains("current-context: fake"), "{text}");
    std::fs::write(
        &kubeconfig,
        text.replace("current-context: fake", "current-context: elsewhere"),
    )
    .unwrap();
    let publish = |context: Option<&str>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_miggate"));
        cmd.args([
            "publish",
            "--node",
            "node-k",
            "--backend",
            "nvidia-smi",
            "--interval",
            "5s",
        ])
        .arg("--nvidia-smi")
        .arg(workspace_root().join("testdata/nvidia-smi/replay/nvidia-smi"))
        .arg("--root")
        .arg(dir.path())
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .env("KUBECONFIG", dir.path().join("not-this-one"))
        .env("MIGGATE_REPLAY", "h100-mig-host")
        .env("MIGGATE_LOG", "info")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("NODE_NAME")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
        if let Some(c) = context {
            cmd.args(["--context", c]);
        }
        cmd
    };
    // The kubeconfig's own current context is not there: said in words, exit 2.
    let out = publish(None).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no context `elsewhere` in the kubeconfig"), "{err}");

    let mut child = publish(Some("fake")).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while fake.get("gpunodes", None, "node-k").is_none() {
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            panic!("exited {status}: {}", String::from_utf8_lossy(&out.stderr));
        }
        assert!(Instant::now() < deadline, "never published");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(started.elapsed() < Duration::from_secs(10), "no exit on SIGTERM");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let out = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(
        log.contains("miggate::publish: SIGTERM received; stopping"),
        "{log}"
    );
    assert!(!log.contains("miggate::webhook"), "{log}");
}

/// `miggate publish --interval 60` on a replayed H100 node, logging at info.
fn spawn_publisher(dir: &Path, node: &str) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_miggate"))
        .args([
            "publish",
            "--node",
            node,
            "--backend",
            "nvidia-smi",
            "--interval",
            "60",
        ])
        .arg("--nvidia-smi")
        .arg(workspace_root().join("testdata/nvidia-smi/replay/nvidia-smi"))
        .arg("--root")
        .arg(dir)
        .env("KUBECONFIG", dir.join("kubeconfig"))
        .env("MIGGATE_REPLAY", "h100-mig-host")
        .env("MIGGATE_LOG", "info")
        .env_remove("MIGGATE_LOG_FORMAT")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("NODE_NAME")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits until `node`'s `GpuNode` is stored with a uid other than `not_uid`.
async fn until_published(
    fake: &kube_fake::FakeApiServer,
    child: &mut std::process::Child,
    node: &str,
    not_uid: Option<&serde_json::Value>,
) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(obj) = fake.get("gpunodes", None, node)
            && Some(&obj["metadata"]["uid"]) != not_uid
        {
            return obj;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("exited {status}");
        }
        assert!(Instant::now() < deadline, "not published within 20 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// SIGTERM, then the exit status and the log, failing if it takes over `within`.
async fn terminate(mut child: std::process::Child, within: Duration) -> (std::process::ExitStatus, String) {
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > within {
            let _ = child.kill();
            panic!("no exit within {within:?} of SIGTERM");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let out = child.wait_with_output().unwrap();
    (out.status, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The API server restarts, and the `GpuNode` is deleted while it is down: the publisher
/// (interval 60 s) notices the outage through its watch, retries at the backoff's pace (a few
/// failed rounds in 5 s, not a hot loop), and puts the `GpuNode` back within seconds of the
/// server's return, saying once how long it failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gpu_node_deleted_during_an_api_server_restart_is_back_within_seconds() {
    let fake = kube_fake::FakeApiServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("kubeconfig"), fake.kubeconfig()).unwrap();
    let mut child = spawn_publisher(dir.path(), "node-r");
    let first = until_published(&fake, &mut child, "node-r", None).await;

    fake.stop().await;
    assert!(fake.delete("gpunodes", None, "node-r"));
    tokio::time::sleep(Duration::from_secs(5)).await;
    fake.start_again().await.unwrap();
    let back = Instant::now();
    let again = until_published(&fake, &mut child, "node-r", Some(&first["metadata"]["uid"])).await;
    assert!(
        back.elapsed() < Duration::from_secs(20),
        "well before the 60 s interval"
    );
    assert_eq!(again["spec"]["manifest"]["host"]["nodeName"], "node-r");

    let (status, log) = terminate(child, Duration::from_secs(10)).await;
    assert!(status.success(), "{status}: {log}");
    let failed = log.matches("publish round failed; retrying in").count();
    assert!(
        (1..10).contains(&failed),
        "{failed} failed rounds in a 5 s outage: {log}"
    );
    assert!(
        log.contains("cannot apply GpuNode node-r") || log.contains("cannot read GpuNode node-r"),
        "{log}"
    );
    assert_eq!(log.matches("caught up").count(), 1, "{log}");
}

/// A SIGTERM while the API server is down, the publisher failing rounds and waiting out its
/// backoff, exits 0 at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_while_the_api_server_is_down_exits_at_once() {
    let fake = kube_fake::FakeApiServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("kubeconfig"), fake.kubeconfig()).unwrap();
    let mut child = spawn_publisher(dir.path(), "node-s");
    until_published(&fake, &mut child, "node-s", None).await;
    fake.stop().await;
    // The cut watch starts a round that fails; the next comes 1 to 2 s later, then 2 to 4 s:
    // at 2.5 s it is most likely waiting, and is failing in any case.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let (status, log) = terminate(child, Duration::from_secs(3)).await;
    assert!(status.success(), "{status}: {log}");
    assert!(log.contains("publish round failed; retrying in"), "{log}");
    assert!(log.contains("publisher stopped"), "{log}");
}
