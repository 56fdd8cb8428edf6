//! Flags of `miggate webhook`. Their defaults are `miggate_wire::webhook`'s, which the chart's
//! Deployment is held to (crds/tests/chart.rs).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use miggate_admission::selector::RestorePodSelector;
use miggate_store::StoreConfig;
use miggate_wire::webhook as defaults;

use super::store_arg;
use crate::duration::shown;

/// Flags of `miggate webhook`.
#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("certificate").required(true).args(["tls_cert", "tls_secret"]))]
pub struct WebhookArgs {
    /// HTTPS address the apiserver calls (`POST /validate`).
    #[arg(long, value_name = "ADDR", default_value_t = defaults::LISTEN)]
    pub listen: SocketAddr,
    /// Plain-HTTP address for `/healthz`, `/readyz` and `/metrics`.
    #[arg(long, value_name = "ADDR", default_value_t = defaults::HEALTH_LISTEN)]
    pub health_listen: SocketAddr,
    /// PEM certificate chain, leaf first; re-read when its content changes.
    #[arg(
        long,
        value_name = "PATH",
        requires = "tls_key",
        conflicts_with = "tls_secret"
    )]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key; re-read with the certificate.
    #[arg(long, value_name = "PATH", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// The webhook's own certificates instead of files: a CA and a serving certificate made
    /// in process and kept in this Secret (created when missing, mended when unusable,
    /// renewed ahead of expiry), its CA injected into the configurations of
    /// `--inject-ca-into`.
    #[arg(long, value_name = "NAMESPACE/NAME", value_parser = namespaced_name,
          requires = "tls_dns_name")]
    pub tls_secret: Option<(String, String)>,
    /// With `--tls-secret`: a DNS name the serving certificate carries (repeat it: the
    /// Service's `NAME.NAMESPACE.svc` and `NAME.NAMESPACE.svc.cluster.local`, and the host of
    /// any `url` a configuration names).
    #[arg(long, value_name = "NAME", requires = "tls_secret")]
    pub tls_dns_name: Vec<String>,
    /// With `--tls-secret`: a webhook configuration whose every webhook gets the CA as its
    /// `caBundle` (`validating/NAME` or `mutating/NAME`; repeat it). Only that field is
    /// written, and a re-apply that wipes it is mended at once.
    #[arg(long, value_name = "KIND/NAME", requires = "tls_secret")]
    pub inject_ca_into: Vec<miggate_certs::ConfigurationRef>,
    /// With `--tls-secret`: a new CA's lifetime; it is rotated with two thirds gone.
    #[arg(long, value_name = "DURATION", default_value = shown(defaults::CA_LIFETIME),
          value_parser = crate::duration::DurationParser::seconds(60, 100 * 31_557_600))]
    pub ca_lifetime: Duration,
    /// With `--tls-secret`: a new serving certificate's lifetime (never past its CA's); it is
    /// renewed with two thirds gone.
    #[arg(long, value_name = "DURATION", default_value = shown(defaults::CERT_LIFETIME),
          value_parser = crate::duration::DurationParser::seconds(60, 10 * 31_557_600))]
    pub cert_lifetime: Duration,
    /// With `--tls-secret`: how long the CA before a rotation stays trusted in every
    /// `caBundle`, so replicas still serving a certificate of it keep working until they switch.
    #[arg(long, value_name = "DURATION", default_value = shown(defaults::CA_OVERLAP),
          value_parser = crate::duration::DurationParser::seconds(1, 30 * 86_400))]
    pub ca_overlap: Duration,
    /// With `--tls-secret`: how long every configuration must have carried a CA before a
    /// certificate of it is served, so the API server has loaded it.
    #[arg(long, value_name = "DURATION", default_value = shown(defaults::CA_PROPAGATION),
          value_parser = crate::duration::DurationParser::seconds(0, 600))]
    pub ca_propagation: Duration,
    /// Where checkpoints, node inventories and restore pods come from: `kube` (watch caches
    /// over the API server; the default inside a cluster, where KUBERNETES_SERVICE_HOST is
    /// set) or `dir:PATH` (a file store with `checkpoints/<namespace>/<name>.yaml` and
    /// `nodes/<node>.yaml`).
    #[arg(long, value_name = "kube|dir:PATH", value_parser = store_arg)]
    pub store: Option<StoreConfig>,
    /// With `--store kube`: a label selector restore pods carry (e.g.
    /// `miggate.io/restore=true`), so only they are watched; a restore pod created without
    /// its labels is refused, since its binding would go unchecked. Without it every pod is
    /// watched and all but those annotated `miggate.io/restore-from` are dropped on arrival.
    #[arg(long, value_name = "SELECTOR")]
    pub restore_pod_selector: Option<RestorePodSelector>,
    /// With `--store kube`: how long a watch cache may be behind the API server (its watch
    /// failing: the server restarting, unreachable, or refusing) before `/readyz` reports not
    /// ready and restores are refused; until then decisions are answered from the caches
    /// (`60s`, `2m`; a bare number is seconds).
    #[arg(long, value_name = "DURATION", default_value = shown(defaults::MAX_STALENESS),
          value_parser = crate::duration::DurationParser::seconds(1, 86_400))]
    pub max_staleness: Duration,
    /// Which cluster `--store kube` watches, as kubectl's flags say it.
    #[command(flatten)]
    pub cluster: super::cluster::ClusterFlags,
    /// Time between checks of the certificate files and the store for changes (`10s`, `1m`;
    /// a bare number is seconds).
    #[arg(long, value_name = "DURATION", default_value = shown(defaults::POLL_INTERVAL),
          value_parser = crate::duration::DurationParser::seconds(1, 3600))]
    pub poll_interval: Duration,
    /// Most admission connections open at once past their TLS handshake. At the cap, a
    /// newcomer from an address holding at least two fewer than the address holding the most
    /// takes the place of that address's oldest connection (closed at its next idle moment);
    /// any other is closed, those open carry on. The default fits the Deployment's 256 MiB
    /// memory limit; scale it with the limit.
    #[arg(long, value_name = "N", default_value_t = defaults::MAX_CONNECTIONS, value_parser = count())]
    pub max_connections: usize,
    /// Most admission connections open at once past their TLS handshake from one source
    /// address; one more from it is closed, so one client cannot take every place under
    /// `--max-connections`. Keep it above what one API server replica opens (one connection
    /// per call in flight).
    #[arg(long, value_name = "N", default_value_t = defaults::MAX_CONNECTIONS_PER_SOURCE, value_parser = count())]
    pub max_connections_per_source: usize,
    /// Age after which an admission connection is closed at its next idle moment (the request
    /// in flight answered with `connection: close`), so every client reconnects and passes the
    /// connection caps again (`5m`, `90s`; a bare number is seconds).
    #[arg(long, value_name = "DURATION", default_value = shown(defaults::MAX_CONNECTION_AGE),
          value_parser = crate::duration::DurationParser::seconds(1, 86_400))]
    pub max_connection_age: Duration,
    /// Most admission connections in their TLS handshake at once, apart from
    /// `--max-connections`. A full pool never turns a newcomer away: the source address
    /// holding the most handshakes gives up its oldest, so connections that never finish a
    /// handshake cannot keep out one that does.
    #[arg(long, value_name = "N", default_value_t = defaults::MAX_HANDSHAKES, value_parser = count())]
    pub max_handshakes: usize,
    /// How long a TLS handshake may take before its connection is closed (`1s`, `500ms`; a
    /// bare number is seconds).
    #[arg(long, value_name = "DURATION", default_value = shown(defaults::HANDSHAKE_TIMEOUT),
          value_parser = HANDSHAKE_TIMEOUT_RANGE)]
    pub handshake_timeout: Duration,
    /// A scheduler's user name whose Bindings of DRA restore pods get the device map; repeat
    /// it for several. A restore pod bound by anyone else is bound without one (counted as
    /// `unlisted-binder`; the node agent pairs the devices), as the binding policy would refuse
    /// the map from it. Keep it equal to the install's binders.
    #[arg(long = "binder", value_name = "USER", default_value = defaults::DEFAULT_BINDER)]
    pub binders: Vec<String>,
    /// PEM bundle of CAs: when given, a client must present a certificate chaining to one of
    /// them, or its TLS handshake fails (give the API server one through its
    /// AdmissionConfiguration). Re-read with the certificate.
    #[arg(long, value_name = "FILE")]
    pub client_ca: Option<PathBuf>,
    /// Time from a request's head to its answer, the body read included (`4s`, `2500ms`; a
    /// bare number is seconds); keep it under the webhook configuration's `timeoutSeconds`.
    #[arg(long, value_name = "DURATION", default_value = shown(defaults::REQUEST_DEADLINE),
          value_parser = crate::duration::DurationParser::seconds(1, 29))]
    pub request_deadline: Duration,
    /// Bytes per second a request body must average after its first second, or the request
    /// is answered 408 and its connection closed; 0 leaves only the deadline.
    #[arg(long, value_name = "BYTES", default_value_t = defaults::MIN_BODY_RATE)]
    pub min_body_rate: u64,
}

/// `--handshake-timeout`'s bounds: a handshake inside the cluster takes milliseconds, and one
/// held for long holds a place in the handshake pool.
const HANDSHAKE_TIMEOUT_RANGE: crate::duration::DurationParser = crate::duration::DurationParser {
    min: Duration::from_millis(100),
    max: Duration::from_secs(30),
};

/// A count of connections or handshakes: 1 to a million, read as a `usize` (a platform whose
/// `usize` cannot hold it refuses it as out of range).
fn count() -> impl clap::builder::TypedValueParser<Value = usize> {
    use clap::builder::TypedValueParser;
    clap::value_parser!(u64)
        .range(1..=1_000_000)
        .try_map(usize::try_from)
}

/// `NAMESPACE/NAME`: a namespace (a DNS label) and a Secret's name (a DNS subdomain), as the API
/// server requires them.
fn namespaced_name(text: &str) -> Result<(String, String), String> {
    use miggate_wire::dns::{is_dns_label, is_dns_subdomain};
    match text.split_once('/') {
        Some((ns, name)) if is_dns_label(ns) && is_dns_subdomain(name) => {
            Ok((ns.to_string(), name.to_string()))
        }
        _ => Err("expected NAMESPACE/NAME, both lower-case DNS names".into()),
    }
}
