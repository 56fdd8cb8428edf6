//! `miggate webhook --tls-secret` as a user runs it: the real binary against an in-process API
//! server, its certificate read back from the Secret it made and checked over real HTTPS by a
//! client that trusts only the CA in the configuration's `caBundle`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{SLACK, free_port, plain, testdata};

fn configuration(fake: &kube_fake::FakeApiServer) {
    fake.apply(json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "miggate"},
        "webhooks": [{"name": "restore.miggate.io", "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "clientConfig": {"service": {"name": "miggate-webhook", "namespace": "miggate-system", "path": "/validate", "port": 443}}}]}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_serves_the_certificate_it_made_and_injected() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let fake = kube_fake::FakeApiServer::start().await.unwrap();
    configuration(&fake);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, fake.kubeconfig()).unwrap();
    let (listen, health) = (free_port(), free_port());
    let log = std::fs::File::create(dir.path().join("log")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_miggate"))
        .args([
            "webhook",
            "--tls-secret",
            "miggate-system/miggate-webhook-certs",
            "--tls-dns-name",
            "localhost",
            "--inject-ca-into",
            "validating/miggate",
            "--ca-propagation",
            "0s",
        ])
        .arg(format!("--listen={listen}"))
        .arg(format!("--health-listen={health}"))
        .arg(format!("--store=dir:{}", testdata("webhook-store").display()))
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();

    let started = Instant::now();
    let readyz = loop {
        assert!(
            started.elapsed() < SLACK,
            "not ready: {}",
            std::fs::read_to_string(dir.path().join("log")).unwrap()
        );
        if let Ok(r) = plain().get(format!("http://{health}/readyz")).send().await
            && r.status() == 200
        {
            break r.json::<Value>().await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(readyz["certificates"]["verified"], true, "{readyz}");

    // The caBundle the API server would use, and nothing else, verifies the served certificate.
    let config = fake
        .get("validatingwebhookconfigurations", None, "miggate")
        .unwrap();
    let bundle: k8s_openapi::ByteString =
        serde_json::from_value(config["webhooks"][0]["clientConfig"]["caBundle"].clone()).unwrap();
    let client = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(&bundle.0).unwrap()])
        .resolve("localhost", listen)
        .no_proxy()
        .timeout(SLACK)
        .build()
        .unwrap();
    let review = std::fs::read_to_string(testdata("admission/pod-create-restore-refused.json")).unwrap();
    let answer: Value = client
        .post(format!("https://localhost:{}/validate", listen.port()))
        .header("content-type", "application/json")
        .body(review)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["response"]["allowed"], false, "{answer}");
    let secret = fake
        .get("secrets", Some("miggate-system"), "miggate-webhook-certs")
        .unwrap();
    let mut keys: Vec<&String> = secret["data"].as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, ["ca-bundle.crt", "ca.crt", "ca.key", "tls.crt", "tls.key"]);
    let _ = child.kill();
    let _ = child.wait();
    let log = std::fs::read_to_string(dir.path().join("log")).unwrap();
    assert!(!log.contains("PRIVATE KEY"), "no key material in the log");
}

#[test]
fn managed_certificates_need_their_names_and_exclude_files() {
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_miggate"))
            .arg("webhook")
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code().unwrap(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, stderr) = run(&["--tls-secret", "miggate-system/certs", "--store", "dir:x"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("--tls-dns-name"), "{stderr}");
    let (code, stderr) = run(&[
        "--tls-secret",
        "miggate-system/certs",
        "--tls-dns-name",
        "a",
        "--tls-cert",
        "c",
        "--tls-key",
        "k",
    ]);
    assert_eq!(code, 2);
    assert!(stderr.contains("cannot be used with"), "{stderr}");
    let (code, stderr) = run(&["--tls-secret", "Miggate/x", "--tls-dns-name", "a"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("NAMESPACE/NAME"), "{stderr}");
    let (code, stderr) = run(&[
        "--tls-secret",
        "ns/x",
        "--tls-dns-name",
        "a",
        "--inject-ca-into",
        "secret/x",
    ]);
    assert_eq!(code, 2);
    assert!(stderr.contains("validating/NAME or mutating/NAME"), "{stderr}");
    let (code, stderr) = run(&["--store", "dir:x"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("--tls-cert") && stderr.contains("--tls-secret"),
        "{stderr}"
    );
}
