# shellcheck shell=bash
# shellcheck disable=SC2034 # every name here is used by the scripts that source this file
# The e2e cluster's one home for its names, addresses and paths: sourced by e2e/cluster.sh and
# by the e2e tests (e2e/run.sh). Every address is on this machine: the node's is put on the
# loopback interface, pods live on a bridge of this machine, and the Service range is routed
# back to it.

E2E_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Built binaries and images, kept between runs (never in the checkout).
E2E_CACHE=${MIGGATE_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/miggate-e2e}
# The running cluster's data (etcd, certificates, containerd, the kubelet's pods).
E2E_STATE=${MIGGATE_E2E_STATE:-/var/lib/miggate-e2e}
# Sockets and process ids.
E2E_RUN=/run/miggate-e2e
# What a user and the tests take: the admin kubeconfig, helm, kubectl, the components' logs.
E2E_OUT=$E2E_REPO/target/e2e
# The API server's audit log (restore pods' creations and bindings, with miggate's annotations).
E2E_AUDIT_LOG=$E2E_OUT/logs/audit.log

E2E_K8S_VERSION=v1.36.3
E2E_NODE=miggate-e2e
E2E_NODE_IP=10.87.0.1
E2E_POD_CIDR=10.88.0.0/16
E2E_SERVICE_CIDR=10.96.0.0/16
E2E_API_SERVICE_IP=10.96.0.1
E2E_API_PORT=6443
E2E_BRIDGE=miggate0
E2E_CONTAINERD_SOCK=$E2E_RUN/containerd/containerd.sock
E2E_PAUSE_IMAGE=registry.k8s.io/pause:3.10
E2E_PROBE_IMAGE=localhost/miggate-e2e/kubectl:$E2E_K8S_VERSION
# A static busybox (Debian's busybox-static) runs the recorded nvidia-smi in the publisher's
# container, which has no shell of its own.
E2E_SMI_DIR=$E2E_STATE/nvidia-smi
# The namespace miggate's webhook is installed in: the API server presents its webhook client
# certificate (pki/webhook-client.crt, of pki/webhook-client-ca.crt) to the Services there.
E2E_WEBHOOK_NS=miggate-system

export KUBECONFIG=$E2E_OUT/kubeconfig
PATH=$E2E_OUT/bin:$PATH
