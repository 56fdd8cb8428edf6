//! What several test files of this crate read (`mod support;`): the recorded files under the
//! workspace's `testdata/`, and the file store made of them.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use miggate_store::file_store::FileStore;

/// `rel` under the workspace's `testdata/`.
pub fn testdata_path(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../testdata")
        .join(rel)
}

/// The recorded file store, `testdata/webhook-store`.
pub fn recorded_store() -> FileStore {
    FileStore::open(testdata_path("webhook-store")).unwrap()
}
