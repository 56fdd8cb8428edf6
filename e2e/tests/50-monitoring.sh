# shellcheck shell=bash
# The chart's monitoring against the live webhook: every metric its alerts and its dashboard
# read is on the replicas' /metrics, and its ServiceMonitor's endpoint serves it. The cluster
# has no Prometheus Operator, so nothing is scraped for real; promtool's unit tests of the
# alerts are crds/tests/monitoring.rs.

# A labelled family has no line at all on /metrics until it has a member (prometheus-client
# leaves a family without members out, `# TYPE` included): the webhook makes the members of its
# failure counters at 0 when it starts, and the answers' families get theirs from the refused
# restore below.

# monitoring_render TEMPLATE...: the chart's TEMPLATEs rendered with every monitoring value on.
monitoring_render() {
    local args=() t
    for t in "$@"; do args+=(--show-only "templates/$t"); done
    helm template "$RELEASE" charts/miggate -n "$RELEASE_NS" \
        --set monitoring.serviceMonitor.enabled=true --set monitoring.prometheusRule.enabled=true \
        --set monitoring.dashboards.enabled=true "${args[@]}"
}

# webhook_families: `NAME TYPE` of every family on any webhook replica's /metrics, read
# through the API server's pod proxy.
webhook_families() {
    local pod
    for pod in $(kubectl -n "$RELEASE_NS" get pods -l app.kubernetes.io/name=miggate-webhook \
        --field-selector=status.phase=Running -o jsonpath='{.items[*].metadata.name}'); do
        kubectl get --raw "/api/v1/namespaces/$RELEASE_NS/pods/$pod:8080/proxy/metrics" |
            awk '$1 == "#" && $2 == "TYPE" {print $3, $4}'
    done | sort -u
}

# A refused restore (a server-side dry run naming a checkpoint that does not exist), so the
# answers' and refusals' families have a member on the replica that answered it.
test_a_refused_restore_is_counted() {
    tenant_namespace
    local out
    out=$(fixture restore-pod.yaml NAME=monitoring-probe CHECKPOINT=no-such-checkpoint MEMORY=64Mi |
        kubectl create --dry-run=server -f - 2>&1) && fail "admitted: $out"
    expect_contains "$out" "denied the request: miggate:" "does not exist"
}

test_every_metric_the_alerts_and_the_dashboard_read_is_exported() {
    local rendered names families name base missing=()
    rendered=$(monitoring_render prometheus-rule.yaml dashboards.yaml)
    names=$(grep -o 'miggate_[a-z0-9_]*' <<< "$rendered" | sort -u)
    [ "$(wc -l <<< "$names")" -gt 10 ] || fail "too few metric names in the rendered rules and dashboard: $names"
    families=$(webhook_families)
    [ -n "$families" ] || fail "no family on the replicas' /metrics"
    for name in $names; do
        # A gauge by its name, a counter by its _total, a histogram by its series.
        grep -qxE "$name (gauge|unknown|info|stateset)" <<< "$families" && continue
        base=${name%_total}
        [ "$base" != "$name" ] && grep -qx "$base counter" <<< "$families" && continue
        base=$(sed -E 's/_(bucket|sum|count)$//' <<< "$name")
        [ "$base" != "$name" ] && grep -qx "$base histogram" <<< "$families" && continue
        missing+=("$name")
    done
    ((${#missing[@]} == 0)) || fail "read by the chart's alerts or dashboard, not on the webhook's /metrics: ${missing[*]}"
}

# The ServiceMonitor's endpoint (the Service's port, its path and scheme), asked through the
# API server's service proxy, is the webhook's /metrics.
test_the_service_monitor_endpoint_serves_the_metrics() {
    local monitor port path scheme out
    monitor=$(monitoring_render service-monitor.yaml)
    port=$(awk '$1 == "port:" {print $2}' <<< "$monitor")
    path=$(awk '$1 == "path:" {print $2}' <<< "$monitor")
    scheme=$(awk '$1 == "scheme:" {print $2}' <<< "$monitor")
    if [ -z "$port" ] || [ -z "$path" ] || [ -z "$scheme" ]; then
        fail "no endpoint in: $monitor"
    fi
    out=$(kubectl get --raw "/api/v1/namespaces/$RELEASE_NS/services/$scheme:miggate-webhook:$port/proxy$path") ||
        fail "GET $scheme://miggate-webhook:$port$path: $out"
    expect_contains "$out" "# TYPE miggate_connections_open gauge" "# EOF"
}
