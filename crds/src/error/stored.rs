//! Why a stored object is not one of miggate's.

use miggate_compat::API_VERSION;
use miggate_compat::escape::escape;

/// Why a stored object is not one miggate reads ([`Error::Stored`]).
///
/// [`Error::Stored`]: super::Error::Stored
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NotStored {
    /// A `List` of other than one object.
    #[error("a List of {count} objects: name one (`kubectl get gpucheckpoint NAME -o yaml`)")]
    ListOf {
        /// How many it holds.
        count: usize,
    },
    /// A `List` holding another kind.
    #[error("the List holds a `{}`, not a GpuCheckpoint or GpuNode", escape(kind))]
    OtherKind {
        /// The kind it holds.
        kind: String,
    },
    /// An object of another API version.
    #[error(
        "apiVersion is `{}`, expected `{API_VERSION}` for a {}",
        escape(api_version),
        escape(kind)
    )]
    OtherVersion {
        /// Its `apiVersion`.
        api_version: String,
        /// Its `kind`.
        kind: String,
    },
}
