//! `miggate capture` as a user runs it: the real binary against a replayed nvidia-smi and a fake
//! NVML library, and its manifests fed to `miggate check`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use miggate_compat::{DeviceKind, GpuManifest};
use rstest::rstest;
use support::workspace_root;

fn replay() -> PathBuf {
    workspace_root().join("testdata/nvidia-smi/replay/nvidia-smi")
}

fn miggate(args: &[&str], scenario: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_miggate"));
    cmd.args(args)
        .env("NO_COLOR", "1")
        .env_remove("MIGGATE_NVIDIA_SMI")
        .env_remove("NODE_NAME");
    if let Some(s) = scenario {
        cmd.env("MIGGATE_REPLAY", s);
    }
    cmd.output().unwrap()
}

fn capture_smi(scenario: &str) -> (String, GpuManifest) {
    let out = miggate(
        &[
            "capture",
            "--nvidia-smi",
            replay().to_str().unwrap(),
            "--node",
            "node-a",
        ],
        Some(scenario),
    );
    captured(out)
}

/// A successful capture's output: the text and the manifest it reads as.
fn captured(out: Output) -> (String, GpuManifest) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let manifest = miggate_compat::from_str(&text).unwrap();
    (text, manifest)
}

/// Host facts and the time come from the machine running the test; everything else is pinned.
fn pinned(m: &GpuManifest) -> GpuManifest {
    let mut m = m.clone();
    m.captured_at = Some("<time>".into());
    if let Some(h) = m.host.as_mut() {
        h.kernel_version = Some(miggate_compat::VersionText::new("<kernel>"));
        h.cpu_arch = Some("<arch>".into());
    }
    m
}

#[rstest]
#[case::h100_mig_host("h100-mig-host", &["1c.3g.40gb", "1c.3g.40gb", "1c.3g.40gb", "1g.10gb", "1g.10gb"], 0)]
#[case::h200_8gpu("h200-8gpu", &["2g.35gb", "1g.18gb", "1g.18gb", "1g.18gb", "1g.18gb", "1g.18gb"], 7)]
#[case::container_slice("h100-container-3g40gb", &["3g.40gb"], 0)]
#[case::h100_mixed("h100-mixed", &["3g.40gb", "1g.10gb", "1g.10gb", "1g.10gb+me"], 1)]
fn captures_replayed_nvidia_smi(#[case] scenario: &str, #[case] slices: &[&str], #[case] whole: usize) {
    let (text, m) = capture_smi(scenario);
    let devices = m.devices().unwrap();
    let profiles: Vec<&str> = devices
        .iter()
        .filter(|d| d.kind() == DeviceKind::Slice)
        .map(|d| d.mig_profile.as_ref().unwrap().as_str())
        .collect();
    assert_eq!(profiles, slices);
    assert_eq!(
        devices.iter().filter(|d| d.kind() == DeviceKind::Whole).count(),
        whole
    );
    // Slices carry their parent's UUID and name; nvidia-smi names them after the parent card.
    for d in devices.iter().filter(|d| d.kind() == DeviceKind::Slice) {
        assert!(d.parent_uuid.as_deref().unwrap().starts_with("GPU-"));
        assert!(d.product_name.is_some());
    }
    assert_eq!(
        m.captured_by.as_ref().unwrap().backend.as_deref(),
        Some("nvidia-smi")
    );
    assert_eq!(m.host.as_ref().unwrap().node_name.as_deref(), Some("node-a"));
    assert!(text.starts_with("{\n  \"apiVersion\": \"miggate.io/v1alpha1\",\n  \"kind\": \"GpuManifest\""));
    insta::assert_yaml_snapshot!(format!("capture-{scenario}"), pinned(&m).to_value().unwrap());
}

#[test]
fn instance_ids_come_from_mig_lci_when_it_answers() {
    let (_, m) = capture_smi("h100-mig-host");
    let ids: Vec<(Option<u32>, Option<u32>)> = m
        .devices()
        .unwrap()
        .iter()
        .map(|d| (d.gpu_instance_id, d.compute_instance_id))
        .collect();
    assert_eq!(
        ids,
        [
            (Some(2), Some(0)),
            (Some(2), Some(1)),
            (Some(2), Some(2)),
            (Some(9), Some(0)),
            (Some(10), Some(0))
        ]
    );
    assert!(m.warnings.is_empty(), "{:?}", m.warnings);

    let (_, m) = capture_smi("h100-container-3g40gb");
    assert_eq!(m.devices().unwrap()[0].gpu_instance_id, None);
    assert!(
        m.warnings
            .iter()
            .any(|w| w.to_string().contains("Insufficient Permissions")),
        "{:?}",
        m.warnings
    );
}

/// `miggate capture -o <format>` of a replay scenario; the process must succeed.
fn capture_as(format: &str, scenario: &str) -> String {
    let out = miggate(
        &[
            "capture",
            "--nvidia-smi",
            replay().to_str().unwrap(),
            "-o",
            format,
        ],
        Some(scenario),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn table_output_draws_each_gpu_with_its_slices() {
    let text = capture_as("table", "h100-mixed");
    // The first line names this machine's kernel; the tree below it is pinned.
    let tree: String = text.lines().skip(1).map(|l| format!("{l}\n")).collect();
    insta::assert_snapshot!("capture-h100-mixed-table", tree);
}

#[test]
fn yaml_output_reads_back_as_the_same_manifest() {
    let from_yaml = miggate_compat::from_str(&capture_as("yaml", "h200-8gpu")).unwrap();
    let (_, from_json) = capture_smi("h200-8gpu");
    assert_eq!(pinned(&from_yaml).nvidia, pinned(&from_json).nvidia);
    assert_eq!(
        from_yaml.nvidia.unwrap().cuda_driver_version.unwrap().as_str(),
        "12.8"
    );
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

/// `miggate check ARGS -o json`: the exit code and the report.
fn check_json(args: &[&str]) -> (Option<i32>, serde_json::Value) {
    let mut all = vec!["check"];
    all.extend_from_slice(args);
    all.extend(["-o", "json"]);
    let out = miggate(&all, None);
    (out.status.code(), serde_json::from_slice(&out.stdout).unwrap())
}

#[test]
fn captured_manifests_are_compared_by_check() {
    let dir = tempfile::tempdir().unwrap();
    let slice = write(dir.path(), "slice.json", &capture_smi("h100-container-3g40gb").0);
    let host = write(dir.path(), "host.json", &capture_smi("h100-mig-host").0);
    let mixed = write(dir.path(), "mixed.json", &capture_smi("h100-mixed").0);

    // The same capture on both sides: compatible, every device maps to itself.
    let (code, report) = check_json(&[&slice, &slice]);
    assert_eq!((code, &report["deviceMap"]), (Some(0), &serde_json::json!("")));

    // A 3g.40gb checkpoint against a node whose 3g GPU instance is split into compute instances.
    let (code, report) = check_json(&[&slice, &host, "--mode", "offer"]);
    assert_eq!(code, Some(1));
    let reason = report["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("mig-profile: source 3g.40gb x1, target "),
        "{reason}"
    );

    // The same 3g.40gb against a node that has one: the node offers it, the map names the pair.
    let (code, report) = check_json(&[&slice, &mixed, "--mode", "offer"]);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(
        report["deviceMap"],
        "MIG-b3061c09-2a4c-5026-a575-79f86a5bb12c=MIG-7089d0f3-293f-58c9-8f8c-5ea666eedbde"
    );

    // Against a restore container that was handed whole GPUs.
    let whole = workspace_root().join("testdata/manifests/restore-h100-whole.yaml");
    let skip = "kernel-version,driver-version";
    let (code, report) = check_json(&[&slice, whole.to_str().unwrap(), "--skip", skip]);
    assert_eq!(code, Some(1));
    let reason = report["reason"].as_str().unwrap();
    assert!(
        reason.contains("mig-partitioning: source slice x1, target whole x2"),
        "{reason}"
    );
}

#[rstest]
#[case::driver_unreachable(&["--nvidia-smi", "<replay>"], Some("no-driver"), "cannot communicate with the NVIDIA driver")]
#[case::no_nvidia_smi(&["--backend", "nvidia-smi", "--nvidia-smi", "/nonexistent/nvidia-smi"], None, "no NVIDIA driver here?")]
#[case::no_nvml(&["--backend", "nvml", "--nvml-library", "/nonexistent/libnvidia-ml.so.1"], None, "NVML is not available")]
#[case::auto_with_neither(&["--nvml-library", "/nonexistent/libnvidia-ml.so.1"], None, "no NVIDIA driver here: NVML is not available")]
#[case::timeout_zero(&["--timeout", "0"], None, "invalid value '0' for '--timeout <DURATION>': expected from 1s to 1h")]
#[case::timeout_huge(&["--timeout", "18446744073709551615"], None, "expected from 1s to 1h")]
fn no_driver_is_a_clear_error_with_exit_2(
    #[case] flags: &[&str],
    #[case] scenario: Option<&str>,
    #[case] expect: &str,
) {
    let replay = replay();
    let mut args = vec!["capture"];
    args.extend(flags.iter().map(|f| {
        if *f == "<replay>" {
            replay.to_str().unwrap()
        } else {
            f
        }
    }));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_miggate"));
    cmd.args(&args).env_remove("MIGGATE_NVIDIA_SMI");
    match scenario {
        Some(s) => cmd.env("MIGGATE_REPLAY", s),
        // No nvidia-smi anywhere on PATH.
        None => cmd.env("PATH", "/nonexistent"),
    };
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains(expect), "{err}");
    assert!(!err.contains("panicked"));
    assert!(out.stdout.is_empty());
}

#[path = "../../capture/tests/support/fake_nvml.rs"]
mod fake_nvml;

/// The fake NVML library of `capture/tests/nvml.rs`, scenario `h100_mixed` (the node the
/// replayed `h100-mixed` nvidia-smi describes).
fn fake_nvml() -> PathBuf {
    fake_nvml::fake("h100_mixed")
}

#[test]
fn both_backends_agree_on_one_node() {
    let lib = fake_nvml();
    let out = miggate(
        &[
            "capture",
            "--backend",
            "nvml",
            "--nvml-library",
            lib.to_str().unwrap(),
        ],
        None,
    );
    let (nvml_text, nvml) = captured(out);
    assert_eq!(
        nvml.captured_by.as_ref().unwrap().backend.as_deref(),
        Some("nvml")
    );
    let (smi_text, smi) = capture_smi("h100-mixed");

    // Every field a check reads is the same through both backends.
    let read = |m: &GpuManifest| {
        let n = m.nvidia.as_ref().unwrap();
        let devices: Vec<_> = n
            .devices
            .as_ref()
            .unwrap()
            .iter()
            .map(|d| {
                (
                    d.uuid.clone(),
                    d.parent_uuid.clone(),
                    d.product_name.clone(),
                    d.mig_profile.clone(),
                    d.gpu_instance_id,
                    d.compute_instance_id,
                    d.kind(),
                )
            })
            .collect();
        (n.driver_version.clone(), n.cuda_driver_version.clone(), devices)
    };
    assert_eq!(read(&nvml), read(&smi));

    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "nvml.json", &nvml_text);
    let b = write(dir.path(), "smi.json", &smi_text);
    let (code, report) = check_json(&[&a, &b]);
    assert_eq!(code, Some(0), "{report}");
    assert_eq!(report["deviceMap"], "");
}

#[test]
fn auto_prefers_a_loadable_nvml_and_falls_back_to_nvidia_smi() {
    let lib = fake_nvml();
    let out = miggate(&["capture", "--nvml-library", lib.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(0));
    let m = miggate_compat::from_str(&String::from_utf8(out.stdout).unwrap()).unwrap();
    assert_eq!(m.captured_by.unwrap().backend.as_deref(), Some("nvml"));

    let mut cmd = Command::new(env!("CARGO_BIN_EXE_miggate"));
    // Nothing names nvidia-smi: the fallback finds the stand-in on PATH.
    let path = format!("{}:/usr/bin:/bin", replay().parent().unwrap().display());
    cmd.args(["capture", "--nvml-library", "/nonexistent/libnvidia-ml.so.1"])
        .env_remove("MIGGATE_NVIDIA_SMI")
        .env("PATH", path)
        .env("MIGGATE_REPLAY", "h100-mixed");
    let out = cmd.output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m = miggate_compat::from_str(&String::from_utf8(out.stdout).unwrap()).unwrap();
    assert_eq!(m.captured_by.unwrap().backend.as_deref(), Some("nvidia-smi"));
    // Why NVML was passed over is kept.
    assert!(
        m.warnings[0].to_string().starts_with("NVML is not available ("),
        "{:?}",
        m.warnings
    );
}

/// Writes an executable nvidia-smi stand-in whose body is `case "$1" in … esac` arms.
fn stand_in(dir: &Path, arms: &str) -> PathBuf {
    let path = dir.join("nvidia-smi");
    let script = format!("#!/bin/sh\ncase \"$1\" in\n{arms}\n  *) exit 2 ;;\nesac\n");
    std::fs::write(&path, script).unwrap();
    assert!(
        Command::new("chmod")
            .arg("+x")
            .arg(&path)
            .status()
            .unwrap()
            .success()
    );
    path
}

/// A hostile nvidia-smi, as a user meets it: exit 2, nothing on stdout, and one short error line
/// on stderr with no byte that drives the terminal.
#[rstest]
#[case::escapes(
    "  -L) echo 'GPU 0: X (UUID: GPU-1)' ;;\n  --query-gpu=*) printf '\\033]0;owned\\007\\033[2J\\342\\200\\256gnp.exe\\n'; exit 1 ;;",
    "\\u{1b}]0;owned\\u{7}\\u{1b}[2J\\u{202e}gnp.exe"
)]
#[case::flood(
    "  -L) echo 'GPU 0: X (UUID: GPU-1)' ;;\n  --query-gpu=*) head -c 7000000 /dev/zero | tr '\\0' x; head -c 7000000 /dev/zero | tr '\\0' y >&2; exit 1 ;;",
    "more bytes cut]"
)]
#[case::over_the_bound(
    "  -L) head -c 9000000 /dev/zero | tr '\\0' '\\n' ;;\n  --query-gpu=*) echo '0, GPU-1, X, 00000000:18:00.0, 1, 9.0, 580.82.07, Disabled, Disabled' ;;",
    "printed more than 8 MiB on stdout"
)]
#[case::invalid_uuid(
    "  -L) printf 'GPU 0: X (UUID: GPU-1\\033[2J)\\n' ;;\n  --query-gpu=*) echo '0, GPU-1, X, 00000000:18:00.0, 1, 9.0, 580.82.07, Disabled, Disabled' ;;",
    "`nvidia-smi -L` line 1: `GPU-1\\u{1b}[2J` is not a GPU or MIG UUID"
)]
fn a_hostile_nvidia_smi_gets_a_short_escaped_error(#[case] arms: &str, #[case] expect: &str) {
    let dir = tempfile::tempdir().unwrap();
    let smi = stand_in(dir.path(), arms);
    let out = miggate(&["capture", "--nvidia-smi", smi.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains(expect), "{err}");
    assert!(err.len() < 10 * 1024, "{} bytes on stderr", err.len());
    for hazard in ['\u{1b}', '\u{7}', '\u{202e}', '\r'] {
        assert!(!err.contains(hazard), "raw {hazard:?} on stderr: {err:?}");
    }
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// `--timeout` is one deadline for the whole capture: a stand-in that rejects one more query
/// field every 2.5 s used to hold `--timeout 3` for over 20 s.
#[test]
fn timeout_bounds_the_whole_capture_and_the_error_names_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let smi = stand_in(
        dir.path(),
        "  --query-gpu=*) sleep 2.5; fields=${1#--query-gpu=}; echo \"Field \\\"${fields##*,}\\\" is not a valid field to query.\"; exit 2 ;;\n  -L) echo 'GPU 0: Tesla T4 (UUID: GPU-1)' ;;",
    );
    let start = std::time::Instant::now();
    let out = miggate(
        &["capture", "--nvidia-smi", smi.to_str().unwrap(), "--timeout", "3"],
        None,
    );
    let took = start.elapsed();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("3s deadline and was killed"), "{err}");
    assert!(err.contains("--timeout 3s bounds the whole capture"), "{err}");
    assert!(took < std::time::Duration::from_secs(6), "{took:?}");
}
