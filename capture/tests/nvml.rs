#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The NVML backend against a fake `libnvidia-ml.so.1` (`tests/fake_nvml/libnvidia_ml.rs`),
//! compiled here with `rustc` once per scenario, so no test needs a GPU or a driver.
//!
//! Each scenario is its own library in its own directory (`--cfg scenario="…"`), so tests of
//! different scenarios run in parallel in this one process without sharing state.

use std::path::Path;

use miggate_capture::Error;
use miggate_capture::{NvidiaFacts, read_nvml};
use miggate_compat::{Device, GpuManifest, MigMode, Options, evaluate};

use miggate_compat::H100_NAME as H100;
const GPU0: &str = "GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f";
const GPU1: &str = "GPU-c08d91cb-e324-655c-71ba-7570956445bc";

mod support;
use support::fake_nvml::fake;

fn read(scenario: &'static str) -> NvidiaFacts {
    read_nvml(Some(&fake(scenario))).unwrap_or_else(|e| panic!("{scenario}: {e}"))
}

fn devices(facts: &NvidiaFacts) -> &[Device] {
    facts.devices.as_deref().expect("the device list is known")
}

fn profiles(facts: &NvidiaFacts) -> Vec<Option<&str>> {
    devices(facts)
        .iter()
        .map(|d| d.mig_profile.as_ref().map(|p| p.as_str()))
        .collect()
}

fn manifest(facts: &NvidiaFacts) -> GpuManifest {
    GpuManifest {
        nvidia: Some(facts.clone().into_nvidia().0),
        ..GpuManifest::new()
    }
}

#[test]
fn h100_mixed_lists_four_slices_then_one_whole_gpu() {
    let facts = read("h100_mixed");
    insta::assert_yaml_snapshot!("h100_mixed", facts);

    assert_eq!(facts.driver_version.as_ref().unwrap().as_str(), "580.82.07");
    assert_eq!(facts.cuda_driver_version.as_ref().unwrap().as_str(), "13.0");
    assert!(facts.warnings.is_empty(), "{:?}", facts.warnings);

    assert_eq!(facts.gpus.len(), 2);
    let g0 = &facts.gpus[0];
    assert_eq!(g0.index, Some(0));
    assert_eq!(g0.uuid.as_deref(), Some(GPU0));
    assert_eq!(g0.product_name.as_deref(), Some(H100));
    assert_eq!(g0.pci_bus_id.as_deref(), Some("00000000:18:00.0"));
    assert_eq!(g0.memory_mib, Some(81559));
    assert_eq!(g0.compute_capability.as_ref().unwrap().as_str(), "9.0");
    assert_eq!(g0.mig_mode, Some(MigMode::Enabled));
    assert_eq!(facts.gpus[1].mig_mode, Some(MigMode::Disabled));
    assert_eq!(facts.gpus[1].pci_bus_id.as_deref(), Some("00000000:2A:00.0"));

    let d = devices(&facts);
    assert_eq!(d.len(), 5, "the MIG-enabled parent is never a device");
    assert_eq!(
        profiles(&facts),
        [
            Some("3g.40gb"),
            Some("1g.10gb"),
            Some("1g.10gb"),
            Some("1g.10gb+me"),
            None
        ]
    );
    for slice in &d[..4] {
        assert!(slice.uuid.as_deref().unwrap().starts_with("MIG-"));
        assert_eq!(slice.parent_uuid.as_deref(), Some(GPU0));
        assert_eq!(
            slice.product_name.as_deref(),
            Some(H100),
            "a slice carries its parent's name"
        );
    }
    assert_eq!(
        d[0].uuid.as_deref(),
        Some("MIG-7089d0f3-293f-58c9-8f8c-5ea666eedbde")
    );
    assert_eq!(
        (d[0].gpu_instance_id, d[0].compute_instance_id),
        (Some(2), Some(0))
    );
    assert_eq!(d[0].memory_mib, Some(40192));
    assert_eq!(
        d[3].uuid.as_deref(),
        Some("MIG-0f03f623-f28d-5831-bc51-f450dad99b8c")
    );
    assert_eq!(
        (d[3].gpu_instance_id, d[3].compute_instance_id),
        (Some(13), Some(0))
    );
    assert_eq!(d[3].memory_mib, Some(9984));

    let whole = &d[4];
    assert_eq!(whole.uuid.as_deref(), Some(GPU1));
    assert_eq!(whole.product_name.as_deref(), Some(H100));
    assert_eq!(whole.memory_mib, Some(81559));
    assert_eq!(whole.parent_uuid, None);
    assert_eq!(whole.gpu_instance_id, None);
}

#[test]
fn mig_enabled_gpu_without_instances_offers_no_device() {
    let facts = read("mig_no_instances");
    insta::assert_yaml_snapshot!("mig_no_instances", facts);
    assert_eq!(facts.gpus.len(), 1);
    assert_eq!(facts.gpus[0].mig_mode, Some(MigMode::Enabled));
    assert_eq!(facts.devices, Some(vec![]), "known to be none, not unknown");
    assert!(facts.warnings.is_empty(), "{:?}", facts.warnings);
}

#[test]
fn empty_mig_positions_are_skipped() {
    let facts = read("mig_gaps");
    insta::assert_yaml_snapshot!("mig_gaps", facts);
    assert_eq!(
        facts.warnings,
        [format!(
            "GPU 0 ({GPU0}): MIG device 5 is not accessible to this process (no permission); left out"
        )]
    );
    let d = devices(&facts);
    let uuids: Vec<_> = d.iter().map(|d| d.uuid.as_deref().unwrap()).collect();
    assert_eq!(
        uuids,
        [
            "MIG-7089d0f3-293f-58c9-8f8c-5ea666eedbde",
            "MIG-b4b2228d-6933-5839-bc0e-41ab9edb61c6"
        ]
    );
    assert_eq!(profiles(&facts), [Some("1g.20gb"), Some("2g.20gb")]);
    assert_eq!(d[1].gpu_instance_id, Some(5));
}

#[test]
fn pending_mig_changes_follow_the_current_mode() {
    let facts = read("pending");
    insta::assert_yaml_snapshot!("pending", facts);
    assert!(facts.warnings.is_empty(), "{:?}", facts.warnings);
    let modes: Vec<_> = facts.gpus.iter().map(|g| g.mig_mode).collect();
    assert_eq!(
        modes,
        [Some(MigMode::PendingDisable), Some(MigMode::PendingEnable), None]
    );

    let d = devices(&facts);
    assert_eq!(d.len(), 3);
    // MIG is still on until the reset: the slice is what a workload gets.
    assert_eq!(d[0].mig_profile.as_ref().unwrap().as_str(), "7g.80gb");
    assert_eq!(d[0].parent_uuid.as_deref(), Some(GPU0));
    // MIG is still off until the reset: the GPU is whole.
    assert_eq!(d[1].uuid.as_deref(), Some(GPU1));
    assert_eq!(d[1].mig_profile, None);
    // Not MIG-capable: whole, and no MIG mode recorded.
    assert_eq!(d[2].product_name.as_deref(), Some("NVIDIA L4"));
    assert_eq!(facts.gpus[2].compute_capability.as_ref().unwrap().as_str(), "8.9");
    assert_eq!(facts.gpus[2].pci_bus_id.as_deref(), Some("00000000:AB:00.0"));
}

#[test]
fn missing_name_symbol_leaves_profiles_unknown_with_warnings() {
    let facts = read("no_name");
    insta::assert_yaml_snapshot!("no_name", facts);
    let d = devices(&facts);
    assert_eq!(d.len(), 5, "the slices are still found through their handles");
    assert_eq!(profiles(&facts), [None; 5]);
    assert!(
        d[..4]
            .iter()
            .all(|s| s.uuid.as_deref().unwrap().starts_with("MIG-"))
    );
    assert!(d.iter().all(|s| s.product_name.is_none()));
    assert!(facts.gpus.iter().all(|g| g.product_name.is_none()));
    // The slices' ids and memory do not depend on the name.
    assert_eq!(d[3].gpu_instance_id, Some(13));
    assert_eq!(d[3].memory_mib, Some(9984));

    let profile_warnings = facts
        .warnings
        .iter()
        .filter(|w| w.to_string().contains("MIG profile unknown"))
        .count();
    assert_eq!(profile_warnings, 4, "{:#?}", facts.warnings);
    // The missing function is reported once for the product names, once per slice for profiles.
    let name_warnings = facts
        .warnings
        .iter()
        .filter(|w| w.to_string().contains("the product name is unknown"))
        .count();
    assert_eq!(name_warnings, 1, "{:#?}", facts.warnings);
    assert_eq!(facts.warnings.len(), 5, "{:#?}", facts.warnings);
    assert!(
        facts
            .warnings
            .iter()
            .all(|w| w.to_string().contains("nvmlDeviceGetName")),
        "{:#?}",
        facts.warnings
    );
}

#[test]
fn compute_instances_keep_their_profile_and_ids() {
    let facts = read("compute_instances");
    insta::assert_yaml_snapshot!("compute_instances", facts);
    assert!(facts.warnings.is_empty(), "{:?}", facts.warnings);
    assert_eq!(
        profiles(&facts),
        [
            Some("1c.3g.40gb"),
            Some("1c.3g.40gb"),
            Some("1c.3g.40gb"),
            Some("1g.10gb"),
            Some("1g.10gb")
        ]
    );
    let ids: Vec<_> = devices(&facts)
        .iter()
        .map(|d| (d.gpu_instance_id.unwrap(), d.compute_instance_id.unwrap()))
        .collect();
    assert_eq!(ids, [(2, 0), (2, 1), (2, 2), (9, 0), (10, 0)]);
    assert!(
        devices(&facts)[0]
            .mig_profile
            .as_ref()
            .unwrap()
            .is_compute_instance()
    );
}

#[test]
fn odd_mig_names_give_the_profile_or_nothing() {
    let facts = read("odd_names");
    insta::assert_yaml_snapshot!("odd_names", facts);
    assert_eq!(
        profiles(&facts),
        [Some("1g.10gb"), Some("1g.10gb+me"), Some("2g.20gb"), None, None]
    );
    assert_eq!(facts.gpus[0].pci_bus_id.as_deref(), Some("00000000:9A:00.0"));
    let d = devices(&facts);
    // This library has no instance-id functions.
    assert!(
        d.iter()
            .all(|s| s.gpu_instance_id.is_none() && s.compute_instance_id.is_none())
    );
    let w = &facts.warnings;
    // Said once each, not once per slice.
    assert_eq!(
        w.iter()
            .filter(|w| w.to_string().contains("nvmlDeviceGetGpuInstanceId"))
            .count(),
        1,
        "{w:#?}"
    );
    assert_eq!(
        w.iter()
            .filter(|w| w.to_string().contains("nvmlDeviceGetComputeInstanceId"))
            .count(),
        1,
        "{w:#?}"
    );
    assert_eq!(w.len(), 4, "{w:#?}");
    let unknown: Vec<_> = w
        .iter()
        .filter(|w| w.to_string().contains("MIG profile unknown"))
        .collect();
    assert_eq!(unknown.len(), 2, "{w:#?}");
    assert!(
        unknown[0].to_string().contains("MIG device 3")
            && unknown[0].to_string().contains("`NVIDIA H100 80GB HBM3`")
    );
    assert!(unknown[1].to_string().contains("MIG device 4") && unknown[1].to_string().contains("mystery"));
}

#[test]
fn a_failing_mig_walk_makes_the_device_list_unknown() {
    let facts = read("mig_walk_fails");
    insta::assert_yaml_snapshot!("mig_walk_fails", facts);
    assert_eq!(facts.devices, None, "a partial list would miscount devices");
    assert_eq!(facts.gpus.len(), 2, "the GPUs themselves are still known");
    assert_eq!(facts.gpus[0].mig_mode, Some(MigMode::Enabled));
    assert_eq!(facts.warnings.len(), 1, "{:?}", facts.warnings);
    assert!(
        facts.warnings[0].to_string().contains("GPU 0"),
        "{}",
        facts.warnings[0]
    );
    assert!(
        facts.warnings[0].to_string().contains("MIG device 1"),
        "{}",
        facts.warnings[0]
    );
    assert!(
        facts.warnings[0].to_string().contains("fell off the bus"),
        "{}",
        facts.warnings[0]
    );
}

#[test]
fn failing_gpu_calls_cost_only_their_facts() {
    let facts = read("gpu_facts_fail");
    insta::assert_yaml_snapshot!("gpu_facts_fail", facts);
    assert_eq!(facts.cuda_driver_version.as_ref().unwrap().as_str(), "12.2");
    let g0 = &facts.gpus[0];
    assert_eq!(g0.index, Some(0));
    assert_eq!(g0.product_name.as_deref(), Some(H100));
    assert_eq!(
        (g0.uuid.as_ref(), g0.pci_bus_id.as_ref(), g0.memory_mib),
        (None, None, None)
    );
    assert_eq!((g0.compute_capability.as_ref(), g0.mig_mode), (None, None));
    assert_eq!(facts.gpus[1].uuid.as_deref(), Some(GPU1));
    // GPU 0's MIG mode is unknown, so whether it is whole or sliced is too.
    assert_eq!(facts.devices, None);
    assert_eq!(facts.warnings.len(), 5, "{:#?}", facts.warnings);
    assert!(
        facts
            .warnings
            .iter()
            .all(|w| w.to_string().starts_with("GPU 0: ")),
        "{:#?}",
        facts.warnings
    );
}

#[test]
fn a_missing_library_is_unavailable() {
    let path = Path::new("/nonexistent/miggate/libnvidia-ml.so.1");
    let err = read_nvml(Some(path)).unwrap_err();
    let Error::NvmlUnavailable { message } = &err else {
        panic!("expected NvmlUnavailable, got {err:?}");
    };
    assert!(
        message.contains("/nonexistent/miggate/libnvidia-ml.so.1"),
        "{message}"
    );
}

#[test]
fn a_file_that_is_not_a_library_is_unavailable() {
    let not_a_library = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake_nvml/libnvidia_ml.rs");
    let err = read_nvml(Some(&not_a_library)).unwrap_err();
    assert!(matches!(err, Error::NvmlUnavailable { .. }), "{err:?}");
}

#[test]
fn a_library_without_init_is_unavailable() {
    let err = read_nvml(Some(&fake("no_init"))).unwrap_err();
    assert!(matches!(err, Error::NvmlUnavailable { .. }), "{err:?}");
}

#[test]
fn a_failing_init_is_unavailable() {
    let lib = fake("init_fails");
    let err = read_nvml(Some(&lib)).unwrap_err();
    let Error::NvmlUnavailable { message } = &err else {
        panic!("expected NvmlUnavailable, got {err:?}");
    };
    assert!(message.contains("NVIDIA driver is not loaded"), "{message}");
    assert_eq!(
        err.to_string(),
        format!(
            "NVML is not available: cannot load or initialise {}: NVIDIA driver is not loaded",
            lib.display()
        )
    );
}

#[test]
fn a_failing_device_count_is_an_error() {
    let err = read_nvml(Some(&fake("count_fails"))).unwrap_err();
    let Error::Nvml { call, message } = &err else {
        panic!("expected Nvml, got {err:?}");
    };
    assert_eq!(*call, "nvmlDeviceGetCount_v2");
    assert_eq!(message, "an internal driver error occurred");
}

#[test]
fn a_failing_gpu_handle_is_an_error() {
    let err = read_nvml(Some(&fake("handle_fails"))).unwrap_err();
    let Error::Nvml { call, message } = &err else {
        panic!("expected Nvml, got {err:?}");
    };
    assert_eq!(*call, "nvmlDeviceGetHandleByIndex_v2");
    assert!(message.starts_with("GPU 1: "), "{message}");
}

#[test]
fn captured_facts_feed_the_checks() {
    let mixed = manifest(&read("h100_mixed"));
    let report = evaluate(&mixed, &mixed, &Options::default());
    assert!(report.compatible, "{}", report.reason);

    let gaps = manifest(&read("mig_gaps"));
    let report = evaluate(&mixed, &gaps, &Options::default());
    assert!(!report.compatible);
    assert!(report.reason.contains("mig-profile"), "{}", report.reason);
}
