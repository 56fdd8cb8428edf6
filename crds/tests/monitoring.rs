//! The chart's monitoring (`monitoring.serviceMonitor`, `monitoring.prometheusRule`,
//! `monitoring.dashboards`), off by default, rendered by the real `helm`: the rules pass
//! `promtool check rules`, each alert fires from a recorded series and stays silent on a healthy
//! one (`promtool test rules` on `charts/miggate/tests/alerts.test.yaml`), each carries a
//! summary, a description and a runbook section of docs/webhook.md; the ServiceMonitor scrapes
//! the port that serves `/metrics`; the dashboard's ConfigMap carries the sidecar's label and
//! the dashboard, whose queries parse; and the schema refuses a misspelt value.
//!
//! helm and promtool are `MIGGATE_HELM` and `MIGGATE_PROMTOOL`, else those `e2e/cluster.sh
//! tools` links under `target/e2e/bin`. Without them these tests say so and pass, except under
//! CI, where `.ci/run` builds them first and a missing one fails. That every metric named here
//! is one the webhook exports is `webhook/tests/monitoring_metrics.rs` and, on a live replica,
//! `e2e/tests/50-monitoring.sh`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod support;

use std::collections::BTreeSet;
use std::path::PathBuf;

use rstest::rstest;
use serde_json::{Value, json};
use support::chart::{object, promtool, root, template};

const RULES_ON: &str = "monitoring.prometheusRule.enabled=true";
const MONITOR_ON: &str = "monitoring.serviceMonitor.enabled=true";
const DASHBOARDS_ON: &str = "monitoring.dashboards.enabled=true";

/// A fresh directory of this test binary's scratch space.
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("monitoring-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The chart rendered with `sets`; `None` without helm outside CI.
fn chart(sets: &[&str]) -> Option<Vec<Value>> {
    Some(template(sets)?.unwrap())
}

/// The PrometheusRule's spec, rendered with `sets` besides the rules on.
fn rules(sets: &[&str]) -> Option<Value> {
    let mut all = vec![RULES_ON];
    all.extend(sets);
    let chart = chart(&all)?;
    Some(object(&chart, "PrometheusRule", "miggate").unwrap()["spec"].clone())
}

/// Every alerting rule of a PrometheusRule's spec.
fn alerts(spec: &Value) -> Vec<&Value> {
    spec["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .filter(|r| r.get("alert").is_some())
        .collect()
}

fn alert_names(spec: &Value) -> BTreeSet<String> {
    alerts(spec)
        .iter()
        .map(|a| a["alert"].as_str().unwrap().to_string())
        .collect()
}

/// `spec` written where promtool reads it (JSON is YAML).
fn write_rules(dir: &std::path::Path, spec: &Value) {
    std::fs::write(
        dir.join("rules.yaml"),
        serde_json::to_string_pretty(spec).unwrap(),
    )
    .unwrap();
}

/// The alerts rendered only with certificates.mode self, which are the ones read from
/// `--tls-secret`'s metrics.
const SELF_ONLY: [&str; 3] = [
    "MiggateCertificateUnverified",
    "MiggateCertificateRenewalOverdue",
    "MiggateCertificateExpiring",
];

#[rstest]
#[case::self_managed(&[], 12)]
#[case::cert_manager(&["certificates.mode=cert-manager"], 9)]
#[case::brought_secret(&["certificates.mode=secret", "certificates.secretName=my-tls"], 9)]
fn the_rendered_rules_pass_promtool_check(#[case] sets: &[&str], #[case] count: usize) {
    let Some(spec) = rules(sets) else { return };
    let names = alert_names(&spec);
    assert_eq!(names.len(), count, "{names:?}");
    for name in SELF_ONLY {
        assert_eq!(names.contains(name), sets.is_empty(), "{name}");
    }
    let dir = scratch(&format!("check-{count}-{}", sets.len()));
    write_rules(&dir, &spec);
    let Some(checked) = promtool(&["check", "rules", "rules.yaml"], &dir) else {
        return;
    };
    let out = checked.unwrap();
    assert!(out.contains(&format!("SUCCESS: {count} rules found")), "{out}");
}

/// promtool's unit tests, run on the rules as rendered with the defaults; and every alert has
/// a test that fires it and one that finds it silent, while no test names an alert the rules do
/// not have (its `exp_alerts: []` would pass whatever the rules say).
#[test]
fn each_alert_fires_and_stays_silent_as_its_unit_tests_say() {
    let Some(spec) = rules(&[]) else { return };
    let tests_file = root().join("charts/miggate/tests/alerts.test.yaml");
    let text = std::fs::read_to_string(&tests_file).unwrap();
    let tests: Value = serde_saphyr::from_str(&text).unwrap();
    let mut fired = BTreeSet::new();
    let mut silent = BTreeSet::new();
    for test in tests["tests"].as_array().unwrap() {
        for case in test["alert_rule_test"].as_array().unwrap() {
            let name = case["alertname"].as_str().unwrap().to_string();
            let expected = case["exp_alerts"].as_array().map_or(0, Vec::len);
            (if expected > 0 { &mut fired } else { &mut silent }).insert(name);
        }
    }
    let names = alert_names(&spec);
    assert_eq!(fired, names, "alerts fired by a test");
    assert_eq!(silent, names, "alerts found silent by a test");

    let dir = scratch("unit");
    write_rules(&dir, &spec);
    std::fs::write(dir.join("alerts.test.yaml"), text).unwrap();
    let Some(tested) = promtool(&["test", "rules", "alerts.test.yaml"], &dir) else {
        return;
    };
    let out = tested.unwrap_or_else(|e| panic!("{e}"));
    assert!(out.contains("SUCCESS"), "{out}");
}

/// The anchor GitHub gives a Markdown heading.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of the `###` headings in docs/webhook.md's `## Runbook` section.
fn runbook_anchors() -> BTreeSet<String> {
    let docs = std::fs::read_to_string(root().join("docs/webhook.md")).unwrap();
    let mut inside = false;
    let mut anchors = BTreeSet::new();
    for line in docs.lines() {
        if let Some(h2) = line.strip_prefix("## ") {
            inside = h2.trim() == "Runbook";
        } else if inside && let Some(h3) = line.strip_prefix("### ") {
            anchors.insert(anchor(h3));
        }
    }
    assert!(
        !anchors.is_empty(),
        "docs/webhook.md has a Runbook section with ### headings"
    );
    anchors
}

#[test]
fn each_alert_carries_a_summary_a_description_and_its_runbook_section() {
    let Some(spec) = rules(&[]) else { return };
    let chart_yaml = std::fs::read_to_string(root().join("charts/miggate/Chart.yaml")).unwrap();
    let home = chart_yaml
        .lines()
        .find_map(|l| l.strip_prefix("home: "))
        .unwrap()
        .trim();
    let base = format!("{home}/blob/main/docs/webhook.md#");
    let sections = runbook_anchors();
    let mut used = BTreeSet::new();
    for alert in alerts(&spec) {
        let name = alert["alert"].as_str().unwrap();
        assert!(name.starts_with("Miggate"), "{name}");
        let severity = alert["labels"]["severity"].as_str();
        assert!(
            matches!(severity, Some("critical" | "warning")),
            "{name}: {severity:?}"
        );
        let annotations = &alert["annotations"];
        for key in ["summary", "description"] {
            let text = annotations[key].as_str().unwrap_or_default();
            assert!(text.len() > 20, "{name}: {key} {text:?}");
        }
        let url = annotations["runbook_url"].as_str().unwrap();
        let section = url
            .strip_prefix(&base)
            .unwrap_or_else(|| panic!("{name}: {url} is not under {base}"));
        assert_eq!(section, anchor(name), "{name}: its own section");
        assert!(
            sections.contains(section),
            "{name}: no ### {name} under ## Runbook in docs/webhook.md"
        );
        used.insert(section.to_string());
    }
    // Self-managed certificates render every alert: each section is one's.
    assert_eq!(used, sections, "every runbook section has its alert");
}

/// Where the thresholds are values, they land in the expressions and the descriptions.
#[test]
fn the_rule_thresholds_are_the_values() {
    let Some(spec) = rules(&[
        "monitoring.prometheusRule.refusalPercent=20",
        "monitoring.prometheusRule.refusalMinVerdicts=50",
        "monitoring.prometheusRule.certificateExpiryDays=14",
        "monitoring.prometheusRule.labels.release=kube-prometheus-stack",
    ]) else {
        return;
    };
    let find = |name: &str| {
        alerts(&spec)
            .into_iter()
            .find(|a| a["alert"] == name)
            .unwrap()
            .clone()
    };
    let refusals = find("MiggateRefusalRateHigh");
    let expr = refusals["expr"].as_str().unwrap();
    assert!(
        expr.contains(">= 50)") && expr.trim_end().ends_with("> 20 / 100"),
        "{expr}"
    );
    let expiring = find("MiggateCertificateExpiring");
    let expr = expiring["expr"].as_str().unwrap();
    assert!(expr.contains("< 14 * 86400"), "{expr}");
    assert!(
        expiring["annotations"]["description"]
            .as_str()
            .unwrap()
            .contains("within 14 days")
    );
    let Some(chart) = chart(&[RULES_ON, "monitoring.prometheusRule.labels.release=kps"]) else {
        return;
    };
    let rule = object(&chart, "PrometheusRule", "miggate").unwrap();
    assert_eq!(rule["metadata"]["labels"]["release"], "kps");
    assert_eq!(rule["metadata"]["namespace"], "miggate-system");
}

#[test]
fn strict_lint_is_clean_with_monitoring_on() {
    let Some(lint) = support::chart::helm(&[
        "lint",
        "charts/miggate",
        "--strict",
        "--set",
        &[MONITOR_ON, RULES_ON, DASHBOARDS_ON].join(","),
    ]) else {
        return;
    };
    let out = lint.unwrap();
    assert!(!out.contains("[WARNING]") && !out.contains("[ERROR]"), "{out}");
}

/// Off by default, and each value turns on its own object only.
#[rstest]
#[case::none(&[], [false, false, false])]
#[case::service_monitor(&[MONITOR_ON], [true, false, false])]
#[case::rules(&[RULES_ON], [false, true, false])]
#[case::dashboards(&[DASHBOARDS_ON], [false, false, true])]
#[case::all(&[MONITOR_ON, RULES_ON, DASHBOARDS_ON], [true, true, true])]
fn monitoring_is_off_by_default(#[case] sets: &[&str], #[case] want: [bool; 3]) {
    let Some(chart) = chart(sets) else { return };
    let found = [
        object(&chart, "ServiceMonitor", "miggate-webhook").is_some(),
        object(&chart, "PrometheusRule", "miggate").is_some(),
        object(&chart, "ConfigMap", "miggate-dashboard").is_some(),
    ];
    assert_eq!(found, want);
    let kinds: BTreeSet<&str> = chart.iter().filter_map(|o| o["kind"].as_str()).collect();
    assert_eq!(kinds.contains("ServiceMonitor"), want[0]);
    assert_eq!(kinds.contains("PrometheusRule"), want[1]);
}

/// The ServiceMonitor scrapes the Service's port `metrics`, which reaches the container port
/// that serves `/metrics` (the plain-HTTP health port), in the release namespace.
#[test]
fn the_service_monitor_scrapes_the_port_that_serves_metrics() {
    let Some(rendered) = chart(&[
        MONITOR_ON,
        "monitoring.serviceMonitor.labels.release=kps",
        "monitoring.serviceMonitor.interval=15s",
        "monitoring.serviceMonitor.scrapeTimeout=5s",
    ]) else {
        return;
    };
    let monitor = object(&rendered, "ServiceMonitor", "miggate-webhook").unwrap();
    assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(monitor["metadata"]["namespace"], "miggate-system");
    assert_eq!(monitor["metadata"]["labels"]["release"], "kps");
    assert_eq!(
        monitor["spec"]["endpoints"],
        json!([{"interval": "15s", "path": "/metrics", "port": "metrics", "scheme": "http", "scrapeTimeout": "5s"}])
    );
    assert_eq!(
        monitor["spec"]["namespaceSelector"],
        json!({"matchNames": ["miggate-system"]})
    );
    let service = object(&rendered, "Service", "miggate-webhook").unwrap();
    for (k, v) in monitor["spec"]["selector"]["matchLabels"].as_object().unwrap() {
        assert_eq!(&service["metadata"]["labels"][k], v, "the Service carries {k}");
    }
    let port = service["spec"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "metrics")
        .unwrap();
    let container = &object(&rendered, "Deployment", "miggate-webhook").unwrap()["spec"]["template"]["spec"]
        ["containers"][0];
    let target = container["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == port["targetPort"])
        .unwrap();
    assert!(
        container["args"].as_array().unwrap().contains(&json!(format!(
            "--health-listen=0.0.0.0:{}",
            target["containerPort"]
        ))),
        "{container}"
    );
    // The defaults: every 30 s, with 10 s to answer.
    let Some(defaults) = chart(&[MONITOR_ON]) else {
        return;
    };
    let endpoint = &object(&defaults, "ServiceMonitor", "miggate-webhook").unwrap()["spec"]["endpoints"][0];
    assert_eq!(
        (&endpoint["interval"], &endpoint["scrapeTimeout"]),
        (&json!("30s"), &json!("10s"))
    );
}

/// The NetworkPolicy admits to the health and metrics port whom `networkPolicy.metricsFrom`
/// names (the namespace `monitoring` by default), and no one but the kubelet when it names no
/// one: never a rule without `from`, which would admit every source.
#[rstest]
#[case::default(&[], Some(json!([{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}])))]
#[case::prometheus_elsewhere(
    &["networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=observability",
      "networkPolicy.metricsFrom[0].podSelector.matchLabels.app\\.kubernetes\\.io/name=prometheus"],
    Some(json!([{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "observability"}},
                 "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}])))]
#[case::no_one(&["networkPolicy.metricsFrom=null"], None)]
fn the_metrics_port_admits_whom_metrics_from_names(#[case] sets: &[&str], #[case] want: Option<Value>) {
    let Some(chart) = chart(sets) else { return };
    let policy = object(&chart, "NetworkPolicy", "miggate-webhook").unwrap();
    let rules = policy["spec"]["ingress"].as_array().unwrap();
    let health: Vec<&Value> = rules
        .iter()
        .filter(|r| {
            r["ports"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["port"] == "health")
        })
        .collect();
    match want {
        Some(from) => {
            assert_eq!(health.len(), 1, "{rules:?}");
            assert_eq!(health[0]["from"], from);
        }
        None => assert!(health.is_empty(), "{rules:?}"),
    }
}

fn dashboard_file() -> Value {
    let text = std::fs::read_to_string(root().join("charts/miggate/dashboards/miggate.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The ConfigMap holds the dashboard as the file has it, under the sidecar's label, in the
/// release namespace or the one named.
#[rstest]
#[case::defaults(&[], ("grafana_dashboard", "1"), "miggate-system", None)]
#[case::named(
    &["monitoring.dashboards.label=grafana.io/dashboard", "monitoring.dashboards.labelValue=gpu",
      "monitoring.dashboards.namespace=grafana", "monitoring.dashboards.annotations.grafana_folder=GPU"],
    ("grafana.io/dashboard", "gpu"), "grafana", Some("GPU"))]
fn the_dashboard_config_map_carries_the_sidecar_label(
    #[case] sets: &[&str],
    #[case] label: (&str, &str),
    #[case] namespace: &str,
    #[case] folder: Option<&str>,
) {
    let mut all = vec![DASHBOARDS_ON];
    all.extend(sets);
    let Some(chart) = chart(&all) else { return };
    let map = object(&chart, "ConfigMap", "miggate-dashboard").unwrap();
    assert_eq!(map["metadata"]["labels"][label.0], label.1);
    assert_eq!(map["metadata"]["namespace"], namespace);
    assert_eq!(map["metadata"]["annotations"]["grafana_folder"].as_str(), folder);
    let data = map["data"].as_object().unwrap();
    assert_eq!(data.keys().collect::<Vec<_>>(), ["miggate.json"]);
    let held: Value = serde_json::from_str(data["miggate.json"].as_str().unwrap()).unwrap();
    assert_eq!(held, dashboard_file());
}

/// The panels the issue asks for, each reading what it says, from the chosen data source.
#[test]
fn the_dashboard_has_its_panels() {
    let dashboard = dashboard_file();
    assert_eq!(dashboard["uid"], "miggate");
    let variables = dashboard["templating"]["list"].as_array().unwrap();
    assert!(
        variables
            .iter()
            .any(|v| v["name"] == "datasource" && v["type"] == "datasource" && v["query"] == "prometheus")
    );
    let panels = dashboard["panels"].as_array().unwrap();
    let ids: BTreeSet<i64> = panels.iter().map(|p| p["id"].as_i64().unwrap()).collect();
    assert_eq!(ids.len(), panels.len(), "panel ids are unique");
    let exprs = |title: &str| -> String {
        let panel = panels
            .iter()
            .find(|p| p["title"] == title)
            .unwrap_or_else(|| panic!("no panel {title}"));
        assert!(
            panel["description"].as_str().unwrap().len() > 20,
            "{title} says what it shows"
        );
        panel["targets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                assert_eq!(t["datasource"]["uid"], "${datasource}", "{title}");
                t["expr"].as_str().unwrap().to_string()
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let has = |title: &str, needles: &[&str]| {
        let text = exprs(title);
        for n in needles {
            assert!(text.contains(n), "{title}: {n} in {text}");
        }
    };
    has(
        "Decisions by outcome",
        &["sum by (outcome)", "miggate_admission_decisions_total"],
    );
    has(
        "Refusals by check",
        &["sum by (check)", "miggate_admission_refusals_total"],
    );
    has(
        "Decision time",
        &[
            "histogram_quantile(0.5,",
            "histogram_quantile(0.99,",
            "miggate_admission_duration_seconds_bucket",
        ],
    );
    has("Cache age", &["miggate_cache_age_seconds"]);
    has(
        "Certificate days left",
        &["miggate_certificate_not_after_seconds", "/ 86400"],
    );
    has(
        "Connections shed",
        &[
            "miggate_connections_shed_total",
            "miggate_connections_shed_per_source_total",
        ],
    );
}

/// Every panel's query parses as PromQL: promtool checks them as recording rules, with
/// Grafana's `$__rate_interval` as a plain window.
#[test]
fn the_dashboard_queries_parse() {
    let dashboard = dashboard_file();
    let mut rules = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap().replace("$__rate_interval", "5m");
            assert!(!expr.contains('$'), "a variable promtool cannot read: {expr}");
            let record = format!(
                "dashboard:panel_{}_{}",
                panel["id"],
                target["refId"].as_str().unwrap()
            );
            rules.push(json!({"record": record, "expr": expr}));
        }
    }
    let count = rules.len();
    let dir = scratch("dashboard");
    write_rules(&dir, &json!({"groups": [{"name": "dashboard", "rules": rules}]}));
    let Some(checked) = promtool(&["check", "rules", "rules.yaml"], &dir) else {
        return;
    };
    let out = checked.unwrap_or_else(|e| panic!("{e}"));
    assert!(out.contains(&format!("SUCCESS: {count} rules found")), "{out}");
}

#[rstest]
#[case::misspelt_switch(
    "monitoring.serviceMonitor.enabeld=true",
    "additional properties 'enabeld' not allowed"
)]
#[case::misspelt_group(
    "monitoring.dashbords.enabled=true",
    "additional properties 'dashbords' not allowed"
)]
#[case::misspelt_threshold(
    "monitoring.prometheusRule.refusalRate=0.2",
    "additional properties 'refusalRate' not allowed"
)]
#[case::a_share_never_exceeded(
    "monitoring.prometheusRule.refusalPercent=100",
    "/monitoring/prometheusRule/refusalPercent"
)]
#[case::no_verdicts(
    "monitoring.prometheusRule.refusalMinVerdicts=0",
    "/monitoring/prometheusRule/refusalMinVerdicts"
)]
#[case::an_interval_in_words(
    "monitoring.serviceMonitor.interval=30 seconds",
    "/monitoring/serviceMonitor/interval"
)]
#[case::a_namespace_with_capitals(
    "monitoring.dashboards.namespace=Grafana",
    "/monitoring/dashboards/namespace"
)]
#[case::a_label_value_with_a_space(
    "monitoring.dashboards.labelValue=a b",
    "/monitoring/dashboards/labelValue"
)]
#[case::a_peer_of_another_kind(
    "networkPolicy.metricsFrom[0].serviceSelector.app=prometheus",
    "additional properties 'serviceSelector' not allowed"
)]
fn a_wrong_monitoring_value_is_refused_naming_it(#[case] set: &str, #[case] names: &str) {
    let Some(rendered) = template(&[set]) else { return };
    let e = rendered.unwrap_err();
    assert!(e.contains(names), "{e}");
}
