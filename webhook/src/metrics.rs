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
//! the kind's API: ResourceSlices before Kubernetes 1.34). On the admission port:
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
use prometheus_client::registry::Registry;

use crate::cache_status::CacheStatus;
use crate::store::Snapshot;

pub use crate::outcome::Outcome;

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

/// A label set naming a kind of stored object.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    /// `checkpoint` or `node` (file store), or a cached kind (`GpuNode`, `Pod`, ...).
    pub kind: std::borrow::Cow<'static, str>,
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
    /// Re-lists after the first, per cached kind.
    pub watch_restarts: Family<KindLabel, Counter>,
    /// Failed lists and watches, per cached kind.
    pub watch_errors: Family<KindLabel, Counter>,
    /// Lists read in pages because the server refused to stream them, per cached kind.
    pub watch_list_fallbacks: Family<KindLabel, Counter>,
    /// Whether a cache's last list was streamed (1) or paged (0), per kind.
    pub watch_lists_streamed: Family<KindLabel, Gauge>,
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
    /// Registers every metric, each named once: `registered` creates it, registers a
    /// handle under its name and help, and returns it.
    pub fn new() -> Self {
        use prometheus_client::registry::Unit;
        let mut r = Registry::with_prefix("miggate");
        // 25 µs .. ~0.8 s: decisions take microseconds; the tail shows a stalled body.
        let duration = Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
            0.000_025, 2.0, 16,
        ));
        Metrics {
            connections_per_source_max: registered(
                &mut r,
                "connections_per_source_max",
                "The cap on admission connections open at once from one source address",
            ),
            connections_shed_per_source: registered(
                &mut r,
                "connections_shed_per_source",
                "Admission connections closed because their source address was at its cap",
            ),
            connections_retired: registered(
                &mut r,
                "connections_retired",
                "Admission connections closed at their next idle moment because they reached the maximum age",
            ),
            connections_evicted: registered(
                &mut r,
                "connections_evicted",
                "Admission connections closed at their next idle moment to make room at the cap for a connection from an address holding fewer places",
            ),
            handshake_failures: registered(
                &mut r,
                "tls_handshake_failures",
                "Admission connections whose TLS handshake failed, by reason (timeout, error)",
            ),
            accept_errors: registered(&mut r, "accept_errors", "Failed accepts on the admission port"),
            connections_open: registered(
                &mut r,
                "connections_open",
                "Admission connections open now past their TLS handshake",
            ),
            connections_handshaking: registered(
                &mut r,
                "connections_handshaking",
                "Admission connections in their TLS handshake now",
            ),
            connections_handshaking_max: registered(
                &mut r,
                "connections_handshaking_max",
                "The number of admission connections that may be in their TLS handshake at once",
            ),
            handshakes_dropped: registered(
                &mut r,
                "connections_handshakes_dropped",
                "Admission TLS handshakes dropped to make room for a newcomer in the full handshake pool, by whose place it was (own-source, other-source)",
            ),
            connections_max: registered(&mut r, "connections_max", "The cap on open admission connections"),
            connections_shed: registered(
                &mut r,
                "connections_shed",
                "Admission connections closed because the cap was reached",
            ),
            watch_failing: registered(
                &mut r,
                "watch_failing",
                "Whether a watch cache has been behind the API server for longer than --max-staleness, by kind",
            ),
            cache_stale: registered(
                &mut r,
                "cache_stale_seconds",
                "Seconds a watch cache may have been missing changes (0 while its watch is open), by kind",
            ),
            cache_served: registered(
                &mut r,
                "cache_served",
                "Whether the API server serves a watch cache's kind, by kind",
            ),
            watch_restarts: registered(
                &mut r,
                "watch_restarts",
                "Watch cache re-lists after the first, by kind",
            ),
            watch_errors: registered(
                &mut r,
                "watch_errors",
                "Failed lists and watches of the watch caches, by kind",
            ),
            watch_list_fallbacks: registered(
                &mut r,
                "watch_list_fallbacks",
                "Watch cache lists read in pages because the API server refused to stream them, by kind",
            ),
            watch_lists_streamed: registered(
                &mut r,
                "watch_list_streamed",
                "Whether a watch cache's last list was streamed (1) or read in pages (0), by kind",
            ),
            cache_age: registered_in(
                &mut r,
                "cache_age",
                "Time since a watch cache's last event or list, by kind",
                Unit::Seconds,
                Family::default(),
            ),
            cache_synced: registered(
                &mut r,
                "cache_synced",
                "Whether a watch cache has completed its first list, by kind",
            ),
            decisions: registered(&mut r, "admission_decisions", "Admission answers by outcome"),
            refusals: registered(
                &mut r,
                "admission_refusals",
                "Admission refusals by refusing check or reason",
            ),
            duration: registered_in(
                &mut r,
                "admission_duration",
                "Time from a received review to its answer",
                Unit::Seconds,
                duration,
            ),
            store_age: registered_in(
                &mut r,
                "store_age",
                "Time since the store last changed",
                Unit::Seconds,
                Gauge::default(),
            ),
            store_objects: registered(
                &mut r,
                "store_objects",
                "Checkpoints and node inventories held, by kind",
            ),
            store_problems: registered(&mut r, "store_problems", "Store files that could not be used"),
            tls_reloads: registered(&mut r, "tls_reloads", "Certificate reloads by result"),
            certificates: {
                let certificates = miggate_certs::CertMetrics::default();
                certificates.register(&mut r);
                certificates
            },
            registry: r,
        }
    }

    /// Counts one answer.
    pub fn record(&self, outcome: impl Into<Outcome>, refused_by: &[&'static str], took: Duration) {
        let outcome = outcome.into().as_str();
        self.decisions.get_or_create(&OutcomeLabel { outcome }).inc();
        for check in refused_by {
            self.refusals.get_or_create(&CheckLabel { check }).inc();
        }
        self.duration.observe(took.as_secs_f64());
    }

    /// The text exposition, with the watch-cache gauges read from `caches` now.
    pub fn encode_kube(&self, caches: &[CacheStatus]) -> String {
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

/// A new metric, registered under `name` with `help` (a clone shares its value).
fn registered<M>(registry: &mut Registry, name: &str, help: &str) -> M
where
    M: prometheus_client::registry::Metric + Clone + Default,
{
    let metric = M::default();
    registry.register(name, help, metric.clone());
    metric
}

/// `metric`, registered under `name` with `help` and a unit.
fn registered_in<M>(
    registry: &mut Registry,
    name: &str,
    help: &str,
    unit: prometheus_client::registry::Unit,
    metric: M,
) -> M
where
    M: prometheus_client::registry::Metric + Clone,
{
    registry.register_with_unit(name, help, unit, metric.clone());
    metric
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
