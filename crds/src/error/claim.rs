//! Why a checkpoint cannot be written as a DRA claim.

use miggate_compat::escape::escape_within;

/// Why a checkpoint cannot be written as a DRA claim ([`Error::Claim`]).
///
/// [`Error::Claim`]: super::Error::Claim
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NoClaim {
    /// The checkpoint has no `nvidia` section.
    #[error("the checkpoint records no nvidia section")]
    NoNvidia,
    /// The checkpoint's devices are unknown.
    #[error("the checkpoint does not record its devices")]
    DevicesUnrecorded,
    /// The checkpoint used no GPU.
    #[error("the checkpoint has no GPU device: it needs no claim")]
    NoDevice,
    /// A device without a product name.
    #[error("device {index} has no product name")]
    NoProduct {
        /// The device's place in the checkpoint's list, from 0.
        index: usize,
    },
    /// A MIG slice whose profile is not recorded.
    #[error("device {index} is a MIG slice of unrecorded profile")]
    UnknownProfile {
        /// The device's place in the checkpoint's list, from 0.
        index: usize,
    },
    /// A device of unknown kind.
    #[error("device {index} is neither a whole GPU nor a MIG slice")]
    UnknownKind {
        /// The device's place in the checkpoint's list, from 0.
        index: usize,
    },
    /// A template name Kubernetes would refuse.
    #[error(
        "`{}` is not a name Kubernetes gives an object (lowercase letters, digits, `-` and `.`, at most 253)",
        name.escape_debug()
    )]
    BadName {
        /// The name asked for.
        name: String,
    },
    /// More devices of one class than a request's count holds.
    #[error("{count} devices are more than a claim can ask for")]
    TooMany {
        /// The devices of the class.
        count: usize,
    },
    /// A version no selector can compare.
    #[error(
        "the {what} version `{}` is not numbers separated by dots, so no selector can compare it",
        version.escape_debug()
    )]
    Version {
        /// Which version (`driver`, `CUDA driver`).
        what: &'static str,
        /// The version recorded.
        version: String,
    },
    /// A text a CEL selector cannot safely hold.
    #[error(
        "`{}` cannot be put in a selector (control characters, or over {limit} bytes)",
        escape_within(text, 64)
    )]
    Unselectable {
        /// The text.
        text: String,
        /// The longest text a selector holds.
        limit: usize,
    },
}
