//! The Helm chart (`charts/miggate`), the install's one source, rendered by the real `helm` (v4,
//! built from its Go module by `e2e/cluster.sh tools`, the one the e2e suite installs with):
//! `deploy/` is what it renders with its defaults, the schema refuses typos, and each value
//! lands where it must.
//!
//! `UPDATE_DEPLOY=1 cargo test -p miggate-crds --test chart` renders `deploy/` again.
//!
//! The binary is `MIGGATE_HELM`, else `target/e2e/bin/helm`. Without one these tests say so and
//! pass, except under CI, where `.ci/run` builds it first and a missing one fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod support;

use std::path::{Path, PathBuf};

use rstest::rstest;
use serde_json::{Value, json};
use support::chart::{helm, object, rendered, root, template};

/// Helm's own labels, which an install without Helm must not claim.
const HELM_LABELS: [&str; 3] = [
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/instance",
    "helm.sh/chart",
];

/// What `deploy/` is rendered with: the chart's defaults, and the release namespace made by the
/// chart (an install without Helm has no `--create-namespace`).
const DEPLOY_SETS: [&str; 1] = ["createNamespace=true"];

const DEPLOY_HEADER: &str = "# Rendered from charts/miggate with its defaults by `helm template`; do not edit \
(UPDATE_DEPLOY=1 cargo test -p miggate-crds --test chart, docs/deploy.md).\n";

/// Drops Helm's own labels from every `labels` map of `value`, at any depth (pod templates'
/// too), walking with a stack.
fn without_helm_labels(mut value: Value) -> Value {
    let mut stack = vec![&mut value];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(map) => {
                if let Some(Value::Object(labels)) = map.get_mut("labels") {
                    labels.retain(|k, _| !HELM_LABELS.contains(&k.as_str()));
                }
                stack.extend(map.values_mut());
            }
            Value::Array(items) => stack.extend(items.iter_mut()),
            _ => {}
        }
    }
    value
}

/// The files of `deploy/` from `helm template`'s output: each template's objects in the file of
/// its name (the CRDs in `crds.yaml`), without Helm's labels, in the order helm installs
/// them, and `kustomization.yaml` listing them (`kubectl apply -k deploy/`).
fn deploy_files(stream: &str) -> Vec<(String, String)> {
    let mut files: Vec<(String, Vec<Value>)> = Vec::new();
    let mut source = String::new();
    let mut text = String::new();
    let mut flush = |source: &str, text: &mut String| {
        let doc: Value = serde_saphyr::from_str(text).unwrap();
        text.clear();
        if doc.is_null() {
            return;
        }
        let file = match Path::new(source).file_name() {
            Some(_) if source.contains("/crds/") => "crds.yaml".to_string(),
            Some(name) => name.to_string_lossy().into_owned(),
            None => panic!("a document of helm template with no # Source: {doc}"),
        };
        let doc = without_helm_labels(doc);
        match files.iter_mut().find(|(f, _)| *f == file) {
            Some((_, docs)) => docs.push(doc),
            None => files.push((file, vec![doc])),
        }
    };
    for line in stream.lines() {
        if line == "---" {
            flush(&source, &mut text);
            continue;
        }
        if let Some(s) = line.strip_prefix("# Source: ") {
            source = s.to_string();
        }
        text.push_str(line);
        text.push('\n');
    }
    flush(&source, &mut text);
    let yaml = |v: &Value| serde_saphyr::to_string(v).unwrap();
    let mut out: Vec<(String, String)> = files
        .iter()
        .map(|(file, docs)| {
            let docs: Vec<String> = docs.iter().map(yaml).collect();
            (file.clone(), format!("{DEPLOY_HEADER}{}", docs.join("---\n")))
        })
        .collect();
    let kustomization = json!({
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": files.iter().map(|(f, _)| f.as_str()).collect::<Vec<_>>(),
    });
    out.push((
        "kustomization.yaml".into(),
        format!("{DEPLOY_HEADER}{}", yaml(&kustomization)),
    ));
    out
}

fn deploy_dir() -> PathBuf {
    root().join("deploy")
}

/// `deploy/` is the chart rendered with its defaults: a value, template or CRD changed without
/// rendering it again fails here, and so does a file left over from an older render (`kubectl
/// apply -k` would still apply what its kustomization lists, `-f deploy/` every file).
#[test]
fn the_checked_in_install_is_the_chart_rendered_with_its_defaults() {
    let mut args = vec![
        "template",
        "miggate",
        "charts/miggate",
        "--namespace",
        "miggate-system",
        "--include-crds",
    ];
    for s in DEPLOY_SETS {
        args.extend(["--set", s]);
    }
    let Some(stream) = helm(&args) else { return };
    let files = deploy_files(&stream.unwrap());
    let update = std::env::var_os("UPDATE_DEPLOY").is_some_and(|v| v == "1");
    let mut drifted = Vec::new();
    for entry in std::fs::read_dir(deploy_dir()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_file() && !files.iter().any(|(f, _)| *f == name) {
            if update {
                std::fs::remove_file(&path).unwrap();
            } else {
                drifted.push(format!("{name} (not rendered)"));
            }
        }
    }
    for (file, content) in &files {
        let path = deploy_dir().join(file);
        if update {
            std::fs::write(&path, content).unwrap();
        } else if std::fs::read_to_string(&path).unwrap_or_default() != *content {
            drifted.push(file.clone());
        }
    }
    assert!(
        drifted.is_empty(),
        "deploy/ {drifted:?} differ from the chart rendered with its defaults; run \
         `UPDATE_DEPLOY=1 cargo test -p miggate-crds --test chart` and review the diff"
    );
}

/// What an install without Helm applies is every object `helm install` makes, the release
/// namespace included, and nothing else: the same names, Helm's labels aside.
#[test]
fn the_rendered_install_has_every_object_of_the_chart() {
    let Some(chart) = rendered(&[]) else { return };
    let key = |v: &Value| {
        format!(
            "{} {}/{}",
            v["kind"], v["metadata"]["namespace"], v["metadata"]["name"]
        )
    };
    let mut from_chart: Vec<String> = chart.iter().map(key).collect();
    from_chart.push(key(
        &json!({"kind": "Namespace", "metadata": {"name": "miggate-system"}}),
    ));
    from_chart.sort();
    let mut deployed: Vec<String> = support::installed().iter().map(key).collect();
    deployed.sort();
    assert_eq!(deployed, from_chart);
    let namespace = support::find(&support::installed(), "Namespace", "miggate-system").clone();
    assert_eq!(
        namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "restricted"
    );
}

/// A misspelt or mistyped value is refused by the chart's schema, as a misspelt field is
/// refused everywhere else in miggate.
#[rstest]
#[case::misspelt_key("webhok.replicas=3", "additional properties 'webhok' not allowed")]
#[case::misspelt_nested("publisher.enabeld=false", "additional properties 'enabeld' not allowed")]
#[case::wrong_mode("certificates.mode=selfsigned", "/certificates/mode")]
#[case::secret_without_name("certificates.mode=secret", "/certificates/secretName")]
#[case::binder_that_would_end_a_cel_literal("binders[0]=a'b", "/binders/0")]
#[case::binders_removed("binders=null", "missing property 'binders'")]
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
#[case::host_bits_set(
    "networkPolicy.apiServerCIDRs[0]=10.0.0.7/24",
    "10.0.0.7/24 has host bits set: its network is 10.0.0.0/24; for the one address write 10.0.0.7/32"
)]
#[case::ipv6_host_bits(
    "networkPolicy.apiServerCIDRs[0]=fd00:10::7/64",
    "fd00:10::7/64 has host bits set: its network is fd00:10::/64; for the one address write fd00:10::7/128"
)]
#[case::ipv6_spelt_long(
    "networkPolicy.apiServerCIDRs[0]=fd00:0010:0000::/64",
    "fd00:0010:0000::/64 is not in canonical form: write fd00:10::/64"
)]
#[case::ipv6_zeros_not_compressed(
    "networkPolicy.apiServerCIDRs[0]=1:0:0:2:0:0:0:3/128",
    "is not in canonical form: write 1:0:0:2::3/128"
)]
#[case::ipv6_shorter_run_compressed(
    "networkPolicy.apiServerCIDRs[0]=1::2:0:0:0:3/128",
    "is not in canonical form: write 1:0:0:2::3/128"
)]
#[case::ipv4_mapped(
    "networkPolicy.apiServerCIDRs[0]=::ffff:a00:0/120",
    "is an IPv4-mapped IPv6 range, which Kubernetes does not take"
)]
#[case::two_compressions("networkPolicy.apiServerCIDRs[0]=a::b::c/64", "a::b::c/64 is not a CIDR")]
#[case::a_cidr_after_a_good_one(
    "networkPolicy.apiServerCIDRs={10.0.0.0/24,192.168.7.3/24}",
    "192.168.7.3/24 has host bits set"
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

/// Every `miggate.io/…` and `nvidia.com/…` key the templates spell (annotations the policies
/// lock, labels, the webhooks' match conditions) is one `miggate_wire` owns, so a key renamed
/// there cannot leave the chart guarding the old one.
#[test]
fn every_key_the_templates_spell_is_one_wire_owns() {
    use miggate_wire::{annotations, install, nvidia, peer};
    let owned = [
        annotations::RESTORE_FROM,
        annotations::SKIP_CHECKS,
        annotations::STEER,
        annotations::STEERED,
        annotations::DEVICE_MAP,
        peer::RESTORE_FROM,
        peer::RESTORE_CONTAINER_MAP,
        peer::SKIP_COMPAT_CHECK,
        install::CLIENT_CA_DIGEST,
        nvidia::GPU_RESOURCE,
        nvidia::GPU_PRESENT,
        nvidia::GPU_PRODUCT,
        nvidia::GPU_COUNT,
        nvidia::MIG_STRATEGY,
        nvidia::MIG_CAPABLE,
        nvidia::MIG_CONFIG,
        nvidia::MIG_CONFIG_STATE,
    ];
    let key = regex::Regex::new(r"\b(?:miggate\.io|nvidia\.com)/[A-Za-z0-9][A-Za-z0-9._-]*").unwrap();
    let mut spelt = Vec::new();
    for entry in std::fs::read_dir(root().join("charts/miggate/templates")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        for m in key.find_iter(&text) {
            // A MIG resource names its profile after the prefix wire owns.
            let known = owned.contains(&m.as_str()) || m.as_str().starts_with(nvidia::MIG_RESOURCE_PREFIX);
            assert!(
                known,
                "{} spells {}, which miggate_wire does not own",
                path.display(),
                m.as_str()
            );
            spelt.push(m.as_str().to_string());
        }
    }
    // The policies lock every restore annotation, miggate's and the peer's.
    for k in [
        annotations::RESTORE_FROM,
        annotations::SKIP_CHECKS,
        annotations::DEVICE_MAP,
        peer::RESTORE_FROM,
    ] {
        assert!(spelt.iter().any(|s| s == k), "no template spells {k}");
    }
}

/// The objects miggate's own code looks for (the webhook its configurations and Secret, the
/// doctor all of them) are rendered under the names `miggate_wire::install` gives.
#[test]
fn the_install_has_the_names_wire_gives() {
    use miggate_wire::install;
    let objects = support::installed();
    let namespaced = |kind: &str, ns: &str, name: &str| {
        assert_eq!(
            support::find(&objects, kind, name)["metadata"]["namespace"],
            ns,
            "{kind} {name}"
        );
    };
    namespaced("Deployment", install::NAMESPACE, install::WEBHOOK);
    namespaced("Service", install::NAMESPACE, install::WEBHOOK);
    namespaced("Secret", install::NAMESPACE, install::CERT_SECRET);
    namespaced("DaemonSet", install::NODE_NAMESPACE, install::PUBLISHER);
    support::find(&objects, "Namespace", install::NAMESPACE);
    support::find(&objects, "Namespace", install::NODE_NAMESPACE);
    support::find(
        &objects,
        "ValidatingWebhookConfiguration",
        install::VALIDATING_CONFIGURATION,
    );
    for name in install::MUTATING_CONFIGURATIONS {
        support::find(&objects, "MutatingWebhookConfiguration", name);
    }
    let publisher = support::find(&objects, "DaemonSet", install::PUBLISHER);
    assert!(
        publisher.to_string().contains(install::RECOVERY_HOST_PATH),
        "the publisher mounts {}",
        install::RECOVERY_HOST_PATH
    );
    let Some(cert_manager) = rendered(&["certificates.mode=cert-manager"]) else {
        return;
    };
    assert_eq!(
        object(&cert_manager, "Certificate", install::WEBHOOK).unwrap()["spec"]["secretName"],
        install::CERT_MANAGER_SECRET
    );
}
