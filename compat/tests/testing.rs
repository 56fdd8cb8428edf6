//! The test kit's failure messages, pinned: they are what a team reads when its restore-shape
//! test fails, so a change to them is a change to review.
#![allow(clippy::unwrap_used, reason = "tests")]

use std::panic::{AssertUnwindSafe, catch_unwind};

use miggate_compat::testing::{assert_refused_by, assert_restorable, nodes};
use miggate_compat::{CheckName, Gpu, GpuManifest, Pod};

/// The panic message of `f`, which must panic.
fn failure(f: impl FnOnce()) -> String {
    let payload = catch_unwind(AssertUnwindSafe(f)).unwrap_err();
    match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(p) => p.downcast::<&str>().map(|s| s.to_string()).unwrap(),
    }
}

fn checkpoint_3g40gb_x2() -> GpuManifest {
    GpuManifest::builder()
        .node("gpu-node-3")
        .kernel(nodes::KERNEL)
        .cpu_arch("amd64")
        .driver(nodes::DRIVER)
        .gpu(Gpu::h100().cut(["3g.40gb", "3g.40gb"]))
        .pod(
            Pod::builder()
                .memory_limit("64Gi")
                .gpu_request("nvidia.com/mig-3g.40gb", 2),
        )
        .build()
        .unwrap()
}

#[test]
fn assert_restorable_fails_with_the_table() {
    let restore = GpuManifest::builder()
        .node("gpu-node-9")
        .kernel(nodes::KERNEL)
        .cpu_arch("amd64")
        .driver(nodes::DRIVER)
        .gpus(2, Gpu::h100())
        .pod(
            Pod::builder()
                .memory_limit("16Gi")
                .gpu_request("nvidia.com/gpu", 2),
        )
        .build()
        .unwrap();
    let message = failure(|| {
        assert_restorable(&checkpoint_3g40gb_x2(), &restore);
    });
    insta::assert_snapshot!(message);
}

#[test]
fn assert_refused_by_fails_with_the_table_when_another_check_refused() {
    let message = failure(|| {
        assert_refused_by(
            &checkpoint_3g40gb_x2(),
            &nodes::h200_x8(),
            CheckName::DRIVER_VERSION,
        );
    });
    insta::assert_snapshot!(message);
}

#[test]
fn assert_refused_by_fails_when_the_restore_is_accepted() {
    let message = failure(|| {
        assert_refused_by(
            &nodes::a100_legacy(),
            &nodes::a100_legacy(),
            CheckName::MIG_PROFILE,
        );
    });
    insta::assert_snapshot!(message);
}

#[test]
fn fixture_nodes_are_pinned() {
    insta::assert_snapshot!("h100_mixed", nodes::h100_mixed().to_yaml().unwrap());
    insta::assert_snapshot!("h200_x8", nodes::h200_x8().to_yaml().unwrap());
    insta::assert_snapshot!("a100_legacy", nodes::a100_legacy().to_yaml().unwrap());
    insta::assert_snapshot!("l4", nodes::l4().to_yaml().unwrap());
}
