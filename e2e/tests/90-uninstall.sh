# shellcheck shell=bash
# helm uninstall leaves nothing of miggate but its CRDs (Helm never deletes a chart's CRDs), and
# the install without Helm reaches the same state.

# Every object labelled part-of=miggate, as KIND NAMESPACE/NAME, but those named by controllers
# (pods, their ReplicaSets and revisions, EndpointSlices, events).
installed_objects() {
    local resources
    resources=$(kubectl api-resources --verbs=list -o name |
        grep -vxE 'pods|replicasets.apps|controllerrevisions.apps|endpointslices.discovery.k8s.io|endpoints|events|events.events.k8s.io')
    local r
    for r in $resources; do
        kubectl get "$r" -A -l app.kubernetes.io/part-of=miggate \
            -o jsonpath="{range .items[*]}$r {.metadata.namespace}/{.metadata.name}{\"\n\"}{end}" 2>/dev/null
    done | sort
}

test_helm_uninstall_leaves_only_the_crds() {
    installed_objects > "$E2E_WORK/objects-helm.txt"
    grep -q '^deployments.apps miggate-system/miggate-webhook$' "$E2E_WORK/objects-helm.txt" ||
        fail "the install's objects were not listed: $(head -n 3 "$E2E_WORK/objects-helm.txt")"
    kubectl -n "$TENANT_NS" delete pods --all --grace-period=0 --force >/dev/null 2>&1 || true
    local out
    out=$(helm uninstall "$RELEASE" -n "$RELEASE_NS" --wait --timeout 3m 2>&1) || fail "helm uninstall: $out"
    # The kubelet confirms every pod gone (a pod object is removed once its containers stopped).
    until_ok 120 "every miggate pod gone" bash -c \
        "[ -z \"\$(kubectl get pods -A -l app.kubernetes.io/part-of=miggate -o name)\" ]"
    local left
    left=$(installed_objects | grep -v '^customresourcedefinitions.apiextensions.k8s.io ' || true)
    [ -z "$left" ] || fail "left after helm uninstall: $left"
}

test_without_helm_kubectl_apply_reaches_the_same_state() {
    # A fresh start: no CRDs, no namespaces of a previous install.
    remove_miggate
    # deploy/ is the chart rendered with its defaults; kustomize applies it in kind order
    # (namespaces and CRDs first, the webhook configurations last).
    kubectl apply --server-side -k "$E2E_REPO/deploy" >/dev/null 2>"$E2E_WORK/apply.err" ||
        fail "kubectl apply: $(cat "$E2E_WORK/apply.err")"
    kubectl -n "$RELEASE_NS" rollout status deployment/miggate-webhook --timeout=180s >/dev/null ||
        fail "the webhook Deployment did not become available"
    until_ok 60 "the replicas Ready" webhook_pods_ready 2
    # The same objects as the chart's defaults made (Helm's own labels aside), and the release
    # namespace, which deploy/ makes and `helm install --create-namespace` made unlabelled.
    installed_objects | grep -vx "namespaces /$RELEASE_NS" > "$E2E_WORK/objects-apply.txt"
    local differ
    differ=$(diff "$E2E_WORK/objects-helm.txt" "$E2E_WORK/objects-apply.txt" || true)
    [ -z "$differ" ] || fail "kubectl apply and helm install differ: $differ"
    # And it gates as the chart's install did.
    until_ok 60 "the CRDs established" kubectl wait --for=condition=Established crd/gpucheckpoints.miggate.io
    tenant_namespace
    checkpoint big DRIVER=580.82.07 MEMORY=64Gi MOUNTS='[/model-cache]'
    local out
    out=$(fixture restore-pod.yaml NAME=too-small CHECKPOINT=big MEMORY=64Mi | kubectl create -f - 2>&1) &&
        fail "created: $out"
    expect_contains "$out" "memory-limit: source 64Gi, target 64Mi"
    kubectl delete -k "$E2E_REPO/deploy" --wait=true >/dev/null 2>&1 || true
    until_ok 120 "every miggate pod gone" bash -c \
        "[ -z \"\$(kubectl get pods -A -l app.kubernetes.io/part-of=miggate -o name)\" ]"
}
