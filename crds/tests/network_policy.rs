//! The webhook's NetworkPolicy as the chart renders it, evaluated as the network plugin would
//! for the sources that matter: the API server (from outside the pod network, or from a pod),
//! any pod of the cluster, Prometheus in the monitoring namespace; with the API server's
//! addresses named (`networkPolicy.apiServerCIDRs`), and without (`deploy/`). The kubelet's
//! probes come from the pod's own node, which NetworkPolicy always allows, so they need no
//! rule. The CIDRs the chart takes, and those it refuses naming the value.
//!
//! Named addresses are rendered by the real `helm`; without one, outside CI, those cases say
//! so and pass.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::net::IpAddr;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicyPeer};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use miggate_wire::install::{NAMESPACE, WEBHOOK};
use rstest::rstest;
use serde_json::Value;

/// The namespace Prometheus runs in by the chart's default (`networkPolicy.metricsFrom`).
const MONITORING: &str = "monitoring";

/// The install's object of `kind` named `name`, as its typed kind.
fn typed_in<K: serde::de::DeserializeOwned + serde::Serialize>(
    objects: &[Value],
    kind: &str,
    name: &str,
) -> K {
    support::typed(support::find(objects, kind, name))
}

/// The install with the API server's addresses `cidrs`: `deploy/` (the chart's defaults) when
/// there are none, else the chart rendered with them; `None` when there is no helm, outside CI.
fn install(cidrs: &[&str]) -> Option<Vec<Value>> {
    if cidrs.is_empty() {
        return Some(support::installed());
    }
    support::chart::rendered(&[&format!("networkPolicy.apiServerCIDRs={{{}}}", cidrs.join(","))])
}

/// Where a connection comes from.
#[derive(Debug, Clone, Copy)]
enum Source {
    /// Outside the pod network (a control-plane node, a provider's range), from this address.
    Outside(&'static str),
    /// A pod in this namespace, with this address.
    Pod(&'static str, &'static str),
}

/// An `ipBlock` admits the addresses in its CIDR but those of its `except` ranges; it selects
/// by address alone, a pod's as well as any other's.
fn block_admits(block: &k8s_openapi::api::networking::v1::IPBlock, address: &str) -> bool {
    let address: IpAddr = address.parse().unwrap();
    let within = |cidr: &str| cidr.parse::<ipnet::IpNet>().unwrap().contains(&address);
    within(&block.cidr) && !block.except.iter().flatten().any(|e| within(e))
}

fn peer_matches(peer: &NetworkPolicyPeer, source: Source) -> bool {
    let (Source::Outside(address) | Source::Pod(_, address)) = source;
    if let Some(block) = &peer.ip_block {
        assert!(peer.namespace_selector.is_none() && peer.pod_selector.is_none());
        return block_admits(block, address);
    }
    let Source::Pod(namespace, _) = source else {
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

const API_SERVER: &str = "10.0.0.7";
const API_SERVER_V6: &str = "fd00:10::7";
const A_POD: &str = "10.244.3.9";

/// The webhook's port named `port`: its number, from the Deployment.
fn port_number(objects: &[Value], port: &str) -> i32 {
    let deployment: Deployment = typed_in(objects, "Deployment", WEBHOOK);
    let container = &deployment.spec.unwrap().template.spec.unwrap().containers[0];
    container
        .ports
        .as_deref()
        .unwrap()
        .iter()
        .find(|p| p.name.as_deref() == Some(port))
        .unwrap_or_else(|| panic!("the webhook has no port named {port}"))
        .container_port
}

#[rstest]
#[case::api_server_from_outside(&[], Source::Outside(API_SERVER), "https", true)]
#[case::api_server_or_any_pod(&[], Source::Pod("ml", A_POD), "https", true)]
#[case::prometheus_scrapes(&[], Source::Pod(MONITORING, A_POD), "health", true)]
#[case::a_pod_elsewhere_cannot_reach_metrics(&[], Source::Pod("ml", A_POD), "health", false)]
#[case::a_pod_of_the_webhooks_namespace_cannot_either(&[], Source::Pod("miggate-system", A_POD), "health", false)]
#[case::nothing_outside_reaches_metrics(&[], Source::Outside(API_SERVER), "health", false)]
// With the API server's addresses named, they alone reach the admission port.
#[case::named_the_api_server_reaches_it(&["10.0.0.0/24"], Source::Outside(API_SERVER), "https", true)]
#[case::named_one_address(&["10.0.0.7/32"], Source::Outside(API_SERVER), "https", true)]
#[case::named_over_ipv6(&["10.0.0.0/24", "fd00:10::/64"], Source::Outside(API_SERVER_V6), "https", true)]
#[case::named_a_pod_cannot(&["10.0.0.0/24"], Source::Pod("ml", A_POD), "https", false)]
#[case::named_another_address_cannot(&["10.0.0.8/32"], Source::Outside(API_SERVER), "https", false)]
#[case::named_prometheus_still_scrapes(&["10.0.0.0/24"], Source::Pod(MONITORING, A_POD), "health", true)]
#[case::named_the_api_server_cannot_reach_metrics(&["10.0.0.0/24"], Source::Outside(API_SERVER), "health", false)]
fn who_reaches_which_port(
    #[case] api_server: &[&str],
    #[case] source: Source,
    #[case] port: &str,
    #[case] expected: bool,
) {
    let Some(objects) = install(api_server) else {
        return;
    };
    let policy: NetworkPolicy = typed_in(&objects, "NetworkPolicy", WEBHOOK);
    let number = port_number(&objects, port);
    assert_eq!(
        allowed(&policy, source, (port, number)),
        expected,
        "{source:?} -> {port}"
    );
}

/// A CIDR in the form the API server keeps is rendered as given; another form is refused by
/// the chart's schema, naming the value. (An address without its length, a length over 32, a
/// host name, a range named twice, host bits set and IPv6 not in canonical form:
/// tests/chart.rs.)
#[rstest]
#[case::ipv4("10.0.0.0/24", true)]
#[case::one_address("10.0.0.7/32", true)]
#[case::ipv6("fd00:10::/64", true)]
#[case::everything("0.0.0.0/0", true)]
#[case::ipv6_in_capitals("FD00:10::/64", false)]
#[case::ipv4_mapped("::ffff:10.0.0.0/120", false)]
#[case::control_characters("10.0.0.0/24\n", false)]
fn a_cidr_is_taken_only_as_the_api_server_keeps_it(#[case] text: &str, #[case] taken: bool) {
    let set = format!("networkPolicy.apiServerCIDRs[0]={text}");
    let Some(rendered) = support::chart::template(&[&set]) else {
        return;
    };
    if !taken {
        let e = rendered.unwrap_err();
        assert!(e.contains("/networkPolicy/apiServerCIDRs/0"), "{text}: {e}");
        return;
    }
    let objects = rendered.unwrap_or_else(|e| panic!("{text}: {e}"));
    let policy: NetworkPolicy = typed_in(&objects, "NetworkPolicy", WEBHOOK);
    let from = policy.spec.unwrap().ingress.unwrap()[0].from.clone().unwrap();
    let cidrs: Vec<&str> = from
        .iter()
        .map(|p| p.ip_block.as_ref().unwrap().cidr.as_str())
        .collect();
    assert_eq!(cidrs, [text]);
}

#[test]
fn the_policy_selects_the_webhook_pods_and_only_ingress() {
    let objects = support::installed();
    let policy: NetworkPolicy = typed_in(&objects, "NetworkPolicy", WEBHOOK);
    let deployment: Deployment = typed_in(&objects, "Deployment", WEBHOOK);
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
    assert_eq!(policy.metadata.namespace.as_deref(), Some(NAMESPACE));
}
