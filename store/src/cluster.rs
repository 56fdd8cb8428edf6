//! A client for the cluster a kubectl user means: `--kubeconfig` and `--context` as kubectl
//! takes them, else the environment (`KUBECONFIG` or `~/.kube/config`, else the pod's service
//! account). The loading is kube's own; only its errors are put in words here, once, without
//! the client library's internals (`failed to infer config: in-cluster: (…)`).
//!
//! `miggate webhook --store kube` and `miggate publish` both get their client here, so the two
//! commands find the same cluster from the same flags.

use std::path::Path;

use kube::config::{Config, KubeConfigOptions, Kubeconfig, KubeconfigError};
use miggate_compat::escape::escape;

use crate::Error;

/// Which cluster: a kubeconfig file and a context in it, each `None` for kubectl's default.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClusterArgs<'a> {
    /// The kubeconfig file (`--kubeconfig`); `None`: `KUBECONFIG`, else `~/.kube/config`,
    /// else the pod's service account.
    pub kubeconfig: Option<&'a Path>,
    /// The context (`--context`); `None`: the kubeconfig's current context.
    pub context: Option<&'a str>,
}

/// The client configuration for `args`.
pub async fn config(args: ClusterArgs<'_>) -> Result<Config, Error> {
    let options = KubeConfigOptions {
        context: args.context.map(str::to_string),
        ..KubeConfigOptions::default()
    };
    if let Some(path) = args.kubeconfig {
        let file = Kubeconfig::read_from(path).map_err(|e| cluster(words(&e, Some(path))))?;
        return Config::from_custom_kubeconfig(file, &options)
            .await
            .map_err(|e| cluster(words(&e, Some(path))));
    }
    match Config::from_kubeconfig(&options).await {
        Ok(config) => Ok(config),
        // No kubeconfig anywhere: in a pod, its service account; else there is no cluster.
        Err(e) if args.context.is_none() && no_kubeconfig(&e) => Config::incluster().map_err(|_| {
            let missing = match &e {
                KubeconfigError::ReadConfig(_, path) => {
                    format!(
                        "{} does not exist and this is not a pod; ",
                        escape(&path.display().to_string())
                    )
                }
                _ => String::new(),
            };
            cluster(format!(
                "no cluster: {missing}set KUBECONFIG (or --kubeconfig), or run in a pod"
            ))
        }),
        Err(e) => Err(cluster(words(&e, None))),
    }
}

/// A client for `args`.
pub async fn client(args: ClusterArgs<'_>) -> Result<kube::Client, Error> {
    let config = config(args).await?;
    kube::Client::try_from(config).map_err(|e| cluster(client_words(&e)))
}

/// A client for `config` that records the watches the server accepts through `layer`.
pub fn client_with(config: Config, layer: &crate::freshness::WatchStartLayer) -> Result<kube::Client, Error> {
    let builder = kube::client::ClientBuilder::try_from(config).map_err(|e| cluster(client_words(&e)))?;
    Ok(builder.with_layer(layer).build())
}

/// Why the client could not be set up, in words, by what kube says failed. The TLS library's
/// own text is kept only as the last cause, once; an X.509 v1 client certificate, which
/// kubectl accepts and rustls does not, is named as such.
fn client_words(e: &kube::Error) -> String {
    use kube::client::RustlsTlsError as Tls;
    let hint = match e {
        kube::Error::RustlsTls(tls) => match tls {
            Tls::InvalidPrivateKey(inner) if format!("{inner:?}").contains("UnsupportedCertVersion") => {
                "the kubeconfig's client certificate is an X.509 v1 certificate, which miggate's TLS \
                 (rustls) does not accept; reissue it as v3 (openssl x509 -req with -extfile, or the \
                 cluster's own CA tooling)"
                    .to_string()
            }
            Tls::InvalidPrivateKey(_) | Tls::MissingPrivateKey | Tls::UnknownPrivateKeyFormat => {
                "the kubeconfig's client key cannot be read (a PEM private key matching its certificate)"
                    .to_string()
            }
            other => format!(
                "the kubeconfig's TLS settings cannot be used: {}",
                escape(&other.to_string())
            ),
        },
        other => escape(&other.to_string()).into_owned(),
    };
    format!("cannot set up the Kubernetes client: {hint}")
}

fn cluster(why: String) -> Error {
    Error::Cluster { why }
}

/// Whether the kubeconfig error only says there is no kubeconfig file to read.
fn no_kubeconfig(e: &KubeconfigError) -> bool {
    match e {
        KubeconfigError::FindPath => true,
        KubeconfigError::ReadConfig(io, _) => io.kind() == std::io::ErrorKind::NotFound,
        _ => false,
    }
}

/// A kubeconfig error in words, naming the file when known.
fn words(e: &KubeconfigError, path: Option<&Path>) -> String {
    let file = |p: &Path| escape(&p.display().to_string()).into_owned();
    match e {
        KubeconfigError::ReadConfig(io, p) => format!("cannot read kubeconfig {}: {}", file(p), io_words(io)),
        KubeconfigError::LoadContext(name) => format!(
            "no context `{}` in the kubeconfig{}",
            escape(name),
            path.map(|p| format!(" {}", file(p))).unwrap_or_default()
        ),
        KubeconfigError::CurrentContextNotSet => {
            "the kubeconfig sets no current-context: name one with --context".to_string()
        }
        KubeconfigError::Parse(inner) => format!(
            "kubeconfig{} is not a kubeconfig: {}",
            path.map(|p| format!(" {}", file(p))).unwrap_or_default(),
            escape(
                inner
                    .without_snippet()
                    .to_string()
                    .lines()
                    .next()
                    .unwrap_or_default()
            )
        ),
        other => format!("kubeconfig: {}", escape(&other.to_string())),
    }
}

/// An I/O error's words without the `(os error N)` after them.
fn io_words(e: &std::io::Error) -> String {
    let text = e.to_string();
    text.rsplit_once(" (os error ")
        .map_or(text.clone(), |(words, _)| words.to_string())
}

#[cfg(test)]
mod tests {
    use super::client_words;
    use kube::client::RustlsTlsError as Tls;

    #[test]
    fn tls_failures_are_said_in_words() {
        let v1 = rustls::Error::InvalidCertificate(rustls::CertificateError::Other(rustls::OtherError(
            std::sync::Arc::new(std::io::Error::other("UnsupportedCertVersion")),
        )));
        assert_eq!(
            client_words(&kube::Error::RustlsTls(Tls::InvalidPrivateKey(v1))),
            "cannot set up the Kubernetes client: the kubeconfig's client certificate is an X.509 v1 certificate, which miggate's TLS (rustls) does not accept; reissue it as v3 (openssl x509 -req with -extfile, or the cluster's own CA tooling)"
        );
        assert_eq!(
            client_words(&kube::Error::RustlsTls(Tls::MissingPrivateKey)),
            "cannot set up the Kubernetes client: the kubeconfig's client key cannot be read (a PEM private key matching its certificate)"
        );
        assert_eq!(
            client_words(&kube::Error::RustlsTls(Tls::MissingCertificate)),
            "cannot set up the Kubernetes client: the kubeconfig's TLS settings cannot be used: identity PEM is missing certificate"
        );
    }
}
