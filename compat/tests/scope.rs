#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Target scope and targets assembled from parts: a pod not yet bound is judged on its pod
//! facts alone, a node inventory on its node facts alone, and neither is refused in strict mode
//! for facts it cannot have. A target from borrowed parts reaches the same report as the same
//! facts merged into one manifest.

mod common;

use common::{assert_refusing, testdata};
use miggate_compat::{
    CheckName, GpuManifest, Mode, Options, Outcome, Pod, Quantity, Report, Scope, Target, TargetScope,
    evaluate, evaluate_target,
};
use proptest::prelude::*;

fn strict(mode: Mode) -> Options {
    Options {
        strict: true,
        ..Options::mode(mode)
    }
}

fn source() -> GpuManifest {
    testdata("checkpoint-h100-3g40gb-x2.yaml")
}

fn restore_pod() -> Pod {
    testdata("restore-h100-3g40gb-x2.yaml").pod.unwrap()
}

#[test]
fn a_pod_not_yet_bound_passes_strict_mode_on_its_pod_facts() {
    let pod = restore_pod();
    let r = evaluate_target(&source(), Target::pod(&pod), &strict(Mode::Exact));
    assert!(r.compatible, "{}", r.reason);
    for c in CheckName::ALL {
        let row = r.result(c).unwrap();
        if c.scope() == Scope::Pod {
            assert_ne!(row.outcome, Outcome::NotApplicable, "{c}: {}", row.message);
        } else {
            assert_eq!(row.outcome, Outcome::NotApplicable, "{c}");
            assert!(row.message.contains("not yet bound"), "{c}: {}", row.message);
        }
    }
    // No node, so no device map either.
    assert_eq!(r.device_map, None);
}

#[test]
fn a_pod_not_yet_bound_is_refused_only_by_pod_checks() {
    let mut pod = restore_pod();
    pod.memory_limit = Some(Quantity::new("1Gi"));
    pod.mounts = Some(vec![]);
    let r = evaluate_target(&source(), Target::pod(&pod), &strict(Mode::Exact));
    assert_refusing(&r, "memory-limit, mount");
}

#[test]
fn a_node_inventory_passes_strict_mode_on_its_node_facts() {
    let node = testdata("node-h100-8gpu-mixed.yaml");
    let r = evaluate_target(&source(), Target::node(&node), &strict(Mode::Offer));
    assert!(r.compatible, "{}", r.reason);
    for c in CheckName::ALL.into_iter().filter(|c| c.scope() == Scope::Pod) {
        assert_eq!(r.result(c).unwrap().outcome, Outcome::NotApplicable, "{c}");
    }
    // A wrong driver refuses it, and nothing else does.
    let mut old = node.clone();
    old.nvidia.as_mut().unwrap().driver_version = Some(miggate_compat::VersionText::new("570.1.1"));
    let r = evaluate_target(&source(), Target::node(&old), &strict(Mode::Offer));
    assert_refusing(&r, "driver-version, driver-minimum");
}

#[test]
fn a_scope_can_be_narrowed_on_a_whole_manifest() {
    let full = testdata("restore-h100-3g40gb-x2.yaml");
    let r = evaluate_target(
        &source(),
        Target::manifest(&full).with_scope(TargetScope::Pod),
        &Options::default(),
    );
    assert_eq!(
        r.result(CheckName::GPU_COUNT).unwrap().outcome,
        Outcome::NotApplicable
    );
    assert_eq!(Target::manifest(&full).scope(), TargetScope::All);
    assert_eq!(
        Target::manifest(&testdata("node-h100-8gpu-mixed.yaml")).scope(),
        TargetScope::Node
    );
}

fn without_order(mut r: Report) -> Report {
    r.warnings.sort_by_cached_key(ToString::to_string);
    r
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// A target from parts (the pod from one place, the node from another) gives the report
    /// the same facts merged into one manifest give.
    #[test]
    fn parts_and_merged_agree(
        node_file in prop::sample::select(vec![
            "node-h100-8gpu-mixed.yaml",
            "node-h100-1-whole-1-cut.yaml",
            "node-h200-8gpu-gpu0-mig.yaml",
            "restore-h100-3g40gb-x2.yaml",
            "restore-h100-whole.yaml",
        ]),
        memory in prop::sample::select(vec!["1Gi", "64Gi", "68719476736", "lots"]),
        cpu in prop::option::of(prop::sample::select(vec!["1", "8", "8000m"])),
        mounts in prop::option::of(prop::sample::subsequence(vec!["/model-cache", "/data", "/dev/shm"], 0..3)),
        requests in prop::option::of(prop::sample::select(vec![
            ("nvidia.com/mig-3g.40gb", "2"),
            ("nvidia.com/gpu", "2"),
            ("nvidia.com/mig-1g.10gb", "1"),
        ])),
        offer in any::<bool>(),
        strict_mode in any::<bool>(),
        skip_model in any::<bool>(),
    ) {
        let node = testdata(node_file);
        let mut pod = restore_pod();
        pod.memory_limit = Some(Quantity::new(memory));
        pod.cpu_limit = cpu.map(Quantity::new);
        pod.mounts = mounts.map(|m| m.into_iter().map(String::from).collect());
        pod.gpu_requests = requests.map(|(k, v)| [(k.to_string(), Quantity::new(v))].into());
        let mut options = Options::mode(if offer { Mode::Offer } else { Mode::Exact });
        options.strict = strict_mode;
        if skip_model {
            options.skip.insert(CheckName::GPU_MODEL);
        }
        let mut merged = node.clone();
        merged.pod = Some(pod.clone());
        let whole = evaluate(&source(), &merged, &options);
        let parts = evaluate_target(&source(), Target::pod_on_node(&pod, &node), &options);
        prop_assert_eq!(without_order(parts), without_order(whole));
    }
}
