//! The scenarios of the reference (boot-recovery.md §8.3) against the behavioural fake node.
//! Each asserts the final state and the exact order of mutating calls (snapshots).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

use miggate_recovery::fake::{FakeGpu, FakeNode};
use miggate_recovery::seams::{GpuControl, SriovManage, Sysfs};
use miggate_recovery::{Bdf, Failure, Layout, MigSetting, Options, Outcome, Phase, apply, observe, plan};

const A: &str = "0000:18:00.0";
const B: &str = "0000:2a:00.0";
const C: &str = "0000:3b:00.0";

/// Per GPU: 2g@0:2, 1g@2:1, 1g@3:1, 3g@4:4, one full CI each; 16 VFs; four vGPUs.
fn gpu_yaml(bus: &str, uuid: &str) -> String {
    format!(
        r#"- bus: "{bus}"
  uuid: {uuid}
  migMode: enabled
  gpuInstances:
  - {{placement: "0:2", profileId: 14, profile: 2g.35gb, computeInstances: [{{profileId: 1}}]}}
  - {{placement: "2:1", profileId: 19, profile: 1g.18gb, computeInstances: [{{profileId: 0}}]}}
  - {{placement: "3:1", profileId: 19, profile: 1g.18gb, computeInstances: [{{profileId: 0}}]}}
  - {{placement: "4:4", profileId: 9, profile: 3g.71gb, computeInstances: [{{profileId: 2}}]}}
  sriovNumVfs: 16
  vfs:
  - {{index: 0, vgpuTypeId: 1415, vgpuTypeName: NVIDIA H200X-2-35C}}
  - {{index: 1, vgpuTypeId: 1414}}
  - {{index: 2, vgpuTypeId: 1414}}
  - {{index: 3, vgpuTypeId: 1416}}
"#
    )
}

fn layout_of(gpus: &[(&str, &str)], extra: &str) -> Layout {
    let mut text = format!("apiVersion: miggate.io/v1alpha1\nkind: RecoveryLayout\n{extra}gpus:\n");
    for (bus, uuid) in gpus {
        text.push_str(&gpu_yaml(bus, uuid));
    }
    Layout::from_yaml(&text, Path::new("test.yaml")).unwrap()
}

fn two_gpu_layout() -> Layout {
    layout_of(&[(A, "GPU-a"), (B, "GPU-b")], "")
}

/// A node just after a reboot: MIG off, no VFs; a third GPU the layout does not name.
fn booted_node() -> FakeNode {
    FakeNode::new(vec![
        FakeGpu::h200(A, "GPU-a"),
        FakeGpu::h200(B, "GPU-b"),
        FakeGpu::h200(C, "GPU-c"),
    ])
}

fn options() -> Options {
    Options {
        poll: Duration::from_secs(1),
        ..Options::default()
    }
}

struct Ran {
    result: Result<Outcome, Failure>,
    calls: Vec<String>,
    lines: Vec<String>,
}

fn run(node: &FakeNode, layout: &Layout) -> Ran {
    run_with(node, layout, &options())
}

fn run_with(node: &FakeNode, layout: &Layout, opts: &Options) -> Ran {
    let mut lines = Vec::new();
    let result = apply(layout, node.host(), opts, &mut |p| {
        lines.push(format!(
            "{}: {}{}",
            p.step,
            p.message,
            p.took.map_or("", |_| " (done)")
        ));
    });
    Ran {
        result,
        calls: node.take_calls(),
        lines,
    }
}

/// The node matches the layout, the gate is open and says ready, nothing is left stopped.
fn assert_recovered(node: &FakeNode, layout: &Layout) {
    let observed = observe(&node.host()).unwrap();
    let p = plan(layout, &observed);
    assert!(p.is_noop(), "still to do: {:?} {:?}", p.steps, p.blockers);
    let s = node.lock();
    assert!(s.ready, "gate closed");
    assert_eq!(s.state.as_ref().unwrap().state, Phase::Ready);
    assert!(s.units.values().all(|a| *a), "a unit left stopped: {:?}", s.units);
    assert!(s.gpus.iter().all(|g| g.persistence), "persistence left off");
    let j = s.journal.clone().unwrap_or_default();
    assert!(
        j.stopped_units.is_empty() && j.persistence_off.is_empty() && j.step.is_none(),
        "{j:?}"
    );
}

fn assert_failed(node: &FakeNode, ran: &Ran, step: &str, says: &str) {
    let failure = ran.result.as_ref().expect_err("recovery should fail");
    assert_eq!(failure.step, step, "{failure}");
    assert!(failure.message.contains(says), "{failure}");
    let s = node.lock();
    assert!(!s.ready, "gate open after a failure");
    let state = s.state.clone().unwrap();
    assert_eq!(state.state, Phase::Failed);
    assert_eq!(state.step.as_deref(), Some(step));
    // Every unit recovery may stop is running again (the fabric manager is never stopped).
    assert!(
        s.units
            .iter()
            .all(|(u, a)| *a || u == "nvidia-fabricmanager.service"),
        "a unit left stopped: {:?}",
        s.units
    );
    assert!(s.gpus.iter().all(|g| g.persistence), "persistence left off");
}

fn bdf(s: &str) -> Bdf {
    Bdf::parse(s).unwrap()
}

#[test]
fn s01_clean_hopper_boot_needs_no_reset() {
    let node = booted_node();
    let layout = two_gpu_layout();
    let ran = run(&node, &layout);
    assert_eq!(ran.result, Ok(Outcome::Ready { changed: true }));
    assert_recovered(&node, &layout);
    assert!(
        !ran.calls.iter().any(|c| c.contains(" -r ")),
        "no reset on Hopper"
    );
    // The third GPU, not in the layout, is left alone.
    assert!(node.lock().gpus[2].vfs.is_empty());
    assert_eq!(
        node.lock().published,
        [Phase::Pending, Phase::Recovering, Phase::Ready]
    );
    insta::assert_snapshot!(ran.calls.join("\n"));
    insta::assert_snapshot!("s01_progress", ran.lines.join("\n"));
}

fn ampere_node() -> FakeNode {
    let node = booted_node();
    {
        let mut s = node.lock();
        s.auto_activate = false;
        s.holders = vec!["nvidia-dcgm.service".to_string()];
        s.units.insert("nvidia-dcgm.service".to_string(), true);
    }
    node
}

#[test]
fn s02_pending_mode_gets_one_batched_reset_with_services_quiesced() {
    let node = ampere_node();
    let layout = two_gpu_layout();
    let ran = run(&node, &layout);
    assert_eq!(ran.result, Ok(Outcome::Ready { changed: true }));
    assert_recovered(&node, &layout);
    insta::assert_snapshot!(ran.calls.join("\n"));
}

#[test]
fn s03_persistenced_unreachable_escalates_to_persistence_off_and_restores_it() {
    let node = booted_node();
    {
        let mut s = node.lock();
        s.auto_activate = false;
        s.persistenced_reachable = false;
    }
    let layout = two_gpu_layout();
    let ran = run(&node, &layout);
    assert_eq!(ran.result, Ok(Outcome::Ready { changed: true }));
    assert_recovered(&node, &layout);
    insta::assert_snapshot!(ran.calls.join("\n"));
}

#[test]
fn s03b_persistence_and_persistenced_are_restored_when_the_reset_still_fails() {
    let node = booted_node();
    {
        let mut s = node.lock();
        s.auto_activate = false;
        s.persistenced_reachable = false;
        s.gpus[0].pids = vec![4242];
    }
    let layout = two_gpu_layout();
    let ran = run(&node, &layout);
    assert_failed(&node, &ran, "reset", "In use by another client");
    insta::assert_snapshot!(ran.calls.join("\n"));
}

#[test]
fn s04_nvidia_drm_loaded_fails_before_any_reset() {
    let node = booted_node();
    {
        let mut s = node.lock();
        s.auto_activate = false;
        s.modules.push("nvidia_drm".to_string());
    }
    let ran = run(&node, &two_gpu_layout());
    assert_failed(&node, &ran, "reset", "modprobe -r nvidia_drm");
    assert_eq!(
        ran.calls,
        [
            format!("nvidia-smi -i {A} -mig 1"),
            format!("nvidia-smi -i {B} -mig 1")
        ]
    );
}

#[test]
fn s05_reset_unsupported_reboots_once_and_the_second_boot_fails_instead_of_looping() {
    let node = booted_node();
    {
        let mut s = node.lock();
        s.auto_activate = false;
        s.reset_supported = false;
    }
    let layout = two_gpu_layout();
    let first = run(&node, &layout);
    assert_eq!(first.result, Ok(Outcome::Rebooting));
    assert!(node.lock().journal.as_ref().unwrap().reboot_attempted);
    assert!(!node.lock().ready);
    node.boot();
    let second = run(&node, &layout);
    assert_failed(&node, &second, "reset", "did not take effect after rebooting");
    assert_eq!(node.lock().reboots, 1);
    assert!(!second.calls.iter().any(|c| c.contains("reboot")));
    // A third boot does not reboot either.
    node.boot();
    let third = run(&node, &layout);
    assert!(third.result.is_err());
    assert_eq!(node.lock().reboots, 1);
    insta::assert_snapshot!(format!(
        "{}\n--- boot 2\n{}",
        first.calls.join("\n"),
        second.calls.join("\n")
    ));
}

#[test]
fn s05b_a_reboot_that_applies_the_mode_clears_the_guard() {
    let node = booted_node();
    {
        let mut s = node.lock();
        s.auto_activate = false;
        s.reset_supported = false;
        s.reboot_keeps_pending = true;
    }
    let layout = two_gpu_layout();
    assert_eq!(run(&node, &layout).result, Ok(Outcome::Rebooting));
    node.boot();
    let second = run(&node, &layout);
    assert_eq!(second.result, Ok(Outcome::Ready { changed: true }));
    assert_recovered(&node, &layout);
    assert!(!node.lock().journal.as_ref().unwrap().reboot_attempted);
    assert!(
        !second
            .calls
            .iter()
            .any(|c| c.contains("-mig") || c.contains(" -r "))
    );
}

#[test]
fn s06_nvlink_group_reset_is_retried_with_every_gpu() {
    let node = booted_node();
    {
        let mut s = node.lock();
        s.auto_activate = false;
        s.nvlink_group = true;
    }
    let layout = two_gpu_layout();
    let ran = run(&node, &layout);
    assert_eq!(ran.result, Ok(Outcome::Ready { changed: true }));
    assert_recovered(&node, &layout);
    let resets: Vec<_> = ran.calls.iter().filter(|c| c.contains(" -r ")).cloned().collect();
    assert_eq!(
        resets,
        [
            format!("nvidia-smi -r -i {A},{B} => NVLink-connected GPUs must be reset together"),
            format!("nvidia-smi -r -i {A},{B},{C}")
        ]
    );
}

#[test]
fn s07_vfs_already_up_on_a_mode_change_are_disabled_first_and_enabled_after() {
    let node = booted_node();
    node.sriov_enable_now(A);
    let layout = layout_of(&[(A, "GPU-a")], "");
    let ran = run(&node, &layout);
    assert_eq!(ran.result, Ok(Outcome::Ready { changed: true }));
    assert_recovered(&node, &layout);
    insta::assert_snapshot!(ran.calls.join("\n"));
}

#[test]
fn s08_an_active_vgpu_on_a_gpu_needing_a_mode_change_is_never_touched() {
    let node = booted_node();
    node.sriov_enable_now(A);
    node.lock().gpus[0].vfs[5].current = 1414;
    let layout = layout_of(&[(A, "GPU-a")], "");
    let ran = run(&node, &layout);
    assert_failed(&node, &ran, "plan", "would destroy the active vGPUs on VFs [5]");
    assert!(ran.calls.is_empty(), "{:?}", ran.calls);
    assert_eq!(node.lock().gpus[0].vfs.len(), 16);
}

#[test]
fn s09_sriov_manage_exiting_0_without_vfs_is_retried_then_fails() {
    let node = booted_node();
    node.lock().sriov_silent_noops = 100;
    let layout = layout_of(&[(A, "GPU-a")], "");
    let ran = run(&node, &layout);
    assert_failed(&node, &ran, "sriov-enable", "exited 0 but sriov_numvfs is 0");
    let tries = ran
        .calls
        .iter()
        .filter(|c| c.starts_with("sriov-manage -e"))
        .count();
    assert_eq!(tries, 5);
    assert!(
        !ran.calls.iter().any(|c| c.contains("-cgi")),
        "no instances before VFs"
    );
}

#[test]
fn s09b_a_transient_sriov_manage_failure_is_retried() {
    let node = booted_node();
    node.lock().sriov_transient_failures = 2;
    let layout = layout_of(&[(A, "GPU-a")], "");
    let ran = run(&node, &layout);
    assert_eq!(ran.result, Ok(Outcome::Ready { changed: true }));
    assert_recovered(&node, &layout);
    let tries: Vec<_> = ran
        .calls
        .iter()
        .filter(|c| c.starts_with("sriov-manage"))
        .cloned()
        .collect();
    assert_eq!(tries.len(), 3, "{tries:?}");
    assert!(ran.lines.iter().any(|l| l.contains("attempt 2/5")));
}

#[test]
fn s10_a_late_vf_nvidia_directory_is_waited_for() {
    let node = booted_node();
    node.lock().vf_dir_delay = Duration::from_secs(3);
    let layout = layout_of(&[(A, "GPU-a")], "");
    let ran = run(&node, &layout);
    assert_eq!(ran.result, Ok(Outcome::Ready { changed: true }));
    assert_recovered(&node, &layout);
    assert!(node.lock().now >= Duration::from_secs(3), "it waited");
}

#[test]
fn s10b_a_vf_nvidia_directory_that_never_appears_fails_within_the_bound() {
    let node = booted_node();
    node.lock().vf_dir_delay = Duration::MAX;
    let ran = run(&node, &layout_of(&[(A, "GPU-a")], ""));
    assert_failed(&node, &ran, "vf-sysfs", "has no nvidia/ directory after 30s");
    assert!(node.lock().now <= Duration::from_secs(32));
    assert!(!ran.calls.iter().any(|c| c.contains("-cgi")));
}

#[test]
fn s11_the_fake_encodes_the_order_gpu_instances_before_vfs_lose_them_and_the_write_fails() {
    let node = booted_node();
    let (gpu, pf) = (bdf(A), bdf(A));
    node.set_mig_mode(&gpu, MigSetting::Enabled).unwrap();
    node.create_gpu_instance(&gpu, 19, miggate_recovery::Placement { start: 0, size: 1 })
        .unwrap();
    assert_eq!(node.instances(&gpu).unwrap().len(), 1);
    node.enable(&pf).unwrap();
    assert!(
        node.instances(&gpu).unwrap().is_empty(),
        "sriov-manage -e wiped the GPU instances"
    );
    let (_, vf) = node.vfs(&pf).unwrap()[0].clone();
    assert!(node.vf_vgpu(&vf).unwrap().unwrap().creatable.is_empty());
    let err = node.write_vgpu_type(&vf, 1414).unwrap_err();
    assert!(err.to_string().contains("EIO"), "{err}");
    // And a reset is refused while VFs are up.
    let err = node.reset(&[gpu]).unwrap_err();
    assert!(err.to_string().contains("in use by another client"), "{err}");
}

#[test]
fn s12_creatable_lists_shrink_and_the_per_vf_reread_fills_exactly_the_layout() {
    let node = booted_node();
    let layout = layout_of(&[(A, "GPU-a")], "");
    let ran = run(&node, &layout);
    assert_eq!(ran.result, Ok(Outcome::Ready { changed: true }));
    let s = node.lock();
    let g = &s.gpus[0];
    let types: Vec<u32> = g.vfs.iter().map(|v| v.current).collect();
    assert_eq!(&types[..5], [1415, 1414, 1414, 1416, 0]);
    assert!(types[4..].iter().all(|t| *t == 0));
    drop(s);
    // Every GPU instance is taken: nothing is creatable on the VFs left.
    let vf4 = node.vfs(&bdf(A)).unwrap()[4].1.clone();
    assert!(node.vf_vgpu(&vf4).unwrap().unwrap().creatable.is_empty());
}

#[test]
fn s12b_a_type_no_longer_creatable_fails_naming_what_is() {
    let node = booted_node();
    let text = gpu_yaml(A, "GPU-a").replace("{index: 3, vgpuTypeId: 1416}", "{index: 3, vgpuTypeId: 1414}");
    let layout = Layout::from_yaml(
        &format!("apiVersion: miggate.io/v1alpha1\nkind: RecoveryLayout\ngpus:\n{text}"),
        Path::new("t"),
    )
    .unwrap();
    let ran = run(&node, &layout);
    assert_failed(
        &node,
        &ran,
        "vgpu-type",
        "vGPU type 1414 is not creatable now (creatable: 1416 (NVIDIA H200X-3-71C))",
    );
}

#[test]
fn s13_a_missing_gpu_fails_without_touching_anything() {
    let node = FakeNode::new(vec![FakeGpu::h200(A, "GPU-a")]);
    let ran = run(&node, &two_gpu_layout());
    assert_failed(
        &node,
        &ran,
        "wait-driver",
        "GPU 0000:2a:00.0 of the layout not listed by the driver",
    );
    assert!(ran.calls.is_empty());
}

#[test]
fn s13b_a_different_board_in_the_slot_is_refused() {
    let node = FakeNode::new(vec![FakeGpu::h200(A, "GPU-other")]);
    let ran = run(&node, &layout_of(&[(A, "GPU-a")], ""));
    assert_failed(&node, &ran, "plan", "a different board");
    assert!(ran.calls.is_empty());
}

#[test]
fn s14_an_already_recovered_node_makes_zero_mutating_calls_and_opens_the_gate() {
    let node = booted_node();
    let layout = two_gpu_layout();
    assert!(run(&node, &layout).result.is_ok());
    // A service restart: /run kept, recovery runs again.
    node.lock().ready = false;
    let again = run(&node, &layout);
    assert_eq!(again.result, Ok(Outcome::Ready { changed: false }));
    assert!(again.calls.is_empty(), "{:?}", again.calls);
    assert_recovered(&node, &layout);
}

/// A node and its layout for the crash test, by scenario.
fn crash_case(case: &str) -> (FakeNode, Layout) {
    match case {
        "hopper" => (booted_node(), two_gpu_layout()),
        "ampere" => {
            let node = ampere_node();
            node.lock().persistenced_reachable = false;
            (node, two_gpu_layout())
        }
        "vfs-up" => {
            let node = booted_node();
            node.sriov_enable_now(A);
            (node, layout_of(&[(A, "GPU-a")], ""))
        }
        _ => {
            let layout = layout_of(&[(A, "GPU-a")], "");
            let node = misplaced_node(&layout);
            (node, layout)
        }
    }
}

#[rstest::rstest]
#[case::hopper("hopper")]
#[case::ampere_with_dcgm_and_unreachable_persistenced("ampere")]
#[case::vfs_already_up_on_a_mode_change("vfs-up")]
#[case::placement_mismatch_rebuilt("misplaced")]
fn s15_a_crash_between_any_two_steps_resumes_and_converges(#[case] case: &str) {
    let (reference, layout) = crash_case(case);
    let total = run(&reference, &layout).calls.len();
    assert!(total >= 10, "{total}");
    for n in 0..total {
        let (node, layout) = crash_case(case);
        node.lock().crash_after = Some(n);
        let crashed = run(&node, &layout);
        assert!(crashed.result.is_err(), "crash at {n}");
        assert_eq!(crashed.calls.len(), n);
        node.restart_process();
        let resumed = run(&node, &layout);
        assert_eq!(
            resumed.result,
            Ok(Outcome::Ready { changed: true }),
            "crash at {n}: {:?}",
            resumed.lines
        );
        assert_recovered(&node, &layout);
        assert!(
            resumed
                .lines
                .iter()
                .any(|l| l.contains("resuming after an interrupted run")),
            "crash at {n}"
        );
        let third = run(&node, &layout);
        assert!(
            third.calls.is_empty(),
            "crash at {n}: third run changed {:?}",
            third.calls
        );
    }
}

#[test]
fn s16_fabric_manager_down_keeps_the_gate_closed() {
    let node = booted_node();
    node.lock()
        .units
        .insert("nvidia-fabricmanager.service".to_string(), false);
    let ran = run(&node, &layout_of(&[(A, "GPU-a")], "fabricMode: 2\n"));
    assert_failed(
        &node,
        &ran,
        "wait-fabric",
        "nvidia-fabricmanager.service is not active",
    );
    assert!(ran.calls.is_empty());
}

#[test]
fn s16b_fabric_manager_in_the_wrong_mode_keeps_the_gate_closed() {
    let node = booted_node();
    node.lock().fabric_mode = Some(0);
    let ran = run(&node, &layout_of(&[(A, "GPU-a")], "fabricMode: 2\n"));
    assert_failed(
        &node,
        &ran,
        "wait-fabric",
        "FABRIC_MODE=0 but the layout was recorded with 2",
    );
    node.lock().fabric_mode = Some(2);
    assert!(
        run(&node, &layout_of(&[(A, "GPU-a")], "fabricMode: 2\n"))
            .result
            .is_ok()
    );
}

/// A node recovered from `layout`, then its vGPUs gone and its GPU instances moved: same
/// profiles and counts, different slots (1g at 0 and 1 and 2g at 2:2, where the layout has 2g at
/// 0:2 and 1g at 2 and 3).
fn misplaced_node(layout: &Layout) -> FakeNode {
    let node = booted_node();
    assert!(run(&node, layout).result.is_ok());
    {
        let mut s = node.lock();
        let g = &mut s.gpus[0];
        for v in &mut g.vfs {
            v.current = 0;
            v.gi = None;
        }
        for gi in &mut g.gis {
            gi.placement = match (gi.profile_id, gi.placement.start) {
                (14, _) => miggate_recovery::Placement { start: 2, size: 2 },
                (19, 2) => miggate_recovery::Placement { start: 0, size: 1 },
                (19, 3) => miggate_recovery::Placement { start: 1, size: 1 },
                _ => gi.placement,
            };
        }
        s.ready = false;
    }
    node.take_calls();
    node
}

#[test]
fn s17_a_placement_mismatch_with_equal_counts_is_found_and_rebuilt() {
    let layout = layout_of(&[(A, "GPU-a")], "");
    let node = misplaced_node(&layout);
    let observed = observe(&node.host()).unwrap();
    let p = plan(&layout, &observed);
    assert_eq!(
        observed.gpus[0].instances.len(),
        layout.gpus[0].gpu_instances.len()
    );
    insta::assert_snapshot!(
        "s17_plan",
        format!(
            "{}\n{}",
            p.pictures.join("\n"),
            p.steps
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        )
    );
    let ran = run(&node, &layout);
    assert_eq!(ran.result, Ok(Outcome::Ready { changed: true }));
    assert_recovered(&node, &layout);
    insta::assert_snapshot!(ran.calls.join("\n"));
}

#[test]
fn s18_a_layout_recorded_on_another_gpu_model_is_refused_before_creating_instances() {
    let node = booted_node();
    // Profile 19 is 1g.10gb on an H100 80GB, 1g.18gb here.
    let text = gpu_yaml(A, "GPU-a").replace("profile: 1g.18gb", "profile: 1g.10gb");
    let layout = Layout::from_yaml(
        &format!("apiVersion: miggate.io/v1alpha1\nkind: RecoveryLayout\ngpus:\n{text}"),
        Path::new("t"),
    )
    .unwrap();
    let ran = run(&node, &layout);
    assert_failed(
        &node,
        &ran,
        "create-instances",
        "profile 19 is 1g.18gb on this GPU but 1g.10gb in the layout",
    );
    assert!(!ran.calls.iter().any(|c| c.contains("-cgi")));
}

/// Records a layout (with the manifest) on a node recovered from `layout`, then reboots it.
fn recorded_then_rebooted(layout: &Layout) -> (FakeNode, Layout) {
    let node = booted_node();
    assert!(run(&node, layout).result.is_ok());
    let (recorded, warnings) = miggate_recovery::record(&node.host()).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(recorded.manifest.is_some());
    node.take_calls();
    node.boot();
    (node, recorded)
}

#[test]
fn s19_verify_runs_the_compat_checks_in_exact_mode_on_the_recorded_manifest() {
    let (node, recorded) = recorded_then_rebooted(&two_gpu_layout());
    let ran = run(&node, &recorded);
    assert_eq!(ran.result, Ok(Outcome::Ready { changed: true }));
    assert!(
        ran.lines
            .iter()
            .any(|l| l.contains("compat checks pass (exact mode)")),
        "{:?}",
        ran.lines
    );
    assert_recovered(&node, &recorded);
    // The recorded layout round-trips through its YAML, manifest included.
    let text = recorded.to_yaml().unwrap();
    assert_eq!(Layout::from_yaml(&text, Path::new("r.yaml")).unwrap(), recorded);
}

#[test]
fn s19b_a_driver_change_across_the_reboot_keeps_the_gate_closed() {
    let (node, recorded) = recorded_then_rebooted(&two_gpu_layout());
    node.lock().driver_version = "580.95.05".to_string();
    let ran = run(&node, &recorded);
    assert_failed(
        &node,
        &ran,
        "verify",
        "driver-version: source 580.82.07, target 580.95.05",
    );
}

#[test]
fn s20_a_vf_count_sriov_manage_cannot_produce_is_refused_at_plan() {
    let node = booted_node();
    let text = gpu_yaml(A, "GPU-a").replace("sriovNumVfs: 16", "sriovNumVfs: 8");
    let layout = Layout::from_yaml(
        &format!("apiVersion: miggate.io/v1alpha1\nkind: RecoveryLayout\ngpus:\n{text}"),
        Path::new("t"),
    )
    .unwrap();
    let ran = run(&node, &layout);
    assert_failed(
        &node,
        &ran,
        "plan",
        "wants 8 VFs, sriov_totalvfs is 16 (sriov-manage -e enables all of them)",
    );
    assert!(ran.calls.is_empty());
}

#[test]
fn s21_the_vgpu_host_daemons_are_waited_for_before_anything_changes() {
    let node = booted_node();
    node.lock()
        .units
        .insert("nvidia-vgpu-mgr.service".to_string(), false);
    let opts = Options {
        wait_units: vec!["nvidia-vgpu-mgr.service".to_string()],
        ..options()
    };
    let layout = layout_of(&[(A, "GPU-a")], "");
    let ran = run_with(&node, &layout, &opts);
    assert_eq!(ran.result.as_ref().unwrap_err().step, "wait-units");
    assert!(
        ran.result
            .unwrap_err()
            .message
            .contains("nvidia-vgpu-mgr.service is not active")
    );
    assert!(ran.calls.is_empty());
    node.lock()
        .units
        .insert("nvidia-vgpu-mgr.service".to_string(), true);
    assert_eq!(
        run_with(&node, &layout, &opts).result,
        Ok(Outcome::Ready { changed: true })
    );
}

#[test]
fn s22_vfs_in_the_gpu_listing_are_neither_recorded_nor_reset() {
    let layout = two_gpu_layout();
    let node = booted_node();
    node.lock().lists_vfs = true;
    node.lock().nvlink_group = true;
    assert!(run(&node, &layout).result.is_ok());
    let (recorded, _) = miggate_recovery::record(&node.host()).unwrap();
    let buses: Vec<&str> = recorded.gpus.iter().map(|g| g.bus.as_str()).collect();
    assert_eq!(buses, [A, B, C]);
    // A recovered node keeps recovering cleanly with VFs listed.
    node.lock().ready = false;
    assert_eq!(run(&node, &layout).result, Ok(Outcome::Ready { changed: false }));
}

#[test]
fn s23_an_unreadable_journal_fails_at_start_and_is_left_for_the_operator() {
    use miggate_recovery::JOURNAL_FILE;
    use miggate_recovery::real::FileStore;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(JOURNAL_FILE);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    // Truncated mid-write by something other than recovery (recovery writes atomically).
    let corrupt = "{\"step\": \"reset\", \"stoppedUnits\": [\"nvidia-dcgm.serv";
    std::fs::write(&path, corrupt).unwrap();
    let store = FileStore::new(dir.path());
    let node = booted_node();
    let layout = two_gpu_layout();
    for _ in 0..2 {
        let host = miggate_recovery::seams::Host {
            store: &store,
            ..node.host()
        };
        let result = apply(&layout, host, &options(), &mut |_| {});
        let failure = result.expect_err("an unreadable journal must stop recovery");
        assert_eq!(failure.step, "start");
        assert!(
            failure.message.contains("not a recovery journal") && failure.message.contains("remove it"),
            "{failure}"
        );
        // Not overwritten: the next run must stop the same way, not go ahead without the
        // reboot guard and the units to restart.
        assert_eq!(std::fs::read_to_string(&path).unwrap(), corrupt);
        assert!(node.take_calls().is_empty());
        let s = node.lock();
        assert!(!s.ready);
        assert_eq!(s.state.as_ref().unwrap().state, Phase::Failed);
    }
}

#[test]
fn s24_an_nvlink_group_reset_is_never_widened_onto_a_gpu_carrying_a_tenants_vgpu() {
    let node = booted_node();
    {
        let mut s = node.lock();
        s.auto_activate = false;
        s.nvlink_group = true;
    }
    // C, which the layout does not name, already serves a VM.
    node.sriov_enable_now(C);
    node.lock().gpus[2].vfs[3].current = 1414;
    let layout = two_gpu_layout();
    let ran = run(&node, &layout);
    assert_failed(
        &node,
        &ran,
        "reset",
        "would take in GPUs carrying active vGPUs: 0000:3b:00.0 (VFs [3])",
    );
    // Nothing was asked of C: no reset naming it, no persistence change, persistenced running.
    assert!(!ran.calls.iter().any(|c| c.contains(C)), "{:?}", ran.calls);
    assert!(
        !ran.calls.iter().any(|c| c.contains("nvidia-persistenced")),
        "{:?}",
        ran.calls
    );
    let s = node.lock();
    assert_eq!(s.gpus[2].vfs.len(), 16);
    assert_eq!(s.gpus[2].vfs[3].current, 1414);
}

#[test]
fn s25_a_gate_that_cannot_be_closed_stops_recovery_before_any_change() {
    let node = booted_node();
    let layout = two_gpu_layout();
    {
        let mut s = node.lock();
        s.ready = true; // left from an earlier boot's run, say
        s.gate_stuck_open = true;
    }
    let ran = run(&node, &layout);
    let failure = ran.result.unwrap_err();
    assert_eq!(failure.step, "start");
    assert!(
        failure.message.contains("closing the readiness gate"),
        "{}",
        failure.message
    );
    assert!(
        failure.message.contains("could not be removed"),
        "the state file tells the operator the gate is still open: {}",
        failure.message
    );
    assert!(
        ran.calls.is_empty(),
        "nothing changed behind an open gate: {:?}",
        ran.calls
    );
    let s = node.lock();
    assert_eq!(s.state.as_ref().map(|st| st.state), Some(Phase::Failed));
    assert!(
        s.state
            .as_ref()
            .and_then(|st| st.message.as_deref())
            .is_some_and(|m| m.contains("remove it by hand")),
        "{:?}",
        s.state
    );
}

#[test]
fn s26_a_crash_before_the_guarded_reboot_is_told_apart_from_a_reboot_that_did_not_help() {
    let node = booted_node();
    {
        let mut s = node.lock();
        s.auto_activate = false;
        s.reset_supported = false;
    }
    let layout = two_gpu_layout();
    // Where the reboot request falls in the first run's mutating calls.
    let first = run(&node, &layout);
    assert_eq!(first.result, Ok(Outcome::Rebooting));
    let at = first
        .calls
        .iter()
        .position(|c| c.contains("reboot"))
        .expect("the first run requests the reboot");

    // The same boot, crashing just before the request: the guard is saved, no reboot happens.
    let node = booted_node();
    {
        let mut s = node.lock();
        s.auto_activate = false;
        s.reset_supported = false;
        s.crash_after = Some(at);
    }
    assert!(run(&node, &layout).result.is_err());
    assert!(node.lock().journal.as_ref().unwrap().reboot_attempted);
    assert_eq!(node.lock().reboots, 0);
    node.lock().crashed = false;
    node.lock().crash_after = None;

    // Rerun on the same boot: it says the node has not rebooted, and requests nothing.
    let again = run(&node, &layout);
    assert_failed(&node, &again, "reset", "has not rebooted since");
    assert!(
        !again.calls.iter().any(|c| c.contains("reboot")),
        "{:?}",
        again.calls
    );
    assert_eq!(node.lock().reboots, 0);

    // The operator reboots: a boot that did not apply the mode fails as s05's second boot does.
    node.boot();
    let after = run(&node, &layout);
    assert_failed(&node, &after, "reset", "did not take effect after rebooting");
}

/// An HGX board: its GPUs are NVLink peers behind NVSwitches and may only be reset together,
/// but the refusal of a partial reset is nvidia-smi's generic `In use by another client`.
fn nvswitch_board(switches: u32) -> FakeNode {
    let node = booted_node();
    {
        let mut s = node.lock();
        s.auto_activate = false;
        s.board_refuses_partial_reset = true;
        s.nvswitches = switches;
    }
    node
}

#[test]
fn s30_an_nvswitch_board_refusing_a_partial_reset_is_reset_whole_once_then_converges() {
    let node = nvswitch_board(4);
    let layout = two_gpu_layout();
    let ran = run(&node, &layout);
    assert_eq!(ran.result, Ok(Outcome::Ready { changed: true }));
    assert_recovered(&node, &layout);
    let resets: Vec<_> = ran.calls.iter().filter(|c| c.contains(" -r ")).cloned().collect();
    assert_eq!(
        resets,
        [
            format!("nvidia-smi -r -i {A},{B} => in use by another client"),
            format!("nvidia-smi -r -i {A},{B},{C}")
        ],
        "{:?}",
        ran.calls
    );
    // Widened before any escalation: persistence and services were never touched for it.
    assert!(!ran.calls.iter().any(|c| c.contains("-pm 0")), "{:?}", ran.calls);
    assert!(
        ran.lines
            .iter()
            .any(|l| l.contains("the node has NVLink peers (4 NVSwitches)")),
        "{:?}",
        ran.lines
    );
    insta::assert_snapshot!(ran.calls.join("\n"));
}

/// The same refusal with the fabric manager configured (no NVSwitch found on the bus) widens
/// too; without NVLink peers it is what it says, and the escalation looks for a holder.
#[rstest::rstest]
#[case::fabric_manager(Some(3), true)]
#[case::no_peers(None, false)]
fn s31_only_nvlink_peers_widen_an_in_use_refusal(#[case] fabric: Option<u32>, #[case] widens: bool) {
    let node = nvswitch_board(0);
    node.lock().fabric_mode = fabric;
    let layout = two_gpu_layout();
    let ran = run(&node, &layout);
    let widened = ran
        .calls
        .iter()
        .any(|c| c.starts_with(&format!("nvidia-smi -r -i {A},{B},{C}")));
    assert_eq!(widened, widens, "{:?}", ran.calls);
    if widens {
        assert_eq!(ran.result, Ok(Outcome::Ready { changed: true }));
    } else {
        assert_failed(&node, &ran, "reset", "In use by another client");
    }
}

#[test]
fn s32_an_nvswitch_board_is_never_widened_onto_a_gpu_carrying_a_tenants_vgpu() {
    let node = nvswitch_board(4);
    node.sriov_enable_now(C);
    node.lock().gpus[2].vfs[3].current = 1414;
    let ran = run(&node, &two_gpu_layout());
    assert_failed(
        &node,
        &ran,
        "reset",
        "would take in GPUs carrying active vGPUs: 0000:3b:00.0 (VFs [3])",
    );
    assert!(!ran.calls.iter().any(|c| c.contains(C)), "{:?}", ran.calls);
    assert_eq!(node.lock().gpus[2].vfs[3].current, 1414);
}

/// A layout recorded on a node whose MIG the DRA driver manages (DynamicMIG): MIG mode on,
/// instances the driver created for claims at record time.
fn dynamic_mig_layout() -> Layout {
    let text = format!(
        r#"apiVersion: miggate.io/v1alpha1
kind: RecoveryLayout
migManagedBy: dra-dynamic-mig
gpus:
- bus: "{A}"
  uuid: GPU-a
  migMode: enabled
  gpuInstances:
  - {{placement: "4:4", profileId: 9, profile: 3g.71gb, computeInstances: [{{profileId: 2}}]}}
"#
    );
    Layout::from_yaml(&text, Path::new("test.yaml")).unwrap()
}

/// After a reboot the driver's partitions are gone, and the driver recreates them per claim
/// (destroying any it did not create): recovery sets MIG mode and never creates an instance.
#[test]
fn s33_recovery_leaves_a_dynamic_mig_nodes_instances_to_the_dra_driver() {
    let node = booted_node();
    let layout = dynamic_mig_layout();
    let ran = run(&node, &layout);
    assert_eq!(ran.result, Ok(Outcome::Ready { changed: true }));
    assert_eq!(
        ran.calls,
        [format!("nvidia-smi -i {A} -mig 1")],
        "{:?}",
        ran.calls
    );
    assert!(node.lock().gpus[0].gis.is_empty());
    // Partitions the driver made since (other than the recorded ones) are not destroyed.
    {
        let mut s = node.lock();
        s.gpus[0].gis.push(miggate_recovery::fake::FakeGi {
            id: 7,
            profile_id: 19,
            placement: miggate_recovery::Placement { start: 0, size: 1 },
            cis: vec![0],
        });
    }
    let again = run(&node, &layout);
    assert_eq!(again.result, Ok(Outcome::Ready { changed: false }));
    assert!(again.calls.is_empty(), "{:?}", again.calls);
    assert_eq!(node.lock().gpus[0].gis.len(), 1);
    let observed = observe(&node.host()).unwrap();
    let p = plan(&layout, &observed);
    assert!(
        p.pictures
            .iter()
            .any(|l| l.contains("recovery leaves them alone")),
        "{:?}",
        p.pictures
    );
    // The same layout without the manager rebuilds the recorded instances.
    let mut ours = layout.clone();
    ours.mig_managed_by = None;
    let p = plan(&ours, &observed);
    assert!(
        p.steps
            .iter()
            .any(|s| s.to_string().contains("create GPU instances")),
        "{:?}",
        p.steps
    );
}
