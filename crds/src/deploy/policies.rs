//! The ValidatingAdmissionPolicies that keep a tenant from getting around the gate: the API
//! server evaluates them in process (CEL), so they hold while the webhook is down, cost no
//! call, and cannot be raced by a client that writes after the webhook has answered.
//!
//! What each one stops (see the threat model in `docs/webhook.md`):
//! - [`annotations`]: the annotations that make a pod a restore pod, waive its checks, ask for
//!   steering or carry the gate's device map are fixed when the pod is created. The webhooks
//!   see only a pod's CREATE and its binding; an annotation added later (turning a plain pod
//!   on a short node into a restore pod, re-pointing one at another checkpoint) or a device
//!   map written by the pod's author would reach the node agent unchecked.
//! - [`bindings`]: the API server copies a Binding's annotations onto its pod, so a Binding is
//!   another way to write them: only the scheduler's bindings may carry the device map (which
//!   the device-map webhook writes into them), and none may carry the others.
//! - [`node_pods`]: the node namespace enforces Pod Security `privileged` for the publisher's
//!   read-only `hostPath`; this holds every other pod there to the publisher's shape.
//! - [`waivers`](super::waivers) (opt-in, `miggate deploy --waivers-need-permission`): a waiver
//!   needs an RBAC permission of whoever wrote it, the pod's writer or its template's, checked
//!   by the API server's authorizer.

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use miggate_wire::annotations::{DEVICE_MAP, RESTORE_FROM, SKIP_CHECKS, STEER, STEERED};
use miggate_wire::peer;
use serde_json::{Value, json};

use super::names::{NODE_NAMESPACE, PUBLISHER, RECOVERY_HOST_PATH};
use super::{Config, Object, typed};
use crate::error::{DeployProblem, Error};

/// The file under `deploy/`.
pub const FILE: &str = "policies.yaml";

/// The annotations fixed at a pod's creation: they make it a restore pod (ours and the peer's
/// checkpoint reference, the peer's container map), waive checks, ask for steering or record
/// it, or carry the device map the node agent reads.
pub const LOCKED_ANNOTATIONS: [&str; 7] = [
    RESTORE_FROM,
    peer::RESTORE_FROM,
    peer::RESTORE_CONTAINER_MAP,
    SKIP_CHECKS,
    STEER,
    STEERED,
    DEVICE_MAP,
];

/// The peer's waiver, which may be added to a restore pod after creation: the peer's agent
/// reopens a restore it refused when it is (`peer-restore-contract`), and a waiver added later
/// waives nothing the author could not have waived at creation. Once set it is fixed.
pub const ADDABLE_ANNOTATIONS: [&str; 1] = [peer::SKIP_COMPAT_CHECK];

/// The default identity allowed to bind pods with the device map: the default scheduler's.
pub const DEFAULT_BINDER: &str = miggate_wire::webhook::DEFAULT_BINDER;

/// Whether `var` (`object` or `oldObject`) has annotation `key`.
pub(super) fn has(var: &str, key: &str) -> String {
    format!("(has({var}.metadata.annotations) && '{key}' in {var}.metadata.annotations)")
}

/// `key` is the same before and after: absent in both, or present in both with one value.
fn unchanged(key: &str) -> String {
    let (old, new) = (has("oldObject", key), has("object", key));
    format!(
        "{old} == {new} && (!{new} || oldObject.metadata.annotations['{key}'] == object.metadata.annotations['{key}'])"
    )
}

/// A CEL list literal of `items`, each a quoted string literal.
pub(super) fn list(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| cel_string(i)).collect();
    format!("[{}]", quoted.join(", "))
}

/// `text` as a single-quoted CEL string literal: quotes, backslashes and control characters
/// escaped, so a configured name (a binder's user name) cannot end the literal and write CEL.
pub fn cel_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('\'');
    for c in text.chars() {
        match c {
            '\'' | '\\' | '"' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

pub(super) fn policy(name: &str, spec: Value) -> Result<Vec<Object>, Error> {
    let meta = json!({"name": name, "labels": {
        "app.kubernetes.io/name": "miggate-policies", "app.kubernetes.io/part-of": "miggate"}});
    Ok(vec![
        typed::<ValidatingAdmissionPolicy>(
            FILE,
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                "metadata": meta, "spec": spec}),
        )?,
        typed::<ValidatingAdmissionPolicyBinding>(
            FILE,
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": meta, "spec": {"policyName": name, "validationActions": ["Deny"]}}),
        )?,
    ])
}

/// The tenant policies, with their bindings (the waivers' are in [`waivers`](super::waivers)).
pub(super) fn all(config: &Config) -> Result<Vec<Object>, Error> {
    let mut out = annotations()?;
    out.extend(bindings(config)?);
    out.extend(node_pods(config)?);
    Ok(out)
}

/// `miggate-restore-annotations`: no pod is created with the device map, and the locked
/// annotations never change after creation (the peer's waiver may be added once). Every
/// namespace: the node agent reads the device map wherever the pod runs. `pods/status` too,
/// since a status update may change a pod's annotations.
pub fn annotations() -> Result<Vec<Object>, Error> {
    let mut validations = vec![json!({
        "expression": format!("request.operation != 'CREATE' || !{}", has("object", DEVICE_MAP)),
        "message": format!("{DEVICE_MAP} is written by miggate when the pod is bound; a pod cannot be created with it"),
        "reason": "Forbidden",
    })];
    for key in LOCKED_ANNOTATIONS {
        validations.push(json!({
            "expression": format!("request.operation != 'UPDATE' || {}", unchanged(key)),
            "message": format!("{key} cannot be added, changed or removed once the pod exists: miggate checked the pod as it was created; create a new pod instead"),
            "reason": "Forbidden",
        }));
    }
    for key in ADDABLE_ANNOTATIONS {
        let (old, new) = (has("oldObject", key), has("object", key));
        validations.push(json!({
            "expression": format!("request.operation != 'UPDATE' || !{old} || ({new} && oldObject.metadata.annotations['{key}'] == object.metadata.annotations['{key}'])"),
            "message": format!("{key} can be added to a pod but not changed or removed once set"),
            "reason": "Forbidden",
        }));
    }
    policy(
        "miggate-restore-annotations",
        json!({
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                "resources": ["pods", "pods/status"]}]},
            "validations": validations,
        }),
    )
}

/// `miggate-binding-annotations`: a Binding (either resource) carries none of the locked
/// annotations but the device map, and that only from one of `config.binders`.
pub fn bindings(config: &Config) -> Result<Vec<Object>, Error> {
    let others: Vec<&str> = LOCKED_ANNOTATIONS
        .iter()
        .chain(ADDABLE_ANNOTATIONS.iter())
        .copied()
        .filter(|k| *k != DEVICE_MAP)
        .collect();
    let binders: Vec<&str> = config.binders.iter().map(String::as_str).collect();
    if binders.is_empty()
        || binders
            .iter()
            .any(|b| b.is_empty() || b.chars().any(char::is_control))
    {
        return Err(DeployProblem::Binders.into());
    }
    policy(
        "miggate-binding-annotations",
        json!({
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                "resources": ["pods/binding", "bindings"]}]},
            "validations": [
                {"expression": format!("!has(object.metadata.annotations) || !{}.exists(k, k in object.metadata.annotations)", list(&others)),
                 "message": "a Binding cannot carry miggate's or the peer's restore annotations: the API server copies them onto the pod, past every check of it",
                 "reason": "Forbidden"},
                {"expression": format!("!{} || request.userInfo.username in {}", has("object", DEVICE_MAP), list(&binders)),
                 "message": format!("only the schedulers miggate lists ({}) bind a pod with {DEVICE_MAP}: miggate writes it into their Bindings; list another scheduler with the chart's binders value or miggate deploy --binder", binders.join(", ")),
                 "reason": "Forbidden"},
            ],
        }),
    )
}

/// `miggate-node-pods`: in the node namespace, only the publisher's pods (held to its shape:
/// no host namespaces, no privilege or added capabilities, no other containers, `hostPath`
/// only the recovery state and only read-only) and, when its account lives there, the
/// checkpoint agent's (which runs CRIU and needs what the namespace allows).
pub fn node_pods(config: &Config) -> Result<Vec<Object>, Error> {
    let mut accounts = vec![PUBLISHER];
    if config.checkpoint_agent_namespace == NODE_NAMESPACE {
        accounts.push(config.checkpoint_agent_name.as_str());
    }
    let publisher = format!(
        "!has(object.spec.serviceAccountName) || object.spec.serviceAccountName != '{PUBLISHER}' || "
    );
    let shape = |expression: String, message: &str| {
        json!({"expression": format!("{publisher}({expression})"),
            "message": format!("the publisher's pods {message}"), "reason": "Forbidden"})
    };
    policy(
        "miggate-node-pods",
        json!({
            "failurePolicy": "Fail",
            "matchConstraints": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NODE_NAMESPACE}},
                "resourceRules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]},
                    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["pods/ephemeralcontainers"]},
                ]},
            "validations": [
                {"expression": format!("has(object.spec.serviceAccountName) && object.spec.serviceAccountName in {}", list(&accounts)),
                 "message": format!("{NODE_NAMESPACE} runs only miggate's node pods (service accounts {}): its Pod Security level is privileged for them", accounts.join(", ")),
                 "reason": "Forbidden"},
                shape("!(has(object.spec.hostNetwork) && object.spec.hostNetwork) && !(has(object.spec.hostPID) && object.spec.hostPID) && !(has(object.spec.hostIPC) && object.spec.hostIPC)".into(),
                    "use no host network, PID or IPC namespace"),
                shape("(!has(object.spec.initContainers) || size(object.spec.initContainers) == 0) && (!has(object.spec.ephemeralContainers) || size(object.spec.ephemeralContainers) == 0)".into(),
                    "run no init or ephemeral containers"),
                shape("object.spec.containers.all(c, !has(c.securityContext) || ((!has(c.securityContext.privileged) || !c.securityContext.privileged) && (!has(c.securityContext.capabilities) || !has(c.securityContext.capabilities.add) || size(c.securityContext.capabilities.add) == 0)))".into(),
                    "are not privileged and add no capabilities"),
                shape(format!("!has(object.spec.volumes) || object.spec.volumes.all(v, !has(v.hostPath) || v.hostPath.path == '{RECOVERY_HOST_PATH}')"),
                    &format!("mount no host path but {RECOVERY_HOST_PATH}")),
                shape("object.spec.containers.all(c, !has(c.volumeMounts) || c.volumeMounts.all(m, (has(m.readOnly) && m.readOnly) || !has(object.spec.volumes) || !object.spec.volumes.exists(v, v.name == m.name && has(v.hostPath))))".into(),
                    "mount host paths read-only"),
            ],
        }),
    )
}
