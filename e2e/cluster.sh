#!/usr/bin/env bash
# A one-node Kubernetes cluster on this machine for the e2e tests, built from registry
# packages only:
#
#   e2e/cluster.sh up       build (cached), start, wait until a pod reaches the API server
#   e2e/cluster.sh down     stop what `up` started, unmount, remove the cluster's data
#   e2e/cluster.sh status   say what runs; exit 0 only when the node is Ready
#   e2e/cluster.sh tools    only build (cached) the binaries: the chart's tests run this helm
#                           and promtool
#
# kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy and kubectl of one
# release, etcd, helm and promtool are built from their Go modules, pinned in
# e2e/tools/*/go.mod, into $MIGGATE_E2E_CACHE (default ~/.cache/miggate-e2e); containerd, runc
# and the CNI plugins come from Debian. The pause image is built from e2e/images/pause.c, and
# miggate's image by image/build.sh; both are imported into the node's containerd, as nothing
# can be pulled.
#
# `up` leaves target/e2e/kubeconfig (cluster-admin), target/e2e/bin/{helm,kubectl,promtool} and
# the components' logs in target/e2e/logs. It is idempotent: what runs is left running. Needs
# root.
set -euo pipefail
# shellcheck source=e2e/env.sh
. "$(dirname "$0")/env.sh"
cd "$E2E_REPO"

pki=$E2E_STATE/pki
logs=$E2E_OUT/logs
components=(etcd containerd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)

say() { printf '== %s\n' "$*"; }
die() {
    printf 'e2e/cluster.sh: %s\n' "$*" >&2
    exit 1
}

# --- prerequisites --------------------------------------------------------------------------

install_packages() {
    local missing=() pair
    for pair in containerd:containerd runc:runc iptables:iptables conntrack:conntrack \
        buildah:buildah openssl:openssl gcc:gcc busybox:busybox-static ip:iproute2 curl:curl \
        sysctl:procps pgrep:procps strip:binutils jq:jq; do
        command -v "${pair%%:*}" >/dev/null || missing+=("${pair#*:}")
    done
    [ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
    if ((${#missing[@]})); then
        say "apt-get install ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
    command -v go >/dev/null || die "go is not installed: the cluster's binaries build from Go modules (apt-get install golang-go, or Go 1.26 from go.dev)"
}

# The version a binary reports, which release builds set at link time: the API server's
# /version is what helm checks a chart's kubeVersion against.
version_flags() {
    local dir=$1 module=$2 v
    case "$module" in
        k8s)
            v=$(cd "$dir" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
            local pkg
            for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
                printf -- '-X %s.gitVersion=%s -X %s.gitTreeState=clean ' "$pkg" "$v" "$pkg"
            done
            ;;
        helm)
            v=$(cd "$dir" && go list -m -f '{{.Version}}' helm.sh/helm/v4)
            printf -- '-X helm.sh/helm/v4/internal/version.version=%s' "$v"
            ;;
        prometheus)
            # The module's v0.MMM.P is Prometheus M.MM.P (v0.316.0 is 3.16.0).
            v=$(cd "$dir" && go list -m -f '{{.Version}}' github.com/prometheus/prometheus)
            v=${v#v0.}
            printf -- '-X github.com/prometheus/common/version.Version=%s.%s.%s' \
                $((10#${v%%.*} / 100)) $((10#${v%%.*} % 100)) "${v#*.}"
            ;;
    esac
}

# Builds each e2e/tools/<module>'s `tool`s into the cache, again only when its go.mod, go.sum or
# the Go toolchain changed.
build_tools() {
    mkdir -p "$E2E_CACHE/bin"
    local dir module stamp tools
    for dir in e2e/tools/*/; do
        module=$(basename "$dir")
        stamp=$( (cat "$dir/go.mod" "$dir/go.sum"; go version; declare -f version_flags build_tools) | sha256sum | cut -c1-16)
        if [ "$(cat "$E2E_CACHE/bin/.$module" 2>/dev/null)" = "$stamp" ]; then
            continue
        fi
        tools=$(awk '/^tool \(/ {t = 1; next} t && /^\)/ {t = 0} t {print $1} /^tool [^(]/ {print $2}' "$dir/go.mod")
        say "go build ($module): $(echo "$tools" | tr '\n' ' ')"
        local started=$SECONDS tool ldflags
        ldflags=$(version_flags "$dir" "$module")
        for tool in $tools; do
            case "$tool" in
                go.etcd.io/etcd/server/v3) out=etcd ;;
                *) out=$(basename "$tool") ;;
            esac
            # One `go build` per binary keeps the peak memory of the links apart; the packages
            # they share are compiled once, in Go's build cache.
            (cd "$dir" && CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags="-s -w $ldflags" \
                -o "$E2E_CACHE/bin/$out" "$tool")
        done
        echo "$stamp" > "$E2E_CACHE/bin/.$module"
        say "go build ($module) took $((SECONDS - started)) s"
    done
    mkdir -p "$E2E_OUT/bin"
    ln -sf "$E2E_CACHE/bin/helm" "$E2E_OUT/bin/helm"
    ln -sf "$E2E_CACHE/bin/kubectl" "$E2E_OUT/bin/kubectl"
    ln -sf "$E2E_CACHE/bin/promtool" "$E2E_OUT/bin/promtool"
}

# --- images ---------------------------------------------------------------------------------

buildah_() { buildah --storage-driver vfs "$@"; }

# scratch_image BINARY REPOSITORY TAG ARCHIVE: an image FROM scratch holding one static binary as
# its entry point, written as an OCI archive whose reference is the bare tag.
scratch_image() {
    local binary=$1 repository=$2 tag=$3 archive=$4 ctr
    ctr=$(buildah_ from scratch)
    buildah_ copy --quiet "$ctr" "$binary" "/$(basename "$binary")" >/dev/null
    buildah_ config --entrypoint "[\"/$(basename "$binary")\"]" --user 65532:65532 "$ctr"
    buildah_ commit --quiet "$ctr" "$repository:$tag" >/dev/null
    buildah_ rm "$ctr" >/dev/null
    rm -f "$archive"
    buildah_ push --quiet "$repository:$tag" "oci-archive:$archive:$tag"
}

ctr_() { ctr --address "$E2E_CONTAINERD_SOCK" -n k8s.io "$@"; }

# import_image ARCHIVE IMAGE: into the node's containerd as IMAGE (REPOSITORY:TAG, the TAG being
# the archive's reference), pinned so that the kubelet never collects it.
import_image() {
    local archive=$1 image=$2
    ctr_ images import --base-name "${image%:*}" "$archive" >/dev/null ||
        die "could not import $archive into the node's containerd"
    # The list is read whole before it is searched: `grep -q` stopping at the first match would
    # end ctr with SIGPIPE, failing the pipeline under pipefail.
    local images
    images=$(ctr_ images ls -q)
    grep -qx "$image" <<< "$images" || die "$archive holds no image $image"
    ctr_ images label "$image" io.cri-containerd.pinned=pinned >/dev/null
}

build_images() {
    local images=$E2E_CACHE/images stamp
    mkdir -p "$images"
    stamp=$(cat e2e/images/pause.c "$E2E_CACHE/bin/.k8s" | sha256sum | cut -c1-16)
    if [ "$(cat "$images/.stamp" 2>/dev/null)" != "$stamp" ]; then
        say "pause and probe images"
        gcc -Os -static -o "$images/pause" e2e/images/pause.c
        strip "$images/pause"
        scratch_image "$images/pause" "${E2E_PAUSE_IMAGE%:*}" "${E2E_PAUSE_IMAGE##*:}" "$images/pause.oci.tar"
        cp "$E2E_CACHE/bin/kubectl" "$images/kubectl"
        scratch_image "$images/kubectl" "${E2E_PROBE_IMAGE%:*}" "${E2E_PROBE_IMAGE##*:}" "$images/probe.oci.tar"
        echo "$stamp" > "$images/.stamp"
    fi
    import_image "$images/pause.oci.tar" "$E2E_PAUSE_IMAGE"
    import_image "$images/probe.oci.tar" "$E2E_PROBE_IMAGE"

    local version
    version=$(sed -n 's/^appVersion: "\(.*\)"$/\1/p' charts/miggate/Chart.yaml)
    if [ -n "${MIGGATE_E2E_IMAGE:-}" ]; then
        [ -f "$MIGGATE_E2E_IMAGE" ] || die "MIGGATE_E2E_IMAGE=$MIGGATE_E2E_IMAGE is not a file"
    else
        say "image/build.sh"
        bash image/build.sh > "$logs/image-build.log" 2>&1 ||
            die "image/build.sh failed: see $logs/image-build.log"
    fi
    import_image "${MIGGATE_E2E_IMAGE:-target/image/miggate.oci.tar}" "localhost/miggate:$version"
}

# --- certificates and kubeconfigs -----------------------------------------------------------

# cert NAME CN O SANS: a key and a certificate signed by the cluster's CA.
cert() {
    local name=$1 cn=$2 org=$3 sans=$4 subject="/CN=$2"
    [ -f "$pki/$name.crt" ] && return
    [ -n "$org" ] && subject="/O=$org/CN=$cn"
    openssl req -new -newkey rsa:2048 -nodes -keyout "$pki/$name.key" -subj "$subject" \
        -out "$pki/$name.csr" 2>/dev/null
    {
        echo "basicConstraints=critical,CA:FALSE"
        echo "keyUsage=critical,digitalSignature,keyEncipherment"
        if [ -n "$sans" ]; then
            echo "extendedKeyUsage=serverAuth,clientAuth"
            echo "subjectAltName=$sans"
        else
            echo "extendedKeyUsage=clientAuth"
        fi
    } > "$pki/$name.ext"
    openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" \
        -CAcreateserial -days 30 -sha256 -extfile "$pki/$name.ext" -out "$pki/$name.crt" 2>/dev/null
}

kubeconfig() {
    local name=$1 file=$2
    kubectl config set-cluster e2e --server="https://$E2E_NODE_IP:$E2E_API_PORT" \
        --certificate-authority="$pki/ca.crt" --embed-certs --kubeconfig="$file" >/dev/null
    kubectl config set-credentials "$name" --client-certificate="$pki/$name.crt" \
        --client-key="$pki/$name.key" --embed-certs --kubeconfig="$file" >/dev/null
    kubectl config set-context e2e --cluster=e2e --user="$name" --kubeconfig="$file" >/dev/null
    kubectl config use-context e2e --kubeconfig="$file" >/dev/null
}

make_pki() {
    mkdir -p "$pki"
    chmod 0700 "$pki"
    if [ ! -f "$pki/ca.crt" ]; then
        openssl req -x509 -new -newkey rsa:2048 -nodes -keyout "$pki/ca.key" -days 30 \
            -subj "/CN=miggate-e2e-ca" -out "$pki/ca.crt" 2>/dev/null
    fi
    if [ ! -f "$pki/sa.key" ]; then
        openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
        openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
    fi
    cert apiserver kube-apiserver "" "IP:$E2E_NODE_IP,IP:$E2E_API_SERVICE_IP,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost"
    cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters ""
    cert admin kubernetes-admin system:masters ""
    cert controller-manager system:kube-controller-manager "" ""
    cert scheduler system:kube-scheduler "" ""
    cert kubelet "system:node:$E2E_NODE" system:nodes ""
    cert kube-proxy system:kube-proxy "" ""
    mkdir -p "$E2E_STATE/conf" "$E2E_OUT"
    local who
    for who in admin controller-manager scheduler kubelet kube-proxy; do
        [ -f "$E2E_STATE/conf/$who.kubeconfig" ] || kubeconfig "$who" "$E2E_STATE/conf/$who.kubeconfig"
    done
    install -m 0600 "$E2E_STATE/conf/admin.kubeconfig" "$E2E_OUT/kubeconfig"
    webhook_client
    audit_policy
}

# The client certificate the API server presents to admission webhooks in the release
# namespace, from a CA of its own (a chart installed with admission.clientCA set to it answers
# only the API server), named in the admission configuration's kubeconfig by the Services' host.
webhook_client() {
    local ca=$pki/webhook-client-ca name=$pki/webhook-client
    if [ ! -f "$ca.crt" ]; then
        openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$ca.key" \
            -days 30 -subj "/CN=miggate-e2e-webhook-client-ca" -out "$ca.crt" 2>/dev/null
    fi
    if [ ! -f "$name.crt" ]; then
        openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$name.key" \
            -subj "/CN=kube-apiserver-webhook-client" -out "$name.csr" 2>/dev/null
        printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature" \
            "extendedKeyUsage=clientAuth" > "$name.ext"
        openssl x509 -req -in "$name.csr" -CA "$ca.crt" -CAkey "$ca.key" -CAcreateserial -days 30 \
            -sha256 -extfile "$name.ext" -out "$name.crt" 2>/dev/null
    fi
    put "$E2E_STATE/conf/admission-webhooks.kubeconfig" <<EOF2
apiVersion: v1
kind: Config
users:
- name: "*.$E2E_WEBHOOK_NS.svc"
  user:
    client-certificate: $name.crt
    client-key: $name.key
EOF2
    put "$E2E_STATE/conf/admission.yaml" <<EOF2
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ValidatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: $E2E_STATE/conf/admission-webhooks.kubeconfig
- name: MutatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: $E2E_STATE/conf/admission-webhooks.kubeconfig
EOF2
}

# The API server's audit policy: restore pods' creations and bindings at Metadata, the level
# that keeps admission webhooks' audit annotations (docs/webhook.md shows the same policy),
# into $E2E_AUDIT_LOG; nothing else is logged.
audit_policy() {
    put "$E2E_STATE/conf/audit-policy.yaml" <<EOF2
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [create]
  resources:
  - group: ""
    resources: [pods, pods/binding, bindings]
- level: None
EOF2
}

# put FILE: writes stdin to FILE only when it differs; kube-proxy exits when its configuration
# file changes, and an idempotent `up` must leave what runs alone.
put() {
    local file=$1 new
    new=$(cat)
    if [ ! -f "$file" ] || [ "$(cat "$file")" != "$new" ]; then
        printf '%s\n' "$new" > "$file"
    fi
}

# --- node network ---------------------------------------------------------------------------

node_network() {
    # The node's address, on the loopback interface: the kubelet refuses a loopback address
    # (127/8) and any address not on an interface, and this one is reached from nowhere else.
    # (Each listing read whole before it is searched, as in import_image.)
    local have
    have=$(ip addr show dev lo)
    grep -q "inet $E2E_NODE_IP/" <<< "$have" || ip addr add "$E2E_NODE_IP/32" dev lo
    # The Service range is this machine's: kube-proxy's rules rewrite the addresses in use, and a
    # packet for any other is answered here, never sent out of the machine.
    have=$(ip route show table local)
    grep -q "^local $E2E_SERVICE_CIDR " <<< "$have" ||
        ip route add local "$E2E_SERVICE_CIDR" dev lo table local
    sysctl -qw net.ipv4.ip_forward=1
    mkdir -p "$E2E_STATE/cni/net.d"
    put "$E2E_STATE/cni/net.d/10-miggate-e2e.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "miggate-e2e",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$E2E_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$E2E_POD_CIDR"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "$E2E_STATE/cni/ipam"
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}},
    {"type": "loopback"}
  ]
}
EOF
}

# --- components -----------------------------------------------------------------------------

pid_of() {
    local pid
    pid=$(cat "$E2E_RUN/$1.pid" 2>/dev/null) || return 1
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

any_running() {
    local name
    for name in "${components[@]}"; do
        pid_of "$name" >/dev/null && return 0
    done
    return 1
}

# start NAME COMMAND...: in its own session, logging to target/e2e/logs/NAME.log.
start() {
    local name=$1
    shift
    if pid_of "$name" >/dev/null; then
        return
    fi
    mkdir -p "$E2E_RUN" "$logs"
    setsid "$@" >> "$logs/$name.log" 2>&1 < /dev/null &
    echo $! > "$E2E_RUN/$name.pid"
}

# wait_for WHAT SECONDS COMMAND...: until COMMAND succeeds.
wait_for() {
    local what=$1 limit=$2 started=$SECONDS
    shift 2
    until "$@" >/dev/null 2>&1; do
        if ((SECONDS - started > limit)); then
            die "$what not ready after ${limit} s (logs: $logs)"
        fi
        sleep 0.5
    done
}

start_etcd() {
    start etcd "$E2E_CACHE/bin/etcd" --name e2e --data-dir "$E2E_STATE/etcd" \
        --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
        --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
        --initial-cluster e2e=http://127.0.0.1:2380 --listen-metrics-urls http://127.0.0.1:2381 \
        --unsafe-no-fsync --log-level warn
    wait_for etcd 60 curl -sf http://127.0.0.1:2381/health
}

start_containerd() {
    mkdir -p "$E2E_STATE/containerd" "$E2E_RUN/containerd"
    put "$E2E_STATE/containerd/config.toml" <<EOF
version = 2
root = "$E2E_STATE/containerd/root"
state = "$E2E_RUN/containerd/state"
[grpc]
  address = "$E2E_CONTAINERD_SOCK"
[ttrpc]
  address = "$E2E_CONTAINERD_SOCK.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$E2E_PAUSE_IMAGE"
  # Lowering a process's oom_score_adj is refused on these machines; without this every sandbox
  # fails to start.
  restrict_oom_score_adj = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$E2E_STATE/cni/net.d"
EOF
    start containerd containerd --config "$E2E_STATE/containerd/config.toml"
    wait_for containerd 60 ctr --address "$E2E_CONTAINERD_SOCK" version
}

start_apiserver() {
    start kube-apiserver "$E2E_CACHE/bin/kube-apiserver" \
        --etcd-servers=http://127.0.0.1:2379 \
        --bind-address="$E2E_NODE_IP" --advertise-address="$E2E_NODE_IP" \
        --secure-port="$E2E_API_PORT" \
        --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
        --client-ca-file="$pki/ca.crt" \
        --kubelet-client-certificate="$pki/apiserver-kubelet-client.crt" \
        --kubelet-client-key="$pki/apiserver-kubelet-client.key" \
        --kubelet-preferred-address-types=InternalIP \
        --service-account-issuer=https://kubernetes.default.svc.cluster.local \
        --service-account-key-file="$pki/sa.pub" \
        --service-account-signing-key-file="$pki/sa.key" \
        --service-cluster-ip-range="$E2E_SERVICE_CIDR" \
        --authorization-mode=Node,RBAC \
        --enable-admission-plugins=NodeRestriction \
        --admission-control-config-file="$E2E_STATE/conf/admission.yaml" \
        --audit-policy-file="$E2E_STATE/conf/audit-policy.yaml" \
        --audit-log-path="$E2E_AUDIT_LOG" --audit-log-maxsize=100 --audit-log-maxbackup=1 \
        --allow-privileged=true \
        --profiling=false
    wait_for kube-apiserver 120 kubectl get --raw /readyz
}

start_controller_manager() {
    local conf=$E2E_STATE/conf/controller-manager.kubeconfig
    start kube-controller-manager "$E2E_CACHE/bin/kube-controller-manager" \
        --kubeconfig="$conf" --authentication-kubeconfig="$conf" --authorization-kubeconfig="$conf" \
        --bind-address=127.0.0.1 --secure-port=10257 \
        --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
        --use-service-account-credentials=true \
        --cluster-signing-cert-file="$pki/ca.crt" --cluster-signing-key-file="$pki/ca.key" \
        --service-cluster-ip-range="$E2E_SERVICE_CIDR" \
        --leader-elect=false --profiling=false
}

start_scheduler() {
    local conf=$E2E_STATE/conf/scheduler.kubeconfig
    start kube-scheduler "$E2E_CACHE/bin/kube-scheduler" \
        --kubeconfig="$conf" --authentication-kubeconfig="$conf" --authorization-kubeconfig="$conf" \
        --bind-address=127.0.0.1 --secure-port=10259 --leader-elect=false --profiling=false
}

start_kubelet() {
    mkdir -p "$E2E_STATE/kubelet"
    put "$E2E_STATE/conf/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $E2E_NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://$E2E_CONTAINERD_SOCK
# These machines run cgroup v1 (refused by default since 1.35) without systemd.
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
# Imported images cannot be pulled again: never collect them, and evict only when the disk is
# really full.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  imagefs.available: 1%
  nodefs.inodesFree: 1%
serializeImagePulls: false
shutdownGracePeriod: 0s
EOF
    start kubelet "$E2E_CACHE/bin/kubelet" --config="$E2E_STATE/conf/kubelet.yaml" \
        --kubeconfig="$E2E_STATE/conf/kubelet.kubeconfig" \
        --hostname-override="$E2E_NODE" --node-ip="$E2E_NODE_IP" \
        --root-dir="$E2E_STATE/kubelet" --cert-dir="$E2E_STATE/kubelet/pki"
}

start_proxy() {
    put "$E2E_STATE/conf/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $E2E_STATE/conf/kube-proxy.kubeconfig
hostnameOverride: $E2E_NODE
mode: iptables
clusterCIDR: $E2E_POD_CIDR
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: ["$E2E_NODE_IP/32"]
iptables:
  # The API server's calls to a Service reach a pod from the bridge's address, and a pod's call
  # to a Service on the same bridge is answered back through the node.
  masqueradeAll: true
  localhostNodePorts: false
# Leave the machine's conntrack settings as they are.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
EOF
    start kube-proxy "$E2E_CACHE/bin/kube-proxy" --config="$E2E_STATE/conf/kube-proxy.yaml"
}

node_ready() {
    [ "$(kubectl get node "$E2E_NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}

# A pod on the pod network asks the API server for its version through the `kubernetes`
# Service, with its own service account's token.
probe_pod() {
    kubectl -n default delete pod miggate-e2e-probe --ignore-not-found --wait=true >/dev/null
    wait_for "the default service account" 60 kubectl -n default get serviceaccount default
    kubectl -n default run miggate-e2e-probe --image="$E2E_PROBE_IMAGE" --restart=Never \
        --image-pull-policy=IfNotPresent --env=HOME=/tmp \
        --overrides='{"spec":{"securityContext":{"runAsNonRoot":true,"runAsUser":65532}}}' \
        -- get --raw /version >/dev/null
    local started=$SECONDS phase
    while :; do
        phase=$(kubectl -n default get pod miggate-e2e-probe -o jsonpath='{.status.phase}')
        case "$phase" in
            Succeeded) break ;;
            Failed)
                kubectl -n default logs miggate-e2e-probe >&2 || true
                die "the probe pod could not reach the API server through the kubernetes Service"
                ;;
        esac
        if ((SECONDS - started > 120)); then
            kubectl -n default describe pod miggate-e2e-probe >&2 || true
            die "the probe pod did not finish in 120 s (phase ${phase:-none})"
        fi
        sleep 1
    done
    local ip version
    ip=$(kubectl -n default get pod miggate-e2e-probe -o jsonpath='{.status.podIP}')
    version=$(kubectl -n default logs miggate-e2e-probe | tr -d ' \n' | grep -o '"gitVersion":"[^"]*"')
    kubectl -n default delete pod miggate-e2e-probe --wait=false >/dev/null
    say "pod $ip reached the API server through $E2E_API_SERVICE_IP:443 ($version)"
}

# The recorded nvidia-smi the e2e suite hands to the publisher (test-only; a GPU node's NVIDIA
# runtime provides the real tool): a static busybox runs a stand-in that prints a recording.
smi_stand_in() {
    local dir=$E2E_SMI_DIR
    mkdir -p "$dir/recordings"
    cp "$(command -v busybox)" "$dir/sh"
    cp -r testdata/nvidia-smi/replay/h100-mig-host/. "$dir/recordings/"
    cat > "$dir/nvidia-smi" <<EOF
#!$dir/sh
# nvidia-smi stand-in for the e2e cluster: prints the recording of the command it is asked for.
case "\$1" in
  -L) rec=list.txt ;;
  --version) rec=version.txt ;;
  --query-gpu=*) rec=query.csv ;;
  mig) case "\$2" in -lci) rec=lci.txt ;; -lgi) rec=lgi.txt ;; *) rec=unknown ;; esac ;;
  *) rec=unknown ;;
esac
f=$dir/recordings/\$rec
if [ ! -f "\$f" ]; then echo "nvidia-smi stand-in: no recording of '\$*'" >&2; exit 2; fi
while IFS= read -r line || [ -n "\$line" ]; do printf '%s\n' "\$line"; done < "\$f"
if [ -f "\$f.exit" ]; then read -r code < "\$f.exit"; exit "\$code"; fi
exit 0
EOF
    chmod 0755 "$dir" "$dir/recordings" "$dir/sh" "$dir/nvidia-smi"
    chmod -R a+rX "$dir/recordings"
}

up() {
    [ "$(id -u)" = 0 ] || die "needs root (containerd, the kubelet and the pod network)"
    local started=$SECONDS
    install_packages
    # A cluster whose processes are all gone (the machine restarted, a run killed) left mounts,
    # pods' network namespaces and data behind: start from nothing rather than from those.
    if [ -d "$E2E_STATE" ] && ! any_running; then
        say "clearing what a stopped cluster left"
        down
    fi
    mkdir -p "$logs" "$E2E_STATE" "$E2E_RUN"
    build_tools
    make_pki
    node_network
    smi_stand_in
    say "start the control plane"
    start_etcd
    start_containerd
    start_apiserver
    start_controller_manager
    start_scheduler
    build_images
    start_kubelet
    start_proxy
    wait_for "node $E2E_NODE" 180 node_ready
    probe_pod
    say "up in $((SECONDS - started)) s: export KUBECONFIG=$E2E_OUT/kubeconfig PATH=$E2E_OUT/bin:\$PATH"
}

# --- down -----------------------------------------------------------------------------------

stop() {
    local name=$1 pid
    pid=$(pid_of "$name") || { rm -f "$E2E_RUN/$name.pid"; return 0; }
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.25
    done
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
    rm -f "$E2E_RUN/$name.pid"
}

down() {
    [ "$(id -u)" = 0 ] || die "needs root"
    stop kubelet
    stop kube-proxy
    # The pods' containers outlive the kubelet; containerd stops them.
    if pid_of containerd >/dev/null; then
        local task
        for task in $(ctr_ tasks ls -q 2>/dev/null); do
            ctr_ tasks kill -s KILL "$task" >/dev/null 2>&1 || true
        done
        sleep 1
        for task in $(ctr_ tasks ls -q 2>/dev/null); do
            ctr_ tasks delete -f "$task" >/dev/null 2>&1 || true
        done
    fi
    local shim
    for shim in $(pgrep -f "containerd-shim.*-address $E2E_CONTAINERD_SOCK" || true); do
        kill -KILL "$shim" 2>/dev/null || true
    done
    local name
    for name in kube-scheduler kube-controller-manager kube-apiserver containerd etcd; do
        stop "$name"
    done
    # Whatever still runs from the cluster's binaries or configuration (its pid file lost).
    local stray
    for stray in $(pgrep -f "^($E2E_CACHE/bin/|containerd --config $E2E_STATE/)" || true); do
        kill -KILL "$stray" 2>/dev/null || true
    done
    [ -x "$E2E_CACHE/bin/kube-proxy" ] && "$E2E_CACHE/bin/kube-proxy" --cleanup >/dev/null 2>&1 || true
    # What the kubelet and containerd mounted: volumes, the pods' /dev/shm, overlay roots,
    # network namespaces.
    local mnt
    for mnt in $(awk -v s="$E2E_STATE" -v r="$E2E_RUN" '$2 ~ "^(" s "|" r "|/run/netns|/var/run/netns)/" {print $2}' /proc/mounts | sort -r); do
        umount -l "$mnt" 2>/dev/null || true
    done
    local ns
    for ns in $(ip netns list 2>/dev/null | awk '$1 ~ /^cni-/ {print $1}'); do
        ip netns delete "$ns" 2>/dev/null || true
    done
    ip link delete "$E2E_BRIDGE" 2>/dev/null || true
    # The bridge plugin's masquerade rules (none with ipMasq off, but a crashed run may leave any).
    local rule
    iptables -t nat -S POSTROUTING 2>/dev/null | { grep -- '-j CNI-' || true; } | sed 's/^-A/-D/' |
        while read -r rule; do eval "iptables -t nat $rule" 2>/dev/null || true; done
    # The kubelet's canary chains (kube-proxy --cleanup took its own).
    local table
    for table in nat filter mangle; do
        iptables -t "$table" -F KUBE-KUBELET-CANARY 2>/dev/null && iptables -t "$table" -X KUBE-KUBELET-CANARY 2>/dev/null || true
    done
    ip route del local "$E2E_SERVICE_CIDR" dev lo table local 2>/dev/null || true
    ip addr del "$E2E_NODE_IP/32" dev lo 2>/dev/null || true
    rm -rf "$E2E_STATE" "$E2E_RUN" "$E2E_OUT/kubeconfig"
    say "down"
}

# --- status ---------------------------------------------------------------------------------

status() {
    local name pid ok=0
    for name in "${components[@]}"; do
        if pid=$(pid_of "$name"); then
            printf '%-24s running (pid %s)\n' "$name" "$pid"
        else
            printf '%-24s stopped\n' "$name"
            ok=1
        fi
    done
    if ((ok == 0)) && node_ready; then
        printf '%-24s Ready\n' "node $E2E_NODE"
        echo "KUBECONFIG=$E2E_OUT/kubeconfig"
    else
        printf '%-24s not Ready\n' "node $E2E_NODE"
        ok=1
    fi
    return $ok
}

main() {
    case "${1:-}" in
        up) up ;;
        down) down ;;
        status) status ;;
        tools)
            command -v go >/dev/null || die "go is not installed: the binaries build from Go modules (apt-get install golang-go)"
            build_tools
            say "built: $E2E_OUT/bin/helm, $E2E_OUT/bin/kubectl, $E2E_OUT/bin/promtool (and the cluster's, in $E2E_CACHE/bin)"
            ;;
        *)
            echo "usage: e2e/cluster.sh up | down | status | tools" >&2
            exit 2
            ;;
    esac
}

# On one line, read whole before it runs: a script edited while `up` runs is not read again.
main "$@"; exit $?
