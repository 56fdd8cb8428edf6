//! `miggate webhook`: the admission webhook, serving until SIGTERM.

use std::process::ExitCode;

use anyhow::Context;
use miggate_store::StoreConfig;
use miggate_store::kube_store::KubeOptions;
use miggate_webhook::tls::CertPaths;
use miggate_webhook::{ManagedTls, Settings, Tls};

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

/// The flags' settings: each flag's value, its default when not given; what no flag sets
/// keeps [`Settings`]'s default.
impl From<&WebhookArgs> for Settings {
    fn from(args: &WebhookArgs) -> Self {
        Settings {
            listen: args.listen,
            health_listen: args.health_listen,
            poll_interval: args.poll_interval,
            deadline: args.request_deadline,
            max_connections: args.max_connections,
            max_connections_per_source: args.max_connections_per_source,
            max_connection_age: args.max_connection_age,
            max_handshakes: args.max_handshakes,
            handshake_timeout: args.handshake_timeout,
            min_body_rate: args.min_body_rate,
            binders: args.binders.clone(),
            ..Settings::default()
        }
    }
}

/// Runs the webhook until SIGTERM or Ctrl-C, then drains in-flight requests and exits 0.
pub fn run(args: &WebhookArgs) -> anyhow::Result<ExitCode> {
    let _log = crate::service::init_logging();
    let config = miggate_webhook::Config {
        tls: tls(args)?,
        store: store(args)?,
        settings: Settings::from(args),
    };
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

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Webhook {
        #[command(flatten)]
        args: WebhookArgs,
    }

    fn settings(flags: &[&str]) -> Settings {
        let mut argv = vec!["webhook", "--tls-cert", "c.pem", "--tls-key", "k.pem"];
        argv.extend(flags);
        Settings::from(&Webhook::try_parse_from(argv).unwrap().args)
    }

    /// A flag not given is the library's default: the two read the same constants, and this
    /// fails when one of them stops.
    #[test]
    fn no_flag_gives_the_librarys_defaults() {
        assert_eq!(settings(&[]), Settings::default());
    }

    /// Each flag lands in its own setting.
    #[test]
    fn each_flag_sets_its_setting() {
        let got = settings(&[
            "--listen",
            "127.0.0.1:1",
            "--health-listen",
            "127.0.0.1:2",
            "--poll-interval",
            "3s",
            "--request-deadline",
            "2s",
            "--max-connections",
            "5",
            "--max-connections-per-source",
            "6",
            "--max-connection-age",
            "7s",
            "--max-handshakes",
            "8",
            "--handshake-timeout",
            "900ms",
            "--min-body-rate",
            "10",
            "--binder",
            "a",
            "--binder",
            "b",
        ]);
        let want = Settings {
            listen: "127.0.0.1:1".parse().unwrap(),
            health_listen: "127.0.0.1:2".parse().unwrap(),
            poll_interval: std::time::Duration::from_secs(3),
            deadline: std::time::Duration::from_secs(2),
            max_connections: 5,
            max_connections_per_source: 6,
            max_connection_age: std::time::Duration::from_secs(7),
            max_handshakes: 8,
            handshake_timeout: std::time::Duration::from_millis(900),
            min_body_rate: 10,
            binders: vec!["a".into(), "b".into()],
            ..Settings::default()
        };
        assert_eq!(got, want);
    }
}
