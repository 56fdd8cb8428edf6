//! The install the chart (`charts/miggate`) renders: every object its kind's valid shape in each
//! certificate mode, what each certificate mode installs and where the CA goes, the identity
//! policies' CEL allowing only their writers, RBAC least privilege, the workloads locked down
//! with their real flags, and the CRDs the crate's. Which requests each webhook configuration
//! selects: tests/webhook_selection.rs.
//!
//! The chart's defaults are read from `deploy/` (`support::installed`, no helm needed;
//! tests/chart.rs holds it to `helm template`); other values are rendered by the real `helm`
//! (`support::chart::rendered`), and those tests say so and pass where there is none, outside CI.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::BTreeSet;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Namespace, Secret, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use miggate_crds::CustomResourceDefinition;
use miggate_wire::install::{
    CERT_MANAGER_SECRET, CERT_SECRET, MUTATING_CONFIGURATIONS, NAMESPACE, NODE_NAMESPACE, PUBLISHER,
    VALIDATING_CONFIGURATION, WEBHOOK,
};
use miggate_wire::webhook as wire;
use rstest::rstest;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use support::{find, typed};

/// The chart's defaults: `deploy/`.
fn objects() -> Vec<Value> {
    support::installed()
}

const CERT_MANAGER: [&str; 1] = ["certificates.mode=cert-manager"];
const BROUGHT_SECRET: [&str; 3] = [
    "certificates.mode=secret",
    "certificates.secretName=my-tls",
    "certificates.caBundle=PEM",
];

/// A cert-manager (`cert-manager.io/v1`) object, a kind k8s-openapi lacks: the fields the chart
/// sets, any other refused, so a misspelt field fails here instead of being dropped.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CertManager<Spec> {
    api_version: String,
    kind: String,
    metadata: ObjectMeta,
    spec: Spec,
}

/// An `Issuer`: self-signed (the root) or a CA's (a Secret with its certificate and key).
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct IssuerSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    self_signed: Option<serde_json::Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ca: Option<SecretName>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SecretName {
    secret_name: String,
}

/// A `Certificate`: what to issue, into which Secret, by which issuer.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CertificateSpec {
    #[serde(default, rename = "isCA", skip_serializing_if = "Option::is_none")]
    is_ca: Option<bool>,
    common_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dns_names: Option<Vec<String>>,
    secret_name: String,
    duration: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    renew_before: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    usages: Option<Vec<String>>,
    private_key: PrivateKey,
    issuer_ref: IssuerRef,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PrivateKey {
    algorithm: String,
    size: u32,
    rotation_policy: String,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct IssuerRef {
    name: String,
    kind: String,
    group: String,
}

/// `doc` read as `T` and written again, the same (see [`typed`]).
fn check<T: serde::de::DeserializeOwned + Serialize>(doc: &Value) {
    typed::<T>(doc);
}

/// `doc` read as its typed kind and written again: panics where it is of no known kind or has
/// a field its kind does not have (which the API server would prune).
fn round_trip(doc: &Value) {
    let api = doc["apiVersion"].as_str().unwrap();
    let kind = doc["kind"].as_str().unwrap();
    match (api, kind) {
        ("v1", "Namespace") => check::<Namespace>(doc),
        ("v1", "ServiceAccount") => check::<ServiceAccount>(doc),
        ("v1", "Service") => check::<Service>(doc),
        ("v1", "Secret") => check::<Secret>(doc),
        ("apps/v1", "Deployment") => check::<Deployment>(doc),
        ("apps/v1", "DaemonSet") => check::<DaemonSet>(doc),
        ("policy/v1", "PodDisruptionBudget") => check::<PodDisruptionBudget>(doc),
        ("networking.k8s.io/v1", "NetworkPolicy") => check::<NetworkPolicy>(doc),
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => check::<ClusterRole>(doc),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => check::<ClusterRoleBinding>(doc),
        ("rbac.authorization.k8s.io/v1", "Role") => check::<Role>(doc),
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => check::<RoleBinding>(doc),
        ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration") => {
            check::<ValidatingWebhookConfiguration>(doc)
        }
        ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration") => {
            check::<MutatingWebhookConfiguration>(doc)
        }
        ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy") => {
            check::<ValidatingAdmissionPolicy>(doc)
        }
        ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding") => {
            check::<ValidatingAdmissionPolicyBinding>(doc)
        }
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition") => check::<CustomResourceDefinition>(doc),
        ("cert-manager.io/v1", "Issuer") => check::<CertManager<IssuerSpec>>(doc),
        ("cert-manager.io/v1", "Certificate") => check::<CertManager<CertificateSpec>>(doc),
        other => panic!("no typed kind for {other:?}"),
    }
}

/// The kinds every certificate mode installs; each mode adds its own.
const KINDS: [&str; 14] = [
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "DaemonSet",
    "Deployment",
    "MutatingWebhookConfiguration",
    "Namespace",
    "NetworkPolicy",
    "PodDisruptionBudget",
    "Service",
    "ServiceAccount",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "ValidatingWebhookConfiguration",
];

/// Every object of the install, in each certificate mode, read as its Kubernetes kind and
/// written again, is the object: no field unknown to the kind's schema.
#[rstest]
#[case::self_managed(&[], &["Role", "RoleBinding", "Secret"])]
#[case::cert_manager(&CERT_MANAGER, &["Certificate", "Issuer"])]
#[case::brought_secret(&BROUGHT_SECRET, &[])]
fn every_object_round_trips_through_its_typed_kind(#[case] sets: &[&str], #[case] own: &[&str]) {
    let Some(objects) = support::chart::install(sets) else {
        return;
    };
    let mut kinds = BTreeSet::new();
    for doc in &objects {
        round_trip(doc);
        kinds.insert(doc["kind"].as_str().unwrap());
    }
    let want: BTreeSet<&str> = KINDS.iter().chain(own).copied().collect();
    assert_eq!(kinds, want);
}

/// The round trip catches a field the kind does not have: k8s-openapi drops it, cert-manager's
/// kinds here refuse it.
#[test]
fn a_field_the_kind_does_not_have_is_refused_not_dropped() {
    let misspelt = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "a"}, "automountToken": false});
    assert!(std::panic::catch_unwind(|| round_trip(&misspelt)).is_err());
    let mut account = misspelt.clone();
    account.as_object_mut().unwrap().remove("automountToken");
    round_trip(&account);
    let issuer = |spec: Value| json!({"apiVersion": "cert-manager.io/v1", "kind": "Issuer", "metadata": {"name": "i"}, "spec": spec});
    round_trip(&issuer(json!({"selfSigned": {}})));
    assert!(std::panic::catch_unwind(|| round_trip(&issuer(json!({"selfsigned": {}})))).is_err());
}

/// The image named is the one both workloads run.
#[test]
fn the_named_image_is_the_one_run() {
    let Some(objects) = support::chart::install(&[
        "image.repository=registry.example.com/miggate",
        "image.tag=0.1.0-rc1",
    ]) else {
        return;
    };
    for (kind, name) in [("Deployment", WEBHOOK), ("DaemonSet", PUBLISHER)] {
        let pod = &find(&objects, kind, name)["spec"]["template"]["spec"];
        assert_eq!(
            pod["containers"][0]["image"], "registry.example.com/miggate:0.1.0-rc1",
            "{kind} {name}"
        );
    }
}

/// A CEL expression of a policy, evaluated as the API server does.
fn eval(expression: &str, vars: &[(&str, &Value)]) -> bool {
    support::eval(expression, vars).unwrap_or_else(|e| panic!("{e}"))
}

/// The webhook's flags, from the install's Deployment.
fn webhook_args(objects: &[Value]) -> Vec<String> {
    let deployment = find(objects, "Deployment", WEBHOOK);
    serde_json::from_value(deployment["spec"]["template"]["spec"]["containers"][0]["args"].clone()).unwrap()
}

/// The install's webhook configurations, validating and mutating.
fn webhook_configurations(objects: &[Value]) -> Vec<&Value> {
    objects
        .iter()
        .filter(|o| o["kind"].as_str().unwrap().ends_with("WebhookConfiguration"))
        .collect()
}

/// Whether `o` is one of cert-manager's objects.
fn cert_manager_kind(o: &Value) -> bool {
    o["apiVersion"].as_str().unwrap().starts_with("cert-manager.io/")
}

/// Every configuration of the install gets the CA (the four, validating and mutating alike:
/// none is left for the API server to call without one), the certificate names the Service,
/// and the Secret it is kept in ships empty for the webhook to fill.
#[test]
fn self_managed_certificates_cover_every_configuration_and_the_service() {
    let objects = objects();
    let args = webhook_args(&objects);
    let mut injected: Vec<String> = args
        .iter()
        .filter_map(|a| a.strip_prefix("--inject-ca-into=").map(str::to_string))
        .collect();
    injected.sort();
    let mut configurations: Vec<String> = objects
        .iter()
        .filter_map(|o| {
            let name = o["metadata"]["name"].as_str().unwrap();
            match o["kind"].as_str().unwrap() {
                "ValidatingWebhookConfiguration" => Some(format!("validating/{name}")),
                "MutatingWebhookConfiguration" => Some(format!("mutating/{name}")),
                _ => None,
            }
        })
        .collect();
    configurations.sort();
    assert_eq!(injected, configurations);
    let mut named: Vec<String> = MUTATING_CONFIGURATIONS
        .iter()
        .map(|m| format!("mutating/{m}"))
        .collect();
    named.push(format!("validating/{VALIDATING_CONFIGURATION}"));
    named.sort();
    assert_eq!(configurations, named);
    for name in [
        "--tls-dns-name=miggate-webhook.miggate-system.svc",
        "--tls-dns-name=miggate-webhook.miggate-system.svc.cluster.local",
        "--tls-secret=miggate-system/miggate-webhook-certs",
    ] {
        assert!(args.iter().any(|a| a == name), "{name} in {args:?}");
    }
    let secret = find(&objects, "Secret", CERT_SECRET);
    assert!(secret["data"].is_null(), "shipped empty");
    assert_eq!(secret["type"], "Opaque");
    // No volume: the webhook reads the Secret through the API.
    let pod = &find(&objects, "Deployment", WEBHOOK)["spec"]["template"]["spec"];
    assert!(pod["volumes"].is_null() && pod["containers"][0]["volumeMounts"].is_null());
    assert!(!objects.iter().any(cert_manager_kind));
}

#[test]
fn cert_manager_mode_issues_the_certificate_and_has_it_injected() {
    let Some(objects) = support::chart::install(&CERT_MANAGER) else {
        return;
    };
    let cert = find(&objects, "Certificate", WEBHOOK);
    assert!(
        cert["spec"]["dnsNames"]
            .as_array()
            .unwrap()
            .contains(&json!("miggate-webhook.miggate-system.svc"))
    );
    assert_eq!(cert["spec"]["secretName"], CERT_MANAGER_SECRET);
    let configurations = webhook_configurations(&objects);
    assert_eq!(configurations.len(), 4);
    for o in configurations {
        assert_eq!(
            o["metadata"]["annotations"]["cert-manager.io/inject-ca-from"], "miggate-system/miggate-webhook",
            "{}",
            o["metadata"]["name"]
        );
    }
    let args = webhook_args(&objects);
    assert!(args.contains(&"--tls-cert=/tls/tls.crt".to_string()), "{args:?}");
    assert!(!args.iter().any(|a| a.starts_with("--tls-secret")));
    let pod = &find(&objects, "Deployment", WEBHOOK)["spec"]["template"]["spec"];
    assert_eq!(pod["volumes"][0]["secret"]["secretName"], CERT_MANAGER_SECRET);
    // The webhook writes no Secret and no configuration in this mode.
    assert!(!objects.iter().any(|o| o["kind"] == "Role"));
    let webhook = rules(&objects, WEBHOOK);
    assert!(
        webhook
            .iter()
            .all(|(_, _, v)| ["get", "list", "watch"].contains(&v.as_str())),
        "{webhook:?}"
    );
}

#[test]
fn a_brought_secret_is_mounted_and_its_ca_put_in_every_configuration() {
    let Some(objects) = support::chart::install(&BROUGHT_SECRET) else {
        return;
    };
    let pod = &find(&objects, "Deployment", WEBHOOK)["spec"]["template"]["spec"];
    assert_eq!(pod["volumes"][0]["secret"]["secretName"], "my-tls");
    let mut webhooks = 0;
    for o in webhook_configurations(&objects) {
        for w in o["webhooks"].as_array().unwrap() {
            assert_eq!(w["clientConfig"]["caBundle"], "UEVN", "{}", o["metadata"]["name"]);
            webhooks += 1;
        }
        assert!(o["metadata"]["annotations"].is_null());
    }
    assert_eq!(webhooks, 5);
    assert!(
        !objects
            .iter()
            .any(|o| cert_manager_kind(o) || o["kind"] == "Secret")
    );
}

fn vap_request(username: &str, node_name: Option<&str>) -> Value {
    let mut user = json!({"username": username, "groups": ["system:serviceaccounts"]});
    if let Some(n) = node_name {
        user["extra"] = json!({
            "authentication.kubernetes.io/node-name": [n],
            "authentication.kubernetes.io/pod-name": ["miggate-publish-x7k2p"],
        });
    }
    json!({"operation": "CREATE", "userInfo": user, "subResource": "",
        "resource": {"group": "miggate.io", "version": "v1alpha1", "resource": "gpunodes"}})
}

/// Whether the policy denies: it applies (every match condition true) and a validation fails.
fn policy_denies(policy: &Value, object: &Value, req: &Value) -> bool {
    let vars = [("object", object), ("request", req)];
    let applies = policy["spec"]["matchConditions"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| eval(c["expression"].as_str().unwrap(), &vars));
    applies
        && policy["spec"]["validations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| !eval(v["expression"].as_str().unwrap(), &vars))
}

const PUBLISH_SA: &str = "system:serviceaccount:miggate-node:miggate-publish";

#[rstest]
#[case::own_node(PUBLISH_SA, Some("gpu-node-7"), "gpu-node-7", false)]
#[case::other_node(PUBLISH_SA, Some("gpu-node-7"), "gpu-node-8", true)]
#[case::token_without_node(PUBLISH_SA, None, "gpu-node-7", true)]
#[case::someone_else(
    "system:serviceaccount:miggate-system:miggate-checkpoint-agent",
    Some("gpu-node-3"),
    "gpu-node-7",
    false
)]
#[case::an_admin("kubernetes-admin", None, "gpu-node-7", false)]
fn the_publisher_writes_only_its_own_nodes_gpunode(
    #[case] user: &str,
    #[case] token_node: Option<&str>,
    #[case] object_name: &str,
    #[case] denied: bool,
) {
    // Bound to deny (support::policy checks its binding).
    let policy = support::policy(&objects(), "miggate-publish-own-node");
    let object =
        json!({"apiVersion": "miggate.io/v1alpha1", "kind": "GpuNode", "metadata": {"name": object_name}});
    assert_eq!(
        policy_denies(&policy, &object, &vap_request(user, token_node)),
        denied
    );
}

#[rstest]
#[case::the_agent("system:serviceaccount:miggate-node:miggate-checkpoint-agent", false)]
#[case::the_agents_name_in_another_namespace(
    "system:serviceaccount:miggate-system:miggate-checkpoint-agent",
    true
)]
#[case::the_publisher(PUBLISH_SA, true)]
#[case::a_user("alice@example.com", true)]
#[case::the_garbage_collector("system:serviceaccount:kube-system:generic-garbage-collector", false)]
fn only_the_checkpoint_agent_writes_gpucheckpoints(#[case] user: &str, #[case] denied: bool) {
    let policy = support::policy(&objects(), "miggate-checkpoint-writers");
    // Recorded on the node the token is bound to (the node rule: tests/policies.rs).
    let object = json!({"apiVersion": "miggate.io/v1alpha1", "kind": "GpuCheckpoint", "metadata": {"name": "c", "namespace": "ml"},
        "spec": {"manifest": {"host": {"nodeName": "gpu-node-3"}}}});
    assert_eq!(
        policy_denies(&policy, &object, &vap_request(user, Some("gpu-node-3"))),
        denied
    );
}

#[test]
fn the_checkpoint_agent_is_configurable() {
    let Some(objects) = support::chart::install(&[
        "checkpointAgent.namespace=snapshot",
        "checkpointAgent.name=snapshot-agent",
    ]) else {
        return;
    };
    let policy = &support::policy(&objects, "miggate-checkpoint-writers");
    let object = json!({"metadata": {"name": "c"}, "spec": {"manifest": {"host": {"nodeName": "n"}}}});
    assert!(!policy_denies(
        policy,
        &object,
        &vap_request("system:serviceaccount:snapshot:snapshot-agent", Some("n"))
    ));
    assert!(policy_denies(
        policy,
        &object,
        &vap_request(
            "system:serviceaccount:miggate-system:miggate-checkpoint-agent",
            Some("n")
        )
    ));
    let binding = find(&objects, "ClusterRoleBinding", "miggate-checkpoint-writer");
    assert_eq!(
        binding["subjects"][0],
        json!({"kind": "ServiceAccount", "name": "snapshot-agent", "namespace": "snapshot"})
    );
}

fn rules(objects: &[Value], role: &str) -> Vec<(String, String, String)> {
    let role: ClusterRole = typed(find(objects, "ClusterRole", role));
    let mut out = Vec::new();
    for rule in role.rules.unwrap() {
        for group in rule.api_groups.clone().unwrap() {
            for resource in rule.resources.clone().unwrap() {
                for verb in &rule.verbs {
                    out.push((group.clone(), resource.clone(), verb.clone()));
                }
            }
        }
    }
    out
}

#[test]
fn rbac_is_least_privilege() {
    let objects = objects();
    let cluster_roles: Vec<&Value> = objects.iter().filter(|o| o["kind"] == "ClusterRole").collect();
    assert_eq!(cluster_roles.len(), 3);
    for o in cluster_roles {
        let text = o.to_string();
        assert!(!text.contains("\"*\""), "{} grants *", o["metadata"]["name"]);
        assert!(o["aggregationRule"].is_null());
    }
    the_webhook_reads_but_for_its_own_configurations(&objects);
    the_webhook_writes_its_own_certificate_secret_only(&objects);
    the_publisher_and_the_agent_write_their_own_kind_only(&objects);
    // Each role is bound to exactly its service account.
    for (binding, sa, namespace) in [
        (WEBHOOK, WEBHOOK, NAMESPACE),
        (PUBLISHER, PUBLISHER, NODE_NAMESPACE),
        (
            "miggate-checkpoint-writer",
            "miggate-checkpoint-agent",
            "miggate-node",
        ),
    ] {
        let b = find(&objects, "ClusterRoleBinding", binding);
        assert_eq!(
            b["subjects"],
            json!([{"kind": "ServiceAccount", "name": sa, "namespace": namespace}])
        );
        assert_eq!(b["roleRef"]["name"], binding);
    }
}

/// The webhook's ClusterRole reads the kinds it decides from, and patches only its own
/// configurations, by name.
fn the_webhook_reads_but_for_its_own_configurations(objects: &[Value]) {
    let webhook = rules(objects, WEBHOOK);
    // Read-only, but for the caBundle of its own configurations.
    let configurations = ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"];
    assert!(
        webhook
            .iter()
            .all(|(_, r, v)| ["get", "list", "watch"].contains(&v.as_str())
                || (v == "patch" && configurations.contains(&r.as_str()))),
        "{webhook:?}"
    );
    let mut resources: Vec<&str> = webhook.iter().map(|(_, r, _)| r.as_str()).collect();
    resources.dedup();
    assert_eq!(
        resources,
        [
            "gpucheckpoints",
            "gpunodes",
            "pods",
            "nodes",
            "resourceslices",
            "resourceclaims",
            "podsnapshots",
            "podsnapshotcontents",
            "validatingwebhookconfigurations",
            "mutatingwebhookconfigurations",
        ]
    );
    assert_eq!(webhook.len(), 32);
    // Its own configurations only, by name.
    let role: ClusterRole = typed(find(objects, "ClusterRole", WEBHOOK));
    for rule in role.rules.unwrap() {
        let names = rule.resource_names.clone().unwrap_or_default();
        match rule.resources.unwrap()[0].as_str() {
            "validatingwebhookconfigurations" => assert_eq!(names, [VALIDATING_CONFIGURATION]),
            "mutatingwebhookconfigurations" => assert_eq!(names, MUTATING_CONFIGURATIONS),
            _ => assert!(names.is_empty()),
        }
    }
}

/// Secrets: its own one by name (read, update, watch, and delete to make it again when it
/// cannot be written), and create in its namespace only, through a namespaced Role bound to
/// its account alone (policy miggate-webhook-certs holds create to that one name).
fn the_webhook_writes_its_own_certificate_secret_only(objects: &[Value]) {
    assert!(!rules(objects, WEBHOOK).iter().any(|(_, r, _)| r == "secrets"));
    let secrets: Role = typed(find(objects, "Role", CERT_SECRET));
    assert_eq!(secrets.metadata.namespace.as_deref(), Some(NAMESPACE));
    let granted: Vec<(Vec<String>, Vec<String>, Vec<String>)> = secrets
        .rules
        .unwrap()
        .into_iter()
        .map(|r| {
            (
                r.resources.unwrap(),
                r.resource_names.unwrap_or_default(),
                r.verbs,
            )
        })
        .collect();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        granted,
        [
            (
                s(&["secrets"]),
                s(&["miggate-webhook-certs"]),
                s(&["get", "list", "watch", "update", "delete"])
            ),
            (s(&["secrets"]), vec![], s(&["create"])),
        ]
    );
    let binding = find(objects, "RoleBinding", CERT_SECRET);
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "miggate-webhook", "namespace": "miggate-system"}])
    );
}

/// The publisher writes its GpuNodes only, never deleting or replacing one; the agent's role
/// its GpuCheckpoints only.
fn the_publisher_and_the_agent_write_their_own_kind_only(objects: &[Value]) {
    let publisher = rules(objects, PUBLISHER);
    assert!(
        publisher
            .iter()
            .all(|(g, r, _)| g == "miggate.io" && r.starts_with("gpunodes")),
        "{publisher:?}"
    );
    // It watches its own GpuNode (list and watch), and never deletes or replaces one.
    assert!(
        publisher
            .iter()
            .all(|(_, _, v)| !["delete", "deletecollection", "update"].contains(&v.as_str())),
        "{publisher:?}"
    );
    assert!(
        publisher
            .iter()
            .all(|(_, r, v)| r == "gpunodes" || !["list", "watch"].contains(&v.as_str())),
        "list and watch only the objects, not their status: {publisher:?}"
    );

    let agent = rules(objects, "miggate-checkpoint-writer");
    assert!(
        agent
            .iter()
            .all(|(g, r, _)| g == "miggate.io" && r.starts_with("gpucheckpoints")),
        "{agent:?}"
    );
    // Nobody but the agent's role may write checkpoints.
    for role in [WEBHOOK, PUBLISHER] {
        assert!(
            rules(objects, role)
                .iter()
                .all(|(_, r, _)| !r.starts_with("gpucheckpoints") || role == WEBHOOK)
        );
    }
}

/// The arguments the chart's Deployment runs `miggate webhook` with, spelt from the names and
/// defaults the code owns.
fn default_webhook_args() -> Vec<String> {
    let mut args = vec![
        "webhook".to_string(),
        format!("--listen={}", wire::LISTEN),
        format!("--health-listen={}", wire::HEALTH_LISTEN),
        format!("--tls-secret={NAMESPACE}/{CERT_SECRET}"),
        format!("--tls-dns-name={WEBHOOK}.{NAMESPACE}.svc"),
        format!("--tls-dns-name={WEBHOOK}.{NAMESPACE}.svc.cluster.local"),
        format!("--inject-ca-into=validating/{VALIDATING_CONFIGURATION}"),
    ];
    args.extend(
        MUTATING_CONFIGURATIONS
            .iter()
            .map(|m| format!("--inject-ca-into=mutating/{m}")),
    );
    args.extend([
        "--store=kube".to_string(),
        format!("--binder={}", wire::DEFAULT_BINDER),
        format!("--max-connections={}", wire::MAX_CONNECTIONS),
    ]);
    args
}

#[test]
fn the_workloads_run_locked_down_with_the_real_flags() {
    let objects = objects();
    let deployment: Deployment = typed(find(&objects, "Deployment", WEBHOOK));
    let spec = deployment.spec.unwrap();
    assert_eq!(spec.replicas, Some(2));
    let pod = spec.template.spec.unwrap();
    assert!(pod.affinity.unwrap().pod_anti_affinity.is_some());
    assert_eq!(pod.topology_spread_constraints.unwrap().len(), 1);
    // Fail-closed: while no replica answers no restore pod is created, so it is not preempted first.
    assert_eq!(
        pod.priority_class_name.as_deref(),
        Some("system-cluster-critical")
    );
    assert!(
        u64::try_from(pod.termination_grace_period_seconds.unwrap()).unwrap() > wire::DRAIN.as_secs(),
        "above the webhook's drain"
    );
    let c = &pod.containers[0];
    assert_eq!(c.args.clone().unwrap(), default_webhook_args());
    // The ports the flags name are the ones the container, its probes and the Service use.
    let ports: Vec<(String, i32)> = c
        .ports
        .iter()
        .flatten()
        .map(|p| (p.name.clone().unwrap_or_default(), p.container_port))
        .collect();
    assert_eq!(
        ports,
        [
            ("https".to_string(), i32::from(wire::ADMISSION_PORT)),
            ("health".to_string(), i32::from(wire::HEALTH_PORT))
        ]
    );
    assert!(
        c.resources.as_ref().unwrap().limits.is_some() && c.resources.as_ref().unwrap().requests.is_some()
    );
    let probe_path = |p: &Option<k8s_openapi::api::core::v1::Probe>| {
        p.as_ref()
            .unwrap()
            .http_get
            .as_ref()
            .unwrap()
            .path
            .clone()
            .unwrap()
    };
    assert_eq!(probe_path(&c.liveness_probe), "/healthz");
    assert_eq!(probe_path(&c.readiness_probe), "/readyz");

    let daemonset: DaemonSet = typed(find(&objects, "DaemonSet", PUBLISHER));
    let pod_ds = daemonset.spec.unwrap().template.spec.unwrap();
    let p = &pod_ds.containers[0];
    assert_eq!(p.args.clone().unwrap(), ["publish", "--node", "$(NODE_NAME)"]);
    let env = p.env.clone().unwrap();
    assert_eq!(
        env[0]
            .value_from
            .as_ref()
            .unwrap()
            .field_ref
            .as_ref()
            .unwrap()
            .field_path,
        "spec.nodeName"
    );
    let mount = &p.volume_mounts.clone().unwrap()[0];
    assert_eq!(
        (mount.mount_path.as_str(), mount.read_only),
        ("/run/miggate", Some(true))
    );

    for (name, c) in [("webhook", c), ("publish", p)] {
        let s = c.security_context.clone().unwrap();
        assert_eq!(s.run_as_non_root, Some(true), "{name}");
        assert_eq!(s.read_only_root_filesystem, Some(true), "{name}");
        assert_eq!(s.allow_privilege_escalation, Some(false), "{name}");
        assert_eq!(
            s.capabilities.unwrap().drop,
            Some(vec!["ALL".to_string()]),
            "{name}"
        );
        assert_eq!(s.seccomp_profile.unwrap().type_, "RuntimeDefault", "{name}");
    }
    let pdb = find(&objects, "PodDisruptionBudget", WEBHOOK);
    assert_eq!(pdb["spec"]["minAvailable"], 1);
}

/// `deploy/crds.yaml` holds the crate's CRDs, field for field, and nothing else.
#[test]
fn the_crds_are_the_crates() {
    let installed: Vec<Value> = support::deploy_docs()
        .into_iter()
        .filter(|(file, _)| file == "crds.yaml")
        .map(|(_, doc)| doc)
        .collect();
    let crates: Vec<Value> = miggate_crds::crds()
        .iter()
        .map(|crd| serde_json::to_value(crd).unwrap())
        .collect();
    assert_eq!(installed, crates);
}
