//! What several test files of this crate read (`mod support;`): the recorded files under the
//! workspace's `testdata/`, and the file store made of them.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use miggate_compat::GpuManifest;
use miggate_store::file_store::FileStore;

/// `rel` under the workspace's `testdata/`.
pub fn testdata_path(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../testdata")
        .join(rel)
}

/// The text of `rel` under `testdata/`; a file that cannot be read fails the test, naming it.
pub fn testdata(rel: &str) -> String {
    let path = testdata_path(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The manifest of the stored object (a manifest, a `GpuCheckpoint` or a `GpuNode`) in `rel`.
pub fn manifest(rel: &str) -> GpuManifest {
    miggate_crds::read_stored(&testdata(rel)).unwrap().manifest
}

/// The recorded file store, `testdata/webhook-store`.
pub fn recorded_store() -> FileStore {
    FileStore::open(testdata_path("webhook-store")).unwrap()
}
