//! What several test files of this crate read (`mod support;`): the recorded files under the
//! workspace's `testdata/`, and gpu-node-7 as each inventory source describes it
//! ([`gpu_node_7`]).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[allow(unused_imports)] // Not every test binary that includes this module reads testdata.
pub use miggate_testkit::{testdata, testdata_path};

pub mod gpu_node_7;
