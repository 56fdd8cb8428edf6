//! The Helm chart (`charts/miggate`) rendered by the real `helm` (v4, built from its Go module
//! by `e2e/cluster.sh tools`, the one the e2e suite installs with) against the objects `miggate
//! deploy` writes: with the default values they are the same objects, and each value that
//! `miggate deploy` also has a flag for renders what that flag writes. The only differences
//! allowed are Helm's own labels and the release namespace, which `helm install
//! --create-namespace` makes.
//!
//! The binary is `MIGGATE_HELM`, else `target/e2e/bin/helm`. Without one these tests say so and
//! pass, except under CI, where `.ci/run` builds it first and a missing one fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod support;

use miggate_crds::deploy::{self, Certificates, Config};
use rstest::rstest;
use serde_json::{Value, json};
use support::chart::{helm, object, template};

/// Helm's own labels go; numbers compare by value; empty maps and lists as absent.
fn normal(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut out = serde_json::Map::new();
            for (k, v) in m {
                if [
                    "app.kubernetes.io/managed-by",
                    "app.kubernetes.io/instance",
                    "helm.sh/chart",
                ]
                .contains(&k.as_str())
                {
                    continue;
                }
                out.insert(k.clone(), normal(v));
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(normal).collect()),
        Value::Number(n) => json!(n.as_f64()),
        other => other.clone(),
    }
}

fn key(v: &Value) -> String {
    format!(
        "{} {}/{}",
        v["kind"].as_str().unwrap_or("?"),
        v["metadata"]["namespace"].as_str().unwrap_or(""),
        v["metadata"]["name"].as_str().unwrap_or("?")
    )
}

fn sorted(objects: impl IntoIterator<Item = Value>) -> Vec<(String, Value)> {
    let mut out: Vec<(String, Value)> = objects.into_iter().map(|v| (key(&v), normal(&v))).collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// `miggate deploy`'s objects for `config`, less the release namespace.
fn deployed(config: &Config) -> Vec<(String, Value)> {
    sorted(
        deploy::objects(config)
            .unwrap()
            .into_iter()
            .map(|o| o.value)
            .filter(|v| !(v["kind"] == "Namespace" && v["metadata"]["name"] == deploy::NAMESPACE)),
    )
}

fn assert_same(chart: Vec<(String, Value)>, deploy: Vec<(String, Value)>) {
    let names = |v: &[(String, Value)]| v.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
    assert_eq!(names(&chart), names(&deploy), "the same objects");
    for ((k, c), (_, d)) in chart.iter().zip(&deploy) {
        assert_eq!(c, d, "{k} differs between the chart and miggate deploy");
    }
}

#[rstest]
#[case::defaults(&[], Config::default())]
#[case::image(&["image.repository=registry.example.com/miggate", "image.tag=0.1.0-rc1"], Config {
    image: "registry.example.com/miggate:0.1.0-rc1".into(), ..Config::default() })]
#[case::binders_waivers_and_agent(
    &["binders={system:kube-scheduler,system:serviceaccount:kai-scheduler:kai-scheduler}",
      "waivers.needPermission=true", "checkpointAgent.namespace=snapshot", "checkpointAgent.name=snapshot-agent"],
    Config {
        binders: vec!["system:kube-scheduler".into(), "system:serviceaccount:kai-scheduler:kai-scheduler".into()],
        waivers_need_permission: true,
        checkpoint_agent_namespace: "snapshot".into(),
        checkpoint_agent_name: "snapshot-agent".into(),
        ..Config::default()
    })]
#[case::api_server_cidrs(&["networkPolicy.apiServerCIDRs={10.0.0.0/24,192.168.7.3/32,fd00:10::/64}"], Config {
    api_server_cidrs: ["10.0.0.0/24", "192.168.7.3/32", "fd00:10::/64"].iter().map(|c| c.parse().unwrap()).collect(),
    ..Config::default() })]
#[case::cert_manager(&["certificates.mode=cert-manager"], Config {
    certificates: Certificates::CertManager, ..Config::default() })]
#[case::brought_secret(&["certificates.mode=secret", "certificates.secretName=my-tls", "certificates.caBundle=PEM"], Config {
    certificates: Certificates::Provided { secret: "my-tls".into(), ca_bundle: Some("PEM".into()) }, ..Config::default() })]
fn the_chart_renders_what_miggate_deploy_writes(#[case] sets: &[&str], #[case] config: Config) {
    let Some(chart) = template(sets) else { return };
    assert_same(sorted(chart.unwrap()), deployed(&config));
}

/// A misspelt or mistyped value is refused by the chart's schema, as a misspelt field is
/// refused everywhere else in miggate.
#[rstest]
#[case::misspelt_key("webhok.replicas=3", "additional properties 'webhok' not allowed")]
#[case::misspelt_nested("publisher.enabeld=false", "additional properties 'enabeld' not allowed")]
#[case::wrong_mode("certificates.mode=selfsigned", "/certificates/mode")]
#[case::secret_without_name("certificates.mode=secret", "/certificates/secretName")]
#[case::binder_that_would_end_a_cel_literal("binders[0]=a'b", "/binders/0")]
#[case::failure_policy("admission.failurePolicy=Open", "/admission/failurePolicy")]
#[case::zero_replicas("webhook.replicas=0", "/webhook/replicas")]
#[case::a_cidr_without_its_length(
    "networkPolicy.apiServerCIDRs[0]=10.0.0.7",
    "/networkPolicy/apiServerCIDRs/0"
)]
#[case::a_prefix_too_long(
    "networkPolicy.apiServerCIDRs[0]=10.0.0.0/33",
    "/networkPolicy/apiServerCIDRs/0"
)]
#[case::leading_zeros(
    "networkPolicy.apiServerCIDRs[0]=10.0.0.07/32",
    "/networkPolicy/apiServerCIDRs/0"
)]
#[case::a_host_name(
    "networkPolicy.apiServerCIDRs[0]=api.example.com/32",
    "/networkPolicy/apiServerCIDRs/0"
)]
#[case::a_range_named_twice(
    "networkPolicy.apiServerCIDRs={10.0.0.0/24,10.0.0.0/24}",
    "/networkPolicy/apiServerCIDRs"
)]
#[case::misspelt_cidrs(
    "networkPolicy.apiServerCidrs[0]=10.0.0.0/24",
    "additional properties 'apiServerCidrs' not allowed"
)]
#[case::runtime_class_with_a_space(
    "publisher.runtimeClassName=nvidia runtime",
    "/publisher/runtimeClassName"
)]
#[case::smi_path_relative("publisher.nvidiaSmiHostPath=opt/smi", "/publisher/nvidiaSmiHostPath")]
#[case::smi_path_ending_a_cel_literal("publisher.nvidiaSmiHostPath=/opt/a'b", "/publisher/nvidiaSmiHostPath")]
#[case::selector_value_ending_a_cel_literal(
    "admission.restorePodSelector.team=a'b",
    "/admission/restorePodSelector"
)]
// Helm's schema library names the wrong place for a property name (the refusal is right).
#[case::selector_key_with_a_space("admission.restorePodSelector.a b=c", "invalid propertyName 'a b'")]
#[case::client_ca_not_a_pem("admission.clientCA=not a certificate", "/admission/clientCA")]
#[case::smi_path_over_recovery_state(
    "publisher.nvidiaSmiHostPath=/run/miggate",
    "/publisher/nvidiaSmiHostPath"
)]
fn a_wrong_value_is_refused_naming_it(#[case] set: &str, #[case] names: &str) {
    let Some(rendered) = template(&[set]) else { return };
    let e = rendered.unwrap_err();
    assert!(e.contains(names), "{e}");
}

#[test]
fn strict_lint_is_clean() {
    let Some(lint) = helm(&["lint", "charts/miggate", "--strict"]) else {
        return;
    };
    let out = lint.unwrap();
    assert!(!out.contains("[WARNING]") && !out.contains("[ERROR]"), "{out}");
}

/// The chart's own values: steering off drops its configuration and the webhook stops
/// injecting it; an exempt label, selectors and scheduling land where a user expects.
#[test]
fn chart_only_values_land_where_expected() {
    let Some(chart) = template(&[
        "steering.enabled=false",
        "publisher.enabled=false",
        "admission.exemptNamespaceLabel=miggate.io/ignore",
        "admission.failurePolicy=Ignore",
        "admission.timeoutSeconds=10",
        "webhook.replicas=3",
        "webhook.nodeSelector.role=infra",
        "webhook.podDisruptionBudget.enabled=false",
    ]) else {
        return;
    };
    let chart = chart.unwrap();
    let find = |kind: &str, name: &str| object(&chart, kind, name);
    assert!(find("MutatingWebhookConfiguration", "miggate-steer").is_none());
    assert!(find("DaemonSet", "miggate-publish").is_none());
    assert!(find("PodDisruptionBudget", "miggate-webhook").is_none());
    let deployment = find("Deployment", "miggate-webhook").unwrap();
    assert_eq!(deployment["spec"]["replicas"], 3);
    assert_eq!(
        deployment["spec"]["template"]["spec"]["nodeSelector"]["role"],
        "infra"
    );
    let args: Vec<&str> = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(
        !args.contains(&"--inject-ca-into=mutating/miggate-steer"),
        "{args:?}"
    );
    let role = find("ClusterRole", "miggate-webhook").unwrap().to_string();
    assert!(!role.contains("miggate-steer"));
    let validating = find("ValidatingWebhookConfiguration", "miggate").unwrap();
    let restore = &validating["webhooks"][0];
    assert_eq!(restore["failurePolicy"], "Ignore");
    assert_eq!(restore["timeoutSeconds"], 10);
    assert_eq!(
        restore["namespaceSelector"]["matchExpressions"][1],
        json!({"key": "miggate.io/ignore", "operator": "DoesNotExist"})
    );
}

/// The publisher's RuntimeClass: `auto` finds no `nvidia` class when rendering without a
/// cluster (Helm's lookup is empty), a name is set as given, and "" sets none.
#[rstest]
#[case::auto(&[], None)]
#[case::named(&["publisher.runtimeClassName=nvidia-cdi"], Some("nvidia-cdi"))]
#[case::none(&["publisher.runtimeClassName="], None)]
fn the_publisher_runtime_class(#[case] sets: &[&str], #[case] want: Option<&str>) {
    let Some(chart) = template(sets) else { return };
    let chart = chart.unwrap();
    let daemonset = object(&chart, "DaemonSet", "miggate-publish").unwrap();
    assert_eq!(
        daemonset["spec"]["template"]["spec"]["runtimeClassName"].as_str(),
        want
    );
}

/// The test-only nvidia-smi folder: mounted read-only at its own path, named to the
/// publisher, and the one more host path the node namespace's policy lets it mount.
#[test]
fn a_recorded_nvidia_smi_is_handed_to_the_publisher() {
    let Some(chart) = template(&["publisher.nvidiaSmiHostPath=/var/lib/e2e/nvidia-smi"]) else {
        return;
    };
    let chart = chart.unwrap();
    let find = |kind: &str, name: &str| object(&chart, kind, name).unwrap();
    let pod = &find("DaemonSet", "miggate-publish")["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    assert!(
        container["env"]
            .as_array()
            .unwrap()
            .contains(&json!({"name": "MIGGATE_NVIDIA_SMI", "value": "/var/lib/e2e/nvidia-smi/nvidia-smi"})),
        "{container}"
    );
    assert!(
        container["volumeMounts"].as_array().unwrap().contains(
            &json!({"mountPath": "/var/lib/e2e/nvidia-smi", "name": "nvidia-smi", "readOnly": true})
        ),
        "{container}"
    );
    assert!(pod["volumes"].as_array().unwrap().contains(&json!(
        {"hostPath": {"path": "/var/lib/e2e/nvidia-smi", "type": "Directory"}, "name": "nvidia-smi"}
    )));
    let policy = find("ValidatingAdmissionPolicy", "miggate-node-pods").to_string();
    assert!(
        policy.contains("v.hostPath.path in ['/run/miggate', '/var/lib/e2e/nvidia-smi']"),
        "{policy}"
    );
}

/// `admission.clientCA`: the webhook asks callers for a certificate of that CA, read from a
/// ConfigMap mounted read-only, and a new CA rolls the replicas.
#[test]
fn a_client_ca_is_handed_to_the_webhook() {
    const PEM: &str = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n";
    let Some(chart) = template(&[&format!("admission.clientCA={PEM}")]) else {
        return;
    };
    let chart = chart.unwrap();
    let find = |kind: &str, name: &str| object(&chart, kind, name).unwrap();
    let ca = find("ConfigMap", "miggate-webhook-client-ca");
    assert_eq!(ca["data"]["ca.crt"], PEM);
    let template = &find("Deployment", "miggate-webhook")["spec"]["template"];
    let container = &template["spec"]["containers"][0];
    assert!(
        container["args"]
            .as_array()
            .unwrap()
            .contains(&json!("--client-ca=/client-ca/ca.crt")),
        "{container}"
    );
    assert!(
        container["volumeMounts"]
            .as_array()
            .unwrap()
            .contains(&json!({"mountPath": "/client-ca", "name": "client-ca", "readOnly": true})),
        "{container}"
    );
    assert!(
        template["spec"]["volumes"]
            .as_array()
            .unwrap()
            .contains(&json!({"configMap": {"name": "miggate-webhook-client-ca"}, "name": "client-ca"}))
    );
    assert_eq!(
        template["metadata"]["annotations"]["miggate.io/client-ca-sha256"]
            .as_str()
            .map(str::len),
        Some(64)
    );
    let Some(none) = template_of(&[]) else { return };
    let deployment = object(&none, "Deployment", "miggate-webhook").unwrap();
    assert!(!deployment.to_string().contains("client-ca"), "{deployment}");
}

/// The policies that hold the webhook's own account come with self-managed certificates only
/// (the other modes give that account no write at all).
#[rstest]
#[case::self_managed(&[], true)]
#[case::cert_manager(&["certificates.mode=cert-manager"], false)]
#[case::brought_secret(&["certificates.mode=secret", "certificates.secretName=my-tls"], false)]
fn the_webhook_account_is_held_where_it_writes(#[case] sets: &[&str], #[case] held: bool) {
    let Some(chart) = template_of(sets) else { return };
    for name in ["miggate-webhook-configurations", "miggate-webhook-certs"] {
        assert_eq!(
            object(&chart, "ValidatingAdmissionPolicy", name).is_some(),
            held,
            "{name}"
        );
        assert_eq!(
            object(&chart, "ValidatingAdmissionPolicyBinding", name).is_some(),
            held,
            "{name}"
        );
    }
}

fn template_of(sets: &[&str]) -> Option<Vec<Value>> {
    Some(template(sets)?.unwrap())
}

/// `admission.objectSelector` scopes the pod webhooks (restore, steering) and never the
/// binding webhooks: a scheduler's Binding has no labels, so a selector there would let every
/// binding through unchecked.
#[test]
fn an_object_selector_never_reaches_the_binding_webhooks() {
    let Some(chart) = template(&["admission.objectSelector.matchLabels.team=ml"]) else {
        return;
    };
    let chart = chart.unwrap();
    let mut seen = Vec::new();
    for configuration in chart.iter().filter(|v| {
        v["kind"]
            .as_str()
            .is_some_and(|k| k.ends_with("WebhookConfiguration"))
    }) {
        for webhook in configuration["webhooks"].as_array().unwrap() {
            let name = webhook["name"].as_str().unwrap();
            let selected = webhook.get("objectSelector").is_some();
            seen.push((name.to_string(), selected));
        }
    }
    seen.sort();
    assert_eq!(
        seen,
        [
            ("binding.miggate.io", false),
            ("device-map.miggate.io", false),
            ("restore.miggate.io", true),
            ("steer.miggate.io", true),
            ("summary.miggate.io", false),
        ]
        .map(|(n, s)| (n.to_string(), s))
    );
}

/// `admission.restorePodSelector`: the webhook watches (and checks) restore pods by those
/// labels, and a restore pod keeps them once it exists, while any other label, and a pod that
/// never had them, stays writable (a kubelet's status update of an older pod included).
#[rstest]
#[case::label_kept(&[("miggate.io/restore", "true"), ("team", "ml")], &[("miggate.io/restore", "true"), ("team", "ml"), ("x", "y")], true, false)]
#[case::label_removed(&[("miggate.io/restore", "true"), ("team", "ml")], &[("team", "ml")], true, true)]
#[case::label_changed(&[("miggate.io/restore", "true"), ("team", "ml")], &[("miggate.io/restore", "false"), ("team", "ml")], true, true)]
#[case::second_label_removed(&[("miggate.io/restore", "true"), ("team", "ml")], &[("miggate.io/restore", "true")], true, true)]
#[case::never_had_them(&[], &[("x", "y")], true, false)]
#[case::not_a_restore_pod(&[("miggate.io/restore", "true")], &[], false, false)]
fn restore_pods_keep_the_selected_labels(
    #[case] old: &[(&str, &str)],
    #[case] new: &[(&str, &str)],
    #[case] restore: bool,
    #[case] refused: bool,
) {
    let Some(chart) = template_of(&[
        "admission.restorePodSelector.miggate\\.io/restore=true",
        "admission.restorePodSelector.team=ml",
    ]) else {
        return;
    };
    let args =
        object(&chart, "Deployment", "miggate-webhook").unwrap()["spec"]["template"]["spec"]["containers"][0]
            ["args"]
            .clone();
    assert!(
        args.as_array()
            .unwrap()
            .contains(&json!("--restore-pod-selector=miggate.io/restore=true,team=ml")),
        "{args}"
    );
    let policy = object(&chart, "ValidatingAdmissionPolicy", "miggate-restore-pod-labels").unwrap();
    let pod = |labels: &[(&str, &str)]| {
        let mut p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "r1", "namespace": "ml",
            "labels": labels.iter().map(|(k, v)| ((*k).to_string(), json!(v))).collect::<serde_json::Map<_, _>>()}});
        if restore {
            p["metadata"]["annotations"] = json!({"miggate.io/restore-from": "ckpt"});
        }
        p
    };
    let req = support::admission("UPDATE", "pods", "ml", "alice", None, pod(new), Some(pod(old)));
    let verdict = support::policy_verdict(policy, &req);
    if !restore {
        assert_eq!(verdict, None);
        return;
    }
    let failed = verdict.unwrap();
    assert_eq!(!failed.is_empty(), refused, "{failed:?}");
    let Some(none) = template_of(&[]) else { return };
    assert!(object(&none, "ValidatingAdmissionPolicy", "miggate-restore-pod-labels").is_none());
}
