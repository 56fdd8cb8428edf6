//! Unit tests a team writes with the test kit: which restore shapes its checkpoints accept.
//!
//! Run `cargo test -p miggate-compat --features testing --example restore_shapes` for the
//! tests (CI runs them with `cargo test --workspace`), or `cargo run -p miggate-compat
//! --features testing --example restore_shapes` to print the report of one refusal as the
//! failing assertion would show it.
//!
//! The team's service checkpoints an inference pod holding two `3g.40gb` slices of an H100. The
//! tests pin where such a checkpoint may be restored, so a change of node pools or of the pod's
//! GPU request shows up as a failing test with the report's table, not as a failed restore.

use miggate_compat::testing::{nodes, table};
use miggate_compat::{Gpu, GpuManifest, Options, Pod, evaluate};

/// The pod spec the service runs under, as its checkpoint agent records it.
fn inference_pod() -> miggate_compat::PodBuilder {
    Pod::builder()
        .image_digest("sha256:9f2c4be5a0e7f4b1c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0")
        .cpu_limit("8")
        .memory_limit("64Gi")
        .mount("/model-cache")
        .gpu_request("nvidia.com/mig-3g.40gb", 2)
}

/// A checkpoint of the service, taken on `gpu-node-3`.
fn checkpoint() -> Result<GpuManifest, miggate_compat::Error> {
    GpuManifest::builder()
        .node("gpu-node-3")
        .kernel(nodes::KERNEL)
        .cpu_arch("amd64")
        .driver(nodes::DRIVER)
        .gpu(Gpu::h100().cut(["3g.40gb", "3g.40gb"]))
        .pod(inference_pod())
        .build()
}

fn main() -> Result<(), miggate_compat::Error> {
    // Offer mode: could the L4 node take this checkpoint at all?
    let report = evaluate(
        &checkpoint()?,
        &nodes::l4(),
        &Options::mode(miggate_compat::Mode::Offer),
    );
    print!("{}", table(&report));
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use miggate_compat::CheckName;
    use miggate_compat::testing::{
        assert_refused_by, assert_refused_by_with, assert_restorable, assert_restorable_with,
    };

    /// The restore container the scheduler gives on a mixed H100 node: two `3g.40gb` slices.
    fn restore_on_h100_slices() -> GpuManifest {
        GpuManifest::builder()
            .node("gpu-node-7")
            .kernel(nodes::KERNEL)
            .cpu_arch("amd64")
            .driver(nodes::DRIVER)
            .gpu(Gpu::h100().cut(["3g.40gb", "3g.40gb"]))
            .pod(inference_pod())
            .build()
            .unwrap()
    }

    #[test]
    fn restores_into_two_3g40gb_slices_with_a_device_map() {
        let report = assert_restorable(&checkpoint().unwrap(), &restore_on_h100_slices());
        let map = report.device_map.unwrap();
        assert_eq!(map.split(',').count(), 2, "{map}");
    }

    #[test]
    fn the_mixed_h100_node_offers_the_slices() {
        assert_restorable_with(
            &checkpoint().unwrap(),
            &nodes::h100_mixed(),
            &Options::mode(miggate_compat::Mode::Offer),
        );
    }

    #[test]
    fn whole_h200s_are_refused() {
        assert_refused_by_with(
            &checkpoint().unwrap(),
            &nodes::h200_x8(),
            CheckName::GPU_MODEL,
            &Options::mode(miggate_compat::Mode::Offer),
        );
    }

    #[test]
    fn a_smaller_memory_limit_is_refused() {
        let mut target = restore_on_h100_slices();
        target.pod = Some(inference_pod().memory_limit("16Gi").build().unwrap());
        assert_refused_by(&checkpoint().unwrap(), &target, CheckName::MEMORY_LIMIT);
    }

    #[test]
    fn a_missing_mount_is_refused() {
        let mut pod = inference_pod().build().unwrap();
        pod.mounts = Some(vec![]);
        let mut target = restore_on_h100_slices();
        target.pod = Some(pod);
        assert_refused_by(&checkpoint().unwrap(), &target, CheckName::MOUNT);
    }
}
