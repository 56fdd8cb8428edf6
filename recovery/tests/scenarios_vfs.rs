//! The scenarios of the reference (boot-recovery.md §8.3) about SR-IOV VFs and vGPU types,
//! against the behavioural fake node: active vGPUs never touched, `sriov-manage` retried, VF
//! directories waited for, the order of GPU instances and VFs, and types no longer creatable.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::Path;
use std::time::Duration;

use miggate_recovery::seams::{GpuControl, SriovManage, Sysfs};
use miggate_recovery::{Layout, MigSetting, Outcome};
use support::{
    A, B, C, assert_failed, assert_recovered, bdf, booted_node, gpu_yaml, layout_of, run, two_gpu_layout,
};

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
