//! The real `NvmlControl` against the fake `libnvidia-ml.so.1` (capture's
//! `tests/fake_nvml/libnvidia_ml.rs`, scenarios `control_*`), and its delegation to nvidia-smi.
//! The fake's setters keep their state in the loaded library, so each test that changes state
//! has a scenario (a library) of its own.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use miggate_recovery::NvmlFailure;
use miggate_recovery::real::{Activation, NvidiaSmi, NvmlControl};
use miggate_recovery::seams::{GpuControl, GpuInfo, MigModeState};
use miggate_recovery::{Bdf, Error};
use miggate_recovery::{MigSetting, Placement};

#[path = "../../capture/tests/support/fake_nvml.rs"]
mod fake_nvml;

const H200: &str = "0000:18:00.0";
const A100: &str = "0000:2a:00.0";
const L4: &str = "0000:ab:00.0";

fn bdf(s: &str) -> Bdf {
    Bdf::parse(s).unwrap()
}

/// An nvidia-smi that must not be run: the NVML paths never reach it.
fn no_smi() -> NvidiaSmi {
    NvidiaSmi::new(
        PathBuf::from("/nonexistent/nvidia-smi"),
        Duration::from_secs(5),
        Duration::from_secs(5),
    )
}

fn control(scenario: &'static str) -> NvmlControl {
    NvmlControl::open(Some(&fake_nvml::fake(scenario)), no_smi()).unwrap()
}

fn mode(current: MigSetting, pending: MigSetting) -> Option<MigModeState> {
    Some(MigModeState { current, pending })
}

#[test]
fn lists_what_the_library_declares() {
    let gpus = control("control_list").gpus().unwrap();
    assert_eq!(
        gpus,
        [
            GpuInfo {
                bus: bdf(H200),
                uuid: "GPU-b2acda36-db78-a209-f9ef-d07b4336c449".into(),
                mig: mode(MigSetting::Disabled, MigSetting::Disabled),
            },
            // NVML's legacy 4-digit, lower-case form reads as the same canonical address.
            GpuInfo {
                bus: bdf(A100),
                uuid: "GPU-c08d91cb-e324-655c-71ba-7570956445bc".into(),
                mig: mode(MigSetting::Disabled, MigSetting::Disabled),
            },
            // Not MIG-capable: no MIG mode, as nvidia-smi's [N/A].
            GpuInfo {
                bus: bdf(L4),
                uuid: "GPU-6109dd5c-d378-24ee-f344-79b537574ea6".into(),
                mig: None,
            },
        ]
    );
}

#[test]
fn set_mig_mode_in_force_at_once_or_pending_a_reset() {
    let nvml = control("control_set");
    // Hopper: in force at once.
    assert_eq!(
        nvml.set_mig_mode_activation(&bdf(H200), MigSetting::Enabled)
            .unwrap(),
        Activation::Immediate
    );
    // Held by another client: only the pending mode changes, and that is not a failure (apply
    // reads it back and resets).
    let Activation::Pending(reason) = nvml
        .set_mig_mode_activation(&bdf(A100), MigSetting::Enabled)
        .unwrap()
    else {
        panic!("the A100's mode should stay pending");
    };
    assert!(reason.contains("in use"), "{reason}");
    let gpus = nvml.gpus().unwrap();
    assert_eq!(gpus[0].mig, mode(MigSetting::Enabled, MigSetting::Enabled));
    assert_eq!(gpus[1].mig, mode(MigSetting::Disabled, MigSetting::Enabled));
    // Through the seam, the way apply calls it: back to off, at once on the H200.
    nvml.set_mig_mode(&bdf(H200), MigSetting::Disabled).unwrap();
    nvml.set_mig_mode(&bdf(A100), MigSetting::Disabled).unwrap();
    let gpus = nvml.gpus().unwrap();
    assert_eq!(gpus[0].mig, mode(MigSetting::Disabled, MigSetting::Disabled));
    assert_eq!(gpus[1].mig, mode(MigSetting::Disabled, MigSetting::Disabled));
}

#[test]
fn persistence_is_set_through_nvml() {
    let lib = fake_nvml::fake("control_pm");
    let nvml = NvmlControl::open(Some(&lib), no_smi()).unwrap();
    // A second handle on the same loaded library reads what the first set.
    let reader = nvml_wrapper::Nvml::builder()
        .lib_path(lib.as_os_str())
        .init()
        .unwrap();
    let persistent = || {
        reader
            .device_by_index(0)
            .unwrap()
            .is_in_persistent_mode()
            .unwrap()
    };
    assert!(!persistent());
    nvml.set_persistence(&bdf(H200), true).unwrap();
    assert!(persistent());
    nvml.set_persistence(&bdf(H200), false).unwrap();
    assert!(!persistent());
}

fn nvml_failure(err: &Error) -> NvmlFailure {
    match err {
        Error::Nvml { kind, .. } => *kind,
        other => panic!("not an NVML error: {other}"),
    }
}

#[test]
fn refusals_are_named_with_the_gpu_and_what_to_do() {
    let nvml = control("control_list");
    let not_supported = nvml.set_mig_mode(&bdf(L4), MigSetting::Enabled).unwrap_err();
    assert_eq!(nvml_failure(&not_supported), NvmlFailure::NotSupported);
    let no_permission = nvml.set_persistence(&bdf(L4), false).unwrap_err();
    assert_eq!(nvml_failure(&no_permission), NvmlFailure::NoPermission);
    let missing = nvml
        .set_mig_mode(&bdf("0000:99:00.0"), MigSetting::Enabled)
        .unwrap_err();
    assert_eq!(nvml_failure(&missing), NvmlFailure::NotFound);
    insta::assert_snapshot!(
        [not_supported, no_permission, missing]
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n"),
        @r"
    0000:ab:00.0: NVML nvmlDeviceSetMigMode: not supported by this GPU or driver (the requested operation is not available on the target device)
    0000:ab:00.0: NVML nvmlDeviceSetPersistenceMode: permission denied (this NVML call needs root) (the current user does not have permission to perform this operation)
    0000:99:00.0: NVML nvmlDeviceGetPciInfo_v3: no such GPU (NVML lists no GPU at 0000:99:00.0)
    "
    );
    // Nothing changed.
    assert_eq!(
        nvml.gpus().unwrap()[0].mig,
        mode(MigSetting::Disabled, MigSetting::Disabled)
    );
}

#[test]
fn a_library_that_cannot_be_loaded_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("libnvidia-ml.so.1");
    let err = NvmlControl::open(Some(&missing), no_smi()).unwrap_err();
    assert!(matches!(err, Error::NvmlUnavailable { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.starts_with(&format!(
            "cannot load or initialise NVML from {}: ",
            missing.display()
        )),
        "{text}"
    );
    // Loaded, but nvmlInit_v2 fails (no driver).
    let err = NvmlControl::open(Some(&fake_nvml::fake("init_fails")), no_smi()).unwrap_err();
    assert!(matches!(err, Error::NvmlUnavailable { .. }), "{err}");
    assert!(err.to_string().contains("init_fails"), "{err}");
}

/// An nvidia-smi that appends its arguments to `calls` and answers like the real one.
fn recording_smi(dir: &Path) -> (NvidiaSmi, PathBuf) {
    let calls = dir.join("calls");
    let script = dir.join("nvidia-smi");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\ncase \"$1\" in\n  -r) echo \"GPU 00000000:18:00.0 was successfully reset.\";;\n  mig) echo \"No GPU instances found: Not Found\"; exit 6;;\nesac\nexit 0\n",
            calls.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    (
        NvidiaSmi::new(script, Duration::from_secs(30), Duration::from_secs(30)),
        calls,
    )
}

#[test]
fn instances_placements_and_reset_go_to_nvidia_smi() {
    let dir = tempfile::tempdir().unwrap();
    let (smi, calls) = recording_smi(dir.path());
    let nvml = NvmlControl::open(Some(&fake_nvml::fake("control_list")), smi).unwrap();
    let gpu = bdf(H200);
    nvml.gpus().unwrap();
    nvml.set_persistence(&gpu, true).unwrap();
    nvml.reset(std::slice::from_ref(&gpu)).unwrap();
    nvml.destroy_instances(&gpu).unwrap();
    // "No GPU instances found" is a listing nvidia-smi's parser reads as none.
    let _ = nvml.offered_placements(&gpu);
    let _ = nvml.create_gpu_instance(&gpu, 19, Placement { start: 0, size: 1 });
    let recorded = std::fs::read_to_string(&calls).unwrap();
    assert_eq!(
        recorded.lines().collect::<Vec<_>>(),
        [
            "-r -i 0000:18:00.0",
            "mig -i 0000:18:00.0 -dci",
            "mig -i 0000:18:00.0 -dgi",
            "mig -lgipp -i 0000:18:00.0",
            "mig -i 0000:18:00.0 -cgi 19:0",
        ],
        "listing, MIG mode and persistence never run nvidia-smi"
    );
}
