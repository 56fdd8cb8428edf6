//! miggate's ValidatingAdmissionPolicies: the ones every install has are there, each is bound
//! with `Deny`, and none reports type-checking warnings (an expression that does not compile
//! against the types it names fails at admission time).

use super::unreadable;
use crate::{Area, Cluster, Finding, quoted};

/// The policies every install has: they hold tenants to what miggate trusts (only the agent
/// writes checkpoints; the webhooks' annotations are theirs to write).
pub const EVERY_INSTALL: [&str; 3] = [
    "miggate-checkpoint-writers",
    "miggate-restore-annotations",
    "miggate-binding-annotations",
];

const REINSTALL: &str = "helm upgrade miggate charts/miggate (or kubectl apply -f deploy/) puts it back";

pub(super) fn check(cluster: &Cluster, out: &mut Vec<Finding>) {
    let (policies, bindings) = match (&cluster.policies, &cluster.bindings) {
        (Err(e), _) => return out.push(unreadable(Area::Policies, "ValidatingAdmissionPolicies", e)),
        (_, Err(e)) => return out.push(unreadable(Area::Policies, "ValidatingAdmissionPolicyBindings", e)),
        (Ok(p), Ok(b)) => (p, b),
    };
    let names: Vec<&str> = policies
        .iter()
        .filter_map(|p| p.metadata.name.as_deref())
        .collect();
    let mut problems = Vec::new();
    for missing in EVERY_INSTALL.iter().filter(|n| !names.contains(n)) {
        problems.push(Finding::fail(
            Area::Policies,
            format!("policy {missing} does not exist: tenants can forge what it holds"),
            REINSTALL,
        ));
    }
    for policy in policies {
        let name = policy.metadata.name.as_deref().unwrap_or_default();
        let shown = quoted(name);
        let bound: Vec<_> = bindings
            .iter()
            .filter_map(|b| b.spec.as_ref())
            .filter(|s| s.policy_name.as_deref() == Some(name))
            .collect();
        if bound.is_empty() {
            problems.push(Finding::fail(
                Area::Policies,
                format!("policy {shown} is not bound: it enforces nothing"),
                format!("{REINSTALL} (its binding has the policy's name)"),
            ));
        } else if !bound
            .iter()
            .any(|s| s.validation_actions.iter().flatten().any(|a| a == "Deny"))
        {
            problems.push(Finding::fail(
                Area::Policies,
                format!("policy {shown} is bound without Deny: it only warns or audits"),
                format!("kubectl edit validatingadmissionpolicybinding {shown}: validationActions [Deny]"),
            ));
        }
        let warnings = policy
            .status
            .as_ref()
            .and_then(|s| s.type_checking.as_ref())
            .and_then(|t| t.expression_warnings.as_ref())
            .filter(|w| !w.is_empty());
        if let Some(warnings) = warnings {
            problems.push(Finding::warn(
                Area::Policies,
                format!(
                    "policy {shown}: {} type-checking warning(s), first at {}: {}",
                    warnings.len(),
                    quoted(&warnings[0].field_ref),
                    quoted(&warnings[0].warning)
                ),
                format!("kubectl get validatingadmissionpolicy {shown} -o yaml (status.typeChecking)"),
            ));
        }
    }
    if problems.is_empty() {
        out.push(Finding::pass(
            Area::Policies,
            format!(
                "{} policies, each bound with Deny, none with type-checking warnings",
                policies.len()
            ),
        ));
    }
    out.append(&mut problems);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::Status;
    use serde_json::json;

    fn cluster(policies: &[&str], bound: &[(&str, &str)]) -> Cluster {
        Cluster {
            policies: Ok(policies
                .iter()
                .map(|n| serde_json::from_value(json!({"metadata": {"name": n}, "spec": {}})).unwrap())
                .collect()),
            bindings: Ok(bound
                .iter()
                .map(|(n, action)| {
                    serde_json::from_value(json!({"metadata": {"name": n},
                        "spec": {"policyName": n, "validationActions": [action]}}))
                    .unwrap()
                })
                .collect()),
            ..Cluster::bare()
        }
    }

    #[test]
    fn every_policy_must_be_there_and_bound_with_deny() {
        let all: Vec<(&str, &str)> = EVERY_INSTALL.iter().map(|n| (*n, "Deny")).collect();
        let mut out = Vec::new();
        check(&cluster(&EVERY_INSTALL, &all), &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].status, Status::Pass, "{out:?}");

        let mut out = Vec::new();
        check(
            &cluster(
                &EVERY_INSTALL[..2],
                &[(EVERY_INSTALL[0], "Deny"), (EVERY_INSTALL[1], "Audit")],
            ),
            &mut out,
        );
        let said: Vec<&str> = out.iter().map(|f| f.message.as_str()).collect();
        assert_eq!(
            said,
            [
                "policy miggate-binding-annotations does not exist: tenants can forge what it holds",
                "policy miggate-restore-annotations is bound without Deny: it only warns or audits",
            ]
        );
        assert!(out.iter().all(|f| f.status == Status::Fail));
    }
}
