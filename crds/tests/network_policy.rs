//! The webhook's generated NetworkPolicy, evaluated as the network plugin would for the
//! sources that matter: the API server (from outside the pod network, or from a pod), any pod
//! of the cluster, Prometheus in the monitoring namespace; with the API server's addresses
//! named, and without. The kubelet's probes come from the pod's own node, which NetworkPolicy
//! always allows, so they need no rule.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::IpAddr;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicyPeer};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use miggate_crds::deploy::network_policy::{Cidr, MONITORING_NAMESPACE};
use miggate_crds::deploy::{self, Config, Object};
use rstest::rstest;

fn objects() -> Vec<Object> {
    deploy::objects(&Config::default()).unwrap()
}

fn typed<K: serde::de::DeserializeOwned>(kind: &str, name: &str) -> K {
    typed_in(&objects(), kind, name)
}

fn typed_in<K: serde::de::DeserializeOwned>(objects: &[Object], kind: &str, name: &str) -> K {
    let o = objects
        .iter()
        .find(|o| o.kind().1 == kind && o.name() == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"));
    serde_json::from_value(o.value.clone()).unwrap()
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
fn port_number(objects: &[Object], port: &str) -> i32 {
    let deployment: Deployment = typed_in(objects, "Deployment", "miggate-webhook");
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
#[case::prometheus_scrapes(&[], Source::Pod(MONITORING_NAMESPACE, A_POD), "health", true)]
#[case::a_pod_elsewhere_cannot_reach_metrics(&[], Source::Pod("ml", A_POD), "health", false)]
#[case::a_pod_of_the_webhooks_namespace_cannot_either(&[], Source::Pod("miggate-system", A_POD), "health", false)]
#[case::nothing_outside_reaches_metrics(&[], Source::Outside(API_SERVER), "health", false)]
// With the API server's addresses named, they alone reach the admission port.
#[case::named_the_api_server_reaches_it(&["10.0.0.0/24"], Source::Outside(API_SERVER), "https", true)]
#[case::named_one_address(&["10.0.0.7/32"], Source::Outside(API_SERVER), "https", true)]
#[case::named_over_ipv6(&["10.0.0.0/24", "fd00:10::/64"], Source::Outside(API_SERVER_V6), "https", true)]
#[case::named_a_pod_cannot(&["10.0.0.0/24"], Source::Pod("ml", A_POD), "https", false)]
#[case::named_another_address_cannot(&["10.0.0.8/32"], Source::Outside(API_SERVER), "https", false)]
#[case::named_prometheus_still_scrapes(&["10.0.0.0/24"], Source::Pod(MONITORING_NAMESPACE, A_POD), "health", true)]
#[case::named_the_api_server_cannot_reach_metrics(&["10.0.0.0/24"], Source::Outside(API_SERVER), "health", false)]
fn who_reaches_which_port(
    #[case] api_server: &[&str],
    #[case] source: Source,
    #[case] port: &str,
    #[case] expected: bool,
) {
    let config = Config {
        api_server_cidrs: api_server.iter().map(|c| c.parse().unwrap()).collect(),
        ..Config::default()
    };
    let objects = deploy::objects(&config).unwrap();
    let policy: NetworkPolicy = typed_in(&objects, "NetworkPolicy", "miggate-webhook");
    let number = port_number(&objects, port);
    assert_eq!(
        allowed(&policy, source, (port, number)),
        expected,
        "{source:?} -> {port}"
    );
}

/// A CIDR is taken only in the form the API server keeps, so what is written is the range
/// meant: an address typed with its subnet's length, or in a form written another way, is
/// refused with what to write.
#[rstest]
#[case::ipv4("10.0.0.0/24", None)]
#[case::one_address("10.0.0.7/32", None)]
#[case::ipv6("fd00:10::/64", None)]
#[case::everything("0.0.0.0/0", None)]
#[case::host_bits_set(
    "10.0.0.7/24",
    Some(
        "CIDR `10.0.0.7/24` has host bits set: its network is 10.0.0.0/24; for the one address write 10.0.0.7/32"
    )
)]
#[case::ipv6_host_bits(
    "fd00:10::7/64",
    Some(
        "CIDR `fd00:10::7/64` has host bits set: its network is fd00:10::/64; for the one address write fd00:10::7/128"
    )
)]
#[case::no_length(
    "10.0.0.7",
    Some(
        "CIDR `10.0.0.7` is not a CIDR: an address and a prefix length, such as 10.0.0.0/24, 10.0.0.7/32 or fd00::/64"
    )
)]
#[case::too_long(
    "10.0.0.0/33",
    Some(
        "CIDR `10.0.0.0/33` is not a CIDR: an address and a prefix length, such as 10.0.0.0/24, 10.0.0.7/32 or fd00::/64"
    )
)]
#[case::a_host_name(
    "api.example.com/32",
    Some(
        "CIDR `api.example.com/32` is not a CIDR: an address and a prefix length, such as 10.0.0.0/24, 10.0.0.7/32 or fd00::/64"
    )
)]
#[case::ipv6_spelt_long(
    "fd00:0010:0000::/64",
    Some("CIDR `fd00:0010:0000::/64` is not in canonical form: write fd00:10::/64")
)]
#[case::ipv6_in_capitals(
    "FD00:10::/64",
    Some("CIDR `FD00:10::/64` is not in canonical form: write fd00:10::/64")
)]
#[case::ipv4_mapped(
    "::ffff:10.0.0.0/120",
    Some(
        "CIDR `::ffff:10.0.0.0/120` is an IPv4-mapped IPv6 range, which Kubernetes does not take: write the IPv4 range (of 10.0.0.0)"
    )
)]
#[case::control_characters(
    "10.0.0.0/24\n",
    Some(
        "CIDR `10.0.0.0/24\\n` is not a CIDR: an address and a prefix length, such as 10.0.0.0/24, 10.0.0.7/32 or fd00::/64"
    )
)]
fn a_cidr_is_taken_only_as_the_api_server_keeps_it(#[case] text: &str, #[case] refused: Option<&str>) {
    match (text.parse::<Cidr>(), refused) {
        (Ok(cidr), None) => assert_eq!(cidr.to_string(), text),
        (Err(e), Some(message)) => assert_eq!(e.to_string(), message),
        (result, _) => panic!("{text}: {result:?}"),
    }
}

/// A range named twice is a mistake the chart's schema refuses too (`uniqueItems`).
#[test]
fn a_range_named_twice_is_refused() {
    let config = Config {
        api_server_cidrs: ["10.0.0.0/24", "fd00:10::/64", "10.0.0.0/24"]
            .iter()
            .map(|c| c.parse().unwrap())
            .collect(),
        ..Config::default()
    };
    let e = deploy::objects(&config).unwrap_err();
    assert_eq!(
        e.to_string(),
        "CIDR `10.0.0.0/24` is named twice (entries 1 and 3): name each range once"
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
