//! Load benchmark: the admission server over HTTPS on loopback, driven by concurrent
//! keep-alive clients for a bounded number of requests, beside a bare axum + rustls echo server
//! driven the same way in the same run. Prints both throughputs, their ratio, and p50/p99.
//!
//! `cargo bench -p miggate-webhook --bench load`; `MIGGATE_BENCH_REQUESTS` (default 20000)
//! and `MIGGATE_BENCH_CLIENTS` (default 16) size it. It then measures latency paced at
//! 2,000 requests/s, and resident memory across `MIGGATE_BENCH_SOAK` (default 100000) more
//! requests after the warm-up. Servers and clients share the machine, so
//! the ratio is the figure to compare across machines, not the absolute rate.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::routing::post;
use axum_server::tls_rustls::RustlsConfig;
use miggate_webhook::tls::{CertPaths, Reloader};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Result {
    rate: f64,
    p50: Duration,
    p99: Duration,
}

/// The process's resident memory in KiB (Linux), to see whether serving grows it.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Drives `requests` requests from `clients` keep-alive clients, each as fast as it can, or at
/// `rate` requests per second in all when given (an open-loop pace, so latency is measured at
/// that load rather than at saturation).
async fn drive(
    url: &str,
    ca: &str,
    body: &'static str,
    clients: usize,
    requests: usize,
    rate: Option<f64>,
) -> Result {
    let per_client = requests / clients;
    let mut tasks = Vec::new();
    let make = || {
        reqwest::Client::builder()
            .tls_certs_only([reqwest::Certificate::from_pem(ca.as_bytes()).unwrap()])
            .no_proxy()
            .pool_max_idle_per_host(1)
            .build()
            .unwrap()
    };
    // Warm up: one connection per client, handshakes done before the clock starts.
    let pool: Vec<reqwest::Client> = (0..clients).map(|_| make()).collect();
    for c in &pool {
        let r = c.post(url).body(body).send().await.unwrap();
        assert!(r.status().is_success());
        r.bytes().await.unwrap();
    }
    let started = Instant::now();
    for c in pool {
        let url = url.to_string();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(per_client);
            let mut pace = rate.map(|r| {
                let mut i = tokio::time::interval(Duration::from_secs_f64(clients as f64 / r));
                i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
                i
            });
            for _ in 0..per_client {
                if let Some(p) = pace.as_mut() {
                    p.tick().await;
                }
                let t = Instant::now();
                let r = c
                    .post(&url)
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await
                    .unwrap();
                assert!(r.status().is_success());
                r.bytes().await.unwrap();
                lat.push(t.elapsed());
            }
            lat
        }));
    }
    let mut all = Vec::with_capacity(requests);
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let wall = started.elapsed();
    all.sort();
    let at = |q: f64| all[((all.len() as f64 * q) as usize).min(all.len() - 1)];
    Result {
        rate: all.len() as f64 / wall.as_secs_f64(),
        p50: at(0.50),
        p99: at(0.99),
    }
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let requests = env_usize("MIGGATE_BENCH_REQUESTS", 20_000);
    let clients = env_usize("MIGGATE_BENCH_CLIENTS", 16);
    let body: &'static str = include_str!("../../testdata/admission/pod-create-restore-allowed.json");
    let store = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/webhook-store");

    let dir = tempfile::tempdir().unwrap();
    let (paths, ca_pem) = certificates(dir.path());

    // Both servers on one runtime of two workers; the clients on another.
    let servers = two_workers();
    let (webhook, webhook_addr, stop_tx) = start_webhook(&servers, &paths, store);
    let (echo_addr, echo_handle) = start_echo(&servers, &paths);

    let driver = two_workers();
    let echo_url = format!("https://{echo_addr}/validate");
    let hook_url = format!("https://{webhook_addr}/validate");
    let echo = driver.block_on(drive(&echo_url, &ca_pem, body, clients, requests, None));
    let hook = driver.block_on(drive(&hook_url, &ca_pem, body, clients, requests, None));
    // Latency at the load the issue names, 2,000 requests per second, for five seconds.
    let paced = driver.block_on(drive(&hook_url, &ca_pem, body, clients, 10_000, Some(2_000.0)));
    // Memory: after a warm-up run, serve `MIGGATE_BENCH_SOAK` more (default 100,000) and
    // compare the resident size (servers and clients share the process, so this bounds both).
    let soak = env_usize("MIGGATE_BENCH_SOAK", 100_000);
    let before = rss_kib();
    driver.block_on(drive(&hook_url, &ca_pem, body, clients, soak, None));
    let after = rss_kib();

    println!(
        "load: {requests} requests, {clients} keep-alive clients, {} byte review (Pod CREATE restore, allowed with a warning)",
        body.len()
    );
    println!(
        "bare axum+rustls echo: {:>9.0} req/s  p50 {:>7.0} us  p99 {:>7.0} us",
        echo.rate,
        echo.p50.as_secs_f64() * 1e6,
        echo.p99.as_secs_f64() * 1e6
    );
    println!(
        "miggate webhook:       {:>9.0} req/s  p50 {:>7.0} us  p99 {:>7.0} us",
        hook.rate,
        hook.p50.as_secs_f64() * 1e6,
        hook.p99.as_secs_f64() * 1e6
    );
    println!("webhook / echo throughput: {:.2}", hook.rate / echo.rate);
    println!(
        "miggate webhook at 2000 req/s: p50 {:>7.0} us  p99 {:>7.0} us",
        paced.p50.as_secs_f64() * 1e6,
        paced.p99.as_secs_f64() * 1e6
    );
    println!(
        "resident memory over {soak} more requests: {before} KiB -> {after} KiB ({:+} KiB)",
        after as i64 - before as i64
    );

    let _ = stop_tx.send(());
    echo_handle.graceful_shutdown(Some(Duration::from_secs(1)));
    servers.block_on(webhook).unwrap().unwrap();
}

/// A multi-threaded runtime of two workers.
fn two_workers() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A CA and a leaf for 127.0.0.1, the leaf's certificate and key written into `dir`: their
/// paths, and the CA's PEM for the clients to trust.
fn certificates(dir: &Path) -> (CertPaths, String) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let paths = CertPaths {
        cert: dir.join("tls.crt"),
        key: dir.join("tls.key"),
        client_ca: None,
    };
    std::fs::write(&paths.cert, leaf.pem()).unwrap();
    std::fs::write(&paths.key, key.serialize_pem()).unwrap();
    (paths, ca_cert.pem())
}

/// The webhook serving the file store at `store` on `servers`: its task, its admission address,
/// and the sender that stops it.
fn start_webhook(
    servers: &tokio::runtime::Runtime,
    paths: &CertPaths,
    store: PathBuf,
) -> (
    tokio::task::JoinHandle<std::result::Result<(), miggate_webhook::Error>>,
    SocketAddr,
    tokio::sync::oneshot::Sender<()>,
) {
    let (bound_tx, bound_rx) = std::sync::mpsc::channel::<SocketAddr>();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let mut config = miggate_webhook::Config::new(paths.clone(), miggate_store::StoreConfig::Dir(store));
    config.settings.listen = "127.0.0.1:0".parse().unwrap();
    config.settings.health_listen = "127.0.0.1:0".parse().unwrap();
    let webhook = servers.spawn(miggate_webhook::serve(
        config,
        move |b| bound_tx.send(b.admission).unwrap(),
        async move {
            let _ = stop_rx.await;
        },
    ));
    let webhook_addr = bound_rx.recv_timeout(Duration::from_secs(30)).unwrap();
    (webhook, webhook_addr, stop_tx)
}

/// A bare axum echo on `servers` with the same rustls configuration the webhook serves, made
/// from the same files: its address and handle.
fn start_echo(
    servers: &tokio::runtime::Runtime,
    paths: &CertPaths,
) -> (SocketAddr, axum_server::Handle<SocketAddr>) {
    let echo_tls = RustlsConfig::from_config(Reloader::load(paths.clone()).unwrap().current());
    let echo_handle = axum_server::Handle::<SocketAddr>::new();
    let echo_app = Router::new().route("/validate", post(|b: Bytes| async move { b }));
    servers.spawn(
        axum_server::bind_rustls("127.0.0.1:0".parse::<SocketAddr>().unwrap(), echo_tls)
            .handle(echo_handle.clone())
            .serve(echo_app.into_make_service()),
    );
    let echo_addr = servers.block_on(echo_handle.listening()).unwrap();
    (echo_addr, echo_handle)
}
