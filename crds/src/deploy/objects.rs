//! The objects themselves. Each is written as the JSON an operator would read, then read as
//! its typed kind ([`typed`]), so only fields the kind has survive, and the tests check that
//! none was lost on the way.

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Namespace, Secret, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use miggate_wire::webhook as defaults;
use serde_json::{Value, json};

use super::cert_manager::{Certificate, Issuer};
use super::names::{
    CERT_MANAGER_SECRET, CERT_SECRET, MUTATING_CONFIGURATIONS, NAMESPACE, NODE_NAMESPACE, PUBLISHER,
    RECOVERY_HOST_PATH, VALIDATING_CONFIGURATION, WEBHOOK,
};
use super::{Certificates, Config, Object, typed};
use crate::GROUP;
use crate::error::{DeployProblem, Error};

/// How long the API server waits for the webhook's answer (`timeoutSeconds`), above the
/// webhook's own request deadline so a refusal in words arrives before the API server gives up.
const WEBHOOK_TIMEOUT_SECONDS: u64 = 5;
const _: () = assert!(defaults::REQUEST_DEADLINE.as_secs() < WEBHOOK_TIMEOUT_SECONDS);

/// The webhook pod's grace period after SIGTERM: above its drain.
const WEBHOOK_GRACE_SECONDS: u64 = 30;
/// How long a stopping replica keeps serving before it is told to stop: the pod leaves the
/// Service's endpoints when it starts terminating, and until kube-proxy (or the API server's
/// own endpoint routing) has caught up, new connections still reach it. Stopping at once
/// refuses them, and with failure policy Fail each refused connection is a refused restore.
const WEBHOOK_PRESTOP_SECONDS: u64 = 5;
const _: () = assert!(WEBHOOK_PRESTOP_SECONDS + defaults::DRAIN.as_secs() < WEBHOOK_GRACE_SECONDS);

/// The restore-pod webhook's match condition: only pods naming a checkpoint reach it, a
/// `GpuCheckpoint` by `miggate.io/restore-from` or the Go peer's `PodSnapshot` by
/// `nvidia.com/restore-from`.
pub const RESTORE_MATCH: &str = "has(object.metadata.annotations) && ('miggate.io/restore-from' in object.metadata.annotations || 'nvidia.com/restore-from' in object.metadata.annotations)";
/// The binding webhook's match condition: a `pods/binding` CREATE (how the scheduler places
/// a pod) or one of the legacy `bindings` resource, which places a pod the same way.
pub const BINDING_MATCH: &str = "request.subResource == 'binding' || request.resource.resource == 'bindings'";
/// The steering webhook's match condition: a restore pod that asks for steering with
/// `miggate.io/steer: "true"`. Nothing else is ever sent to `/mutate`.
pub const STEER_MATCH: &str = "has(object.metadata.annotations) && ('miggate.io/restore-from' in object.metadata.annotations || 'nvidia.com/restore-from' in object.metadata.annotations) && 'miggate.io/steer' in object.metadata.annotations && object.metadata.annotations['miggate.io/steer'] == 'true'";
/// The publisher policy's rule: a GpuNode write is allowed only for the node the writing
/// service account's token was bound to (the kubelet puts the pod's node name in the token;
/// Kubernetes 1.30+ passes it as `userInfo.extra`).
pub const PUBLISHER_NODE_RULE: &str = "has(request.userInfo.extra) && 'authentication.kubernetes.io/node-name' in request.userInfo.extra && object.metadata.name in request.userInfo.extra['authentication.kubernetes.io/node-name']";
/// The checkpoint policy's rule, with the agent's service account user name put in: only it
/// creates or updates GpuCheckpoints (anyone RBAC allows may delete one; see
/// [`CHECKPOINT_NODE_RULE`] for the agent's own deletes).
pub const CHECKPOINT_AGENT_RULE: &str = "request.userInfo.username == '{agent}'";
/// The checkpoint policy's node rule: the agent writes and deletes only checkpoints recorded on
/// the node its token is bound to (`spec.manifest.host.nodeName` against the token's node), as
/// the publisher writes only its own node's GpuNode; a token bound to no pod on a node writes
/// none. Judged from the new object on CREATE and UPDATE and from the stored one on UPDATE and
/// DELETE, so an agent can neither re-point another node's checkpoint at its own node nor
/// delete it. `object` is null on DELETE and `oldObject` on CREATE: each is read only behind
/// the operation that has it.
pub const CHECKPOINT_NODE_RULE: &str = "has(request.userInfo.extra) && 'authentication.kubernetes.io/node-name' in request.userInfo.extra && (request.operation == 'DELETE' || (has(object.spec.manifest.host) && has(object.spec.manifest.host.nodeName) && object.spec.manifest.host.nodeName in request.userInfo.extra['authentication.kubernetes.io/node-name'])) && (request.operation == 'CREATE' || (has(oldObject.spec.manifest.host) && has(oldObject.spec.manifest.host.nodeName) && oldObject.spec.manifest.host.nodeName in request.userInfo.extra['authentication.kubernetes.io/node-name']))";
/// The checkpoint policy's rule that a checkpoint's node, once recorded, stays: an update may
/// not remove or change `spec.manifest.host.nodeName`, whoever writes it.
pub const CHECKPOINT_NODE_FIXED_RULE: &str = "request.operation != 'UPDATE' || !has(oldObject.spec.manifest.host.nodeName) || (has(object.spec.manifest.host.nodeName) && object.spec.manifest.host.nodeName == oldObject.spec.manifest.host.nodeName)";

const FILE_NAMESPACE: &str = "namespace.yaml";
const FILE_CRDS: &str = "crds.yaml";
const FILE_WEBHOOK: &str = "webhook.yaml";
const FILE_CERTS: &str = "certificates.yaml";
const FILE_PUBLISHER: &str = "publisher.yaml";
const FILE_AGENT: &str = "checkpoint-agent.yaml";
const FILE_CONFIG: &str = "webhook-configuration.yaml";

fn labels(component: &str) -> Value {
    json!({
        "app.kubernetes.io/name": component,
        "app.kubernetes.io/part-of": "miggate",
    })
}

fn meta(name: &str, component: &str) -> Value {
    meta_in(NAMESPACE, name, component)
}

fn meta_in(namespace: &str, name: &str, component: &str) -> Value {
    json!({"name": name, "namespace": namespace, "labels": labels(component)})
}

/// A namespace enforcing Pod Security `level`. `warn` and `audit` name the same level, so an
/// apply prints no warning for a workload the namespace admits.
fn namespace(name: &str, level: &str) -> Result<Object, Error> {
    typed::<Namespace>(
        FILE_NAMESPACE,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": name,
        "labels": {
            "app.kubernetes.io/part-of": "miggate",
            "pod-security.kubernetes.io/enforce": level,
            "pod-security.kubernetes.io/warn": level,
            "pod-security.kubernetes.io/audit": level,
        }}}),
    )
}

fn cluster_meta(name: &str, component: &str) -> Value {
    json!({"name": name, "labels": labels(component)})
}

/// The restricted Pod Security profile's container settings: no root, no writes to the
/// image, no capabilities, no privilege escalation, the runtime's seccomp profile.
fn container_security() -> Value {
    json!({
        "allowPrivilegeEscalation": false,
        "readOnlyRootFilesystem": true,
        "runAsNonRoot": true,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    })
}

fn pod_security() -> Value {
    json!({
        "runAsNonRoot": true,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "seccompProfile": {"type": "RuntimeDefault"},
    })
}

fn service_account_user(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

pub(super) fn all(config: &Config) -> Result<Vec<Object>, Error> {
    let mut out = vec![
        namespace(NAMESPACE, "restricted")?,
        namespace(NODE_NAMESPACE, "privileged")?,
    ];
    for crd in crate::crds() {
        let value = serde_json::to_value(&crd).map_err(DeployProblem::Json)?;
        out.push(typed::<crate::CustomResourceDefinition>(FILE_CRDS, value)?);
    }
    out.extend(webhook(config)?);
    out.push(super::network_policy::webhook(&config.api_server_cidrs)?);
    if config.certificates == Certificates::CertManager {
        out.extend(certificates()?);
    }
    out.extend(publisher(config)?);
    out.extend(checkpoint_agent(config)?);
    out.extend(super::policies::all(config)?);
    if config.certificates == Certificates::SelfManaged {
        out.extend(super::webhook_account::all()?);
    }
    if config.waivers_need_permission {
        out.extend(super::waivers::waivers()?);
    }
    // The registrations last, so the webhook they name exists before any pod is sent to it;
    // the validating one very last, after the opt-in steering and the device map.
    out.push(summary_configuration(&config.certificates)?);
    out.push(steering_configuration(&config.certificates)?);
    out.push(device_map_configuration(&config.certificates)?);
    out.push(webhook_configuration(&config.certificates)?);
    Ok(out)
}

fn webhook(config: &Config) -> Result<Vec<Object>, Error> {
    let read = ["get", "list", "watch"];
    let mut rules = vec![
        json!({"apiGroups": [GROUP], "resources": ["gpucheckpoints", "gpunodes"], "verbs": read}),
        json!({"apiGroups": [""], "resources": ["pods", "nodes"], "verbs": read}),
        json!({"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices", "resourceclaims"], "verbs": read}),
        // The Go peer's restore references: read only, never written.
        json!({"apiGroups": [miggate_wire::peer::GROUP],
         "resources": [miggate_wire::peer::POD_SNAPSHOTS, miggate_wire::peer::POD_SNAPSHOT_CONTENTS], "verbs": read}),
    ];
    if config.certificates == Certificates::SelfManaged {
        // The CA injected into miggate's own configurations, by name: list and watch carry a
        // field selector on the name, which RBAC then authorizes by resourceNames.
        rules.push(json!({"apiGroups": ["admissionregistration.k8s.io"], "resources": ["validatingwebhookconfigurations"],
            "resourceNames": [VALIDATING_CONFIGURATION], "verbs": ["get", "list", "watch", "patch"]}));
        rules.push(json!({"apiGroups": ["admissionregistration.k8s.io"], "resources": ["mutatingwebhookconfigurations"],
            "resourceNames": MUTATING_CONFIGURATIONS, "verbs": ["get", "list", "watch", "patch"]}));
    }
    let mut out = vec![
        typed::<ServiceAccount>(
            FILE_WEBHOOK,
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(WEBHOOK, WEBHOOK)}),
        )?,
        typed::<ClusterRole>(
            FILE_WEBHOOK,
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": cluster_meta(WEBHOOK, WEBHOOK),
            "rules": rules}),
        )?,
        typed::<ClusterRoleBinding>(
            FILE_WEBHOOK,
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": cluster_meta(WEBHOOK, WEBHOOK),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": WEBHOOK},
                "subjects": [{"kind": "ServiceAccount", "name": WEBHOOK, "namespace": NAMESPACE}]}),
        )?,
        typed::<Service>(
            FILE_WEBHOOK,
            json!({"apiVersion": "v1", "kind": "Service", "metadata": meta(WEBHOOK, WEBHOOK),
            "spec": {
                "selector": {"app.kubernetes.io/name": WEBHOOK},
                "ports": [
                    {"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"},
                    {"name": "metrics", "port": defaults::HEALTH_PORT, "targetPort": "health", "protocol": "TCP"},
                ]}}),
        )?,
        typed::<Deployment>(FILE_WEBHOOK, webhook_deployment(config))?,
        typed::<PodDisruptionBudget>(
            FILE_WEBHOOK,
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta(WEBHOOK, WEBHOOK),
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app.kubernetes.io/name": WEBHOOK}}}}),
        )?,
    ];
    if config.certificates == Certificates::SelfManaged {
        out.extend(certificate_secret()?);
    }
    Ok(out)
}

/// The Secret the webhook keeps its certificates in, and the Role that lets it: read, update,
/// watch and delete that one Secret (deleted to make it again when it cannot be written:
/// immutable, another type), and create Secrets in its namespace (to recreate it; RBAC cannot
/// limit create by name, policy `miggate-webhook-certs` holds it to that one). Shipped empty, so `helm uninstall`
/// and `kubectl delete` take it with the rest; the webhook fills it, and a re-apply, which
/// names no data, leaves what it wrote.
fn certificate_secret() -> Result<Vec<Object>, Error> {
    Ok(vec![
        typed::<Secret>(
            FILE_WEBHOOK,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": meta(CERT_SECRET, WEBHOOK), "type": "Opaque"}),
        )?,
        typed::<Role>(
            FILE_WEBHOOK,
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": meta(CERT_SECRET, WEBHOOK),
            "rules": [
                {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [CERT_SECRET],
                 "verbs": ["get", "list", "watch", "update", "delete"]},
                {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
            ]}),
        )?,
        typed::<RoleBinding>(
            FILE_WEBHOOK,
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": meta(CERT_SECRET, WEBHOOK),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": CERT_SECRET},
                "subjects": [{"kind": "ServiceAccount", "name": WEBHOOK, "namespace": NAMESPACE}]}),
        )?,
    ])
}

/// The webhook's certificate flags and volumes, by where its certificate comes from.
fn certificate_args(certificates: &Certificates) -> (Vec<String>, Value, Value) {
    let files = |secret: &str| {
        (
            vec![
                "--tls-cert=/tls/tls.crt".to_string(),
                "--tls-key=/tls/tls.key".to_string(),
            ],
            json!([{"name": "tls", "mountPath": "/tls", "readOnly": true}]),
            json!([{"name": "tls", "secret": {"secretName": secret}}]),
        )
    };
    match certificates {
        Certificates::SelfManaged => {
            let mut args = vec![format!("--tls-secret={NAMESPACE}/{CERT_SECRET}")];
            for name in service_dns_names() {
                args.push(format!("--tls-dns-name={name}"));
            }
            args.push(format!("--inject-ca-into=validating/{VALIDATING_CONFIGURATION}"));
            for name in MUTATING_CONFIGURATIONS {
                args.push(format!("--inject-ca-into=mutating/{name}"));
            }
            (args, json!([]), json!([]))
        }
        Certificates::CertManager => files(CERT_MANAGER_SECRET),
        Certificates::Provided { secret, .. } => files(secret),
    }
}

/// The names the API server calls the Service by.
fn service_dns_names() -> [String; 2] {
    [
        format!("{WEBHOOK}.{NAMESPACE}.svc"),
        format!("{WEBHOOK}.{NAMESPACE}.svc.cluster.local"),
    ]
}

fn webhook_deployment(config: &Config) -> Value {
    let selector = json!({"app.kubernetes.io/name": WEBHOOK});
    let (tls_args, mounts, volumes) = certificate_args(&config.certificates);
    let mut args = vec![
        "webhook".to_string(),
        format!("--listen={}", defaults::LISTEN),
        format!("--health-listen={}", defaults::HEALTH_LISTEN),
    ];
    args.extend(tls_args);
    args.push("--store=kube".to_string());
    // The device map goes only into these schedulers' Bindings, as the binding policy allows.
    for binder in &config.binders {
        args.push(format!("--binder={binder}"));
    }
    // Sized to the 256Mi memory limit below (docs/webhook.md#limits).
    args.push(format!("--max-connections={}", defaults::MAX_CONNECTIONS));
    let mut deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta(WEBHOOK, WEBHOOK),
    "spec": {
        "replicas": 2,
        "selector": {"matchLabels": selector},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
        "template": {
            "metadata": {"labels": labels(WEBHOOK)},
            "spec": {
                "serviceAccountName": WEBHOOK,
                // Failure policy Fail: while no replica answers, no restore pod is created
                // anywhere, so the webhook is not the first to be preempted.
                "priorityClassName": "system-cluster-critical",
                // Above the webhook's drain after SIGTERM.
                "terminationGracePeriodSeconds": WEBHOOK_GRACE_SECONDS,
                "securityContext": pod_security(),
                "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                    "weight": 100,
                    "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": selector}}}]}},
                "topologySpreadConstraints": [{
                    "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "ScheduleAnyway",
                    "labelSelector": {"matchLabels": selector}}],
                "containers": [{
                    "name": "webhook",
                    "image": config.image,
                    "imagePullPolicy": "IfNotPresent",
                    "args": args,
                    "env": [{"name": "MIGGATE_LOG_FORMAT", "value": "json"}],
                    "ports": [
                        {"name": "https", "containerPort": defaults::ADMISSION_PORT, "protocol": "TCP"},
                        {"name": "health", "containerPort": defaults::HEALTH_PORT, "protocol": "TCP"},
                    ],
                    "livenessProbe": {"httpGet": {"path": "/healthz", "port": "health"},
                        "periodSeconds": 10, "failureThreshold": 3, "timeoutSeconds": 2},
                    "readinessProbe": {"httpGet": {"path": "/readyz", "port": "health"},
                        "periodSeconds": 5, "failureThreshold": 2, "timeoutSeconds": 2},
                    "lifecycle": {"preStop": {"sleep": {"seconds": WEBHOOK_PRESTOP_SECONDS}}},
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "64Mi"},
                        "limits": {"cpu": "1", "memory": "256Mi"},
                    },
                    "securityContext": container_security(),
                    "volumeMounts": mounts,
                }],
                "volumes": volumes,
            }}}});
    // Self-managed certificates need no volume: the webhook reads its Secret through the API.
    if let Some(pod) = deployment
        .pointer_mut("/spec/template/spec")
        .and_then(Value::as_object_mut)
        && pod["volumes"].as_array().is_some_and(Vec::is_empty)
    {
        pod.remove("volumes");
        if let Some(c) = pod["containers"][0].as_object_mut() {
            c.remove("volumeMounts");
        }
    }
    deployment
}

fn certificates() -> Result<Vec<Object>, Error> {
    let issuer = |name: &str, spec: Value| json!({"apiVersion": "cert-manager.io/v1", "kind": "Issuer", "metadata": meta(name, WEBHOOK), "spec": spec});
    let key = json!({"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"});
    Ok(vec![
        typed::<Issuer>(
            FILE_CERTS,
            issuer("miggate-selfsigned", json!({"selfSigned": {}})),
        )?,
        typed::<Certificate>(
            FILE_CERTS,
            json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate", "metadata": meta("miggate-ca", WEBHOOK),
                "spec": {"isCA": true, "commonName": "miggate-ca", "secretName": "miggate-ca",
                    "duration": "87600h", "privateKey": key,
                    "issuerRef": {"name": "miggate-selfsigned", "kind": "Issuer", "group": "cert-manager.io"}}}),
        )?,
        typed::<Issuer>(
            FILE_CERTS,
            issuer("miggate-ca", json!({"ca": {"secretName": "miggate-ca"}})),
        )?,
        typed::<Certificate>(
            FILE_CERTS,
            json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate", "metadata": meta(WEBHOOK, WEBHOOK),
                "spec": {
                    "commonName": format!("{WEBHOOK}.{NAMESPACE}.svc"),
                    "dnsNames": [format!("{WEBHOOK}.{NAMESPACE}.svc"), format!("{WEBHOOK}.{NAMESPACE}.svc.cluster.local")],
                    "secretName": CERT_MANAGER_SECRET,
                    "duration": "2160h", "renewBefore": "360h",
                    "usages": ["digital signature", "server auth"],
                    "privateKey": key,
                    "issuerRef": {"name": "miggate-ca", "kind": "Issuer", "group": "cert-manager.io"}}}),
        )?,
    ])
}

fn publisher(config: &Config) -> Result<Vec<Object>, Error> {
    let user = service_account_user(NODE_NAMESPACE, PUBLISHER);
    Ok(vec![
        typed::<ServiceAccount>(
            FILE_PUBLISHER,
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta_in(NODE_NAMESPACE, PUBLISHER, PUBLISHER)}),
        )?,
        typed::<ClusterRole>(
            FILE_PUBLISHER,
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": cluster_meta(PUBLISHER, PUBLISHER),
            "rules": [
                // Server-side apply is a PATCH; it creates the object the first time.
                // list and watch: between rounds the publisher watches its own GpuNode (a field
                // selector on its name), so one deleted or edited by another writer, or an API
                // server back from an outage, is answered at once rather than a round later.
                // RBAC cannot scope them to one name; GpuNodes hold inventories, no secrets.
                {"apiGroups": [GROUP], "resources": ["gpunodes"], "verbs": ["get", "list", "watch", "create", "patch"]},
                {"apiGroups": [GROUP], "resources": ["gpunodes/status"], "verbs": ["get", "patch"]},
            ]}),
        )?,
        typed::<ClusterRoleBinding>(
            FILE_PUBLISHER,
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": cluster_meta(PUBLISHER, PUBLISHER),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": PUBLISHER},
                "subjects": [{"kind": "ServiceAccount", "name": PUBLISHER, "namespace": NODE_NAMESPACE}]}),
        )?,
        typed::<ValidatingAdmissionPolicy>(
            FILE_PUBLISHER,
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                "metadata": cluster_meta("miggate-publish-own-node", PUBLISHER),
                "spec": {
                    "failurePolicy": "Fail",
                    "matchConstraints": {"resourceRules": [{
                        "apiGroups": [GROUP], "apiVersions": ["*"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["gpunodes", "gpunodes/status"]}]},
                    "matchConditions": [{"name": "publisher-only",
                        "expression": format!("request.userInfo.username == '{user}'")}],
                    "validations": [{
                        "expression": PUBLISHER_NODE_RULE,
                        "messageExpression": "'miggate-publish may write only the GpuNode of its own node, not ' + object.metadata.name",
                        "reason": "Forbidden"}]}}),
        )?,
        typed::<ValidatingAdmissionPolicyBinding>(
            FILE_PUBLISHER,
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": cluster_meta("miggate-publish-own-node", PUBLISHER),
                "spec": {"policyName": "miggate-publish-own-node", "validationActions": ["Deny"]}}),
        )?,
        typed::<DaemonSet>(FILE_PUBLISHER, publisher_daemonset(config))?,
    ])
}

fn publisher_daemonset(config: &Config) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta_in(NODE_NAMESPACE, PUBLISHER, PUBLISHER),
    "spec": {
        "selector": {"matchLabels": {"app.kubernetes.io/name": PUBLISHER}},
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%"}},
        "template": {
            "metadata": {"labels": labels(PUBLISHER)},
            "spec": {
                "serviceAccountName": PUBLISHER,
                // No runtimeClassName: the NVIDIA container runtime, as the nodes' default or
                // through a class added where the cluster has one (the chart looks for
                // `nvidia`), injects the driver's libraries and device nodes
                // (NVIDIA_VISIBLE_DEVICES=all) without the pod requesting a GPU, so the
                // publisher reads every GPU and takes none from workloads. A class the cluster
                // lacks would leave the DaemonSet without pods.
                "nodeSelector": {"nvidia.com/gpu.present": "true"},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "priorityClassName": "system-node-critical",
                "terminationGracePeriodSeconds": 30,
                "securityContext": pod_security(),
                "containers": [{
                    "name": "publish",
                    "image": config.image,
                    "imagePullPolicy": "IfNotPresent",
                    "args": ["publish", "--node", "$(NODE_NAME)"],
                    "env": [
                        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
                        {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"},
                        {"name": "MIGGATE_LOG_FORMAT", "value": "json"},
                    ],
                    "resources": {
                        "requests": {"cpu": "20m", "memory": "32Mi"},
                        "limits": {"cpu": "200m", "memory": "128Mi"},
                    },
                    "securityContext": container_security(),
                    "volumeMounts": [{"name": "recovery-state", "mountPath": "/run/miggate", "readOnly": true}],
                }],
                "volumes": [{"name": "recovery-state",
                    "hostPath": {"path": RECOVERY_HOST_PATH, "type": "DirectoryOrCreate"}}],
            }}}})
}

fn checkpoint_agent(config: &Config) -> Result<Vec<Object>, Error> {
    let agent = service_account_user(&config.checkpoint_agent_namespace, &config.checkpoint_agent_name);
    let name = "miggate-checkpoint-writer";
    let component = "miggate-checkpoint-agent";
    Ok(vec![
        // Created here so the name the RBAC and the policy trust exists; the agent's own
        // workload (a DaemonSet of the checkpointing stack) runs as it.
        typed::<ServiceAccount>(
            FILE_AGENT,
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta_in(
                &config.checkpoint_agent_namespace, &config.checkpoint_agent_name, component)}),
        )?,
        typed::<ClusterRole>(
            FILE_AGENT,
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": cluster_meta(name, "miggate-checkpoint-agent"),
            "rules": [
                // delete: the agent removes the record of a checkpoint it pruned from its node
                // (the node rule holds it to its own node's); it deletes by name, so no
                // deletecollection.
                {"apiGroups": [GROUP], "resources": ["gpucheckpoints"],
                 "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
                {"apiGroups": [GROUP], "resources": ["gpucheckpoints/status"],
                 "verbs": ["get", "update", "patch"]},
            ]}),
        )?,
        typed::<ClusterRoleBinding>(
            FILE_AGENT,
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": cluster_meta(name, "miggate-checkpoint-agent"),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": config.checkpoint_agent_name,
                    "namespace": config.checkpoint_agent_namespace}]}),
        )?,
        typed::<ValidatingAdmissionPolicy>(
            FILE_AGENT,
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                "metadata": cluster_meta("miggate-checkpoint-writers", "miggate-checkpoint-agent"),
                "spec": {
                    "failurePolicy": "Fail",
                    // DELETE too: the agent deletes only its own node's checkpoints. Anyone else
                    // RBAC lets delete one (an admin, the namespace controller emptying a
                    // namespace) still may: a missing checkpoint only refuses restores.
                    "matchConstraints": {"resourceRules": [{
                        "apiGroups": [GROUP], "apiVersions": ["*"],
                        "operations": ["CREATE", "UPDATE", "DELETE"],
                        "resources": ["gpucheckpoints", "gpucheckpoints/status"]}]},
                    // The garbage collector updates owner references of any object.
                    "matchConditions": [{"name": "not-the-garbage-collector",
                        "expression": "request.userInfo.username != 'system:serviceaccount:kube-system:generic-garbage-collector'"}],
                    "validations": [{
                        "expression": format!("request.operation == 'DELETE' || {}", CHECKPOINT_AGENT_RULE.replace("{agent}", &agent)),
                        "message": format!("admission trusts GpuCheckpoints: only {agent} may write them"),
                        "reason": "Forbidden"}, {
                        "expression": CHECKPOINT_NODE_FIXED_RULE,
                        "message": "spec.manifest.host.nodeName is fixed once written: a checkpoint stays the record of the node it was taken on; write a new checkpoint for another node",
                        "messageExpression": "'spec.manifest.host.nodeName is fixed once written: a checkpoint stays the record of the node it was taken on (' + oldObject.spec.manifest.host.nodeName + '), which cannot become ' + (has(object.spec.manifest.host.nodeName) ? object.spec.manifest.host.nodeName : 'unset') + '; write a new checkpoint for another node'",
                        "reason": "Forbidden"}, {
                        "expression": format!("request.userInfo.username != '{agent}' || ({CHECKPOINT_NODE_RULE})"),
                        "message": "the checkpoint agent writes and deletes only checkpoints recorded on its own node (spec.manifest.host.nodeName), with a token bound to a pod there",
                        "messageExpression": "'the checkpoint agent writes and deletes only checkpoints recorded on its own node (spec.manifest.host.nodeName), with a token bound to a pod there; this token is ' + (has(request.userInfo.extra) && 'authentication.kubernetes.io/node-name' in request.userInfo.extra ? 'bound to node ' + request.userInfo.extra['authentication.kubernetes.io/node-name'][0] : 'bound to no node') + (request.operation == 'CREATE' ? ', the checkpoint names ' + (has(object.spec.manifest.host.nodeName) ? 'node ' + object.spec.manifest.host.nodeName : 'no node') : ', the checkpoint is recorded on ' + (has(oldObject.spec.manifest.host.nodeName) ? 'node ' + oldObject.spec.manifest.host.nodeName : 'no node'))",
                        "reason": "Forbidden"}]}}),
        )?,
        typed::<ValidatingAdmissionPolicyBinding>(
            FILE_AGENT,
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": cluster_meta("miggate-checkpoint-writers", "miggate-checkpoint-agent"),
                "spec": {"policyName": "miggate-checkpoint-writers", "validationActions": ["Deny"]}}),
        )?,
    ])
}

/// A configuration's metadata: the cert-manager annotation that has its cainjector fill
/// `caBundle`, with cert-manager only.
fn configuration_meta(name: &str, certificates: &Certificates) -> Value {
    let mut meta = json!({"name": name, "labels": labels(WEBHOOK)});
    if *certificates == Certificates::CertManager {
        meta["annotations"] = json!({"cert-manager.io/inject-ca-from": format!("{NAMESPACE}/{WEBHOOK}")});
    }
    meta
}

/// A webhook's client: the Service at `path`, with the CA bundle the user brought, if any.
fn client_config(path: &str, certificates: &Certificates) -> Value {
    let mut client = json!({"service": {"name": WEBHOOK, "namespace": NAMESPACE, "path": path, "port": 443}});
    if let Certificates::Provided {
        ca_bundle: Some(pem), ..
    } = certificates
    {
        client["caBundle"] = json!(k8s_openapi::ByteString(pem.clone().into_bytes()));
    }
    client
}

fn webhook_configuration(certificates: &Certificates) -> Result<Object, Error> {
    let client = client_config("/validate", certificates);
    let namespaces = json!({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
        "values": ["kube-system", NAMESPACE, NODE_NAMESPACE]}]});
    let webhook = |name: &str, resources: &[&str], condition: (&str, &str), failure: &str| {
        json!({
            "name": name,
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "timeoutSeconds": WEBHOOK_TIMEOUT_SECONDS,
            "failurePolicy": failure,
            "matchPolicy": "Equivalent",
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                "resources": resources, "scope": "Namespaced"}],
            "matchConditions": [{"name": condition.0, "expression": condition.1}],
            "namespaceSelector": namespaces,
            "clientConfig": client,
        })
    };
    typed::<ValidatingWebhookConfiguration>(
        FILE_CONFIG,
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": configuration_meta(VALIDATING_CONFIGURATION, certificates),
        "webhooks": [
            webhook("restore.miggate.io", &["pods"], ("restore-pods", RESTORE_MATCH), "Fail"),
            webhook("binding.miggate.io", &["pods/binding", "bindings"], ("bindings", BINDING_MATCH), "Ignore"),
        ]}),
    )
}

/// The opt-in steering webhook (`POST /mutate`): restore pods annotated `miggate.io/steer:
/// "true"` get required node affinity on GFD's labels. Failure policy Ignore: steering is a
/// convenience, and the validating webhook still guards the pod, so a webhook outage or an
/// answer it cannot give never blocks a pod.
fn steering_configuration(certificates: &Certificates) -> Result<Object, Error> {
    mutating(
        certificates,
        MUTATING_CONFIGURATIONS[1],
        "steer.miggate.io",
        pod_rules(&["pods"]),
        Some(("restore-pods-asking-for-steering", STEER_MATCH)),
        "/mutate",
    )
}

/// The device map at binding (`POST /mutate-binding`): a DRA restore pod's Binding gets the
/// `miggate.io/device-map` annotation from its claims' allocation, which the API server copies
/// onto the pod. Not opt-in: it changes no placement, only tells the node agent what the exact
/// check found, and a Binding carries no pod annotation a match condition could select on
/// (the webhook answers every other binding from one map lookup, as the validating one does).
/// Failure policy Ignore: a webhook that cannot answer never blocks a binding; the node agent
/// then pairs the devices itself.
fn device_map_configuration(certificates: &Certificates) -> Result<Object, Error> {
    mutating(
        certificates,
        MUTATING_CONFIGURATIONS[2],
        "device-map.miggate.io",
        pod_rules(&["pods/binding", "bindings"]),
        Some(("bindings", BINDING_MATCH)),
        "/mutate-binding",
    )
}

/// The summary (`POST /mutate-summary`): a `GpuCheckpoint`'s or `GpuNode`'s `spec.summary`,
/// the text of `kubectl get`'s Devices column, derived from its manifest on every create and
/// update, so no writer has to compute it. Failure policy Ignore: without the webhook the
/// object is still accepted, its column empty.
fn summary_configuration(certificates: &Certificates) -> Result<Object, Error> {
    mutating(
        certificates,
        MUTATING_CONFIGURATIONS[0],
        "summary.miggate.io",
        json!([{"apiGroups": [GROUP], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
            "resources": ["gpucheckpoints", "gpunodes"], "scope": "*"}]),
        None,
        "/mutate-summary",
    )
}

/// CREATE of the core group's namespaced `resources`.
fn pod_rules(resources: &[&str]) -> Value {
    json!([{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
        "resources": resources, "scope": "Namespaced"}])
}

/// A MutatingWebhookConfiguration of one webhook on the webhook's Service: `rules`, selected
/// by `condition` when given, outside miggate's and the system's namespaces (a cluster-scoped
/// object is never skipped by that), with failure policy Ignore and no reinvocation (a
/// mutation here never blocks an object).
fn mutating(
    certificates: &Certificates,
    config: &str,
    name: &str,
    rules: Value,
    condition: Option<(&str, &str)>,
    path: &str,
) -> Result<Object, Error> {
    let mut webhook = json!({
        "name": name,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "timeoutSeconds": WEBHOOK_TIMEOUT_SECONDS,
        "failurePolicy": "Ignore",
        "reinvocationPolicy": "Never",
        "matchPolicy": "Equivalent",
        "rules": rules,
        "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
            "values": ["kube-system", NAMESPACE, NODE_NAMESPACE]}]},
        "clientConfig": client_config(path, certificates),
    });
    if let Some((condition, expression)) = condition {
        webhook["matchConditions"] = json!([{"name": condition, "expression": expression}]);
    }
    typed::<MutatingWebhookConfiguration>(
        FILE_CONFIG,
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": configuration_meta(config, certificates),
        "webhooks": [webhook]}),
    )
}

#[cfg(test)]
mod tests {
    use kube::Resource;
    use miggate_wire::annotations::{RESTORE_FROM, STEER};
    use miggate_wire::peer;

    use super::*;
    use crate::{GpuCheckpoint, GpuNode};

    // The match conditions are CEL text and stay `&str` constants for the deploy tests; these pin
    // them to the annotation names' one home, so a rename there cannot leave them behind.
    #[test]
    fn match_conditions_name_the_wire_annotations() {
        let restore = format!(
            "has(object.metadata.annotations) && ('{RESTORE_FROM}' in object.metadata.annotations || '{}' in object.metadata.annotations)",
            peer::RESTORE_FROM
        );
        assert_eq!(RESTORE_MATCH, restore);
        assert_eq!(
            STEER_MATCH,
            format!(
                "{restore} && '{STEER}' in object.metadata.annotations && object.metadata.annotations['{STEER}'] == 'true'"
            )
        );
    }

    // kube's derive takes the group as a literal; this holds it to the constant.
    #[test]
    fn derived_resources_use_the_wire_group() {
        assert_eq!(GpuCheckpoint::group(&()), GROUP);
        assert_eq!(GpuNode::group(&()), GROUP);
        assert_eq!(GpuCheckpoint::api_version(&()), miggate_wire::API_VERSION);
    }
}
