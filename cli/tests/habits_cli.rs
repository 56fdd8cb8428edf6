//! Off the documented path, as a platform engineer used to kubectl walks it: typos refused by
//! default (`--validate`), a target that compares nothing told apart from a pass (exit 3), one
//! `-o` convention, objects as `kubectl get -o yaml` prints them, and errors said once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use rstest::rstest;
use support::workspace_root;

fn miggate(args: &[&str]) -> Output {
    miggate_in(args, None)
}

/// The binary with `stdin` on standard input, when given.
fn miggate_in(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_miggate"))
        .args(args)
        .current_dir(workspace_root())
        .env("NO_COLOR", "1")
        .env_remove("KUBECONFIG")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(text) = stdin {
        child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    }
    child.wait_with_output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

const CHECKPOINT: &str = "testdata/manifests/checkpoint-h100-3g40gb-x2.yaml";
const NODE: &str = "testdata/manifests/node-h100-8gpu-mixed.yaml";
const OBJECT: &str = "testdata/kubectl/gpucheckpoint-vllm-ckpt.yaml";

/// A node with one whole H100 and one cut into slices: a checkpoint on two whole GPUs does not
/// fit it.
const CUT_NODE: &str = "testdata/manifests/node-h100-1-whole-1-cut.yaml";

/// That node inventory with `devices:` misspelt `devcies:`, in a temporary directory.
fn typo_node(dir: &Path) -> String {
    let text = std::fs::read_to_string(workspace_root().join(CUT_NODE)).unwrap();
    assert_eq!(
        text.matches("devices:").count(),
        1,
        "the fixture has one devices list"
    );
    let path = dir.join("typo-node.yaml");
    std::fs::write(&path, text.replace("devices:", "devcies:")).unwrap();
    path.to_str().unwrap().to_string()
}

/// Before: `devcies:` made the devices unknown, unknown admits, and a refusal became exit 0.
#[test]
fn a_typo_is_refused_by_default_naming_the_path_the_line_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let node = typo_node(dir.path());
    // The checkpoint on whole GPUs is refused by the node's slices: a verdict the typo hid.
    let source = "testdata/manifests/checkpoint-h100-whole-x2.json";
    let honest = miggate(&["check", source, CUT_NODE, "--mode", "offer"]);
    assert_eq!(honest.status.code(), Some(1), "{}", stderr(&honest));

    let out = miggate(&["check", source, &node, "--mode", "offer"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let message = stderr(&out).replace(&node, "typo-node.yaml");
    insta::assert_snapshot!(message, @"miggate: target manifest typo-node.yaml: unknown field `nvidia.devcies` at line 8 column 3: did you mean `devices`? (--validate=warn reads it with a warning)");
    // `--validate=strict` is the default spelled out, and kubectl's `true` means it too.
    for flag in ["--validate=strict", "--validate=true"] {
        let again = miggate(&["check", source, &node, "--mode", "offer", flag]);
        assert_eq!(again.status.code(), Some(2), "{flag}");
        assert_eq!(again.stderr, out.stderr, "{flag}");
    }
}

#[rstest]
#[case::warn("warn", true)]
#[case::ignore("ignore", false)]
#[case::kubectl_false("false", false)]
fn a_typo_reads_as_before_when_asked(#[case] validate: &str, #[case] warned: bool) {
    let dir = tempfile::tempdir().unwrap();
    let node = typo_node(dir.path());
    let flag = format!("--validate={validate}");
    let out = miggate(&[
        "check",
        "testdata/manifests/checkpoint-h100-whole-x2.json",
        &node,
        "--mode",
        "offer",
        &flag,
        "-o",
        "json",
    ]);
    // The devices are unknown, and unknown admits: what `warn` keeps, with its warning.
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let warning = "target: unknown field `nvidia.devcies` kept but not read by any check (a typo?)";
    let warnings: Vec<&str> = report["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert_eq!(warnings.contains(&warning), warned, "{warnings:?}");
}

#[test]
fn strictness_covers_convert_and_where_too() {
    let dir = tempfile::tempdir().unwrap();
    let node = typo_node(dir.path());
    let out = miggate(&["convert", &node]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("unknown field `nvidia.devcies` at line 8"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        miggate(&["convert", &node, "--validate=warn"]).status.code(),
        Some(0)
    );

    // A node file of a store: one problem listed, under its name, the others still placed.
    let store = dir.path().join("store");
    std::fs::create_dir_all(store.join("nodes")).unwrap();
    std::fs::copy(&node, store.join("nodes/typo.yaml")).unwrap();
    // Captured on the node its file names: a store refuses one node's inventory for another.
    let good = std::fs::read_to_string(workspace_root().join(CUT_NODE)).unwrap();
    std::fs::write(
        store.join("nodes/good.yaml"),
        good.replace("nodeName: gpu-node-9", "nodeName: good"),
    )
    .unwrap();
    let store_flag = format!("dir:{}", store.display());
    let out = miggate(&["where", CHECKPOINT, "--store", &store_flag]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    insta::assert_snapshot!(stdout(&out), @r"
    NODE  VERDICT  DETAIL
    good  fits     MIG-e0000000-0000-5000-8000-000000000001, MIG-e0000000-0000-5000-8000-000000000002 (spare 0)

    1 of 1 node fits
    warning: nodes/typo.yaml: unknown field `nvidia.devcies` at line 8 column 3: did you mean `devices`?
    ");
}

/// Before: `--target-scope pod` against a node inventory printed `verdict: compatible`, exit 0,
/// with every check not applicable or unknown.
#[test]
fn a_target_that_compares_nothing_is_exit_3_not_compatible() {
    let out = miggate(&["check", CHECKPOINT, NODE, "--target-scope", "pod"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let text = stdout(&out);
    let tail: Vec<&str> = text.lines().skip_while(|l| !l.starts_with("verdict")).collect();
    insta::assert_snapshot!(tail.join("\n"), @r"
    verdict:    nothing compared (no check applies to, or knows, this target)
    device map: none

    warnings
      - nothing was compared: every check is not applicable or unknown for this target (exit status 3); is it the right file, and the right --target-scope?
    ");
    let out = miggate(&["check", CHECKPOINT, NODE, "--target-scope", "pod", "-o", "json"]);
    assert_eq!(out.status.code(), Some(3));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        report["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["outcome"] == "not-applicable" || r["outcome"] == "unknown")
    );
    // The same pair in its own scope compares, and passes.
    assert_eq!(
        miggate(&["check", CHECKPOINT, NODE, "--mode", "offer"])
            .status
            .code(),
        Some(0)
    );
}

/// `-o` means one thing: a format, `table` (the default), `json` or `yaml`, the same report.
#[rstest]
#[case::check(&["check", CHECKPOINT, NODE, "--mode", "offer"])]
#[case::where_(&["where", CHECKPOINT, "--store", "dir:testdata/webhook-store"])]
fn yaml_output_is_the_json_report(#[case] args: &[&str]) {
    let with = |format: &str| {
        let mut all = args.to_vec();
        all.extend(["-o", format]);
        let out = miggate(&all);
        assert_eq!(out.status.code(), Some(0), "{format}: {}", stderr(&out));
        out
    };
    let json: serde_json::Value = serde_json::from_slice(&with("json").stdout).unwrap();
    let yaml: serde_json::Value = serde_saphyr::from_str(&stdout(&with("yaml"))).unwrap();
    assert_eq!(yaml, json);
    // `table` is the default, and `text` (its name before) still reads.
    let plain = miggate(args);
    assert_eq!(with("table").stdout, plain.stdout);
    assert_eq!(with("text").stdout, plain.stdout);
}

/// Before: `recover record -o yaml` wrote the layout into a file named `yaml`.
#[rstest]
#[case::short_flag(&["recover", "record", "-o", "yaml"])]
#[case::long_flag(&["recover", "record", "--out", "json"])]
fn a_format_name_is_not_taken_for_a_file(#[case] args: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_miggate"))
        .args(args)
        .current_dir(dir.path())
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let first = stderr(&out)
        .lines()
        .next()
        .unwrap_or_default()
        .replace("json", "yaml");
    assert_eq!(
        first,
        "error: invalid value 'yaml' for '--out <FILE>': that is an output format's name, not a \
         file: this flag names the file to write (./yaml for a file of that name)"
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no file written"
    );
}

/// `kubectl get gpucheckpoint x -o yaml | miggate check - node.yaml`: the object is read as its
/// checkpoint (before: ``kind is `GpuCheckpoint`, expected `GpuManifest` ``).
#[test]
fn objects_as_kubectl_prints_them_are_read_as_their_manifest() {
    let object = std::fs::read_to_string(workspace_root().join(OBJECT)).unwrap();
    let from_object = miggate_in(
        &["check", "-", NODE, "--mode", "offer", "-o", "json"],
        Some(&object),
    );
    let from_manifest = miggate(&["check", CHECKPOINT, NODE, "--mode", "offer", "-o", "json"]);
    assert_eq!(from_object.status.code(), Some(0), "{}", stderr(&from_object));
    assert_eq!(from_object.stdout, from_manifest.stdout);

    // A List of one, as `kubectl get gpucheckpoints -o yaml` prints it.
    let mut list = String::from("apiVersion: v1\nkind: List\nmetadata: {resourceVersion: \"\"}\nitems:\n");
    for line in object.lines().filter(|l| !l.starts_with('#')) {
        list.push_str(if list.ends_with("items:\n") { "- " } else { "  " });
        list.push_str(line);
        list.push('\n');
    }
    let from_list = miggate_in(&["convert", "-", "-o", "json"], Some(&list));
    assert_eq!(from_list.status.code(), Some(0), "{}", stderr(&from_list));
    assert_eq!(
        from_list.stdout,
        miggate(&["convert", CHECKPOINT, "-o", "json"]).stdout
    );
    let two = format!("{list}{}", &list[list.find("- ").unwrap()..]);
    let out = miggate_in(&["convert", "-"], Some(&two));
    assert_eq!(out.status.code(), Some(2));
    insta::assert_snapshot!(stderr(&out), @"miggate: input manifest from standard input: a List of 2 objects: name one (`kubectl get gpucheckpoint NAME -o yaml`)");

    // A GpuNode is a target, never a checkpoint.
    let out = miggate(&["check", "testdata/inventory/gpunode-gpu-node-7.yaml", NODE]);
    assert_eq!(out.status.code(), Some(2));
    insta::assert_snapshot!(stderr(&out), @"miggate: source manifest testdata/inventory/gpunode-gpu-node-7.yaml: it is a GpuNode (a node's inventory), not a checkpoint");
    let out = miggate(&[
        "check",
        OBJECT,
        "testdata/inventory/gpunode-gpu-node-7.yaml",
        "--mode",
        "offer",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// Before: `cannot read nope.yaml: No such file or directory (os error 2): No such file or
/// directory (os error 2)`, and `invalid digit found in string` for `--timeout 5s`.
#[rstest]
#[case::missing_file(&["check", "nope.yaml", NODE], "miggate: cannot open source manifest nope.yaml: No such file or directory")]
#[case::missing_checkpoint(&["where", "nope.yaml", "--store", "dir:testdata/webhook-store"], "miggate: cannot open checkpoint manifest nope.yaml: No such file or directory")]
#[case::duration_word(&["capture", "--timeout", "5x"], "error: invalid value '5x' for '--timeout <DURATION>': expected a duration such as 30s, 500ms or 2m (a bare number is seconds)")]
#[case::duration_bound(&["capture", "--timeout", "2h"], "error: invalid value '2h' for '--timeout <DURATION>': expected from 1s to 1h")]
fn errors_say_the_cause_once(#[case] args: &[&str], #[case] expected: &str) {
    let out = miggate(args);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(stderr(&out).lines().next().unwrap_or_default(), expected);
}

/// The `--skip` typo of `errors_say_the_cause_once`, as docs/checks.md shows it; the list of
/// known checks is the registry's, so a new check needs no edit here.
#[test]
fn skip_typo_as_docs_show() {
    let out = miggate(&["check", CHECKPOINT, CHECKPOINT, "--skip", "gpu-cuont"]);
    assert_eq!(out.status.code(), Some(2));
    let known = miggate_compat::CheckName::ALL
        .map(miggate_compat::CheckName::as_str)
        .join(", ");
    assert_eq!(
        stderr(&out).lines().next().unwrap_or_default(),
        format!(
            "error: invalid value 'gpu-cuont' for '--skip <CHECKS>': unknown check `gpu-cuont`; known checks: {known}"
        )
    );
}

#[test]
fn durations_take_units_and_bare_numbers_stay_seconds() {
    let replay = workspace_root().join("testdata/nvidia-smi/replay/nvidia-smi");
    for timeout in ["5s", "1500ms", "30", "1m"] {
        let out = Command::new(env!("CARGO_BIN_EXE_miggate"))
            .args([
                "capture",
                "--nvidia-smi",
                replay.to_str().unwrap(),
                "--timeout",
                timeout,
            ])
            .env("MIGGATE_REPLAY", "h100-mixed")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{timeout}: {}", stderr(&out));
    }
}

/// One line per cause: a YAML error without the source snippet that repeated it, a repeated
/// key in words, NVML's loader without nvml-wrapper's "a libloading error occurred".
#[rstest]
#[case::duplicate_key(
    "apiVersion: miggate.io/v1alpha1\nkind: GpuManifest\npod:\n  cpuLimit: \"4\"\n  cpuLimit: \"8\"\n",
    "miggate: source manifest m.yaml: invalid manifest YAML at pod: line 5 column 3: duplicate field `cpuLimit`"
)]
#[case::bad_variant(
    "apiVersion: miggate.io/v1alpha1\nkind: GpuManifest\nnvidia: {migStrategy: Mixed}\n",
    "miggate: source manifest m.yaml: invalid manifest YAML at nvidia.migStrategy: line 3 column 23: unknown variant `Mixed`, expected one of none, single, mixed"
)]
fn yaml_errors_are_one_line(#[case] text: &str, #[case] expected: &str) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("m.yaml"), text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_miggate"))
        .args(["check", "m.yaml", "m.yaml"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(stderr(&out), format!("{expected}\n"));
}

#[test]
fn nvml_load_failures_say_the_loader_words_once() {
    let out = miggate(&[
        "capture",
        "--backend",
        "nvml",
        "--nvml-library",
        "/nonexistent/libnvidia-ml.so.1",
    ]);
    assert_eq!(out.status.code(), Some(2));
    insta::assert_snapshot!(stderr(&out), @"miggate: capture failed: NVML is not available: cannot load or initialise /nonexistent/libnvidia-ml.so.1: /nonexistent/libnvidia-ml.so.1: cannot open shared object file: No such file or directory (name the library with --nvml-library, or use --backend nvidia-smi)");
}

/// `publish --once` prints the GpuNode a round would apply, without a cluster.
#[test]
fn publish_once_prints_the_gpunode_and_writes_nothing() {
    let replay = workspace_root().join("testdata/nvidia-smi/replay/nvidia-smi");
    let run = |format: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_miggate"))
            .args(["publish", "--node", "gpu-node-3", "--once", "-o", format])
            .args(["--nvidia-smi", replay.to_str().unwrap()])
            .env("MIGGATE_REPLAY", "h100-mixed")
            .env_remove("KUBECONFIG")
            .env("HOME", "/nonexistent")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        out
    };
    let json: serde_json::Value = serde_json::from_slice(&run("json").stdout).unwrap();
    assert_eq!(json["apiVersion"], "miggate.io/v1alpha1");
    assert_eq!(json["kind"], "GpuNode");
    assert_eq!(json["metadata"]["name"], "gpu-node-3");
    assert!(json["spec"]["observedAt"].is_string());
    assert_eq!(json["spec"]["manifest"]["host"]["nodeName"], "gpu-node-3");
    let yaml: serde_json::Value = serde_saphyr::from_str(&stdout(&run("yaml"))).unwrap();
    assert_eq!(
        yaml["spec"]["manifest"]["nvidia"],
        json["spec"]["manifest"]["nvidia"]
    );
    // What it prints is what `check` reads as a target.
    let dir = tempfile::tempdir().unwrap();
    let node = dir.path().join("gpunode.yaml");
    std::fs::write(&node, run("yaml").stdout).unwrap();
    let out = miggate(&["convert", node.to_str().unwrap(), "-o", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // `-o` without `--once` is a usage error: the loop prints nothing.
    assert_eq!(
        miggate(&["publish", "--node", "n", "-o", "json"]).status.code(),
        Some(2)
    );
}

/// Before: `Failed to infer configuration: failed to infer config: in-cluster: (…)`.
#[rstest]
#[case::no_cluster(&[], "miggate: no cluster: <home>/.kube/config does not exist and this is not a pod; set KUBECONFIG (or --kubeconfig), or run in a pod")]
#[case::missing_kubeconfig(&["--kubeconfig", "/nonexistent/kubeconfig"], "miggate: cannot read kubeconfig /nonexistent/kubeconfig: No such file or directory")]
#[case::missing_context(&["--kubeconfig", "<kc>", "--context", "nope"], "miggate: no context `nope` in the kubeconfig <kc>")]
fn cluster_errors_are_in_kubectl_words(#[case] flags: &[&str], #[case] expected: &str) {
    let dir = tempfile::tempdir().unwrap();
    let kc = support::unreachable_kubeconfig(dir.path());
    let kc = kc.to_str().unwrap();
    let flags: Vec<&str> = flags.iter().map(|f| if *f == "<kc>" { kc } else { f }).collect();
    let home = dir.path().join("home");
    let expected = expected
        .replace("<kc>", kc)
        .replace("<home>", home.to_str().unwrap());
    for command in [
        &["publish", "--node", "n", "--nvidia-smi", "/nonexistent"][..],
        &["doctor"][..],
        &[
            "webhook",
            "--store",
            "kube",
            "--tls-cert",
            "c.pem",
            "--tls-key",
            "k.pem",
        ][..],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_miggate"))
            .args(command)
            .args(&flags)
            .env_remove("KUBECONFIG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env("HOME", &home)
            .env("MIGGATE_LOG", "off")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{command:?}");
        assert_eq!(stderr(&out).trim_end(), expected, "{command:?}");
    }
}

/// `kubectl miggate …` runs the binary as `kubectl-miggate`: usage says what was typed.
#[test]
fn the_binary_works_as_a_kubectl_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("kubectl-miggate");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_miggate"), &plugin).unwrap();
    let out = Command::new(&plugin)
        .args(["check", "--help"])
        .current_dir(workspace_root())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stdout(&out).contains("Usage: kubectl miggate check [OPTIONS] <SOURCE> [TARGET]"),
        "{}",
        stdout(&out)
    );
    let out = Command::new(&plugin)
        .args(["check", CHECKPOINT, NODE, "--mode", "offer"])
        .current_dir(workspace_root())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        out.stdout,
        miggate(&["check", CHECKPOINT, NODE, "--mode", "offer"]).stdout
    );
}

/// `-o wide`: the table with more to show.
#[test]
fn wide_output_shows_what_the_table_cuts() {
    let digest = "sha256:9f2c4be5a0e7f4b1c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0";
    let restore = "testdata/manifests/restore-h100-3g40gb-x2.yaml";
    let table = stdout(&miggate(&["check", CHECKPOINT, restore]));
    let wide = miggate(&["check", CHECKPOINT, restore, "-o", "wide"]);
    assert_eq!(wide.status.code(), Some(0));
    assert!(!table.contains(digest), "the table cuts the digest");
    assert!(stdout(&wide).contains(digest), "{}", stdout(&wide));

    let out = miggate(&[
        "where",
        CHECKPOINT,
        "--store",
        "dir:testdata/webhook-store",
        "-o",
        "wide",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let fits = text.lines().find(|l| l.starts_with("gpu-node-7")).unwrap();
    assert!(
        fits.ends_with("; device map: MIG-7089d0f3-293f-58c9-8f8c-5ea666eedbde=MIG-2f1e0d9c-8b7a-5c6d-9e4f-1a2b3c4d5e6f,MIG-56c30729-3b1e-5f2a-8c4d-7e6f5a4b3c2d=MIG-a1b2c3d4-e5f6-5a7b-8c9d-0e1f2a3b4c5d"),
        "{fits}"
    );
    // Every refusal, where the table names the first.
    let refused = text.lines().find(|l| l.starts_with("a100-node-2")).unwrap();
    assert_eq!(refused.matches("source ").count(), 4, "{refused}");
}
