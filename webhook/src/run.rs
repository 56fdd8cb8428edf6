//! Running the webhook: both listeners, the reload loop, and a graceful stop.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::Error;
use crate::body::{BodyLimits, DEFAULT_BODY_BUDGET_BYTES, DEFAULT_MIN_BODY_RATE};
use crate::connections::{
    CappedTls, ConnectionGate, DEFAULT_HANDSHAKE_TIMEOUT, DEFAULT_MAX_CONNECTION_AGE,
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_CONNECTIONS_PER_SOURCE,
};
use crate::handshakes::{DEFAULT_MAX_HANDSHAKES, HandshakePool};
use crate::http1::{self, Stop};
use crate::metrics::Metrics;
use crate::server::{AppState, DEFAULT_DEADLINE, Store, admission_service, health_router};
use crate::tls::{CertPaths, Reload, Reloader};
use miggate_store::StoreConfig;
use miggate_store::file_store::FileStore;
use miggate_store::kube_store::KubeStore;

/// Everything `miggate webhook` is told: its certificate, its store, and the rest
/// ([`Settings`]).
#[derive(Debug, Clone)]
pub struct Config {
    /// Where the admission port's certificate comes from.
    pub tls: Tls,
    /// Where facts come from.
    pub store: StoreConfig,
    /// Addresses, limits and binders.
    pub settings: Settings,
}

/// What `miggate webhook` is told besides its certificate and store. [`Default`] gives each the
/// value of its constant in `miggate_wire::webhook`, which the CLI's flags default to as well.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The HTTPS admission address.
    pub listen: SocketAddr,
    /// The plain-HTTP health and metrics address.
    pub health_listen: SocketAddr,
    /// How often the certificate files and the store are re-read.
    pub poll_interval: Duration,
    /// The per-request deadline (under the apiserver's `timeoutSeconds`).
    pub deadline: Duration,
    /// How long in-flight requests may take to finish after a stop is asked.
    pub drain: Duration,
    /// The cap on admission connections past their TLS handshake; the newest are shed beyond it.
    pub max_connections: usize,
    /// The cap on open admission connections from one source address, so one client cannot
    /// take every place under `max_connections`.
    pub max_connections_per_source: usize,
    /// The age past which an admission connection is closed at its next idle moment, so a
    /// client holding places must reconnect and pass the caps again.
    pub max_connection_age: Duration,
    /// Admission connections that may be in their TLS handshake at once, apart from
    /// `max_connections`; a newcomer to a full pool takes the place of the oldest handshake
    /// of the address holding the most ([`crate::handshakes`]).
    pub max_handshakes: usize,
    /// How long a TLS handshake may take before its connection is closed.
    pub handshake_timeout: Duration,
    /// The minimum average body rate in bytes per second after the first second (0: none).
    pub min_body_rate: u64,
    /// Bytes of request bodies held in memory at once, over all connections.
    pub body_budget: usize,
    /// The user names whose Bindings may carry the device map (`--binder`).
    pub binders: Vec<String>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            listen: miggate_wire::webhook::LISTEN,
            health_listen: miggate_wire::webhook::HEALTH_LISTEN,
            poll_interval: miggate_wire::webhook::POLL_INTERVAL,
            deadline: DEFAULT_DEADLINE,
            drain: miggate_wire::webhook::DRAIN,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_source: DEFAULT_MAX_CONNECTIONS_PER_SOURCE,
            max_connection_age: DEFAULT_MAX_CONNECTION_AGE,
            max_handshakes: DEFAULT_MAX_HANDSHAKES,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            min_body_rate: DEFAULT_MIN_BODY_RATE,
            body_budget: DEFAULT_BODY_BUDGET_BYTES,
            binders: vec![miggate_wire::webhook::DEFAULT_BINDER.to_string()],
        }
    }
}

/// Where the admission port's certificate comes from.
#[derive(Debug, Clone)]
pub enum Tls {
    /// Files (`--tls-cert`, `--tls-key`), re-read when their content changes.
    Files(CertPaths),
    /// The webhook's own certificates, kept in a Secret (`--tls-secret`).
    Managed(ManagedTls),
}

impl From<CertPaths> for Tls {
    fn from(paths: CertPaths) -> Self {
        Tls::Files(paths)
    }
}

/// The webhook's own certificates: the manager's configuration, the client CA bundle, and the
/// cluster that holds the Secret.
#[derive(Debug, Clone)]
pub struct ManagedTls {
    /// The Secret, names, lifetimes and configurations.
    pub certs: miggate_certs::Config,
    /// The client CA bundle (`--client-ca`), when clients must present a certificate.
    pub client_ca: Option<PathBuf>,
    /// The kubeconfig (`--kubeconfig`); `None`: the environment.
    pub kubeconfig: Option<PathBuf>,
    /// The context (`--context`).
    pub context: Option<String>,
}

impl Config {
    /// A configuration with the default [`Settings`].
    pub fn new(tls: impl Into<Tls>, store: StoreConfig) -> Self {
        Config {
            tls: tls.into(),
            store,
            settings: Settings::default(),
        }
    }
}

/// hyper's read buffer per connection: request heads are a few hundred bytes; body chunks
/// pass through it.
const MAX_CONNECTION_BUFFER: usize = 64 * 1024;

/// How long the health port's requests in flight may take once the webhook stops.
const HEALTH_DRAIN: Duration = Duration::from_secs(1);

/// The addresses a running webhook listens on (with the ports the OS chose for port 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    /// HTTPS admission.
    pub admission: SocketAddr,
    /// Plain-HTTP health.
    pub health: SocketAddr,
}

/// A non-blocking listener on `addr`, and the address it got (port 0 lets the system pick).
fn bind(addr: SocketAddr) -> Result<(std::net::TcpListener, SocketAddr), Error> {
    let listener = std::net::TcpListener::bind(addr).map_err(|source| Error::Bind { addr, source })?;
    listener
        .set_nonblocking(true)
        .map_err(|source| Error::Bind { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| Error::Bind { addr, source })?;
    Ok((listener, bound))
}

/// Loads the store and the certificate, binds both ports, reports them through `on_bound`,
/// and serves until `shutdown` resolves; then stops accepting, lets in-flight requests finish
/// (up to `drain`), and returns. Start-up errors (an unreadable store root, a bad
/// certificate, a port in use) are returned before anything is served.
pub async fn serve(
    config: Config,
    on_bound: impl FnOnce(Bound),
    shutdown: impl Future<Output = ()>,
) -> Result<(), Error> {
    let metrics = Metrics::new();
    let (store, files) = open_store(&config.store, &metrics).await?;
    let (reloader, certs) = match &config.tls {
        Tls::Files(paths) => (Reloader::load(paths.clone())?, None),
        Tls::Managed(managed) => {
            let (reloader, handle) = managed_tls(managed, &metrics).await?;
            (reloader, Some(handle))
        }
    };
    let mut state = AppState::with_store(store, metrics);
    state.certs = certs;
    state.binders.clone_from(&config.settings.binders);
    // The decision asks of a restore pod what the pod watch selects: the same parsed value.
    if let StoreConfig::Kube(options) = &config.store {
        state
            .restore_pod_selector
            .clone_from(&options.restore_pod_selector);
    }
    state.deadline = config.settings.deadline;
    state.body = BodyLimits::new(config.settings.min_body_rate, config.settings.body_budget);
    let (gate, handshakes) = connection_limits(&config, &state.metrics);
    let state = Arc::new(state);

    let (admission_listener, admission_addr) = bind(config.settings.listen)?;
    let (health_listener, health_addr) = bind(config.settings.health_listen)?;
    let bound = Bound {
        admission: admission_addr,
        health: health_addr,
    };

    let acceptor = CappedTls::new(reloader.clone(), gate, handshakes)
        .timeout(config.settings.handshake_timeout)
        .counting_failures(state.metrics.handshake_failures.clone());
    let stop = Stop::new();
    let admission = tokio::spawn(http1::serve(
        admission_listener,
        acceptor,
        admission_service(state.clone()),
        http1::Options::new(
            config.settings.deadline,
            config.settings.drain,
            MAX_CONNECTION_BUFFER,
        )
        .max_age(
            config.settings.max_connection_age,
            state.metrics.connections_retired.clone(),
        )
        .accept_errors(state.metrics.accept_errors.clone()),
        stop.clone(),
    ));

    // The health port has no cap (the kubelet's probes must always get in), but the same
    // head deadline, so no client holds a connection there for longer than it.
    let health_stop = Stop::new();
    let health = tokio::spawn(http1::serve(
        health_listener,
        http1::Plain,
        health_router(state.clone()),
        http1::Options::new(config.settings.deadline, HEALTH_DRAIN, MAX_CONNECTION_BUFFER),
        health_stop.clone(),
    ));

    let poller = tokio::spawn(poll(
        files,
        reloader,
        state.clone(),
        config.settings.poll_interval,
    ));

    state.ready.store(true, Ordering::Release);
    tracing::info!(admission = %bound.admission, health = %bound.health, "miggate webhook serving");
    on_bound(bound);

    shutdown.await;
    tracing::info!(
        drain_s = config.settings.drain.as_secs(),
        "stopping: draining in-flight admission requests"
    );
    state.ready.store(false, Ordering::Release);
    stop.ask();
    let served = admission.await;
    poller.abort();
    health_stop.ask();
    let health_served = health.await;
    served_result("admission", served)?;
    served_result("health", health_served)?;
    tracing::info!("stopped");
    Ok(())
}

/// The admission port's caps from `config`: the gate on established connections and the
/// handshake pool, counting into `metrics`, which show the caps too.
fn connection_limits(config: &Config, metrics: &Metrics) -> (ConnectionGate, HandshakePool) {
    let gauge = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    metrics
        .connections_max
        .set(gauge(config.settings.max_connections));
    metrics
        .connections_per_source_max
        .set(gauge(config.settings.max_connections_per_source));
    let gate = ConnectionGate::new(
        config.settings.max_connections,
        metrics.connections_open.clone(),
        metrics.connections_shed.clone(),
    )
    .per_source(
        config.settings.max_connections_per_source,
        metrics.connections_shed_per_source.clone(),
    )
    .making_room(metrics.connections_evicted.clone());
    metrics
        .connections_handshaking_max
        .set(gauge(config.settings.max_handshakes));
    let handshakes = HandshakePool::new(
        config.settings.max_handshakes,
        metrics.connections_handshaking.clone(),
        metrics.handshakes_dropped.clone(),
    );
    (gate, handshakes)
}

/// The store `config` names: a directory loaded off the executor threads (kept too for the
/// reload loop), or watch caches over the API server, counting into `metrics`.
async fn open_store(
    config: &StoreConfig,
    metrics: &Metrics,
) -> Result<(Store, Option<Arc<FileStore>>), Error> {
    match config {
        StoreConfig::Dir(root) => {
            let root = root.clone();
            let store = tokio::task::spawn_blocking(move || FileStore::open(root))
                .await
                .map_err(|e| Error::Serve {
                    what: "store loader",
                    source: std::io::Error::other(e.to_string()),
                })??;
            let store = Arc::new(store);
            Ok((Store::File(store.clone()), Some(store)))
        }
        StoreConfig::Kube(options) => {
            let config = miggate_store::cluster::config(miggate_store::cluster::ClusterArgs {
                kubeconfig: options.kubeconfig.as_deref(),
                context: options.context.as_deref(),
            })
            .await?;
            Ok((
                Store::Kube(KubeStore::start(config, options, &metrics.watch)?),
                None,
            ))
        }
    }
}

/// Starts the certificate manager and returns the TLS configuration it installs into, once
/// it has something to serve.
async fn managed_tls(
    managed: &ManagedTls,
    metrics: &Metrics,
) -> Result<(Reloader, miggate_certs::Handle), Error> {
    let client = miggate_store::cluster::client(miggate_store::cluster::ClusterArgs {
        kubeconfig: managed.kubeconfig.as_deref(),
        context: managed.context.as_deref(),
    })
    .await?;
    let source = format!("Secret {}/{}", managed.certs.namespace, managed.certs.secret);
    let slot: Arc<std::sync::Mutex<Option<Reloader>>> = Arc::default();
    let client_ca = managed.client_ca.clone();
    let install = {
        let slot = slot.clone();
        move |pair: &miggate_certs::ServingPair| -> Result<(), miggate_certs::Error> {
            let mut slot = match slot.lock() {
                Ok(s) => s,
                Err(p) => p.into_inner(),
            };
            let done = match slot.as_ref() {
                Some(reloader) => reloader.install(pair),
                None => Reloader::managed(&source, pair, client_ca.clone()).map(|r| {
                    *slot = Some(r);
                }),
            };
            done.map_err(|e| miggate_certs::Error::Install { source: Box::new(e) })
        }
    };
    let handle = miggate_certs::start(
        client,
        managed.certs.clone(),
        Arc::new(install),
        metrics.certificates.clone(),
    )
    .await;
    let reloader = match slot.lock() {
        Ok(s) => s.clone(),
        Err(p) => p.into_inner().clone(),
    };
    // `start` returns once a pair is installed.
    let reloader = reloader.ok_or_else(|| Error::Serve {
        what: "certificate manager",
        source: std::io::Error::other("returned with nothing to serve"),
    })?;
    Ok((reloader, handle))
}

/// How the admission server's task ended, as the error `serve` returns.
fn served_result(
    what: &'static str,
    served: Result<std::io::Result<()>, tokio::task::JoinError>,
) -> Result<(), Error> {
    match served {
        Ok(Ok(())) => Ok(()),
        Ok(Err(source)) => Err(Error::Serve { what, source }),
        Err(e) => Err(Error::Serve {
            what,
            source: std::io::Error::other(e.to_string()),
        }),
    }
}

/// Re-reads the certificate and the file store (when there is one) every `interval`, off the
/// executor threads.
async fn poll(store: Option<Arc<FileStore>>, reloader: Reloader, state: Arc<AppState>, interval: Duration) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    loop {
        ticker.tick().await;
        let (store, reloader) = (store.clone(), reloader.clone());
        let done =
            tokio::task::spawn_blocking(move || (reloader.check(), store.map_or(Ok(false), |s| s.refresh())))
                .await;
        match done {
            Ok((tls, refreshed)) => {
                match tls {
                    Reload::Reloaded => state
                        .metrics
                        .tls_reloads
                        .get_or_create(&crate::metrics::ResultLabel { result: "ok" })
                        .inc(),
                    Reload::Rejected => state
                        .metrics
                        .tls_reloads
                        .get_or_create(&crate::metrics::ResultLabel { result: "error" })
                        .inc(),
                    Reload::Unchanged => 0,
                };
                if let Err(e) = refreshed {
                    tracing::error!(error = %e, "store reload failed; the previous snapshot keeps serving");
                }
            }
            Err(e) => tracing::error!(error = %e, "reload task failed"),
        }
    }
}
