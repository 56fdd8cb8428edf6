# shellcheck shell=bash
# `miggate doctor` on the real install: healthy, then broken one way at a time, each break named
# with its hint and each repair turning it back to ✔.

# doctor [ARGS...]: `miggate doctor`'s report in $REPORT, its exit status in $DOCTOR_RC.
doctor() {
    REPORT=$(target/release/miggate doctor --kubeconfig "$KUBECONFIG" --probe-namespace "$TENANT_NS" "$@" 2>&1) &&
        DOCTOR_RC=0 || DOCTOR_RC=$?
}

# doctor_healthy: the doctor passes (exit 0, nothing failing), within 120 s for a repair to
# settle.
doctor_healthy() {
    local limit=120 started=$SECONDS
    while true; do
        doctor
        [ "$DOCTOR_RC" = 0 ] && ! grep -q '^✖' <<< "$REPORT" && break
        ((SECONDS - started > limit)) && fail "the doctor still fails after ${limit} s: $REPORT"
        sleep 2
    done
}

test_the_doctor_passes_a_healthy_install() {
    local json
    doctor_healthy
    expect_contains "$REPORT" "✔ cluster" "✔ crds" "CRD gpucheckpoints.miggate.io established" \
        "✔ webhook" "2 of 2 replicas available" "✔ configurations" "caBundle verifies the serving certificate" \
        "✔ certificate" "✔ caches" "caches listed and current" \
        "✔ probe" "the API server called restore.miggate.io" \
        "✔ nodes" "GPU node(s) read from their GpuNode" "✔ policies" "each bound with Deny" \
        "✔ tenants" "exempt: " "kube-system" "0 failed"
    json=$(target/release/miggate doctor --kubeconfig "$KUBECONFIG" --probe-namespace "$TENANT_NS" -o json) ||
        fail "doctor -o json exited $?"
    [ "$(jq -r .failed <<< "$json")" = 0 ] || fail "doctor -o json: $json"
    [ "$(jq -r '[.findings[] | select(.area == "probe")][0].status' <<< "$json")" = pass ] || fail "probe: $json"
    # The probe was a dry run: no pod of its name exists.
    kubectl -n "$TENANT_NS" get pod miggate-doctor-probe >/dev/null 2>&1 && fail "the probe pod was stored"
    return 0
}

test_the_doctor_names_a_webhook_scaled_to_zero() {
    kubectl -n "$RELEASE_NS" scale deployment miggate-webhook --replicas=0 >/dev/null
    until_ok 90 "no webhook pod left" bash -c \
        "[ -z \"\$(kubectl -n $RELEASE_NS get pods -l app.kubernetes.io/name=miggate-webhook -o name)\" ]"
    doctor
    [ "$DOCTOR_RC" = 1 ] || fail "doctor exited $DOCTOR_RC: $REPORT"
    expect_contains "$REPORT" "✖ webhook" "0 of 0 replicas available" \
        "hint: kubectl -n $RELEASE_NS scale deployment miggate-webhook --replicas=2" \
        "✖ probe" "the API server cannot call restore.miggate.io" "no replica answered"
    kubectl -n "$RELEASE_NS" scale deployment miggate-webhook --replicas=2 >/dev/null
    until_ok 180 "2 webhook replicas ready" webhook_pods_ready 2
    doctor_healthy
}

test_the_doctor_names_a_ca_bundle_replaced_while_the_webhook_is_stopped() {
    kubectl -n "$RELEASE_NS" scale deployment miggate-webhook --replicas=0 >/dev/null
    until_ok 90 "no webhook pod left" bash -c \
        "[ -z \"\$(kubectl -n $RELEASE_NS get pods -l app.kubernetes.io/name=miggate-webhook -o name)\" ]"
    local other=$E2E_WORK/doctor-other-ca
    mkdir -p "$other"
    openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$other/ca.key" \
        -days 1 -subj "/CN=not-miggate" -out "$other/ca.crt" 2>/dev/null
    kubectl patch validatingwebhookconfiguration miggate --type=json -p \
        "[{\"op\": \"replace\", \"path\": \"/webhooks/0/clientConfig/caBundle\", \"value\": \"$(base64 -w0 < "$other/ca.crt")\"}]" >/dev/null
    doctor
    [ "$DOCTOR_RC" = 1 ] || fail "doctor exited $DOCTOR_RC: $REPORT"
    expect_contains "$REPORT" "✖ configurations" \
        "caBundle does not verify the certificate the replicas serve" \
        "rollout restart deployment/miggate-webhook"
    # Started again, the webhook puts its CA back into every configuration.
    kubectl -n "$RELEASE_NS" scale deployment miggate-webhook --replicas=2 >/dev/null
    until_ok 180 "2 webhook replicas ready" webhook_pods_ready 2
    doctor_healthy
    expect_contains "$REPORT" "✔ configurations" "caBundle verifies the serving certificate"
}

test_the_doctor_names_a_gpu_node_without_inventory() {
    # A Node object with no kubelet behind it: GPUs by its label, and no source of inventory.
    kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: doctor-gpu-ghost
  labels:
    nvidia.com/gpu.present: "true"
spec:
  taints:
  - key: miggate-e2e/ghost
    effect: NoSchedule
EOF
    doctor --no-probe
    [ "$DOCTOR_RC" = 1 ] || { kubectl delete node doctor-gpu-ghost >/dev/null; fail "doctor exited $DOCTOR_RC: $REPORT"; }
    expect_contains "$REPORT" "✖ nodes" "node doctor-gpu-ghost has GPUs but no usable inventory" \
        "hint: run miggate's publisher there" "⚠ probe"
    # The webhook's gauge counts it too.
    local pod metrics
    pod=$(kubectl -n "$RELEASE_NS" get pods -l app.kubernetes.io/name=miggate-webhook -o jsonpath='{.items[0].metadata.name}')
    until_ok 30 "the gauge counts the ghost node" bash -c \
        "kubectl get --raw /api/v1/namespaces/$RELEASE_NS/pods/$pod:8080/proxy/metrics | grep -qx 'miggate_gpu_nodes_without_inventory 1'"
    kubectl delete node doctor-gpu-ghost >/dev/null
    doctor_healthy
    [[ "$REPORT" != *doctor-gpu-ghost* ]] || fail "the deleted node is still named: $REPORT"
    metrics=$(kubectl get --raw "/api/v1/namespaces/$RELEASE_NS/pods/$pod:8080/proxy/metrics")
    grep -qx 'miggate_gpu_nodes_without_inventory 0' <<< "$metrics" || fail "the gauge: $(grep gpu_nodes <<< "$metrics")"
}

test_the_doctor_names_a_policy_binding_deleted() {
    kubectl delete validatingadmissionpolicybinding miggate-restore-annotations >/dev/null
    doctor --no-probe
    [ "$DOCTOR_RC" = 1 ] || fail "doctor exited $DOCTOR_RC: $REPORT"
    expect_contains "$REPORT" "✖ policies" "policy miggate-restore-annotations is not bound: it enforces nothing" \
        "hint: helm upgrade"
    upgrade_with
    doctor_healthy
    expect_contains "$REPORT" "✔ policies"
}
