//! `miggate crds` as a user runs it: the real binary prints the checked-in CRDs, ready for
//! `kubectl apply -f -`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Command;
use support::workspace_root;

#[test]
fn crds_prints_every_checked_in_crd_as_one_stream() {
    let out = Command::new(env!("CARGO_BIN_EXE_miggate"))
        .arg("crds")
        .current_dir(workspace_root())
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();

    // Exactly the checked-in files, in order, separated by `---`.
    let files: Vec<String> = ["miggate.io_gpucheckpoints.yaml", "miggate.io_gpunodes.yaml"]
        .iter()
        .map(|f| std::fs::read_to_string(workspace_root().join("crds").join(f)).unwrap())
        .collect();
    assert_eq!(stdout, files.join("---\n"));
    assert_eq!(stdout, miggate_crds::crds_yaml().unwrap());

    // Two CRD documents, the ones a cluster needs.
    let docs: Vec<miggate_crds::CustomResourceDefinition> = serde_saphyr::from_multiple(&stdout).unwrap();
    let names: Vec<&str> = docs.iter().map(|d| d.metadata.name.as_deref().unwrap()).collect();
    assert_eq!(names, ["gpucheckpoints.miggate.io", "gpunodes.miggate.io"]);
    assert_eq!(docs, miggate_crds::crds());
}
