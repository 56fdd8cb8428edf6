//! The webhook's NetworkPolicy: who may open a connection to its pods.
//!
//! The admission port stays open to every source: the API server calls it, and where the API
//! server's connections come from differs by distribution (control-plane node addresses on a
//! kubeadm cluster, a provider's range or a konnectivity agent on managed ones), so no
//! selector written here would be right everywhere; the webhook bounds what any client can
//! cost it instead (deadlines, a connection cap). The plain-HTTP health port (`/healthz`,
//! `/readyz`, `/metrics`) is for the kubelet, whose probes come from the pod's own node and are
//! always allowed by NetworkPolicy, and for Prometheus in the monitoring namespace: nothing
//! else reaches it.

use k8s_openapi::api::networking::v1::NetworkPolicy;
use serde_json::json;

use super::names::{NAMESPACE, WEBHOOK};
use super::{Object, typed};
use crate::error::Error;

/// The file under `deploy/`.
pub const FILE: &str = "network-policy.yaml";
/// The namespace whose pods may scrape the webhook's metrics (change it with a kustomize patch).
pub const MONITORING_NAMESPACE: &str = "monitoring";

/// The NetworkPolicy selecting the webhook's pods.
pub(super) fn webhook() -> Result<Object, Error> {
    typed::<NetworkPolicy>(
        FILE,
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": WEBHOOK, "namespace": NAMESPACE,
            "labels": {"app.kubernetes.io/name": WEBHOOK, "app.kubernetes.io/part-of": "miggate"}},
        "spec": {
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": WEBHOOK}},
            "policyTypes": ["Ingress"],
            "ingress": [
                // The API server, from wherever the distribution sends it.
                {"ports": [{"port": "https", "protocol": "TCP"}]},
                // Prometheus; the kubelet's probes come from the node and need no rule.
                {"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": MONITORING_NAMESPACE}}}],
                 "ports": [{"port": "health", "protocol": "TCP"}]},
            ]}}),
    )
}
