//! What the test files of this crate read (`mod support;`): nvidia-smi's recorded outputs under
//! the workspace's `testdata/nvidia-smi/`.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

/// `rel` under `testdata/nvidia-smi/`.
pub fn nvidia_smi_path(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../testdata/nvidia-smi")
        .join(rel)
}

/// The recorded output `rel` under `testdata/nvidia-smi/`; a file that cannot be read fails
/// the test, naming it.
pub fn nvidia_smi(rel: &str) -> String {
    let path = nvidia_smi_path(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
