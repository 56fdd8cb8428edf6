//! The loop that keeps the Secret, the configurations and the served certificate in step.
//!
//! Each round learns, once, who this webhook is (`identity.rs`: what it marks the Secret
//! with), reads the Secret, judges it ([`judge_trusting`]: data another wrote is replaced
//! whole), writes what changed (`secret.rs`: create, update at the version read, or delete
//! and create when it cannot be updated), patches every configuration whose `caBundle`
//! differs, and only then switches what this replica serves: a new certificate is served once
//! every configuration has trusted its CA for `propagation`, so no API server call meets a
//! certificate it cannot verify. Watches of the Secret and of
//! each configuration start a round at once (a deleted Secret, a wiped `caBundle`); a timer
//! starts one every `resync` (renewal ahead of expiry), and every second while waiting.
//!
//! A replica whose served certificate is past its renewal point while rounds fail reports not
//! ready ([`Status`]), so the failure is seen while a third of the certificate's life is left.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};
use serde::Serialize;
use tokio::sync::Notify;

use crate::error::Error;
use crate::inject::{ConfigurationRef, Configurations, patch_for};
use crate::material::{Cert, Change, Contents, Unusable, Wanted, Why, bundle_certs, judge_trusting};
use crate::metrics::{CertMetrics, RotationLabel, StepLabel};
use crate::secret::{KeptMeta, SecretStore, Unwritable, raw_of};
use crate::serving::ServingPair;

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

/// Puts a serving pair into the TLS server: the pair as the Secret was judged into, served
/// as it is.
pub trait Install: Send + Sync {
    /// Serves `pair` for new connections from now on.
    fn install(&self, pair: &ServingPair) -> Result<(), Error>;
}

impl<F: Fn(&ServingPair) -> Result<(), Error> + Send + Sync> Install for F {
    fn install(&self, pair: &ServingPair) -> Result<(), Error> {
        self(pair)
    }
}

/// What `/readyz` shows of the certificates; the webhook is ready only while `verified`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Status {
    /// Whether this replica's certificate is fit to serve: every configuration has trusted the
    /// served certificate's CA for the propagation time, and the certificate is not past its
    /// renewal point while renewal fails (`renewal_overdue`).
    pub verified: bool,
    /// The served certificate is past its renewal point (two thirds of its life) and the
    /// rounds that would renew it fail: not ready, so the failure is seen (a rollout stalls,
    /// an alert on readiness fires) while a third of its life is left.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub renewal_overdue: bool,
    /// The served certificate's not-after, RFC 3339.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_after: Option<String>,
    /// Why not verified yet, or what failed last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting: Option<String>,
}

/// What the manager reports, as last set, and the failing renewal that makes it unready once
/// the served certificate is due: read at each [`Handle::status`], so readiness turns at the
/// due point itself, not at the next round.
#[derive(Debug, Default)]
struct Reported {
    status: Status,
    failing: Option<Failing>,
}

/// Rounds fail while a certificate is served.
#[derive(Debug, Clone)]
struct Failing {
    /// The served certificate's renewal point.
    due: SystemTime,
    /// What failed last.
    why: String,
}

impl Reported {
    /// The status at `now`.
    fn at(&self, now: SystemTime) -> Status {
        let mut status = self.status.clone();
        if let Some(failing) = self.failing.as_ref().filter(|f| now >= f.due) {
            status.verified = false;
            status.renewal_overdue = true;
            status.waiting = Some(format!(
                "the serving certificate is past its renewal point (not after {}) and renewal fails: {}",
                status.not_after.as_deref().unwrap_or("unknown"),
                failing.why
            ));
        }
        status
    }
}

/// The manager's handle: its status, and its task.
#[derive(Debug, Clone)]
pub struct Handle {
    reported: Arc<Mutex<Reported>>,
}

impl Handle {
    /// The status now.
    pub fn status(&self) -> Status {
        lock(&self.reported).at(SystemTime::now())
    }
}

fn lock(reported: &Mutex<Reported>) -> MutexGuard<'_, Reported> {
    match reported.lock() {
        Ok(r) => r,
        Err(p) => p.into_inner(),
    }
}

/// The served pair and the facts about it.
struct Served {
    pair: ServingPair,
    ca: Cert,
    verified: bool,
    /// The served certificate's renewal point ([`Cert::due`]).
    due: SystemTime,
    /// The served certificate's not-after.
    not_after: SystemTime,
}

struct Manager {
    config: Config,
    client: kube::Client,
    secrets: SecretStore,
    configurations: Configurations,
    install: Arc<dyn Install>,
    metrics: CertMetrics,
    reported: Arc<Mutex<Reported>>,
    /// This webhook's identity, the Secret's [`WRITTEN_BY`](crate::material::WRITTEN_BY),
    /// learnt in the first round that reaches the API server.
    writer: Option<String>,
    served: Option<Served>,
    /// The CA every configuration trusts, and since when.
    trusted_since: Option<(Vec<u8>, Instant)>,
    /// The last error logged, so a repeating one is logged once.
    last_error: Option<String>,
    /// Whether the overdue renewal was logged since the last good round.
    overdue_logged: bool,
    /// Rounds failed in a row: the wait before the next doubles with each, up to [`AT_MOST`].
    failures: u32,
    /// When the CA or the serving certificate is next due for renewal: an idle loop wakes then,
    /// not only at the next resync.
    next_due: Option<SystemTime>,
    /// The labels and annotations of the Secret last read, which a Secret deleted to rotate
    /// comes back with.
    kept_meta: KeptMeta,
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
    let reported = Arc::new(Mutex::new(Reported {
        status: Status {
            waiting: Some("no certificate yet".into()),
            ..Status::default()
        },
        failing: None,
    }));
    let mut manager = Manager {
        secrets: SecretStore::new(client.clone(), &config.namespace, &config.secret),
        configurations: Configurations::new(client.clone()),
        client,
        config,
        install,
        metrics,
        reported: reported.clone(),
        writer: None,
        served: None,
        trusted_since: None,
        last_error: None,
        overdue_logged: false,
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
    Handle { reported }
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
        spawn_trigger(self.secrets.api(), by_name(&self.config.secret), wake.clone());
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
        let now = SystemTime::now();
        let overdue = self.served.as_ref().is_some_and(|s| now >= s.due);
        if overdue && !self.overdue_logged {
            tracing::error!(
                not_after = self.served_not_after().as_deref().unwrap_or("unknown"),
                error = %text,
                "webhook certificates: the serving certificate is past its renewal point and renewal fails; this replica reports not ready"
            );
            self.overdue_logged = true;
        }
        let failing = self.served.as_ref().map(|s| Failing {
            due: s.due,
            why: text.clone(),
        });
        self.set_status(Some(text), failing);
    }

    fn served_not_after(&self) -> Option<String> {
        self.served
            .as_ref()
            .map(|s| humantime::format_rfc3339_seconds(s.not_after).to_string())
    }

    /// Sets what `/readyz` shows: `waiting` while not verified, and `failing` while rounds
    /// fail (`None` after a good one).
    fn set_status(&self, waiting: Option<String>, failing: Option<Failing>) {
        let verified = self.served.as_ref().is_some_and(|s| s.verified);
        let mut reported = lock(&self.reported);
        *reported = Reported {
            status: Status {
                verified,
                renewal_overdue: false,
                not_after: self.served_not_after(),
                waiting: if verified { None } else { waiting },
            },
            failing,
        };
        let now = reported.at(SystemTime::now());
        self.metrics.verified.set(i64::from(now.verified));
        self.metrics.renewal_overdue.set(i64::from(now.renewal_overdue));
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

    /// How long until the served certificate's renewal point; `None` when it has passed or
    /// nothing is served.
    fn until_served_due(&self) -> Option<Duration> {
        let due = self.served.as_ref()?.due;
        due.duration_since(SystemTime::now()).ok()
    }

    /// How long to wait before the next round.
    fn wait(&self, next: Next) -> Duration {
        match next {
            Next::Now => Duration::ZERO,
            Next::Soon => SOON,
            // Never past the served certificate's renewal point: the round after it sets the
            // metrics of an overdue renewal (`/readyz` needs no round: it reads the time).
            Next::Retry => SOON
                .saturating_mul(1 << self.failures.saturating_sub(1).min(5))
                .min(AT_MOST)
                .min(self.until_served_due().unwrap_or(AT_MOST).max(SOON)),
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
        let writer = self.writer().await.map_err(|e| ("identity", e))?;
        let now = SystemTime::now();
        let read = self.secrets.read().await.map_err(|e| ("read", e))?;
        if let Some(secret) = &read {
            self.kept_meta = KeptMeta::of(secret);
        }
        let raw = read.as_ref().map(raw_of).unwrap_or_default();
        let serving_ca = self.served.as_ref().map(|s| s.ca.clone());
        // Only a Secret another wrote needs to know what the configurations trust already.
        let foreign = !raw.data.is_empty() && raw.written_by.as_deref() != Some(writer.as_str());
        let trusted = if foreign {
            self.trusted_everywhere().await.map_err(|e| ("read", e))?
        } else {
            Vec::new()
        };
        let judged = judge_trusting(
            &raw,
            &self.config.wanted,
            now,
            serving_ca.as_ref(),
            &writer,
            &trusted,
        )
        .map_err(|e| ("write", e))?;
        // A Secret that cannot be updated is made writable now, not when a renewal needs it,
        // so a refusal (RBAC without delete) is seen while there is time to fix it.
        let unwritable = read.as_ref().is_some_and(|s| Unwritable::of(s).is_some());
        if !judged.changes.is_empty() || unwritable {
            let outcome = self
                .secrets
                .write(read, &judged.contents, &self.kept_meta)
                .await
                .map_err(|e| ("write", e))?;
            if let Some(why) = &outcome.recreated {
                self.recreated(why);
            }
            if !outcome.written {
                return Ok(Next::Now);
            }
            self.count(&judged.changes, &judged.causes);
        }
        let contents = judged.contents;
        let ca = contents.ca_cert.clone();
        self.metrics.ca_not_after.set(unix(ca.not_after));
        self.next_due = Some(contents.serving.leaf().due().min(ca.due()));
        let untrusted = self.inject(&contents, &ca).await.map_err(|e| ("inject", e))?;
        self.serve(&contents, ca, untrusted.is_none())
            .map_err(|e| ("serve", e))?;
        self.last_error = None;
        self.overdue_logged = false;
        let waiting = self.waiting(untrusted);
        self.set_status(waiting.clone(), None);
        let switching = self.served.as_ref().is_some_and(|s| s.pair != contents.serving);
        Ok(if waiting.is_some() || switching {
            Next::Soon
        } else {
            Next::Idle
        })
    }

    /// This webhook's identity, asked of the API server once.
    async fn writer(&mut self) -> Result<String, Error> {
        if let Some(writer) = &self.writer {
            return Ok(writer.clone());
        }
        let writer = crate::identity::learn(self.client.clone()).await?;
        self.writer = Some(writer.clone());
        Ok(writer)
    }

    /// Counts and logs a Secret deleted to be created again.
    fn recreated(&self, why: &Unwritable) {
        self.metrics
            .rotations
            .get_or_create(&RotationLabel {
                what: "secret",
                reason: why.as_str(),
            })
            .inc();
        tracing::warn!(
            reason = why.as_str(),
            secret = %self.config.secret,
            detail = %why.words(),
            "webhook certificates: the Secret cannot be updated in place; deleted and created again"
        );
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

    /// Counts and logs each change; `causes` are the errors behind the CA's and the serving
    /// pair's, in order.
    fn count(&self, changes: &[Change], causes: &[Unusable]) {
        for cause in causes {
            tracing::debug!(cause = %cause, "webhook certificates: a part of the Secret cannot be kept");
        }
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
                Change::Ca(Why::Foreign) => tracing::warn!(
                    what,
                    reason,
                    secret = %self.config.secret,
                    "webhook certificates: the Secret holds data this webhook did not write; replaced, nothing of it kept"
                ),
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

    /// The CAs every webhook of every configuration trusts now (in each one's `caBundle`);
    /// none when a configuration is missing.
    async fn trusted_everywhere(&self) -> Result<Vec<Cert>, Error> {
        let mut common: Option<Vec<Cert>> = None;
        for at in &self.config.configurations {
            let Some(webhooks) = self.configurations.read(at).await? else {
                return Ok(Vec::new());
            };
            for w in &webhooks {
                let cas = w.ca_bundle.as_deref().and_then(bundle_certs).unwrap_or_default();
                common = Some(match common {
                    None => cas,
                    Some(kept) => kept
                        .into_iter()
                        .filter(|k| cas.iter().any(|c| c.der == k.der))
                        .collect(),
                });
            }
        }
        Ok(common.unwrap_or_default())
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

    /// Serves `contents.serving` when nothing is served yet, or when every configuration has
    /// trusted its CA for the propagation time; marks the served pair verified then.
    fn serve(&mut self, contents: &Contents, ca: Cert, trusted: bool) -> Result<(), Error> {
        let settled = trusted
            && self
                .trusted_since
                .as_ref()
                .is_some_and(|(der, since)| *der == ca.der && since.elapsed() >= self.config.propagation);
        match &mut self.served {
            Some(s) if s.pair == contents.serving => {
                s.verified |= settled;
            }
            Some(_) if !settled => {}
            current => {
                self.install.install(&contents.serving)?;
                let first = current.is_none();
                let leaf = contents.serving.leaf();
                *current = Some(Served {
                    pair: contents.serving.clone(),
                    ca,
                    verified: settled,
                    due: leaf.due(),
                    not_after: leaf.not_after,
                });
                if !first {
                    self.metrics.switches.inc();
                }
                self.metrics.not_after.set(unix(leaf.not_after));
                tracing::info!(
                    not_after = %humantime::format_rfc3339_seconds(leaf.not_after),
                    "webhook certificates: serving a new certificate"
                );
            }
        }
        Ok(())
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
