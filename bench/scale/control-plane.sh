#!/bin/bash
# A one-node control plane for the scale benchmark: etcd and kube-apiserver on loopback, state
# kept in $WORKDIR across API server restarts.
#
#   control-plane.sh pki               make the CA, the API server's and an admin's certificates
#   control-plane.sh etcd [wipe]       (re)start etcd (wipe: start from empty)
#   control-plane.sh apiserver [FLAG…] (re)start kube-apiserver (SIGKILL of the running one,
#                                      as a crash or a node reboot), wait for its /readyz
#   control-plane.sh stop
#
# Environment: KUBE_APISERVER, ETCD, KUBECTL (paths; kube-apiserver and kubectl of the version
# under test, etcd 3.5 or later for streaming lists), WORKDIR (default /tmp/miggate-scale).
set -euo pipefail
W=${WORKDIR:-/tmp/miggate-scale}
PKI=$W/pki
: "${KUBE_APISERVER:?path to kube-apiserver}" "${ETCD:?path to etcd}" "${KUBECTL:?path to kubectl}"
mkdir -p "$W"

pki() {
  mkdir -p "$PKI"; cd "$PKI"
  [ -f ca.crt ] && return 0
  openssl genrsa -out ca.key 2048 2>/dev/null
  openssl req -x509 -new -nodes -key ca.key -sha256 -days 3650 -subj "/CN=miggate-scale-ca" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" -out ca.crt 2>/dev/null
  sign() {
    openssl genrsa -out "$1.key" 2048 2>/dev/null
    openssl req -new -key "$1.key" -subj "$2" -out "$1.csr" 2>/dev/null
    printf '%b\n' "$3" > "$1.ext"
    openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 365 -sha256 -extfile "$1.ext" -out "$1.crt" 2>/dev/null
    rm -f "$1.csr" "$1.ext"
  }
  sign apiserver "/CN=kube-apiserver" 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost'
  sign admin "/O=system:masters/CN=kubernetes-admin" 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth'
  openssl genrsa -out sa.key 2048 2>/dev/null; openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  local k="$KUBECTL --kubeconfig=$W/admin.kubeconfig"
  $k config set-cluster local --server=https://127.0.0.1:16443 --certificate-authority="$PKI/ca.crt" --embed-certs=true >/dev/null
  $k config set-credentials admin --client-certificate="$PKI/admin.crt" --client-key="$PKI/admin.key" --embed-certs=true >/dev/null
  $k config set-context admin --cluster=local --user=admin >/dev/null
  $k config use-context admin >/dev/null
}

stop_pid() {
  [ -f "$1" ] || return 0
  kill -9 "$(cat "$1")" 2>/dev/null || true
  while kill -0 "$(cat "$1")" 2>/dev/null; do sleep 0.2; done
}

etcd() {
  stop_pid "$W/etcd.pid"
  [ "${1:-}" = wipe ] && rm -rf "$W/etcd"
  mkdir -p "$W/etcd"; chmod 700 "$W/etcd"
  nohup "$ETCD" --name scale --data-dir "$W/etcd" --quota-backend-bytes=8589934592 \
    --listen-client-urls http://127.0.0.1:12379 --advertise-client-urls http://127.0.0.1:12379 \
    --listen-peer-urls http://127.0.0.1:12380 --initial-advertise-peer-urls http://127.0.0.1:12380 \
    --initial-cluster scale=http://127.0.0.1:12380 --initial-cluster-state new > "$W/etcd.log" 2>&1 &
  echo $! > "$W/etcd.pid"
  sleep 2
}

apiserver() {
  stop_pid "$W/apiserver.pid"
  nohup "$KUBE_APISERVER" --bind-address=127.0.0.1 --secure-port=16443 --advertise-address=127.0.0.1 \
    --endpoint-reconciler-type=none --etcd-servers=http://127.0.0.1:12379 --service-cluster-ip-range=10.97.0.0/16 \
    --authorization-mode=Node,RBAC --client-ca-file="$PKI/ca.crt" \
    --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local --service-account-key-file="$PKI/sa.pub" \
    --service-account-signing-key-file="$PKI/sa.key" --api-audiences=https://kubernetes.default.svc.cluster.local \
    --max-requests-inflight=800 --max-mutating-requests-inflight=400 "$@" > "$W/apiserver.log" 2>&1 &
  echo $! > "$W/apiserver.pid"
  for _ in $(seq 3000); do
    "$KUBECTL" --kubeconfig "$W/admin.kubeconfig" get --raw /readyz >/dev/null 2>&1 && return 0
    kill -0 "$(cat "$W/apiserver.pid")" || { tail "$W/apiserver.log"; exit 1; }
    sleep 0.2
  done
  echo "kube-apiserver not ready; see $W/apiserver.log" >&2; exit 1
}

cmd=${1:?pki, etcd, apiserver or stop}; shift
case $cmd in
  pki) pki ;;
  etcd) etcd "$@" ;;
  apiserver) apiserver "$@" ;;
  stop) stop_pid "$W/apiserver.pid"; stop_pid "$W/etcd.pid" ;;
  *) echo "unknown command $cmd" >&2; exit 2 ;;
esac
