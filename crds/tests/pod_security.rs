//! Every pod template of the install meets the Pod Security level its namespace enforces (and
//! the levels it warns and audits at, so an apply prints no warning), checked the way the API
//! server's PodSecurity admission checks it, for every field the Pod Security Standards name:
//! `deploy/` (the chart's defaults), and the chart in its other certificate modes (which mount
//! the serving certificate), rendered by the real `helm` (without one, outside CI, those cases
//! say so and pass).
//!
//! kube-fake, which the other tests run against, has no PodSecurity admission, so a pod the
//! API server refuses (`violates PodSecurity "baseline:latest": hostPath volumes`) passes them;
//! this is that check without a server. The rules are the Standards' (Kubernetes 1.30 and
//! later), one function each, each pinned by a case that breaks it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Capabilities, PodSecurityContext, PodSpec, Probe, SeccompProfile, SecurityContext,
};
use rstest::rstest;
use serde_json::{Value, json};

/// The three Pod Security levels, weakest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Privileged,
    Baseline,
    Restricted,
}

impl Level {
    fn parse(text: &str) -> Level {
        match text {
            "privileged" => Level::Privileged,
            "baseline" => Level::Baseline,
            "restricted" => Level::Restricted,
            other => panic!("unknown Pod Security level `{other}`"),
        }
    }
}

/// One container of any kind, with the fields the Standards read.
struct Container<'a> {
    name: &'a str,
    security: Option<&'a SecurityContext>,
    host_ports: Vec<i32>,
    probe_hosts: Vec<&'a str>,
}

fn probe_hosts(probes: [Option<&Probe>; 3]) -> Vec<&str> {
    probes
        .into_iter()
        .flatten()
        .flat_map(|p| {
            [
                p.http_get.as_ref().and_then(|h| h.host.as_deref()),
                p.tcp_socket.as_ref().and_then(|t| t.host.as_deref()),
            ]
        })
        .flatten()
        .collect()
}

fn container(c: &k8s_openapi::api::core::v1::Container) -> Container<'_> {
    Container {
        name: &c.name,
        security: c.security_context.as_ref(),
        host_ports: c.ports.iter().flatten().filter_map(|p| p.host_port).collect(),
        probe_hosts: probe_hosts([
            c.liveness_probe.as_ref(),
            c.readiness_probe.as_ref(),
            c.startup_probe.as_ref(),
        ]),
    }
}

/// Every container of the pod: regular, init and ephemeral (which have no probes).
fn containers(spec: &PodSpec) -> Vec<Container<'_>> {
    let mut out: Vec<Container<'_>> = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .map(container)
        .collect();
    out.extend(spec.ephemeral_containers.iter().flatten().map(|c| Container {
        name: &c.name,
        security: c.security_context.as_ref(),
        host_ports: c.ports.iter().flatten().filter_map(|p| p.host_port).collect(),
        probe_hosts: Vec::new(),
    }));
    out
}

const BASELINE_CAPABILITIES: [&str; 13] = [
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

const SAFE_SYSCTLS: [&str; 10] = [
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
];

const SELINUX_TYPES: [&str; 5] = [
    "",
    "container_t",
    "container_init_t",
    "container_kvm_t",
    "container_engine_t",
];

const RESTRICTED_VOLUMES: [&str; 8] = [
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
];

/// What keeps `spec` (with its pod template's `annotations`) from meeting `level`, one line per
/// broken rule, named as the API server names it.
fn violations(level: Level, spec: &PodSpec, annotations: &BTreeMap<String, String>) -> Vec<String> {
    let mut out = Vec::new();
    if level >= Level::Baseline {
        baseline(spec, annotations, &mut out);
    }
    if level >= Level::Restricted {
        restricted(spec, &mut out);
    }
    out
}

fn baseline(spec: &PodSpec, annotations: &BTreeMap<String, String>, out: &mut Vec<String>) {
    let pod = spec.security_context.as_ref();
    let all = containers(spec);
    let host_process = pod
        .and_then(|p| p.windows_options.as_ref())
        .and_then(|w| w.host_process)
        == Some(true)
        || all.iter().any(|c| {
            c.security
                .and_then(|s| s.windows_options.as_ref())
                .and_then(|w| w.host_process)
                == Some(true)
        });
    if host_process {
        out.push("hostProcess".into());
    }
    for (field, on) in [
        ("hostNetwork", spec.host_network),
        ("hostPID", spec.host_pid),
        ("hostIPC", spec.host_ipc),
    ] {
        if on == Some(true) {
            out.push(format!("host namespaces ({field}=true)"));
        }
    }
    for c in &all {
        baseline_container(c, out);
    }
    baseline_pod(spec, annotations, out);
}

/// What keeps container `c` from meeting baseline.
fn baseline_container(c: &Container<'_>, out: &mut Vec<String>) {
    let s = c.security;
    if s.and_then(|s| s.privileged) == Some(true) {
        out.push(format!("privileged (container {:?})", c.name));
    }
    let added = s
        .and_then(|s| s.capabilities.as_ref())
        .and_then(|k| k.add.as_deref())
        .unwrap_or_default();
    if let Some(cap) = added
        .iter()
        .find(|a| !BASELINE_CAPABILITIES.contains(&a.as_str()))
    {
        out.push(format!(
            "non-default capabilities (container {:?} adds {cap})",
            c.name
        ));
    }
    if c.host_ports.iter().any(|p| *p != 0) {
        out.push(format!("hostPort (container {:?})", c.name));
    }
    if c.probe_hosts.iter().any(|h| !h.is_empty()) {
        out.push(format!("probe or lifecycle host (container {:?})", c.name));
    }
    if let Some(kind) = s
        .and_then(|s| s.app_armor_profile.as_ref())
        .map(|a| a.type_.as_str())
        && !["RuntimeDefault", "Localhost"].contains(&kind)
    {
        out.push(format!(
            "forbidden AppArmor profile (container {:?}: {kind})",
            c.name
        ));
    }
    if s.and_then(|s| s.proc_mount.as_deref())
        .is_some_and(|m| m != "Default")
    {
        out.push(format!("procMount (container {:?})", c.name));
    }
    if let Some(se) = s.and_then(|s| s.se_linux_options.as_ref()) {
        selinux(se, &format!("container {:?}", c.name), out);
    }
    if s.and_then(|s| s.seccomp_profile.as_ref())
        .is_some_and(|p| p.type_ == "Unconfined")
    {
        out.push(format!("seccompProfile (container {:?} is Unconfined)", c.name));
    }
}

/// What keeps the pod itself (its security context, annotations and volumes) from meeting
/// baseline.
fn baseline_pod(spec: &PodSpec, annotations: &BTreeMap<String, String>, out: &mut Vec<String>) {
    let pod = spec.security_context.as_ref();
    if let Some(kind) = pod
        .and_then(|p| p.app_armor_profile.as_ref())
        .map(|a| a.type_.as_str())
        && !["RuntimeDefault", "Localhost"].contains(&kind)
    {
        out.push(format!("forbidden AppArmor profile (pod: {kind})"));
    }
    for (key, value) in annotations {
        if key.starts_with("container.apparmor.security.beta.kubernetes.io/")
            && value != "runtime/default"
            && !value.starts_with("localhost/")
        {
            out.push(format!("forbidden AppArmor profile (annotation {key}={value})"));
        }
    }
    if let Some(se) = pod.and_then(|p| p.se_linux_options.as_ref()) {
        selinux(se, "pod", out);
    }
    if pod
        .and_then(|p| p.seccomp_profile.as_ref())
        .is_some_and(|p| p.type_ == "Unconfined")
    {
        out.push("seccompProfile (pod is Unconfined)".into());
    }
    for sysctl in pod.and_then(|p| p.sysctls.as_deref()).unwrap_or_default() {
        if !SAFE_SYSCTLS.contains(&sysctl.name.as_str()) {
            out.push(format!("forbidden sysctls ({})", sysctl.name));
        }
    }
    for volume in spec.volumes.iter().flatten() {
        if volume.host_path.is_some() {
            out.push(format!("hostPath volumes (volume {:?})", volume.name));
        }
    }
}

fn selinux(se: &k8s_openapi::api::core::v1::SELinuxOptions, at: &str, out: &mut Vec<String>) {
    if !SELINUX_TYPES.contains(&se.type_.as_deref().unwrap_or_default()) {
        out.push(format!("seLinuxOptions type ({at})"));
    }
    if se.user.as_deref().is_some_and(|u| !u.is_empty()) || se.role.as_deref().is_some_and(|r| !r.is_empty())
    {
        out.push(format!("seLinuxOptions user or role ({at})"));
    }
}

fn restricted(spec: &PodSpec, out: &mut Vec<String>) {
    let pod: Option<&PodSecurityContext> = spec.security_context.as_ref();
    let all = containers(spec);
    for volume in spec.volumes.iter().flatten() {
        let value = serde_json::to_value(volume).unwrap();
        let kinds: Vec<&String> = value
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| *k != "name")
            .collect();
        if let Some(kind) = kinds.iter().find(|k| !RESTRICTED_VOLUMES.contains(&k.as_str())) {
            out.push(format!(
                "restricted volume types (volume {:?} is {kind})",
                volume.name
            ));
        }
    }
    let pod_non_root = pod.and_then(|p| p.run_as_non_root);
    let pod_seccomp = pod.and_then(|p| p.seccomp_profile.as_ref());
    let confined = |p: &SeccompProfile| ["RuntimeDefault", "Localhost"].contains(&p.type_.as_str());
    if pod.and_then(|p| p.run_as_user) == Some(0) {
        out.push("runAsUser=0 (pod)".into());
    }
    if pod_non_root == Some(false) {
        out.push("runAsNonRoot != true (pod sets false)".into());
    }
    for c in &all {
        let s = c.security;
        if s.and_then(|s| s.allow_privilege_escalation) != Some(false) {
            out.push(format!(
                "allowPrivilegeEscalation != false (container {:?})",
                c.name
            ));
        }
        match (s.and_then(|s| s.run_as_non_root), pod_non_root) {
            (Some(true), _) | (None, Some(true)) => {}
            _ => out.push(format!("runAsNonRoot != true (container {:?})", c.name)),
        }
        if s.and_then(|s| s.run_as_user) == Some(0) {
            out.push(format!("runAsUser=0 (container {:?})", c.name));
        }
        match (s.and_then(|s| s.seccomp_profile.as_ref()), pod_seccomp) {
            (Some(p), _) if confined(p) => {}
            (None, Some(p)) if confined(p) => {}
            _ => out.push(format!(
                "seccompProfile (container {:?} must be RuntimeDefault or Localhost)",
                c.name
            )),
        }
        let caps: Option<&Capabilities> = s.and_then(|s| s.capabilities.as_ref());
        if !caps
            .and_then(|k| k.drop.as_deref())
            .unwrap_or_default()
            .iter()
            .any(|d| d == "ALL")
        {
            out.push(format!(
                "unrestricted capabilities (container {:?} must drop ALL)",
                c.name
            ));
        }
        if let Some(cap) = caps
            .and_then(|k| k.add.as_deref())
            .unwrap_or_default()
            .iter()
            .find(|a| *a != "NET_BIND_SERVICE")
        {
            out.push(format!(
                "unrestricted capabilities (container {:?} adds {cap})",
                c.name
            ));
        }
    }
}

/// A workload of the install: where it runs, its template's spec and annotations.
struct Workload {
    what: String,
    namespace: String,
    spec: PodSpec,
    annotations: BTreeMap<String, String>,
}

fn workloads(docs: &[Value]) -> Vec<Workload> {
    let mut out = Vec::new();
    for doc in docs {
        let kind = doc["kind"].as_str().unwrap_or_default();
        let template = match kind {
            "Deployment" | "DaemonSet" | "StatefulSet" | "ReplicaSet" | "Job" => &doc["spec"]["template"],
            "CronJob" => &doc["spec"]["jobTemplate"]["spec"]["template"],
            "Pod" => doc,
            _ => continue,
        };
        out.push(Workload {
            what: format!("{kind} {}", doc["metadata"]["name"].as_str().unwrap_or("?")),
            namespace: doc["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default")
                .to_string(),
            spec: serde_json::from_value(template["spec"].clone()).unwrap(),
            annotations: serde_json::from_value(template["metadata"]["annotations"].clone())
                .unwrap_or_default(),
        });
    }
    out
}

/// Each namespace the install creates, with its enforce, warn and audit levels (a missing
/// label is `privileged`, the API server's default).
fn namespace_levels(docs: &[Value]) -> BTreeMap<String, [Level; 3]> {
    docs.iter()
        .filter(|d| d["kind"] == "Namespace")
        .map(|d| {
            let label = |mode: &str| {
                Level::parse(
                    d["metadata"]["labels"][format!("pod-security.kubernetes.io/{mode}")]
                        .as_str()
                        .unwrap_or("privileged"),
                )
            };
            (
                d["metadata"]["name"].as_str().unwrap().to_string(),
                [label("enforce"), label("warn"), label("audit")],
            )
        })
        .collect()
}

#[rstest]
#[case::self_managed_certificates(&[])]
#[case::cert_manager(&["certificates.mode=cert-manager"])]
#[case::brought_secret(&["certificates.mode=secret", "certificates.secretName=my-tls"])]
fn every_workload_meets_its_namespaces_levels(#[case] sets: &[&str]) {
    let Some(docs) = support::chart::install(sets) else {
        return;
    };
    let levels = namespace_levels(&docs);
    let workloads = workloads(&docs);
    assert!(workloads.len() >= 2, "the webhook and the publisher");
    for w in &workloads {
        let Some(modes) = levels.get(&w.namespace) else {
            panic!(
                "{} runs in namespace {}, which the install does not create",
                w.what, w.namespace
            );
        };
        for (mode, level) in ["enforce", "warn", "audit"].iter().zip(modes) {
            let broken = violations(*level, &w.spec, &w.annotations);
            assert!(
                broken.is_empty(),
                "{} violates PodSecurity {level:?} ({mode} in {}): {broken:?}",
                w.what,
                w.namespace
            );
        }
    }
}

#[test]
fn the_webhook_runs_restricted_and_the_publisher_is_restricted_but_for_one_read_only_host_path() {
    let docs = support::installed();
    let levels = namespace_levels(&docs);
    let workloads = workloads(&docs);
    let find = |what: &str| workloads.iter().find(|w| w.what == what).unwrap();

    let webhook = find("Deployment miggate-webhook");
    assert_eq!(levels[&webhook.namespace][0], Level::Restricted);
    assert_eq!(
        violations(Level::Restricted, &webhook.spec, &webhook.annotations),
        Vec::<String>::new()
    );

    let publisher = find("DaemonSet miggate-publish");
    assert_ne!(
        publisher.namespace, webhook.namespace,
        "a privileged namespace of its own"
    );
    assert_eq!(
        violations(Level::Restricted, &publisher.spec, &publisher.annotations),
        [
            "hostPath volumes (volume \"recovery-state\")",
            "restricted volume types (volume \"recovery-state\" is hostPath)",
        ]
    );
    // The host path is boot recovery's state directory, mounted read-only.
    let mounts: Vec<_> = publisher
        .spec
        .containers
        .iter()
        .flat_map(|c| c.volume_mounts.iter().flatten())
        .collect();
    assert!(
        mounts
            .iter()
            .all(|m| m.name != "recovery-state" || m.read_only == Some(true)),
        "{mounts:?}"
    );
}

fn spec(value: Value) -> PodSpec {
    serde_json::from_value(value).unwrap()
}

fn locked_down() -> Value {
    json!({
        "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{"name": "c", "image": "i", "securityContext": {
            "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}],
        "volumes": [{"name": "tls", "secret": {"secretName": "s"}}],
    })
}

/// Sets `value` at the JSON pointer `at` of the locked-down spec.
fn with(at: &str, value: Value) -> PodSpec {
    let mut v = locked_down();
    let (parent, key) = at.rsplit_once('/').unwrap();
    let mut node = &mut v;
    for part in parent.split('/').filter(|p| !p.is_empty()) {
        node = match part.parse::<usize>() {
            Ok(i) => &mut node[i],
            Err(_) => {
                if node.get(part).is_none() {
                    node[part] = json!({});
                }
                &mut node[part]
            }
        };
    }
    match key.parse::<usize>() {
        Ok(i) => node[i] = value,
        Err(_) => node[key] = value,
    }
    spec(v)
}

#[rstest]
#[case::locked_down(with("/hostNetwork", json!(false)), Level::Restricted, None)]
#[case::host_network(with("/hostNetwork", json!(true)), Level::Baseline, Some("host namespaces"))]
#[case::host_pid(with("/hostPID", json!(true)), Level::Baseline, Some("host namespaces"))]
#[case::host_ipc(with("/hostIPC", json!(true)), Level::Baseline, Some("host namespaces"))]
#[case::privileged(with("/containers/0/securityContext/privileged", json!(true)), Level::Baseline, Some("privileged"))]
#[case::sys_admin(with("/containers/0/securityContext/capabilities/add", json!(["SYS_ADMIN"])), Level::Baseline, Some("non-default capabilities"))]
#[case::chown_is_baseline_not_restricted(with("/containers/0/securityContext/capabilities/add", json!(["CHOWN"])), Level::Restricted, Some("unrestricted capabilities"))]
#[case::host_path(with("/volumes/0", json!({"name": "h", "hostPath": {"path": "/run"}})), Level::Baseline, Some("hostPath volumes"))]
#[case::host_port(with("/containers/0/ports", json!([{"containerPort": 80, "hostPort": 80}])), Level::Baseline, Some("hostPort"))]
#[case::probe_host(with("/containers/0/livenessProbe", json!({"httpGet": {"port": 80, "host": "10.0.0.1"}})), Level::Baseline, Some("probe or lifecycle host"))]
#[case::apparmor_unconfined(with("/containers/0/securityContext/appArmorProfile", json!({"type": "Unconfined"})), Level::Baseline, Some("AppArmor"))]
#[case::proc_mount(with("/containers/0/securityContext/procMount", json!("Unmasked")), Level::Baseline, Some("procMount"))]
#[case::selinux_type(with("/securityContext/seLinuxOptions", json!({"type": "spc_t"})), Level::Baseline, Some("seLinuxOptions type"))]
#[case::seccomp_unconfined(with("/securityContext/seccompProfile", json!({"type": "Unconfined"})), Level::Baseline, Some("seccompProfile"))]
#[case::unsafe_sysctl(with("/securityContext/sysctls", json!([{"name": "kernel.msgmax", "value": "1"}])), Level::Baseline, Some("forbidden sysctls"))]
#[case::host_process(with("/securityContext/windowsOptions", json!({"hostProcess": true})), Level::Baseline, Some("hostProcess"))]
#[case::escalation(with("/containers/0/securityContext/allowPrivilegeEscalation", json!(true)), Level::Restricted, Some("allowPrivilegeEscalation"))]
#[case::root(with("/securityContext/runAsUser", json!(0)), Level::Restricted, Some("runAsUser=0"))]
#[case::not_non_root(with("/securityContext/runAsNonRoot", json!(false)), Level::Restricted, Some("runAsNonRoot"))]
#[case::no_drop_all(with("/containers/0/securityContext/capabilities/drop", json!(["NET_RAW"])), Level::Restricted, Some("must drop ALL"))]
#[case::seccomp_unset(with("/securityContext/seccompProfile", json!(null)), Level::Restricted, Some("seccompProfile"))]
#[case::empty_dir_is_fine(with("/volumes/0", json!({"name": "e", "emptyDir": {}})), Level::Restricted, None)]
#[case::nfs_volume(with("/volumes/0", json!({"name": "n", "nfs": {"server": "s", "path": "/"}})), Level::Restricted, Some("restricted volume types"))]
fn each_rule_refuses_its_case(#[case] spec: PodSpec, #[case] weakest: Level, #[case] rule: Option<&str>) {
    let none = BTreeMap::new();
    match rule {
        None => assert_eq!(violations(Level::Restricted, &spec, &none), Vec::<String>::new()),
        Some(rule) => {
            let at = violations(weakest, &spec, &none);
            assert!(at.iter().any(|v| v.contains(rule)), "{weakest:?}: {at:?}");
            assert_eq!(violations(Level::Privileged, &spec, &none), Vec::<String>::new());
            if weakest == Level::Restricted {
                assert_eq!(
                    violations(Level::Baseline, &spec, &none),
                    Vec::<String>::new(),
                    "only restricted refuses it"
                );
            }
        }
    }
}

#[test]
fn an_apparmor_annotation_is_read_too() {
    let annotations = BTreeMap::from([(
        "container.apparmor.security.beta.kubernetes.io/c".to_string(),
        "unconfined".to_string(),
    )]);
    let broken = violations(Level::Baseline, &spec(locked_down()), &annotations);
    assert_eq!(broken.len(), 1, "{broken:?}");
}
