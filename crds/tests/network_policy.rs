//! The webhook's generated NetworkPolicy, evaluated as the network plugin would for the
//! sources that matter: the API server (from outside the pod network, or from a pod), any pod
//! of the cluster, Prometheus in the monitoring namespace. The kubelet's probes come from the
//! pod's own node, which NetworkPolicy always allows, so they need no rule.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicyPeer};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use miggate_crds::deploy::network_policy::MONITORING_NAMESPACE;
use miggate_crds::deploy::{self, Config, Object};
use rstest::rstest;

fn objects() -> Vec<Object> {
    deploy::objects(&Config::default()).unwrap()
}

fn typed<K: serde::de::DeserializeOwned>(kind: &str, name: &str) -> K {
    let objects = objects();
    let o = objects
        .iter()
        .find(|o| o.kind().1 == kind && o.name() == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"));
    serde_json::from_value(o.value.clone()).unwrap()
}

/// Where a connection comes from.
#[derive(Debug, Clone, Copy)]
enum Source {
    /// Outside the pod network (a control-plane node, a provider's range).
    Outside,
    /// A pod in this namespace.
    Pod(&'static str),
}

fn peer_matches(peer: &NetworkPolicyPeer, source: Source) -> bool {
    assert!(peer.ip_block.is_none(), "ipBlock is not modelled here");
    let Source::Pod(namespace) = source else {
        return false;
    };
    let ns_ok = peer.namespace_selector.as_ref().is_some_and(|sel| {
        assert!(
            sel.match_expressions.is_none(),
            "matchExpressions are not modelled here"
        );
        sel.match_labels.as_ref().is_none_or(|labels| {
            labels
                .iter()
                .all(|(k, v)| k == "kubernetes.io/metadata.name" && v == namespace)
        })
    });
    let pods_ok = peer
        .pod_selector
        .as_ref()
        .is_none_or(|sel| sel.match_labels.is_none() && sel.match_expressions.is_none());
    ns_ok && pods_ok
}

/// Whether the policy admits `source` to the container port `port` (its name and number).
fn allowed(policy: &NetworkPolicy, source: Source, port: (&str, i32)) -> bool {
    let spec = policy.spec.as_ref().unwrap();
    spec.ingress.as_deref().unwrap_or_default().iter().any(|rule| {
        let port_ok = rule.ports.as_deref().is_none_or(|ports| {
            ports.iter().any(|p| match &p.port {
                Some(IntOrString::String(name)) => name == port.0,
                Some(IntOrString::Int(n)) => *n == port.1,
                None => true,
            })
        });
        let from_ok = rule
            .from
            .as_deref()
            .is_none_or(|from| from.is_empty() || from.iter().any(|peer| peer_matches(peer, source)));
        port_ok && from_ok
    })
}

#[rstest]
#[case::api_server_from_outside(Source::Outside, "https", true)]
#[case::api_server_or_any_pod(Source::Pod("ml"), "https", true)]
#[case::prometheus_scrapes(Source::Pod(MONITORING_NAMESPACE), "health", true)]
#[case::a_pod_elsewhere_cannot_reach_metrics(Source::Pod("ml"), "health", false)]
#[case::a_pod_of_the_webhooks_namespace_cannot_either(Source::Pod("miggate-system"), "health", false)]
#[case::nothing_outside_reaches_metrics(Source::Outside, "health", false)]
fn who_reaches_which_port(#[case] source: Source, #[case] port: &str, #[case] expected: bool) {
    let policy: NetworkPolicy = typed("NetworkPolicy", "miggate-webhook");
    let deployment: Deployment = typed("Deployment", "miggate-webhook");
    let container = &deployment.spec.unwrap().template.spec.unwrap().containers[0];
    let number = container
        .ports
        .as_deref()
        .unwrap()
        .iter()
        .find(|p| p.name.as_deref() == Some(port))
        .unwrap_or_else(|| panic!("the webhook has no port named {port}"))
        .container_port;
    assert_eq!(
        allowed(&policy, source, (port, number)),
        expected,
        "{source:?} -> {port}"
    );
}

#[test]
fn the_policy_selects_the_webhook_pods_and_only_ingress() {
    let policy: NetworkPolicy = typed("NetworkPolicy", "miggate-webhook");
    let deployment: Deployment = typed("Deployment", "miggate-webhook");
    let spec = policy.spec.unwrap();
    let pod_labels = deployment
        .spec
        .unwrap()
        .template
        .metadata
        .unwrap()
        .labels
        .unwrap();
    let selector = spec.pod_selector.unwrap().match_labels.unwrap();
    assert!(!selector.is_empty());
    for (k, v) in &selector {
        assert_eq!(
            pod_labels.get(k),
            Some(v),
            "the selector {k}={v} misses the webhook's pods"
        );
    }
    // Egress is left alone: the webhook watches the API server, wherever it is.
    assert_eq!(spec.policy_types.unwrap(), ["Ingress"]);
    assert_eq!(policy.metadata.namespace.as_deref(), Some("miggate-system"));
}
