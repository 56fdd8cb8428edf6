//! The tenant policies of `deploy/`, run as the API server runs them (resource rules,
//! namespace selector, match conditions, then every validation), one row per write a tenant,
//! a node agent or the scheduler makes. Each attack row names the write that got around the
//! gate before these policies existed; on the install without them it is allowed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use miggate_crds::deploy::policies::{
    self, LOCKED_ANNOTATIONS, WAIVE_RESOURCE, WAIVE_VERB, WAIVER_ROLE, WAIVER_RULE, cel_string,
};
use miggate_crds::deploy::{self, Config, Object};
use rstest::rstest;
use serde_json::{Value, json};
use support::{admission, eval, policy_verdict};

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

#[rstest]
#[case::its_own_node(AGENT, Some("node-big"), Some("node-big"), false)]
// Attack: an agent token bound to a pod on node-big wrote a checkpoint recorded on node-short.
#[case::another_nodes(AGENT, Some("node-big"), Some("node-short"), true)]
#[case::a_token_bound_to_no_node(AGENT, None, Some("node-big"), true)]
#[case::a_checkpoint_naming_no_node(AGENT, Some("node-big"), None, true)]
#[case::someone_else(TENANT, Some("node-big"), Some("node-big"), true)]
fn the_checkpoint_agent_writes_only_its_own_nodes_checkpoints(
    #[case] user: &str,
    #[case] token_node: Option<&str>,
    #[case] recorded: Option<&str>,
    #[case] denied: bool,
) {
    let p = policy(&objects(&Config::default()), "miggate-checkpoint-writers");
    for (operation, resource) in [
        ("CREATE", "gpucheckpoints.miggate.io"),
        ("UPDATE", "gpucheckpoints.miggate.io/status"),
    ] {
        let object = checkpoint(recorded);
        let old = (operation == "UPDATE").then(|| object.clone());
        let req = admission(operation, resource, "ml", user, token_node, object, old);
        let failed = policy_verdict(&p, &req).unwrap();
        assert_eq!(!failed.is_empty(), denied, "{operation}: {failed:?}");
        if denied && user == AGENT {
            let expected = match token_node {
                Some(n) => format!("this token is bound to node {n}"),
                None => "this token is bound to no node".into(),
            };
            assert!(failed[0].ends_with(&expected), "{}", failed[0]);
        }
    }
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

fn node_pod_verdict(namespace: &str, operation: &str, resource: &str, pod: Value) -> Option<Vec<String>> {
    let p = policy(&objects(&Config::default()), "miggate-node-pods");
    let old = (operation == "UPDATE").then(|| pod.clone());
    let user = "system:serviceaccount:kube-system:daemon-set-controller";
    policy_verdict(
        &p,
        &admission(operation, resource, namespace, user, None, pod, old),
    )
}

#[rstest]
#[case::the_publishers_pod(publisher_pod(), false)]
#[case::another_account(changed(publisher_pod(), "/spec/serviceAccountName", json!("default")), true)]
#[case::no_account(changed(publisher_pod(), "/spec/serviceAccountName", Value::Null), true)]
#[case::privileged(changed(publisher_pod(), "/spec/containers/0/securityContext", json!({"privileged": true})), true)]
#[case::with_capabilities(changed(publisher_pod(), "/spec/containers/0/securityContext", json!({"capabilities": {"add": ["SYS_ADMIN"]}})), true)]
#[case::the_hosts_root(changed(publisher_pod(), "/spec/volumes/0/hostPath/path", json!("/")), true)]
#[case::state_mounted_writable(changed(publisher_pod(), "/spec/containers/0/volumeMounts/0/readOnly", json!(false)), true)]
#[case::host_network(spec(publisher_pod(), "hostNetwork", json!(true)), true)]
#[case::host_pid(spec(publisher_pod(), "hostPID", json!(true)), true)]
#[case::an_init_container(spec(publisher_pod(), "initContainers", json!([{"name": "setup", "image": "busybox"}])), true)]
// The checkpoint agent's account lives here by default; its pods run CRIU and need privilege.
#[case::the_checkpoint_agent(changed(changed(publisher_pod(), "/spec/serviceAccountName", json!("miggate-checkpoint-agent")), "/spec/containers/0/securityContext", json!({"privileged": true})), false)]
fn the_node_namespace_runs_only_miggates_node_pods(#[case] pod: Value, #[case] denied: bool) {
    let failed = node_pod_verdict("miggate-node", "CREATE", "pods", pod).unwrap();
    assert_eq!(!failed.is_empty(), denied, "{failed:?}");
}

#[test]
fn the_node_pod_policy_stays_in_its_namespace_and_sees_debug_containers() {
    let privileged = changed(
        publisher_pod(),
        "/spec/containers/0/securityContext",
        json!({"privileged": true}),
    );
    assert_eq!(node_pod_verdict("ml", "CREATE", "pods", privileged), None);
    let debugged = spec(
        publisher_pod(),
        "ephemeralContainers",
        json!([{"name": "debug", "image": "busybox"}]),
    );
    let failed = node_pod_verdict("miggate-node", "UPDATE", "pods/ephemeralcontainers", debugged).unwrap();
    assert_eq!(
        failed,
        ["the publisher's pods run no init or ephemeral containers"]
    );
}

#[test]
fn waivers_are_open_by_default() {
    let objects = objects(&Config::default());
    assert!(!objects.iter().any(|o| o.name() == "miggate-waivers"));
    assert!(!objects.iter().any(|o| o.name() == WAIVER_ROLE));
}

#[rstest]
#[case::a_restore_pod_created_with_a_waiver(create(pod(&[(RESTORE, "c"), ("miggate.io/skip-checks", "all")])), true)]
#[case::a_peer_restore_pod_created_with_its_skip(create(pod(&[(PEER_RESTORE, "s"), ("nvidia.com/snapshot-skip-compat-check", "true")])), true)]
#[case::the_peers_skip_added_later(update(pod(&[(PEER_RESTORE, "s")]), pod(&[(PEER_RESTORE, "s"), ("nvidia.com/snapshot-skip-compat-check", "1")])), true)]
#[case::a_restore_pod_without_a_waiver(create(pod(&[(RESTORE, "c")])), false)]
#[case::a_plain_pod_with_a_waiver(create(pod(&[("miggate.io/skip-checks", "all")])), false)]
#[case::an_unchanged_waiver(update(pod(&[(RESTORE, "c"), ("miggate.io/skip-checks", "all")]), pod(&[(RESTORE, "c"), ("miggate.io/skip-checks", "all"), ("team", "a")])), false)]
fn with_the_option_a_waiver_asks_the_authorizer(#[case] req: Value, #[case] asked: bool) {
    let config = Config {
        waivers_need_permission: true,
        ..Config::default()
    };
    let p = policy(&objects(&config), "miggate-waivers");
    // The match condition selects the writes that give a waiver; the validation is the
    // authorizer's answer for the writer, which only the API server can give.
    let vars = [
        ("object", &req["object"]),
        ("oldObject", &req["oldObject"]),
        ("request", &req),
    ];
    let conditions = p["spec"]["matchConditions"].as_array().unwrap();
    let applies = conditions
        .iter()
        .all(|c| eval(c["expression"].as_str().unwrap(), &vars).unwrap());
    assert_eq!(applies, asked);
    assert_eq!(p["spec"]["validations"][0]["expression"], WAIVER_RULE);
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
}
