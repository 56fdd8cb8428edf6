//! `miggate recover` end to end: the real binary against a temp `--root` tree, with stand-in
//! `nvidia-smi`, `sriov-manage` and `systemctl` scripts (testdata/recovery/standins/) that change
//! that tree.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use support::testdata;

const PF: &str = "0000:18:00.0";

const LAYOUT: &str = r#"apiVersion: miggate.io/v1alpha1
kind: RecoveryLayout
fabricMode: 2
gpus:
- bus: "0000:18:00.0"
  uuid: GPU-b2acda36-db78-a209-f9ef-d07b4336c449
  migMode: enabled
  gpuInstances:
  - {placement: "0:2", profileId: 14, profile: 2g.35gb, computeInstances: [{profileId: 1, profile: 2g.35gb}]}
  - {placement: "2:1", profileId: 19, profile: 1g.18gb, computeInstances: [{profileId: 0, profile: 1g.18gb}]}
  sriovNumVfs: 4
  vfs:
  - {index: 0, vgpuTypeId: 1415, vgpuTypeName: NVIDIA H200X-2-35C}
  - {index: 1, vgpuTypeId: 1414, vgpuTypeName: NVIDIA H200X-1-18C}
"#;

struct Tree {
    _dir: tempfile::TempDir,
    root: PathBuf,
    bin: PathBuf,
}

/// A host just after a reboot: driver loaded, MIG off, no VFs, persistenced's socket there, the
/// fabric manager active in `fabric_mode`.
fn tree(fabric_mode: u32) -> Tree {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let bin = dir.path().join("bin");
    fs::create_dir_all(&bin).unwrap();
    let standins = testdata("recovery/standins");
    for name in ["nvidia-smi", "sriov-manage", "systemctl"] {
        let to = bin.join(name);
        fs::copy(standins.join(name), &to).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&to, fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
    let pf = root.join("sys/bus/pci/devices").join(PF);
    fs::create_dir_all(&pf).unwrap();
    fs::write(pf.join("sriov_totalvfs"), "4\n").unwrap();
    fs::write(pf.join("sriov_numvfs"), "0\n").unwrap();
    fs::create_dir_all(root.join("proc")).unwrap();
    fs::write(root.join("proc/modules"), "nvidia 12345 0 - Live 0x0\n").unwrap();
    fs::create_dir_all(root.join("run/nvidia-persistenced")).unwrap();
    fs::write(root.join("run/nvidia-persistenced/socket"), "").unwrap();
    fs::create_dir_all(root.join("usr/share/nvidia/nvswitch")).unwrap();
    fs::write(
        root.join("usr/share/nvidia/nvswitch/fabricmanager.cfg"),
        format!("# fabric manager\nFABRIC_MODE={fabric_mode}\n"),
    )
    .unwrap();
    let gpu = root.join("fake/gpus").join(PF);
    fs::create_dir_all(&gpu).unwrap();
    fs::write(gpu.join("uuid"), "GPU-b2acda36-db78-a209-f9ef-d07b4336c449").unwrap();
    fs::write(gpu.join("mig"), "Disabled\n").unwrap();
    fs::write(gpu.join("gis"), "").unwrap();
    fs::write(gpu.join("cis"), "").unwrap();
    fs::write(gpu.join("next_gi"), "1\n").unwrap();
    fs::create_dir_all(root.join("fake/units")).unwrap();
    fs::write(root.join("fake/units/nvidia-fabricmanager.service"), "").unwrap();
    fs::write(root.join("layout.yaml"), LAYOUT).unwrap();
    Tree { _dir: dir, root, bin }
}

impl Tree {
    fn miggate(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_miggate"));
        cmd.arg("recover")
            .args(args)
            .arg("--root")
            .arg(&self.root)
            .arg("--nvidia-smi")
            .arg(self.bin.join("nvidia-smi"))
            .arg("--sriov-manage")
            .arg(self.bin.join("sriov-manage"))
            .arg("--systemctl")
            .arg(self.bin.join("systemctl"))
            .env("MIGGATE_FAKE_ROOT", &self.root)
            .env_remove("MIGGATE_NVIDIA_SMI");
        cmd.output().unwrap()
    }

    fn layout(&self) -> String {
        self.root.join("layout.yaml").display().to_string()
    }

    fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.root.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    fn vf_type(&self, n: u32) -> String {
        self.read(&format!(
            "sys/bus/pci/devices/{PF}/virtfn{n}/nvidia/current_vgpu_type"
        ))
        .trim()
        .to_string()
    }

    fn mutating_calls(&self) -> Vec<String> {
        fs::read_to_string(self.root.join("fake/calls"))
            .unwrap_or_default()
            .lines()
            .filter(|l| {
                [
                    " -mig ",
                    " -r ",
                    " -pm ",
                    "-cgi",
                    "-cci",
                    "-dci",
                    "-dgi",
                    "sriov-manage",
                    "systemctl stop",
                    "systemctl start",
                    "reboot",
                ]
                .iter()
                .any(|m| l.contains(m))
            })
            .map(String::from)
            .collect()
    }
}

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

#[test]
fn apply_rebuilds_the_node_then_plan_and_a_rerun_find_nothing_to_do() {
    let t = tree(2);
    let layout = t.layout();

    let plan = t.miggate(&["plan", "--layout", &layout]);
    let stdout = text(&plan.stdout);
    assert_eq!(plan.status.code(), Some(3), "{stdout}{}", text(&plan.stderr));
    assert!(
        stdout.contains("MIG disabled -> enabled, VFs 0 -> 4, vGPUs 0 -> 2"),
        "{stdout}"
    );
    assert!(stdout.contains("  after   A  A  B  .  .  .  .  ."), "{stdout}");
    assert!(stdout.contains("sriov-manage -e"), "{stdout}");
    assert!(
        t.mutating_calls().is_empty(),
        "plan changed the node: {:?}",
        t.mutating_calls()
    );

    let apply = t.miggate(&["apply", "--layout", &layout]);
    let stdout = text(&apply.stdout);
    assert_eq!(apply.status.code(), Some(0), "{stdout}{}", text(&apply.stderr));
    assert!(stdout.contains("ready: recovered and verified"), "{stdout}");
    assert!(
        stdout.contains("] vgpu-type: ok ("),
        "progress lines carry timings: {stdout}"
    );

    // Final sysfs contents.
    assert_eq!(
        t.read(&format!("sys/bus/pci/devices/{PF}/sriov_numvfs")).trim(),
        "4"
    );
    assert_eq!(
        [t.vf_type(0), t.vf_type(1), t.vf_type(2), t.vf_type(3)],
        ["1415", "1414", "0", "0"]
    );
    assert_eq!(t.read(&format!("fake/gpus/{PF}/gis")), "1 14 0 2\n2 19 2 1\n");
    // The gate.
    assert!(t.root.join("run/miggate/ready").exists());
    let state: serde_json::Value = serde_json::from_str(&t.read("run/miggate/recovery.json")).unwrap();
    assert_eq!(state["state"], "ready");
    assert!(state["updatedAt"].as_str().unwrap().ends_with('Z'));
    // The forced order.
    let calls = t.mutating_calls();
    assert_eq!(
        calls,
        [
            format!("nvidia-smi -i {PF} -mig 1"),
            format!("sriov-manage -e {PF}"),
            format!("nvidia-smi mig -i {PF} -cgi 14:0"),
            format!("nvidia-smi mig -i {PF} -gi 1 -cci 1"),
            format!("nvidia-smi mig -i {PF} -cgi 19:2"),
            format!("nvidia-smi mig -i {PF} -gi 2 -cci 0"),
        ]
    );

    let after = t.miggate(&["plan", "--layout", &layout]);
    assert_eq!(after.status.code(), Some(0), "{}", text(&after.stdout));
    assert!(text(&after.stdout).contains("nothing to do"));

    let rerun = t.miggate(&["apply", "--layout", &layout]);
    assert_eq!(rerun.status.code(), Some(0));
    assert!(text(&rerun.stdout).contains("already matched the layout"));
    assert_eq!(
        t.mutating_calls(),
        calls,
        "a rerun on a recovered node changed something"
    );
}

#[test]
fn record_then_plan_says_nothing_to_do_and_the_layout_round_trips() {
    let t = tree(2);
    let apply = t.miggate(&["apply", "--layout", &t.layout()]);
    assert_eq!(apply.status.code(), Some(0), "{}", text(&apply.stderr));
    let recorded = t.root.join("recorded.yaml");
    let rec = t.miggate(&["record", "-o", recorded.to_str().unwrap()]);
    assert_eq!(rec.status.code(), Some(0), "{}", text(&rec.stderr));
    let plan = t.miggate(&["plan", "--layout", recorded.to_str().unwrap()]);
    assert_eq!(plan.status.code(), Some(0), "{}", text(&plan.stdout));

    // What was recorded is what was applied (recordedAt aside), names included.
    let read = |s: &str| {
        let mut v: serde_json::Value = serde_saphyr::from_str(s).unwrap();
        v.as_object_mut().unwrap().remove("recordedAt");
        v.as_object_mut().unwrap().remove("manifest");
        v
    };
    let text_recorded = fs::read_to_string(&recorded).unwrap();
    assert_eq!(read(&text_recorded), read(LAYOUT), "{text_recorded}");
    // Recording to stdout gives the same document.
    let stdout = t.miggate(&["record"]);
    assert_eq!(read(&text(&stdout.stdout)), read(&text_recorded));
}

/// The tree as after a reboot: MIG off, no instances, no VFs.
fn reboot(t: &Tree) {
    let gpu = t.root.join("fake/gpus").join(PF);
    fs::write(gpu.join("mig"), "Disabled\n").unwrap();
    fs::write(gpu.join("gis"), "").unwrap();
    fs::write(gpu.join("cis"), "").unwrap();
    let devices = t.root.join("sys/bus/pci/devices");
    for entry in fs::read_dir(devices.join(PF)).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap().to_string_lossy().starts_with("virtfn") {
            let vf = fs::read_link(&path).unwrap();
            fs::remove_dir_all(devices.join(PF).join(&vf)).unwrap();
            fs::remove_file(&path).unwrap();
        }
    }
    fs::write(devices.join(PF).join("sriov_numvfs"), "0\n").unwrap();
    fs::remove_dir_all(t.root.join("run/miggate")).unwrap();
}

#[test]
fn a_recorded_manifest_is_checked_in_exact_mode_after_the_reboot() {
    let t = tree(2);
    assert_eq!(
        t.miggate(&["apply", "--layout", &t.layout()]).status.code(),
        Some(0)
    );
    let recorded = t.root.join("recorded.yaml");
    let rec = t.miggate(&["record", "-o", recorded.to_str().unwrap()]);
    assert_eq!(rec.status.code(), Some(0), "{}", text(&rec.stderr));
    assert!(!text(&rec.stderr).contains("warning"), "{}", text(&rec.stderr));
    let doc: serde_json::Value = serde_saphyr::from_str(&fs::read_to_string(&recorded).unwrap()).unwrap();
    assert_eq!(doc["manifest"]["nvidia"]["driverVersion"], "580.82.07");
    assert_eq!(doc["manifest"]["nvidia"]["devices"][0]["migProfile"], "2g.35gb");

    reboot(&t);
    let apply = t.miggate(&["apply", "--layout", recorded.to_str().unwrap()]);
    assert_eq!(
        apply.status.code(),
        Some(0),
        "{}{}",
        text(&apply.stdout),
        text(&apply.stderr)
    );
    assert!(
        text(&apply.stdout).contains("compat checks pass (exact mode)"),
        "{}",
        text(&apply.stdout)
    );
    assert_eq!([t.vf_type(0), t.vf_type(1)], ["1415", "1414"]);

    // A driver update across the reboot: the layout comes back, the checkpoints would not restore.
    reboot(&t);
    fs::write(t.root.join("fake/driver"), "580.95.05").unwrap();
    let apply = t.miggate(&["apply", "--layout", recorded.to_str().unwrap()]);
    assert_eq!(apply.status.code(), Some(1), "{}", text(&apply.stdout));
    assert!(
        text(&apply.stderr).contains("driver-version: source 580.82.07, target 580.95.05"),
        "{}",
        text(&apply.stderr)
    );
    let state: serde_json::Value = serde_json::from_str(&t.read("run/miggate/recovery.json")).unwrap();
    assert_eq!(
        (state["state"].as_str(), state["step"].as_str()),
        (Some("failed"), Some("verify"))
    );
    assert!(!t.root.join("run/miggate/ready").exists());
}

/// `--root` prefixes every host path, `/proc` included: the kernel release recorded and checked
/// is the root's, not that of the machine running the test.
#[test]
fn the_kernel_release_is_read_under_the_root() {
    let t = tree(2);
    fs::create_dir_all(t.root.join("proc/sys/kernel")).unwrap();
    fs::write(t.root.join("proc/sys/kernel/osrelease"), "6.8.0-1012-miggate\n").unwrap();
    assert_eq!(
        t.miggate(&["apply", "--layout", &t.layout()]).status.code(),
        Some(0)
    );
    let recorded = t.root.join("recorded.yaml");
    let rec = t.miggate(&["record", "-o", recorded.to_str().unwrap()]);
    assert_eq!(rec.status.code(), Some(0), "{}", text(&rec.stderr));
    let doc: serde_json::Value = serde_saphyr::from_str(&fs::read_to_string(&recorded).unwrap()).unwrap();
    assert_eq!(doc["manifest"]["host"]["kernelVersion"], "6.8.0-1012-miggate");

    // A kernel update across the reboot (under the root) keeps the gate closed.
    reboot(&t);
    fs::write(t.root.join("proc/sys/kernel/osrelease"), "6.8.0-1013-miggate\n").unwrap();
    let apply = t.miggate(&["apply", "--layout", recorded.to_str().unwrap()]);
    assert_eq!(apply.status.code(), Some(1), "{}", text(&apply.stdout));
    assert!(
        text(&apply.stderr).contains("6.8.0-1013-miggate"),
        "{}",
        text(&apply.stderr)
    );
    assert!(!t.root.join("run/miggate/ready").exists());
}

#[test]
fn a_fabric_manager_in_the_wrong_mode_fails_with_the_gate_closed() {
    let t = tree(0);
    let apply = t.miggate(&["apply", "--layout", &t.layout()]);
    assert_eq!(apply.status.code(), Some(1), "{}", text(&apply.stdout));
    assert!(
        text(&apply.stderr).contains("FABRIC_MODE=0 but the layout was recorded with 2"),
        "{}",
        text(&apply.stderr)
    );
    assert!(!t.root.join("run/miggate/ready").exists());
    let state: serde_json::Value = serde_json::from_str(&t.read("run/miggate/recovery.json")).unwrap();
    assert_eq!(state["state"], "failed");
    assert_eq!(state["step"], "wait-fabric");
    assert!(t.mutating_calls().is_empty());
}

#[test]
fn a_bad_layout_is_exit_2_naming_the_file_and_field() {
    let t = tree(2);
    fs::write(
        t.root.join("bad.yaml"),
        LAYOUT.replace("sriovNumVfs", "sriovNumVFs"),
    )
    .unwrap();
    let bad = t.root.join("bad.yaml").display().to_string();
    for cmd in ["plan", "apply"] {
        let out = t.miggate(&[cmd, "--layout", &bad]);
        assert_eq!(out.status.code(), Some(2));
        let err = text(&out.stderr);
        assert!(err.contains("bad.yaml") && err.contains("sriovNumVFs"), "{err}");
    }
}

#[test]
fn plan_with_a_missing_gpu_is_exit_2() {
    let t = tree(2);
    fs::write(
        t.root.join("other.yaml"),
        LAYOUT.replace("0000:18:00.0", "0000:99:00.0"),
    )
    .unwrap();
    let out = t.miggate(&["plan", "--layout", t.root.join("other.yaml").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("GPU 0000:99:00.0 of the layout is not on this node"),
        "{}",
        text(&out.stderr)
    );
    // A blocked plan never claims the node matches.
    assert!(
        !text(&out.stdout).contains("nothing to do"),
        "{}",
        text(&out.stdout)
    );
    assert!(text(&out.stdout).contains("blockers"), "{}", text(&out.stdout));
}

#[test]
fn plan_output_escapes_what_came_from_the_layout() {
    let t = tree(2);
    let hostile = LAYOUT.replace(
        "profile: 2g.35gb, computeInstances",
        "profile: \"2g.35gb\\e[2J\\u202e\", computeInstances",
    );
    fs::write(t.root.join("hostile.yaml"), hostile).unwrap();
    let out = t.miggate(&["plan", "--layout", t.root.join("hostile.yaml").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        !stdout.contains('\u{1b}') && !stdout.contains('\u{202e}'),
        "{stdout:?}"
    );
    assert!(stdout.contains("2g.35gb\\u{1b}[2J"), "{stdout}");
}

#[test]
fn reset_unsupported_reboots_once_through_systemctl_then_fails_on_the_next_boot() {
    let t = tree(2);
    fs::write(t.root.join("fake/ampere"), "").unwrap();
    fs::write(t.root.join("fake/no_reset"), "").unwrap();
    let first = t.miggate(&["apply", "--layout", &t.layout()]);
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}{}",
        text(&first.stdout),
        text(&first.stderr)
    );
    assert!(
        text(&first.stdout).contains("rebooting once"),
        "{}",
        text(&first.stdout)
    );
    assert!(
        t.root.join("fake/rebooted").exists(),
        "systemctl reboot was not asked for"
    );
    let journal: serde_json::Value =
        serde_json::from_str(&t.read("var/lib/miggate/recovery-journal.json")).unwrap();
    assert_eq!(journal["rebootAttempted"], true);
    assert!(!t.root.join("run/miggate/ready").exists());

    // The reboot: /run is gone, the MIG mode did not stick, /var/lib stays.
    fs::remove_file(t.root.join("fake/rebooted")).unwrap();
    fs::remove_file(t.root.join("fake/gpus").join(PF).join("mig_pending")).unwrap();
    fs::remove_dir_all(t.root.join("run/miggate")).unwrap();
    let second = t.miggate(&["apply", "--layout", &t.layout()]);
    assert_eq!(second.status.code(), Some(1), "{}", text(&second.stdout));
    assert!(
        text(&second.stderr).contains("did not take effect after rebooting"),
        "{}",
        text(&second.stderr)
    );
    assert!(
        text(&second.stderr).contains("Resetting GPU 00000000:18:00.0 is not supported."),
        "{}",
        text(&second.stderr)
    );
    assert!(!t.root.join("fake/rebooted").exists(), "a second reboot");
    let state: serde_json::Value = serde_json::from_str(&t.read("run/miggate/recovery.json")).unwrap();
    assert_eq!(
        (state["state"].as_str(), state["step"].as_str()),
        (Some("failed"), Some("reset"))
    );
}

/// A unit file's `Key=value` lines, continuation lines joined.
fn unit_lines(name: &str) -> Vec<(String, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy/systemd")
        .join(name);
    let text = fs::read_to_string(&path).unwrap().replace("\\\n", " ");
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// The shipped units: their `ExecStart` flags exist, kubelet never requires recovery (a failed
/// recovery must not keep the node's kubelet, and with it the publisher, down), and the GPU
/// Operator unit, whose driver kubelet starts, is never ordered before kubelet (it would wait
/// for a driver that cannot start until it ends).
#[rstest::rstest]
#[case("miggate-recover.service", true)]
#[case("miggate-recover-operator.service", false)]
fn the_systemd_units_use_real_flags_and_never_hold_kubelet_down(
    #[case] name: &str,
    #[case] before_kubelet: bool,
) {
    let lines = unit_lines(name);
    let values = |key: &str| -> Vec<&str> {
        lines
            .iter()
            .filter(|(k, _)| k == key)
            .flat_map(|(_, v)| v.split_whitespace())
            .collect()
    };
    assert!(!values("RequiredBy").contains(&"kubelet.service"), "{name}");
    assert_eq!(
        values("Before").contains(&"kubelet.service"),
        before_kubelet,
        "{name}"
    );
    if !before_kubelet {
        assert!(values("After").contains(&"kubelet.service"), "{name}");
    }
    let exec: Vec<&str> = values("ExecStart");
    assert_eq!(exec.first(), Some(&"/usr/local/bin/miggate"), "{name}");
    let out = Command::new(env!("CARGO_BIN_EXE_miggate"))
        .args(&exec[1..])
        .arg("--help")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{name}: {}", text(&out.stderr));
}

#[path = "../../capture/tests/support/fake_nvml.rs"]
mod fake_nvml;

/// `--gpu-control nvml` with the fake NVML of the stand-in tree's H200 (MIG on).
fn nvml_args(lib: &Path) -> Vec<String> {
    vec![
        "--gpu-control".into(),
        "nvml".into(),
        "--nvml-lib".into(),
        lib.display().to_string(),
    ]
}

fn with(first: &[&str], extra: &[String]) -> Vec<String> {
    first
        .iter()
        .map(|s| s.to_string())
        .chain(extra.iter().cloned())
        .collect()
}

/// NVML gives the GPU list and MIG mode; the instances are still read through nvidia-smi.
#[test]
fn plan_through_nvml_reads_the_mode_from_nvml_and_the_instances_from_nvidia_smi() {
    let t = tree(2);
    let lib = fake_nvml::fake("recover_e2e");
    // MIG on (as the fake NVML says), no instances yet.
    fs::write(t.root.join("fake/gpus").join(PF).join("mig"), "Enabled\n").unwrap();
    let args = with(&["plan", "--layout", &t.layout()], &nvml_args(&lib));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let plan = t.miggate(&args);
    let stdout = text(&plan.stdout);
    assert_eq!(plan.status.code(), Some(3), "{stdout}{}", text(&plan.stderr));
    assert!(
        stdout.contains(&format!("{PF}  MIG enabled -> enabled, VFs 0 -> 4, vGPUs 0 -> 2")),
        "MIG is already on by NVML's reading: {stdout}"
    );
    assert!(!stdout.contains("set MIG mode"), "{stdout}");
    assert!(stdout.contains("create GPU instances"), "{stdout}");
    let calls = fs::read_to_string(t.root.join("fake/calls")).unwrap();
    assert!(
        calls.contains(&format!("nvidia-smi mig -lgi -i {PF}")),
        "instances are nvidia-smi's: {calls}"
    );
    assert!(!calls.contains("--query-gpu"), "the GPU list is NVML's: {calls}");
    assert!(t.mutating_calls().is_empty(), "{:?}", t.mutating_calls());
}

/// A node recovered (through the stand-ins) reads as recovered through NVML too.
#[test]
fn a_recovered_node_is_nothing_to_do_through_nvml() {
    let t = tree(2);
    let apply = t.miggate(&["apply", "--layout", &t.layout()]);
    assert_eq!(apply.status.code(), Some(0), "{}", text(&apply.stderr));
    let lib = fake_nvml::fake("recover_e2e");
    let args = with(&["plan", "--layout", &t.layout()], &nvml_args(&lib));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let plan = t.miggate(&args);
    let stdout = text(&plan.stdout);
    assert_eq!(plan.status.code(), Some(0), "{stdout}{}", text(&plan.stderr));
    assert!(stdout.contains("nothing to do"), "{stdout}");
}

#[test]
fn an_nvml_that_cannot_be_loaded_is_exit_2_naming_the_library() {
    let t = tree(2);
    let missing = t.root.join("no/libnvidia-ml.so.1");
    for sub in [&["plan", "--layout", &t.layout()][..], &["record"][..]] {
        let args = with(sub, &nvml_args(&missing));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = t.miggate(&args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.starts_with(
                "miggate: cannot control the GPUs through NVML (name the library with --nvml-library, or use --gpu-control nvidia-smi): cannot load or initialise NVML from "
            ),
            "{stderr}"
        );
        assert!(stderr.contains(&missing.display().to_string()), "{stderr}");
    }
    assert!(t.mutating_calls().is_empty());
}

/// `record --mig-managed-by dra-dynamic-mig`: the layout says the DRA driver's DynamicMIG
/// makes the instances, and after a reboot `apply` sets MIG mode and VFs but creates none.
#[test]
fn a_layout_managed_by_dynamic_mig_never_recreates_instances() {
    let t = tree(2);
    assert_eq!(
        t.miggate(&["apply", "--layout", &t.layout()]).status.code(),
        Some(0)
    );
    let recorded = t.root.join("recorded.yaml");
    let rec = t.miggate(&[
        "record",
        "--mig-managed-by",
        "dra-dynamic-mig",
        "-o",
        recorded.to_str().unwrap(),
    ]);
    assert_eq!(rec.status.code(), Some(0), "{}", text(&rec.stderr));
    let doc: serde_json::Value = serde_saphyr::from_str(&fs::read_to_string(&recorded).unwrap()).unwrap();
    assert_eq!(doc["migManagedBy"], "dra-dynamic-mig");

    reboot(&t);
    let plan = t.miggate(&["plan", "--layout", recorded.to_str().unwrap()]);
    let said = text(&plan.stdout);
    assert!(said.contains("recovery leaves them alone"), "{said}");
    assert!(!said.contains("create GPU instances"), "{said}");
    let apply = t.miggate(&["apply", "--layout", recorded.to_str().unwrap()]);
    let out = format!("{}{}", text(&apply.stdout), text(&apply.stderr));
    assert!(!out.contains("create-instances"), "{out}");
    assert_eq!(apply.status.code(), Some(0), "{out}");
    let gis = fs::read_to_string(t.root.join("fake/gpus").join(PF).join("gis")).unwrap();
    assert!(gis.trim().is_empty(), "instances were created: {gis}");

    let bad = t.miggate(&["record", "--mig-managed-by", "mig-manager"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        text(&bad.stderr).contains("expected dra-dynamic-mig"),
        "{}",
        text(&bad.stderr)
    );
}
