//! `miggate webhook`: the admission webhook, serving until SIGTERM.

use std::process::ExitCode;

use anyhow::Context;
use miggate_store::StoreConfig;
use miggate_store::kube_store::KubeOptions;
use miggate_webhook::tls::CertPaths;
use miggate_webhook::{ManagedTls, Tls};

use crate::flags::webhook::WebhookArgs;

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
            if (args.cluster.kubeconfig.is_some() || args.cluster.context.is_some())
                && args.tls_secret.is_none()
            {
                anyhow::bail!(
                    "--kubeconfig and --context name a cluster: they need --store kube or --tls-secret"
                );
            }
            dir
        }
    })
}

/// Where the certificate comes from: files, or the webhook's own Secret.
fn tls(args: &WebhookArgs) -> anyhow::Result<Tls> {
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        return Ok(Tls::Files(CertPaths {
            cert: cert.clone(),
            key: key.clone(),
            client_ca: args.client_ca.clone(),
        }));
    }
    let Some((namespace, secret)) = args.tls_secret.clone() else {
        anyhow::bail!("give --tls-secret NAMESPACE/NAME, or --tls-cert and --tls-key");
    };
    Ok(Tls::Managed(ManagedTls {
        certs: miggate_certs::Config {
            namespace,
            secret,
            configurations: args.inject_ca_into.clone(),
            wanted: miggate_certs::Wanted {
                names: args.tls_dns_name.clone(),
                ca_lifetime: args.ca_lifetime,
                serving_lifetime: args.cert_lifetime,
                overlap: args.ca_overlap,
            },
            propagation: args.ca_propagation,
            resync: RESYNC,
        },
        client_ca: args.client_ca.clone(),
        kubeconfig: args.cluster.kubeconfig.clone(),
        context: args.cluster.context.clone(),
    }))
}

/// Time between the certificate manager's rounds when no watch sees a change: renewal ahead
/// of expiry is noticed within it.
const RESYNC: std::time::Duration = std::time::Duration::from_secs(60);

/// Runs the webhook until SIGTERM or Ctrl-C, then drains in-flight requests and exits 0.
pub fn run(args: &WebhookArgs) -> anyhow::Result<ExitCode> {
    let _log = crate::service::init_logging();
    let mut config = miggate_webhook::Config::new(tls(args)?, store(args)?);
    config.listen = args.listen;
    config.health_listen = args.health_listen;
    config.poll_interval = args.poll_interval;
    config.max_connections = usize::try_from(args.max_connections).unwrap_or(usize::MAX);
    config.max_connections_per_source =
        usize::try_from(args.max_connections_per_source).unwrap_or(usize::MAX);
    config.max_connection_age = args.max_connection_age;
    config.max_handshakes = usize::try_from(args.max_handshakes).unwrap_or(usize::MAX);
    config.handshake_timeout = args.handshake_timeout;
    config.deadline = args.request_deadline;
    config.min_body_rate = args.min_body_rate;
    config.binders.clone_from(&args.binders);
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
