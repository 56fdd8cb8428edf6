//! The contracts miggate's processes share, one home each.
//!
//! A name spelled in two crates drifts: the webhook reading `miggate.io/restore-from` while the
//! steering webhook writes another spelling would fail only on a cluster. Everything here is a
//! plain constant or an I/O-free type, so every crate, down to `compat`, can import it.

/// The API group of miggate's resources.
pub const GROUP: &str = "miggate.io";
/// The version of miggate's resources and documents.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` of miggate's resources and documents (manifests, layouts).
pub const API_VERSION: &str = "miggate.io/v1alpha1";

pub mod recovery;

/// Annotations a restore pod carries or is given.
pub mod annotations {
    /// Names the `GpuCheckpoint` a pod restores (same namespace).
    pub const RESTORE_FROM: &str = "miggate.io/restore-from";
    /// Waives checks: `all`, or check names separated by commas.
    pub const SKIP_CHECKS: &str = "miggate.io/skip-checks";
    /// Asks the steering webhook to place the pod (`"true"`).
    pub const STEER: &str = "miggate.io/steer";
    /// What the steering webhook added, for a person reading the pod.
    pub const STEERED: &str = "miggate.io/steered";
    /// cuda-checkpoint's device map for a DRA restore pod, written at its binding from its
    /// claims' allocation: `SOURCE=TARGET` pairs of device UUIDs separated by commas (the form
    /// of cuda-checkpoint's `--device-map`), empty when every device maps to itself.
    pub const DEVICE_MAP: &str = "miggate.io/device-map";
}

pub mod store;

/// The NVIDIA DRA driver's names.
pub mod dra {
    /// The driver name in `ResourceSlice`s and the attributes' domain.
    pub const DRIVER: &str = "gpu.nvidia.com";
    /// The device class of whole GPUs: the driver installs it under its own name.
    pub const GPU_CLASS: &str = DRIVER;
    /// The device class of MIG slices.
    pub const MIG_CLASS: &str = "mig.nvidia.com";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_version_is_group_and_version() {
        assert_eq!(API_VERSION, format!("{GROUP}/{VERSION}"));
    }
}
