//! Why no device map can be built: the reasons the pairing ([`crate::device_map`]) gives, which a
//! report's warning carries. A leaf of its own, so the warnings name the reasons without
//! depending on the pairing.

use crate::uuid::DeviceUuid;

/// Why no device map can be built; the report's warning
/// ([`Warning::NoDeviceMap`](crate::Warning::NoDeviceMap)) says `no device map: ` and this.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NoDeviceMap {
    /// One side's devices are unknown.
    #[error("devices not recorded on both sides")]
    NotRecorded,
    /// The matcher's work bound was reached.
    #[error(transparent)]
    TooVaried(#[from] TooVariedToPair),
    /// This source device has no target of its class, even among targets without a usable id.
    #[error("no target device of the same class for source device {}", label(uuid.as_ref(), *index))]
    Unpaired {
        /// Its place in the source's visible order.
        index: usize,
        /// Its UUID, where recorded.
        uuid: Option<DeviceUuid>,
    },
    /// A paired device has only a legacy MIG id.
    #[error("device {uuid} has a legacy MIG-GPU-… id, which cuda-checkpoint does not accept")]
    LegacyId {
        /// The legacy id.
        uuid: DeviceUuid,
    },
    /// A paired device has no UUID at all.
    #[error("device #{index} has no UUID")]
    NoUuid {
        /// Its place in its side's visible order.
        index: usize,
    },
}

/// The devices are too varied to pair within the matcher's work bound.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the devices are too varied to pair ({sources} source and {targets} target classes)")]
pub struct TooVariedToPair {
    /// How many classes the source's devices fall in.
    pub(crate) sources: usize,
    /// How many classes the target's devices fall in.
    pub(crate) targets: usize,
}

/// A device as messages name it: its UUID, or `#` and its place where it has none.
fn label(uuid: Option<&DeviceUuid>, i: usize) -> String {
    uuid.map_or_else(|| format!("#{i}"), |u| u.to_string())
}
