//! Which namespaces the gate covers: the restore webhook's namespaceSelector splits them into
//! checked and exempt (named, so an operator sees what the install leaves out), and every
//! tenant-restricting policy must cover each namespace the gate checks: a binding or policy
//! whose selector leaves one out lets tenants there forge what the gate trusts.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::policies::EVERY_INSTALL;
use super::{restore_webhook, some_of, unreadable};
use crate::selector::matches;
use crate::{Area, Cluster, Finding};

/// How many namespaces a line names before it counts the rest.
const NAMED: usize = 10;

pub(super) fn check(cluster: &Cluster, out: &mut Vec<Finding>) {
    let namespaces = match &cluster.namespaces {
        Err(e) => return out.push(unreadable(Area::Tenants, "Namespaces", e)),
        Ok(n) => n,
    };
    let Ok(Some(config)) = &cluster.validating else {
        return;
    };
    let Some(hook) = restore_webhook(config) else {
        return;
    };
    let policies = cluster.policies.as_deref().unwrap_or_default();
    let bindings = cluster.bindings.as_deref().unwrap_or_default();
    judge(
        namespaces,
        hook.namespace_selector.as_ref(),
        policies,
        bindings,
        out,
    );
}

fn labels_of(ns: &Namespace) -> BTreeMap<String, String> {
    let mut labels = ns.metadata.labels.clone().unwrap_or_default();
    // The API server sets it on every namespace; an object built without it still has it.
    if let Some(name) = &ns.metadata.name {
        labels
            .entry("kubernetes.io/metadata.name".to_string())
            .or_insert_with(|| name.clone());
    }
    labels
}

pub(super) fn judge(
    namespaces: &[Namespace],
    gate: Option<&LabelSelector>,
    policies: &[ValidatingAdmissionPolicy],
    bindings: &[ValidatingAdmissionPolicyBinding],
    out: &mut Vec<Finding>,
) {
    let (mut checked, mut exempt) = (Vec::new(), Vec::new());
    for ns in namespaces {
        let name = ns.metadata.name.clone().unwrap_or_default();
        let labels = labels_of(ns);
        if matches(gate, &labels) {
            checked.push((name, labels));
        } else {
            exempt.push(name);
        }
    }
    out.push(Finding::pass(
        Area::Tenants,
        if exempt.is_empty() {
            format!("restores are checked in all {} namespaces", checked.len())
        } else {
            format!(
                "restores are checked in {} namespaces; exempt: {}",
                checked.len(),
                some_of(&exempt, NAMED)
            )
        },
    ));
    for name in EVERY_INSTALL {
        let Some(policy) = policies.iter().find(|p| p.metadata.name.as_deref() == Some(name)) else {
            continue;
        };
        let constraint = policy
            .spec
            .as_ref()
            .and_then(|s| s.match_constraints.as_ref())
            .and_then(|m| m.namespace_selector.as_ref());
        let mut left_out: Vec<String> = Vec::new();
        let its_bindings = bindings
            .iter()
            .filter(|b| b.spec.as_ref().and_then(|s| s.policy_name.as_deref()) == Some(name));
        let selectors: Vec<Option<&LabelSelector>> = its_bindings
            .map(|b| {
                b.spec
                    .as_ref()
                    .and_then(|s| s.match_resources.as_ref())
                    .and_then(|m| m.namespace_selector.as_ref())
            })
            .collect();
        if selectors.is_empty() {
            continue;
        }
        for (ns, labels) in &checked {
            let by_policy = matches(constraint, labels);
            let by_binding = selectors.iter().any(|s| matches(*s, labels));
            if !(by_policy && by_binding) {
                left_out.push(ns.clone());
            }
        }
        if !left_out.is_empty() {
            out.push(Finding::fail(
                Area::Tenants,
                format!(
                    "policy {name} leaves out namespaces the gate checks: {}: tenants there can forge what it holds",
                    some_of(&left_out, NAMED)
                ),
                format!(
                    "drop the namespaceSelector of policy {name} and its binding (helm upgrade renders them without)"
                ),
            ));
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::Status;
    use serde_json::json;

    fn ns(name: &str) -> Namespace {
        let mut n = Namespace::default();
        n.metadata.name = Some(name.into());
        n
    }

    fn gate() -> LabelSelector {
        serde_json::from_value(json!({"matchExpressions": [{
            "key": "kubernetes.io/metadata.name", "operator": "NotIn",
            "values": ["kube-system", "miggate-system"]
        }]}))
        .unwrap()
    }

    fn binding(policy: &str, selector: Option<serde_json::Value>) -> ValidatingAdmissionPolicyBinding {
        let mut spec = json!({"policyName": policy, "validationActions": ["Deny"]});
        if let Some(s) = selector {
            spec["matchResources"] = json!({"namespaceSelector": s});
        }
        serde_json::from_value(json!({"metadata": {"name": policy}, "spec": spec})).unwrap()
    }

    fn policy(name: &str) -> ValidatingAdmissionPolicy {
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": {}})).unwrap()
    }

    #[test]
    fn exempt_namespaces_are_named_and_a_policy_that_leaves_a_tenant_out_fails() {
        let namespaces = [ns("kube-system"), ns("miggate-system"), ns("ml"), ns("team-b")];
        let policies: Vec<_> = EVERY_INSTALL.iter().map(|n| policy(n)).collect();
        let mut bindings: Vec<_> = EVERY_INSTALL.iter().map(|n| binding(n, None)).collect();
        let mut out = Vec::new();
        judge(&namespaces, Some(&gate()), &policies, &bindings, &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        insta::assert_snapshot!(out[0].message, @"restores are checked in 2 namespaces; exempt: kube-system, miggate-system");

        bindings[1] = binding(
            EVERY_INSTALL[1],
            Some(json!({"matchLabels": {"kubernetes.io/metadata.name": "ml"}})),
        );
        let mut out = Vec::new();
        judge(&namespaces, Some(&gate()), &policies, &bindings, &mut out);
        assert_eq!(out.len(), 2, "{out:?}");
        assert_eq!(out[1].status, Status::Fail);
        insta::assert_snapshot!(out[1].message, @"policy miggate-restore-annotations leaves out namespaces the gate checks: team-b: tenants there can forge what it holds");
    }
}
