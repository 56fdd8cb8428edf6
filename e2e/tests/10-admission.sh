# shellcheck shell=bash
# Restore pods at creation and at binding: the real scheduler binds, the kubelet runs.

test_checkpoints_written_by_the_agent_get_a_summary() {
    tenant_namespace
    checkpoint fits DRIVER=580.82.07 MEMORY=64Mi MOUNTS='[]'
    checkpoint big DRIVER=580.82.07 MEMORY=64Gi MOUNTS='[/model-cache]'
    checkpoint short DRIVER=580.95.05 MEMORY=64Mi MOUNTS='[]'
    # The summary webhook (mutating, reached through the Service) filled what kubectl shows.
    local summary
    summary=$(kubectl -n "$TENANT_NS" get gpucheckpoint fits -o jsonpath='{.spec.summary.model} {.spec.summary.profiles} {.spec.summary.driver}')
    expect_contains "$summary" "NVIDIA H100 80GB HBM3" "1g.10gb x1" "580.82.07"
    # Nobody else writes checkpoints: the admin is refused too.
    local out
    out=$(fixture checkpoint.yaml NAME=forged NODE="$E2E_NODE" KERNEL="$(node_kernel)" DRIVER=580.82.07 \
        MEMORY=64Mi MOUNTS='[]' | kubectl apply -f - 2>&1) && fail "an admin wrote a GpuCheckpoint"
    expect_contains "$out" "only system:serviceaccount:$NODE_NS:miggate-checkpoint-agent may write them"
}

test_a_restore_that_cannot_work_is_refused_at_creation_naming_its_checks() {
    local out
    out=$(fixture restore-pod.yaml NAME=too-small CHECKPOINT=big MEMORY=64Mi | kubectl create -f - 2>&1) &&
        fail "created: $out"
    expect_contains "$out" 'admission webhook "restore.miggate.io" denied the request' \
        "checkpoint $TENANT_NS/big cannot be restored" "memory-limit: source 64Gi, target 64Mi" \
        "mount: source /model-cache, target missing"
    kubectl -n "$TENANT_NS" get pod too-small >/dev/null 2>&1 && fail "the refused pod exists"
    return 0
}

test_a_restore_that_fits_is_scheduled_bound_and_run() {
    fixture restore-pod.yaml NAME=fits CHECKPOINT=fits MEMORY=64Mi | create
    until_ok 120 "pod fits Running" bash -c "[ \"\$(kubectl -n $TENANT_NS get pod fits -o jsonpath='{.status.phase}')\" = Running ]"
    [ "$(kubectl -n "$TENANT_NS" get pod fits -o jsonpath='{.spec.nodeName}')" = "$E2E_NODE" ] ||
        fail "pod fits is not on $E2E_NODE"
    kubectl -n "$TENANT_NS" delete pod fits --wait=false >/dev/null
}

test_a_restore_the_node_is_short_of_is_held_at_binding() {
    fixture restore-pod.yaml NAME=short CHECKPOINT=short MEMORY=64Mi | create
    local events=""
    local started=$SECONDS
    until [[ "$events" == *binding.miggate.io* ]]; do
        ((SECONDS - started > 90)) && fail "no refused binding in the events of pod short: $events"
        sleep 1
        events=$(kubectl -n "$TENANT_NS" get events --field-selector involvedObject.name=short \
            -o jsonpath='{range .items[*]}{.reason}: {.message}{"\n"}{end}')
    done
    expect_contains "$events" "FailedScheduling" \
        "checkpoint $TENANT_NS/short of pod $TENANT_NS/short cannot be restored on node $E2E_NODE" \
        "driver-version: source 580.95.05, target 580.82.07"
    [ "$(pod_phase "$TENANT_NS" short)" = Pending ] || fail "pod short is $(pod_phase "$TENANT_NS" short)"
    [ -z "$(kubectl -n "$TENANT_NS" get pod short -o jsonpath='{.spec.nodeName}')" ] || fail "pod short was bound"
    kubectl -n "$TENANT_NS" delete pod short --wait=false >/dev/null
}

# audit_event SUBRESOURCE NAME CODE: the API server's audit event (e2e/cluster.sh's policy) of
# the last creation of pod NAME in the tenant namespace, or of its binding, answered with HTTP
# status CODE, as JSON. The code matters for bindings: the scheduler may try once more while a
# refused pod is being deleted, and the webhook rightly ignores the binding of a pod it no
# longer has, so only the answered attempts say what the webhook decided.
audit_event() {
    local subresource=$1 name=$2 code=$3
    jq -c --arg ns "$TENANT_NS" --arg name "$name" --arg sub "$subresource" --argjson code "$code" \
        'select(.stage == "ResponseComplete" and .verb == "create" and .objectRef.namespace == $ns
                and .objectRef.name == $name and (.objectRef.subresource // "") == $sub
                and .responseStatus.code == $code)' \
        "$E2E_AUDIT_LOG" | tail -n 1
}

# Every decision on a restore is in the cluster's audit log, under the webhook's name: the
# verdict, what refused, the checkpoint, the node and its inventory source.
test_the_audit_log_records_each_decision_on_a_restore() {
    [ -f "$E2E_AUDIT_LOG" ] || fail "no audit log at $E2E_AUDIT_LOG (e2e/cluster.sh up starts the API server with one)"
    local event
    event=$(audit_event "" too-small 403)
    [ -n "$event" ] || fail "no audit event of the refused creation of pod too-small"
    expect_contains "$(jq -r '.responseStatus.code, (.annotations | to_entries[] | "\(.key)=\(.value)")' <<< "$event")" \
        403 "restore.miggate.io/verdict=refused" "restore.miggate.io/refused-by=" "memory-limit" "mount" \
        "restore.miggate.io/checkpoint=GpuCheckpoint $TENANT_NS/big"
    event=$(audit_event binding short 403)
    [ -n "$event" ] || fail "no audit event of the refused binding of pod short"
    expect_contains "$(jq -r '.annotations | to_entries[] | "\(.key)=\(.value)"' <<< "$event")" \
        "binding.miggate.io/verdict=refused" "binding.miggate.io/refused-by=driver-version" \
        "binding.miggate.io/checkpoint=GpuCheckpoint $TENANT_NS/short" "binding.miggate.io/node=$E2E_NODE" \
        "binding.miggate.io/inventory-source=GpuNode"
    event=$(audit_event binding fits 201)
    [ -n "$event" ] || fail "no audit event of the binding of pod fits"
    expect_contains "$(jq -r '.annotations | to_entries[] | "\(.key)=\(.value)"' <<< "$event")" \
        "binding.miggate.io/verdict=allowed" "binding.miggate.io/node=$E2E_NODE"
}

# admission.objectSelector scopes the pod webhooks; the binding check stays on for every pod
# (a scheduler's Binding carries no labels for a selector to match).
test_an_object_selector_leaves_the_binding_check_on() {
    helm upgrade "$RELEASE" charts/miggate -n "$RELEASE_NS" --reuse-values --wait --timeout 3m \
        --set admission.objectSelector.matchLabels.team=ml >/dev/null
    fixture restore-pod.yaml NAME=short-selected CHECKPOINT=short MEMORY=64Mi |
        kubectl label --local -f - team=ml -o yaml | create
    local events="" started=$SECONDS
    until [[ "$events" == *binding.miggate.io* ]]; do
        ((SECONDS - started > 90)) && fail "no refused binding in the events of pod short-selected: $events"
        sleep 1
        events=$(kubectl -n "$TENANT_NS" get events --field-selector involvedObject.name=short-selected \
            -o jsonpath='{range .items[*]}{.reason}: {.message}{"\n"}{end}')
    done
    expect_contains "$events" "driver-version: source 580.95.05, target 580.82.07"
    [ -z "$(kubectl -n "$TENANT_NS" get pod short-selected -o jsonpath='{.spec.nodeName}')" ] ||
        fail "pod short-selected was bound"
    kubectl -n "$TENANT_NS" delete pod short-selected --wait=false >/dev/null
    local values
    mapfile -t values < <(install_values)
    helm upgrade "$RELEASE" charts/miggate -n "$RELEASE_NS" --reset-values --wait --timeout 3m \
        "${values[@]}" >/dev/null
    [ -z "$(kubectl get validatingwebhookconfiguration miggate -o jsonpath='{.webhooks[0].objectSelector.matchLabels}')" ] ||
        fail "the object selector is still set"
}

test_a_restore_that_asks_for_steering_gets_node_affinity_and_runs() {
    fixture restore-pod.yaml NAME=steered CHECKPOINT=fits MEMORY=64Mi |
        kubectl annotate --local -f - miggate.io/steer=true -o yaml | create
    local steered terms
    steered=$(kubectl -n "$TENANT_NS" get pod steered -o go-template='{{index .metadata.annotations "miggate.io/steered"}}')
    expect_contains "$steered" "nvidia.com/gpu.product in (NVIDIA-H100-80GB-HBM3" "kubernetes.io/arch in (amd64)"
    terms=$(kubectl -n "$TENANT_NS" get pod steered -o jsonpath='{.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms}')
    expect_contains "$terms" "nvidia.com/gpu.product"
    until_ok 120 "pod steered Running" bash -c "[ \"\$(kubectl -n $TENANT_NS get pod steered -o jsonpath='{.status.phase}')\" = Running ]"
    kubectl -n "$TENANT_NS" delete pod steered --wait=false >/dev/null
}
