//! The real `miggate webhook` binary over HTTPS on loopback: a CA made here, a client that
//! trusts only it, decisions and bad input, then a certificate rotated through a Secret-style
//! symlink swap while requests keep flowing, and a SIGTERM that drains and exits 0.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use support::{free_port, testdata};

struct Pki {
    ca_pem: String,
    cert_pem: String,
    key_pem: String,
}

fn pki(name: &str) -> Pki {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, format!("{name} test CA"));
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let mut leaf = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
    leaf.distinguished_name
        .push(DnType::CommonName, format!("{name} webhook"));
    let cert = leaf.signed_by(&key, &issuer).unwrap();
    Pki {
        ca_pem: ca_cert.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    }
}

/// Lays out a Secret volume as the kubelet does: `..<version>/` with the files, `..data`
/// pointing at it, and `tls.crt`/`tls.key` pointing through `..data`.
fn secret_version(dir: &Path, version: &str, cert: &str, key: &str) {
    let v = dir.join(version);
    std::fs::create_dir_all(&v).unwrap();
    std::fs::write(v.join("tls.crt"), cert).unwrap();
    std::fs::write(v.join("tls.key"), key).unwrap();
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(version, &tmp).unwrap();
    // The atomic swap: rename over the old link.
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
    for f in ["tls.crt", "tls.key"] {
        if std::fs::symlink_metadata(dir.join(f)).is_err() {
            std::os::unix::fs::symlink(format!("..data/{f}"), dir.join(f)).unwrap();
        }
    }
}

fn client(cas: &[&str]) -> reqwest::Client {
    let certs = cas
        .iter()
        .map(|c| reqwest::Certificate::from_pem(c.as_bytes()).unwrap());
    reqwest::Client::builder()
        .tls_certs_only(certs)
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

struct Server {
    child: Child,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn post(
    client: &reqwest::Client,
    url: &str,
    body: impl Into<reqwest::Body>,
) -> reqwest::Result<(u16, String)> {
    let resp = client
        .post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await?;
    let status = resp.status().as_u16();
    Ok((status, resp.text().await?))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_refuses_rotates_and_drains() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let first = pki("first");
    let second = pki("second");
    let secret = tempfile::tempdir().unwrap();
    secret_version(secret.path(), "..2026_01", &first.cert_pem, &first.key_pem);

    let (listen, health) = (free_port(), free_port());
    let mut server = Server {
        child: spawn_dir_store_webhook(secret.path(), listen, health),
    };
    // Drain stderr as it comes, so a full pipe never blocks the server's logging.
    let (log, reader) = drain_stderr(&mut server);

    // Ready once the store is loaded and the listener bound.
    let plain = reqwest::Client::builder().no_proxy().build().unwrap();
    until_ready(
        &plain,
        health,
        &mut server,
        Instant::now() + Duration::from_secs(30),
    )
    .await;

    let url = format!("https://{listen}/validate");
    let only_first = client(&[&first.ca_pem]);
    let allowed = std::fs::read_to_string(testdata("admission/pod-create-restore-allowed.json")).unwrap();
    decides_and_refuses_bad_input(&only_first, &url, &allowed).await;

    // Plain HTTP on the admission port is not served.
    let plain_admission = plain
        .post(format!("http://{listen}/validate"))
        .body(allowed.clone())
        .send()
        .await;
    assert!(plain_admission.map_or(true, |r| r.status().as_u16() != 200));

    rotates_while_requests_flow(secret.path(), &first, &second, &url, &allowed).await;
    assert_one_reload_of_each_result(&plain, health).await;

    // SIGTERM: drain and exit 0.
    sigterm(&server);
    let status = exit_status(
        &mut server,
        Instant::now() + Duration::from_secs(25),
        "webhook did not stop on SIGTERM",
    )
    .await;
    reader.join().unwrap();
    let log = log.lock().unwrap().clone();
    assert!(status.success(), "{status}: {log}");
    assert!(log.contains("TLS certificate reloaded"), "{log}");
    // An admitted request is logged with its pod, as docs/webhook.md says.
    let admitted = log
        .lines()
        .find(|l| l.contains("restore admitted"))
        .unwrap_or_default();
    assert!(admitted.contains("namespace=\"ml\""), "{admitted}");
    assert!(admitted.contains("name=vllm-restore-0"), "{admitted}");
    assert!(log.contains("new TLS certificate rejected"), "{log}");
    assert!(!log.contains("PRIVATE KEY"), "key material in the log: {log}");
}

/// The binary serving the recorded file store on `listen` (health on `health`), its certificate
/// and key the Secret volume at `secret`, polled every second; stderr piped.
fn spawn_dir_store_webhook(secret: &Path, listen: SocketAddr, health: SocketAddr) -> Child {
    Command::new(env!("CARGO_BIN_EXE_miggate"))
        .args([
            "webhook",
            "--listen",
            &listen.to_string(),
            "--health-listen",
            &health.to_string(),
        ])
        .arg("--tls-cert")
        .arg(secret.join("tls.crt"))
        .arg("--tls-key")
        .arg(secret.join("tls.key"))
        .arg(format!("--store=dir:{}", testdata("webhook-store").display()))
        .args(["--poll-interval", "1"])
        .env("MIGGATE_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Reads the server's stderr into the returned log on a thread, until the server closes it.
fn drain_stderr(server: &mut Server) -> (Arc<Mutex<String>>, JoinHandle<()>) {
    let log = Arc::new(Mutex::new(String::new()));
    let reader = {
        let mut stderr = server.child.stderr.take().unwrap();
        let log = log.clone();
        std::thread::spawn(move || {
            use std::io::Read;
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                log.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        })
    };
    (log, reader)
}

/// Polls `/readyz` on `health` until it succeeds, before `deadline`, the server still running:
/// its body.
async fn until_ready(
    plain: &reqwest::Client,
    health: SocketAddr,
    server: &mut Server,
    deadline: Instant,
) -> String {
    let ready_url = format!("http://{health}/readyz");
    loop {
        if let Ok(r) = plain.get(&ready_url).send().await
            && r.status().is_success()
        {
            break r.text().await.unwrap();
        }
        assert!(Instant::now() < deadline, "webhook never became ready");
        assert!(server.child.try_wait().unwrap().is_none(), "webhook exited early");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A recorded restore allowed and one refused, with their answers; malformed JSON is a 400 and
/// an oversized body a 413.
async fn decides_and_refuses_bad_input(only_first: &reqwest::Client, url: &str, allowed: &str) {
    let refused = std::fs::read_to_string(testdata("admission/pod-create-restore-refused.json")).unwrap();

    let (status, body) = post(only_first, url, allowed.to_string()).await.unwrap();
    assert_eq!(status, 200, "{body}");
    let review: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(review["response"]["allowed"], true);
    assert_eq!(review["response"]["uid"], "0b7a1c3e-0001-4c1e-9d2a-000000000001");

    let (status, body) = post(only_first, url, refused).await.unwrap();
    assert_eq!(status, 200, "{body}");
    let review: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(review["response"]["allowed"], false);
    assert_eq!(review["response"]["status"]["code"], 403);
    assert_eq!(
        review["response"]["status"]["message"],
        "miggate: checkpoint ml/vllm-ckpt cannot be restored in this pod: memory-limit: source 64Gi, target 16Gi; mount: source /model-cache, target missing"
    );

    let (status, body) = post(only_first, url, "{\"apiVersion\": ").await.unwrap();
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("malformed AdmissionReview JSON"), "{body}");

    let (status, body) = post(only_first, url, vec![b' '; 9 * 1024 * 1024]).await.unwrap();
    assert_eq!(status, 413, "{body}");
}

/// Swaps `secret` to `second`'s certificate, then to a broken one, while a client trusting both
/// CAs keeps posting `allowed`: the new certificate is served without a restart, the broken one
/// keeps it serving, and no request fails.
async fn rotates_while_requests_flow(secret: &Path, first: &Pki, second: &Pki, url: &str, allowed: &str) {
    // Requests keep flowing across the rotation, on a client that trusts both CAs.
    let both = client(&[&first.ca_pem, &second.ca_pem]);
    let stop = Arc::new(AtomicBool::new(false));
    let (ok, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let traffic = tokio::spawn({
        let (stop, ok, failed, url, allowed) = (
            stop.clone(),
            ok.clone(),
            failed.clone(),
            url.to_string(),
            allowed.to_string(),
        );
        async move {
            while !stop.load(Ordering::Relaxed) {
                match post(&both, &url, allowed.clone()).await {
                    Ok((200, _)) => ok.fetch_add(1, Ordering::Relaxed),
                    other => {
                        eprintln!("request failed during rotation: {other:?}");
                        failed.fetch_add(1, Ordering::Relaxed)
                    }
                };
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    });

    secret_version(secret, "..2026_02", &second.cert_pem, &second.key_pem);
    // A new connection from a client trusting only the new CA gets in, without a restart.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Ok((200, _)) = post(&client(&[&second.ca_pem]), url, allowed.to_string()).await {
            break;
        }
        assert!(Instant::now() < deadline, "the new certificate was never served");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // And a new connection trusting only the old CA no longer does.
    assert!(
        post(&client(&[&first.ca_pem]), url, allowed.to_string())
            .await
            .is_err()
    );

    // A broken new certificate keeps the current one serving.
    secret_version(
        secret,
        "..2026_03",
        "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n",
        &second.key_pem,
    );
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let (status, _) = post(&client(&[&second.ca_pem]), url, allowed.to_string())
        .await
        .unwrap();
    assert_eq!(status, 200);

    stop.store(true, Ordering::Relaxed);
    traffic.await.unwrap();
    assert_eq!(
        failed.load(Ordering::Relaxed),
        0,
        "requests failed during rotation"
    );
    assert!(
        ok.load(Ordering::Relaxed) > 10,
        "too little traffic to prove anything"
    );
}

/// `/metrics` on `health` counts one certificate reloaded and one rejected.
async fn assert_one_reload_of_each_result(plain: &reqwest::Client, health: SocketAddr) {
    let metrics = plain
        .get(format!("http://{health}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("miggate_tls_reloads_total{result=\"ok\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("miggate_tls_reloads_total{result=\"error\"} 1"),
        "{metrics}"
    );
}

/// Sends the server SIGTERM.
fn sigterm(server: &Server) {
    let pid = rustix::process::Pid::from_raw(i32::try_from(server.child.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
}

/// The server's exit status, which must come before `deadline` (else `never` is the failure).
async fn exit_status(server: &mut Server, deadline: Instant, never: &str) -> ExitStatus {
    loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "{never}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn start_up_errors_name_what_failed_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("--store=dir:{}", testdata("webhook-store").display());
    let missing = dir.path().join("tls.crt");
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_miggate"))
            .arg("webhook")
            .args(["--listen", "127.0.0.1:0", "--health-listen", "127.0.0.1:0"])
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let cert = missing.to_str().unwrap();
    let (code, err) = run(&["--tls-cert", cert, "--tls-key", cert, &store]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains(&format!("cannot read {cert}")), "{err}");

    let (code, err) = run(&["--tls-cert", cert, "--tls-key", cert, "--store", "/etc/x"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("expected kube or dir:PATH"), "{err}");

    let bad = pki("bad");
    std::fs::write(dir.path().join("a.crt"), &bad.cert_pem).unwrap();
    std::fs::write(dir.path().join("b.key"), pki("other").key_pem).unwrap();
    let (a, b) = (dir.path().join("a.crt"), dir.path().join("b.key"));
    let (code, err) = run(&[
        "--tls-cert",
        a.to_str().unwrap(),
        "--tls-key",
        b.to_str().unwrap(),
        &store,
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("certificate and key do not make a pair"), "{err}");
    assert!(!err.contains("PRIVATE KEY"), "{err}");

    let (code, err) = run(&[
        "--tls-cert",
        a.to_str().unwrap(),
        "--tls-key",
        a.to_str().unwrap(),
        "--store=dir:/nonexistent/store",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("/nonexistent/store"), "{err}");

    // A selector the API server would not read is refused before anything starts.
    let (code, err) = run(&[
        "--tls-cert",
        cert,
        "--tls-key",
        cert,
        "--store=kube",
        "--restore-pod-selector",
        "tier in (gold",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--restore-pod-selector")
            && err.contains("at byte 13: found the end, expected `,` or `)`"),
        "{err}"
    );
}

/// `--restore-pod-selector` through the real binary over HTTPS: the pod watch asks the API
/// server for the selected pods only, and a restore pod created without the selector's labels
/// is refused, naming them, while one with them is judged as ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unselected_restore_pod_is_refused_at_creation() {
    let fake = kube_fake::FakeApiServer::start().await.unwrap();
    let checkpoint: serde_json::Value = serde_saphyr::from_str(
        &std::fs::read_to_string(testdata("webhook-store/checkpoints/ml/vllm-ckpt.yaml")).unwrap(),
    )
    .unwrap();
    fake.apply(checkpoint);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, fake.kubeconfig()).unwrap();
    let webhook =
        support::Webhook::start_kube(&kubeconfig, &["--restore-pod-selector=miggate.io/restore==true"]).await;
    let list = fake
        .requests()
        .into_iter()
        .find(|r| r.path == "/api/v1/pods")
        .unwrap();
    assert_eq!(list.query["labelSelector"], "miggate.io/restore=true");

    let mut review: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(testdata("admission/pod-create-restore-allowed.json")).unwrap(),
    )
    .unwrap();
    let r = support::post_review(&webhook, "/validate", review.to_string()).await;
    assert_eq!(r["allowed"], false, "{r}");
    assert_eq!(
        r["status"]["message"],
        "miggate: restore pod ml/vllm-restore-0 lacks the labels of the webhook's --restore-pod-selector (miggate.io/restore=true): the webhook checks the binding only of pods it selects; add them to the pod's labels"
    );
    review["request"]["object"]["metadata"]["labels"]["miggate.io/restore"] = "true".into();
    let r = support::post_review(&webhook, "/validate", review.to_string()).await;
    assert_eq!(r["allowed"], true, "{r}");
    assert_eq!(
        webhook
            .metric("miggate_admission_refusals_total{check=\"pod-not-selected\"}")
            .await,
        1
    );
}

/// `--store kube` in the real binary: its client comes from `KUBECONFIG`, pointed at an
/// in-process API server; `/readyz` turns ready once the caches synced; over HTTPS a restore
/// pod's binding to a short node is refused, to a node without inventory allowed with a
/// warning, and another pod's binding allowed untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_store_decides_bindings_over_https() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let fake = kube_fake::FakeApiServer::start().await.unwrap();
    fake.apply(yaml("webhook-store/checkpoints/ml/vllm-ckpt.yaml"));
    fake.apply(gpu_node("short", "webhook-store/nodes/a100-node-2.yaml"));
    fake.apply(gpu_node("fits", "webhook-store/nodes/gpu-node-7.yaml"));
    fake.apply(serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "vllm-restore-0", "namespace": "ml",
                     "annotations": {"miggate.io/restore-from": "vllm-ckpt"}}}));
    fake.apply(serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-0", "namespace": "ml"}}));

    let dir = tempfile::tempdir().unwrap();
    let pki = pki("kube");
    std::fs::write(dir.path().join("tls.crt"), &pki.cert_pem).unwrap();
    std::fs::write(dir.path().join("tls.key"), &pki.key_pem).unwrap();
    std::fs::write(dir.path().join("kubeconfig"), fake.kubeconfig()).unwrap();
    let (listen, health) = (free_port(), free_port());
    let mut server = Server {
        child: spawn_kube_store_webhook(dir.path(), listen, health),
    };
    let plain = reqwest::Client::builder().no_proxy().build().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let ready = until_ready(&plain, health, &mut server, deadline).await;
    let ready: serde_json::Value = serde_json::from_str(&ready).unwrap();
    assert_eq!(ready["store"]["kube"].as_array().unwrap().len(), 8, "{ready}");

    let url = format!("https://{listen}/validate");
    let https = client(&[&pki.ca_pem]);
    bindings_are_decided_from_the_caches(&https, &url).await;

    // Only reads reached the API server, none of them per request.
    let requests = fake.requests();
    assert!(requests.iter().all(|r| r.method == "GET"), "{requests:#?}");
    assert!(
        !requests
            .iter()
            .any(|r| r.path.ends_with("/vllm-restore-0") || r.path.ends_with("/short"))
    );

    sigterm(&server);
    let status = exit_status(
        &mut server,
        deadline + Duration::from_secs(30),
        "no exit on SIGTERM",
    )
    .await;
    assert!(status.success(), "{status}");
}

/// The recorded YAML object at `rel` under `testdata/`, as JSON.
fn yaml(rel: &str) -> serde_json::Value {
    serde_saphyr::from_str(&std::fs::read_to_string(testdata(rel)).unwrap()).unwrap()
}

/// The `GpuNode` `name` holding the recorded manifest at `rel`.
fn gpu_node(name: &str, rel: &str) -> serde_json::Value {
    let mut manifest = yaml(rel);
    let m = manifest.as_object_mut().unwrap();
    m.remove("apiVersion");
    m.remove("kind");
    // As the publisher writes it: the manifest names the node it is stored under.
    m["host"]["nodeName"] = name.into();
    serde_json::json!({"apiVersion": "miggate.io/v1alpha1", "kind": "GpuNode",
        "metadata": {"name": name},
        "spec": {"observedAt": "2026-11-30T00:00:00Z", "manifest": manifest}})
}

/// The binary with `--store kube` on `listen` (health on `health`), its certificate, key and
/// `KUBECONFIG` in `dir`, outside any cluster.
fn spawn_kube_store_webhook(dir: &Path, listen: SocketAddr, health: SocketAddr) -> Child {
    Command::new(env!("CARGO_BIN_EXE_miggate"))
        .args([
            "webhook",
            "--listen",
            &listen.to_string(),
            "--health-listen",
            &health.to_string(),
        ])
        .arg("--tls-cert")
        .arg(dir.join("tls.crt"))
        .arg("--tls-key")
        .arg(dir.join("tls.key"))
        .args(["--store", "kube"])
        .env("KUBECONFIG", dir.join("kubeconfig"))
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The recorded `pods/binding` CREATE of `ml/<pod>` to `node`.
fn binding(pod: &str, node: &str) -> String {
    let mut review: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(testdata("admission/binding-create.json")).unwrap())
            .unwrap();
    review["request"]["name"] = pod.into();
    review["request"]["object"]["metadata"]["name"] = pod.into();
    review["request"]["object"]["target"]["name"] = node.into();
    review.to_string()
}

/// The `response` of the AdmissionReview `body`.
fn answer(body: String) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    v["response"].clone()
}

/// Over HTTPS: the restore pod's binding to the short node is refused, to the one that fits
/// allowed, to a node without inventory allowed with a warning; another pod's allowed untouched.
async fn bindings_are_decided_from_the_caches(https: &reqwest::Client, url: &str) {
    let (status, body) = post(https, url, binding("vllm-restore-0", "short"))
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
    let r = answer(body);
    assert_eq!(r["allowed"], false, "{r}");
    assert!(
        r["status"]["message"]
            .as_str()
            .unwrap()
            .contains("on node short (inventory from GpuNode): "),
        "{r}"
    );
    assert_eq!(r["uid"], "0b7a1c3e-0013-4c1e-9d2a-000000000013");

    let (_, body) = post(https, url, binding("vllm-restore-0", "fits")).await.unwrap();
    let r = answer(body);
    assert_eq!(
        (
            r["allowed"].clone(),
            r["auditAnnotations"]["inventory-source"].clone()
        ),
        (true.into(), "GpuNode".into()),
        "{r}"
    );

    let (_, body) = post(https, url, binding("vllm-restore-0", "nowhere"))
        .await
        .unwrap();
    let r = answer(body);
    assert_eq!(r["allowed"], true, "{r}");
    assert!(
        r["warnings"][0]
            .as_str()
            .unwrap()
            .contains("has no GPU inventory"),
        "{r}"
    );

    let (_, body) = post(https, url, binding("web-0", "short")).await.unwrap();
    let r = answer(body);
    assert_eq!(r["allowed"], true, "{r}");
    assert!(r.get("warnings").is_none(), "{r}");
}
