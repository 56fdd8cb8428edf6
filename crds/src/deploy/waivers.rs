//! Waivers under RBAC (opt-in, `miggate deploy --waivers-need-permission`): a waiver needs the
//! permission of whoever wrote it, which the API server's authorizer answers for in the
//! policies' CEL.
//!
//! Who wrote a waiver is the writer of the pod, or of the pod template the pod was made from:
//! - a pod, or its status (a status update can change annotations), is judged against its
//!   writer, unless that is one of Kubernetes' own controllers making it from a workload's
//!   template ([`POD_MAKERS`]): the template's writer was judged instead;
//! - a workload's pod template ([`WORKLOADS`]: Deployments, StatefulSets, DaemonSets,
//!   ReplicaSets, ReplicationControllers, Jobs, CronJobs) is judged against whoever creates or
//!   changes it, unless that is the controller that makes such objects from a template of its
//!   own kind (the deployment controller's ReplicaSets, the cronjob controller's Jobs);
//!
//! so a tenant who may create Deployments but not waive cannot waive through one. The
//! controllers are named by their user names, which only kube-controller-manager holds: its
//! per-controller service accounts in `kube-system` (with `--use-service-account-credentials`),
//! or its own identity (without). Writing a template that waives counts however it is done: a
//! new template that waives, or any change to a template that waives, since the waiver covers
//! the whole pod it makes.

use k8s_openapi::api::rbac::v1::ClusterRole;
use miggate_wire::annotations::{RESTORE_FROM, SKIP_CHECKS};
use miggate_wire::peer;
use serde_json::{Value, json};

use super::policies::{FILE, has, list, policy};
use super::{Object, typed};
use crate::GROUP;
use crate::error::Error;

/// The waiver annotations, ours and the peer's.
pub const WAIVER_ANNOTATIONS: [&str; 2] = [SKIP_CHECKS, peer::SKIP_COMPAT_CHECK];

/// What the waiver permission is, in RBAC terms: verb `waive` on `checks.miggate.io` in the
/// pod's namespace. Not a real resource: RBAC grants any verb on any name, and the API
/// server's authorizer answers for it as for any other.
pub const WAIVE_VERB: &str = "waive";
/// See [`WAIVE_VERB`].
pub const WAIVE_RESOURCE: &str = "checks";
/// The ClusterRole granting [`WAIVE_VERB`], to bind with a RoleBinding per namespace.
pub const WAIVER_ROLE: &str = "miggate-waiver";

/// The waiver expression the API server runs as the request's user. Kept apart so the tests
/// can hold it to the `miggate-waiver` role's rule.
pub const WAIVER_RULE: &str =
    "authorizer.group('miggate.io').resource('checks').namespace(request.namespace).check('waive').allowed()";

/// kube-controller-manager's own user name: every controller writes as it when the controller
/// manager runs without `--use-service-account-credentials`.
pub const CONTROLLER_MANAGER: &str = "system:kube-controller-manager";

/// The namespace of kube-controller-manager's per-controller service accounts.
const CONTROLLERS_NAMESPACE: &str = "kube-system";

/// The controllers (service accounts in `kube-system`) that create pods from a workload's pod
/// template: the ReplicaSet, ReplicationController, Job, StatefulSet and DaemonSet controllers.
pub const POD_MAKERS: [&str; 5] = [
    "replicaset-controller",
    "replication-controller",
    "job-controller",
    "statefulset-controller",
    "daemon-set-controller",
];

/// A workload kind whose pod template can carry a restore pod's annotations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Workload {
    /// Its API group (`""` for the core group).
    pub group: &'static str,
    /// Its resource (`deployments`).
    pub resource: &'static str,
    /// Where its pod template is, from the object (`spec.template`).
    pub template: &'static str,
    /// The controllers (service accounts in `kube-system`) that create it from a template of
    /// another workload, already judged: the deployment controller's ReplicaSets, the cronjob
    /// controller's Jobs.
    pub made_by: &'static [&'static str],
}

/// Every workload kind of Kubernetes whose controller makes pods from a template.
pub const WORKLOADS: [Workload; 7] = [
    Workload {
        group: "apps",
        resource: "deployments",
        template: "spec.template",
        made_by: &[],
    },
    Workload {
        group: "apps",
        resource: "statefulsets",
        template: "spec.template",
        made_by: &[],
    },
    Workload {
        group: "apps",
        resource: "daemonsets",
        template: "spec.template",
        made_by: &[],
    },
    Workload {
        group: "apps",
        resource: "replicasets",
        template: "spec.template",
        made_by: &["deployment-controller"],
    },
    Workload {
        group: "",
        resource: "replicationcontrollers",
        template: "spec.template",
        made_by: &[],
    },
    Workload {
        group: "batch",
        resource: "jobs",
        template: "spec.template",
        made_by: &["cronjob-controller"],
    },
    Workload {
        group: "batch",
        resource: "cronjobs",
        template: "spec.jobTemplate.spec.template",
        made_by: &[],
    },
];

/// The user name of kube-controller-manager's service account `name`.
fn controller(name: &str) -> String {
    format!("system:serviceaccount:{CONTROLLERS_NAMESPACE}:{name}")
}

/// The user names a write by `made_by` comes from: each controller's service account, and
/// the controller manager's own identity.
fn controller_users(made_by: &[&str]) -> Vec<String> {
    let mut users: Vec<String> = made_by.iter().map(|c| controller(c)).collect();
    users.push(CONTROLLER_MANAGER.to_string());
    users
}

/// `path` (`object.spec.jobTemplate.spec.template`) is there: a `has()` of every step after
/// `spec`, which every workload has.
fn present(path: &str) -> String {
    let steps: Vec<&str> = path.split('.').collect();
    (3..=steps.len())
        .map(|n| format!("has({})", steps[..n].join(".")))
        .collect::<Vec<_>>()
        .join(" && ")
}

/// The policy of each place a workload keeps its pod template: one policy reads one shape of
/// object, since the API server type-checks a policy's CEL against every kind it matches.
pub const TEMPLATE_POLICIES: [(&str, &str); 2] = [
    ("spec.template", "miggate-waivers-workloads"),
    ("spec.jobTemplate.spec.template", "miggate-waivers-cronjobs"),
];

/// The validation every waiver policy runs: the writer's permission, refused with a message
/// naming the permission, who lacks it and where, and what an admin does. `what` is the head
/// of the message's CEL: an expression ending in a string literal left open.
fn validation(what: &str) -> Value {
    let refusal = format!(
        "{what} needs permission: ' + request.userInfo.username + ' may not \"{WAIVE_VERB}\" {WAIVE_RESOURCE}.{GROUP} in namespace ' + request.namespace + ' (an admin grants it to people and groups, never to a service account, with a RoleBinding of the ClusterRole {WAIVER_ROLE})'"
    );
    json!([{"expression": WAIVER_RULE, "messageExpression": refusal, "reason": "Forbidden"}])
}

/// `miggate-waivers`, the workloads' policies and the `miggate-waiver` role.
pub fn waivers() -> Result<Vec<Object>, Error> {
    let mut out = pods()?;
    for (template, name) in TEMPLATE_POLICIES {
        let workloads: Vec<Workload> = WORKLOADS.into_iter().filter(|w| w.template == template).collect();
        out.extend(templates(name, template, &workloads)?);
    }
    out.push(waiver_role()?);
    Ok(out)
}

/// `miggate-waivers`: a restore pod created with a waiver, or given one or a different one
/// later (the pod or its status), needs its writer's permission, unless a controller made it
/// from a workload's template.
fn pods() -> Result<Vec<Object>, Error> {
    let restore = format!(
        "({} || {})",
        has("object", RESTORE_FROM),
        has("object", peer::RESTORE_FROM)
    );
    let new_or_changed = WAIVER_ANNOTATIONS
        .iter()
        .map(|k| {
            format!(
                "({} && (request.operation == 'CREATE' || !{} || oldObject.metadata.annotations['{k}'] != object.metadata.annotations['{k}']))",
                has("object", k),
                has("oldObject", k)
            )
        })
        .collect::<Vec<_>>()
        .join(" || ");
    let makers = controller_users(&POD_MAKERS);
    let makers: Vec<&str> = makers.iter().map(String::as_str).collect();
    policy(
        "miggate-waivers",
        json!({
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                "resources": ["pods", "pods/status"]}]},
            "matchConditions": [
                {"name": "not-made-from-a-judged-template",
                 "expression": format!("!(request.userInfo.username in {})", list(&makers))},
                {"name": "restore-pods-given-a-waiver",
                 "expression": format!("{restore} && ({new_or_changed})")},
            ],
            "validations": validation(&format!("'waiving checks ({SKIP_CHECKS} or {})", peer::SKIP_COMPAT_CHECK)),
        }),
    )
}

/// Policy `name`, of the workloads that keep their pod template at `template`: one created with a
/// template that is a restore pod with a waiver, or whose such template is changed, needs its
/// writer's permission, unless the controller that makes it from another's template wrote it.
fn templates(name: &str, template: &str, workloads: &[Workload]) -> Result<Vec<Object>, Error> {
    let new = format!("object.{template}");
    let old = format!("oldObject.{template}");
    let annotations = format!("{new}.metadata.annotations");
    let keys = |keys: &[&str]| {
        keys.iter()
            .map(|k| format!("'{k}' in {annotations}"))
            .collect::<Vec<_>>()
            .join(" || ")
    };
    let waives = format!(
        "{} && has({new}.metadata) && has({annotations}) && ({}) && ({})",
        present(&new),
        keys(&[RESTORE_FROM, peer::RESTORE_FROM]),
        keys(&WAIVER_ANNOTATIONS),
    );
    let written = format!(
        "request.operation == 'CREATE' || !({}) || {old} != {new}",
        present(&old)
    );
    let mut rules: Vec<Value> = Vec::new();
    for w in workloads {
        match rules.iter_mut().find(|r| r["apiGroups"][0] == w.group) {
            Some(r) => {
                if let Some(resources) = r["resources"].as_array_mut() {
                    resources.push(json!(w.resource));
                }
            }
            None => rules.push(json!({
                "apiGroups": [w.group], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                "resources": [w.resource]})),
        }
    }
    let made: Vec<String> = workloads
        .iter()
        .filter(|w| !w.made_by.is_empty())
        .map(|w| {
            let users = controller_users(w.made_by);
            let users: Vec<&str> = users.iter().map(String::as_str).collect();
            format!(
                "!(request.resource.resource == '{}' && request.userInfo.username in {})",
                w.resource,
                list(&users)
            )
        })
        .collect();
    let mut conditions = Vec::new();
    if !made.is_empty() {
        conditions.push(json!({"name": "not-made-from-a-judged-template", "expression": made.join(" && ")}));
    }
    conditions.push(
        json!({"name": "restore-templates-given-a-waiver", "expression": format!("{waives} && ({written})")}),
    );
    policy(
        name,
        json!({
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": rules},
            "matchConditions": conditions,
            "validations": validation(&format!(
                "'the pod template of this ' + request.kind.kind + ' waives checks ({SKIP_CHECKS} or {}): writing it",
                peer::SKIP_COMPAT_CHECK
            )),
        }),
    )
}

fn waiver_role() -> Result<Object, Error> {
    typed::<ClusterRole>(
        FILE,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": WAIVER_ROLE, "labels": {
                "app.kubernetes.io/name": "miggate-policies", "app.kubernetes.io/part-of": "miggate"}},
            "rules": [{"apiGroups": [GROUP], "resources": [WAIVE_RESOURCE], "verbs": [WAIVE_VERB]}]}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    // The rule is a literal so the docs can quote it; this holds it to the constants.
    #[test]
    fn the_waiver_rule_asks_for_the_role_the_install_grants() {
        assert_eq!(
            WAIVER_RULE,
            format!(
                "authorizer.group('{GROUP}').resource('{WAIVE_RESOURCE}').namespace(request.namespace).check('{WAIVE_VERB}').allowed()"
            )
        );
    }

    #[test]
    fn every_workload_is_under_a_policy() {
        for w in WORKLOADS {
            assert!(TEMPLATE_POLICIES.iter().any(|(t, _)| *t == w.template), "{w:?}");
        }
    }

    #[test]
    fn a_template_path_is_guarded_at_every_step_after_spec() {
        assert_eq!(present("object.spec.template"), "has(object.spec.template)");
        assert_eq!(
            present("oldObject.spec.jobTemplate.spec.template"),
            "has(oldObject.spec.jobTemplate) && has(oldObject.spec.jobTemplate.spec) && has(oldObject.spec.jobTemplate.spec.template)"
        );
    }
}
