//! The scenarios of the reference (boot-recovery.md §8.3) that keep the readiness gate closed or
//! stop recovery before a change, against the behavioural fake node: a missing or different
//! GPU, a crash between any two steps, the fabric manager, a layout of another model, the compat
//! checks on the recorded manifest, the host daemons, an unreadable journal, a stuck gate, and
//! a dynamic-MIG node left to its DRA driver.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::Path;

use miggate_recovery::fake::{FakeGpu, FakeNode};
use miggate_recovery::{Layout, Options, Outcome, Phase, apply, observe, plan};
use support::{
    A, ampere_node, assert_failed, assert_recovered, booted_node, gpu_yaml, layout_of, misplaced_node,
    options, run, run_with, two_gpu_layout,
};

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
