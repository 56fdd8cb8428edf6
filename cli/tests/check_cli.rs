//! `miggate check` as a user runs it: the real binary, real files, exit codes and output.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rstest::rstest;
use support::workspace_root;

fn manifests() -> PathBuf {
    workspace_root().join("testdata/manifests")
}

fn miggate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_miggate"))
        .args(args)
        .current_dir(workspace_root())
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

#[rstest]
#[case::slices_onto_same_slices("checkpoint-h100-3g40gb-x2.yaml", "restore-h100-3g40gb-x2.yaml", "exact", 0)]
#[case::slices_onto_whole_gpus("checkpoint-h100-3g40gb-x2.yaml", "restore-h100-whole.yaml", "exact", 1)]
#[case::slices_onto_a_mixed_node("checkpoint-h100-3g40gb-x2.yaml", "node-h100-8gpu-mixed.yaml", "offer", 0)]
#[case::whole_onto_one_whole_one_cut(
    "checkpoint-h100-whole-x2.json",
    "node-h100-1-whole-1-cut.yaml",
    "offer",
    1
)]
#[case::legacy_slice_unknown_shape(
    "checkpoint-a100-legacy-uuid.yaml",
    "node-a100-sxm4-40gb-7x1g5gb.yaml",
    "offer",
    0
)]
#[case::h100_onto_h200("checkpoint-h100-whole-x2.json", "node-h200-8gpu-gpu0-mig.yaml", "offer", 1)]
fn check_output_is_pinned(#[case] source: &str, #[case] target: &str, #[case] mode: &str, #[case] code: i32) {
    let s = format!("testdata/manifests/{source}");
    let t = format!("testdata/manifests/{target}");
    let name = format!(
        "{}__{}__{mode}",
        source.split('.').next().unwrap(),
        target.split('.').next().unwrap()
    );

    let out = miggate(&["check", &s, &t, "--mode", mode]);
    assert_eq!(
        out.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    insta::assert_snapshot!(format!("{name}.text"), text(&out));

    let out = miggate(&["check", &s, &t, "--mode", mode, "-o", "json"]);
    assert_eq!(out.status.code(), Some(code));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["compatible"], code == 0);
    assert_eq!(
        json["results"].as_array().unwrap().len(),
        miggate_compat::CheckName::ALL.len()
    );
    insta::assert_json_snapshot!(format!("{name}.json"), json);
}

#[test]
fn strict_refuses_the_unknown_shape_that_default_admits() {
    let s = manifests().join("checkpoint-a100-legacy-uuid.yaml");
    let t = manifests().join("node-a100-sxm4-40gb-7x1g5gb.yaml");
    let (s, t) = (s.to_str().unwrap(), t.to_str().unwrap());
    assert_eq!(
        miggate(&["check", s, t, "--mode", "offer"]).status.code(),
        Some(0)
    );
    let out = miggate(&["check", s, t, "--mode", "offer", "--strict", "-o", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let reason = json["reason"].as_str().unwrap();
    assert!(
        reason.contains("mig-profile: source unknown x1, target 1g.5gb x7"),
        "{reason}"
    );
    // Pod checks are not applicable against a node inventory, even in strict mode.
    for row in json["results"].as_array().unwrap() {
        if [
            "image-digest",
            "memory-limit",
            "cpu-limit",
            "mount",
            "gpu-request",
        ]
        .contains(&row["check"].as_str().unwrap())
        {
            assert_eq!(row["outcome"], "not-applicable", "{row}");
        }
    }
}

#[test]
fn skipping_the_refusing_checks_admits_and_reports_them_skipped() {
    let s = manifests().join("checkpoint-h100-3g40gb-x2.yaml");
    let t = manifests().join("restore-h100-whole.yaml");
    let (s, t) = (s.to_str().unwrap(), t.to_str().unwrap());
    let out = miggate(&[
        "check",
        s,
        t,
        "--skip",
        "mig-partitioning,gpu-request",
        "-o",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let skipped: std::collections::BTreeSet<&str> = json["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["outcome"] == "skipped")
        .map(|r| r["check"].as_str().unwrap())
        .collect();
    assert_eq!(skipped, ["gpu-request", "mig-partitioning"].into());
}

#[test]
fn identical_manifests_map_every_device_to_itself() {
    let s = manifests().join("checkpoint-h100-3g40gb-x2.yaml");
    let s = s.to_str().unwrap();
    let out = miggate(&["check", s, s, "-o", "json"]);
    assert_eq!(out.status.code(), Some(0));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["deviceMap"], "");
}

fn write(dir: &Path, name: &str, body: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p.to_str().unwrap().to_string()
}

#[rstest]
#[case::missing_file(None, &["cannot open source manifest", "missing.yaml"])]
#[case::invalid_json(Some(("bad.json", "{\"apiVersion\": \"miggate.io/v1alpha1\",\n \"kind\": }")), &["bad.json", "invalid manifest JSON", "line 2 column"])]
#[case::invalid_yaml(Some(("bad.yaml", "apiVersion: miggate.io/v1alpha1\nkind: GpuManifest\nnvidia: [unclosed\n")), &["bad.yaml", "invalid manifest YAML", "line "])]
#[case::a_pod(Some(("pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n")), &["pod.yaml", "apiVersion is `v1`", "not a miggate GpuManifest", "line 1"])]
#[case::empty_object(Some(("empty.json", "{}")), &["empty.json", "missing field `apiVersion`"])]
#[case::wrong_type(Some(("type.yaml", "apiVersion: miggate.io/v1alpha1\nkind: GpuManifest\nnvidia:\n  devices: 3\n")), &["type.yaml", "line 4 column 12"])]
#[case::bad_profile(Some(("prof.yaml", "apiVersion: miggate.io/v1alpha1\nkind: GpuManifest\nnvidia: {devices: [{uuid: MIG-1, migProfile: MIG 1g.10gb}]}\n")), &["prof.yaml", "`MIG 1g.10gb` is not a MIG profile", "line 3"])]
#[case::empty_file(Some(("blank.yaml", "  \n")), &["blank.yaml", "manifest is empty"])]
fn bad_input_exits_2_naming_file_and_position(#[case] file: Option<(&str, &str)>, #[case] expect: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let source = match file {
        Some((name, body)) => write(dir.path(), name, body),
        None => dir.path().join("missing.yaml").to_str().unwrap().to_string(),
    };
    let target = manifests().join("restore-h100-whole.yaml");
    let out = miggate(&["check", &source, target.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    for e in expect {
        assert!(err.contains(e), "stderr lacks {e:?}:\n{err}");
    }
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn oversized_input_is_refused_before_parsing() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.yaml");
    let mut body = String::from("apiVersion: miggate.io/v1alpha1\nkind: GpuManifest\nwarnings:\n");
    while body.len() <= 16 * 1024 * 1024 {
        body.push_str("- aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n");
    }
    std::fs::write(&big, body).unwrap();
    let out = miggate(&["check", big.to_str().unwrap(), big.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("over the 16777216-byte limit"), "{err}");
}

#[rstest]
#[case::unknown_skip(&["--skip", "gpu-cuont"], "unknown check `gpu-cuont`")]
#[case::bad_min_kernel(&["--min-kernel", "five"], "--min-kernel")]
#[case::bad_mode(&["--mode", "fuzzy"], "invalid value 'fuzzy'")]
#[case::stdin_twice(&["-", "-"], "cannot both be `-`")]
fn bad_flags_exit_2(#[case] flags: &[&str], #[case] expect: &str) {
    let s = manifests().join("checkpoint-h100-3g40gb-x2.yaml");
    let s = s.to_str().unwrap();
    let mut args = vec!["check"];
    if flags.first() == Some(&"-") {
        args.extend_from_slice(flags);
    } else {
        args.extend([s, s]);
        args.extend_from_slice(flags);
    }
    let out = miggate(&args);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains(expect), "{err}");
}

#[test]
fn standard_input_reads_as_a_manifest() {
    use std::io::Write;
    let t = manifests().join("checkpoint-h100-3g40gb-x2.yaml");
    let mut child = Command::new(env!("CARGO_BIN_EXE_miggate"))
        .args(["check", "-", t.to_str().unwrap(), "-o", "json"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&std::fs::read(&t).unwrap())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn target_scope_pod_judges_a_pod_on_its_own_facts() {
    // The restore manifest's pod facts fit; in pod scope its node facts are not compared, so
    // strict mode passes and only pod checks have outcomes.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_miggate"))
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .args([
            "check",
            "--strict",
            "--target-scope",
            "pod",
            "-o",
            "json",
            "testdata/manifests/checkpoint-h100-3g40gb-x2.yaml",
            "testdata/manifests/restore-h100-whole.yaml",
        ])
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = |name: &str| {
        report["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["check"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(row("mig-partitioning")["outcome"], "not-applicable");
    assert_eq!(row("kernel-version")["outcome"], "not-applicable");
    assert_ne!(row("gpu-request")["outcome"], "not-applicable");
    // Whole-manifest scope refuses the whole H100s; pod scope leaves that to the node checks.
    let whole = std::process::Command::new(env!("CARGO_BIN_EXE_miggate"))
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .args([
            "check",
            "testdata/manifests/checkpoint-h100-3g40gb-x2.yaml",
            "testdata/manifests/restore-h100-whole.yaml",
        ])
        .output()
        .unwrap();
    assert_eq!(whole.status.code(), Some(1));
    assert!(
        report["reason"]
            .as_str()
            .unwrap()
            .find("mig-partitioning")
            .is_none(),
        "{report}"
    );
}

/// `--min-driver` takes a driver version as people type it, compared per numeric component:
/// the node's driver is 580.65.06.
#[rstest]
#[case::major("580", 0, "pass")]
#[case::major_and_minor_above("580.82", 1, "refuse")]
#[case::the_same_build("580.65.06", 0, "pass")]
#[case::without_the_leading_zero("580.65.6", 0, "pass")]
#[case::an_older_branch("575.51", 0, "pass")]
#[case::a_newer_build("580.65.07", 1, "refuse")]
fn min_driver_takes_a_whole_version(#[case] floor: &str, #[case] code: i32, #[case] outcome: &str) {
    let node = manifests().join("node-a100-sxm4-40gb-7x1g5gb.yaml");
    let node = node.to_str().unwrap();
    let out = miggate(&["check", node, node, "--min-driver", floor, "-o", "json"]);
    assert_eq!(out.status.code(), Some(code), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["check"] == "driver-minimum")
        .unwrap()
        .clone();
    assert_eq!(row["outcome"], outcome, "{row}");
    assert_eq!(row["source"], format!("{floor} or newer"), "{row}");
    if outcome == "refuse" {
        assert_eq!(
            report["reason"],
            format!("driver-minimum: source {floor} or newer, target 580.65.06"),
            "{report}"
        );
    }
}

#[rstest]
#[case("580.82.x")]
#[case("580..82")]
#[case("v580")]
#[case("")]
fn min_driver_that_is_no_version_exits_2(#[case] floor: &str) {
    let node = manifests().join("node-a100-sxm4-40gb-7x1g5gb.yaml");
    let node = node.to_str().unwrap();
    let out = miggate(&["check", node, node, "--min-driver", floor]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains(&format!(
            "invalid value '{floor}' for '--min-driver <VERSION>': expected a driver version such as 580 or 580.82.07"
        )),
        "{err}"
    );
}
