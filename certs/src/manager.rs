//! The loop that keeps the Secret, the configurations and the served certificate in step.
//!
//! Each round reads the Secret, judges it ([`judge`]), writes what changed (create, or update
//! at the version read: replicas racing end with one CA, the losers re-reading), patches every
//! configuration whose `caBundle` differs, and only then switches what this replica serves: a
//! new certificate is served once every configuration has trusted its CA for `propagation`,
//! so no API server call meets a certificate it cannot verify. Watches of the Secret and of
//! each configuration start a round at once (a deleted Secret, a wiped `caBundle`); a timer
//! starts one every `resync` (renewal ahead of expiry), and every second while waiting.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ObjectMeta, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};
use serde::Serialize;
use tokio::sync::Notify;

use crate::error::{Error, api_words};
use crate::inject::{ConfigurationRef, Configurations, patch_for};
use crate::material::{
    Cert, Change, Contents, PREVIOUS_CA_UNTIL, Pair, Raw, Wanted, Why, bundle_certs, judge,
};
use crate::metrics::{CertMetrics, RotationLabel, StepLabel};

/// What the manager is told.
#[derive(Debug, Clone)]
pub struct Config {
    /// The Secret's namespace.
    pub namespace: String,
    /// The Secret's name.
    pub secret: String,
    /// The configurations whose `caBundle` it keeps.
    pub configurations: Vec<ConfigurationRef>,
    /// The names, lifetimes and overlap of the certificates.
    pub wanted: Wanted,
    /// How long every configuration must have trusted a CA before a certificate of it is
    /// served: the API server's own watch of the configurations must have seen the patch.
    pub propagation: Duration,
    /// Time between rounds when nothing happens.
    pub resync: Duration,
}

/// Puts a serving pair into the TLS server.
pub trait Install: Send + Sync {
    /// Serves `pair` for new connections from now on.
    fn install(&self, pair: &Pair) -> Result<(), Error>;
}

impl<F: Fn(&Pair) -> Result<(), Error> + Send + Sync> Install for F {
    fn install(&self, pair: &Pair) -> Result<(), Error> {
        self(pair)
    }
}

/// What `/readyz` shows of the certificates.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Status {
    /// Whether the API server can verify what this replica serves: every configuration has
    /// trusted the served certificate's CA for the propagation time.
    pub verified: bool,
    /// The served certificate's not-after, RFC 3339.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_after: Option<String>,
    /// Why not verified yet, or what failed last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting: Option<String>,
}

/// The manager's handle: its status, and its task.
#[derive(Debug, Clone)]
pub struct Handle {
    status: Arc<Mutex<Status>>,
}

impl Handle {
    /// The status now.
    pub fn status(&self) -> Status {
        match self.status.lock() {
            Ok(s) => s.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }
}

/// The served pair and the facts about it.
struct Served {
    pair: Pair,
    ca: Cert,
    verified: bool,
}

struct Manager {
    config: Config,
    secrets: Api<Secret>,
    configurations: Configurations,
    install: Arc<dyn Install>,
    metrics: CertMetrics,
    status: Arc<Mutex<Status>>,
    served: Option<Served>,
    /// The CA every configuration trusts, and since when.
    trusted_since: Option<(Vec<u8>, Instant)>,
    /// The last error logged, so a repeating one is logged once.
    last_error: Option<String>,
    /// Rounds failed in a row: the wait before the next doubles with each, up to [`AT_MOST`].
    failures: u32,
    /// When the CA or the serving certificate is next due for renewal: an idle loop wakes then,
    /// not only at the next resync.
    next_due: Option<SystemTime>,
    /// The labels and annotations of the Secret last read. A Secret deleted to rotate comes
    /// back with them: whoever installed it (Helm's release annotations, an owner's labels)
    /// still owns it, so `helm uninstall` removes it too.
    kept_meta: KeptMeta,
}

/// Labels and annotations of the Secret, as last read.
#[derive(Debug, Clone, Default)]
struct KeptMeta {
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
}

impl KeptMeta {
    fn of(secret: &Secret) -> Self {
        KeptMeta {
            labels: secret.metadata.labels.clone().unwrap_or_default(),
            annotations: secret.metadata.annotations.clone().unwrap_or_default(),
        }
    }
}

/// What the round asks of the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// Again at once: a write lost a race.
    Now,
    /// Again soon: waiting for propagation.
    Soon,
    /// After a wait that grows with each failure in a row.
    Retry,
    /// At the next resync, or when a watch sees a change.
    Idle,
}

/// Starts the manager: rounds until a certificate is served (each failure logged once and
/// retried), then the loop in the background. Returns once there is something to serve.
pub async fn start(
    client: kube::Client,
    config: Config,
    install: Arc<dyn Install>,
    metrics: CertMetrics,
) -> Handle {
    let status = Arc::new(Mutex::new(Status {
        waiting: Some("no certificate yet".into()),
        ..Status::default()
    }));
    let mut manager = Manager {
        secrets: Api::namespaced(client.clone(), &config.namespace),
        configurations: Configurations::new(client),
        config,
        install,
        metrics,
        status: status.clone(),
        served: None,
        trusted_since: None,
        last_error: None,
        failures: 0,
        next_due: None,
        kept_meta: KeptMeta::default(),
    };
    let wake = Arc::new(Notify::new());
    manager.watch(wake.clone());
    while manager.served.is_none() {
        let next = manager.round().await;
        if next != Next::Now && manager.served.is_none() {
            tokio::time::sleep(manager.wait(next)).await;
        }
    }
    tokio::spawn(async move {
        loop {
            let next = manager.round().await;
            if next == Next::Now {
                continue;
            }
            let wait = manager.wait(next);
            tokio::select! {
                () = wake.notified() => {}
                () = tokio::time::sleep(wait) => {}
            }
        }
    });
    Handle { status }
}

const SOON: Duration = Duration::from_secs(1);
/// The longest wait after failures in a row (the API server down, RBAC refusing).
const AT_MOST: Duration = Duration::from_secs(30);

fn unix(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

impl Manager {
    /// Watches of the Secret and of each configuration, by name, that wake the loop.
    fn watch(&self, wake: Arc<Notify>) {
        let by_name = |name: &str| watcher::Config::default().fields(&format!("metadata.name={name}"));
        spawn_trigger(self.secrets.clone(), by_name(&self.config.secret), wake.clone());
        for c in &self.config.configurations {
            match c.kind {
                crate::inject::Kind::Validating => {
                    spawn_trigger(self.configurations.validating(), by_name(&c.name), wake.clone());
                }
                crate::inject::Kind::Mutating => {
                    spawn_trigger(self.configurations.mutating(), by_name(&c.name), wake.clone());
                }
            }
        }
    }

    fn failed(&mut self, step: &'static str, e: &Error) {
        self.metrics.errors.get_or_create(&StepLabel { step }).inc();
        let text = e.to_string();
        if self.last_error.as_deref() != Some(&text) {
            tracing::error!(error = %text, "webhook certificates: a step failed; retrying");
            self.last_error = Some(text.clone());
        }
        self.set_status(Some(text));
    }

    fn set_status(&self, waiting: Option<String>) {
        let verified = self.served.as_ref().is_some_and(|s| s.verified);
        let not_after = self
            .served
            .as_ref()
            .map(|s| humantime::format_rfc3339_seconds(leaf_not_after(&s.pair)).to_string());
        self.metrics.verified.set(i64::from(verified));
        let mut status = match self.status.lock() {
            Ok(s) => s,
            Err(p) => p.into_inner(),
        };
        *status = Status {
            verified,
            not_after,
            waiting: if verified { None } else { waiting },
        };
    }

    async fn round(&mut self) -> Next {
        match self.try_round().await {
            Ok(next) => {
                self.failures = 0;
                next
            }
            Err((step, e)) => {
                self.failed(step, &e);
                self.failures = self.failures.saturating_add(1);
                Next::Retry
            }
        }
    }

    /// How long to wait before the next round.
    fn wait(&self, next: Next) -> Duration {
        match next {
            Next::Now => Duration::ZERO,
            Next::Soon => SOON,
            Next::Retry => SOON
                .saturating_mul(1 << self.failures.saturating_sub(1).min(5))
                .min(AT_MOST),
            Next::Idle => {
                let due = self
                    .next_due
                    .and_then(|t| t.duration_since(SystemTime::now()).ok())
                    .map_or(self.config.resync, |d| d.max(SOON));
                due.min(self.config.resync)
            }
        }
    }

    async fn try_round(&mut self) -> Result<Next, (&'static str, Error)> {
        let now = SystemTime::now();
        let name = self.config.secret.clone();
        let read = self.secrets.get_opt(&name).await.map_err(|e| {
            (
                "read",
                Error::Api {
                    what: format!("read Secret {}/{name}", self.config.namespace),
                    why: api_words(&e),
                },
            )
        })?;
        if let Some(secret) = &read {
            self.kept_meta = KeptMeta::of(secret);
        }
        let raw = read.as_ref().map(raw_of).unwrap_or_default();
        let serving_ca = self.served.as_ref().map(|s| s.ca.clone());
        let judged = judge(&raw, &self.config.wanted, now, serving_ca.as_ref()).map_err(|e| ("write", e))?;
        if !judged.changes.is_empty() {
            match self.write(read, &judged.contents).await {
                Ok(true) => self.count(&judged.changes),
                Ok(false) => return Ok(Next::Now),
                Err(e) => return Err(("write", e)),
            }
        }
        let contents = judged.contents;
        let ca = Cert::from_pem(contents.ca.cert_pem.as_bytes()).ok_or((
            "serve",
            Error::Install {
                why: "the CA does not read back".into(),
            },
        ))?;
        self.metrics.ca_not_after.set(unix(ca.not_after));
        self.next_due =
            Cert::from_pem(contents.leaf.cert_pem.as_bytes()).map(|leaf| leaf.due().min(ca.due()));
        let untrusted = self.inject(&contents, &ca).await.map_err(|e| ("inject", e))?;
        self.serve(&contents, ca, untrusted.is_none())
            .map_err(|e| ("serve", e))?;
        self.last_error = None;
        let waiting = self.waiting(untrusted);
        self.set_status(waiting.clone());
        let switching = self.served.as_ref().is_some_and(|s| s.pair != contents.leaf);
        Ok(if waiting.is_some() || switching {
            Next::Soon
        } else {
            Next::Idle
        })
    }

    fn waiting(&self, untrusted: Option<String>) -> Option<String> {
        match (&self.served, untrusted) {
            (None, _) => Some("no certificate yet".into()),
            (Some(s), _) if s.verified => None,
            (Some(_), Some(why)) => Some(why),
            (Some(_), None) => Some(format!(
                "waiting {}s for the API server to load the caBundle",
                self.config.propagation.as_secs()
            )),
        }
    }

    fn count(&self, changes: &[Change]) {
        for change in changes {
            let (what, reason) = match change {
                Change::Ca(why) => ("ca", why.as_str()),
                Change::Serving(why) => ("serving", why.as_str()),
                Change::Bundle => ("bundle", "overlap"),
            };
            self.metrics
                .rotations
                .get_or_create(&RotationLabel { what, reason })
                .inc();
            match change {
                Change::Bundle => tracing::info!(what, "webhook certificates: the CA bundle rewritten"),
                // A new install, or a planned renewal: nothing was wrong.
                Change::Ca(Why::Missing | Why::Due) | Change::Serving(Why::Due | Why::NewCa) => {
                    tracing::info!(what, reason, secret = %self.config.secret, "webhook certificates: made");
                }
                _ => {
                    tracing::warn!(what, reason, secret = %self.config.secret, "webhook certificates: replaced")
                }
            }
        }
    }

    /// Writes `contents` over what was read: an update at the version read, or a create when
    /// there was nothing. `Ok(false)`: another replica wrote first (read again).
    async fn write(&self, read: Option<Secret>, contents: &Contents) -> Result<bool, Error> {
        let data: BTreeMap<String, ByteString> = contents
            .data()
            .into_iter()
            .map(|(k, v)| (k, ByteString(v)))
            .collect();
        let name = &self.config.secret;
        let what = |verb: &str| format!("{verb} Secret {}/{name}", self.config.namespace);
        let created = read.is_none();
        let mut secret = read.unwrap_or_else(|| {
            let mut labels = self.kept_meta.labels.clone();
            labels.insert("app.kubernetes.io/part-of".to_string(), "miggate".to_string());
            Secret {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    labels: Some(labels),
                    annotations: Some(self.kept_meta.annotations.clone()),
                    ..ObjectMeta::default()
                },
                type_: Some("Opaque".into()),
                ..Secret::default()
            }
        });
        secret.data = Some(data);
        secret.string_data = None;
        let annotations = secret.meta_mut().annotations.get_or_insert_with(BTreeMap::new);
        match contents.previous_until_text() {
            Some(until) => annotations.insert(PREVIOUS_CA_UNTIL.to_string(), until),
            None => annotations.remove(PREVIOUS_CA_UNTIL),
        };
        let params = PostParams::default();
        let done = if created {
            self.secrets.create(&params, &secret).await.map(|_| ())
        } else {
            self.secrets.replace(name, &params, &secret).await.map(|_| ())
        };
        match done {
            Ok(()) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(Error::Api {
                what: what(if created { "create" } else { "update" }),
                why: api_words(&e),
            }),
        }
    }

    /// Patches every configuration whose webhooks lack the bundle. `Ok(None)` when every
    /// webhook of every configuration now trusts `ca`; `Ok(Some(why))` when one does not exist.
    async fn inject(&mut self, contents: &Contents, ca: &Cert) -> Result<Option<String>, Error> {
        let bundle = contents.bundle.as_bytes();
        let mut missing = None;
        for at in self.config.configurations.clone() {
            let Some(webhooks) = self.configurations.read(&at).await? else {
                missing.get_or_insert_with(|| format!("{at} does not exist"));
                continue;
            };
            if let Some(patch) = patch_for(&webhooks, bundle) {
                self.configurations.patch(&at, patch).await?;
                self.metrics.injections.inc();
                tracing::info!(configuration = %at, "webhook certificates: caBundle injected");
            }
        }
        if let Some(why) = missing {
            self.trusted_since = None;
            return Ok(Some(why));
        }
        // Every configuration carries `bundle`, which holds `ca` first.
        let trusted = bundle_certs(bundle).is_some_and(|cs| cs.iter().any(|c| c.der == ca.der));
        match &self.trusted_since {
            Some((der, _)) if *der == ca.der && trusted => {}
            _ if trusted => self.trusted_since = Some((ca.der.clone(), Instant::now())),
            _ => self.trusted_since = None,
        }
        Ok(None)
    }

    /// Serves `contents.leaf` when nothing is served yet, or when every configuration has
    /// trusted its CA for the propagation time; marks the served pair verified then.
    fn serve(&mut self, contents: &Contents, ca: Cert, trusted: bool) -> Result<(), Error> {
        let settled = trusted
            && self
                .trusted_since
                .as_ref()
                .is_some_and(|(der, since)| *der == ca.der && since.elapsed() >= self.config.propagation);
        match &mut self.served {
            Some(s) if s.pair == contents.leaf => {
                s.verified |= settled;
            }
            Some(_) if !settled => {}
            current => {
                self.install.install(&contents.leaf)?;
                let first = current.is_none();
                *current = Some(Served {
                    pair: contents.leaf.clone(),
                    ca,
                    verified: settled,
                });
                if !first {
                    self.metrics.switches.inc();
                }
                self.metrics.not_after.set(unix(leaf_not_after(&contents.leaf)));
                tracing::info!(
                    not_after = %humantime::format_rfc3339_seconds(leaf_not_after(&contents.leaf)),
                    "webhook certificates: serving a new certificate"
                );
            }
        }
        Ok(())
    }
}

fn leaf_not_after(pair: &Pair) -> SystemTime {
    Cert::from_pem(pair.cert_pem.as_bytes()).map_or(UNIX_EPOCH, |c| c.not_after)
}

/// The Secret's data and annotation, as [`judge`] reads them.
fn raw_of(secret: &Secret) -> Raw {
    Raw {
        data: secret
            .data
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.0.clone()))
            .collect(),
        previous_until: secret
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(PREVIOUS_CA_UNTIL))
            .cloned(),
    }
}

/// A watch of one object by name that wakes the loop on every event; failures back off and
/// retry inside kube-runtime's watcher.
fn spawn_trigger<K>(api: Api<K>, config: watcher::Config, wake: Arc<Notify>)
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    tokio::spawn(async move {
        let mut events = std::pin::pin!(watcher(api, config).default_backoff());
        while let Some(event) = events.next().await {
            if event.is_ok() {
                wake.notify_one();
            }
        }
    });
}
