# shellcheck shell=bash
# The install's own identities turned against the cluster, each refused or mended: the webhook's
# account, its certificate Secret, a listed binder, a restore pod outside the watched selector,
# and the node namespace's accounts.

WEBHOOK_USER="system:serviceaccount:$RELEASE_NS:miggate-webhook"
CERTS=miggate-webhook-certs

# kubectl with a token of the webhook's account, as a stolen one would be used.
as_webhook() {
    local token
    token=$(kubectl -n "$RELEASE_NS" create token miggate-webhook --duration 10m)
    kubectl --kubeconfig=/dev/null --server="https://$E2E_NODE_IP:$E2E_API_PORT" \
        --certificate-authority="$E2E_STATE/pki/ca.crt" --token="$token" "$@"
}

# refused WHAT NEEDLE CMD...: CMD fails, and its error says NEEDLE.
refused() {
    local what=$1 needle=$2 out
    shift 2
    if out=$("$@" 2>&1); then
        fail "$what was allowed: $out"
    fi
    expect_contains "$out" "$needle"
}

# Every caBundle of miggate's configurations, decoded, one PEM stream.
ca_bundles() {
    local kind name
    for kind in validatingwebhookconfiguration mutatingwebhookconfiguration; do
        for name in $(kubectl get "$kind" -l app.kubernetes.io/part-of=miggate -o name); do
            kubectl get "$name" -o jsonpath='{range .webhooks[*]}{.clientConfig.caBundle}{"\n"}{end}' |
                while read -r b; do printf '%s' "$b" | base64 -d; done
        done
    done
}

secret_key() {
    kubectl -n "$RELEASE_NS" get secret "$CERTS" -o jsonpath="{.data.${1//./\\.}}" | base64 -d
}

# A CA that is not the webhook's, and a serving certificate of it for the Service's names.
foreign_ca() {
    local dir=$E2E_WORK/foreign
    rm -rf "$dir" && mkdir -p "$dir"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
        -subj /CN=foreign-ca -addext basicConstraints=critical,CA:TRUE \
        -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=miggate-webhook" \
        -keyout "$dir/tls.key" -out "$dir/tls.csr" 2>/dev/null
    printf 'subjectAltName=DNS:miggate-webhook.%s.svc,DNS:miggate-webhook.%s.svc.cluster.local\n' \
        "$RELEASE_NS" "$RELEASE_NS" > "$dir/ext"
    openssl x509 -req -in "$dir/tls.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
        -days 30 -extfile "$dir/ext" -out "$dir/tls.crt" 2>/dev/null
    # The line of its body that no other certificate shares, to look for in bundles.
    sed -n 2p "$dir/ca.crt" > "$dir/marker"
}

# Whether any caBundle holds the foreign CA. (Read whole before grep -q searches it: under
# pipefail, a writer cut off by grep's early exit would turn a match into a miss.)
trusts_foreign() {
    local bundles
    bundles=$(ca_bundles)
    grep -qF -f "$E2E_WORK/foreign/marker" <<< "$bundles"
}

# Whether the Secret still holds the foreign CA.
holds_foreign() {
    local ca
    ca=$(secret_key ca.crt 2>/dev/null) || return 1
    grep -qF -f "$E2E_WORK/foreign/marker" <<< "$ca"
}

test_the_webhook_account_changes_nothing_but_ca_bundles() {
    local needle="$WEBHOOK_USER changes nothing of a webhook configuration but each webhook's clientConfig.caBundle"
    refused "a webhook added by the webhook's account" "$needle" as_webhook patch validatingwebhookconfiguration miggate --type=json \
        -p '[{"op":"add","path":"/webhooks/-","value":{"name":"secrets.evil.example","clientConfig":{"url":"https://evil.example/"},"rules":[{"apiGroups":[""],"apiVersions":["v1"],"operations":["CREATE"],"resources":["secrets"]}],"sideEffects":"None","admissionReviewVersions":["v1"]}}]'
    refused "a webhook pointed at a url" "$needle" as_webhook patch mutatingwebhookconfiguration miggate-summary --type=json \
        -p '[{"op":"remove","path":"/webhooks/0/clientConfig/service"},{"op":"add","path":"/webhooks/0/clientConfig/url","value":"https://evil.example/"}]'
    refused "a failure policy switched" "$needle" as_webhook patch validatingwebhookconfiguration miggate --type=json \
        -p '[{"op":"replace","path":"/webhooks/0/failurePolicy","value":"Ignore"}]'
    refused "rules widened" "$needle" as_webhook patch mutatingwebhookconfiguration miggate-device-map --type=json \
        -p '[{"op":"replace","path":"/webhooks/0/rules/0/resources","value":["*"]}]'
    refused "an owner set" "$needle" as_webhook patch validatingwebhookconfiguration miggate --type=merge \
        -p '{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"Namespace","name":"default","uid":"00000000-0000-0000-0000-000000000000"}]}}'
    # What it is there for still works: a wiped bundle is put back by the webhook.
    as_webhook patch validatingwebhookconfiguration miggate --type=json \
        -p '[{"op":"replace","path":"/webhooks/0/clientConfig/caBundle","value":"'"$(printf x | base64)"'"}]' >/dev/null ||
        fail "the webhook's account may not patch a caBundle"
    until_ok 30 "the wiped caBundle injected again" bash -c \
        "[ \$(kubectl get validatingwebhookconfiguration miggate -o jsonpath='{.webhooks[0].clientConfig.caBundle}' | wc -c) -gt 100 ]"
}

test_only_the_webhook_writes_its_certificate_secret() {
    local needle="only miggate's webhook writes the certificates in Secret $CERTS"
    refused "the certificates overwritten by an admin" "$needle" \
        kubectl -n "$RELEASE_NS" patch secret "$CERTS" --type=merge -p '{"data":{"ca.crt":"eA=="}}'
    refused "the certificates overwritten through stringData" "$needle" \
        kubectl -n "$RELEASE_NS" patch secret "$CERTS" --type=merge -p '{"stringData":{"ca-bundle.crt":"x"}}'
    refused "the Secret made immutable" "$needle" \
        kubectl -n "$RELEASE_NS" patch secret "$CERTS" --type=merge -p '{"immutable":true}'
    refused "the kept CA's time extended" "$needle" \
        kubectl -n "$RELEASE_NS" annotate --overwrite secret "$CERTS" miggate.io/previous-ca-until=2099-01-01T00:00:00Z
    refused "a Secret of certificates created by another account" "$needle" \
        kubectl -n "$RELEASE_NS" create secret generic "$CERTS" --from-literal=ca.crt=x --dry-run=server
    refused "another Secret written by the webhook's account" "$WEBHOOK_USER writes no Secret but $CERTS" \
        as_webhook -n "$RELEASE_NS" create secret generic planted --from-literal=a=b
    # Labels are Helm's and the admin's.
    kubectl -n "$RELEASE_NS" label --overwrite secret "$CERTS" team=platform >/dev/null ||
        fail "a label on the Secret refused"
}

# As before an install, while no replica runs and the policy is not bound yet: a Secret of
# another CA, immutable, marked as written by the webhook's account as far as anyone can know
# before it exists (its user name; its UID is made by the install). The replicas that start
# replace it (deleting it, since it cannot be written); no configuration trusts the planted CA
# at any moment, and restores are answered again.
test_a_planted_certificate_secret_is_replaced_never_trusted() {
    local binding=$E2E_WORK/certs-binding.json marks started out
    foreign_ca
    kubectl get validatingadmissionpolicybinding "$CERTS" -o json |
        jq 'del(.metadata.resourceVersion, .metadata.uid, .metadata.creationTimestamp, .metadata.generation, .metadata.managedFields, .status)' > "$binding"
    marks=$(jq -cn --arg user "$WEBHOOK_USER" '{"miggate.io/written-by": $user}')
    # Whatever happens, the install is left whole: the binding back, two replicas.
    trap 'kubectl create -f "$E2E_WORK/certs-binding.json" >/dev/null 2>&1 || true; kubectl -n "$RELEASE_NS" scale deployment miggate-webhook --replicas=2 >/dev/null' EXIT
    kubectl -n "$RELEASE_NS" scale deployment miggate-webhook --replicas=0 >/dev/null
    until_ok 120 "no webhook pod left" bash -c "[ -z \"\$(kubectl -n $RELEASE_NS get pods -l app.kubernetes.io/name=miggate-webhook -o name)\" ]"
    kubectl delete validatingadmissionpolicybinding "$CERTS" >/dev/null
    kubectl -n "$RELEASE_NS" delete secret "$CERTS" --wait=true >/dev/null
    kubectl -n "$RELEASE_NS" create secret generic "$CERTS" \
        --from-file=ca.crt="$E2E_WORK/foreign/ca.crt" --from-file=ca.key="$E2E_WORK/foreign/ca.key" \
        --from-file=tls.crt="$E2E_WORK/foreign/tls.crt" --from-file=tls.key="$E2E_WORK/foreign/tls.key" \
        --from-file=ca-bundle.crt="$E2E_WORK/foreign/ca.crt" --dry-run=client -o json |
        jq --argjson marks "$marks" '.immutable = true | .metadata.annotations = $marks' > "$E2E_WORK/planted.json"
    # The API server stops applying an unbound policy within a second or two.
    until_ok 30 "the foreign Secret planted once the policy is unbound" kubectl create -f "$E2E_WORK/planted.json"
    kubectl create -f "$binding" >/dev/null
    kubectl -n "$RELEASE_NS" scale deployment miggate-webhook --replicas=2 >/dev/null
    started=$SECONDS
    # Until the Secret holds another CA, no bundle may carry the planted one.
    while holds_foreign; do
        trusts_foreign && fail "a configuration trusts the planted CA"
        ((SECONDS - started > 120)) && fail "the planted Secret still there after 120 s"
        sleep 0.5
    done
    until_ok 120 "both replicas Ready" webhook_pods_ready 2
    [ "$(kubectl -n "$RELEASE_NS" get secret "$CERTS" -o jsonpath='{.immutable}')" != true ] ||
        fail "the webhook's Secret is immutable"
    trusts_foreign && fail "a configuration trusts the planted CA"
    out=$(fixture restore-pod.yaml NAME=after-planting CHECKPOINT=fits MEMORY=16Mi |
        kubectl create --dry-run=server -f - 2>&1) && fail "a restore that does not fit was admitted: $out"
    expect_contains "$out" "memory-limit"
}

# With the webhook's own token (the one account that may write the Secret), foreign CAs added to
# the bundle and kept "until 2099": the webhook keeps at most one CA besides its own, and no
# longer than the overlap after its CA was made.
test_the_kept_bundle_is_bounded() {
    foreign_ca
    local bundle until n
    bundle=$( { secret_key ca-bundle.crt; cat "$E2E_WORK/foreign/ca.crt" "$E2E_WORK/foreign/ca.crt" "$E2E_WORK/foreign/tls.crt"; } | base64 -w0)
    # The account may update, not patch: read, change, replace.
    as_webhook -n "$RELEASE_NS" get secret "$CERTS" -o json |
        jq --arg bundle "$bundle" '.metadata.annotations["miggate.io/previous-ca-until"] = "2099-01-01T00:00:00Z" | .data["ca-bundle.crt"] = $bundle' |
        as_webhook replace -f - >/dev/null || fail "the webhook's account could not write its Secret"
    until_ok 30 "the bundle cut back" bash -c \
        "[ \"\$(kubectl -n $RELEASE_NS get secret $CERTS -o jsonpath='{.data.ca-bundle\.crt}' | base64 -d | grep -c 'BEGIN CERTIFICATE')\" -le 2 ]"
    n=$(ca_bundles | grep -c 'BEGIN CERTIFICATE')
    until=$(kubectl -n "$RELEASE_NS" get secret "$CERTS" -o jsonpath='{.metadata.annotations.miggate\.io/previous-ca-until}')
    [[ "$until" != 2099* ]] || fail "previous-ca-until kept at $until"
    local kept
    kept=$(secret_key ca-bundle.crt)
    grep -qF "$(sed -n 2p "$E2E_WORK/foreign/tls.crt")" <<< "$kept" && fail "a serving certificate kept in the bundle"
    [ "$n" -gt 0 ] || fail "no caBundle left"
}

# served_not_after POD: the not-after of the certificate POD serves, as its /readyz says.
served_not_after() {
    local ip
    ip=$(kubectl -n "$RELEASE_NS" get pod "$1" -o jsonpath='{.status.podIP}')
    curl -s --max-time 5 "http://$ip:8080/readyz" | jq -r '.certificates.not_after // ""'
}

# Every replica serves the serving certificate the Secret holds now.
serving_the_secrets_certificate() {
    local want pod
    want=$(secret_key tls.crt | openssl x509 -noout -enddate | cut -d= -f2)
    want=$(date -u -d "$want" +%Y-%m-%dT%H:%M:%SZ)
    for pod in $(kubectl -n "$RELEASE_NS" get pods -l app.kubernetes.io/name=miggate-webhook -o name); do
        [ "$(served_not_after "${pod#pod/}")" = "$want" ] || return 1
    done
}

# The issue's own trial: 90-second certificates, the Secret made immutable, and the webhook's
# account not allowed to delete it (here a policy of the test's refuses it). Before, /readyz
# said ready while the served certificate ran out. Now each replica turns not ready at the
# renewal point, saying why, and, once it may delete, makes the Secret again and is ready.
test_a_secret_that_cannot_be_renewed_turns_the_replicas_unready_before_expiry() {
    trap 'kubectl delete -f "$E2E_WORK/no-delete.yaml" --ignore-not-found >/dev/null 2>&1 || true; upgrade_with' EXIT
    cat > "$E2E_WORK/no-delete.yaml" <<YAML
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: e2e-webhook-may-not-delete
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [DELETE], resources: [secrets]}
  validations:
  - expression: "request.userInfo.username != '$WEBHOOK_USER'"
    message: "e2e: the webhook's account may not delete Secrets"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: e2e-webhook-may-not-delete
spec:
  policyName: e2e-webhook-may-not-delete
  validationActions: [Deny]
YAML
    upgrade_with --set 'webhook.extraArgs={--cert-lifetime=90s}'
    kubectl -n "$RELEASE_NS" delete secret "$CERTS" --wait=true >/dev/null
    until_ok 60 "a 90-second certificate in the Secret" bash -c \
        "kubectl -n $RELEASE_NS get secret $CERTS -o jsonpath='{.data.tls\\.crt}' | base64 -d | openssl x509 -noout -checkend 100 | grep -q 'will expire'"
    until_ok 60 "every replica serving it" serving_the_secrets_certificate
    kubectl create -f "$E2E_WORK/no-delete.yaml" >/dev/null
    until_ok 30 "the webhook's account refused a delete" bash -c \
        "! kubectl --kubeconfig=/dev/null --server=https://$E2E_NODE_IP:$E2E_API_PORT --certificate-authority=$E2E_STATE/pki/ca.crt --token=\$(kubectl -n $RELEASE_NS create token miggate-webhook --duration 10m) -n $RELEASE_NS delete secret $CERTS --dry-run=server"
    as_webhook -n "$RELEASE_NS" get secret "$CERTS" -o json | jq '.immutable = true' |
        as_webhook replace -f - >/dev/null || fail "the webhook's account could not make its Secret immutable"
    # Due at two thirds of 90 s; the readiness probe (every 5 s, twice) follows.
    until_ok 90 "every replica unready" bash -c "! kubectl -n $RELEASE_NS get pods -l app.kubernetes.io/name=miggate-webhook -o jsonpath='{.items[*].status.conditions[?(@.type==\"Ready\")].status}' | grep -q True"
    local pod ip ready
    pod=$(kubectl -n "$RELEASE_NS" get pods -l app.kubernetes.io/name=miggate-webhook -o jsonpath='{.items[0].metadata.name}')
    ip=$(kubectl -n "$RELEASE_NS" get pod "$pod" -o jsonpath='{.status.podIP}')
    ready=$(curl -s --max-time 5 "http://$ip:8080/readyz")
    expect_contains "$ready" '"renewal_overdue": true' "past its renewal point" "immutable" "delete"
    # The replicas said so before the certificate expired.
    secret_key tls.crt | openssl x509 -noout -checkend 0 >/dev/null ||
        fail "the certificate expired before the replicas turned unready"
    kubectl delete -f "$E2E_WORK/no-delete.yaml" >/dev/null
    until_ok 90 "both replicas Ready again" webhook_pods_ready 2
    [ "$(kubectl -n "$RELEASE_NS" get secret "$CERTS" -o jsonpath='{.immutable}')" != true ] ||
        fail "the Secret is still immutable"
}

# A Binding from a listed binder (the scheduler's name) carrying a device map it made up: the
# pod is bound without it.
test_a_listed_binder_cannot_plant_a_device_map() {
    tenant_namespace
    kubectl -n "$TENANT_NS" delete pod planted-map --ignore-not-found --wait=true >/dev/null
    kubectl -n "$TENANT_NS" run planted-map --image="$E2E_PAUSE_IMAGE" --image-pull-policy=Never \
        --overrides='{"spec":{"schedulerName":"nobody"}}' >/dev/null
    printf '{"apiVersion":"v1","kind":"Binding","metadata":{"name":"planted-map","annotations":{"miggate.io/device-map":"GPU-00000000-0000-0000-0000-000000000000=GPU-11111111-1111-1111-1111-111111111111"}},"target":{"apiVersion":"v1","kind":"Node","name":"%s"}}' "$E2E_NODE" > "$E2E_WORK/binding.json"
    local out map
    out=$(kubectl create --as=system:kube-scheduler --as-group=system:authenticated \
        --raw "/api/v1/namespaces/$TENANT_NS/pods/planted-map/binding" -f "$E2E_WORK/binding.json" 2>&1) ||
        fail "the scheduler's Binding refused: $out"
    expect_contains "$out" "removed annotation miggate.io/device-map from the Binding of pod $TENANT_NS/planted-map: only miggate writes it"
    map=$(kubectl -n "$TENANT_NS" get pod planted-map -o jsonpath='{.metadata.annotations.miggate\.io/device-map}')
    [ -z "$map" ] || fail "the pod carries a device map miggate did not write: $map"
    [ "$(kubectl -n "$TENANT_NS" get pod planted-map -o jsonpath='{.spec.nodeName}')" = "$E2E_NODE" ] ||
        fail "the pod is not bound"
    kubectl -n "$TENANT_NS" delete pod planted-map --wait=false >/dev/null
}

# admission.restorePodSelector: the webhook watches only restore pods with those labels, so one
# without them is refused at creation (its binding could not be checked), and one that has them
# keeps them (policy miggate-restore-pod-labels).
test_a_restore_pod_outside_the_watched_selector_is_refused() {
    local out
    trap upgrade_with EXIT
    upgrade_with --set-string 'admission.restorePodSelector.miggate\.io/restore=true'
    out=$(fixture restore-pod.yaml NAME=unlabelled CHECKPOINT=fits MEMORY=64Mi |
        kubectl create --dry-run=server -f - 2>&1) && fail "an unlabelled restore pod was admitted: $out"
    expect_contains "$out" "--restore-pod-selector" "miggate.io/restore=true"
    kubectl -n "$TENANT_NS" delete pod labelled --ignore-not-found --wait=true >/dev/null
    out=$(fixture restore-pod.yaml NAME=labelled CHECKPOINT=fits MEMORY=64Mi |
        kubectl label --local -f - miggate.io/restore=true -o yaml |
        kubectl create -f - 2>&1) || fail "a labelled restore pod was refused: $out"
    refused "the selected label taken off a restore pod" "a restore pod keeps the labels miggate selects restore pods by" \
        kubectl -n "$TENANT_NS" label pod labelled miggate.io/restore-
    kubectl -n "$TENANT_NS" label pod labelled team=ml >/dev/null || fail "another label refused on a restore pod"
    kubectl -n "$TENANT_NS" delete pod labelled --wait=false >/dev/null
}

test_the_node_namespace_runs_only_restricted_daemonset_pods() {
    local out
    refused "a pod made by hand with the agent's account" "runs only the pods of DaemonSets" \
        kubectl -n "$NODE_NS" run by-hand --image="$E2E_PROBE_IMAGE" --dry-run=server \
        --overrides='{"spec":{"serviceAccountName":"miggate-checkpoint-agent","nodeName":"another-node"}}'
    fixture checkpoint-agent.yaml NAMESPACE="$NODE_NS" IMAGE="$E2E_PROBE_IMAGE" |
        sed -e 's/miggate-e2e-agent/miggate-e2e-root/g' -e 's/runAsNonRoot: true/runAsNonRoot: false/' \
            -e 's/runAsUser: 65532/runAsUser: 0/' | kubectl apply -f - >/dev/null
    until_ok 30 "the root DaemonSet's pods refused" bash -c \
        "kubectl -n $NODE_NS get events --field-selector reason=FailedCreate,involvedObject.name=miggate-e2e-root -o jsonpath='{.items[*].message}' | grep -q 'run as non-root'"
    [ -z "$(kubectl -n "$NODE_NS" get pods -l app.kubernetes.io/name=miggate-e2e-root -o name)" ] ||
        fail "a root pod runs in $NODE_NS"
    kubectl -n "$NODE_NS" delete daemonset miggate-e2e-root --wait=false >/dev/null
    refused "a token of the agent's account bound to a node by an admin" "only a kubelet takes one" \
        kubectl -n "$NODE_NS" create token miggate-checkpoint-agent --bound-object-kind Node --bound-object-name "$E2E_NODE"
    refused "a token of the publisher's account" "only a kubelet takes one" \
        kubectl -n "$NODE_NS" create token miggate-publish
    local account
    for account in "$NODE_NS/miggate-checkpoint-agent" "$RELEASE_NS/miggate-webhook"; do
        refused "a token Secret of $account" "a token Secret of $account is refused" kubectl create --dry-run=server -f - <<YAML
apiVersion: v1
kind: Secret
type: kubernetes.io/service-account-token
metadata:
  name: forever
  namespace: ${account%/*}
  annotations:
    kubernetes.io/service-account.name: ${account#*/}
YAML
    done
    out=$(fixture checkpoint.yaml NAME=elsewhere NODE=another-node KERNEL="$(node_kernel)" MEMORY=64Mi MOUNTS='[]' |
        as_agent apply --server-side --field-manager miggate-checkpoint-agent -f - 2>&1) &&
        fail "the agent wrote another node's checkpoint: $out"
    expect_contains "$out" "the checkpoint agent writes and deletes only checkpoints recorded on its own node"
}

# ask_webhook [CURL ARGS...]: a review of a restore pod in the tenant namespace POSTed straight to
# the webhook's Service, as any pod could; prints the answer (fails when there is none).
ask_webhook() {
    local ip host="miggate-webhook.$RELEASE_NS.svc"
    ip=$(kubectl -n "$RELEASE_NS" get service miggate-webhook -o jsonpath='{.spec.clusterIP}')
    kubectl get validatingwebhookconfiguration miggate -o jsonpath='{.webhooks[0].clientConfig.caBundle}' |
        base64 -d > "$E2E_WORK/injected-ca.pem"
    fixture restore-pod.yaml NAME=asked CHECKPOINT=fits MEMORY=16Mi | kubectl create --dry-run=client -o json -f - |
        jq -c --arg ns "$TENANT_NS" '.spec.containers[].resources.limits |= map_values(tostring) | {apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", request: {uid: "e2e", kind: {group: "", version: "v1", kind: "Pod"}, resource: {group: "", version: "v1", resource: "pods"}, namespace: $ns, operation: "CREATE", userInfo: {username: "someone"}, object: .}}' \
            > "$E2E_WORK/review.json"
    curl -sS --max-time 5 --resolve "$host:443:$ip" --cacert "$E2E_WORK/injected-ca.pem" \
        -H 'Content-Type: application/json' --data-binary "@$E2E_WORK/review.json" "$@" "https://$host/validate"
}

# The default install answers whoever reaches the port (the threat model says so); with
# admission.clientCA, the webhook answers only a caller with a certificate of that CA, which the
# API server presents (e2e/cluster.sh gives it one), and restores are still checked.
test_with_a_client_ca_only_the_api_server_is_answered() {
    local out
    out=$(ask_webhook 2>&1) || fail "the default install did not answer a review: $out"
    expect_contains "$out" '"allowed":false' "memory-limit"
    trap upgrade_with EXIT
    upgrade_with --set-file admission.clientCA="$E2E_STATE/pki/webhook-client-ca.crt"
    out=$(ask_webhook 2>&1) && fail "a caller without a client certificate was answered: $out"
    [[ "$out" != *memory-limit* ]] || fail "a caller without a client certificate learnt the checkpoint: $out"
    foreign_ca
    out=$(ask_webhook --cert "$E2E_WORK/foreign/tls.crt" --key "$E2E_WORK/foreign/tls.key" 2>&1) &&
        fail "a caller with a certificate of another CA was answered: $out"
    out=$(fixture restore-pod.yaml NAME=client-ca-refused CHECKPOINT=fits MEMORY=16Mi |
        kubectl create --dry-run=server -f - 2>&1) && fail "a restore that does not fit was admitted: $out"
    expect_contains "$out" "memory-limit"
    out=$(fixture restore-pod.yaml NAME=client-ca-fits CHECKPOINT=fits MEMORY=64Mi |
        kubectl create --dry-run=server -f - 2>&1) || fail "a restore that fits was refused: $out"
}
