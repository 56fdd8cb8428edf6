//! Every check, judged on a [`Cluster`] without I/O: one module per area, each appending its
//! findings in the order a reader fixes things (the CRDs and the webhook before what rests
//! on them).

pub use crate::install::{RESTORE_WEBHOOK, restore_webhook};
use crate::{Area, Cluster, Finding};

mod caches;
mod certificate;
mod configurations;
mod crds;
mod nodes;
mod policies;
mod probe;
mod tenants;
mod webhook;

/// Every check, in order; only the reachability of the API server when it cannot be reached.
pub fn all(cluster: &Cluster, out: &mut Vec<Finding>) {
    match &cluster.version {
        Ok(version) => out.push(Finding::pass(
            Area::Cluster,
            format!("API server reachable, Kubernetes {}", crate::quoted(version)),
        )),
        Err(e) => {
            out.push(Finding::fail(
                Area::Cluster,
                format!("cannot reach the API server: {e}"),
                "check --kubeconfig and --context (kubectl version says the same)",
            ));
            return;
        }
    }
    crds::check(cluster, out);
    webhook::check(cluster, out);
    configurations::check(cluster, out);
    certificate::check(cluster, out);
    caches::check(cluster, out);
    probe::check(cluster, out);
    nodes::check(cluster, out);
    policies::check(cluster, out);
    tenants::check(cluster, out);
}

/// A read that failed, as its finding.
fn unreadable(area: Area, what: &str, why: &str) -> Finding {
    Finding::fail(
        area,
        format!("cannot read {what}: {why}"),
        "run as a user who may read the install (a cluster admin, or kubectl auth can-i list … says what is missing)",
    )
}

/// At most `max` names joined by `, `, then how many more.
fn some_of(names: &[String], max: usize) -> String {
    let mut out = names
        .iter()
        .take(max)
        .map(|n| crate::quoted(n))
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > max {
        out.push_str(&format!(" and {} more", names.len() - max));
    }
    out
}

#[cfg(test)]
pub(crate) mod testkit {
    //! What the checks' tests share: certificates minted for a host.
    #![allow(clippy::unwrap_used)]

    /// A CA's PEM and a serving certificate's PEM it signed for `host`.
    pub(crate) fn mint(host: &str) -> (String, String) {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::new(ca, ca_key);
        let leaf_key = rcgen::KeyPair::generate().unwrap();
        let leaf = rcgen::CertificateParams::new(vec![host.to_string()])
            .unwrap()
            .signed_by(&leaf_key, &issuer)
            .unwrap();
        (ca_cert.pem(), leaf.pem())
    }
}
