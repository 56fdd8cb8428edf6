//! The scenarios of the reference (boot-recovery.md §8.3) against the behavioural fake node.
//! Each asserts the final state and the exact order of mutating calls (snapshots). Here: MIG
//! mode changes, resets and reboots; SR-IOV VFs and vGPU types are in `scenarios_vfs.rs`, and
//! what keeps the gate closed (missing facts, crashes, verification) in `scenarios_guards.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use miggate_recovery::fake::FakeNode;
use miggate_recovery::{Outcome, Phase, observe, plan};
use support::{
    A, B, C, ampere_node, assert_failed, assert_recovered, booted_node, layout_of, misplaced_node, run,
    two_gpu_layout,
};

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
