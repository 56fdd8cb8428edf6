//! The kubectl plugin's krew manifest (`krew/miggate.yaml`, written by `krew/release.sh`) is for
//! this version, names the archive of the binary as `kubectl-miggate` with the license, and
//! carries a checksum: a release that bumps the version without rewriting it fails here.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use serde_json::Value;

#[test]
fn the_krew_manifest_is_this_version_s() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../krew/miggate.yaml");
    let manifest: Value = serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let version = format!("v{}", env!("CARGO_PKG_VERSION"));
    assert_eq!(manifest["kind"], "Plugin");
    assert_eq!(manifest["metadata"]["name"], "miggate");
    assert_eq!(manifest["spec"]["version"], version.as_str());
    let platforms = manifest["spec"]["platforms"].as_array().unwrap();
    assert!(!platforms.is_empty());
    for p in platforms {
        let os = p["selector"]["matchLabels"]["os"].as_str().unwrap();
        let arch = p["selector"]["matchLabels"]["arch"].as_str().unwrap();
        let uri = p["uri"].as_str().unwrap();
        assert!(
            uri.ends_with(&format!(
                "/releases/download/{version}/kubectl-miggate_{version}_{os}_{arch}.tar.gz"
            )),
            "{uri}"
        );
        let sha = p["sha256"].as_str().unwrap();
        assert!(
            sha.len() == 64
                && sha
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
            "{sha}"
        );
        assert_eq!(p["bin"], "kubectl-miggate");
        let files: Vec<&str> = p["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["from"].as_str().unwrap())
            .collect();
        assert_eq!(files, ["kubectl-miggate", "LICENSE"]);
    }
}
