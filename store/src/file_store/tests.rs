//! The file store read from directories made for each test: what it keeps, what it lists as
//! unusable and why, and what a re-read picks up.
#![allow(clippy::unwrap_used)]

use super::*;

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

const NODE: &str = "apiVersion: miggate.io/v1alpha1\nkind: GpuManifest\nhost: {cpuArch: amd64}\n";

#[test]
fn loads_reports_and_reloads() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "nodes/n1.yaml", NODE);
    write(root, "nodes/bad.yaml", "kind: [");
    write(root, "nodes/README.md", "ignored");
    write(
        root,
        "checkpoints/ns/ck.json",
        r#"{"apiVersion": "miggate.io/v1alpha1", "kind": "GpuCheckpoint", "metadata": {"name": "ck"}, "spec": {"containerName": "w", "manifest": {}}}"#,
    );
    write(
        root,
        "checkpoints/ns/wrong.yaml",
        "apiVersion: miggate.io/v1alpha1\nkind: GpuNode\nspec: {manifest: {}}\n",
    );
    let store = FileStore::open(root).unwrap();
    let s = store.snapshot();
    assert!(s.node("n1").is_some());
    assert_eq!(
        s.checkpoint("ns", "ck").unwrap().container_name.as_deref(),
        Some("w")
    );
    let files: Vec<&str> = s.problems.iter().map(|p| p.file.as_str()).collect();
    assert_eq!(files, ["checkpoints/ns/wrong.yaml", "nodes/bad.yaml"]);
    assert!(
        s.problems[0].error.contains("a GpuNode where a GpuCheckpoint"),
        "{:?}",
        s.problems
    );

    assert!(!store.refresh().unwrap(), "nothing changed");
    write(root, "nodes/n2.yaml", NODE);
    std::fs::remove_file(root.join("nodes/bad.yaml")).unwrap();
    assert!(store.refresh().unwrap());
    let s2 = store.snapshot();
    assert!(s2.node("n2").is_some());
    assert_eq!(s2.problems.len(), 1);
    // The old snapshot is untouched for whoever still holds it.
    assert!(s.node("n2").is_none());
}

#[test]
fn a_node_file_that_cannot_be_used_is_named_when_its_node_is_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "nodes/n1.yaml",
        "apiVersion: miggate.io/v1alpha1\nkind: GpuManifest\nhost: {nodeName: n2, cpuArch: amd64}\n",
    );
    write(root, "nodes/n3.yaml", "kind: [");
    let store = FileStore::open(root).unwrap();
    let s = store.snapshot();
    let text = |node: &str| -> Vec<String> {
        let why = s.inventory(node).unwrap_err().passed_over;
        assert!(
            matches!(&why[..], [PassedOver::StoreFile { file, .. }] if *file == format!("nodes/{node}.yaml")),
            "{why:?}"
        );
        why.iter().map(ToString::to_string).collect()
    };
    assert_eq!(
        text("n1"),
        [
            "store file nodes/n1.yaml cannot be used: it holds the inventory of node `n2` (host.nodeName), not of `n1`"
        ]
    );
    let why = text("n3");
    assert!(
        why[0].starts_with("store file nodes/n3.yaml cannot be used: "),
        "{why:?}"
    );
    assert!(s.inventory("n9").unwrap_err().passed_over.is_empty());
    assert_eq!(s.problems.len(), 2);

    // A restore pod naming n1 is refused with that reason, not "no GpuNode".
    let testdata = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata");
    let ckpt = std::fs::read_to_string(testdata.join("webhook-store/checkpoints/ml/vllm-ckpt.yaml")).unwrap();
    write(root, "checkpoints/ml/vllm-ckpt.yaml", &ckpt);
    store.refresh().unwrap();
    let review =
        std::fs::read_to_string(testdata.join("admission/pod-create-restore-node-allowed.json")).unwrap();
    let mut review: serde_json::Value = serde_json::from_str(&review).unwrap();
    review["request"]["object"]["spec"]["nodeName"] = "n1".into();
    let review: kube::core::admission::AdmissionReview<kube::core::DynamicObject> =
        serde_json::from_value(review).unwrap();
    let d = miggate_admission::decide::decide(&review.try_into().unwrap(), &*store.snapshot());
    let message = d.response.result.message;
    assert!(
        message.contains("node n1, which has no usable GPU inventory: store file nodes/n1.yaml cannot be used: it holds the inventory of node `n2`"),
        "{message}"
    );
}

#[test]
fn a_missing_root_is_an_error() {
    let err = FileStore::open("/nonexistent/miggate-store").unwrap_err();
    assert!(err.to_string().contains("/nonexistent/miggate-store"), "{err}");
}

/// The walk reads the root first: a root gone after start is the refresh's error, naming
/// the root, and the last snapshot keeps serving.
#[test]
fn a_root_gone_after_start_keeps_the_last_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    write(&root, "nodes/n1.yaml", NODE);
    let store = FileStore::open(&root).unwrap();
    std::fs::remove_dir_all(&root).unwrap();
    let err = store.refresh().unwrap_err();
    assert!(
        err.to_string()
            .starts_with(&format!("cannot read {}: ", root.display())),
        "{err}"
    );
    assert!(store.snapshot().node("n1").is_some());
}

/// Each way `miggate where` and the webhook once read `nodes/` apart, and the one verdict
/// both give now: the usable nodes, and each problem as `file: error` (an error's start).
#[rstest::rstest]
// The webhook refused a node file captured on another node; `where` ranked it.
#[case::captured_on_another_node(
    &[("nodes/n1.yaml", "apiVersion: miggate.io/v1alpha1\nkind: GpuManifest\nhost: {nodeName: n2}\n")],
    &[],
    &["nodes/n1.yaml: it holds the inventory of node `n2` (host.nodeName), not of `n1`"]
)]
// `where` read a directory named like a file, and failed on it; the webhook skipped it.
#[case::a_directory_named_like_a_file(&[("nodes/d.yaml/x", NODE), ("nodes/n1.yaml", NODE)], &["n1"], &[])]
// The wording of a checkpoint among the nodes was `where`'s own.
#[case::a_checkpoint_among_the_nodes(
    &[("nodes/ck.yaml", "apiVersion: miggate.io/v1alpha1\nkind: GpuCheckpoint\nmetadata: {name: ck}\nspec: {manifest: {}}\n")],
    &[],
    &["nodes/ck.yaml: a GpuCheckpoint where a GpuNode or GpuManifest belongs"]
)]
// The webhook named a duplicate unescaped.
#[case::one_node_in_two_files(
    &[("nodes/n1.json", "{\"apiVersion\": \"miggate.io/v1alpha1\", \"kind\": \"GpuManifest\"}"), ("nodes/n1.yaml", NODE)],
    &["n1"],
    &["nodes/n1.yaml: another file already defines node n1"]
)]
#[case::hidden_and_other_files_are_not_the_stores(
    &[("nodes/..data", "x"), ("nodes/.n2.yaml", NODE), ("nodes/README.md", "x"), ("nodes/n1.yml", NODE)],
    &["n1"],
    &[]
)]
#[case::over_the_limit(
    &[("nodes/big.yaml", &*"#".repeat(MAX_MANIFEST_BYTES + 1))],
    &[],
    &["nodes/big.yaml: 16777217 bytes, over the 16777216-byte limit"]
)]
fn where_and_the_webhook_read_nodes_alike(
    #[case] files: &[(&str, &str)],
    #[case] usable: &[&str],
    #[case] problems: &[&str],
) {
    let dir = tempfile::tempdir().unwrap();
    for (rel, text) in files {
        write(dir.path(), rel, text);
    }
    let shown =
        |p: &[Problem]| -> Vec<String> { p.iter().map(|p| format!("{}: {}", p.file, p.error)).collect() };

    let read = read_node_files(dir.path(), ReadOptions::default()).unwrap();
    let names: Vec<&str> = read.nodes.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, usable, "where");
    assert_eq!(shown(&read.problems), problems, "where");

    let store = FileStore::open(dir.path()).unwrap();
    let snapshot = store.snapshot();
    let mut names: Vec<&str> = snapshot.nodes.keys().map(String::as_str).collect();
    names.sort();
    assert_eq!(names, usable, "webhook");
    assert_eq!(shown(&snapshot.problems), problems, "webhook");
}

/// The webhook skipped a name that is not UTF-8 without a word; `where` listed it. Both list
/// it now.
#[cfg(unix)]
#[test]
fn a_node_file_name_that_is_not_utf8_is_listed_by_both() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "nodes/n1.yaml", NODE);
    std::fs::write(
        dir.path()
            .join("nodes")
            .join(std::ffi::OsStr::from_bytes(b"n\xff.yaml")),
        NODE,
    )
    .unwrap();
    let read = read_node_files(dir.path(), ReadOptions::default()).unwrap();
    let snapshot = FileStore::open(dir.path()).unwrap().snapshot();
    for (who, problems, nodes) in [
        ("where", &read.problems, read.nodes.len()),
        ("webhook", &snapshot.problems, snapshot.node_count()),
    ] {
        assert_eq!(nodes, 1, "{who}");
        assert_eq!(problems.len(), 1, "{who}: {problems:?}");
        assert_eq!(problems[0].error, "file name is not UTF-8", "{who}");
        assert!(problems[0].file.starts_with("nodes/n"), "{who}: {problems:?}");
    }
}

/// The webhook read a file whole once its size had been checked, so a file that grew after
/// the check was read past the limit; the read itself is bounded now.
#[test]
fn a_file_that_grew_after_it_was_listed_is_cut_at_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "nodes/n1.yaml", &"#".repeat(MAX_MANIFEST_BYTES + 1));
    let stamp_when_listed = Some(10);
    let why = read_bounded(&dir.path().join("nodes/n1.yaml"), stamp_when_listed).unwrap_err();
    assert_eq!(why.to_string(), "over the 16777216-byte limit");
}

/// `where` reads nothing but `nodes/`, so a store without one is an error there; the
/// webhook's store requires its root and may start with checkpoints only. A kept
/// difference: each is the safe answer for its reader.
#[test]
fn a_missing_nodes_directory_is_where_s_error_and_the_webhook_s_empty_list() {
    let dir = tempfile::tempdir().unwrap();
    let err = read_node_files(dir.path(), ReadOptions::default()).unwrap_err();
    assert!(err.to_string().contains("nodes"), "{err}");
    assert_eq!(FileStore::open(dir.path()).unwrap().snapshot().node_count(), 0);
}
