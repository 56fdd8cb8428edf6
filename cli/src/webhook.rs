//! `miggate webhook`: the admission webhook, serving until SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use miggate_webhook::StoreConfig;
use miggate_webhook::kube_store::KubeOptions;
use miggate_webhook::tls::CertPaths;

use crate::args::store_arg;

/// Flags of `miggate webhook`.
#[derive(Debug, clap::Args)]
pub struct WebhookArgs {
    /// HTTPS address the apiserver calls (`POST /validate`).
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:8443")]
    pub listen: SocketAddr,
    /// Plain-HTTP address for `/healthz`, `/readyz` and `/metrics`.
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:8080")]
    pub health_listen: SocketAddr,
    /// PEM certificate chain, leaf first; re-read when its content changes.
    #[arg(long, value_name = "PATH")]
    pub tls_cert: PathBuf,
    /// PEM private key; re-read with the certificate.
    #[arg(long, value_name = "PATH")]
    pub tls_key: PathBuf,
    /// Where checkpoints, node inventories and restore pods come from: `kube` (watch caches
    /// over the API server; the default inside a cluster, where KUBERNETES_SERVICE_HOST is
    /// set) or `dir:PATH` (a file store with `checkpoints/<namespace>/<name>.yaml` and
    /// `nodes/<node>.yaml`).
    #[arg(long, value_name = "kube|dir:PATH", value_parser = store_arg)]
    pub store: Option<StoreConfig>,
    /// With `--store kube`: a label selector restore pods carry (e.g.
    /// `miggate.io/restore=true`), so only they are watched. Without it every pod is watched
    /// and all but those annotated `miggate.io/restore-from` are dropped on arrival.
    #[arg(long, value_name = "SELECTOR")]
    pub restore_pod_selector: Option<String>,
    /// With `--store kube`: how long a watch cache may be behind the API server (its watch
    /// failing: the server restarting, unreachable, or refusing) before `/readyz` reports not
    /// ready and restores are refused; until then decisions are answered from the caches
    /// (`60s`, `2m`; a bare number is seconds).
    #[arg(long, value_name = "DURATION", default_value = "60s",
          value_parser = crate::duration::DurationParser::seconds(1, 86_400))]
    pub max_staleness: Duration,
    /// Which cluster `--store kube` watches, as kubectl's flags say it.
    #[command(flatten)]
    pub cluster: crate::service::ClusterFlags,
    /// Time between checks of the certificate files and the store for changes (`10s`, `1m`;
    /// a bare number is seconds).
    #[arg(long, value_name = "DURATION", default_value = "10s",
          value_parser = crate::duration::DurationParser::seconds(1, 3600))]
    pub poll_interval: Duration,
    /// Most admission connections open at once; one accepted beyond it is closed at once
    /// (the newest is shed, those open carry on). The default fits the Deployment's 256 MiB
    /// memory limit; scale it with the limit.
    #[arg(long, value_name = "N", default_value_t = miggate_webhook::connections::DEFAULT_MAX_CONNECTIONS as u64,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_connections: u64,
    /// Most admission connections open at once from one source address; one more from it is
    /// closed at once, so one client cannot take every place under `--max-connections`. Keep
    /// it above what one API server replica opens (one connection per call in flight).
    #[arg(long, value_name = "N", default_value_t = miggate_webhook::connections::DEFAULT_MAX_CONNECTIONS_PER_SOURCE as u64,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_connections_per_source: u64,
    /// Age after which an admission connection is closed at its next idle moment (the request
    /// in flight answered with `connection: close`), so every client reconnects and passes the
    /// connection caps again (`5m`, `90s`; a bare number is seconds).
    #[arg(long, value_name = "DURATION", default_value = "5m",
          value_parser = crate::duration::DurationParser::seconds(1, 86_400))]
    pub max_connection_age: Duration,
    /// PEM bundle of CAs: when given, a client must present a certificate chaining to one of
    /// them, or its TLS handshake fails (give the API server one through its
    /// AdmissionConfiguration). Re-read with the certificate.
    #[arg(long, value_name = "FILE")]
    pub client_ca: Option<PathBuf>,
    /// Time from a request's head to its answer, the body read included (`4s`, `2500ms`; a
    /// bare number is seconds); keep it under the webhook configuration's `timeoutSeconds`.
    #[arg(long, value_name = "DURATION", default_value = "4s",
          value_parser = crate::duration::DurationParser::seconds(1, 29))]
    pub request_deadline: Duration,
    /// Bytes per second a request body must average after its first second, or the request
    /// is answered 408 and its connection closed; 0 leaves only the deadline.
    #[arg(long, value_name = "BYTES", default_value_t = miggate_webhook::body::DEFAULT_MIN_BODY_RATE)]
    pub min_body_rate: u64,
}

/// The store asked for, or the in-cluster default.
fn store(args: &WebhookArgs) -> anyhow::Result<StoreConfig> {
    let store = match &args.store {
        Some(s) => s.clone(),
        None if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() => {
            StoreConfig::Kube(KubeOptions::default())
        }
        None => anyhow::bail!(
            "--store is required outside a cluster (KUBERNETES_SERVICE_HOST is not set): use --store kube or --store dir:PATH"
        ),
    };
    Ok(match store {
        StoreConfig::Kube(_) => StoreConfig::Kube(KubeOptions {
            restore_pod_selector: args.restore_pod_selector.clone(),
            kubeconfig: args.cluster.kubeconfig.clone(),
            context: args.cluster.context.clone(),
            max_staleness: args.max_staleness,
        }),
        dir => {
            if args.restore_pod_selector.is_some() {
                anyhow::bail!("--restore-pod-selector needs --store kube");
            }
            if args.cluster.kubeconfig.is_some() || args.cluster.context.is_some() {
                anyhow::bail!("--kubeconfig and --context name a cluster: they need --store kube");
            }
            dir
        }
    })
}

/// Runs the webhook until SIGTERM or Ctrl-C, then drains in-flight requests and exits 0.
pub fn run(args: &WebhookArgs) -> anyhow::Result<ExitCode> {
    let _log = crate::service::init_logging();
    let mut config = miggate_webhook::Config::new(
        CertPaths {
            cert: args.tls_cert.clone(),
            key: args.tls_key.clone(),
            client_ca: args.client_ca.clone(),
        },
        store(args)?,
    );
    config.listen = args.listen;
    config.health_listen = args.health_listen;
    config.poll_interval = args.poll_interval;
    config.max_connections = usize::try_from(args.max_connections).unwrap_or(usize::MAX);
    config.max_connections_per_source =
        usize::try_from(args.max_connections_per_source).unwrap_or(usize::MAX);
    config.max_connection_age = args.max_connection_age;
    config.deadline = args.request_deadline;
    config.min_body_rate = args.min_body_rate;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let stop = async {
        let signal = crate::service::stop_signal().await;
        tracing::info!("{signal} received; stopping");
    };
    runtime.block_on(miggate_webhook::serve(config, |_| {}, stop))?;
    Ok(ExitCode::SUCCESS)
}
