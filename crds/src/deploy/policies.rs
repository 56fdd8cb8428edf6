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
//!   read-only `hostPath`; this holds every pod there to the restricted profile otherwise, and
//!   to DaemonSets' pods; [`node_tokens`]: only a kubelet takes the node accounts' tokens.
//! - [`waivers`](super::waivers) (opt-in, `miggate deploy --waivers-need-permission`): a waiver
//!   needs an RBAC permission of whoever wrote it, the pod's writer or its template's, checked
//!   by the API server's authorizer.

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use miggate_wire::annotations::{DEVICE_MAP, RESTORE_FROM, SKIP_CHECKS, STEER, STEERED};
use miggate_wire::peer;
use serde_json::{Value, json};

use super::names::{NAMESPACE, NODE_NAMESPACE, PUBLISHER, RECOVERY_HOST_PATH, WEBHOOK};
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
    out.extend(node_tokens(config)?);
    out.extend(token_secrets(config)?);
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

/// `miggate-node-pods`: in the node namespace, whose Pod Security level is `privileged` for one
/// read-only `hostPath`, only the node accounts' pods, made by the DaemonSet controller (a pod
/// made by hand could name any node, and its account's token would be bound to that node), held
/// to the restricted profile in every other respect: no host namespaces, ports or sysctls, no
/// privilege, escalation or capability but `NET_BIND_SERVICE`, non-root, confined by seccomp,
/// AppArmor and SELinux's container types, the restricted volume types, no ephemeral
/// containers, and no host path but the recovery state, read-only.
pub fn node_pods(config: &Config) -> Result<Vec<Object>, Error> {
    let accounts = node_accounts(config);
    let mut validations = vec![
        json!({"expression": format!("has(object.spec.serviceAccountName) && object.spec.serviceAccountName in {}", list(&accounts)),
         "message": format!("{NODE_NAMESPACE} runs only miggate's node pods (service accounts {}): its Pod Security level is privileged for them", accounts.join(", ")),
         "reason": "Forbidden"}),
        json!({"expression": format!("request.operation != 'CREATE' || request.userInfo.username in {}", list(&DAEMONSET_MAKERS)),
         "messageExpression": format!("'{NODE_NAMESPACE} runs only the pods of DaemonSets, one on each node: a pod made by ' + request.userInfo.username + ' could name any node and have the token of its service account bound to it'"),
         "reason": "Forbidden"}),
    ];
    for (expression, message) in RESTRICTED {
        validations.push(json!({"expression": expression, "message": message, "reason": "Forbidden"}));
    }
    validations.push(json!({
        "expression": format!("!has(object.spec.volumes) || object.spec.volumes.all(v, has(v.configMap) || has(v.csi) || has(v.downwardAPI) || has(v.emptyDir) || has(v.ephemeral) || has(v.persistentVolumeClaim) || has(v.projected) || has(v.secret) || (has(v.hostPath) && v.hostPath.path in {}))", list(&[RECOVERY_HOST_PATH])),
        "message": format!("miggate's node pods mount only the restricted profile's volume types and no host path but {RECOVERY_HOST_PATH}"),
        "reason": "Forbidden"}));
    validations.push(json!({
        "expression": "variables.containers.all(c, !has(c.volumeMounts) || c.volumeMounts.all(m, (has(m.readOnly) && m.readOnly) || !has(object.spec.volumes) || !object.spec.volumes.exists(v, v.name == m.name && has(v.hostPath))))",
        "message": "miggate's node pods mount host paths read-only",
        "reason": "Forbidden"}));
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
            "variables": [
                {"name": "containers", "expression": "object.spec.containers + (has(object.spec.initContainers) ? object.spec.initContainers : [])"},
                {"name": "pod", "expression": "has(object.spec.securityContext) ? object.spec.securityContext : {}"},
            ],
            "validations": validations,
        }),
    )
}

/// The node namespace's service accounts: the publisher's, and the checkpoint agent's when it
/// lives there.
fn node_accounts(config: &Config) -> Vec<&str> {
    let mut accounts = vec![PUBLISHER];
    if config.checkpoint_agent_namespace == NODE_NAMESPACE {
        accounts.push(config.checkpoint_agent_name.as_str());
    }
    accounts
}

/// Who makes a DaemonSet's pods: the controller's own account, or the controller manager's when
/// it runs without per-controller credentials.
const DAEMONSET_MAKERS: [&str; 2] = [
    "system:serviceaccount:kube-system:daemon-set-controller",
    "system:kube-controller-manager",
];

/// Pod Security's restricted profile, as CEL over `variables.containers` (regular and init)
/// and `variables.pod` (the pod's security context), with each rule's words.
const RESTRICTED: [(&str, &str); 6] = [
    (
        "!has(object.spec.ephemeralContainers) || size(object.spec.ephemeralContainers) == 0",
        "miggate's node pods run no ephemeral containers",
    ),
    (
        "!(has(object.spec.hostNetwork) && object.spec.hostNetwork) && !(has(object.spec.hostPID) && object.spec.hostPID) && !(has(object.spec.hostIPC) && object.spec.hostIPC) && !(has(variables.pod.sysctls) && size(variables.pod.sysctls) > 0)",
        "miggate's node pods use no host network, PID or IPC namespace, and set no sysctls",
    ),
    (
        "variables.containers.all(c, has(c.securityContext) && !(has(c.securityContext.privileged) && c.securityContext.privileged) && has(c.securityContext.allowPrivilegeEscalation) && !c.securityContext.allowPrivilegeEscalation && (!has(c.securityContext.procMount) || c.securityContext.procMount == 'Default') && has(c.securityContext.capabilities) && has(c.securityContext.capabilities.drop) && c.securityContext.capabilities.drop.exists(d, d == 'ALL') && (!has(c.securityContext.capabilities.add) || c.securityContext.capabilities.add.all(a, a == 'NET_BIND_SERVICE')) && (!has(c.ports) || c.ports.all(p, !has(p.hostPort) || int(p.hostPort) == 0)))",
        "miggate's node pods meet Pod Security's restricted profile: no container privileged, privilege escalation off, every capability dropped, no host port, the default /proc mount",
    ),
    (
        "!(has(variables.pod.runAsUser) && int(variables.pod.runAsUser) == 0) && variables.containers.all(c, (has(c.securityContext) && has(c.securityContext.runAsNonRoot) ? c.securityContext.runAsNonRoot : has(variables.pod.runAsNonRoot) && variables.pod.runAsNonRoot) && !(has(c.securityContext) && has(c.securityContext.runAsUser) && int(c.securityContext.runAsUser) == 0))",
        "miggate's node pods run as non-root (runAsNonRoot, never user 0)",
    ),
    (
        "variables.containers.all(c, (has(c.securityContext) && has(c.securityContext.seccompProfile) ? c.securityContext.seccompProfile.type : has(variables.pod.seccompProfile) ? variables.pod.seccompProfile.type : '') in ['RuntimeDefault', 'Localhost']) && !(has(variables.pod.appArmorProfile) && variables.pod.appArmorProfile.type == 'Unconfined') && variables.containers.all(c, !(has(c.securityContext) && has(c.securityContext.appArmorProfile) && c.securityContext.appArmorProfile.type == 'Unconfined')) && !(has(object.metadata.annotations) && object.metadata.annotations.exists(k, k.startsWith('container.apparmor.security.beta.kubernetes.io/') && object.metadata.annotations[k] == 'unconfined'))",
        "miggate's node pods run confined: seccomp RuntimeDefault or Localhost, AppArmor never Unconfined",
    ),
    (
        "([has(variables.pod.seLinuxOptions) ? variables.pod.seLinuxOptions : {}] + variables.containers.map(c, has(c.securityContext) && has(c.securityContext.seLinuxOptions) ? c.securityContext.seLinuxOptions : {})).all(o, !has(o.user) && !has(o.role) && (!has(o.type) || o.type in ['container_t', 'container_init_t', 'container_kvm_t', 'container_engine_t']))",
        "miggate's node pods keep SELinux's container types (no user or role, type container_t, container_init_t, container_kvm_t or container_engine_t)",
    ),
];

/// `miggate-node-tokens`: a token of the publisher's or the checkpoint agent's account carries
/// the node its pod runs on, which their policies trust: only a kubelet takes one, for a pod
/// bound to it (the node authorizer and NodeRestriction hold a kubelet to its own pods), never
/// an admin or a namespace's editor naming a node.
pub fn node_tokens(config: &Config) -> Result<Vec<Object>, Error> {
    let agent_namespace = config.checkpoint_agent_namespace.as_str();
    let agent = config.checkpoint_agent_name.as_str();
    policy(
        "miggate-node-tokens",
        json!({
            "failurePolicy": "Fail",
            "matchConditions": [{"name": "miggate-node-accounts", "expression": format!(
                "(request.namespace == {} && request.name == {}) || (request.namespace == {} && request.name == {})",
                cel_string(NODE_NAMESPACE), cel_string(PUBLISHER), cel_string(agent_namespace), cel_string(agent))}],
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                "resources": ["serviceaccounts/token"]}]},
            "validations": [{
                "expression": "request.userInfo.username.startsWith('system:node:') && has(object.spec.boundObjectRef) && object.spec.boundObjectRef.kind == 'Pod'",
                "messageExpression": "'a token of ' + request.namespace + '/' + request.name + ' says which node it was taken on, and miggate trusts it for that node: only a kubelet takes one, for a pod bound to it, not ' + request.userInfo.username",
                "reason": "Forbidden"}],
        }),
    )
}

/// `miggate-token-secrets`: no long-lived token Secret (`kubernetes.io/service-account-token`,
/// which the token controller fills with a token that never expires) of the install's own
/// accounts. The node accounts' would carry no node, and the webhook's would be its power for
/// whoever can write Secrets in its namespace, for good.
pub fn token_secrets(config: &Config) -> Result<Vec<Object>, Error> {
    let accounts = [
        (NODE_NAMESPACE, PUBLISHER),
        (
            config.checkpoint_agent_namespace.as_str(),
            config.checkpoint_agent_name.as_str(),
        ),
        (NAMESPACE, WEBHOOK),
    ];
    let named = accounts
        .iter()
        .map(|(ns, name)| {
            format!(
                "(request.namespace == {} && object.metadata.annotations['kubernetes.io/service-account.name'] == {})",
                cel_string(ns),
                cel_string(name)
            )
        })
        .collect::<Vec<_>>()
        .join(" || ");
    policy(
        "miggate-token-secrets",
        json!({
            "failurePolicy": "Fail",
            "matchConditions": [{"name": "service-account-token-secrets",
                "expression": "has(object.type) && object.type == 'kubernetes.io/service-account-token'"}],
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                "resources": ["secrets"]}]},
            "validations": [{
                "expression": format!("!(has(object.metadata.annotations) && 'kubernetes.io/service-account.name' in object.metadata.annotations) || !({named})"),
                "messageExpression": "'a token Secret of ' + request.namespace + '/' + object.metadata.annotations['kubernetes.io/service-account.name'] + ' is refused: the accounts miggate installs take only the short-lived tokens their kubelet binds to their pods, which a token Secret, never expiring and bound to nothing, would get around'",
                "reason": "Forbidden"}],
        }),
    )
}
