//! Prometheus metrics: what operators graph and alert on.
//!
//! `miggate_admission_decisions_total{outcome}` counts answers by [`Outcome`]; `miggate_admission_refusals_total{check}` counts what refused (a check
//! name, or `checkpoint-not-found`, `node-not-found`, …; one request may count under several);
//! `miggate_admission_duration_seconds` is the time from a whole body to an answer;
//! `miggate_store_age_seconds` is how long ago the store last changed, `miggate_store_objects`
//! and `miggate_store_problems` what it holds; `miggate_tls_reloads_total{result}` counts
//! certificate reloads. With `--store kube`, per cached kind: `miggate_cache_age_seconds{kind}`
//! (since its last event or list), `miggate_cache_synced{kind}`, `miggate_store_objects{kind}`,
//! `miggate_watch_restarts_total{kind}` (re-lists after the first: a `410 Gone` or a broken
//! watch), `miggate_watch_errors_total{kind}` (failed lists and watches, each retried
//! after a backoff), `miggate_cache_stale_seconds{kind}` (how long the cache may have been
//! missing changes: 0 while its watch is open, else since the watch failed, until it catches
//! up), `miggate_watch_failing{kind}` (1 while that exceeds `--max-staleness`: `/readyz`
//! is then not ready and restores are refused) and `miggate_cache_served{kind}` (0 while the server does not serve
//! the kind's API: ResourceSlices before Kubernetes 1.34) and `miggate_gpu_nodes_without_inventory`
//! (Nodes with GPUs by their labels or capacity that no inventory source describes: their
//! restores' bindings pass unchecked). On the admission port:
//! `miggate_connections_open` (past their TLS handshake, now), `miggate_connections_max` (the cap),
//! `miggate_connections_shed_total` (closed because the cap was reached),
//! `miggate_connections_per_source_max` (the cap per source address),
//! `miggate_connections_shed_per_source_total` (closed because their source address
//! was at its cap), `miggate_connections_retired_total` (closed at their next idle moment
//! because they reached the maximum connection age), `miggate_connections_evicted_total`
//! (closed at their next idle moment to make room at the cap for an address holding fewer
//! places), `miggate_connections_handshaking` (in
//! their TLS handshake, now), `miggate_connections_handshaking_max` (the handshake pool's
//! size), `miggate_connections_handshakes_dropped_total{reason}` (handshakes whose place went
//! to a newcomer in a full pool: `own-source` when the newcomer's address held the most places,
//! `other-source` when another did), `miggate_tls_handshake_failures_total{reason}`
//! (`timeout` or `error`) and `miggate_accept_errors_total`.

use std::sync::atomic::AtomicU64;
use std::time::{Duration, SystemTime};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use miggate_store::cache_status::CacheStatus;
use miggate_store::file_store::Snapshot;
pub use miggate_store::kube_store::KindLabel;
use miggate_store::kube_store::WatchCounters;

use miggate_admission::decide::RefusedBy;
use miggate_admission::outcome::Outcome as Answer;

/// How one admission answer ended: the `outcome` label of
/// `miggate_admission_decisions_total`. What a handler answered is admission's
/// ([`Outcome::Answered`]: a verdict, a mutation's outcome, `bad-request`); what ends a
/// request before or past any answer is the server's own. docs/webhook.md lists each value
/// (a test holds it to [`Outcome::ALL`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// What a handler answered.
    Answered(Answer),
    /// The body did not arrive in time (408).
    BodyTimeout,
    /// The body budget was spent (503).
    Busy,
    /// The answer ran past the deadline.
    Deadline,
}

impl Outcome {
    /// A review that cannot be read, or a body too large (400/413).
    pub const BAD_REQUEST: Outcome = Outcome::Answered(Answer::BadRequest);

    /// Every outcome, in the order docs/webhook.md lists them.
    pub const ALL: [Outcome; 19] = {
        let a = Answer::ALL;
        [
            Outcome::Answered(a[0]),
            Outcome::Answered(a[1]),
            Outcome::Answered(a[2]),
            Outcome::Answered(a[3]),
            Outcome::Answered(a[4]),
            Outcome::BodyTimeout,
            Outcome::Busy,
            Outcome::Deadline,
            Outcome::Answered(a[5]),
            Outcome::Answered(a[6]),
            Outcome::Answered(a[7]),
            Outcome::Answered(a[8]),
            Outcome::Answered(a[9]),
            Outcome::Answered(a[10]),
            Outcome::Answered(a[11]),
            Outcome::Answered(a[12]),
            Outcome::Answered(a[13]),
            Outcome::Answered(a[14]),
            Outcome::Answered(a[15]),
        ]
    };

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Answered(answer) => answer.as_str(),
            Outcome::BodyTimeout => "body-timeout",
            Outcome::Busy => "busy",
            Outcome::Deadline => "deadline",
        }
    }
}

impl From<Answer> for Outcome {
    fn from(answer: Answer) -> Self {
        Outcome::Answered(answer)
    }
}

impl From<miggate_admission::decide::Verdict> for Outcome {
    fn from(verdict: miggate_admission::decide::Verdict) -> Self {
        Outcome::Answered(verdict.into())
    }
}

impl From<miggate_admission::steer::Outcome> for Outcome {
    fn from(outcome: miggate_admission::steer::Outcome) -> Self {
        Outcome::Answered(outcome.into())
    }
}

impl From<miggate_admission::device_map::Outcome> for Outcome {
    fn from(outcome: miggate_admission::device_map::Outcome) -> Self {
        Outcome::Answered(outcome.into())
    }
}

impl From<miggate_admission::summary::Outcome> for Outcome {
    fn from(outcome: miggate_admission::summary::Outcome) -> Self {
        Outcome::Answered(outcome.into())
    }
}

/// A label set of one string.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    /// How one answer ended: a verdict, a mutation's outcome, `bad-request` or `deadline`.
    pub outcome: &'static str,
}

/// A label set naming a check or a reason.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CheckLabel {
    /// The check or reason.
    pub check: &'static str,
}

/// A label set naming a reload result.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    /// `ok` or `error`.
    pub result: &'static str,
}

/// A label set naming why a connection ended before HTTP.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    /// For a failed handshake, `timeout` (none within `--handshake-timeout`) or `error`
    /// (refused by either side, or cut); for a dropped one, whose place it was (`own-source`,
    /// `other-source`).
    pub reason: &'static str,
}

/// Every metric the webhook exports, with the registry that encodes them.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Answers by outcome.
    pub decisions: Family<OutcomeLabel, Counter>,
    /// Refusals by check or reason.
    pub refusals: Family<CheckLabel, Counter>,
    /// Decision latency.
    pub duration: Histogram,
    /// Seconds since the store last changed.
    pub store_age: Gauge<f64, AtomicU64>,
    /// Checkpoints and nodes held.
    pub store_objects: Family<KindLabel, Gauge>,
    /// Store files that could not be used.
    pub store_problems: Gauge,
    /// Certificate reloads by result.
    pub tls_reloads: Family<ResultLabel, Counter>,
    /// What the watch caches count: re-lists, failures, lists read whole or streamed.
    pub watch: WatchCounters,
    /// Seconds since a cache's last event or list, per kind.
    pub cache_age: Family<KindLabel, Gauge<f64, AtomicU64>>,
    /// Whether a cache has completed its first list (1) or not (0), per kind.
    pub cache_synced: Family<KindLabel, Gauge>,
    /// Whether a cache has been behind longer than `--max-staleness` (1) or not (0), per kind.
    pub watch_failing: Family<KindLabel, Gauge>,
    /// Seconds a cache may have been missing changes, per kind.
    pub cache_stale: Family<KindLabel, Gauge<f64, AtomicU64>>,
    /// Whether the server serves a cached kind's API (1) or not (0), per kind.
    pub cache_served: Family<KindLabel, Gauge>,
    /// Nodes with GPUs (labels or capacity) that no inventory source describes.
    pub gpu_nodes_without_inventory: Gauge,
    /// Admission connections open now past their TLS handshake.
    pub connections_open: Gauge,
    /// Admission connections in their TLS handshake now.
    pub connections_handshaking: Gauge,
    /// The number of admission connections that may be in their TLS handshake at once.
    pub connections_handshaking_max: Gauge,
    /// TLS handshakes dropped to make room in the full handshake pool, by whose place it was.
    pub handshakes_dropped: Family<ReasonLabel, Counter>,
    /// The cap on admission connections.
    pub connections_max: Gauge,
    /// Admission connections closed because the cap was reached.
    pub connections_shed: Counter,
    /// The cap on admission connections from one source address.
    pub connections_per_source_max: Gauge,
    /// Admission connections closed because their source address was at its cap.
    pub connections_shed_per_source: Counter,
    /// Admission connections closed because they reached the maximum age.
    pub connections_retired: Counter,
    /// Admission connections closed to make room at the cap for an address holding fewer.
    pub connections_evicted: Counter,
    /// Admission connections whose TLS handshake failed, by reason.
    pub handshake_failures: Family<ReasonLabel, Counter>,
    /// Failed accepts on the admission port (the process out of file descriptors, ...).
    pub accept_errors: Counter,
    /// The webhook's own certificates (`--tls-secret`): not-after, rotations, injections.
    pub certificates: miggate_certs::CertMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Registers every metric, each named once, in the order the exposition lists them: the
    /// admission port's connections, the watch caches, the answers, the store, the webhook's
    /// own certificates.
    pub fn new() -> Self {
        let mut m = Metrics::unregistered();
        m.register_connections();
        m.register_caches();
        m.register_answers();
        m.register_store();
        m.certificates.register(&mut m.registry);
        // Exported at 0 from the start, so an alert's increase() counts the first failure.
        for result in ["ok", "error"] {
            drop(m.tls_reloads.get_or_create(&ResultLabel { result }));
        }
        m
    }

    /// Every metric at zero, none registered yet.
    fn unregistered() -> Self {
        // 25 µs .. ~0.8 s: decisions take microseconds; the tail shows a stalled body.
        let duration = Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
            0.000_025, 2.0, 16,
        ));
        Metrics {
            registry: Registry::with_prefix("miggate"),
            decisions: Family::default(),
            refusals: Family::default(),
            duration,
            store_age: Gauge::default(),
            store_objects: Family::default(),
            store_problems: Gauge::default(),
            tls_reloads: Family::default(),
            watch: WatchCounters::default(),
            cache_age: Family::default(),
            cache_synced: Family::default(),
            watch_failing: Family::default(),
            cache_stale: Family::default(),
            cache_served: Family::default(),
            gpu_nodes_without_inventory: Gauge::default(),
            connections_open: Gauge::default(),
            connections_handshaking: Gauge::default(),
            connections_handshaking_max: Gauge::default(),
            handshakes_dropped: Family::default(),
            connections_max: Gauge::default(),
            connections_shed: Counter::default(),
            connections_per_source_max: Gauge::default(),
            connections_shed_per_source: Counter::default(),
            connections_retired: Counter::default(),
            connections_evicted: Counter::default(),
            handshake_failures: Family::default(),
            accept_errors: Counter::default(),
            certificates: miggate_certs::CertMetrics::default(),
        }
    }

    /// The admission port's connections: caps, what was shed, retired or evicted, handshakes.
    fn register_connections(&mut self) {
        let r = &mut self.registry;
        register(
            r,
            "connections_per_source_max",
            "The cap on admission connections open at once from one source address",
            &self.connections_per_source_max,
        );
        register(
            r,
            "connections_shed_per_source",
            "Admission connections closed because their source address was at its cap",
            &self.connections_shed_per_source,
        );
        register(
            r,
            "connections_retired",
            "Admission connections closed at their next idle moment because they reached the maximum age",
            &self.connections_retired,
        );
        register(
            r,
            "connections_evicted",
            "Admission connections closed at their next idle moment to make room at the cap for a connection from an address holding fewer places",
            &self.connections_evicted,
        );
        register(
            r,
            "tls_handshake_failures",
            "Admission connections whose TLS handshake failed, by reason (timeout, error)",
            &self.handshake_failures,
        );
        register(
            r,
            "accept_errors",
            "Failed accepts on the admission port",
            &self.accept_errors,
        );
        register(
            r,
            "connections_open",
            "Admission connections open now past their TLS handshake",
            &self.connections_open,
        );
        self.register_handshakes();
        let r = &mut self.registry;
        register(
            r,
            "connections_max",
            "The cap on open admission connections",
            &self.connections_max,
        );
        register(
            r,
            "connections_shed",
            "Admission connections closed because the cap was reached",
            &self.connections_shed,
        );
    }

    /// The handshake pool: its occupancy, its size and the handshakes it dropped.
    fn register_handshakes(&mut self) {
        let r = &mut self.registry;
        register(
            r,
            "connections_handshaking",
            "Admission connections in their TLS handshake now",
            &self.connections_handshaking,
        );
        register(
            r,
            "connections_handshaking_max",
            "The number of admission connections that may be in their TLS handshake at once",
            &self.connections_handshaking_max,
        );
        register(
            r,
            "connections_handshakes_dropped",
            "Admission TLS handshakes dropped to make room for a newcomer in the full handshake pool, by whose place it was (own-source, other-source)",
            &self.handshakes_dropped,
        );
    }

    /// The watch caches, per kind: staleness, service, restarts, errors, lists, age, sync.
    fn register_caches(&mut self) {
        let r = &mut self.registry;
        register(
            r,
            "watch_failing",
            "Whether a watch cache has been behind the API server for longer than --max-staleness, by kind",
            &self.watch_failing,
        );
        register(
            r,
            "cache_stale_seconds",
            "Seconds a watch cache may have been missing changes (0 while its watch is open), by kind",
            &self.cache_stale,
        );
        register(
            r,
            "cache_served",
            "Whether the API server serves a watch cache's kind, by kind",
            &self.cache_served,
        );
        register(
            r,
            "gpu_nodes_without_inventory",
            "Nodes with GPUs (labels or capacity) that no inventory source describes (with --store kube)",
            &self.gpu_nodes_without_inventory,
        );
        register(
            r,
            "watch_restarts",
            "Watch cache re-lists after the first, by kind",
            &self.watch.restarts,
        );
        register(
            r,
            "watch_errors",
            "Failed lists and watches of the watch caches, by kind",
            &self.watch.errors,
        );
        self.register_cache_lists();
    }

    /// How the watch caches list: paged fallbacks, streamed lists, age and first sync.
    fn register_cache_lists(&mut self) {
        let r = &mut self.registry;
        register(
            r,
            "watch_list_fallbacks",
            "Watch cache lists read in pages because the API server refused to stream them, by kind",
            &self.watch.list_fallbacks,
        );
        register(
            r,
            "watch_list_streamed",
            "Whether a watch cache's last list was streamed (1) or read in pages (0), by kind",
            &self.watch.lists_streamed,
        );
        r.register_with_unit(
            "cache_age",
            "Time since a watch cache's last event or list, by kind",
            Unit::Seconds,
            self.cache_age.clone(),
        );
        register(
            r,
            "cache_synced",
            "Whether a watch cache has completed its first list, by kind",
            &self.cache_synced,
        );
    }

    /// The answers: by outcome, what refused, and how long each took.
    fn register_answers(&mut self) {
        let r = &mut self.registry;
        register(
            r,
            "admission_decisions",
            "Admission answers by outcome",
            &self.decisions,
        );
        register(
            r,
            "admission_refusals",
            "Admission refusals by refusing check or reason",
            &self.refusals,
        );
        r.register_with_unit(
            "admission_duration",
            "Time from a received review to its answer",
            Unit::Seconds,
            self.duration.clone(),
        );
    }

    /// The store: its age, what it holds and its problems; and the certificate reloads.
    fn register_store(&mut self) {
        let r = &mut self.registry;
        r.register_with_unit(
            "store_age",
            "Time since the store last changed",
            Unit::Seconds,
            self.store_age.clone(),
        );
        register(
            r,
            "store_objects",
            "Checkpoints and node inventories held, by kind",
            &self.store_objects,
        );
        register(
            r,
            "store_problems",
            "Store files that could not be used",
            &self.store_problems,
        );
        register(
            r,
            "tls_reloads",
            "Certificate reloads by result",
            &self.tls_reloads,
        );
    }

    /// Counts one answer.
    pub fn record(&self, outcome: impl Into<Outcome>, refused_by: &[RefusedBy], took: Duration) {
        let outcome = outcome.into().as_str();
        self.decisions.get_or_create(&OutcomeLabel { outcome }).inc();
        for by in refused_by {
            self.refusals
                .get_or_create(&CheckLabel { check: by.as_str() })
                .inc();
        }
        self.duration.observe(took.as_secs_f64());
    }

    /// The text exposition, with the watch-cache gauges read from `caches` now, and the GPU
    /// nodes no inventory source describes.
    pub fn encode_kube(&self, caches: &[CacheStatus], gpu_nodes_without_inventory: usize) -> String {
        self.gpu_nodes_without_inventory
            .set(i64::try_from(gpu_nodes_without_inventory).unwrap_or(i64::MAX));
        for c in caches {
            let kind = KindLabel { kind: c.kind.clone() };
            self.cache_age
                .get_or_create(&kind)
                .set(c.age_seconds.unwrap_or(0.0));
            self.cache_synced.get_or_create(&kind).set(i64::from(c.synced));
            self.watch_failing.get_or_create(&kind).set(i64::from(c.failing));
            self.cache_stale.get_or_create(&kind).set(c.stale_seconds);
            self.cache_served.get_or_create(&kind).set(i64::from(c.served));
            self.store_objects
                .get_or_create(&kind)
                .set(i64::try_from(c.objects).unwrap_or(i64::MAX));
        }
        let mut out = String::new();
        let _ = encode(&mut out, &self.registry);
        out
    }

    /// The text exposition, with the store gauges read from `snapshot` now.
    pub fn encode(&self, snapshot: &Snapshot) -> String {
        let age = snapshot
            .loaded_at
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .map_or(0.0, |d| d.as_secs_f64());
        self.store_age.set(age);
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.store_objects
            .get_or_create(&KindLabel {
                kind: "checkpoint".into(),
            })
            .set(count(snapshot.checkpoint_count()));
        self.store_objects
            .get_or_create(&KindLabel { kind: "node".into() })
            .set(count(snapshot.node_count()));
        self.store_problems.set(count(snapshot.problems.len()));
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

/// `metric`, registered under `name` with `help` (the registry's clone shares its value).
fn register<M>(registry: &mut Registry, name: &str, help: &str, metric: &M)
where
    M: prometheus_client::registry::Metric + Clone,
{
    registry.register(name, help, metric.clone());
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;

    /// Every outcome label is listed in docs/webhook.md's row of
    /// `miggate_admission_decisions_total`, and the row lists no other: an outcome added
    /// without its doc line, or a doc line without its outcome, fails here.
    #[test]
    fn the_docs_list_every_outcome() {
        let docs = include_str!("../../docs/webhook.md");
        let row = docs
            .lines()
            .find(|l| l.starts_with("| `miggate_admission_decisions_total{outcome}`"))
            .expect("docs/webhook.md has the decisions metric row");
        let answers = row.split(" | ").nth(1).expect("the row has a description");
        let documented: Vec<&str> = answers
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|t| t.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'))
            .collect();
        let labels: Vec<&str> = Outcome::ALL.iter().map(|o| o.as_str()).collect();
        assert_eq!(labels, documented);
    }
}
