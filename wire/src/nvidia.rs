//! NVIDIA's node vocabulary, as the GPU Operator's components write it on Nodes: GPU Feature
//! Discovery's labels, mig-manager's, and the device plugin's extended resources. Every crate
//! that reads or writes one of these names takes it from here.

/// The prefix of every label and extended resource below.
pub const PREFIX: &str = "nvidia.com/";

/// The device plugin's whole-GPU resource (a slice under the single MIG strategy).
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";
/// The prefix of the device plugin's per-profile MIG resources (`nvidia.com/mig-1g.10gb`,
/// mixed strategy).
pub const MIG_RESOURCE_PREFIX: &str = "nvidia.com/mig-";

/// The GPU Operator's (Node Feature Discovery's) mark of a node with NVIDIA GPUs: `"true"`.
pub const GPU_PRESENT: &str = "nvidia.com/gpu.present";
/// GFD's product label (`NVIDIA-H100-80GB-HBM3`, or `<model>-MIG-<profile>` under the single
/// strategy).
pub const GPU_PRODUCT: &str = "nvidia.com/gpu.product";
/// GFD's count of GPUs (of slices under the single strategy).
pub const GPU_COUNT: &str = "nvidia.com/gpu.count";
/// GFD's label of the device plugin's MIG strategy: `none`, `single` or `mixed`.
pub const MIG_STRATEGY: &str = "nvidia.com/mig.strategy";
/// GFD's label of whether the GPUs can run MIG.
pub const MIG_CAPABLE: &str = "nvidia.com/mig.capable";
/// mig-manager's wanted layout (`all-disabled`, `all-1g.10gb`, …).
pub const MIG_CONFIG: &str = "nvidia.com/mig.config";
/// mig-manager's label for where it stands: `success`, `pending`, `rebooting`, `failed`.
pub const MIG_CONFIG_STATE: &str = "nvidia.com/mig.config.state";
/// GFD's driver-major labels, newer and older: a node carries one of them.
pub const DRIVER_MAJOR_LABELS: [&str; 2] = [
    "nvidia.com/cuda.driver-version.major",
    "nvidia.com/cuda.driver.major",
];
/// The taint GPU nodes commonly carry, which the publisher tolerates.
pub const GPU_TAINT: &str = GPU_RESOURCE;

/// The three values of [`MIG_STRATEGY`], in its order: the one reader of the label is
/// `miggate_compat::MigStrategy`'s `FromStr`.
pub const MIG_STRATEGIES: [&str; 3] = ["none", "single", "mixed"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_under_the_prefix() {
        for name in [
            GPU_RESOURCE,
            MIG_RESOURCE_PREFIX,
            GPU_PRESENT,
            GPU_PRODUCT,
            GPU_COUNT,
            MIG_STRATEGY,
            MIG_CAPABLE,
            MIG_CONFIG,
            MIG_CONFIG_STATE,
            DRIVER_MAJOR_LABELS[0],
            DRIVER_MAJOR_LABELS[1],
        ] {
            assert!(name.starts_with(PREFIX), "{name}");
        }
    }
}
