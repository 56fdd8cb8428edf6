//! The generated install (`deploy/`): checked in and current, every object its kind's valid
//! shape, the webhook configuration selecting only restore pods and bindings, the policies'
//! CEL allowing only what they are for, and RBAC least privilege.
//! `UPDATE_DEPLOY=1 cargo test -p miggate-crds --test deploy` rewrites `deploy/`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::PathBuf;

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Namespace, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use miggate_crds::CustomResourceDefinition;
use miggate_crds::deploy::cert_manager::{Certificate, Issuer};
use miggate_crds::deploy::{self, Certificates, Config, Object};
use rstest::rstest;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn deploy_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

fn objects() -> Vec<Object> {
    deploy::objects(&Config::default()).unwrap()
}

#[test]
fn the_checked_in_deploy_files_are_the_generated_ones() {
    let update = std::env::var_os("UPDATE_DEPLOY").is_some_and(|v| v == "1");
    let mut drifted = Vec::new();
    let files = deploy::files(&Config::default()).unwrap();
    // A file the generator no longer writes is drift too (it would still be applied).
    for entry in std::fs::read_dir(deploy_dir()).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".yaml") && !files.iter().any(|(f, _)| *f == name) {
            drifted.push(format!("{name} (not generated)"));
        }
    }
    for (file, content) in files {
        let path = deploy_dir().join(file);
        if update {
            std::fs::write(&path, &content).unwrap();
            continue;
        }
        if std::fs::read_to_string(&path).unwrap_or_default() != content {
            drifted.push(file.to_string());
        }
    }
    assert!(
        drifted.is_empty(),
        "{drifted:?} differ from the generated install; run `UPDATE_DEPLOY=1 cargo test -p miggate-crds --test deploy` and review the diff"
    );
}

#[test]
fn the_stream_is_snapshotted() {
    insta::assert_snapshot!("deploy_stream", deploy::stream(&Config::default()).unwrap());
}

fn round_trip<K: Serialize + DeserializeOwned>(doc: &Value) -> Value {
    let typed: K = serde_json::from_value(doc.clone()).unwrap();
    serde_json::to_value(&typed).unwrap()
}

/// Every document of the stream, read back as its Kubernetes kind and written again, is the
/// document: no field unknown to the kind's schema (which the API server would prune).
#[test]
fn every_object_round_trips_through_its_typed_kind() {
    let stream = deploy::stream(&Config::default()).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&stream).unwrap();
    assert_eq!(docs.len(), objects().len());
    let mut kinds = std::collections::BTreeSet::new();
    for doc in &docs {
        let api = doc["apiVersion"].as_str().unwrap();
        let kind = doc["kind"].as_str().unwrap();
        let back = match (api, kind) {
            ("v1", "Namespace") => round_trip::<Namespace>(doc),
            ("v1", "ServiceAccount") => round_trip::<ServiceAccount>(doc),
            ("v1", "Service") => round_trip::<Service>(doc),
            ("apps/v1", "Deployment") => round_trip::<Deployment>(doc),
            ("apps/v1", "DaemonSet") => round_trip::<DaemonSet>(doc),
            ("policy/v1", "PodDisruptionBudget") => round_trip::<PodDisruptionBudget>(doc),
            ("networking.k8s.io/v1", "NetworkPolicy") => round_trip::<NetworkPolicy>(doc),
            ("rbac.authorization.k8s.io/v1", "ClusterRole") => round_trip::<ClusterRole>(doc),
            ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => round_trip::<ClusterRoleBinding>(doc),
            ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration") => {
                round_trip::<ValidatingWebhookConfiguration>(doc)
            }
            ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration") => {
                round_trip::<k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration>(doc)
            }
            ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy") => {
                round_trip::<ValidatingAdmissionPolicy>(doc)
            }
            ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding") => {
                round_trip::<ValidatingAdmissionPolicyBinding>(doc)
            }
            ("apiextensions.k8s.io/v1", "CustomResourceDefinition") => {
                round_trip::<CustomResourceDefinition>(doc)
            }
            ("v1", "Secret") => round_trip::<k8s_openapi::api::core::v1::Secret>(doc),
            ("rbac.authorization.k8s.io/v1", "Role") => round_trip::<k8s_openapi::api::rbac::v1::Role>(doc),
            ("rbac.authorization.k8s.io/v1", "RoleBinding") => {
                round_trip::<k8s_openapi::api::rbac::v1::RoleBinding>(doc)
            }
            ("cert-manager.io/v1", "Issuer") => round_trip::<Issuer>(doc),
            ("cert-manager.io/v1", "Certificate") => round_trip::<Certificate>(doc),
            other => panic!("no typed kind for {other:?}"),
        };
        // YAML numbers come back as integers or floats by their text; compare by value.
        assert_eq!(
            floats(&back),
            floats(doc),
            "{api} {kind} {}",
            doc["metadata"]["name"]
        );
        kinds.insert(kind.to_string());
    }
    assert_eq!(kinds.len(), 17, "{kinds:?}");
}

fn floats(v: &Value) -> Value {
    match v {
        Value::Number(n) => json!(n.as_f64().unwrap()),
        Value::Array(a) => Value::Array(a.iter().map(floats).collect()),
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), floats(v))).collect()),
        other => other.clone(),
    }
}

#[test]
fn a_field_the_kind_does_not_have_is_refused_not_dropped() {
    let err = deploy::objects(&Config {
        image: "x".into(),
        ..Config::default()
    });
    assert!(err.is_ok());
    // The same check the generator runs, on a misspelt field.
    let misspelt = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "a"}, "automountToken": false});
    let typed: ServiceAccount = serde_json::from_value(misspelt.clone()).unwrap();
    assert_ne!(
        serde_json::to_value(typed).unwrap(),
        misspelt,
        "k8s-openapi drops unknown fields"
    );
}

fn find<'a>(objects: &'a [Object], kind: &str, name: &str) -> &'a Value {
    &objects
        .iter()
        .find(|o| o.kind().1 == kind && o.name() == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
        .value
}

fn eval(expression: &str, vars: &[(&str, &Value)]) -> bool {
    support::eval(expression, vars).unwrap_or_else(|e| panic!("{e}"))
}

/// An AdmissionReview request as the API server builds it, reduced to what rules and CEL read.
fn request(resource: &str, sub: &str, operation: &str, namespace: &str, object: Value) -> Value {
    json!({
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": object.get("kind").cloned().unwrap_or(json!("")),
        "resource": {"group": "", "version": "v1", "resource": resource},
        "subResource": sub,
        "operation": operation,
        "namespace": namespace,
        "name": object.pointer("/metadata/name").cloned().unwrap_or(json!("")),
        "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller", "groups": ["system:serviceaccounts"]},
        "object": object,
    })
}

/// Whether one webhook of the configuration is called for `req`: its rules (operation,
/// resource with subresource, scope), its namespace selector (on the namespace name label) and
/// its match conditions, as the API server applies them.
fn webhook_called(webhook: &Value, req: &Value) -> bool {
    let resource = match req["subResource"].as_str().unwrap() {
        "" => req["resource"]["resource"].as_str().unwrap().to_string(),
        sub => format!("{}/{sub}", req["resource"]["resource"].as_str().unwrap()),
    };
    let rule_matches = webhook["rules"].as_array().unwrap().iter().any(|r| {
        r["apiGroups"]
            .as_array()
            .unwrap()
            .contains(&req["resource"]["group"])
            && r["operations"].as_array().unwrap().contains(&req["operation"])
            && r["resources"].as_array().unwrap().contains(&json!(resource))
    });
    let excluded = webhook["namespaceSelector"]["matchExpressions"][0]["values"]
        .as_array()
        .unwrap()
        .contains(&req["namespace"]);
    rule_matches
        && !excluded
        && webhook["matchConditions"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|c| {
                eval(
                    c["expression"].as_str().unwrap(),
                    &[("object", &req["object"]), ("request", req)],
                )
            })
}

fn pod(annotations: Option<Value>) -> Value {
    let mut metadata = json!({"name": "vllm-restore-0", "namespace": "ml"});
    if let Some(a) = annotations {
        metadata["annotations"] = a;
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
        "spec": {"containers": [{"name": "vllm", "image": "vllm:1"}]}})
}

fn binding() -> Value {
    json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "vllm-restore-0", "namespace": "ml"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "gpu-node-7"}})
}

#[rstest]
#[case::restore_pod(request("pods", "", "CREATE", "ml", pod(Some(json!({"miggate.io/restore-from": "vllm-ckpt"})))), Some("restore.miggate.io"))]
#[case::plain_pod(request("pods", "", "CREATE", "ml", pod(None)), None)]
#[case::pod_with_other_annotations(request("pods", "", "CREATE", "ml", pod(Some(json!({"prometheus.io/scrape": "true"})))), None)]
#[case::restore_pod_update(request("pods", "", "UPDATE", "ml", pod(Some(json!({"miggate.io/restore-from": "vllm-ckpt"})))), None)]
#[case::restore_pod_in_kube_system(request("pods", "", "CREATE", "kube-system", pod(Some(json!({"miggate.io/restore-from": "x"})))), None)]
#[case::binding(
    request("pods", "binding", "CREATE", "ml", binding()),
    Some("binding.miggate.io")
)]
// The legacy `bindings` resource (POST /api/v1/namespaces/NS/bindings) binds a pod too:
// left out, any client could place a restore pod on a short node past the binding check.
#[case::legacy_bindings_resource(
    request("bindings", "", "CREATE", "ml", binding()),
    Some("binding.miggate.io")
)]
#[case::pod_status(request("pods", "status", "UPDATE", "ml", pod(None)), None)]
#[case::eviction(request("pods", "eviction", "CREATE", "ml", json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p"}})), None)]
#[case::configmap(request("configmaps", "", "CREATE", "ml", json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "annotations": {"miggate.io/restore-from": "x"}}})), None)]
fn the_webhook_configuration_selects_only_restore_pods_and_bindings(
    #[case] req: Value,
    #[case] called: Option<&str>,
) {
    let objects = objects();
    let config = find(&objects, "ValidatingWebhookConfiguration", "miggate");
    let hits: Vec<&str> = config["webhooks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| webhook_called(w, &req))
        .map(|w| w["name"].as_str().unwrap())
        .collect();
    assert_eq!(hits, called.into_iter().collect::<Vec<_>>());
}

#[test]
fn the_webhook_configuration_has_the_settings_of_the_issue() {
    let objects = objects();
    let config = find(&objects, "ValidatingWebhookConfiguration", "miggate");
    // The webhook injects its own CA: no cert-manager annotation, no caBundle shipped.
    assert!(config["metadata"]["annotations"].is_null());
    let hooks = config["webhooks"].as_array().unwrap();
    let policies: Vec<(&str, &str)> = hooks
        .iter()
        .map(|w| (w["name"].as_str().unwrap(), w["failurePolicy"].as_str().unwrap()))
        .collect();
    assert_eq!(
        policies,
        [("restore.miggate.io", "Fail"), ("binding.miggate.io", "Ignore")]
    );
    for w in hooks {
        assert_eq!(w["sideEffects"], "None");
        assert_eq!(w["timeoutSeconds"], 5);
        assert_eq!(w["admissionReviewVersions"], json!(["v1"]));
        assert_eq!(w["clientConfig"]["service"]["path"], "/validate");
        // The Service's port 443 goes to the container's 8443, where `--listen` binds.
        assert_eq!(w["clientConfig"]["service"]["port"], 443);
    }
}

/// The webhook's flags, from the install's Deployment.
fn webhook_args(objects: &[Object]) -> Vec<String> {
    let deployment = find(objects, "Deployment", "miggate-webhook");
    serde_json::from_value(deployment["spec"]["template"]["spec"]["containers"][0]["args"].clone()).unwrap()
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
        .filter_map(|o| match o.kind().1 {
            "ValidatingWebhookConfiguration" => Some(format!("validating/{}", o.name())),
            "MutatingWebhookConfiguration" => Some(format!("mutating/{}", o.name())),
            _ => None,
        })
        .collect();
    configurations.sort();
    assert_eq!(injected, configurations);
    assert_eq!(configurations.len(), 4);
    for name in [
        "--tls-dns-name=miggate-webhook.miggate-system.svc",
        "--tls-dns-name=miggate-webhook.miggate-system.svc.cluster.local",
        "--tls-secret=miggate-system/miggate-webhook-certs",
    ] {
        assert!(args.iter().any(|a| a == name), "{name} in {args:?}");
    }
    let secret = find(&objects, "Secret", "miggate-webhook-certs");
    assert!(secret["data"].is_null(), "shipped empty");
    assert_eq!(secret["type"], "Opaque");
    // No volume: the webhook reads the Secret through the API.
    let pod = &find(&objects, "Deployment", "miggate-webhook")["spec"]["template"]["spec"];
    assert!(pod["volumes"].is_null() && pod["containers"][0]["volumeMounts"].is_null());
    assert!(!objects.iter().any(|o| o.kind().0.starts_with("cert-manager.io")));
}

#[test]
fn cert_manager_mode_issues_the_certificate_and_has_it_injected() {
    let config = Config {
        certificates: Certificates::CertManager,
        ..Config::default()
    };
    let objects = deploy::objects(&config).unwrap();
    let cert = find(&objects, "Certificate", "miggate-webhook");
    assert!(
        cert["spec"]["dnsNames"]
            .as_array()
            .unwrap()
            .contains(&json!("miggate-webhook.miggate-system.svc"))
    );
    for o in objects
        .iter()
        .filter(|o| o.kind().1.ends_with("WebhookConfiguration"))
    {
        assert_eq!(
            o.value["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
            "miggate-system/miggate-webhook",
            "{}",
            o.name()
        );
    }
    let args = webhook_args(&objects);
    assert!(args.contains(&"--tls-cert=/tls/tls.crt".to_string()), "{args:?}");
    assert!(!args.iter().any(|a| a.starts_with("--tls-secret")));
    let pod = &find(&objects, "Deployment", "miggate-webhook")["spec"]["template"]["spec"];
    assert_eq!(pod["volumes"][0]["secret"]["secretName"], "miggate-webhook-tls");
    // The webhook writes no Secret and no configuration in this mode.
    assert!(!objects.iter().any(|o| o.kind().1 == "Role"));
    let webhook = rules(&objects, "miggate-webhook");
    assert!(
        webhook
            .iter()
            .all(|(_, _, v)| ["get", "list", "watch"].contains(&v.as_str())),
        "{webhook:?}"
    );
}

#[test]
fn a_brought_secret_is_mounted_and_its_ca_put_in_every_configuration() {
    let config = Config {
        certificates: Certificates::Provided {
            secret: "my-tls".into(),
            ca_bundle: Some("PEM".into()),
        },
        ..Config::default()
    };
    let objects = deploy::objects(&config).unwrap();
    let pod = &find(&objects, "Deployment", "miggate-webhook")["spec"]["template"]["spec"];
    assert_eq!(pod["volumes"][0]["secret"]["secretName"], "my-tls");
    let mut webhooks = 0;
    for o in objects
        .iter()
        .filter(|o| o.kind().1.ends_with("WebhookConfiguration"))
    {
        for w in o.value["webhooks"].as_array().unwrap() {
            assert_eq!(w["clientConfig"]["caBundle"], "UEVN", "{}", o.name());
            webhooks += 1;
        }
        assert!(o.value["metadata"]["annotations"].is_null());
    }
    assert_eq!(webhooks, 5);
    assert!(
        !objects
            .iter()
            .any(|o| o.kind().0.starts_with("cert-manager.io") || o.kind().1 == "Secret")
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
    let objects = objects();
    let policy = find(&objects, "ValidatingAdmissionPolicy", "miggate-publish-own-node");
    let object =
        json!({"apiVersion": "miggate.io/v1alpha1", "kind": "GpuNode", "metadata": {"name": object_name}});
    assert_eq!(
        policy_denies(policy, &object, &vap_request(user, token_node)),
        denied
    );
    let binding = find(
        &objects,
        "ValidatingAdmissionPolicyBinding",
        "miggate-publish-own-node",
    );
    assert_eq!(binding["spec"]["validationActions"], json!(["Deny"]));
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
    let objects = objects();
    let policy = find(
        &objects,
        "ValidatingAdmissionPolicy",
        "miggate-checkpoint-writers",
    );
    // Recorded on the node the token is bound to (the node rule: tests/policies.rs).
    let object = json!({"apiVersion": "miggate.io/v1alpha1", "kind": "GpuCheckpoint", "metadata": {"name": "c", "namespace": "ml"},
        "spec": {"manifest": {"host": {"nodeName": "gpu-node-3"}}}});
    assert_eq!(
        policy_denies(policy, &object, &vap_request(user, Some("gpu-node-3"))),
        denied
    );
}

#[test]
fn the_checkpoint_agent_is_configurable() {
    let config = Config {
        checkpoint_agent_namespace: "snapshot".into(),
        checkpoint_agent_name: "snapshot-agent".into(),
        ..Config::default()
    };
    let objects = deploy::objects(&config).unwrap();
    let policy = find(
        &objects,
        "ValidatingAdmissionPolicy",
        "miggate-checkpoint-writers",
    );
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

fn rules(objects: &[Object], role: &str) -> Vec<(String, String, String)> {
    let role: ClusterRole = serde_json::from_value(find(objects, "ClusterRole", role).clone()).unwrap();
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
    for o in objects.iter().filter(|o| o.kind().1 == "ClusterRole") {
        let text = o.value.to_string();
        assert!(!text.contains("\"*\""), "{} grants *", o.name());
        assert!(o.value["aggregationRule"].is_null());
    }
    let webhook = rules(&objects, "miggate-webhook");
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
    let role: ClusterRole =
        serde_json::from_value(find(&objects, "ClusterRole", "miggate-webhook").clone()).unwrap();
    for rule in role.rules.unwrap() {
        let names = rule.resource_names.clone().unwrap_or_default();
        match rule.resources.unwrap()[0].as_str() {
            "validatingwebhookconfigurations" => assert_eq!(names, ["miggate"]),
            "mutatingwebhookconfigurations" => {
                assert_eq!(names, ["miggate-summary", "miggate-steer", "miggate-device-map"]);
            }
            _ => assert!(names.is_empty()),
        }
    }
    // Secrets: its own one by name (read, update, watch), and create in its namespace only,
    // through a namespaced Role bound to its account alone.
    assert!(
        !rules(&objects, "miggate-webhook")
            .iter()
            .any(|(_, r, _)| r == "secrets")
    );
    let secrets: k8s_openapi::api::rbac::v1::Role =
        serde_json::from_value(find(&objects, "Role", "miggate-webhook-certs").clone()).unwrap();
    assert_eq!(secrets.metadata.namespace.as_deref(), Some("miggate-system"));
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
                s(&["get", "list", "watch", "update"])
            ),
            (s(&["secrets"]), vec![], s(&["create"])),
        ]
    );
    let binding = find(&objects, "RoleBinding", "miggate-webhook-certs");
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "miggate-webhook", "namespace": "miggate-system"}])
    );

    let publisher = rules(&objects, "miggate-publish");
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

    let agent = rules(&objects, "miggate-checkpoint-writer");
    assert!(
        agent
            .iter()
            .all(|(g, r, _)| g == "miggate.io" && r.starts_with("gpucheckpoints")),
        "{agent:?}"
    );
    // Nobody but the agent's role may write checkpoints.
    for role in ["miggate-webhook", "miggate-publish"] {
        assert!(
            rules(&objects, role)
                .iter()
                .all(|(_, r, _)| !r.starts_with("gpucheckpoints") || role == "miggate-webhook")
        );
    }
    // Each role is bound to exactly its service account.
    for (binding, sa, namespace) in [
        ("miggate-webhook", "miggate-webhook", "miggate-system"),
        ("miggate-publish", "miggate-publish", "miggate-node"),
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

#[test]
fn the_workloads_run_locked_down_with_the_real_flags() {
    let objects = objects();
    let deployment: Deployment =
        serde_json::from_value(find(&objects, "Deployment", "miggate-webhook").clone()).unwrap();
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
        pod.termination_grace_period_seconds.unwrap() > 20,
        "above the webhook's 20 s drain"
    );
    let c = &pod.containers[0];
    assert_eq!(
        c.args.clone().unwrap(),
        [
            "webhook",
            "--listen=0.0.0.0:8443",
            "--health-listen=0.0.0.0:8080",
            "--tls-secret=miggate-system/miggate-webhook-certs",
            "--tls-dns-name=miggate-webhook.miggate-system.svc",
            "--tls-dns-name=miggate-webhook.miggate-system.svc.cluster.local",
            "--inject-ca-into=validating/miggate",
            "--inject-ca-into=mutating/miggate-summary",
            "--inject-ca-into=mutating/miggate-steer",
            "--inject-ca-into=mutating/miggate-device-map",
            "--store=kube",
            "--max-connections=1024"
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

    let daemonset: DaemonSet =
        serde_json::from_value(find(&objects, "DaemonSet", "miggate-publish").clone()).unwrap();
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
    let pdb = find(&objects, "PodDisruptionBudget", "miggate-webhook");
    assert_eq!(pdb["spec"]["minAvailable"], 1);
}

#[test]
fn the_crds_are_the_crates() {
    let objects = objects();
    let crds: Vec<CustomResourceDefinition> = objects
        .iter()
        .filter(|o| o.kind().1 == "CustomResourceDefinition")
        .map(|o| serde_json::from_value(o.value.clone()).unwrap())
        .collect();
    assert_eq!(crds, miggate_crds::crds());
}

#[rstest]
#[case::asks(pod(Some(json!({"miggate.io/restore-from": "vllm-ckpt", "miggate.io/steer": "true"}))), "ml", true)]
#[case::restore_pod_not_asking(pod(Some(json!({"miggate.io/restore-from": "vllm-ckpt"}))), "ml", false)]
#[case::asks_with_another_word(pod(Some(json!({"miggate.io/restore-from": "vllm-ckpt", "miggate.io/steer": "yes"}))), "ml", false)]
#[case::not_a_restore_pod(pod(Some(json!({"miggate.io/steer": "true"}))), "ml", false)]
#[case::plain_pod(pod(None), "ml", false)]
#[case::in_miggate_node(pod(Some(json!({"miggate.io/restore-from": "x", "miggate.io/steer": "true"}))), "miggate-node", false)]
fn steering_is_sent_only_restore_pods_that_ask(
    #[case] object: Value,
    #[case] namespace: &str,
    #[case] called: bool,
) {
    let objects = objects();
    let config = find(&objects, "MutatingWebhookConfiguration", "miggate-steer");
    let webhook = &config["webhooks"][0];
    assert_eq!(
        webhook_called(webhook, &request("pods", "", "CREATE", namespace, object)),
        called
    );
    // A convenience: never blocks a pod, never runs twice, never writes anything else.
    assert_eq!(webhook["failurePolicy"], "Ignore");
    assert_eq!(webhook["reinvocationPolicy"], "Never");
    assert_eq!(webhook["sideEffects"], "None");
    assert_eq!(webhook["clientConfig"]["service"]["path"], "/mutate");
}

/// The summary mutation sees every create and update of miggate's two kinds, and nothing else.
#[rstest]
#[case::checkpoint_created("gpucheckpoints", "CREATE", "ml", true)]
#[case::checkpoint_updated("gpucheckpoints", "UPDATE", "ml", true)]
#[case::node_created("gpunodes", "CREATE", "", true)]
#[case::node_updated("gpunodes", "UPDATE", "", true)]
#[case::checkpoint_deleted("gpucheckpoints", "DELETE", "ml", false)]
#[case::a_pod("pods", "CREATE", "ml", false)]
fn the_summary_is_derived_for_every_writer(
    #[case] resource: &str,
    #[case] operation: &str,
    #[case] namespace: &str,
    #[case] called: bool,
) {
    let objects = objects();
    let config = find(&objects, "MutatingWebhookConfiguration", "miggate-summary");
    let webhook = &config["webhooks"][0];
    let mut req = request(
        resource,
        "",
        operation,
        namespace,
        json!({"metadata": {"name": "x"}}),
    );
    if resource != "pods" {
        req["resource"]["group"] = json!("miggate.io");
    }
    assert_eq!(webhook_called(webhook, &req), called);
    // Never blocks a writer: without the webhook the object is accepted, its column empty.
    assert_eq!(webhook["failurePolicy"], "Ignore");
    assert_eq!(webhook["reinvocationPolicy"], "Never");
    assert_eq!(webhook["sideEffects"], "None");
    assert_eq!(webhook["rules"][0]["scope"], "*");
    assert_eq!(webhook["clientConfig"]["service"]["path"], "/mutate-summary");
}

#[rstest]
#[case::pod_binding(request("pods", "binding", "CREATE", "ml", binding()), true)]
#[case::legacy_binding(request("bindings", "", "CREATE", "ml", binding()), true)]
#[case::restore_pod_create(request("pods", "", "CREATE", "ml", pod(Some(json!({"miggate.io/restore-from": "x"})))), false)]
#[case::binding_in_kube_system(request("pods", "binding", "CREATE", "kube-system", binding()), false)]
#[case::binding_in_miggate_node(request("pods", "binding", "CREATE", "miggate-node", binding()), false)]
fn the_device_map_is_asked_for_at_every_binding(#[case] req: Value, #[case] called: bool) {
    let objects = objects();
    let config = find(&objects, "MutatingWebhookConfiguration", "miggate-device-map");
    let webhook = &config["webhooks"][0];
    assert_eq!(webhook_called(webhook, &req), called);
    // Never blocks a binding, never runs twice, writes nothing but its answer.
    assert_eq!(webhook["failurePolicy"], "Ignore");
    assert_eq!(webhook["reinvocationPolicy"], "Never");
    assert_eq!(webhook["sideEffects"], "None");
    assert_eq!(webhook["clientConfig"]["service"]["path"], "/mutate-binding");
}
