//! What every crate's tests share, one home for each: the recorded files under the
//! workspace's `testdata/` (nvidia-smi outputs with their provenance, AdmissionReviews, the
//! webhook store, the Go peer's artifacts). The fixtures that are values live with their types:
//! an H100 is `miggate_compat::H100_NAME` and `Gpu::h100()`, a manifest is built with
//! `miggate_compat::GpuManifest::builder()`.
//!
//! It depends on nothing, so any crate's tests may use it whatever their layer.

#![allow(clippy::panic)]

use std::path::PathBuf;

/// `rel` under the workspace's `testdata/`.
pub fn testdata_path(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../testdata")
        .join(rel)
}

/// The text of `rel` under `testdata/`; a file that cannot be read fails the test, naming it.
pub fn testdata(rel: &str) -> String {
    let path = testdata_path(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recorded_files_are_found() {
        assert!(testdata_path("webhook-store").is_dir());
        assert!(testdata("admission/binding-create.json").contains("AdmissionReview"));
    }
}
