//! The tenant policies of `deploy/`, run as the API server runs them (resource rules,
//! namespace selector, match conditions, then every validation), one row per write a tenant,
//! a node agent or the scheduler makes. Each attack row names the write that got around the
//! gate before these policies existed; on the install without them it is allowed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use miggate_crds::deploy::policies::{self, LOCKED_ANNOTATIONS, cel_string};
use miggate_crds::deploy::waivers::{
    TEMPLATE_POLICIES, WAIVE_RESOURCE, WAIVE_VERB, WAIVER_ROLE, WAIVER_RULE, WORKLOADS,
};
use miggate_crds::deploy::{self, Config, Object};
use rstest::rstest;
use serde_json::{Value, json};
use support::{admission, message, policy_applies, policy_verdict};

const TENANT: &str = "system:serviceaccount:ml:editor";
const SCHEDULER: &str = "system:kube-scheduler";
const AGENT: &str = "system:serviceaccount:miggate-node:miggate-checkpoint-agent";
const RESTORE: &str = "miggate.io/restore-from";
const PEER_RESTORE: &str = "nvidia.com/restore-from";
const MAP: &str = "miggate.io/device-map";

fn objects(config: &Config) -> Vec<Object> {
    deploy::objects(config).unwrap()
}

fn policy(objects: &[Object], name: &str) -> Value {
    let found = |kind: &str| {
        objects
            .iter()
            .find(|o| o.kind().1 == kind && o.name() == name)
            .unwrap_or_else(|| panic!("no {kind} {name}"))
            .value
            .clone()
    };
    // Every policy is bound, to deny.
    assert_eq!(
        found("ValidatingAdmissionPolicyBinding")["spec"],
        json!({"policyName": name, "validationActions": ["Deny"]})
    );
    found("ValidatingAdmissionPolicy")
}

fn pod(annotations: &[(&str, &str)]) -> Value {
    let mut p = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "vllm-restore-0", "namespace": "ml", "labels": {"app": "vllm"}},
        "spec": {"containers": [{"name": "vllm", "image": "vllm:1"}], "nodeName": "node-big"}});
    if !annotations.is_empty() {
        p["metadata"]["annotations"] = annotations
            .iter()
            .map(|(k, v)| ((*k).to_string(), json!(v)))
            .collect::<serde_json::Map<_, _>>()
            .into();
    }
    p
}

fn create(object: Value) -> Value {
    admission("CREATE", "pods", "ml", TENANT, None, object, None)
}

fn update(old: Value, new: Value) -> Value {
    admission("UPDATE", "pods", "ml", TENANT, None, new, Some(old))
}

/// The annotation policy's verdict: `None` allowed, else the first refusal's message.
fn annotation_verdict(req: &Value) -> Option<String> {
    let p = policy(&objects(&Config::default()), "miggate-restore-annotations");
    policy_verdict(&p, req).unwrap_or_default().into_iter().next()
}

#[rstest]
#[case::a_plain_pod(create(pod(&[])), None)]
#[case::a_restore_pod(create(pod(&[(RESTORE, "vllm-ckpt")])), None)]
#[case::a_peer_restore_pod(create(pod(&[(PEER_RESTORE, "vllm-snap"), ("nvidia.com/restore-container-map", "engine=engine-0")])), None)]
// Attack: a restore pod created with its own device map kept it through its binding.
#[case::created_with_a_device_map(create(pod(&[(RESTORE, "vllm-ckpt"), (MAP, "{\"0\":\"GPU-x\"}")])), Some(MAP))]
#[case::a_plain_pod_created_with_a_device_map(create(pod(&[(MAP, "{}")])), Some(MAP))]
// Attack: `kubectl annotate --overwrite miggate.io/device-map=...` on a bound restore pod.
#[case::device_map_overwritten(update(pod(&[(RESTORE, "c"), (MAP, "a")]), pod(&[(RESTORE, "c"), (MAP, "b")])), Some(MAP))]
#[case::device_map_added_later(update(pod(&[(RESTORE, "c")]), pod(&[(RESTORE, "c"), (MAP, "b")])), Some(MAP))]
#[case::device_map_removed(update(pod(&[(RESTORE, "c"), (MAP, "a")]), pod(&[(RESTORE, "c")])), Some(MAP))]
// Attack: a plain pod on a short node, annotated afterwards, became a restore pod no check saw.
#[case::restore_from_added_later(update(pod(&[]), pod(&[(RESTORE, "vllm-ckpt")])), Some(RESTORE))]
#[case::peer_restore_from_added_later(update(pod(&[("team", "a")]), pod(&[("team", "a"), (PEER_RESTORE, "vllm-snap")])), Some(PEER_RESTORE))]
// Attack: a restore pod re-pointed at another checkpoint after admission.
#[case::restore_pod_re_pointed(update(pod(&[(RESTORE, "small-ckpt")]), pod(&[(RESTORE, "big-ckpt")])), Some(RESTORE))]
#[case::peer_restore_pod_re_pointed(update(pod(&[(PEER_RESTORE, "a")]), pod(&[(PEER_RESTORE, "b")])), Some(PEER_RESTORE))]
#[case::restore_from_removed(update(pod(&[(RESTORE, "c")]), pod(&[])), Some(RESTORE))]
#[case::container_map_changed(update(pod(&[(PEER_RESTORE, "s"), ("nvidia.com/restore-container-map", "engine=engine-0")]), pod(&[(PEER_RESTORE, "s"), ("nvidia.com/restore-container-map", "engine=engine-1")])), Some("nvidia.com/restore-container-map"))]
#[case::waiver_added_later(update(pod(&[(RESTORE, "c")]), pod(&[(RESTORE, "c"), ("miggate.io/skip-checks", "all")])), Some("miggate.io/skip-checks"))]
#[case::steering_asked_later(update(pod(&[(RESTORE, "c")]), pod(&[(RESTORE, "c"), ("miggate.io/steer", "true")])), Some("miggate.io/steer"))]
#[case::steered_mark_dropped(update(pod(&[(RESTORE, "c"), ("miggate.io/steered", "true")]), pod(&[(RESTORE, "c")])), Some("miggate.io/steered"))]
// What tenants and controllers do every day stays allowed.
#[case::other_annotations_changed(update(pod(&[(RESTORE, "c"), ("team", "a")]), pod(&[(RESTORE, "c"), ("team", "b")])), None)]
#[case::nothing_changed(update(pod(&[(RESTORE, "c"), (MAP, "m")]), pod(&[(RESTORE, "c"), (MAP, "m")])), None)]
#[case::a_plain_pod_annotated(update(pod(&[]), pod(&[("team", "a")])), None)]
// The peer's agent reopens a restore it refused when its waiver is added (its contract).
#[case::peer_waiver_added_later(update(pod(&[(PEER_RESTORE, "s")]), pod(&[(PEER_RESTORE, "s"), ("nvidia.com/snapshot-skip-compat-check", "true")])), None)]
#[case::peer_waiver_changed(update(pod(&[(PEER_RESTORE, "s"), ("nvidia.com/snapshot-skip-compat-check", "false")]), pod(&[(PEER_RESTORE, "s"), ("nvidia.com/snapshot-skip-compat-check", "true")])), Some("nvidia.com/snapshot-skip-compat-check"))]
#[case::peer_waiver_removed(update(pod(&[(PEER_RESTORE, "s"), ("nvidia.com/snapshot-skip-compat-check", "true")]), pod(&[(PEER_RESTORE, "s")])), Some("nvidia.com/snapshot-skip-compat-check"))]
// A status update can change a pod's annotations too.
#[case::through_the_status(admission("UPDATE", "pods/status", "ml", "system:node:node-big", None, pod(&[(RESTORE, "b")]), Some(pod(&[(RESTORE, "a")]))), Some(RESTORE))]
// In every namespace: the node agent reads the device map wherever the pod runs.
#[case::in_kube_system(admission("CREATE", "pods", "kube-system", TENANT, None, pod(&[(MAP, "{}")]), None), Some(MAP))]
fn restore_annotations_are_fixed_at_creation(#[case] req: Value, #[case] refused_for: Option<&str>) {
    let verdict = annotation_verdict(&req);
    match refused_for {
        None => assert_eq!(verdict, None),
        Some(key) => {
            let message = verdict.unwrap_or_else(|| panic!("allowed; expected a refusal naming {key}"));
            assert!(message.starts_with(&format!("{key} ")), "{message}");
        }
    }
}

#[test]
fn the_refusals_say_what_to_do() {
    let created = annotation_verdict(&create(pod(&[(MAP, "{}")]))).unwrap();
    insta::assert_snapshot!(created, @"miggate.io/device-map is written by miggate when the pod is bound; a pod cannot be created with it");
    let changed = annotation_verdict(&update(pod(&[]), pod(&[(RESTORE, "c")]))).unwrap();
    insta::assert_snapshot!(changed, @"miggate.io/restore-from cannot be added, changed or removed once the pod exists: miggate checked the pod as it was created; create a new pod instead");
}

/// Every annotation miggate defines for pods is fixed at creation, so a new one cannot be
/// added to `wire` and forgotten here.
#[test]
fn every_pod_annotation_of_the_wire_is_locked() {
    use miggate_wire::annotations::{DEVICE_MAP, RESTORE_FROM, SKIP_CHECKS, STEER, STEERED};
    use miggate_wire::peer;
    for key in [
        RESTORE_FROM,
        SKIP_CHECKS,
        STEER,
        STEERED,
        DEVICE_MAP,
        peer::RESTORE_FROM,
        peer::RESTORE_CONTAINER_MAP,
    ] {
        assert!(LOCKED_ANNOTATIONS.contains(&key), "{key}");
    }
}

fn binding(annotations: Option<Value>) -> Value {
    let mut b = json!({"apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "vllm-restore-0", "namespace": "ml"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-big"}});
    if let Some(a) = annotations {
        b["metadata"]["annotations"] = a;
    }
    b
}

#[rstest]
#[case::the_scheduler_with_the_webhooks_map("pods/binding", SCHEDULER, Some(json!({MAP: "{}"})), false)]
#[case::the_scheduler_plain("pods/binding", SCHEDULER, None, false)]
#[case::a_tenant_plain("pods/binding", TENANT, None, false)]
// Attack (review): a Binding's annotations are copied onto the pod, from whoever may bind.
#[case::a_tenant_with_a_map("pods/binding", TENANT, Some(json!({MAP: "{}"})), true)]
#[case::the_legacy_resource_with_a_map("bindings", TENANT, Some(json!({MAP: "{}"})), true)]
#[case::a_restore_reference("pods/binding", SCHEDULER, Some(json!({RESTORE: "c"})), true)]
#[case::a_waiver("bindings", TENANT, Some(json!({"nvidia.com/snapshot-skip-compat-check": "true"})), true)]
#[case::other_annotations("pods/binding", TENANT, Some(json!({"team": "a"})), false)]
fn bindings_carry_only_the_schedulers_device_map(
    #[case] resource: &str,
    #[case] user: &str,
    #[case] annotations: Option<Value>,
    #[case] denied: bool,
) {
    let p = policy(&objects(&Config::default()), "miggate-binding-annotations");
    let req = admission("CREATE", resource, "ml", user, None, binding(annotations), None);
    let failed = policy_verdict(&p, &req).unwrap();
    assert_eq!(!failed.is_empty(), denied, "{failed:?}");
}

#[test]
fn the_binders_are_configurable_and_quoted() {
    let config = Config {
        binders: vec!["system:serviceaccount:kube-system:volcano' || true || '".into()],
        ..Config::default()
    };
    let p = policy(&objects(&config), "miggate-binding-annotations");
    let map = Some(json!({MAP: "{}"}));
    let as_user = |user: &str| {
        let req = admission(
            "CREATE",
            "pods/binding",
            "ml",
            user,
            None,
            binding(map.clone()),
            None,
        );
        policy_verdict(&p, &req).unwrap().is_empty()
    };
    // The quote does not end the literal: only that exact (odd) name may bind with a map.
    assert!(as_user("system:serviceaccount:kube-system:volcano' || true || '"));
    assert!(!as_user(SCHEDULER));
    assert!(!as_user(TENANT));
    assert_eq!(cel_string("a'b\\c\n"), "'a\\'b\\\\c\\u000a'");
    assert!(
        deploy::objects(&Config {
            binders: vec![],
            ..Config::default()
        })
        .is_err()
    );
}

fn checkpoint(node: Option<&str>) -> Value {
    let mut c = json!({"apiVersion": "miggate.io/v1alpha1", "kind": "GpuCheckpoint",
        "metadata": {"name": "vllm-ckpt", "namespace": "ml"},
        "spec": {"manifest": {"host": {"kernelVersion": "6.8.0"}}}});
    if let Some(n) = node {
        c["spec"]["manifest"]["host"]["nodeName"] = json!(n);
    }
    c
}

/// A write of a checkpoint: `operation` by `user` (with its token's node), of the checkpoint
/// recorded on `old` (UPDATE, DELETE) to one recorded on `new` (CREATE, UPDATE).
fn checkpoint_write(
    operation: &str,
    resource: &str,
    user: &str,
    token: Option<&str>,
    old: Option<Option<&str>>,
    new: Option<Option<&str>>,
) -> Value {
    admission(
        operation,
        resource,
        "ml",
        user,
        token,
        new.map(checkpoint).unwrap_or(Value::Null),
        old.map(checkpoint),
    )
}

const CKPT: &str = "gpucheckpoints.miggate.io";
const CKPT_STATUS: &str = "gpucheckpoints.miggate.io/status";
const NAMESPACE_CONTROLLER: &str = "system:serviceaccount:kube-system:namespace-controller";
const GC: &str = "system:serviceaccount:kube-system:generic-garbage-collector";

/// The checkpoint writers' policy on every operation: the verdict, `None` allowed, else the
/// end of the first refusal's message.
#[rstest]
#[case::creates_its_own_nodes(
    checkpoint_write("CREATE", CKPT, AGENT, Some("node-a"), None, Some(Some("node-a"))),
    None
)]
#[case::updates_its_own_nodes(
    checkpoint_write(
        "UPDATE",
        CKPT,
        AGENT,
        Some("node-a"),
        Some(Some("node-a")),
        Some(Some("node-a"))
    ),
    None
)]
#[case::updates_its_own_nodes_status(
    checkpoint_write(
        "UPDATE",
        CKPT_STATUS,
        AGENT,
        Some("node-a"),
        Some(Some("node-a")),
        Some(Some("node-a"))
    ),
    None
)]
#[case::deletes_its_own_nodes(
    checkpoint_write("DELETE", CKPT, AGENT, Some("node-a"), Some(Some("node-a")), None),
    None
)]
// Attack: an agent token bound to a pod on node-a wrote a checkpoint recorded on node-b.
#[case::creates_another_nodes(
    checkpoint_write("CREATE", CKPT, AGENT, Some("node-a"), None, Some(Some("node-b"))),
    Some("this token is bound to node node-a, the checkpoint names node node-b")
)]
// Attack: the agent on node-a rewrote node-b's checkpoint to say node-a (the new object alone
// was read, and it named node-a).
#[case::re_points_another_nodes_at_its_own(
    checkpoint_write(
        "UPDATE",
        CKPT,
        AGENT,
        Some("node-a"),
        Some(Some("node-b")),
        Some(Some("node-a"))
    ),
    Some("(node-b), which cannot become node-a; write a new checkpoint for another node")
)]
#[case::rewrites_another_nodes(
    checkpoint_write(
        "UPDATE",
        CKPT,
        AGENT,
        Some("node-a"),
        Some(Some("node-b")),
        Some(Some("node-b"))
    ),
    Some("this token is bound to node node-a, the checkpoint is recorded on node node-b")
)]
#[case::rewrites_another_nodes_status(
    checkpoint_write(
        "UPDATE",
        CKPT_STATUS,
        AGENT,
        Some("node-a"),
        Some(Some("node-b")),
        Some(Some("node-b"))
    ),
    Some("this token is bound to node node-a, the checkpoint is recorded on node node-b")
)]
#[case::moves_its_own_to_another_node(
    checkpoint_write(
        "UPDATE",
        CKPT,
        AGENT,
        Some("node-a"),
        Some(Some("node-a")),
        Some(Some("node-b"))
    ),
    Some("(node-a), which cannot become node-b; write a new checkpoint for another node")
)]
#[case::drops_its_node(
    checkpoint_write("UPDATE", CKPT, AGENT, Some("node-a"), Some(Some("node-a")), Some(None)),
    Some("(node-a), which cannot become unset; write a new checkpoint for another node")
)]
#[case::claims_a_checkpoint_recorded_on_no_node(
    checkpoint_write("UPDATE", CKPT, AGENT, Some("node-a"), Some(None), Some(Some("node-a"))),
    Some("this token is bound to node node-a, the checkpoint is recorded on no node")
)]
// Attack: DELETE was not matched at all.
#[case::deletes_another_nodes(
    checkpoint_write("DELETE", CKPT, AGENT, Some("node-a"), Some(Some("node-b")), None),
    Some("this token is bound to node node-a, the checkpoint is recorded on node node-b")
)]
#[case::deletes_with_a_token_bound_to_no_node(
    checkpoint_write("DELETE", CKPT, AGENT, None, Some(Some("node-a")), None),
    Some("this token is bound to no node, the checkpoint is recorded on node node-a")
)]
#[case::creates_with_a_token_bound_to_no_node(
    checkpoint_write("CREATE", CKPT, AGENT, None, None, Some(Some("node-a"))),
    Some("this token is bound to no node, the checkpoint names node node-a")
)]
#[case::creates_one_naming_no_node(
    checkpoint_write("CREATE", CKPT, AGENT, Some("node-a"), None, Some(None)),
    Some("this token is bound to node node-a, the checkpoint names no node")
)]
// Nobody else writes checkpoints, but anyone RBAC allows may delete one: an admin cleaning up,
// the namespace controller emptying a namespace being deleted.
#[case::a_tenant_writes(
    checkpoint_write(
        "UPDATE",
        CKPT,
        TENANT,
        Some("node-a"),
        Some(Some("node-a")),
        Some(Some("node-a"))
    ),
    Some("only system:serviceaccount:miggate-node:miggate-checkpoint-agent may write them")
)]
#[case::an_admin_deletes(
    checkpoint_write("DELETE", CKPT, "kubernetes-admin", None, Some(Some("node-b")), None),
    None
)]
#[case::the_namespace_controller_deletes(
    checkpoint_write("DELETE", CKPT, NAMESPACE_CONTROLLER, None, Some(Some("node-b")), None),
    None
)]
#[case::the_garbage_collector_updates_owners(
    checkpoint_write("UPDATE", CKPT, GC, None, Some(Some("node-b")), Some(Some("node-b"))),
    None
)]
fn the_checkpoint_agent_writes_and_deletes_only_its_own_nodes_checkpoints(
    #[case] req: Value,
    #[case] refused: Option<&str>,
) {
    let p = policy(&objects(&Config::default()), "miggate-checkpoint-writers");
    let failed = policy_verdict(&p, &req).unwrap_or_default();
    match refused {
        None => assert_eq!(failed, Vec::<String>::new()),
        Some(end) => {
            let first = failed
                .first()
                .unwrap_or_else(|| panic!("allowed; expected …{end}"));
            assert!(first.ends_with(end), "{first}");
        }
    }
}

#[test]
fn the_checkpoint_refusals_name_both_nodes() {
    let p = policy(&objects(&Config::default()), "miggate-checkpoint-writers");
    let req = checkpoint_write("DELETE", CKPT, AGENT, Some("node-a"), Some(Some("node-b")), None);
    insta::assert_snapshot!(policy_verdict(&p, &req).unwrap().join("\n"), @"the checkpoint agent writes and deletes only checkpoints recorded on its own node (spec.manifest.host.nodeName), with a token bound to a pod there; this token is bound to node node-a, the checkpoint is recorded on node node-b");
    let req = checkpoint_write(
        "UPDATE",
        CKPT,
        AGENT,
        Some("node-a"),
        Some(Some("node-b")),
        Some(Some("node-a")),
    );
    insta::assert_snapshot!(policy_verdict(&p, &req).unwrap().join("\n"), @r"
    spec.manifest.host.nodeName is fixed once written: a checkpoint stays the record of the node it was taken on (node-b), which cannot become node-a; write a new checkpoint for another node
    the checkpoint agent writes and deletes only checkpoints recorded on its own node (spec.manifest.host.nodeName), with a token bound to a pod there; this token is bound to node node-a, the checkpoint is recorded on node node-b
    ");
}

/// The agent's role: every verb it needs on its checkpoints, delete included (the policy holds
/// it to its own node's), and nothing on any other resource.
#[test]
fn the_agent_holds_what_the_policy_judges() {
    let objects = objects(&Config::default());
    let role = objects
        .iter()
        .find(|o| o.kind().1 == "ClusterRole" && o.name() == "miggate-checkpoint-writer")
        .unwrap();
    assert_eq!(
        role.value["rules"],
        json!([
            {"apiGroups": ["miggate.io"], "resources": ["gpucheckpoints"],
             "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
            {"apiGroups": ["miggate.io"], "resources": ["gpucheckpoints/status"],
             "verbs": ["get", "update", "patch"]},
        ])
    );
    // Every write the role allows is one the policy judges.
    let p = policy(&objects, "miggate-checkpoint-writers");
    assert_eq!(
        p["spec"]["matchConstraints"]["resourceRules"][0]["operations"],
        json!(["CREATE", "UPDATE", "DELETE"])
    );
}

/// The publisher's pod as its DaemonSet makes it.
fn publisher_pod() -> Value {
    let objects = objects(&Config::default());
    let ds = objects
        .iter()
        .find(|o| o.kind().1 == "DaemonSet" && o.name() == "miggate-publish")
        .unwrap();
    let mut p = ds.value["spec"]["template"].clone();
    p["apiVersion"] = json!("v1");
    p["kind"] = json!("Pod");
    p["metadata"]["name"] = json!("miggate-publish-x7k2p");
    p["metadata"]["namespace"] = json!("miggate-node");
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
    let p = policy(&objects(&Config::default()), "miggate-node-pods");
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
    let p = policy(&objects(&Config::default()), "miggate-node-tokens");
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

#[test]
fn waivers_are_open_by_default() {
    let objects = objects(&Config::default());
    assert!(!objects.iter().any(|o| o.name().starts_with("miggate-waivers")));
    assert!(!objects.iter().any(|o| o.name() == WAIVER_ROLE));
}

const KCM: &str = "system:kube-controller-manager";

fn kube_system(controller: &str) -> String {
    format!("system:serviceaccount:kube-system:{controller}")
}

/// A workload of `kind` whose pod template carries `annotations`, in namespace `ml`.
fn workload(kind: &str, annotations: &[(&str, &str)]) -> Value {
    let api = match kind {
        "Job" | "CronJob" => "batch/v1",
        "ReplicationController" => "v1",
        _ => "apps/v1",
    };
    let template = json!({"metadata": pod(annotations)["metadata"].clone(),
        "spec": {"containers": [{"name": "vllm", "image": "vllm:1"}]}});
    let spec = if kind == "CronJob" {
        json!({"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": template}}})
    } else {
        json!({"replicas": 1, "selector": {"matchLabels": {"app": "vllm"}}, "template": template})
    };
    json!({"apiVersion": api, "kind": kind, "metadata": {"name": "vllm", "namespace": "ml"}, "spec": spec})
}

/// `kind`'s resource, as the request names it (`deployments.apps`).
fn resource(kind: &str) -> String {
    let plural = format!("{}s", kind.to_lowercase());
    match kind {
        "Job" | "CronJob" => format!("{plural}.batch"),
        "ReplicationController" => plural,
        _ => format!("{plural}.apps"),
    }
}

fn write_by(user: &str, operation: &str, kind: &str, old: Option<Value>, new: Value) -> Value {
    let resource = if kind == "Pod" {
        "pods".to_string()
    } else {
        resource(kind)
    };
    admission(operation, &resource, "ml", user, None, new, old)
}

/// A tenant's write of a workload (or a pod, `kind` `Pod`).
fn tenant_writes(operation: &str, kind: &str, old: Option<&[(&str, &str)]>, new: &[(&str, &str)]) -> Value {
    let build = |a: &[(&str, &str)]| if kind == "Pod" { pod(a) } else { workload(kind, a) };
    write_by(TENANT, operation, kind, old.map(build), build(new))
}

/// Which waiver policy asks the authorizer about `req` (the writer's `waive`), if any. The
/// validation itself is the authorizer's answer for the writer, which only the API server
/// gives (the real-server walk in docs/deploy.md); here, that the right writes reach it.
fn asked_by(req: &Value) -> Vec<String> {
    let config = Config {
        waivers_need_permission: true,
        ..Config::default()
    };
    let objects = objects(&config);
    objects
        .iter()
        .filter(|o| o.kind().1 == "ValidatingAdmissionPolicy" && o.name().starts_with("miggate-waivers"))
        .filter(|o| {
            let p = policy(&objects, o.name());
            assert_eq!(p["spec"]["validations"][0]["expression"], WAIVER_RULE);
            assert_eq!(p["spec"]["validations"].as_array().unwrap().len(), 1);
            policy_applies(&p, req)
        })
        .map(|o| o.name().to_string())
        .collect()
}

const WAIVER: (&str, &str) = ("miggate.io/skip-checks", "all");
const PEER_WAIVER: (&str, &str) = ("nvidia.com/snapshot-skip-compat-check", "true");
const A: (&str, &str) = (RESTORE, "vllm-ckpt");
const PEER_A: (&str, &str) = (PEER_RESTORE, "vllm-snap");

#[rstest]
// Pods: the writer is judged, unless one of Kubernetes' controllers made the pod from a
// workload's template (whose writer was judged).
#[case::a_restore_pod_created_with_a_waiver(tenant_writes("CREATE", "Pod", None, &[A, WAIVER]), Some("miggate-waivers"))]
#[case::a_peer_restore_pod_created_with_its_skip(tenant_writes("CREATE", "Pod", None, &[PEER_A, PEER_WAIVER]), Some("miggate-waivers"))]
#[case::the_peers_skip_added_later(tenant_writes("UPDATE", "Pod", Some(&[PEER_A]), &[PEER_A, ("nvidia.com/snapshot-skip-compat-check", "1")]), Some("miggate-waivers"))]
#[case::a_restore_pod_without_a_waiver(tenant_writes("CREATE", "Pod", None, &[A]), None)]
#[case::a_plain_pod_with_a_waiver(tenant_writes("CREATE", "Pod", None, &[WAIVER]), None)]
#[case::an_unchanged_waiver(tenant_writes("UPDATE", "Pod", Some(&[A, WAIVER]), &[A, WAIVER, ("team", "a")]), None)]
// Attack (issue): a status update can change annotations; the policy did not see pods/status.
#[case::the_peers_skip_added_through_the_status(
    admission("UPDATE", "pods/status", "ml", TENANT, None, pod(&[PEER_A, PEER_WAIVER]), Some(pod(&[PEER_A]))),
    Some("miggate-waivers"))]
#[case::the_replicaset_controllers_pod(write_by(&kube_system("replicaset-controller"), "CREATE", "Pod", None, pod(&[A, WAIVER])), None)]
#[case::the_job_controllers_pod(write_by(&kube_system("job-controller"), "CREATE", "Pod", None, pod(&[A, WAIVER])), None)]
#[case::the_statefulset_controllers_pod(write_by(&kube_system("statefulset-controller"), "CREATE", "Pod", None, pod(&[A, WAIVER])), None)]
#[case::the_daemonset_controllers_pod(write_by(&kube_system("daemon-set-controller"), "CREATE", "Pod", None, pod(&[A, WAIVER])), None)]
#[case::the_replication_controllers_pod(write_by(&kube_system("replication-controller"), "CREATE", "Pod", None, pod(&[A, WAIVER])), None)]
#[case::the_controller_managers_own_pod(write_by(KCM, "CREATE", "Pod", None, pod(&[A, WAIVER])), None)]
// Attack: a service account named like a controller, in the tenant's namespace (which `edit`
// can run pods as, and impersonate).
#[case::a_look_alike_controller(write_by("system:serviceaccount:ml:replicaset-controller", "CREATE", "Pod", None, pod(&[A, WAIVER])), Some("miggate-waivers"))]
// Attack: ownerReferences set by hand name a ReplicaSet; the writer is still the tenant.
#[case::a_pod_owned_by_hand(tenant_writes("CREATE", "Pod", None, &[A, WAIVER]), Some("miggate-waivers"))]
// Attack (issue): a Deployment's pods were written by the replicaset controller, so anyone who
// could create a Deployment waived.
#[case::a_deployment(tenant_writes("CREATE", "Deployment", None, &[A, WAIVER]), Some("miggate-waivers-workloads"))]
#[case::a_statefulset(tenant_writes("CREATE", "StatefulSet", None, &[A, WAIVER]), Some("miggate-waivers-workloads"))]
#[case::a_daemonset(tenant_writes("CREATE", "DaemonSet", None, &[PEER_A, PEER_WAIVER]), Some("miggate-waivers-workloads"))]
#[case::a_job(tenant_writes("CREATE", "Job", None, &[A, WAIVER]), Some("miggate-waivers-workloads"))]
#[case::a_cronjob(tenant_writes("CREATE", "CronJob", None, &[A, WAIVER]), Some("miggate-waivers-cronjobs"))]
#[case::a_replication_controller(tenant_writes("CREATE", "ReplicationController", None, &[A, WAIVER]), Some("miggate-waivers-workloads"))]
// Attack: a ReplicaSet written directly, not through a Deployment.
#[case::a_replicaset(tenant_writes("CREATE", "ReplicaSet", None, &[A, WAIVER]), Some("miggate-waivers-workloads"))]
#[case::a_deployment_without_a_waiver(tenant_writes("CREATE", "Deployment", None, &[A]), None)]
#[case::a_deployment_of_plain_pods_with_a_waiver(tenant_writes("CREATE", "Deployment", None, &[WAIVER]), None)]
// Attack: a template updated to add a waiver, or a waiving template re-pointed at another
// checkpoint (or any other change: the waiver covers the whole pod it makes).
#[case::a_waiver_added_to_a_template(tenant_writes("UPDATE", "Deployment", Some(&[A]), &[A, WAIVER]), Some("miggate-waivers-workloads"))]
#[case::a_waiving_template_re_pointed(tenant_writes("UPDATE", "StatefulSet", Some(&[A, WAIVER]), &[(RESTORE, "other-ckpt"), WAIVER]), Some("miggate-waivers-workloads"))]
#[case::restore_added_to_a_waiving_template(tenant_writes("UPDATE", "CronJob", Some(&[WAIVER]), &[A, WAIVER]), Some("miggate-waivers-cronjobs"))]
#[case::a_waiving_templates_other_change(tenant_writes("UPDATE", "Deployment", Some(&[A, WAIVER]), &[A, WAIVER, ("kubectl.kubernetes.io/restartedAt", "now")]), Some("miggate-waivers-workloads"))]
// What does not change the template is not judged: scaling, status, labels of the object.
#[case::a_waiving_deployment_scaled(
    write_by(TENANT, "UPDATE", "Deployment", Some(workload("Deployment", &[A, WAIVER])),
        { let mut d = workload("Deployment", &[A, WAIVER]); d["spec"]["replicas"] = json!(3); d }),
    None)]
#[case::a_waiver_removed_from_a_template(tenant_writes("UPDATE", "Deployment", Some(&[A, WAIVER]), &[A]), None)]
// The controllers that make a workload from another's template: the deployment controller's
// ReplicaSets, the cronjob controller's Jobs; each only for the kind it makes.
#[case::the_deployment_controllers_replicaset(write_by(&kube_system("deployment-controller"), "CREATE", "ReplicaSet", None, workload("ReplicaSet", &[A, WAIVER])), None)]
#[case::the_cronjob_controllers_job(write_by(&kube_system("cronjob-controller"), "CREATE", "Job", None, workload("Job", &[A, WAIVER])), None)]
#[case::the_controller_managers_own_replicaset(write_by(KCM, "CREATE", "ReplicaSet", None, workload("ReplicaSet", &[A, WAIVER])), None)]
#[case::the_deployment_controllers_job(write_by(&kube_system("deployment-controller"), "CREATE", "Job", None, workload("Job", &[A, WAIVER])), Some("miggate-waivers-workloads"))]
#[case::the_cronjob_controllers_deployment(write_by(&kube_system("cronjob-controller"), "CREATE", "Deployment", None, workload("Deployment", &[A, WAIVER])), Some("miggate-waivers-workloads"))]
#[case::the_replicaset_controllers_replicaset(write_by(&kube_system("replicaset-controller"), "CREATE", "ReplicaSet", None, workload("ReplicaSet", &[A, WAIVER])), Some("miggate-waivers-workloads"))]
fn with_the_option_a_waiver_asks_the_authorizer_about_its_author(
    #[case] req: Value,
    #[case] asked: Option<&str>,
) {
    assert_eq!(
        asked_by(&req),
        asked.into_iter().map(String::from).collect::<Vec<_>>()
    );
}

/// Every workload kind of [`WORKLOADS`] is matched by the policy of its template's place, on
/// create and update, and nothing else is.
#[test]
fn every_workload_kind_is_matched_where_its_template_is() {
    let config = Config {
        waivers_need_permission: true,
        ..Config::default()
    };
    let objects = objects(&config);
    for (template, name) in TEMPLATE_POLICIES {
        let p = policy(&objects, name);
        let mut matched: Vec<(String, String)> = Vec::new();
        for rule in p["spec"]["matchConstraints"]["resourceRules"].as_array().unwrap() {
            assert_eq!(rule["operations"], json!(["CREATE", "UPDATE"]));
            assert_eq!(rule["apiVersions"], json!(["v1"]));
            for r in rule["resources"].as_array().unwrap() {
                matched.push((
                    rule["apiGroups"][0].as_str().unwrap().into(),
                    r.as_str().unwrap().into(),
                ));
            }
        }
        let expected: Vec<(String, String)> = WORKLOADS
            .iter()
            .filter(|w| w.template == template)
            .map(|w| (w.group.to_string(), w.resource.to_string()))
            .collect();
        matched.sort();
        let mut expected = expected;
        expected.sort();
        assert_eq!(matched, expected, "{name}");
    }
    assert_eq!(WORKLOADS.len(), 7);
}

#[test]
fn the_waiver_refusals_name_the_permission_and_who_lacks_it() {
    let config = Config {
        waivers_need_permission: true,
        ..Config::default()
    };
    let objects = objects(&config);
    let refusal = |name: &str, req: Value| message(&policy(&objects, name)["spec"]["validations"][0], &req);
    insta::assert_snapshot!(
        refusal("miggate-waivers", tenant_writes("CREATE", "Pod", None, &[A, WAIVER])),
        @r#"waiving checks (miggate.io/skip-checks or nvidia.com/snapshot-skip-compat-check) needs permission: system:serviceaccount:ml:editor may not "waive" checks.miggate.io in namespace ml (an admin grants it to people and groups, never to a service account, with a RoleBinding of the ClusterRole miggate-waiver)"#
    );
    insta::assert_snapshot!(
        refusal("miggate-waivers-workloads", tenant_writes("CREATE", "Deployment", None, &[A, WAIVER])),
        @r#"the pod template of this Deployment waives checks (miggate.io/skip-checks or nvidia.com/snapshot-skip-compat-check): writing it needs permission: system:serviceaccount:ml:editor may not "waive" checks.miggate.io in namespace ml (an admin grants it to people and groups, never to a service account, with a RoleBinding of the ClusterRole miggate-waiver)"#
    );
    insta::assert_snapshot!(
        refusal("miggate-waivers-cronjobs", tenant_writes("CREATE", "CronJob", None, &[A, WAIVER])),
        @r#"the pod template of this CronJob waives checks (miggate.io/skip-checks or nvidia.com/snapshot-skip-compat-check): writing it needs permission: system:serviceaccount:ml:editor may not "waive" checks.miggate.io in namespace ml (an admin grants it to people and groups, never to a service account, with a RoleBinding of the ClusterRole miggate-waiver)"#
    );
}

#[test]
fn the_waiver_role_grants_what_the_rule_asks() {
    let config = Config {
        waivers_need_permission: true,
        ..Config::default()
    };
    let objects = objects(&config);
    let role = objects
        .iter()
        .find(|o| o.kind().1 == "ClusterRole" && o.name() == WAIVER_ROLE)
        .unwrap();
    assert_eq!(
        role.value["rules"],
        json!([{"apiGroups": ["miggate.io"], "resources": [WAIVE_RESOURCE], "verbs": [WAIVE_VERB]}])
    );
    assert!(WAIVER_RULE.contains(&format!(".check('{WAIVE_VERB}')")));
    assert_eq!(policies::FILE, role.file);
    // Every waiver policy is bound, to deny, and each asks the one rule.
    for name in [
        "miggate-waivers",
        "miggate-waivers-workloads",
        "miggate-waivers-cronjobs",
    ] {
        assert_eq!(
            policy(&objects, name)["spec"]["validations"][0]["expression"],
            WAIVER_RULE
        );
    }
}

const WEBHOOK_ACCOUNT: &str = "system:serviceaccount:miggate-system:miggate-webhook";

/// miggate's ValidatingWebhookConfiguration as installed, with a CA injected.
fn configuration() -> Value {
    let objects = objects(&Config::default());
    let mut c = objects
        .iter()
        .find(|o| o.kind().1 == "ValidatingWebhookConfiguration")
        .unwrap()
        .value
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
    let p = policy(&objects(&Config::default()), "miggate-webhook-configurations");
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
    let p = policy(&objects(&Config::default()), "miggate-webhook-certs");
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
    let p = policy(&objects(&Config::default()), "miggate-token-secrets");
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
