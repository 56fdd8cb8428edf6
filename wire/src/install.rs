//! The names of the install's namespaces, workloads and configurations, as the chart
//! (`charts/miggate`) makes them with its defaults: what the webhook, the publisher and
//! `miggate doctor` look for. The chart is their source; `crds/tests/chart.rs` holds the rendered
//! objects to these names.

/// The namespace of the webhook (and, by default, the checkpoint agent's service account). It
/// enforces the `restricted` Pod Security level, which the webhook meets.
pub const NAMESPACE: &str = "miggate-system";
/// The namespace of the publisher DaemonSet. Its pods read boot recovery's state through a
/// read-only `hostPath`, which every Pod Security level but `privileged` forbids, so they live
/// apart from the webhook and this namespace enforces `privileged`.
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
pub const CERT_SECRET: &str = crate::webhook::CERT_SECRET;
/// The Secret cert-manager issues the serving certificate into (`certificates.mode:
/// cert-manager`).
pub const CERT_MANAGER_SECRET: &str = "miggate-webhook-tls";
/// The ValidatingWebhookConfiguration.
pub const VALIDATING_CONFIGURATION: &str = "miggate";
/// The MutatingWebhookConfigurations: the summary, steering and the device map.
pub const MUTATING_CONFIGURATIONS: [&str; 3] = ["miggate-summary", "miggate-steer", "miggate-device-map"];
/// The annotation on the webhook's pod template that carries the client CA's digest, so a new
/// CA rolls the replicas (`webhook.clientCA`).
pub const CLIENT_CA_DIGEST: &str = "miggate.io/client-ca-sha256";
