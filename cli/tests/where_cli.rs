//! `miggate where` and `miggate convert` as a user runs them: the real binary over a store of
//! generated node inventories in a temporary directory.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::fmt::Write as _;
use std::process::{Command, Output};

use rstest::rstest;
use support::workspace_root;

use miggate_compat::H100_NAME as H100;

fn miggate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_miggate"))
        .args(args)
        .current_dir(workspace_root())
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

/// The layouts the generated nodes have, and what `where` should say of each for a checkpoint
/// on two `3g.40gb` slices of an H100 (`testdata/peer/manifest-h100-mig.yaml`).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Layout {
    /// Eight whole H100s: no slices at all.
    Whole8,
    /// One H100 cut 3g.40gb + 3g.40gb, plus whole GPUs: fits, nothing spare.
    Exact2,
    /// Two H100s cut 3g.40gb + 3g.40gb: fits, two spare.
    Roomy4,
    /// One 3g.40gb and four 1g.10gb: one slice short.
    Short,
    /// The exact layout on another kernel.
    OtherKernel,
}

impl Layout {
    fn of(i: usize) -> Layout {
        [
            Layout::Whole8,
            Layout::Exact2,
            Layout::Roomy4,
            Layout::Short,
            Layout::OtherKernel,
        ][i % 5]
    }

    /// Whether it fits, the spare count, and else the first refusing check.
    fn expected(self) -> (bool, Option<u64>, Option<&'static str>) {
        match self {
            Layout::Whole8 => (false, None, Some("gpu-model")),
            Layout::Exact2 => (true, Some(0), None),
            Layout::Roomy4 => (true, Some(2), None),
            Layout::Short => (false, None, Some("mig-profile")),
            Layout::OtherKernel => (false, None, Some("kernel-version")),
        }
    }
}

fn slice(out: &mut String, node: usize, gpu: usize, k: usize, profile: &str) {
    writeln!(
        out,
        "  - {{uuid: MIG-{node:08x}-{gpu:04x}-5000-8000-{k:012x}, parentUuid: GPU-{node:08x}-{gpu:04x}-4000-8000-000000000000, \
         productName: {H100}, migProfile: {profile}, gpuInstanceId: {}, computeInstanceId: 0}}",
        k + 1
    )
    .unwrap();
}

fn whole(out: &mut String, node: usize, gpu: usize) {
    writeln!(
        out,
        "  - {{uuid: GPU-{node:08x}-{gpu:04x}-4000-8000-000000000000, productName: {H100}}}"
    )
    .unwrap();
}

/// A node inventory of `layout`, as `miggate publish` would write it.
fn inventory(i: usize, name: &str, layout: Layout) -> String {
    let kernel = if layout == Layout::OtherKernel {
        "6.8.0-45-generic"
    } else {
        "5.15.0-1071-aws"
    };
    let mut s = format!(
        "apiVersion: miggate.io/v1alpha1\nkind: GpuManifest\nhost: {{nodeName: {name}, kernelVersion: {kernel}, cpuArch: amd64}}\n\
         nvidia:\n  driverVersion: \"580.82.07\"\n  migStrategy: mixed\n  devices:\n"
    );
    match layout {
        Layout::Whole8 => (0..8).for_each(|g| whole(&mut s, i, g)),
        Layout::Exact2 | Layout::OtherKernel => {
            slice(&mut s, i, 0, 0, "3g.40gb");
            slice(&mut s, i, 0, 1, "3g.40gb");
            (1..1 + i % 3).for_each(|g| whole(&mut s, i, g));
        }
        Layout::Roomy4 => (0..4).for_each(|k| slice(&mut s, i, k / 2, k, "3g.40gb")),
        Layout::Short => {
            slice(&mut s, i, 0, 0, "3g.40gb");
            (1..5).for_each(|k| slice(&mut s, i, 0, k, "1g.10gb"));
        }
    }
    s
}

/// A store of `n` generated nodes; returns the directory and each node's name and layout.
fn store(n: usize, only: Option<Layout>) -> (tempfile::TempDir, Vec<(String, Layout)>) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("nodes")).unwrap();
    let mut nodes = Vec::new();
    for i in 0..n {
        let layout = only.unwrap_or(Layout::of(i));
        // Names do not follow the layouts' order, so sorting is what puts them in place.
        let name = format!("gpu-{:05}", (i * 7919) % 100_000);
        std::fs::write(
            dir.path().join(format!("nodes/{name}.yaml")),
            inventory(i, &name, layout),
        )
        .unwrap();
        nodes.push((name, layout));
    }
    (dir, nodes)
}

fn store_arg(dir: &tempfile::TempDir) -> String {
    format!("dir:{}", dir.path().display())
}

#[test]
fn many_nodes_best_fit_first_refusals_named() {
    let (dir, nodes) = store(250, None);
    let out = miggate(&[
        "where",
        "testdata/peer/manifest-h100-mig.yaml",
        "--store",
        &store_arg(&dir),
        "-o",
        "json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let got = answer["nodes"].as_array().unwrap();
    assert_eq!(got.len(), nodes.len());

    // The order a user should see: fitting nodes by spare then name, refused ones by name.
    let mut want: Vec<(bool, u64, &str, Layout)> = nodes
        .iter()
        .map(|(n, l)| {
            let (fits, spare, _) = l.expected();
            (!fits, spare.unwrap_or(0), n.as_str(), *l)
        })
        .collect();
    want.sort_by(|a, b| {
        a.0.cmp(&b.0)
            .then(if a.0 {
                std::cmp::Ordering::Equal
            } else {
                a.1.cmp(&b.1)
            })
            .then(a.2.cmp(b.2))
    });
    for (row, (_, _, name, layout)) in got.iter().zip(&want) {
        let (fits, spare, refusal) = layout.expected();
        assert_eq!(row["node"], *name, "{row}");
        assert_eq!(row["compatible"], fits, "{row}");
        if fits {
            assert_eq!(row["spare"].as_u64(), spare, "{row}");
            // The devices it would use are the node's own 3g.40gb slices.
            let devices = row["devices"].as_array().unwrap();
            assert_eq!(devices.len(), 2, "{row}");
            assert!(
                devices.iter().all(|d| d.as_str().unwrap().starts_with("MIG-")),
                "{row}"
            );
        } else {
            assert_eq!(row["refusal"]["check"], refusal.unwrap(), "{row}");
            assert!(
                row["reason"].as_str().unwrap().starts_with(refusal.unwrap()),
                "{row}"
            );
        }
    }
    assert_eq!(answer["fits"], 100);
    assert!(answer["warnings"][0].as_str().unwrap().contains("Go peer"));

    // The text table says the same, one line per node, with both values of a refusal.
    let out = miggate(&[
        "where",
        "testdata/peer/manifest-h100-mig.yaml",
        "--store",
        &store_arg(&dir),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("NODE"), "{text}");
    assert!(
        lines[1].starts_with(want[0].2) && lines[1].contains("fits") && lines[1].contains("(spare 0)"),
        "{text}"
    );
    assert!(
        text.contains("kernel-version: source 5.15.0-1071-aws, target 6.8.0-45-generic"),
        "{text}"
    );
    assert!(text.contains("100 of 250 nodes fit"), "{text}");
}

#[test]
fn no_node_fits_exits_1() {
    let (dir, _) = store(20, Some(Layout::Whole8));
    let out = miggate(&[
        "where",
        "testdata/peer/manifest-h100-mig.yaml",
        "--store",
        &store_arg(&dir),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("0 of 20 nodes fit"), "{text}");
}

#[test]
fn a_bad_node_file_is_listed_and_the_others_still_decided() {
    let (dir, _) = store(5, None);
    std::fs::write(dir.path().join("nodes/broken.yaml"), "kind: [").unwrap();
    std::fs::write(dir.path().join("nodes/README.md"), "not a node").unwrap();
    let out = miggate(&[
        "where",
        "testdata/peer/manifest-h100-mig.yaml",
        "--store",
        &store_arg(&dir),
        "-o",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["nodes"].as_array().unwrap().len(), 5);
    assert_eq!(answer["problems"][0]["file"], "nodes/broken.yaml");
}

#[rstest]
#[case::missing_checkpoint(&["where", "nope.yaml", "--store", "dir:testdata/webhook-store"], "cannot open checkpoint")]
#[case::not_a_checkpoint(
    &["where", "testdata/webhook-store/nodes/gpu-node-9.yaml", "--store", "dir:testdata/webhook-store"],
    "not a checkpoint"
)]
#[case::missing_store(&["where", "testdata/peer/manifest-h100-mig.yaml", "--store", "dir:/nonexistent"], "node directory")]
#[case::kube_store(&["where", "testdata/peer/manifest-h100-mig.yaml", "--store", "kube"], "reads only a file store")]
#[case::an_admission_review_is_neither(&["convert", "testdata/admission/binding-create.json"], "not a miggate GpuManifest")]
fn bad_input_exits_2(#[case] args: &[&str], #[case] want: &str) {
    let out = miggate(args);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains(want), "{err}");
}

#[test]
fn the_webhook_store_checkpoint_and_a_peer_artifact_go_to_the_same_nodes() {
    let a = miggate(&[
        "where",
        "testdata/webhook-store/checkpoints/ml/vllm-ckpt.yaml",
        "--store",
        "dir:testdata/webhook-store",
        "-o",
        "json",
    ]);
    let b = miggate(&[
        "where",
        "testdata/peer/manifest-h100-mig.yaml",
        "--store",
        "dir:testdata/webhook-store",
        "-o",
        "json",
    ]);
    let nodes = |o: &Output| -> Vec<(String, bool)> {
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| {
                (
                    n["node"].as_str().unwrap().to_string(),
                    n["compatible"].as_bool().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(nodes(&a), nodes(&b));
}

#[rstest]
#[case::yaml("yaml")]
#[case::json("json")]
fn convert_prints_the_translation(#[case] format: &str) {
    let out = miggate(&[
        "convert",
        "testdata/peer/manifest-legacy-gpu-uuids.yaml",
        "-o",
        format,
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("apiVersion") && text.contains("GPU-aaa") && text.contains("/model-cache"),
        "{text}"
    );
    // What convert prints is a miggate manifest that check reads back.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(format!("converted.{format}"));
    std::fs::write(&file, &text).unwrap();
    let out = miggate(&[
        "check",
        file.to_str().unwrap(),
        "testdata/peer/manifest-legacy-gpu-uuids.yaml",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
