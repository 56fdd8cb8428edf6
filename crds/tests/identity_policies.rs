//! The policies that hold the install's own identities, as the chart installs them with its
//! defaults (`deploy/`), run as the API server runs them (crds/tests/support): the node
//! namespace's pods (restricted, DaemonSets only) and its accounts' tokens, the webhook's
//! account on its configurations and its certificate Secret, and token Secrets of any of them.
//! Each attack row names what got around the install before these policies; each everyday row,
//! what must stay allowed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::LazyLock;

use miggate_wire::install::{NODE_NAMESPACE, PUBLISHER, VALIDATING_CONFIGURATION};
use rstest::rstest;
use serde_json::{Value, json};
use support::{admission, find, policy, policy_verdict};

/// The install with the chart's defaults (`deploy/`).
static INSTALLED: LazyLock<Vec<Value>> = LazyLock::new(support::installed);

/// The publisher's pod as its DaemonSet makes it.
fn publisher_pod() -> Value {
    let mut p = find(&INSTALLED, "DaemonSet", PUBLISHER)["spec"]["template"].clone();
    p["apiVersion"] = json!("v1");
    p["kind"] = json!("Pod");
    p["metadata"]["name"] = json!("miggate-publish-x7k2p");
    p["metadata"]["namespace"] = json!(NODE_NAMESPACE);
    p
}

fn changed(mut pod: Value, pointer: &str, value: Value) -> Value {
    *pod.pointer_mut(pointer).unwrap() = value;
    pod
}

/// `pod` with `spec.FIELD` set.
fn spec(mut pod: Value, field: &str, value: Value) -> Value {
    pod["spec"][field] = value;
    pod
}

const DAEMONSETS: &str = "system:serviceaccount:kube-system:daemon-set-controller";

fn node_pod_verdict(namespace: &str, operation: &str, resource: &str, pod: Value) -> Option<Vec<String>> {
    node_pod_verdict_by(DAEMONSETS, namespace, operation, resource, pod)
}

fn node_pod_verdict_by(
    user: &str,
    namespace: &str,
    operation: &str,
    resource: &str,
    pod: Value,
) -> Option<Vec<String>> {
    let p = policy(&INSTALLED, "miggate-node-pods");
    let old = (operation == "UPDATE").then(|| pod.clone());
    policy_verdict(
        &p,
        &admission(operation, resource, namespace, user, None, pod, old),
    )
}

/// The publisher's pod with its container's security context changed at `field`.
fn container_security(field: &str, value: Value) -> Value {
    let mut pod = publisher_pod();
    pod["spec"]["containers"][0]["securityContext"][field] = value;
    pod
}

fn container_field(field: &str, value: Value) -> Value {
    let mut pod = publisher_pod();
    pod["spec"]["containers"][0][field] = value;
    pod
}

fn annotated(annotations: Value) -> Value {
    let mut pod = publisher_pod();
    pod["metadata"]["annotations"] = annotations;
    pod
}

fn pod_security(field: &str, value: Value) -> Value {
    let mut pod = publisher_pod();
    pod["spec"]["securityContext"][field] = value;
    pod
}

/// The checkpoint agent's pod, as its DaemonSet would make it under the restricted profile.
fn agent_pod() -> Value {
    changed(
        publisher_pod(),
        "/spec/serviceAccountName",
        json!("miggate-checkpoint-agent"),
    )
}

#[rstest]
#[case::the_publishers_pod(publisher_pod(), None)]
#[case::the_agents_pod(agent_pod(), None)]
#[case::another_account(changed(publisher_pod(), "/spec/serviceAccountName", json!("default")), Some("runs only miggate's node pods"))]
#[case::no_account(
    changed(publisher_pod(), "/spec/serviceAccountName", Value::Null),
    Some("runs only miggate's node pods")
)]
#[case::privileged(container_security("privileged", json!(true)), Some("restricted profile"))]
#[case::with_capabilities(container_security("capabilities", json!({"drop": ["ALL"], "add": ["SYS_ADMIN"]})), Some("restricted profile"))]
#[case::capabilities_kept(container_security("capabilities", json!({})), Some("restricted profile"))]
#[case::escalation_allowed(container_security("allowPrivilegeEscalation", json!(true)), Some("restricted profile"))]
#[case::unmasked_proc(container_security("procMount", json!("Unmasked")), Some("restricted profile"))]
#[case::no_security_context(
    changed(publisher_pod(), "/spec/containers/0/securityContext", Value::Null),
    Some("restricted profile")
)]
#[case::a_host_port(container_field("ports", json!([{"containerPort": 80, "hostPort": 80}])), Some("restricted profile"))]
#[case::a_container_port(container_field("ports", json!([{"containerPort": 80, "hostPort": 0}])), None)]
#[case::root_in_the_container(container_security("runAsUser", json!(0)), Some("non-root"))]
#[case::root_for_the_pod(pod_security("runAsUser", json!(0)), Some("non-root"))]
#[case::maybe_root(changed(container_security("runAsNonRoot", json!(false)), "/spec/securityContext/runAsNonRoot", json!(false)), Some("non-root"))]
#[case::seccomp_unconfined(container_security("seccompProfile", json!({"type": "Unconfined"})), Some("run confined"))]
#[case::seccomp_unset(
    changed(
        changed(publisher_pod(), "/spec/securityContext/seccompProfile", Value::Null),
        "/spec/containers/0/securityContext/seccompProfile",
        Value::Null
    ),
    Some("run confined")
)]
#[case::apparmor_unconfined(pod_security("appArmorProfile", json!({"type": "Unconfined"})), Some("run confined"))]
#[case::apparmor_annotation(annotated(json!({"container.apparmor.security.beta.kubernetes.io/publish": "unconfined"})), Some("run confined"))]
#[case::apparmor_default_annotation(annotated(json!({"container.apparmor.security.beta.kubernetes.io/publish": "runtime/default"})), None)]
#[case::selinux_spc(pod_security("seLinuxOptions", json!({"type": "spc_t"})), Some("SELinux"))]
#[case::selinux_user(container_security("seLinuxOptions", json!({"user": "system_u"})), Some("SELinux"))]
#[case::selinux_container_type(pod_security("seLinuxOptions", json!({"type": "container_t", "level": "s0:c1,c2"})), None)]
#[case::sysctls(pod_security("sysctls", json!([{"name": "kernel.shm_rmid_forced", "value": "1"}])), Some("sysctls"))]
#[case::the_hosts_root(changed(publisher_pod(), "/spec/volumes/0/hostPath/path", json!("/")), Some("no host path but /run/miggate"))]
#[case::state_mounted_writable(changed(publisher_pod(), "/spec/containers/0/volumeMounts/0/readOnly", json!(false)), Some("read-only"))]
#[case::host_network(spec(publisher_pod(), "hostNetwork", json!(true)), Some("no host network"))]
#[case::host_pid(spec(publisher_pod(), "hostPID", json!(true)), Some("no host network"))]
#[case::an_init_container_unconfined(spec(publisher_pod(), "initContainers", json!([{"name": "setup", "image": "busybox"}])), Some("restricted profile"))]
// Attack: the agent's account ran pods as root with every privilege in this namespace.
#[case::the_agent_privileged(changed(agent_pod(), "/spec/containers/0/securityContext", json!({"privileged": true})), Some("restricted profile"))]
fn the_node_namespace_runs_only_restricted_node_pods(#[case] pod: Value, #[case] refused: Option<&str>) {
    let failed = node_pod_verdict("miggate-node", "CREATE", "pods", pod).unwrap();
    match refused {
        None => assert!(failed.is_empty(), "{failed:?}"),
        Some(words) => assert!(failed.iter().any(|m| m.contains(words)), "{failed:?}"),
    }
}

/// Attack: a pod of the agent's account made by hand named a node, and its token was bound to
/// that node. Only the DaemonSet controller (or the controller manager without per-controller
/// accounts) makes pods there.
#[rstest]
#[case::the_daemonset_controller(DAEMONSETS, false)]
#[case::the_controller_manager("system:kube-controller-manager", false)]
#[case::an_admin("kubernetes-admin", true)]
#[case::the_namespaces_editor("system:serviceaccount:miggate-node:default", true)]
fn only_daemonsets_make_node_pods(#[case] user: &str, #[case] refused: bool) {
    let failed = node_pod_verdict_by(user, "miggate-node", "CREATE", "pods", agent_pod()).unwrap();
    assert_eq!(!failed.is_empty(), refused, "{failed:?}");
    if refused {
        assert_eq!(
            failed,
            [format!(
                "miggate-node runs only the pods of DaemonSets, one on each node: a pod made by {user} could name any node and have the token of its service account bound to it"
            )]
        );
    }
}

#[test]
fn the_node_pod_policy_stays_in_its_namespace_and_sees_debug_containers() {
    let privileged = container_security("privileged", json!(true));
    assert_eq!(node_pod_verdict("ml", "CREATE", "pods", privileged), None);
    let debugged = spec(
        publisher_pod(),
        "ephemeralContainers",
        json!([{"name": "debug", "image": "busybox"}]),
    );
    let failed = node_pod_verdict("miggate-node", "UPDATE", "pods/ephemeralcontainers", debugged).unwrap();
    assert_eq!(failed, ["miggate's node pods run no ephemeral containers"]);
}

fn token_request(kind: &str) -> Value {
    json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"audiences": ["https://kubernetes.default.svc"],
            "boundObjectRef": {"apiVersion": "v1", "kind": kind, "name": "x"}}})
}

/// Attack: whoever could create tokens of the agent's account took one bound to a node it named
/// and wrote that node's checkpoints. Only a kubelet takes one, for a pod bound to it.
#[rstest]
#[case::the_kubelet_for_its_pod(
    "system:node:node-a",
    "miggate-checkpoint-agent",
    token_request("Pod"),
    Some(false)
)]
#[case::an_admin_for_a_node(
    "kubernetes-admin",
    "miggate-checkpoint-agent",
    token_request("Node"),
    Some(true)
)]
#[case::an_admin_for_a_pod(
    "kubernetes-admin",
    "miggate-checkpoint-agent",
    token_request("Pod"),
    Some(true)
)]
#[case::the_kubelet_for_a_node(
    "system:node:node-a",
    "miggate-checkpoint-agent",
    token_request("Node"),
    Some(true)
)]
#[case::unbound("system:serviceaccount:miggate-node:default", "miggate-publish", json!({"spec": {"audiences": ["x"]}}), Some(true))]
#[case::another_account("kubernetes-admin", "default", token_request("Node"), None)]
fn only_a_kubelet_takes_a_node_accounts_token(
    #[case] user: &str,
    #[case] account: &str,
    #[case] mut request: Value,
    #[case] refused: Option<bool>,
) {
    let p = policy(&INSTALLED, "miggate-node-tokens");
    request["metadata"] = json!({"name": account, "namespace": "miggate-node"});
    let req = admission(
        "CREATE",
        "serviceaccounts/token",
        "miggate-node",
        user,
        None,
        request,
        None,
    );
    let failed = policy_verdict(&p, &req);
    assert_eq!(failed.as_ref().map(|f| !f.is_empty()), refused, "{failed:?}");
    if refused == Some(true) {
        let message = &failed.unwrap()[0];
        assert!(
            message.starts_with(&format!(
                "a token of miggate-node/{account} says which node it was taken on"
            )),
            "{message}"
        );
        assert!(message.ends_with(&format!("not {user}")), "{message}");
    }
}

const WEBHOOK_ACCOUNT: &str = "system:serviceaccount:miggate-system:miggate-webhook";

/// miggate's ValidatingWebhookConfiguration as installed, with a CA injected.
fn configuration() -> Value {
    let mut c = find(
        &INSTALLED,
        "ValidatingWebhookConfiguration",
        VALIDATING_CONFIGURATION,
    )
    .clone();
    for w in c["webhooks"].as_array_mut().unwrap() {
        w["clientConfig"]["caBundle"] = json!("Q0EtMQ==");
    }
    c
}

fn edited(f: impl FnOnce(&mut Value)) -> Value {
    let mut c = configuration();
    f(&mut c);
    c
}

fn configuration_verdict(user: &str, new: Value) -> Option<Vec<String>> {
    let p = policy(&INSTALLED, "miggate-webhook-configurations");
    let req = admission(
        "UPDATE",
        "validatingwebhookconfigurations.admissionregistration.k8s.io",
        "",
        user,
        None,
        new,
        Some(configuration()),
    );
    policy_verdict(&p, &req)
}

/// Attack: a stolen token of the webhook's account (which may patch its own configurations to
/// inject the CA) added a webhook on Secrets pointed at its own url, widened one, or switched
/// one off. Only each caBundle may change.
#[rstest]
#[case::a_new_ca_bundle(edited(|c| c["webhooks"][0]["clientConfig"]["caBundle"] = json!("Q0EtMg==")), false)]
#[case::nothing_changed(configuration(), false)]
#[case::a_webhook_added(edited(|c| c["webhooks"].as_array_mut().unwrap().push(json!({"name": "secrets.evil.example", "clientConfig": {"url": "https://evil.example/"}, "sideEffects": "None", "admissionReviewVersions": ["v1"]}))), true)]
#[case::a_webhook_removed(edited(|c| { c["webhooks"].as_array_mut().unwrap().pop(); }), true)]
#[case::a_webhook_renamed(edited(|c| c["webhooks"][0]["name"] = json!("other.miggate.io")), true)]
#[case::pointed_at_a_url(edited(|c| { c["webhooks"][0]["clientConfig"] = json!({"url": "https://evil.example/", "caBundle": "Q0EtMQ=="}); }), true)]
#[case::another_service(edited(|c| c["webhooks"][0]["clientConfig"]["service"]["name"] = json!("evil")), true)]
#[case::switched_off(edited(|c| c["webhooks"][0]["failurePolicy"] = json!("Ignore")), true)]
#[case::rules_widened(edited(|c| c["webhooks"][1]["rules"][0]["resources"] = json!(["*"])), true)]
#[case::namespaces_exempted(edited(|c| c["webhooks"][0]["namespaceSelector"] = json!({})), true)]
#[case::an_object_selector(edited(|c| c["webhooks"][0]["objectSelector"] = json!({"matchLabels": {"x": "y"}})), true)]
#[case::conditions_dropped(edited(|c| { c["webhooks"][0].as_object_mut().unwrap().remove("matchConditions"); }), true)]
#[case::timeout_changed(edited(|c| c["webhooks"][0]["timeoutSeconds"] = json!(1)), true)]
#[case::an_owner(edited(|c| c["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u"}])), true)]
#[case::a_finalizer(edited(|c| c["metadata"]["finalizers"] = json!(["hold"])), true)]
#[case::a_label(edited(|c| c["metadata"]["labels"]["x"] = json!("y")), true)]
fn the_webhook_account_changes_only_ca_bundles(#[case] new: Value, #[case] refused: bool) {
    let failed = configuration_verdict(WEBHOOK_ACCOUNT, new.clone()).unwrap();
    assert_eq!(!failed.is_empty(), refused, "{failed:?}");
    if refused {
        assert!(failed.iter().all(|m| m.starts_with(&format!(
            "{WEBHOOK_ACCOUNT} changes nothing of a webhook configuration but each webhook's clientConfig.caBundle"
        ))), "{failed:?}");
    }
    // An admin's change is not this policy's business.
    assert_eq!(configuration_verdict("kubernetes-admin", new), None);
}

fn certs_secret(data: Option<Value>, annotations: Value) -> Value {
    let mut s = json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "miggate-webhook-certs", "namespace": "miggate-system", "annotations": annotations}});
    if let Some(d) = data {
        s["data"] = d;
    }
    s
}

fn written() -> Value {
    certs_secret(
        Some(json!({"ca.crt": "Q0E=", "ca.key": "S0VZ"})),
        json!({"miggate.io/written-by": "uid-1", "meta.helm.sh/release-name": "miggate"}),
    )
}

fn certs_verdict(user: &str, operation: &str, object: Value, old: Option<Value>) -> Option<Vec<String>> {
    let p = policy(&INSTALLED, "miggate-webhook-certs");
    let req = admission(operation, "secrets", "miggate-system", user, None, object, old);
    policy_verdict(&p, &req)
}

/// Attack: an account that may create Secrets in the webhook's namespace planted its own CA
/// (before the install, while no replica ran, or right after an admin deleted the Secret to
/// rotate), and every configuration then trusted it; or kept a foreign CA in the bundle for
/// years with one annotation. Only the webhook's account writes the data and miggate's marks.
#[rstest]
#[case::helm_creates_it_empty("kubernetes-admin", "CREATE", certs_secret(None, json!({"meta.helm.sh/release-name": "miggate"})), None, false)]
#[case::a_planted_ca("kubernetes-admin", "CREATE", written(), None, true)]
#[case::planted_immutable("kubernetes-admin", "CREATE", { let mut s = certs_secret(None, json!({})); s["immutable"] = json!(true); s }, None, true)]
#[case::planted_as_another_type("kubernetes-admin", "CREATE", { let mut s = certs_secret(None, json!({})); s["type"] = json!("kubernetes.io/tls"); s }, None, true)]
#[case::planted_marks("kubernetes-admin", "CREATE", certs_secret(None, json!({"miggate.io/written-by": "uid-1"})), None, true)]
#[case::data_overwritten("kubernetes-admin", "UPDATE", certs_secret(Some(json!({"ca.crt": "RVZJTA=="})), json!({"miggate.io/written-by": "uid-1", "meta.helm.sh/release-name": "miggate"})), Some(written()), true)]
#[case::kept_ca_extended("kubernetes-admin", "UPDATE", { let mut s = written(); s["metadata"]["annotations"]["miggate.io/previous-ca-until"] = json!("2099-01-01T00:00:00Z"); s }, Some(written()), true)]
#[case::mark_removed("kubernetes-admin", "UPDATE", { let mut s = written(); s["metadata"]["annotations"] = json!({"meta.helm.sh/release-name": "miggate"}); s }, Some(written()), true)]
#[case::made_immutable("kubernetes-admin", "UPDATE", { let mut s = written(); s["immutable"] = json!(true); s }, Some(written()), true)]
#[case::helm_relabels("kubernetes-admin", "UPDATE", { let mut s = written(); s["metadata"]["labels"] = json!({"helm.sh/chart": "miggate-0.2.0"}); s }, Some(written()), false)]
#[case::the_webhook_writes_it(WEBHOOK_ACCOUNT, "UPDATE", certs_secret(Some(json!({"ca.crt": "TkVX"})), json!({"miggate.io/written-by": "uid-1"})), Some(written()), false)]
#[case::the_webhook_makes_it_again(WEBHOOK_ACCOUNT, "CREATE", written(), None, false)]
fn only_the_webhook_writes_its_certificates(
    #[case] user: &str,
    #[case] operation: &str,
    #[case] object: Value,
    #[case] old: Option<Value>,
    #[case] refused: bool,
) {
    let failed = certs_verdict(user, operation, object, old).unwrap();
    assert_eq!(!failed.is_empty(), refused, "{failed:?}");
    if refused {
        assert!(
            failed[0].starts_with(
                "only miggate's webhook writes the certificates in Secret miggate-webhook-certs"
            ),
            "{failed:?}"
        );
    }
}

/// RBAC cannot hold `create` to one name: the policy holds the webhook's account to its one
/// Secret, and leaves every other Secret of the namespace to everyone else.
#[test]
fn the_webhook_account_writes_no_other_secret() {
    let mut other = written();
    other["metadata"]["name"] = json!("planted");
    let failed = certs_verdict(WEBHOOK_ACCOUNT, "CREATE", other.clone(), None).unwrap();
    assert_eq!(
        failed,
        [format!(
            "{WEBHOOK_ACCOUNT} writes no Secret but miggate-webhook-certs"
        )]
    );
    assert_eq!(
        certs_verdict("kubernetes-admin", "CREATE", other, None).unwrap(),
        Vec::<String>::new()
    );
}

fn token_secret(namespace: &str, account: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
        "metadata": {"name": "forever", "namespace": namespace,
            "annotations": {"kubernetes.io/service-account.name": account}}})
}

/// Attack: a Secret of type `kubernetes.io/service-account-token` naming one of the install's
/// accounts, which the token controller fills with a token that never expires and is bound to
/// nothing (no node for the agent's policy, the webhook's power for good).
#[rstest]
#[case::the_agents(
    "miggate-node",
    token_secret("miggate-node", "miggate-checkpoint-agent"),
    Some(true)
)]
#[case::the_publishers("miggate-node", token_secret("miggate-node", "miggate-publish"), Some(true))]
#[case::the_webhooks(
    "miggate-system",
    token_secret("miggate-system", "miggate-webhook"),
    Some(true)
)]
#[case::a_tenants_own("ml", token_secret("ml", "builder"), Some(false))]
#[case::an_account_of_that_name_elsewhere("ml", token_secret("ml", "miggate-webhook"), Some(false))]
#[case::an_opaque_secret("miggate-node", { let mut s = token_secret("miggate-node", "miggate-publish"); s["type"] = json!("Opaque"); s }, None)]
fn no_token_secret_of_the_installs_accounts(
    #[case] namespace: &str,
    #[case] secret: Value,
    #[case] refused: Option<bool>,
) {
    let p = policy(&INSTALLED, "miggate-token-secrets");
    let req = admission(
        "CREATE",
        "secrets",
        namespace,
        "kubernetes-admin",
        None,
        secret,
        None,
    );
    let failed = policy_verdict(&p, &req);
    assert_eq!(failed.as_ref().map(|f| !f.is_empty()), refused, "{failed:?}");
    if refused == Some(true) {
        assert!(failed.unwrap()[0].starts_with(&format!("a token Secret of {namespace}/")));
    }
}
