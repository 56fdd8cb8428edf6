//! The real `miggate webhook` binary for tests: a CA made here, the binary started over the
//! recorded file store on loopback ports, a TLS connector and a client that trust only that CA.
//! Shared by the test files of the binary (`mod support;`), with the paths they all start from
//! (the workspace's root, its `testdata/`).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `rel` under the workspace's `testdata/`.
#[allow(unused_imports)] // Not every test binary that includes this module reads testdata.
pub use miggate_testkit::testdata_path as testdata;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::pem::PemObject;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// Slack on every deadline: the machine may be slow and loaded.
pub const SLACK: Duration = Duration::from_secs(20);

pub struct Pki {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

/// A CA made here and a leaf for 127.0.0.1 signed by it.
pub fn pki() -> Pki {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "miggate test CA");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    let cert = leaf.signed_by(&key, &issuer).unwrap();
    Pki {
        ca_pem: ca_cert.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    }
}

pub fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

/// The workspace's root, where the binary's relative paths in tests start.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The running binary; killed when dropped. Its log is kept in a file, shown on failure.
pub struct Webhook {
    pub child: Child,
    pub listen: SocketAddr,
    pub health: SocketAddr,
    pub dir: tempfile::TempDir,
    pub connector: TlsConnector,
    pub ca_pem: String,
}

impl Drop for Webhook {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Webhook {
    pub async fn start(flags: &[&str]) -> Webhook {
        let store = format!("--store=dir:{}", testdata("webhook-store").display());
        Webhook::launch(&store, None, flags).await
    }

    /// The binary with `--store kube`, its client from the kubeconfig file at `kubeconfig`.
    #[allow(dead_code)]
    pub async fn start_kube(kubeconfig: &std::path::Path, flags: &[&str]) -> Webhook {
        Webhook::launch("--store=kube", Some(kubeconfig), flags).await
    }

    /// [`Webhook::start_kube`] with another build of the binary (a benchmark's baseline).
    pub async fn start_kube_with(binary: &Path, kubeconfig: &Path, flags: &[&str]) -> Webhook {
        Webhook::launch_binary(binary, "--store=kube", Some(kubeconfig), flags).await
    }

    async fn launch(store: &str, kubeconfig: Option<&std::path::Path>, flags: &[&str]) -> Webhook {
        Webhook::launch_binary(Path::new(env!("CARGO_BIN_EXE_miggate")), store, kubeconfig, flags).await
    }

    async fn launch_binary(
        binary: &Path,
        store: &str,
        kubeconfig: Option<&std::path::Path>,
        flags: &[&str],
    ) -> Webhook {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let pki = pki();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tls.crt"), &pki.cert_pem).unwrap();
        std::fs::write(dir.path().join("tls.key"), &pki.key_pem).unwrap();
        let log = std::fs::File::create(dir.path().join("webhook.log")).unwrap();
        let (listen, health) = (free_port(), free_port());
        let child = Command::new(binary)
            .arg("webhook")
            .arg(format!("--listen={listen}"))
            .arg(format!("--health-listen={health}"))
            .arg(format!("--tls-cert={}", dir.path().join("tls.crt").display()))
            .arg(format!("--tls-key={}", dir.path().join("tls.key").display()))
            .arg(store)
            .args(flags)
            .envs(kubeconfig.map(|k| ("KUBECONFIG", k.as_os_str())))
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env("MIGGATE_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls::pki_types::CertificateDer::pem_slice_iter(pki.ca_pem.as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        let config = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let mut webhook = Webhook {
            child,
            listen,
            health,
            dir,
            connector: TlsConnector::from(Arc::new(config)),
            ca_pem: pki.ca_pem,
        };
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(r) = plain().get(format!("http://{health}/readyz")).send().await
                && r.status().is_success()
            {
                break;
            }
            assert!(
                Instant::now() < until,
                "webhook never became ready: {}",
                webhook.log()
            );
            assert!(
                webhook.child.try_wait().unwrap().is_none(),
                "webhook exited: {}",
                webhook.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        webhook
    }

    pub fn log(&self) -> String {
        let text = std::fs::read_to_string(self.dir.path().join("webhook.log")).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(20).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    }

    /// One TLS connection to the admission port.
    pub async fn tls(&self) -> std::io::Result<TlsStream<TcpStream>> {
        let tcp = TcpStream::connect(self.listen).await?;
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
        self.connector.connect(name, tcp).await
    }

    /// A connection that sent a request head declaring `declared` bytes and then `sent` of them.
    pub async fn partial(&self, declared: usize, sent: &[u8]) -> std::io::Result<TlsStream<TcpStream>> {
        let mut tls = self.tls().await?;
        let head = format!(
            "POST /validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {declared}\r\n\r\n"
        );
        tls.write_all(head.as_bytes()).await?;
        tls.write_all(sent).await?;
        tls.flush().await?;
        Ok(tls)
    }

    /// A metric's value from `/metrics`.
    pub async fn metric(&self, name: &str) -> i64 {
        let text = plain()
            .get(format!("http://{}/metrics", self.health))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} not in\n{text}"))
    }

    /// Posts the recorded allowed review over a fresh connection.
    pub async fn review(&self) -> (u16, String) {
        let client = reqwest::Client::builder()
            .tls_certs_only([reqwest::Certificate::from_pem(self.ca_pem.as_bytes()).unwrap()])
            .no_proxy()
            .timeout(SLACK)
            .build()
            .unwrap();
        let body = std::fs::read_to_string(testdata("admission/pod-create-restore-allowed.json")).unwrap();
        let resp = client
            .post(format!("https://{}/validate", self.listen))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap_or_else(|e| panic!("review not answered: {e}; {}", self.log()));
        (resp.status().as_u16(), resp.text().await.unwrap())
    }

    /// The child's resident memory, KiB.
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }
}

pub fn plain() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// Posts `body` to `path` of the webhook over HTTPS and returns the review's `response`,
/// asserting a 200 (the log in the panic when nothing answered).
pub async fn post_review(webhook: &Webhook, path: &str, body: String) -> serde_json::Value {
    let resp = https(webhook)
        .post(format!("https://{}{path}", webhook.listen))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap_or_else(|e| panic!("not answered: {e}; {}", webhook.log()));
    assert_eq!(resp.status().as_u16(), 200);
    resp.json::<serde_json::Value>().await.unwrap()["response"].clone()
}

/// The JSON patch of a review's response, decoded; `None` when it has none.
pub fn patch_of(response: &serde_json::Value) -> Option<serde_json::Value> {
    let bytes: Vec<u8> = serde_json::from_value(response.get("patch")?.clone()).unwrap();
    Some(serde_json::from_slice(&bytes).unwrap())
}

/// The Go peer's objects, as its agent writes them: a `PodSnapshot` of container `engine` of
/// pod `vllm-0` in `ml`, its `PodSnapshotContent`, and a `status.source` recording
/// 2 x 3g.40gb + 1 x 1g.10gb of an H100, 32Gi and 8 CPUs; and miggate's `GpuNode` of profiles.
pub mod peer {
    use serde_json::{Value, json};

    /// A `PodSnapshot` in `ml`, bound to `content` when given.
    pub fn snapshot(name: &str, content: Option<&str>) -> Value {
        let mut s = json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "PodSnapshot",
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {"source": {"podRef": {"name": "vllm-0", "containers": ["engine"]}}}});
        if let Some(c) = content {
            s["status"] = json!({"boundSnapshotContentName": c});
        }
        s
    }

    /// A `PodSnapshotContent` pointing back to `snapshot` in `ml`, with `source` as its
    /// `status.source` when given.
    pub fn content(name: &str, snapshot: &str, source: Option<Value>) -> Value {
        let mut c = json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "PodSnapshotContent",
            "metadata": {"name": name},
            "spec": {"snapshotRef": {"namespace": "ml", "name": snapshot},
                "source": {"nodeName": "node-big", "podRef": {"name": "vllm-0", "containers": ["engine"]}}}});
        if let Some(source) = source {
            c["status"] = json!({"source": source});
        }
        c
    }

    /// A `status.source` of every part: node, pod and devices.
    pub fn full_source() -> Value {
        let i = |p: &str| json!({"productName": "NVIDIA H100 80GB HBM3", "migProfile": p});
        json!({"node": {"name": "node-big", "architecture": "amd64", "kernelVersion": "5.15.0-1071-aws"},
            "pod": {"image": "vllm:1", "memory": "32Gi", "cpu": "8"},
            "devices": {"nvidia": {"driverVersion": "580.82.07", "instances": [i("3g.40gb"), i("3g.40gb"), i("1g.10gb")]}}})
    }

    /// A `GpuNode` `name` of H100 slices of `profiles`.
    pub fn gpu_node(name: &str, profiles: &[&str]) -> Value {
        let devices: Vec<Value> = profiles
            .iter()
            .enumerate()
            .map(|(n, p)| json!({"uuid": format!("MIG-00000000-0000-5000-8000-{n:012}"), "parentUuid": "GPU-00000000-0000-4000-8000-000000000000",
                "productName": "NVIDIA H100 80GB HBM3", "migProfile": p}))
            .collect();
        json!({"apiVersion": "miggate.io/v1alpha1", "kind": "GpuNode", "metadata": {"name": name},
            "spec": {"observedAt": "2026-12-01T00:00:00Z", "manifest": {
                "host": {"nodeName": name, "kernelVersion": "5.15.0-1071-aws", "cpuArch": "amd64"},
                "nvidia": {"driverVersion": "580.82.07", "devices": devices}}}})
    }
}

/// A client that trusts only the webhook's CA.
pub fn https(webhook: &Webhook) -> reqwest::Client {
    reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(webhook.ca_pem.as_bytes()).unwrap()])
        .no_proxy()
        .timeout(SLACK)
        .build()
        .unwrap()
}

/// A kubeconfig in `dir` whose one cluster answers nowhere (`https://127.0.0.1:1`), with a
/// token user and a current context: loading it succeeds, every request fails to connect.
pub fn unreachable_kubeconfig(dir: &Path) -> PathBuf {
    let kc = dir.join("kubeconfig");
    std::fs::write(
        &kc,
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\"}}]\ncontexts: [{name: a, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {token: t}}]\ncurrent-context: a\n",
    )
    .unwrap();
    kc
}
