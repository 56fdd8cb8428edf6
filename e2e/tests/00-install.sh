# shellcheck shell=bash
# The install, as the README says it, on a node that looks like a GPU node to Kubernetes.

test_nothing_is_left_of_an_earlier_install() {
    remove_miggate
    [ -z "$(kubectl get pods -A -l app.kubernetes.io/part-of=miggate -o name)" ] || fail "miggate pods left"
}

# What GPU Feature Discovery and the device plugin (mixed strategy) would say of this node: an
# H100 on driver 580, and two 1g.10gb slices to hand out.
test_the_node_is_a_gpu_node() {
    kubectl label node "$E2E_NODE" --overwrite nvidia.com/gpu.present=true nvidia.com/mig.strategy=mixed \
        nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3 nvidia.com/cuda.driver-version.major=580 >/dev/null
    kubectl patch node "$E2E_NODE" --subresource=status --type=merge \
        -p '{"status":{"capacity":{"nvidia.com/mig-1g.10gb":"2"}}}' >/dev/null
    until_ok 30 "the node's allocatable nvidia.com/mig-1g.10gb" \
        bash -c "[ \"\$(kubectl get node $E2E_NODE -o jsonpath='{.status.allocatable.nvidia\.com/mig-1g\.10gb}')\" = 2 ]"
}

test_helm_install_waits_for_ready_replicas() {
    # The README's command; the one test-only value hands the publisher a recorded nvidia-smi.
    local out
    local values
    mapfile -t values < <(install_values)
    out=$(helm install "$RELEASE" charts/miggate -n "$RELEASE_NS" --create-namespace --wait --timeout 5m \
        "${values[@]}" 2>&1) || fail "helm install: $out"
    expect_contains "$out" "STATUS: deployed"
    webhook_pods_ready 2 || fail "fewer than 2 webhook replicas Ready after helm install --wait"
    local nodes
    nodes=$(kubectl -n "$RELEASE_NS" get pods -l app.kubernetes.io/name=miggate-webhook \
        -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort -u)
    [ "$nodes" = "$E2E_NODE" ] || fail "webhook pods on '$nodes', not on $E2E_NODE"
}

test_every_webhook_names_the_service_with_an_injected_ca() {
    local kind name hooks
    for kind in validatingwebhookconfiguration mutatingwebhookconfiguration; do
        for name in $(kubectl get "$kind" -l app.kubernetes.io/part-of=miggate -o name); do
            hooks=$(kubectl get "$name" -o jsonpath='{range .webhooks[*]}{.name} {.clientConfig.service.name}/{.clientConfig.service.namespace} url={.clientConfig.url} ca={.clientConfig.caBundle}{"\n"}{end}')
            while read -r hook service url ca; do
                [ "$service" = "miggate-webhook/$RELEASE_NS" ] || fail "$name $hook: service $service"
                [ "$url" = "url=" ] || fail "$name $hook: $url"
                [ ${#ca} -gt 100 ] || fail "$name $hook: no caBundle injected"
            done <<< "$hooks"
        done
    done
}

# The Service's address, from this node as from the API server, serves a certificate for the
# Service's name that the injected CA verifies.
test_the_service_serves_a_certificate_the_injected_ca_verifies() {
    local ip out
    ip=$(kubectl -n "$RELEASE_NS" get service miggate-webhook -o jsonpath='{.spec.clusterIP}')
    kubectl get validatingwebhookconfiguration miggate -o jsonpath='{.webhooks[0].clientConfig.caBundle}' |
        base64 -d > "$E2E_WORK/injected-ca.pem"
    out=$(openssl s_client -connect "$ip:443" -servername "miggate-webhook.$RELEASE_NS.svc" \
        -verify_hostname "miggate-webhook.$RELEASE_NS.svc" -CAfile "$E2E_WORK/injected-ca.pem" \
        -verify_return_error < /dev/null 2>&1) || fail "TLS to $ip:443: $out"
    expect_contains "$out" "Verify return code: 0 (ok)"
}

test_the_publisher_daemonset_publishes_the_node() {
    until_ok 120 "the publisher's pod Running on $E2E_NODE" bash -c \
        "kubectl -n $NODE_NS get pods -l app.kubernetes.io/name=miggate-publish -o jsonpath='{.items[*].status.phase}' | grep -qx Running"
    until_ok 60 "GpuNode $E2E_NODE" kubectl get gpunode "$E2E_NODE"
    local summary class
    summary=$(kubectl get gpunode "$E2E_NODE" -o jsonpath='{.spec.summary.model} {.spec.summary.profiles} {.spec.summary.driver}')
    expect_contains "$summary" "NVIDIA H100 80GB HBM3" "1g.10gb x2" "580.82.07"
    # No RuntimeClass `nvidia` here: the chart's `auto` sets none, so the pod was admitted.
    class=$(kubectl -n "$NODE_NS" get daemonset miggate-publish -o jsonpath='{.spec.template.spec.runtimeClassName}')
    [ -z "$class" ] || fail "runtimeClassName $class on a cluster without that class"
}

test_runtime_class_auto_takes_nvidia_where_the_cluster_has_it() {
    kubectl apply -f - >/dev/null <<'EOF'
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: nvidia}
handler: nvidia
EOF
    local out
    out=$(helm upgrade "$RELEASE" charts/miggate -n "$RELEASE_NS" --reuse-values --dry-run=server 2>&1)
    kubectl delete runtimeclass nvidia >/dev/null
    expect_contains "$out" "runtimeClassName: nvidia"
}
