//! The admission webhook's defaults, written once: what `miggate webhook` starts with when a
//! flag is not given, and what the chart's Deployment, Service and probes name (a test holds
//! the chart to them). The webhook's library reads the same values.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

/// The HTTPS admission port (`POST /validate`, `/mutate`, ...).
pub const ADMISSION_PORT: u16 = 8443;
/// The plain-HTTP health port (`/healthz`, `/readyz`, `/metrics`).
pub const HEALTH_PORT: u16 = 8080;
/// `--listen`: the admission port on every address.
pub const LISTEN: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), ADMISSION_PORT);
/// `--health-listen`: the health port on every address.
pub const HEALTH_LISTEN: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), HEALTH_PORT);

/// `--max-connections`: admission connections open at once past their TLS handshake. Sized to the Deployment's 256 MiB
/// memory limit (docs/webhook.md, Limits).
pub const MAX_CONNECTIONS: usize = 1024;
/// `--max-connections-per-source`: an eighth of [`MAX_CONNECTIONS`], so one client cannot
/// take every place.
pub const MAX_CONNECTIONS_PER_SOURCE: usize = 128;
/// `--max-handshakes`: admission connections in their TLS handshake at once, apart from
/// [`MAX_CONNECTIONS`]; a newcomer to a full pool takes the place of the oldest handshake of
/// the address holding the most.
pub const MAX_HANDSHAKES: usize = 512;
/// `--handshake-timeout`: how long a TLS handshake may take before its connection is closed.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(1);
/// `--max-connection-age`: after it a connection is closed at its next idle moment.
pub const MAX_CONNECTION_AGE: Duration = Duration::from_secs(300);
/// `--max-staleness`: how long a watch cache may be behind the API server before `/readyz`
/// says not ready and restores are refused.
pub const MAX_STALENESS: Duration = Duration::from_secs(60);
/// `--poll-interval`: time between checks of the certificate files and the store.
pub const POLL_INTERVAL: Duration = Duration::from_secs(10);
/// `--request-deadline`: from a request's head to its answer; under the webhook
/// configurations' `timeoutSeconds`.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(4);
/// `--min-body-rate`: bytes per second a request body must average after its first second.
pub const MIN_BODY_RATE: u64 = 16 * 1024;
/// How long requests in flight may take once the webhook is told to stop; the Deployment's
/// grace period is longer.
pub const DRAIN: Duration = Duration::from_secs(20);

/// The Secret that holds the webhook's own CA and serving certificate (`--tls-secret`),
/// in the webhook's namespace.
pub const CERT_SECRET: &str = "miggate-webhook-certs";
/// `--ca-lifetime`: a new CA's lifetime (ten years, renewed with two thirds gone).
pub const CA_LIFETIME: Duration = Duration::from_secs(315_576_000);
/// `--cert-lifetime`: a new serving certificate's lifetime (one year, renewed with two thirds
/// gone).
pub const CERT_LIFETIME: Duration = Duration::from_secs(31_557_600);
/// `--ca-overlap`: how long the CA before a rotation stays in every `caBundle`.
pub const CA_OVERLAP: Duration = Duration::from_secs(600);
/// `--ca-propagation`: how long every configuration must have carried a CA before a
/// certificate of it is served (the API server's watch of the configurations loads it).
pub const CA_PROPAGATION: Duration = Duration::from_secs(5);

/// `--binder`: the scheduler whose Bindings may carry the device map, when none is named.
pub const DEFAULT_BINDER: &str = "system:kube-scheduler";
