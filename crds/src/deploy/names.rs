//! The names of the install's namespaces and workloads, which every generated object refers
//! to (RBAC subjects, the network policy's selector, the webhook's service): a leaf, so the
//! objects and the network policy both read them without reading each other.

/// The namespace of the webhook (and, by default, the checkpoint agent's service account). It
/// enforces the `restricted` Pod Security level, which the webhook meets.
pub const NAMESPACE: &str = "miggate-system";
/// The namespace of the publisher DaemonSet. Its pods read boot recovery's state through a
/// read-only `hostPath`, which every Pod Security level but `privileged` forbids, so they live
/// apart from the webhook and this namespace enforces `privileged`. The tests hold the
/// publisher to `restricted` in every other respect.
pub const NODE_NAMESPACE: &str = "miggate-node";
/// The webhook's name: its Deployment, Service, ServiceAccount and ClusterRole.
pub const WEBHOOK: &str = "miggate-webhook";
/// The publisher's name: its DaemonSet, ServiceAccount and ClusterRole.
pub const PUBLISHER: &str = "miggate-publish";
/// The host directory where boot recovery leaves its state, which the publisher mounts
/// read-only (and the node-namespace policy allows as its only host path).
pub const RECOVERY_HOST_PATH: &str = "/run/miggate";

/// The Secret the webhook keeps its own CA and serving certificate in (self-managed
/// certificates, the default).
pub const CERT_SECRET: &str = miggate_wire::webhook::CERT_SECRET;
/// The Secret cert-manager issues the serving certificate into (`certificates: cert-manager`).
pub const CERT_MANAGER_SECRET: &str = "miggate-webhook-tls";
/// The ValidatingWebhookConfiguration.
pub const VALIDATING_CONFIGURATION: &str = "miggate";
/// The MutatingWebhookConfigurations: the summary, steering and the device map.
pub const MUTATING_CONFIGURATIONS: [&str; 3] = ["miggate-summary", "miggate-steer", "miggate-device-map"];
