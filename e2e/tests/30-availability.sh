# shellcheck shell=bash
# The gate stays answering (failure policy Fail) through what happens to its pods in a cluster's
# life, each under four concurrent streams of restore-pod creations: no call may fail.

# The webhook's pods not being deleted.
webhook_pods() {
    kubectl -n "$RELEASE_NS" get pods -l app.kubernetes.io/name=miggate-webhook \
        -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.deletionTimestamp}{"\n"}{end}' |
        awk 'NF == 1 {print $1}'
}

# settled: both replicas Ready and nothing else left of the webhook's pods.
settled() {
    webhook_pods_ready 2 &&
        [ "$(kubectl -n "$RELEASE_NS" get pods -l app.kubernetes.io/name=miggate-webhook -o name | wc -l)" -eq 2 ]
}

test_a_rollout_restart_fails_no_call() {
    streams_start
    sleep 3
    kubectl -n "$RELEASE_NS" rollout restart deployment/miggate-webhook >/dev/null
    kubectl -n "$RELEASE_NS" rollout status deployment/miggate-webhook --timeout=180s >/dev/null ||
        { streams_stop; fail "the rollout did not finish"; }
    until_ok 60 "the old replicas gone" settled
    sleep 3
    streams_stop
}

test_a_helm_upgrade_that_changes_the_pod_template_fails_no_call() {
    local before after
    before=$(kubectl -n "$RELEASE_NS" get deployment miggate-webhook -o jsonpath='{.metadata.generation}')
    streams_start
    sleep 3
    helm upgrade "$RELEASE" charts/miggate -n "$RELEASE_NS" --reuse-values --set webhook.logFormat=text \
        --wait --timeout 5m >/dev/null || { streams_stop; fail "helm upgrade failed"; }
    until_ok 60 "the old replicas gone" settled
    sleep 3
    streams_stop
    after=$(kubectl -n "$RELEASE_NS" get deployment miggate-webhook -o jsonpath='{.metadata.generation}')
    ((after > before)) || fail "the upgrade did not change the Deployment (generation $before)"
}

test_a_webhook_pod_deleted_fails_no_call() {
    local victim
    victim=$(webhook_pods | head -n 1)
    [ -n "$victim" ] || fail "no webhook pod to delete"
    streams_start
    sleep 3
    kubectl -n "$RELEASE_NS" delete pod "$victim" --wait=true >/dev/null
    until_ok 120 "a replacement Ready" settled
    sleep 3
    streams_stop
}

# SIGKILL, as the OOM killer or a crash would: no preStop, no drain. The API server does not
# retry an admission call whose connection is refused, so with failure policy Fail a call that
# opens a new connection to the dead replica, before the kubelet restarts it or its endpoint is
# withdrawn, fails. Only such calls may fail, only in the seconds after the kill, and none once
# it is back.
test_a_webhook_container_killed_fails_calls_only_until_it_is_back() {
    local pid killed_at
    streams_start
    sleep 3
    pid=$(pgrep -f '^/usr/bin/miggate webhook' | head -n 1)
    [ -n "$pid" ] || { streams_stop; fail "no webhook process on the node"; }
    killed_at=$(date +%s.%N)
    kill -KILL "$pid"
    until_ok 120 "the killed container restarted" bash -c "kubectl -n $RELEASE_NS get pods -l app.kubernetes.io/name=miggate-webhook -o jsonpath='{.items[*].status.containerStatuses[0].restartCount}' | grep -q '[1-9]'"
    until_ok 120 "both replicas Ready" settled
    sleep 3
    streams_stop "$killed_at" 10
}

# What `kubectl drain` does to the webhook: every replica evicted at once. The
# PodDisruptionBudget lets one go and holds the rest until a replacement is Ready.
test_evicting_every_replica_at_once_keeps_one_serving() {
    local pods pod refused=0
    pods=$(webhook_pods)
    [ "$(echo "$pods" | wc -w)" -ge 2 ] || fail "fewer than two replicas to evict: $pods"
    streams_start
    sleep 3
    local evictions=()
    for pod in $pods; do
        evict "$pod" > "$E2E_WORK/evict-$pod" 2>&1 &
        evictions+=($!)
    done
    wait "${evictions[@]}" || true
    for pod in $pods; do
        grep -q 'disruption budget' "$E2E_WORK/evict-$pod" && refused=$((refused + 1))
    done
    # Drain retries until the budget allows; so do we.
    for pod in $pods; do
        until_ok 180 "pod $pod evicted" evict_done "$pod"
    done
    until_ok 120 "two replicas Ready again" settled
    sleep 3
    streams_stop
    ((refused >= 1)) || fail "the PodDisruptionBudget refused no eviction of $(echo $pods)"
}

evict() {
    kubectl create --raw "/api/v1/namespaces/$RELEASE_NS/pods/$1/eviction" -f - <<EOF
{"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "$1", "namespace": "$RELEASE_NS"}}
EOF
}

evict_done() {
    ! kubectl -n "$RELEASE_NS" get pod "$1" >/dev/null 2>&1 && return 0
    [ -n "$(kubectl -n "$RELEASE_NS" get pod "$1" -o jsonpath='{.metadata.deletionTimestamp}')" ] && return 0
    evict "$1" >/dev/null 2>&1
}

test_a_certificate_rotation_fails_no_call() {
    local before after
    before=$(kubectl -n "$RELEASE_NS" get secret miggate-webhook-certs -o jsonpath='{.data.ca\.crt}')
    [ -n "$before" ] || fail "the Secret holds no CA"
    streams_start
    sleep 3
    kubectl -n "$RELEASE_NS" delete secret miggate-webhook-certs >/dev/null
    until_ok 60 "a new CA in the Secret" new_ca "$before"
    # Every replica switches to the new pair within the propagation wait.
    sleep 15
    streams_stop
    after=$(kubectl -n "$RELEASE_NS" get secret miggate-webhook-certs -o jsonpath='{.data.ca\.crt}')
    [ "$after" != "$before" ] || fail "the CA did not change"
}

new_ca() {
    local now
    now=$(kubectl -n "$RELEASE_NS" get secret miggate-webhook-certs -o jsonpath='{.data.ca\.crt}')
    [ -n "$now" ] && [ "$now" != "$1" ]
}
