//! The tenant policies of the install, run as the API server runs them (resource rules,
//! namespace selector, match conditions, then every validation), one row per write a tenant,
//! a node agent or the scheduler makes. The install is the chart: `deploy/` for its defaults,
//! `helm template` for other values (other binders, `waivers.needPermission`). Each attack row
//! names the write that got around the gate before these policies existed; on the install
//! without them it is allowed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::LazyLock;

use rstest::rstest;
use serde_json::{Value, json};
use support::chart::{helm, rendered};
use support::{admission, find, message, policy, policy_applies, policy_verdict};

/// The install with the chart's defaults (`deploy/`).
static INSTALLED: LazyLock<Vec<Value>> = LazyLock::new(support::installed);

/// The chart rendered with `waivers.needPermission=true`; `None` without helm (outside CI).
static WAIVING: LazyLock<Option<Vec<Value>>> = LazyLock::new(|| rendered(&["waivers.needPermission=true"]));

/// The ClusterRole that grants the waiver permission, to bind per namespace.
const WAIVER_ROLE: &str = "miggate-waiver";

const TENANT: &str = "system:serviceaccount:ml:editor";
const SCHEDULER: &str = "system:kube-scheduler";
const AGENT: &str = "system:serviceaccount:miggate-node:miggate-checkpoint-agent";
const RESTORE: &str = "miggate.io/restore-from";
const PEER_RESTORE: &str = "nvidia.com/restore-from";
const MAP: &str = "miggate.io/device-map";

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
    let p = policy(&INSTALLED, "miggate-restore-annotations");
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
/// added to `wire` and forgotten in the chart: adding it to a pod, or removing it, is refused
/// naming it; and no Binding carries it onto a pod (the device map aside: the schedulers'
/// Bindings carry it, [`bindings_carry_only_the_schedulers_device_map`]).
#[test]
fn every_pod_annotation_of_the_wire_is_locked() {
    use miggate_wire::annotations::{DEVICE_MAP, RESTORE_FROM, SKIP_CHECKS, STEER, STEERED};
    use miggate_wire::peer;
    let bindings = policy(&INSTALLED, "miggate-binding-annotations");
    for key in [
        RESTORE_FROM,
        SKIP_CHECKS,
        STEER,
        STEERED,
        DEVICE_MAP,
        peer::RESTORE_FROM,
        peer::RESTORE_CONTAINER_MAP,
    ] {
        let team = ("team", "a");
        for req in [
            update(pod(&[team]), pod(&[team, (key, "x")])),
            update(pod(&[team, (key, "x")]), pod(&[team])),
        ] {
            let message = annotation_verdict(&req).unwrap_or_else(|| panic!("{key}: allowed"));
            assert!(
                message.starts_with(&format!("{key} cannot be added, changed or removed")),
                "{message}"
            );
        }
        if key != DEVICE_MAP {
            let req = admission(
                "CREATE",
                "pods/binding",
                "ml",
                SCHEDULER,
                None,
                binding(Some(json!({key: "x"}))),
                None,
            );
            assert!(!policy_verdict(&bindings, &req).unwrap().is_empty(), "{key}");
        }
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
    let p = policy(&INSTALLED, "miggate-binding-annotations");
    let req = admission("CREATE", resource, "ml", user, None, binding(annotations), None);
    let failed = policy_verdict(&p, &req).unwrap();
    assert_eq!(!failed.is_empty(), denied, "{failed:?}");
}

const VOLCANO: &str = "system:serviceaccount:kube-system:volcano";
const KAI: &str = "system:serviceaccount:kai-scheduler:kai-scheduler";

/// The chart's `binders` replace the default scheduler: exactly those listed bind with a
/// device map, and the refusal names them. A list of none is refused.
#[test]
fn the_binders_are_configurable() {
    let Some(objects) = rendered(&[&format!("binders={{{VOLCANO},{KAI}}}")]) else {
        return;
    };
    let p = policy(&objects, "miggate-binding-annotations");
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
    assert!(as_user(VOLCANO));
    assert!(as_user(KAI));
    assert!(!as_user(SCHEDULER));
    assert!(!as_user(TENANT));
    let req = admission(
        "CREATE",
        "pods/binding",
        "ml",
        SCHEDULER,
        None,
        binding(map),
        None,
    );
    assert_eq!(
        policy_verdict(&p, &req).unwrap(),
        [format!(
            "only the schedulers miggate lists ({VOLCANO}, {KAI}) bind a pod with {MAP}: miggate writes it into their Bindings; list another scheduler in the chart's binders value"
        )]
    );
    let none = helm(&[
        "template",
        "miggate",
        "charts/miggate",
        "--set-json",
        "binders=[]",
    ])
    .unwrap()
    .unwrap_err();
    assert!(none.contains("/binders"), "{none}");
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
    let p = policy(&INSTALLED, "miggate-checkpoint-writers");
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
    let p = policy(&INSTALLED, "miggate-checkpoint-writers");
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
    let role = find(&INSTALLED, "ClusterRole", "miggate-checkpoint-writer");
    assert_eq!(
        role["rules"],
        json!([
            {"apiGroups": ["miggate.io"], "resources": ["gpucheckpoints"],
             "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
            {"apiGroups": ["miggate.io"], "resources": ["gpucheckpoints/status"],
             "verbs": ["get", "update", "patch"]},
        ])
    );
    // Every write the role allows is one the policy judges.
    let p = policy(&INSTALLED, "miggate-checkpoint-writers");
    assert_eq!(
        p["spec"]["matchConstraints"]["resourceRules"][0]["operations"],
        json!(["CREATE", "UPDATE", "DELETE"])
    );
}

#[test]
fn waivers_are_open_by_default() {
    let name = |o: &Value| o["metadata"]["name"].as_str().unwrap().to_string();
    assert!(!INSTALLED.iter().any(|o| name(o).starts_with("miggate-waivers")));
    assert!(!INSTALLED.iter().any(|o| name(o) == WAIVER_ROLE));
    // The names looked for are those the option installs.
    let Some(objects) = WAIVING.as_ref() else { return };
    assert!(objects.iter().any(|o| name(o).starts_with("miggate-waivers")));
    find(objects, "ClusterRole", WAIVER_ROLE);
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

/// The waiver rule: the authorizer's answer, for the request's user in the request's
/// namespace, to the one permission the [`WAIVER_ROLE`] of `objects` grants.
fn waiver_rule(objects: &[Value]) -> String {
    let rule = &find(objects, "ClusterRole", WAIVER_ROLE)["rules"][0];
    let (group, resource, verb) = (
        rule["apiGroups"][0].as_str().unwrap(),
        rule["resources"][0].as_str().unwrap(),
        rule["verbs"][0].as_str().unwrap(),
    );
    format!(
        "authorizer.group('{group}').resource('{resource}').namespace(request.namespace).check('{verb}').allowed()"
    )
}

/// Which waiver policy of `objects` asks the authorizer about `req` (the writer's `waive`), if
/// any. The validation itself is the authorizer's answer for the writer, which only the API
/// server gives (the real-server walk in docs/deploy.md); here, that the right writes reach it.
fn asked_by(objects: &[Value], req: &Value) -> Vec<String> {
    let rule = waiver_rule(objects);
    objects
        .iter()
        .filter(|o| {
            o["kind"] == "ValidatingAdmissionPolicy"
                && o["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .starts_with("miggate-waivers")
        })
        .filter(|o| {
            let p = policy(objects, o["metadata"]["name"].as_str().unwrap());
            assert_eq!(p["spec"]["validations"][0]["expression"], rule.as_str());
            assert_eq!(p["spec"]["validations"].as_array().unwrap().len(), 1);
            policy_applies(&p, req)
        })
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
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
    let Some(objects) = WAIVING.as_ref() else { return };
    assert_eq!(
        asked_by(objects, &req),
        asked.into_iter().map(String::from).collect::<Vec<_>>()
    );
}

/// Every workload kind of Kubernetes whose controller makes pods from a template: its API
/// group, its resource, and the waiver policy of the place it keeps its template (one policy
/// per shape of object, since the API server type-checks a policy's CEL against every kind it
/// matches).
const WORKLOADS: [(&str, &str, &str); 7] = [
    ("apps", "deployments", "miggate-waivers-workloads"),
    ("apps", "statefulsets", "miggate-waivers-workloads"),
    ("apps", "daemonsets", "miggate-waivers-workloads"),
    ("apps", "replicasets", "miggate-waivers-workloads"),
    ("", "replicationcontrollers", "miggate-waivers-workloads"),
    ("batch", "jobs", "miggate-waivers-workloads"),
    ("batch", "cronjobs", "miggate-waivers-cronjobs"),
];

/// Every workload kind of [`WORKLOADS`] is matched by the policy of its template's place, on
/// create and update, and nothing else is.
#[test]
fn every_workload_kind_is_matched_where_its_template_is() {
    let Some(objects) = WAIVING.as_ref() else { return };
    for name in ["miggate-waivers-workloads", "miggate-waivers-cronjobs"] {
        let p = policy(objects, name);
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
        let mut expected: Vec<(String, String)> = WORKLOADS
            .iter()
            .filter(|(_, _, policy)| *policy == name)
            .map(|(group, resource, _)| (group.to_string(), resource.to_string()))
            .collect();
        matched.sort();
        expected.sort();
        assert_eq!(matched, expected, "{name}");
    }
}

#[test]
fn the_waiver_refusals_name_the_permission_and_who_lacks_it() {
    let Some(objects) = WAIVING.as_ref() else { return };
    let refusal = |name: &str, req: Value| message(&policy(objects, name)["spec"]["validations"][0], &req);
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
    let Some(objects) = WAIVING.as_ref() else { return };
    assert_eq!(
        find(objects, "ClusterRole", WAIVER_ROLE)["rules"],
        json!([{"apiGroups": ["miggate.io"], "resources": ["checks"], "verbs": ["waive"]}])
    );
    let rule = waiver_rule(objects);
    // Every waiver policy is bound, to deny, and each asks the one rule.
    for name in [
        "miggate-waivers",
        "miggate-waivers-workloads",
        "miggate-waivers-cronjobs",
    ] {
        assert_eq!(
            policy(objects, name)["spec"]["validations"][0]["expression"],
            rule.as_str()
        );
    }
}
