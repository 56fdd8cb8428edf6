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

pub mod dns;
pub mod install;
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

/// The Go peer's names (NVIDIA Snapshot, `ai-dynamo/snapshot`): its restore pods' annotations
/// and its resources, which miggate reads but never writes.
pub mod peer {
    /// The peer's API group.
    pub const GROUP: &str = "nvidia.com";
    /// The version of the peer's resources that miggate reads.
    pub const VERSION: &str = "v1alpha1";
    /// `apiVersion` of the peer's resources.
    pub const API_VERSION: &str = "nvidia.com/v1alpha1";
    /// Names the `PodSnapshot` a pod restores, in the pod's namespace.
    pub const RESTORE_FROM: &str = "nvidia.com/restore-from";
    /// Maps the one captured container to destinations: `source=destination,…`.
    pub const RESTORE_CONTAINER_MAP: &str = "nvidia.com/restore-container-map";
    /// Disables the peer's compatibility checks for one restore (Go's `ParseBool`).
    pub const SKIP_COMPAT_CHECK: &str = "nvidia.com/snapshot-skip-compat-check";
    /// The namespaced capture request or restore reference.
    pub const POD_SNAPSHOT: &str = "PodSnapshot";
    /// Its plural, as in the API path.
    pub const POD_SNAPSHOTS: &str = "podsnapshots";
    /// The cluster-scoped artifact of record a `PodSnapshot` is bound to.
    pub const POD_SNAPSHOT_CONTENT: &str = "PodSnapshotContent";
    /// Its plural, as in the API path.
    pub const POD_SNAPSHOT_CONTENTS: &str = "podsnapshotcontents";
}

pub mod nvidia;
pub mod store;
pub mod webhook;

/// The prefix of every extended resource NVIDIA's device plugin advertises (`nvidia.com/gpu`,
/// `nvidia.com/mig-1g.10gb`, …): a container's GPU asks are its resources under it.
pub const NVIDIA_RESOURCE_PREFIX: &str = nvidia::PREFIX;

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
        assert_eq!(peer::API_VERSION, format!("{}/{}", peer::GROUP, peer::VERSION));
    }
}
