//! Every metric the chart's monitoring reads (its alerts, `charts/miggate/templates/
//! prometheus-rule.yaml`, and its dashboard's panels, `charts/miggate/dashboards/miggate.json`)
//! is one the webhook's `/metrics` exports: a renamed or dropped metric fails here, naming it,
//! rather than leaving an alert that can never fire or a panel that stays empty.
//!
//! prometheus-client leaves out of the exposition a labelled family with no member yet (no
//! `# TYPE` line either), so the test gives each labelled family one member before it encodes
//! the registry the server encodes; a family it does not know of stays out, and a rule reading
//! it fails here until the test gives it one. `e2e/tests/50-monitoring.sh` checks the same
//! names on a live replica, with the rendered chart.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use miggate_store::cache_status::CacheStatus;
use miggate_webhook::metrics::{CheckLabel, KindLabel, Metrics, OutcomeLabel, ReasonLabel, ResultLabel};

/// Every `miggate_*` name in `text`.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("miggate_") {
        let preceded = rest[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        if !preceded {
            names.insert(tail[..end].to_string());
        }
        rest = &tail[end..];
    }
    names
}

/// The families of an exposition, by name: their type.
fn families(exposition: &str) -> BTreeMap<String, String> {
    exposition
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| {
            let (name, kind) = l.split_once(' ').unwrap();
            (name.to_string(), kind.to_string())
        })
        .collect()
}

/// Whether `name`, as a query writes it, is a series of one of `families`: a gauge (or any family
/// of one series name) itself, a counter's `_total`, or a histogram's `_bucket`, `_sum` or
/// `_count`.
fn exported(name: &str, families: &BTreeMap<String, String>) -> bool {
    let of = |suffix: &str, kind: &str| {
        name.strip_suffix(suffix)
            .is_some_and(|base| families.get(base).is_some_and(|k| k == kind))
    };
    families
        .get(name)
        .is_some_and(|k| k != "counter" && k != "histogram")
        || of("_total", "counter")
        || ["_bucket", "_sum", "_count"].iter().any(|s| of(s, "histogram"))
}

/// The exposition of the webhook's registry, with a member in each labelled family and the
/// watch caches' gauges of one cache.
fn exposition() -> String {
    let m = Metrics::new();
    m.decisions
        .get_or_create(&OutcomeLabel { outcome: "refused" })
        .inc();
    m.refusals
        .get_or_create(&CheckLabel {
            check: "memory-limit",
        })
        .inc();
    m.tls_reloads
        .get_or_create(&ResultLabel { result: "error" })
        .inc();
    m.handshakes_dropped
        .get_or_create(&ReasonLabel { reason: "own-source" })
        .inc();
    m.handshake_failures
        .get_or_create(&ReasonLabel { reason: "timeout" })
        .inc();
    let kind = KindLabel {
        kind: "GpuNode".into(),
    };
    m.watch.restarts.get_or_create(&kind).inc();
    m.watch.errors.get_or_create(&kind).inc();
    m.watch.list_fallbacks.get_or_create(&kind).inc();
    m.watch.lists_streamed.get_or_create(&kind).set(1);
    let cache = CacheStatus {
        kind: "GpuNode".into(),
        synced: true,
        served: true,
        failing: false,
        stale_seconds: 0.0,
        objects: 1,
        age_seconds: Some(1.0),
        lists: 1,
        list: None,
        errors: 1,
    };
    m.encode_kube(&[cache], 0)
}

#[test]
fn every_metric_the_chart_reads_is_exported() {
    let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("../charts/miggate");
    let read = |rel: &str| std::fs::read_to_string(chart.join(rel)).unwrap();
    let rules = metric_names(&read("templates/prometheus-rule.yaml"));
    let dashboard = metric_names(&read("dashboards/miggate.json"));
    assert!(
        rules.len() > 10 && dashboard.len() > 10,
        "{rules:?} {dashboard:?}"
    );
    let families = families(&exposition());
    let missing: Vec<String> = rules
        .iter()
        .map(|n| ("an alert", n))
        .chain(dashboard.iter().map(|n| ("a dashboard panel", n)))
        .filter(|(_, n)| !exported(n, &families))
        .map(|(what, n)| format!("{n} (read by {what})"))
        .collect();
    assert!(
        missing.is_empty(),
        "not in the webhook's /metrics: {missing:?}; it has {:?}",
        families.keys().collect::<Vec<_>>()
    );
}

/// The matching itself: a counter is read as `_total`, a histogram by its series, and nothing
/// else passes for a family.
#[test]
fn a_name_matches_only_its_own_family() {
    let families = families(
        "# TYPE miggate_shed counter\n# TYPE miggate_took_seconds histogram\n# TYPE miggate_open gauge\n",
    );
    for name in [
        "miggate_shed_total",
        "miggate_took_seconds_bucket",
        "miggate_took_seconds_count",
        "miggate_open",
    ] {
        assert!(exported(name, &families), "{name}");
    }
    for name in [
        "miggate_shed",
        "miggate_open_total",
        "miggate_open_bucket",
        "miggate_took",
    ] {
        assert!(!exported(name, &families), "{name}");
    }
    assert_eq!(
        metric_names("sum(rate(miggate_a_total[5m])) / xmiggate_b + miggate_c{x=\"miggate-d\"}"),
        ["miggate_a_total", "miggate_c"].map(String::from).into()
    );
}
