//! The crate's one error type: what failed, in words an operator can act on, and the causes
//! it carries, each a value shown in words only when the error is.

mod claim;
mod inventory;
mod stored;

use miggate_compat::escape::escape_within;

pub use claim::NoClaim;
pub use inventory::{
    AttributeProblem, CounterSetProblem, DeviceProblem, GpuNodeProblem, LabelProblem, PoolProblem, Unmatched,
    Unreadable,
};
pub use stored::NotStored;

/// Why building a resource or writing the CRDs failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A `GpuCheckpoint`'s container name that Kubernetes would never give a container, so no
    /// restore container could ever match it.
    #[error(
        "container name `{}` is not a DNS-1123 label (lowercase letters, digits and `-`, starting and ending with a letter or digit, at most 63 characters)",
        miggate_compat::escape::escape(.0)
    )]
    ContainerName(String),
    /// A `Recovered` condition's reason that this version does not know (a newer writer's, or
    /// a hand-written status).
    #[error(
        "unknown Recovered reason `{}`; known: Pending, Recovering, Ready, Failed",
        miggate_compat::escape::escape(.0)
    )]
    UnknownReason(String),
    /// A node inventory source is present but cannot be read: a pool caught mid-update, a
    /// malformed attribute, a MIG layout in flux. The next source is tried instead.
    #[error("{origin} inventory of node `{}` cannot be read: {why}", miggate_compat::escape::escape(.node))]
    Inventory {
        /// Which source (`GpuNode`, `ResourceSlice`, `GFD labels`).
        origin: &'static str,
        /// The node it describes.
        node: String,
        /// Why, naming the object and field where there is one (boxed: every `Result` of this
        /// crate would carry its size).
        why: Box<Unreadable>,
    },
    /// A pod's DRA allocation that cannot be matched to the node's devices: a device of
    /// another pool, one the slices no longer list, one named twice.
    #[error("the DRA allocation on node `{}` cannot be matched to its devices: {why}", miggate_compat::escape::escape(.node))]
    Allocation {
        /// The node the pod is bound to.
        node: String,
        /// Why, naming the device (boxed, as [`Error::Inventory`]'s).
        why: Box<Unmatched>,
    },
    /// A checkpoint that cannot be written as a DRA claim: devices not recorded, a device of
    /// unknown kind or shape, a text no selector can hold.
    #[error("cannot write a claim for the checkpoint: {0}")]
    Claim(NoClaim),
    /// A stored object's manifest cannot be read: the manifest reader's error, with its field
    /// path and position.
    #[error(transparent)]
    Manifest(#[from] miggate_compat::Error),
    /// A stored object that is not one of miggate's (a `List` of several, another kind or
    /// version).
    #[error("{why}")]
    Stored {
        /// What is wrong.
        why: NotStored,
    },
    /// The CRDs could not be written as YAML.
    #[error("cannot write the CRDs as YAML: {0}")]
    Yaml(#[from] serde_saphyr::SerializeError),
}

// By hand rather than `#[from]`, which would also make the cause the error's source, and a
// reader that prints the chain would show it twice.
impl From<NoClaim> for Error {
    fn from(why: NoClaim) -> Self {
        Error::Claim(why)
    }
}

/// Outside text quoted in a note or error: escaped and cut.
pub(crate) fn quote(text: &str) -> String {
    escape_within(text, 96).into_owned()
}
