//! The crate's one error type: what failed, in words an operator can act on, and the causes
//! it carries, each a value shown in words only when the error is.

mod claim;
mod stored;

pub use claim::NoClaim;
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
