# shellcheck shell=bash
# What the e2e tests share: assertions, waits, the checkpoint agent's identity and the streams
# of restore-pod creations that the availability tests run under. Sourced by e2e/run.sh.

RELEASE=miggate
RELEASE_NS=$E2E_WEBHOOK_NS
NODE_NS=miggate-node
TENANT_NS=e2e-ml
FIXTURES=$E2E_REPO/e2e/fixtures
E2E_WORK=$E2E_OUT/work

# The values the suite installs with: the one test-only value hands the publisher a recorded
# nvidia-smi.
install_values() {
    printf '%s\n' --set "publisher.nvidiaSmiHostPath=$E2E_SMI_DIR"
}

# upgrade_with [HELM ARGS...]: the release upgraded to the suite's values plus ARGS, every
# other value back to the chart's default (never --reuse-values, which keeps a map value that
# a later --set of null or {} does not take back), waiting for the rollout.
upgrade_with() {
    local values out
    mapfile -t values < <(install_values)
    out=$(helm upgrade "$RELEASE" charts/miggate -n "$RELEASE_NS" --wait --timeout 5m "${values[@]}" "$@" 2>&1) ||
        fail "helm upgrade $*: $out"
    until_ok 120 "only the new replicas left" bash -c \
        "[ \$(kubectl -n $RELEASE_NS get pods -l app.kubernetes.io/name=miggate-webhook -o name | wc -l) -eq 2 ]"
}

fail() {
    printf '    %s\n' "$*" >&2
    exit 1
}

# until_ok SECONDS WHAT COMMAND...: retries COMMAND every half second until it succeeds.
until_ok() {
    local limit=$1 what=$2 started=$SECONDS
    shift 2
    until "$@" >/dev/null 2>&1; do
        ((SECONDS - started > limit)) && fail "$what: not so after ${limit} s"
        sleep 0.5
    done
}

# expect_contains TEXT NEEDLE...: each NEEDLE appears in TEXT.
expect_contains() {
    local text=$1 needle
    shift
    for needle in "$@"; do
        [[ "$text" == *"$needle"* ]] || fail "expected '$needle' in: $text"
    done
}

# fixture NAME [VAR=VALUE...]: e2e/fixtures/NAME with each @VAR@ replaced.
fixture() {
    local text pair
    text=$(cat "$FIXTURES/$1")
    shift
    for pair in "$@"; do
        text=${text//@${pair%%=*}@/${pair#*=}}
    done
    printf '%s\n' "$text"
}

# The node's facts as the publisher records them, for checkpoints taken on it.
node_kernel() { uname -r; }

# kubectl as the checkpoint agent on this node, run inside a pod of a stand-in agent DaemonSet
# (fixtures/checkpoint-agent.yaml): its token is the kubelet's, bound to the pod on this node,
# which the writers' policy reads the node from. No other way to take that account's token is
# left open (policy miggate-node-tokens).
as_agent() {
    if ! kubectl -n "$NODE_NS" get daemonset miggate-e2e-agent >/dev/null 2>&1; then
        fixture checkpoint-agent.yaml NAMESPACE="$NODE_NS" IMAGE="$E2E_PROBE_IMAGE" |
            kubectl apply -f - >/dev/null
    fi
    until_ok 60 "the stand-in checkpoint agent Running" bash -c \
        "kubectl -n $NODE_NS get pods -l app.kubernetes.io/name=miggate-e2e-agent -o jsonpath='{.items[*].status.phase}' | grep -qx Running"
    kubectl -n "$NODE_NS" exec -i daemonset/miggate-e2e-agent -- /kubectl "$@"
}

# remove_miggate: the cluster as before any install (a run stopped half way leaves one behind).
remove_miggate() {
    if helm status "$RELEASE" -n "$RELEASE_NS" >/dev/null 2>&1; then
        helm uninstall "$RELEASE" -n "$RELEASE_NS" --wait --timeout 3m >/dev/null
    fi
    kubectl delete -k "$E2E_REPO/deploy" --ignore-not-found --wait=true >/dev/null 2>&1 || true
    kubectl delete namespace "$TENANT_NS" "$RELEASE_NS" "$NODE_NS" --ignore-not-found --wait=true >/dev/null
    kubectl delete crd -l app.kubernetes.io/part-of=miggate --ignore-not-found --wait=true >/dev/null
}

tenant_namespace() {
    kubectl create namespace "$TENANT_NS" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
    until_ok 60 "service account default in $TENANT_NS" kubectl -n "$TENANT_NS" get serviceaccount default
}

# checkpoint NAME [VAR=VALUE...]: writes GpuCheckpoint NAME in the tenant namespace, as the agent.
checkpoint() {
    local name=$1
    shift
    fixture checkpoint.yaml NAME="$name" NODE="$E2E_NODE" KERNEL="$(node_kernel)" "$@" |
        as_agent apply --server-side --field-manager miggate-checkpoint-agent -f - >/dev/null
}

# create: `kubectl create -f -`, quiet unless it fails (miggate's warnings on an admitted
# restore go to the output only then).
create() {
    local out
    out=$(kubectl create -f - 2>&1) || fail "kubectl create: $out"
}

pod_phase() { kubectl -n "$1" get pod "$2" -o jsonpath='{.status.phase}'; }

webhook_pods_ready() {
    local want=${1:-2} ready
    ready=$(kubectl -n "$RELEASE_NS" get pods -l app.kubernetes.io/name=miggate-webhook \
        -o jsonpath='{range .items[*]}{.metadata.deletionTimestamp}{"/"}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
        grep -cx '/True')
    [ "$ready" -ge "$want" ]
}

# --- streams of restore-pod creations -------------------------------------------------------
#
# Each stream creates restore pods with a server-side dry run, alternately one the webhook
# allows and one it refuses, until stopped. A call is answered when the API server stored it
# (dry run) or miggate refused it; anything else (the webhook unreachable, a TLS failure, a
# timeout) is a failed call, and its message is kept.

STREAMS=4

streams_start() {
    rm -rf "$E2E_WORK/streams"
    mkdir -p "$E2E_WORK/streams"
    fixture restore-pod.yaml NAME=stream-fits CHECKPOINT=fits MEMORY=64Mi > "$E2E_WORK/streams/fits.yaml"
    fixture restore-pod.yaml NAME=stream-refused CHECKPOINT=fits MEMORY=16Mi > "$E2E_WORK/streams/refused.yaml"
    local i
    for i in $(seq 1 "$STREAMS"); do
        stream "$i" &
        echo $! >> "$E2E_WORK/streams/pids"
    done
}

stream() {
    local i=$1 n=0 out file
    local dir=$E2E_WORK/streams
    while [ ! -f "$dir/stop" ]; do
        n=$((n + 1))
        if ((n % 2)); then file=$dir/fits.yaml; else file=$dir/refused.yaml; fi
        if out=$(kubectl -n "$TENANT_NS" create --dry-run=server -f "$file" -o name 2>&1); then
            echo allowed >> "$dir/$i.log"
        elif [[ "$out" == *'denied the request: miggate:'* ]]; then
            echo refused >> "$dir/$i.log"
        else
            echo failed >> "$dir/$i.log"
            printf '%s %s\n' "$(date +%T.%N)" "$out" >> "$dir/failures"
            # When, and whether the Service's address refused the connection, for
            # streams_stop's crash window.
            local refused=other
            [[ "$out" == *'connect: connection refused'* ]] && refused=refused
            printf '%s %s\n' "$(date +%s.%N)" "$refused" >> "$dir/failure-times"
        fi
    done
}

# streams_stop [SINCE SECONDS]: stops the streams and fails unless every call was answered
# (and some were allowed and some refused). With SINCE (an epoch time) and SECONDS, calls whose
# connection the Service's address refused within SECONDS of SINCE may fail too: what a crashed
# replica costs before its endpoint is withdrawn or it is back.
streams_stop() {
    local since=${1:-0} seconds=${2:--1} dir=$E2E_WORK/streams
    touch "$dir/stop"
    local pids
    mapfile -t pids < "$dir/pids"
    wait "${pids[@]}" 2>/dev/null || true
    local allowed refused failed outside
    allowed=$(cat "$dir"/[0-9]*.log 2>/dev/null | grep -cx allowed || true)
    refused=$(cat "$dir"/[0-9]*.log 2>/dev/null | grep -cx refused || true)
    failed=$(cat "$dir"/[0-9]*.log 2>/dev/null | grep -cx failed || true)
    outside=$(awk -v s="$since" -v w="$seconds" '$2 != "refused" || $1 < s || $1 > s + w' \
        "$dir/failure-times" 2>/dev/null | wc -l)
    printf '    %s calls: %s allowed, %s refused, %s failed' \
        "$((allowed + refused + failed))" "$allowed" "$refused" "$failed"
    ((seconds >= 0)) && printf ' (%s of them outside %s s of the kill or not a refused connection)' "$outside" "$seconds"
    echo
    if ((outside > 0)); then
        head -n 5 "$dir/failures" >&2
        fail "$outside calls failed"
    fi
    ((allowed > 0 && refused > 0)) || fail "the streams made too few calls to judge"
}
