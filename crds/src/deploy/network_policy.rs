//! The webhook's NetworkPolicy: who may open a connection to its pods.
//!
//! The admission port is open to every source unless the admin names the API server's
//! addresses ([`Cidr`], `miggate deploy --api-server-cidr`, the chart's
//! `networkPolicy.apiServerCIDRs`): where the API server's connections come from differs by
//! distribution (control-plane node addresses on a kubeadm cluster, a provider's range or a
//! konnectivity agent on managed ones), so no default written here would be right everywhere.
//! Named, they are the only sources the https rule admits (where the network plugin enforces
//! NetworkPolicy), and no pod can open a connection to the port at all; unnamed, any pod can,
//! and the webhook bounds what a client can cost it instead (deadlines, connection caps). The
//! plain-HTTP health port (`/healthz`, `/readyz`, `/metrics`) is for the kubelet, whose probes
//! come from the pod's own node and are always allowed by NetworkPolicy, and for Prometheus in
//! the monitoring namespace: nothing else reaches it.

use std::fmt;
use std::str::FromStr;

use ipnet::IpNet;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use serde_json::{Value, json};

use super::names::{NAMESPACE, WEBHOOK};
use super::{Object, typed};
use crate::error::{BadCidr, Error};

/// The file under `deploy/`.
pub const FILE: &str = "network-policy.yaml";
/// The namespace whose pods may scrape the webhook's metrics (change it with a kustomize patch).
pub const MONITORING_NAMESPACE: &str = "monitoring";

/// An address range the API server's calls come from, as written in a NetworkPolicy's
/// `ipBlock.cidr`: in the one form the API server keeps (the network address with no host bits,
/// IPv6 compressed in lowercase, no leading zeros, no IPv4-mapped IPv6), so what is written is
/// exactly the range meant, and an address typed with its subnet's length is refused rather
/// than widened or narrowed silently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr(IpNet);

impl Cidr {
    /// The range.
    pub fn net(&self) -> IpNet {
        self.0
    }
}

impl FromStr for Cidr {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self, Error> {
        let refuse = |why: BadCidr| Error::Cidr {
            text: text.to_string(),
            why,
        };
        let net: IpNet = text.parse().map_err(|_| refuse(BadCidr::NotCidr))?;
        if let IpNet::V6(v6) = net
            && let Some(v4) = v6.addr().to_ipv4_mapped()
        {
            return Err(refuse(BadCidr::Ipv4Mapped { v4 }));
        }
        let network = net.trunc();
        if network != net {
            return Err(refuse(BadCidr::HostBits {
                network,
                address: IpNet::from(net.addr()),
            }));
        }
        if network.to_string() != text {
            return Err(refuse(BadCidr::NotCanonical { network }));
        }
        Ok(Cidr(network))
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The NetworkPolicy selecting the webhook's pods; the admission port admits only
/// `api_server` when it names any.
pub(super) fn webhook(api_server: &[Cidr]) -> Result<Object, Error> {
    let mut first = std::collections::BTreeMap::new();
    for (at, c) in api_server.iter().enumerate() {
        if let Some(earlier) = first.insert(c.0, at) {
            return Err(Error::Cidr {
                text: c.to_string(),
                why: BadCidr::Twice {
                    first: earlier + 1,
                    second: at + 1,
                },
            });
        }
    }
    let mut admission = json!({"ports": [{"port": "https", "protocol": "TCP"}]});
    if !api_server.is_empty() {
        admission["from"] = api_server
            .iter()
            .map(|c| json!({"ipBlock": {"cidr": c.to_string()}}))
            .collect::<Vec<Value>>()
            .into();
    }
    typed::<NetworkPolicy>(
        FILE,
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": WEBHOOK, "namespace": NAMESPACE,
            "labels": {"app.kubernetes.io/name": WEBHOOK, "app.kubernetes.io/part-of": "miggate"}},
        "spec": {
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": WEBHOOK}},
            "policyTypes": ["Ingress"],
            "ingress": [
                // The API server: from the addresses the admin named, else from anywhere.
                admission,
                // Prometheus; the kubelet's probes come from the node and need no rule.
                {"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": MONITORING_NAMESPACE}}}],
                 "ports": [{"port": "health", "protocol": "TCP"}]},
            ]}}),
    )
}
