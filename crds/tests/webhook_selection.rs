//! Which admission requests each webhook configuration of the install (`deploy/`, the chart
//! rendered with its defaults) sends its webhook, as the API server decides it (rules,
//! namespace selector, match conditions): restore pods and bindings to the validating
//! webhooks, restore pods asking for it to steering, every GpuCheckpoint and GpuNode write to
//! the summary, every binding to the device map; and each webhook's failure policy, timeout and
//! path.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use miggate_wire::install::{MUTATING_CONFIGURATIONS, VALIDATING_CONFIGURATION};
use rstest::rstest;
use serde_json::{Value, json};
use support::find;

/// The chart's defaults: `deploy/`.
fn objects() -> Vec<Value> {
    support::installed()
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
    let config = find(
        &objects,
        "ValidatingWebhookConfiguration",
        VALIDATING_CONFIGURATION,
    );
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
    let config = find(
        &objects,
        "ValidatingWebhookConfiguration",
        VALIDATING_CONFIGURATION,
    );
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
    let config = find(
        &objects,
        "MutatingWebhookConfiguration",
        MUTATING_CONFIGURATIONS[1],
    );
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
    let config = find(
        &objects,
        "MutatingWebhookConfiguration",
        MUTATING_CONFIGURATIONS[0],
    );
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
    let config = find(
        &objects,
        "MutatingWebhookConfiguration",
        MUTATING_CONFIGURATIONS[2],
    );
    let webhook = &config["webhooks"][0];
    assert_eq!(webhook_called(webhook, &req), called);
    // Never blocks a binding, never runs twice, writes nothing but its answer.
    assert_eq!(webhook["failurePolicy"], "Ignore");
    assert_eq!(webhook["reinvocationPolicy"], "Never");
    assert_eq!(webhook["sideEffects"], "None");
    assert_eq!(webhook["clientConfig"]["service"]["path"], "/mutate-binding");
}
