//! What several test files of this crate read (`mod support;`): the recorded files under the
//! workspace's `testdata/`, and the file store made of them.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use miggate_compat::GpuManifest;
use miggate_store::file_store::FileStore;
#[allow(unused_imports)] // Not every test binary that includes this module reads testdata.
pub use miggate_testkit::{testdata, testdata_path};

/// The manifest of the stored object (a manifest, a `GpuCheckpoint` or a `GpuNode`) in `rel`.
pub fn manifest(rel: &str) -> GpuManifest {
    miggate_crds::read_stored(&testdata(rel)).unwrap().manifest
}

/// The recorded file store, `testdata/webhook-store`.
pub fn recorded_store() -> FileStore {
    FileStore::open(testdata_path("webhook-store")).unwrap()
}

/// The Kubernetes store against kube-fake, for `kube_store*.rs`.
pub mod kube;
